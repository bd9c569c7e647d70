//! What a live session writes when it ends: `summary.json` and `ledger.csv`, shaped like a
//! simulated run's, plus the one-line live status.

use crate::session::{Snapshot, Summary};
use serde_json::json;
use std::path::Path;
use wattio_core::time::ns_to_secs;

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

pub fn summary_json(s: &Summary) -> serde_json::Value {
    let lat = &s.latency;
    let q = |p: f64| {
        if lat.count() > 0 {
            us(lat.quantile(p))
        } else {
            0.0
        }
    };
    let devices: Vec<_> = s
        .devices
        .iter()
        .map(|d| {
            let ledger = s
                .ledgers
                .iter()
                .find(|(n, _)| n == &d.name)
                .map(|(_, rows)| {
                    rows.iter()
                        .map(|r| {
                            json!({
                                "slot": r.slot, "is_transition": r.is_transition, "watts": r.watts,
                                "residency_s": ns_to_secs(r.residency_ns), "entries": r.entries,
                                "energy_j": r.energy_j,
                            })
                        })
                        .collect::<Vec<_>>()
                });
            json!({
                "name": d.name, "emulated": d.emulated, "final_state": d.state,
                "energy_j": if d.emulated { json!(d.energy_j) } else { serde_json::Value::Null },
                "spin_ups": d.spin_ups, "ledger": ledger,
            })
        })
        .collect();
    let functions: Vec<_> = s
        .function_counters
        .iter()
        .map(|(name, c)| {
            let m: serde_json::Map<String, serde_json::Value> =
                c.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            json!({"name": name, "counters": m})
        })
        .collect();
    let st = &s.stats;
    let total_j = s
        .devices
        .iter()
        .filter(|d| d.emulated)
        .fold(0.0, |a, d| a + d.energy_j);
    json!({
        "mode": "live",
        "duration_s": ns_to_secs(s.duration_ns),
        "requests": {
            "total": st.requests, "reads": st.reads, "writes": st.writes, "flushes": st.flushes,
            "trims": st.trims, "errors": st.errors, "bytes_read": st.bytes_read,
            "bytes_written": st.bytes_written,
        },
        "latency_us": {
            "mean": lat.mean() / 1e3, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
            "max": if lat.count() > 0 { us(lat.max()) } else { 0.0 },
        },
        "energy_j": total_j,
        "devices": devices,
        "functions": functions,
        "power_commands_without_model": st.power_commands_without_model,
        "capture_error": s.capture_error,
    })
}

/// Write `summary.json` and `ledger.csv` into `dir` (created if missing).
pub fn write_outputs(s: &Summary, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let p = dir.join("summary.json");
    let text = serde_json::to_string_pretty(&summary_json(s)).map_err(|e| e.to_string())?;
    std::fs::write(&p, text + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
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
    for d in &s.devices {
        if d.emulated {
            line.push_str(&format!(" | {}: {} {:.2}J", d.name, d.state, d.energy_j));
        }
    }
    line
}
