//! Delay-hiding over file-call traces (`wattio capture files`): the calls of one or more
//! traces, merged in time order (a multi-programmed mix), through the buffer cache and a
//! rank predictor of [`wattio_functions::memory::delay_hiding`].
//!
//! Only the calls that move data count; `fsync`/`fdatasync` rows (op flush) touch no
//! buffer-cache rank in this model and are skipped — except with storage in the loop
//! ([`run_with_storage`]), where they write the file's dirty blocks back. File ids of the
//! second and later traces are shifted past the earlier traces' file tables, so two
//! programs never share a file.

use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::path::Path;
use wattio_core::trace::{TraceError, TraceSource};
use wattio_core::{Nanos, Op, Request};
use wattio_devices::Catalogue;
use wattio_formats::{filecalls, ColumnarReader};
use wattio_functions::memory::delay_hiding::writeback::WrittenBack;
use wattio_functions::memory::delay_hiding::{DelayHiding, DelayHidingConfig, Report};

use crate::{RunConfig, Summary};

struct Stream {
    name: String,
    reader: ColumnarReader,
    files: u64,
    base: u64,
    row: u64,
}

impl Stream {
    /// The next call that moves data or syncs a file, with its file id after the shift.
    fn next(&mut self) -> Result<Option<(Request, u32)>, String> {
        loop {
            let Some(q) = self.reader.next_request().map_err(|e| e.to_string())? else {
                return Ok(None);
            };
            self.row += 1;
            if !matches!(q.op, Op::Read | Op::Write | Op::Flush) {
                continue;
            }
            let at = |m: String| format!("{}: row {}: {m}", self.name, self.row);
            let f = q
                .file
                .ok_or_else(|| at("no file id (expected a file-call trace row)".into()))?;
            if f >= self.files {
                return Err(at(format!(
                    "file id {f}: expected below the trace's {} files",
                    self.files
                )));
            }
            let id = u32::try_from(self.base + f).map_err(|_| at("file ids beyond 2^32".into()))?;
            return Ok(Some((q, id)));
        }
    }
}

fn open(paths: &[&Path]) -> Result<Vec<Stream>, String> {
    let mut base = 0;
    paths
        .iter()
        .map(|p| {
            let name = p.display().to_string();
            let reader = ColumnarReader::open(p).map_err(|e| e.to_string())?;
            let (files, _) =
                filecalls::metadata(reader.provenance(), &name).map_err(|e| e.to_string())?;
            let s = Stream {
                name,
                reader,
                files: files.len() as u64,
                base,
                row: 0,
            };
            base += s.files;
            Ok(s)
        })
        .collect()
}

/// Distinct `block_bytes` blocks the traces' calls touch.
pub fn footprint_blocks(paths: &[&Path], block_bytes: u64) -> Result<u64, String> {
    let mut seen = HashSet::new();
    for mut s in open(paths)? {
        while let Some((q, f)) = s.next()? {
            if q.len > 0 && q.op != Op::Flush {
                let first = q.offset / block_bytes;
                let last = q.offset.saturating_add(u64::from(q.len) - 1) / block_bytes;
                for b in first..=last {
                    seen.insert((f, b));
                }
            }
        }
    }
    Ok(seen.len() as u64)
}

/// The traces' calls merged by arrival (ties: the earlier trace).
struct Merged {
    streams: Vec<Stream>,
    heap: BinaryHeap<Reverse<(Nanos, usize)>>,
    /// Per stream: its next call, file id and row.
    pending: Vec<Option<(Request, u32, u64)>>,
    /// The stream and row of the call last returned.
    last: (usize, u64),
}

impl Merged {
    fn new(paths: &[&Path]) -> Result<Merged, String> {
        let mut streams = open(paths)?;
        let mut heap = BinaryHeap::new();
        let mut pending = Vec::with_capacity(streams.len());
        for (i, s) in streams.iter_mut().enumerate() {
            let next = s.next()?.map(|(q, f)| (q, f, s.row));
            if let Some((q, ..)) = next {
                heap.push(Reverse((q.arrival, i)));
            }
            pending.push(next);
        }
        Ok(Merged {
            streams,
            heap,
            pending,
            last: (0, 0),
        })
    }

    /// The next call and its file id.
    fn next(&mut self) -> Result<Option<(Request, u32)>, String> {
        let Some(Reverse((_, i))) = self.heap.pop() else {
            return Ok(None);
        };
        let (q, f, row) = self.pending[i].take().expect("a queued stream has a call");
        self.last = (i, row);
        let s = &mut self.streams[i];
        let next = s.next()?.map(|(q, f)| (q, f, s.row));
        if let Some((q, ..)) = next {
            self.heap.push(Reverse((q.arrival, i)));
        }
        self.pending[i] = next;
        Ok(Some((q, f)))
    }

    /// "TRACE: row N" of the call [`Merged::next`] last returned.
    fn at(&self) -> String {
        format!("{}: row {}", self.streams[self.last.0].name, self.last.1)
    }
}

/// Run the traces' calls, merged by arrival (ties: the earlier trace), through `cfg`.
pub fn run_file_calls(paths: &[&Path], cfg: &DelayHidingConfig) -> Result<Report, String> {
    let mut dh = DelayHiding::new(cfg)?;
    let mut calls = Merged::new(paths)?;
    while let Some((q, f)) = calls.next()? {
        if q.op != Op::Flush {
            dh.call(f, q.offset, u64::from(q.len), q.op == Op::Write)
                .map_err(|e| format!("{}: {e}", calls.at()))?;
        }
    }
    Ok(dh.report())
}

/// Requests to storage are merged up to this many bytes (Linux's default
/// `max_sectors_kb` is 1280 on most devices; a round 1 MiB).
pub const MAX_STORAGE_REQUEST: u64 = 1 << 20;

/// Where each file lies on the storage device: the files one after another in file-id
/// order (the traces' order, then each trace's table), each as long as the furthest byte
/// the traces touch in it, rounded up to a block (a file-call trace holds no file sizes),
/// starting at byte 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Per file id: its first byte on the device.
    pub start: Vec<u64>,
    /// Bytes the files take in all.
    pub bytes: u64,
    /// The last call's arrival.
    pub last_arrival: Nanos,
}

/// The storage layout of the traces' files (one pass over them).
pub fn layout(paths: &[&Path], block_bytes: u64) -> Result<Layout, String> {
    let mut extent: Vec<u64> = Vec::new();
    let mut last_arrival = 0;
    for mut s in open(paths)? {
        extent.resize(extent.len() + s.files as usize, 0);
        while let Some((q, f)) = s.next()? {
            last_arrival = last_arrival.max(q.arrival);
            if q.op != Op::Flush {
                let end = q.offset.saturating_add(u64::from(q.len));
                let e = &mut extent[f as usize];
                *e = (*e).max(end);
            }
        }
    }
    let mut start = Vec::with_capacity(extent.len());
    let mut bytes: u64 = 0;
    for e in extent {
        start.push(bytes);
        let rounded = e
            .checked_next_multiple_of(block_bytes)
            .and_then(|e| bytes.checked_add(e))
            .ok_or_else(|| "the traces' files take more than 2^64 bytes".to_string())?;
        bytes = rounded;
    }
    Ok(Layout {
        start,
        bytes,
        last_arrival,
    })
}

/// The buffer cache's storage traffic as a trace: the calls run through the delay-hiding
/// model one at a time as the simulator asks for requests, so the traffic is never held
/// whole (a long trace's misses and write-backs would be).
struct StorageSource {
    calls: Merged,
    dh: DelayHiding,
    layout: Layout,
    block_bytes: u64,
    queue: VecDeque<Request>,
    done: bool,
}

impl StorageSource {
    /// One more call through the model; its storage I/O queued, adjacent blocks of one
    /// file merged into one request.
    fn step(&mut self) -> Result<(), String> {
        match self.calls.next()? {
            None => {
                self.dh.finish_storage();
                self.done = true;
            }
            Some((q, f)) => {
                self.dh.at(q.arrival);
                if q.op == Op::Flush {
                    self.dh.sync(f);
                } else {
                    self.dh
                        .call(f, q.offset, u64::from(q.len), q.op == Op::Write)
                        .map_err(|e| format!("{}: {e}", self.calls.at()))?;
                }
            }
        }
        let bs = self.block_bytes;
        let io = self.dh.storage_io().expect("storage is in the loop");
        for b in io.drain(..) {
            let offset = self.layout.start[b.file as usize] + b.block * bs;
            let op = if b.write { Op::Write } else { Op::Read };
            if let Some(last) = self.queue.back_mut() {
                if last.arrival == b.at
                    && last.op == op
                    && last.file == Some(u64::from(b.file))
                    && last.offset + u64::from(last.len) == offset
                    && u64::from(last.len) + bs <= MAX_STORAGE_REQUEST
                {
                    last.len += bs as u32;
                    continue;
                }
            }
            let mut r = Request::new(b.at, op, offset, bs as u32);
            r.file = Some(u64::from(b.file));
            self.queue.push_back(r);
        }
        Ok(())
    }
}

impl TraceSource for StorageSource {
    fn next_request(&mut self) -> Result<Option<Request>, TraceError> {
        // A request may still grow while the next call is at the same time, so one is
        // handed out only once a later one is queued, or the trace is done.
        while self.queue.len() < 2 && !self.done {
            self.step()
                .map_err(|e| TraceError::new("delay-hiding storage", e))?;
        }
        Ok(self.queue.pop_front())
    }

    fn assumptions(&self) -> Vec<String> {
        vec![format!(
            "the buffer cache's misses and write-backs: the traces' files one after another from byte 0 ({} bytes), requests merged up to {MAX_STORAGE_REQUEST} bytes",
            self.layout.bytes
        )]
    }
}

/// What a run with storage in the loop gives: the memory side as without it, the blocks
/// written back by cause, and the storage stack's run summary.
pub struct StorageRun {
    pub report: Report,
    pub written_back: WrittenBack,
    pub summary: Summary,
}

/// Run the traces' calls through `cfg` with the buffer cache's misses and write-backs
/// served by the stack of `storage` (a run config: its devices and functions; it may not
/// have a workload or trace of its own), at the calls' times on the trace's clock. The
/// storage run lasts at least until the last call, and until the flusher has written back
/// every dirty block. The memory side is the same as [`run_file_calls`]'s.
pub fn run_with_storage(
    paths: &[&Path],
    cfg: &DelayHidingConfig,
    storage: &RunConfig,
    cat: &Catalogue,
) -> Result<StorageRun, String> {
    if storage.workload.is_some() || storage.trace.is_some() {
        return Err(
            "storage config: expected devices and functions only (no [workload] or [trace]: the buffer cache's traffic is the storage's workload)"
                .into(),
        );
    }
    let mut dh = DelayHiding::new(cfg)?;
    dh.enable_storage();
    let layout = layout(paths, cfg.block_bytes)?;
    let asm = crate::assemble(storage, cat, None, &mut crate::Registry::new(), 0)
        .map_err(|e| storage.located(e))?;
    let reach = crate::reach::Reach::of(&asm);
    if let Some((name, Some(size))) = reach.device(0) {
        if layout.bytes > size {
            return Err(format!(
                "storage: the traces' files take {} bytes, expected at most the {size} bytes of `{name}` (choose a larger device)",
                layout.bytes
            ));
        }
    }
    let models = asm.models.clone();
    let mut source = StorageSource {
        calls: Merged::new(paths)?,
        dh,
        layout,
        block_bytes: cfg.block_bytes,
        queue: VecDeque::new(),
        done: false,
    };
    let min_end = source.layout.last_arrival;
    let sim = crate::Simulator::new(asm.stack, asm.devices).unloading(storage.run.unload);
    let outcome = if storage.run.check_data {
        let mut checker = wattio_core::integrity::Checker::for_run(storage.run.check_block)?;
        sim.with_observer(&mut checker)
            .run(&mut source, None, min_end, &mut crate::NullSink)?
    } else {
        sim.run(&mut source, None, min_end, &mut crate::NullSink)?
    };
    if !source.done || !source.queue.is_empty() {
        return Err("storage: the run ended before the buffer cache's traffic did".into());
    }
    let summary = Summary::build(
        storage.run.name.clone(),
        storage.run.seed,
        &models,
        &outcome,
    );
    Ok(StorageRun {
        report: source.dh.report(),
        written_back: source.dh.written_back(),
        summary,
    })
}

/// A storage run as JSON: the memory report's, plus `written_back` and `storage` (the
/// storage stack's run summary, as `summary.json`).
pub fn storage_json(r: &StorageRun) -> Result<Value, String> {
    let mut v = report_json(&r.report);
    let w = r.written_back;
    v["written_back"] = json!({"evicted": w.evicted, "synced": w.synced, "expired": w.expired});
    v["storage"] = serde_json::to_value(&r.summary).map_err(|e| e.to_string())?;
    Ok(v)
}

/// A report as JSON (the Python side's view).
pub fn report_json(r: &Report) -> Value {
    let p = r.predictions;
    let e = r.energy;
    json!({
        "calls": r.calls,
        "empty_calls": r.empty_calls,
        "prediction_hit": p.hit,
        "prediction_miss": p.miss,
        "prediction_wrong": p.wrong,
        "wasted_wakeups": p.wasted_wakeups,
        "cache_hits": r.cache_hits,
        "cache_misses": r.cache_misses,
        "memory_io_ns": r.memory_io_ns,
        "kernel_ns": r.kernel_ns,
        "delay_ns": r.delay_ns,
        "normalized_time": r.normalized_time(),
        "energy_io_j": e.io_j,
        "energy_precharge_j": e.precharge_j,
        "energy_powerdown_j": e.powerdown_j,
        "energy_self_refresh_j": e.self_refresh_j,
        "energy_transitions_j": e.transitions_j,
        "energy_j": e.total_j(),
    })
}
