//! Fault injection: a device that fails I/O on an offset range, serves slower than its
//! model, or is missing when the run starts. Data of a `[device.fault]` table in the run
//! config (see `docs/integrity.md`); the engine wraps the device's timing model in
//! [`Faulty`] when a table is given, so a run without faults pays nothing.

use serde::Deserialize;
use wattio_core::device::{Service, Timing};
use wattio_core::geometry::{Geometry, Location};
use wattio_core::io::{Io, Op, Status};
use wattio_core::time::Nanos;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Byte ranges `[from, to)`: a read or write overlapping one fails with EIO (the device
    /// still spends its service time on it; a failed write stores nothing).
    #[serde(default)]
    pub eio: Vec<[u64; 2]>,
    /// Byte ranges `[from, to)` where only writes fail with EIO (and store nothing); reads
    /// return what the blocks held before: a worn flash device gone read-only, or a cache
    /// in front of a failing disk that still holds the old bytes.
    #[serde(default)]
    pub eio_write: Vec<[u64; 2]>,
    /// Service-time multiplier: every phase of every service takes this many times longer.
    #[serde(default)]
    pub slow: Option<f64>,
    /// The device is absent when the run starts: building the run fails with an error
    /// naming it.
    #[serde(default)]
    pub missing: bool,
    /// Bad sectors in physical coordinates (surfaces, cylinders, an angular window),
    /// mapped through the model's geometry to EIO ranges when the device is built: the
    /// failure patterns of failed disks (thesis ch. 6), see [`Region`].
    #[serde(default)]
    pub region: Vec<Region>,
    /// Serve the queue in a random order drawn from this seed, priorities and arrival
    /// ignored (up to the next power command): the orders in which a live executor's
    /// workers may complete a device's I/O. The simulator's queue otherwise serves a
    /// higher priority first, and within one by arrival or the model's scheduler, so a
    /// layer whose correctness depends on that order passes every simulated run and loses
    /// data live (EXCES's write-back beside an earlier write of the page, 2026-12-06).
    #[serde(default)]
    pub reorder: Option<u64>,
    /// The bad ranges (`eio`, `eio_write`, `region`) fail only for I/O that starts service
    /// at or after this time of the run, in seconds: sectors that go bad while the run goes
    /// on (latent sector errors), so what was written and replicated before can be read
    /// back only from the copies that are still good. Default: from the start.
    #[serde(default)]
    pub after_s: Option<f64>,
}

/// A physical region of bad sectors: on the tracks of `surfaces` (default: all) over
/// cylinders `cylinders[0]..=cylinders[1]`, every `every`-th cylinder from the first, the
/// sectors whose start lies in the angular window `angle ± width / 2` (fractions of a
/// revolution, in the model's frame; default: whole tracks).
///
/// The thesis's case studies are regions: a radial scratch is one surface, a cylinder range
/// and a narrow window; a band of consecutive bad sectors on all surfaces is a few whole
/// cylinders; a servo fault repeating every k tracks is `every = k` on some surfaces.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Region {
    #[serde(default)]
    pub surfaces: Option<Vec<u32>>,
    pub cylinders: [u32; 2],
    #[serde(default = "one")]
    pub every: u32,
    #[serde(default)]
    pub angle: Option<f64>,
    #[serde(default)]
    pub width: Option<f64>,
}

fn one() -> u32 {
    1
}

impl Region {
    fn validate(&self, key: &str) -> Result<(), String> {
        let [c0, c1] = self.cylinders;
        if c0 > c1 {
            return Err(format!(
                "{key}.cylinders: expected [first, last] with first ≤ last, got [{c0}, {c1}]"
            ));
        }
        if self.every == 0 {
            return Err(format!("{key}.every: expected a whole number ≥ 1, got 0"));
        }
        match (self.angle, self.width) {
            (None, None) => {}
            (Some(a), Some(w)) => {
                if !(a.is_finite() && (0.0..1.0).contains(&a)) {
                    return Err(format!(
                        "{key}.angle: expected a fraction of a revolution in [0, 1), got {a}"
                    ));
                }
                if !(w.is_finite() && w > 0.0 && w <= 1.0) {
                    return Err(format!(
                        "{key}.width: expected a fraction of a revolution in (0, 1], got {w}"
                    ));
                }
            }
            _ => {
                return Err(format!(
                    "{key}: give both `angle` and `width` (an angular window), or neither (whole tracks)"
                ))
            }
        }
        Ok(())
    }

    fn holds(&self, l: &Location) -> bool {
        let [c0, c1] = self.cylinders;
        if l.cylinder < c0 || l.cylinder > c1 || !(l.cylinder - c0).is_multiple_of(self.every) {
            return false;
        }
        if let Some(s) = &self.surfaces {
            if !s.contains(&l.surface) {
                return false;
            }
        }
        match (self.angle, self.width) {
            (Some(a), Some(w)) => {
                // Circular distance between the sector's start and the window's centre.
                let d = (l.angle - a).rem_euclid(1.0);
                d.min(1.0 - d) <= w / 2.0
            }
            _ => true,
        }
    }
}

/// The byte ranges `[from, to)` of `regions` on a device of `capacity` bytes with geometry
/// `g`, in sectors of `sector` bytes, merged and sorted. Cylinders grow with the LBA in
/// every layout the mechanical model has, so each region's cylinders are found by binary
/// search and only their LBAs are visited.
pub fn region_ranges(
    regions: &[Region],
    g: &dyn Geometry,
    capacity: u64,
    sector: u64,
) -> Vec<[u64; 2]> {
    let sectors = capacity / sector;
    let cyl_of = |lba: u64| g.locate(lba * sector).map_or(u32::MAX, |l| l.cylinder);
    // The first LBA whose cylinder is ≥ c.
    let first_at = |c: u32| {
        let (mut lo, mut hi) = (0u64, sectors);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cyl_of(mid) < c {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    };
    let mut out: Vec<[u64; 2]> = Vec::new();
    for r in regions {
        let from = first_at(r.cylinders[0]);
        let to = first_at(r.cylinders[1].saturating_add(1));
        for lba in from..to {
            if g.locate(lba * sector).is_some_and(|l| r.holds(&l)) {
                let (a, b) = (lba * sector, (lba + 1) * sector);
                match out.last_mut() {
                    Some(last) if last[1] == a => last[1] = b,
                    _ => out.push([a, b]),
                }
            }
        }
    }
    out.sort_unstable();
    let mut merged: Vec<[u64; 2]> = Vec::with_capacity(out.len());
    for [a, b] in out {
        match merged.last_mut() {
            Some(last) if a <= last[1] => last[1] = last[1].max(b),
            _ => merged.push([a, b]),
        }
    }
    merged
}

impl Faults {
    /// Check the table; errors name the key under `prefix` (e.g. `device[2].fault`).
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        for (i, [from, to]) in self.eio.iter().enumerate() {
            if from >= to {
                return Err(format!(
                    "{prefix}.eio[{i}]: expected [from, to) with from < to, got [{from}, {to}]"
                ));
            }
        }
        for (i, [from, to]) in self.eio_write.iter().enumerate() {
            if from >= to {
                return Err(format!(
                    "{prefix}.eio_write[{i}]: expected [from, to) with from < to, got [{from}, {to}]"
                ));
            }
        }
        for (i, r) in self.region.iter().enumerate() {
            r.validate(&format!("{prefix}.region[{i}]"))?;
        }
        if let Some(a) = self.after_s {
            if !(a.is_finite() && (0.0..=1e9).contains(&a)) {
                return Err(format!(
                    "{prefix}.after_s: expected seconds in [0, 1e9], got {a}"
                ));
            }
        }
        if let Some(s) = self.slow {
            if !(s.is_finite() && s > 0.0 && s <= 1e6) {
                return Err(format!(
                    "{prefix}.slow: expected a multiplier in (0, 1e6], got {s}"
                ));
            }
        }
        Ok(())
    }
}

/// A timing model with faults injected.
pub struct Faulty {
    inner: Box<dyn Timing>,
    eio: Vec<[u64; 2]>,
    eio_write: Vec<[u64; 2]>,
    slow: f64,
    /// `after_s` in nanoseconds (0: from the start).
    after: Nanos,
    failed: u64,
    /// `reorder`'s generator state (splitmix64).
    reorder: Option<u64>,
    /// Picks of an I/O other than the one the queue would have served first.
    reordered: u64,
}

impl Faulty {
    /// Wrap `inner`; physical regions need its geometry (an error names the device model
    /// kind that lacks one).
    pub fn new(inner: Box<dyn Timing>, faults: &Faults) -> Result<Faulty, String> {
        let mut eio = faults.eio.clone();
        if !faults.region.is_empty() {
            let g = inner.geometry().ok_or(
                "fault.region: bad sectors in physical coordinates need a model with a mechanical layout (e.g. `hdd-mechanical`)",
            )?;
            eio.extend(region_ranges(&faults.region, &*g, inner.capacity(), 512));
        }
        Ok(Faulty {
            inner,
            eio,
            eio_write: faults.eio_write.clone(),
            slow: faults.slow.unwrap_or(1.0),
            after: faults.after_s.map_or(0, wattio_core::time::secs_to_ns),
            failed: 0,
            reorder: faults.reorder,
            reordered: 0,
        })
    }

    /// The byte ranges that fail, explicit and mapped from regions.
    pub fn eio(&self) -> &[[u64; 2]] {
        &self.eio
    }
}

fn scale(ns: Nanos, k: f64) -> Nanos {
    (ns as f64 * k).round() as Nanos
}

impl Timing for Faulty {
    /// Faults change timing and status, not where sectors lie: the inner model's layout.
    fn geometry(&self) -> Option<std::sync::Arc<dyn wattio_core::Geometry>> {
        self.inner.geometry()
    }

    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }

    fn service(&mut self, start: Nanos, io: &Io) -> Service {
        let mut s = self.inner.service(start, io);
        if self.slow != 1.0 {
            s.seek_ns = scale(s.seek_ns, self.slow);
            s.rotate_ns = scale(s.rotate_ns, self.slow);
            s.transfer_ns = scale(s.transfer_ns, self.slow);
            s.overhead_ns = scale(s.overhead_ns, self.slow);
        }
        let hits = |ranges: &[[u64; 2]]| {
            ranges
                .iter()
                .any(|&[from, to]| io.offset < to && io.end() > from)
        };
        if s.status == Status::Ok
            && start >= self.after
            && ((io.op.moves_data() && hits(&self.eio))
                || (io.op == Op::Write && hits(&self.eio_write)))
        {
            s.status = Status::IoError;
            self.failed += 1;
        }
        s
    }

    fn max_concurrent(&self) -> u32 {
        self.inner.max_concurrent()
    }

    fn schedules(&self) -> bool {
        self.reorder.is_some() || self.inner.schedules()
    }

    fn reorders(&self) -> bool {
        self.reorder.is_some() || self.inner.reorders()
    }

    fn prebuffers(&self) -> bool {
        self.inner.prebuffers()
    }

    fn admits(&mut self, now: Nanos, io: &Io, position: usize) -> bool {
        self.inner.admits(now, io, position)
    }

    fn pick(&mut self, now: Nanos, queue: &[Io]) -> usize {
        let Some(state) = &mut self.reorder else {
            return self.inner.pick(now, queue);
        };
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let k = (z % queue.len().max(1) as u64) as usize;
        self.reordered += (k != 0) as u64;
        k
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut c = self.inner.counters();
        c.push(("fault_eio".into(), self.failed as f64));
        if self.reorder.is_some() {
            c.push(("fault_reordered".into(), self.reordered as f64));
        }
        c
    }

    fn on_power(&mut self, now: Nanos, ready: bool) {
        self.inner.on_power(now, ready)
    }

    fn precondition_full(&mut self) -> bool {
        self.inner.precondition_full()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_core::io::{Op, Request};

    struct Flat;
    impl Timing for Flat {
        fn capacity(&self) -> u64 {
            1 << 20
        }
        fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
            Service {
                seek_ns: 10,
                rotate_ns: 5,
                transfer_ns: 3,
                overhead_ns: 1,
                ..Service::default()
            }
        }
    }

    /// Takes queued writes beside the command in service (as a prebuffering drive).
    struct Prebuffers;
    impl Timing for Prebuffers {
        fn capacity(&self) -> u64 {
            1 << 20
        }
        fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
            Service::default()
        }
        fn prebuffers(&self) -> bool {
            true
        }
        fn admits(&mut self, _now: Nanos, io: &Io, _position: usize) -> bool {
            io.op == Op::Write
        }
    }

    #[test]
    fn a_faulty_prebuffering_drive_still_prebuffers() {
        let faults: Faults = toml::from_str("slow = 2.0").unwrap();
        let mut t = Faulty::new(Box::new(Prebuffers), &faults).unwrap();
        assert!(t.prebuffers());
        let at = |op| Request::new(0, op, 0, 4096).io(0);
        assert!(t.admits(0, &at(Op::Write), 1));
        assert!(!t.admits(0, &at(Op::Read), 1));
    }

    #[test]
    fn a_reordering_device_picks_from_its_seed_alone_and_counts_what_it_reordered() {
        let faults: Faults = toml::from_str("reorder = 42").unwrap();
        faults.validate("device[0].fault").unwrap();
        let picks = || {
            let mut t = Faulty::new(Box::new(Flat), &faults).unwrap();
            assert!(t.reorders() && t.schedules());
            let q: Vec<Io> = (0..5)
                .map(|k| Request::new(0, Op::Write, k * 4096, 4096).io(k))
                .collect();
            let p: Vec<usize> = (0..200).map(|_| t.pick(0, &q)).collect();
            let reordered = t
                .counters()
                .into_iter()
                .find(|(n, _)| n == "fault_reordered");
            (p, reordered.map(|(_, v)| v))
        };
        let (a, reordered) = picks();
        assert_eq!(picks().0, a, "the same seed, the same order");
        assert!(a.iter().all(|&k| k < 5));
        // Every position is drawn, and the count is of picks past the front.
        assert!((0..5).all(|k| a.contains(&k)), "{a:?}");
        let past_front = a.iter().filter(|&&k| k != 0).count() as f64;
        assert_eq!(reordered, Some(past_front));
        // Without the key the model keeps its own order and reports no such counter.
        let plain = Faulty::new(Box::new(Flat), &Faults::default()).unwrap();
        assert!(!plain.reorders() && !plain.schedules());
        assert!(plain.counters().iter().all(|(n, _)| n != "fault_reordered"));
    }

    #[test]
    fn bad_ranges_fail_only_from_after_s_on() {
        let faults: Faults =
            toml::from_str("eio = [[0, 4096]]\neio_write = [[8192, 12288]]\nafter_s = 2.5")
                .unwrap();
        faults.validate("device[0].fault").unwrap();
        let mut t = Faulty::new(Box::new(Flat), &faults).unwrap();
        let at = |op, off| Request::new(0, op, off, 4096).io(0);
        let s = |t: &mut Faulty, start, op, off| t.service(start, &at(op, off)).status;
        // Service starting a nanosecond before 2.5 s: the sectors are still good.
        assert_eq!(s(&mut t, 2_499_999_999, Op::Read, 0), Status::Ok);
        assert_eq!(s(&mut t, 2_499_999_999, Op::Write, 8192), Status::Ok);
        // From 2.5 s on they fail, and only the ranges do.
        assert_eq!(s(&mut t, 2_500_000_000, Op::Read, 0), Status::IoError);
        assert_eq!(s(&mut t, 2_500_000_000, Op::Write, 8192), Status::IoError);
        assert_eq!(s(&mut t, 2_500_000_000, Op::Read, 8192), Status::Ok);
        assert_eq!(s(&mut t, 9_000_000_000, Op::Read, 4096), Status::Ok);
        let count = t.counters().into_iter().find(|(n, _)| n == "fault_eio");
        assert_eq!(count.map(|(_, v)| v), Some(2.0));
        for bad in ["-1.0", "nan", "2e9"] {
            let f: Faults = toml::from_str(&format!("after_s = {bad}")).unwrap();
            assert_eq!(
                f.validate("device[3].fault").unwrap_err(),
                format!(
                    "device[3].fault.after_s: expected seconds in [0, 1e9], got {}",
                    f.after_s.unwrap()
                )
            );
        }
    }

    #[test]
    fn eio_write_fails_writes_and_lets_reads_through() {
        let faults: Faults = toml::from_str("eio_write = [[8192, 12288]]").unwrap();
        faults.validate("device[0].fault").unwrap();
        let mut t = Faulty::new(Box::new(Flat), &faults).unwrap();
        let at = |op, off| Request::new(0, op, off, 4096).io(0);
        assert_eq!(t.service(0, &at(Op::Write, 8192)).status, Status::IoError);
        assert_eq!(t.service(0, &at(Op::Write, 4096)).status, Status::Ok);
        assert_eq!(t.service(0, &at(Op::Read, 8192)).status, Status::Ok);
        let c = t.counters();
        assert!(c.contains(&("fault_eio".into(), 1.0)), "{c:?}");
        let bad: Faults = toml::from_str("eio_write = [[5, 5]]").unwrap();
        assert_eq!(
            bad.validate("device[2].fault").unwrap_err(),
            "device[2].fault.eio_write[0]: expected [from, to) with from < to, got [5, 5]"
        );
    }

    #[test]
    fn eio_on_a_range_and_a_slower_device() {
        let faults: Faults = toml::from_str("eio = [[8192, 12288]]\nslow = 2.5").unwrap();
        faults.validate("device[0].fault").unwrap();
        let mut t = Faulty::new(Box::new(Flat), &faults).unwrap();
        let at = |op, off, len| Request::new(0, op, off, len).io(0);
        let s = t.service(0, &at(Op::Read, 0, 4096));
        assert_eq!(s.status, Status::Ok);
        // 10, 5, 3, 1 ns × 2.5, rounded: 25 + 13 + 8 + 3.
        assert_eq!(s.total(), 49);
        // Touching the range by one byte at either end fails; a flush never does.
        assert_eq!(
            t.service(0, &at(Op::Write, 4096, 4097)).status,
            Status::IoError
        );
        assert_eq!(
            t.service(0, &at(Op::Read, 12287, 1)).status,
            Status::IoError
        );
        assert_eq!(t.service(0, &at(Op::Read, 12288, 4096)).status, Status::Ok);
        assert_eq!(t.service(0, &at(Op::Flush, 0, 0)).status, Status::Ok);
        assert_eq!(t.counters(), vec![("fault_eio".to_string(), 2.0)]);
    }

    #[test]
    fn bad_tables_name_the_key() {
        let f: Faults = toml::from_str("eio = [[5, 5]]").unwrap();
        assert_eq!(
            f.validate("device[1].fault").unwrap_err(),
            "device[1].fault.eio[0]: expected [from, to) with from < to, got [5, 5]"
        );
        let f: Faults = toml::from_str("slow = 0.0").unwrap();
        assert_eq!(
            f.validate("device[0].fault").unwrap_err(),
            "device[0].fault.slow: expected a multiplier in (0, 1e6], got 0"
        );
        assert!(toml::from_str::<Faults>("slowness = 2").is_err());
    }

    #[test]
    fn regions_need_a_model_with_geometry() {
        let faults = Faults {
            region: vec![Region {
                surfaces: None,
                cylinders: [0, 1],
                every: 1,
                angle: None,
                width: None,
            }],
            ..Faults::default()
        };
        let e = Faulty::new(Box::new(Flat), &faults).err().unwrap();
        assert!(
            e.starts_with("fault.region: bad sectors in physical coordinates need"),
            "{e}"
        );
    }
}
