//! Delay-hiding throughput: file-I/O calls per second through the buffer cache (the
//! paper's 4 ranks × 1 GB of 4 KB buffers, LRU) and the adaptive AF-MRA-et predictor,
//! single core. The calls are generated in memory (a skewed choice of 100,000 files of
//! 1 to 64 blocks, reads of 1 to 2 blocks, one in four a write), so the figure is the
//! model's, not a trace decoder's.
//!
//! `cargo bench -q -p wattio-engine --bench delay_hiding`

use std::time::Instant;
use wattio_functions::memory::delay_hiding::{DelayHiding, DelayHidingConfig};

/// CPU time of this process (user + system), s: on a shared machine wall time measures
/// the other tenants too.
fn cpu_secs() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn main() {
    for predictor in ["af-mra-et", "af-drd"] {
        let mut dh = DelayHiding::new(&DelayHidingConfig {
            predictor: predictor.into(),
            ..DelayHidingConfig::default()
        })
        .unwrap();
        let calls = 20_000_000u64;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let (t, c) = (Instant::now(), cpu_secs());
        for _ in 0..calls {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Skewed file choice: the square of a uniform draw favours low ids.
            let u = (x >> 40) % 317;
            let file = (u * u) as u32;
            let blocks = 1 + (x >> 20) % 64;
            let offset = ((x >> 8) % blocks) * 4096;
            let len = 4096 * (1 + (x & 1));
            dh.call(file, offset, len, x & 3 == 0).unwrap();
        }
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - c);
        let r = dh.report();
        println!(
            "{predictor}, 4 ranks x 262144 buffers, {calls} calls: {:.1} M calls/s of CPU time \
             ({:.1} M/s wall); cache hits {:.1} %, slowdown {:.2} %",
            calls as f64 / cpu / 1e6,
            calls as f64 / wall / 1e6,
            100.0 * r.cache_hits as f64 / (r.cache_hits + r.cache_misses) as f64,
            100.0 * (r.normalized_time() - 1.0)
        );
    }
}
