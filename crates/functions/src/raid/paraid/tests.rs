//! The PARAID layer driven by hand.
