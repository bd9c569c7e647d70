//! The probe's second phase: the drive's mechanics from the timing of its own writes.
//!
//! Every sample is a *shot*: a `write_sectors` FUA write (the lead) puts the head at a
//! known angle — just past the lead's last sector — and the next write (the target) is
//! issued the instant the lead completes (MIN delay). The target's response is then the
//! time from the lead's media end to its own media end: the angular distance from the end
//! of the lead to the end of the target, plus whole revolutions until the command
//! overhead (and any head switch or seek) fits in the gap:
//!
//! ```text
//! R = ((skew + d + n) · s) mod P  +  k · P,   k the least with the gap ≥ overhead + move
//! ```
//!
//! (`s` the sector time, `P` the rotation period, `n` sectors written, `d` the target's
//! offset past the lead's end on its own track, or past its track's first sector after a
//! switch, `skew` the angle of that first sector after the lead's end). So:
//! * writing the lead's own sectors again costs exactly one revolution: `P`;
//! * in a track, `R(d)` is a sawtooth of slope `s` whose wrap (the least `d` on the rising
//!   side) is the command overhead; `P / s` is the number of *physical* sectors a
//!   revolution holds (LBAs per track plus spares);
//! * across a track boundary, one shot at `d = 0` gives the skew exactly
//!   (`R / s − n`, modulo a revolution): the head-switch skew, or the cylinder-switch
//!   skew every `surfaces` tracks — which is how the number of surfaces shows;
//! * the least response over the target's offsets after a head switch, or a move of `D`
//!   cylinders, minus the in-track least, is the head-switch time or the seek time (to one
//!   sector time: offsets are whole sectors). A coarse pass every `√spt` sectors finds the
//!   tooth, a fine pass the sectors before its least.
//!
//! Each shot is taken `repeats` times and the (lower) median response kept: live, a
//! response is the media interval plus the target's completion delay less the lead's, so
//! jitter runs both ways.

use super::TrackRun;
use serde::Serialize;
use wattio_core::time::Nanos;

/// What the second phase found. Times in ns, skews in (physical) sectors.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Mechanics {
    /// One revolution.
    pub rotation_ns: f64,
    /// Least time from one write's media end to the next write's media start: the command
    /// and completion overheads together (to one sector time, from above).
    pub overhead_ns: f64,
    /// Head switch, including a write's settling (to one sector time, from above).
    pub head_switch_ns: f64,
    /// Tracks per cylinder, from where the cylinder-switch skew differs from the
    /// head-switch skew; 1 when no boundary differed (every track its own cylinder).
    pub surfaces: u32,
    pub surfaces_found: bool,
    pub zones: Vec<ZoneMechanics>,
    /// (distance in cylinders, least positioning time in ns, including write settling).
    pub seek: Vec<(u32, f64)>,
    /// A plain (non-FUA) write answered well inside a revolution: a write-back cache.
    pub write_back: bool,
    /// The in-track sawtooth of the first zone: (d, response ns) — for the docs' figure.
    pub sawtooth: Vec<(u64, Nanos)>,
    /// Writes this phase issued.
    pub writes: u64,
}

/// One zone's mechanics.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ZoneMechanics {
    pub first_lba: u64,
    pub last_lba: u64,
    /// LBAs per track (the zone's usual track; phase one's).
    pub spt: u64,
    /// Tracks in the zone (every track phase one found, whatever its length).
    pub tracks: u64,
    pub sector_ns: f64,
    /// Physical sectors a revolution holds (`rotation / sector time`): `spt` plus spares.
    pub sectors_per_rev: u64,
    /// Angle of a track's first sector after the previous track's last LBA, in sectors,
    /// at a head switch and at a cylinder switch (spares at a track's end included).
    pub head_skew: f64,
    pub cyl_skew: f64,
    /// Every boundary measured, in order from the zone's first track.
    pub boundary_skews: Vec<f64>,
}

/// Second-phase parameters (see `Params`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knobs {
    pub write_sectors: u64,
    pub repeats: u32,
    pub skew_tracks: u64,
}

/// Tracks found by phase one, addressable by index.
#[derive(Clone, Debug)]
struct Tracks {
    runs: Vec<TrackRun>,
    /// Tracks before each run.
    before: Vec<u64>,
}

impl Tracks {
    fn new(runs: &[TrackRun]) -> Tracks {
        let mut before = Vec::with_capacity(runs.len());
        let mut k = 0;
        for r in runs {
            before.push(k);
            k += r.tracks();
        }
        Tracks {
            runs: runs.to_vec(),
            before,
        }
    }

    fn count(&self) -> u64 {
        self.runs
            .last()
            .zip(self.before.last())
            .map_or(0, |(r, b)| b + r.tracks())
    }

    /// Track `k`: (first LBA, LBAs).
    fn get(&self, k: u64) -> Option<(u64, u64)> {
        let i = self.before.partition_point(|&b| b <= k).checked_sub(1)?;
        let r = self.runs.get(i)?;
        let j = k - self.before[i];
        (j < r.tracks()).then(|| (r.first_lba + j * r.spt, r.spt))
    }

    /// Index of the track holding `lba`.
    fn index_of(&self, lba: u64) -> Option<u64> {
        let i = self
            .runs
            .partition_point(|r| r.first_lba <= lba)
            .checked_sub(1)?;
        let r = self.runs.get(i)?;
        (lba <= r.last_lba).then(|| self.before[i] + (lba - r.first_lba) / r.spt)
    }
}

/// A lead write and the target written as soon as it completes.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Shot {
    lead: u64,
    target: u64,
    fua: bool,
}

/// What the phase is measuring.
#[derive(Clone, Debug)]
enum Stage {
    /// Rewrite of the lead (→ rotation), a plain write after it (→ write-back), then
    /// every zone's in-track sawtooth.
    Sawtooth,
    /// The first `skew_tracks` boundaries of every zone.
    Skews,
    /// Least responses: the head switch, then each seek distance. `Coarse` every `step`
    /// sectors, then `Fine` on the sectors before each coarse least.
    Coarse(Vec<Scan>),
    Fine(Vec<Scan>),
}

/// A least-response scan over a target track's offsets.
#[derive(Clone, Debug)]
struct Scan {
    /// Cylinder distance (0: the head switch).
    dist: u32,
    lead: u64,
    first: u64,
    /// Offsets that keep the target on its track: `0..span`.
    span: u64,
    step: u64,
    /// Fine-pass offsets.
    offsets: Vec<u64>,
    least: f64,
}

/// What the extractor wants next.
#[derive(Debug, PartialEq)]
pub enum Next {
    /// Write `write_sectors` at this LBA, FUA or not.
    Write(u64, bool),
    Done(Result<Mechanics, String>),
}

/// The second phase's state machine: fed each response, it says what to write next.
#[derive(Debug)]
pub struct Extractor {
    k: Knobs,
    tracks: Tracks,
    /// Zones from phase one: (first LBA, last LBA, SPT).
    zones: Vec<(u64, u64, u64)>,
    stage: Stage,
    shots: Vec<Shot>,
    /// The kept (median) response per shot.
    best: Vec<Nanos>,
    /// Position: shot, repeat, whether the lead is in flight (else the target).
    shot: usize,
    repeat: u32,
    /// The current shot's responses so far.
    samples: Vec<Nanos>,
    lead: bool,
    out: Mechanics,
}

impl Extractor {
    /// Start from phase one's runs and zones; an error says why when there is too little
    /// to measure.
    pub fn new(
        k: Knobs,
        runs: &[TrackRun],
        zones: Vec<(u64, u64, u64)>,
    ) -> Result<Extractor, String> {
        let tracks = Tracks::new(runs);
        let first = tracks
            .get(0)
            .filter(|t| t.1 >= 2 * k.write_sectors + 2)
            .ok_or("mechanics: phase one found no whole track long enough to time")?;
        let mut shots = vec![
            Shot {
                lead: first.0,
                target: first.0,
                fua: true,
            },
            Shot {
                lead: first.0,
                target: first.0 + k.write_sectors,
                fua: false,
            },
        ];
        for z in &zones {
            // Every offset that keeps the target on the zone's first track.
            let n = k.write_sectors;
            for d in 0..=z.2.saturating_sub(2 * n) {
                shots.push(Shot {
                    lead: z.0,
                    target: z.0 + n + d,
                    fua: true,
                });
            }
        }
        let best = vec![Nanos::MAX; shots.len()];
        Ok(Extractor {
            k,
            tracks,
            zones,
            stage: Stage::Sawtooth,
            shots,
            best,
            shot: 0,
            repeat: 0,
            samples: Vec::new(),
            lead: true,
            out: Mechanics::default(),
        })
    }

    /// The first write.
    pub fn start(&mut self) -> Next {
        self.current()
    }

    fn current(&self) -> Next {
        let s = self.shots[self.shot];
        if self.lead {
            Next::Write(s.lead, true)
        } else {
            Next::Write(s.target, s.fua)
        }
    }

    /// The write asked for completed after `response` ns.
    pub fn completed(&mut self, response: Nanos) -> Next {
        self.out.writes += 1;
        if self.lead {
            self.lead = false;
            return self.current();
        }
        self.samples.push(response);
        self.lead = true;
        self.repeat += 1;
        if self.repeat >= self.k.repeats {
            // The (lower) median of the repeats: live, a target's response is its media
            // interval plus its own completion's delay less the lead's, so jitter runs both
            // ways and the least would keep the largest early error. (In simulation the
            // repeats are equal.)
            self.samples.sort_unstable();
            self.best[self.shot] = self.samples[(self.samples.len() - 1) / 2];
            self.samples.clear();
            self.repeat = 0;
            self.shot += 1;
        }
        if self.shot < self.shots.len() {
            return self.current();
        }
        match self.advance() {
            Ok(true) => Next::Done(Ok(std::mem::take(&mut self.out))),
            Ok(false) => self.current(),
            Err(e) => Next::Done(Err(e)),
        }
    }

    /// Analyse the finished stage and plan the next; `true` when all is done.
    fn advance(&mut self) -> Result<bool, String> {
        let res: Vec<f64> = self.best.iter().map(|&b| b as f64).collect();
        let stage = std::mem::replace(&mut self.stage, Stage::Skews);
        let next: Vec<Shot> = match stage {
            Stage::Sawtooth => {
                self.sawtooth(&res)?;
                self.skew_shots()
            }
            Stage::Skews => {
                self.skews(&res)?;
                let scans = self.scans()?;
                let shots = coarse_shots(&scans);
                self.stage = Stage::Coarse(scans);
                shots
            }
            Stage::Coarse(mut scans) => {
                let shots = fine_shots(&mut scans, &res);
                self.stage = Stage::Fine(scans);
                shots
            }
            Stage::Fine(mut scans) => {
                let mut i = 0;
                for sc in scans.iter_mut() {
                    let m = res[i..i + sc.offsets.len()]
                        .iter()
                        .fold(f64::INFINITY, |a, &b| a.min(b));
                    sc.least = sc.least.min(m);
                    i += sc.offsets.len();
                }
                self.moves(&scans);
                return Ok(true);
            }
        };
        self.shots = next;
        self.best = vec![Nanos::MAX; self.shots.len()];
        self.shot = 0;
        Ok(self.shots.is_empty())
    }

    /// Rotation, write-back, per-zone sector time and the overhead.
    fn sawtooth(&mut self, res: &[f64]) -> Result<(), String> {
        let n = self.k.write_sectors as f64;
        let p = res[0];
        self.out.rotation_ns = p;
        // Write-through costs at least the lead's rewrite distance on: almost a revolution
        // behind the head. A cache answers once the data is in.
        self.out.write_back = res[1] < p / 2.0;
        let mut at = 2;
        let mut overhead = f64::INFINITY;
        for (zi, z) in self.zones.iter().enumerate() {
            let len = (z.2.saturating_sub(2 * self.k.write_sectors) + 1) as usize;
            let r = &res[at..at + len];
            at += len;
            if zi == 0 {
                self.out.sawtooth = r
                    .iter()
                    .enumerate()
                    .map(|(d, &v)| (d as u64, v as Nanos))
                    .collect();
            }
            let (sector, least) = tooth(r, p).ok_or_else(|| {
                format!(
                    "mechanics: no in-track sawtooth in the zone from LBA {} (responses not one revolution apart)",
                    z.0
                )
            })?;
            // A revolution holds a whole number of sectors: the sector time from it is
            // exact to the revolution's nanosecond, the slope's median only to its own.
            let spr = (p / sector).round().max(1.0);
            let sector = p / spr;
            // On the rising side R = (d + n)·s: the least is the overhead plus the write.
            overhead = overhead.min(least - n * sector);
            let tracks = self.tracks.index_of(z.1).map_or(0, |b| b + 1)
                - self.tracks.index_of(z.0).unwrap_or(0);
            self.out.zones.push(ZoneMechanics {
                first_lba: z.0,
                last_lba: z.1,
                spt: z.2,
                tracks,
                sector_ns: sector,
                sectors_per_rev: spr as u64,
                ..ZoneMechanics::default()
            });
        }
        self.out.overhead_ns = overhead.max(0.0);
        Ok(())
    }

    /// Lead on a track's last sectors, target at the next track's first.
    fn skew_shots(&self) -> Vec<Shot> {
        let n = self.k.write_sectors;
        let mut shots = Vec::new();
        for z in &self.zones {
            let Some(k0) = self.tracks.index_of(z.0) else {
                continue;
            };
            for j in 0..self.k.skew_tracks {
                let (Some(a), Some(b)) = (self.tracks.get(k0 + j), self.tracks.get(k0 + j + 1))
                else {
                    break;
                };
                if b.0 > z.1 || a.1 < n {
                    break;
                }
                shots.push(Shot {
                    lead: a.0 + a.1 - n,
                    target: b.0,
                    fua: true,
                });
            }
        }
        shots
    }

    fn skews(&mut self, res: &[f64]) -> Result<(), String> {
        let n = self.k.write_sectors as f64;
        let mut at = 0;
        let per_zone = self.skew_shots_per_zone();
        for (z, cnt) in self.out.zones.iter_mut().zip(per_zone) {
            let spr = z.sectors_per_rev as f64;
            z.boundary_skews = res[at..at + cnt]
                .iter()
                .map(|&r| round3((r / z.sector_ns - n).rem_euclid(spr)))
                .collect();
            at += cnt;
        }
        // Surfaces from the first zone with enough boundaries: the period of the
        // boundaries whose skew differs from the usual one.
        let (s, found) = self
            .out
            .zones
            .iter()
            .find_map(|z| surfaces(&z.boundary_skews, z.sectors_per_rev as f64))
            .map_or((1, false), |s| (s, true));
        self.out.surfaces = s;
        self.out.surfaces_found = found;
        for z in self.out.zones.iter_mut() {
            let spr = z.sectors_per_rev as f64;
            // The boundary after a cylinder's last track is a cylinder switch.
            let mut cyl = Vec::new();
            let mut head = Vec::new();
            for (j, &k) in z.boundary_skews.iter().enumerate() {
                if (j as u64 + 1).is_multiple_of(s as u64) {
                    cyl.push(k);
                } else {
                    head.push(k);
                }
            }
            z.cyl_skew = mode(&cyl, spr).unwrap_or(0.0);
            z.head_skew = mode(&head, spr).unwrap_or(z.cyl_skew);
            if s > 2 {
                // Head switches are the usual boundary, whichever track of a cylinder the
                // zone's first LBA sits on (spare or slipped tracks shift it: hp_c2247a).
                if let Some(usual) = mode(&z.boundary_skews, spr) {
                    let other: Vec<f64> = z
                        .boundary_skews
                        .iter()
                        .copied()
                        .filter(|&k| {
                            let d = (k - usual).rem_euclid(spr);
                            d.min(spr - d) >= 0.5
                        })
                        .collect();
                    z.head_skew = usual;
                    z.cyl_skew = mode(&other, spr).unwrap_or(usual);
                }
            }
        }
        Ok(())
    }

    fn skew_shots_per_zone(&self) -> Vec<usize> {
        let n = self.k.write_sectors;
        self.zones
            .iter()
            .map(|z| {
                let Some(k0) = self.tracks.index_of(z.0) else {
                    return 0;
                };
                (0..self.k.skew_tracks)
                    .take_while(|&j| {
                        matches!(
                            (self.tracks.get(k0 + j), self.tracks.get(k0 + j + 1)),
                            (Some(a), Some(b)) if b.0 <= z.1 && a.1 >= n
                        )
                    })
                    .count()
            })
            .collect()
    }

    /// The head switch (zone 0, track 0 → 1, when there are two surfaces or more) and
    /// seeks from cylinder 0 to cylinders 1, 2, 3, … ×1.3 to the last.
    fn scans(&self) -> Result<Vec<Scan>, String> {
        let n = self.k.write_sectors;
        let s = self.out.surfaces as u64;
        let t0 = self.tracks.get(0).ok_or("mechanics: no track")?;
        // The last cylinder may end in the tail (tracks with no boundary timed after them).
        let cyls = self.tracks.count().div_ceil(s);
        let scan = |dist: u32, lead: u64, k: u64| {
            self.tracks.get(k).filter(|t| t.1 > n).map(|t| {
                let span = t.1 - n + 1;
                Scan {
                    dist,
                    lead,
                    first: t.0,
                    span,
                    step: (span as f64).sqrt().ceil() as u64,
                    offsets: Vec::new(),
                    least: f64::INFINITY,
                }
            })
        };
        let mut out = Vec::new();
        if s > 1 {
            out.extend(scan(0, t0.0 + t0.1 - n, 1));
        }
        let mut d = 1u64;
        while d < cyls {
            out.extend(scan(d as u32, t0.0, d * s));
            let next = ((d as f64) * 1.3).ceil() as u64;
            d = if d + 1 < cyls && next >= cyls {
                cyls - 1
            } else {
                next.max(d + 1)
            };
        }
        Ok(out)
    }

    /// Head switch and seek curve from the scans' least responses.
    fn moves(&mut self, scans: &[Scan]) {
        let n = self.k.write_sectors as f64;
        let o = self.out.overhead_ns;
        for sc in scans {
            let z = self
                .out
                .zones
                .iter()
                .rev()
                .find(|z| z.first_lba <= sc.first)
                .map_or(f64::NAN, |z| z.sector_ns);
            let t = (sc.least - n * z - o).max(0.0);
            if sc.dist == 0 {
                self.out.head_switch_ns = t;
            } else {
                self.out.seek.push((sc.dist, t));
            }
        }
    }
}

/// Every `step` offsets of a scan.
fn coarse(sc: &Scan) -> impl Iterator<Item = u64> {
    (0..sc.span).step_by(sc.step as usize)
}

/// Coarse shots: every `step` offsets of each scan.
fn coarse_shots(scans: &[Scan]) -> Vec<Shot> {
    let mut shots = Vec::new();
    for sc in scans {
        for d in coarse(sc) {
            shots.push(Shot {
                lead: sc.lead,
                target: sc.first + d,
                fua: true,
            });
        }
    }
    shots
}

/// Record each scan's coarse least; plan the `step − 1` offsets before it (cyclically
/// over the track's offsets: the tooth may wrap past the track's end).
fn fine_shots(scans: &mut [Scan], res: &[f64]) -> Vec<Shot> {
    let mut shots = Vec::new();
    let mut i = 0;
    for sc in scans.iter_mut() {
        let span = sc.span;
        let coarse: Vec<u64> = coarse(sc).collect();
        let r = &res[i..i + coarse.len()];
        i += coarse.len();
        let (arg, least) =
            r.iter().enumerate().fold(
                (0, f64::INFINITY),
                |a, (j, &v)| if v < a.1 { (j, v) } else { a },
            );
        sc.least = least;
        let at = coarse[arg];
        sc.offsets = (1..sc.step)
            .map(|b| (at + span - b) % span)
            .filter(|d| !coarse.contains(d))
            .collect();
        for &d in &sc.offsets {
            shots.push(Shot {
                lead: sc.lead,
                target: sc.first + d,
                fua: true,
            });
        }
    }
    shots
}

/// Sector time and least response of an in-track sawtooth `r[d]` (rising by `s` a step,
/// falling by one revolution `p` less a step at the wrap). `None` without two rising
/// steps.
fn tooth(r: &[f64], p: f64) -> Option<(f64, f64)> {
    let mut steps: Vec<f64> = r
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|&d| d > 0.0 && d < p / 4.0)
        .collect();
    if steps.len() < 2 {
        return None;
    }
    steps.sort_by(f64::total_cmp);
    let s = steps[steps.len() / 2];
    let least = r.iter().fold(f64::INFINITY, |a, &b| a.min(b));
    Some((s, least))
}

/// The most frequent skew (within half a sector, cyclically): the first value of the
/// largest group.
fn mode(v: &[f64], spr: f64) -> Option<f64> {
    let near = |a: f64, b: f64| {
        let d = (a - b).rem_euclid(spr);
        d.min(spr - d) < 0.5
    };
    let count = |a: f64| v.iter().filter(|&&b| near(a, b)).count();
    v.iter()
        .fold(None, |best: Option<(f64, usize)>, &a| {
            let c = count(a);
            match best {
                Some((_, bc)) if bc >= c => best,
                _ => Some((a, c)),
            }
        })
        .map(|b| b.0)
}

/// Tracks per cylinder: the least `s ≥ 2` such that the boundaries after tracks
/// `s−1, 2s−1, …` are exactly those whose skew differs from the usual one, seen over at
/// least two cylinder switches; `None` when no boundary differs or no period fits.
fn surfaces(skews: &[f64], spr: f64) -> Option<u32> {
    let usual = mode(skews, spr)?;
    let differs: Vec<bool> = skews
        .iter()
        .map(|&k| {
            let d = (k - usual).rem_euclid(spr);
            d.min(spr - d) >= 0.5
        })
        .collect();
    if !differs.iter().any(|&d| d) {
        return None;
    }
    (2..=skews.len() / 2).find_map(|s| {
        differs
            .iter()
            .enumerate()
            .all(|(j, &d)| d == (j + 1).is_multiple_of(s))
            .then_some(s as u32)
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surfaces_from_the_cylinder_switch_period() {
        // 4 surfaces: boundaries after tracks 3, 7, 11 (indices 3, 7, 11) are cylinder
        // switches with another skew.
        let mut v = vec![40.0; 12];
        for j in [3, 7, 11] {
            v[j] = 60.0;
        }
        assert_eq!(surfaces(&v, 320.0), Some(4));
        // Equal skews: nothing to tell surfaces by.
        assert_eq!(surfaces(&[40.0; 12], 320.0), None);
        // One cylinder switch seen: not enough to confirm a period of 4 (needs 8 tracks).
        assert_eq!(surfaces(&v[..6], 320.0), None);
        // Skews near the revolution's end are near those at its start.
        assert_eq!(mode(&[319.8, 0.1, 0.2, 50.0], 320.0), Some(319.8));
    }

    #[test]
    fn sawtooth_slope_and_least() {
        // s = 100, p = 1000 (10 sectors), overhead 350, n = 2: the target starts d·s after
        // the lead's end, so it makes it in the same revolution from d = 4 (400 ≥ 350) and
        // answers (d + 2)·100; before that a revolution later.
        let r: Vec<f64> = (0..9u32)
            .map(|d| (d as f64 + 2.0) * 100.0 + if d < 4 { 1000.0 } else { 0.0 })
            .collect();
        // The least, 600, less the write (2 sectors): 400, the overhead to a sector.
        assert_eq!(tooth(&r, 1000.0), Some((100.0, 600.0)));
    }

    #[test]
    fn tracks_by_index() {
        let runs = [
            TrackRun {
                first_lba: 0,
                last_lba: 299,
                spt: 100,
            },
            TrackRun {
                first_lba: 300,
                last_lba: 389,
                spt: 90,
            },
        ];
        let t = Tracks::new(&runs);
        assert_eq!(t.count(), 4);
        assert_eq!(t.get(2), Some((200, 100)));
        assert_eq!(t.get(3), Some((300, 90)));
        assert_eq!(t.get(4), None);
        assert_eq!(t.index_of(299), Some(2));
        assert_eq!(t.index_of(300), Some(3));
        assert_eq!(t.index_of(390), None);
    }
}
