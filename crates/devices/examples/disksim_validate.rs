//! Validate every drive in a DiskSim validation folder and print a table.
//! `cargo run --release -p wattio-devices --example disksim_validate [DIR]`
use std::path::PathBuf;
use wattio_devices::disksim::validate::validate;

use wattio_devices::disksim::validate::DISKSIM_DEMERIT_MS as DRIVES;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/disksim-valid"));
    println!(
        "| drive | demerit (ms) | DiskSim (ms) | mean sim / meas (ms) | p90 sim / meas (ms) |"
    );
    println!("|---|---|---|---|---|");
    for (d, ref_dem) in DRIVES {
        match validate(
            &dir.join(format!("{d}.parv")),
            &dir.join(format!("{d}.trace")),
        ) {
            Ok(v) => println!(
                "| {d} | {:.3} | {ref_dem:.3} | {:.3} / {:.3} | {:.3} / {:.3} |",
                v.demerit_ms, v.mean_sim_ms, v.mean_measured_ms, v.p90_sim_ms, v.p90_measured_ms
            ),
            Err(e) => println!("| {d} | error: {e} |"),
        }
    }
}
