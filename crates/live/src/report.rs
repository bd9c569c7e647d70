//! What a live session writes when it ends: `summary.json` in the simulator's schema (built
//! by the engine's own `Summary::build`), `energy.parquet` and `ledger.csv`, plus the
//! one-line live status.

use crate::session::Snapshot;
#[cfg(feature = "engine")]
use crate::session::Summary;
#[cfg(feature = "engine")]
use serde_json::json;
use wattio_core::time::ns_to_secs;

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

#[cfg(feature = "engine")]
/// Live-only facts that have no place in a simulated run's summary: they go under `live`.
fn live_section(s: &Summary) -> serde_json::Value {
    let st = &s.stats;
    let lat = &s.latency;
    let q = |p: f64| {
        if lat.count() > 0 {
            us(lat.quantile(p))
        } else {
            0.0
        }
    };
    json!({
        "requests": {
            "reads": st.reads, "writes": st.writes, "flushes": st.flushes, "trims": st.trims,
            "bytes_read": st.bytes_read, "bytes_written": st.bytes_written,
        },
        "latency_us": {
            "mean": lat.mean() / 1e3, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
            "max": if lat.count() > 0 { us(lat.max()) } else { 0.0 },
        },
        "devices": s.devices.iter().map(|d| (d.name.clone(), json!({
            "emulated": d.emulated, "final_state": d.state,
        }))).collect::<serde_json::Map<_, _>>(),
        "power_commands_without_model": st.power_commands_without_model,
        "capture_error": s.capture_error,
        // Scratch buffers the functions still held at the end: 0 unless one leaks them.
        "scratch_buffers_held": s.scratch_held,
        // ... and how many of them the functions said they keep on purpose.
        "scratch_buffers_claimed": s.scratch_claimed,
    })
}

/// The session in the simulator's `summary.json` schema (`wattio_engine::Summary`, see
/// `docs/outputs.md`), built by the engine's own builder from the stack and the emulated
/// devices' runtimes as the session left them. A component device without a model has no
/// power states: it is listed with its I/O counters and zero energy.
#[cfg(feature = "engine")]
pub fn engine_summary(s: &mut Summary) -> wattio_engine::Summary {
    use wattio_core::Stack;
    use wattio_engine::summary::DeviceSummary;
    let end = s.duration_ns;
    let runtimes = std::mem::take(&mut s.runtimes);
    let mut emulated = Vec::new();
    let mut models = Vec::new();
    let mut slots = Vec::new();
    for (i, rt) in runtimes.into_iter().enumerate() {
        match rt {
            Some(rt) => {
                models.push(s.meta.models.get(i).cloned().unwrap_or_default());
                emulated.push(rt);
                slots.push(None);
            }
            None => slots.push(Some(i)),
        }
    }
    let outcome = wattio_engine::SimOutcome {
        stack: std::mem::replace(&mut s.stack, Stack::new(Vec::new())),
        devices: emulated,
        end,
        requests: s.stats.requests,
        errors: s.stats.errors,
        latency: s.latency.clone(),
        power_wait: s.power_wait.clone(),
        assumptions: vec![
            "live session: requests from NBD clients, times from the wall clock".to_string(),
        ],
        scratch_held: s.scratch_held,
        unload: s.unload,
    };
    let mut summary =
        wattio_engine::Summary::build(s.meta.name.clone(), s.meta.seed, &models, &outcome);
    summary.data_check = s
        .data_check
        .map(|(block, c)| wattio_engine::summary::DataCheckSummary::new(block, c));
    for i in slots.into_iter().flatten() {
        let (Some(d), Some(c)) = (s.devices.get(i), s.real.get(i)) else {
            continue;
        };
        let model = s
            .meta
            .models
            .get(i)
            .cloned()
            .unwrap_or_else(|| "pass-through".into());
        summary
            .devices
            .insert(d.name.clone(), DeviceSummary::io_only(model, c, end));
    }
    // Give the parts back, so the summary stays whole for a second look.
    let wattio_engine::SimOutcome { stack, devices, .. } = outcome;
    s.stack = stack;
    let mut devices = devices.into_iter();
    s.runtimes = s
        .devices
        .iter()
        .map(|d| if d.emulated { devices.next() } else { None })
        .collect();
    summary
}

/// `summary.json` of a live session: exactly the simulator's keys, plus a `live` object.
#[cfg(feature = "engine")]
pub fn summary_json(s: &mut Summary) -> Result<serde_json::Value, String> {
    let mut v = serde_json::to_value(engine_summary(s)).map_err(|e| e.to_string())?;
    if let Some(m) = v.as_object_mut() {
        m.insert("live".into(), live_section(s));
    }
    Ok(v)
}

/// Write `summary.json`, `energy.parquet` (as a simulated run does) and `ledger.csv` into
/// `dir` (created if missing).
#[cfg(feature = "engine")]
pub fn write_outputs(s: &mut Summary, dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let p = dir.join("summary.json");
    let text = serde_json::to_string_pretty(&summary_json(s)?).map_err(|e| e.to_string())?;
    std::fs::write(&p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    let rows: Vec<_> = s
        .ledgers
        .iter()
        .flat_map(|(dev, rows)| rows.iter().map(move |r| (dev.clone(), r.clone())))
        .collect();
    wattio_engine::tables::write_energy(&dir.join("energy.parquet"), &rows)?;
    let mut csv = String::from("device,slot,is_transition,watts,residency_s,entries,energy_j\n");
    for (dev, rows) in &s.ledgers {
        for r in rows {
            csv.push_str(&format!(
                "{dev},{},{},{},{},{},{}\n",
                r.slot,
                r.is_transition,
                r.watts,
                ns_to_secs(r.residency_ns),
                r.entries,
                r.energy_j
            ));
        }
    }
    let p = dir.join("ledger.csv");
    std::fs::write(&p, csv).map_err(|e| format!("{}: {e}", p.display()))
}

/// One status line: throughput over the last interval, latency, and each device's power
/// state and energy so far.
pub fn status_line(s: &Snapshot, interval_s: f64) -> String {
    let iops = if interval_s > 0.0 {
        s.window_ops as f64 / interval_s
    } else {
        0.0
    };
    let mut line = format!(
        "t={:.1}s reqs={} iops={:.0} p50={:.0}us inflight={}",
        ns_to_secs(s.now),
        s.stats.requests,
        iops,
        us(s.window_p50_ns),
        s.inflight
    );
    for (layer, gear) in &s.gears {
        line.push_str(&format!(" | {layer} gear={gear}"));
    }
    for d in &s.devices {
        if d.emulated {
            line.push_str(&format!(" | {}: {} {:.2}J", d.name, d.state, d.energy_j));
        }
    }
    line
}
