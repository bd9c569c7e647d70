//! Bindings for delay-hiding over file-call traces (`wattio reproduce delay-hiding`).
//! The work runs with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use wattio_engine::memory::delay_hiding::{
    footprint_blocks, report_json, run_file_calls, run_with_storage, storage_json,
};
use wattio_engine::RunConfig;
use wattio_functions::memory::delay_hiding::DelayHidingConfig;

fn parse_config(config: &str) -> PyResult<DelayHidingConfig> {
    let table: toml::Table = toml::from_str(config)
        .map_err(|e| PyValueError::new_err(format!("delay_hiding config: {e}")))?;
    wattio_functions::registry::parse(&table, "delay_hiding").map_err(PyValueError::new_err)
}

/// Runs file-call traces (merged by time) through the buffer cache and a predictor;
/// `config` is a `[delay_hiding]` table as TOML, the result JSON.
#[pyfunction]
fn delay_hiding_run(py: Python<'_>, paths: Vec<PathBuf>, config: &str) -> PyResult<String> {
    let cfg = parse_config(config)?;
    py.allow_threads(|| {
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let rep = run_file_calls(&refs, &cfg).map_err(PyValueError::new_err)?;
        Ok(report_json(&rep).to_string())
    })
}

/// As [`delay_hiding_run`], with the buffer cache's misses and write-backs served by the
/// stack of `storage` (run-config TOML text: devices and functions; its `catalogue`
/// directories relative to `base_dir`, `origin` naming it in errors). JSON: the report,
/// `written_back` and `storage` (the storage run's summary).
#[pyfunction]
#[pyo3(signature = (paths, config, storage, base_dir=".", origin="storage config"))]
fn delay_hiding_storage(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    config: &str,
    storage: &str,
    base_dir: &str,
    origin: &str,
) -> PyResult<String> {
    let cfg = parse_config(config)?;
    let st = RunConfig::from_toml(origin, storage).map_err(PyValueError::new_err)?;
    let cat =
        wattio_engine::catalogue_for(&st, Path::new(base_dir)).map_err(PyValueError::new_err)?;
    py.allow_threads(|| {
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        let run = run_with_storage(&refs, &cfg, &st, &cat).map_err(PyValueError::new_err)?;
        Ok(storage_json(&run)
            .map_err(PyValueError::new_err)?
            .to_string())
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
    m.add_function(wrap_pyfunction!(delay_hiding_storage, m)?)?;
    m.add_function(wrap_pyfunction!(delay_hiding_footprint, m)?)?;
    Ok(())
}
