//! blkparse's default text output:
//! `dev cpu seq secs.nsecs pid action rwbs [sector + nsectors] [proc]`, e.g.
//! `8,16   1        1     1.427376394  5529  Q  WS 274432 + 8 [fio]`.
//!
//! Every request shows up once per action (Q queued, G, I inserted, D issued to the driver,
//! C completed, …); one action is kept (default D, what the device saw). `rwbs` is blkparse's
//! flag string: a leading `F` is a pre-flush, then `D` discard / `W` write / `R` read /
//! `N` no data, then `F` FUA, `A` read-ahead, `S` sync, `M` metadata. The per-CPU summary
//! that blkparse prints after the events ends the trace.

use crate::completions::Event;
use crate::fiu::{display_major_minor, parse_major_minor};
use crate::lines::{parse_decimal, parse_u64, FieldError, Fields};
use crate::text::{sectors, Completion, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str =
    "MAJ,MIN CPU SEQ SECS.NSECS PID ACTION RWBS [SECTOR + NSECTORS] [PROCESS]";

pub struct Blkparse {
    action: u8,
}

impl Blkparse {
    /// `action`: one of the blkparse action letters (Q, G, I, D, C, …).
    pub fn new(action: char) -> Result<Self, String> {
        if !action.is_ascii_alphabetic() {
            return Err(format!(
                "`{action}` is not a blkparse action letter (Q, D, C, …)"
            ));
        }
        Ok(Blkparse {
            action: action as u8,
        })
    }
}

impl LineFormat for Blkparse {
    fn name(&self) -> &'static str {
        "blkparse"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        false
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let mut f = Fields::ws(line);
        let Some(devt) = f.next_field() else {
            return Ok(Parsed::Skip);
        };
        // The summary section: "CPU0 (8,16):", "Total (8,16):", …
        if devt.starts_with(b"CPU") || devt == b"Total" {
            return Ok(Parsed::End);
        }
        let dev = match devt.iter().position(|&b| b == b',') {
            Some(i) => match (parse_u64(&devt[..i]), parse_u64(&devt[i + 1..])) {
                (Some(a), Some(b)) if a <= u32::MAX as u64 && b <= u32::MAX as u64 => a << 32 | b,
                _ => return Err(f.bad(devt, "a device MAJ,MIN such as 8,16")),
            },
            None => return Err(f.bad(devt, "a device MAJ,MIN such as 8,16")),
        };
        f.u64("a CPU number")?;
        f.u64("a sequence number")?;
        let t = f.req("a time SECS.NSECS")?;
        let time = parse_decimal(t, 1_000_000_000).ok_or_else(|| f.bad(t, "a time SECS.NSECS"))?;
        let pid = f.u64("a process id")?;
        let stream =
            u32::try_from(pid).map_err(|_| f.err("pid does not fit 32 bits", "a process id"))?;
        let act = f.req("an action letter (Q, D, C, …)")?;
        if act.len() != 1 || !act[0].is_ascii_alphabetic() {
            return Err(f.bad(act, "an action letter (Q, D, C, …)"));
        }
        let event = crate::completions::event(self.action, act[0]);
        if act[0] != self.action && event.is_none() {
            return Ok(Parsed::Skip);
        }
        let rwbs = f.req("the RWBS flags (e.g. WS, R, FWFS, D)")?;
        if rwbs.is_empty() || !rwbs.iter().all(|b| b.is_ascii_uppercase()) {
            return Err(f.bad(rwbs, "the RWBS flags (e.g. WS, R, FWFS, D)"));
        }
        // The field after the range: `[process]`, or a completion's `[error]` (after its
        // `(elapsed µs)` with blkparse -t).
        let mut tail = None;
        let (offset, len) = match f.next_field() {
            None => (0, 0),
            Some(t) if t.starts_with(b"[") || t.starts_with(b"(") => {
                tail = Some(t);
                (0, 0)
            }
            Some(t) => {
                let sector = parse_u64(t).ok_or_else(|| f.bad(t, "SECTOR + NSECTORS"))?;
                let scol = f.col;
                let n = match f.next_field() {
                    Some(b"+") => {
                        let n = f.u64("a sector count after `+`")?;
                        sectors(n, f.col)?
                    }
                    Some(x) if x.starts_with(b"[") || x.starts_with(b"(") => {
                        tail = Some(x);
                        0
                    }
                    None => 0,
                    Some(x) => return Err(f.bad(x, "`+ NSECTORS` after the sector")),
                };
                (sectors(sector, scol)?, n)
            }
        };
        let preflush = rwbs[0] == b'F';
        let has = |c: u8| rwbs.contains(&c);
        // Zoned commands and write-zeroes (blktrace's version 8 records): WZ write-zeroes,
        // ZA zone append, ZR, ZRA, ZF, ZO, ZC zone management.
        let zoned = rwbs
            .iter()
            .position(|&c| c == b'Z')
            .map(|z| (z > 0 && rwbs[z - 1] == b'W') || rwbs.get(z + 1) == Some(&b'A'));
        let op = if has(b'D') {
            Op::Discard
        } else if zoned == Some(false) {
            if event.is_some() {
                return Ok(Parsed::Skip);
            }
            return Ok(Parsed::Unsupported(
                "blkparse zone management commands (RWBS ZR, ZRA, ZF, ZO, ZC: no data)",
            ));
        } else if zoned == Some(true) {
            // A zone append writes its data; a write-zeroes writes zeros over its range
            // (wattio's device models have no cheaper way to do it).
            Op::Write
        } else if has(b'W') {
            if len == 0 && preflush {
                Op::Flush
            } else {
                Op::Write
            }
        } else if has(b'R') {
            Op::Read
        } else if preflush {
            Op::Flush
        } else if event.is_some() {
            // Its request was counted as unsupported when it was kept.
            return Ok(Parsed::Skip);
        } else {
            return Ok(Parsed::Unsupported(
                "blkparse requests with no data and no flush (RWBS N)",
            ));
        };
        if let Some(kind) = event {
            // A completion's `[error]`: blkparse -t prints `(%8llu)` before it, and a `(`,
            // spaces and the number are fields too. `[0]` succeeded; `[-5]` (an errno)
            // failed; anything else says nothing.
            let failed = kind == Event::Completed && {
                let mut t = tail.or_else(|| f.next_field());
                while t.is_some_and(|t| !t.starts_with(b"[")) {
                    t = f.next_field();
                }
                t.and_then(|t| t.strip_prefix(b"[")?.strip_suffix(b"]"))
                    .is_some_and(|e| !e.is_empty() && e != b"0")
            };
            return Ok(Parsed::Completion(Completion {
                time,
                op,
                offset,
                len,
                dev: DevKey::Num(dev),
                failed,
                kind,
            }));
        }
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev: DevKey::Num(dev),
            stream,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            format!(
                "blkparse: kept action {} only (Q queued, D issued to the driver, C completed)",
                self.action as char
            ),
            "blkparse: time is SECS.NSECS from the start of the trace; sectors are 512 bytes".into(),
            "blkparse: RWBS D = discard, W = write, R = read; a pre-flush (leading F) without data = flush; ZA (zone append) and WZ (write-zeroes) = write".into(),
            "blkparse: the pid is kept as the stream; a device is MAJ,MIN".into(),
        ]
    }
    fn pairs_completions(&self) -> bool {
        crate::completions::pairs(self.action)
    }
    fn kept_event(&self) -> char {
        self.action as char
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        parse_major_minor(sel)
    }
    fn display_key(&self, k: &OwnedKey) -> String {
        display_major_minor(k)
    }
}
