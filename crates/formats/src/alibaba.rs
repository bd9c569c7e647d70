//! Alibaba cloud block traces (2020 release): `device_id,opcode,offset,length,timestamp`.
//!
//! opcode `R`/`W`, offset and length in bytes, timestamp in microseconds (Unix epoch).

use crate::cloud::{CloudCsv, CloudRecord};
use crate::lines::{FieldError, Fields};
use wattio_core::Op;

pub const LINE_FORM: &str =
    "device_id,opcode,offset,length,timestamp (integer, R|W, bytes, bytes, microseconds)";

#[derive(Default)]
pub struct Alibaba;

impl CloudCsv for Alibaba {
    const NAME: &'static str = "alibaba";
    const LINE_FORM: &'static str = LINE_FORM;
    const LAST_FIELD: &'static str = "timestamp";
    const FIELD_COUNT: usize = 5;
    const DEVICE: &'static str = "device id";

    fn record(f: &mut Fields<'_>) -> Result<CloudRecord, FieldError> {
        let device = f.u64("a device id")?;
        let o = f.req("R or W")?;
        let op = match o {
            b"R" | b"r" => Op::Read,
            b"W" | b"w" => Op::Write,
            _ => return Err(f.bad(o, "R or W")),
        };
        let offset = f.u64("a byte offset")?;
        let len = f.u64("a length in bytes")?;
        let time = f.decimal(1_000, "a timestamp in microseconds")?;
        Ok(CloudRecord {
            time,
            op,
            offset,
            len,
            device,
        })
    }

    fn assumptions() -> Vec<String> {
        vec!["alibaba: offset and length are bytes, timestamp is microseconds; a device is device_id".into()]
    }
}
