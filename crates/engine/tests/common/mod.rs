#![allow(dead_code)]
//! Shared helpers for the engine's integration tests.

use std::sync::Arc;
use wattio_core::io::{Op, Request};
use wattio_core::testing::SpecDisk;
use wattio_core::trace::{TraceSource, VecSource};
use wattio_devices::Catalogue;
use wattio_engine::summary::Summary;
use wattio_engine::{run, Opener, Registry, RunConfig, RunOptions};

/// A small disk with round numbers (`SpecDisk::ROUND`, `testing::disk`'s): 6000 rpm (5 ms
/// half rotation), 10 ms seek, 50 MB/s; seek 3 W, active 2 W, idle 1 W, standby 0.2 W;
/// spin-down 1 s / 1 J, spin-up 2 s / 8 J. One `[[device]]` named `disk`.
pub fn disk() -> String {
    format!("[[device]]\nname = \"disk\"\n{}", SpecDisk::ROUND.toml())
}

pub fn config(extra: &str) -> RunConfig {
    RunConfig::from_toml("test.toml", &format!("{}\n{extra}", disk())).unwrap()
}

pub fn reads(times_s: &[f64], offsets: &[u64], len: u32) -> Vec<Request> {
    times_s
        .iter()
        .zip(offsets.iter().cycle())
        .map(|(&t, &o)| Request::new((t * 1e9).round() as u64, Op::Read, o, len))
        .collect()
}

pub fn opener(reqs: Vec<Request>) -> Opener {
    Arc::new(move || Ok(Box::new(VecSource::new(reqs.clone())) as Box<dyn TraceSource>))
}

/// Run `cfg` on `reqs` with the built-in functions only, writing nothing.
pub fn run_quiet(cfg: &RunConfig, reqs: Vec<Request>) -> Summary {
    run(
        cfg,
        &Catalogue::default(),
        &opener(reqs),
        &mut Registry::new(),
        RunOptions {
            out_dir: None,
            progress: None,
            ..Default::default()
        },
    )
    .unwrap()
}

/// Run `config` on `requests` in phases ending at `crashes` (every device and the integrity
/// checker, with blocks of `block` bytes, crash at each; the stack is assembled anew after
/// each, as a restart would): the top layer's counters of each phase, or the first
/// integrity fault.
pub fn run_with_crashes(
    config: &str,
    block: u32,
    requests: &[Request],
    crashes: &[wattio_core::Nanos],
) -> Result<Vec<std::collections::BTreeMap<String, f64>>, String> {
    let cfg = RunConfig::from_toml("crash.toml", config)?;
    let cat = Catalogue::embedded()?;
    let mut checker = wattio_core::integrity::Checker::new(block)?;
    let mut devices: Option<Vec<wattio_core::DeviceRuntime>> = None;
    let mut start = 0;
    let mut phases = Vec::new();
    for until in crashes.iter().map(|&c| Some(c)).chain([None]) {
        let part: Vec<Request> = requests
            .iter()
            .filter(|r| (start == 0 || r.arrival > start) && until.is_none_or(|u| r.arrival <= u))
            .copied()
            .collect();
        let asm = wattio_engine::assemble(&cfg, &cat, None, &mut Registry::new(), start)?;
        let devs = devices.take().unwrap_or(asm.devices);
        let o = wattio_engine::Simulator::new(asm.stack, devs)
            .starting_at(start)
            .with_observer(&mut checker)
            .run(
                &mut VecSource::new(part),
                until,
                0,
                &mut wattio_engine::NullSink,
            )?;
        phases.push(o.stack.layers()[0].counters().into_iter().collect());
        let mut devs = o.devices;
        if let Some(t) = until {
            for d in &mut devs {
                d.crash(t);
            }
            checker.crash(t);
            start = t;
        }
        devices = Some(devs);
    }
    Ok(phases)
}
