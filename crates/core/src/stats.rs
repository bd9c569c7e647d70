//! Latency statistics in bounded memory: exact count, sum, min and max, and quantiles from a
//! log-linear histogram (each power-of-two range split into 128 buckets, so a reported
//! quantile is within 1/128 ≈ 0.8 % of the true value).

use crate::time::Nanos;

const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: Nanos,
    max: Nanos,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            counts: vec![0; (64 - SUB_BITS as usize + 1) * SUB as usize],
            n: 0,
            sum: 0,
            min: Nanos::MAX,
            max: 0,
        }
    }

    #[inline]
    fn bucket(v: Nanos) -> usize {
        if v < SUB {
            v as usize
        } else {
            let exp = 63 - v.leading_zeros(); // ≥ SUB_BITS
            let shift = exp - SUB_BITS;
            let sub = (v >> shift) - SUB; // 0..SUB
            ((shift as u64 + 1) * SUB + sub) as usize
        }
    }

    /// Lower bound of a bucket's range.
    fn bucket_low(b: usize) -> Nanos {
        let b = b as u64;
        if b < SUB {
            b
        } else {
            let shift = b / SUB - 1;
            let sub = b % SUB;
            (SUB + sub) << shift
        }
    }

    fn bucket_width(b: usize) -> Nanos {
        let b = b as u64;
        if b < SUB {
            1
        } else {
            1 << (b / SUB - 1)
        }
    }

    #[inline]
    pub fn record(&mut self, v: Nanos) {
        self.counts[Self::bucket(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn merge(&mut self, o: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }

    pub fn min(&self) -> Nanos {
        if self.n == 0 {
            0
        } else {
            self.min
        }
    }

    pub fn max(&self) -> Nanos {
        self.max
    }

    /// The `q`-quantile (0 ≤ q ≤ 1): the first bucket whose cumulative count reaches
    /// ⌈q·n⌉, reported at the bucket's midpoint, clamped to [min, max].
    pub fn quantile(&self, q: f64) -> Nanos {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut cum = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            cum += c;
            if cum >= rank {
                let mid = Self::bucket_low(b) + Self::bucket_width(b) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// (value, cumulative fraction) at every non-empty bucket's upper edge: a CDF.
    pub fn cdf(&self) -> Vec<(Nanos, f64)> {
        let mut out = Vec::new();
        let mut cum = 0u64;
        for (b, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                cum += c;
                let hi = (Self::bucket_low(b) + Self::bucket_width(b)).min(self.max.max(1));
                out.push((hi, cum as f64 / self.n as f64));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = LatencyHistogram::new();
        for v in 0..100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 49);
        assert_eq!(h.quantile(0.99), 98);
        assert_eq!(h.quantile(1.0), 99);
        assert_eq!(h.mean(), 49.5);
    }

    #[test]
    fn large_values_within_relative_error() {
        let mut h = LatencyHistogram::new();
        let vals: Vec<u64> = (1..=10_000u64).map(|i| i * 1_234_567).collect();
        for &v in &vals {
            h.record(v);
        }
        for q in [0.5, 0.9, 0.99] {
            let exact = vals[(q * vals.len() as f64).ceil() as usize - 1] as f64;
            let got = h.quantile(q) as f64;
            assert!(
                (got - exact).abs() / exact < 1.0 / 128.0,
                "q={q} {got} vs {exact}"
            );
        }
    }

    #[test]
    fn buckets_are_contiguous() {
        for b in 0..2000 {
            assert_eq!(
                LatencyHistogram::bucket_low(b) + LatencyHistogram::bucket_width(b),
                LatencyHistogram::bucket_low(b + 1)
            );
            assert_eq!(LatencyHistogram::bucket(LatencyHistogram::bucket_low(b)), b);
        }
    }
}
