//! Devices that move data to and from memory by DMA, without the CPU: a network card
//! receiving frames into its ring of buffers, a disk controller filling them (Huang 2006
//! §2.6). A DMA access needs its rank powered like any other, but no process runs it, so a
//! policy that powers ranks by the running processes (PAVM) may have put the buffer's rank
//! to sleep. The thesis's rule: DMA buffers lie in a fixed physical range, the first rank,
//! which DLL aggregation keeps in every process's active set (`memory.dma_zone`).
//!
//! A device is periodic (a transfer of `bytes` every `period_ns` from `start_ns`) or driven
//! by a block trace (each read or write a transfer per page of its bytes, at its arrival),
//! into (or out of) the next page of a ring of `ring_pages` pages allocated when the run
//! starts, as a driver allocates its ring when it loads. Transfers run until the last process
//! exits; a transfer's lines go on the channel back to back from its arrival (or from when
//! the channel is free), each waking its rank if it sleeps. A transfer that arrives while
//! every buffer of the ring is still being filled is dropped (a receive overrun: a network
//! card drops the frame when its ring is exhausted): the ring bounds a device's backlog, so
//! a device slowed by sleeping ranks (each line of a transfer may wait for an exit under
//! ISR) cannot queue without end.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::Path;
use wattio_core::io::Op;
use wattio_core::time::secs_to_ns;
use wattio_core::trace::TraceSource;
use wattio_core::Nanos;

/// Where DMA buffers lie (`memory.dma_zone`).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DmaZone {
    /// The thesis's rule: the first rank (on x86 the ISA DMA zone, the first 16 MB, lies
    /// there anyway).
    FirstRank,
    /// Wherever the run's default placement (`memory.placement`) puts a page.
    Anywhere,
}

/// One `[[dma]]` device of a memory-run config: periodic (`period_ns` and `bytes`) or
/// driven by a block trace (`trace`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DmaDef {
    /// One transfer every `period_ns` (e.g. a gigabit link receiving 1,500-byte frames at
    /// 10 % load: one every 120 µs).
    pub period_ns: Option<Nanos>,
    /// The first transfer's arrival (a trace's first request is moved there).
    #[serde(default)]
    pub start_ns: Nanos,
    /// Bytes per transfer, into one buffer page (so at most a page); whole lines move.
    pub bytes: Option<u64>,
    /// Pages of the device's ring of buffers, one per transfer in turn.
    pub ring_pages: u64,
    /// `true`: device to memory (a receive: line writes); `false`: memory to device (reads).
    /// A trace's requests say it themselves (a read fills memory, a write drains it).
    pub write: Option<bool>,
    /// A block trace (any format wattio reads; relative to the config's folder) whose reads
    /// and writes are the device's transfers, at their arrival times, one per page.
    pub trace: Option<String>,
    /// The trace's format (detected when absent).
    pub format: Option<String>,
    /// Keep only this device of a multi-device trace (as `--device`).
    pub device: Option<String>,
}

/// Most `[[dma]]` devices one run may have.
pub const MAX_DEVICES: usize = 64;
/// Most pages one device's ring, and all the devices' rings together, may hold (4 GiB of
/// 4 KiB pages).
pub const MAX_RING_PAGES: u64 = 1 << 20;

impl DmaDef {
    /// Check the device against the run's page size and one line's channel time; errors
    /// name the key (`dma[i].…`).
    pub fn check(
        &self,
        i: usize,
        page_bytes: u64,
        line_bytes: u64,
        service: Nanos,
    ) -> Result<(), String> {
        if !(1..=MAX_RING_PAGES).contains(&self.ring_pages) {
            return Err(format!(
                "dma[{i}].ring_pages: expected 1..={MAX_RING_PAGES}, got {}",
                self.ring_pages
            ));
        }
        if self.start_ns > secs_to_ns(1e4) {
            return Err(format!(
                "dma[{i}].start_ns: at most 10^4 s, got {}",
                self.start_ns
            ));
        }
        if self.trace.is_some() {
            let periodic = [
                ("period_ns", self.period_ns.is_some()),
                ("bytes", self.bytes.is_some()),
                ("write", self.write.is_some()),
            ];
            if let Some((key, _)) = periodic.iter().find(|k| k.1) {
                return Err(format!(
                    "dma[{i}].{key}: a trace-driven device takes its transfers from the trace (give `trace` or `period_ns` and `bytes`, not both)"
                ));
            }
            return Ok(());
        }
        for (key, given) in [
            ("format", self.format.is_some()),
            ("device", self.device.is_some()),
        ] {
            if given {
                return Err(format!("dma[{i}].{key}: only with `trace`"));
            }
        }
        let (Some(period), Some(bytes)) = (self.period_ns, self.bytes) else {
            return Err(format!(
                "dma[{i}]: expected `period_ns` and `bytes` (a periodic device) or `trace` (a block trace's reads and writes)"
            ));
        };
        if !(1..=page_bytes).contains(&bytes) {
            return Err(format!(
                "dma[{i}].bytes: expected 1..={page_bytes} (one buffer page per transfer), got {bytes}"
            ));
        }
        // A device that needs more channel time than it has would queue without bound.
        let lines = bytes.div_ceil(line_bytes);
        let busy = lines * service;
        if period < busy.max(1) || period > secs_to_ns(1e4) {
            return Err(format!(
                "dma[{i}].period_ns: expected {}..=10^13 ns (a transfer of {lines} lines takes {busy} ns of the channel), got {period}",
                busy.max(1)
            ));
        }
        Ok(())
    }

    /// The device at run time over the ring `ring`, its first transfer loaded (a trace's
    /// path is the config's, already joined to the config's folder).
    pub(crate) fn device(
        &self,
        i: usize,
        page_bytes: u64,
        line_bytes: u64,
        ring: Vec<u64>,
    ) -> Result<Device, String> {
        let mut dev = Device {
            source: Source::Periodic {
                period: self.period_ns.unwrap_or(1),
            },
            next: self.start_ns,
            lines: self.bytes.unwrap_or(1).div_ceil(line_bytes),
            write: self.write.unwrap_or(true),
            ring,
            turn: 0,
            busy: VecDeque::new(),
        };
        if let Some(path) = &self.trace {
            let opts = wattio_formats::ReadOptions {
                device: self.device.clone(),
                ..Default::default()
            };
            let reader = wattio_formats::open_trace(Path::new(path), self.format.as_deref(), &opts)
                .map_err(|e| format!("dma[{i}].trace: {e}"))?;
            dev.source = Source::Trace(Box::new(TraceFeed {
                index: i,
                reader,
                start: self.start_ns,
                first: None,
                last: 0,
                left: 0,
                write: false,
                page_bytes,
                line_bytes,
            }));
            dev.advance()?;
        }
        Ok(dev)
    }
}

/// Where a device's transfers come from.
pub(crate) enum Source {
    /// The same transfer (`Device::lines`, `Device::write`) every `period` ns.
    Periodic {
        period: Nanos,
    },
    Trace(Box<TraceFeed>),
}

/// A block trace read as the run goes: each read or write becomes a transfer per page of
/// its bytes, all at its arrival (moved so the first request arrives at `start_ns`).
pub(crate) struct TraceFeed {
    /// The device's index (its errors name `dma[index].trace`; the reader's, the file and
    /// line).
    index: usize,
    reader: Box<dyn TraceSource>,
    start: Nanos,
    first: Option<Nanos>,
    /// The last arrival handed out (arrivals never go back).
    last: Nanos,
    /// Bytes of the current request not handed out yet, and its direction (a read fills
    /// memory: the device writes).
    left: u64,
    write: bool,
    page_bytes: u64,
    line_bytes: u64,
}

impl TraceFeed {
    /// The next transfer: (arrival, lines, write); `None` at the end of the trace.
    fn next(&mut self) -> Result<Option<(Nanos, u64, bool)>, String> {
        while self.left == 0 {
            let r = self
                .reader
                .next_request()
                .map_err(|e| format!("dma[{}].trace: {e}", self.index))?;
            let Some(r) = r else {
                return Ok(None);
            };
            let write = match r.op {
                Op::Read => true,
                Op::Write => false,
                _ => continue,
            };
            let first = *self.first.get_or_insert(r.arrival);
            let at = r
                .arrival
                .saturating_sub(first)
                .saturating_add(self.start)
                .max(self.last);
            self.last = at;
            self.left = u64::from(r.len);
            self.write = write;
        }
        let chunk = self.left.min(self.page_bytes);
        self.left -= chunk;
        Ok(Some((
            self.last,
            chunk.div_ceil(self.line_bytes),
            self.write,
        )))
    }
}

/// A device at run time.
pub(crate) struct Device {
    pub source: Source,
    /// The next transfer: its arrival (`Nanos::MAX`: none), lines and direction.
    pub next: Nanos,
    pub lines: u64,
    pub write: bool,
    /// The ring's physical pages, used in turn from `turn`.
    pub ring: Vec<u64>,
    pub turn: usize,
    /// When each buffer still being filled will be done, oldest first (at most the ring).
    pub busy: VecDeque<Nanos>,
}

/// What the devices did (the summary's `dma`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DmaSummary {
    pub transfers: u64,
    /// Transfers that arrived with every buffer of their ring still being filled (dropped).
    pub dropped: u64,
    /// Line accesses (counted in the ranks' reads and writes, not in the run's).
    pub lines: u64,
    /// Lines that found their rank in powerdown or self refresh and waited for its exit.
    pub delayed: u64,
    /// From a transfer's arrival to its last line's end.
    pub mean_latency_ns: f64,
    pub max_latency_ns: Nanos,
    /// Buffer pages per rank (all devices; held for the whole run).
    pub pages_per_rank: Vec<u64>,
}

impl Device {
    /// Load the transfer after the current one.
    pub(crate) fn advance(&mut self) -> Result<(), String> {
        match &mut self.source {
            Source::Periodic { period, .. } => {
                self.next = self.next.saturating_add(*period);
            }
            Source::Trace(feed) => match feed.next()? {
                Some((at, lines, write)) => {
                    (self.next, self.lines, self.write) = (at, lines, write);
                }
                None => self.next = Nanos::MAX,
            },
        }
        Ok(())
    }
}
