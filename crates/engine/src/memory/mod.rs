//! The memory simulator: processes scheduled on CPUs, their pages placed on DRAM ranks,
//! every main-memory access served by a rank, and a memory policy
//! ([`wattio_functions::memory`]) deciding when ranks sleep (Huang 2006, ch. 2–4).
//!
//! ```text
//!  processes (trace or synthetic streams)
//!        │ events: compute, access(vaddr, R/W), map, unmap
//!        ▼
//!  scheduler: round robin over `cpus`, `quantum_ns` slices ──► policy.on_switch
//!        │ access at the process's clock
//!        ▼
//!  page table (one-entry TLB, then hash) ── first touch ──► allocator: policy.place
//!        │ rank (rank-fill: the page's rank; rank-spread: line % ranks)      or default
//!        ▼
//!  controller: one access at a time on the channel ──► policy.before/after_access
//!        ▼
//!  Rank (wattio_devices::dram): state machine + ledger     policy.on_tick every tREFI
//! ```
//!
//! Time is virtual nanoseconds. A read stalls its process until its data is back (the
//! processor waits on a cache miss); a write-back is posted to a one-entry write buffer:
//! the process waits only until the controller starts serving it. A run is a pure function of
//! (config, workload, seed).

mod alloc;
pub mod delay_hiding;
mod dma;
pub mod workload;

use alloc::{Frames, PageCounts, PageHasher, PageTable};
pub use dma::{DmaDef, DmaSummary, DmaZone};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::path::Path;
use wattio_core::time::secs_to_ns;
use wattio_core::Nanos;
use wattio_devices::dram::{Rank, RankSpec, STANDBY, STATE_NAMES};
use wattio_formats::memtrace::{FileMap, FileTable};
use wattio_functions::memory::reshape::{PageUse, Reshape, ReshapeConfig};
use wattio_functions::memory::{self, Mem, MemPolicy, Migration, PolicyConfig};
use wattio_workload::Rng;
pub use workload::{
    load_memtrace, load_memtrace_bounded, load_memtrace_files, Hitting, ProcEvent, ProcessStream,
    Recorded, Streaming, TraceLimits, TraceProcess, TraceReaders, TraceStream, MAX_OPEN_READERS,
    RECORD_ROWS, RECORD_TOTAL_ROWS,
};

/// How physical addresses map to ranks.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Interleave {
    /// A page lies on one rank; ranks fill one after the other (the thesis's preference).
    RankFill,
    /// Consecutive lines go to consecutive ranks.
    RankSpread,
}

/// Where a page goes when the policy does not say.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Any rank with free pages, at random (seeded): a long-running kernel's free lists hand
    /// out pages from all over memory (Table 2.1: one process on 10 of 12 ranks).
    Scatter,
    /// The lowest rank with free pages (sequential allocation).
    Sequential,
}

/// The machine and the policy of a memory run (`[memory]` of a config).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemConfig {
    /// A DRAM part of `catalogue/dram/`.
    pub part: String,
    pub ranks: usize,
    #[serde(default = "one")]
    pub cpus: usize,
    /// Scheduler time slice.
    #[serde(default = "quantum")]
    pub quantum_ns: Nanos,
    /// Time a context switch takes after the decision (the window PAVM's early wake uses).
    #[serde(default = "switch")]
    pub switch_ns: Nanos,
    /// Bytes per memory access (the cache line); 0: the trace's.
    #[serde(default)]
    pub line_bytes: u32,
    #[serde(default = "page")]
    pub page_bytes: u64,
    #[serde(default = "fill")]
    pub interleave: Interleave,
    #[serde(default = "scatter")]
    pub placement: Placement,
    /// Processes mapping the same file page read-only (a trace that names its mappings'
    /// files: shared libraries, locale files) map one physical page, kept in a page cache
    /// after the last mapper until memory runs out. `false`: every process gets its own
    /// copy (the pages still count as shared for PAVM's DLL rule).
    #[serde(default = "yes")]
    pub share_file_pages: bool,
    /// Where the `[[dma]]` devices' buffers lie: `"first-rank"` (the thesis's §2.6 rule) or
    /// `"anywhere"` (the default placement's choice).
    #[serde(default = "first_rank")]
    pub dma_zone: DmaZone,
    pub seed: u64,
    pub policy: PolicyConfig,
    /// Traffic reshaping (ch. 4): the most accessed pages kept on hot ranks, under any
    /// policy but PAVM (which places pages itself). Absent: none.
    #[serde(default)]
    pub reshape: Option<ReshapeConfig>,
}

fn one() -> usize {
    1
}
fn yes() -> bool {
    true
}
fn quantum() -> Nanos {
    10_000_000
}
fn switch() -> Nanos {
    1_000
}
fn page() -> u64 {
    4096
}
fn fill() -> Interleave {
    Interleave::RankFill
}
fn scatter() -> Placement {
    Placement::Scatter
}
fn first_rank() -> DmaZone {
    DmaZone::FirstRank
}

/// Per-rank outcome.
#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    /// ns per state, in the order of `states`.
    pub residency_ns: Vec<Nanos>,
    pub exit_ns: Nanos,
    pub energy_j: f64,
    pub reads: u64,
    pub writes: u64,
    pub delayed_pd: u64,
    pub delayed_sr: u64,
    /// Gaps between accesses (`Rank::idle_periods`) and their total length.
    pub idle_periods: u64,
    pub idle_period_ns: Nanos,
}

/// The outcome of a memory run.
#[derive(Clone, Debug, Serialize)]
pub struct MemSummary {
    pub policy: String,
    pub part: String,
    pub states: Vec<String>,
    /// Time until the last process finished.
    pub runtime_ns: Nanos,
    pub energy_j: f64,
    pub avg_power_w: f64,
    pub reads: u64,
    pub writes: u64,
    pub mean_response_ns: f64,
    pub delayed_pd: u64,
    pub delayed_sr: u64,
    pub switches: u64,
    pub pages_touched: u64,
    /// First touches of a file page already in the page cache (another process, or an
    /// earlier one, had it): the process maps that physical page instead of a new one.
    pub pages_shared: u64,
    /// Page-cache pages given back when memory ran out, none mapping them.
    pub page_cache_evictions: u64,
    /// At the end (every process gone): pages in the page cache, and pages not free. The
    /// latter is the former plus the DMA buffers (`dma.pages_per_rank`) unless the
    /// allocator lost or doubly freed a page.
    pub page_cache_pages: u64,
    pub pages_in_use_at_end: u64,
    /// Migration passes run, and passes skipped because the channel was busy.
    pub migration_passes: u64,
    pub migration_passes_skipped: u64,
    /// Pages the policy's migration passes moved, pages traffic reshaping moved, and the
    /// line accesses that copied both (a read and a write per line; counted in the ranks'
    /// reads and writes, not above).
    pub pages_migrated: u64,
    pub pages_reshaped: u64,
    pub migration_accesses: u64,
    /// The `[[dma]]` devices' transfers.
    pub dma: DmaSummary,
    pub ranks: Vec<RankSummary>,
    pub counters: Vec<(String, f64)>,
}

struct Proc {
    pid: u32,
    stream: Box<dyn ProcessStream>,
    pages: PageTable,
    /// One-entry TLB: (virtual page, physical page).
    tlb: Option<(u64, u64)>,
    /// The mappings placement cares about (shared ones and files'), disjoint.
    maps: Vec<Mapping>,
    /// The last mapping, which a `MapFile` event right after it names the file of.
    last_map: Option<(u64, u64)>,
    /// A kernel thread (the policy is told: it may touch any memory).
    kernel: bool,
    /// Computation left over when the process was preempted in the middle of it.
    compute_left: Nanos,
}

struct Cpu {
    clock: Nanos,
    current: Option<usize>,
    quantum_end: Nanos,
}

/// A memory run under construction: add processes, then [`run`](MemSim::run).
pub struct MemSim {
    cfg: MemConfig,
    spec: RankSpec,
    procs: Vec<Proc>,
    line_bytes: u32,
    /// The files the traces' mappings name, numbered across the run.
    files: FileTable,
    dma: Vec<DmaDef>,
}

const MAX_RANKS: usize = 4096;
const MAX_CPUS: usize = 256;

impl MemSim {
    pub fn new(cfg: &MemConfig) -> Result<MemSim, String> {
        let spec = RankSpec::named(&cfg.part).map_err(|e| format!("memory.part: {e}"))?;
        if !(1..=MAX_RANKS).contains(&cfg.ranks) {
            return Err(format!(
                "memory.ranks: expected 1..={MAX_RANKS}, got {}",
                cfg.ranks
            ));
        }
        if !(1..=MAX_CPUS).contains(&cfg.cpus) {
            return Err(format!(
                "memory.cpus: expected 1..={MAX_CPUS}, got {}",
                cfg.cpus
            ));
        }
        if cfg.quantum_ns == 0 || cfg.quantum_ns > secs_to_ns(1e4) {
            return Err(format!(
                "memory.quantum_ns: expected 1 ns ..= 10^4 s, got {}",
                cfg.quantum_ns
            ));
        }
        if cfg.switch_ns > secs_to_ns(1.0) {
            return Err(format!(
                "memory.switch_ns: at most 1 s, got {}",
                cfg.switch_ns
            ));
        }
        if !cfg.page_bytes.is_power_of_two() || !(512..=1 << 30).contains(&cfg.page_bytes) {
            return Err(format!(
                "memory.page_bytes: expected a power of two in 512..=2^30, got {}",
                cfg.page_bytes
            ));
        }
        if cfg.line_bytes != 0
            && (!cfg.line_bytes.is_power_of_two()
                || !(8..=4096).contains(&cfg.line_bytes)
                || u64::from(cfg.line_bytes) > cfg.page_bytes)
        {
            return Err(format!(
                "memory.line_bytes: expected 0 (the trace's) or a power of two in 8..=4096 no larger than a page, got {}",
                cfg.line_bytes
            ));
        }
        if spec.rank_bytes < cfg.page_bytes {
            return Err("memory.page_bytes: larger than a rank".into());
        }
        if cfg.interleave == Interleave::RankSpread && cfg.policy.kind.starts_with("pavm") {
            return Err(
                "memory.interleave: PAVM places pages on ranks, which rank-spread interleaving does not allow (use rank-fill)".into(),
            );
        }
        // Build once here so a bad policy table fails before any trace is read.
        memory::build(&cfg.policy, &spec, cfg.ranks, cfg.cpus)?;
        if let Some(r) = &cfg.reshape {
            Reshape::new(r, cfg.ranks)?;
            if cfg.interleave != Interleave::RankFill {
                return Err("memory.reshape: moves pages between ranks, which needs interleave = \"rank-fill\" (a page on one rank)".into());
            }
            if cfg.policy.kind.starts_with("pavm") {
                return Err("memory.reshape: PAVM places and migrates pages itself; reshaping runs under nopm, ipd, isr, hw or hw-sw".into());
            }
        }
        Ok(MemSim {
            cfg: cfg.clone(),
            spec,
            procs: Vec::new(),
            line_bytes: cfg.line_bytes,
            files: FileTable::default(),
            dma: Vec::new(),
        })
    }

    /// Add a DMA device (checked when the run starts, against the line size then known).
    pub fn add_dma(&mut self, def: DmaDef) -> Result<(), String> {
        if self.dma.len() == dma::MAX_DEVICES {
            return Err(format!("dma: at most {} [[dma]] devices", dma::MAX_DEVICES));
        }
        self.dma.push(def);
        Ok(())
    }

    /// Add a process. Processes start together at time 0, in the order added.
    pub fn add(&mut self, stream: Box<dyn ProcessStream>) -> u32 {
        let pid = self.procs.len() as u32 + 1;
        self.procs.push(Proc {
            pid,
            stream,
            pages: PageTable::default(),
            tlb: None,
            maps: Vec::new(),
            last_map: None,
            kernel: false,
            compute_left: 0,
        });
        pid
    }

    /// Add a kernel thread: a process that may touch any memory (PAVM keeps every rank
    /// active while it runs). Starts at time 0 with the others.
    pub fn add_kernel_thread(&mut self, stream: Box<dyn ProcessStream>) -> u32 {
        let pid = self.add(stream);
        self.procs[pid as usize - 1].kernel = true;
        pid
    }

    /// Add every process of a memory trace; the trace's line size is used unless the
    /// config sets one.
    pub fn add_memtrace(&mut self, path: &Path, ns_per_instruction: f64) -> Result<(), String> {
        if !(ns_per_instruction.is_finite() && (0.0..=1e6).contains(&ns_per_instruction)) {
            return Err(format!(
                "ns_per_instruction: expected a number in [0, 1e6], got {ns_per_instruction}"
            ));
        }
        let limits = TraceLimits {
            record_rows: RECORD_ROWS,
            ..TraceLimits::default()
        };
        let (procs, line, _) =
            load_memtrace_files(path, ns_per_instruction, limits, &mut self.files)?;
        if self.line_bytes == 0 {
            self.line_bytes = line;
        }
        for p in procs {
            self.add(p.stream);
        }
        Ok(())
    }

    pub fn run(self) -> Result<MemSummary, String> {
        Run::new(self)?.run()
    }
}

struct Run {
    cfg: MemConfig,
    spec: RankSpec,
    policy: Box<dyn MemPolicy>,
    ranks: Vec<Rank>,
    frames: Frames,
    procs: Vec<Proc>,
    cpus: Vec<Cpu>,
    runq: VecDeque<usize>,
    running: Vec<Option<u32>>,
    rng: Rng,
    page_shift: u32,
    line_shift: u32,
    service: Nanos,
    bus_free: Nanos,
    tick: Option<(Nanos, Nanos)>,
    /// The policy's migration and when its next pass is due.
    migration: Option<(Migration, Nanos)>,
    /// Channel time spent serving accesses (the processes' and the copies'), and the time and
    /// its value at the last pass's check: a pass's busy check covers what came since.
    bus_busy_ns: Nanos,
    last_check: (Nanos, Nanos),
    migration_passes: u64,
    migration_passes_skipped: u64,
    pages_migrated: u64,
    migration_accesses: u64,
    /// Traffic reshaping: the planner and its next pass; the accesses per physical page
    /// since the counts were last halved (kept only when reshaping).
    reshape: Option<(Reshape, Nanos)>,
    counts: PageCounts,
    pages_reshaped: u64,
    reads: u64,
    writes: u64,
    response_sum: u128,
    switches: u64,
    pages_touched: u64,
    /// The page cache: a file page's physical page and who maps it (process, virtual page).
    page_cache: HashMap<(u32, u64), CachedPage, BuildHasherDefault<PageHasher>>,
    /// Physical page → its file page, for the pages in the page cache.
    cached_frames: HashMap<u64, (u32, u64), BuildHasherDefault<PageHasher>>,
    /// File pages no process maps any more, oldest first (kept, as the kernel keeps them,
    /// until memory runs out; an entry mapped again since is skipped).
    idle_cache: VecDeque<(u32, u64)>,
    pages_shared: u64,
    page_cache_evictions: u64,
    /// DMA devices, the earliest next arrival among them (`Nanos::MAX`: none), what they
    /// did and the sum of their transfers' latencies.
    dma: Vec<dma::Device>,
    dma_due: Nanos,
    dma_sum: DmaSummary,
    dma_latency_sum: u128,
    /// A DMA trace's read error (the device stopped; the run fails with it).
    dma_error: Option<String>,
}

/// A page of a file in the page cache.
struct CachedPage {
    frame: u64,
    /// (process index, virtual page) of every mapping of it.
    mappers: Vec<(usize, u64)>,
    /// In `idle_cache` (at most once).
    queued: bool,
}

impl Run {
    fn new(sim: MemSim) -> Result<Run, String> {
        let MemSim {
            cfg,
            spec,
            procs,
            line_bytes,
            files: _,
            dma: dma_defs,
        } = sim;
        let line_bytes = if line_bytes == 0 { 64 } else { line_bytes };
        if u64::from(line_bytes) > cfg.page_bytes {
            return Err(format!(
                "memory.line_bytes: the trace's {line_bytes}-byte lines exceed a {}-byte page",
                cfg.page_bytes
            ));
        }
        let mut policy = memory::build(&cfg.policy, &spec, cfg.ranks, cfg.cpus)?;
        for p in procs.iter().filter(|p| p.kernel) {
            policy.on_kernel_thread(p.pid);
        }
        let ranks = (0..cfg.ranks)
            .map(|_| Rank::new(&spec, STANDBY, 0))
            .collect();
        let mut frames = Frames::new(cfg.ranks, spec.rank_bytes / cfg.page_bytes);
        let mut rng = Rng::new(cfg.seed);
        let service = spec.access_ns(line_bytes);
        let mut dma_sum = DmaSummary {
            pages_per_rank: vec![0; cfg.ranks],
            ..DmaSummary::default()
        };
        let ring_total: u64 = dma_defs.iter().map(|d| d.ring_pages).sum();
        if ring_total > dma::MAX_RING_PAGES {
            return Err(format!(
                "dma: the rings hold {ring_total} pages in all; at most {} (ring_pages of every [[dma]])",
                dma::MAX_RING_PAGES
            ));
        }
        let mut devices = Vec::with_capacity(dma_defs.len());
        for (i, d) in dma_defs.iter().enumerate() {
            d.check(i, cfg.page_bytes, u64::from(line_bytes), service)?;
            let mut ring = Vec::with_capacity(d.ring_pages as usize);
            for _ in 0..d.ring_pages {
                let free = frames.free();
                let r = match cfg.dma_zone {
                    DmaZone::FirstRank => (free[0] > 0).then_some(0),
                    DmaZone::Anywhere => default_rank(cfg.placement, free, &mut rng),
                };
                let Some(r) = r else {
                    let whole = match cfg.dma_zone {
                        DmaZone::FirstRank => "the first rank (memory.dma_zone = \"first-rank\")",
                        DmaZone::Anywhere => "memory",
                    };
                    return Err(format!(
                        "dma[{i}].ring_pages: {} pages (with the devices before it) do not fit in {whole}: {} pages a rank",
                        d.ring_pages, frames.pages_per_rank
                    ));
                };
                ring.push(frames.alloc(r).expect("rank has a free page"));
                dma_sum.pages_per_rank[r] += 1;
            }
            devices.push(d.device(i, cfg.page_bytes, u64::from(line_bytes), ring)?);
        }
        let dma_due = devices.iter().map(|d| d.next).min().unwrap_or(Nanos::MAX);
        let tick = policy.tick_period().map(|p| (p, p));
        // Pages lie on one rank only under rank-fill: only there can a page move.
        let migration = policy
            .migration()
            .filter(|_| cfg.interleave == Interleave::RankFill)
            .map(|m| (m, m.period_ns));
        let reshape = match &cfg.reshape {
            Some(c) => {
                let r = Reshape::new(c, cfg.ranks)?;
                let first = r.period_ns;
                Some((r, first))
            }
            None => None,
        };
        let mut runq: VecDeque<usize> = (0..procs.len()).collect();
        let mut cpus: Vec<Cpu> = (0..cfg.cpus)
            .map(|_| Cpu {
                clock: 0,
                current: None,
                quantum_end: cfg.quantum_ns,
            })
            .collect();
        let mut running = vec![None; cfg.cpus];
        for (c, cpu) in cpus.iter_mut().enumerate() {
            cpu.current = runq.pop_front();
            running[c] = cpu.current.map(|i| procs[i].pid);
        }
        Ok(Run {
            rng,
            page_shift: cfg.page_bytes.trailing_zeros(),
            line_shift: line_bytes.trailing_zeros(),
            service,
            cfg,
            spec,
            policy,
            ranks,
            frames,
            procs,
            cpus,
            runq,
            running,
            bus_free: 0,
            tick,
            migration,
            bus_busy_ns: 0,
            last_check: (0, 0),
            migration_passes: 0,
            migration_passes_skipped: 0,
            pages_migrated: 0,
            migration_accesses: 0,
            reshape,
            counts: PageCounts::default(),
            pages_reshaped: 0,
            reads: 0,
            writes: 0,
            response_sum: 0,
            switches: 0,
            pages_touched: 0,
            page_cache: HashMap::default(),
            cached_frames: HashMap::default(),
            idle_cache: VecDeque::new(),
            pages_shared: 0,
            page_cache_evictions: 0,
            dma: devices,
            dma_due,
            dma_sum,
            dma_latency_sum: 0,
            dma_error: None,
        })
    }

    /// Run the policy's ticks and the DMA transfers due up to `now`, in time order (a tick
    /// first at a tie).
    #[inline]
    fn ticks(&mut self, now: Nanos) {
        if self.dma_due <= now {
            self.ticks_and_transfers(now);
            return;
        }
        while let Some((next, _)) = self.tick {
            if next > now {
                break;
            }
            self.tick_once();
        }
    }

    #[inline]
    fn tick_once(&mut self) {
        let Some((next, period)) = self.tick else {
            return;
        };
        let mut mem = Mem {
            spec: &self.spec,
            ranks: &mut self.ranks,
        };
        self.policy.on_tick(next, &mut mem);
        self.tick = Some((next + period, period));
    }

    #[inline(never)]
    fn ticks_and_transfers(&mut self, now: Nanos) {
        loop {
            let tick = self.tick.map(|(t, _)| t).filter(|&t| t <= now);
            let transfer = (self.dma_due <= now).then_some(self.dma_due);
            match (tick, transfer) {
                (None, None) => break,
                (Some(t), d) if d.is_none_or(|d| t <= d) => self.tick_once(),
                _ => self.transfer(),
            }
        }
    }

    /// The earliest due DMA transfer (the lowest device at a tie): its lines on the channel
    /// back to back from its arrival, or from when the channel is free, each through the
    /// policy's hooks as an access of no process (pid 0).
    fn transfer(&mut self) {
        let Some(d) = (0..self.dma.len()).min_by_key(|&d| (self.dma[d].next, d)) else {
            return;
        };
        let dev = &mut self.dma[d];
        let (arrival, lines, write) = (dev.next, dev.lines, dev.write);
        while dev.busy.front().is_some_and(|&done| done <= arrival) {
            dev.busy.pop_front();
        }
        if let Err(e) = dev.advance() {
            // A trace that fails mid-run stops its device; the run reports the error.
            dev.next = Nanos::MAX;
            self.dma_error.get_or_insert(e);
        }
        if dev.busy.len() == dev.ring.len() {
            // A receive overrun: every buffer is still being filled, the transfer is dropped.
            self.dma_sum.dropped += 1;
            self.dma_due = self.dma.iter().map(|d| d.next).min().unwrap_or(Nanos::MAX);
            return;
        }
        let frame = dev.ring[dev.turn];
        dev.turn = (dev.turn + 1) % dev.ring.len();
        let mut t = arrival.max(self.bus_free);
        for line in 0..lines {
            let r = self.rank_of(frame, line << self.line_shift);
            let mut mem = Mem {
                spec: &self.spec,
                ranks: &mut self.ranks,
            };
            self.policy.before_access(t, 0, r, &mut mem);
            let served = mem.ranks[r].access(mem.spec, t, write, self.service);
            self.policy.after_access(served.done, 0, r, &mut mem);
            if served.woke_from.is_some() {
                self.dma_sum.delayed += 1;
            }
            self.bus_busy_ns += served.done - served.start;
            t = served.done;
        }
        self.bus_free = self.bus_free.max(t);
        self.dma[d].busy.push_back(t);
        self.dma_sum.transfers += 1;
        self.dma_sum.lines += lines;
        self.dma_sum.max_latency_ns = self.dma_sum.max_latency_ns.max(t - arrival);
        self.dma_latency_sum += u128::from(t - arrival);
        self.dma_due = self.dma.iter().map(|d| d.next).min().unwrap_or(Nanos::MAX);
    }

    /// Run a migration pass at `now` if one is due. The pass runs at the access that finds
    /// it due, not back at its due time (ticks and switches up to `now` have already
    /// commanded the ranks); passes overdue together run as one. It is skipped if the
    /// channel was busy more than the policy's limit since the last pass's check.
    #[inline]
    fn migrations(&mut self, now: Nanos) {
        if let Some((m, next)) = self.migration {
            if next <= now {
                let behind = (now - next) / m.period_ns + 1;
                self.migration = Some((m, next + behind * m.period_ns));
                let (at, busy_then) = self.last_check;
                let busy =
                    (self.bus_busy_ns - busy_then) as f64 / now.saturating_sub(at).max(1) as f64;
                self.last_check = (now, self.bus_busy_ns);
                if busy > m.busy_above {
                    self.migration_passes_skipped += 1;
                } else {
                    self.migration_passes += 1;
                    self.migrate(now, m.pages_per_pass);
                }
            }
        }
    }

    /// One migration pass at `now` (kmigrated): every page of every live process, in pid
    /// and address order, is offered to the policy until `budget` pages have moved. A move
    /// copies the page line by line on the channel (read on the old rank, write on the new),
    /// so its time and energy land on both ranks and it delays the accesses behind it.
    #[cold]
    fn migrate(&mut self, now: Nanos, budget: usize) {
        let mut moved = 0;
        for pi in 0..self.procs.len() {
            if moved == budget {
                break;
            }
            let p = &self.procs[pi];
            let pid = p.pid;
            let mut pages: Vec<(u64, u64)> = p.pages.iter().map(|(&v, &f)| (v, f)).collect();
            pages.sort_unstable();
            for (vpage, frame) in pages {
                if moved == budget {
                    break;
                }
                // A page-cache page this process maps twice moves with its first mapping:
                // the second finds it moved already.
                if self.procs[pi].pages.get(&vpage) != Some(&frame) {
                    continue;
                }
                let from = self.frames.rank_of(frame);
                let vaddr = vpage << self.page_shift;
                // A page-cache page moves for every process mapping it, so the policy
                // hears of all of them; another page only of its process.
                let (sharers, shared) = match self.cached_frames.get(&frame) {
                    Some(key) => {
                        let mut pids: Vec<u32> = self.page_cache[key]
                            .mappers
                            .iter()
                            .map(|&(q, _)| self.procs[q].pid)
                            .collect();
                        pids.sort_unstable();
                        pids.dedup();
                        (pids, true)
                    }
                    None => (
                        vec![pid],
                        self.procs[pi]
                            .mapping(vaddr)
                            .is_some_and(Mapping::is_shared),
                    ),
                };
                let free = self.frames.free();
                let Some(to) = self
                    .policy
                    .migrate_to(&sharers, shared, from, free)
                    .filter(|&r| r != from && r < free.len() && free[r] > 0)
                else {
                    continue;
                };
                self.move_page(now, pi, vpage, frame, to);
                self.pages_migrated += 1;
                moved += 1;
            }
        }
    }

    /// Move process `pi`'s page `vpage` from physical page `frame` to a free page of rank
    /// `to`, at `now`: the page is copied line by line on the channel (read on the old
    /// rank, write on the new), so its time and energy land on both ranks and it delays the
    /// accesses behind it; the policy hears of it as an unmap and a map, for every process
    /// mapping it (a page-cache page is remapped in all of them).
    fn move_page(&mut self, now: Nanos, pi: usize, vpage: u64, frame: u64, to: usize) {
        let lines = 1u64 << (self.page_shift - self.line_shift);
        let from = self.frames.rank_of(frame);
        let new = self.frames.alloc(to).expect("rank has a free page");
        let mut mem = Mem {
            spec: &self.spec,
            ranks: &mut self.ranks,
        };
        let mut t = now.max(self.bus_free);
        for _ in 0..lines {
            for (r, write) in [(from, false), (to, true)] {
                self.policy.before_access(t, 0, r, &mut mem);
                let served = mem.ranks[r].access(mem.spec, t, write, self.service);
                self.policy.after_access(served.done, 0, r, &mut mem);
                self.bus_busy_ns += served.done - served.start;
                t = served.done;
            }
        }
        self.bus_free = t;
        self.migration_accesses += 2 * lines;
        self.frames.release(frame);
        if let Some(c) = self.counts.remove(&frame) {
            self.counts.insert(new, c);
        }
        let mappers = match self.cached_frames.remove(&frame) {
            Some(key) => {
                self.cached_frames.insert(new, key);
                let c = self
                    .page_cache
                    .get_mut(&key)
                    .expect("a cached frame's page");
                c.frame = new;
                c.mappers.clone()
            }
            None => vec![(pi, vpage)],
        };
        for (q, v) in mappers {
            let pid = self.procs[q].pid;
            let p = &mut self.procs[q];
            p.pages.insert(v, new);
            p.tlb = None;
            self.policy.on_unmap(pid, from);
            self.policy.on_map(pid, to);
        }
    }

    /// Run a reshaping pass at `now` if one is due (as migration passes: at the access
    /// that finds it due; overdue passes run as one).
    #[inline]
    fn reshapes(&mut self, now: Nanos) {
        if let Some((_, next)) = &mut self.reshape {
            if *next <= now {
                self.reshape_pass(now);
            }
        }
    }

    /// One reshaping pass: every mapped page with its count, the planner's moves made in
    /// order, then every count halved.
    #[cold]
    fn reshape_pass(&mut self, now: Nanos) {
        let Some((plan, next)) = self.reshape.take() else {
            return;
        };
        let behind = (now - next) / plan.period_ns + 1;
        let mut pages = Vec::new();
        let mut owners = Vec::new();
        // A page-cache page mapped by several processes is one page to the planner.
        let mut seen_cached = std::collections::HashSet::new();
        for (pi, p) in self.procs.iter().enumerate() {
            for (&vpage, &frame) in &p.pages {
                if self.cached_frames.contains_key(&frame) && !seen_cached.insert(frame) {
                    continue;
                }
                pages.push(PageUse {
                    count: self.counts.get(&frame).copied().unwrap_or(0),
                    rank: self.frames.rank_of(frame),
                    frame,
                });
                owners.push((pi, vpage));
            }
        }
        for m in plan.plan(&pages, self.frames.free()) {
            let (pi, vpage) = owners[m.page];
            // The page table is the truth: a page displaced earlier in this pass has a new
            // frame, found here.
            let frame = self.procs[pi].pages[&vpage];
            self.move_page(now, pi, vpage, frame, m.to);
            self.pages_reshaped += 1;
        }
        self.counts.retain(|_, c| {
            *c /= 2;
            *c > 0
        });
        let due = next + behind * plan.period_ns;
        self.reshape = Some((plan, due));
    }

    /// The physical page of `vpage` for process `pi`, allocated on first touch.
    #[inline]
    fn translate(&mut self, pi: usize, vpage: u64) -> Result<u64, String> {
        let p = &mut self.procs[pi];
        if let Some((v, f)) = p.tlb {
            if v == vpage {
                return Ok(f);
            }
        }
        let frame = match p.pages.get(&vpage) {
            Some(&f) => f,
            None => self.first_touch(pi, vpage)?,
        };
        self.procs[pi].tlb = Some((vpage, frame));
        Ok(frame)
    }

    #[cold]
    fn first_touch(&mut self, pi: usize, vpage: u64) -> Result<u64, String> {
        let vaddr = vpage << self.page_shift;
        let p = &self.procs[pi];
        let pid = p.pid;
        // A page of a file mapping: the file's page, shared through the page cache.
        let mapping = p.mapping(vaddr).copied();
        let key = mapping.filter(|_| self.cfg.share_file_pages).and_then(|m| {
            m.file.map(|f| {
                (
                    f.file,
                    f.offset.wrapping_add(vaddr - m.start) >> self.page_shift,
                )
            })
        });
        if let Some(key) = key {
            if let Some(c) = self.page_cache.get_mut(&key) {
                let frame = c.frame;
                c.mappers.push((pi, vpage));
                self.pages_shared += 1;
                self.procs[pi].pages.insert(vpage, frame);
                if self.cfg.interleave == Interleave::RankFill {
                    self.policy.on_map(pid, self.frames.rank_of(frame));
                }
                return Ok(frame);
            }
        }
        let shared = mapping.is_some_and(|m| m.is_shared());
        if self.frames.free().iter().all(|&f| f == 0) {
            self.evict_idle_page();
        }
        let free = self.frames.free();
        let wanted = self
            .policy
            .place(pid, shared, free)
            .filter(|&r| r < free.len() && free[r] > 0);
        let r = match wanted {
            Some(r) => Some(r),
            None => default_rank(self.cfg.placement, free, &mut self.rng),
        };
        let Some(r) = r else {
            return Err(format!(
                "out of simulated memory: {} ranks of {} MiB hold {} pages, all in use (more ranks or a larger part are needed)",
                self.cfg.ranks,
                self.spec.rank_bytes >> 20,
                self.pages_touched
            ));
        };
        let frame = self.frames.alloc(r).expect("rank has a free page");
        self.pages_touched += 1;
        self.procs[pi].pages.insert(vpage, frame);
        if let Some(key) = key {
            self.page_cache.insert(
                key,
                CachedPage {
                    frame,
                    mappers: vec![(pi, vpage)],
                    queued: false,
                },
            );
            self.cached_frames.insert(frame, key);
        }
        if self.cfg.interleave == Interleave::RankFill {
            self.policy.on_map(pid, r);
        }
        Ok(frame)
    }

    /// Give back the page-cache page that has gone unmapped longest, if there is one
    /// (memory has run out).
    fn evict_idle_page(&mut self) -> bool {
        while let Some(key) = self.idle_cache.pop_front() {
            let Some(c) = self.page_cache.get_mut(&key) else {
                continue;
            };
            c.queued = false;
            if !c.mappers.is_empty() {
                continue;
            }
            let frame = c.frame;
            self.page_cache.remove(&key);
            self.cached_frames.remove(&frame);
            self.frames.release(frame);
            self.counts.remove(&frame);
            self.page_cache_evictions += 1;
            return true;
        }
        false
    }

    fn unmap(&mut self, pi: usize, vaddr: u64, len: u64) {
        let first = vaddr >> self.page_shift;
        let last = vaddr.saturating_add(len.max(1) - 1) >> self.page_shift;
        let pid = self.procs[pi].pid;
        let p = &mut self.procs[pi];
        p.tlb = None;
        let mut gone = Vec::new();
        if last - first < p.pages.len() as u64 {
            for v in first..=last {
                if let Some(f) = p.pages.remove(&v) {
                    gone.push((v, f));
                }
            }
        } else {
            p.pages.retain(|&v, &mut f| {
                let keep = v < first || v > last;
                if !keep {
                    gone.push((v, f));
                }
                keep
            });
        }
        // The same list order whichever way the pages were found: the policy hears of
        // them in page order.
        gone.sort_unstable();
        let end = vaddr.saturating_add(len);
        carve(&mut p.maps, vaddr, end);
        for (v, f) in gone {
            let r = self.frames.rank_of(f);
            if let Some(key) = self.cached_frames.get(&f) {
                // The file's page stays in the page cache (other processes may map it,
                // a later one may map it again) until memory runs out.
                let c = self.page_cache.get_mut(key).expect("a cached frame's page");
                c.mappers.retain(|&m| m != (pi, v));
                if c.mappers.is_empty() && !c.queued {
                    c.queued = true;
                    self.idle_cache.push_back(*key);
                }
            } else {
                self.frames.release(f);
                self.counts.remove(&f);
            }
            if self.cfg.interleave == Interleave::RankFill {
                self.policy.on_unmap(pid, r);
            }
        }
    }

    /// The rank a line of physical page `frame` lies on.
    #[inline]
    fn rank_of(&self, frame: u64, vaddr: u64) -> usize {
        match self.cfg.interleave {
            Interleave::RankFill => self.frames.rank_of(frame),
            Interleave::RankSpread => {
                let lines_per_page = self.page_shift - self.line_shift;
                let line = (frame << lines_per_page)
                    | ((vaddr >> self.line_shift) & ((1 << lines_per_page) - 1));
                (line % self.cfg.ranks as u64) as usize
            }
        }
    }

    /// Switch `cpu` to the next process in the run queue (or to none) at its clock.
    fn switch(&mut self, c: usize, requeue: bool) {
        let prev = self.cpus[c].current;
        if requeue {
            if let Some(p) = prev {
                self.runq.push_back(p);
            }
        }
        let next = self.runq.pop_front();
        self.cpus[c].current = next;
        self.running[c] = next.map(|i| self.procs[i].pid);
        let now = self.cpus[c].clock;
        self.ticks(now);
        let (prev_pid, next_pid) = (prev.map(|i| self.procs[i].pid), self.running[c]);
        let running = std::mem::take(&mut self.running);
        let mut mem = Mem {
            spec: &self.spec,
            ranks: &mut self.ranks,
        };
        self.policy
            .on_switch(now, c, prev_pid, next_pid, &running, &mut mem);
        self.running = running;
        self.switches += 1;
        let cpu = &mut self.cpus[c];
        // Switching to nothing (the last process exited) costs no time the run sees.
        if next.is_some() {
            cpu.clock = now + self.cfg.switch_ns;
        }
        cpu.quantum_end = cpu.clock + self.cfg.quantum_ns;
    }

    fn exit(&mut self, pi: usize) {
        // Its mappings go with it (cleared first: unmapping page by page would split them).
        self.procs[pi].maps.clear();
        let mut pages: Vec<u64> = self.procs[pi].pages.keys().copied().collect();
        pages.sort_unstable();
        for v in pages {
            self.unmap(pi, v << self.page_shift, 1 << self.page_shift);
        }
        self.policy.on_exit(self.procs[pi].pid);
        // Nothing more will be read from it.
        self.procs[pi].stream = Box::new(Recorded::new(Vec::new()));
    }

    fn run(mut self) -> Result<MemSummary, String> {
        // The CPU that is furthest behind runs next, so time advances in order.
        while let Some(c) = (0..self.cpus.len())
            .filter(|&c| self.cpus[c].current.is_some())
            .min_by_key(|&c| self.cpus[c].clock)
        {
            let pi = self.cpus[c].current.expect("filtered");
            let event = match std::mem::take(&mut self.procs[pi].compute_left) {
                0 => self.procs[pi].stream.next_event(),
                left => Some(ProcEvent::Compute(left)),
            };
            match event {
                None => {
                    if let Some(e) = self.procs[pi].stream.error() {
                        return Err(e.to_string());
                    }
                    self.exit(pi);
                    self.switch(c, false);
                    continue;
                }
                Some(ProcEvent::Compute(ns)) => {
                    // A time slice ends in the middle of a long computation (a trace's gap
                    // of millions of instructions) when another process is waiting.
                    let cpu = &mut self.cpus[c];
                    let room = cpu.quantum_end.saturating_sub(cpu.clock);
                    if ns > room && !self.runq.is_empty() {
                        cpu.clock += room;
                        self.procs[pi].compute_left = ns - room;
                    } else {
                        cpu.clock += ns;
                    }
                }
                Some(ProcEvent::Access { gap, vaddr, write }) => {
                    let now = self.cpus[c].clock + gap;
                    self.ticks(now);
                    self.migrations(now);
                    self.reshapes(now);
                    let frame = self.translate(pi, vaddr >> self.page_shift)?;
                    if self.reshape.is_some() {
                        let c = self.counts.entry(frame).or_insert(0);
                        *c = c.saturating_add(1);
                    }
                    let r = self.rank_of(frame, vaddr);
                    let pid = self.procs[pi].pid;
                    let mut mem = Mem {
                        spec: &self.spec,
                        ranks: &mut self.ranks,
                    };
                    self.policy.before_access(now, pid, r, &mut mem);
                    let at = now.max(self.bus_free);
                    let served = mem.ranks[r].access(mem.spec, at, write, self.service);
                    self.policy.after_access(served.done, pid, r, &mut mem);
                    self.bus_free = served.done;
                    self.bus_busy_ns += served.done - served.start;
                    self.response_sum += u128::from(served.done - now);
                    if write {
                        self.writes += 1;
                        // A one-entry write buffer: the process goes on once the
                        // controller has taken the write, so writes cannot queue unbounded.
                        self.cpus[c].clock = served.start;
                    } else {
                        self.reads += 1;
                        self.cpus[c].clock = served.done;
                    }
                }
                Some(ProcEvent::Map { vaddr, len, shared }) => {
                    // A mapping replaces whatever was mapped there (mmap with MAP_FIXED
                    // unmaps first, as the loader's segments over its reservation do).
                    self.unmap(pi, vaddr, len);
                    let end = vaddr.saturating_add(len);
                    let p = &mut self.procs[pi];
                    if shared {
                        p.maps.push(Mapping {
                            start: vaddr,
                            end,
                            shared: true,
                            file: None,
                        });
                    }
                    p.last_map = Some((vaddr, end));
                }
                Some(ProcEvent::MapFile(f)) => {
                    let p = &mut self.procs[pi];
                    if let Some((start, end)) = p.last_map.take() {
                        match p.maps.last_mut() {
                            Some(m) if (m.start, m.end) == (start, end) => m.file = Some(f),
                            _ => p.maps.push(Mapping {
                                start,
                                end,
                                shared: false,
                                file: Some(f),
                            }),
                        }
                    }
                }
                Some(ProcEvent::Unmap { vaddr, len }) => self.unmap(pi, vaddr, len),
            }
            if self.cpus[c].clock >= self.cpus[c].quantum_end {
                if self.runq.is_empty() {
                    self.cpus[c].quantum_end = self.cpus[c].clock + self.cfg.quantum_ns;
                } else {
                    self.switch(c, true);
                }
            }
        }
        let runtime = self.cpus.iter().map(|c| c.clock).max().unwrap_or(0);
        // The devices stop with the last process: their transfers due by then are served.
        self.ticks(runtime);
        self.dma_due = Nanos::MAX;
        if let Some(e) = self.dma_error.take() {
            return Err(e);
        }
        let end = self
            .ranks
            .iter()
            .map(|r| r.busy_until())
            .max()
            .unwrap_or(0)
            .max(runtime);
        self.ticks(end);
        let mut mem = Mem {
            spec: &self.spec,
            ranks: &mut self.ranks,
        };
        self.policy.on_end(end, &mut mem);
        // A command at the end may still be finishing an exit.
        let end = self
            .ranks
            .iter()
            .map(|r| r.busy_until())
            .max()
            .unwrap_or(0)
            .max(end);
        let ranks: Vec<RankSummary> = self
            .ranks
            .iter()
            .map(|r| RankSummary {
                residency_ns: r.residency(end).to_vec(),
                exit_ns: r.exit_residency(&self.spec, end),
                energy_j: r.energy_j(&self.spec, end),
                reads: r.reads,
                writes: r.writes,
                delayed_pd: r.delayed_pd,
                delayed_sr: r.delayed_sr,
                idle_periods: r.idle_periods,
                idle_period_ns: r.idle_period_ns,
            })
            .collect();
        let energy_j: f64 = ranks.iter().map(|r| r.energy_j).sum();
        let accesses = self.reads + self.writes;
        Ok(MemSummary {
            policy: self.policy.name().to_string(),
            part: self.spec.name.clone(),
            states: STATE_NAMES.iter().map(|s| s.to_string()).collect(),
            runtime_ns: end,
            energy_j,
            avg_power_w: wattio_devices::dram::mean_watts(energy_j, end),
            reads: self.reads,
            writes: self.writes,
            mean_response_ns: if accesses == 0 {
                0.0
            } else {
                self.response_sum as f64 / accesses as f64
            },
            delayed_pd: ranks.iter().map(|r| r.delayed_pd).sum(),
            delayed_sr: ranks.iter().map(|r| r.delayed_sr).sum(),
            switches: self.switches,
            pages_touched: self.pages_touched,
            pages_shared: self.pages_shared,
            page_cache_evictions: self.page_cache_evictions,
            page_cache_pages: self.page_cache.len() as u64,
            pages_in_use_at_end: self.frames.pages_per_rank * self.ranks.len() as u64
                - self.frames.free().iter().sum::<u64>(),
            migration_passes: self.migration_passes,
            migration_passes_skipped: self.migration_passes_skipped,
            pages_migrated: self.pages_migrated,
            pages_reshaped: self.pages_reshaped,
            migration_accesses: self.migration_accesses,
            dma: DmaSummary {
                mean_latency_ns: if self.dma_sum.transfers == 0 {
                    0.0
                } else {
                    self.dma_latency_sum as f64 / self.dma_sum.transfers as f64
                },
                ..self.dma_sum
            },
            ranks,
            counters: self.policy.counters(),
        })
    }
}

/// The rank the run's default placement gives a page (none has a free page: `None`).
fn default_rank(placement: Placement, free: &[u64], rng: &mut Rng) -> Option<usize> {
    match placement {
        Placement::Sequential => free.iter().position(|&f| f > 0),
        Placement::Scatter => {
            let n = free.len();
            let start = rng.below(n as u64) as usize;
            (0..n).map(|i| (start + i) % n).find(|&r| free[r] > 0)
        }
    }
}

/// A mapping page placement cares about: PAVM's shared pages (DLL rule), or a file's
/// pages in the page cache (`file`: the file and the offset of `start` in it).
#[derive(Clone, Copy, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    shared: bool,
    file: Option<FileMap>,
}

impl Mapping {
    /// Its pages count as shared for the placement policy (a file's page-cache pages are).
    fn is_shared(&self) -> bool {
        self.shared || self.file.is_some()
    }
}

impl Proc {
    /// The mapping holding `vaddr`, if placement cares about it.
    fn mapping(&self, vaddr: u64) -> Option<&Mapping> {
        self.maps.iter().find(|m| m.start <= vaddr && vaddr < m.end)
    }
}

/// Remove `[start, end)` from every mapping of `maps`, splitting those it cuts (a file
/// mapping's part after the hole keeps its offset in the file).
fn carve(maps: &mut Vec<Mapping>, start: u64, end: u64) {
    if start >= end || !maps.iter().any(|m| m.start < end && start < m.end) {
        return;
    }
    let mut out = Vec::with_capacity(maps.len() + 1);
    for m in maps.drain(..) {
        if m.end <= start || m.start >= end {
            out.push(m);
            continue;
        }
        if m.start < start {
            out.push(Mapping { end: start, ..m });
        }
        if m.end > end {
            let file = m.file.map(|f| FileMap {
                file: f.file,
                offset: f.offset.wrapping_add(end - m.start),
            });
            out.push(Mapping {
                start: end,
                file,
                ..m
            });
        }
    }
    *maps = out;
}

/// One `[[process]]` of a memory-run config.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", tag = "kind")]
pub enum ProcessDef {
    /// Every process of a captured memory trace (a path relative to the config's folder).
    Trace {
        path: String,
        /// CPU time per instruction between accesses (the thesis's 1.6 GHz PowerPC at one
        /// instruction per cycle: 0.625).
        ns_per_instruction: f64,
    },
    /// A streaming, cache-missing process (Table 3.2).
    Stream {
        accesses: u64,
        gap_ns: Nanos,
        #[serde(default = "stream_span")]
        span_bytes: u64,
    },
    /// A process whose accesses all hit in the cache: computation only.
    Compute { total_ns: Nanos },
    /// A kernel thread computing `total_ns` (e.g. the kernel's own work between the
    /// workload's processes): it may touch any memory, so PAVM powers every rank while it
    /// runs.
    KernelThread { total_ns: Nanos },
}

fn stream_span() -> u64 {
    16 << 20
}

/// A memory run's config: `[memory]` and its `[[process]]` list.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemRunConfig {
    pub memory: MemConfig,
    #[serde(rename = "process")]
    pub processes: Vec<ProcessDef>,
    /// Devices doing DMA into (or out of) memory.
    #[serde(default, rename = "dma")]
    pub dma: Vec<DmaDef>,
}

/// Most processes one config may list (each trace may add more).
const MAX_PROCESS_DEFS: usize = 1024;

/// Parse and run a memory-run config (TOML text; trace paths relative to `base`).
pub fn run_config(text: &str, base: &Path) -> Result<MemSummary, String> {
    run_parsed(&parse_config(text)?, base)
}

/// Parse a memory-run config (TOML text); errors name the key.
pub fn parse_config(text: &str) -> Result<MemRunConfig, String> {
    let de = toml::Deserializer::parse(text).map_err(|e| format!("memory config: {e}"))?;
    serde_path_to_error::deserialize(de)
        .map_err(|e| format!("memory config: {}: {}", e.path(), e.inner()))
}

/// Run a parsed memory-run config (trace paths relative to `base`).
pub fn run_parsed(cfg: &MemRunConfig, base: &Path) -> Result<MemSummary, String> {
    if cfg.processes.is_empty() || cfg.processes.len() > MAX_PROCESS_DEFS {
        return Err(format!(
            "process: expected 1..={MAX_PROCESS_DEFS} [[process]] tables, got {}",
            cfg.processes.len()
        ));
    }
    let mut sim = MemSim::new(&cfg.memory)?;
    for d in &cfg.dma {
        let mut d = d.clone();
        if let Some(t) = &d.trace {
            d.trace = Some(base.join(t).to_string_lossy().into_owned());
        }
        sim.add_dma(d)?;
    }
    for (i, p) in cfg.processes.iter().enumerate() {
        match p {
            ProcessDef::Trace {
                path,
                ns_per_instruction,
            } => sim
                .add_memtrace(&base.join(path), *ns_per_instruction)
                .map_err(|e| format!("process[{i}]: {e}"))?,
            ProcessDef::Stream {
                accesses,
                gap_ns,
                span_bytes,
            } => {
                if *span_bytes == 0 || *span_bytes > 1 << 40 || *gap_ns > secs_to_ns(1.0) {
                    return Err(format!(
                        "process[{i}]: span_bytes must be in 1..=2^40 and gap_ns at most 1 s"
                    ));
                }
                let line = u64::from(if sim.line_bytes == 0 {
                    64
                } else {
                    sim.line_bytes
                });
                // Each stream in its own part of the address space.
                sim.add(Box::new(Streaming {
                    remaining: *accesses,
                    gap: *gap_ns,
                    next: 0,
                    line,
                    span: *span_bytes,
                    base: (i as u64 + 1) << 40,
                }));
            }
            ProcessDef::Compute { total_ns } => {
                sim.add(Box::new(Hitting {
                    remaining: *total_ns,
                    chunk: 10_000,
                }));
            }
            ProcessDef::KernelThread { total_ns } => {
                sim.add_kernel_thread(Box::new(Hitting {
                    remaining: *total_ns,
                    chunk: 10_000,
                }));
            }
        }
    }
    sim.run()
}
