//! A device absent from the run (`[device.fault] missing = true`: pulled, or dead): it draws
//! nothing and answers every I/O with an error at once; the layers above go on without it.

use crate::common;

use common::*;
use wattio_core::testing::SpecDisk;
use wattio_core::{Op, Request};

/// A single absent disk under a fixed 5 s timeout: the run goes to its end, every request
/// is answered with an error at its arrival, the timeout's power commands are ignored, and
/// the disk's ledger holds the whole run in `absent` at 0 W.
#[test]
fn an_absent_disk_answers_every_request_with_an_error_and_draws_nothing() {
    let reqs = reads(&[1.0, 3.0, 20.0], &[500_000_000, 100_000_000], 50_000);
    let cfg = config(
        r#"
        [device.fault]
        missing = true
        [run]
        until_s = 30
        [[function]]
        kind = "spindown"
        policy = "fixed"
        timeout_s = 5
        "#,
    );
    let s = run_quiet(&cfg, reqs);
    let d = &s.devices["disk"];
    assert_eq!((s.requests, s.errors), (3, 3));
    assert_eq!(s.max_latency_ms, 0.0);
    assert_eq!(d.energy_j, 0.0);
    assert_eq!(
        d.residency_s
            .iter()
            .filter(|(_, &t)| t > 0.0)
            .collect::<Vec<_>>(),
        vec![(&"absent".to_string(), &30.0)]
    );
    assert_eq!((d.ios, d.bytes_read, d.spin_ups), (3, 0, 0));
    // The timeout asked for standby after each request; an absent disk has no states to go to.
    assert!(d.power_commands_ignored >= 1, "{d:?}");
}

/// RAID-5 over three round disks with the log on every member (`log_members = "all"`) and
/// `d2` absent: its log copy cannot be read, so the array fails it at start and serves every
/// request degraded from `d0` and `d1` — no error, every read checked against the writes —
/// while `d2` draws nothing. With `fail = "d2"` instead (md's `--fail` of a drive still
/// there) `d2` idles the whole run at 1 W: the difference is the dead drive's energy.
#[test]
fn a_raid5_starts_degraded_without_an_absent_member_which_draws_nothing() {
    let array = |fault: &str, fail: &str| {
        let mut t = String::new();
        for k in 0..3 {
            t += &format!("[[device]]\nname = \"d{k}\"\n{}", SpecDisk::ROUND.toml());
            if k == 2 {
                t += fault;
            }
        }
        t += &format!(
            "[run]\nuntil_s = 20\ncheck_data = true\n\
             [[function]]\nkind = \"raid\"\nlevel = 5\ndevices = [\"d0\", \"d1\", \"d2\"]\n\
             chunk_kib = 64\nassume_clean = true\npersist = true\nlog_members = \"all\"\n{fail}"
        );
        wattio_engine::RunConfig::from_toml("absent.toml", &t).unwrap()
    };
    // Writes then reads of 64 KiB over the first 1 MiB (16 chunks: every member's), a
    // request every 100 ms.
    let mut reqs = Vec::new();
    for i in 0..64u64 {
        let op = if i < 32 { Op::Write } else { Op::Read };
        let at = 1_000_000_000 + i * 100_000_000;
        reqs.push(Request::new(at, op, (i % 16) * 65_536, 65_536));
    }
    let absent = run_quiet(&array("[device.fault]\nmissing = true\n", ""), reqs.clone());
    let failed = run_quiet(&array("", "fail = \"d2\"\n"), reqs);
    for s in [&absent, &failed] {
        assert_eq!((s.requests, s.errors), (64, 0));
        let c = s.data_check.as_ref().expect("checked");
        assert_eq!(c.reads_checked, 32);
        let raid = &s.functions[0].counters;
        assert_eq!(raid["failed_members"], 1.0, "{raid:?}");
    }
    let d2 = &absent.devices["d2"];
    assert_eq!(d2.energy_j, 0.0);
    assert_eq!(d2.residency_s["absent"], 20.0);
    // Failed but there, d2 idles the whole run at 1 W (its log copy's reads at start are
    // a few milliseconds of seek and transfer at 2–3 W).
    let d2_failed = failed.devices["d2"].energy_j;
    assert!((20.0..20.1).contains(&d2_failed), "{d2_failed}");
    assert!(
        (absent.energy_j - (failed.energy_j - d2_failed)).abs() < 0.1,
        "{} against {} less {d2_failed}",
        absent.energy_j,
        failed.energy_j
    );
}
