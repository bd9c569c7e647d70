//! From a run config to the objects an executor drives: the devices (timing model + power
//! runtime) and the stack of functions. Shared by the simulated and the live executor.

use crate::config::RunConfig;
use std::sync::Arc;
use wattio_core::device::{DeviceInfo, DeviceRuntime};
use wattio_core::function::Function;
use wattio_core::time::Nanos;
use wattio_core::Stack;
use wattio_devices::fault::{Faults, Faulty};
use wattio_devices::queue_order::{LbnOrder, QueueOrdered};
use wattio_devices::{Catalogue, DeviceSpec};
use wattio_functions::registry::Registry;

/// Opens a fresh reader over the run's requests (the run itself, and any lookahead).
pub type Opener = wattio_functions::registry::TraceOpener;

/// One device of a run, its `count` expanded.
pub struct DeviceEntry {
    pub name: String,
    pub spec: DeviceSpec,
    pub initial_state: Option<String>,
    pub fault: Option<Faults>,
    pub queue: Option<String>,
}

pub struct Assembly {
    pub stack: Stack,
    pub devices: Vec<DeviceRuntime>,
    /// Catalogue entry (or `inline`) per device, for the summary.
    pub models: Vec<String>,
}

/// The device specs of a config, expanded (`count`) and resolved against the catalogue.
pub fn device_specs(cfg: &RunConfig, cat: &Catalogue) -> Result<Vec<DeviceEntry>, String> {
    let mut out = Vec::new();
    for (i, d) in cfg.devices.iter().enumerate() {
        let spec = match (&d.model, &d.spec) {
            (Some(m), _) => cat
                .get(m)
                .map_err(|e| format!("device[{i}].model: {e}"))?
                .clone(),
            (None, Some(s)) => {
                let mut s = s.clone();
                if s.name.is_empty() {
                    s.name = "inline".into();
                }
                s
            }
            (None, None) => return Err(format!("device[{i}]: missing `model`")),
        };
        let entry = |name| DeviceEntry {
            name,
            spec: spec.clone(),
            initial_state: d.initial_state.clone(),
            fault: d.fault.clone(),
            queue: d.queue.clone(),
        };
        match d.count {
            None => out.push(entry(d.name.clone())),
            Some(n) => out.extend((0..n).map(|k| entry(format!("{}{k}", d.name)))),
        }
    }
    for (i, e) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.name == e.name) {
            return Err(format!("device: two devices are named `{}`", e.name));
        }
    }
    if out.len() > u16::MAX as usize {
        return Err("device: too many devices".into());
    }
    Ok(out)
}

/// The functions' nonce at a simulated restart at `start` (after a crash): a start is a new
/// session, and as live sessions do, it must draw identities of its own — a copy of a RAID's
/// log formatted at the restart must not carry the id the first start drew (the swarm's
/// operator scenario, seed 94: a member's blank copy formatted at a restart with the
/// array's own id, the record failing the member lost in the next crash, and the member
/// assembled again, blank) — yet the run stays a pure function of (config, trace, seed).
fn restart_nonce(seed: u64, start: Nanos) -> u64 {
    // SplitMix64's finalizer over the seed and the restart's time.
    let mut z = seed ^ start.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub fn assemble(
    cfg: &RunConfig,
    cat: &Catalogue,
    lookahead: Option<&Opener>,
    registry: &mut Registry<'_>,
    start: Nanos,
) -> Result<Assembly, String> {
    let specs = device_specs(cfg, cat)?;
    let mut devices = Vec::with_capacity(specs.len());
    let mut infos = Vec::with_capacity(specs.len());
    let mut models = Vec::with_capacity(specs.len());
    for (id, e) in specs.into_iter().enumerate() {
        let DeviceEntry {
            name,
            spec,
            initial_state: initial,
            fault,
            queue,
        } = e;
        let missing = fault.as_ref().is_some_and(|f| f.missing);
        let mut power = spec
            .power_spec()
            .map_err(|e| format!("device `{name}`: {e}"))?;
        if missing && initial.is_some() {
            return Err(format!(
                "device `{name}`: `initial_state` and `fault.missing` together: an absent device has no state of its own"
            ));
        }
        if missing {
            // Absent for the whole run (pulled, or dead): its ledger's one state is
            // `absent` at 0 W; the functions above see its own states beside it.
            power = power.with_absent();
        }
        let power = Arc::new(power);
        let mut timing = spec
            .build_timing()
            .map_err(|e| format!("device `{name}`: {e}"))?;
        match queue.as_deref() {
            None | Some("fcfs") => {}
            Some(q) => {
                let order = LbnOrder::parse(q).ok_or_else(|| {
                    format!(
                        "device `{name}`.queue: unknown `{q}` (expected fcfs, look, clook or sstf-lbn)"
                    )
                })?;
                if timing.schedules() {
                    return Err(format!(
                        "device `{name}`.queue: its model orders its own queue (timing.scheduler); set one of the two"
                    ));
                }
                timing = Box::new(QueueOrdered::new(timing, order));
            }
        }
        if let Some(f) = &fault {
            timing = Box::new(Faulty::new(timing, f).map_err(|e| format!("device `{name}`: {e}"))?);
        }
        let initial =
            match initial {
                None => None,
                Some(s) => Some(power.state_id(&s).ok_or_else(|| {
                    format!("device `{name}`.initial_state: unknown state `{s}`")
                })?),
            };
        let info = DeviceInfo {
            geometry: timing.geometry(),
            ..DeviceInfo::new(id as u16, name, timing.capacity(), power)
        };
        infos.push(info.clone());
        models.push(spec.name.clone());
        devices.push(if missing {
            DeviceRuntime::absent(info, timing, start)
        } else {
            DeviceRuntime::new(info, timing, initial, start)
        });
    }
    let mut layers: Vec<Box<dyn Function>> = Vec::with_capacity(cfg.functions.len());
    for (i, table) in cfg.functions.iter().enumerate() {
        let key = format!("function[{i}]");
        let mut ctx = cfg.function_context(&key, lookahead);
        if cfg.nonce.is_none() && start > 0 {
            ctx.nonce = restart_nonce(cfg.run.seed, start);
        }
        layers.push(registry.build(table, i, &ctx)?);
    }
    let mut stack = Stack::new(layers);
    stack.attach(&infos)?;
    Ok(Assembly {
        stack,
        devices,
        models,
    })
}
