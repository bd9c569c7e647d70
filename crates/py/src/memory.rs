//! Bindings for the memory simulator (`wattio reproduce memory`): a memory-run config in,
//! its summary out. The work runs with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Runs a memory-run config (TOML text: `[memory]` and `[[process]]`, trace paths relative
/// to `base`) through `wattio_engine::memory`; the summary is JSON.
#[pyfunction]
fn memory_run(py: Python<'_>, config: &str, base: PathBuf) -> PyResult<String> {
    py.allow_threads(|| {
        let summary =
            wattio_engine::memory::run_config(config, &base).map_err(PyValueError::new_err)?;
        serde_json::to_string(&summary).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(memory_run, m)?)?;
    Ok(())
}
