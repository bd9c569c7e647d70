//! SSD model (`model = "ssd"`): channels, ways, dies and planes with per-page NAND latencies,
//! resource timelines, a page-mapped FTL with greedy garbage collection, a volatile DRAM
//! write buffer and per-operation NAND energy. See `docs/ssd.md` for the full description.
//!
//! ## Timing
//! Every plane is a *parallel unit* (PU) with two timelines: `array_free` (when its cell array
//! finishes the last read, program or erase) and `reg_free` (when its cache register can
//! take new program data — the start of the last array operation, as NAND cache programming
//! allows). Every channel and the host link keep their busy intervals, so a transfer whose
//! data is ready only late (behind a long garbage collection) leaves the gaps before it to
//! other I/Os. An I/O is cut into flash pages; each page books the resources it needs at the
//! earliest time they are free — array operations in the order I/Os are started (FCFS per
//! plane, no program/erase suspension), transfers in the earliest gap. The I/O's response
//! time is the time its last page is done, so concurrent I/Os contend for channels, planes
//! and the link.
//!
//! * read page: array `[max(t, array_free), +tR]`, then channel `bytes / channel rate`, then
//!   host link `bytes / host rate`.
//! * program page: channel transfer once the channel and the PU's cache register are free,
//!   then array `[max(xfer end, array_free), +tPROG]`.
//! * GC (greedy, per plane, when the plane's free blocks fall below `gc_free_blocks`): the
//!   victim's valid pages are moved with copy-back (tR + tPROG each, no channel), then the
//!   block is erased (tBERS); all booked on the plane's array timeline before the host page.
//!
//! Planes are independent PUs: multi-plane operations are assumed perfectly paired, so the
//! die's bandwidth is `planes × page / tPROG` (the bound the analytical test checks).
//!
//! ## Write buffer
//! Writes land in DRAM (`write_buffer_bytes`) and are destaged to NAND at once in the
//! background; the host sees the write complete when its data is in DRAM. A page needs a
//! buffer slot, freed when its page's program ends; when all are taken, the page waits for
//! the first to free, so a full buffer throttles the host to NAND speed. FLUSH completes
//! when every page accepted before it is programmed; a FUA write completes when its own
//! pages are programmed. With no buffer, writes are write-through.
//!
//! ## FTL
//! Page-mapped: `l2p[lpn] = ppn + 1` (0 = unmapped) and `p2l[ppn] = lpn`, both `u32`, plus
//! a valid bit per physical page: 4 B × (logical + physical pages) + 1 bit × physical pages
//! (≈ 490 MiB for a 1 TB drive with 16 KiB pages). Host pages are striped round-robin over
//! the PUs, channel first. Over-provisioning is the physical geometry minus the user
//! capacity. Sub-page writes program a whole page (no read-modify-write read is charged).
//!
//! ## Energy
//! `Service.energy_j` = Σ V·I·t over the NAND operations the I/O caused (read, program,
//! erase, channel transfer; SimpleSSD's method) + `controller_watts` × command overhead.
//! The `[power]` table's active state should carry only the drive's awake baseline.
//!
//! Timing parameters: `capacity_bytes`, `channels`, `ways`, `dies_per_way`,
//! `planes_per_die`, `blocks_per_plane`, `pages_per_block`, `page_bytes`, `read_page_us`,
//! `program_page_us`, `erase_block_us`, `channel_mbps`, optional `host_mbps`,
//! `overhead_us`, `write_overhead_us` (default `overhead_us`), `write_buffer_bytes`, `gc_free_blocks` (default 2), `queue_depth`
//! (default: number of PUs), `nand_volts`, `read_ma`, `program_ma`, `erase_ma`,
//! `transfer_ma`, `controller_watts` (energy keys default to 0).

use crate::params::{check_keys, f64_key, latency_us, opt_f64, rate_mbps};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use wattio_core::device::{Service, Timing};
use wattio_core::io::{Io, Op, Status};
use wattio_core::power::{PowerSpec, PowerStateId};
use wattio_core::time::{Nanos, NS_PER_MS, NS_PER_US};

const KEYS: &[&str] = &[
    "capacity_bytes",
    "channels",
    "ways",
    "dies_per_way",
    "planes_per_die",
    "blocks_per_plane",
    "pages_per_block",
    "page_bytes",
    "read_page_us",
    "program_page_us",
    "erase_block_us",
    "channel_mbps",
    "host_mbps",
    "overhead_us",
    "write_overhead_us",
    "write_buffer_bytes",
    "gc_free_blocks",
    "queue_depth",
    "nand_volts",
    "read_ma",
    "program_ma",
    "erase_ma",
    "transfer_ma",
    "controller_watts",
];

/// Valid-count flag for blocks that are not GC candidates (free or open for writing); the
/// greedy scan takes the minimum count, and flagged blocks can never be that minimum.
const NOT_CANDIDATE: u16 = 0x8000;
const MAX_PAGES_PER_BLOCK: u64 = 0x4000;
const NIL: u32 = u32::MAX;
/// How many pages ahead garbage collection fetches mapping-table entries: enough misses in
/// flight to cover memory latency, few enough to stay in L1.
const PREFETCH_AHEAD: u32 = 16;

/// A cache prefetch hint; no effect on results.
#[inline]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing architecturally; `p` is a valid
    // reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            p as *const T as *const i8,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Division by a constant, a shift when it is a power of two: the FTL divides on every
/// page, and geometries are almost always powers of two.
#[derive(Clone, Copy, Debug)]
struct Divisor {
    d: u64,
    shift: Option<u32>,
}

impl Divisor {
    fn new(d: u64) -> Divisor {
        Divisor {
            d,
            shift: d.is_power_of_two().then(|| d.trailing_zeros()),
        }
    }

    #[inline]
    fn div(self, x: u64) -> u64 {
        match self.shift {
            Some(s) => x >> s,
            None => x / self.d,
        }
    }

    #[inline]
    fn rem(self, x: u64) -> u64 {
        match self.shift {
            Some(_) => x & (self.d - 1),
            None => x % self.d,
        }
    }
}

/// A shared transfer resource (channel, host link): busy intervals in the future, so a
/// transfer booked late (data ready only after a long array operation) does not block
/// earlier transfers of other I/Os — they fill the gaps before it.
#[derive(Clone, Debug, Default)]
struct Timeline {
    busy: VecDeque<(Nanos, Nanos)>,
}

impl Timeline {
    /// Book `x` ns at the earliest gap at or after `s`; `now` (never decreasing) drops the
    /// intervals that are over. Returns the end of the booking.
    fn book(&mut self, now: Nanos, s: Nanos, x: Nanos) -> Nanos {
        while let Some(&(_, e)) = self.busy.front() {
            if e > now {
                break;
            }
            self.busy.pop_front();
        }
        if x == 0 {
            return s;
        }
        let mut i = self.busy.partition_point(|&(_, e)| e <= s);
        let mut t = s;
        while let Some(&(a, b)) = self.busy.get(i) {
            if t + x <= a {
                break;
            }
            t = t.max(b);
            i += 1;
        }
        let end = t + x;
        let left = i > 0 && self.busy.get(i - 1).is_some_and(|&(_, b)| b == t);
        let right = self.busy.get(i).is_some_and(|&(a, _)| a == end);
        match (left, right) {
            (true, true) => {
                if let Some((_, b)) = self.busy.remove(i) {
                    if let Some(l) = self.busy.get_mut(i - 1) {
                        l.1 = b;
                    }
                }
            }
            (true, false) => {
                if let Some(l) = self.busy.get_mut(i - 1) {
                    l.1 = end;
                }
            }
            (false, true) => {
                if let Some(r) = self.busy.get_mut(i) {
                    r.0 = t;
                }
            }
            (false, false) => self.busy.insert(i, (t, end)),
        }
        end
    }
}

/// Ask the kernel to back a large table with transparent huge pages (an advice: failure,
/// or a kernel without THP, only costs speed).
fn advise_huge_pages<T>(v: &mut [T]) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = std::mem::size_of_val(v);
        if bytes < 2 * HUGE {
            return;
        }
        let start = v.as_mut_ptr() as usize;
        let aligned = start.next_multiple_of(4096);
        let len = (start + bytes - aligned) / 4096 * 4096;
        // SAFETY: the range lies inside `v`'s allocation, which stays alive and in place for
        // the call; MADV_HUGEPAGE changes no contents, only how the pages are backed.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}

/// Geometry and timing read from a `[timing]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct SsdParams {
    pub capacity_bytes: u64,
    pub channels: u32,
    pub ways: u32,
    pub dies_per_way: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_bytes: u32,
    pub read_page: Nanos,
    pub program_page: Nanos,
    pub erase_block: Nanos,
    /// Bytes per second of one channel.
    pub channel_bps: f64,
    /// Bytes per second of the host link (None: not a bottleneck).
    pub host_bps: Option<f64>,
    /// Controller overhead per command (reads, flushes, discards).
    pub overhead: Nanos,
    /// Controller overhead per write command (default: `overhead`).
    pub write_overhead: Nanos,
    pub write_buffer_bytes: u64,
    pub gc_free_blocks: u32,
    pub queue_depth: u32,
    pub nand_volts: f64,
    pub read_ma: f64,
    pub program_ma: f64,
    pub erase_ma: f64,
    pub transfer_ma: f64,
    pub controller_watts: f64,
}

/// A whole-number key in `min..=max`. Read here rather than through `params::f64_key`,
/// whose ceiling (1e12, meant for times and rates) is below the byte count of a 1 TB drive.
fn int_key(t: &toml::Table, key: &str, min: u64, max: u64) -> Result<u64, String> {
    opt_int(t, key, min, max)?
        .ok_or_else(|| format!("timing.{key}: missing (expected a whole number)"))
}

fn opt_int(t: &toml::Table, key: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
    let v = match t.get(key) {
        None => return Ok(None),
        Some(toml::Value::Integer(i)) => *i as f64,
        Some(toml::Value::Float(f)) => *f,
        Some(v) => {
            return Err(format!(
                "timing.{key}: expected a whole number in {min}..={max}, got {v}"
            ))
        }
    };
    if v.is_finite() && v.fract() == 0.0 && v >= min as f64 && v <= max as f64 {
        Ok(Some(v as u64))
    } else {
        Err(format!(
            "timing.{key}: expected a whole number in {min}..={max}, got {v}"
        ))
    }
}

impl SsdParams {
    pub fn from_toml(t: &toml::Table) -> Result<SsdParams, String> {
        check_keys(t, KEYS)?;
        let u32max = u32::MAX as u64;
        // Latencies and rates bounded (`params::latency_us`, `rate_mbps`): every simulated
        // time stays far from u64 overflow.
        let mbps = |k: &str| rate_mbps(t, k);
        let us = |k: &str| -> Result<Nanos, String> { latency_us(k, f64_key(t, k)?) };
        let opt_us = |k: &str| -> Result<Option<Nanos>, String> {
            opt_f64(t, k)?.map(|v| latency_us(k, v)).transpose()
        };
        let opt = |k: &str| opt_f64(t, k);
        let channels = int_key(t, "channels", 1, 4096)? as u32;
        let ways = int_key(t, "ways", 1, 4096)? as u32;
        let dies_per_way = int_key(t, "dies_per_way", 1, 4096)? as u32;
        let planes_per_die = int_key(t, "planes_per_die", 1, 4096)? as u32;
        let pus = channels as u64 * ways as u64 * dies_per_way as u64 * planes_per_die as u64;
        let p = SsdParams {
            capacity_bytes: int_key(t, "capacity_bytes", 1, u64::MAX / 2)?,
            channels,
            ways,
            dies_per_way,
            planes_per_die,
            blocks_per_plane: int_key(t, "blocks_per_plane", 2, u32max)? as u32,
            pages_per_block: int_key(t, "pages_per_block", 1, MAX_PAGES_PER_BLOCK)? as u32,
            page_bytes: int_key(t, "page_bytes", 512, 1 << 24)? as u32,
            read_page: us("read_page_us")?,
            program_page: us("program_page_us")?,
            erase_block: us("erase_block_us")?,
            channel_bps: mbps("channel_mbps")?,
            host_bps: match opt("host_mbps")? {
                None => None,
                Some(_) => Some(mbps("host_mbps")?),
            },
            overhead: opt_us("overhead_us")?.unwrap_or(0),
            write_overhead: match opt_us("write_overhead_us")? {
                Some(v) => v,
                None => opt_us("overhead_us")?.unwrap_or(0),
            },
            write_buffer_bytes: opt_int(t, "write_buffer_bytes", 0, 1 << 40)?.unwrap_or(0),
            gc_free_blocks: opt_int(t, "gc_free_blocks", 1, u32max)?.unwrap_or(2) as u32,
            queue_depth: opt_int(t, "queue_depth", 1, 1 << 20)?.unwrap_or(pus.min(1 << 20)) as u32,
            nand_volts: opt("nand_volts")?.unwrap_or(0.0),
            read_ma: opt("read_ma")?.unwrap_or(0.0),
            program_ma: opt("program_ma")?.unwrap_or(0.0),
            erase_ma: opt("erase_ma")?.unwrap_or(0.0),
            transfer_ma: opt("transfer_ma")?.unwrap_or(0.0),
            controller_watts: opt("controller_watts")?.unwrap_or(0.0),
        };
        p.check()?;
        Ok(p)
    }

    /// Parallel units (planes).
    pub fn pus(&self) -> u64 {
        [self.ways, self.dies_per_way, self.planes_per_die]
            .iter()
            .fold(self.channels as u64, |a, &b| a.saturating_mul(b as u64))
    }

    /// Saturates rather than overflows: [`SsdParams::from_toml`] rejects anything that does
    /// not fit the u32 mapping anyway.
    pub fn physical_pages(&self) -> u64 {
        self.pus()
            .saturating_mul(self.blocks_per_plane as u64)
            .saturating_mul(self.pages_per_block as u64)
    }

    pub fn logical_pages(&self) -> u64 {
        self.capacity_bytes.div_ceil(self.page_bytes as u64)
    }

    /// Over-provisioning as the industry states it: (physical − user) / user.
    pub fn over_provisioning(&self) -> f64 {
        let phys = self.physical_pages() as f64;
        let user = self.logical_pages() as f64;
        (phys - user) / user
    }

    fn check(&self) -> Result<(), String> {
        let phys = self.physical_pages();
        if phys >= u32::MAX as u64 {
            return Err(format!(
                "timing: {phys} physical pages do not fit the u32 mapping (at most {}); use larger pages",
                u32::MAX - 1
            ));
        }
        // Every plane keeps `gc_free_blocks` free and one block open, and GC needs at least
        // one block's worth of invalid pages somewhere, or it could never make progress.
        let reserve = self
            .pus()
            .saturating_mul(self.gc_free_blocks as u64 + 2)
            .saturating_mul(self.pages_per_block as u64);
        let logical = self.logical_pages();
        if logical.saturating_add(reserve) > phys {
            return Err(format!(
                "timing.capacity_bytes: {} B ({logical} pages of {} B) leaves too little spare: the geometry has {phys} physical pages and the FTL needs {reserve} spare (gc_free_blocks + 2 blocks per plane)",
                self.capacity_bytes, self.page_bytes
            ));
        }
        if self.gc_free_blocks as u64 + 2 > self.blocks_per_plane as u64 {
            return Err(format!(
                "timing.gc_free_blocks: {} leaves no data blocks in a plane of {} blocks",
                self.gc_free_blocks, self.blocks_per_plane
            ));
        }
        Ok(())
    }
}

/// FTL and NAND counters (since construction or the last [`Ssd::reset_counters`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SsdCounters {
    /// Flash pages the host wrote (after cutting I/Os into pages).
    pub host_pages_written: u64,
    /// Flash pages programmed: host pages + GC moves.
    pub nand_pages_written: u64,
    pub nand_pages_read: u64,
    /// Blocks reclaimed by garbage collection.
    pub gc_runs: u64,
    pub gc_pages_moved: u64,
    pub erases: u64,
    /// Host I/Os that had to wait for a write-buffer slot.
    pub buffer_stalls: u64,
    /// Host pages refused for lack of space (never expected with a valid geometry).
    pub no_space: u64,
}

impl SsdCounters {
    /// Write amplification: NAND page programs per host page write (NaN before any write).
    pub fn waf(&self) -> f64 {
        self.nand_pages_written as f64 / self.host_pages_written as f64
    }
}

/// The SSD timing model.
pub struct Ssd {
    p: SsdParams,
    logical_pages: u64,
    pus: usize,
    by_page: Divisor,
    by_ppb: Divisor,
    by_bpp: Divisor,
    by_channels: Divisor,
    // Derived timing.
    ns_per_byte_channel: f64,
    ns_per_byte_host: f64,
    page_xfer: Nanos,
    e_read: f64,
    e_program: f64,
    e_erase: f64,
    w_transfer: f64,
    // FTL.
    l2p: Vec<u32>,
    /// Reverse map, meaningful only where `valid_bits` is set (so invalidating a page does
    /// not touch this large array: one cache miss less per overwrite).
    p2l: Vec<u32>,
    valid_bits: Vec<u64>,
    valid: Vec<u16>,
    next_free: Vec<u32>,
    free_head: Vec<u32>,
    free_count: Vec<u32>,
    open_block: Vec<u32>,
    open_wp: Vec<u32>,
    cursor: u64,
    // Timelines.
    array_free: Vec<Nanos>,
    reg_free: Vec<Nanos>,
    channels: Vec<Timeline>,
    host: Timeline,
    /// Start of the service being computed (bookings before it are over).
    now: Nanos,
    /// Write buffer: when each occupied slot's page is programmed (min-heap).
    buffer: BinaryHeap<Reverse<Nanos>>,
    buffer_pages: usize,
    /// When the last destage already scheduled ends (what a FLUSH waits for).
    destaged_at: Nanos,
    counters: SsdCounters,
}

impl Ssd {
    pub fn new(p: SsdParams) -> Ssd {
        let pus = p.pus() as usize;
        let blocks = pus * p.blocks_per_plane as usize;
        let phys = p.physical_pages() as usize;
        let logical_pages = p.logical_pages();
        let channel_ns = 1e9 / p.channel_bps;
        let mw = |ma: f64| p.nand_volts * ma / 1e3;
        let secs = |ns: Nanos| ns as f64 / 1e9;
        // Free lists: every block of plane q, linked in block order.
        let bpp = p.blocks_per_plane;
        let mut next_free = vec![NIL; blocks];
        for (b, n) in next_free.iter_mut().enumerate() {
            let within = b as u32 % bpp;
            if within + 1 < bpp {
                *n = b as u32 + 1;
            }
        }
        let buffer_pages = (p.write_buffer_bytes / p.page_bytes as u64) as usize;
        let mut ssd = Ssd {
            logical_pages,
            pus,
            by_page: Divisor::new(p.page_bytes as u64),
            by_ppb: Divisor::new(p.pages_per_block as u64),
            by_bpp: Divisor::new(p.blocks_per_plane as u64),
            by_channels: Divisor::new(p.channels as u64),
            ns_per_byte_channel: channel_ns,
            ns_per_byte_host: p.host_bps.map_or(0.0, |b| 1e9 / b),
            page_xfer: (p.page_bytes as f64 * channel_ns).round() as Nanos,
            e_read: mw(p.read_ma) * secs(p.read_page),
            e_program: mw(p.program_ma) * secs(p.program_page),
            e_erase: mw(p.erase_ma) * secs(p.erase_block),
            w_transfer: mw(p.transfer_ma),
            // Zeroed allocations: the OS commits these pages only when the FTL touches them.
            l2p: vec![0; logical_pages as usize],
            p2l: vec![0; phys],
            valid_bits: vec![0; phys.div_ceil(64)],
            valid: vec![NOT_CANDIDATE; blocks],
            next_free,
            free_head: (0..pus as u32).map(|q| q * bpp).collect(),
            free_count: vec![bpp; pus],
            open_block: vec![NIL; pus],
            open_wp: vec![0; pus],
            cursor: 0,
            array_free: vec![0; pus],
            reg_free: vec![0; pus],
            channels: (0..p.channels)
                .map(|_| Timeline {
                    busy: VecDeque::with_capacity(64),
                })
                .collect(),
            host: Timeline {
                busy: VecDeque::with_capacity(64),
            },
            now: 0,
            buffer: BinaryHeap::with_capacity(buffer_pages),
            buffer_pages,
            destaged_at: 0,
            counters: SsdCounters::default(),
            p,
        };
        advise_huge_pages(&mut ssd.l2p);
        advise_huge_pages(&mut ssd.p2l);
        advise_huge_pages(&mut ssd.valid_bits);
        for q in 0..pus {
            ssd.open_new_block(q);
        }
        ssd
    }

    pub fn from_toml(t: &toml::Table) -> Result<Ssd, String> {
        Ok(Ssd::new(SsdParams::from_toml(t)?))
    }

    pub fn params(&self) -> &SsdParams {
        &self.p
    }

    pub fn counters(&self) -> SsdCounters {
        self.counters
    }

    pub fn reset_counters(&mut self) {
        self.counters = SsdCounters::default();
    }

    /// Map every logical page, in order, without timing or counters: a freshly
    /// sequentially-filled drive, the usual start of a steady-state experiment.
    pub fn precondition_sequential(&mut self) {
        let saved = self.counters;
        for lpn in 0..self.logical_pages {
            let q = self.next_pu();
            let _ = self.place(lpn as u32, q, &mut 0.0, 0);
        }
        self.counters = saved;
        self.array_free.iter_mut().for_each(|t| *t = 0);
        self.reg_free.iter_mut().for_each(|t| *t = 0);
    }

    /// Age the drive with `page_writes` uniform random single-page writes through the FTL
    /// (garbage collection included, no timing), then reset the timelines and counters: a
    /// drive in write-amplification steady state, ready at t = 0.
    pub fn precondition_random(&mut self, page_writes: u64, seed: u64) {
        let mut x = seed;
        let n = self.logical_pages;
        for _ in 0..page_writes {
            // SplitMix64: reproducible without a dependency.
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            let lpn = (z ^ (z >> 31)) % n;
            let q = self.next_pu();
            let _ = self.place(lpn as u32, q, &mut 0.0, 0);
        }
        self.counters = SsdCounters::default();
        self.array_free.iter_mut().for_each(|t| *t = 0);
        self.reg_free.iter_mut().for_each(|t| *t = 0);
        self.channels.iter_mut().for_each(|t| t.busy.clear());
        self.host.busy.clear();
        self.buffer.clear();
        self.now = 0;
        self.destaged_at = 0;
    }

    /// Plane (PU) index → channel: PUs are numbered channel first.
    fn channel_of(&self, q: usize) -> usize {
        self.by_channels.rem(q as u64) as usize
    }

    fn next_pu(&mut self) -> usize {
        let q = self.cursor as usize;
        self.cursor += 1;
        if self.cursor as usize == self.pus {
            self.cursor = 0;
        }
        q
    }

    fn block_plane(&self, b: u32) -> usize {
        self.by_bpp.div(b as u64) as usize
    }

    fn pop_free(&mut self, q: usize) -> Option<u32> {
        let b = self.free_head[q];
        if b == NIL {
            return None;
        }
        self.free_head[q] = self.next_free[b as usize];
        self.free_count[q] -= 1;
        Some(b)
    }

    /// Open a new block for writing in plane `q` (the old one, if full, becomes a GC
    /// candidate). False if the plane has no free block.
    fn open_new_block(&mut self, q: usize) -> bool {
        let old = self.open_block[q];
        if old != NIL {
            self.valid[old as usize] &= !NOT_CANDIDATE;
        }
        match self.pop_free(q) {
            Some(b) => {
                self.open_block[q] = b;
                self.open_wp[q] = 0;
                true
            }
            None => {
                self.open_block[q] = NIL;
                false
            }
        }
    }

    /// Next free page of plane `q`'s open block, opening a new block if needed.
    fn frontier(&mut self, q: usize) -> Option<u32> {
        let ppb = self.p.pages_per_block;
        if (self.open_block[q] == NIL || self.open_wp[q] >= ppb) && !self.open_new_block(q) {
            return None;
        }
        let b = self.open_block[q];
        let ppn = b * ppb + self.open_wp[q];
        self.open_wp[q] += 1;
        Some(ppn)
    }

    /// Start loading the mapping-table entry of the page stored at `ppn` (if valid).
    #[inline]
    fn prefetch_l2p(&self, ppn: u32) {
        if !self.is_valid(ppn) {
            return;
        }
        let lpn = self.p2l[ppn as usize] as usize;
        if let Some(e) = self.l2p.get(lpn) {
            prefetch(e);
        }
    }

    fn is_valid(&self, ppn: u32) -> bool {
        self.valid_bits[(ppn >> 6) as usize] & (1 << (ppn & 63)) != 0
    }

    fn invalidate(&mut self, lpn: u32) {
        let old = self.l2p[lpn as usize];
        if old != 0 {
            let ppn = old - 1;
            self.valid_bits[(ppn >> 6) as usize] &= !(1 << (ppn & 63));
            self.valid[self.by_ppb.div(ppn as u64) as usize] -= 1;
        }
    }

    fn map(&mut self, lpn: u32, ppn: u32) {
        self.l2p[lpn as usize] = ppn + 1;
        self.p2l[ppn as usize] = lpn;
        self.valid_bits[(ppn >> 6) as usize] |= 1 << (ppn & 63);
        self.valid[self.by_ppb.div(ppn as u64) as usize] += 1;
    }

    /// Greedy victim of plane `q`: the full block with the fewest valid pages, if reclaiming
    /// it frees anything.
    fn victim(&self, q: usize) -> Option<u32> {
        let bpp = self.p.blocks_per_plane as usize;
        let blocks = &self.valid[q * bpp..(q + 1) * bpp];
        let (i, &v) = blocks.iter().enumerate().min_by_key(|&(_, v)| *v)?;
        (v < self.p.pages_per_block as u16).then_some((q * bpp + i) as u32)
    }

    /// Reclaim blocks in plane `q` until it has `gc_free_blocks` free blocks (or nothing
    /// more can be reclaimed), booking copy-back moves and erases on its array timeline
    /// from `now`.
    fn collect(&mut self, q: usize, now: Nanos, energy: &mut f64) {
        let ppb = self.p.pages_per_block;
        let mut busy: Nanos = 0;
        while self.free_count[q] < self.p.gc_free_blocks {
            let Some(victim) = self.victim(q) else { break };
            let first = victim * ppb;
            // Each moved page rewrites a random entry of the mapping table (hundreds of MiB):
            // one cache miss per page, taken one after another unless fetched ahead.
            for ppn in first..(first + PREFETCH_AHEAD).min(first + ppb) {
                self.prefetch_l2p(ppn);
            }
            for ppn in first..first + ppb {
                if ppn + PREFETCH_AHEAD < first + ppb {
                    self.prefetch_l2p(ppn + PREFETCH_AHEAD);
                }
                if !self.is_valid(ppn) {
                    continue;
                }
                let Some(dst) = self.frontier(q) else {
                    // Cannot happen with a checked geometry (a block is always free while
                    // GC runs); stop rather than lose the page.
                    self.note_busy(q, now, busy);
                    return;
                };
                let lpn = self.p2l[ppn as usize];
                // The old location is known: clear it without loading l2p (a cache miss);
                // `map` only stores to l2p, which does not stall.
                self.valid_bits[(ppn >> 6) as usize] &= !(1 << (ppn & 63));
                self.valid[victim as usize] -= 1;
                self.map(lpn, dst);
                busy += self.p.read_page + self.p.program_page;
                *energy += self.e_read + self.e_program;
                self.counters.gc_pages_moved += 1;
                self.counters.nand_pages_written += 1;
                self.counters.nand_pages_read += 1;
            }
            busy += self.p.erase_block;
            *energy += self.e_erase;
            self.counters.erases += 1;
            self.counters.gc_runs += 1;
            self.valid[victim as usize] = NOT_CANDIDATE;
            self.next_free[victim as usize] = self.free_head[q];
            self.free_head[q] = victim;
            self.free_count[q] += 1;
        }
        self.note_busy(q, now, busy);
    }

    fn note_busy(&mut self, q: usize, now: Nanos, busy: Nanos) {
        if busy > 0 {
            let start = now.max(self.array_free[q]);
            self.array_free[q] = start + busy;
            self.reg_free[q] = self.reg_free[q].max(self.array_free[q]);
        }
    }

    /// Map `lpn` to a new page, preferring plane `q`; runs GC as needed. Returns the plane
    /// used, or None if no plane has room.
    fn place(&mut self, lpn: u32, q: usize, energy: &mut f64, now: Nanos) -> Option<usize> {
        let pus = self.pus;
        for k in 0..pus {
            let q = (q + k) % pus;
            if let Some(ppn) = self.frontier(q) {
                self.invalidate(lpn);
                self.map(lpn, ppn);
                if self.free_count[q] < self.p.gc_free_blocks {
                    self.collect(q, now, energy);
                }
                return Some(q);
            }
            // This plane is full of valid data: try to reclaim, then move on.
            self.collect(q, now, energy);
            if let Some(ppn) = self.frontier(q) {
                self.invalidate(lpn);
                self.map(lpn, ppn);
                return Some(q);
            }
        }
        None
    }

    fn channel_ns(&self, bytes: u64) -> Nanos {
        if bytes == self.p.page_bytes as u64 {
            self.page_xfer
        } else {
            (bytes as f64 * self.ns_per_byte_channel).round() as Nanos
        }
    }

    fn host_ns(&self, bytes: u64) -> Nanos {
        (bytes as f64 * self.ns_per_byte_host).round() as Nanos
    }

    /// Book a host-link transfer of `bytes` no earlier than `t`; returns its end.
    fn host_xfer(&mut self, t: Nanos, bytes: u64) -> Nanos {
        if self.p.host_bps.is_none() {
            return t;
        }
        let x = self.host_ns(bytes);
        self.host.book(self.now, t, x)
    }

    /// Book the program of one page already placed in plane `q`, data available at `t`.
    fn program(&mut self, q: usize, t: Nanos, energy: &mut f64) -> Nanos {
        let c = self.channel_of(q);
        let xe = self.channels[c].book(self.now, t.max(self.reg_free[q]), self.page_xfer);
        let ps = xe.max(self.array_free[q]);
        let pe = ps + self.p.program_page;
        self.reg_free[q] = ps;
        self.array_free[q] = pe;
        *energy += self.e_program + self.w_transfer * self.page_xfer as f64 / 1e9;
        self.counters.nand_pages_written += 1;
        pe
    }

    fn read(&mut self, t0: Nanos, io: &Io, energy: &mut f64) -> Nanos {
        let page = self.p.page_bytes as u64;
        let mut done = t0;
        let mut off = io.offset;
        let end = io.end();
        while off < end {
            let lpn = self.by_page.div(off);
            let chunk = (page - self.by_page.rem(off)).min(end - off);
            off += chunk;
            let tag = self.l2p.get(lpn as usize).copied().unwrap_or(0);
            // Never-written data comes back as zeros from the controller, without NAND.
            let mut ready = t0;
            if tag != 0 {
                let q = self.block_plane(self.by_ppb.div((tag - 1) as u64) as u32);
                let rs = t0.max(self.array_free[q]);
                let re = rs + self.p.read_page;
                self.array_free[q] = re;
                self.reg_free[q] = self.reg_free[q].max(re);
                let c = self.channel_of(q);
                let x = self.channel_ns(chunk);
                ready = self.channels[c].book(self.now, re, x);
                *energy += self.e_read + self.w_transfer * x as f64 / 1e9;
                self.counters.nand_pages_read += 1;
            }
            done = done.max(self.host_xfer(ready, chunk));
        }
        done
    }

    fn write(&mut self, t0: Nanos, io: &Io, energy: &mut f64) -> (Nanos, Status) {
        let page = self.p.page_bytes as u64;
        let buffered = self.buffer_pages > 0;
        let mut host_done = t0;
        let mut nand_done = t0;
        let mut stalled = false;
        let mut status = Status::Ok;
        let mut off = io.offset;
        let end = io.end();
        while off < end {
            let lpn = self.by_page.div(off);
            let chunk = (page - self.by_page.rem(off)).min(end - off);
            off += chunk;
            // Data must be in controller DRAM (a buffer slot) before it goes to NAND.
            let mut admit = t0;
            if buffered {
                while self.buffer.peek().is_some_and(|&Reverse(e)| e <= t0) {
                    self.buffer.pop();
                }
                if self.buffer.len() >= self.buffer_pages {
                    // Full: wait for the first slot whose page gets programmed.
                    if let Some(Reverse(e)) = self.buffer.pop() {
                        admit = e.max(t0);
                        stalled = true;
                    }
                }
            }
            let in_dram = self.host_xfer(admit, chunk);
            host_done = host_done.max(in_dram);
            let q = self.next_pu();
            let Some(q) = self.place(lpn as u32, q, energy, in_dram) else {
                self.counters.no_space += 1;
                status = Status::NoSpace;
                continue;
            };
            self.counters.host_pages_written += 1;
            let pe = self.program(q, in_dram, energy);
            nand_done = nand_done.max(pe);
            if buffered {
                self.buffer.push(Reverse(pe));
            }
        }
        if stalled {
            self.counters.buffer_stalls += 1;
        }
        self.destaged_at = self.destaged_at.max(nand_done);
        let done = if buffered && !io.fua {
            host_done
        } else {
            nand_done
        };
        (done, status)
    }

    fn discard(&mut self, io: &Io) {
        let page = self.p.page_bytes as u64;
        // Only whole pages can be unmapped.
        let first = io.offset.div_ceil(page);
        let last = io.end() / page;
        for lpn in first..last.min(self.logical_pages) {
            self.invalidate(lpn as u32);
            self.l2p[lpn as usize] = 0;
        }
    }
}

impl Ssd {
    /// Check the FTL's internal consistency: every mapped logical page points at a valid
    /// physical page that maps back to it, and per-block valid counts match the valid bits.
    /// O(physical pages); for tests and fuzzing.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut mapped = 0u64;
        for (lpn, &tag) in self.l2p.iter().enumerate() {
            if tag == 0 {
                continue;
            }
            mapped += 1;
            let ppn = tag - 1;
            if !self.is_valid(ppn) || self.p2l.get(ppn as usize) != Some(&(lpn as u32)) {
                return Err(format!("lpn {lpn} → ppn {ppn} does not map back"));
            }
        }
        let ppb = self.p.pages_per_block as usize;
        let mut valid_pages = 0u64;
        for (b, &v) in self.valid.iter().enumerate() {
            let bits = (b * ppb..(b + 1) * ppb)
                .filter(|&ppn| self.is_valid(ppn as u32))
                .count();
            if bits != (v & !NOT_CANDIDATE) as usize {
                return Err(format!("block {b}: valid count {v:#x}, {bits} valid pages"));
            }
            valid_pages += bits as u64;
        }
        if valid_pages != mapped {
            return Err(format!("{mapped} mapped pages, {valid_pages} valid"));
        }
        let free: u64 = self.free_count.iter().map(|&c| c as u64).sum();
        let mut listed = 0u64;
        for &head in &self.free_head {
            let mut b = head;
            while b != NIL {
                listed += 1;
                if listed > self.valid.len() as u64 {
                    return Err("free list has a cycle".into());
                }
                b = self.next_free[b as usize];
            }
        }
        if listed != free {
            return Err(format!("free counts say {free}, free lists hold {listed}"));
        }
        Ok(())
    }
}

/// Fuzz entry (`fuzz/fuzz_targets/ssd_timing.rs` and the corpus test): `data` is a
/// `[timing]` table as TOML text. Bad input must give an error, never a panic; a spec that
/// builds is driven through a workload derived from the input's bytes and the FTL is
/// checked for consistency afterwards.
#[doc(hidden)]
pub fn fuzz_timing_toml(data: &[u8]) {
    let Some(t) = crate::fuzz_input::timing_table(data) else {
        return;
    };
    let Ok(p) = SsdParams::from_toml(&t) else {
        return;
    };
    // Keep the harness's memory small; large drives are legitimate, just not here.
    if p.physical_pages() > 1 << 18 || p.write_buffer_bytes > 1 << 26 || p.pus() > 4096 {
        return;
    }
    let mut s = Ssd::new(p);
    let cap = s.capacity();
    let page = s.p.page_bytes as u64;
    let mut stream = crate::fuzz_input::Stream::of(data);
    let mut next = || stream.next();
    let mut now: Nanos = 0;
    let ops = 64 + (s.logical_pages * 3).min(4000);
    for i in 0..ops {
        let r = next();
        let op = match r % 16 {
            0 => Op::Flush,
            1 => Op::Discard,
            2..=8 => Op::Write,
            _ => Op::Read,
        };
        // Mostly in range, sometimes straddling or past the end, sometimes absurd.
        let offset = match (r >> 8) % 32 {
            0 => u64::MAX - (r >> 16) % 4096,
            1 => cap.saturating_sub((r >> 16) % (2 * page)),
            _ => (r >> 16) % cap.max(1),
        };
        let len = ((r >> 40) % (4 * page)) as u32;
        let mut io = Io::own(i, op, 0, offset, len);
        io.fua = r & (1 << 63) != 0;
        let svc = s.service(now, &io);
        assert!(svc.total() < 1 << 62, "runaway time {svc:?}");
        assert!(svc.energy_j.is_finite() && svc.energy_j >= 0.0);
        now += (r >> 50) % 200_000;
    }
    if let Err(e) = s.check_invariants() {
        panic!("FTL inconsistent: {e}");
    }
}

pub fn timing_from_toml(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    Ok(Box::new(Ssd::from_toml(t)?))
}

impl Timing for Ssd {
    fn capacity(&self) -> u64 {
        self.p.capacity_bytes
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.counters;
        let mut v = vec![
            ("host_pages_written".into(), c.host_pages_written as f64),
            ("nand_pages_written".into(), c.nand_pages_written as f64),
            ("nand_pages_read".into(), c.nand_pages_read as f64),
            ("gc_runs".into(), c.gc_runs as f64),
            ("gc_pages_moved".into(), c.gc_pages_moved as f64),
            ("erases".into(), c.erases as f64),
            ("buffer_stalls".into(), c.buffer_stalls as f64),
        ];
        // Undefined before the first host write: left out rather than NaN in JSON.
        if c.host_pages_written > 0 {
            v.push(("write_amplification".into(), c.waf()));
        }
        v
    }

    fn max_concurrent(&self) -> u32 {
        self.p.queue_depth
    }

    fn precondition_full(&mut self) -> bool {
        self.precondition_sequential();
        true
    }

    fn service(&mut self, start: Nanos, io: &Io) -> Service {
        let overhead = if io.op == Op::Write {
            self.p.write_overhead
        } else {
            self.p.overhead
        };
        self.now = self.now.max(start);
        let t0 = start + overhead;
        let mut energy = self.p.controller_watts * overhead as f64 / 1e9;
        let in_range = io
            .offset
            .checked_add(io.len as u64)
            .is_some_and(|end| end <= self.p.capacity_bytes);
        let (done, status) = match io.op {
            Op::Read | Op::Write | Op::Discard if !in_range => (t0, Status::Invalid),
            Op::Read => (self.read(t0, io, &mut energy), Status::Ok),
            Op::Write => {
                let (d, s) = self.write(t0, io, &mut energy);
                // FUA on a buffered drive also makes earlier writes durable in this model
                // only as far as they are destaged by `d`; FLUSH is the full barrier.
                (d, s)
            }
            Op::Flush => (t0.max(self.destaged_at), Status::Ok),
            Op::Discard => {
                self.discard(io);
                (t0, Status::Ok)
            }
        };
        Service {
            transfer_ns: done - t0,
            overhead_ns: overhead,
            energy_j: energy,
            status,
            ..Service::default()
        }
    }
}

/// One step of an NVMe autonomous power state transition (APST) table.
#[derive(Clone, Debug, PartialEq)]
pub struct ApstStep {
    pub from: PowerStateId,
    pub to: PowerStateId,
    /// Idle time in `from` after which the drive moves to `to`.
    pub idle_after: Nanos,
}

/// The APST table Linux programs into an NVMe drive (`nvme_configure_apst`, the classic
/// policy without primary/secondary timeouts). A non-operational state is usable if its
/// exit latency is within `max_latency` (the kernel's `ps_max_latency_us`, 100 ms by
/// default). Each state (the operational idle state, then each usable sleep state) idles
/// into the shallowest usable state deeper than itself after ⌈(entry + exit latency of the
/// target, in µs) / 20⌉ ms — 50× the target's round trip.
///
/// Entry and exit latencies are those of the spec's idle→state and state→idle transitions;
/// "deeper" is lower power. The chain stops where the spec has no transition between two
/// consecutive sleep states.
pub fn apst_table(spec: &PowerSpec, max_latency: Nanos) -> Vec<ApstStep> {
    // Shallowest first (highest power), as NVMe numbers its states.
    let mut usable: Vec<(PowerStateId, Nanos)> = spec
        .sleep_states()
        .into_iter()
        .filter_map(|s| {
            let entry = spec.transitions[spec.transition(spec.idle, s)?].latency;
            let exit = spec.transitions[spec.transition(s, spec.idle)?].latency;
            (exit <= max_latency).then_some((s, entry + exit))
        })
        .collect();
    usable.reverse();
    let timeout = |total: Nanos| {
        let us = total.div_ceil(NS_PER_US);
        // The kernel's (µs + 19) / 20.
        us.div_ceil(20) * NS_PER_MS
    };
    let mut steps = Vec::new();
    let mut from = spec.idle;
    for &(s, total) in &usable {
        if from != spec.idle && spec.transition(from, s).is_none() {
            break;
        }
        steps.push(ApstStep {
            from,
            to: s,
            idle_after: timeout(total),
        });
        from = s;
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::Request;

    fn small() -> SsdParams {
        let t: toml::Table = toml::from_str(
            r#"
            capacity_bytes = 3_000_000
            channels = 2
            ways = 1
            dies_per_way = 1
            planes_per_die = 1
            blocks_per_plane = 32
            pages_per_block = 16
            page_bytes = 4096
            read_page_us = 50
            program_page_us = 500
            erase_block_us = 3000
            channel_mbps = 400
            "#,
        )
        .unwrap();
        SsdParams::from_toml(&t).unwrap()
    }

    #[test]
    fn geometry_by_hand() {
        let p = small();
        assert_eq!(p.pus(), 2);
        assert_eq!(p.physical_pages(), 2 * 32 * 16);
        assert_eq!(p.logical_pages(), 733); // ⌈3e6 / 4096⌉
        assert!((p.over_provisioning() - (1024.0 - 733.0) / 733.0).abs() < 1e-12);
        assert_eq!(p.queue_depth, 2);
    }

    #[test]
    fn too_little_spare_is_an_error() {
        let mut t: toml::Table = toml::from_str(
            "capacity_bytes = 4_194_304\nchannels = 2\nways = 1\ndies_per_way = 1\nplanes_per_die = 1\nblocks_per_plane = 32\npages_per_block = 16\npage_bytes = 4096\nread_page_us = 50\nprogram_page_us = 500\nerase_block_us = 3000\nchannel_mbps = 400",
        )
        .unwrap();
        let e = SsdParams::from_toml(&t).err().unwrap();
        assert!(e.starts_with("timing.capacity_bytes:"), "{e}");
        t.insert("pages_per_block".into(), toml::Value::Float(16.5));
        let e = SsdParams::from_toml(&t).err().unwrap();
        assert!(
            e.starts_with("timing.pages_per_block: expected a whole number"),
            "{e}"
        );
        t.insert("pages_per_block".into(), toml::Value::Integer(16));
        t.insert("bogus".into(), toml::Value::Integer(1));
        let e = SsdParams::from_toml(&t).err().unwrap();
        assert!(e.starts_with("timing.bogus: unknown key"), "{e}");
    }

    #[test]
    fn a_preconditioned_drive_reads_its_media_and_a_fresh_one_does_not() {
        let read = Request::new(0, Op::Read, 8192, 4096).io(0);
        let mut fresh = Ssd::new(small());
        let t_fresh = fresh.service(0, &read).total();
        let mut full = Ssd::new(small());
        assert!(Timing::precondition_full(&mut full));
        assert!(
            full.l2p.iter().all(|&x| x != 0),
            "every logical page mapped"
        );
        full.check_invariants().unwrap();
        let t_full = full.service(0, &read).total();
        // The mapped page is read from the array: at least the 50 µs page read.
        assert!(t_full >= 50_000, "{t_full} ns");
        assert!(
            t_fresh < 50_000,
            "{t_fresh} ns: an unwritten page is answered at once"
        );
    }

    #[test]
    fn overwrite_in_place_keeps_one_mapping() {
        let mut s = Ssd::new(small());
        for _ in 0..2000 {
            s.service(0, &Request::new(0, Op::Write, 8192, 4096).io(0));
        }
        let mapped = s.l2p.iter().filter(|&&x| x != 0).count();
        assert_eq!(mapped, 1);
        let valid: u32 = s.valid.iter().map(|v| (v & !NOT_CANDIDATE) as u32).sum();
        assert_eq!(valid, 1);
        s.check_invariants().unwrap();
        let c = s.counters();
        assert_eq!(c.host_pages_written, 2000);
        assert!(c.gc_runs > 0);
    }
}
