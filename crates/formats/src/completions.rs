//! Issue/completion pairing, for traces that log a request once per event (blkparse's text,
//! blktrace's binary): the kept event (D, issued to the driver, by default) is held back
//! until the completion (C) of the same device, op and sector arrives, and goes out with
//! `measured` = completion − kept event (D → C: the device's service time plus its queue,
//! what `btt` calls D2C). Requests go out in the order they were kept.
//!
//! Bounds: at most [`MAX_WAITING`] requests wait behind one without a completion; beyond
//! that the oldest goes out unmeasured (a lost completion must not hold the whole trace in
//! memory). Two requests to the same sector in flight at once pair oldest first, as the
//! kernel completes them (and as blkparse's `-t` tracking does).

use crate::text::KeyHasher;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasherDefault;
use wattio_core::{Nanos, Op, Request};

/// Is a kept event (a blkparse letter) one a request's completion follows? Q (queued),
/// G (got a request), I (inserted) and D (issued). A bio queued and then merged into
/// another request (M, F) has no completion of its own: the request's completion covers
/// its range and measures it ([`Pairing::complete`]).
pub fn pairs(kept: u8) -> bool {
    matches!(kept, b'Q' | b'G' | b'I' | b'D')
}

/// An event of another letter than the kept one that the pairing follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// C: the request completed ([`Pairing::complete`]).
    Completed,
    /// F: a bio merged at the front of a request kept before the merge, at G or I (with Q
    /// the bio has its own Q; D comes after every merge): [`Pairing::front_merge`].
    FrontMerged,
    /// R: a request sent back to be issued again, which repeats I and D:
    /// [`Pairing::requeue`].
    Requeued,
}

/// The event a record of blkparse letter `letter` is to a pairing of kept event `kept`, if
/// it is one.
pub fn event(kept: u8, letter: u8) -> Option<Event> {
    match letter {
        _ if letter == kept => None,
        b'C' if pairs(kept) => Some(Event::Completed),
        b'F' if matches!(kept, b'G' | b'I') => Some(Event::FrontMerged),
        b'R' if matches!(kept, b'I' | b'D') => Some(Event::Requeued),
        _ => None,
    }
}

/// Requests held at most behind the oldest one still waiting for its completion.
pub const MAX_WAITING: usize = 1 << 16;

/// What a completion is matched on: the device (as numbered by the reader), the op and the
/// first byte (a flush has none: its sector is whatever the driver left).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Key {
    dev: u16,
    op: u8,
    offset: u64,
}

impl Key {
    fn new(dev: u16, op: Op, offset: u64) -> Key {
        Key {
            dev,
            op: op as u8,
            offset: if op == Op::Flush { 0 } else { offset },
        }
    }
}

/// Counts for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PairCounts {
    pub paired: u64,
    /// Of those, bios merged into another request, measured by its completion.
    pub merged: u64,
    /// Still waiting when the input ended.
    pub never_completed: u64,
    /// Sent out unmeasured because [`MAX_WAITING`] requests waited behind them.
    pub given_up: u64,
    /// Completed only in part (a split bio's other parts never completed, or not before
    /// [`MAX_WAITING`] requests waited behind it): measured to its last part's completion.
    pub part_only: u64,
    /// Requests kept before a bio merged at their front (F, with G or I kept): they wait
    /// for their completion at the bio's sector.
    pub front_merged: u64,
    /// Requests sent back to the queue (R) and kept again: counted once, from the last.
    pub requeued: u64,
    /// Completions of no request waiting (issued before the trace began, or another
    /// device's).
    pub unmatched: u64,
    /// Completions that reported an error.
    pub failed: u64,
    /// Completions stamped before their request (per-CPU clocks a little apart):
    /// measured 0.
    pub before_issue: u64,
}

/// Unmatched completions remembered, at most, in case a request completed in parts gets
/// its later part's completion before its first (the parts are separate requests below).
pub const RECENT: usize = 4096;

type KeyMap<V> = HashMap<Key, V, BuildHasherDefault<KeyHasher>>;

/// A completion: `len` bytes from byte `from`, at `at`, `failed` if it reported an error.
#[derive(Clone, Copy)]
struct Done {
    from: u64,
    len: u64,
    at: Nanos,
    failed: bool,
}

impl Done {
    fn end(&self) -> u64 {
        self.from.saturating_add(self.len)
    }
}

/// An unmatched completion remembered, with its stamp (for eviction).
#[derive(Clone, Copy)]
struct Seen {
    stamp: u64,
    done: Done,
}

/// What of a request is still to complete, when it is not its whole range as kept.
#[derive(Clone, Copy)]
struct Rest {
    /// Its first byte: the key it waits on.
    next: u64,
    end: u64,
    /// Some part has completed.
    started: bool,
}

/// Requests waiting for their completions, in the order they were kept.
pub struct Pairing {
    window: VecDeque<Request>,
    /// Sequence number of `window[0]`.
    first: u64,
    /// The oldest request waiting, per key (its sequence number)…
    waiting: KeyMap<u64>,
    /// …and the later ones of a key, oldest first, in the rare case of several in flight
    /// (a queue per key for all of them cost an allocation per request).
    later: KeyMap<VecDeque<u64>>,
    /// Requests that wait under another first byte than their own: completed in part (a
    /// bio split below, Q kept), or grown at the front by a merge (F, G or I kept).
    partial: HashMap<u64, Rest, BuildHasherDefault<KeyHasher>>,
    /// The last [`RECENT`] completions that matched nothing, by key, oldest first.
    recent: KeyMap<Seen>,
    recent_order: VecDeque<(Key, u64)>,
    stamp: u64,
    /// Requests requeued (R) and kept again: they leave the window without going out.
    dropped: HashSet<u64, BuildHasherDefault<KeyHasher>>,
    pub counts: PairCounts,
}

impl Default for Pairing {
    fn default() -> Self {
        Pairing::new()
    }
}

impl Pairing {
    pub fn new() -> Pairing {
        Pairing {
            window: VecDeque::new(),
            first: 0,
            waiting: HashMap::default(),
            later: HashMap::default(),
            partial: HashMap::default(),
            recent: HashMap::default(),
            recent_order: VecDeque::new(),
            stamp: 0,
            dropped: HashSet::default(),
            counts: PairCounts::default(),
        }
    }

    /// A kept request; it waits for its completion.
    pub fn push(&mut self, mut r: Request) {
        r.measured = None;
        let seq = self.first + self.window.len() as u64;
        self.wait(Key::new(r.dev, r.op, r.offset), seq);
        self.window.push_back(r);
    }

    /// `seq` waits on `key`, in sequence order among the requests waiting there: a request
    /// re-keyed (completed in part, merged at the front) may be older than those already
    /// waiting on its new key. So the oldest request of all is always the oldest of its
    /// key, and [`Pairing::pop`] can take it out when it goes unmeasured.
    fn wait(&mut self, key: Key, seq: u64) {
        match self.waiting.entry(key) {
            Entry::Vacant(v) => {
                v.insert(seq);
            }
            Entry::Occupied(mut o) => {
                let q = self.later.entry(key).or_default();
                if seq < *o.get() {
                    let newer = std::mem::replace(o.get_mut(), seq);
                    q.push_front(newer);
                } else {
                    // Pushes come in sequence order: this is the end, but for a re-key.
                    let i = q.partition_point(|&x| x < seq);
                    q.insert(i, seq);
                }
            }
        }
    }

    /// Takes the oldest request waiting on `key` out of the maps.
    fn take(&mut self, key: Key) -> Option<u64> {
        let seq = self.waiting.remove(&key)?;
        if let Some(q) = self.later.get_mut(&key) {
            if let Some(next) = q.pop_front() {
                self.waiting.insert(key, next);
            }
            if q.is_empty() {
                self.later.remove(&key);
            }
        }
        Some(seq)
    }

    /// The oldest request still held that waits on `key`. (An entry of a request already
    /// gone would be dropped on the way; `wait`'s order leaves none, this is a safety net.)
    fn take_held(&mut self, key: Key) -> Option<u64> {
        while let Some(seq) = self.take(key) {
            if seq >= self.first {
                return Some(seq);
            }
        }
        None
    }

    /// A completion at `at` (the requests' clock) of `len` bytes of `op` at `offset` on
    /// device `dev`. When the request it completes is shorter than the completion, the
    /// rest of the range is bios merged into it (blktrace's M and F): each waits, when Q,
    /// G or I is kept, under its own sector, right after the previous one, and completes
    /// here too. When it is longer, this was one part of it (a bio split below the kept
    /// event, X): the rest waits for its own completion.
    pub fn complete(&mut self, dev: u16, op: Op, offset: u64, len: u64, at: Nanos, failed: bool) {
        let key = Key::new(dev, op, offset);
        let done = Done {
            from: offset,
            len,
            at,
            failed,
        };
        let Some((mut reach, mut last)) = self.measure(key, done) else {
            self.remember(key, done);
            return;
        };
        // A front merge completes at the bio's sector, then the request's; a back merge at
        // the request's, then the bio's: either way a chain of adjacent ranges, up to the
        // end of the completion that measured the last of them (a remembered one, for a
        // split request's later part). A walk stops at a gap or at a request of no length.
        let mut from = offset;
        while op != Op::Flush && reach > from && reach < last.end() {
            let rest = Done {
                from: reach,
                len: last.end() - reach,
                ..last
            };
            let Some((r, l)) = self.measure(Key::new(dev, op, reach), rest) else {
                break;
            };
            self.counts.merged += 1;
            (from, reach, last) = (rest.from, r, l);
        }
    }

    /// A bio of `len` bytes at `offset` merged at the front of the request that started
    /// right after it (blktrace's F), when the kept event came before the merge (G, I):
    /// that request now starts, and will complete, at `offset`.
    pub fn front_merge(&mut self, dev: u16, op: Op, offset: u64, len: u64) {
        if len == 0 || op == Op::Flush {
            return;
        }
        let Some(seq) = self.take_held(Key::new(dev, op, offset.saturating_add(len))) else {
            return;
        };
        let r = &self.window[(seq - self.first) as usize];
        let rest = self.partial.get(&seq).copied().unwrap_or(Rest {
            next: r.offset,
            end: r.offset.saturating_add(u64::from(r.len)),
            started: false,
        });
        self.partial.insert(
            seq,
            Rest {
                next: offset,
                ..rest
            },
        );
        self.wait(Key::new(dev, op, offset), seq);
        self.counts.front_merged += 1;
    }

    /// A request sent back to the queue (R) at `offset`: it will be inserted and issued
    /// again, so the kept I or D repeats. The copy waiting now is dropped; the request goes
    /// out once, from its last one (as `btt` measures D2C from the last issue).
    pub fn requeue(&mut self, dev: u16, op: Op, offset: u64) {
        let Some(seq) = self.take_held(Key::new(dev, op, offset)) else {
            return;
        };
        if !self.partial.is_empty() {
            self.partial.remove(&seq);
        }
        self.dropped.insert(seq);
        self.counts.requeued += 1;
    }

    /// Measures the oldest request waiting on `key` by `done`; where its range ends (what
    /// it took of the completion's range, and of any remembered completions of its later
    /// parts) and the last completion that measured it, or `None` when none waits.
    fn measure(&mut self, key: Key, mut done: Done) -> Option<(u64, Done)> {
        let seq = self.take_held(key)?;
        loop {
            let r = self.window.get_mut((seq - self.first) as usize)?;
            if done.at < r.arrival {
                self.counts.before_issue += 1;
            }
            if done.failed {
                self.counts.failed += 1;
            }
            // The last part to complete measures the request, in whatever order they came.
            let m = done.at.saturating_sub(r.arrival);
            r.measured = Some(r.measured.map_or(m, |old| old.max(m)));
            let rest = if self.partial.is_empty() {
                None
            } else {
                self.partial.remove(&seq)
            };
            let end = rest.map_or(r.offset.saturating_add(u64::from(r.len)), |p| p.end);
            if done.len == 0 || done.end() >= end || key.op == Op::Flush as u8 {
                self.counts.paired += 1;
                return Some((end, done));
            }
            // Completed in part: the rest waits under its first byte, unless its
            // completion came first.
            let next = done.end();
            let rest = Key {
                offset: next,
                ..key
            };
            self.partial.insert(
                seq,
                Rest {
                    next,
                    end,
                    started: true,
                },
            );
            let arrival = r.arrival;
            match self.recent.get(&rest) {
                Some(s) if s.done.at >= arrival => {
                    done = s.done;
                    self.recent.remove(&rest);
                    self.counts.unmatched -= 1;
                }
                _ => {
                    self.wait(rest, seq);
                    return Some((next, done));
                }
            }
        }
    }

    /// A completion that matched nothing: counted, and remembered a while in case it is a
    /// later part of a request whose first part has not completed yet.
    fn remember(&mut self, key: Key, done: Done) {
        self.counts.unmatched += 1;
        if done.len == 0 || key.op == Op::Flush as u8 {
            return;
        }
        self.stamp += 1;
        let stamp = self.stamp;
        self.recent.insert(key, Seen { stamp, done });
        self.recent_order.push_back((key, stamp));
        if self.recent_order.len() > RECENT {
            if let Some((k, s)) = self.recent_order.pop_front() {
                if self.recent.get(&k).is_some_and(|e| e.stamp == s) {
                    self.recent.remove(&k);
                }
            }
        }
    }

    /// The oldest request, once it can go: it has its (whole) completion, or the input is
    /// over (`end`), or more than [`MAX_WAITING`] requests wait behind it.
    pub fn pop(&mut self, end: bool) -> Option<Request> {
        while !self.dropped.is_empty() && self.dropped.remove(&self.first) {
            self.window.pop_front();
            self.first += 1;
        }
        let head = self.window.front()?;
        // Nearly always empty: no hash for the common case.
        let rest = if self.partial.is_empty() {
            None
        } else {
            self.partial.get(&self.first).copied()
        };
        let started = rest.is_some_and(|r| r.started);
        if head.measured.is_none() || started {
            if !end && self.window.len() <= MAX_WAITING {
                return None;
            }
            let offset = rest.map_or(head.offset, |r| r.next);
            let key = Key::new(head.dev, head.op, offset);
            // The oldest request of all is the oldest of its key (`wait`).
            if self.waiting.get(&key) == Some(&self.first) {
                self.take(key);
            }
            self.partial.remove(&self.first);
            if started {
                self.counts.part_only += 1;
            } else if end {
                self.counts.never_completed += 1;
            } else {
                self.counts.given_up += 1;
            }
        }
        self.first += 1;
        self.window.pop_front()
    }

    /// Requests held now.
    pub fn held(&self) -> usize {
        self.window.len()
    }

    /// The assumptions report's lines.
    pub fn notes(&self, kept: char) -> Vec<String> {
        let c = &self.counts;
        let mut v = vec![format!(
            "measured = completion (C) − {kept}, paired by device, op and sector, oldest first: \
             {} requests measured",
            c.paired
        )];
        if c.merged > 0 {
            v.push(format!(
                "{} of them were bios merged into another request, measured by its \
                 completion (its range covers theirs)",
                c.merged
            ));
        }
        if c.front_merged > 0 {
            v.push(format!(
                "{} requests grew at the front by a merge (F) after {kept}: they completed at \
                 the merged bio's sector",
                c.front_merged
            ));
        }
        if c.requeued > 0 {
            v.push(format!(
                "{} requests were requeued (R) and {kept} again: each went out once, from \
                 its last {kept}",
                c.requeued
            ));
        }
        if c.part_only > 0 {
            v.push(format!(
                "{} requests completed only in part in the trace (measured to the last part \
                 that did)",
                c.part_only
            ));
        }
        if c.never_completed > 0 {
            v.push(format!(
                "{} requests had no completion in the trace (measured left empty)",
                c.never_completed
            ));
        }
        if c.given_up > 0 {
            v.push(format!(
                "{} requests went out unmeasured: {MAX_WAITING} later requests were held \
                 behind each waiting for its completion",
                c.given_up
            ));
        }
        if c.unmatched > 0 {
            v.push(format!(
                "{} completions matched no waiting request (issued before the trace began, \
                 or of an unselected device)",
                c.unmatched
            ));
        }
        if c.failed > 0 {
            v.push(format!(
                "{} completions reported an error (kept, measured)",
                c.failed
            ));
        }
        if c.before_issue > 0 {
            v.push(format!(
                "{} completions were stamped before their request (the CPUs' clocks apart): \
                 measured 0",
                c.before_issue
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(at: Nanos, op: Op, offset: u64, dev: u16) -> Request {
        let mut r = Request::new(at, op, offset, 4096);
        r.dev = dev;
        r
    }

    #[test]
    fn requests_leave_in_order_once_completed() {
        let mut p = Pairing::new();
        p.push(req(100, Op::Read, 0, 0));
        p.push(req(200, Op::Write, 8192, 0));
        // The second completes first: both wait for the first.
        p.complete(0, Op::Write, 8192, 4096, 260, false);
        assert!(p.pop(false).is_none());
        p.complete(0, Op::Read, 0, 4096, 1_100, false);
        let a = p.pop(false).unwrap();
        assert_eq!((a.arrival, a.measured), (100, Some(1_000)));
        let b = p.pop(false).unwrap();
        assert_eq!((b.arrival, b.measured), (200, Some(60)));
        assert!(p.pop(false).is_none());
        assert_eq!(p.counts.paired, 2);
    }

    #[test]
    fn same_sector_pairs_oldest_first_and_keys_separate_op_and_device() {
        let mut p = Pairing::new();
        p.push(req(0, Op::Write, 4096, 0));
        p.push(req(10, Op::Write, 4096, 0));
        p.push(req(20, Op::Read, 4096, 0));
        p.push(req(30, Op::Write, 4096, 1));
        p.complete(0, Op::Write, 4096, 4096, 50, false);
        p.complete(1, Op::Write, 4096, 4096, 70, true);
        p.complete(0, Op::Read, 4096, 4096, 90, false);
        p.complete(0, Op::Write, 4096, 4096, 100, false);
        let got: Vec<_> = std::iter::from_fn(|| p.pop(false))
            .map(|r| (r.arrival, r.measured))
            .collect();
        assert_eq!(
            got,
            [
                (0, Some(50)),
                (10, Some(90)),
                (20, Some(70)),
                (30, Some(40))
            ]
        );
        assert_eq!(p.counts.failed, 1);
    }

    #[test]
    fn a_flush_completes_whatever_its_sector() {
        let mut p = Pairing::new();
        let mut f = req(5, Op::Flush, 0, 0);
        f.len = 0;
        p.push(f);
        p.complete(0, Op::Flush, 123_456, 0, 25, false);
        assert_eq!(p.pop(false).unwrap().measured, Some(20));
    }

    #[test]
    fn unmatched_late_and_skewed_completions_are_counted() {
        let mut p = Pairing::new();
        p.complete(0, Op::Read, 0, 4096, 10, false);
        p.push(req(100, Op::Read, 0, 0));
        p.complete(0, Op::Read, 0, 4096, 90, false);
        assert_eq!(p.pop(false).unwrap().measured, Some(0));
        p.push(req(200, Op::Read, 512, 0));
        assert!(p.pop(false).is_none());
        assert_eq!(p.pop(true).unwrap().measured, None);
        // Its key no longer waits: a late completion matches nothing.
        p.complete(0, Op::Read, 512, 4096, 300, false);
        let c = p.counts;
        assert_eq!(
            (c.paired, c.unmatched, c.before_issue, c.never_completed),
            (1, 2, 1, 1)
        );
    }

    #[test]
    fn a_lost_completion_holds_at_most_max_waiting_requests() {
        let mut p = Pairing::new();
        p.push(req(0, Op::Read, 0, 0));
        let mut out = Vec::new();
        for i in 1..=MAX_WAITING as u64 + 10 {
            p.push(req(i, Op::Read, i * 4096, 0));
            p.complete(0, Op::Read, i * 4096, 4096, i + 1, false);
            while let Some(r) = p.pop(false) {
                out.push(r);
            }
            assert!(p.held() <= MAX_WAITING + 1);
        }
        assert_eq!(out[0].measured, None);
        assert_eq!(out[0].arrival, 0);
        assert!(out[1..].iter().all(|r| r.measured == Some(1)));
        assert_eq!(out.len(), MAX_WAITING + 11);
        assert_eq!(p.counts.given_up, 1);
        // The given-up request no longer waits: its completion, late, matches nothing.
        p.complete(0, Op::Read, 0, 4096, 1 << 30, false);
        assert_eq!(p.counts.unmatched, 1);
    }

    #[test]
    fn merged_bios_complete_with_their_request() {
        // Q kept: a request of 4 KiB at 4 KiB took a back-merged bio at 8 KiB and a
        // front-merged one at 0, all 4 KiB.
        let mut p = Pairing::new();
        p.push(req(0, Op::Write, 4096, 0)); // the request, 4 KiB at 4 KiB
        p.push(req(10, Op::Write, 8192, 0)); // back merge at 8 KiB
        p.push(req(20, Op::Write, 0, 0)); // front merge at 0
        p.push(req(30, Op::Write, 16_384, 0)); // its own request, past a gap
                                               // The merged request completes at its new first sector for 12 KiB.
        p.complete(0, Op::Write, 0, 12_288, 1_000, false);
        let got: Vec<_> = std::iter::from_fn(|| p.pop(false))
            .map(|r| (r.arrival, r.measured))
            .collect();
        assert_eq!(got, [(0, Some(1_000)), (10, Some(990)), (20, Some(980))]);
        assert_eq!((p.counts.paired, p.counts.merged), (3, 2));
        // The range ended at 12 KiB: the request at 16 KiB still waits, and a completion
        // that covers a gap stops at it.
        p.push(req(40, Op::Write, 24_576, 0));
        p.complete(0, Op::Write, 16_384, 16_384, 1_100, false);
        assert_eq!(p.pop(false).unwrap().measured, Some(1_070));
        assert!(p.pop(false).is_none());
        assert_eq!((p.counts.paired, p.counts.merged), (4, 2));
        // A shorter completion is one part of the request: it waits for the rest.
        p.push(req(50, Op::Write, 28_672, 0));
        p.complete(0, Op::Write, 24_576, 2048, 1_200, false);
        assert!(p.pop(false).is_none());
        p.complete(0, Op::Write, 26_624, 2048, 1_300, false);
        assert_eq!(p.pop(false).unwrap().measured, Some(1_260));
        assert!(p.pop(false).is_none());
        assert_eq!(p.counts.paired, 5);
    }

    #[test]
    fn a_split_request_is_measured_to_its_last_part_in_any_order() {
        let mut p = Pairing::new();
        let mut big = req(100, Op::Read, 1 << 20, 0);
        big.len = 3 * 4096;
        p.push(big);
        p.push(req(200, Op::Read, 0, 0));
        // Its parts complete last-first, middle, first: the later ones are remembered
        // until the first part's completion uncovers them.
        p.complete(0, Op::Read, (1 << 20) + 8192, 4096, 900, false);
        p.complete(0, Op::Read, (1 << 20) + 4096, 4096, 700, true);
        assert_eq!(p.counts.unmatched, 2);
        p.complete(0, Op::Read, 1 << 20, 4096, 500, false);
        p.complete(0, Op::Read, 0, 4096, 1_000, false);
        let got: Vec<_> = std::iter::from_fn(|| p.pop(false))
            .map(|r| (r.arrival, r.measured))
            .collect();
        assert_eq!(got, [(100, Some(800)), (200, Some(800))]);
        let c = p.counts;
        assert_eq!((c.paired, c.unmatched, c.failed, c.part_only), (2, 0, 1, 0));
        // A completion older than the request is not one of its parts.
        p.complete(0, Op::Read, 9 * 4096, 4096, 1_100, false);
        let mut r = req(1_200, Op::Read, 8 * 4096, 0);
        r.len = 8192;
        p.push(r);
        p.complete(0, Op::Read, 8 * 4096, 4096, 1_500, false);
        assert!(p.pop(false).is_none());
        // The input ends before its second part completes: measured to its first.
        let r = p.pop(true).unwrap();
        assert_eq!(r.measured, Some(300));
        let c = p.counts;
        assert_eq!((c.paired, c.unmatched, c.part_only), (2, 1, 1));
        assert!(p
            .notes('Q')
            .join("\n")
            .contains("1 requests completed only in part"));
    }

    #[test]
    fn a_re_keyed_request_waits_before_newer_ones_and_leaves_nothing_behind() {
        let mut p = Pairing::new();
        let mut a = req(0, Op::Write, 0, 0);
        a.len = 8192;
        p.push(a);
        p.push(req(10, Op::Write, 4096, 0));
        // A's first half completes: its rest waits on 4096, where B already waits. The
        // next completion there is A's (oldest first).
        p.complete(0, Op::Write, 0, 4096, 100, false);
        p.complete(0, Op::Write, 4096, 4096, 200, false);
        assert_eq!(p.pop(false).unwrap().measured, Some(200));
        assert!(p.pop(false).is_none());
        // Again, but the input ends before either completes further: both go, and no
        // entry is left waiting for a request already gone.
        let mut c = req(20, Op::Write, 1 << 20, 0);
        c.len = 8192;
        p.push(c);
        p.push(req(30, Op::Write, (1 << 20) + 4096, 0));
        p.complete(0, Op::Write, 1 << 20, 4096, 300, false);
        let rest: Vec<_> = std::iter::from_fn(|| p.pop(true))
            .map(|r| (r.arrival, r.measured))
            .collect();
        assert_eq!(rest, [(10, None), (20, Some(280)), (30, None)]);
        assert!(p.waiting.is_empty() && p.later.is_empty() && p.partial.is_empty());
        let c = p.counts;
        assert_eq!((c.part_only, c.never_completed), (1, 2));
    }
}
