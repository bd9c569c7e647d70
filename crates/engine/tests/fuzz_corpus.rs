//! Every committed fuzz seed goes through the fuzz entry point (no panic), and the valid
//! ones really run: a seed named `bad-…` or `unknown-…` must be refused, every other one
//! must run (a seed that stops being valid would stop exploring what it was added for).

use std::path::Path;

#[test]
fn config_corpus_runs_without_panic() {
    corpus("config", wattio_engine::fuzz::config, 20);
}

#[test]
fn memory_config_corpus_runs_without_panic() {
    corpus("memory_config", wattio_engine::fuzz::memory_config, 15);
}

fn corpus(target: &str, entry: fn(&[u8]) -> Result<(), String>, at_least: usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut n = 0;
    let mut wrong = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let got = entry(&std::fs::read(&p).unwrap());
        let refused = name.starts_with("bad-") || name.starts_with("unknown-");
        match (&got, refused) {
            (Ok(()), true) => wrong.push(format!("{name}: ran, expected a refusal")),
            (Err(e), false) => wrong.push(format!("{name}: {e}")),
            _ => {}
        }
        n += 1;
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(n >= at_least, "{target} corpus too small: {n}");
}
