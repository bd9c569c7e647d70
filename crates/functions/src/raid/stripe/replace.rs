//! Replacing a member by a hot spare (RAID-5 with its log): Linux md's `want_replacement`.
//!
//! md starts a replacement when a write to a member fails (`raid5_end_write_request` sets
//! `WantReplacement`) or when the operator asks (`mdadm --replace`), and copies the
//! member onto the spare while the array stays up, reading the member itself and
//! reconstructing from the others only what the member cannot give. Here the member's
//! chunks move **a window of stripes at a time, in order** (`replace_window_kib`): each
//! stripe's copy operation takes the stripe's place in its queue (so no write to that stripe
//! runs meanwhile), reads the member's chunk — a row range at a time, up to `merge_kib` —
//! rebuilds its bad pages from the other members where the row's parity is known, and
//! writes the range to the spare with FUA; once every stripe of the window is there, one
//! record logs "stripes `0..w` moved". Only when that record is durable do the window's
//! reads and writes go to the spare (and the copies let the stripes' queues run on): a
//! crash before leaves the window on the member, which no write reached since the copy
//! began; a crash after finds it on the spare. Pages rebuilt onto the spare are logged good
//! again after that record (a crash between leaves them bad: unreadable from
//! the spare's copy but never wrong). A page the member cannot give and the parity cannot
//! rebuild (an unknown row, a second bad page) stays bad on the spare: its reads still
//! answer EIO, never a guess.
//!
//! The bad-page list keeps one meaning per (member, page): the page of whichever device
//! holds that member's stripe (the spare below the moved boundary). md differs in one
//! respect: it writes to both the member and its replacement during the copy and keeps
//! the member until the end; moving window by window instead costs one log record a window
//! but lets a failing member stop taking writes as soon as each window has moved.

use super::persist;
use super::{Copying, Moved, Owner, Raid, Rows, Work, PAGE};
use smallvec::SmallVec;
use wattio_core::function::Actions;
use wattio_core::io::{Buf, Completion, Op, Status};

/// Where member `j`'s pages go in a copy's scratch buffer of `span`-byte slots: the
/// replaced member `m`'s own (the spare's image) first, then the others' (read only to
/// rebuild a bad page), so a plain copy's buffer is one slot.
fn copy_slot(j: usize, m: usize) -> u64 {
    match j {
        _ if j == m => 0,
        _ if j < m => 1 + j as u64,
        _ => j as u64,
    }
}

impl Raid {
    /// The rows of the copy's next range from page `first` of a chunk.
    fn copy_rows(&self, stripe: u64, first: u64) -> Rows {
        let per_chunk = self.layout.chunk / PAGE;
        let most = (self.merge / PAGE).max(1);
        (stripe, first, most.min(per_chunk - first))
    }

    /// Member `m` wants replacing: start copying it onto the spare, if the spare is free.
    pub(super) fn want_replacement(&mut self, m: usize, out: &mut Actions) {
        let Some(s) = self.spare.as_mut() else {
            return;
        };
        if s.member.is_some() || s.stopped || !self.ready || self.broken {
            return;
        }
        if self.start_spare_copy(m, out) {
            return;
        }
        let s = self.spare.as_mut().expect("checked");
        s.member = Some(m);
        s.through = 0;
        self.member[s.dev as usize] = m;
        self.counters.replacements += 1;
        // Names the member: nothing is on the spare yet, so nothing waits for it (the
        // spare's copy of the log, with `log_members = "all"`, is written already).
        if self.log_record(&persist::replaced(m, 0), out).is_some() {
            self.copy_next(out);
        }
    }

    /// Queue the copies of the next window of stripes not moved yet (none once all are, or
    /// when stopping).
    pub(super) fn copy_next(&mut self, out: &mut Actions) {
        let Some(s) = self.spare.as_mut() else {
            return;
        };
        if s.stopped || s.member.is_none() || s.through >= self.layout.stripes {
            return;
        }
        let window = s.through..(s.through + s.window).min(self.layout.stripes);
        // Every stripe of the window is known before any copy starts: one that ends at
        // once must not find the window complete.
        s.copying = window.clone().map(|w| (w, Copying::default())).collect();
        for stripe in window {
            let rows = self.copy_rows(stripe, 0);
            self.enqueue(Owner::Replace, rows, Work::Copy, out);
        }
    }

    /// Stop starting stripes (the copy in progress finishes and is logged): the next start
    /// continues from the log.
    pub(super) fn stop_replacing(&mut self) {
        if let Some(s) = self.spare.as_mut() {
            s.stopped = true;
        }
    }

    /// Plan and issue a copy range's reads: runs of the member's pages it can read, and
    /// for each bad page of a row that can be rebuilt, the other members' pages.
    pub(super) fn copy_start(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        let (stripe, first, pages, single) = {
            let op = &self.ops[&id];
            (op.stripe, op.page, op.pages, op.redo)
        };
        let l = self.layout;
        let m = self.spare.as_ref().and_then(|s| s.member).expect("a copy");
        let span = pages * PAGE;
        let scratch = self.next_scratch;
        self.next_scratch += 1;
        let slot = |j: usize, p: u64| Buf::Scratch {
            id: scratch,
            offset: (copy_slot(j, m) * span + (p - first) * PAGE) as u32,
        };
        let mut reads: SmallVec<[(usize, u64, u64, Buf); 8]> = SmallVec::new();
        let mut attempt = Vec::new();
        let lost = &self.spare.as_ref().expect("a spare").copying[&stripe].lost;
        let mut p = first;
        let rebuildable = |p: u64| {
            !lost.contains(&p)
                && self.row_known(stripe, p)
                && !self.row_unpersisted(stripe, p)
                && (0..l.disks).all(|d| d == m || !self.is_bad(d, stripe, p))
        };
        while p < first + pages {
            if self.is_bad(m, stripe, p) {
                if !rebuildable(p) {
                    p += 1;
                    continue;
                }
                // A run of bad pages that can be rebuilt (a faulty member's chunk is one):
                // one read of it from each other member.
                let run = p;
                p += 1;
                while !single && p < first + pages && self.is_bad(m, stripe, p) && rebuildable(p) {
                    p += 1;
                }
                for d in (0..l.disks).filter(|&d| d != m) {
                    reads.push((d, run, p - run, slot(d, run)));
                }
                attempt.extend(run..p);
                continue;
            }
            let run = p;
            p += 1;
            while !single && p < first + pages && !self.is_bad(m, stripe, p) {
                p += 1;
            }
            reads.push((m, run, p - run, slot(m, run)));
        }
        let s = self.spare.as_mut().expect("a spare");
        s.copying.get_mut(&stripe).expect("in the window").attempt = attempt;
        self.ops
            .get_mut(&id)
            .expect("op")
            .attempt(scratch, reads.len(), out);
        if reads.is_empty() {
            return self.copy_write_phase(id, out);
        }
        let base = l.member_offset(stripe, 0);
        for (d, p, n, buf) in reads {
            let io = self.member_io(id, Op::Read, d, base + p * PAGE, (n * PAGE) as u32, buf);
            out.submit(io);
        }
        None
    }

    /// The range's reads are back: rebuild its bad pages, then write what the spare can
    /// take (FUA: the stripe's record will say it is there).
    fn copy_write_phase(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        let op = &self.ops[&id];
        let (stripe, first, pages, single, scratch) =
            (op.stripe, op.page, op.pages, op.redo, op.scratch);
        let l = self.layout;
        let s = self.spare.as_ref().expect("a spare");
        let (m, dev) = (s.member.expect("a copy"), s.dev);
        let c = &s.copying[&stripe];
        let span = pages * PAGE;
        let slot = |j: usize, p: u64| Buf::Scratch {
            id: scratch,
            offset: (copy_slot(j, m) * span + (p - first) * PAGE) as u32,
        };
        // A scratch buffer not yet filled starts as zeros: the XOR of the others is the page.
        for &p in &c.attempt {
            for d in (0..l.disks).filter(|&d| d != m) {
                out.xor(slot(m, p), slot(d, p), PAGE as u32);
            }
        }
        let writable =
            |p: u64| (!self.is_bad(m, stripe, p) || c.attempt.contains(&p)) && !c.lost.contains(&p);
        let mut writes: SmallVec<[(u64, u64); 4]> = SmallVec::new();
        let mut p = first;
        while p < first + pages {
            if !writable(p) {
                p += 1;
                continue;
            }
            let run = p;
            p += 1;
            while !single && p < first + pages && writable(p) {
                p += 1;
            }
            writes.push((run, p - run));
        }
        if writes.is_empty() {
            return self.copy_range_done(id, out);
        }
        {
            let op = self.ops.get_mut(&id).expect("op");
            op.writing = true;
            op.drained = true;
            op.out = writes.len() as u32;
        }
        let base = l.member_offset(stripe, 0);
        for (p, n) in writes {
            let buf = slot(m, p);
            let mut io = self.member_io(id, Op::Write, m, base + p * PAGE, (n * PAGE) as u32, buf);
            io.dev = dev;
            io.fua = true;
            out.submit(io);
        }
        None
    }

    /// A copy's member I/O is back. A failed I/O of one page marks that page bad (the
    /// member's or another member's) or, on the spare, lost; the range is then planned
    /// again page by page around what failed.
    pub(super) fn copy_io_done(&mut self, id: u64, done: &Completion, out: &mut Actions) {
        if done.status != Status::Ok && done.io.op == Op::Read {
            self.read_failed(done.io.dev, out);
        }
        if done.status != Status::Ok && done.io.len as u64 == PAGE {
            let s = self.spare.as_mut().expect("a spare");
            if done.io.dev == s.dev {
                let (stripe, page) = (self.ops[&id].stripe, done.io.offset % self.layout.chunk);
                let c = s.copying.get_mut(&stripe).expect("in the window");
                c.lost.push(page / PAGE);
                self.counters.spare_lost_pages += 1;
            }
            self.mark_bad(done.io.dev, done.io.offset, out);
        }
        let op = self.ops.get_mut(&id).expect("a live operation");
        op.out -= 1;
        op.failed |= done.status != Status::Ok;
        if op.out > 0 {
            return;
        }
        let stripe = op.stripe;
        let ended = if op.failed {
            op.redo = true;
            self.copy_start(id, out)
        } else if op.writing {
            self.copy_range_done(id, out)
        } else {
            self.copy_write_phase(id, out)
        };
        if let Some(status) = ended {
            self.end_op(id, status, out);
            self.run_queue(stripe, out);
        }
    }

    /// A range is on the spare: the next range of the chunk; once the whole chunk is, and
    /// every stripe of the window, the window's record.
    fn copy_range_done(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        let stripe = self.ops[&id].stripe;
        let s = self.spare.as_mut().expect("a spare");
        let c = s.copying.get_mut(&stripe).expect("in the window");
        let attempt = std::mem::take(&mut c.attempt);
        c.rebuilt
            .extend(attempt.into_iter().filter(|p| !c.lost.contains(p)));
        let op = &self.ops[&id];
        let next = op.page + op.pages;
        if next < self.layout.chunk / PAGE {
            let (_, page, pages) = self.copy_rows(stripe, next);
            let op = self.ops.get_mut(&id).expect("op");
            op.page = page;
            op.pages = pages;
            op.redo = false;
            return self.copy_start(id, out);
        }
        // The whole chunk is on the spare (durable: every write was FUA); the operation
        // holds its stripe until the window's record is durable.
        let s = self.spare.as_mut().expect("a spare");
        s.copying.get_mut(&stripe).expect("in the window").done = true;
        if s.copying.values().all(|c| c.done) {
            self.log_window(out);
        }
        None
    }

    /// Every stripe of the window is on the spare: log the window as moved, then its rebuilt
    /// pages as good, in that order, so a crash between leaves them bad on the spare
    /// rather than good on the member.
    fn log_window(&mut self, out: &mut Actions) {
        let s = self.spare.as_ref().expect("a spare");
        let m = s.member.expect("a copy");
        let (from, through) = (s.through, s.through + s.copying.len() as u64);
        let mut rebuilt: Vec<(u64, u64)> = s
            .copying
            .iter()
            .flat_map(|(&w, c)| c.rebuilt.iter().map(move |&p| (w, p)))
            .collect();
        rebuilt.sort_unstable();
        // Only pages the list holds are logged good again (a faulty member's others are bad
        // by its record, which the moved window no longer covers).
        let cleared: Vec<u64> = rebuilt
            .iter()
            .map(|&(w, p)| self.row_key(w, p))
            .filter(|&k| self.bad.contains(&(m, k)))
            .collect();
        // A faulty member's pages the copy could not rebuild (an unknown row, a second bad
        // page) stay bad on the spare: listed before the window's record. Without room
        // for them the window stays on the faulty device, and the recovery stops there.
        let per_chunk = self.layout.chunk / PAGE;
        let mut unrebuilt = Vec::new();
        if self.faulty == Some(m) {
            for (&w, c) in &s.copying {
                for p in (0..per_chunk).filter(|p| !c.rebuilt.contains(p)) {
                    let key = self.row_key(w, p);
                    if !self.bad.contains(&(m, key)) {
                        unrebuilt.push(key);
                    }
                }
            }
            unrebuilt.sort_unstable();
        }
        let recorded = (self.bad.len() - self.unpersisted.len()) as u64;
        if recorded + unrebuilt.len() as u64 > self.shape.max {
            self.counters.stalled_recoveries += 1;
            let s = self.spare.as_mut().expect("a spare");
            s.stopped = true;
            return self.release_window(from..through, out);
        }
        let mut logged = true;
        for &key in &unrebuilt {
            self.bad.insert((m, key));
            self.counters.bad_pages += 1;
            logged &= self.log_record(&persist::record(m, key), out).is_some();
        }
        self.spare.as_mut().expect("a spare").moved = Some(Moved {
            seq: u64::MAX,
            through,
            cleared: cleared.clone(),
        });
        if !logged {
            // The log failed (reported): nothing more goes to it.
            let s = self.spare.as_mut().expect("a spare");
            s.moved = None;
            s.stopped = true;
            return self.release_window(from..through, out);
        }
        let mut last = self.log_record(&persist::replaced(m, through), out);
        for &page in &cleared {
            last = last.and(self.log_record(&persist::cleared(m, page), out));
        }
        match last {
            Some(seq) => {
                let s = self.spare.as_mut().expect("a spare");
                s.moved.as_mut().expect("set above").seq = seq;
            }
            // The log failed (reported): the window stays on the member, and the
            // replacement stops there.
            None => {
                let s = self.spare.as_mut().expect("a spare");
                s.moved = None;
                s.stopped = true;
                self.release_window(from..through, out);
            }
        }
    }

    /// End the window's copy operations, each holding its stripe, and let the stripes'
    /// queues run on.
    fn release_window(&mut self, window: std::ops::Range<u64>, out: &mut Actions) {
        self.spare.as_mut().expect("a spare").copying.clear();
        for stripe in window {
            let id = *self.queues[&stripe]
                .front()
                .expect("the copy holds its stripe");
            debug_assert!(matches!(self.ops[&id].work, Work::Copy));
            self.end_op(id, Status::Ok, out);
            self.run_queue(stripe, out);
        }
    }

    /// Records up to `upto` are durable: a moved window's reads and writes go to the spare
    /// from now on, its rebuilt pages are good, and the next window's copies are queued.
    pub(super) fn moved_durable(&mut self, upto: u64, out: &mut Actions) {
        let Some(s) = self.spare.as_mut() else {
            return;
        };
        if s.moved.as_ref().is_none_or(|x| x.seq > upto) {
            return;
        }
        let x = s.moved.take().expect("checked");
        let m = s.member.expect("a copy");
        // The window is `through..x.through`: the stripes not moved before it.
        let from = std::mem::replace(&mut s.through, x.through);
        for page in &x.cleared {
            if self.bad.remove(&(m, *page)) {
                self.counters.spare_rebuilt_pages += 1;
            }
        }
        if x.through >= self.layout.stripes && self.faulty == Some(m) {
            // Every stripe of the faulty member is on the spare: the array is whole again.
            self.faulty = None;
            self.counters.recovered_members += 1;
        }
        self.release_window(from..x.through, out);
        self.copy_next(out);
    }
}
