//! The top-k set: the k highest-ranked pages, i.e. what the ECD should hold.
//!
//! The paper's top-k matrix ((√k+1) × √k, rotated sorted columns) gives O(log √k) lookups
//! and O(√k) insertions. This is a binary min-heap of (rank, page): O(1) for the minimum
//! (the entry threshold) and O(log k) for replacing it with a page that beats it (the
//! eviction) and for repositioning a page already inside whose rank grew (the step the
//! paper leaves out, done lazily: below) — at least as good as the matrix's bounds, and
//! deterministic, since (rank, page) is a total order and its minimum is unique (four
//! children a node: [`QuadHeap`]). Membership
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

/// A min-heap of (key, page) with four children a node: half the levels of a binary heap,
/// and a node's children side by side in memory (64 bytes), so a sift-down through a
/// 65,536-entry set touches about 8 cache lines instead of 16. Ties cannot occur ((key,
/// page) is a total order over distinct pages), so its minimum is the binary heap's.
#[derive(Clone, Debug, Default)]
struct QuadHeap {
    v: Vec<(u64, u64)>,
}

impl QuadHeap {
    fn from_vec(v: Vec<(u64, u64)>) -> QuadHeap {
        let mut h = QuadHeap { v };
        let n = h.v.len();
        if n > 1 {
            for i in (0..=(n - 2) / 4).rev() {
                h.sift_down(i);
            }
        }
        h
    }

    #[inline]
    fn len(&self) -> usize {
        self.v.len()
    }

    #[inline]
    fn peek(&self) -> Option<(u64, u64)> {
        self.v.first().copied()
    }

    fn push(&mut self, x: (u64, u64)) {
        let mut i = self.v.len();
        self.v.push(x);
        while i > 0 {
            let parent = (i - 1) / 4;
            if self.v[parent] <= x {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = x;
    }

    /// Put `x` in the minimum's place and restore the order.
    #[inline]
    fn replace_top(&mut self, x: (u64, u64)) {
        self.v[0] = x;
        self.sift_down(0);
    }

    /// Move the entry at `i` down past every smaller child (the hole method: one write a
    /// level).
    #[inline]
    fn sift_down(&mut self, mut i: usize) {
        let n = self.v.len();
        let x = self.v[i];
        loop {
            let first = 4 * i + 1;
            if first >= n {
                break;
            }
            let end = (first + 4).min(n);
            let mut best = first;
            for c in first + 1..end {
                if self.v[c] < self.v[best] {
                    best = c;
                }
            }
            if self.v[best] >= x {
                break;
            }
            self.v[i] = self.v[best];
            i = best;
        }
        self.v[i] = x;
    }

    fn iter(&self) -> impl Iterator<Item = &(u64, u64)> + '_ {
        self.v.iter()
    }
}

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
    set: QuadHeap,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK {
            k,
            set: QuadHeap::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.len() == 0
    }

    /// The first entry once its key is its page's rank (`rank_of`): the lowest rank
    /// inside and its page (ties: the lowest page number).
    fn fresh_min(&mut self, rank_of: impl Fn(u64) -> f64) -> Option<(u64, u64)> {
        loop {
            let (old, page) = self.set.peek()?;
            let now = key(rank_of(page));
            if now == old {
                return Some((old, page));
            }
            debug_assert!(now > old, "page {page}: a rank fell without a rescale");
            // Its key brought up to date, sifted down to its place.
            self.set.replace_top((now, page));
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
            self.set.push((key(new), page));
            return Update::Entered { evicted: None };
        }
        match self.fresh_min(rank_of) {
            // Strictly above the lowest rank inside, as the paper's entry rule.
            Some((min, out)) if key(new) > min => {
                // The minimum replaced in place: one sift-down.
                self.set.replace_top((key(new), page));
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
        self.set = QuadHeap::from_vec(entries.map(|(r, p)| (key(r), p)).collect());
    }
}

#[cfg(test)]
mod tests {
    use super::QuadHeap;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Against an ordered set, op by op: pushes, replacements of the minimum (by a key
        /// above or below it), and a heap built at once from a list; the minimum always
        /// agrees and the contents stay the same set.
        #[test]
        fn quad_heap_keeps_the_minimum_of_an_ordered_set(
            start in proptest::collection::vec(0u64..1000, 0..60),
            ops in proptest::collection::vec((any::<bool>(), 0u64..1000), 0..300),
        ) {
            // Distinct pages, as the top-k set holds: the page number is the op's index.
            let first: Vec<(u64, u64)> = start.iter().enumerate().map(|(i, &k)| (k, i as u64)).collect();
            let mut h = QuadHeap::from_vec(first.clone());
            let mut r: BTreeSet<(u64, u64)> = first.into_iter().collect();
            for (j, &(push, k)) in ops.iter().enumerate() {
                let x = (k, 10_000 + j as u64);
                if push || r.is_empty() {
                    h.push(x);
                    r.insert(x);
                } else {
                    let min = *r.iter().next().unwrap();
                    r.remove(&min);
                    r.insert(x);
                    h.replace_top(x);
                }
                prop_assert_eq!(h.peek(), r.iter().next().copied());
                prop_assert_eq!(h.len(), r.len());
            }
            let mut all: Vec<(u64, u64)> = h.iter().copied().collect();
            all.sort_unstable();
            prop_assert_eq!(all, r.into_iter().collect::<Vec<_>>());
        }
    }
}
