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
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cfg_path = d.path("run.toml");
    std::fs::write(
        &cfg_path,
        format!("catalogue = [{:?}]\n{CONFIG}", data.display().to_string()),
    )
    .unwrap();
    let img = image(&d, "disk.img", 4 << 20, 12);
    let cap = d.path("cap.txt");
    let session = build_from_config(&ConfigServe {
        config: cfg_path.clone(),
        images: vec![("disk".into(), img)],
        direct: false,
        capture: Some(cap.clone()),
        workers: 2,
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
    assert_eq!(c.write(1 << 20, &pattern(5, 8192), true).unwrap().error, 0);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(c.read(2 << 20, 4096).unwrap().error, 0);
    std::thread::sleep(Duration::from_millis(100));
    c.disconnect().unwrap();
    let live = srv.shutdown(Duration::from_secs(5)).unwrap();
    let live_j = live.devices[0].energy_j;
    assert_eq!(live.devices[0].spin_ups, 1);

    let cfg =
        RunConfig::from_toml("run.toml", &std::fs::read_to_string(&cfg_path).unwrap()).unwrap();
    let cat = catalogue_for(&cfg, d.0.as_path()).unwrap();
    let opener: wattio_engine::Opener = std::sync::Arc::new(|| Err("no lookahead".into()));
    let mut external =
        |_: usize,
         _: &wattio_engine::config::FunctionConfig|
         -> Result<Box<dyn wattio_core::Function>, String> { Err("none".into()) };
    let asm = assemble(&cfg, &cat, &opener, &mut external, 0).unwrap();
    let mut trace = TextTrace::open(&cap).unwrap();
    let out = Simulator::new(asm.stack, asm.devices)
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
}
