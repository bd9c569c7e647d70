//! Device models — the timing face of each device — and the catalogue of real devices.
//! [`fault`] injects faults (EIO on a range, a slow device, a missing one) into any model,
//! and [`queue_order`] serves any model's queue in one of DiskSim's block-number orders.
//!
//! A catalogue entry (`catalogue/NAME.toml`) has a `[timing]` table whose `model` key picks
//! the model below, and a `[power]` table (a [`wattio_core::power::PowerDef`]). Every number
//! carries its source.
//!
//! | `model`          | module         | what it models |
//! |------------------|----------------|----------------|
//! | `hdd-parametric` | [`hdd`]        | average seek, rotation, media rate: the classic analytical disk |
//! | `hdd-mechanical` | [`mechanical`] | DiskSim-grade disk: zones, skews, seek table, cache, queue |
//! | `flash`          | [`flash`]      | a simple flash device: per-page latencies and bandwidth |
//! | `ssd`            | [`ssd`]        | channels, ways, dies, page-mapped FTL with GC |
//!
//! Main memory is modelled per DRAM rank in [`dram`] (`catalogue/dram/NAME.toml`: memspec
//! currents or published per-rank watts), driven by the memory simulator.

pub mod catalogue;
pub mod disksim;
pub mod dram;
pub mod fault;
pub mod flash;
mod fuzz_input;
pub mod hdd;
pub mod mechanical;
mod params;
pub mod queue_order;
pub mod ssd;

pub use catalogue::{Catalogue, DeviceSpec};
