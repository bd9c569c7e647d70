//! RAID-5's persisted bad-page list (Linux md's bad-block log): a metadata log
//! ([`wattio_core::journal::Journal`]) in the last blocks of member 0.
//!
//! **Why it must survive a crash.** A page marked bad is never read or written again; its
//! content lives in the row's parity. A page whose *write* failed may still *read* without
//! error (a cache below the array holding the old bytes, a drive remapping the sector on
//! the next write only): forgotten at a restart, such a page would be read directly and
//! return the bytes from before the failed write. So a write whose row marked a page bad is
//! acknowledged only once the record saying so is durable, and the list is read back before
//! the array serves its first request.
//!
//! **On the log.** A record is 10 bytes: a tag and member (u16) and a number (u64), little-
//! endian. The tag is the member field's top two bits:
//!
//! | tag | record | number |
//! |---|---|---|
//! | `00` | member's page is bad | the member page |
//! | `10` | member's page is good again (rebuilt onto the spare) | the member page |
//! | `01` | member is being replaced by the spare | stripes moved onto the spare so far |
//!
//! A checkpoint (when the journal is full) is the count (u32) then one 10-byte entry per bad
//! page, sorted, and the replacement's entry last (if one has started). The list is bounded
//! (`max_bad_pages`, md keeps 512 ranges a device): past it a page is bad in memory only,
//! and every write to its row fails with EIO (md fails the whole device then), so no
//! acknowledged write depends on an unrecorded page. Logs written before the replacement
//! records existed hold only `00` records and read back unchanged.

use wattio_core::fxhash::FxHashSet;

/// The owner name in the log's header.
pub const OWNER: &str = "raid5-bad-pages";
/// The journal's record area (each log write is at least one 4 KiB block: 64 group
/// commits, more records when they come together, before a checkpoint).
pub const JOURNAL_BYTES: u64 = 256 << 10;
/// A record's bytes.
pub const RECORD_BYTES: usize = 10;
/// The default bound on the list.
pub const DEFAULT_MAX_BAD_PAGES: u64 = 4096;
/// The largest bound a config may set (a checkpoint of 10 MiB).
pub const MAX_MAX_BAD_PAGES: u64 = 1 << 20;

/// The tag of a record naming a page good again (see the module docs).
const CLEARED: u16 = 0x8000;
/// The tag of a replacement's record.
const REPLACED: u16 = 0x4000;
const TAGS: u16 = CLEARED | REPLACED;

fn tagged(tag: u16, disk: usize, n: u64) -> [u8; RECORD_BYTES] {
    let mut b = [0; RECORD_BYTES];
    b[..2].copy_from_slice(&(tag | disk as u16).to_le_bytes());
    b[2..].copy_from_slice(&n.to_le_bytes());
    b
}

/// A bad page: member `disk`'s page `page` (member bytes `page · 4096 ..`).
pub fn record(disk: usize, page: u64) -> [u8; RECORD_BYTES] {
    tagged(0, disk, page)
}

/// Member `disk`'s page `page` is good again: rebuilt onto the spare that now holds it.
pub fn cleared(disk: usize, page: u64) -> [u8; RECORD_BYTES] {
    tagged(CLEARED, disk, page)
}

/// Member `disk` is being replaced by the spare, whose copy holds its stripes
/// `0..through`.
pub fn replaced(disk: usize, through: u64) -> [u8; RECORD_BYTES] {
    tagged(REPLACED, disk, through)
}

/// What a log holds: the bad pages and the replacement (member, stripes moved), if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub bad: FxHashSet<(usize, u64)>,
    pub replaced: Option<(usize, u64)>,
}

/// What the log can name: `disks` members of `pages` pages each, at most `max` bad pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub disks: usize,
    pub pages: u64,
    pub max: u64,
    /// The array's stripes (a replacement moves at most these).
    pub stripes: u64,
    /// A spare is configured: the log may hold a replacement.
    pub spare: bool,
}

/// One decoded record or checkpoint entry.
enum Entry {
    Bad(usize, u64),
    Cleared(usize, u64),
    Replaced(usize, u64),
}

impl Shape {
    /// A checkpoint's size at most, bytes (the replacement's entry only with a spare).
    pub fn snapshot_bytes(&self) -> u64 {
        4 + (self.max + u64::from(self.spare)) * RECORD_BYTES as u64
    }

    /// A checkpoint of the recorded bad pages (in a fixed order: the same set, the same
    /// bytes) and the replacement, if one has started.
    pub fn snapshot<'a>(
        &self,
        bad: impl Iterator<Item = &'a (usize, u64)>,
        replacement: Option<(usize, u64)>,
    ) -> Vec<u8> {
        let mut v: Vec<(usize, u64)> = bad.copied().collect();
        v.sort_unstable();
        let n = v.len() + usize::from(replacement.is_some());
        let mut b = Vec::with_capacity(4 + n * RECORD_BYTES);
        b.extend_from_slice(&(n as u32).to_le_bytes());
        for (d, p) in v {
            b.extend_from_slice(&record(d, p));
        }
        if let Some((m, through)) = replacement {
            b.extend_from_slice(&replaced(m, through));
        }
        b
    }

    fn entry(&self, r: &[u8], at: &dyn Fn() -> String) -> Result<Entry, String> {
        let field = u16::from_le_bytes([r[0], r[1]]);
        let (tag, disk) = (field & TAGS, (field & !TAGS) as usize);
        let n = u64::from_le_bytes(r[2..RECORD_BYTES].try_into().expect("10 bytes"));
        if disk >= self.disks {
            return Err(format!(
                "{}: member {disk} is outside the {} members",
                at(),
                self.disks
            ));
        }
        match tag {
            REPLACED if !self.spare => Err(format!(
                "{}: member {disk} is being replaced by a spare, but the array names no `spare`",
                at()
            )),
            REPLACED if n > self.stripes => Err(format!(
                "{}: {n} stripes of member {disk} moved onto the spare, the array has {}",
                at(),
                self.stripes
            )),
            REPLACED => Ok(Entry::Replaced(disk, n)),
            _ if n >= self.pages => Err(format!(
                "{}: page {n} of member {disk} is outside {} members × {} pages",
                at(),
                self.disks,
                self.pages
            )),
            CLEARED => Ok(Entry::Cleared(disk, n)),
            0 => Ok(Entry::Bad(disk, n)),
            _ => Err(format!("{}: tag bits {:#06x} name no record", at(), tag)),
        }
    }

    /// Replay a recovered log: its checkpoint (empty: none yet), then its records in order.
    pub fn replay(&self, snapshot: &[u8], records: &[Vec<u8>]) -> Result<Recovered, String> {
        let mut got = Recovered::default();
        let apply = |got: &mut Recovered, e: Entry, at: &dyn Fn() -> String| {
            match e {
                Entry::Bad(d, p) => {
                    got.bad.insert((d, p));
                }
                Entry::Cleared(d, p) => {
                    got.bad.remove(&(d, p));
                }
                Entry::Replaced(d, through) => match got.replaced {
                    Some((m, _)) if m != d => {
                        return Err(format!(
                        "{}: member {d} is being replaced, but member {m} already was (one spare)",
                        at()
                    ))
                    }
                    _ => got.replaced = Some((d, through)),
                },
            }
            Ok(())
        };
        if !snapshot.is_empty() {
            let n = snapshot
                .get(..4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
                .ok_or_else(|| {
                    format!(
                        "checkpoint: {} bytes, too short for its count",
                        snapshot.len()
                    )
                })?;
            let most = self.max + u64::from(self.spare);
            if n as u64 > most || snapshot.len() != 4 + n * RECORD_BYTES {
                return Err(format!(
                    "checkpoint: {} bytes for {n} entries (at most {most}, {RECORD_BYTES} bytes each)",
                    snapshot.len(),
                ));
            }
            for (i, r) in snapshot[4..].chunks(RECORD_BYTES).enumerate() {
                let at = || format!("checkpoint entry {}", i + 1);
                match self.entry(r, &at)? {
                    Entry::Cleared(..) => {
                        return Err(format!("{}: a checkpoint lists no cleared pages", at()))
                    }
                    e => apply(&mut got, e, &at)?,
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
            let e = self.entry(r, &at)?;
            apply(&mut got, e, &at)?;
        }
        if got.bad.len() as u64 > self.max {
            return Err(format!(
                "{} bad pages, the list holds at most {}",
                got.bad.len(),
                self.max
            ));
        }
        Ok(got)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape {
        disks: 3,
        pages: 100,
        max: 4,
        stripes: 25,
        spare: false,
    };
    const SPARE: Shape = Shape {
        spare: true,
        ..SHAPE
    };

    fn bad(pages: &[(usize, u64)]) -> FxHashSet<(usize, u64)> {
        pages.iter().copied().collect()
    }

    #[test]
    fn a_record_is_the_tagged_member_then_the_number_little_endian() {
        assert_eq!(record(2, 0x0102), [2, 0, 0x02, 0x01, 0, 0, 0, 0, 0, 0]);
        assert_eq!(cleared(2, 7), [2, 0x80, 7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(replaced(1, 0x0300), [1, 0x40, 0, 3, 0, 0, 0, 0, 0, 0]);
        // 4 + 4 × 10 bytes; with a spare, room for the replacement's entry.
        assert_eq!(SHAPE.snapshot_bytes(), 44);
        assert_eq!(SPARE.snapshot_bytes(), 54);
    }

    #[test]
    fn checkpoint_then_records_replay_to_the_union() {
        let snap = SHAPE.snapshot([(1, 7), (0, 3)].iter(), None);
        assert_eq!(snap.len(), 24);
        assert_eq!(&snap[..4], &[2, 0, 0, 0]);
        // Sorted: (0, 3) first.
        assert_eq!(&snap[4..14], &record(0, 3));
        let recs = vec![record(2, 99).to_vec(), record(1, 7).to_vec()];
        let got = SHAPE.replay(&snap, &recs).unwrap();
        assert_eq!(got.bad, bad(&[(0, 3), (1, 7), (2, 99)]));
        assert_eq!(got.replaced, None);
        assert_eq!(SHAPE.replay(&[], &[]).unwrap(), Recovered::default());
    }

    #[test]
    fn a_replacement_and_its_cleared_pages_replay_in_order() {
        // Member 1's pages 3 and 9 bad; its replacement has moved 2 stripes (pages 0..8),
        // page 3 rebuilt onto the spare and cleared; then page 5 fails on the spare.
        let snap = SPARE.snapshot([(1, 9), (1, 3)].iter(), Some((1, 1)));
        assert_eq!(snap.len(), 4 + 3 * 10);
        assert_eq!(&snap[..4], &[3, 0, 0, 0]);
        assert_eq!(&snap[24..34], &replaced(1, 1));
        let recs = [replaced(1, 2), cleared(1, 3), record(1, 5)].map(|r| r.to_vec());
        let got = SPARE.replay(&snap, &recs).unwrap();
        assert_eq!(got.bad, bad(&[(1, 5), (1, 9)]));
        assert_eq!(got.replaced, Some((1, 2)));
        // The checkpoint of that state reads back the same.
        let again = SPARE.snapshot(got.bad.iter(), got.replaced);
        assert_eq!(SPARE.replay(&again, &[]).unwrap(), got);
        // Cleared pages are records only: a checkpoint lists what is bad.
        let mut odd = SPARE.snapshot([].iter(), None);
        odd[..4].copy_from_slice(&1u32.to_le_bytes());
        odd.extend_from_slice(&cleared(0, 1));
        assert_eq!(
            SPARE.replay(&odd, &[]).unwrap_err(),
            "checkpoint entry 1: a checkpoint lists no cleared pages"
        );
    }

    #[test]
    fn a_replacement_the_config_cannot_hold_is_refused_naming_where() {
        let e = SHAPE.replay(&[], &[replaced(0, 1).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: member 0 is being replaced by a spare, but the array names no `spare`"
        );
        let e = SPARE.replay(&[], &[replaced(0, 26).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: 26 stripes of member 0 moved onto the spare, the array has 25"
        );
        let two = [replaced(0, 1), replaced(2, 0)].map(|r| r.to_vec());
        assert_eq!(
            SPARE.replay(&[], &two).unwrap_err(),
            "record 2 of the log: member 2 is being replaced, but member 0 already was (one spare)"
        );
        let e = SPARE
            .replay(&[], &[tagged(0xc000, 0, 1).to_vec()])
            .unwrap_err();
        assert_eq!(e, "record 1 of the log: tag bits 0xc000 name no record");
    }

    #[test]
    fn a_log_of_another_geometry_is_refused_naming_where() {
        let e = SHAPE.replay(&[], &[record(3, 0).to_vec()]).unwrap_err();
        assert_eq!(e, "record 1 of the log: member 3 is outside the 3 members");
        let e = SHAPE.replay(&[], &[record(0, 100).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: page 100 of member 0 is outside 3 members × 100 pages"
        );
        let e = SHAPE.replay(&[], &[vec![0; 9]]).unwrap_err();
        assert_eq!(e, "record 1 of the log: 9 bytes, expected 10");
        let e = SHAPE.replay(&[5, 0, 0, 0], &[]).unwrap_err();
        assert_eq!(
            e,
            "checkpoint: 4 bytes for 5 entries (at most 4, 10 bytes each)"
        );
        let e = SHAPE.replay(&[1, 0], &[]).unwrap_err();
        assert_eq!(e, "checkpoint: 2 bytes, too short for its count");
        let five: Vec<Vec<u8>> = (0..5).map(|p| record(0, p).to_vec()).collect();
        assert_eq!(
            SHAPE.replay(&[], &five).unwrap_err(),
            "5 bad pages, the list holds at most 4"
        );
    }
}
