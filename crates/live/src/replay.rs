//! `wattio replay`: an NBD client that replays a trace against any NBD server with the
//! trace's own timing (optionally scaled), open loop, and reports latency — so the same
//! workload can be compared simulated and live.

use crate::client::Client;
use crate::proto::{CMD_FLUSH, CMD_READ, CMD_TRIM, CMD_WRITE};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wattio_core::stats::LatencyHistogram;
use wattio_core::{Nanos, Op, Request, TraceError, TraceSource};

/// Reads the text capture written by [`crate::capture::TextCapture`].
pub struct TextTrace {
    path: PathBuf,
    lines: std::io::Lines<std::io::BufReader<std::fs::File>>,
    line: usize,
    last: Nanos,
}

impl TextTrace {
    pub fn open(path: &Path) -> Result<TextTrace, TraceError> {
        let f = std::fs::File::open(path)
            .map_err(|e| TraceError::new(path.display().to_string(), e.to_string()))?;
        Ok(TextTrace {
            path: path.to_path_buf(),
            lines: std::io::BufReader::new(f).lines(),
            line: 0,
            last: 0,
        })
    }
}

/// Parse one capture line (`arrival_ns op offset len dev stream`).
pub fn parse_capture_line(s: &str) -> Result<Request, String> {
    let f: Vec<&str> = s.split_whitespace().collect();
    if f.len() != 6 {
        return Err(format!(
            "expected 6 fields `arrival_ns op offset len dev stream`, got {}",
            f.len()
        ));
    }
    let num = |i: usize, what: &str| -> Result<u64, String> {
        f[i].parse::<u64>().map_err(|_| {
            format!(
                "field {} ({what}): {:?} is not an unsigned integer",
                i + 1,
                f[i]
            )
        })
    };
    let op = match f[1] {
        "read" => Op::Read,
        "write" => Op::Write,
        "flush" => Op::Flush,
        "discard" => Op::Discard,
        o => {
            return Err(format!(
                "field 2 (op): {o:?}, expected read, write, flush or discard"
            ))
        }
    };
    let len = num(3, "len")?;
    let len = u32::try_from(len).map_err(|_| format!("field 4 (len): {len} exceeds 2^32-1"))?;
    let dev = num(4, "dev")?;
    let dev = u16::try_from(dev).map_err(|_| format!("field 5 (dev): {dev} exceeds 65535"))?;
    let stream = num(5, "stream")?;
    let stream =
        u32::try_from(stream).map_err(|_| format!("field 6 (stream): {stream} exceeds 2^32-1"))?;
    let mut r = Request::new(num(0, "arrival_ns")?, op, num(2, "offset")?, len);
    r.dev = dev;
    r.stream = stream;
    Ok(r)
}

impl TraceSource for TextTrace {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        loop {
            let Some(l) = self.lines.next() else {
                return Ok(None);
            };
            self.line += 1;
            let loc = || format!("{}:{}", self.path.display(), self.line);
            let l = l.map_err(|e| TraceError::new(loc(), e.to_string()))?;
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let r = parse_capture_line(t).map_err(|m| TraceError::new(loc(), m))?;
            if r.arrival < self.last {
                return Err(TraceError::new(
                    loc(),
                    format!(
                        "arrival_ns {} precedes the previous request's {}",
                        r.arrival, self.last
                    ),
                ));
            }
            self.last = r.arrival;
            return Ok(Some(r));
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Time scale: 2.0 replays twice as fast; `f64::INFINITY` as fast as possible.
    pub speed: f64,
    /// Most requests in flight at once (open loop, bounded so memory stays bounded).
    pub max_inflight: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            speed: 1.0,
            max_inflight: 256,
        }
    }
}

#[derive(Clone, Debug)]
pub struct ReplayReport {
    pub sent: u64,
    pub errors: u64,
    /// Requests beyond the export's end (not sent).
    pub skipped: u64,
    pub latency: LatencyHistogram,
    /// How late requests left relative to their scheduled time.
    pub lateness: LatencyHistogram,
    pub duration: Duration,
}

pub fn replay(
    trace: &mut dyn TraceSource,
    uri: &str,
    opts: &ReplayOptions,
) -> Result<ReplayReport, String> {
    if opts.speed.is_nan() || opts.speed <= 0.0 {
        return Err(format!("--speed {}: must be positive", opts.speed));
    }
    let client = Client::connect(uri)?;
    let size = client.size;
    let (mut tx, mut rx) = client.split();
    let (sent_tx, sent_rx) = mpsc::channel::<(u64, Instant)>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let receiver = std::thread::spawn(move || -> Result<(LatencyHistogram, u64), String> {
        let mut hist = LatencyHistogram::new();
        let mut sent: HashMap<u64, Instant> = HashMap::new();
        let mut errors = 0;
        loop {
            let r = match rx.recv() {
                Ok(r) => r,
                Err(e) => {
                    // The sender's DISC ends the stream.
                    while let Ok((c, t)) = sent_rx.try_recv() {
                        sent.insert(c, t);
                    }
                    if sent.is_empty() {
                        return Ok((hist, errors));
                    }
                    return Err(e);
                }
            };
            let now = Instant::now();
            while let Ok((c, t)) = sent_rx.try_recv() {
                sent.insert(c, t);
            }
            if let Some(t) = sent.remove(&r.cookie) {
                hist.record(now.duration_since(t).as_nanos() as Nanos);
            }
            if r.error != 0 {
                errors += 1;
            }
            let _ = done_tx.send(());
        }
    });
    let start = Instant::now();
    let mut lateness = LatencyHistogram::new();
    let (mut sent, mut skipped, mut inflight) = (0u64, 0u64, 0usize);
    let mut first: Option<Nanos> = None;
    let mut pattern = Vec::new();
    while let Some(r) = trace.next_request().map_err(|e| e.to_string())? {
        if r.op != Op::Flush && r.offset.saturating_add(r.len as u64) > size {
            skipped += 1;
            continue;
        }
        let base = *first.get_or_insert(r.arrival);
        if opts.speed.is_finite() {
            let due = Duration::from_secs_f64((r.arrival - base) as f64 / 1e9 / opts.speed);
            let el = start.elapsed();
            if due > el {
                std::thread::sleep(due - el);
            }
            lateness.record(start.elapsed().saturating_sub(due).as_nanos() as Nanos);
        }
        while inflight >= opts.max_inflight {
            done_rx
                .recv()
                .map_err(|_| "NBD connection lost".to_string())?;
            inflight -= 1;
        }
        while done_rx.try_recv().is_ok() {
            inflight = inflight.saturating_sub(1);
        }
        let (cmd, data) = match r.op {
            Op::Read => (CMD_READ, None),
            Op::Write => {
                pattern.clear();
                pattern.extend((0..r.len).map(|i| (i as u64 ^ r.offset) as u8));
                (CMD_WRITE, Some(pattern.as_slice()))
            }
            Op::Flush => (CMD_FLUSH, None),
            Op::Discard => (CMD_TRIM, None),
        };
        let (off, len) = if r.op == Op::Flush {
            (0, 0)
        } else {
            (r.offset, r.len)
        };
        // Announce the send time before sending: the reply may beat a later message.
        let _ = sent_tx.send((tx.next_cookie(), Instant::now()));
        tx.send(0, cmd, off, len, data)?;
        sent += 1;
        inflight += 1;
    }
    while inflight > 0 {
        if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            return Err(format!("{inflight} request(s) unanswered after 60 s"));
        }
        inflight -= 1;
    }
    let duration = start.elapsed();
    tx.disconnect()?;
    drop(sent_tx);
    let (latency, errors) = receiver
        .join()
        .map_err(|_| "reply thread panicked".to_string())??;
    Ok(ReplayReport {
        sent,
        errors,
        skipped,
        latency,
        lateness,
        duration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_lines_parse_and_bad_ones_say_why() {
        let r = parse_capture_line("1500 write 4096 512 1 7").unwrap();
        assert_eq!(
            (r.arrival, r.op, r.offset, r.len, r.dev, r.stream),
            (1500, Op::Write, 4096, 512, 1, 7)
        );
        assert!(parse_capture_line("1 read 0 1")
            .unwrap_err()
            .contains("6 fields"));
        assert!(parse_capture_line("1 erase 0 1 0 0")
            .unwrap_err()
            .contains("op"));
        assert!(parse_capture_line("1 read 0 99999999999 0 0")
            .unwrap_err()
            .contains("len"));
        assert!(parse_capture_line("x read 0 1 0 0")
            .unwrap_err()
            .contains("arrival_ns"));
    }

    #[test]
    fn text_trace_rejects_time_going_backwards_with_location() {
        let p = std::env::temp_dir().join(format!("wattio-tt-{}.txt", std::process::id()));
        std::fs::write(&p, "# header\n10 read 0 512 0 0\n5 read 0 512 0 0\n").unwrap();
        let mut t = TextTrace::open(&p).unwrap();
        assert_eq!(t.next_request().unwrap().unwrap().arrival, 10);
        let e = t.next_request().unwrap_err();
        assert_eq!(e.location, format!("{}:3", p.display()));
        std::fs::remove_file(&p).unwrap();
    }
}
