//! A function's metadata log on a device: records of bytes the function generates, written
//! through ordinary I/O and read back after a restart or a crash.
//!
//! A wattio function never sees bytes, so on its own it can write blocks but never write
//! bytes it generates nor read back what it wrote. [`Journal`] is the sans-I/O helper that
//! closes the gap, written once for every function that persists state (a RAID's
//! write-intent bitmap, a cache's map, a replica table). It turns records into
//! `Action::Fill` + `Action::Submit` (FUA writes out of its own scratch buffers) and, at
//! start, reads its region back (`Submit` of a read, then `Action::Take`), hands the
//! function the state that survived, and continues the log after it.
//!
//! # On the device (one [`Region`], whole 4 KiB blocks; details in `docs/metadata.md`)
//!
//! ```text
//! block 0, 1          two alternating headers (like md's superblock events counter): the
//!                     valid one with the highest epoch wins; each fits one 512-byte
//!                     sector, so a torn header write leaves the old or the new one whole
//! 2 snapshot slots    the function's checkpoint, `snapshot_bytes` each; a header names the
//!                     slot, the length and the CRC32C of its snapshot
//! journal             records from its start: magic, length, sequence number, epoch,
//!                     CRC32C of header and payload; each write starts on a block and is
//!                     padded with zeros to the next one
//! ```
//!
//! Recovery takes the best header, checks its snapshot's CRC, then reads records from the
//! journal's start while each has the expected sequence number and a valid CRC: the first
//! that does not (a torn or corrupt record at the tail, a stale one from before a
//! checkpoint) ends the log. Every start then writes a new header (epoch + 1) that records
//! where the valid records end (`tail`), and records after `tail` must carry the header's
//! epoch: so a record of a write that was lost at a crash can never come back to life after
//! the log has moved past it.
//!
//! # Durability and order
//!
//! One log write is out at a time, always with FUA: a record is durable when the write
//! carrying it completes ([`Step::Durable`] with its sequence number); records appended
//! meanwhile go together in the next write (group commit). A checkpoint writes the
//! snapshot into the slot the current header does not use, then the header (both FUA);
//! the journal then restarts at its first block. Records that do not fit in what is left of
//! the journal wait, and [`Journal::wants_snapshot`] turns true: the function hands a
//! snapshot of its state to [`Journal::checkpoint`], which covers every record appended
//! before the call.

use crate::function::Actions;
use crate::io::{Buf, Completion, Io, IoId, Op, Status};
use crate::region::{Region, REGION_ALIGN};

mod crc;
pub use crc::crc32c;

#[cfg(test)]
mod tests;

const BLOCK: u64 = REGION_ALIGN;
const HEADER_MAGIC: &[u8; 8] = b"WATTIOLG";
const VERSION: u32 = 1;
/// The header's bytes in its block (one sector: written atomically).
const HEADER_BYTES: usize = 512;
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"WJR1");
/// A record's header: magic, payload length, sequence number, epoch, CRC32C, reserved.
const RECORD_HEADER: usize = 32;
/// The longest owner name a header keeps.
pub const OWNER_BYTES: usize = 32;
/// A header's label: the function's own identity for a log beyond its owner name.
pub const LABEL_BYTES: usize = 16;
/// Where the label sits in a header (after the owner; zeros in headers written before
/// labels, which read back as no label).
const LABEL_AT: usize = 72 + OWNER_BYTES;
/// The largest region: recovery reads it whole, in one I/O.
pub const MAX_REGION: u64 = 256 << 20;
/// The most a single log write carries.
const MAX_WRITE: u64 = 1 << 20;
/// An identity a function draws for what its logs belong to (a RAID's array, an EXCES
/// pair), from a build's nonce: SplitMix64's finalizer, never 0 (a zero label is none).
pub fn new_id(nonce: u64) -> u64 {
    let mut z = nonce.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1)
}

/// Own-I/O numbers a journal uses: `io_base .. io_base + IO_NUMBERS`.
pub const IO_NUMBERS: u64 = 1 << 20;

/// Where a journal lives and what it is called.
#[derive(Clone, Debug, PartialEq)]
pub struct JournalConfig {
    pub region: Region,
    /// The largest snapshot the function will checkpoint (rounded up to 4 KiB blocks; two
    /// slots of it are reserved).
    pub snapshot_bytes: u64,
    /// Who owns the log (e.g. `raid5-bitmap`): written in the header and checked at
    /// recovery, so a function never adopts another's log. At most [`OWNER_BYTES`] bytes.
    pub owner: String,
    /// First own-I/O number (and scratch buffer id) the journal uses; it uses
    /// [`IO_NUMBERS`] of them. Keep them apart from the function's other own I/O.
    pub io_base: u64,
    /// Device-queue priority of the log's I/O.
    pub priority: i8,
}

impl JournalConfig {
    /// The smallest region for `snapshot_bytes` and a journal of `journal_bytes`.
    pub fn region_len(snapshot_bytes: u64, journal_bytes: u64) -> u64 {
        2 * BLOCK
            + 2 * snapshot_bytes.div_ceil(BLOCK) * BLOCK
            + journal_bytes.div_ceil(BLOCK).max(1) * BLOCK
    }
}

/// What survived on the device: the state to rebuild.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovery {
    /// The last checkpoint (empty if none yet).
    pub snapshot: Vec<u8>,
    /// The records appended after it that survived, in order.
    pub records: Vec<Vec<u8>>,
    /// Sequence number of the first of `records` (records are numbered from 1).
    pub first_seq: u64,
    /// The region was blank (all zeros): a new log was formatted.
    pub fresh: bool,
    /// Something that looked like a record followed the last valid one and was ignored (a
    /// write torn or lost at a crash, or corruption).
    pub torn_tail: bool,
    /// The header epoch the log continues with.
    pub epoch: u64,
    /// The label the log's header carried (zeros: none — a new log, or one written before
    /// labels). See [`Journal::set_label`].
    pub label: [u8; LABEL_BYTES],
}

/// What a completion or bytes meant to the journal.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Not the journal's.
    NotMine,
    /// Taken; nothing for the function yet.
    Busy,
    /// Recovery is over: rebuild the state from this. Appends may be made from now on
    /// (they are written once the new header is durable).
    Recovered(Recovery),
    /// Every record with a sequence number up to this one is durable.
    Durable(u64),
    /// The log cannot be used: the message says why (the region holds something else, the
    /// snapshot is corrupt, an I/O failed). The journal stops; the function should stop
    /// the run ([`Actions::fail`]).
    Failed(String),
}

/// Take out of `waiting` what a [`Step::Durable`]`(upto)` releases: every item whose
/// record's sequence number (`seq`) is at most `upto`, in the order they were added (the
/// replies and writes a function holds until the records they depend on are durable).
pub fn durable<T>(waiting: &mut Vec<T>, upto: u64, seq: impl Fn(&T) -> u64) -> Vec<T> {
    waiting.extract_if(.., |x| seq(x) <= upto).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not started: `recover` first.
    New,
    /// The region's read is out (or its bytes are awaited).
    Reading,
    Ready,
    Failed,
}

/// The log write in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writing {
    /// Records up to `last`, ending at journal byte `end`.
    Records { last: u64, end: u64 },
    /// A checkpoint's snapshot into `slot`, covering records up to `covered`.
    Snapshot {
        slot: u32,
        len: u32,
        crc: u32,
        covered: u64,
    },
    /// A header; a checkpoint's covers records up to `covered` and restarts the journal.
    Header { hdr: Header, covered: Option<u64> },
}

/// A header as decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    epoch: u64,
    region_len: u64,
    snapshot_slot_bytes: u64,
    snap_slot: u32,
    snap_len: u32,
    snap_crc: u32,
    /// Sequence number of the first record after the snapshot.
    start_seq: u64,
    /// Records up to this number may carry any earlier epoch; later ones, this header's.
    tail_seq: u64,
    owner: [u8; OWNER_BYTES],
    label: [u8; LABEL_BYTES],
}

/// What a header slot holds.
enum Slot {
    Blank,
    Valid(Header),
    /// The header magic with a bad CRC, or an unknown version.
    Corrupt(String),
    /// Not zeros and not a wattio header.
    Foreign,
}

/// A function's metadata log. See the module docs.
pub struct Journal {
    cfg: JournalConfig,
    snap_slot_bytes: u64,
    /// Journal area: byte offset in the region, and length.
    area: u64,
    area_len: u64,
    phase: Phase,
    hdr: Header,
    /// Header slot the current header is in.
    hdr_slot: u32,
    next_seq: u64,
    /// Next journal byte to write (block-aligned).
    pos: u64,
    queue: Vec<(u64, Vec<u8>)>,
    /// The queued records' bytes as written (headers included).
    queued_bytes: u64,
    snapshot: Option<(Vec<u8>, u64)>,
    writing: Option<(u64, Writing)>,
    /// A header to write before anything else (after recovery).
    header_due: bool,
    durable: u64,
    next_io: u64,
    stats: JournalStats,
    /// The epoch of the header recovery found (0: none): a later one is this run's.
    found_epoch: u64,
    /// Recovery failed because the region holds something that is not a wattio log (a
    /// header block neither zeros nor a wattio header): see [`Journal::adopt_foreign`].
    foreign: bool,
}

/// What a journal did, for a function's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalStats {
    pub records: u64,
    pub writes: u64,
    pub bytes_written: u64,
    pub checkpoints: u64,
}

impl Journal {
    /// Check the layout: a region of whole blocks within [`MAX_REGION`], room for two
    /// headers, two snapshot slots and at least one journal block; an owner name that fits.
    pub fn new(cfg: JournalConfig) -> Result<Journal, String> {
        let r = cfg.region;
        let snap = cfg.snapshot_bytes.div_ceil(BLOCK) * BLOCK;
        if cfg.owner.is_empty() || cfg.owner.len() > OWNER_BYTES {
            return Err(format!(
                "metadata log owner `{}`: expected 1 to {OWNER_BYTES} bytes",
                cfg.owner
            ));
        }
        if !r.len.is_multiple_of(BLOCK) || !r.offset.is_multiple_of(BLOCK) || r.len > MAX_REGION {
            return Err(format!(
                "metadata log `{}`: region bytes {}..{} must be whole 4096-byte blocks, at most {MAX_REGION} bytes",
                cfg.owner,
                r.offset,
                r.end()
            ));
        }
        let fixed = 2 * BLOCK + 2 * snap;
        if r.len < fixed + BLOCK {
            return Err(format!(
                "metadata log `{}`: a region of {} bytes holds no journal after two headers and two {snap}-byte snapshot slots (at least {} bytes)",
                cfg.owner,
                r.len,
                fixed + BLOCK
            ));
        }
        if cfg
            .io_base
            .checked_add(IO_NUMBERS)
            .is_none_or(|e| e > IoId::SUB)
        {
            return Err(format!(
                "metadata log `{}`: own-I/O numbers {}.. pass 2^62",
                cfg.owner, cfg.io_base
            ));
        }
        let mut owner = [0; OWNER_BYTES];
        owner[..cfg.owner.len()].copy_from_slice(cfg.owner.as_bytes());
        Ok(Journal {
            snap_slot_bytes: snap,
            area: fixed,
            area_len: r.len - fixed,
            phase: Phase::New,
            hdr: Header {
                epoch: 0,
                region_len: r.len,
                snapshot_slot_bytes: snap,
                snap_slot: 0,
                snap_len: 0,
                snap_crc: crc32c(0, &[]),
                start_seq: 1,
                tail_seq: 0,
                owner,
                label: [0; LABEL_BYTES],
            },
            hdr_slot: 1,
            next_seq: 1,
            pos: 0,
            queue: Vec::new(),
            queued_bytes: 0,
            snapshot: None,
            writing: None,
            header_due: false,
            durable: 0,
            next_io: 0,
            stats: JournalStats::default(),
            found_epoch: 0,
            foreign: false,
            cfg,
        })
    }

    /// The label every header written from now on carries: an identity the function gives
    /// the log beyond its owner name (a RAID's array id and the member holding this copy,
    /// as md's superblock carries the array's UUID and the device's role), returned by the
    /// next recovery ([`Recovery::label`]). Set before [`recover`](Self::recover), it is
    /// what a new log is formatted with — and what a log without one (written before
    /// labels) takes — while a log's own label is kept; set after, it replaces the log's
    /// from the next header written (a checkpoint's). The journal never compares labels:
    /// what a foreign one means is the function's to decide.
    pub fn set_label(&mut self, label: [u8; LABEL_BYTES]) {
        self.hdr.label = label;
    }

    /// The region to return from [`Function::regions`](crate::Function::regions).
    pub fn region(&self) -> Region {
        self.cfg.region
    }

    pub fn stats(&self) -> JournalStats {
        self.stats
    }

    /// Recovery is over and the log has not failed.
    pub fn ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// A header this run wrote — recovery's, at least — is on the device: the log is
    /// formatted there (a new one) and names this run's epoch.
    pub fn header_landed(&self) -> bool {
        self.phase == Phase::Ready && self.hdr.epoch > self.found_epoch
    }

    /// The number of the last record appended (or covered by a checkpoint): 0 if none.
    pub fn last(&self) -> u64 {
        self.next_seq - 1
    }

    /// The highest sequence number known durable.
    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// Appended records wait for room in the journal: hand a snapshot to
    /// [`checkpoint`](Self::checkpoint). Checked after each [`append`](Self::append), this
    /// looks ahead: it is true as soon as the queued records will not all fit once the
    /// write in flight lands (the group commits that follow are planned exactly as they will
    /// be made), so a function that asks only after appending never leaves a record waiting
    /// for a room no completion will make.
    pub fn wants_snapshot(&self) -> bool {
        if self.snapshot.is_some() || self.phase != Phase::Ready {
            return false;
        }
        let mut pos = match self.writing {
            Some((_, Writing::Records { end, .. })) => end,
            // A checkpoint in flight restarts the journal at its first block.
            Some((_, Writing::Snapshot { .. }))
            | Some((
                _,
                Writing::Header {
                    covered: Some(_), ..
                },
            )) => 0,
            _ => self.pos,
        };
        // Asked after every append: O(1) while the queue fits one group commit (it is one
        // group then, which fits exactly when the total does); the plan below otherwise.
        if self.queued_bytes <= MAX_WRITE {
            return pos + self.queued_bytes > self.area_len;
        }
        let mut from = 0;
        while from < self.queue.len() {
            let (taken, bytes) = self.group(pos, from);
            if taken == 0 {
                return true;
            }
            from += taken;
            pos += bytes.div_ceil(BLOCK) * BLOCK;
        }
        false
    }

    /// The group commit of queued records from `from` written at journal byte `pos`: how
    /// many records and how many bytes (up to [`MAX_WRITE`]; a longer record goes alone;
    /// none when the next does not fit before the area's end).
    fn group(&self, pos: u64, from: usize) -> (usize, u64) {
        let room = self.area_len - pos.min(self.area_len);
        let (mut taken, mut bytes) = (0, 0);
        for (_, r) in &self.queue[from..] {
            let grown = bytes + Self::record_len(r);
            if grown > room || (taken > 0 && grown > MAX_WRITE) {
                break;
            }
            bytes = grown;
            taken += 1;
        }
        (taken, bytes)
    }

    /// Start: read the region back (call from `on_start`). The outcome comes as
    /// [`Step::Recovered`] (or [`Step::Failed`]) from [`on_bytes`](Self::on_bytes).
    pub fn recover(&mut self, out: &mut Actions) {
        self.phase = Phase::Reading;
        let r = self.cfg.region;
        let io = self.io(Op::Read, r.offset, r.len as u32);
        out.submit(io);
    }

    /// Add a record; returns its sequence number ([`Step::Durable`] says when it is on the
    /// device). Only once recovery is over ([`Step::Recovered`]): the numbers continue the
    /// recovered log's.
    pub fn append(&mut self, record: &[u8], out: &mut Actions) -> Result<u64, String> {
        self.usable()?;
        if Self::record_len(record) > self.area_len {
            return Err(format!(
                "metadata log `{}`: a record of {} bytes exceeds the journal ({} bytes)",
                self.cfg.owner,
                record.len(),
                self.area_len
            ));
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push((seq, record.to_vec()));
        self.queued_bytes += Self::record_len(record);
        self.stats.records += 1;
        self.pump(out);
        Ok(seq)
    }

    /// Checkpoint: `snapshot` is the function's whole state, covering every record appended
    /// so far; the journal restarts after it. Returns the sequence number it covers
    /// ([`Step::Durable`] of it when the checkpoint is on the device).
    pub fn checkpoint(&mut self, snapshot: &[u8], out: &mut Actions) -> Result<u64, String> {
        self.usable()?;
        if snapshot.len() as u64 > self.snap_slot_bytes {
            return Err(format!(
                "metadata log `{}`: a snapshot of {} bytes exceeds its slot ({} bytes)",
                self.cfg.owner,
                snapshot.len(),
                self.snap_slot_bytes
            ));
        }
        let covered = self.next_seq - 1;
        // Queued records are in the snapshot: they need no write of their own.
        self.queue.clear();
        self.queued_bytes = 0;
        self.snapshot = Some((snapshot.to_vec(), covered));
        self.pump(out);
        Ok(covered)
    }

    /// Checkpoint `snapshot` as the state after record `last` — at least the last record
    /// appended — and number the next record `last + 1`: so copies of one log kept on
    /// several devices (an array's members, as md keeps its superblock and bitmap on each)
    /// continue with the same numbers after a restart that found them at different ends.
    /// The numbers skipped are never written: the checkpoint covers them.
    pub fn checkpoint_through(
        &mut self,
        last: u64,
        snapshot: &[u8],
        out: &mut Actions,
    ) -> Result<u64, String> {
        self.usable()?;
        if last + 1 < self.next_seq {
            return Err(format!(
                "metadata log `{}`: a checkpoint through record {last}, but record {} was appended",
                self.cfg.owner,
                self.next_seq - 1
            ));
        }
        self.next_seq = last + 1;
        self.checkpoint(snapshot, out)
    }

    /// Start the log over as the state after record `last` (a checkpoint of `snapshot`),
    /// whatever it held: what recovery found is not this function's state (a hot spare
    /// that held another array's log) and is overwritten, numbers going down as well as
    /// up. Nothing may have been appended since recovery. Nothing counts as durable until
    /// the checkpoint is ([`Step::Durable`] of `last`); the records recovery found are
    /// never read again — the checkpoint's header, of a newer epoch, says the journal
    /// restarts after `last`, and a record after it must carry that epoch.
    pub fn restart_through(
        &mut self,
        last: u64,
        snapshot: &[u8],
        out: &mut Actions,
    ) -> Result<u64, String> {
        self.usable()?;
        let appended = !self.queue.is_empty()
            || matches!(self.writing, Some((_, Writing::Records { .. })))
            || self.snapshot.is_some();
        if appended {
            return Err(format!(
                "metadata log `{}`: restarted with records appended",
                self.cfg.owner
            ));
        }
        self.next_seq = last + 1;
        self.durable = 0;
        self.checkpoint(snapshot, out)
    }

    /// A completion reached the function: the journal's own I/O is handled here.
    pub fn on_completion(&mut self, done: &Completion, out: &mut Actions) -> Step {
        let Some(n) = self.mine(&done.io) else {
            return Step::NotMine;
        };
        let ok = done.status == Status::Ok;
        if done.io.op == Op::Read {
            if self.phase != Phase::Reading {
                return Step::Busy;
            }
            if !ok {
                // Nothing will take the buffer the read was to fill.
                out.release(Buf::Scratch { id: n, offset: 0 });
                return self.failed(format!(
                    "reading its region ({}) failed: {:?}",
                    self.where_(),
                    done.status
                ));
            }
            out.take(
                Buf::Scratch { id: n, offset: 0 },
                self.cfg.region.len as u32,
                n,
            );
            return Step::Busy;
        }
        let Some((id, w)) = self.writing else {
            return Step::Busy;
        };
        if id != n {
            return Step::Busy;
        }
        self.writing = None;
        if !ok {
            return self.failed(format!(
                "a write to its region ({}) failed: {:?}",
                self.where_(),
                done.status
            ));
        }
        let step = match w {
            Writing::Records { last, end } => {
                self.pos = end;
                self.durable = last;
                Step::Durable(last)
            }
            Writing::Snapshot {
                slot,
                len,
                crc,
                covered,
            } => {
                let hdr = Header {
                    epoch: self.hdr.epoch + 1,
                    snap_slot: slot,
                    snap_len: len,
                    snap_crc: crc,
                    start_seq: covered + 1,
                    tail_seq: covered,
                    ..self.hdr
                };
                self.write_header(hdr, Some(covered), out);
                return Step::Busy;
            }
            Writing::Header { hdr, covered } => {
                // The label set since this header left is the one the next carries.
                self.hdr = Header {
                    label: self.hdr.label,
                    ..hdr
                };
                self.hdr_slot = 1 - self.hdr_slot;
                match covered {
                    Some(c) => {
                        self.pos = 0;
                        self.stats.checkpoints += 1;
                        self.durable = self.durable.max(c);
                        Step::Durable(c)
                    }
                    None => Step::Busy,
                }
            }
        };
        self.pump(out);
        step
    }

    /// Bytes asked for with [`Actions::take`] reached the function: the region's content at
    /// recovery.
    pub fn on_bytes(&mut self, tag: u64, bytes: &[u8], out: &mut Actions) -> Step {
        if self.phase != Phase::Reading || !self.owns(tag) {
            return Step::NotMine;
        }
        match self.parse(bytes) {
            Ok(rec) => {
                self.phase = Phase::Ready;
                self.header_due = true;
                self.pump(out);
                Step::Recovered(rec)
            }
            Err(e) => self.failed(e),
        }
    }

    /// Did recovery fail because the region holds something that is not a wattio log?
    pub fn foreign(&self) -> bool {
        self.phase == Phase::Failed && self.foreign
    }

    /// Recovery failed on a region that is not a wattio log ([`Journal::foreign`]), and the
    /// function knows the region was never a log of its own (reserved, but its bytes a
    /// used device's): format it as recovery formats a blank region — the header written
    /// first, with the label set — and return that recovery, as [`Step::Recovered`] would
    /// have. Refused after any other failure, or before one.
    pub fn adopt_foreign(&mut self, out: &mut Actions) -> Result<Recovery, String> {
        if !self.foreign() {
            return Err(format!(
                "metadata log `{}`: only a region found not to be a wattio log is adopted",
                self.cfg.owner
            ));
        }
        self.foreign = false;
        self.phase = Phase::Ready;
        self.header_due = true;
        self.pump(out);
        Ok(self.blank_recovery())
    }

    /// What recovering a blank region gives: a new log, formatted by the header recovery
    /// writes next.
    fn blank_recovery(&self) -> Recovery {
        Recovery {
            first_seq: 1,
            fresh: true,
            epoch: self.hdr.epoch + 1,
            ..Recovery::default()
        }
    }

    fn usable(&self) -> Result<(), String> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Failed => Err(format!("metadata log `{}` has failed", self.cfg.owner)),
            Phase::New | Phase::Reading => Err(format!(
                "metadata log `{}` is not recovered yet (wait for Step::Recovered)",
                self.cfg.owner
            )),
        }
    }

    fn failed(&mut self, why: String) -> Step {
        self.phase = Phase::Failed;
        self.queue.clear();
        self.queued_bytes = 0;
        self.snapshot = None;
        Step::Failed(format!("metadata log `{}`: {why}", self.cfg.owner))
    }

    fn where_(&self) -> String {
        let r = self.cfg.region;
        format!("device {} bytes {}..{}", r.dev, r.offset, r.end())
    }

    fn record_len(r: &[u8]) -> u64 {
        (RECORD_HEADER + r.len()) as u64
    }

    fn owns(&self, n: u64) -> bool {
        n >= self.cfg.io_base && n < self.cfg.io_base + IO_NUMBERS
    }

    /// The own-I/O number of one of the journal's I/Os.
    fn mine(&self, io: &Io) -> Option<u64> {
        if !io.id.is_own() || io.id.is_sub() {
            return None;
        }
        let n = io.id.0 & (IoId::SUB - 1);
        self.owns(n).then_some(n)
    }

    fn io(&mut self, op: Op, offset: u64, len: u32) -> Io {
        let n = self.cfg.io_base + self.next_io;
        self.next_io = (self.next_io + 1) % IO_NUMBERS;
        let mut io = Io::own(n, op, self.cfg.region.dev, offset, len);
        io.priority = self.cfg.priority;
        io.fua = op == Op::Write;
        io
    }

    /// Write `bytes` (padded to whole blocks) at region byte `at`; FUA.
    fn write(&mut self, at: u64, mut bytes: Vec<u8>, w: Writing, out: &mut Actions) {
        let len = (bytes.len() as u64).div_ceil(BLOCK) * BLOCK;
        bytes.resize(len as usize, 0);
        let io = self.io(Op::Write, self.cfg.region.offset + at, len as u32);
        let n = io.id.0 & (IoId::SUB - 1);
        out.fill(io.buf, &bytes);
        out.submit(io);
        self.writing = Some((n, w));
        self.stats.writes += 1;
        self.stats.bytes_written += len;
    }

    fn write_header(&mut self, hdr: Header, covered: Option<u64>, out: &mut Actions) {
        let slot = 1 - self.hdr_slot;
        let bytes = encode_header(&hdr);
        self.write(
            slot as u64 * BLOCK,
            bytes,
            Writing::Header { hdr, covered },
            out,
        );
    }

    /// Start the next log write if none is out.
    fn pump(&mut self, out: &mut Actions) {
        if self.phase != Phase::Ready || self.writing.is_some() {
            return;
        }
        if self.header_due {
            self.header_due = false;
            let hdr = Header {
                epoch: self.hdr.epoch + 1,
                tail_seq: self.durable,
                ..self.hdr
            };
            self.write_header(hdr, None, out);
            return;
        }
        if let Some((snap, covered)) = self.snapshot.take() {
            let slot = 1 - self.hdr.snap_slot;
            let crc = crc32c(0, &snap);
            let len = snap.len() as u32;
            let at = 2 * BLOCK + slot as u64 * self.snap_slot_bytes;
            let w = Writing::Snapshot {
                slot,
                len,
                crc,
                covered,
            };
            if snap.is_empty() {
                // Nothing to write: straight to the header.
                let hdr = Header {
                    epoch: self.hdr.epoch + 1,
                    snap_slot: slot,
                    snap_len: 0,
                    snap_crc: crc,
                    start_seq: covered + 1,
                    tail_seq: covered,
                    ..self.hdr
                };
                self.write_header(hdr, Some(covered), out);
            } else {
                self.write(at, snap, w, out);
            }
            return;
        }
        if self.queue.is_empty() {
            return;
        }
        let (taken, len) = self.group(self.pos, 0);
        if taken == 0 {
            // The journal is full: wait for a checkpoint (`wants_snapshot`).
            return;
        }
        let mut bytes = Vec::with_capacity(len as usize);
        for (seq, r) in &self.queue[..taken] {
            encode_record(&mut bytes, *seq, self.hdr.epoch, r);
        }
        debug_assert_eq!(bytes.len() as u64, len);
        let last = self.queue[taken - 1].0;
        self.queue.drain(..taken);
        self.queued_bytes -= len;
        let end = self.pos + (bytes.len() as u64).div_ceil(BLOCK) * BLOCK;
        let at = self.area + self.pos;
        self.write(at, bytes, Writing::Records { last, end }, out);
    }

    /// Decode the region read at recovery.
    fn parse(&mut self, b: &[u8]) -> Result<Recovery, String> {
        if (b.len() as u64) < self.cfg.region.len {
            return Err(format!("{}: short read of the region", self.where_()));
        }
        let slots = [
            decode_header(&b[..BLOCK as usize]),
            decode_header(&b[BLOCK as usize..2 * BLOCK as usize]),
        ];
        let mut best: Option<(u32, Header)> = None;
        let mut corrupt = Vec::new();
        for (k, s) in slots.iter().enumerate() {
            match s {
                Slot::Foreign => {
                    self.foreign = true;
                    return Err(format!(
                        "{} is not a wattio metadata log (header block {k} is neither zeros nor a wattio header); zero the region to let the function format it",
                        self.where_()
                    ));
                }
                Slot::Corrupt(why) => corrupt.push(format!("header {k}: {why}")),
                Slot::Valid(h) => {
                    if best.is_none_or(|(_, b)| h.epoch > b.epoch) {
                        best = Some((k as u32, *h));
                    }
                }
                Slot::Blank => {}
            }
        }
        let Some((slot, h)) = best else {
            if !corrupt.is_empty() {
                return Err(format!(
                    "{}: no valid header ({})",
                    self.where_(),
                    corrupt.join("; ")
                ));
            }
            // Blank: a new log. Recovery's header write formats it (with the label set).
            return Ok(self.blank_recovery());
        };
        if h.owner != self.hdr.owner {
            return Err(format!(
                "{} holds the log of `{}`, not of `{}`",
                self.where_(),
                String::from_utf8_lossy(&h.owner).trim_end_matches('\0'),
                self.cfg.owner
            ));
        }
        if h.region_len != self.hdr.region_len || h.snapshot_slot_bytes != self.snap_slot_bytes {
            return Err(format!(
                "{}: the log was made for a {}-byte region with {}-byte snapshot slots; the configuration now gives {} and {}",
                self.where_(),
                h.region_len,
                h.snapshot_slot_bytes,
                self.hdr.region_len,
                self.snap_slot_bytes
            ));
        }
        let at = (2 * BLOCK + h.snap_slot as u64 * self.snap_slot_bytes) as usize;
        let snap_end = at + h.snap_len as usize;
        if h.snap_slot > 1
            || h.snap_len as u64 > self.snap_slot_bytes
            || crc32c(0, &b[at..snap_end]) != h.snap_crc
        {
            return Err(format!(
                "{}: the snapshot of epoch {} (slot {}, {} bytes) fails its CRC32C",
                self.where_(),
                h.epoch,
                h.snap_slot,
                h.snap_len
            ));
        }
        let snapshot = b[at..snap_end].to_vec();
        let area = &b[self.area as usize..];
        let (records, end, torn) = scan(area, &h);
        // A log written before labels takes the one set (its next header carries it).
        let label = if h.label == [0; LABEL_BYTES] {
            self.hdr.label
        } else {
            h.label
        };
        self.hdr = Header { label, ..h };
        self.found_epoch = h.epoch;
        self.hdr_slot = slot;
        self.next_seq = h.start_seq + records.len() as u64;
        self.durable = self.next_seq - 1;
        self.pos = (end as u64).div_ceil(BLOCK) * BLOCK;
        Ok(Recovery {
            snapshot,
            records,
            first_seq: h.start_seq,
            fresh: false,
            torn_tail: torn,
            epoch: h.epoch + 1,
            label: h.label,
        })
    }
}

/// Read the records of the journal area `a` under header `h`: (records, byte after the last
/// valid one, whether something invalid followed).
fn scan(a: &[u8], h: &Header) -> (Vec<Vec<u8>>, usize, bool) {
    let mut out = Vec::new();
    let mut p = 0usize;
    let mut end = 0usize;
    let mut expected = h.start_seq;
    loop {
        if p + RECORD_HEADER > a.len() {
            return (out, end, false);
        }
        let head = &a[p..p + RECORD_HEADER];
        let magic = u32_at(head, 0);
        if magic != RECORD_MAGIC {
            // The zero padding after a write's last record: the next write starts on the
            // next block. Only the rest of this block is padding, and it may be shorter
            // than a record header (42-byte records: 97 fill a block but 22 bytes), so a
            // header's worth of bytes here would reach into the next write's first record.
            let next = (p as u64).div_ceil(BLOCK) as usize * BLOCK as usize;
            if next > p && a[p..next.min(a.len())].iter().all(|&x| x == 0) {
                p = next;
                continue;
            }
            return (out, end, !head.iter().all(|&x| x == 0));
        }
        let len = u32_at(head, 4) as usize;
        let seq = u64_at(head, 8);
        let epoch = u64_at(head, 16);
        let crc = u32_at(head, 24);
        let epoch_ok = if seq > h.tail_seq {
            epoch == h.epoch
        } else {
            epoch <= h.epoch
        };
        let fits = len <= a.len() - p - RECORD_HEADER;
        if seq != expected || !epoch_ok || !fits {
            // A stale record (before a checkpoint, or of a write lost at a crash).
            return (out, end, seq >= expected);
        }
        let payload = &a[p + RECORD_HEADER..p + RECORD_HEADER + len];
        if record_crc(head, payload) != crc {
            return (out, end, true);
        }
        out.push(payload.to_vec());
        expected += 1;
        p += RECORD_HEADER + len;
        end = p;
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// CRC32C of a record's header (its CRC field as zeros) and payload.
fn record_crc(head: &[u8], payload: &[u8]) -> u32 {
    let mut h = [0u8; RECORD_HEADER];
    h.copy_from_slice(&head[..RECORD_HEADER]);
    h[24..28].fill(0);
    crc32c(crc32c(0, &h), payload)
}

fn encode_record(out: &mut Vec<u8>, seq: u64, epoch: u64, r: &[u8]) {
    let mut h = [0u8; RECORD_HEADER];
    h[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
    h[4..8].copy_from_slice(&(r.len() as u32).to_le_bytes());
    h[8..16].copy_from_slice(&seq.to_le_bytes());
    h[16..24].copy_from_slice(&epoch.to_le_bytes());
    let crc = record_crc(&h, r);
    h[24..28].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(r);
}

fn encode_header(h: &Header) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_BYTES];
    b[0..8].copy_from_slice(HEADER_MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&h.epoch.to_le_bytes());
    b[24..32].copy_from_slice(&h.region_len.to_le_bytes());
    b[32..40].copy_from_slice(&h.snapshot_slot_bytes.to_le_bytes());
    b[40..44].copy_from_slice(&h.snap_slot.to_le_bytes());
    b[44..48].copy_from_slice(&h.snap_len.to_le_bytes());
    b[48..52].copy_from_slice(&h.snap_crc.to_le_bytes());
    b[56..64].copy_from_slice(&h.start_seq.to_le_bytes());
    b[64..72].copy_from_slice(&h.tail_seq.to_le_bytes());
    b[72..72 + OWNER_BYTES].copy_from_slice(&h.owner);
    b[LABEL_AT..LABEL_AT + LABEL_BYTES].copy_from_slice(&h.label);
    let crc = crc32c(0, &b);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_header(block: &[u8]) -> Slot {
    if block.iter().all(|&x| x == 0) {
        return Slot::Blank;
    }
    if &block[0..8] != HEADER_MAGIC {
        return Slot::Foreign;
    }
    let mut b = block[..HEADER_BYTES].to_vec();
    let crc = u32_at(&b, 12);
    b[12..16].fill(0);
    if crc32c(0, &b) != crc {
        return Slot::Corrupt("CRC32C mismatch".into());
    }
    let version = u32_at(&b, 8);
    if version != VERSION {
        return Slot::Corrupt(format!(
            "format version {version}, this build reads {VERSION}"
        ));
    }
    let mut owner = [0; OWNER_BYTES];
    owner.copy_from_slice(&b[72..72 + OWNER_BYTES]);
    let mut label = [0; LABEL_BYTES];
    label.copy_from_slice(&b[LABEL_AT..LABEL_AT + LABEL_BYTES]);
    Slot::Valid(Header {
        epoch: u64_at(&b, 16),
        region_len: u64_at(&b, 24),
        snapshot_slot_bytes: u64_at(&b, 32),
        snap_slot: u32_at(&b, 40),
        snap_len: u32_at(&b, 44),
        snap_crc: u32_at(&b, 48),
        start_seq: u64_at(&b, 56),
        tail_seq: u64_at(&b, 64),
        owner,
        label,
    })
}
