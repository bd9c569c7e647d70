//! Byte-level building blocks of the text readers: a line reader that never allocates per
//! line, a field cursor that knows its column, and exact decimal-to-integer conversion.
//!
//! Text traces are large (MSR Cambridge is tens of GB), so parsing works on borrowed byte
//! slices of one reusable buffer; UTF-8 is never required.

use std::io::Read;

/// Lines longer than this are refused: no trace format has lines anywhere near it, and a
/// binary file fed by mistake must not make the buffer grow without bound.
pub const MAX_LINE: usize = 1 << 20;
const BUF_SIZE: usize = 1 << 20;

/// A problem inside one line: 1-based byte column, what was wrong, and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub column: u64,
    pub message: String,
    pub expected: String,
}

impl FieldError {
    pub fn new(column: usize, message: impl Into<String>, expected: impl Into<String>) -> Self {
        FieldError {
            column: column as u64 + 1,
            message: message.into(),
            expected: expected.into(),
        }
    }
}

/// Reads `\n`-terminated lines (a trailing `\r` is dropped) out of one reusable buffer.
pub struct LineReader<R: Read> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// 1-based number of the line last returned.
    pub line_no: u64,
    /// Byte offset in the input of the start of the line last returned.
    pub line_offset: u64,
    consumed: u64,
    /// The input began with a UTF-8 byte order mark (skipped).
    pub bom: bool,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why [`LineReader::next_line`] could not return a line.
#[derive(Debug)]
pub enum LineError {
    Io(std::io::Error),
    TooLong,
    /// A binary record that cannot be cut out (a bad magic, a truncated record): what is
    /// wrong, and what was expected there.
    Record {
        message: String,
        expected: String,
    },
}

impl<R: Read> LineReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_capacity(inner, BUF_SIZE)
    }

    /// A reader whose buffer starts at `cap` bytes (it grows for longer lines).
    pub fn with_capacity(inner: R, cap: usize) -> Self {
        LineReader {
            inner,
            buf: vec![0; cap.clamp(1, BUF_SIZE)],
            start: 0,
            end: 0,
            eof: false,
            line_no: 0,
            line_offset: 0,
            consumed: 0,
            bom: false,
        }
    }

    /// The next line without its terminator, `Ok(None)` at end of input.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, LineError> {
        let mut scan_from = self.start;
        loop {
            if let Some(pos) = memchr::memchr(b'\n', &self.buf[scan_from..self.end]) {
                let nl = scan_from + pos;
                let s = self.start;
                self.start = nl + 1;
                return Ok(Some(self.finish_line(s, nl)));
            }
            if self.eof {
                if self.start < self.end {
                    let (s, e) = (self.start, self.end);
                    self.start = self.end;
                    return Ok(Some(self.finish_line(s, e)));
                }
                return Ok(None);
            }
            // Move the partial line to the front, then fill; grow only for a line longer
            // than the buffer.
            let pending = self.end - self.start;
            if pending > MAX_LINE {
                return Err(LineError::TooLong);
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.start = 0;
                self.end = pending;
            }
            scan_from = self.end;
            if self.end == self.buf.len() {
                let n = (self.buf.len() * 2).clamp(1, MAX_LINE + 1);
                if n <= self.buf.len() {
                    return Err(LineError::TooLong);
                }
                self.buf.resize(n, 0);
            }
            let n = loop {
                match self.inner.read(&mut self.buf[self.end..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(LineError::Io(e)),
                }
            };
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
        }
    }

    fn finish_line(&mut self, s: usize, e: usize) -> &[u8] {
        self.line_no += 1;
        self.line_offset = self.consumed;
        // consumed counts the terminator too, so offsets stay exact.
        self.consumed += (self.start - s) as u64;
        let mut e = e;
        if e > s && self.buf[e - 1] == b'\r' {
            e -= 1;
        }
        let mut s = s;
        // A UTF-8 byte order mark (editors on Windows write one) is not data: skip it, and
        // let the reader report it. Columns on line 1 count from after the mark.
        if self.line_no == 1 && self.buf[s..e].starts_with(BOM) {
            s += BOM.len();
            self.bom = true;
        }
        &self.buf[s..e]
    }
}

/// Walks the fields of one line, separated either by one delimiter byte (CSV) or by runs of
/// spaces/tabs, keeping the column of each field for error messages.
pub struct Fields<'a> {
    line: &'a [u8],
    pos: usize,
    delim: Option<u8>,
    /// Start column (0-based) of the field last returned.
    pub col: usize,
    done: bool,
}

impl<'a> Fields<'a> {
    pub fn csv(line: &'a [u8]) -> Self {
        Fields {
            line,
            pos: 0,
            delim: Some(b','),
            col: 0,
            done: false,
        }
    }

    pub fn ws(line: &'a [u8]) -> Self {
        let mut f = Fields {
            line,
            pos: 0,
            delim: None,
            col: 0,
            done: false,
        };
        f.skip_ws();
        f
    }

    fn skip_ws(&mut self) {
        while self.pos < self.line.len() && matches!(self.line[self.pos], b' ' | b'\t') {
            self.pos += 1;
        }
    }

    /// The next field, or `None` when the line has no more.
    pub fn next_field(&mut self) -> Option<&'a [u8]> {
        match self.delim {
            Some(d) => {
                if self.done {
                    return None;
                }
                let s = self.pos;
                self.col = s;
                let rest = &self.line[s..];
                match memchr::memchr(d, rest) {
                    Some(i) => {
                        self.pos = s + i + 1;
                        Some(&rest[..i])
                    }
                    None => {
                        self.done = true;
                        self.pos = self.line.len();
                        Some(rest)
                    }
                }
            }
            None => {
                if self.pos >= self.line.len() {
                    return None;
                }
                let s = self.pos;
                self.col = s;
                while self.pos < self.line.len() && !matches!(self.line[self.pos], b' ' | b'\t') {
                    self.pos += 1;
                }
                let f = &self.line[s..self.pos];
                self.skip_ws();
                Some(f)
            }
        }
    }

    /// The next field, or an error at the end of the line naming what was expected.
    pub fn req(&mut self, expected: &str) -> Result<&'a [u8], FieldError> {
        match self.next_field() {
            Some(f) => Ok(f),
            None => Err(FieldError::new(
                self.line.len(),
                "line ends early",
                expected.to_string(),
            )),
        }
    }

    /// Column (0-based) where the next field would start.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Everything not yet consumed.
    pub fn rest(&self) -> &'a [u8] {
        &self.line[self.pos.min(self.line.len())..]
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.line.len() && (self.delim.is_none() || self.done)
    }

    pub fn err(&self, message: impl Into<String>, expected: impl Into<String>) -> FieldError {
        FieldError::new(self.col, message, expected)
    }

    /// The next field as an unsigned decimal integer (surrounding spaces allowed in CSV).
    pub fn u64(&mut self, expected: &str) -> Result<u64, FieldError> {
        let f = self.req(expected)?;
        parse_u64(trim(f)).ok_or_else(|| self.bad(f, expected))
    }

    /// The next field as a non-negative decimal number scaled exactly by `scale` (e.g.
    /// seconds → ns with `scale = 1e9`), rounded half up below the scale's resolution.
    pub fn decimal(&mut self, scale: u64, expected: &str) -> Result<u64, FieldError> {
        let f = self.req(expected)?;
        parse_decimal(trim(f), scale).ok_or_else(|| self.bad(f, expected))
    }

    pub fn bad(&self, f: &[u8], expected: &str) -> FieldError {
        FieldError::new(
            self.col,
            format!("bad field `{}`", show(f)),
            expected.to_string(),
        )
    }
}

/// A field for an error message: lossy UTF-8, shortened, with control and invisible
/// characters escaped (a terminal must never interpret bytes from a trace).
pub fn show(f: &[u8]) -> String {
    let s = crate::error::printable(&String::from_utf8_lossy(&f[..f.len().min(40)])).into_owned();
    if f.len() > 40 {
        format!("{s}…")
    } else {
        s
    }
}

pub fn trim(f: &[u8]) -> &[u8] {
    let mut s = 0;
    let mut e = f.len();
    while s < e && matches!(f[s], b' ' | b'\t') {
        s += 1;
    }
    while e > s && matches!(f[e - 1], b' ' | b'\t') {
        e -= 1;
    }
    &f[s..e]
}

/// Unsigned decimal integer; `None` on empty input, a non-digit or overflow.
#[inline]
pub fn parse_u64(f: &[u8]) -> Option<u64> {
    if f.is_empty() || f.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in f {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// A non-negative decimal `I[.F]` times `scale` (a power of ten ≥ 1), computed exactly in
/// integers so that no float rounding creeps into timestamps; digits below the scale's
/// resolution round half up. `None` on anything else (signs, exponents, overflow).
pub fn parse_decimal(f: &[u8], scale: u64) -> Option<u64> {
    if f.is_empty() {
        return None;
    }
    let (int, frac) = match memchr::memchr(b'.', f) {
        Some(i) => (&f[..i], &f[i + 1..]),
        None => (f, &f[f.len()..]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let iv = if int.is_empty() { 0 } else { parse_u64(int)? };
    let mut v = iv.checked_mul(scale)?;
    let mut unit = scale;
    let mut round_up = false;
    for (k, &b) in frac.iter().enumerate() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        if unit >= 10 {
            unit /= 10;
            v = v.checked_add(d as u64 * unit)?;
        } else if k < 64 && unit == 1 {
            // First digit below resolution decides rounding; later ones are only validated.
            round_up = d >= 5;
            unit = 0;
        }
    }
    if round_up {
        v = v.checked_add(1)?;
    }
    Some(v)
}

/// The decimal digits at `start..`, up to the first non-digit: their value and where they
/// end. At most 19 digits, so the value cannot overflow and needs no checked arithmetic;
/// `None` for no digit or more than 19 (the fast paths leave those to the general parsers).
#[inline(always)]
pub(crate) fn digits(line: &[u8], start: usize) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut i = start;
    while let Some(&b) = line.get(i) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    if i == start || i - start > 19 {
        return None;
    }
    Some((v, i))
}

/// Writes `ns / scale` as a decimal with exactly `digits` fractional digits (the inverse
/// of [`parse_decimal`] when `10^digits == scale`).
pub fn format_decimal(out: &mut Vec<u8>, ns: u64, scale: u64, digits: usize) {
    use std::io::Write;
    let _ = write!(out, "{}", ns / scale);
    if digits > 0 {
        let _ = write!(out, ".{:0width$}", ns % scale, width = digits);
    }
}

/// Reads until `buf` is full or the input ends (retrying interrupted reads); the bytes
/// read. The binary readers' one loop for a record, a header or a block.
pub fn read_full<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_is_exact_and_rounds_half_up() {
        assert_eq!(
            parse_decimal(b"1.427376394", 1_000_000_000),
            Some(1_427_376_394)
        );
        assert_eq!(parse_decimal(b"13.191135", 1_000_000), Some(13_191_135));
        assert_eq!(parse_decimal(b"663.00000", 1_000), Some(663_000));
        assert_eq!(parse_decimal(b"0.0000005", 1_000_000), Some(1));
        assert_eq!(parse_decimal(b"0.0000004", 1_000_000), Some(0));
        assert_eq!(parse_decimal(b"7", 1_000), Some(7_000));
        assert_eq!(parse_decimal(b".5", 1_000), Some(500));
        assert_eq!(parse_decimal(b"-1", 1_000), None);
        assert_eq!(parse_decimal(b"1e3", 1_000), None);
        assert_eq!(parse_decimal(b".", 1_000), None);
        assert_eq!(parse_decimal(b"99999999999999999999", 1_000), None);
    }

    #[test]
    fn format_decimal_inverts_parse() {
        let mut v = Vec::new();
        format_decimal(&mut v, 13_191_135, 1_000_000, 6);
        assert_eq!(v, b"13.191135");
        assert_eq!(parse_decimal(&v, 1_000_000), Some(13_191_135));
    }

    #[test]
    fn line_reader_counts_lines_and_offsets_and_strips_cr() {
        let data = b"ab\r\ncd\n\nlast";
        let mut r = LineReader::new(&data[..]);
        let mut got = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            got.push((l.to_vec(), r.line_no, r.line_offset));
        }
        assert_eq!(
            got,
            vec![
                (b"ab".to_vec(), 1, 0),
                (b"cd".to_vec(), 2, 4),
                (b"".to_vec(), 3, 7),
                (b"last".to_vec(), 4, 8)
            ]
        );
    }

    #[test]
    fn line_reader_handles_lines_across_buffer_refills() {
        // A reader that returns 3 bytes at a time forces every refill path.
        struct Slow<'a>(&'a [u8]);
        impl Read for Slow<'_> {
            fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(3).min(b.len());
                b[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut r = LineReader::with_capacity(Slow(b"hello world\nx\n"), 4);
        assert_eq!(r.next_line().unwrap(), Some(&b"hello world"[..]));
        assert_eq!(r.next_line().unwrap(), Some(&b"x"[..]));
        assert_eq!(r.next_line().unwrap(), None);
    }

    #[test]
    fn line_reader_refuses_lines_over_the_limit() {
        let mut data = vec![b'x'; MAX_LINE + 10];
        data.push(b'\n');
        let mut r = LineReader::with_capacity(&data[..], 1024);
        assert!(matches!(r.next_line(), Err(LineError::TooLong)));
        let mut ok = vec![b'y'; MAX_LINE];
        ok.push(b'\n');
        let mut r = LineReader::with_capacity(&ok[..], 1024);
        assert_eq!(r.next_line().unwrap().map(|l| l.len()), Some(MAX_LINE));
    }

    #[test]
    fn fields_report_columns() {
        let mut f = Fields::csv(b"12,ab, 7");
        assert_eq!(f.u64("n").unwrap(), 12);
        assert_eq!(f.req("s").unwrap(), b"ab");
        assert_eq!(f.u64("n").unwrap(), 7);
        assert!(f.next_field().is_none());
        let mut f = Fields::ws(b"  1\t x  22 ");
        assert_eq!(f.u64("n").unwrap(), 1);
        let e = f.u64("an integer").unwrap_err();
        assert_eq!(e.column, 6);
        assert_eq!(f.u64("n").unwrap(), 22);
        assert!(f.next_field().is_none());
    }
}
