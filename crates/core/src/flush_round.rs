//! Copies whose completion may be logged only once a FLUSH has made their source durable.
//!
//! A function that copies data with its own I/O and logs each finished copy in a journal
//! (PARAID marks a chunk clean, FS2 adds a replica) runs into the same hazard. The copy
//! reads its source as the drive has it, which may be a host write still in the drive's
//! volatile cache. The copy's FUA write then makes that version durable at the
//! destination only. If a crash loses the cached source, the two places differ, yet the
//! log says they are equal. The swarm found this in PARAID first, and then in FS2
//! (seed 1661).
//!
//! The rule both follow: a finished copy waits, and a *flush round* (a FLUSH of every
//! drive that may cache a source, sent after the copy completed) covers it. When the
//! round's last flush is back, the copies it covered may be logged; if a flush failed,
//! they may not (their sources may never have reached the media). One round is out at a
//! time, and copies that finish while it is out wait for the next one. An entry that
//! becomes moot (its data was written again, its replica dropped) leaves before its round
//! ends and is then neither logged nor failed. [`FlushRounds`] keeps that bookkeeping,
//! written once. The function decides when a round goes out, submits the flushes, and
//! writes the records.

use std::collections::BTreeMap;

/// Finished copies waiting for a flush round, by key (a chunk, a replica block), each
/// with what the function logs about it.
#[derive(Debug)]
pub struct FlushRounds<K, V> {
    /// Each entry, and whether the round out covers it.
    waiting: BTreeMap<K, (V, bool)>,
    /// Entries the round out does not cover.
    uncovered: usize,
    /// Flushes of the round out not back yet (0: no round is out).
    out: u32,
    /// A flush of the round out failed.
    failed: bool,
}

/// A round that ended: the entries it covered, oldest key first, and whether every
/// flush succeeded.
#[derive(Debug, PartialEq, Eq)]
pub struct Round<K, V> {
    pub ok: bool,
    pub covered: Vec<(K, V)>,
}

impl<K: Ord + Copy, V: Copy> Default for FlushRounds<K, V> {
    fn default() -> Self {
        FlushRounds {
            waiting: BTreeMap::new(),
            uncovered: 0,
            out: 0,
            failed: false,
        }
    }
}

impl<K: Ord + Copy, V: Copy> FlushRounds<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    /// A copy finished: `key` waits for the next round. A key already waiting is replaced
    /// and waits for the next round too (this copy completed after the round out went).
    pub fn add(&mut self, key: K, value: V) {
        if let Some((_, covered)) = self.waiting.insert(key, (value, false)) {
            if !covered {
                return;
            }
        }
        self.uncovered += 1;
    }

    /// `key` no longer waits (its copy became moot); what it would have logged.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let (value, covered) = self.waiting.remove(key)?;
        self.uncovered -= usize::from(!covered);
        Some(value)
    }

    pub fn contains(&self, key: &K) -> bool {
        self.waiting.contains_key(key)
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// The waiting entries, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (K, V)> + Clone + '_ {
        self.waiting.iter().map(|(&k, &(v, _))| (k, v))
    }

    /// A round is out.
    pub fn is_out(&self) -> bool {
        self.out > 0
    }

    /// A round would cover something: none is out and an entry waits that no round
    /// covered.
    pub fn due(&self) -> bool {
        self.out == 0 && self.uncovered > 0
    }

    /// A round goes out with `flushes` flushes: it covers every waiting entry. With no
    /// flush to wait for (no drive caches a source), the round ends at once and is
    /// returned.
    ///
    /// # Panics
    /// If a round is out already (one at a time: call when [`due`](Self::due)).
    pub fn start(&mut self, flushes: u32) -> Option<Round<K, V>> {
        assert_eq!(self.out, 0, "one flush round at a time");
        for (_, covered) in self.waiting.values_mut() {
            *covered = true;
        }
        self.uncovered = 0;
        self.failed = false;
        self.out = flushes;
        (flushes == 0).then(|| self.end())
    }

    /// One flush of the round out is back (`ok`: it succeeded); the round, if that was its
    /// last. A flush when no round is out is ignored (`None`).
    pub fn flushed(&mut self, ok: bool) -> Option<Round<K, V>> {
        if self.out == 0 {
            return None;
        }
        self.failed |= !ok;
        self.out -= 1;
        (self.out == 0).then(|| self.end())
    }

    fn end(&mut self) -> Round<K, V> {
        let covered: Vec<(K, V)> = self
            .waiting
            .iter()
            .filter(|(_, &(_, c))| c)
            .map(|(&k, &(v, _))| (k, v))
            .collect();
        for (k, _) in &covered {
            self.waiting.remove(k);
        }
        Round {
            ok: !self.failed,
            covered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_covers_what_finished_before_it_went_out() {
        let mut f = FlushRounds::<u64, char>::new();
        assert!(!f.due() && !f.is_out());
        f.add(3, 'a');
        f.add(1, 'b');
        assert!(f.due());
        assert_eq!(f.start(2), None, "two flushes to wait for");
        assert!(f.is_out() && !f.due());
        // Finished while the round is out: waits for the next one.
        f.add(2, 'c');
        assert!(!f.due(), "one round at a time");
        assert_eq!(f.flushed(true), None, "one flush is still out");
        assert_eq!(
            f.flushed(true),
            Some(Round {
                ok: true,
                covered: vec![(1, 'b'), (3, 'a')]
            })
        );
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![(2, 'c')]);
        assert!(f.due());
        assert_eq!(f.flushed(true), None, "no round is out");
    }

    #[test]
    fn a_failed_flush_fails_the_round_and_a_moot_entry_leaves_it() {
        let mut f = FlushRounds::<u64, ()>::new();
        for k in 0..3 {
            f.add(k, ());
        }
        f.start(2);
        assert_eq!(
            f.remove(&1),
            Some(()),
            "written again while the round is out"
        );
        f.add(7, ());
        assert_eq!(f.remove(&7), Some(()));
        assert!(!f.due(), "the uncovered count went back to 0");
        assert_eq!(f.flushed(false), None);
        assert_eq!(
            f.flushed(true),
            Some(Round {
                ok: false,
                covered: vec![(0, ()), (2, ())]
            }),
            "one failed flush fails the round"
        );
        assert!(f.is_empty());
        // The next round starts with a clean slate.
        f.add(4, ());
        f.start(1);
        assert_eq!(f.flushed(true).map(|r| r.ok), Some(true));
    }

    #[test]
    fn a_copy_again_of_a_covered_key_waits_for_the_next_round() {
        let mut f = FlushRounds::<u64, u8>::new();
        f.add(5, 1);
        f.add(5, 2);
        assert_eq!(f.len(), 1);
        f.start(1);
        f.add(5, 3);
        assert!(f.contains(&5));
        assert_eq!(
            f.flushed(true),
            Some(Round {
                ok: true,
                covered: vec![]
            }),
            "the copy that finished after the round went out is not covered by it"
        );
        assert_eq!(
            f.start(0),
            Some(Round {
                ok: true,
                covered: vec![(5, 3)]
            }),
            "no drive to flush: the round ends at once"
        );
        assert!(f.is_empty() && !f.due());
    }
}
