//! The probe against synthetic layouts whose boundaries are known by construction.

use super::*;
use wattio_core::testing::{always_on, submitted, Harness};

/// A toy disk: tracks of the given sizes (in sectors), one after another. A write costs
/// `base` ns, plus `switch` ns when its sectors straddle a track boundary — the response
/// pattern the probe relies on, with the numbers chosen by hand.
struct Toy {
    /// First LBA of every track, and the end.
    starts: Vec<u64>,
    base: Nanos,
    switch: Nanos,
    /// Extra delay on the n-th probe write (1-based): a timing glitch.
    glitches: Vec<(u64, Nanos)>,
}

impl Toy {
    fn new(tracks: &[(u64, u64)]) -> Toy {
        let mut starts = vec![0];
        for &(n, spt) in tracks {
            for _ in 0..n {
                starts.push(starts.last().unwrap() + spt);
            }
        }
        Toy {
            starts,
            base: 8_400_000,
            switch: 900_000,
            glitches: Vec::new(),
        }
    }

    fn sectors(&self) -> u64 {
        *self.starts.last().unwrap()
    }

    fn response(&self, lba: u64, sectors: u64, n: u64) -> Nanos {
        let straddles = self.starts.iter().any(|&s| lba < s && s < lba + sectors);
        let glitch: Nanos = self.glitches.iter().filter(|g| g.0 == n).map(|g| g.1).sum();
        self.base + if straddles { self.switch } else { 0 } + glitch
    }

    /// Run the probe to the end; returns its report.
    fn probe(&self, p: Params) -> Report {
        let (f, report) = GeometryProbe::new(p);
        let mut dev = always_on(0, "disk");
        dev.capacity = self.sectors() * 512;
        let mut h = Harness::new(f, vec![dev]).unwrap();
        let mut now = 0;
        let mut pending = submitted(&h.start(now));
        let mut n = 0;
        while let Some(io) = pending.pop() {
            assert!(io.fua, "probe writes go through the cache");
            assert_eq!((io.op, io.len), (Op::Write, 1024));
            n += 1;
            now += self.response(io.offset / 512, 2, n);
            pending = submitted(&h.complete(now, io, Status::Ok));
            assert!(pending.len() <= 1, "one probe write at a time");
        }
        let r = report.lock().unwrap().clone();
        r
    }
}

fn run(first: u64, last: u64, spt: u64) -> TrackRun {
    TrackRun {
        first_lba: first,
        last_lba: last,
        spt,
    }
}

#[test]
fn one_zone_is_one_run_found_with_warps() {
    let toy = Toy::new(&[(40, 100)]);
    let r = toy.probe(Params::default());
    // The last track ends at the device's end: no boundary after it to time.
    assert_eq!(r.runs, vec![run(0, 3899, 100)]);
    assert_eq!(r.tail, Some((3900, 3999)));
    assert!(r.done && r.stopped.is_none());
    assert_eq!(r.glitches, 0);
    // Scanning all 4,000 sectors would cost ≥ 4,000 probes; warping costs far fewer.
    assert!(r.probes < 2000, "{} probes", r.probes);
}

#[test]
fn an_spt_drop_larger_than_backtrack_is_measured_not_skipped() {
    // 100 → 90 sectors: a jump aimed 5 sectors before the old SPT's boundary would land
    // past the new one (the reconstructed thesis algorithm's flaw).
    let toy = Toy::new(&[(6, 100), (7, 90), (5, 120)]);
    let r = toy.probe(Params::default());
    assert_eq!(
        r.runs,
        vec![run(0, 599, 100), run(600, 1229, 90), run(1230, 1709, 120)]
    );
    assert_eq!(r.tail, Some((1710, 1829)));
    assert_eq!(
        r.zones(2),
        vec![(0, 599, 100), (600, 1229, 90), (1230, 1709, 120)]
    );
}

#[test]
fn a_short_track_inside_a_zone_is_a_run_and_a_zone_absorbs_it() {
    // A track with 4 spare sectors (96 LBAs) among 100-sector tracks.
    let toy = Toy::new(&[(9, 100), (1, 96), (10, 100)]);
    let r = toy.probe(Params::default());
    assert_eq!(
        r.runs,
        vec![run(0, 899, 100), run(900, 995, 96), run(996, 1895, 100)]
    );
    assert_eq!(r.zones(2), vec![(0, 1895, 100)]);
    assert_eq!(r.zones(1).len(), 3);
}

#[test]
fn a_glitch_is_not_taken_for_a_boundary() {
    let mut toy = Toy::new(&[(8, 100)]);
    // Probe 30 is the write at LBA 29 (the first track is scanned sector by sector):
    // it alone is slow.
    toy.glitches.push((30, 2_000_000));
    let r = toy.probe(Params::default());
    assert_eq!(r.runs, vec![run(0, 699, 100)]);
    assert_eq!(r.glitches, 1);
}

#[test]
fn without_confirms_a_glitch_becomes_a_false_boundary() {
    // The same glitch with `confirms = 1`: this is what REQUIRED_CONFIRMS protects against.
    let mut toy = Toy::new(&[(8, 100)]);
    toy.glitches.push((30, 2_000_000));
    let p = Params {
        confirms: 1,
        ..Params::default()
    };
    let r = toy.probe(p);
    assert_eq!(r.runs.first(), Some(&run(0, 29, 30)));
}

#[test]
fn max_probes_stops_and_says_so() {
    let toy = Toy::new(&[(40, 100)]);
    let p = Params {
        max_probes: 50,
        ..Params::default()
    };
    let r = toy.probe(p);
    assert_eq!(r.probes, 50);
    assert!(!r.done);
    assert_eq!(r.stopped.as_deref(), Some("max_probes (50) reached"));
}

#[test]
fn a_failed_write_stops_the_probe() {
    let (f, report) = GeometryProbe::new(Params::default());
    let mut h = Harness::new(f, vec![always_on(0, "disk")]).unwrap();
    let io = submitted(&h.start(0))[0];
    assert!(submitted(&h.complete(10, io, Status::IoError)).is_empty());
    let r = report.lock().unwrap().clone();
    assert_eq!(
        r.stopped.as_deref(),
        Some("probe write at LBA 0 failed: IoError")
    );
}

#[test]
fn attach_needs_a_device_it_can_name() {
    let two = vec![always_on(0, "a"), always_on(1, "b")];
    let e = Harness::new(GeometryProbe::new(Params::default()).0, two.clone())
        .err()
        .unwrap();
    assert_eq!(
        e,
        "geometry-probe: 2 devices: say which to probe with `device`"
    );
    let p = Params {
        device: Some("b".into()),
        ..Params::default()
    };
    let h = Harness::new(GeometryProbe::new(p).0, two).unwrap();
    assert_eq!(h.function().dev, 1);
}
