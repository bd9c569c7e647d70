//! Building a live session from command-line choices: component images, optional device
//! emulation from a catalogue entry, optional spin-down layer. (A run config goes through
//! the engine's builder instead, which yields the same `(Stack, Vec<DeviceRuntime>)`.)

use crate::backend::{Backend, ComponentSpec};
use crate::capture::{CaptureSink, TextCapture};
use crate::proto::ExportInfo;
use crate::session::{DeviceSetup, ExportSpec, Session, SessionOptions};
use std::path::PathBuf;
use std::sync::Arc;
use wattio_core::time::secs_to_ns;
use wattio_core::{DeviceInfo, DeviceRuntime, Function, PowerSpec, Stack};
use wattio_devices::catalogue::{Catalogue, DeviceSpec};
use wattio_functions::spindown::{Fixed, IdleTimeout};

#[derive(Clone, Debug, Default)]
pub struct ServeSpec {
    pub images: Vec<PathBuf>,
    /// Export names, one per image (default: the file name; the first export is also the
    /// default export for clients that ask for the empty name).
    pub names: Vec<String>,
    pub direct: bool,
    pub read_only: bool,
    /// Emulate every component device with this model: a catalogue name or a TOML file.
    pub model: Option<PathBuf>,
    /// With a model: enforce its latency and account its power (true), or only describe
    /// the device to the functions (false: measures a stack's own overhead).
    pub emulate: bool,
    /// Put a fixed-timeout spin-down layer in the stack (seconds of idleness).
    pub spindown_s: Option<f64>,
    pub capture: Option<PathBuf>,
    pub workers: usize,
}

pub fn load_model(m: &PathBuf) -> Result<DeviceSpec, String> {
    if m.extension().is_some_and(|e| e == "toml") || m.exists() {
        let text = std::fs::read_to_string(m).map_err(|e| format!("{}: {e}", m.display()))?;
        let mut spec = DeviceSpec::from_toml(&m.display().to_string(), &text)?;
        if spec.name.is_empty() {
            spec.name = m
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        Ok(spec)
    } else {
        let cat = Catalogue::embedded()?;
        cat.get(&m.display().to_string()).cloned()
    }
}

pub fn build(spec: &ServeSpec) -> Result<Session, String> {
    if spec.images.is_empty() {
        return Err("at least one --image FILE is required".into());
    }
    if !spec.names.is_empty() && spec.names.len() != spec.images.len() {
        return Err(format!(
            "{} --name for {} --image: give one name per image or none",
            spec.names.len(),
            spec.images.len()
        ));
    }
    let model = spec.model.as_ref().map(load_model).transpose()?;
    let mut devices = Vec::new();
    let mut infos = Vec::new();
    let mut exports = Vec::new();
    for (i, path) in spec.images.iter().enumerate() {
        let mut c = ComponentSpec::file(path);
        c.direct = spec.direct;
        c.read_only = spec.read_only;
        if let Some(n) = spec.names.get(i) {
            c.name = n.clone();
        }
        let backend = Backend::open(&c)?;
        let power = match &model {
            Some(m) => Arc::new(m.power_spec()?),
            None => Arc::new(PowerSpec::constant(0.0)),
        };
        let info = DeviceInfo {
            id: i as u16,
            name: c.name.clone(),
            capacity: backend.size(),
            power,
        };
        let runtime = match &model {
            Some(m) if spec.emulate => {
                Some(DeviceRuntime::new(info.clone(), m.build_timing()?, None, 0))
            }
            _ => None,
        };
        let mut e = ExportInfo::new(c.name.clone(), backend.size());
        e.read_only = spec.read_only;
        e.rotational = model.as_ref().is_some_and(|m| m.kind == "hdd");
        if spec.direct {
            // O_DIRECT needs sector-aligned requests: advertise it, refuse the rest.
            e.min_block = 512;
        }
        exports.push(ExportSpec {
            info: e,
            host_dev: i as u16,
        });
        infos.push(info);
        devices.push(DeviceSetup { backend, runtime });
    }
    let mut layers: Vec<Box<dyn Function>> = Vec::new();
    if let Some(s) = spec.spindown_s {
        if !(s.is_finite() && s >= 0.0) {
            return Err(format!(
                "--spindown {s}: expected a non-negative number of seconds"
            ));
        }
        let t = secs_to_ns(s);
        layers.push(Box::new(IdleTimeout::new(
            "spindown",
            vec![],
            None,
            move || Fixed(Some(t)),
        )));
    }
    let mut stack = Stack::new(layers);
    stack.attach(&infos)?;
    let capture: Option<Box<dyn CaptureSink>> = match &spec.capture {
        Some(p) => Some(Box::new(TextCapture::create(p)?)),
        None => None,
    };
    Session::start(
        stack,
        devices,
        exports,
        SessionOptions {
            workers: if spec.workers == 0 { 4 } else { spec.workers },
            capture,
        },
    )
}
