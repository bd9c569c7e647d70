//! The simulated executor.
//!
//! * [`config`] — the run config (TOML).
//! * [`assemble`] — config → devices + stack (shared with the live executor).
//! * [`sim`] — the discrete-event loop.
//! * [`probe`] — the geometry probe against a device model.
//! * [`memory`] — the memory simulator: processes, pages and DRAM ranks under a memory
//!   policy.
//! * [`launch`] — a captured application launch replayed as a closed host (requests wait
//!   for what they waited for in the capture); [`pinning`] — hybrid-disk pinning of a
//!   launch by ILP, with the FCFP and SCF baselines.
//! * [`plausibility`] — the checks a trace must pass to be run (shared by [`run`] and
//!   [`check`]); [`reach`] — what the host may address, checked before a run.
//! * [`summary`], [`tables`] — what a run writes: `summary.json`, `requests.parquet`,
//!   `timeline.parquet`, `energy.parquet`.

pub mod assemble;
pub mod config;
pub mod fuzz;
pub mod launch;
pub mod memory;
pub mod pinning;
pub mod plausibility;
pub mod probe;
pub mod reach;
pub mod sim;
pub mod summary;
pub mod tables;
pub mod validation;

pub use assemble::{assemble, Assembly, Opener};
pub use config::RunConfig;
pub use sim::{Host, HostRequest, NullSink, RunSink, SimOutcome, Simulator, Unload, STALL_LIMIT};
pub use summary::Summary;
pub use wattio_functions::registry::Registry;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use wattio_core::time::{secs_to_ns, Nanos};
use wattio_core::TraceSource;
use wattio_devices::Catalogue;
use wattio_workload::Generator;

/// An opener over the config's generated workload, if it has one.
pub fn workload_opener(cfg: &RunConfig) -> Option<Opener> {
    let w = cfg.workload.clone()?;
    let seed = cfg.run.seed;
    Some(Arc::new(move || {
        Generator::new(&w, seed).map(|g| Box::new(g) as Box<dyn TraceSource>)
    }))
}

/// The catalogue a config sees: the embedded one plus its `catalogue` directories
/// (relative to `base`).
pub fn catalogue_for(cfg: &RunConfig, base: &Path) -> Result<Catalogue, String> {
    let mut cat = Catalogue::embedded()?;
    for d in &cfg.catalogue {
        cat.add_dir(&base.join(d))?;
    }
    Ok(cat)
}

/// Where a run's requests come from: it decides how long the run lasts and what is checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Input {
    /// The config's generated `[workload]`: the run lasts at least its `duration_s`.
    #[default]
    Workload,
    /// A trace (`--trace` or `[trace]`), which replaces any `[workload]`: the run lasts the
    /// trace's span plus the drain of what is outstanding at its end, unless `[run] until_s`
    /// sets the end. A trace with no requests or an implausible span
    /// ([`plausibility`]) fails the run, or with `lenient` becomes a warning in
    /// `summary.json`.
    Trace { lenient: bool },
}

impl Input {
    /// The least end of a run: a workload's duration (its ledgers cover the whole period
    /// even if the last request came earlier); nothing for a trace.
    pub fn min_end(self, cfg: &RunConfig) -> Nanos {
        match self {
            Input::Workload => cfg
                .workload
                .as_ref()
                .map_or(0, |w| secs_to_ns(w.duration_s)),
            Input::Trace { .. } => 0,
        }
    }
}

#[derive(Default)]
pub struct RunOptions<'a> {
    /// Where to write tables and `summary.json` (nothing is written without it).
    pub out_dir: Option<PathBuf>,
    /// Called every [`sim::PROGRESS_EVERY`] requests with (requests, simulated ns).
    pub progress: Option<&'a mut dyn FnMut(u64, Nanos) -> Result<(), String>>,
    pub input: Input,
}

/// What [`check`] found: the run is ready to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckReport {
    pub devices: usize,
    pub functions: usize,
    /// Requests and span (ns) of the trace, when the run replays one.
    pub trace: Option<(u64, Nanos)>,
    pub assumptions: Vec<String>,
    /// Trace problems let through by `lenient`.
    pub warnings: Vec<String>,
}

/// Everything [`run`] validates before it simulates — the catalogue lookups, the devices'
/// power and timing models, every function built and attached (Python classes included,
/// through `registry`), the whole trace read and its plausibility — without simulating.
pub fn check(
    cfg: &RunConfig,
    cat: &Catalogue,
    opener: &Opener,
    registry: &mut Registry<'_>,
    input: Input,
) -> Result<CheckReport, String> {
    let asm = assemble(cfg, cat, Some(opener), registry, 0).map_err(|e| cfg.located(e))?;
    let mut source = opener()?;
    let mut report = CheckReport {
        devices: asm.devices.len(),
        functions: cfg.functions.len(),
        trace: None,
        assumptions: Vec::new(),
        warnings: Vec::new(),
    };
    let reach = reach::Reach::of(&asm);
    let tolerate = cfg.run.tolerate_out_of_range;
    match input {
        Input::Workload => {
            if let Some(w) = &cfg.workload {
                reach.workload(w, tolerate).map_err(|e| cfg.located(e))?;
            }
        }
        Input::Trace { lenient } => {
            let mut watch = plausibility::Watch::new(source.as_mut());
            let mut within = reach.trace();
            let mut buf = Vec::with_capacity(4096);
            loop {
                buf.clear();
                let n = watch.fill(&mut buf, 4096).map_err(|e| e.to_string())?;
                for r in &buf {
                    within.see(r)?;
                }
                if n < 4096 {
                    break;
                }
            }
            report.trace = Some((watch.requests, watch.last.saturating_sub(watch.first)));
            report.assumptions = watch.assumptions();
            report.warnings = trace_verdict(&watch, lenient)?;
            within.verdict(tolerate)?;
        }
    }
    Ok(report)
}

/// The trace's problems: an error naming what the reader assumed, or (lenient) warnings.
fn trace_verdict(watch: &plausibility::Watch<'_>, lenient: bool) -> Result<Vec<String>, String> {
    let problems = watch.problems();
    if problems.is_empty() || lenient {
        return Ok(problems);
    }
    Err(plausibility::refusal(&problems, &watch.assumptions()))
}

struct OutputSink<'a> {
    requests: Option<tables::RequestsTable>,
    timeline: Option<tables::TimelineTable>,
    progress: Option<&'a mut dyn FnMut(u64, Nanos) -> Result<(), String>>,
}

impl RunSink for OutputSink<'_> {
    fn request(&mut self, r: &HostRequest<'_>) -> Result<(), String> {
        match &mut self.requests {
            Some(t) => t.push(r),
            None => Ok(()),
        }
    }
    fn mode(&mut self, dev: u16, at: Nanos, slot: usize) -> Result<(), String> {
        match &mut self.timeline {
            Some(t) => t.mode(dev, at, slot),
            None => Ok(()),
        }
    }
    fn progress(&mut self, requests: u64, now: Nanos) -> Result<(), String> {
        match &mut self.progress {
            Some(p) => p(requests, now),
            None => Ok(()),
        }
    }
}

/// Run a config to the end: assemble, simulate, summarize, write outputs.
pub fn run(
    cfg: &RunConfig,
    cat: &Catalogue,
    opener: &Opener,
    registry: &mut Registry<'_>,
    opts: RunOptions<'_>,
) -> Result<Summary, String> {
    let asm = assemble(cfg, cat, Some(opener), registry, 0).map_err(|e| cfg.located(e))?;
    if let (Input::Workload, Some(w)) = (opts.input, &cfg.workload) {
        // Before simulating: a footprint that does not fit would fail the run at its end.
        reach::Reach::of(&asm)
            .workload(w, cfg.run.tolerate_out_of_range)
            .map_err(|e| cfg.located(e))?;
    }
    let mut source = opener()?;
    let mut watch = plausibility::Watch::new(source.as_mut());
    let min_end = opts.input.min_end(cfg);
    let until = cfg.run.until_s.map(secs_to_ns);
    let mut sink = OutputSink {
        requests: None,
        timeline: None,
        progress: opts.progress,
    };
    if let Some(dir) = &opts.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let names: Vec<String> = asm.devices.iter().map(|d| d.info.name.clone()).collect();
        if cfg.output.requests {
            sink.requests = Some(tables::RequestsTable::create(
                &dir.join("requests.parquet"),
                &names,
            )?);
        }
        if cfg.output.timeline {
            let slots = asm.devices.iter().map(|d| d.spec().slot_names()).collect();
            let initial = asm.devices.iter().map(|d| d.ledger().current()).collect();
            sink.timeline = Some(tables::TimelineTable::create(
                &dir.join("timeline.parquet"),
                names,
                slots,
                initial,
            )?);
        }
    }
    let models = asm.models.clone();
    let sim = Simulator::new(asm.stack, asm.devices).unloading(cfg.run.unload);
    let (outcome, check) = if cfg.run.check_data {
        let mut checker = wattio_core::integrity::Checker::for_run(cfg.run.check_block)?;
        let outcome = sim
            .with_observer(&mut checker)
            .run(&mut watch, until, min_end, &mut sink)?;
        if until.is_none() {
            // Checking a function's bytes includes the buffers it moves them in.
            outcome
                .stack
                .scratch_leak(outcome.scratch_held)
                .map_err(|e| format!("data check: {e}"))?;
        }
        (outcome, Some(summary::DataCheckSummary::of(&checker)))
    } else {
        (sim.run(&mut watch, until, min_end, &mut sink)?, None)
    };
    let mut summary = Summary::build(cfg.run.name.clone(), cfg.run.seed, &models, &outcome);
    summary.data_check = check;
    if let Input::Trace { lenient } = opts.input {
        // Before summary.json: a refused trace leaves no summary to mistake for a result.
        summary.warnings = trace_verdict(&watch, lenient)?;
    }
    if let Some(dir) = &opts.out_dir {
        if let Some(t) = sink.requests.take() {
            t.finish()?;
        }
        if let Some(t) = sink.timeline.take() {
            t.finish(outcome.end)?;
        }
        let rows: Vec<_> = outcome
            .devices
            .iter()
            .flat_map(|d| {
                d.energy_rows(outcome.end)
                    .into_iter()
                    .map(|r| (d.info.name.clone(), r))
            })
            .collect();
        tables::write_energy(&dir.join("energy.parquet"), &rows)?;
        let json = serde_json::to_string_pretty(&summary).map_err(|e| e.to_string())?;
        let p = dir.join("summary.json");
        std::fs::write(&p, json + "\n").map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if !cfg.run.tolerate_out_of_range {
        out_of_range(&summary)?;
    }
    Ok(summary)
}

/// Fail a run whose requests addressed bytes past the end of a device (its outputs are
/// written first, so the failure can be inspected).
fn out_of_range(summary: &Summary) -> Result<(), String> {
    let bad: Vec<String> = summary
        .devices
        .iter()
        .filter(|(_, d)| d.out_of_range > 0)
        .map(|(name, d)| format!("{} on `{name}`", d.out_of_range))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(format!(
        "I/Os past the end of a device: {} (each completed with an error). Map the trace's volumes or offsets onto the devices, choose larger devices, or set [run] tolerate_out_of_range = true to count them as errors",
        bad.join(", ")
    ))
}
