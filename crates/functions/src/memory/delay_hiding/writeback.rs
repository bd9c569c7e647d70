//! The buffer cache's traffic to storage, when a storage device is in the loop: blocks
//! read on a miss, and dirty blocks written back as Linux's page cache does — when a dirty
//! block is evicted, when its file is `fsync`ed, and by the flusher thread, which wakes
//! every `writeback_interval` (`dirty_writeback_centisecs`, 5 s) and writes back every
//! file dirty for at least `dirty_expire` (`dirty_expire_centisecs`, 30 s). As the kernel's
//! `inode->dirtied_when`, a file's age runs from when it went from clean to dirty, and an
//! expired file is written whole (all its dirty blocks, in block order).
//!
//! Sans-I/O: the owner says what happened ([`Writeback::dirty`], [`Writeback::evicted`],
//! [`Writeback::sync_file`], [`Writeback::advance`]) and drains the I/O it implies from
//! [`Writeback::out`]. Not modelled (written down in `docs/functions/delay-hiding.md`):
//! background writeback past `dirty_background_ratio` and throttling of writers past
//! `dirty_ratio`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use wattio_core::Nanos;

/// One block to read from or write to storage, at `at` on the trace's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageIo {
    pub at: Nanos,
    pub file: u32,
    pub block: u64,
    pub write: bool,
}

pub struct Writeback {
    expire: Nanos,
    interval: Nanos,
    /// Dirty blocks, by file then block (a file's are one range).
    dirty: BTreeSet<(u32, u64)>,
    /// Per dirty file: when it went from clean to dirty.
    dirtied_when: HashMap<u32, Nanos>,
    /// Files in the order they became dirty, with that time; an entry whose time is no
    /// longer the file's `dirtied_when` is stale (the file was cleaned since) and skipped.
    aging: VecDeque<(Nanos, u32)>,
    pub out: Vec<StorageIo>,
    pub written_back: WrittenBack,
}

/// Blocks written back, by what wrote them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WrittenBack {
    pub evicted: u64,
    pub synced: u64,
    pub expired: u64,
}

impl Writeback {
    /// `expire`, `interval` > 0 (the config checks them).
    pub fn new(expire: Nanos, interval: Nanos) -> Writeback {
        assert!(interval > 0, "writeback interval");
        Writeback {
            expire,
            interval,
            dirty: BTreeSet::new(),
            dirtied_when: HashMap::new(),
            aging: VecDeque::new(),
            out: Vec::new(),
            written_back: WrittenBack::default(),
        }
    }

    /// Dirty blocks held.
    pub fn dirty_blocks(&self) -> usize {
        self.dirty.len()
    }

    /// A host write made `block` of `file` dirty at `at` (the flusher has run up to `at`).
    pub fn dirty(&mut self, at: Nanos, file: u32, block: u64) {
        if self.dirty.insert((file, block)) && !self.dirtied_when.contains_key(&file) {
            self.dirtied_when.insert(file, at);
            self.aging.push_back((at, file));
        }
    }

    /// `block` of `file` left the cache at `at`: written back first if dirty.
    pub fn evicted(&mut self, at: Nanos, file: u32, block: u64) {
        if self.dirty.remove(&(file, block)) {
            self.out.push(StorageIo {
                at,
                file,
                block,
                write: true,
            });
            self.written_back.evicted += 1;
            if self
                .dirty
                .range((file, 0)..=(file, u64::MAX))
                .next()
                .is_none()
            {
                self.dirtied_when.remove(&file);
            }
        }
    }

    /// `fsync` of `file` at `at`: every dirty block of it written back.
    pub fn sync_file(&mut self, at: Nanos, file: u32) {
        let n = self.clean_file(at, file);
        self.written_back.synced += n;
    }

    fn clean_file(&mut self, at: Nanos, file: u32) -> u64 {
        let blocks: Vec<(u32, u64)> = self
            .dirty
            .range((file, 0)..=(file, u64::MAX))
            .copied()
            .collect();
        for k in &blocks {
            self.dirty.remove(k);
            self.out.push(StorageIo {
                at,
                file,
                block: k.1,
                write: true,
            });
        }
        self.dirtied_when.remove(&file);
        blocks.len() as u64
    }

    /// Run the flusher's wakeups up to and including `now`. Wakeups that find nothing
    /// expired are skipped arithmetically, so a long gap costs nothing.
    pub fn advance(&mut self, now: Nanos) {
        loop {
            // The oldest file still dirty under its current age.
            while let Some(&(t, f)) = self.aging.front() {
                if self.dirtied_when.get(&f) == Some(&t) {
                    break;
                }
                self.aging.pop_front();
            }
            let Some(&(t, _)) = self.aging.front() else {
                break;
            };
            // Its first wakeup at or after its expiry.
            let due = t.saturating_add(self.expire);
            let wake = due.div_ceil(self.interval).saturating_mul(self.interval);
            if wake > now {
                break;
            }
            while let Some(&(t, f)) = self.aging.front() {
                if t.saturating_add(self.expire) > wake {
                    break;
                }
                self.aging.pop_front();
                if self.dirtied_when.get(&f) == Some(&t) {
                    let n = self.clean_file(wake, f);
                    self.written_back.expired += n;
                }
            }
        }
    }

    /// The end of the trace: the flusher runs until nothing is dirty.
    pub fn finish(&mut self) {
        self.advance(Nanos::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn writes(w: &mut Writeback) -> Vec<(Nanos, u32, u64)> {
        w.out
            .drain(..)
            .map(|io| {
                assert!(io.write);
                (io.at, io.file, io.block)
            })
            .collect()
    }

    #[test]
    fn an_expired_file_is_written_whole_at_the_flushers_next_wakeup() {
        let mut w = Writeback::new(30 * S, 5 * S);
        w.dirty(S, 7, 3);
        w.dirty(20 * S, 7, 1); // same file: its age still runs from 1 s
        w.dirty(2 * S, 8, 0);
        w.dirty(6 * S, 9, 0);
        // File 7 expires at 31 s and file 8 at 32 s: the 35 s wakeup takes both.
        w.advance(34 * S + 999_999_999);
        assert!(w.out.is_empty());
        w.advance(35 * S);
        assert_eq!(
            writes(&mut w),
            [(35 * S, 7, 1), (35 * S, 7, 3), (35 * S, 8, 0)]
        );
        // File 9 (6 s) expires at 36 s: the 40 s wakeup.
        w.advance(39 * S);
        assert!(w.out.is_empty());
        w.advance(41 * S);
        assert_eq!(writes(&mut w), [(40 * S, 9, 0)]);
        assert_eq!(w.written_back.expired, 4);
        assert_eq!(w.dirty_blocks(), 0);
    }

    #[test]
    fn a_file_cleaned_and_dirtied_again_ages_from_the_second_time() {
        let mut w = Writeback::new(30 * S, 5 * S);
        w.dirty(S, 4, 0);
        w.sync_file(3 * S, 4);
        assert_eq!(writes(&mut w), [(3 * S, 4, 0)]);
        w.dirty(12 * S, 4, 2);
        // The stale 1 s age would expire at the 35 s wakeup; the 12 s one at 45 s.
        w.advance(44 * S);
        assert!(w.out.is_empty());
        w.advance(45 * S);
        assert_eq!(writes(&mut w), [(45 * S, 4, 2)]);
        assert_eq!(
            w.written_back,
            WrittenBack {
                evicted: 0,
                synced: 1,
                expired: 1
            }
        );
    }

    #[test]
    fn an_evicted_dirty_block_is_written_at_once_and_a_clean_one_not_at_all() {
        let mut w = Writeback::new(30 * S, 5 * S);
        w.dirty(S, 1, 5);
        w.dirty(S, 1, 6);
        w.evicted(2 * S, 1, 5);
        w.evicted(2 * S, 1, 9);
        assert_eq!(writes(&mut w), [(2 * S, 1, 5)]);
        // Block 6 still ages from 1 s.
        w.finish();
        assert_eq!(writes(&mut w), [(35 * S, 1, 6)]);
        // A file whose last dirty block was evicted is clean: nothing left to age.
        w.dirty(40 * S, 2, 0);
        w.evicted(41 * S, 2, 0);
        w.finish();
        assert_eq!(writes(&mut w), [(41 * S, 2, 0)]);
        assert_eq!(
            w.written_back,
            WrittenBack {
                evicted: 2,
                synced: 0,
                expired: 1
            }
        );
    }

    #[test]
    fn a_gap_of_centuries_and_times_near_the_end_of_the_clock_do_not_loop_or_overflow() {
        let mut w = Writeback::new(30 * S, 5 * S);
        w.advance(Nanos::MAX / 2);
        w.dirty(Nanos::MAX - S, 3, 0);
        w.finish();
        // Its expiry is past the clock's end: the last wakeup the clock holds takes it.
        assert_eq!(writes(&mut w).len(), 1);
        assert_eq!(w.dirty_blocks(), 0);
    }
}
