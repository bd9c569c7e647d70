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
//! the member page in the chunk field). A checkpoint (when the journal is full) is the gear
//! (one byte), then 2 bits per chunk of every disk that can be spun down (0 clean, 1
//! original newer, 2 replica newer), then the bad pages (a u32 count, 10 bytes each): its
//! size at most is fixed by the geometry, so the log's region is too
//! (`Shape::snapshot_bytes`).

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

/// What is persisted, by geometry: disks `low..disks` can be spun down (the lowest gear's
/// disks never are), each of `chunks` chunks; `gears` gears.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub low: usize,
    pub disks: usize,
    pub chunks: u64,
    pub gears: usize,
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

    /// A checkpoint of `gear`, the dirty chunks' sides and the gears' bad pages (at most
    /// `MAX_BAD_PAGES`, sorted).
    pub fn snapshot(
        &self,
        gear: usize,
        dirty: impl Iterator<Item = ((usize, u64), Side)>,
        bad: &[BadPage],
    ) -> Vec<u8> {
        let mut b = vec![0; self.bitmap_end()];
        b[0] = gear as u8;
        for ((disk, chunk), side) in dirty {
            let bit = ((disk - self.low) as u64 * self.chunks + chunk) * 2;
            b[1 + (bit / 8) as usize] |= side_code(side) << (bit % 8);
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
            let end = self.bitmap_end();
            let count = snapshot
                .get(end..end + 4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64);
            if count.is_none_or(|n| {
                n > MAX_BAD_PAGES || snapshot.len() as u64 != end as u64 + 4 + n * 10
            }) {
                return Err(format!(
                    "checkpoint: {} bytes, expected {} and a list of at most {MAX_BAD_PAGES} bad pages for this array's geometry",
                    snapshot.len(),
                    end + 4
                ));
            }
            gear = Some(self.gear(snapshot[0] as usize, "checkpoint")?);
            for (i, r) in snapshot[end + 4..].chunks(10).enumerate() {
                bad.push(self.bad_page(r, &format!("checkpoint bad page {}", i + 1))?);
            }
            for (i, &byte) in snapshot[1..end].iter().enumerate() {
                for k in (0..8).step_by(2).filter(|k| byte >> k & 3 != 0) {
                    let bit = i as u64 * 8 + k;
                    let side = match byte >> k & 3 {
                        NEWER_ORIGINAL => Side::Original,
                        NEWER_REPLICA => Side::Replica,
                        v => return Err(format!("checkpoint byte {}: chunk state {v}", i + 1)),
                    };
                    let slot = bit / 2;
                    let key = (self.low + (slot / self.chunks) as usize, slot % self.chunks);
                    dirty.insert(key, side);
                }
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

    const SHAPE: Shape = Shape {
        low: 2,
        disks: 5,
        chunks: 10,
        gears: 3,
    };

    #[test]
    fn a_checkpoint_is_two_bits_a_chunk_of_the_disks_that_can_sleep_then_the_bad_pages() {
        // 3 disks × 10 chunks × 2 bits = 60 bits → 8 bytes, after the gear byte; then the
        // bad pages' count and at most 4,096 of 10 bytes.
        assert_eq!(SHAPE.snapshot_bytes(), 9 + 4 + 40_960);
        let dirty = [
            ((2, 0), Side::Original),
            ((2, 3), Side::Replica),
            ((4, 9), Side::Replica),
        ];
        let b = SHAPE.snapshot(1, dirty.into_iter(), &[]);
        // Chunk (2,0) is bit 0 (01), (2,3) bits 6–7 (10): byte 1 = 0b1000_0001; (4,9) is
        // slot 29, bits 58–59: byte 1 + 7, bits 2–3. No bad page: a zero count.
        assert_eq!(
            b,
            vec![1, 0b1000_0001, 0, 0, 0, 0, 0, 0, 0b0000_1000, 0, 0, 0, 0]
        );
        let (gear, back, bad) = SHAPE.replay(&b, &[]).unwrap();
        assert_eq!((gear, bad), (Some(1), vec![]));
        assert_eq!(back, dirty.into_iter().collect());
        // Gear 1's member 2, page 0x0102: the gear in the high byte, little-endian.
        let b = SHAPE.snapshot(0, [].into_iter(), &[(1, 2, 0x0102), (0, 4, 7)]);
        assert_eq!(b.len(), 9 + 4 + 20);
        assert_eq!(&b[9..13], &[2, 0, 0, 0]);
        assert_eq!(
            &b[13..23],
            &[4, 0, 7, 0, 0, 0, 0, 0, 0, 0],
            "sorted: gear 0 first"
        );
        assert_eq!(&b[23..33], &[2, 1, 2, 1, 0, 0, 0, 0, 0, 0]);
        let (_, _, bad) = SHAPE.replay(&b, &[]).unwrap();
        assert_eq!(bad, vec![(0, 4, 7), (1, 2, 0x0102)]);
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
