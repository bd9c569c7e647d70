//! From a run config to the objects an executor drives: the devices (timing model + power
//! runtime) and the stack of functions. Shared by the simulated and the live executor.

use crate::config::RunConfig;
use std::sync::Arc;
use wattio_core::device::{DeviceInfo, DeviceRuntime};
use wattio_core::function::Function;
use wattio_core::time::Nanos;
use wattio_core::Stack;
use wattio_devices::{Catalogue, DeviceSpec};
use wattio_functions::registry::Registry;

/// Opens a fresh reader over the run's requests (the run itself, and any lookahead).
pub type Opener = wattio_functions::registry::TraceOpener;

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
    lookahead: Option<&Opener>,
    registry: &mut Registry<'_>,
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
            geometry: timing.geometry(),
            ..DeviceInfo::new(id as u16, name, timing.capacity(), power)
        };
        infos.push(info.clone());
        models.push(spec.name.clone());
        devices.push(DeviceRuntime::new(info, timing, initial, start));
    }
    let mut layers: Vec<Box<dyn Function>> = Vec::with_capacity(cfg.functions.len());
    for (i, table) in cfg.functions.iter().enumerate() {
        let key = format!("function[{i}]");
        layers.push(registry.build(table, i, &cfg.function_context(&key, lookahead))?);
    }
    let mut stack = Stack::new(layers);
    stack.attach(&infos)?;
    Ok(Assembly {
        stack,
        devices,
        models,
    })
}
