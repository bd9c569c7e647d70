//! Caches of one device on another.
//!
//! * [`exces`] — EXCES: a popularity-planned external flash cache that lets the disk sleep
//!   (`kind = "exces"`).

pub mod exces;
