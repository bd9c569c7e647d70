//! The PARAID layer: gears as nested RAIDs of one level over the first `G_i` disks.
//!
//! **Regions.** Every disk holds, from offset 0, the region of the original RAID (level
//! `M − 1`, all `D` disks), then the soft-state regions of the gears below, highest first.
//! Level `g < M − 1` is a RAID over disks `0..G_g` whose *volume* holds the whole used part
//! of every disk in `G_g..G_{g+1}` (bytes `0..base_g`, base_g = the sum of the regions above
//! it), one after another: disk m's byte x lives at volume offset `(m − G_g)·base_g + x`.
//! Sizes follow Eq. 1 ([`shares`]), rounded down to whole chunks (see [`regions`]).
//!
//! **Routing** happens where a level's RAID issues a member I/O (disk m, byte x): to disk
//! m if it is on in the current gear, else as a request to its replica level's RAID, whose
//! own member I/Os are routed the same way (nested gears). Each level is a
//! [`Raid`](crate::raid::stripe::Raid): parity, degraded reads and row serialisation are
//! the RAID layer's, unchanged. The layer renames every I/O it sends down (its own ids) and
//! restores it on the way back, so the levels' ids and scratch buffers never collide.
//!
//! **The dirty list** ([`Dirty`]), a chunk of a disk that can be spun down is either clean
//! (original and replica equal) or has one newer side: written on the original while the
//! replica is stale, or written through the replica while the disk was down. A chunk whose
//! replica is newer is served from the replica, whatever the gear, until propagation copies
//! it back; a downshift copies every original-newer chunk of the disks it spins down to
//! the replicas first (full propagation), flushes those disks, then switches and spins them
//! down. An upshift switches at once (clean chunks go to the disks as they spin up) and
//! copies the replica-newer chunks back in the background (on demand until then).
//! Propagation is [`Copier`] copies, one chunk each, at priority −1 and FUA.
//!
//! **Persistence** (`persist`, on by default): the dirty list's sides and the gear are kept
//! in a metadata log at the end of disk 0 ([`persist`](super::persist) says what is logged
//! and why it is enough); a write that makes a chunk newer waits until its record is
//! durable, and host requests wait at start until the log is recovered.

pub use super::dirty::Dirty;
use super::dirty::DirtyList;
use super::model::shares;
use super::persist::{BadPage, Both, Ordered, Record, Shape, JOURNAL_BYTES, MAX_BAD_PAGES, OWNER};
use super::policy::{Busy, Ration, Shift, ShiftParams, Shifter};
use crate::raid::stripe::{Level, Parity, Raid};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use wattio_core::copy::{Copier, CopyJob, CopyStep};
use wattio_core::device::DeviceInfo;
use wattio_core::flush_round::{FlushRounds, Round};
use wattio_core::function::{Action, Actions, Function, TimerId, Volume};
use wattio_core::fxhash::{FxHashMap, FxHashSet};
use wattio_core::io::{Breakdown, Buf, Completion, DeviceId, Io, IoId, Op, Status};
use wattio_core::journal::{self, Journal, JournalConfig, Step, IO_NUMBERS};
use wattio_core::periodic::Periodic;
use wattio_core::power::PowerStateId;
use wattio_core::region::Region;
use wattio_core::time::Nanos;

const MONITOR: TimerId = 0;
/// Own-I/O numbers (and scratch ids) of the metadata log.
const JOURNAL_BASE: u64 = 1 << 44;
/// Own-I/O numbers of propagation copies (they name the copies' scratch buffers too).
const COPY_BASE: u64 = 1 << 46;
/// Scratch ids of level g's RAID start at `RAID_SCRATCH + g·2^40`.
const RAID_SCRATCH: u64 = 1 << 48;
/// Scratch ids of the disk halves of writes sent to both sides: `MIRROR_SCRATCH + n`, n the
/// half's own I/O number (the copier's ids stay below it).
const MIRROR_SCRATCH: u64 = 1 << 47;
/// Device-queue priority of propagation I/O by default: below the host's 0 (the issue's
/// rule; `propagation_priority` sets it).
pub const PROPAGATION_PRIORITY: i8 = -1;
/// Rated start/stop cycles when neither the table nor the catalogue gives them (the paper).
pub const DEFAULT_RATED_CYCLES: u64 = 20_000;
/// A chunk whose copy failed n times in a row waits 2^min(n−1, this) samples for its next
/// try (`copy_failed`).
const MAX_BACKOFF_EXP: u32 = 20;

/// The layer's parameters (checked by `config`).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    pub level: Level,
    pub parity: Parity,
    /// Chunk size, bytes.
    pub chunk: u64,
    /// Disks per gear, increasing; the last is every device.
    pub gears: Vec<usize>,
    pub shift: ShiftParams,
    /// Rated start/stop cycles; `None`: the catalogue's `rated_start_stop` (else 20,000).
    pub rated: Option<u64>,
    pub life: Nanos,
    pub period: Nanos,
    /// Start in the lowest gear (else the highest).
    pub start_low: bool,
    /// Upshift by *full synchronization* (the paper's prototype, Sec. 5): keep serving from
    /// the current gear while the arriving disks get back every chunk their replicas hold
    /// newer, then switch. Else *on demand*: switch at once, copy back in the background.
    pub full_sync: bool,
    /// In a full synchronization, a host write to a clean chunk of an arriving disk that is
    /// up goes to both sides (the replica, as the current gear serves it, and the disk,
    /// FUA): the paper's dirty list takes "an update ... to a clean block on a powered-off
    /// disk" (Sec. 5), and a disk being brought back is on. Else it goes to the replica
    /// only, and adds a chunk to copy.
    pub sync_writes_both: bool,
    /// Propagation copies in flight at most.
    pub copies: usize,
    pub assume_clean: bool,
    /// Keep the dirty list and the gear in a metadata log on disk 0 (else they are lost at a
    /// crash, and with them which copy of a chunk is the newer).
    pub persist: bool,
    /// RAID-5 gears: the largest row range one write operation covers, bytes (the RAID's
    /// `merge_kib`).
    pub merge: u64,
    /// Device-queue priority of propagation copies (the host's I/O has 0).
    pub propagation_priority: i8,
}

/// Which copy of a chunk is the newer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Original,
    Replica,
}

impl Side {
    fn other(self) -> Side {
        match self {
            Side::Original => Side::Replica,
            Side::Replica => Side::Original,
        }
    }
}

/// A tracked write held until its dirty record is durable: where `route` was sending it.
#[derive(Clone, Copy, Debug)]
struct Held {
    seq: u64,
    disk: usize,
    side: Side,
    /// Byte offset on the disk.
    x: u64,
    /// The write, renamed.
    io: Io,
    /// Its half for the disk, renamed, if it goes to both sides.
    twin: Option<Io>,
}

/// A write sent to both sides, waiting for its halves.
#[derive(Clone, Copy, Debug)]
struct Twins {
    key: (usize, u64),
    /// Halves still out.
    left: u8,
    /// The disk's half came back OK.
    disk_ok: bool,
    /// The replica's half, once back.
    first: Option<(Pending, Completion)>,
}

/// Chunks per disk of each level's region (index = gear), from Eq. 1's shares of a
/// lowest-gear disk of `chunks` chunks: the original RAID's share rounded down, each
/// soft-state region just large enough for the disks it stands for, the original's share
/// lowered chunk by chunk until the sum fits (rounding costs a few chunks).
pub fn regions(level: Level, gears: &[usize], chunks: u64) -> Option<Vec<u64>> {
    let s = shares(level, gears)?;
    let m = gears.len();
    let data = |g: usize| match level {
        Level::Raid0 => gears[g] as u64,
        Level::Raid5 => gears[g] as u64 - 1,
    };
    let mut top = (s[m - 1] * chunks as f64).floor() as u64;
    while top > 0 {
        let mut sizes = vec![0; m];
        sizes[m - 1] = top;
        let mut base = top;
        for g in (0..m - 1).rev() {
            let need = (gears[g + 1] - gears[g]) as u64 * base;
            sizes[g] = need.div_ceil(data(g));
            base += sizes[g];
        }
        if base <= chunks {
            return Some(sizes);
        }
        top -= 1;
    }
    None
}

/// Who an I/O the layer sent down belongs to.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// A member I/O of level g's RAID.
    Level(usize),
    /// A propagation copy's read or write.
    Copy,
    /// The flush of a disk about to be spun down.
    Settle,
    /// The flush of a disk that is on, before copied chunks are logged clean.
    Clean,
    /// The disk's half of a write sent to both sides; the number the replica's half went
    /// down under.
    Mirror(u64),
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    origin: Origin,
    /// The I/O as its origin issued it.
    io: Io,
    /// The dirty chunk a tracked write counts against.
    write: Option<(usize, u64)>,
}

#[derive(Clone, Copy, Debug)]
struct Copying {
    from: Side,
    version: u64,
}

#[derive(Default)]
struct Counters {
    upshifts: u64,
    downshifts: u64,
    copies: u64,
    copy_errors: u64,
    abandoned: u64,
    /// Chunks a full synchronization left replica-newer, their copies failed.
    sync_left_failed: u64,
    clean_rounds: u64,
    clean_round_errors: u64,
    /// Time between full-synchronization upshifts' decisions and their switches.
    sync_ns: Nanos,
    /// Host writes a full synchronization sent to both sides, and the chunks they left
    /// clean (no copy needed).
    sync_writes_both: u64,
    sync_writes_clean: u64,
    host_ios: u64,
    refused_by_ration: u64,
    recovered_dirty: u64,
    held_writes: u64,
    held_replies: u64,
    recovered_bad: u64,
}

pub struct Paraid {
    p: Params,
    names: Vec<String>,
    devs: Vec<DeviceId>,
    /// Disk index by device id (`usize::MAX`: not a member).
    member: Vec<usize>,
    /// Level g's RAID (the last: the original).
    levels: Vec<Raid>,
    /// Level g's region starts at `base[g]` bytes on each of its disks.
    base: Vec<u64>,
    /// The gear requests are routed by: disks `0..gears[gear]` are on.
    gear: usize,
    /// A downshift waiting for its propagation.
    target: Option<usize>,
    /// A full-synchronization upshift waiting for its copies: the gear, since when.
    rising: Option<(usize, Nanos)>,
    /// Per disk: an I/O of it came back OK since it was last told to spin up (it is up, so
    /// a full synchronization's writes may go to it too without waiting for a spin-up).
    awake: Vec<bool>,
    /// Writes sent to both sides, by the number their replica half went down under.
    twins: FxHashMap<u64, Twins>,
    /// Settle flushes out.
    settling: u32,
    /// `original_writes` when the settle flushes went out.
    settle_mark: Option<u64>,
    /// Tracked writes sent to originals (a downshift settles when none came since its
    /// flushes went out).
    original_writes: u64,
    /// (disk, chunk on disk) → which side is newer. Only disks that can be spun down.
    dirty: DirtyList,
    copying: FxHashMap<(usize, u64), Copying>,
    /// Copied chunks (clean in memory) whose `Clean` record waits for a flush round, with
    /// their side that was newer. A copy reads its source where the disk has it, its cache
    /// too: a host write there not yet durable would be lost by a crash, leaving the two
    /// sides different under a log that says they are equal. So the disks that are on are
    /// flushed first; a round covers every copy done before it went out. A write that makes
    /// the chunk dirty again takes it out (its `Newer` record comes later in the log than
    /// the `Clean` would have).
    cleaning: FlushRounds<(usize, u64), Side>,
    /// Chunks whose copy failed, not to be tried again yet (`copy_failed`).
    failed: FxHashSet<(usize, u64)>,
    /// Chunks whose last copy failed: how many failed in a row, and the sample from which
    /// the next may go.
    backoff: FxHashMap<(usize, u64), (u32, u64)>,
    /// Samples taken.
    samples: u64,
    copier: Copier,
    /// I/O sent down, by the own-I/O number it was renamed to (a slab: numbers are reused).
    pending: Vec<Option<Pending>>,
    free: Vec<u64>,
    pool: Vec<Actions>,
    busy: Busy,
    shifter: Shifter,
    ration: Ration,
    monitor: Periodic,
    /// Reads and writes of the host per sample, over the window.
    mix: VecDeque<(u64, u64)>,
    /// Each disk's deepest sleep state (`None`: it has none, and stays on in every gear:
    /// the gears still route, nothing is spun down).
    sleep: Vec<Option<PowerStateId>>,
    idle: Vec<PowerStateId>,
    time_in: Vec<Nanos>,
    since: Nanos,
    counters: Counters,
    /// The metadata log (`persist`) and what it persists.
    journal: Option<Journal>,
    shape: Shape,
    /// Writes waiting for their dirty record.
    held: Vec<Held>,
    /// The gears' bad pages the log holds (for checkpoints), the last one's sequence
    /// number, and host write replies waiting for it to be durable.
    bad: Vec<BadPage>,
    bad_seq: u64,
    parked: Vec<(u64, Completion)>,
    /// Host requests that came before the log was recovered.
    early: Vec<Io>,
    /// The state is known (recovered, or nothing to recover).
    ready: bool,
    /// The log failed: every host request is answered EIO.
    broken: bool,
}

impl Paraid {
    pub fn new(names: Vec<String>, p: Params) -> Paraid {
        let m = p.gears.len();
        Paraid {
            names,
            devs: Vec::new(),
            member: Vec::new(),
            levels: Vec::new(),
            base: vec![0; m],
            gear: if p.start_low { 0 } else { m - 1 },
            target: None,
            rising: None,
            awake: Vec::new(),
            twins: FxHashMap::default(),
            settling: 0,
            settle_mark: None,
            original_writes: 0,
            dirty: DirtyList::default(),
            copying: FxHashMap::default(),
            cleaning: FlushRounds::new(),
            failed: FxHashSet::default(),
            backoff: FxHashMap::default(),
            samples: 0,
            copier: Copier::new(COPY_BASE),
            pending: Vec::new(),
            free: Vec::new(),
            pool: Vec::new(),
            busy: Busy::default(),
            shifter: Shifter::new(p.shift.clone()),
            ration: Ration::new(0, 1, 1, 1),
            monitor: Periodic::new(MONITOR, p.shift.sample),
            mix: VecDeque::new(),
            sleep: Vec::new(),
            idle: Vec::new(),
            time_in: vec![0; m],
            since: 0,
            counters: Counters::default(),
            journal: None,
            shape: Shape {
                low: 0,
                disks: 0,
                chunks: 0,
                gears: m,
            },
            held: Vec::new(),
            early: Vec::new(),
            broken: false,
            bad: Vec::new(),
            bad_seq: 0,
            parked: Vec::new(),
            ready: false,
            p,
        }
    }

    /// The gear requests are routed by (index into the gears).
    pub fn gear(&self) -> usize {
        self.gear
    }

    /// The dirty list: (disk, chunk) → entry, in order.
    pub fn dirty(&self) -> BTreeMap<(usize, u64), Dirty> {
        self.dirty.to_map()
    }

    fn top(&self) -> usize {
        self.levels.len() - 1
    }

    fn is_on(&self, disk: usize) -> bool {
        disk < self.p.gears[self.gear]
    }

    /// The level holding disk `disk`'s replica (none for the lowest gear's disks).
    fn replica_level(&self, disk: usize) -> Option<usize> {
        (0..self.p.gears.len() - 1).find(|&g| self.p.gears[g] <= disk && disk < self.p.gears[g + 1])
    }

    /// Keep `p` until its I/O is back; the own-I/O number to send it down under.
    fn rename(&mut self, p: Pending) -> u64 {
        match self.free.pop() {
            Some(n) => {
                self.pending[n as usize] = Some(p);
                n
            }
            None => {
                self.pending.push(Some(p));
                (self.pending.len() - 1) as u64
            }
        }
    }

    fn take_acts(&mut self) -> Actions {
        self.pool.pop().unwrap_or_default()
    }

    /// Carry out level g's actions: member I/Os are routed, replies go up.
    fn drive(&mut self, now: Nanos, g: usize, acts: &mut Actions, out: &mut Actions) {
        if self.levels.iter().any(Raid::has_new_bad) {
            self.log_bad(out);
        }
        for a in acts.drain() {
            match a {
                Action::Submit(io) => self.route(now, Origin::Level(g), io, None, out),
                // A host write answered while a gear's bad page is not yet durable waits for
                // it: a crash would forget the page, and a direct read of it return old bytes.
                Action::Reply(c)
                    if g == self.top()
                        && c.io.op != Op::Read
                        && self
                            .journal
                            .as_ref()
                            .is_some_and(|j| self.bad_seq > j.durable()) =>
                {
                    self.counters.held_replies += 1;
                    self.parked.push((self.bad_seq, c));
                }
                Action::Reply(c) if g == self.top() => {
                    self.busy.leave(now);
                    out.reply(c);
                }
                Action::Reply(c) => {
                    let io = c.io;
                    let held = matches!(io.buf, Buf::Scratch { .. });
                    // Held at `dispatch`. A read is unheld before what its reply starts,
                    // as a reply from below in the stack is: that may be a write out of
                    // the same buffer that a replica level answers at once (a RAID-5
                    // row's parity, refused there with two of the row's members bad), and
                    // that write's unhold frees the buffer only if nothing else is out on
                    // it. Unheld after, the read was still counted then, and its own
                    // unhold frees nothing (a read's buffer is still wanted): the buffer
                    // leaked (the swarm, seed 583,737, PARAID over an absent member).
                    if held && io.op == Op::Read {
                        out.unhold(io);
                    }
                    self.returned(now, c, out);
                    if held && io.op != Op::Read {
                        // A write is unheld after what its reply started (a copy's
                        // release), as the write that drains its buffer.
                        out.unhold(io);
                    }
                }
                other => out.push(other),
            }
        }
    }

    /// Send `io` (a member I/O of `origin`, or a copy's at physical offset `io.offset`) to
    /// its disk or that disk's replica: `side` forces the choice (copies).
    fn route(&mut self, now: Nanos, origin: Origin, io: Io, side: Option<Side>, out: &mut Actions) {
        let Some(&disk) = self
            .member
            .get(io.dev as usize)
            .filter(|&&m| m != usize::MAX)
        else {
            // Not an array device: passes through (the RAID answers its completion).
            out.submit(io);
            return;
        };
        let x = match origin {
            Origin::Level(g) => self.base[g] + io.offset,
            Origin::Copy | Origin::Settle | Origin::Clean | Origin::Mirror(_) => io.offset,
        };
        if io.op == Op::Flush {
            if self.is_on(disk) {
                let n = self.rename(Pending {
                    origin,
                    io,
                    write: None,
                });
                out.submit(Io {
                    id: IoId::own(n),
                    ..io
                });
            } else {
                // A disk is flushed before it is spun down and written through its replica
                // after: its bytes are on the disks that are on, which the same flush reaches
                // (a RAID flushes every member).
                self.deliver(
                    now,
                    origin,
                    Completion::ok(io, now, Breakdown::default()),
                    out,
                );
            }
            return;
        }
        let key = (disk, x / self.p.chunk);
        let tracked = disk >= self.p.gears[0] && side.is_none();
        let on = self.is_on(disk);
        // A replica-newer chunk is read and written on the replica; any other on its disk
        // when that is on.
        let pick = |newer: Option<Side>| match newer {
            Some(Side::Replica) => Side::Replica,
            _ if on => Side::Original,
            _ => Side::Replica,
        };
        let mut write = None;
        let mut wait = None;
        let mut both = false;
        let side = if tracked && matches!(io.op, Op::Write | Op::Discard) {
            // A write to an arriving disk that is up, in a full synchronization, may go to
            // both sides if its chunk is clean (below).
            // (Every write's path: the rising gear, usually none, is asked first.)
            let may_both = self
                .rising
                .is_some_and(|(r, _)| self.leaving(r, self.gear).contains(&disk))
                && io.op == Op::Write
                && self.p.sync_writes_both
                && self.awake[disk];
            // One map lookup for a chunk already in the list (this is every write's path).
            let (d, new) = self.dirty.get_or_insert(key, || Dirty::new(pick(None)));
            if new && !self.cleaning.is_empty() {
                self.cleaning.remove(&key);
            }
            let (side, mut seq) = if new {
                // Clean until now: with both sides written, equal again once it is back.
                // Logged replica-newer all the same, so a crash between the halves leaves
                // it to be copied.
                both = may_both && d.side == Side::Replica;
                d.mirror = both;
                (d.side, 0)
            } else {
                debug_assert_eq!(d.side, pick(Some(d.side)), "a chunk has one newer side");
                d.version += 1;
                d.writes += 1;
                // A second write out to it: the halves could land in different orders, so
                // the chunk is copied after all.
                d.mirror = false;
                (d.side, d.seq)
            };
            write = Some(key);
            if side == Side::Original {
                self.original_writes += 1;
            }
            if new {
                // Logged after the insert: a checkpoint the record triggers holds the chunk.
                seq = self.log(
                    Record::Newer {
                        disk,
                        chunk: key.1,
                        side,
                    },
                    out,
                );
                if let Some(d) = self.dirty.get_mut(&key) {
                    d.seq = seq;
                }
            }
            if self.journal.as_ref().is_some_and(|j| seq > j.durable()) {
                wait = Some(seq);
            }
            side
        } else {
            side.unwrap_or_else(|| pick(self.dirty.side_of(key)))
        };
        let n = self.rename(Pending { origin, io, write });
        let twin = both.then(|| {
            self.counters.sync_writes_both += 1;
            self.twins.insert(
                n,
                Twins {
                    key,
                    left: 2,
                    disk_ok: false,
                    first: None,
                },
            );
            let m = self.rename(Pending {
                origin: Origin::Mirror(n),
                io,
                write: None,
            });
            // A write out of a gear's scratch buffer (parity): the kernel frees that buffer
            // when the last write out of it is back, which may be either half, while the
            // replica's RAID may still read it for its own parity (swarm seed 405) or the
            // disk's half not have gone out yet (held for its record). The disk's half goes
            // out of a copy of its own, which that half drains.
            let buf = match io.buf {
                Buf::Scratch { .. } => {
                    let own = Buf::Scratch {
                        id: MIRROR_SCRATCH + m,
                        offset: 0,
                    };
                    out.copy(own, io.buf, io.len);
                    own
                }
                b => b,
            };
            Io {
                id: IoId::own(m),
                fua: true,
                buf,
                ..io
            }
        });
        let io = Io {
            id: IoId::own(n),
            ..io
        };
        match wait {
            Some(seq) => {
                self.counters.held_writes += 1;
                self.held.push(Held {
                    seq,
                    disk,
                    side,
                    x,
                    io,
                    twin,
                });
            }
            None => {
                self.dispatch(now, disk, side, x, io, out);
                if let Some(t) = twin {
                    self.dispatch(now, disk, Side::Original, x, t, out);
                }
            }
        }
    }

    /// Log the gears' new bad pages.
    fn log_bad(&mut self, out: &mut Actions) {
        for level in 0..self.levels.len() {
            for (disk, page) in self.levels[level].take_new_bad() {
                self.bad.push((level, disk, page));
                self.bad_seq = self.log(Record::Bad { level, disk, page }, out);
            }
        }
    }

    /// Append `r` to the log (checkpointing when it is full); its sequence number (0
    /// without a log).
    fn log(&mut self, r: Record, out: &mut Actions) -> u64 {
        let Some(j) = self.journal.as_mut() else {
            return 0;
        };
        let seq = match j.append(&r.encode(), out) {
            Ok(seq) => seq,
            Err(e) => {
                out.fail(&format!("paraid: {e}"));
                return 0;
            }
        };
        if j.wants_snapshot() {
            // Chunks waiting for their `Clean` are still dirty as far as the log knows.
            let snap = if self.cleaning.is_empty() {
                self.shape.checkpoint(self.gear, &self.dirty, &self.bad)
            } else {
                let cleaning = Ordered(self.cleaning.iter());
                self.shape
                    .checkpoint(self.gear, &Both(&self.dirty, &cleaning), &self.bad)
            };
            let j = self.journal.as_mut().expect("checked");
            if let Err(e) = j.checkpoint(&snap, out) {
                out.fail(&format!("paraid: {e}"));
            }
        }
        seq
    }

    /// Send a renamed I/O to its side: the disk at byte `x`, or the replica level's RAID.
    fn dispatch(&mut self, now: Nanos, disk: usize, side: Side, x: u64, io: Io, out: &mut Actions) {
        match side {
            Side::Original => out.submit(Io { offset: x, ..io }),
            Side::Replica => {
                let r = self.replica_level(disk).expect("a disk that can be down");
                let y = (disk - self.p.gears[r]) as u64 * self.base[r] + x;
                let req = Io {
                    dev: self.devs[0],
                    offset: y,
                    ..io
                };
                if matches!(req.buf, Buf::Scratch { .. }) {
                    // The level may cut it into row operations that run one after another
                    // (a failed member, bad pages, a redo after a failed write): held until
                    // it answers, as the layer below would hold it, so that one row's data
                    // write coming back does not free the buffer the next rows still read
                    // (the swarm, seeds 1385 and 3849, with a member absent).
                    out.hold(req);
                }
                let mut acts = self.take_acts();
                self.levels[r].on_request(now, req, &mut acts);
                self.drive(now, r, &mut acts, out);
                self.pool.push(acts);
            }
        }
    }

    /// An I/O the layer sent down (to a device or a replica level) is back.
    fn returned(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        let n = done.io.id.0 & (IoId::SUB - 1);
        let Some(p) = self.pending.get_mut(n as usize).and_then(Option::take) else {
            return;
        };
        if done.status == Status::Ok && self.rising.is_some() {
            if let Some(&disk) = self.member.get(done.io.dev as usize) {
                if disk != usize::MAX {
                    self.awake[disk] = true;
                }
            }
        }
        // (Every member I/O comes back here: no map probe when no write is out to both.)
        if self.twins.is_empty() {
            self.free.push(n);
            return self.finish(now, p, done, None, out);
        }
        // A write sent to both sides goes on once both halves are back; the replica half's
        // number, the twins' key, is kept until then.
        let (p, done, disk_ok) = match p.origin {
            Origin::Mirror(m) => {
                self.free.push(n);
                let t = self.twins.get_mut(&m).expect("a write to both sides");
                t.disk_ok = done.status == Status::Ok;
                t.left -= 1;
                if t.left > 0 {
                    return;
                }
                let t = self.twins.remove(&m).expect("checked");
                self.free.push(m);
                let (p, done) = t.first.expect("the replica's half is back");
                (p, done, Some(t.disk_ok))
            }
            _ => match self.twins.get_mut(&n) {
                Some(t) => {
                    t.left -= 1;
                    if t.left > 0 {
                        t.first = Some((p, done));
                        return;
                    }
                    let t = self.twins.remove(&n).expect("checked");
                    self.free.push(n);
                    (p, done, Some(t.disk_ok))
                }
                None => {
                    self.free.push(n);
                    (p, done, None)
                }
            },
        };
        self.finish(now, p, done, disk_ok, out);
    }

    /// An I/O the layer sent down is back (both halves of a write sent to both sides:
    /// `disk_ok` says how the disk's went).
    #[inline]
    fn finish(
        &mut self,
        now: Nanos,
        p: Pending,
        done: Completion,
        disk_ok: Option<bool>,
        out: &mut Actions,
    ) {
        let mut copyable = false;
        let mut cleaned = false;
        if let Some(key) = p.write {
            if let Some(d) = self.dirty.get_mut(&key) {
                d.version += 1;
                d.writes -= 1;
                if d.mirror {
                    // The only write since the chunk was clean, sent to both sides: equal
                    // again if both halves landed (else copied like any replica-newer
                    // chunk).
                    d.mirror = false;
                    cleaned = disk_ok == Some(true) && done.status == Status::Ok;
                    debug_assert!(!cleaned || d.writes == 0);
                }
                // A chunk a copy skipped for this write may be copied now.
                copyable =
                    !cleaned && d.writes == 0 && (self.target.is_some() || d.side == Side::Replica);
            }
            if cleaned {
                self.counters.sync_writes_clean += 1;
                self.dirty.remove(&key);
                if self.journal.is_some() {
                    // Logged clean once a flush round makes the replica's half durable
                    // (the disk's half is FUA), as after a copy.
                    self.cleaning.add(key, Side::Replica);
                }
            }
        }
        self.deliver(now, p.origin, Completion { io: p.io, ..done }, out);
        if cleaned {
            self.flush_for_clean(false, out);
        }
        if copyable || (cleaned && self.rising.is_some()) {
            self.pump(now, out);
        }
    }

    fn deliver(&mut self, now: Nanos, origin: Origin, done: Completion, out: &mut Actions) {
        match origin {
            Origin::Level(g) => {
                let mut acts = self.take_acts();
                self.levels[g].on_completion(now, done, &mut acts);
                self.drive(now, g, &mut acts, out);
                self.pool.push(acts);
            }
            Origin::Copy => match self.copier.complete(&done, out) {
                CopyStep::Write(w) => {
                    let key = (self.member[w.dev as usize], w.offset / self.p.chunk);
                    let to = self.copying[&key].from.other();
                    self.route(now, Origin::Copy, w, Some(to), out);
                }
                CopyStep::Done { job, status } => {
                    let key = ((job.tag >> 48) as usize, job.tag & ((1 << 48) - 1));
                    let c = self.copying.remove(&key).expect("a copy in flight");
                    match status {
                        Status::Ok => {
                            self.counters.copies += 1;
                            self.backoff.remove(&key);
                            let copied = self
                                .dirty
                                .get(&key)
                                .filter(|d| d.version == c.version && d.writes == 0)
                                .map(|d| d.side);
                            if let Some(side) = copied {
                                self.dirty.remove(&key);
                                if self.journal.is_some() {
                                    // Logged clean once a flush round makes the source
                                    // durable.
                                    self.cleaning.add(key, side);
                                }
                            }
                        }
                        _ => {
                            self.counters.copy_errors += 1;
                            self.copy_failed(key);
                        }
                    }
                    self.flush_for_clean(false, out);
                    self.pump(now, out);
                }
                CopyStep::NotMine => {}
            },
            Origin::Settle => {
                self.settling -= 1;
                if self.settling == 0 {
                    self.pump(now, out);
                }
            }
            Origin::Clean => {
                if let Some(round) = self.cleaning.flushed(done.status == Status::Ok) {
                    self.cleaned(round, out);
                    self.flush_for_clean(false, out);
                    self.pump(now, out);
                }
            }
            Origin::Mirror(_) => unreachable!("a write's halves are joined in `returned`"),
        }
    }

    /// Chunk `key` could not be brought up to date on its other side (a copy, or the flush
    /// round after it, failed): not retried before the next sample (in a full
    /// synchronization, before the first sample after its switch), and after n failures in
    /// a row not before 2^(n−1) samples (1, 2, 4, …). Each try reads the source: a copy
    /// that can never succeed (its other side an absent member, or a medium error that
    /// stays) re-tried at every sample kept the source disk busy for ever when the tries
    /// of a few chunks took longer than a sample (a slow disk), and starved the I/O a layer
    /// above queued there at the same priority (EXCES's write-back, on an SSTF queue: swarm
    /// seed 702,825). The chunk stays newer on its side meanwhile, served from there. A
    /// downshift that cannot bring a leaving disk's replica up to date is abandoned.
    fn copy_failed(&mut self, key: (usize, u64)) {
        self.failed.insert(key);
        let fails = self.backoff.get(&key).map_or(0, |b| b.0) + 1;
        let wait = 1u64 << (fails - 1).min(MAX_BACKOFF_EXP);
        self.backoff.insert(key, (fails, self.samples + wait));
        if self
            .target
            .is_some_and(|t| self.leaving(self.gear, t).contains(&key.0))
        {
            self.target = None;
            self.settle_mark = None;
            self.counters.abandoned += 1;
        }
    }

    /// Send a flush round for the copied chunks waiting to be logged clean, if none is out:
    /// at each utilization sample (`sample`), and when a downshift waits for nothing else.
    /// Lazily, as md clears its write-intent bitmap (at most one pass per `daemon_sleep`):
    /// a round costs each disk that is on a flush (a write-back drive's destage), so rounds
    /// are one a sample however fast copies end (a downshift's excepted); until its round,
    /// a chunk copied is clean in memory and only its record waits.
    fn flush_for_clean(&mut self, sample: bool, out: &mut Actions) {
        let downshift = self.target.is_some() && self.copying.is_empty();
        if !self.cleaning.due() || !(sample || downshift) {
            return;
        }
        self.counters.clean_rounds += 1;
        // A disk that is off was flushed before it was spun down (after its copies).
        let on = 0..self.p.gears[self.gear];
        let flushes = self.flush(on, Origin::Clean, out);
        if let Some(round) = self.cleaning.start(flushes) {
            self.cleaned(round, out);
        }
    }

    /// Flush disks `disks` for `origin` (the layer's own I/O); how many flushes went out.
    fn flush(&mut self, disks: Range<usize>, origin: Origin, out: &mut Actions) -> u32 {
        for disk in disks.clone() {
            let dev = self.devs[disk];
            let flush = |n| Io::own(n, Op::Flush, dev, 0, 0);
            let n = self.rename(Pending {
                origin,
                io: flush(0),
                write: None,
            });
            out.submit(flush(n));
        }
        disks.len() as u32
    }

    /// The round is back: the chunks it covered are logged clean, or, if a flush failed,
    /// are dirty again (their `Newer` record is still the log's last word on them).
    fn cleaned(&mut self, round: Round<(usize, u64), Side>, out: &mut Actions) {
        if !round.ok {
            self.counters.clean_round_errors += 1;
        }
        for (key, side) in round.covered {
            if !round.ok {
                self.dirty.insert(key, Dirty::logged(side));
                self.copy_failed(key);
            } else {
                self.log(
                    Record::Clean {
                        disk: key.0,
                        chunk: key.1,
                    },
                    out,
                );
            }
        }
    }

    /// Disks that leave when going from gear `from` down to `to`.
    fn leaving(&self, from: usize, to: usize) -> Range<usize> {
        self.p.gears[to]..self.p.gears[from]
    }

    /// Start the copies the gears need, and finish a downshift whose copies are done.
    fn pump(&mut self, now: Nanos, out: &mut Actions) {
        // A downshift: original-newer chunks of the leaving disks go to their replicas.
        // Otherwise: replica-newer chunks of disks that are on (or arriving, in a full
        // synchronization) go back to them.
        let (disks, from) = match (self.target, self.rising) {
            (Some(t), _) => (self.leaving(self.gear, t), Side::Original),
            (None, Some((r, _))) => (self.p.gears[0]..self.p.gears[r], Side::Replica),
            (None, None) if self.dirty.replicas() == 0 => return,
            (None, None) => (self.p.gears[0]..self.p.gears[self.gear], Side::Replica),
        };
        let room = self.p.copies.saturating_sub(self.copying.len());
        // `take` asks the scan for nothing once `room` chunks are found, or at all with
        // every copy slot taken (the pump runs at each write that ends).
        let start: Vec<((usize, u64), u64)> = self
            .dirty
            .range(disks, from)
            .filter(|(key, d)| {
                d.writes == 0 && !self.copying.contains_key(key) && !self.failed.contains(key)
            })
            .map(|(key, d)| (key, d.version))
            .take(room)
            .collect();
        for (key, version) in start {
            // Routing a copy's read can run this pump again (a replica level answers
            // something at once: its reply ends a write, which pumps): what that pump
            // started is not started twice, nor past the slots (swarm seed 11,577, two
            // copies of one chunk with a member failing every I/O, the second's end
            // finding no copy in flight).
            if self.copying.contains_key(&key) || self.copying.len() >= self.p.copies {
                continue;
            }
            self.copying.insert(key, Copying { from, version });
            let at = key.1 * self.p.chunk;
            let read = self.copier.start(CopyJob {
                tag: (key.0 as u64) << 48 | key.1,
                from_dev: self.devs[key.0],
                from: at,
                to_dev: self.devs[key.0],
                to: at,
                len: self.p.chunk as u32,
                priority: self.p.propagation_priority,
                fua: true,
            });
            self.route(now, Origin::Copy, read, Some(from), out);
        }
        if let Some((r, since)) = self.rising {
            // Synchronized when no copy is out and no arriving disk's replica is newer (a
            // host write meanwhile went to the replica: another round) — but for chunks
            // whose copy failed: they stay replica-newer, served from the replica and
            // re-tried after the switch as on demand (not before: `on_timer`). Waiting for
            // them would keep the array in the low gear for as long as the error lasts.
            let arriving = self.leaving(r, self.gear);
            let left = self.dirty.count(arriving.clone(), Side::Replica);
            let (failed, both) = if left > 0 && self.copying.is_empty() {
                let dirty = &self.dirty;
                let failed = self
                    .failed
                    .iter()
                    .filter(|&&k| {
                        arriving.contains(&k.0) && dirty.side_of(k) == Some(Side::Replica)
                    })
                    .count() as u64;
                // Chunks whose only write since they were clean is out to both sides need
                // no copy: after the switch they are served from the replica until it is
                // back, and clean then.
                let both = self
                    .twins
                    .values()
                    .filter(|t| {
                        arriving.contains(&t.key.0) && dirty.get(&t.key).is_some_and(|d| d.mirror)
                    })
                    .count() as u64;
                (failed, both)
            } else {
                (0, 0)
            };
            let synced = self.copying.is_empty() && failed + both == left;
            if synced {
                self.counters.sync_left_failed += failed;
                self.rising = None;
                self.counters.sync_ns += now.saturating_sub(since);
                self.counters.upshifts += 1;
                self.switch(now, r, out);
            }
            return;
        }
        let Some(t) = self.target else { return };
        let leaving = self.leaving(self.gear, t);
        // The leaving disks' chunks logged clean too, before the gear record.
        let clean = self.copying.is_empty()
            && self.cleaning.is_empty()
            && self.dirty.count(leaving.clone(), Side::Original) == 0;
        if !clean || self.settling > 0 {
            return;
        }
        if self.settle_mark != Some(self.original_writes) {
            // Make the leaving disks' own writes durable before they stop being read; a
            // write to an original meanwhile means another round.
            self.settle_mark = Some(self.original_writes);
            self.settling = self.flush(leaving, Origin::Settle, out);
            return;
        }
        self.switch(now, t, out);
        for disk in leaving {
            self.spin_down(now, disk, out);
        }
        self.target = None;
        self.settle_mark = None;
        self.counters.downshifts += 1;
    }

    fn spin_down(&mut self, now: Nanos, disk: usize, out: &mut Actions) {
        if let Some(sleep) = self.sleep[disk] {
            self.ration.cycled(now, disk);
            out.set_power(self.devs[disk], sleep);
        }
    }

    /// Account the time in the current gear, and switch to `gear` (logged if it changes).
    fn switch(&mut self, now: Nanos, gear: usize, out: &mut Actions) {
        self.time_in[self.gear] += now.saturating_sub(self.since);
        self.since = now;
        if gear != self.gear {
            self.gear = gear;
            self.log(Record::Gear(gear), out);
        }
    }

    /// The log's news: the recovered state, records durable (held writes go), a failure.
    fn step(&mut self, now: Nanos, s: Step, out: &mut Actions) {
        match s {
            Step::Recovered(r) => match self.shape.replay(&r.snapshot, &r.records) {
                Ok((gear, dirty, bad)) => {
                    for &(level, disk, page) in &bad {
                        if let Some(raid) = self.levels.get_mut(level) {
                            raid.insert_bad(disk, page);
                        }
                    }
                    self.counters.recovered_bad = bad.len() as u64;
                    self.bad = bad;
                    // No gear record yet: the gear the array started in, which its first
                    // records were written in.
                    self.time_in[self.gear] += now.saturating_sub(self.since);
                    self.since = now;
                    if let Some(g) = gear {
                        self.gear = g;
                    }
                    self.counters.recovered_dirty = dirty.len() as u64;
                    for (k, side) in dirty {
                        self.dirty.insert(k, Dirty::logged(side));
                    }
                    self.begin(now, out);
                }
                Err(e) => {
                    let e = format!("the metadata log on `{}` holds {e}", self.names[0]);
                    self.stop(&e, out);
                }
            },
            Step::Durable(upto) => {
                for (_, c) in journal::durable(&mut self.parked, upto, |p| p.0) {
                    self.busy.leave(now);
                    out.reply(c);
                }
                for h in journal::durable(&mut self.held, upto, |h| h.seq) {
                    self.dispatch(now, h.disk, h.side, h.x, h.io, out);
                    if let Some(t) = h.twin {
                        self.dispatch(now, h.disk, Side::Original, h.x, t, out);
                    }
                }
            }
            Step::Failed(e) => self.stop(&e, out),
            Step::Busy | Step::NotMine => {}
        }
    }

    /// The log cannot be used: report it, and answer every host request from now on with
    /// EIO (those waiting for recovery too), so a live client gets errors, not a hang.
    fn stop(&mut self, e: &str, out: &mut Actions) {
        out.fail(&format!("paraid: {e}"));
        self.broken = true;
        for io in std::mem::take(&mut self.early) {
            out.reply(Completion::answered(io, Status::IoError));
        }
    }

    /// The state is known: spin down the disks the gear does not use, serve the requests
    /// that waited, copy back what the replicas hold newer.
    fn begin(&mut self, now: Nanos, out: &mut Actions) {
        self.ready = true;
        for disk in self.p.gears[self.gear]..self.devs.len() {
            self.spin_down(now, disk, out);
        }
        for io in std::mem::take(&mut self.early) {
            self.on_request(now, io, out);
        }
        self.pump(now, out);
    }

    /// Up one gear: the arriving disks are spun up; on demand the gear switches at once,
    /// in a full synchronization once they hold what their replicas hold newer (`pump`).
    fn upshift(&mut self, now: Nanos, out: &mut Actions) {
        self.target = None;
        self.settle_mark = None;
        let from = self.gear;
        if self.p.full_sync {
            self.rising = Some((from + 1, now));
        } else {
            self.switch(now, from + 1, out);
            self.counters.upshifts += 1;
        }
        for disk in self.leaving(from + 1, from) {
            self.awake[disk] = false;
            if self.sleep[disk].is_some() {
                out.set_power(self.devs[disk], self.idle[disk]);
            }
        }
        self.pump(now, out);
    }
}

impl Function for Paraid {
    fn name(&self) -> &str {
        "paraid"
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        // Attaching again (live: with the images' sizes) starts over.
        self.levels.clear();
        self.sleep.clear();
        self.idle.clear();
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
            self.sleep.push(d.power.deepest_sleep());
            self.idle.push(d.power.idle);
            size = size.min(d.capacity);
        }
        self.awake = vec![false; devs.len()];
        self.twins.clear();
        if self.p.gears.last() != Some(&devs.len()) {
            return Err(format!(
                "gears: the highest gear must be every device ({}), got {:?}",
                devs.len(),
                self.p.gears
            ));
        }
        self.journal = None;
        if self.p.persist {
            // The log's size follows the geometry (a checkpoint has two bits a chunk), and
            // the array keeps out of it: disk 0 is shortened by the region.
            self.shape = Shape {
                low: self.p.gears[0],
                disks: devs.len(),
                chunks: size / self.p.chunk,
                gears: self.p.gears.len(),
            };
            let snapshot_bytes = self.shape.snapshot_bytes();
            let d0 = &devices[devs[0] as usize];
            let region =
                Region::at_end(d0, JournalConfig::region_len(snapshot_bytes, JOURNAL_BYTES))
                    .map_err(|e| format!("devices: {e}"))?;
            size = size.min(region.offset);
            self.journal = Some(
                Journal::new(JournalConfig {
                    region,
                    snapshot_bytes,
                    owner: OWNER.into(),
                    io_base: JOURNAL_BASE,
                    priority: 0,
                })
                .map_err(|e| format!("devices: {e} (a larger chunk_kib makes it smaller)"))?,
            );
        }
        let chunks = size / self.p.chunk;
        self.shape.chunks = chunks;
        // The regions are whole chunks within `chunks`, so every chunk a member I/O reaches
        // (and a recovered record: `Shape::replay` checks them) has a place in the list's
        // bitmap, which is laid out as a checkpoint's (copied into one as it is).
        self.dirty = DirtyList::new(self.p.gears[0], devs.len(), chunks);
        let sizes = regions(self.p.level, &self.p.gears, chunks).ok_or_else(|| {
            format!(
                "devices: {chunks} chunks of {} KiB a disk are too few for gears {:?}",
                self.p.chunk / 1024,
                self.p.gears
            )
        })?;
        let m = self.p.gears.len();
        for g in 0..m {
            self.base[g] = sizes[g + 1..].iter().sum::<u64>() * self.p.chunk;
            let view: Vec<DeviceInfo> = devices
                .iter()
                .map(|d| DeviceInfo {
                    capacity: sizes[g] * self.p.chunk,
                    ..d.clone()
                })
                .collect();
            let raid = Raid::new(
                self.names[..self.p.gears[g]].to_vec(),
                self.p.level,
                self.p.parity,
                self.p.chunk,
                self.p.assume_clean,
            )
            .merge(self.p.merge)
            .scratch_base(RAID_SCRATCH + ((g as u64) << 40));
            // The gears' bad pages go to the layer's log (persist), shared by the gears.
            let mut raid = if self.p.persist {
                raid.report_bad(MAX_BAD_PAGES / m as u64)
            } else {
                raid
            };
            raid.attach(&view)?;
            self.levels.push(raid);
        }
        self.member = vec![usize::MAX; devices.len()];
        for (k, &d) in devs.iter().enumerate() {
            self.member[d as usize] = k;
        }
        let rated = self
            .p
            .rated
            .or(devices[devs[0] as usize].power.rated_start_stop)
            .unwrap_or(DEFAULT_RATED_CYCLES);
        self.ration = Ration::new(devs.len(), rated, self.p.life, self.p.period);
        self.devs = devs;
        Ok(())
    }

    fn regions(&self) -> Vec<Region> {
        self.journal.iter().map(Journal::region).collect()
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        self.since = now;
        self.mix.push_back((0, 0));
        self.monitor.start(now, out);
        match self.journal.as_mut() {
            Some(j) => j.recover(out),
            None => self.begin(now, out),
        }
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        if self.broken {
            return out.reply(Completion::answered(io, Status::IoError));
        }
        if !self.ready {
            return self.early.push(io);
        }
        self.busy.enter(now);
        self.counters.host_ios += 1;
        if let Some(last) = self.mix.back_mut() {
            match io.op {
                Op::Read => last.0 += 1,
                Op::Write | Op::Discard => last.1 += 1,
                Op::Flush => {}
            }
        }
        let top = self.top();
        let mut acts = self.take_acts();
        self.levels[top].on_request(now, io, &mut acts);
        self.drive(now, top, &mut acts, out);
        self.pool.push(acts);
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        let ours = self
            .member
            .get(done.io.dev as usize)
            .is_some_and(|&m| m != usize::MAX);
        if ours && done.io.id.is_own() && !done.io.id.is_sub() {
            let n = done.io.id.0 & (IoId::SUB - 1);
            if (JOURNAL_BASE..JOURNAL_BASE + IO_NUMBERS).contains(&n) {
                if let Some(j) = self.journal.as_mut() {
                    let s = j.on_completion(&done, out);
                    self.step(now, s, out);
                }
                return;
            }
            return self.returned(now, done, out);
        }
        let top = self.top();
        let mut acts = self.take_acts();
        self.levels[top].on_completion(now, done, &mut acts);
        self.drive(now, top, &mut acts, out);
        self.pool.push(acts);
    }

    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        if let Some(j) = self.journal.as_mut() {
            let s = j.on_bytes(tag, bytes, out);
            self.step(now, s, out);
        }
    }

    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        if !self.monitor.fired(now, timer, out) || !self.ready {
            return;
        }
        self.switch(now, self.gear, out);
        self.flush_for_clean(true, out);
        // Failed copies whose wait is over (`copy_failed`) are re-tried at the sample, but
        // not while a full synchronization runs: its switch waits for no copy to be out,
        // and re-tried at every sample a failed copy slower than a sample (its source read
        // on a slow disk) kept one out for ever. The array stayed in the low gear, deaf to
        // the policy, re-copying to an absent member at every sample (swarm seed 702,825).
        // They go after the switch, as on demand (`pump`).
        self.samples += 1;
        if !self.backoff.is_empty() {
            // A chunk clean again by other means (a write to both sides) starts afresh.
            let dirty = &self.dirty;
            self.backoff.retain(|k, _| dirty.get(k).is_some());
        }
        if !self.failed.is_empty() && self.rising.is_none() {
            let (backoff, samples) = (&self.backoff, self.samples);
            self.failed
                .retain(|k| backoff.get(k).is_some_and(|&(_, due)| due > samples));
            self.pump(now, out);
        }
        let u = self.busy.sample(now) as f64 / self.p.shift.sample as f64;
        let (reads, writes) = self
            .mix
            .iter()
            .fold((0, 0), |(r, w), &(a, b)| (r + a, w + b));
        let share = if reads + writes > 0 {
            writes as f64 / (reads + writes) as f64
        } else {
            0.0
        };
        if self.mix.len() >= self.p.shift.window {
            self.mix.pop_front();
        }
        self.mix.push_back((0, 0));
        let gear = self.gear;
        let can_down = gear > 0 && {
            let leaving = self.leaving(gear, gear - 1);
            self.ration.allows(now, leaving)
        };
        let gears = self.p.gears.clone();
        match self.shifter.sample(u, &gears, gear, share, can_down) {
            // A full synchronization under way is let finish.
            Shift::Up | Shift::Down if self.rising.is_some() => {}
            Shift::Up => self.upshift(now, out),
            Shift::Down if self.target.is_none() => {
                // A leaving disk's chunk whose copy waits for its next try (`copy_failed`)
                // cannot reach its replica now: the downshift is abandoned at once, as that
                // copy's failure abandoned the last one. Waiting for the try would hold
                // back every other copy meanwhile (`pump` runs a downshift's alone).
                let leaving = self.leaving(gear, gear - 1);
                let dirty = &self.dirty;
                let waits = self
                    .failed
                    .iter()
                    .any(|&k| leaving.contains(&k.0) && dirty.side_of(k) == Some(Side::Original));
                if waits {
                    self.counters.abandoned += 1;
                } else {
                    self.target = Some(gear - 1);
                    self.settle_mark = None;
                    self.pump(now, out);
                }
            }
            Shift::Down | Shift::Stay => {
                if gear > 0 && !can_down {
                    self.counters.refused_by_ration += 1;
                }
            }
        }
    }

    fn volume(&self) -> Option<Volume> {
        Some(Volume {
            name: "paraid".into(),
            ..self.levels.last()?.volume()?
        })
    }

    /// One buffer per propagation copy under way, and the RAID levels' own.
    fn scratch_buffers(&self) -> usize {
        self.copying.len()
            + self
                .levels
                .iter()
                .map(|l| l.scratch_buffers())
                .sum::<usize>()
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.counters;
        let mut v: Vec<(String, f64)> = [
            ("gear", self.gear as f64),
            ("upshifts", c.upshifts as f64),
            ("downshifts", c.downshifts as f64),
            ("propagation_copies", c.copies as f64),
            ("propagation_errors", c.copy_errors as f64),
            ("downshifts_abandoned", c.abandoned as f64),
            ("upshift_sync_left_failed", c.sync_left_failed as f64),
            ("clean_rounds", c.clean_rounds as f64),
            ("clean_round_errors", c.clean_round_errors as f64),
            ("upshift_sync_s", c.sync_ns as f64 / 1e9),
            ("sync_writes_both", c.sync_writes_both as f64),
            ("sync_writes_clean", c.sync_writes_clean as f64),
            ("dirty_chunks", self.dirty.len() as f64),
            ("host_ios", c.host_ios as f64),
            ("samples_held_by_ration", c.refused_by_ration as f64),
            ("recovered_dirty_chunks", c.recovered_dirty as f64),
            ("writes_held_for_dirty_record", c.held_writes as f64),
            ("replies_held_for_bad_page", c.held_replies as f64),
            ("recovered_bad_pages", c.recovered_bad as f64),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
        for (g, t) in self.time_in.iter().enumerate() {
            v.push((format!("time_in_gear{g}_s"), *t as f64 / 1e9));
        }
        v
    }
}
