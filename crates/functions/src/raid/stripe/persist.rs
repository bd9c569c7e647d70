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
//! **On the log.** A record is 10 bytes: the member (u16) and the member page (u64), little-
//! endian. A checkpoint (when the journal is full) is the count (u32) then the same 10 bytes
//! per bad page. The list is bounded (`max_bad_pages`, md keeps 512 ranges a device): past
//! it a page is bad in memory only, and every write to its row fails with EIO (md fails the
//! whole device then), so no acknowledged write depends on an unrecorded page.

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

/// A bad page: member `disk`'s page `page` (member bytes `page · 4096 ..`).
pub fn record(disk: usize, page: u64) -> [u8; RECORD_BYTES] {
    let mut b = [0; RECORD_BYTES];
    b[..2].copy_from_slice(&(disk as u16).to_le_bytes());
    b[2..].copy_from_slice(&page.to_le_bytes());
    b
}

/// What the log can name: `disks` members of `pages` pages each, at most `max` bad pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub disks: usize,
    pub pages: u64,
    pub max: u64,
}

impl Shape {
    /// A checkpoint's size at most, bytes.
    pub fn snapshot_bytes(&self) -> u64 {
        4 + self.max * RECORD_BYTES as u64
    }

    /// A checkpoint of the recorded bad pages (in a fixed order: the same set, the same bytes).
    pub fn snapshot<'a>(&self, bad: impl Iterator<Item = &'a (usize, u64)>) -> Vec<u8> {
        let mut v: Vec<(usize, u64)> = bad.copied().collect();
        v.sort_unstable();
        let mut b = Vec::with_capacity(4 + v.len() * RECORD_BYTES);
        b.extend_from_slice(&(v.len() as u32).to_le_bytes());
        for (d, p) in v {
            b.extend_from_slice(&record(d, p));
        }
        b
    }

    fn entry(&self, r: &[u8], at: &dyn Fn() -> String) -> Result<(usize, u64), String> {
        let disk = u16::from_le_bytes([r[0], r[1]]) as usize;
        let page = u64::from_le_bytes(r[2..RECORD_BYTES].try_into().expect("10 bytes"));
        if disk >= self.disks || page >= self.pages {
            return Err(format!(
                "{}: page {page} of member {disk} is outside {} members × {} pages",
                at(),
                self.disks,
                self.pages
            ));
        }
        Ok((disk, page))
    }

    /// Replay a recovered log: its checkpoint (empty: none yet), then its records in order.
    pub fn replay(
        &self,
        snapshot: &[u8],
        records: &[Vec<u8>],
    ) -> Result<FxHashSet<(usize, u64)>, String> {
        let mut bad = FxHashSet::default();
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
            if n as u64 > self.max || snapshot.len() != 4 + n * RECORD_BYTES {
                return Err(format!(
                    "checkpoint: {} bytes for {n} pages (at most {}, {RECORD_BYTES} bytes each)",
                    snapshot.len(),
                    self.max
                ));
            }
            for (i, r) in snapshot[4..].chunks(RECORD_BYTES).enumerate() {
                bad.insert(self.entry(r, &|| format!("checkpoint entry {}", i + 1))?);
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
            bad.insert(self.entry(r, &at)?);
        }
        if bad.len() as u64 > self.max {
            return Err(format!(
                "{} bad pages, the list holds at most {}",
                bad.len(),
                self.max
            ));
        }
        Ok(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: Shape = Shape {
        disks: 3,
        pages: 100,
        max: 4,
    };

    #[test]
    fn a_record_is_the_member_then_the_page_little_endian() {
        assert_eq!(record(2, 0x0102), [2, 0, 0x02, 0x01, 0, 0, 0, 0, 0, 0]);
        // 4 + 4 × 10 bytes.
        assert_eq!(SHAPE.snapshot_bytes(), 44);
    }

    #[test]
    fn checkpoint_then_records_replay_to_the_union() {
        let snap = SHAPE.snapshot([(1, 7), (0, 3)].iter());
        assert_eq!(snap.len(), 24);
        assert_eq!(&snap[..4], &[2, 0, 0, 0]);
        // Sorted: (0, 3) first.
        assert_eq!(&snap[4..14], &record(0, 3));
        let recs = vec![record(2, 99).to_vec(), record(1, 7).to_vec()];
        let bad = SHAPE.replay(&snap, &recs).unwrap();
        assert_eq!(bad, [(0, 3), (1, 7), (2, 99)].into_iter().collect());
        assert!(SHAPE.replay(&[], &[]).unwrap().is_empty());
    }

    #[test]
    fn a_log_of_another_geometry_is_refused_naming_where() {
        let e = SHAPE.replay(&[], &[record(3, 0).to_vec()]).unwrap_err();
        assert_eq!(
            e,
            "record 1 of the log: page 0 of member 3 is outside 3 members × 100 pages"
        );
        let e = SHAPE.replay(&[], &[record(0, 100).to_vec()]).unwrap_err();
        assert!(e.contains("page 100 of member 0"), "{e}");
        let e = SHAPE.replay(&[], &[vec![0; 9]]).unwrap_err();
        assert_eq!(e, "record 1 of the log: 9 bytes, expected 10");
        let e = SHAPE.replay(&[5, 0, 0, 0], &[]).unwrap_err();
        assert_eq!(
            e,
            "checkpoint: 4 bytes for 5 pages (at most 4, 10 bytes each)"
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
