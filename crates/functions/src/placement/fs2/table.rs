//! The replica table (thesis Sec. 5.4): original block → its replicas, last access time and
//! access count; every replica block → its original; replicas linked per disk region, so a
//! region can be invalidated at once.

use super::config::MAX_DEGREE;
use wattio_core::fxhash::FxHashMap;
use wattio_core::time::Nanos;

const DEG: usize = MAX_DEGREE as usize;

/// One replicated block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    reps: [u64; DEG],
    n: u8,
    pub last_access: Nanos,
    pub count: u32,
}

impl Entry {
    pub fn replicas(&self) -> &[u64] {
        &self.reps[..self.n as usize]
    }
}

#[derive(Clone, Debug, Default)]
pub struct ReplicaTable {
    by_orig: FxHashMap<u64, Entry>,
    /// Replica block → original block.
    by_rep: FxHashMap<u64, u64>,
    /// Region → how many replica blocks it holds (its blocks are found by a scan of
    /// `by_rep`, needed only when a whole region is invalidated: a set per region cost a
    /// third hash-table insert and remove per replica block).
    regions: FxHashMap<u32, u64>,
    region_blocks: u64,
}

impl ReplicaTable {
    pub fn new(region_blocks: u64) -> ReplicaTable {
        ReplicaTable {
            region_blocks: region_blocks.max(1),
            ..ReplicaTable::default()
        }
    }

    /// Replica blocks held.
    pub fn len(&self) -> usize {
        self.by_rep.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_rep.is_empty()
    }

    pub fn get(&self, orig: u64) -> Option<&Entry> {
        self.by_orig.get(&orig)
    }

    /// The original a replica block belongs to.
    pub fn original_of(&self, rep: u64) -> Option<u64> {
        self.by_rep.get(&rep).copied()
    }

    pub fn region_of(&self, block: u64) -> u32 {
        (block / self.region_blocks) as u32
    }

    /// Record a read of `orig` (a replica was chosen or not: the block was wanted);
    /// whether it has a replica.
    pub fn touch(&mut self, orig: u64, now: Nanos) -> bool {
        if let Some(e) = self.by_orig.get_mut(&orig) {
            e.last_access = now;
            e.count = e.count.saturating_add(1);
            return true;
        }
        false
    }

    /// Add `rep` as a replica of `orig`; false if `orig` has `MAX_DEGREE` already.
    pub fn add(&mut self, orig: u64, rep: u64, now: Nanos) -> bool {
        let e = self.by_orig.entry(orig).or_insert(Entry {
            reps: [0; DEG],
            n: 0,
            last_access: now,
            count: 0,
        });
        if e.n as usize == DEG {
            return false;
        }
        e.reps[e.n as usize] = rep;
        e.n += 1;
        if self.by_rep.insert(rep, orig).is_none() {
            let r = self.region_of(rep);
            *self.regions.entry(r).or_insert(0) += 1;
        }
        true
    }

    /// Drop every replica of `orig`; returns their blocks.
    pub fn remove_original(&mut self, orig: u64, out: &mut Vec<u64>) {
        if let Some(e) = self.by_orig.remove(&orig) {
            for &r in e.replicas() {
                self.unlink(r);
                out.push(r);
            }
        }
    }

    /// Drop the replica at block `rep`; returns its original.
    pub fn remove_replica(&mut self, rep: u64) -> Option<u64> {
        let orig = self.by_rep.get(&rep).copied()?;
        self.unlink(rep);
        if let Some(e) = self.by_orig.get_mut(&orig) {
            if let Some(i) = e.replicas().iter().position(|&r| r == rep) {
                e.reps.copy_within(i + 1..e.n as usize, i);
                e.n -= 1;
            }
            if e.n == 0 {
                self.by_orig.remove(&orig);
            }
        }
        Some(orig)
    }

    fn unlink(&mut self, rep: u64) {
        if self.by_rep.remove(&rep).is_none() {
            return;
        }
        let r = self.region_of(rep);
        if let Some(n) = self.regions.get_mut(&r) {
            *n -= 1;
            if *n == 0 {
                self.regions.remove(&r);
            }
        }
    }

    /// The region holding the most replicas (bulk invalidation starts there).
    pub fn fullest_region(&self) -> Option<u32> {
        self.regions
            .iter()
            .max_by_key(|(r, n)| (**n, std::cmp::Reverse(**r)))
            .map(|(&r, _)| r)
    }

    /// The replica blocks of region `r`.
    pub fn region_replicas(&self, r: u32) -> Vec<u64> {
        if !self.regions.contains_key(&r) {
            return Vec::new();
        }
        let mut v: Vec<u64> = self
            .by_rep
            .keys()
            .copied()
            .filter(|&b| self.region_of(b) == r)
            .collect();
        v.sort_unstable();
        v
    }

    /// Originals whose replicas are cold: not read since `before` and read fewer than
    /// `count` times.
    pub fn cold(&self, before: Nanos, count: u32) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .by_orig
            .iter()
            .filter(|(_, e)| e.last_access < before && e.count < count)
            .map(|(&o, _)| o)
            .collect();
        v.sort_unstable();
        v
    }

    /// Every (original, replica) pair, sorted: what a persisted table holds.
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.by_rep.iter().map(|(&r, &o)| (o, r)).collect();
        v.sort_unstable();
        v
    }
}
