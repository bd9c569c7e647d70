//! The dirty list: which chunks of the disks that can be spun down have a newer side.
//!
//! Two views of one set, kept together: a hash map from (disk, chunk) to the entry (its
//! version, writes in flight and log record), which every tracked write looks up, and a
//! bitmap of two bits a chunk (0 clean, 1 original newer, 2 replica newer — the codes of a
//! checkpoint, `persist.rs`), which gives the list in (disk, chunk) order: for a checkpoint,
//! and for propagation's scans of a range of disks. A B-tree gave both with one structure,
//! but every write paid its O(log n) pointer chase (12 % of the PARAID bench's cycles at a
//! 100,000-chunk list) and a checkpoint walked every node (13 %); the bitmap is scanned a
//! word (32 chunks) at a time, and a summary bit a word for each side lets a scan for one
//! side skip 64 words without it at once.
//!
//! The bitmap is allocated in pages on first use, so its memory follows the parts of the
//! disks written since they were last clean, bounded by the geometry (2 bits a chunk of
//! every disk that can be spun down), and a scan skips pages never written. Per disk, a
//! count of entries by side answers "is any chunk of these disks replica-newer" in O(disks).

use super::layer::Side;
use super::persist::{Chunks, ListEncoder, Ordered, Shape};
use std::collections::BTreeMap;
use std::ops::Range;
use wattio_core::fxhash::FxHashMap;

/// Words (of 32 chunks) a bitmap page holds: 4 KiB pages, 16,384 chunks.
const PAGE_WORDS: usize = 512;
const PAGE_SLOTS: u64 = PAGE_WORDS as u64 * 32;
/// The low bit of every two-bit field.
const LOW_BITS: u64 = 0x5555_5555_5555_5555;

/// A page of the bitmap and, per side, one bit a word: the word holds a chunk of that side
/// (so a scan for one side skips the words and chunks of the other and the clean ones, 64
/// words at a time).
#[derive(Clone, Debug)]
struct Page {
    words: [u64; PAGE_WORDS],
    any: [[u64; PAGE_WORDS / 64]; 2],
}

/// The fields of `w` (their low bits) that hold `side` (`None`: either).
fn holding(w: u64, side: Option<Side>) -> u64 {
    match side {
        None => (w | w >> 1) & LOW_BITS,
        Some(Side::Original) => w & !(w >> 1) & LOW_BITS,
        Some(Side::Replica) => w >> 1 & !w & LOW_BITS,
    }
}

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
    /// Every write since the chunk was clean went to both sides and is still out (a full
    /// synchronization's write to an arriving disk that is up): once they are back, the
    /// sides are equal again without a copy.
    pub(super) mirror: bool,
}

impl Dirty {
    /// A chunk newer on `side` as the log already says (recovered, or a clean record that
    /// could not be made safe), with no write out.
    pub(super) fn logged(side: Side) -> Dirty {
        Dirty {
            side,
            version: 0,
            writes: 0,
            seq: 0,
            mirror: false,
        }
    }

    /// A chunk just made newer on `side`: one write, its record not yet logged.
    pub(super) fn new(side: Side) -> Dirty {
        Dirty {
            side,
            version: 1,
            writes: 1,
            seq: 0,
            mirror: false,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct DirtyList {
    map: FxHashMap<(usize, u64), Dirty>,
    bits: Bits,
}

/// The bitmap and the per-disk counts (apart from the map, so an entry of the map and the
/// bits can be changed together).
#[derive(Clone, Debug, Default)]
struct Bits {
    /// The first disk that can be spun down (disks below it are never in the list).
    low: usize,
    /// Bitmap slots a disk: more than any chunk index of the disk.
    stride: u64,
    pages: Vec<Option<Box<Page>>>,
    /// Entries by side (`[original, replica]`), per disk from `low`.
    by_side: Vec<[u64; 2]>,
}

impl Bits {
    /// Set `key`'s two bits to `side`'s code (`None`: clean), counting a new side.
    fn mark(&mut self, key: (usize, u64), side: Option<Side>) {
        let (low, stride) = (self.low, self.stride);
        assert!(
            key.0 >= low && key.1 < stride,
            "paraid: chunk {} of disk {} is outside the dirty list's disks from {low} × {stride} chunks",
            key.1,
            key.0
        );
        let slot = (key.0 - low) as u64 * stride + key.1;
        let page = self.pages[(slot / PAGE_SLOTS) as usize].get_or_insert_with(|| {
            Box::new(Page {
                words: [0; PAGE_WORDS],
                any: [[0; PAGE_WORDS / 64]; 2],
            })
        });
        let at = (slot % PAGE_SLOTS / 32) as usize;
        let shift = slot % 32 * 2;
        let mut w = page.words[at] & !(3 << shift);
        if let Some(s) = side {
            w |= code(s) << shift;
            self.by_side[key.0 - low][index(s)] += 1;
        }
        page.words[at] = w;
        for s in [Side::Original, Side::Replica] {
            let any = &mut page.any[index(s)][at / 64];
            if holding(w, Some(s)) == 0 {
                *any &= !(1 << (at % 64));
            } else {
                *any |= 1 << (at % 64);
            }
        }
    }

    /// A side's entry left `key`'s disk.
    fn unmark(&mut self, key: (usize, u64), side: Side) {
        self.by_side[key.0 - self.low][index(side)] -= 1;
    }

    /// Bitmap word `word` (32 slots; 0 in a page never written).
    fn word(&self, word: u64) -> u64 {
        let page = word * 32 / PAGE_SLOTS;
        self.pages
            .get(page as usize)
            .and_then(Option::as_deref)
            .map_or(0, |p| p.words[(word % PAGE_WORDS as u64) as usize])
    }
}

impl DirtyList {
    /// An empty list for disks `low..disks` of at most `stride` chunks each.
    pub fn new(low: usize, disks: usize, stride: u64) -> DirtyList {
        let slots = disks.saturating_sub(low) as u64 * stride;
        DirtyList {
            map: FxHashMap::default(),
            bits: Bits {
                low,
                stride,
                pages: vec![None; slots.div_ceil(PAGE_SLOTS) as usize],
                by_side: vec![[0; 2]; disks.saturating_sub(low)],
            },
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn get(&self, key: &(usize, u64)) -> Option<&Dirty> {
        self.map.get(key)
    }

    /// `key`'s newer side (`None`: clean, or a disk never in the list), read from the
    /// bitmap: an array index instead of a hash probe — every member I/O's routing asks,
    /// and the map's probe was the routing's largest cost (a cache miss in a map of tens
    /// of thousands of chunks).
    pub fn side_of(&self, key: (usize, u64)) -> Option<Side> {
        let b = &self.bits;
        if key.0 < b.low || key.0 - b.low >= b.by_side.len() || key.1 >= b.stride {
            return None;
        }
        let slot = (key.0 - b.low) as u64 * b.stride + key.1;
        match b.word(slot / 32) >> (slot % 32 * 2) & 3 {
            ORIGINAL => Some(Side::Original),
            REPLICA => Some(Side::Replica),
            _ => None,
        }
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
            self.bits.mark(key, Some(s));
        }
        (d, new.is_some())
    }

    pub fn insert(&mut self, key: (usize, u64), d: Dirty) {
        let side = d.side;
        if let Some(old) = self.map.insert(key, d) {
            self.bits.unmark(key, old.side);
        }
        self.bits.mark(key, Some(side));
    }

    pub fn remove(&mut self, key: &(usize, u64)) -> Option<Dirty> {
        let d = self.map.remove(key)?;
        self.bits.unmark(*key, d.side);
        self.bits.mark(*key, None);
        Some(d)
    }

    /// Entries of disks `disks` whose side is `side`.
    pub fn count(&self, disks: Range<usize>, side: Side) -> u64 {
        let to = (disks.end.max(self.bits.low) - self.bits.low).min(self.bits.by_side.len());
        let from = (disks.start.max(self.bits.low) - self.bits.low).min(to);
        self.bits.by_side[from..to]
            .iter()
            .map(|c| c[index(side)])
            .sum()
    }

    /// Entries whose replica is the newer side, on any disk.
    pub fn replicas(&self) -> u64 {
        self.bits
            .by_side
            .iter()
            .map(|c| c[index(Side::Replica)])
            .sum()
    }

    /// Every entry's key and side, in (disk, chunk) order.
    pub fn sides(&self) -> Scan<'_> {
        self.scan(self.bits.low..self.bits.low + self.bits.by_side.len(), None)
    }

    /// Entries of disks `disks` whose newer side is `side`, in (disk, chunk) order.
    pub fn range(
        &self,
        disks: Range<usize>,
        side: Side,
    ) -> impl Iterator<Item = ((usize, u64), &Dirty)> + '_ {
        self.scan(disks, Some(side))
            .map(|(k, _)| (k, &self.map[&k]))
    }

    fn scan(&self, disks: Range<usize>, side: Option<Side>) -> Scan<'_> {
        let at = |d: usize| {
            (d.clamp(self.bits.low, self.bits.low + self.bits.by_side.len()) - self.bits.low) as u64
                * self.bits.stride
        };
        let (from, end) = (at(disks.start), at(disks.end).max(at(disks.start)));
        let mut s = Scan {
            list: self,
            side,
            from,
            end,
            group: from / 32 / 64,
            words: 0,
            word: 0,
            raw: 0,
            bits: 0,
        };
        s.words = s.summary(s.group) & (!0u64 << (from / 32 % 64));
        s
    }

    /// Whether the bitmap is laid out as a checkpoint's of disks from `low`, `chunks` each.
    pub fn has_layout(&self, low: usize, chunks: u64) -> bool {
        (self.bits.low, self.bits.stride) == (low, chunks)
    }

    /// `f(slot, state code)` for every entry in slot order until it returns false: the
    /// scan of [`DirtyList::sides`] without keys (a checkpoint's inner loop).
    pub fn each_slot(&self, f: &mut dyn FnMut(u64, u8) -> bool) {
        self.each_slot_with(f)
    }

    /// [`DirtyList::each_slot`] for a known `f`, inlined into the scan (a checkpoint's
    /// list encoder: an indirect call per chunk was most of its cost).
    #[inline]
    fn each_slot_with<F: FnMut(u64, u8) -> bool>(&self, mut f: F) {
        for (i, page) in self.bits.pages.iter().enumerate() {
            let Some(page) = page else { continue };
            for g in 0..PAGE_WORDS / 64 {
                let mut words = page.any[0][g] | page.any[1][g];
                while words != 0 {
                    let k = g * 64 + words.trailing_zeros() as usize;
                    words &= words - 1;
                    let w = page.words[k];
                    let base = i as u64 * PAGE_SLOTS + k as u64 * 32;
                    let mut bits = holding(w, None);
                    while bits != 0 {
                        let at = bits.trailing_zeros();
                        bits &= bits - 1;
                        if !f(base + u64::from(at / 2), (w >> at & 3) as u8) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The bitmap as bytes (two bits a chunk, low bits first) into `out`, which is zeroed
    /// and at most the bitmap's length.
    pub fn write_bitmap(&self, out: &mut [u8]) {
        for (i, page) in self.bits.pages.iter().enumerate() {
            let Some(page) = page else { continue };
            let at = i * PAGE_WORDS * 8;
            for (k, w) in page.words.iter().enumerate() {
                let from = at + k * 8;
                if from >= out.len() {
                    return;
                }
                let n = (out.len() - from).min(8);
                out[from..from + n].copy_from_slice(&w.to_le_bytes()[..n]);
            }
        }
    }

    /// The list as an ordered map (tests and inspection).
    pub fn to_map(&self) -> BTreeMap<(usize, u64), Dirty> {
        self.map.iter().map(|(&k, &d)| (k, d)).collect()
    }
}

/// A checkpoint of the list: its own slots and bitmap when they are laid out as the
/// checkpoint's (always, as the layer builds it), else key by key.
impl Chunks for DirtyList {
    fn len_hint(&self) -> Option<usize> {
        Some(self.len())
    }

    fn each(&self, shape: &Shape, f: &mut dyn FnMut(u64, u8) -> bool) {
        if self.has_layout(shape.low, shape.chunks) {
            return self.each_slot(f);
        }
        Ordered(self.sides()).each(shape, f)
    }

    fn encode_list(&self, shape: &Shape, b: &mut Vec<u8>, end: usize) -> Option<u32> {
        let mut e = ListEncoder::new(b, end);
        if self.has_layout(shape.low, shape.chunks) {
            self.each_slot_with(|slot, code| e.push(slot, code));
        } else {
            self.each(shape, &mut |slot, code| e.push(slot, code));
        }
        e.finish()
    }

    fn bitmap(&self, shape: &Shape, out: &mut [u8]) {
        if self.has_layout(shape.low, shape.chunks) {
            return self.write_bitmap(out);
        }
        Ordered(self.sides()).bitmap(shape, out)
    }
}

/// An ordered scan of the bitmap's chunks of one side (or both) in a slot range: groups of
/// 64 words by their summary bits, words by their fields.
#[derive(Clone)]
pub struct Scan<'a> {
    list: &'a DirtyList,
    side: Option<Side>,
    /// The slot range.
    from: u64,
    end: u64,
    /// The group of 64 words being scanned, and its words with chunks not yet visited (bit
    /// i: word group × 64 + i).
    group: u64,
    words: u64,
    /// The word being scanned, its bits, and its fields not yet returned (their low bits).
    word: u64,
    raw: u64,
    bits: u64,
}

impl Scan<'_> {
    fn page(&self, group: u64) -> Option<&Page> {
        let p = group * 64 * 32 / PAGE_SLOTS;
        self.list.bits.pages.get(p as usize)?.as_deref()
    }

    fn summary(&self, group: u64) -> u64 {
        let Some(p) = self.page(group) else { return 0 };
        let g = (group % (PAGE_WORDS as u64 / 64)) as usize;
        match self.side {
            Some(s) => p.any[index(s)][g],
            None => p.any[0][g] | p.any[1][g],
        }
    }

    fn load(&self, word: u64) -> u64 {
        self.list.bits.word(word)
    }
}

impl Iterator for Scan<'_> {
    type Item = ((usize, u64), Side);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.bits != 0 {
                let at = self.bits.trailing_zeros() as u64;
                self.bits &= self.bits - 1;
                let slot = self.word * 32 + at / 2;
                if slot < self.from {
                    continue;
                }
                if slot >= self.end {
                    self.bits = 0;
                    self.words = 0;
                    self.group = u64::MAX;
                    return None;
                }
                let c = self.raw >> at & 3;
                let l = self.list;
                return Some((
                    (
                        l.bits.low + (slot / l.bits.stride) as usize,
                        slot % l.bits.stride,
                    ),
                    side(c),
                ));
            }
            if self.words != 0 {
                self.word = self.group * 64 + u64::from(self.words.trailing_zeros());
                self.words &= self.words - 1;
                self.raw = self.load(self.word);
                self.bits = holding(self.raw, self.side);
                continue;
            }
            // The next group (a page never written: the next page's first group).
            if self.group == u64::MAX || (self.group + 1) * 64 * 32 >= self.end {
                self.group = u64::MAX;
                return None;
            }
            self.group += 1;
            while self.page(self.group).is_none() {
                let per_page = PAGE_WORDS as u64 / 64;
                self.group = (self.group / per_page + 1) * per_page;
                if self.group * 64 * 32 >= self.end {
                    self.group = u64::MAX;
                    return None;
                }
            }
            self.words = self.summary(self.group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(side: Side) -> Dirty {
        Dirty::new(side)
    }

    #[test]
    fn side_of_reads_the_map_s_side_from_the_bitmap() {
        // Disks 2..5 of 40,000 chunks: keys at word, page and disk edges, both sides,
        // a re-insert with the other side and removals; every key of the disks (and disks
        // outside them, and chunks past the stride) agrees with the map.
        let mut l = DirtyList::new(2, 5, 40_000);
        let edges = [0, 1, 31, 32, 16_383, 16_384, 39_999];
        for (i, &c) in edges.iter().enumerate() {
            for d in 2..5 {
                let s = if (i + d) % 2 == 0 {
                    Side::Replica
                } else {
                    Side::Original
                };
                l.insert((d, c), entry(s));
            }
        }
        l.insert((3, 31), entry(Side::Replica));
        l.insert((3, 32), entry(Side::Original));
        l.remove(&(2, 16_384));
        l.remove(&(4, 0));
        let mut seen = [0; 2];
        for d in 0..6 {
            for c in (0..40_010).filter(|c| c % 97 == 0 || edges.contains(c) || *c >= 39_999) {
                let want = l.get(&(d, c)).map(|e| e.side);
                assert_eq!(l.side_of((d, c)), want, "disk {d} chunk {c}");
                match want {
                    Some(Side::Original) => seen[0] += 1,
                    Some(Side::Replica) => seen[1] += 1,
                    None => {}
                }
            }
        }
        assert_eq!(seen[0] + seen[1], 3 * edges.len() - 2);
        assert!(seen[0] > 0 && seen[1] > 0);
        assert_eq!(l.side_of((3, 31)), Some(Side::Replica));
        assert_eq!(l.side_of((2, 16_384)), None);
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
        // Replica: keys 0, 3, 6 = (4, 39_999), (3, 32), (3, 39_999).
        let keys_of =
            |l: &DirtyList, d: Range<usize>, s| l.range(d, s).map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys_of(&l, 3..4, Side::Replica), [(3, 32), (3, 39_999)]);
        assert_eq!(keys_of(&l, 3..4, Side::Original), [(3, 31)]);
        assert_eq!(keys_of(&l, 4..5, Side::Original), [(4, 0)]);
        assert_eq!(
            keys_of(&l, 2..5, Side::Replica),
            [(3, 32), (3, 39_999), (4, 39_999)]
        );
        assert_eq!(l.count(2..5, Side::Replica), 3);
        assert_eq!(l.count(3..4, Side::Replica), 2);
        assert_eq!(l.count(2..3, Side::Original), 3);
        l.remove(&(3, 32));
        l.remove(&(2, 0));
        assert_eq!(
            keys_of(&l, 2..4, Side::Original),
            [(2, 31), (2, 16_384), (3, 31)]
        );
        assert_eq!(keys_of(&l, 2..4, Side::Replica), [(3, 39_999)]);
        assert_eq!(l.count(3..4, Side::Replica), 1);
        assert_eq!(l.len(), 6);
        // Disks outside the list's range have no entries.
        assert_eq!(l.range(0..2, Side::Original).count(), 0);
        assert_eq!(l.count(0..2, Side::Original), 0);
        assert_eq!(l.count(7..9, Side::Original), 0);
        assert_eq!(l.range(7..9, Side::Original).count(), 0);
    }

    /// Random inserts and removes against an ordered map: every scan, of either side or
    /// both, over any range of disks, yields the map's entries in its order.
    #[test]
    fn scans_agree_with_an_ordered_map_under_random_changes() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for (low, disks, stride) in [(1, 4, 70_001), (2, 5, 32), (0, 3, 33), (3, 4, 1)] {
            let mut l = DirtyList::new(low, disks, stride);
            let mut m = BTreeMap::new();
            for round in 0..3_000 {
                // Clustered keys (runs in one word and one page) and spread ones.
                let chunk = if round % 2 == 0 {
                    rand(stride.min(100))
                } else {
                    rand(stride)
                };
                let key = (low + rand((disks - low) as u64) as usize, chunk);
                if m.contains_key(&key) && rand(3) > 0 {
                    m.remove(&key);
                    assert!(l.remove(&key).is_some());
                } else {
                    let s = if rand(2) == 0 {
                        Side::Original
                    } else {
                        Side::Replica
                    };
                    if m.insert(key, s).is_some() {
                        l.remove(&key);
                    }
                    l.insert(key, entry(s));
                }
                if round % 97 != 0 {
                    continue;
                }
                let want: Vec<_> = m.iter().map(|(&k, &s)| (k, s)).collect();
                assert_eq!(l.sides().collect::<Vec<_>>(), want);
                let replicas = m.values().filter(|&&s| s == Side::Replica).count();
                assert_eq!(l.replicas(), replicas as u64);
                let (a, b) = (
                    rand(disks as u64 + 1) as usize,
                    rand(disks as u64 + 1) as usize,
                );
                let disks_in = a.min(b)..a.max(b);
                for s in [Side::Original, Side::Replica] {
                    let want: Vec<_> = m
                        .iter()
                        .filter(|(k, &v)| disks_in.contains(&k.0) && v == s)
                        .map(|(&k, _)| k)
                        .collect();
                    let got: Vec<_> = l.range(disks_in.clone(), s).map(|(k, _)| k).collect();
                    assert_eq!(got, want, "{s:?} of disks {disks_in:?}");
                    assert_eq!(l.count(disks_in.clone(), s), want.len() as u64);
                }
            }
        }
    }

    /// A checkpoint made with the list's own bitmap (copied) and length (a long list is
    /// not tried) is the checkpoint made chunk by chunk, in both encodings.
    #[test]
    fn checkpoints_from_the_bitmap_equal_checkpoints_built_chunk_by_chunk() {
        let shape = Shape {
            low: 2,
            disks: 5,
            chunks: 40_003,
            gears: 2,
        };
        let mut l = DirtyList::new(2, 5, 40_003);
        assert!(l.has_layout(2, 40_003) && !l.has_layout(2, 40_004));
        let mut x = 7u64;
        for n in [10, 5_000, 40_000] {
            while l.len() < n {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let key = (2 + (x >> 33) as usize % 3, (x >> 13) % 40_003);
                let s = if x >> 63 == 0 {
                    Side::Original
                } else {
                    Side::Replica
                };
                if l.get(&key).is_none() {
                    l.insert(key, entry(s));
                }
            }
            let bad = [(1, 3, 77)];
            let slow = shape.snapshot(1, l.sides(), &bad);
            let fast = shape.checkpoint(1, &l, &bad);
            assert_eq!(fast, slow, "{n} chunks");
            // A list laid out otherwise goes key by key: the same bytes.
            let mut other = DirtyList::new(2, 5, 40_004);
            for (k, s) in l.sides() {
                other.insert(k, entry(s));
            }
            assert_eq!(shape.checkpoint(1, &other, &bad), slow, "{n} chunks");
            // 10 and 5,000 chunks: a list (the gear's high bit); 40,000: the bitmap (30,003
            // bytes: the list is not tried).
            assert_eq!(fast[0] & 0x80 != 0, n <= 5_000, "{n} chunks");
        }
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
