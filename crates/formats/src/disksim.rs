//! DiskSim's two trace formats, and a writer for the first.
//!
//! * ascii: `time_ms devno blkno bcount flags` — arrival in ms (fractional), 512-byte blocks,
//!   flags in hex with bit 0 set for a read (DiskSim reads the line with `%lf %d %d %d %x`).
//! * validate: `R|W Hit|Miss|Doub|Trip blkno bcount service_us delay_us` — a trace recorded
//!   on a real drive, replayed closed-loop with one request outstanding.

use crate::error::{FormatError, Location};
use crate::lines::{digits, format_decimal, parse_u64, FieldError, Fields};
use crate::text::{sectors, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use crate::writer::TraceWriter;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use wattio_core::{Nanos, Op, Request};

pub const ASCII_FORM: &str =
    "time_ms devno blkno bcount flags (ms, integer, 512 B blocks, 512 B blocks, hex; bit 0 = read)";
pub const VALIDATE_FORM: &str =
    "R|W Hit|Miss|Doub|Trip blkno bcount service_us delay_us (512 B blocks, µs)";

#[derive(Default)]
pub struct DisksimAscii;

impl LineFormat for DisksimAscii {
    fn name(&self) -> &'static str {
        "disksim"
    }
    fn line_form(&self) -> &'static str {
        ASCII_FORM
    }
    fn absolute_clock(&self) -> bool {
        false
    }
    #[inline]
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        match parse_fast(line) {
            Some(r) => Ok(Parsed::Record(r)),
            None => parse_general(line),
        }
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "disksim: time is ms; blkno and bcount are 512-byte blocks; flags bit 0 set = read"
                .into(),
            "disksim: a device is devno".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        sel.trim()
            .parse()
            .map(OwnedKey::Num)
            .map_err(|_| format!("`{sel}` is not a device number"))
    }
}

/// The field-by-field parser: every spacing DiskSim's `sscanf` accepts, `0x` flags, times
/// with any number of decimals (rounded to the ns), and an error naming the column and the
/// expected form of whatever it refuses.
pub(crate) fn parse_general(line: &[u8]) -> Result<Parsed<'_>, FieldError> {
    let mut f = Fields::ws(line);
    if f.is_empty() {
        return Ok(Parsed::Skip);
    }
    let time = f.decimal(1_000_000, "an arrival time in ms")?;
    let dev = f.u64("a device number")?;
    let blk = f.u64("a block number (512 B)")?;
    let blk_col = f.col;
    let cnt = f.u64("a block count (512 B)")?;
    let cnt_col = f.col;
    let fl = f.req("flags in hex (bit 0 = read)")?;
    let flags = parse_hex(fl).ok_or_else(|| f.bad(fl, "flags in hex (bit 0 = read)"))?;
    if let Some(x) = f.next_field() {
        return Err(f.bad(x, "end of line after flags (5 fields)"));
    }
    Ok(Parsed::Record(Raw {
        time,
        op: if flags & 1 == 1 { Op::Read } else { Op::Write },
        offset: sectors(blk, blk_col)?,
        len: sectors(cnt, cnt_col)?,
        dev: DevKey::Num(dev),
        stream: 0,
        measured: None,
    }))
}

/// One pass over a plain line — `I[.F] devno blkno bcount flags`, one space or tab between
/// fields, at most 6 decimals (no rounding), flags as bare hex digits, nothing after them —
/// as the generators and DiskSim's own traces write it. `None` for anything else, which
/// then goes to [`parse_general`]: the fast path either gives the general parser's record
/// or defers, so it never changes what is accepted or how an error reads (a unit test and
/// the `disksim` fuzz target compare the two). Parsing was a third of `wattio run`'s time on
/// a DiskSim trace (docs/benchmarks.md).
#[inline]
pub(crate) fn parse_fast(line: &[u8]) -> Option<Raw<'_>> {
    let (int, mut p) = digits(line, 0)?;
    let mut time = int.checked_mul(1_000_000)?;
    if line.get(p) == Some(&b'.') {
        let (frac, end) = digits(line, p + 1)?;
        let k = end - p - 1;
        if k > 6 {
            return None;
        }
        time = time.checked_add(frac * 10u64.pow((6 - k) as u32))?;
        p = end;
    }
    let dev = field(line, &mut p)?;
    let blk = field(line, &mut p)?;
    let cnt = field(line, &mut p)?;
    if !matches!(line.get(p), Some(b' ' | b'\t')) {
        return None;
    }
    let hex = &line[p + 1..];
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    let mut flags = 0u64;
    for &b in hex {
        flags = flags << 4 | (b as char).to_digit(16)? as u64;
    }
    Some(Raw {
        time,
        op: if flags & 1 == 1 { Op::Read } else { Op::Write },
        offset: blk.checked_mul(512)?,
        len: cnt.checked_mul(512)?,
        dev: DevKey::Num(dev),
        stream: 0,
        measured: None,
    })
}

/// One separator (space or tab), then decimal digits.
#[inline(always)]
fn field(line: &[u8], p: &mut usize) -> Option<u64> {
    if !matches!(line.get(*p), Some(b' ' | b'\t')) {
        return None;
    }
    let (v, end) = digits(line, *p + 1)?;
    *p = end;
    Some(v)
}

/// Panics if the fast path reads `line` differently from the general parser (used by the
/// unit tests and the disksim fuzz target).
pub fn check_fast_path(line: &[u8]) {
    if let Some(fast) = parse_fast(line) {
        match parse_general(line) {
            Ok(Parsed::Record(r)) => assert_eq!(fast, r, "fast and general parsers disagree"),
            _ => panic!(
                "fast path accepted a line the general parser refuses: {:?}",
                String::from_utf8_lossy(line)
            ),
        }
    }
}

fn parse_hex(f: &[u8]) -> Option<u64> {
    let f = f
        .strip_prefix(b"0x")
        .or_else(|| f.strip_prefix(b"0X"))
        .unwrap_or(f);
    if f.is_empty() || f.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &b in f {
        let d = (b as char).to_digit(16)?;
        v = v << 4 | d as u64;
    }
    Some(v)
}

/// DiskSim validate traces. Arrival of the first request is 0; each later one arrives when
/// the previous completed *as recorded* (its measured service time) plus the previous line's
/// think time. That reproduces DiskSim's closed-loop replay whenever the simulated drive is
/// as fast as the real one; an executor that wants the closed loop against its own response
/// times should use `measured` and the gaps (arrival difference − measured) instead.
#[derive(Default)]
pub struct DisksimValidate {
    next: Nanos,
}

impl LineFormat for DisksimValidate {
    fn name(&self) -> &'static str {
        "disksim-validate"
    }
    fn line_form(&self) -> &'static str {
        VALIDATE_FORM
    }
    fn absolute_clock(&self) -> bool {
        false
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let mut f = Fields::ws(line);
        if f.is_empty() {
            return Ok(Parsed::Skip);
        }
        let o = f.req("R or W")?;
        let op = match o {
            b"R" => Op::Read,
            b"W" => Op::Write,
            _ => return Err(f.bad(o, "R or W")),
        };
        let h = f.req("Hit, Miss, Doub or Trip")?;
        if !matches!(h, b"Hit" | b"Miss" | b"Doub" | b"Trip") {
            return Err(f.bad(h, "Hit, Miss, Doub or Trip"));
        }
        let blk = f.u64("a block number (512 B)")?;
        let blk_col = f.col;
        let cnt = f.u64("a block count (512 B)")?;
        let cnt_col = f.col;
        let service = f.decimal(1_000, "a measured service time in µs")?;
        let delay = f.decimal(1_000, "a think time in µs")?;
        if let Some(x) = f.next_field() {
            return Err(f.bad(x, "end of line after delay_us (6 fields)"));
        }
        let time = self.next;
        self.next = time
            .checked_add(service)
            .and_then(|t| t.checked_add(delay))
            .ok_or_else(|| f.err("cumulative time overflows", "times below 584 years"))?;
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset: sectors(blk, blk_col)?,
            len: sectors(cnt, cnt_col)?,
            dev: DevKey::Num(0),
            stream: 0,
            measured: Some(service),
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "disksim-validate: blkno and bcount are 512-byte blocks; service_us is the real drive's measured response time (kept as measured)".into(),
            "disksim-validate: closed-loop replay: arrival(0) = 0, arrival(i) = arrival(i-1) + service(i-1) + delay(i-1), i.e. the recorded timing".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        match parse_u64(sel.trim().as_bytes()) {
            Some(0) => Ok(OwnedKey::Num(0)),
            _ => Err("a validate trace has one device, 0".into()),
        }
    }
}

/// Writes DiskSim ascii traces (`time_ms devno blkno bcount flags`), exactly: times with ns
/// resolution (6 decimals of ms), so reading the file back gives the same requests.
pub struct DisksimAsciiWriter {
    out: BufWriter<File>,
    file: String,
    line: Vec<u8>,
    rows: u64,
}

impl DisksimAsciiWriter {
    pub fn create(path: &Path) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::create(path).map_err(|e| FormatError::io(&file, &e))?;
        Ok(DisksimAsciiWriter {
            out: BufWriter::with_capacity(1 << 20, f),
            file,
            line: Vec::with_capacity(64),
            rows: 0,
        })
    }

    fn refuse(&self, msg: String, expected: &str) -> FormatError {
        FormatError::new(&self.file, Location::Row(self.rows), msg).with_expected(expected)
    }
}

impl TraceWriter for DisksimAsciiWriter {
    fn write(&mut self, r: &Request) -> Result<(), FormatError> {
        let flags = match r.op {
            Op::Read => 1,
            Op::Write => 0,
            other => {
                return Err(self.refuse(
                    format!(
                        "DiskSim ascii traces carry only reads and writes, not {}",
                        other.as_str()
                    ),
                    "reads and writes (slice or filter the trace first)",
                ))
            }
        };
        if !r.offset.is_multiple_of(512) || !r.len.is_multiple_of(512) {
            return Err(self.refuse(
                format!(
                    "offset {} / length {} is not a whole number of 512-byte blocks",
                    r.offset, r.len
                ),
                "512-byte aligned requests",
            ));
        }
        // DiskSim scans blkno and bcount with `%d`.
        if r.offset / 512 > i32::MAX as u64 {
            return Err(self.refuse(
                format!(
                    "block {} is beyond what DiskSim's 32-bit `%d` block numbers hold",
                    r.offset / 512
                ),
                "offsets below 1 TiB",
            ));
        }
        self.line.clear();
        format_decimal(&mut self.line, r.arrival, 1_000_000, 6);
        let _ = writeln!(
            self.line,
            " {} {} {} {}",
            r.dev,
            r.offset / 512,
            r.len / 512,
            flags
        );
        self.out
            .write_all(&self.line)
            .map_err(|e| FormatError::io(&self.file, &e))?;
        self.rows += 1;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64, FormatError> {
        self.out
            .flush()
            .map_err(|e| FormatError::io(&self.file, &e))?;
        Ok(self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_takes_plain_lines_and_agrees_with_the_general_parser() {
        let r = parse_fast(b"13.191135\t30\t0\t5\t1").unwrap();
        assert_eq!(
            r,
            Raw {
                time: 13_191_135,
                op: Op::Read,
                offset: 0,
                len: 2560,
                dev: DevKey::Num(30),
                stream: 0,
                measured: None,
            }
        );
        // Fewer decimals are scaled; no decimals is whole ms; flags are hex.
        let w = parse_fast(b"7.5 2 576560 6 a").unwrap();
        assert_eq!(
            (w.time, w.op, w.offset, w.len, w.dev),
            (7_500_000, Op::Write, 576_560 * 512, 3072, DevKey::Num(2))
        );
        assert_eq!(parse_fast(b"7 0 0 8 F").unwrap().time, 7_000_000);
        for l in [
            &b"13.191135\t30\t0\t5\t1"[..],
            b"7.5 2 576560 6 a",
            b"7 0 0 8 F",
        ] {
            check_fast_path(l);
        }
    }

    #[test]
    fn fast_path_leaves_everything_unusual_to_the_general_parser() {
        let lines: &[&[u8]] = &[
            b"",
            b" 1.0 0 0 8 1",
            b"1.0  0 0 8 1",
            b"1.0 0 0 8 1 ",
            b"1.0 0 0 8 0x1",
            b"1.0 0 0 8",
            b"1.0 0 0 8 1 7",
            b"1.1234567 0 0 8 1",
            b"1. 0 0 8 1",
            b".5 0 0 8 1",
            b"1.0 0 0 8 12345678901234567",
            b"1.0 0 36028797018963968 8 1",
            b"18446744073709551 0 0 8 1",
            b"1.0 0 0 8 g",
        ];
        for l in lines {
            assert!(
                parse_fast(l).is_none(),
                "{:?} took the fast path",
                String::from_utf8_lossy(l)
            );
            check_fast_path(l);
        }
        // Every one-byte change of a plain line: either the same record as the general
        // parser, or deferred to it.
        let base = b"13.191135 30 576560 5 1";
        for i in 0..base.len() {
            for b in [b' ', b'\t', b'.', b'0', b'9', b'a', b'x', b'-', 0xff] {
                let mut l = base.to_vec();
                l[i] = b;
                check_fast_path(&l);
            }
        }
    }
}
