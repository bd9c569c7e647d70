//! The geometry probe ([`wattio_functions::geometry::probe`]) run live: the same sans-I/O
//! function the simulator drives against a model, here on the live executor's wall clock
//! against a real medium — an image file, a block device, or another server's NBD export
//! (`nbd://HOST:PORT/EXPORT`, `nbd+unix:///EXPORT?socket=PATH`), such as a scratch image
//! served with device emulation. Nothing is exported: the probe is the only source of I/O.
//!
//! The probe is destructive: it overwrites every sector it times.

use crate::backend::{Backend, ComponentSpec};
use crate::session::{DeviceSetup, RunMeta, Session, SessionOptions};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattio_core::device::DeviceInfo;
use wattio_core::power::PowerSpec;
use wattio_core::stack::Stack;
use wattio_functions::geometry::probe::{GeometryProbe, Params, Report};

/// What a live probe found, and how long it took on the wall clock.
#[derive(Clone, Debug)]
pub struct LiveProbe {
    pub report: Report,
    pub wall: Duration,
}

/// Probe `target` (a file, a block device or an NBD URI) with `params`. Stops with an
/// error after `timeout` (the probe's report so far is in the message's counts), when the
/// medium cannot be opened, or when the session reports a fault.
pub fn probe(target: &Path, params: Params, timeout: Duration) -> Result<LiveProbe, String> {
    let backend = Backend::open(&ComponentSpec::file(target))?;
    let name = target.display().to_string();
    let info = DeviceInfo::new(
        0,
        name.clone(),
        backend.size(),
        // Power does not enter the probe.
        Arc::new(PowerSpec::constant(0.0)),
    );
    let (f, report) = GeometryProbe::new(params);
    let mut stack = Stack::new(vec![Box::new(f)]);
    stack.attach(std::slice::from_ref(&info))?;
    let started = Instant::now();
    let session = Session::start(
        stack,
        vec![DeviceSetup {
            backend,
            runtime: None,
        }],
        Vec::new(),
        SessionOptions {
            // One write at a time: one worker is all the probe uses, and fewer threads
            // contend less with the timing.
            workers: 1,
            meta: RunMeta {
                name: Some("geometry-probe".into()),
                seed: 0,
                models: vec!["pass-through".into()],
            },
            ..SessionOptions::default()
        },
    )?;
    let over = |r: &Mutex<Report>| {
        let r = r.lock().unwrap_or_else(|e| e.into_inner());
        r.finished_at_ns > 0 || r.stopped.is_some()
    };
    let mut timed_out = false;
    while !over(&report) {
        if session.fault().is_some() {
            break;
        }
        if started.elapsed() > timeout {
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = started.elapsed();
    let finished = session.finish(Duration::from_secs(5));
    let report = report.lock().unwrap_or_else(|e| e.into_inner()).clone();
    finished.map_err(|e| format!("{name}: live probe: {e}"))?;
    if timed_out {
        return Err(format!(
            "{name}: live probe still running after {timeout:?} ({} probe writes, {} track runs so far)",
            report.probes,
            report.runs.len()
        ));
    }
    Ok(LiveProbe { report, wall })
}
