//! A trace replaces the config's workload: the run lasts the trace's span plus drain (not
//! the `[workload]`'s duration) unless `[run] until_s` says otherwise, and empty or
//! implausible traces are refused — by `run` and `check` alike — or with `lenient` warned
//! about in the summary.

use crate::common;

use common::*;
use wattio_engine::{check, run, Input, Registry, RunOptions};

/// The example's day of diurnal I/O: a trace run must not inherit its 86,400 s.
const WORKLOAD: &str = r#"
[workload]
arrivals = "poisson"
duration_s = 86400
rate = 0.05
read_fraction = 0.8
size = { dist = "fixed", bytes = 4096 }
footprint_bytes = 100_000_000
"#;

fn run_with(
    cfg: &str,
    reqs: Vec<wattio_core::Request>,
    input: Input,
) -> Result<wattio_engine::Summary, String> {
    run(
        &config(cfg),
        &wattio_devices::Catalogue::default(),
        &opener(reqs),
        &mut Registry::new(),
        RunOptions {
            input,
            ..Default::default()
        },
    )
}

fn check_with(
    cfg: &str,
    reqs: Vec<wattio_core::Request>,
    input: Input,
) -> Result<wattio_engine::CheckReport, String> {
    check(
        &config(cfg),
        &wattio_devices::Catalogue::default(),
        &opener(reqs),
        &mut Registry::new(),
        input,
    )
}

const STRICT: Input = Input::Trace { lenient: false };
const LENIENT: Input = Input::Trace { lenient: true };

#[test]
fn a_trace_run_lasts_its_span_plus_drain_not_the_workloads_duration() {
    // Two 50 kB reads far apart on the disk: each seeks 10 ms (3 W) and spends 6 ms
    // rotating and transferring (2 W); the second completes at 3.016 s.
    let reqs = reads(&[1.0, 3.0], &[500_000_000, 100_000_000], 50_000);
    let s = run_with(WORKLOAD, reqs.clone(), STRICT).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(s.duration_s, 3.016), "{}", s.duration_s);
    // 0.020 s × 3 W + 0.012 s × 2 W + 2.984 s idle × 1 W.
    assert!(close(s.energy_j, 0.06 + 0.024 + 2.984), "{}", s.energy_j);
    assert!(s.warnings.is_empty());
    // The same requests as the config's own workload would last the workload's day.
    let w = run_with(WORKLOAD, reqs.clone(), Input::Workload).unwrap();
    assert!(close(w.duration_s, 86_400.0), "{}", w.duration_s);
    // An explicit end wins over the span.
    let u = run_with(&format!("[run]\nuntil_s = 10\n{WORKLOAD}"), reqs, STRICT).unwrap();
    assert!(close(u.duration_s, 10.0), "{}", u.duration_s);
    assert!(close(u.energy_j, 0.06 + 0.024 + 9.968), "{}", u.energy_j);
}

#[test]
fn an_empty_trace_is_refused_by_run_and_check_alike_unless_lenient() {
    let want = "the trace gave no requests; the trace was read as:  (fix the trace, its --format/--columns or --device, or pass --lenient to run it anyway)";
    assert_eq!(run_with("", Vec::new(), STRICT).unwrap_err(), want);
    assert_eq!(check_with("", Vec::new(), STRICT).unwrap_err(), want);
    let s = run_with(WORKLOAD, Vec::new(), LENIENT).unwrap();
    assert_eq!(s.warnings, vec!["the trace gave no requests".to_string()]);
    assert_eq!((s.requests, s.duration_s), (0, 0.0));
    let c = check_with("", Vec::new(), LENIENT).unwrap();
    assert_eq!(c.warnings, s.warnings);
    assert_eq!(c.trace, Some((0, 0)));
}

#[test]
fn a_span_implausible_for_the_clock_is_refused_unless_lenient() {
    // 3,000 reads 200 ns apart: what an MSR file with Unix seconds reads as.
    let times: Vec<f64> = (0..3000).map(|i| i as f64 * 200e-9).collect();
    let reqs = reads(&times, &[0], 4096);
    let e = run_with("", reqs.clone(), STRICT).unwrap_err();
    assert!(
        e.starts_with("3000 requests arrive within 0.600 ms (one every 200 ns on average, over a million a second)"),
        "{e}"
    );
    assert_eq!(check_with("", reqs.clone(), STRICT).unwrap_err(), e);
    let s = run_with("", reqs.clone(), LENIENT).unwrap();
    assert_eq!(s.requests, 3000);
    assert_eq!(s.warnings.len(), 1);
    let c = check_with("", reqs, LENIENT).unwrap();
    assert_eq!((c.trace, c.warnings), (Some((3000, 599_800)), s.warnings));
}

#[test]
fn check_refuses_what_assembly_refuses_without_simulating() {
    let bad = "[[function]]\nkind = \"spindown\"\npolicy = \"fixed\"\ntimeout_s = 5\n[[device]]\nname = \"disk\"\nmodel = \"no-such-drive\"\n";
    // An unknown catalogue model: found at assembly, by check as by run.
    let e = check_with(bad, reads(&[1.0], &[0], 512), STRICT).unwrap_err();
    let r = run_with(bad, reads(&[1.0], &[0], 512), STRICT).unwrap_err();
    assert_eq!(e, r);
    assert!(e.starts_with("test.toml: device[1].model: "), "{e}");
}

#[test]
fn config_type_errors_name_the_full_key_path() {
    let e = wattio_engine::RunConfig::from_toml(
        "c.toml",
        "[run]\nseed = \"x\"\n[[device]]\nname = \"d\"\nmodel = \"m\"\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("c.toml: run.seed: TOML parse error at line 2, column 8"),
        "{e}"
    );
    let e = wattio_engine::RunConfig::from_toml(
        "c.toml",
        "[[device]]\nname = \"d\"\nmodel = \"m\"\n[[device]]\nname = \"e\"\ncount = -1\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("c.toml: device[1].count: TOML parse error at line 6"),
        "{e}"
    );
}
