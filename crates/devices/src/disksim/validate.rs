//! Replay of a DiskSim validation trace and DiskSim's demerit figure.
//!
//! Trace lines: `R|W Hit|Miss|Doub|Trip blkno bcount service_us delay_us` (sectors of 512
//! bytes; `service_us` measured on the real drive). The replay is closed-loop with one
//! request outstanding: the first request is issued at t = 0, each later one when the
//! previous completes plus the previous line's `delay_us`.
//!
//! The demerit (Ruemmler & Wilkes) is the RMS horizontal distance between the simulated
//! and measured response-time CDFs, computed as DiskSim's `rms` tool does on DiskSim's
//! binned distributions: buckets starting at integer µs, each 1 µs + 1 % of its start
//! wide (1750 of them); for p = 0.0001 … 1 the time where each CDF reaches p,
//! interpolated linearly within the bucket.

/// DiskSim 4.0's own demerit (ms) on each drive of its validation set, as its `valid/runvalid`
/// prints it (the data's README table; DiskSim's 32- and 64-bit builds differ in the 4th
/// decimal, so compare within ±0.001 ms).
// 0.318 is DiskSim's published figure, not 1/π.
#[allow(clippy::approx_constant)]
pub const DISKSIM_DEMERIT_MS: &[(&str, f64)] = &[
    ("atlas_III", 0.378),
    ("barracuda", 0.349),
    ("cheetah4LP", 0.318),
    ("atlas10k", 0.268),
    ("hp_c2247a", 0.090),
    ("hp_c2490a", 0.254),
    ("dec_rz26", 0.340),
];

use super::import_parv;
use crate::mechanical::{MechanicalDisk, SECTOR};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;
use std::sync::Arc;
use wattio_core::device::{DevEvent, DeviceInfo, DeviceRuntime, Timing};
use wattio_core::io::{Io, Op, Request};
use wattio_core::power::PowerSpec;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceLine {
    pub op: Op,
    pub blkno: u64,
    pub bcount: u32,
    pub service_us: f64,
    pub delay_us: f64,
}

/// Parse a validation trace; errors name the line and the field.
pub fn parse_trace(text: &str, file: &str) -> Result<Vec<TraceLine>, String> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        let at = |what: &str| format!("{file}:{}: {what} (line `{l}`)", i + 1);
        if f.len() != 6 {
            return Err(at(
                "expected 6 fields: R|W Hit|Miss blkno bcount service_us delay_us",
            ));
        }
        let op = match f[0] {
            "R" | "r" => Op::Read,
            "W" | "w" => Op::Write,
            _ => return Err(at("field 1: expected R or W")),
        };
        let blkno = f[2]
            .parse::<u64>()
            .map_err(|_| at("field 3 (blkno): expected a whole number"))?;
        let bcount = f[3]
            .parse::<u32>()
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| at("field 4 (bcount): expected a whole number ≥ 1"))?;
        let num = |s: &str, name: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| at(&format!("{name}: expected a number ≥ 0")))
        };
        out.push(TraceLine {
            op,
            blkno,
            bcount,
            service_us: num(f[4], "field 5 (service_us)")?,
            delay_us: num(f[5], "field 6 (delay_us)")?,
        });
    }
    Ok(out)
}

/// How a trace with measured response times is replayed on a model.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Loop {
    /// One request outstanding: each is issued when the previous one completes on the
    /// model, plus the trace's think time (its arrival − the previous request's arrival −
    /// that one's measured response, at least 0). DiskSim's validation replay, and right
    /// for a trace that never had two requests outstanding.
    Closed,
    /// At the recorded arrivals, first come first served behind the earlier ones on the
    /// model. A drive that reordered its own queue (NCQ) is compared with a model that
    /// does not.
    Open,
}

impl Loop {
    pub fn parse(s: &str) -> Result<Loop, String> {
        match s {
            "closed" => Ok(Loop::Closed),
            "open" => Ok(Loop::Open),
            _ => Err(format!("replay `{s}`: expected closed or open")),
        }
    }
}

/// The most requests outstanding at once in a trace, by its arrivals and measured responses
/// (a request without one counts as completing at its arrival). Requests in arrival order.
pub fn max_outstanding(reqs: &[Request]) -> usize {
    let mut done: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
    let mut most = 0;
    for r in reqs {
        while done.peek().is_some_and(|d| d.0 <= r.arrival) {
            done.pop();
        }
        done.push(Reverse(r.arrival.saturating_add(r.measured.unwrap_or(0))));
        most = most.max(done.len());
    }
    most
}

/// A replay of requests with measured response times ([`replay_requests`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replayed {
    /// Simulated and measured response times (µs) of every request that has a measured one.
    pub sim_us: Vec<f64>,
    pub measured_us: Vec<f64>,
    /// Their ops (read or write).
    pub ops: Vec<Op>,
    /// Requests not replayed: flushes, discards and requests without data.
    pub not_replayed: usize,
    /// Replayed but not compared: no measured response.
    pub unmeasured: usize,
}

/// Replays `reqs` (in arrival order) on `disk` in `mode`, reads and writes with data only.
/// A request past the model's capacity is an error naming it.
pub fn replay_requests(
    mut disk: Box<dyn Timing>,
    reqs: &[Request],
    mode: Loop,
) -> Result<Replayed, String> {
    let capacity = disk.capacity();
    let mut out = Replayed::default();
    let mut ios = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.iter().enumerate() {
        if !matches!(r.op, Op::Read | Op::Write) || r.len == 0 {
            out.not_replayed += 1;
            continue;
        }
        let end = r.offset.saturating_add(r.len as u64);
        if end > capacity {
            return Err(format!(
                "request {i} ({} of {} bytes at byte {}) ends past the model's {capacity} bytes",
                r.op.as_str(),
                r.len,
                r.offset
            ));
        }
        let io = r.io(ios.len() as u64);
        ios.push((i, r, io));
    }
    // Each replayed request's issue and completion on the model.
    let mut times = vec![(0u64, 0u64); ios.len()];
    match mode {
        Loop::Closed => closed_loop(disk.as_mut(), &ios, &mut times),
        Loop::Open => open_loop(disk, &ios, &mut times)?,
    }
    for ((_, r, _), (issue, done)) in ios.iter().zip(times) {
        match r.measured {
            Some(m) => {
                out.sim_us.push((done - issue) as f64 / 1e3);
                out.measured_us.push(m as f64 / 1e3);
                out.ops.push(r.op);
            }
            None => out.unmeasured += 1,
        }
    }
    Ok(out)
}

/// The closed-loop replay: one request outstanding, each issued when the model completed
/// the previous one plus the trace's think time (DiskSim's validation replay).
fn closed_loop(disk: &mut dyn Timing, ios: &[(usize, &Request, Io)], times: &mut [(u64, u64)]) {
    // When the model completed the previous request, and when the trace did.
    let mut prev: Option<(u64, u64)> = None;
    for (k, (_, r, io)) in ios.iter().enumerate() {
        let issue = prev.map_or(0, |(model_done, trace_done)| {
            model_done.saturating_add(r.arrival.saturating_sub(trace_done))
        });
        let done = issue.saturating_add(disk.service(issue, io).total());
        times[k] = (issue, done);
        prev = Some((done, r.arrival.saturating_add(r.measured.unwrap_or(0))));
    }
}

/// Requests an open-loop replay lets wait in the model's queue at most: a model slower than
/// the traced device builds a queue without bound, and one that schedules looks at all of it
/// for every pick.
pub const MAX_QUEUED: usize = 1 << 16;

/// The open-loop replay: each I/O is submitted at its recorded arrival to the model in the
/// simulator's own device runtime ([`DeviceRuntime`]: its queue, its `max_concurrent`
/// slots, the model's pick if it schedules), always powered. A completion at the same
/// instant as an arrival is handled first.
fn open_loop(
    disk: Box<dyn Timing>,
    ios: &[(usize, &Request, Io)],
    times: &mut [(u64, u64)],
) -> Result<(), String> {
    let slots = disk.max_concurrent().max(1) as usize;
    let info = DeviceInfo::new(
        0,
        "model",
        disk.capacity(),
        Arc::new(PowerSpec::constant(0.0)),
    );
    let mut dev = DeviceRuntime::new(info, disk, None, 0);
    let mut ends: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut ev = Vec::new();
    let mut next = 0;
    loop {
        let arrival = ios.get(next).map(|(_, r, _)| r.arrival);
        let end = ends.peek().map(|e| e.0 .0);
        match (arrival, end) {
            (None, None) => break,
            (Some(a), Some(t)) if t <= a => service_end(&mut dev, &mut ends, &mut ev, times),
            (None, Some(_)) => service_end(&mut dev, &mut ends, &mut ev, times),
            (Some(a), _) => {
                let (i, _, io) = &ios[next];
                times[next].0 = a;
                dev.submit(a, *io, &mut ev);
                if dev.outstanding().saturating_sub(slots) > MAX_QUEUED {
                    return Err(format!(
                        "request {i}: more than {MAX_QUEUED} requests wait in the model's queue \
                         at {:.3} s: the model is far slower than the traced device at this \
                         load (--replay closed compares request by request)",
                        a as f64 / 1e9
                    ));
                }
                next += 1;
            }
        }
        for e in ev.drain(..) {
            if let DevEvent::ServiceEnd { at, token } = e {
                ends.push(Reverse((at, token)));
            }
        }
    }
    Ok(())
}

/// The earliest service end: the finished I/O's completion time, and what it starts.
fn service_end(
    dev: &mut DeviceRuntime,
    ends: &mut BinaryHeap<Reverse<(u64, u32)>>,
    ev: &mut Vec<DevEvent>,
    times: &mut [(u64, u64)],
) {
    if let Some(Reverse((at, token))) = ends.pop() {
        if let Some(c) = dev.service_end(at, token, ev) {
            times[c.io.id.0 as usize].1 = c.finished;
        }
    }
}

/// What `wattio disk validate` reports.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Validation {
    pub drive: String,
    /// Requests compared.
    pub requests: usize,
    pub replay: Loop,
    /// The most requests the trace had outstanding at once.
    pub max_outstanding: usize,
    /// Flushes, discards and requests without data, not replayed; replayed requests without a
    /// measured response, not compared.
    pub not_replayed: usize,
    pub unmeasured: usize,
    pub demerit_ms: f64,
    pub mean_sim_ms: f64,
    pub mean_measured_ms: f64,
    pub p90_sim_ms: f64,
    pub p90_measured_ms: f64,
    /// The same figures for the reads alone and the writes alone (`None` without any): a
    /// drive's write cache answers writes in another time than its reads.
    pub reads: Option<OpValidation>,
    pub writes: Option<OpValidation>,
    /// Parameters the model does not implement (see the importer).
    pub unsupported: Vec<String>,
}

const BUCKETS: usize = 1750;

fn bucket_starts() -> Vec<f64> {
    let mut s = Vec::with_capacity(BUCKETS + 1);
    let mut x = 0.0f64;
    for _ in 0..=BUCKETS {
        s.push(x);
        x += 1.0 + (0.01 * x).floor();
    }
    s
}

/// Per-bucket cumulative fractions of `values_us`.
fn cdf(values_us: &[f64], starts: &[f64]) -> Vec<f64> {
    let mut counts = vec![0u64; BUCKETS];
    for &v in values_us {
        let i = starts.partition_point(|&s| s <= v).saturating_sub(1);
        counts[i.min(BUCKETS - 1)] += 1;
    }
    let n = values_us.len().max(1) as f64;
    let mut acc = 0u64;
    counts
        .iter()
        .map(|c| {
            acc += c;
            acc as f64 / n
        })
        .collect()
}

fn time_at(p: f64, cum: &[f64], starts: &[f64]) -> f64 {
    let i = cum.partition_point(|&c| c < p - 1e-12).min(BUCKETS - 1);
    let lo = if i == 0 { 0.0 } else { cum[i - 1] };
    let hi = cum[i];
    let frac = if hi > lo { (p - lo) / (hi - lo) } else { 1.0 };
    starts[i] + frac * (starts[i + 1] - starts[i])
}

/// DiskSim's demerit (ms) between two samples of response times in µs.
pub fn demerit_ms(sim_us: &[f64], measured_us: &[f64]) -> f64 {
    let starts = bucket_starts();
    let a = cdf(sim_us, &starts);
    let b = cdf(measured_us, &starts);
    let mut sq = 0.0;
    let mut n = 0u32;
    for k in 1..=10_000u32 {
        let p = k as f64 * 1e-4;
        let d = time_at(p, &a, &starts) - time_at(p, &b, &starts);
        sq += d * d;
        n += 1;
    }
    (sq / n as f64).sqrt() / 1000.0
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn p90(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() as f64 * 0.9).ceil() as usize).saturating_sub(1);
    s.get(i).copied().unwrap_or(0.0)
}

/// Replay `trace` on `disk`; returns simulated response times in µs.
pub fn replay(disk: &mut dyn Timing, trace: &[TraceLine]) -> Vec<f64> {
    // As requests that arrive with the recorded timing (arrival = the previous one's
    // arrival + its service + its delay): the think times are then the delays.
    let mut t: u64 = 0;
    let reqs: Vec<Request> = trace
        .iter()
        .map(|l| {
            let mut r = Request::new(t, l.op, l.blkno * SECTOR, l.bcount * SECTOR as u32);
            let service = (l.service_us * 1e3).round() as u64;
            r.measured = Some(service);
            t += service + (l.delay_us * 1e3).round() as u64;
            r
        })
        .collect();
    let ios: Vec<_> = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| (i, r, r.io(i as u64)))
        .collect();
    let mut times = vec![(0, 0); ios.len()];
    closed_loop(disk, &ios, &mut times);
    times
        .iter()
        .map(|(issue, done)| (done - issue) as f64 / 1e3)
        .collect()
}

/// Import `parv`, replay `trace` and compare with the measured response times.
pub fn validate(parv: &Path, trace: &Path) -> Result<Validation, String> {
    let imp = import_parv(parv)?;
    let text = std::fs::read_to_string(trace).map_err(|e| format!("{}: {e}", trace.display()))?;
    let lines = parse_trace(&text, &trace.display().to_string())?;
    if lines.is_empty() {
        return Err(format!("{}: no requests", trace.display()));
    }
    let mut disk = MechanicalDisk::new(imp.timing.clone())?;
    let sim = replay(&mut disk, &lines);
    let meas: Vec<f64> = lines.iter().map(|l| l.service_us).collect();
    let replayed = Replayed {
        sim_us: sim,
        measured_us: meas,
        ops: lines.iter().map(|l| l.op).collect(),
        ..Replayed::default()
    };
    Ok(Validation::new(
        imp.name,
        &replayed,
        Loop::Closed,
        1,
        imp.unsupported,
    ))
}

/// [`Validation`]'s figures for one op.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OpValidation {
    pub requests: usize,
    pub demerit_ms: f64,
    pub mean_sim_ms: f64,
    pub mean_measured_ms: f64,
    pub p90_sim_ms: f64,
    pub p90_measured_ms: f64,
}

impl OpValidation {
    fn of(r: &Replayed, op: Op) -> Option<OpValidation> {
        let pick = |v: &[f64]| -> Vec<f64> {
            v.iter()
                .zip(&r.ops)
                .filter(|(_, o)| **o == op)
                .map(|(x, _)| *x)
                .collect()
        };
        let (sim, meas) = (pick(&r.sim_us), pick(&r.measured_us));
        (!sim.is_empty()).then(|| OpValidation {
            requests: sim.len(),
            demerit_ms: demerit_ms(&sim, &meas),
            mean_sim_ms: mean(&sim) / 1e3,
            mean_measured_ms: mean(&meas) / 1e3,
            p90_sim_ms: p90(&sim) / 1e3,
            p90_measured_ms: p90(&meas) / 1e3,
        })
    }
}

impl Validation {
    /// The report on a replay: demerit, means and 90th percentiles of both samples.
    pub fn new(
        drive: String,
        r: &Replayed,
        replay: Loop,
        max_outstanding: usize,
        unsupported: Vec<String>,
    ) -> Validation {
        let (sim, meas) = (&r.sim_us, &r.measured_us);
        Validation {
            drive,
            requests: sim.len(),
            replay,
            max_outstanding,
            not_replayed: r.not_replayed,
            unmeasured: r.unmeasured,
            demerit_ms: demerit_ms(sim, meas),
            mean_sim_ms: mean(sim) / 1e3,
            mean_measured_ms: mean(meas) / 1e3,
            p90_sim_ms: p90(sim) / 1e3,
            p90_measured_ms: p90(meas) / 1e3,
            reads: OpValidation::of(r, Op::Read),
            writes: OpValidation::of(r, Op::Write),
            unsupported,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_samples_have_zero_demerit() {
        let v: Vec<f64> = (0..1000).map(|i| 1000.0 + i as f64 * 7.0).collect();
        assert_eq!(demerit_ms(&v, &v), 0.0);
    }

    #[test]
    fn shift_by_whole_buckets() {
        // All values in one bucket each: [0, 1) vs [100, 102) µs (width 1 + 1 % of 100).
        // The interpolated times run across each bucket: t_a(p) = p, t_b(p) = 100 + 2p,
        // so the RMS distance is sqrt(∫(100 + p)² dp) µs.
        let a = vec![0.5; 10];
        let b = vec![101.0; 10];
        let exact = (10_000.0f64 + 100.0 + 1.0 / 3.0).sqrt() / 1000.0;
        let d = demerit_ms(&a, &b);
        assert!((d - exact).abs() < 1e-4, "{d} vs {exact}");
    }

    /// A device with a constant service time, `slots` I/Os at once, optionally serving its
    /// queue newest first (a stand-in for a model that schedules).
    struct Fixed {
        svc: u64,
        slots: u32,
        newest_first: bool,
    }

    impl Timing for Fixed {
        fn capacity(&self) -> u64 {
            1 << 20
        }
        fn service(&mut self, _start: u64, _io: &Io) -> wattio_core::device::Service {
            wattio_core::device::Service {
                transfer_ns: self.svc,
                ..Default::default()
            }
        }
        fn max_concurrent(&self) -> u32 {
            self.slots
        }
        fn schedules(&self) -> bool {
            self.newest_first
        }
        fn pick(&mut self, _now: u64, queue: &[Io]) -> usize {
            queue.len() - 1
        }
    }

    const MS: u64 = 1_000_000;

    fn reqs(arrivals_ms: &[u64], measured_ms: u64) -> Vec<Request> {
        arrivals_ms
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let mut r = Request::new(a * MS, Op::Read, i as u64 * 4096, 4096);
                r.measured = Some(measured_ms * MS);
                r
            })
            .collect()
    }

    fn fixed(svc_ms: u64, slots: u32, newest_first: bool) -> Box<dyn Timing> {
        Box::new(Fixed {
            svc: svc_ms * MS,
            slots,
            newest_first,
        })
    }

    #[test]
    fn closed_replay_keeps_the_traces_think_times() {
        // Arrivals 0 and 10 ms, each measured 3 ms: a 7 ms think time. On a 5 ms model the
        // second is issued at 5 + 7 = 12 ms; both respond in 5 ms.
        let r = replay_requests(fixed(5, 1, false), &reqs(&[0, 10], 3), Loop::Closed).unwrap();
        assert_eq!(r.sim_us, [5_000.0, 5_000.0]);
        assert_eq!(r.measured_us, [3_000.0, 3_000.0]);
    }

    #[test]
    fn open_replay_queues_behind_the_models_slots_and_its_pick() {
        let t = reqs(&[0, 2], 3);
        let one = replay_requests(fixed(5, 1, false), &t, Loop::Open).unwrap();
        assert_eq!(one.sim_us, [5_000.0, 8_000.0]);
        let two = replay_requests(fixed(5, 2, false), &t, Loop::Open).unwrap();
        assert_eq!(two.sim_us, [5_000.0, 5_000.0]);
        // Arrivals 0, 1, 2 ms on one 5 ms slot, newest first: the third starts at 5 ms
        // (done 10, 8 ms after it came), the second at 10 (done 15, 14 ms).
        let t = reqs(&[0, 1, 2], 3);
        let lifo = replay_requests(fixed(5, 1, true), &t, Loop::Open).unwrap();
        assert_eq!(lifo.sim_us, [5_000.0, 14_000.0, 8_000.0]);
        let fifo = replay_requests(fixed(5, 1, false), &t, Loop::Open).unwrap();
        assert_eq!(fifo.sim_us, [5_000.0, 9_000.0, 13_000.0]);
    }

    #[test]
    fn what_is_not_replayed_or_not_compared_is_counted_and_past_the_end_refused() {
        let mut t = reqs(&[0, 1, 2], 3);
        t[1].op = Op::Flush;
        t[1].len = 0;
        t[2].measured = None;
        let r = replay_requests(fixed(5, 1, false), &t, Loop::Closed).unwrap();
        assert_eq!((r.sim_us.len(), r.not_replayed, r.unmeasured), (1, 1, 1));
        t[2].offset = (1 << 20) - 512;
        let e = replay_requests(fixed(5, 1, false), &t, Loop::Open).unwrap_err();
        assert!(e.starts_with("request 2 (read of 4096 bytes at byte 1048064) ends past the model's 1048576 bytes"), "{e}");
    }

    #[test]
    fn an_open_replay_that_outruns_the_model_stops_with_a_reason() {
        // A request every millisecond on a 5 ms model: the queue grows by 4 a 5 ms.
        let n = MAX_QUEUED * 2;
        let t: Vec<u64> = (0..n as u64).collect();
        let mut t = reqs(&t, 1);
        for r in &mut t {
            r.offset = 0;
        }
        let e = replay_requests(fixed(5, 1, false), &t, Loop::Open).unwrap_err();
        assert!(
            e.contains(&format!("more than {MAX_QUEUED} requests wait")),
            "{e}"
        );
        // Request k arrives at k ms, when ⌊k/5⌋ have completed (a completion at the same
        // instant first) and one is in service: k − ⌊k/5⌋ wait, first above 65,536 at
        // k = 81,921.
        let at: usize = e[8..e.find(':').unwrap()].parse().unwrap();
        assert_eq!(at, 81_921, "{e}");
        assert!(replay_requests(fixed(5, 1, false), &t, Loop::Closed).is_ok());
    }

    #[test]
    fn outstanding_requests_by_arrival_and_measured_response() {
        assert_eq!(max_outstanding(&reqs(&[0, 3, 6], 3)), 1);
        assert_eq!(max_outstanding(&reqs(&[0, 1, 5], 3)), 2);
        assert_eq!(max_outstanding(&reqs(&[0, 1, 2], 10)), 3);
    }

    #[test]
    fn trace_errors_name_line_and_field() {
        let e = parse_trace("R Hit 1 8 100 5\nW Miss x 8 1 1\n", "v.trace").unwrap_err();
        assert!(e.starts_with("v.trace:2: field 3"), "{e}");
        let ok = parse_trace("R Hit 1 8 100.5 5\n", "v.trace").unwrap();
        assert_eq!(ok[0].bcount, 8);
        assert_eq!(ok[0].service_us, 100.5);
    }
}
