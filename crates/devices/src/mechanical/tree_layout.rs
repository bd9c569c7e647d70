//! A layout given as a tree of run-length-encoded track patterns (DiskSim's
//! `dm_layout_g4`, the form DIXtrac extracts from a modern drive): logical block →
//! (cylinder, surface, sector), the sectors per track and the angle of a sector.
//!
//! Modern drives do not fit the zoned model of [`super::layout`]: each surface has its own
//! sectors per track within a zone, and LBNs run serpentine — down a band of cylinders on
//! one surface, up the same band on the next. The tree says that compactly. A leaf is a
//! track pattern: the sectors `low..=high` of a track of `spt` physical sectors hold
//! consecutive LBNs. An index node is a list of entries; an entry covers `run_len` LBNs
//! from `lbn` (relative to its parent's instance; absolute in the root, the last node) as
//! instances of its child, each `len` LBNs long, `cyl_len` cylinders wide and turned
//! `angle_len` of a revolution from the one before. Instance `q` of an entry starts at
//! cylinder `cyl + q·cyl_len`, or `cyl − q·cyl_len` when `cyl_run_len` is negative (the
//! band is walked downwards), and at angle `off + q·angle_len`. An entry whose child is a
//! track pattern also names its surface.
//!
//! Slipped sectors are LBN positions of the tree that hold no block: a block's tree LBN is
//! its LBN plus the slips at or before it (counted as the position moves past them, as
//! DiskSim's `slipcount` does). A remap sends a run of LBNs to another track.
//!
//! These semantics are DiskSim's (`layout_g4.c`), because extracted drive parameters
//! assume exactly them, with two departures, both where DiskSim's own code cannot be
//! what was meant: a track pattern whose first mapped sector is not 0 maps its first LBN
//! to that sector (DiskSim compares the LBN's offset in the track with the sector number,
//! which would leave such a track's first LBNs unmapped; every pattern DIXtrac writes
//! starts at 0, where both agree), and an angle is computed in f64 revolutions instead of
//! DiskSim's 32-bit fixed point (a difference below a nanosecond at any rotation speed).

use super::layout::{frac, Pbn};
use serde::{Deserialize, Serialize};

/// Deepest index tree followed (DiskSim's `G4_ALLOC_PATH`): a deeper or cyclic tree is
/// refused when the layout is built.
pub const MAX_DEPTH: usize = 16;

/// An entry's child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Child {
    /// Track pattern `tp` on surface `head`.
    Track { tp: u32, head: u32 },
    /// Index node `node`.
    Node(u32),
}

/// One index entry. In a catalogue file it is an array of eleven numbers:
/// `[lbn, cyl, off, len, cyl_len, angle_len, run_len, cyl_run_len, kind, child, head]`,
/// `kind` 0 for a track pattern (on surface `head`) and 1 for an index node (`head` 0):
/// DiskSim's IDX fields in DiskSim's order, with its `TRACK`/`IDX` word as a number.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<f64>", into = "Vec<f64>")]
pub struct Entry {
    pub lbn: u64,
    pub cyl: i64,
    pub off: f64,
    pub len: u64,
    pub cyl_len: i64,
    pub angle_len: f64,
    pub run_len: u64,
    pub cyl_run_len: i64,
    pub child: Child,
}

impl Entry {
    /// Whether the entry's cylinders (`cyl` onwards, or downwards for a negative
    /// `cyl_run_len`; none for 0) hold `cyl`, relative as the entry's own.
    fn holds_cyl(&self, cyl: i64) -> bool {
        let (lo, hi) = if self.cyl_run_len > 0 {
            (self.cyl, self.cyl + self.cyl_run_len - 1)
        } else {
            (self.cyl + self.cyl_run_len + 1, self.cyl)
        };
        lo <= cyl && cyl <= hi
    }
}

/// Largest whole number an entry field may hold (so that it is exact in an f64 and sums
/// of a few of them stay in an i64).
const MAX_FIELD: f64 = (1u64 << 48) as f64;

impl TryFrom<Vec<f64>> for Entry {
    type Error = String;
    fn try_from(v: Vec<f64>) -> Result<Entry, String> {
        if v.len() != 11 {
            return Err(format!(
                "a tree entry has 11 numbers [lbn, cyl, off, len, cyl_len, angle_len, run_len, cyl_run_len, kind, child, head], got {}",
                v.len()
            ));
        }
        let whole = |i: usize, name: &str, signed: bool| -> Result<i64, String> {
            let x = v[i];
            if x.fract() != 0.0 || x.abs() > MAX_FIELD || (!signed && x < 0.0) {
                let what = if signed {
                    "a whole number"
                } else {
                    "a whole number ≥ 0"
                };
                return Err(format!("tree entry `{name}`: expected {what}, got {x}"));
            }
            Ok(x as i64)
        };
        let angle = |i: usize, name: &str| -> Result<f64, String> {
            if v[i].is_finite() {
                Ok(v[i])
            } else {
                Err(format!(
                    "tree entry `{name}`: expected a finite angle, got {}",
                    v[i]
                ))
            }
        };
        let child = u32::try_from(whole(9, "child", false)?)
            .map_err(|_| "tree entry `child`: too large".to_string())?;
        let head = whole(10, "head", false)?;
        let child = match whole(8, "kind", false)? {
            0 => Child::Track {
                tp: child,
                head: u32::try_from(head).map_err(|_| "tree entry `head`: too large")?,
            },
            1 => Child::Node(child),
            k => {
                return Err(format!(
                    "tree entry `kind`: expected 0 (track pattern) or 1 (index node), got {k}"
                ))
            }
        };
        Ok(Entry {
            lbn: whole(0, "lbn", false)? as u64,
            cyl: whole(1, "cyl", true)?,
            off: angle(2, "off")?,
            len: whole(3, "len", false)? as u64,
            cyl_len: whole(4, "cyl_len", true)?,
            angle_len: angle(5, "angle_len")?,
            run_len: whole(6, "run_len", false)? as u64,
            cyl_run_len: whole(7, "cyl_run_len", true)?,
            child,
        })
    }
}

impl From<Entry> for Vec<f64> {
    fn from(e: Entry) -> Vec<f64> {
        let (kind, child, head) = match e.child {
            Child::Track { tp, head } => (0.0, tp as f64, head as f64),
            Child::Node(n) => (1.0, n as f64, 0.0),
        };
        vec![
            e.lbn as f64,
            e.cyl as f64,
            e.off,
            e.len as f64,
            e.cyl_len as f64,
            e.angle_len,
            e.run_len as f64,
            e.cyl_run_len as f64,
            kind,
            child,
            head,
        ]
    }
}

/// The `[timing.layout.tree]` table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TreeDef {
    /// Blocks the drive holds (DiskSim's `Block count`): LBNs from here on do not exist.
    pub blocks: u64,
    /// Track patterns `[low, high, spt]`: sectors `low..=high` of a track of `spt` physical
    /// sectors hold consecutive LBNs.
    pub tracks: Vec<[u32; 3]>,
    /// Index nodes, each a list of entries in LBN order; the last node is the root.
    pub nodes: Vec<Vec<Entry>>,
    /// `[lbn, count]`: `count` tree positions slipped at tree LBN `lbn`, in LBN order.
    #[serde(default)]
    pub slips: Vec<[u64; 2]>,
    /// `[lbn, count, cyl, head, sector, spt]`: LBNs `lbn..lbn+count` moved to sectors from
    /// `sector` of track (`cyl`, `head`), which has `spt` physical sectors.
    #[serde(default)]
    pub remaps: Vec<[u64; 6]>,
}

#[derive(Clone, Copy, Debug)]
struct Pattern {
    low: u32,
    high: u32,
    spt: u32,
}

#[derive(Clone, Copy, Debug)]
struct Remap {
    lbn: u64,
    count: u64,
    at: Pbn,
    spt: u32,
}

#[derive(Clone, Debug)]
pub struct TreeLayout {
    blocks: u64,
    patterns: Vec<Pattern>,
    nodes: Vec<Vec<Entry>>,
    root: usize,
    /// (tree LBN, slips at or before it in all), with a (0, 0) first.
    slips: Vec<(u64, u64)>,
    remaps: Vec<Remap>,
}

/// Where a walk by physical address ended: the track's pattern and the angle accumulated
/// on the way down (where the pattern's first sector starts).
struct Found {
    pattern: Pattern,
    angle: f64,
}

impl TreeLayout {
    pub fn new(def: &TreeDef, surfaces: u32) -> Result<TreeLayout, String> {
        let key = "timing.layout.tree";
        if def.nodes.is_empty() {
            return Err(format!(
                "{key}.nodes: expected at least one index node (the last is the root)"
            ));
        }
        let mut patterns = Vec::with_capacity(def.tracks.len());
        for (i, &[low, high, spt]) in def.tracks.iter().enumerate() {
            if low > high || high >= spt {
                return Err(format!(
                    "{key}.tracks[{i}]: expected low ≤ high < spt, got [{low}, {high}, {spt}]"
                ));
            }
            patterns.push(Pattern { low, high, spt });
        }
        for (n, node) in def.nodes.iter().enumerate() {
            let mut end = 0u64;
            for (i, e) in node.iter().enumerate() {
                let at = format!("{key}.nodes[{n}][{i}]");
                if e.len == 0 || e.run_len == 0 {
                    return Err(format!("{at}: expected len ≥ 1 and run_len ≥ 1"));
                }
                if e.lbn < end {
                    return Err(format!(
                        "{at}: entries must be in LBN order without overlap (starts at {}, the one before ends at {end})",
                        e.lbn
                    ));
                }
                end = e
                    .lbn
                    .checked_add(e.run_len)
                    .ok_or_else(|| format!("{at}: too large"))?;
                match e.child {
                    Child::Track { tp, head } => {
                        let p = patterns.get(tp as usize).ok_or_else(|| {
                            format!(
                                "{at}: track pattern {tp} does not exist ({} given)",
                                patterns.len()
                            )
                        })?;
                        if head >= surfaces {
                            return Err(format!("{at}: surface {head}, the drive has {surfaces}"));
                        }
                        if e.len > u64::from(p.high - p.low) + 1 {
                            return Err(format!(
                                "{at}: {} LBNs an instance, track pattern {tp} holds {}",
                                e.len,
                                p.high - p.low + 1
                            ));
                        }
                    }
                    Child::Node(c) => {
                        if c as usize >= def.nodes.len() {
                            return Err(format!(
                                "{at}: index node {c} does not exist ({} given)",
                                def.nodes.len()
                            ));
                        }
                    }
                }
            }
        }
        // Every path from the root ends at a track within MAX_DEPTH nodes (no cycle).
        let root = def.nodes.len() - 1;
        let mut memo = vec![0usize; def.nodes.len()];
        fn height(nodes: &[Vec<Entry>], n: usize, memo: &mut [usize], on: usize) -> Option<usize> {
            if on > MAX_DEPTH {
                return None;
            }
            if memo[n] > 0 {
                return Some(memo[n]);
            }
            let mut h = 1;
            for e in &nodes[n] {
                if let Child::Node(c) = e.child {
                    h = h.max(1 + height(nodes, c as usize, memo, on + 1)?);
                }
            }
            memo[n] = h;
            Some(h)
        }
        height(&def.nodes, root, &mut memo, 1)
            .filter(|&h| h <= MAX_DEPTH)
            .ok_or_else(|| {
                format!("{key}.nodes: the tree is cyclic or deeper than {MAX_DEPTH} nodes")
            })?;
        let mut slips = vec![(0u64, 0u64)];
        let mut total = 0u64;
        for (i, &[lbn, count]) in def.slips.iter().enumerate() {
            if slips.last().is_some_and(|&(l, _)| lbn < l) {
                return Err(format!(
                    "{key}.slips[{i}]: expected LBN order, got {lbn} after {}",
                    slips.last().map_or(0, |s| s.0)
                ));
            }
            total = total
                .checked_add(count)
                .ok_or_else(|| format!("{key}.slips[{i}]: too many"))?;
            if lbn == 0 {
                slips[0].1 = total;
            } else {
                slips.push((lbn, total));
            }
        }
        let mut remaps = Vec::with_capacity(def.remaps.len());
        for (i, &[lbn, count, cyl, head, sector, spt]) in def.remaps.iter().enumerate() {
            let at = format!("{key}.remaps[{i}]");
            let small = |x: u64| u32::try_from(x).map_err(|_| format!("{at}: {x} is too large"));
            let (cyl, head, sector, spt) = (small(cyl)?, small(head)?, small(sector)?, small(spt)?);
            if head >= surfaces || spt == 0 || u64::from(sector) + count > u64::from(spt) {
                return Err(format!(
                    "{at}: expected a surface below {surfaces} and sectors sector..sector+count within spt"
                ));
            }
            remaps.push(Remap {
                lbn,
                count,
                at: Pbn { cyl, head, sector },
                spt,
            });
        }
        Ok(TreeLayout {
            blocks: def.blocks,
            patterns,
            nodes: def.nodes.clone(),
            root,
            slips,
            remaps,
        })
    }

    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Slips at or before `lbn`'s tree position: the position moves past each slip it
    /// reaches (DiskSim's `slipcount`).
    fn slipped(&self, lbn: u64) -> u64 {
        let mut i = self
            .slips
            .partition_point(|&(l, _)| l <= lbn)
            .saturating_sub(1);
        let mut count = self.slips[i].1;
        while i < self.slips.len() && self.slips[i].0 <= lbn.saturating_add(count) {
            count = self.slips[i].1;
            i += 1;
        }
        count
    }

    fn remap_of(&self, lbn: u64) -> Option<&Remap> {
        self.remaps
            .iter()
            .find(|r| r.lbn <= lbn && lbn - r.lbn < r.count)
    }

    /// Physical location of `lbn`; `None` past the last block or where the tree has none.
    pub fn ltop(&self, lbn: u64) -> Option<Pbn> {
        if lbn >= self.blocks {
            return None;
        }
        if let Some(r) = self.remap_of(lbn) {
            return Some(r.at.plus(lbn - r.lbn));
        }
        let mut l = lbn.checked_add(self.slipped(lbn))?;
        let mut node = self.root;
        let mut cyl = 0i64;
        for _ in 0..MAX_DEPTH {
            let ents = &self.nodes[node];
            let i = ents.partition_point(|e| e.lbn <= l).checked_sub(1)?;
            let e = &ents[i];
            let rel = l - e.lbn;
            if rel >= e.run_len {
                return None;
            }
            let q = (rel / e.len) as i64;
            let q = if e.cyl_run_len < 0 { -q } else { q };
            cyl = cyl
                .checked_add(e.cyl)?
                .checked_add(q.checked_mul(e.cyl_len)?)?;
            l = rel % e.len;
            match e.child {
                Child::Track { tp, head } => {
                    let p = self.patterns[tp as usize];
                    let sector = u64::from(p.low) + l;
                    if sector > u64::from(p.high) {
                        return None;
                    }
                    return Some(Pbn {
                        cyl: u32::try_from(cyl).ok()?,
                        head,
                        sector: sector as u32,
                    });
                }
                Child::Node(n) => node = n as usize,
            }
        }
        None
    }

    /// The walk to track (`cyl`, `head`) (DiskSim's `g4_recurse` from a pbn): at each node
    /// the first entry whose cylinders hold the cylinder left (and, above a track, whose
    /// surface is `head`). Integer division and remainder truncate toward zero, as C's do,
    /// for the cylinders of a downward band.
    fn find(&self, cyl: u32, head: u32) -> Option<Found> {
        let mut node = self.root;
        let mut cyl = i64::from(cyl);
        let mut angle = 0.0;
        for _ in 0..MAX_DEPTH {
            let e = self.nodes[node].iter().find(|e| {
                e.holds_cyl(cyl)
                    && match e.child {
                        Child::Track { head: h, .. } => h == head,
                        Child::Node(_) => true,
                    }
            })?;
            let rel = cyl - e.cyl;
            if e.cyl_len == 0 {
                return None;
            }
            let q = rel / e.cyl_len;
            let q = if e.cyl_run_len < 0 { -q } else { q };
            cyl = rel % e.cyl_len;
            angle += e.off + q as f64 * e.angle_len;
            match e.child {
                Child::Track { tp, .. } => {
                    return Some(Found {
                        pattern: self.patterns[tp as usize],
                        angle,
                    })
                }
                Child::Node(n) => node = n as usize,
            }
        }
        None
    }

    /// Physical sectors on `p`'s track (1 where the tree has no such track).
    pub fn sectors_per_track(&self, cyl: u32, head: u32) -> u32 {
        if let Some(r) = self
            .remaps
            .iter()
            .find(|r| r.at.cyl == cyl && r.at.head == head)
        {
            return r.spt;
        }
        self.find(cyl, head).map_or(1, |f| f.pattern.spt)
    }

    /// Angle (fraction of a revolution, in [0, 1)) where sector `p` starts (DiskSim's
    /// `g4_skew`: the entries' offsets and instance turns on the way down, plus the
    /// sector's place on its track); 0 for a sector the tree does not hold.
    pub fn angle(&self, p: Pbn) -> f64 {
        match self.find(p.cyl, p.head) {
            Some(f) if (f.pattern.low..=f.pattern.high).contains(&p.sector) => {
                frac(f.angle + f64::from(p.sector - f.pattern.low) / f64::from(f.pattern.spt))
            }
            _ => 0.0,
        }
    }

    /// How many sectors of `p`'s track, from sector 0, hold consecutive LBNs, when that is
    /// known without a search: a pattern from sector 0 and a tree with no slips or remaps.
    pub fn track_usable(&self, p: Pbn) -> Option<u32> {
        if self.slips.len() > 1 || self.slips[0].1 > 0 || !self.remaps.is_empty() {
            return None;
        }
        let f = self.find(p.cyl, p.head)?;
        (f.pattern.low == 0).then_some(f.pattern.high + 1)
    }

    /// The root entry holding cylinder `cyl` (DiskSim maps zones to root entries).
    pub fn zone_of_cyl(&self, cyl: u32) -> Option<usize> {
        let cyl = i64::from(cyl);
        self.nodes[self.root].iter().position(|e| e.holds_cyl(cyl))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanical::layout::{Layout, LayoutDef, Zone};

    // DiskSim's fields in DiskSim's order, so a test reads like a `.model` file's entries.
    #[allow(clippy::too_many_arguments)]
    fn e(
        lbn: u64,
        cyl: i64,
        off: f64,
        len: u64,
        cyl_len: i64,
        angle_len: f64,
        run: u64,
        cyl_run: i64,
        child: Child,
    ) -> Entry {
        Entry {
            lbn,
            cyl,
            off,
            len,
            cyl_len,
            angle_len,
            run_len: run,
            cyl_run_len: cyl_run,
            child,
        }
    }

    fn zone(first: u32, last: u32, bpt: u32, offset: f64, track_skew: f64, cyl_skew: f64) -> Zone {
        Zone {
            first_cyl: first,
            last_cyl: last,
            blocks_per_track: bpt,
            first_block_offset: offset,
            empty_front: 0,
            track_skew,
            cyl_skew,
            spares: 0,
            slips: vec![],
            defects: vec![],
        }
    }

    /// The same two-zone, two-surface drive as zones and as a tree: the tree's root has
    /// an entry a zone (its first block's angle, one turn of track + cylinder skew per
    /// cylinder), each zone's node an entry a surface (the track skew). Every block maps
    /// to the same sector at the same angle.
    #[test]
    fn a_zoned_drive_written_as_a_tree_maps_alike() {
        let zoned = Layout::new(
            &LayoutDef {
                tree: None,
                mapping: 0,
                sparing: 0,
                range_size: 1,
                zones: vec![zone(0, 3, 10, 1.0, 2.0, 3.0), zone(4, 6, 8, 0.5, 1.0, 2.0)],
            },
            2,
            7,
        )
        .unwrap();
        let t = |tp, head| Child::Track { tp, head };
        let def = TreeDef {
            blocks: 128,
            tracks: vec![[0, 9, 10], [0, 7, 8]],
            nodes: vec![
                vec![
                    e(0, 0, 0.0, 10, 1, 0.0, 10, 1, t(0, 0)),
                    e(10, 0, 0.2, 10, 1, 0.0, 10, 1, t(0, 1)),
                ],
                vec![
                    e(0, 0, 0.0, 8, 1, 0.0, 8, 1, t(1, 0)),
                    e(8, 0, 1.0 / 8.0, 8, 1, 0.0, 8, 1, t(1, 1)),
                ],
                vec![
                    e(0, 0, 0.1, 20, 1, 0.5, 80, 4, Child::Node(0)),
                    e(80, 4, 0.5 / 8.0, 16, 1, 3.0 / 8.0, 48, 3, Child::Node(1)),
                ],
            ],
            slips: vec![],
            remaps: vec![],
        };
        let tree = Layout::new(
            &LayoutDef {
                tree: Some(def),
                mapping: 0,
                sparing: 0,
                range_size: 1,
                zones: vec![],
            },
            2,
            7,
        )
        .unwrap();
        assert_eq!(tree.blocks(), zoned.blocks());
        for lbn in 0..129 {
            let (a, b) = (zoned.ltop(lbn), tree.ltop(lbn));
            assert_eq!(a, b, "lbn {lbn}");
            let Some(p) = a else { continue };
            assert!(
                (zoned.angle(p) - tree.angle(p)).abs() < 1e-12,
                "lbn {lbn} at {p:?}"
            );
            assert_eq!(
                zoned.blocks_per_track(p.cyl, p.head),
                tree.blocks_per_track(p.cyl, p.head)
            );
            assert_eq!(zoned.zone_of_cyl(p.cyl), tree.zone_of_cyl(p.cyl));
            assert_eq!(zoned.track_usable(p), tree.track_usable(p));
        }
    }

    fn one_track(tracks: Vec<[u32; 3]>, nodes: Vec<Vec<Entry>>) -> TreeDef {
        TreeDef {
            blocks: 4,
            tracks,
            nodes,
            slips: vec![],
            remaps: vec![],
        }
    }

    #[test]
    fn a_remap_moves_blocks_and_a_bad_tree_is_refused_naming_the_place() {
        let t0 = Child::Track { tp: 0, head: 0 };
        let mut def = one_track(
            vec![[0, 3, 4]],
            vec![vec![e(0, 0, 0.0, 4, 1, 0.0, 4, 1, t0)]],
        );
        def.remaps = vec![[2, 1, 9, 1, 5, 6]];
        let l = TreeLayout::new(&def, 2).unwrap();
        assert_eq!(
            l.ltop(1),
            Some(Pbn {
                cyl: 0,
                head: 0,
                sector: 1
            })
        );
        assert_eq!(
            l.ltop(2),
            Some(Pbn {
                cyl: 9,
                head: 1,
                sector: 5
            })
        );
        assert_eq!(l.sectors_per_track(9, 1), 6);
        let bad = |d: TreeDef, surfaces: u32| TreeLayout::new(&d, surfaces).unwrap_err();
        let entry = |c: Child| vec![vec![e(0, 0, 0.0, 4, 1, 0.0, 4, 1, c)]];
        let msg = bad(
            one_track(vec![[0, 3, 4]], entry(Child::Track { tp: 1, head: 0 })),
            1,
        );
        assert!(
            msg.contains("nodes[0][0]: track pattern 1 does not exist"),
            "{msg}"
        );
        let msg = bad(one_track(vec![[0, 3, 4]], entry(Child::Node(0))), 1);
        assert!(msg.contains("cyclic"), "{msg}");
        let msg = bad(one_track(vec![[0, 4, 4]], entry(t0)), 1);
        assert!(
            msg.contains("tracks[0]: expected low ≤ high < spt"),
            "{msg}"
        );
        let msg = bad(
            one_track(vec![[0, 3, 4]], entry(Child::Track { tp: 0, head: 2 })),
            2,
        );
        assert!(msg.contains("surface 2, the drive has 2"), "{msg}");
        let two = vec![vec![
            e(4, 0, 0.0, 4, 1, 0.0, 4, 1, t0),
            e(0, 0, 0.0, 4, 1, 0.0, 8, 1, t0),
        ]];
        let msg = bad(one_track(vec![[0, 3, 4]], two), 1);
        assert!(
            msg.contains("nodes[0][1]: entries must be in LBN order"),
            "{msg}"
        );
        let msg = bad(one_track(vec![[0, 2, 4]], entry(t0)), 1);
        assert!(
            msg.contains("4 LBNs an instance, track pattern 0 holds 3"),
            "{msg}"
        );
    }

    /// An entry in a catalogue file is an array of eleven numbers, checked as it is read.
    #[test]
    fn entries_read_from_eleven_numbers() {
        let t: toml::Table = toml::from_str(
            "e = [[0, 31, 0.0, 1170, 1, 0.25, 37440, -32, 0, 1, 3], [9, 0, 0.5, 20, 2, 0.0, 40, 4, 1, 7, 0]]",
        )
        .unwrap();
        let v: Vec<Entry> = t["e"].clone().try_into().unwrap();
        assert_eq!(v[0].child, Child::Track { tp: 1, head: 3 });
        assert_eq!((v[0].cyl, v[0].cyl_run_len, v[0].run_len), (31, -32, 37440));
        assert_eq!(v[1].child, Child::Node(7));
        assert_eq!(
            Vec::<f64>::from(v[1]),
            vec![9.0, 0.0, 0.5, 20.0, 2.0, 0.0, 40.0, 4.0, 1.0, 7.0, 0.0]
        );
        for (text, want) in [
            (
                "e = [[0, 1, 0.0, 4, 1, 0.0, 4, 1, 2, 0, 0]]",
                "expected 0 (track pattern) or 1",
            ),
            ("e = [[0, 1, 0.0, 4, 1, 0.0, 4, 1, 0, 0]]", "11 numbers"),
            (
                "e = [[0.5, 1, 0.0, 4, 1, 0.0, 4, 1, 0, 0, 0]]",
                "`lbn`: expected a whole number ≥ 0",
            ),
        ] {
            let t: toml::Table = toml::from_str(text).unwrap();
            let err = t["e"]
                .clone()
                .try_into::<Vec<Entry>>()
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
