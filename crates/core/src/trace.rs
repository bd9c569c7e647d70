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
