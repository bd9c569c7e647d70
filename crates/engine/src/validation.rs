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
    let reqs = read_in_memory(
        src.as_mut(),
        &name,
        MAX_REQUESTS,
        "a validation keeps them in memory; `wattio trace slice` cuts a window",
        Some("a validation compares one device (--device KEY keeps one)"),
    )?;
    require_measured(
        &reqs,
        &name,
        "to compare with (a DiskSim validation trace, blktrace/blkparse with completions, \
         MSR, `wattio capture block`)",
    )?;
    let most = max_outstanding(&reqs);
    let replay = replay.unwrap_or(if most <= 1 { Loop::Closed } else { Loop::Open });
    let replayed = replay_requests(model, &reqs, replay).map_err(|e| format!("{name}: {e}"))?;
    Ok(TraceValidation {
        replayed,
        replay,
        max_outstanding: most,
    })
}

/// Every request of `src` (named `name`), in memory: at most `limit` (`why` says why there is
/// one and what to do), and with `one_device` (what takes one device and how to keep one),
/// all of device 0.
pub(crate) fn read_in_memory(
    src: &mut dyn TraceSource,
    name: &str,
    limit: usize,
    why: &str,
    one_device: Option<&str>,
) -> Result<Vec<wattio_core::Request>, String> {
    let mut reqs = Vec::new();
    while let Some(r) = src.next_request().map_err(|e| e.to_string())? {
        if let (true, Some(what)) = (r.dev != 0, one_device) {
            return Err(format!(
                "{name}: request {}: dev {}: {what}",
                reqs.len(),
                r.dev
            ));
        }
        if reqs.len() >= limit {
            return Err(format!("{name}: more than {limit} requests ({why})"));
        }
        reqs.push(r);
    }
    Ok(reqs)
}

/// An error unless some request of `reqs` has a measured response time; `needed` says what
/// for and where such a trace comes from.
pub(crate) fn require_measured(
    reqs: &[wattio_core::Request],
    name: &str,
    needed: &str,
) -> Result<(), String> {
    if reqs.iter().any(|r| r.measured.is_some()) {
        Ok(())
    } else {
        Err(format!(
            "{name}: no request has a measured response time {needed}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::trace::VecSource;
    use wattio_core::{Op, Request};

    fn reqs(devs: &[u16]) -> VecSource {
        VecSource::new(
            devs.iter()
                .enumerate()
                .map(|(i, &d)| {
                    let mut r = Request::new(i as u64 * 1000, Op::Read, 0, 4096);
                    r.dev = d;
                    r
                })
                .collect(),
        )
    }

    #[test]
    fn in_memory_reads_are_bounded_and_one_device_when_asked() {
        let all = read_in_memory(&mut reqs(&[0, 0, 1]), "t", 3, "why", None).unwrap();
        assert_eq!(all.len(), 3);
        let e = read_in_memory(&mut reqs(&[0, 0, 1]), "t", 3, "why", Some("one only")).unwrap_err();
        assert_eq!(e, "t: request 2: dev 1: one only");
        let e = read_in_memory(&mut reqs(&[0, 0, 0]), "t", 2, "why", None).unwrap_err();
        assert_eq!(e, "t: more than 2 requests (why)");
        let none = read_in_memory(&mut reqs(&[0]), "t", 2, "why", None).unwrap();
        assert_eq!(
            require_measured(&none, "t", "for X").unwrap_err(),
            "t: no request has a measured response time for X"
        );
        let mut one = none;
        one[0].measured = Some(5);
        assert!(require_measured(&one, "t", "for X").is_ok());
    }
}
