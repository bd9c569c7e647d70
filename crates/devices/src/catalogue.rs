//! The device catalogue: TOML files, one device each, embedded at build time; users may add
//! their own files or inline specs in a run config.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use wattio_core::device::Timing;
use wattio_core::power::{PowerDef, PowerSpec};

include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));

/// One device as the catalogue (or an inline config table) describes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    /// Catalogue name (file stem).
    #[serde(default)]
    pub name: String,
    /// Human description: maker, model, interface.
    #[serde(default)]
    pub description: String,
    /// hdd, ssd or flash.
    pub kind: String,
    /// Bibliography of the entry (datasheets, paper tables); per-value sources sit next to
    /// the values.
    #[serde(default)]
    pub references: Vec<String>,
    /// Model-specific timing parameters; `model` selects the model.
    pub timing: toml::Table,
    pub power: PowerDef,
}

impl DeviceSpec {
    /// Parse a catalogue file's text. `origin` names the file in errors.
    pub fn from_toml(origin: &str, text: &str) -> Result<DeviceSpec, String> {
        toml::from_str::<DeviceSpec>(text).map_err(|e| format!("{origin}: {e}"))
    }

    pub fn model(&self) -> &str {
        self.timing
            .get("model")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }

    pub fn power_spec(&self) -> Result<PowerSpec, String> {
        PowerSpec::from_def(&self.power).map_err(|e| format!("device `{}`: {e}", self.name))
    }

    /// Build the timing model this spec describes.
    pub fn build_timing(&self) -> Result<Box<dyn Timing>, String> {
        let r = match self.model() {
            "hdd-parametric" => hdd_timing(&self.timing),
            "hdd-mechanical" => crate::mechanical::timing_from_toml(&self.timing),
            "flash" => crate::flash::timing_from_toml(&self.timing),
            "ssd" => crate::ssd::timing_from_toml(&self.timing),
            "" => Err("timing.model: missing (expected hdd-parametric, hdd-mechanical, flash or ssd)".to_string()),
            other => Err(format!(
                "timing.model: unknown model `{other}` (expected hdd-parametric, hdd-mechanical, flash or ssd)"
            )),
        };
        r.map_err(|e| format!("device `{}`: {e}", self.name))
    }
}

fn hdd_timing(t: &toml::Table) -> Result<Box<dyn Timing>, String> {
    Ok(Box::new(crate::hdd::ParametricHdd::from_toml(t)?))
}

/// Named device specs: the embedded catalogue plus any directories the user adds.
#[derive(Clone, Debug, Default)]
pub struct Catalogue {
    specs: BTreeMap<String, DeviceSpec>,
}

impl Catalogue {
    /// The catalogue shipped with wattio.
    pub fn embedded() -> Result<Catalogue, String> {
        let mut c = Catalogue::default();
        for (name, text) in EMBEDDED {
            let mut spec = DeviceSpec::from_toml(&format!("catalogue/{name}.toml"), text)?;
            spec.name = name.to_string();
            c.specs.insert(name.to_string(), spec);
        }
        Ok(c)
    }

    /// Add every `*.toml` in `dir` (later entries replace earlier ones of the same name).
    pub fn add_dir(&mut self, dir: &Path) -> Result<(), String> {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut paths: Vec<_> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mut spec = DeviceSpec::from_toml(&p.display().to_string(), &text)?;
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default();
            spec.name = stem.clone();
            self.specs.insert(stem, spec);
        }
        Ok(())
    }

    pub fn insert(&mut self, spec: DeviceSpec) {
        self.specs.insert(spec.name.clone(), spec);
    }

    pub fn get(&self, name: &str) -> Result<&DeviceSpec, String> {
        self.specs.get(name).ok_or_else(|| {
            let names: Vec<&str> = self.specs.keys().map(|s| s.as_str()).collect();
            format!(
                "unknown device `{name}` (catalogue has: {})",
                names.join(", ")
            )
        })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(|s| s.as_str())
    }

    pub fn specs(&self) -> impl Iterator<Item = &DeviceSpec> {
        self.specs.values()
    }
}
