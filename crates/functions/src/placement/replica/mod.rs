//! Failure-aware replica placement (thesis ch. 6): where a block's replica goes relative to
//! the block, in physical terms, and how well each choice survives a failure pattern.
//!
//! A [`Strategy`] maps a block to the LBA of its replica through the device's
//! [`Geometry`]: the other half of the same track, the same angle on the next cylinder,
//! on another surface of the same cylinder, a few cylinders away, or in another zone.
//! [`score`] measures a strategy against the bad sectors of a failure pattern (byte
//! ranges, e.g. from `wattio_devices::fault::region_ranges`): of the blocks whose
//! original is bad, the fraction whose replica is bad too (lost), and what keeping the
//! replica costs — the positioning time from the block to its replica (seek plus
//! rotation), the price of every resynchronising write.

use serde::Serialize;
use wattio_core::geometry::{Geometry, Location};
use wattio_core::time::Nanos;

/// Where a block's replica goes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "strategy")]
pub enum Strategy {
    /// Half a revolution further on the same track.
    SameTrack,
    /// The same angle on the same surface of the next cylinder.
    AdjacentTrack,
    /// The same angle on the next surface of the same cylinder.
    OtherSurface,
    /// The same angle on the same surface, `cylinders` cylinders further in.
    CylindersAway { cylinders: u32 },
    /// The same angle on the same surface, half the disk's cylinders away (another zone).
    OtherZone,
    /// `cylinders` cylinders further in *and* half a revolution further: off a band of
    /// whole cylinders and off a radial scratch at one angle at once.
    CylindersAwayHalfTurn { cylinders: u32 },
    /// The choice for a vendor's observed failure patterns ([`Vendor::strategy`]).
    VendorAware { vendor: Vendor },
}

/// A drive vendor of the thesis's case studies (Sec. 6.3), by the failure patterns its
/// failed drives showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// Deskstar 75GXP, Ultrastar 36LZX: a radial scratch on one surface (a head crash),
    /// some on neighbouring surfaces; bad sectors at small in-track offsets.
    Ibm,
    /// Caviar 205BA: a band of consecutive sectors over all surfaces of a few cylinders;
    /// WD400BB: scratches on all four surfaces.
    Wd,
    /// 4K020H1 (two drives): clusters on shared tracks in 3–4 zones.
    Maxtor,
    /// Fireball CX10.2A: a servo fault every 6 tracks on two surfaces; Fireball LCT10: a
    /// short run on 2 of 4 surfaces.
    Quantum,
}

impl Vendor {
    pub const ALL: [Vendor; 4] = [Vendor::Ibm, Vendor::Wd, Vendor::Maxtor, Vendor::Quantum];

    pub fn name(self) -> &'static str {
        match self {
            Vendor::Ibm => "ibm",
            Vendor::Wd => "wd",
            Vendor::Maxtor => "maxtor",
            Vendor::Quantum => "quantum",
        }
    }

    /// The cheapest placement the vendor's patterns leave intact (the thesis: "placement
    /// should depend on the vendor's failure patterns"):
    /// * IBM and Quantum fail at an *angle* — a radial scratch, a servo wedge, a short run
    ///   inside a track — on some surfaces, over many tracks: the other half of the same
    ///   track is off it, with no seek (a scratch's neighbouring surfaces and a servo
    ///   fault's other surface are not).
    /// * WD fails over *whole cylinders* (a band over all surfaces) and along radial
    ///   scratches on every surface: a few cylinders in and half a revolution on.
    /// * Maxtor's clusters share tracks in several zones: off the track and its angle, the
    ///   same as WD's.
    ///
    /// "A few cylinders": 8, past the Caviar's band (2,832 sectors over all surfaces is
    /// under two cylinders of its geometry) and not a multiple of the servo period (6).
    pub fn strategy(self) -> Strategy {
        match self {
            Vendor::Ibm | Vendor::Quantum => Strategy::SameTrack,
            Vendor::Wd | Vendor::Maxtor => Strategy::CylindersAwayHalfTurn { cylinders: 8 },
        }
    }
}

/// Where a failure of a block's sector is likely to take other sectors with it, relative to
/// the block: a layer that places replicas where it likes (FS2: free space near the head)
/// keeps them out of it. Two locations share the footprint when they are on cylinders less
/// than `cylinders` apart (a band of whole cylinders over every surface; clusters on shared
/// tracks), or when they are at most `angle / 2` of a revolution apart in angle on surfaces
/// at most `surfaces` apart (a radial scratch, which follows one angle over many
/// cylinders, on its surface and the neighbouring ones; a servo wedge on several surfaces).
/// Blocks are compared by the arcs of track their sectors cover ([`block_arcs`],
/// [`Footprint::shares_arcs`]); an arc of span 0 is one sector's start alone.
/// Zero in a field turns that part off.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Footprint {
    pub cylinders: u32,
    pub angle: f64,
    pub surfaces: u32,
}

impl Footprint {
    /// Nothing shared: every placement is independent.
    pub const NONE: Footprint = Footprint {
        cylinders: 0,
        angle: 0.0,
        surfaces: 0,
    };

    /// Whether a failure in arc `a` is likely to reach arc `b`: cylinders closer than
    /// `cylinders`, or the arcs within `angle / 2` of a revolution of each other (0 if they
    /// overlap) on surfaces at most `surfaces` apart.
    pub fn shares_arcs(&self, a: &TrackArc, b: &TrackArc) -> bool {
        if a.at.cylinder.abs_diff(b.at.cylinder) < self.cylinders {
            return true;
        }
        if self.angle > 0.0 && a.at.surface.abs_diff(b.at.surface) <= self.surfaces {
            return a.gap(b) <= self.angle / 2.0;
        }
        false
    }

    pub fn is_none(&self) -> bool {
        self.cylinders == 0 && self.angle == 0.0
    }
}

/// Sectors of one track a block covers: from `at` (its first sector's location), `span`
/// of a revolution on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackArc {
    pub at: Location,
    pub span: f64,
}

impl TrackArc {
    /// The angular distance between two arcs on the circle, in revolutions: 0 if they
    /// overlap (one starts inside the other).
    pub fn gap(&self, b: &TrackArc) -> f64 {
        let ab = (b.at.angle - self.at.angle).rem_euclid(1.0);
        let ba = (self.at.angle - b.at.angle).rem_euclid(1.0);
        if ab <= self.span || ba <= b.span {
            return 0.0;
        }
        (ab - self.span).min(ba - b.span)
    }
}

/// Where the `len` bytes from `offset` lie: one arc on their track, or two when they cross
/// a track's end (the first track's sectors from the first one to the track's end, and the
/// next track's from its first sector). A block longer than a track (more than two tracks)
/// is its two ends: the tracks between are whole, which every angle shares anyway on their
/// own surfaces. `None` past the end of the device.
pub fn block_arcs(g: &dyn Geometry, offset: u64, len: u64) -> Option<[Option<TrackArc>; 2]> {
    let a = g.locate(offset)?;
    let z = g.locate(offset + len.max(1) - 1)?;
    let spt = |l: &Location| f64::from(l.sectors_per_track.max(1));
    if (a.cylinder, a.surface) == (z.cylinder, z.surface) && z.sector >= a.sector {
        let span = f64::from(z.sector - a.sector + 1) / spt(&a);
        return Some([Some(TrackArc { at: a, span }), None]);
    }
    let first = TrackArc {
        at: a,
        span: f64::from(a.sectors_per_track.saturating_sub(a.sector)) / spt(&a),
    };
    let start = Location {
        sector: 0,
        angle: (z.angle - f64::from(z.sector) / spt(&z)).rem_euclid(1.0),
        ..z
    };
    let last = TrackArc {
        at: start,
        span: f64::from(z.sector + 1) / spt(&z),
    };
    Some([Some(first), Some(last)])
}

impl Vendor {
    /// The footprint of the vendor's case-study patterns (the digest's "Case studies";
    /// docs/failures.md): an angular window of 0.02 of a revolution is twice the widest
    /// scratch or servo window of the patterns `wattio reproduce failures` runs (0.01 and
    /// 0.02 wide) — a **choice**, as is the rest of this table:
    /// * IBM: a radial scratch on one surface and its neighbours (Deskstar: 467 of 575 on
    ///   surface 8, the rest on neighbouring ones) → the angle on surfaces ±1;
    /// * WD: a band over every surface of a few cylinders (Caviar: 2,832 consecutive) and
    ///   scratches on all four surfaces (WD400BB) → 8 cylinders, as `strategy`'s "a few",
    ///   and the angle on every surface;
    /// * Maxtor: clusters on shared tracks → the same cylinder;
    /// * Quantum: a servo fault every 6 tracks on two surfaces at one angle (CX10.2A) and a
    ///   short run on 2 of 4 surfaces of one cylinder (LCT10) → the angle on every surface
    ///   and the same cylinder.
    pub fn footprint(self) -> Footprint {
        const ANGLE: f64 = 0.02;
        match self {
            Vendor::Ibm => Footprint {
                cylinders: 0,
                angle: ANGLE,
                surfaces: 1,
            },
            Vendor::Wd => Footprint {
                cylinders: 8,
                angle: ANGLE,
                surfaces: u32::MAX,
            },
            Vendor::Maxtor => Footprint {
                cylinders: 1,
                angle: 0.0,
                surfaces: 0,
            },
            Vendor::Quantum => Footprint {
                cylinders: 1,
                angle: ANGLE,
                surfaces: u32::MAX,
            },
        }
    }

    /// The vendor named `name` (`ibm`, `wd`, `maxtor`, `quantum`).
    pub fn from_name(name: &str) -> Option<Vendor> {
        Vendor::ALL.into_iter().find(|v| v.name() == name)
    }
}

impl Strategy {
    pub fn name(&self) -> String {
        match self {
            Strategy::SameTrack => "same-track".into(),
            Strategy::AdjacentTrack => "adjacent-track".into(),
            Strategy::OtherSurface => "other-surface".into(),
            Strategy::CylindersAway { cylinders } => format!("{cylinders}-cylinders-away"),
            Strategy::OtherZone => "other-zone".into(),
            Strategy::CylindersAwayHalfTurn { cylinders } => {
                format!("{cylinders}-cylinders-away-half-turn")
            }
            Strategy::VendorAware { vendor } => format!("vendor-aware-{}", vendor.name()),
        }
    }
}

/// Physical → logical lookups over a geometry (which answers only logical → physical).
/// Cylinders grow with the LBA in every layout wattio models, so a cylinder's LBAs are
/// found by binary search.
pub struct Placer<'g> {
    g: &'g dyn Geometry,
    sectors: u64,
    sector: u64,
    cylinders: u32,
    surfaces: u32,
}

impl<'g> Placer<'g> {
    /// `capacity` in bytes, `sector` the LBA size.
    pub fn new(g: &'g dyn Geometry, capacity: u64, sector: u64) -> Result<Placer<'g>, String> {
        let sectors = capacity / sector;
        let last = sectors
            .checked_sub(1)
            .and_then(|l| g.locate(l * sector))
            .ok_or("placement: the device has no sectors")?;
        let mut p = Placer {
            g,
            sectors,
            sector,
            cylinders: last.cylinder + 1,
            surfaces: 1,
        };
        // Surfaces: the most seen on one cylinder (the first full one).
        let (a, b) = p.cylinder_lbas(0);
        let mut seen = 0u32;
        for lba in a..b {
            if let Some(l) = p.at(lba) {
                seen = seen.max(l.surface + 1);
            }
        }
        p.surfaces = seen.max(1);
        Ok(p)
    }

    fn at(&self, lba: u64) -> Option<Location> {
        self.g.locate(lba * self.sector)
    }

    pub fn cylinders(&self) -> u32 {
        self.cylinders
    }

    pub fn surfaces(&self) -> u32 {
        self.surfaces
    }

    /// LBAs `[from, to)` of cylinder `c`.
    pub fn cylinder_lbas(&self, c: u32) -> (u64, u64) {
        let first = |c: u32| {
            let (mut lo, mut hi) = (0u64, self.sectors);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if self.at(mid).map_or(u32::MAX, |l| l.cylinder) < c {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        (first(c), first(c.saturating_add(1)))
    }

    /// The LBA on (`cylinder`, `surface`) whose start is nearest `angle` (circularly), if
    /// that track holds any. Walks the cylinder track by track (a track's LBAs are
    /// consecutive), then estimates the sector from the angle and looks around it, so it
    /// costs a few lookups rather than one per sector of the cylinder.
    pub fn lba_at(&self, cylinder: u32, surface: u32, angle: f64) -> Option<u64> {
        let (a, b) = self.cylinder_lbas(cylinder);
        let mut t0 = a;
        let track = loop {
            if t0 >= b {
                return None;
            }
            let l = self.at(t0)?;
            if l.surface == surface {
                break l;
            }
            t0 += u64::from(l.sectors_per_track.saturating_sub(l.sector).max(1));
        };
        // The track's LBAs: from t0 while on this (cylinder, surface).
        let spt = u64::from(track.sectors_per_track.max(1));
        let ahead = ((angle - track.angle).rem_euclid(1.0) * spt as f64).round() as u64 % spt;
        let dist = |lba: u64| {
            self.at(lba)
                .filter(|l| l.cylinder == cylinder && l.surface == surface)
                .map(|l| {
                    let d = (l.angle - angle).rem_euclid(1.0);
                    d.min(1.0 - d)
                })
        };
        let guess = t0 + ahead;
        let mut best: Option<(f64, u64)> = None;
        // Slipped or spare sectors shift the estimate by a few sectors at most.
        for lba in guess.saturating_sub(3)..=guess + 3 {
            if let Some(d) = dist(lba) {
                if best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, lba));
                }
            }
        }
        best.or_else(|| dist(t0).map(|d| (d, t0)))
            .map(|(_, lba)| lba)
    }

    /// The replica's LBA for `lba` under `s` (`None` past the end, or where the target
    /// track does not exist, e.g. the last cylinder's next one).
    pub fn replica(&self, s: Strategy, lba: u64) -> Option<u64> {
        let l = self.at(lba)?;
        let half = (l.angle + 0.5).rem_euclid(1.0);
        match s {
            Strategy::SameTrack => self.lba_at(l.cylinder, l.surface, half),
            Strategy::AdjacentTrack => self.lba_at(l.cylinder.checked_add(1)?, l.surface, l.angle),
            Strategy::OtherSurface => {
                self.lba_at(l.cylinder, (l.surface + 1) % self.surfaces, l.angle)
            }
            Strategy::CylindersAway { cylinders } => {
                let c = l.cylinder.checked_add(cylinders)?;
                (c < self.cylinders).then_some(())?;
                self.lba_at(c, l.surface, l.angle)
            }
            Strategy::OtherZone => {
                let c = (l.cylinder + self.cylinders / 2) % self.cylinders;
                self.lba_at(c, l.surface, l.angle)
            }
            Strategy::CylindersAwayHalfTurn { cylinders } => {
                let c = l.cylinder.checked_add(cylinders)?;
                (c < self.cylinders).then_some(())?;
                self.lba_at(c, l.surface, half)
            }
            Strategy::VendorAware { vendor } => self.replica(vendor.strategy(), lba),
        }
    }
}

/// How a strategy fares against one failure pattern.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Score {
    pub strategy: String,
    /// Blocks whose original sector is bad (replicas placed for them).
    pub bad_originals: u64,
    /// Of those, the ones whose replica is bad too.
    pub lost: u64,
    /// `lost / bad_originals` (0 when nothing was bad).
    pub lost_fraction: f64,
    /// Mean positioning time from a block to its replica (seek + rotation), over the
    /// sampled blocks: what every resynchronisation pays.
    pub mean_resync_ns: Nanos,
}

/// Score `strategy` on the blocks `lbas` (a sample of the disk) against bad byte ranges
/// `bad` (sorted, `[from, to)`): every sampled block with a replica counts for the cost,
/// the bad ones for the losses.
pub fn score(p: &Placer, strategy: Strategy, lbas: &[u64], bad: &[[u64; 2]]) -> Score {
    let is_bad = |lba: u64| {
        let at = lba * p.sector;
        let i = bad.partition_point(|r| r[1] <= at);
        bad.get(i).is_some_and(|r| r[0] <= at)
    };
    let (mut bad_originals, mut lost, mut cost, mut n) = (0u64, 0u64, 0u128, 0u64);
    for &lba in lbas {
        let Some(r) = p.replica(strategy, lba) else {
            continue;
        };
        if let Some(t) = p.g.seek_time(lba * p.sector, r * p.sector, true) {
            let rot = p.at(lba).zip(p.at(r)).map_or(0.0, |(a, b)| {
                (b.angle - a.angle).rem_euclid(1.0) * p.g.rotation_period() as f64
            });
            cost += t as u128 + rot as u128;
            n += 1;
        }
        if is_bad(lba) {
            bad_originals += 1;
            lost += u64::from(is_bad(r));
        }
    }
    Score {
        strategy: strategy.name(),
        bad_originals,
        lost,
        lost_fraction: if bad_originals == 0 {
            0.0
        } else {
            lost as f64 / bad_originals as f64
        },
        mean_resync_ns: if n == 0 {
            0
        } else {
            (cost / n as u128) as Nanos
        },
    }
}

#[cfg(test)]
mod tests;
