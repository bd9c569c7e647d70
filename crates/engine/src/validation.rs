//! A device model against the response times a trace measured on a real device: any trace
//! wattio reads that carries them (DiskSim's validation traces, blktrace or blkparse with
//! their completions, MSR Cambridge, a `wattio capture block` trace), replayed on the model
//! closed- or open-loop (`wattio_devices::disksim::validate::Loop`) and compared by
//! DiskSim's demerit (`wattio disk validate MODEL TRACE`).

use std::path::Path;
use wattio_core::device::Timing;
use wattio_core::TraceSource;
use wattio_devices::disksim::validate::{max_outstanding, replay_requests, Loop, Replayed};
use wattio_formats::ReadOptions;

/// Requests a validation holds in memory at most.
pub const MAX_REQUESTS: usize = 10_000_000;

/// What [`validate_trace`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceValidation {
    pub replayed: Replayed,
    pub replay: Loop,
    /// The most requests the trace had outstanding at once.
    pub max_outstanding: usize,
}

/// Reads `trace` (in `format`, `None` to detect, with `opts`) and replays it on `model` in
/// `replay` mode — by default closed-loop if the trace never had two requests outstanding
/// (a queue depth of one, as DiskSim's validation traces), else open-loop.
pub fn validate_trace(
    model: Box<dyn Timing>,
    trace: &Path,
    format: Option<&str>,
    opts: &ReadOptions,
    replay: Option<Loop>,
) -> Result<TraceValidation, String> {
    let name = trace.display().to_string();
    let mut src = wattio_formats::open_trace(trace, format, opts).map_err(|e| e.to_string())?;
    let mut reqs = Vec::new();
    while let Some(r) = src.next_request().map_err(|e| e.to_string())? {
        if r.dev != 0 {
            return Err(format!(
                "{name}: request {}: dev {}: a validation compares one device (--device KEY keeps one)",
                reqs.len(),
                r.dev
            ));
        }
        if reqs.len() >= MAX_REQUESTS {
            return Err(format!(
                "{name}: more than {MAX_REQUESTS} requests (a validation keeps them in memory; \
                 `wattio trace slice` cuts a window)"
            ));
        }
        reqs.push(r);
    }
    if !reqs.iter().any(|r| r.measured.is_some()) {
        return Err(format!(
            "{name}: no request has a measured response time to compare with (a DiskSim \
             validation trace, blktrace/blkparse with completions, MSR, `wattio capture block`)"
        ));
    }
    let most = max_outstanding(&reqs);
    let replay = replay.unwrap_or(if most <= 1 { Loop::Closed } else { Loop::Open });
    let replayed = replay_requests(model, &reqs, replay).map_err(|e| format!("{name}: {e}"))?;
    Ok(TraceValidation {
        replayed,
        replay,
        max_outstanding: most,
    })
}
