//! The top-k set: the k highest-ranked pages, i.e. what the ECD should hold.
//!
//! The paper's top-k matrix ((√k+1) × √k, rotated sorted columns) gives O(log √k) lookups
//! and O(√k) insertions. This is an ordered set of (rank, page) (the standard B-tree):
//! O(log k) for the three operations the layer needs — the minimum (the entry threshold),
//! inserting a page that beats it while evicting the minimum, and repositioning a page
//! already inside whose rank grew (the step the paper leaves out) — which is at least as
//! good as the matrix's bounds, deterministic, and ordered iteration (most popular first)
//! comes with it for the planner. Membership itself is a flag on the page, O(1).

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

    /// The lowest rank inside, if the set is full (the entry threshold).
    pub fn threshold(&self) -> Option<f64> {
        if self.set.len() < self.k {
            return None;
        }
        self.set.first().map(|&(r, _)| f64::from_bits(r))
    }

    /// `page`'s rank rose from `old` (`Some` if the page is inside) to `new`.
    pub fn update(&mut self, page: u64, old: Option<f64>, new: f64) -> Update {
        if let Some(old) = old {
            self.set.remove(&(key(old), page));
            self.set.insert((key(new), page));
            return Update::Moved;
        }
        if self.set.len() < self.k {
            self.set.insert((key(new), page));
            return Update::Entered { evicted: None };
        }
        match self.set.first() {
            // Strictly above the lowest rank inside, as the paper's entry rule.
            Some(&(min, out)) if key(new) > min => {
                self.set.pop_first();
                self.set.insert((key(new), page));
                Update::Entered { evicted: Some(out) }
            }
            _ => Update::Out,
        }
    }

    /// Pages inside, most popular first.
    pub fn pages_desc(&self) -> impl Iterator<Item = u64> + '_ {
        self.set.iter().rev().map(|&(_, p)| p)
    }

    /// Replace the keys after every rank was scaled by the same factor (membership stays).
    pub fn rebuild(&mut self, entries: impl Iterator<Item = (f64, u64)>) {
        self.set = entries.map(|(r, p)| (key(r), p)).collect();
    }
}
