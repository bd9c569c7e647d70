//! Replacing a member by a hot spare (RAID-5 with its log): Linux md's `want_replacement`.
//!
//! md starts a replacement when a write to a member fails (`raid5_end_write_request` sets
//! `WantReplacement`) or when the operator asks (`mdadm --replace`), and copies the
//! member onto the spare while the array stays up, reading the member itself and
//! reconstructing from the others only what the member cannot give. Here the member's
//! chunks move **a stripe at a time, in order**: a copy operation takes the stripe's place
//! in its queue (so no write to that stripe runs meanwhile), reads the member's chunk — a
//! row range at a time, up to `merge_kib` — rebuilds its bad pages from the other members
//! where the row's parity is known, writes the range to the spare with FUA, and once the
//! whole chunk is there logs "stripes `0..s + 1` moved". Only when that record is durable
//! do the stripe's reads and writes go to the spare (and the copy lets the stripe's queue
//! run on): a crash before leaves the stripe on the member, which no write reached since
//! the copy began; a crash after finds it on the spare. Pages rebuilt onto the spare are
//! logged good again after that record (a crash between leaves them bad: unreadable from
//! the spare's copy but never wrong). A page the member cannot give and the parity cannot
//! rebuild (an unknown row, a second bad page) stays bad on the spare: its reads still
//! answer EIO, never a guess.
//!
//! The bad-page list keeps one meaning per (member, page): the page of whichever device
//! holds that member's stripe (the spare below the moved boundary). md differs in one
//! respect: it writes to both the member and its replacement during the copy and keeps
//! the member until the end; moving stripe by stripe instead costs one log record a stripe
//! but lets a failing member stop taking writes as soon as each stripe has moved.

use super::persist;
use super::{Moved, Owner, Raid, Rows, Work, PAGE};
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
        s.member = Some(m);
        s.through = 0;
        self.member[s.dev as usize] = m;
        self.counters.replacements += 1;
        // Names the member: nothing is on the spare yet, so nothing waits for it.
        if self.log_record(&persist::replaced(m, 0), out).is_some() {
            self.copy_next(out);
        }
    }

    /// Queue the copy of the first stripe not moved yet (none once all are, or when
    /// stopping).
    pub(super) fn copy_next(&mut self, out: &mut Actions) {
        let Some(s) = self.spare.as_mut() else {
            return;
        };
        if s.stopped || s.member.is_none() || s.through >= self.layout.stripes {
            return;
        }
        let stripe = s.through;
        s.rebuilt.clear();
        s.lost.clear();
        let rows = self.copy_rows(stripe, 0);
        self.enqueue(Owner::Replace, rows, Work::Copy, out);
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
        let lost = &self.spare.as_ref().expect("a spare").lost;
        let mut p = first;
        while p < first + pages {
            if self.is_bad(m, stripe, p) {
                let rebuildable = !lost.contains(&p)
                    && self.row_known(stripe, p)
                    && !self.row_unpersisted(stripe, p)
                    && (0..l.disks).all(|d| d == m || !self.is_bad(d, stripe, p));
                if rebuildable {
                    for d in (0..l.disks).filter(|&d| d != m) {
                        reads.push((d, p, 1, slot(d, p)));
                    }
                    attempt.push(p);
                }
                p += 1;
                continue;
            }
            let run = p;
            p += 1;
            while !single && p < first + pages && !self.is_bad(m, stripe, p) {
                p += 1;
            }
            reads.push((m, run, p - run, slot(m, run)));
        }
        self.spare.as_mut().expect("a spare").attempt = attempt;
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
        let span = pages * PAGE;
        let slot = |j: usize, p: u64| Buf::Scratch {
            id: scratch,
            offset: (copy_slot(j, m) * span + (p - first) * PAGE) as u32,
        };
        // A scratch buffer not yet filled starts as zeros: the XOR of the others is the page.
        for &p in &s.attempt {
            for d in (0..l.disks).filter(|&d| d != m) {
                out.xor(slot(m, p), slot(d, p), PAGE as u32);
            }
        }
        let writable =
            |p: u64| (!self.is_bad(m, stripe, p) || s.attempt.contains(&p)) && !s.lost.contains(&p);
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
        if done.status != Status::Ok && done.io.len as u64 == PAGE {
            let s = self.spare.as_mut().expect("a spare");
            if done.io.dev == s.dev {
                s.lost.push(done.io.offset % self.layout.chunk / PAGE);
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

    /// A range is on the spare: the next range of the chunk, or the stripe's record.
    fn copy_range_done(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        let s = self.spare.as_mut().expect("a spare");
        let attempt = std::mem::take(&mut s.attempt);
        s.rebuilt
            .extend(attempt.into_iter().filter(|p| !s.lost.contains(p)));
        let op = self.ops.get_mut(&id).expect("op");
        let next = op.page + op.pages;
        let stripe = op.stripe;
        if next < self.layout.chunk / PAGE {
            let (_, page, pages) = self.copy_rows(stripe, next);
            let op = self.ops.get_mut(&id).expect("op");
            op.page = page;
            op.pages = pages;
            op.redo = false;
            return self.copy_start(id, out);
        }
        // The whole chunk is on the spare (durable: every write was FUA). Log the stripe
        // as moved, then its rebuilt pages as good: in that order, so a crash between
        // leaves them bad on the spare rather than good on the member.
        let s = self.spare.as_mut().expect("a spare");
        let m = s.member.expect("a copy");
        let rebuilt = std::mem::take(&mut s.rebuilt);
        let cleared: Vec<u64> = rebuilt.iter().map(|&p| self.row_key(stripe, p)).collect();
        let through = stripe + 1;
        self.spare.as_mut().expect("a spare").moved = Some(Moved {
            seq: u64::MAX,
            op: id,
            through,
            cleared: cleared.clone(),
        });
        let mut last = self.log_record(&persist::replaced(m, through), out);
        for &page in &cleared {
            last = last.and(self.log_record(&persist::cleared(m, page), out));
        }
        match last {
            Some(seq) => {
                let s = self.spare.as_mut().expect("a spare");
                s.moved.as_mut().expect("set above").seq = seq;
                None
            }
            // The log failed (reported): the stripe stays on the member.
            None => {
                self.spare.as_mut().expect("a spare").moved = None;
                Some(Status::IoError)
            }
        }
    }

    /// Records up to `upto` are durable: a moved stripe's reads and writes go to the spare
    /// from now on, its rebuilt pages are good, and the next stripe's copy is queued.
    pub(super) fn moved_durable(&mut self, upto: u64, out: &mut Actions) {
        let Some(s) = self.spare.as_mut() else {
            return;
        };
        if s.moved.as_ref().is_none_or(|x| x.seq > upto) {
            return;
        }
        let x = s.moved.take().expect("checked");
        let m = s.member.expect("a copy");
        s.through = x.through;
        for page in &x.cleared {
            if self.bad.remove(&(m, *page)) {
                self.counters.spare_rebuilt_pages += 1;
            }
        }
        let stripe = x.through - 1;
        self.end_op(x.op, Status::Ok, out);
        self.run_queue(stripe, out);
        self.copy_next(out);
    }
}
