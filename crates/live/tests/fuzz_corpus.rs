//! Every committed fuzz seed goes through the fuzz entry point, and a bounded mutational
//! pass (stable Rust, deterministic) feeds it mutants of the seeds, so CI exercises the
//! state machine beyond the corpus without cargo-fuzz; a few seeds have hand-counted event
//! totals. More mutants: `WATTIO_FUZZ_MUTANTS=1000000 cargo test --release -p wattio-live
//! --test fuzz_corpus`.

use std::path::Path;
use wattio_core::testing::mutate;

#[test]
fn every_corpus_file_runs_through_the_server_state_machine() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/nbd_server");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let events = wattio_live::proto::fuzz_server(&data);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        // Transmission + READ, WRITE, FLUSH, TRIM, WRITE_ZEROES + DISC.
        let expected = match name.as_str() {
            "go_structured_rw" => Some(7),
            // Transmission + READ + WRITE (EXPORT_NAME path, simple replies).
            "export_name_simple" => Some(3),
            // Close after NBD_OPT_ABORT.
            "list_info_abort" => Some(1),
            // Transmission, misaligned read, refused write (read-only), out-of-range read.
            "aligned_export_errors" => Some(4),
            "bad_client_flags" | "nonfixed_other_option" => Some(1),
            // Transmission + Close on the zeroed (magic-less) request.
            "bad_request_magic" => Some(2),
            // Transmission + ENOSPC rejection + the read after the skipped payload.
            "refused_write_payload" => Some(3),
            // Transmission + Close on the 4 GiB WRITE header; Close on the 4 GiB option.
            "huge_write_header" => Some(2),
            "huge_option_header" => Some(1),
            _ => None,
        };
        if let Some(x) = expected {
            assert_eq!(events, x, "{name}");
        }
        n += 1;
    }
    assert!(n >= 10, "corpus has {n} files");
}

#[test]
fn mutants_of_the_corpus_never_panic_the_server_state_machine() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/nbd_server");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    let n: usize = std::env::var("WATTIO_FUZZ_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut rng = 0x2545_F491_4F6C_DD1D_u64;
    let mut events = 0;
    for i in 0..n {
        let (a, b) = (&seeds[i % seeds.len()], &seeds[(i * 7 + 3) % seeds.len()]);
        events += wattio_live::proto::fuzz_server(&mutate(a, b, &mut rng));
    }
    // The mutants still reach transmission and commands, not just early closes.
    assert!(events > n, "{events} events from {n} mutants");
}
