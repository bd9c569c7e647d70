//! Bindings for the live area: `serve` (an NBD server running a stack in real time) and
//! `replay` (an NBD client replaying a trace with its timing).

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattio_formats::{open_trace, ReadOptions};
use wattio_live::replay::{self, ReplayOptions, TextTrace};
use wattio_live::server::{Limits, ListenAddr, Server, ServerOptions};
use wattio_live::setup::{self, ServeSpec};

fn user(e: String) -> PyErr {
    PyValueError::new_err(e)
}

fn take_error(slot: &Mutex<Option<PyErr>>) -> Option<PyErr> {
    slot.lock().ok().and_then(|mut e| e.take())
}

/// Serve `images` over NBD until SIGINT/SIGTERM (KeyboardInterrupt), then flush, write
/// `summary.json`, `energy.parquet` and `ledger.csv` into `out` (if given) and return the
/// summary (the simulator's schema plus `live`) as a dict.
///
/// With `config` (a run config's path), the engine assembles the stack and devices exactly
/// as `wattio run` does, and `images` are `DEVICE=PATH`, one per `[[device]]`. `functions`
/// maps stack positions of `kind = "python"` functions to their objects, as for `run_config`.
/// The first exception a Python function raises ends the session and is raised here.
#[pyfunction]
#[pyo3(signature = (images, socket=None, listen=None, names=None, model=None, emulate=true,
    spindown=None, capture=None, out=None, direct=false, read_only=false, workers=4, poll_us=None,
    status=1.0, max_seconds=None, config=None, functions=None, allow_remote=false, tls="off",
    tls_certificate=None, tls_key=None, max_connections=None, conn_mib=None, total_mib=None,
    handshake_timeout=None, reply_timeout=None))]
#[allow(clippy::too_many_arguments)]
fn serve(
    py: Python<'_>,
    images: Vec<PathBuf>,
    socket: Option<PathBuf>,
    listen: Option<String>,
    names: Option<Vec<String>>,
    model: Option<PathBuf>,
    emulate: bool,
    spindown: Option<f64>,
    capture: Option<PathBuf>,
    out: Option<PathBuf>,
    direct: bool,
    read_only: bool,
    workers: usize,
    poll_us: Option<u64>,
    status: f64,
    max_seconds: Option<f64>,
    config: Option<PathBuf>,
    functions: Option<Bound<'_, PyDict>>,
    allow_remote: bool,
    tls: &str,
    tls_certificate: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    max_connections: Option<usize>,
    conn_mib: Option<f64>,
    total_mib: Option<f64>,
    handshake_timeout: Option<f64>,
    reply_timeout: Option<f64>,
) -> PyResult<PyObject> {
    let server_opts = ServerOptions {
        limits: Limits::from_flags(
            conn_mib,
            total_mib,
            max_connections,
            handshake_timeout,
            reply_timeout,
        )
        .map_err(user)?,
        allow_remote,
        tls: wattio_live::tls::from_flags(tls, tls_certificate.as_deref(), tls_key.as_deref())
            .map_err(user)?,
    };
    let addr = match (socket, listen) {
        (Some(s), None) => ListenAddr::Unix(s),
        (None, Some(l)) => ListenAddr::parse_tcp(&l).map_err(user)?,
        _ => {
            return Err(user(
                "give exactly one of socket=PATH or listen=HOST:PORT".into(),
            ))
        }
    };
    let error: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
    let session = match config {
        Some(config) => {
            // A config says everything the image-only options would: refuse a mix rather
            // than silently ignore half of it.
            let mut clash = Vec::new();
            if names.as_ref().is_some_and(|n| !n.is_empty()) {
                clash.push("names");
            }
            if model.is_some() {
                clash.push("model");
            }
            if spindown.is_some() {
                clash.push("spindown");
            }
            if read_only {
                clash.push("read_only");
            }
            if !clash.is_empty() {
                return Err(user(format!(
                    "{}: with a run config, {} belong in the config ([[device]] model, [[function]]), not on the command line",
                    config.display(),
                    clash.join(", ")
                )));
            }
            let images = images
                .iter()
                .map(|p| setup::parse_named_image(&p.display().to_string()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(user)?;
            // Python functions are called on the executor's threads, each call under the GIL
            // (the serve loop below releases it while it waits).
            let mut external = crate::run::python_functions(py, functions, error.clone())?;
            let r = setup::build_from_config_with(
                &setup::ConfigServe {
                    config,
                    images,
                    direct,
                    capture,
                    workers,
                    poll_us,
                },
                &mut wattio_engine::Registry::new().with_external("python", &mut external),
            );
            if let Some(e) = take_error(&error) {
                return Err(e);
            }
            r.map_err(user)?
        }
        None => {
            if functions.is_some_and(|f| !f.is_empty()) {
                return Err(user(
                    "Python functions need a run config that places them in the stack".into(),
                ));
            }
            let spec = ServeSpec {
                images,
                names: names.unwrap_or_default(),
                direct,
                read_only,
                emulate: model.is_some() && emulate,
                model,
                spindown_s: spindown,
                capture,
                workers,
                poll_us,
            };
            setup::build(&spec).map_err(user)?
        }
    };
    let server = Server::start_with(session, &addr, &server_opts).map_err(PyOSError::new_err)?;
    eprintln!(
        "wattio serve: listening on {} (Ctrl-C to stop)",
        server.addr()
    );
    let t0 = Instant::now();
    let mut last = Instant::now();
    let mut failed = false;
    loop {
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(50)));
        // Python's own handlers turn SIGINT (and SIGTERM, as the CLI installs) into an
        // exception here: that is the signal to shut down cleanly.
        if py.check_signals().is_err() {
            break;
        }
        if max_seconds.is_some_and(|m| t0.elapsed().as_secs_f64() >= m) {
            break;
        }
        // A Python function that raised no longer forwards anything: stop serving.
        if error.lock().map(|e| e.is_some()).unwrap_or(true) {
            failed = true;
            break;
        }
        if status > 0.0 && last.elapsed().as_secs_f64() >= status {
            let dt = last.elapsed().as_secs_f64();
            last = Instant::now();
            // The snapshot takes the executor's lock: never wait for it holding the GIL.
            let snap = py.allow_threads(|| server.session().snapshot());
            eprintln!("{}", wattio_live::report::status_line(&snap, dt));
        }
    }
    let drain = Duration::from_secs(if failed { 1 } else { 30 });
    let shut = py.allow_threads(|| server.shutdown(drain));
    if let Some(e) = take_error(&error) {
        return Err(e);
    }
    let mut summary = shut.map_err(PyOSError::new_err)?;
    if let Some(dir) = &out {
        wattio_live::report::write_outputs(&mut summary, dir).map_err(PyOSError::new_err)?;
    }
    if let Some(e) = &summary.capture_error {
        return Err(PyOSError::new_err(format!("capture: {e}")));
    }
    let text = wattio_live::report::summary_json(&mut summary)
        .map_err(PyOSError::new_err)?
        .to_string();
    if let Some(e) = take_error(&error) {
        return Err(e);
    }
    let json = py.import("json")?;
    Ok(json.call_method1("loads", (text,))?.unbind())
}

/// Is `path` a `wattio serve --capture` text file (its header line, or a first record in
/// its `arrival_ns op offset len dev stream` form)?
fn is_text_capture(path: &std::path::Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    if std::fs::File::open(path)
        .and_then(|f| f.take(4096).read_to_end(&mut head))
        .is_err()
    {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(l) if l.starts_with("# wattio live capture") => true,
        Some(l) => replay::parse_capture_line(l).is_ok(),
        None => false,
    }
}

/// Replay a trace against an NBD server — a `wattio serve --capture` text file, or any
/// trace `wattio run` reads (its columnar capture included) — and return counts and latency
/// percentiles.
#[pyfunction]
#[pyo3(signature = (trace, uri, speed=1.0, format=None, **read))]
fn replay_trace(
    py: Python<'_>,
    trace: PathBuf,
    uri: String,
    speed: f64,
    format: Option<String>,
    read: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyObject> {
    let read = crate::trace::read_options(read)?;
    let r = py
        .allow_threads(|| {
            let mut t: Box<dyn wattio_core::TraceSource> =
                if format.is_none() && read == ReadOptions::default() && is_text_capture(&trace) {
                    Box::new(TextTrace::open(&trace).map_err(|e| e.to_string())?)
                } else {
                    open_trace(&trace, format.as_deref(), &read).map_err(|e| e.to_string())?
                };
            replay::replay(
                t.as_mut(),
                &uri,
                &ReplayOptions {
                    speed,
                    ..ReplayOptions::default()
                },
            )
        })
        .map_err(user)?;
    let d = PyDict::new(py);
    d.set_item("sent", r.sent)?;
    d.set_item("errors", r.errors)?;
    d.set_item("skipped", r.skipped)?;
    d.set_item("duration_s", r.duration.as_secs_f64())?;
    let q = |p: f64| {
        if r.latency.count() > 0 {
            r.latency.quantile(p) as f64 / 1e3
        } else {
            0.0
        }
    };
    d.set_item("latency_mean_us", r.latency.mean() / 1e3)?;
    d.set_item("latency_p50_us", q(0.5))?;
    d.set_item("latency_p99_us", q(0.99))?;
    Ok(d.into_any().unbind())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(serve, m)?)?;
    m.add_function(wrap_pyfunction!(replay_trace, m)?)?;
    Ok(())
}
