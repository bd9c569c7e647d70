//! Whole runs on hand-written memory traces: a fill/write-back trace straight into the LLC,
//! a load/store trace through the L1, with the bits, time and unknown fills counted by hand.

use std::path::PathBuf;
use wattio_formats::memtrace::{CacheGeometry, MemKind, MemRecord, MemTraceWriter, Process};
use wattio_nvcache::{
    run_trace, run_trace_keeping, Encoding, Hybrid, LlcConfig, SimConfig, WearLevelling,
};

fn rec(
    icount: u64,
    kind: MemKind,
    addr: u64,
    size: u64,
    old: Option<Vec<u8>>,
    new: Option<Vec<u8>>,
) -> MemRecord {
    MemRecord {
        pid: 7,
        icount,
        kind,
        addr,
        size,
        flags: 0,
        old,
        new,
        file: None,
    }
}

fn write_trace(name: &str, cache: bool, rows: &[MemRecord]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("nvcache-{}-{name}.parquet", std::process::id()));
    let g = CacheGeometry {
        line: 64,
        l1_bytes: 32768,
        l1_ways: 8,
        l2_bytes: 32768,
        l2_ways: 8,
        cache,
    };
    let mut w = MemTraceWriter::create(&path, &g, &[]).unwrap();
    w.write(&rec(0, MemKind::Start, 0, 0, None, None)).unwrap();
    for r in rows {
        w.write(r).unwrap();
    }
    let exit = rows.last().map_or(0, |r| r.icount) + 1_000_000_000;
    w.write(&MemRecord {
        flags: 0,
        ..rec(exit, MemKind::Exit, 0, 0, None, None)
    })
    .unwrap();
    w.finish(&[Process {
        pid: 7,
        command: "hand".into(),
        ..Default::default()
    }])
    .unwrap();
    path
}

fn config(encoding: Encoding, hybrid: Option<Hybrid>) -> SimConfig {
    SimConfig {
        l1_bytes: 1024,
        l1_ways: 2,
        llc: LlcConfig {
            bytes: 4096,
            ways: 4,
            encoding,
            hybrid,
            wear_levelling: WearLevelling::default(),
            read_before_write: false,
        },
        clock: Default::default(),
        passes: 1,
    }
}

fn line(first: u8) -> Vec<u8> {
    let mut l = vec![0u8; 64];
    l[0] = first;
    l
}

/// Line A filled (content 0x0F, shown by its write-back's old bytes), line B filled (never
/// written: content unknown), A written back as 0xFF.
fn fills_and_a_write_back() -> [MemRecord; 3] {
    [
        rec(100, MemKind::Fill, 0x1000, 64, None, None),
        rec(200, MemKind::Fill, 0x2000, 64, None, None),
        rec(
            400,
            MemKind::WriteBack,
            0x1000,
            64,
            Some(line(0x0F)),
            Some(line(0xFF)),
        ),
    ]
}

#[test]
fn fill_and_writeback_rows_go_straight_to_the_llc() {
    // Line A (content 0x0F at fill, shown by its write-back's old bytes) and line B (never
    // written: content unknown, zeros). A's fill programs 4 cells into an empty frame; its
    // write-back 0x0F -> 0xFF programs 4 more; B's fill programs none.
    let rows = fills_and_a_write_back();
    let path = write_trace("fills", true, &rows);
    let rep = run_trace(&path, &config(Encoding::Dw, None)).unwrap();
    assert!(!rep.through_l1);
    let t = rep.traffic;
    assert_eq!(
        (t.n_lower, t.n_upper, t.reads, t.writes, t.write_hits),
        (4, 4, 2, 1, 1)
    );
    assert_eq!((rep.fills_unknown, rep.old_mismatches), (1, 0));
    // Time spans the traffic rows (400 instructions), not the far-away exit row.
    assert_eq!(rep.instructions, 400);
    assert_eq!(rep.seconds, 400.0 / 2e9);
    // The hybrid cache takes A's write into its free buffer, which held zeros: 0xFF programs
    // 8 STT-RAM cells, and no PRAM cell.
    let hc = run_trace(&path, &config(Encoding::Dw, Some(Hybrid::new(2)))).unwrap();
    assert_eq!(
        (hc.traffic.n_upper, hc.traffic.n_wb, hc.traffic.n_lower),
        (0, 8, 4)
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn passes_replay_the_trace_over_the_caches_the_last_pass_left() {
    // The trace of fill_and_writeback_rows_go_straight_to_the_llc, replayed twice. Pass 2
    // finds A and B still in the LLC: two read hits that program nothing, and A's
    // write-back 0xFF over 0xFF programs nothing. Time doubles; the trace's unknown fill and
    // its old bytes are judged on the first pass only (on the second the LLC holds 0xFF
    // where the row says 0x0F, a consequence of looping, not a fault of the trace).
    let rows = fills_and_a_write_back();
    let path = write_trace("passes", true, &rows);
    let cfg = SimConfig {
        passes: 2,
        ..config(Encoding::Dw, None)
    };
    let rep = run_trace(&path, &cfg).unwrap();
    let t = rep.traffic;
    assert_eq!(
        (
            t.n_lower,
            t.n_upper,
            t.reads,
            t.read_hits,
            t.writes,
            t.write_hits
        ),
        (4, 4, 4, 2, 2, 2)
    );
    assert_eq!((rep.fills_unknown, rep.old_mismatches), (1, 0));
    assert_eq!(rep.instructions, 800);
    // Read again from the file for every pass (no row kept in memory): the same run.
    let again = run_trace_keeping(&path, &cfg, 1).unwrap();
    assert_eq!(
        serde_json::to_string(&again).unwrap(),
        serde_json::to_string(&rep).unwrap()
    );
    // Out of range: an error naming the key.
    for passes in [0, 10_001] {
        let e = run_trace(&path, &SimConfig { passes, ..cfg }).unwrap_err();
        assert!(e.contains(&format!("passes = {passes}")), "{e}");
    }
    std::fs::remove_file(path).unwrap();
}

#[test]
fn loads_and_stores_go_through_the_l1_with_their_bytes() {
    // A store of 0x03 over 0x01 at byte 8 of line 0x40: memory starts as its old byte shows
    // (0x01, 1 cell on the fill), the flushed L1 line writes 0x03 (1 more cell). A load of
    // an unseen line fills zeros. A store straddling two lines touches both.
    let rows = [
        rec(
            10,
            MemKind::Store,
            0x48,
            1,
            Some(vec![0x01]),
            Some(vec![0x03]),
        ),
        rec(20, MemKind::Load, 0x1000, 8, None, None),
        rec(
            30,
            MemKind::Store,
            0x203E,
            4,
            Some(vec![0, 0, 0, 0]),
            Some(vec![1, 1, 1, 1]),
        ),
    ];
    let path = write_trace("stores", false, &rows);
    let rep = run_trace(&path, &config(Encoding::Dw, None)).unwrap();
    assert!(rep.through_l1);
    assert_eq!(
        (rep.l1.accesses, rep.l1.misses, rep.l1.writebacks),
        (4, 4, 3)
    );
    let t = rep.traffic;
    // Fills: 0x40 holds 0x01 (1 cell), the others zeros. Write-backs: 0x03 over 0x01 (1
    // cell), two 0x0101 halves of the straddling store (2 + 2 cells).
    assert_eq!((t.n_lower, t.n_upper), (1, 5));
    assert_eq!(rep.instructions, 30);
    // BL programs all 512 cells of each of the 4 fills and 3 write-backs.
    let bl = run_trace(&path, &config(Encoding::Bl, None)).unwrap();
    assert_eq!(bl.traffic.pram_bits(), 7 * 512);
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_missing_trace_and_a_bad_l1_are_errors_naming_them() {
    let path = std::env::temp_dir().join(format!("nvcache-{}-none.parquet", std::process::id()));
    let err = run_trace(&path, &config(Encoding::Dw, None)).unwrap_err();
    assert!(
        err.contains("nvcache-") && err.contains("none.parquet"),
        "{err}"
    );
    let bad = SimConfig {
        l1_bytes: 1000,
        ..config(Encoding::Dw, None)
    };
    let p = write_trace("bad-l1", false, &[]);
    assert!(run_trace(&p, &bad)
        .unwrap_err()
        .contains("L1 of 1000 bytes"));
    std::fs::remove_file(p).unwrap();
}
