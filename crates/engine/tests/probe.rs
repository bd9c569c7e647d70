//! The geometry probe against mechanical models whose layout is known: every track
//! boundary it reports must be the model's.

use std::path::Path;
use wattio_core::device::Timing;
use wattio_devices::disksim::import_parv;
use wattio_devices::mechanical::layout::{LayoutDef, Zone};
use wattio_devices::mechanical::seek::SeekDef;
use wattio_devices::mechanical::{CacheDef, ControllerDef, MechanicalDef, MechanicalDisk};
use wattio_engine::probe::{model_runs, probe, runs_with_tail};
use wattio_functions::geometry::probe::{Params, Report, TrackRun};

/// The model's own track runs over `lbas` (from its geometry).
fn truth(disk: &MechanicalDisk, lbas: std::ops::Range<u64>) -> Vec<TrackRun> {
    model_runs(&*disk.geometry().unwrap(), lbas).unwrap()
}

/// Probe `[0, end)` and compare with the truth: every run but the last (whose final
/// track has no boundary after it) exactly, the last up to the probe's tail.
fn check(name: &str, def: MechanicalDef, end: u64) -> Report {
    let disk = MechanicalDisk::new(def.clone()).unwrap();
    let want = truth(&disk, 0..end);
    let params = Params {
        end_lba: Some(end),
        ..Params::default()
    };
    let r = probe(name, Box::new(disk), params).unwrap();
    assert!(r.done, "{name}: {:?}", r.stopped);
    assert_eq!(r.tail.expect("a tail").1, end - 1);
    let got = runs_with_tail(&r);
    if let Some(k) = (0..got.len().max(want.len())).find(|&k| got.get(k) != want.get(k)) {
        panic!(
            "{name}: probe and model differ from run {k}: probe {:?}, model {:?}",
            &got[k.saturating_sub(1)..(k + 3).min(got.len())],
            &want[k.saturating_sub(1)..(k + 3).min(want.len())]
        );
    }
    r
}

/// 7200 rpm, 4 surfaces, three zones (320, 300 and 260 sectors per track), skews of
/// 40 sectors per track switch and 60 per cylinder switch (≥ 1 ms: above the 500 µs
/// settle threshold), a write-back cache the probe's FUA writes must go through.
fn three_zones() -> MechanicalDef {
    let zone = |first_cyl, last_cyl, spt| Zone {
        first_cyl,
        last_cyl,
        blocks_per_track: spt,
        first_block_offset: 0.0,
        empty_front: 0,
        track_skew: 40.0 * spt as f64 / 320.0,
        cyl_skew: 60.0 * spt as f64 / 320.0,
        spares: 0,
        slips: vec![],
        defects: vec![],
    };
    MechanicalDef {
        model: "hdd-mechanical".into(),
        surfaces: 4,
        cylinders: 60,
        rpm: 7200.0,
        head_switch_ms: 0.8,
        write_settle_ms: 0.1,
        seek: SeekDef::Extracted {
            table: vec![(1, 0.9), (59, 6.0)],
        },
        layout: LayoutDef {
            tree: None,
            mapping: 0,
            sparing: 0,
            range_size: 1,
            zones: vec![zone(0, 19, 320), zone(20, 39, 300), zone(40, 59, 260)],
        },
        controller: ControllerDef {
            bus_ms_per_sector: 0.01,
            write_hit_after_write_ms: 0.2,
            write_miss_after_write_ms: 0.3,
            ..ControllerDef::default()
        },
        cache: CacheDef {
            enabled: true,
            segments: 4,
            segment_blocks: 512,
            separate_write_segment: false,
            read_water: 0.0,
            write_water: 0.0,
            continuous_read: 0,
            max_read_ahead: 0,
            read_ahead_over_requested: true,
            fast_write_level: 2,
            read_hits_on_write_data: true,
            read_ahead_on_idle_hit: false,
            zero_latency_read: false,
            read_any_free_blocks: false,
            write_prebuffering: false,
            write_segments: 0,
            stop_prefetch_in_sector: false,
        },
        scheduler: "fcfs".into(),
        sources: toml::Table::new(),
    }
}

#[test]
fn probe_finds_every_boundary_of_a_three_zone_disk() {
    let def = three_zones();
    let blocks = MechanicalDisk::new(def.clone()).unwrap().capacity() / 512;
    let r = check("three-zones", def, blocks);
    assert_eq!(
        r.zones(2),
        vec![
            (0, 20 * 4 * 320 - 1, 320),
            (25_600, 25_600 + 20 * 4 * 300 - 1, 300),
            // The last zone's final track is the tail.
            (49_600, 49_600 + 20 * 4 * 260 - 260 - 1, 260)
        ]
    );
}

/// DiskSim's validation drives, beside the checkout (`None`, said on stderr, when absent).
fn drives() -> Option<std::path::PathBuf> {
    // `DISKSIM_VALID` points elsewhere (a worktree whose parent has no `shared/`).
    let dir = std::env::var_os("DISKSIM_VALID").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/disksim-valid"),
        std::path::PathBuf::from,
    );
    if !dir.is_dir() {
        eprintln!(
            "skipped: {} is absent (the shared data beside the checkout)",
            dir.display()
        );
        return None;
    }
    Some(dir)
}

/// The real drives of DiskSim's validation set: zoned layouts with skews, spare
/// sectors and slips, as extracted from the drives.
#[test]
fn probe_recovers_the_disksim_validation_drives() {
    let Some(dir) = drives() else { return };
    let mut parvs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "parv"))
        .collect();
    parvs.sort();
    for parv in parvs {
        let name = parv.file_stem().unwrap().to_string_lossy().to_string();
        let imp = import_parv(&parv).unwrap();
        let blocks = MechanicalDisk::new(imp.timing.clone()).unwrap().capacity() / 512;
        let t = std::time::Instant::now();
        let r = check(&name, imp.timing, blocks);
        eprintln!(
            "{name}: {blocks} blocks, {} probes, {} runs, {} zones, {:.1} s simulated, {:?}",
            r.probes,
            r.runs.len(),
            r.zones(2).len(),
            r.finished_at_ns as f64 / 1e9,
            t.elapsed()
        );
    }
}

/// Every mechanical drive of the embedded catalogue (what users run: the DiskSim-validated
/// drives and FS2's WD 80 GB), probed over its whole capacity: every track run is the
/// model's, and so is every zone.
#[test]
fn probe_recovers_every_catalogue_mechanical_drive() {
    let cat = wattio_devices::catalogue::Catalogue::embedded().unwrap();
    let mut probed = Vec::new();
    for spec in cat.specs().filter(|s| s.model() == "hdd-mechanical") {
        let disk = MechanicalDisk::from_toml(&spec.timing).unwrap();
        let blocks = disk.capacity() / 512;
        let r = check(&spec.name, disk.def().clone(), blocks);
        // Zones as the layout defines them (adjacent zones with one SPT are one zone to a
        // timing probe), against the probe's zones of whole tracks.
        let mut want: Vec<u64> = disk
            .def()
            .layout
            .zones
            .iter()
            .map(|z| z.blocks_per_track as u64)
            .collect();
        want.dedup();
        let spares = disk
            .def()
            .layout
            .zones
            .iter()
            .any(|z| z.spares > 0 || !z.slips.is_empty());
        if !spares {
            let got: Vec<u64> = r.zones(2).iter().map(|z| z.2).collect();
            assert_eq!(got, want, "{}: zone SPTs", spec.name);
        }
        eprintln!(
            "{}: {blocks} blocks, {} probes, {} runs, {} zones, {:.1} s simulated",
            spec.name,
            r.probes,
            r.runs.len(),
            r.zones(2).len(),
            r.finished_at_ns as f64 / 1e9
        );
        probed.push(spec.name.clone());
    }
    // The catalogue's eight mechanical drives (a new one is probed too; one fewer is a
    // catalogue regression).
    assert!(probed.len() >= 8, "{probed:?}");
}

/// The placer's physical → logical lookup (a few lookups by estimate) finds the sector
/// nearest an angle as well as scanning the whole cylinder does, on real layouts with
/// skews, spares and slips.
#[test]
fn placer_lookup_matches_a_full_scan_on_real_layouts() {
    use wattio_functions::placement::replica::Placer;
    let Some(dir) = drives() else { return };
    for name in ["atlas10k", "barracuda", "cheetah4LP"] {
        let imp = import_parv(&dir.join(format!("{name}.parv"))).unwrap();
        let disk = MechanicalDisk::new(imp.timing).unwrap();
        let g = disk.geometry().unwrap();
        let p = Placer::new(&*g, disk.capacity(), 512).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let cyl = (x % p.cylinders() as u64) as u32;
            let surface = ((x >> 20) % p.surfaces() as u64) as u32;
            let angle = ((x >> 32) % 1000) as f64 / 1000.0;
            let dist = |lba: u64| {
                let l = g.locate(lba * 512).unwrap();
                let d = (l.angle - angle).rem_euclid(1.0);
                d.min(1.0 - d)
            };
            let (a, b) = p.cylinder_lbas(cyl);
            let full = (a..b)
                .filter(|&lba| g.locate(lba * 512).unwrap().surface == surface)
                .map(dist)
                .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.min(d))));
            let got = p.lba_at(cyl, surface, angle).map(dist);
            assert_eq!(
                got, full,
                "{name}: cylinder {cyl}, surface {surface}, angle {angle}"
            );
        }
    }
}

/// The second phase on `def`: probe, then the spec it writes.
fn mechanics(name: &str, def: &MechanicalDef, repeats: u32) -> (Report, MechanicalDef) {
    let disk = MechanicalDisk::new(def.clone()).unwrap();
    let params = Params {
        mechanics: true,
        repeats,
        ..Params::default()
    };
    let r = probe(name, Box::new(disk), params).unwrap();
    assert!(r.stopped.is_none(), "{name}: {:?}", r.stopped);
    let spec = wattio_engine::probe::drive_spec(&r).unwrap();
    (r, spec)
}

/// Known skews, surfaces, rotation, head switch, seeks and overhead come back (to one
/// sector time where the probe's offsets are whole sectors), and the spec it writes has
/// the model's own layout.
#[test]
fn second_phase_recovers_a_synthetic_drives_mechanics() {
    let mut def = three_zones();
    let (r, spec) = mechanics("three-zones", &def, 1);
    let m = r.mechanics.as_ref().unwrap();
    let period = 60e9 / 7200.0;
    assert!((m.rotation_ns - period).abs() < 1.0, "{}", m.rotation_ns);
    assert_eq!((m.surfaces, m.surfaces_found), (4, true));
    assert!(m.write_back, "the model has a write-back cache");
    let sect0 = period / 320.0;
    // Write-back drive: the hit overhead (0.2 ms) and the first sector's bus time (0.01).
    let o = 210_000.0;
    assert!(
        m.overhead_ns >= o - 1.0 && m.overhead_ns < o + sect0,
        "{}",
        m.overhead_ns
    );
    // Head switch 0.8 ms plus write settling 0.1; the least response and the overhead
    // are each found to a sector time above the truth, so their difference is within one.
    assert!(
        (m.head_switch_ns - 900_000.0).abs() < sect0,
        "{}",
        m.head_switch_ns
    );
    for (z, spt) in m.zones.iter().zip([320u64, 300, 260]) {
        assert_eq!((z.spt, z.sectors_per_rev), (spt, spt));
        assert!((z.sector_ns - period / spt as f64).abs() < 1.0);
        let k = spt as f64 / 320.0;
        assert_eq!((z.head_skew, z.cyl_skew), (40.0 * k, 60.0 * k));
    }
    // The seek table: 0.9 ms at 1 cylinder to 6.0 at 59, linear, plus settling.
    assert_eq!(m.seek.first().map(|s| s.0), Some(1));
    assert_eq!(m.seek.last().map(|s| s.0), Some(59));
    for &(d, t) in &m.seek {
        let want = 0.9 + (d - 1) as f64 * 5.1 / 58.0 + 0.1;
        // Zone 2's sectors are the longest.
        assert!(
            (t - want * 1e6).abs() < period / 260.0,
            "seek {d}: {t} ns, model {want} ms"
        );
    }
    // The spec: the model's layout, cylinder for cylinder.
    assert_eq!((spec.surfaces, spec.cylinders), (4, 60));
    assert_eq!(spec.layout.zones, def.layout.zones);
    assert!((spec.rpm - 7200.0).abs() < 1e-3, "{}", spec.rpm);
    assert_eq!(spec.cache.fast_write_level, 2);
    let disk = MechanicalDisk::new(spec).unwrap();
    assert_eq!(
        disk.capacity(),
        MechanicalDisk::new(def.clone()).unwrap().capacity()
    );

    // Four spare sectors at the end of every track: 316 LBAs a track in zone 0, a
    // revolution of 320 sectors; the spec must say so, with the model's skews.
    def.layout.sparing = wattio_devices::mechanical::layout::SECTPERTRACK_SPARING;
    for z in def.layout.zones.iter_mut() {
        z.spares = 4;
    }
    let (r, spec) = mechanics("three-zones-spares", &def, 1);
    let z0 = &r.mechanics.as_ref().unwrap().zones[0];
    assert_eq!((z0.spt, z0.sectors_per_rev), (316, 320));
    assert_eq!(spec.layout.zones, def.layout.zones);
}

/// The second phase on DiskSim's validation drives: the rotation, the surfaces and every
/// zone's blocks per track, head-switch and cylinder-switch skews are the model's own; the spec it writes
/// runs the drive's validation trace (its demerits are in the docs' table, printed here).
#[test]
fn second_phase_on_the_disksim_validation_drives() {
    let Some(dir) = drives() else { return };
    for d in [
        "atlas10k",
        "atlas_III",
        "barracuda",
        "cheetah4LP",
        "dec_rz26",
        "hp_c2247a",
        "hp_c2490a",
    ] {
        let c = wattio_engine::probe::check_spec(
            &dir.join(format!("{d}.parv")),
            &dir.join(format!("{d}.trace")),
            Params::default(),
        )
        .unwrap();
        eprintln!(
            "{d}: demerit model {:.3}, spec {:.3}, spec vs model {:.3} ms; {} second-phase writes",
            c.demerit_model_ms, c.demerit_spec_ms, c.demerit_spec_model_ms, c.mechanics_writes
        );
        assert!(
            (c.probed.rpm - c.model.rpm).abs() < 1e-3 * c.model.rpm,
            "{d}"
        );
        assert_eq!(c.probed.surfaces, c.model.surfaces, "{d}");
        // Adjacent zones with one SPT are one zone to a timing probe (atlas10k's 24
        // zones are 17 so), timed at the first's tracks; and a stretch of tracks with
        // slipped sectors inside a zone is a zone of its own in the spec (atlas10k),
        // with the revolution's sectors of the zone around it.
        let mut model = c.model.zones.clone();
        model.dedup_by(|b, a| a.0 == b.0);
        let mut probed = c.probed.zones.clone();
        probed.dedup_by(|b, a| a.0 == b.0);
        let bad: Vec<_> = model
            .iter()
            .zip(&probed)
            .enumerate()
            .filter(|(_, (m, p))| {
                m.0 != p.0 || (m.1 - p.1).abs() > 0.01 || (m.2 - p.2).abs() > 0.01
            })
            .collect();
        assert!(
            bad.is_empty() && model.len() == probed.len(),
            "{d}: zones (index, (model, probed)) differ: {bad:?}"
        );
    }
}
