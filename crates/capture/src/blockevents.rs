//! The text of tracefs `block_rq_issue` / `block_rq_complete` events, and the matcher that
//! pairs each completion with its issue into [`Request`]s with a measured response time.
//!
//! A line of `trace_pipe` looks like (kernel 6.x; older kernels lack the `ioprio` field and
//! the issue's byte count, both optional here):
//!
//! ```text
//!               dd-4242    [001] ..... 12345.678901: block_rq_issue: 7,0 WS 4096 () 2048 + 8 none,0,0 [dd]
//!      ksoftirqd/1-22      [001] ..s1. 12345.678950: block_rq_complete: 7,0 WS () 2048 + 8 none,0,0 [0]
//! ```
//!
//! Timestamps have microsecond resolution (that is what the text interface prints).
//! The `rwbs` field gives the op: a leading `F` before the op letter is a preflush, the op
//! is `R`, `W`, `D` (discard, `DE` secure erase), `F` (flush) or `N` (none); after it `F`
//! marks force unit access.

use std::collections::{BTreeMap, HashMap, VecDeque};
use wattio_core::{Op, Request};

/// One parsed line of the trace pipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Issue(BlockEvent),
    Complete(BlockEvent),
    /// `CPU:N [LOST M EVENTS]`: the ring buffer overflowed.
    Lost(u64),
    /// Some other event or a blank line.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEvent {
    pub ts_ns: u64,
    /// The task running when the event fired.
    pub pid: u32,
    pub dev: (u32, u32),
    pub rwbs: String,
    pub sector: u64,
    pub nr_sector: u32,
    /// Issue: the issuing task's name. Complete: empty.
    pub comm: String,
    /// Complete: the error code (0 = success).
    pub error: i32,
}

/// What the `rwbs` flags say a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rwbs {
    /// `None` for an `N` (no data, no flush) request.
    pub op: Option<Op>,
    pub preflush: bool,
    pub fua: bool,
}

/// Decodes `rwbs` (see the module doc); `None` when it has no op letter.
pub fn decode_rwbs(s: &str) -> Option<Rwbs> {
    let b = s.as_bytes();
    let is_op = |c: u8| matches!(c, b'R' | b'W' | b'D' | b'F' | b'N');
    let (preflush, at) = match b {
        [b'F', next, ..] if is_op(*next) => (true, 1),
        _ => (false, 0),
    };
    let op = match b.get(at)? {
        b'R' => Some(Op::Read),
        b'W' => Some(Op::Write),
        b'D' => Some(Op::Discard),
        b'F' => Some(Op::Flush),
        b'N' => None,
        _ => return None,
    };
    let rest = &b[at + 1..];
    let rest = rest.strip_prefix(b"E").unwrap_or(rest);
    let fua = rest.first() == Some(&b'F');
    if !rest.iter().all(|c| matches!(c, b'F' | b'A' | b'S' | b'M')) {
        return None;
    }
    Some(Rwbs { op, preflush, fua })
}

/// `seconds.fraction` → ns.
fn parse_ts(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.')?;
    if f.is_empty() || f.len() > 9 || !f.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let frac: u64 = f.parse().ok()?;
    let scale = 10u64.pow(9 - f.len() as u32);
    secs.checked_mul(1_000_000_000)?.checked_add(frac * scale)
}

fn parse_dev(t: &str) -> Option<(u32, u32)> {
    let (a, b) = t.split_once(',')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The part of a trace line before `: EVENT:` — `COMM-PID [CPU] FLAGS TIMESTAMP` (the
/// command name may contain spaces and dashes) — as (timestamp ns, pid).
pub fn parse_head(head: &str) -> Result<(u64, u32), String> {
    let ts_start = head.rfind(' ').map_or(0, |i| i + 1);
    let ts_ns = parse_ts(&head[ts_start..]).ok_or("no timestamp before the event name")?;
    let cpu = head[..ts_start].rfind('[').ok_or("no [CPU] field")?;
    let task = head[..cpu].trim_end();
    let pid = task
        .rsplit_once('-')
        .and_then(|(_, p)| p.parse().ok())
        .ok_or("no COMM-PID before the [CPU] field")?;
    Ok((ts_ns, pid))
}

/// Parses one line of `trace_pipe`. Errors say what was wrong with the line.
pub fn parse_line(line: &str) -> Result<Line, String> {
    let line = line.trim_end();
    if let Some(rest) = line.strip_prefix("CPU:") {
        if let Some(i) = rest.find("[LOST ") {
            let n = rest[i + 6..]
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or("a LOST line without a count")?;
            return Ok(Line::Lost(n));
        }
    }
    let (issue, at) = match (
        line.find(": block_rq_issue: "),
        line.find(": block_rq_complete: "),
    ) {
        (Some(i), _) => (true, i),
        (None, Some(i)) => (false, i),
        (None, None) => return Ok(Line::Other),
    };
    let (ts_ns, pid) = parse_head(&line[..at])?;
    let body = &line[at + if issue { 18 } else { 21 }..];
    let mut t = body.split(' ').filter(|s| !s.is_empty());
    let dev = t
        .next()
        .and_then(parse_dev)
        .ok_or("no MAJOR,MINOR device")?;
    let rwbs = t.next().ok_or("no rwbs flags")?.to_string();
    // Issue: an optional byte count, then `(cmd)`.
    let mut tok = t.next().ok_or("missing fields after rwbs")?;
    if issue && !tok.starts_with('(') {
        tok.parse::<u64>()
            .map_err(|_| "byte count is not a number")?;
        tok = t.next().ok_or("missing (cmd) field")?;
    }
    if !tok.starts_with('(') {
        return Err(format!("expected the (cmd) field, found `{tok}`"));
    }
    while !tok.ends_with(')') {
        tok = t.next().ok_or("unterminated (cmd) field")?;
    }
    let sector = t
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or("no sector number")?;
    if t.next() != Some("+") {
        return Err("expected `+` between sector and sector count".into());
    }
    let nr_sector = t
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or("no sector count")?;
    let tail_start = body.find(" + ").map_or(0, |i| i + 3);
    let tail = &body[tail_start..];
    let open = tail.find('[').ok_or("no [COMM] or [ERROR] at the end")?;
    let last = tail
        .strip_suffix(']')
        .map(|s| &s[open + 1..])
        .ok_or("the last field is not in brackets")?;
    let (comm, error) = if issue {
        (last.to_string(), 0)
    } else {
        (
            String::new(),
            last.parse().map_err(|_| "the error code is not a number")?,
        )
    };
    let ev = BlockEvent {
        ts_ns,
        pid,
        dev,
        rwbs,
        sector,
        nr_sector,
        comm,
        error,
    };
    Ok(if issue {
        Line::Issue(ev)
    } else {
        Line::Complete(ev)
    })
}

/// Pairs issues with completions. Requests are keyed by (sector, op); several in flight at
/// the same key complete first-in first-out. Flushes are keyed by op alone: the kernel
/// issues them at sector 0 and completes them at sector 2^64-1.
#[derive(Debug, Default)]
pub struct Matcher {
    rows: Vec<Row>,
    pending: HashMap<(u64, u8), VecDeque<usize>>,
    pub processes: BTreeMap<u32, String>,
    pub lost_events: u64,
    pub unmatched_completions: u64,
    pub failed: u64,
    pub no_op: u64,
    pub preflushes: u64,
    pub bad_lines: u64,
    pub first_bad_line: Option<String>,
}

#[derive(Debug, Clone)]
struct Row {
    req: Request,
    issued_ns: u64,
    /// The row of the preflush that goes with this request, if it had one.
    flush_row: Option<usize>,
}

impl Matcher {
    fn key(sector: u64, op: Op) -> (u64, u8) {
        (if op == Op::Flush { 0 } else { sector }, op as u8)
    }

    /// Feeds every complete line of `text`; returns the bytes consumed (up to the last `\n`).
    pub fn feed_text(&mut self, text: &[u8]) -> usize {
        let end = match text.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None => return 0,
        };
        for l in text[..end].split(|&b| b == b'\n') {
            let l = String::from_utf8_lossy(l);
            match parse_line(&l) {
                Ok(line) => self.feed(line),
                Err(e) => {
                    self.bad_lines += 1;
                    if self.first_bad_line.is_none() {
                        self.first_bad_line = Some(format!("{e}: {l}"));
                    }
                }
            }
        }
        end
    }

    pub fn feed(&mut self, line: Line) {
        match line {
            Line::Issue(ev) => self.issue(ev),
            Line::Complete(ev) => self.complete(ev),
            Line::Lost(n) => self.lost_events += n,
            Line::Other => {}
        }
    }

    fn issue(&mut self, ev: BlockEvent) {
        let Some(rwbs) = decode_rwbs(&ev.rwbs) else {
            self.no_op += 1;
            return;
        };
        let Some(op) = rwbs.op else {
            self.no_op += 1;
            return;
        };
        let Some(len) = ev.nr_sector.checked_mul(512) else {
            self.no_op += 1;
            return;
        };
        self.processes.entry(ev.pid).or_insert(ev.comm.clone());
        let mk = |op: Op, offset: u64, len: u32, fua: bool| {
            let mut r = Request::new(ev.ts_ns, op, offset, len);
            r.stream = ev.pid;
            r.fua = fua;
            r
        };
        let flush_row = if rwbs.preflush && op != Op::Flush {
            self.preflushes += 1;
            self.rows.push(Row {
                req: mk(Op::Flush, 0, 0, false),
                issued_ns: ev.ts_ns,
                flush_row: None,
            });
            Some(self.rows.len() - 1)
        } else {
            None
        };
        let offset = ev.sector.saturating_mul(512);
        let (offset, len) = if op == Op::Flush {
            (0, 0)
        } else {
            (offset, len)
        };
        self.rows.push(Row {
            req: mk(op, offset, len, rwbs.fua),
            issued_ns: ev.ts_ns,
            flush_row,
        });
        self.pending
            .entry(Self::key(ev.sector, op))
            .or_default()
            .push_back(self.rows.len() - 1);
    }

    fn complete(&mut self, ev: BlockEvent) {
        let op = decode_rwbs(&ev.rwbs).and_then(|r| r.op);
        let Some(op) = op else {
            self.unmatched_completions += 1;
            return;
        };
        let idx = self
            .pending
            .get_mut(&Self::key(ev.sector, op))
            .and_then(|q| q.pop_front());
        let Some(i) = idx else {
            self.unmatched_completions += 1;
            return;
        };
        if ev.error != 0 {
            self.failed += 1;
        }
        let row = &mut self.rows[i];
        let resp = ev.ts_ns.saturating_sub(row.issued_ns);
        row.req.measured = Some(resp);
        if let Some(f) = row.flush_row {
            self.rows[f].req.measured = Some(resp);
        }
    }

    /// The requests with arrivals relative to `t0_ns` (events before it arrive at 0), in
    /// arrival order, and notes on what was not a clean issue/complete pair.
    pub fn finish(self, t0_ns: u64) -> (Vec<Request>, Vec<String>) {
        let mut notes = Vec::new();
        let in_flight = self
            .rows
            .iter()
            .filter(|r| r.req.measured.is_none())
            .count();
        let mut reqs: Vec<Request> = self
            .rows
            .into_iter()
            .map(|r| {
                let mut q = r.req;
                q.arrival = r.issued_ns.saturating_sub(t0_ns);
                q
            })
            .collect();
        reqs.sort_by_key(|r| r.arrival);
        if self.lost_events > 0 {
            notes.push(format!(
                "the trace buffer overflowed: {} events lost (use a larger --buffer-kb)",
                self.lost_events
            ));
        }
        if in_flight > 0 {
            notes.push(format!(
                "{in_flight} requests had not completed when tracing stopped (no measured response)"
            ));
        }
        if self.unmatched_completions > 0 {
            notes.push(format!(
                "{} completions without a traced issue were ignored",
                self.unmatched_completions
            ));
        }
        if self.preflushes > 0 {
            notes.push(format!(
                "{} requests carried a preflush, recorded as a flush row just before them",
                self.preflushes
            ));
        }
        if self.no_op > 0 {
            notes.push(format!(
                "{} requests without data or flush (rwbs N) skipped",
                self.no_op
            ));
        }
        if self.failed > 0 {
            notes.push(format!("{} requests completed with an error", self.failed));
        }
        if let Some(l) = &self.first_bad_line {
            notes.push(format!(
                "{} unparsable trace lines, the first: {l}",
                self.bad_lines
            ));
        }
        (reqs, notes)
    }
}

/// The fuzz target's entry (and the corpus test's): parses `data` as trace-pipe text and
/// checks what the matcher promises — no panic, arrivals in order, flushes of length 0,
/// responses only where a completion came after its issue.
pub fn fuzz_block_events(data: &[u8]) {
    let mut m = Matcher::default();
    m.feed_text(data);
    let (reqs, _) = m.finish(0);
    for w in reqs.windows(2) {
        if let [a, b] = w {
            assert!(a.arrival <= b.arrival, "arrivals out of order");
        }
    }
    for r in &reqs {
        if r.op == Op::Flush {
            assert_eq!((r.offset, r.len), (0, 0), "a flush with a range");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str =
        include_str!("../fuzz/corpus/blockevents/seed-loop-ext4-dd-sync-fstrim.txt");

    #[test]
    fn issue_and_complete_lines_parse_exactly() {
        let l = "      lto cgu.12-15892   [001] ..s.. 13540.948554: block_rq_complete: 7,0 RM () 4628 + 2 be,0,4 [0]";
        let Line::Complete(e) = parse_line(l).unwrap() else {
            panic!()
        };
        assert_eq!((e.ts_ns, e.pid, e.dev), (13_540_948_554_000, 15892, (7, 0)));
        assert_eq!(
            (e.rwbs.as_str(), e.sector, e.nr_sector, e.error),
            ("RM", 4628, 2, 0)
        );
        let l = "    jbd2/loop0-8-16217   [000] ..... 13540.980092: block_rq_issue: 7,0 WSM 1024 () 32770 + 2 be,0,3 [jbd2/loop0-8]";
        let Line::Issue(e) = parse_line(l).unwrap() else {
            panic!()
        };
        assert_eq!(
            (e.pid, e.comm.as_str(), e.sector),
            (16217, "jbd2/loop0-8", 32770)
        );
        // Older kernels: no byte count, no ioprio.
        let l = "dd-7 [000] .... 5.000001: block_rq_issue: 8,16 R () 8 + 8 [dd]";
        let Line::Issue(e) = parse_line(l).unwrap() else {
            panic!()
        };
        assert_eq!(
            (e.ts_ns, e.dev, e.sector, e.nr_sector),
            (5_000_001_000, (8, 16), 8, 8)
        );
        assert_eq!(
            parse_line("CPU:1 [LOST 42 EVENTS]").unwrap(),
            Line::Lost(42)
        );
        assert_eq!(parse_line("# tracer: nop").unwrap(), Line::Other);
        assert!(parse_line("x-1 [0] . 1.0: block_rq_issue: 7,0 W").is_err());
        assert!(parse_line("x-1 [0] . 1.0: block_rq_issue: 7,0 W 4 () 8 - 8 [x]").is_err());
    }

    #[test]
    fn rwbs_flags_decode() {
        let d = |s| decode_rwbs(s).map(|r| (r.op, r.preflush, r.fua));
        assert_eq!(d("R"), Some((Some(Op::Read), false, false)));
        assert_eq!(d("RAM"), Some((Some(Op::Read), false, false)));
        assert_eq!(d("WS"), Some((Some(Op::Write), false, false)));
        assert_eq!(d("FWFS"), Some((Some(Op::Write), true, true)));
        assert_eq!(d("WFSM"), Some((Some(Op::Write), false, true)));
        assert_eq!(d("FF"), Some((Some(Op::Flush), true, false)));
        assert_eq!(d("F"), Some((Some(Op::Flush), false, false)));
        assert_eq!(d("DS"), Some((Some(Op::Discard), false, false)));
        assert_eq!(d("DE"), Some((Some(Op::Discard), false, false)));
        assert_eq!(d("N"), Some((None, false, false)));
        assert_eq!(d("X"), None);
        assert_eq!(d("WX"), None);
        assert_eq!(d(""), None);
    }

    /// The real trace of `dd oflag=direct bs=4096 count=4; sync; fstrim` on a loop-mounted
    /// ext4 image: every row checked against the lines by hand.
    #[test]
    fn a_real_capture_pairs_into_exact_requests() {
        let mut m = Matcher::default();
        assert_eq!(m.feed_text(SAMPLE.as_bytes()), SAMPLE.len());
        assert_eq!(m.processes[&16224], "dd");
        let t0 = 13_540_947_959_000;
        let (reqs, notes) = m.finish(t0);
        let dd: Vec<_> = reqs
            .iter()
            .filter(|r| r.stream == 16224 && r.op == Op::Write)
            .map(|r| (r.arrival, r.offset, r.len, r.measured))
            .collect();
        assert_eq!(
            dd,
            vec![
                (12_279_000, 18434 * 512, 4096, Some(497_000)),
                (12_858_000, 18442 * 512, 4096, Some(175_000)),
                (13_070_000, 18450 * 512, 4096, Some(159_000)),
                (13_267_000, 18458 * 512, 4096, Some(157_000)),
            ]
        );
        let flushes: Vec<_> = reqs
            .iter()
            .filter(|r| r.op == Op::Flush)
            .map(|r| (r.offset, r.len, r.measured))
            .collect();
        assert_eq!(
            flushes,
            vec![(0, 0, Some(1_389_000)), (0, 0, Some(10_328_000))]
        );
        let discards: Vec<_> = reqs
            .iter()
            .filter(|r| r.op == Op::Discard)
            .map(|r| (r.offset / 512, r.len / 512))
            .collect();
        assert_eq!(
            discards,
            vec![
                (4656, 11730),
                (16900, 1534),
                (19458, 13312),
                (40962, 8192),
                (49668, 15868)
            ]
        );
        assert_eq!(reqs.len(), 21);
        assert!(reqs.iter().all(|r| r.measured.is_some()));
        // The post-flush completion of the preflush+FUA journal write has no issue of its own.
        assert!(
            notes.iter().any(|n| n.starts_with("1 completions without")),
            "{notes:?}"
        );
    }

    #[test]
    fn sample_passes_the_fuzz_invariants() {
        fuzz_block_events(SAMPLE.as_bytes());
        fuzz_block_events(b"a-1 [0] . 1.5: block_rq_issue: 7,0 FWFS 0 () 9 + 4294967295 [a]\n");
    }
}
