//! PARAID, a gear-shifting power-aware RAID (Weddle et al., ACM TOS 3(3), 2007):
//! `kind = "paraid"`.
//!
//! The layer ([`layer::Paraid`]) and the pieces it is built from, each tested against the
//! paper's worked values: the soft-state region sizes of Eq. 1 ([`model::shares`],
//! [`layer::regions`]), the energy target of Eq. 2 ([`model::savings`]), busy accounting as
//! the union of request intervals ([`policy::Busy`]), the Eq. 3/4 gear-shift decision on
//! moving utilization statistics ([`policy::Shifter`]) and power-cycle rationing
//! ([`policy::Ration`]). Every ambiguity the paper leaves is a parameter, documented in
//! `docs/functions/paraid.md`.

mod config;
mod dirty;
pub mod layer;
pub mod model;
pub(crate) mod persist;
pub mod policy;

pub use config::{ParaidConfig, KIND};
pub use layer::Paraid;

#[cfg(test)]
mod tests;
