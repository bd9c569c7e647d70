//! PARAID's gear-shifting policy: busy accounting, the Eq. 3/4 decision, cycle rationing.

use std::collections::VecDeque;
use wattio_core::time::{Nanos, NS_PER_S};

/// Busy time of the array as the union of request intervals: busy from a request's entry
/// until its completion, with overlapping requests counted once (the paper's monitor; no
/// probing of sleeping disks).
#[derive(Clone, Debug, Default)]
pub struct Busy {
    outstanding: u32,
    since: Nanos,
    total: Nanos,
    sampled: Nanos,
}

impl Busy {
    /// A request enters the array.
    pub fn enter(&mut self, now: Nanos) {
        if self.outstanding == 0 {
            self.since = now;
        }
        self.outstanding += 1;
    }

    /// A request leaves it.
    pub fn leave(&mut self, now: Nanos) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.outstanding == 0 {
            self.total += now.saturating_sub(self.since);
        }
    }

    /// Busy time since the last sample (and take a sample at `now`).
    pub fn sample(&mut self, now: Nanos) -> Nanos {
        let mut total = self.total;
        if self.outstanding > 0 {
            total += now.saturating_sub(self.since);
        }
        let busy = total - self.sampled;
        self.sampled = total;
        busy
    }
}

/// The policy's parameters (see `docs/functions/paraid.md` for sources and choices).
#[derive(Clone, Debug, PartialEq)]
pub struct ShiftParams {
    /// Utilization sampling period (the paper does not give it; 1 s).
    pub sample: Nanos,
    /// Samples in the moving window: window / sample (the paper's window: 32 s).
    pub window: usize,
    /// Threshold T (paper: 0.8).
    pub threshold: f64,
    /// RAID-5 write inflation W (paper: 1.5; RAID-0: 1).
    pub w: f64,
}

impl Default for ShiftParams {
    fn default() -> Self {
        ShiftParams {
            sample: NS_PER_S,
            window: 32,
            threshold: 0.8,
            w: 1.5,
        }
    }
}

/// What the policy decided after a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shift {
    Stay,
    Up,
    Down,
}

/// Eq. 3/4 on moving statistics of utilization. Samples of the busy fraction are taken
/// every `sample`; U and S are the mean and (population) standard deviation of the last
/// `window` samples in the current gear. Upshifts are aggressive: checked at every sample,
/// as soon as there is one (`U + S > T`, Eq. 3). Downshifts are conservative: only with a
/// full window in the current gear (`U′ + S′ < T`, Eq. 4, with U′ projected onto the lower
/// gear and S′ scaled by the same factor). A shift clears the window (the other gear's
/// utilization is another series). One gear at a time.
#[derive(Clone, Debug)]
pub struct Shifter {
    p: ShiftParams,
    samples: VecDeque<f64>,
}

impl Shifter {
    pub fn new(p: ShiftParams) -> Shifter {
        Shifter {
            samples: VecDeque::with_capacity(p.window),
            p,
        }
    }

    /// Mean and standard deviation of the window.
    pub fn stats(&self) -> (f64, f64) {
        let n = self.samples.len().max(1) as f64;
        let mean = self.samples.iter().sum::<f64>() / n;
        let var = self.samples.iter().map(|u| (u - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    /// Eq. 4's projection factor U′/U from a gear of `gi` disks to one of `glo`, with
    /// read and write shares `a_read`, `a_write` of the window's requests.
    pub fn projection(&self, gi: usize, glo: usize, a_read: f64, a_write: f64) -> f64 {
        let (gi, glo) = (gi as f64, glo as f64);
        let w = self.p.w;
        gi / glo * (a_read + a_write * (glo * (glo - 1.0) / (gi * (gi - 1.0)) * (1.0 - w) + w))
    }

    /// A new utilization sample `u` (busy fraction of the last period) in gear index
    /// `gear` of `gears` (disks per gear, increasing); `writes` is the write share of the
    /// window's requests; `can_down`: whether the disks a downshift would spin down have
    /// cycles left ([`Ration`]).
    pub fn sample(
        &mut self,
        u: f64,
        gears: &[usize],
        gear: usize,
        writes: f64,
        can_down: bool,
    ) -> Shift {
        if self.samples.len() == self.p.window {
            self.samples.pop_front();
        }
        self.samples.push_back(u.clamp(0.0, 1.0));
        let (mean, sd) = self.stats();
        let t = self.p.threshold;
        let decision = if gear + 1 < gears.len() && mean + sd > t {
            Shift::Up
        } else if gear > 0 && can_down && self.samples.len() == self.p.window {
            let f = self.projection(gears[gear], gears[gear - 1], 1.0 - writes, writes);
            if mean * f + sd * f < t {
                Shift::Down
            } else {
                Shift::Stay
            }
        } else {
            Shift::Stay
        };
        if decision != Shift::Stay {
            self.samples.clear();
        }
        decision
    }
}

/// Power-cycle rationing: a disk rated for `rated` start/stop cycles over `life` may cycle
/// at most ⌊rated · period / life⌋ times a period (20,000 over 5 years → 10 a day). A disk
/// at its ration keeps the array in the highest gear until the next period.
#[derive(Clone, Debug)]
pub struct Ration {
    per_period: u32,
    period: Nanos,
    start: Nanos,
    counts: Vec<u32>,
}

impl Ration {
    pub fn new(disks: usize, rated: u64, life: Nanos, period: Nanos) -> Ration {
        let per = (rated as u128 * period as u128 / life.max(1) as u128).min(u32::MAX as u128);
        Ration {
            per_period: per as u32,
            period: period.max(1),
            start: 0,
            counts: vec![0; disks],
        }
    }

    /// Cycles a disk may make per period.
    pub fn per_period(&self) -> u32 {
        self.per_period
    }

    fn roll(&mut self, now: Nanos) {
        if now >= self.start + self.period {
            self.start += (now - self.start) / self.period * self.period;
            self.counts.iter_mut().for_each(|c| *c = 0);
        }
    }

    /// May all of `disks` be cycled (spun down, later up) now?
    pub fn allows(&mut self, now: Nanos, disks: impl IntoIterator<Item = usize>) -> bool {
        self.roll(now);
        disks.into_iter().all(|d| self.counts[d] < self.per_period)
    }

    /// `disk` was spun down (one cycle).
    pub fn cycled(&mut self, now: Nanos, disk: usize) {
        self.roll(now);
        self.counts[disk] += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shifter(window: usize, w: f64) -> Shifter {
        Shifter::new(ShiftParams {
            window,
            w,
            ..ShiftParams::default()
        })
    }

    #[test]
    fn busy_time_is_the_union_of_request_intervals() {
        let mut b = Busy::default();
        b.enter(10);
        b.enter(15); // overlaps the first: counted once
        b.leave(20);
        b.leave(30);
        b.enter(50);
        assert_eq!(b.sample(60), 20 + 10, "10..30 and 50..60");
        b.leave(70);
        assert_eq!(b.sample(100), 10, "60..70");
        assert_eq!(b.sample(200), 0);
    }

    #[test]
    fn eq4_projection_by_hand() {
        // RAID-0 (W = 1): U′ = U·G_i/G_{i−1}, whatever the mix.
        let s = shifter(4, 1.0);
        assert!((s.projection(5, 2, 0.3, 0.7) - 2.5).abs() < 1e-12);
        // RAID-5 {3,5}, W = 1.5, half writes: 5/3·[0.5 + 0.5·(6/20·(−0.5) + 1.5)]
        // = 5/3·[0.5 + 0.5·1.35] = 5/3·1.175 = 1.958333…
        let s = shifter(4, 1.5);
        assert!((s.projection(5, 3, 0.5, 0.5) - 5.0 / 3.0 * 1.175).abs() < 1e-12);
        // All reads: only the disk-count ratio.
        assert!((s.projection(5, 3, 1.0, 0.0) - 5.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn eq3_upshifts_at_once_and_eq4_downshifts_only_on_a_full_calm_window() {
        let gears = [2, 5];
        // Low gear: 0.5 then 0.9: mean 0.7, sd 0.2: 0.9 > 0.8 → up at the second sample.
        let mut s = shifter(4, 1.0);
        assert_eq!(s.sample(0.5, &gears, 0, 0.0, true), Shift::Stay);
        assert_eq!(s.sample(0.9, &gears, 0, 0.0, true), Shift::Up);
        // High gear: steady 0.3 → U′ = 0.3·5/2 = 0.75 < 0.8, but only once 4 samples are in.
        for _ in 0..3 {
            assert_eq!(s.sample(0.3, &gears, 1, 0.0, true), Shift::Stay);
        }
        assert_eq!(s.sample(0.3, &gears, 1, 0.0, true), Shift::Down);
        // Steady 0.33 → U′ = 0.825: stays. A varying 0.2/0.4 (mean 0.3, sd 0.1) →
        // U′ + S′ = 0.75 + 0.25 = 1.0: stays (the deviation counts).
        let mut s = shifter(4, 1.0);
        for _ in 0..8 {
            assert_eq!(s.sample(0.33, &gears, 1, 0.0, true), Shift::Stay);
        }
        let mut s = shifter(4, 1.0);
        for u in [0.2, 0.4, 0.2, 0.4, 0.2, 0.4] {
            assert_eq!(s.sample(u, &gears, 1, 0.0, true), Shift::Stay);
        }
        // A calm window but no ration left: stays.
        let mut s = shifter(4, 1.0);
        for _ in 0..6 {
            assert_eq!(s.sample(0.1, &gears, 1, 0.0, false), Shift::Stay);
        }
        // RAID-5 {3,5} at 0.4 utilization: all reads → U′ = 0.667 (down); all writes →
        // U′ = 0.4·5/3·(6/20·(−0.5)+1.5) = 0.9 (stays).
        let gears = [3, 5];
        let mut s = shifter(2, 1.5);
        s.sample(0.4, &gears, 1, 1.0, true);
        assert_eq!(s.sample(0.4, &gears, 1, 1.0, true), Shift::Stay);
        let mut s = shifter(2, 1.5);
        s.sample(0.4, &gears, 1, 0.0, true);
        assert_eq!(s.sample(0.4, &gears, 1, 0.0, true), Shift::Down);
    }

    #[test]
    fn the_ration_is_ten_cycles_a_day_and_refills_the_next_day() {
        let day = 86_400 * NS_PER_S;
        let mut r = Ration::new(2, 20_000, 5 * 365 * day, day);
        assert_eq!(r.per_period(), 10, "20,000 / (5 · 365) = 10.96 → 10");
        for _ in 0..9 {
            assert!(r.allows(1, [0, 1]));
            r.cycled(1, 0);
        }
        // Disk 0 has one cycle left: allowed, then at the ration, only disk 1 may cycle.
        assert!(r.allows(2, [0]));
        r.cycled(2, 0);
        assert!(!r.allows(3, [0]));
        assert!(!r.allows(3, [0, 1]));
        assert!(r.allows(3, [1]));
        // One nanosecond before the next day: still at the ration; at the day: refilled.
        assert!(!r.allows(day - 1, [0]));
        assert!(r.allows(day, [0]));
    }
}
