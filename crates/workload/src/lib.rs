//! Seeded synthetic workloads, streamed as a [`TraceSource`]: the embedded default, the tests
//! and the benchmarks need no trace files.
//!
//! Arrivals are *bursts*: a Poisson, ON/OFF or diurnal (sinusoidally modulated Poisson)
//! process decides when a burst starts; a burst is one or more requests (geometric count)
//! a fixed gap apart, all to one device, as a page load or a file read produces. The next
//! burst start is drawn from the end of the previous burst, so arrivals never go backwards.
//! Each request picks a stream; with probability `sequential_fraction` it continues where
//! that stream's last request ended, otherwise it goes to a region drawn from the popularity
//! distribution (uniform or Zipf over `region_bytes` regions, ranks scattered over the
//! footprint by a fixed permutation so the hot set is not all at the start of the disk).

mod rng;

pub use rng::{Rng, Zipf};

use serde::Deserialize;
use wattio_core::io::{Op, Request};
use wattio_core::time::round_positive;
use wattio_core::trace::{TraceError, TraceSource};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    Poisson,
    Onoff,
    Diurnal,
}

/// Request sizes in bytes. In a config, a table with `dist`, or a plain number for a fixed
/// size (`size = 4096` is `size = { dist = "fixed", bytes = 4096 }`).
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    Fixed { bytes: u32 },
    Choice { values: Vec<u32>, weights: Vec<f64> },
    Lognormal { median: f64, sigma: f64, max: u32 },
}

/// [`SizeDist`] as a table.
#[derive(Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
enum SizeTable {
    Fixed { bytes: u32 },
    Choice { values: Vec<u32>, weights: Vec<f64> },
    Lognormal { median: f64, sigma: f64, max: u32 },
}

impl<'de> Deserialize<'de> for SizeDist {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<SizeDist, D::Error> {
        use serde::de::{self, MapAccess, Unexpected, Visitor};
        struct Size;
        impl<'de> Visitor<'de> for Size {
            type Value = SizeDist;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a number of bytes (4096), or a table with dist = \"fixed\", \"choice\" or \"lognormal\"",
                )
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<SizeDist, E> {
                match u32::try_from(v) {
                    Ok(bytes) => Ok(SizeDist::Fixed { bytes }),
                    Err(_) => Err(E::invalid_value(
                        Unexpected::Unsigned(v),
                        &"a number of bytes below 4 GiB",
                    )),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<SizeDist, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<SizeDist, A::Error> {
                let t = SizeTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(match t {
                    SizeTable::Fixed { bytes } => SizeDist::Fixed { bytes },
                    SizeTable::Choice { values, weights } => SizeDist::Choice { values, weights },
                    SizeTable::Lognormal { median, sigma, max } => {
                        SizeDist::Lognormal { median, sigma, max }
                    }
                })
            }
        }
        d.deserialize_any(Size)
    }
}

/// Which regions requests go to. In a config, a table with `dist`, or the word `"uniform"`
/// (`popularity = "uniform"` is `popularity = { dist = "uniform" }`).
#[derive(Clone, Debug, PartialEq)]
pub enum Popularity {
    Uniform,
    Zipf { s: f64 },
}

/// [`Popularity`] as a table.
#[derive(Deserialize)]
#[serde(tag = "dist", rename_all = "lowercase", deny_unknown_fields)]
enum PopularityTable {
    Uniform,
    Zipf { s: f64 },
}

impl<'de> Deserialize<'de> for Popularity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Popularity, D::Error> {
        use serde::de::{self, MapAccess, Visitor};
        struct Pop;
        impl<'de> Visitor<'de> for Pop {
            type Value = Popularity;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"uniform\", or a table with dist = \"uniform\" or \"zipf\" (and s)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Popularity, E> {
                match v {
                    "uniform" => Ok(Popularity::Uniform),
                    "zipf" => Err(E::custom(
                        "zipf needs its exponent: write { dist = \"zipf\", s = 0.9 }",
                    )),
                    _ => Err(E::unknown_variant(v, &["uniform", "zipf"])),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Popularity, A::Error> {
                let t = PopularityTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(match t {
                    PopularityTable::Uniform => Popularity::Uniform,
                    PopularityTable::Zipf { s } => Popularity::Zipf { s },
                })
            }
        }
        d.deserialize_any(Pop)
    }
}

fn d_rate() -> f64 {
    1.0
}
fn d_amp() -> f64 {
    0.9
}
fn d_peak() -> f64 {
    14.0
}
fn d_period() -> f64 {
    86_400.0
}
fn d_one() -> f64 {
    1.0
}
/// The longest generated workload, in seconds.
pub const MAX_DURATION_S: f64 = 1e9;
/// The highest burst rate, per second.
pub const MAX_RATE: f64 = 1e7;
/// The most streams (each keeps its sequential position).
pub const MAX_STREAMS: u32 = 1 << 20;
/// The most requests a generated workload may be expected to produce without `max_requests`.
pub const MAX_EXPECTED_REQUESTS: f64 = 1e10;

fn d_gap() -> f64 {
    1.0
}
fn d_devices() -> u16 {
    1
}
fn d_read() -> f64 {
    0.7
}
fn d_size() -> SizeDist {
    SizeDist::Fixed { bytes: 4096 }
}
fn d_pop() -> Popularity {
    Popularity::Uniform
}
fn d_streams() -> u32 {
    1
}
fn d_align() -> u64 {
    4096
}
fn d_region() -> u64 {
    65_536
}
fn d_footprint() -> u64 {
    1 << 30
}

/// A workload as a run config's `[workload]` table gives it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    pub arrivals: Arrivals,
    /// Length of the generated trace.
    pub duration_s: f64,
    /// Mean burst starts per second (for diurnal: the daily mean; for ON/OFF: during ON).
    #[serde(default = "d_rate")]
    pub rate: f64,
    /// ON/OFF: mean ON and OFF period lengths (exponential).
    #[serde(default)]
    pub on_mean_s: Option<f64>,
    #[serde(default)]
    pub off_mean_s: Option<f64>,
    /// Diurnal: relative amplitude (0 ≤ a ≤ 1) of the daily sinusoid, the hour of peak
    /// load, and the period.
    #[serde(default = "d_amp")]
    pub amplitude: f64,
    #[serde(default = "d_peak")]
    pub peak_hour: f64,
    #[serde(default = "d_period")]
    pub period_s: f64,
    /// Mean requests per burst (≥ 1; geometric) and the gap between them.
    #[serde(default = "d_one")]
    pub burst_mean: f64,
    #[serde(default = "d_gap")]
    pub burst_gap_ms: f64,
    /// Requests are spread uniformly over devices 0..devices (per burst).
    #[serde(default = "d_devices")]
    pub devices: u16,
    #[serde(default = "d_read")]
    pub read_fraction: f64,
    #[serde(default = "d_size")]
    pub size: SizeDist,
    /// Bytes of each device the workload touches.
    #[serde(default = "d_footprint")]
    pub footprint_bytes: u64,
    #[serde(default = "d_pop")]
    pub popularity: Popularity,
    #[serde(default = "d_region")]
    pub region_bytes: u64,
    #[serde(default)]
    pub sequential_fraction: f64,
    #[serde(default = "d_streams")]
    pub streams: u32,
    #[serde(default = "d_align")]
    pub align_bytes: u64,
    /// Stop after this many requests even if `duration_s` is not reached.
    #[serde(default)]
    pub max_requests: Option<u64>,
}

impl WorkloadConfig {
    /// Check every field; errors name the key under `workload.`.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |k: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("workload.{k}: expected a number > 0, got {v}"))
            }
        };
        let frac = |k: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!(
                    "workload.{k}: expected a fraction in [0, 1], got {v}"
                ))
            }
        };
        pos("duration_s", self.duration_s)?;
        pos("rate", self.rate)?;
        // Bounds that keep a run finite and its clock exact (the audit's `duration_s = 1e30`
        // ran forever; `rate = 1e30` stalled the arrival clock): a run of at most 10^9 s
        // (31.7 years, far inside the nanosecond clock's 584), at most 10^7 bursts per
        // second (mean gap 100 ns ≫ the clock's resolution at that horizon), and at most
        // 10^10 expected requests unless `max_requests` caps them.
        if self.duration_s > MAX_DURATION_S {
            return Err(format!(
                "workload.duration_s: expected at most {MAX_DURATION_S} s, got {}",
                self.duration_s
            ));
        }
        if self.rate > MAX_RATE {
            return Err(format!(
                "workload.rate: expected at most {MAX_RATE} bursts per second, got {}",
                self.rate
            ));
        }
        let expected = self.rate * self.duration_s * self.burst_mean.max(1.0);
        if self.max_requests.is_none() && expected > MAX_EXPECTED_REQUESTS {
            return Err(format!(
                "workload.duration_s: {} s at {} bursts/s of {} requests is about {expected:.3e} requests, more than {MAX_EXPECTED_REQUESTS:e}: shorten the run or set max_requests",
                self.duration_s, self.rate, self.burst_mean
            ));
        }
        frac("amplitude", self.amplitude)?;
        pos("period_s", self.period_s)?;
        if !(self.burst_mean >= 1.0 && self.burst_mean.is_finite()) {
            return Err(format!(
                "workload.burst_mean: expected a number ≥ 1, got {}",
                self.burst_mean
            ));
        }
        if !(self.burst_gap_ms >= 0.0 && self.burst_gap_ms.is_finite()) {
            return Err(format!(
                "workload.burst_gap_ms: expected a number ≥ 0, got {}",
                self.burst_gap_ms
            ));
        }
        frac("read_fraction", self.read_fraction)?;
        frac("sequential_fraction", self.sequential_fraction)?;
        if self.devices == 0 {
            return Err("workload.devices: expected at least 1".into());
        }
        // One sequential position is kept per stream: bound them like any allocation an
        // input controls.
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(format!(
                "workload.streams: expected 1 to {MAX_STREAMS}, got {}",
                self.streams
            ));
        }
        if self.align_bytes == 0 || self.region_bytes < self.align_bytes {
            return Err("workload.region_bytes: expected region_bytes ≥ align_bytes > 0".into());
        }
        if self.arrivals == Arrivals::Onoff {
            match (self.on_mean_s, self.off_mean_s) {
                (Some(on), Some(off)) => {
                    pos("on_mean_s", on)?;
                    pos("off_mean_s", off)?;
                }
                _ => {
                    return Err(
                        "workload.on_mean_s: ON/OFF arrivals need on_mean_s and off_mean_s".into(),
                    )
                }
            }
        }
        let max_size = match &self.size {
            SizeDist::Fixed { bytes } => {
                if *bytes == 0 {
                    return Err("workload.size.bytes: expected > 0".into());
                }
                *bytes
            }
            SizeDist::Choice { values, weights } => {
                if values.is_empty() || values.len() != weights.len() {
                    return Err(
                        "workload.size.weights: expected one weight per value (and at least one value)".into(),
                    );
                }
                if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0))
                    || weights.iter().sum::<f64>() <= 0.0
                {
                    return Err(
                        "workload.size.weights: expected weights ≥ 0 with a positive sum".into(),
                    );
                }
                if values.contains(&0) {
                    return Err("workload.size.values: expected sizes > 0".into());
                }
                values.iter().copied().max().unwrap_or(1)
            }
            SizeDist::Lognormal { median, sigma, max } => {
                pos("size.median", *median)?;
                if !(sigma.is_finite() && *sigma >= 0.0) {
                    return Err(format!("workload.size.sigma: expected ≥ 0, got {sigma}"));
                }
                if *max == 0 {
                    return Err("workload.size.max: expected > 0".into());
                }
                *max
            }
        };
        if self.footprint_bytes < max_size as u64 + self.region_bytes {
            return Err(format!(
                "workload.footprint_bytes: expected at least the largest request plus one region ({} bytes), got {}",
                max_size as u64 + self.region_bytes,
                self.footprint_bytes
            ));
        }
        if let Popularity::Zipf { s } = self.popularity {
            pos("popularity.s", s)?;
        }
        Ok(())
    }
}

/// A seeded generator: a [`TraceSource`] producing `config` deterministically from `seed`.
pub struct Generator {
    c: WorkloadConfig,
    rng: Rng,
    zipf: Option<Zipf>,
    regions: u64,
    /// Affine permutation of regions: rank r ↦ (a·r + b) mod regions.
    perm: (u64, u64),
    size_cdf: Vec<f64>,
    /// Current time (s) of the arrival process.
    t: f64,
    end: f64,
    /// Requests left in the current burst, its device and the burst gap.
    burst_left: u64,
    burst_dev: u16,
    on_until: f64,
    stream_pos: Vec<u64>,
    emitted: u64,
    peak_phase: f64,
}

impl Generator {
    pub fn new(config: &WorkloadConfig, seed: u64) -> Result<Generator, String> {
        config.validate()?;
        let c = config.clone();
        let mut rng = Rng::new(seed);
        let regions = (c.footprint_bytes / c.region_bytes).max(1);
        let mut a = (regions / 2 + 1) | 1;
        while gcd(a, regions) != 1 {
            a += 2;
        }
        let perm = (a % regions.max(1), rng.below(regions));
        let zipf = match c.popularity {
            Popularity::Zipf { s } => Some(Zipf::new(regions, s)),
            Popularity::Uniform => None,
        };
        let size_cdf = match &c.size {
            SizeDist::Choice { weights, .. } => {
                let total: f64 = weights.iter().sum();
                let mut acc = 0.0;
                weights
                    .iter()
                    .map(|w| {
                        acc += w / total;
                        acc
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        let streams = c.streams as usize;
        let on_until = match c.arrivals {
            Arrivals::Onoff => rng.exp(c.on_mean_s.unwrap_or(1.0)),
            _ => f64::INFINITY,
        };
        Ok(Generator {
            end: c.duration_s,
            peak_phase: c.peak_hour * 3600.0,
            rng,
            zipf,
            regions,
            perm,
            size_cdf,
            t: 0.0,
            burst_left: 0,
            burst_dev: 0,
            on_until,
            stream_pos: vec![u64::MAX; streams],
            emitted: 0,
            c,
        })
    }

    /// Next burst start after `self.t`, or None past the end.
    fn next_burst(&mut self) -> Option<f64> {
        match self.c.arrivals {
            Arrivals::Poisson => {
                self.t += self.rng.exp(1.0 / self.c.rate);
            }
            Arrivals::Onoff => loop {
                let cand = self.t + self.rng.exp(1.0 / self.c.rate);
                if cand <= self.on_until {
                    self.t = cand;
                    break;
                }
                // The ON period ended first (memoryless: redraw from the next ON start).
                let off = self.rng.exp(self.c.off_mean_s.unwrap_or(1.0));
                self.t = self.on_until + off;
                self.on_until = self.t + self.rng.exp(self.c.on_mean_s.unwrap_or(1.0));
                if self.t > self.end {
                    return None;
                }
            },
            Arrivals::Diurnal => {
                // Thinning (Lewis & Shedler) against the peak rate.
                let peak = self.c.rate * (1.0 + self.c.amplitude);
                loop {
                    self.t += self.rng.exp(1.0 / peak);
                    if self.t > self.end {
                        return None;
                    }
                    let phase =
                        std::f64::consts::TAU * (self.t - self.peak_phase) / self.c.period_s;
                    let rate = self.c.rate * (1.0 + self.c.amplitude * phase.cos());
                    if self.rng.uniform() * peak <= rate {
                        break;
                    }
                }
            }
        }
        (self.t <= self.end).then_some(self.t)
    }

    fn size(&mut self) -> u32 {
        match &self.c.size {
            SizeDist::Fixed { bytes } => *bytes,
            SizeDist::Choice { values, .. } => {
                let u = self.rng.uniform();
                let i = self
                    .size_cdf
                    .partition_point(|&c| c <= u)
                    .min(values.len() - 1);
                values[i]
            }
            SizeDist::Lognormal { median, sigma, max } => {
                let v = median * (sigma * self.rng.normal()).exp();
                let align = self.c.align_bytes as f64;
                let v = ((v / align).ceil() * align).clamp(align, *max as f64);
                v as u32
            }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl TraceSource for Generator {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.generate())
    }

    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        for n in 0..max {
            match self.generate() {
                Some(r) => out.push(r),
                None => return Ok(n),
            }
        }
        Ok(max)
    }

    fn assumptions(&self) -> Vec<String> {
        let mut a = vec![format!(
            "generated {:?} workload: {} s, {} burst/s, {} device(s)",
            self.c.arrivals, self.c.duration_s, self.c.rate, self.c.devices
        )];
        // The next burst is drawn from the end of the current one (bursts never overlap),
        // so the realised burst rate is 1 / (1/rate + (burst_mean − 1)·gap): say so when
        // that is noticeably below the configured rate, rather than cap it silently.
        let busy = (self.c.burst_mean - 1.0) * self.c.burst_gap_ms / 1e3;
        let realised = 1.0 / (1.0 / self.c.rate + busy);
        if realised < 0.99 * self.c.rate {
            a.push(format!(
                "bursts do not overlap: the realised burst rate is about {realised:.4} /s, {:.1} % below the configured {} /s (each burst lasts about {busy} s)",
                (1.0 - realised / self.c.rate) * 100.0,
                self.c.rate
            ));
        }
        a
    }
}

impl Generator {
    /// The next request, `None` at the end (generation cannot fail once configured).
    #[inline]
    fn generate(&mut self) -> Option<Request> {
        if self.c.max_requests.is_some_and(|m| self.emitted >= m) {
            return None;
        }
        if self.burst_left == 0 {
            self.next_burst()?;
            self.burst_left = 1 + self.rng.geometric(1.0 / self.c.burst_mean);
            self.burst_dev = self.rng.below(self.c.devices as u64) as u16;
        } else {
            self.t += self.c.burst_gap_ms / 1e3;
            if self.t > self.end {
                self.burst_left = 0;
                return None;
            }
        }
        self.burst_left -= 1;
        let len = self.size();
        let stream = self.rng.below(self.c.streams as u64) as usize;
        let op = if self.rng.uniform() < self.c.read_fraction {
            Op::Read
        } else {
            Op::Write
        };
        let fp = self.c.footprint_bytes;
        let last = self.stream_pos[stream];
        let seq = self.c.sequential_fraction > 0.0
            && last != u64::MAX
            && self.rng.uniform() < self.c.sequential_fraction;
        let mut offset = if seq {
            last
        } else {
            let rank = match &self.zipf {
                Some(z) => z.sample(&mut self.rng) - 1,
                None => self.rng.below(self.regions),
            };
            let region =
                (self.perm.0.wrapping_mul(rank) % self.regions + self.perm.1) % self.regions;
            let within =
                self.rng.below(self.c.region_bytes / self.c.align_bytes) * self.c.align_bytes;
            region * self.c.region_bytes + within
        };
        if offset + len as u64 > fp {
            offset = (fp - len as u64) / self.c.align_bytes * self.c.align_bytes;
        }
        self.stream_pos[stream] = offset + len as u64;
        self.emitted += 1;
        // round_positive, not f64::round: same value, no software rounding call per request.
        let mut r = Request::new(round_positive(self.t * 1e9), op, offset, len);
        r.dev = self.burst_dev;
        r.stream = stream as u32;
        Some(r)
    }
}

#[cfg(test)]
mod tests;
