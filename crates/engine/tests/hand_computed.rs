//! A trace with idle gaps of known lengths under a fixed timeout: spin-downs, residencies,
//! joules and latencies computed by hand.

use crate::common;

use common::*;

#[test]
fn fixed_timeout_by_hand() {
    // Reads of 50 kB alternating between two far offsets: every access seeks (10 ms),
    // waits half a rotation (5 ms) and transfers 1 ms: 16 ms of service.
    let reqs = reads(&[1.0, 3.0, 20.0], &[500_000_000, 100_000_000], 50_000);
    let cfg = config(
        r#"
        [run]
        until_s = 30
        [[function]]
        kind = "spindown"
        policy = "fixed"
        timeout_s = 5
        "#,
    );
    let s = run_quiet(&cfg, reqs);
    // Timeline: idle 0–1; A 1–1.016; idle to 3; B 3–3.016; idle to 8.016 (5 s timeout);
    // spin-down to 9.016; standby to 20; C arrives, spin-up 20–22, served 22–22.016;
    // idle to 27.016; spin-down to 28.016; standby to 30.
    let d = &s.devices["disk"];
    let r = |k: &str| d.residency_s[k];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(s.duration_s, 30.0));
    assert!(close(r("seek"), 0.030), "{}", r("seek"));
    assert!(close(r("active"), 0.018));
    assert!(close(r("idle"), 12.984), "{}", r("idle"));
    assert!(close(r("spin_down"), 2.0));
    assert!(close(r("standby"), 12.968), "{}", r("standby"));
    assert!(close(r("spin_up"), 2.0));
    assert!(close(d.residency_s.values().sum::<f64>(), 30.0));
    assert_eq!(d.spin_ups, 1);
    assert_eq!(d.entries["spin_down"], 2);
    // 0.09 + 0.036 + 12.984 + 2 + 2.5936 + 8 J
    assert!(close(d.energy_j, 25.7036), "{}", d.energy_j);
    assert!(close(s.energy_j, 25.7036));
    assert_eq!(s.requests, 3);
    // Latencies 16, 16 and 2016 ms (C waited the 2 s spin-up).
    assert!(
        close(s.mean_latency_ms, 2048.0 / 3.0),
        "{}",
        s.mean_latency_ms
    );
    assert!(close(s.max_latency_ms, 2016.0));
    assert!(close(s.mean_power_wait_ms, 2000.0 / 3.0));
    assert_eq!(s.functions[0].counters["spin_down_commands"], 2.0);
}

#[test]
fn oracle_by_hand() {
    // Same trace; break-even = (1 + 8 − 0.2·3) / (1 − 0.2) = 10.5 s. Gaps: 0–1 (1 s),
    // 1.016–3 (1.984 s), 3.016–20 (16.984 s: sleep), and after 20.016 no request comes
    // again: an endless gap, so the oracle sleeps there too (no spin-up to pay).
    let reqs = reads(&[1.0, 3.0, 20.0], &[500_000_000, 100_000_000], 50_000);
    let cfg = config(
        r#"
        [run]
        until_s = 30
        [[function]]
        kind = "spindown"
        policy = "oracle"
        "#,
    );
    let s = run_quiet(&cfg, reqs);
    let d = &s.devices["disk"];
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // Spin down at 3.016 (1 s), standby 4.016–18, spin up 18–20 just in time; spin down
    // at 20.016, standby 21.016–30.
    assert!(
        close(d.residency_s["standby"], 22.968),
        "{}",
        d.residency_s["standby"]
    );
    assert!(
        close(d.residency_s["idle"], 2.984),
        "{}",
        d.residency_s["idle"]
    );
    assert_eq!(d.spin_ups, 1);
    assert_eq!(d.entries["spin_down"], 2);
    // No request waits: every latency is the 16 ms service.
    assert!(close(s.max_latency_ms, 16.0), "{}", s.max_latency_ms);
    assert!(close(s.mean_power_wait_ms, 0.0));
    // idle 2.984 J; seek 0.03 s ·3 W; active 0.018 s ·2 W; two spin-downs, one spin-up.
    let e = 2.984 + 0.09 + 0.036 + 2.0 + 8.0 + 22.968 * 0.2;
    assert!(close(d.energy_j, e), "{} vs {e}", d.energy_j);
}

#[test]
fn always_on_by_hand() {
    let reqs = reads(&[1.0, 3.0, 20.0], &[500_000_000, 100_000_000], 50_000);
    let cfg = config("[run]\nuntil_s = 30\n");
    let s = run_quiet(&cfg, reqs);
    let d = &s.devices["disk"];
    // 29.952 s idle at 1 W + 0.09 J seek + 0.036 J active.
    assert!(
        (d.energy_j - (29.952 + 0.09 + 0.036)).abs() < 1e-9,
        "{}",
        d.energy_j
    );
    assert_eq!(d.spin_ups, 0);
}

/// Requests past the end of a device fail the run (after its outputs) unless the config
/// tolerates them; tolerated, each is one error and one `out_of_range` on the device.
#[test]
fn requests_past_the_end_of_a_device_fail_the_run_unless_tolerated() {
    // The disk holds 1,000,000,000 bytes: the second read ends 4 KiB past it, the third
    // starts at 2^64 − 100 (its end would wrap to a small number without saturation).
    let mut reqs = reads(&[1.0, 2.0, 3.0], &[0, 999_999_000, 0], 4096);
    reqs[1].len = 5096;
    reqs[2].offset = u64::MAX - 99;
    let opts = || wattio_engine::RunOptions {
        out_dir: None,
        progress: None,
        ..Default::default()
    };
    let cat = wattio_devices::Catalogue::default();
    let e = wattio_engine::run(
        &config(""),
        &cat,
        &opener(reqs.clone()),
        &mut wattio_engine::Registry::new(),
        opts(),
    )
    .unwrap_err();
    assert!(
        e.starts_with("I/Os past the end of a device: 2 on `disk`"),
        "{e}"
    );
    let s = wattio_engine::run(
        &config("[run]\ntolerate_out_of_range = true"),
        &cat,
        &opener(reqs),
        &mut wattio_engine::Registry::new(),
        opts(),
    )
    .unwrap();
    assert_eq!(s.devices["disk"].out_of_range, 2);
    assert_eq!(s.errors, 2);
    assert_eq!(s.requests, 3);
}

/// What the run would refuse at its end, `check` refuses up front: a trace request past
/// its device's end (named by its index) or to a device the run lacks, and a generated
/// workload whose footprint or device count does not fit — which `run` refuses before
/// simulating too.
#[test]
fn check_and_run_refuse_requests_that_cannot_fit_before_simulating() {
    let cat = wattio_devices::Catalogue::default();
    let check = |cfg: &wattio_engine::RunConfig, reqs: Vec<wattio_core::Request>, input| {
        wattio_engine::check(
            cfg,
            &cat,
            &opener(reqs),
            &mut wattio_engine::Registry::new(),
            input,
        )
    };
    let trace = wattio_engine::Input::Trace { lenient: false };
    // The disk holds 1,000,000,000 bytes; requests 2 and 3 end past it.
    let mut reqs = reads(&[1.0, 2.0, 3.0], &[0, 999_999_000, 999_999_999], 4096);
    reqs[1].len = 1000;
    let e = check(&config(""), reqs.clone(), trace).unwrap_err();
    assert_eq!(
        e,
        "trace: 1 of 3 requests reach past the end of their device; the first, request 3, addresses bytes 999999999..1000004095 of `disk`, which holds 1000000000 bytes (map the trace's volumes or offsets onto the devices, choose larger devices, or set [run] tolerate_out_of_range = true to count such requests as errors)"
    );
    let tolerant = config("[run]\ntolerate_out_of_range = true");
    assert_eq!(
        check(&tolerant, reqs.clone(), trace)
            .unwrap()
            .trace
            .unwrap()
            .0,
        3
    );
    reqs[2].offset = 0;
    assert!(check(&config(""), reqs.clone(), trace).is_ok());
    reqs[1].dev = 1;
    assert_eq!(
        check(&tolerant, reqs, trace).unwrap_err(),
        "trace request 2 targets device 1, but the run has 1 device(s) (`disk`): select or map the trace's volumes, or add devices"
    );

    // A generated workload: the footprint is the furthest a request reaches.
    let workload = |extra: &str, fp: u64| {
        config(&format!(
            "{extra}\n[workload]\narrivals = \"poisson\"\nduration_s = 86400\nrate = 100\nsize = {{ dist = \"fixed\", bytes = 4096 }}\nfootprint_bytes = {fp}\n"
        ))
    };
    let too_far = "test.toml: workload.footprint_bytes: expected at most the 1000000000 bytes of `disk`, got 1000000001: requests would reach past its end (lower the footprint, choose a larger device, or set [run] tolerate_out_of_range = true to count such requests as errors)";
    let check_generated = |cfg: &wattio_engine::RunConfig| {
        wattio_engine::check(
            cfg,
            &cat,
            &wattio_engine::workload_opener(cfg).unwrap(),
            &mut wattio_engine::Registry::new(),
            wattio_engine::Input::Workload,
        )
        .map(|_| ())
    };
    let cfg = workload("", 1_000_000_001);
    assert_eq!(check_generated(&cfg).unwrap_err(), too_far);
    // `run` refuses it before simulating a day of 100 requests a second: no progress
    // report is ever made.
    let mut reports = 0;
    let mut progress = |_: u64, _: wattio_core::time::Nanos| {
        reports += 1;
        Ok(())
    };
    let e = wattio_engine::run(
        &cfg,
        &cat,
        &wattio_engine::workload_opener(&cfg).unwrap(),
        &mut wattio_engine::Registry::new(),
        wattio_engine::RunOptions {
            progress: Some(&mut progress),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!((e.as_str(), reports), (too_far, 0));
    assert_eq!(check_generated(&workload("", 1_000_000_000)), Ok(()));
    let tolerated = workload("[run]\ntolerate_out_of_range = true", 2_000_000_000);
    assert_eq!(check_generated(&tolerated), Ok(()));
    let mut two = workload("", 100_000_000);
    two.workload.as_mut().unwrap().devices = 2;
    assert_eq!(
        check_generated(&two).unwrap_err(),
        "test.toml: workload.devices: expected at most the run's 1 device(s) (`disk`), got 2"
    );
}

#[test]
fn configs_that_would_allocate_absurdly_are_refused_with_their_key() {
    let e = wattio_engine::RunConfig::from_toml(
        "c.toml",
        &disk().replace("name = \"disk\"", "name = \"disk\"\ncount = 5000"),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "c.toml: device: 5000 devices in all (with `count`), more than 4096"
    );
    let e = wattio_engine::RunConfig::from_toml(
        "c.toml",
        &format!("{}\n[workload]\narrivals = \"poisson\"\nduration_s = 10\nrate = 1\nstreams = 4000000000\n", disk()),
    )
    .unwrap_err();
    assert_eq!(
        e,
        "c.toml: workload.streams: expected 1 to 1048576, got 4000000000"
    );
}

/// `[run] check_data`: the run's reads checked block by block (4 KiB) against the write
/// before them. A write of blocks 0–1; a read of both (two blocks checked, a read
/// checked); a read of bytes 2048..8192 (block 1 checked, block 0 covered only partly:
/// unverified, so the read is not counted as checked whole); a read of a block never written
/// (its initial content: checked). Off, the summary has no `data_check`; a block size that is
/// not a power of two is refused by name.
#[test]
fn check_data_counts_the_reads_and_blocks_it_checked() {
    use wattio_core::{Op, Request};
    let reqs = vec![
        Request::new(1_000_000_000, Op::Write, 0, 8192),
        Request::new(2_000_000_000, Op::Read, 0, 8192),
        Request::new(3_000_000_000, Op::Read, 2048, 6144),
        Request::new(4_000_000_000, Op::Read, 1 << 20, 4096),
    ];
    let s = run_quiet(&config("[run]\ncheck_data = true"), reqs.clone());
    let c = s.data_check.expect("checked");
    assert_eq!(
        (
            c.block_bytes,
            c.reads_checked,
            c.blocks_checked,
            c.blocks_unverified
        ),
        (4096, 2, 4, 1)
    );
    // 512-byte blocks: every block of every read is covered whole, 16 + 12 + 8 of them.
    let s = run_quiet(
        &config("[run]\ncheck_data = true\ncheck_block = 512"),
        reqs.clone(),
    );
    let c = s.data_check.unwrap();
    assert_eq!(
        (c.reads_checked, c.blocks_checked, c.blocks_unverified),
        (3, 36, 0)
    );
    assert!(run_quiet(&config(""), reqs).data_check.is_none());
    let e = wattio_engine::RunConfig::from_toml(
        "t.toml",
        &format!("{}\n[run]\ncheck_block = 1000", disk()),
    )
    .and_then(|c| c.validate().map(|_| c))
    .err()
    .unwrap();
    assert!(
        e.contains("run.check_block: expected a power of two from 512 to 1048576 bytes, got 1000"),
        "{e}"
    );
}

/// A config without `[run]` runs with what an empty `[run]` gives: seed 1 as documented
/// (it was 0, from a derived `Default`), the checker off with 4 KiB blocks.
#[test]
fn a_missing_run_table_gets_the_documented_defaults() {
    let none = config("");
    let empty = config("[run]");
    for c in [&none, &empty] {
        assert_eq!(
            (
                c.run.seed,
                c.run.check_data,
                c.run.check_block,
                c.run.unload
            ),
            (1, false, 4096, false)
        );
    }
}

/// `[[device]] queue`: the test disk (16 ms an access) behind LOOK. Reads of 50 kB at
/// blocks A 7,812, B 1,953, C 17,578, D 11,718, E 3,906 arrive 1 ms apart; A starts at
/// once, the rest queue. FCFS serves them in arrival order (the last, E, done at 80 ms:
/// 76 ms); LOOK goes up from A (D, C), then turns (E, B): B, which arrived at 1 ms, is done
/// last at 80 ms, 79 ms after it arrived.
#[test]
fn a_device_queue_served_by_look() {
    let reqs = reads(
        &[0.0, 0.001, 0.002, 0.003, 0.004],
        &[4_000_000, 1_000_000, 9_000_000, 6_000_000, 2_000_000],
        50_000,
    );
    let with = |queue: &str| {
        let text = format!(
            "[[device]]\nname = \"disk\"\nqueue = \"{queue}\"\n{}",
            wattio_core::testing::SpecDisk::ROUND.toml()
        );
        wattio_engine::config::RunConfig::from_toml("q.toml", &text)
    };
    let fcfs = run_quiet(&with("fcfs").unwrap(), reqs.clone());
    assert!(
        (fcfs.max_latency_ms - 76.0).abs() < 1e-9,
        "{}",
        fcfs.max_latency_ms
    );
    let look = run_quiet(&with("look").unwrap(), reqs.clone());
    assert!(
        (look.max_latency_ms - 79.0).abs() < 1e-9,
        "{}",
        look.max_latency_ms
    );
    // Every access takes 16 ms whatever the order: the mean is the same (46 ms).
    assert!(
        (look.mean_latency_ms - 46.0).abs() < 1e-9,
        "{}",
        look.mean_latency_ms
    );
    let e = wattio_engine::run(
        &with("elevator").unwrap(),
        &wattio_devices::Catalogue::default(),
        &opener(reqs),
        &mut wattio_engine::Registry::new(),
        wattio_engine::RunOptions {
            out_dir: None,
            progress: None,
            ..Default::default()
        },
    )
    .expect_err("an unknown queue order is refused");
    assert!(
        e.contains(
            "device `disk`.queue: unknown `elevator` (expected fcfs, look, clook or sstf-lbn)"
        ),
        "{e}"
    );
}
