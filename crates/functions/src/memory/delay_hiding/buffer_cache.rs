//! The OS buffer cache of the delay-hiding paper: 4 KB buffers laid over the DRAM ranks,
//! free buffers handed out sequentially (a rank is filled before the next), LRU
//! replacement once every buffer holds a block. It answers the one question the rank
//! manager asks: on which rank is this block of this file?

/// A block of a file: (file id, block number in the file).
pub type BlockKey = (u32, u64);

const NIL: u32 = u32::MAX;

/// Where a block was found or put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// In the cache, on this rank.
    Hit { rank: usize },
    /// Not in the cache: placed on `rank`, evicting `evicted` (its file, block and rank)
    /// if the cache was full.
    Miss {
        rank: usize,
        evicted: Option<(u32, u64, usize)>,
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

/// The hash of a block key: multiplicative (the default SipHash costs more than the rest of
/// a call's model, and keys come from a trace, not from an adversary on a network). Its
/// high half is the well-mixed part of a multiply: the index uses it.
#[inline]
fn hash(file: u32, block: u64) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    ((u64::from(file).wrapping_mul(K).rotate_left(5)) ^ block).wrapping_mul(K)
}

/// Block key → buffer, open addressing: a slot is 8 bytes, the key's hash's high 32 bits
/// (its tag; their low bits pick the home slot) and the buffer number + 1 (0: empty). The
/// key itself is read from the buffer, which a hit touches anyway for its LRU move. At most
/// half full, so ~1 M buffers take 16 MB of slots, against 48 MB for a general hash map of
/// 24-byte entries: the slot a lookup misses on is more often in the last-level cache.
/// Linear probing; removal shifts the run after the slot back (no tombstones).
struct Index {
    slots: Vec<u64>,
    len: usize,
}

impl Index {
    fn new() -> Index {
        Index {
            slots: vec![0; 1024],
            len: 0,
        }
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `key`, if any.
    #[inline]
    fn find(&self, file: u32, block: u64, bufs: &[Buffer]) -> Option<usize> {
        let tag = hash(file, block) >> 32;
        let mask = self.mask();
        let mut i = tag as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> 32 == tag {
                let b = &bufs[(s as u32 - 1) as usize];
                if b.file == file && b.block == block {
                    return Some(i);
                }
            }
            i = (i + 1) & mask;
        }
    }

    #[inline]
    fn buffer(&self, slot: usize) -> u32 {
        self.slots[slot] as u32 - 1
    }

    /// Add buffer `b`, which holds a key not in the index.
    fn insert(&mut self, b: u32, bufs: &[Buffer]) {
        if (self.len + 1) * 2 > self.slots.len() && self.slots.len() < 1 << 32 {
            self.grow();
        }
        let tag = hash(bufs[b as usize].file, bufs[b as usize].block) >> 32;
        self.put(tag << 32 | (u64::from(b) + 1));
        self.len += 1;
    }

    #[inline]
    fn put(&mut self, slot: u64) {
        let mask = self.mask();
        let mut i = (slot >> 32) as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        for s in old.into_iter().filter(|&s| s != 0) {
            self.put(s);
        }
    }

    /// Empty slot `i` and move later entries of its run back, so that every entry stays
    /// reachable from its home slot without passing an empty one.
    fn remove_at(&mut self, mut i: usize) {
        let mask = self.mask();
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let home = (s >> 32) as usize & mask;
            // `s` may fill the hole at `i` if its home is not in (i, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = s;
                i = j;
            }
        }
        self.slots[i] = 0;
        self.len -= 1;
    }
}

/// A buffer: the block it holds and its neighbours in the LRU list, side by side so that
/// a hit's move to the front touches one cache line of it (with ~1 M buffers every
/// buffer's line is a cache miss; the list's links in arrays of their own were two more).
#[derive(Clone, Copy)]
struct Buffer {
    file: u32,
    prev: u32,
    next: u32,
    block: u64,
}

pub struct BufferCache {
    blocks_per_rank: u32,
    ranks: usize,
    index: Index,
    /// Per buffer handed out, in order: its block and LRU links (`head` most recent, `tail`
    /// least). Buffer `i` is on rank `i / blocks_per_rank`.
    bufs: Vec<Buffer>,
    head: u32,
    tail: u32,
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
            index: Index::new(),
            bufs: Vec::new(),
            head: NIL,
            tail: NIL,
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
        let Buffer {
            prev: p, next: n, ..
        } = self.bufs[b as usize];
        if p == NIL {
            self.head = n;
        } else {
            self.bufs[p as usize].next = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.bufs[n as usize].prev = p;
        }
    }

    #[inline]
    fn push_front(&mut self, b: u32) {
        let head = self.head;
        let buf = &mut self.bufs[b as usize];
        buf.prev = NIL;
        buf.next = head;
        if head != NIL {
            self.bufs[head as usize].prev = b;
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
        if let Some(slot) = self.index.find(key.0, key.1, &self.bufs) {
            let b = self.index.buffer(slot);
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
        // Buffers are handed out in order: the next free one is the count handed out.
        let (b, evicted) = if (self.bufs.len() as u32) < capacity {
            let b = self.bufs.len() as u32;
            self.bufs.push(Buffer {
                file: key.0,
                prev: NIL,
                next: NIL,
                block: key.1,
            });
            (b, None)
        } else {
            let b = self.tail;
            self.unlink(b);
            let old = &self.bufs[b as usize];
            let (file, block) = (old.file, old.block);
            let slot = self
                .index
                .find(file, block, &self.bufs)
                .expect("a cached block");
            self.index.remove_at(slot);
            let buf = &mut self.bufs[b as usize];
            (buf.file, buf.block) = key;
            (b, Some((file, block, self.rank_of(b))))
        };
        self.index.insert(b, &self.bufs);
        self.push_front(b);
        Lookup::Miss {
            rank: self.rank_of(b),
            evicted,
        }
    }

    /// The rank holding `key`, without touching recency.
    pub fn rank_of_block(&self, key: BlockKey) -> Option<usize> {
        self.index
            .find(key.0, key.1, &self.bufs)
            .map(|slot| self.rank_of(self.index.buffer(slot)))
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
                evicted: Some((1, 1, 0))
            }
        );
        assert_eq!(c.rank_of_block((1, 1)), None);
        // Next victim: block 2 on rank 1.
        assert_eq!(
            c.access((2, 1)),
            Lookup::Miss {
                rank: 1,
                evicted: Some((1, 2, 1))
            }
        );
        assert_eq!(c.rank_of_block((1, 2)), None);
        assert_eq!(c.rank_of_block((1, 3)), Some(1));
        assert_eq!(c.rank_of_block((1, 0)), Some(0));
        assert_eq!((c.hits, c.misses), (1, 6));
    }

    /// The cache against a plain LRU (a map and a recency-ordered list) under a skewed
    /// random stream long enough to evict, grow the index and shift its runs back.
    #[test]
    fn every_lookup_agrees_with_a_plain_lru() {
        use std::collections::{HashMap, VecDeque};
        let (ranks, per_rank) = (3usize, 700u32);
        let mut c = BufferCache::new(ranks, per_rank).unwrap();
        let mut where_: HashMap<BlockKey, usize> = HashMap::new();
        let mut lru: VecDeque<BlockKey> = VecDeque::new();
        let mut next_free = 0u32;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few files, blocks skewed toward small numbers: hits and misses both.
            let key = ((x % 7) as u32, (x >> 8) % (1 + (x >> 40) % 3000));
            let got = c.access(key);
            let want = if let Some(&b) = where_.get(&key) {
                let at = lru.iter().position(|k| *k == key).unwrap();
                lru.remove(at);
                lru.push_front(key);
                Lookup::Hit {
                    rank: b / per_rank as usize,
                }
            } else if next_free < per_rank * ranks as u32 {
                let b = next_free as usize;
                next_free += 1;
                where_.insert(key, b);
                lru.push_front(key);
                Lookup::Miss {
                    rank: b / per_rank as usize,
                    evicted: None,
                }
            } else {
                let old = lru.pop_back().unwrap();
                let b = where_.remove(&old).unwrap();
                where_.insert(key, b);
                lru.push_front(key);
                Lookup::Miss {
                    rank: b / per_rank as usize,
                    evicted: Some((old.0, old.1, b / per_rank as usize)),
                }
            };
            assert_eq!(got, want, "{key:?}");
        }
        assert!(
            c.hits > 10_000 && c.misses > 10_000,
            "{} {}",
            c.hits,
            c.misses
        );
        for (k, b) in &where_ {
            assert_eq!(c.rank_of_block(*k), Some(b / per_rank as usize));
        }
        assert_eq!(c.rank_of_block((99, 0)), None);
    }

    #[test]
    fn a_cache_of_no_buffers_is_refused() {
        assert!(BufferCache::new(0, 4).is_err());
        assert!(BufferCache::new(4, 0).is_err());
    }
}
