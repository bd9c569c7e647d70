//! The geometry probe live over NBD against an emulated catalogue drive, compared with the
//! model's own layout: the recipe behind docs/functions/geometry-probe.md's live table.
//!
//! ```text
//! cargo run --release -p wattio-live --example probe_live -- DRIVE [START END] [--runs N] [--thesis] [--spec TRACE]
//! ```
//!
//! Serves a sparse scratch image (in /dev/shm, or `WATTIO_PROBE_DIR`) with DRIVE's model emulated on TCP
//! loopback, probes it through the live executor (LBAs START..END, default the whole drive)
//! and prints, per run, whether every track run is the model's. `--thesis` probes with
//! `Params::thesis()` (the previous response as the reference, any change a candidate, one
//! miss drops it, one scan measures a track); by default with wattio's (median of three,
//! rises only, three retries, two scans that agree).

use std::path::Path;
use std::time::Duration;
use wattio_devices::catalogue::Catalogue;
use wattio_engine::probe::{model_runs, runs_with_tail};
use wattio_functions::geometry::probe::{Params, Report};
use wattio_live::server::{ListenAddr, Server};
use wattio_live::setup::{self, ServeSpec};

fn main() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |args: &mut Vec<String>, f: &str| -> bool {
        let n = args.len();
        args.retain(|a| a != f);
        args.len() != n
    };
    let thesis = flag(&mut args, "--thesis");
    // `--spec TRACE`: also the second phase, and the spec it gives against the served
    // model on the drive's DiskSim validation trace (demerit figures).
    let mut spec_trace = None;
    if let Some(k) = args.iter().position(|a| a == "--spec") {
        spec_trace = Some(std::path::PathBuf::from(
            args.get(k + 1).ok_or("--spec TRACE")?.clone(),
        ));
        args.drain(k..k + 2);
    }
    let mut runs = 1;
    if let Some(k) = args.iter().position(|a| a == "--runs") {
        runs = args
            .get(k + 1)
            .and_then(|v| v.parse().ok())
            .ok_or("--runs N")?;
        args.drain(k..k + 2);
    }
    let drive = args
        .first()
        .ok_or("usage: probe_live DRIVE [START END] [--runs N] [--thesis]")?
        .clone();
    let cat = Catalogue::embedded()?;
    let timing = cat.get(&drive)?.build_timing()?;
    let geometry = timing
        .geometry()
        .ok_or(format!("{drive} has no geometry"))?;
    let blocks = timing.capacity() / 512;
    let (start, end) = match (args.get(1), args.get(2)) {
        (Some(a), Some(b)) => (
            a.parse::<u64>().map_err(|e| format!("START: {e}"))?,
            b.parse::<u64>().map_err(|e| format!("END: {e}"))?,
        ),
        _ => (0, blocks),
    };
    let want = model_runs(&*geometry, start..end).ok_or("LBAs past the drive")?;
    // In memory where possible: an emulated write completes when its real write (and the
    // fdatasync of FUA) is done too, and a disk file system's syncs jitter by milliseconds.
    let base = match std::env::var_os("WATTIO_PROBE_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None if Path::new("/dev/shm").is_dir() => "/dev/shm".into(),
        None => std::env::temp_dir(),
    };
    let dir = base.join(format!("wattio-probe-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let img = dir.join("scratch.img");
    for run in 0..runs {
        // A fresh sparse image each run: only what the probe writes is allocated.
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(end * 512))
            .map_err(|e| e.to_string())?;
        let spec = ServeSpec {
            images: vec![img.clone()],
            model: Some(drive.clone().into()),
            emulate: true,
            workers: 2,
            ..ServeSpec::default()
        };
        let server = Server::start(setup::build(&spec)?, &ListenAddr::parse_tcp("127.0.0.1:0")?)?;
        let uri = format!("nbd://{}/scratch.img", server.addr());
        let params = Params {
            start_lba: start,
            end_lba: Some(end),
            mechanics: spec_trace.is_some(),
            ..if thesis {
                Params::thesis()
            } else {
                Params::default()
            }
        };
        let live = wattio_live::probe::probe(Path::new(&uri), params, Duration::from_secs(86_400));
        server.shutdown(Duration::from_secs(5))?;
        let live = live?;
        let r = &live.report;
        if let Some(t) = &spec_trace {
            report_spec(&drive, &cat, r, t)?;
        }
        let got = runs_with_tail(r);
        let first_diff = (0..got.len().max(want.len())).find(|&k| got.get(k) != want.get(k));
        let zones = r.zones(2);
        println!(
            "{drive} {}..{} run {run} ({}): {} probes, {} glitches, {} retried, {} scans \
             disagreed, {:.1} s wall \
             ({:.3} ms a probe), response steps {:?}, {} track runs, {} zones: {}",
            start,
            end,
            if thesis { "thesis" } else { "defaults" },
            r.probes,
            r.glitches,
            r.retried,
            r.disagreed,
            live.wall.as_secs_f64(),
            r.finished_at_ns as f64 / 1e6 / r.probes.max(1) as f64,
            r.response_steps,
            got.len(),
            zones.len(),
            match first_diff {
                None => "every track run is the model's".to_string(),
                Some(k) => format!(
                    "differs from run {k}: probe {:?}, model {:?}",
                    got.get(k),
                    want.get(k)
                ),
            }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The second phase's findings against the served model, and the spec's demerit.
fn report_spec(drive: &str, cat: &Catalogue, r: &Report, trace: &Path) -> Result<(), String> {
    let model = wattio_devices::mechanical::MechanicalDisk::from_toml(&cat.get(drive)?.timing)?
        .def()
        .clone();
    let c = wattio_engine::probe::check_report(&model, r, trace)?;
    println!(
        "{drive} spec: model {:?}\n  probed {:?}\n  phase-2 writes {}, demerit on {}: model {:.3} ms, spec {:.3} ms, spec vs model {:.3} ms",
        c.model,
        c.probed,
        c.mechanics_writes,
        trace.display(),
        c.demerit_model_ms,
        c.demerit_spec_ms,
        c.demerit_spec_model_ms
    );
    Ok(())
}
