//! The replica table (thesis Sec. 5.4): original block → its replicas, last access time and
//! access count; every replica block → its original; replicas counted per disk region, so a
//! region can be invalidated at once.
//!
//! Indexed by block number through two paged arrays ([`BlockIndex`]) rather than hash maps:
//! FS2 looks a block up on every block a host reads or writes, the blocks of one request
//! are consecutive, and a table of millions of blocks kept in hash maps spent most of its
//! time in cache misses and rehashing (docs/benchmarks.md, FS2).

use super::config::MAX_DEGREE;
use wattio_core::block_index::BlockIndex;
use wattio_core::fxhash::FxHashMap;
use wattio_core::time::Nanos;

const DEG: usize = MAX_DEGREE as usize;

/// One replicated block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    orig: u64,
    reps: [u64; DEG],
    /// Replicas held; 0 marks a free slot.
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
    /// The entries, one per original with replicas; freed slots are reused.
    slots: Vec<Entry>,
    free_slots: Vec<u32>,
    /// Original block → its entry.
    by_orig: BlockIndex,
    /// Replica block → the entry of its original.
    by_rep: BlockIndex,
    /// Replica blocks held (blocks in `by_rep`).
    reps: usize,
    /// Region → how many replica blocks it holds.
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
        self.reps
    }

    pub fn is_empty(&self) -> bool {
        self.reps == 0
    }

    #[inline]
    pub fn get(&self, orig: u64) -> Option<&Entry> {
        self.by_orig.get(orig).map(|s| &self.slots[s as usize])
    }

    /// The original a replica block belongs to.
    pub fn original_of(&self, rep: u64) -> Option<u64> {
        self.by_rep.get(rep).map(|s| self.slots[s as usize].orig)
    }

    pub fn region_of(&self, block: u64) -> u32 {
        (block / self.region_blocks) as u32
    }

    /// Record a read of `orig` (a replica was chosen or not: the block was wanted);
    /// whether it has a replica.
    #[inline]
    pub fn touch(&mut self, orig: u64, now: Nanos) -> bool {
        let Some(s) = self.by_orig.get(orig) else {
            return false;
        };
        let e = &mut self.slots[s as usize];
        e.last_access = now;
        e.count = e.count.saturating_add(1);
        true
    }

    /// Add `rep` as a replica of `orig`; false if `orig` has `MAX_DEGREE` already. A block
    /// that is already one of `orig`'s replicas stays listed once; one held for another
    /// original moves to `orig` (the later record wins), so every listed replica is held by
    /// its entry and no entry lists a block it does not hold (a read redirected there could
    /// find it reused).
    pub fn add(&mut self, orig: u64, rep: u64, now: Nanos) -> bool {
        let held = self.by_rep.get(rep);
        if let Some(s) = self.by_orig.get(orig) {
            if held == Some(s) {
                return true;
            }
            if self.slots[s as usize].n as usize == DEG {
                return false;
            }
        }
        if held.is_some() {
            self.remove_replica(rep);
        }
        let s = match self.by_orig.get(orig) {
            Some(s) => s,
            None => {
                let e = Entry {
                    orig,
                    reps: [0; DEG],
                    n: 0,
                    last_access: now,
                    count: 0,
                };
                let s = match self.free_slots.pop() {
                    Some(s) => {
                        self.slots[s as usize] = e;
                        s
                    }
                    None => {
                        self.slots.push(e);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.by_orig.set(orig, s);
                s
            }
        };
        let e = &mut self.slots[s as usize];
        e.reps[e.n as usize] = rep;
        e.n += 1;
        self.by_rep.set(rep, s);
        self.reps += 1;
        let r = self.region_of(rep);
        *self.regions.entry(r).or_insert(0) += 1;
        true
    }

    /// Drop every replica of `orig`; returns their blocks.
    pub fn remove_original(&mut self, orig: u64, out: &mut Vec<u64>) {
        let Some(s) = self.by_orig.take(orig) else {
            return;
        };
        let e = self.slots[s as usize];
        self.free(s);
        for &r in e.replicas() {
            self.unlink(r);
            out.push(r);
        }
    }

    /// Drop the replica at block `rep`; returns its original.
    pub fn remove_replica(&mut self, rep: u64) -> Option<u64> {
        let s = self.by_rep.get(rep)?;
        self.unlink(rep);
        let e = &mut self.slots[s as usize];
        let orig = e.orig;
        if let Some(i) = e.replicas().iter().position(|&r| r == rep) {
            e.reps.copy_within(i + 1..e.n as usize, i);
            e.n -= 1;
        }
        if e.n == 0 {
            self.by_orig.take(orig);
            self.free(s);
        }
        Some(orig)
    }

    fn free(&mut self, s: u32) {
        self.slots[s as usize].n = 0;
        self.free_slots.push(s);
    }

    fn unlink(&mut self, rep: u64) {
        if self.by_rep.take(rep).is_none() {
            return;
        }
        self.reps -= 1;
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

    /// The replica blocks of region `r`, in order.
    pub fn region_replicas(&self, r: u32) -> Vec<u64> {
        if !self.regions.contains_key(&r) {
            return Vec::new();
        }
        let b0 = r as u64 * self.region_blocks;
        self.by_rep.blocks_in(b0, b0 + self.region_blocks).collect()
    }

    /// Live entries.
    fn entries(&self) -> impl Iterator<Item = (u32, &Entry)> {
        (0u32..).zip(&self.slots).filter(|(_, e)| e.n > 0)
    }

    /// Originals whose replicas are cold: not read since `before` and read fewer than
    /// `count` times.
    pub fn cold(&self, before: Nanos, count: u32) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .entries()
            .filter(|(_, e)| e.last_access < before && e.count < count)
            .map(|(_, e)| e.orig)
            .collect();
        v.sort_unstable();
        v
    }

    /// Every (original, replica) pair, sorted: what a persisted table holds.
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = Vec::with_capacity(self.reps);
        for (s, e) in self.entries() {
            for &r in e.replicas() {
                // Every listed replica is held by its entry ([`ReplicaTable::add`]).
                debug_assert_eq!(self.by_rep.get(r), Some(s), "replica {r}");
                v.push((e.orig, r));
            }
        }
        v.sort_unstable();
        v
    }

    /// The table's own invariants, for tests and the fuzz target: every listed replica is
    /// held by its entry, every held replica is listed once by the entry it points to, the
    /// counts agree. Returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let mut listed = 0usize;
        for (s, e) in self.entries() {
            if self.by_orig.get(e.orig) != Some(s) {
                return Err(format!("original {}: its entry is not indexed", e.orig));
            }
            for (i, &r) in e.replicas().iter().enumerate() {
                if self.by_rep.get(r) != Some(s) {
                    return Err(format!("original {}: replica {r} is not held", e.orig));
                }
                if e.replicas()[..i].contains(&r) {
                    return Err(format!("original {}: replica {r} listed twice", e.orig));
                }
                listed += 1;
            }
        }
        if listed != self.reps {
            return Err(format!("{listed} replicas listed, {} held", self.reps));
        }
        let by_region: u64 = self.regions.values().sum();
        if by_region != self.reps as u64 {
            return Err(format!(
                "{by_region} replicas by region, {} held",
                self.reps
            ));
        }
        Ok(())
    }
}
