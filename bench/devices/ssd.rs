//! SSD model throughput: one million mixed random requests (4–64 KiB, 70 % reads) on the
//! catalogue's Samsung 980 PRO 1 TB, after a sequential fill, and again after random-write
//! ageing so garbage collection is in steady state. Prints requests/s of the timing model alone and through the
//! core device runtime, next to MQSim's ~100,000 requests/s.
//!
//! Run: cargo bench -p wattio-devices --bench ssd [-- filled|aged|runtime]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Instant;
use wattio_core::device::{DevEvent, DeviceInfo, DeviceRuntime, Timing};
use wattio_core::io::{Io, Op, Request};
use wattio_core::time::Nanos;
use wattio_devices::ssd::Ssd;
use wattio_devices::Catalogue;

const MQSIM_REQ_PER_S: f64 = 100_000.0;
const TARGET_REQ_PER_S: f64 = 1_000_000.0;
const N: u64 = 1_000_000;
const DEVICE: &str = "samsung-980-pro-1tb-ssd";
/// Inter-arrival time: 10,000 requests/s offered, which the aged drive can sustain.
const GAP: Nanos = 100_000;

struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The i-th request of the mixed workload (arrivals every `GAP`).
fn request(rng: &mut SplitMix, i: u64, capacity: u64) -> Io {
    let len = 4096u32 << (rng.next() % 5);
    let op = if rng.next() % 10 < 7 {
        Op::Read
    } else {
        Op::Write
    };
    let slots = (capacity - len as u64) / 4096;
    let offset = (rng.next() % slots) * 4096;
    Request::new(i * GAP, op, offset, len).io(i)
}

/// The drive after a sequential fill; with `age`, also after random page writes until
/// garbage collection is in steady state.
fn drive(spec: &wattio_devices::DeviceSpec, age: bool) -> Ssd {
    let mut s = Ssd::from_toml(&spec.timing).expect("catalogue entry builds");
    let t = Instant::now();
    s.precondition_sequential();
    if age {
        s.precondition_random(12_000_000, 7);
    }
    eprintln!(
        "setup ({}): {:.1} s",
        if age {
            "fill + 12 M random page writes"
        } else {
            "sequential fill"
        },
        t.elapsed().as_secs_f64(),
    );
    s
}

/// Services every request at its arrival time; prints and returns requests/s.
fn run_model(label: &str, s: &mut Ssd, ios: &[Io]) -> f64 {
    let t = Instant::now();
    let cpu0 = cpu_secs();
    let mut sum: Nanos = 0;
    for (i, io) in ios.iter().enumerate() {
        sum = sum.wrapping_add(s.service(i as u64 * GAP, io).total());
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu0;
    let n = ios.len() as f64;
    let rate = n / cpu;
    let c = s.counters();
    println!(
        "{label}: {n} requests in {cpu:.3} s CPU ({wall:.3} s wall) = {:.2} M req/s = {:.1}x MQSim (~100k req/s), {:.2}x the 1 M req/s target | mean response {:.1} us, WAF {:.2}, GC runs {}",
        rate / 1e6,
        rate / MQSIM_REQ_PER_S,
        rate / TARGET_REQ_PER_S,
        sum as f64 / n / 1e3,
        c.waf(),
        c.gc_runs
    );
    rate
}

/// CPU time of this thread (user + system), from /proc in USER_HZ (100 Hz) ticks: the
/// machine is shared, so wall time overstates the single-core cost.
fn cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/thread-self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the parenthesised command name; utime and stime are 14 and 15.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let u: f64 = f.get(11)?.parse().ok()?;
            let k: f64 = f.get(12)?.parse().ok()?;
            Some((u + k) / 100.0)
        })
        .unwrap_or(f64::NAN)
}

fn max_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

fn main() {
    let cat = Catalogue::embedded().expect("embedded catalogue");
    let spec = cat.get(DEVICE).expect("device in catalogue");
    let cap = spec
        .build_timing()
        .expect("catalogue entry builds")
        .capacity();
    let mut rng = SplitMix(42);
    let ios: Vec<Io> = (0..N).map(|i| request(&mut rng, i, cap)).collect();

    // Phases to run: `filled`, `aged`, `runtime` (default: all). `cargo bench` adds `--bench`.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |p: &str| only.is_empty() || only.iter().any(|a| a == p);

    // 1. The timing model alone on a full (sequentially filled) drive.
    if want("filled") {
        let mut s = drive(spec, false);
        run_model(&format!("ssd model, filled {DEVICE}"), &mut s, &ios);
    }
    // 2. The same on a drive aged by random writes: GC in steady state (worst case).
    if want("aged") {
        let mut s = drive(spec, true);
        run_model(
            &format!("ssd model, aged {DEVICE} (GC steady state)"),
            &mut s,
            &ios,
        );
    }
    if !want("runtime") {
        println!("peak RSS {:.0} MiB", max_rss_mib());
        return;
    }

    // 3. Through the core device runtime (queue, power state machine, ledger).
    let power = Arc::new(spec.power_spec().expect("power spec"));
    let info = DeviceInfo::new(0, DEVICE, cap, power);
    let mut dev = DeviceRuntime::new(info, Box::new(drive(spec, false)), None, 0);
    let mut ev = Vec::with_capacity(64);
    let mut heap: BinaryHeap<Reverse<(Nanos, u32)>> = BinaryHeap::new();
    let mut completed = 0u64;
    let t = Instant::now();
    let cpu0 = cpu_secs();
    let mut next = 0usize;
    loop {
        let next_arrival = (next < ios.len()).then_some(next as u64 * GAP);
        let next_end = heap.peek().map(|Reverse((at, _))| *at);
        match (next_arrival, next_end) {
            (Some(a), e) if !matches!(e, Some(e) if e <= a) => {
                dev.submit(a, ios[next], &mut ev);
                next += 1;
            }
            (_, Some(_)) => {
                let Some(Reverse((at, token))) = heap.pop() else {
                    break;
                };
                if dev.service_end(at, token, &mut ev).is_some() {
                    completed += 1;
                }
            }
            _ => break,
        }
        for e in ev.drain(..) {
            if let DevEvent::ServiceEnd { at, token } = e {
                heap.push(Reverse((at, token)));
            }
        }
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu0;
    let rate = completed as f64 / cpu;
    println!(
        "ssd model + device runtime, filled drive: {completed} requests in {cpu:.3} s CPU ({wall:.3} s wall) = {:.2} M req/s; {:.1}x MQSim; energy {:.3} J",
        rate / 1e6,
        rate / MQSIM_REQ_PER_S,
        dev.energy_j(N * GAP)
    );
    println!(
        "peak RSS {:.0} MiB (1 TB drive: u32 mapping tables, 2 x {:.0} MiB)",
        max_rss_mib(),
        61_047_662.0 * 4.0 / 1048576.0
    );
}
