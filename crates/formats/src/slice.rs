//! `wattio trace slice`: a time window, one device, and a speed-up factor (PARAID replays
//! its traces 32×–256× faster) applied to any trace source, streaming.

use wattio_core::{Nanos, Request, TraceError, TraceSource};

#[derive(Debug, Clone, PartialEq)]
pub struct SliceOptions {
    /// Keep requests arriving at or after this time (ns, on the source's clock).
    pub start: Option<Nanos>,
    /// Keep requests arriving strictly before this time.
    pub end: Option<Nanos>,
    /// Keep only this device id (as the source numbers them); the id is kept.
    pub dev: Option<u16>,
    /// Divide inter-arrival times by this factor (> 0; 1 = as recorded).
    pub speedup: f64,
}

impl Default for SliceOptions {
    fn default() -> Self {
        SliceOptions {
            start: None,
            end: None,
            dev: None,
            speedup: 1.0,
        }
    }
}

impl SliceOptions {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(format!(
                "speed-up factor {} must be a positive number",
                self.speedup
            ));
        }
        if let (Some(s), Some(e)) = (self.start, self.end) {
            if e < s {
                return Err(format!("window end {e} ns is before its start {s} ns"));
            }
        }
        Ok(())
    }
}

/// A window of another source. Arrivals become `(arrival − start) / speedup` (rounded to
/// the nearest ns), so the slice starts at 0 when `start` is given; recorded response times
/// (`measured`) are device properties and are not scaled.
pub struct Slice {
    inner: Box<dyn TraceSource>,
    opts: SliceOptions,
    done: bool,
    kept: u64,
    skipped: u64,
}

impl Slice {
    pub fn new(inner: Box<dyn TraceSource>, opts: SliceOptions) -> Result<Self, String> {
        opts.validate()?;
        Ok(Slice {
            inner,
            opts,
            done: false,
            kept: 0,
            skipped: 0,
        })
    }
}

impl TraceSource for Slice {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        while !self.done {
            let Some(mut r) = self.inner.next_request()? else {
                self.done = true;
                break;
            };
            if let Some(e) = self.opts.end {
                if r.arrival >= e {
                    // Sources are in arrival order: nothing later can be inside the window.
                    self.done = true;
                    break;
                }
            }
            let start = self.opts.start.unwrap_or(0);
            if r.arrival < start || self.opts.dev.is_some_and(|d| d != r.dev) {
                self.skipped += 1;
                continue;
            }
            let rel = r.arrival - start;
            r.arrival = if self.opts.speedup == 1.0 {
                rel
            } else {
                (rel as f64 / self.opts.speedup).round() as Nanos
            };
            self.kept += 1;
            return Ok(Some(r));
        }
        Ok(None)
    }

    fn assumptions(&self) -> Vec<String> {
        let mut v = self.inner.assumptions();
        let o = &self.opts;
        v.push(format!(
            "slice: window [{}, {}) ns, device {}, speed-up ×{}; arrivals shifted by the window start and divided by the speed-up; measured latencies unscaled; {} kept, {} outside the window or device",
            o.start.unwrap_or(0),
            o.end.map(|e| e.to_string()).unwrap_or_else(|| "end".into()),
            o.dev.map(|d| d.to_string()).unwrap_or_else(|| "all".into()),
            o.speedup,
            self.kept,
            self.skipped
        ));
        v
    }
}
