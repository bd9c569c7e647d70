//! Devices that move data to and from memory by DMA, without the CPU: a network card
//! receiving frames into its ring of buffers, a disk controller filling them (Huang 2006
//! §2.6). A DMA access needs its rank powered like any other, but no process runs it, so a
//! policy that powers ranks by the running processes (PAVM) may have put the buffer's rank
//! to sleep. The thesis's rule: DMA buffers lie in a fixed physical range, the first rank,
//! which DLL aggregation keeps in every process's active set (`memory.dma_zone`).
//!
//! A device here is periodic: a transfer of `bytes` every `period_ns` from `start_ns`, into
//! (or out of) the next page of a ring of `ring_pages` pages allocated when the run starts,
//! as a driver allocates its ring when it loads. Transfers run until the last process
//! exits; a transfer's lines go on the channel back to back from its arrival (or from when
//! the channel is free), each waking its rank if it sleeps. A transfer that arrives while
//! every buffer of the ring is still being filled is dropped (a receive overrun: a network
//! card drops the frame when its ring is exhausted): the ring bounds a device's backlog, so
//! a device slowed by sleeping ranks (each line of a transfer may wait for an exit under
//! ISR) cannot queue without end.

use serde::{Deserialize, Serialize};
use wattio_core::time::secs_to_ns;
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

/// One `[[dma]]` device of a memory-run config.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DmaDef {
    /// One transfer every `period_ns` (e.g. a gigabit link receiving 1,500-byte frames at
    /// 10 % load: one every 120 µs).
    pub period_ns: Nanos,
    /// The first transfer's arrival.
    #[serde(default)]
    pub start_ns: Nanos,
    /// Bytes per transfer, into one buffer page (so at most a page); whole lines move.
    pub bytes: u64,
    /// Pages of the device's ring of buffers, one per transfer in turn.
    pub ring_pages: u64,
    /// `true`: device to memory (a receive: line writes); `false`: memory to device (reads).
    #[serde(default = "yes")]
    pub write: bool,
}

fn yes() -> bool {
    true
}

/// Most `[[dma]]` devices one run may have.
pub const MAX_DEVICES: usize = 64;
/// Most pages one device's ring may hold (4 GiB of 4 KiB pages).
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
        if !(1..=page_bytes).contains(&self.bytes) {
            return Err(format!(
                "dma[{i}].bytes: expected 1..={page_bytes} (one buffer page per transfer), got {}",
                self.bytes
            ));
        }
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
        // A device that needs more channel time than it has would queue without bound.
        let busy = self.lines(line_bytes) * service;
        if self.period_ns < busy.max(1) || self.period_ns > secs_to_ns(1e4) {
            return Err(format!(
                "dma[{i}].period_ns: expected {}..=10^13 ns (a transfer of {} lines takes {busy} ns of the channel), got {}",
                busy.max(1),
                self.lines(line_bytes),
                self.period_ns
            ));
        }
        Ok(())
    }

    /// Lines one transfer moves.
    pub fn lines(&self, line_bytes: u64) -> u64 {
        self.bytes.div_ceil(line_bytes)
    }
}

/// A device at run time.
pub(crate) struct Device {
    pub period: Nanos,
    /// The next transfer's arrival.
    pub next: Nanos,
    pub lines: u64,
    pub write: bool,
    /// The ring's physical pages, used in turn from `turn`.
    pub ring: Vec<u64>,
    pub turn: usize,
    /// When each buffer still being filled will be done, oldest first (at most the ring).
    pub busy: std::collections::VecDeque<Nanos>,
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
