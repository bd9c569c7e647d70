//! Memory simulator throughput: memory accesses per second through the HW policy on the
//! thesis's 12-rank DDR-400 system, single core, and the peak memory of two run lengths
//! (flat: processes are streams, pages are bounded by the ranks).
//!
//! `cargo bench -q -p wattio-engine --bench memory`

use std::time::Instant;
use wattio_engine::memory::{DmaZone, Interleave, MemConfig, MemSim, Placement, Streaming};
use wattio_functions::memory::PolicyConfig;

fn usage() -> libc::rusage {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u
}

/// CPU time of this process (user + system), s: on a shared machine wall time measures
/// the other tenants too.
fn cpu_secs() -> f64 {
    let u = usage();
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn run(accesses: u64) -> (f64, f64, u64) {
    let cfg = MemConfig {
        part: "ddr-400-thesis".into(),
        ranks: 12,
        cpus: 1,
        quantum_ns: 10_000_000,
        switch_ns: 1000,
        line_bytes: 128,
        page_bytes: 4096,
        interleave: Interleave::RankFill,
        placement: Placement::Scatter,
        share_file_pages: true,
        dma_zone: DmaZone::FirstRank,
        seed: 1,
        policy: PolicyConfig {
            kind: "hw".into(),
            hw: Default::default(),
            pavm: Default::default(),
        },
        reshape: None,
    };
    let mut sim = MemSim::new(&cfg).unwrap();
    // Four streaming processes over 96 MiB each: pages on every rank, a page-table walk
    // every 32 accesses.
    for p in 0..4u64 {
        sim.add(Box::new(Streaming {
            remaining: accesses / 4,
            gap: 50,
            next: 0,
            line: 128,
            span: 96 << 20,
            base: (p + 1) << 40,
        }));
    }
    let (t, c) = (Instant::now(), cpu_secs());
    let s = sim.run().unwrap();
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - c);
    let n = s.reads + s.writes;
    (n as f64 / cpu, n as f64 / wall, n)
}

fn main() {
    for n in [10_000_000u64, 40_000_000] {
        let (cpu, wall, done) = run(n);
        println!(
            "hw, 12 ranks, {done} accesses: {:.1} M accesses/s of CPU time ({:.1} M/s wall), peak RSS {} MiB",
            cpu / 1e6,
            wall / 1e6,
            usage().ru_maxrss / 1024
        );
    }
}
