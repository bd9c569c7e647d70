//! The engine crate's integration tests, one module per file: one test binary to
//! build and link instead of one per file, and its tests share the cores (run one
//! file's with `cargo test --release -p wattio-engine --test engine <file>::`).

mod absent;
mod common;
mod conservation;
mod delay_hiding;
mod exces_example;
mod fs2_bad_sectors;
mod fs2_crash;
mod fuzz_corpus;
mod hand_computed;
mod launch;
mod metadata;
mod observer;
mod paraid_crash;
mod probe;
mod trace_input;
mod unload;
mod validation;
