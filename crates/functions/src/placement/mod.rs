//! Where copies of data go on the platters (thesis ch. 5–6).

pub mod replica;
