//! Where copies of data go on the platters (thesis ch. 5–6).

pub mod fs2;
pub mod replica;
