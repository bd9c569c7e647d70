//! `wattio._core`: the Rust core as seen from Python. One submodule per area, each
//! registered here; the Python package (`python/wattio`) wraps them in its API and CLI.

use pyo3::prelude::*;

mod capture;
mod delay_hiding;
mod disk;
mod launch;
mod live;
mod memory;
mod memtrace;
mod nvcache;
mod run;
mod trace;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    run::register(m)?;
    trace::register(m)?;
    disk::register(m)?;
    launch::register(m)?;
    live::register(m)?;
    capture::register(m)?;
    delay_hiding::register(m)?;
    memtrace::register(m)?;
    nvcache::register(m)?;
    memory::register(m)?;
    Ok(())
}
