//! Runs every committed fuzz seed through the fuzz targets' entry function, so CI exercises
//! the corpus without a fuzzer.

use std::path::Path;

#[test]
fn every_fuzz_seed_passes_the_reader_invariants() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let targets = [
        "msr",
        "fiu",
        "blkparse",
        "spc",
        "alibaba",
        "tencent",
        "disksim",
        "disksim_validate",
        "fio",
    ];
    let mut seeds = 0;
    for t in targets {
        let dir = root.join(t);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds for {t}");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            wattio_formats::fuzz_read(&t.replace('_', "-"), &data);
            seeds += 1;
        }
    }
    assert!(seeds >= 18);
}
