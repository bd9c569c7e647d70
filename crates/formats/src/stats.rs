//! `wattio trace stats`: what a trace looks like, in bounded memory.
//!
//! The idle-gap distribution is the part that decides what spin-down can save: a device
//! can only sleep through gaps longer than its break-even time, so the report gives, for a
//! few thresholds, how much idle time lies in gaps longer than the threshold.

use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use wattio_core::{Nanos, Op, Request, TraceError, TraceSource};

/// Idle thresholds reported (seconds): typical spin-down break-even times range 1–30 s.
pub const IDLE_THRESHOLDS_S: [u64; 4] = [1, 5, 10, 30];
/// Footprint is counted exactly up to this many distinct 4 KiB pages (16 GiB touched, some
/// 40 MB of hash set), then estimated with HyperLogLog.
pub const FOOTPRINT_EXACT_CAP: usize = 4 << 20;
pub const PAGE: u64 = 4096;
/// Requests of one device tracked in flight at most (a trace whose measured times are huge
/// would otherwise keep every request); past it the outstanding counts are lower bounds.
pub const MAX_TRACKED_IN_FLIGHT: usize = 1 << 20;

/// Log-linear histogram (32 sub-buckets per power of two: quantiles within ~3%) in fixed
/// memory.
#[derive(Clone)]
struct LogHist {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    min: u64,
    max: u64,
}

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;

impl LogHist {
    fn new() -> Self {
        LogHist {
            counts: vec![0; (64 * SUB) as usize],
            n: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < SUB {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // ≥ SUB_BITS
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
    }

    /// Lower and upper bound of bucket `i`.
    fn bounds(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < SUB {
            return (i, i + 1);
        }
        let e = (i / SUB) as u32 + SUB_BITS - 1;
        let sub = i % SUB;
        let lo = (1u64 << e) | (sub << (e - SUB_BITS));
        let w = 1u64 << (e - SUB_BITS);
        (lo, lo.saturating_add(w))
    }

    fn add(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                let (lo, hi) = Self::bounds(i);
                // Midpoint of the bucket, clamped to what was actually seen.
                let mid = lo + (hi - lo) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }
}

/// One histogram bin `[lo, hi)`; `hi = None` is unbounded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bin {
    pub lo: u64,
    pub hi: Option<u64>,
    pub count: u64,
}

/// A distribution of durations in ns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dist {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Log bins by decade: [0, 1 µs), [1 µs, 10 µs), …, [1000 s, ∞).
    pub histogram: Vec<Bin>,
}

impl Dist {
    /// One line: count, mean and percentiles, as the text report prints each distribution.
    pub fn summary(&self) -> String {
        format!(
            "n={} mean {} p50 {} p90 {} p99 {} p99.9 {} max {}",
            self.count,
            fmt_ns(self.mean_ns),
            fmt_ns(self.p50_ns as f64),
            fmt_ns(self.p90_ns as f64),
            fmt_ns(self.p99_ns as f64),
            fmt_ns(self.p999_ns as f64),
            fmt_ns(self.max_ns as f64)
        )
    }

    fn from_hist(h: &LogHist) -> Dist {
        let mut edges = vec![0u64];
        let mut e = 1_000u64;
        while e <= 1_000_000_000_000 {
            edges.push(e);
            e *= 10;
        }
        let mut bins: Vec<Bin> = edges
            .iter()
            .enumerate()
            .map(|(k, &lo)| Bin {
                lo,
                hi: edges.get(k + 1).copied(),
                count: 0,
            })
            .collect();
        for (i, &c) in h.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let (lo, _) = LogHist::bounds(i);
            // Decade edges are not bucket edges; a bucket goes to the decade of its low
            // end, at most one bucket width (3%) off.
            let k = edges.iter().rposition(|&x| x <= lo).unwrap_or(0);
            bins[k].count += c;
        }
        Dist {
            count: h.n,
            min_ns: if h.n == 0 { 0 } else { h.min },
            mean_ns: if h.n == 0 {
                0.0
            } else {
                h.sum as f64 / h.n as f64
            },
            p50_ns: h.quantile(0.5),
            p90_ns: h.quantile(0.9),
            p99_ns: h.quantile(0.99),
            p999_ns: h.quantile(0.999),
            max_ns: h.max,
            histogram: bins,
        }
    }
}

/// Idle time in gaps longer than a threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdleOver {
    pub threshold_s: u64,
    /// Gaps longer than the threshold.
    pub gaps: u64,
    /// Their total length.
    pub idle_s: f64,
    /// Their total length beyond the threshold: the most a spin-down policy with this
    /// timeout could spend spun down.
    pub beyond_threshold_s: f64,
}

/// Requests in flight at arrivals ([`TraceStats::outstanding`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outstanding {
    pub mean: f64,
    pub max: u64,
    /// Power-of-two bins: [1, 2), [2, 4), [4, 8), …
    pub histogram: Vec<Bin>,
    /// A device had more than [`MAX_TRACKED_IN_FLIGHT`] in flight: the counts are lower
    /// bounds.
    pub capped: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceStats {
    pub dev: u16,
    pub requests: u64,
    pub read_fraction: f64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub sequential_fraction: f64,
    pub first_arrival_ns: u64,
    pub last_arrival_ns: u64,
    pub idle_over: Vec<IdleOver>,
    /// The most requests in flight at once (with measured times; else 1 or 0).
    pub max_outstanding: u64,
}

/// Everything `wattio trace stats` reports (`--json` serializes this).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceStats {
    pub requests: u64,
    /// Reads / (reads + writes): flushes and discards move no data and are left out.
    pub read_fraction: f64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub duration_ns: u64,
    /// Request sizes of reads and writes, power-of-two bins in bytes.
    pub size_histogram: Vec<Bin>,
    pub mean_size_bytes: f64,
    /// Between consecutive requests of the whole trace.
    pub inter_arrival: Dist,
    /// Per device, from the end of its previous request (arrival + measured response time
    /// when recorded, else its arrival) to its next arrival; all devices pooled.
    pub idle_gaps: Dist,
    pub idle_over: Vec<IdleOver>,
    /// Distinct 4 KiB pages read or written (per device).
    pub footprint_pages: u64,
    pub footprint_bytes: u64,
    /// False once the exact count passed its cap: the figure is then a HyperLogLog estimate
    /// (±1%).
    pub footprint_exact: bool,
    /// Reads and writes that start where the previous read or write on the same device ended.
    pub sequential_fraction: f64,
    /// Response times recorded in the trace, if any.
    pub measured: Option<Dist>,
    /// The same, of the reads and of the writes alone (each `None` without any).
    pub measured_reads: Option<Dist>,
    pub measured_writes: Option<Dist>,
    /// With measured times: how many requests of its device were in flight when each request
    /// arrived, itself included (by arrivals and measured responses; a request without a
    /// measured time leaves at once). A queue depth of 1 throughout is a closed-loop trace.
    pub outstanding: Option<Outstanding>,
    pub devices: Vec<DeviceStats>,
    pub assumptions: Vec<String>,
}

#[derive(Default)]
struct IdleAcc {
    gaps: [u64; 4],
    idle: [u128; 4],
    beyond: [u128; 4],
}

impl IdleAcc {
    fn add(&mut self, gap: u64) {
        for (k, t) in IDLE_THRESHOLDS_S.iter().enumerate() {
            let t = t * 1_000_000_000;
            if gap > t {
                self.gaps[k] += 1;
                self.idle[k] += gap as u128;
                self.beyond[k] += (gap - t) as u128;
            }
        }
    }
    fn report(&self) -> Vec<IdleOver> {
        IDLE_THRESHOLDS_S
            .iter()
            .enumerate()
            .map(|(k, &t)| IdleOver {
                threshold_s: t,
                gaps: self.gaps[k],
                idle_s: self.idle[k] as f64 / 1e9,
                beyond_threshold_s: self.beyond[k] as f64 / 1e9,
            })
            .collect()
    }
}

#[derive(Default)]
struct DevAcc {
    requests: u64,
    reads: u64,
    writes: u64,
    bytes_read: u64,
    bytes_written: u64,
    sequential: u64,
    last_end: Option<u64>,
    busy_until: Option<Nanos>,
    first: Nanos,
    last: Nanos,
    idle: IdleAcc,
    /// Completion times of the requests in flight (arrival + measured).
    in_flight: BinaryHeap<Reverse<Nanos>>,
    max_outstanding: u64,
}

/// HyperLogLog with 2^14 registers.
struct Hll {
    reg: Vec<u8>,
}

const HLL_P: u32 = 14;

fn mix(mut x: u64) -> u64 {
    // splitmix64 finalizer: cheap and well distributed.
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Hll {
    fn new() -> Self {
        Hll {
            reg: vec![0; 1 << HLL_P],
        }
    }
    fn add(&mut self, x: u64) {
        let h = mix(x);
        let i = (h >> (64 - HLL_P)) as usize;
        let rest = h << HLL_P | (1 << (HLL_P - 1));
        let rho = rest.leading_zeros() as u8 + 1;
        if self.reg[i] < rho {
            self.reg[i] = rho;
        }
    }
    fn estimate(&self) -> u64 {
        let m = self.reg.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.reg.iter().map(|&r| 2f64.powi(-(r as i32))).sum();
        let e = alpha * m * m / sum;
        let zeros = self.reg.iter().filter(|&&r| r == 0).count();
        if e <= 2.5 * m && zeros > 0 {
            (m * (m / zeros as f64).ln()).round() as u64
        } else {
            e.round() as u64
        }
    }
}

/// Distinct keys (pages), counted exactly up to [`FOOTPRINT_EXACT_CAP`], then estimated.
pub(crate) struct Footprint {
    exact: Option<HashSet<u64>>,
    hll: Hll,
}

impl Footprint {
    pub(crate) fn new() -> Self {
        Footprint {
            exact: Some(HashSet::new()),
            hll: Hll::new(),
        }
    }

    pub(crate) fn add(&mut self, key: u64) {
        self.hll.add(key);
        if let Some(set) = &mut self.exact {
            set.insert(key);
            if set.len() > FOOTPRINT_EXACT_CAP {
                self.exact = None;
            }
        }
    }

    /// The count and whether it is exact.
    pub(crate) fn count(&self) -> (u64, bool) {
        match &self.exact {
            Some(set) => (set.len() as u64, true),
            None => (self.hll.estimate(), false),
        }
    }
}

/// Accumulates [`TraceStats`] one request at a time.
pub struct StatsBuilder {
    requests: u64,
    reads: u64,
    writes: u64,
    flushes: u64,
    discards: u64,
    bytes_read: u64,
    bytes_written: u64,
    first: Option<Nanos>,
    last: Nanos,
    sizes: [u64; 34],
    size_sum: u128,
    inter: LogHist,
    idle: LogHist,
    idle_over: IdleAcc,
    measured: LogHist,
    /// The same, of the reads and of the writes.
    measured_ops: [LogHist; 2],
    /// Requests in flight at arrivals, by power-of-two bin, and their sum.
    outstanding: [u64; 22],
    outstanding_sum: u128,
    outstanding_capped: bool,
    pages: Footprint,
    sequential: u64,
    devs: BTreeMap<u16, DevAcc>,
}

impl Default for StatsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl StatsBuilder {
    pub fn new() -> Self {
        StatsBuilder {
            requests: 0,
            reads: 0,
            writes: 0,
            flushes: 0,
            discards: 0,
            bytes_read: 0,
            bytes_written: 0,
            first: None,
            last: 0,
            sizes: [0; 34],
            size_sum: 0,
            inter: LogHist::new(),
            idle: LogHist::new(),
            idle_over: IdleAcc::default(),
            measured: LogHist::new(),
            measured_ops: [LogHist::new(), LogHist::new()],
            outstanding: [0; 22],
            outstanding_sum: 0,
            outstanding_capped: false,
            pages: Footprint::new(),
            sequential: 0,
            devs: BTreeMap::new(),
        }
    }

    pub fn add(&mut self, r: &Request) {
        self.requests += 1;
        match self.first {
            None => self.first = Some(r.arrival),
            Some(_) => self.inter.add(r.arrival.saturating_sub(self.last)),
        }
        self.last = r.arrival;
        if let Some(m) = r.measured {
            self.measured.add(m);
            match r.op {
                Op::Read => self.measured_ops[0].add(m),
                Op::Write => self.measured_ops[1].add(m),
                Op::Flush | Op::Discard => {}
            }
        }
        let d = self.devs.entry(r.dev).or_default();
        if d.requests == 0 {
            d.first = r.arrival;
        }
        d.requests += 1;
        d.last = r.arrival;
        if let Some(b) = d.busy_until {
            let gap = r.arrival.saturating_sub(b);
            self.idle.add(gap);
            self.idle_over.add(gap);
            d.idle.add(gap);
        }
        let end = r.arrival.saturating_add(r.measured.unwrap_or(0));
        d.busy_until = Some(d.busy_until.map_or(end, |b| b.max(end)));
        while d.in_flight.peek().is_some_and(|e| e.0 <= r.arrival) {
            d.in_flight.pop();
        }
        let now = d.in_flight.len() as u64 + 1;
        if end > r.arrival {
            if d.in_flight.len() < MAX_TRACKED_IN_FLIGHT {
                d.in_flight.push(Reverse(end));
            } else {
                self.outstanding_capped = true;
            }
        }
        d.max_outstanding = d.max_outstanding.max(now);
        self.outstanding[(63 - now.leading_zeros() as usize).min(21)] += 1;
        self.outstanding_sum += now as u128;
        match r.op {
            Op::Read | Op::Write => {
                let len = r.len as u64;
                if r.op == Op::Read {
                    self.reads += 1;
                    self.bytes_read += len;
                    d.reads += 1;
                    d.bytes_read += len;
                } else {
                    self.writes += 1;
                    self.bytes_written += len;
                    d.writes += 1;
                    d.bytes_written += len;
                }
                let bin = if len == 0 {
                    0
                } else {
                    (64 - len.leading_zeros()) as usize
                };
                self.sizes[bin.min(33)] += 1;
                self.size_sum += len as u128;
                if d.last_end == Some(r.offset) {
                    self.sequential += 1;
                    d.sequential += 1;
                }
                d.last_end = Some(r.offset.saturating_add(len));
                if len > 0 {
                    let first = r.offset / PAGE;
                    let last = (r.offset + len - 1) / PAGE;
                    for p in first..=last {
                        // 48 bits of page number (1 EiB) under the 16-bit device id.
                        self.pages.add((r.dev as u64) << 48 | (p & ((1 << 48) - 1)));
                    }
                }
            }
            Op::Flush => self.flushes += 1,
            Op::Discard => self.discards += 1,
        }
    }

    pub fn finish(self, assumptions: Vec<String>) -> TraceStats {
        let frac = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let data = self.reads + self.writes;
        let size_histogram = self
            .sizes
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| match i {
                0 => Bin {
                    lo: 0,
                    hi: Some(1),
                    count: c,
                },
                33 => Bin {
                    lo: 1 << 32,
                    hi: None,
                    count: c,
                },
                i => Bin {
                    lo: 1 << (i - 1),
                    hi: Some(1 << i),
                    count: c,
                },
            })
            .collect();
        let (footprint_pages, footprint_exact) = self.pages.count();
        let devices = self
            .devs
            .iter()
            .map(|(&dev, d)| DeviceStats {
                dev,
                requests: d.requests,
                read_fraction: frac(d.reads, d.reads + d.writes),
                bytes_read: d.bytes_read,
                bytes_written: d.bytes_written,
                sequential_fraction: frac(d.sequential, d.reads + d.writes),
                first_arrival_ns: d.first,
                last_arrival_ns: d.last,
                idle_over: d.idle.report(),
                max_outstanding: d.max_outstanding,
            })
            .collect();
        let outstanding = (self.measured.n > 0).then(|| Outstanding {
            mean: self.outstanding_sum as f64 / self.requests.max(1) as f64,
            max: self
                .devs
                .values()
                .map(|d| d.max_outstanding)
                .max()
                .unwrap_or(0),
            histogram: self
                .outstanding
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| Bin {
                    lo: 1 << i,
                    hi: (i < 21).then(|| 1 << (i + 1)),
                    count: c,
                })
                .collect(),
            capped: self.outstanding_capped,
        });
        TraceStats {
            requests: self.requests,
            read_fraction: frac(self.reads, data),
            reads: self.reads,
            writes: self.writes,
            flushes: self.flushes,
            discards: self.discards,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            duration_ns: self.last - self.first.unwrap_or(self.last),
            size_histogram,
            mean_size_bytes: if data == 0 {
                0.0
            } else {
                self.size_sum as f64 / data as f64
            },
            inter_arrival: Dist::from_hist(&self.inter),
            idle_gaps: Dist::from_hist(&self.idle),
            idle_over: self.idle_over.report(),
            footprint_pages,
            footprint_bytes: footprint_pages * PAGE,
            footprint_exact,
            sequential_fraction: frac(self.sequential, data),
            measured: (self.measured.n > 0).then(|| Dist::from_hist(&self.measured)),
            measured_reads: (self.measured_ops[0].n > 0)
                .then(|| Dist::from_hist(&self.measured_ops[0])),
            measured_writes: (self.measured_ops[1].n > 0)
                .then(|| Dist::from_hist(&self.measured_ops[1])),
            outstanding,
            devices,
            assumptions,
        }
    }
}

/// Reads `src` to the end and summarizes it.
pub fn trace_stats(src: &mut dyn TraceSource) -> Result<TraceStats, TraceError> {
    let mut b = StatsBuilder::new();
    while let Some(r) = src.next_request()? {
        b.add(&r);
    }
    Ok(b.finish(src.assumptions()))
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

impl TraceStats {
    /// The human-readable report of `wattio trace stats`.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "requests            {}", self.requests);
        let _ = writeln!(
            s,
            "reads / writes      {} / {}  (read fraction {:.4}); flushes {}, discards {}",
            self.reads, self.writes, self.read_fraction, self.flushes, self.discards
        );
        let _ = writeln!(
            s,
            "bytes read/written  {} / {}  (mean size {:.0} B)",
            self.bytes_read, self.bytes_written, self.mean_size_bytes
        );
        let _ = writeln!(s, "duration            {}", fmt_ns(self.duration_ns as f64));
        let _ = writeln!(
            s,
            "footprint           {} pages of 4 KiB = {} bytes{}",
            self.footprint_pages,
            self.footprint_bytes,
            if self.footprint_exact {
                ""
            } else {
                " (estimate)"
            }
        );
        let _ = writeln!(s, "sequential fraction {:.4}", self.sequential_fraction);
        let _ = writeln!(s, "request sizes:");
        for b in &self.size_histogram {
            let hi = b.hi.map(|h| h.to_string()).unwrap_or_else(|| "∞".into());
            let _ = writeln!(s, "  [{}, {}) B: {}", b.lo, hi, b.count);
        }
        for (name, d) in [
            ("inter-arrival", &self.inter_arrival),
            ("idle gaps", &self.idle_gaps),
        ]
        .into_iter()
        .chain(self.measured.as_ref().map(|m| ("measured response", m)))
        {
            let _ = writeln!(s, "{name}: {}", d.summary());
            for b in d.histogram.iter().filter(|b| b.count > 0) {
                let hi = b.hi.map(|h| fmt_ns(h as f64)).unwrap_or_else(|| "∞".into());
                let _ = writeln!(s, "  [{}, {}): {}", fmt_ns(b.lo as f64), hi, b.count);
            }
        }
        // The reads' and writes' measured times: a summary line each, the bins above.
        for (name, d) in [
            ("  of reads", &self.measured_reads),
            ("  of writes", &self.measured_writes),
        ] {
            if let Some(d) = d {
                let _ = writeln!(s, "{name}: {}", d.summary());
            }
        }
        if let Some(o) = &self.outstanding {
            let _ = writeln!(
                s,
                "in flight at arrival (same device, itself included): mean {:.2} max {}{}",
                o.mean,
                o.max,
                if o.capped { " (at least: capped)" } else { "" }
            );
            for b in &o.histogram {
                let range = match b.hi {
                    Some(h) if h == b.lo + 1 => b.lo.to_string(),
                    Some(h) => format!("{}–{}", b.lo, h - 1),
                    None => format!("≥ {}", b.lo),
                };
                let _ = writeln!(s, "  {range}: {}", b.count);
            }
        }
        let _ = writeln!(s, "idle time in gaps longer than t (all devices):");
        for i in &self.idle_over {
            let _ = writeln!(
                s,
                "  t = {:>2} s: {} gaps, {:.1} s idle, {:.1} s beyond t",
                i.threshold_s, i.gaps, i.idle_s, i.beyond_threshold_s
            );
        }
        let _ = writeln!(s, "devices:");
        for d in &self.devices {
            let _ = writeln!(
                s,
                "  dev {}: {} requests, read fraction {:.4}, {} B read, {} B written, sequential {:.4}, idle beyond 10 s: {:.1} s",
                d.dev,
                d.requests,
                d.read_fraction,
                d.bytes_read,
                d.bytes_written,
                d.sequential_fraction,
                d.idle_over.get(2).map_or(0.0, |i| i.beyond_threshold_s)
            );
        }
        if !self.assumptions.is_empty() {
            let _ = writeln!(s, "assumptions:");
            for a in &self.assumptions {
                let _ = writeln!(s, "  {a}");
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_hist_buckets_cover_values_and_bounds_invert_index() {
        for v in [
            0u64,
            1,
            31,
            32,
            33,
            63,
            64,
            100,
            1000,
            123_456_789,
            u64::MAX / 3,
        ] {
            let i = LogHist::index(v);
            let (lo, hi) = LogHist::bounds(i);
            assert!(lo <= v && v < hi, "{v} not in [{lo}, {hi}) (bucket {i})");
        }
    }

    #[test]
    fn requests_in_flight_at_each_arrival_per_device() {
        const MS: u64 = 1_000_000;
        let mut b = StatsBuilder::new();
        // dev 0: arrivals 0, 1, 2 ms measured 5 ms each, then 10 ms alone (and one at
        // 5 ms sharp, when the first has just completed); dev 1's request in between is
        // its own device's only one.
        for (at, dev, m) in [
            (0, 0, 5),
            (1, 0, 5),
            (2, 0, 5),
            (3, 1, 50),
            (5, 0, 1),
            (10, 0, 1),
        ] {
            let mut r = Request::new(at * MS, Op::Read, 0, 4096);
            r.dev = dev;
            r.measured = Some(m * MS);
            b.add(&r);
        }
        let t = b.finish(Vec::new());
        // In flight at arrival: 1, 2, 3 | 1 | 3 (the 1 and 2 ms ones and itself), 1.
        let o = t.outstanding.as_ref().unwrap();
        assert_eq!((o.max, o.capped), (3, false));
        assert!((o.mean - 11.0 / 6.0).abs() < 1e-12, "{}", o.mean);
        let bins: Vec<_> = o.histogram.iter().map(|b| (b.lo, b.hi, b.count)).collect();
        assert_eq!(bins, [(1, Some(2), 3), (2, Some(4), 3)]);
        // All reads here, each measured 5, 5, 5, 50, 1, 1 ms: no writes to summarize.
        let r = t.measured_reads.as_ref().unwrap();
        assert_eq!((r.count, r.max_ns), (6, 50 * MS));
        assert!(
            (r.mean_ns - 67.0 / 6.0 * MS as f64).abs() < 1.0,
            "{}",
            r.mean_ns
        );
        assert!(t.measured_writes.is_none());
        assert!(
            t.to_text().contains("  of reads: n=6 mean 11.167 ms"),
            "{}",
            t.to_text()
        );
        let per_dev: Vec<_> = t.devices.iter().map(|d| d.max_outstanding).collect();
        assert_eq!(per_dev, [3, 1]);
        assert!(t.to_text().contains("in flight at arrival (same device, itself included): mean 1.83 max 3\n  1: 3\n  2–3: 3\n"));
        // Without measured times there is nothing to say.
        let mut b = StatsBuilder::new();
        b.add(&Request::new(0, Op::Read, 0, 4096));
        assert!(b.finish(Vec::new()).outstanding.is_none());
    }

    #[test]
    fn hll_estimates_within_two_percent() {
        let mut h = Hll::new();
        for x in 0..200_000u64 {
            h.add(x);
        }
        let e = h.estimate() as f64;
        assert!((e - 200_000.0).abs() / 200_000.0 < 0.02, "estimate {e}");
    }
}
