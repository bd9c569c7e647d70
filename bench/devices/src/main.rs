//! One million random requests (4–64 KiB, two reads per write, uniform offsets) issued
//! back to back to the `hdd-mechanical` model of an imported DiskSim drive; prints
//! requests per CPU-second of the benchmark thread (and per wall second), the ratio to
//! DiskSim's ~30,000 requests/s on this machine type,
//! and peak memory after 10 % and after 100 % of the run (flat = no per-request growth).
//!
//! `cargo run --release --manifest-path bench/devices/Cargo.toml -- [PARV] [N]`

use std::time::Instant;
use wattio_core::device::Timing;
use wattio_core::io::{Buf, Io, IoId, Op};
use wattio_devices::disksim::import_parv;
use wattio_devices::mechanical::MechanicalDisk;

const DISKSIM_REQ_PER_S: f64 = 30_000.0;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// CPU time this thread has run, in seconds (`/proc/thread-self/schedstat`, first field
/// in ns): the machine is shared, so wall time overstates the cost.
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(f64::NAN, |ns| ns as f64 / 1e9)
}

/// xorshift64*: deterministic and cheap, so the generator does not dominate the timing.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parv = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "../shared/disksim-valid/cheetah4LP.parv".into());
    let n: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let imp = match import_parv(std::path::Path::new(&parv)) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("import failed: {e}");
            std::process::exit(2);
        }
    };
    let mut disk = MechanicalDisk::new(imp.timing).expect("imported drive builds");
    let cap_sectors = disk.capacity() / 512;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut t = 0u64;
    let mut busy = 0u64;
    let mut rss_10 = 0;
    let cpu0 = thread_cpu_s();
    let start = Instant::now();
    for i in 0..n {
        let sectors = 8 * (1 + rng.next() % 16) as u32; // 4–64 KiB
        let lbn = rng.next() % (cap_sectors - sectors as u64);
        let op = if rng.next() % 3 == 0 {
            Op::Write
        } else {
            Op::Read
        };
        let io = Io {
            id: IoId(i),
            op,
            fua: false,
            priority: 0,
            dev: 0,
            stream: 0,
            offset: lbn * 512,
            len: sectors * 512,
            file: None,
            call_site: None,
            buf: Buf::None,
        };
        let s = disk.service(t, &io);
        t += s.total();
        busy += s.total();
        if i + 1 == n / 10 {
            rss_10 = peak_rss_kib();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = thread_cpu_s() - cpu0;
    let rate = n as f64 / cpu;
    println!("drive: {} ({parv})", imp.name);
    println!(
        "requests: {n}, wall {secs:.3} s ({:.0} req/s), thread CPU {cpu:.3} s: {rate:.0} req per CPU-second",
        n as f64 / secs
    );
    println!(
        "ratio to DiskSim (~{DISKSIM_REQ_PER_S:.0} req/s): {:.1}x per CPU-second",
        rate / DISKSIM_REQ_PER_S
    );
    println!(
        "mean simulated service: {:.3} ms",
        busy as f64 / n as f64 / 1e6
    );
    println!(
        "peak RSS: {} KiB after 10 %, {} KiB after 100 %",
        rss_10,
        peak_rss_kib()
    );
}
