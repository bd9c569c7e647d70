//! wattio's own trace file: Parquet via Arrow, one row per request.
//!
//! Columns: `arrival_ns: UInt64`, `op: UInt8` (0 read, 1 write, 2 flush, 3 discard),
//! `offset: UInt64` (bytes), `len: UInt32` (bytes), `dev: UInt16`, `stream: UInt32`,
//! `file`, `call_site`, `measured_ns`: nullable `UInt64`. File key-value metadata
//! `wattio.trace.version = "1"` plus free-form provenance. Rows are in non-decreasing arrival.
//!
//! Both sides stream: the writer holds one record batch and the row group being encoded, the
//! reader one decoded batch, so memory does not grow with trace length.

use crate::error::{FormatError, Location};
use crate::writer::TraceWriter;
use arrow_array::builder::{UInt16Builder, UInt32Builder, UInt64Builder, UInt8Builder};
use arrow_array::{
    Array, ArrayRef, RecordBatch, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use wattio_core::{Op, Request, TraceError, TraceSource};

pub const VERSION_KEY: &str = "wattio.trace.version";
pub const VERSION: &str = "1";
/// Provenance values longer than this are reported by their size in the assumptions.
const PROVENANCE_SHOWN: usize = 4096;
/// Rows per record batch handed to the Parquet encoder.
const BATCH_ROWS: usize = 64 * 1024;
/// Rows per batch decoded on read. Small on purpose: Arrow allocates fresh buffers for every
/// batch, and at 4096 rows they (32 KiB a column) come from the allocator's free lists
/// instead of fresh pages, and the 4096 decoded `Request`s (320 KiB) stay in the L2 cache
/// until they are handed out. 64 Ki-row batches read 1.5× slower (docs/benchmarks.md).
const READ_BATCH_ROWS: usize = 4096;
/// Rows converted to `Request`s at a time by `next_request`.
const CHUNK_ROWS: usize = 512;
/// Rows per row group: large enough for good compression and few seeks, small enough that
/// the encoder's buffer stays a few tens of MB.
const ROW_GROUP_ROWS: usize = 1024 * 1024;

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
    let mut b = b
        .set_max_row_group_size(ROW_GROUP_ROWS)
        .set_compression(Compression::UNCOMPRESSED);
    for c in ["arrival_ns", "offset", "file", "call_site", "measured_ns"] {
        b = b
            .set_column_dictionary_enabled(ColumnPath::from(c), false)
            .set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
    }
    b
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("arrival_ns", DataType::UInt64, false),
        Field::new("op", DataType::UInt8, false),
        Field::new("offset", DataType::UInt64, false),
        Field::new("len", DataType::UInt32, false),
        Field::new("dev", DataType::UInt16, false),
        Field::new("stream", DataType::UInt32, false),
        Field::new("file", DataType::UInt64, true),
        Field::new("call_site", DataType::UInt64, true),
        Field::new("measured_ns", DataType::UInt64, true),
    ]))
}

/// Streams requests into a columnar trace file.
pub struct ColumnarWriter {
    file: String,
    writer: ArrowWriter<File>,
    arrival: UInt64Builder,
    op: UInt8Builder,
    offset: UInt64Builder,
    len: UInt32Builder,
    dev: UInt16Builder,
    stream: UInt32Builder,
    fileid: UInt64Builder,
    call_site: UInt64Builder,
    measured: UInt64Builder,
    pending: usize,
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
        let writer =
            ArrowWriter::try_new(f, schema(), Some(props)).map_err(|e| pq_err(&file, e))?;
        let cap = BATCH_ROWS;
        Ok(ColumnarWriter {
            file,
            writer,
            arrival: UInt64Builder::with_capacity(cap),
            op: UInt8Builder::with_capacity(cap),
            offset: UInt64Builder::with_capacity(cap),
            len: UInt32Builder::with_capacity(cap),
            dev: UInt16Builder::with_capacity(cap),
            stream: UInt32Builder::with_capacity(cap),
            fileid: UInt64Builder::with_capacity(cap),
            call_site: UInt64Builder::with_capacity(cap),
            measured: UInt64Builder::with_capacity(cap),
            pending: 0,
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
        self.arrival.append_value(r.arrival);
        self.op.append_value(r.op as u8);
        self.offset.append_value(r.offset);
        self.len.append_value(r.len);
        self.dev.append_value(r.dev);
        self.stream.append_value(r.stream);
        self.fileid.append_option(r.file);
        self.call_site.append_option(r.call_site);
        self.measured.append_option(r.measured);
        self.pending += 1;
        self.rows += 1;
        if self.pending >= BATCH_ROWS {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<(), FormatError> {
        if self.pending == 0 {
            return Ok(());
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.arrival.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.len.finish()),
            Arc::new(self.dev.finish()),
            Arc::new(self.stream.finish()),
            Arc::new(self.fileid.finish()),
            Arc::new(self.call_site.finish()),
            Arc::new(self.measured.finish()),
        ];
        self.pending = 0;
        let batch = RecordBatch::try_new(schema(), cols).map_err(|e| pq_err(&self.file, e))?;
        self.writer.write(&batch).map_err(|e| pq_err(&self.file, e))
    }

    /// Flushes and closes the file; returns the number of rows written.
    pub fn finish(mut self) -> Result<u64, FormatError> {
        self.flush_batch()?;
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
            .append_key_value_metadata(KeyValue::new(key.to_string(), value.to_string()));
    }
}

/// Streams requests out of a columnar trace file.
///
/// Each Parquet record batch is decoded once into a plain `Vec<Request>` (a tight loop over
/// the Arrow arrays' value slices, the null bitmaps consulted only in batches that have
/// nulls); [`TraceSource::next_request`] then hands rows out of that vector by index, and
/// [`ColumnarReader::next_batch`] hands whole batches to callers that can take them.
pub struct ColumnarReader {
    file: String,
    reader: ParquetRecordBatchReader,
    /// The record batch being converted, its first row's index in the file, how many of its
    /// rows are free of nulls in non-nullable columns, and how many are converted.
    batch: Option<RecordBatch>,
    batch_row: u64,
    batch_good: usize,
    batch_pos: usize,
    /// The converted rows not yet handed out are `decoded[idx..]`.
    decoded: Vec<Request>,
    idx: usize,
    /// Rows read from the file so far (the index of the next batch's first row).
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

fn column<'b, T: Array + 'static>(
    file: &str,
    b: &'b RecordBatch,
    name: &str,
    row: u64,
) -> Result<&'b T, FormatError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| {
            FormatError::new(
                file,
                Location::Row(row),
                format!("column `{name}` missing or of the wrong type"),
            )
            .with_expected("the wattio columnar schema (see docs/formats.md)")
        })
}

/// How a nullable column's rows of one chunk are filled: the common cases — no nulls, or
/// nothing but nulls (a trace without file ids) — need no look at the validity bitmap.
enum Fill<'a> {
    Values(&'a [u64]),
    Null,
    Mixed(&'a [u64], arrow_buffer::NullBuffer),
}

impl<'a> Fill<'a> {
    /// Rows `start..end` of `a`, or `None` if the column is shorter.
    fn new(a: &'a UInt64Array, start: usize, end: usize) -> Option<Self> {
        let values = a.values().get(start..end)?;
        Some(match a.nulls() {
            None => Fill::Values(values),
            Some(nb) if nb.null_count() == 0 => Fill::Values(values),
            Some(nb) if nb.null_count() == nb.len() => Fill::Null,
            Some(nb) => {
                if nb.len() < end {
                    return None;
                }
                Fill::Mixed(values, nb.slice(start, end - start))
            }
        })
    }

    /// Sets field `field` of `out` (one request per row of the chunk) from this column.
    #[inline(always)]
    fn apply(&self, out: &mut [Request], field: impl Fn(&mut Request) -> &mut Option<u64>) {
        match self {
            Fill::Null => {}
            Fill::Values(v) => {
                for (r, &x) in out.iter_mut().zip(v.iter()) {
                    *field(r) = Some(x);
                }
            }
            Fill::Mixed(v, nb) => {
                for ((r, &x), valid) in out.iter_mut().zip(v.iter()).zip(nb.iter()) {
                    *field(r) = valid.then_some(x);
                }
            }
        }
    }
}

/// Runs a call into the Parquet/Arrow crates, turning a panic into an error. Those crates
/// still panic on some malformed files (parquet 57's footer decoder unwraps a missing
/// boolean, found by fuzzing; fixed in parquet 60): a corrupt trace must not take the whole
/// run down. Only calls into those crates are wrapped, so a panic in wattio's own code still
/// surfaces. The reader is not used again after such an error.
pub(crate) fn contain<R>(
    file: &str,
    at: Location,
    f: impl FnOnce() -> R,
) -> Result<R, FormatError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        FormatError::new(
            file,
            at,
            format!("the Parquet decoder failed on this file: {what}"),
        )
        .with_expected("a well-formed Parquet file")
    })
}

/// Runs [`crate::footer::check`] on the footer before the Parquet crate decodes it.
pub(crate) fn check_footer<T: parquet::file::reader::ChunkReader>(
    input: &T,
    file_len: u64,
    file: &str,
) -> Result<(), FormatError> {
    let io = |e: parquet::errors::ParquetError| FormatError::file(file, format!("Parquet: {e}"));
    let Some(tail_at) = file_len.checked_sub(8) else {
        return Ok(()); // too short: the Parquet crate says so
    };
    let tail = input.get_bytes(tail_at, 8).map_err(io)?;
    let Some(len) = crate::footer::footer_len(&tail) else {
        return Ok(());
    };
    let (Some(start), Ok(n)) = (tail_at.checked_sub(len), usize::try_from(len)) else {
        return Ok(()); // longer than the file: the Parquet crate says so
    };
    let footer = input.get_bytes(start, n).map_err(io)?;
    crate::footer::check(&footer).map_err(|e| {
        FormatError::file(file, format!("not a Parquet file: corrupt footer: {e}"))
            .with_expected("a wattio columnar trace (Parquet)")
    })
}

/// Every column chunk must lie inside the file. The Parquet crate trusts the footer here: a
/// negative offset trips an assertion, and a huge length becomes the capacity of the buffer
/// it reads the chunk into, so a corrupt footer would abort the process instead of failing.
pub(crate) fn check_chunk_ranges(
    file: &str,
    md: &parquet::file::metadata::ParquetMetaData,
    file_len: u64,
) -> Result<(), FormatError> {
    for (g, rg) in md.row_groups().iter().enumerate() {
        for c in rg.columns() {
            let start = c.dictionary_page_offset().unwrap_or(c.data_page_offset());
            let inside = u64::try_from(start)
                .ok()
                .zip(u64::try_from(c.compressed_size()).ok())
                .and_then(|(s, l)| s.checked_add(l))
                .is_some_and(|end| end <= file_len);
            if !inside {
                return Err(FormatError::file(
                    file,
                    format!(
                        "row group {g}, column `{}`: chunk at byte {start} of {} bytes lies outside the {file_len}-byte file",
                        c.column_path(),
                        c.compressed_size()
                    ),
                )
                .with_expected("a complete, uncorrupted Parquet file"));
            }
        }
    }
    Ok(())
}

/// Open a Parquet file with the checks every wattio Parquet reader needs (columnar traces,
/// memory traces): the footer and every column chunk's byte range within the file, the
/// reader's own panics contained, and the Arrow schema derived from the Parquet schema
/// rather than decoded from the embedded `ARROW:schema` flatbuffer — arrow-ipc panics on a
/// corrupt one (found by fuzzing), and the Parquet schema's unsigned-integer annotations
/// give the same types. `expected` says what the file should have been.
pub(crate) fn open_parquet<T: parquet::file::reader::ChunkReader + 'static>(
    input: T,
    file: &str,
    expected: &str,
) -> Result<ParquetRecordBatchReaderBuilder<T>, FormatError> {
    let file_len = input.len();
    check_footer(&input, file_len, file)?;
    let opts = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder = contain(file, Location::File, || {
        ParquetRecordBatchReaderBuilder::try_new_with_options(input, opts)
    })?
    .map_err(|e| {
        FormatError::file(file, format!("not a Parquet file: {e}")).with_expected(expected)
    })?;
    check_chunk_ranges(file, builder.metadata(), file_len)?;
    Ok(builder)
}

/// A Parquet file's key-value metadata as (key, value) pairs (a missing value is empty).
pub(crate) fn key_values(md: &parquet::file::metadata::FileMetaData) -> Vec<(String, String)> {
    md.key_value_metadata()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
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
        let builder = open_parquet(input, &file, "a wattio columnar trace (Parquet)")?;
        let md = builder.metadata().file_metadata();
        let total = u64::try_from(md.num_rows()).unwrap_or(0);
        let provenance = key_values(md);
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
        let want = schema();
        for fld in want.fields() {
            match builder.schema().field_with_name(fld.name()) {
                Ok(have) if have.data_type() == fld.data_type() => {}
                Ok(have) => {
                    return Err(FormatError::file(
                        &file,
                        format!("column `{}` has type {}", fld.name(), have.data_type()),
                    )
                    .with_expected(format!("type {}", fld.data_type())))
                }
                Err(_) => {
                    return Err(FormatError::file(
                        &file,
                        format!("column `{}` is missing", fld.name()),
                    )
                    .with_expected("the wattio columnar schema"))
                }
            }
        }
        let reader = contain(&file, Location::File, || {
            builder.with_batch_size(READ_BATCH_ROWS).build()
        })?
        .map_err(|e| pq_err(&file, e))?;
        Ok(ColumnarReader {
            file,
            reader,
            batch: None,
            batch_row: 0,
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

    /// Reads the next record batch. `Ok(false)` at the end.
    fn load(&mut self) -> Result<bool, FormatError> {
        self.batch = None;
        let reader = &mut self.reader;
        let next = contain(&self.file, Location::Row(self.row), || reader.next())?;
        let b = match next {
            None => return Ok(false),
            Some(Err(e)) => {
                return Err(FormatError::new(
                    &self.file,
                    Location::Row(self.row),
                    format!("Parquet: {e}"),
                ))
            }
            Some(Ok(b)) => b,
        };
        // The first null in a non-nullable column ends the good rows of this batch.
        let first_null = ["arrival_ns", "op", "offset", "len", "dev", "stream"]
            .iter()
            .filter_map(|c| b.column_by_name(c))
            .filter_map(|c| c.nulls())
            .filter(|nb| nb.null_count() > 0)
            .filter_map(|nb| nb.iter().position(|valid| !valid))
            .min();
        self.batch_row = self.row;
        self.batch_good = first_null.unwrap_or(b.num_rows());
        self.batch_pos = 0;
        self.row += b.num_rows() as u64;
        self.batch = Some(b);
        Ok(true)
    }

    /// Converts up to `max` rows of the current batch (loading the next one when it is used
    /// up), appending them to `out`. Rows up to a bad one are appended and the error is kept
    /// in `pending`. `Ok(false)` at the end.
    fn decode_into(&mut self, out: &mut Vec<Request>, max: usize) -> Result<bool, FormatError> {
        loop {
            match &self.batch {
                Some(b) if self.batch_pos < b.num_rows() => break,
                _ => {
                    if !self.load()? {
                        return Ok(false);
                    }
                }
            }
        }
        let Some(b) = &self.batch else {
            return Ok(false);
        };
        let (f, r) = (self.file.as_str(), self.batch_row);
        let start = self.batch_pos;
        if start >= self.batch_good {
            self.pending = Some(FormatError::new(
                f,
                Location::Row(r + start as u64),
                "null in a non-nullable column",
            ));
            self.batch_pos = b.num_rows();
            return Ok(true);
        }
        let end = self.batch_good.min(start.saturating_add(max));
        let short = || {
            FormatError::new(
                f,
                Location::Row(r),
                "Parquet: a column is shorter than the batch",
            )
        };
        let arrival = column::<UInt64Array>(f, b, "arrival_ns", r)?.values();
        let op = column::<UInt8Array>(f, b, "op", r)?.values();
        let offset = column::<UInt64Array>(f, b, "offset", r)?.values();
        let len = column::<UInt32Array>(f, b, "len", r)?.values();
        let dev = column::<UInt16Array>(f, b, "dev", r)?.values();
        let stream = column::<UInt32Array>(f, b, "stream", r)?.values();
        let fileid = Fill::new(column(f, b, "file", r)?, start, end).ok_or_else(short)?;
        let call_site = Fill::new(column(f, b, "call_site", r)?, start, end).ok_or_else(short)?;
        let measured = Fill::new(column(f, b, "measured_ns", r)?, start, end).ok_or_else(short)?;
        // Equal-length slices up front, so the loops below run without bounds checks.
        let arrival = arrival.get(start..end).ok_or_else(short)?;
        let op = op.get(start..end).ok_or_else(short)?;
        let offset = offset.get(start..end).ok_or_else(short)?;
        let len = len.get(start..end).ok_or_else(short)?;
        let dev = dev.get(start..end).ok_or_else(short)?;
        let stream = stream.get(start..end).ok_or_else(short)?;

        // Validate first (op codes, arrival order) in a tight loop; the rows before the
        // first bad one are then converted column by column with nothing left to check.
        let mut last = self.last_arrival;
        let mut bad = None;
        for (k, (((&a, &code), &o), &l)) in arrival.iter().zip(op).zip(offset).zip(len).enumerate()
        {
            if o.checked_add(l as u64).is_none() {
                // An end past 2^64 would wrap and pass any capacity check downstream.
                bad = Some((
                    start + k,
                    format!("offset {o} + length {l} overflows"),
                    "offset + len < 2^64",
                ));
                break;
            }
            if code > 3 {
                bad = Some((
                    start + k,
                    format!("op code {code}"),
                    "0 (read), 1 (write), 2 (flush) or 3 (discard)",
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
                        arrival: a,
                        op: match code {
                            0 => Op::Read,
                            1 => Op::Write,
                            2 => Op::Flush,
                            _ => Op::Discard,
                        },
                        offset,
                        len,
                        dev,
                        stream,
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

    /// Appends the next run of requests (up to one record batch, 64 Ki rows) to `out` and
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
