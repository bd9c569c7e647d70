//! Parquet tables a run writes, streamed in row groups so memory stays flat.

use crate::sim::HostRequest;
use arrow_array::builder::{
    Float64Builder, StringBuilder, UInt16Builder, UInt32Builder, UInt64Builder, UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
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

fn status_code(s: Status) -> u8 {
    match s {
        Status::Ok => 0,
        Status::IoError => 1,
        Status::Invalid => 2,
        Status::NoSpace => 3,
        Status::NotSupported => 4,
    }
}

/// `requests.parquet`: one row per host request, in completion order.
pub struct RequestsTable {
    out: ParquetOut,
    id: UInt64Builder,
    arrival: UInt64Builder,
    finish: UInt64Builder,
    latency: UInt64Builder,
    queue: UInt64Builder,
    power_wait: UInt64Builder,
    service: UInt64Builder,
    op: UInt8Builder,
    dev: UInt16Builder,
    offset: UInt64Builder,
    len: UInt32Builder,
    status: UInt8Builder,
    rows: usize,
}

impl RequestsTable {
    pub fn create(path: &Path) -> Result<RequestsTable, String> {
        let u64f = |n: &str| Field::new(n, DataType::UInt64, false);
        let schema = Arc::new(Schema::new(vec![
            u64f("id"),
            u64f("arrival_ns"),
            u64f("finish_ns"),
            u64f("latency_ns"),
            u64f("queue_ns"),
            u64f("power_wait_ns"),
            u64f("service_ns"),
            Field::new("op", DataType::UInt8, false),
            Field::new("dev", DataType::UInt16, false),
            u64f("offset"),
            Field::new("len", DataType::UInt32, false),
            Field::new("status", DataType::UInt8, false),
        ]));
        Ok(RequestsTable {
            out: ParquetOut::create(path, schema)?,
            id: UInt64Builder::with_capacity(BATCH),
            arrival: UInt64Builder::with_capacity(BATCH),
            finish: UInt64Builder::with_capacity(BATCH),
            latency: UInt64Builder::with_capacity(BATCH),
            queue: UInt64Builder::with_capacity(BATCH),
            power_wait: UInt64Builder::with_capacity(BATCH),
            service: UInt64Builder::with_capacity(BATCH),
            op: UInt8Builder::with_capacity(BATCH),
            dev: UInt16Builder::with_capacity(BATCH),
            offset: UInt64Builder::with_capacity(BATCH),
            len: UInt32Builder::with_capacity(BATCH),
            status: UInt8Builder::with_capacity(BATCH),
            rows: 0,
        })
    }

    pub fn push(&mut self, r: &HostRequest<'_>) -> Result<(), String> {
        self.id.append_value(r.id);
        self.arrival.append_value(r.arrival);
        self.finish.append_value(r.finished);
        self.latency.append_value(r.finished - r.arrival);
        self.queue.append_value(r.breakdown.queue_ns);
        self.power_wait.append_value(r.breakdown.power_wait_ns);
        self.service.append_value(r.breakdown.service_ns);
        self.op.append_value(r.io.op as u8);
        self.dev.append_value(r.io.dev);
        self.offset.append_value(r.io.offset);
        self.len.append_value(r.io.len);
        self.status.append_value(status_code(r.status));
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
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.id.finish()),
            Arc::new(self.arrival.finish()),
            Arc::new(self.finish.finish()),
            Arc::new(self.latency.finish()),
            Arc::new(self.queue.finish()),
            Arc::new(self.power_wait.finish()),
            Arc::new(self.service.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.dev.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.len.finish()),
            Arc::new(self.status.finish()),
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

/// `timeline.parquet`: power-mode intervals per device (`device`, `state`, `start_s`,
/// `end_s`). Busy sub-states are folded into the ready state around them.
pub struct TimelineTable {
    out: ParquetOut,
    names: Vec<Vec<String>>,
    devices: Vec<String>,
    /// Open interval per device: (slot, start).
    open: Vec<(usize, Nanos)>,
    device: StringBuilder,
    state: StringBuilder,
    start: Float64Builder,
    end: Float64Builder,
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
            Field::new("device", DataType::Utf8, false),
            Field::new("state", DataType::Utf8, false),
            Field::new("start_s", DataType::Float64, false),
            Field::new("end_s", DataType::Float64, false),
        ]));
        Ok(TimelineTable {
            out: ParquetOut::create(path, schema)?,
            names: slots,
            devices,
            open: initial.into_iter().map(|s| (s, 0)).collect(),
            device: StringBuilder::new(),
            state: StringBuilder::new(),
            start: Float64Builder::new(),
            end: Float64Builder::new(),
            rows: 0,
        })
    }

    fn emit(&mut self, dev: usize, end: Nanos) -> Result<(), String> {
        let (slot, start) = self.open[dev];
        if end > start {
            self.device.append_value(&self.devices[dev]);
            self.state.append_value(&self.names[dev][slot]);
            self.start.append_value(start as f64 / 1e9);
            self.end.append_value(end as f64 / 1e9);
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

/// `energy.parquet`: the closed ledgers, one row per device and slot.
pub fn write_energy(
    path: &Path,
    rows: &[(String, wattio_core::ledger::LedgerRow)],
) -> Result<(), String> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("device", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("is_transition", DataType::Boolean, false),
        Field::new("watts", DataType::Float64, false),
        Field::new("residency_s", DataType::Float64, false),
        Field::new("entries", DataType::UInt64, false),
        Field::new("energy_j", DataType::Float64, false),
    ]));
    let mut out = ParquetOut::create(path, schema)?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(arrow_array::StringArray::from_iter_values(
            rows.iter().map(|r| r.0.as_str()),
        )),
        Arc::new(arrow_array::StringArray::from_iter_values(
            rows.iter().map(|r| r.1.slot.as_str()),
        )),
        Arc::new(arrow_array::BooleanArray::from(
            rows.iter().map(|r| r.1.is_transition).collect::<Vec<_>>(),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.iter().map(|r| r.1.watts),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.iter().map(|r| r.1.residency_ns as f64 / 1e9),
        )),
        Arc::new(arrow_array::UInt64Array::from_iter_values(
            rows.iter().map(|r| r.1.entries),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.iter().map(|r| r.1.energy_j),
        )),
    ];
    out.write(cols)?;
    out.close()
}
