//! Tencent cloud block storage (CBS) traces: `Timestamp,Offset,Size,IOType,VolumeID`.
//!
//! Timestamp in seconds (Unix epoch), Offset and Size in 512-byte sectors, IOType `0` read /
//! `1` write, VolumeID the cloud virtual volume.

use crate::cloud::{CloudCsv, CloudRecord};
use crate::lines::{FieldError, Fields};
use crate::text::sectors;
use wattio_core::Op;

pub const LINE_FORM: &str =
    "Timestamp,Offset,Size,IOType,VolumeID (seconds, 512 B sectors, 512 B sectors, 0|1, integer)";

#[derive(Default)]
pub struct Tencent;

impl CloudCsv for Tencent {
    const NAME: &'static str = "tencent";
    const LINE_FORM: &'static str = LINE_FORM;
    const LAST_FIELD: &'static str = "VolumeID";
    const FIELD_COUNT: usize = 5;
    const DEVICE: &'static str = "volume id";

    fn record(f: &mut Fields<'_>) -> Result<CloudRecord, FieldError> {
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
        let device = f.u64("a volume id")?;
        Ok(CloudRecord {
            time,
            op,
            offset: sectors(off, off_col)?,
            len: sectors(size, size_col)?,
            device,
        })
    }

    fn assumptions() -> Vec<String> {
        vec![
            "tencent: Timestamp is seconds (1 s resolution: requests within a second share an arrival, in file order)".into(),
            "tencent: Offset and Size are 512-byte sectors; IOType 0 = read, 1 = write; a device is VolumeID".into(),
        ]
    }
}
