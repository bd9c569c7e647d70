//! Simulated requests per second of the built-in stack: a generated Poisson trace on the
//! parametric HDD behind a fixed-timeout spin-down layer, no per-request output. Prints the
//! rate and the peak resident memory for two trace lengths, to show memory stays flat.
//!
//!     cargo bench -p wattio-engine --bench sim [-- REQUESTS] [raid0|raid5|paraid0|paraid5|exces|fs2|mech]
//!
//! With `raid0` or `raid5` the stack is that array (64 KiB chunks) over five Fujitsu
//! MAP3367 (parametric), PARAID's disks, each behind the same spin-down layer; with
//! `paraid0` or `paraid5` it is PARAID over them (gears {2,5} RAID-0 / {3,5} RAID-5, the
//! paper's, with their default policy), which spins disks down itself (no spin-down layer). With
//! `exces`, the stack is EXCES (a 256 MiB cache on the paper's CompactFlash card) in
//! front of the paper's laptop disk with the paper's 5 s spin-down, on a 1 GiB footprint.
//!
//! With `fs2`, the stack is FS2 (dynamic, the thesis's defaults) on the mechanical model of
//! its WD 80 GB disk (`wd800-fs2-mechanical`), the whole disk declared free at start (host
//! writes take it back), behind the same spin-down layer.
//!
//! Rates are per CPU second of the benchmark thread, the median of three passes. "simulator" excludes the trace
//! source's own time (measured around each block the source fills), "end-to-end" includes it.

use std::sync::Arc;
use std::time::Instant;
use wattio_core::TraceSource;
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Opener, Registry, RunConfig, Simulator};
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

/// The array variants: `[[device]]` and `[[function]]` tables replacing the single disk's.
fn array(level: u8) -> String {
    let mut t = String::new();
    for d in 0..5 {
        t += &format!("[[device]]\nname = \"d{d}\"\nmodel = \"fujitsu-map3367\"\n\n");
    }
    t += &format!(
        "[[function]]\nkind = \"raid\"\nlevel = {level}\ndevices = [\"d0\", \"d1\", \"d2\", \"d3\", \"d4\"]\n\n"
    );
    t
}

/// PARAID over the same five disks (the paper's gears), in place of array + spin-down.
fn paraid(level: u8) -> String {
    let gears = if level == 0 { "[2, 5]" } else { "[3, 5]" };
    let mut t = String::new();
    for d in 0..5 {
        t += &format!("[[device]]\nname = \"d{d}\"\nmodel = \"fujitsu-map3367\"\n\n");
    }
    t += &format!(
        "[[function]]\nkind = \"paraid\"\nlevel = {level}\ngears = {gears}\ndevices = [\"d0\", \"d1\", \"d2\", \"d3\", \"d4\"]\n\n"
    );
    t
}

/// The EXCES stack: the paper's disk and CF card, EXCES with its defaults but a 256 MiB
/// cache (so that it misses and reconfigures), the 5 s spin-down below it.
const EXCES: &str = r#"
[run]
seed = 42

[[device]]
name = "disk"
model = "toshiba-mk1234gsx"

[[device]]
name = "ecd"
model = "sandisk-ultra-cf-2gb"

[[function]]
kind = "exces"
disk = "disk"
flash = "ecd"
cache_pages = 65536

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 5
devices = ["disk"]

[workload]
arrivals = "poisson"
duration_s = 1e9
rate = 40
read_fraction = 0.7
size = { dist = "choice", values = [4096, 16384, 65536], weights = [0.6, 0.3, 0.1] }
footprint_bytes = 1_073_741_824
popularity = { dist = "zipf", s = 0.9 }
sequential_fraction = 0.3
streams = 4
"#;

/// The FS2 stack: `[[device]]` and `[[function]]` tables replacing the single disk's.
const FS2: &str = r#"[[device]]
name = "disk"
model = "wd800-fs2-mechanical"

[[function]]
kind = "fs2"
disk = "disk"
free = [[0, 80026361856]]
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

/// CPU time of this thread: the machine is shared, and wall time would measure the others.
fn cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Hands the simulator requests from a buffer refilled from the generator in blocks, and
/// keeps the CPU time spent refilling: the simulator's own cost is the run's time minus it.
/// Memory stays flat (one block).
struct Timed {
    inner: Box<dyn TraceSource>,
    buf: Vec<wattio_core::Request>,
    pos: usize,
    done: bool,
    source_s: f64,
}

const BLOCK: usize = 1 << 14;

/// Passes per figure; the median is reported.
const REPEAT: usize = 3;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl TraceSource for Timed {
    fn next_request(
        &mut self,
    ) -> Result<Option<wattio_core::Request>, wattio_core::trace::TraceError> {
        if self.pos == self.buf.len() {
            if self.done {
                return Ok(None);
            }
            let t0 = cpu_s();
            self.buf.clear();
            self.pos = 0;
            if self.inner.fill(&mut self.buf, BLOCK)? < BLOCK {
                self.done = true;
            }
            self.source_s += cpu_s() - t0;
            if self.buf.is_empty() {
                return Ok(None);
            }
        }
        let r = self.buf[self.pos];
        self.pos += 1;
        Ok(Some(r))
    }

    fn fill(
        &mut self,
        out: &mut Vec<wattio_core::Request>,
        max: usize,
    ) -> Result<usize, wattio_core::trace::TraceError> {
        let mut n = 0;
        while n < max {
            if self.pos == self.buf.len() {
                // Refills (and their timing) as next_request does.
                match self.next_request()? {
                    Some(r) => {
                        out.push(r);
                        n += 1;
                        continue;
                    }
                    None => break,
                }
            }
            let take = (self.buf.len() - self.pos).min(max - n);
            out.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            n += take;
        }
        Ok(n)
    }
}

struct Rates {
    /// Requests per CPU second: simulation including generation.
    end_to_end: f64,
    /// Requests per CPU second of the simulator alone (executor, stack, device, ledger).
    stack: f64,
    /// Requests per CPU second of the generator alone.
    generation: f64,
    wall: f64,
}

fn run(config: &str, requests: u64) -> Rates {
    let text = config.replace(
        "rate = 40",
        &format!("rate = 40\nmax_requests = {requests}"),
    );
    let cfg = RunConfig::from_toml("bench", &text).expect("config");
    let cat = Catalogue::embedded().expect("catalogue");
    let w = cfg.workload.clone().expect("workload");
    let opener: Opener =
        Arc::new(move || Ok(Box::new(Generator::new(&w, 42)?) as Box<dyn TraceSource>));
    // Generation alone.
    let c0 = cpu_s();
    let mut g = opener().expect("generator");
    let mut n = 0u64;
    while g.next_request().expect("request").is_some() {
        n += 1;
    }
    let gen_s = cpu_s() - c0;
    assert_eq!(n, requests);
    // Each simulated pass runs REPEAT times and the median is kept: on a shared 2-core
    // machine single passes vary by a few per cent.
    let mut e2e = Vec::new();
    let mut sim = Vec::new();
    let mut walls = Vec::new();
    for _ in 0..REPEAT {
        // The simulator straight on the generator: the end-to-end figure.
        let asm = assemble(&cfg, &cat, Some(&opener), &mut Registry::new(), 0).expect("assemble");
        let mut src = opener().expect("source");
        let (w0, c0) = (Instant::now(), cpu_s());
        let out = Simulator::new(asm.stack, asm.devices)
            .run(src.as_mut(), None, 0, &mut NullSink)
            .expect("run");
        e2e.push(cpu_s() - c0);
        walls.push(w0.elapsed().as_secs_f64());
        assert_eq!(out.requests, requests);
        // The same run through the block buffer, to split the simulator's cost from the
        // source's.
        let asm = assemble(&cfg, &cat, Some(&opener), &mut Registry::new(), 0).expect("assemble");
        let mut timed = Timed {
            inner: opener().expect("source"),
            buf: Vec::with_capacity(BLOCK),
            pos: 0,
            done: false,
            source_s: 0.0,
        };
        let c0 = cpu_s();
        let out2 = Simulator::new(asm.stack, asm.devices)
            .run(&mut timed, None, 0, &mut NullSink)
            .expect("run");
        sim.push(cpu_s() - c0 - timed.source_s);
        assert_eq!(out2.requests, requests);
        assert_eq!(out2.end, out.end, "the buffered run must be the same run");
        if std::env::var_os("SIM_IDENTITY").is_some() {
            let counters: Vec<String> = out2
                .stack
                .layers()
                .iter()
                .map(|f| format!("{:?}", f.counters()))
                .collect();
            eprintln!(
                "IDENTITY end={} mean={} p99={} {:?}",
                out2.end,
                out2.latency.mean(),
                out2.latency.quantile(0.99),
                counters
            );
        }
    }
    let (e2e_s, stack_s, wall_s) = (median(e2e), median(sim), median(walls));
    let r = requests as f64;
    Rates {
        end_to_end: r / e2e_s,
        stack: r / stack_s,
        generation: r / gen_s,
        wall: r / wall_s,
    }
}

fn main() {
    let big: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let arg = |name: &str| std::env::args().skip(1).any(|a| a == name);
    let level = if arg("raid0") {
        Some(0)
    } else if arg("raid5") {
        Some(5)
    } else {
        None
    };
    let exces = arg("exces");
    let gears = if arg("paraid0") {
        Some(0)
    } else if arg("paraid5") {
        Some(5)
    } else {
        None
    };
    let fs2 = arg("fs2");
    // The FS2 stack's disk alone (no FS2): the split between the layer and the model.
    let mech = arg("mech");
    let config = match level {
        None if gears.is_some() => CONFIG.replace(
            "[[device]]\nname = \"disk\"\nmodel = \"wd800-fs2\"\n\n[[function]]\nkind = \"spindown\"\npolicy = \"fixed\"\ntimeout_s = 5\n",
            &paraid(gears.unwrap_or(0)),
        ),
        Some(l) => CONFIG.replace(
            "[[device]]\nname = \"disk\"\nmodel = \"wd800-fs2\"\n",
            &array(l),
        ),
        None if exces => EXCES.to_string(),
        None if fs2 => CONFIG.replace("[[device]]\nname = \"disk\"\nmodel = \"wd800-fs2\"\n", FS2),
        None if mech => CONFIG.replace("model = \"wd800-fs2\"\n", "model = \"wd800-fs2-mechanical\"\n"),
        None => CONFIG.to_string(),
    };
    let small = big / 10;
    let r_small = run(&config, small);
    let rss_small = peak_rss_kib();
    let r_big = run(&config, big);
    let rss_big = peak_rss_kib();
    match level {
        None if gears.is_some() => println!(
            "PARAID-{} (gears {}, 64 KiB chunks) over five parametric Fujitsu MAP3367, generated Poisson trace",
            gears.unwrap_or(0),
            if gears == Some(0) { "{2,5}" } else { "{3,5}" }
        ),
        Some(l) => println!(
            "RAID-{l} (64 KiB chunks) over five parametric Fujitsu MAP3367 + fixed 5 s spin-down, generated Poisson trace"
        ),
        None if fs2 => println!("FS2 stack: FS2 (dynamic) on wd800-fs2-mechanical + fixed 5 s spin-down, generated Poisson trace"),
        None if mech => println!("FS2 stack without FS2: wd800-fs2-mechanical + fixed 5 s spin-down, generated Poisson trace"),
        None if exces => println!("EXCES stack: toshiba-mk1234gsx + sandisk-ultra-cf-2gb (256 MiB used), fixed 5 s spin-down, generated Poisson trace on 1 GiB"),
        None => println!(
            "built-in stack: parametric HDD (wd800-fs2) + fixed 5 s spin-down, generated Poisson trace"
        ),
    }
    println!("rates in M requests per CPU second of the benchmark thread (wall in parentheses)");
    println!(
        "{:>12} {:>14} {:>12} {:>12} {:>12}",
        "requests", "end-to-end", "simulator", "generator", "peak RSS"
    );
    for (n, r, rss) in [(small, &r_small, rss_small), (big, &r_big, rss_big)] {
        println!(
            "{:>12} {:>6.2} ({:>5.2}) {:>12.2} {:>12.2} {:>8} KiB",
            n,
            r.end_to_end / 1e6,
            r.wall / 1e6,
            r.stack / 1e6,
            r.generation / 1e6,
            rss
        );
    }
    // Targets: 10 M req/s for the built-in stack, 2 M for the EXCES stack (issue 12), 1 M for
    // FS2 on the mechanical model (issue 14) and for PARAID over five disks (issue 13, which the
    // RAID-0/RAID-5 arrays are measured against).
    let target = if exces {
        2e6
    } else if fs2 || gears.is_some() || level.is_some() {
        1e6
    } else {
        10e6
    };
    println!(
        "target {} M req/s: end-to-end {:.2}x, simulator alone {:.2}x; memory growth from {}x more requests: {:.2}x",
        target / 1e6,
        r_big.end_to_end / target,
        r_big.stack / target,
        big / small,
        rss_big as f64 / rss_small.max(1) as f64
    );
    if exces {
        // Issue 12 asks for the per-request CPU cost next to the paper's: its module alone
        // cost 52 µs per I/O before issue (+ 0.58 µs at completion) in the kernel of a
        // 1.83 GHz Core 2 (digest: ../shared/reference/exces.md).
        println!(
            "CPU per request, whole simulated stack (EXCES, spin-down, both device models, executor): {:.2} µs; the paper's EXCES module alone: 52.58 µs (52 before issue + 0.58 after completion)",
            1e6 / r_big.stack
        );
    }
}
