//! MSR Cambridge block traces (SNIA IOTTA): `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//!
//! Timestamp and ResponseTime are Windows filetime ticks (100 ns; the timestamp counts from
//! 1601-01-01), Offset and Size are bytes, Type is `Read` or `Write`. Hostname and disk number
//! together name a volume (`hm,1`, published as the file `hm_1.csv`).

use crate::lines::{FieldError, Fields};
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
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
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
