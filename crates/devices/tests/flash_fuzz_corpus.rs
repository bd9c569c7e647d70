//! Every committed seed of the flash model's fuzz target through its entry function, so
//! CI exercises the corpus without fuzzing; and what each seed is there for.

use std::path::Path;
use wattio_devices::flash::{fuzz_timing_toml, Flash};

fn dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/flash_timing")
}

#[test]
fn every_flash_corpus_file_runs_clean() {
    let mut n = 0;
    for e in std::fs::read_dir(dir()).unwrap() {
        let path = e.unwrap().path();
        fuzz_timing_toml(&std::fs::read(&path).unwrap());
        n += 1;
    }
    assert!(n >= 7, "corpus in {}", dir().display());
}

#[test]
fn flash_corpus_seeds_build_or_fail_as_intended() {
    let parse = |name: &str| -> Result<Flash, String> {
        let text = std::fs::read_to_string(dir().join(name)).unwrap();
        let t: toml::Table = toml::from_str(&text).map_err(|e| e.to_string())?;
        Flash::from_toml(&t)
    };
    for ok in [
        "cf_card.toml",
        "one_log_small_blocks.toml",
        "many_logs.toml",
        "no_ftl.toml",
    ] {
        let f = parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        f.check_invariants().unwrap();
    }
    let e = parse("ftl_key_without_ftl.toml").unwrap_err();
    assert!(
        e.starts_with("timing.ftl_log_blocks: only used with"),
        "{e}"
    );
    let e = parse("ftl_missing_keys.toml").unwrap_err();
    assert!(e.starts_with("timing.ftl_pages_per_block: missing"), "{e}");
    assert!(parse("broken.toml").is_err());
}
