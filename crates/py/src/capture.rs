//! Bindings for `wattio capture`: the capture runs with the GIL released; SIGINT/SIGTERM
//! during it stop the command and clean up (see wattio-capture's interrupt module), and the
//! result says so.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::path::PathBuf;
use wattio_capture::{
    capture_block as capture, capture_files as files, capture_launch as launch, BlockOptions,
};

/// Captures the block requests of `command` on `image`; returns the result as JSON.
#[pyfunction]
#[pyo3(signature = (image, out, command, fs="ext4".to_string(), size=None, setup=None, drop_caches=false, buffer_kb=16384, fs_block_size=None, mount_options=None))]
#[allow(clippy::too_many_arguments)]
fn capture_block(
    py: Python<'_>,
    image: PathBuf,
    out: PathBuf,
    command: Vec<String>,
    fs: String,
    size: Option<u64>,
    setup: Option<String>,
    drop_caches: bool,
    buffer_kb: u32,
    fs_block_size: Option<u32>,
    mount_options: Option<String>,
) -> PyResult<String> {
    let mut o = BlockOptions::new(image, out, command);
    o.fs = fs;
    o.size = size;
    o.setup = setup;
    o.drop_caches = drop_caches;
    o.buffer_kb = buffer_kb;
    o.fs_block_size = fs_block_size;
    o.mount_options = mount_options;
    py.allow_threads(|| {
        let r = capture(&o).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    })
}

/// Captures the file-level calls of `command` through strace; returns the result as JSON.
#[pyfunction]
fn capture_files(py: Python<'_>, out: PathBuf, command: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| {
        let r = files(&command, &out).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    })
}

/// Captures a cold launch of `command`; returns the result as JSON.
#[pyfunction]
fn capture_launch(py: Python<'_>, out: PathBuf, command: Vec<String>) -> PyResult<String> {
    py.allow_threads(|| {
        let r = launch(&command, &out).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    })
}

/// Fails unless `prog` can run from `cwd` (`wattio_capture::command::check_runnable`):
/// `capture memory`, whose wrapper (Valgrind) is started from Python, checks as the others do.
#[pyfunction]
fn capture_check_runnable(prog: &str, cwd: PathBuf) -> PyResult<()> {
    wattio_capture::command::check_runnable(prog, &cwd, std::env::var_os("PATH").as_deref())
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(capture_check_runnable, m)?)?;
    m.add_function(wrap_pyfunction!(capture_block, m)?)?;
    m.add_function(wrap_pyfunction!(capture_files, m)?)?;
    m.add_function(wrap_pyfunction!(capture_launch, m)?)?;
    Ok(())
}
