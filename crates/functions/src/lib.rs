//! Built-in intelligence functions. Each is a sans-I/O [`wattio_core::Function`]: it runs
//! unchanged under the simulated and the live executor, and is built from its `[[function]]`
//! table through the [`registry`].
//!
//! | kind | module | mechanism | source |
//! |---|---|---|---|
//! | `spindown` | [`power::idle`] | spin-down after idleness: fixed, adaptive, share, oracle | Douglis et al. 1995; Helmbold et al. 1996 |
//! | `exces` | [`cache::exces`] | external flash cache planned by page popularity (EXCES) | Useche et al., HPCA 2008 |
//! | `python` | [`external::python`] | a function written in Python | wattio |
//! | `geometry-probe` | [`geometry::probe`] | track boundaries by timing writes | Huang 2006, ch. 6 |
//! | `iolab-prefetch` | [`prefetch::launch`] | application-launch prefetcher: learn, detect, pause, fetch in LBA order | IOLab case study 1 |
//! | `fast-prefetch` | [`prefetch::launch`] | two-phase SSD launch prefetcher, queue kept full | Joo et al., FAST 2011 |
//! | `raid` | [`raid::stripe`] | RAID-0 / RAID-5: striping, rotating parity, degraded reads | Patterson et al. 1988; Linux md |
//! | `fs2` | [`placement::fs2`] | replicas of hot scattered blocks in free disk space, read by head position | Huang et al., SOSP 2005 |
//!
//!
//! Memory power policies (NOPM, IPD, ISR, HW, HW–SW, PAVM) are plug-ins of their own
//! interface, [`memory::MemPolicy`], driven by the memory simulator (`wattio_engine::memory`).
//!
//! Adding a function: a directory `src/<family>/<mechanism>/` with its config (a
//! [`registry::Kind`]), builder, tests and nothing of anyone else's; one line in
//! [`registry::KINDS`]; a page `docs/functions/<kind>.md`.

pub mod cache;
pub mod external;
pub mod fuzz;
pub mod geometry;
pub mod memory;
pub mod placement;
pub mod power;
pub mod prefetch;
pub mod raid;
pub mod registry;
