//! The top-k set: the k highest-ranked pages, i.e. what the ECD should hold.
//!
//! The paper's top-k matrix ((√k+1) × √k, rotated sorted columns) gives O(log √k) lookups
//! and O(√k) insertions. This is an ordered set of (rank, page) (the standard B-tree):
//! O(log k) for the three operations the layer needs — the minimum (the entry threshold),
//! inserting a page that beats it while evicting the minimum, and repositioning a page
//! already inside whose rank grew (the step the paper leaves out) — which is at least as
//! good as the matrix's bounds, deterministic, and ordered iteration (most popular first)
//! comes with it for the planner. Membership itself is a flag on the page, O(1).
//!
//! Only the minimum matters (the planner takes its order from the pages' ranks), and a
//! rank only grows (between rescales, which rebuild the set): so a page inside whose rank
//! grew keeps its old key, and a key is brought up to date only when it comes first. The
//! first entry whose key is its page's rank is then the true minimum — every other key is
//! at most its page's rank and not below that entry — so membership and eviction are
//! exactly those of a set kept in order, without a remove and an insert (two descents of
//! a tree of k entries, cache misses each) at every fold of a popular page.

use std::collections::BTreeSet;

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
    set: BTreeSet<(u64, u64)>,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            set: BTreeSet::new(),
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
            let (old, page) = *self.set.first()?;
            let now = key(rank_of(page));
            if now == old {
                return Some((old, page));
            }
            debug_assert!(now > old, "page {page}: a rank fell without a rescale");
            self.set.pop_first();
            self.set.insert((now, page));
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
            self.set.insert((key(new), page));
            return Update::Entered { evicted: None };
        }
        match self.fresh_min(rank_of) {
            // Strictly above the lowest rank inside, as the paper's entry rule.
            Some((min, out)) if key(new) > min => {
                self.set.pop_first();
                self.set.insert((key(new), page));
                Update::Entered { evicted: Some(out) }
            }
            _ => Update::Out,
        }
    }

    /// Pages inside, in no particular order.
    pub fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.set.iter().map(|&(_, p)| p)
    }

    /// Replace the keys after every rank was scaled by the same factor (membership stays).
    pub fn rebuild(&mut self, entries: impl Iterator<Item = (f64, u64)>) {
        self.set = entries.map(|(r, p)| (key(r), p)).collect();
    }
}
