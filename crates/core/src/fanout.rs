//! Splitting an I/O into sub-I/Os and answering it once they have all completed.
//!
//! A cache that maps pages one by one (EXCES), a RAID that stripes (PARAID), a replicator
//! that redirects part of a read (FS2): each receives one I/O, issues several, and must
//! reply exactly once, when the last one is back, with the worst status among them. That
//! bookkeeping lives here, written once. Sub-I/Os get ids from the [`IoId::sub`] space
//! (never colliding with ids forwarded from above or with the layer's own I/O), and their
//! buffers point into the parent's at the right offset ([`Buf::at`](crate::io::Buf::at)), so the live executor
//! moves the bytes and the data checker follows them with no code in the function.

use crate::fxhash::FxHashMap;
use crate::io::{Breakdown, Completion, Io, IoId, Status};
use std::collections::VecDeque;

struct Parent {
    io: Io,
    left: u32,
    status: Status,
    /// The breakdown of the sub-I/O that finished last: the parent's latency is that of its
    /// critical path.
    last: Breakdown,
}

/// What a completion meant to the fan-out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Not a sub-I/O of this fan-out (the function's own I/O, or a forwarded one).
    NotMine,
    /// A sub-I/O finished; others of its parent are still out.
    Pending,
    /// The last sub-I/O finished: reply with this (the parent as received, the worst status).
    Reply(Completion),
}

/// The id of a piece not numbered yet ([`Fanout::pieces`]): the last sub-I/O number,
/// which the sequence from 0 never reaches.
pub const PIECE: IoId = IoId(IoId::OWN | IoId::SUB | (IoId::SUB - 1));

/// A window slot whose sub-I/O was answered (or retired by a merge).
const ANSWERED: u32 = u32::MAX;

/// The window's bound in slots (4 MiB): past it, the oldest sub-I/Os still out move to a
/// map, so that one that never comes back cannot grow the window without end.
const WINDOW_MAX: usize = 1 << 20;

/// Where an outstanding sub-I/O is kept.
#[derive(Clone, Copy)]
enum Slot {
    /// Window index.
    Window(usize),
    /// Sub-I/O number, in the stragglers' map.
    Straggler(u64),
}

/// Outstanding parents and their sub-I/Os.
///
/// Parents live in a slab (their keys are slots, reused once answered), and sub-I/O
/// numbers, given out in sequence, index a window from the oldest one still out: a
/// completion is two array loads, not two hash-map probes (these were most of the
/// fan-out's cost in the EXCES and PARAID benchmarks). Memory is proportional to the
/// parents in flight plus 4 bytes for every sub-I/O issued since the oldest one still out
/// was (a sub-I/O that waits long, on a disk spinning up, holds the window open behind it),
/// up to [`WINDOW_MAX`] slots: the sub-I/Os still out at the front of a window that long
/// move to a map of stragglers (one that never completes, on a live device that hangs,
/// then costs its entry only).
#[derive(Default)]
pub struct Fanout {
    parents: Vec<Option<Parent>>,
    free: Vec<u32>,
    /// Parent key of sub-I/O number `base + i`, or ANSWERED.
    window: VecDeque<u32>,
    base: u64,
    /// Parent key of each sub-I/O still out that the window's bound moved out of it.
    stragglers: FxHashMap<u64, u32>,
}

impl Fanout {
    pub fn new() -> Fanout {
        Fanout::default()
    }

    /// Parents with sub-I/Os still out.
    pub fn in_flight(&self) -> usize {
        self.parents.len() - self.free.len()
    }

    /// Register `parent` and return a key for [`Fanout::sub`]. A parent that never gets a
    /// sub-I/O must be replied to by the caller itself (see [`Fanout::split`]).
    pub fn begin(&mut self, parent: Io) -> u64 {
        let p = Parent {
            io: parent,
            left: 0,
            status: Status::Ok,
            last: Breakdown::default(),
        };
        match self.free.pop() {
            Some(k) => {
                self.parents[k as usize] = Some(p);
                k as u64
            }
            None => {
                self.parents.push(Some(p));
                (self.parents.len() - 1) as u64
            }
        }
    }

    fn parent(&mut self, key: u64) -> &mut Parent {
        self.parents
            .get_mut(key as usize)
            .and_then(Option::as_mut)
            .expect("Fanout: a sub-I/O of an unknown parent")
    }

    /// A sub-I/O of parent `key` covering `len` bytes at `delta` bytes into the parent, to be
    /// sent to `dev` at `offset`: same operation, flags and priority as the parent, a fresh
    /// sub-I/O id, and its buffer at the matching place in the parent's.
    pub fn sub(&mut self, key: u64, delta: u32, len: u32, dev: u16, offset: u64) -> Io {
        let id = self.enlist(key);
        let p = &self.parent(key).io;
        Io {
            id,
            dev,
            offset,
            len,
            buf: p.buf.at(delta),
            ..*p
        }
    }

    /// Count one more sub-I/O of parent `key` and give it a fresh id.
    fn enlist(&mut self, key: u64) -> IoId {
        self.parent(key).left += 1;
        let n = self.base + self.window.len() as u64;
        self.window.push_back(key as u32);
        if self.window.len() > WINDOW_MAX {
            self.shed();
        }
        IoId::sub(n)
    }

    /// Move the sub-I/Os still out from the front half of a full window to the stragglers'
    /// map (the answered ones there are dropped).
    #[cold]
    fn shed(&mut self) {
        while self.window.len() > WINDOW_MAX / 2 || self.window.front() == Some(&ANSWERED) {
            let key = self.window.pop_front().expect("a full window");
            if key != ANSWERED {
                self.stragglers.insert(self.base, key);
            }
            self.base += 1;
        }
    }

    /// Where outstanding sub-I/O `id` is kept, if it is one of this fan-out's.
    fn slot_of(&self, id: IoId) -> Option<Slot> {
        if !id.is_sub() {
            return None;
        }
        let n = id.0 & (IoId::SUB - 1);
        let Some(i) = n.checked_sub(self.base) else {
            return self
                .stragglers
                .contains_key(&n)
                .then_some(Slot::Straggler(n));
        };
        let i = usize::try_from(i).ok()?;
        (self.window.get(i).is_some_and(|&k| k != ANSWERED)).then_some(Slot::Window(i))
    }

    /// The parent key of the outstanding sub-I/O at `slot`.
    fn key_at(&self, slot: Slot) -> u32 {
        match slot {
            Slot::Window(i) => self.window[i],
            Slot::Straggler(n) => self.stragglers[&n],
        }
    }

    /// Mark `slot` answered (dropping the answered slots at the window's front) and return
    /// its parent's key.
    fn answer(&mut self, slot: Slot) -> u64 {
        let i = match slot {
            Slot::Window(i) => i,
            Slot::Straggler(n) => {
                return self
                    .stragglers
                    .remove(&n)
                    .expect("an outstanding straggler") as u64;
            }
        };
        let key = std::mem::replace(&mut self.window[i], ANSWERED) as u64;
        while self.window.front() == Some(&ANSWERED) {
            self.window.pop_front();
            self.base += 1;
        }
        key
    }

    /// Another sub-I/O of the parent of `sub`, which is still out: the same device,
    /// offset, length and buffer, a fresh id. For a layer that cuts work it already
    /// started into parts answered one by one (a RAID row range redone page by page); the
    /// parent waits for the new one too.
    pub fn sibling(&mut self, sub: &Io) -> Io {
        let i = self
            .slot_of(sub.id)
            .expect("Fanout::sibling: not an outstanding sub-I/O");
        let key = self.key_at(i) as u64;
        Io {
            id: self.enlist(key),
            ..*sub
        }
    }

    /// Fold sub-I/O `next` into `into`, another outstanding sub-I/O of the same parent
    /// that ends where `next` begins (same device and operation, both unsent): `into`
    /// grows by `next`'s length and `next`'s id is retired, so the parent waits for one
    /// sub-I/O fewer. Its buffer already reaches on into `next`'s, which follows it in the
    /// parent. For a layer that merges adjacent pieces going to one device.
    ///
    /// `next` may be a piece not numbered yet ([`Fanout::pieces`]), of `into`'s parent:
    /// it is then only counted in `into`.
    pub fn merge(&mut self, into: &mut Io, next: Io) {
        assert!(
            into.id.is_sub()
                && into.dev == next.dev
                && into.op == next.op
                && into.end() == next.offset
                && into.buf.at(into.len) == next.buf,
            "Fanout::merge: the pieces are not adjacent on one device and in the buffer"
        );
        if next.id == PIECE {
            // Not counted yet: it only grows `into`.
            debug_assert!(
                self.slot_of(into.id).is_some(),
                "Fanout::merge: not an outstanding sub-I/O"
            );
        } else {
            let i = self
                .slot_of(into.id)
                .expect("Fanout::merge: not an outstanding sub-I/O");
            let j = self
                .slot_of(next.id)
                .filter(|&j| self.key_at(j) == self.key_at(i))
                .expect("Fanout::merge: sub-I/Os of different parents");
            let parent = self.answer(j);
            self.parent(parent).left -= 1;
        }
        into.len += next.len;
    }

    /// Split `io` at `page`-aligned offsets into *pieces*: sub-I/Os not counted yet, with
    /// the id [`PIECE`], appended to `out`; returns the parent's key. Give each piece an id
    /// with [`Fanout::number`] before it leaves the layer or is kept, or fold it with
    /// [`Fanout::merge`] into a numbered neighbour. For a layer that merges most pieces
    /// (EXCES: a request's adjacent pages going to one device): a piece merged away never
    /// costs a window slot, where [`Fanout::split`] numbers every piece and the merge
    /// retires them again. `io` must move data and not be empty, and at least one of its
    /// pieces must be numbered (the parent is answered when its numbered pieces are).
    pub fn pieces(&mut self, io: Io, page: u64, out: &mut Vec<Io>) -> u64 {
        assert!(page > 0, "page size must be positive");
        assert!(
            io.len > 0 && io.op.moves_data(),
            "Fanout::pieces: nothing to split"
        );
        let key = self.begin(io);
        let end = io.offset.saturating_add(io.len as u64);
        let mut at = io.offset;
        while at < end {
            let next = next_boundary(at, page, end);
            out.push(Io {
                id: PIECE,
                offset: at,
                len: (next - at) as u32,
                buf: io.buf.at((at - io.offset) as u32),
                ..io
            });
            at = next;
        }
        key
    }

    /// Give `io`, a piece of parent `key` ([`Fanout::pieces`]), its sub-I/O id: the parent
    /// now waits for it. An I/O already numbered is left as it is.
    #[inline]
    pub fn number(&mut self, key: u64, io: &mut Io) {
        if io.id == PIECE {
            io.id = self.enlist(key);
        }
    }

    /// Split `io` at `page`-aligned offsets into sub-I/Os for the same device and offsets,
    /// appended to `out`. An I/O with nothing to split (flush, zero length) yields one
    /// sub-I/O covering it, so every parent is answered through [`Fanout::complete`].
    pub fn split(&mut self, io: Io, page: u64, out: &mut Vec<Io>) {
        assert!(page > 0, "page size must be positive");
        let key = self.begin(io);
        if io.len == 0 || !io.op.moves_data() {
            let s = self.sub(key, 0, io.len, io.dev, io.offset);
            out.push(s);
            return;
        }
        let end = io.offset.saturating_add(io.len as u64);
        let mut at = io.offset;
        while at < end {
            let next = next_boundary(at, page, end);
            let s = self.sub(key, (at - io.offset) as u32, (next - at) as u32, io.dev, at);
            out.push(s);
            at = next;
        }
    }

    /// A completion reached the layer: count it down.
    pub fn complete(&mut self, done: &Completion) -> Step {
        let Some(i) = self.slot_of(done.io.id) else {
            return Step::NotMine;
        };
        let key = self.answer(i);
        let p = self.parent(key);
        p.left -= 1;
        if done.status != Status::Ok && p.status == Status::Ok {
            p.status = done.status;
        }
        p.last = done.breakdown;
        if p.left > 0 {
            return Step::Pending;
        }
        let p = self.parents[key as usize].take().expect("present");
        self.free.push(key as u32);
        Step::Reply(Completion {
            io: p.io,
            status: p.status,
            finished: done.finished,
            breakdown: p.last,
        })
    }
}

/// Where the piece starting at `at` ends: the next multiple of `page`, or `end`.
#[inline]
fn next_boundary(at: u64, page: u64, end: u64) -> u64 {
    ((at / page).saturating_add(1))
        .saturating_mul(page)
        .min(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Buf, Op, Request};

    fn buf_offset(b: Buf) -> Option<u32> {
        match b {
            Buf::None => None,
            Buf::Host { offset, .. } | Buf::Scratch { offset, .. } => Some(offset),
        }
    }

    /// (offset, length, offset in the parent's buffer) of each piece.
    fn layout(pieces: &[Io]) -> Vec<(u64, u32, Option<u32>)> {
        pieces
            .iter()
            .map(|s| (s.offset, s.len, buf_offset(s.buf)))
            .collect()
    }

    /// A fan-out and `host` split into its 4 KiB pieces.
    fn pages_of(host: Io) -> (Fanout, Vec<Io>) {
        let mut f = Fanout::new();
        let mut subs = Vec::new();
        f.split(host, 4096, &mut subs);
        (f, subs)
    }

    fn done(io: Io, status: Status, finished: u64, service_ns: u64) -> Completion {
        Completion {
            io,
            status,
            finished,
            breakdown: Breakdown {
                service_ns,
                ..Breakdown::default()
            },
        }
    }

    #[test]
    fn split_at_page_boundaries_with_buffers_following() {
        // 10 KiB at 3 KiB: pieces [3,4) [4,8) [8,12) [12,13) KiB.
        let host = Request::new(0, Op::Write, 3072, 10240).io(7);
        let (_, subs) = pages_of(host);
        assert_eq!(
            layout(&subs),
            vec![
                (3072, 1024, Some(0)),
                (4096, 4096, Some(1024)),
                (8192, 4096, Some(5120)),
                (12288, 1024, Some(9216)),
            ]
        );
        assert!(subs.iter().all(|s| s.id.is_sub() && s.op == Op::Write));
        assert!(subs
            .iter()
            .all(|s| matches!(s.buf, Buf::Host { id: 7, .. })));
        // Distinct ids, none equal to the parent's.
        let mut ids: Vec<_> = subs.iter().map(|s| s.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 4);
    }

    #[test]
    fn sub_ids_run_in_sequence_and_the_window_closes_behind_the_oldest() {
        // A in two pieces (ids 0, 1), B in one (2): B's and A's second answered first keep
        // the window open behind A's first; once that is back the window is empty, and
        // B's slot serves the next parent.
        let a = Request::new(0, Op::Read, 0, 8192).io(1);
        let b = Request::new(0, Op::Read, 65536, 4096).io(2);
        let (mut f, sa) = pages_of(a);
        let mut sb = Vec::new();
        f.split(b, 4096, &mut sb);
        let n = |io: &Io| io.id.0 & (IoId::SUB - 1);
        assert_eq!((n(&sa[0]), n(&sa[1]), n(&sb[0])), (0, 1, 2));
        assert!(matches!(f.complete(&done(sb[0], Status::Ok, 1, 1)), Step::Reply(c) if c.io == b));
        assert_eq!(f.complete(&done(sa[1], Status::Ok, 2, 1)), Step::Pending);
        assert_eq!((f.window.len(), f.base), (3, 0));
        // An answered id is not answered twice.
        assert_eq!(f.complete(&done(sb[0], Status::Ok, 3, 1)), Step::NotMine);
        assert!(matches!(f.complete(&done(sa[0], Status::Ok, 4, 1)), Step::Reply(c) if c.io == a));
        assert_eq!((f.window.len(), f.base, f.in_flight()), (0, 3, 0));
        let mut sc = Vec::new();
        f.split(Request::new(0, Op::Write, 0, 4096).io(3), 4096, &mut sc);
        assert_eq!(n(&sc[0]), 3);
        assert_eq!(f.parents.len(), 2, "an answered parent's slot is reused");
    }

    #[test]
    fn a_sub_io_that_never_returns_does_not_grow_the_window_without_end() {
        // A's second piece stays out while WINDOW_MAX + 10 one-piece parents come and go:
        // the window stays within its bound, the straggler moves to the map, and it still
        // answers A (once), and can still be cut into a sibling and merged into.
        let a = Request::new(0, Op::Read, 0, 12288).io(1);
        let (mut f, sa) = pages_of(a);
        assert_eq!(f.complete(&done(sa[0], Status::Ok, 1, 1)), Step::Pending);
        let mut longest = 0;
        for k in 0..WINDOW_MAX as u64 + 10 {
            let mut s = Vec::new();
            f.split(
                Request::new(0, Op::Write, k * 4096, 4096).io(2 + k),
                4096,
                &mut s,
            );
            longest = longest.max(f.window.len());
            assert!(matches!(
                f.complete(&done(s[0], Status::Ok, 2, 1)),
                Step::Reply(_)
            ));
        }
        assert!(longest <= WINDOW_MAX, "window grew to {longest}");
        assert_eq!(f.stragglers.len(), 2, "A's pieces 1 and 2 are stragglers");
        assert!(f.window.is_empty());
        // Piece 2 merges into piece 1 (both stragglers now); a sibling of the merged piece.
        let mut run = sa[1];
        f.merge(&mut run, sa[2]);
        assert_eq!((run.offset, run.len), (4096, 8192));
        let sib = f.sibling(&run);
        assert_eq!(f.complete(&done(sa[2], Status::Ok, 3, 1)), Step::NotMine);
        assert_eq!(f.complete(&done(run, Status::Ok, 4, 1)), Step::Pending);
        assert_eq!(f.complete(&done(run, Status::Ok, 5, 1)), Step::NotMine);
        assert!(matches!(
            f.complete(&done(sib, Status::Ok, 6, 1)),
            Step::Reply(c) if c.io == a && c.finished == 6
        ));
        assert!(f.stragglers.is_empty());
        assert_eq!(f.in_flight(), 0);
    }

    #[test]
    fn a_merged_piece_is_answered_with_the_piece_it_joined() {
        // 10 KiB at 3 KiB in four pieces; the middle two merge into [4,12) KiB, so the
        // parent is answered after three completions, not four.
        let host = Request::new(0, Op::Write, 3072, 10240).io(7);
        let (mut f, subs) = pages_of(host);
        let mut run = subs[1];
        f.merge(&mut run, subs[2]);
        assert_eq!(
            (run.offset, run.len, buf_offset(run.buf)),
            (4096, 8192, Some(1024))
        );
        // The retired piece's id is no longer the fan-out's.
        assert_eq!(f.complete(&done(subs[2], Status::Ok, 1, 1)), Step::NotMine);
        assert_eq!(f.complete(&done(subs[0], Status::Ok, 2, 1)), Step::Pending);
        assert_eq!(f.complete(&done(run, Status::Ok, 3, 1)), Step::Pending);
        assert!(matches!(
            f.complete(&done(subs[3], Status::Ok, 4, 1)),
            Step::Reply(c) if c.io == host
        ));
        assert_eq!(f.in_flight(), 0);
    }

    #[test]
    fn pieces_are_numbered_only_when_they_leave_and_a_merged_piece_costs_no_id() {
        // 16 KiB at 2 KiB in five pieces: [2,4) [4,8) [8,12) [12,16) [16,18) KiB. Pieces 0
        // and 1 leave on their own; 2 and 3 merge into 1; 4 leaves. Ids 0, 1, 2 in the
        // order numbered, and the parent is answered after those three.
        let host = Request::new(0, Op::Read, 2048, 16384).io(9);
        let mut f = Fanout::new();
        let mut p = Vec::new();
        let key = f.pieces(host, 4096, &mut p);
        assert_eq!(
            layout(&p),
            vec![
                (2048, 2048, Some(0)),
                (4096, 4096, Some(2048)),
                (8192, 4096, Some(6144)),
                (12288, 4096, Some(10240)),
                (16384, 2048, Some(14336)),
            ]
        );
        assert!(p.iter().all(|s| s.id == PIECE));
        // Not a sub-I/O yet: a completion of a piece is not the fan-out's.
        assert_eq!(f.complete(&done(p[0], Status::Ok, 1, 1)), Step::NotMine);
        let n = |io: &Io| io.id.0 & (IoId::SUB - 1);
        let mut a = p[0];
        f.number(key, &mut a);
        let mut run = p[1];
        f.number(key, &mut run);
        let id = run.id;
        f.number(key, &mut run);
        assert_eq!(run.id, id, "numbering twice keeps the id");
        f.merge(&mut run, p[2]);
        f.merge(&mut run, p[3]);
        assert_eq!(
            (run.offset, run.len, buf_offset(run.buf)),
            (4096, 12288, Some(2048))
        );
        let mut last = p[4];
        f.number(key, &mut last);
        assert_eq!((n(&a), n(&run), n(&last)), (0, 1, 2));
        assert_eq!(f.complete(&done(run, Status::Ok, 2, 1)), Step::Pending);
        assert_eq!(f.complete(&done(last, Status::Ok, 3, 1)), Step::Pending);
        assert!(matches!(
            f.complete(&done(a, Status::Ok, 4, 1)),
            Step::Reply(c) if c.io == host && c.finished == 4
        ));
        assert_eq!(f.in_flight(), 0);
    }

    #[test]
    #[should_panic(expected = "not adjacent")]
    fn a_piece_that_does_not_meet_is_not_merged() {
        let host = Request::new(0, Op::Read, 0, 12288).io(1);
        let mut f = Fanout::new();
        let mut p = Vec::new();
        let key = f.pieces(host, 4096, &mut p);
        let mut first = p[0];
        f.number(key, &mut first);
        f.merge(&mut first, p[2]);
    }

    #[test]
    #[should_panic(expected = "not adjacent")]
    fn pieces_that_do_not_meet_are_not_merged() {
        let host = Request::new(0, Op::Read, 0, 12288).io(1);
        let (mut f, subs) = pages_of(host);
        let mut first = subs[0];
        f.merge(&mut first, subs[2]);
    }

    #[test]
    fn replies_once_with_the_worst_status_and_the_last_breakdown() {
        let host = Request::new(0, Op::Read, 0, 8192).io(1);
        let (mut f, subs) = pages_of(host);
        assert_eq!(
            f.complete(&done(subs[1], Status::IoError, 10, 4)),
            Step::Pending
        );
        match f.complete(&done(subs[0], Status::Ok, 12, 9)) {
            Step::Reply(c) => {
                assert_eq!(c.io, host);
                assert_eq!(c.status, Status::IoError);
                assert_eq!(c.finished, 12);
                assert_eq!(c.breakdown.service_ns, 9);
            }
            s => panic!("{s:?}"),
        }
        assert_eq!(f.in_flight(), 0);
        // The same sub-I/O again, and a forwarded id, are not the fan-out's.
        assert_eq!(f.complete(&done(subs[0], Status::Ok, 13, 0)), Step::NotMine);
        assert_eq!(f.complete(&done(host, Status::Ok, 13, 0)), Step::NotMine);
    }

    #[test]
    fn a_sibling_holds_the_parent_until_it_too_is_back() {
        let host = Request::new(0, Op::Write, 0, 4096).io(4);
        let (mut f, subs) = pages_of(host);
        let s = f.sibling(&subs[0]);
        assert_ne!(s.id, subs[0].id);
        assert_eq!(
            (s.dev, s.offset, s.len, s.buf),
            (subs[0].dev, 0, 4096, subs[0].buf)
        );
        assert_eq!(f.complete(&done(subs[0], Status::Ok, 3, 1)), Step::Pending);
        match f.complete(&done(s, Status::IoError, 4, 2)) {
            Step::Reply(c) => assert_eq!((c.io, c.status), (host, Status::IoError)),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.in_flight(), 0);
    }

    #[test]
    fn a_flush_is_one_sub_io() {
        let host = Request::new(0, Op::Flush, 0, 0).io(3);
        let (mut f, subs) = pages_of(host);
        assert_eq!(subs.len(), 1);
        assert!(matches!(
            f.complete(&done(subs[0], Status::Ok, 5, 1)),
            Step::Reply(c) if c.io == host
        ));
    }
}
