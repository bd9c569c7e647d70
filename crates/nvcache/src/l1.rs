//! The L1 data cache in front of the LLC: set-associative, LRU, write-back and
//! write-allocate, holding each line's data so that a write-back carries the line's bytes.

use crate::line::{self, Line};
use crate::llc::{Llc, Memory};
use serde::Serialize;

/// Hits, misses and write-backs of the L1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct L1Stats {
    pub accesses: u64,
    pub misses: u64,
    pub writebacks: u64,
}

pub struct L1 {
    sets: usize,
    ways: usize,
    tag: Vec<u64>,
    dirty: Vec<bool>,
    stamp: Vec<u64>,
    data: Vec<Line>,
    clock: u64,
    pub stats: L1Stats,
}

impl L1 {
    /// An L1 of `bytes` bytes and `ways` ways of 64-byte lines (a power-of-two set count).
    pub fn new(bytes: u64, ways: u32) -> Result<Self, String> {
        let lines = bytes / line::LINE_BYTES as u64;
        if ways == 0 || lines == 0 || !lines.is_multiple_of(u64::from(ways)) {
            return Err(format!(
                "L1 of {bytes} bytes, {ways} ways: expected whole sets of 64-byte lines"
            ));
        }
        let sets = lines / u64::from(ways);
        if !sets.is_power_of_two() || lines > 1 << 20 {
            return Err(format!(
                "L1 of {bytes} bytes, {ways} ways: expected a power-of-two set count and at most 1 Mi lines"
            ));
        }
        let n = lines as usize;
        Ok(L1 {
            sets: sets as usize,
            ways: ways as usize,
            tag: vec![u64::MAX; n],
            dirty: vec![false; n],
            stamp: vec![0; n],
            data: vec![[0; 8]; n],
            clock: 0,
            stats: L1Stats::default(),
        })
    }

    /// One access to line `key`; a store writes `store` at byte offset `off` of the line.
    /// Misses read the line from the LLC; dirty victims are written back to it.
    #[inline]
    pub fn access(
        &mut self,
        key: u64,
        off: usize,
        store: Option<&[u8]>,
        llc: &mut Llc,
        mem: &mut Memory,
    ) {
        self.stats.accesses += 1;
        self.clock += 1;
        let base = (key as usize & (self.sets - 1)) * self.ways;
        let slot = match line::way_of(&self.tag[base..base + self.ways], key) {
            Some(w) => base + w,
            None => self.miss(base, key, llc, mem),
        };
        self.stamp[slot] = self.clock;
        if let Some(bytes) = store {
            line::put_bytes(&mut self.data[slot], off, bytes);
            self.dirty[slot] = true;
        }
    }

    /// A miss in the set at `base`: the victim's slot, refilled with line `key`. Kept out of
    /// line so that the hit path (97 % of accesses) inlines small.
    #[cold]
    #[inline(never)]
    fn miss(&mut self, base: usize, key: u64, llc: &mut Llc, mem: &mut Memory) -> usize {
        self.stats.misses += 1;
        let ways = &self.tag[base..base + self.ways];
        let w = ways.iter().position(|&t| t == u64::MAX).unwrap_or_else(|| {
            (0..self.ways)
                .min_by_key(|&w| self.stamp[base + w])
                .expect("ways > 0")
        });
        let slot = base + w;
        if self.tag[slot] != u64::MAX && self.dirty[slot] {
            self.stats.writebacks += 1;
            llc.write(self.tag[slot], &self.data[slot], mem);
        }
        self.data[slot] = llc.read(key, mem);
        self.tag[slot] = key;
        self.dirty[slot] = false;
        slot
    }

    /// Writes every dirty line back to the LLC (the end of a trace) and empties the L1.
    pub fn flush(&mut self, llc: &mut Llc, mem: &mut Memory) {
        for slot in 0..self.tag.len() {
            if self.tag[slot] != u64::MAX && self.dirty[slot] {
                self.stats.writebacks += 1;
                llc.write(self.tag[slot], &self.data[slot], mem);
            }
            self.tag[slot] = u64::MAX;
            self.dirty[slot] = false;
        }
    }
}
