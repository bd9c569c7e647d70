//! The formats crate's integration tests, one module per file: one test binary to
//! build and link instead of one per file, and its tests share the cores (run one
//! file's with `cargo test --release -p wattio-formats --test formats <file>::`).

mod blktrace;
mod columnar;
mod compressed;
mod delimited;
mod fuzz_corpus;
mod memtrace;
mod readers;
mod roundtrip;
mod srt;
