//! The DiskSim-grade mechanical disk (`model = "hdd-mechanical"`).
//!
//! What it models, following DiskSim 4.0's disk (`disksim_diskctlr.c`,
//! `disksim_diskcache.c`, `diskmodel/`); `docs/validation.md` maps every parameter:
//! * the zoned layout with skews, slips, spares and remapped defects ([`layout`]);
//! * seeks from an extracted table or the HPL curve ([`seek`]); a move that changes head
//!   costs at least the head-switch time, writes add the write-settle delta;
//! * rotation tracked in absolute time (the platter is at angle 0 at t = 0), so the
//!   rotational latency of a request depends on when it reaches its track; zero-latency
//!   reads where the drive has them;
//! * media access track by track, as runs of blocks passing back to back under the head
//!   (the bus pipeline, read-ahead progress and bus-overrun slips are closed forms per run);
//! * the controller: command overheads by hit/miss and the previous command's direction,
//!   data preparation, disconnect/reselect around a read miss's media phase and a
//!   write-through write's, per-sector bus transfer overlapped with the media, completion
//!   overheads;
//! * the on-board cache: segments (LRU) holding their last `segment_blocks` blocks,
//!   read-ahead after a read miss that continues in the background until the next command
//!   arrives (or its limit), read hits and partial hits on data being prefetched,
//!   read-ahead on idle hits, write-back (`fast_write_level` 2: every write at once; 1: a
//!   write that appends to the one being written at once, any other once the dirty data
//!   before it is on the media), destaging in the background;
//! * the queue: FCFS, or SSTF / SPTF through [`Timing::pick`].
//!
//! All times inside are f64 milliseconds of absolute simulated time.

pub mod layout;
pub mod seek;
pub mod tree_layout;

use crate::queue_order::{LbnOrder, LbnQueue};
use layout::{Layout, LayoutDef, Pbn};
use seek::{Seek, SeekDef};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use wattio_core::device::{Service, Timing};
use wattio_core::io::{Io, Op};
use wattio_core::time::Nanos;

pub const SECTOR: u64 = 512;
/// No window of free bus time (see `MechanicalDisk::bus_idle`).
const NO_WINDOW: (f64, f64) = (f64::INFINITY, f64::NEG_INFINITY);

/// The `[timing]` table of an `hdd-mechanical` catalogue entry.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MechanicalDef {
    pub model: String,
    pub surfaces: u32,
    pub cylinders: u32,
    pub rpm: f64,
    pub head_switch_ms: f64,
    /// Added to every non-zero write positioning (may be negative, as DiskSim allows).
    #[serde(default)]
    pub write_settle_ms: f64,
    pub seek: SeekDef,
    pub layout: LayoutDef,
    pub controller: ControllerDef,
    pub cache: CacheDef,
    /// The order the drive takes its queue in: fcfs, sstf (nearest cylinder to the arm),
    /// sptf (shortest positioning time), or DiskSim's LBN schedulers (`disksim_ioqueue.c`,
    /// each from the block where the previous request started or ended): look
    /// (ELEVATOR_LBN), clook (CYCLE_LBN), sstf-lbn (SSTF_LBN).
    #[serde(default = "fcfs")]
    pub scheduler: String,
    /// Key → where the value comes from.
    #[serde(default)]
    pub sources: toml::Table,
}

fn fcfs() -> String {
    "fcfs".into()
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ControllerDef {
    /// Bus time per 512-byte sector (DiskSim's `Bulk sector transfer time`).
    #[serde(default)]
    pub bus_ms_per_sector: f64,
    /// Bus time per sector for writes, if it differs.
    #[serde(default)]
    pub bus_write_ms_per_sector: Option<f64>,
    #[serde(default)]
    pub per_request_ms: f64,
    #[serde(default)]
    pub read_hit_after_read_ms: f64,
    #[serde(default)]
    pub read_hit_after_write_ms: f64,
    #[serde(default)]
    pub read_miss_after_read_ms: f64,
    #[serde(default)]
    pub read_miss_after_write_ms: f64,
    #[serde(default)]
    pub write_hit_after_read_ms: f64,
    #[serde(default)]
    pub write_hit_after_write_ms: f64,
    #[serde(default)]
    pub write_miss_after_read_ms: f64,
    #[serde(default)]
    pub write_miss_after_write_ms: f64,
    #[serde(default)]
    pub read_completion_ms: f64,
    #[serde(default)]
    pub write_completion_ms: f64,
    /// DiskSim's `Hold bus entire write xfer`. Kept for catalogue entries that set it; it
    /// has no effect here (in DiskSim it only matters once a write outgrows the buffer).
    #[serde(default)]
    pub hold_bus_write: bool,
    /// A write's positioning takes at least this long (DiskSim's `Minimum seek delay`,
    /// applied in `disk_check_hda` to writes that do not continue a sequential stream).
    #[serde(default)]
    pub min_seek_delay_ms: f64,
    /// Added to the command overhead before data moves (hits, writes, reconnections).
    #[serde(default)]
    pub data_prep_ms: f64,
    /// Reconnecting to the bus after a disconnect (DiskSim's `First reselect overhead`).
    #[serde(default)]
    pub reselect_ms: f64,
    /// A read miss disconnects after its command overhead; this long after a read ...
    #[serde(default)]
    pub read_disconnect_after_read_ms: f64,
    /// ... or after a write.
    #[serde(default)]
    pub read_disconnect_after_write_ms: f64,
    /// A write-through write disconnects once its data is buffered, and reconnects to
    /// complete when the media write is done.
    #[serde(default)]
    pub write_disconnect_ms: f64,
    /// The disk never disconnects: a read miss holds the bus until its data is ready.
    #[serde(default)]
    pub never_disconnect: bool,
    /// DiskSim's `Extra write disconnect`: the media write waits for a minimum of
    /// buffered blocks.
    #[serde(default)]
    pub extra_write_disconnect: bool,
    /// Commands the drive holds, in service and queued (DiskSim's `Max queue length`; 0:
    /// no limit). Only write prebuffering reads it: the writes it may take are those in
    /// the drive's own queue, the first `queue_depth` − 1 behind the one in service. The
    /// host's queue in front of the drive is the device queue of the run.
    #[serde(default)]
    pub queue_depth: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheDef {
    #[serde(default = "yes")]
    pub enabled: bool,
    pub segments: u32,
    pub segment_blocks: u32,
    /// Reserve the last segment for write data.
    #[serde(default)]
    pub separate_write_segment: bool,
    /// Reconnect for a read once this fraction of the request is buffered (≥ 1 block).
    #[serde(default)]
    pub read_water: f64,
    /// DiskSim's write water mark: when a write larger than the buffer reconnects for
    /// more data. Kept from the import; the model writes each block once it has crossed
    /// the bus and does not model writes outgrowing the buffer, so it has no effect.
    #[serde(default)]
    pub write_water: f64,
    /// 0 none, 1 to the end of the track, 2 to the end of the cylinder, 3 (and 4) to the
    /// end of the segment.
    #[serde(default)]
    pub continuous_read: u32,
    #[serde(default)]
    pub max_read_ahead: u32,
    /// Read-ahead counts from the end of the request (else from its start).
    #[serde(default = "yes")]
    pub read_ahead_over_requested: bool,
    /// 0 write-through; 1 write-back of one sequential stream (a write that does not append
    /// to the one being written waits for the dirty data before it); 2 write-back (without
    /// `write_prebuffering` a write still waits for a destage in progress, as at level 1).
    #[serde(default)]
    pub fast_write_level: u32,
    #[serde(default = "yes")]
    pub read_hits_on_write_data: bool,
    /// A read that hits entirely in an idle segment restarts the read-ahead there.
    #[serde(default)]
    pub read_ahead_on_idle_hit: bool,
    /// Zero-latency reads (read-on-arrival): a head landing inside the requested run
    /// starts reading there. Not set by the DiskSim import: DiskSim 4.0's disk model
    /// shows no read-on-arrival timing for its `Immediate buffer read` (see
    /// `disksim::import_parv`), so a drive imported from DiskSim reads in order.
    #[serde(default)]
    pub zero_latency_read: bool,
    /// A read miss also buffers the blocks of its first track that pass under the head
    /// before the requested ones.
    #[serde(default)]
    pub read_any_free_blocks: bool,
    /// Write prebuffering (DiskSim's `Allow write prebuffering`), with write-back
    /// (`fast_write_level` 2): a write's data goes into the cache while earlier writes are
    /// destaged; and a queued write takes the bus while the command in service does not
    /// need it (a read miss disconnected while its blocks come off the media, a
    /// write-through write waiting for its media write), completing once its data is in,
    /// its media write after the commands queued before it. Only a write whose whole
    /// transfer fits before that command reconnects is taken, and none that overlaps a
    /// command in service.
    #[serde(default)]
    pub write_prebuffering: bool,
    /// Segments that may hold data not yet on the media at once (DiskSim's `Maximum
    /// number of write segments`; 0: no limit). Only a prebuffering drive has more than
    /// one such stream: there a write that needs a segment while this many are dirty
    /// waits until all of them are destaged (as DiskSim's drive does), and no queued
    /// write is taken.
    #[serde(default)]
    pub write_segments: u32,
    /// A read-ahead stopped for a waiting command stops at once when it is reading (or
    /// waiting for) a sector, abandoning that sector (DiskSim's `Stop prefetch in sector`);
    /// else it first finishes the sector. Either way a seek or head switch in progress is
    /// finished first.
    #[serde(default)]
    pub stop_prefetch_in_sector: bool,
}

fn yes() -> bool {
    true
}

/// A cached range of blocks.
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    start: u64,
    end: u64,
    lru: u64,
    write: bool,
}

/// A prebuffered write whose data is in the cache and whose media write waits for the
/// `behind` commands that were queued before it (DiskSim destages it when it becomes the
/// drive's current request).
#[derive(Clone, Copy, Debug)]
struct Deferred {
    lbn: u64,
    count: u64,
    /// When its last block is in (ms).
    ready: f64,
    behind: usize,
}

/// Background read-ahead into segment `seg`: blocks `next..limit`, streaming from the
/// media starting at `t0` with the arm at `from`.
#[derive(Clone, Copy, Debug)]
struct Prefetch {
    seg: usize,
    next: u64,
    limit: u64,
    t0: f64,
    from: Pbn,
}

/// The mechanical disk.
#[derive(Clone, Debug)]
pub struct MechanicalDisk {
    def: MechanicalDef,
    layout: Layout,
    seek: Seek,
    period: f64,
    capacity: u64,
    sched: Sched,
    // state
    /// DiskSim's block-number order and its state, for `look`, `clook` and `sstf-lbn`.
    lbn_queue: Option<LbnQueue>,
    arm: Pbn,
    /// When the mechanism finishes what it is doing (destage, prefetch cut-off).
    mech_free: f64,
    /// Dirty data is being destaged until this time.
    dirty_until: f64,
    last_was_read: bool,
    /// One past the last block of the latest write.
    last_write_end: u64,
    /// When the bus is free for a prebuffered write during the command in service
    /// (ms, from..to; empty when it has no such window).
    bus_idle: (f64, f64),
    /// The blocks of the commands in service and when each completes (ms): a
    /// prebuffered write may not overlap them.
    in_service: Vec<(u64, u64, f64)>,
    /// The drive prebuffers writes (`Timing::prebuffers`; from `def`, kept so that the
    /// per-command path reads one flag).
    prebuffers: bool,
    /// Writes taken by prebuffering.
    prebuffered: u64,
    /// Prebuffered writes whose media write waits for the commands queued before them.
    deferred: Vec<Deferred>,
    /// The queue position `admits` last took a write from.
    admitted_at: usize,
    /// When each segment holding prebuffered or written-back data not yet on the media
    /// is clean again (only counted against `write_segments` with prebuffering).
    dirty_ends: Vec<f64>,
    segs: Vec<Seg>,
    prefetch: Option<Prefetch>,
    tick: u64,
    /// Recently mapped track stretches (a cache: the layout is the truth).
    stretches: RefCell<[Stretch; 4]>,
    stretch_next: Cell<usize>,
}

/// LBNs `lo..hi` lie back to back on one track from `at`, whose sector starts at
/// `angle` (a fraction of a revolution); each further sector `per_sector` later.
#[derive(Clone, Copy, Debug, Default)]
struct Stretch {
    lo: u64,
    hi: u64,
    at: Pbn,
    angle: f64,
    per_sector: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Sched {
    Fcfs,
    Sstf,
    Sptf,
    /// One of DiskSim's block-number orders ([`crate::queue_order`]), in `lbn_queue`.
    Lbn,
}

/// Blocks passing back to back under the head on one track: block `lbn + i` (`i < n`,
/// `n ≥ 1`) is done (its sector has passed) at `first + i * sect`; it sits at `at.plus(i)`.
#[derive(Clone, Copy, Debug)]
struct Run {
    lbn: u64,
    n: u64,
    first: f64,
    sect: f64,
    at: Pbn,
}

impl Run {
    fn done(&self, i: u64) -> f64 {
        self.first + i as f64 * self.sect
    }

    fn end(&self) -> f64 {
        self.done(self.n - 1)
    }

    fn pbn(&self, i: u64) -> Pbn {
        self.at.plus(i)
    }
}

/// The bus moves blocks `i0..i1` of `r` in order, `bt` each, none before it is done,
/// starting when it is free at `bus`; returns when it is free again. Closed form of
/// `bus = max(bus, done_i) + bt` over an arithmetic run of done times.
fn fifo(bus: f64, r: &Run, i0: u64, i1: u64, bt: f64) -> f64 {
    if i1 <= i0 {
        return bus;
    }
    let m = (i1 - i0) as f64;
    let f = r.done(i0);
    let tail = if r.sect > bt {
        f + (m - 1.0) * r.sect + bt
    } else {
        f + m * bt
    };
    (bus + m * bt).max(tail)
}

/// What a media access did: first positioning and latency (ms), when it ended and
/// where it left the arm.
#[derive(Clone, Copy, Debug)]
struct Access {
    pos: f64,
    lat: f64,
    end: f64,
    arm: Pbn,
}

/// A read-ahead's state at some time: blocks read (`got` is one past the last),
/// whether it is over, when it ends (or ended) and where the arm is.
#[derive(Clone, Copy, Debug)]
struct Progress {
    got: u64,
    complete: bool,
    end: f64,
    arm: Pbn,
    /// Stopped at `t`, a read-ahead first finishes what it is doing (DiskSim's
    /// `disk_buffer_stopable_access` waits for the pending seek or sector event): the
    /// mechanism is free at `stop_free`, the blocks before `stop_got` buffered.
    stop_free: f64,
    stop_got: u64,
}

impl MechanicalDisk {
    pub fn new(def: MechanicalDef) -> Result<MechanicalDisk, String> {
        if def.model != "hdd-mechanical" {
            return Err(format!(
                "timing.model: expected `hdd-mechanical`, got `{}`",
                def.model
            ));
        }
        if !(def.rpm.is_finite() && def.rpm > 0.0) {
            return Err(format!(
                "timing.rpm: expected a number > 0, got {}",
                def.rpm
            ));
        }
        for (k, v) in [
            ("head_switch_ms", def.head_switch_ms),
            ("write_settle_ms", def.write_settle_ms),
            (
                "controller.bus_ms_per_sector",
                def.controller.bus_ms_per_sector,
            ),
            ("cache.read_water", def.cache.read_water),
        ] {
            if !v.is_finite() {
                return Err(format!("timing.{k}: expected a finite number, got {v}"));
            }
        }
        if def.surfaces == 0 || def.cylinders == 0 {
            return Err("timing.surfaces, timing.cylinders: expected ≥ 1".into());
        }
        if def.cache.enabled && (def.cache.segments == 0 || def.cache.segment_blocks == 0) {
            return Err("timing.cache: expected segments ≥ 1 and segment_blocks ≥ 1".into());
        }
        let sched = match def.scheduler.as_str() {
            "fcfs" => Sched::Fcfs,
            "sstf" => Sched::Sstf,
            "sptf" => Sched::Sptf,
            s => match LbnOrder::parse(s) {
                Some(_) => Sched::Lbn,
                None => {
                    return Err(format!(
                        "timing.scheduler: unknown `{s}` (expected fcfs, sstf, sptf, look, clook or sstf-lbn)"
                    ))
                }
            },
        };
        let layout = Layout::new(&def.layout, def.surfaces, def.cylinders)?;
        let mut seek = Seek::new(def.seek.clone())?;
        seek.tabulate(def.cylinders);
        let nseg = if def.cache.enabled {
            def.cache.segments as usize
        } else {
            0
        };
        let mut segs = vec![Seg::default(); nseg];
        if def.cache.separate_write_segment {
            if let Some(s) = segs.last_mut() {
                s.write = true;
            }
        }
        // Prebuffering needs write-back, a segment beside the one in use, and room in the
        // drive's queue for a command beside the one in service.
        let c = &def.cache;
        let prebuffers = c.write_prebuffering
            && c.enabled
            && c.fast_write_level == 2
            && segs.len() >= 2
            && def.controller.queue_depth != 1;
        let lbn_queue = LbnOrder::parse(&def.scheduler)
            .map(|order| LbnQueue::new(order, layout.blocks() * SECTOR));
        Ok(MechanicalDisk {
            period: 60_000.0 / def.rpm,
            capacity: layout.blocks() * SECTOR,
            layout,
            seek,
            sched,
            lbn_queue,
            arm: Pbn {
                cyl: 0,
                head: 0,
                sector: 0,
            },
            mech_free: 0.0,
            dirty_until: 0.0,
            last_was_read: true,
            last_write_end: u64::MAX,
            bus_idle: NO_WINDOW,
            in_service: Vec::new(),
            prebuffered: 0,
            prebuffers,
            deferred: Vec::new(),
            admitted_at: 0,
            dirty_ends: Vec::new(),
            segs,
            prefetch: None,
            tick: 0,
            stretches: RefCell::new([Stretch::default(); 4]),
            stretch_next: Cell::new(0),
            def,
        })
    }

    pub fn from_toml(t: &toml::Table) -> Result<MechanicalDisk, String> {
        let def: MechanicalDef = toml::Value::Table(t.clone())
            .try_into()
            .map_err(|e| format!("timing: {e}"))?;
        MechanicalDisk::new(def)
    }

    pub fn def(&self) -> &MechanicalDef {
        &self.def
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn seek_curve(&self) -> &Seek {
        &self.seek
    }

    /// Revolution time in ms.
    pub fn period_ms(&self) -> f64 {
        self.period
    }

    /// Positioning time (ms) from `from` to `to`: the seek curve, at least a head switch
    /// if the head changes, plus write settling for a write that moves at all.
    pub fn seek_ms(&self, from: Pbn, to: Pbn, write: bool) -> f64 {
        positioning_ms(&self.seek, &self.def, from, to, write)
    }

    /// Time (ms) from absolute time `t` until sector `p` passes under the head.
    pub fn latency_ms(&self, t: f64, p: Pbn) -> f64 {
        self.latency_to(t, self.layout.angle(p))
    }

    /// Time (ms) from absolute time `t` until the platter reaches angle `a`.
    fn latency_to(&self, t: f64, a: f64) -> f64 {
        let theta = layout::frac(t / self.period);
        let d = layout::frac(a - theta);
        // Treat a position within a float's rounding of the sector start as on it.
        if d > 1.0 - 1e-9 {
            0.0
        } else {
            d * self.period
        }
    }

    /// Media access of `count` blocks from `lbn`, starting at `t` with the arm at `from`:
    /// per track, position (seek or head switch) then wait for the first sector, then
    /// transfer. Each stretch of blocks passing back to back under the head is reported
    /// as a [`Run`], in LBN order; `on_run` returning false stops the access after that
    /// run. Work is per track, not per block.
    ///
    /// `avail = Some((t0, per, need))`: the data is still crossing the bus, block
    /// `lbn + i` may be written from `t0 + max(i + 1, need) * per`. The arm seeks
    /// meanwhile; a sector whose block has not arrived when it comes under the head is
    /// passed over and written a revolution later (DiskSim's `disk_buffer_block_available`
    /// checked per sector in `disk_buffer_sector_done`).
    ///
    /// `immed`: zero-latency access (DiskSim's `Immediate buffer read`, forced on by
    /// `Read any free blocks`): a head landing inside a track's run reads from there to
    /// the run's end, then the run's head once it comes round (immedstart / immedend in
    /// `disk_buffer_sector_done`); the run completes one revolution after landing.
    #[allow(clippy::too_many_arguments)]
    fn media_runs<F: FnMut(Run) -> bool>(
        &self,
        t: f64,
        from: Pbn,
        lbn: u64,
        count: u64,
        write: bool,
        avail: Option<(f64, f64, u64)>,
        immed: bool,
        mut on_run: F,
    ) -> Access {
        let mut now = t;
        let mut arm = from;
        let mut first = None;
        let mut l = lbn;
        let end = lbn + count;
        let avail_at = |b: u64| {
            avail.map_or(f64::NEG_INFINITY, |(t0, per, need)| {
                t0 + (b - lbn + 1).max(need) as f64 * per
            })
        };
        'tracks: while l < end {
            let Some((p, n, angle)) = self.stretch(l, end - l) else {
                break;
            };
            let bpt_u = u64::from(self.layout.blocks_per_track(p.cyl, p.head));
            let pos = self.seek_ms(arm, p, write);
            let ready = (now + pos).max(avail_at(l));
            let wait = self.latency_to(ready, angle);
            let bpt = bpt_u as f64;
            let sect = self.period / bpt;
            if immed && n > 1 && wait > 0.0 {
                // The head is `r` sectors past the run's first sector; its next sector
                // boundary is `k` sectors in.
                let r = bpt - wait / sect;
                let kr = r.ceil();
                if kr >= 1.0 && kr < n as f64 {
                    let k = kr as u64;
                    let start = ready + (kr - r) * sect;
                    first.get_or_insert((pos, start - now - pos));
                    let head = Run {
                        lbn: l,
                        n: k,
                        first: start + (bpt - kr + 1.0) * sect,
                        sect,
                        at: p,
                    };
                    let tail = Run {
                        lbn: l + k,
                        n: n - k,
                        first: start + sect,
                        sect,
                        at: p.plus(k),
                    };
                    now = start + bpt * sect;
                    arm = p.plus(k - 1);
                    l += n;
                    if !on_run(head) || !on_run(tail) {
                        break;
                    }
                    continue;
                }
            }
            first.get_or_insert((pos, ready - now - pos + wait));
            // Stretches between revolutions lost to data arriving slower than the media.
            let mut i0 = 0u64;
            let mut s0 = ready + wait;
            loop {
                let i1 = match avail {
                    Some((_, per, _)) if per > sect => {
                        self.first_late(i0, n, s0, sect, |j| avail_at(l + j))
                    }
                    _ => n,
                };
                let run = Run {
                    lbn: l + i0,
                    n: i1 - i0,
                    first: s0 + sect,
                    sect,
                    at: p.plus(i0),
                };
                let go = on_run(run);
                if i1 >= n || !go {
                    now = run.end();
                    arm = run.pbn(run.n - 1);
                    l += i1;
                    if !go {
                        break 'tracks;
                    }
                    break;
                }
                let st = s0 + (i1 - i0) as f64 * sect;
                let late = avail_at(l + i1) - st;
                s0 = st + (late / self.period).ceil() * self.period;
                i0 = i1;
            }
        }
        let (pos, lat) = first.unwrap_or((0.0, 0.0));
        Access {
            pos,
            lat,
            end: now,
            arm,
        }
    }

    /// The first block index in `i0 + 1 .. n` whose data (`avail(j)`) arrives after its
    /// sector starts (`s0 + (j - i0) * sect`), or `n`. Lateness grows along the run once
    /// the bus is the slower, so a linear estimate is refined by a step or two.
    fn first_late(&self, i0: u64, n: u64, s0: f64, sect: f64, avail: impl Fn(u64) -> f64) -> u64 {
        let late = |j: u64| avail(j) > s0 + (j - i0) as f64 * sect;
        if n <= i0 + 1 {
            return n;
        }
        if !late(n - 1) {
            // Lateness is monotone past the `need` plateau: none late at the end, none
            // late at all (the plateau's blocks arrive together, before the first).
            return n;
        }
        let (mut lo, mut hi) = (i0 + 1, n - 1);
        // Binary search for the first late block (late(hi) holds).
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if late(mid) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// Where `l` lies and how many blocks from it (at most `want`) lie back to back on
    /// its track. Remembers the last few tracks' stretches: a read-ahead continues on the
    /// track its request ended on, and is looked at again by the next command.
    /// Also returns the angle where `l`'s sector starts.
    fn stretch(&self, l: u64, want: u64) -> Option<(Pbn, u64, f64)> {
        if let Some(s) = self
            .stretches
            .borrow()
            .iter()
            .find(|s| s.lo <= l && l < s.hi)
        {
            let k = l - s.lo;
            return Some((
                s.at.plus(k),
                (s.hi - l).min(want),
                layout::frac(s.angle + k as f64 * s.per_sector),
            ));
        }
        let p = self.layout.ltop(l)?;
        let bpt = u64::from(self.layout.blocks_per_track(p.cyl, p.head));
        let n = self.contiguous(l, p, bpt.saturating_sub(u64::from(p.sector)).max(1));
        let angle = self.layout.angle(p);
        let mut cache = self.stretches.borrow_mut();
        let slot = self.stretch_next.get() % cache.len();
        if let Some(s) = cache.get_mut(slot) {
            *s = Stretch {
                lo: l,
                hi: l + n,
                at: p,
                angle,
                per_sector: 1.0 / bpt.max(1) as f64,
            };
        }
        self.stretch_next.set(slot + 1);
        Some((p, n.min(want), angle))
    }

    /// How many blocks from `l` (at `p`, at most `span`) lie back to back on `p`'s track.
    fn contiguous(&self, l: u64, p: Pbn, span: u64) -> u64 {
        let at = |m: u64| {
            self.layout.ltop(l + m - 1).is_some_and(|q| {
                q.cyl == p.cyl
                    && q.head == p.head
                    && u64::from(q.sector) == u64::from(p.sector) + m - 1
            })
        };
        if span <= 1 {
            return 1;
        }
        if let Some(u) = self.layout.track_usable(p) {
            return span
                .min(u64::from(u).saturating_sub(u64::from(p.sector)))
                .max(1);
        }
        let q = self.layout.ltop(l + span - 1);
        if q.is_some_and(|q| {
            q.cyl == p.cyl
                && q.head == p.head
                && u64::from(q.sector) == u64::from(p.sector) + span - 1
        }) {
            return span;
        }
        // Usually the track holds fewer blocks (spare sectors) and the last one landed on
        // the next track's sector `q.sector`: the track then ends that many blocks back.
        if let Some(q) = q.filter(|q| q.cyl != p.cyl || q.head != p.head) {
            let m = span.saturating_sub(u64::from(q.sector) + 1);
            if m >= 1 && at(m) && !at(m + 1) {
                return m;
            }
        }
        // A slip inside: the longest back-to-back prefix.
        let (mut lo, mut hi) = (1u64, span - 1);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if at(mid) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// How far the read-ahead `pf` has got by time `t`.
    fn prefetch_progress(&self, pf: &Prefetch, t: f64) -> Progress {
        if pf.next >= pf.limit {
            return Progress {
                got: pf.next,
                complete: true,
                end: pf.t0,
                arm: pf.from,
                stop_free: pf.t0,
                stop_got: pf.next,
            };
        }
        let mut got = pf.next;
        let mut cut = None;
        let mut stop = (t, pf.next);
        // Where the mechanism was before each run: when the previous one ended, and on
        // its last sector.
        let mut prev = (pf.t0, pf.from);
        let acc = self.media_runs(
            pf.t0,
            pf.from,
            pf.next,
            pf.limit - pf.next,
            false,
            None,
            false,
            |r| {
                if r.end() <= t {
                    got = r.lbn + r.n;
                    prev = (r.end(), r.pbn(r.n - 1));
                    true
                } else {
                    let k = if r.first > t {
                        0
                    } else {
                        (((t - r.first) / r.sect).floor() as u64 + 1).min(r.n - 1)
                    };
                    got = r.lbn + k;
                    cut = Some(r.pbn(k));
                    // Stopped in the seek to this run's track: at the seek's end, none of
                    // it read; waiting for or reading sector k: once that sector is done,
                    // or at once without it if the drive stops in a sector.
                    let seek_end = prev.0 + self.seek_ms(prev.1, r.pbn(0), false);
                    stop = if k == 0 && t < seek_end {
                        (seek_end, r.lbn)
                    } else if self.def.cache.stop_prefetch_in_sector {
                        (t, r.lbn + k)
                    } else {
                        (r.done(k), r.lbn + k + 1)
                    };
                    false
                }
            },
        );
        match cut {
            None => Progress {
                got,
                complete: true,
                end: acc.end,
                arm: acc.arm,
                stop_free: acc.end,
                stop_got: got,
            },
            Some(arm) => Progress {
                got,
                complete: false,
                end: acc.end,
                arm,
                stop_free: stop.0,
                stop_got: stop.1,
            },
        }
    }

    /// Settle the background prefetch at time `t` (its progress `prog` if already known):
    /// blocks read by then join the cache. A read-ahead cut short finishes the sector it is
    /// on, or the seek to its next track, as DiskSim's drive does before it takes the next
    /// command (`disk_buffer_stopable_access`: the pending sector or seek event completes,
    /// `DISK_SEEK_STOPTIME`): the arm is on that sector or track, free when it is done.
    fn stop_prefetch_with(&mut self, t: f64, prog: Option<Progress>) {
        let Some(pf) = self.prefetch.take() else {
            return;
        };
        if pf.next >= pf.limit {
            return;
        }
        let prog = prog.unwrap_or_else(|| self.prefetch_progress(&pf, t));
        let got = if prog.complete {
            prog.got
        } else {
            prog.stop_got
        };
        if let Some(s) = self.segs.get_mut(pf.seg) {
            s.end = s.end.max(got);
        }
        self.arm = prog.arm;
        self.mech_free = if prog.complete {
            self.mech_free.max(prog.end)
        } else {
            self.mech_free.max(t.max(pf.t0)).max(prog.stop_free)
        };
    }

    fn stop_prefetch(&mut self, t: f64) {
        self.stop_prefetch_with(t, None);
    }

    /// With `Read any free blocks`, a read miss buffers every block of its first track
    /// that passes under the head before the request's first block: from where the head
    /// lands if that precedes the request on the track, else (once the head has come
    /// round) from the track's start (DiskSim's `disk_buffer_sector_done`, the
    /// `currblkno < seg->startblkno` case). Returns the segment's first block.
    fn free_blocks_start(&self, t: f64, from: Pbn, lbn: u64) -> u64 {
        let Some(p) = self.layout.ltop(lbn) else {
            return lbn;
        };
        let pos = self.seek_ms(from, p, false);
        let wait = self.latency_ms(t + pos, p);
        if wait <= 0.0 {
            return lbn;
        }
        let bpt = u64::from(self.layout.blocks_per_track(p.cyl, p.head));
        let sect = self.period / bpt as f64;
        let ahead = ((bpt as f64 - wait / sect).ceil() as u64) % bpt;
        let landing = (u64::from(p.sector) + ahead) % bpt;
        let back = if landing < u64::from(p.sector) {
            u64::from(p.sector) - landing
        } else {
            u64::from(p.sector)
        };
        let s = lbn.saturating_sub(back);
        // Only blocks of the same track (a slip or zone edge inside: keep the request's).
        match self.layout.ltop(s) {
            Some(q) if q.cyl == p.cyl && q.head == p.head => s,
            _ => lbn,
        }
    }

    fn overhead(&self, read: bool, hit: bool) -> f64 {
        let c = &self.def.controller;
        let after_read = self.last_was_read;
        c.per_request_ms
            + match (read, hit, after_read) {
                (true, true, true) => c.read_hit_after_read_ms,
                (true, true, false) => c.read_hit_after_write_ms,
                (true, false, true) => c.read_miss_after_read_ms,
                (true, false, false) => c.read_miss_after_write_ms,
                (false, true, true) => c.write_hit_after_read_ms,
                (false, true, false) => c.write_hit_after_write_ms,
                (false, false, true) => c.write_miss_after_read_ms,
                (false, false, false) => c.write_miss_after_write_ms,
            }
    }

    fn touch(&mut self, i: usize) {
        self.tick += 1;
        if let Some(s) = self.segs.get_mut(i) {
            s.lru = self.tick;
        }
    }

    /// The least recently used segment of the right kind.
    fn victim(&self, write: bool) -> Option<usize> {
        let want_write = write && self.def.cache.separate_write_segment;
        self.segs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.write == want_write || !self.def.cache.separate_write_segment)
            .min_by_key(|(_, s)| s.lru)
            .map(|(i, _)| i)
    }

    /// First and one-past-last LBN of the track holding `lbn`.
    fn track_bounds(&self, lbn: u64) -> Option<(u64, u64)> {
        let p = self.layout.ltop(lbn)?;
        let same = |q: Option<Pbn>| q.is_some_and(|q| q.cyl == p.cyl && q.head == p.head);
        // Fast path: no slip on the track, so its blocks sit at sectors 0..bpt.
        let bpt = self.layout.blocks_per_track(p.cyl, p.head) as u64;
        if let Some(lo) = lbn.checked_sub(p.sector as u64) {
            let hi = lo + bpt;
            let first = self.layout.ltop(lo);
            let last = self.layout.ltop(hi - 1);
            if first.is_some_and(|q| same(Some(q)) && q.sector == 0)
                && last.is_some_and(|q| same(Some(q)) && q.sector as u64 == bpt - 1)
                && !same(self.layout.ltop(hi))
                && (lo == 0 || !same(self.layout.ltop(lo - 1)))
            {
                return Some((lo, hi));
            }
        }
        let mut lo = lbn;
        while lo > 0 && same(self.layout.ltop(lo - 1)) {
            lo -= 1;
        }
        let mut hi = lbn + 1;
        while same(self.layout.ltop(hi)) {
            hi += 1;
        }
        Some((lo, hi))
    }

    /// The read-ahead limit of the non-DEC schemes (DiskSim's
    /// `disk_buffer_get_max_readahead`): `max_read_ahead` past the request if set; else,
    /// when the request's data is kept (`Read-ahead over requested = 0`), up to one
    /// segment from the request's start; else one segment past its end. Reading past
    /// the segment's size wraps over its oldest blocks (see the hit test).
    fn read_ahead_amount(&self, lbn: u64, end: u64) -> u64 {
        let c = &self.def.cache;
        let seg = c.segment_blocks as u64;
        if c.max_read_ahead > 0 {
            end + c.max_read_ahead as u64
        } else if !c.read_ahead_over_requested {
            if end - lbn >= seg {
                end
            } else {
                lbn + seg
            }
        } else {
            end + seg
        }
    }

    /// Read-ahead limit after a read of `lbn..end` into a segment starting at `seg_start`
    /// (DiskSim's `disk_buffer_get_max_readahead`).
    fn read_ahead_limit(&self, lbn: u64, end: u64, seg_start: u64) -> u64 {
        let c = &self.def.cache;
        let lim = match c.continuous_read {
            0 => end,
            // The "DEC" scheme: to the end of the track holding the next block, one track
            // further if the segment began on an earlier track.
            4 => match self.track_bounds(end) {
                Some((lo, hi)) if seg_start < lo => hi + (hi - lo),
                Some((_, hi)) => hi,
                None => end,
            },
            1 | 2 => {
                // Read-ahead runs on until the limit below, but a background read stops
                // rather than switch track (1) or cylinder (2) (DiskSim's
                // `disk_initiate_seek`).
                let Some(p) = self.layout.ltop(end.saturating_sub(1)) else {
                    return end;
                };
                let cap = self.read_ahead_amount(lbn, end);
                let mut l = end;
                while l < cap {
                    let Some((q, n, _)) = self.stretch(l, cap - l) else {
                        break;
                    };
                    if q.cyl != p.cyl || (c.continuous_read != 2 && q.head != p.head) {
                        break;
                    }
                    l += n;
                }
                l
            }
            _ => self.read_ahead_amount(lbn, end),
        };
        lim.min(self.layout.blocks())
    }

    /// Service one request arriving at `t` (ms), returning (end, first seek, first
    /// latency, overhead) in ms. A `fua` write completes only once on the media, whatever
    /// the write-back setting (SCSI/ATA Force Unit Access). `defer`: a prebuffered
    /// write-back write with this many commands queued before it, buffered now and written
    /// to the media after them (`destage_deferred`).
    fn access(
        &mut self,
        t: f64,
        op: Op,
        lbn: u64,
        count: u64,
        fua: bool,
        defer: Option<usize>,
    ) -> (f64, f64, f64, f64) {
        let read = op == Op::Read;
        let bt = self.def.controller.bus_ms_per_sector;
        let end_lbn = lbn + count;
        // Only a read miss that disconnects and a write-through write leave the bus free
        // while they are in service (set below).
        self.bus_idle = NO_WINDOW;
        if read {
            // A read-ahead that ended before this command arrived has left the
            // mechanism idle: settle it, so blocks past its limit are read afresh.
            let mut prog = None;
            if let Some(p) = self.prefetch {
                let pr = self.prefetch_progress(&p, t);
                if pr.complete && pr.end <= t {
                    self.stop_prefetch_with(t, Some(pr));
                } else {
                    prog = Some(pr);
                }
            }
            // Cached already, or on its way in from a running prefetch?
            let pf = self.prefetch;
            let mut hit_seg = None;
            let mut streaming = false;
            let seg_blocks = self.def.cache.segment_blocks as u64;
            for (i, s) in self.segs.iter().enumerate() {
                if s.write && !self.def.cache.read_hits_on_write_data {
                    continue;
                }
                let mut end = s.end;
                let live = pf.filter(|p| p.seg == i);
                if live.is_some_and(|p| s.start <= lbn && lbn < p.limit) {
                    // Blocks read by now count; the rest arrive as the prefetch goes on.
                    if let Some(pr) = prog {
                        end = end.max(pr.got);
                    }
                }
                // A segment holds its last `segment_blocks` blocks: read-ahead past that
                // wraps over its start (DiskSim's `disk_buffer_segment_wrap`).
                let start = s.start.max(end.saturating_sub(seg_blocks));
                if start <= lbn && lbn < end {
                    hit_seg = Some(i);
                    streaming = live.is_some();
                    break;
                }
            }
            if let Some(i) = hit_seg {
                let seg = self.segs.get(i).copied().unwrap_or_default();
                let ovh = self.overhead(true, true);
                let cmd_done = t + ovh;
                let mut bus = cmd_done + self.def.controller.data_prep_ms;
                let covered = if streaming {
                    seg.end
                } else {
                    seg.end.min(end_lbn)
                };
                // Blocks already buffered.
                let cached_to = covered.min(end_lbn).max(lbn);
                bus += (cached_to - lbn) as f64 * bt;
                if end_lbn <= cached_to {
                    // A whole hit. A prefetch running into this segment goes on, now to
                    // the further of its limit and this request's; any other stops, and
                    // with `read_ahead_on_idle_hit` the read-ahead restarts from the
                    // segment's end (DiskSim's `disk_buffer_attempt_access_swap` and
                    // `disk_check_hda`).
                    let lim = self.read_ahead_limit(lbn, end_lbn, seg.start);
                    match pf.filter(|p| streaming && p.seg == i) {
                        Some(mut p) => {
                            p.limit = p.limit.max(lim);
                            self.prefetch = Some(p);
                        }
                        None => {
                            self.stop_prefetch_with(t, prog);
                            if self.def.cache.read_ahead_on_idle_hit && lim > seg.end {
                                let ready = t + self.overhead(true, false);
                                self.prefetch = Some(Prefetch {
                                    seg: i,
                                    next: seg.end,
                                    limit: lim,
                                    t0: ready.max(self.mech_free),
                                    from: self.arm,
                                });
                            }
                        }
                    }
                } else {
                    // The rest streams in (prefetch continuing, limit extended if needed).
                    let mut p = match pf.filter(|p| streaming && p.seg == i) {
                        Some(p) => p,
                        None => {
                            // Whole-segment hit not covering the tail: read the tail,
                            // the mechanism starting once the read-miss overhead is
                            // done (DiskSim times every read's `overhead_done` so).
                            self.stop_prefetch_with(t, prog);
                            let ready = t + self.overhead(true, false);
                            Prefetch {
                                seg: i,
                                next: cached_to,
                                limit: end_lbn,
                                t0: ready.max(self.mech_free),
                                from: self.arm,
                            }
                        }
                    };
                    p.limit = p.limit.max(self.read_ahead_limit(lbn, end_lbn, seg.start));
                    let mut last = bus;
                    if end_lbn > p.next {
                        self.media_runs(
                            p.t0,
                            p.from,
                            p.next,
                            end_lbn - p.next,
                            false,
                            None,
                            false,
                            |r| {
                                let i0 = cached_to.saturating_sub(r.lbn).min(r.n);
                                let i1 = (end_lbn - r.lbn).min(r.n);
                                last = fifo(last, &r, i0, i1, bt);
                                true
                            },
                        );
                    }
                    bus = last;
                    self.prefetch = Some(p);
                    if let Some(s) = self.segs.get_mut(i) {
                        s.end = s.end.max(end_lbn);
                    }
                }
                self.touch(i);
                self.last_was_read = true;
                let end = bus + self.def.controller.read_completion_ms;
                return (end, 0.0, 0.0, ovh);
            }
            // Miss.
            self.stop_prefetch_with(t, prog);
            let ovh = self.overhead(true, false);
            let cmd_done = t + ovh;
            let mstart = cmd_done.max(self.mech_free);
            let water = ((count as f64 * self.def.cache.read_water).floor() as u64).max(1);
            let arm_before = self.arm;
            // DiskSim's `disk_read_arrive`: a miss disconnects after the command overhead
            // and reconnects (reselect + data preparation) once the water mark is
            // buffered; a never-disconnecting disk goes straight to data preparation.
            let c = &self.def.controller;
            let (mut bus, reconnect) = if c.never_disconnect {
                (cmd_done + c.data_prep_ms, 0.0)
            } else {
                let disc = if self.last_was_read {
                    c.read_disconnect_after_read_ms
                } else {
                    c.read_disconnect_after_write_ms
                };
                (cmd_done + disc, c.reselect_ms + c.data_prep_ms)
            };
            // The bus reconnects once the first `water` blocks are all in (with zero
            // latency they may arrive out of order), then moves every block in order.
            let water = water.min(count);
            let mut k = 0u64;
            let mut started = false;
            let mut prefix = f64::NEG_INFINITY;
            let immed = self.def.cache.zero_latency_read;
            let disconnected = bus;
            let mut reconnects = bus;
            let acc = self.media_runs(mstart, self.arm, lbn, count, false, None, immed, |r| {
                if !started && k + r.n >= water {
                    let j = water - k - 1;
                    reconnects = bus.max(prefix.max(r.done(j)));
                    bus = reconnects + reconnect + k as f64 * bt;
                    started = true;
                }
                if started {
                    bus = fifo(bus, &r, 0, r.n, bt);
                } else {
                    prefix = prefix.max(r.end());
                }
                k += r.n;
                true
            });
            let (pos, lat, mend, arm) = (acc.pos, acc.lat, acc.end, acc.arm);
            self.arm = arm;
            self.mech_free = mend;
            let seg_start = if self.def.cache.read_any_free_blocks {
                self.free_blocks_start(mstart, arm_before, lbn)
            } else {
                lbn
            };
            if let Some(i) = self.victim(false) {
                if let Some(s) = self.segs.get_mut(i) {
                    s.start = seg_start;
                    s.end = end_lbn;
                }
                self.touch(i);
                let limit = self.read_ahead_limit(lbn, end_lbn, lbn);
                if limit > end_lbn {
                    self.prefetch = Some(Prefetch {
                        seg: i,
                        next: end_lbn,
                        limit,
                        t0: mend,
                        from: arm,
                    });
                }
            }
            self.last_was_read = true;
            if !self.def.controller.never_disconnect {
                self.bus_idle = (disconnected, reconnects);
            }
            let end = bus + self.def.controller.read_completion_ms;
            return (end, pos, lat, ovh);
        }
        // Write.
        let bt = self.def.controller.bus_write_ms_per_sector.unwrap_or(bt);
        self.stop_prefetch(t);
        // DiskSim's write "hit" overheads are those of a drive with write-back enabled
        // at all, "miss" those of a write-through drive, whatever the cache holds
        // (`disk_write_arrive`).
        let hit = self.def.cache.enabled && self.def.cache.fast_write_level != 0;
        let ovh = self.overhead(false, hit);
        let cmd_done = t + ovh;
        let c = &self.def.controller;
        let fast = !fua && self.def.cache.enabled && self.def.cache.fast_write_level != 0;
        // Level 1 (DiskSim's LIMITED_FASTWRITE) write-back covers one sequential stream: a
        // write that appends to the one being written joins it at once; any other takes
        // its data only once the dirty data before it is on the media, and then is written
        // back in turn. (Written before as "write through while dirty data is pending",
        // which made such a write wait for its own media write too: barracuda's and
        // cheetah4LP's write means were 0.044 and 0.010 ms above DiskSim's own runs, and
        // open-loop, 11 % of cheetah4LP's writes differed from DiskSim's; now both agree,
        // docs/validation.md.)
        let appends = !self.last_was_read && lbn == self.last_write_end;
        // Level 2 without prebuffering holds a write the same way: DiskSim lets a write's
        // data in while the mechanism is busy (`disk_write_arrive`) only with
        // `Allow write prebuffering` or when that access can be stopped for it, and a
        // destage cannot.
        let holds = match self.def.cache.fast_write_level {
            1 => true,
            2 => !self.def.cache.write_prebuffering,
            _ => false,
        };
        let mut hold = if fast && holds && !appends {
            self.dirty_until
        } else {
            0.0
        };
        // With prebuffering, every write that does not append takes a segment of its own
        // until its destage ends; at the limit it waits until every destage has ended
        // (DiskSim, request by request: docs/validation.md).
        let segments = self.def.cache.write_segments as usize;
        let counts_segments = fast && self.def.cache.write_prebuffering && segments > 0;
        if counts_segments {
            self.dirty_ends.retain(|&e| e > cmd_done);
            if !appends && self.dirty_ends.len() >= segments {
                hold = hold.max(self.dirty_until);
            }
        }
        let data_start = cmd_done.max(hold) + c.data_prep_ms;
        let bus_end = data_start + count as f64 * bt;
        let mut mstart = cmd_done.max(self.mech_free);
        // A write positions for at least the minimum seek delay, unless it continues the
        // write the mechanism is still busy with.
        let streaming = !self.last_was_read && lbn == self.last_write_end && self.mech_free > t;
        if c.min_seek_delay_ms > 0.0 && !streaming {
            if let Some(p) = self.layout.ltop(lbn) {
                let pos = self.seek_ms(self.arm, p, true);
                mstart += (c.min_seek_delay_ms - pos).max(0.0);
            }
        }
        // The media writes each block once it has crossed the bus (for a write-back
        // write too: the destage starts while the data still arrives).
        // With `Extra write disconnect` set, DiskSim's `disk_buffer_block_available` lets
        // the media write nothing until min(count, 10) blocks (15 from 45 blocks on) are
        // buffered.
        let need = if c.extra_write_disconnect {
            if count < 45 {
                count.min(10)
            } else {
                15
            }
        } else {
            1
        };
        let avail = Some((data_start, bt, need));
        let deferring = fast && defer.is_some();
        let (pos, lat, mend) = match defer {
            // A prebuffered write with commands queued before it: its media write waits
            // for them (`destage_deferred`).
            Some(behind) if fast => {
                self.deferred.push(Deferred {
                    lbn,
                    count,
                    ready: bus_end,
                    behind,
                });
                (0.0, 0.0, self.mech_free)
            }
            _ => {
                let acc =
                    self.media_runs(mstart, self.arm, lbn, count, true, avail, false, |_| true);
                self.arm = acc.arm;
                self.mech_free = acc.end;
                (acc.pos, acc.lat, acc.end)
            }
        };
        // Written data stays cached for later reads.
        for s in self.segs.iter_mut() {
            // Overlapping stale copies are dropped.
            if s.start < end_lbn && lbn < s.end {
                s.end = s.start;
            }
        }
        if let Some(i) = self.victim(true) {
            if let Some(s) = self.segs.get_mut(i) {
                s.start = lbn;
                s.end = end_lbn;
            }
            self.touch(i);
        }
        self.last_was_read = false;
        self.last_write_end = end_lbn;
        let c = &self.def.controller;
        let wc = c.write_completion_ms;
        if counts_segments && !deferring {
            match self.dirty_ends.last_mut() {
                Some(e) if appends => *e = e.max(mend),
                _ => self.dirty_ends.push(mend),
            }
        }
        if fast {
            self.dirty_until = self.dirty_until.max(mend);
            (bus_end + wc, 0.0, 0.0, ovh)
        } else {
            // Disconnected once the data is in, reconnect when the media is done.
            self.bus_idle = (bus_end + c.write_disconnect_ms, mend);
            let back = mend.max(bus_end + c.write_disconnect_ms) + c.reselect_ms;
            (back + wc, pos, lat, ovh)
        }
    }

    /// A command has been serviced (`all`: a FLUSH, or the drive stops): the prebuffered
    /// writes it was the last command queued before are written to the media once the
    /// mechanism is free, a read-ahead giving way to them.
    fn destage_deferred(&mut self, all: bool) {
        let mut i = 0;
        while i < self.deferred.len() {
            let d = &mut self.deferred[i];
            d.behind = d.behind.saturating_sub(1);
            if !all && d.behind > 0 {
                i += 1;
                continue;
            }
            let d = self.deferred.remove(i);
            self.stop_prefetch(self.mech_free);
            let start = self.mech_free.max(d.ready);
            let acc = self.media_runs(start, self.arm, d.lbn, d.count, true, None, false, |_| true);
            self.arm = acc.arm;
            self.mech_free = acc.end;
            self.dirty_until = self.dirty_until.max(acc.end);
            if self.def.cache.write_segments > 0 {
                self.dirty_ends.push(acc.end);
            }
        }
    }

    /// Estimated positioning time (ms) to reach `lbn` from the current arm at `t`.
    fn position_estimate(&self, t: f64, lbn: u64, write: bool) -> f64 {
        let Some(p) = self.layout.ltop(lbn) else {
            return f64::INFINITY;
        };
        let s = self.seek_ms(self.arm, p, write);
        s + self.latency_ms(t + s, p)
    }
}

fn ns_to_ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

fn ms_to_ns(ms: f64) -> Nanos {
    if ms.is_finite() && ms > 0.0 {
        (ms * 1e6).round() as Nanos
    } else {
        0
    }
}

impl Timing for MechanicalDisk {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn service(&mut self, start: Nanos, io: &Io) -> Service {
        let lbn = io.offset / SECTOR;
        let end = (io.offset + io.len as u64).div_ceil(SECTOR);
        let count = end.saturating_sub(lbn).max(1);
        let t = ns_to_ms(start);
        let prebuffers = self.prebuffers;
        if prebuffers {
            // A command ending at `t` has ended (its end in ns is rounded to the nearest
            // ns).
            self.in_service.retain(|&(_, _, until)| until > t + 1e-6);
        }
        // A write taken beside the command in service (`admits`): its transfer uses the
        // bus while that command does not; its media write follows that command's, so a
        // read-ahead that command would have begun never starts.
        let beside = prebuffers && !self.in_service.is_empty();
        let window = self.bus_idle;
        if beside {
            if let Some(pf) = self.prefetch.filter(|pf| t < pf.t0) {
                self.prefetch = None;
                self.mech_free = self.mech_free.max(pf.t0);
            }
        }
        match io.op {
            Op::Read | Op::Write => {
                if let Some(q) = &mut self.lbn_queue {
                    q.started(lbn, count);
                }
                // Taken with commands queued before it: its media write waits for them.
                let defer = (beside && self.admitted_at > 0).then_some(self.admitted_at);
                let (fin, seek, lat, ovh) = self.access(t, io.op, lbn, count, io.fua, defer);
                if prebuffers {
                    self.in_service.push((lbn, lbn + count, fin));
                }
                if beside {
                    self.prebuffered += 1;
                    self.bus_idle = (fin, window.1);
                } else if !self.deferred.is_empty() {
                    self.destage_deferred(false);
                }
                let total = ms_to_ns(fin - t);
                let seek_ns = ms_to_ns(seek).min(total);
                let rotate_ns = ms_to_ns(lat).min(total - seek_ns);
                let overhead_ns = ms_to_ns(ovh).min(total - seek_ns - rotate_ns);
                Service {
                    seek_ns,
                    rotate_ns,
                    overhead_ns,
                    transfer_ns: total - seek_ns - rotate_ns - overhead_ns,
                    ..Service::default()
                }
            }
            Op::Flush => {
                // Wait for dirty data to reach the media.
                self.stop_prefetch(t);
                self.destage_deferred(true);
                let wait = (self.dirty_until - t).max(0.0);
                Service {
                    overhead_ns: ms_to_ns(wait),
                    ..Service::default()
                }
            }
            Op::Discard => Service::default(),
        }
    }

    fn schedules(&self) -> bool {
        self.sched != Sched::Fcfs
    }

    fn prebuffers(&self) -> bool {
        self.prebuffers
    }

    fn admits(&mut self, now: Nanos, io: &Io, position: usize) -> bool {
        let depth = self.def.controller.queue_depth as usize;
        if io.op != Op::Write || io.fua || io.len == 0 || (depth > 0 && position + 1 >= depth) {
            return false;
        }
        let t = ns_to_ms(now);
        let lbn = io.offset / SECTOR;
        let end = (io.offset + io.len as u64).div_ceil(SECTOR);
        if self
            .in_service
            .iter()
            .any(|&(lo, hi, until)| until > t + 1e-6 && lo < end && lbn < hi)
        {
            return false;
        }
        // A segment of its own: none while the dirty ones are at the limit.
        let segments = self.def.cache.write_segments as usize;
        if segments > 0 {
            let dirty = self.dirty_ends.iter().filter(|&&e| e > t).count();
            if dirty + self.deferred.len() >= segments {
                return false;
            }
        }
        // The whole transfer, command to completion, inside the bus's free window (as
        // `access` times a write-back write).
        let (from, to) = self.bus_idle;
        let c = &self.def.controller;
        let bt = c.bus_write_ms_per_sector.unwrap_or(c.bus_ms_per_sector);
        let done = t
            + self.overhead(false, true)
            + c.data_prep_ms
            + (end - lbn) as f64 * bt
            + c.write_completion_ms;
        if from <= t && done <= to {
            self.admitted_at = position;
            true
        } else {
            false
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        if self.prebuffers {
            vec![("prebuffered_writes".into(), self.prebuffered as f64)]
        } else {
            Vec::new()
        }
    }

    fn pick(&mut self, now: Nanos, queue: &[Io]) -> usize {
        if let Some(q) = &mut self.lbn_queue {
            return q.pick(queue);
        }
        let t = ns_to_ms(now).max(self.mech_free);
        let mut best = (f64::INFINITY, 0usize);
        for (i, io) in queue.iter().enumerate() {
            let lbn = io.offset / SECTOR;
            let cost = match self.sched {
                Sched::Sstf => self
                    .layout
                    .ltop(lbn)
                    .map_or(f64::INFINITY, |p| p.cyl.abs_diff(self.arm.cyl) as f64),
                _ => self.position_estimate(t, lbn, io.op == Op::Write),
            };
            if cost < best.0 {
                best = (cost, i);
            }
        }
        best.1
    }

    fn geometry(&self) -> Option<std::sync::Arc<dyn wattio_core::Geometry>> {
        Some(std::sync::Arc::new(MechanicalGeometry {
            layout: self.layout.clone(),
            seek: self.seek.clone(),
            def: self.def.clone(),
            period_ms: self.period,
        }))
    }

    fn on_power(&mut self, now: Nanos, ready: bool) {
        let t = ns_to_ms(now);
        if !ready {
            // Spinning down ends any read-ahead; the arm parks at cylinder 0.
            self.stop_prefetch(t);
            self.arm = Pbn {
                cyl: 0,
                head: 0,
                sector: 0,
            };
        }
        self.mech_free = self.mech_free.min(t);
        // Work pending on the media counts as done, as `dirty_until` is cut short: that
        // of prebuffered writes too.
        self.dirty_until = self.dirty_until.min(t);
        self.deferred.clear();
        self.dirty_ends.clear();
        self.bus_idle = NO_WINDOW;
        self.in_service.clear();
    }
}

/// Positioning time (ms) from `from` to `to` (see [`MechanicalDisk::seek_ms`]); shared with
/// the geometry queries, which answer without the disk's state.
#[inline]
fn positioning_ms(seek: &Seek, def: &MechanicalDef, from: Pbn, to: Pbn, write: bool) -> f64 {
    let dist = from.cyl.abs_diff(to.cyl);
    let mut t = seek.time_ms(dist);
    if from.head != to.head && def.head_switch_ms > t {
        t = def.head_switch_ms;
    }
    if t != 0.0 && write {
        t = (t + def.write_settle_ms).max(0.0);
    }
    t
}

/// The disk's geometry for functions ([`wattio_core::Geometry`]): its layout, seek curve
/// and rotation, without its state (arm position, caches).
#[derive(Debug)]
pub struct MechanicalGeometry {
    layout: Layout,
    seek: Seek,
    def: MechanicalDef,
    period_ms: f64,
}

impl MechanicalGeometry {
    fn pbn(&self, offset: u64) -> Option<Pbn> {
        self.layout.ltop(offset / SECTOR)
    }
}

impl wattio_core::Geometry for MechanicalGeometry {
    fn locate(&self, offset: u64) -> Option<wattio_core::Location> {
        let p = self.pbn(offset)?;
        Some(wattio_core::Location {
            zone: self.layout.zone_of_cyl(p.cyl)? as u32,
            cylinder: p.cyl,
            surface: p.head,
            sector: p.sector,
            sectors_per_track: self.layout.blocks_per_track(p.cyl, p.head),
            angle: self.layout.angle(p),
        })
    }

    fn rotation_period(&self) -> Nanos {
        ms_to_ns(self.period_ms)
    }

    fn angle_at(&self, t: Nanos) -> f64 {
        // The model's rotational frame: the platter is at angle 0 at time 0 (`latency_to`).
        layout::frac(ns_to_ms(t) / self.period_ms)
    }

    fn seek_time(&self, from: u64, to: u64, write: bool) -> Option<Nanos> {
        let (a, b) = (self.pbn(from)?, self.pbn(to)?);
        Some(ms_to_ns(positioning_ms(&self.seek, &self.def, a, b, write)))
    }
}

pub fn timing_from_toml(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    Ok(Box::new(MechanicalDisk::from_toml(t)?))
}
