//! Disk spin-down.
//!
//! [`IdleTimeout`] is the layer: it passes I/O through untouched, tracks when each managed
//! device becomes idle (no outstanding I/O), arms a timer for the timeout its
//! [`TimeoutPolicy`] chooses, and puts the device to sleep when the timer fires. After each
//! idle period it tells the policy how long the period was, which is all the online policies
//! learn from. [`Oracle`] is the offline lower bound: it knows when the next request comes.

mod config;
mod oracle;
mod policies;

pub use config::{Checked, Policy, SpinDown, KIND, MAX_EXPERTS, MAX_TIMEOUT_S};
pub use oracle::{Lookahead, Oracle};
pub use policies::{Adaptive, AdaptiveParams, Fixed, Share, ShareParams};

use wattio_core::device::DeviceInfo;
use wattio_core::function::{Actions, Function, TimerId};
use wattio_core::io::{Completion, DeviceId, Io};
use wattio_core::power::PowerStateId;
use wattio_core::time::Nanos;

/// Chooses the idle timeout for one device.
pub trait TimeoutPolicy: Send {
    /// Called when the device's break-even time is known (at attach).
    fn set_break_even(&mut self, break_even: Nanos) {
        let _ = break_even;
    }

    /// The timeout to arm now that the device has gone idle; `None` = never spin down.
    fn timeout(&mut self) -> Option<Nanos>;

    /// An idle period of `length` just ended (a request arrived); `timeout` is the one armed
    /// for it, `slept` whether the device was put to sleep during it.
    fn observe(&mut self, length: Nanos, timeout: Option<Nanos>, slept: bool) {
        let _ = (length, timeout, slept);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }
}

struct Managed {
    device: DeviceId,
    sleep: PowerStateId,
    outstanding: u32,
    idle_since: Option<Nanos>,
    armed: Option<Nanos>,
    slept: bool,
}

/// The spin-down layer, generic over its policy (one policy instance per device).
pub struct IdleTimeout<P: TimeoutPolicy> {
    name: String,
    /// Device names to manage; empty = every device with a sleep state.
    wanted: Vec<String>,
    /// Sleep state name; `None` = the deepest sleep state of each device.
    sleep_state: Option<String>,
    make: Box<dyn Fn() -> P + Send>,
    policies: Vec<P>,
    managed: Vec<Managed>,
    /// managed index by device id (u16::MAX = not managed)
    index: Vec<u16>,
    spin_downs: u64,
}

impl<P: TimeoutPolicy> IdleTimeout<P> {
    pub fn new(
        name: impl Into<String>,
        wanted: Vec<String>,
        sleep_state: Option<String>,
        make: impl Fn() -> P + Send + 'static,
    ) -> Self {
        IdleTimeout {
            name: name.into(),
            wanted,
            sleep_state,
            make: Box::new(make),
            policies: Vec::new(),
            managed: Vec::new(),
            index: Vec::new(),
            spin_downs: 0,
        }
    }

    fn slot(&self, dev: u16) -> Option<usize> {
        match self.index.get(dev as usize) {
            Some(&i) if i != u16::MAX => Some(i as usize),
            _ => None,
        }
    }
}

/// Resolve which devices a spin-down layer manages and their sleep states.
pub(crate) fn resolve_devices(
    devices: &[DeviceInfo],
    wanted: &[String],
    sleep_state: Option<&str>,
) -> Result<Vec<(DeviceId, PowerStateId, Nanos)>, String> {
    let mut out = Vec::new();
    for w in wanted {
        if !devices.iter().any(|d| &d.name == w) {
            let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
            return Err(format!(
                "devices: unknown device `{w}` (devices: {})",
                names.join(", ")
            ));
        }
    }
    for d in devices {
        if !wanted.is_empty() && !wanted.contains(&d.name) {
            continue;
        }
        let sleep = match sleep_state {
            Some(s) => match d.power.state_id(s) {
                Some(id) if d.power.sleep_states().contains(&id) => Some(id),
                _ => {
                    return Err(format!(
                        "sleep_state: device `{}` has no sleep state `{s}` reachable from and back to idle",
                        d.name
                    ))
                }
            },
            None => d.power.deepest_sleep(),
        };
        match sleep {
            Some(s) => {
                let be = d.power.break_even(s).unwrap_or(0);
                out.push((d.id, s, be));
            }
            None if !wanted.is_empty() => {
                return Err(format!(
                    "devices: device `{}` has no sleep state to spin down to",
                    d.name
                ))
            }
            None => {}
        }
    }
    Ok(out)
}

fn build_index(devices: &[DeviceInfo], managed: &[(DeviceId, PowerStateId, Nanos)]) -> Vec<u16> {
    let mut index = vec![u16::MAX; devices.len()];
    for (i, (d, _, _)) in managed.iter().enumerate() {
        index[*d as usize] = i as u16;
    }
    index
}

impl<P: TimeoutPolicy> Function for IdleTimeout<P> {
    fn name(&self) -> &str {
        &self.name
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let managed = resolve_devices(devices, &self.wanted, self.sleep_state.as_deref())?;
        self.index = build_index(devices, &managed);
        self.policies.clear();
        self.managed.clear();
        for (device, sleep, be) in managed {
            let mut p = (self.make)();
            p.set_break_even(be);
            self.policies.push(p);
            self.managed.push(Managed {
                device,
                sleep,
                outstanding: 0,
                idle_since: None,
                armed: None,
                slept: false,
            });
        }
        Ok(())
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        for (m, p) in self.managed.iter_mut().zip(&mut self.policies) {
            m.idle_since = Some(now);
            m.armed = p.timeout();
            if let Some(t) = m.armed {
                out.set_timer(m.device as TimerId, now.saturating_add(t));
            }
        }
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        if let Some(i) = self.slot(io.dev) {
            let m = &mut self.managed[i];
            if let Some(since) = m.idle_since.take() {
                self.policies[i].observe(now - since, m.armed, m.slept);
                if m.armed.is_some() && !m.slept {
                    out.cancel_timer(m.device as TimerId);
                }
                m.armed = None;
                m.slept = false;
            }
            m.outstanding += 1;
        }
        out.submit(io);
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        if let Some(i) = self.slot(done.io.dev) {
            let m = &mut self.managed[i];
            m.outstanding = m.outstanding.saturating_sub(1);
            if m.outstanding == 0 {
                m.idle_since = Some(now);
                m.armed = self.policies[i].timeout();
                if let Some(t) = m.armed {
                    out.set_timer(m.device as TimerId, now.saturating_add(t));
                }
            }
        }
        out.reply(done);
    }

    fn on_timer(&mut self, _now: Nanos, timer: TimerId, out: &mut Actions) {
        if let Some(i) = self.slot(timer as u16) {
            let m = &mut self.managed[i];
            if m.outstanding == 0 && !m.slept {
                m.slept = true;
                self.spin_downs += 1;
                out.set_power(m.device, m.sleep);
            }
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let mut c = vec![("spin_down_commands".to_string(), self.spin_downs as f64)];
        for p in &self.policies {
            c.extend(p.counters());
        }
        c
    }
}

#[cfg(test)]
mod tests;
