//! HP Labs SRT traces: the disk I/O traces HP Labs recorded on HP-UX and released for
//! research (hplajw, cello, snake), what DiskSim reads as its `hpl` format.
//!
//! The layout is DiskSim 4.0's (`disksim_hptrace.h`, taken from HP's TraceAccess code, and
//! its `hpl` reader in `disksim_iotrace.c`): a text header (`$$TR_IOREC-1.3 …`, with the
//! trace date and a description of every traced disk) ending with a form feed (0x0C), then
//! records of big-endian 32-bit fields: `size` (bytes, the record's own included), `id`
//! (version << 16 | type), `sec`, `usec` (when the request was enqueued, from the trace's
//! start); for an I/O record (type 1, `HPL_SHORTIO`; 4, `HPL_SUSPECTIO`) then `start` and
//! `stop` (µs after the enqueue: dispatch to the disk and completion), the size in bytes,
//! the sector, the HP-UX `dev_t`, the driver type, the cylinder, the buffer flags (`B_READ`
//! = bit 0), where the request came from, and with version 4 the queue length.
//!
//! Sectors are the disk's own: the header gives each disk's `sectorsize` (256 bytes on the
//! HP 335H drives of hplajw), and a sector number is counted from the start of the disk,
//! whatever its section (the header's section table: hplajw's root file system starts at
//! sector 171,760 and its requests at 171,792). The disk is the minor number's second byte
//! (`dev_t >> 8 & 0xff`), as DiskSim takes it; its low byte is the section.

use crate::lines::{read_full, FieldError, LineError};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw, Units};
use crate::{FormatError, Location};
use std::collections::BTreeMap;
use std::io::Read;
use wattio_core::{Nanos, Op};

/// The longest header read before its form feed must have come.
pub const MAX_HEADER: usize = 1 << 20;
/// The longest record accepted (an I/O record is 52 to 60 bytes).
pub const MAX_RECORD: u32 = 4096;
/// Bytes of an I/O record up to its flags and origin (13 fields).
const IO_RECORD: usize = 52;
/// The sector size taken for a disk the header does not describe (DiskSim's: it reads
/// sectors as 512-byte blocks).
const DEFAULT_SECTOR: u64 = 512;
const HPL_SHORTIO: u32 = 1;
const HPL_SUSPECTIO: u32 = 4;
const HPL_READ: u32 = 0x1;

pub const LINE_FORM: &str = "an HP SRT record: big-endian u32 size, id (version << 16 | type), sec, usec, start, stop, bytes, sector, dev_t, driver type, cylinder, flags, info[, queue length]";

/// What the header says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    /// `$$TR_IOREC-1.3`, the header's first word.
    pub magic: String,
    /// `tracedate`, as written.
    pub tracedate: Option<String>,
    /// Bytes per sector by disk number.
    pub sector_bytes: BTreeMap<u8, u64>,
    /// Header bytes, the form feed included: where the records begin.
    pub len: u64,
}

/// The value after `key` and `=` on `line` (trimmed of spaces, `;`, `,` and quotes).
fn value_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(key)?;
    let rest = rest.trim_start().strip_prefix('=')?;
    Some(
        rest.trim()
            .trim_end_matches([';', ','])
            .trim()
            .trim_matches('"'),
    )
}

/// Reads the header's text: the first word, the trace date, and the `sectorsize` of each
/// disk of the `disks = { N -> { … } … }` table (disk entries one level inside it, their
/// keys one level further: an adaptor's `1 -> { … }` or a section's, deeper, are not disks).
pub fn parse_header(text: &str) -> Result<Header, String> {
    let mut h = Header {
        magic: text.split_whitespace().next().unwrap_or("").to_string(),
        ..Header::default()
    };
    let mut depth: Option<i64> = None; // inside `disks`: braces deep
    let mut disk: Option<u8> = None;
    for (i, line) in text.lines().enumerate() {
        let at = i + 1;
        let t = line.trim();
        match depth {
            None => {
                if let Some(v) = value_of(t, "tracedate") {
                    h.tracedate = Some(v.to_string());
                }
                if value_of(t, "disks").is_some_and(|v| v.starts_with('{')) {
                    depth = Some(0);
                }
            }
            Some(1) => {
                if let Some((n, rest)) = t.split_once("->") {
                    if rest.trim_start().starts_with('{') {
                        let n: u8 = n.trim().parse().map_err(|_| {
                            format!(
                                "header line {at}: disk `{}`: expected a disk number 0 to 255",
                                n.trim()
                            )
                        })?;
                        disk = Some(n);
                    }
                }
            }
            Some(2) => {
                if let (Some(d), Some(v)) = (disk, value_of(t, "sectorsize")) {
                    let bytes = v
                        .parse::<u64>()
                        .ok()
                        .filter(|b| (1..=1 << 20).contains(b))
                        .ok_or_else(|| {
                            format!("header line {at}: sectorsize `{v}` of disk {d}: expected bytes, 1 to 1048576")
                        })?;
                    h.sector_bytes.insert(d, bytes);
                }
            }
            Some(_) => {}
        }
        if let Some(d) = depth.as_mut() {
            for c in line.chars() {
                match c {
                    '{' => *d += 1,
                    '}' => *d -= 1,
                    _ => {}
                }
            }
            if *d <= 0 && line.contains('}') {
                depth = None;
                disk = None;
            }
        }
    }
    Ok(h)
}

/// The records of one SRT stream, cut out one at a time after the header.
pub struct Records {
    r: Box<dyn Read + Send>,
    header: Header,
    cur: Vec<u8>,
    /// Byte offset of the record last returned, and of the next one.
    at: u64,
    next: u64,
}

impl Records {
    /// Reads the header (up to its form feed, at most [`MAX_HEADER`] bytes).
    pub fn from_reader(mut r: Box<dyn Read + Send>, name: &str) -> Result<Records, FormatError> {
        let mut head = Vec::new();
        let mut byte = [0u8; 4096];
        let end = loop {
            let n = r.read(&mut byte).map_err(|e| FormatError::io(name, &e))?;
            if n == 0 {
                return Err(FormatError::new(
                    name,
                    Location::Byte(head.len() as u64),
                    "the end of the file before the header's form feed",
                )
                .with_expected("an HP SRT header (`$$TR_IOREC…` text) ending with a form feed (0x0C), then the records"));
            }
            let from = head.len();
            head.extend_from_slice(&byte[..n]);
            if let Some(p) = head[from..].iter().position(|&b| b == 0x0C) {
                break from + p;
            }
            if head.len() > MAX_HEADER {
                return Err(FormatError::new(
                    name,
                    Location::Byte(MAX_HEADER as u64),
                    format!("no form feed ending the header in its first {MAX_HEADER} bytes"),
                )
                .with_expected("an HP SRT header (`$$TR_IOREC…` text) ending with a form feed (0x0C), then the records"));
            }
        };
        // The header is ASCII; a stray byte is read as Latin-1 rather than refused.
        let text: String = head[..end].iter().map(|&b| b as char).collect();
        let mut header = parse_header(&text).map_err(|m| FormatError::file(name, m))?;
        header.len = end as u64 + 1;
        // Bytes read past the form feed are the first records'.
        let rest = head.split_off(end + 1);
        let r: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(rest).chain(r));
        Ok(Records {
            r,
            cur: Vec::with_capacity(64),
            at: header.len,
            next: header.len,
            header,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }
}

impl Units for Records {
    fn next_unit(&mut self) -> Result<Option<&[u8]>, LineError> {
        let mut size = [0u8; 4];
        let n = read_full(&mut self.r, &mut size).map_err(LineError::Io)?;
        if n == 0 {
            return Ok(None);
        }
        if n < 4 {
            return Err(LineError::Record {
                message: format!("a record cut short: {n} of its 4 size bytes"),
                expected: "whole records to the end of the file".into(),
            });
        }
        let len = u32::from_be_bytes(size);
        if !(16..=MAX_RECORD).contains(&len) || len % 4 != 0 {
            return Err(LineError::Record {
                message: format!("a record of {len} bytes"),
                expected: format!(
                    "a record size of 16 to {MAX_RECORD} bytes, a multiple of 4 (big-endian)"
                ),
            });
        }
        self.cur.clear();
        self.cur.extend_from_slice(&size);
        self.cur.resize(len as usize, 0);
        let got = read_full(&mut self.r, &mut self.cur[4..]).map_err(LineError::Io)?;
        if got < len as usize - 4 {
            return Err(LineError::Record {
                message: format!("a record cut short: {} of its {len} bytes", got + 4),
                expected: "whole records to the end of the file".into(),
            });
        }
        self.at = self.next;
        self.next += len as u64;
        Ok(Some(&self.cur))
    }

    fn location(&self, column: u64) -> Location {
        Location::Byte(self.at + column.saturating_sub(1))
    }

    fn next_location(&self) -> Location {
        Location::Byte(self.next)
    }
}

/// The record format, with what the header said of the disks.
pub struct Srt {
    header: Header,
}

impl Srt {
    pub fn new(header: &Header) -> Srt {
        Srt {
            header: header.clone(),
        }
    }
}

fn field(rec: &[u8], i: usize) -> u32 {
    u32::from_be_bytes(rec[4 * i..4 * i + 4].try_into().expect("4 bytes"))
}

impl LineFormat for Srt {
    fn name(&self) -> &'static str {
        "srt"
    }

    fn line_form(&self) -> &'static str {
        LINE_FORM
    }

    fn absolute_clock(&self) -> bool {
        // `sec` counts from the trace's start (the header's tracedate).
        false
    }

    fn parse<'a>(&mut self, rec: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let kind = field(rec, 1) & 0xffff;
        match kind {
            HPL_SHORTIO => {}
            // DiskSim's reader passes over suspect I/Os too.
            HPL_SUSPECTIO => return Ok(Parsed::Unsupported("suspect I/O records (HPL_SUSPECTIO)")),
            _ => return Ok(Parsed::Unsupported("records other than I/Os")),
        }
        if rec.len() < IO_RECORD {
            return Err(FieldError::new(
                0,
                format!("an I/O record of {} bytes", rec.len()),
                format!("at least {IO_RECORD} bytes: 13 big-endian 32-bit fields"),
            ));
        }
        let (sec, usec) = (field(rec, 2), field(rec, 3));
        if usec >= 1_000_000 {
            return Err(FieldError::new(
                12,
                format!("usec {usec}"),
                "microseconds below 1000000",
            ));
        }
        let stop = field(rec, 5);
        let bytes = field(rec, 6);
        if bytes == 0 {
            return Ok(Parsed::Unsupported("I/Os of no bytes"));
        }
        let disk = (field(rec, 8) >> 8 & 0xff) as u8;
        let unit = self
            .header
            .sector_bytes
            .get(&disk)
            .copied()
            .unwrap_or(DEFAULT_SECTOR);
        let time: Nanos = sec as u64 * 1_000_000_000 + usec as u64 * 1_000;
        Ok(Parsed::Record(Raw {
            time,
            op: if field(rec, 11) & HPL_READ != 0 {
                Op::Read
            } else {
                Op::Write
            },
            offset: field(rec, 7) as u64 * unit,
            len: bytes as u64,
            dev: DevKey::Num(disk as u64),
            stream: 0,
            measured: Some(stop as u64 * 1_000),
        }))
    }

    fn assumptions(&self) -> Vec<String> {
        let h = &self.header;
        let mut v = vec![format!(
            "srt: HP Labs SRT trace `{}`{}: big-endian records as DiskSim's hpl reader and HP's TraceAccess define them",
            h.magic,
            h.tracedate
                .as_ref()
                .map(|d| format!(" traced {d}"))
                .unwrap_or_default()
        )];
        v.push("srt: arrival = the record's enqueue time (sec, usec from the trace's start); measured = its completion (stop, µs after the enqueue: the driver's queue and the disk)".into());
        let sizes: Vec<String> = h
            .sector_bytes
            .iter()
            .map(|(d, b)| format!("disk {d}: {b} B"))
            .collect();
        v.push(format!(
            "srt: device = the disk of the HP-UX dev_t (minor >> 8 & 0xff, as DiskSim reads it); sectors counted from the disk's start, of the header's sectorsize ({}; {DEFAULT_SECTOR} B for a disk it does not describe)",
            if sizes.is_empty() { "none given".to_string() } else { sizes.join(", ") }
        ));
        v.push("srt: flags bit 0 (B_READ) = read, else write; the other flags (B_ASYNC, …) are not kept; suspect I/Os (type 4) are passed over, as DiskSim does".into());
        v
    }

    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        sel.trim()
            .parse::<u8>()
            .map(|d| OwnedKey::Num(d as u64))
            .map_err(|_| "expected a disk number, 0 to 255".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "$$TR_IOREC-1.3 (IOAdaptor Upgrade Version)\nversion      = 1.3;\ntracedate    = \"Sat May 30 00:03:06 1992\";\ndisks        = {\n\t\t  0 -> {\n\t\t\tnspt        = 113,\n\t\t\tadaptor = 1 -> { hp_ib , 1.2 , 250 },\n\t\t\tsectorsize  = 256,\n\t\t\tsections   = {\n\t\t\t\t     8 -> {\n\t\t\t\t\t\"/\",\n\t\t\t\t\tsectorsize = 9\n\t\t\t\t\t}\n\t\t\t\t    }\n\t\t\t},\n\t\t  3 -> {\n\t\t\tsectorsize  = 1024,\n\t\t\t}\n\t\t};\n";

    #[test]
    fn header_sector_sizes_by_disk_and_not_by_section() {
        let h = parse_header(HEADER).unwrap();
        assert_eq!(h.magic, "$$TR_IOREC-1.3");
        assert_eq!(h.tracedate.as_deref(), Some("Sat May 30 00:03:06 1992"));
        assert_eq!(
            h.sector_bytes.into_iter().collect::<Vec<_>>(),
            vec![(0, 256), (3, 1024)]
        );
        let e = parse_header("disks = {\n x -> {\n }\n}\n").unwrap_err();
        assert!(e.starts_with("header line 2: disk `x`"), "{e}");
        let e = parse_header("disks = {\n 0 -> {\n sectorsize = 0,\n }\n}\n").unwrap_err();
        assert!(e.contains("sectorsize `0` of disk 0"), "{e}");
    }
}
