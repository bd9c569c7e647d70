//! Run the geometry probe ([`wattio_functions::geometry::probe`]) against a device model in
//! simulation: the same function `wattio serve` would run against a real disk, here on the
//! simulated executor with nothing else in the stack.

use crate::sim::{NullSink, Simulator};
use std::sync::Arc;
use wattio_core::device::{DeviceInfo, DeviceRuntime, Timing};
use wattio_core::power::PowerSpec;
use wattio_core::stack::Stack;
use wattio_core::trace::VecSource;
use wattio_functions::geometry::probe::{GeometryProbe, Params, Report};

/// Probe `timing` (a fresh model: its arm at rest, its caches empty) with `params`.
pub fn probe(name: &str, timing: Box<dyn Timing>, params: Params) -> Result<Report, String> {
    let info = DeviceInfo {
        geometry: timing.geometry(),
        // Power does not enter the probe; a constant draw keeps the ledger trivial.
        ..DeviceInfo::new(
            0,
            name,
            timing.capacity(),
            Arc::new(PowerSpec::constant(0.0)),
        )
    };
    let dev = DeviceRuntime::new(info, timing, None, 0);
    let (f, report) = GeometryProbe::new(params);
    let mut stack = Stack::new(vec![Box::new(f)]);
    stack.attach(std::slice::from_ref(&dev.info))?;
    // No host requests: the run lasts as long as the probe issues writes. `until` is only
    // the clock's bound; the event loop stops when the probe has nothing left in flight.
    Simulator::new(stack, vec![dev]).run(
        &mut VecSource::new(Vec::new()),
        Some(u64::MAX / 4),
        0,
        &mut NullSink,
    )?;
    let r = report.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(r)
}
