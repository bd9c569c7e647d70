//! Delay-hiding over file-call traces: two captures merged by arrival, file ids kept
//! apart, flush rows skipped, bad rows named — checked against a hand-computed run.

use std::path::{Path, PathBuf};
use wattio_core::{Op, Request};
use wattio_engine::memory::delay_hiding::{footprint_blocks, run_file_calls};
use wattio_formats::filecalls::FILES_KEY;
use wattio_formats::ColumnarWriter;
use wattio_functions::memory::delay_hiding::DelayHidingConfig;

/// A file-call trace of `files` paths and `(arrival, op, file, offset, len)` rows.
fn trace(name: &str, files: &[&str], rows: &[(u64, Op, u64, u64, u32)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wattio-dh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let prov = vec![(FILES_KEY.to_string(), serde_json::to_string(files).unwrap())];
    let mut w = ColumnarWriter::create(&path, &prov).unwrap();
    for &(at, op, file, offset, len) in rows {
        let mut r = Request::new(at, op, offset, len);
        r.file = Some(file);
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
    path
}

fn isr() -> DelayHidingConfig {
    DelayHidingConfig {
        predictor: "isr".into(),
        ranks: 2,
        blocks_per_rank: 1,
        ..DelayHidingConfig::default()
    }
}

#[test]
fn two_traces_merge_by_arrival_with_their_own_files() {
    // Program A reads its file 0 at 0 and again at 300 ns; program B writes its own file 0
    // at 100 ns and fsyncs it. Merged: A (miss, rank 0), B (miss, rank 1: B's file 0 is
    // not A's), the flush skipped, A again (hit on rank 0).
    let a = trace(
        "a.parquet",
        &["/a"],
        &[(0, Op::Read, 0, 0, 4096), (300, Op::Read, 0, 0, 4096)],
    );
    let b = trace(
        "b.parquet",
        &["/b"],
        &[(100, Op::Write, 0, 0, 4096), (150, Op::Flush, 0, 0, 0)],
    );
    let paths: [&Path; 2] = [&a, &b];
    let r = run_file_calls(&paths, &isr()).unwrap();
    assert_eq!(r.calls, 3);
    assert_eq!((r.cache_hits, r.cache_misses), (1, 2));
    // Blocks read from storage wake their rank behind the storage access (no prediction);
    // the hit finds rank 0 in self refresh and waits out its 500 ns exit.
    assert_eq!(r.predictions.all_from_storage, 2);
    assert_eq!(r.predictions.miss, 1);
    assert_eq!(r.delay_ns, 500);
    // Three 4 KB copies of 640 ns; 500 ns entry to copy each, no exit time.
    assert_eq!((r.memory_io_ns, r.kernel_ns), (3 * 640, 3 * 500));
    assert_eq!(footprint_blocks(&paths, 4096).unwrap(), 2);
    // A alone: the second read hits, same delay.
    let alone = run_file_calls(&[a.as_path()], &isr()).unwrap();
    assert_eq!((alone.calls, alone.cache_hits, alone.delay_ns), (2, 1, 500));
}

#[test]
fn a_row_naming_a_file_beyond_the_table_is_an_error_with_its_row() {
    let bad = trace(
        "bad.parquet",
        &["/only"],
        &[(0, Op::Read, 0, 0, 512), (10, Op::Read, 1, 0, 512)],
    );
    let e = run_file_calls(&[bad.as_path()], &isr()).unwrap_err();
    assert!(e.contains("bad.parquet: row 2: file id 1"), "{e}");
    assert!(e.contains("below the trace's 1 files"), "{e}");
}
