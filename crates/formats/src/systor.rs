//! SYSTOR '17 VDI block traces (SNIA IOTTA; Lee et al., "Understanding storage traffic
//! characteristics on enterprise virtual desktop infrastructure", SYSTOR '17):
//! `Timestamp,Response,IOType,LUN,Offset,Size`, one file per hour and LUN
//! (`2016022219_LUN4.csv.gz`), each starting with that header line.
//!
//! From the distribution's README: Timestamp is Unix time in seconds with a nine-digit
//! fraction "accurate only to the microsecond level; please ignore the nanosecond part";
//! Response is the time the I/O took to complete (seconds); IOType is `R`, `W` or blank ("no
//! response message": the trace never saw the reply, so neither the kind nor the response
//! time is known); LUN is the storage device's index; Offset and Size are bytes. The traces
//! were taken by port mirroring of a Fibre Channel SAN, which lost some packets: the README
//! warns of irregular response times around each hour's boundary.

use crate::lines::{FieldError, Fields};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str = "Timestamp,Response,IOType,LUN,Offset,Size \
     (Unix seconds, seconds, R|W|blank, LUN index, bytes, bytes)";

/// Timestamps and response times are read to the microsecond (the README's resolution;
/// digits below it are rounded, half up) and stored in ns.
const US: u64 = 1_000;

#[derive(Default)]
pub struct Systor;

impl LineFormat for Systor {
    fn name(&self) -> &'static str {
        "systor"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        true
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        // Each hour's file starts with the header, so a concatenation repeats it.
        if line.is_empty() || line.starts_with(b"Timestamp,") {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::csv(line);
        let time = micros(&mut f, "a Unix timestamp in seconds")?;
        let response = micros(&mut f, "a response time in seconds")?;
        let ty = f.req("IOType R, W or blank")?;
        let op = match ty {
            b"R" | b"r" => Some(Op::Read),
            b"W" | b"w" => Some(Op::Write),
            b"" => None,
            _ => return Err(f.bad(ty, "IOType R, W or blank")),
        };
        let lun = f.u64("a LUN index")?;
        let offset = f.u64("an offset in bytes")?;
        let len = f.u64("a size in bytes")?;
        if let Some(x) = f.next_field() {
            return Err(f.bad(x, "end of line after Size (6 fields)"));
        }
        let Some(op) = op else {
            return Ok(Parsed::Unsupported(
                "I/Os with a blank IOType (the trace saw no response: kind and response time unknown)",
            ));
        };
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev: DevKey::Num(lun),
            stream: 0,
            measured: Some(response),
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "systor: Timestamp is Unix seconds, read to the microsecond as the traces' README advises (digits below it rounded)".into(),
            "systor: Response is seconds, kept as the measured latency; Offset and Size are bytes; a device is a LUN index".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        // The LUN as a number or as the file names spell it (`LUN4`).
        let s = sel.trim();
        let n = match s.get(..3) {
            Some(p) if p.eq_ignore_ascii_case("lun") => &s[3..],
            _ => s,
        };
        n.parse()
            .map(OwnedKey::Num)
            .map_err(|_| format!("`{sel}` is not a LUN index (e.g. 4 or LUN4)"))
    }
}

/// The next field as seconds with a fraction, in ns at microsecond resolution.
fn micros(f: &mut Fields<'_>, expected: &str) -> Result<u64, FieldError> {
    let us = f.decimal(1_000_000, expected)?;
    us.checked_mul(US)
        .ok_or_else(|| f.err("time overflows 64-bit ns", "seconds before year 2554"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(line: &str) -> String {
        match Systor.parse(line.as_bytes()) {
            Err(e) => format!("col {}: {} (expected {})", e.column, e.message, e.expected),
            Ok(_) => panic!("accepted: {line}"),
        }
    }

    fn record(line: &str) -> Raw<'_> {
        match Systor.parse(line.as_bytes()).unwrap() {
            Parsed::Record(r) => r,
            _ => panic!("not a record: {line}"),
        }
    }

    #[test]
    fn a_line_of_the_distribution_in_ns_and_bytes() {
        // The README's first timestamp of 2016022219-LUN4, and libCacheSim's example line.
        let r = record("1456095145.133076000,0.000806000,R,0,899056122368,131072");
        assert_eq!(
            r,
            Raw {
                time: 1_456_095_145_133_076_000,
                op: Op::Read,
                offset: 899_056_122_368,
                len: 131_072,
                dev: DevKey::Num(0),
                stream: 0,
                measured: Some(806_000),
            }
        );
        let w = record("1456135200.013118000,0.001,W,4,4096,8192");
        assert_eq!(
            (w.time, w.op, w.measured, w.dev, w.len),
            (
                1_456_135_200_013_118_000,
                Op::Write,
                Some(1_000_000),
                DevKey::Num(4),
                8192
            )
        );
        // The nanosecond digits are below the trace's resolution: rounded to the µs.
        assert_eq!(
            record("1.000000499,0.0000015,R,0,0,512").time,
            1_000_000_000
        );
        assert_eq!(
            record("1.000000500,0.0000015,R,0,0,512").time,
            1_000_001_000
        );
        assert_eq!(
            record("1.000000500,0.0000015,R,0,0,512").measured,
            Some(2_000)
        );
    }

    #[test]
    fn headers_blank_iotypes_and_bad_fields() {
        for l in ["", "Timestamp,Response,IOType,LUN,Offset,Size"] {
            assert!(
                matches!(Systor.parse(l.as_bytes()), Ok(Parsed::Skip)),
                "{l}"
            );
        }
        assert!(matches!(
            Systor.parse(b"1456135202.013118000,0.001,,0,4096,4096"),
            Ok(Parsed::Unsupported(_))
        ));
        // A blank IOType is still a line of the format: its other fields are checked.
        let e = refusal("1.0,0.001,,0,x,4096");
        assert!(
            e.contains("col 14: bad field `x` (expected an offset in bytes"),
            "{e}"
        );
        for (line, want) in [
            ("1.0,0.001,X,0,0,4096", "IOType R, W or blank"),
            ("1.0,-0.001,R,0,0,4096", "response time in seconds"),
            ("1.0,0.001,R,0,0", "size in bytes"),
            ("1.0,0.001,R,0,0,4096,7", "end of line after Size"),
            ("1.0,0.001,R,x,0,4096", "LUN index"),
            ("99999999999.0,0.001,R,0,0,4096", "year 2554"),
        ] {
            let e = refusal(line);
            assert!(e.contains(want), "{line}: {e}");
        }
    }

    #[test]
    fn a_lun_is_selected_by_number_or_by_its_file_name() {
        for s in ["4", "LUN4", "lun4", " 4 "] {
            assert_eq!(Systor.parse_selection(s), Ok(OwnedKey::Num(4)), "{s}");
        }
        assert!(Systor.parse_selection("disk4").is_err());
        assert!(Systor.parse_selection("LUN").is_err());
    }
}
