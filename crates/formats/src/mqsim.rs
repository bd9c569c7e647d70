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

use crate::lines::{FieldError, Fields};
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
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
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
