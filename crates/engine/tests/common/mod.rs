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
