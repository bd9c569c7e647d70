//! Every committed fuzz seed goes through the fuzz entry point (no panic), and the valid
//! ones really run.

use std::path::Path;

#[test]
fn config_corpus_runs_without_panic() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/config");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        wattio_engine::fuzz::config(&std::fs::read(&p).unwrap());
        n += 1;
    }
    assert!(n >= 10, "corpus too small: {n}");
}
