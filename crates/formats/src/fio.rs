//! fio iologs, versions 2 and 3, and a version 3 writer.
//!
//! The first line is `fio version 2 iolog` or `fio version 3 iolog`. Version 2 lines are
//! `filename action [offset length]`, with time advanced only by `filename wait USEC`
//! (relative to the previous wait). Version 3 lines carry a leading timestamp in
//! microseconds from the start of the run (fio writes it with `utime_since_now`):
//! `usec filename action [offset length]`. Actions: `add`/`open`/`close` manage files;
//! `read`, `write`, `trim` (offset and length in bytes), `sync`/`datasync`.

use crate::error::{FormatError, Location};
use crate::lines::{parse_u64, FieldError, Fields};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw};
use crate::writer::TraceWriter;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use wattio_core::{Nanos, Op, Request};

pub const V2_HEADER: &[u8] = b"fio version 2 iolog";
pub const V3_HEADER: &[u8] = b"fio version 3 iolog";
pub const LINE_FORM: &str = "`fio version 2|3 iolog` then [usec (v3)] filename add|open|close|read|write|trim|sync|datasync|wait [offset length]";

#[derive(Default)]
pub struct Fio {
    version: Option<u8>,
    /// Version 2: sum of the waits so far.
    clock: Nanos,
}

impl LineFormat for Fio {
    fn name(&self) -> &'static str {
        match self.version {
            Some(2) => "fio-v2",
            Some(3) => "fio-v3",
            _ => "fio",
        }
    }
    fn line_form(&self) -> &'static str {
        LINE_FORM
    }
    fn absolute_clock(&self) -> bool {
        false
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let Some(version) = self.version else {
            let l = crate::lines::trim(line);
            if l.is_empty() {
                return Ok(Parsed::Skip);
            }
            if l == V2_HEADER {
                self.version = Some(2);
            } else if l == V3_HEADER {
                self.version = Some(3);
            } else {
                return Err(FieldError::new(
                    0,
                    "not a fio iolog header",
                    "`fio version 2 iolog` or `fio version 3 iolog` (version 1 is not supported, as in fio)",
                ));
            }
            return Ok(Parsed::Skip);
        };
        let mut f = Fields::ws(line);
        if f.is_empty() {
            return Ok(Parsed::Skip);
        }
        let ts = if version == 3 {
            let us = f.u64("a timestamp in µs")?;
            Some(
                us.checked_mul(1_000)
                    .ok_or_else(|| f.err("timestamp overflows", "µs below 2^54"))?,
            )
        } else {
            None
        };
        let name = f.req("a file name")?;
        let act = f.req("an action (add, open, close, read, write, trim, sync, datasync, wait)")?;
        let act_col = f.col;
        let mut num = |what: &str| -> Result<Option<u64>, FieldError> {
            match f.next_field() {
                None => Ok(None),
                Some(t) => parse_u64(t).map(Some).ok_or_else(|| f.bad(t, what)),
            }
        };
        let a = num("an offset in bytes")?;
        let b = num("a length in bytes")?;
        if let Some(x) = f.next_field() {
            return Err(f.bad(x, "end of line after the length"));
        }
        let op = match act {
            b"add" | b"open" | b"close" => {
                if a.is_some() {
                    return Err(FieldError::new(
                        act_col,
                        "file action with an offset",
                        "`filename add|open|close`",
                    ));
                }
                return Ok(Parsed::Skip);
            }
            b"wait" => {
                if version == 3 {
                    return Err(FieldError::new(
                        act_col,
                        "`wait` in a version 3 iolog",
                        "a timestamped action (v3 has no wait)",
                    ));
                }
                let us = a.ok_or_else(|| {
                    FieldError::new(line.len(), "wait without a time", "`filename wait USEC`")
                })?;
                self.clock = us
                    .checked_mul(1_000)
                    .and_then(|d| self.clock.checked_add(d))
                    .ok_or_else(|| {
                        FieldError::new(act_col, "time overflows", "waits summing below 584 years")
                    })?;
                return Ok(Parsed::Skip);
            }
            b"read" => Op::Read,
            b"write" => Op::Write,
            b"trim" => Op::Discard,
            b"sync" | b"datasync" => Op::Flush,
            _ => {
                return Err(FieldError::new(
                    act_col,
                    format!("unknown action `{}`", crate::lines::show(act)),
                    "add, open, close, read, write, trim, sync, datasync or wait",
                ))
            }
        };
        let (offset, len) = match (op, a, b) {
            (_, Some(a), Some(b)) => (a, b),
            (Op::Flush, None, None) => (0, 0),
            _ => {
                return Err(FieldError::new(
                    line.len(),
                    "I/O action without offset and length",
                    "`filename read|write|trim OFFSET LENGTH` (bytes)",
                ))
            }
        };
        Ok(Parsed::Record(Raw {
            time: ts.unwrap_or(self.clock),
            op,
            offset,
            len,
            dev: DevKey::Bytes(name),
            stream: 0,
            measured: None,
        }))
    }
    fn finish(&mut self) -> Result<(), String> {
        match self.version {
            Some(_) => Ok(()),
            None => Err("empty file: no `fio version 2|3 iolog` header".into()),
        }
    }
    fn assumptions(&self) -> Vec<String> {
        let mut v = vec!["fio: offset and length are bytes; trim = discard, sync/datasync = flush; a device is a file name".into()];
        match self.version {
            Some(2) => v.push("fio-v2: arrival = sum of the preceding `wait`s (µs); fio itself ignores waits below 100 µs, kept here".into()),
            Some(3) => v.push("fio-v3: timestamps are µs from the start of the run".into()),
            _ => {}
        }
        v
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        Ok(OwnedKey::Bytes(sel.trim().as_bytes().to_vec()))
    }
}

/// Writes fio version 3 iologs. Device `dev` becomes the file name `names[dev]`, or
/// `/dev/wattio<dev>` (point fio at real devices with `replay_redirect` or by naming them).
/// Times are truncated to whole microseconds, fio's resolution.
pub struct FioWriter {
    out: BufWriter<File>,
    file: String,
    names: Vec<String>,
    opened: Vec<bool>,
    line: Vec<u8>,
    rows: u64,
    last_us: u64,
}

impl FioWriter {
    pub fn create(path: &Path, names: Vec<String>) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::create(path).map_err(|e| FormatError::io(&file, &e))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(V3_HEADER)
            .and_then(|_| out.write_all(b"\n"))
            .map_err(|e| FormatError::io(&file, &e))?;
        Ok(FioWriter {
            out,
            file,
            names,
            opened: Vec::new(),
            line: Vec::with_capacity(96),
            rows: 0,
            last_us: 0,
        })
    }

    fn name(&self, dev: u16) -> String {
        self.names
            .get(dev as usize)
            .cloned()
            .unwrap_or_else(|| format!("/dev/wattio{dev}"))
    }
}

impl TraceWriter for FioWriter {
    fn write(&mut self, r: &Request) -> Result<(), FormatError> {
        let us = r.arrival / 1_000;
        let d = r.dev as usize;
        let name = self.name(r.dev);
        if name.is_empty() || name.contains([' ', '\t', '\n']) {
            return Err(FormatError::new(
                &self.file,
                Location::Row(self.rows),
                format!("file name `{name}` cannot appear in an iolog"),
            )
            .with_expected("a file name without spaces"));
        }
        self.line.clear();
        if self.opened.len() <= d {
            self.opened.resize(d + 1, false);
        }
        if !self.opened[d] {
            self.opened[d] = true;
            let _ = writeln!(self.line, "{us} {name} add\n{us} {name} open");
        }
        let act = match r.op {
            Op::Read => "read",
            Op::Write => "write",
            Op::Discard => "trim",
            Op::Flush => "sync",
        };
        let _ = writeln!(self.line, "{us} {name} {act} {} {}", r.offset, r.len);
        self.out
            .write_all(&self.line)
            .map_err(|e| FormatError::io(&self.file, &e))?;
        self.last_us = us;
        self.rows += 1;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<u64, FormatError> {
        for d in 0..self.opened.len() {
            if self.opened[d] {
                let name = self.name(d as u16);
                let _ = writeln!(self.out, "{} {name} close", self.last_us);
            }
        }
        self.out
            .flush()
            .map_err(|e| FormatError::io(&self.file, &e))?;
        Ok(self.rows)
    }
}
