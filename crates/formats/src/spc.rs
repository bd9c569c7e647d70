//! SPC / UMass trace repository format (Financial1/2, WebSearch1-3):
//! `ASU,LBA,Size,Opcode,Timestamp[,…]`.
//!
//! ASU is the application storage unit (the volume), LBA is in 512-byte blocks, Size in
//! bytes, Opcode `r`/`w` in either case, Timestamp seconds since the start of the trace.
//! The SPC trace specification allows further optional fields; they are ignored.

use crate::lines::{FieldError, Fields};
use crate::text::{sectors, DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

pub const LINE_FORM: &str =
    "ASU,LBA,Size,Opcode,Timestamp[,...] (integer, 512 B blocks, bytes, r|w, seconds)";

#[derive(Default)]
pub struct Spc;

impl LineFormat for Spc {
    fn name(&self) -> &'static str {
        "spc"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        false
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        if line.is_empty() {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::csv(line);
        let asu = f.u64("an ASU number")?;
        let lba = f.u64("an LBA in 512-byte blocks")?;
        let lba_col = f.col;
        let len = f.u64("a size in bytes")?;
        let o = crate::lines::trim(f.req("r or w")?);
        let op = match o {
            b"r" | b"R" => Op::Read,
            b"w" | b"W" => Op::Write,
            _ => return Err(f.bad(o, "r or w")),
        };
        let time = f.decimal(1_000_000_000, "a timestamp in seconds")?;
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset: sectors(lba, lba_col)?,
            len,
            dev: DevKey::Num(asu),
            stream: 0,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            "spc: LBA is 512-byte blocks, Size is bytes, Timestamp is seconds from the trace start"
                .into(),
            "spc: a device is an ASU; fields after Timestamp are ignored".into(),
        ]
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        sel.trim()
            .parse()
            .map(OwnedKey::Num)
            .map_err(|_| format!("`{sel}` is not an ASU number"))
    }
}
