//! The dirty list: which chunks of the disks that can be spun down have a newer side.
//!
//! Two views of one set, kept together: a hash map from (disk, chunk) to the entry (its
//! version, writes in flight and log record), which every tracked write looks up, and a
//! bitmap of two bits a chunk (0 clean, 1 original newer, 2 replica newer — the codes of a
//! checkpoint, `persist.rs`), which gives the list in (disk, chunk) order: for a checkpoint,
//! and for propagation's scans of a range of disks. A B-tree gave both with one structure,
//! but every write paid its O(log n) pointer chase (12 % of the PARAID bench's cycles at a
//! 100,000-chunk list) and a checkpoint walked every node (13 %); the bitmap is scanned a
//! word (32 chunks) at a time, skipping clean words.
//!
//! The bitmap is allocated in pages on first use, so its memory follows the parts of the
//! disks written since they were last clean, bounded by the geometry (2 bits a chunk of
//! every disk that can be spun down), and a scan skips pages never written. Per disk, a
//! count of entries by side answers "is any chunk of these disks replica-newer" in O(disks).

use super::layer::Side;
use std::collections::BTreeMap;
use std::ops::Range;
use wattio_core::fxhash::FxHashMap;

/// Words (of 32 chunks) a bitmap page holds: 4 KiB pages, 16,384 chunks.
const PAGE_WORDS: usize = 512;
const PAGE_SLOTS: u64 = PAGE_WORDS as u64 * 32;

const ORIGINAL: u64 = 1;
const REPLICA: u64 = 2;

fn code(side: Side) -> u64 {
    match side {
        Side::Original => ORIGINAL,
        Side::Replica => REPLICA,
    }
}

/// `side`'s index in a disk's counts.
fn index(side: Side) -> usize {
    match side {
        Side::Original => 0,
        Side::Replica => 1,
    }
}

fn side(code: u64) -> Side {
    if code == REPLICA {
        Side::Replica
    } else {
        Side::Original
    }
}

/// A dirty chunk: which side is newer, a version bumped by every write to it (submitted or
/// completed), and the writes in flight. A copy clears the entry only if no write was
/// submitted or completed while it ran and none is in flight. `seq`: the log record that
/// says which side is newer (writes to the chunk wait until it is durable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirty {
    pub side: Side,
    pub(super) version: u64,
    pub(super) writes: u32,
    pub(super) seq: u64,
}

impl Dirty {
    /// A chunk just made newer on `side`: one write, its record not yet logged.
    pub(super) fn new(side: Side) -> Dirty {
        Dirty {
            side,
            version: 1,
            writes: 1,
            seq: 0,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DirtyList {
    /// The first disk that can be spun down (disks below it are never in the list).
    low: usize,
    /// Bitmap slots a disk: more than any chunk index of the disk.
    stride: u64,
    map: FxHashMap<(usize, u64), Dirty>,
    pages: Vec<Option<Box<[u64; PAGE_WORDS]>>>,
    /// Entries by side (`[original, replica]`), per disk from `low`.
    by_side: Vec<[u64; 2]>,
}

impl DirtyList {
    /// An empty list for disks `low..disks` of at most `stride` chunks each.
    pub fn new(low: usize, disks: usize, stride: u64) -> DirtyList {
        let slots = disks.saturating_sub(low) as u64 * stride;
        DirtyList {
            low,
            stride,
            map: FxHashMap::default(),
            pages: vec![None; slots.div_ceil(PAGE_SLOTS) as usize],
            by_side: vec![[0; 2]; disks.saturating_sub(low)],
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, key: &(usize, u64)) -> Option<&Dirty> {
        self.map.get(key)
    }

    pub fn get_mut(&mut self, key: &(usize, u64)) -> Option<&mut Dirty> {
        self.map.get_mut(key)
    }

    /// The entry of `key`, inserted as `make()` if absent; true if it was inserted.
    pub fn get_or_insert(
        &mut self,
        key: (usize, u64),
        make: impl FnOnce() -> Dirty,
    ) -> (&mut Dirty, bool) {
        let mut new = None;
        let d = self.map.entry(key).or_insert_with(|| {
            let d = make();
            new = Some(d.side);
            d
        });
        if let Some(s) = new {
            Self::mark(
                &mut self.pages,
                &mut self.by_side,
                self.low,
                self.stride,
                key,
                Some(s),
            );
        }
        (d, new.is_some())
    }

    pub fn insert(&mut self, key: (usize, u64), d: Dirty) {
        let side = d.side;
        if let Some(old) = self.map.insert(key, d) {
            self.by_side[key.0 - self.low][index(old.side)] -= 1;
        }
        Self::mark(
            &mut self.pages,
            &mut self.by_side,
            self.low,
            self.stride,
            key,
            Some(side),
        );
    }

    pub fn remove(&mut self, key: &(usize, u64)) -> Option<Dirty> {
        let d = self.map.remove(key)?;
        self.by_side[key.0 - self.low][index(d.side)] -= 1;
        Self::mark(
            &mut self.pages,
            &mut self.by_side,
            self.low,
            self.stride,
            *key,
            None,
        );
        Some(d)
    }

    /// Set `key`'s two bits to `side`'s code (`None`: clean), counting a new side.
    fn mark(
        pages: &mut [Option<Box<[u64; PAGE_WORDS]>>],
        by_side: &mut [[u64; 2]],
        low: usize,
        stride: u64,
        key: (usize, u64),
        side: Option<Side>,
    ) {
        assert!(
            key.0 >= low && key.1 < stride,
            "paraid: chunk {} of disk {} is outside the dirty list's disks from {low} × {stride} chunks",
            key.1,
            key.0
        );
        let slot = (key.0 - low) as u64 * stride + key.1;
        let page =
            pages[(slot / PAGE_SLOTS) as usize].get_or_insert_with(|| Box::new([0; PAGE_WORDS]));
        let word = &mut page[(slot % PAGE_SLOTS / 32) as usize];
        let shift = slot % 32 * 2;
        *word &= !(3 << shift);
        if let Some(s) = side {
            *word |= code(s) << shift;
            by_side[key.0 - low][index(s)] += 1;
        }
    }

    /// Entries of disks `disks` whose side is `side`.
    pub fn count(&self, disks: Range<usize>, side: Side) -> u64 {
        let from = disks.start.max(self.low) - self.low;
        let to = disks.end.max(self.low) - self.low;
        self.by_side[from.min(to)..to.min(self.by_side.len())]
            .iter()
            .map(|c| c[index(side)])
            .sum()
    }

    /// Every entry's key and side, in (disk, chunk) order.
    pub fn sides(&self) -> Scan<'_> {
        self.scan(self.low..self.low + self.by_side.len())
    }

    /// Entries of disks `disks`, in (disk, chunk) order.
    pub fn range(&self, disks: Range<usize>) -> impl Iterator<Item = ((usize, u64), &Dirty)> + '_ {
        self.scan(disks).map(|(k, _)| (k, &self.map[&k]))
    }

    fn scan(&self, disks: Range<usize>) -> Scan<'_> {
        let at = |d: usize| {
            (d.clamp(self.low, self.low + self.by_side.len()) - self.low) as u64 * self.stride
        };
        let (from, to) = (at(disks.start), at(disks.end).max(at(disks.start)));
        let mut s = Scan {
            list: self,
            word: from / 32,
            bits: 0,
            end: to,
        };
        s.bits = s.load(s.word) & (!0u64 << (from % 32 * 2));
        s
    }

    /// The list as an ordered map (tests and inspection).
    pub fn to_map(&self) -> BTreeMap<(usize, u64), Dirty> {
        self.map.iter().map(|(&k, &d)| (k, d)).collect()
    }
}

/// An ordered scan of the bitmap's set chunks in a slot range.
#[derive(Clone)]
pub struct Scan<'a> {
    list: &'a DirtyList,
    /// The word `bits` came from (its slots are `word × 32 ..`).
    word: u64,
    /// The word's chunks not yet returned.
    bits: u64,
    /// One past the last slot.
    end: u64,
}

impl Scan<'_> {
    fn load(&self, word: u64) -> u64 {
        let (page, at) = (
            (word * 32 / PAGE_SLOTS) as usize,
            (word % PAGE_WORDS as u64) as usize,
        );
        match self.list.pages.get(page) {
            Some(Some(p)) => p[at],
            _ => 0,
        }
    }
}

impl Iterator for Scan<'_> {
    type Item = ((usize, u64), Side);

    fn next(&mut self) -> Option<Self::Item> {
        let last = self.end.div_ceil(32);
        while self.bits == 0 {
            self.word += 1;
            if self.word >= last {
                return None;
            }
            // A page never written is skipped whole.
            let page = (self.word * 32 / PAGE_SLOTS) as usize;
            if !matches!(self.list.pages.get(page), Some(Some(_))) {
                self.word = (page as u64 + 1) * PAGE_WORDS as u64 - 1;
                continue;
            }
            self.bits = self.load(self.word);
        }
        let at = self.bits.trailing_zeros() as u64 & !1;
        let slot = self.word * 32 + at / 2;
        if slot >= self.end {
            self.bits = 0;
            self.word = u64::MAX - 1;
            return None;
        }
        let c = self.bits >> at & 3;
        self.bits &= !(3 << at);
        let l = self.list;
        Some((
            (l.low + (slot / l.stride) as usize, slot % l.stride),
            side(c),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(side: Side) -> Dirty {
        Dirty::new(side)
    }

    #[test]
    fn scans_in_disk_and_chunk_order_across_words_and_pages() {
        // Disks 2..5 of 40,000 chunks each (an odd stride: disks start mid-word and pages
        // hold parts of two disks).
        let mut l = DirtyList::new(2, 5, 40_000);
        let keys = [
            (4, 39_999),
            (2, 0),
            (3, 31),
            (3, 32),
            (2, 16_384),
            (4, 0),
            (3, 39_999),
            (2, 31),
        ];
        for (i, &k) in keys.iter().enumerate() {
            let s = if i % 3 == 0 {
                Side::Replica
            } else {
                Side::Original
            };
            l.insert(k, entry(s));
        }
        let mut sorted = keys.to_vec();
        sorted.sort_unstable();
        assert_eq!(l.sides().map(|(k, _)| k).collect::<Vec<_>>(), sorted);
        assert_eq!(
            l.range(3..4).map(|(k, _)| k).collect::<Vec<_>>(),
            [(3, 31), (3, 32), (3, 39_999)]
        );
        assert_eq!(
            l.range(4..5).map(|(k, _)| k).collect::<Vec<_>>(),
            [(4, 0), (4, 39_999)]
        );
        // Replica: keys 0, 3, 6 = (4, 39_999), (3, 32), (3, 39_999).
        assert_eq!(l.count(2..5, Side::Replica), 3);
        assert_eq!(l.count(3..4, Side::Replica), 2);
        assert_eq!(l.count(2..3, Side::Original), 3);
        assert_eq!(
            l.sides().find(|&(k, _)| k == (3, 32)).map(|x| x.1),
            Some(Side::Replica)
        );
        l.remove(&(3, 32));
        l.remove(&(2, 0));
        assert_eq!(
            l.range(2..4).map(|(k, _)| k).collect::<Vec<_>>(),
            [(2, 31), (2, 16_384), (3, 31), (3, 39_999)]
        );
        assert_eq!(l.count(3..4, Side::Replica), 1);
        assert_eq!(l.len(), 6);
        // Disks outside the list's range have no entries.
        assert_eq!(l.range(0..2).count(), 0);
        assert_eq!(l.count(0..2, Side::Original), 0);
    }

    #[test]
    fn get_or_insert_marks_a_new_entry_once() {
        let mut l = DirtyList::new(1, 3, 100);
        let (d, new) = l.get_or_insert((2, 7), || entry(Side::Replica));
        assert!(new);
        d.seq = 9;
        let (d, new) = l.get_or_insert((2, 7), || entry(Side::Original));
        assert!(!new);
        assert_eq!((d.side, d.seq), (Side::Replica, 9));
        assert_eq!(l.count(1..3, Side::Replica), 1);
        assert_eq!(l.count(1..3, Side::Original), 0);
        assert_eq!(l.sides().collect::<Vec<_>>(), [((2, 7), Side::Replica)]);
    }
}
