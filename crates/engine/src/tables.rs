//! Parquet tables a run writes, streamed in row groups so memory stays flat.
//!
//! The schemas are chosen for pandas: every time is a signed 64-bit count of nanoseconds
//! (`*_ns`; unsigned columns would make differences wrap around), every table names its
//! device, and names with few values (device, state, op, status) are dictionary-encoded, so
//! they arrive as categoricals.

use crate::sim::HostRequest;
use parquet::basic::{Compression, ZstdLevel};
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::Path;
use wattio_core::io::Status;
use wattio_core::time::Nanos;
use wattio_formats::parquet_io::{Col, ColumnBuffer, Kind, Writer};

/// Rows per row group (the values of one are held until it is written).
const BATCH: usize = 1 << 16;

/// A Parquet file written one row group at a time (zstd level 1: small files, cheap).
struct ParquetOut {
    w: Writer,
    path: String,
}

impl ParquetOut {
    fn create(path: &Path, cols: &[Col]) -> Result<ParquetOut, String> {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(1).map_err(|e| e.to_string())?,
            ))
            .build();
        let path = path.display().to_string();
        let w = File::create(&path)
            .map_err(|e| e.to_string())
            .and_then(|f| Writer::new(f, cols, props).map_err(|e| e.to_string()))
            .map_err(|e| format!("{path}: {e}"))?;
        Ok(ParquetOut { w, path })
    }

    /// Writes the buffers as a row group (nothing if they are empty) and empties them.
    fn flush(&mut self, buffers: &mut [&mut dyn ColumnBuffer]) -> Result<(), String> {
        self.w
            .flush(buffers)
            .map_err(|e| format!("{}: {e}", self.path))
    }

    fn close(self) -> Result<(), String> {
        self.w.close().map_err(|e| format!("{}: {e}", self.path))
    }
}

/// Dictionary-encoded names (device, state, op, status): pandas reads them as categoricals
/// (`ARROW:schema` says they are dictionaries, as Arrow's own writer said). Keys are Arrow's
/// as before: signed 8-bit for the small fixed sets, unsigned 16-bit for devices and states.
const fn small_names(name: &'static str) -> Col {
    Col::new(name, Kind::Utf8).dictionary(8, true)
}

const fn names(name: &'static str) -> Col {
    Col::new(name, Kind::Utf8).dictionary(16, false)
}

fn bytes_of<S: AsRef<str>>(names: &[S]) -> Vec<ByteArray> {
    names
        .iter()
        .map(|n| ByteArray::from(n.as_ref().as_bytes().to_vec()))
        .collect()
}

/// `op` values in the order of the request model's codes (`Op as u8`).
pub const OP_NAMES: [&str; 4] = ["read", "write", "flush", "discard"];
/// `status` values, as a Python function sees them in `Completion.status`.
pub const STATUS_NAMES: [&str; 5] = Status::NAMES;

const REQUEST_COLUMNS: [Col; 13] = [
    Col::new("id", Kind::Int64),
    Col::new("arrival_ns", Kind::Int64),
    Col::new("finish_ns", Kind::Int64),
    Col::new("latency_ns", Kind::Int64),
    Col::new("queue_ns", Kind::Int64),
    Col::new("power_wait_ns", Kind::Int64),
    Col::new("service_ns", Kind::Int64),
    small_names("op"),
    names("device"),
    Col::new("dev", Kind::UInt16),
    Col::new("offset", Kind::Int64),
    Col::new("len", Kind::Int64),
    small_names("status"),
];

/// `requests.parquet`: one row per host request, in completion order.
pub struct RequestsTable {
    out: ParquetOut,
    /// The names of device ids, op codes and status codes, each made once: a row's name is
    /// a reference to one of them.
    devices: Vec<ByteArray>,
    ops: Vec<ByteArray>,
    statuses: Vec<ByteArray>,
    id: Vec<i64>,
    arrival: Vec<i64>,
    finish: Vec<i64>,
    latency: Vec<i64>,
    queue: Vec<i64>,
    power_wait: Vec<i64>,
    service: Vec<i64>,
    op: Vec<ByteArray>,
    device: Vec<ByteArray>,
    dev: Vec<i32>,
    offset: Vec<i64>,
    len: Vec<i64>,
    status: Vec<ByteArray>,
}

/// Nanoseconds (or bytes) as the tables' signed 64-bit integers; 2^63 ns is 292 years, so
/// only a corrupt value can exceed it, and it saturates rather than turning negative.
fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl RequestsTable {
    /// `devices[d]` is the name of device id `d`.
    pub fn create(path: &Path, devices: &[String]) -> Result<RequestsTable, String> {
        Ok(RequestsTable {
            out: ParquetOut::create(path, &REQUEST_COLUMNS)?,
            devices: bytes_of(devices),
            ops: bytes_of(&OP_NAMES),
            statuses: bytes_of(&STATUS_NAMES),
            id: Vec::with_capacity(BATCH),
            arrival: Vec::with_capacity(BATCH),
            finish: Vec::with_capacity(BATCH),
            latency: Vec::with_capacity(BATCH),
            queue: Vec::with_capacity(BATCH),
            power_wait: Vec::with_capacity(BATCH),
            service: Vec::with_capacity(BATCH),
            op: Vec::with_capacity(BATCH),
            device: Vec::with_capacity(BATCH),
            dev: Vec::with_capacity(BATCH),
            offset: Vec::with_capacity(BATCH),
            len: Vec::with_capacity(BATCH),
            status: Vec::with_capacity(BATCH),
        })
    }

    pub fn push(&mut self, r: &HostRequest<'_>) -> Result<(), String> {
        let name = |names: &[ByteArray], i: usize, what: &str| {
            names
                .get(i)
                .cloned()
                .ok_or_else(|| format!("{}: no name for {what} {i}", self.out.path))
        };
        let device = name(&self.devices, usize::from(r.io.dev), "device")?;
        let op = name(&self.ops, r.io.op as usize, "op")?;
        let status = name(&self.statuses, r.status.index(), "status")?;
        self.id.push(i64_of(r.id));
        self.arrival.push(i64_of(r.arrival));
        self.finish.push(i64_of(r.finished));
        self.latency.push(i64_of(r.finished - r.arrival));
        self.queue.push(i64_of(r.breakdown.queue_ns));
        self.power_wait.push(i64_of(r.breakdown.power_wait_ns));
        self.service.push(i64_of(r.breakdown.service_ns));
        self.op.push(op);
        self.device.push(device);
        self.dev.push(i32::from(r.io.dev));
        self.offset.push(i64_of(r.io.offset));
        self.len.push(i64::from(r.io.len));
        self.status.push(status);
        if self.id.len() == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        self.out.flush(&mut [
            &mut self.id,
            &mut self.arrival,
            &mut self.finish,
            &mut self.latency,
            &mut self.queue,
            &mut self.power_wait,
            &mut self.service,
            &mut self.op,
            &mut self.device,
            &mut self.dev,
            &mut self.offset,
            &mut self.len,
            &mut self.status,
        ])
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
    /// Each device's name and its slots' names, made once.
    devices: Vec<ByteArray>,
    names: Vec<Vec<ByteArray>>,
    /// Open interval per device: (slot, start).
    open: Vec<(usize, Nanos)>,
    device: Vec<ByteArray>,
    state: Vec<ByteArray>,
    start: Vec<i64>,
    end: Vec<i64>,
}

const TIMELINE_COLUMNS: [Col; 4] = [
    names("device"),
    names("state"),
    Col::new("start_ns", Kind::Int64),
    Col::new("end_ns", Kind::Int64),
];

impl TimelineTable {
    /// `slots[d]` are device d's ledger slot names; every device starts in `initial[d]` at 0.
    pub fn create(
        path: &Path,
        devices: Vec<String>,
        slots: Vec<Vec<String>>,
        initial: Vec<usize>,
    ) -> Result<TimelineTable, String> {
        Ok(TimelineTable {
            out: ParquetOut::create(path, &TIMELINE_COLUMNS)?,
            devices: bytes_of(&devices),
            names: slots.iter().map(|s| bytes_of(s)).collect(),
            open: initial.into_iter().map(|s| (s, 0)).collect(),
            device: Vec::new(),
            state: Vec::new(),
            start: Vec::new(),
            end: Vec::new(),
        })
    }

    fn emit(&mut self, dev: usize, end: Nanos) -> Result<(), String> {
        let (slot, start) = self.open[dev];
        if end > start {
            let path = &self.out.path;
            let device = self.devices.get(dev).cloned();
            let state = self.names.get(dev).and_then(|n| n.get(slot)).cloned();
            let (Some(device), Some(state)) = (device, state) else {
                return Err(format!("{path}: no name for device {dev}, slot {slot}"));
            };
            self.device.push(device);
            self.state.push(state);
            self.start.push(i64_of(start));
            self.end.push(i64_of(end));
            if self.start.len() == BATCH {
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
        self.out.flush(&mut [
            &mut self.device,
            &mut self.state,
            &mut self.start,
            &mut self.end,
        ])
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
    const COLUMNS: [Col; 7] = [
        names("device"),
        names("state"),
        Col::new("is_transition", Kind::Boolean),
        Col::new("watts", Kind::Float64),
        Col::new("residency_ns", Kind::Int64),
        Col::new("entries", Kind::Int64),
        Col::new("energy_j", Kind::Float64),
    ];
    let mut out = ParquetOut::create(path, &COLUMNS)?;
    let text = |s: &str| ByteArray::from(s.as_bytes().to_vec());
    let mut device: Vec<ByteArray> = rows.iter().map(|r| text(&r.0)).collect();
    let mut state: Vec<ByteArray> = rows.iter().map(|r| text(&r.1.slot)).collect();
    let mut transition: Vec<bool> = rows.iter().map(|r| r.1.is_transition).collect();
    let mut watts: Vec<f64> = rows.iter().map(|r| r.1.watts).collect();
    let mut residency: Vec<i64> = rows.iter().map(|r| i64_of(r.1.residency_ns)).collect();
    let mut entries: Vec<i64> = rows.iter().map(|r| i64_of(r.1.entries)).collect();
    let mut energy: Vec<f64> = rows.iter().map(|r| r.1.energy_j).collect();
    out.flush(&mut [
        &mut device,
        &mut state,
        &mut transition,
        &mut watts,
        &mut residency,
        &mut entries,
        &mut energy,
    ])?;
    out.close()
}
