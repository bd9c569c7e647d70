//! FS2: dynamic replication in free disk space (Huang, Hung & Shin, SOSP 2005; Huang's
//! thesis ch. 5; digest `reference/thesis-fs2-failures.md`). docs/functions/fs2.md
//! documents every choice.
//!
//! One layer above one disk with a mechanical layout. Per host request to the disk:
//!
//! * **Free space** ([`freespace`]): blocks believed free — declared in the config, read
//!   from an ext2/3/4 image's bitmaps at start ([`ext`]), or learned from discards; a host
//!   write makes its blocks used.
//! * **Reads** are redirected by the thesis's rules: no block replicated → the originals;
//!   all replicated, the replicas contiguous and closer to the predicted head (the last
//!   block the layer sent to the disk) in the drive's own seek + rotational time → the
//!   replicas; only some replicated → the originals.
//! * **Writes** invalidate the replicas of the blocks they write; a write to a replica's
//!   block (the file system allocated it) drops that replica. **Discards** of originals
//!   invalidate their replicas; discards of replica blocks reclaim them.
//! * **Hot regions**: the disk is cut into regions; each epoch the region with the most
//!   host I/O becomes the target. Blocks read outside it are candidates, replicated in
//!   access order into contiguous free runs inside it (else in a neighbouring region within
//!   5 % of the capacity, else dropped), by copies at a lower device priority than the
//!   host's I/O ([`Copier`]): by default each is written from the bytes of the host read
//!   that made it a candidate (the thesis writes replicas "while still in memory"), else
//!   read from the original first.
//! * **Watermarks** on the free space left: below the low one replication stops and cold
//!   replicas go, below the critical one whole regions of replicas go, one at a time, until
//!   the low one is passed; replication resumes above the high one.
//! * **FS2-static** (`mode = "static"`, the thesis's `mkfs2`): the given blocks are
//!   replicated once, to the middle of the disk.
//!
//! **Safety.** A replica is only read while it holds its original's latest data: writes and
//! discards invalidate before they are sent; a copy overtaken by a write or discard of its
//! original is not installed; a host write or discard touching a block that a copy is
//! writing or a redirected read is reading waits for it; a freed replica block is not
//! reused while a read of it is out, nor before its drop's record is durable; a discard's
//! blocks are free only once it is back, less those a host write still out may land on.
//! After a crash the layer starts empty (every read goes to the originals), or with
//! `journal_kb > 0` from the table its journal kept (docs/functions/fs2.md, Persistence).

mod config;
pub mod ext;
pub mod freespace;
pub(crate) mod log;
pub mod table;
#[cfg(test)]
mod tests;

pub use config::{CopyFrom, Head, Mode, Params, KIND, MAX_DEGREE, MAX_REPLICA_BLOCKS};

use crate::placement::replica;
use freespace::FreeMap;
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::Arc;
use table::ReplicaTable;
use wattio_core::copy::{Copier, CopyJob, CopyStep};
use wattio_core::device::DeviceInfo;
use wattio_core::fanout::{Fanout, Step};
use wattio_core::flush_round::FlushRounds;
use wattio_core::function::{Actions, Function, TimerId};
use wattio_core::fxhash::{FxHashMap, FxHashSet};
use wattio_core::geometry::Geometry;
use wattio_core::io::{Buf, Completion, DeviceId, Io, IoId, Op, Status};
use wattio_core::journal::{Journal, JournalConfig, Step as LogStep};
use wattio_core::region::Region;
use wattio_core::time::Nanos;

/// FS2's block: the file system's (ext 4 KiB); replicas are made and tracked per block.
pub const BLOCK: u64 = 4096;
const NO_REGION: u32 = u32::MAX;
/// Free runs a candidate passes over, at most, looking for one apart from its original's
/// failure footprint (`avoid`): a bound on the work per candidate.
const MAX_APART_TRIES: usize = 16;
const EPOCH: TimerId = 1;
/// An invalidation whose record is not appended yet.
const NOT_APPENDED: u64 = u64::MAX;

/// Original blocks `orig..orig + n` of a copy.
#[derive(Clone, Copy, Debug)]
struct Piece {
    orig: u64,
    n: u64,
    /// A write or discard of these originals arrived after their bytes were taken.
    stale: bool,
}

/// A copy: its pieces' replicas lie one after another from `dest` (`n` blocks in all). A
/// copy from the disk has one piece; a copy from memory gathers the pieces whose replicas
/// were allocated one after another, and is written as one I/O.
#[derive(Clone, Debug)]
struct CopyState {
    pieces: SmallVec<[Piece; 2]>,
    dest: u64,
    n: u64,
    /// A copy from memory (written from host reads' bytes, no read of the original): its
    /// scratch buffer (its own-I/O number).
    scratch: Option<u64>,
}

impl CopyState {
    fn copies(&self, b0: u64, b1: u64) -> bool {
        self.pieces.iter().any(|p| p.orig < b1 && b0 < p.orig + p.n)
    }
}

/// A host discard out: the blocks it frees once back (those it covers whole, less those host
/// writes sent since have taken) and the replica blocks it reclaimed. Free before it is
/// back, a block could take a replica the discard then lands over, or that a host write
/// sent before the discard lands over: a live executor completes I/O in any order.
#[derive(Clone, Debug, Default)]
struct Discarding {
    free: SmallVec<[(u64, u64); 2]>,
    reclaimed: SmallVec<[u64; 2]>,
}

impl Discarding {
    /// A host write of `b0..b1` is sent: those blocks hold data.
    fn written(&mut self, b0: u64, b1: u64) {
        let mut kept = SmallVec::new();
        for &(a, z) in &self.free {
            if z <= b0 || b1 <= a {
                kept.push((a, z));
                continue;
            }
            if a < b0 {
                kept.push((a, b0));
            }
            if b1 < z {
                kept.push((b1, z));
            }
        }
        self.free = kept;
        self.reclaimed.retain(|b| !(b0..b1).contains(b));
    }
}

#[derive(Clone, Debug, Default)]
struct Counters {
    reads: u64,
    reads_unreplicated: u64,
    reads_partly_replicated: u64,
    reads_redirected: u64,
    reads_original_closer: u64,
    writes: u64,
    discards: u64,
    invalidated_by_write: u64,
    invalidated_by_discard: u64,
    replica_blocks_overwritten: u64,
    replica_blocks_reclaimed: u64,
    invalidated_cold: u64,
    invalidated_critical: u64,
    copies: u64,
    pieces_from_memory: u64,
    copies_stale: u64,
    /// Copies never written: every piece went stale before the write (of these, counted
    /// in `copies_stale` too).
    copies_dropped_stale: u64,
    copies_failed: u64,
    recovered_replicas: u64,
    log_records: u64,
    waited_for_log: u64,
    /// Drive FLUSHes sent so replicas could be logged, and those that failed (their
    /// replicas were dropped, never logged).
    flush_rounds: u64,
    flush_round_errors: u64,
    replicas_created: u64,
    candidates: u64,
    candidates_dropped_full: u64,
    candidates_dropped_no_space: u64,
    candidates_skipped: u64,
    deferred: u64,
    epochs: u64,
    target_changes: u64,
    suspensions: u64,
    resumptions: u64,
    critical_events: u64,
    /// Host reads the disk failed (EIO), at the originals or at replicas.
    read_errors: u64,
    /// Failed reads sent again: to the originals (their replicas failed), to a replica
    /// set (their originals failed).
    reads_retried_at_originals: u64,
    reads_retried_at_replicas: u64,
    /// Reads answered with data after a retry.
    reads_recovered: u64,
    /// Replicas dropped because a read of them failed.
    replicas_dropped_read_error: u64,
    /// Free runs passed over because a replica there would share its original's failure
    /// footprint (`avoid`), and candidates that found no run apart.
    runs_skipped_footprint: u64,
    candidates_dropped_footprint: u64,
}

/// The FS2 layer.
pub struct Fs2 {
    p: Params,
    layer: usize,
    name: String,
    disk: DeviceId,
    geom: Option<Arc<dyn Geometry>>,
    capacity: u64,
    blocks: u64,
    region_blocks: u64,
    /// Byte extents known free at start (config and ext image), applied at attach.
    initial_free: Vec<(u64, u64)>,
    /// Where the `ext_image`'s file system ends (bytes; 0 without one): the table's journal
    /// must lie past it, where the file system will never allocate.
    ext_end: u64,
    free: FreeMap,
    table: ReplicaTable,
    /// Predicted head position: the end of the last I/O sent to the disk.
    head: u64,
    /// Host reads per region this epoch (only the regions read).
    counts: FxHashMap<u32, u32>,
    target: u32,
    candidates: VecDeque<(u64, u64)>,
    queued: FxHashSet<u64>,
    copier: Copier,
    copies: FxHashMap<u64, CopyState>,
    /// Copies in flight that read the original from the disk (bounded by `copy_depth`).
    disk_copies: usize,
    /// Blocks of copies from memory gathering or in flight (bounded by `stash_blocks`).
    stashed: u64,
    /// Replica blocks allocated to copies not done yet (from memory or the disk): they
    /// count against `max_replica_blocks` with the table's.
    copy_blocks: u64,
    /// The copy from memory still gathering pieces (not sent yet), by tag.
    gathering: Option<u64>,
    /// Host reads whose blocks become candidates when they complete, with their bytes
    /// (`copy_from = "memory"`): id → blocks.
    pending: FxHashMap<IoId, (u64, u64)>,
    next_tag: u64,
    /// Wraps I/O an upper layer originated (own or sub ids) under this layer's sub-I/O ids,
    /// so they cannot collide with its own. Only wrapping uses it: a reply from it is
    /// always the upper layer's I/O.
    fanout: Fanout,
    /// Redirected reads out, by id: the read as received, its first replica block and its
    /// blocks. A redirected read keeps its id (ids below this layer are unique: a host id
    /// from above, or a wrapping sub-I/O id) and gets its offset back at completion.
    redirected: FxHashMap<IoId, (Io, u64, u64)>,
    /// Host reads out that failed before and were sent again, with their tries (bounded:
    /// at most one per copy of the blocks).
    retries: FxHashMap<IoId, u8>,
    /// Replica blocks with redirected reads out.
    busy: FxHashMap<u64, u32>,
    /// Freed blocks waiting for their reads to come back before they are free.
    quarantine: FxHashSet<u64>,
    /// Host writes and discards out: id → blocks.
    writes: FxHashMap<IoId, (u64, u64)>,
    /// Host discards out, by id (also in `writes`): what they free once back.
    discarding: FxHashMap<IoId, Discarding>,
    deferred: VecDeque<Io>,
    suspended: bool,
    /// The journal failed (its region holds something else, a write to it failed): the
    /// table can no longer be kept safe, so host I/O is answered with errors.
    failed: bool,
    cursor: u64,
    /// The replica table's journal (`journal_kb > 0`).
    journal: Option<Journal>,
    /// Until the journal is read back, host I/O waits.
    recovering: bool,
    /// Records to append at the end of the current call.
    records: Vec<[u8; 17]>,
    /// Blocks (originals and replicas) whose invalidation record is not yet durable, with
    /// its sequence number: a host write or discard of them waits, and a freed replica
    /// block is not reused, until it is (so the table on the device never points a read at
    /// a replica that is stale or reused).
    unlogged: FxHashMap<u64, u64>,
    /// Replicas made but not yet logged (persisted tables only): replica block → its
    /// original. A copy reads the original as the drive has it, which may be a host write
    /// still in the drive's volatile cache, and its FUA write makes that version durable at
    /// the replica only: a crash would then leave the two copies different, and reads would
    /// answer one or the other by head position (the swarm, seed 1661). So an ADD record
    /// waits for a FLUSH of the drive submitted after its copy completed: the flush round
    /// ([`Fs2::flush_round`]).
    unflushed: FlushRounds<u64, u64>,
    c: Counters,
}

/// The first own-I/O number of the FS2 layer at index `layer` of its stack. A copy's
/// number is also its scratch buffer's id, and scratch ids are global to the stack (the
/// checker and the live executor name a buffer by its id alone): two FS2 layers in one
/// stack numbering from the same base had one copy's read land in the other's buffer, which
/// then wrote it as data (found by the swarm, seed 2528). FS2 owns own-I/O numbers
/// `2^40 .. 2^46` (PARAID starts at 2^46, EXCES at 2^60), 2^34 per layer index mod 64.
pub fn copy_base(layer: usize) -> u64 {
    (1 << 40) | ((layer as u64 & 63) << 34)
}

impl Fs2 {
    /// Build from a checked configuration; reads the ext image if one is named. `layer` is
    /// the layer's index in its stack: it picks the layer's own-I/O numbers (see
    /// [`copy_base`]).
    pub fn new(p: Params, layer: usize) -> Result<Fs2, String> {
        let mut initial_free: Vec<(u64, u64)> = p
            .free
            .iter()
            .map(|&[o, l]| (o, o.saturating_add(l)))
            .collect();
        let mut ext_end = 0;
        if let Some(img) = &p.ext_image {
            let e = ext::free_space(img)?;
            ext_end = e.blocks.saturating_mul(e.block_size);
            initial_free.extend(e.extents);
        }
        Ok(Fs2 {
            layer,
            name: format!("fs2-{}", p.disk),
            disk: 0,
            geom: None,
            capacity: 0,
            blocks: 0,
            region_blocks: p.region_bytes / BLOCK,
            initial_free,
            ext_end,
            free: FreeMap::with_buckets(p.max_free_extents, p.region_bytes / BLOCK),
            table: ReplicaTable::new(p.region_bytes / BLOCK),
            head: 0,
            counts: FxHashMap::default(),
            target: NO_REGION,
            candidates: VecDeque::new(),
            queued: FxHashSet::default(),
            copier: Copier::new(copy_base(layer)),
            copies: FxHashMap::default(),
            disk_copies: 0,
            stashed: 0,
            copy_blocks: 0,
            gathering: None,
            pending: FxHashMap::default(),
            next_tag: 0,
            fanout: Fanout::new(),
            redirected: FxHashMap::default(),
            retries: FxHashMap::default(),
            busy: FxHashMap::default(),
            quarantine: FxHashSet::default(),
            writes: FxHashMap::default(),
            discarding: FxHashMap::default(),
            deferred: VecDeque::new(),
            suspended: false,
            failed: false,
            cursor: 0,
            journal: None,
            recovering: false,
            records: Vec::new(),
            unlogged: FxHashMap::default(),
            unflushed: FlushRounds::new(),
            c: Counters::default(),
            p,
        })
    }

    /// The replica table (tests, reports).
    pub fn table(&self) -> &ReplicaTable {
        &self.table
    }

    /// Blocks believed free and holding no replica.
    pub fn free_blocks(&self) -> u64 {
        self.free.total()
    }

    pub fn is_free(&self, block: u64) -> bool {
        self.free.is_free(block)
    }

    /// Replication is suspended by the low watermark.
    pub fn suspended(&self) -> bool {
        self.suspended
    }

    /// The current target region.
    pub fn target(&self) -> Option<u32> {
        (self.target != NO_REGION).then_some(self.target)
    }

    fn region(&self, block: u64) -> u32 {
        (block / self.region_blocks) as u32
    }

    /// Time to bring the head from its predicted position onto `offset`, starting at
    /// `now`: the drive's seek (head switch, settle) plus the rotational wait once there.
    pub fn access_cost(&self, now: Nanos, offset: u64) -> Nanos {
        let g = self.geom.as_ref().expect("attached");
        let Some(seek) = g.seek_time(self.head.min(self.capacity - 1), offset, false) else {
            return Nanos::MAX;
        };
        seek + g
            .rotational_latency(now + seek, offset)
            .unwrap_or(Nanos::MAX / 2)
    }

    fn send(&mut self, io: Io, out: &mut Actions) {
        if self.p.head == Head::Sent {
            self.head = io.end().min(self.capacity - 1);
        }
        out.submit(io);
    }

    /// A host write or discard is back. A discard's blocks are free now (after a failed
    /// one, what the disk holds is unknown: only its reclaimed replica blocks, the layer's
    /// own, are), but for those a host write still out may yet land on.
    fn host_io_done(&mut self, id: IoId, status: Status) {
        if self.writes.remove(&id).is_none() {
            return;
        }
        let Some(d) = self.discarding.remove(&id) else {
            return;
        };
        // What is still out over the disk, in block order (a host has few out; a discard
        // may span the disk, so its range is cut by them, not walked): host writes, whose
        // blocks hold data, and the other discards, which may yet land as a write may.
        // What this discard frees under another still out is handed to that one, free
        // when it is back (the swarm, seed 222,755: two discards of a block out, the
        // first back freed it, a copy took it, the second back freed it again, and a
        // second copy overwrote the first's replica).
        let mut out: SmallVec<[(u64, u64, Option<IoId>); 4]> = self
            .writes
            .iter()
            .map(|(w, &(a, z))| (a, z, self.discarding.contains_key(w).then_some(*w)))
            .collect();
        out.sort_unstable();
        if status == Status::Ok {
            for (a, z) in d.free {
                let mut start = a;
                for &(w0, w1, other) in &out {
                    if w1 <= start || z <= w0 {
                        continue;
                    }
                    if start < w0 {
                        self.free.insert(start, w0);
                    }
                    if let Some(o) = other.and_then(|o| self.discarding.get_mut(&o)) {
                        o.free.push((w0.max(start), w1.min(z)));
                    }
                    start = start.max(w1);
                }
                if start < z {
                    self.free.insert(start, z);
                }
            }
        }
        for b in d.reclaimed {
            match out.iter().find(|&&(a, z, _)| a <= b && b < z) {
                None => self.release(b),
                Some(&(_, _, Some(o))) => {
                    if let Some(o) = self.discarding.get_mut(&o) {
                        o.reclaimed.push(b);
                    }
                }
                // A host write took it.
                Some(&(_, _, None)) => {}
            }
        }
    }

    /// A block no longer holds a replica: free again (once no read of it is out).
    fn release(&mut self, b: u64) {
        if self.busy.contains_key(&b) || self.unlogged.contains_key(&b) {
            self.quarantine.insert(b);
        } else {
            self.free.insert(b, b + 1);
        }
    }

    /// A freed block waiting in quarantine is free once neither holds it: no read of it is
    /// out, and its drop's record is durable. Freed at the end of a read while the record is
    /// still out, a new replica could be written there and be durable while the journal on
    /// the disk still names the block the old original's replica: after a crash, a read of
    /// that original returns another block's data (the live power-cut trials).
    fn unquarantine(&mut self, b: u64) {
        if !self.busy.contains_key(&b)
            && !self.unlogged.contains_key(&b)
            && self.quarantine.remove(&b)
        {
            self.free.insert(b, b + 1);
        }
    }

    fn drop_original(&mut self, orig: u64) -> u64 {
        let mut reps = Vec::new();
        self.table.remove_original(orig, &mut reps);
        for r in &reps {
            self.unflushed.remove(r);
        }
        if !reps.is_empty() {
            // The original waits too: written before its replicas' drop is durable, a crash
            // could bring back a table that reads the new block's old replica.
            let mut blocks = reps.clone();
            blocks.push(orig);
            self.log(log::DROP_ORIGINAL, orig, 0, &blocks);
        }
        for &r in &reps {
            self.release(r);
        }
        reps.len() as u64
    }

    /// Drop one replica (its block was written, discarded, or the watermarks want it).
    fn drop_replica(&mut self, rep: u64) -> bool {
        let Some(orig) = self.table.remove_replica(rep) else {
            return false;
        };
        self.unflushed.remove(&rep);
        self.log(log::DROP_REPLICA, rep, 0, &[orig, rep]);
        true
    }

    /// Queue a journal record (persisted tables only); an invalidation's `blocks` wait for
    /// it to be durable.
    fn log(&mut self, kind: u8, a: u64, b: u64, blocks: &[u64]) {
        if self.journal.is_none() {
            return;
        }
        self.records.push(log::record(kind, a, b));
        for &x in blocks {
            self.unlogged.insert(x, NOT_APPENDED);
        }
    }

    /// Append the queued records (one group-committed FUA write), and checkpoint the whole
    /// table when the journal is full.
    fn flush_log(&mut self, out: &mut Actions) {
        self.flush_round(out);
        if let Err(e) = self.try_flush_log(out) {
            self.log_failed(&e, out);
        }
    }

    fn try_flush_log(&mut self, out: &mut Actions) -> Result<(), String> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        if !j.ready() {
            return Ok(());
        }
        if !self.records.is_empty() {
            let mut last = 0;
            for r in self.records.drain(..) {
                last = j.append(&r, out)?;
                self.c.log_records += 1;
            }
            for s in self.unlogged.values_mut() {
                if *s == NOT_APPENDED {
                    *s = last;
                }
            }
        }
        // Asked whether or not this call appended: the journal can fill while its earlier
        // records go out, and records waiting for room are durable only by a checkpoint
        // (seed 890 of the swarm hung on a write waiting for one).
        if j.wants_snapshot() {
            // Replicas waiting for their flush round are not durable yet.
            let unflushed = &self.unflushed;
            let snap = log::snapshot(
                self.table
                    .pairs()
                    .into_iter()
                    .filter(|(_, r)| !unflushed.contains(r)),
            );
            j.checkpoint(&snap, out)?;
        }
        Ok(())
    }

    /// Send a FLUSH of the drive for the replicas made since the last one (when none is
    /// out and the journal is in use), so their ADD records can follow.
    fn flush_round(&mut self, out: &mut Actions) {
        if !self.unflushed.due() || self.failed || self.recovering || self.journal.is_none() {
            return;
        }
        self.c.flush_rounds += 1;
        self.unflushed.start(1);
        out.submit(Io::own(self.flush_id(), Op::Flush, self.disk, 0, 0));
    }

    /// The own-I/O number of the flush round (one is out at a time): below the journal's
    /// numbers, far above the copies'.
    fn flush_id(&self) -> u64 {
        copy_base(self.layer) + (1 << 33) - 1
    }

    /// The flush round is back: the replicas it covered are logged, or, if it failed,
    /// dropped (never logged, so no record is needed to forget them).
    fn flushed(&mut self, ok: bool) {
        let Some(round) = self.unflushed.flushed(ok) else {
            return;
        };
        if !round.ok {
            self.c.flush_round_errors += 1;
        }
        for (r, o) in round.covered {
            if round.ok {
                self.log(log::ADD, o, r, &[]);
            } else if self.table.remove_replica(r).is_some() {
                self.release(r);
            }
        }
    }

    /// The journal cannot be used: the run stops (simulated) or the fault is kept (live),
    /// and host I/O waiting here — and all that comes after — is answered with an error
    /// rather than left waiting for a record that will never be durable.
    fn log_failed(&mut self, why: &str, out: &mut Actions) {
        self.failed = true;
        out.fail(&format!(
            "{}: the replica table's journal: {why}",
            self.name
        ));
        for io in std::mem::take(&mut self.deferred) {
            out.reply(Completion {
                io,
                status: Status::IoError,
                finished: 0,
                breakdown: Default::default(),
            });
        }
    }

    /// After an I/O completed or the journal spoke: retry what waited, re-check the
    /// watermarks, start copies, append what this call logged.
    fn settle(&mut self, now: Nanos, out: &mut Actions) {
        self.retry_deferred(now, out);
        self.watermarks(now);
        self.pump(now, out);
        self.flush_log(out);
    }

    /// What the journal said.
    fn log_step(&mut self, now: Nanos, step: LogStep, out: &mut Actions) {
        match step {
            LogStep::Recovered(r) => {
                if let Err(e) =
                    log::replay(&mut self.table, self.blocks, &r.snapshot, &r.records, now)
                {
                    self.table = ReplicaTable::new(self.p.region_bytes / BLOCK);
                    return self.log_failed(&format!("cannot be read back: {e}"), out);
                }
                // Replica blocks hold data: not free, whatever the config declares.
                for (_, rep) in self.table.pairs() {
                    self.free.remove(rep, rep + 1);
                }
                self.c.recovered_replicas = self.table.len() as u64;
                self.recovering = false;
            }
            LogStep::Durable(upto) => {
                let done: Vec<u64> = self
                    .unlogged
                    .iter()
                    .filter(|&(_, &s)| s <= upto)
                    .map(|(&b, _)| b)
                    .collect();
                for b in done {
                    self.unlogged.remove(&b);
                    self.unquarantine(b);
                }
            }
            LogStep::Failed(e) => self.log_failed(&e, out),
            LogStep::Busy | LogStep::NotMine => {}
        }
    }

    /// A host write or discard must wait: a copy is writing, or a redirected read is
    /// reading, one of its blocks.
    fn conflicts(&self, b0: u64, b1: u64) -> bool {
        (!self.busy.is_empty() && (b0..b1).any(|b| self.busy.contains_key(&b)))
            || (!self.unlogged.is_empty() && (b0..b1).any(|b| self.unlogged.contains_key(&b)))
            || self
                .copies
                .values()
                .any(|c| c.dest < b1 && b0 < c.dest + c.n)
    }

    /// A host write or discard of `b0..b1` is sent: copies of those blocks under way are
    /// not installed, and reads of them still out no longer stand for their bytes (a read
    /// a device serves concurrently with a write may return either version).
    fn mark_stale(&mut self, b0: u64, b1: u64) {
        for c in self.copies.values_mut() {
            for p in &mut c.pieces {
                if p.orig < b1 && b0 < p.orig + p.n {
                    p.stale = true;
                }
            }
        }
        if !self.pending.is_empty() {
            self.pending.retain(|_, &mut (a, z)| z <= b0 || b1 <= a);
        }
    }

    fn read(&mut self, now: Nanos, io: Io, b0: u64, b1: u64, out: &mut Actions) {
        self.c.reads += 1;
        if self.p.mode == Mode::Dynamic {
            let r = self.region(b0);
            let k = self.counts.entry(r).or_insert(0);
            *k = k.saturating_add(1);
        }
        let mut replicated = 0u64;
        if !self.table.is_empty() {
            for b in b0..b1 {
                replicated += self.table.touch(b, now) as u64;
            }
        }
        let n = b1 - b0;
        if replicated == 0 {
            self.c.reads_unreplicated += 1;
        } else if replicated < n {
            self.c.reads_partly_replicated += 1;
        } else if let Some(r0) = self.nearest_replicas(now, &io, b0, n) {
            self.c.reads_redirected += 1;
            return self.redirect(io, b0, r0, n, out);
        } else {
            self.c.reads_original_closer += 1;
        }
        if replicated < n && self.outside_target(b0, b1) {
            // Whole blocks only: a read's bytes can stand for its blocks only if it covers
            // them (else the blocks are copied from the disk). Nor while a host write or
            // discard of one of them is out: a device serving the two concurrently may
            // return either version, and a replica of the older one, installed after the
            // write has invalidated the blocks' replicas, would be read in place of the
            // newer (found by swarm seed 24,728). `mark_stale` covers the other order.
            let whole = io.offset.is_multiple_of(BLOCK) && io.end().is_multiple_of(BLOCK);
            let written =
                !self.writes.is_empty() && self.writes.values().any(|&(a, z)| a < b1 && b0 < z);
            if self.p.copy_from == CopyFrom::Memory && whole && !written {
                self.pending.insert(io.id, (b0, b1));
            } else {
                self.candidate(b0, b1);
            }
        }
        self.send(io, out);
    }

    /// Send read `io` of blocks `b0..b0 + n` to the replicas `r0..r0 + n`.
    fn redirect(&mut self, io: Io, b0: u64, r0: u64, n: u64, out: &mut Actions) {
        // The same read, at the replicas. Not a sub-I/O of a fan-out: `io` may already be a
        // wrapping sub-I/O, and a reply from a nested fan-out could not be told from the
        // upper layer's I/O by its id (both layers number their sub-I/Os from 0).
        let mut at = io;
        at.offset = r0 * BLOCK + (io.offset - b0 * BLOCK);
        self.redirected.insert(io.id, (io, r0, n));
        for b in r0..r0 + n {
            *self.busy.entry(b).or_insert(0) += 1;
        }
        self.send(at, out);
    }

    /// A host read came back failed (EIO). Send it again to another copy of its blocks and
    /// say so (true), or leave the error to go up (false). `from` is the replica set it
    /// read (first block, blocks), `None` if it read the originals.
    ///
    /// A replica is as current as its original while it is in the table (a write drops it
    /// before it is sent), so a failed replica read is sent to the originals, and a failed
    /// original read to a whole contiguous replica set, the nearest, as redirection would.
    /// The replicas a failed read touched are dropped (soft state; which sector failed is
    /// not known): a retry at the originals that fails again then finds no replica set of
    /// that kind, so a read is tried at most once per copy of its blocks.
    fn retry_read(
        &mut self,
        now: Nanos,
        io: Io,
        from: Option<(u64, u64)>,
        out: &mut Actions,
    ) -> bool {
        self.c.read_errors += 1;
        if !self.p.retry_failed_reads || self.failed {
            return false;
        }
        let tries = self.retries.entry(io.id).or_insert(0);
        if *tries > 2 * self.p.degree as u8 {
            return false;
        }
        *tries += 1;
        let (b0, b1) = (io.offset / BLOCK, io.end().div_ceil(BLOCK));
        match from {
            Some((r0, n)) => {
                for r in r0..r0 + n {
                    if self.drop_replica(r) {
                        self.release(r);
                        self.c.replicas_dropped_read_error += 1;
                    }
                }
                self.c.reads_retried_at_originals += 1;
                self.send(io, out);
                true
            }
            None => {
                let Some(r0) = self.replica_set(now, &io, b0, b1 - b0, true) else {
                    return false;
                };
                self.c.reads_retried_at_replicas += 1;
                self.redirect(io, b0, r0, b1 - b0, out);
                true
            }
        }
    }

    /// The first block of the contiguous replica set nearest the head, if one is nearer
    /// than the originals.
    fn nearest_replicas(&self, now: Nanos, io: &Io, b0: u64, n: u64) -> Option<u64> {
        self.replica_set(now, io, b0, n, false)
    }

    /// The first block of the contiguous replica set nearest the head; with `any` false,
    /// only if it is nearer than the originals.
    fn replica_set(&self, now: Nanos, io: &Io, b0: u64, n: u64, any: bool) -> Option<u64> {
        let mut best = (
            if any {
                Nanos::MAX
            } else {
                self.access_cost(now, io.offset)
            },
            None,
        );
        for k in 0..self.p.degree as usize {
            let Some(&r0) = self.table.get(b0).and_then(|e| e.replicas().get(k)) else {
                continue;
            };
            let contiguous = (1..n).all(|i| {
                self.table
                    .get(b0 + i)
                    .is_some_and(|e| e.replicas().get(k) == Some(&(r0 + i)))
            });
            if !contiguous {
                continue;
            }
            let cost = self.access_cost(now, r0 * BLOCK + (io.offset - b0 * BLOCK));
            if cost < best.0 || (any && best.1.is_none()) {
                best = (cost, Some(r0));
            }
        }
        best.1
    }

    /// Blocks read outside the target region are candidates (dynamic mode).
    fn outside_target(&self, b0: u64, b1: u64) -> bool {
        if self.p.mode != Mode::Dynamic || self.target == NO_REGION {
            return false;
        }
        let t = self.target as u64 * self.region_blocks;
        !(b0 < t + self.region_blocks && t < b1)
    }

    /// Candidates copied from the disk, queued in access order.
    fn candidate(&mut self, b0: u64, b1: u64) {
        let mut s = b0;
        while s < b1 {
            let n = (b1 - s).min(self.p.max_copy_blocks);
            if self.candidates.len() >= self.p.max_candidates {
                self.c.candidates_dropped_full += 1;
            } else if self.queued.insert(s) {
                self.c.candidates += 1;
                self.candidates.push_back((s, n));
            }
            s += n;
        }
    }

    fn write(&mut self, io: Io, b0: u64, b1: u64, out: &mut Actions) {
        if !self.table.is_empty() {
            for b in b0..b1 {
                self.c.invalidated_by_write += self.drop_original(b);
                if self.drop_replica(b) {
                    // The file system allocated a replica's block: it holds data now.
                    self.c.replica_blocks_overwritten += 1;
                }
            }
        }
        if self.wait_for_log(&io, b0, b1) {
            return;
        }
        self.c.writes += 1;
        self.free.remove(b0, b1);
        for d in self.discarding.values_mut() {
            d.written(b0, b1);
        }
        self.mark_stale(b0, b1);
        self.writes.insert(io.id, (b0, b1));
        self.send(io, out);
    }

    fn discard(&mut self, io: Io, b0: u64, b1: u64, out: &mut Actions) {
        if !self.table.is_empty() {
            for b in b0..b1 {
                self.c.invalidated_by_discard += self.drop_original(b);
                if self.drop_replica(b) {
                    // Free once the discard is back (`host_io_done`); kept with it also
                    // while it waits for the log below.
                    self.c.replica_blocks_reclaimed += 1;
                    self.discarding.entry(io.id).or_default().reclaimed.push(b);
                }
            }
        }
        if self.wait_for_log(&io, b0, b1) {
            return;
        }
        self.c.discards += 1;
        self.mark_stale(b0, b1);
        // Only blocks the discard covers whole are free, once it is back; until then not
        // even those free already (a discard out may land over a replica put there).
        let (f0, f1) = (io.offset.div_ceil(BLOCK), io.end() / BLOCK);
        let d = self.discarding.entry(io.id).or_default();
        if f0 < f1 {
            d.free.push((f0, f1));
            self.free.remove(f0, f1);
        }
        self.writes.insert(io.id, (b0, b1));
        self.send(io, out);
    }

    /// A write or discard whose invalidations are not durable yet waits for them (retried
    /// when the journal says they are).
    fn wait_for_log(&mut self, io: &Io, b0: u64, b1: u64) -> bool {
        if self.unlogged.is_empty() || !(b0..b1).any(|b| self.unlogged.contains_key(&b)) {
            return false;
        }
        self.c.waited_for_log += 1;
        self.deferred.push_back(*io);
        true
    }

    /// Blocks `s..s + n` where a new copy should go, or `None` (counted): replication is
    /// off, the table is full, a block has its replicas or one in the target already, a
    /// host write or discard, a copy or a redirected read of one is out, or no free run
    /// fits.
    fn destination(&mut self, s: u64, n: u64) -> Option<u64> {
        if self.table.len() as u64 + self.copy_blocks + n > self.p.max_replica_blocks {
            self.c.candidates_dropped_full += 1;
            return None;
        }
        let t = self.target;
        let deg = self.p.degree as usize;
        let rb = self.region_blocks;
        let skip = (s..s + n).any(|b| {
            self.table.get(b).is_some_and(|e| {
                e.replicas().len() >= deg || e.replicas().iter().any(|&r| r / rb == t as u64)
            })
        }) || self.writes.values().any(|&(a, z)| a < s + n && s < z)
            || self.copies.values().any(|c| c.copies(s, s + n))
            || (s..s + n).any(|b| self.busy.contains_key(&b));
        if skip || t == NO_REGION {
            self.c.candidates_skipped += 1;
            return None;
        }
        let dest = if self.p.avoid.is_none() {
            self.allocate(t, n)
        } else {
            self.allocate_apart(s, t, n)
        };
        if dest.is_none() {
            self.c.candidates_dropped_no_space += 1;
        }
        dest
    }

    /// [`allocate`](Fs2::allocate), skipping free runs where a block's replica would share
    /// its original's failure footprint (`avoid`): each such run is held aside while the
    /// next is tried, up to [`MAX_APART_TRIES`], then given back. Counted: runs skipped,
    /// and candidates that found none apart.
    fn allocate_apart(&mut self, s: u64, t: u32, n: u64) -> Option<u64> {
        let mut skipped: SmallVec<[u64; 8]> = SmallVec::new();
        let mut found = None;
        while skipped.len() < MAX_APART_TRIES {
            let Some(d) = self.allocate(t, n) else {
                break;
            };
            if self.apart(s, d, n) {
                found = Some(d);
                break;
            }
            self.c.runs_skipped_footprint += 1;
            skipped.push(d);
        }
        if found.is_none() && !skipped.is_empty() {
            self.c.candidates_dropped_footprint += 1;
        }
        for d in skipped {
            self.free.insert(d, d + n);
        }
        found
    }

    /// No block of `s..s + n` shares its failure footprint with its replica at
    /// `d..d + n`: every sector of each against every sector of the other (a block spans
    /// sectors of one or two tracks).
    fn apart(&self, s: u64, d: u64, n: u64) -> bool {
        let Some(g) = &self.geom else {
            return true;
        };
        let arcs = |b: u64| replica::block_arcs(g.as_ref(), b * BLOCK, BLOCK);
        (0..n).all(|i| match (arcs(s + i), arcs(d + i)) {
            (Some(a), Some(b)) => {
                let (a, b) = (a.iter().flatten(), b.iter().flatten());
                !a.clone()
                    .any(|x| b.clone().any(|y| self.p.avoid.shares_arcs(x, y)))
            }
            _ => false,
        })
    }

    /// A new copy of `n` blocks from `s` to `dest` (`scratch`: a copy from memory's
    /// buffer); its tag.
    fn new_copy(&mut self, s: u64, n: u64, dest: u64, scratch: Option<u64>) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        let piece = Piece {
            orig: s,
            n,
            stale: false,
        };
        self.copies.insert(
            tag,
            CopyState {
                pieces: smallvec::smallvec![piece],
                dest,
                n,
                scratch,
            },
        );
        self.c.copies += 1;
        self.copy_blocks += n;
        tag
    }

    /// The device half of copy `tag` (the read of a copy from the disk, the write of one
    /// from memory).
    fn copy_job(&self, tag: u64) -> CopyJob {
        let c = &self.copies[&tag];
        CopyJob {
            tag,
            from_dev: self.disk,
            from: c.pieces[0].orig * BLOCK,
            to_dev: self.disk,
            to: c.dest * BLOCK,
            len: (c.n * BLOCK) as u32,
            priority: self.p.copy_priority,
            // A persisted replica's record follows its copy: the copy must be durable
            // first.
            fua: self.journal.is_some(),
        }
    }

    /// Send the copy from memory that is gathering pieces, if one is; drop it if every
    /// piece went stale while it gathered (a host write or discard of each original), as a
    /// copy from the disk is dropped when its read is back: nothing of it would be used.
    fn send_gathered(&mut self, now: Nanos, out: &mut Actions) {
        let Some(tag) = self.gathering.take() else {
            return;
        };
        let c = &self.copies[&tag];
        let Some(id) = c.scratch else {
            return;
        };
        if c.pieces.iter().all(|p| p.stale) {
            self.c.copies_dropped_stale += 1;
            out.release(Buf::Scratch { id, offset: 0 });
            self.copy_done(now, tag, true);
            return;
        }
        let w = self.copier.start_filled(id, self.copy_job(tag));
        self.send(w, out);
    }

    /// Start copies from the disk while replication runs and the depth allows.
    fn pump(&mut self, now: Nanos, out: &mut Actions) {
        // Not before the recovered table has taken its blocks out of the free space.
        while !self.recovering && !self.suspended && self.disk_copies < self.p.copy_depth {
            let Some((s, n)) = self.candidates.pop_front() else {
                break;
            };
            self.queued.remove(&s);
            let Some(dest) = self.destination(s, n) else {
                continue;
            };
            let tag = self.new_copy(s, n, dest, None);
            self.disk_copies += 1;
            let io = self.copier.start(self.copy_job(tag));
            self.send(io, out);
            self.watermarks(now);
        }
    }

    /// A candidate read is back with its bytes (`copy_from = "memory"`): each piece of it
    /// is put into a scratch buffer before the read is answered, and written out of it to
    /// its replicas. Pieces whose replicas are allocated one after another (in access
    /// order, as the thesis lays them out) gather in one buffer and go as one write of up
    /// to `max_copy_kb`, sent when the next piece does not follow on, the buffer is full,
    /// a host write or discard needs its blocks, or the epoch ends: the page cache's
    /// write-back, which the thesis relies on to amortise replication over sequential
    /// writes. Past the stash bound, or while the table is recovering, a piece queues as a
    /// copy from the disk.
    fn copy_read_bytes(&mut self, now: Nanos, read: &Io, b0: u64, b1: u64, out: &mut Actions) {
        let mut s = b0;
        while s < b1 {
            let n = (b1 - s).min(self.p.max_copy_blocks);
            if self.suspended || !self.outside_target(s, s + n) {
                // Replication stopped, or the target moved onto these blocks.
            } else if self.recovering || self.stashed + n > self.p.stash_blocks {
                self.candidate(s, s + n);
            } else if let Some(dest) = self.destination(s, n) {
                self.c.pieces_from_memory += 1;
                self.stashed += n;
                let max = self.p.max_copy_blocks;
                let follows = self.gathering.filter(|t| {
                    let c = &self.copies[t];
                    c.dest + c.n == dest && c.n + n <= max
                });
                let tag = match follows {
                    Some(tag) => {
                        let c = self.copies.get_mut(&tag).expect("a gathering copy");
                        c.pieces.push(Piece {
                            orig: s,
                            n,
                            stale: false,
                        });
                        c.n += n;
                        self.copy_blocks += n;
                        tag
                    }
                    None => {
                        self.send_gathered(now, out);
                        let id = self.copier.reserve();
                        let tag = self.new_copy(s, n, dest, Some(id));
                        self.gathering = Some(tag);
                        tag
                    }
                };
                let c = &self.copies[&tag];
                let at = Buf::Scratch {
                    id: c.scratch.expect("a copy from memory"),
                    offset: ((c.n - n) * BLOCK) as u32,
                };
                out.xor(
                    at,
                    read.buf.at((s * BLOCK - read.offset) as u32),
                    (n * BLOCK) as u32,
                );
                if c.n == max {
                    self.send_gathered(now, out);
                }
                self.watermarks(now);
            }
            s += n;
        }
    }

    /// `n` contiguous free blocks in region `t`, else in a neighbouring region within
    /// `neighbour_fraction` of the capacity.
    fn allocate(&mut self, t: u32, n: u64) -> Option<u64> {
        // The free map is built over the regions (`with_buckets(…, region_blocks)`) and
        // no free run lies past the disk's end, so asking region `t` whole is asking
        // [t·rb, min((t+1)·rb, blocks)).
        if let Some(d) = self.free.take_in(t as usize, self.cursor, n) {
            self.cursor = d + n;
            return Some(d);
        }
        let rb = self.region_blocks;
        let reach = (self.p.neighbour_fraction * self.blocks as f64 / rb as f64) as u64;
        let regions = self.blocks.div_ceil(rb);
        for k in 1..=reach {
            for r in [(t as u64).checked_sub(k), Some(t as u64 + k)]
                .into_iter()
                .flatten()
                .filter(|&r| r < regions)
            {
                let lo = r * rb;
                if let Some(d) = self.free.take_in(r as usize, lo, n) {
                    return Some(d);
                }
            }
        }
        None
    }

    fn copy_done(&mut self, now: Nanos, tag: u64, ok: bool) {
        let Some(st) = self.copies.remove(&tag) else {
            return;
        };
        self.copy_blocks -= st.n;
        if st.scratch.is_some() {
            self.stashed -= st.n;
        } else {
            self.disk_copies -= 1;
        }
        if !ok {
            self.c.copies_failed += 1;
        } else if st.pieces.iter().any(|p| p.stale) {
            self.c.copies_stale += 1;
        }
        let mut dest = st.dest;
        for p in &st.pieces {
            for i in 0..p.n {
                if ok && !p.stale && self.table.add(p.orig + i, dest + i, now) {
                    self.c.replicas_created += 1;
                    if self.journal.is_some() {
                        self.unflushed.add(dest + i, p.orig + i);
                    }
                } else {
                    self.free.insert(dest + i, dest + i + 1);
                }
            }
            dest += p.n;
        }
    }

    /// The free-space watermarks (thesis Sec. 5.4, Table: 15 / 10 / 5 %).
    fn watermarks(&mut self, now: Nanos) {
        let level = |f: &Fs2| f.free.total() as f64 / f.blocks.max(1) as f64;
        if level(self) < self.p.critical && !self.table.is_empty() {
            self.c.critical_events += 1;
            while level(self) < self.p.low {
                let Some(r) = self.table.fullest_region() else {
                    break;
                };
                for rep in self.table.region_replicas(r) {
                    self.drop_replica(rep);
                    self.release(rep);
                    self.c.invalidated_critical += 1;
                }
            }
        }
        if level(self) < self.p.low {
            if !self.suspended {
                self.suspended = true;
                self.c.suspensions += 1;
                let cold = self
                    .table
                    .cold(now.saturating_sub(self.p.cold), self.p.cold_count);
                for o in cold {
                    self.c.invalidated_cold += self.drop_original(o);
                }
            }
        } else if self.suspended && level(self) > self.p.high {
            self.suspended = false;
            self.c.resumptions += 1;
        }
    }

    /// Host I/O that waited for a copy or a redirected read, in arrival order.
    fn retry_deferred(&mut self, now: Nanos, out: &mut Actions) {
        for _ in 0..self.deferred.len() {
            let Some(io) = self.deferred.pop_front() else {
                break;
            };
            self.host(now, io, out, false);
        }
    }

    fn host(&mut self, now: Nanos, io: Io, out: &mut Actions, fresh: bool) {
        if io.dev != self.disk
            || io.len == 0
            || io.end() > self.capacity
            || !(io.op.moves_data() || io.op == Op::Discard)
        {
            return out.submit(io);
        }
        if self.failed {
            return out.reply(Completion {
                io,
                status: Status::IoError,
                finished: now,
                breakdown: Default::default(),
            });
        }
        if self.recovering {
            self.deferred.push_back(io);
            return;
        }
        let (b0, b1) = (io.offset / BLOCK, io.end().div_ceil(BLOCK));
        if self.journal.as_ref().is_some_and(|j| {
            let r = j.region();
            io.offset < r.offset + r.len && r.offset < io.end()
        }) {
            // The table's own region is not the host's.
            return out.reply(Completion {
                io,
                status: Status::Invalid,
                finished: now,
                breakdown: Default::default(),
            });
        }
        if io.op != Op::Read
            && self.gathering.is_some_and(|t| {
                let c = &self.copies[&t];
                c.dest < b1 && b0 < c.dest + c.n
            })
        {
            // The file system wants blocks a gathering copy will write: send it, and the
            // write or discard waits for it as for any copy.
            self.send_gathered(now, out);
        }
        if io.op != Op::Read && self.conflicts(b0, b1) {
            if fresh {
                self.c.deferred += 1;
            }
            self.deferred.push_back(io);
            return;
        }
        match io.op {
            Op::Read => self.read(now, io, b0, b1, out),
            Op::Write => self.write(io, b0, b1, out),
            _ => self.discard(io, b0, b1, out),
        }
        self.watermarks(now);
    }
}

impl Function for Fs2 {
    fn name(&self) -> &str {
        &self.name
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let d = devices
            .iter()
            .find(|d| d.name == self.p.disk)
            .ok_or_else(|| {
                let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
                format!(
                    "disk: unknown device `{}` (devices: {})",
                    self.p.disk,
                    names.join(", ")
                )
            })?;
        self.geom = Some(d.require_geometry("fs2")?.clone());
        self.disk = d.id;
        self.capacity = d.capacity;
        self.blocks = d.capacity / BLOCK;
        if self.blocks == 0 {
            return Err(format!("disk: `{}` holds no 4 KiB block", d.name));
        }
        let regions = self.blocks.div_ceil(self.region_blocks);
        if regions >= NO_REGION as u64 {
            return Err(format!(
                "region_mb: {regions} regions on `{}` (fewer than 2^32 needed); use larger regions",
                d.name
            ));
        }
        for &(a, z) in &self.initial_free {
            let (f0, f1) = (a.div_ceil(BLOCK), (z / BLOCK).min(self.blocks));
            if f0 < f1 {
                self.free.insert(f0, f1);
            }
        }
        if self.p.journal_bytes > 0 {
            // Snapshot: 16 bytes a replica block, the table's bound.
            let snapshot_bytes = self.p.max_replica_blocks * 16;
            let len = JournalConfig::region_len(snapshot_bytes, self.p.journal_bytes);
            // The last blocks of the disk, the `layer mod 8`-th region from its end: several
            // FS2 layers on one disk (the swarm draws them) keep their tables apart.
            let slot = (self.layer % 8) as u64;
            let mut region = Region::at_end(d, len * (slot + 1))?;
            region.len = len;
            if region.offset < self.ext_end {
                // Free space now, but the file system may allocate it later and overwrite
                // the table (or the table its files).
                return Err(format!(
                    "journal_kb: the replica table's journal ({} bytes at offset {} of `{}`) lies inside the file system of ext_image (its first {} bytes); leave room past the file system or lower max_replica_blocks (16 bytes each)",
                    region.len, region.offset, d.name, self.ext_end
                ));
            }
            // The table's region (and what lies past it) is never free space.
            self.free.remove(region.offset / BLOCK, self.blocks);
            self.journal = Some(Journal::new(JournalConfig {
                region,
                snapshot_bytes,
                owner: "fs2-replica-table".into(),
                // Apart from the copies' numbers (2^34 per layer, copies use far fewer).
                io_base: copy_base(self.layer) + (1 << 33),
                priority: 0,
            })?);
        }
        Ok(())
    }

    fn regions(&self) -> Vec<Region> {
        self.journal.iter().map(|j| j.region()).collect()
    }

    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        let Some(j) = self.journal.as_mut() else {
            return;
        };
        let step = j.on_bytes(tag, bytes, out);
        self.log_step(now, step, out);
        self.settle(now, out);
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        if let Some(j) = self.journal.as_mut() {
            self.recovering = true;
            j.recover(out);
        }
        match self.p.mode {
            Mode::Dynamic => out.set_timer(EPOCH, now + self.p.epoch),
            Mode::Static => {
                // mkfs2: the given blocks, once, to the middle of the disk.
                self.target = self.region(self.blocks / 2);
                let list: Vec<[u64; 2]> = self.p.replicate.clone();
                for [o, l] in list {
                    let (b0, b1) = (
                        o / BLOCK,
                        o.saturating_add(l).div_ceil(BLOCK).min(self.blocks),
                    );
                    let mut s = b0;
                    while s < b1 {
                        let n = (b1 - s).min(self.p.max_copy_blocks);
                        if self.queued.insert(s) {
                            self.c.candidates += 1;
                            self.candidates.push_back((s, n));
                        }
                        s += n;
                    }
                }
            }
        }
        self.watermarks(now);
        self.pump(now, out);
        self.flush_log(out);
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        let io = if io.id.is_own() {
            let key = self.fanout.begin(io);
            self.fanout.sub(key, 0, io.len, io.dev, io.offset)
        } else {
            io
        };
        self.host(now, io, out, true);
        self.pump(now, out);
        self.flush_log(out);
    }

    fn on_completion(&mut self, now: Nanos, mut done: Completion, out: &mut Actions) {
        let id = done.io.id;
        if self.p.head == Head::Completed && done.io.dev == self.disk && done.io.op.moves_data() {
            self.head = done.io.end().min(self.capacity - 1);
        }
        if let Some(j) = self.journal.as_mut() {
            match j.on_completion(&done, out) {
                LogStep::NotMine => {}
                step => {
                    self.log_step(now, step, out);
                    return self.settle(now, out);
                }
            }
        }
        if id == IoId::own(self.flush_id()) && done.io.op == Op::Flush {
            self.flushed(done.status == Status::Ok);
            return self.settle(now, out);
        }
        let mut from = None;
        if let Some((io, r0, n)) = self.redirected.remove(&id) {
            done.io = io;
            from = Some((r0, n));
            for b in r0..r0 + n {
                if let Some(k) = self.busy.get_mut(&b) {
                    *k -= 1;
                    if *k == 0 {
                        self.busy.remove(&b);
                        self.unquarantine(b);
                    }
                }
            }
        }
        if let Some((b0, b1)) = self.pending.remove(&id) {
            // Before the reply: the read's buffer is the host's until it is answered.
            if done.status == Status::Ok {
                self.copy_read_bytes(now, &done.io, b0, b1, out);
            }
        }
        if done.io.op == Op::Read && !id.is_own() && done.io.dev == self.disk {
            if done.status == Status::IoError && self.retry_read(now, done.io, from, out) {
                return self.settle(now, out);
            }
            if !self.retries.is_empty() && self.retries.remove(&id).is_some() {
                self.c.reads_recovered += (done.status == Status::Ok) as u64;
            }
        }
        if id.is_sub() {
            self.host_io_done(id, done.status);
            if let Step::Reply(c) = self.fanout.complete(&done) {
                out.reply(c);
            }
        } else if id.is_own() {
            match self.copier.complete(&done, out) {
                CopyStep::Write(w) => {
                    let tag = self.copier.job(&w).map(|j| j.tag);
                    let stale = tag
                        .and_then(|t| self.copies.get(&t))
                        .is_none_or(|c| c.pieces.iter().all(|p| p.stale));
                    if stale {
                        self.c.copies_dropped_stale += 1;
                        self.copier.abandon(&w, out);
                        if let Some(t) = tag {
                            self.copy_done(now, t, true);
                        }
                    } else {
                        self.send(w, out);
                    }
                }
                CopyStep::Done { job, status } => {
                    self.copy_done(now, job.tag, status == Status::Ok)
                }
                CopyStep::NotMine => {}
            }
        } else {
            self.host_io_done(id, done.status);
            out.reply(done);
        }
        self.settle(now, out);
    }

    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        if timer != EPOCH {
            return;
        }
        self.c.epochs += 1;
        if let Some((&r, _)) = self
            .counts
            .iter()
            .max_by_key(|&(&r, &k)| (k, std::cmp::Reverse(r)))
        {
            if r != self.target {
                self.target = r;
                self.c.target_changes += 1;
                self.cursor = r as u64 * self.region_blocks;
            }
        }
        self.counts.clear();
        out.set_timer(EPOCH, now + self.p.epoch);
        self.send_gathered(now, out);
        self.pump(now, out);
        self.flush_log(out);
    }

    /// One buffer per copy under way: read from the disk, or filled from a host read's
    /// bytes and waiting in the stash or the open gathering write.
    fn scratch_buffers(&self) -> usize {
        self.copies.len()
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let c = &self.c;
        [
            ("reads", c.reads),
            ("reads_unreplicated", c.reads_unreplicated),
            ("reads_partly_replicated", c.reads_partly_replicated),
            ("reads_redirected", c.reads_redirected),
            ("reads_original_closer", c.reads_original_closer),
            ("writes", c.writes),
            ("discards", c.discards),
            ("invalidated_by_write", c.invalidated_by_write),
            ("invalidated_by_discard", c.invalidated_by_discard),
            ("replica_blocks_overwritten", c.replica_blocks_overwritten),
            ("replica_blocks_reclaimed", c.replica_blocks_reclaimed),
            ("invalidated_cold", c.invalidated_cold),
            ("invalidated_critical", c.invalidated_critical),
            ("copies", c.copies),
            ("pieces_from_memory", c.pieces_from_memory),
            ("copies_stale", c.copies_stale),
            ("copies_dropped_stale", c.copies_dropped_stale),
            ("copies_failed", c.copies_failed),
            ("recovered_replicas", c.recovered_replicas),
            ("log_records", c.log_records),
            ("waited_for_log", c.waited_for_log),
            ("flush_rounds", c.flush_rounds),
            ("flush_round_errors", c.flush_round_errors),
            ("replicas_created", c.replicas_created),
            ("candidates", c.candidates),
            ("candidates_dropped_full", c.candidates_dropped_full),
            ("candidates_dropped_no_space", c.candidates_dropped_no_space),
            ("candidates_skipped", c.candidates_skipped),
            ("deferred", c.deferred),
            ("epochs", c.epochs),
            ("target_changes", c.target_changes),
            ("suspensions", c.suspensions),
            ("resumptions", c.resumptions),
            ("critical_events", c.critical_events),
            ("read_errors", c.read_errors),
            ("reads_retried_at_originals", c.reads_retried_at_originals),
            ("reads_retried_at_replicas", c.reads_retried_at_replicas),
            ("reads_recovered", c.reads_recovered),
            ("replicas_dropped_read_error", c.replicas_dropped_read_error),
            ("runs_skipped_footprint", c.runs_skipped_footprint),
            (
                "candidates_dropped_footprint",
                c.candidates_dropped_footprint,
            ),
            ("replica_blocks", self.table.len() as u64),
            ("free_blocks", self.free.total()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v as f64))
        .collect()
    }
}
