//! Simulated requests per second of the built-in stack: a generated Poisson trace on the
//! parametric HDD behind a fixed-timeout spin-down layer, no per-request output. Prints the
//! rate and the peak resident memory for two trace lengths, to show memory stays flat.
//!
//!     cargo bench -p wattio-engine --bench sim [-- REQUESTS]

use std::sync::Arc;
use std::time::Instant;
use wattio_core::TraceSource;
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Opener, RunConfig, Simulator};
use wattio_workload::Generator;

const CONFIG: &str = r#"
[run]
seed = 42

[[device]]
name = "disk"
model = "wd800-fs2"

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 5

[workload]
arrivals = "poisson"
duration_s = 1e9
rate = 40
read_fraction = 0.7
size = { dist = "choice", values = [4096, 16384, 65536], weights = [0.6, 0.3, 0.1] }
footprint_bytes = 70_000_000_000
popularity = { dist = "zipf", s = 0.9 }
sequential_fraction = 0.3
streams = 4
"#;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn run(requests: u64) -> (f64, f64) {
    let text = CONFIG.replace(
        "rate = 40",
        &format!("rate = 40\nmax_requests = {requests}"),
    );
    let cfg = RunConfig::from_toml("bench", &text).expect("config");
    let cat = Catalogue::embedded().expect("catalogue");
    let w = cfg.workload.clone().expect("workload");
    let opener: Opener =
        Arc::new(move || Ok(Box::new(Generator::new(&w, 42)?) as Box<dyn TraceSource>));
    // Generation alone, for the split.
    let t0 = Instant::now();
    let mut g = opener().expect("generator");
    let mut n = 0u64;
    while g.next_request().expect("request").is_some() {
        n += 1;
    }
    let gen_s = t0.elapsed().as_secs_f64();
    assert_eq!(n, requests);
    let asm = assemble(&cfg, &cat, &opener, &mut |_, _| Err("none".into()), 0).expect("assemble");
    let mut src = opener().expect("source");
    let t0 = Instant::now();
    let out = Simulator::new(asm.stack, asm.devices)
        .run(src.as_mut(), None, 0, &mut NullSink)
        .expect("run");
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(out.requests, requests);
    (requests as f64 / secs, requests as f64 / gen_s)
}

fn main() {
    let big: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let small = big / 10;
    let (r_small, _) = run(small);
    let rss_small = peak_rss_kib();
    let (r_big, g_big) = run(big);
    let rss_big = peak_rss_kib();
    println!(
        "built-in stack: parametric HDD (wd800-fs2) + fixed 5 s spin-down, generated Poisson trace"
    );
    println!(
        "{:>12} requests: {:>6.2} M req/s simulated (incl. generation), peak RSS {:>7} KiB",
        small,
        r_small / 1e6,
        rss_small
    );
    println!(
        "{:>12} requests: {:>6.2} M req/s simulated (incl. generation), peak RSS {:>7} KiB",
        big,
        r_big / 1e6,
        rss_big
    );
    println!("generation alone: {:.2} M req/s", g_big / 1e6);
    println!(
        "target 10 M req/s: {:.2}x; memory growth from {}x more requests: {:.2}x",
        r_big / 10e6,
        big / small,
        rss_big as f64 / rss_small.max(1) as f64
    );
}
