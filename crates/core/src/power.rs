//! Device power state machines: states with a power draw, transitions with a latency and an
//! energy, and the break-even time that decides when sleeping pays.
//!
//! A spec is data (the device catalogue), deserialized from TOML:
//!
//! ```toml
//! [power]
//! idle = "idle"        # the ready state the device rests in between requests
//! active = "active"    # drawn while transferring / rotating under load
//! seek = "seek"        # optional: drawn while the arm moves (FS2's Table 5.1)
//! rated_start_stop = 300000
//! [[power.state]]
//! name = "standby"
//! watts = 0.2
//! spinning = false
//! source = "datasheet, table 4"
//! [[power.transition]]
//! name = "spin_up"
//! from = "standby"
//! to = "idle"
//! latency_s = 3.0
//! energy_j = 15.0
//! source = "datasheet, table 4"
//! ```

use crate::time::{ns_to_secs, secs_to_ns, Nanos};
use serde::{Deserialize, Serialize};

pub type PowerStateId = u8;

/// The name of the state an absent device rests in ([`PowerSpec::with_absent`]).
pub const ABSENT: &str = "absent";

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StateDef {
    pub name: String,
    pub watts: f64,
    /// Platters spinning (a transition from a non-spinning to a spinning state is a
    /// start/stop cycle). Flash devices leave it false everywhere.
    #[serde(default)]
    pub spinning: bool,
    #[serde(default)]
    pub source: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TransitionDef {
    /// Label in the ledger (default `from->to`).
    #[serde(default)]
    pub name: Option<String>,
    pub from: String,
    pub to: String,
    pub latency_s: f64,
    pub energy_j: f64,
    #[serde(default)]
    pub source: String,
}

/// The serialized form of a power spec (one `[power]` table of a catalogue entry).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PowerDef {
    pub idle: String,
    pub active: String,
    #[serde(default)]
    pub seek: Option<String>,
    /// Rated start/stop (load/unload) cycles, if the datasheet gives one.
    #[serde(default)]
    pub rated_start_stop: Option<u64>,
    #[serde(default)]
    pub rated_start_stop_source: String,
    /// What a FLUSH reaching the device asleep does (default: answered at once).
    #[serde(default)]
    pub flush_asleep: FlushAsleep,
    #[serde(rename = "state")]
    pub states: Vec<StateDef>,
    #[serde(rename = "transition", default)]
    pub transitions: Vec<TransitionDef>,
}

/// What a FLUSH does when it reaches a device in a state that cannot serve I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushAsleep {
    /// Completes at once, the device left asleep: a drive writes its cache before it spins
    /// down, so a sleeping one holds nothing a FLUSH must write (Hitachi Travelstar 5K320
    /// OEM spec §14.42, Standby Immediate: "the device confirms the completion of the cached
    /// write commands. Then the device is spun down"; Seagate ATA interface manual: a drive
    /// "shifts to the power management mode that uses the minimum amount of power required
    /// to complete that command").
    #[default]
    Answer,
    /// Wakes the device like any other request (a drive that spins up for FLUSH CACHE).
    Wake,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PowerState {
    pub name: String,
    pub watts: f64,
    pub spinning: bool,
    /// Can serve I/O without a transition (the idle, active and seek states).
    pub ready: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub name: String,
    pub from: PowerStateId,
    pub to: PowerStateId,
    pub latency: Nanos,
    pub energy_j: f64,
    /// A start/stop cycle (non-spinning → spinning).
    pub spin_up: bool,
}

impl Transition {
    /// Mean power over the transition, used to integrate partial transitions.
    pub fn watts(&self) -> f64 {
        if self.latency == 0 {
            0.0
        } else {
            self.energy_j / ns_to_secs(self.latency)
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PowerSpec {
    pub states: Vec<PowerState>,
    pub transitions: Vec<Transition>,
    pub idle: PowerStateId,
    pub active: PowerStateId,
    pub seek: Option<PowerStateId>,
    pub rated_start_stop: Option<u64>,
    pub flush_asleep: FlushAsleep,
    /// `table[from * n + to]` = index into `transitions`.
    table: Vec<Option<u16>>,
}

impl PowerSpec {
    /// Resolve and check a spec. Errors name the offending key (relative to `[power]`).
    pub fn from_def(def: &PowerDef) -> Result<PowerSpec, String> {
        let n = def.states.len();
        if n == 0 {
            return Err("power.state: at least one state is required".into());
        }
        if n > u8::MAX as usize {
            return Err(format!("power.state: at most 255 states, got {n}"));
        }
        let mut states = Vec::with_capacity(n);
        for (i, s) in def.states.iter().enumerate() {
            if !(s.watts.is_finite() && (0.0..=1e6).contains(&s.watts)) {
                return Err(format!(
                    "power.state[{i}].watts: expected a number in [0, 1e6], got {}",
                    s.watts
                ));
            }
            if def.states[..i].iter().any(|o| o.name == s.name) {
                return Err(format!(
                    "power.state[{i}].name: duplicate state `{}`",
                    s.name
                ));
            }
            states.push(PowerState {
                name: s.name.clone(),
                watts: s.watts,
                spinning: s.spinning,
                ready: false,
            });
        }
        let find = |key: &str, name: &str| -> Result<PowerStateId, String> {
            def.states
                .iter()
                .position(|s| s.name == name)
                .map(|p| p as PowerStateId)
                .ok_or_else(|| {
                    let names: Vec<&str> = def.states.iter().map(|s| s.name.as_str()).collect();
                    format!(
                        "{key}: unknown state `{name}` (expected one of: {})",
                        names.join(", ")
                    )
                })
        };
        let idle = find("power.idle", &def.idle)?;
        let active = find("power.active", &def.active)?;
        let seek = match &def.seek {
            Some(s) => Some(find("power.seek", s)?),
            None => None,
        };
        states[idle as usize].ready = true;
        states[active as usize].ready = true;
        if let Some(s) = seek {
            states[s as usize].ready = true;
        }
        let mut table = vec![None; n * n];
        let mut transitions = Vec::with_capacity(def.transitions.len());
        for (i, t) in def.transitions.iter().enumerate() {
            let from = find(&format!("power.transition[{i}].from"), &t.from)?;
            let to = find(&format!("power.transition[{i}].to"), &t.to)?;
            if from == to {
                return Err(format!(
                    "power.transition[{i}]: from and to are both `{}`",
                    t.from
                ));
            }
            // Bounded so nanosecond sums cannot overflow (1e6 s is eleven days).
            if !(t.latency_s.is_finite() && (0.0..=1e6).contains(&t.latency_s)) {
                return Err(format!(
                    "power.transition[{i}].latency_s: expected a number in [0, 1e6], got {}",
                    t.latency_s
                ));
            }
            if !(t.energy_j.is_finite() && (0.0..=1e9).contains(&t.energy_j)) {
                return Err(format!(
                    "power.transition[{i}].energy_j: expected a number in [0, 1e9], got {}",
                    t.energy_j
                ));
            }
            let slot = &mut table[from as usize * n + to as usize];
            if slot.is_some() {
                return Err(format!(
                    "power.transition[{i}]: a transition {} -> {} is already defined",
                    t.from, t.to
                ));
            }
            *slot = Some(i as u16);
            let name = t
                .name
                .clone()
                .unwrap_or_else(|| format!("{}->{}", t.from, t.to));
            if states.iter().any(|s| s.name == name)
                || transitions.iter().any(|o: &Transition| o.name == name)
            {
                return Err(format!(
                    "power.transition[{i}].name: `{name}` is already used"
                ));
            }
            transitions.push(Transition {
                name,
                from,
                to,
                latency: secs_to_ns(t.latency_s),
                energy_j: t.energy_j,
                spin_up: !def.states[from as usize].spinning && def.states[to as usize].spinning,
            });
        }
        let spec = PowerSpec {
            states,
            transitions,
            idle,
            active,
            seek,
            rated_start_stop: def.rated_start_stop,
            flush_asleep: def.flush_asleep,
            table,
        };
        // Every non-ready state must be able to wake, or an I/O there would wait forever.
        for (i, s) in spec.states.iter().enumerate() {
            if !s.ready && spec.transition(i as PowerStateId, idle).is_none() {
                return Err(format!(
                    "power.transition: state `{}` has no transition to `{}`, so I/O could never wake the device from it",
                    s.name, def.idle
                ));
            }
        }
        Ok(spec)
    }

    /// A device with one state and no transitions (always on, constant power).
    pub fn constant(watts: f64) -> PowerSpec {
        PowerSpec {
            states: vec![PowerState {
                name: "on".into(),
                watts,
                spinning: false,
                ready: true,
            }],
            transitions: vec![],
            idle: 0,
            active: 0,
            seek: None,
            rated_start_stop: None,
            flush_asleep: FlushAsleep::Answer,
            table: vec![None],
        }
    }

    /// This spec with one more state, [`ABSENT`] at 0 W (not ready, not spinning, no
    /// transitions), for a device absent from the run (`fault.missing`): its ledger then
    /// holds the run's whole duration there. The device's own states and transitions keep
    /// their ids; the new state is last, and being unreachable it is never a sleep state.
    /// A spec that already has a state of that name is returned unchanged.
    pub fn with_absent(&self) -> PowerSpec {
        if self.state_id(ABSENT).is_some() {
            return self.clone();
        }
        let n = self.states.len();
        let mut table = vec![None; (n + 1) * (n + 1)];
        for from in 0..n {
            for to in 0..n {
                table[from * (n + 1) + to] = self.table[from * n + to];
            }
        }
        let mut states = self.states.clone();
        states.push(PowerState {
            name: ABSENT.into(),
            watts: 0.0,
            spinning: false,
            ready: false,
        });
        PowerSpec {
            states,
            table,
            ..self.clone()
        }
    }

    pub fn state_id(&self, name: &str) -> Option<PowerStateId> {
        self.states
            .iter()
            .position(|s| s.name == name)
            .map(|p| p as PowerStateId)
    }

    pub fn transition(&self, from: PowerStateId, to: PowerStateId) -> Option<usize> {
        let n = self.states.len();
        self.table
            .get(from as usize * n + to as usize)
            .copied()
            .flatten()
            .map(|i| i as usize)
    }

    /// Names of ledger slots: states, then transitions.
    pub fn slot_names(&self) -> Vec<String> {
        self.states
            .iter()
            .map(|s| s.name.clone())
            .chain(self.transitions.iter().map(|t| t.name.clone()))
            .collect()
    }

    /// Power of each ledger slot (states, then transitions' mean power).
    pub fn slot_watts(&self) -> Vec<f64> {
        self.states
            .iter()
            .map(|s| s.watts)
            .chain(self.transitions.iter().map(|t| t.watts()))
            .collect()
    }

    /// The sleep states reachable from idle and back, deepest (lowest power) first.
    pub fn sleep_states(&self) -> Vec<PowerStateId> {
        let mut v: Vec<PowerStateId> = (0..self.states.len() as PowerStateId)
            .filter(|&s| {
                s != self.idle
                    && !self.states[s as usize].ready
                    && self.transition(self.idle, s).is_some()
                    && self.transition(s, self.idle).is_some()
            })
            .collect();
        v.sort_by(|a, b| {
            self.states[*a as usize]
                .watts
                .total_cmp(&self.states[*b as usize].watts)
        });
        v
    }

    /// The deepest sleep state, if the device has one.
    pub fn deepest_sleep(&self) -> Option<PowerStateId> {
        self.sleep_states().first().copied()
    }

    /// Break-even time for sleeping in `sleep` rather than idling: the shortest idle gap
    /// for which going idle → sleep → idle costs no more energy than staying idle, and
    /// never shorter than the round trip itself.
    ///
    /// P_idle·T = E_down + E_up + P_sleep·(T − t_down − t_up)
    ///   ⇒ T = (E_down + E_up − P_sleep·(t_down + t_up)) / (P_idle − P_sleep)
    pub fn break_even(&self, sleep: PowerStateId) -> Option<Nanos> {
        let down = &self.transitions[self.transition(self.idle, sleep)?];
        let up = &self.transitions[self.transition(sleep, self.idle)?];
        let p_idle = self.states[self.idle as usize].watts;
        let p_sleep = self.states[sleep as usize].watts;
        let round_trip = down.latency + up.latency;
        if p_idle <= p_sleep {
            return None;
        }
        let t =
            (down.energy_j + up.energy_j - p_sleep * ns_to_secs(round_trip)) / (p_idle - p_sleep);
        Some(secs_to_ns(t).max(round_trip))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn laptop() -> PowerDef {
        toml::from_str(
            r#"
            idle = "idle"
            active = "active"
            seek = "seek"
            [[state]]
            name = "active"
            watts = 2.5
            spinning = true
            [[state]]
            name = "seek"
            watts = 2.5
            spinning = true
            [[state]]
            name = "idle"
            watts = 1.0
            spinning = true
            [[state]]
            name = "standby"
            watts = 0.25
            [[transition]]
            name = "spin_down"
            from = "idle"
            to = "standby"
            latency_s = 1.0
            energy_j = 1.0
            [[transition]]
            name = "spin_up"
            from = "standby"
            to = "idle"
            latency_s = 2.0
            energy_j = 8.0
            "#,
        )
        .unwrap()
    }

    #[test]
    fn break_even_by_hand() {
        let spec = PowerSpec::from_def(&laptop()).unwrap();
        let sb = spec.state_id("standby").unwrap();
        // (1 + 8 − 0.25·3) / (1 − 0.25) = 8.25 / 0.75 = 11 s
        assert_eq!(spec.break_even(sb), Some(11_000_000_000));
        assert_eq!(spec.deepest_sleep(), Some(sb));
        assert!(spec.transitions[1].spin_up);
        assert!(!spec.transitions[0].spin_up);
    }

    #[test]
    fn break_even_never_below_round_trip() {
        let mut def = laptop();
        def.transitions[0].energy_j = 0.0;
        def.transitions[1].energy_j = 0.0;
        let spec = PowerSpec::from_def(&def).unwrap();
        assert_eq!(spec.break_even(3), Some(3_000_000_000));
    }

    #[test]
    fn errors_name_the_key() {
        let mut def = laptop();
        def.transitions[1].to = "idel".into();
        let e = PowerSpec::from_def(&def).unwrap_err();
        assert!(
            e.starts_with("power.transition[1].to: unknown state `idel`"),
            "{e}"
        );
        let mut def = laptop();
        def.transitions.pop();
        let e = PowerSpec::from_def(&def).unwrap_err();
        assert!(e.contains("`standby` has no transition to `idle`"), "{e}");
        let mut def = laptop();
        def.states[2].watts = -1.0;
        let e = PowerSpec::from_def(&def).unwrap_err();
        assert!(e.starts_with("power.state[2].watts"), "{e}");
    }
}
