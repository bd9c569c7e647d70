//! The memory simulator end to end: hand-computed runs, conservation of every rank's time,
//! PAVM on a scripted mix, and bad configs; the reproductions of Huang 2006's tables are
//! modules of this one test binary (one link instead of three).

mod mixes;
mod table_3_2;

use proptest::prelude::*;
use std::path::Path;
use wattio_engine::memory::{
    load_memtrace, run_config, DmaDef, DmaZone, Interleave, MemConfig, MemSim, MemSummary,
    Placement, ProcEvent, Recorded,
};
use wattio_functions::memory::reshape::ReshapeConfig;
use wattio_functions::memory::PolicyConfig;

fn cfg(kind: &str, ranks: usize) -> MemConfig {
    MemConfig {
        part: "ddr-400-thesis".into(),
        ranks,
        cpus: 1,
        quantum_ns: 1_000_000,
        switch_ns: 1000,
        line_bytes: 128,
        page_bytes: 4096,
        interleave: Interleave::RankFill,
        placement: Placement::Sequential,
        share_file_pages: true,
        dma_zone: DmaZone::FirstRank,
        seed: 1,
        policy: PolicyConfig {
            kind: kind.into(),
            hw: Default::default(),
            pavm: Default::default(),
        },
        reshape: None,
    }
}

fn stream(n: u64, gap: u64) -> Box<Recorded> {
    Box::new(Recorded::new(
        (0..n)
            .map(|i| ProcEvent::Access {
                gap,
                vaddr: i * 128,
                write: false,
            })
            .collect(),
    ))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

/// Traffic reshaping by hand: two ranks of 64 pages of 1 MiB (rank 0 hot), pages placed in
/// order. Pages 0–63 are read once and fill rank 0; page 64 lands on rank 1 and is read
/// 20,000 times, 100 ns apart (30 ns of computation, a 70 ns read). The first pass is due at
/// 1 ms: read k of page 64 arrives at 6,400 + 30 + 100·k ns, so the pass runs before read
/// 9,936 (at 1,000,030 ns). The hot set is ⌈1 % of 65 pages⌉ = page 64; rank 0 is full, so
/// the least accessed page there (all read once: the highest frame, page 63) moves to rank
/// 1 first, then page 64 to rank 0: two pages of 8,192 lines, each line a read and a write.
/// The next pass finds page 64 hot and already hot-ranked: nothing moves.
#[test]
fn reshaping_moves_the_hot_page_and_displaces_the_coldest() {
    // One read of each of pages 0–63, then 20,000 reads of page 64, 30 ns apart.
    let run_pages = |c: &MemConfig| {
        let read = |page: u64| ProcEvent::Access {
            gap: 30,
            vaddr: page << 20,
            write: false,
        };
        let events = (0..64).map(read).chain((0..20_000).map(|_| read(64)));
        let mut sim = MemSim::new(c).unwrap();
        sim.add(Box::new(Recorded::new(events.collect())));
        sim.run().unwrap()
    };
    let mut c = cfg("nopm", 2);
    c.page_bytes = 1 << 20;
    c.quantum_ns = 1_000_000_000;
    c.reshape = Some(ReshapeConfig {
        pages_pct: 1.0,
        period_ms: 1,
        hot_ranks: 0,
    });
    let s = run_pages(&c);
    assert_eq!((s.pages_reshaped, s.pages_migrated), (2, 0));
    assert_eq!(s.migration_accesses, 2 * 8192 * 2);
    assert_eq!(s.reads, 64 + 20_000);
    // Rank 0: the 64 first reads, page 64's reads after the pass, page 63 copied out;
    // rank 1: page 64's reads before the pass and its copy out; each took one page's writes.
    assert_eq!(s.ranks[0].reads, 64 + (20_000 - 9_936) + 8192);
    assert_eq!(s.ranks[1].reads, 9_936 + 8192);
    assert_eq!((s.ranks[0].writes, s.ranks[1].writes), (8192, 8192));
    // Without reshaping every read of page 64 stays on rank 1.
    c.reshape = None;
    let s = run_pages(&c);
    assert_eq!((s.pages_reshaped, s.ranks[1].reads), (0, 20_000));
}

#[test]
fn reshaping_needs_rank_fill_and_no_pavm() {
    let mut c = cfg("pavm", 4);
    c.reshape = Some(ReshapeConfig {
        pages_pct: 5.0,
        period_ms: 100,
        hot_ranks: 0,
    });
    let e = MemSim::new(&c).err().unwrap();
    assert!(e.starts_with("memory.reshape: PAVM places"), "{e}");
    c.policy.kind = "hw".into();
    c.interleave = Interleave::RankSpread;
    let e = MemSim::new(&c).err().unwrap();
    assert!(
        e.starts_with("memory.reshape: moves pages between ranks"),
        "{e}"
    );
    c.interleave = Interleave::RankFill;
    c.reshape.as_mut().unwrap().hot_ranks = 9;
    let e = MemSim::new(&c).err().unwrap();
    assert!(e.starts_with("memory.reshape.hot_ranks: "), "{e}");
}

/// Ten reads, 30 ns of computation before each, 70 ns each (tRCD 15 + CL 15 + 40 ns burst).
#[test]
fn hand_computed_runs() {
    let mut sim = MemSim::new(&cfg("nopm", 1)).unwrap();
    sim.add(stream(10, 30));
    let s = sim.run().unwrap();
    assert_eq!(s.runtime_ns, 1000);
    assert_eq!(s.reads, 10);
    assert!(close(s.mean_response_ns, 70.0));
    assert!(
        close(s.energy_j, 2.2 * 300e-9 + 4.2 * 700e-9),
        "{}",
        s.energy_j
    );
    // ISR: every read but the first finds self refresh and waits 1000 ns.
    let mut sim = MemSim::new(&cfg("isr", 1)).unwrap();
    sim.add(stream(10, 30));
    let s = sim.run().unwrap();
    assert_eq!(s.delayed_sr, 9);
    assert_eq!(s.runtime_ns, 100 + 9 * 1100);
    let sr = s.ranks[0].residency_ns[4];
    assert_eq!(sr, 9 * 30);
    assert!(close(
        s.energy_j,
        2.2 * 30e-9 + 4.2 * 700e-9 + 0.167 * 270e-9 + 2.2 * 9000e-9
    ));
    // IPD: 5 ns each.
    let mut sim = MemSim::new(&cfg("ipd", 1)).unwrap();
    sim.add(stream(10, 30));
    let s = sim.run().unwrap();
    assert_eq!((s.delayed_pd, s.runtime_ns), (9, 1000 + 45));
}

/// Two processes on two ranks with sequential placement: each process's pages fill a rank
/// of its own under PAVM, and at every switch the other's rank goes to self refresh.
#[test]
fn pavm_keeps_the_idle_process_rank_asleep() {
    let page_lines = 4096 / 128;
    // 64 MB rank = 16384 pages: 2 processes × 100 pages each.
    let mk = |base: u64| {
        Box::new(Recorded::new(
            (0..20_000u64)
                .map(|i| ProcEvent::Access {
                    gap: 200,
                    vaddr: base + (i % (100 * page_lines)) * 128,
                    write: false,
                })
                .collect(),
        ))
    };
    let run = |kind: &str| -> MemSummary {
        let mut c = cfg(kind, 2);
        c.placement = Placement::Scatter;
        let mut sim = MemSim::new(&c).unwrap();
        sim.add(mk(0));
        sim.add(mk(1 << 30));
        sim.run().unwrap()
    };
    let nopm = run("nopm");
    let pavm = run("pavm");
    // Scatter spreads both processes over both ranks: PAVM's worst fit gives each its own.
    let sr = |s: &MemSummary, r: usize| s.ranks[r].residency_ns[4];
    assert!(sr(&pavm, 0) > 0 && sr(&pavm, 1) > 0);
    // Each rank sleeps while the other process runs: about half the run.
    for r in 0..2 {
        let frac = sr(&pavm, r) as f64 / pavm.runtime_ns as f64;
        assert!((0.4..0.6).contains(&frac), "rank {r}: {frac}");
    }
    assert!(pavm.avg_power_w < 0.8 * nopm.avg_power_w);
    // Early wake: hardly any access waits (only a process's first page).
    assert!(pavm.delayed_sr <= 2, "{}", pavm.delayed_sr);
    assert!((pavm.runtime_ns as f64) < 1.01 * nopm.runtime_ns as f64);
}

/// A kernel thread may touch any memory, so PAVM keeps every rank active while one runs.
/// Process 1 reads one page (rank 0) over and over, 100 ns of computation and a 70 ns
/// access each (DDR-400: tRCD 15 + CL 15 + 40 ns for 128 B); its quantum runs out at the
/// access ending at 5,883 × 170 = 1,000,110 ns, the scheduler runs process 2 for 0.5 ms
/// (after the 1 µs switch), then process 1 again. Rank 1, never used, is in standby from
/// the start until the first switch that leaves it out: the one at 1,000,110 ns if process
/// 2 is a user process (its α is empty), the one at 1,501,110 ns if it is a kernel thread.
#[test]
fn pavm_powers_every_rank_while_a_kernel_thread_runs() {
    let rank1_standby = |second: &str| {
        let text = format!(
            r#"
            [memory]
            part = "ddr-400-thesis"
            ranks = 2
            quantum_ns = 1000000
            switch_ns = 1000
            line_bytes = 128
            placement = "sequential"
            seed = 1
            [memory.policy]
            kind = "pavm"
            [[process]]
            kind = "stream"
            accesses = 20000
            gap_ns = 100
            span_bytes = 4096
            [[process]]
            kind = "{second}"
            total_ns = 500000
            "#
        );
        let s = run_config(&text, Path::new(".")).unwrap();
        s.ranks[1].residency_ns[0]
    };
    assert_eq!(rank1_standby("compute"), 1_000_110);
    assert_eq!(rank1_standby("kernel-thread"), 1_501_110);
}

/// DMA under PAVM (Huang 2006 §2.6): a device writes one 128 B line every 100 µs from
/// 50 µs into a one-page ring. Two processes each read one page of a shared library (DLL
/// aggregation puts both on rank 0, so rank 0 is in both α) and compute 2.5 ms, in 1 ms
/// quanta with 1 µs switches: switches at 1,000,000, 2,001,000, 3,002,000, 4,003,000,
/// 4,504,070 (process 1 exits) and 5,006,140 ns (process 2 exits; the devices stop), so the
/// 50 transfers arriving at 50 µs + k·100 µs ≤ 5,006,140 ns are served.
/// * `first-rank`: the ring is on rank 0, which every switch but the first (to process 2,
///   whose α is still empty) leaves in standby, and process 2's first read wakes it at
///   1,001,000 ns, before the next transfer: no transfer waits, each takes the 70 ns of a
///   line (tRCD 15 + CL 15 + 40 ns burst).
/// * `anywhere` (scattered; seed 4 puts the ring on rank 2, asserted): rank 2 is in no α,
///   so each of the five switches after the first 10 transfers sends it to self refresh and
///   the first transfer after it waits for the 1,000 ns exit: 5 delayed, latencies
///   45 × 70 + 5 × 1,070 ns (mean 170, max 1,070), and rank 2 took the 50 line writes.
#[test]
fn pavm_dma_into_the_first_rank_never_waits_for_a_rank() {
    let lib = 0x7000_0000u64;
    let run = |zone: DmaZone| {
        let mut c = cfg("pavm", 3);
        c.placement = Placement::Scatter;
        c.seed = 4;
        c.dma_zone = zone;
        c.policy.pavm.migrate_period_ms = 0;
        let mut sim = MemSim::new(&c).unwrap();
        for _ in 0..2 {
            sim.add(Box::new(Recorded::new(vec![
                ProcEvent::Map {
                    vaddr: lib,
                    len: 4096,
                    shared: true,
                },
                ProcEvent::Access {
                    gap: 0,
                    vaddr: lib,
                    write: false,
                },
                ProcEvent::Compute(2_500_000),
            ])));
        }
        sim.add_dma(DmaDef {
            period_ns: Some(100_000),
            start_ns: 50_000,
            bytes: Some(128),
            ring_pages: 1,
            ..DmaDef::default()
        })
        .unwrap();
        sim.run().unwrap()
    };
    let first = run(DmaZone::FirstRank);
    assert_eq!(first.dma.pages_per_rank, vec![1, 0, 0]);
    assert_eq!(first.runtime_ns, 5_006_140);
    assert_eq!(
        (first.dma.transfers, first.dma.lines, first.dma.delayed),
        (50, 50, 0)
    );
    assert_eq!(
        (first.dma.mean_latency_ns, first.dma.max_latency_ns),
        (70.0, 70)
    );
    assert_eq!(first.ranks[0].writes, 50);
    let any = run(DmaZone::Anywhere);
    assert_eq!(any.dma.pages_per_rank, vec![0, 0, 1]);
    assert_eq!(any.runtime_ns, 5_006_140);
    assert_eq!(
        (any.dma.transfers, any.dma.lines, any.dma.delayed),
        (50, 50, 5)
    );
    assert_eq!(
        (any.dma.mean_latency_ns, any.dma.max_latency_ns),
        (170.0, 1_070)
    );
    assert_eq!((any.ranks[2].writes, any.ranks[2].delayed_sr), (50, 5));
}

/// A DDR-400 run with 128-byte lines (70 ns each), one process computing for `total_ns`
/// and the `[[dma]]` tables `dma` (TOML).
fn dma_run_text(kind: &str, ranks: usize, total_ns: u64, dma: &str) -> String {
    format!(
        "[memory]\npart = \"ddr-400-thesis\"\nranks = {ranks}\nline_bytes = 128\nseed = 1\n\
         [memory.policy]\nkind = \"{kind}\"\n\
         [[process]]\nkind = \"compute\"\ntotal_ns = {total_ns}\n{dma}"
    )
}

/// A device slowed by sleeping ranks overruns its ring instead of queueing without end.
/// ISR puts the one rank to self refresh after every access, so each one-line transfer after
/// the first waits for the 1,000 ns exit: 1,070 ns a transfer, one arriving every 1,000 ns
/// into a one-page ring, while a process computes for 10 µs. The transfer at 0 finds the
/// rank in standby (done at 70); the one at 1,000 is done at 2,070, so the one at 2,000
/// finds the ring full and is dropped; 3,000 is served (done 4,070), 4,000 dropped, and so
/// on: of the 11 arrivals up to 10,000 ns, 6 served (5 of them waited) and 5 dropped.
#[test]
fn a_dma_ring_overrun_drops_transfers() {
    let text = dma_run_text(
        "isr",
        1,
        10_000,
        "[[dma]]\nperiod_ns = 1000\nbytes = 128\nring_pages = 1\n",
    );
    let s = run_config(&text, Path::new(".")).unwrap();
    assert_eq!((s.dma.transfers, s.dma.dropped, s.dma.delayed), (6, 5, 5));
    assert_eq!(s.dma.max_latency_ns, 1_070);
    assert_eq!(s.dma.mean_latency_ns, (70.0 + 5.0 * 1_070.0) / 6.0);
    // With two buffers nothing is dropped, and the backlog grows by 70 ns a transfer.
    let s = run_config(
        &text.replace("ring_pages = 1", "ring_pages = 2"),
        Path::new("."),
    )
    .unwrap();
    assert_eq!((s.dma.transfers, s.dma.dropped), (11, 0));
}

/// A DMA device driven by a block trace (DiskSim ASCII, relative to the config's folder):
/// a 4 KiB read at 0 ms, an 8 KiB write at 0.1 ms, a 512-byte read at 0.5 ms and one at 2 ms,
/// moved so the first arrives at 1 µs, while a process computes for 1 ms (no power
/// management, one rank, 128-byte lines of 70 ns). A read fills memory (line writes), a
/// write drains it (line reads), a page per transfer: 32 lines at 1,000 ns (done 3,240);
/// two pages at 101,000 ns, back to back (latencies 2,240 and 4,480); 4 lines at 501,000
/// (280 ns); the request at 2 ms arrives after the last process ended and is not served.
#[test]
fn a_block_trace_drives_a_dma_device() {
    let dir = std::env::temp_dir().join(format!("wattio-dma-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("disk.trace"),
        "0.0 0 0 8 1\n0.1 0 100 16 0\n0.5 0 300 1 1\n2.0 0 400 8 1\n",
    )
    .unwrap();
    let text = dma_run_text(
        "nopm",
        1,
        1_000_000,
        "[[dma]]\ntrace = \"disk.trace\"\nformat = \"disksim\"\nstart_ns = 1000\nring_pages = 4\n",
    );
    let s = run_config(&text, &dir).unwrap();
    assert_eq!((s.dma.transfers, s.dma.dropped, s.dma.lines), (4, 0, 100));
    assert_eq!((s.ranks[0].writes, s.ranks[0].reads), (36, 64));
    assert_eq!(
        (s.dma.mean_latency_ns, s.dma.max_latency_ns),
        ((2_240.0 + 2_240.0 + 4_480.0 + 280.0) / 4.0, 4_480)
    );
    let bad = |from: &str, to: &str| run_config(&text.replace(from, to), &dir).unwrap_err();
    let e = bad("ring_pages = 4", "ring_pages = 4\nperiod_ns = 5000");
    assert!(
        e.starts_with("dma[0].period_ns: a trace-driven device"),
        "{e}"
    );
    let e = bad("trace = \"disk.trace\"", "trace = \"none.trace\"");
    assert!(
        e.starts_with("dma[0].trace:") && e.contains("none.trace"),
        "{e}"
    );
    let e = bad("trace = \"disk.trace\"\nformat = \"disksim\"\n", "");
    assert!(
        e.starts_with("dma[0]: expected `period_ns` and `bytes`"),
        "{e}"
    );
    std::fs::write(dir.join("disk.trace"), "0.0 0 0 8 1\nnot a line\n").unwrap();
    let e = run_config(&text, &dir).unwrap_err();
    assert!(
        e.starts_with("dma[0].trace: ") && e.contains("disk.trace:2:1: bad field `not`"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One process's reads of `pages` + 10 pages (a rank of `pages` pages fills and 10 spill
/// onto the next), then its unmap of the first 20 (room on the first rank again).
fn spill_and_free(pages: u64) -> Vec<ProcEvent> {
    let mut events: Vec<ProcEvent> = (0..pages + 10)
        .map(|i| ProcEvent::Access {
            gap: 0,
            vaddr: i * 4096,
            write: false,
        })
        .collect();
    events.push(ProcEvent::Unmap {
        vaddr: 0,
        len: 20 * 4096,
    });
    events
}

/// PAVM's page migration, by hand: process 1 fills rank 0 (worst fit), spills 10 pages to
/// rank 1 (which joins ρ), then frees 20 pages of rank 0. The pass at 100 ms moves the 10
/// pages back to rank 0: each a read of its 32 lines on rank 1 and a write on rank 0.
#[test]
fn pavm_migration_moves_spilled_pages_back_and_counts_the_copies() {
    let pages = 16384u64; // one 64 MB rank of 4 KiB pages
    let mut c = cfg("pavm", 3);
    c.policy.pavm.migrate_period_ms = 100;
    let mut events = spill_and_free(pages);
    events.push(ProcEvent::Compute(200_000_000));
    events.push(ProcEvent::Access {
        gap: 0,
        vaddr: pages * 4096,
        write: false,
    });
    let mut sim = MemSim::new(&c).unwrap();
    sim.add(Box::new(Recorded::new(events)));
    let s = sim.run().unwrap();
    assert_eq!((s.pages_migrated, s.migration_accesses), (10, 10 * 2 * 32));
    assert_eq!(s.reads, pages + 11);
    let rw = |r: usize| (s.ranks[r].reads, s.ranks[r].writes);
    // Rank 0: the first touches, the last read (of a moved page) and the copies' writes.
    assert_eq!(rw(0), (pages + 1, 320));
    // Rank 1: its 10 first touches and the copies' reads; rank 2 never used.
    assert_eq!(rw(1), (10 + 320, 0));
    assert_eq!(rw(2), (0, 0));
    for r in &s.ranks {
        assert_eq!(r.residency_ns.iter().sum::<u64>() + r.exit_ns, s.runtime_ns);
    }
    // Without migration the last read goes to rank 1 and nothing is copied.
    c.policy.pavm.migrate_period_ms = 0;
    let mut sim = MemSim::new(&c).unwrap();
    let mut events: Vec<ProcEvent> = (0..pages + 10)
        .map(|i| ProcEvent::Access {
            gap: 0,
            vaddr: i * 4096,
            write: false,
        })
        .collect();
    events.push(ProcEvent::Access {
        gap: 0,
        vaddr: pages * 4096,
        write: false,
    });
    sim.add(Box::new(Recorded::new(events)));
    let s = sim.run().unwrap();
    assert_eq!((s.pages_migrated, s.ranks[1].reads), (0, 11));
}

/// kmigrated sleeps while the system is busy: passes due while the channel is busy more
/// than `migrate_busy_above` of the time are skipped; with the limit at 1.0 they run.
#[test]
fn pavm_migration_skips_passes_while_the_channel_is_busy() {
    let pages = 16384u64; // one 64 MB rank of 4 KiB pages
    let run = |busy_above: f64| {
        let mut c = cfg("pavm", 3);
        c.policy.pavm.migrate_period_ms = 1;
        c.policy.pavm.migrate_busy_above = busy_above;
        // Rank 0 full, 10 pages spilled onto rank 1, room made on rank 0, then reads of a
        // spilled page back to back (the channel always busy).
        let mut events = spill_and_free(pages);
        events.extend((0..50_000).map(|_| ProcEvent::Access {
            gap: 0,
            vaddr: pages * 4096,
            write: false,
        }));
        let mut sim = MemSim::new(&c).unwrap();
        sim.add(Box::new(Recorded::new(events)));
        sim.run().unwrap()
    };
    let busy = run(0.5);
    // 66,394 reads of 70 ns: about 4.6 ms, a pass due every ms, every one skipped.
    assert_eq!(busy.runtime_ns / 1_000_000, 4);
    assert_eq!(
        (busy.migration_passes, busy.migration_passes_skipped),
        (0, 4)
    );
    assert_eq!((busy.pages_migrated, busy.ranks[1].reads), (0, 50_010));
    let always = run(1.0);
    assert_eq!(always.migration_passes_skipped, 0);
    assert!(always.migration_passes >= 1);
    assert_eq!(always.pages_migrated, 10);
}

/// A read-only mapping of `pages` pages of file `file` from `offset`: two events, the
/// mapping and then its file.
fn map_file(vaddr: u64, pages: u64, file: u32, offset: u64) -> Vec<ProcEvent> {
    vec![
        ProcEvent::Map {
            vaddr,
            len: pages * 4096,
            shared: true,
        },
        ProcEvent::MapFile(wattio_formats::memtrace::FileMap { file, offset }),
    ]
}

/// A process running the events of `parts` in order.
fn script(parts: &[Vec<ProcEvent>]) -> Box<Recorded> {
    Box::new(Recorded::new(parts.concat()))
}

/// A read of the line at `vaddr`, right away.
fn read_at(vaddr: u64) -> Vec<ProcEvent> {
    vec![ProcEvent::Access {
        gap: 0,
        vaddr,
        write: false,
    }]
}

/// The page cache, hand-counted: processes mapping one file (at other addresses and
/// offsets) get the same physical page for the same file page, kept after the last mapper
/// is gone until memory runs out; another file's page of the same offset is its own.
#[test]
fn processes_mapping_one_file_share_its_pages() {
    let c = cfg("nopm", 1);
    let mut sim = MemSim::new(&c).unwrap();
    // A: file 0's pages 1 and 2 (mapping from offset 4 KiB).
    sim.add(script(&[
        map_file(0x10000, 3, 0, 0x1000),
        read_at(0x10000),
        read_at(0x11000),
    ]));
    // B: file 0's pages 2 (A's) and 3 (new), a private page, file 1's page 2 (new).
    sim.add(script(&[
        map_file(0x50000, 2, 0, 0x2000),
        read_at(0x50000),
        read_at(0x51000),
        read_at(0x90000),
        map_file(0x70000, 1, 1, 0x2000),
        read_at(0x70000),
    ]));
    // C, after A and B are gone: file 0's page 1, still in the page cache.
    sim.add(script(&[map_file(0x20000, 1, 0, 0x1000), read_at(0x20000)]));
    let s = sim.run().unwrap();
    assert_eq!((s.pages_touched, s.pages_shared), (5, 2));
    assert_eq!((s.reads, s.page_cache_evictions), (7, 0));

    // Memory runs out: the page no process maps is given back for the new one (a long
    // quantum: the processes run one after the other).
    let pages = 16384u64; // one 64 MB rank of 4 KiB pages
    let c = MemConfig {
        quantum_ns: 10_000_000_000,
        ..c
    };
    let mut sim = MemSim::new(&c).unwrap();
    sim.add(script(&[map_file(0x10000, 1, 0, 0), read_at(0x10000)]));
    sim.add(Box::new(Recorded::new(
        (0..pages)
            .flat_map(|i| read_at((1 << 30) | (i * 4096)))
            .collect(),
    )));
    sim.add(script(&[map_file(0x10000, 1, 0, 0), read_at(0x10000)]));
    let s = sim.run().unwrap();
    assert_eq!((s.pages_touched, s.pages_shared), (pages + 2, 0));
    assert_eq!(s.page_cache_evictions, 1);
    // Without the idle page the rank would have been out of pages.
    let mut sim = MemSim::new(&c).unwrap();
    sim.add(Box::new(Recorded::new(
        (0..=pages)
            .flat_map(|i| read_at((1 << 30) | (i * 4096)))
            .collect(),
    )));
    assert!(sim.run().unwrap_err().contains("out of simulated memory"));
}

/// A process mapping one file page at two addresses maps one physical page; when PAVM's
/// migration moves it, both mappings follow and the allocator stays balanced.
#[test]
fn a_file_page_mapped_twice_by_one_process_moves_once() {
    let pages = 16384u64; // one 64 MB rank of 4 KiB pages
    let mut c = cfg("pavm", 3);
    c.policy.pavm.migrate_period_ms = 100;
    c.policy.pavm.migrate_busy_above = 1.0;
    let mut sim = MemSim::new(&c).unwrap();
    // Process 1 fills rank 0; its file page, mapped at two addresses, goes to rank 1 (the DLL
    // rule: the first rank with room); then it frees 20 pages of rank 0. The pass at 100 ms
    // moves the file page to rank 0 (in its α, with room) once, for both mappings.
    let mut events: Vec<ProcEvent> = (0..pages).flat_map(|i| read_at(i * 4096)).collect();
    events.extend(map_file(0x8000_0000, 1, 0, 0));
    events.extend(map_file(0x9000_0000, 1, 0, 0));
    events.extend(read_at(0x8000_0000));
    events.extend(read_at(0x9000_0000));
    events.push(ProcEvent::Unmap {
        vaddr: 0,
        len: 20 * 4096,
    });
    events.push(ProcEvent::Compute(200_000_000));
    events.extend(read_at(0x9000_0000));
    sim.add(Box::new(Recorded::new(events)));
    let s = sim.run().unwrap();
    assert_eq!(
        s.pages_shared, 1,
        "the second mapping finds the first's page"
    );
    assert_eq!(s.pages_migrated, 1);
    // The last read is on rank 0, where the page went; rank 1 saw only the first two.
    assert_eq!(
        s.ranks[1].reads,
        2 + 32,
        "two reads and the copy's 32 line reads"
    );
    assert_eq!((s.pages_in_use_at_end, s.page_cache_pages), (1, 1));
}

/// A mapping replaces what was mapped under it (the loader's segments over its
/// reservation): a page touched under the old mapping is dropped, and the new mapping's
/// file and offset name the pages touched after it.
#[test]
fn a_mapping_over_a_mapping_replaces_it() {
    let mut sim = MemSim::new(&cfg("nopm", 1)).unwrap();
    // A reserves file 0 from offset 0 over 4 pages and touches page 2; then maps a
    // private (anonymous) page over page 1 and file 0 from offset 0x8000 over page 2.
    sim.add(script(&[
        map_file(0x10000, 4, 0, 0),
        read_at(0x12000),
        vec![ProcEvent::Map {
            vaddr: 0x11000,
            len: 4096,
            shared: false,
        }],
        map_file(0x12000, 1, 0, 0x8000),
        read_at(0x11000),
        read_at(0x12000),
        read_at(0x13000),
    ]));
    // B maps file 0 from offset 0: its page 3 is A's (A's mapping's right part kept its
    // offset), its page 1 is not A's (A's page 1 is private).
    sim.add(script(&[
        map_file(0x40000, 4, 0, 0),
        read_at(0x41000),
        read_at(0x43000),
    ]));
    let s = sim.run().unwrap();
    // A: file page 2, then its private page, file pages 8 and 3; B: file page 1 (new)
    // and 3 (A's).
    assert_eq!((s.pages_touched, s.pages_shared), (5, 1));
}

const KINDS: [&str; 8] = [
    "nopm",
    "ipd",
    "isr",
    "hw",
    "hw-sw",
    "pavm",
    "pavm+ipd",
    "pavm+hw-sw",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Whatever the policy and workload, every rank's residency (states and exits) sums to
    /// the run, and every access is served once.
    #[test]
    fn rank_time_is_conserved(
        kind in 0..KINDS.len(),
        ranks in 1usize..5,
        spread in any::<bool>(),
        quantum in 1_000u64..200_000,
        events in proptest::collection::vec(
            (0u8..4, 0u64..20_000, 0u64..(1 << 22), any::<bool>()), 1..300),
        procs in 1usize..4,
        dma in proptest::collection::vec((3_000u64..50_000, 0u64..20_000, 1u64..4096, 1u64..4, any::<bool>()), 0..3),
        anywhere in any::<bool>(),
    ) {
        let mut c = cfg(KINDS[kind], ranks);
        c.quantum_ns = quantum;
        if anywhere {
            c.dma_zone = DmaZone::Anywhere;
            c.placement = Placement::Scatter;
        }
        // Migration passes every millisecond, so short runs have some.
        c.policy.pavm.migrate_period_ms = 1;
        if spread && !KINDS[kind].starts_with("pavm") {
            c.interleave = Interleave::RankSpread;
        }
        let mut sim = MemSim::new(&c).unwrap();
        let mut expected = 0;
        for p in 0..procs {
            let evs: Vec<ProcEvent> = events
                .iter()
                .skip(p)
                .step_by(procs)
                .flat_map(|&(k, gap, addr, w)| match k {
                    0 => vec![ProcEvent::Compute(gap)],
                    // Shared mappings name one of two files (so processes share pages).
                    1 => {
                        let mut v = vec![ProcEvent::Map { vaddr: addr & !4095, len: 8192, shared: w }];
                        if w {
                            v.push(ProcEvent::MapFile(wattio_formats::memtrace::FileMap {
                                file: (gap % 2) as u32,
                                offset: (gap % 4) * 4096,
                            }));
                        }
                        v
                    }
                    2 => vec![ProcEvent::Unmap { vaddr: addr & !4095, len: 4096 }],
                    _ => vec![ProcEvent::Access { gap, vaddr: addr, write: w }],
                })
                .collect();
            expected += evs.iter().filter(|e| matches!(e, ProcEvent::Access { .. })).count() as u64;
            sim.add(Box::new(Recorded::new(evs)));
        }
        for &(period_ns, start_ns, bytes, ring_pages, write) in &dma {
            sim.add_dma(DmaDef {
                period_ns: Some(period_ns),
                start_ns,
                bytes: Some(bytes),
                ring_pages,
                write: Some(write),
                ..DmaDef::default()
            }).unwrap();
        }
        let s = sim.run().unwrap();
        prop_assert_eq!(s.reads + s.writes, expected);
        prop_assert_eq!(s.dma.pages_per_rank.iter().sum::<u64>(), dma.iter().map(|d| d.3).sum::<u64>());
        if !anywhere {
            prop_assert_eq!(s.dma.pages_per_rank[0], dma.iter().map(|d| d.3).sum::<u64>());
        }
        for (i, r) in s.ranks.iter().enumerate() {
            let total: u64 = r.residency_ns.iter().sum::<u64>() + r.exit_ns;
            prop_assert_eq!(total, s.runtime_ns, "rank {}", i);
        }
        let served: u64 = s.ranks.iter().map(|r| r.reads + r.writes).sum();
        prop_assert_eq!(served, expected + s.migration_accesses + s.dma.lines);
        // Every process has exited: only the page cache and the DMA rings hold pages.
        prop_assert_eq!(s.pages_in_use_at_end, s.page_cache_pages + s.dma.pages_per_rank.iter().sum::<u64>());
        // Transfers arrive until the last process ends, which is within the run.
        let due: u64 = dma
            .iter()
            .map(|&(period, start, ..)| if start > s.runtime_ns { 0 } else { (s.runtime_ns - start) / period + 1 })
            .sum();
        prop_assert!(s.dma.transfers + s.dma.dropped <= due, "{} transfers, {} dropped, {} due", s.dma.transfers, s.dma.dropped, due);
    }
}

#[test]
fn configs_parse_and_bad_ones_name_the_key() {
    let text = r#"
        [memory]
        part = "ddr-400-thesis"
        ranks = 1
        line_bytes = 128
        seed = 1
        [memory.policy]
        kind = "hw"
        [[process]]
        kind = "stream"
        accesses = 1000
        gap_ns = 10
        [[process]]
        kind = "compute"
        total_ns = 100000
    "#;
    let s = run_config(text, Path::new(".")).unwrap();
    assert_eq!(s.reads, 1000);
    assert_eq!(s.policy, "hw");
    let e = run_config(&text.replace("\"hw\"", "\"hw9\""), Path::new(".")).unwrap_err();
    assert!(
        e.contains("memory.policy.kind: unknown policy `hw9`"),
        "{e}"
    );
    let e = run_config(&text.replace("ranks = 1", "ranks = 0"), Path::new(".")).unwrap_err();
    assert!(e.starts_with("memory.ranks"), "{e}");
    let e = run_config(&text.replace("gap_ns = 10", "gap_ns = -1"), Path::new(".")).unwrap_err();
    assert!(e.contains("process[0]") || e.contains("process"), "{e}");
    let e = run_config(
        &text.replace("kind = \"hw\"", "kind = \"hw\"\nhw.sr_check = \"never\""),
        Path::new("."),
    )
    .unwrap_err();
    assert!(e.contains("memory.policy.hw.sr_check"), "{e}");
    let trace = text.replace(
        "kind = \"stream\"\n        accesses = 1000\n        gap_ns = 10",
        "kind = \"trace\"\n        path = \"nope.parquet\"\n        ns_per_instruction = 1.0",
    );
    let e = run_config(&trace, Path::new("/nonexistent")).unwrap_err();
    assert!(
        e.starts_with("process[0]:") && e.contains("nope.parquet"),
        "{e}"
    );
    // Too little memory is an error, not a panic: one 64 MB rank, a stream over 128 MB.
    let e = run_config(
        &text
            .replace("gap_ns = 10", "gap_ns = 10\nspan_bytes = 134217728")
            .replace("accesses = 1000", "accesses = 1100000"),
        Path::new("."),
    )
    .unwrap_err();
    assert!(e.contains("out of simulated memory"), "{e}");
}

/// `[[dma]]` devices from a config: a run with one, and bad ones naming their key.
#[test]
fn dma_configs_run_and_bad_ones_name_the_key() {
    let text = dma_run_text(
        "nopm",
        2,
        1_000_000,
        "[[dma]]\nperiod_ns = 10000\nbytes = 1500\nring_pages = 4\n",
    );
    // 1,500 bytes: 12 lines of 128 B, back to back (12 × 70 ns) at 0, 10 µs, …, 1 ms.
    let s = run_config(&text, Path::new(".")).unwrap();
    assert_eq!(
        (s.dma.transfers, s.dma.lines, s.dma.delayed),
        (101, 1212, 0)
    );
    assert_eq!((s.dma.mean_latency_ns, s.dma.max_latency_ns), (840.0, 840));
    assert_eq!(s.dma.pages_per_rank, vec![4, 0]);
    assert_eq!((s.ranks[0].writes, s.reads + s.writes), (1212, 0));
    let bad =
        |from: &str, to: &str| run_config(&text.replace(from, to), Path::new(".")).unwrap_err();
    let e = bad("bytes = 1500", "bytes = 5000");
    assert!(e.starts_with("dma[0].bytes: expected 1..=4096"), "{e}");
    let e = bad("period_ns = 10000", "period_ns = 800");
    assert!(
        e.starts_with("dma[0].period_ns") && e.contains("840 ns"),
        "{e}"
    );
    let e = bad("ring_pages = 4", "ring_pages = 0");
    assert!(e.starts_with("dma[0].ring_pages"), "{e}");
    // A 64 MB rank holds 16,384 pages.
    let e = bad("ring_pages = 4", "ring_pages = 16385");
    assert!(e.contains("do not fit in the first rank"), "{e}");
    let e = bad("ring_pages = 4", "ring_pages = 4\nburst = 2");
    assert!(e.contains("dma") && e.contains("burst"), "{e}");
    let two = text.replace("ring_pages = 4", "ring_pages = 600000")
        + "[[dma]]\nperiod_ns = 10000\nbytes = 64\nring_pages = 600000\n";
    let e = run_config(&two, Path::new(".")).unwrap_err();
    assert!(
        e.starts_with("dma: the rings hold 1200000 pages in all; at most 1048576"),
        "{e}"
    );
    let e = bad("seed = 1", "seed = 1\ndma_zone = \"last-rank\"");
    assert!(e.contains("memory.dma_zone"), "{e}");
    // Anywhere, the ring may take more than a rank.
    let s = run_config(
        &text
            .replace(
                "seed = 1",
                "seed = 1\ndma_zone = \"anywhere\"\nplacement = \"sequential\"",
            )
            .replace("ring_pages = 4", "ring_pages = 16385"),
        Path::new("."),
    )
    .unwrap();
    assert_eq!(s.dma.pages_per_rank, vec![16384, 1]);
}

/// A captured trace's processes read whole or streamed from the file as the run consumes
/// them (runs longer than the record limit): the same events, process by process.
#[test]
fn streamed_and_recorded_trace_processes_give_the_same_events() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/mem-gcc/trace.parquet");
    let (whole, l1) = load_memtrace(&path, 0.625, u64::MAX).unwrap();
    let (streamed, l2) = load_memtrace(&path, 0.625, 0).unwrap();
    assert_eq!((l1, whole.len()), (l2, streamed.len()));
    let mut events = 0;
    for (mut a, mut b) in whole.into_iter().zip(streamed) {
        assert_eq!((a.pid, &a.command), (b.pid, &b.command));
        loop {
            let e = a.stream.next_event();
            assert_eq!(e, b.stream.next_event(), "pid {}", a.pid);
            if e.is_none() {
                break;
            }
            events += 1;
        }
        assert_eq!(b.stream.error(), None);
    }
    assert!(events > 100_000, "{events}");
}

/// The cache geometry of the hand-written traces below.
fn small_geometry() -> wattio_formats::memtrace::CacheGeometry {
    wattio_formats::memtrace::CacheGeometry {
        line: 64,
        l1_bytes: 32768,
        l1_ways: 8,
        l2_bytes: 1 << 20,
        l2_ways: 8,
        cache: true,
    }
}

/// A row of a hand-written trace: a fill is one 64-byte line.
fn row(
    pid: u32,
    icount: u64,
    kind: wattio_formats::memtrace::MemKind,
    addr: u64,
) -> wattio_formats::memtrace::MemRecord {
    use wattio_formats::memtrace::{MemKind, MemRecord};
    MemRecord {
        pid,
        icount,
        kind,
        addr,
        size: if kind == MemKind::Fill { 64 } else { 0 },
        flags: 0,
        old: None,
        new: None,
        file: None,
    }
}

/// Three processes' long runs read turn about, one event each, with one reader allowed
/// open: every turn closes a reader and reopens another where it stopped, and the events
/// are those of the runs read whole; a row whose time goes back, met right after a
/// reopening, is still refused (the reader resumes with the process's clock).
#[test]
fn a_traces_readers_are_bounded_and_resume_where_they_stopped() {
    use wattio_engine::memory::{load_memtrace_bounded, TraceLimits};
    let limits = |record_rows, record_total_rows, open_readers| TraceLimits {
        record_rows,
        record_total_rows,
        open_readers,
    };
    use wattio_formats::memtrace::{MemKind, MemTraceWriter};
    let path = std::env::temp_dir().join(format!("memtrace-{}-lru.parquet", std::process::id()));
    let g = small_geometry();
    let write = |bad_at: Option<u64>| {
        let mut w = MemTraceWriter::create(&path, &g, &[]).unwrap();
        for pid in [3u32, 5, 7] {
            w.write(&row(pid, 0, MemKind::Start, 0)).unwrap();
            for i in 1..=300u64 {
                let t = if Some(i) == bad_at.filter(|_| pid == 5) {
                    1
                } else {
                    i * 10
                };
                w.write(&row(pid, t, MemKind::Fill, (pid as u64) << 20 | i << 6))
                    .unwrap();
            }
        }
        w.finish(&[]).unwrap();
    };
    write(None);
    let (whole, _) = load_memtrace(&path, 1.0, u64::MAX).unwrap();
    let want: Vec<Vec<ProcEvent>> = whole
        .into_iter()
        .map(|mut p| std::iter::from_fn(|| p.stream.next_event()).collect())
        .collect();
    assert_eq!(want.iter().map(Vec::len).collect::<Vec<_>>(), [300; 3]);
    // Turn about, one reader open at most.
    let turns = |procs: &mut Vec<wattio_engine::memory::TraceProcess>| {
        let mut got = vec![Vec::new(); procs.len()];
        let mut live = procs.len();
        while live > 0 {
            live = 0;
            for (k, p) in procs.iter_mut().enumerate() {
                if let Some(e) = p.stream.next_event() {
                    got[k].push(e);
                    live += 1;
                }
            }
        }
        got
    };
    let (mut procs, _, readers) = load_memtrace_bounded(&path, 1.0, limits(0, 0, 1)).unwrap();
    assert_eq!(turns(&mut procs), want);
    assert!(procs.iter().all(|p| p.stream.error().is_none()));
    assert_eq!(readers.most_open(), 1);
    assert_eq!(readers.open(), 0, "finished runs free their readers");
    // A process is asked 301 times (300 events, then the end); every time but the first
    // its reader was closed by another's turn and is reopened.
    assert_eq!(readers.reopened(), 3 * 300);
    // With room for all three, none is reopened.
    let (mut procs, _, readers) = load_memtrace_bounded(&path, 1.0, limits(0, 0, 3)).unwrap();
    assert_eq!(turns(&mut procs), want);
    assert_eq!((readers.most_open(), readers.reopened()), (3, 0));
    // Runs short enough to read at load, but only 700 rows of them in all: the first two
    // (301 rows each) are read, the third streamed.
    let (mut procs, _, readers) = load_memtrace_bounded(&path, 1.0, limits(1000, 700, 3)).unwrap();
    assert_eq!((readers.streamed(), readers.open()), (1, 0));
    assert_eq!(turns(&mut procs), want);
    assert_eq!(readers.most_open(), 1);
    // Process 5's row 150 goes back in time (row 301 + 150 of the file): refused after
    // a reopening, naming the row.
    write(Some(150));
    let (mut procs, _, readers) = load_memtrace_bounded(&path, 1.0, limits(0, 0, 1)).unwrap();
    let got = turns(&mut procs);
    assert_eq!(got[1].len(), 149);
    let e = procs[1].stream.error().expect("the bad row is refused");
    assert!(e.contains("row 451") && e.contains("icount 1"), "{e}");
    assert!(readers.reopened() > 0);
    std::fs::remove_file(&path).unwrap();
}

/// A row the trace's reader refuses, in a streamed process, fails the run with the row's
/// number: the process is not taken for finished.
#[test]
fn a_bad_row_in_a_streamed_process_fails_the_run_naming_it() {
    use wattio_formats::memtrace::{MemKind, MemTraceWriter};
    let path = std::env::temp_dir().join(format!("memtrace-{}-bad.parquet", std::process::id()));
    let g = small_geometry();
    let mut w = MemTraceWriter::create(&path, &g, &[]).unwrap();
    // Process 7: a start row, fills 10 instructions apart, then one whose time goes back
    // (row 6); process 9 is well formed.
    w.write(&row(7, 0, MemKind::Start, 0)).unwrap();
    for i in 1..=5u64 {
        w.write(&row(7, i * 10, MemKind::Fill, i << 12)).unwrap();
    }
    w.write(&row(7, 5, MemKind::Fill, 1 << 12)).unwrap();
    w.write(&row(9, 0, MemKind::Start, 0)).unwrap();
    w.write(&row(9, 100, MemKind::Fill, 1 << 12)).unwrap();
    w.finish(&[]).unwrap();
    // Read whole, the error comes at load; streamed, from the run.
    let e = load_memtrace(&path, 1.0, u64::MAX).err().unwrap();
    assert!(e.contains("row 6") && e.contains("icount 5"), "{e}");
    let (procs, _) = load_memtrace(&path, 1.0, 0).unwrap();
    let mut sim = MemSim::new(&cfg("nopm", 1)).unwrap();
    for p in procs {
        sim.add(p.stream);
    }
    let e = sim.run().err().unwrap();
    assert!(e.contains("row 6") && e.contains("icount 5"), "{e}");
    std::fs::remove_file(path).unwrap();
}

/// Two traces of one run that map the same file (same device and inode) number it alike;
/// a read-only file mapping is the page cache's (shared), a writable one private, and in
/// a trace that names files an anonymous executable mapping is private too. Run
/// together, the second trace's process finds the first's file page.
#[test]
fn traces_that_name_files_share_pages_across_traces() {
    use wattio_engine::memory::{load_memtrace_files, TraceLimits};
    use wattio_formats::memtrace::{
        FileMap, FileTable, MappedFile, MemKind, MemTraceWriter, MAP_FILE, MAP_R, MAP_W, MAP_X,
    };
    let dir = std::env::temp_dir().join(format!("memtrace-{}-files", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let libc = MappedFile {
        path: "/lib/libc.so.6".into(),
        dev: 8,
        ino: 99,
    };
    let other = MappedFile {
        path: "/lib/other.so".into(),
        dev: 8,
        ino: 5,
    };
    let map = |pid, vaddr, flags, file: Option<u32>| {
        let mut r = row(pid, 1, MemKind::Map, vaddr);
        r.size = 8192;
        r.flags = flags | if file.is_some() { MAP_FILE } else { 0 };
        r.file = file.map(|file| FileMap {
            file,
            offset: 0x3000,
        });
        r
    };
    // Trace a: other.so then libc (file numbers 0 and 1 in it); trace b: libc only (0).
    let a = dir.join("a.parquet");
    let mut w = MemTraceWriter::create(&a, &small_geometry(), &[]).unwrap();
    w.write(&row(1, 0, MemKind::Start, 0)).unwrap();
    w.write(&map(1, 0x10000, MAP_R | MAP_X, Some(0))).unwrap();
    w.write(&map(1, 0x20000, MAP_R | MAP_X, Some(1))).unwrap();
    w.write(&map(1, 0x30000, MAP_R | MAP_W, Some(1))).unwrap();
    w.write(&map(1, 0x40000, MAP_R | MAP_X, None)).unwrap();
    w.write(&row(1, 2, MemKind::Fill, 0x20040)).unwrap();
    w.finish_with_files(&[], &[other.clone(), libc.clone()])
        .unwrap();
    let b = dir.join("b.parquet");
    let mut w = MemTraceWriter::create(&b, &small_geometry(), &[]).unwrap();
    w.write(&row(2, 0, MemKind::Start, 0)).unwrap();
    w.write(&map(2, 0x70000, MAP_R, Some(0))).unwrap();
    w.write(&row(2, 2, MemKind::Fill, 0x70080)).unwrap();
    w.finish_with_files(&[], std::slice::from_ref(&libc))
        .unwrap();

    let mut files = FileTable::default();
    let events = |path: &Path, files: &mut FileTable| -> Vec<ProcEvent> {
        let (mut procs, _, _) =
            load_memtrace_files(path, 1.0, TraceLimits::default(), files).unwrap();
        std::iter::from_fn(|| procs[0].stream.next_event()).collect()
    };
    let ea = events(&a, &mut files);
    let eb = events(&b, &mut files);
    assert_eq!(files.files(), [other, libc]);
    let m = |vaddr, shared| ProcEvent::Map {
        vaddr,
        len: 8192,
        shared,
    };
    let f = |file| {
        ProcEvent::MapFile(FileMap {
            file,
            offset: 0x3000,
        })
    };
    assert_eq!(
        ea[..6],
        [
            m(0x10000, true),
            f(0),
            m(0x20000, true),
            f(1),
            m(0x30000, false),
            m(0x40000, false),
        ]
    );
    assert_eq!(eb[..2], [m(0x70000, true), f(1)]);

    // One run: trace b's process maps libc's page 3 at 0x70000, as trace a's did at
    // 0x20000: one physical page.
    let mut c = cfg("nopm", 1);
    c.line_bytes = 64;
    let mut sim = MemSim::new(&c).unwrap();
    sim.add_memtrace(&a, 1.0).unwrap();
    sim.add_memtrace(&b, 1.0).unwrap();
    let s = sim.run().unwrap();
    assert_eq!((s.pages_touched, s.pages_shared), (1, 1));
    // Switched off: two copies.
    c.share_file_pages = false;
    let mut sim = MemSim::new(&c).unwrap();
    sim.add_memtrace(&a, 1.0).unwrap();
    sim.add_memtrace(&b, 1.0).unwrap();
    let s = sim.run().unwrap();
    assert_eq!((s.pages_touched, s.pages_shared), (2, 0));
    std::fs::remove_dir_all(dir).ok();
}
