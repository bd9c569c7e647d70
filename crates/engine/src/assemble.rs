//! From a run config to the objects an executor drives: the devices (timing model + power
//! runtime) and the stack of functions. Shared by the simulated and the live executor.

use crate::config::{FunctionConfig, RunConfig, SpinDownConfig, SpinDownPolicy};
use std::sync::Arc;
use wattio_core::device::{DeviceInfo, DeviceRuntime};
use wattio_core::function::Function;
use wattio_core::time::{secs_to_ns, Nanos};
use wattio_core::trace::TraceSource;
use wattio_core::Stack;
use wattio_devices::{Catalogue, DeviceSpec};
use wattio_functions::spindown::{
    Adaptive, AdaptiveParams, Fixed, IdleTimeout, Oracle, Share, ShareParams,
};

/// Opens a fresh reader over the run's requests (the run itself, and any lookahead).
pub type Opener = Arc<dyn Fn() -> Result<Box<dyn TraceSource>, String> + Send + Sync>;

/// Builds a function the engine does not know itself (Python functions), given its position
/// in the stack and its config.
pub type External<'a> =
    &'a mut dyn FnMut(usize, &FunctionConfig) -> Result<Box<dyn Function>, String>;

pub struct Assembly {
    pub stack: Stack,
    pub devices: Vec<DeviceRuntime>,
    /// Catalogue entry (or `inline`) per device, for the summary.
    pub models: Vec<String>,
}

/// The device specs of a config, expanded (`count`) and resolved against the catalogue.
pub fn device_specs(
    cfg: &RunConfig,
    cat: &Catalogue,
) -> Result<Vec<(String, DeviceSpec, Option<String>)>, String> {
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
        match d.count {
            None => out.push((d.name.clone(), spec, d.initial_state.clone())),
            Some(n) => {
                for k in 0..n {
                    out.push((
                        format!("{}{k}", d.name),
                        spec.clone(),
                        d.initial_state.clone(),
                    ));
                }
            }
        }
    }
    for (i, (n, _, _)) in out.iter().enumerate() {
        if out[..i].iter().any(|(o, _, _)| o == n) {
            return Err(format!("device: two devices are named `{n}`"));
        }
    }
    if out.len() > u16::MAX as usize {
        return Err("device: too many devices".into());
    }
    Ok(out)
}

pub fn assemble(
    cfg: &RunConfig,
    cat: &Catalogue,
    opener: &Opener,
    external: External<'_>,
    start: Nanos,
) -> Result<Assembly, String> {
    let specs = device_specs(cfg, cat)?;
    let mut devices = Vec::with_capacity(specs.len());
    let mut infos = Vec::with_capacity(specs.len());
    let mut models = Vec::with_capacity(specs.len());
    for (id, (name, spec, initial)) in specs.into_iter().enumerate() {
        let power = Arc::new(
            spec.power_spec()
                .map_err(|e| format!("device `{name}`: {e}"))?,
        );
        let timing = spec
            .build_timing()
            .map_err(|e| format!("device `{name}`: {e}"))?;
        let initial =
            match initial {
                None => None,
                Some(s) => Some(power.state_id(&s).ok_or_else(|| {
                    format!("device `{name}`.initial_state: unknown state `{s}`")
                })?),
            };
        let info = DeviceInfo {
            id: id as u16,
            name,
            capacity: timing.capacity(),
            power,
        };
        infos.push(info.clone());
        models.push(spec.name.clone());
        devices.push(DeviceRuntime::new(info, timing, initial, start));
    }
    let mut layers: Vec<Box<dyn Function>> = Vec::new();
    for (i, f) in cfg.functions.iter().enumerate() {
        let layer = match f {
            FunctionConfig::Spindown(s) => spindown(s, opener)?,
            FunctionConfig::Python(_) => external(i, f)?,
        };
        layers.push(layer);
    }
    let mut stack = Stack::new(layers);
    stack.attach(&infos)?;
    Ok(Assembly {
        stack,
        devices,
        models,
    })
}

fn spindown(s: &SpinDownConfig, opener: &Opener) -> Result<Box<dyn Function>, String> {
    let devs = s.devices.clone();
    let sleep = s.sleep_state.clone();
    let timeout = s.timeout_s.map(secs_to_ns);
    Ok(match s.policy {
        SpinDownPolicy::Never => {
            Box::new(IdleTimeout::new("always-on", devs, sleep, || Fixed(None)))
        }
        SpinDownPolicy::Fixed => {
            let name = format!("fixed-{}s", s.timeout_s.unwrap_or(0.0));
            Box::new(IdleTimeout::new(name, devs, sleep, move || Fixed(timeout)))
        }
        SpinDownPolicy::Adaptive => {
            let d = AdaptiveParams::default();
            let p = AdaptiveParams {
                initial: timeout.unwrap_or(d.initial),
                min: s.min_timeout_s.map(secs_to_ns).unwrap_or(d.min),
                max: s.max_timeout_s.map(secs_to_ns).unwrap_or(d.max),
                increase: s.increase.unwrap_or(d.increase),
                decrease: s.decrease_s.map(secs_to_ns).unwrap_or(d.decrease),
            };
            Box::new(IdleTimeout::new("adaptive", devs, sleep, move || {
                Adaptive::new(p.clone())
            }))
        }
        SpinDownPolicy::Share => {
            let d = ShareParams::default();
            let p = ShareParams {
                experts: s.experts.unwrap_or(d.experts),
                max_multiple: s.max_multiple.unwrap_or(d.max_multiple),
                learning_rate: s.learning_rate.unwrap_or(d.learning_rate),
                share_rate: s.share_rate.unwrap_or(d.share_rate),
            };
            Box::new(IdleTimeout::new("share", devs, sleep, move || {
                Share::new(p.clone())
            }))
        }
        SpinDownPolicy::Oracle => {
            let o = opener.clone();
            Box::new(Oracle::new(devs, sleep, Box::new(move || o())))
        }
    })
}
