//! PARAID served live: one export for the whole array, fio's crc32c verification through
//! it while the gears shift (a short window forces shifts both ways).

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;
use wattio_live::server::{ListenAddr, Server};
use wattio_live::setup::{build_from_config, ConfigServe};

/// A fast disk with a standby state (inline spec): 15K RPM, 0.5 ms seeks, 50 ms
/// transitions, so that propagation and shifts fit in a short test.
const DISK: &str = r#"
[device.spec]
kind = "hdd"
[device.spec.timing]
model = "hdd-parametric"
capacity_bytes = 1_000_000_000
rpm = 15000
avg_seek_ms = 0.5
media_rate_mbps = 200
[device.spec.power]
idle = "idle"
active = "active"
[[device.spec.power.state]]
name = "active"
watts = 9.6
spinning = true
[[device.spec.power.state]]
name = "idle"
watts = 6.5
spinning = true
[[device.spec.power.state]]
name = "standby"
watts = 2.9
[[device.spec.power.transition]]
from = "idle"
to = "standby"
latency_s = 0.05
energy_j = 0.3
[[device.spec.power.transition]]
from = "standby"
to = "idle"
latency_s = 0.05
energy_j = 1.2
"#;

fn config() -> String {
    let mut c = String::new();
    for k in 0..5 {
        c += &format!("[[device]]\nname = \"d{k}\"\n{DISK}\n");
    }
    // RAID-5 gears {3,5}; 50 ms samples, a window of one: a busy sample shifts up, an idle
    // one down (the threshold is low so that fio's pace counts as load).
    c + r#"
[[function]]
kind = "paraid"
level = 5
devices = ["d0", "d1", "d2", "d3", "d4"]
gears = [3, 5]
chunk_kib = 4
assume_clean = true
sample_s = 0.05
window = 1
threshold = 0.2
rated_cycles = 1_000_000_000
start = "lowest"
"#
}

#[test]
fn fio_verifies_through_a_five_disk_paraid_export_while_gears_shift() {
    if !have("fio") {
        return;
    }
    let d = TempDir::new("paraid");
    let cfg = d.path("run.toml");
    std::fs::write(&cfg, config()).unwrap();
    // Zeroed members: `assume_clean` holds (every parity is the XOR of zero data).
    let imgs: Vec<_> = (0..5)
        .map(|k| {
            let p = d.path(&format!("d{k}.img"));
            std::fs::write(&p, vec![0u8; 8 << 20]).unwrap();
            p
        })
        .collect();
    let session = build_from_config(&ConfigServe {
        config: cfg,
        images: (0..5).map(|k| (format!("d{k}"), imgs[k].clone())).collect(),
        direct: false,
        capture: None,
        workers: 2,
        poll_us: None,
    })
    .unwrap();
    let sock = d.path("s");
    let srv = Server::start(session, &ListenAddr::Unix(sock.clone())).unwrap();
    // Bursts of 64 writes with 300 ms pauses: busy samples, then idle ones.
    let out = Command::new("fio")
        .args([
            "--name=verify",
            "--ioengine=nbd",
            &format!("--uri={}", uri(&sock, "paraid")),
            "--rw=randwrite",
            "--bs=4k",
            "--size=1M",
            "--iodepth=8",
            "--thinktime=300000",
            "--thinktime_blocks=64",
            "--verify=crc32c",
            "--do_verify=1",
            "--verify_fatal=1",
            "--verify_state_save=0",
            "--output-format=terse",
            "--terse-version=3",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("3;"))
        .unwrap_or_else(|| panic!("{text}"));
    let f: Vec<&str> = line.split(';').collect();
    assert_eq!(f[4], "0", "fio error: {text}");
    // The status line shows the array's gear (0 or 1 here).
    let snap = srv.session().snapshot();
    let line = wattio_live::report::status_line(&snap, 1.0);
    let gear = snap.gears[0].1;
    assert!(line.contains(&format!(" | paraid gear={gear}")), "{line}");
    let summary = srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(summary.stats.errors, 0);
    let c = &summary
        .function_counters
        .iter()
        .find(|(n, _)| n == "paraid")
        .unwrap()
        .1;
    let get = |k: &str| c.iter().find(|(n, _)| n == k).unwrap().1;
    assert!(get("upshifts") >= 1.0 && get("downshifts") >= 1.0, "{c:?}");
    assert!(get("propagation_copies") > 0.0, "{c:?}");
}
