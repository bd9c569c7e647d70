//! The offline oracle: the lower bound on energy that any spin-down policy can reach on a
//! given workload. It knows, whenever a device goes idle, when the next request for that
//! device arrives; it spins down at once if the gap exceeds the device's break-even time, and
//! spins the device back up just in time for that request, so it adds no latency.
//!
//! The future comes from a second reader over the same trace for each managed device (a
//! lookahead [`TraceSource`] filtered to that device), so memory stays flat. The oracle must sit directly above the devices with host requests mapping
//! one-to-one onto devices (`io.dev` unchanged), which is how the spin-down comparisons use it.

use super::resolve_devices;
use wattio_core::device::DeviceInfo;
use wattio_core::function::{Actions, Function, TimerId};
use wattio_core::io::{Completion, DeviceId, Io};
use wattio_core::power::PowerStateId;
use wattio_core::time::Nanos;
use wattio_core::trace::TraceSource;

struct Dev {
    device: DeviceId,
    sleep: PowerStateId,
    idle: PowerStateId,
    break_even: Nanos,
    wake_latency: Nanos,
    outstanding: u32,
    /// Arrivals for this device seen by the host so far.
    seen: u64,
    /// This device's lookahead, the arrivals for this device read from it, and the last one.
    lookahead: Option<Box<dyn TraceSource>>,
    ahead: u64,
    next: Option<Nanos>,
    sleeping: bool,
}

/// Opens a fresh reader over the run's trace (called once per managed device).
pub type Lookahead = Box<dyn FnMut() -> Result<Box<dyn TraceSource>, String> + Send>;

pub struct Oracle {
    wanted: Vec<String>,
    sleep_state: Option<String>,
    open: Lookahead,
    devs: Vec<Dev>,
    index: Vec<u16>,
    spin_downs: u64,
    error: Option<String>,
}

impl Oracle {
    /// `open` must yield readers of exactly the requests the host will issue, in order.
    pub fn new(wanted: Vec<String>, sleep_state: Option<String>, open: Lookahead) -> Oracle {
        Oracle {
            wanted,
            sleep_state,
            open,
            devs: Vec::new(),
            index: Vec::new(),
            spin_downs: 0,
            error: None,
        }
    }

    /// Arrival time of the `k`-th request (0-based) for managed device slot `i`.
    fn arrival(&mut self, i: usize, k: u64) -> Option<Nanos> {
        let d = &mut self.devs[i];
        while d.ahead <= k {
            let src = d.lookahead.as_mut()?;
            match src.next_request() {
                Ok(Some(r)) if r.dev == d.device => {
                    d.ahead += 1;
                    d.next = Some(r.arrival);
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    d.lookahead = None;
                    d.next = None;
                    return None;
                }
                Err(e) => {
                    self.error = Some(format!("oracle lookahead: {e}"));
                    d.lookahead = None;
                    d.next = None;
                    return None;
                }
            }
        }
        d.next
    }

    fn slot(&self, dev: u16) -> Option<usize> {
        match self.index.get(dev as usize) {
            Some(&i) if i != u16::MAX => Some(i as usize),
            _ => None,
        }
    }

    /// Device slot `i` went idle at `now`: sleep through the gap if it pays.
    fn idle(&mut self, i: usize, now: Nanos, out: &mut Actions) {
        let k = self.devs[i].seen;
        let next = self.arrival(i, k);
        let d = &mut self.devs[i];
        let gap = match next {
            Some(t) => t.saturating_sub(now),
            None => Nanos::MAX,
        };
        if gap > d.break_even {
            d.sleeping = true;
            self.spin_downs += 1;
            out.set_power(d.device, d.sleep);
            if let Some(t) = next {
                out.set_timer(d.device as TimerId, t - d.wake_latency);
            }
        }
    }

    /// Lookahead failure, if any (reported by the executor after the run).
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

impl Function for Oracle {
    fn name(&self) -> &str {
        "oracle"
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let managed = resolve_devices(devices, &self.wanted, self.sleep_state.as_deref())?;
        self.index = super::build_index(devices, &managed);
        self.devs.clear();
        for &(device, sleep, break_even) in &managed {
            let spec = &devices[device as usize].power;
            let wake = spec
                .transition(sleep, spec.idle)
                .map(|t| spec.transitions[t].latency)
                .unwrap_or(0);
            let lookahead = (self.open)()?;
            self.devs.push(Dev {
                device,
                sleep,
                idle: spec.idle,
                break_even,
                wake_latency: wake,
                outstanding: 0,
                seen: 0,
                lookahead: Some(lookahead),
                ahead: 0,
                next: None,
                sleeping: false,
            });
        }
        Ok(())
    }

    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        for i in 0..self.devs.len() {
            self.idle(i, now, out);
        }
    }

    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        if let Some(i) = self.slot(io.dev) {
            let d = &mut self.devs[i];
            d.seen += 1;
            d.outstanding += 1;
            d.sleeping = false;
        }
        out.submit(io);
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        if let Some(i) = self.slot(done.io.dev) {
            let d = &mut self.devs[i];
            d.outstanding = d.outstanding.saturating_sub(1);
            if d.outstanding == 0 {
                self.idle(i, now, out);
            }
        }
        out.reply(done);
    }

    fn on_timer(&mut self, _now: Nanos, timer: TimerId, out: &mut Actions) {
        if let Some(i) = self.slot(timer as u16) {
            let d = &self.devs[i];
            if d.sleeping && d.outstanding == 0 {
                out.set_power(d.device, d.idle);
            }
        }
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![("spin_down_commands".into(), self.spin_downs as f64)]
    }
}
