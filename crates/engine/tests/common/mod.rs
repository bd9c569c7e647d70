#![allow(dead_code)]
//! Shared helpers for the engine's integration tests.

use std::sync::Arc;
use wattio_core::io::{Op, Request};
use wattio_core::trace::{TraceSource, VecSource};
use wattio_devices::Catalogue;
use wattio_engine::summary::Summary;
use wattio_engine::{run, Opener, Registry, RunConfig, RunOptions};

/// A small disk with round numbers: 6000 rpm (5 ms half rotation), 10 ms seek, 50 MB/s;
/// seek 3 W, active 2 W, idle 1 W, standby 0.2 W; spin-down 1 s / 1 J, spin-up 2 s / 8 J.
pub const DISK: &str = r#"
[[device]]
name = "disk"
[device.spec]
kind = "hdd"
[device.spec.timing]
model = "hdd-parametric"
capacity_bytes = 1_000_000_000
rpm = 6000
avg_seek_ms = 10.0
media_rate_mbps = 50
[device.spec.power]
idle = "idle"
active = "active"
seek = "seek"
[[device.spec.power.state]]
name = "active"
watts = 2.0
spinning = true
[[device.spec.power.state]]
name = "seek"
watts = 3.0
spinning = true
[[device.spec.power.state]]
name = "idle"
watts = 1.0
spinning = true
[[device.spec.power.state]]
name = "standby"
watts = 0.2
[[device.spec.power.transition]]
name = "spin_down"
from = "idle"
to = "standby"
latency_s = 1.0
energy_j = 1.0
[[device.spec.power.transition]]
name = "spin_up"
from = "standby"
to = "idle"
latency_s = 2.0
energy_j = 8.0
"#;

pub fn config(extra: &str) -> RunConfig {
    RunConfig::from_toml("test.toml", &format!("{DISK}\n{extra}")).unwrap()
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
