//! The page allocator model: physical pages per rank (each rank its own free list, the
//! order-0 level of a per-rank buddy allocator: the model only ever allocates single pages,
//! at first touch), and the per-process page tables.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiplicative hashing of page numbers: the page table is looked up on every access
/// that misses the one-entry TLB, and SipHash would cost more than the rest of the access.
#[derive(Default)]
pub struct PageHasher(u64);

impl Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}

pub type PageTable = HashMap<u64, u64, BuildHasherDefault<PageHasher>>;
/// Accesses per physical page (traffic reshaping's counters).
pub type PageCounts = HashMap<u64, u32, BuildHasherDefault<PageHasher>>;

/// Free physical pages, per rank. A page number is `rank * pages_per_rank + index`.
pub struct Frames {
    pub pages_per_rank: u64,
    /// Pages never handed out yet start at this index in each rank.
    fresh: Vec<u64>,
    /// Pages given back, reused first (LIFO, as the buddy allocator's hot list).
    freed: Vec<Vec<u64>>,
    free: Vec<u64>,
}

impl Frames {
    pub fn new(ranks: usize, pages_per_rank: u64) -> Frames {
        Frames {
            pages_per_rank,
            fresh: vec![0; ranks],
            freed: vec![Vec::new(); ranks],
            free: vec![pages_per_rank; ranks],
        }
    }

    /// Free pages per rank.
    pub fn free(&self) -> &[u64] {
        &self.free
    }

    pub fn rank_of(&self, page: u64) -> usize {
        (page / self.pages_per_rank) as usize
    }

    /// A page from rank `r`, if it has one.
    pub fn alloc(&mut self, r: usize) -> Option<u64> {
        if self.free[r] == 0 {
            return None;
        }
        self.free[r] -= 1;
        let idx = match self.freed[r].pop() {
            Some(i) => i,
            None => {
                let i = self.fresh[r];
                self.fresh[r] += 1;
                i
            }
        };
        Some(r as u64 * self.pages_per_rank + idx)
    }

    pub fn release(&mut self, page: u64) {
        let r = self.rank_of(page);
        self.free[r] += 1;
        self.freed[r].push(page % self.pages_per_rank);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_come_from_their_rank_and_are_reused() {
        let mut f = Frames::new(2, 3);
        assert_eq!(f.alloc(1), Some(3));
        assert_eq!(f.alloc(1), Some(4));
        assert_eq!(f.alloc(0), Some(0));
        assert_eq!(f.free(), &[2, 1]);
        f.release(3);
        assert_eq!(f.free(), &[2, 2]);
        assert_eq!(f.alloc(1), Some(3));
        assert_eq!(f.alloc(1), Some(5));
        assert_eq!(f.alloc(1), None);
        assert_eq!(f.rank_of(5), 1);
    }
}
