//! MQSim's trace format (`IO_Flow_Trace_Based`, `ASCII_Trace_Definition.h`), as MQSim reads
//! it with `<Time_Unit>NANOSECOND</Time_Unit>`:
//!
//! `time_ns devno lba sectors type` — arrival in integer ns, start address and size in
//! 512-byte sectors, type `0` = write and `1` = read.
//!
//! The line looks like a DiskSim ascii line with an integer time, so it is never sniffed:
//! `--format mqsim` chooses it. What MQSim does with the columns, and what this reader does:
//!
//! * MQSim replays one trace file as one flow onto the whole SSD: the device column is read
//!   but not used. Every request here goes to device 0 likewise (the column must still be a
//!   number).
//! * MQSim reads the numbers with `strtoll`/`strtoul(…, 0)`: a leading `0x` would be hex and
//!   a leading `0` octal. This reader takes decimal only and refuses leading zeros, so a
//!   line never means one thing to MQSim and another here.
//! * MQSim treats every type but `0` as a read; this reader accepts `0` and `1` only.
//! * MQSim wraps an address past the end of the drive around (modulo the logical
//!   capacity); the reader cannot know the drive, so it keeps the address and a device
//!   model refuses one past its end.

use crate::lines::{digits, FieldError, Fields};
use crate::text::{sectors, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const FORM: &str =
    "time_ns devno lba sectors type (integer ns, ignored, 512 B sectors, 512 B sectors, 0 = write / 1 = read)";

#[derive(Default)]
pub struct Mqsim;

/// A decimal integer as MQSim's `strtoul(…, 0)` would read it the same way: no sign, no
/// `0x`, no leading zero.
fn decimal(f: &mut Fields<'_>, expected: &str) -> Result<(u64, usize), FieldError> {
    let t = f.req(expected)?;
    let col = f.col;
    if t.len() > 1 && t[0] == b'0' {
        return Err(f.bad(
            t,
            &format!("{expected}, without a leading 0 (MQSim reads 0… as octal, 0x… as hex)"),
        ));
    }
    match crate::lines::parse_u64(t) {
        Some(v) => Ok((v, col)),
        None => Err(f.bad(t, expected)),
    }
}

impl LineFormat for Mqsim {
    fn name(&self) -> &'static str {
        "mqsim"
    }
    fn line_form(&self) -> &'static str {
        FORM
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
            "mqsim: time is integer ns (MQSim's NANOSECOND time unit); lba and size are 512-byte sectors; type 0 = write, 1 = read".into(),
            "mqsim: one flow onto one drive, as MQSim replays a trace file: the devno column is ignored, every request goes to device 0".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        match crate::lines::parse_u64(sel.trim().as_bytes()) {
            Some(0) => Ok(OwnedKey::Num(0)),
            _ => Err("an MQSim trace is one flow onto one device, 0".into()),
        }
    }
}

/// The field-by-field parser: any spacing, and an error naming the column and the expected
/// form of whatever it refuses.
pub(crate) fn parse_general(line: &[u8]) -> Result<Parsed<'_>, FieldError> {
    let mut f = Fields::ws(line);
    if f.is_empty() {
        return Ok(Parsed::Skip);
    }
    let (time, _) = decimal(&mut f, "an arrival time in integer ns")?;
    decimal(&mut f, "a device number")?;
    let (lba, lba_col) = decimal(&mut f, "a start address in 512 B sectors")?;
    let (cnt, cnt_col) = decimal(&mut f, "a size in 512 B sectors")?;
    let t = f.req("a type: 0 (write) or 1 (read)")?;
    let op = match t {
        b"0" => Op::Write,
        b"1" => Op::Read,
        _ => return Err(f.bad(t, "a type: 0 (write) or 1 (read)")),
    };
    if let Some(x) = f.next_field() {
        return Err(f.bad(x, "end of line after the type (5 fields)"));
    }
    Ok(Parsed::Record(Raw {
        time,
        op,
        offset: sectors(lba, lba_col)?,
        len: sectors(cnt, cnt_col)?,
        dev: DevKey::Num(0),
        stream: 0,
        measured: None,
    }))
}

/// One pass over a plain line — five decimal fields without leading zeros, one space or tab
/// between them, type `0` or `1` last — as MQSim's traces and the benchmark's generator
/// write it. `None` for anything else, which then goes to [`parse_general`]: the fast path
/// either gives the general parser's record or defers (a unit test and the `mqsim` fuzz
/// target compare the two). Same reason and method as `disksim::parse_fast`.
#[inline]
pub(crate) fn parse_fast(line: &[u8]) -> Option<Raw<'_>> {
    let (time, e) = plain(line, 0)?;
    let (_devno, e) = plain(line, sep(line, e)?)?;
    let (lba, e) = plain(line, sep(line, e)?)?;
    let (cnt, e) = plain(line, sep(line, e)?)?;
    let t = sep(line, e)?;
    let op = match line.get(t..)? {
        b"0" => Op::Write,
        b"1" => Op::Read,
        _ => return None,
    };
    Some(Raw {
        time,
        op,
        offset: lba.checked_mul(512)?,
        len: cnt.checked_mul(512)?,
        dev: DevKey::Num(0),
        stream: 0,
        measured: None,
    })
}

/// Digits at `start` with no leading zero (a lone `0` is fine).
#[inline(always)]
fn plain(line: &[u8], start: usize) -> Option<(u64, usize)> {
    let (v, end) = digits(line, start)?;
    (end - start == 1 || line[start] != b'0').then_some((v, end))
}

/// One space or tab at `p`: where the next field starts.
#[inline(always)]
fn sep(line: &[u8], p: usize) -> Option<usize> {
    matches!(line.get(p), Some(b' ' | b'\t')).then_some(p + 1)
}

/// Panics if the fast path reads `line` differently from the general parser (used by the
/// unit tests and the mqsim fuzz target).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_takes_plain_lines_and_agrees_with_the_general_parser() {
        let r = parse_fast(b"938513000 4 264719034 16 0").unwrap();
        assert_eq!(
            r,
            Raw {
                time: 938_513_000,
                op: Op::Write,
                offset: 264_719_034 * 512,
                len: 8192,
                dev: DevKey::Num(0),
                stream: 0,
                measured: None,
            }
        );
        let z = parse_fast(b"0\t0\t0\t1\t1").unwrap();
        assert_eq!((z.time, z.op, z.offset, z.len), (0, Op::Read, 0, 512));
        check_fast_path(b"938513000 4 264719034 16 0");
        check_fast_path(b"0\t0\t0\t1\t1");
    }

    #[test]
    fn fast_path_leaves_everything_unusual_to_the_general_parser() {
        let lines: &[&[u8]] = &[
            b"",
            b" 1 0 0 8 1",
            b"1  0 0 8 1",
            b"1 0 0 8 1 ",
            b"1 0 010 8 1",
            b"1 0 0x10 8 1",
            b"01 0 0 8 1",
            b"1 0 0 8 2",
            b"1 0 0 8 10",
            b"1 0 0 8",
            b"1 0 0 8 1 1",
            b"1.5 0 0 8 1",
            b"1 0 36028797018963968 8 1",
            b"1 0 0 12345678901234567890 1",
        ];
        for l in lines {
            assert!(
                parse_fast(l).is_none(),
                "{:?} took the fast path",
                String::from_utf8_lossy(l)
            );
            check_fast_path(l);
        }
        let base = b"938513000 4 264719034 16 0";
        for i in 0..base.len() {
            for b in [b' ', b'\t', b'0', b'1', b'9', b'x', b'-', 0xff] {
                let mut l = base.to_vec();
                l[i] = b;
                check_fast_path(&l);
            }
        }
    }
}
