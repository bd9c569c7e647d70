//! The metadata-log fuzz target's committed seeds (`fuzz/corpus/metadata_logs`: real
//! checkpoints and records of RAID-5's, PARAID's, EXCES's and FS2's logs, written by `fuzz::seeds`) read
//! back, and a bounded, deterministic mutational pass feeds the decoders mutants of them on
//! stable Rust, so every `cargo test` exercises them beyond the corpus. More mutants:
//! `WATTIO_FUZZ_MUTANTS=1000000 cargo test --release -p wattio-functions --test fuzz_corpus`.

use std::path::Path;
use wattio_core::testing::mutate;
use wattio_functions::fuzz::metadata_logs;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/metadata_logs");
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

/// The `seed_*` files read back; the `crash_*` files, inputs that once broke a decoder, are
/// refused: `crash_paraid_bitmap_padding` (found by libFuzzer on 2026-12-02) is a PARAID
/// checkpoint whose bitmap marks a chunk in the last byte's unused bits, which read back
/// as a chunk of a disk the array does not have.
#[test]
fn every_seed_is_a_log_that_reads_back_and_every_crasher_is_refused() {
    let seeds = seeds();
    assert!(seeds.len() >= 5, "{} seeds", seeds.len());
    for (name, data) in &seeds {
        let crasher = name.starts_with("crash_");
        assert_eq!(metadata_logs(data), !crasher, "{name}");
    }
}

#[test]
fn mutants_of_the_seeds_never_panic_the_log_decoders() {
    let seeds: Vec<Vec<u8>> = seeds().into_iter().map(|s| s.1).collect();
    let n: usize = std::env::var("WATTIO_FUZZ_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
    let mut read_back = 0;
    for i in 0..n {
        let (a, b) = (&seeds[i % seeds.len()], &seeds[(i * 7 + 3) % seeds.len()]);
        read_back += usize::from(metadata_logs(&mutate(a, b, &mut rng)));
    }
    // Both answers occur: mutants that still decode reach the round trip, the others are
    // refused with an error.
    assert!(
        read_back > n / 50 && read_back < n,
        "{read_back} of {n} read back"
    );
}
