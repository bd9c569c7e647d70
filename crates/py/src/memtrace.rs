//! Bindings for memory traces (`wattio capture memory`, `wattio trace stats` of a memory
//! trace). The work runs with the GIL released.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use wattio_formats::memtrace::{self, ConvertOptions, MemTraceReader};

fn err(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Converts the tool's raw files into one memory trace; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (inputs, output, max_traffic_per_process=None, provenance=Vec::new()))]
fn memtrace_convert(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    output: PathBuf,
    max_traffic_per_process: Option<u64>,
    provenance: Vec<(String, String)>,
) -> PyResult<String> {
    py.allow_threads(|| {
        let opts = ConvertOptions {
            max_traffic_per_process,
            provenance,
        };
        let rep = memtrace::convert_raw(&inputs, &output, &opts).map_err(err)?;
        serde_json::to_string(&rep).map_err(err)
    })
}

/// Statistics of a memory trace: JSON text (`text=False`) or the human-readable report.
#[pyfunction]
#[pyo3(signature = (path, text=false))]
fn memtrace_stats(py: Python<'_>, path: PathBuf, text: bool) -> PyResult<String> {
    py.allow_threads(|| {
        let st =
            memtrace::memtrace_stats(MemTraceReader::open(&path).map_err(err)?).map_err(err)?;
        if text {
            Ok(st.to_text())
        } else {
            serde_json::to_string(&st).map_err(err)
        }
    })
}

/// Whether `path` is a memory trace (rather than a block trace).
#[pyfunction]
fn memtrace_is(path: &str) -> bool {
    memtrace::is_memtrace(Path::new(path))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(memtrace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(memtrace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memtrace_is, m)?)?;
    Ok(())
}
