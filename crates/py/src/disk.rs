//! Bindings for the disk area: DiskSim import and validation.

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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(disk_import, m)?)?;
    m.add_function(wrap_pyfunction!(disk_validate, m)?)?;
    Ok(())
}
