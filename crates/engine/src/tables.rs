//! Parquet tables a run writes, streamed in row groups so memory stays flat.
//!
//! The schemas are chosen for pandas: every time is a signed 64-bit count of nanoseconds
//! (`*_ns`; unsigned columns would make differences wrap around), every table names its
//! device, and names with few values (device, state, op, status) are dictionary-encoded, so
//! they arrive as categoricals.

use crate::sim::HostRequest;
use arrow_array::builder::{Int64Builder, StringDictionaryBuilder};
use arrow_array::types::{Int8Type, UInt16Type};
use arrow_array::{ArrayRef, DictionaryArray, Int8Array, RecordBatch, StringArray, UInt16Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use wattio_core::io::Status;
use wattio_core::time::Nanos;

const BATCH: usize = 1 << 16;

/// A Parquet file written one record batch at a time (zstd level 1: small files, cheap).
struct ParquetOut {
    w: ArrowWriter<File>,
    schema: SchemaRef,
    path: String,
}

impl ParquetOut {
    fn create(path: &Path, schema: SchemaRef) -> Result<ParquetOut, String> {
        let f = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(1).map_err(|e| e.to_string())?,
            ))
            .build();
        let w = ArrowWriter::try_new(f, schema.clone(), Some(props))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(ParquetOut {
            w,
            schema,
            path: path.display().to_string(),
        })
    }

    fn write(&mut self, cols: Vec<ArrayRef>) -> Result<(), String> {
        let batch = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| format!("{}: {e}", self.path))?;
        self.w
            .write(&batch)
            .map_err(|e| format!("{}: {e}", self.path))
    }

    fn close(self) -> Result<(), String> {
        self.w
            .close()
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", self.path))
    }
}

/// `op` values in the order of the request model's codes (`Op as u8`).
pub const OP_NAMES: [&str; 4] = ["read", "write", "flush", "discard"];
/// `status` values, as a Python function sees them in `Completion.status`.
pub const STATUS_NAMES: [&str; 5] = ["ok", "io-error", "invalid", "no-space", "not-supported"];

fn status_code(s: Status) -> i8 {
    match s {
        Status::Ok => 0,
        Status::IoError => 1,
        Status::Invalid => 2,
        Status::NoSpace => 3,
        Status::NotSupported => 4,
    }
}

fn dict(name: &str, key: DataType) -> Field {
    Field::new(
        name,
        DataType::Dictionary(Box::new(key), Box::new(DataType::Utf8)),
        false,
    )
}

/// `requests.parquet`: one row per host request, in completion order.
pub struct RequestsTable {
    out: ParquetOut,
    /// Dictionaries of the `device`, `op` and `status` columns (keys: device id and codes).
    devices: Arc<StringArray>,
    ops: Arc<StringArray>,
    statuses: Arc<StringArray>,
    id: Int64Builder,
    arrival: Int64Builder,
    finish: Int64Builder,
    latency: Int64Builder,
    queue: Int64Builder,
    power_wait: Int64Builder,
    service: Int64Builder,
    op: Vec<i8>,
    dev: Vec<u16>,
    offset: Int64Builder,
    len: Int64Builder,
    status: Vec<i8>,
    rows: usize,
}

/// Nanoseconds (or bytes) as the tables' signed 64-bit integers; 2^63 ns is 292 years, so
/// only a corrupt value can exceed it, and it saturates rather than turning negative.
fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl RequestsTable {
    /// `devices[d]` is the name of device id `d`.
    pub fn create(path: &Path, devices: &[String]) -> Result<RequestsTable, String> {
        let i64f = |n: &str| Field::new(n, DataType::Int64, false);
        let schema = Arc::new(Schema::new(vec![
            i64f("id"),
            i64f("arrival_ns"),
            i64f("finish_ns"),
            i64f("latency_ns"),
            i64f("queue_ns"),
            i64f("power_wait_ns"),
            i64f("service_ns"),
            dict("op", DataType::Int8),
            dict("device", DataType::UInt16),
            Field::new("dev", DataType::UInt16, false),
            i64f("offset"),
            i64f("len"),
            dict("status", DataType::Int8),
        ]));
        Ok(RequestsTable {
            out: ParquetOut::create(path, schema)?,
            devices: Arc::new(StringArray::from_iter_values(devices)),
            ops: Arc::new(StringArray::from_iter_values(OP_NAMES)),
            statuses: Arc::new(StringArray::from_iter_values(STATUS_NAMES)),
            id: Int64Builder::with_capacity(BATCH),
            arrival: Int64Builder::with_capacity(BATCH),
            finish: Int64Builder::with_capacity(BATCH),
            latency: Int64Builder::with_capacity(BATCH),
            queue: Int64Builder::with_capacity(BATCH),
            power_wait: Int64Builder::with_capacity(BATCH),
            service: Int64Builder::with_capacity(BATCH),
            op: Vec::with_capacity(BATCH),
            dev: Vec::with_capacity(BATCH),
            offset: Int64Builder::with_capacity(BATCH),
            len: Int64Builder::with_capacity(BATCH),
            status: Vec::with_capacity(BATCH),
            rows: 0,
        })
    }

    pub fn push(&mut self, r: &HostRequest<'_>) -> Result<(), String> {
        self.id.append_value(i64_of(r.id));
        self.arrival.append_value(i64_of(r.arrival));
        self.finish.append_value(i64_of(r.finished));
        self.latency.append_value(i64_of(r.finished - r.arrival));
        self.queue.append_value(i64_of(r.breakdown.queue_ns));
        self.power_wait
            .append_value(i64_of(r.breakdown.power_wait_ns));
        self.service.append_value(i64_of(r.breakdown.service_ns));
        self.op.push(r.io.op as i8);
        self.dev.push(r.io.dev);
        self.offset.append_value(i64_of(r.io.offset));
        self.len.append_value(i64::from(r.io.len));
        self.status.push(status_code(r.status));
        self.rows += 1;
        if self.rows == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.rows == 0 {
            return Ok(());
        }
        let keyed = |keys: Int8Array, values: &Arc<StringArray>| -> Result<ArrayRef, String> {
            DictionaryArray::<Int8Type>::try_new(keys, values.clone())
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| e.to_string())
        };
        let dev = UInt16Array::from(std::mem::take(&mut self.dev));
        let device = DictionaryArray::<UInt16Type>::try_new(dev.clone(), self.devices.clone())
            .map_err(|e| format!("{}: {e}", self.out.path))?;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.id.finish()),
            Arc::new(self.arrival.finish()),
            Arc::new(self.finish.finish()),
            Arc::new(self.latency.finish()),
            Arc::new(self.queue.finish()),
            Arc::new(self.power_wait.finish()),
            Arc::new(self.service.finish()),
            keyed(Int8Array::from(std::mem::take(&mut self.op)), &self.ops)?,
            Arc::new(device),
            Arc::new(dev),
            Arc::new(self.offset.finish()),
            Arc::new(self.len.finish()),
            keyed(
                Int8Array::from(std::mem::take(&mut self.status)),
                &self.statuses,
            )?,
        ];
        self.out.write(cols)?;
        self.rows = 0;
        Ok(())
    }

    pub fn finish(mut self) -> Result<(), String> {
        self.flush()?;
        self.out.close()
    }
}

/// `timeline.parquet`: power-mode intervals per device (`device`, `state`, `start_ns`,
/// `end_ns`). Busy sub-states are folded into the ready state around them.
pub struct TimelineTable {
    out: ParquetOut,
    names: Vec<Vec<String>>,
    devices: Vec<String>,
    /// Open interval per device: (slot, start).
    open: Vec<(usize, Nanos)>,
    device: StringDictionaryBuilder<UInt16Type>,
    state: StringDictionaryBuilder<UInt16Type>,
    start: Int64Builder,
    end: Int64Builder,
    rows: usize,
}

impl TimelineTable {
    /// `slots[d]` are device d's ledger slot names; every device starts in `initial[d]` at 0.
    pub fn create(
        path: &Path,
        devices: Vec<String>,
        slots: Vec<Vec<String>>,
        initial: Vec<usize>,
    ) -> Result<TimelineTable, String> {
        let schema = Arc::new(Schema::new(vec![
            dict("device", DataType::UInt16),
            dict("state", DataType::UInt16),
            Field::new("start_ns", DataType::Int64, false),
            Field::new("end_ns", DataType::Int64, false),
        ]));
        Ok(TimelineTable {
            out: ParquetOut::create(path, schema)?,
            names: slots,
            devices,
            open: initial.into_iter().map(|s| (s, 0)).collect(),
            device: StringDictionaryBuilder::new(),
            state: StringDictionaryBuilder::new(),
            start: Int64Builder::new(),
            end: Int64Builder::new(),
            rows: 0,
        })
    }

    fn emit(&mut self, dev: usize, end: Nanos) -> Result<(), String> {
        let (slot, start) = self.open[dev];
        if end > start {
            let path = &self.out.path;
            self.device
                .append(&self.devices[dev])
                .map_err(|e| format!("{path}: {e}"))?;
            self.state
                .append(&self.names[dev][slot])
                .map_err(|e| format!("{path}: {e}"))?;
            self.start.append_value(i64_of(start));
            self.end.append_value(i64_of(end));
            self.rows += 1;
            if self.rows == BATCH {
                self.flush()?;
            }
        }
        Ok(())
    }

    pub fn mode(&mut self, dev: u16, at: Nanos, slot: usize) -> Result<(), String> {
        let d = dev as usize;
        if self.open[d].0 == slot {
            return Ok(());
        }
        self.emit(d, at)?;
        self.open[d] = (slot, at);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        if self.rows == 0 {
            return Ok(());
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.device.finish()),
            Arc::new(self.state.finish()),
            Arc::new(self.start.finish()),
            Arc::new(self.end.finish()),
        ];
        self.out.write(cols)?;
        self.rows = 0;
        Ok(())
    }

    pub fn finish(mut self, end: Nanos) -> Result<(), String> {
        for d in 0..self.open.len() {
            self.emit(d, end)?;
        }
        self.flush()?;
        self.out.close()
    }
}

/// `energy.parquet`: the closed ledgers, one row per device and slot (and per-operation
/// energy: `DeviceRuntime::energy_rows`).
pub fn write_energy(
    path: &Path,
    rows: &[(String, wattio_core::ledger::LedgerRow)],
) -> Result<(), String> {
    let schema = Arc::new(Schema::new(vec![
        dict("device", DataType::UInt16),
        dict("state", DataType::UInt16),
        Field::new("is_transition", DataType::Boolean, false),
        Field::new("watts", DataType::Float64, false),
        Field::new("residency_ns", DataType::Int64, false),
        Field::new("entries", DataType::Int64, false),
        Field::new("energy_j", DataType::Float64, false),
    ]));
    let mut out = ParquetOut::create(path, schema)?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(
            rows.iter()
                .map(|r| r.0.as_str())
                .collect::<DictionaryArray<UInt16Type>>(),
        ),
        Arc::new(
            rows.iter()
                .map(|r| r.1.slot.as_str())
                .collect::<DictionaryArray<UInt16Type>>(),
        ),
        Arc::new(arrow_array::BooleanArray::from(
            rows.iter().map(|r| r.1.is_transition).collect::<Vec<_>>(),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.iter().map(|r| r.1.watts),
        )),
        Arc::new(arrow_array::Int64Array::from_iter_values(
            rows.iter().map(|r| i64_of(r.1.residency_ns)),
        )),
        Arc::new(arrow_array::Int64Array::from_iter_values(
            rows.iter().map(|r| i64_of(r.1.entries)),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.iter().map(|r| r.1.energy_j),
        )),
    ];
    out.write(cols)?;
    out.close()
}
