//! Launch replay and hybrid-disk pinning (`wattio reproduce launch`): a captured launch
//! (`wattio capture launch`) replayed on a run config's devices and stack, and the pinning
//! ILP against its baselines.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use wattio_devices::hdd::ParametricHdd;
use wattio_devices::Catalogue;
use wattio_engine::launch::{replay, replay_windows, Launch};
use wattio_engine::pinning::{Hybrid, Pinned};
use wattio_engine::RunConfig;

/// Bounds on what a caller controls: replayed launches, and ILP solves per call.
const MAX_RUNS: usize = 16;
const MAX_BUDGETS: usize = 64;
/// Branch-and-bound nodes per pinning solve, unless the caller says otherwise, and at most.
const DEFAULT_NODES: u64 = 2000;
const MAX_NODES: u64 = 1_000_000;
/// Chunks the ILP's edges may span (its variables grow with chunks × window).
const MAX_WINDOW: usize = 1024;

fn err(e: impl ToString) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// The bounds on a replay's runs and the gap between them.
fn check_runs(runs: usize, gap_s: f64) -> PyResult<()> {
    if !(1..=MAX_RUNS).contains(&runs) {
        return Err(err(format!("runs: expected 1 to {MAX_RUNS}, got {runs}")));
    }
    if !(0.0..=3600.0).contains(&gap_s) {
        return Err(err(format!("gap_s: expected 0 to 3600 s, got {gap_s}")));
    }
    Ok(())
}

/// A replay's common JSON: `{"captured_s", "durations_s", "counters", "requests", "errors"}`.
fn replayed_json(launch: &Launch, r: &wattio_engine::launch::Replayed) -> serde_json::Value {
    let counters: serde_json::Map<String, serde_json::Value> = r
        .counters
        .iter()
        .map(|(k, v)| (k.clone(), (*v).into()))
        .collect();
    serde_json::json!({
        "captured_s": launch.captured_end as f64 / 1e9,
        "durations_s": r.durations.iter().map(|&d| d as f64 / 1e9).collect::<Vec<_>>(),
        "counters": counters,
        "requests": r.requests,
        "errors": r.errors,
    })
}

fn load(trace: &str) -> PyResult<Launch> {
    Launch::open(Path::new(trace)).map_err(err)
}

/// Replay the launch of `trace` `runs` times, `gap_s` apart, on the devices and stack of
/// `config` (run-config TOML text). JSON: `{"captured_s", "durations_s", "counters",
/// "requests", "errors"}`.
#[pyfunction]
fn launch_replay(trace: &str, config: &str, runs: usize, gap_s: f64) -> PyResult<String> {
    let launch = load(trace)?;
    let cfg = RunConfig::from_toml("launch config", config).map_err(err)?;
    let cat = Catalogue::embedded().map_err(err)?;
    check_runs(runs, gap_s)?;
    let r = replay(&launch, &cfg, &cat, runs, (gap_s * 1e9) as u64).map_err(err)?;
    Ok(replayed_json(&launch, &r).to_string())
}

/// A closed-loop replay of `trace` (a launch trace, or any block trace with measured
/// response times in `format`, read with the trace options: `Launch::open_closed_loop`)
/// `runs` times, `gap_s` apart, on the devices
/// and stack of `config`, with every device over each run. JSON: as `launch_replay`, plus
/// `"runs": [{"start_s", "end_s", "devices": {NAME: {"energy_j", "energy_by_state_j",
/// "residency_s", "ios", "bytes_read", "bytes_written", "busy_s", "seek_s", "rotate_s",
/// "transfer_s", "overhead_s"}}}]`.
#[pyfunction]
#[pyo3(signature = (trace, config, runs, gap_s, format=None, **read))]
fn trace_replay(
    trace: &str,
    config: &str,
    runs: usize,
    gap_s: f64,
    format: Option<String>,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let read = crate::trace::read_options(read)?;
    let launch =
        Launch::open_closed_loop(Path::new(trace), format.as_deref(), &read).map_err(err)?;
    let cfg = RunConfig::from_toml("replay config", config).map_err(err)?;
    let cat = Catalogue::embedded().map_err(err)?;
    check_runs(runs, gap_s)?;
    let (r, windows) =
        replay_windows(&launch, &cfg, &cat, runs, (gap_s * 1e9) as u64).map_err(err)?;
    let s = |ns: u64| ns as f64 / 1e9;
    let runs: Vec<serde_json::Value> = windows
        .iter()
        .map(|w| {
            let devices: serde_json::Map<String, serde_json::Value> = w
                .devices
                .iter()
                .map(|d| {
                    let c = d.counters;
                    let v = serde_json::json!({
                        "energy_j": d.energy_j,
                        "energy_by_state_j": d.energy_by_state_j,
                        "residency_s": d.residency_s,
                        "ios": c.ios,
                        "bytes_read": c.bytes_read,
                        "bytes_written": c.bytes_written,
                        "busy_s": s(c.busy_ns),
                        "seek_s": s(c.seek_ns),
                        "rotate_s": s(c.rotate_ns),
                        "transfer_s": s(c.transfer_ns),
                        "overhead_s": s(c.overhead_ns),
                    });
                    (d.name.clone(), v)
                })
                .collect();
            serde_json::json!({"start_s": s(w.start), "end_s": s(w.end), "devices": devices})
        })
        .collect();
    let mut v = replayed_json(&launch, &r);
    v["runs"] = runs.into();
    Ok(v.to_string())
}

/// Pinning the launch of `trace` on a hybrid disk of catalogue entries `hdd`
/// (`hdd-parametric`) and `flash`, at each budget (fraction of the launch's bytes): none,
/// FCFP, SCF and the ILP (`window` chunks). JSON: one row per budget and scheme, with
/// disk-access time, simulated launch time (the launch model with each request's hybrid
/// latency), pinned bytes, and for the ILP solve time, gap, branch-and-bound nodes (at
/// most `nodes` per solve) and whether the optimum was proven.
#[pyfunction]
#[pyo3(signature = (trace, hdd, flash, budgets, window, nodes = DEFAULT_NODES))]
fn launch_pinning(
    trace: &str,
    hdd: &str,
    flash: &str,
    budgets: Vec<f64>,
    window: usize,
    nodes: u64,
) -> PyResult<String> {
    if budgets.len() > MAX_BUDGETS {
        return Err(err(format!(
            "budgets: at most {MAX_BUDGETS}, got {}",
            budgets.len()
        )));
    }
    if let Some(b) = budgets.iter().find(|b| !(0.0..=1.0).contains(*b)) {
        return Err(err(format!(
            "budgets: expected fractions from 0 to 1, got {b}"
        )));
    }
    if !(1..=MAX_WINDOW).contains(&window) {
        return Err(err(format!(
            "window: expected 1 to {MAX_WINDOW} chunks, got {window}"
        )));
    }
    if !(1..=MAX_NODES).contains(&nodes) {
        return Err(err(format!(
            "nodes: expected 1 to {MAX_NODES}, got {nodes}"
        )));
    }
    let launch = load(trace)?;
    let cat = Catalogue::embedded().map_err(err)?;
    let spec = cat.get(hdd).map_err(err)?;
    let disk = ParametricHdd::from_toml(&spec.timing).map_err(|e| {
        err(format!(
            "{hdd}: {e} (the pinning model needs an hdd-parametric entry)"
        ))
    })?;
    let mut fl = cat.get(flash).map_err(err)?.build_timing().map_err(err)?;
    let seq: Vec<(u64, u32)> = launch.steps.iter().map(|s| (s.offset, s.len)).collect();
    let total: u64 = seq.iter().map(|&(_, l)| l as u64).sum();
    let mut h = Hybrid::new(&disk, fl.as_mut(), &seq);
    let mut rows = Vec::new();
    let mut row =
        |h: &mut Hybrid, budget: f64, scheme: &str, p: &Pinned, extra: serde_json::Value| {
            let lat = h.latencies(&p.pins);
            let t = launch.timeline(|i| Some(lat[i]));
            let mut v = serde_json::json!({
                "budget": budget,
                "scheme": scheme,
                "disk_s": p.total() as f64 / 1e9,
                "hdd_s": p.hdd as f64 / 1e9,
                "launch_s": t.end as f64 / 1e9,
                "pinned_fraction": p.pinned_bytes as f64 / total.max(1) as f64,
            });
            if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
                o.extend(e.clone());
            }
            rows.push(v);
        };
    let none = h.evaluate(&vec![false; h.chunks.len()]);
    row(&mut h, 0.0, "none", &none, serde_json::json!({}));
    for &b in &budgets {
        let bytes = (b * total as f64) as u64;
        let f = h.fcfp(bytes);
        row(&mut h, b, "fcfp", &f, serde_json::json!({}));
        let s = h.scf(bytes);
        row(&mut h, b, "scf", &s, serde_json::json!({}));
        let o = h.optimal(bytes, window, nodes).map_err(err)?;
        let extra = serde_json::json!({
            "solve_s": o.seconds, "gap": o.gap(), "nodes": o.nodes, "proven": o.proven,
        });
        row(&mut h, b, "ilp", &o.pinned, extra);
    }
    Ok(
        serde_json::json!({"chunks": h.chunks.len(), "requests": seq.len(), "rows": rows})
            .to_string(),
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(launch_replay, m)?)?;
    m.add_function(wrap_pyfunction!(trace_replay, m)?)?;
    m.add_function(wrap_pyfunction!(launch_pinning, m)?)?;
    Ok(())
}
