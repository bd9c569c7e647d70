//! The replica table (thesis Sec. 5.4): original block → its replicas, last access time and
//! access count; every replica block → its original; replicas counted per disk region, so a
//! region can be invalidated at once.
//!
//! Indexed by block number through two paged arrays rather than hash maps: FS2 looks a
//! block up on every block a host reads or writes, the blocks of one request are
//! consecutive, and a table of millions of blocks kept in hash maps spent most of its time
//! in cache misses and rehashing (docs/benchmarks.md, FS2). A page of the arrays covers
//! `PAGE` consecutive blocks and is allocated when a block in it first gets an entry, so
//! memory follows the blocks replicated or holding replicas, not the disk's size.

use super::config::MAX_DEGREE;
use wattio_core::fxhash::FxHashMap;
use wattio_core::time::Nanos;

const DEG: usize = MAX_DEGREE as usize;

/// Blocks per page of an index (1 KiB of `u32`s, 1 MiB of disk), and pages per directory
/// (8 KiB of pointers, 1 GiB of disk): a disk of 20 TB needs 160 KB of directories at most.
const PAGE_SHIFT: u32 = 8;
const PAGE: usize = 1 << PAGE_SHIFT;
const DIR_SHIFT: u32 = 10;
const DIR: usize = 1 << DIR_SHIFT;

type Page = Box<[u32; PAGE]>;
type Dir = Box<[Option<Page>; DIR]>;

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

/// Block → slot number + 1 (0: none), in pages allocated on first use.
#[derive(Clone, Debug, Default)]
struct BlockIndex {
    dirs: Vec<Option<Dir>>,
}

impl BlockIndex {
    #[inline]
    fn page(&self, block: u64) -> Option<&Page> {
        let d = self
            .dirs
            .get((block >> (PAGE_SHIFT + DIR_SHIFT)) as usize)?;
        d.as_ref()?[(block >> PAGE_SHIFT) as usize & (DIR - 1)].as_ref()
    }

    #[inline]
    fn get(&self, block: u64) -> Option<u32> {
        let v = self.page(block)?[block as usize & (PAGE - 1)];
        (v != 0).then(|| v - 1)
    }

    fn set(&mut self, block: u64, slot: u32) {
        let d = (block >> (PAGE_SHIFT + DIR_SHIFT)) as usize;
        if d >= self.dirs.len() {
            self.dirs.resize_with(d + 1, || None);
        }
        let dir = self.dirs[d].get_or_insert_with(|| Box::new([const { None }; DIR]));
        let page = dir[(block >> PAGE_SHIFT) as usize & (DIR - 1)]
            .get_or_insert_with(|| Box::new([0; PAGE]));
        page[block as usize & (PAGE - 1)] = slot + 1;
    }

    /// Clear `block`; the slot it named.
    fn take(&mut self, block: u64) -> Option<u32> {
        let d = self
            .dirs
            .get_mut((block >> (PAGE_SHIFT + DIR_SHIFT)) as usize)?;
        let page = d.as_mut()?[(block >> PAGE_SHIFT) as usize & (DIR - 1)].as_mut()?;
        let v = std::mem::take(&mut page[block as usize & (PAGE - 1)]);
        (v != 0).then(|| v - 1)
    }

    /// Blocks of `b0..b1` with an entry, in order.
    fn blocks_in(&self, b0: u64, b1: u64) -> impl Iterator<Item = u64> + '_ {
        (b0..b1).filter(move |&b| self.get(b).is_some())
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

    /// Add `rep` as a replica of `orig`; false if `orig` has `MAX_DEGREE` already.
    pub fn add(&mut self, orig: u64, rep: u64, now: Nanos) -> bool {
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
        if e.n as usize == DEG {
            return false;
        }
        e.reps[e.n as usize] = rep;
        e.n += 1;
        let was = self.by_rep.get(rep);
        self.by_rep.set(rep, s);
        if was.is_none() {
            self.reps += 1;
            let r = self.region_of(rep);
            *self.regions.entry(r).or_insert(0) += 1;
        }
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
                // A block added twice is listed in its entry twice but held once; a block
                // re-added for another original belongs to that one.
                if self.by_rep.get(r) == Some(s) {
                    v.push((e.orig, r));
                }
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}
