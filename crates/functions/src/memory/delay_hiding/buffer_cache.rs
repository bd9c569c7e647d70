//! The OS buffer cache of the delay-hiding paper: 4 KB buffers laid over the DRAM ranks,
//! free buffers handed out sequentially (a rank is filled before the next), LRU
//! replacement once every buffer holds a block. It answers the one question the rank
//! manager asks: on which rank is this block of this file?

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A block of a file: (file id, block number in the file).
pub type BlockKey = (u32, u64);

const NIL: u32 = u32::MAX;

/// Where a block was found or put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// In the cache, on this rank.
    Hit { rank: usize },
    /// Not in the cache: placed on `rank`, evicting `evicted` (its file and rank) if the
    /// cache was full.
    Miss {
        rank: usize,
        evicted: Option<(u32, usize)>,
    },
}

impl Lookup {
    #[inline]
    pub fn rank(self) -> usize {
        match self {
            Lookup::Hit { rank } | Lookup::Miss { rank, .. } => rank,
        }
    }
}

/// A multiplicative hash for block keys: the default SipHash costs more than the rest
/// of a call's model, and keys come from a trace, not from an adversary on a network.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub struct BufferCache {
    blocks_per_rank: u32,
    ranks: usize,
    map: HashMap<BlockKey, u32, BuildHasherDefault<KeyHasher>>,
    /// Per buffer: the block it holds (valid once handed out).
    key: Vec<BlockKey>,
    /// LRU list over buffers: `head` most recent, `tail` least.
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
    /// Buffers handed out so far; buffer `i` is on rank `i / blocks_per_rank`.
    used: u32,
    pub hits: u64,
    pub misses: u64,
}

impl BufferCache {
    /// A cache of `ranks` ranks of `blocks_per_rank` buffers each.
    pub fn new(ranks: usize, blocks_per_rank: u32) -> Result<BufferCache, String> {
        let total = u64::from(blocks_per_rank) * ranks as u64;
        if blocks_per_rank == 0 || ranks == 0 || total >= u64::from(NIL) {
            return Err(format!(
                "buffer cache: expected 1..{} buffers in all, got {ranks} ranks x {blocks_per_rank}",
                NIL
            ));
        }
        Ok(BufferCache {
            blocks_per_rank,
            ranks,
            map: HashMap::default(),
            key: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            head: NIL,
            tail: NIL,
            used: 0,
            hits: 0,
            misses: 0,
        })
    }

    pub fn ranks(&self) -> usize {
        self.ranks
    }

    #[inline]
    fn rank_of(&self, buf: u32) -> usize {
        (buf / self.blocks_per_rank) as usize
    }

    #[inline]
    fn unlink(&mut self, b: u32) {
        let (p, n) = (self.prev[b as usize], self.next[b as usize]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
    }

    #[inline]
    fn push_front(&mut self, b: u32) {
        self.prev[b as usize] = NIL;
        self.next[b as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = b;
        }
        self.head = b;
        if self.tail == NIL {
            self.tail = b;
        }
    }

    /// Look `key` up; on a miss, place it in the next free buffer or in the least
    /// recently used one. Either way the block becomes the most recently used.
    #[inline]
    pub fn access(&mut self, key: BlockKey) -> Lookup {
        if let Some(&b) = self.map.get(&key) {
            self.hits += 1;
            if self.head != b {
                self.unlink(b);
                self.push_front(b);
            }
            return Lookup::Hit {
                rank: self.rank_of(b),
            };
        }
        self.misses += 1;
        let capacity = self.blocks_per_rank * self.ranks as u32;
        let (b, evicted) = if self.used < capacity {
            let b = self.used;
            self.used += 1;
            self.key.push(key);
            self.prev.push(NIL);
            self.next.push(NIL);
            (b, None)
        } else {
            let b = self.tail;
            self.unlink(b);
            let old = self.key[b as usize];
            self.map.remove(&old);
            self.key[b as usize] = key;
            (b, Some((old.0, self.rank_of(b))))
        };
        self.map.insert(key, b);
        self.push_front(b);
        Lookup::Miss {
            rank: self.rank_of(b),
            evicted,
        }
    }

    /// The rank holding `key`, without touching recency.
    pub fn rank_of_block(&self, key: BlockKey) -> Option<usize> {
        self.map.get(&key).map(|&b| self.rank_of(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_buffers_fill_a_rank_before_the_next() {
        let mut c = BufferCache::new(3, 2).unwrap();
        let ranks: Vec<usize> = (0..6).map(|i| c.access((7, i)).rank()).collect();
        assert_eq!(ranks, [0, 0, 1, 1, 2, 2]);
        assert_eq!((c.hits, c.misses), (0, 6));
        assert_eq!(c.access((7, 3)), Lookup::Hit { rank: 1 });
    }

    #[test]
    fn lru_replacement_reuses_the_least_recent_buffer_and_its_rank() {
        let mut c = BufferCache::new(2, 2).unwrap();
        for i in 0..4 {
            c.access((1, i)); // blocks 0,1 on rank 0; 2,3 on rank 1
        }
        // Touch block 0: block 1 (rank 0) is now the least recent.
        assert_eq!(c.access((1, 0)), Lookup::Hit { rank: 0 });
        assert_eq!(
            c.access((2, 0)),
            Lookup::Miss {
                rank: 0,
                evicted: Some((1, 0))
            }
        );
        assert_eq!(c.rank_of_block((1, 1)), None);
        // Next victim: block 2 on rank 1.
        assert_eq!(
            c.access((2, 1)),
            Lookup::Miss {
                rank: 1,
                evicted: Some((1, 1))
            }
        );
        assert_eq!(c.rank_of_block((1, 2)), None);
        assert_eq!(c.rank_of_block((1, 3)), Some(1));
        assert_eq!(c.rank_of_block((1, 0)), Some(0));
        assert_eq!((c.hits, c.misses), (1, 6));
    }

    #[test]
    fn a_cache_of_no_buffers_is_refused() {
        assert!(BufferCache::new(0, 4).is_err());
        assert!(BufferCache::new(4, 0).is_err());
    }
}
