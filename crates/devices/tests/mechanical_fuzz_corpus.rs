//! Runs every committed fuzz seed through the fuzz entry point, so CI exercises the corpus
//! without fuzzing; and pins what the parser makes of the main seed.

use std::path::{Path, PathBuf};
use wattio_devices::disksim::{convert, fuzz_entry, libparam};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/disksim_import")
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
    let text = std::fs::read_to_string(corpus().join("small_disk.parv")).unwrap();
    let doc = libparam::parse(
        &text,
        "small_disk.parv",
        Path::new("."),
        &mut libparam::NoLoader,
    )
    .unwrap();
    let imp = convert(&doc, Path::new("."), &mut libparam::NoLoader).unwrap();
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
    let text = std::fs::read_to_string(corpus().join("bad_scheme.parv")).unwrap();
    let doc = libparam::parse(&text, "bad.parv", Path::new("."), &mut libparam::NoLoader).unwrap();
    let e = convert(&doc, Path::new("."), &mut libparam::NoLoader).unwrap_err();
    assert!(
        e.starts_with("bad.parv:1:") && e.contains("`Mechanical Model`"),
        "{e}"
    );
}

#[test]
fn import_round_trips_through_catalogue_toml() {
    let text = std::fs::read_to_string(corpus().join("small_disk.parv")).unwrap();
    let doc = libparam::parse(
        &text,
        "small_disk.parv",
        Path::new("."),
        &mut libparam::NoLoader,
    )
    .unwrap();
    let imp = convert(&doc, Path::new("."), &mut libparam::NoLoader).unwrap();
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
    let text = std::fs::read_to_string(corpus().join("small_disk.parv")).unwrap();
    let doc = libparam::parse(
        &text,
        "small_disk.parv",
        Path::new("."),
        &mut libparam::NoLoader,
    )
    .unwrap();
    let imp = convert(&doc, Path::new("."), &mut libparam::NoLoader).unwrap();
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
