//! `wattio-live`: the live-mode programs without Python (the `wattio serve` / `wattio replay`
//! commands call the same library; tests and benchmarks run this binary directly).
//!
//! ```text
//! wattio-live serve CONFIG --image DEVICE=FILE ... (--socket PATH | --listen 127.0.0.1:PORT)
//! wattio-live serve --image FILE [--image FILE ...] (--socket PATH | --listen 127.0.0.1:PORT)
//!     [--name NAME ...] [--direct] [--read-only] [--model DEVICE.toml [--no-emulate]] [--spindown SECONDS]
//!     [--capture PATH] [--out DIR] [--workers N] [--poll-us N] [--status SECONDS]
//! exposure and limits (both forms):
//!     [--allow-remote] [--tls off|on|require --tls-certificate PEM --tls-key PEM]
//!     [--max-connections N] [--conn-mib MIB] [--total-mib MIB]
//!     [--handshake-timeout SECONDS] [--reply-timeout SECONDS]
//! wattio-live replay TRACE --nbd URI [--speed X]
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use wattio_live::replay::{self, ReplayOptions, TextTrace};
use wattio_live::server::{Limits, ListenAddr, Server, ServerOptions};
use wattio_live::setup::{self, ServeSpec};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn usage() -> ! {
    eprintln!(
        "usage:\n  wattio-live serve CONFIG --image DEVICE=FILE [...] (--socket PATH | --listen HOST:PORT) [--capture PATH] [--out DIR]\n  wattio-live serve --image FILE [--image FILE ...] (--socket PATH | --listen HOST:PORT)\n      [--name NAME ...] [--direct] [--read-only] [--model DEVICE.toml [--no-emulate]] [--spindown SECONDS]\n      [--capture PATH] [--out DIR] [--workers N] [--poll-us N] [--status SECONDS]\n  exposure and limits: [--allow-remote] [--tls off|on|require --tls-certificate PEM --tls-key PEM]\n      [--max-connections N] [--conn-mib MIB] [--total-mib MIB] [--handshake-timeout S] [--reply-timeout S]\n  wattio-live replay TRACE --nbd URI [--speed X]"
    );
    std::process::exit(2)
}

fn main() {
    // glibc gives each thread that allocates its own arena, up to 8 per CPU, and an arena
    // keeps what it once held: under connection churn (a thread per connection) the
    // server's RSS then creeps far past the bytes its budgets let it hold at once (a 60 s
    // soak: 93 MiB resident for a 48 MiB budget). One arena per CPU keeps the two close.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    // SAFETY: mallopt before any other thread exists; it only tunes the allocator.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, cpus.max(2) as libc::c_int) };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("replay") => replay_cmd(&args[1..]),
        _ => usage(),
    };
    if let Err(e) = r {
        eprintln!("wattio-live: error: {e}");
        std::process::exit(2);
    }
}

fn value<'a>(args: &'a [String], i: &mut usize, flag: &str) -> Result<&'a str, String> {
    *i += 1;
    args.get(*i)
        .map(String::as_str)
        .ok_or_else(|| format!("{flag}: missing value"))
}

fn serve(args: &[String]) -> Result<(), String> {
    let mut spec = ServeSpec::default();
    let mut listen: Option<ListenAddr> = None;
    let mut out: Option<PathBuf> = None;
    let mut status = 1.0f64;
    let mut config: Option<PathBuf> = None;
    let mut allow_remote = false;
    let mut tls_mode = "off".to_string();
    let (mut tls_cert, mut tls_key): (Option<PathBuf>, Option<PathBuf>) = (None, None);
    let (mut conn_mib, mut total_mib, mut handshake_s, mut reply_s) = (None, None, None, None);
    let mut max_connections = None;
    let num = |flag: &str, v: &str| {
        v.parse::<f64>()
            .map_err(|_| format!("{flag} {v:?}: expected a number"))
    };
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--image" => spec.images.push(PathBuf::from(value(args, &mut i, a)?)),
            "--name" => spec.names.push(value(args, &mut i, a)?.to_string()),
            "--socket" => listen = Some(ListenAddr::Unix(PathBuf::from(value(args, &mut i, a)?))),
            "--listen" => listen = Some(ListenAddr::parse_tcp(value(args, &mut i, a)?)?),
            "--allow-remote" => allow_remote = true,
            "--tls" => tls_mode = value(args, &mut i, a)?.to_string(),
            "--tls-certificate" => tls_cert = Some(PathBuf::from(value(args, &mut i, a)?)),
            "--tls-key" => tls_key = Some(PathBuf::from(value(args, &mut i, a)?)),
            "--conn-mib" => conn_mib = Some(num(a, value(args, &mut i, a)?)?),
            "--total-mib" => total_mib = Some(num(a, value(args, &mut i, a)?)?),
            "--handshake-timeout" => handshake_s = Some(num(a, value(args, &mut i, a)?)?),
            "--reply-timeout" => reply_s = Some(num(a, value(args, &mut i, a)?)?),
            "--max-connections" => {
                let v = value(args, &mut i, a)?;
                max_connections = Some(
                    v.parse::<usize>()
                        .map_err(|_| format!("--max-connections {v:?}: expected a count"))?,
                );
            }
            "--direct" => spec.direct = true,
            "--read-only" => spec.read_only = true,
            "--model" => {
                spec.model = Some(PathBuf::from(value(args, &mut i, a)?));
                spec.emulate = true;
            }
            "--no-emulate" => spec.emulate = false,
            "--spindown" => {
                let v = value(args, &mut i, a)?;
                spec.spindown_s = Some(
                    v.parse()
                        .map_err(|_| format!("--spindown {v:?}: expected seconds"))?,
                );
            }
            "--capture" => spec.capture = Some(PathBuf::from(value(args, &mut i, a)?)),
            "--out" => out = Some(PathBuf::from(value(args, &mut i, a)?)),
            "--poll-us" => {
                let v = value(args, &mut i, a)?;
                spec.poll_us = Some(v.parse().map_err(|_| {
                    format!("--poll-us {v:?}: expected microseconds (0 = block at once)")
                })?);
            }
            "--workers" => {
                let v = value(args, &mut i, a)?;
                spec.workers = v
                    .parse()
                    .map_err(|_| format!("--workers {v:?}: expected a count"))?;
            }
            "--status" => {
                let v = value(args, &mut i, a)?;
                status = v
                    .parse()
                    .map_err(|_| format!("--status {v:?}: expected seconds"))?;
            }
            _ if !a.starts_with("--") && config.is_none() => config = Some(PathBuf::from(a)),
            _ => return Err(format!("unknown argument {a:?}")),
        }
        i += 1;
    }
    let listen = listen.ok_or("one of --socket PATH or --listen HOST:PORT is required")?;
    let server_opts = ServerOptions {
        limits: Limits::from_flags(conn_mib, total_mib, max_connections, handshake_s, reply_s)?,
        allow_remote,
        tls: wattio_live::tls::from_flags(&tls_mode, tls_cert.as_deref(), tls_key.as_deref())?,
    };
    let session = match config {
        Some(cfg) => {
            let images = spec
                .images
                .iter()
                .map(|p| setup::parse_named_image(&p.display().to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            setup::build_from_config(&setup::ConfigServe {
                config: cfg,
                images,
                direct: spec.direct,
                capture: spec.capture.clone(),
                workers: spec.workers,
                poll_us: spec.poll_us,
            })?
        }
        None => setup::build(&spec)?,
    };
    let server = Server::start_with(session, &listen, &server_opts)?;
    // SAFETY: installing an async-signal-safe handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    eprintln!("wattio-live: serving on {} (Ctrl-C to stop)", server.addr());
    let mut last = Instant::now();
    while !STOP.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        if status > 0.0 && last.elapsed().as_secs_f64() >= status {
            let dt = last.elapsed().as_secs_f64();
            last = Instant::now();
            let snap = server.session().snapshot();
            eprintln!("{}", wattio_live::report::status_line(&snap, dt));
        }
    }
    eprintln!("wattio-live: shutting down");
    let mut summary = server.shutdown(Duration::from_secs(30))?;
    if let Some(dir) = &out {
        wattio_live::report::write_outputs(&mut summary, dir)?;
        eprintln!(
            "wattio-live: wrote {}/summary.json and ledger.csv",
            dir.display()
        );
    }
    if let Some(e) = &summary.capture_error {
        return Err(format!("capture: {e}"));
    }
    Ok(())
}

fn replay_cmd(args: &[String]) -> Result<(), String> {
    let mut trace = None;
    let mut uri = None;
    let mut opts = ReplayOptions::default();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        match a {
            "--nbd" => uri = Some(value(args, &mut i, a)?.to_string()),
            "--speed" => {
                let v = value(args, &mut i, a)?;
                opts.speed = match v {
                    "max" | "inf" => f64::INFINITY,
                    _ => v
                        .parse()
                        .map_err(|_| format!("--speed {v:?}: expected a factor"))?,
                };
            }
            _ if !a.starts_with("--") && trace.is_none() => trace = Some(PathBuf::from(a)),
            _ => return Err(format!("unknown argument {a:?}")),
        }
        i += 1;
    }
    let trace = trace.ok_or("TRACE is required")?;
    let uri = uri.ok_or("--nbd URI is required")?;
    let mut t = TextTrace::open(&trace).map_err(|e| e.to_string())?;
    let r = replay::replay(&mut t, &uri, &opts)?;
    let q = |p: f64| {
        if r.latency.count() > 0 {
            r.latency.quantile(p) as f64 / 1e3
        } else {
            0.0
        }
    };
    println!(
        "sent={} errors={} skipped={} duration_s={:.3} latency_us: mean={:.1} p50={:.1} p99={:.1}",
        r.sent,
        r.errors,
        r.skipped,
        r.duration.as_secs_f64(),
        r.latency.mean() / 1e3,
        q(0.5),
        q(0.99)
    );
    Ok(())
}
