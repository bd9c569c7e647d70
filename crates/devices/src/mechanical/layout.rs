//! Zoned layout (DiskSim's `dm_layout_g1`): logical block → (cylinder, surface, sector),
//! and the angular position of a physical sector.
//!
//! Zones ("bands") hold whole cylinders with one sectors-per-track count. Spare space and
//! slipped (skipped) defective sectors are placed by the sparing scheme; remapped defects
//! move one block to a spare location. The mapping reproduces DiskSim's `ltop` functions
//! scheme by scheme, because the validated drive parameters (skews, slips) were extracted
//! assuming exactly those semantics. Slip and defect numbers are physical sector (or, for
//! track sparing, track) indices counted from the start of the zone.

use super::tree_layout::{TreeDef, TreeLayout};
use serde::{Deserialize, Serialize};

/// DiskSim sparing schemes (`disksim_diskmap.h`).
pub const NO_SPARING: u32 = 0;
pub const TRACK_SPARING: u32 = 1;
pub const SECTPERCYL_SPARING: u32 = 2;
pub const SECTPERTRACK_SPARING: u32 = 3;
pub const SECTPERCYL_SLIPTOEND: u32 = 4;
pub const SECTPERCYL_ATFRONT: u32 = 5;
pub const SECTPERCYL_ATFRONT_SLIPTOEND: u32 = 6;
pub const SECTATEND_SPARING: u32 = 7;
pub const SECTPERRANGE_SPARING: u32 = 8;
pub const SECTSPERZONE_SPARING: u32 = 9;
pub const SECTSPERZONE_SLIPTOEND: u32 = 10;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    pub first_cyl: u32,
    pub last_cyl: u32,
    pub blocks_per_track: u32,
    /// Angular offset of the zone's first block, in sectors.
    #[serde(default)]
    pub first_block_offset: f64,
    /// Unused sectors at the front of the zone.
    #[serde(default)]
    pub empty_front: u32,
    /// Skews in sectors.
    #[serde(default)]
    pub track_skew: f64,
    #[serde(default)]
    pub cyl_skew: f64,
    #[serde(default)]
    pub spares: u32,
    #[serde(default)]
    pub slips: Vec<u64>,
    /// Pairs (defective location, spare it is remapped to).
    #[serde(default)]
    pub defects: Vec<[u64; 2]>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LayoutDef {
    /// 0 normal, 1 cylinder switch stays on surface (first cylinder of a zone normal),
    /// 2 the same with even cylinders normal.
    #[serde(default)]
    pub mapping: u32,
    pub sparing: u32,
    #[serde(default = "one")]
    pub range_size: u32,
    #[serde(default)]
    pub zones: Vec<Zone>,
    /// A layout given as an index tree instead of zones (DiskSim's `dm_layout_g4`,
    /// [`super::tree_layout`]); `zones` is then empty and `mapping`, `sparing` and
    /// `range_size` unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<TreeDef>,
}

fn one() -> u32 {
    1
}

/// A physical block address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pbn {
    pub cyl: u32,
    pub head: u32,
    pub sector: u32,
}

/// The fractional part in [0, 1) (`rem_euclid(1.0)` without a libm `fmod` call; exact
/// below 2^52, which simulated revolutions stay under). From 2^52 on an f64 has no
/// fraction (and `as i64` would saturate past 2^63), as NaN has none: 0 (a drive file's
/// extreme skews, found by fuzzing the importer).
pub(crate) fn frac(x: f64) -> f64 {
    if x.is_nan() || x.abs() >= 4_503_599_627_370_496.0 {
        return 0.0;
    }
    let f = x - x as i64 as f64;
    if f < 0.0 {
        f + 1.0
    } else {
        f
    }
}

impl Pbn {
    /// The sector `i` further along the same track.
    pub fn plus(self, i: u64) -> Pbn {
        let i = u32::try_from(i).unwrap_or(u32::MAX);
        Pbn {
            sector: self.sector.saturating_add(i),
            ..self
        }
    }
}

#[derive(Clone, Debug)]
struct Band {
    z: Zone,
    first_lbn: u64,
    blocks: u64,
    slips: Vec<u64>,
}

#[derive(Clone, Debug)]
pub struct Layout {
    /// The tree form, which answers every query when present.
    tree: Option<TreeLayout>,
    surfaces: u32,
    mapping: u32,
    sparing: u32,
    range_size: u64,
    bands: Vec<Band>,
    total: u64,
}

impl Layout {
    pub fn new(def: &LayoutDef, surfaces: u32, cylinders: u32) -> Result<Layout, String> {
        if surfaces == 0 {
            return Err("timing.surfaces: expected ≥ 1".into());
        }
        if let Some(t) = &def.tree {
            if !def.zones.is_empty() {
                return Err("timing.layout: give zones or a tree, not both".into());
            }
            return Ok(Layout {
                tree: Some(TreeLayout::new(t, surfaces)?),
                surfaces,
                mapping: 0,
                sparing: NO_SPARING,
                range_size: 1,
                bands: Vec::new(),
                total: t.blocks,
            });
        }
        if def.sparing > SECTSPERZONE_SLIPTOEND {
            return Err(format!(
                "timing.layout.sparing: unknown sparing scheme {} (expected 0–10)",
                def.sparing
            ));
        }
        if def.mapping > 2 {
            return Err(format!(
                "timing.layout.mapping: unknown LBN-to-PBN mapping {} (expected 0–2)",
                def.mapping
            ));
        }
        if def.range_size == 0 {
            return Err("timing.layout.range_size: expected ≥ 1".into());
        }
        if def.zones.is_empty() {
            return Err("timing.layout.zones: expected at least one zone".into());
        }
        let mut bands = Vec::with_capacity(def.zones.len());
        let mut first_lbn = 0u64;
        let mut prev_last: Option<u32> = None;
        for (i, z) in def.zones.iter().enumerate() {
            let key = format!("timing.layout.zones[{i}]");
            // DiskSim accepts zones reaching past the declared cylinder count (hp_c2490a).
            if z.blocks_per_track == 0
                || z.last_cyl < z.first_cyl
                || z.last_cyl > cylinders.saturating_mul(2)
            {
                return Err(format!(
                    "{key}: expected blocks_per_track ≥ 1 and first_cyl ≤ last_cyl (cylinders: {cylinders})"
                ));
            }
            if prev_last.is_some_and(|p| z.first_cyl <= p) {
                return Err(format!("{key}: zones must be in increasing cylinder order"));
            }
            prev_last = Some(z.last_cyl);
            if !(z.track_skew.is_finite()
                && z.cyl_skew.is_finite()
                && z.first_block_offset.is_finite())
            {
                return Err(format!("{key}: skews must be finite numbers"));
            }
            let cyls = (z.last_cyl - z.first_cyl + 1) as u64;
            let bpt = z.blocks_per_track as u64;
            let s = surfaces as u64;
            let spares = z.spares as u64;
            let mut slips = z.slips.clone();
            slips.sort_unstable();
            let too_big = || format!("{key}: zone too large");
            let raw = cyls
                .checked_mul(bpt)
                .and_then(|x| x.checked_mul(s))
                .ok_or_else(too_big)?;
            let nslips = slips.len() as u64;
            // Operands are ≤ 2^32 each, so two-factor products cannot overflow a u64.
            let lose = match def.sparing {
                NO_SPARING => Some(0),
                TRACK_SPARING => Some(spares * bpt),
                SECTPERTRACK_SPARING => (spares * cyls).checked_mul(s),
                SECTATEND_SPARING => Some(nslips),
                SECTSPERZONE_SPARING => Some(spares),
                SECTSPERZONE_SLIPTOEND => Some(spares + nslips),
                SECTPERCYL_SPARING | SECTPERCYL_ATFRONT => Some(spares * cyls),
                SECTPERCYL_SLIPTOEND | SECTPERCYL_ATFRONT_SLIPTOEND => {
                    (spares * cyls).checked_add(nslips)
                }
                _ => Some(spares * (cyls / def.range_size as u64)),
            }
            .and_then(|l| l.checked_add(z.empty_front as u64))
            .ok_or_else(too_big)?;
            let blocks = raw.checked_sub(lose).ok_or_else(|| {
                format!("{key}: spares and empty space exceed the zone's sectors")
            })?;
            bands.push(Band {
                z: z.clone(),
                first_lbn,
                blocks,
                slips,
            });
            first_lbn = first_lbn.checked_add(blocks).ok_or_else(too_big)?;
        }
        Ok(Layout {
            tree: None,
            surfaces,
            mapping: def.mapping,
            sparing: def.sparing,
            range_size: def.range_size as u64,
            bands,
            total: first_lbn,
        })
    }

    /// Blocks the layout holds (DiskSim recomputes the drive's block count this way too).
    pub fn blocks(&self) -> u64 {
        self.total
    }

    /// Physical sectors on track (`cyl`, `head`) (the zoned form: the zone's, every surface
    /// alike).
    pub fn blocks_per_track(&self, cyl: u32, head: u32) -> u32 {
        if let Some(t) = &self.tree {
            return t.sectors_per_track(cyl, head);
        }
        self.band_of_cyl(cyl).map_or(1, |b| b.z.blocks_per_track)
    }

    fn band_of_lbn(&self, lbn: u64) -> Option<&Band> {
        let i = self
            .bands
            .partition_point(|b| b.first_lbn + b.blocks <= lbn);
        self.bands.get(i)
    }

    /// Index of the zone holding cylinder `cyl`.
    pub fn zone_of_cyl(&self, cyl: u32) -> Option<usize> {
        if let Some(t) = &self.tree {
            return t.zone_of_cyl(cyl);
        }
        // As `band_of_cyl`: a cylinder before the first zone's belongs to the first zone.
        let i = self.bands.partition_point(|b| b.z.first_cyl <= cyl);
        Some(i.saturating_sub(1)).filter(|&z| z < self.bands.len())
    }

    fn band_of_cyl(&self, cyl: u32) -> Option<&Band> {
        // Zones may skip cylinders; such a cylinder belongs to the zone before it.
        let i = self.bands.partition_point(|b| b.z.first_cyl <= cyl);
        self.bands.get(i.saturating_sub(1))
    }

    fn surf_on_cyl(&self, b: &Band, cyl: u32, head: u32) -> u32 {
        let flip = match self.mapping {
            1 => (cyl - b.z.first_cyl) % 2 == 1,
            2 => cyl % 2 == 1,
            _ => false,
        };
        if flip {
            self.surfaces - head - 1
        } else {
            head
        }
    }

    fn is_sectpercyl(&self) -> bool {
        matches!(
            self.sparing,
            SECTPERCYL_SPARING
                | SECTPERCYL_SLIPTOEND
                | SECTPERCYL_ATFRONT
                | SECTPERCYL_ATFRONT_SLIPTOEND
        )
    }

    fn slip_to_end(&self) -> bool {
        matches!(
            self.sparing,
            SECTPERCYL_SLIPTOEND | SECTPERCYL_ATFRONT_SLIPTOEND | SECTATEND_SPARING
        )
    }

    /// Physical location of `lbn` with slips and remapped defects applied (DiskSim's
    /// `MAP_FULL`). `None` past the last block.
    pub fn ltop(&self, lbn: u64) -> Option<Pbn> {
        if let Some(t) = &self.tree {
            return t.ltop(lbn);
        }
        let b = self.band_of_lbn(lbn)?;
        let z = &b.z;
        let s = self.surfaces as u64;
        let bpt = z.blocks_per_track as u64;
        let mut l = lbn - b.first_lbn + z.empty_front as u64;
        let spares = z.spares as u64;
        // (track index within zone, sector)
        let (track, sector) = match self.sparing {
            NO_SPARING => (l / bpt, l % bpt),
            TRACK_SPARING => {
                let mut t = l / bpt;
                for &sl in &b.slips {
                    if sl <= t {
                        t += 1;
                    }
                }
                for d in &z.defects {
                    if d[0] == t {
                        t = d[1];
                        break;
                    }
                }
                (t, l % bpt)
            }
            SECTPERTRACK_SPARING => {
                let per = bpt.checked_sub(spares).filter(|&p| p > 0)?;
                let mut t = l / per;
                l %= per;
                let first = bpt * t;
                for &sl in &b.slips {
                    if sl >= first && sl - first <= l {
                        l += 1;
                    }
                }
                for d in &z.defects {
                    if d[0] == first + l {
                        t = d[1] / bpt;
                        l = d[1] % bpt;
                    }
                }
                if l >= bpt {
                    return None;
                }
                (t, l)
            }
            SECTPERRANGE_SPARING => {
                let per_cyl = bpt * s;
                let per_range = per_cyl.saturating_mul(self.range_size);
                let lbns = per_range.checked_sub(spares).filter(|&p| p > 0)?;
                let range = l / lbns;
                l %= lbns;
                let first = range.saturating_mul(per_range);
                let mut slips = 0;
                for &sl in &b.slips {
                    if sl >= first && sl - first <= l + slips {
                        slips += 1;
                    }
                }
                l += slips;
                for d in &z.defects {
                    if d[0] == first + l && d[1] != d[0] {
                        l = d[1] % per_range;
                        break;
                    }
                }
                let cyl = range
                    .saturating_mul(self.range_size)
                    .saturating_add(l / per_cyl);
                (
                    cyl.saturating_mul(s).saturating_add((l % per_cyl) / bpt),
                    l % bpt,
                )
            }
            SECTSPERZONE_SPARING | SECTSPERZONE_SLIPTOEND => {
                let mut slips = 0;
                for &sl in &b.slips {
                    if sl <= l + slips {
                        slips += 1;
                    }
                }
                l += slips;
                for d in &z.defects {
                    if d[0] == l && d[1] != d[0] {
                        l = d[1];
                        break;
                    }
                }
                (l / bpt, l % bpt)
            }
            _ => {
                // Sectors per cylinder (and sectors at end, which DiskSim maps the same way
                // with slips pushed to the end).
                let per_cyl = bpt * s;
                let lbns = per_cyl.checked_sub(spares).filter(|&p| p > 0)?;
                let mut cyl = l / lbns;
                l %= lbns;
                let first = cyl * per_cyl;
                let mut slips = 0;
                for &sl in &b.slips {
                    if (self.slip_to_end() && sl / per_cyl < cyl)
                        || (sl >= first && sl - first <= l + slips)
                    {
                        slips += 1;
                    }
                }
                l += slips;
                let mut remapped = false;
                for d in &z.defects {
                    if d[0] == first + l && d[1] != d[0] {
                        cyl = d[1] / per_cyl;
                        l = d[1] % per_cyl;
                        remapped = true;
                        break;
                    }
                }
                if !remapped {
                    cyl += l / lbns;
                    l %= lbns;
                }
                if matches!(
                    self.sparing,
                    SECTPERCYL_ATFRONT | SECTPERCYL_ATFRONT_SLIPTOEND
                ) && !remapped
                {
                    l += spares;
                    cyl += l / per_cyl;
                    l %= per_cyl;
                }
                (cyl * s + l / bpt, l % bpt)
            }
        };
        let cyl = z.first_cyl as u64 + track / s;
        let head = (track % s) as u32;
        let cyl = u32::try_from(cyl).ok()?;
        let head = self.surf_on_cyl(b, cyl, head);
        Some(Pbn {
            cyl,
            head,
            sector: sector as u32,
        })
    }

    /// How many sectors of `p`'s track, from sector 0, hold consecutive LBNs, when the
    /// layout says so without a search: zones without slips or remapped defects, and
    /// sparing schemes whose spare sectors sit at the end of a track, cylinder or range.
    /// `None` when a slip, defect or other scheme may break the track.
    pub fn track_usable(&self, p: Pbn) -> Option<u32> {
        if let Some(t) = &self.tree {
            return t.track_usable(p);
        }
        let b = self.band_of_cyl(p.cyl)?;
        let z = &b.z;
        if !b.slips.is_empty() || !z.defects.is_empty() {
            return None;
        }
        let bpt = u64::from(z.blocks_per_track);
        let spares = u64::from(z.spares);
        let s = u64::from(self.surfaces);
        let range_end = |cyls_per_range: u64| -> Option<u32> {
            // Spares fill the end of each range of `cyls_per_range` cylinders.
            let head = u64::from(self.surf_on_cyl(b, p.cyl, p.head));
            let cylrel = u64::from(p.cyl.checked_sub(z.first_cyl)?);
            let track = (cylrel % cyls_per_range) * s + head;
            let per_range = bpt * s * cyls_per_range;
            let usable = per_range.checked_sub(spares)?;
            let left = usable.saturating_sub(track * bpt).min(bpt);
            u32::try_from(left).ok()
        };
        match self.sparing {
            NO_SPARING | TRACK_SPARING => Some(z.blocks_per_track),
            SECTPERTRACK_SPARING => z.blocks_per_track.checked_sub(z.spares),
            SECTPERCYL_SPARING => range_end(1),
            SECTPERRANGE_SPARING => range_end(self.range_size),
            _ => None,
        }
    }

    /// Angle (fraction of a revolution, in [0, 1)) where sector `p` starts: the zone offset
    /// plus one track skew per track switch and one cylinder skew per cylinder switch since
    /// the zone start, plus slipped sectors for the schemes that slip within the cylinder
    /// (DiskSim's `g1_map_pbn_skew`).
    pub fn angle(&self, p: Pbn) -> f64 {
        if let Some(t) = &self.tree {
            return t.angle(p);
        }
        let Some(b) = self.band_of_cyl(p.cyl) else {
            return 0.0;
        };
        let z = &b.z;
        let cylrel = (p.cyl - b.z.first_cyl) as f64;
        let head = self.surf_on_cyl(b, p.cyl, p.head);
        let switches = head as f64 + (self.surfaces as f64 - 1.0) * cylrel;
        let mut sectors =
            z.first_block_offset + switches * z.track_skew + cylrel * z.cyl_skew + p.sector as f64;
        if self.is_sectpercyl() || self.sparing == SECTPERTRACK_SPARING {
            let mut tracks = (p.cyl - z.first_cyl) as u64 * self.surfaces as u64;
            if self.sparing == SECTPERTRACK_SPARING {
                tracks += p.head as u64;
            }
            let cutoff = tracks * z.blocks_per_track as u64;
            sectors += b.slips.partition_point(|&s| s < cutoff) as f64;
        }
        frac(sectors / z.blocks_per_track as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scheme 8, ranges of 1 cylinder, cylinders 0–1 at 10 spt, 2 spares per range, and a
    /// slip at physical sector 3 of the zone.
    fn slipped_range() -> LayoutDef {
        let mut z = zone(0, 1, 10);
        z.spares = 2;
        z.slips = vec![3];
        LayoutDef {
            tree: None,
            mapping: 0,
            sparing: SECTPERRANGE_SPARING,
            range_size: 1,
            zones: vec![z],
        }
    }

    fn zone(first: u32, last: u32, bpt: u32) -> Zone {
        Zone {
            first_cyl: first,
            last_cyl: last,
            blocks_per_track: bpt,
            first_block_offset: 0.0,
            empty_front: 0,
            track_skew: 0.0,
            cyl_skew: 0.0,
            spares: 0,
            slips: vec![],
            defects: vec![],
        }
    }

    fn p(cyl: u32, head: u32, sector: u32) -> Pbn {
        Pbn { cyl, head, sector }
    }

    /// Sectors of `q`'s track holding consecutive LBNs from sector 0, by walking `ltop`.
    fn usable_by_walk(l: &Layout, q: Pbn) -> u32 {
        (0..l.blocks())
            .filter_map(|x| l.ltop(x))
            .filter(|r| r.cyl == q.cyl && r.head == q.head)
            .map(|r| r.sector + 1)
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn track_usable_matches_the_mapping() {
        // Spares at the end of each 2-cylinder range (scheme 8), per cylinder (scheme 2),
        // per track (scheme 3), serpentine surfaces (mapping 1), and none at all; every
        // track's usable sectors must be what walking the LBN mapping finds.
        for (sparing, spares, range, mapping) in [
            (SECTPERRANGE_SPARING, 13, 2, 0),
            (SECTPERRANGE_SPARING, 3, 1, 1),
            (SECTPERCYL_SPARING, 4, 1, 0),
            (SECTPERTRACK_SPARING, 2, 1, 0),
            (NO_SPARING, 0, 1, 1),
        ] {
            let mut z = zone(0, 3, 10);
            z.spares = spares;
            let def = LayoutDef {
                tree: None,
                mapping,
                sparing,
                range_size: range,
                zones: vec![z],
            };
            let l = Layout::new(&def, 3, 4).unwrap();
            for cyl in 0..4 {
                for head in 0..3 {
                    let q = p(cyl, head, 0);
                    assert_eq!(
                        l.track_usable(q),
                        Some(usable_by_walk(&l, q)),
                        "scheme {sparing}, spares {spares}, range {range}, mapping {mapping}, track {cyl}/{head}"
                    );
                }
            }
        }
        // A slip makes the answer a search's job.
        let def = slipped_range();
        assert_eq!(
            Layout::new(&def, 2, 2).unwrap().track_usable(p(0, 0, 0)),
            None
        );
    }

    #[test]
    fn fractional_part() {
        assert_eq!(frac(2.25), 0.25);
        assert_eq!(frac(-0.25), 0.75);
        assert_eq!(frac(7.0), 0.0);
        // Exact where `rem_euclid` is: the integer part of a representable value.
        let x = 123_456.789_f64;
        assert_eq!(frac(x), x.rem_euclid(1.0));
        // No fraction left from 2^52 on, nor in NaN or an infinity; past 2^63 `as i64`
        // saturates, which gave 1.0e19 for 1e19 before the guard.
        assert_eq!(frac(4_503_599_627_370_496.5), 0.0);
        for x in [1e19, -1e19, f64::INFINITY, f64::NAN, 1e300] {
            assert_eq!(frac(x), 0.0, "{x}");
        }
        assert_eq!(frac(4_503_599_627_370_495.5), 0.5);
    }

    #[test]
    fn zone_boundary_no_sparing() {
        // 2 surfaces; zone 0: cyls 0–1 at 10 spt (40 blocks), zone 1: cyls 2–3 at 8 spt.
        let def = LayoutDef {
            tree: None,
            mapping: 0,
            sparing: NO_SPARING,
            range_size: 1,
            zones: vec![zone(0, 1, 10), zone(2, 3, 8)],
        };
        let l = Layout::new(&def, 2, 4).unwrap();
        assert_eq!(l.blocks(), 40 + 32);
        assert_eq!(l.ltop(0), Some(p(0, 0, 0)));
        assert_eq!(l.ltop(10), Some(p(0, 1, 0)));
        assert_eq!(l.ltop(39), Some(p(1, 1, 9)));
        assert_eq!(l.ltop(40), Some(p(2, 0, 0)));
        assert_eq!(l.ltop(71), Some(p(3, 1, 7)));
        assert_eq!(l.ltop(72), None);
    }

    #[test]
    fn slips_and_spares_per_range() {
        // Scheme 8, range of 1 cylinder, 2 surfaces × 10 spt, 2 spares per range: 18
        // blocks per cylinder. A slip at physical sector 3 of the zone pushes LBN 3 onward
        // by one on cylinder 0 only.
        let def = slipped_range();
        let l = Layout::new(&def, 2, 2).unwrap();
        assert_eq!(l.blocks(), 36);
        assert_eq!(l.ltop(2), Some(p(0, 0, 2)));
        assert_eq!(l.ltop(3), Some(p(0, 0, 4)));
        assert_eq!(l.ltop(9), Some(p(0, 1, 0)));
        // LBN 17 is the last of cylinder 0: physical 18 (one slip), spare at 19 unused.
        assert_eq!(l.ltop(17), Some(p(0, 1, 8)));
        assert_eq!(l.ltop(18), Some(p(1, 0, 0)));
    }

    #[test]
    fn slips_per_zone_and_remapped_defect() {
        // Scheme 9: slips anywhere in the zone shift everything after them.
        let mut z = zone(0, 1, 10);
        z.spares = 4;
        z.slips = vec![5, 25];
        z.defects = vec![[12, 39]];
        let def = LayoutDef {
            tree: None,
            mapping: 0,
            sparing: SECTSPERZONE_SPARING,
            range_size: 1,
            zones: vec![z],
        };
        let l = Layout::new(&def, 2, 2).unwrap();
        assert_eq!(l.blocks(), 36);
        assert_eq!(l.ltop(4), Some(p(0, 0, 4)));
        assert_eq!(l.ltop(5), Some(p(0, 0, 6)));
        // LBN 11 → physical 12 (after one slip) is defective → remapped to 39.
        assert_eq!(l.ltop(11), Some(p(1, 1, 9)));
        assert_eq!(l.ltop(23), Some(p(1, 0, 4)));
        assert_eq!(l.ltop(24), Some(p(1, 0, 6)));
    }

    #[test]
    fn track_sparing_skips_slipped_tracks() {
        let mut z = zone(0, 1, 10);
        z.spares = 1;
        z.slips = vec![1];
        let def = LayoutDef {
            tree: None,
            mapping: 0,
            sparing: TRACK_SPARING,
            range_size: 1,
            zones: vec![z],
        };
        let l = Layout::new(&def, 2, 2).unwrap();
        assert_eq!(l.blocks(), 30);
        assert_eq!(l.ltop(9), Some(p(0, 0, 9)));
        assert_eq!(l.ltop(10), Some(p(1, 0, 0)));
        assert_eq!(l.ltop(29), Some(p(1, 1, 9)));
    }

    #[test]
    fn surface_serpentine_mapping() {
        let def = LayoutDef {
            tree: None,
            mapping: 1,
            sparing: NO_SPARING,
            range_size: 1,
            zones: vec![zone(0, 1, 10)],
        };
        let l = Layout::new(&def, 2, 2).unwrap();
        // Odd cylinder (relative to zone start) runs the surfaces backwards.
        assert_eq!(l.ltop(20), Some(p(1, 1, 0)));
        assert_eq!(l.ltop(30), Some(p(1, 0, 0)));
    }

    #[test]
    fn skew_angles() {
        let mut z = zone(0, 1, 10);
        z.track_skew = 2.0;
        z.cyl_skew = 3.0;
        let def = LayoutDef {
            tree: None,
            mapping: 0,
            sparing: NO_SPARING,
            range_size: 1,
            zones: vec![z],
        };
        let l = Layout::new(&def, 2, 2).unwrap();
        assert_eq!(l.angle(p(0, 0, 0)), 0.0);
        assert!((l.angle(p(0, 1, 0)) - 0.2).abs() < 1e-12);
        // cylinder 1, head 0: one track switch (surfaces − 1) plus one cylinder skew.
        assert!((l.angle(p(1, 0, 1)) - 0.6).abs() < 1e-12);
        // wraps around the revolution.
        assert!((l.angle(p(1, 1, 9)) - 0.6).abs() < 1e-12);
    }
}
