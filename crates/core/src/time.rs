//! Virtual and wall-clock time share one unit: nanoseconds since the start of a run.

/// Nanoseconds since the start of the run (virtual in the simulator, wall clock live).
pub type Nanos = u64;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Seconds (f64, as configs and datasheets give them) to nanoseconds, rounded to nearest.
/// Negative or non-finite inputs are clamped to zero; callers validate their inputs first.
pub fn secs_to_ns(s: f64) -> Nanos {
    if s.is_finite() && s > 0.0 {
        (s * 1e9).round() as Nanos
    } else {
        0
    }
}

pub fn ns_to_secs(ns: Nanos) -> f64 {
    ns as f64 / 1e9
}
