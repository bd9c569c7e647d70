//! PARAID's persisted soft state: the dirty list and the gear, in a metadata log
//! ([`wattio_core::journal::Journal`]) in the last blocks of disk 0 (a disk of every gear,
//! so the log is always on a spinning disk).
//!
//! **What must survive a crash.** A chunk not in the dirty list has equal copies (original
//! and replica), so any gear may serve it; a chunk in the list is served from its newer
//! side. Recovery therefore needs the list's *sides*, not its versions or writes in flight.
//! The rule that keeps the list right: the record saying which side of a chunk is newer is
//! durable before the first write that makes it newer goes down (write-intent, as md's
//! bitmap). A chunk a copy made clean, and a gear switch, are logged without waiting: losing
//! such a record leaves a chunk marked newer whose copies are equal (one extra copy) or the
//! array in the gear before (see below). Records are replayed in order, and the log is a
//! prefix after a crash, so the recovered state is one the array was in:
//!
//! * an upshift's gear record precedes every original-newer record of the disks it woke;
//! * a downshift's gear record follows the clean records of every chunk of the leaving
//!   disks it copied, so a recovered low gear never has an original-newer chunk on a disk it
//!   keeps down;
//! * a gear that did not survive leaves the array in the gear before it, which the list
//!   makes correct (any gear is, given the list); with no gear record at all the array
//!   starts in the gear it was configured to start in, the one its first records were
//!   written in.
//!
//! **Bad pages of the gears.** Each gear is a RAID whose bad-page list decides where reads
//! go (a page whose write failed may read without error later, from a cache below): the
//! gears hand new bad pages to the layer, which logs them here and holds every host write
//! reply until they are durable, as `kind = "raid"` does with a log of its own
//! (`raid/stripe/persist.rs`). At most `MAX_BAD_PAGES` are logged; past that a page is bad
//! in memory only and writes to its row fail.
//!
//! **On the log.** A record is 11 bytes: a tag, a disk (u16) and a chunk (u64), little-
//! endian (a bad page: the gear in the disk field's high byte, the member in its low byte,
//! the member page in the chunk field). A checkpoint (when the journal is full) is the
//! dirty list in whichever of two encodings is shorter, then the bad pages (a u32 count, 10
//! bytes each):
//!
//! * a bitmap: the gear (one byte), then 2 bits per chunk of every disk that can be spun
//!   down (0 clean, 1 original newer, 2 replica newer) — its size is fixed by the geometry,
//!   so the log's region is too (`Shape::snapshot_bytes`);
//! * a list: the gear with the high bit set (gears are < 128: an array has at most
//!   `MAX_MEMBERS` = 64 disks), a u32 count, then per dirty chunk in ascending order of its
//!   slot (disk − the lowest gear) × chunks + chunk, a LEB128 varint of (gap << 2 | state),
//!   where gap is the slot minus the previous slot + 1 (the first: the slot). Chosen only
//!   when shorter than the bitmap, so the bitmap's size stays the bound.
//!
//! The list is why checkpoints are cheap: a journal fills after about 256 log writes (each a
//! 4 KiB block, see `JOURNAL_BYTES`), and the bitmap of five 36 GB disks is ~280 KB written,
//! copied and checksummed each time, while a dirty list of 5,000 chunks is ~15 KB. A
//! checkpoint written by a build before the list existed is a bitmap, and still reads.

use super::layer::Side;
use std::collections::BTreeMap;

/// The owner name in the log's header.
pub const OWNER: &str = "paraid-dirty-list";
/// The journal's record area: about 90,000 records (each log write is at least a 4 KiB
/// block, so fewer when writes come one by one) before a checkpoint.
pub const JOURNAL_BYTES: u64 = 1 << 20;

const NEWER_ORIGINAL: u8 = 1;
const NEWER_REPLICA: u8 = 2;
const CLEAN: u8 = 3;
const GEAR: u8 = 4;
const BAD: u8 = 5;
/// The high bit of a checkpoint's gear byte: the dirty list follows as a list.
const SPARSE: u8 = 0x80;
const _: () = assert!(crate::raid::stripe::MAX_MEMBERS < SPARSE as usize);
/// Bad pages of the gears the log holds at most.
pub const MAX_BAD_PAGES: u64 = 4096;
/// A record's bytes.
pub const RECORD_BYTES: usize = 11;

/// A change to the persisted state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Chunk `chunk` of disk `disk` has a newer `side`.
    Newer { disk: usize, chunk: u64, side: Side },
    /// The chunk's copies are equal again.
    Clean { disk: usize, chunk: u64 },
    /// The array switched to gear (index) `.0`.
    Gear(usize),
    /// Gear `level`'s member `disk` has a bad page `page`.
    Bad {
        level: usize,
        disk: usize,
        page: u64,
    },
}

impl Record {
    pub fn encode(self) -> [u8; RECORD_BYTES] {
        let (tag, disk, chunk) = match self {
            Record::Newer { disk, chunk, side } => (side_code(side), disk, chunk),
            Record::Clean { disk, chunk } => (CLEAN, disk, chunk),
            Record::Gear(g) => (GEAR, g, 0),
            Record::Bad { level, disk, page } => (BAD, level << 8 | disk, page),
        };
        let mut b = [0; RECORD_BYTES];
        b[0] = tag;
        b[1..3].copy_from_slice(&(disk as u16).to_le_bytes());
        b[3..].copy_from_slice(&chunk.to_le_bytes());
        b
    }
}

fn side_code(side: Side) -> u8 {
    match side {
        Side::Original => NEWER_ORIGINAL,
        Side::Replica => NEWER_REPLICA,
    }
}

/// A chunk state of a checkpoint: which side is newer (`None`: not a valid dirty state).
fn state(code: u8) -> Option<Side> {
    match code {
        NEWER_ORIGINAL => Some(Side::Original),
        NEWER_REPLICA => Some(Side::Replica),
        _ => None,
    }
}

/// Append `v` as an unsigned LEB128 varint (7 bits a byte, low first, high bit: more).
fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push(v as u8 | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

/// An unsigned LEB128 varint at the start of `b` and its length; `None` when `b` ends
/// inside it or it does not fit in 64 bits.
fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && bits > 1 {
            return None;
        }
        v |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// What is persisted, by geometry: disks `low..disks` can be spun down (the lowest gear's
/// disks never are), each of `chunks` chunks; `gears` gears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub low: usize,
    pub disks: usize,
    pub chunks: u64,
    pub gears: usize,
}

/// What a checkpoint's dirty list is made from.
pub trait Chunks {
    /// The number of dirty chunks, if known.
    fn len_hint(&self) -> Option<usize>;
    /// `f(slot, state code)` for each dirty chunk in slot order (`shape`'s layout) until it
    /// returns false.
    fn each(&self, shape: &Shape, f: &mut dyn FnMut(u64, u8) -> bool);
    /// The checkpoint's list of the chunks appended to `b` (see [`ListEncoder`]) until `b`
    /// reaches `end` bytes: how many were encoded, `None` once `end` was reached.
    fn encode_list(&self, shape: &Shape, b: &mut Vec<u8>, end: usize) -> Option<u32> {
        let mut e = ListEncoder::new(b, end);
        self.each(shape, &mut |slot, code| e.push(slot, code));
        e.finish()
    }
    /// The two-bit-a-chunk bitmap of `shape`'s layout into `out` (zeroed, from the byte after
    /// the gear's).
    fn bitmap(&self, shape: &Shape, out: &mut [u8]) {
        self.each(shape, &mut |slot, code| {
            let bit = slot * 2;
            out[(bit / 8) as usize] |= code << (bit % 8);
            true
        });
    }
}

/// A checkpoint's list: each chunk, in slot order, as a varint of its distance from the one
/// before (less one) shifted over its two-bit state code; given up once the list reaches
/// `end` bytes (the bitmap is written instead).
pub struct ListEncoder<'a> {
    b: &'a mut Vec<u8>,
    end: usize,
    next: u64,
    count: u32,
}

impl<'a> ListEncoder<'a> {
    pub fn new(b: &'a mut Vec<u8>, end: usize) -> Self {
        ListEncoder {
            b,
            end,
            next: 0,
            count: 0,
        }
    }

    /// One more chunk; false once the list is too long to go on.
    #[inline]
    pub fn push(&mut self, slot: u64, code: u8) -> bool {
        if self.b.len() >= self.end {
            return false;
        }
        assert!(
            slot >= self.next,
            "paraid: a checkpoint's chunks come in slot order"
        );
        put_varint(self.b, (slot - self.next) << 2 | u64::from(code));
        self.next = slot + 1;
        self.count += 1;
        true
    }

    pub fn finish(self) -> Option<u32> {
        (self.b.len() < self.end).then_some(self.count)
    }
}

/// Dirty chunks from an iterator in (disk, chunk) order.
pub struct Ordered<I>(pub I);

impl<I: Iterator<Item = ((usize, u64), Side)> + Clone> Chunks for Ordered<I> {
    fn len_hint(&self) -> Option<usize> {
        None
    }

    fn each(&self, shape: &Shape, f: &mut dyn FnMut(u64, u8) -> bool) {
        for (key, side) in self.0.clone() {
            if !f(shape.slot(key), side_code(side)) {
                return;
            }
        }
    }
}

/// The dirty chunks of two sources with no chunk in common, in slot order: the second is
/// small (gathered, then merged into the first's walk).
pub struct Both<'a>(pub &'a dyn Chunks, pub &'a dyn Chunks);

impl Chunks for Both<'_> {
    fn len_hint(&self) -> Option<usize> {
        Some(self.0.len_hint()? + self.1.len_hint()?)
    }

    fn each(&self, shape: &Shape, f: &mut dyn FnMut(u64, u8) -> bool) {
        let mut second = Vec::new();
        self.1.each(shape, &mut |slot, code| {
            second.push((slot, code));
            true
        });
        let mut next = second.into_iter().peekable();
        let mut going = true;
        self.0.each(shape, &mut |slot, code| {
            while let Some(&(s, c)) = next.peek() {
                if s > slot {
                    break;
                }
                next.next();
                if !f(s, c) {
                    going = false;
                    return false;
                }
            }
            going = f(slot, code);
            going
        });
        if going {
            for (s, c) in next {
                if !f(s, c) {
                    return;
                }
            }
        }
    }
}

/// A gear's bad page: (gear, member, member page).
pub type BadPage = (usize, usize, u64);

/// The state a log holds: the gear (`None`: no record of it), the dirty chunks' sides and
/// the gears' bad pages.
pub type State = (Option<usize>, BTreeMap<(usize, u64), Side>, Vec<BadPage>);

impl Shape {
    fn bits(&self) -> u64 {
        (self.disks - self.low) as u64 * self.chunks * 2
    }

    fn bitmap_end(&self) -> usize {
        1 + self.bits().div_ceil(8) as usize
    }

    /// A checkpoint's size at most, bytes.
    pub fn snapshot_bytes(&self) -> u64 {
        self.bitmap_end() as u64 + 4 + MAX_BAD_PAGES * 10
    }

    /// A checkpoint of `gear`, the dirty chunks' sides in (disk, chunk) order, and the gears'
    /// bad pages (at most `MAX_BAD_PAGES`, sorted): the dirty list as a list when that is
    /// shorter than the bitmap.
    #[cfg(test)]
    pub fn snapshot(
        &self,
        gear: usize,
        dirty: impl Iterator<Item = ((usize, u64), Side)> + Clone,
        bad: &[BadPage],
    ) -> Vec<u8> {
        self.checkpoint(gear, &Ordered(dirty), bad)
    }

    /// The slot of `disk`'s chunk `chunk` (chunks in slot order are in (disk, chunk) order).
    pub fn slot(&self, (disk, chunk): (usize, u64)) -> u64 {
        (disk - self.low) as u64 * self.chunks + chunk
    }

    /// [`Shape::snapshot`] of any source of dirty chunks.
    pub fn checkpoint(&self, gear: usize, dirty: &dyn Chunks, bad: &[BadPage]) -> Vec<u8> {
        // The list is encoded as the chunks come (in slot order; checked), and the bitmap
        // written instead once the list reaches its size (or, when the number of chunks is
        // known, when they cannot fit: a chunk takes a byte or more).
        let end = self.bitmap_end();
        let mut b = Vec::with_capacity(end.min(1 << 16) + 4 + bad.len() * 10);
        b.push(gear as u8 | SPARSE);
        b.extend_from_slice(&[0; 4]);
        let long = dirty.len_hint().is_some_and(|n| b.len() + n >= end);
        match (!long)
            .then(|| dirty.encode_list(self, &mut b, end))
            .flatten()
        {
            Some(count) => b[1..5].copy_from_slice(&count.to_le_bytes()),
            None => {
                b.clear();
                b.resize(end, 0);
                b[0] = gear as u8;
                dirty.bitmap(self, &mut b[1..]);
            }
        }
        let mut bad = bad.to_vec();
        bad.sort_unstable();
        b.extend_from_slice(&(bad.len() as u32).to_le_bytes());
        for (level, disk, page) in bad {
            b.extend_from_slice(&Record::Bad { level, disk, page }.encode()[1..]);
        }
        b
    }

    fn bad_page(&self, r: &[u8], at: &str) -> Result<BadPage, String> {
        let field = u16::from_le_bytes([r[0], r[1]]) as usize;
        let page = u64::from_le_bytes(r[2..10].try_into().expect("10 bytes"));
        let (level, disk) = (field >> 8, field & 0xff);
        if level >= self.gears || disk >= self.disks {
            return Err(format!(
                "{at}: bad page of member {disk} of gear {level}, the array has {} gears of at most {} disks",
                self.gears, self.disks
            ));
        }
        Ok((level, disk, page))
    }

    /// Replay a recovered log: its checkpoint (empty: none yet), then its records in order.
    pub fn replay(&self, snapshot: &[u8], records: &[Vec<u8>]) -> Result<State, String> {
        let mut gear = None;
        let mut dirty = BTreeMap::new();
        let mut bad = Vec::new();
        if !snapshot.is_empty() {
            let (g, list_end) = if snapshot[0] & SPARSE != 0 {
                (snapshot[0] & !SPARSE, self.read_list(snapshot, &mut dirty)?)
            } else {
                let end = self.bitmap_end().min(snapshot.len());
                self.read_bitmap(&snapshot[..end], &mut dirty)?;
                (snapshot[0], self.bitmap_end())
            };
            let count = snapshot
                .get(list_end..list_end + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64);
            if count.is_none_or(|n| {
                n > MAX_BAD_PAGES || snapshot.len() as u64 != list_end as u64 + 4 + n * 10
            }) {
                return Err(format!(
                    "checkpoint: {} bytes, expected {} and a list of at most {MAX_BAD_PAGES} bad pages for this array's geometry",
                    snapshot.len(),
                    list_end + 4
                ));
            }
            gear = Some(self.gear(g as usize, "checkpoint")?);
            for (i, r) in snapshot[list_end + 4..].chunks(10).enumerate() {
                bad.push(self.bad_page(r, &format!("checkpoint bad page {}", i + 1))?);
            }
        }
        for (n, r) in records.iter().enumerate() {
            let at = || format!("record {} of the log", n + 1);
            if r.len() != RECORD_BYTES {
                return Err(format!(
                    "{}: {} bytes, expected {RECORD_BYTES}",
                    at(),
                    r.len()
                ));
            }
            let disk = u16::from_le_bytes([r[1], r[2]]) as usize;
            let chunk = u64::from_le_bytes(r[3..].try_into().expect("11 bytes"));
            if r[0] == GEAR {
                gear = Some(self.gear(disk, &at())?);
                continue;
            }
            if r[0] == BAD {
                bad.push(self.bad_page(&r[1..], &at())?);
                continue;
            }
            if !(self.low..self.disks).contains(&disk) || chunk >= self.chunks {
                return Err(format!(
                    "{}: chunk {chunk} of disk {disk} is outside disks {}..{} × {} chunks",
                    at(),
                    self.low,
                    self.disks,
                    self.chunks
                ));
            }
            match r[0] {
                NEWER_ORIGINAL => dirty.insert((disk, chunk), Side::Original),
                NEWER_REPLICA => dirty.insert((disk, chunk), Side::Replica),
                CLEAN => dirty.remove(&(disk, chunk)),
                t => return Err(format!("{}: unknown tag {t}", at())),
            };
        }
        Ok((gear, dirty, bad))
    }

    fn key(&self, slot: u64) -> (usize, u64) {
        (self.low + (slot / self.chunks) as usize, slot % self.chunks)
    }

    /// A checkpoint's bitmap (from its gear byte on) into `dirty`.
    fn read_bitmap(
        &self,
        b: &[u8],
        dirty: &mut BTreeMap<(usize, u64), Side>,
    ) -> Result<(), String> {
        let slots = self.bits() / 2;
        for (i, &byte) in b.iter().enumerate().skip(1) {
            for k in (0..8).step_by(2).filter(|k| byte >> k & 3 != 0) {
                let side = state(byte >> k & 3)
                    .ok_or_else(|| format!("checkpoint byte {i}: chunk state {}", byte >> k & 3))?;
                // The last byte's unused bits are zero: a slot past the array would be a
                // disk it does not have (found by the metadata_logs fuzz target).
                let slot = ((i - 1) as u64 * 8 + k) / 2;
                if slot >= slots {
                    return Err(format!(
                        "checkpoint byte {i}: a dirty chunk in slot {slot}, past the array's {slots}"
                    ));
                }
                dirty.insert(self.key(slot), side);
            }
        }
        Ok(())
    }

    /// A checkpoint's list into `dirty`; where the list ends.
    fn read_list(
        &self,
        b: &[u8],
        dirty: &mut BTreeMap<(usize, u64), Side>,
    ) -> Result<usize, String> {
        let Some(count) = b.get(1..5) else {
            return Err(format!(
                "checkpoint: {} bytes, a list of dirty chunks needs a count at bytes 1–4",
                b.len()
            ));
        };
        let count = u32::from_le_bytes(count.try_into().expect("4 bytes")) as u64;
        let slots = self.bits() / 2;
        if count > slots {
            return Err(format!(
                "checkpoint: a list of {count} dirty chunks, the array has {slots} that can be"
            ));
        }
        let (mut at, mut next) = (5, 0u64);
        for _ in 0..count {
            let (v, len) = get_varint(&b[at..])
                .ok_or_else(|| format!("checkpoint byte {at}: a truncated or overlong varint"))?;
            let side = state((v & 3) as u8)
                .ok_or_else(|| format!("checkpoint byte {at}: chunk state {}", v & 3))?;
            let slot = next
                .checked_add(v >> 2)
                .filter(|&s| s < slots)
                .ok_or_else(|| {
                    format!(
                        "checkpoint byte {at}: chunk slot past the array's {slots} (gap {})",
                        v >> 2
                    )
                })?;
            dirty.insert(self.key(slot), side);
            next = slot + 1;
            at += len;
        }
        Ok(at)
    }

    fn gear(&self, g: usize, at: &str) -> Result<usize, String> {
        if g < self.gears {
            Ok(g)
        } else {
            Err(format!("{at}: gear {g}, the array has {}", self.gears))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SHAPE: Shape = Shape {
        low: 2,
        disks: 5,
        chunks: 10,
        gears: 3,
    };

    #[test]
    fn a_dirty_list_longer_than_the_bitmap_is_checkpointed_as_two_bits_a_chunk() {
        // 3 disks × 10 chunks × 2 bits = 60 bits → 8 bytes, after the gear byte; then the
        // bad pages' count and at most 4,096 of 10 bytes.
        assert_eq!(SHAPE.snapshot_bytes(), 9 + 4 + 40_960);
        // Slots (disk − 2) × 10 + chunk: 0, 3, 15, 21, 29. As a list: 5 header bytes and
        // varints 1, 10, 45, 22, 30 (one byte each) = 10 bytes, not shorter than 9.
        let dirty = [
            ((2, 0), Side::Original),
            ((2, 3), Side::Replica),
            ((3, 5), Side::Original),
            ((4, 1), Side::Replica),
            ((4, 9), Side::Replica),
        ];
        let b = SHAPE.snapshot(1, dirty.into_iter(), &[]);
        // Slot s is bits 2s–2s+1 of the bitmap from byte 1: slot 0 (01) and 3 (10) in byte
        // 1 = 0b1000_0001; 15 in byte 4, bits 6–7; 21 in byte 6 and 29 in byte 8, bits 2–3.
        // No bad page: a zero count.
        assert_eq!(
            b,
            vec![
                1,
                0b1000_0001,
                0,
                0,
                0b0100_0000,
                0,
                0b0000_1000,
                0,
                0b0000_1000,
                0,
                0,
                0,
                0
            ]
        );
        let (gear, back, bad) = SHAPE.replay(&b, &[]).unwrap();
        assert_eq!((gear, bad), (Some(1), vec![]));
        assert_eq!(back, dirty.into_iter().collect());
    }

    #[test]
    fn a_short_dirty_list_is_checkpointed_as_a_list_of_gaps() {
        // Slots 0, 3 and 29: (gap << 2 | state) = 0 << 2 | 1, (3 − 1) << 2 | 2 = 10 and
        // (29 − 4) << 2 | 2 = 102; after the gear with the high bit and the count: 8 bytes,
        // shorter than the 9-byte bitmap.
        let dirty = [
            ((2, 0), Side::Original),
            ((2, 3), Side::Replica),
            ((4, 9), Side::Replica),
        ];
        let b = SHAPE.snapshot(1, dirty.into_iter(), &[]);
        assert_eq!(b, vec![0x81, 3, 0, 0, 0, 1, 10, 102, 0, 0, 0, 0]);
        let (gear, back, bad) = SHAPE.replay(&b, &[]).unwrap();
        assert_eq!((gear, bad), (Some(1), vec![]));
        assert_eq!(back, dirty.into_iter().collect());
        // A gap past 31 takes two varint bytes: disk 2's chunk 300 of 1,000 is slot 300,
        // 300 << 2 | 1 = 1201 = 0x4b1 → 0xb1, 0x09 (low seven bits first).
        let wide = Shape {
            chunks: 1000,
            ..SHAPE
        };
        let b = wide.snapshot(0, [((2, 300), Side::Original)].into_iter(), &[]);
        assert_eq!(b, vec![0x80, 1, 0, 0, 0, 0xb1, 0x09, 0, 0, 0, 0]);
        assert_eq!(
            wide.replay(&b, &[]).unwrap().1,
            [((2, 300), Side::Original)].into_iter().collect()
        );
        // Bad pages follow either encoding. Gear 1's member 2, page 0x0102: the gear in the
        // high byte, little-endian.
        let b = SHAPE.snapshot(0, [].into_iter(), &[(1, 2, 0x0102), (0, 4, 7)]);
        assert_eq!(&b[..9], &[0x80, 0, 0, 0, 0, 2, 0, 0, 0]);
        assert_eq!(b.len(), 9 + 20);
        assert_eq!(
            &b[9..19],
            &[4, 0, 7, 0, 0, 0, 0, 0, 0, 0],
            "sorted: gear 0 first"
        );
        assert_eq!(&b[19..29], &[2, 1, 2, 1, 0, 0, 0, 0, 0, 0]);
        let (_, _, bad) = SHAPE.replay(&b, &[]).unwrap();
        assert_eq!(bad, vec![(0, 4, 7), (1, 2, 0x0102)]);
    }

    #[test]
    fn a_bitmap_with_a_chunk_in_its_last_bytes_padding_is_refused() {
        // 30 slots in 8 bytes: the last byte holds slots 28 and 29, then two unused slots.
        // Slot 29 dirty is fine; slot 30 would be disk 5 of a five-disk array.
        let mut b = vec![0u8; 1 + 8 + 4];
        b[8] = 1 << 2;
        let (_, dirty, _) = SHAPE.replay(&b, &[]).unwrap();
        assert_eq!(dirty.keys().copied().collect::<Vec<_>>(), vec![(4, 9)]);
        b[8] = 1 << 4;
        assert_eq!(
            SHAPE.replay(&b, &[]).unwrap_err(),
            "checkpoint byte 8: a dirty chunk in slot 30, past the array's 30"
        );
    }

    #[test]
    fn a_malformed_list_is_refused_naming_the_byte() {
        let cases: [(&[u8], &str); 6] = [
            (
                &[0x80, 1],
                "checkpoint: 2 bytes, a list of dirty chunks needs a count at bytes 1–4",
            ),
            (
                &[0x80, 31, 0, 0, 0],
                "checkpoint: a list of 31 dirty chunks, the array has 30 that can be",
            ),
            (
                &[0x80, 1, 0, 0, 0, 0x85],
                "checkpoint byte 5: a truncated or overlong varint",
            ),
            (&[0x80, 1, 0, 0, 0, 3], "checkpoint byte 5: chunk state 3"),
            (&[0x80, 1, 0, 0, 0, 0], "checkpoint byte 5: chunk state 0"),
            (
                &[0x80, 2, 0, 0, 0, 1, 29 << 2 | 1],
                "checkpoint byte 6: chunk slot past the array's 30 (gap 29)",
            ),
        ];
        for (b, want) in cases {
            assert_eq!(SHAPE.replay(b, &[]).unwrap_err(), want, "{b:?}");
        }
        // An overlong varint: ten bytes whose last carries more than 64 bits' worth.
        let mut b = vec![0x80, 1, 0, 0, 0];
        b.extend_from_slice(&[0xff; 9]);
        b.push(0x02);
        assert_eq!(
            SHAPE.replay(&b, &[]).unwrap_err(),
            "checkpoint byte 5: a truncated or overlong varint"
        );
        // A list with the bad pages' count missing, and a gear the array lacks.
        assert_eq!(
            SHAPE.replay(&[0x80, 0, 0, 0, 0], &[]).unwrap_err(),
            "checkpoint: 5 bytes, expected 9 and a list of at most 4096 bad pages for this array's geometry"
        );
        assert_eq!(
            SHAPE
                .replay(&[0x83, 0, 0, 0, 0, 0, 0, 0, 0], &[])
                .unwrap_err(),
            "checkpoint: gear 3, the array has 3"
        );
    }

    const WIDE: Shape = Shape {
        low: 1,
        disks: 4,
        chunks: 700,
        gears: 3,
    };

    /// Dirty lists from a handful of chunks (encoded as a list) to most of the 2,100 (the
    /// 526-byte bitmap is shorter past about 300).
    fn dirty_lists() -> impl Strategy<Value = BTreeMap<(usize, u64), Side>> {
        let entry = (1usize..4, 0u64..700, any::<bool>())
            .prop_map(|(d, c, r)| ((d, c), if r { Side::Replica } else { Side::Original }));
        prop_oneof![
            prop::collection::vec(entry.clone(), 0..8).prop_map(|v| v.into_iter().collect()),
            prop::collection::vec(entry.clone(), 0..200).prop_map(|v| v.into_iter().collect()),
            prop::collection::vec(entry, 0..2100).prop_map(|v| v.into_iter().collect()),
        ]
    }

    proptest! {
        #[test]
        fn two_disjoint_sources_checkpoint_as_their_union(
            dirty in dirty_lists(),
            second in prop::collection::vec(any::<bool>(), 2100),
        ) {
            // The layer's dirty list and its copied chunks waiting for their clean record.
            let (a, b): (Vec<_>, Vec<_>) = dirty
                .iter()
                .map(|(&k, &s)| (k, s))
                .enumerate()
                .partition(|(i, _)| !second[*i]);
            let (a, b) = (Ordered(a.into_iter().map(|p| p.1)), Ordered(b.into_iter().map(|p| p.1)));
            let both = WIDE.checkpoint(1, &Both(&a, &b), &[]);
            prop_assert_eq!(&both, &WIDE.snapshot(1, dirty.iter().map(|(&k, &s)| (k, s)), &[]));
            prop_assert_eq!(WIDE.replay(&both, &[]).unwrap().1, dirty);
        }

        #[test]
        fn any_dirty_list_round_trips_and_a_corrupted_checkpoint_is_an_error_never_a_panic(
            dirty in dirty_lists(),
            gear in 0usize..3,
            bad in prop::collection::vec((0usize..3, 0usize..4, any::<u64>()), 0..3),
            cuts in prop::collection::vec((0u8..3, any::<prop::sample::Index>(), 0u8..8, any::<u8>()), 8),
        ) {
            let b = WIDE.snapshot(gear, dirty.iter().map(|(&k, &s)| (k, s)), &bad);
            prop_assert!(b.len() as u64 <= WIDE.snapshot_bytes());
            let (g, back, mut got) = WIDE.replay(&b, &[]).unwrap();
            let mut want = bad.clone();
            want.sort_unstable();
            got.sort_unstable();
            prop_assert_eq!((g, &back, got), (Some(gear), &dirty, want));
            // Flip a bit, cut or extend: the parser answers, and never with more chunks
            // than exist.
            for (how, at, bit, byte) in cuts {
                let mut m = b.clone();
                match how {
                    0 => m[at.index(b.len())] ^= 1 << bit,
                    1 => m.truncate(at.index(b.len())),
                    _ => m.push(byte),
                }
                if let Ok((_, d, _)) = WIDE.replay(&m, &[]) {
                    prop_assert!(d.len() <= 3 * 700);
                }
            }
        }
    }

    #[test]
    fn records_after_a_checkpoint_are_replayed_in_order() {
        let snap = SHAPE.snapshot(2, [((3, 1), Side::Original)].into_iter(), &[(0, 1, 5)]);
        let recs: Vec<Vec<u8>> = [
            Record::Clean { disk: 3, chunk: 1 },
            Record::Gear(0),
            Record::Newer {
                disk: 4,
                chunk: 2,
                side: Side::Replica,
            },
            Record::Newer {
                disk: 3,
                chunk: 1,
                side: Side::Replica,
            },
            Record::Clean { disk: 4, chunk: 2 },
            Record::Bad {
                level: 2,
                disk: 4,
                page: 9,
            },
        ]
        .iter()
        .map(|r| r.encode().to_vec())
        .collect();
        let (gear, dirty, bad) = SHAPE.replay(&snap, &recs).unwrap();
        assert_eq!(gear, Some(0));
        assert_eq!(dirty, [((3, 1), Side::Replica)].into_iter().collect());
        assert_eq!(bad, vec![(0, 1, 5), (2, 4, 9)]);
        // An empty log: no gear, nothing dirty.
        assert_eq!(
            SHAPE.replay(&[], &[]).unwrap(),
            (None, BTreeMap::new(), vec![])
        );
    }

    #[test]
    fn a_log_of_another_geometry_is_refused_naming_the_record() {
        let bad = Record::Newer {
            disk: 1,
            chunk: 0,
            side: Side::Original,
        };
        let e = SHAPE.replay(&[], &[bad.encode().to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: chunk 0 of disk 1 is outside disks 2..5 × 10 chunks"
        );
        let e = SHAPE
            .replay(&[], &[Record::Gear(3).encode().to_vec()])
            .unwrap_err();
        assert_eq!(e, "record 1 of the log: gear 3, the array has 3");
        let e = SHAPE.replay(&[0; 4], &[]).unwrap_err();
        assert_eq!(
            e,
            "checkpoint: 4 bytes, expected 13 and a list of at most 4096 bad pages for this array's geometry"
        );
        let far = Record::Bad {
            level: 3,
            disk: 0,
            page: 0,
        };
        let e = SHAPE.replay(&[], &[far.encode().to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: bad page of member 0 of gear 3, the array has 3 gears of at most 5 disks"
        );
        let e = SHAPE.replay(&[], &[vec![9; RECORD_BYTES]]).unwrap_err();
        assert!(e.starts_with("record 1 of the log: "), "{e}");
    }
}
