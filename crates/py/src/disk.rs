//! Bindings for the disk area: DiskSim import and validation, the geometry probe.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::Path;
use wattio_core::device::Timing;
use wattio_devices::catalogue::{Catalogue, DeviceSpec};
use wattio_devices::disksim;
use wattio_devices::disksim::validate::{Loop, Validation};
use wattio_devices::mechanical::MechanicalDisk;
use wattio_engine::validation::validate_trace;

/// Import a DiskSim `.parv`: returns (catalogue TOML text, unsupported parameters). With
/// `power_from` (a catalogue name or TOML file) the entry carries that entry's `[power]`
/// table and is runnable as is.
#[pyfunction]
#[pyo3(signature = (parv, power_from=None))]
fn disk_import(parv: &str, power_from: Option<&str>) -> PyResult<(String, Vec<String>)> {
    let imp = disksim::import_parv(Path::new(parv)).map_err(PyValueError::new_err)?;
    let power = power_from
        .map(spec)
        .transpose()
        .map_err(PyValueError::new_err)?;
    let text = imp
        .to_toml_with_power(parv, power.as_ref())
        .map_err(PyValueError::new_err)?;
    Ok((text, imp.unsupported))
}

/// A catalogue entry: a TOML file, else an embedded catalogue name.
fn spec(source: &str) -> Result<DeviceSpec, String> {
    let path = Path::new(source);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{source}: {e}"))?;
        let mut s = DeviceSpec::from_toml(source, &text)?;
        s.name = path
            .file_stem()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        Ok(s)
    } else {
        Catalogue::embedded()?.get(source).cloned()
    }
}

/// A device's capacity in bytes: a catalogue TOML file or an embedded catalogue name.
#[pyfunction]
fn device_capacity(source: &str) -> PyResult<u64> {
    let timing = spec(source)
        .and_then(|s| s.build_timing())
        .map_err(PyValueError::new_err)?;
    Ok(timing.capacity())
}

/// Replay a trace with measured response times (a DiskSim validation trace, blktrace or
/// blkparse with completions, …: `wattio_engine::validation`) on `model` (a DiskSim `.parv`,
/// a catalogue TOML file or an embedded catalogue name) and compare: returns the report as
/// JSON (`demerit_ms`, means, 90th percentiles, `replay`, `max_outstanding`, `reads`,
/// `writes`, …; with `per_request`, `"per_request": {"op", "simulated_ms", "measured_ms"}`,
/// one entry per compared request in trace order). `replay`: `closed`, `open` or `None`
/// (closed if the trace never had two requests outstanding). A model with mapping state (an
/// SSD) starts with its whole capacity written (`"preconditioned": true`) unless `fresh`.
#[pyfunction]
#[pyo3(signature = (model, trace, format=None, replay=None, per_request=false, fresh=false, **read))]
#[allow(clippy::too_many_arguments)]
fn disk_validate(
    py: Python<'_>,
    model: &str,
    trace: &str,
    format: Option<String>,
    replay: Option<String>,
    per_request: bool,
    fresh: bool,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<String> {
    let read = crate::trace::read_options(read)?;
    let replay = replay
        .as_deref()
        .map(Loop::parse)
        .transpose()
        .map_err(PyValueError::new_err)?;
    let v = py
        .allow_threads(|| {
            let Model {
                mut timing,
                name: drive,
                unsupported,
            } = model_timing(model)?;
            // The traced drive held data: an SSD model starts with every page mapped
            // unless asked to start empty.
            let preconditioned = !fresh && timing.precondition_full();
            let t = validate_trace(timing, Path::new(trace), format.as_deref(), &read, replay)?;
            let v = Validation::new(drive, &t.replayed, t.replay, t.max_outstanding, unsupported);
            let mut json = serde_json::to_value(&v).map_err(|e| e.to_string())?;
            json["preconditioned"] = preconditioned.into();
            if per_request {
                // Every compared request, in trace order: what the CDFs are drawn from.
                let ms = |v: &[f64]| v.iter().map(|x| x / 1e3).collect::<Vec<f64>>();
                let r = &t.replayed;
                json["per_request"] = serde_json::json!({
                    "op": r.ops.iter().map(|o| o.as_str()).collect::<Vec<_>>(),
                    "simulated_ms": ms(&r.sim_us),
                    "measured_ms": ms(&r.measured_us),
                });
            }
            Ok::<_, String>(json)
        })
        .map_err(PyValueError::new_err)?;
    Ok(v.to_string())
}

/// A disk model with platters: a DiskSim `.parv`, a catalogue TOML file or an embedded
/// catalogue name.
/// The timing model a catalogue entry, a spec file or a DiskSim `.parv` names.
struct Model {
    timing: Box<dyn Timing>,
    /// The drive's name.
    name: String,
    /// From a `.parv`: the parameters it could not carry over.
    unsupported: Vec<String>,
}

fn model_timing(source: &str) -> Result<Model, String> {
    if source.ends_with(".parv") {
        let imp = disksim::import_parv(Path::new(source))?;
        Ok(Model {
            timing: Box::new(MechanicalDisk::new(imp.timing)?),
            name: imp.name,
            unsupported: imp.unsupported,
        })
    } else {
        let s = spec(source)?;
        Ok(Model {
            timing: s.build_timing()?,
            name: s.name.clone(),
            unsupported: Vec::new(),
        })
    }
}

fn mechanical(source: &str) -> Result<Box<dyn Timing>, String> {
    let timing = model_timing(source)?.timing;
    if timing.geometry().is_none() {
        return Err(format!(
            "{source}: this model has no mechanical layout (use an `hdd-mechanical` model or a DiskSim .parv)"
        ));
    }
    Ok(timing)
}

/// Failure-aware placement (thesis ch. 6): map the `[[region]]` tables of `regions` (TOML,
/// the keys of `[[device.fault.region]]`) onto `source`'s platters, and score every replica
/// strategy (`cylinders-away` and `…-half-turn` once per entry of `away`, `vendor-aware-…`
/// for each vendor) on the bad sectors and on every
/// `step`-th sector. Returns JSON: `{"bad_sectors", "scores": [...]}`.
#[pyfunction]
fn placement_scores(source: &str, regions: &str, away: Vec<u32>, step: u64) -> PyResult<String> {
    use wattio_devices::fault::{region_ranges, Region};
    use wattio_functions::placement::replica::{score, Placer, Strategy, Vendor};
    let err = |e: String| PyValueError::new_err(e);
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Regions {
        region: Vec<Region>,
    }
    let r: Regions = toml::from_str(regions).map_err(|e| err(format!("regions: {e}")))?;
    let timing = mechanical(source).map_err(err)?;
    let g = timing.geometry().expect("checked by mechanical()");
    let capacity = timing.capacity();
    let bad = region_ranges(&r.region, &*g, capacity, 512);
    let placer = Placer::new(&*g, capacity, 512).map_err(err)?;
    let mut sample: Vec<u64> = bad.iter().flat_map(|[a, b]| a / 512..b / 512).collect();
    let bad_sectors = sample.len() as u64;
    sample.extend((0..capacity / 512).step_by(step.max(1) as usize));
    sample.sort_unstable();
    sample.dedup();
    let mut strategies = vec![
        Strategy::SameTrack,
        Strategy::AdjacentTrack,
        Strategy::OtherSurface,
    ];
    strategies.extend(
        away.iter()
            .map(|&cylinders| Strategy::CylindersAway { cylinders }),
    );
    strategies.push(Strategy::OtherZone);
    strategies.extend(
        away.iter()
            .map(|&cylinders| Strategy::CylindersAwayHalfTurn { cylinders }),
    );
    strategies.extend(
        Vendor::ALL
            .iter()
            .map(|&vendor| Strategy::VendorAware { vendor }),
    );
    let scores: Vec<_> = strategies
        .into_iter()
        .map(|s| score(&placer, s, &sample, &bad))
        .collect();
    Ok(serde_json::json!({"bad_sectors": bad_sectors, "scores": scores}).to_string())
}

/// Run the geometry probe in simulation against `source` — a DiskSim `.parv`, a catalogue
/// TOML file or an embedded catalogue name — with `table` (the `geometry-probe` keys, as
/// TOML text). Returns the report as JSON, with `zones` folded over runs of fewer than
/// `min_zone_tracks` tracks.
///
/// With `check`, the model's own track runs over the probed range are compared with the
/// probe's (`model_runs_equal`, and the first difference as `model_difference`).
#[pyfunction]
#[pyo3(signature = (source, table, min_zone_tracks, check = false))]
fn disk_probe(source: &str, table: &str, min_zone_tracks: u64, check: bool) -> PyResult<String> {
    use wattio_engine::probe::{model_runs, runs_with_tail};
    let err = |e: String| PyValueError::new_err(e);
    let params = probe_params(table).map_err(err)?;
    let timing = mechanical(source).map_err(err)?;
    let geometry = timing.geometry();
    let range = params.start_lba..params.end_lba.unwrap_or(timing.capacity() / 512);
    let report = wattio_engine::probe::probe(source, timing, params).map_err(err)?;
    let text = probe_json(&report, source, min_zone_tracks, None).map_err(err)?;
    if !check {
        return Ok(text);
    }
    let want = geometry
        .and_then(|g| model_runs(&*g, range))
        .ok_or_else(|| {
            err(format!(
                "{source}: the model has no geometry to check against"
            ))
        })?;
    let got = runs_with_tail(&report);
    let diff = (0..got.len().max(want.len())).find(|&k| got.get(k) != want.get(k));
    let mut v: serde_json::Value = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
    v["model_runs_equal"] = serde_json::Value::Bool(diff.is_none());
    v["model_run_count"] = serde_json::json!(want.len());
    if let Some(k) = diff {
        v["model_difference"] = serde_json::json!({
            "run": k, "probe": got.get(k), "model": want.get(k)
        });
    }
    Ok(v.to_string())
}

/// Run the geometry probe live (`wattio_live::probe`) against `target` — an image file, a
/// block device or an NBD URI (`nbd://HOST:PORT/EXPORT`, `nbd+unix:///EXPORT?socket=P`) —
/// on the wall clock. Destructive: it overwrites what it times. The GIL is released while
/// it runs.
#[pyfunction]
fn disk_probe_live(
    py: Python<'_>,
    target: &str,
    table: &str,
    min_zone_tracks: u64,
    timeout_s: f64,
) -> PyResult<String> {
    let err = |e: String| PyValueError::new_err(e);
    let params = probe_params(table).map_err(err)?;
    if !(timeout_s > 0.0 && timeout_s.is_finite()) {
        return Err(err(format!(
            "timeout: expected seconds > 0, got {timeout_s}"
        )));
    }
    let timeout = std::time::Duration::from_secs_f64(timeout_s);
    let live = py
        .allow_threads(|| wattio_live::probe::probe(Path::new(target), params, timeout))
        .map_err(err)?;
    probe_json(
        &live.report,
        target,
        min_zone_tracks,
        Some(live.wall.as_secs_f64()),
    )
    .map_err(err)
}

fn probe_params(table: &str) -> Result<wattio_functions::geometry::probe::Params, String> {
    let table: toml::Table = table
        .parse()
        .map_err(|e: toml::de::Error| format!("probe options: {e}"))?;
    wattio_functions::geometry::probe::Params::parse(&table, "probe")
}

/// The report as JSON, with `zones` folded over runs of fewer than `min_zone_tracks`
/// tracks, the drive spec when the second phase ran, and the wall time of a live probe.
fn probe_json(
    report: &wattio_functions::geometry::probe::Report,
    source: &str,
    min_zone_tracks: u64,
    wall_s: Option<f64>,
) -> Result<String, String> {
    let zones: Vec<_> = report
        .zones(min_zone_tracks)
        .into_iter()
        .map(|(first, last, spt)| serde_json::json!({"first_lba": first, "last_lba": last, "spt": spt}))
        .collect();
    let mut v = serde_json::to_value(report).map_err(|e| e.to_string())?;
    v["zones"] = serde_json::Value::Array(zones);
    v["live"] = serde_json::Value::Bool(wall_s.is_some());
    if let Some(w) = wall_s {
        v["wall_s"] = serde_json::json!(w);
    }
    if report.mechanics.is_some() {
        // The second phase ran: the runnable drive spec it gives, as catalogue TOML.
        let def = wattio_engine::probe::drive_spec(report)?;
        let name = Path::new(source)
            .file_stem()
            .map_or(source.into(), |s| s.to_string_lossy());
        let text = wattio_engine::probe::spec_toml(&name, source, &def, None)?;
        v["spec"] = serde_json::Value::String(text);
    }
    Ok(v.to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(disk_probe, m)?)?;
    m.add_function(wrap_pyfunction!(disk_probe_live, m)?)?;
    m.add_function(wrap_pyfunction!(placement_scores, m)?)?;
    m.add_function(wrap_pyfunction!(disk_import, m)?)?;
    m.add_function(wrap_pyfunction!(disk_validate, m)?)?;
    m.add_function(wrap_pyfunction!(device_capacity, m)?)?;
    Ok(())
}
