//! PARAID's models and gear-shifting policy (Weddle et al., ACM TOS 3(3), 2007).
//!
//! The pieces the PARAID layer is built from, each tested against the paper's worked
//! values: the soft-state region sizes of Eq. 1 ([`model::shares`]), the energy target of
//! Eq. 2 ([`model::savings`]), busy accounting as the union of request intervals
//! ([`policy::Busy`]), the Eq. 3/4 gear-shift decision on moving utilization statistics
//! ([`policy::Shifter`]) and power-cycle rationing ([`policy::Ration`]). Every ambiguity the
//! paper leaves is a parameter, documented in `docs/functions/paraid.md`.

pub mod model;
pub mod policy;
