//! `wattio disk validate` on any trace with measured response times
//! (`wattio_engine::validation`): the general path gives DiskSim's validation exactly on
//! DiskSim's own traces, and reads blkparse's completions, choosing its replay by the
//! trace's queue depth.

use std::path::Path;
use wattio_core::device::{Service, Timing};
use wattio_core::io::Io;
use wattio_devices::disksim::import_parv;
use wattio_devices::disksim::validate::{validate, Loop, Validation, DISKSIM_DEMERIT_MS};
use wattio_devices::mechanical::MechanicalDisk;
use wattio_engine::validation::validate_trace;
use wattio_formats::ReadOptions;

#[test]
fn the_general_path_is_disksims_validation_on_its_traces() {
    let dir = std::env::var_os("DISKSIM_VALID").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/disksim-valid"),
        std::path::PathBuf::from,
    );
    if !dir.is_dir() {
        eprintln!(
            "SKIPPED: {} is absent (the shared data beside the checkout)",
            dir.display()
        );
        return;
    }
    for &(d, _) in DISKSIM_DEMERIT_MS {
        let (parv, trace) = (
            dir.join(format!("{d}.parv")),
            dir.join(format!("{d}.trace")),
        );
        let exact = validate(&parv, &trace).unwrap();
        let imp = import_parv(&parv).unwrap();
        let disk = Box::new(MechanicalDisk::new(imp.timing).unwrap());
        // Detected from the file, replayed as the trace's queue depth of one says.
        let t = validate_trace(disk, &trace, None, &ReadOptions::default(), None).unwrap();
        assert_eq!((t.replay, t.max_outstanding), (Loop::Closed, 1), "{d}");
        let general = Validation::new(
            imp.name,
            &t.replayed,
            t.replay,
            t.max_outstanding,
            imp.unsupported,
        );
        assert_eq!(general, exact, "{d}");
    }
}

/// 4 ms per I/O, one at a time.
struct Fixed;

impl Timing for Fixed {
    fn capacity(&self) -> u64 {
        1 << 30
    }
    fn service(&mut self, _start: u64, _io: &Io) -> Service {
        Service {
            transfer_ns: 4_000_000,
            ..Default::default()
        }
    }
}

#[test]
fn a_blkparse_trace_with_two_outstanding_replays_open_loop() {
    let dir = std::env::temp_dir().join(format!("wattio-validation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("sdb.txt");
    // Two reads 1 ms apart, both in flight (measured 3 and 5 ms), a flush, a third read
    // later; and another device's write.
    std::fs::write(
        &trace,
        "  8,16  0  1  0.010000000  7  D   R 0 + 8 [dd]
  8,16  0  2  0.011000000  7  D   R 800 + 8 [dd]
  8,32  0  3  0.011500000  9  D   W 64 + 8 [kw]
  8,16  1  4  0.013000000  0  C   R 0 + 8 [0]
  8,16  1  5  0.016000000  0  C   R 800 + 8 [0]
  8,16  0  6  0.017000000  7  D FWS [jbd2]
  8,16  1  7  0.017500000  0  C FWS 0 [0]
  8,16  0  8  0.030000000  7  D   R 1600 + 8 [dd]
  8,16  1  9  0.032000000  0  C   R 1600 + 8 [0]
",
    )
    .unwrap();
    let opts = |dev: Option<&str>| ReadOptions {
        device: dev.map(str::to_string),
        ..ReadOptions::default()
    };
    let e = validate_trace(Box::new(Fixed), &trace, None, &opts(None), None).unwrap_err();
    assert!(
        e.contains("request 2: dev 1") && e.contains("--device KEY"),
        "{e}"
    );
    let t = validate_trace(Box::new(Fixed), &trace, None, &opts(Some("8,16")), None).unwrap();
    assert_eq!((t.replay, t.max_outstanding), (Loop::Open, 2));
    // Open: 4 ms, then the second waits for the first (done at 4 ms, 1 ms after it came:
    // 7 ms), the third alone.
    assert_eq!(t.replayed.sim_us, [4_000.0, 7_000.0, 4_000.0]);
    assert_eq!(t.replayed.measured_us, [3_000.0, 5_000.0, 2_000.0]);
    assert_eq!((t.replayed.not_replayed, t.replayed.unmeasured), (1, 0));
    // Closed, asked for: every request 4 ms.
    let c = validate_trace(
        Box::new(Fixed),
        &trace,
        None,
        &opts(Some("8,16")),
        Some(Loop::Closed),
    )
    .unwrap();
    assert_eq!(c.replayed.sim_us, [4_000.0; 3]);
    // The completions kept as the requests: nothing measured to compare with.
    let only_c = ReadOptions {
        blkparse_action: Some('C'),
        ..opts(Some("8,16"))
    };
    let e = validate_trace(Box::new(Fixed), &trace, None, &only_c, None).unwrap_err();
    assert!(e.contains("no request has a measured response time"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
