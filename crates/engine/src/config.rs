//! The run config (TOML). Deserialization errors come from `toml` with the line and column,
//! prefixed with the full key path (`serde_path_to_error`); semantic checks here name the
//! key path too (`function[1].timeout_s: …`).

use serde::Deserialize;
use wattio_devices::fault::Faults;
use wattio_devices::DeviceSpec;
use wattio_functions::registry::{BuildContext, Registry, TraceOpener};
use wattio_workload::WorkloadConfig;

/// The most devices one run may have.
pub const MAX_DEVICES: u64 = 4096;

fn d_seed() -> u64 {
    1
}
fn d_true() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    #[serde(default)]
    pub name: Option<String>,
    /// Seed of every random choice in the run (generators, randomized functions).
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// End of the run in seconds; default: the workload's duration, or the last completion
    /// of a trace.
    #[serde(default)]
    pub until_s: Option<f64>,
    /// Count requests that address bytes past the end of a device as errors and finish
    /// the run normally; by default such a run fails (after writing its outputs), since a
    /// trace that does not fit the devices usually means a wrong device or volume mapping.
    #[serde(default)]
    pub tolerate_out_of_range: bool,
    /// End with a clean unload: at the run's end (the host's last reply, or the workload's
    /// duration) every layer's `on_stop` runs, top down (a write-back cache writes its dirty
    /// pages back), and the run lasts until the layers' own I/O is done; its time and
    /// energy are added. Off by default, as the papers measure the trace alone.
    #[serde(default)]
    pub unload: bool,
    /// Check the data (docs/integrity.md): every host read must return, block by block,
    /// the latest acknowledged write (or one in flight with it); the first that does not
    /// stops the run with what it returned instead. Versions stand for bytes, so it costs
    /// memory per block written and time per I/O; off by default.
    #[serde(default)]
    pub check_data: bool,
    /// The checker's block in bytes (a power of two ≥ 512): a read's blocks it covers only
    /// partly, and blocks a write covered only partly, are not checked.
    #[serde(default = "d_check_block")]
    pub check_block: u32,
}

fn d_check_block() -> u32 {
    4096
}

/// A config without `[run]` gets what an empty `[run]` gets (until 2026-12-04 a derived
/// `Default` gave it seed 0 where the docs and an empty table say 1).
impl Default for RunSection {
    fn default() -> Self {
        RunSection {
            name: None,
            seed: d_seed(),
            until_s: None,
            tolerate_out_of_range: false,
            unload: false,
            check_data: false,
            check_block: d_check_block(),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    pub name: String,
    /// Catalogue entry name.
    #[serde(default)]
    pub model: Option<String>,
    /// An inline spec instead of a catalogue entry.
    #[serde(default)]
    pub spec: Option<DeviceSpec>,
    /// Replicate this device `count` times, named `name0`, `name1`, ….
    #[serde(default)]
    pub count: Option<u16>,
    /// Power state at time 0 (default: the spec's idle state).
    #[serde(default)]
    pub initial_state: Option<String>,
    /// Injected faults (`[device.fault]`: `eio`, `slow`, `missing`), for robustness tests.
    #[serde(default)]
    pub fault: Option<Faults>,
    /// The order the device's queue is served in (`fcfs`, the default, or one of DiskSim's
    /// block-number orders `look`, `clook`, `sstf-lbn`: the host's elevator in front of
    /// the model), for a model that does not order its own.
    #[serde(default)]
    pub queue: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceConfig {
    pub path: String,
    #[serde(default)]
    pub format: Option<String>,
    /// The generic reader's column mapping (`FIELD=COLUMN[:UNIT],…`, see docs/formats.md);
    /// implies `format = "csv"`.
    #[serde(default)]
    pub columns: Option<String>,
    /// The generic reader's field delimiter (default `,`).
    #[serde(default)]
    pub delimiter: Option<String>,
    /// The generic reader: is the first line a header (default: sniffed)?
    #[serde(default)]
    pub header: Option<bool>,
    /// Keep one device/volume/LUN of the trace (its key: `hm_1`, `8,16`, …) as dev 0.
    #[serde(default)]
    pub device: Option<String>,
    /// Skip bad lines (counted and quoted in the summary) and run empty or implausible
    /// traces with a warning instead of failing.
    #[serde(default)]
    pub lenient: bool,
    /// The records are out of time order: read them all and sort them by arrival
    /// (`wattio_formats::ReadOptions::sort`).
    #[serde(default)]
    pub sort: bool,
    /// The records are out of time order by at most this many: reorder them within a
    /// window of that many (`wattio_formats::ReadOptions::sort_window`).
    #[serde(default)]
    pub sort_window: Option<usize>,
    /// Replay faster (> 1) or slower (< 1): every arrival time divided by this
    /// ([`wattio_core::trace::Rescaled`]), as the papers' "replayed at 64x".
    #[serde(default)]
    pub speedup: Option<f64>,
}

/// The largest `trace.speedup` (and the smallest is its inverse): beyond, arrival times of
/// a day-long trace collapse to nanoseconds or overflow.
pub const MAX_SPEEDUP: f64 = 1e6;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// Write `requests.parquet` (one row per host request).
    #[serde(default = "d_true")]
    pub requests: bool,
    /// Write `timeline.parquet` (power-mode intervals per device).
    #[serde(default = "d_true")]
    pub timeline: bool,
    /// Write `report.html`.
    #[serde(default = "d_true")]
    pub report: bool,
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            requests: true,
            timeline: true,
            report: true,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    #[serde(default)]
    pub run: RunSection,
    #[serde(rename = "device")]
    pub devices: Vec<DeviceConfig>,
    /// The stack, host side first: one `[[function]]` table each, checked and built by the
    /// function registry (`wattio_functions::registry`) from its `kind`.
    #[serde(default, rename = "function")]
    pub functions: Vec<toml::Table>,
    #[serde(default)]
    pub workload: Option<WorkloadConfig>,
    #[serde(default)]
    pub trace: Option<TraceConfig>,
    #[serde(default)]
    pub output: OutputConfig,
    /// Extra catalogue directories (relative to the config file).
    #[serde(default)]
    pub catalogue: Vec<String>,
    /// Where the config came from (its file), named before the key of an error found when
    /// the run is assembled, as [`RunConfig::from_toml`] names it for a parse error.
    #[serde(skip)]
    pub origin: String,
    /// The functions' nonce ([`BuildContext::nonce`]) when not the seed: set live, where
    /// identities written to real devices must differ between sessions.
    #[serde(skip)]
    pub nonce: Option<u64>,
}

impl RunConfig {
    /// Parse and check a config. `origin` names the file in errors, which also name the full
    /// key path (`run.seed: TOML parse error at line 5, column 8 …`).
    pub fn from_toml(origin: &str, text: &str) -> Result<RunConfig, String> {
        let de = toml::Deserializer::parse(text).map_err(|e| format!("{origin}: {e}"))?;
        let cfg: RunConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path.is_empty() || path == "." {
                format!("{origin}: {inner}")
            } else {
                format!("{origin}: {path}: {inner}")
            }
        })?;
        cfg.validate().map_err(|e| format!("{origin}: {e}"))?;
        Ok(RunConfig {
            origin: origin.to_string(),
            ..cfg
        })
    }

    /// `e`, an error about one of this config's keys, with the config's origin before it.
    pub fn located(&self, e: String) -> String {
        if self.origin.is_empty() {
            e
        } else {
            format!("{}: {e}", self.origin)
        }
    }

    /// What the registry needs to check or build the function whose key path is `key`.
    pub fn function_context<'a>(
        &self,
        key: &'a str,
        lookahead: Option<&'a TraceOpener>,
    ) -> BuildContext<'a> {
        BuildContext {
            key,
            seed: self.run.seed,
            nonce: self.nonce.unwrap_or(self.run.seed),
            lookahead,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.devices.is_empty() {
            return Err("device: at least one [[device]] is required".into());
        }
        for (i, d) in self.devices.iter().enumerate() {
            match (&d.model, &d.spec) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(format!(
                        "device[{i}]: give exactly one of `model` (a catalogue name) or `spec` (an inline device)"
                    ))
                }
            }
            if d.count == Some(0) {
                return Err(format!("device[{i}].count: expected at least 1"));
            }
            if let Some(f) = &d.fault {
                f.validate(&format!("device[{i}].fault"))?;
            }
        }
        // Every device carries a timing model (a mechanical layout, an SSD's mapping state)
        // and a ledger: bound how many one config can ask for.
        let total: u64 = self
            .devices
            .iter()
            .map(|d| d.count.map_or(1, u64::from))
            .sum();
        if total > MAX_DEVICES {
            return Err(format!(
                "device: {total} devices in all (with `count`), more than {MAX_DEVICES}"
            ));
        }
        if let Some(u) = self.run.until_s {
            if !(u.is_finite() && u > 0.0) {
                return Err(format!("run.until_s: expected a number > 0, got {u}"));
            }
        }
        let b = self.run.check_block;
        if !(b.is_power_of_two() && (512..=1 << 20).contains(&b)) {
            return Err(format!(
                "run.check_block: expected a power of two from 512 to 1048576 bytes, got {b}"
            ));
        }
        if let Some(w) = &self.workload {
            w.validate()?;
        }
        if let Some(x) = self.trace.as_ref().and_then(|t| t.speedup) {
            if !(x.is_finite() && (1.0 / MAX_SPEEDUP..=MAX_SPEEDUP).contains(&x)) {
                return Err(format!(
                    "trace.speedup: expected a number from {} to {MAX_SPEEDUP:e}, got {x}",
                    1.0 / MAX_SPEEDUP
                ));
            }
        }
        for (i, f) in self.functions.iter().enumerate() {
            Registry::check(f, &self.function_context(&format!("function[{i}]"), None))?;
        }
        Ok(())
    }
}
