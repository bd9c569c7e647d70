//! Runs every committed fuzz seed through the fuzz entry point, so CI exercises the corpus
//! without fuzzing; and pins what the parser makes of the main seed.

use std::path::{Path, PathBuf};
use wattio_devices::disksim::{convert, fuzz_entry, libparam};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/disksim_import")
}

/// Parse and convert the corpus seed `name` (files it sources are not loaded).
fn import_seed(name: &str) -> Result<wattio_devices::disksim::Import, String> {
    let text = std::fs::read_to_string(corpus().join(name)).unwrap();
    let doc = libparam::parse(&text, name, Path::new("."), &mut libparam::NoLoader).unwrap();
    convert(&doc, Path::new("."), &mut libparam::NoLoader)
}

#[test]
fn corpus_runs_clean() {
    let mut n = 0;
    for e in std::fs::read_dir(corpus()).unwrap() {
        let p = e.unwrap().path();
        fuzz_entry(&std::fs::read(&p).unwrap());
        n += 1;
    }
    assert!(n >= 5, "{n} seeds");
}

#[test]
fn small_disk_seed_converts() {
    let imp = import_seed("small_disk.parv").unwrap();
    assert_eq!(imp.name, "D");
    assert_eq!(imp.timing.surfaces, 2);
    assert_eq!(imp.timing.layout.zones[0].defects, vec![[5, 7]]);
    assert_eq!(imp.timing.controller.bus_ms_per_sector, 0.1);
    assert_eq!(imp.timing.cache.continuous_read, 4);
    // 10 cylinders × 2 × 100 − 2 spares per 1-cylinder range.
    let disk = wattio_devices::mechanical::MechanicalDisk::new(imp.timing).unwrap();
    assert_eq!(disk.layout().blocks(), 2000 - 20);
}

#[test]
fn bad_scheme_is_an_error_naming_the_key() {
    let e = import_seed("bad_scheme.parv").unwrap_err();
    assert!(
        e.starts_with("bad_scheme.parv:1:") && e.contains("`Mechanical Model`"),
        "{e}"
    );
}

#[test]
fn import_round_trips_through_catalogue_toml() {
    let imp = import_seed("small_disk.parv").unwrap();
    let out = imp.to_toml("small_disk.parv").unwrap();
    let back: toml::Table = toml::from_str(&out).unwrap();
    assert_eq!(back["kind"].as_str(), Some("hdd"));
    let timing = back["timing"].as_table().unwrap();
    let d = wattio_devices::mechanical::MechanicalDisk::from_toml(timing).unwrap();
    assert_eq!(d.layout().blocks(), 1980);
}

/// `wattio disk import NAME.parv --power-from MODEL`: the imported timing with a catalogue
/// entry's `[power]` table is an entry that builds both faces and keeps the power table.
#[test]
fn import_with_power_from_is_a_runnable_entry() {
    let imp = import_seed("small_disk.parv").unwrap();
    let cat = wattio_devices::catalogue::Catalogue::embedded().unwrap();
    let wd = cat.get("wd800-fs2").unwrap();
    let out = imp.to_toml_with_power("small_disk.parv", Some(wd)).unwrap();
    let spec = wattio_devices::catalogue::DeviceSpec::from_toml("out", &out).unwrap();
    assert_eq!(spec.model(), "hdd-mechanical");
    assert_eq!(spec.build_timing().unwrap().capacity(), 1980 * 512);
    assert_eq!(spec.power, wd.power);
    assert!(
        spec.description.contains("`wd800-fs2`"),
        "{}",
        spec.description
    );
    assert!(spec.references.len() > wd.references.len());
    // Without a power source the import is the timing alone, as before.
    let bare = imp.to_toml("small_disk.parv").unwrap();
    assert!(wattio_devices::catalogue::DeviceSpec::from_toml("bare", &bare).is_err());
}

/// A drive whose layout is a `dm_layout_g4` index tree (DIXtrac's form): two surfaces,
/// three cylinders of 4-sector tracks, LBNs down the band on surface 0 and up it on
/// surface 1, tree LBN 5 slipped. Every value below is worked out by hand from the seed.
#[test]
fn tree_disk_seed_converts() {
    let imp = import_seed("tree_disk.parv").unwrap();
    assert!(imp.unsupported.is_empty(), "{:?}", imp.unsupported);
    let tree = imp.timing.layout.tree.as_ref().unwrap();
    assert_eq!(
        (tree.blocks, tree.tracks.len(), tree.nodes.len()),
        (23, 1, 2)
    );
    assert_eq!(tree.slips, vec![[5, 1]]);
    // The catalogue form reads back to the same drive.
    let back: toml::Table = toml::from_str(&imp.to_toml("tree_disk.parv").unwrap()).unwrap();
    let d =
        wattio_devices::mechanical::MechanicalDisk::from_toml(back["timing"].as_table().unwrap())
            .unwrap();
    let l = d.layout();
    assert_eq!(l.blocks(), 23);
    let at = |lbn| l.ltop(lbn).map(|p| (p.cyl, p.head, p.sector));
    // Surface 0 walks cylinders 2, 1, 0; LBN 5 and on sit one position later (the slip).
    assert_eq!(at(0), Some((2, 0, 0)));
    assert_eq!(at(4), Some((1, 0, 0)));
    assert_eq!(at(5), Some((1, 0, 2)));
    assert_eq!(at(10), Some((0, 0, 3)));
    // Surface 1 walks them back up.
    assert_eq!(at(11), Some((0, 1, 0)));
    assert_eq!(at(22), Some((2, 1, 3)));
    assert_eq!(at(23), None);
    // Angles: instance offset + turn per cylinder walked + the sector's place.
    let p = |cyl, head, sector| wattio_devices::mechanical::layout::Pbn { cyl, head, sector };
    assert!((l.angle(p(2, 0, 0)) - 0.0).abs() < 1e-12);
    assert!((l.angle(p(1, 0, 1)) - 0.5).abs() < 1e-12);
    assert!((l.angle(p(0, 0, 3)) - 0.25).abs() < 1e-12);
    assert!((l.angle(p(2, 1, 3)) - 0.75).abs() < 1e-12);
    assert_eq!(l.blocks_per_track(1, 1), 4);
    // A slip on the drive: the contiguity fast path is off, the search finds the run.
    assert_eq!(l.track_usable(p(1, 0, 0)), None);
    assert_eq!(l.zone_of_cyl(1), Some(0));
}

/// A 4-column seek file (WD DiskSim's "dual seek": write seek times in the 4th column)
/// imports with the read times and says the write column goes unused.
#[test]
fn a_dual_seek_file_says_its_write_column_is_not_used() {
    struct Mem;
    impl libparam::Loader for Mem {
        fn load(&mut self, path: &Path) -> Result<String, String> {
            match path.file_name().and_then(|n| n.to_str()) {
                Some("dual.seek") => {
                    Ok("Seek distances measured: 2\n1, 1.0, 0.1, 1.2\n10, 3.0, 0.2, 3.3\n".into())
                }
                _ => Err(format!("{}: not here", path.display())),
            }
        }
    }
    let text = std::fs::read_to_string(corpus().join("small_disk.parv"))
        .unwrap()
        .replace(
            "Seek type = hplplus10,",
            "Seek type = extracted,\n      Full seek curve = dual.seek,",
        );
    let doc = libparam::parse(&text, "d.parv", Path::new("."), &mut Mem).unwrap();
    let imp = convert(&doc, Path::new("."), &mut Mem).unwrap();
    match &imp.timing.seek {
        wattio_devices::mechanical::seek::SeekDef::Extracted { table } => {
            assert_eq!(table, &vec![(1, 1.0), (10, 3.0)])
        }
        other => panic!("{other:?}"),
    }
    assert!(
        imp.unsupported
            .iter()
            .any(|u| u.starts_with("dual.seek: its 4th column")),
        "{:?}",
        imp.unsupported
    );
}

#[test]
fn write_back_keys_import_and_write_on_arrival_is_reported_only_past_one_command() {
    // The small drive with DiskSim's prebuffering keys, and `Immediate buffer write`
    // (no effect in DiskSim 4.0 for a drive holding one command: docs/validation.md).
    let with = |queue: u32| {
        let text = std::fs::read_to_string(corpus().join("small_disk.parv"))
            .unwrap()
            .replace(
                "Fast write level = 2",
                &format!(
                    "Fast write level = 2,\n  Allow write prebuffering = 1,\n  \
                     Maximum number of write segments = 2,\n  Max queue length = {queue},\n  \
                     Immediate buffer write = 1"
                ),
            );
        let doc =
            libparam::parse(&text, "d.parv", Path::new("."), &mut libparam::NoLoader).unwrap();
        convert(&doc, Path::new("."), &mut libparam::NoLoader).unwrap()
    };
    let one = with(1);
    assert!(one.unsupported.is_empty(), "{:?}", one.unsupported);
    let c = &one.timing.cache;
    assert!(c.write_prebuffering);
    assert_eq!(
        (c.write_segments, one.timing.controller.queue_depth),
        (2, 1)
    );
    let eight = with(8);
    assert_eq!(
        eight.unsupported,
        vec!["Immediate buffer write = 1 (d.parv:26) with Max queue length = 8".to_string()]
    );
}

/// The small drive holding `queue` commands, with its own `Scheduler` policy `disk` and a
/// device driver whose `Scheduler` has policy `driver` (`None`: no driver block).
fn queued(queue: u32, disk: u32, driver: Option<u32>) -> wattio_devices::disksim::Import {
    let mut text = std::fs::read_to_string(corpus().join("small_disk.parv"))
        .unwrap()
        .replace(
            "Fast write level = 2",
            &format!(
                "Fast write level = 2,\n  Max queue length = {queue},\n  \
                 Scheduler = disksim_ioqueue {{ Scheduling policy = {disk} }}"
            ),
        );
    if let Some(p) = driver {
        text = format!(
            "disksim_iodriver DRIVER0 {{\n  type = 1,\n  \
             Scheduler = disksim_ioqueue {{ Scheduling policy = {p} }}\n}}\n{text}\
             instantiate [ driver0 ] as DRIVER0\n"
        );
    }
    let doc = libparam::parse(&text, "d.parv", Path::new("."), &mut libparam::NoLoader).unwrap();
    convert(&doc, Path::new("."), &mut libparam::NoLoader).unwrap()
}

#[test]
fn the_queue_order_is_the_drivers_for_one_command_and_the_drives_past_it() {
    let order = |imp: &wattio_devices::disksim::Import| imp.timing.scheduler.clone();
    // No driver block (a bare diskspecs): the drive's own policy.
    let alone = queued(1, 3, None);
    assert_eq!(order(&alone), "clook");
    assert!(alone.unsupported.is_empty(), "{:?}", alone.unsupported);
    // With a driver, the drive's policy orders nothing it holds one command at a time.
    assert_eq!(order(&queued(1, 3, Some(1))), "fcfs");
    // A drive holding one command takes requests in the driver's order (DiskSim's
    // cheetah4LP.parv with the driver at 2, 3 or 4: docs/validation.md, "Queue order").
    for (policy, name) in [(1, "fcfs"), (2, "look"), (3, "clook"), (4, "sstf-lbn")] {
        let imp = queued(1, 1, Some(policy));
        assert_eq!(order(&imp), name);
        assert!(imp.unsupported.is_empty(), "{:?}", imp.unsupported);
    }
    // A policy the model does not have is named, with whose queue it orders, and the
    // requests are served first come, first served.
    let sptf = queued(1, 1, Some(8));
    assert_eq!(order(&sptf), "fcfs");
    assert_eq!(sptf.unsupported.len(), 1, "{:?}", sptf.unsupported);
    let u = &sptf.unsupported[0];
    assert!(
        u.starts_with("Scheduler.Scheduling policy = 8 (d.parv:3)")
            && u.contains("the device driver's queue"),
        "{u}"
    );
    // A drive with a deeper queue orders it itself; a driver that reorders too is
    // reported (the model has one queue).
    let deep = queued(8, 2, Some(1));
    assert_eq!(order(&deep), "look");
    assert!(deep.unsupported.is_empty(), "{:?}", deep.unsupported);
    let both = queued(8, 4, Some(3));
    assert_eq!(order(&both), "sstf-lbn");
    assert_eq!(both.unsupported.len(), 1, "{:?}", both.unsupported);
    assert!(
        both.unsupported[0].contains("in front of a drive that queues 8 commands"),
        "{:?}",
        both.unsupported
    );
}
