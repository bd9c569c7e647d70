//! What FS2 knows to be free on the disk: extents of 4 KiB blocks, learned from discards
//! (and an ext2/3/4 image's bitmaps at start), lost to writes.
//!
//! Replicas may only go where the file system holds no data. A block layer cannot see the
//! file system's allocation, so it believes a block free from the moment it is discarded
//! (or a bitmap says so) until the host writes it.

use std::collections::BTreeMap;

/// Disjoint, non-adjacent extents `[start, end)` of blocks, with their total.
#[derive(Clone, Debug, Default)]
pub struct FreeMap {
    /// start → end.
    runs: BTreeMap<u64, u64>,
    total: u64,
    /// At most this many extents are remembered; space beyond it is forgotten (never
    /// believed free), which is always safe.
    max_runs: usize,
}

impl FreeMap {
    pub fn new(max_runs: usize) -> FreeMap {
        FreeMap {
            runs: BTreeMap::new(),
            total: 0,
            max_runs: max_runs.max(1),
        }
    }

    /// Blocks believed free.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    pub fn is_free(&self, b: u64) -> bool {
        self.runs
            .range(..=b)
            .next_back()
            .is_some_and(|(_, &e)| e > b)
    }

    /// The extents, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.runs.iter().map(|(&s, &e)| (s, e))
    }

    /// `[start, end)` is free (merged with what it touches). Returns the blocks added.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let (mut s, mut e) = (start, end);
        let mut absorbed: Vec<(u64, u64)> = Vec::new();
        if let Some((&ps, &pe)) = self.runs.range(..s).next_back() {
            if pe >= s {
                absorbed.push((ps, pe));
            }
        }
        absorbed.extend(self.runs.range(s..=e).map(|(&a, &b)| (a, b)));
        if absorbed.is_empty() && self.runs.len() >= self.max_runs {
            // A new extent past the bound: forgotten (never believed free), always safe.
            return 0;
        }
        let before = self.total;
        for (a, b) in absorbed {
            s = s.min(a);
            e = e.max(b);
            self.runs.remove(&a);
            self.total -= b - a;
        }
        self.runs.insert(s, e);
        self.total += e - s;
        self.total - before
    }

    /// `[start, end)` is not free. Returns the blocks removed.
    pub fn remove(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let before = self.total;
        // The runs overlapping [start, end), from the last down: one lookup when none does
        // (a write to used space, the common case), and no allocation.
        while let Some((&a, &b)) = self.runs.range(..end).next_back() {
            if b <= start {
                break;
            }
            self.runs.remove(&a);
            self.total -= b - a;
            if b > end {
                self.runs.insert(end, b);
                self.total += b - end;
            }
            if a < start {
                self.runs.insert(a, start);
                self.total += start - a;
                break;
            }
        }
        before - self.total
    }

    /// Take `len` contiguous free blocks inside `[lo, hi)`, the first run from `from` on
    /// that fits (then from `lo`): replicas written in access order land one after another.
    pub fn take(&mut self, lo: u64, hi: u64, from: u64, len: u64) -> Option<u64> {
        let from = from.clamp(lo, hi);
        let found = self
            .fit(from, hi, len)
            .or_else(|| self.fit(lo, from.saturating_add(len).min(hi), len))?;
        self.remove(found, found + len);
        Some(found)
    }

    fn fit(&self, lo: u64, hi: u64, len: u64) -> Option<u64> {
        if lo >= hi {
            return None;
        }
        let first = self
            .runs
            .range(..=lo)
            .next_back()
            .filter(|(_, &e)| e > lo)
            .map(|(&s, &e)| (s.max(lo), e));
        first
            .into_iter()
            .chain(self.runs.range(lo + 1..hi).map(|(&s, &e)| (s, e)))
            .map(|(s, e)| (s, e.min(hi)))
            .find(|&(s, e)| e >= s + len)
            .map(|(s, _)| s)
    }
}
