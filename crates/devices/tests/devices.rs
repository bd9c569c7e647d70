//! The devices crate's integration tests, one module per file: one test binary to
//! build and link instead of one per file, and its tests share the cores (run one
//! file's with `cargo test --release -p wattio-devices --test devices <file>::`).

mod catalogue_entries;
mod catalogue_robustness;
mod catalogue_runtime;
mod flash_fuzz_corpus;
mod mechanical_fuzz_corpus;
mod mechanical_geometry;
mod mechanical_validation;
mod queue_order;
mod ssd_analytical;
mod ssd_catalogue;
mod ssd_fuzz_corpus;
