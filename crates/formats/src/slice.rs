//! `wattio trace slice`: a time window, one device, and a speed-up factor (PARAID replays
//! its traces 32×–256× faster) applied to any trace source, streaming.

use std::collections::BTreeSet;
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
    /// The device ids read (at most 65,536), to say why a slice kept nothing.
    devs: BTreeSet<u16>,
    /// Reading stopped at the window's end, before the source's.
    cut: bool,
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
            devs: BTreeSet::new(),
            cut: false,
        })
    }

    /// Requests kept so far.
    pub fn kept(&self) -> u64 {
        self.kept
    }

    /// Once the source is read: why the slice kept nothing (`None` if it kept some). An
    /// empty trace cannot be run, so a slice that keeps nothing is a mistake to name — most
    /// often a device the trace does not have.
    pub fn nothing_kept(&self) -> Option<String> {
        if self.kept > 0 {
            return None;
        }
        let o = &self.opts;
        if let Some(d) = o.dev.filter(|d| !self.devs.contains(d)) {
            let seen: Vec<String> = self.devs.iter().map(|d| d.to_string()).collect();
            let seen = if seen.is_empty() {
                "none".to_string()
            } else {
                seen.join(", ")
            };
            return Some(if self.cut {
                format!("slice kept no requests: device {d} has none before the window's end (the devices read up to it: {seen})")
            } else {
                format!(
                    "slice kept no requests: device {d} is not in the trace (its devices: {seen})"
                )
            });
        }
        Some(format!(
            "slice kept no requests: none arrives in the window [{}, {}) s{} ({} read outside it)",
            o.start.unwrap_or(0) as f64 / 1e9,
            o.end
                .map(|e| (e as f64 / 1e9).to_string())
                .unwrap_or_else(|| "end".into()),
            o.dev.map(|d| format!(" on device {d}")).unwrap_or_default(),
            self.skipped
        ))
    }
}

impl TraceSource for Slice {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        while !self.done {
            let Some(mut r) = self.inner.next_request()? else {
                self.done = true;
                break;
            };
            self.devs.insert(r.dev);
            if let Some(e) = self.opts.end {
                if r.arrival >= e {
                    // Sources are in arrival order: nothing later can be inside the window.
                    self.done = true;
                    self.cut = true;
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

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::trace::VecSource;
    use wattio_core::Op;

    fn slice(opts: SliceOptions) -> Slice {
        let reqs = [(1, 0), (2, 3), (5, 0)]
            .map(|(t, dev)| Request {
                dev,
                ..Request::new(t * 1_000_000_000, Op::Read, 0, 4096)
            })
            .to_vec();
        let mut s = Slice::new(Box::new(VecSource::new(reqs)), opts).unwrap();
        while s.next_request().unwrap().is_some() {}
        s
    }

    #[test]
    fn a_slice_that_keeps_nothing_says_why() {
        let all = slice(SliceOptions::default());
        assert_eq!((all.kept(), all.nothing_kept()), (3, None));
        let s = slice(SliceOptions {
            dev: Some(9),
            ..Default::default()
        });
        assert_eq!(
            s.nothing_kept().unwrap(),
            "slice kept no requests: device 9 is not in the trace (its devices: 0, 3)"
        );
        // Reading stopped at the window's end: device 9 may come later.
        let s = slice(SliceOptions {
            dev: Some(9),
            end: Some(3_000_000_000),
            ..Default::default()
        });
        assert_eq!(
            s.nothing_kept().unwrap(),
            "slice kept no requests: device 9 has none before the window's end (the devices read up to it: 0, 3)"
        );
        let s = slice(SliceOptions {
            start: Some(3_000_000_000),
            end: Some(4_000_000_000),
            ..Default::default()
        });
        assert_eq!(
            s.nothing_kept().unwrap(),
            "slice kept no requests: none arrives in the window [3, 4) s (2 read outside it)"
        );
    }
}
