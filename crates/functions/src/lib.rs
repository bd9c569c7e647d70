//! Built-in intelligence functions. Each is a sans-I/O [`wattio_core::Function`]: it runs
//! unchanged under the simulated and the live executor.
//!
//! * [`spindown`] — disk spin-down: fixed timeout, adaptive timeout (Douglis et al.),
//!   Helmbold et al.'s share algorithm, and the offline oracle.

pub mod spindown;
