//! A run: an L1 and an LLC fed by a memory trace. Load/store traces (`--no-cache`
//! captures) go through the L1; fill/write-back traces (captured behind the tool's own L1,
//! with its L2 the size of its L1) are the L1's traffic already and go to the LLC directly.

use crate::cost::{self, Clock, Costs};
use crate::l1::{L1Stats, L1};
use crate::line::{self, Line, LINE_BYTES};
use crate::llc::{LineMap, Llc, LlcConfig, Memory, Traffic};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;
use wattio_formats::memtrace::{MemKind, MemRecord, MemTraceReader};

/// What to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    #[serde(default = "default_l1_bytes")]
    pub l1_bytes: u64,
    #[serde(default = "default_l1_ways")]
    pub l1_ways: u32,
    pub llc: LlcConfig,
    #[serde(default)]
    pub clock: Clock,
    /// How many times the trace is replayed back to back, as a program looping over the
    /// traced phase: the caches and memory keep their contents from one pass to the next,
    /// and time, traffic, wear and costs cover every pass. Wear levelling needs enough
    /// passes for its rotations to go round before the hottest cell's rate is a steady one
    /// (docs/nvcache/wear-levelling.md).
    #[serde(default = "default_passes")]
    pub passes: u32,
}

fn default_passes() -> u32 {
    1
}

/// The most passes a run may ask for.
pub const MAX_PASSES: u32 = 10_000;

/// Rows kept in memory for the passes after the first; a longer trace is read again from
/// its file for each pass, so memory stays bounded whatever the trace's length.
pub const MAX_KEPT_ROWS: usize = 2_000_000;

fn default_l1_bytes() -> u64 {
    32 * 1024
}

fn default_l1_ways() -> u32 {
    8
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub config: SimConfig,
    /// Whether the trace's rows went through this simulator's L1 (load/store traces).
    pub through_l1: bool,
    pub l1: L1Stats,
    pub traffic: Traffic,
    pub instructions: u64,
    pub seconds: f64,
    /// LLC fills whose content the trace never revealed (taken as zero bytes).
    pub fills_unknown: u64,
    /// Write-backs whose old bytes differed from the LLC's copy (a write the trace does not
    /// show, e.g. the kernel's into a buffer).
    pub old_mismatches: u64,
    pub max_pram_cell_writes: u64,
    pub max_stt_cell_writes: u64,
    pub costs: Costs,
    pub sets: usize,
    pub ways: usize,
    /// Bits programmed per physical PRAM frame, `sets` rows of `ways`.
    pub heat_map: Vec<u64>,
}

/// The L1, the LLC and memory.
pub struct Hierarchy {
    pub l1: L1,
    pub llc: Llc,
    pub mem: Memory,
}

/// The line key of an address: the line number, with the process id in high bits so that
/// processes' virtual addresses do not meet (the set index comes from the low bits).
pub fn line_key(pid: u32, addr: u64) -> u64 {
    (addr >> 6) ^ (u64::from(pid) << 42)
}

impl Hierarchy {
    pub fn new(cfg: &SimConfig) -> Result<Self, String> {
        Ok(Hierarchy {
            l1: L1::new(cfg.l1_bytes, cfg.l1_ways)?,
            llc: Llc::new(cfg.llc)?,
            mem: Memory::default(),
        })
    }

    /// A load (`store` None) or store of `size` bytes at `addr`, split at line boundaries.
    #[inline]
    pub fn access(&mut self, pid: u32, addr: u64, size: u64, store: Option<&[u8]>) {
        let off = (addr % LINE_BYTES as u64) as usize;
        if size >= 1 && off as u64 + size <= LINE_BYTES as u64 {
            // Within one line (nearly every access).
            self.l1.access(
                line_key(pid, addr),
                off,
                store,
                &mut self.llc,
                &mut self.mem,
            );
            return;
        }
        let mut at = addr;
        let end = addr.saturating_add(size.max(1));
        while at < end {
            let off = (at % LINE_BYTES as u64) as usize;
            let n = ((LINE_BYTES - off) as u64).min(end - at) as usize;
            let piece = store.map(|s| &s[(at - addr) as usize..(at - addr) as usize + n]);
            self.l1
                .access(line_key(pid, at), off, piece, &mut self.llc, &mut self.mem);
            at += n as u64;
        }
    }
}

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// The content of memory at the start of the trace, as far as the trace shows it: the old
/// bytes of each line's first write-back, and of each byte's first store. Also whether the
/// trace is a load/store one.
fn initial_memory(path: &Path) -> Result<(LineMap<Line>, bool), String> {
    let reader = MemTraceReader::open(path).map_err(|e| e.to_string())?;
    let through_l1 = !reader.geometry().cache;
    let mut known: LineMap<(Line, u64)> = LineMap::default();
    for r in reader {
        let r = r.map_err(|e| e.to_string())?;
        match (r.kind, &r.old) {
            (MemKind::WriteBack, Some(old)) => {
                let l = line_of(path, &r, old)?;
                known
                    .entry(line_key(r.pid, r.addr))
                    .or_insert((l, u64::MAX));
            }
            (MemKind::Store, Some(old)) => {
                for (i, &b) in old.iter().enumerate() {
                    let a = r.addr + i as u64;
                    let (l, mask) = known.entry(line_key(r.pid, a)).or_insert(([0; 8], 0));
                    let off = (a % LINE_BYTES as u64) as usize;
                    if *mask & (1 << off) == 0 {
                        *mask |= 1 << off;
                        line::put_bytes(l, off, &[b]);
                    }
                }
            }
            _ => {}
        }
    }
    Ok((
        known.into_iter().map(|(k, (l, _))| (k, l)).collect(),
        through_l1,
    ))
}

fn line_of(path: &Path, r: &MemRecord, bytes: &[u8]) -> Result<Line, String> {
    let b: &[u8; LINE_BYTES] = bytes.try_into().map_err(|_| {
        err(
            path,
            format!(
                "a {}-byte line at {:#x}: the simulator models 64-byte lines",
                bytes.len(),
                r.addr
            ),
        )
    })?;
    Ok(line::from_bytes(b))
}

/// Brings line `key`'s content at the trace's start into memory the first time the run
/// meets it; false if the trace never shows that content.
fn seed(mem: &mut Memory, initial: &LineMap<Line>, key: u64) -> bool {
    match mem.lines.entry(key) {
        Entry::Occupied(_) => true,
        Entry::Vacant(e) => match initial.get(&key) {
            Some(l) => {
                e.insert(*l);
                true
            }
            None => false,
        },
    }
}

/// Runs the trace at `path` through the hierarchy of `cfg`.
pub fn run_trace(path: &Path, cfg: &SimConfig) -> Result<Report, String> {
    run_trace_keeping(path, cfg, MAX_KEPT_ROWS)
}

/// [`run_trace`], keeping at most `max_kept_rows` rows in memory between passes.
pub fn run_trace_keeping(
    path: &Path,
    cfg: &SimConfig,
    max_kept_rows: usize,
) -> Result<Report, String> {
    if !(1..=MAX_PASSES).contains(&cfg.passes) {
        return Err(format!(
            "passes = {}: expected a whole number from 1 to {MAX_PASSES}",
            cfg.passes
        ));
    }
    let mut h = Hierarchy::new(cfg)?;
    let (initial, through_l1) = initial_memory(path)?;
    let open = || -> Result<MemTraceReader, String> {
        let reader = MemTraceReader::open(path).map_err(|e| e.to_string())?;
        if reader.geometry().line as usize != LINE_BYTES {
            return Err(err(
                path,
                format!(
                    "{}-byte lines: the simulator models 64-byte lines",
                    reader.geometry().line
                ),
            ));
        }
        Ok(reader)
    };
    let mut replay = Replay {
        path,
        initial: &initial,
        h: &mut h,
        fills_unknown: 0,
        old_mismatches: 0,
        instructions: 0,
        last: HashMap::new(),
        first_pass: true,
    };
    // The first pass reads the file, keeping its rows for the others while they fit.
    let mut kept: Option<Vec<MemRecord>> = (cfg.passes > 1).then(Vec::new);
    for r in open()? {
        let r = r.map_err(|e| e.to_string())?;
        replay.row(&r)?;
        if let Some(rows) = &mut kept {
            if rows.len() < max_kept_rows {
                rows.push(r);
            } else {
                kept = None;
            }
        }
    }
    replay.first_pass = false;
    for _ in 1..cfg.passes {
        // Each pass's time starts again from each process's first row.
        replay.last.clear();
        match &kept {
            Some(rows) => {
                for r in rows {
                    replay.row(r)?;
                }
            }
            None => {
                for r in open()? {
                    replay.row(&r.map_err(|e| e.to_string())?)?;
                }
            }
        }
    }
    let (instructions, fills_unknown, old_mismatches) = (
        replay.instructions,
        replay.fills_unknown,
        replay.old_mismatches,
    );
    h.l1.flush(&mut h.llc, &mut h.mem);
    Ok(report(
        cfg,
        &h,
        through_l1,
        instructions,
        fills_unknown,
        old_mismatches,
    ))
}

/// The state of a replay across its passes.
struct Replay<'a> {
    path: &'a Path,
    initial: &'a LineMap<Line>,
    h: &'a mut Hierarchy,
    /// Counted on the first pass only: they describe the trace, and on later passes the
    /// caches hold the previous pass's end state, not the trace's start.
    fills_unknown: u64,
    old_mismatches: u64,
    instructions: u64,
    last: HashMap<u32, u64>,
    first_pass: bool,
}

impl Replay<'_> {
    fn row(&mut self, r: &MemRecord) -> Result<(), String> {
        let h = &mut *self.h;
        // Time is the instructions the traffic rows span, per process image (a truncated
        // trace's exit row lies far beyond its last traffic row; an exec restarts the count).
        match r.kind {
            MemKind::Start => {
                self.last.insert(r.pid, r.icount);
            }
            MemKind::Fill | MemKind::WriteBack | MemKind::Load | MemKind::Store => {
                let prev = self.last.insert(r.pid, r.icount).unwrap_or(0);
                self.instructions += r.icount.saturating_sub(prev);
            }
            _ => {}
        }
        let key = line_key(r.pid, r.addr);
        match r.kind {
            MemKind::Fill => {
                if !seed(&mut h.mem, self.initial, key) && self.first_pass {
                    self.fills_unknown += 1;
                }
                h.llc.read(key, &mut h.mem);
            }
            MemKind::WriteBack => {
                let (old, new) = (
                    r.old.as_deref().unwrap_or(&[]),
                    r.new.as_deref().unwrap_or(&[]),
                );
                let (old, new) = (line_of(self.path, r, old)?, line_of(self.path, r, new)?);
                if self.first_pass && h.llc.peek(key).unwrap_or_else(|| h.mem.get(key)) != old {
                    self.old_mismatches += 1;
                }
                h.llc.write(key, &new, &mut h.mem);
            }
            MemKind::Load | MemKind::Store => {
                let mut a = r.addr;
                while a < r.addr.saturating_add(r.size) {
                    let k = line_key(r.pid, a);
                    seed(&mut h.mem, self.initial, k);
                    a = (a | (LINE_BYTES as u64 - 1)).saturating_add(1);
                }
                h.access(r.pid, r.addr, r.size, r.new.as_deref());
            }
            _ => {}
        }
        Ok(())
    }
}

/// The report of a finished run.
pub fn report(
    cfg: &SimConfig,
    h: &Hierarchy,
    through_l1: bool,
    instructions: u64,
    fills_unknown: u64,
    old_mismatches: u64,
) -> Report {
    let seconds = cfg.clock.seconds(instructions);
    let (max_pram, max_stt) = (h.llc.max_cell_writes(), h.llc.max_buffer_cell_writes());
    Report {
        config: *cfg,
        through_l1,
        l1: h.l1.stats,
        traffic: h.llc.traffic,
        instructions,
        seconds,
        fills_unknown,
        old_mismatches,
        max_pram_cell_writes: max_pram,
        max_stt_cell_writes: max_stt,
        costs: cost::costs(&cfg.llc, &h.llc.traffic, seconds, max_pram, max_stt),
        sets: h.llc.sets(),
        ways: h.llc.ways(),
        heat_map: h.llc.heat_map().to_vec(),
    }
}
