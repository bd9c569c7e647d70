//! `summary.json`: the run in numbers. Schema documented in `docs/outputs.md`; nothing in it
//! depends on the wall clock, so the same (config, trace, seed) gives the same bytes.

use crate::sim::SimOutcome;
use serde::Serialize;
use std::collections::BTreeMap;
use wattio_core::device::DeviceCounters;
use wattio_core::time::{ns_to_secs, Nanos};

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DeviceSummary {
    pub model: String,
    pub energy_j: f64,
    pub mean_power_w: f64,
    pub spin_ups: u64,
    pub rated_start_stop: Option<u64>,
    pub residency_s: BTreeMap<String, f64>,
    pub energy_by_state_j: BTreeMap<String, f64>,
    pub entries: BTreeMap<String, u64>,
    pub ios: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub busy_s: f64,
    pub utilization: f64,
    pub power_commands_ignored: u64,
    /// FLUSHes answered while the device slept, without waking it (`power.flush_asleep`).
    pub flushes_answered_asleep: u64,
    /// I/Os that addressed bytes past the end of the device (each also an error).
    pub out_of_range: u64,
    /// The timing model's own counters (e.g. an SSD's write amplification).
    pub model_counters: BTreeMap<String, f64>,
    /// Service time of the I/Os started, by component: `seek`, `rotate`, `transfer`,
    /// `overhead` (seconds).
    pub service_s: BTreeMap<String, f64>,
}

impl DeviceSummary {
    /// A device's I/O counters over a run of `end` ns, with no power model behind them (a
    /// live pass-through device): no energy, no states.
    pub fn io_only(model: String, c: &DeviceCounters, end: Nanos) -> DeviceSummary {
        DeviceSummary {
            model,
            energy_j: 0.0,
            mean_power_w: 0.0,
            spin_ups: 0,
            rated_start_stop: None,
            residency_s: BTreeMap::new(),
            energy_by_state_j: BTreeMap::new(),
            entries: BTreeMap::new(),
            ios: c.ios,
            bytes_read: c.bytes_read,
            bytes_written: c.bytes_written,
            busy_s: ns_to_secs(c.busy_ns),
            utilization: if end > 0 {
                c.busy_ns as f64 / end as f64
            } else {
                0.0
            },
            power_commands_ignored: c.power_commands_ignored,
            flushes_answered_asleep: c.flushes_answered_asleep,
            out_of_range: c.out_of_range,
            model_counters: BTreeMap::new(),
            service_s: [
                ("seek", c.seek_ns),
                ("rotate", c.rotate_ns),
                ("transfer", c.transfer_ns),
                ("overhead", c.overhead_ns),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), ns_to_secs(v)))
            .collect(),
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FunctionSummary {
    pub name: String,
    pub counters: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub wattio_version: String,
    pub name: Option<String>,
    pub seed: u64,
    pub duration_s: f64,
    pub requests: u64,
    pub errors: u64,
    pub mean_latency_ms: f64,
    pub p50_latency_ms: f64,
    pub p99_latency_ms: f64,
    pub max_latency_ms: f64,
    pub mean_power_wait_ms: f64,
    pub energy_j: f64,
    pub devices: BTreeMap<String, DeviceSummary>,
    pub functions: Vec<FunctionSummary>,
    pub trace: Vec<String>,
    /// Problems of the trace a `lenient` run went ahead with (see `plausibility`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The clean unload at the end (`[run] unload = true`), when it finished.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unload: Option<UnloadSummary>,
    /// What the data checker checked (`[run] check_data = true`): the run failed at the
    /// first read that returned a wrong version, so a summary with this passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_check: Option<DataCheckSummary>,
}

/// The data checker's counts ([`wattio_core::integrity::IntegrityCounters`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DataCheckSummary {
    pub block_bytes: u32,
    /// Host reads whose every fully covered block was checked.
    pub reads_checked: u64,
    /// Blocks of host reads found holding a version the host may read.
    pub blocks_checked: u64,
    /// Blocks of host reads not checked: covered only partly by the read, or of undefined
    /// content (a partial or failed write, a discard).
    pub blocks_unverified: u64,
}

impl DataCheckSummary {
    /// What `checker` checked.
    pub fn of(checker: &wattio_core::integrity::Checker) -> DataCheckSummary {
        DataCheckSummary::new(checker.block_size(), checker.counters())
    }

    /// A checker's counts with blocks of `block_bytes` (a live session's, kept at its end).
    pub fn new(block_bytes: u32, c: wattio_core::integrity::IntegrityCounters) -> DataCheckSummary {
        DataCheckSummary {
            block_bytes,
            reads_checked: c.reads_checked,
            blocks_checked: c.blocks_checked,
            blocks_unverified: c.blocks_unverified,
        }
    }
}

/// When the host detached, how long the layers' own I/O of the unload took, and what they
/// could not finish ([`wattio_core::function::Function::unload_left`]; empty when the
/// unload completed: the devices below hold the volume).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UnloadSummary {
    pub started_s: f64,
    pub took_s: f64,
    pub left: Vec<String>,
}

fn ms(ns: Nanos) -> f64 {
    ns as f64 / 1e6
}

impl Summary {
    pub fn build(name: Option<String>, seed: u64, models: &[String], o: &SimOutcome) -> Summary {
        let end = o.end;
        let mut devices = BTreeMap::new();
        let mut total = 0.0;
        for (d, model) in o.devices.iter().zip(models) {
            let rows = d.ledger_rows(end);
            let energy_j = d.energy_j(end);
            total += energy_j;
            let c = d.counters();
            let dur = ns_to_secs(end);
            devices.insert(
                d.info.name.clone(),
                DeviceSummary {
                    model: model.clone(),
                    energy_j,
                    mean_power_w: if dur > 0.0 { energy_j / dur } else { 0.0 },
                    spin_ups: d.ledger().spin_ups(),
                    rated_start_stop: d.spec().rated_start_stop,
                    residency_s: rows
                        .iter()
                        .map(|r| (r.slot.clone(), ns_to_secs(r.residency_ns)))
                        .collect(),
                    energy_by_state_j: rows.iter().map(|r| (r.slot.clone(), r.energy_j)).collect(),
                    entries: rows.iter().map(|r| (r.slot.clone(), r.entries)).collect(),
                    model_counters: d.timing().counters().into_iter().collect(),
                    ..DeviceSummary::io_only(model.clone(), &c, end)
                },
            );
        }
        let functions = o
            .stack
            .layers()
            .iter()
            .map(|f| FunctionSummary {
                name: f.name().to_string(),
                counters: f.counters().into_iter().collect(),
            })
            .collect();
        Summary {
            wattio_version: env!("CARGO_PKG_VERSION").to_string(),
            name,
            seed,
            duration_s: ns_to_secs(end),
            requests: o.requests,
            errors: o.errors,
            mean_latency_ms: o.latency.mean() / 1e6,
            p50_latency_ms: ms(o.latency.quantile(0.5)),
            p99_latency_ms: ms(o.latency.quantile(0.99)),
            max_latency_ms: ms(o.latency.max()),
            mean_power_wait_ms: o.power_wait.mean() / 1e6,
            energy_j: total,
            devices,
            functions,
            trace: o.assumptions.clone(),
            warnings: Vec::new(),
            unload: o.unload.map(|u| UnloadSummary {
                started_s: ns_to_secs(u.started),
                took_s: ns_to_secs(u.done - u.started),
                left: o.stack.unload_left(),
            }),
            data_check: None,
        }
    }
}
