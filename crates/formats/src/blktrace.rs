//! blktrace's binary output: the `NAME.blktrace.CPU` files `blktrace -d /dev/X` writes (one
//! per CPU), or one file of them merged (`blkparse -d FILE`, or `cat`).
//!
//! Each record is a 48-byte `struct blk_io_trace` (Linux `include/uapi/linux/blktrace_api.h`)
//! in the byte order of the machine that traced — magic (`0x656174` << 8 | version 7),
//! sequence, time (ns), sector (512 B), bytes, action, pid, device (kernel `dev_t`: major
//! << 20 | minor), cpu, error, pdu_len — followed by `pdu_len` bytes of payload; or, since
//! Linux and blktrace set up with `BLKTRACESETUP2`, a 64-byte `struct blk_io_trace2`
//! (version 8: the pid before a 64-bit action, 12 bytes of padding). The low 16 bits of
//! `action` are the event (`__BLK_TA_*`: 1 queued … 7 issued to the driver, 8 completed),
//! the bits above them its categories (`BLK_TC_*`: write, flush, discard, FUA, …; version 8
//! adds zone append, zone management and write-zeroes), from which blkparse prints its
//! RWBS flags. Records are read as blkparse reads them, so this
//! reader and blkparse's text read by [`crate::blkparse`] give the same requests: one event
//! kept (`--action`, default D), times counted from the trace's first record (notifications
//! aside), the pid as the
//! stream, `MAJ,MIN` as the device, notify records (process names, messages) and SCSI
//! pass-through (`PC`) records skipped, a remap (`A`) on the device it maps to.

use crate::completions::Event;
use crate::error::Location;
use crate::fiu::{display_major_minor, parse_major_minor};
use crate::lines::{read_full, FieldError, LineError};
use crate::text::{Completion, DevKey, LineFormat, OwnedKey, Parsed, Raw, Units};
use std::io::Read;
use std::path::{Path, PathBuf};
use wattio_core::Op;

pub const LINE_FORM: &str = "a 48-byte struct blk_io_trace (magic 0x65617407, sequence, time ns, \
     sector, bytes, action, pid, device, cpu, error, pdu_len) or a 64-byte struct blk_io_trace2 \
     (magic 0x65617408, a 64-bit action), and pdu_len bytes of payload";

/// `BLK_IO_TRACE_MAGIC`, in the top 24 bits of the magic word.
pub const MAGIC: u32 = 0x6561_7400;
/// The record layout blkparse reads (`SUPPORTED_VERSION`).
pub const VERSION: u8 = 7;
/// Bytes of `struct blk_io_trace`.
pub const HEADER: usize = 48;
/// `BLK_IO_TRACE2_VERSION`: `struct blk_io_trace2`, which Linux writes when blktrace sets up
/// with `BLKTRACESETUP2` (blktrace since its zoned-command support): a 64-bit action whose
/// categories go past bit 15, the pid before it.
pub const VERSION2: u8 = 8;
/// Bytes of `struct blk_io_trace2` (52 of fields, 12 of padding).
pub const HEADER2: usize = 64;

/// Categories (`BLK_TC_*`), `action` >> 16 (16 bits in a version 7 record, more in 8).
const TC_WRITE: u64 = 1 << 1;
const TC_FLUSH: u64 = 1 << 2;
const TC_PC: u64 = 1 << 9;
const TC_NOTIFY: u64 = 1 << 10;
const TC_DISCARD: u64 = 1 << 13;
/// Version 8 only: a zone append (it writes its data), …
const TC_ZONE_APPEND: u64 = 1 << 16;
/// … zone management (reset, reset all, finish, open, close: no data), …
const TC_ZONE_MGMT: u64 = 0b11111 << 17;
/// … and write-zeroes.
const TC_WRITE_ZEROES: u64 = 1 << 22;
const TC_SHIFT: u64 = 16;
/// `__BLK_TA_CGROUP`: a cgroup id precedes the payload; not part of the event number.
const TA_CGROUP: u32 = 1 << 8;
/// `__BLK_TA_REMAP`: the payload names the device the I/O was remapped to.
const TA_REMAP: u32 = 15;

/// blkparse's letter for each event `__BLK_TA_QUEUE` (1) … `__BLK_TA_REMAP` (15).
const LETTERS: &[u8; 15] = b"QMFGSRDCPUTIXBA";

/// Per-CPU files merged at most (a machine's CPUs).
pub const MAX_FILES: usize = 4096;

/// The byte order of a record whose first four bytes are `word`: `Some(true)` big-endian.
fn big_endian(word: [u8; 4]) -> Option<bool> {
    if u32::from_le_bytes(word) & 0xffff_ff00 == MAGIC {
        Some(false)
    } else if u32::from_be_bytes(word) & 0xffff_ff00 == MAGIC {
        Some(true)
    } else {
        None
    }
}

/// Does `head` begin with a blktrace record?
pub fn is_blktrace(head: &[u8]) -> bool {
    head.len() >= 4 && big_endian([head[0], head[1], head[2], head[3]]).is_some()
}

/// A record's version byte (7 or 8 once [`Records`] has checked it), from its magic word.
fn version(rec: &[u8]) -> u8 {
    if big_endian([rec[0], rec[1], rec[2], rec[3]]) == Some(true) {
        rec[3]
    } else {
        rec[0]
    }
}

/// The header's length for a record of `version`.
fn header_len(version: u8) -> usize {
    if version == VERSION2 {
        HEADER2
    } else {
        HEADER
    }
}

/// A record's fixed fields, in the machine's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    /// The header's length: where the payload starts.
    len: usize,
    time: u64,
    sector: u64,
    bytes: u32,
    action: u64,
    pid: u32,
    device: u32,
    error: u16,
    pdu_len: u16,
}

/// The fields of a record that [`Records`] has checked (magic, version, length).
fn header(rec: &[u8]) -> Header {
    let big = big_endian([rec[0], rec[1], rec[2], rec[3]]) == Some(true);
    let u16_at = |o: usize| {
        let b = [rec[o], rec[o + 1]];
        if big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    };
    let u32_at = |o: usize| {
        let b = [rec[o], rec[o + 1], rec[o + 2], rec[o + 3]];
        if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let u64_at = |o: usize| {
        let mut b = [0; 8];
        b.copy_from_slice(&rec[o..o + 8]);
        if big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    };
    if (if big { rec[3] } else { rec[0] }) == VERSION2 {
        // struct blk_io_trace2: pid before a 64-bit action.
        Header {
            len: HEADER2,
            time: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            pid: u32_at(28),
            action: u64_at(32),
            device: u32_at(40),
            error: u16_at(48),
            pdu_len: u16_at(50),
        }
    } else {
        Header {
            len: HEADER,
            time: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            action: u64::from(u32_at(28)),
            pid: u32_at(32),
            device: u32_at(36),
            error: u16_at(44),
            pdu_len: u16_at(46),
        }
    }
}

/// `dev_t` as the kernel packs it for blktrace (20 bits of minor) → the `MAJ << 32 | MIN`
/// key the blkparse text reader uses.
fn device_key(dev: u32) -> u64 {
    ((dev >> 20) as u64) << 32 | (dev & 0xf_ffff) as u64
}

/// The format: one event kept, times from the trace's first record.
pub struct Blktrace {
    action: u8,
    keep_absolute: bool,
    genesis: Option<u64>,
}

impl Blktrace {
    /// `action`: the blkparse letter of the event to keep (Q, D, C, …); `keep_absolute`:
    /// times on the kernel's clock instead of from the trace's first record.
    pub fn new(action: char, keep_absolute: bool) -> Result<Self, String> {
        if !action.is_ascii() || !LETTERS.contains(&(action as u8)) {
            return Err(format!(
                "`{action}` is not a blkparse action letter (one of {})",
                std::str::from_utf8(LETTERS).unwrap_or_default()
            ));
        }
        Ok(Blktrace {
            action: action as u8,
            keep_absolute,
            genesis: None,
        })
    }
}

impl LineFormat for Blktrace {
    fn name(&self) -> &'static str {
        "blktrace"
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        // Rebased here, to the first record of any event (blkparse's origin), not to the
        // first one kept.
        false
    }
    fn parse<'a>(&mut self, rec: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        if rec.len() < HEADER || rec.len() < header_len(version(rec)) {
            return Err(FieldError::new(
                1,
                format!("a record of {} bytes", rec.len()),
                "a 48-byte blk_io_trace or 64-byte blk_io_trace2 header",
            ));
        }
        let h = header(rec);
        let cats = h.action >> TC_SHIFT;
        if cats & TC_NOTIFY != 0 {
            return Ok(Parsed::Skip);
        }
        // blkparse's origin: the first record that is not a notification (a process name is
        // announced with the time the process was first seen, which may be earlier).
        let genesis = *self
            .genesis
            .get_or_insert(if self.keep_absolute { 0 } else { h.time });
        let event = (h.action & 0xffff) as u32 & !TA_CGROUP;
        let letter = match event {
            1..=15 => LETTERS[event as usize - 1],
            // Abort, driver data and anything newer: no letter blkparse keeps.
            _ => return Ok(Parsed::Skip),
        };
        let follows = crate::completions::event(self.action, letter);
        if letter != self.action && follows.is_none() {
            return Ok(Parsed::Skip);
        }
        if cats & TC_PC != 0 {
            if follows.is_some() {
                return Ok(Parsed::Skip);
            }
            return Ok(Parsed::Unsupported(
                "blktrace SCSI pass-through (PC) records (their bytes are a command, not a range)",
            ));
        }
        // Records are in time order per CPU and merged by time, so only a file that is not
        // (a hand-made one) gets here.
        let time = h.time.checked_sub(genesis).ok_or_else(|| {
            FieldError::new(
                9,
                format!(
                    "time {} ns is before the trace's first record ({genesis} ns)",
                    h.time
                ),
                "records in time order",
            )
        })?;
        let mut device = h.device;
        if event == TA_REMAP {
            // struct blk_io_trace_remap, big-endian: device_from, device_to, sector_from.
            let pdu = &rec[h.len..];
            if pdu.len() < 16 {
                return Err(FieldError::new(
                    h.len + 1,
                    format!("a remap record with {} bytes of payload", pdu.len()),
                    "a 16-byte blk_io_trace_remap payload",
                ));
            }
            device = u32::from_be_bytes([pdu[4], pdu[5], pdu[6], pdu[7]]);
        }
        let flush = cats & TC_FLUSH != 0;
        let len = h.bytes as u64;
        // blkparse prints no range for a record of less than one sector, but the sector of a
        // completion, a requeue or a remap all the same.
        let sectors = len >> 9;
        let (offset, len) = if sectors == 0 && !matches!(letter, b'C' | b'R' | b'A') {
            (0, 0)
        } else {
            let len = if sectors == 0 { 0 } else { len };
            let offset = h.sector.checked_mul(512).ok_or_else(|| {
                FieldError::new(
                    17,
                    format!("{} sectors overflow a 64-bit byte offset", h.sector),
                    "a sector below 2^55",
                )
            })?;
            (offset, len)
        };
        let op = if cats & TC_DISCARD != 0 {
            Op::Discard
        } else if cats & TC_ZONE_MGMT != 0 {
            if follows.is_some() {
                return Ok(Parsed::Skip);
            }
            return Ok(Parsed::Unsupported(
                "blktrace zone management commands (RWBS ZR, ZRA, ZF, ZO, ZC: no data)",
            ));
        } else if cats & (TC_WRITE | TC_ZONE_APPEND | TC_WRITE_ZEROES) != 0 {
            // A zone append writes its data; a write-zeroes writes zeros over its range
            // (wattio's device models have no cheaper way to do it).

            if len == 0 && flush {
                Op::Flush
            } else {
                Op::Write
            }
        } else if h.bytes > 0 {
            Op::Read
        } else if flush {
            Op::Flush
        } else if follows.is_some() {
            // Its request was counted as unsupported when it was kept.
            return Ok(Parsed::Skip);
        } else {
            return Ok(Parsed::Unsupported(
                "blktrace requests with no data and no flush (RWBS N)",
            ));
        };
        if let Some(kind) = follows {
            return Ok(Parsed::Completion(Completion {
                time,
                op,
                offset,
                len,
                dev: DevKey::Num(device_key(device)),
                failed: kind == Event::Completed && h.error != 0,
                kind,
            }));
        }
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev: DevKey::Num(device_key(device)),
            stream: h.pid,
            measured: None,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        vec![
            format!(
                "blktrace: kept event {} only (Q queued, D issued to the driver, C completed)",
                self.action as char
            ),
            if self.keep_absolute {
                "blktrace: times are the kernel's clock in ns (kept absolute)".into()
            } else {
                "blktrace: times count from the trace's first record, as blkparse prints them"
                    .into()
            },
            "blktrace: sectors are 512 bytes; a record of less than one sector has no range (a completion keeps its sector)".into(),
            "blktrace: discard, write, read and flush from the record's categories as blkparse's RWBS; a zone append or write-zeroes (version 8 records) = write".into(),
            "blktrace: the pid is kept as the stream; a device is MAJ,MIN (a remap: the device it maps to)".into(),
        ]
    }
    fn pairs_completions(&self) -> bool {
        crate::completions::pairs(self.action)
    }
    fn kept_event(&self) -> char {
        self.action as char
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        parse_major_minor(sel)
    }
    fn display_key(&self, k: &OwnedKey) -> String {
        display_major_minor(k)
    }
}

/// An input's next record with its time, `None` at its end; or why it cannot be read (what
/// is wrong, what was expected).
type ReadAhead = Result<Option<(u64, Vec<u8>)>, (String, String)>;

/// One input of [`Records`]: a per-CPU file or a stream.
struct Input {
    name: String,
    r: Box<dyn Read + Send>,
    /// Where the next record begins.
    offset: u64,
    /// The next record and its time, read ahead for the merge; `None` at the end.
    next: ReadAhead,
}

impl Input {
    fn new(name: String, r: Box<dyn Read + Send>) -> Input {
        let mut i = Input {
            name,
            r,
            offset: 0,
            next: Ok(None),
        };
        i.next = i.read(Vec::new());
        i
    }

    /// The record at `offset`, into `buf` (reused).
    fn read(&mut self, mut buf: Vec<u8>) -> ReadAhead {
        let io = |e: std::io::Error| (format!("I/O error: {e}"), "a readable file".to_string());
        buf.resize(HEADER, 0);
        let n = read_full(&mut self.r, &mut buf).map_err(io)?;
        if n == 0 {
            return Ok(None);
        }
        let word = [buf[0], buf[1], buf[2], buf[3]];
        let Some(big) = big_endian(word) else {
            return Err((
                format!(
                    "no blktrace record here (magic {:02x} {:02x} {:02x} {:02x})",
                    word[0], word[1], word[2], word[3]
                ),
                "a record's magic 0x656174 and version (a blktrace binary file; blkparse's \
                 text output is --format blkparse)"
                    .into(),
            ));
        };
        if n < HEADER {
            return Err((
                format!("the file ends {n} bytes into a record"),
                "a 48-byte blk_io_trace header".into(),
            ));
        }
        let version = if big { word[3] } else { word[0] };
        if version != VERSION && version != VERSION2 {
            return Err((
                format!("record version {version}"),
                format!(
                    "version {VERSION} (struct blk_io_trace) or {VERSION2} (struct \
                     blk_io_trace2), the layouts blktrace writes"
                ),
            ));
        }
        if version == VERSION2 {
            buf.resize(HEADER2, 0);
            let n = read_full(&mut self.r, &mut buf[HEADER..]).map_err(io)?;
            if n < HEADER2 - HEADER {
                return Err((
                    format!("the file ends {} bytes into a record", HEADER + n),
                    "a 64-byte blk_io_trace2 header".into(),
                ));
            }
        }
        let h = header(&buf);
        let pdu = h.pdu_len as usize;
        buf.resize(h.len + pdu, 0);
        let n = read_full(&mut self.r, &mut buf[h.len..]).map_err(io)?;
        if n < pdu {
            return Err((
                format!("the file ends {n} bytes into a {pdu}-byte payload"),
                "the payload its header announces (pdu_len)".into(),
            ));
        }
        Ok(Some((h.time, buf)))
    }
}

/// The records of one or more blktrace inputs (the per-CPU files of one trace), merged in
/// time order as blkparse merges them (ties: the lower-numbered input first).
pub struct Records {
    inputs: Vec<Input>,
    /// The record handed out last, and its input and offset.
    cur: Vec<u8>,
    at: usize,
    at_offset: u64,
}

impl Records {
    /// Records from one stream.
    pub fn from_reader(r: Box<dyn Read + Send>, name: String) -> Records {
        Records::new(vec![Input::new(name, r)])
    }

    /// Records from files, merged.
    pub fn open(paths: &[PathBuf]) -> std::io::Result<Records> {
        let mut inputs = Vec::with_capacity(paths.len());
        // About 1 MiB of buffers in all (at least 4 KiB each: 16 MiB for MAX_FILES).
        let cap = ((1usize << 20) / paths.len().max(1)).clamp(4 << 10, 64 << 10);
        for p in paths {
            // Per-CPU files compressed one by one (`gzip sda.blktrace.*`) are read as they are.
            let f = crate::compressed::open(p)?.reader;
            let r = Box::new(std::io::BufReader::with_capacity(cap, f));
            inputs.push(Input::new(p.display().to_string(), r));
        }
        Ok(Records::new(inputs))
    }

    fn new(inputs: Vec<Input>) -> Records {
        Records {
            inputs,
            cur: Vec::new(),
            at: 0,
            at_offset: 0,
        }
    }
}

impl Units for Records {
    fn next_unit(&mut self) -> Result<Option<&[u8]>, LineError> {
        // An input that failed, first of all (nothing after its damage can be found);
        // else the one whose next record is earliest.
        let failed = self.inputs.iter().position(|i| i.next.is_err());
        let earliest = || {
            let mut best: Option<(usize, u64)> = None;
            for (i, input) in self.inputs.iter().enumerate() {
                if let Ok(Some((t, _))) = &input.next {
                    if best.is_none_or(|(_, b)| *t < b) {
                        best = Some((i, *t));
                    }
                }
            }
            best.map(|(i, _)| i)
        };
        let Some(i) = failed.or_else(earliest) else {
            return Ok(None);
        };
        self.at = i;
        let input = &mut self.inputs[i];
        self.at_offset = input.offset;
        let (_, rec) = match std::mem::replace(&mut input.next, Ok(None)) {
            Err((message, expected)) => return Err(LineError::Record { message, expected }),
            Ok(r) => r.expect("an input with a record"),
        };
        input.offset += rec.len() as u64;
        let spare = std::mem::replace(&mut self.cur, rec);
        input.next = input.read(spare);
        Ok(Some(&self.cur))
    }
    fn location(&self, column: u64) -> Location {
        Location::Byte(self.at_offset + column.saturating_sub(1))
    }
    fn next_location(&self) -> Location {
        Location::Byte(self.inputs.get(self.at).map_or(0, |i| i.offset))
    }
    fn file(&self) -> Option<&str> {
        (self.inputs.len() > 1).then(|| self.inputs[self.at].name.as_str())
    }
}

/// The per-CPU files of the trace `path` belongs to: for `DIR/NAME.blktrace.N`, every
/// `NAME.blktrace.<number>` in `DIR`, by number; any other path alone.
pub fn cpu_files(path: &Path) -> Result<Vec<PathBuf>, String> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Ok(vec![path.to_path_buf()]);
    };
    let cpu_of = |n: &str, base: &str| -> Option<u64> {
        let rest = n.strip_prefix(base)?.strip_prefix(".blktrace.")?;
        // Compressed one by one as they are often shipped: `sda.blktrace.0.gz`.
        let rest = [".gz", ".zst"]
            .iter()
            .find_map(|x| rest.strip_suffix(x))
            .unwrap_or(rest);
        (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            .then(|| rest.parse().ok())
            .flatten()
    };
    let Some(base) = name
        .rsplit_once(".blktrace.")
        .map(|(b, _)| b)
        .filter(|b| cpu_of(name, b).is_some())
    else {
        return Ok(vec![path.to_path_buf()]);
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<(u64, PathBuf)> = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let n = e.file_name();
        if let Some(cpu) = n.to_str().and_then(|n| cpu_of(n, base)) {
            if files.len() == MAX_FILES {
                return Err(format!(
                    "more than {MAX_FILES} files {base}.blktrace.N in {}",
                    dir.display()
                ));
            }
            files.push((cpu, e.path()));
        }
    }
    files.sort();
    Ok(files.into_iter().map(|(_, p)| p).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The categories as a version 7 record's 32-bit action holds them (these shadow the
    // 64-bit ones of the glob import).
    const TC_SHIFT: u32 = super::TC_SHIFT as u32;
    const TC_WRITE: u32 = super::TC_WRITE as u32;
    const TC_FLUSH: u32 = super::TC_FLUSH as u32;
    const TC_PC: u32 = super::TC_PC as u32;
    const TC_NOTIFY: u32 = super::TC_NOTIFY as u32;
    const TC_DISCARD: u32 = super::TC_DISCARD as u32;

    /// A record: little-endian unless `big`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        big: bool,
        time: u64,
        sector: u64,
        bytes: u32,
        action: u32,
        pid: u32,
        device: u32,
        pdu: &[u8],
    ) -> Vec<u8> {
        let mut v = Vec::new();
        let mut put = |b: &[u8]| v.extend_from_slice(b);
        macro_rules! w {
            ($x:expr) => {
                if big {
                    put(&$x.to_be_bytes())
                } else {
                    put(&$x.to_le_bytes())
                }
            };
        }
        w!(MAGIC | VERSION as u32);
        w!(1u32);
        w!(time);
        w!(sector);
        w!(bytes);
        w!(action);
        w!(pid);
        w!(device);
        w!(0u32);
        w!(0u16);
        w!(pdu.len() as u16);
        v.extend_from_slice(pdu);
        v
    }

    fn parse_all(data: &[u8], action: char) -> Vec<Result<Option<Raw<'static>>, String>> {
        let mut f = Blktrace::new(action, false).unwrap();
        let mut recs =
            Records::from_reader(Box::new(std::io::Cursor::new(data.to_vec())), "t".into());
        let mut out = Vec::new();
        loop {
            match recs.next_unit() {
                Ok(None) => break,
                Ok(Some(u)) => {
                    let u: &'static [u8] = Box::leak(u.to_vec().into_boxed_slice());
                    out.push(match f.parse(u) {
                        Ok(Parsed::Record(r)) => Ok(Some(r)),
                        Ok(_) => Ok(None),
                        Err(e) => Err(e.message),
                    });
                }
                Err(LineError::Record { message, .. }) => {
                    out.push(Err(message));
                    break;
                }
                Err(_) => unreachable!(),
            }
        }
        out
    }

    const ISSUE_WRITE_SYNC: u32 = 7 | (TC_WRITE | 1 << 3 | 1 << 6) << TC_SHIFT;

    #[test]
    fn a_record_in_either_byte_order_gives_the_same_request() {
        // 8,16 = major 8 << 20 | minor 16; sector 274432, 4 KiB, a sync write issued.
        let dev = 8 << 20 | 16;
        for big in [false, true] {
            let data = record(big, 1_000, 274_432, 4096, ISSUE_WRITE_SYNC, 5529, dev, &[]);
            assert_eq!(data.len(), HEADER);
            let got = parse_all(&data, 'D');
            let r = got[0].clone().unwrap().unwrap();
            assert_eq!(r.time, 0, "the first record is the origin");
            assert_eq!((r.op, r.offset, r.len), (Op::Write, 274_432 * 512, 4096));
            assert_eq!(r.dev, DevKey::Num(8 << 32 | 16));
            assert_eq!(r.stream, 5529);
        }
    }

    #[test]
    fn events_and_categories_map_as_blkparse_prints_them() {
        let dev = 8 << 20;
        let q_read = 1 | (1 | 1 << 4) << TC_SHIFT;
        let flush = 7 | TC_FLUSH << TC_SHIFT;
        let discard = 7 | (TC_DISCARD | TC_WRITE) << TC_SHIFT;
        let none = 7;
        let notify = TC_NOTIFY << TC_SHIFT; // a process name
        let mut data = Vec::new();
        data.extend(record(false, 50, 0, 0, notify, 1, dev, b"fio\0"));
        data.extend(record(false, 100, 8, 512, q_read, 1, dev, &[]));
        data.extend(record(false, 200, 8, 512, 7 | 1 << 22, 1, dev, &[]));
        data.extend(record(false, 300, 0, 0, flush, 2, dev, &[]));
        data.extend(record(false, 400, 64, 8192, discard, 3, dev, &[]));
        data.extend(record(false, 500, 0, 0, none, 4, dev, &[]));
        // A cgroup-tagged issue: the flag is not part of the event number.
        data.extend(record(
            false,
            600,
            16,
            1024,
            7 | TA_CGROUP | 1 << 16,
            5,
            dev,
            &[0; 8],
        ));
        let got = parse_all(&data, 'D');
        let recs: Vec<_> = got.iter().filter_map(|r| r.clone().unwrap()).collect();
        let ops: Vec<_> = recs
            .iter()
            .map(|r| (r.time, r.op, r.offset, r.len))
            .collect();
        assert_eq!(
            ops,
            vec![
                (100, Op::Read, 8 * 512, 512),
                (200, Op::Flush, 0, 0),
                (300, Op::Discard, 64 * 512, 8192),
                (500, Op::Read, 16 * 512, 1024),
            ]
        );
        // Kept Q instead: only the queued read.
        let q: Vec<_> = parse_all(&data, 'Q')
            .into_iter()
            .filter_map(|r| r.unwrap())
            .collect();
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].time, q[0].op), (0, Op::Read));
    }

    #[test]
    fn pass_through_and_empty_requests_are_counted_not_read() {
        let mut f = Blktrace::new('D', false).unwrap();
        // A SCSI pass-through issue: its bytes are a command's, not a range.
        let pc = record(
            false,
            1,
            0,
            12,
            7 | (TC_PC | 1 << 6) << TC_SHIFT,
            1,
            0,
            &[0x12; 6],
        );
        assert!(matches!(f.parse(&pc), Ok(Parsed::Unsupported(w)) if w.contains("PC")));
        // No data, no flush: blkparse's RWBS N.
        let n = record(false, 2, 0, 0, 7, 1, 0, &[]);
        assert!(matches!(f.parse(&n), Ok(Parsed::Unsupported(w)) if w.contains("RWBS N")));
        // Abort and driver data have no letter: skipped.
        for event in [16, 17] {
            let r = record(false, 3, 8, 512, event, 1, 0, &[]);
            assert!(matches!(f.parse(&r), Ok(Parsed::Skip)));
        }
        assert!(Blktrace::new('Z', false).is_err());
    }

    #[test]
    fn a_remap_is_on_the_device_it_maps_to() {
        let remap = TA_REMAP | (1 | 1 << 4) << TC_SHIFT;
        let mut pdu = Vec::new();
        pdu.extend((8u32 << 20 | 1).to_be_bytes()); // from 8,1
        pdu.extend((253u32 << 20).to_be_bytes()); // to 253,0
        pdu.extend(2048u64.to_be_bytes());
        let data = record(false, 5, 4096, 4096, remap, 9, 8 << 20 | 1, &pdu);
        let r = parse_all(&data, 'A')[0].clone().unwrap().unwrap();
        assert_eq!(r.dev, DevKey::Num(253 << 32));
        let short = record(false, 5, 4096, 4096, remap, 9, 8 << 20 | 1, &pdu[..8]);
        assert_eq!(
            parse_all(&short, 'A')[0].clone().unwrap_err(),
            "a remap record with 8 bytes of payload"
        );
    }

    #[test]
    fn damaged_input_is_refused_with_what_was_expected() {
        let good = record(false, 1, 8, 512, ISSUE_WRITE_SYNC, 1, 0, &[]);
        // Truncated in the header, in the payload; a bad magic; another version.
        let got = parse_all(&good[..30], 'D');
        assert_eq!(
            got[0].clone().unwrap_err(),
            "the file ends 30 bytes into a record"
        );
        let with_pdu = record(false, 1, 8, 512, ISSUE_WRITE_SYNC, 1, 0, &[1, 2, 3, 4]);
        let got = parse_all(&with_pdu[..HEADER + 2], 'D');
        assert_eq!(
            got[0].clone().unwrap_err(),
            "the file ends 2 bytes into a 4-byte payload"
        );
        let got = parse_all(b"8,16 1 1 0.000000000 5529 D WS 8 + 8 [fio]\n", 'D');
        assert!(got[0]
            .clone()
            .unwrap_err()
            .starts_with("no blktrace record here"));
        let mut v6 = good.clone();
        v6[0] = 6;
        assert_eq!(
            parse_all(&v6, 'D')[0].clone().unwrap_err(),
            "record version 6"
        );
        // Version 8's header is 64 bytes: 50 of them are a record cut short.
        let mut v8 = good[..HEADER].to_vec();
        v8[0] = 8;
        v8.extend([0, 0]);
        assert_eq!(
            parse_all(&v8, 'D')[0].clone().unwrap_err(),
            "the file ends 50 bytes into a record"
        );
        // Everything before the damage is read.
        let mut two = good.clone();
        two.extend(&good[..10]);
        let got = parse_all(&two, 'D');
        assert!(got[0].clone().unwrap().is_some());
        assert!(got[1].is_err());
    }

    #[test]
    fn per_cpu_files_merge_by_time_and_are_found_from_any_of_them() {
        let dir = std::env::temp_dir().join(format!("wattio-blktrace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let issue = |t: u64, sector: u64| record(false, t, sector, 512, 7 | 1 << 16, 1, 0, &[]);
        // CPU 0: t = 10, 30; CPU 1: 20, 40; CPU 10 (sorted by number, not name): 25.
        std::fs::write(
            dir.join("sda.blktrace.0"),
            [issue(10, 1), issue(30, 3)].concat(),
        )
        .unwrap();
        std::fs::write(
            dir.join("sda.blktrace.1"),
            [issue(20, 2), issue(40, 4)].concat(),
        )
        .unwrap();
        std::fs::write(dir.join("sda.blktrace.10"), issue(25, 9)).unwrap();
        std::fs::write(dir.join("sdb.blktrace.0"), issue(1, 7)).unwrap();
        std::fs::write(dir.join("sda.blktrace.x"), b"not a cpu").unwrap();
        let files = cpu_files(&dir.join("sda.blktrace.1")).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            ["sda.blktrace.0", "sda.blktrace.1", "sda.blktrace.10"]
        );
        let mut recs = Records::open(&files).unwrap();
        let mut f = Blktrace::new('D', false).unwrap();
        let mut sectors = Vec::new();
        while let Some(u) = recs.next_unit().unwrap() {
            if let Ok(Parsed::Record(r)) = f.parse(u) {
                sectors.push((r.time, r.offset / 512));
            }
        }
        assert_eq!(sectors, [(0, 1), (10, 2), (15, 9), (20, 3), (30, 4)]);
        // The same files compressed one by one are found and merged the same way.
        for (i, name) in ["sda.blktrace.0", "sda.blktrace.1", "sda.blktrace.10"]
            .iter()
            .enumerate()
        {
            let raw = std::fs::read(dir.join(name)).unwrap();
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut e, &raw).unwrap();
            let gz = dir.join(format!("sdc.blktrace.{}.gz", [0, 1, 10][i]));
            std::fs::write(gz, e.finish().unwrap()).unwrap();
        }
        let gz_files = cpu_files(&dir.join("sdc.blktrace.10.gz")).unwrap();
        assert_eq!(gz_files.len(), 3);
        let mut recs = Records::open(&gz_files).unwrap();
        let mut f = Blktrace::new('D', false).unwrap();
        let mut again = Vec::new();
        while let Some(u) = recs.next_unit().unwrap() {
            if let Ok(Parsed::Record(r)) = f.parse(u) {
                again.push((r.time, r.offset / 512));
            }
        }
        assert_eq!(again, sectors);
        // Another name alone.
        let other = dir.join("merged.bin");
        assert_eq!(cpu_files(&other).unwrap(), vec![other]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
