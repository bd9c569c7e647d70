//! DiskSim's real-drive validation: replay each drive's validation trace and compare the
//! demerit with DiskSim's own (table in `disksim-valid/README.md`). Reads the data from
//! `<repo>/../shared/disksim-valid` or `$WATTIO_SHARED/disksim-valid`; skips (with a
//! message) if absent. Slow-ish: seven 10,000-request replays.

use std::path::PathBuf;
use wattio_devices::disksim::validate::validate;

/// (drive, DiskSim's demerit, the demerit this model reaches today). Every drive but
/// dec_rz26 is held to DiskSim's figure (+ 0.001 ms, the spread between DiskSim's own
/// builds); dec_rz26, which the model does not yet bring under DiskSim's figure (see
/// `docs/validation.md`), is held to what it reaches so regressions fail.
// 0.318 is DiskSim's published figure, not 1/π.
#[allow(clippy::approx_constant)]
const DRIVES: &[(&str, f64, f64)] = &[
    ("atlas_III", 0.378, 0.372),
    ("barracuda", 0.349, 0.319),
    ("cheetah4LP", 0.318, 0.314),
    ("atlas10k", 0.268, 0.094),
    ("hp_c2247a", 0.090, 0.087),
    ("hp_c2490a", 0.254, 0.246),
    ("dec_rz26", 0.340, 0.424),
];

fn data_dir() -> Option<PathBuf> {
    let d = match std::env::var_os("WATTIO_SHARED") {
        Some(s) => PathBuf::from(s).join("disksim-valid"),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/disksim-valid"),
    };
    d.join("README.md").exists().then_some(d)
}

#[test]
fn demerit_against_disksim() {
    let Some(dir) = data_dir() else {
        eprintln!("SKIPPED: DiskSim validation data not found (set WATTIO_SHARED or provide ../shared/disksim-valid)");
        return;
    };
    let mut failures = Vec::new();
    for &(d, disksim, reached) in DRIVES {
        let v = validate(
            &dir.join(format!("{d}.parv")),
            &dir.join(format!("{d}.trace")),
        )
        .unwrap_or_else(|e| panic!("{d}: {e}"));
        assert!(v.requests >= 7_000, "{d}: {} requests", v.requests);
        let bound = if reached <= disksim {
            disksim + 0.001
        } else {
            reached + 0.001
        };
        eprintln!(
            "{d}: demerit {:.3} ms (DiskSim {disksim:.3}); mean {:.3}/{:.3} ms, p90 {:.3}/{:.3} ms",
            v.demerit_ms, v.mean_sim_ms, v.mean_measured_ms, v.p90_sim_ms, v.p90_measured_ms
        );
        if v.demerit_ms > bound {
            failures.push(format!(
                "{d}: demerit {:.4} ms > bound {bound:.3}",
                v.demerit_ms
            ));
        }
        // The mean response time is within 10 % of the measured one on every drive.
        assert!(
            (v.mean_sim_ms - v.mean_measured_ms).abs() < 0.1 * v.mean_measured_ms,
            "{d}: mean {} vs {}",
            v.mean_sim_ms,
            v.mean_measured_ms
        );
    }
    assert!(failures.is_empty(), "{failures:?}");
}
