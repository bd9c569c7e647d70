//! Serving a device's queue by block number: DiskSim's LBN schedulers (`disksim_ioqueue.c`),
//! which order a device driver's queue in front of any drive — the host's elevator. The
//! `hdd-mechanical` model orders its own queue with them (`timing.scheduler`), and any
//! device takes one through [`QueueOrdered`] (`[[device]] queue = "clook"` in a run config).
//!
//! Block numbers are 512-byte sectors of the request's offset. Each order moves from a
//! reference block set when a data request starts — its first block under LOOK and C-LOOK,
//! one past its last under SSTF — as DiskSim's `lastblkno`; the queue starts at block 0,
//! ascending.

use wattio_core::device::{Service, Timing};
use wattio_core::io::Io;
use wattio_core::time::Nanos;

const SECTOR: u64 = 512;

/// DiskSim's block-number orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LbnOrder {
    /// ELEVATOR_LBN (2): on in the current direction while a request lies ahead, then turn
    /// (LOOK).
    Look,
    /// CYCLE_LBN (3): the lowest block at or after the reference, else the lowest of all
    /// (C-LOOK).
    Clook,
    /// SSTF_LBN (4): the nearest block to the reference, either side.
    SstfLbn,
}

impl LbnOrder {
    /// `look`, `clook`, `sstf-lbn`; `None` for another name.
    pub fn parse(name: &str) -> Option<LbnOrder> {
        Some(match name {
            "look" => LbnOrder::Look,
            "clook" => LbnOrder::Clook,
            "sstf-lbn" => LbnOrder::SstfLbn,
            _ => return None,
        })
    }
}

/// A queue order and its state: the reference block (DiskSim's `lastblkno`), the direction
/// (`dir`, true ascending) and the tie alternation (`sstfupdown`).
#[derive(Clone, Debug)]
pub struct LbnQueue {
    order: LbnOrder,
    /// The distance LOOK adds against its direction: the device's block count (any
    /// distance on the device is shorter, so it turns only when nothing lies ahead).
    blocks: u64,
    reference: u64,
    ascending: bool,
    tie_down: bool,
}

impl LbnQueue {
    /// `order` on a device of `capacity` bytes.
    pub fn new(order: LbnOrder, capacity: u64) -> LbnQueue {
        LbnQueue {
            order,
            blocks: capacity / SECTOR,
            reference: 0,
            ascending: true,
            tie_down: false,
        }
    }

    /// A data request of blocks `lbn..lbn + count` starts: the reference moves, as DiskSim's
    /// ioqueue moves `lastblkno` when it hands a request on, and the direction turns to
    /// where it went.
    pub fn started(&mut self, lbn: u64, count: u64) {
        if lbn != self.reference {
            self.ascending = lbn > self.reference;
        }
        self.reference = match self.order {
            LbnOrder::SstfLbn => lbn.saturating_add(count),
            LbnOrder::Look | LbnOrder::Clook => lbn,
        };
    }

    /// The index in `queue` (in arrival order, at least two) of the request to serve next.
    pub fn pick(&mut self, queue: &[Io]) -> usize {
        match self.order {
            LbnOrder::Look => self.pick_vscan(queue, self.blocks),
            LbnOrder::SstfLbn => self.pick_vscan(queue, 0),
            LbnOrder::Clook => self.pick_cycle(queue),
        }
    }

    /// DiskSim's `ioqueue_get_request_from_lbn_vscan_queue`: `top` is the lowest block at
    /// or after the reference, `bottom` the highest before it (the earliest queued among
    /// equal blocks, as DiskSim's list sorted by block keeps arrival order among equals);
    /// the distance against the current direction pays `penalty` blocks. Equal distances
    /// alternate, bottom first after a tie taken at the top.
    fn pick_vscan(&mut self, queue: &[Io], penalty: u64) -> usize {
        let r = self.reference;
        let mut top: Option<(u64, usize)> = None;
        let mut bottom: Option<(u64, usize)> = None;
        for (i, io) in queue.iter().enumerate() {
            let b = io.offset / SECTOR;
            if b >= r {
                if top.is_none_or(|(t, _)| b < t) {
                    top = Some((b, i));
                }
            } else if bottom.is_none_or(|(t, _)| b > t) {
                bottom = Some((b, i));
            }
        }
        let (top, bottom) = match (top, bottom) {
            (None, None) => return 0,
            (Some((_, i)), None) | (None, Some((_, i))) => return i,
            (Some(t), Some(b)) => (t, b),
        };
        let mut up = top.0 - r;
        let mut down = r - bottom.0;
        if self.ascending {
            down = down.saturating_add(penalty);
        } else if up != 0 {
            up = up.saturating_add(penalty);
        }
        let pick = if up < down {
            top.1
        } else if up > down || self.tie_down {
            bottom.1
        } else {
            top.1
        };
        if up == down {
            self.tie_down = !self.tie_down;
        }
        pick
    }

    /// DiskSim's `ioqueue_get_request_from_lbn_scan_queue`: the lowest block at or after
    /// the reference, else the lowest of all (earliest queued among equals).
    fn pick_cycle(&self, queue: &[Io]) -> usize {
        let r = self.reference;
        let key = |io: &Io| {
            let b = io.offset / SECTOR;
            (b < r, b)
        };
        let mut best = 0;
        for (i, io) in queue.iter().enumerate().skip(1) {
            if key(io) < key(&queue[best]) {
                best = i;
            }
        }
        best
    }
}

/// Any device model with its queue served in a block-number order (a host's elevator in
/// front of it); everything else is the model's.
pub struct QueueOrdered {
    inner: Box<dyn Timing>,
    queue: LbnQueue,
}

impl QueueOrdered {
    pub fn new(inner: Box<dyn Timing>, order: LbnOrder) -> QueueOrdered {
        let queue = LbnQueue::new(order, inner.capacity());
        QueueOrdered { inner, queue }
    }
}

impl Timing for QueueOrdered {
    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }

    fn service(&mut self, start: Nanos, io: &Io) -> Service {
        if io.op.moves_data() {
            let lbn = io.offset / SECTOR;
            let end = (io.offset + io.len as u64).div_ceil(SECTOR);
            self.queue.started(lbn, end.saturating_sub(lbn).max(1));
        }
        self.inner.service(start, io)
    }

    fn max_concurrent(&self) -> u32 {
        self.inner.max_concurrent()
    }

    fn schedules(&self) -> bool {
        true
    }

    fn prebuffers(&self) -> bool {
        self.inner.prebuffers()
    }

    fn admits(&mut self, now: Nanos, io: &Io, position: usize) -> bool {
        self.inner.admits(now, io, position)
    }

    fn pick(&mut self, _now: Nanos, queue: &[Io]) -> usize {
        self.queue.pick(queue)
    }

    fn counters(&self) -> Vec<(String, f64)> {
        self.inner.counters()
    }

    fn geometry(&self) -> Option<std::sync::Arc<dyn wattio_core::Geometry>> {
        self.inner.geometry()
    }

    fn on_power(&mut self, now: Nanos, ready: bool) {
        self.inner.on_power(now, ready)
    }

    fn precondition_full(&mut self) -> bool {
        self.inner.precondition_full()
    }
}
