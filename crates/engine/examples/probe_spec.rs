//! Probe every DiskSim validation drive (both phases), write its spec, and compare it with
//! the drive: extracted values against the model's, and the demerit on the drive's
//! validation trace. Prints the table of `docs/functions/geometry-probe.md`.
//! `cargo run --release -p wattio-engine --example probe_spec [DIR] [DRIVE…]`
use std::path::PathBuf;
use wattio_engine::probe::check_spec;
use wattio_functions::geometry::probe::Params;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/disksim-valid"));
    let mut drives: Vec<String> = args.collect();
    if drives.is_empty() {
        // `ascii` has no validation trace in this format.
        drives = [
            "atlas10k",
            "atlas_III",
            "barracuda",
            "cheetah4LP",
            "dec_rz26",
            "hp_c2247a",
            "hp_c2490a",
        ]
        .map(String::from)
        .to_vec();
    }
    println!("| drive | rpm model / probed | surfaces | head switch + settle (ms) | zones | zone 0 bpt, track / cyl skew: model | probed | phase-2 writes | demerit model / spec / spec vs model (ms) |");
    println!("|---|---|---|---|---|---|---|---:|---|");
    for d in drives {
        let t = std::time::Instant::now();
        match check_spec(
            &dir.join(format!("{d}.parv")),
            &dir.join(format!("{d}.trace")),
            Params::default(),
        ) {
            Ok(c) => {
                let z = |m: &wattio_engine::probe::Mechanism| {
                    m.zones.first().map_or(String::new(), |z| {
                        format!("{}, {:.2} / {:.2}", z.0, z.1, z.2)
                    })
                };
                println!(
                    "| {d} | {:.1} / {:.1} | {} / {} | {:.3} / {:.3} | {} / {} | {} | {} | {} | {:.3} / {:.3} / {:.3} |",
                    c.model.rpm,
                    c.probed.rpm,
                    c.model.surfaces,
                    c.probed.surfaces,
                    c.model.head_switch_ms,
                    c.probed.head_switch_ms,
                    c.model.zones.len(),
                    c.probed.zones.len(),
                    z(&c.model),
                    z(&c.probed),
                    c.mechanics_writes,
                    c.demerit_model_ms,
                    c.demerit_spec_ms,
                    c.demerit_spec_model_ms,
                );
                eprintln!("{d}: {:?}", t.elapsed());
            }
            Err(e) => println!("| {d} | error: {e} |"),
        }
    }
}
