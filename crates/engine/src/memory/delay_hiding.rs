//! Delay-hiding over file-call traces (`wattio capture files`): the calls of one or more
//! traces, merged in time order (a multi-programmed mix), through the buffer cache and a
//! rank predictor of [`wattio_functions::memory::delay_hiding`].
//!
//! Only the calls that move data count; `fsync`/`fdatasync` rows (op flush) touch no
//! buffer-cache rank in this model and are skipped. File ids of the second and later traces
//! are shifted past the earlier traces' file tables, so two programs never share a file.

use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::path::Path;
use wattio_core::trace::TraceSource;
use wattio_core::{Op, Request};
use wattio_formats::{filecalls, ColumnarReader};
use wattio_functions::memory::delay_hiding::{DelayHiding, DelayHidingConfig, Report};

struct Stream {
    name: String,
    reader: ColumnarReader,
    files: u64,
    base: u64,
    row: u64,
}

impl Stream {
    /// The next data-moving call: (arrival, file id after the shift, offset, len, write).
    fn next(&mut self) -> Result<Option<(Request, u32)>, String> {
        loop {
            let Some(q) = self.reader.next_request().map_err(|e| e.to_string())? else {
                return Ok(None);
            };
            self.row += 1;
            if !matches!(q.op, Op::Read | Op::Write) {
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
            if q.len > 0 {
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

/// Run the traces' calls, merged by arrival (ties: the earlier trace), through `cfg`.
pub fn run_file_calls(paths: &[&Path], cfg: &DelayHidingConfig) -> Result<Report, String> {
    let mut dh = DelayHiding::new(cfg)?;
    let mut streams = open(paths)?;
    let mut heap = BinaryHeap::new();
    let mut pending = Vec::with_capacity(streams.len());
    for (i, s) in streams.iter_mut().enumerate() {
        let next = s.next()?;
        if let Some((q, _)) = next {
            heap.push(Reverse((q.arrival, i)));
        }
        pending.push(next);
    }
    while let Some(Reverse((_, i))) = heap.pop() {
        let (q, f) = pending[i].take().expect("a queued stream has a call");
        dh.call(f, q.offset, u64::from(q.len), q.op == Op::Write)
            .map_err(|e| format!("{}: row {}: {e}", streams[i].name, streams[i].row))?;
        let next = streams[i].next()?;
        if let Some((q, _)) = next {
            heap.push(Reverse((q.arrival, i)));
        }
        pending[i] = next;
    }
    Ok(dh.report())
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
