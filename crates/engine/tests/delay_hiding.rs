//! Delay-hiding over file-call traces: two captures merged by arrival, file ids kept
//! apart, flush rows skipped, bad rows named — checked against a hand-computed run.

use std::path::{Path, PathBuf};
use wattio_core::{Op, Request};
use wattio_engine::memory::delay_hiding::{
    footprint_blocks, layout, run_file_calls, run_with_storage,
};
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

const S: u64 = 1_000_000_000;

/// A laptop disk under a 5 s spin-down timeout serves the buffer cache's traffic.
fn storage_config(extra: &str) -> wattio_engine::RunConfig {
    wattio_engine::RunConfig::from_toml(
        "storage",
        &format!(
            r#"
[[device]]
name = "disk"
model = "toshiba-mk1234gsx"

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 5
devices = ["disk"]
{extra}"#
        ),
    )
    .unwrap()
}

#[test]
fn misses_and_write_backs_reach_the_storage_stack_laid_out_file_after_file() {
    // File a: 8 KiB written whole at 0 (no read), fsynced at 3 s (one 8 KiB write at byte
    // 0). File b (from byte 8,192: a's extent): a miss at 1 s (4 KiB read), two misses at
    // 2 s (one 8 KiB read), a partial write at 4 s to cached block 0, which the flusher
    // writes back at the first wakeup 30 s after 4 s: 35 s.
    let t = trace(
        "storage.parquet",
        &["/a", "/b"],
        &[
            (0, Op::Write, 0, 0, 8192),
            (S, Op::Read, 1, 0, 4096),
            (2 * S, Op::Read, 1, 4096, 8192),
            (3 * S, Op::Flush, 0, 0, 0),
            (4 * S, Op::Write, 1, 100, 10),
        ],
    );
    let cfg = DelayHidingConfig {
        predictor: "af-mra-et".into(),
        ranks: 2,
        blocks_per_rank: 4,
        ..DelayHidingConfig::default()
    };
    let paths = [t.as_path()];
    let l = layout(&paths, 4096).unwrap();
    assert_eq!(
        (l.start.as_slice(), l.bytes, l.last_arrival),
        (&[0, 8192][..], 20_480, 4 * S)
    );
    let cat = wattio_devices::Catalogue::embedded().unwrap();
    let run = run_with_storage(&paths, &cfg, &storage_config(""), &cat).unwrap();
    // The memory side is the run without storage.
    assert_eq!(run.report, run_file_calls(&paths, &cfg).unwrap());
    assert_eq!(
        (
            run.written_back.evicted,
            run.written_back.synced,
            run.written_back.expired
        ),
        (0, 2, 1)
    );
    let s = &run.summary;
    let disk = &s.devices["disk"];
    assert_eq!((s.requests, disk.ios), (4, 4));
    assert_eq!((disk.bytes_read, disk.bytes_written), (12_288, 12_288));
    // Spun down 5 s after the 4 s write, up again for the 35 s write-back.
    assert_eq!(disk.spin_ups, 1);
    let residency: f64 = disk.residency_s.values().sum();
    assert!(
        (residency - s.duration_s).abs() < 1e-9,
        "{residency} vs {}",
        s.duration_s
    );
    assert!(s.duration_s > 35.0);

    // The same four requests as a plain trace on the same stack: the same run.
    let reqs = vec![
        Request::new(S, Op::Read, 8192, 4096),
        Request::new(2 * S, Op::Read, 12_288, 8192),
        Request::new(3 * S, Op::Write, 0, 8192),
        Request::new(35 * S, Op::Write, 8192, 4096),
    ];
    let st = storage_config("");
    let asm =
        wattio_engine::assemble(&st, &cat, None, &mut wattio_engine::Registry::new(), 0).unwrap();
    let models = asm.models.clone();
    let out = wattio_engine::Simulator::new(asm.stack, asm.devices)
        .run(
            &mut wattio_core::trace::VecSource::new(reqs),
            None,
            4 * S,
            &mut wattio_engine::NullSink,
        )
        .unwrap();
    let direct = wattio_engine::Summary::build(None, 0, &models, &out);
    assert_eq!(direct.duration_s, s.duration_s);
    assert_eq!(direct.energy_j, s.energy_j);
    assert_eq!(direct.mean_latency_ms, s.mean_latency_ms);
    assert_eq!(direct.devices["disk"].residency_s, disk.residency_s);
}

#[test]
fn an_evicted_dirty_block_is_written_before_the_read_that_takes_its_buffer() {
    // One buffer: a's block written at 0, b's block read at 1 s evicts it.
    let t = trace(
        "evict.parquet",
        &["/a", "/b"],
        &[(0, Op::Write, 0, 0, 4096), (S, Op::Read, 1, 0, 4096)],
    );
    let cfg = DelayHidingConfig {
        ranks: 1,
        blocks_per_rank: 1,
        ..DelayHidingConfig::default()
    };
    let cat = wattio_devices::Catalogue::embedded().unwrap();
    let run = run_with_storage(&[t.as_path()], &cfg, &storage_config(""), &cat).unwrap();
    assert_eq!(run.written_back.evicted, 1);
    let disk = &run.summary.devices["disk"];
    assert_eq!(
        (disk.ios, disk.bytes_read, disk.bytes_written),
        (2, 4096, 4096)
    );
}

#[test]
fn a_storage_config_with_a_workload_or_too_small_a_device_is_refused_by_name() {
    let t = trace("far.parquet", &["/far"], &[(0, Op::Read, 0, 1 << 50, 4096)]);
    let cat = wattio_devices::Catalogue::embedded().unwrap();
    let cfg = DelayHidingConfig::default();
    let e = run_with_storage(&[t.as_path()], &cfg, &storage_config(""), &cat)
        .err()
        .unwrap();
    assert!(
        e.starts_with(
            "storage: the traces' files take 1125899906846720 bytes, expected at most the"
        ),
        "{e}"
    );
    assert!(e.contains("of `disk`"), "{e}");
    let e = run_with_storage(
        &[t.as_path()],
        &cfg,
        &storage_config("[workload]\narrivals = \"poisson\"\nduration_s = 1\n"),
        &cat,
    )
    .err()
    .unwrap();
    assert!(e.contains("no [workload] or [trace]"), "{e}");
}
