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
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use wattio_core::{Nanos, Op, Request};

/// Is a kept event (a blkparse letter) one a request's completion follows? Q (queued),
/// G (got a request), I (inserted) and D (issued). A bio queued and then merged into
/// another request (M, F) has no completion of its own: the request's completion covers
/// its range and measures it ([`Pairing::complete`]).
pub fn pairs(kept: u8) -> bool {
    matches!(kept, b'Q' | b'G' | b'I' | b'D')
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
    /// Completions of no request waiting (issued before the trace began, a partial
    /// completion's second part, or another device's).
    pub unmatched: u64,
    /// Completions that reported an error.
    pub failed: u64,
    /// Completions stamped before their request (per-CPU clocks a little apart):
    /// measured 0.
    pub before_issue: u64,
}

/// Requests waiting for their completions, in the order they were kept.
pub struct Pairing {
    window: VecDeque<Request>,
    /// Sequence number of `window[0]`.
    first: u64,
    /// The oldest request waiting, per key (its sequence number)…
    waiting: HashMap<Key, u64, BuildHasherDefault<KeyHasher>>,
    /// …and the later ones of a key, oldest first, in the rare case of several in flight
    /// (a queue per key for all of them cost an allocation per request).
    later: HashMap<Key, VecDeque<u64>, BuildHasherDefault<KeyHasher>>,
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
            counts: PairCounts::default(),
        }
    }

    /// A kept request; it waits for its completion.
    pub fn push(&mut self, mut r: Request) {
        r.measured = None;
        let seq = self.first + self.window.len() as u64;
        let key = Key::new(r.dev, r.op, r.offset);
        match self.waiting.entry(key) {
            Entry::Vacant(v) => {
                v.insert(seq);
            }
            Entry::Occupied(_) => self.later.entry(key).or_default().push_back(seq),
        }
        self.window.push_back(r);
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

    /// A completion at `at` (the requests' clock) of `len` bytes of `op` at `offset` on
    /// device `dev`. When the request it completes is shorter than the completion, the
    /// rest of the range is bios merged into it (blktrace's M and F): each waits, when Q,
    /// G or I is kept, under its own sector, right after the previous one, and completes
    /// here too.
    pub fn complete(&mut self, dev: u16, op: Op, offset: u64, len: u64, at: Nanos, failed: bool) {
        let Some(covered) = self.measure(Key::new(dev, op, offset), at, failed) else {
            self.counts.unmatched += 1;
            return;
        };
        let end = offset.saturating_add(len);
        let mut next = offset.saturating_add(covered);
        // A front merge completes at the bio's sector, then the request's; a back merge at
        // the request's, then the bio's: either way a chain of adjacent ranges. A walk
        // stops at a gap or at a request of no length (it covers nothing further).
        while covered > 0 && next < end && op != Op::Flush {
            match self.measure(Key::new(dev, op, next), at, failed) {
                Some(l) if l > 0 => {
                    self.counts.merged += 1;
                    next = next.saturating_add(l);
                }
                _ => break,
            }
        }
    }

    /// Measures the oldest request waiting on `key` to `at`; its length, or `None` when
    /// none waits.
    fn measure(&mut self, key: Key, at: Nanos, failed: bool) -> Option<u64> {
        let seq = self.take(key)?;
        let r = self.window.get_mut(seq.checked_sub(self.first)? as usize)?;
        if at < r.arrival {
            self.counts.before_issue += 1;
        }
        r.measured = Some(at.saturating_sub(r.arrival));
        self.counts.paired += 1;
        if failed {
            self.counts.failed += 1;
        }
        Some(u64::from(r.len))
    }

    /// The oldest request, once it can go: it has its completion, or the input is over
    /// (`end`), or more than [`MAX_WAITING`] requests wait behind it.
    pub fn pop(&mut self, end: bool) -> Option<Request> {
        let head = self.window.front()?;
        if head.measured.is_none() {
            if !end && self.window.len() <= MAX_WAITING {
                return None;
            }
            let key = Key::new(head.dev, head.op, head.offset);
            // The oldest request of all is the oldest of its key.
            if self.waiting.get(&key) == Some(&self.first) {
                self.take(key);
            }
            if end {
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
                 a partial completion's second part, or an unselected device)",
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
        // A shorter completion (a partial one) measures only its first request.
        p.push(req(50, Op::Write, 28_672, 0));
        p.complete(0, Op::Write, 24_576, 2048, 1_200, false);
        assert_eq!(p.pop(false).unwrap().measured, Some(1_160));
        assert!(p.pop(false).is_none());
    }
}
