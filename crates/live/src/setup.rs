//! Building a live session from command-line choices: component images, optional device
//! emulation from a catalogue entry, optional spin-down layer. (A run config goes through
//! the engine's builder instead, which yields the same `(Stack, Vec<DeviceRuntime>)`.)

use crate::backend::{Backend, ComponentSpec};
use crate::capture::CaptureSink;
use crate::proto::ExportInfo;
use crate::session::{DeviceSetup, ExportSpec, RunMeta, Session, SessionOptions};
use std::path::PathBuf;
use std::sync::Arc;
use wattio_core::{DeviceInfo, DeviceRuntime, Function, PowerSpec, Stack};
use wattio_devices::catalogue::{Catalogue, DeviceSpec};
use wattio_functions::registry::{BuildContext, Registry};

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
    /// Reader poll before blocking, µs (`None`: the default, 50 µs).
    pub poll_us: Option<u64>,
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
        let timing = model.as_ref().map(|m| m.build_timing()).transpose()?;
        // Functions see the model's geometry whether or not its timing is enforced.
        let info = DeviceInfo {
            geometry: timing.as_ref().and_then(|t| t.geometry()),
            ..DeviceInfo::new(i as u16, c.name.clone(), backend.size(), power)
        };
        let runtime = match timing {
            Some(t) if spec.emulate => Some(DeviceRuntime::new(info.clone(), t, None, 0)),
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
        // The same builder (and checks) as a `[[function]]` table in a run config.
        let mut t = toml::Table::new();
        t.insert("kind".into(), "spindown".into());
        t.insert("policy".into(), "fixed".into());
        t.insert("timeout_s".into(), s.into());
        let ctx = BuildContext {
            key: "--spindown",
            seed: 0,
            nonce: 0,
            lookahead: None,
        };
        layers.push(Registry::new().build(&t, 0, &ctx)?);
    }
    let mut stack = Stack::new(layers);
    stack.attach(&infos)?;
    let capture: Option<Box<dyn CaptureSink>> = match &spec.capture {
        Some(p) => Some(crate::capture::capture_for(p)?),
        None => None,
    };
    Session::start(
        stack,
        devices,
        exports,
        SessionOptions {
            workers: if spec.workers == 0 { 4 } else { spec.workers },
            poll: poll(spec.poll_us),
            capture,
            meta: RunMeta {
                name: None,
                seed: 0,
                models: vec![
                    model
                        .as_ref()
                        .map_or_else(|| "pass-through".to_string(), |m| m.name.clone());
                    spec.images.len()
                ],
            },
            check_data: None,
        },
    )
}

#[cfg(feature = "engine")]
/// A run config served live: the engine assembles the stack and device runtimes exactly as
/// for a simulation; each device is backed by a component image given by name.
pub struct ConfigServe {
    pub config: PathBuf,
    /// `(device name, image path)` for every device of the config.
    pub images: Vec<(String, PathBuf)>,
    pub direct: bool,
    pub capture: Option<PathBuf>,
    pub workers: usize,
    /// Reader poll before blocking, µs (`None`: the default).
    pub poll_us: Option<u64>,
}

fn poll(us: Option<u64>) -> std::time::Duration {
    us.map_or(
        crate::session::DEFAULT_POLL,
        std::time::Duration::from_micros,
    )
}

/// Parse `NAME=PATH` (the `--image` form used with a config).
pub fn parse_named_image(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => Ok((n.to_string(), PathBuf::from(p))),
        _ => Err(format!(
            "--image {s:?}: with a config, give DEVICE=PATH (a [[device]] name and its image)"
        )),
    }
}

#[cfg(feature = "engine")]
pub fn build_from_config(c: &ConfigServe) -> Result<Session, String> {
    build_from_config_with(
        c,
        // `kind = "python"` has no builder here: the registry says it needs the Python
        // front door (`wattio serve`).
        &mut wattio_engine::Registry::new(),
    )
}

/// A value another session is unlikely to draw: the wall clock's nanoseconds, the process
/// id, and a count of the sessions this process made (two in one clock tick still differ).
#[cfg(feature = "engine")]
fn session_nonce() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static MADE: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    t ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// [`build_from_config`] with a builder for the functions the engine does not know itself
/// (`kind = "python"`), as `wattio_engine::run` takes one. The functions run on the
/// executor's threads under its lock: a builder handing out Python objects must make them
/// take the GIL per call, and whoever holds the GIL must not wait for the executor.
#[cfg(feature = "engine")]
pub fn build_from_config_with(
    c: &ConfigServe,
    registry: &mut wattio_engine::Registry<'_>,
) -> Result<Session, String> {
    use wattio_engine::{assemble, catalogue_for, RunConfig};
    let text =
        std::fs::read_to_string(&c.config).map_err(|e| format!("{}: {e}", c.config.display()))?;
    let mut cfg = RunConfig::from_toml(&c.config.display().to_string(), &text)?;
    // Identities a function writes to the images (a RAID's array id) differ per session:
    // two arrays made from one config must not take each other's members.
    cfg.nonce = Some(session_nonce());
    let base = c
        .config
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let cat = catalogue_for(&cfg, &base)?;
    // Live, requests come from the guest: nothing can look ahead at them (no lookahead).
    let asm = assemble(&cfg, &cat, None, registry, 0)?;
    let meta = RunMeta {
        name: cfg.run.name.clone(),
        seed: cfg.run.seed,
        models: asm.models.clone(),
    };
    let mut devices = Vec::new();
    let mut infos = Vec::new();
    for rt in asm.devices {
        let name = rt.info.name.clone();
        let path = c
            .images
            .iter()
            .find(|(n, _)| n == &name)
            .map(|(_, p)| p.clone());
        // An absent device (`fault.missing`) has no image: nothing may be read from or
        // written to one, as no disk stands in its slot.
        let backend = match (rt.is_absent(), path) {
            (true, None) => Backend::absent(&name, rt.info.capacity),
            (true, Some(p)) => {
                return Err(format!(
                "--image {name}={}: device `{name}` is absent (`fault.missing`): give it no image",
                p.display()
            ))
            }
            (false, None) => {
                return Err(format!(
                    "device `{name}` has no image: add --image {name}=PATH"
                ))
            }
            (false, Some(p)) => {
                let mut cs = ComponentSpec::file(&p);
                cs.name = name.clone();
                cs.direct = c.direct;
                Backend::open(&cs)?
            }
        };
        infos.push(DeviceInfo {
            capacity: rt.info.capacity.min(backend.size()),
            ..rt.info.clone()
        });
        devices.push(DeviceSetup {
            backend,
            runtime: Some(rt),
        });
    }
    // Functions lay data out by capacity (an array's regions): an image smaller than its
    // model is what they may use, so the stack is attached again with the images' sizes.
    let mut stack = asm.stack;
    if devices.iter().zip(&infos).any(|(d, i)| {
        d.runtime
            .as_ref()
            .is_some_and(|rt| rt.info.capacity != i.capacity)
    }) {
        stack.attach(&infos)?;
    }
    // An array's volume is exported in place of its members (and first: the default).
    let volumes = stack.volumes();
    let spinning = |dev: u16| {
        devices[dev as usize]
            .runtime
            .as_ref()
            .is_some_and(|rt| rt.spec().states.iter().any(|s| s.spinning))
    };
    let mut exports = Vec::new();
    for v in &volumes {
        let mut e = ExportInfo::new(v.name.clone(), v.size);
        e.rotational = spinning(v.dev);
        if c.direct {
            e.min_block = 512;
        }
        exports.push(ExportSpec {
            info: e,
            host_dev: v.dev,
        });
    }
    for (i, d) in devices.iter().enumerate() {
        if volumes.iter().any(|v| v.members.contains(&(i as u16))) {
            continue;
        }
        let mut e = ExportInfo::new(d.backend.name.clone(), d.backend.size());
        e.rotational = spinning(i as u16);
        if c.direct {
            e.min_block = 512;
        }
        exports.push(ExportSpec {
            info: e,
            host_dev: i as u16,
        });
    }
    for (n, _) in &c.images {
        if !devices.iter().any(|d| &d.backend.name == n) {
            return Err(format!(
                "--image {n}=…: the config has no device named `{n}`"
            ));
        }
    }
    let capture: Option<Box<dyn CaptureSink>> = match &c.capture {
        Some(p) => Some(crate::capture::capture_for(p)?),
        None => None,
    };
    Session::start(
        stack,
        devices,
        exports,
        SessionOptions {
            workers: if c.workers == 0 { 4 } else { c.workers },
            poll: poll(c.poll_us),
            capture,
            meta,
            check_data: cfg.run.check_data.then_some(cfg.run.check_block),
        },
    )
}
