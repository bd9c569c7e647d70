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

/// `x.round() as u64` for x ≥ 0, without `f64::round` (a software routine on baseline
/// x86-64; these conversions run several times per simulated request).
///
/// Below 2⁵² (52 days in ns) it is `(x + 0.5)` truncated: branch-free, so the result is not
/// waiting on a branch that fractions make unpredictable. That sum is exact or rounds
/// without crossing an integer for every x in range except 0.49999999999999994, whose sum
/// rounds up to 1.0: that one value is sent to the general path. Above, an exact path.
#[inline]
pub fn round_positive(x: f64) -> u64 {
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    const BELOW_HALF: f64 = 0.499_999_999_999_999_94;
    if x < TWO_52 && x != BELOW_HALF {
        return (x + 0.5) as i64 as u64;
    }
    if x >= 9.0e18 {
        // Beyond i64's range: the slow unsigned path (never taken for durations).
        return x.round() as u64;
    }
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
        // Random magnitudes from 1e-3 to 1e17, and values next to every tie below 2^20.
        let mut z: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..200_000 {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            let x = f64::from_bits(0x3F50_0000_0000_0000 + z % 0x0450_0000_0000_0000);
            assert_eq!(round_positive(x), x.round() as u64, "{x:e}");
        }
        for n in 0..(1u64 << 20) {
            let tie = n as f64 + 0.5;
            for x in [tie, tie.next_down(), tie.next_up()] {
                assert_eq!(round_positive(x), x.round() as u64, "{x:e}");
            }
        }
        assert_eq!(secs_to_ns(1.5e-9), 2);
        assert_eq!(secs_to_ns(-1.0), 0);
        assert_eq!(secs_to_ns(f64::NAN), 0);
        assert_eq!(secs_to_ns(1e300), MAX_DURATION);
    }
}
