//! What the cloud block-trace formats share (Alibaba, Tencent CBS): one CSV record per line,
//! a Unix-epoch clock, a numeric device or volume id, no measured latency, no stream. A
//! format only says how to read its fields ([`CloudCsv`]); [`Cloud`] does the rest.

use crate::lines::{FieldError, Fields};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::{Nanos, Op};

/// One record of a cloud trace, normalized to ns and bytes.
pub struct CloudRecord {
    pub time: Nanos,
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub device: u64,
}

/// A cloud trace format: its fields, in its order and units.
pub trait CloudCsv: Send {
    const NAME: &'static str;
    const LINE_FORM: &'static str;
    /// The last field's name, for "end of line after …".
    const LAST_FIELD: &'static str;
    const FIELD_COUNT: usize;
    /// What a device is called in this format ("device id", "volume id").
    const DEVICE: &'static str;
    /// Reads the fields of one non-empty line (not checking for extra fields).
    fn record(f: &mut Fields<'_>) -> Result<CloudRecord, FieldError>;
    fn assumptions() -> Vec<String>;
}

/// The [`LineFormat`] of a cloud trace.
#[derive(Default)]
pub struct Cloud<T>(pub T);

impl<T: CloudCsv> LineFormat for Cloud<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }
    fn line_form(&self) -> &'static str {
        T::LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        true
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        if line.is_empty() {
            return Ok(Parsed::Skip);
        }
        let mut f = Fields::csv(line);
        let r = T::record(&mut f)?;
        if let Some(x) = f.next_field() {
            let expected = format!(
                "end of line after {} ({} fields)",
                T::LAST_FIELD,
                T::FIELD_COUNT
            );
            return Err(f.bad(x, &expected));
        }
        Ok(Parsed::Record(Raw {
            time: r.time,
            op: r.op,
            offset: r.offset,
            len: r.len,
            dev: DevKey::Num(r.device),
            stream: 0,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        T::assumptions()
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        sel.trim()
            .parse()
            .map(OwnedKey::Num)
            .map_err(|_| format!("`{sel}` is not a {}", T::DEVICE))
    }
}
