//! The machinery every text reader shares: lenient/strict handling of bad lines, device
//! selection and stable device numbering, time-origin rebasing and the arrival-order check.
//! A format only has to turn one line into a [`Raw`] record. A binary format whose records
//! can be cut out one at a time (blktrace, [`crate::blktrace`]) shares it too: its
//! [`Units`] hand out records where a text trace's hand out lines.

use crate::completions::Event;
use crate::error::{FormatError, Location};
use crate::lines::{FieldError, LineError, LineReader};
use crate::ReadOptions;
use std::collections::HashMap;
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Read;
use std::path::Path;
use wattio_core::{Nanos, Op, Request, TraceError, TraceSource};

/// How many bad lines lenient mode quotes in its report.
pub const QUOTED_ERRORS: usize = 5;
/// How many keys of skipped devices a selection's report names.
const SHOWN_KEYS: usize = 8;

/// A device/volume/LUN key as it appears in the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DevKey<'a> {
    Num(u64),
    Bytes(&'a [u8]),
}

/// An owned device key (selection, the mapping table).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OwnedKey {
    Num(u64),
    Bytes(Vec<u8>),
}

impl DevKey<'_> {
    #[inline]
    fn matches(&self, k: &OwnedKey) -> bool {
        match (self, k) {
            (DevKey::Num(a), OwnedKey::Num(b)) => a == b,
            (DevKey::Bytes(a), OwnedKey::Bytes(b)) => *a == b.as_slice(),
            _ => false,
        }
    }
}

/// One record as a format parsed it: time already in ns of the format's own clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Raw<'a> {
    pub time: Nanos,
    pub op: Op,
    pub offset: u64,
    pub len: u64,
    pub dev: DevKey<'a>,
    pub stream: u32,
    pub measured: Option<Nanos>,
}

/// The completion of a request (blkparse's and blktrace's `C`), paired by [`TextSource`]
/// with the kept record of the same device, op and offset that is still waiting, to give
/// that record its `measured` time (completion − kept event).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Completion<'a> {
    pub time: Nanos,
    pub op: Op,
    pub offset: u64,
    /// Bytes completed: a request's merged bios complete with it, in its range.
    pub len: u64,
    pub dev: DevKey<'a>,
    /// The completion reported an error.
    pub failed: bool,
    /// What happened: a completion, or a front merge or requeue the pairing follows.
    pub kind: Event,
}

/// What a parsed line turned out to be.
pub enum Parsed<'a> {
    Record(Raw<'a>),
    /// A completion to pair with an earlier record (only from formats whose
    /// [`LineFormat::pairs_completions`] is true).
    Completion(Completion<'a>),
    /// Header, comment, blank line, a blkparse event of another action, …: not a request.
    Skip,
    /// A request the format can carry but the request model cannot (blkparse `N`
    /// without flush, …): counted and reported, never silently dropped.
    Unsupported(&'static str),
    /// The data part of the input is over (blkparse's summary section).
    End,
}

/// A text trace format.
pub trait LineFormat: Send {
    /// Short name (`msr`, `blkparse`, …).
    fn name(&self) -> &'static str;
    /// The form of one record line, quoted in errors.
    fn line_form(&self) -> &'static str;
    fn parse<'a>(&mut self, line: &'a [u8]) -> Result<Parsed<'a>, FieldError>;
    /// Does the clock count from an absolute epoch (so the reader rebases it to the first
    /// record), or from the start of the trace?
    fn absolute_clock(&self) -> bool;
    /// Unit conversions and rules this format applies, for [`TraceSource::assumptions`].
    fn assumptions(&self) -> Vec<String>;
    /// Turns a user's device selection (`hm_1`, `8,16`, `419`) into this format's key.
    fn parse_selection(&self, sel: &str) -> Result<OwnedKey, String>;
    fn display_key(&self, k: &OwnedKey) -> String {
        match k {
            OwnedKey::Num(n) => n.to_string(),
            OwnedKey::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        }
    }
    /// Called once at the end of input (or of its data part, [`Parsed::End`]), to complain
    /// about e.g. a missing header.
    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Does the format hand out [`Parsed::Completion`]s, so records wait for theirs before
    /// they are read out?
    fn pairs_completions(&self) -> bool {
        false
    }
    /// The event kept, named in the pairing's report (`D`).
    fn kept_event(&self) -> char {
        '?'
    }
    /// Are the records out of arrival order by nature (logged at completion, per CPU)? The
    /// reader then holds them all — at most [`MAX_SORTED`] — sorts them by arrival and
    /// counts time from the earliest, instead of refusing a time that goes backwards.
    fn unsorted(&self) -> bool {
        false
    }
}

/// Records a reader of an [`LineFormat::unsorted`] format holds to sort them, at most (a
/// [`Request`] each: a few hundred MB at the bound).
pub const MAX_SORTED: usize = 1 << 22;

/// Where a [`TextSource`] gets its units from: the lines of a text trace
/// ([`LineReader`]), or the records of a binary one.
pub trait Units: Send {
    /// The next unit, `Ok(None)` at the end of input.
    fn next_unit(&mut self) -> Result<Option<&[u8]>, LineError>;
    /// Where byte `column` (1-based) of the unit last returned is.
    fn location(&self, column: u64) -> Location;
    /// Where the unit that could not be read begins (after a [`LineError`]).
    fn next_location(&self) -> Location;
    /// The file the unit last returned came from, when the units are merged from several.
    fn file(&self) -> Option<&str> {
        None
    }
    /// The input began with a UTF-8 byte order mark (skipped).
    fn bom(&self) -> bool {
        false
    }
}

impl<R: Read + Send> Units for LineReader<R> {
    fn next_unit(&mut self) -> Result<Option<&[u8]>, LineError> {
        self.next_line()
    }
    fn location(&self, column: u64) -> Location {
        Location::Line {
            line: self.line_no,
            column,
        }
    }
    fn next_location(&self) -> Location {
        Location::Line {
            line: self.line_no + 1,
            column: 1,
        }
    }
    fn bom(&self) -> bool {
        self.bom
    }
}

/// A multiply-rotate hash (the rustc "Fx" scheme) for device keys: a trace interleaving a
/// few volumes looks its key up on every line, and SipHash's DoS resistance buys nothing
/// for a local file while costing a fifth of the MSR parse time. The key count is capped at
/// 65536, so even adversarial collisions stay cheap.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl KeyHasher {
    const K: u64 = 0xf135_7aea_2e62_a9c5;
    #[inline(always)]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(Self::K);
    }
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Stable device numbering in order of first appearance. A one-entry cache in front of the
/// maps keeps the common case (long runs of one device) free of hashing, and lookups never
/// allocate: only a device seen for the first time costs an allocation.
#[derive(Default)]
struct DevMap {
    /// The id of the previous line's device: its key is `order[last]`, so the cache costs
    /// one comparison and no copy.
    last: Option<u16>,
    nums: HashMap<u64, u16, BuildHasherDefault<KeyHasher>>,
    bytes: HashMap<Vec<u8>, u16, BuildHasherDefault<KeyHasher>>,
    order: Vec<OwnedKey>,
}

impl DevMap {
    fn next_id(&mut self, k: OwnedKey) -> Result<u16, String> {
        let id = u16::try_from(self.order.len())
            .map_err(|_| "more than 65536 devices in one trace".to_string())?;
        self.order.push(k);
        Ok(id)
    }

    #[inline]
    fn id(&mut self, key: DevKey<'_>) -> Result<u16, String> {
        if let Some(l) = self.last {
            if self
                .order
                .get(usize::from(l))
                .is_some_and(|k| key.matches(k))
            {
                return Ok(l);
            }
        }
        let id = match key {
            DevKey::Num(n) => match self.nums.get(&n) {
                Some(&id) => id,
                None => {
                    let id = self.next_id(OwnedKey::Num(n))?;
                    self.nums.insert(n, id);
                    id
                }
            },
            DevKey::Bytes(b) => match self.bytes.get(b) {
                Some(&id) => id,
                None => {
                    let id = self.next_id(OwnedKey::Bytes(b.to_vec()))?;
                    self.bytes.insert(b.to_vec(), id);
                    id
                }
            },
        };
        self.last = Some(id);
        Ok(id)
    }

    /// The id of a device already numbered (a completion's: it cannot be a new device's
    /// first appearance worth numbering).
    fn get(&self, key: DevKey<'_>) -> Option<u16> {
        match key {
            DevKey::Num(n) => self.nums.get(&n).copied(),
            DevKey::Bytes(b) => self.bytes.get(b).copied(),
        }
    }
}

/// What [`TextSource::parse_next`] found.
enum Item {
    Request(Request),
    /// A completion, on the requests' clock.
    Completion {
        dev: u16,
        op: Op,
        offset: u64,
        len: u64,
        at: Nanos,
        failed: bool,
        kind: Event,
    },
}

/// A [`TraceSource`] over a text trace in format `F` (or a binary one cut into records).
pub struct TextSource<F: LineFormat, U: Units = LineReader<File>> {
    fmt: F,
    lines: U,
    file: String,
    lenient: bool,
    select: Option<OwnedKey>,
    rebase: bool,
    origin: Option<Nanos>,
    last_arrival: Nanos,
    devs: DevMap,
    records: u64,
    other_devices: u64,
    /// The first few keys of the devices a selection skipped, to show what there was.
    other_keys: Vec<OwnedKey>,
    unsupported: HashMap<&'static str, u64>,
    bad_lines: u64,
    quoted: Vec<String>,
    done: bool,
    extra: Vec<String>,
    /// Records waiting for their completions (formats that log both).
    pairing: Option<Box<crate::completions::Pairing>>,
    /// An error met while requests were held for their completions: reported after them.
    held_error: Option<FormatError>,
    /// Records read whole and sorted by arrival: an unsorted format's
    /// ([`LineFormat::unsorted`]) or any with [`ReadOptions::sort`]…
    sort: bool,
    /// …then counted from the earliest (an unsorted format's, or an absolute clock's); also
    /// a sort window's records, from the earliest handed out.
    sort_rebase: bool,
    /// The records, sorted, once read.
    sorted: Option<std::collections::VecDeque<Request>>,
    /// `ReadOptions::sort_window`: records held to reorder, at most this many.
    window: Option<Window>,
}

/// A bounded reorder window: records on the trace's own clock (not rebased), earliest first.
struct Window {
    cap: usize,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<Held>>,
    seq: u64,
    /// The trace-clock time of the last record handed out: nothing earlier can go out now.
    last_out: Option<Nanos>,
    /// The earliest record handed out, counted as t = 0 with `sort_rebase`.
    origin: Option<Nanos>,
    /// Input ended (or failed: the error waits behind the records held).
    done: bool,
    error: Option<FormatError>,
}

/// A held record, ordered by (arrival, order read): ties go out in the order they came.
struct Held {
    key: (Nanos, u64),
    r: Request,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key.cmp(&o.key)
    }
}

impl<F: LineFormat> TextSource<F, LineReader<File>> {
    pub fn open(path: &Path, fmt: F, opts: &ReadOptions) -> Result<Self, FormatError> {
        let name = path.display().to_string();
        let f = File::open(path).map_err(|e| FormatError::io(&name, &e))?;
        Self::from_reader(f, name, fmt, opts)
    }
}

impl<F: LineFormat, R: Read + Send> TextSource<F, LineReader<R>> {
    pub fn from_reader(
        r: R,
        file: String,
        fmt: F,
        opts: &ReadOptions,
    ) -> Result<Self, FormatError> {
        let lines = LineReader::with_capacity(r, opts.buffer_size.unwrap_or(1 << 20));
        Self::from_units(lines, file, fmt, opts)
    }
}

impl<F: LineFormat, U: Units> TextSource<F, U> {
    pub fn from_units(
        lines: U,
        file: String,
        fmt: F,
        opts: &ReadOptions,
    ) -> Result<Self, FormatError> {
        let select = match &opts.device {
            Some(s) => Some(fmt.parse_selection(s).map_err(|m| {
                FormatError::file(&file, format!("bad device selection `{s}`: {m}"))
            })?),
            None => None,
        };
        if opts.sort && opts.sort_window.is_some() {
            return Err(FormatError::file(
                &file,
                "--sort and --sort-window: choose one (read whole, or reorder within a window)",
            ));
        }
        let window = opts.sort_window;
        if let Some(n) = window.filter(|&n| n == 0 || n > MAX_SORTED) {
            return Err(FormatError::file(
                &file,
                format!("sort window of {n} records: expected 1 to {MAX_SORTED}"),
            ));
        }
        // Records read whole to be sorted are rebased once sorted, to the earliest arrival;
        // a window's, to the earliest handed out.
        let sort = (fmt.unsorted() || opts.sort) && window.is_none();
        let clock_rebase = fmt.absolute_clock() && !opts.keep_absolute_time;
        let rebase = clock_rebase && !sort && window.is_none();
        let pairing = fmt.pairs_completions().then(Default::default);
        let window = window.map(|cap| Window {
            cap,
            heap: std::collections::BinaryHeap::new(),
            seq: 0,
            last_out: None,
            origin: None,
            done: false,
            error: None,
        });
        Ok(TextSource {
            pairing,
            held_error: None,
            sort,
            sort_rebase: fmt.unsorted() || clock_rebase,
            sorted: None,
            window,
            fmt,
            lines,
            file,
            lenient: opts.lenient,
            select,
            rebase,
            origin: None,
            last_arrival: 0,
            devs: DevMap::default(),
            records: 0,
            other_devices: 0,
            other_keys: Vec::new(),
            unsupported: HashMap::new(),
            bad_lines: 0,
            quoted: Vec::new(),
            done: false,
            extra: Vec::new(),
        })
    }

    /// Adds a line to the assumptions report (e.g. how the format was detected).
    pub fn note(&mut self, s: String) {
        self.extra.push(s);
    }

    fn error_at(&self, column: u64, message: String, expected: String) -> FormatError {
        let file = self.lines.file().unwrap_or(&self.file);
        FormatError::new(file, self.lines.location(column), message).with_expected(expected)
    }

    /// Strict: the error. Lenient: count it, quote the first few, carry on.
    fn bad_line(&mut self, e: FormatError) -> Result<(), FormatError> {
        if !self.lenient {
            return Err(e);
        }
        self.bad_lines += 1;
        if self.quoted.len() < QUOTED_ERRORS {
            self.quoted.push(e.to_string());
        }
        Ok(())
    }

    fn read_next(&mut self) -> Result<Option<Request>, FormatError> {
        if self.window.is_some() {
            return self.read_windowed();
        }
        if self.sort {
            if self.sorted.is_none() {
                self.sorted = Some(self.read_sorted()?);
            }
            return Ok(self.sorted.as_mut().and_then(|q| q.pop_front()));
        }
        self.read_in_order()
    }

    /// The next request in the order the records come (paired with its completion if the
    /// format pairs).
    fn read_in_order(&mut self) -> Result<Option<Request>, FormatError> {
        if self.pairing.is_none() {
            return loop {
                match self.parse_next()? {
                    Some(Item::Request(r)) => break Ok(Some(r)),
                    Some(Item::Completion { .. }) => continue,
                    None => break Ok(None),
                }
            };
        }
        loop {
            if let Some(p) = self.pairing.as_mut() {
                if let Some(r) = p.pop(self.done) {
                    return Ok(Some(r));
                }
            }
            if let Some(e) = self.held_error.take() {
                return Err(e);
            }
            if self.done {
                return Ok(None);
            }
            let item = match self.parse_next() {
                Ok(item) => item,
                // The requests read before the damage go out first (unmeasured if their
                // completions were to come after it), then the error.
                Err(e) => {
                    self.done = true;
                    self.held_error = Some(e);
                    continue;
                }
            };
            let Some(p) = self.pairing.as_mut() else {
                continue;
            };
            match item {
                Some(Item::Request(r)) => p.push(r),
                Some(Item::Completion {
                    dev,
                    op,
                    offset,
                    len,
                    at,
                    failed,
                    kind,
                }) => match kind {
                    Event::Completed => p.complete(dev, op, offset, len, at, failed),
                    Event::FrontMerged => p.front_merge(dev, op, offset, len),
                    Event::Requeued => p.requeue(dev, op, offset),
                },
                None => {}
            }
        }
    }

    /// The earliest record of the window once it holds `cap` + 1 (or the input ended); an
    /// input error goes out after the records read before it.
    fn read_windowed(&mut self) -> Result<Option<Request>, FormatError> {
        loop {
            let w = self.window.as_ref().expect("windowed");
            if w.done || w.heap.len() > w.cap {
                break;
            }
            let next = self.read_in_order();
            let w = self.window.as_mut().expect("windowed");
            match next {
                Ok(Some(r)) => {
                    w.seq += 1;
                    w.heap.push(std::cmp::Reverse(Held {
                        key: (r.arrival, w.seq),
                        r,
                    }));
                }
                Ok(None) => w.done = true,
                Err(e) => {
                    w.done = true;
                    w.error = Some(e);
                }
            }
        }
        let rebase = self.sort_rebase;
        let w = self.window.as_mut().expect("windowed");
        match w.heap.pop() {
            Some(std::cmp::Reverse(Held { mut r, .. })) => {
                w.last_out = Some(r.arrival);
                if rebase {
                    let origin = *w.origin.get_or_insert(r.arrival);
                    r.arrival -= origin;
                }
                Ok(Some(r))
            }
            None => match w.error.take() {
                Some(e) => Err(e),
                None => Ok(None),
            },
        }
    }

    /// Every request, sorted by arrival (ties in the order read) and, with `sort_rebase`,
    /// counted from the earliest. An error ends the read: nothing can go out in order
    /// before the whole input is in.
    fn read_sorted(&mut self) -> Result<std::collections::VecDeque<Request>, FormatError> {
        let mut all = Vec::new();
        while let Some(r) = self.read_in_order()? {
            if all.len() == MAX_SORTED {
                return Err(FormatError::file(
                    &self.file,
                    format!(
                        "more than {MAX_SORTED} requests: a {} trace read out of time order \
                         is sorted in memory",
                        self.fmt.name()
                    ),
                )
                .with_expected("a shorter trace (split the file)"));
            }
            all.push(r);
        }
        all.sort_by_key(|r| r.arrival);
        if self.sort_rebase {
            let origin = all.first().map_or(0, |r| r.arrival);
            for r in &mut all {
                r.arrival -= origin;
            }
            self.origin = Some(origin);
        }
        Ok(all.into())
    }

    /// The next request or completion; `None` at the end of input (`done` is then set).
    #[inline]
    fn parse_next(&mut self) -> Result<Option<Item>, FormatError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let line = match self.lines.next_unit() {
                Ok(Some(l)) => l,
                Ok(None) => {
                    self.done = true;
                    if let Err(m) = self.fmt.finish() {
                        return Err(FormatError::file(&self.file, m));
                    }
                    return Ok(None);
                }
                Err(LineError::Io(e)) => {
                    self.done = true;
                    return Err(FormatError::io(&self.file, &e));
                }
                Err(LineError::TooLong) => {
                    self.done = true;
                    return Err(FormatError::new(
                        &self.file,
                        self.lines.next_location(),
                        format!(
                            "line longer than {} bytes (is this a text trace?)",
                            crate::lines::MAX_LINE
                        ),
                    )
                    .with_expected(self.fmt.line_form()));
                }
                Err(LineError::Record { message, expected }) => {
                    // A binary record that cannot be cut out: nothing after it can be
                    // found again, lenient or not.
                    self.done = true;
                    let file = self.lines.file().unwrap_or(&self.file);
                    return Err(FormatError::new(file, self.lines.next_location(), message)
                        .with_expected(expected));
                }
            };
            // Parse into a value that borrows `line`, then copy the key out before we touch
            // `self` again.
            let parsed = self.fmt.parse(line);
            let raw = match parsed {
                Ok(Parsed::Record(r)) => r,
                Ok(Parsed::Completion(c)) => {
                    let dev = match &self.select {
                        Some(sel) => c.dev.matches(sel).then_some(0),
                        None => self.devs.get(c.dev),
                    };
                    // Before the first kept record there is nothing to complete.
                    let (Some(dev), Some(origin)) = (dev, self.origin) else {
                        if let (Some(p), Event::Completed) = (self.pairing.as_mut(), c.kind) {
                            p.counts.unmatched += 1;
                        }
                        continue;
                    };
                    return Ok(Some(Item::Completion {
                        dev,
                        op: c.op,
                        offset: c.offset,
                        len: c.len,
                        at: c.time.saturating_sub(origin),
                        failed: c.failed,
                        kind: c.kind,
                    }));
                }
                Ok(Parsed::Skip) => continue,
                Ok(Parsed::End) => {
                    self.done = true;
                    if let Err(m) = self.fmt.finish() {
                        return Err(FormatError::file(&self.file, m));
                    }
                    continue;
                }
                Ok(Parsed::Unsupported(what)) => {
                    *self.unsupported.entry(what).or_insert(0) += 1;
                    continue;
                }
                Err(fe) => {
                    let e = self.error_at(fe.column, fe.message, fe.expected);
                    self.bad_line(e)?;
                    continue;
                }
            };
            let (time, op, offset, raw_len, stream, measured) = (
                raw.time,
                raw.op,
                raw.offset,
                raw.len,
                raw.stream,
                raw.measured,
            );
            let selected = match &self.select {
                Some(sel) => Ok(raw.dev.matches(sel).then_some(0)),
                None => self.devs.id(raw.dev).map(Some),
            };
            let selected = match selected {
                Ok(s) => s,
                Err(m) => {
                    let e = self.error_at(1, m, "at most 65536 devices".into());
                    return Err(e);
                }
            };
            let Some(dev) = selected else {
                self.other_devices += 1;
                if self.other_keys.len() < SHOWN_KEYS
                    && !self.other_keys.iter().any(|k| raw.dev.matches(k))
                {
                    self.other_keys.push(match raw.dev {
                        DevKey::Num(n) => OwnedKey::Num(n),
                        DevKey::Bytes(b) => OwnedKey::Bytes(b.to_vec()),
                    });
                }
                continue;
            };
            let len = match u32::try_from(raw_len) {
                Ok(l) => l,
                Err(_) => {
                    let e = self.error_at(
                        1,
                        format!("request length {raw_len} bytes does not fit in 32 bits"),
                        "a request of less than 4 GiB".into(),
                    );
                    self.bad_line(e)?;
                    continue;
                }
            };
            if offset.checked_add(raw_len).is_none() {
                let e = self.error_at(
                    1,
                    format!("offset {offset} + length {raw_len} overflows"),
                    "a request inside a 64-bit byte address space".into(),
                );
                self.bad_line(e)?;
                continue;
            }
            let origin = *self
                .origin
                .get_or_insert(if self.rebase { time } else { 0 });
            if let Some(last) = self.window.as_ref().and_then(|w| w.last_out) {
                if time < last {
                    let cap = self.window.as_ref().map_or(0, |w| w.cap);
                    let e = self.error_at(
                        1,
                        format!(
                            "arrival {time} ns on the trace's clock is before {last} ns, already handed out: out of the {cap}-record sort window"
                        ),
                        "a wider --sort-window, or --sort to read the trace whole".into(),
                    );
                    self.bad_line(e)?;
                    continue;
                }
            }
            if !self.sort
                && self.window.is_none()
                && (time < origin || time - origin < self.last_arrival)
            {
                let e = self.error_at(
                    1,
                    format!(
                        "arrival goes backwards: {} ns after the origin, previous request at {} ns",
                        time as i128 - origin as i128,
                        self.last_arrival
                    ),
                    "records in non-decreasing time order, or --sort to read them whole and \
                     sort them"
                        .into(),
                );
                self.bad_line(e)?;
                continue;
            }
            let arrival = time - origin;
            self.last_arrival = arrival;
            self.records += 1;
            return Ok(Some(Item::Request(Request {
                arrival,
                op,
                offset,
                len,
                dev,
                stream,
                file: None,
                call_site: None,
                measured,
                fua: false,
            })));
        }
    }
}

impl<F: LineFormat, U: Units> TraceSource for TextSource<F, U> {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        self.read_next().map_err(TraceError::from)
    }

    fn assumptions(&self) -> Vec<String> {
        let mut v = self.extra.clone();
        v.push(format!("format: {}", self.fmt.name()));
        if self.lines.bom() {
            v.push("the file starts with a UTF-8 byte order mark (skipped)".into());
        }
        v.extend(self.fmt.assumptions());
        if self.rebase {
            match self.origin {
                Some(o) => v.push(format!(
                    "time origin: the first record's timestamp ({o} ns on the trace's clock) is t = 0"
                )),
                None => v.push("time origin: the first record's timestamp is t = 0".into()),
            }
        } else if let Some(w) = &self.window {
            let origin = match (self.sort_rebase, w.origin) {
                (true, Some(o)) => {
                    format!(": the earliest handed out ({o} ns on the trace's clock) is t = 0")
                }
                (true, None) => ": the earliest handed out is t = 0".into(),
                (false, _) => String::new(),
            };
            v.push(format!(
                "records reordered by arrival within a window of {} (--sort-window){origin}",
                w.cap
            ));
        } else if self.sort {
            let why = if self.fmt.unsorted() {
                "the format logs them out of order"
            } else {
                "--sort"
            };
            let origin = if self.sort_rebase {
                ": the earliest arrival is t = 0"
            } else {
                ""
            };
            v.push(format!(
                "records sorted by arrival ({why}; at most {MAX_SORTED} held){origin}"
            ));
        } else if self.fmt.absolute_clock() {
            v.push("time origin: kept the trace's absolute clock".into());
        }
        match &self.select {
            Some(k) => {
                let mut seen: Vec<String> = self
                    .other_keys
                    .iter()
                    .map(|k| self.fmt.display_key(k))
                    .collect();
                if self.other_keys.len() == SHOWN_KEYS {
                    seen.push("…".into());
                }
                let seen = if seen.is_empty() {
                    String::new()
                } else {
                    format!(" (keys seen: {})", seen.join(", "))
                };
                v.push(format!(
                    "device: selected {} only (as dev 0); {} records of other devices skipped{seen}",
                    self.fmt.display_key(k),
                    self.other_devices
                ))
            }
            None => {
                if !self.devs.order.is_empty() {
                    let shown: Vec<String> = self
                        .devs
                        .order
                        .iter()
                        .take(32)
                        .enumerate()
                        .map(|(i, k)| format!("{i}={}", self.fmt.display_key(k)))
                        .collect();
                    let more = if self.devs.order.len() > 32 {
                        format!(" … ({} in all)", self.devs.order.len())
                    } else {
                        String::new()
                    };
                    v.push(format!(
                        "devices: numbered in order of first appearance: {}{more}",
                        shown.join(", ")
                    ));
                }
            }
        }
        if let Some(p) = &self.pairing {
            v.extend(p.notes(self.fmt.kept_event()));
        }
        let mut unsup: Vec<_> = self.unsupported.iter().collect();
        unsup.sort();
        for (what, n) in unsup {
            v.push(format!("skipped {n} records: {what}"));
        }
        if self.lenient {
            v.push(format!("lenient: skipped {} bad lines", self.bad_lines));
            for q in &self.quoted {
                v.push(format!("  bad line: {q}"));
            }
        }
        v
    }
}

/// 512-byte sectors to bytes, refusing overflow.
pub fn sectors(n: u64, col: usize) -> Result<u64, FieldError> {
    n.checked_mul(512).ok_or_else(|| {
        FieldError::new(
            col,
            format!("{n} sectors overflow a 64-bit byte offset"),
            "a sector count below 2^55",
        )
    })
}
