//! Streaming trace sources: anything that yields [`Request`]s in arrival order.

use crate::io::Request;

/// A trace read or generation failure, located as precisely as the source allows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct TraceError {
    /// `file:line[:column]`, `file@byte-offset`, or the generator's name.
    pub location: String,
    pub message: String,
}

impl TraceError {
    pub fn new(location: impl Into<String>, message: impl Into<String>) -> TraceError {
        TraceError {
            location: location.into(),
            message: message.into(),
        }
    }
}

/// A source of requests in non-decreasing arrival order. Sources stream: memory use must
/// not grow with trace length.
pub trait TraceSource: Send {
    /// The next request, `Ok(None)` at the end.
    fn next_request(&mut self) -> Result<Option<Request>, TraceError>;

    /// Appends up to `max` requests to `out` and returns how many; fewer than `max` only at
    /// the end of the trace. On an error, the requests before it are in `out`. Executors
    /// read through this (a batch at a time costs less per request than one call each);
    /// sources that hold or make requests in bulk override it.
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        for n in 0..max {
            match self.next_request()? {
                Some(r) => out.push(r),
                None => return Ok(n),
            }
        }
        Ok(max)
    }

    /// Total number of requests if known up front (for progress reporting).
    fn len_hint(&self) -> Option<u64> {
        None
    }

    /// Assumptions made while reading (units, selected volume, …), for the user to see.
    fn assumptions(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<T: TraceSource + ?Sized> TraceSource for Box<T> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        (**self).next_request()
    }

    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        (**self).fill(out, max)
    }

    fn len_hint(&self) -> Option<u64> {
        (**self).len_hint()
    }

    fn assumptions(&self) -> Vec<String> {
        (**self).assumptions()
    }
}

/// `t / speedup` to the nearest nanosecond (monotonic in `t`: the order of arrivals stays).
fn rescale(t: crate::time::Nanos, speedup: f64) -> crate::time::Nanos {
    (t as f64 / speedup).round() as crate::time::Nanos
}

/// A trace replayed faster or slower: every arrival time divided by `speedup` (rounded to
/// the nanosecond, so the order of arrivals is kept). Response times a capture measured are
/// the device's and stay as they are.
pub struct Rescaled<S> {
    inner: S,
    speedup: f64,
}

impl<S: TraceSource> Rescaled<S> {
    pub fn new(inner: S, speedup: f64) -> Rescaled<S> {
        Rescaled { inner, speedup }
    }

    fn scale(&self, t: crate::time::Nanos) -> crate::time::Nanos {
        rescale(t, self.speedup)
    }
}

impl<S: TraceSource> TraceSource for Rescaled<S> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.inner.next_request()?.map(|mut r| {
            r.arrival = self.scale(r.arrival);
            r
        }))
    }

    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let before = out.len();
        let r = self.inner.fill(out, max);
        let x = self.speedup;
        for q in &mut out[before..] {
            q.arrival = rescale(q.arrival, x);
        }
        r
    }

    fn len_hint(&self) -> Option<u64> {
        self.inner.len_hint()
    }

    fn assumptions(&self) -> Vec<String> {
        let mut a = self.inner.assumptions();
        a.push(format!(
            "replayed at {}x: arrival times divided by {} (trace.speedup)",
            self.speedup, self.speedup
        ));
        a
    }
}

/// An in-memory trace (tests, small examples).
pub struct VecSource {
    reqs: std::vec::IntoIter<Request>,
    len: u64,
}

impl VecSource {
    pub fn new(reqs: Vec<Request>) -> VecSource {
        let len = reqs.len() as u64;
        VecSource {
            reqs: reqs.into_iter(),
            len,
        }
    }
}

impl TraceSource for VecSource {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        Ok(self.reqs.next())
    }

    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let before = out.len();
        out.extend(self.reqs.by_ref().take(max));
        Ok(out.len() - before)
    }

    fn len_hint(&self) -> Option<u64> {
        Some(self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Op;

    fn arrivals(src: &mut dyn TraceSource) -> Vec<u64> {
        let mut v = Vec::new();
        while let Some(r) = src.next_request().unwrap() {
            v.push(r.arrival);
        }
        v
    }

    #[test]
    fn rescaled_divides_arrivals_and_keeps_the_rest() {
        let reqs = |ts: &[u64]| -> Vec<Request> {
            ts.iter()
                .map(|&t| {
                    let mut r = Request::new(t, Op::Write, 4096, 512);
                    r.measured = Some(777);
                    r
                })
                .collect()
        };
        let ts = [0, 1000, 2501, 9_000_000_000];
        let mut fast = Rescaled::new(VecSource::new(reqs(&ts)), 2.0);
        // 2501 / 2 = 1250.5 rounds away from zero.
        assert_eq!(arrivals(&mut fast), [0, 500, 1251, 4_500_000_000]);
        let mut slow = Rescaled::new(VecSource::new(reqs(&ts)), 0.25);
        assert_eq!(arrivals(&mut slow), [0, 4000, 10_004, 36_000_000_000]);
        // The batch path gives the same, and only arrivals change.
        let mut b = Rescaled::new(
            Box::new(VecSource::new(reqs(&ts))) as Box<dyn TraceSource>,
            2.0,
        );
        let mut out = vec![Request::new(5, Op::Read, 0, 1)];
        assert_eq!(b.fill(&mut out, 10).unwrap(), 4);
        assert_eq!(
            out[0].arrival, 5,
            "what was in the batch before is left alone"
        );
        let got: Vec<u64> = out[1..].iter().map(|r| r.arrival).collect();
        assert_eq!(got, [0, 500, 1251, 4_500_000_000]);
        assert!(out[1..]
            .iter()
            .all(|r| r.measured == Some(777) && r.offset == 4096 && r.len == 512));
        assert_eq!(b.len_hint(), Some(4));
        assert!(
            b.assumptions()[0].contains("replayed at 2x"),
            "{:?}",
            b.assumptions()
        );
    }
}
