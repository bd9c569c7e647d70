//! Every committed fuzz seed through the fuzz target's entry function, so CI exercises the
//! corpus without fuzzing.

use std::path::Path;
use wattio_devices::ssd::{fuzz_timing_toml, Ssd, SsdParams};

#[test]
fn every_corpus_file_runs_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/ssd_timing");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        fuzz_timing_toml(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n >= 8, "corpus in {}", dir.display());
}

#[test]
fn corpus_seeds_build_or_fail_as_intended() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/ssd_timing");
    let parse = |name: &str| -> Result<SsdParams, String> {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let t: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
        SsdParams::from_toml(&t)
    };
    for ok in [
        "small_ok.toml",
        "buffered_energy.toml",
        "tight_spare.toml",
        "odd_geometry.toml",
    ] {
        let p = parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        Ssd::new(p).check_invariants().unwrap();
    }
    let e = parse("too_little_spare.toml").unwrap_err();
    assert!(e.starts_with("timing.capacity_bytes:"), "{e}");
    let e = parse("bad_values.toml").unwrap_err();
    assert!(
        e.starts_with("timing.channels: expected a whole number"),
        "{e}"
    );
    let e = parse("huge_geometry.toml").unwrap_err();
    assert!(e.contains("do not fit the u32 mapping"), "{e}");
}
