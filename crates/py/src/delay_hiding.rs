//! Bindings for delay-hiding over file-call traces (`wattio reproduce delay-hiding`).
//! The work runs with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use wattio_engine::memory::delay_hiding::{footprint_blocks, report_json, run_file_calls};
use wattio_functions::memory::delay_hiding::DelayHidingConfig;

/// Runs file-call traces (merged by time) through the buffer cache and a predictor;
/// `config` is a `[delay_hiding]` table as TOML, the result JSON.
#[pyfunction]
fn delay_hiding_run(py: Python<'_>, paths: Vec<PathBuf>, config: &str) -> PyResult<String> {
    let table: toml::Table = toml::from_str(config)
        .map_err(|e| PyValueError::new_err(format!("delay_hiding config: {e}")))?;
    let cfg: DelayHidingConfig =
        wattio_functions::registry::parse(&table, "delay_hiding").map_err(PyValueError::new_err)?;
    py.allow_threads(|| {
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let rep = run_file_calls(&refs, &cfg).map_err(PyValueError::new_err)?;
        Ok(report_json(&rep).to_string())
    })
}

/// Distinct blocks of `block_bytes` the traces' calls touch (to scale the buffer cache).
#[pyfunction]
fn delay_hiding_footprint(py: Python<'_>, paths: Vec<PathBuf>, block_bytes: u64) -> PyResult<u64> {
    if block_bytes == 0 {
        return Err(PyValueError::new_err("block_bytes: expected at least 1"));
    }
    py.allow_threads(|| {
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        footprint_blocks(&refs, block_bytes).map_err(PyValueError::new_err)
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(delay_hiding_run, m)?)?;
    m.add_function(wrap_pyfunction!(delay_hiding_footprint, m)?)?;
    Ok(())
}
