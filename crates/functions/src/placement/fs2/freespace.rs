//! What FS2 knows to be free on the disk: extents of 4 KiB blocks, learned from discards
//! (and an ext2/3/4 image's bitmaps at start), lost to writes.
//!
//! Replicas may only go where the file system holds no data. A block layer cannot see the
//! file system's allocation, so it believes a block free from the moment it is discarded
//! (or a bitmap says so) until the host writes it.
//!
//! The extents are kept per bucket (FS2's region, or a few small regions together): each
//! bucket holds the pieces of the runs inside it, clipped to it, in address order in one
//! vector. Every operation FS2 makes on the map stays inside one bucket — a host write's blocks, a replica's allocation in one
//! region — so it is a binary search and a scan of one contiguous array, where one ordered
//! tree of all the disk's runs cost a descent of several nodes for each (session 48:
//! 120,000 runs after a million requests of the benchmark).

/// Disjoint, non-adjacent extents `[start, end)` of blocks, with their total.
#[derive(Clone, Debug, Default)]
pub struct FreeMap {
    /// Per bucket, the free runs inside it clipped to it, in order: disjoint and non-adjacent
    /// within the bucket (a run across a bucket boundary is a piece in each bucket).
    pieces: Vec<Vec<(u64, u64)>>,
    /// Blocks per bucket (`u64::MAX`: the whole map is one bucket): FS2's region, or a
    /// power-of-two number of regions when regions are small (at least [`MIN_BUCKET`]
    /// blocks), so that a vector a bucket does not cost more than the runs it holds.
    bucket: u64,
    /// Blocks per region, and log2 of the regions per bucket ([`take_in`](FreeMap::take_in)).
    region: u64,
    region_shift: u32,
    /// Whether `take` may rule a bucket out by its bound (the map was built with buckets).
    bounded: bool,
    total: u64,
    /// Maximal runs: the pieces, less those that continue the previous bucket's last one.
    runs: usize,
    /// At most this many extents are remembered; space beyond it is forgotten (never
    /// believed free), which is always safe.
    max_runs: usize,
    /// Per bucket, an upper bound on its longest free run (clipped to the bucket): raised
    /// when space is freed in it, made exact (from all its pieces) when a search in it fails,
    /// and
    /// never too low (runs only shrink between), so a bucket it rules out has no fit.
    longest: Vec<u64>,
}

/// The fewest blocks a bucket holds (16 MiB): with FS2's smallest regions (`region_mb`
/// down to one block) a bucket a region would be a vector per block of the disk.
pub const MIN_BUCKET: u64 = 4096;

impl FreeMap {
    pub fn new(max_runs: usize) -> FreeMap {
        FreeMap::with_buckets(max_runs, 0)
    }

    /// A map over regions of `region` blocks, whose searches within one bucket (a region,
    /// or several small ones: [`MIN_BUCKET`]) skip buckets known to hold no run long enough
    /// (same answers as without).
    pub fn with_buckets(max_runs: usize, region: u64) -> FreeMap {
        FreeMap::with_min_bucket(max_runs, region, MIN_BUCKET)
    }

    /// [`with_buckets`](FreeMap::with_buckets) with buckets of at least `min_bucket` blocks.
    pub fn with_min_bucket(max_runs: usize, region: u64, min_bucket: u64) -> FreeMap {
        let mut region_shift = 0;
        while region > 0
            && (region << region_shift) < min_bucket
            && region.leading_zeros() > region_shift + 1
        {
            region_shift += 1;
        }
        FreeMap {
            pieces: Vec::new(),
            bucket: if region == 0 {
                u64::MAX
            } else {
                region << region_shift
            },
            region: if region == 0 { u64::MAX } else { region },
            region_shift,
            bounded: region > 0,
            total: 0,
            runs: 0,
            max_runs: max_runs.max(1),
            longest: Vec::new(),
        }
    }

    fn bucket_of_block(&self, b: u64) -> usize {
        (b / self.bucket) as usize
    }

    /// Bucket `k`'s blocks `[start, end)`.
    fn bounds(&self, k: usize) -> (u64, u64) {
        let lo = (k as u64).saturating_mul(self.bucket);
        (lo, lo.saturating_add(self.bucket))
    }

    fn bucket(&self, k: usize) -> &[(u64, u64)] {
        self.pieces.get(k).map_or(&[], |v| v.as_slice())
    }

    fn bucket_mut(&mut self, k: usize) -> &mut Vec<(u64, u64)> {
        if self.pieces.len() <= k {
            self.pieces.resize_with(k + 1, Vec::new);
        }
        &mut self.pieces[k]
    }

    /// Bucket `k`'s pieces, and whether its first starts at the bucket's start and its last
    /// ends at the bucket's end (where a piece may continue a neighbour's).
    fn edges(&self, k: usize) -> (usize, bool, bool) {
        let (lo, hi) = self.bounds(k);
        let v = self.bucket(k);
        (
            v.len(),
            v.first().is_some_and(|&(s, _)| s == lo),
            v.last().is_some_and(|&(_, e)| e == hi),
        )
    }

    /// `runs` after bucket `k` changed from `was` ([`edges`](FreeMap::edges) before) to what
    /// it holds now: its change in pieces, less the joins with a neighbour it made or broke.
    /// A neighbour is looked at only where the bucket's own edge changed.
    fn recount(&mut self, k: usize, was: (usize, bool, bool)) {
        let now = self.edges(k);
        let mut runs = self.runs as isize + now.0 as isize - was.0 as isize;
        if now.1 != was.1 && k > 0 && self.edges(k - 1).2 {
            runs -= now.1 as isize - was.1 as isize;
        }
        if now.2 != was.2 && self.edges(k + 1).1 {
            runs -= now.2 as isize - was.2 as isize;
        }
        self.runs = runs as usize;
    }

    /// Blocks believed free.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn runs(&self) -> usize {
        self.runs
    }

    pub fn is_free(&self, b: u64) -> bool {
        let v = self.bucket(self.bucket_of_block(b));
        let i = v.partition_point(|&(_, e)| e <= b);
        v.get(i).is_some_and(|&(s, _)| s <= b)
    }

    /// The extents, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut pieces = self.pieces.iter().flatten().copied().peekable();
        std::iter::from_fn(move || {
            let (s, mut e) = pieces.next()?;
            while let Some(&(s2, e2)) = pieces.peek() {
                if s2 != e {
                    break;
                }
                e = e2;
                pieces.next();
            }
            Some((s, e))
        })
    }

    /// Whether some extent overlaps or touches `[start, end]`.
    fn touches(&self, start: u64, end: u64) -> bool {
        let (k0, k1) = (
            self.bucket_of_block(start.saturating_sub(1)),
            self.bucket_of_block(end),
        );
        (k0..=k1.min(self.pieces.len().saturating_sub(1))).any(|k| {
            let v = self.bucket(k);
            let i = v.partition_point(|&(_, e)| e < start);
            v.get(i).is_some_and(|&(s, _)| s <= end)
        })
    }

    /// `[start, end)` is free (merged with what it touches). Returns the blocks added.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        if self.runs >= self.max_runs && !self.touches(start, end) {
            // A new extent past the bound: forgotten (never believed free), always safe.
            return 0;
        }
        let before = self.total;
        let (k0, k1) = (self.bucket_of_block(start), self.bucket_of_block(end - 1));
        for k in k0..=k1 {
            let (lo, hi) = self.bounds(k);
            let (s, e) = (start.max(lo), end.min(hi));
            let was = self.edges(k);
            let v = self.bucket_mut(k);
            // The pieces it overlaps or touches: they merge into one.
            let i = v.partition_point(|&(_, pe)| pe < s);
            let j = i + v[i..].iter().take_while(|&&(ps, _)| ps <= e).count();
            let (mut ns, mut ne) = (s, e);
            let mut had = 0;
            for &(ps, pe) in &v[i..j] {
                ns = ns.min(ps);
                ne = ne.max(pe);
                had += pe - ps;
            }
            if j == i {
                v.insert(i, (ns, ne));
            } else {
                v[i] = (ns, ne);
                v.drain(i + 1..j);
            }
            self.total += (ne - ns) - had;
            self.recount(k, was);
            if self.bounded {
                if self.longest.len() <= k {
                    self.longest.resize(k + 1, 0);
                }
                self.longest[k] = self.longest[k].max(ne - ns);
            }
        }
        self.total - before
    }

    /// `[start, end)` is not free. Returns the blocks removed.
    pub fn remove(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        let before = self.total;
        let k0 = self.bucket_of_block(start);
        // Most writes lie in one bucket: no second division.
        let k1 = if end - start <= self.bounds(k0).1 - start {
            k0
        } else {
            self.bucket_of_block(end - 1)
        };
        for k in k0..=k1.min(self.pieces.len().saturating_sub(1)) {
            let (lo, hi) = self.bounds(k);
            let (s, e) = (start.max(lo), end.min(hi));
            let v = self.bucket(k);
            // The pieces overlapping [s, e): none when the write lands in used space (the
            // common case): one binary search.
            let i = v.partition_point(|&(_, pe)| pe <= s);
            // A scan, not a second search: the pieces after `i` it reaches are the ones it
            // cuts (none, for a write to used space), and `v[i]` is already in cache.
            let j = i + v[i..].iter().take_while(|&&(ps, _)| ps < e).count();
            if i == j {
                continue;
            }
            let was = self.edges(k);
            let v = &mut self.pieces[k];
            let (first, last) = (v[i].0, v[j - 1].1);
            let had: u64 = v[i..j].iter().map(|&(ps, pe)| pe - ps).sum();
            let left = (first < s).then_some((first, s));
            let right = (last > e).then_some((e, last));
            // What is left of the pieces [i, j): nothing, one remainder, or both (a split).
            match (left, right) {
                (Some(l), Some(r)) if j == i + 1 => {
                    v[i] = l;
                    v.insert(i + 1, r);
                }
                (Some(l), Some(r)) => {
                    v[i] = l;
                    v[i + 1] = r;
                    v.drain(i + 2..j);
                }
                (Some(p), None) | (None, Some(p)) => {
                    v[i] = p;
                    v.drain(i + 1..j);
                }
                (None, None) => {
                    v.drain(i..j);
                }
            }
            self.total -= had;
            self.total += left.map_or(0, |(a, b)| b - a) + right.map_or(0, |(a, b)| b - a);
            self.recount(k, was);
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
        if lo >= hi || len == 0 {
            return None;
        }
        let k = self.bucket_of_block(lo);
        let inside = self.bucket_of_block(hi - 1) == k;
        if self.bounded && inside && self.ruled_out(k, len) {
            return None;
        }
        self.search(k, inside, lo, hi, from, len)
    }

    /// [`take`](FreeMap::take) over the whole of region `r`: the same answer, and no
    /// division to find its bucket — FS2 asks up to 64 regions for each replica while its
    /// target is full, and most are ruled out by their bucket's bound alone.
    #[inline]
    pub fn take_in(&mut self, r: usize, from: u64, len: u64) -> Option<u64> {
        let k = r >> self.region_shift;
        if len == 0 || (self.bounded && self.ruled_out(k, len)) {
            return None;
        }
        let lo = (r as u64).saturating_mul(self.region);
        self.search(k, true, lo, lo.saturating_add(self.region), from, len)
    }

    /// Bucket `k` holds no run of `len` blocks, by its bound.
    #[inline]
    fn ruled_out(&self, k: usize, len: u64) -> bool {
        self.longest.get(k).is_none_or(|&l| l < len)
    }

    /// `take`'s search of `[lo, hi)`, which lies in bucket `k` when `inside`.
    fn search(
        &mut self,
        k: usize,
        inside: bool,
        lo: u64,
        hi: u64,
        from: u64,
        len: u64,
    ) -> Option<u64> {
        let from = from.clamp(lo, hi);
        let found = self
            .fit(from, hi, len)
            .or_else(|| self.fit(lo, from.saturating_add(len).min(hi), len));
        let Some(at) = found else {
            if self.bounded && inside {
                let whole = self.bucket(k).iter().map(|&(s, e)| e - s).max();
                self.longest[k] = whole.unwrap_or(0);
            }
            return None;
        };
        self.remove(at, at + len);
        Some(at)
    }

    /// The first `len` free blocks inside `[lo, hi)`: where they start.
    fn fit(&self, lo: u64, hi: u64, len: u64) -> Option<u64> {
        if lo >= hi {
            return None;
        }
        // The extents overlapping [lo, hi), clipped to it; pieces that meet at a bucket
        // boundary are one extent.
        let (mut run_s, mut run_e) = (0, 0);
        for k in self.bucket_of_block(lo)..=self.bucket_of_block(hi - 1) {
            let v = self.bucket(k);
            let i = v.partition_point(|&(_, e)| e <= lo);
            for &(s, e) in &v[i..] {
                if s >= hi {
                    break;
                }
                let (s, e) = (s.max(lo), e.min(hi));
                if s == run_e && run_e > run_s {
                    run_e = e;
                } else {
                    (run_s, run_e) = (s, e);
                }
                if run_e - run_s >= len {
                    return Some(run_s);
                }
            }
            if k + 1 >= self.pieces.len() {
                break;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-block regions (`region_mb` at its floor) on an 80 GB disk declared free: the map
    /// holds a vector for every 4,096 blocks, not one for each of 20 million regions, and
    /// asks a region by number as before.
    #[test]
    fn small_regions_share_a_bucket() {
        let blocks = 20_000_000;
        let mut m = FreeMap::with_buckets(1 << 20, 1);
        assert_eq!(m.insert(0, blocks), blocks);
        assert_eq!(m.bucket, MIN_BUCKET);
        assert_eq!(m.pieces.len() as u64, blocks.div_ceil(MIN_BUCKET));
        assert_eq!((m.runs(), m.total()), (1, blocks));
        assert_eq!(m.take_in(123_456, 0, 1), Some(123_456));
        assert_eq!(m.take_in(123_456, 0, 1), None, "taken");
        assert_eq!(
            m.take_in(123_457, 0, 2),
            None,
            "a region of one block holds no two"
        );
        assert_eq!((m.runs(), m.total()), (2, blocks - 1));
        assert!(!m.is_free(123_456) && m.is_free(123_455) && m.is_free(123_457));
    }
}
