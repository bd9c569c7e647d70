//! Alibaba cloud block traces (2020 release): `device_id,opcode,offset,length,timestamp`.
//!
//! opcode `R`/`W`, offset and length in bytes, timestamp in microseconds (Unix epoch).

use crate::lines::{FieldError, Fields};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str =
    "device_id,opcode,offset,length,timestamp (integer, R|W, bytes, bytes, microseconds)";

#[derive(Default)]
pub struct Alibaba;

impl LineFormat for Alibaba {
    fn name(&self) -> &'static str {
        "alibaba"
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
        let dev = f.u64("a device id")?;
        let o = f.req("R or W")?;
        let op = match o {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            _ => return Err(f.bad(o, "R or W")),
        };
        let offset = f.u64("a byte offset")?;
        let len = f.u64("a length in bytes")?;
        let time = f.decimal(1_000, "a timestamp in microseconds")?;
        if let Some(x) = f.next_field() {
            return Err(f.bad(x, "end of line after timestamp (5 fields)"));
        }
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev: DevKey::Num(dev),
            stream: 0,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec!["alibaba: offset and length are bytes, timestamp is microseconds; a device is device_id".into()]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        sel.trim()
            .parse()
            .map(OwnedKey::Num)
            .map_err(|_| format!("`{sel}` is not a device id"))
    }
}
