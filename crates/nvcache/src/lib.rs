//! A cache-line simulator of non-volatile last-level caches (docs/nvcache.md): an L1 data
//! cache in front of an n-way set-associative PRAM LLC, with data values in every line so
//! that write traffic is counted in bits programmed — differential write (DW),
//! read-before-write (RBW), data inverting per n-bit unit (DI(n)), the hybrid PRAM + STT-RAM
//! cache (HC) and wear levelling — and the energy, lifetime and area those bits cost.

pub mod cell_wear;
pub mod cost;
pub mod l1;
pub mod line;
pub mod llc;
pub mod sim;

pub use line::Encoding;
pub use llc::{Hybrid, Llc, LlcConfig, Memory, MissCount, Traffic, WearLevelling};
pub use sim::{
    run_trace, run_trace_keeping, Hierarchy, Report, SimConfig, MAX_KEPT_ROWS, MAX_PASSES,
};
