//! Functions that measure or use where data lies on the platters (thesis ch. 6).

pub mod probe;
