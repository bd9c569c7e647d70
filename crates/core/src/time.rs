//! Virtual and wall-clock time share one unit: nanoseconds since the start of a run.

/// Nanoseconds since the start of the run (virtual in the simulator, wall clock live).
pub type Nanos = u64;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

/// Longest duration a conversion yields (about 31.7 years): sums of a handful of such
/// durations cannot overflow a u64, whatever values a config holds.
pub const MAX_DURATION: Nanos = 1_000_000_000_000_000_000;

/// Seconds (f64, as configs and datasheets give them) to nanoseconds, rounded to nearest.
/// Negative or NaN inputs give zero and huge ones [`MAX_DURATION`]; callers validate first.
pub fn secs_to_ns(s: f64) -> Nanos {
    if s > 0.0 {
        ((s * 1e9).round() as Nanos).min(MAX_DURATION)
    } else {
        0
    }
}

pub fn ns_to_secs(ns: Nanos) -> f64 {
    ns as f64 / 1e9
}
