//! Striped arrays above D devices: RAID-0 and RAID-5 (`kind = "raid"`).
//!
//! One module for both levels: they share the address mapping ([`Layout`]), the splitting
//! of host I/O into chunk pieces and the flush fan-out; RAID-5 adds the parity column and
//! the write and degraded-read paths below. (PARAID's gears are RAIDs of the same level
//! over fewer disks, so they reuse the same mapping.)
//!
//! **RAID-0**: a read or write is split into chunk pieces (`wattio_core::fanout`), one
//! sub-I/O per piece; an error on any piece is the request's error (no redundancy).
//!
//! **RAID-5** works, for writes and reconstruction, a *page row* at a time: the same
//! 4 KiB page ([`PAGE`]) of every member's chunk of one stripe — Linux md's stripe cache
//! unit (STRIPE_SIZE = PAGE_SIZE). Rows of one stripe are serialized (a write or a
//! reconstruction waits for the one before it), so parity never mixes two writes.
//! A write to a row is one of
//!
//! * **full-row**: every data page overwritten: parity = XOR of the new data, no reads;
//! * **reconstruct-write**: read the data pages not overwritten, parity = XOR of all;
//!   used when the row's parity is not known to be consistent (see below), when the
//!   failed member's page is overwritten, or when it reads fewer pages than
//! * **read-modify-write**: read the old data and the old parity, parity ^= old ^ new.
//!
//! Parity bytes are computed by the executor ([`Action::Xor`](wattio_core::Action::Xor)),
//! which the integrity checker follows as combinations of versions.
//!
//! **Failures.** A member I/O that fails (EIO) marks that member's *page* bad (Linux md's
//! bad-block list; a read of a larger piece that fails is first retried page by page, so
//! only pages that fail alone are marked). A bad page is never read or written again: a
//! read rebuilds it from the other members (the first read straight into the host's
//! buffer, the others into scratch, XOR-ed in); a write to it updates only the parity
//! (reconstruct-write). A row with two bad pages fails its I/O with EIO. The list is
//! **persisted** (`persist`, on by default for RAID-5, as md's bad-block log): a metadata
//! log at the end of member 0 ([`persist`] says why and how); a write whose row marked a
//! page bad is acknowledged once that record is durable, and the list is read back before
//! the first request is served. A page whose write failed may read without error later (a
//! cache below, say): without the list it would then return the bytes from before the
//! write. With `persist = false` the list is in memory only, and such a page reads stale
//! after a restart.
//!
//! **The write hole.** A crash between a row's data and parity writes leaves parity that no
//! longer matches the data, and a page rebuilt from it would be wrong. The layer tracks, in
//! memory, the rows whose parity it *knows* matches their data — rows it wrote whole
//! (full-row or reconstruct-write of the whole page) since it started — and rebuilds only
//! those. A degraded read of any other row fails with EIO rather than return a guess; a
//! write to an unknown row is a reconstruct-write when it can be, which makes the row known.
//! Without a bitmap, after a crash (or any restart) every row is unknown again;
//! `assume_clean = true` declares every row consistent at start (true of fresh, zeroed
//! members), as `mdadm --assume-clean` does. With md's write-intent bitmap
//! (`write_intent`, [`intent`]) every row of a region the log names clean is known after
//! any restart, and the dirty regions are resynced.

mod config;
mod copies;
mod intent;
mod layout;
pub mod persist;
mod replace;

pub(crate) use config::{check_array, check_merge, LayoutName};
pub use config::{RaidConfig, DEFAULT_CHUNK_KIB, DEFAULT_MERGE_KIB, KIND, MAX_MEMBERS};
pub use intent::RESYNC_PRIORITY;
pub use layout::{Layout, Level, Parity, Place};

use intent::{Gate, Intent};

use smallvec::{smallvec, SmallVec};
use std::collections::VecDeque;
use wattio_core::device::DeviceInfo;
use wattio_core::fanout::{Fanout, Step};
use wattio_core::function::{Actions, Function, TimerId, Volume};
use wattio_core::fxhash::{FxHashMap, FxHashSet};
use wattio_core::io::{Breakdown, Buf, Completion, DeviceId, Io, IoId, Op, Status};
use wattio_core::journal::{self, Journal, JournalConfig, IO_NUMBERS};
use wattio_core::region::Region;
use wattio_core::time::Nanos;

/// The RAID-5 row unit, bytes: md's STRIPE_SIZE.
pub const PAGE: u64 = 4096;

/// Emptied stripe queues kept for reuse at most (a queue is emptied and refilled at
/// nearly every write; more than this many stripes are rarely busy at once).
const MAX_SPARE_QUEUES: usize = 64;

/// Scratch buffer ids of this layer start here (scratch ids are shared by the stack: other
/// layers number theirs from 0).
const SCRATCH_BASE: u64 = 1 << 48;
/// Own-I/O numbers (and scratch buffers) of the bad-page log: above any member I/O number,
/// below this layer's scratch range.
const JOURNAL_BASE: u64 = 1 << 47;

/// One data page's part of a row write: data chunk `k`, bytes `a..b` of the page, from
/// `delta` bytes into the host buffer. In a row range (see [`RowOp::pages`]) the "page" is
/// the range: `a..b` is `0..pages · PAGE`, the host's bytes contiguous from `delta`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Piece {
    k: usize,
    a: u32,
    b: u32,
    delta: u32,
}

/// Rows (stripe, first page, pages): the page rows a row operation covers.
type Rows = (u64, u64, u64);

/// A row's pieces: one per data chunk it writes, so inline up to four (five disks): a
/// row operation's pieces are copied at each of its phases, a heap allocation each time
/// when they were a vector.
type Pieces = SmallVec<[Piece; 4]>;

/// The chunk pieces of `io`: (place, length, delta into the host buffer).
fn pieces(l: Layout, io: &Io) -> impl Iterator<Item = (Place, u32, u32)> {
    let (start, end) = (io.offset, io.end());
    let mut at = start;
    std::iter::from_fn(move || {
        (at < end).then(|| {
            let p = l.locate(at);
            let len = (l.chunk - p.in_chunk).min(end - at);
            let piece = (p, len as u32, (at - start) as u32);
            at += len;
            piece
        })
    })
}

#[derive(Clone, Debug)]
enum Work {
    /// Write `pieces` of a row.
    Write(Pieces),
    /// Rebuild bytes `a..b` of data chunk `k`'s page into the host buffer at `delta`.
    Rebuild(Piece),
    /// Copy the replaced member's chunk of the stripe onto the spare, a row range at a
    /// time (the operation's `page..page + pages`); the stripe is held until its window's
    /// record says it moved.
    Copy,
    /// Make the parity of the operation's rows the XOR of their data (the write-intent
    /// bitmap's resync of a dirty region).
    Resync,
}

/// How a row write goes (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Plan {
    Full,
    /// The parity member failed: write the data only.
    DataOnly,
    Rcw {
        lo: u32,
        hi: u32,
    },
    Rmw {
        lo: u32,
        hi: u32,
    },
    /// A read that failed as part of a larger piece, retried alone on its own page.
    Direct,
}

/// Who a row operation answers.
#[derive(Clone, Copy, Debug)]
enum Owner {
    /// A fan-out sub-I/O standing for the operation (never submitted).
    Sub(Io),
    /// A healthy-member read that failed and is rebuilt page by page.
    Held(u64),
    /// The replacement's copy of a stripe: answers no one.
    Replace,
    /// The resync of a stripe: answers no one.
    Resync,
}

/// A row operation: one page row of one stripe, or a range of them, for one host request.
struct RowOp {
    owner: Owner,
    stripe: u64,
    page: u64,
    /// Page rows `page..page + pages` (more than one: a write overwriting whole pages of
    /// the same data chunks in each, one member I/O a member for the range).
    pages: u64,
    /// Redone page by page after a failed range write: some data may already be on the
    /// members, so old data cannot be read back (no read-modify-write).
    redo: bool,
    work: Work,
    plan: Plan,
    /// Member I/Os still out in the current phase.
    out: u32,
    /// The phase hit an error (the members are already marked failed).
    failed: bool,
    writing: bool,
    /// Scratch buffer of the attempt (a retry starts from a fresh, zeroed one).
    scratch: u64,
    /// The attempt's parity write out of `scratch` is sent, and frees it when back. Else
    /// the layer releases it when the attempt ends (a degraded read's or a failed
    /// attempt's reads filled it, and nothing will write it out).
    drained: bool,
    /// The row's parity is known to match its data once the writes land.
    makes_known: bool,
    /// A write and the write-intent bitmap's gate.
    gated: Gate,
}

impl RowOp {
    /// Begin an attempt with a fresh `scratch` buffer and `ios` member I/Os out: the last
    /// attempt's buffer, if nothing drains it, is released.
    fn attempt(&mut self, scratch: u64, ios: usize, out: &mut Actions) {
        if !self.drained {
            out.release(Buf::Scratch {
                id: self.scratch,
                offset: 0,
            });
        }
        self.drained = false;
        self.scratch = scratch;
        self.failed = false;
        self.writing = false;
        self.out = ios as u32;
    }

    fn new(owner: Owner, (stripe, page, pages): Rows, work: Work) -> RowOp {
        RowOp {
            owner,
            stripe,
            page,
            pages,
            redo: false,
            work,
            plan: Plan::DataOnly,
            out: 0,
            failed: false,
            writing: false,
            scratch: 0,
            drained: true,
            makes_known: false,
            gated: Gate::Not,
        }
    }
}

/// A hot spare, and the replacement of one member by it (Linux md's `want_replacement`):
/// the member's stripes move onto the spare a window at a time, in order; stripes
/// `0..through` are read and written on the spare, the others still on the member.
struct Spare {
    name: String,
    dev: DeviceId,
    /// Start replacing a member when a write to it fails (md's WantReplacement).
    on_write_error: bool,
    /// Replace this member at start (the operator's `mdadm --replace`): its name, then
    /// its index once attached.
    at_start: Option<String>,
    at_start_member: Option<usize>,
    /// The member being (or, with `through` = the stripes, already) replaced.
    member: Option<usize>,
    /// Stripes moved onto the spare, durable in the log.
    through: u64,
    /// Stripes copied at once, and logged as moved by one record (the copy window).
    window: u64,
    /// The window's stripes being copied: see [`Copying`].
    copying: FxHashMap<u64, Copying>,
    /// The window copied and waiting for its record: see [`Moved`].
    moved: Option<Moved>,
    /// No further window is started (the layer is stopping).
    stopped: bool,
}

/// A stripe of the copy window: its pages rebuilt in the current attempt and by earlier
/// ranges, those whose write to the spare failed (they stay bad), and whether its whole
/// chunk is on the spare.
#[derive(Default)]
struct Copying {
    attempt: Vec<u64>,
    rebuilt: Vec<u64>,
    lost: Vec<u64>,
    done: bool,
}

/// A copy window on the spare whose record is not durable yet: its copy operations hold
/// their stripes (no write reaches either device) until it is.
struct Moved {
    seq: u64,
    /// The window is the stripes from the spare's `through` up to this.
    through: u64,
    /// Member pages rebuilt onto the spare: good again once the record is durable.
    cleared: Vec<u64>,
}

/// A failed healthy-member read being rebuilt.
struct Held {
    sub: Completion,
    left: u32,
    status: Status,
}

/// The layer.
pub struct Raid {
    name: String,
    names: Vec<String>,
    assume_clean: bool,
    layout: Layout,
    devs: Vec<DeviceId>,
    /// Member index by device id (`usize::MAX`: not a member).
    member: Vec<usize>,
    /// Bad pages: (member, member page). See the module docs.
    bad: FxHashSet<(usize, u64)>,
    /// The faulty member (md's `Faulty`), if one is: every page of its device is bad (the
    /// spare's copy of the stripes a recovery has moved is not). At most one at a time.
    faulty: Option<usize>,
    /// Fail this member at start (`fail`, the operator's `mdadm --fail`): its name, then
    /// its index once attached.
    fail_at_start: Option<String>,
    fail_at_start_member: Option<usize>,
    /// A member is failed once more than this many of its reads failed (md's RAID-5 fails
    /// a device whose `read_errors` pass its stripe cache's size).
    max_read_errors: u64,
    /// Failed reads per member device (the spare's not counted: its errors are pages).
    read_errors: Vec<u64>,
    fanout: Fanout,
    held: FxHashMap<u64, Held>,
    next_held: u64,
    ops: FxHashMap<u64, RowOp>,
    next_op: u64,
    /// Member I/O number → its row operation.
    ios: FxHashMap<u64, u64>,
    next_io: u64,
    next_scratch: u64,
    /// Per stripe, its row operations in order (the first runs).
    queues: FxHashMap<u64, VecDeque<u64>>,
    /// Rows whose parity is known to match their data, a bit per row (stripe · pages per
    /// chunk + page) in words of 64 rows: memory is bounded by the array's size / 256 KiB
    /// words, and by the rows written.
    known: FxHashMap<u64, u64>,
    /// Rows whose parity is *not* known to match, whatever `known`, `assume_clean` or the
    /// bitmap say: rows of a range write that failed part-way whose redo was refused (see
    /// [`Raid::tear`]). Until written whole again; in memory (a restart forgets every
    /// `known` row too, and the bitmap keeps their region dirty).
    torn: FxHashSet<u64>,
    /// The bad-page log's copies (`persist`; one, on member 0, or one on every member:
    /// [`copies`]) and what it can hold.
    logs: Vec<copies::Copy>,
    /// Keep a copy of the log on every member (`log_members = "all"`).
    log_all: bool,
    /// The array's id in its copies' labels (`persist::Label`): the one a new log is
    /// formatted with until a start reads the members' (see [`copies`]).
    array: u64,
    /// A replacement of this member held until the spare's copy of the log, started over
    /// through this record, is durable (`copies::start_spare_copy`).
    spare_copy_pending: Option<(usize, u64)>,
    /// The highest record durable on every copy, as last acted on.
    log_seen: u64,
    /// The members whose copies of the log the log names made (`persist::copies`).
    copies_made: u64,
    /// Requests wait until the log names every member's copy written made (a new array's
    /// first start, with a copy on every member): until then a start that finds a member's
    /// copy blank takes it for a format a crash lost and assembles it — so nothing may be
    /// on it yet (see [`copies`]).
    forming: bool,
    shape: persist::Shape,
    /// Requests wait for the list's recovery.
    ready: bool,
    /// The log failed: every request is answered EIO.
    broken: bool,
    early: Vec<Io>,
    /// The last bad-page record appended (its sequence number).
    bad_seq: u64,
    /// The last `faulty` record appended: every reply of a row operation (a rebuilt read
    /// too) waits for it, as md returns no bio while a superblock change is pending — a
    /// restart that forgot the failure would read the member again, whose bytes may not
    /// be what the others rebuilt.
    faulty_seq: u64,
    /// FLUSHes waiting for the `faulty` record: one sent now would skip the failed member,
    /// which a restart that forgot the failure would read again, its write cache lost.
    flushes_held: Vec<Io>,
    /// Bad pages past the list's bound: in memory only; writes to their rows fail.
    unpersisted: FxHashSet<(usize, u64)>,
    /// Write replies waiting for a bad-page record: (its sequence number, sub-I/O, status).
    parked: Vec<(u64, Io, Status)>,
    /// The largest row range one write operation covers, bytes (a multiple of [`PAGE`]).
    merge: u64,
    /// Bad pages to hand to the layer that drives this RAID and logs them itself
    /// ([`Raid::report_bad`]; PARAID's gears), since the last [`Raid::take_new_bad`].
    report: bool,
    new_bad: Vec<(usize, u64)>,
    counters: Counters,
    /// A write's rows, its row ranges and their sub-I/Os, kept between writes (their
    /// capacity follows the largest request seen, whose pieces were held anyway).
    rows_buf: Vec<((u64, u64), Piece)>,
    ranges_buf: Vec<(Rows, Pieces)>,
    subs_buf: Vec<Io>,
    /// A read's chunk pieces and their sub-I/Os, kept between reads.
    reads_buf: Vec<(Place, u32, Io)>,
    /// Emptied stripe queues, kept for the next stripe's operations.
    spare_queues: Vec<VecDeque<u64>>,
    /// The hot spare (RAID-5 with its log), and the replacement onto it.
    spare: Option<Spare>,
    /// The write-intent bitmap (RAID-5 with its log, `write_intent`).
    intent: Option<Intent>,
    /// Requests wait for this start's records: the bitmap's geometry (see [`intent`]), the
    /// copies' checkpoints bringing them up to the furthest (see [`copies`]).
    geometry_seq: Option<u64>,
    /// The bitmap region size the log's checkpoint has room for, bytes of a member.
    bitmap_region: u64,
    /// The time of the event being handled (the bitmap's timer is set from it).
    now: Nanos,
}

#[derive(Default)]
struct Counters {
    full_row: u64,
    rcw: u64,
    rmw: u64,
    rebuilt_rows: u64,
    unknown_row_errors: u64,
    bad_pages: u64,
    direct_rows: u64,
    held_replies: u64,
    recovered_bad_pages: u64,
    unpersisted_errors: u64,
    replacements: u64,
    resumed_replacements: u64,
    spare_rebuilt_pages: u64,
    spare_lost_pages: u64,
    failed_members: u64,
    recovered_faulty: u64,
    recovered_members: u64,
    stalled_recoveries: u64,
    /// Spares not used: their copy of the log could not be read or written before a
    /// replacement (`log_members = "all"`; md does not use a spare whose superblock it
    /// cannot write).
    refused_spares: u64,
    /// Starts that found the spare swapped while the log named a replacement onto it.
    swapped_spares: u64,
    /// Members not assembled at start: their copy of the log blank while the log names it
    /// made.
    blank_members: u64,
    /// Regions holding something other than a log, formatted as new copies: members' at a
    /// start that turned `log_members = "all"` on for an array whose log was on `d0` only,
    /// the spare's when a replacement starts.
    adopted_copies: u64,
}

impl Raid {
    /// A RAID over the named devices, in member order; `chunk` bytes (a multiple of
    /// [`PAGE`]).
    pub fn new(
        names: Vec<String>,
        level: Level,
        parity: Parity,
        chunk: u64,
        assume_clean: bool,
    ) -> Raid {
        let name = match level {
            Level::Raid0 => "raid0",
            Level::Raid5 => "raid5",
        };
        Raid {
            name: name.into(),
            names,
            assume_clean,
            layout: Layout {
                level,
                parity,
                disks: 0,
                chunk,
                stripes: 0,
            },
            devs: Vec::new(),
            member: Vec::new(),
            bad: FxHashSet::default(),
            faulty: None,
            fail_at_start: None,
            fail_at_start_member: None,
            max_read_errors: config::DEFAULT_MAX_READ_ERRORS,
            read_errors: Vec::new(),
            fanout: Fanout::new(),
            held: FxHashMap::default(),
            next_held: 0,
            ops: FxHashMap::default(),
            next_op: 0,
            ios: FxHashMap::default(),
            next_io: 0,
            next_scratch: SCRATCH_BASE,
            queues: FxHashMap::default(),
            known: FxHashMap::default(),
            torn: FxHashSet::default(),
            logs: Vec::new(),
            log_all: false,
            array: persist::array_id(0),
            spare_copy_pending: None,
            log_seen: 0,
            shape: persist::Shape {
                disks: 0,
                pages: 0,
                max: 0,
                stripes: 0,
                spare: false,
                regions: 0,
                copies: false,
            },
            copies_made: 0,
            forming: false,
            ready: true,
            broken: false,
            early: Vec::new(),
            bad_seq: 0,
            faulty_seq: 0,
            flushes_held: Vec::new(),
            unpersisted: FxHashSet::default(),
            parked: Vec::new(),
            merge: config::DEFAULT_MERGE_KIB * 1024,
            report: false,
            new_bad: Vec::new(),
            counters: Counters::default(),
            rows_buf: Vec::new(),
            ranges_buf: Vec::new(),
            subs_buf: Vec::new(),
            reads_buf: Vec::new(),
            spare_queues: Vec::new(),
            spare: None,
            intent: None,
            geometry_seq: None,
            bitmap_region: config::DEFAULT_WRITE_INTENT_KIB * 1024,
            now: 0,
        }
    }

    /// Keep md's write-intent bitmap in the bad-page log (RAID-5 with `persist`): regions
    /// of `region_bytes` of each member, logged clean after `delay` without writes. With
    /// it, `assume_clean` applies to a new log only (see [`intent`]).
    pub fn write_intent(mut self, region_bytes: u64, delay: Nanos) -> Raid {
        let stripes = (region_bytes / self.layout.chunk).max(1);
        self.intent = Some(Intent::new(stripes, delay, self.assume_clean));
        self.assume_clean = false;
        self
    }

    /// Reserve room for a bitmap of `region_bytes` regions in the log's checkpoint (with
    /// or without `write_intent`: turning it on or off must not move the log).
    pub fn bitmap_reserve(mut self, region_bytes: u64) -> Raid {
        self.bitmap_region = region_bytes;
        self
    }

    /// A hot spare named `name` (RAID-5 with its log): a member is replaced by it when a
    /// write to it fails (`on_write_error`, md's rule) or, `replace`, the named member at
    /// start. The copy moves one stripe at a time (see [`Raid::copy_window`]).
    pub fn spare(mut self, name: String, on_write_error: bool, replace: Option<String>) -> Raid {
        self.spare = Some(Spare {
            name,
            dev: 0,
            on_write_error,
            at_start: replace,
            at_start_member: None,
            member: None,
            through: 0,
            window: 1,
            copying: FxHashMap::default(),
            moved: None,
            stopped: false,
        });
        self
    }

    /// Fail member `name` at start (logged; a member the log names faulty stays so), and a
    /// member once more than `max_read_errors` of its reads failed. Needs the log
    /// ([`Raid::persist`]): a failure forgotten at a restart would bring back a member
    /// every write since skipped.
    pub fn failures(mut self, fail: Option<String>, max_read_errors: u64) -> Raid {
        self.fail_at_start = fail;
        self.max_read_errors = max_read_errors;
        self
    }

    /// Copy `stripes` stripes onto the spare at once, and log them moved by one record.
    pub fn copy_window(mut self, stripes: u64) -> Raid {
        if let Some(s) = self.spare.as_mut() {
            s.window = stripes.max(1);
        }
        self
    }

    /// Cover at most `bytes` of page rows (a multiple of [`PAGE`]) with one write operation
    /// (`PAGE`: row by row).
    pub fn merge(mut self, bytes: u64) -> Raid {
        debug_assert!(bytes >= PAGE && bytes.is_multiple_of(PAGE));
        self.merge = bytes;
        self
    }

    /// Keep the bad-page list in a log at the end of member 0, at most `max_bad_pages`
    /// pages (RAID-5; the region is made at `attach`).
    pub fn persist(mut self, max_bad_pages: u64) -> Raid {
        self.shape.max = max_bad_pages;
        self
    }

    /// Hand every new bad page to the driving layer ([`Raid::take_new_bad`]), which logs it
    /// in a log of its own, at most `max_bad_pages` of them (past that, as with a log of
    /// the RAID's own: in memory only, writes to their rows fail).
    pub fn report_bad(mut self, max_bad_pages: u64) -> Raid {
        self.report = true;
        self.shape.max = max_bad_pages;
        self
    }

    /// The bad pages marked since the last call: (member, member page).
    pub fn take_new_bad(&mut self) -> Vec<(usize, u64)> {
        std::mem::take(&mut self.new_bad)
    }

    /// Has a bad page been marked since the last [`Raid::take_new_bad`]?
    pub fn has_new_bad(&self) -> bool {
        !self.new_bad.is_empty()
    }

    /// A bad page recovered from the driving layer's log.
    pub fn insert_bad(&mut self, disk: usize, page: u64) {
        self.bad.insert((disk, page));
    }

    /// Keep a copy of the log on every member (md's superblock and bitmap on each), not on
    /// member 0 only.
    pub fn log_on_all(mut self, all: bool) -> Raid {
        self.log_all = all;
        self
    }

    /// The id a new array's log is formatted with (`BuildContext::identity`: the build's
    /// nonce and the table's key); a start takes the members' own.
    pub fn array_id(mut self, id: u64) -> Raid {
        self.array = id;
        self
    }

    /// Number this layer's scratch buffers from `base` (PARAID drives several RAIDs in one
    /// layer: each needs its own range).
    pub fn scratch_base(mut self, base: u64) -> Raid {
        self.next_scratch = base;
        self
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The device holding member `disk`'s chunk of `stripe`: the spare for the stripes a
    /// replacement has moved.
    #[inline]
    fn dev_of(&self, disk: usize, stripe: u64) -> DeviceId {
        match &self.spare {
            Some(s) if s.member == Some(disk) && stripe < s.through => s.dev,
            _ => self.devs[disk],
        }
    }

    fn row_key(&self, stripe: u64, page: u64) -> u64 {
        stripe * (self.layout.chunk / PAGE) + page
    }

    fn row_known(&self, stripe: u64, page: u64) -> bool {
        let key = self.row_key(stripe, page);
        if !self.torn.is_empty() && self.torn.contains(&key) {
            return false;
        }
        self.assume_clean
            || self.intent.as_ref().is_some_and(|i| i.consistent(stripe))
            || self
                .known
                .get(&(key / 64))
                .is_some_and(|w| w >> (key % 64) & 1 == 1)
    }

    /// Is member `disk`'s page of row (`stripe`, `page`) bad?
    #[inline]
    fn is_bad(&self, disk: usize, stripe: u64, page: u64) -> bool {
        self.is_faulty(disk, stripe)
            || (!self.bad.is_empty() && self.bad.contains(&(disk, self.row_key(stripe, page))))
    }

    /// Is member `disk`'s chunk of `stripe` on the faulty device (not moved to the spare)?
    #[inline]
    fn is_faulty(&self, disk: usize, stripe: u64) -> bool {
        self.faulty == Some(disk)
            && !matches!(&self.spare, Some(s) if s.member == Some(disk) && stripe < s.through)
    }

    /// The index of the member a key (`fail`, `replace`) names, if it names one.
    fn member_named(&self, key: &str, name: Option<&str>) -> Result<Option<usize>, String> {
        let Some(n) = name else {
            return Ok(None);
        };
        let m = self.names.iter().position(|x| x == n).ok_or_else(|| {
            format!(
                "{key}: `{n}` is not a member (members: {})",
                self.names.join(", ")
            )
        })?;
        Ok(Some(m))
    }

    /// Has the spare taken every stripe of member `m`?
    fn wholly_replaced(&self, m: usize) -> bool {
        matches!(&self.spare, Some(s) if s.member == Some(m) && s.through >= self.layout.stripes)
    }

    /// Fail member `m` (md's `md_error`): no I/O goes to its device from now on, its pages
    /// are rebuilt from the others, and its recovery onto the spare starts if the spare is
    /// free. Logged (one record; writes answered from now on wait for it). Refused
    /// (`false`) without a log, or while another member is faulty.
    fn fail_member(&mut self, m: usize, out: &mut Actions) -> bool {
        if self.wholly_replaced(m) {
            return true;
        }
        if !self.has_log() || self.faulty.is_some() || !self.ready || self.broken {
            return false;
        }
        self.faulty = Some(m);
        self.counters.failed_members += 1;
        if let Some(seq) = self.log_record(&persist::faulty(m), out) {
            self.faulty_seq = seq;
        }
        self.want_replacement(m, out);
        true
    }

    /// A member read failed: past `max_read_errors` of them, the member is failed.
    fn read_failed(&mut self, dev: DeviceId, out: &mut Actions) {
        let Some(m) = self.devs.iter().position(|&d| d == dev) else {
            return;
        };
        self.read_errors[m] += 1;
        if self.read_errors[m] > self.max_read_errors && self.faulty != Some(m) {
            self.fail_member(m, out);
        }
    }

    /// A row operation's I/O to `dev` at `offset` (one page row) failed: that page is bad,
    /// and logged if the list persists.
    fn mark_bad(&mut self, dev: DeviceId, offset: u64, out: &mut Actions) {
        let m = self.member.get(dev as usize).copied().unwrap_or(usize::MAX);
        let key = (m, offset / PAGE);
        // A faulty device's pages are all bad already.
        if m == usize::MAX
            || (dev == self.devs[m] && self.is_faulty(m, offset / self.layout.chunk))
            || !self.bad.insert(key)
        {
            return;
        }
        self.counters.bad_pages += 1;
        if !self.has_log() && !self.report {
            return;
        }
        if (self.bad.len() - self.unpersisted.len()) as u64 > self.shape.max {
            // The list is full: md fails the device (its own device: the spare's errors
            // stay pages), unless another member is faulty already.
            if self.has_log() && dev == self.devs[m] {
                self.bad.remove(&key);
                if self.fail_member(m, out) {
                    return;
                }
                self.bad.insert(key);
            }
            self.unpersisted.insert(key);
            return;
        }
        if !self.has_log() {
            return self.new_bad.push(key);
        }
        if let Some(seq) = self.log_record(&persist::record(key.0, key.1), out) {
            self.bad_seq = seq;
        }
    }

    /// A checkpoint of every record appended: the recorded bad pages and the replacement,
    /// with a moved window whose record is not durable yet counted as moved (a checkpoint
    /// covers the records before it).
    fn snapshot(&self) -> Vec<u8> {
        let (member, moved) = match &self.spare {
            Some(s) => (s.member, s.moved.as_ref()),
            None => (None, None),
        };
        let cleared = |k: &(usize, u64)| {
            moved.is_some_and(|m| Some(k.0) == member && m.cleared.contains(&k.1))
        };
        let recorded = self
            .bad
            .iter()
            .filter(|k| !self.unpersisted.contains(k) && !cleared(k));
        let replacement = self.spare.as_ref().and_then(|s| {
            s.member
                .map(|m| (m, s.moved.as_ref().map_or(s.through, |x| x.through)))
        });
        let none = persist::Bitmap::default();
        let bitmap = self.intent.as_ref().map_or(&none, |i| &i.logged);
        self.shape
            .snapshot(recorded, self.faulty, replacement, self.copies_made, bitmap)
    }

    /// Does row (`stripe`, `page`) hold a bad page the list could not record?
    fn row_unpersisted(&self, stripe: u64, page: u64) -> bool {
        let key = self.row_key(stripe, page);
        !self.unpersisted.is_empty()
            && (0..self.layout.disks).any(|d| self.unpersisted.contains(&(d, key)))
    }

    /// The log is read back (the furthest copy's state, `got`; `fresh`: a new log): take
    /// its state, and serve once `align` (the copies brought up to it) and the bitmap's
    /// geometry record are durable.
    fn recovered(
        &mut self,
        got: persist::Recovered,
        fresh: bool,
        align: Option<u64>,
        out: &mut Actions,
    ) {
        self.counters.recovered_bad_pages = got.bad.len() as u64;
        self.faulty = got.faulty_member();
        self.counters.recovered_faulty = u64::from(self.faulty.is_some());
        self.bad = got.bad;
        self.ready = true;
        if !fresh && self.intent.is_none() {
            // `assume_clean` declares a new array's rows consistent (`mdadm --create
            // --assume-clean`). This log is not new: the array ran before, and a cut may have
            // come between a row's data and parity writes; without a bitmap nothing says
            // which rows, so none is known (a degraded read answers EIO, never a page rebuilt
            // from parity that does not match — found by the swarm's operator scenario,
            // seed 1: a member blanked after a crash rebuilt from a torn row).
            self.assume_clean = false;
        }
        self.geometry_seq = match (self.intent_recovered(got.bitmap, fresh, out), align) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(s) = self.spare.as_mut() {
            if let Some((m, through)) = got.replaced {
                self.counters.resumed_replacements += 1;
                s.member = Some(m);
                s.through = through;
                self.member[s.dev as usize] = m;
                self.copy_next(out);
            } else if let Some(m) = self.faulty.or(s.at_start_member) {
                // A faulty member's recovery comes before a replacement asked for (one
                // spare).
                self.want_replacement(m, out);
            }
        }
        // A member found blank first: its data is gone, so an operator's `fail` of
        // another member (or another copy lost) cannot take its place.
        self.fail_unassembled(true, out);
        if let Some(m) = self.fail_at_start_member {
            match self.faulty {
                Some(f) if f != m => {
                    let e = format!(
                        "fail: `{}` cannot fail: `{}` is faulty already (rows would miss two members)",
                        self.names[m], self.names[f]
                    );
                    return self.stop(&e, out);
                }
                Some(_) => {}
                None => {
                    self.fail_member(m, out);
                }
            }
        }
        // Other members not assembled are failed after the operator's `fail` (which names
        // its member in an error if another is faulty) and before a waiting request is
        // served.
        self.fail_unassembled(false, out);
        self.forming = self.copies_pending();
        if self.geometry_seq.is_none() && !self.forming {
            self.serve_early(out);
        }
    }

    /// Records up to `upto` are durable (on every copy written): parked replies go, held
    /// FLUSHes go down, moved windows and bitmap records take effect, and requests that
    /// waited for the start's records are served.
    fn durable_upto(&mut self, upto: u64, out: &mut Actions) {
        for (_, io, status) in journal::durable(&mut self.parked, upto, |p| p.0) {
            self.sub_done(io, status, out);
        }
        if self.faulty_seq <= upto {
            let now = self.now;
            for io in std::mem::take(&mut self.flushes_held) {
                self.on_request(now, io, out);
            }
        }
        self.moved_durable(upto, out);
        self.intent_durable(upto, out);
        if self.geometry_seq.is_some_and(|seq| seq <= upto) {
            self.geometry_seq = None;
            self.serve_early(out);
        }
    }

    /// The log is read back (and the bitmap's geometry durable): serve the requests that
    /// waited, and resync what the bitmap names dirty.
    fn serve_early(&mut self, out: &mut Actions) {
        if self.forming {
            // The copies-made record comes next (`copies::copies_formed`): served then.
            return;
        }
        let now = self.now;
        for io in std::mem::take(&mut self.early) {
            self.on_request(now, io, out);
        }
        self.resync_next(out);
    }

    /// The log cannot be used: report it, and answer every request from now on with EIO
    /// (those waiting for recovery too), so a live client gets errors rather than a hang.
    fn stop(&mut self, e: &str, out: &mut Actions) {
        out.fail(&format!("{}: {e}", self.name));
        self.broken = true;
        for io in std::mem::take(&mut self.early) {
            self.on_request(0, io, out);
        }
        // Answers that waited for a record that will never be durable.
        for io in std::mem::take(&mut self.flushes_held) {
            out.reply(Completion::answered(io, Status::IoError));
        }
        for (_, io, _) in std::mem::take(&mut self.parked) {
            self.sub_done(io, Status::IoError, out);
        }
    }

    fn member_io(&mut self, op: u64, kind: Op, disk: usize, offset: u64, len: u32, buf: Buf) -> Io {
        let n = self.next_io;
        self.next_io = (self.next_io + 1) & (IoId::SUB - 1);
        self.ios.insert(n, op);
        let dev = self.dev_of(disk, offset / self.layout.chunk);
        let mut io = Io::own(n, kind, dev, offset, len);
        io.buf = buf;
        io
    }

    /// Queue a row operation (rows `page..page + pages`) behind the others of its stripe.
    fn enqueue(&mut self, owner: Owner, rows: Rows, work: Work, out: &mut Actions) {
        let id = self.next_op;
        self.next_op += 1;
        let stripe = rows.0;
        self.ops.insert(id, RowOp::new(owner, rows, work));
        let spare = &mut self.spare_queues;
        let q = self
            .queues
            .entry(stripe)
            .or_insert_with(|| spare.pop().unwrap_or_default());
        q.push_back(id);
        if q.len() == 1 {
            self.run_queue(stripe, out);
        }
    }

    /// Start the stripe's first operation; those that end at once make way for the next.
    fn run_queue(&mut self, stripe: u64, out: &mut Actions) {
        loop {
            let Some(&id) = self.queues.get(&stripe).and_then(|q| q.front()) else {
                if let Some(q) = self.queues.remove(&stripe) {
                    if self.spare_queues.len() < MAX_SPARE_QUEUES {
                        self.spare_queues.push(q);
                    }
                }
                return;
            };
            match self.start(id, out) {
                None => return,
                Some(status) => self.end_op(id, status, out),
            }
        }
    }

    /// Operation `id` is over: answer its owner, take it off its stripe's queue (the
    /// caller runs the queue on).
    fn end_op(&mut self, id: u64, status: Status, out: &mut Actions) {
        let op = self.ops.remove(&id).expect("a live operation");
        self.intent_ended(&op);
        if !op.drained {
            out.release(Buf::Scratch {
                id: op.scratch,
                offset: 0,
            });
        }
        if let Some(q) = self.queues.get_mut(&op.stripe) {
            q.pop_front();
        }
        // A write acknowledged now must not depend on a bad page the log does not hold yet
        // (a crash would forget it, and the page read directly return old bytes); no
        // answer may depend on a failure the log does not hold yet.
        let wait = if matches!(op.work, Work::Write(_)) {
            self.bad_seq.max(self.faulty_seq)
        } else {
            self.faulty_seq
        };
        match op.owner {
            Owner::Sub(io) => self.answer_after(wait, io, status, out),
            Owner::Replace => {}
            Owner::Resync => self.resync_stripe_done(op.stripe, status, out),
            Owner::Held(key) => {
                let h = self.held.get_mut(&key).expect("held read");
                h.left -= 1;
                if status != Status::Ok {
                    h.status = status;
                }
                if h.left == 0 {
                    let h = self.held.remove(&key).expect("present");
                    self.answer_after(self.faulty_seq, h.sub.io, h.status, out);
                }
            }
        }
    }

    /// Answer sub-I/O `io` once log record `seq` is durable (at once if it is, or if no
    /// record is awaited: the common case, which reads no log state).
    fn answer_after(&mut self, seq: u64, io: Io, status: Status, out: &mut Actions) {
        if seq > 0 && self.has_log() && seq > self.log_durable() {
            self.counters.held_replies += 1;
            self.parked.push((seq, io, status));
        } else {
            self.sub_done(io, status, out);
        }
    }

    fn sub_done(&mut self, io: Io, status: Status, out: &mut Actions) {
        let done = Completion {
            io,
            status,
            finished: 0,
            breakdown: Breakdown::default(),
        };
        if let Step::Reply(c) = self.fanout.complete(&done) {
            out.reply(c);
        }
    }

    /// Does a row of `page..page + pages` hold a bad page, or one the list could not
    /// record?
    fn range_touches_bad(&self, stripe: u64, page: u64, pages: u64) -> bool {
        if self.bad.is_empty() && self.unpersisted.is_empty() && self.faulty.is_none() {
            return false;
        }
        (page..page + pages).any(|q| {
            self.row_unpersisted(stripe, q)
                || (0..self.layout.disks).any(|d| self.is_bad(d, stripe, q))
        })
    }

    /// Do the rows of `page..page + pages` differ in which members' pages are bad, or hold
    /// one the list could not record? (A range is planned as one row: its rows must agree.
    /// A faulty member's pages are bad in every row of a stripe alike.)
    fn range_uneven(&self, stripe: u64, page: u64, pages: u64) -> bool {
        if self.bad.is_empty() && self.unpersisted.is_empty() {
            return false;
        }
        let bad = |q: u64| -> u64 {
            (0..self.layout.disks)
                .filter(|&d| self.is_bad(d, stripe, q))
                .fold(0, |m, d| m | 1 << d)
        };
        let first = bad(page);
        (page..page + pages).any(|q| self.row_unpersisted(stripe, q) || bad(q) != first)
    }

    /// Cut range operation `id` (the running one, first in its stripe's queue) into one
    /// operation a page row: it keeps the first row, the others queue right behind it,
    /// each answering a new sibling of its sub-I/O (a write's) or a share of its held
    /// read (a rebuild's). `redo`: after a failed write (no read-modify-write of rows
    /// whose data may already be on the members).
    fn split(&mut self, id: u64, redo: bool) {
        let op = self.ops.get_mut(&id).expect("a live operation");
        let rows: Vec<Work> = match &op.work {
            Work::Write(range) => (0..op.pages)
                .map(|i| {
                    Work::Write(
                        range
                            .iter()
                            .map(|p| Piece {
                                k: p.k,
                                a: 0,
                                b: PAGE as u32,
                                delta: p.delta + (i * PAGE) as u32,
                            })
                            .collect(),
                    )
                })
                .collect(),
            Work::Rebuild(p) => {
                let mut rows = Vec::new();
                let at = op.page * PAGE;
                Self::rows(
                    p.k,
                    at + p.a as u64,
                    at + p.b as u64,
                    p.delta,
                    |_, piece| rows.push(Work::Rebuild(piece)),
                );
                rows
            }
            Work::Copy | Work::Resync => unreachable!("cut by their own paths"),
        };
        let owner = op.owner;
        let (stripe, page) = (op.stripe, op.page);
        op.pages = 1;
        op.redo = redo;
        let mut rows = rows.into_iter();
        op.work = rows.next().expect("a range has rows");
        if let Owner::Held(key) = owner {
            self.held.get_mut(&key).expect("held read").left += rows.len() as u32;
        }
        for (i, work) in rows.enumerate() {
            let n = self.next_op;
            self.next_op += 1;
            let owner = match owner {
                Owner::Sub(sub) => Owner::Sub(self.fanout.sibling(&sub)),
                Owner::Held(key) => Owner::Held(key),
                Owner::Replace | Owner::Resync => unreachable!("no ranges of theirs here"),
            };
            let mut row = RowOp::new(owner, (stripe, page + 1 + i as u64, 1), work);
            row.redo = redo;
            self.ops.insert(n, row);
            let q = self
                .queues
                .get_mut(&stripe)
                .expect("a running operation's queue");
            q.insert(1 + i, n);
        }
    }

    /// Plan and issue operation `id`'s first phase; `Some(status)` if it ended at once.
    fn start(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        // One lookup of the operation on this path (every RAID-5 row operation starts here).
        let (stripe, page, pages, owner, redo, copy, resync, write_gate) = {
            let op = &self.ops[&id];
            let write_gate = matches!(op.work, Work::Write(_)).then_some(op.gated);
            let (copy, resync) = (
                matches!(op.work, Work::Copy),
                matches!(op.work, Work::Resync),
            );
            let (s, p, n, o, r) = (op.stripe, op.page, op.pages, op.owner, op.redo);
            (s, p, n, o, r, copy, resync, write_gate)
        };
        if copy {
            return self.copy_start(id, out);
        }
        if resync {
            return self.resync_start(id, out);
        }
        // The region's `dirty` record first (md's bitmap_startwrite): an operation waiting
        // for it stays at its queue's head, started again once it is durable.
        if self.intent.is_some() {
            match write_gate {
                Some(Gate::Waiting) => return None,
                Some(Gate::Not) if self.intent_gate(id, stripe, out) => return None,
                _ => {}
            }
        }
        if pages > 1 && self.range_uneven(stripe, page, pages) {
            // A range is planned as one row, which rows of different bad pages would make
            // untrue: page by page instead.
            self.split(id, false);
            return self.start(id, out);
        }
        // Borrowed, not copied: the planning below changes no operation.
        let work = &self.ops[&id].work;
        // The unit of the row operation: a page, or the range (whose pieces are whole).
        let span = pages * PAGE;
        let scratch = self.next_scratch;
        self.next_scratch += 1;
        let l = self.layout;
        let n = l.data_disks();
        let fdata: SmallVec<[bool; 8]> = (0..n)
            .map(|k| self.is_bad(l.data_disk(stripe, k), stripe, page))
            .collect();
        let pd = l.parity_disk(stripe).expect("row operations are RAID-5's");
        let fparity = self.is_bad(pd, stripe, page);
        let failures = fdata.iter().filter(|&&f| f).count() + usize::from(fparity);
        let base = l.member_offset(stripe, page * PAGE);
        let slot = |k: usize| Buf::Scratch {
            id: scratch,
            offset: (k as u64 * span) as u32,
        };
        let known = !redo && (page..page + pages).all(|q| self.row_known(stripe, q));
        let mut reads: SmallVec<[(usize, u32, u32, Buf); 8]> = SmallVec::new();
        let mut plan = Plan::DataOnly;
        let mut makes_known = known;
        match work {
            Work::Rebuild(p) if !fdata[p.k] => {
                // Not known bad: read the page itself first.
                plan = Plan::Direct;
                let dst = self.host_buf(owner).at(p.delta);
                reads.push((l.data_disk(stripe, p.k), p.a, p.b, dst));
            }
            Work::Rebuild(_) if pages > 1 && (failures > 1 || !known) => {
                // Some of its rows may still be served (or known): row by row.
                self.split(id, false);
                return self.start(id, out);
            }
            Work::Rebuild(p) => {
                if failures > 1 {
                    return Some(Status::IoError);
                }
                if !known {
                    self.counters.unknown_row_errors += 1;
                    return Some(Status::IoError);
                }
                // The first surviving member straight into the host's buffer, the others
                // into scratch, XOR-ed in when all are back.
                let dst = self.host_buf(owner).at(p.delta);
                let mut first = true;
                for j in (0..n)
                    .filter(|&j| j != p.k)
                    .map(|j| l.data_disk(stripe, j))
                    .chain([pd])
                {
                    let buf = if first { dst } else { slot(j).at(p.a) };
                    first = false;
                    reads.push((j, p.a, p.b, buf));
                }
            }
            Work::Copy | Work::Resync => unreachable!("planned by copy_start, resync_start"),
            Work::Write(ref pieces) => {
                if failures > 1 {
                    return self.refuse(stripe, page, redo);
                }
                if self.row_unpersisted(stripe, page) {
                    self.counters.unpersisted_errors += 1;
                    return self.refuse(stripe, page, redo);
                }
                let mut covered: SmallVec<[Option<Piece>; 8]> = smallvec![None; n];
                for p in pieces {
                    covered[p.k] = Some(*p);
                }
                let lo = pieces.iter().map(|p| p.a).min().expect("a piece");
                let hi = pieces.iter().map(|p| p.b).max().expect("a piece");
                let whole = |p: &Option<Piece>| p.is_some_and(|p| p.a == 0 && p.b as u64 == span);
                // Reconstruct-write reads, over lo..hi, every data page not overwritten
                // there whole; it needs them all readable.
                let rcw: SmallVec<[usize; 8]> = (0..n)
                    .filter(|&k| !covered[k].is_some_and(|p: Piece| p.a == lo && p.b == hi))
                    .collect();
                let rcw_ok = rcw.iter().all(|&k| !fdata[k]);
                let touched_failed = pieces.iter().any(|p| fdata[p.k]);
                if covered.iter().all(whole) {
                    plan = Plan::Full;
                    makes_known = true;
                } else if fparity {
                    plan = Plan::DataOnly;
                } else if rcw_ok && (!known || touched_failed || rcw.len() < pieces.len() + 1) {
                    plan = Plan::Rcw { lo, hi };
                    makes_known = known || (lo == 0 && hi as u64 == span);
                    for &k in &rcw {
                        reads.push((l.data_disk(stripe, k), lo, hi, slot(k).at(lo)));
                    }
                } else if !touched_failed && !redo {
                    plan = Plan::Rmw { lo, hi };
                    for p in pieces {
                        reads.push((l.data_disk(stripe, p.k), p.a, p.b, slot(p.k).at(p.a)));
                    }
                    reads.push((pd, lo, hi, slot(n).at(lo)));
                } else {
                    // The failed member's page is overwritten in part: its other bytes
                    // live only in the parity, which a partial update cannot keep. Or a
                    // redone row cannot be reconstructed (a page it does not overwrite is
                    // bad) and its old data may already be overwritten on the members.
                    return self.refuse(stripe, page, redo);
                }
                match plan {
                    Plan::Full => self.counters.full_row += pages,
                    Plan::Rcw { .. } => self.counters.rcw += pages,
                    Plan::Rmw { .. } => self.counters.rmw += pages,
                    Plan::DataOnly | Plan::Direct => {}
                }
            }
        }
        {
            let op = self.ops.get_mut(&id).expect("op");
            op.attempt(scratch, reads.len(), out);
            op.plan = plan;
            op.makes_known = makes_known;
        }
        if reads.is_empty() {
            return self.write_phase(id, out);
        }
        for (disk, a, b, buf) in reads {
            let io = self.member_io(id, Op::Read, disk, base + a as u64, b - a, buf);
            out.submit(io);
        }
        None
    }

    /// A row write refused at its planning (EIO). A first attempt wrote nothing; a redone
    /// row (after a range write that failed part-way) may have had some of the range's
    /// writes land — new data on some members, the parity holding it or not — so its
    /// parity no longer matches its data: the row is torn ([`Raid::tear`]).
    fn refuse(&mut self, stripe: u64, page: u64, redo: bool) -> Option<Status> {
        if redo {
            self.tear(stripe, page);
        }
        Some(Status::IoError)
    }

    /// Row (`stripe`, `page`) is torn: its parity is not known to match its data until the
    /// row is written whole again, whatever `known`, `assume_clean` or the bitmap said, so
    /// a degraded read of it answers EIO rather than rebuild a page from it (which returned
    /// the XOR of the range's new data and another page's: the swarm, seed 123,257, PARAID
    /// over an absent member). Its bitmap region is no longer consistent, and not logged
    /// clean before a restart resyncs it.
    fn tear(&mut self, stripe: u64, page: u64) {
        let key = self.row_key(stripe, page);
        self.torn.insert(key);
        if let Some(w) = self.known.get_mut(&(key / 64)) {
            *w &= !(1 << (key % 64));
        }
        self.intent_torn(stripe);
    }

    /// The buffer of the host I/O an owner answers.
    fn host_buf(&self, owner: Owner) -> Buf {
        match owner {
            Owner::Sub(io) => io.buf,
            Owner::Held(key) => self.held[&key].sub.io.buf,
            Owner::Replace | Owner::Resync => unreachable!("a copy has no host buffer"),
        }
    }

    /// The reads of a write are back: compute the parity and write. `Some` if it ended.
    fn write_phase(&mut self, id: u64, out: &mut Actions) -> Option<Status> {
        let op = &self.ops[&id];
        let Work::Write(pieces) = &op.work else {
            unreachable!("only writes have a write phase")
        };
        let (stripe, page, plan, scratch) = (op.stripe, op.page, op.plan, op.scratch);
        let span = op.pages * PAGE;
        let host = self.host_buf(op.owner);
        let l = self.layout;
        let n = l.data_disks();
        let slot = |k: usize| Buf::Scratch {
            id: scratch,
            offset: (k as u64 * span) as u32,
        };
        let par = slot(n);
        let base = l.member_offset(stripe, page * PAGE);
        let pd = l.parity_disk(stripe).expect("raid5");
        let mut parity = None;
        match plan {
            Plan::Full => {
                for p in pieces {
                    out.xor(par, host.at(p.delta), span as u32);
                }
                parity = Some((0, span as u32));
            }
            Plan::DataOnly | Plan::Direct => {}
            Plan::Rcw { lo, hi } => {
                for k in 0..n {
                    match pieces.iter().find(|p| p.k == k) {
                        Some(p) if p.a == lo && p.b == hi => {
                            out.xor(par.at(lo), host.at(p.delta), hi - lo)
                        }
                        other => {
                            out.xor(par.at(lo), slot(k).at(lo), hi - lo);
                            if let Some(p) = other {
                                out.xor(par.at(p.a), slot(k).at(p.a), p.b - p.a);
                                out.xor(par.at(p.a), host.at(p.delta), p.b - p.a);
                            }
                        }
                    }
                }
                parity = Some((lo, hi));
            }
            Plan::Rmw { lo, hi } => {
                for p in pieces {
                    out.xor(par.at(p.a), slot(p.k).at(p.a), p.b - p.a);
                    out.xor(par.at(p.a), host.at(p.delta), p.b - p.a);
                }
                parity = Some((lo, hi));
            }
        }
        // (A range has no bad page: it was split at the planning or at a failed read.)
        let mut writes: SmallVec<[(usize, u32, u32, Buf); 8]> = SmallVec::new();
        for p in pieces {
            let disk = l.data_disk(stripe, p.k);
            if !self.is_bad(disk, stripe, page) {
                writes.push((disk, p.a, p.b, host.at(p.delta)));
            }
        }
        if let Some((lo, hi)) = parity {
            if !self.is_bad(pd, stripe, page) {
                writes.push((pd, lo, hi, par.at(lo)));
                self.ops.get_mut(&id).expect("op").drained = true;
            }
        }
        if writes.is_empty() {
            return Some(self.row_status(stripe, page));
        }
        let fua = match self.ops[&id].owner {
            Owner::Sub(io) => io.fua,
            Owner::Held(_) | Owner::Replace | Owner::Resync => false,
        };
        {
            let op = self.ops.get_mut(&id).expect("op");
            op.writing = true;
            op.out = writes.len() as u32;
        }
        for (disk, a, b, buf) in writes {
            let mut io = self.member_io(id, Op::Write, disk, base + a as u64, b - a, buf);
            io.fua = fua;
            out.submit(io);
        }
        None
    }

    /// A row is served while at most one of its members has failed.
    fn row_status(&self, stripe: u64, page: u64) -> Status {
        let l = &self.layout;
        let failed = (0..l.data_disks())
            .map(|k| l.data_disk(stripe, k))
            .chain(l.parity_disk(stripe))
            .filter(|&d| self.is_bad(d, stripe, page))
            .count();
        if failed > 1 {
            Status::IoError
        } else {
            Status::Ok
        }
    }

    /// A member I/O of row operation `id` finished.
    fn op_io_done(&mut self, id: u64, done: &Completion, out: &mut Actions) {
        match self.ops[&id].work {
            Work::Copy => return self.copy_io_done(id, done, out),
            Work::Resync => return self.resync_io_done(id, done, out),
            _ => {}
        }
        // A range's I/O does not say which of its pages failed: the range is redone page
        // by page below, and only pages that fail alone are marked (md's
        // narrow_write_error does the same for writes).
        if done.status != Status::Ok && self.ops[&id].pages == 1 {
            self.mark_bad(done.io.dev, done.io.offset, out);
        }
        if done.status != Status::Ok && done.io.op == Op::Read {
            self.read_failed(done.io.dev, out);
        }
        if done.status != Status::Ok && done.io.op == Op::Write {
            // md's rule: a member a write failed on wants replacing (the spare, once in
            // use, is the member: its errors are only bad pages). After the bad page's
            // record, which the write's reply waits for.
            if let Some(s) = self.spare.as_ref().filter(|s| s.on_write_error) {
                let m = self.member[done.io.dev as usize];
                if done.io.dev != s.dev && m != usize::MAX {
                    self.want_replacement(m, out);
                }
            }
        }
        let op = self.ops.get_mut(&id).expect("a live operation");
        op.out -= 1;
        op.failed |= done.status != Status::Ok;
        if op.out > 0 {
            return;
        }
        let (stripe, page, pages) = (op.stripe, op.page, op.pages);
        let (failed, writing, makes_known) = (op.failed, op.writing, op.makes_known);
        let ended = if failed && pages > 1 {
            // After failed reads nothing was written; after a failed write some rows may
            // hold the new data already, so the redo reconstructs their parity.
            self.split(id, writing);
            self.start(id, out)
        } else if writing {
            let mut status = Status::Ok;
            for q in page..page + pages {
                let mut row = self.row_status(stripe, q);
                if row == Status::Ok && self.row_unpersisted(stripe, q) {
                    self.counters.unpersisted_errors += 1;
                    row = Status::IoError;
                }
                if row == Status::Ok && makes_known {
                    let key = self.row_key(stripe, q);
                    if !self.torn.is_empty() {
                        self.torn.remove(&key);
                    }
                    if !self.assume_clean
                        && !self.intent.as_ref().is_some_and(|i| i.consistent(stripe))
                    {
                        *self.known.entry(key / 64).or_default() |= 1 << (key % 64);
                    }
                }
                if row != Status::Ok {
                    status = row;
                }
            }
            Some(status)
        } else if failed {
            // A member failed under the reads: plan again around it.
            self.start(id, out)
        } else {
            match self.ops[&id].work {
                Work::Rebuild(_) if self.ops[&id].plan == Plan::Direct => {
                    self.counters.direct_rows += 1;
                    Some(Status::Ok)
                }
                Work::Rebuild(p) => {
                    let op = &self.ops[&id];
                    let dst = self.host_buf(op.owner).at(p.delta);
                    let (scratch, stripe, span) = (op.scratch, op.stripe, op.pages * PAGE);
                    let l = self.layout;
                    let pd = l.parity_disk(stripe).expect("raid5");
                    let members: Vec<usize> = (0..l.data_disks())
                        .filter(|&j| j != p.k)
                        .map(|j| l.data_disk(stripe, j))
                        .chain([pd])
                        .collect();
                    for &j in &members[1..] {
                        let src = Buf::Scratch {
                            id: scratch,
                            offset: (j as u64 * span) as u32 + p.a,
                        };
                        out.xor(dst, src, p.b - p.a);
                    }
                    self.counters.rebuilt_rows += 1;
                    Some(Status::Ok)
                }
                Work::Write(_) => self.write_phase(id, out),
                Work::Copy | Work::Resync => {
                    unreachable!("completed in copy_io_done, resync_io_done")
                }
            }
        };
        if let Some(status) = ended {
            self.end_op(id, status, out);
            self.run_queue(stripe, out);
        }
    }

    /// Bytes `from..to` of data chunk `k`, cut at page-row boundaries: `f(page, piece)`,
    /// with `delta` where `from` lands in the host buffer.
    fn rows(k: usize, from: u64, to: u64, delta: u32, mut f: impl FnMut(u64, Piece)) {
        let mut at = from;
        while at < to {
            let page = at / PAGE;
            let end = ((page + 1) * PAGE).min(to);
            f(
                page,
                Piece {
                    k,
                    a: (at - page * PAGE) as u32,
                    b: (end - page * PAGE) as u32,
                    delta: delta + (at - from) as u32,
                },
            );
            at = end;
        }
    }

    fn read(&mut self, io: Io, out: &mut Actions) {
        let key = self.fanout.begin(io);
        // Every sub-I/O first: a rebuild that fails at once answers its part at once, and
        // the parent must not look complete before its other parts exist.
        let l = self.layout;
        let mut subs = std::mem::take(&mut self.reads_buf);
        subs.clear();
        subs.extend(pieces(l, &io).map(|(p, len, delta)| {
            let offset = l.member_offset(p.stripe, p.in_chunk);
            let sub = self
                .fanout
                .sub(key, delta, len, self.dev_of(p.disk, p.stripe), offset);
            (p, len, sub)
        }));
        for &(p, len, sub) in &subs {
            let pages = p.in_chunk / PAGE..(p.in_chunk + len as u64).div_ceil(PAGE);
            if self.layout.level == Level::Raid5
                && pages.into_iter().any(|q| self.is_bad(p.disk, p.stripe, q))
            {
                let mut rows = Vec::new();
                if self.is_faulty(p.disk, p.stripe) {
                    // The whole piece is on the faulty device: rebuilt in row ranges of up
                    // to `merge_kib` (one read a member each; cut into rows if they differ).
                    let (mut from, end) = (p.in_chunk, p.in_chunk + len as u64);
                    while from < end {
                        let page = from / PAGE;
                        let to = end.min(page * PAGE + self.merge);
                        let piece = Piece {
                            k: p.k,
                            a: (from - page * PAGE) as u32,
                            b: (to - page * PAGE) as u32,
                            delta: (from - p.in_chunk) as u32,
                        };
                        rows.push(((page, (to - page * PAGE).div_ceil(PAGE)), piece));
                        from = to;
                    }
                } else {
                    Self::rows(
                        p.k,
                        p.in_chunk,
                        p.in_chunk + len as u64,
                        0,
                        |page, piece| rows.push(((page, 1), piece)),
                    );
                }
                let hkey = self.next_held;
                self.next_held += 1;
                self.held.insert(
                    hkey,
                    Held {
                        sub: Completion::ok(sub, 0, Breakdown::default()),
                        left: rows.len() as u32,
                        status: Status::Ok,
                    },
                );
                for ((page, pages), piece) in rows {
                    self.enqueue(
                        Owner::Held(hkey),
                        (p.stripe, page, pages),
                        Work::Rebuild(piece),
                        out,
                    );
                }
            } else {
                out.submit(sub);
            }
        }
        self.reads_buf = subs;
    }

    /// The write's rows, ((stripe, page), piece) sorted by row (stably: a row's pieces in
    /// volume order), appended to `ranges` as row ranges: ((stripe, first page, pages),
    /// pieces). Consecutive rows of a stripe that overwrite whole pages of the same data
    /// chunks, the host's bytes running on, are one range, up to `merge` bytes: md works
    /// page rows, and the block layer merges their adjacent member bios into one request a
    /// member.
    fn row_ranges(rows: &[((u64, u64), Piece)], merge: u64, ranges: &mut Vec<(Rows, Pieces)>) {
        let whole = |v: &[Piece], len: u64| v.iter().all(|p| p.a == 0 && p.b as u64 == len);
        for row in rows.chunk_by(|x, y| x.0 == y.0) {
            let (stripe, page) = row[0].0;
            let pieces: Pieces = row.iter().map(|r| r.1).collect();
            if let Some(((s, p, n), range)) = ranges.last_mut() {
                let joins = *s == stripe
                    && *p + *n == page
                    && (*n + 1) * PAGE <= merge
                    && whole(range, *n * PAGE)
                    && whole(&pieces, PAGE)
                    && range.len() == pieces.len()
                    && range
                        .iter()
                        .zip(&pieces)
                        .all(|(r, x)| r.k == x.k && r.delta as u64 + *n * PAGE == x.delta as u64);
                if joins {
                    *n += 1;
                    range.iter_mut().for_each(|r| r.b += PAGE as u32);
                    continue;
                }
            }
            ranges.push(((stripe, page, 1), pieces));
        }
    }

    fn write(&mut self, io: Io, out: &mut Actions) {
        let l = self.layout;
        if l.level == Level::Raid0 {
            let key = self.fanout.begin(io);
            for (p, len, delta) in pieces(l, &io) {
                let offset = l.member_offset(p.stripe, p.in_chunk);
                out.submit(self.fanout.sub(key, delta, len, self.devs[p.disk], offset));
            }
            return;
        }
        // Group the write's page pieces by row, in volume order of their first piece (the
        // buffers are kept between writes: this is every RAID-5 write's path).
        let mut rows = std::mem::take(&mut self.rows_buf);
        rows.clear();
        for (p, len, delta) in pieces(l, &io) {
            Self::rows(
                p.k,
                p.in_chunk,
                p.in_chunk + len as u64,
                delta,
                |page, piece| rows.push(((p.stripe, page), piece)),
            );
        }
        rows.sort_by_key(|r| r.0);
        let mut ranges = std::mem::take(&mut self.ranges_buf);
        ranges.clear();
        Self::row_ranges(&rows, self.merge, &mut ranges);
        self.rows_buf = rows;
        // Every sub-I/O first: an operation that ends at once must not find its parent
        // looking complete.
        let key = self.fanout.begin(io);
        let mut subs = std::mem::take(&mut self.subs_buf);
        subs.clear();
        subs.extend(ranges.iter().map(|_| self.fanout.sub(key, 0, 0, 0, 0)));
        for ((rows, pieces), sub) in ranges.drain(..).zip(subs.drain(..)) {
            self.enqueue(Owner::Sub(sub), rows, Work::Write(pieces), out);
        }
        self.ranges_buf = ranges;
        self.subs_buf = subs;
    }
}

impl Function for Raid {
    fn name(&self) -> &str {
        &self.name
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let mut devs = Vec::new();
        let mut size = u64::MAX;
        for n in &self.names {
            let Some(d) = devices.iter().find(|d| &d.name == n) else {
                let all: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                return Err(format!(
                    "devices: unknown device `{n}` (devices: {})",
                    all.join(", ")
                ));
            };
            if devs.contains(&d.id) {
                return Err(format!("devices: `{n}` is named twice"));
            }
            devs.push(d.id);
            size = size.min(d.capacity);
        }
        let min = match self.layout.level {
            Level::Raid0 => 1,
            Level::Raid5 => 3,
        };
        if devs.len() < min {
            return Err(format!(
                "devices: {} needs at least {min} members, got {}",
                self.name,
                devs.len()
            ));
        }
        self.logs.clear();
        self.shape.spare = self.spare.is_some();
        self.shape.copies = self.log_all;
        if self.shape.max > 0 && !self.report && self.layout.level == Level::Raid5 {
            // Room for a bitmap of the configured region size over the members' stripes
            // before the log shortens them (at least as many as after).
            let region_stripes = (self.bitmap_region / self.layout.chunk).max(1);
            self.shape.regions = (size / self.layout.chunk).div_ceil(region_stripes);
            // The log's size follows the list's bound; member 0 (each member, with a copy on
            // every one) is shortened by it, and so every member: a stripe spans them all.
            let len =
                JournalConfig::region_len(self.shape.snapshot_bytes(), persist::JOURNAL_BYTES);
            let copies = if self.log_all { devs.len() } else { 1 };
            for (k, &dev) in devs.iter().enumerate().take(copies) {
                let d = devices.iter().find(|d| d.id == dev).expect("a member");
                let region = Region::at_end(d, len).map_err(|e| format!("devices: {e}"))?;
                size = size.min(region.offset);
                let mut j = Journal::new(JournalConfig {
                    region,
                    snapshot_bytes: self.shape.snapshot_bytes(),
                    owner: persist::OWNER.into(),
                    io_base: JOURNAL_BASE + k as u64 * IO_NUMBERS,
                    priority: 0,
                })
                .map_err(|e| format!("max_bad_pages: {e}"))?;
                j.set_label(self.label(persist::Role::Member(k)));
                self.logs.push(copies::Copy {
                    member: Some(k),
                    j,
                    dead: false,
                    blank: false,
                    standby: false,
                    found: None,
                });
            }
            self.ready = false;
        }
        self.layout.disks = devs.len();
        self.layout.stripes = size / self.layout.chunk;
        self.shape.disks = devs.len();
        self.shape.pages = self.layout.stripes * (self.layout.chunk / PAGE);
        self.shape.stripes = self.layout.stripes;
        self.member = vec![usize::MAX; devices.len()];
        for (m, &d) in devs.iter().enumerate() {
            self.member[d as usize] = m;
        }
        self.read_errors = vec![0; devs.len()];
        self.fail_at_start_member = self.member_named("fail", self.fail_at_start.as_deref())?;
        if let Some(s) = self.spare.as_mut() {
            let Some(d) = devices.iter().find(|d| d.name == s.name) else {
                let all: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                return Err(format!(
                    "spare: unknown device `{}` (devices: {})",
                    s.name,
                    all.join(", ")
                ));
            };
            if devs.contains(&d.id) {
                return Err(format!("spare: `{}` is also a member", s.name));
            }
            let need = self.layout.stripes * self.layout.chunk;
            if d.capacity < need {
                return Err(format!(
                    "spare: `{}` holds {} bytes, a member's {} stripes need {need}",
                    s.name, d.capacity, self.layout.stripes
                ));
            }
            s.dev = d.id;
            if self.log_all && !self.logs.is_empty() {
                // The spare keeps its own copy of the log at its end (as md writes its
                // superblock to a spare), written from the moment a replacement starts:
                // a member it replaces does not leave the array a copy short.
                let len = self.logs[0].j.region().len;
                let fits = Region::at_end(d, len).ok().filter(|r| r.offset >= need);
                let Some(region) = fits else {
                    return Err(format!(
                        "spare: `{}` holds {} bytes: a member's {} stripes need {need} and, \
                         after them, a copy of the log (log_members = \"all\") {len}",
                        s.name, d.capacity, self.layout.stripes
                    ));
                };
                let mut j = Journal::new(JournalConfig {
                    region,
                    snapshot_bytes: self.shape.snapshot_bytes(),
                    owner: persist::OWNER.into(),
                    io_base: JOURNAL_BASE + self.logs.len() as u64 * IO_NUMBERS,
                    priority: 0,
                })
                .map_err(|e| format!("max_bad_pages: {e}"))?;
                j.set_label(self.label(persist::Role::Spare));
                self.logs.push(copies::Copy {
                    member: None,
                    j,
                    dead: false,
                    blank: false,
                    standby: true,
                    found: None,
                });
            }
            // An array device (requests to it are the array's); it stands for the member
            // it replaces once a replacement starts.
            self.member[d.id as usize] = 0;
        }
        if let Some(s) = self.spare.as_ref() {
            let m = self.member_named("replace", s.at_start.as_deref())?;
            self.spare.as_mut().expect("checked").at_start_member = m;
        }
        self.devs = devs;
        Ok(())
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        self.now = now;
        for c in &mut self.logs {
            c.j.recover(out);
        }
    }

    /// A replacement in progress stops after the stripe it is copying (the log says how
    /// far it got; the next start goes on from there); the write-intent bitmap logs every
    /// idle region clean (md clears its bitmap at a clean stop), and the resync stops after
    /// the range it is on.
    fn on_stop(&mut self, now: Nanos, out: &mut Actions) {
        self.now = now;
        self.stop_replacing();
        self.intent_stop(out);
    }

    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        self.now = now;
        if timer == intent::TIMER {
            self.intent_tick(out);
        }
    }

    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        self.now = now;
        for k in 0..self.logs.len() {
            let s = self.logs[k].j.on_bytes(tag, bytes, out);
            if s != journal::Step::NotMine {
                return self.log_step(k, s, out);
            }
        }
    }

    fn regions(&self) -> Vec<Region> {
        self.logs.iter().map(|c| c.j.region()).collect()
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        self.now = now;
        // I/O for a device outside the array (a cache's own flash device, say) is not the
        // array's volume: it passes through untouched.
        if self
            .member
            .get(io.dev as usize)
            .is_none_or(|&m| m == usize::MAX)
        {
            out.submit(io);
            return;
        }
        if self.broken {
            return out.reply(Completion::answered(io, Status::IoError));
        }
        if !self.ready || self.geometry_seq.is_some() || self.forming {
            return self.early.push(io);
        }
        if io.op != Op::Flush && io.end() > self.layout.capacity() {
            out.reply(Completion {
                io,
                status: Status::Invalid,
                finished: 0,
                breakdown: Breakdown::default(),
            });
            return;
        }
        match io.op {
            Op::Flush if self.has_log() && self.faulty_seq > self.log_durable() => {
                self.flushes_held.push(io);
            }
            Op::Flush => {
                // Every device holding a member's stripes: a replaced member's spare once
                // a stripe has moved, the member until all have.
                let live = self.flush_devices();
                let key = self.fanout.begin(io);
                for d in live {
                    out.submit(self.fanout.sub(key, 0, 0, d, 0));
                }
            }
            _ if io.len == 0 => out.reply(Completion::ok(io, 0, Breakdown::default())),
            Op::Read => self.read(io, out),
            Op::Write => self.write(io, out),
            // RAID-5 cannot pass a discard down without breaking parity; a discard is
            // advisory (its content after is unspecified), so it is answered at once.
            Op::Discard if self.layout.level == Level::Raid5 => {
                out.reply(Completion::ok(io, 0, Breakdown::default()))
            }
            Op::Discard => self.write(io, out),
        }
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        self.now = now;
        if self
            .member
            .get(done.io.dev as usize)
            .is_none_or(|&m| m == usize::MAX)
        {
            // A pass-through I/O to a device outside the array (whatever its id: a layer
            // above may have made it its own).
            out.reply(done);
            return;
        }
        if done.io.id.is_own() && !done.io.id.is_sub() {
            let n = done.io.id.0 & (IoId::SUB - 1);
            if (JOURNAL_BASE..JOURNAL_BASE + self.logs.len() as u64 * IO_NUMBERS).contains(&n) {
                let k = ((n - JOURNAL_BASE) / IO_NUMBERS) as usize;
                let s = self.logs[k].j.on_completion(&done, out);
                return self.log_step(k, s, out);
            }
            if (intent::FLUSH_BASE..intent::FLUSH_BASE + MAX_MEMBERS as u64 + 1).contains(&n) {
                return self.intent_flushed(&done, out);
            }
            let Some(id) = self.ios.remove(&n) else {
                return;
            };
            return self.op_io_done(id, &done, out);
        }
        // A chunk piece: a failed RAID-5 read is retried page by page, and pages that
        // fail alone are rebuilt from the other members.
        if done.status == Status::IoError
            && done.io.op == Op::Read
            && self.layout.level == Level::Raid5
        {
            let m = self.member[done.io.dev as usize];
            let member_off = done.io.offset;
            let stripe = member_off / self.layout.chunk;
            let in_chunk = member_off % self.layout.chunk;
            let k = (0..self.layout.data_disks())
                .find(|&k| self.layout.data_disk(stripe, k) == m)
                .expect("a data piece");
            let mut rows = Vec::new();
            Self::rows(
                k,
                in_chunk,
                in_chunk + done.io.len as u64,
                0,
                |page, piece| rows.push((page, piece)),
            );
            let hkey = self.next_held;
            self.next_held += 1;
            self.held.insert(
                hkey,
                Held {
                    sub: done,
                    left: rows.len() as u32,
                    status: Status::Ok,
                },
            );
            for (page, piece) in rows {
                self.enqueue(
                    Owner::Held(hkey),
                    (stripe, page, 1),
                    Work::Rebuild(piece),
                    out,
                );
            }
            return;
        }
        if let Step::Reply(c) = self.fanout.complete(&done) {
            out.reply(c);
        }
    }

    fn volume(&self) -> Option<Volume> {
        Some(Volume {
            name: self.name.clone(),
            dev: *self.devs.first()?,
            size: self.layout.capacity(),
            members: self
                .devs
                .iter()
                .copied()
                .chain(self.spare.as_ref().map(|s| s.dev))
                .collect(),
        })
    }

    /// At most one buffer per row operation (its current attempt's) and per held read.
    fn scratch_buffers(&self) -> usize {
        self.ops.len() + self.held.len()
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.counters;
        [
            ("full_row_writes", c.full_row),
            ("reconstruct_writes", c.rcw),
            ("read_modify_writes", c.rmw),
            ("rebuilt_rows", c.rebuilt_rows),
            ("retried_rows", c.direct_rows),
            ("unknown_row_errors", c.unknown_row_errors),
            ("bad_pages", c.bad_pages),
        ]
        .into_iter()
        .chain(
            self.has_log()
                .then_some([
                    ("failed_members", c.failed_members),
                    ("recovered_faulty", c.recovered_faulty),
                    ("faulty", u64::from(self.faulty.is_some())),
                    ("read_errors", self.read_errors.iter().sum()),
                ])
                .into_iter()
                .flatten(),
        )
        .chain(
            self.spare
                .as_ref()
                .map(|s| {
                    [
                        ("replacements", c.replacements),
                        ("resumed_replacements", c.resumed_replacements),
                        ("replaced_stripes", s.through),
                        ("spare_rebuilt_pages", c.spare_rebuilt_pages),
                        ("spare_lost_pages", c.spare_lost_pages),
                        ("recovered_members", c.recovered_members),
                        ("stalled_recoveries", c.stalled_recoveries),
                    ]
                })
                .into_iter()
                .flatten(),
        )
        .chain(self.intent_counters())
        .chain(
            self.log_all
                .then(|| {
                    let dead = self.logs.iter().filter(|c| c.dead).count() as u64;
                    [
                        ("dead_log_copies", dead),
                        ("refused_spares", c.refused_spares),
                        ("swapped_spares", c.swapped_spares),
                        ("blank_members", c.blank_members),
                        ("adopted_copies", c.adopted_copies),
                    ]
                })
                .into_iter()
                .flatten(),
        )
        .chain(
            self.has_log()
                .then_some([
                    ("held_replies", c.held_replies),
                    ("recovered_bad_pages", c.recovered_bad_pages),
                    ("unpersisted_bad_pages", self.unpersisted.len() as u64),
                    ("unpersisted_errors", c.unpersisted_errors),
                ])
                .into_iter()
                .flatten(),
        )
        .map(|(n, v)| (n.to_string(), v as f64))
        .collect()
    }
}

#[cfg(test)]
mod tests;
