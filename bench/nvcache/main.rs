//! Throughput of the non-volatile cache simulator: memory accesses per CPU second through
//! the L1 (32 KiB, 8 ways) and a 1 MiB 16-way hybrid PRAM + STT-RAM LLC, and peak memory
//! at two trace lengths (it must not grow with the length). `cargo bench -q -p
//! wattio-nvcache --bench nvcache`; results in docs/benchmarks.md. An argument N runs each
//! configuration once at N accesses (for a profiler: callgrind on 2 M accesses); a second,
//! `hc` or `hc-di4`, runs that configuration only.

use std::hint::black_box;
use wattio_nvcache::{Encoding, Hierarchy, Hybrid, LlcConfig, SimConfig, WearLevelling};

/// CPU time of this thread (ns), from the scheduler's own account.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Resident memory now (KiB), read while the run's simulator is still alive.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A generated access stream: 97 % of accesses within a 24 KiB hot region (the L1's), the
/// rest over 4 MiB; 30 % are 8-byte stores of a one-byte value (as a program's counters and
/// flags: few bits change, as in the captured stand-ins' 8 % of bits written), the rest
/// 8-byte loads.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> (u64, bool, u64) {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        let hot = x % 100 >= 3;
        let addr = if hot {
            (x >> 8) % (24 << 10)
        } else {
            (x >> 8) % (4 << 20)
        } & !7;
        (addr, (x >> 40) % 10 < 3, x >> 56)
    }
}

fn run(n: u64, enc: Encoding) -> (f64, f64, u64) {
    let cfg = SimConfig {
        l1_bytes: 32 << 10,
        l1_ways: 8,
        llc: LlcConfig {
            bytes: 1 << 20,
            ways: 16,
            encoding: enc,
            hybrid: Some(Hybrid::new(4)),
            wear_levelling: WearLevelling::default(),
            read_before_write: false,
        },
        clock: Default::default(),
        passes: 1,
    };
    let mut h = Hierarchy::new(&cfg).expect("valid config");
    let mut s = Stream(0x9E37_79B9_7F4A_7C15);
    let t0 = cpu_ns();
    let w0 = std::time::Instant::now();
    for _ in 0..n {
        let (addr, store, v) = s.next();
        let bytes = v.to_le_bytes();
        h.access(1, addr, 8, store.then_some(&bytes[..]));
    }
    let cpu = (cpu_ns() - t0) as f64 / 1e9;
    let wall = w0.elapsed().as_secs_f64();
    black_box(&h.llc.traffic);
    (n as f64 / cpu / 1e6, n as f64 / wall / 1e6, rss_kib())
}

fn main() {
    let lengths: Vec<u64> = match std::env::args().nth(1).and_then(|a| a.parse().ok()) {
        Some(n) => vec![n],
        None => vec![10_000_000, 50_000_000],
    };
    let mut s = Stream(1);
    let t0 = cpu_ns();
    let mut acc = 0u64;
    for _ in 0..20_000_000u64 {
        acc = acc.wrapping_add(s.next().0);
    }
    black_box(acc);
    println!(
        "generation alone: {:.1} M accesses/s (CPU)",
        20.0 / ((cpu_ns() - t0) as f64 / 1e9)
    );
    let only = std::env::args().nth(2);
    for (key, name, enc) in [
        ("hc", "L1 + HC", Encoding::Dw),
        ("hc-di4", "L1 + HC+DI(4)", Encoding::Di { unit: 4 }),
    ] {
        if only.as_deref().is_some_and(|o| o != key) {
            continue;
        }
        for &n in &lengths {
            let (cpu, wall, rss) = run(n, enc);
            println!(
                "{name:<14} {:>3} M accesses: {cpu:.1} M/s CPU ({wall:.1} M/s wall), RSS {rss} KiB",
                n / 1_000_000,
            );
        }
    }
}
