//! HW and HW–SW: the memory controller's per-rank self-refresh threshold predictor
//! (Huang 2006, Fig. 2.9) and its context-aware form (ch. 3).
//!
//! After every access a rank enters powerdown (threshold 0). At the end of each refresh
//! interval (every tREFI), for each rank x with N[x] accesses in the interval:
//!
//! ```text
//! if N[x] = 0:  Th[x] = Th[x]/2 if Th[x] < tREFI else Th[x] − tREFI
//! else:         Th[x] = min(Th[x] + N[x]·tREFI, Th_Max)
//! if x not in self refresh: powerdown; if idle time > Th[x]: self refresh
//! ```
//!
//! Two things the text leaves open are parameters: the initial threshold (`initial_ns`,
//! default Th_Max: a cold predictor does not gamble) and whether the self-refresh check runs
//! only at the tick (`sr_check = "tick"`) or continuously (`"continuous"`, the default: the
//! comparator fires as soon as the idle time passes Th[x], which the model evaluates lazily
//! at the rank's next access, tick or switch).
//!
//! HW–SW keeps the thresholds per process × rank: at a context switch the outgoing
//! process's Th[] is saved and the incoming one's restored (a new process starts from
//! `initial_ns`), so one process's traffic does not pollute another's prediction. As in the
//! thesis, HW–SW is defined for one CPU: with several, whose history would a shared rank
//! follow? The builder refuses it.

use super::{Mem, MemPolicy};
use serde::Deserialize;
use std::collections::HashMap;
use wattio_core::Nanos;
use wattio_devices::dram::{RankSpec, POWERDOWN, SELF_REFRESH, STANDBY};

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct HwConfig {
    /// Th_Max in refresh intervals (the thesis: 64 × tREFI ≈ 500 µs, "the window").
    pub th_max_refi: u32,
    /// Threshold before any history, in ns (default: Th_Max).
    pub initial_ns: Option<u64>,
    /// `continuous` or `tick`: when the self-refresh check runs.
    pub sr_check: String,
}

impl Default for HwConfig {
    fn default() -> Self {
        HwConfig {
            th_max_refi: 64,
            initial_ns: None,
            sr_check: "continuous".into(),
        }
    }
}

pub struct Hw {
    name: &'static str,
    refi: Nanos,
    th_max: Nanos,
    initial: Nanos,
    continuous: bool,
    th: Vec<Nanos>,
    n: Vec<u32>,
    /// When the thresholds last changed (a tick or a restore): the continuous comparator
    /// cannot have fired on a threshold before it was set.
    th_since: Nanos,
    /// HW–SW: saved thresholds per process.
    per_process: Option<HashMap<u32, Vec<Nanos>>>,
    restores: u64,
}

impl Hw {
    pub fn new(
        cfg: &HwConfig,
        spec: &RankSpec,
        ranks: usize,
        per_process: bool,
        cpus: usize,
    ) -> Result<Hw, String> {
        if !(1..=1 << 16).contains(&cfg.th_max_refi) {
            return Err(format!(
                "memory.policy.hw.th_max_refi: expected 1..=65536, got {}",
                cfg.th_max_refi
            ));
        }
        let continuous = match cfg.sr_check.as_str() {
            "continuous" => true,
            "tick" => false,
            other => {
                return Err(format!(
                    "memory.policy.hw.sr_check: expected `continuous` or `tick`, got `{other}`"
                ))
            }
        };
        if per_process && cpus != 1 {
            return Err(format!(
                "memory.policy.kind: hw-sw keeps one history per running process and is defined for one CPU, got cpus = {cpus}"
            ));
        }
        let th_max = spec.t_refi * u64::from(cfg.th_max_refi);
        let initial = cfg.initial_ns.unwrap_or(th_max);
        if initial > th_max {
            return Err(format!(
                "memory.policy.hw.initial_ns: {initial} exceeds Th_Max = {th_max} ns"
            ));
        }
        Ok(Hw {
            name: if per_process { "hw-sw" } else { "hw" },
            refi: spec.t_refi,
            th_max,
            initial,
            continuous,
            th: vec![initial; ranks],
            n: vec![0; ranks],
            th_since: 0,
            per_process: per_process.then(HashMap::new),
            restores: 0,
        })
    }

    /// The current threshold of each rank.
    pub fn thresholds(&self) -> &[Nanos] {
        &self.th
    }

    /// Fig. 2.9's update of one rank's threshold at the end of an interval.
    fn update(&mut self, x: usize) {
        let n = self.n[x];
        self.th[x] = if n == 0 {
            if self.th[x] < self.refi {
                self.th[x] / 2
            } else {
                self.th[x] - self.refi
            }
        } else {
            (self.th[x] + u64::from(n) * self.refi).min(self.th_max)
        };
        self.n[x] = 0;
    }

    /// The continuous comparator: a rank in powerdown whose idle time passed its threshold
    /// went to self refresh at that moment (or when the threshold was set, if later).
    #[inline]
    fn settle(&self, x: usize, now: Nanos, mem: &mut Mem) {
        let r = &mem.ranks[x];
        if r.state() == POWERDOWN {
            let at = (r.idle_since() + self.th[x]).max(self.th_since);
            if at <= now {
                mem.set(x, at, SELF_REFRESH);
            }
        }
    }
}

impl MemPolicy for Hw {
    fn name(&self) -> &str {
        self.name
    }

    #[inline]
    fn before_access(&mut self, now: Nanos, _pid: u32, r: usize, mem: &mut Mem) {
        if self.continuous {
            self.settle(r, now, mem);
        }
        self.n[r] += 1;
    }

    #[inline]
    fn after_access(&mut self, done: Nanos, _pid: u32, r: usize, mem: &mut Mem) {
        mem.set(r, done, POWERDOWN);
    }

    fn tick_period(&self) -> Option<Nanos> {
        Some(self.refi)
    }

    fn on_tick(&mut self, now: Nanos, mem: &mut Mem) {
        for x in 0..self.th.len() {
            if self.continuous {
                self.settle(x, now, mem);
            }
            self.update(x);
            let r = &mem.ranks[x];
            if r.state() == STANDBY && r.busy_until() <= now {
                mem.set(x, now, POWERDOWN);
            }
            let r = &mem.ranks[x];
            if r.state() == POWERDOWN && now.saturating_sub(r.idle_since()) > self.th[x] {
                mem.set(x, now, SELF_REFRESH);
            }
        }
        self.th_since = now;
    }

    fn on_switch(
        &mut self,
        now: Nanos,
        _cpu: usize,
        prev: Option<u32>,
        next: Option<u32>,
        _running: &[Option<u32>],
        mem: &mut Mem,
    ) {
        let Some(saved) = &mut self.per_process else {
            return;
        };
        if self.continuous {
            for x in 0..self.th.len() {
                // Inline settle: `self` is partly borrowed.
                let r = &mem.ranks[x];
                if r.state() == POWERDOWN {
                    let at = (r.idle_since() + self.th[x]).max(self.th_since);
                    if at <= now {
                        mem.set(x, at, SELF_REFRESH);
                    }
                }
            }
        }
        let fresh = vec![self.initial; self.th.len()];
        let incoming = next.and_then(|p| saved.get(&p).cloned()).unwrap_or(fresh);
        let outgoing = std::mem::replace(&mut self.th, incoming);
        if let Some(p) = prev {
            saved.insert(p, outgoing);
        }
        self.restores += 1;
        self.th_since = now;
    }

    fn on_exit(&mut self, pid: u32) {
        if let Some(saved) = &mut self.per_process {
            saved.remove(&pid);
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut v = vec![(
            "mean_threshold_ns".to_string(),
            self.th.iter().sum::<u64>() as f64 / self.th.len().max(1) as f64,
        )];
        if self.per_process.is_some() {
            v.push(("history_switches".to_string(), self.restores as f64));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_devices::dram::Rank;

    fn setup(ranks: usize, per_process: bool, initial: Option<u64>) -> (RankSpec, Vec<Rank>, Hw) {
        let spec = RankSpec::named("ddr-400-thesis").unwrap();
        let cfg = HwConfig {
            initial_ns: initial,
            ..HwConfig::default()
        };
        let hw = Hw::new(&cfg, &spec, ranks, per_process, 1).unwrap();
        let r = (0..ranks).map(|_| Rank::new(&spec, STANDBY, 0)).collect();
        (spec, r, hw)
    }

    const REFI: u64 = 7800;

    #[test]
    fn predictor_halves_decrements_grows_and_caps() {
        let (spec, mut ranks, mut hw) = setup(1, false, Some(3 * REFI));
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        let th_max = 64 * REFI;
        // No access: Th ≥ tREFI is decremented by tREFI.
        hw.on_tick(REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[2 * REFI]);
        hw.on_tick(2 * REFI, &mut mem);
        hw.on_tick(3 * REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[0]);
        // Below tREFI: halved (0 stays 0; from 5000: 2500, 1250).
        hw.th[0] = 5000;
        hw.on_tick(4 * REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[2500]);
        hw.on_tick(5 * REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[1250]);
        // Three accesses in the interval: grows by 3·tREFI.
        for i in 0..3 {
            let t = 5 * REFI + 100 + i * 200;
            hw.before_access(t, 1, 0, &mut mem);
            let a = mem.ranks[0].access(&spec, t, false, 70);
            hw.after_access(a.done, 1, 0, &mut mem);
        }
        hw.on_tick(6 * REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[1250 + 3 * REFI]);
        // Capped at Th_Max = 64 tREFI.
        hw.n[0] = 1000;
        hw.on_tick(7 * REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[th_max]);
    }

    #[test]
    fn powerdown_after_access_self_refresh_after_threshold() {
        let (spec, mut ranks, mut hw) = setup(1, false, Some(2000));
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        hw.before_access(100, 1, 0, &mut mem);
        let a = mem.ranks[0].access(&spec, 100, false, 70);
        hw.after_access(a.done, 1, 0, &mut mem);
        assert_eq!(mem.ranks[0].state(), POWERDOWN);
        // Next access at 5000: idle since 170 > Th 2000 → self refresh since 2170.
        hw.before_access(5000, 1, 0, &mut mem);
        assert_eq!(mem.ranks[0].state(), SELF_REFRESH);
        let b = mem.ranks[0].access(&spec, 5000, false, 70);
        assert_eq!(b.start, 6000);
        let res = mem.ranks[0].residency(6000);
        assert_eq!(res[POWERDOWN as usize], 2000);
        assert_eq!(res[SELF_REFRESH as usize], 5000 - 2170);
        // Tick mode: no self refresh between ticks.
        let (spec, mut ranks, _) = setup(1, false, None);
        let cfg = HwConfig {
            initial_ns: Some(2000),
            sr_check: "tick".into(),
            ..HwConfig::default()
        };
        let mut hw = Hw::new(&cfg, &spec, 1, false, 1).unwrap();
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        let a = mem.ranks[0].access(&spec, 100, false, 70);
        hw.after_access(a.done, 1, 0, &mut mem);
        hw.before_access(5000, 1, 0, &mut mem);
        assert_eq!(mem.ranks[0].state(), POWERDOWN);
        hw.after_access(
            mem.ranks[0].access(&spec, 5000, false, 70).done,
            1,
            0,
            &mut mem,
        );
        // At the tick (7800) Th grows by the one access counted: 2000 + 7800 > idle 2730,
        // so the rank stays in powerdown.
        hw.on_tick(REFI, &mut mem);
        assert_eq!(mem.ranks[0].state(), POWERDOWN);
        assert_eq!(hw.thresholds(), &[2000 + REFI]);
    }

    /// HW–SW saves the outgoing process's history and restores the incoming one's.
    #[test]
    fn history_follows_the_process() {
        let (spec, mut ranks, mut hw) = setup(2, true, Some(REFI));
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        // Process 1 accesses rank 0 twice in the first interval.
        for t in [100, 300] {
            hw.before_access(t, 1, 0, &mut mem);
            let a = mem.ranks[0].access(&spec, t, false, 70);
            hw.after_access(a.done, 1, 0, &mut mem);
        }
        hw.on_tick(REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[3 * REFI, 0]);
        // Switch to process 2 (new: initial history), one idle interval.
        hw.on_switch(REFI + 10, 0, Some(1), Some(2), &[Some(2)], &mut mem);
        assert_eq!(hw.thresholds(), &[REFI, REFI]);
        hw.on_tick(2 * REFI, &mut mem);
        assert_eq!(hw.thresholds(), &[0, 0]);
        // Back to 1: its history comes back untouched by process 2's interval.
        hw.on_switch(2 * REFI + 10, 0, Some(2), Some(1), &[Some(1)], &mut mem);
        assert_eq!(hw.thresholds(), &[3 * REFI, 0]);
        // And 2's is kept for its next turn.
        hw.on_switch(2 * REFI + 20, 0, Some(1), Some(2), &[Some(2)], &mut mem);
        assert_eq!(hw.thresholds(), &[0, 0]);
        // Plain HW keeps one history whatever runs.
        let (spec, mut ranks, mut hw) = setup(1, false, Some(REFI));
        let mut mem = Mem {
            spec: &spec,
            ranks: &mut ranks,
        };
        hw.on_switch(10, 0, Some(1), Some(2), &[Some(2)], &mut mem);
        assert_eq!(hw.thresholds(), &[REFI]);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let spec = RankSpec::named("ddr-400-thesis").unwrap();
        let e = Hw::new(&HwConfig::default(), &spec, 1, true, 2)
            .err()
            .unwrap();
        assert!(e.contains("one CPU"), "{e}");
        let cfg = HwConfig {
            sr_check: "sometimes".into(),
            ..HwConfig::default()
        };
        let e = Hw::new(&cfg, &spec, 1, false, 1).err().unwrap();
        assert!(e.starts_with("memory.policy.hw.sr_check"), "{e}");
    }
}
