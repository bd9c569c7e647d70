//! The shipped device catalogue: every entry loads, builds its models and names a source for
//! every number; a few entries are checked by hand against the papers and datasheets they
//! come from (see docs/catalogue.md for the arithmetic).

use wattio_core::device::Timing;
use wattio_core::io::{Op, Request};
use wattio_core::power::PowerSpec;
use wattio_devices::catalogue::{Catalogue, DeviceSpec};
use wattio_devices::flash::Flash;
use wattio_devices::hdd::ParametricHdd;

/// The entries this catalogue work owns (other helpers add DiskSim-converted drives and SSDs).
const OWNED: &[&str] = &[
    "fujitsu-map3367",
    "wd800-fs2",
    "wd800-fs2-mechanical",
    "toshiba-mk1234gsx",
    "wd400ve",
    "sandisk-ultra-cf-2gb",
    "sandisk-cruzer-micro-2gb",
    "seagate-constellation-es3-4tb",
    "samsung-980-pro-1tb",
];

/// How a value's provenance is declared; docs/catalogue.md defines each tag.
const SOURCE_TAGS: &[&str] = &[
    "paper:",
    "datasheet:",
    "report:",
    "cited:",
    "derived:",
    "assumed:",
    "assumed (",
];

fn catalogue() -> Catalogue {
    Catalogue::embedded().unwrap_or_else(|e| panic!("embedded catalogue: {e}"))
}

fn spec(name: &str) -> DeviceSpec {
    catalogue()
        .get(name)
        .unwrap_or_else(|e| panic!("{e}"))
        .clone()
}

fn power(name: &str) -> PowerSpec {
    spec(name).power_spec().unwrap_or_else(|e| panic!("{e}"))
}

fn watts(p: &PowerSpec, state: &str) -> f64 {
    let id = p
        .state_id(state)
        .unwrap_or_else(|| panic!("no state {state}"));
    p.states[id as usize].watts
}

fn break_even_s(p: &PowerSpec, sleep: &str) -> f64 {
    let id = p
        .state_id(sleep)
        .unwrap_or_else(|| panic!("no state {sleep}"));
    let ns = p
        .break_even(id)
        .unwrap_or_else(|| panic!("{sleep} has no break-even"));
    ns as f64 / 1e9
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, expected {want} ± {tol}"
    );
}

/// Problems with the provenance of one entry: every timing parameter needs an entry in
/// `[timing.sources]`, every state and transition a `source`, a rating its source; with
/// `tagged`, each source must also start with one of the declared tags.
fn provenance_problems(s: &DeviceSpec, tagged: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: String, src: &str| {
        if src.trim().is_empty() {
            out.push(format!("{}: {what}: empty source", s.name));
        } else if tagged && !SOURCE_TAGS.iter().any(|t| src.starts_with(t)) {
            out.push(format!("{}: {what}: source lacks a tag: {src}", s.name));
        }
    };
    let sources = s.timing.get("sources").and_then(|v| v.as_table());
    for key in s.timing.keys() {
        if key == "model" || key == "sources" {
            continue;
        }
        let src = sources
            .and_then(|t| t.get(key))
            .and_then(|v| v.as_str())
            .unwrap_or("");
        check(format!("timing.{key}"), src);
    }
    for st in &s.power.states {
        check(format!("power.state {}", st.name), &st.source);
    }
    for tr in &s.power.transitions {
        let name = tr
            .name
            .clone()
            .unwrap_or_else(|| format!("{}->{}", tr.from, tr.to));
        check(format!("power.transition {name}"), &tr.source);
    }
    if s.power.rated_start_stop.is_some() {
        check(
            "power.rated_start_stop".into(),
            &s.power.rated_start_stop_source,
        );
    }
    out
}

#[test]
fn every_embedded_entry_parses_builds_its_model_and_a_valid_power_spec() {
    let cat = catalogue();
    let names: Vec<&str> = cat.names().collect();
    for want in OWNED {
        assert!(names.contains(want), "catalogue lacks {want}: {names:?}");
    }
    for s in cat.specs() {
        assert!(
            ["hdd", "flash", "ssd"].contains(&s.kind.as_str()),
            "{}: kind {}",
            s.name,
            s.kind
        );
        let timing = s.build_timing().unwrap_or_else(|e| panic!("{e}"));
        assert!(timing.capacity() > 0, "{}: zero capacity", s.name);
        let p = s.power_spec().unwrap_or_else(|e| panic!("{e}"));
        // A device that can sleep must have a finite break-even for it, or no policy (and
        // not the oracle) could ever use the state.
        for sleep in p.sleep_states() {
            assert!(
                p.break_even(sleep).is_some(),
                "{}: sleep state {} draws no less than idle",
                s.name,
                p.states[sleep as usize].name
            );
        }
    }
}

#[test]
fn owned_entries_describe_themselves_and_their_references() {
    for name in OWNED {
        let s = spec(name);
        assert!(!s.description.is_empty(), "{name}: no description");
        assert!(!s.references.is_empty(), "{name}: no references");
    }
}

#[test]
fn every_state_and_transition_names_its_source() {
    for s in catalogue().specs() {
        let owned = OWNED.contains(&s.name.as_str());
        let mut problems = provenance_problems(s, owned);
        if !owned {
            // Other helpers' entries: states and transitions must have a source; their
            // timing tables follow their own conventions.
            problems.retain(|p| !p.contains("timing."));
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }
}

#[test]
fn the_provenance_check_catches_a_missing_source() {
    let mut s = spec("wd800-fs2");
    assert!(provenance_problems(&s, true).is_empty());
    s.power.states[0].source.clear();
    s.timing
        .get_mut("sources")
        .and_then(|v| v.as_table_mut())
        .map(|t| t.remove("rpm"));
    s.power.transitions[1].source = "from memory".into();
    let problems = provenance_problems(&s, true);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("timing.rpm: empty source"));
    assert!(problems[1].contains("power.state active: empty source"));
    assert!(problems[2].contains("power.transition spin_up: source lacks a tag"));
}

#[test]
fn wd800_matches_fs2_table_5_1() {
    let s = spec("wd800-fs2");
    let d = ParametricHdd::from_toml(&s.timing).unwrap_or_else(|e| panic!("{e}"));
    // Average rotational delay = half a revolution at 7200 RPM = 30/7200 s = 4.1667 ms;
    // FS2 prints it truncated as 4.16 ms.
    assert_eq!(d.half_rotation(), 4_166_667);
    assert_eq!(d.half_rotation() / 10_000, 416);
    // 78.15 GB in FS2's units (10^6 KiB).
    assert_eq!(d.capacity() / 1_024_000_000, 78);
    assert_eq!((d.capacity() % 1_024_000_000) / 10_000_000, 15);
    // Seek curve anchors (Lee-Katz three-point curve): track-to-track 2.0 ms at the
    // shortest move, full stroke 21 ms, and the mean over random seeks 9.9 ms. By hand:
    // b = (−20 + 148.5 − 105)/3 = 7.8333, c = (14 − 148.5 + 168)/3 = 11.1667 ms.
    assert_eq!(d.seek_time(d.capacity()), 21_000_000);
    close(
        d.seek_time(512) as f64,
        2.000_627e6,
        2.0,
        "seek over 512 B (ns)",
    );
    // A third of the stroke: 2 + 7.8333 × 0.57735 + 11.1667 / 3 = 10.2448 ms.
    close(
        d.seek_time(d.capacity() / 3) as f64,
        10.244_8e6,
        100.0,
        "seek at 1/3 stroke (ns)",
    );
    let n = 100_000u64;
    let mean: f64 = (0..n)
        .map(|i| {
            let x = (i as f64 + 0.5) / n as f64;
            2.0 * (1.0 - x) * d.seek_time((x * d.capacity() as f64) as u64) as f64 / n as f64
        })
        .sum();
    close(mean, 9.9e6, 2e3, "mean seek over random positions (ns)");
    // 54 MB/s outer zone: one 512 B sector in 9.48 us (FS2 rounds to 9.0 us), 54 kB in 1 ms.
    assert_eq!(d.transfer_time(0, 54_000), 1_000_000);
    let p = power("wd800-fs2");
    assert_eq!(watts(&p, "seek"), 14.0);
    assert_eq!(watts(&p, "active"), 8.0);
    assert_eq!(watts(&p, "idle"), 8.0);
    // Spin-up: FS2's 17.0 W startup power over the 5.5 s start time.
    let up = &p.transitions[p
        .transition(p.state_id("standby").unwrap_or(0), p.idle)
        .unwrap_or(0)];
    assert_eq!(up.name, "spin_up");
    close(up.watts(), 17.0, 1e-9, "spin-up power (W)");
    // Break-even by hand: (8 + 93.5 − 1.0 × 6.5) / (8 − 1) = 95 / 7 = 13.571 s.
    close(
        break_even_s(&p, "standby"),
        95.0 / 7.0,
        1e-6,
        "WD800 break-even (s)",
    );
}

#[test]
fn wd800_mechanical_matches_fs2_table_5_1() {
    use wattio_devices::mechanical::MechanicalDisk;
    let s = spec("wd800-fs2-mechanical");
    let d = MechanicalDisk::from_toml(&s.timing).unwrap_or_else(|e| panic!("{e}"));
    // Exactly the IDEMA block count of 80.0 GB: FS2's "78.15 GB".
    assert_eq!(d.layout().blocks(), 156_301_488);
    assert_eq!(d.capacity() / 1_024_000_000, 78);
    assert_eq!((d.capacity() % 1_024_000_000) / 10_000_000, 15);
    // 7200 RPM: 8.333 ms a revolution, 4.1667 ms average rotational delay.
    close(
        d.period_ms() / 2.0,
        30_000.0 / 7200.0,
        1e-12,
        "half a revolution (ms)",
    );
    // Seek anchors of Table 5.1 on cylinder distances: track-to-track 2.0 ms, full stroke
    // 21 ms, and 9.9 ms the mean over two uniform random cylinders (distance d with
    // probability 2(C − d)/C², C = 55,232), as the parametric entry reads "average".
    let seek = d.seek_curve();
    let cyls = s.timing["cylinders"].as_integer().unwrap() as u32;
    let full = cyls - 1;
    assert_eq!(seek.time_ms(1), 2.0);
    assert_eq!(seek.time_ms(full), 21.0);
    let c = cyls as f64;
    let mean: f64 = (1..cyls)
        .map(|d| 2.0 * (c - d as f64) / (c * c) * seek.time_ms(d))
        .sum();
    close(mean, 9.9, 0.01, "mean seek over random cylinder pairs (ms)");
    // A concave curve puts the seek at a third of the stroke above its mean.
    assert!(seek.time_ms(full / 3) > 10.2, "{}", seek.time_ms(full / 3));
    // Between the anchors, Lee and Katz's three-point curve 2 + b·√x + c·x with
    // x = (d − 1)/55,230, b = (−10·2 + 15·9.9 − 5·21)/3 = 7.8333 and
    // c = (7·2 − 15·9.9 + 8·21)/3 = 11.1667, hand-computed: e.g. d = 1,000: x = 0.018088,
    // 2 + 7.8333 × 0.13449 + 11.1667 × 0.018088 = 3.2555 ms.
    for (d, ms) in [
        (100u32, 2.3517),
        (1_000, 3.2555),
        (4_224, 5.0199),
        (30_000, 13.8385),
    ] {
        close(
            seek.time_ms(d),
            ms,
            0.01,
            &format!("seek over {d} cylinders (ms)"),
        );
    }
    // Outer zone: 879 sectors a revolution = 879 × 512 B × 120 /s = 54.0 MB/s.
    let outer = d.layout().blocks_per_track(0, 0) as f64 * 512.0 * 120.0;
    close(outer / 1e6, 54.0, 0.01, "outer-zone media rate (MB/s)");
    let inner = d.layout().blocks_per_track(full, 0) as f64 * 512.0 * 120.0;
    close(inner / 1e6, 32.94, 0.01, "inner-zone media rate (MB/s)");
    // The power table is FS2's, as in the parametric entry.
    assert_eq!(s.power, spec("wd800-fs2").power);
}

/// The DiskSim-validated drives (timing imported from DiskSim's files, checked against
/// the import in `mechanical_validation.rs`): mechanical models with a power table whose
/// every value is tagged, and a finite spin-down break-even.
#[test]
fn disksim_validated_drives_are_runnable_mechanical_entries() {
    for name in [
        "quantum-atlas-iii",
        "seagate-barracuda-st32171w",
        "seagate-cheetah-st34501n",
        "quantum-atlas-10k",
        "hp-c2247a",
        "hp-c2490a",
        "dec-rz26",
    ] {
        let s = spec(name);
        assert_eq!(s.model(), "hdd-mechanical", "{name}");
        let t = s.build_timing().unwrap_or_else(|e| panic!("{e}"));
        assert!(t.geometry().is_some(), "{name}: no geometry");
        let mut problems = provenance_problems(&s, true);
        problems.retain(|p| !p.contains("timing."));
        assert!(problems.is_empty(), "{problems:#?}");
        let p = power(name);
        // Stand-in table (docs/catalogue.md): 13.6 W spinning, 4 W stopped, spin-up
        // 28 W × 12 s, spin-down 1 s at idle power: (13.6 + 336 − 4 × 13) / 9.6 s.
        close(
            break_even_s(&p, "standby"),
            (13.6 + 336.0 - 4.0 * 13.0) / 9.6,
            1e-6,
            name,
        );
    }
}

#[test]
fn laptop_disk_break_even_by_hand() {
    // WD400VE: idle 0.85 W, standby 0.25 W; spin-down 1 s / 0.85 J; spin-up 3 s / 13.5 J.
    // T = (0.85 + 13.5 − 0.25 × (1 + 3)) / (0.85 − 0.25) = 13.35 / 0.6 = 22.25 s.
    let p = power("wd400ve");
    assert_eq!(
        p.break_even(p.state_id("standby").unwrap_or(0)),
        Some(22_250_000_000)
    );
    assert_eq!(p.deepest_sleep(), p.state_id("standby"));
    // MK1234GSX: idle 0.65 W → (0.65 + 13.5 − 1.0) / 0.4 = 32.875 s.
    let p = power("toshiba-mk1234gsx");
    assert_eq!(
        p.break_even(p.state_id("standby").unwrap_or(0)),
        Some(32_875_000_000)
    );
    // 5400 RPM: 5.556 ms average rotational latency.
    let d = ParametricHdd::from_toml(&spec("toshiba-mk1234gsx").timing)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.half_rotation(), 5_555_556);
    assert_eq!(d.capacity(), 234_441_648 * 512);
}

#[test]
fn paraid_eq2_savings_from_the_map3367_entry() {
    let p = power("fujitsu-map3367");
    let (standby, idle, active) = (watts(&p, "standby"), watts(&p, "idle"), watts(&p, "active"));
    // PARAID Eq. 2: 1 − ((D − G1)·P_standby + G1·P) / (D·P).
    let savings = |d: f64, g1: f64, pw: f64| 1.0 - ((d - g1) * standby + g1 * pw) / (d * pw);
    let pct = |x: f64| (x * 1000.0).round() / 10.0;
    // Paper: "33 to 42%" for D = 5, G1 = 2; "22 to 28%" for G1 = 3.
    assert_eq!(pct(savings(5.0, 2.0, idle)), 33.2);
    assert_eq!(pct(savings(5.0, 2.0, active)), 41.9);
    assert_eq!(pct(savings(5.0, 3.0, idle)), 22.2);
    assert_eq!(pct(savings(5.0, 3.0, active)), 27.9);
    assert_eq!(p.rated_start_stop, Some(20_000));
    // Break-even by hand: (6.5 + 330 − 2.9 × (1 + 15)) / (6.5 − 2.9) = 290.1 / 3.6 = 80.583 s.
    close(
        break_even_s(&p, "standby"),
        290.1 / 3.6,
        1e-6,
        "MAP3367 break-even (s)",
    );
    // Spin-up draws the midpoint of the measured 20–24 W.
    let up = &p.transitions[p
        .transition(p.state_id("standby").unwrap_or(0), p.idle)
        .unwrap_or(0)];
    close(up.watts(), 22.0, 1e-9, "MAP3367 spin-up power (W)");
    assert!(up.spin_up);
    // 71,775,284 blocks of 512 B; 10,025 RPM → 2.993 ms average rotational latency.
    let d =
        ParametricHdd::from_toml(&spec("fujitsu-map3367").timing).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.capacity(), 71_775_284 * 512);
    assert_eq!(d.half_rotation(), 2_992_519);
}

#[test]
fn constellation_powerchoice_states_by_hand() {
    let p = power("seagate-constellation-es3-4tb");
    // Power from Table 2 currents: deeper conditions draw less.
    let order = ["active", "idle", "idle_a", "idle_b", "idle_c", "standby"];
    for w in order.windows(2) {
        assert!(
            watts(&p, w[0]) > watts(&p, w[1]),
            "{} should draw more than {}",
            w[0],
            w[1]
        );
    }
    close(watts(&p, "idle"), 0.28 * 5.0 + 0.50 * 12.0, 1e-9, "idle W");
    close(
        watts(&p, "idle_c"),
        0.15 * 5.0 + 0.27 * 12.0,
        1e-9,
        "idle_c W",
    );
    let sleeps: Vec<&str> = p
        .sleep_states()
        .iter()
        .map(|&s| p.states[s as usize].name.as_str())
        .collect();
    assert_eq!(sleeps, ["standby", "idle_c", "idle_b", "idle_a"]);
    // Only standby stops the spindle, so only its exit is a start/stop cycle.
    let spin_ups: Vec<&str> = p
        .transitions
        .iter()
        .filter(|t| t.spin_up)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(spin_ups, ["spin_up"]);
    // Break-even, by hand:
    // standby: (148 + 427.8 − 0.87 × 35) / (7.4 − 0.87) = 545.35 / 6.53 = 83.5145 s
    close(
        break_even_s(&p, "standby"),
        545.35 / 6.53,
        1e-6,
        "standby break-even",
    );
    // idle_c: (0 + 57.04 − 3.99 × 2) / (7.4 − 3.99) = 49.06 / 3.41 = 14.3871 s
    close(
        break_even_s(&p, "idle_c"),
        49.06 / 3.41,
        1e-6,
        "idle_c break-even",
    );
    // idle_b: (3.7 − 6.2 × 0.5) / 1.2 = 0.5 s, equal to its round trip.
    close(break_even_s(&p, "idle_b"), 0.5, 1e-9, "idle_b break-even");
    assert_eq!(p.rated_start_stop, Some(600_000));
}

#[test]
fn nvme_apst_and_usb_suspend_pay_off_after_their_round_trip() {
    // With transitions charged at idle power, sleeping saves energy as soon as the gap
    // covers entry + exit: the break-even is exactly the round trip.
    let p = power("samsung-980-pro-1tb");
    close(break_even_s(&p, "ps3"), 0.0032, 1e-9, "PS3 break-even");
    close(break_even_s(&p, "ps4"), 0.0100, 1e-9, "PS4 break-even");
    assert_eq!(p.deepest_sleep(), p.state_id("ps4"));
    let p = power("sandisk-cruzer-micro-2gb");
    close(
        break_even_s(&p, "suspend"),
        0.033,
        1e-9,
        "USB suspend break-even",
    );
    // The CF card's sleep is free to enter and leave.
    let p = power("sandisk-ultra-cf-2gb");
    assert_eq!(p.break_even(p.state_id("sleep").unwrap_or(0)), Some(0));
}

fn service_us(f: &mut Flash, op: Op, len: u32) -> f64 {
    service_at_us(f, op, 0, len)
}

fn service_at_us(f: &mut Flash, op: Op, offset: u64, len: u32) -> f64 {
    f.service(0, &Request::new(0, op, offset, len).io(0))
        .total() as f64
        / 1e3
}

#[test]
fn flash_fits_reproduce_their_datapoints() {
    // Samsung 980 PRO: QD1 4 KiB random read 22,000 IOPS and write 60,000 IOPS; 1 MiB at
    // the rated 7,000 / 5,000 MB/s.
    let mut f =
        Flash::from_toml(&spec("samsung-980-pro-1tb").timing).unwrap_or_else(|e| panic!("{e}"));
    close(
        service_us(&mut f, Op::Read, 4096),
        1e6 / 22_000.0,
        0.01,
        "4K read",
    );
    close(
        service_us(&mut f, Op::Write, 4096),
        1e6 / 60_000.0,
        0.01,
        "4K write",
    );
    close(
        service_us(&mut f, Op::Read, 1 << 20),
        1048576.0 / 7000.0,
        0.05,
        "1M read",
    );
    close(
        service_us(&mut f, Op::Write, 1 << 20),
        1048576.0 / 5000.0,
        0.05,
        "1M write",
    );
    // Cruzer Micro: 563,649 reads/min and 13,913 writes/min of 512 B; 16 / 17 MB/s.
    let mut f = Flash::from_toml(&spec("sandisk-cruzer-micro-2gb").timing)
        .unwrap_or_else(|e| panic!("{e}"));
    close(
        service_us(&mut f, Op::Read, 512),
        60e6 / 563_649.0,
        0.01,
        "512 B read",
    );
    close(
        service_us(&mut f, Op::Write, 512),
        60e6 / 13_913.0,
        0.05,
        "512 B write",
    );
    close(
        service_us(&mut f, Op::Read, 131_072),
        131_072.0 / 16.0,
        0.05,
        "128K read",
    );
    close(
        service_us(&mut f, Op::Write, 131_072),
        131_072.0 / 17.0,
        0.05,
        "128K write",
    );
    // Ultra II CF: 10 MB/s read, 9 MB/s write, no per-page cost.
    let mut f =
        Flash::from_toml(&spec("sandisk-ultra-cf-2gb").timing).unwrap_or_else(|e| panic!("{e}"));
    close(
        service_us(&mut f, Op::Read, 1_000_000),
        100_000.0,
        1e-3,
        "1 MB CF read",
    );
    close(
        service_us(&mut f, Op::Write, 900_000),
        100_000.0,
        1e-3,
        "0.9 MB CF write",
    );
}

fn write_at_us(f: &mut Flash, offset: u64, len: u32) -> f64 {
    service_at_us(f, Op::Write, offset, len)
}

#[test]
fn the_cf_cards_log_block_ftl_charges_merges_for_scattered_writes() {
    // sandisk-ultra-cf-2gb: 9 MB/s, 128 KiB erase blocks of 2 KiB pages, 4 log blocks,
    // a copy 225 µs, an erase 2 ms. 4 KiB written at 9 MB/s: 455.11 µs.
    let mut f =
        Flash::from_toml(&spec("sandisk-ultra-cf-2gb").timing).unwrap_or_else(|e| panic!("{e}"));
    let w4k = 4096.0 / 9.0;
    // Pages 1–2 of four erase blocks: four logs, out of page order, no merge yet.
    for b in 0..4u64 {
        close(
            write_at_us(&mut f, b * 131_072 + 2048, 4096),
            w4k,
            1e-3,
            "log taken",
        );
    }
    // A fifth block: the least recent log is merged in full, 64 copies and one erase
    // beyond the write: 64 × 225 + 2,000 = 16,400 µs (times to the nanosecond).
    close(
        write_at_us(&mut f, 4 * 131_072 + 2048, 4096),
        w4k + 16_400.0,
        1e-3,
        "full merge",
    );
    // A whole aligned block still needs a log: it evicts the next least recent (another
    // full merge), fills its log in order and replaces its data block without a copy.
    close(
        write_at_us(&mut f, 100 * 131_072, 131_072),
        131_072.0 / 9.0 + 16_400.0,
        1e-3,
        "aligned block after an eviction",
    );
    // That switch freed its log: the next aligned block takes it and costs the rate alone.
    close(
        write_at_us(&mut f, 101 * 131_072, 131_072),
        131_072.0 / 9.0,
        1e-3,
        "aligned block into a free log",
    );
    let counters: std::collections::HashMap<String, f64> = f.counters().into_iter().collect();
    assert_eq!(counters["ftl_full_merges"], 2.0);
    assert_eq!(counters["ftl_switch_merges"], 2.0);
    assert_eq!(counters["ftl_pages_copied"], 128.0);
    assert_eq!(counters["ftl_blocks_erased"], 6.0);
}

#[test]
fn constellation_zoned_rate_spans_the_datasheet_range() {
    let d = ParametricHdd::from_toml(&spec("seagate-constellation-es3-4tb").timing)
        .unwrap_or_else(|e| panic!("{e}"));
    // 175 MB/s at the outer diameter, 83 MB/s at the inner.
    assert_eq!(d.transfer_time(0, 175_000), 1_000_000);
    assert_eq!(d.transfer_time(d.capacity(), 83_000), 1_000_000);
    assert_eq!(d.capacity(), 7_814_037_168 * 512);
}

#[test]
fn names_are_kebab_case_and_documented() {
    let docs_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/catalogue.md");
    let docs = std::fs::read_to_string(docs_path).unwrap_or_else(|e| panic!("{docs_path}: {e}"));
    for name in catalogue().names() {
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !name.starts_with('-')
                && !name.ends_with('-'),
            "catalogue name `{name}` is not kebab-case"
        );
    }
    for name in OWNED {
        assert!(
            docs.contains(&format!("| `{name}` |")),
            "docs/catalogue.md has no table row for {name}"
        );
    }
}
