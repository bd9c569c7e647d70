//! The binary stream the `wattio-mem` Valgrind tool writes, one file per process
//! (`tools/valgrind/wattio-mem/wm_main.c` documents the layout; keep the two in step).
//!
//! Everything in it is checked before it is used: the header's cache geometry, the command
//! line's length, every LEB128 number (at most 10 bytes, no overflow), every size (lines of
//! 16–256 bytes, stores of at most 256), instruction counts that would wrap. A file that
//! ends inside a record (a process killed before Valgrind wrote its last buffer) reads up to
//! the last whole record and reports where it stopped.

use super::{
    FileMap, FileTable, MappedFile, MemKind, MemRecord, Process, MAP_FILE, MAX_FILES,
    MAX_PATH_BYTES, MAX_VALUE_BYTES,
};
use crate::error::{FormatError, Location};
use crate::lines::read_full;
use std::io::Read;

pub const MAGIC: &[u8; 8] = b"WMEMRAW1";
/// The header's fixed part: magic, pid, ppid, start time, five u32 of geometry, cache flag,
/// command-line length.
const HEADER_FIXED: usize = 8 + 4 + 4 + 8 + 5 * 4 + 1 + 2;

const TAG_FILL: u8 = 1;
const TAG_WB: u8 = 2;
const TAG_LOAD: u8 = 3;
const TAG_STORE: u8 = 4;
const TAG_MAP: u8 = 5;
const TAG_UNMAP: u8 = 6;
const TAG_MARK: u8 = 7;
const TAG_EXIT: u8 = 8;

/// The modelled cache a trace was captured behind (`cache: false`: every access recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheGeometry {
    pub line: u32,
    pub l1_bytes: u32,
    pub l1_ways: u32,
    pub l2_bytes: u32,
    pub l2_ways: u32,
    pub cache: bool,
}

impl CacheGeometry {
    /// Checks what the tool itself enforces: a power-of-two line of 16–256 bytes and
    /// power-of-two set counts, L2 no smaller than L1.
    pub fn check(&self) -> Result<(), String> {
        let pow2 = |v: u64| v.is_power_of_two();
        if !(16..=256).contains(&self.line) || !pow2(self.line.into()) {
            return Err(format!("line size {} bytes", self.line));
        }
        for (name, bytes, ways) in [
            ("L1", self.l1_bytes, self.l1_ways),
            ("L2", self.l2_bytes, self.l2_ways),
        ] {
            let per_set = u64::from(self.line) * u64::from(ways);
            let ok = (1..=64).contains(&ways)
                && u64::from(bytes) % per_set == 0
                && pow2(u64::from(bytes) / per_set);
            if !ok {
                return Err(format!("{name} of {bytes} bytes, {ways} ways"));
            }
        }
        if self.l2_bytes < self.l1_bytes {
            return Err("L2 smaller than L1".into());
        }
        Ok(())
    }
}

/// Reads one process's raw file: [`RawReader::header`] first, then records.
pub struct RawReader<R: Read> {
    input: R,
    file: String,
    /// Bytes consumed so far (the offset errors name).
    pos: u64,
    pub process: Process,
    pub geometry: CacheGeometry,
    /// The files this process's mappings named so far ([`FileMap::file`] indexes it).
    pub files: FileTable,
    icount: u64,
    addr: u64,
    done: bool,
}

/// Either a record, the clean end, or the end inside a record at the given offset.
enum Step {
    Record(MemRecord),
    End,
    Cut(u64),
}

impl<R: Read> RawReader<R> {
    /// Reads and checks the header.
    pub fn new(mut input: R, file: &str) -> Result<Self, FormatError> {
        let mut h = [0u8; HEADER_FIXED];
        let got = read_full(&mut input, &mut h).map_err(|e| FormatError::io(file, &e))?;
        let bad = |at: u64, msg: String| {
            FormatError::new(file, Location::Byte(at), msg)
                .with_expected("a wattio-mem raw trace (tools/valgrind/wattio-mem)")
        };
        if got < HEADER_FIXED || &h[..8] != MAGIC {
            if got < 8 || &h[..8] != MAGIC {
                return Err(bad(0, "no `WMEMRAW1` magic".into()));
            }
            return Err(bad(got as u64, "the header is cut short".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let mut start = [0u8; 8];
        start.copy_from_slice(&h[16..24]);
        let geometry = CacheGeometry {
            line: u32_at(24),
            l1_bytes: u32_at(28),
            l1_ways: u32_at(32),
            l2_bytes: u32_at(36),
            l2_ways: u32_at(40),
            cache: match h[44] {
                0 => false,
                1 => true,
                v => return Err(bad(44, format!("cache flag {v}"))),
            },
        };
        geometry
            .check()
            .map_err(|e| bad(24, format!("cache geometry: {e}")))?;
        let n = usize::from(u16::from_le_bytes([h[45], h[46]]));
        let mut cmd = vec![0u8; n];
        let got = read_full(&mut input, &mut cmd).map_err(|e| FormatError::io(file, &e))?;
        if got < n {
            return Err(bad(
                (HEADER_FIXED + got) as u64,
                "the command line is cut short".into(),
            ));
        }
        Ok(RawReader {
            input,
            file: file.to_string(),
            pos: (HEADER_FIXED + n) as u64,
            process: Process {
                pid: u32_at(8),
                ppid: u32_at(12),
                start_us: u64::from_le_bytes(start),
                command: String::from_utf8_lossy(&cmd).into_owned(),
                ..Process::default()
            },
            geometry,
            files: FileTable::default(),
            icount: 0,
            addr: 0,
            done: false,
        })
    }

    /// The start record every process's rows begin with.
    pub fn start_record(&self) -> MemRecord {
        MemRecord {
            pid: self.process.pid,
            icount: 0,
            kind: MemKind::Start,
            addr: self.process.start_us,
            size: 0,
            flags: self.process.ppid,
            old: None,
            new: None,
            file: None,
        }
    }

    fn err(&self, at: u64, msg: impl Into<String>, expected: &str) -> FormatError {
        FormatError::new(&self.file, Location::Byte(at), msg).with_expected(expected)
    }

    /// The next byte; `None` at the end of the input.
    fn byte(&mut self) -> Result<Option<u8>, FormatError> {
        let mut b = [0u8; 1];
        loop {
            match self.input.read(&mut b) {
                Ok(0) => return Ok(None),
                Ok(_) => {
                    self.pos += 1;
                    return Ok(Some(b[0]));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(FormatError::io(&self.file, &e)),
            }
        }
    }

    fn bytes(&mut self, n: usize) -> Result<Option<Vec<u8>>, FormatError> {
        let mut v = vec![0u8; n];
        let got =
            read_full(&mut self.input, &mut v).map_err(|e| FormatError::io(&self.file, &e))?;
        self.pos += got as u64;
        Ok((got == n).then_some(v))
    }

    /// An unsigned LEB128 number of at most 64 bits.
    fn varint(&mut self) -> Result<Option<u64>, FormatError> {
        let at = self.pos;
        let mut v = 0u64;
        for i in 0..10 {
            let Some(b) = self.byte()? else {
                return Ok(None);
            };
            let part = u64::from(b & 0x7f);
            if i == 9 && part > 1 {
                return Err(self.err(at, "LEB128 number over 64 bits", "at most 10 bytes"));
            }
            v |= part << (7 * i);
            if b & 0x80 == 0 {
                return Ok(Some(v));
            }
        }
        Err(self.err(at, "LEB128 number over 10 bytes", "at most 10 bytes"))
    }

    fn zigzag(&mut self) -> Result<Option<i64>, FormatError> {
        Ok(self
            .varint()?
            .map(|v| ((v >> 1) as i64) ^ -((v & 1) as i64)))
    }

    /// The next record; `None` at the end. A file cut inside a record ends there, the offset
    /// kept in [`Process::cut_at`].
    pub fn next_record(&mut self) -> Result<Option<MemRecord>, FormatError> {
        if self.done {
            return Ok(None);
        }
        match self.step() {
            Ok(Step::Record(r)) => Ok(Some(r)),
            Ok(Step::End) => {
                self.done = true;
                Ok(None)
            }
            Ok(Step::Cut(at)) => {
                self.done = true;
                self.process.cut_at = Some(at);
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    fn step(&mut self) -> Result<Step, FormatError> {
        let at = self.pos;
        let Some(tag) = self.byte()? else {
            return Ok(Step::End);
        };
        if self.process.exit_code.is_some() {
            return Err(self.err(at, "a record after the exit record", "the end of the file"));
        }
        macro_rules! need {
            ($e:expr) => {
                match $e? {
                    Some(v) => v,
                    None => return Ok(Step::Cut(at)),
                }
            };
        }
        if !(TAG_FILL..=TAG_EXIT).contains(&tag) {
            return Err(self.err(at, format!("record tag {tag}"), "a tag from 1 to 8"));
        }
        let dt = need!(self.varint());
        self.icount = self.icount.checked_add(dt).ok_or_else(|| {
            self.err(
                at,
                "instruction count past 2^64",
                "a plausible instruction count",
            )
        })?;
        let mut r = MemRecord {
            pid: self.process.pid,
            icount: self.icount,
            kind: MemKind::Mark,
            addr: 0,
            size: 0,
            flags: 0,
            old: None,
            new: None,
            file: None,
        };
        let line = self.geometry.line as usize;
        match tag {
            TAG_FILL | TAG_WB | TAG_LOAD | TAG_STORE => {
                let delta = need!(self.zigzag());
                self.addr = self.addr.wrapping_add(delta as u64);
                r.addr = self.addr;
                let traffic_ok = if self.geometry.cache {
                    matches!(tag, TAG_FILL | TAG_WB)
                } else {
                    matches!(tag, TAG_LOAD | TAG_STORE)
                };
                if !traffic_ok {
                    let mode = if self.geometry.cache {
                        "fill and write-back records (cache modelled)"
                    } else {
                        "load and store records (no cache modelled)"
                    };
                    return Err(self.err(at, format!("record tag {tag} in this trace"), mode));
                }
                if matches!(tag, TAG_FILL | TAG_WB) && !r.addr.is_multiple_of(line as u64) {
                    return Err(self.err(
                        at,
                        format!("line address {:#x} not aligned to {line} bytes", r.addr),
                        "line-aligned addresses",
                    ));
                }
                match tag {
                    TAG_FILL => {
                        r.kind = MemKind::Fill;
                        r.size = line as u64;
                        r.flags = match need!(self.byte()) {
                            c @ (0 | 1) => c.into(),
                            c => {
                                return Err(self.err(
                                    self.pos - 1,
                                    format!("fill cause {c}"),
                                    "0 (load) or 1 (store)",
                                ))
                            }
                        };
                    }
                    TAG_WB => {
                        r.kind = MemKind::WriteBack;
                        r.size = line as u64;
                        let old = need!(self.bytes(line));
                        let mask = need!(self.bytes(line / 8));
                        let mut new = old.clone();
                        for (i, b) in new.iter_mut().enumerate() {
                            if mask[i / 8] & (1 << (i % 8)) != 0 {
                                *b = need!(self.byte());
                            }
                        }
                        r.old = Some(old);
                        r.new = Some(new);
                    }
                    TAG_LOAD => {
                        r.kind = MemKind::Load;
                        r.size = need!(self.varint());
                        if r.size == 0 || r.size > u64::from(u32::MAX) {
                            return Err(self.err(
                                at,
                                format!("load of {} bytes", r.size),
                                "1 to 2^32-1 bytes",
                            ));
                        }
                    }
                    _ => {
                        r.kind = MemKind::Store;
                        let n = need!(self.varint());
                        if n == 0 || n > MAX_VALUE_BYTES as u64 {
                            return Err(self.err(
                                at,
                                format!("store of {n} bytes"),
                                &format!("1 to {MAX_VALUE_BYTES} bytes"),
                            ));
                        }
                        r.size = n;
                        r.old = Some(need!(self.bytes(n as usize)));
                        r.new = Some(need!(self.bytes(n as usize)));
                    }
                }
            }
            TAG_MAP | TAG_UNMAP => {
                r.kind = if tag == TAG_MAP {
                    MemKind::Map
                } else {
                    MemKind::Unmap
                };
                r.addr = need!(self.varint());
                r.size = need!(self.varint());
                let flags = need!(self.varint());
                if flags & !u64::from(super::MAP_KNOWN) != 0 {
                    return Err(self.err(
                        at,
                        format!("mapping flags {flags:#x}"),
                        "flags of r=1 w=2 x=4 startup=16 brk=32 mremap=64 file=128",
                    ));
                }
                r.flags = flags as u32;
                if r.flags & MAP_FILE != 0 {
                    if tag != TAG_MAP {
                        return Err(self.err(
                            at,
                            "an unmap naming a file",
                            "flag 128 on maps only",
                        ));
                    }
                    let dev = need!(self.varint());
                    let ino = need!(self.varint());
                    let offset = need!(self.varint());
                    let n = need!(self.bytes(2));
                    let n = usize::from(u16::from_le_bytes([n[0], n[1]]));
                    if n > MAX_PATH_BYTES {
                        return Err(self.err(
                            self.pos - 2,
                            format!("a path of {n} bytes"),
                            &format!("at most {MAX_PATH_BYTES} bytes"),
                        ));
                    }
                    let path = String::from_utf8_lossy(&need!(self.bytes(n))).into_owned();
                    let file = self
                        .files
                        .intern(&MappedFile { path, dev, ino })
                        .ok_or_else(|| {
                            self.err(
                                at,
                                format!("more than {MAX_FILES} mapped files"),
                                &format!("at most {MAX_FILES} distinct files"),
                            )
                        })?;
                    r.file = Some(FileMap { file, offset });
                }
            }
            TAG_MARK => {
                r.kind = MemKind::Mark;
                r.addr = need!(self.varint());
            }
            _ => {
                r.kind = MemKind::Exit;
                let code = need!(self.zigzag());
                let code = i32::try_from(code)
                    .map_err(|_| self.err(at, format!("exit code {code}"), "a 32-bit exit code"))?;
                r.flags = code as u32;
                let mut counts = [0u64; 6];
                for c in &mut counts {
                    *c = need!(self.varint());
                }
                let p = &mut self.process;
                p.exit_code = Some(code);
                p.exit_icount = Some(self.icount);
                [
                    p.accesses,
                    p.l1_misses,
                    p.fills,
                    p.writebacks,
                    p.dirty_dropped,
                    p.records_dropped,
                ] = counts;
            }
        }
        Ok(Step::Record(r))
    }
}
