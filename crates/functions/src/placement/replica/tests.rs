//! Placement on a hand-built geometry, scored against hand-built faults.

use super::*;

/// 4 cylinders × 2 surfaces × 8 sectors, no skew: LBA = 16c + 8h + s, angle s/8;
/// 10 ms a revolution, 1 ms per cylinder of seek, 0.5 ms for a head switch.
#[derive(Debug)]
struct Toy;
impl Geometry for Toy {
    fn locate(&self, offset: u64) -> Option<Location> {
        let lba = offset / 512;
        (lba < 64).then(|| Location {
            zone: 0,
            cylinder: (lba / 16) as u32,
            surface: ((lba / 8) % 2) as u32,
            sector: (lba % 8) as u32,
            sectors_per_track: 8,
            angle: (lba % 8) as f64 / 8.0,
        })
    }
    fn rotation_period(&self) -> Nanos {
        10_000_000
    }
    fn angle_at(&self, t: Nanos) -> f64 {
        (t % 10_000_000) as f64 / 1e7
    }
    fn seek_time(&self, from: u64, to: u64, _write: bool) -> Option<Nanos> {
        let (a, b) = (self.locate(from)?, self.locate(to)?);
        let cyl = a.cylinder.abs_diff(b.cylinder) as u64 * 1_000_000;
        let head = if a.surface != b.surface { 500_000 } else { 0 };
        Some(cyl.max(head))
    }
}

fn placer() -> Placer<'static> {
    Placer::new(&Toy, 64 * 512, 512).unwrap()
}

#[test]
fn the_toy_has_four_cylinders_of_two_surfaces() {
    let p = placer();
    assert_eq!((p.cylinders(), p.surfaces()), (4, 2));
    assert_eq!(p.cylinder_lbas(2), (32, 48));
    assert_eq!(p.lba_at(2, 1, 0.25), Some(42));
}

#[test]
fn every_strategy_maps_lba_19_by_hand() {
    // LBA 19 = cylinder 1, surface 0, sector 3 (angle 3/8).
    let p = placer();
    assert_eq!(p.replica(Strategy::SameTrack, 19), Some(16 + 7)); // sector 7: +1/2 rev
    assert_eq!(p.replica(Strategy::AdjacentTrack, 19), Some(32 + 3));
    assert_eq!(p.replica(Strategy::OtherSurface, 19), Some(16 + 8 + 3));
    assert_eq!(
        p.replica(Strategy::CylindersAway { cylinders: 2 }, 19),
        Some(48 + 3)
    );
    assert_eq!(
        p.replica(Strategy::CylindersAway { cylinders: 3 }, 19),
        None
    );
    // (1 + 4/2) mod 4 = 3
    assert_eq!(p.replica(Strategy::OtherZone, 19), Some(48 + 3));
    // Two cylinders in (cylinder 3) and half a revolution on (sector 7).
    let shifted = Strategy::CylindersAwayHalfTurn { cylinders: 2 };
    assert_eq!(p.replica(shifted, 19), Some(48 + 7));
    assert_eq!(shifted.name(), "2-cylinders-away-half-turn");
    // Vendor-aware: the vendor's choice, under the vendor's name.
    let ibm = Strategy::VendorAware {
        vendor: Vendor::Ibm,
    };
    assert_eq!(p.replica(ibm, 19), p.replica(Strategy::SameTrack, 19));
    assert_eq!(ibm.name(), "vendor-aware-ibm");
    // WD's 8 cylinders in run past this 4-cylinder toy: no replica.
    let wd = Strategy::VendorAware { vendor: Vendor::Wd };
    assert_eq!(p.replica(wd, 19), None);
    assert_eq!(p.replica(Strategy::AdjacentTrack, 63), None);
}

#[test]
fn a_scratch_on_one_surface_spares_other_surface_replicas_but_not_the_adjacent_track() {
    // A radial scratch: sectors 2–3 of surface 0 on every cylinder.
    let bad: Vec<[u64; 2]> = (0..4u64)
        .map(|c| [(16 * c + 2) * 512, (16 * c + 4) * 512])
        .collect();
    let p = placer();
    let all: Vec<u64> = (0..64).collect();
    let adj = score(&p, Strategy::AdjacentTrack, &all, &bad);
    // Bad originals with a next cylinder: cylinders 0–2, 2 sectors each; all lost.
    assert_eq!((adj.bad_originals, adj.lost), (6, 6));
    assert_eq!(adj.lost_fraction, 1.0);
    let other = score(&p, Strategy::OtherSurface, &all, &bad);
    assert_eq!((other.bad_originals, other.lost), (8, 0));
    let same = score(&p, Strategy::SameTrack, &all, &bad);
    assert_eq!((same.bad_originals, same.lost), (8, 0));
    // Costs: same track = half a revolution (5 ms) for every block; other surface = the
    // head switch (0.5 ms) and no rotation (same angle).
    assert_eq!(same.mean_resync_ns, 5_000_000);
    assert_eq!(other.mean_resync_ns, 500_000);
}

#[test]
fn a_servo_fault_every_other_cylinder_defeats_two_cylinders_away() {
    // Whole tracks of surface 0 on cylinders 0 and 2.
    let bad = vec![[0, 8 * 512], [32 * 512, 40 * 512]];
    let p = placer();
    let all: Vec<u64> = (0..64).collect();
    let away = score(&p, Strategy::CylindersAway { cylinders: 2 }, &all, &bad);
    assert_eq!((away.bad_originals, away.lost), (8, 8));
    let adj = score(&p, Strategy::AdjacentTrack, &all, &bad);
    assert_eq!((adj.bad_originals, adj.lost), (16, 0));
}

#[test]
fn a_band_and_a_radial_scratch_together_spare_only_the_shifted_replica() {
    // Cylinder 1 is bad on both surfaces (a band), and sector 3 of every track is bad (a
    // radial scratch at angle 3/8). For the bad block 19 (cylinder 1, sector 3):
    // same-track (sector 7 of cylinder 1) is in the band, two cylinders away (sector 3 of
    // cylinder 3) on the scratch; two cylinders away half a turn on (LBA 55) is clear.
    let p = placer();
    let mut bad: Vec<[u64; 2]> = vec![[16 * 512, 32 * 512]];
    for track in 0..8u64 {
        let lba = track * 8 + 3;
        if !(16..32).contains(&lba) {
            bad.push([lba * 512, (lba + 1) * 512]);
        }
    }
    bad.sort_unstable();
    let lost = |s: Strategy| score(&p, s, &[19], &bad).lost;
    assert_eq!(lost(Strategy::SameTrack), 1);
    assert_eq!(lost(Strategy::CylindersAway { cylinders: 2 }), 1);
    assert_eq!(lost(Strategy::OtherSurface), 1);
    assert_eq!(lost(Strategy::CylindersAwayHalfTurn { cylinders: 2 }), 0);
}

#[test]
fn footprints_by_hand() {
    // First sectors alone (no span).
    let at = |cylinder, surface, angle| TrackArc {
        at: Location {
            zone: 0,
            cylinder,
            surface,
            sector: 0,
            sectors_per_track: 8,
            angle,
        },
        span: 0.0,
    };
    let o = at(100, 3, 0.995);
    // IBM: the angle (±0.01, across 0) on surfaces 2..=4, any cylinder.
    let ibm = Vendor::Ibm.footprint();
    assert!(ibm.shares_arcs(&o, &at(900, 4, 0.004)));
    assert!(ibm.shares_arcs(&o, &at(900, 2, 0.986)));
    assert!(
        !ibm.shares_arcs(&o, &at(900, 5, 0.995)),
        "two surfaces away"
    );
    assert!(!ibm.shares_arcs(&o, &at(100, 3, 0.02)), "0.03 of a turn on");
    // WD: 8 cylinders either side on every surface, and the angle on every surface.
    let wd = Vendor::Wd.footprint();
    assert!(wd.shares_arcs(&o, &at(107, 0, 0.5)) && wd.shares_arcs(&o, &at(93, 7, 0.5)));
    assert!(!wd.shares_arcs(&o, &at(108, 0, 0.5)) && !wd.shares_arcs(&o, &at(92, 7, 0.5)));
    assert!(wd.shares_arcs(&o, &at(5000, 0, 0.999)));
    // Maxtor: the cylinder alone.
    let mx = Vendor::Maxtor.footprint();
    assert!(mx.shares_arcs(&o, &at(100, 0, 0.5)) && !mx.shares_arcs(&o, &at(101, 3, 0.995)));
    // Quantum: the cylinder, and the angle on every surface.
    let q = Vendor::Quantum.footprint();
    assert!(q.shares_arcs(&o, &at(100, 0, 0.5)) && q.shares_arcs(&o, &at(7000, 0, 0.986)));
    assert!(!q.shares_arcs(&o, &at(101, 0, 0.5)));
    assert!(!Footprint::NONE.shares_arcs(&o, &o) && Footprint::NONE.is_none());
    assert_eq!(Vendor::from_name("wd"), Some(Vendor::Wd));
    assert_eq!(Vendor::from_name("seagate"), None);
}

#[test]
fn a_blocks_arcs_and_their_gaps_by_hand() {
    // Two sectors from LBA 19 (cylinder 1, surface 0, sectors 3 and 4): one arc 3/8..5/8.
    let [a, none] = block_arcs(&Toy, 19 * 512, 1024).unwrap();
    let a = a.unwrap();
    assert_eq!((a.at.sector, a.span, none), (3, 0.25, None));
    // Four from LBA 22 (sectors 6 and 7 of surface 0, then 0 and 1 of surface 1): two.
    let [x, y] = block_arcs(&Toy, 22 * 512, 2048).unwrap();
    let (x, y) = (x.unwrap(), y.unwrap());
    assert_eq!(
        (x.at.surface, x.at.sector, x.at.angle, x.span),
        (0, 6, 0.75, 0.25)
    );
    assert_eq!(
        (y.at.surface, y.at.sector, y.at.angle, y.span),
        (1, 0, 0.0, 0.25)
    );
    assert_eq!(block_arcs(&Toy, 63 * 512, 1024), None, "past the end");
    // Gaps: start to start without spans; 0 when one starts inside the other; across 0.
    let arc = |angle: f64, span: f64| TrackArc {
        at: Location { angle, ..a.at },
        span,
    };
    assert!((arc(0.1, 0.0).gap(&arc(0.3, 0.0)) - 0.2).abs() < 1e-12);
    assert_eq!(arc(0.1, 0.25).gap(&arc(0.3, 0.0)), 0.0);
    assert_eq!(arc(0.3, 0.0).gap(&arc(0.1, 0.25)), 0.0);
    assert!((arc(0.1, 0.125).gap(&arc(0.3, 0.0)) - 0.075).abs() < 1e-12);
    assert!((arc(0.9, 0.05).gap(&arc(0.0, 0.1)) - 0.05).abs() < 1e-12);
    assert!((arc(0.0, 0.1).gap(&arc(0.9, 0.05)) - 0.05).abs() < 1e-12);
    // A footprint of 0.1 of a turn (±0.05): a block whose start is 0.2 past another's
    // shares it once the other's span reaches within 0.05 of it, not by its start alone.
    let f = Footprint {
        cylinders: 0,
        angle: 0.1,
        surfaces: 0,
    };
    assert!(!f.shares_arcs(&arc(0.1, 0.0), &arc(0.3, 0.0)));
    assert!(!f.shares_arcs(&arc(0.1, 0.125), &arc(0.3, 0.0)));
    assert!(f.shares_arcs(&arc(0.1, 0.16), &arc(0.3, 0.0)));
}
