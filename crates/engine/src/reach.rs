//! What the host may address: the bytes behind each device id a host request can carry.
//!
//! A run counts the I/Os that reach past a device's end as they happen and fails after
//! its outputs are written ([`crate::run`]). That is the last word, whatever the stack
//! does with the addresses. But a generated workload's reach is known before a run — its
//! `devices` and `footprint_bytes` — and `wattio check` reads a trace's every request, so
//! both say so up front: a day-long run does not simulate to the end to report that its
//! footprint never fitted, and `check` does not call a config "ok" that `run` refuses.
//!
//! An array's volume stands in for its members ([`wattio_core::Volume`]): requests to it
//! carry its first member's id and reach its size. Its other members are not checked (a
//! host request to one is the array's business).

use crate::Assembly;
use wattio_core::Request;
use wattio_workload::WorkloadConfig;

/// Per device id: its name and the bytes a host request to it may reach (`None`: not
/// checked here).
pub struct Reach {
    devices: Vec<(String, Option<u64>)>,
}

const TOLERATE: &str = "set [run] tolerate_out_of_range = true to count such requests as errors";

impl Reach {
    pub fn of(asm: &Assembly) -> Reach {
        let mut devices: Vec<(String, Option<u64>)> = asm
            .devices
            .iter()
            .map(|d| (d.info.name.clone(), Some(d.info.capacity)))
            .collect();
        for v in asm.stack.volumes() {
            for &m in &v.members {
                if let Some(d) = devices.get_mut(m as usize) {
                    d.1 = None;
                }
            }
            if let Some(d) = devices.get_mut(v.dev as usize) {
                *d = (v.name.clone(), Some(v.size));
            }
        }
        Reach { devices }
    }

    /// Device `dev`'s name and the bytes a host request may reach on it (`None`: not
    /// checked here), if the run has it.
    pub fn device(&self, dev: u16) -> Option<(&str, Option<u64>)> {
        self.devices
            .get(dev as usize)
            .map(|(name, size)| (name.as_str(), *size))
    }

    fn names(&self) -> String {
        self.devices
            .iter()
            .map(|d| format!("`{}`", d.0))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A generated workload spreads its requests over devices `0..devices`, each within
    /// its first `footprint_bytes`.
    pub fn workload(&self, w: &WorkloadConfig, tolerate: bool) -> Result<(), String> {
        let n = self.devices.len();
        if w.devices as usize > n {
            return Err(format!(
                "workload.devices: expected at most the run's {n} device(s) ({}), got {}",
                self.names(),
                w.devices
            ));
        }
        if tolerate {
            return Ok(());
        }
        for (name, size) in &self.devices[..w.devices as usize] {
            if let Some(size) = *size {
                if w.footprint_bytes > size {
                    return Err(format!(
                        "workload.footprint_bytes: expected at most the {size} bytes of `{name}`, got {}: requests would reach past its end (lower the footprint, choose a larger device, or {TOLERATE})",
                        w.footprint_bytes
                    ));
                }
            }
        }
        Ok(())
    }

    /// Start judging a trace's requests one by one ([`TraceReach::see`]).
    pub fn trace(&self) -> TraceReach<'_> {
        TraceReach {
            reach: self,
            seen: 0,
            past_end: 0,
            first: None,
        }
    }
}

/// A trace's requests judged against a [`Reach`].
pub struct TraceReach<'a> {
    reach: &'a Reach,
    seen: u64,
    past_end: u64,
    /// The first request past its device's end: (1-based index, the request).
    first: Option<(u64, Request)>,
}

impl TraceReach<'_> {
    /// The next request of the trace. A request to a device the run does not have is an
    /// error at once (the run stops at it too).
    pub fn see(&mut self, r: &Request) -> Result<(), String> {
        self.seen += 1;
        let Some((_, size)) = self.reach.devices.get(r.dev as usize) else {
            return Err(format!(
                "trace request {} targets device {}, but the run has {} device(s) ({}): select or map the trace's volumes, or add devices",
                self.seen,
                r.dev,
                self.reach.devices.len(),
                self.reach.names()
            ));
        };
        if size.is_some_and(|s| r.offset.saturating_add(r.len as u64) > s) {
            self.past_end += 1;
            if self.first.is_none() {
                self.first = Some((self.seen, *r));
            }
        }
        Ok(())
    }

    /// Every request seen: an error if any reached past its device's end (unless
    /// tolerated).
    pub fn verdict(&self, tolerate: bool) -> Result<(), String> {
        match (&self.first, tolerate) {
            (Some((i, r)), false) => {
                let (name, size) = &self.reach.devices[r.dev as usize];
                Err(format!(
                    "trace: {} of {} requests reach past the end of their device; the first, request {i}, addresses bytes {}..{} of `{name}`, which holds {} bytes (map the trace's volumes or offsets onto the devices, choose larger devices, or {TOLERATE})",
                    self.past_end,
                    self.seen,
                    r.offset,
                    r.offset.saturating_add(r.len as u64),
                    size.unwrap_or(0)
                ))
            }
            _ => Ok(()),
        }
    }
}
