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
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
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
/// Rows per record batch handed to the Parquet encoder and per batch decoded on read.
const BATCH_ROWS: usize = 64 * 1024;
/// Rows per row group: large enough for good compression and few seeks, small enough that
/// the encoder's buffer stays a few tens of MB.
const ROW_GROUP_ROWS: usize = 1024 * 1024;

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
        // Arrival is sorted, so deltas are small; Snappy keeps decoding cheap.
        let props = WriterProperties::builder()
            .set_max_row_group_size(ROW_GROUP_ROWS)
            .set_compression(Compression::SNAPPY)
            .set_column_dictionary_enabled(ColumnPath::from("arrival_ns"), false)
            .set_column_encoding(
                ColumnPath::from("arrival_ns"),
                Encoding::DELTA_BINARY_PACKED,
            )
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

/// The columns of the batch being read, typed once per batch so the per-row path is plain
/// slice indexing.
struct Batch {
    arrival: UInt64Array,
    op: UInt8Array,
    offset: UInt64Array,
    len: UInt32Array,
    dev: UInt16Array,
    stream: UInt32Array,
    fileid: UInt64Array,
    call_site: UInt64Array,
    measured: UInt64Array,
    rows: usize,
}

/// Streams requests out of a columnar trace file.
pub struct ColumnarReader {
    file: String,
    reader: ParquetRecordBatchReader,
    batch: Option<Batch>,
    idx: usize,
    row: u64,
    total: u64,
    last_arrival: u64,
    provenance: Vec<(String, String)>,
    failed: bool,
}

fn column<T: Array + Clone + 'static>(
    file: &str,
    b: &RecordBatch,
    name: &str,
    row: u64,
) -> Result<T, FormatError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .cloned()
        .ok_or_else(|| {
            FormatError::new(
                file,
                Location::Row(row),
                format!("column `{name}` missing or of the wrong type"),
            )
            .with_expected("the wattio columnar schema (see docs/formats.md)")
        })
}

impl ColumnarReader {
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|e| FormatError::io(&file, &e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| {
            FormatError::file(&file, format!("not a Parquet file: {e}"))
                .with_expected("a wattio columnar trace (Parquet)")
        })?;
        let md = builder.metadata().file_metadata();
        let total = u64::try_from(md.num_rows()).unwrap_or(0);
        let provenance: Vec<(String, String)> = md
            .key_value_metadata()
            .map(|kvs| {
                kvs.iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
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
        let reader = builder
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| pq_err(&file, e))?;
        Ok(ColumnarReader {
            file,
            reader,
            batch: None,
            idx: 0,
            row: 0,
            total,
            last_arrival: 0,
            provenance,
            failed: false,
        })
    }

    /// The file's key-value metadata (version and provenance).
    pub fn provenance(&self) -> &[(String, String)] {
        &self.provenance
    }

    fn load(&mut self) -> Result<bool, FormatError> {
        match self.reader.next() {
            None => Ok(false),
            Some(Err(e)) => Err(FormatError::new(
                &self.file,
                Location::Row(self.row),
                format!("Parquet: {e}"),
            )),
            Some(Ok(b)) => {
                let f = &self.file;
                let r = self.row;
                let batch = Batch {
                    arrival: column(f, &b, "arrival_ns", r)?,
                    op: column(f, &b, "op", r)?,
                    offset: column(f, &b, "offset", r)?,
                    len: column(f, &b, "len", r)?,
                    dev: column(f, &b, "dev", r)?,
                    stream: column(f, &b, "stream", r)?,
                    fileid: column(f, &b, "file", r)?,
                    call_site: column(f, &b, "call_site", r)?,
                    measured: column(f, &b, "measured_ns", r)?,
                    rows: b.num_rows(),
                };
                for a in [&batch.arrival, &batch.offset] {
                    if a.null_count() > 0 {
                        return Err(FormatError::new(
                            f,
                            Location::Row(r),
                            "null in a non-nullable column",
                        ));
                    }
                }
                if batch.op.null_count()
                    + batch.len.null_count()
                    + batch.dev.null_count()
                    + batch.stream.null_count()
                    > 0
                {
                    return Err(FormatError::new(
                        f,
                        Location::Row(r),
                        "null in a non-nullable column",
                    ));
                }
                self.batch = Some(batch);
                self.idx = 0;
                Ok(true)
            }
        }
    }

    fn read_next(&mut self) -> Result<Option<wattio_core::Request>, FormatError> {
        loop {
            if let Some(b) = &self.batch {
                let i = self.idx;
                if i < b.rows {
                    self.idx += 1;
                    let row = self.row;
                    self.row += 1;
                    let arrival = b.arrival.values()[i];
                    let code = b.op.values()[i];
                    let Some(op) = Op::from_code(code) else {
                        return Err(FormatError::new(
                            &self.file,
                            Location::Row(row),
                            format!("op code {code}"),
                        )
                        .with_expected("0 (read), 1 (write), 2 (flush) or 3 (discard)"));
                    };
                    if arrival < self.last_arrival {
                        return Err(FormatError::new(
                            &self.file,
                            Location::Row(row),
                            format!(
                                "arrival {arrival} ns is before the previous row's {} ns",
                                self.last_arrival
                            ),
                        )
                        .with_expected("rows in non-decreasing arrival order"));
                    }
                    self.last_arrival = arrival;
                    let opt = |a: &UInt64Array| {
                        if a.is_null(i) {
                            None
                        } else {
                            Some(a.values()[i])
                        }
                    };
                    return Ok(Some(Request {
                        arrival,
                        op,
                        offset: b.offset.values()[i],
                        len: b.len.values()[i],
                        dev: b.dev.values()[i],
                        stream: b.stream.values()[i],
                        file: opt(&b.fileid),
                        call_site: opt(&b.call_site),
                        measured: opt(&b.measured),
                    }));
                }
            }
            if !self.load()? {
                self.batch = None;
                return Ok(None);
            }
        }
    }
}

impl TraceSource for ColumnarReader {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        if self.failed {
            return Ok(None);
        }
        self.read_next().map_err(|e| {
            self.failed = true;
            e.into()
        })
    }

    fn len_hint(&self) -> Option<u64> {
        Some(self.total)
    }

    fn assumptions(&self) -> Vec<String> {
        let mut v = vec![format!(
            "format: columnar (wattio trace v{VERSION}, {} rows)",
            self.total
        )];
        for (k, val) in &self.provenance {
            if k != VERSION_KEY && k != "ARROW:schema" {
                v.push(format!("provenance: {k} = {val}"));
            }
        }
        v
    }
}
