//! Runs every committed fuzz seed through the fuzz targets' entry functions, so CI
//! exercises the corpora without a fuzzer (crates/capture/fuzz; `FUZZ_CRATES=capture
//! scripts/fuzz-ci.sh` fuzzes them).

use std::path::Path;

/// A fuzz target's entry function.
type Entry = fn(&[u8]);

#[test]
fn every_fuzz_seed_passes_the_parser_invariants() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let targets: [(&str, Entry); 2] = [
        (
            "blockevents",
            wattio_capture::blockevents::fuzz_block_events,
        ),
        ("strace", wattio_capture::strace::fuzz_strace),
    ];
    let mut seeds = 0;
    for (t, entry) in targets {
        let dir = root.join(t);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            entry(&std::fs::read(&f).unwrap());
            seeds += 1;
        }
    }
    assert!(seeds >= 4, "{seeds} seeds");
}
