//! One config, two executors: serve it live with device emulation, capture the guest's
//! requests, simulate the same config on the capture, and compare the energy (issue 5:
//! agreement within 5 %). Also checks that both saw the same spin-down/spin-up cycle.

mod common;

use common::*;
use std::path::Path;
use std::time::Duration;
use wattio_engine::{assemble, catalogue_for, NullSink, RunConfig, Simulator};
use wattio_live::client::Client;
use wattio_live::replay::TextTrace;
use wattio_live::server::{ListenAddr, Server};
use wattio_live::setup::{build_from_config, ConfigServe};

const CONFIG: &str = r#"
[run]
name = "live-vs-sim"

[[device]]
name = "disk"
model = "fast-spinup-laptop-disk"

[[function]]
kind = "spindown"
policy = "fixed"
timeout_s = 0.2
"#;

#[test]
fn live_and_simulated_energy_agree_within_five_percent_on_the_captured_trace() {
    let d = TempDir::new("simlive");
    let cfg_path = run_config(&d, CONFIG);
    let img = image(&d, "disk.img", 4 << 20, 12);
    let cap = d.path("cap.txt");
    let session = build_from_config(&ConfigServe {
        config: cfg_path.clone(),
        images: vec![("disk".into(), img)],
        direct: false,
        capture: Some(cap.clone()),
        workers: 2,
        poll_us: None,
    })
    .unwrap();
    let sock = d.path("s");
    let srv = Server::start(session, &ListenAddr::Unix(sock.clone())).unwrap();
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    // A burst, a long idle period (spin-down after 0.2 s, standby 0.1 s later), a request
    // that waits for the 0.3 s spin-up, and a short tail.
    for i in 0..5u64 {
        assert_eq!(c.read(i * 65_536, 4096).unwrap().error, 0);
    }
    // Not FUA: a forced write waits for the host's fdatasync, which on a busy CI machine
    // took 79 ms and delayed the idle timer (and the spin-down) by as much. That measures the
    // host's disk, not the model; FUA itself is tested in crash.rs.
    assert_eq!(c.write(1 << 20, &pattern(5, 8192), false).unwrap().error, 0);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(c.read(2 << 20, 4096).unwrap().error, 0);
    // A short tail: the next spin-down is due 0.2 s after this read, well after the end even
    // on a loaded machine (else whether the session got to it is a race).
    std::thread::sleep(Duration::from_millis(20));
    c.disconnect().unwrap();
    let mut live = srv.shutdown(Duration::from_secs(5)).unwrap();
    let live_j = live.devices[0].energy_j;
    assert_eq!(live.devices[0].spin_ups, 1);
    let live_sum = wattio_live::report::summary_json(&mut live).unwrap();

    let cfg =
        RunConfig::from_toml("run.toml", &std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    let cat = catalogue_for(&cfg, d.0.as_path()).unwrap();
    let asm = assemble(&cfg, &cat, None, &mut wattio_engine::Registry::new(), 0).unwrap();
    let models = asm.models.clone();
    let mut trace = TextTrace::open(&cap).unwrap();
    // The session ended with a clean unload, as every live session does: so does the run.
    let out = Simulator::new(asm.stack, asm.devices)
        .unloading(true)
        .run(&mut trace, None, live.duration_ns, &mut NullSink)
        .unwrap();
    assert_eq!(out.requests, 7);
    assert_eq!(out.devices[0].ledger().spin_ups(), 1);
    let sim_j = out.devices[0].energy_j(out.end);
    let rel = (live_j - sim_j).abs() / sim_j;
    eprintln!(
        "live {live_j:.4} J, simulated {sim_j:.4} J, difference {:.2} %",
        rel * 100.0
    );
    assert!(rel < 0.05, "live {live_j} J vs simulated {sim_j} J");

    let sim_sum = serde_json::to_value(wattio_engine::Summary::build(
        cfg.run.name.clone(),
        cfg.run.seed,
        &models,
        &out,
    ))
    .unwrap();
    eprintln!(
        "live: {}\nsim:  {}",
        serde_json::to_string(&live_sum).unwrap(),
        serde_json::to_string(&sim_sum).unwrap()
    );
    let mut problems = Vec::new();
    compare("", &sim_sum, &live_sum, &sim_sum, &mut problems);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Hand-checked anchors, so a summary that lost its content cannot compare equal.
    assert_eq!(live_sum["requests"], 7);
    assert_eq!(live_sum["name"], "live-vs-sim");
    assert_eq!(
        live_sum["devices"]["disk"]["model"],
        "fast-spinup-laptop-disk"
    );
    assert_eq!(live_sum["devices"]["disk"]["spin_ups"], 1);
    assert_eq!(live_sum["devices"]["disk"]["bytes_written"], 8192);
    assert_eq!(live_sum["devices"]["disk"]["bytes_read"], 6 * 4096);
    assert_eq!(live_sum["live"]["devices"]["disk"]["emulated"], true);
    assert_eq!(live_sum["live"]["scratch_buffers_held"], 0);
}

/// How each key of `summary.json` must agree between a live session and its simulation.
/// Exact for counts and names; 5 % for energy (the issue's criterion) and for what the
/// device model decides (residency, busy time, power waits), which the wall clock shifts by
/// timer wake-ups; latencies also carry the real I/O and thread hand-offs (≤ 2 ms here).
fn rule(path: &str) -> Rule {
    let leaf = path.rsplit('.').next().unwrap_or(path);
    if path == ".trace" || path.starts_with(".live") {
        return Rule::Skip; // assumptions (live says it is live) and the live-only section
    }
    if path.contains(".residency_s.") {
        return Rule::AbsOfDuration(0.05);
    }
    if path.contains(".energy_by_state_j.") {
        return Rule::AbsOfDeviceEnergy(0.05);
    }
    match leaf {
        "energy_j" | "mean_power_w" | "busy_s" | "utilization" | "duration_s" => Rule::Rel(0.05),
        // The live unload begins as the session ends, and is seen done at its 2 ms poll.
        "started_s" => Rule::AbsOfDuration(0.05),
        "took_s" => Rule::RelOrAbs(0.05, 0.005),
        "mean_latency_ms" | "p50_latency_ms" | "p99_latency_ms" | "max_latency_ms"
        | "mean_power_wait_ms" => Rule::RelOrAbs(0.05, 2.0),
        _ => Rule::Exact,
    }
}

enum Rule {
    Skip,
    Exact,
    Rel(f64),
    RelOrAbs(f64, f64),
    AbsOfDuration(f64),
    AbsOfDeviceEnergy(f64),
}

fn compare(
    path: &str,
    sim: &serde_json::Value,
    live: &serde_json::Value,
    root: &serde_json::Value,
    problems: &mut Vec<String>,
) {
    use serde_json::Value;
    let r = rule(path);
    if matches!(r, Rule::Skip) {
        return;
    }
    match (sim, live) {
        (Value::Object(a), Value::Object(b)) => {
            for k in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => compare(&p, x, y, root, problems),
                    _ if matches!(rule(&p), Rule::Skip) => {}
                    (x, y) => problems.push(format!("{p}: sim {x:?}, live {y:?}")),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                problems.push(format!("{path}: sim {} items, live {}", a.len(), b.len()));
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                compare(&format!("{path}[{i}]"), x, y, root, problems);
            }
        }
        (Value::Number(x), Value::Number(y)) if !matches!(r, Rule::Exact) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            let tol = match r {
                Rule::Rel(f) => f * x.abs(),
                Rule::RelOrAbs(f, a) => (f * x.abs()).max(a),
                Rule::AbsOfDuration(f) => f * root["duration_s"].as_f64().unwrap_or(0.0),
                Rule::AbsOfDeviceEnergy(f) => {
                    // .devices.NAME.energy_by_state_j.STATE → that device's energy
                    let dev = path.split('.').nth(2).unwrap_or("");
                    f * root["devices"][dev]["energy_j"].as_f64().unwrap_or(0.0)
                }
                Rule::Skip | Rule::Exact => 0.0,
            };
            if (x - y).abs() > tol || !(x - y).abs().is_finite() {
                problems.push(format!("{path}: sim {x}, live {y} (tolerance {tol})"));
            }
        }
        (x, y) => {
            if x != y {
                problems.push(format!("{path}: sim {x}, live {y}"));
            }
        }
    }
}

/// What a live session cannot have is refused with the reason, before anything is served.
#[test]
fn oracle_and_python_functions_are_refused_live_with_the_reason() {
    let d = TempDir::new("refuse");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let img = image(&d, "disk.img", 1 << 20, 3);
    let cases = [
        (
            "kind = \"spindown\"\npolicy = \"oracle\"",
            "function[0].policy: the oracle needs to see the future requests, which only a simulation has (not a live session)",
        ),
        (
            "kind = \"python\"\nclass = \"policies:Mine\"",
            "function[0]: Python class `policies:Mine` can only run through the Python front door (`wattio run`, `wattio serve`, `wattio.run`)",
        ),
    ];
    for (function, expect) in cases {
        let cfg_path = d.path("run.toml");
        std::fs::write(
            &cfg_path,
            format!(
                "catalogue = [{:?}]\n[[device]]\nname = \"disk\"\nmodel = \"fast-spinup-laptop-disk\"\n[[function]]\n{function}\n",
                data.display().to_string()
            ),
        )
        .unwrap();
        let r = build_from_config(&ConfigServe {
            config: cfg_path,
            images: vec![("disk".into(), img.clone())],
            direct: false,
            capture: None,
            workers: 1,
            poll_us: None,
        });
        match r {
            Ok(_) => panic!("{function}: served"),
            Err(e) => assert!(e.contains(expect), "{function}: {e}"),
        }
    }
}
