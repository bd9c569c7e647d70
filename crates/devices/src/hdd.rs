//! The parametric disk (`model = "hdd-parametric"`): the analytical model of the spin-down
//! literature and of FS2's evaluation (§5): T = overhead + seek + rotation + transfer.
//!
//! * Seek: zero for a request that starts where the previous one ended (sequential);
//!   otherwise, if `track_to_track_ms` and `full_stroke_ms` are given, the three-point curve
//!   of Lee and Katz (SIGMETRICS 1993; DiskSim's `SEEK_3PT_CURVE`), in x = seek distance /
//!   capacity: `t(x) = t2t + b·√x + c·x` with `b = (−10·t2t + 15·avg − 5·full) / 3` and
//!   `c = (7·t2t − 15·avg + 8·full) / 3`. It starts at track-to-track, reaches the full
//!   stroke at x = 1, and its mean over two uniform random positions (distance density
//!   2(1 − x)) is the average seek, which is how datasheets define "average seek" (the
//!   weighted average of all seek combinations) — not the seek at a third of the stroke,
//!   which a concave curve puts above the mean. Anchors for which the curve would fall
//!   anywhere (b < 0 or b/2 + c < 0) are rejected. Without the two anchors, the average
//!   seek for any move.
//! * Rotation: half a revolution for a non-sequential request (the expected latency; this
//!   model does not track rotational phase — the `hdd-mechanical` model does).
//! * Transfer: `len` at the media rate, interpolated linearly from the outer-zone rate at
//!   offset 0 to the inner-zone rate at the end (zoned recording), or one rate if only
//!   `media_rate_mbps` is given.
//!
//! * On-disk cache (optional: `cache_bytes`, `cache_segments`, `interface_mbps`): the
//!   drive's buffer as `cache_segments` LRU segments of `cache_bytes / cache_segments`
//!   bytes, each holding one run of consecutive bytes read or written (a request that
//!   overlaps or continues a segment's run joins it, cut to the segment's size around the
//!   request: a sequential stream keeps its latest bytes; a write into a cached run
//!   updates it in place).
//!   A read inside one segment is a hit: it costs the overhead and the transfer at the
//!   interface rate, and leaves the head where it was. Anything else is served from the
//!   media as above. Writes go through to the media (write cache off) and leave their
//!   bytes in the buffer; a discard removes its range from every segment. A request of no
//!   bytes leaves the buffer as it is and is served from the media.
//!   No read-ahead: a segment holds only bytes a request moved.
//!
//! Timing parameters (`[timing]`): `capacity_bytes`, `rpm`, `avg_seek_ms`,
//! optional `track_to_track_ms`, `full_stroke_ms`, `media_rate_mbps` or
//! `media_rate_outer_mbps` + `media_rate_inner_mbps`, optional `overhead_ms`,
//! optional `cache_bytes` + `cache_segments` + `interface_mbps`.

use crate::params::{check_keys, count, opt_f64, positive};
use wattio_core::device::{Service, Timing};
use wattio_core::io::{Io, Op};
use wattio_core::time::{secs_to_ns, Nanos};

#[derive(Clone, Debug)]
pub struct ParametricHdd {
    capacity: u64,
    /// 1 / capacity: a multiply per request instead of two divisions, which dominated the
    /// model's cost.
    inv_capacity: f64,
    half_rotation: Nanos,
    avg_seek: Nanos,
    /// Three-point curve `t2t + b·√x + c·x` as (t2t, b, c) in seconds, when it is given.
    curve: Option<(f64, f64, f64)>,
    /// Bytes per second at offset 0 and at the end.
    rate_outer: f64,
    rate_inner: f64,
    overhead: Nanos,
    head: u64,
    cache: Option<Buffer>,
}

/// The on-disk buffer: LRU segments, each one run of bytes `lo..hi`.
///
/// Stored as parallel arrays (`lo`, `hi`, `used`), with the recency order as a doubly
/// linked list, so that the least recently used segment is found without a pass, and the
/// segments holding a run in address order (runs are disjoint), so that the runs a request
/// touches are found by a binary search over their ends: a few steps whatever the segment
/// count (up to 1024), where a pass over every segment was 11 % of the PARAID stacks'
/// cycles with the MAP3367's 16 (after it had been made two branch-free counts; as one
/// scalar pass finding the LRU by the smallest stamp it was 12–14 %).
#[derive(Clone, Debug)]
struct Buffer {
    segment_bytes: u64,
    /// Bytes per second over the interface, for a hit.
    interface_rate: f64,
    /// Segment `i` holds `lo[i]..hi[i]`; an empty run (`lo == hi`, only ever `0..0`) holds
    /// nothing.
    lo: Vec<u64>,
    hi: Vec<u64>,
    /// Use counter: a segment's `used` is the count at its last use (0: never used). The
    /// stamps choose between runs a request joins; the list below orders the same uses.
    used: Vec<u64>,
    clock: u64,
    /// Recency list: `newer[i]`/`older[i]` are the neighbours of segment `i` (`NONE` at
    /// the ends), `mru` and `lru` its ends. Segments never used sit at the old end in
    /// index order, so the LRU is always the segment with the smallest stamp, the lowest
    /// index among equal ones — what a pass taking the first minimum found.
    newer: Vec<u16>,
    older: Vec<u16>,
    mru: u16,
    lru: u16,
    /// The segments holding a run, in address order, and their runs' ends in the same
    /// order (what the search reads: disjoint non-empty runs have distinct, increasing
    /// ends).
    order: Vec<u16>,
    ends: Vec<u64>,
    /// Scratch for rewriting a stretch of `order`.
    redo: Vec<u16>,
}

const NONE: u16 = u16::MAX;

/// What [`Buffer::scan`] found (`usize::MAX`: none).
#[derive(Debug, PartialEq)]
struct Scan {
    inside: usize,
    join: usize,
    lru: usize,
    overlapping: u32,
    /// `order[from..to]`: the runs the request touches (overlaps or continues).
    from: usize,
    to: usize,
}

impl Buffer {
    fn new(segment_bytes: u64, interface_rate: f64, segments: usize) -> Buffer {
        // At most 1024 segments (checked where the table is read): u16 links suffice.
        let n = segments;
        let link = |i: usize| if i < n { i as u16 } else { NONE };
        Buffer {
            segment_bytes,
            interface_rate,
            lo: vec![0; n],
            hi: vec![0; n],
            used: vec![0; n],
            clock: 0,
            // Index order from the old end: 0 is the least recent, n − 1 the most.
            newer: (0..n).map(|i| link(i + 1)).collect(),
            older: (0..n)
                .map(|i| i.checked_sub(1).map_or(NONE, link))
                .collect(),
            mru: link(n.wrapping_sub(1)),
            lru: link(0),
            order: Vec::with_capacity(n),
            ends: Vec::with_capacity(n),
            redo: Vec::with_capacity(n),
        }
    }

    /// Stamp segment `i` as the most recently used.
    fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.used[i] = self.clock;
        let i16 = i as u16;
        if self.mru == i16 {
            return;
        }
        // Unlink (it has a newer neighbour: it is not the MRU) and put it at the new end.
        let (newer, older) = (self.newer[i], self.older[i]);
        self.older[newer as usize] = older;
        if older == NONE {
            self.lru = newer;
        } else {
            self.newer[older as usize] = newer;
        }
        self.older[i] = self.mru;
        self.newer[i] = NONE;
        self.newer[self.mru as usize] = i16;
        self.mru = i16;
    }

    /// The runs touching `lo..hi` (`lo < hi`): from the first whose end reaches `lo`, on
    /// in address order while they start at or before `hi`.
    #[inline]
    fn touching(&self, lo: u64, hi: u64) -> (usize, usize) {
        let from = self.ends.partition_point(|&b| b < lo);
        let mut to = from;
        while to < self.order.len() && self.lo[self.order[to] as usize] <= hi {
            to += 1;
        }
        (from, to)
    }

    /// For a non-empty request `lo..hi`: the segment holding all of it (runs are
    /// disjoint, so at most one), the most recently used one whose run it overlaps or
    /// continues, the least recently used one, and how many runs it overlaps.
    #[inline]
    fn scan(&self, lo: u64, hi: u64) -> Scan {
        debug_assert!(lo < hi);
        let (from, to) = self.touching(lo, hi);
        let mut s = Scan {
            inside: usize::MAX,
            join: usize::MAX,
            lru: self.lru as usize,
            overlapping: 0,
            from,
            to,
        };
        // Stamps of runs are distinct (each was stamped when made): the newest is unique.
        let mut join_used = 0;
        for &i in &self.order[from..to] {
            let i = i as usize;
            let (a, b, u) = (self.lo[i], self.hi[i], self.used[i]);
            if a <= lo && hi <= b {
                s.inside = i;
            }
            s.overlapping += u32::from(a < hi && lo < b);
            if u > join_used {
                s.join = i;
                join_used = u;
            }
        }
        s
    }

    /// Whether `lo..hi` lies inside one segment; a hit makes it the most recent.
    fn hit(&mut self, scan: &Scan) -> bool {
        if scan.inside >= self.lo.len() {
            return false;
        }
        self.touch(scan.inside);
        true
    }

    /// Bytes `lo..hi` (`lo < hi`) moved between the host and the media. The most recently
    /// used segment whose run they overlap or continue takes them in (the union, cut to
    /// `segment_bytes` around them: the request's own latest bytes, then what follows,
    /// then what precedes); else the least recently used segment holds them alone. Other
    /// segments drop the range.
    fn keep(&mut self, lo: u64, hi: u64, scan: &Scan) {
        let seg = self.segment_bytes;
        let (from, to) = (scan.from, scan.to);
        let (i, (ulo, uhi)) = if scan.join < self.lo.len() {
            let (a, b) = (self.lo[scan.join], self.hi[scan.join]);
            (scan.join, (a.min(lo), b.max(hi)))
        } else {
            (scan.lru, (lo, hi))
        };
        let end = uhi.min(hi.max(lo.saturating_add(seg)));
        let start = ulo.max(end.saturating_sub(seg));
        let (old_lo, old_hi) = (self.lo[i], self.hi[i]);
        self.lo[i] = start;
        self.hi[i] = end;
        self.touch(i);
        if scan.join >= self.lo.len() {
            // Nothing touches the request (`from == to`): the LRU segment's new run goes in
            // at `from`, and its old run, if it held one, leaves the order elsewhere — one
            // shift of the runs between (the common case of a random workload).
            debug_assert_eq!(from, to);
            let at = if old_lo < old_hi {
                let p = self.ends.partition_point(|&b| b < old_hi);
                debug_assert_eq!(self.order[p] as usize, i);
                if p < from {
                    self.order.copy_within(p + 1..from, p);
                    self.ends.copy_within(p + 1..from, p);
                    from - 1
                } else {
                    self.order.copy_within(from..p, from + 1);
                    self.ends.copy_within(from..p, from + 1);
                    from
                }
            } else {
                self.order.insert(from, 0);
                self.ends.insert(from, 0);
                from
            };
            self.order[at] = i as u16;
            self.ends[at] = end;
            return;
        }
        // The touched stretch of the order, rewritten: the other runs there lose the
        // request's range (emptied ones leave), and segment `i`'s new run takes its place
        // by address. It stays between the runs before the stretch (ending before `lo`
        // and before the joined run) and those after it (starting after `hi` and after the
        // joined run), since it lies within the joined run and the request.
        self.redo.clear();
        let mut placed = false;
        for k in from..to {
            let j = self.order[k] as usize;
            if j == i {
                continue;
            }
            self.cut(j, lo, hi);
            if self.lo[j] < self.hi[j] {
                if !placed && self.lo[i] < self.lo[j] {
                    self.redo.push(i as u16);
                    placed = true;
                }
                self.redo.push(j as u16);
            }
        }
        if !placed {
            self.redo.push(i as u16);
        }
        self.rewrite(from, to);
    }

    /// Drop `lo..hi` (`lo < hi`) from every segment (a discard).
    fn forget(&mut self, lo: u64, hi: u64) {
        let (from, to) = self.touching(lo, hi);
        self.redo.clear();
        for k in from..to {
            let j = self.order[k] as usize;
            self.cut(j, lo, hi);
            if self.lo[j] < self.hi[j] {
                self.redo.push(j as u16);
            }
        }
        self.rewrite(from, to);
    }

    /// `order[from..to]` becomes `redo`, with the runs' ends: in place, the stretch
    /// growing by one (a run placed where none was cut) or shrinking (runs emptied).
    /// (`Vec::splice` did the same at three times the cost of the whole search.)
    fn rewrite(&mut self, from: usize, to: usize) {
        let m = self.redo.len();
        if m > to - from {
            debug_assert_eq!(m, to - from + 1);
            self.order.insert(to, 0);
            self.ends.insert(to, 0);
        } else if m < to - from {
            let n = self.order.len();
            self.order.copy_within(to..n, from + m);
            self.ends.copy_within(to..n, from + m);
            self.order.truncate(n - (to - from - m));
            self.ends.truncate(n - (to - from - m));
        }
        for (k, &j) in self.redo.iter().enumerate() {
            self.order[from + k] = j;
            self.ends[from + k] = self.hi[j as usize];
        }
    }

    /// Drop `lo..hi` from segment `j`'s run: a run it covers only partly keeps its longer
    /// side.
    fn cut(&mut self, j: usize, lo: u64, hi: u64) {
        let (a, b) = (self.lo[j], self.hi[j]);
        if b <= lo || hi <= a {
            return;
        }
        let below = lo.saturating_sub(a);
        let above = b.saturating_sub(hi);
        (self.lo[j], self.hi[j]) = if below == 0 && above == 0 {
            (0, 0)
        } else if below >= above {
            (a, lo)
        } else {
            (hi, b)
        };
    }
}

const KEYS: &[&str] = &[
    "capacity_bytes",
    "rpm",
    "avg_seek_ms",
    "track_to_track_ms",
    "full_stroke_ms",
    "media_rate_mbps",
    "media_rate_outer_mbps",
    "media_rate_inner_mbps",
    "overhead_ms",
    "cache_bytes",
    "cache_segments",
    "interface_mbps",
];

impl ParametricHdd {
    pub fn from_toml(t: &toml::Table) -> Result<ParametricHdd, String> {
        check_keys(t, KEYS)?;
        let capacity = count(t, "capacity_bytes")?;
        let rpm = positive(t, "rpm")?;
        let avg_seek = positive(t, "avg_seek_ms")? / 1e3;
        let t2t = opt_f64(t, "track_to_track_ms")?.map(|v| v / 1e3);
        let full = opt_f64(t, "full_stroke_ms")?.map(|v| v / 1e3);
        let curve = match (t2t, full) {
            (Some(t2t), Some(full)) => {
                if !(t2t <= avg_seek && avg_seek <= full) {
                    return Err(format!(
                        "timing: expected track_to_track_ms ≤ avg_seek_ms ≤ full_stroke_ms, got {} / {} / {}",
                        t2t * 1e3, avg_seek * 1e3, full * 1e3
                    ));
                }
                let b = (-10.0 * t2t + 15.0 * avg_seek - 5.0 * full) / 3.0;
                let c = (7.0 * t2t - 15.0 * avg_seek + 8.0 * full) / 3.0;
                // t'(x) = b/(2√x) + c is smallest at x = 1 when c < 0: monotone iff b ≥ 0 and
                // b/2 + c ≥ 0 (a tolerance for rounding at the boundary).
                if b < -1e-12 || b / 2.0 + c < -1e-12 {
                    return Err(format!(
                        "timing: track_to_track_ms / avg_seek_ms / full_stroke_ms = {} / {} / {} give no rising seek curve whose mean over random seeks is the average (Lee-Katz: need 3·avg ≥ 2·t2t + full and 15·avg ≤ 4·t2t + 11·full)",
                        t2t * 1e3, avg_seek * 1e3, full * 1e3
                    ));
                }
                Some((t2t, b, c))
            }
            (None, None) => None,
            _ => {
                return Err(
                    "timing: give both track_to_track_ms and full_stroke_ms, or neither".into(),
                )
            }
        };
        let (outer, inner) = match (
            opt_f64(t, "media_rate_mbps")?,
            opt_f64(t, "media_rate_outer_mbps")?,
            opt_f64(t, "media_rate_inner_mbps")?,
        ) {
            (Some(r), None, None) if r < 1e-6 => {
                return Err(format!(
                    "timing.media_rate_mbps: expected a rate > 0, got {r}"
                ))
            }
            (Some(r), None, None) => (r, r),
            (None, Some(o), Some(i)) => (o, i),
            _ => return Err(
                "timing: give media_rate_mbps, or media_rate_outer_mbps and media_rate_inner_mbps"
                    .into(),
            ),
        };
        for (k, v) in [
            ("media_rate_outer_mbps", outer),
            ("media_rate_inner_mbps", inner),
        ] {
            if v < 1e-6 {
                return Err(format!("timing.{k}: expected a rate > 0, got {v}"));
            }
        }
        let cache =
            match (
                t.get("cache_bytes"),
                t.get("cache_segments"),
                t.get("interface_mbps"),
            ) {
                (None, None, None) => None,
                (Some(_), Some(_), Some(_)) => {
                    let bytes = count(t, "cache_bytes")?;
                    let n = count(t, "cache_segments")?;
                    if n > 1024 || n > bytes {
                        return Err(format!(
                            "timing.cache_segments: expected 1 … min(1024, cache_bytes), got {n}"
                        ));
                    }
                    Some(Buffer::new(
                        bytes / n,
                        positive(t, "interface_mbps")? * 1e6,
                        n as usize,
                    ))
                }
                _ => return Err(
                    "timing: give cache_bytes, cache_segments and interface_mbps together, or none"
                        .into(),
                ),
            };
        Ok(ParametricHdd {
            capacity,
            inv_capacity: 1.0 / capacity.max(1) as f64,
            half_rotation: secs_to_ns(30.0 / rpm),
            avg_seek: secs_to_ns(avg_seek),
            curve,
            rate_outer: outer * 1e6,
            rate_inner: inner * 1e6,
            overhead: secs_to_ns(opt_f64(t, "overhead_ms")?.unwrap_or(0.0) / 1e3),
            head: 0,
            cache,
        })
    }

    /// Seek time for a move of `distance` bytes.
    pub fn seek_time(&self, distance: u64) -> Nanos {
        if distance == 0 {
            return 0;
        }
        match self.curve {
            None => self.avg_seek,
            Some((t2t, b, c)) => {
                // Clamped to the capacity (< 2⁶³; parked heads give a huge distance), then through
                // i64: one conversion instruction instead of the unsigned sequence.
                let x = (distance.min(self.capacity) as i64 as f64 * self.inv_capacity).min(1.0);
                secs_to_ns(t2t + b * x.sqrt() + c * x)
            }
        }
    }

    /// The buffer's part of a request (only with a cache): a read inside one segment is
    /// served from it; any other request updates it and goes on to the media. Kept out of
    /// `service`, whose common path (no cache) it would otherwise slow.
    #[cold]
    #[inline(never)]
    fn buffered(&mut self, io: &Io) -> Option<Service> {
        let c = self.cache.as_mut()?;
        let (lo, hi) = (io.offset, io.end());
        if lo >= hi {
            // No bytes move: nothing enters or leaves the buffer, and nothing is a hit.
            return None;
        }
        match io.op {
            Op::Discard => c.forget(lo, hi),
            _ if io.op.moves_data() => {
                let scan = c.scan(lo, hi);
                if io.op == Op::Read && c.hit(&scan) {
                    return Some(Service {
                        transfer_ns: secs_to_ns(io.len as f64 / c.interface_rate),
                        overhead_ns: self.overhead,
                        ..Service::default()
                    });
                }
                c.keep(lo, hi, &scan);
            }
            _ => {}
        }
        None
    }

    /// Transfer time of `len` bytes at `offset`.
    pub fn transfer_time(&self, offset: u64, len: u32) -> Nanos {
        let x = (offset.min(self.capacity) as i64 as f64 * self.inv_capacity).min(1.0);
        let rate = self.rate_outer + (self.rate_inner - self.rate_outer) * x;
        secs_to_ns(len as f64 / rate)
    }

    pub fn half_rotation(&self) -> Nanos {
        self.half_rotation
    }
}

impl Timing for ParametricHdd {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn service(&mut self, _start: Nanos, io: &Io) -> Service {
        if self.cache.is_some() {
            if let Some(hit) = self.buffered(io) {
                return hit;
            }
        }
        if !io.op.moves_data() {
            // Flush and discard cost one command overhead; this model keeps no write cache.
            return Service {
                overhead_ns: self.overhead,
                ..Service::default()
            };
        }
        let sequential = io.offset == self.head;
        let distance = io.offset.abs_diff(self.head);
        let svc = Service {
            seek_ns: self.seek_time(distance),
            rotate_ns: if sequential { 0 } else { self.half_rotation },
            transfer_ns: self.transfer_time(io.offset, io.len),
            overhead_ns: self.overhead,
            ..Service::default()
        };
        self.head = io.end();
        svc
    }

    fn on_power(&mut self, _now: Nanos, ready: bool) {
        // Heads park on spin-down: the next access is never sequential.
        if !ready {
            self.head = u64::MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::{Op, Request};

    /// The model from a `[timing]` table's text.
    fn parsed(text: &str) -> Result<ParametricHdd, String> {
        ParametricHdd::from_toml(&toml::from_str(text).expect("test toml"))
    }

    fn disk(extra: &str) -> ParametricHdd {
        parsed(&format!(
            "model = \"hdd-parametric\"\ncapacity_bytes = 1_000_000_000\nrpm = 6000\navg_seek_ms = 10.0\nmedia_rate_mbps = 50\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn random_then_sequential_by_hand() {
        let mut d = disk("overhead_ms = 0.5");
        let io = Request::new(0, Op::Read, 500_000_000, 50_000).io(0);
        let s = d.service(0, &io);
        // 6000 rpm → 10 ms per revolution → 5 ms; 50 kB at 50 MB/s = 1 ms.
        assert_eq!(s.seek_ns, 10_000_000);
        assert_eq!(s.rotate_ns, 5_000_000);
        assert_eq!(s.transfer_ns, 1_000_000);
        assert_eq!(s.total(), 16_500_000);
        let next = Request::new(0, Op::Write, 500_050_000, 50_000).io(1);
        let s = d.service(0, &next);
        assert_eq!((s.seek_ns, s.rotate_ns, s.total()), (0, 0, 1_500_000));
    }

    #[test]
    fn three_point_curve_by_hand() {
        // t2t 1, avg 10, full 20 ms: b = (−10 + 150 − 100)/3 = 40/3, c = (7 − 150 + 160)/3 = 17/3.
        let d = disk("track_to_track_ms = 1.0\nfull_stroke_ms = 20.0");
        assert_eq!(d.seek_time(1_000_000_000), 20_000_000);
        // x = 1/4: 1 + 40/3 · 1/2 + 17/3 · 1/4 = 9.08333 ms.
        assert_eq!(d.seek_time(250_000_000), 9_083_333);
        // One byte: x = 1e-9, 1 + 40/3 · 3.1623e-5 ms = 1.000422 ms.
        assert_eq!(d.seek_time(1), 1_000_422);
        // The seek at a third of the stroke lies above the average, the curve being concave.
        assert_eq!(d.seek_time(333_333_333), 10_586_892); // 1 + 40/3 · 0.57735 + 17/9
    }

    #[test]
    fn three_point_curve_mean_is_the_average_seek() {
        // The mean over two uniform random positions (distance density 2(1 − x)) is the
        // datasheet's average seek: midpoint rule over 100,000 strips.
        let d = disk("track_to_track_ms = 1.0\nfull_stroke_ms = 20.0");
        let n = 100_000;
        let mean: f64 = (0..n)
            .map(|i| {
                let x = (i as f64 + 0.5) / n as f64;
                2.0 * (1.0 - x) * d.seek_time((x * 1e9) as u64) as f64 / n as f64
            })
            .sum();
        assert!((mean - 10_000_000.0).abs() < 2_000.0, "{mean}");
    }

    #[test]
    fn three_point_curve_rejects_anchors_it_cannot_fit() {
        for (t2t, full) in [(1.0, 25.0), (0.1, 10.5)] {
            let e = parsed(&format!(
                "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = {}\ntrack_to_track_ms = {t2t}\nfull_stroke_ms = {full}\nmedia_rate_mbps = 1",
                if full > 20.0 { 8.0 } else { 10.0 }
            ))
            .unwrap_err();
            assert!(e.contains("no rising seek curve"), "{e}");
        }
    }

    fn cached(segments: u32, bytes: u64) -> ParametricHdd {
        disk(&format!(
            "overhead_ms = 0.5\ncache_bytes = {bytes}\ncache_segments = {segments}\ninterface_mbps = 100"
        ))
    }

    fn read(d: &mut ParametricHdd, offset: u64, len: u32) -> Service {
        d.service(0, &Request::new(0, Op::Read, offset, len).io(0))
    }

    #[test]
    fn a_read_inside_a_segment_costs_the_interface_only() {
        let mut d = cached(4, 1_000_000);
        // Miss: 10 ms seek + 5 ms rotation + 1 ms transfer + 0.5 ms overhead.
        assert_eq!(read(&mut d, 500_000_000, 50_000).total(), 16_500_000);
        // Hit: 50 kB at 100 MB/s = 0.5 ms, + 0.5 ms overhead; no seek, no rotation.
        let s = read(&mut d, 500_010_000, 20_000);
        assert_eq!(
            (s.seek_ns, s.rotate_ns, s.transfer_ns, s.total()),
            (0, 0, 200_000, 700_000)
        );
        // The head stayed at the end of the miss: the next read there is sequential.
        let s = read(&mut d, 500_050_000, 50_000);
        assert_eq!((s.seek_ns, s.rotate_ns, s.total()), (0, 0, 1_500_000));
        // The run is now 500.00..500.10 MB; a read only partly inside it goes to the media
        // (not where the head is: 10 + 5 + 0.4 + 0.5 ms).
        assert_eq!(read(&mut d, 500_090_000, 20_000).total(), 15_900_000);
    }

    /// The buffer as it was written first: one scalar pass over `(lo, hi, used)` records
    /// finding the LRU by the smallest stamp. The arrays-and-list buffer must agree with it
    /// on every scan and every run.
    #[derive(Clone, Debug)]
    struct Reference {
        seg: u64,
        runs: Vec<(u64, u64, u64)>,
        clock: u64,
    }

    impl Reference {
        fn scan(&self, lo: u64, hi: u64) -> Scan {
            let mut s = Scan {
                inside: usize::MAX,
                join: usize::MAX,
                lru: 0,
                overlapping: 0,
                from: 0,
                to: 0,
            };
            let (mut join_used, mut lru_used) = (0, u64::MAX);
            for (i, &(a, b, u)) in self.runs.iter().enumerate() {
                if a <= lo && hi <= b {
                    s.inside = i;
                }
                if a < b && a <= hi && lo <= b && (s.join == usize::MAX || join_used < u) {
                    (s.join, join_used) = (i, u);
                }
                if u < lru_used {
                    (s.lru, lru_used) = (i, u);
                }
                s.overlapping += u32::from(a < hi && lo < b);
            }
            s
        }

        fn cut(r: &mut (u64, u64, u64), lo: u64, hi: u64) {
            if r.1 <= lo || hi <= r.0 {
                return;
            }
            let (below, above) = (lo.saturating_sub(r.0), r.1.saturating_sub(hi));
            (r.0, r.1) = if below == 0 && above == 0 {
                (0, 0)
            } else if below >= above {
                (r.0, lo)
            } else {
                (hi, r.1)
            };
        }

        /// A read (`true`: a hit) or a write of `lo..hi`.
        fn access(&mut self, read: bool, lo: u64, hi: u64) -> bool {
            let s = self.scan(lo, hi);
            if read && s.inside != usize::MAX {
                self.clock += 1;
                self.runs[s.inside].2 = self.clock;
                return true;
            }
            let mut overlapping = s.overlapping;
            let (i, (ulo, uhi)) = match self.runs.get(s.join) {
                Some(&(a, b, _)) => {
                    overlapping -= u32::from(a < hi && lo < b);
                    (s.join, (a.min(lo), b.max(hi)))
                }
                None => (s.lru, (lo, hi)),
            };
            let end = uhi.min(hi.max(lo.saturating_add(self.seg)));
            self.clock += 1;
            self.runs[i] = (ulo.max(end.saturating_sub(self.seg)), end, self.clock);
            if overlapping > 0 {
                for (j, r) in self.runs.iter_mut().enumerate() {
                    if j != i {
                        Self::cut(r, lo, hi);
                    }
                }
            }
            false
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Reads, writes and discards over a small span, so that runs are joined, cut,
        /// emptied and replaced: the buffer answers as the reference does, and its address
        /// order is every segment holding a run, sorted, with their ends. (Requests of no
        /// bytes never reach the buffer: `buffered` serves them from the media.)
        #[test]
        fn the_buffer_agrees_with_the_scalar_reference(
            segments in 1usize..12,
            seg in 1u64..64,
            ops in proptest::collection::vec((0u8..3, 0u64..256, 1u64..48), 1..300),
        ) {
            let mut b = Buffer::new(seg, 1.0, segments);
            let mut r = Reference { seg, runs: vec![(0, 0, 0); segments], clock: 0 };
            for (op, lo, len) in ops {
                let hi = lo + len;
                if op == 2 {
                    b.forget(lo, hi);
                    for x in &mut r.runs {
                        Reference::cut(x, lo, hi);
                    }
                } else {
                    let s = b.scan(lo, hi);
                    let want = r.scan(lo, hi);
                    proptest::prop_assert_eq!(
                        (s.inside, s.join, s.lru, s.overlapping),
                        (want.inside, want.join, want.lru, want.overlapping)
                    );
                    let hit = op == 0 && b.hit(&s);
                    if !hit {
                        b.keep(lo, hi, &s);
                    }
                    proptest::prop_assert_eq!(hit, r.access(op == 0, lo, hi));
                }
                let runs: Vec<_> = (0..segments).map(|i| (b.lo[i], b.hi[i], b.used[i])).collect();
                proptest::prop_assert_eq!(&runs, &r.runs);
                let mut order: Vec<u16> = (0..segments as u16)
                    .filter(|&i| b.lo[i as usize] < b.hi[i as usize])
                    .collect();
                order.sort_by_key(|&i| b.lo[i as usize]);
                let ends: Vec<u64> = order.iter().map(|&i| b.hi[i as usize]).collect();
                proptest::prop_assert_eq!((&b.order, &b.ends), (&order, &ends));
            }
        }
    }

    #[test]
    fn a_request_of_no_bytes_leaves_the_buffer_alone() {
        let mut d = cached(2, 200_000);
        read(&mut d, 1_000_000, 4096);
        // Inside the run, but no bytes: from the media (the head is at 1,004,096: a seek
        // and half a revolution), and the run is as it was.
        let s = read(&mut d, 1_002_000, 0);
        assert_eq!((s.rotate_ns, s.transfer_ns), (5_000_000, 0));
        for op in [Op::Write, Op::Discard] {
            d.service(0, &Request::new(0, op, 1_002_000, 0).io(1));
        }
        assert_eq!(read(&mut d, 1_000_000, 4096).rotate_ns, 0);
        let c = d.cache.as_ref().unwrap();
        assert_eq!(
            (
                c.order.len(),
                c.lo[c.order[0] as usize],
                c.hi[c.order[0] as usize]
            ),
            (1, 1_000_000, 1_004_096)
        );
    }

    #[test]
    fn segments_are_replaced_least_recently_used_first() {
        let mut d = cached(2, 200_000);
        let miss = |s: Service| s.rotate_ns > 0;
        assert!(miss(read(&mut d, 1_000_000, 4096)));
        assert!(miss(read(&mut d, 10_000_000, 4096)));
        assert!(!miss(read(&mut d, 1_000_000, 4096))); // A is now the most recent
        assert!(miss(read(&mut d, 20_000_000, 4096))); // evicts B
        assert!(miss(read(&mut d, 10_000_000, 4096))); // B is gone; evicts A
        assert!(!miss(read(&mut d, 20_000_000, 4096)));
        assert!(miss(read(&mut d, 1_000_000, 4096)));
    }

    #[test]
    fn a_run_continued_keeps_its_latest_bytes() {
        // One segment of 100 kB: reading 0..64 kB then 64..128 kB leaves 28..128 kB.
        let mut d = cached(1, 100_000);
        read(&mut d, 0, 64_000);
        read(&mut d, 64_000, 64_000);
        assert_eq!(read(&mut d, 28_000, 100_000).seek_ns, 0);
        assert_eq!(read(&mut d, 28_000, 100_000).rotate_ns, 0);
        assert_eq!(read(&mut d, 28_000, 100_000).total(), 1_500_000); // hit: 1 ms + 0.5 ms
        assert!(read(&mut d, 27_000, 2_000).rotate_ns > 0); // before the run: a miss
    }

    #[test]
    fn writes_go_through_and_update_the_buffer() {
        let mut d = cached(4, 1_000_000);
        read(&mut d, 0, 100_000);
        // A write is served by the media even over cached bytes, and updates the run in
        // place: 0..100 kB stays cached.
        let w = d.service(0, &Request::new(0, Op::Write, 40_000, 20_000).io(1));
        assert!(w.rotate_ns > 0);
        assert_eq!(read(&mut d, 40_000, 20_000).total(), 700_000);
        assert_eq!(read(&mut d, 0, 100_000).total(), 1_500_000);
        // A write elsewhere takes a segment of its own.
        d.service(0, &Request::new(0, Op::Write, 5_000_000, 8_000).io(2));
        assert_eq!(read(&mut d, 5_000_000, 8_000).total(), 580_000);
        // A discard forgets its range: the run keeps its longer side, 0..60 kB.
        d.service(0, &Request::new(0, Op::Discard, 60_000, 40_000).io(3));
        assert!(read(&mut d, 70_000, 10_000).rotate_ns > 0);
        assert_eq!(read(&mut d, 0, 60_000).total(), 1_100_000);
    }

    #[test]
    fn cache_keys_come_together_and_name_themselves() {
        let e = parsed(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = 9\nmedia_rate_mbps = 1\ncache_bytes = 100",
        )
        .unwrap_err();
        assert!(
            e.contains("cache_bytes, cache_segments and interface_mbps together"),
            "{e}"
        );
        let e = parsed(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = 9\nmedia_rate_mbps = 1\ncache_bytes = 100\ncache_segments = 101\ninterface_mbps = 10",
        )
        .unwrap_err();
        assert!(e.starts_with("timing.cache_segments"), "{e}");
    }

    #[test]
    fn parked_heads_pay_a_full_stroke() {
        let mut d = disk("track_to_track_ms = 1.0\nfull_stroke_ms = 20.0");
        d.on_power(0, false);
        let io = Request::new(0, Op::Read, 0, 50_000).io(0);
        let s = d.service(0, &io);
        // Spin-down parks the heads: the first access seeks the full stroke and rotates.
        assert_eq!((s.seek_ns, s.rotate_ns), (20_000_000, 5_000_000));
    }

    #[test]
    fn zoned_rate_interpolates() {
        let d = parsed(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = 9\nmedia_rate_outer_mbps = 60\nmedia_rate_inner_mbps = 30",
        )
        .unwrap();
        assert_eq!(d.transfer_time(0, 60_000), 1_000_000);
        assert_eq!(d.transfer_time(1000, 30_000), 1_000_000);
        assert_eq!(d.transfer_time(500, 45_000), 1_000_000);
    }

    #[test]
    fn errors_name_the_key() {
        let e = parsed("capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = -1\nmedia_rate_mbps = 1")
            .unwrap_err();
        assert!(e.starts_with("timing.avg_seek_ms"), "{e}");
        assert!(parsed(
            "capacity_bytes = 1000\nrpm = 7200\navg_seek_ms = 1\nmedia_rate_mbps = 1\nseek = 3"
        )
        .unwrap_err()
        .starts_with("timing.seek: unknown key"));
    }
}
