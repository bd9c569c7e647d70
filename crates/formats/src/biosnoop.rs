//! `biosnoop` output (bcc's `tools/biosnoop.py` and libbpf-tools' `biosnoop`): one line per
//! block I/O, printed when it completes, with its latency —
//!
//! ```text
//! TIME(s)     COMM           PID     DISK    T    SECTOR     BYTES   [QUE(ms)] LAT(ms)
//! 0.000000    fio            4179    sda     WS   2048       4096      0.512
//! ```
//!
//! `TIME(s)` is the completion, in seconds from the first line's; `LAT(ms)` the time from
//! issue to completion (what blktrace calls D2C); `QUE(ms)` (`-Q`) the time queued before the
//! issue. So a request arrives at TIME − LAT (its issue, as blktrace's D) and is measured
//! LAT. The lines come in completion order, and per CPU (perf buffers are not merged by
//! time): the reader sorts them by arrival ([`LineFormat::unsorted`]), and the earliest
//! arrival — before the first line's TIME — is t = 0.
//!
//! `T` is libbpf-tools' RWBS (a leading `F` pre-flush, then `W`, `R`, `D` discard, `DE`
//! secure erase, `F` flush, `N` other; then FUA, readahead, sync, meta flags) or bcc's
//! Python `R`/`W` (every op that is not a write shows as `R` there). `COMM` may hold
//! spaces, so the fields after it are found from the end of the line; whether a `QUE(ms)`
//! column is there comes from the header line, or without one from where `T` stands.

use crate::lines::{parse_decimal, parse_u64, FieldError, Fields};
use crate::text::{sectors, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::{Nanos, Op};

pub const LINE_FORM: &str = "TIME(s) COMM PID DISK T SECTOR BYTES [QUE(ms)] LAT(ms) \
     (bcc or libbpf-tools biosnoop; completion time in s, latency in ms)";

/// Added to every completion time before the latency is taken off, so that a request issued
/// before the first completion has a time all the same; the sort rebases it away.
const BIAS: Nanos = 1 << 50;

/// Fields a line may have at most.
const MAX_FIELDS: usize = 32;

/// The format: whether the lines carry `QUE(ms)`, once the header said so.
#[derive(Default)]
pub struct Biosnoop {
    queued: Option<bool>,
}

/// Is `t` a `T` field: RWBS letters (libbpf-tools) or bcc's `R`/`W`?
fn is_rwbs(t: &[u8]) -> bool {
    !t.is_empty() && t.len() <= 8 && t.iter().all(|c| b"FWRDENASMZ".contains(c))
}

impl LineFormat for Biosnoop {
    fn name(&self) -> &'static str {
        "biosnoop"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        false
    }
    fn unsorted(&self) -> bool {
        true
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let mut f = Fields::ws(line);
        // Every field with its column, up to a bound a line cannot need (COMM is 14
        // characters at most, so a handful of words); no allocation per line.
        let mut all: [(&'a [u8], usize); MAX_FIELDS] = [(&[], 0); MAX_FIELDS];
        let mut n = 0;
        while let Some(x) = f.next_field() {
            if n == MAX_FIELDS {
                return Err(f.err(format!("more than {MAX_FIELDS} fields"), LINE_FORM));
            }
            all[n] = (x, f.col);
            n += 1;
        }
        let fields = &all[..n];
        let Some(&(first, _)) = fields.first() else {
            return Ok(Parsed::Skip);
        };
        if first == b"TIME(s)" {
            self.queued = Some(fields.iter().any(|(x, _)| *x == b"QUE(ms)"));
            return Ok(Parsed::Skip);
        }
        // bcc's banner, when there is one.
        if first == b"Tracing" {
            return Ok(Parsed::Skip);
        }
        // Where T is: fixed by the header, else the one of its two places that holds RWBS.
        let t_at = match self.queued {
            Some(q) => n.checked_sub(if q { 5 } else { 4 }),
            None => [4, 5]
                .into_iter()
                .filter_map(|k| n.checked_sub(k))
                .find(|&i| is_rwbs(fields[i].0)),
        };
        // TIME, PID and DISK come before T (COMM may be empty, or several words).
        let Some(t_at) = t_at.filter(|&i| i >= 3) else {
            return Err(FieldError::new(
                1,
                format!("{n} fields"),
                format!("{LINE_FORM}: at least 8 fields, T where the columns put it"),
            ));
        };
        let field = |i: usize| fields[i];
        let bad = |(x, col): (&[u8], usize), what: &str| {
            FieldError::new(
                col,
                format!("bad {what} `{}`", String::from_utf8_lossy(x)),
                what.to_string(),
            )
        };
        let time =
            parse_decimal(first, 1_000_000_000).ok_or_else(|| bad(field(0), "TIME(s), seconds"))?;
        let pid = field(t_at - 2);
        let stream = parse_u64(pid.0)
            .and_then(|p| u32::try_from(p).ok())
            .ok_or_else(|| bad(pid, "a PID"))?;
        let disk = field(t_at - 1).0;
        let t = field(t_at).0;
        if !is_rwbs(t) {
            return Err(bad(field(t_at), "T: R, W or RWBS letters"));
        }
        let sector = parse_u64(field(t_at + 1).0).ok_or_else(|| bad(field(t_at + 1), "SECTOR"))?;
        let offset = sectors(sector, field(t_at + 1).1)?;
        let len = parse_u64(field(t_at + 2).0).ok_or_else(|| bad(field(t_at + 2), "BYTES"))?;
        // QUE(ms), when there, is the time before the issue: read past it.
        let lat_field = field(n - 1);
        let lat = parse_decimal(lat_field.0, 1_000_000).ok_or_else(|| bad(lat_field, "LAT(ms)"))?;
        let time = (time + BIAS).checked_sub(lat).ok_or_else(|| {
            FieldError::new(
                lat_field.1,
                format!("latency {lat} ns is longer than 2^50 ns before the completion",),
                "LAT(ms) below 13 days",
            )
        })?;
        // A leading F is a pre-flush when an op follows it; F alone is a flush.
        let preflush = t.len() > 1 && t[0] == b'F' && b"WRDFN".contains(&t[1]);
        let body = if preflush { &t[1..] } else { t };
        let op = match body[0] {
            b'W' => {
                if len == 0 && preflush {
                    Op::Flush
                } else {
                    Op::Write
                }
            }
            b'R' => Op::Read,
            b'D' => Op::Discard,
            b'F' => Op::Flush,
            b'N' if preflush => Op::Flush,
            _ => {
                return Ok(Parsed::Unsupported(
                    "biosnoop requests with no data and no flush (T N)",
                ))
            }
        };
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev: DevKey::Bytes(disk),
            stream,
            measured: Some(lat),
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "biosnoop: arrival = TIME − LAT (the issue to the driver, blktrace's D), measured = LAT (issue to completion); QUE(ms) is not used".into(),
            "biosnoop: sectors are 512 bytes; PID → stream; DISK names the device".into(),
            "biosnoop: T W write, R read (bcc's Python version prints R for every op that is not a write), D/DE discard, F flush, a leading F with no data = flush; N not read".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        let s = sel.trim();
        if s.is_empty() {
            return Err("expected a disk name such as sda or nvme0n1".into());
        }
        Ok(OwnedKey::Bytes(s.as_bytes().to_vec()))
    }
}
