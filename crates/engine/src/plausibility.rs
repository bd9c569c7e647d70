//! Is a trace what the user thinks it is? A reader parses whatever fits its layout; these
//! checks catch the traces that parse but cannot be meant: no request at all (an empty file,
//! a `--device` that matches nothing), or a span no real workload has — an MSR file with
//! Unix-second timestamps read as 100 ns filetime ticks packs a day into milliseconds.
//! Both `run` and `check` watch the trace through [`Watch`], so they agree.

use wattio_core::time::Nanos;
use wattio_core::{Request, TraceError, TraceSource};

/// Fewer requests than this say too little about their rate to call it implausible.
pub const MIN_REQUESTS_FOR_RATE: u64 = 100;
/// A whole trace averaging more than one request per microsecond (1 M/s) is not a recorded
/// workload: its clock is in a coarser unit than the reader assumed.
pub const MIN_MEAN_GAP_NS: Nanos = 1_000;
/// A trace spanning more than a year has its clock in a finer unit than the reader assumed.
pub const MAX_SPAN_NS: Nanos = 366 * 86_400 * 1_000_000_000;

/// Forwards a trace and notes how many requests it gave and when the first and last arrived.
pub struct Watch<'a> {
    inner: &'a mut dyn TraceSource,
    pub requests: u64,
    pub first: Nanos,
    pub last: Nanos,
}

impl<'a> Watch<'a> {
    pub fn new(inner: &'a mut dyn TraceSource) -> Self {
        Watch {
            inner,
            requests: 0,
            first: 0,
            last: 0,
        }
    }

    fn saw(&mut self, r: &[Request]) {
        if let (Some(a), Some(b)) = (r.first(), r.last()) {
            if self.requests == 0 {
                self.first = a.arrival;
            }
            self.last = b.arrival;
            self.requests += r.len() as u64;
        }
    }

    /// What is wrong with the trace read so far, one sentence each (empty: nothing).
    pub fn problems(&self) -> Vec<String> {
        problems(self.requests, self.last.saturating_sub(self.first))
    }
}

/// [`Watch::problems`] for `requests` arriving over `span` ns.
pub fn problems(requests: u64, span: Nanos) -> Vec<String> {
    let mut v = Vec::new();
    if requests == 0 {
        v.push("the trace gave no requests".to_string());
    }
    if requests >= MIN_REQUESTS_FOR_RATE && span > 0 && span / (requests - 1) < MIN_MEAN_GAP_NS {
        v.push(format!(
            "{requests} requests arrive within {:.3} ms (one every {} ns on average, over a million a second): the timestamps are probably in a coarser unit than the reader assumed",
            span as f64 / 1e6,
            span / (requests - 1)
        ));
    }
    if span > MAX_SPAN_NS {
        v.push(format!(
            "the trace spans {:.0} days: the timestamps are probably in a finer unit than the reader assumed",
            span as f64 / 86_400e9
        ));
    }
    v
}

impl TraceSource for Watch<'_> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        let r = self.inner.next_request()?;
        if let Some(r) = &r {
            self.saw(std::slice::from_ref(r));
        }
        Ok(r)
    }

    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let start = out.len();
        let r = self.inner.fill(out, max);
        // On an error the requests before it are in `out` too.
        if let Some(new) = out.get(start..) {
            self.saw(new);
        }
        r
    }

    fn len_hint(&self) -> Option<u64> {
        self.inner.len_hint()
    }

    fn assumptions(&self) -> Vec<String> {
        self.inner.assumptions()
    }
}

/// The problems of a trace as the error a run or check fails with (strict), naming what the
/// reader assumed so the user can see which assumption was wrong.
pub fn refusal(problems: &[String], assumptions: &[String]) -> String {
    format!(
        "{}; the trace was read as: {} (fix the trace, its --format/--columns or --device, or pass --lenient to run it anyway)",
        problems.join("; "),
        assumptions.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::trace::VecSource;
    use wattio_core::Op;

    #[test]
    fn plausible_traces_have_no_problems() {
        // A day of requests, one a second.
        assert!(problems(86_400, 86_399 * 1_000_000_000).is_empty());
        // Few requests close together: too few to judge.
        assert!(problems(99, 99).is_empty());
        // 1 µs apart on average is still plausible.
        assert!(problems(1001, 1_000_000).is_empty());
    }

    #[test]
    fn empty_dense_and_endless_traces_are_named() {
        assert_eq!(
            problems(0, 0),
            vec!["the trace gave no requests".to_string()]
        );
        // The MSR file with Unix seconds: 3,000 requests in 605 µs.
        assert_eq!(
            problems(3000, 605_000),
            vec!["3000 requests arrive within 0.605 ms (one every 201 ns on average, over a million a second): the timestamps are probably in a coarser unit than the reader assumed".to_string()]
        );
        assert_eq!(
            problems(10, 1000 * 86_400 * 1_000_000_000),
            vec!["the trace spans 1000 days: the timestamps are probably in a finer unit than the reader assumed".to_string()]
        );
    }

    #[test]
    fn the_watch_counts_what_passes_through_fill_and_next() {
        let reqs: Vec<Request> = (1..=5)
            .map(|i| Request::new(i * 10, Op::Read, 0, 512))
            .collect();
        let mut src = VecSource::new(reqs);
        let mut w = Watch::new(&mut src);
        let mut out = Vec::new();
        assert_eq!(w.fill(&mut out, 3).unwrap(), 3);
        assert_eq!(w.next_request().unwrap().map(|r| r.arrival), Some(40));
        assert_eq!(w.fill(&mut out, 3).unwrap(), 1);
        assert_eq!((w.requests, w.first, w.last), (5, 10, 50));
    }
}
