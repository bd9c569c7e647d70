//! Functions whose objects live outside this crate, built by a builder the front door hands
//! the registry ([`Registry::with_external`](crate::registry::Registry::with_external)).

pub mod python;
