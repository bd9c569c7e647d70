//! Any delimited text layout, read through a column mapping: the escape hatch for every
//! tool's CSV export (`--format csv --columns SPEC`, `[trace] columns = "SPEC"`).
//!
//! SPEC is a comma-separated list of `FIELD=COLUMN[:UNIT]`:
//!
//! * FIELD: `time`, `op`, `offset`, `size` (all four required), `device`, `response`;
//! * COLUMN: a 1-based column index or a header name (case-insensitive);
//! * UNIT of `time` and `response`: `s` (default), `ms`, `us`, `ns` or `filetime` (Windows
//!   100 ns ticks); of `offset` and `size`: `bytes` (default), `sectors` (512 B) or a block
//!   size in bytes (`4096`);
//! * `op=COLUMN:read=V1/V2;write=V3` maps op values (case-insensitive; `flush=` and
//!   `discard=` too); without a mapping, `r`/`read` and `w`/`write` are recognized.
//!
//! The line machinery (strict and lenient modes, device selection and numbering, the
//! arrival-order check, `file:line:col` errors) is [`crate::text`]'s, as for every built-in
//! reader; this module only turns a line into a record through the mapping.

use crate::lines::{parse_decimal, parse_u64, show, trim, FieldError};
use crate::text::{DevKey, LineFormat, OwnedKey, Parsed, Raw};
use wattio_core::Op;

/// Longest SPEC accepted (a mapping of six fields is far shorter).
pub const MAX_SPEC: usize = 4096;
/// Highest column index a SPEC may name: no export has more columns, and the per-line
/// field table is bounded by it.
pub const MAX_COLUMN: usize = 1024;
/// Most op values one SPEC may map.
const MAX_OP_VALUES: usize = 64;

/// The unit of a time column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    S,
    Ms,
    Us,
    Ns,
    /// Windows filetime: 100 ns ticks (MSR Cambridge's clock).
    Filetime,
}

impl TimeUnit {
    fn parse(s: &str) -> Option<TimeUnit> {
        Some(match s.to_ascii_lowercase().as_str() {
            "s" => TimeUnit::S,
            "ms" => TimeUnit::Ms,
            "us" => TimeUnit::Us,
            "ns" => TimeUnit::Ns,
            "filetime" => TimeUnit::Filetime,
            _ => return None,
        })
    }

    fn describe(self) -> &'static str {
        match self {
            TimeUnit::S => "seconds",
            TimeUnit::Ms => "milliseconds",
            TimeUnit::Us => "microseconds",
            TimeUnit::Ns => "nanoseconds",
            TimeUnit::Filetime => "Windows filetime ticks of 100 ns",
        }
    }

    /// A field in this unit, in ns; decimals are exact (no float rounding in timestamps),
    /// filetime ticks are integers.
    fn to_ns(self, f: &[u8]) -> Option<u64> {
        match self {
            TimeUnit::S => parse_decimal(f, 1_000_000_000),
            TimeUnit::Ms => parse_decimal(f, 1_000_000),
            TimeUnit::Us => parse_decimal(f, 1_000),
            TimeUnit::Ns => parse_decimal(f, 1),
            TimeUnit::Filetime => parse_u64(f)?.checked_mul(100),
        }
    }
}

/// Where a field is: a 0-based index, or a header name resolved at the header line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Col {
    Index(usize),
    Name(String),
}

impl std::fmt::Display for Col {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Col::Index(i) => write!(f, "column {}", i + 1),
            Col::Name(n) => write!(f, "column `{n}`"),
        }
    }
}

/// How op values map to operations.
#[derive(Debug, Clone, PartialEq)]
struct OpMap {
    /// Lower-case value → op.
    values: Vec<(Vec<u8>, Op)>,
    given: bool,
}

impl OpMap {
    fn default_map() -> OpMap {
        OpMap {
            values: vec![
                (b"r".to_vec(), Op::Read),
                (b"read".to_vec(), Op::Read),
                (b"w".to_vec(), Op::Write),
                (b"write".to_vec(), Op::Write),
            ],
            given: false,
        }
    }

    fn get(&self, v: &[u8]) -> Option<Op> {
        self.values
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(v))
            .map(|&(_, op)| op)
    }

    fn describe(&self) -> String {
        let mut parts = Vec::new();
        for op in [Op::Read, Op::Write, Op::Flush, Op::Discard] {
            let vs: Vec<String> = self
                .values
                .iter()
                .filter(|(_, o)| *o == op)
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                .collect();
            if !vs.is_empty() {
                parts.push(format!("{}={}", op.as_str(), vs.join("/")));
            }
        }
        parts.join(";")
    }
}

/// A parsed SPEC.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    time: (Col, TimeUnit),
    op: (Col, OpMap),
    /// Bytes per unit.
    offset: (Col, u64),
    size: (Col, u64),
    device: Option<Col>,
    response: Option<(Col, TimeUnit)>,
}

fn parse_col(s: &str, field: &str) -> Result<Col, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(format!(
            "{field}: empty column (expected a 1-based index or a header name)"
        ));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<usize>() {
            Ok(i) if (1..=MAX_COLUMN).contains(&i) => Ok(Col::Index(i - 1)),
            _ => Err(format!(
                "{field}: column index `{s}` out of range (expected 1 to {MAX_COLUMN})"
            )),
        };
    }
    Ok(Col::Name(s.to_string()))
}

fn parse_bytes_unit(s: Option<&str>, field: &str) -> Result<u64, String> {
    let Some(s) = s else { return Ok(1) };
    match s.trim().to_ascii_lowercase().as_str() {
        "bytes" | "b" => Ok(1),
        "sectors" => Ok(512),
        n => match n.parse::<u64>() {
            Ok(k) if (1..=1 << 30).contains(&k) => Ok(k),
            _ => Err(format!(
                "{field}: unit `{s}` (expected bytes, sectors or a block size in bytes such as 4096)"
            )),
        },
    }
}

fn parse_time_unit(s: Option<&str>, field: &str) -> Result<TimeUnit, String> {
    match s {
        None => Ok(TimeUnit::S),
        Some(u) => TimeUnit::parse(u.trim())
            .ok_or_else(|| format!("{field}: unit `{u}` (expected s, ms, us, ns or filetime)")),
    }
}

fn parse_op_map(s: &str) -> Result<OpMap, String> {
    let mut values = Vec::new();
    for part in s.split(';') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (op, vs) = part
            .split_once('=')
            .ok_or_else(|| format!("op: mapping `{part}` (expected read=V1/V2;write=V3)"))?;
        let op = match op.trim().to_ascii_lowercase().as_str() {
            "read" => Op::Read,
            "write" => Op::Write,
            "flush" => Op::Flush,
            "discard" => Op::Discard,
            o => {
                return Err(format!(
                    "op: `{o}` is not an operation (expected read, write, flush or discard)"
                ))
            }
        };
        for v in vs.split('/') {
            let v = v.trim();
            if v.is_empty() {
                return Err(format!("op: empty value in `{part}`"));
            }
            if let Some((_, other)) = values
                .iter()
                .find(|(k, _): &&(Vec<u8>, Op)| k.eq_ignore_ascii_case(v.as_bytes()))
            {
                return Err(format!(
                    "op: value `{v}` mapped twice (to {} and {})",
                    other.as_str(),
                    op.as_str()
                ));
            }
            values.push((v.to_ascii_lowercase().into_bytes(), op));
            if values.len() > MAX_OP_VALUES {
                return Err(format!("op: more than {MAX_OP_VALUES} values"));
            }
        }
    }
    if !values.iter().any(|(_, o)| *o == Op::Read) || !values.iter().any(|(_, o)| *o == Op::Write) {
        return Err(format!(
            "op: mapping `{s}` must give values for both read and write (read=V1/V2;write=V3)"
        ));
    }
    Ok(OpMap {
        values,
        given: true,
    })
}

impl Columns {
    /// Parses a SPEC; errors say which field and what was expected.
    pub fn parse(spec: &str) -> Result<Columns, String> {
        if spec.len() > MAX_SPEC {
            return Err(format!("longer than {MAX_SPEC} characters"));
        }
        let (mut time, mut op, mut offset, mut size, mut device, mut response) =
            (None, None, None, None, None, None);
        for item in spec.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (field, rest) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}`: expected FIELD=COLUMN[:UNIT]"))?;
            let field = field.trim().to_ascii_lowercase();
            let (col, unit) = match rest.split_once(':') {
                Some((c, u)) => (c, Some(u)),
                None => (rest, None),
            };
            let dup = |set: bool| {
                if set {
                    Err(format!("{field}: given twice"))
                } else {
                    Ok(())
                }
            };
            match field.as_str() {
                "time" => {
                    dup(time.is_some())?;
                    time = Some((parse_col(col, "time")?, parse_time_unit(unit, "time")?));
                }
                "response" => {
                    dup(response.is_some())?;
                    response = Some((
                        parse_col(col, "response")?,
                        parse_time_unit(unit, "response")?,
                    ));
                }
                "offset" => {
                    dup(offset.is_some())?;
                    offset = Some((parse_col(col, "offset")?, parse_bytes_unit(unit, "offset")?));
                }
                "size" => {
                    dup(size.is_some())?;
                    size = Some((parse_col(col, "size")?, parse_bytes_unit(unit, "size")?));
                }
                "op" => {
                    dup(op.is_some())?;
                    let map = match unit {
                        Some(m) => parse_op_map(m)?,
                        None => OpMap::default_map(),
                    };
                    op = Some((parse_col(col, "op")?, map));
                }
                "device" => {
                    dup(device.is_some())?;
                    if let Some(u) = unit {
                        return Err(format!("device: takes no unit, got `{u}`"));
                    }
                    device = Some(parse_col(col, "device")?);
                }
                f => {
                    return Err(format!(
                        "unknown field `{f}` (expected time, op, offset, size, device or response)"
                    ))
                }
            }
        }
        let missing: Vec<&str> = [
            ("time", time.is_none()),
            ("op", op.is_none()),
            ("offset", offset.is_none()),
            ("size", size.is_none()),
        ]
        .iter()
        .filter(|(_, m)| *m)
        .map(|(n, _)| *n)
        .collect();
        if !missing.is_empty() {
            return Err(format!(
                "no column for {} (time, op, offset and size are required)",
                missing.join(", ")
            ));
        }
        let (Some(time), Some(op), Some(offset), Some(size)) = (time, op, offset, size) else {
            unreachable!("checked above")
        };
        Ok(Columns {
            time,
            op,
            offset,
            size,
            device,
            response,
        })
    }

    fn cols_mut(&mut self) -> impl Iterator<Item = &mut Col> {
        [
            Some(&mut self.time.0),
            Some(&mut self.op.0),
            Some(&mut self.offset.0),
            Some(&mut self.size.0),
            self.device.as_mut(),
            self.response.as_mut().map(|r| &mut r.0),
        ]
        .into_iter()
        .flatten()
    }

    fn uses_names(&self) -> bool {
        [
            Some(&self.time.0),
            Some(&self.op.0),
            Some(&self.offset.0),
            Some(&self.size.0),
            self.device.as_ref(),
            self.response.as_ref().map(|r| &r.0),
        ]
        .into_iter()
        .flatten()
        .any(|c| matches!(c, Col::Name(_)))
    }

    /// The 0-based index of a resolved column.
    fn idx(c: &Col) -> usize {
        match c {
            Col::Index(i) => *i,
            // Unreachable after the header resolved every name: `parse` refuses data lines
            // before that.
            Col::Name(_) => usize::MAX,
        }
    }

    fn describe(&self) -> String {
        let unit = |u: u64| match u {
            1 => "bytes".to_string(),
            512 => "512-byte sectors".to_string(),
            k => format!("blocks of {k} bytes"),
        };
        let mut v = vec![
            format!("time={} ({})", self.time.0, self.time.1.describe()),
            format!("op={} ({})", self.op.0, self.op.1.describe()),
            format!("offset={} ({})", self.offset.0, unit(self.offset.1)),
            format!("size={} ({})", self.size.0, unit(self.size.1)),
        ];
        if let Some(d) = &self.device {
            v.push(format!("device={d}"));
        }
        if let Some((c, u)) = &self.response {
            v.push(format!("response={c} ({})", u.describe()));
        }
        v.join(", ")
    }
}

/// How fields are separated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimiter {
    Byte(u8),
    /// Runs of spaces and tabs (aligned text exports).
    Whitespace,
}

impl Delimiter {
    /// `,` (default), `;`, `|`, `tab` (or `\t`), `space`/`whitespace` (runs of blanks), or
    /// any other single ASCII punctuation character.
    pub fn parse(s: &str) -> Result<Delimiter, String> {
        Ok(match s {
            "tab" | "\\t" | "\t" => Delimiter::Byte(b'\t'),
            "space" | "whitespace" | " " => Delimiter::Whitespace,
            _ if s.len() == 1 && s.as_bytes()[0].is_ascii_punctuation() && s != "\"" => {
                Delimiter::Byte(s.as_bytes()[0])
            }
            _ => {
                return Err(format!(
                    "delimiter `{s}` (expected one punctuation character such as , ; |, or tab, or space)"
                ))
            }
        })
    }

    fn describe(self) -> String {
        match self {
            Delimiter::Byte(b'\t') => "tab".into(),
            Delimiter::Byte(b) => format!("`{}`", b as char),
            Delimiter::Whitespace => "runs of spaces and tabs".into(),
        }
    }
}

/// Whether the first line is a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    Yes,
    No,
    /// A header if the SPEC names columns, or if its time column is not a number.
    Sniff,
}

/// The generic reader's [`LineFormat`].
pub struct Delimited {
    cols: Columns,
    /// The mapping as given (names, not the indices the header resolves them to).
    described: String,
    delim: Delimiter,
    header: Header,
    /// How the first line was taken, for the assumptions.
    header_note: Option<String>,
    first_seen: bool,
    /// A header problem: the input ends there ([`Parsed::End`]) and [`LineFormat::finish`]
    /// reports it, so lenient mode cannot skip it line by line.
    fatal: Option<String>,
    /// (start, end) of each field of the current line, up to the last one needed.
    spans: Vec<(usize, usize)>,
    need: usize,
}

impl Delimited {
    pub fn new(spec: &str, delimiter: Option<&str>, header: Option<bool>) -> Result<Self, String> {
        let cols = Columns::parse(spec).map_err(|m| format!("columns `{spec}`: {m}"))?;
        let delim = match delimiter {
            Some(d) => Delimiter::parse(d)?,
            None => Delimiter::Byte(b','),
        };
        let header = match header {
            Some(true) => Header::Yes,
            Some(false) => Header::No,
            None => Header::Sniff,
        };
        if header == Header::No && cols.uses_names() {
            return Err(format!(
                "columns `{spec}` names columns by header, but the trace is said to have no header line"
            ));
        }
        let mut d = Delimited {
            described: cols.describe(),
            cols,
            delim,
            header,
            header_note: None,
            first_seen: false,
            fatal: None,
            spans: Vec::new(),
            need: 0,
        };
        d.need = d.max_index().map_or(0, |m| m + 1);
        Ok(d)
    }

    fn max_index(&mut self) -> Option<usize> {
        self.cols
            .cols_mut()
            .filter_map(|c| match c {
                Col::Index(i) => Some(*i),
                Col::Name(_) => None,
            })
            .max()
    }

    /// Splits `line` into `self.spans`, stopping after `limit` fields.
    fn split(&mut self, line: &[u8], limit: usize) {
        self.spans.clear();
        match self.delim {
            Delimiter::Byte(d) => {
                let mut s = 0;
                while self.spans.len() < limit {
                    match memchr::memchr(d, &line[s..]) {
                        Some(i) => {
                            self.spans.push((s, s + i));
                            s += i + 1;
                        }
                        None => {
                            self.spans.push((s, line.len()));
                            break;
                        }
                    }
                }
            }
            Delimiter::Whitespace => {
                let mut p = 0;
                while self.spans.len() < limit {
                    while p < line.len() && matches!(line[p], b' ' | b'\t') {
                        p += 1;
                    }
                    if p >= line.len() {
                        break;
                    }
                    let s = p;
                    while p < line.len() && !matches!(line[p], b' ' | b'\t') {
                        p += 1;
                    }
                    self.spans.push((s, p));
                }
            }
        }
    }

    /// Field `i` of the line last split, trimmed and unquoted, with its 0-based column.
    fn field<'a>(
        &self,
        line: &'a [u8],
        c: &Col,
        what: &str,
    ) -> Result<(&'a [u8], usize), FieldError> {
        let i = Columns::idx(c);
        match self.spans.get(i) {
            Some(&(s, e)) => {
                let f = trim(&line[s..e]);
                let f = match f {
                    [b'"', inner @ .., b'"'] => inner,
                    _ => f,
                };
                Ok((f, s))
            }
            None => Err(FieldError::new(
                line.len(),
                format!(
                    "line ends early: {} fields, no {c} for {what}",
                    self.spans.len()
                ),
                format!("at least {} fields", i + 1),
            )),
        }
    }

    /// Resolves header names against the first line (its first [`MAX_COLUMN`] columns); the
    /// error names the line's columns.
    fn resolve_header(&mut self, line: &[u8]) -> Result<(), String> {
        self.split(line, MAX_COLUMN);
        let names: Vec<String> = self
            .spans
            .iter()
            .map(|&(s, e)| {
                let f = trim(&line[s..e]);
                let f = match f {
                    [b'"', inner @ .., b'"'] => inner,
                    _ => f,
                };
                String::from_utf8_lossy(f).into_owned()
            })
            .collect();
        let shown = || {
            let mut v: Vec<String> = names.iter().take(24).map(|n| show(n.as_bytes())).collect();
            if names.len() > 24 {
                v.push(format!("… ({} in all)", names.len()));
            }
            v.join(", ")
        };
        let mut errors = Vec::new();
        for c in self.cols.cols_mut() {
            if let Col::Name(n) = c {
                let hits: Vec<usize> = names
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.eq_ignore_ascii_case(n))
                    .map(|(i, _)| i)
                    .collect();
                match hits.as_slice() {
                    [i] => *c = Col::Index(*i),
                    [] => errors.push(format!("no column `{n}`")),
                    _ => errors.push(format!("column `{n}` appears {} times", hits.len())),
                }
            }
        }
        if !errors.is_empty() {
            return Err(format!(
                "the header line: {}; its columns are: {}",
                errors.join("; "),
                shown()
            ));
        }
        self.need = self.max_index().map_or(0, |m| m + 1);
        Ok(())
    }
}

impl LineFormat for Delimited {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn line_form(&self) -> &'static str {
        "a delimited line holding the columns --columns names"
    }
    fn absolute_clock(&self) -> bool {
        // Exports count from anything (an epoch, boot, the trace start): the first record
        // is t = 0, as for the built-in readers of epoch clocks.
        true
    }
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError> {
        let t = trim(line);
        if t.is_empty() || t.starts_with(b"#") {
            return Ok(Parsed::Skip);
        }
        if !self.first_seen {
            self.first_seen = true;
            let is_header = match self.header {
                Header::Yes => {
                    self.header_note = Some("header: the first line (as told)".into());
                    true
                }
                Header::No => false,
                Header::Sniff if self.cols.uses_names() => {
                    self.header_note =
                        Some("header: the first line (the columns are named by header)".into());
                    true
                }
                Header::Sniff => {
                    self.split(line, self.need);
                    let time = self.cols.time.clone();
                    let numeric = self
                        .field(line, &time.0, "time")
                        .ok()
                        .and_then(|(f, _)| time.1.to_ns(f))
                        .is_some();
                    if !numeric {
                        let f = self.field(line, &time.0, "time").map(|(f, _)| show(f));
                        self.header_note = Some(format!(
                            "header: the first line (sniffed: its time field `{}` is not a number)",
                            f.unwrap_or_default()
                        ));
                    }
                    !numeric
                }
            };
            if is_header {
                if let Err(m) = self.resolve_header(line) {
                    self.fatal = Some(m);
                    return Ok(Parsed::End);
                }
                return Ok(Parsed::Skip);
            }
        }
        self.split(line, self.need);
        let (tf, tc) = self.field(line, &self.cols.time.0, "time")?;
        let unit = self.cols.time.1;
        let time = unit.to_ns(tf).ok_or_else(|| {
            FieldError::new(
                tc,
                format!("bad field `{}`", show(tf)),
                format!("a time in {} (non-negative, no exponent)", unit.describe()),
            )
        })?;
        let (of, oc) = self.field(line, &self.cols.op.0, "op")?;
        let op = self.cols.op.1.get(of).ok_or_else(|| {
            FieldError::new(
                oc,
                format!("op value `{}` is not mapped", show(of)),
                format!(
                    "one of {} (add it to op=COLUMN:read=…;write=…)",
                    self.cols.op.1.describe()
                ),
            )
        })?;
        let bytes = |this: &Self, c: &Col, per: u64, what: &str| -> Result<u64, FieldError> {
            let (f, col) = this.field(line, c, what)?;
            let n = parse_u64(f).ok_or_else(|| {
                FieldError::new(
                    col,
                    format!("bad field `{}`", show(f)),
                    format!("{what} as a non-negative integer"),
                )
            })?;
            n.checked_mul(per).ok_or_else(|| {
                FieldError::new(
                    col,
                    format!("{what} {n} × {per} bytes overflows 64 bits"),
                    format!("{what} below 2^64 bytes"),
                )
            })
        };
        let offset = bytes(self, &self.cols.offset.0, self.cols.offset.1, "offset")?;
        let len = bytes(self, &self.cols.size.0, self.cols.size.1, "size")?;
        let dev = match &self.cols.device {
            Some(c) => DevKey::Bytes(self.field(line, c, "device")?.0),
            None => DevKey::Num(0),
        };
        let measured = match &self.cols.response {
            Some((c, u)) => {
                let (f, col) = self.field(line, c, "response")?;
                Some(u.to_ns(f).ok_or_else(|| {
                    FieldError::new(
                        col,
                        format!("bad field `{}`", show(f)),
                        format!("a response time in {}", u.describe()),
                    )
                })?)
            }
            None => None,
        };
        Ok(Parsed::Record(Raw {
            time,
            op,
            offset,
            len,
            dev,
            stream: 0,
            measured,
        }))
    }
    fn assumptions(&self) -> Vec<String> {
        let mut v = vec![
            format!("csv: columns {}", self.described),
            format!("csv: fields separated by {}", self.delim.describe()),
        ];
        if !self.cols.op.1.given {
            v.push("csv: op values r/read are reads, w/write writes (case-insensitive)".into());
        }
        if self.cols.device.is_none() {
            v.push("csv: no device column: every request is on device 0".into());
        }
        v.push(
            self.header_note
                .clone()
                .unwrap_or_else(|| "header: none (the first line is data)".into()),
        );
        v
    }
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String> {
        if self.cols.device.is_none() {
            return Err("the --columns SPEC has no device column to select on".into());
        }
        Ok(OwnedKey::Bytes(sel.trim().as_bytes().to_vec()))
    }
    fn finish(&mut self) -> Result<(), String> {
        match self.fatal.take() {
            Some(m) => Err(m),
            None => Ok(()),
        }
    }
}

/// The csv fuzz target's entry (and the corpus test's): the first line of `data` is the
/// SPEC, the rest the trace, read with three delimiter and header settings under [`crate::fuzz_read_with`]'s
/// promises. A SPEC that does not parse must be refused with a message, never a panic.
pub fn fuzz_csv(data: &[u8]) {
    let (spec, rest) = match memchr::memchr(b'\n', data) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[data.len()..]),
    };
    let spec = String::from_utf8_lossy(spec);
    for (delim, header) in [
        (None, None),
        (Some(";"), Some(true)),
        (Some("space"), Some(false)),
    ] {
        match Delimited::new(&spec, delim, header) {
            Ok(_) => crate::fuzz_read_with(
                "csv",
                rest,
                &crate::ReadOptions {
                    columns: Some(spec.to_string()),
                    delimiter: delim.map(str::to_string),
                    header,
                    ..Default::default()
                },
            ),
            Err(m) => assert!(!m.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_units_names_and_op_maps() {
        let c = Columns::parse("time=1:ms, op=rwbs:read=R/RS;write=W/ws, offset=3:sectors, size=Bytes:4096, device=5, response=6:us").unwrap();
        assert_eq!(c.time, (Col::Index(0), TimeUnit::Ms));
        assert_eq!(c.op.0, Col::Name("rwbs".into()));
        assert_eq!(c.op.1.get(b"rs"), Some(Op::Read));
        assert_eq!(c.op.1.get(b"WS"), Some(Op::Write));
        assert_eq!(c.op.1.get(b"D"), None);
        assert_eq!(c.offset, (Col::Index(2), 512));
        assert_eq!(c.size, (Col::Name("Bytes".into()), 4096));
        assert_eq!(c.device, Some(Col::Index(4)));
        assert_eq!(c.response, Some((Col::Index(5), TimeUnit::Us)));
        // Defaults: seconds, bytes, r/read and w/write.
        let d = Columns::parse("time=1,op=2,offset=3,size=4").unwrap();
        assert_eq!((d.time.1, d.offset.1, d.size.1), (TimeUnit::S, 1, 1));
        assert_eq!(d.op.1.get(b"Read"), Some(Op::Read));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let e = |s: &str| Columns::parse(s).unwrap_err();
        assert_eq!(
            e("time=1,op=2,offset=3"),
            "no column for size (time, op, offset and size are required)"
        );
        assert_eq!(
            e("time=1:sec,op=2,offset=3,size=4"),
            "time: unit `sec` (expected s, ms, us, ns or filetime)"
        );
        assert_eq!(
            e("time=0,op=2,offset=3,size=4"),
            "time: column index `0` out of range (expected 1 to 1024)"
        );
        assert_eq!(
            e("time=1,op=2,offset=3:blocks,size=4"),
            "offset: unit `blocks` (expected bytes, sectors or a block size in bytes such as 4096)"
        );
        assert_eq!(
            e("time=1,op=2:read=R,offset=3,size=4"),
            "op: mapping `read=R` must give values for both read and write (read=V1/V2;write=V3)"
        );
        assert_eq!(
            e("time=1,op=2:read=R;write=r,offset=3,size=4"),
            "op: value `r` mapped twice (to read and write)"
        );
        assert_eq!(
            e("time=1,lba=2,op=2,offset=3,size=4"),
            "unknown field `lba` (expected time, op, offset, size, device or response)"
        );
        assert_eq!(e("time=1,time=2"), "time: given twice");
        assert_eq!(e("time"), "`time`: expected FIELD=COLUMN[:UNIT]");
        assert!(e(&"x".repeat(MAX_SPEC + 1)).starts_with("longer than"));
    }

    #[test]
    fn delimiters_parse() {
        assert_eq!(Delimiter::parse("tab"), Ok(Delimiter::Byte(b'\t')));
        assert_eq!(Delimiter::parse(";"), Ok(Delimiter::Byte(b';')));
        assert_eq!(Delimiter::parse("space"), Ok(Delimiter::Whitespace));
        assert!(Delimiter::parse("ab").is_err());
        assert!(Delimiter::parse("x").is_err());
    }
}
