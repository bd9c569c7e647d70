//! EXCES: an external flash cache (the ECD) in front of a laptop disk that prefetches
//! popular pages, serves reads and buffers writes so the disk stays asleep (Useche et al.,
//! HPCA 2008; digest `reference/exces.md`).
//!
//! One layer above the disk and the ECD. Per host request to the disk:
//!
//! 1. **Page access tracker** ([`ranker`]): every 4 KiB page touched is ranked by decayed
//!    per-quantum access counts; a changed rank updates the [`topk`] set (k = ECD pages).
//! 2. **Indirector** (Algorithm 1, per page of the split request, with
//!    [`Fanout`](wattio_core::fanout::Fanout)): a mapped page goes to its ECD page (a write
//!    sets its dirty bit); an unmapped whole-page write while the disk sleeps (or always,
//!    [`Absorb`]) takes a free, else a clean, ECD page and maps it dirty; everything else
//!    goes to the disk and is an **ECD miss**. An unmapped partial-page write goes to the
//!    disk (buffering it would leave the rest of the ECD page invalid).
//! 3. **Trigger**, on each miss: top-k ≠ ECD contents, misses over the last window above
//!    the threshold (per minute), and the minimum interval since the last reconfiguration.
//! 4. **Planner**: ECD pages outside the top-k leave (clean ones are unmapped at once,
//!    dirty ones are flushed), top-k pages outside the ECD come in, most popular first.
//! 5. **Reconfigurator** (Algorithm 2, with [`Copier`](wattio_core::copy::Copier)): phase
//!    ECD→disk first (the map entry is deleted *after* the copy), then disk→ECD (the entry
//!    is added, clean, *before* the copy). Races with foreground I/O: a read of a page in
//!    flight goes to the origin; a whole-page write while the copy's read is out goes to the
//!    destination and stops the move. Where the paper's write rule would be unsafe — a
//!    partial write, or the copy's write already out — the write goes to the origin (the
//!    ECD→disk move keeps the page mapped dirty; the disk→ECD move drops its entry) and the
//!    move stops: the moved data must never land on top of newer data.
//!
//! **Durability**: the indirection map is persisted on the ECD ([`map_log`], a
//! [`Journal`] after the k cache pages). A FLUSH, and a FUA write once its data is in
//! place, is a *sync*: flush the ECD (and the disk, if written), then append a record of
//! every dirty page the log does not map yet and of every page unmapped since (its data
//! is on the disk, now flushed), and reply once the record is durable. A dirty page on the
//! ECD is durable once its data and its map record are: no write-back, the disk sleeps on.
//! An unmapped ECD page the log still maps takes other data only once its unmap record is
//! durable (else recovery would map the old page onto new bytes). At start the map is
//! rebuilt from the log, every entry dirty (the paper). A *cleaning* (dirty threshold,
//! idle cleaning, laptop mode's spin-up) copies every dirty page to the disk and flushes
//! it. Jobs and reconfiguration copies never run at once (a job waits for the moves in
//! flight; moves wait for jobs), so two copies of one page never race.

mod config;
pub mod map_log;
pub mod pair;
pub mod ranker;
mod slot_set;
pub mod topk;

pub use config::{
    Absorb, AsleepFrom, Params, Ranking, Victim, KIND, MAX_CACHE_PAGES, MAX_DEPTH, MAX_READAHEAD,
};

use map_log::UNMAPPED;
use ranker::{Decay, PageRanker};
use slot_set::SlotSet;
use std::collections::VecDeque;
use topk::{TopK, Update};
use wattio_core::block_index::BlockIndex;
use wattio_core::copy::{Copier, CopyJob, CopyStep};
use wattio_core::device::DeviceInfo;
use wattio_core::fanout::{Fanout, Step};
use wattio_core::function::{Actions, Function, Volume};
use wattio_core::fxhash::{FxHashMap, FxHashSet};
use wattio_core::io::{Breakdown, Buf, Completion, DeviceId, Io, IoId, Op, Status};
use wattio_core::journal::{
    Journal, JournalConfig, Recovery, Step as LogStep, IO_NUMBERS, LABEL_BYTES,
};
use wattio_core::periodic::Periodic;
use wattio_core::power::PowerStateId;
use wattio_core::region::Region;
use wattio_core::time::Nanos;

/// The page: EXCES tracks, maps and moves data in 4 KiB pages.
pub const PAGE: u64 = 4096;
const NO_SLOT: u32 = u32::MAX;
const NO_PAGE: u64 = u64::MAX;
/// Device-queue priority of reconfiguration and write-back copies: behind the guest.
const COPY_PRIORITY: i8 = -1;
/// Buckets of the sliding miss window.
const MISS_BUCKETS: usize = 60;

/// What the layer knows of one disk page it has seen: 32 bytes, so that an entry never
/// straddles a cache line and a group of neighbours takes a third fewer lines (every page
/// of every host request is looked up; at 48 bytes the entry's load was most of
/// `Pages::entry` once the table outgrew the caches).
#[derive(Clone, Copy, Debug)]
struct Page {
    ranker: PageRanker,
    /// The ECD page it is mapped to, or `NO_SLOT`.
    slot: u32,
    /// Host writes to it in flight (to either device): a move of it would race them. Past
    /// `u16::MAX`, the rest are counted in [`Pages::more_writes`].
    writes: u16,
    /// The ranker's pending accesses; `NOT_SEEN` for a page never accessed (a page of a
    /// group that was never is not tracked).
    filled: u8,
    in_topk: bool,
}

const NOT_SEEN: u8 = u8::MAX;

const _: () = assert!(std::mem::size_of::<Page>() == 32);

impl Page {
    fn seen(&self) -> bool {
        self.filled != NOT_SEEN
    }
}

const UNSEEN: Page = Page {
    ranker: PageRanker::new(),
    slot: NO_SLOT,
    writes: 0,
    filled: NOT_SEEN,
    in_topk: false,
};

/// Pages a group of neighbours in [`Pages`] holds.
const GROUP: u64 = 16;

/// The pages seen, by disk page number: groups of GROUP neighbouring pages, each group
/// allocated when one of its pages is first seen, in a slab found through a
/// [`BlockIndex`] by group number. Every page of every host request is looked up, and the
/// pages of a request are neighbours: in one group they share cache lines and the memory
/// prefetcher's stream, where one slab entry a page (in the order pages were first seen)
/// cost a cache miss a page once the footprint outgrew the caches. Pages are never
/// forgotten: the table is bounded by the disk's pages (requests past its end are passed
/// on), and a group costs at most GROUP times a page's entry.
#[derive(Clone, Debug, Default)]
struct Pages {
    index: BlockIndex,
    slab: Vec<[Page; GROUP as usize]>,
    seen: usize,
    /// Host writes in flight past the `u16::MAX` a page's entry counts (a host can have
    /// that many out to one page; none ever has in practice).
    more_writes: FxHashMap<u64, u64>,
}

impl Pages {
    #[inline]
    fn get(&self, page: &u64) -> Option<&Page> {
        let g = self.index.get(page / GROUP)?;
        Some(&self.slab[g as usize][(page % GROUP) as usize]).filter(|p| p.seen())
    }

    #[inline]
    fn get_mut(&mut self, page: &u64) -> Option<&mut Page> {
        let g = self.index.get(page / GROUP)?;
        Some(&mut self.slab[g as usize][(page % GROUP) as usize]).filter(|p| p.seen())
    }

    /// `page`'s entry, a page not seen before if it has none.
    #[inline]
    fn entry(&mut self, page: u64) -> &mut Page {
        let g = match self.index.get(page / GROUP) {
            Some(g) => g,
            None => {
                let g = self.slab.len() as u32;
                self.slab.push([UNSEEN; GROUP as usize]);
                self.index.set(page / GROUP, g);
                g
            }
        };
        let e = &mut self.slab[g as usize][(page % GROUP) as usize];
        if !e.seen() {
            e.filled = 0;
            self.seen += 1;
        }
        e
    }

    /// A host write of tracked `page` goes out.
    fn write_out(&mut self, page: u64) {
        let p = self.get_mut(&page).expect("a page written is tracked");
        match p.writes.checked_add(1) {
            Some(n) => p.writes = n,
            None => *self.more_writes.entry(page).or_default() += 1,
        }
    }

    /// A host write of `page` is back: its slot, or `None` if the page is not tracked
    /// (one lookup for the caller that wants the slot too).
    fn write_back(&mut self, page: u64) -> Option<u32> {
        // The slab borrowed by field, beside `more_writes`.
        let g = self.index.get(page / GROUP)?;
        let p = &mut self.slab[g as usize][(page % GROUP) as usize];
        if !p.seen() {
            return None;
        }
        if p.writes == u16::MAX {
            if let Some(n) = self.more_writes.get_mut(&page) {
                *n -= 1;
                if *n == 0 {
                    self.more_writes.remove(&page);
                }
                return Some(p.slot);
            }
        }
        p.writes -= 1;
        Some(p.slot)
    }

    /// Pages seen.
    fn len(&self) -> usize {
        self.seen
    }

    /// Bytes of the groups and their index entries.
    fn bytes(&self) -> usize {
        self.slab.len() * (std::mem::size_of::<[Page; GROUP as usize]>() + 4)
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Page> {
        self.slab.iter_mut().flatten().filter(|p| p.seen())
    }
}

impl std::ops::Index<&u64> for Pages {
    type Output = Page;
    fn index(&self, page: &u64) -> &Page {
        self.get(page).expect("a tracked page")
    }
}

/// Which way a reconfiguration copy goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    EcdToDisk,
    DiskToEcd,
}

/// A page's move between the devices: 8 bytes (its flags in one byte), so that with it a
/// [`Slot`] is 32 and never straddles a cache line (the slot's load is most of routing a
/// hit once the slots outgrow the first-level cache).
#[derive(Clone, Copy, Debug)]
struct Move {
    dir: Dir,
    /// `WRITING`, `STOPPED`, `COPY_OUT`, `HANDOFF` below.
    flags: u8,
    /// With `HANDOFF`: the generation the handing-off write superseded.
    superseded: u32,
}

impl Move {
    /// The copy's write is out (its read came back).
    const WRITING: u8 = 1;
    /// A foreground write stopped it: its remaining steps are dropped.
    const STOPPED: u8 = 2;
    /// The copy's I/O is out (the move ends when it and any handoff are back).
    const COPY_OUT: u8 = 4;
    /// A foreground write went to the destination (the disk) while the page stays mapped
    /// (reads go on to the origin), superseding generation `superseded`. The entry goes
    /// when that write is on the disk, unless the page was written again meanwhile.
    const HANDOFF: u8 = 8;

    /// A move starting: its copy's read goes out.
    fn new(dir: Dir) -> Move {
        Move {
            dir,
            flags: Move::COPY_OUT,
            superseded: 0,
        }
    }

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    /// The generation a handing-off write superseded, if one is out.
    fn handoff(&self) -> Option<u32> {
        self.has(Move::HANDOFF).then_some(self.superseded)
    }
}

/// One ECD page and its indirection-map entry (32 bytes).
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The disk page mapped here, or `NO_PAGE`.
    page: u64,
    dirty: bool,
    /// Bumped by every write, so a copy cleans only what it copied.
    gen: u32,
    /// The layer's I/O on this ECD page in flight: it is not reused before they are back.
    busy: u32,
    /// A buffered write of an unmapped page is out: the page holds no valid data until it
    /// lands, so other I/O to it waits.
    filling: bool,
    moving: Option<Move>,
    /// Unmapped while busy: goes to the free list when its I/O is back.
    free_pending: bool,
    /// Listed in `unlogged` (dirty, maybe not in the log yet).
    in_unlogged: bool,
    /// Unmapped but still mapped by the log: free once an unmap record is durable.
    retiring: bool,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

impl Slot {
    const FREE: Slot = Slot {
        page: NO_PAGE,
        dirty: false,
        gen: 0,
        busy: 0,
        filling: false,
        moving: None,
        free_pending: false,
        in_unlogged: false,
        retiring: false,
    };

    fn mapped(&self) -> bool {
        self.page != NO_PAGE
    }

    /// A clean victim for a buffered write.
    fn reusable_clean(&self) -> bool {
        self.mapped() && !self.dirty && !self.filling && self.moving.is_none() && self.busy == 0
    }
}

/// Misses over a sliding window, in `MISS_BUCKETS` buckets.
#[derive(Clone, Debug)]
struct MissWindow {
    bucket: Nanos,
    counts: [u64; MISS_BUCKETS],
    /// Absolute index of the newest bucket.
    head: u64,
    total: u64,
}

impl MissWindow {
    fn new(window: Nanos) -> MissWindow {
        MissWindow {
            bucket: (window / MISS_BUCKETS as u64).max(1),
            counts: [0; MISS_BUCKETS],
            head: 0,
            total: 0,
        }
    }

    fn advance(&mut self, now: Nanos) {
        let b = now / self.bucket;
        if b <= self.head {
            return;
        }
        if b - self.head >= MISS_BUCKETS as u64 {
            self.counts = [0; MISS_BUCKETS];
            self.total = 0;
        } else {
            for i in self.head + 1..=b {
                let c = &mut self.counts[(i % MISS_BUCKETS as u64) as usize];
                self.total -= *c;
                *c = 0;
            }
        }
        self.head = b;
    }

    fn record(&mut self, now: Nanos) {
        self.advance(now);
        self.counts[(self.head % MISS_BUCKETS as u64) as usize] += 1;
        self.total += 1;
    }

    /// Misses in the window, scaled to a minute.
    fn per_minute(&self) -> f64 {
        self.total as f64 * 60e9 / (self.bucket * MISS_BUCKETS as u64) as f64
    }
}

/// Quantum `q` of the decay's clock and the times it covers, `from..to` (empty: none yet).
#[derive(Clone, Copy, Debug, Default)]
struct QuantumSpan {
    q: u32,
    from: Nanos,
    to: Nanos,
}

/// A reconfiguration under way: the plan's two lists.
#[derive(Clone, Debug, Default)]
struct Reconfig {
    outgoing: VecDeque<u32>,
    incoming: VecDeque<u64>,
    /// Copies out (stopped ones included until their I/O is back).
    in_flight: usize,
    /// In phase disk→ECD.
    incoming_phase: bool,
}

/// What a job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JobKind {
    /// Make the map's log match what is durable: for a FLUSH or a FUA write (`io`), or
    /// (no `io`) to free unmapped ECD pages the log still maps.
    Sync,
    /// Every dirty page to the disk (the dirty threshold, idle cleaning, a spin-up).
    Clean,
    /// The pages dirty since this time or earlier to the disk (`dirty_expire_s`).
    Expire(Nanos),
}

#[derive(Clone, Copy, Debug)]
struct Job {
    kind: JobKind,
    io: Option<Io>,
    status: Status,
}

/// The running sync: the entries it will log once its flushes are back.
#[derive(Clone, Debug, Default)]
struct Sync {
    maps: Vec<(u32, u64)>,
    unmaps: Vec<u32>,
    flushes: u32,
    /// The last record's sequence number, once appended.
    seq: Option<u64>,
}

/// A start with a pair label (`pair_label`) under way: what the two logs held, then the
/// writes it waits for before serving (the card's label first, then the disk's `Open`).
#[derive(Clone, Debug, Default)]
struct PairStart {
    card: Option<Recovery>,
    disk: Option<pair::DiskFound>,
    /// Decided: the map to serve (empty if the card's entries were dropped).
    map: Option<Vec<u64>>,
    /// The card's relabelling checkpoint: the checkpoints the card's log had landed before
    /// it (a checkpoint of a log with no record covers sequence 0, so its number says
    /// nothing: it is durable once the log counts one more).
    card_ckpt: Option<u64>,
    disk_sent: bool,
    /// The disk's checkpoint of `Open`, likewise (none if it was open already, with this
    /// pair's id).
    disk_ckpt: Option<u64>,
}

/// The idle-cleaning timer.
const IDLE_TIMER: u64 = 0;
/// The periodic check for pages dirty too long (`dirty_expire_s`).
const WRITEBACK_TIMER: u64 = 1;

/// What a copy is for (the copier's tag: `kind << 32 | slot`).
const TAG_MOVE: u64 = 1;
const TAG_WRITE_BACK: u64 = 2;

#[derive(Clone, Debug, Default)]
struct Counters {
    requests: u64,
    page_requests: u64,
    read_hits: u64,
    write_hits: u64,
    absorbed_writes: u64,
    misses: u64,
    read_misses: u64,
    write_misses: u64,
    partial_write_misses: u64,
    /// Missed pages sent to the disk inside the previous page's disk I/O.
    merged_pages: u64,
    merged_hits: u64,
    waited_for_fill: u64,
    /// Writes held while an earlier write took their page over to the disk.
    waited_for_handoff: u64,
    race_reads_to_origin: u64,
    race_writes_to_destination: u64,
    race_writes_to_origin: u64,
    race_handoffs: u64,
    /// Whole-page writes of an unmapped page sent to the disk, not buffered, because an
    /// earlier write of the page is still out to the disk (see `route`).
    racing_writes_to_disk: u64,
    /// Host reads that failed on the ECD, and those sent to the disk (every page clean).
    ecd_read_errors: u64,
    reads_retried_at_disk: u64,
    /// Write-back copies started while a host write of the page was out (the page stays
    /// dirty after them: see `job_pages`).
    write_backs_beside_writes: u64,
    clean_victims: u64,
    reconfigurations: u64,
    pages_flushed: u64,
    pages_prefetched: u64,
    clean_unmapped: u64,
    flush_jobs: u64,
    pages_written_back: u64,
    cleanings: u64,
    /// Write-backs of the pages dirty for `dirty_expire_s` or longer.
    expire_cleanings: u64,
    /// Cleanings asked for by a clean unload (`on_stop`).
    unload_cleanings: u64,
    syncs: u64,
    map_entries_logged: u64,
    recovered_pages: u64,
    /// Card entries dropped at a start after a clean unload (the disk holds the pages).
    pair_dropped_pages: u64,
    /// Writes of the disk's clean state that failed (it stays open: the next start takes
    /// the card's entries as dirty).
    pair_label_errors: u64,
    retired_victims: u64,
    readahead_ranked: u64,
    ranker_folds: u64,
    topk_updates: u64,
    rescales: u64,
    /// Structure operations (map lookups, rank folds, top-k updates): the CPU-cost proxy.
    work: u64,
}

/// The EXCES layer.
pub struct Exces {
    p: Params,
    name: String,
    disk: DeviceId,
    flash: DeviceId,
    disk_pages: u64,
    decay: Decay,
    /// The quantum `track` last found, and the times it spans.
    quantum: QuantumSpan,
    pages: Pages,
    topk: TopK,
    slots: Vec<Slot>,
    /// Free ECD pages (a stack: the lowest numbers first at the start).
    free: Vec<u32>,
    /// Clean-victim candidates, oldest first, checked when taken: clean pages outside the
    /// top-k, and the others.
    clean_out: VecDeque<u32>,
    clean_in: VecDeque<u32>,
    /// Page I/O waiting for a buffered write to land, by ECD page.
    waiting: FxHashMap<u32, Vec<Io>>,
    /// Writes waiting for an earlier write that is taking their page over to the disk (a
    /// race handoff), by ECD page.
    handing_over: FxHashMap<u32, Vec<Io>>,
    /// Top-k pages not in the ECD, and ECD pages holding a page outside the top-k: the
    /// trigger's "set ≠ contents" and the planner's two lists, kept as pages move so that
    /// planning costs what it moves, not k. Deterministic plans either way: the plan
    /// orders the incoming pages it takes by (rank, page), and reads the outgoing slots in
    /// slot order.
    incoming: FxHashSet<u64>,
    outgoing: SlotSet,
    dirty_pages: u64,
    disk_asleep: bool,
    /// Per power state of the disk: can it serve I/O (idle, active, seek)?
    disk_ready: Vec<bool>,
    misses: MissWindow,
    last_reconfig_end: Option<Nanos>,
    reconfig: Option<Reconfig>,
    fanout: Fanout,
    copier: Copier,
    /// Own I/O number of the disk flushes of jobs.
    flush_id: u64,
    jobs: VecDeque<Job>,
    running: Option<Job>,
    /// A cleaning is queued (one is enough: it writes back every dirty page).
    cleaning_queued: bool,
    /// Per ECD page: when it last went from clean to dirty (with `dirty_expire_s` only).
    dirtied: Vec<Nanos>,
    /// The time of the event being handled (for `dirtied`).
    clock: Nanos,
    writeback: Option<Periodic>,
    /// A sync without a request is queued (one is enough).
    sync_queued: bool,
    /// The on-flash map's log (built at attach).
    journal: Option<Journal>,
    /// The pair's label at the disk's end (`pair_label`, built at attach).
    pair_log: Option<Journal>,
    /// The id a new pair's logs take (from the build's nonce); the pair's once started.
    pair: u64,
    pair_start: Option<PairStart>,
    /// A clean unload with a pair label: once no page is dirty and the disk is flushed,
    /// the disk's state goes clean (`closed` once that write is sent).
    closing: bool,
    closed: bool,
    /// Per ECD page: the disk page the log maps there (records appended, durable or not).
    logged: Vec<u64>,
    /// ECD pages made dirty that the log may not map yet (checked when a sync starts).
    unlogged: Vec<u32>,
    /// Unmapped ECD pages the log still maps.
    retiring: Vec<u32>,
    /// ECD pages a host read failed on, unmapped and never used again this run (the page
    /// each held then, so a read of it still out that fails too goes to the disk). At
    /// most the ECD's pages.
    bad_slots: FxHashMap<u32, u64>,
    sync: Sync,
    /// Own I/O number of the ECD flushes of syncs.
    ecd_flush_id: u64,
    /// A data write reached the ECD since the last ECD flush was sent.
    ecd_unflushed: bool,
    /// The map is rebuilt from the log: requests are served.
    recovered: bool,
    /// The log failed: every request fails.
    failed: bool,
    /// Requests that came before recovery was over.
    early: Vec<Io>,
    /// Disk pages a cleaning failed to write back since the last sync (a volatile ECD's
    /// FLUSH or FUA write fails on them).
    failed_back: Vec<u64>,
    /// The running job's copies: (ECD page, disk page, generation copied). No generation
    /// when a host write of the page was out as the copy started: the copy's read may be
    /// served before it (a live executor completes I/O in any order), so what it carries
    /// is not known, and the page stays dirty.
    job_pages: Vec<(u32, u64, Option<u32>)>,
    /// The running job's pages written back, clean once the disk's flush is back: until
    /// then the disk may hold them in its volatile cache, and the ECD's copy must stay
    /// (a clean page's ECD page can be given to another).
    job_back: Vec<(u32, u64, u32)>,
    job_copies_left: usize,
    /// A write reached the disk since the last disk flush was sent.
    disk_unflushed: bool,
    /// A dirty page whose map entry was not logged yet moved to the disk since the last
    /// disk flush was sent: a FUA write it held is durable only once the disk is flushed
    /// (its ECD page may already hold another page, and the log never mapped it).
    moved_unlogged: bool,
    /// The pieces of the host request being routed ([`Fanout::pieces`]): a piece gets
    /// its sub-I/O id only when it leaves the layer on its own or waits (`number`), so a
    /// page merged into its neighbour's I/O costs no id.
    subs: Vec<Io>,
    /// The fan-out key of the host request whose pieces are being routed.
    piece_parent: u64,
    /// A host request's pages are being routed (their I/O may merge, as the options say).
    merging: bool,
    /// While `merging`: the id of the disk I/O the request's last missed pages went into,
    /// which the next missed page may join.
    disk_run: Option<IoId>,
    /// While `merging` and `merge_flash_pages`: the id of the ECD I/O the request's last
    /// hit went into, which the next hit may join when its ECD page follows.
    flash_run: Option<IoId>,
    /// I/O passed through (to other devices, discards, past the disk's end), under ids of
    /// the layer's fan-out: ids from above may collide with the layer's own.
    passing: FxHashSet<IoId>,
    c: Counters,
}

impl Exces {
    pub fn new(p: Params) -> Exces {
        Exces {
            name: "exces".into(),
            disk: 0,
            flash: 0,
            disk_pages: 0,
            decay: Decay::new(p.quantum, p.half_life),
            quantum: QuantumSpan::default(),
            pages: Pages::default(),
            topk: TopK::new(0),
            slots: Vec::new(),
            free: Vec::new(),
            clean_out: VecDeque::new(),
            clean_in: VecDeque::new(),
            waiting: FxHashMap::default(),
            handing_over: FxHashMap::default(),
            incoming: FxHashSet::default(),
            outgoing: SlotSet::default(),
            dirty_pages: 0,
            disk_asleep: false,
            disk_ready: Vec::new(),
            misses: MissWindow::new(p.miss_window),
            last_reconfig_end: None,
            reconfig: None,
            fanout: Fanout::new(),
            copier: Copier::new(0),
            flush_id: 0,
            jobs: VecDeque::new(),
            running: None,
            cleaning_queued: false,
            dirtied: Vec::new(),
            clock: 0,
            writeback: None,
            sync_queued: false,
            journal: None,
            pair_log: None,
            pair: 1,
            pair_start: None,
            closing: false,
            closed: false,
            logged: Vec::new(),
            unlogged: Vec::new(),
            retiring: Vec::new(),
            bad_slots: FxHashMap::default(),
            sync: Sync::default(),
            ecd_flush_id: 0,
            ecd_unflushed: false,
            recovered: false,
            failed: false,
            early: Vec::new(),
            failed_back: Vec::new(),
            job_pages: Vec::new(),
            job_back: Vec::new(),
            job_copies_left: 0,
            disk_unflushed: false,
            moved_unlogged: false,
            subs: Vec::new(),
            piece_parent: 0,
            merging: false,
            disk_run: None,
            flash_run: None,
            passing: FxHashSet::default(),
            c: Counters::default(),
            p,
        }
    }

    /// The id a new pair's logs take (`pair_label`): the build's, from its nonce.
    pub fn pair_id(mut self, id: u64) -> Exces {
        self.pair = id.max(1);
        self
    }

    /// Pages of the ECD the map's log takes for k cache pages.
    fn map_pages(&self, k: u64) -> u64 {
        if self.p.persist_map {
            map_log::region_len(k) / PAGE
        } else {
            0
        }
    }

    /// ECD pages (k).
    pub fn cache_pages(&self) -> usize {
        self.slots.len()
    }

    /// The ECD page disk page `page` is mapped to, and its dirty bit.
    pub fn mapping(&self, page: u64) -> Option<(u32, bool)> {
        let s = self.pages.get(&page)?.slot;
        (s != NO_SLOT).then(|| (s, self.slots[s as usize].dirty))
    }

    /// Is `page` in the top-k set?
    pub fn in_topk(&self, page: u64) -> bool {
        self.pages.get(&page).is_some_and(|p| p.in_topk)
    }

    /// `page`'s folded rank, in the current base's units.
    pub fn rank(&self, page: u64) -> f64 {
        self.pages.get(&page).map_or(0.0, |p| p.ranker.rank)
    }

    pub fn reconfiguring(&self) -> bool {
        self.reconfig.is_some()
    }

    // ---- popularity -------------------------------------------------------------------

    /// Record an access to `page`; fold and re-rank when its history fills.
    fn track(&mut self, now: Nanos, page: u64) {
        let recency = self.p.ranking == Ranking::Recency;
        // Every page of every request asks for its quantum: a division, and the rescale
        // check a float division, each time. Both change only when the quantum does, so they
        // are done once per quantum (the same answers: a rescale moves the base to `q`, and
        // until the quantum changes the check finds nothing more).
        let q = if (self.quantum.from..self.quantum.to).contains(&now) {
            self.quantum.q
        } else {
            let q = self.decay.quantum_of(now);
            let d = &self.decay;
            self.quantum = QuantumSpan {
                q,
                from: d
                    .start
                    .saturating_add(u64::from(q).saturating_mul(d.quantum)),
                to: d
                    .start
                    .saturating_add((u64::from(q) + 1).saturating_mul(d.quantum)),
            };
            if !recency {
                if let Some(f) = self.decay.rescale(q) {
                    self.rescale(f);
                }
            }
            q
        };
        self.c.work += 1;
        let decay = &self.decay;
        let e = self.pages.entry(page);
        if recency {
            // The rank is the time of the last access (exact in an f64 for 104 days of
            // nanoseconds; ties are broken by page number in the top-k set).
            e.ranker.rank = now as f64;
        } else if !e.ranker.access(&mut e.filled, q, decay) {
            return;
        }
        let (new, was_in, mapped) = (e.ranker.rank, e.in_topk, e.slot != NO_SLOT);
        self.c.ranker_folds += 1;
        self.c.topk_updates += 1;
        self.c.work += 2;
        let pages = &self.pages;
        match self
            .topk
            .update(page, was_in, new, |p| pages[&p].ranker.rank)
        {
            Update::Moved | Update::Out => {}
            Update::Entered { evicted } => {
                self.set_topk(page, true, mapped);
                if let Some(out) = evicted {
                    let m = self.pages[&out].slot != NO_SLOT;
                    self.set_topk(out, false, m);
                }
            }
        }
    }

    fn set_topk(&mut self, page: u64, inside: bool, mapped: bool) {
        let p = self.pages.get_mut(&page).expect("a ranked page is tracked");
        p.in_topk = inside;
        let slot = p.slot;
        match (inside, mapped) {
            (true, true) => {
                self.outgoing.remove(slot);
            }
            (true, false) => {
                self.incoming.insert(page);
            }
            (false, true) => {
                self.outgoing.insert(slot);
                if !self.slots[slot as usize].dirty {
                    self.clean_out.push_back(slot);
                }
            }
            (false, false) => {
                self.incoming.remove(&page);
            }
        }
    }

    /// Every rank × `factor` (the decay's base moved forward): the order is unchanged.
    fn rescale(&mut self, factor: f64) {
        self.c.rescales += 1;
        for p in self.pages.values_mut() {
            p.ranker.rank *= factor;
        }
        let pages = &self.pages;
        let inside: Vec<(f64, u64)> = self
            .topk
            .pages()
            .map(|pg| (pages[&pg].ranker.rank, pg))
            .collect();
        self.topk.rebuild(inside.into_iter());
    }

    // ---- the indirection map ----------------------------------------------------------

    fn map(&mut self, page: u64, slot: u32, dirty: bool) {
        let p = self.pages.get_mut(&page).expect("a mapped page is tracked");
        debug_assert_eq!(p.slot, NO_SLOT);
        p.slot = slot;
        let inside = p.in_topk;
        let s = &mut self.slots[slot as usize];
        debug_assert!(!s.mapped() && !s.free_pending);
        s.page = page;
        s.dirty = dirty;
        s.gen = s.gen.wrapping_add(1);
        if dirty {
            self.dirty_pages += 1;
            if let Some(t) = self.dirtied.get_mut(slot as usize) {
                *t = self.clock;
            }
            self.mark_unlogged(slot);
        }
        if inside {
            self.incoming.remove(&page);
        } else {
            self.outgoing.insert(slot);
        }
    }

    /// Delete `slot`'s map entry; the ECD page is free once its I/O is back.
    fn unmap(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        let page = s.page;
        debug_assert!(s.mapped());
        if s.dirty {
            self.dirty_pages -= 1;
        }
        s.page = NO_PAGE;
        s.dirty = false;
        s.filling = false;
        s.free_pending = true;
        if self.logged[slot as usize] != UNMAPPED && !s.retiring {
            s.retiring = true;
            self.retiring.push(slot);
        }
        let p = self.pages.get_mut(&page).expect("a mapped page is tracked");
        p.slot = NO_SLOT;
        if p.in_topk {
            self.incoming.insert(page);
        } else {
            self.outgoing.remove(slot);
        }
        self.release(slot);
    }

    /// An unmapped ECD page with nothing in flight goes back to the free list (one a read
    /// failed on, never).
    fn release(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if s.free_pending
            && s.busy == 0
            && s.moving.is_none()
            && !s.retiring
            && !self.bad_slots.contains_key(&slot)
        {
            s.free_pending = false;
            self.free.push(slot);
        }
    }

    fn set_dirty(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.gen = s.gen.wrapping_add(1);
        if !s.dirty {
            s.dirty = true;
            self.dirty_pages += 1;
            // Linux's rule: a page's age runs from when it went dirty, not its last write.
            if let Some(t) = self.dirtied.get_mut(slot as usize) {
                *t = self.clock;
            }
        }
        self.mark_unlogged(slot);
    }

    /// A dirty ECD page the log may not map: the next sync logs it.
    fn mark_unlogged(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if !s.in_unlogged && self.logged[slot as usize] != s.page {
            s.in_unlogged = true;
            self.unlogged.push(slot);
        }
    }

    fn set_clean(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        if s.dirty {
            s.dirty = false;
            self.dirty_pages -= 1;
        }
        let inside = self.pages[&s.page].in_topk;
        match self.p.victim {
            Victim::OutsideTopKFirst if !inside => self.clean_out.push_back(slot),
            _ => self.clean_in.push_back(slot),
        }
        self.compact_victims();
    }

    /// Candidates are checked when taken, so stale ones pile up: drop them past 2k.
    fn compact_victims(&mut self) {
        let limit = 2 * self.slots.len() + 16;
        for q in [&mut self.clean_out, &mut self.clean_in] {
            if q.len() > limit {
                let mut seen = vec![false; self.slots.len()];
                q.retain(|&s| {
                    let keep = !seen[s as usize] && self.slots[s as usize].mapped();
                    seen[s as usize] = true;
                    keep
                });
            }
        }
    }

    /// A free ECD page, else a clean one (unmapped here) per the victim rule. A clean page
    /// the log maps is not free before its unmap record is durable: it is retired (a sync
    /// is queued) and the write finds no page this time.
    fn allocate(&mut self, now: Nanos, out: &mut Actions) -> Option<u32> {
        if let Some(s) = self.free.pop() {
            return Some(s);
        }
        let victim = self.take_clean(true).or_else(|| self.take_clean(false))?;
        self.c.clean_victims += 1;
        self.unmap(victim);
        if self.slots[victim as usize].retiring {
            self.c.retired_victims += 1;
            self.want_sync(now, out);
            return None;
        }
        let s = self.free.pop();
        debug_assert_eq!(s, Some(victim));
        s
    }

    fn take_clean(&mut self, outside: bool) -> Option<u32> {
        let n = if outside {
            self.clean_out.len()
        } else {
            self.clean_in.len()
        };
        for _ in 0..n {
            let q = if outside {
                &mut self.clean_out
            } else {
                &mut self.clean_in
            };
            let s = q.pop_front()?;
            let slot = &self.slots[s as usize];
            if !slot.mapped() || slot.dirty {
                continue;
            }
            let page_inside = self.pages[&slot.page].in_topk;
            if outside && page_inside {
                // Back in the top-k: a candidate of the other queue.
                self.clean_in.push_back(s);
                continue;
            }
            if slot.reusable_clean() {
                return Some(s);
            }
            // Busy for now: keep its place at the back.
            let q = if outside {
                &mut self.clean_out
            } else {
                &mut self.clean_in
            };
            q.push_back(s);
        }
        None
    }

    // ---- the indirector (Algorithm 1) --------------------------------------------------

    fn submit_flash(&mut self, mut io: Io, out: &mut Actions) {
        self.number(&mut io);
        self.slots[(io.offset / PAGE) as usize].busy += 1;
        out.submit(io);
    }

    /// A piece of the request being routed gets its sub-I/O id (see `subs`).
    #[inline]
    fn number(&mut self, io: &mut Io) {
        self.fanout.number(self.piece_parent, io);
    }

    /// `sub` to the disk, unchanged.
    fn submit_disk(&mut self, mut sub: Io, out: &mut Actions) {
        self.number(&mut sub);
        out.submit(sub);
    }

    fn to_slot(&self, sub: Io, slot: u32) -> Io {
        Io {
            dev: self.flash,
            offset: slot as u64 * PAGE + sub.offset % PAGE,
            ..sub
        }
    }

    /// Route one page of a split request.
    fn route(&mut self, now: Nanos, mut sub: Io, out: &mut Actions) {
        self.c.work += 1;
        let page = sub.offset / PAGE;
        let whole = sub.len as u64 == PAGE;
        let write = sub.op == Op::Write;
        let slot = self.pages[&page].slot;
        if slot == NO_SLOT {
            if write {
                let absorb = match self.p.absorb {
                    Absorb::Standby => self.disk_asleep,
                    Absorb::Always => true,
                };
                // An unmapped page's writes in flight are all to the disk. Buffered beside
                // one, this write would be written back later by a copy that could land
                // before the older write (a live executor completes device I/O in any
                // order): the disk would keep the older data under a page marked clean.
                if whole && absorb && self.pages[&page].writes > 0 {
                    self.c.racing_writes_to_disk += 1;
                } else if whole && absorb {
                    if let Some(s) = self.allocate(now, out) {
                        self.c.absorbed_writes += 1;
                        self.map(page, s, true);
                        self.slots[s as usize].filling = true;
                        self.pages.write_out(page);
                        let io = self.to_slot(sub, s);
                        return self.submit_flash(io, out);
                    }
                }
                self.c.write_misses += 1;
                if !whole {
                    self.c.partial_write_misses += 1;
                }
                self.pages.write_out(page);
            } else {
                self.c.read_misses += 1;
                self.read_ahead(now, page);
            }
            self.miss_to_disk(sub, out);
            return self.miss(now, out);
        }
        let s = self.slots[slot as usize];
        if s.filling {
            self.c.waited_for_fill += 1;
            self.number(&mut sub);
            self.waiting.entry(slot).or_default().push(sub);
            return;
        }
        if write && s.moving.is_some_and(|m| m.has(Move::HANDOFF)) {
            // An earlier write is taking the page over to the disk. Written to the ECD page
            // instead, this one would keep the page mapped there, with data the ECD may not
            // have made durable yet, while the log maps the page there: a crash would then
            // return what the ECD page held before even a FUA write the disk already holds
            // (swarm seed 263,302). It waits for the handoff and is routed as the page then
            // stands.
            self.c.waited_for_handoff += 1;
            self.number(&mut sub);
            self.handing_over.entry(slot).or_default().push(sub);
            return;
        }
        match s.moving.filter(|m| !m.has(Move::STOPPED)) {
            None => {
                if write {
                    self.c.write_hits += 1;
                    self.set_dirty(slot);
                    self.pages.write_out(page);
                } else {
                    self.c.read_hits += 1;
                }
                let io = self.to_slot(sub, slot);
                self.hit_to_flash(io, out);
            }
            Some(m) if !write => {
                // A read of a page in flight goes to the origin.
                self.c.race_reads_to_origin += 1;
                match m.dir {
                    Dir::EcdToDisk => {
                        let io = self.to_slot(sub, slot);
                        self.submit_flash(io, out);
                    }
                    Dir::DiskToEcd => self.submit_disk(sub, out),
                }
            }
            Some(m) => {
                self.stop_move(slot);
                self.pages.write_out(page);
                let paper_rule = whole && !m.has(Move::WRITING);
                match (m.dir, paper_rule) {
                    // To the destination (the disk). Until it is there the ECD copy is
                    // what reads may see (the write is in flight), so the entry stays
                    // until then (`handoff_done`).
                    (Dir::EcdToDisk, true) => {
                        self.c.race_writes_to_destination += 1;
                        let s = &mut self.slots[slot as usize];
                        let gen = s.gen;
                        if let Some(m) = &mut s.moving {
                            m.set(Move::HANDOFF, true);
                            m.superseded = gen;
                        }
                        self.submit_disk(sub, out);
                    }
                    // To the origin: the page stays mapped, dirty.
                    (Dir::EcdToDisk, false) => {
                        self.c.race_writes_to_origin += 1;
                        self.set_dirty(slot);
                        let io = self.to_slot(sub, slot);
                        self.submit_flash(io, out);
                    }
                    // To the destination (the ECD page): it holds the page once this lands.
                    (Dir::DiskToEcd, true) => {
                        self.c.race_writes_to_destination += 1;
                        self.set_dirty(slot);
                        self.slots[slot as usize].filling = true;
                        let io = self.to_slot(sub, slot);
                        self.submit_flash(io, out);
                    }
                    // To the origin (the disk); the half-filled ECD page is dropped.
                    (Dir::DiskToEcd, false) => {
                        self.c.race_writes_to_origin += 1;
                        self.unmap(slot);
                        self.submit_disk(sub, out);
                    }
                }
            }
        }
    }

    /// A hit goes to the ECD: inside the ECD I/O of the request's previous page when that
    /// one hit too, in the ECD page before this one, and is still the last thing sent.
    /// "The previous page" is checked on the buffer: a page between them may have been
    /// held (it waits for its ECD page to be filled) without sending anything, and then
    /// the ECD pages are neighbours but the host's bytes are not.
    fn hit_to_flash(&mut self, mut io: Io, out: &mut Actions) {
        if self.merging && self.p.merge_flash_pages {
            if let (Some(run), Some(last)) = (self.flash_run, out.last_submit_mut()) {
                if last.id == run && last.end() == io.offset && last.buf.at(last.len) == io.buf {
                    self.c.merged_hits += 1;
                    self.slots[(io.offset / PAGE) as usize].busy += 1;
                    return self.fanout.merge(last, io);
                }
            }
            self.number(&mut io);
            self.flash_run = Some(io.id);
        }
        self.submit_flash(io, out);
    }

    /// A missed page goes to the disk: inside the disk I/O of the request's previous page
    /// when that one missed too, ends where this one begins, and is still the last thing
    /// sent (so merging never reorders what the layer sends).
    fn miss_to_disk(&mut self, mut sub: Io, out: &mut Actions) {
        if !(self.merging && self.p.merge_disk_pages) {
            return self.submit_disk(sub, out);
        }
        if let (Some(run), Some(last)) = (self.disk_run, out.last_submit_mut()) {
            if last.id == run && last.end() == sub.offset {
                self.c.merged_pages += 1;
                return self.fanout.merge(last, sub);
            }
        }
        self.number(&mut sub);
        self.disk_run = Some(sub.id);
        out.submit(sub);
    }

    /// A read miss: the next `readahead_pages` pages (within the disk) count as accessed.
    fn read_ahead(&mut self, now: Nanos, page: u64) {
        let end = (page + 1 + self.p.readahead_pages).min(self.disk_pages);
        for next in page + 1..end {
            self.c.readahead_ranked += 1;
            self.track(now, next);
        }
    }

    /// Queue a cleaning (every dirty page back to the disk) unless one is queued or
    /// nothing is dirty.
    fn clean(&mut self, now: Nanos, out: &mut Actions) {
        if self.cleaning_queued || self.dirty_pages == 0 {
            return;
        }
        self.cleaning_queued = true;
        self.jobs.push_back(Job {
            kind: JobKind::Clean,
            io: None,
            status: Status::Ok,
        });
        self.pump(now, out);
    }

    /// The periodic check (`writeback_interval_s`): queue a write-back of the pages dirty
    /// for `dirty_expire_s` or longer, if there are any and none is queued or running. As
    /// Linux's flusher, it wakes a sleeping disk for them.
    fn expire(&mut self, now: Nanos, out: &mut Actions) {
        let Some(age) = self.p.dirty_expire else {
            return;
        };
        // One at a time: none queued or running (read from the jobs, not kept beside them).
        let expiring = |j: &Job| matches!(j.kind, JobKind::Expire(_));
        if self.dirty_pages == 0
            || now < age
            || self.running.as_ref().is_some_and(expiring)
            || self.jobs.iter().any(expiring)
        {
            return;
        }
        let cutoff = now - age;
        let due = self
            .slots
            .iter()
            .zip(&self.dirtied)
            .any(|(s, &t)| s.mapped() && s.dirty && !s.filling && t <= cutoff);
        if !due {
            return;
        }
        self.jobs.push_back(Job {
            kind: JobKind::Expire(cutoff),
            io: None,
            status: Status::Ok,
        });
        self.pump(now, out);
    }

    /// Queue a sync that answers nothing: retiring ECD pages are freed by it.
    fn want_sync(&mut self, now: Nanos, out: &mut Actions) {
        if self.sync_queued {
            return;
        }
        self.sync_queued = true;
        self.jobs.push_back(Job {
            kind: JobKind::Sync,
            io: None,
            status: Status::Ok,
        });
        self.pump(now, out);
    }

    fn stop_move(&mut self, slot: u32) {
        if let Some(m) = &mut self.slots[slot as usize].moving {
            m.set(Move::STOPPED, true);
        }
    }

    // ---- trigger, planner, reconfigurator (Algorithm 2) --------------------------------

    /// An ECD miss: count it and evaluate the trigger.
    fn miss(&mut self, now: Nanos, out: &mut Actions) {
        self.c.misses += 1;
        self.misses.record(now);
        if self.p.clean_on_spin_up && self.disk_asleep {
            // The miss wakes the disk: make good use of it (laptop mode).
            self.clean(now, out);
        }
        if self.should_reconfigure(now) {
            self.plan();
            self.pump(now, out);
        }
    }

    /// The trigger's three conditions (and none under way).
    fn should_reconfigure(&self, now: Nanos) -> bool {
        self.reconfig.is_none()
            && !(self.incoming.is_empty() && self.outgoing.is_empty())
            && self.misses.per_minute() > self.p.miss_threshold_per_min
            && self
                .last_reconfig_end
                .is_none_or(|t| now.saturating_sub(t) >= self.p.min_interval)
    }

    /// The plan: outgoing (clean pages unmapped now, dirty ones listed), then incoming,
    /// most popular first.
    fn plan(&mut self) {
        self.c.reconfigurations += 1;
        let mut r = Reconfig::default();
        let outgoing: Vec<u32> = self.outgoing.iter().collect();
        for slot in outgoing {
            let s = self.slots[slot as usize];
            if s.dirty || s.filling || s.moving.is_some() {
                r.outgoing.push_back(slot);
            } else {
                self.c.clean_unmapped += 1;
                self.unmap(slot);
            }
        }
        // Only as many pages can come in as there will be ECD pages for: the free ones and
        // those the dirty outgoing pages leave. The most popular of them, in rank order
        // (selection, then a sort of what was selected: the plan costs what it moves).
        let room = self.free.len() + r.outgoing.len();
        let pages = &self.pages;
        let mut incoming: Vec<(f64, u64)> = self
            .incoming
            .iter()
            .map(|&p| (pages[&p].ranker.rank, p))
            .collect();
        let order = |a: &(f64, u64), b: &(f64, u64)| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1));
        if incoming.len() > room {
            if room > 0 {
                incoming.select_nth_unstable_by(room - 1, order);
            }
            incoming.truncate(room);
        }
        if self.p.merge_flash_pages {
            // In disk order, into ascending ECD pages (`advance_reconfig`): neighbours on
            // the disk become neighbours on the ECD, whose hits then merge.
            incoming.sort_unstable_by_key(|&(_, p)| p);
        } else {
            incoming.sort_unstable_by(order);
        }
        r.incoming = incoming.into_iter().map(|(_, p)| p).collect();
        self.reconfig = Some(r);
    }

    /// Start copies (jobs first, then the plan's moves) as far as the rules allow.
    fn pump(&mut self, now: Nanos, out: &mut Actions) {
        loop {
            if self.running.is_some() {
                return;
            }
            if !self.jobs.is_empty() {
                if self.reconfig.as_ref().is_some_and(|r| r.in_flight > 0) {
                    return;
                }
                if !self.start_job(now, out) {
                    continue;
                }
                return;
            }
            self.advance_reconfig(now, out);
            if self.closing {
                self.close(now, out);
            }
            return;
        }
    }

    fn advance_reconfig(&mut self, now: Nanos, out: &mut Actions) {
        let Some(mut r) = self.reconfig.take() else {
            return;
        };
        if !r.incoming_phase {
            while r.in_flight < self.p.reconfig_depth {
                let Some(slot) = r.outgoing.pop_front() else {
                    break;
                };
                let s = self.slots[slot as usize];
                let movable = s.mapped()
                    && s.dirty
                    && !s.filling
                    && s.moving.is_none()
                    && !self.pages[&s.page].in_topk
                    && self.pages[&s.page].writes == 0;
                if !movable {
                    continue;
                }
                self.slots[slot as usize].moving = Some(Move::new(Dir::EcdToDisk));
                let read = self.copier.start(CopyJob {
                    tag: TAG_MOVE << 32 | slot as u64,
                    from_dev: self.flash,
                    from: slot as u64 * PAGE,
                    to_dev: self.disk,
                    to: s.page * PAGE,
                    len: PAGE as u32,
                    priority: COPY_PRIORITY,
                    fua: false,
                });
                self.submit_flash(read, out);
                r.in_flight += 1;
            }
            if r.outgoing.is_empty() && r.in_flight == 0 {
                r.incoming_phase = true;
                if self.p.merge_flash_pages {
                    // The ECD pages the incoming pages will take (popped from the end), in
                    // ascending order: sorting them alone costs what the plan moves.
                    let n = r.incoming.len().min(self.free.len());
                    let at = self.free.len() - n;
                    self.free[at..].sort_unstable_by(|a, b| b.cmp(a));
                }
                if !self.retiring.is_empty() {
                    // The pages flushed out are free once the log unmaps them.
                    self.reconfig = Some(r);
                    return self.want_sync(now, out);
                }
            }
        }
        if r.incoming_phase {
            while r.in_flight < self.p.reconfig_depth {
                let Some(page) = r.incoming.pop_front() else {
                    break;
                };
                let p = self.pages[&page];
                if !p.in_topk || p.slot != NO_SLOT || p.writes > 0 {
                    continue;
                }
                let Some(slot) = self.free.pop() else {
                    r.incoming.clear();
                    break;
                };
                // Algorithm 2, lines 2–3: the entry first, clean, then the copy.
                self.map(page, slot, false);
                self.slots[slot as usize].moving = Some(Move::new(Dir::DiskToEcd));
                let read = self.copier.start(CopyJob {
                    tag: TAG_MOVE << 32 | slot as u64,
                    from_dev: self.disk,
                    from: page * PAGE,
                    to_dev: self.flash,
                    to: slot as u64 * PAGE,
                    len: PAGE as u32,
                    priority: COPY_PRIORITY,
                    fua: false,
                });
                out.submit(read);
                r.in_flight += 1;
            }
            if r.incoming.is_empty() && r.in_flight == 0 {
                self.last_reconfig_end = Some(now);
                return;
            }
        }
        self.reconfig = Some(r);
    }

    /// A move's copy is over (done, failed, or abandoned after a stop).
    fn move_done(&mut self, now: Nanos, slot: u32, status: Status, out: &mut Actions) {
        let m = self.slots[slot as usize]
            .moving
            .expect("a move of this page");
        if !m.has(Move::STOPPED) {
            match (m.dir, status) {
                // Algorithm 2, line 7: the entry goes after the copy.
                (Dir::EcdToDisk, Status::Ok) => {
                    self.c.pages_flushed += 1;
                    let s = self.slots[slot as usize];
                    self.moved_unlogged |= self.logged[slot as usize] != s.page;
                    self.unmap(slot);
                }
                (Dir::EcdToDisk, _) => {}
                (Dir::DiskToEcd, Status::Ok) => {
                    self.c.pages_prefetched += 1;
                    self.set_clean(slot);
                }
                (Dir::DiskToEcd, _) => self.unmap(slot),
            }
        }
        if !m.has(Move::HANDOFF) {
            self.end_move(now, slot, out);
        }
    }

    /// The foreground write that took over a page moving to the disk is back: the disk
    /// holds the page now, unless it failed or the page was written again since.
    fn handoff_done(&mut self, now: Nanos, slot: u32, status: Status, out: &mut Actions) {
        let s = &mut self.slots[slot as usize];
        let m = s.moving.as_mut().expect("a move of this page");
        let superseded = m.handoff().expect("a handoff");
        m.set(Move::HANDOFF, false);
        let copy_out = m.has(Move::COPY_OUT);
        if status == Status::Ok && s.gen == superseded {
            self.c.race_handoffs += 1;
            self.unmap(slot);
        }
        if !copy_out {
            self.end_move(now, slot, out);
        }
        for w in self.handing_over.remove(&slot).unwrap_or_default() {
            self.route(now, w, out);
        }
    }

    fn end_move(&mut self, now: Nanos, slot: u32, out: &mut Actions) {
        self.slots[slot as usize].moving = None;
        if let Some(r) = &mut self.reconfig {
            r.in_flight -= 1;
        }
        self.release(slot);
        self.pump(now, out);
    }

    // ---- durability: write-back jobs -------------------------------------------------

    /// Start the next job; false if it finished at once (nothing to do).
    fn start_job(&mut self, now: Nanos, out: &mut Actions) -> bool {
        let job = self.jobs.pop_front().expect("a job is queued");
        if job.io.is_some() {
            self.c.flush_jobs += 1;
        }
        self.running = Some(job);
        if job.kind == JobKind::Sync {
            if job.io.is_none() {
                self.sync_queued = false;
            }
            return self.start_sync(now, out);
        }
        let cutoff = match job.kind {
            JobKind::Expire(cutoff) => {
                self.c.expire_cleanings += 1;
                Some(cutoff)
            }
            _ => {
                self.c.cleanings += 1;
                self.cleaning_queued = false;
                None
            }
        };
        self.job_pages.clear();
        for slot in 0..self.slots.len() as u32 {
            let s = self.slots[slot as usize];
            let due = cutoff.is_none_or(|c| self.dirtied[slot as usize] <= c);
            if s.mapped() && s.dirty && !s.filling && due {
                let racing = self.pages[&s.page].writes > 0;
                self.c.write_backs_beside_writes += racing as u64;
                let gen = (!racing).then_some(s.gen);
                self.job_pages.push((slot, s.page, gen));
            }
        }
        self.job_copies_left = self.job_pages.len();
        for k in 0..self.job_pages.len() {
            let (slot, page, _) = self.job_pages[k];
            let read = self.copier.start(CopyJob {
                tag: TAG_WRITE_BACK << 32 | slot as u64,
                from_dev: self.flash,
                from: slot as u64 * PAGE,
                to_dev: self.disk,
                to: page * PAGE,
                len: PAGE as u32,
                priority: COPY_PRIORITY,
                fua: false,
            });
            self.submit_flash(read, out);
        }
        if self.job_pages.is_empty() {
            return self.flush_disk(now, out);
        }
        true
    }

    /// The job's last step; false if the disk has nothing to flush (the job is over).
    fn flush_disk(&mut self, now: Nanos, out: &mut Actions) -> bool {
        if !self.disk_unflushed {
            self.written_back_durable();
            return self.finish_job(now, out);
        }
        self.disk_unflushed = false;
        self.moved_unlogged = false;
        let f = Io {
            buf: Buf::None,
            ..Io::own(self.flush_id, Op::Flush, self.disk, 0, 0)
        };
        out.submit(f);
        true
    }

    fn write_back_done(&mut self, now: Nanos, slot: u32, status: Status, out: &mut Actions) {
        let (_, page, gen) = *self
            .job_pages
            .iter()
            .find(|(s, _, _)| *s == slot)
            .expect("a page of the running job");
        // A page that failed to go back stays dirty; a volatile ECD's sync reports it.
        if status != Status::Ok {
            self.failed_back.push(page);
        }
        if let (Status::Ok, Some(gen)) = (status, gen) {
            self.job_back.push((slot, page, gen));
        }
        self.job_copies_left -= 1;
        if self.job_copies_left == 0 && !self.flush_disk(now, out) {
            self.pump(now, out);
        }
    }

    /// The running job's disk flush is back (or nothing needed one): the pages it wrote
    /// back are durable on the disk, and those not written again since are clean.
    fn written_back_durable(&mut self) {
        for (slot, page, gen) in std::mem::take(&mut self.job_back) {
            let s = self.slots[slot as usize];
            if s.page == page && s.gen == gen && s.dirty {
                self.c.pages_written_back += 1;
                self.set_clean(slot);
            }
        }
    }

    // ---- durability: the map's log ------------------------------------------------------

    /// A sync: note what to log, then flush the ECD (its data first: data → map) and, if
    /// pages leave the log or a FLUSH asks it, the disk. False if it finished at once.
    fn start_sync(&mut self, now: Nanos, out: &mut Actions) -> bool {
        self.c.syncs += 1;
        let mut sy = std::mem::take(&mut self.sync);
        sy.maps.clear();
        sy.seq = None;
        let unlogged = std::mem::take(&mut self.unlogged);
        for &slot in &unlogged {
            let s = &mut self.slots[slot as usize];
            if !s.mapped() || !s.dirty || self.logged[slot as usize] == s.page {
                s.in_unlogged = false;
            } else if s.filling {
                // Its first data is not on the ECD yet: a later sync logs it.
                self.unlogged.push(slot);
            } else {
                s.in_unlogged = false;
                sy.maps.push((slot, s.page));
            }
        }
        // Only pages unmapped before the disk flush is sent: their data is on the disk.
        sy.unmaps = std::mem::take(&mut self.retiring);
        sy.flushes = 0;
        let persist = self.journal.is_some();
        if persist && self.ecd_unflushed && (!sy.maps.is_empty() || self.host_flush()) {
            self.ecd_unflushed = false;
            sy.flushes += 1;
            out.submit(Io {
                buf: Buf::None,
                ..Io::own(self.ecd_flush_id, Op::Flush, self.flash, 0, 0)
            });
        }
        // A FUA write whose page a move took to the disk before its entry was logged (found
        // by swarm seed 57,238: the write was answered with its data in the disk's cache
        // only) is durable once the disk is flushed.
        let fua = self
            .running
            .and_then(|j| j.io)
            .is_some_and(|io| io.op == Op::Write);
        if self.disk_unflushed
            && (!sy.unmaps.is_empty() || self.host_flush() || (fua && self.moved_unlogged))
        {
            self.disk_unflushed = false;
            self.moved_unlogged = false;
            sy.flushes += 1;
            out.submit(Io {
                buf: Buf::None,
                ..Io::own(self.flush_id, Op::Flush, self.disk, 0, 0)
            });
        }
        let flushes = sy.flushes;
        self.sync = sy;
        flushes > 0 || self.log_sync(now, out)
    }

    /// Queue the sync that answers `io` (a FLUSH, or a FUA write that landed); a volatile
    /// ECD writes every dirty page back first.
    fn push_sync(&mut self, io: Io) {
        if self.journal.is_none() {
            self.jobs.push_back(Job {
                kind: JobKind::Clean,
                io: None,
                status: Status::Ok,
            });
        }
        self.jobs.push_back(Job {
            kind: JobKind::Sync,
            io: Some(io),
            status: Status::Ok,
        });
    }

    /// The running job answers a host FLUSH.
    fn host_flush(&self) -> bool {
        self.running
            .and_then(|j| j.io)
            .is_some_and(|io| io.op == Op::Flush)
    }

    /// A flush of the running sync is back.
    fn sync_flushed(&mut self, now: Nanos, done: &Completion, out: &mut Actions) {
        if done.status != Status::Ok {
            // Nothing is known durable: the next sync flushes again (and a page a move
            // took there unlogged still needs it).
            if done.io.dev == self.disk {
                self.disk_unflushed = true;
                self.moved_unlogged = true;
            } else {
                self.ecd_unflushed = true;
            }
            let job = self.running.as_mut().expect("a sync runs");
            if job.status == Status::Ok {
                job.status = done.status;
            }
        }
        self.sync.flushes -= 1;
        if self.sync.flushes == 0 && !self.log_sync(now, out) {
            self.pump(now, out);
        }
    }

    /// The flushes are back: append the records (unmaps first). False if the sync is over.
    fn log_sync(&mut self, now: Nanos, out: &mut Actions) -> bool {
        let mut sy = std::mem::take(&mut self.sync);
        if self.journal.is_none() {
            // A volatile ECD: the cleaning before this sync wrote every dirty page back; a
            // FLUSH fails if any failed, a FUA write if one of its own did.
            let failed = std::mem::take(&mut self.failed_back);
            let job = self.running.as_mut().expect("a sync runs");
            let hit = job.io.is_some_and(|io| {
                let own = io.offset / PAGE..io.end().div_ceil(PAGE);
                failed.iter().any(|p| io.op == Op::Flush || own.contains(p))
            });
            if hit && job.status == Status::Ok {
                job.status = Status::IoError;
            }
            self.sync = sy;
            return self.finish_job(now, out);
        }
        let ok = self.running.expect("a sync runs").status == Status::Ok;
        let mut entries: Vec<(u32, u64)> = Vec::new();
        if ok {
            for &slot in &sy.unmaps {
                self.logged[slot as usize] = UNMAPPED;
                entries.push((slot, UNMAPPED));
            }
            for &(slot, page) in &sy.maps {
                // Unmapped meanwhile (its data moved to the disk): nothing to log.
                if self.slots[slot as usize].page == page {
                    self.logged[slot as usize] = page;
                    entries.push((slot, page));
                }
            }
        } else {
            // Retried by the next sync.
            self.retiring.append(&mut sy.unmaps);
            for &(slot, _) in &sy.maps {
                self.mark_unlogged(slot);
            }
        }
        self.c.map_entries_logged += entries.len() as u64;
        let j = self.journal.as_mut().expect("attached");
        let mut last = None;
        let mut record = Vec::new();
        for chunk in entries.chunks(map_log::ENTRIES_PER_RECORD) {
            record.clear();
            map_log::encode(chunk, &mut record);
            match j.append(&record, out) {
                Ok(seq) => last = Some(seq),
                Err(e) => {
                    self.sync = sy;
                    self.log_failed(&e, out);
                    return self.finish_job(now, out);
                }
            }
        }
        if j.wants_snapshot() {
            if let Err(e) = j
                .checkpoint(&map_log::snapshot(&self.logged), out)
                .map(|c| last = Some(c))
            {
                self.sync = sy;
                self.log_failed(&e, out);
                return self.finish_job(now, out);
            }
        }
        sy.seq = last;
        let waiting = last.is_some_and(|s| s > j.durable());
        self.sync = sy;
        if waiting {
            return true;
        }
        self.sync_durable(now, out)
    }

    /// The running sync's records are durable: the retired pages are free; reply.
    fn sync_durable(&mut self, now: Nanos, out: &mut Actions) -> bool {
        let unmaps = std::mem::take(&mut self.sync.unmaps);
        for &slot in &unmaps {
            self.slots[slot as usize].retiring = false;
            self.release(slot);
        }
        self.sync.unmaps = unmaps;
        self.finish_job(now, out)
    }

    /// End the running job with its status; false (the job is over).
    fn finish_job(&mut self, now: Nanos, out: &mut Actions) -> bool {
        let job = self.running.take().expect("a job runs");
        if let Some(io) = job.io {
            out.reply(Completion {
                io,
                status: job.status,
                finished: now,
                breakdown: Breakdown::default(),
            });
        }
        false
    }

    /// The log cannot be used: the run stops (simulated) or every request fails (live).
    fn log_failed(&mut self, why: &str, out: &mut Actions) {
        self.stop_serving(&format!("the on-flash map: {why}"), out);
    }

    /// The layer cannot serve (`why`): the run stops (simulated) or every request fails
    /// (live).
    fn stop_serving(&mut self, why: &str, out: &mut Actions) {
        self.failed = true;
        self.pair_start = None;
        if let Some(job) = &mut self.running {
            job.status = Status::IoError;
        }
        out.fail(&format!("{}: {why}", self.name));
        for io in std::mem::take(&mut self.early) {
            out.reply(Completion {
                io,
                status: Status::IoError,
                finished: 0,
                breakdown: Breakdown::default(),
            });
        }
    }

    /// What the log said.
    fn log_step(&mut self, now: Nanos, step: LogStep, out: &mut Actions) {
        match step {
            LogStep::Recovered(r) => self.rebuild(now, r, out),
            LogStep::Durable(seq) => {
                let mine = self.running.is_some_and(|j| j.kind == JobKind::Sync)
                    && self.sync.seq.is_some_and(|s| s <= seq);
                if mine && !self.sync_durable(now, out) {
                    self.pump(now, out);
                }
            }
            LogStep::Failed(e) => {
                self.log_failed(&e, out);
                if self.running.is_some_and(|j| j.kind == JobKind::Sync) {
                    self.finish_job(now, out);
                }
            }
            LogStep::Busy | LogStep::NotMine => {}
        }
    }

    /// Recovery: the map from the log, every entry dirty; then the requests that waited.
    /// With a pair label, the pair decides first ([`Exces::pair_step`]).
    fn rebuild(&mut self, now: Nanos, r: Recovery, out: &mut Actions) {
        if let Some(ps) = &mut self.pair_start {
            ps.card = Some(r);
            return;
        }
        match map_log::rebuild(self.slots.len(), self.disk_pages, &r.snapshot, &r.records) {
            Ok(map) => self.restore(now, &map, out),
            Err(e) => self.log_failed(&e, out),
        }
    }

    /// Serve from `map` (per ECD page, its disk page), every entry dirty.
    fn restore(&mut self, now: Nanos, map: &[u64], out: &mut Actions) {
        for (slot, &page) in map.iter().enumerate() {
            if page == UNMAPPED {
                continue;
            }
            self.pages.entry(page);
            self.logged[slot] = page;
            self.map(page, slot as u32, true);
            self.c.recovered_pages += 1;
        }
        let slots = &self.slots;
        self.free.retain(|&s| !slots[s as usize].mapped());
        self.recovered = true;
        for io in std::mem::take(&mut self.early) {
            self.on_request(now, io, out);
        }
    }

    // ---- the pair's identity (`pair_label`, module `pair`) ------------------------------

    /// What the disk's label log said at start.
    fn disk_found(&self, step: Result<Recovery, String>) -> pair::DiskFound {
        use pair::DiskFound;
        let r = match step {
            Ok(r) => r,
            Err(_) if self.pair_log.as_ref().is_some_and(|j| j.foreign()) => {
                return DiskFound::Foreign
            }
            Err(e) => return DiskFound::Unusable(e),
        };
        if r.fresh {
            return DiskFound::Blank;
        }
        match pair::Label::decode(&r.label) {
            Ok(Some(pair::Label {
                pair,
                role: pair::Role::Disk,
            })) => match pair::State::decode(&r.snapshot) {
                Ok(state) => DiskFound::Labelled { pair, state },
                Err(e) => DiskFound::Unusable(format!("it holds {e}")),
            },
            Ok(Some(_)) => DiskFound::Unusable(format!(
                "it carries a card's label: is `{}` a flash card?",
                self.p.disk
            )),
            Ok(None) => DiskFound::Unusable("its log carries no label".into()),
            Err(e) => DiskFound::Unusable(format!("it carries {e}")),
        }
    }

    /// What the disk's label log said.
    fn pair_log_step(&mut self, now: Nanos, step: LogStep, out: &mut Actions) {
        let found = match step {
            LogStep::Recovered(r) => Ok(r),
            LogStep::Failed(e) => Err(e),
            _ => return self.pair_step(now, out),
        };
        let Some(ps) = &self.pair_start else {
            // The clean state's write failed: the disk stays open, so the next start takes
            // the card's entries as dirty and writes them back (nothing is lost).
            self.c.pair_label_errors += 1;
            return;
        };
        if ps.disk.is_some() {
            let e = found.err().unwrap_or_default();
            return self.stop_serving(&format!("the pair label on `{}`: {e}", self.p.disk), out);
        }
        let f = self.disk_found(found);
        if let Some(ps) = &mut self.pair_start {
            ps.disk = Some(f);
        }
        self.pair_step(now, out);
    }

    /// A labelled start: once both logs are read, decide ([`pair::decide`]); relabel the
    /// card (and drop its entries after a clean unload) and wait for it; then write the
    /// disk's `Open` and wait for it; then serve.
    fn pair_step(&mut self, now: Nanos, out: &mut Actions) {
        let Some(mut ps) = self.pair_start.take() else {
            return;
        };
        if ps.map.is_none() {
            let (Some(r), Some(found)) = (&ps.card, &ps.disk) else {
                self.pair_start = Some(ps);
                return;
            };
            let k = self.slots.len();
            let map = match map_log::rebuild(k, self.disk_pages, &r.snapshot, &r.records) {
                Ok(m) => m,
                Err(e) => return self.log_failed(&e, out),
            };
            let card_pair = match pair::Label::decode(&r.label) {
                Ok(None) => None,
                Ok(Some(pair::Label {
                    pair,
                    role: pair::Role::Card,
                })) => Some(pair),
                Ok(Some(_)) => {
                    return self.log_failed(
                        &format!(
                            "it carries a disk's pair label: is `{}` a disk?",
                            self.p.flash
                        ),
                        out,
                    )
                }
                Err(e) => return self.log_failed(&format!("it carries {e}"), out),
            };
            let pages = map.iter().filter(|&&p| p != UNMAPPED).count();
            let j = self
                .journal
                .as_ref()
                .expect("a labelled pair has a map log");
            let d = self.pair_log.as_ref().expect("attached");
            let names = pair::Names {
                disk: &self.p.disk,
                flash: &self.p.flash,
                disk_region: (d.region().offset, d.region().len),
                card_region: (j.region().offset, j.region().len),
            };
            let card = pair::CardFound {
                pair: card_pair,
                pages,
            };
            let dec = match pair::decide(found, card, self.pair, &names) {
                Ok(dec) => dec,
                Err(e) => return self.stop_serving(&format!("the pair: {e}"), out),
            };
            let map = if dec.keep {
                map
            } else {
                self.c.pair_dropped_pages += pages as u64;
                vec![UNMAPPED; k]
            };
            // The label the card's recovery header carries: its own, or (blank, or from
            // before labels) the one set at start.
            let written = if r.label == [0; LABEL_BYTES] {
                self.pair
            } else {
                card_pair.unwrap_or(0)
            };
            self.pair = dec.pair;
            if written != dec.pair || (!dec.keep && pages > 0) {
                let j = self.journal.as_mut().expect("checked");
                j.set_label(
                    pair::Label {
                        pair: dec.pair,
                        role: pair::Role::Card,
                    }
                    .encode(),
                );
                ps.card_ckpt = Some(j.stats().checkpoints);
                if let Err(e) = j.checkpoint(&map_log::snapshot(&map), out) {
                    return self.log_failed(&e, out);
                }
            }
            ps.map = Some(map);
        }
        let j = self.journal.as_ref().expect("checked");
        let landed = |j: &Journal, ckpt: Option<u64>| {
            j.header_landed() && ckpt.is_none_or(|n| j.stats().checkpoints > n)
        };
        if !landed(j, ps.card_ckpt) {
            self.pair_start = Some(ps);
            return;
        }
        let d = self.pair_log.as_mut().expect("attached");
        if !ps.disk_sent {
            ps.disk_sent = true;
            let open = matches!(ps.disk, Some(pair::DiskFound::Labelled { pair, state: pair::State::Open }) if pair == self.pair);
            if !open {
                d.set_label(
                    pair::Label {
                        pair: self.pair,
                        role: pair::Role::Disk,
                    }
                    .encode(),
                );
                ps.disk_ckpt = Some(d.stats().checkpoints);
                if let Err(e) = d.checkpoint(&pair::State::Open.encode(), out) {
                    let why = format!("the pair label on `{}`: {e}", self.p.disk);
                    return self.stop_serving(&why, out);
                }
            }
        }
        if !landed(d, ps.disk_ckpt) {
            self.pair_start = Some(ps);
            return;
        }
        let map = ps.map.take().expect("decided");
        self.restore(now, &map, out);
    }

    /// A clean unload with a pair label, once nothing is dirty, no job or reconfiguration
    /// runs and the disk is flushed: the disk's state goes clean.
    fn close(&mut self, now: Nanos, out: &mut Actions) {
        let busy = self.running.is_some() || !self.jobs.is_empty() || self.reconfig.is_some();
        if self.closed || self.failed || busy || self.dirty_pages > 0 {
            return;
        }
        if self.disk_unflushed {
            // A cleaning with nothing to copy is the disk's flush.
            self.cleaning_queued = true;
            self.jobs.push_back(Job {
                kind: JobKind::Clean,
                io: None,
                status: Status::Ok,
            });
            return self.pump(now, out);
        }
        self.closed = true;
        let Some(d) = &mut self.pair_log else {
            return;
        };
        if d.checkpoint(&pair::State::Clean.encode(), out).is_err() {
            self.c.pair_label_errors += 1;
        }
    }

    fn host_done(&mut self, now: Nanos, c: Completion, out: &mut Actions) {
        if c.io.op == Op::Write && c.io.fua && c.status == Status::Ok {
            // Durable once its pages' data and map records are.
            self.push_sync(c.io);
            return self.pump(now, out);
        }
        out.reply(c);
    }

    /// Send `io` on unchanged but for its id.
    fn pass(&mut self, io: Io, out: &mut Actions) {
        let key = self.fanout.begin(io);
        let sub = self.fanout.sub(key, 0, io.len, io.dev, io.offset);
        self.passing.insert(sub.id);
        out.submit(sub);
    }

    /// A host read of ECD pages that failed, sent again to the disk: `Some` only if every
    /// page it read is clean now — mapped to the slot read, not dirty, not being filled or
    /// moved — so the disk holds what the ECD held (or a write that overlapped the read,
    /// which the read may return). A dirty page's only current copy is the ECD's: its error
    /// goes up (bcache recovering dirty data from the backing device returned stale data,
    /// Coly Li, "bcache: only recovery I/O error for writethrough mode", 2017). The read
    /// keeps its sub-I/O id and goes to the pages' disk offset; a failure there is final.
    /// The ECD pages it read are unmapped and never used again this run (`bad_slots`):
    /// later reads of their pages go to the disk rather than pay the failed read first,
    /// and a read of them still out that fails goes to the disk too (their pages were
    /// clean when unmapped; a write since went to the disk or another ECD page, and may be
    /// returned by a read that overlapped it).
    fn retry_at_disk(&mut self, done: &Completion) -> Option<Io> {
        let io = done.io;
        if done.status != Status::IoError || io.dev != self.flash || io.op != Op::Read {
            return None;
        }
        self.c.ecd_read_errors += 1;
        if !self.p.retry_failed_reads || self.failed {
            return None;
        }
        let first = (io.offset / PAGE) as u32;
        let last = io.end().div_ceil(PAGE) as u32;
        // The page an ECD page holds clean now, or held when a failed read unmapped it.
        let clean_page = |slot: u32| -> Option<u64> {
            if let Some(&page) = self.bad_slots.get(&slot) {
                return Some(page);
            }
            let s = self.slots.get(slot as usize)?;
            let clean = s.mapped()
                && self.pages.get(&s.page).is_some_and(|p| p.slot == slot)
                && !s.dirty
                && !s.filling
                && s.moving.is_none();
            clean.then_some(s.page)
        };
        let page0 = clean_page(first)?;
        for (i, slot) in (first..last).enumerate() {
            if clean_page(slot) != Some(page0 + i as u64) {
                return None;
            }
        }
        for slot in first..last {
            if !self.bad_slots.contains_key(&slot) {
                self.bad_slots.insert(slot, self.slots[slot as usize].page);
                self.unmap(slot);
            }
        }
        Some(Io {
            dev: self.disk,
            offset: page0 * PAGE + io.offset % PAGE,
            ..io
        })
    }

    /// A page of a host request is back.
    fn sub_done(&mut self, now: Nanos, done: &Completion, out: &mut Actions) {
        let io = done.io;
        if io.dev == self.disk {
            if io.op == Op::Write {
                self.disk_unflushed = true;
                // One page, or a run of missed pages merged into one disk write.
                for page in io.offset / PAGE..io.end().div_ceil(PAGE) {
                    let slot = self
                        .pages
                        .write_back(page)
                        .expect("a page written is tracked");
                    if slot != NO_SLOT
                        && self.slots[slot as usize]
                            .moving
                            .is_some_and(|m| m.has(Move::HANDOFF))
                    {
                        self.handoff_done(now, slot, done.status, out);
                    }
                }
            }
            return;
        }
        // One ECD page, or hits in neighbouring ECD pages merged into one I/O.
        for slot in (io.offset / PAGE) as u32..io.end().div_ceil(PAGE) as u32 {
            self.slots[slot as usize].busy -= 1;
            if io.op == Op::Write {
                self.ecd_unflushed |= done.status == Status::Ok;
                let s = self.slots[slot as usize];
                // Nothing to count for a page not tracked.
                self.pages.write_back(s.page);
                if s.filling {
                    self.slots[slot as usize].filling = false;
                    if done.status != Status::Ok {
                        // The buffered write failed: the disk still holds the page.
                        self.unmap(slot);
                    }
                    for w in self.waiting.remove(&slot).unwrap_or_default() {
                        self.route(now, w, out);
                    }
                }
            }
            self.release(slot);
        }
    }
}

impl Function for Exces {
    fn name(&self) -> &str {
        &self.name
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let find = |name: &str, role: &str| {
            devices.iter().find(|d| d.name == name).ok_or_else(|| {
                let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                format!(
                    "{role}: unknown device `{name}` (devices: {})",
                    names.join(", ")
                )
            })
        };
        let disk = find(&self.p.disk, "disk")?;
        let flash = find(&self.p.flash, "flash")?;
        let have = flash.capacity / PAGE;
        let k = match self.p.cache_pages {
            Some(k) if k + self.map_pages(k) > have => {
                return Err(format!(
                    "cache_pages: {k} pages of 4 KiB and their map's {} do not fit on `{}` ({have} pages)",
                    self.map_pages(k),
                    flash.name
                ))
            }
            Some(k) => k,
            None if self.p.persist_map => map_log::fitting(have.min(MAX_CACHE_PAGES)),
            None => have.min(MAX_CACHE_PAGES),
        };
        if k == 0 {
            return Err(format!("flash: `{}` holds no 4 KiB page", flash.name));
        }
        self.disk = disk.id;
        self.flash = flash.id;
        self.disk_pages = disk.capacity / PAGE;
        self.disk_ready = disk.power.states.iter().map(|s| s.ready).collect();
        // The LRU and laptop-mode baselines are this layer ranking by recency: say so in
        // reports.
        let what = match self.p.ranking {
            Ranking::Popularity => "exces",
            Ranking::Recency => "lru",
        };
        self.name = format!("{what}-{k}");
        self.slots = vec![Slot::FREE; k as usize];
        self.logged = vec![UNMAPPED; k as usize];
        if self.p.dirty_expire.is_some() {
            self.dirtied = vec![0; k as usize];
        }
        self.free = (0..k as u32).rev().collect();
        self.bad_slots.clear();
        self.topk = TopK::new(k as usize);
        self.outgoing = SlotSet::new(k as usize);
        // Own I/O numbers: copies from the flash device's id up, so two EXCES layers on
        // two ECDs never share scratch buffers; the job flush just below them.
        // The map's log and the ECD flush get numbers from 2^43 above that (a copier
        // would need 2^43 copies to reach them).
        let base = (1u64 << 60) | (self.flash as u64) << 44;
        self.copier = Copier::new(base + 1);
        self.flush_id = base;
        self.ecd_flush_id = base + (1 << 43);
        self.pair_log = None;
        if self.p.pair_label {
            // The label's region at the disk's end, whole blocks; the volume before it.
            let len = pair::disk_region_len();
            let Some(at) = disk.capacity.checked_sub(len + PAGE) else {
                return Err(format!(
                    "pair_label: `{}` ({} bytes) is too small for its pair label ({len} bytes) and a page",
                    disk.name, disk.capacity
                ));
            };
            let offset = (at + PAGE) / PAGE * PAGE;
            self.disk_pages = offset / PAGE;
            self.pair_log = Some(Journal::new(JournalConfig {
                region: Region {
                    dev: disk.id,
                    offset,
                    len,
                },
                snapshot_bytes: pair::STATE_BYTES,
                owner: pair::OWNER.into(),
                io_base: self.ecd_flush_id + 1 + IO_NUMBERS,
                priority: 0,
            })?);
        }
        if !self.p.persist_map {
            return Ok(());
        }
        let len = map_log::region_len(k);
        self.journal = Some(Journal::new(JournalConfig {
            // The region after the k cache pages (the paper puts it first; last keeps an
            // ECD page's offset its number × 4 KiB).
            region: Region {
                dev: flash.id,
                offset: k * PAGE,
                len,
            },
            snapshot_bytes: map_log::snapshot_bytes(k),
            owner: "exces-map".into(),
            io_base: self.ecd_flush_id + 1,
            priority: 0,
        })?);
        Ok(())
    }

    fn regions(&self) -> Vec<Region> {
        self.journal
            .iter()
            .chain(&self.pair_log)
            .map(|j| j.region())
            .collect()
    }

    /// With a pair label, the disk before its label, served through the pair (the card is
    /// not exported on its own).
    fn volume(&self) -> Option<Volume> {
        self.pair_log.as_ref()?;
        Some(Volume {
            name: self.p.disk.clone(),
            dev: self.disk,
            size: self.disk_pages * PAGE,
            members: vec![self.disk, self.flash],
        })
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        self.clock = now;
        self.decay.start = now;
        self.quantum = QuantumSpan::default();
        if self.p.dirty_expire.is_some() {
            let mut w = Periodic::new(WRITEBACK_TIMER, self.p.writeback_interval);
            w.start(now, out);
            self.writeback = Some(w);
        }
        self.misses = MissWindow::new(self.p.miss_window);
        self.misses.advance(now);
        if let Some(d) = &mut self.pair_log {
            let label = |role| {
                pair::Label {
                    pair: self.pair,
                    role,
                }
                .encode()
            };
            d.set_label(label(pair::Role::Disk));
            if let Some(j) = &mut self.journal {
                j.set_label(label(pair::Role::Card));
            }
            self.pair_start = Some(PairStart::default());
            self.closing = false;
            self.closed = false;
            d.recover(out);
        }
        match &mut self.journal {
            Some(j) => j.recover(out),
            None => {
                // Layers start top down: a layer above may already have sent I/O (its
                // own recovery's reads) before this start; it waited in `early`.
                self.recovered = true;
                for io in std::mem::take(&mut self.early) {
                    self.on_request(now, io, out);
                }
            }
        }
    }

    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        self.clock = now;
        if let Some(j) = &mut self.journal {
            let step = j.on_bytes(tag, bytes, out);
            if step != LogStep::NotMine {
                self.log_step(now, step, out);
                return self.pair_step(now, out);
            }
        }
        if let Some(d) = &mut self.pair_log {
            let step = d.on_bytes(tag, bytes, out);
            if step != LogStep::NotMine {
                self.pair_log_step(now, step, out);
            }
        }
    }

    /// The paper's clean unload: every dirty page back to the disk (the usual cleaning
    /// job: copies, then a disk FLUSH, then the pages count as clean; the log keeps their
    /// entries), so the disk alone holds the data when the stack goes away.
    fn on_stop(&mut self, now: Nanos, out: &mut Actions) {
        if self.p.clean_on_stop && self.recovered && !self.failed {
            self.c.unload_cleanings += 1;
            self.closing = self.pair_log.is_some();
            self.clean(now, out);
            // Nothing to clean: the disk's state goes clean now.
            self.pump(now, out);
        }
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        self.clock = now;
        if self.failed {
            return out.reply(Completion {
                io,
                status: Status::IoError,
                finished: now,
                breakdown: Breakdown::default(),
            });
        }
        if io.dev == self.disk
            && self.pair_log.is_some()
            && io.op != Op::Flush
            && io.len > 0
            && io.end() > self.disk_pages * PAGE
        {
            // Into the pair's label, or past the disk's end: not the volume's.
            return out.reply(Completion {
                io,
                status: Status::Invalid,
                finished: now,
                breakdown: Breakdown::default(),
            });
        }
        if !self.recovered {
            // The map is not rebuilt yet: a page may be on the ECD.
            return self.early.push(io);
        }
        if io.dev != self.disk {
            return self.pass(io, out);
        }
        match io.op {
            Op::Flush => {
                self.push_sync(io);
                self.pump(now, out);
            }
            // Past the disk's end or empty: the disk answers it.
            Op::Read | Op::Write if io.len > 0 && io.end() <= self.disk_pages * PAGE => {
                self.c.requests += 1;
                let mut subs = std::mem::take(&mut self.subs);
                subs.clear();
                self.piece_parent = self.fanout.pieces(io, PAGE, &mut subs);
                self.c.page_requests += subs.len() as u64;
                self.merging = true;
                for &sub in &subs {
                    self.track(now, sub.offset / PAGE);
                    self.route(now, sub, out);
                }
                (self.merging, self.disk_run, self.flash_run) = (false, None, None);
                self.subs = subs;
                if self.dirty_pages as f64 > self.p.dirty_threshold * self.slots.len() as f64 {
                    self.clean(now, out);
                }
                if let Some(idle) = self.p.clean_idle {
                    out.set_timer(IDLE_TIMER, now + idle);
                }
            }
            _ => self.pass(io, out),
        }
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        self.clock = now;
        let id = done.io.id;
        if id.is_sub() {
            let passed = self.passing.remove(&id);
            if passed {
                if done.io.dev == self.disk && done.io.op == Op::Write {
                    self.disk_unflushed = true;
                }
            } else {
                self.sub_done(now, &done, out);
                if let Some(again) = self.retry_at_disk(&done) {
                    self.c.reads_retried_at_disk += 1;
                    out.submit(again);
                    if !self.retiring.is_empty() {
                        // ECD pages the log maps were dropped: log their unmaps now, so a
                        // crash does not bring them back (dirty, as recovery takes every
                        // entry) to fail the next read.
                        self.want_sync(now, out);
                    }
                    return;
                }
            }
            match self.fanout.complete(&done) {
                Step::Reply(c) if passed => out.reply(c),
                Step::Reply(c) => self.host_done(now, c, out),
                Step::Pending | Step::NotMine => {}
            }
            return;
        }
        if let Some(j) = &mut self.journal {
            match j.on_completion(&done, out) {
                LogStep::NotMine => {}
                step => {
                    self.log_step(now, step, out);
                    return self.pair_step(now, out);
                }
            }
        }
        if let Some(d) = &mut self.pair_log {
            match d.on_completion(&done, out) {
                LogStep::NotMine => {}
                step => return self.pair_log_step(now, step, out),
            }
        }
        let syncing = self.running.is_some_and(|j| j.kind == JobKind::Sync);
        if syncing && (id == IoId::own(self.flush_id) || id == IoId::own(self.ecd_flush_id)) {
            return self.sync_flushed(now, &done, out);
        }
        if id == IoId::own(self.flush_id) {
            // A cleaning's disk flush: its end.
            self.running = None;
            if done.status == Status::Ok {
                self.written_back_durable();
            } else {
                // Nothing is known durable: the pages stay dirty, and the next sync
                // flushes the disk again.
                self.job_back.clear();
                self.disk_unflushed = true;
                self.moved_unlogged = true;
            }
            return self.pump(now, out);
        }
        // A copy: reconfiguration or write-back.
        let job = self.copier.job(&done.io).expect("an I/O of the copier");
        let slot = (job.tag & u32::MAX as u64) as u32;
        let kind = job.tag >> 32;
        if done.io.dev == self.flash {
            self.slots[slot as usize].busy -= 1;
        }
        if done.io.op == Op::Write && done.status == Status::Ok {
            if done.io.dev == self.disk {
                self.disk_unflushed = true;
            } else {
                self.ecd_unflushed = true;
            }
        }
        match self.copier.complete(&done, out) {
            CopyStep::Write(w) => {
                if kind == TAG_MOVE {
                    let m = self.slots[slot as usize]
                        .moving
                        .as_mut()
                        .expect("a move of this page");
                    if m.has(Move::STOPPED) {
                        m.set(Move::COPY_OUT, false);
                        self.copier.abandon(&w, out);
                        return self.move_done(now, slot, Status::Ok, out);
                    }
                    m.set(Move::WRITING, true);
                }
                if w.dev == self.flash {
                    self.submit_flash(w, out);
                } else {
                    out.submit(w);
                }
            }
            CopyStep::Done { status, .. } => {
                if kind == TAG_MOVE {
                    if let Some(m) = &mut self.slots[slot as usize].moving {
                        m.set(Move::COPY_OUT, false);
                    }
                    self.move_done(now, slot, status, out);
                } else {
                    self.write_back_done(now, slot, status, out);
                }
                self.release(slot);
            }
            CopyStep::NotMine => {}
        }
    }

    fn on_timer(&mut self, now: Nanos, timer: u64, out: &mut Actions) {
        self.clock = now;
        if timer == WRITEBACK_TIMER {
            if let Some(w) = &mut self.writeback {
                if w.fired(now, timer, out) {
                    self.expire(now, out);
                }
            }
            return;
        }
        // Idle cleaning: the host left the disk alone for `clean_idle_s`; write back while
        // it still spins (a sleeping disk is not woken for it).
        if !self.disk_asleep {
            self.clean(now, out);
        }
    }

    fn on_power(&mut self, _now: Nanos, device: DeviceId, state: PowerStateId) {
        if device == self.disk {
            // `on_power` reports stable states: asleep = one that cannot serve I/O.
            self.disk_asleep = !self.disk_ready.get(state as usize).copied().unwrap_or(true);
        }
    }

    fn on_transition(&mut self, _now: Nanos, device: DeviceId, to: PowerStateId) {
        // A spin-down's start, with `asleep_from = "spin-down"`. A spin-up's start changes
        // nothing: the disk serves no I/O until `on_power` reports the state it reached.
        if device == self.disk
            && self.p.asleep_from == AsleepFrom::SpinDown
            && !self.disk_ready.get(to as usize).copied().unwrap_or(true)
        {
            self.disk_asleep = true;
        }
    }

    /// One buffer per copy under way (a reconfiguration's move or a write-back).
    fn scratch_buffers(&self) -> usize {
        self.copier.in_flight()
    }

    fn unload_left(&self) -> Option<String> {
        let (disk, flash) = (&self.p.disk, &self.p.flash);
        if !self.recovered {
            return Some(format!(
                "its map on `{flash}` was never recovered: `{flash}` may hold written pages `{disk}` lacks"
            ));
        }
        if self.dirty_pages == 0 {
            return None;
        }
        let why = if self.failed {
            "its log on the flash device failed"
        } else if !self.p.clean_on_stop {
            "clean_on_stop = false"
        } else {
            "writing them back failed"
        };
        Some(format!(
            "{} dirty page(s) stay on `{flash}` ({why}): `{disk}` alone does not hold the volume",
            self.dirty_pages
        ))
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.c;
        let k = self.slots.len().max(1) as f64;
        let mem_map = self.slots.len() * std::mem::size_of::<Slot>();
        // The groups of pages' entries and their slots in the index (the index's partly
        // used pages aside).
        let mem_rankers = self.pages.bytes();
        let mem_topk = self.topk.len() * 16;
        let per_io = |x: u64| x as f64 / c.requests.max(1) as f64;
        [
            ("requests", c.requests as f64),
            ("page_requests", c.page_requests as f64),
            ("read_hits", c.read_hits as f64),
            ("write_hits", c.write_hits as f64),
            ("absorbed_writes", c.absorbed_writes as f64),
            ("ecd_misses", c.misses as f64),
            ("read_misses", c.read_misses as f64),
            ("write_misses", c.write_misses as f64),
            ("partial_write_misses", c.partial_write_misses as f64),
            ("merged_pages", c.merged_pages as f64),
            ("merged_hits", c.merged_hits as f64),
            ("waited_for_fill", c.waited_for_fill as f64),
            ("waited_for_handoff", c.waited_for_handoff as f64),
            ("race_reads_to_origin", c.race_reads_to_origin as f64),
            (
                "race_writes_to_destination",
                c.race_writes_to_destination as f64,
            ),
            ("race_writes_to_origin", c.race_writes_to_origin as f64),
            ("race_handoffs", c.race_handoffs as f64),
            ("racing_writes_to_disk", c.racing_writes_to_disk as f64),
            ("ecd_read_errors", c.ecd_read_errors as f64),
            ("reads_retried_at_disk", c.reads_retried_at_disk as f64),
            ("ecd_bad_pages", self.bad_slots.len() as f64),
            (
                "write_backs_beside_writes",
                c.write_backs_beside_writes as f64,
            ),
            ("clean_victims", c.clean_victims as f64),
            ("reconfigurations", c.reconfigurations as f64),
            ("pages_flushed", c.pages_flushed as f64),
            ("pages_prefetched", c.pages_prefetched as f64),
            ("clean_unmapped", c.clean_unmapped as f64),
            ("flush_jobs", c.flush_jobs as f64),
            ("pages_written_back", c.pages_written_back as f64),
            ("cleanings", c.cleanings as f64),
            ("expire_cleanings", c.expire_cleanings as f64),
            ("unload_cleanings", c.unload_cleanings as f64),
            ("map_syncs", c.syncs as f64),
            ("map_entries_logged", c.map_entries_logged as f64),
            ("map_recovered_pages", c.recovered_pages as f64),
            ("pair_dropped_pages", c.pair_dropped_pages as f64),
            ("pair_label_errors", c.pair_label_errors as f64),
            ("retired_victims", c.retired_victims as f64),
            ("readahead_ranked", c.readahead_ranked as f64),
            ("rank_folds", c.ranker_folds as f64),
            ("topk_updates", c.topk_updates as f64),
            ("rank_rescales", c.rescales as f64),
            ("cpu_ops_per_io", per_io(c.work)),
            ("tracked_pages", self.pages.len() as f64),
            ("topk_pages", self.topk.len() as f64),
            (
                "mapped_pages",
                self.slots.iter().filter(|s| s.mapped()).count() as f64,
            ),
            ("dirty_pages", self.dirty_pages as f64),
            ("memory_bytes_map", mem_map as f64),
            ("memory_bytes_rankers", mem_rankers as f64),
            ("memory_bytes_topk", mem_topk as f64),
            (
                "memory_bytes_per_cached_page",
                (mem_map + mem_topk) as f64 / k,
            ),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect()
    }
}

#[cfg(test)]
mod tests;
