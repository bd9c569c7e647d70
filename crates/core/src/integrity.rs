//! Data-integrity checking without bytes: a *version* per block.
//!
//! The simulator moves no data, so a function that moves data wrongly (a cache that writes a
//! page back to the wrong place, a layer that acknowledges a write before it is on a device)
//! would pass every simulated test. The [`Checker`] follows data as versions instead, told of
//! every host request, device submission, device completion and host reply through the
//! kernel's [`DataObserver`] hook:
//!
//! * A host write stamps a fresh version on each block it covers, in its host buffer.
//! * A device write stores, per block, the versions its source buffer (host or scratch) held
//!   when it was submitted; the device keeps them as *volatile* until a FLUSH covers them or
//!   as *durable* at once with FUA.
//! * A device read fills its destination buffer (host or scratch) with the device's versions
//!   when it completes. A device discard makes blocks read as zeros ([`INITIAL`]).
//! * A host read, when replied, must find in its host buffer, per block, a version the
//!   consistency rule allows (see [`Checker`]).
//! * [`Checker::crash`] drops what is in flight and what is volatile, and from then on host
//!   reads are held to what was made durable.
//!
//! The rules are spelt out in `docs/integrity.md`.

use crate::io::{Buf, Completion, Io, Op, Status};
use crate::kernel::DataObserver;
use crate::region::Region;
use crate::time::Nanos;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

/// The content of a block nobody wrote (a fresh device reads zeros), or a discarded one.
pub const INITIAL: u64 = 0;
/// Undefined content the checker cannot vouch for: a block partly covered by an I/O, or
/// written by a write that failed. Reading it is accepted and counted as unverified.
pub const ANY: u64 = u64::MAX;
/// A buffer that was never filled (a device write from it, or a host read replied without
/// reading into it, hands over garbage). Never accepted.
pub const GARBAGE: u64 = u64::MAX - 1;
/// Bytes a function generated for its own metadata (`Action::Fill`): not user data. Written
/// into a reserved region it is expected; anywhere else, or read back by the host, a fault.
pub const META: u64 = u64::MAX - 2;

/// A version that stands for user data (a host write's, or parity combining them).
fn is_user(v: u64) -> bool {
    !matches!(v, INITIAL | ANY | GARBAGE | META)
}

/// A buffer, named as [`Buf`] names it. Scratch ids are taken as unique across the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum BufKey {
    Host(u64),
    Scratch(u64),
}

impl BufKey {
    fn of(buf: Buf) -> Option<(BufKey, u64)> {
        match buf {
            Buf::None => None,
            Buf::Host { id, offset } => Some((BufKey::Host(id), offset as u64)),
            Buf::Scratch { id, offset } => Some((BufKey::Scratch(id), offset as u64)),
        }
    }
}

/// One host write of one block.
#[derive(Clone, Copy, Debug)]
struct WriteRec {
    ver: u64,
    /// Host request that wrote it (for messages).
    req: u64,
    epoch: u32,
    /// Event sequence numbers: when the host issued it, when it was acknowledged.
    issued: u64,
    acked: Option<u64>,
    acked_at: Nanos,
    /// May it serve as the floor of later reads (acknowledged, and not undone by a crash)?
    floor: bool,
    durable: bool,
    /// Gone in a crash: a read after it found another of the block's versions from before
    /// it ([`HostBlock::settle`]).
    lost: bool,
}

/// What the host may read back from one block: the writes that are not yet superseded for
/// every read still in flight. Starts with the initial (zero) content.
#[derive(Debug)]
struct HostBlock {
    writes: Vec<WriteRec>,
}

impl HostBlock {
    fn new() -> HostBlock {
        HostBlock {
            writes: vec![WriteRec {
                ver: INITIAL,
                req: u64::MAX,
                epoch: 0,
                issued: 0,
                acked: Some(0),
                acked_at: 0,
                floor: true,
                durable: true,
                lost: false,
            }],
        }
    }

    /// The writes a read issued at sequence `issued` may return: all known writes but those
    /// acknowledged before some floor write (acknowledged before the read was issued) was
    /// issued. "Before some floor's issue" is "before the latest such issue", so one pass
    /// finds that bound and one filters (a deep queue keeps thousands of writes of a hot
    /// block in flight, and the pairwise test was quadratic in them).
    fn allowed(&self, issued: u64) -> impl Iterator<Item = &WriteRec> {
        let bound = self
            .writes
            .iter()
            .filter(|f| f.floor && f.acked.is_some_and(|a| a < issued))
            .map(|f| f.issued)
            .max();
        self.writes.iter().filter(move |w| {
            let superseded = matches!((bound, w.acked), (Some(b), Some(a)) if a < b);
            !w.lost && !superseded
        })
    }

    /// Forget writes no read still in flight (the oldest issued at `oldest_read`) nor any
    /// later read may return, even after a crash: those superseded by a *durable* floor.
    /// (A write superseded only by a volatile one may still be what a crash leaves.)
    fn prune(&mut self, oldest_read: u64) {
        // As `allowed`: superseded by some durable floor ⟺ acknowledged before the latest
        // issue of one.
        let Some(bound) = self
            .writes
            .iter()
            .filter(|f| f.floor && f.durable && f.acked.is_some_and(|a| a < oldest_read))
            .map(|f| f.issued)
            .max()
        else {
            return;
        };
        self.writes.retain(|w| w.acked.is_none_or(|a| a >= bound));
    }

    /// A read after crash `epoch` returned the version of the write issued at `issued`, a
    /// write from before the crash: the crash left that version on the media, so every
    /// other write from before the crash is gone for good (a disk does not change its mind
    /// about what it kept), and this one is durable, the floor of every later read, also
    /// after another crash. Without this rule a layer holding two copies of a block that
    /// disagree after a crash (a replica made from an unflushed source) could answer from
    /// either, read after read.
    fn settle(&mut self, issued: u64, epoch: u32) {
        for w in &mut self.writes {
            if w.issued == issued {
                w.floor = true;
                w.durable = true;
            } else if w.epoch < epoch {
                w.lost = true;
            }
        }
    }

    /// The record of the write issued at sequence `issued` (one per request and block).
    fn write_mut(&mut self, issued: u64) -> Option<&mut WriteRec> {
        self.writes.iter_mut().find(|w| w.issued == issued)
    }
}

/// One block of one device: its durable version and the completed, not yet flushed writes
/// on top of it (version, completion sequence), oldest first.
#[derive(Debug, Default)]
struct DevBlock {
    durable: u64,
    volatile: Vec<(u64, u64)>,
    /// The last write to it failed (a medium error): the device refused the data, and what
    /// it holds is its own business until a write succeeds. Only [`Checker::detached`]
    /// looks at it: through a stack, layers route around such a block.
    refused: bool,
}

impl DevBlock {
    fn current(&self) -> u64 {
        self.volatile.last().map_or(self.durable, |v| v.0)
    }
}

#[derive(Debug)]
struct HostReq {
    io: Io,
    issued: u64,
    at: Nanos,
}

/// What a checker has seen and vouched for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntegrityCounters {
    /// Host reads whose every fully covered block was checked.
    pub reads_checked: u64,
    /// Blocks of host reads found with an allowed version.
    pub blocks_checked: u64,
    /// Blocks of host reads accepted without a check: partly covered by the read, or of
    /// undefined content (a partial or failed write, a discard).
    pub blocks_unverified: u64,
    pub crashes: u64,
}

/// The version-carrying checker. See the module docs and `docs/integrity.md`.
///
/// **Consistency rule.** A host read issued at time *i* and replied at time *r* may return,
/// for each block it fully covers, the version of any host write *w* of that block issued
/// before *r* (or the initial content), unless *w* is superseded: some write *f* of the block
/// was acknowledged before *i*, and *w* was acknowledged before *f* was issued. So a read sees
/// at least the latest acknowledged write, and any write overlapping it in time (in flight
/// together with it, or with the read) may win. A write that failed or covered the block only
/// partly leaves it undefined ([`ANY`]): anything reads back until a later write supersedes
/// it. "Before" is the order of events in the run, not only of their times.
///
/// **After a crash** only durable writes (acknowledged with FUA, or before the issue of a
/// completed host FLUSH of that volume) can serve as the floor: the rule is the same with
/// "acknowledged" read as "durable"; writes acknowledged but not durable, and writes in
/// flight at the crash, may or may not read back.
pub struct Checker {
    shift: u32,
    seq: u64,
    epoch: u32,
    next_ver: u64,
    host: HashMap<(u16, u64), HostBlock>,
    dev: HashMap<(u16, u64), DevBlock>,
    /// Blocks with volatile writes, per device.
    dirty: BTreeMap<u16, BTreeSet<u64>>,
    /// Buffer contents: (buffer, byte offset in it) → version.
    bufs: HashMap<(BufKey, u64), u64>,
    /// Scratch buffers alive, as the executors keep them ([`crate::media::ScratchBytes`]):
    /// id → the offsets `bufs` holds for it. When the kernel frees the buffer
    /// ([`DataObserver::scratch_freed`], by the executors' one rule) its entries go, so the
    /// checker's memory follows the buffers alive, not every copy a run made.
    scratch: HashMap<u64, Vec<u64>>,
    reqs: HashMap<u64, HostReq>,
    /// Issue sequence numbers of host reads in flight (with multiplicity).
    reads: BTreeMap<u64, u32>,
    /// Source versions of device writes in flight, by (device, id, offset).
    dev_writes: HashMap<(u16, u64, u64), Vec<u64>>,
    /// Device flushes in flight: (device, id) → sequence number at submission.
    dev_flushes: HashMap<(u16, u64), u64>,
    /// Host writes acknowledged but not durable: (volume, block, issue sequence, ack
    /// sequence).
    not_durable: Vec<(u16, u64, u64, u64)>,
    counters: IntegrityCounters,
    /// Parity: a block holding the XOR of several versions holds a *combination*, a
    /// version number of its own standing for the set of versions XOR-ed (the sorted set,
    /// and the number by set). XOR is the symmetric difference of sets, the initial (zero)
    /// content the empty set, so a block reconstructed from parity and the other blocks of
    /// its stripe reads back as exactly one version only if the parity matched them.
    combos: HashMap<u64, Vec<u64>>,
    combo_ids: HashMap<Vec<u64>, u64>,
    /// A fault found outside a host reply (a device I/O id reused while in flight): raised
    /// at the next host reply.
    fault: Option<String>,
    /// Functions' metadata regions: device blocks there are not user data.
    regions: Vec<Region>,
    /// No crash will be simulated ([`Checker::without_crashes`]): what a crash could leave
    /// need not be kept.
    crashless: bool,
    /// Device reads take their blocks' versions when submitted ([`Checker::early_reads`]).
    early_reads: bool,
    /// With `early_reads`: the versions of device reads in flight, by (device, id, offset).
    read_snaps: HashMap<(u16, u64, u64), Vec<u64>>,
}

/// A version, as messages show it.
struct V(u64);
impl fmt::Display for V {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            INITIAL => write!(f, "the initial content"),
            ANY => write!(f, "undefined content"),
            GARBAGE => write!(f, "garbage (a buffer never filled)"),
            META => write!(f, "a function's metadata"),
            v => write!(f, "v{v}"),
        }
    }
}

impl Checker {
    /// A checker with blocks of `block_size` bytes (a power of two; 4096 for 4 KiB pages,
    /// 512 for sector-granular workloads).
    pub fn new(block_size: u32) -> Result<Checker, String> {
        if !block_size.is_power_of_two() {
            return Err(format!(
                "integrity block size: expected a power of two, got {block_size}"
            ));
        }
        Ok(Checker {
            shift: block_size.trailing_zeros(),
            seq: 0,
            epoch: 0,
            next_ver: 1,
            host: HashMap::new(),
            dev: HashMap::new(),
            dirty: BTreeMap::new(),
            bufs: HashMap::new(),
            scratch: HashMap::new(),
            reqs: HashMap::new(),
            reads: BTreeMap::new(),
            dev_writes: HashMap::new(),
            dev_flushes: HashMap::new(),
            not_durable: Vec::new(),
            counters: IntegrityCounters::default(),
            combos: HashMap::new(),
            combo_ids: HashMap::new(),
            fault: None,
            regions: Vec::new(),
            crashless: false,
            early_reads: false,
            read_snaps: HashMap::new(),
        })
    }

    /// Device reads return their blocks as they were when submitted — the earliest a live
    /// device may serve them, whose worker may then report the read after writes that
    /// completed meanwhile — rather than as they are when the read completes (the latest;
    /// the default). Either is a block device's behaviour, and a layer must be right under
    /// both: the swarm checks some seeds each way (docs/integrity.md).
    pub fn early_reads(mut self) -> Checker {
        self.early_reads = true;
        self
    }

    /// For a run that simulates no crash (`wattio run` with `[run] check_data`): every
    /// acknowledged write counts as durable and every device write as on the media, so a
    /// block keeps only the writes a read in flight may still return — without it, a run
    /// without flushes keeps every write of every block (what a crash could bring back),
    /// and a hot block's reads are checked against thousands of them. [`Checker::crash`]
    /// is then a programming error.
    pub fn without_crashes(mut self) -> Checker {
        self.crashless = true;
        self
    }

    /// The checker of a run's or session's `[run] check_data`, blocks of `check_block` bytes:
    /// built [`without_crashes`](Checker::without_crashes), since neither simulates one; an
    /// error names the key.
    pub fn for_run(check_block: u32) -> Result<Checker, String> {
        Ok(Checker::new(check_block)
            .map_err(|e| format!("run.check_block: {e}"))?
            .without_crashes())
    }

    pub fn counters(&self) -> IntegrityCounters {
        self.counters
    }

    /// The checker's block in bytes.
    pub fn block_size(&self) -> u32 {
        1 << self.shift
    }

    /// Blocks the checker holds state for (host and device side): its memory is bounded by
    /// the blocks a run touches, not by capacities.
    pub fn tracked_blocks(&self) -> usize {
        self.host.len() + self.dev.len()
    }

    /// Buffer positions the checker holds versions for in scratch buffers (bounded by the
    /// buffers alive).
    pub fn scratch_entries(&self) -> usize {
        self.scratch.values().map(Vec::len).sum()
    }

    /// `bufs[(k, off)] = v`, remembering a scratch buffer's offsets.
    fn put(&mut self, k: BufKey, off: u64, v: u64) {
        if self.bufs.insert((k, off), v).is_none() {
            if let BufKey::Scratch(id) = k {
                self.scratch.entry(id).or_default().push(off);
            }
        }
    }

    /// Scratch buffer `id` is freed: its versions go.
    fn forget(&mut self, id: u64) {
        if let Some(offsets) = self.scratch.remove(&id) {
            for off in offsets {
                self.bufs.remove(&(BufKey::Scratch(id), off));
            }
        }
    }

    fn tick(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The blocks `[offset, offset + len)` touches, each with whether it is fully covered and
    /// the byte distance of its start from `offset` (negative for a partly covered first
    /// block: there is no buffer position for it).
    fn blocks(&self, offset: u64, len: u32) -> impl Iterator<Item = (u64, bool, u64)> {
        let shift = self.shift;
        let size = 1u64 << shift;
        let end = offset + len as u64;
        let first = offset >> shift;
        let last = if len == 0 { first } else { (end - 1) >> shift };
        (first..=last).filter(move |_| len > 0).map(move |b| {
            let start = b << shift;
            let full = start >= offset && start + size <= end;
            (b, full, start.saturating_sub(offset))
        })
    }

    /// A crash at `now`: device I/O in flight is lost, every device drops back to its
    /// durable versions, every buffer is gone (host requests in flight and the functions'
    /// scratch state), and from now on reads are held to what the host made durable.
    pub fn crash(&mut self, now: Nanos) {
        assert!(
            !self.crashless,
            "Checker::crash on a checker built without_crashes"
        );
        let seq = self.tick();
        self.counters.crashes += 1;
        self.dev_writes.clear();
        self.dev_flushes.clear();
        self.read_snaps.clear();
        self.dirty.clear();
        for b in self.dev.values_mut() {
            b.volatile.clear();
        }
        self.bufs.clear();
        self.scratch.clear();
        self.reads.clear();
        // Writes in flight may or may not have landed: they stay possible, as if
        // acknowledged by the crash, but promise nothing.
        let reqs: Vec<HostReq> = self.reqs.drain().map(|(_, r)| r).collect();
        for r in reqs {
            if !matches!(r.io.op, Op::Write | Op::Discard) {
                continue;
            }
            let blocks: Vec<_> = self.blocks(r.io.offset, r.io.len).collect();
            for (b, _, _) in blocks {
                let w = self
                    .host
                    .get_mut(&(r.io.dev, b))
                    .and_then(|hb| hb.write_mut(r.issued));
                if let Some(w) = w {
                    w.acked = Some(seq);
                    w.acked_at = now;
                }
            }
        }
        for hb in self.host.values_mut() {
            for w in &mut hb.writes {
                w.floor = w.durable;
            }
            hb.prune(u64::MAX);
        }
        self.not_durable.clear();
        self.epoch += 1;
    }

    /// After a [`crash`](Self::crash), before the restart: devices `a` and `b` traded places
    /// (each now holds what the other held, as [`DeviceRuntime::trade_content`] moves
    /// their bytes). A stack that cannot tell its devices apart then returns one device's
    /// versions for the other's blocks, and is caught.
    ///
    /// [`DeviceRuntime::trade_content`]: crate::device::DeviceRuntime::trade_content
    pub fn trade_devices(&mut self, a: u16, b: u16) {
        self.assert_at_rest();
        let dev = std::mem::take(&mut self.dev);
        self.dev = dev
            .into_iter()
            .map(|((d, blk), v)| {
                let d = match d {
                    _ if d == a => b,
                    _ if d == b => a,
                    d => d,
                };
                ((d, blk), v)
            })
            .collect();
    }

    /// After a crash, before the restart: device `d` was replaced by a blank one (every block
    /// reads as the initial content).
    pub fn blank_device(&mut self, d: u16) {
        self.assert_at_rest();
        self.dev.retain(|&(x, _), _| x != d);
    }

    fn assert_at_rest(&self) {
        assert!(
            self.dev_writes.is_empty() && self.dev_flushes.is_empty() && self.dirty.is_empty(),
            "devices are moved only between a crash and the restart"
        );
    }

    /// After a clean unload: the layers are gone and the host reads volume `vol` straight
    /// from the device of the same id (a cache detached from its disk, as bcache's detach or
    /// EXCES's unload leave it). Every block the host wrote must hold there a version a
    /// host read issued now may return, by the same rule as a replied read (and after
    /// [`crash`](Self::crash), the rule after a crash: only what the device made durable
    /// counts). Returns the blocks checked; blocks of undefined content, and blocks whose
    /// last device write failed (a medium error: no layer can put the data there), are
    /// counted as unverified. Fails if host requests are still in flight: the host detaches only
    /// once every request is replied.
    pub fn detached(&mut self, vol: u16) -> Result<u64, String> {
        if let Some(e) = self.fault.take() {
            return Err(e);
        }
        if !self.reqs.is_empty() {
            return Err(format!(
                "integrity: volume {vol} detached with {} host request(s) in flight",
                self.reqs.len()
            ));
        }
        let issued = self.tick();
        let mut blocks: Vec<u64> = self
            .host
            .keys()
            .filter(|k| k.0 == vol)
            .map(|k| k.1)
            .collect();
        blocks.sort_unstable();
        let mut checked = 0;
        for b in blocks {
            let hb = &self.host[&(vol, b)];
            let db = self.dev.get(&(vol, b));
            let found = db.map_or(INITIAL, DevBlock::current);
            // A block whose last write the device refused: the bare device answers a read
            // of it as it answered the write (an error), not with silently stale data.
            let refused = db.is_some_and(|d| d.refused);
            if refused || found == ANY || hb.allowed(issued).any(|w| w.ver == ANY) {
                self.counters.blocks_unverified += 1;
                continue;
            }
            if hb.allowed(issued).any(|w| w.ver == found) {
                checked += 1;
                continue;
            }
            return Err(format!(
                "integrity: volume {vol} detached{}: device {vol} {}",
                if self.epoch > 0 {
                    format!(" (after crash {})", self.epoch)
                } else {
                    String::new()
                },
                self.mismatch(hb, issued, b, found)
            ));
        }
        self.counters.blocks_checked += checked;
        Ok(checked)
    }

    /// The versions a block's content is the XOR of (`None`: undefined or garbage).
    fn members(&self, v: u64) -> Option<Vec<u64>> {
        match v {
            INITIAL => Some(Vec::new()),
            ANY | GARBAGE => None,
            v => Some(self.combos.get(&v).cloned().unwrap_or_else(|| vec![v])),
        }
    }

    /// The content `a ^ b`.
    fn xor_of(&mut self, a: u64, b: u64) -> u64 {
        let (Some(x), Some(y)) = (self.members(a), self.members(b)) else {
            return if a == GARBAGE || b == GARBAGE {
                GARBAGE
            } else {
                ANY
            };
        };
        let mut set: Vec<u64> = x.iter().filter(|v| !y.contains(v)).copied().collect();
        set.extend(y.iter().filter(|v| !x.contains(v)));
        set.sort_unstable();
        match set.len() {
            0 => INITIAL,
            1 => set[0],
            _ => {
                if let Some(&id) = self.combo_ids.get(&set) {
                    return id;
                }
                let id = self.next_ver;
                self.next_ver += 1;
                self.combos.insert(id, set.clone());
                self.combo_ids.insert(set, id);
                id
            }
        }
    }

    /// A version as an error message names it (a combination by its members).
    fn version_name(&self, v: u64) -> String {
        match self.combos.get(&v) {
            Some(set) => {
                let vs: Vec<String> = set.iter().map(|&m| V(m).to_string()).collect();
                format!("a parity combination of [{}]", vs.join(", "))
            }
            None => V(v).to_string(),
        }
    }

    /// `dst ^= src` (`xor`) or `dst = src`, block by block where the source holds a whole
    /// block (buffer positions step by 512 bytes, the finest a block can start at within an
    /// I/O): an xor combines the versions (a destination not yet filled is zeros), a copy
    /// replaces the destination's. A destination block whose source is not a whole block
    /// (partly covered, never filled) becomes undefined, whatever it held.
    fn combine(&mut self, dst: Buf, src: Buf, len: u32, xor: bool) {
        let (Some((dk, doff)), Some((sk, soff))) = (BufKey::of(dst), BufKey::of(src)) else {
            return;
        };
        let size = 1u64 << self.shift;
        let len = len as u64;
        let mut k = 0;
        while k < len {
            let from = self.bufs.get(&(sk, soff + k)).copied();
            let to = self.bufs.get(&(dk, doff + k)).copied();
            let whole = k + size <= len;
            match from {
                Some(f) if whole => {
                    // Another source entry starting inside this block (undefined entries
                    // put at 512-byte steps by a copy from where no whole block was, then a
                    // real one) overlaps it: this block's content is a mix, and the entry
                    // inside is where the next block starts. Stepping a whole block over it
                    // left the destination's block there as it was (swarm seed 860,926: a
                    // false alarm, a RAID's XOR of a prefetcher's odd-offset answer).
                    let inside = (512..size)
                        .step_by(512)
                        .find(|&j| k + j < len && self.bufs.contains_key(&(sk, soff + k + j)));
                    if let Some(j) = inside {
                        self.put(dk, doff + k, ANY);
                        k += j;
                        continue;
                    }
                    let v = if xor {
                        self.xor_of(to.unwrap_or(INITIAL), f)
                    } else {
                        f
                    };
                    self.put(dk, doff + k, v);
                    k += size;
                    continue;
                }
                // The source's content here is not known block for block.
                _ if whole || to.is_some() => self.put(dk, doff + k, ANY),
                _ => {}
            }
            k += 512;
        }
    }

    fn raise(&mut self, e: String) {
        self.fault.get_or_insert(e);
    }

    /// A device write's blocks (`vers`, one per block it touches): host data must stay out
    /// of metadata regions, and a function's metadata out of everything else.
    fn check_regions(&mut self, io: &Io, vers: &[u64]) {
        let size = 1u64 << self.shift;
        let blocks: Vec<_> = self.blocks(io.offset, io.len).collect();
        for ((b, _, _), &v) in blocks.into_iter().zip(vers) {
            let inside = self
                .regions
                .iter()
                .find(|r| r.overlaps(io.dev, b * size, size));
            let fault = match inside {
                Some(r) if is_user(v) => format!(
                    "integrity: device {} write {:#x} puts {} into block {b} (bytes {}..{}), inside the metadata region bytes {}..{}: a function's data mapping overlaps its metadata",
                    io.dev,
                    io.id.0,
                    self.version_name(v),
                    b * size,
                    (b + 1) * size,
                    r.offset,
                    r.end()
                ),
                None if v == META => format!(
                    "integrity: device {} write {:#x} puts a function's metadata into block {b} (bytes {}..{}), outside every reserved metadata region",
                    io.dev,
                    io.id.0,
                    b * size,
                    (b + 1) * size
                ),
                _ => continue,
            };
            self.raise(fault);
            return;
        }
    }

    /// What a read issued at `issued` found wrong in block `b`: "block B (bytes …) holds
    /// `found`'s write, expected …" (one allowed write, or the list).
    fn mismatch(&self, hb: &HostBlock, issued: u64, b: u64, found: u64) -> String {
        let expected: Vec<String> = hb.allowed(issued).map(|w| self.request_name(w)).collect();
        let holder =
            hb.writes
                .iter()
                .find(|w| w.ver == found)
                .map_or(self.version_name(found), |w| {
                    let why = if w.lost {
                        "lost in a crash: an earlier read after it found another version"
                    } else {
                        "superseded"
                    };
                    format!("{} [{why}]", self.request_name(w))
                });
        let size = 1u64 << self.shift;
        format!(
            "block {b} (bytes {}..{}) holds {holder}, expected {}",
            b * size,
            (b + 1) * size,
            if expected.len() == 1 {
                expected[0].clone()
            } else {
                format!("one of [{}]", expected.join("; "))
            }
        )
    }

    fn request_name(&self, w: &WriteRec) -> String {
        match w.ver {
            INITIAL => "the initial content".into(),
            _ => format!(
                "{} (host request {}{}{})",
                V(w.ver),
                w.req,
                if w.epoch != self.epoch {
                    format!(" before crash {}", w.epoch + 1)
                } else {
                    String::new()
                },
                match w.acked {
                    Some(_) => format!(", acknowledged at {} ns", w.acked_at),
                    None => ", in flight".into(),
                }
            ),
        }
    }
}

impl DataObserver for Checker {
    fn reserve(&mut self, r: Region) {
        if !self.regions.contains(&r) {
            self.regions.push(r);
        }
    }

    /// The executors' rule freed the buffer (the kernel's [`crate::scratch`]): its
    /// versions go, so a later buffer with the same id starts undefined.
    fn scratch_freed(&mut self, _now: Nanos, id: u64) {
        self.forget(id);
    }

    /// The function's own bytes: whole blocks of `dst` hold [`META`], a partial one is
    /// undefined.
    fn fill(&mut self, _now: Nanos, dst: Buf, len: u32) {
        let Some((k, off)) = BufKey::of(dst) else {
            return;
        };
        let size = 1u64 << self.shift;
        let len = len as u64;
        let mut at = 0;
        while at < len {
            let v = if at + size <= len { META } else { ANY };
            self.put(k, off + at, v);
            at += size;
        }
    }

    /// `dst ^= src` ([`Checker::combine`]).
    fn xor(&mut self, _now: Nanos, dst: Buf, src: Buf, len: u32) {
        self.combine(dst, src, len, true);
    }

    /// `dst = src` ([`Checker::combine`]).
    fn copy(&mut self, _now: Nanos, dst: Buf, src: Buf, len: u32) {
        self.combine(dst, src, len, false);
    }

    fn host_request(&mut self, now: Nanos, io: &Io) {
        let issued = self.tick();
        match io.op {
            Op::Read => *self.reads.entry(issued).or_insert(0) += 1,
            Op::Write | Op::Discard => {
                let host = BufKey::Host(io.id.0);
                let blocks: Vec<_> = self.blocks(io.offset, io.len).collect();
                for (b, full, at) in blocks {
                    let ver = if full && io.op == Op::Write {
                        let v = self.next_ver;
                        self.next_ver += 1;
                        self.bufs.insert((host, at), v);
                        v
                    } else {
                        ANY
                    };
                    self.host
                        .entry((io.dev, b))
                        .or_insert_with(HostBlock::new)
                        .writes
                        .push(WriteRec {
                            ver,
                            req: io.id.0,
                            epoch: self.epoch,
                            issued,
                            acked: None,
                            acked_at: 0,
                            floor: false,
                            durable: false,
                            lost: false,
                        });
                }
            }
            Op::Flush => {}
        }
        self.reqs.insert(
            io.id.0,
            HostReq {
                io: *io,
                issued,
                at: now,
            },
        );
    }

    fn device_submit(&mut self, _now: Nanos, io: &Io) {
        let seq = self.tick();
        match io.op {
            Op::Write => {
                let src = BufKey::of(io.buf);
                let blocks: Vec<_> = self.blocks(io.offset, io.len).collect();
                let vers: Vec<u64> = blocks
                    .into_iter()
                    .map(|(_, full, at)| match (full, src) {
                        (false, _) => ANY,
                        (true, None) => GARBAGE,
                        (true, Some((k, o))) => {
                            self.bufs.get(&(k, o + at)).copied().unwrap_or(GARBAGE)
                        }
                    })
                    .collect();
                self.check_regions(io, &vers);
                if self
                    .dev_writes
                    .insert((io.dev, io.id.0, io.offset), vers)
                    .is_some()
                {
                    self.raise(format!(
                        "integrity: device {} received write {:#x} at offset {} while one with the same id and offset was in flight",
                        io.dev, io.id.0, io.offset
                    ));
                }
            }
            Op::Flush => {
                self.dev_flushes.insert((io.dev, io.id.0), seq);
            }
            Op::Read if self.early_reads => {
                let vers = self
                    .blocks(io.offset, io.len)
                    .map(|(b, _, _)| {
                        self.dev
                            .get(&(io.dev, b))
                            .map_or(INITIAL, DevBlock::current)
                    })
                    .collect();
                self.read_snaps.insert((io.dev, io.id.0, io.offset), vers);
            }
            Op::Read | Op::Discard => {}
        }
    }

    fn device_complete(&mut self, _now: Nanos, done: &Completion) {
        let seq = self.tick();
        let io = &done.io;
        let ok = done.status == Status::Ok;
        // A write's versions were taken at its submission: the kernel may free its
        // buffer after this call.
        match io.op {
            Op::Write | Op::Discard => {
                let vers = if io.op == Op::Write {
                    self.dev_writes.remove(&(io.dev, io.id.0, io.offset))
                } else {
                    None
                };
                let blocks: Vec<_> = self.blocks(io.offset, io.len).collect();
                if !ok {
                    if io.op == Op::Write {
                        for (b, _, _) in blocks {
                            self.dev.entry((io.dev, b)).or_default().refused = true;
                        }
                    }
                    return;
                }
                for (k, (b, full, _)) in blocks.into_iter().enumerate() {
                    let v = match (&vers, io.op) {
                        (Some(v), _) => v[k],
                        // A write the checker did not see submitted carries nothing it knows.
                        (None, Op::Write) => GARBAGE,
                        // A discarded block reads as zeros (a partly discarded one: undefined).
                        (None, _) if full => INITIAL,
                        (None, _) => ANY,
                    };
                    let db = self.dev.entry((io.dev, b)).or_default();
                    db.refused = false;
                    if io.fua || self.crashless {
                        db.durable = v;
                        db.volatile.clear();
                    } else {
                        db.volatile.push((v, seq));
                        self.dirty.entry(io.dev).or_default().insert(b);
                    }
                }
            }
            Op::Read => {
                let snap = self.read_snaps.remove(&(io.dev, io.id.0, io.offset));
                let Some((k, o)) = BufKey::of(io.buf) else {
                    return;
                };
                if !ok {
                    return;
                }
                let blocks: Vec<_> = self.blocks(io.offset, io.len).collect();
                for (i, (b, full, at)) in blocks.into_iter().enumerate() {
                    let v = match (&snap, full) {
                        (_, false) => ANY,
                        (Some(vers), true) => vers[i],
                        (None, true) => self
                            .dev
                            .get(&(io.dev, b))
                            .map_or(INITIAL, DevBlock::current),
                    };
                    if full {
                        self.put(k, o + at, v);
                    }
                }
            }
            Op::Flush => {
                let Some(snap) = self.dev_flushes.remove(&(io.dev, io.id.0)) else {
                    return;
                };
                if !ok {
                    return;
                }
                let Some(dirty) = self.dirty.get_mut(&io.dev) else {
                    return;
                };
                dirty.retain(|&b| {
                    let db = self.dev.get_mut(&(io.dev, b)).expect("dirty blocks exist");
                    let n = db.volatile.iter().take_while(|v| v.1 < snap).count();
                    if n > 0 {
                        db.durable = db.volatile[n - 1].0;
                        db.volatile.drain(..n);
                    }
                    !db.volatile.is_empty()
                });
            }
        }
    }

    fn host_reply(&mut self, now: Nanos, done: &Completion) -> Result<(), String> {
        if let Some(e) = self.fault.take() {
            return Err(e);
        }
        let acked = self.tick();
        let id = done.io.id.0;
        let Some(req) = self.reqs.remove(&id) else {
            // A request issued before a crash that the rebuilt stack cannot know, or one the
            // executor already reported as replied twice.
            return Ok(());
        };
        let io = req.io;
        let ok = done.status == Status::Ok;
        let host = BufKey::Host(id);
        let blocks: Vec<_> = self.blocks(io.offset, io.len).collect();
        let mut result = Ok(());
        match io.op {
            Op::Read => {
                if let Some(n) = self.reads.get_mut(&req.issued) {
                    *n -= 1;
                    if *n == 0 {
                        self.reads.remove(&req.issued);
                    }
                }
                let mut all = true;
                let mut settled = Vec::new();
                for &(b, full, at) in &blocks {
                    let found = self.bufs.remove(&(host, at));
                    if !(ok && full) {
                        if ok {
                            self.counters.blocks_unverified += 1;
                        }
                        all = false;
                        continue;
                    }
                    let found = found.unwrap_or(GARBAGE);
                    let hb = self.host.get(&(io.dev, b));
                    let initial = HostBlock::new();
                    let hb = hb.unwrap_or(&initial);
                    let mut allowed = hb.allowed(req.issued);
                    if found == ANY || hb.allowed(req.issued).any(|w| w.ver == ANY) {
                        self.counters.blocks_unverified += 1;
                        all = false;
                        continue;
                    }
                    if let Some(w) = allowed.find(|w| w.ver == found) {
                        self.counters.blocks_checked += 1;
                        // A crash left one of the block's earlier versions on the media:
                        // the first read of one tells which, and from then on it is the
                        // block's durable content (see `settle`).
                        let pre = |x: &WriteRec| x.epoch < self.epoch;
                        if pre(w)
                            && (!(w.floor && w.durable)
                                || hb
                                    .writes
                                    .iter()
                                    .any(|x| pre(x) && !x.lost && x.issued != w.issued))
                        {
                            settled.push((b, w.issued));
                        }
                        continue;
                    }
                    result = Err(format!(
                        "integrity: host read {id} (volume {}, bytes {}..{}) issued at {} ns, replied at {now} ns: {}",
                        io.dev,
                        io.offset,
                        io.end(),
                        req.at,
                        self.mismatch(hb, req.issued, b, found)
                    ));
                    break;
                }
                for &(_, _, at) in &blocks {
                    self.bufs.remove(&(host, at));
                }
                if result.is_ok() {
                    for (b, issued) in settled {
                        if let Some(hb) = self.host.get_mut(&(io.dev, b)) {
                            hb.settle(issued, self.epoch);
                        }
                    }
                }
                if all && ok && result.is_ok() {
                    self.counters.reads_checked += 1;
                }
            }
            Op::Write | Op::Discard => {
                for &(_, _, at) in &blocks {
                    self.bufs.remove(&(host, at));
                }
                let oldest_read = self.reads.keys().next().copied().unwrap_or(u64::MAX);
                for &(b, _, _) in &blocks {
                    let hb = self
                        .host
                        .get_mut(&(io.dev, b))
                        .expect("a write's blocks are tracked from its issue");
                    if let Some(w) = hb.write_mut(req.issued) {
                        w.acked = Some(acked);
                        w.acked_at = now;
                        w.floor = true;
                        if !ok {
                            // A failed write may have landed in part: undefined.
                            w.ver = ANY;
                        }
                        if (io.fua || self.crashless) && ok {
                            w.durable = true;
                        } else {
                            self.not_durable.push((io.dev, b, req.issued, acked));
                        }
                    }
                    hb.prune(oldest_read);
                }
            }
            Op::Flush => {
                if ok {
                    let oldest_read = self.reads.keys().next().copied().unwrap_or(u64::MAX);
                    let host = &mut self.host;
                    self.not_durable.retain(|&(vol, b, issued, a)| {
                        if vol != io.dev || a >= req.issued {
                            return true;
                        }
                        if let Some(hb) = host.get_mut(&(vol, b)) {
                            if let Some(w) = hb.write_mut(issued) {
                                w.durable = true;
                            }
                            hb.prune(oldest_read);
                        }
                        false
                    });
                }
            }
        }
        result
    }
}

#[cfg(test)]
mod tests;
