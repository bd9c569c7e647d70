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
#[inline]
pub fn secs_to_ns(s: f64) -> Nanos {
    let ns = s * 1e9;
    if ns >= MAX_DURATION as f64 {
        MAX_DURATION
    } else if ns > 0.0 {
        round_positive(ns)
    } else {
        0
    }
}

/// `x.round() as u64` for x ≥ 0, without `f64::round` below 9·10¹⁸: on baseline x86-64 that is a
/// software routine, and these conversions run several times per simulated request. Exact:
/// `x - trunc(x)` is computed without error for every x in range.
#[inline]
pub fn round_positive(x: f64) -> u64 {
    if x >= 9.0e18 {
        // Beyond i64's range: the slow unsigned path (never taken for durations).
        return x.round() as u64;
    }
    // Through i64: one conversion instruction each way, where u64 needs a branchy sequence.
    let t = x as i64;
    if x - t as f64 >= 0.5 {
        (t + 1) as u64
    } else {
        t as u64
    }
}

pub fn ns_to_secs(ns: Nanos) -> f64 {
    ns as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_positive_matches_f64_round() {
        for x in [
            0.0,
            0.49999999999999994,
            0.5,
            1.5,
            2.5,
            2.4999999,
            1e15 + 0.5,
            4503599627370495.5,
            9e15,
            123.456,
            0.999,
        ] {
            assert_eq!(round_positive(x), x.round() as u64, "{x}");
        }
        assert_eq!(secs_to_ns(1.5e-9), 2);
        assert_eq!(secs_to_ns(-1.0), 0);
        assert_eq!(secs_to_ns(f64::NAN), 0);
        assert_eq!(secs_to_ns(1e300), MAX_DURATION);
    }
}
