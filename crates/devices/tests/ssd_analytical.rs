//! The SSD model against cases computed by hand or from published analytical models.

use wattio_core::device::Timing;
use wattio_core::io::{Io, Op, Request, Status};
use wattio_devices::ssd::{Ssd, SsdParams};

fn params(extra: &str) -> SsdParams {
    // 2 channels × 2 ways, 4 KiB pages, 100 µs program, 40.96 µs page transfer (100 MB/s).
    let base = r#"
        capacity_bytes = 100_000_000
        channels = 2
        ways = 2
        dies_per_way = 1
        planes_per_die = 1
        blocks_per_plane = 128
        pages_per_block = 64
        page_bytes = 4096
        read_page_us = 50
        program_page_us = 100
        erase_block_us = 2000
        overhead_us = 10
    "#;
    let mut t: toml::Table = toml::from_str(base).unwrap();
    let extra: toml::Table = toml::from_str(extra).unwrap();
    t.extend(extra);
    SsdParams::from_toml(&t).unwrap()
}

fn io(op: Op, offset: u64, len: u32) -> Io {
    Request::new(0, op, offset, len).io(0)
}

/// Sequential page writes all started at t = 0 (unbounded queue): bytes / makespan.
fn seq_write_mbps(p: SsdParams, pages: u64) -> f64 {
    let page = p.page_bytes as u64;
    let mut s = Ssd::new(p);
    let mut end = 0;
    for k in 0..pages {
        let svc = s.service(0, &io(Op::Write, k * page, page as u32));
        assert_eq!(svc.status, Status::Ok);
        end = end.max(svc.total());
    }
    // Until everything is on NAND (a no-op barrier for write-through drives).
    end = end.max(s.service(0, &io(Op::Flush, 0, 0)).total());
    (pages * page) as f64 / (end as f64 / 1e9) / 1e6
}

fn close(got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol * want,
        "got {got}, expected {want} ± {:.1}%",
        tol * 100.0
    );
}

#[test]
fn sequential_write_is_die_bound_when_channels_are_fast() {
    // die bandwidth 4 PUs × 4096 B / 100 µs = 163.84 MB/s; channels 2 × 100 MB/s = 200 MB/s.
    let p = params("channel_mbps = 100");
    let die: f64 = 4.0 * 4096.0 / 100e-6 / 1e6;
    close(seq_write_mbps(p, 8000), die.min(200.0), 0.01);
}

#[test]
fn sequential_write_is_channel_bound_when_channels_are_slow() {
    // channels 2 × 50 MB/s = 100 MB/s < die bandwidth 163.84 MB/s.
    let p = params("channel_mbps = 50");
    close(seq_write_mbps(p, 8000), 100.0, 0.01);
}

#[test]
fn sequential_write_uses_ways_dies_and_planes() {
    // 2 ch × 2 ways × 2 dies × 2 planes = 16 PUs: die bandwidth 16 × 4096 / 100 µs = 655.36
    // MB/s; channels 2 × 400 = 800 MB/s.
    let p = params("channel_mbps = 400\ndies_per_way = 2\nplanes_per_die = 2");
    assert_eq!(p.pus(), 16);
    close(seq_write_mbps(p, 16000), 655.36, 0.01);
    // Same geometry behind a 300 MB/s host link: the link is the bound.
    let p = params("channel_mbps = 400\ndies_per_way = 2\nplanes_per_die = 2\nhost_mbps = 300");
    close(seq_write_mbps(p, 16000), 300.0, 0.01);
}

#[test]
fn write_buffer_hides_latency_not_bandwidth() {
    // A 1 MiB buffer: the first writes complete at DRAM speed, the sustained rate stays the
    // NAND bound (163.84 MB/s), because slots free only when their page is programmed.
    let p = params("channel_mbps = 100\nwrite_buffer_bytes = 1048576");
    let mut s = Ssd::new(p.clone());
    let first = s.service(0, &io(Op::Write, 0, 4096));
    assert_eq!(first.total(), 10_000, "overhead only: the data is in DRAM");
    close(seq_write_mbps(p, 8000), 163.84, 0.02);
}

#[test]
fn idle_read_latency_is_page_read_plus_transfer() {
    let p = params("channel_mbps = 100\nhost_mbps = 1000");
    let mut s = Ssd::new(p);
    s.precondition_sequential();
    // overhead 10 µs + tR 50 µs + 4096 B at 100 MB/s (40.96 µs) + 4096 B at 1000 MB/s.
    let svc = s.service(1_000_000_000, &io(Op::Read, 8192, 4096));
    assert_eq!(svc.total(), 10_000 + 50_000 + 40_960 + 4_096);
    // A 1 KiB read transfers only what was asked for.
    let svc = s.service(2_000_000_000, &io(Op::Read, 8192, 1024));
    assert_eq!(svc.total(), 10_000 + 50_000 + 10_240 + 1_024);
    // Never-written pages read as zeros from the controller, without NAND.
    let mut fresh = Ssd::new(params("channel_mbps = 100"));
    assert_eq!(fresh.service(0, &io(Op::Read, 0, 4096)).total(), 10_000);
}

#[test]
fn concurrent_reads_contend_for_plane_and_channel() {
    let p = params("channel_mbps = 100");
    let mut s = Ssd::new(p);
    s.precondition_sequential();
    // Striped channel first: LPN k → PU k % 4, channel PU % 2.
    let a = s.service(0, &io(Op::Read, 0, 4096)).total(); // PU 0, ch 0
    let b = s.service(0, &io(Op::Read, 2 * 4096, 4096)).total(); // PU 2, ch 0
    let c = s.service(0, &io(Op::Read, 4096, 4096)).total(); // PU 1, ch 1
    let d = s.service(0, &io(Op::Read, 5 * 4096, 4096)).total(); // PU 1, ch 1
    assert_eq!(a, 10_000 + 50_000 + 40_960);
    // Other plane, same channel: the array reads overlap, the transfer waits for the channel.
    assert_eq!(b, 10_000 + 50_000 + 2 * 40_960);
    // Other channel: independent of a and b.
    assert_eq!(c, a);
    // Same plane as c: its array read waits for c's (cache read: not for c's transfer).
    assert_eq!(d, 10_000 + 2 * 50_000 + 40_960);
}

#[test]
fn flush_waits_for_destage_and_fua_for_its_own_pages() {
    let p = params("channel_mbps = 100\nwrite_buffer_bytes = 262144");
    let mut s = Ssd::new(p);
    // 8 pages at t = 0, data at 10 µs. Hand schedule (PU k % 4, channel PU % 2, transfer
    // 40.96 µs, program 100 µs, cache register free at program start):
    //   pages 0,1 end 150.96; 2,3 end 191.92; 4,5 start programming at 150.96 → 250.96;
    //   6,7 at 191.92 → 291.92 µs.
    let w = s.service(0, &io(Op::Write, 0, 8 * 4096));
    assert_eq!(w.total(), 10_000, "buffered: complete once in DRAM");
    let f = s.service(20_000, &io(Op::Flush, 0, 0));
    assert_eq!(20_000 + f.total(), 291_920);
    // Nothing left to destage: a second flush costs the command overhead only.
    let f = s.service(300_000, &io(Op::Flush, 0, 0));
    assert_eq!(f.total(), 10_000);
    // FUA write at 1 s on an idle drive: transfer + program.
    let mut fua = io(Op::Write, 0, 4096);
    fua.fua = true;
    let w = s.service(1_000_000_000, &fua);
    assert_eq!(w.total(), 10_000 + 40_960 + 100_000);
}

#[test]
fn full_write_buffer_throttles_the_host() {
    // 4-page buffer: page 4 needs page 0's slot (free at 150.96 µs) … page 7 waits for
    // page 3's slot (191.92 µs), so the 8-page write completes at 191.92 µs.
    let p = params("channel_mbps = 100\nwrite_buffer_bytes = 16384");
    let mut s = Ssd::new(p);
    let w = s.service(0, &io(Op::Write, 0, 8 * 4096));
    assert_eq!(w.total(), 191_920);
    assert_eq!(s.counters().buffer_stalls, 1);
    // Without a buffer, writes are write-through: the last program ends at 291.92 µs.
    let mut s = Ssd::new(params("channel_mbps = 100"));
    assert_eq!(s.service(0, &io(Op::Write, 0, 8 * 4096)).total(), 291_920);
}

#[test]
fn energy_is_v_times_i_times_t_per_operation() {
    let p = params(
        "channel_mbps = 100\nnand_volts = 3.3\nread_ma = 25\nprogram_ma = 25\nerase_ma = 25\ntransfer_ma = 5\ncontroller_watts = 1.5",
    );
    let mut s = Ssd::new(p);
    s.precondition_sequential();
    let r = s.service(0, &io(Op::Read, 0, 4096));
    // 3.3 V × 25 mA × 50 µs + 3.3 V × 5 mA × 40.96 µs + 1.5 W × 10 µs
    let want = 3.3 * 0.025 * 50e-6 + 3.3 * 0.005 * 40.96e-6 + 1.5 * 10e-6;
    assert!(
        (r.energy_j - want).abs() < 1e-12,
        "{} vs {want}",
        r.energy_j
    );
    let w = s.service(1_000_000_000, &io(Op::Write, 0, 4096));
    let want = 3.3 * 0.025 * 100e-6 + 3.3 * 0.005 * 40.96e-6 + 1.5 * 10e-6;
    assert!(
        (w.energy_j - want).abs() < 1e-12,
        "{} vs {want}",
        w.energy_j
    );
}

#[test]
fn discard_unmaps_and_reads_then_skip_nand() {
    let mut s = Ssd::new(params("channel_mbps = 100"));
    s.precondition_sequential();
    s.service(0, &io(Op::Discard, 0, 3 * 4096 + 100));
    // Pages 0–2 are unmapped, page 3 was only partly covered and stays mapped.
    assert_eq!(
        s.service(1_000_000_000, &io(Op::Read, 4096, 4096)).total(),
        10_000
    );
    assert_eq!(
        s.service(2_000_000_000, &io(Op::Read, 3 * 4096, 4096))
            .total(),
        10_000 + 50_000 + 40_960
    );
    // Out of range is refused, not serviced.
    let svc = s.service(0, &io(Op::Read, 100_000_000, 4096));
    assert_eq!(svc.status, Status::Invalid);
}

/// Valid fraction x of the block greedy (and LRW) cleaning reclaims under uniform random
/// writes, in the large-block limit: x = e^{−α(1−x)}, α = physical / logical pages
/// (Desnoyers, "Analytic Modeling of SSD Write Performance", SYSTOR 2012, eq. for LRW,
/// which greedy approaches as pages per block grow; equivalently
/// A = α / (α + W₀(−α e^{−α})) with Lambert's W). Write amplification A = 1 / (1 − x).
fn analytical_waf(alpha: f64) -> f64 {
    let f = |x: f64| x - (-alpha * (1.0 - x)).exp();
    let (mut lo, mut hi) = (0.0f64, 1.0 - 1e-9);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    1.0 / (1.0 - 0.5 * (lo + hi))
}

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

/// Steady-state WAF of uniform random page writes on one plane of `blocks` × 256 pages with
/// `logical` user pages.
fn measured_waf(blocks: u32, logical: u64) -> (f64, f64) {
    let t: toml::Table = toml::from_str(&format!(
        r#"
        capacity_bytes = {}
        channels = 1
        ways = 1
        dies_per_way = 1
        planes_per_die = 1
        blocks_per_plane = {blocks}
        pages_per_block = 256
        page_bytes = 4096
        read_page_us = 50
        program_page_us = 500
        erase_block_us = 3000
        channel_mbps = 400
        gc_free_blocks = 1
        "#,
        logical * 4096
    ))
    .unwrap();
    let p = SsdParams::from_toml(&t).unwrap();
    // GC keeps `gc_free_blocks` blocks empty, so they hold no data: the spare the cleaner
    // works with is the rest.
    let alpha = (blocks - p.gc_free_blocks) as f64 * 256.0 / logical as f64;
    let mut s = Ssd::new(p);
    s.precondition_sequential();
    let mut rng = SplitMix(42);
    let mut write = |s: &mut Ssd, n: u64| {
        for _ in 0..n {
            let lpn = rng.next() % logical;
            s.service(0, &io(Op::Write, lpn * 4096, 4096));
        }
    };
    write(&mut s, 4 * logical);
    s.reset_counters();
    write(&mut s, 4 * logical);
    s.check_invariants().unwrap();
    let c = s.counters();
    assert_eq!(c.host_pages_written, 4 * logical);
    assert_eq!(
        c.nand_pages_written,
        c.host_pages_written + c.gc_pages_moved
    );
    (c.waf(), alpha)
}

#[test]
fn greedy_gc_write_amplification_matches_the_analytical_model() {
    // 512 blocks × 256 pages = 131072 physical pages.
    for logical in [104_858u64, 87_381] {
        let (waf, alpha) = measured_waf(512, logical);
        let want = analytical_waf(alpha);
        eprintln!("alpha {alpha:.4}: WAF measured {waf:.4}, analytical {want:.4}");
        close(waf, want, 0.03);
    }
}

#[test]
fn analytical_waf_by_hand() {
    // α = 1.25: x = e^{−1.25(1−x)} ⇒ x ≈ 0.6286, A ≈ 2.693 (checked: 0.6286 = e^{−0.4643}).
    let a = analytical_waf(1.25);
    let x = 1.0 - 1.0 / a;
    assert!((x - (-1.25 * (1.0 - x)).exp()).abs() < 1e-9);
    assert!((a - 2.693).abs() < 0.01, "{a}");
    // Lots of spare → no amplification.
    assert!((analytical_waf(20.0) - 1.0).abs() < 1e-6);
}

#[test]
fn max_concurrent_is_the_queue_depth() {
    let s = Ssd::new(params("channel_mbps = 100"));
    assert_eq!(s.max_concurrent(), 4);
    let s = Ssd::new(params("channel_mbps = 100\nqueue_depth = 32"));
    assert_eq!(s.max_concurrent(), 32);
}

#[test]
fn a_transfer_held_up_by_its_plane_does_not_block_the_channel() {
    let p = params("channel_mbps = 100\nprogram_page_us = 1000");
    let mut s = Ssd::new(p);
    s.precondition_sequential();
    // 24,415 pages filled round-robin over 4 PUs: the next page goes to PU 3, then PU 0.
    // LPN 101 → PU 0 (channel 0): transfer [10, 50.96] µs, program [50.96, 1050.96] µs.
    s.service(0, &io(Op::Write, 100 * 4096, 8192));
    // LPN 4 lives on PU 0: its read waits for the program, then uses channel 0 at 1100.96.
    let late = s.service(0, &io(Op::Read, 4 * 4096, 4096)).total();
    assert_eq!(late, 1_050_960 + 50_000 + 40_960);
    // LPN 2 on PU 2 shares channel 0 but transfers in the gap before that booking.
    let early = s.service(0, &io(Op::Read, 2 * 4096, 4096)).total();
    assert_eq!(early, 10_000 + 50_000 + 40_960);
}
