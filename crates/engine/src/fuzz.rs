//! Entry points shared by the cargo-fuzz targets (`crates/engine/fuzz`) and the tests that
//! replay their corpus.

use crate::{run, RunConfig, RunOptions};
use std::sync::Arc;
use wattio_core::io::{Op, Request};
use wattio_core::trace::{TraceSource, VecSource};

/// Parse a config; if it is valid, assemble it and simulate a short fixed trace through it
/// (or its own workload, capped). Must never panic. The error a config was refused with
/// (the fuzz target ignores it; the corpus test checks which seeds run).
pub fn config(data: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut cfg = RunConfig::from_toml("fuzz", text)?;
    let cat = wattio_devices::Catalogue::embedded()?;
    // Keep runs short whatever the config asks for.
    if let Some(w) = cfg.workload.as_mut() {
        w.max_requests = Some(w.max_requests.unwrap_or(200).min(200));
        w.duration_s = w.duration_s.min(3600.0);
    }
    cfg.run.until_s = Some(cfg.run.until_s.unwrap_or(3600.0).min(3600.0));
    let opener: crate::Opener = match crate::workload_opener(&cfg) {
        Some(o) => o,
        None => {
            let reqs: Vec<Request> = (0..50u64)
                .map(|i| {
                    Request::new(
                        i * 700_000_000,
                        if i % 3 == 0 { Op::Write } else { Op::Read },
                        i * 1_048_576,
                        4096,
                    )
                })
                .collect();
            Arc::new(move || Ok(Box::new(VecSource::new(reqs.clone())) as Box<dyn TraceSource>))
        }
    };
    run(
        &cfg,
        &cat,
        &opener,
        // `kind = "python"` is refused by the registry here (no Python front door).
        &mut crate::Registry::new(),
        RunOptions {
            out_dir: None,
            progress: None,
            ..Default::default()
        },
    )
    .map(|_| ())
}

/// Parse a memory-run config; if it is valid, run it with its sizes capped (no traces:
/// there are no files here). Must never panic; the error it was refused with is returned.
pub fn memory_config(data: &[u8]) -> Result<(), String> {
    use crate::memory::{parse_config, run_parsed, ProcessDef};
    let text = std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut cfg = parse_config(text)?;
    // Keep runs short whatever the config asks for: at most ~10 ms of simulated time and a
    // few thousand switches and transfers.
    cfg.memory.quantum_ns = cfg.memory.quantum_ns.max(10_000);
    for p in &mut cfg.processes {
        match p {
            ProcessDef::Trace { .. } => return Err("fuzz: trace processes need files".into()),
            ProcessDef::Stream {
                accesses, gap_ns, ..
            } => {
                *accesses = (*accesses).min(20_000);
                *gap_ns = (*gap_ns).min(500);
            }
            ProcessDef::Compute { total_ns } | ProcessDef::KernelThread { total_ns } => {
                *total_ns = (*total_ns).min(10_000_000)
            }
        }
    }
    for d in &mut cfg.dma {
        if d.trace.is_some() {
            return Err("fuzz: trace-driven DMA needs a file".into());
        }
        d.period_ns = d.period_ns.map(|p| p.max(2_000));
    }
    run_parsed(&cfg, std::path::Path::new(".")).map(|_| ())
}
