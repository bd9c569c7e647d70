//! Bindings for the non-volatile cache simulator (`wattio nvm`, `wattio reproduce nvm`).
//! The work runs with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use wattio_nvcache::{run_trace, SimConfig};

/// Runs a memory trace through an L1 and a PRAM LLC; `config` and the result are JSON.
#[pyfunction]
fn nvcache_run(py: Python<'_>, path: PathBuf, config: &str) -> PyResult<String> {
    // The key path, not the column of the JSON the Python front door generated.
    let cfg: SimConfig = serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(
        config,
    ))
    .map_err(|e| {
        let msg = e.inner().to_string();
        // serde_json appends where in the text it was: the path says it better.
        let msg = match msg.rfind(" at line ") {
            Some(i) if e.inner().line() > 0 => &msg[..i],
            _ => &msg,
        };
        let msg = wattio_functions::registry::plain(msg);
        PyValueError::new_err(format!("nvcache config: {}: {msg}", e.path()))
    })?;
    py.allow_threads(|| {
        let rep = run_trace(&path, &cfg).map_err(PyValueError::new_err)?;
        serde_json::to_string(&rep).map_err(|e| PyValueError::new_err(e.to_string()))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(nvcache_run, m)?)?;
    Ok(())
}
