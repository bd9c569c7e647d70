//! Redundant arrays: striping with and without parity (`stripe`, `kind = "raid"`), and
//! PARAID's gear models and policy (`paraid`).

pub mod paraid;
pub mod stripe;
