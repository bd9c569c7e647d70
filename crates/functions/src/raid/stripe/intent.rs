//! RAID-5's write-intent bitmap (`write_intent`; Linux md's internal bitmap,
//! `drivers/md/md-bitmap.c`) and the resync of the regions it names dirty.
//!
//! **Why.** A crash between a row's data and parity writes leaves parity that no longer
//! matches (the write hole); a page later rebuilt from it would be wrong. Without a bitmap
//! the layer knows only the rows it wrote whole since it started, so after any restart a
//! degraded read of older data answers EIO. With one, the array is cut into *regions*
//! (`write_intent_kib` of each member, md's bitmap chunk) and the log names every region
//! that may hold torn rows; the others are known consistent after any restart, and the
//! dirty ones are made consistent again by a resync (read the data, write the parity).
//!
//! **The rules**, md's:
//! * before the first write to a region the log says is clean, a `dirty` record is
//!   appended, and the write's operation waits at the head of its stripe's queue until the
//!   record is durable (md: `bitmap_startwrite`, then `bitmap_unplug` before the data goes);
//! * a region is logged clean again lazily: once it has had no write out or started for a
//!   whole `write_intent_delay_ms` period (md's `daemon_sleep`, 5 s), a *flush round* (a
//!   FLUSH of every member, sent after its writes completed) makes its data and parity
//!   durable, and only then is its `clean` record appended; a write to it meanwhile takes it
//!   out of the round ([`FlushRounds`]). A clean stop logs every idle region clean at once;
//! * at start, regions the log names clean are consistent; the others are resynced, one
//!   stripe's row range at a time at priority −1 (below the host's), in region order, and
//!   logged clean like any written region once done. A region holding a row that cannot be
//!   resynced (a bad page in it, a failed read) stays dirty, its rows unknown (degraded
//!   reads answer EIO, as md refuses a dirty degraded array) until written whole.
//!
//! `assume_clean` with a bitmap applies to a new log only (the `geometry` record then says
//! every region clean, `mdadm --create --assume-clean`); a log already holding a bitmap
//! decides. A start whose bitmap geometry differs from the log's (no bitmap before, another
//! region size, `write_intent` turned off) first logs the new geometry with every region
//! dirty, and serves nothing until that record is durable: a region a log once named clean
//! must never be trusted after writes it did not record.

use super::persist::{self, Bitmap};
use super::{Owner, Raid, RowOp, Rows, Work, PAGE};
use smallvec::SmallVec;
use std::collections::BTreeSet;
use wattio_core::flush_round::{FlushRounds, Round};
use wattio_core::function::{Actions, TimerId};
use wattio_core::fxhash::{FxHashMap, FxHashSet};
use wattio_core::io::{Buf, Completion, DeviceId, Io, Op, Status};
use wattio_core::time::Nanos;

/// The timer of the lazy clean.
pub(super) const TIMER: TimerId = 1;
/// Own-I/O numbers of a flush round's FLUSHes: `FLUSH_BASE + i`, one per device flushed
/// (above the log copies': one a member and the spare's).
pub(super) const FLUSH_BASE: u64 =
    super::JOURNAL_BASE + (super::MAX_MEMBERS as u64 + 1) * wattio_core::journal::IO_NUMBERS;
/// Device-queue priority of the resync's I/O (the host's is 0).
pub const RESYNC_PRIORITY: i8 = -1;

/// The bitmap and what is done with it.
pub(super) struct Intent {
    /// Stripes a region covers.
    pub region_stripes: u64,
    /// The lazy clean's period.
    delay: Nanos,
    /// Logged clean: the last record appended for the region (or the log recovered)
    /// says clean. Also what a checkpoint holds.
    pub logged: Bitmap,
    /// Consistent in memory: every row's parity matches its data (as the layer wrote it,
    /// durable or not).
    consistent: Bitmap,
    /// `dirty` records appended and not durable yet: region → sequence number.
    dirtying: FxHashMap<u64, u64>,
    /// Write operations waiting for a region's `dirty` record: (sequence number, op).
    waiting: Vec<(u64, u64)>,
    /// Write operations past the gate and not ended, per region.
    busy: FxHashMap<u64, u32>,
    /// Regions a write passed the gate into since the last tick.
    written: FxHashSet<u64>,
    /// Consistent regions logged dirty: to be logged clean once idle.
    dirty: BTreeSet<u64>,
    rounds: FlushRounds<u64, ()>,
    armed: bool,
    /// The stack unloads: idle regions are logged clean at once, no resync goes on.
    stopping: bool,
    /// The resync: the region under way, whether a row of it failed.
    resync: Option<(u64, bool)>,
    /// `assume_clean`: a new log's bitmap starts all clean.
    pub assume_clean: bool,
    pub counters: IntentCounters,
}

#[derive(Default)]
pub(super) struct IntentCounters {
    pub dirty_records: u64,
    pub clean_records: u64,
    pub waits: u64,
    pub flush_rounds: u64,
    pub recovered_clean: u64,
    pub resynced_regions: u64,
    pub resynced_rows: u64,
    pub unsynced_regions: u64,
}

impl Intent {
    pub fn new(region_stripes: u64, delay: Nanos, assume_clean: bool) -> Intent {
        Intent {
            region_stripes,
            delay,
            logged: Bitmap::default(),
            consistent: Bitmap::default(),
            dirtying: FxHashMap::default(),
            waiting: Vec::new(),
            busy: FxHashMap::default(),
            written: FxHashSet::default(),
            dirty: BTreeSet::new(),
            rounds: FlushRounds::new(),
            armed: false,
            stopping: false,
            resync: None,
            assume_clean,
            counters: IntentCounters::default(),
        }
    }

    /// Every row of `stripe` is consistent (its region is).
    #[inline]
    pub fn consistent(&self, stripe: u64) -> bool {
        self.consistent.is_clean(stripe / self.region_stripes)
    }

    /// Put the regions to log clean — consistent, logged dirty, no write out, and (`quiet`)
    /// none started since the last tick — into the next flush round.
    fn round_up(&mut self, quiet: bool) {
        let idle: Vec<u64> = self
            .dirty
            .iter()
            .copied()
            .filter(|r| !(self.busy.contains_key(r) || quiet && self.written.contains(r)))
            .filter(|r| !self.rounds.contains(r))
            .collect();
        for r in idle {
            self.rounds.add(r, ());
        }
    }

    /// Take the recovered bitmap: its clean regions are consistent.
    pub fn recovered(&mut self, bitmap: Bitmap) {
        self.counters.recovered_clean = bitmap.count();
        self.consistent = bitmap.clone();
        self.logged = bitmap;
    }
}

impl Raid {
    /// Let write operation `id` (of `stripe`) pass the bitmap's gate: `true` if it must
    /// wait for its region's `dirty` record (it is then retried from its queue's head).
    pub(super) fn intent_gate(&mut self, id: u64, stripe: u64, out: &mut Actions) -> bool {
        let Some(i) = self.intent.as_mut() else {
            return false;
        };
        let r = stripe / i.region_stripes;
        if i.logged.is_clean(r) {
            // Before the append: a checkpoint it triggers must hold the region dirty.
            i.logged.set(r, false);
            i.counters.dirty_records += 1;
            if let Some(seq) = self.log_record(&persist::intent_dirty(r), out) {
                let i = self.intent.as_mut().expect("checked");
                i.dirtying.insert(r, seq);
            }
        }
        let durable = self.log_durable();
        let i = self.intent.as_mut().expect("checked");
        if let Some(&seq) = i.dirtying.get(&r) {
            if seq > durable {
                i.counters.waits += 1;
                i.waiting.push((seq, id));
                self.ops.get_mut(&id).expect("op").gated = Gate::Waiting;
                return true;
            }
            i.dirtying.remove(&r);
        }
        *i.busy.entry(r).or_default() += 1;
        i.written.insert(r);
        i.rounds.remove(&r);
        if i.consistent.is_clean(r) {
            i.dirty.insert(r);
        }
        self.ops.get_mut(&id).expect("op").gated = Gate::Passed;
        self.arm(out);
        false
    }

    /// A row of `stripe` is torn (a write failed part-way, its redo refused): its region is
    /// no longer consistent, and stays logged dirty (out of the lazy clean) so that a
    /// restart resyncs it rather than trust its parity.
    pub(super) fn intent_torn(&mut self, stripe: u64) {
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        let r = stripe / i.region_stripes;
        i.consistent.set(r, false);
        i.dirty.remove(&r);
        i.rounds.remove(&r);
    }

    /// Records up to `upto` are durable: the writes waiting for them go.
    pub(super) fn intent_durable(&mut self, upto: u64, out: &mut Actions) {
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        i.dirtying.retain(|_, seq| *seq > upto);
        let go = wattio_core::journal::durable(&mut i.waiting, upto, |w| w.0);
        for (_, id) in go {
            let Some(op) = self.ops.get_mut(&id) else {
                continue;
            };
            if op.gated == Gate::Waiting {
                op.gated = Gate::Not;
                let stripe = op.stripe;
                self.run_queue(stripe, out);
            }
        }
    }

    /// Write operation `id` ended: its region has one write fewer out.
    pub(super) fn intent_ended(&mut self, op: &RowOp) {
        if op.gated != Gate::Passed {
            return;
        }
        let i = self.intent.as_mut().expect("a gated operation");
        let r = op.stripe / i.region_stripes;
        if let Some(n) = i.busy.get_mut(&r) {
            *n -= 1;
            if *n == 0 {
                i.busy.remove(&r);
            }
        }
    }

    fn arm(&mut self, out: &mut Actions) {
        let now = self.now;
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        if !i.armed && !i.stopping && !i.dirty.is_empty() {
            i.armed = true;
            out.set_timer(TIMER, now + i.delay);
        }
    }

    /// The lazy clean's tick: regions idle for the whole period go into a flush round.
    pub(super) fn intent_tick(&mut self, out: &mut Actions) {
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        i.armed = false;
        i.round_up(true);
        i.written.clear();
        self.flush_round(out);
        self.arm(out);
    }

    /// Send a flush round if one would cover something.
    fn flush_round(&mut self, out: &mut Actions) {
        let devs = self.flush_devices();
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        if !i.rounds.due() || self.broken {
            return;
        }
        i.counters.flush_rounds += 1;
        let round = i.rounds.start(devs.len() as u32);
        for (n, &d) in devs.iter().enumerate() {
            out.submit(Io::own(FLUSH_BASE + n as u64, Op::Flush, d, 0, 0));
        }
        if let Some(round) = round {
            self.round_done(round, out);
        }
    }

    /// One of a flush round's FLUSHes is back.
    pub(super) fn intent_flushed(&mut self, done: &Completion, out: &mut Actions) {
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        if let Some(round) = i.rounds.flushed(done.status == Status::Ok) {
            self.round_done(round, out);
        }
    }

    /// A flush round ended: the regions it covered are durable and logged clean (unless a
    /// flush failed: they stay dirty, for the next round).
    fn round_done(&mut self, round: Round<u64, ()>, out: &mut Actions) {
        if round.ok {
            for (r, ()) in round.covered {
                let i = self.intent.as_mut().expect("a round");
                if i.busy.contains_key(&r) || !i.dirty.remove(&r) {
                    continue;
                }
                i.logged.set(r, true);
                i.counters.clean_records += 1;
                self.log_record(&persist::intent_clean(r), out);
            }
        }
        if self.intent.as_ref().is_some_and(|i| i.stopping) {
            self.flush_round(out);
        }
    }

    /// The devices a FLUSH of the array reaches (a replaced member's spare once a stripe
    /// has moved, the member until all have).
    pub(super) fn flush_devices(&self) -> SmallVec<[DeviceId; 8]> {
        let mut live = SmallVec::new();
        for (m, &d) in self.devs.iter().enumerate() {
            // A faulty device takes no I/O, FLUSH neither.
            let on_member = self.faulty != Some(m);
            match &self.spare {
                Some(s) if s.member == Some(m) && s.through > 0 => {
                    if s.through < self.layout.stripes && on_member {
                        live.push(d);
                    }
                    live.push(s.dev);
                }
                _ if on_member => live.push(d),
                _ => {}
            }
        }
        live
    }

    /// The log is recovered with `bitmap`: take it, or log this start's geometry first
    /// (`Some(seq)`: requests wait for that record).
    pub(super) fn intent_recovered(
        &mut self,
        bitmap: Bitmap,
        fresh: bool,
        out: &mut Actions,
    ) -> Option<u64> {
        let stripes = self.layout.stripes;
        let (want, assume_clean) = match self.intent.as_ref() {
            Some(i) => (i.region_stripes, i.assume_clean),
            None => (0, false),
        };
        if bitmap.region_stripes == want {
            if let Some(i) = self.intent.as_mut() {
                i.recovered(bitmap);
            }
            return None;
        }
        if fresh && want == 0 {
            return None;
        }
        let clean = fresh && assume_clean;
        let now = Bitmap::new(want, stripes, clean);
        if let Some(i) = self.intent.as_mut() {
            i.logged = now.clone();
            i.consistent = now;
        }
        self.log_record(&persist::intent_geometry(want, clean), out)
    }

    /// After the log's recovery (and the geometry record, if one was needed): the resync of
    /// every region not consistent, in order. Once a start (`serve_early`): a region the
    /// resync gave up on stays dirty until the next start.
    pub(super) fn resync_next(&mut self, out: &mut Actions) {
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        if i.stopping || i.resync.is_some() {
            return;
        }
        let Some(r) = (0..i.consistent.regions).find(|&r| !i.consistent.is_clean(r)) else {
            return;
        };
        i.resync = Some((r, false));
        let stripe = r * i.region_stripes;
        self.resync_queue(stripe, out);
    }

    /// Queue the resync of `stripe`, or of the first stripe after it, in region order, that
    /// holds no bad page (a stripe that does fails its region: its rows with a bad page
    /// cannot be resynced); a region whose stripes are all done is consistent, unless one
    /// failed. A loop, not a recursion through operations that end at once: a member
    /// whose every page is bad must not take the stack down.
    fn resync_queue(&mut self, mut stripe: u64, out: &mut Actions) {
        let stripes = self.layout.stripes;
        let per_chunk = self.layout.chunk / PAGE;
        loop {
            let i = self.intent.as_mut().expect("a resync");
            let Some((r, failed)) = i.resync else {
                return;
            };
            if i.stopping {
                i.resync = None;
                return;
            }
            if stripe < stripes && stripe < (r + 1) * i.region_stripes {
                if self.range_touches_bad(stripe, 0, per_chunk) {
                    let i = self.intent.as_mut().expect("a resync");
                    i.resync = Some((r, true));
                    stripe += 1;
                    continue;
                }
                let rows = self.resync_rows(stripe, 0);
                self.enqueue(Owner::Resync, rows, Work::Resync, out);
                return;
            }
            // The region is done: consistent, or given up until the next start.
            if failed {
                i.counters.unsynced_regions += 1;
            } else {
                i.counters.resynced_regions += 1;
                i.consistent.set(r, true);
                i.dirty.insert(r);
            }
            match (r + 1..i.consistent.regions).find(|&q| !i.consistent.is_clean(q)) {
                Some(q) => {
                    i.resync = Some((q, false));
                    stripe = q * i.region_stripes;
                }
                None => {
                    i.resync = None;
                    self.arm(out);
                    return;
                }
            }
            self.arm(out);
        }
    }

    /// The row range of a resync from page `first` of a stripe's chunk.
    fn resync_rows(&self, stripe: u64, first: u64) -> Rows {
        let per_chunk = self.layout.chunk / PAGE;
        let most = (self.merge / PAGE).max(1);
        (stripe, first, most.min(per_chunk - first))
    }

    /// Plan and issue a resync range's reads: every data member's pages of the range.
    pub(super) fn resync_start(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        let (stripe, page, pages) = {
            let op = &self.ops[&id];
            (op.stripe, op.page, op.pages)
        };
        if self.range_touches_bad(stripe, page, pages) {
            return Some(Status::IoError);
        }
        let l = self.layout;
        let n = l.data_disks();
        let span = pages * PAGE;
        let scratch = self.next_scratch;
        self.next_scratch += 1;
        self.ops.get_mut(&id).expect("op").attempt(scratch, n, out);
        let base = l.member_offset(stripe, page * PAGE);
        for k in 0..n {
            let buf = Buf::Scratch {
                id: scratch,
                offset: (k as u64 * span) as u32,
            };
            let disk = l.data_disk(stripe, k);
            let mut io = self.member_io(id, Op::Read, disk, base, span as u32, buf);
            io.priority = RESYNC_PRIORITY;
            out.submit(io);
        }
        None
    }

    /// A resync range's member I/O is back: after the reads, the parity is their XOR and
    /// written; after the write, the next range of the stripe. `Some` if the stripe ended.
    pub(super) fn resync_io_done(&mut self, id: u64, done: &Completion, out: &mut Actions) {
        if done.status != Status::Ok && done.io.op == Op::Read {
            self.read_failed(done.io.dev, out);
        }
        let op = self.ops.get_mut(&id).expect("a live operation");
        op.out -= 1;
        op.failed |= done.status != Status::Ok;
        if op.out > 0 {
            return;
        }
        let (stripe, page, pages, scratch) = (op.stripe, op.page, op.pages, op.scratch);
        let ended = if op.failed {
            Some(Status::IoError)
        } else if !op.writing {
            let l = self.layout;
            let n = l.data_disks();
            let span = pages * PAGE;
            let slot = |k: usize| Buf::Scratch {
                id: scratch,
                offset: (k as u64 * span) as u32,
            };
            for k in 0..n {
                out.xor(slot(n), slot(k), span as u32);
            }
            let op = self.ops.get_mut(&id).expect("op");
            op.writing = true;
            op.drained = true;
            op.out = 1;
            let pd = l.parity_disk(stripe).expect("raid5");
            let base = l.member_offset(stripe, page * PAGE);
            let mut io = self.member_io(id, Op::Write, pd, base, span as u32, slot(n));
            io.priority = RESYNC_PRIORITY;
            out.submit(io);
            None
        } else {
            if let Some(i) = self.intent.as_mut() {
                i.counters.resynced_rows += pages;
            }
            let next = page + pages;
            if next < self.layout.chunk / PAGE {
                let (_, first, pages) = self.resync_rows(stripe, next);
                let op = self.ops.get_mut(&id).expect("op");
                op.page = first;
                op.pages = pages;
                self.resync_start(id, out)
            } else {
                Some(Status::Ok)
            }
        };
        if let Some(status) = ended {
            self.end_op(id, status, out);
            self.run_queue(stripe, out);
        }
    }

    /// A resync's stripe ended (`status`): the next one (see [`Raid::resync_queue`]).
    pub(super) fn resync_stripe_done(&mut self, stripe: u64, status: Status, out: &mut Actions) {
        let i = self.intent.as_mut().expect("a resync");
        if let Some((_, failed)) = i.resync.as_mut() {
            *failed |= status != Status::Ok;
            self.resync_queue(stripe + 1, out);
        }
    }

    /// The stack unloads: log every idle region clean now, and start no further resync.
    pub(super) fn intent_stop(&mut self, out: &mut Actions) {
        let Some(i) = self.intent.as_mut() else {
            return;
        };
        i.stopping = true;
        i.round_up(false);
        self.flush_round(out);
    }

    /// The bitmap's counters.
    pub(super) fn intent_counters(&self) -> Vec<(&'static str, u64)> {
        let Some(i) = self.intent.as_ref() else {
            return Vec::new();
        };
        let c = &i.counters;
        vec![
            ("intent_dirty_records", c.dirty_records),
            ("intent_clean_records", c.clean_records),
            ("intent_waits", c.waits),
            ("intent_flush_rounds", c.flush_rounds),
            ("intent_recovered_clean_regions", c.recovered_clean),
            ("intent_dirty_regions", i.logged.regions - i.logged.count()),
            ("resynced_regions", c.resynced_regions),
            ("resynced_rows", c.resynced_rows),
            ("unsynced_regions", c.unsynced_regions),
        ]
    }
}

/// A write operation and the bitmap's gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) enum Gate {
    /// Not through yet (or not a write).
    #[default]
    Not,
    /// Waiting at its queue's head for its region's `dirty` record.
    Waiting,
    /// Through: counted in its region's writes out.
    Passed,
}
