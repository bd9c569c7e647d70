//! Tencent cloud block storage (CBS) traces: `Timestamp,Offset,Size,IOType,VolumeID`.
//!
//! Timestamp in seconds (Unix epoch), Offset and Size in 512-byte sectors, IOType `0` read /
//! `1` write, VolumeID the cloud virtual volume.

use crate::lines::{FieldError, Fields};
use crate::text::{sectors, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str =
    "Timestamp,Offset,Size,IOType,VolumeID (seconds, 512 B sectors, 512 B sectors, 0|1, integer)";

#[derive(Default)]
pub struct Tencent;

impl LineFormat for Tencent {
    fn name(&self) -> &'static str {
        "tencent"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        true
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        if line.is_empty() {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::csv(line);
        let time = f.decimal(1_000_000_000, "a Unix timestamp in seconds")?;
        let off = f.u64("an offset in 512-byte sectors")?;
        let off_col = f.col;
        let size = f.u64("a size in 512-byte sectors")?;
        let size_col = f.col;
        let t = f.req("IOType 0 (read) or 1 (write)")?;
        let op = match t {
            b"0" => Op::Read,
            b"1" => Op::Write,
            _ => return Err(f.bad(t, "IOType 0 (read) or 1 (write)")),
        };
        let vol = f.u64("a volume id")?;
        if let Some(x) = f.next_field() {
            return Err(f.bad(x, "end of line after VolumeID (5 fields)"));
        }
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset: sectors(off, off_col)?,
            len: sectors(size, size_col)?,
            dev: DevKey::Num(vol),
            stream: 0,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "tencent: Timestamp is seconds (1 s resolution: requests within a second share an arrival, in file order)".into(),
            "tencent: Offset and Size are 512-byte sectors; IOType 0 = read, 1 = write; a device is VolumeID".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        sel.trim()
            .parse()
            .map(OwnedKey::Num)
            .map_err(|_| format!("`{sel}` is not a volume id"))
    }
}
