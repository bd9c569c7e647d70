//! The last-level cache: an n-way set-associative PRAM array (LRU, write-back), optionally
//! with one STT-RAM write buffer per set (the hybrid cache, HC) and wear levelling. Every
//! line carries its data, so every write counts exactly the cells it programs, by cause:
//! n_lower (fills from memory), n_upper (write-backs from L1), n_swap (write-buffer
//! contents moved back into PRAM on an ownership change), n_wb (STT-RAM writes) and n_wl
//! (lines moved by wear levelling).

use crate::cell_wear::CellWear;
use crate::line::{self, Encoding, Flags, Line, Programmed, LINE_BITS};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// No way: an unowned write buffer, no last write-accessed block.
const NONE: u8 = u8::MAX;

/// The hybrid cache's ownership policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hybrid {
    /// N_th: successive write-buffer misses before the buffer changes owner.
    pub n_th: u32,
    /// Whose successive misses N_miss counts (the paper's text admits both).
    #[serde(default)]
    pub miss_count: MissCount,
}

impl Hybrid {
    /// N_th with the default reading of the miss counter.
    pub fn new(n_th: u32) -> Hybrid {
        Hybrid {
            n_th,
            miss_count: MissCount::Block,
        }
    }
}

/// What the miss counter's N_miss counts: the paper says it keeps "the number of write
/// buffer misses of the last write-accessed cache block" (CB_last) and that CB_last takes
/// the buffer "when its value of N_miss reaches" N_th, but also calls N_miss "the number of
/// successive write buffer misses" without naming a block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MissCount {
    /// CB_last's own run of misses: a miss by another block restarts the count at 1 for
    /// it (wattio's reading, the default: "its value of N_miss").
    #[default]
    Block,
    /// The set's run of misses since the owner last wrote, whoever missed; CB_last (the
    /// block that missed last) takes the buffer when the run reaches N_th.
    Set,
}

/// Wear levelling of the PRAM array (both may be on).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WearLevelling {
    /// Set-level rotation: after every this many PRAM line writes, every logical set moves
    /// to the next physical set (all lines rewritten, counted as n_wl).
    pub set_rotation: Option<u64>,
    /// Line-level rotation: after every this many PRAM line writes to one set, that set's
    /// lines move one way over (its lines rewritten, counted as n_wl).
    pub line_rotation: Option<u64>,
}

/// The LLC's geometry and schemes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlcConfig {
    pub bytes: u64,
    pub ways: u32,
    pub encoding: Encoding,
    #[serde(default)]
    pub hybrid: Option<Hybrid>,
    #[serde(default)]
    pub wear_levelling: WearLevelling,
    /// Charge a line read before every PRAM write, as RBW does, with any encoding: the
    /// PCM-cache paper's data inverting sits on top of RBW (`rbw+diN`), and its reads are
    /// part of that design's energy. Bits and wear do not change.
    #[serde(default)]
    pub read_before_write: bool,
}

impl LlcConfig {
    /// Whether each PRAM write is priced with a line read before it.
    pub fn reads_before_write(&self) -> bool {
        self.read_before_write || self.encoding.reads_before_write()
    }

    pub fn sets(&self) -> u64 {
        self.bytes / (self.ways as u64 * line::LINE_BYTES as u64)
    }

    /// Checks the geometry (power-of-two set count, 1..=255 ways) and the schemes.
    pub fn check(&self) -> Result<(), String> {
        if self.ways == 0 || self.ways >= u32::from(NONE) {
            return Err(format!("LLC ways {}: expected 1 to 254", self.ways));
        }
        let sets = self.sets();
        if sets == 0 || !sets.is_power_of_two() || sets * self.ways as u64 * 64 != self.bytes {
            return Err(format!(
                "LLC of {} bytes, {} ways: expected a power-of-two number of 64-byte-line sets",
                self.bytes, self.ways
            ));
        }
        if sets * self.ways as u64 > 1 << 24 {
            return Err(format!(
                "LLC of {} lines: at most 16 Mi lines",
                sets * self.ways as u64
            ));
        }
        if let Some(h) = self.hybrid {
            if h.n_th == 0 {
                return Err("hybrid cache N_th 0: expected at least 1".into());
            }
        }
        let wl = self.wear_levelling;
        if wl.set_rotation == Some(0) || wl.line_rotation == Some(0) {
            return Err("wear-levelling interval 0: expected at least 1 write".into());
        }
        self.encoding.check()
    }
}

/// Bits programmed by cause and event counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Traffic {
    /// PRAM bits programmed by fills from memory.
    pub n_lower: u64,
    /// PRAM bits programmed by write-backs from the L1.
    pub n_upper: u64,
    /// PRAM bits programmed when a write buffer's line goes back to its PRAM block.
    pub n_swap: u64,
    /// STT-RAM bits programmed in the write buffers.
    pub n_wb: u64,
    /// PRAM bits programmed by wear-levelling moves.
    pub n_wl: u64,
    /// Reads from the L1 (its misses) and how many hit.
    pub reads: u64,
    pub read_hits: u64,
    /// Write-backs from the L1 and how many hit.
    pub writes: u64,
    pub write_hits: u64,
    /// Reads served from a write buffer (the owner's line).
    pub buffer_reads: u64,
    /// PRAM line writes (fills, upper writes, swaps; not wear-levelling moves).
    pub pram_writes: u64,
    /// Write-buffer writes, write-buffer misses, ownership transfers (swaps).
    pub buffer_writes: u64,
    pub buffer_misses: u64,
    pub swaps: u64,
    /// Wear-levelling line moves.
    pub wl_moves: u64,
    /// Dirty lines written back to memory.
    pub memory_writebacks: u64,
}

impl Traffic {
    /// PRAM bit changes of all causes.
    pub fn pram_bits(&self) -> u64 {
        self.n_lower + self.n_upper + self.n_swap + self.n_wl
    }
}

/// A hash of line keys: one multiply (keys are line numbers, not attacker-chosen; SipHash
/// cost more than the rest of an LLC miss).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Maps keyed by line number.
pub type LineMap<V> = HashMap<u64, V, BuildHasherDefault<KeyHasher>>;

/// Main memory below the LLC: the content of every line it has seen (unseen lines are zero).
#[derive(Default)]
pub struct Memory {
    pub lines: LineMap<Line>,
}

impl Memory {
    pub fn get(&self, key: u64) -> Line {
        self.lines.get(&key).copied().unwrap_or([0; 8])
    }
}

/// The PRAM (+ STT-RAM) last-level cache.
pub struct Llc {
    cfg: LlcConfig,
    sets: usize,
    ways: usize,
    /// Per logical slot (set * ways + way): tag (line key; `u64::MAX` invalid), dirty, LRU
    /// stamp, stored bits and DI flags (the cells of the frame the slot maps to).
    tag: Vec<u64>,
    dirty: Vec<bool>,
    stamp: Vec<u64>,
    stored: Vec<Line>,
    flags: Vec<Flags>,
    clock: u64,
    /// Per set: the write buffer's line, its owner way, CB_last and N_miss.
    buffer: Vec<Line>,
    owner: Vec<u8>,
    cb_last: Vec<u8>,
    n_miss: Vec<u32>,
    /// Wear levelling: the set offset, each set's way offset, the write counts since the
    /// last rotation.
    set_off: usize,
    way_off: Vec<u32>,
    since_set_rot: u64,
    since_line_rot: Vec<u64>,
    /// Per physical frame: writes of each data and flag cell, whole-line programs (BL, a
    /// write of every cell), and bits programmed in all (the heat map).
    cell_writes: CellWear,
    full_writes: Vec<u32>,
    frame_bits: Vec<u64>,
    /// Per set: writes of each STT-RAM cell of the write buffer.
    buffer_cell_writes: CellWear,
    pub traffic: Traffic,
}

impl Llc {
    pub fn new(cfg: LlcConfig) -> Result<Self, String> {
        cfg.check()?;
        let sets = cfg.sets() as usize;
        let ways = cfg.ways as usize;
        let frames = sets * ways;
        let flag_bits = cfg.encoding.flag_bits() as usize;
        let hybrid = cfg.hybrid.is_some();
        Ok(Llc {
            cfg,
            sets,
            ways,
            tag: vec![u64::MAX; frames],
            dirty: vec![false; frames],
            stamp: vec![0; frames],
            stored: vec![[0; 8]; frames],
            flags: vec![[0; 4]; frames],
            clock: 0,
            buffer: vec![[0; 8]; if hybrid { sets } else { 0 }],
            owner: vec![NONE; sets],
            cb_last: vec![NONE; sets],
            n_miss: vec![0; sets],
            set_off: 0,
            way_off: vec![0; sets],
            since_set_rot: 0,
            since_line_rot: vec![0; sets],
            cell_writes: CellWear::new(frames, LINE_BITS as usize + flag_bits),
            full_writes: vec![0; frames],
            frame_bits: vec![0; frames],
            buffer_cell_writes: CellWear::new(if hybrid { sets } else { 0 }, LINE_BITS as usize),
            traffic: Traffic::default(),
        })
    }

    pub fn config(&self) -> &LlcConfig {
        &self.cfg
    }

    fn set_of(&self, key: u64) -> usize {
        (key as usize) & (self.sets - 1)
    }

    fn find(&self, set: usize, key: u64) -> Option<usize> {
        let base = set * self.ways;
        line::way_of(&self.tag[base..base + self.ways], key)
    }

    fn touch(&mut self, slot: usize) {
        self.clock += 1;
        self.stamp[slot] = self.clock;
    }

    /// The physical frame a logical slot maps to under the current wear-levelling offsets.
    fn frame(&self, set: usize, way: usize) -> usize {
        let ps = (set + self.set_off) & (self.sets - 1);
        let pw = (way + self.way_off[set] as usize) % self.ways;
        ps * self.ways + pw
    }

    /// The logical line a slot holds (its write buffer's copy if it owns the buffer).
    fn content(&self, set: usize, way: usize) -> Line {
        if self.owner[set] as usize == way {
            self.buffer[set]
        } else {
            let slot = set * self.ways + way;
            line::decode(self.cfg.encoding, &self.stored[slot], &self.flags[slot])
        }
    }

    /// Counts the cells a program of `frame` wrote.
    fn wear(&mut self, frame: usize, p: &Programmed) {
        self.frame_bits[frame] += u64::from(p.bits);
        if self.cfg.encoding == Encoding::Bl {
            self.full_writes[frame] += 1;
            return;
        }
        // A frame's row: its 512 data cells (words 0..8), then its flag cells.
        let mut mask = [0u64; 12];
        mask[..8].copy_from_slice(&p.data);
        mask[8..].copy_from_slice(&p.flags);
        self.cell_writes.add(frame, &mask);
    }

    /// Writes `new` into the PRAM cells of a slot; returns the bits programmed.
    fn program(&mut self, set: usize, way: usize, new: &Line) -> u64 {
        let slot = set * self.ways + way;
        let p = line::write(
            self.cfg.encoding,
            &mut self.stored[slot],
            &mut self.flags[slot],
            new,
        );
        let frame = self.frame(set, way);
        self.wear(frame, &p);
        self.traffic.pram_writes += 1;
        self.after_pram_write(set);
        u64::from(p.bits)
    }

    fn after_pram_write(&mut self, set: usize) {
        let wl = self.cfg.wear_levelling;
        if let Some(n) = wl.line_rotation {
            self.since_line_rot[set] += 1;
            if self.since_line_rot[set] >= n {
                self.since_line_rot[set] = 0;
                self.rotate_ways(set);
            }
        }
        if let Some(n) = wl.set_rotation {
            self.since_set_rot += 1;
            if self.since_set_rot >= n {
                self.since_set_rot = 0;
                self.rotate_sets();
            }
        }
    }

    /// Moves the stored cells of slot `from` into the frame that slot `to`'s cells occupied
    /// before (a wear-levelling move): the frame's cells change from `to`'s to `from`'s.
    fn move_cells(&mut self, frame: usize, from: usize, prev: usize) {
        let p = if self.cfg.encoding == Encoding::Bl {
            Programmed {
                data: [u64::MAX; 8],
                flags: [0; 4],
                bits: LINE_BITS,
            }
        } else {
            let mut p = Programmed {
                data: [0; 8],
                flags: [0; 4],
                bits: 0,
            };
            for i in 0..8 {
                p.data[i] = self.stored[from][i] ^ self.stored[prev][i];
            }
            for i in 0..4 {
                p.flags[i] = self.flags[from][i] ^ self.flags[prev][i];
            }
            p.counted()
        };
        self.wear(frame, &p);
        self.traffic.n_wl += u64::from(p.bits);
        self.traffic.wl_moves += 1;
    }

    fn rotate_ways(&mut self, set: usize) {
        // Slot (set, w) moves into the frame slot (set, w + 1) held.
        for w in 0..self.ways {
            let next = (w + 1) % self.ways;
            let frame = self.frame(set, next);
            self.move_cells(frame, set * self.ways + w, set * self.ways + next);
        }
        self.way_off[set] = (self.way_off[set] + 1) % self.ways as u32;
    }

    fn rotate_sets(&mut self) {
        let frames = self.sets * self.ways;
        let mut occupant = vec![0usize; frames];
        for s in 0..self.sets {
            for w in 0..self.ways {
                occupant[self.frame(s, w)] = s * self.ways + w;
            }
        }
        self.set_off = (self.set_off + 1) & (self.sets - 1);
        for s in 0..self.sets {
            for w in 0..self.ways {
                let f = self.frame(s, w);
                self.move_cells(f, s * self.ways + w, occupant[f]);
            }
        }
    }

    /// The slot a new line goes to: an invalid way if any, else the least recently used;
    /// its line is written back to memory if dirty.
    fn evict(&mut self, set: usize, mem: &mut Memory) -> usize {
        let base = set * self.ways;
        let way = (0..self.ways)
            .find(|&w| self.tag[base + w] == u64::MAX)
            .unwrap_or_else(|| {
                (0..self.ways)
                    .min_by_key(|&w| self.stamp[base + w])
                    .expect("ways > 0")
            });
        let slot = base + way;
        if self.tag[slot] != u64::MAX && self.dirty[slot] {
            let data = self.content(set, way);
            mem.lines.insert(self.tag[slot], data);
            self.traffic.memory_writebacks += 1;
        }
        if self.owner[set] as usize == way {
            // The owner leaves: its line went to memory from the buffer, which is free now.
            self.owner[set] = NONE;
        }
        if self.cb_last[set] as usize == way {
            self.cb_last[set] = NONE;
            self.n_miss[set] = 0;
        }
        self.tag[slot] = u64::MAX;
        self.dirty[slot] = false;
        way
    }

    /// An L1 miss on line `key`: the line's content, filled from memory on an LLC miss.
    pub fn read(&mut self, key: u64, mem: &mut Memory) -> Line {
        self.traffic.reads += 1;
        let set = self.set_of(key);
        if let Some(way) = self.find(set, key) {
            self.traffic.read_hits += 1;
            if self.owner[set] as usize == way {
                self.traffic.buffer_reads += 1;
            }
            self.touch(set * self.ways + way);
            return self.content(set, way);
        }
        let way = self.evict(set, mem);
        let data = mem.get(key);
        let bits = self.program(set, way, &data);
        self.traffic.n_lower += bits;
        let slot = set * self.ways + way;
        self.tag[slot] = key;
        self.touch(slot);
        data
    }

    /// A dirty line `key` written back from the L1 with content `data`.
    pub fn write(&mut self, key: u64, data: &Line, mem: &mut Memory) {
        self.traffic.writes += 1;
        let set = self.set_of(key);
        let way = match self.find(set, key) {
            Some(w) => {
                self.traffic.write_hits += 1;
                w
            }
            None => {
                // Write-allocate without a fetch: the L1 supplies the whole line.
                let w = self.evict(set, mem);
                self.tag[set * self.ways + w] = key;
                let bits = self.program(set, w, data);
                self.traffic.n_upper += bits;
                let slot = set * self.ways + w;
                self.dirty[slot] = true;
                self.touch(slot);
                return;
            }
        };
        let slot = set * self.ways + way;
        self.dirty[slot] = true;
        self.touch(slot);
        match self.cfg.hybrid {
            None => {
                let bits = self.program(set, way, data);
                self.traffic.n_upper += bits;
            }
            Some(h) => self.write_hybrid(set, way, data, h),
        }
    }

    fn write_hybrid(&mut self, set: usize, way: usize, data: &Line, h: Hybrid) {
        let owner = self.owner[set];
        if owner as usize == way || owner == NONE {
            // A write-buffer hit (or a free buffer, taken at once).
            self.owner[set] = way as u8;
            self.cb_last[set] = way as u8;
            self.n_miss[set] = 0;
            self.buffer_write(set, data);
            return;
        }
        self.traffic.buffer_misses += 1;
        if self.cb_last[set] as usize == way || h.miss_count == MissCount::Set {
            self.n_miss[set] += 1;
        } else {
            self.n_miss[set] = 1;
        }
        self.cb_last[set] = way as u8;
        if self.n_miss[set] >= h.n_th {
            // Ownership moves: the old owner's line goes back into its PRAM block (a swap),
            // then this block's line goes into the buffer.
            let back = self.buffer[set];
            let bits = self.program(set, owner as usize, &back);
            self.traffic.n_swap += bits;
            self.traffic.swaps += 1;
            self.owner[set] = way as u8;
            self.n_miss[set] = 0;
            self.buffer_write(set, data);
        } else {
            let bits = self.program(set, way, data);
            self.traffic.n_upper += bits;
        }
    }

    fn buffer_write(&mut self, set: usize, data: &Line) {
        let mut changed = [0u64; 8];
        for (i, c) in changed.iter_mut().enumerate() {
            *c = self.buffer[set][i] ^ data[i];
        }
        self.buffer_cell_writes.add(set, &changed);
        self.traffic.n_wb += u64::from(changed.iter().map(|w| w.count_ones()).sum::<u32>());
        self.traffic.buffer_writes += 1;
        self.buffer[set] = *data;
    }

    /// The content of line `key` if the LLC holds it.
    pub fn peek(&self, key: u64) -> Option<Line> {
        let set = self.set_of(key);
        self.find(set, key).map(|w| self.content(set, w))
    }

    /// The owner of a set's write buffer, if any (tests, reports).
    pub fn buffer_owner(&self, key: u64) -> Option<u64> {
        let set = self.set_of(key);
        let o = self.owner[set];
        (o != NONE).then(|| self.tag[set * self.ways + o as usize])
    }

    /// The most-written PRAM cell's write count.
    pub fn max_cell_writes(&self) -> u64 {
        (0..self.sets * self.ways)
            .map(|f| self.cell_writes.row_max(f) + u64::from(self.full_writes[f]))
            .max()
            .unwrap_or(0)
    }

    /// The most-written STT-RAM write-buffer cell's write count (0 without buffers).
    pub fn max_buffer_cell_writes(&self) -> u64 {
        (0..self.buffer_cell_writes.rows())
            .map(|s| self.buffer_cell_writes.row_max(s))
            .max()
            .unwrap_or(0)
    }

    /// Bits programmed per physical frame, set-major (`sets` rows of `ways`): the heat map.
    pub fn heat_map(&self) -> &[u64] {
        &self.frame_bits
    }

    pub fn sets(&self) -> usize {
        self.sets
    }

    pub fn ways(&self) -> usize {
        self.ways
    }
}
