//! The geometry probe: track boundaries found by timing writes (thesis ch. 6).
//!
//! The probe writes `write_sectors` (2) sectors at LBA `i`, waits for the completion, and
//! moves on to `i + 1`. Each such write starts one sector behind the head, so it costs the
//! same (about a revolution) anywhere inside a track; the write whose two sectors straddle a
//! track boundary pays the head (or cylinder) switch on top, and its response time jumps by
//! more than `settle_us` from the previous one. A jump is a *candidate* boundary: the probe
//! backs up `backtrack` sectors and comes back to it, and only after `confirms` jumps at the
//! same LBA is the boundary taken (IDE timing glitches, live jitter). Once a track's
//! sectors per track (SPT) is known, it skips ahead to just before the predicted next
//! boundary, and then over a doubling number of tracks (1, 2, 4, …) while the predictions
//! hold ("warp").
//!
//! Second deviation: a skip over `warp ≥ 2` tracks is checked at two boundaries, the
//! predicted last one and the one a track before it. With the thesis's single check, the
//! tracks after an SPT change inside the skipped stretch have boundaries on a new grid,
//! and one of them falls on the predicted LBA by coincidence about once in SPT skips
//! (seen on DiskSim's `ascii` drive: 88 → 84 sectors, 157,080 = 84 × 1,870); two
//! consecutive coincidences need the new SPT to divide the old one.
//!
//! Deviation from the thesis's reconstructed algorithm (documented in
//! `docs/functions/geometry-probe.md`): there, a track whose SPT differs from the last one
//! is measured from a jump that lands `backtrack` sectors before the *old* SPT's boundary,
//! so when the SPT falls by more than `backtrack` sectors (every inward zone change) the
//! real boundary has already been passed and the next one is taken, reporting two tracks
//! as one. Here a track whose SPT is new is scanned from its first sector, and jumping
//! resumes only after a track confirms the SPT.
//!
//! Response time is measured from submission to completion. The probe is destructive (it
//! overwrites what it times) and should run alone: host requests pass through, but they
//! disturb the timing.

mod config;
mod mechanics;

pub use config::{KIND, MAX_PROBES_LIMIT};
pub use mechanics::{Mechanics, ZoneMechanics};

use serde::Serialize;
use std::sync::{Arc, Mutex};
use wattio_core::device::DeviceInfo;
use wattio_core::function::{Actions, Function};
use wattio_core::io::{Completion, DeviceId, Io, IoId, Op, Status};
use wattio_core::time::Nanos;

/// The checked parameters (defaults: the thesis's constants).
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Device to probe (default: the only device).
    pub device: Option<String>,
    pub sector_bytes: u32,
    /// Sectors per probe write (the thesis: 2, so a write can straddle a boundary).
    pub write_sectors: u32,
    /// Response-time jump that marks a candidate boundary (thesis SETTLE_TIME, 500 µs).
    pub settle_us: f64,
    pub settle_ns: u64,
    /// Sectors to back up before re-probing a candidate (thesis BACKTRACK_SECTORS, 5).
    pub backtrack: u32,
    /// Jumps at the same LBA needed to take a boundary (thesis REQUIRED_CONFIRMS, 10).
    pub confirms: u32,
    /// Times a candidate may fail to recur and still be timed again before it is dropped
    /// (the thesis: 0, one miss drops it). Beyond the thesis, for live probes: a jitter
    /// spike on the probe before a real boundary masks its jump once, and with no retry
    /// the scan moves past the boundary for good (two tracks reported as one).
    pub retries: u32,
    /// Take only a rise of the response as a candidate (the thesis: any change by more
    /// than `settle_us`).
    pub upward_only: bool,
    /// Responses the reference is the median of (the thesis: 1, the previous response).
    /// Live, one slow completion raises the previous response enough to hide the next
    /// boundary's rise; a median of 3 shrugs it off.
    pub reference: u32,
    /// Scans of a track measured sector by sector that must agree before its SPT is taken
    /// (the thesis: 1); one is enough when it finds the SPT of one of the two runs before
    /// it (the zone's, around a short track). Live, a late submission can hide a
    /// boundary's rise on the one pass a scan makes over it, and the scan measures two
    /// tracks as one; every skip after it lands on a real boundary (twice the SPT is a
    /// multiple of it), so nothing later catches it. Misses are what jitter does (a false
    /// boundary needs `confirms` jumps), and two scans missing the same boundary is jitter
    /// squared.
    pub scans: u32,
    pub start_lba: u64,
    /// One past the last LBA to probe (default: the device's end).
    pub end_lba: Option<u64>,
    pub max_probes: u64,
    /// Run the second phase (rotation, skews, surfaces, head switch, seek curve) after
    /// the track boundaries.
    pub mechanics: bool,
    /// Second phase: times each shot is taken (the least response is kept).
    pub repeats: u32,
    /// Second phase: boundaries timed from each zone's first track.
    pub skew_tracks: u32,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            device: None,
            sector_bytes: 512,
            write_sectors: 2,
            settle_us: 500.0,
            settle_ns: 500_000,
            backtrack: 5,
            confirms: 10,
            retries: 3,
            upward_only: true,
            reference: 3,
            scans: 2,
            start_lba: 0,
            end_lba: None,
            max_probes: 100_000_000,
            mechanics: false,
            repeats: 3,
            skew_tracks: 64,
        }
    }
}

impl Params {
    /// The thesis's algorithm as reconstructed: any change of the response by more than
    /// `settle_us` from the previous one is a candidate, and one miss drops it.
    pub fn thesis() -> Params {
        Params {
            retries: 0,
            upward_only: false,
            reference: 1,
            scans: 1,
            ..Params::default()
        }
    }
}

/// Consecutive tracks with the same number of sectors: LBAs `first..=last`, `spt` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TrackRun {
    pub first_lba: u64,
    pub last_lba: u64,
    pub spt: u64,
}

impl TrackRun {
    pub fn tracks(&self) -> u64 {
        (self.last_lba - self.first_lba + 1) / self.spt
    }
}

/// What the probe found so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Track runs in LBA order, contiguous from `start_lba`.
    pub runs: Vec<TrackRun>,
    /// Every stretch the probe confirmed, in order: one track scanned, then skips over 1,
    /// 2, 4, … tracks while the SPT holds (the rows of the thesis's Table 6.1: "SPT 504
    /// confirmed over 1, 1, 2, 4, … 64 tracks"). `runs` merges them.
    pub steps: Vec<TrackRun>,
    /// LBAs after the last boundary found, up to the end (the last track has no boundary
    /// after it to time): `(first, last)`.
    pub tail: Option<(u64, u64)>,
    pub probes: u64,
    /// Candidate boundaries that did not confirm.
    pub glitches: u64,
    /// Times a candidate failed to recur and was timed again (`retries`).
    pub retried: u64,
    /// Scans of a track whose span differed from the scan of it before (`scans`): a
    /// boundary one of them missed.
    pub disagreed: u64,
    /// How much consecutive timed responses differ: counts of |Δ| below 10, 50, 100, 250,
    /// 500 and 1000 µs and above (boundaries land in the top buckets; the rest is jitter:
    /// none in simulation, loopback and wake-ups live). What the settle threshold is up
    /// against.
    pub response_steps: [u64; 7],
    /// The whole range was probed (phase one: the track boundaries).
    pub done: bool,
    /// Why the probe stopped early (`max_probes`, an I/O error).
    pub stopped: Option<String>,
    /// When the last probe write completed (the probe's own duration from a start at 0).
    pub finished_at_ns: Nanos,
    /// The second phase's findings (with `mechanics = true`, once it is done).
    pub mechanics: Option<Mechanics>,
}

impl Report {
    /// Zones: maximal stretches of tracks with one SPT, where a stretch of fewer than
    /// `min_tracks` tracks with another SPT (a track holding spare or slipped sectors) is
    /// counted in the zone around it. Returns `(first_lba, last_lba, spt)`.
    pub fn zones(&self, min_tracks: u64) -> Vec<(u64, u64, u64)> {
        let mut out: Vec<(u64, u64, u64)> = Vec::new();
        for r in &self.runs {
            match out.last_mut() {
                Some(z) if z.2 == r.spt || r.tracks() < min_tracks => z.1 = r.last_lba,
                _ => out.push((r.first_lba, r.last_lba, r.spt)),
            }
        }
        out
    }
}

/// The probe's position in its algorithm.
#[derive(Debug)]
struct Scan {
    /// The LBA being probed.
    i: u64,
    /// The last `reference` timed responses that were not candidates, newest last: the
    /// reference a response is compared with is their median (the thesis: the last one).
    recent: Vec<Nanos>,
    confirmed: u32,
    /// The candidate being confirmed.
    saved: Option<u64>,
    backtrack_left: u32,
    /// Tracks jumped over by the last skip (0: scanning sector by sector).
    warp: u64,
    /// First LBA of the track(s) being measured.
    warp_location: u64,
    last_spt: u64,
    /// The SPT of the run before the last one (0: none): a zone's SPT again after a short
    /// track (spare or slipped sectors) is a second measurement of it (`Params::scans`).
    earlier_spt: u64,
    /// The boundary a track before the predicted one, while a skip over ≥ 2 tracks is
    /// being checked there first.
    checkpoint: Option<u64>,
    /// The LBA probed before this one.
    prev: Option<u64>,
    /// Retries the current candidate has used.
    missed: u32,
    /// The track being measured sector by sector: its first LBA, the span its last scan
    /// found and how many scans in a row found it (`scans`).
    agreed: Option<(u64, u64, u32)>,
}

impl Scan {
    /// The median of the recent normal responses (the upper one of an even count).
    fn reference(&self) -> Option<Nanos> {
        // At most 15 responses (`reference`'s range): sorted in place, no allocation a probe.
        let mut v = [0; 15];
        let v = &mut v[..self.recent.len()];
        v.copy_from_slice(&self.recent);
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    }
}

/// The probe layer. Build with [`GeometryProbe::new`], which also hands back the report.
pub struct GeometryProbe {
    p: Params,
    dev: DeviceId,
    /// One past the last LBA a probe write may start at.
    last_start: u64,
    end: u64,
    scan: Scan,
    sent_at: Nanos,
    seq: u64,
    report: Arc<Mutex<Report>>,
    finished: bool,
    /// The second phase, once the first is done.
    extractor: Option<mechanics::Extractor>,
    /// What every probe write writes (zeros): a live executor writes real bytes, so the
    /// write's scratch buffer is filled before it is submitted.
    payload: Vec<u8>,
}

impl GeometryProbe {
    pub fn new(p: Params) -> (GeometryProbe, Arc<Mutex<Report>>) {
        let report = Arc::new(Mutex::new(Report::default()));
        let scan = Scan {
            i: p.start_lba,
            recent: Vec::with_capacity(p.reference as usize),
            confirmed: 0,
            saved: None,
            backtrack_left: 0,
            warp: 0,
            warp_location: p.start_lba,
            last_spt: 0,
            earlier_spt: 0,
            checkpoint: None,
            prev: None,
            missed: 0,
            agreed: None,
        };
        let payload = vec![0; (p.write_sectors * p.sector_bytes) as usize];
        let probe = GeometryProbe {
            p,
            dev: 0,
            last_start: 0,
            end: 0,
            scan,
            sent_at: 0,
            seq: 0,
            report: report.clone(),
            finished: false,
            extractor: None,
            payload,
        };
        (probe, report)
    }

    fn report(&self) -> std::sync::MutexGuard<'_, Report> {
        // A poisoned lock only means a reader panicked; the data is still whole.
        self.report.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn issue(&mut self, now: Nanos, out: &mut Actions) {
        self.write(now, self.scan.i, true, out);
    }

    fn write(&mut self, now: Nanos, lba: u64, fua: bool, out: &mut Actions) {
        let mut io = Io::own(
            self.seq,
            Op::Write,
            self.dev,
            lba * self.p.sector_bytes as u64,
            self.p.write_sectors * self.p.sector_bytes,
        );
        // Through any write cache to the media: the timing is the platter's. (The second
        // phase's one plain write asks whether there is a write-back cache.)
        io.fua = fua;
        out.fill(io.buf, &self.payload);
        self.seq += 1;
        self.sent_at = now;
        self.report().probes += 1;
        out.submit(io);
    }

    /// Phase one is over: start the second phase if asked (and possible), else stop.
    fn phase_one_done(&mut self, now: Nanos, out: &mut Actions) {
        let (wl, end) = (self.scan.warp_location, self.end);
        {
            let mut r = self.report();
            r.done = true;
            r.tail = (wl < end).then(|| (wl, end - 1));
        }
        if !self.p.mechanics {
            return self.finish(now, None);
        }
        let (runs, zones) = {
            let r = self.report();
            (r.runs.clone(), r.zones(2))
        };
        let knobs = mechanics::Knobs {
            write_sectors: self.p.write_sectors as u64,
            repeats: self.p.repeats,
            skew_tracks: self.p.skew_tracks as u64,
        };
        match mechanics::Extractor::new(knobs, &runs, zones) {
            Ok(mut x) => {
                let next = x.start();
                self.extractor = Some(x);
                self.follow(now, next, out);
            }
            Err(e) => self.finish(now, Some(e)),
        }
    }

    /// Do what the second phase asks.
    fn follow(&mut self, now: Nanos, next: mechanics::Next, out: &mut Actions) {
        match next {
            mechanics::Next::Write(_, _) if self.report().probes >= self.p.max_probes => self
                .finish(
                    now,
                    Some(format!("max_probes ({}) reached", self.p.max_probes)),
                ),
            mechanics::Next::Write(lba, fua) => self.write(now, lba, fua, out),
            mechanics::Next::Done(Ok(m)) => {
                self.report().mechanics = Some(m);
                self.finish(now, None);
            }
            mechanics::Next::Done(Err(e)) => self.finish(now, Some(e)),
        }
    }

    fn finish(&mut self, now: Nanos, stopped: Option<String>) {
        self.finished = true;
        let mut r = self.report();
        r.finished_at_ns = now;
        r.stopped = stopped;
    }

    /// One measured response at `scan.i`; returns the next LBA to probe, or `None` when
    /// the range is done.
    fn step(&mut self, atime: Nanos) -> Option<u64> {
        let s = &mut self.scan;
        let i = s.i;
        let back = self.p.backtrack as u64;
        // Only a write that follows the write one sector before it is timed: after a skip
        // or a backtrack the arm comes from elsewhere (another track, another surface) and
        // the response says nothing about this sector.
        let sequential = i
            .checked_sub(1)
            .is_some_and(|p| s.prev.replace(i) == Some(p));
        if !sequential {
            return self.bounded(i + 1);
        }
        let reference = s.reference();
        let step = reference.map(|l| atime.abs_diff(l));
        // A boundary only ever adds time (the straddling write pays the switch and the
        // skew): with `upward_only` a drop is never a candidate. The thesis compares |Δ|,
        // and live a jitter spike that hides a boundary's rise on one pass makes the
        // sector after it a drop from the rise; backing up from that candidate crosses the
        // boundary every time, the rise becomes its reference, the drop recurs and
        // confirms: the boundary one sector late.
        let jump = reference.is_some_and(|l| {
            if self.p.upward_only {
                atime > l + self.p.settle_ns
            } else {
                atime.abs_diff(l) > self.p.settle_ns
            }
        });
        if let Some(d) = step {
            const EDGES_US: [u64; 6] = [10, 50, 100, 250, 500, 1000];
            let b = EDGES_US.iter().take_while(|&&e| d >= e * 1000).count();
            self.report
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .response_steps[b] += 1;
        }
        let mut next = i + 1;
        if jump && (s.saved == Some(i) || s.confirmed == 0) {
            s.confirmed += 1;
            if s.confirmed < self.p.confirms {
                // Back up and come again: a real boundary jumps every time.
                s.saved = Some(i);
                s.backtrack_left = self.p.backtrack;
                next = i.saturating_sub(back).max(self.p.start_lba);
            } else {
                // `i` is the last LBA of a track.
                s.confirmed = 0;
                s.saved = None;
                s.missed = 0;
                let span = i - s.warp_location + 1;
                let predicted = s.warp.max(1) * s.last_spt;
                if let Some(q) = s.checkpoint.take() {
                    // First check of a long skip: then on to the predicted boundary.
                    next = if i == q {
                        (q + s.last_spt).saturating_sub(back)
                    } else {
                        s.warp = 0;
                        s.warp_location
                    };
                    return self.bounded(next);
                }
                let run = if s.warp == 0 {
                    // Scanned from the track's first sector: `span` is its SPT once
                    // `scans` scans in a row agree, or at once when it is the SPT of one
                    // of the two runs before (an independent measurement agrees: a scan
                    // that missed a boundary finds a multiple of the SPT; `Params::scans`).
                    let agreed = match s.agreed {
                        Some((first, span0, n)) if first == s.warp_location => {
                            if span0 == span {
                                n + 1
                            } else {
                                self.report
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner())
                                    .disagreed += 1;
                                1
                            }
                        }
                        _ => 1,
                    };
                    let known = span == s.last_spt || span == s.earlier_spt;
                    if agreed < self.p.scans && !known {
                        let first = s.warp_location;
                        s.agreed = Some((first, span, agreed));
                        return self.bounded(first);
                    }
                    s.agreed = None;
                    // The next boundary is predicted from it (a skip of one track, checked
                    // like every skip), as the thesis: Table 6.1's 1, 1, 2, 4, … tracks.
                    if span != s.last_spt {
                        s.earlier_spt = s.last_spt;
                    }
                    s.last_spt = span;
                    s.warp = 1;
                    Some(span)
                } else if span == predicted {
                    s.warp *= 2;
                    Some(s.last_spt)
                } else {
                    // The SPT changed somewhere in the skipped tracks: measure them again,
                    // sector by sector from the first.
                    s.warp = 0;
                    None
                };
                match run {
                    Some(spt) => {
                        let first = s.warp_location;
                        s.warp_location = i + 1;
                        let mut r = self.report.lock().unwrap_or_else(|e| e.into_inner());
                        r.steps.push(TrackRun {
                            first_lba: first,
                            last_lba: i,
                            spt,
                        });
                        match r.runs.last_mut() {
                            Some(last) if last.spt == spt && last.last_lba + 1 == first => {
                                last.last_lba = i
                            }
                            _ => r.runs.push(TrackRun {
                                first_lba: first,
                                last_lba: i,
                                spt,
                            }),
                        }
                        drop(r);
                        // Land `backtrack` sectors before the boundary to time next.
                        next = match s.warp {
                            0 => i + 1,
                            1 => (i + s.last_spt).saturating_sub(back),
                            w => {
                                // The boundary a track before the predicted one first.
                                let q = i + (w - 1) * s.last_spt;
                                s.checkpoint = Some(q);
                                q.saturating_sub(back)
                            }
                        };
                    }
                    None => next = s.warp_location,
                }
            }
        } else {
            if s.confirmed > 0 {
                s.backtrack_left = s.backtrack_left.saturating_sub(1);
                if s.backtrack_left == 0 {
                    match s.saved {
                        // The candidate did not come back this time: with a retry left,
                        // back up and time it again (its confirmations stand).
                        Some(c) if s.missed < self.p.retries => {
                            s.missed += 1;
                            s.backtrack_left = self.p.backtrack;
                            next = c.saturating_sub(back).max(self.p.start_lba);
                            self.report
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .retried += 1;
                        }
                        // It did not come back: a glitch.
                        _ => {
                            s.confirmed = 0;
                            s.saved = None;
                            s.missed = 0;
                            self.report
                                .lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .glitches += 1;
                        }
                    }
                }
            }
            // Every timed response that is not a candidate is the next one's reference
            // (as the thesis): where the normal response changes (another zone, a slower
            // region), the reference follows it after one probe.
            if s.recent.len() == self.p.reference as usize {
                s.recent.remove(0);
            }
            s.recent.push(atime);
        }
        self.bounded(next)
    }

    /// `next` if a probe write fits there; else scan from the last boundary sector by
    /// sector, or stop when that is done.
    fn bounded(&mut self, next: u64) -> Option<u64> {
        let s = &mut self.scan;
        if next >= self.last_start {
            s.checkpoint = None;
            if s.warp > 0 {
                // Skipping from `warp_location` ran off the end: scan what is left from
                // there sector by sector (the tracks it jumped have no boundary yet).
                s.warp = 0;
                return Some(s.warp_location).filter(|&n| n < self.last_start);
            }
            return None;
        }
        Some(next)
    }
}

impl Function for GeometryProbe {
    fn name(&self) -> &str {
        "geometry-probe"
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let d = match &self.p.device {
            Some(n) => devices
                .iter()
                .find(|d| &d.name == n)
                .ok_or_else(|| format!("geometry-probe: no device named `{n}`"))?,
            None => match devices {
                [d] => d,
                _ => {
                    return Err(format!(
                        "geometry-probe: {} devices: say which to probe with `device`",
                        devices.len()
                    ))
                }
            },
        };
        self.dev = d.id;
        let sectors = d.capacity / self.p.sector_bytes as u64;
        self.end = self.p.end_lba.unwrap_or(sectors);
        if self.end > sectors {
            return Err(format!(
                "geometry-probe: end_lba {} is past the end of `{}` ({sectors} sectors)",
                self.end, d.name
            ));
        }
        self.last_start = (self.end + 1).saturating_sub(self.p.write_sectors as u64);
        if self.p.start_lba >= self.last_start {
            return Err(format!(
                "geometry-probe: start_lba {} leaves no room for a {}-sector write before {}",
                self.p.start_lba, self.p.write_sectors, self.end
            ));
        }
        Ok(())
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        self.issue(now, out);
    }

    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        out.submit(io);
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        if !done.io.id.is_own() {
            out.reply(done);
            return;
        }
        if self.finished || done.io.id != IoId::own(self.seq - 1) {
            return;
        }
        if done.status != Status::Ok {
            let lba = done.io.offset / self.p.sector_bytes as u64;
            self.finish(
                now,
                Some(format!(
                    "probe write at LBA {lba} failed: {:?}",
                    done.status
                )),
            );
            return;
        }
        let atime = now.saturating_sub(self.sent_at);
        if let Some(x) = self.extractor.as_mut() {
            let next = x.completed(atime);
            return self.follow(now, next, out);
        }
        match self.step(atime) {
            Some(next) if self.report().probes < self.p.max_probes => {
                self.scan.i = next;
                self.issue(now, out);
            }
            Some(_) => self.finish(
                now,
                Some(format!("max_probes ({}) reached", self.p.max_probes)),
            ),
            None => self.phase_one_done(now, out),
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let r = self.report();
        let tracks: u64 = r.runs.iter().map(TrackRun::tracks).sum();
        vec![
            ("probes".into(), r.probes as f64),
            ("track_runs".into(), r.runs.len() as f64),
            ("tracks".into(), tracks as f64),
            ("glitches".into(), r.glitches as f64),
            ("done".into(), f64::from(u8::from(r.done))),
        ]
    }
}

#[cfg(test)]
mod tests;
