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
    /// Blocks per bucket (FS2's region), 0 for none: `take` inside one bucket is asked
    /// for every replica, once per neighbouring region while the target is full, and
    /// most of those asks find nothing.
    bucket: u64,
    /// Per bucket, an upper bound on its longest free run (clipped to the bucket): raised
    /// when space is freed in it, made exact when a search of the whole bucket fails, and
    /// never too low (runs only shrink between), so a bucket it rules out has no fit.
    longest: Vec<u64>,
}

impl FreeMap {
    pub fn new(max_runs: usize) -> FreeMap {
        FreeMap::with_buckets(max_runs, 0)
    }

    /// A map whose searches within one `bucket`-block bucket skip buckets known to hold no
    /// run long enough (same answers as without).
    pub fn with_buckets(max_runs: usize, bucket: u64) -> FreeMap {
        FreeMap {
            runs: BTreeMap::new(),
            total: 0,
            max_runs: max_runs.max(1),
            bucket,
            longest: Vec::new(),
        }
    }

    /// `[s, e)` became free (as part of a run): raise its buckets' bounds.
    fn raise(&mut self, s: u64, e: u64) {
        if self.bucket == 0 || s >= e {
            return;
        }
        let (first, last) = (s / self.bucket, (e - 1) / self.bucket);
        let need = (last + 1) as usize;
        if self.longest.len() < need {
            self.longest.resize(need, 0);
        }
        for k in first..=last {
            let (lo, hi) = (k * self.bucket, (k + 1) * self.bucket);
            let len = e.min(hi) - s.max(lo);
            let slot = &mut self.longest[k as usize];
            *slot = (*slot).max(len);
        }
    }

    /// The bucket `[lo, hi)` lies in, if it lies in one.
    fn bucket_of(&self, lo: u64, hi: u64) -> Option<u64> {
        (self.bucket > 0 && hi > lo && lo / self.bucket == (hi - 1) / self.bucket)
            .then(|| lo / self.bucket)
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
        self.raise(s, e);
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
    ///
    /// With buckets, `[lo, hi)` inside one bucket is ruled out at once when the bucket's
    /// bound is below `len`, and a failed search sets the bound to the bucket's longest
    /// run.
    pub fn take(&mut self, lo: u64, hi: u64, from: u64, len: u64) -> Option<u64> {
        let bucket = self.bucket_of(lo, hi);
        if let Some(k) = bucket {
            if self.longest.get(k as usize).is_none_or(|&l| l < len) {
                return None;
            }
        }
        let from = from.clamp(lo, hi);
        let found = self
            .fit(from, hi, len)
            .or_else(|| self.fit(lo, from.saturating_add(len).min(hi), len));
        let Some((at, run_start, run_end)) = found else {
            if let Some(k) = bucket {
                let whole = self.longest_in(k * self.bucket, (k + 1) * self.bucket);
                self.longest[k as usize] = whole;
            }
            return None;
        };
        // Cut `[at, at + len)` out of the run it lies in, which `fit` found: no second
        // search.
        if at == run_start {
            self.runs.remove(&run_start);
        } else if let Some(e) = self.runs.get_mut(&run_start) {
            *e = at;
        }
        if run_end > at + len {
            self.runs.insert(at + len, run_end);
        }
        self.total -= len;
        Some(at)
    }

    /// The runs overlapping `[lo, hi)`, in order, unclipped (`lo < hi`).
    fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let first = self
            .runs
            .range(..=lo)
            .next_back()
            .filter(|(_, &e)| e > lo)
            .map(|(&s, &e)| (s, e));
        first
            .into_iter()
            .chain(self.runs.range(lo + 1..hi).map(|(&s, &e)| (s, e)))
    }

    /// The longest free run inside `[lo, hi)`, clipped to it.
    fn longest_in(&self, lo: u64, hi: u64) -> u64 {
        self.overlapping(lo, hi)
            .map(|(s, e)| e.min(hi) - s.max(lo))
            .max()
            .unwrap_or(0)
    }

    /// The first `len` free blocks inside `[lo, hi)`: where they start, and the run
    /// (start, end) they lie in.
    fn fit(&self, lo: u64, hi: u64, len: u64) -> Option<(u64, u64, u64)> {
        if lo >= hi {
            return None;
        }
        self.overlapping(lo, hi)
            .find(|&(s, e)| e.min(hi) >= s.max(lo) + len)
            .map(|(s, e)| (s.max(lo), s, e))
    }
}
