//! MSR Cambridge block traces (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//!
//! Timestamp and ResponseTime are Windows filetime ticks (100 ns; the timestamp counts from
//! 1601-01-01), Offset and Size are bytes, Type is `Read` or `Write`. Hostname and disk number
//! together name a volume (`hm,1`, published as the file `hm_1.csv`).

use crate::lines::{digits, FieldError, Fields};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime \
     (filetime ticks, name, integer, Read|Write, bytes, bytes, ticks)";

/// 100 ns per filetime tick.
const TICK_NS: u64 = 100;

#[derive(Default)]
pub struct Msr;

impl LineFormat for Msr {
    fn name(&self) -> &'static str {
        "msr"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        true
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
            "msr: Timestamp and ResponseTime are Windows filetime ticks of 100 ns".into(),
            "msr: Offset and Size are bytes; ResponseTime is kept as the measured latency".into(),
            "msr: a volume is Hostname,DiskNumber (the file hm_1.csv holds volume hm,1)".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        let s = sel.trim();
        let (h, d) = s
            .rsplit_once([',', '_'])
            .ok_or("expected HOST_DISK or HOST,DISK, e.g. hm_1")?;
        let d: u64 = d
            .parse()
            .map_err(|_| format!("`{d}` is not a disk number"))?;
        Ok(OwnedKey::Bytes(format!("{h},{d}").into_bytes()))
    }
    fn display_key(&self, k: &OwnedKey) -> String {
        match k {
            OwnedKey::Bytes(b) => String::from_utf8_lossy(b).replace(',', "_"),
            OwnedKey::Num(n) => n.to_string(),
        }
    }
}

/// The field-by-field parser: accepts everything the format allows (spaces around numbers,
/// 20-digit values, a header, blank lines) and names the column and expected form of
/// whatever it refuses.
pub(crate) fn parse_general(line: &[u8]) -> Result<Parsed<'_>, FieldError> {
    if line.is_empty() || line.starts_with(b"Timestamp,") {
        return Ok(Parsed::Skip);
    }
    let mut f = Fields::csv(line);
    let ticks = f.u64("a Windows filetime timestamp (100 ns ticks)")?;
    let time = ticks.checked_mul(TICK_NS).ok_or_else(|| {
        f.err(
            "timestamp overflows 64-bit ns",
            "a filetime before year 7446",
        )
    })?;
    let host = f.req("a host name")?;
    let host_col = f.col;
    if host.is_empty() {
        return Err(f.err("empty host name", "a host name such as `hm`"));
    }
    let _disk = f.u64("a disk number")?;
    let key_end = f.pos().saturating_sub(1).max(host_col);
    let key = line.get(host_col..key_end).unwrap_or(host);
    let ty = f.req("Read or Write")?;
    let op = if ty.eq_ignore_ascii_case(b"Read") {
        Op::Read
    } else if ty.eq_ignore_ascii_case(b"Write") {
        Op::Write
    } else {
        return Err(f.bad(ty, "Read or Write"));
    };
    let offset = f.u64("a byte offset")?;
    let len = f.u64("a size in bytes")?;
    let rt = f.u64("a response time in filetime ticks")?;
    let measured = rt
        .checked_mul(TICK_NS)
        .ok_or_else(|| f.err("response time overflows", "a response time in ticks"))?;
    if let Some(x) = f.next_field() {
        return Err(f.bad(x, "end of line after ResponseTime (7 fields)"));
    }
    Ok(Parsed::Record(Raw {
        time,
        op,
        offset,
        len,
        dev: DevKey::Bytes(key),
        stream: 0,
        measured: Some(measured),
    }))
}

/// The common line — seven plain fields, no spaces, numbers of at most 19 digits — in one
/// pass over the bytes, without the per-field bookkeeping the error messages need. `None`
/// hands the line to [`parse_general`], which then either accepts it with the same result
/// or says exactly what is wrong, so the fast path never changes what is accepted or how a
/// refusal reads (a unit test and the msr fuzz target compare the two).
#[inline]
pub(crate) fn parse_fast(line: &[u8]) -> Option<Raw<'_>> {
    let mut p = 0;
    let ticks = number(line, &mut p)?;
    let host_start = p;
    while *line.get(p)? != b',' {
        p += 1;
    }
    if p == host_start {
        return None;
    }
    p += 1;
    number(line, &mut p)?;
    let key = line.get(host_start..p - 1)?;
    let op = match line.get(p..p + 5)? {
        [r, e, a, d, b','] if [r | 0x20, e | 0x20, a | 0x20, d | 0x20] == *b"read" => {
            p += 5;
            Op::Read
        }
        [w, r, i, t, e] if [w | 0x20, r | 0x20, i | 0x20, t | 0x20, e | 0x20] == *b"write" => {
            if *line.get(p + 5)? != b',' {
                return None;
            }
            p += 6;
            Op::Write
        }
        _ => return None,
    };
    let offset = number(line, &mut p)?;
    let len = number(line, &mut p)?;
    let rt = last_number(line, p)?;
    Some(Raw {
        time: ticks.checked_mul(TICK_NS)?,
        op,
        offset,
        len,
        dev: DevKey::Bytes(key),
        stream: 0,
        measured: Some(rt.checked_mul(TICK_NS)?),
    })
}

/// Decimal digits from `*p` up to a comma (consumed). At most 19 digits, so the value cannot
/// overflow and needs no checked arithmetic; longer numbers go to the general parser.
#[inline(always)]
fn number(line: &[u8], p: &mut usize) -> Option<u64> {
    let (v, end) = digits(line, *p)?;
    if *line.get(end)? != b',' {
        return None;
    }
    *p = end + 1;
    Some(v)
}

/// Decimal digits from `p` to the end of the line.
#[inline(always)]
fn last_number(line: &[u8], p: usize) -> Option<u64> {
    let (v, end) = digits(line, p)?;
    (end == line.len()).then_some(v)
}

/// Panics if the fast path accepts `line` differently from the general parser (used by the
/// unit tests and the msr fuzz target).
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
        let r = parse_fast(b"128166372003061629,hm,1,Read,3154227200,4096,40160").unwrap();
        assert_eq!(
            r,
            Raw {
                time: 12_816_637_200_306_162_900,
                op: Op::Read,
                offset: 3_154_227_200,
                len: 4096,
                dev: DevKey::Bytes(b"hm,1"),
                stream: 0,
                measured: Some(4_016_000),
            }
        );
        let w = parse_fast(b"1,src2,0,wRiTe,0,65536,20").unwrap();
        assert_eq!(
            (w.op, w.dev, w.len, w.measured),
            (Op::Write, DevKey::Bytes(b"src2,0"), 65536, Some(2000))
        );
        // 19 digits is the longest number the fast path takes.
        let m = parse_fast(b"1,h,0,Read,9999999999999999999,1,0").unwrap();
        assert_eq!(m.offset, 9_999_999_999_999_999_999);
    }

    #[test]
    fn fast_path_leaves_everything_unusual_to_the_general_parser() {
        let lines: &[&[u8]] = &[
            b"",
            b"Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
            b" 1,hm,1,Read,0,1,1",
            b"1,hm, 1,Read,0,1,1",
            b"1,,1,Read,0,1,1",
            b"1,hm,1,Rea,0,1,1",
            b"1,hm,1,Reads,0,1,1",
            b"1,hm,1,Writ,0,1,1",
            b"1,hm,1,Read,0,1",
            b"1,hm,1,Read,0,1,1,",
            b"1,hm,1,Read,0,1,1 ",
            b"1,hm,1,Read,0,1,",
            b"1,hm,1,Read,10000000000000000000,1,1",
            b"184467440737095517,hm,1,Read,0,1,1",
            b"1,hm,1,Read,0,1,184467440737095517",
            b"1,hm,x,Read,0,1,1",
            b"1,hm",
            b"1,hm,",
            b"1,hm,1,",
            b"1,hm,1,Write",
            b"1,hm,1,Write0,1,1",
        ];
        for l in lines {
            assert!(parse_fast(l).is_none(), "{:?}", String::from_utf8_lossy(l));
            check_fast_path(l);
        }
        // Every prefix and every one-byte change of a valid line: the two parsers agree.
        let base = b"128166372003061629,hm,1,Write,3154227200,4096,40160";
        for k in 0..=base.len() {
            check_fast_path(&base[..k]);
        }
        for i in 0..base.len() {
            for b in [b',', b' ', b'0', b'9', b'a', b'W', 0xff] {
                let mut l = base.to_vec();
                l[i] = b;
                check_fast_path(&l);
            }
        }
    }
}
