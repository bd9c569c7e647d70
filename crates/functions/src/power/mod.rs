//! Power management of devices.
//!
//! * [`idle`] — spin-down after idleness (`kind = "spindown"`).

pub mod idle;
