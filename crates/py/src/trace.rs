//! Bindings for the trace area.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;
use wattio_engine::Opener;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = m;
    Ok(())
}

/// An opener over a trace file.
pub fn file_opener(path: PathBuf, format: Option<String>) -> PyResult<Opener> {
    let _ = (path, format);
    Err(PyValueError::new_err("trace files are not supported by this build yet"))
}
