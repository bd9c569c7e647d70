//! Bindings for the disk area: DiskSim import and validation, the geometry probe.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::Path;
use wattio_devices::disksim;

/// Import a DiskSim `.parv`: returns (catalogue TOML text, unsupported parameters).
#[pyfunction]
fn disk_import(parv: &str) -> PyResult<(String, Vec<String>)> {
    let imp = disksim::import_parv(Path::new(parv)).map_err(PyValueError::new_err)?;
    let text = imp.to_toml(parv).map_err(PyValueError::new_err)?;
    Ok((text, imp.unsupported))
}

/// Replay a DiskSim validation trace: returns the report as JSON (key `demerit_ms`, …).
#[pyfunction]
fn disk_validate(parv: &str, trace: &str) -> PyResult<String> {
    let v = disksim::validate::validate(Path::new(parv), Path::new(trace))
        .map_err(PyValueError::new_err)?;
    serde_json::to_string(&v).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Run the geometry probe in simulation against `source` — a DiskSim `.parv`, a catalogue
/// TOML file or an embedded catalogue name — with `table` (the `geometry-probe` keys, as
/// TOML text). Returns the report as JSON, with `zones` folded over runs of fewer than
/// `min_zone_tracks` tracks.
#[pyfunction]
fn disk_probe(source: &str, table: &str, min_zone_tracks: u64) -> PyResult<String> {
    use wattio_devices::catalogue::{Catalogue, DeviceSpec};
    use wattio_functions::geometry::probe::Params;
    let err = |e: String| PyValueError::new_err(e);
    let table: toml::Table = table
        .parse()
        .map_err(|e: toml::de::Error| err(format!("probe options: {e}")))?;
    let params = Params::parse(&table, "probe").map_err(err)?;
    let path = Path::new(source);
    let timing = if source.ends_with(".parv") {
        let imp = disksim::import_parv(path).map_err(err)?;
        let disk = wattio_devices::mechanical::MechanicalDisk::new(imp.timing).map_err(err)?;
        Box::new(disk) as Box<dyn wattio_core::device::Timing>
    } else if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("{source}: {e}")))?;
        DeviceSpec::from_toml(source, &text)
            .and_then(|s| s.build_timing())
            .map_err(err)?
    } else {
        Catalogue::embedded()
            .and_then(|c| c.get(source)?.build_timing())
            .map_err(err)?
    };
    if timing.geometry().is_none() {
        return Err(err(format!(
            "{source}: the probe times a rotating disk, and this model has no mechanical layout (use an `hdd-mechanical` model or a DiskSim .parv)"
        )));
    }
    let report = wattio_engine::probe::probe(source, timing, params).map_err(err)?;
    let zones: Vec<_> = report
        .zones(min_zone_tracks)
        .into_iter()
        .map(|(first, last, spt)| serde_json::json!({"first_lba": first, "last_lba": last, "spt": spt}))
        .collect();
    let mut v = serde_json::to_value(&report).map_err(|e| err(e.to_string()))?;
    v["zones"] = serde_json::Value::Array(zones);
    Ok(v.to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(disk_probe, m)?)?;
    m.add_function(wrap_pyfunction!(disk_import, m)?)?;
    m.add_function(wrap_pyfunction!(disk_validate, m)?)?;
    Ok(())
}
