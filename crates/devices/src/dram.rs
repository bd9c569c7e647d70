//! DRAM ranks: the smallest power-managed unit of main memory (a DIMM holds 1, 2 or 4 ranks
//! of 4–16 devices each; every device of a rank changes state together).
//!
//! A rank's states are those of the thesis (Huang 2006, ch. 2) and of the delay-hiding paper:
//! `standby` (precharge standby: ready at the next clock), `read`, `write`, `powerdown`
//! (clock gated except refresh) and `self_refresh` (powerdown with the DIMM's PLL and
//! register off). Entering a low-power state is immediate; leaving it takes the exit
//! latency (tXP, tXS), charged at standby power (neither source gives a transition power).
//!
//! A part is data (`catalogue/dram/NAME.toml`, embedded): either the per-rank watts a paper
//! publishes (`[watts]`) or DRAMPower-style memspec currents (`[currents]`), from which the
//! per-rank powers are derived as DRAMPower does for the background states:
//!
//! | state | per-rank power |
//! |---|---|
//! | standby | IDD2N·VDD·n + refresh + register |
//! | powerdown | IDD2P·VDD·n + refresh + register |
//! | self_refresh | IDD6·VDD·n (refresh is internal; register and PLL off) |
//! | read / write | IDD4R / IDD4W ·VDD·n + register |
//!
//! with refresh = (IDD5B − IDD3N)·VDD·n·tRFC/tREFI (the average cost of the auto-refreshes
//! the controller issues every tREFI) and, per access, one activate–precharge pair charged as
//! an operation energy (IDD0·tRC − IDD3N·tRAS − IDD2N·(tRC − tRAS))·VDD·n (closed page).
//! Published watts already include refresh and activation, so those entries add neither.
//!
//! [`Rank`] is the run-time state machine: residency and energy go to the core's
//! [`Ledger`](wattio_core::Ledger), so a rank's residency sums to the run by construction.
//! It is driven by calls, not events (a memory run makes tens of millions of accesses): the
//! caller serves an access with [`Rank::access`] and commands states with
//! [`Rank::set_state`]; both take the caller's time and never go back before the end of the
//! rank's last operation.

use serde::Deserialize;
use std::collections::BTreeMap;
use wattio_core::power::{PowerDef, StateDef, TransitionDef};
use wattio_core::time::{ns_to_secs, secs_to_ns};
use wattio_core::{Ledger, LedgerRow, Nanos, PowerSpec, PowerStateId};

/// State ids of every rank's [`PowerSpec`] (the order of [`STATE_NAMES`]).
pub const STANDBY: PowerStateId = 0;
pub const READ: PowerStateId = 1;
pub const WRITE: PowerStateId = 2;
pub const POWERDOWN: PowerStateId = 3;
pub const SELF_REFRESH: PowerStateId = 4;
pub const STATE_NAMES: [&str; 5] = ["standby", "read", "write", "powerdown", "self_refresh"];

/// The parts shipped with wattio (`catalogue/dram/`).
static EMBEDDED: &[(&str, &str)] = &[
    (
        "ddr-400-thesis",
        include_str!("../../../catalogue/dram/ddr-400-thesis.toml"),
    ),
    (
        "ddr2-800-delay-hiding",
        include_str!("../../../catalogue/dram/ddr2-800-delay-hiding.toml"),
    ),
    (
        "ddr4-2400-micron-4gb-x8",
        include_str!("../../../catalogue/dram/ddr4-2400-micron-4gb-x8.toml"),
    ),
    (
        "ddr5-4800-drampower",
        include_str!("../../../catalogue/dram/ddr5-4800-drampower.toml"),
    ),
];

/// Names of the embedded DRAM parts.
pub fn part_names() -> impl Iterator<Item = &'static str> {
    EMBEDDED.iter().map(|(n, _)| *n)
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankTimingDef {
    pub t_rcd_ns: f64,
    pub t_cl_ns: f64,
    pub data_rate_mts: f64,
    pub bus_bytes: u32,
    pub t_refi_ns: f64,
    pub t_rfc_ns: f64,
    /// Powerdown exit.
    pub t_xp_ns: f64,
    /// Self-refresh exit (to a command that needs the DLL: a read or write).
    pub t_xs_ns: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Per-rank watts as a paper publishes them (refresh and activation included).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WattsDef {
    pub read: f64,
    pub write: f64,
    pub standby: f64,
    pub powerdown: f64,
    pub self_refresh: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// Memspec currents of one device, in mA, and VDD in V (DRAMPower's `mempowerspec`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CurrentsDef {
    pub vdd: f64,
    pub idd0: f64,
    pub idd2n: f64,
    pub idd2p: f64,
    pub idd3n: f64,
    pub idd4r: f64,
    pub idd4w: f64,
    pub idd5b: f64,
    pub idd6: f64,
    pub t_rc_ns: f64,
    pub t_ras_ns: f64,
    /// PLL and register of a registered DIMM, per rank, off in self refresh.
    pub register_w: f64,
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

/// One DRAM part: a catalogue/dram entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankDef {
    pub description: String,
    #[serde(default)]
    pub references: Vec<String>,
    pub devices_per_rank: u32,
    pub rank_mib: u64,
    pub timing: RankTimingDef,
    #[serde(default)]
    pub watts: Option<WattsDef>,
    #[serde(default)]
    pub currents: Option<CurrentsDef>,
}

/// A resolved part: per-rank power states and the timings the controller needs.
#[derive(Clone, Debug)]
pub struct RankSpec {
    pub name: String,
    pub description: String,
    pub power: PowerSpec,
    pub rank_bytes: u64,
    pub t_rcd: Nanos,
    pub t_cl: Nanos,
    pub t_refi: Nanos,
    pub t_rfc: Nanos,
    pub t_xp: Nanos,
    pub t_xs: Nanos,
    /// Bytes per nanosecond on the data bus.
    pub bus_bytes_per_ns: f64,
    /// Activation energy charged per access (memspec parts; 0 for published watts).
    pub act_energy_j: f64,
    /// Ledger slots of the two exits.
    pd_exit_slot: usize,
    sr_exit_slot: usize,
}

fn check(key: &str, v: f64, max: f64) -> Result<(), String> {
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err(format!("{key}: expected a number in [0, {max}], got {v}"))
    }
}

impl RankDef {
    pub fn from_toml(origin: &str, text: &str) -> Result<RankDef, String> {
        toml::from_str::<RankDef>(text).map_err(|e| format!("{origin}: {e}"))
    }

    /// Per-rank watts of (standby, read, write, powerdown, self_refresh) and the activation
    /// energy per access.
    pub fn rank_watts(&self) -> Result<([f64; 5], f64), String> {
        let t = &self.timing;
        match (&self.watts, &self.currents) {
            (Some(w), None) => {
                for (k, v) in [
                    ("read", w.read),
                    ("write", w.write),
                    ("standby", w.standby),
                    ("powerdown", w.powerdown),
                    ("self_refresh", w.self_refresh),
                ] {
                    check(&format!("watts.{k}"), v, 1e3)?;
                }
                Ok((
                    [w.standby, w.read, w.write, w.powerdown, w.self_refresh],
                    0.0,
                ))
            }
            (None, Some(c)) => {
                for (k, v) in [
                    ("idd0", c.idd0),
                    ("idd2n", c.idd2n),
                    ("idd2p", c.idd2p),
                    ("idd3n", c.idd3n),
                    ("idd4r", c.idd4r),
                    ("idd4w", c.idd4w),
                    ("idd5b", c.idd5b),
                    ("idd6", c.idd6),
                ] {
                    check(&format!("currents.{k}"), v, 1e4)?;
                }
                check("currents.vdd", c.vdd, 10.0)?;
                check("currents.register_w", c.register_w, 1e3)?;
                check("currents.t_rc_ns", c.t_rc_ns, 1e6)?;
                check("currents.t_ras_ns", c.t_ras_ns, c.t_rc_ns)?;
                if t.t_refi_ns <= 0.0 {
                    return Err("timing.t_refi_ns: must be positive".into());
                }
                let n = f64::from(self.devices_per_rank);
                // mA · V = mW per device; ·n / 1000 = W per rank.
                let w = |ma: f64| ma * c.vdd * n / 1000.0;
                let refresh = w(c.idd5b - c.idd3n).max(0.0) * t.t_rfc_ns / t.t_refi_ns;
                let act_mw_ns = (c.idd0 * c.t_rc_ns
                    - c.idd3n * c.t_ras_ns
                    - c.idd2n * (c.t_rc_ns - c.t_ras_ns))
                    .max(0.0);
                // mA·ns·V = pJ per device.
                let act_energy_j = act_mw_ns * c.vdd * n * 1e-12;
                Ok((
                    [
                        w(c.idd2n) + refresh + c.register_w,
                        w(c.idd4r) + c.register_w,
                        w(c.idd4w) + c.register_w,
                        w(c.idd2p) + refresh + c.register_w,
                        w(c.idd6),
                    ],
                    act_energy_j,
                ))
            }
            (Some(_), Some(_)) => {
                Err("watts, currents: give one of the two tables, not both".into())
            }
            (None, None) => Err("watts, currents: one of the two tables is required".into()),
        }
    }

    pub fn resolve(&self, name: &str) -> Result<RankSpec, String> {
        let err = |e: String| format!("dram part `{name}`: {e}");
        let t = &self.timing;
        for (k, v) in [
            ("t_rcd_ns", t.t_rcd_ns),
            ("t_cl_ns", t.t_cl_ns),
            ("t_refi_ns", t.t_refi_ns),
            ("t_rfc_ns", t.t_rfc_ns),
            ("t_xp_ns", t.t_xp_ns),
            ("t_xs_ns", t.t_xs_ns),
        ] {
            check(&format!("timing.{k}"), v, 1e9).map_err(err)?;
        }
        check("timing.data_rate_mts", t.data_rate_mts, 1e6).map_err(err)?;
        if t.data_rate_mts == 0.0 || t.bus_bytes == 0 || t.bus_bytes > 1024 {
            return Err(err(
                "timing.data_rate_mts, timing.bus_bytes: must be positive (bus_bytes ≤ 1024)"
                    .into(),
            ));
        }
        if !(1..=64).contains(&self.devices_per_rank) {
            return Err(err(format!(
                "devices_per_rank: expected 1..=64, got {}",
                self.devices_per_rank
            )));
        }
        if !(1..=1 << 20).contains(&self.rank_mib) {
            return Err(err(format!(
                "rank_mib: expected 1..=1048576, got {}",
                self.rank_mib
            )));
        }
        let (watts, act_energy_j) = self.rank_watts().map_err(err)?;
        let standby_w = watts[0];
        let state = |i: usize| StateDef {
            name: STATE_NAMES[i].into(),
            watts: watts[i],
            spinning: false,
            source: String::new(),
        };
        // Zero-latency entries; exits charged at standby power (no source gives more).
        let tr = |name: &str, from: PowerStateId, to: PowerStateId, ns: f64| TransitionDef {
            name: Some(name.into()),
            from: STATE_NAMES[from as usize].into(),
            to: STATE_NAMES[to as usize].into(),
            latency_s: ns * 1e-9,
            energy_j: standby_w * ns * 1e-9,
            source: String::new(),
        };
        let def = PowerDef {
            idle: "standby".into(),
            active: "read".into(),
            seek: None,
            rated_start_stop: None,
            rated_start_stop_source: String::new(),
            flush_asleep: Default::default(),
            states: (0..5).map(state).collect(),
            transitions: vec![
                tr("powerdown_exit", POWERDOWN, STANDBY, t.t_xp_ns),
                tr("self_refresh_exit", SELF_REFRESH, STANDBY, t.t_xs_ns),
                tr("powerdown_entry", STANDBY, POWERDOWN, 0.0),
                tr("self_refresh_entry", STANDBY, SELF_REFRESH, 0.0),
                tr("powerdown_to_self_refresh", POWERDOWN, SELF_REFRESH, 0.0),
                // The burst's end: the rank is back in standby.
                tr("write_end", WRITE, STANDBY, 0.0),
            ],
        };
        let power = PowerSpec::from_def(&def).map_err(err)?;
        let ns = power.states.len();
        Ok(RankSpec {
            name: name.to_string(),
            description: self.description.clone(),
            pd_exit_slot: ns + power.transition(POWERDOWN, STANDBY).expect("defined above"),
            sr_exit_slot: ns
                + power
                    .transition(SELF_REFRESH, STANDBY)
                    .expect("defined above"),
            power,
            rank_bytes: self.rank_mib << 20,
            t_rcd: secs_to_ns(t.t_rcd_ns * 1e-9),
            t_cl: secs_to_ns(t.t_cl_ns * 1e-9),
            t_refi: secs_to_ns(t.t_refi_ns * 1e-9).max(1),
            t_rfc: secs_to_ns(t.t_rfc_ns * 1e-9),
            t_xp: secs_to_ns(t.t_xp_ns * 1e-9),
            t_xs: secs_to_ns(t.t_xs_ns * 1e-9),
            bus_bytes_per_ns: t.data_rate_mts * f64::from(t.bus_bytes) / 1000.0,
            act_energy_j,
        })
    }
}

impl RankSpec {
    /// An embedded part by name.
    pub fn named(name: &str) -> Result<RankSpec, String> {
        let (_, text) = EMBEDDED.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            format!(
                "unknown dram part `{name}` (expected one of: {})",
                part_names().collect::<Vec<_>>().join(", ")
            )
        })?;
        RankDef::from_toml(&format!("catalogue/dram/{name}.toml"), text)?.resolve(name)
    }

    pub fn watts(&self, state: PowerStateId) -> f64 {
        self.power.states[state as usize].watts
    }

    /// Exit latency of a state to standby (0 for the ready states).
    pub fn exit_latency(&self, state: PowerStateId) -> Nanos {
        match state {
            POWERDOWN => self.t_xp,
            SELF_REFRESH => self.t_xs,
            _ => 0,
        }
    }

    /// Time the data bus carries one line.
    pub fn burst_ns(&self, line_bytes: u32) -> Nanos {
        secs_to_ns(f64::from(line_bytes) / self.bus_bytes_per_ns * 1e-9).max(1)
    }

    /// Time a closed-page access to one line keeps its rank busy: activate (tRCD), column
    /// access (CL), then the burst.
    pub fn access_ns(&self, line_bytes: u32) -> Nanos {
        self.t_rcd + self.t_cl + self.burst_ns(line_bytes)
    }
}

/// How an access was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// When the rank began the access (after any queueing and exit).
    pub start: Nanos,
    /// When the data is back.
    pub done: Nanos,
    /// The low-power state the access found the rank in, if any (it waited for the exit).
    pub woke_from: Option<PowerStateId>,
}

/// One rank at run time: its state machine and ledger.
#[derive(Clone, Debug)]
pub struct Rank {
    ledger: Ledger,
    /// The state the rank is in (or will be in when its current operation ends).
    state: PowerStateId,
    /// End of the rank's current operation (an access or an exit); commands wait for it.
    busy_until: Nanos,
    /// End of the last access: the start of the current idle period.
    idle_since: Nanos,
    pub reads: u64,
    pub writes: u64,
    /// Accesses that found the rank in powerdown / in self refresh.
    pub delayed_pd: u64,
    pub delayed_sr: u64,
    /// Idle periods between two accesses (an access arriving after the previous one ended;
    /// back-to-back accesses make none) and their total length: the gaps a low-power state
    /// can use (traffic reshaping lengthens the cold ranks', Huang 2006 §4.4).
    pub idle_periods: u64,
    pub idle_period_ns: Nanos,
}

impl Rank {
    pub fn new(spec: &RankSpec, initial: PowerStateId, at: Nanos) -> Rank {
        Rank {
            ledger: Ledger::new(&spec.power, initial as usize, at),
            state: initial,
            busy_until: at,
            idle_since: at,
            reads: 0,
            writes: 0,
            delayed_pd: 0,
            delayed_sr: 0,
            idle_periods: 0,
            idle_period_ns: 0,
        }
    }

    #[inline]
    pub fn state(&self) -> PowerStateId {
        self.state
    }

    #[inline]
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    #[inline]
    pub fn idle_since(&self) -> Nanos {
        self.idle_since
    }

    /// Serve one access arriving at `now` that occupies the rank for `service` ns once it
    /// can start: it queues behind the rank's current operation and, if the rank is in a
    /// low-power state, waits for the exit.
    #[inline]
    pub fn access(&mut self, spec: &RankSpec, now: Nanos, write: bool, service: Nanos) -> Served {
        if now > self.idle_since && self.reads + self.writes > 0 {
            self.idle_periods += 1;
            self.idle_period_ns += now - self.idle_since;
        }
        let mut t = now.max(self.busy_until);
        let woke_from = match self.state {
            POWERDOWN => {
                self.delayed_pd += 1;
                self.ledger.enter(spec.pd_exit_slot, t);
                t += spec.t_xp;
                Some(POWERDOWN)
            }
            SELF_REFRESH => {
                self.delayed_sr += 1;
                self.ledger.enter(spec.sr_exit_slot, t);
                t += spec.t_xs;
                Some(SELF_REFRESH)
            }
            _ => None,
        };
        let op = if write {
            self.writes += 1;
            WRITE
        } else {
            self.reads += 1;
            READ
        };
        self.ledger.enter(op as usize, t);
        let done = t + service;
        self.ledger.enter(STANDBY as usize, done);
        if spec.act_energy_j > 0.0 {
            self.ledger.add_op_energy(spec.act_energy_j);
        }
        self.state = STANDBY;
        self.busy_until = done;
        self.idle_since = done;
        Served {
            start: t,
            done,
            woke_from,
        }
    }

    /// Command the rank into `target` (standby, powerdown or self refresh) at `now`, or when
    /// its current operation ends if later. Waking (to standby, or self refresh →
    /// powerdown through standby) takes the exit latency; the rank is busy until it ends.
    /// Returns when the rank is in `target`.
    pub fn set_state(&mut self, spec: &RankSpec, now: Nanos, target: PowerStateId) -> Nanos {
        let t = now.max(self.busy_until);
        if target == self.state {
            return t;
        }
        debug_assert!(matches!(target, STANDBY | POWERDOWN | SELF_REFRESH));
        match self.state {
            POWERDOWN | SELF_REFRESH if target == STANDBY || self.state == SELF_REFRESH => {
                let (slot, lat) = if self.state == POWERDOWN {
                    (spec.pd_exit_slot, spec.t_xp)
                } else {
                    (spec.sr_exit_slot, spec.t_xs)
                };
                self.ledger.enter(slot, t);
                self.ledger.enter(target as usize, t + lat);
                self.busy_until = t + lat;
            }
            _ => {
                self.ledger.enter(target as usize, t);
                // Later commands must not go back before this one.
                self.busy_until = t;
            }
        }
        self.state = target;
        self.busy_until
    }

    /// The ledger as of `now` (at or after the end of the last operation).
    pub fn rows(&self, spec: &RankSpec, now: Nanos) -> Vec<LedgerRow> {
        self.ledger.rows(&spec.power, now)
    }

    /// Energy as of `now`, activation energy included.
    pub fn energy_j(&self, spec: &RankSpec, now: Nanos) -> f64 {
        self.ledger.energy_at(&spec.power, now)
    }

    /// Residency per state (ns) as of `now`, in the order of [`STATE_NAMES`].
    pub fn residency(&self, now: Nanos) -> [Nanos; 5] {
        let r = self.ledger.residency_at(now);
        [r[0], r[1], r[2], r[3], r[4]]
    }

    /// Time spent in exits as of `now`.
    pub fn exit_residency(&self, spec: &RankSpec, now: Nanos) -> Nanos {
        let r = self.ledger.residency_at(now);
        r[spec.pd_exit_slot] + r[spec.sr_exit_slot]
    }
}

/// Mean power of a ledger over `span` ns.
pub fn mean_watts(energy_j: f64, span: Nanos) -> f64 {
    if span == 0 {
        0.0
    } else {
        energy_j / ns_to_secs(span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
    }

    #[test]
    fn published_watts_are_taken_as_they_are() {
        let s = RankSpec::named("ddr-400-thesis").unwrap();
        assert_eq!(s.watts(STANDBY), 2.2);
        assert_eq!(s.watts(READ), 4.2);
        assert_eq!(s.watts(POWERDOWN), 1.2);
        assert_eq!(s.watts(SELF_REFRESH), 0.167);
        assert_eq!((s.t_xp, s.t_xs, s.t_refi), (5, 1000, 7800));
        assert_eq!(s.act_energy_j, 0.0);
        // 128 B over a 64-bit DDR-400 bus: 16 beats of 2.5 ns; + tRCD 15 + CL 15.
        assert_eq!(s.burst_ns(128), 40);
        assert_eq!(s.access_ns(128), 70);
        let d = RankSpec::named("ddr2-800-delay-hiding").unwrap();
        assert_eq!(d.watts(WRITE), 6.0195);
        assert_eq!(d.t_xs, 500);
        assert_eq!(d.rank_bytes, 1 << 30);
    }

    #[test]
    fn memspec_currents_derive_rank_power() {
        let s = RankSpec::named("ddr4-2400-micron-4gb-x8").unwrap();
        // refresh = (118 − 44) mA · 1.2 V · 8 · 260.833/3900 = 0.7104 W · 0.066880…
        let refresh = 0.7104 * 260.833 / 3900.0;
        assert!(
            close(s.watts(STANDBY), 0.3672 + refresh),
            "{}",
            s.watts(STANDBY)
        );
        assert!(close(s.watts(POWERDOWN), 0.1632 + refresh));
        assert!(close(s.watts(SELF_REFRESH), 0.1944));
        assert!(close(s.watts(READ), 1.7712));
        assert!(close(s.watts(WRITE), 1.62));
        // (60.75·45.833 − 44·32.5 − 38.25·13.333) mA·ns · 1.2 V · 8 = 8.106 nJ
        let act = (60.75 * 45.833 - 44.0 * 32.5 - 38.25 * (45.833 - 32.5)) * 1.2 * 8.0 * 1e-12;
        assert!(close(s.act_energy_j, act));
        assert!((s.act_energy_j - 8.106e-9).abs() < 1e-12);
        for name in part_names() {
            let s = RankSpec::named(name).unwrap();
            // Deeper states draw less, for every part.
            assert!(s.watts(READ) > s.watts(STANDBY), "{name}");
            assert!(s.watts(STANDBY) > s.watts(POWERDOWN), "{name}");
            assert!(s.watts(POWERDOWN) > s.watts(SELF_REFRESH), "{name}");
            assert!(s.t_xs > s.t_xp, "{name}");
        }
    }

    #[test]
    fn every_value_names_its_source() {
        for (name, text) in EMBEDDED {
            let d = RankDef::from_toml(name, text).unwrap();
            let tags = [
                "paper:",
                "datasheet:",
                "report:",
                "cited:",
                "derived:",
                "assumed",
            ];
            let tagged = |s: &str| tags.iter().any(|t| s.starts_with(t));
            let mut keys = vec![
                "t_rcd_ns",
                "t_cl_ns",
                "data_rate_mts",
                "bus_bytes",
                "t_refi_ns",
                "t_rfc_ns",
                "t_xp_ns",
                "t_xs_ns",
            ];
            for k in &keys {
                let s = d.timing.sources.get(*k).map(String::as_str).unwrap_or("");
                assert!(tagged(s), "{name}: timing.sources.{k} = {s:?}");
            }
            let sources = match (&d.watts, &d.currents) {
                (Some(w), None) => {
                    keys = vec!["read", "write", "standby", "powerdown", "self_refresh"];
                    &w.sources
                }
                (None, Some(c)) => {
                    keys = vec![
                        "vdd",
                        "idd0",
                        "idd2n",
                        "idd2p",
                        "idd3n",
                        "idd4r",
                        "idd4w",
                        "idd5b",
                        "idd6",
                        "t_rc_ns",
                        "t_ras_ns",
                        "register_w",
                    ];
                    &c.sources
                }
                _ => panic!("{name}: one of watts/currents"),
            };
            for k in &keys {
                let s = sources.get(*k).map(String::as_str).unwrap_or("");
                assert!(tagged(s), "{name}: sources.{k} = {s:?}");
            }
            assert!(!d.references.is_empty(), "{name}");
        }
    }

    #[test]
    fn bad_parts_name_the_key() {
        let text = EMBEDDED[0].1.replace("standby = 2.2", "standby = -2.2");
        let e = RankDef::from_toml("x", &text)
            .unwrap()
            .resolve("x")
            .unwrap_err();
        assert!(e.contains("watts.standby: expected a number"), "{e}");
        let text = EMBEDDED[0].1.replace("[watts]", "[watts]\nbogus = 1");
        let e = RankDef::from_toml("x.toml", &text).unwrap_err();
        assert!(e.starts_with("x.toml:") && e.contains("bogus"), "{e}");
        let e = RankSpec::named("ddr9").unwrap_err();
        assert!(e.contains("unknown dram part `ddr9`"), "{e}");
        let mut d = RankDef::from_toml("x", EMBEDDED[2].1).unwrap();
        d.watts = RankDef::from_toml("x", EMBEDDED[0].1).unwrap().watts;
        assert!(d.resolve("x").unwrap_err().contains("not both"));
    }

    /// A scripted run by hand on the thesis's rank (2.2 / 4.2 / 1.2 / 0.167 W, exits 5 and
    /// 1000 ns): every nanosecond is accounted once.
    #[test]
    fn rank_energy_by_hand() {
        let s = RankSpec::named("ddr-400-thesis").unwrap();
        let mut r = Rank::new(&s, STANDBY, 0);
        // 0–100 standby; read 100–170.
        let a = r.access(&s, 100, false, 70);
        assert_eq!(
            a,
            Served {
                start: 100,
                done: 170,
                woke_from: None
            }
        );
        // Commanded to powerdown at 150: waits for the access, enters at 170.
        assert_eq!(r.set_state(&s, 150, POWERDOWN), 170);
        // A write at 1170 finds it in powerdown: exit 1170–1175, write 1175–1245.
        let b = r.access(&s, 1170, true, 70);
        assert_eq!(
            (b.start, b.done, b.woke_from),
            (1175, 1245, Some(POWERDOWN))
        );
        // Self refresh at 2245; a read at 12245 waits 1000 ns: 13245–13315.
        r.set_state(&s, 2245, SELF_REFRESH);
        let c = r.access(&s, 12245, false, 70);
        assert_eq!(
            (c.start, c.done, c.woke_from),
            (13245, 13315, Some(SELF_REFRESH))
        );
        // A read arriving while the rank is busy queues behind it.
        let d = r.access(&s, 13300, false, 70);
        assert_eq!((d.start, d.done), (13315, 13385));
        let end = 20_000;
        let res = r.residency(end);
        // standby: 0–100, 1245–2245, 13385–20000
        assert_eq!(res[STANDBY as usize], 100 + 1000 + 6615);
        assert_eq!(res[READ as usize], 70 * 3);
        assert_eq!(res[WRITE as usize], 70);
        assert_eq!(res[POWERDOWN as usize], 1000);
        assert_eq!(res[SELF_REFRESH as usize], 10_000);
        assert_eq!(r.exit_residency(&s, end), 1005);
        let all: u64 = res.iter().sum::<u64>() + r.exit_residency(&s, end);
        assert_eq!(all, end);
        let e = 2.2 * 7715e-9 + 4.2 * 280e-9 + 1.2 * 1000e-9 + 0.167 * 10_000e-9 + 2.2 * 1005e-9;
        assert!(
            close(r.energy_j(&s, end), e),
            "{} vs {e}",
            r.energy_j(&s, end)
        );
        assert_eq!(
            (r.delayed_pd, r.delayed_sr, r.reads, r.writes),
            (1, 1, 3, 1)
        );
        let rows = r.rows(&s, end);
        let pd_exit = rows.iter().find(|r| r.slot == "powerdown_exit").unwrap();
        assert_eq!((pd_exit.entries, pd_exit.residency_ns), (1, 5));
        // Idle periods: 170–1170 and 1245–12245 (none before the first access, none for
        // the read queued behind another).
        assert_eq!((r.idle_periods, r.idle_period_ns), (2, 1000 + 11_000));
    }

    #[test]
    fn early_wake_hides_the_exit() {
        let s = RankSpec::named("ddr-400-thesis").unwrap();
        let mut r = Rank::new(&s, SELF_REFRESH, 0);
        // Woken at 0 (a context-switch decision): ready at 1000, not delayed.
        assert_eq!(r.set_state(&s, 0, STANDBY), 1000);
        let a = r.access(&s, 1500, false, 70);
        assert_eq!((a.start, a.woke_from), (1500, None));
        // Woken late: the access waits for the rest of the exit only.
        r.set_state(&s, 2000, SELF_REFRESH);
        r.set_state(&s, 3000, STANDBY);
        let b = r.access(&s, 3400, false, 70);
        assert_eq!((b.start, b.woke_from), (4000, None));
        // Self refresh → powerdown goes through an exit.
        r.set_state(&s, 5000, SELF_REFRESH);
        assert_eq!(r.set_state(&s, 6000, POWERDOWN), 7000);
        assert_eq!(r.state(), POWERDOWN);
        let res = r.residency(8000);
        assert_eq!(
            res.iter().sum::<u64>() + r.exit_residency(&s, 8000),
            8000,
            "{res:?}"
        );
        assert_eq!(res[POWERDOWN as usize], 1000);
    }

    #[test]
    fn memspec_rank_charges_activation_per_access() {
        let s = RankSpec::named("ddr4-2400-micron-4gb-x8").unwrap();
        let mut r = Rank::new(&s, STANDBY, 0);
        let svc = s.access_ns(64);
        for i in 0..10 {
            r.access(&s, i * 1000, i % 2 == 0, svc);
        }
        let end = 10_000;
        let res = r.residency(end);
        let e = s.watts(STANDBY) * (end - 10 * svc) as f64 * 1e-9
            + s.watts(READ) * (5 * svc) as f64 * 1e-9
            + s.watts(WRITE) * (5 * svc) as f64 * 1e-9
            + 10.0 * s.act_energy_j;
        assert_eq!(res[READ as usize], 5 * svc);
        assert!(close(r.energy_j(&s, end), e));
    }
}
