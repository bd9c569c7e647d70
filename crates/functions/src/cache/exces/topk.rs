//! The top-k set: the k highest-ranked pages, i.e. what the ECD should hold.
//!
//! The paper's top-k matrix ((√k+1) × √k, rotated sorted columns) gives O(log √k) lookups
//! and O(√k) insertions. This is a binary min-heap of (rank, page): O(1) for the minimum
//! (the entry threshold) and O(log k) for replacing it with a page that beats it (the
//! eviction) and for repositioning a page already inside whose rank grew (the step the
//! paper leaves out, done lazily: below) — at least as good as the matrix's bounds, and
//! deterministic, since (rank, page) is a total order and its minimum is unique. Membership
//! itself is a flag on the page, O(1); the planner takes its order from the pages' ranks,
//! so the set never needs iterating in order. (It was an ordered B-tree set, with the same
//! minima: a replacement there is a removal and an insertion, two descents through nodes
//! spread over memory, where the heap's one sift-down runs in one contiguous array.)
//!
//! Only the minimum matters (the planner takes its order from the pages' ranks), and a
//! rank only grows (between rescales, which rebuild the set): so a page inside whose rank
//! grew keeps its old key, and a key is brought up to date only when it comes first. The
//! first entry whose key is its page's rank is then the true minimum — every other key is
//! at most its page's rank and not below that entry — so membership and eviction are
//! exactly those of a set kept in order, without a remove and an insert (two descents of
//! a tree of k entries, cache misses each) at every fold of a popular page.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A positive f64 ordered by its bits (the IEEE order of non-negative floats).
fn key(rank: f64) -> u64 {
    debug_assert!(rank >= 0.0);
    rank.to_bits()
}

/// What an update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Update {
    /// The page was in and moved to its new rank.
    Moved,
    /// The page entered; `evicted`: the page that had the lowest rank and left.
    Entered { evicted: Option<u64> },
    /// Not high enough.
    Out,
}

#[derive(Clone, Debug)]
pub struct TopK {
    k: usize,
    /// (key, page), the smallest on top.
    set: BinaryHeap<Reverse<(u64, u64)>>,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            set: BinaryHeap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The first entry once its key is its page's rank (`rank_of`): the lowest rank
    /// inside and its page (ties: the lowest page number).
    fn fresh_min(&mut self, rank_of: impl Fn(u64) -> f64) -> Option<(u64, u64)> {
        loop {
            let mut top = self.set.peek_mut()?;
            let Reverse((old, page)) = *top;
            let now = key(rank_of(page));
            if now == old {
                return Some((old, page));
            }
            debug_assert!(now > old, "page {page}: a rank fell without a rescale");
            // Its key brought up to date: the heap sifts it down when `top` drops.
            *top = Reverse((now, page));
        }
    }

    /// The lowest rank inside, if the set is full (the entry threshold); `rank_of`: the
    /// current rank of a page inside.
    pub fn threshold(&mut self, rank_of: impl Fn(u64) -> f64) -> Option<f64> {
        if self.set.len() < self.k {
            return None;
        }
        self.fresh_min(rank_of).map(|(r, _)| f64::from_bits(r))
    }

    /// `page`'s rank rose to `new`; `inside`: it is in the set. `rank_of`: the current
    /// rank of a page inside (`page`'s is `new`).
    pub fn update(
        &mut self,
        page: u64,
        inside: bool,
        new: f64,
        rank_of: impl Fn(u64) -> f64,
    ) -> Update {
        if inside {
            // Its key stays until it comes first (see the module's note).
            return Update::Moved;
        }
        if self.set.len() < self.k {
            self.set.push(Reverse((key(new), page)));
            return Update::Entered { evicted: None };
        }
        match self.fresh_min(rank_of) {
            // Strictly above the lowest rank inside, as the paper's entry rule.
            Some((min, out)) if key(new) > min => {
                // The minimum replaced in place: one sift-down.
                *self.set.peek_mut().expect("a full set") = Reverse((key(new), page));
                Update::Entered { evicted: Some(out) }
            }
            _ => Update::Out,
        }
    }

    /// Pages inside, in no particular order.
    pub fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.set.iter().map(|&Reverse((_, p))| p)
    }

    /// Replace the keys after every rank was scaled by the same factor (membership stays).
    pub fn rebuild(&mut self, entries: impl Iterator<Item = (f64, u64)>) {
        self.set = entries.map(|(r, p)| Reverse((key(r), p))).collect();
    }
}
