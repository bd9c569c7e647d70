//! wattio's own trace file: Parquet, one row per request.
//!
//! Columns: `arrival_ns: UInt64`, `op: UInt8` (0 read, 1 write, 2 flush, 3 discard),
//! `offset: UInt64` (bytes), `len: UInt32` (bytes), `dev: UInt16`, `stream: UInt32`,
//! `file`, `call_site`, `measured_ns`: nullable `UInt64` (types as Arrow names them; in
//! Parquet, INT32/INT64 with unsigned-integer annotations). File key-value metadata
//! `wattio.trace.version = "1"` plus free-form provenance. Rows are in non-decreasing arrival.
//!
//! Both sides stream: the writer holds one row group's values, the reader one run of decoded
//! rows, so memory does not grow with trace length. Both go through the Parquet crate's
//! column API ([`crate::parquet_io`]).

use crate::error::{FormatError, Location};
use crate::parquet_io::{self, contain, Chunk, Col, Groups, Kind, Nullable, Nulls};
use crate::writer::TraceWriter;
use parquet::basic::{Compression, Encoding};
use parquet::data_type::{Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, RowGroupReader};
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::Path;
use wattio_core::{Op, Request, TraceError, TraceSource};

pub const VERSION_KEY: &str = "wattio.trace.version";
pub const VERSION: &str = "1";
/// Provenance values longer than this are reported by their size in the assumptions.
const PROVENANCE_SHOWN: usize = 4096;
/// Rows per `next_batch` call at most.
const BATCH_ROWS: usize = 64 * 1024;
/// Rows decoded from the columns at a time: their values (a few tens of KiB a column) and
/// the decoded `Request`s (320 KiB) stay in the L2 cache until they are handed out.
const READ_BATCH_ROWS: usize = 4096;
/// Rows converted to `Request`s at a time by `next_request`.
const CHUNK_ROWS: usize = 512;
/// Rows per row group. The writer holds a row group's values until it is written (about
/// 60 B a row: 16 MB), and a row group is compressed as a unit: large enough for good
/// compression and few seeks.
const ROW_GROUP_ROWS: usize = 256 * 1024;

/// The columns, in file order.
pub const COLUMNS: [Col; 9] = [
    Col::new("arrival_ns", Kind::UInt64),
    Col::new("op", Kind::UInt8),
    Col::new("offset", Kind::UInt64),
    Col::new("len", Kind::UInt32),
    Col::new("dev", Kind::UInt16),
    Col::new("stream", Kind::UInt32),
    Col::new("file", Kind::UInt64).nullable(),
    Col::new("call_site", Kind::UInt64).nullable(),
    Col::new("measured_ns", Kind::UInt64).nullable(),
];

/// Encoding choices that make reading cheap (the reader's target is ≥ 50 M requests/s):
/// no compression (Snappy decompression was a fifth of the read time), and the 64-bit
/// columns delta-bit-packed instead of dictionary-encoded: sorted arrivals become small
/// deltas, and offsets and latencies shrink to the bits they use, so the file is smaller
/// than the old Snappy one (21.6 vs 28.4 MB for the benchmark's 1.84 M requests) and there is
/// less to copy out of the page cache. Low-cardinality columns (op, len, dev, stream) keep
/// the dictionary: it is their compression. Readers accept any Parquet encoding and codec
/// the crate is built with (files written before this change are Snappy-compressed).
fn writer_properties(
    b: parquet::file::properties::WriterPropertiesBuilder,
) -> parquet::file::properties::WriterPropertiesBuilder {
    let mut b = b.set_compression(Compression::UNCOMPRESSED);
    for c in ["arrival_ns", "offset", "file", "call_site", "measured_ns"] {
        b = b
            .set_column_dictionary_enabled(ColumnPath::from(c), false)
            .set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
    }
    b
}

/// Streams requests into a columnar trace file.
pub struct ColumnarWriter {
    file: String,
    writer: parquet_io::Writer,
    // Parquet's physical types: unsigned values are stored in the signed integers of their
    // width and the annotations say how to read them back (as Arrow stores them).
    arrival: Vec<i64>,
    op: Vec<i32>,
    offset: Vec<i64>,
    len: Vec<i32>,
    dev: Vec<i32>,
    stream: Vec<i32>,
    fileid: Nullable<i64>,
    call_site: Nullable<i64>,
    measured: Nullable<i64>,
    rows: u64,
    last_arrival: u64,
}

fn pq_err(file: &str, e: impl std::fmt::Display) -> FormatError {
    FormatError::file(file, format!("Parquet: {e}"))
}

impl ColumnarWriter {
    pub fn create(path: &Path, provenance: &[(String, String)]) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let mut kv = vec![KeyValue::new(VERSION_KEY.to_string(), VERSION.to_string())];
        for (k, v) in provenance {
            if k != VERSION_KEY {
                kv.push(KeyValue::new(k.clone(), v.clone()));
            }
        }
        let props = writer_properties(WriterProperties::builder())
            .set_key_value_metadata(Some(kv))
            .build();
        let f = File::create(path).map_err(|e| FormatError::io(&file, &e))?;
        let writer = parquet_io::Writer::new(f, &COLUMNS, props).map_err(|e| pq_err(&file, e))?;
        Ok(ColumnarWriter {
            file,
            writer,
            arrival: Vec::new(),
            op: Vec::new(),
            offset: Vec::new(),
            len: Vec::new(),
            dev: Vec::new(),
            stream: Vec::new(),
            fileid: Nullable::default(),
            call_site: Nullable::default(),
            measured: Nullable::default(),
            rows: 0,
            last_arrival: 0,
        })
    }

    pub fn write(&mut self, r: &Request) -> Result<(), FormatError> {
        if r.arrival < self.last_arrival {
            return Err(FormatError::new(
                &self.file,
                Location::Row(self.rows),
                format!(
                    "arrival {} ns is before the previous row's {} ns",
                    r.arrival, self.last_arrival
                ),
            )
            .with_expected("requests in non-decreasing arrival order"));
        }
        self.last_arrival = r.arrival;
        self.arrival.push(r.arrival as i64);
        self.op.push(i32::from(r.op as u8));
        self.offset.push(r.offset as i64);
        self.len.push(r.len as i32);
        self.dev.push(i32::from(r.dev));
        self.stream.push(r.stream as i32);
        self.fileid.push(r.file.map(|v| v as i64));
        self.call_site.push(r.call_site.map(|v| v as i64));
        self.measured.push(r.measured.map(|v| v as i64));
        self.rows += 1;
        if self.arrival.len() >= ROW_GROUP_ROWS {
            self.flush_group()?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> Result<(), FormatError> {
        self.writer
            .flush(&mut [
                &mut self.arrival,
                &mut self.op,
                &mut self.offset,
                &mut self.len,
                &mut self.dev,
                &mut self.stream,
                &mut self.fileid,
                &mut self.call_site,
                &mut self.measured,
            ])
            .map_err(|e| pq_err(&self.file, e))
    }

    /// Flushes and closes the file; returns the number of rows written.
    pub fn finish(mut self) -> Result<u64, FormatError> {
        self.flush_group()?;
        self.writer.close().map_err(|e| pq_err(&self.file, e))?;
        Ok(self.rows)
    }
}

impl TraceWriter for ColumnarWriter {
    fn write(&mut self, r: &Request) -> Result<(), FormatError> {
        ColumnarWriter::write(self, r)
    }
    fn finish(self: Box<Self>) -> Result<u64, FormatError> {
        ColumnarWriter::finish(*self)
    }
    fn annotate(&mut self, key: &str, value: &str) {
        self.writer
            .append_key_value(KeyValue::new(key.to_string(), value.to_string()));
    }
}

/// The nine columns of the row group in hand, a run of rows at a time.
struct Columns {
    arrival: Chunk<Int64Type>,
    op: Chunk<Int32Type>,
    offset: Chunk<Int64Type>,
    len: Chunk<Int32Type>,
    dev: Chunk<Int32Type>,
    stream: Chunk<Int32Type>,
    fileid: Chunk<Int64Type>,
    call_site: Chunk<Int64Type>,
    measured: Chunk<Int64Type>,
}

impl Columns {
    fn start(&mut self, rg: &dyn RowGroupReader) -> Result<(), ParquetError> {
        self.arrival.start(rg)?;
        self.op.start(rg)?;
        self.offset.start(rg)?;
        self.len.start(rg)?;
        self.dev.start(rg)?;
        self.stream.start(rg)?;
        self.fileid.start(rg)?;
        self.call_site.start(rg)?;
        self.measured.start(rg)
    }

    /// Reads `n` rows of every column; a column with fewer is an error.
    fn read(&mut self, n: usize) -> Result<(), ParquetError> {
        let counts = [
            ("arrival_ns", self.arrival.read(n)?),
            ("op", self.op.read(n)?),
            ("offset", self.offset.read(n)?),
            ("len", self.len.read(n)?),
            ("dev", self.dev.read(n)?),
            ("stream", self.stream.read(n)?),
            ("file", self.fileid.read(n)?),
            ("call_site", self.call_site.read(n)?),
            ("measured_ns", self.measured.read(n)?),
        ];
        match counts.iter().find(|(_, got)| *got != n) {
            Some((name, got)) => Err(ParquetError::General(format!(
                "column `{name}` has {got} of the row group's next {n} rows"
            ))),
            None => Ok(()),
        }
    }

    /// The first null in a column that must not have one.
    fn first_null(&self) -> Option<usize> {
        [
            self.arrival.first_null(),
            self.op.first_null(),
            self.offset.first_null(),
            self.len.first_null(),
            self.dev.first_null(),
            self.stream.first_null(),
        ]
        .into_iter()
        .flatten()
        .min()
    }
}

/// Streams requests out of a columnar trace file.
///
/// Runs of rows are read column by column and converted once into a plain `Vec<Request>`
/// (a tight loop over the columns' value slices, the definition levels consulted only where
/// a run has nulls); [`TraceSource::next_request`] then hands rows out of that vector by
/// index, and [`ColumnarReader::next_batch`] hands whole runs to callers that can take them.
pub struct ColumnarReader {
    file: String,
    reader: Box<dyn FileReader>,
    groups: Groups,
    cols: Columns,
    /// The run of rows in the columns: its first row's index in the file, its length, how
    /// many of its rows are free of nulls in non-nullable columns, and how many are
    /// converted.
    batch_row: u64,
    batch_rows: usize,
    batch_good: usize,
    batch_pos: usize,
    /// The converted rows not yet handed out are `decoded[idx..]`.
    decoded: Vec<Request>,
    idx: usize,
    /// Rows read from the file so far (the index of the next run's first row).
    row: u64,
    /// An error found while decoding, due once every row before it has been handed out.
    pending: Option<FormatError>,
    total: u64,
    last_arrival: u64,
    provenance: Vec<(String, String)>,
    /// How the file was recognized, first in the assumptions.
    note: Option<String>,
    failed: bool,
}

/// How a nullable column's rows of one chunk are filled: the common cases — no nulls, or
/// nothing but nulls (a trace without file ids) — need no look at the definition levels.
enum Fill<'a> {
    Values(&'a [i64]),
    Null,
    Mixed(&'a [i64], &'a [i16]),
}

impl<'a> Fill<'a> {
    /// Rows `start..end` of `c`, or `None` if the column is shorter.
    fn new(c: &'a Chunk<Int64Type>, start: usize, end: usize) -> Option<Self> {
        Some(match c.nulls() {
            Nulls::None => Fill::Values(c.values().get(start..end)?),
            Nulls::All => Fill::Null,
            Nulls::Some => Fill::Mixed(c.values().get(start..end)?, c.def().get(start..end)?),
        })
    }

    /// Sets field `field` of `out` (one request per row of the chunk) from this column.
    #[inline(always)]
    fn apply(&self, out: &mut [Request], field: impl Fn(&mut Request) -> &mut Option<u64>) {
        match self {
            Fill::Null => {}
            Fill::Values(v) => {
                for (r, &x) in out.iter_mut().zip(v.iter()) {
                    *field(r) = Some(x as u64);
                }
            }
            Fill::Mixed(v, def) => {
                for ((r, &x), &d) in out.iter_mut().zip(v.iter()).zip(def.iter()) {
                    *field(r) = (d > 0).then_some(x as u64);
                }
            }
        }
    }
}

impl ColumnarReader {
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|e| FormatError::io(&file, &e))?;
        Self::from_chunks(f, file)
    }

    /// A columnar trace held in memory (`name` is used in errors): the fuzz target's entry,
    /// and useful for traces that arrive over the network.
    pub fn from_bytes(data: Vec<u8>, name: &str) -> Result<Self, FormatError> {
        Self::from_chunks(bytes::Bytes::from(data), name.to_string())
    }

    fn from_chunks<T: parquet::file::reader::ChunkReader + 'static>(
        input: T,
        file: String,
    ) -> Result<Self, FormatError> {
        let reader = parquet_io::open(input, &file, "a wattio columnar trace (Parquet)")?;
        let md = reader.metadata().file_metadata();
        let total = u64::try_from(md.num_rows()).unwrap_or(0);
        let provenance = parquet_io::key_values(md);
        match provenance.iter().find(|(k, _)| k == VERSION_KEY) {
            Some((_, v)) if v == VERSION => {}
            Some((_, v)) => {
                return Err(FormatError::file(
                    &file,
                    format!("columnar trace version `{v}` is not supported"),
                )
                .with_expected(format!("{VERSION_KEY} = \"{VERSION}\"")))
            }
            None => {
                return Err(FormatError::file(
                    &file,
                    format!("Parquet file without `{VERSION_KEY}` metadata"),
                )
                .with_expected("a wattio columnar trace (written by `wattio trace convert`)"))
            }
        }
        let at = parquet_io::find_columns(&reader, &file, &COLUMNS, "the wattio columnar schema")?;
        let cols = Columns {
            arrival: Chunk::new(at[0]),
            op: Chunk::new(at[1]),
            offset: Chunk::new(at[2]),
            len: Chunk::new(at[3]),
            dev: Chunk::new(at[4]),
            stream: Chunk::new(at[5]),
            fileid: Chunk::new(at[6]),
            call_site: Chunk::new(at[7]),
            measured: Chunk::new(at[8]),
        };
        Ok(ColumnarReader {
            file,
            reader: Box::new(reader),
            groups: Groups::new(),
            cols,
            batch_row: 0,
            batch_rows: 0,
            batch_good: 0,
            batch_pos: 0,
            decoded: Vec::with_capacity(CHUNK_ROWS),
            idx: 0,
            row: 0,
            pending: None,
            total,
            last_arrival: 0,
            provenance,
            note: None,
            failed: false,
        })
    }

    /// Puts `note` (e.g. how the format was detected) first in the assumptions.
    pub fn with_note(mut self, note: Option<String>) -> Self {
        self.note = note;
        self
    }

    /// The file's key-value metadata (version and provenance).
    pub fn provenance(&self) -> &[(String, String)] {
        &self.provenance
    }

    fn row_error(&self, row: u64, message: String, expected: &str) -> FormatError {
        FormatError::new(&self.file, Location::Row(row), message).with_expected(expected)
    }

    /// Reads the next run of rows into the columns. `Ok(false)` at the end.
    fn load(&mut self) -> Result<bool, FormatError> {
        self.batch_rows = 0;
        self.batch_pos = 0;
        let (reader, groups, cols) = (&*self.reader, &mut self.groups, &mut self.cols);
        let read = contain(&self.file, Location::Row(self.row), || {
            if !groups.advance(reader, |rg| cols.start(rg))? {
                return Ok(0);
            }
            let n = usize::try_from(groups.left())
                .unwrap_or(usize::MAX)
                .min(READ_BATCH_ROWS);
            cols.read(n)?;
            groups.take(n);
            Ok::<usize, ParquetError>(n)
        })?;
        let n = read.map_err(|e| {
            FormatError::new(&self.file, Location::Row(self.row), format!("Parquet: {e}"))
        })?;
        if n == 0 {
            return Ok(false);
        }
        // The first null in a non-nullable column ends the good rows of this run.
        self.batch_row = self.row;
        self.batch_rows = n;
        self.batch_good = self.cols.first_null().unwrap_or(n);
        self.row += n as u64;
        Ok(true)
    }

    /// Converts up to `max` rows of the current run (loading the next one when it is used
    /// up), appending them to `out`. Rows up to a bad one are appended and the error is kept
    /// in `pending`. `Ok(false)` at the end.
    fn decode_into(&mut self, out: &mut Vec<Request>, max: usize) -> Result<bool, FormatError> {
        while self.batch_pos >= self.batch_rows {
            if !self.load()? {
                return Ok(false);
            }
        }
        let (f, r) = (self.file.as_str(), self.batch_row);
        let start = self.batch_pos;
        if start >= self.batch_good {
            self.pending = Some(FormatError::new(
                f,
                Location::Row(r + start as u64),
                "null in a non-nullable column",
            ));
            self.batch_pos = self.batch_rows;
            return Ok(true);
        }
        let end = self.batch_good.min(start.saturating_add(max));
        let short = || {
            FormatError::new(
                f,
                Location::Row(r),
                "Parquet: a column is shorter than the run of rows",
            )
        };
        let c = &self.cols;
        let fileid = Fill::new(&c.fileid, start, end).ok_or_else(short)?;
        let call_site = Fill::new(&c.call_site, start, end).ok_or_else(short)?;
        let measured = Fill::new(&c.measured, start, end).ok_or_else(short)?;
        // Equal-length slices up front, so the loops below run without bounds checks.
        let arrival = c.arrival.values().get(start..end).ok_or_else(short)?;
        let op = c.op.values().get(start..end).ok_or_else(short)?;
        let offset = c.offset.values().get(start..end).ok_or_else(short)?;
        let len = c.len.values().get(start..end).ok_or_else(short)?;
        let dev = c.dev.values().get(start..end).ok_or_else(short)?;
        let stream = c.stream.values().get(start..end).ok_or_else(short)?;

        // Validate first (op codes, device ids, arrival order) in a tight loop; the rows
        // before the first bad one are then converted column by column with nothing left to
        // check. The columns hold Parquet's signed integers: the unsigned values are their
        // bit patterns, and a narrow column's value must fit its width.
        let mut last = self.last_arrival;
        let mut bad = None;
        for (k, ((((&a, &code), &o), &l), &d)) in arrival
            .iter()
            .zip(op)
            .zip(offset)
            .zip(len)
            .zip(dev)
            .enumerate()
        {
            let (a, o, l) = (a as u64, o as u64, l as u32);
            if o.checked_add(u64::from(l)).is_none() {
                // An end past 2^64 would wrap and pass any capacity check downstream.
                bad = Some((
                    start + k,
                    format!("offset {o} + length {l} overflows"),
                    "offset + len < 2^64",
                ));
                break;
            }
            if !(0..=3).contains(&code) {
                bad = Some((
                    start + k,
                    format!("op code {}", code as u32),
                    "0 (read), 1 (write), 2 (flush) or 3 (discard)",
                ));
                break;
            }
            if u16::try_from(d).is_err() {
                bad = Some((
                    start + k,
                    format!("device {}", d as u32),
                    "a device id of 0 to 65535 (UInt16)",
                ));
                break;
            }
            if a < last {
                bad = Some((
                    start + k,
                    format!("arrival {a} ns is before the previous row's {last} ns"),
                    "rows in non-decreasing arrival order",
                ));
                break;
            }
            last = a;
        }
        let m = bad.as_ref().map_or(arrival.len(), |(i, _, _)| i - start);
        let base = out.len();
        out.extend(
            arrival
                .iter()
                .zip(op)
                .zip(offset)
                .zip(len)
                .zip(dev)
                .zip(stream)
                .take(m)
                .map(
                    |(((((&a, &code), &offset), &len), &dev), &stream)| Request {
                        arrival: a as u64,
                        op: match code {
                            0 => Op::Read,
                            1 => Op::Write,
                            2 => Op::Flush,
                            _ => Op::Discard,
                        },
                        offset: offset as u64,
                        len: len as u32,
                        dev: dev as u16,
                        stream: stream as u32,
                        file: None,
                        call_site: None,
                        measured: None,
                        fua: false,
                    },
                ),
        );
        let rows = out.get_mut(base..).unwrap_or_default();
        fileid.apply(rows, |r| &mut r.file);
        call_site.apply(rows, |r| &mut r.call_site);
        measured.apply(rows, |r| &mut r.measured);
        self.last_arrival = last;
        self.batch_pos = end;
        if let Some((i, message, expected)) = bad {
            self.pending = Some(self.row_error(r + i as u64, message, expected));
            self.batch_pos = usize::MAX;
        }
        Ok(true)
    }

    /// Appends the next run of requests (up to 64 Ki rows) to `out` and
    /// returns how many; `Ok(0)` at the end of the trace. The fast way to read a whole trace.
    /// Rows before a bad row are returned first, the error on the following call.
    pub fn next_batch(&mut self, out: &mut Vec<Request>) -> Result<usize, FormatError> {
        if self.idx < self.decoded.len() {
            // Left over from next_request calls.
            let rest = self.decoded.get(self.idx..).unwrap_or_default();
            out.extend_from_slice(rest);
            self.idx = self.decoded.len();
            return Ok(rest.len());
        }
        loop {
            if let Some(e) = self.pending.take() {
                self.failed = true;
                return Err(e);
            }
            if self.failed {
                return Ok(0);
            }
            let before = out.len();
            match self.decode_into(out, BATCH_ROWS) {
                Ok(true) => {
                    if out.len() > before {
                        return Ok(out.len() - before);
                    }
                }
                Ok(false) => return Ok(0),
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
    }

    fn read_next(&mut self) -> Result<Option<Request>, FormatError> {
        loop {
            if let Some(r) = self.decoded.get(self.idx) {
                self.idx += 1;
                return Ok(Some(*r));
            }
            if let Some(e) = self.pending.take() {
                return Err(e);
            }
            let mut buf = std::mem::take(&mut self.decoded);
            buf.clear();
            self.idx = 0;
            let more = self.decode_into(&mut buf, CHUNK_ROWS);
            self.decoded = buf;
            if !more? {
                return Ok(None);
            }
        }
    }
}

impl TraceSource for ColumnarReader {
    #[inline]
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        // The common case inline: a decoded row is waiting.
        if let Some(r) = self.decoded.get(self.idx) {
            self.idx += 1;
            return Ok(Some(*r));
        }
        if self.failed {
            return Ok(None);
        }
        self.read_next().map_err(|e| {
            self.failed = true;
            e.into()
        })
    }

    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let mut n = 0;
        while n < max {
            // Whole runs of decoded rows at once; `next_request` decodes the next chunk.
            let rest = self.decoded.get(self.idx..).unwrap_or_default();
            if !rest.is_empty() {
                let take = rest.len().min(max - n);
                out.extend_from_slice(&rest[..take]);
                self.idx += take;
                n += take;
                continue;
            }
            match self.next_request()? {
                Some(r) => {
                    out.push(r);
                    n += 1;
                }
                None => break,
            }
        }
        Ok(n)
    }

    fn len_hint(&self) -> Option<u64> {
        Some(self.total)
    }

    fn assumptions(&self) -> Vec<String> {
        let mut v: Vec<String> = self.note.iter().cloned().collect();
        v.push(format!(
            "format: columnar (wattio trace v{VERSION}, {} rows)",
            self.total
        ));
        for (k, val) in &self.provenance {
            if k != VERSION_KEY && k != "ARROW:schema" {
                // Tables kept in the metadata (a file-call trace's events) are data, not
                // notes for a reader: their size is what to say.
                if val.len() > PROVENANCE_SHOWN {
                    v.push(format!("provenance: {k} = ({} bytes)", val.len()));
                } else {
                    v.push(format!("provenance: {k} = {val}"));
                }
            }
        }
        v
    }
}
