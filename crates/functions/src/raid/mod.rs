//! Redundant arrays: striping with and without parity (`stripe`, `kind = "raid"`).

pub mod stripe;
