//! Durability under power loss: every write acknowledged with FUA, or acknowledged before a
//! FLUSH that was then acknowledged, is in the image a power cut could leave.
//!
//! The server runs under a power-loss model (`tests/data/powercut_shim.c`, an `LD_PRELOAD`
//! shim built here with `cc`): it journals the image's writes and syncs, and a write counts
//! as durable only once an `fdatasync`/`fsync` that began after it has returned. Each trial
//! drives several connections with deep queues (FUA writes, plain writes, FLUSHes mixed),
//! SIGKILLs the server at a random point, rebuilds from the journal the image with every
//! non-durable write dropped, and checks each acknowledged-durable block against it. Reading
//! the file back instead would pass a server that never syncs (the page cache survives a
//! SIGKILL): the control trials run the same traffic with the shim turning syncs into no-ops
//! and must find losses, proving the check can fail.
//!
//! Some trials emulate a spin-down disk (a fast-spinning variant of the laptop disk with a
//! short spin-down timeout), pausing the traffic so FLUSH and FUA arrive while it is spun
//! down. More trials: `WATTIO_CRASH_TRIALS=2000 cargo test --release -p wattio-live --test
//! crash`.
//!
//! The EXCES trials do the same over its two images (the shim tracks both, each synced on
//! its own), with reads mixed in and each checked against what was acknowledged before it
//! was sent (a build sending read hits to the disk fails it), and then go further: a new
//! server starts on the power-cut images, rebuilds the map from the flash image's log, and
//! every acknowledged-durable block must read back through it
//! (`WATTIO_EXCES_CRASH_TRIALS`, default 200). The trials take the layer's three
//! configurations in turn: EXCES, the LRU baseline (fills and dirty evictions under way at
//! the cut) and laptop mode (a volatile page cache, whose image is zeros after the cut).
//!
//! The RAID-5 trials (`WATTIO_RAID5_CRASH_TRIALS`, default 200) run a three-member array
//! over three images, each tracked and synced on its own, reads checked as above; every
//! other trial sends no FUA write, so that a FLUSH alone must sync every member (a build
//! sending it to the first member only loses blocks in those trials). The RAID-5 bitmap
//! trials (`WATTIO_RAID5_INTENT_TRIALS`, default 50) keep md's write-intent bitmap and
//! restart on the cut images *degraded*, with one member failing every I/O: the durable
//! blocks of the failed member are rebuilt from the rows of regions the log names clean,
//! or answer EIO, never wrong data (a build trusting every region after the cut returns a
//! torn row's rebuild); without a bitmap every one of them answers EIO.
//!
//! The PARAID trials (`WATTIO_PARAID_CRASH_TRIALS`, default 100) run RAID-5 gears {3, 5}
//! over five member images, each tracked and synced on its own, with pauses that shift
//! the gears (downshifts propagate and spin two disks down, upshifts on demand or by full
//! synchronization) and reads checked as above; a new server on the five power-cut images
//! recovers the dirty list and every acknowledged-durable block must read back through
//! it. With `persist = false` the first trial loses blocks.
//!
//! The FS2 trials (`WATTIO_FS2_CRASH_TRIALS`, default 200) add reads, so that FS2 makes
//! replicas, persists its table and redirects reads while the host rewrites what it
//! replicated: every read during the run must return the newest version acknowledged
//! before it was sent (or one sent since), and after the power cut a new server recovers
//! the table from the image and every acknowledged-durable block must read back through
//! it, from a recovered replica where one is nearer. Shown to fail on broken builds: FS2
//! not waiting for a drop's record before a rewrite of a replicated block (about one trial
//! in 20 loses a block), and FS2 not dropping replicas on a write (stale reads in the run).

mod common;

use common::powercut::{power_cut_image, serve_config_under_shim, shim, shim_journal};
use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use wattio_live::client::Client;
use wattio_live::proto::{CMD_FLAG_FUA, CMD_FLUSH, CMD_READ, CMD_WRITE};

const BLOCK: usize = 4096;
/// Blocks per connection (each connection writes its own region, so every block's
/// history is one connection's, in its order).
const REGION: u64 = 256;
const CONNS: usize = 3;
/// Requests each connection keeps in flight.
const QD: usize = 16;
/// A trial's server is killed this long after it came up even if its connections have not
/// had the durable answers the trial waits for.
const KILL_DEADLINE: Duration = Duration::from_secs(20);

/// The laptop disk of the catalogue with its mechanics sped up (seek, rotation, spin-down
/// and spin-up a hundred times faster), so a trial can spin it down and up in milliseconds.
fn fast_disk_model(dir: &TempDir) -> PathBuf {
    let cat = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogue/toshiba-mk1234gsx.toml");
    let text = std::fs::read_to_string(cat).unwrap();
    let fast = text
        .replace("rpm = 5400", "rpm = 540000")
        .replace("avg_seek_ms = 12.0", "avg_seek_ms = 0.12")
        .replace("latency_s = 1.0", "latency_s = 0.01")
        .replace("latency_s = 3.0", "latency_s = 0.03");
    assert_ne!(text, fast);
    let p = dir.path("fastdisk.toml");
    std::fs::write(&p, fast).unwrap();
    p
}

/// The HP C2247A of the catalogue (a DiskSim-validated mechanical drive, which FS2 needs)
/// a hundred times faster: its spindle, seek curve, controller and bus times scaled, so
/// that an emulated FS2 trial runs in a second, not minutes.
fn fast_mechanical_model(dir: &TempDir) -> PathBuf {
    let cat = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../catalogue/hp-c2247a.toml");
    let text = std::fs::read_to_string(cat).unwrap();
    let scaled = |v: &str| format!("{}", v.trim().parse::<f64>().unwrap() / 100.0);
    let fast: Vec<String> = text
        .lines()
        .map(|line| {
            let Some((key, value)) = line.split_once(" = ") else {
                return line.to_string();
            };
            if key == "rpm" {
                format!("rpm = {}", value.parse::<f64>().unwrap() * 100.0)
            } else if key == "first_ten_ms" || key == "hpl" {
                // hpl: [boundary (cylinders), four times in ms, single-cylinder time or -1].
                let v: Vec<String> = value
                    .trim_matches(['[', ']'])
                    .split(',')
                    .enumerate()
                    .map(|(i, x)| {
                        let keep = key == "hpl" && (i == 0 || x.trim().starts_with('-'));
                        if keep {
                            x.trim().to_string()
                        } else {
                            scaled(x)
                        }
                    })
                    .collect();
                format!("{key} = [{}]", v.join(", "))
            } else if key.ends_with("_ms") || key.ends_with("_ms_per_sector") {
                format!("{key} = {}", scaled(value))
            } else {
                line.to_string()
            }
        })
        .collect();
    let p = dir.path("fastmech.toml");
    std::fs::write(&p, fast.join("\n")).unwrap();
    p
}

/// `run.toml` in `d`: `body` (devices and functions) after a catalogue holding one model,
/// the file `model`, under the name `name`.
fn config_with_model(d: &TempDir, model: PathBuf, name: &str, body: &str) -> PathBuf {
    let models = d.path("models");
    std::fs::create_dir(&models).unwrap();
    std::fs::copy(model, models.join(format!("{name}.toml"))).unwrap();
    let cfg = d.path("run.toml");
    let catalogue = format!("catalogue = [{:?}]\n", models.display().to_string());
    std::fs::write(&cfg, catalogue + body).unwrap();
    cfg
}

/// What the connections send.
#[derive(Clone, Copy)]
struct Traffic {
    /// Blocks from one connection's region to the next's.
    stride: u64,
    /// Of every 8 requests a connection sends that are not FLUSHes, how many are reads.
    reads_in_8: [u64; CONNS],
    /// Let an emulated disk go idle and spin down now and then.
    pause_for_spindown: bool,
    /// One write in this many is FUA (0: none; every write is then made durable by a
    /// FLUSH alone).
    fua_every: u64,
}

/// Writes and FLUSHes only, the connections' regions side by side.
const WRITES: Traffic = Traffic {
    stride: REGION,
    reads_in_8: [0; CONNS],
    pause_for_spindown: false,
    fua_every: 3,
};

#[derive(Default)]
struct Track {
    /// cookie → (block, version, fua)
    writes: HashMap<u64, (u64, u64, bool)>,
    /// Reads in flight, by cookie.
    reads: HashMap<u64, ReadSent>,
    /// block → the newest version acknowledged (durable or not).
    acked_newest: HashMap<u64, u64>,
    /// Reads answered during the run, and those that returned an older version than the
    /// newest acknowledged before they were sent (or an error).
    reads_checked: usize,
    stale_reads: Vec<String>,
    /// Writes acknowledged without FUA and not yet covered by a FLUSH sent after them.
    acked: Vec<(u64, u64)>,
    /// FLUSH cookie → the writes acknowledged before it was sent.
    flushes: HashMap<u64, Vec<(u64, u64)>>,
    /// block → the newest version acknowledged durable.
    durable: HashMap<u64, u64>,
    /// block → every version sent to it.
    sent: HashMap<u64, Vec<u64>>,
    inflight: usize,
    dead: bool,
}

/// A read sent during a trial, with what it may return.
struct ReadSent {
    block: u64,
    /// The newest version of the block acknowledged when the read was sent.
    newest: Option<u64>,
    /// Versions of the block in flight when it was sent.
    in_flight: Vec<u64>,
    /// The newest version of the block sent when it was sent.
    last_sent: Option<u64>,
}

/// What a read during a trial returned (`data`), against the versions sent to its block
/// (`sent`, block → versions in the order sent). It may return any version from the
/// newest acknowledged before it was sent on (also one sent while it was out: NBD does
/// not order requests in flight), one in flight when it was sent, or zeros if no write of
/// the block had been acknowledged. And while a write of the block was in flight with it,
/// a mix of those byte by byte: overlapping requests in flight are not atomic with each
/// other (not in NBD, not on a disk), and a server's page cache copies a page in pieces
/// (seen: the first 256 bytes of the old version, the rest of the new).
fn check_read(
    sent: &HashMap<u64, Vec<u64>>,
    seed: u64,
    read: &ReadSent,
    data: &[u8],
) -> Result<(), String> {
    let b = read.block;
    let versions = sent.get(&b).map_or(&[][..], |v| &v[..]);
    let may: Vec<u64> = versions
        .iter()
        .copied()
        .filter(|w| read.newest.is_none_or(|n| *w >= n) || read.in_flight.contains(w))
        .collect();
    let mut images: Vec<Vec<u8>> = may.iter().map(|&w| version_data(seed, b, w)).collect();
    let zeros = read.newest.is_none();
    if zeros {
        images.push(vec![0; BLOCK]);
    }
    if images.iter().any(|i| i == data) {
        return Ok(());
    }
    let concurrent = !read.in_flight.is_empty() || versions.last().copied() > read.last_sent;
    if concurrent
        && data
            .iter()
            .enumerate()
            .all(|(i, x)| images.iter().any(|im| im[i] == *x))
    {
        return Ok(());
    }
    let what = if let Some(w) = versions.iter().find(|&&w| data == version_data(seed, b, w)) {
        format!("version {w}, older than acknowledged")
    } else if data.iter().all(|&x| x == 0) {
        "zeros".to_string()
    } else if let Some((o, w)) = whose(sent, seed, data) {
        format!("block {o}'s version {w}")
    } else {
        "bytes no write sent".to_string()
    };
    Err(format!(
        "{what} (may return versions {may:?}{}{})",
        if zeros { " or zeros" } else { "" },
        if concurrent { ", or a mix of them" } else { "" }
    ))
}

fn version_data(seed: u64, block: u64, version: u64) -> Vec<u8> {
    pattern(seed ^ (block << 20) ^ (version << 40) ^ 0x5eed, BLOCK)
}

/// Record `version` for `block` in `d` if it is newer than what `d` holds.
fn keep_newest(d: &mut HashMap<u64, u64>, block: u64, version: u64) {
    let e = d.entry(block).or_insert(version);
    *e = (*e).max(version);
}

/// One connection's traffic until the server dies; returns what it was told is durable.
/// Every durable acknowledgement (a FUA write's or a FLUSH's) is counted in `acks`.
fn drive(uri: String, seed: u64, conn: usize, traffic: Traffic, acks: Arc<AtomicU64>) -> Track {
    // The kill may come before this connection is up.
    let Ok(c) = Client::connect(&uri) else {
        return Track::default();
    };
    let (mut tx, mut rx) = c.split();
    let track = Arc::new((Mutex::new(Track::default()), Condvar::new()));
    let t2 = track.clone();
    let receiver = std::thread::spawn(move || {
        let (m, cv) = &*t2;
        loop {
            let r = rx.recv();
            let mut t = m.lock().unwrap();
            let Ok(r) = r else {
                t.dead = true;
                cv.notify_all();
                return;
            };
            t.inflight -= 1;
            cv.notify_all();
            if let Some(read) = t.reads.remove(&r.cookie) {
                t.reads_checked += 1;
                let checked = if r.error != 0 {
                    Err(format!("error {}", r.error))
                } else {
                    check_read(&t.sent, seed, &read, &r.data)
                };
                if let Err(e) = checked {
                    t.stale_reads.push(format!("block {}: {e}", read.block));
                }
                continue;
            }
            if r.error != 0 {
                continue;
            }
            if let Some((b, v, fua)) = t.writes.remove(&r.cookie) {
                keep_newest(&mut t.acked_newest, b, v);
                if fua {
                    keep_newest(&mut t.durable, b, v);
                    acks.fetch_add(1, Ordering::Relaxed);
                } else {
                    t.acked.push((b, v));
                }
            } else if let Some(covered) = t.flushes.remove(&r.cookie) {
                for (b, v) in covered {
                    keep_newest(&mut t.durable, b, v);
                }
                acks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ conn as u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let base = conn as u64 * traffic.stride;
    let (m, cv) = &*track;
    let mut flush_next = false;
    for version in 0u64.. {
        {
            let mut t = m.lock().unwrap();
            while t.inflight >= QD && !t.dead {
                t = cv.wait(t).unwrap();
            }
            if t.dead {
                break;
            }
            if traffic.pause_for_spindown && version % 48 == 47 {
                // Let the emulated disk go idle and spin down; the FLUSH and writes that
                // follow meet it spun down.
                while t.inflight > 0 && !t.dead {
                    t = cv.wait(t).unwrap();
                }
                drop(t);
                std::thread::sleep(Duration::from_millis(120));
                t = m.lock().unwrap();
                flush_next = true;
            }
            t.inflight += 1;
        }
        let r = next();
        let sent = if r.is_multiple_of(8) || std::mem::take(&mut flush_next) {
            let mut t = m.lock().unwrap();
            let covered = std::mem::take(&mut t.acked);
            t.flushes.insert(tx.next_cookie(), covered);
            drop(t);
            tx.send(0, CMD_FLUSH, 0, 0, None)
        } else if (r >> 8) % 8 < traffic.reads_in_8[conn] {
            let block = base + (r >> 16) % REGION;
            let mut t = m.lock().unwrap();
            let newest = t.acked_newest.get(&block).copied();
            let last_sent = t.sent.get(&block).and_then(|v| v.last()).copied();
            let in_flight: Vec<u64> = t
                .writes
                .values()
                .filter(|w| w.0 == block)
                .map(|w| w.1)
                .collect();
            let read = ReadSent {
                block,
                newest,
                in_flight,
                last_sent,
            };
            t.reads.insert(tx.next_cookie(), read);
            drop(t);
            tx.send(0, CMD_READ, block * BLOCK as u64, BLOCK as u32, None)
        } else {
            let block = base + version % REGION;
            let fua = traffic.fua_every > 0 && r.is_multiple_of(traffic.fua_every);
            let data = version_data(seed, block, version);
            let mut t = m.lock().unwrap();
            t.writes.insert(tx.next_cookie(), (block, version, fua));
            t.sent.entry(block).or_default().push(version);
            drop(t);
            let flags = if fua { CMD_FLAG_FUA } else { 0 };
            tx.send(
                flags,
                CMD_WRITE,
                block * BLOCK as u64,
                BLOCK as u32,
                Some(&data),
            )
        };
        if sent.is_err() {
            break;
        }
    }
    let _ = receiver.join();
    Arc::try_unwrap(track)
        .ok()
        .map(|t| t.0.into_inner().unwrap())
        .unwrap()
}

struct Outcome {
    durable_blocks: usize,
    /// Acknowledged-durable blocks not read back: (block, its durable version).
    lost: Vec<(u64, u64)>,
    spun_down: bool,
    /// Reads answered during the run, and those that returned older data than was
    /// acknowledged before they were sent.
    reads_checked: usize,
    stale_reads: Vec<String>,
}

impl Outcome {
    fn new(
        tracks: &[Track],
        (durable_blocks, lost): (usize, Vec<(u64, u64)>),
        spun_down: bool,
    ) -> Self {
        Outcome {
            durable_blocks,
            lost,
            spun_down,
            reads_checked: tracks.iter().map(|t| t.reads_checked).sum(),
            stale_reads: tracks.iter().flat_map(|t| t.stale_reads.clone()).collect(),
        }
    }
}

/// Once the server's export `export` answers: CONNS connections drive traffic and the
/// server is SIGKILLed as soon as they have had `kill_after` durable acknowledgements
/// between them (FUA writes and FLUSHes answered); what each was told is durable.
///
/// Counting acknowledgements rather than milliseconds keeps every trial testing something
/// on a loaded machine, where a fixed delay could kill the server before it had answered
/// anything durable. A server that never gets there is killed after KILL_DEADLINE all the
/// same (and the trial then checks little, which the callers' adequacy checks catch).
fn drive_until_killed(
    child: &mut std::process::Child,
    sock: &Path,
    export: &str,
    seed: u64,
    kill_after: u64,
    traffic: Traffic,
) -> Vec<Track> {
    let t0 = Instant::now();
    while Client::connect(&uri(sock, export)).is_err() {
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("server did not come up");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = child.id() as i32;
    let acks = Arc::new(AtomicU64::new(0));
    let seen = acks.clone();
    let killer = std::thread::spawn(move || {
        let t0 = Instant::now();
        while seen.load(Ordering::Relaxed) < kill_after && t0.elapsed() < KILL_DEADLINE {
            std::thread::sleep(Duration::from_micros(200));
        }
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let clients: Vec<_> = (0..CONNS)
        .map(|c| {
            let u = uri(sock, export);
            let acks = acks.clone();
            std::thread::spawn(move || drive(u, seed, c, traffic, acks))
        })
        .collect();
    let tracks = clients.into_iter().map(|h| h.join().unwrap()).collect();
    killer.join().unwrap();
    tracks
}

/// Which version of `block` `bytes` are: `v3`, `zeros`, `an error`, another block's
/// version (`block 9's v5`: a read sent to a block that holds another's data, as a stale
/// replica reused for another block would) or `unknown bytes`.
fn which_version(tracks: &[Track], seed: u64, block: u64, bytes: Option<&[u8]>) -> String {
    let Some(bytes) = bytes else {
        return "an error".into();
    };
    if bytes.iter().all(|&b| b == 0) {
        return "zeros".into();
    }
    if let Some(w) = tracks
        .iter()
        .filter_map(|t| t.sent.get(&block))
        .flatten()
        .find(|&&w| bytes == version_data(seed, block, w).as_slice())
    {
        return format!("v{w}");
    }
    tracks
        .iter()
        .find_map(|t| whose(&t.sent, seed, bytes))
        .map_or("unknown bytes".into(), |(b, w)| format!("block {b}'s v{w}"))
}

/// The (block, version) whose data `bytes` are, among the versions `sent` (block →
/// versions).
fn whose(sent: &HashMap<u64, Vec<u64>>, seed: u64, bytes: &[u8]) -> Option<(u64, u64)> {
    sent.iter().find_map(|(&b, vs)| {
        vs.iter()
            .find(|&&w| bytes == version_data(seed, b, w).as_slice())
            .map(|&w| (b, w))
    })
}

/// Every block the tracks were told is durable, checked against what `read` returns for it
/// (`None`: an error): the durable version, or a newer one a later sync made durable too.
/// (blocks checked, those that were not).
fn check_durable(
    tracks: &[Track],
    seed: u64,
    mut read: impl FnMut(u64) -> Option<Vec<u8>>,
) -> (usize, Vec<(u64, u64)>) {
    let mut lost = Vec::new();
    let mut durable_blocks = 0;
    for t in tracks {
        for (&block, &v) in &t.durable {
            durable_blocks += 1;
            let at = read(block);
            let ok = at.is_some_and(|at| {
                t.sent[&block]
                    .iter()
                    .filter(|&&w| w >= v)
                    .any(|&w| at == version_data(seed, block, w))
            });
            if !ok {
                lost.push((block, v));
            }
        }
    }
    (durable_blocks, lost)
}

fn trial(seed: u64, control: bool, emulate: bool) -> Outcome {
    let d = TempDir::new("crash");
    let img = d.path("disk.img");
    let size = CONNS * REGION as usize * BLOCK;
    std::fs::write(&img, vec![0u8; size]).unwrap();
    let sock = d.path("s");
    let journal = d.path("journal");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wattio-live"));
    cmd.args(["serve", "--image"])
        .arg(&img)
        .arg("--socket")
        .arg(&sock)
        .env("LD_PRELOAD", shim())
        .env("WATTIO_SHIM_TRACK", &img)
        .env("WATTIO_SHIM_LOG", &journal)
        .stdout(Stdio::null());
    if control {
        cmd.env("WATTIO_SHIM_IGNORE_SYNC", "1");
    }
    if emulate {
        cmd.arg("--model")
            .arg(fast_disk_model(&d))
            .args(["--spindown", "0.005", "--status", "0.005"])
            .stderr(Stdio::piped());
    } else {
        cmd.args(["--status", "0"]).stderr(Stdio::null());
    }
    let mut child = cmd.spawn().unwrap();
    // An emulated trial runs past its connections' first pause (about 60 durable answers
    // come before it), so FLUSH and FUA meet the disk spun down before the kill.
    let kill_after = if emulate { 120 } else { 10 } + seed % 60;
    let traffic = Traffic {
        pause_for_spindown: emulate,
        ..WRITES
    };
    let tracks = drive_until_killed(&mut child, &sock, "", seed, kill_after, traffic);
    let out = child.wait_with_output().unwrap();
    let spun_down = String::from_utf8_lossy(&out.stderr).contains(": standby");
    let image = power_cut_image(&vec![0u8; size], &shim_journal(&journal), 0);
    let durable = check_durable(&tracks, seed, |block| {
        let at = block as usize * BLOCK;
        Some(image[at..at + BLOCK].to_vec())
    });
    Outcome::new(&tracks, durable, spun_down)
}

/// A component device's image in a function's trial: its device name, its size, and
/// whether a power cut empties it (a volatile cache's image is zeros after the cut).
struct Image {
    name: String,
    bytes: usize,
    volatile: bool,
}

impl Image {
    fn new(name: &str, bytes: usize) -> Image {
        Image {
            name: name.into(),
            bytes,
            volatile: false,
        }
    }
}

/// Block `block` read through `c` (`None`: an error).
fn read_block(c: &mut Client, block: u64) -> Option<Vec<u8>> {
    let r = c.read(block * BLOCK as u64, BLOCK as u32).unwrap();
    (r.error == 0).then_some(r.data)
}

/// A function's power-cut trial: the run config `cfg` served over zeroed `images` under
/// the power-loss shim (tracked in that order, each synced on its own), SIGKILLed after
/// `kill_after` durable answers; then a new server (no shim; with `restart`'s config if
/// given) on the images a power cut could have left, and every acknowledged-durable block
/// read back through its export with `read_back`. The outcome, and the new server's
/// summary.
#[allow(clippy::too_many_arguments)]
fn cut_trial(
    d: &TempDir,
    seed: u64,
    control: bool,
    cfg: &Path,
    restart: Option<&Path>,
    images: &[Image],
    export: &str,
    traffic: Traffic,
    kill_after: u64,
    mut read_back: impl FnMut(&mut Client, u64) -> Option<Vec<u8>>,
) -> (Outcome, wattio_live::session::Summary) {
    let paths = |tag: &str| -> Vec<PathBuf> {
        images
            .iter()
            .map(|i| d.path(&format!("{}{tag}.img", i.name)))
            .collect()
    };
    let named = |paths: &[PathBuf]| -> Vec<(String, PathBuf)> {
        images
            .iter()
            .map(|i| i.name.clone())
            .zip(paths.iter().cloned())
            .collect()
    };
    let before = paths("");
    for (i, p) in images.iter().zip(&before) {
        std::fs::write(p, vec![0u8; i.bytes]).unwrap();
    }
    let before = named(&before);
    let before: Vec<(&str, &Path)> = before
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_path()))
        .collect();
    let (sock, journal) = (d.path("s"), d.path("journal"));
    let mut child = serve_config_under_shim(cfg, &before, &sock, &journal, control);
    let tracks = drive_until_killed(&mut child, &sock, export, seed, kill_after, traffic);
    child.wait().unwrap();
    let j = shim_journal(&journal);
    let after = paths("-after");
    for (k, (i, p)) in images.iter().zip(&after).enumerate() {
        let zeros = vec![0u8; i.bytes];
        let image = if i.volatile {
            zeros
        } else {
            power_cut_image(&zeros, &j, k as u32)
        };
        std::fs::write(p, image).unwrap();
    }
    let after = named(&after);
    let after: Vec<(&str, &Path)> = after
        .iter()
        .map(|(n, p)| (n.as_str(), p.as_path()))
        .collect();
    let sock2 = d.path("s2");
    let srv = serve_config(restart.unwrap_or(cfg), &after, &sock2);
    let mut c = Client::connect(&uri(&sock2, export)).unwrap();
    let durable = check_durable(&tracks, seed, |block| read_back(&mut c, block));
    if !durable.1.is_empty() {
        // What a failure needs to be understood: for each lost block, the version it read
        // back and the one the exported device's power-cut image holds at its offset (a
        // stale redirection, or data the device lost).
        let image = after
            .iter()
            .find(|(n, _)| *n == export)
            .and_then(|(_, p)| std::fs::read(p).ok())
            .unwrap_or_default();
        for &(block, v) in &durable.1 {
            let read = read_back(&mut c, block);
            let at = block as usize * BLOCK;
            let held = image.get(at..at + BLOCK).map(|b| b.to_vec());
            eprintln!(
                "seed {seed}: block {block} durable v{v}: reads back {}, the image holds {}",
                which_version(&tracks, seed, block, read.as_deref()),
                which_version(&tracks, seed, block, held.as_deref()),
            );
        }
        keep_failed_trial(d, seed, &tracks);
    }
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    (Outcome::new(&tracks, durable, false), s)
}

/// A failed trial's directory (images before and after the cut, the shim's journal of
/// every write and sync) and its tracks, copied to `$WATTIO_CRASH_KEEP/seed-N` when that
/// is set: a rare failure can then be read offline, write by write. A trial whose losses
/// its caller then excuses (a degraded restart's EIO) takes it back ([`unkeep_trial`]).
fn keep_failed_trial(d: &TempDir, seed: u64, tracks: &[Track]) {
    let Some(to) = kept_trial(seed) else {
        return;
    };
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&d.0).unwrap().flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    let mut txt = String::new();
    for (k, t) in tracks.iter().enumerate() {
        let mut blocks: Vec<_> = t.sent.keys().copied().collect();
        blocks.sort_unstable();
        for b in blocks {
            txt += &format!(
                "conn {k} block {b} sent {:?} acked_newest {:?} durable {:?}\n",
                t.sent[&b],
                t.acked_newest.get(&b),
                t.durable.get(&b)
            );
        }
    }
    std::fs::write(to.join("tracks.txt"), txt).unwrap();
    eprintln!(
        "seed {seed}: kept in {} (removed again if the trial excuses its losses)",
        to.display()
    );
}

/// Where [`keep_failed_trial`] keeps trial `seed`, if it keeps trials.
fn kept_trial(seed: u64) -> Option<PathBuf> {
    std::env::var_os("WATTIO_CRASH_KEEP").map(|k| Path::new(&k).join(format!("seed-{seed}")))
}

/// Trial `seed` passed after all (its caller excused what it read back): no copy is kept.
fn unkeep_trial(seed: u64) {
    if let Some(to) = kept_trial(seed) {
        let _ = std::fs::remove_dir_all(to);
    }
}

/// A configuration of the EXCES layer the EXCES power-cut trials run (docs/functions/
/// exces.md; "The baselines" for LRU and laptop mode, with the reproduction's keys, and
/// cache size, cleaning and read-ahead scaled to a trial of a fraction of a second): over
/// the sped-up laptop disk, every write absorbed while a free or clean page is left, the
/// rest written to the disk.
struct ExcesVariant {
    name: &'static str,
    /// The ECD's catalogue model.
    ecd: &'static str,
    /// ECD pages for the connections' 768 blocks.
    cache_pages: u64,
    /// Keys of the layer's table beyond the shared ones.
    keys: &'static str,
    /// The ECD loses what it holds in a power cut (laptop mode's page cache): its image is
    /// zeros when the new server starts.
    volatile: bool,
}

const EXCES_VARIANTS: [ExcesVariant; 3] = [
    // The paper's: a FUA write or a FLUSH is answered once the data and the map entries
    // that find it are durable on the flash image (and the disk image).
    ExcesVariant {
        name: "EXCES",
        ecd: "sandisk-ultra-cf-2gb",
        cache_pages: 64,
        keys: "",
        volatile: false,
    },
    // A fill at every miss and an eviction (a dirty victim written back first), a clean
    // when 90 % of the 16 pages are dirty (the reproduction's 50 % cleaned so often that a
    // build unmapping dirty victims unwritten lost a block in 1 trial of 20, at 90 % in 7)
    // or after 20 ms without host I/O: the reconfigurator's copies and write-backs are
    // under way when the power goes.
    ExcesVariant {
        name: "LRU",
        ecd: "sandisk-ultra-cf-2gb",
        cache_pages: 16,
        keys: "ranking = \"recency\"\nmiss_threshold_per_min = 0\nmin_interval_s = 0\n\
               dirty_threshold = 0.9\nclean_idle_s = 0.02\n",
        volatile: false,
    },
    // The page cache: no map persisted, so a FLUSH or FUA write first writes every dirty
    // page back to the disk (a build that does not loses blocks in 10 trials of 20; with
    // the reproduction's background write-back at 40 % dirty, in 1).
    ExcesVariant {
        name: "laptop mode",
        ecd: "host-dram-page-cache",
        cache_pages: 16,
        keys: "ranking = \"recency\"\nmiss_threshold_per_min = 0\nmin_interval_s = 0\n\
               dirty_threshold = 0.9\nclean_on_spin_up = true\nreadahead_pages = 8\n\
               persist_map = false\n",
        volatile: true,
    },
];

impl ExcesVariant {
    fn config(&self) -> String {
        format!(
            "[[device]]\nname = \"disk\"\nmodel = \"fastdisk\"\n\
             [[device]]\nname = \"ecd\"\nmodel = \"{}\"\n\n\
             [[function]]\nkind = \"exces\"\ndisk = \"disk\"\nflash = \"ecd\"\n\
             cache_pages = {}\nabsorb_writes = \"always\"\n{}",
            self.ecd, self.cache_pages, self.keys
        )
    }
}

/// Two of every eight requests that are not FLUSHes are reads: of pages the card holds
/// dirty, of pages on the disk, and of pages whose write is still out.
const EXCES_TRAFFIC: Traffic = Traffic {
    reads_in_8: [2; CONNS],
    ..WRITES
};

/// The flash image: the 64 cache pages and the map's log region after them.
const ECD_BYTES: usize = 4 << 20;

/// One EXCES trial: the server runs under the power-loss shim over both images and is
/// SIGKILLed at a random point; a new server (no shim) starts on the images a power cut
/// could have left, rebuilds the map from the flash image's log (a volatile ECD's image is
/// zeros, and the map starts empty), and every block acknowledged durable must read back
/// through it.
fn exces_trial(seed: u64, control: bool, variant: &ExcesVariant) -> Outcome {
    let d = TempDir::new("exces-crash");
    let cfg = config_with_model(&d, fast_disk_model(&d), "fastdisk", &variant.config());
    let images = [
        Image::new("disk", CONNS * REGION as usize * BLOCK),
        Image {
            volatile: variant.volatile,
            ..Image::new("ecd", ECD_BYTES)
        },
    ];
    let kill_after = 10 + seed % 90;
    let t = EXCES_TRAFFIC;
    cut_trial(
        &d, seed, control, &cfg, None, &images, "disk", t, kill_after, read_block,
    )
    .0
}

/// FS2 (docs/functions/fs2.md) over 16 MiB of the sped-up HP C2247A with its replica table
/// persisted (`journal_kb`, at the end of the image) and 1 MiB regions: the three
/// connections' regions lie 5 MiB apart with free space beside each. Connection 0 reads
/// most, so its region is the hot one, and the blocks the others read are replicated next
/// to it (`neighbour_fraction` lets region 1 take them), where a read that follows one of
/// connection 0's finds the replica nearer.
const FS2_CONFIG: &str = r#"
[[device]]
name = "disk"
model = "fastmech"

[[function]]
kind = "fs2"
disk = "disk"
region_mb = 1
epoch_s = 0.02
free = [[1048576, 3145728], [6291456, 3145728], [11534336, 3145728]]
neighbour_fraction = 0.25
high_watermark = 0
low_watermark = 0
critical_watermark = 0
max_replica_blocks = 256
journal_kb = 8
"#;

const FS2_DISK_BYTES: usize = 16 << 20;

/// Connection 0 reads six of every eight requests that are not FLUSHes, the others two.
const FS2_TRAFFIC: Traffic = Traffic {
    stride: 5 * 256,
    reads_in_8: [6, 2, 2],
    ..WRITES
};

struct Fs2Outcome {
    durable: Outcome,
    /// The restarted server's counters: replicas it recovered, reads it sent to them.
    recovered_replicas: f64,
    reads_redirected: f64,
}

/// One FS2 trial: reads and writes through FS2 under the power-loss shim until the kill
/// (every read checked against what was acknowledged before it); then a new server (no
/// shim) on the image a power cut could have left recovers the table from its journal,
/// and every block acknowledged durable must read back through it — each read right after
/// one of the hot region's, so that a recovered replica is the nearer copy and is read.
fn fs2_trial(seed: u64, control: bool) -> Fs2Outcome {
    let d = TempDir::new("fs2-crash");
    let cfg = config_with_model(&d, fast_mechanical_model(&d), "fastmech", FS2_CONFIG);
    let images = [Image::new("disk", FS2_DISK_BYTES)];
    let kill_after = 200 + seed % 400;
    let (durable, s) = cut_trial(
        &d,
        seed,
        control,
        &cfg,
        None,
        &images,
        "disk",
        FS2_TRAFFIC,
        kill_after,
        |c, block| {
            read_block(c, 0)?;
            read_block(c, block)
        },
    );
    Fs2Outcome {
        durable,
        recovered_replicas: layer_counter(&s, "fs2", "recovered_replicas"),
        reads_redirected: layer_counter(&s, "fs2", "reads_redirected"),
    }
}

/// Member images of the array trials (an array's log region at the end of `d0`).
const MEMBER_BYTES: usize = 8 << 20;

/// PARAID's trials pause now and then (the array's 50 ms sample goes idle, it shifts
/// down and propagates, spinning two disks down; the next burst shifts it up), and a
/// quarter of the requests that are not FLUSHes are reads.
const PARAID_TRAFFIC: Traffic = Traffic {
    reads_in_8: [2; CONNS],
    pause_for_spindown: true,
    ..WRITES
};

struct ParaidOutcome {
    durable: Outcome,
    /// The restarted array's dirty chunks recovered from its log.
    recovered_dirty: f64,
}

/// An array's trial: `config` (`members` devices `d0`, `d1`, …, the array exported as
/// `export`), each member an image of `MEMBER_BYTES`; every durable block read back
/// through the restarted array.
fn array_trial(
    seed: u64,
    control: bool,
    config: &str,
    members: usize,
    export: &str,
    traffic: Traffic,
    kill_after: u64,
) -> (Outcome, wattio_live::session::Summary) {
    let d = TempDir::new("array-crash");
    let cfg = d.path("run.toml");
    std::fs::write(&cfg, config).unwrap();
    let images: Vec<Image> = (0..members)
        .map(|k| Image::new(&format!("d{k}"), MEMBER_BYTES))
        .collect();
    cut_trial(
        &d, seed, control, &cfg, None, &images, export, traffic, kill_after, read_block,
    )
}

/// One PARAID trial (docs/functions/paraid.md): RAID-5 gears {3, 5} over five fast
/// emulated disks with a standby state, under traffic that shifts the gears; the new
/// server recovers the array's dirty list and gear. `upshift`: "on-demand" or "full" (the
/// paper's full synchronization).
fn paraid_trial(seed: u64, control: bool, upshift: &str) -> ParaidOutcome {
    // Past the first pause (about 60 requests a connection come before it).
    let kill_after = 60 + seed % 120;
    let config = paraid_config(upshift);
    let (durable, s) = array_trial(
        seed,
        control,
        &config,
        5,
        "paraid",
        PARAID_TRAFFIC,
        kill_after,
    );
    ParaidOutcome {
        durable,
        recovered_dirty: layer_counter(&s, "paraid", "recovered_dirty_chunks"),
    }
}

/// A quarter of the requests that are not FLUSHes are reads, no pauses.
const RAID5_TRAFFIC: Traffic = Traffic {
    reads_in_8: [2; CONNS],
    ..WRITES
};

/// Every other trial sends no FUA write: a FLUSH alone must then make every member's
/// writes durable (with FUA writes mixed in, each member's next FUA write syncs its image
/// and covers a FLUSH that missed it).
fn raid5_trial(seed: u64, control: bool) -> Outcome {
    let kill_after = 10 + seed % 90;
    let traffic = Traffic {
        fua_every: if seed.is_multiple_of(2) { 0 } else { 3 },
        ..RAID5_TRAFFIC
    };
    array_trial(
        seed,
        control,
        &raid5_config(false, false),
        3,
        "raid5",
        traffic,
        kill_after,
    )
    .0
}

/// RAID-5 (docs/functions/raid.md) over three fast emulated disks, 4 KiB chunks, its
/// bad-page log at the end of `d0` (`persist`, the default): a host FLUSH must reach and
/// sync every member, a FUA write every member it writes.
/// With md's write-intent bitmap (`write_intent`: a region a stripe, logged clean after
/// 1 ms idle, every region clean on the new log) or without one (then nothing is assumed:
/// after a restart every row is unknown). `d1_fails`: member d1 fails every I/O (a fault on
/// its emulated device) — the array restarted degraded after the cut.
fn raid5_config(write_intent: bool, d1_fails: bool) -> String {
    let mut c = String::new();
    for k in 0..3 {
        c += &format!(
            "[[device]]\nname = \"d{k}\"\n{}\n",
            FAST_STANDBY_DISK.toml()
        );
        if k == 1 && d1_fails {
            c += &format!("[device.fault]\neio = [[0, {MEMBER_BYTES}]]\n\n");
        }
    }
    c += "[[function]]\nkind = \"raid\"\nlevel = 5\ndevices = [\"d0\", \"d1\", \"d2\"]\n\
          chunk_kib = 4\n";
    if write_intent {
        c += "assume_clean = true\nwrite_intent = true\nwrite_intent_kib = 4\n\
              write_intent_delay_ms = 1\n";
    }
    c
}

/// `raid5_config` with the bitmap, a hot spare `d3`, and `d1` failing on its first four
/// pages (stripes 0–3): the first failed read of it fails the whole member
/// (`max_read_errors = 0`, md's `Faulty`), which is then rebuilt onto the spare a 64 KiB
/// window at a time while the host's I/O goes on. `copies`: the log on every member
/// (`log_members = "all"`, the default), each copy under the power cut on its own; else on
/// `d0` only (`"first"`).
fn raid5_failing_config(copies: bool) -> String {
    let mut c = String::new();
    for k in 0..4 {
        c += &format!(
            "[[device]]\nname = \"d{k}\"\n{}\n",
            FAST_STANDBY_DISK.toml()
        );
        if k == 1 {
            c += "[device.fault]\neio = [[0, 16384]]\n\n";
        }
    }
    c += "[[function]]\nkind = \"raid\"\nlevel = 5\ndevices = [\"d0\", \"d1\", \"d2\"]\n\
          chunk_kib = 4\nassume_clean = true\nwrite_intent = true\nwrite_intent_kib = 4\n\
          write_intent_delay_ms = 1\nmax_read_errors = 0\nspare = \"d3\"\n\
          replace_window_kib = 64\n";
    c += if copies {
        "log_members = \"all\"\n"
    } else {
        "log_members = \"first\"\n"
    };
    c
}

/// The member holding volume block `block` of `raid5_config`'s array: 4 KiB chunks
/// over three members, md's left-symmetric layout (stripe s's parity on member 2 − s mod 3,
/// its data on the members after it).
fn raid5_member_of(block: u64) -> u64 {
    let (stripe, k) = (block / 2, block % 2);
    let parity = 2 - stripe % 3;
    (parity + 1 + k) % 3
}

/// A degraded restart's outcome: the trial's (losses are blocks read back wrong, or not at
/// all from a healthy member), the acknowledged-durable blocks on the failed member d1
/// rebuilt right from the others, and those answered EIO (their rows not known consistent:
/// in a region the log named dirty, or with no bitmap).
struct DegradedOutcome {
    durable: Outcome,
    rebuilt: usize,
    unavailable: usize,
}

/// One degraded-restart trial: the RAID-5 of `raid5_config` under the power-loss
/// shim, cut at a random point, then restarted on the cut images with d1 failing every
/// I/O; every acknowledged-durable block read back (d1's through the parity).
fn raid5_degraded_trial(seed: u64, write_intent: bool) -> DegradedOutcome {
    let restart = raid5_config(write_intent, true);
    let (cfg, members) = (raid5_config(write_intent, false), 3);
    raid5_d1_trial(seed, "raid5-degraded", &cfg, Some(&restart), members).0
}

/// One failed-member trial: `raid5_failing_config` under the power-loss shim (d1 failed at
/// its first failed read, its recovery onto d3 under way), cut at a random point, and
/// restarted on the cut images with the same configuration: every acknowledged-durable
/// block reads back — d1's from the spare, rebuilt, or read from d1 if the cut came before
/// its failure's record — or, for d1's blocks in rows the restart cannot rebuild (a region
/// the cut left dirty), answers EIO. Odd seeds keep the log on every member: the restart
/// reads back three copies the cut left at different ends. With the restart's counters.
fn raid5_failing_trial(seed: u64) -> (DegradedOutcome, Vec<(String, f64)>) {
    let cfg = raid5_failing_config(seed % 2 == 1);
    let (o, summary) = raid5_d1_trial(seed, "raid5-failing", &cfg, None, 4);
    let counters = summary
        .function_counters
        .into_iter()
        .find(|(n, _)| n == "raid5")
        .map(|(_, c)| c)
        .unwrap_or_default();
    (o, counters)
}

/// A RAID-5 power-cut trial whose restart may answer EIO for d1's blocks: `cfg` over
/// `members` images under the shim (every other write FUA), cut at a random point, and
/// restarted on the cut images with `restart` (or `cfg`). EIO is allowed for d1's blocks
/// only — never wrong data, never a healthy member's. The outcome and the restart's
/// summary.
fn raid5_d1_trial(
    seed: u64,
    tag: &str,
    cfg: &str,
    restart: Option<&str>,
    members: usize,
) -> (DegradedOutcome, wattio_live::session::Summary) {
    let d = TempDir::new(tag);
    let (cfg_path, restart_path) = (d.path("run.toml"), d.path("restart.toml"));
    std::fs::write(&cfg_path, cfg).unwrap();
    if let Some(r) = restart {
        std::fs::write(&restart_path, r).unwrap();
    }
    let images: Vec<Image> = (0..members)
        .map(|k| Image::new(&format!("d{k}"), MEMBER_BYTES))
        .collect();
    let traffic = Traffic {
        fua_every: 2,
        ..RAID5_TRAFFIC
    };
    let (mut eio, mut read) = (Vec::new(), Vec::new());
    let (mut o, summary) = cut_trial(
        &d,
        seed,
        false,
        &cfg_path,
        restart.map(|_| restart_path.as_path()),
        &images,
        "raid5",
        traffic,
        10 + seed % 90,
        |c, block| {
            let r = read_block(c, block);
            match r {
                None => eio.push(block),
                Some(_) => read.push(block),
            }
            r
        },
    );
    let on_d1 = |b: &u64| raid5_member_of(*b) == 1;
    let unavailable = eio.iter().filter(|b| on_d1(b)).count();
    o.lost.retain(|(b, _)| !(on_d1(b) && eio.contains(b)));
    if o.lost.is_empty() {
        unkeep_trial(seed);
    }
    let wrong: Vec<u64> = o.lost.iter().map(|&(b, _)| b).collect();
    let rebuilt = read
        .iter()
        .filter(|b| on_d1(b) && !wrong.contains(b))
        .count();
    let o = DegradedOutcome {
        rebuilt,
        unavailable,
        durable: o,
    };
    (o, summary)
}

/// `n` trials' (index, seed): seeds from the clock, so that each run tries new kill points
/// (a failure prints its seed).
fn trial_seeds(n: u64) -> Vec<(u64, u64)> {
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    (0..n)
        .map(|i| (i, base.wrapping_add(i * 7919) % 1_000_000_007))
        .collect()
}

/// Runs `trial` on every (index, seed) in `jobs()` threads and gives back (index, seed,
/// outcome) in index order. A trial waits on its server far more than it computes (process
/// start, the image's syncs, the emulated disk), and each has its own directory, images,
/// socket and server, so trials run side by side as they would one after another: each
/// kills its server after a count of its own durable answers, not after a time.
fn in_parallel<T: Send>(
    seeds: Vec<(u64, u64)>,
    trial: impl Fn(u64, u64) -> T + Sync,
) -> Vec<(u64, u64, T)> {
    let next = AtomicU64::new(0);
    let done = Mutex::new(Vec::with_capacity(seeds.len()));
    std::thread::scope(|s| {
        for _ in 0..jobs() {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&(i, seed)) = seeds.get(k) else {
                    break;
                };
                let o = trial(i, seed);
                done.lock().unwrap().push((i, seed, o));
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|&(i, _, _)| i);
    done
}

/// Trials run at once (`WATTIO_CRASH_JOBS`, default 4).
fn jobs() -> usize {
    std::env::var("WATTIO_CRASH_JOBS").map_or(4, |v| {
        v.parse()
            .ok()
            .filter(|&j| j > 0)
            .unwrap_or_else(|| panic!("WATTIO_CRASH_JOBS: expected a number above 0, got `{v}`"))
    })
}

/// Trials of a power-cut test: the environment variable `var` (default 200).
fn trials(var: &str) -> u64 {
    trials_or(var, 200)
}

/// Trials of a power-cut test: the environment variable `var`, else `default`.
fn trials_or(var: &str, default: u64) -> u64 {
    std::env::var(var).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{var}: expected a number, got `{v}`"))
    })
}

/// Ten control trials (syncs ignored) of seeds `first + step · i`, side by side: most
/// acknowledged-durable blocks must be lost.
fn assert_control_loses_most(first: u64, step: u64, trial: impl Fn(u64) -> Outcome + Sync) {
    let seeds = (0..10u64).map(|i| (i, first + step * i)).collect();
    assert_most_lost(
        in_parallel(seeds, |_, seed| trial(seed))
            .into_iter()
            .map(|(_, _, o)| o),
    );
}

/// The control trials' verdict: without syncs, most acknowledged-durable blocks are lost.
fn assert_most_lost(outcomes: impl Iterator<Item = Outcome>) {
    let (mut lost, mut checked) = (0, 0);
    for o in outcomes {
        lost += o.lost.len();
        checked += o.durable_blocks;
    }
    assert!(checked > 0);
    assert!(
        lost * 2 > checked,
        "without syncs only {lost} of {checked} acknowledged-durable blocks were lost"
    );
}

/// One trial's verdict (`what` names the trial in a failure): no read during the run
/// returned older data than was acknowledged, no acknowledged-durable block was lost.
fn assert_trial_passed(seed: u64, what: &str, o: &Outcome) {
    assert!(
        o.stale_reads.is_empty(),
        "seed {seed} ({what}): reads returned older data than acknowledged: {:?}",
        o.stale_reads
    );
    assert!(
        o.lost.is_empty(),
        "seed {seed} ({what}): acknowledged-durable writes lost in a power cut \
         (block, durable version): {:?}",
        o.lost
    );
}

/// Enough was acknowledged durable over `n` trials for them to have tested something.
fn assert_enough_checked(n: u64, checked: usize) {
    assert!(
        checked as u64 > 10 * n,
        "too little acknowledged to test: {checked}"
    );
}

/// Slow (a few tenths of a second a trial). The trials take the variants in turn (EXCES,
/// LRU, laptop mode).
#[test]
fn slow_exces_acknowledged_durable_writes_survive_a_power_cut_and_read_back_after_restart() {
    let n = trials("WATTIO_EXCES_CRASH_TRIALS");
    let variant = |i: u64| &EXCES_VARIANTS[i as usize % EXCES_VARIANTS.len()];
    let (mut checked, mut reads) = (0, 0);
    for (i, seed, o) in in_parallel(trial_seeds(n), |i, seed| {
        exces_trial(seed, false, variant(i))
    }) {
        assert_trial_passed(seed, variant(i).name, &o);
        reads += o.reads_checked;
        checked += o.durable_blocks;
    }
    eprintln!(
        "{n} EXCES, LRU and laptop-mode trials: {reads} reads checked during the runs, \
         {checked} acknowledged-durable blocks read back after restart"
    );
    assert_enough_checked(n, checked);
}

#[test]
fn the_exces_check_fails_when_syncs_are_ignored() {
    // Kills after 90 durable answers (seed % 90 = 80).
    assert_control_loses_most(2060, 90, |seed| exces_trial(seed, true, &EXCES_VARIANTS[0]));
}

#[test]
fn power_cut_image_keeps_exactly_the_writes_a_returned_sync_covers() {
    // Hand-built journal over two files: W0, B1, W1, E1, W2 of file 0; a write of file 1
    // and a sync of file 1 that returns; B3 of file 0 (never returns).
    let rec = |kind: u8, file: u8, a: u64, b: u64, data: &[u8]| {
        let mut v = vec![kind, 0, 0, 0, file, 0, 0, 0];
        v.extend_from_slice(&a.to_ne_bytes());
        v.extend_from_slice(&b.to_ne_bytes());
        v.extend_from_slice(data);
        v
    };
    let j = [
        rec(b'W', 0, 0, 2, b"aa"),
        rec(b'B', 0, 1, 0, b""),
        rec(b'W', 0, 2, 2, b"bb"),
        rec(b'E', 0, 1, 0, b""),
        rec(b'W', 0, 4, 2, b"cc"),
        rec(b'W', 1, 0, 2, b"xx"),
        rec(b'B', 1, 2, 0, b""),
        rec(b'E', 1, 2, 0, b""),
        rec(b'Z', 0, 0, 1, b""),
        rec(b'B', 0, 3, 0, b""),
    ]
    .concat();
    // Only W0 preceded the begin of the one sync of file 0 that returned: file 1's sync
    // makes nothing of file 0 durable (W2 before it is lost).
    assert_eq!(power_cut_image(b"......", &j, 0), b"aa....");
    assert_eq!(power_cut_image(b"....", &j, 1), b"xx..");
    // A record cut off by the kill is ignored.
    assert_eq!(power_cut_image(b"......", &j[..j.len() - 3], 0), b"aa....");
}

#[test]
fn acknowledged_durable_writes_survive_a_power_cut() {
    let n = trials("WATTIO_CRASH_TRIALS");
    let (mut checked, mut spun_down) = (0, 0);
    let emulated_every = 20;
    let emulated = |i: u64| i.is_multiple_of(emulated_every);
    for (i, seed, o) in in_parallel(trial_seeds(n), |i, seed| trial(seed, false, emulated(i))) {
        assert_trial_passed(seed, &format!("emulated disk: {}", emulated(i)), &o);
        checked += o.durable_blocks;
        spun_down += o.spun_down as u32;
    }
    eprintln!("{n} trials, {checked} acknowledged-durable blocks verified, {spun_down} emulated trials saw the disk spun down");
    assert_enough_checked(n, checked);
    assert!(spun_down > 0, "no emulated trial saw the disk spun down");
}

#[test]
fn the_check_fails_when_syncs_are_ignored() {
    // The control: the same traffic while fdatasync/fsync do nothing. Acknowledged FUA
    // writes and flushed writes are then not durable, and the check must say so.
    assert_most_lost((0..10u64).map(|i| trial(1000 + i, true, i == 0)));
}

/// Slow (a few tenths of a second a trial).
#[test]
fn slow_fs2_reads_the_latest_write_during_the_run_and_every_durable_one_after_a_power_cut() {
    let n = trials("WATTIO_FS2_CRASH_TRIALS");
    let (mut checked, mut reads, mut recovered, mut redirected) = (0, 0, 0.0, 0.0);
    for (_, seed, o) in in_parallel(trial_seeds(n), |_, seed| fs2_trial(seed, false)) {
        assert_trial_passed(seed, "FS2", &o.durable);
        checked += o.durable.durable_blocks;
        reads += o.durable.reads_checked;
        recovered += o.recovered_replicas;
        redirected += o.reads_redirected;
    }
    eprintln!(
        "{n} FS2 trials: {reads} reads checked during the runs; after the power cuts \
         {recovered} replicas recovered, {checked} acknowledged-durable blocks read back, \
         {redirected} of those reads from a replica"
    );
    assert_enough_checked(n, checked);
    // The check is of FS2 only if recovered replicas were read.
    assert!(
        recovered > 0.0 && redirected > 0.0,
        "no recovered replica was read: {recovered} recovered, {redirected} reads redirected"
    );
}

#[test]
fn the_fs2_check_fails_when_syncs_are_ignored() {
    assert_control_loses_most(3250, 300, |seed| fs2_trial(seed, true).durable);
}

/// Slow (about a second a trial, mostly the traffic's pauses; 100 by default: a build
/// without the persisted dirty list fails the first). Half the trials upshift on demand,
/// half by full synchronization.
#[test]
fn slow_paraid_reads_the_latest_write_during_the_run_and_every_durable_one_after_a_power_cut() {
    let n = trials_or("WATTIO_PARAID_CRASH_TRIALS", 100);
    let upshift = |i: u64| {
        if i.is_multiple_of(2) {
            "on-demand"
        } else {
            "full"
        }
    };
    let (mut checked, mut reads, mut recovered) = (0, 0, 0.0);
    for (i, seed, o) in in_parallel(trial_seeds(n), |i, seed| {
        paraid_trial(seed, false, upshift(i))
    }) {
        assert_trial_passed(seed, &format!("PARAID, upshift {}", upshift(i)), &o.durable);
        checked += o.durable.durable_blocks;
        reads += o.durable.reads_checked;
        recovered += o.recovered_dirty;
    }
    eprintln!(
        "{n} PARAID trials: {reads} reads checked during the runs; after the power cuts \
         {recovered} dirty chunks recovered, {checked} acknowledged-durable blocks read back"
    );
    assert_enough_checked(n, checked);
    assert!(recovered > 0.0, "no trial recovered a dirty chunk");
}

#[test]
fn the_paraid_check_fails_when_syncs_are_ignored() {
    assert_control_loses_most(4100, 120, |seed| {
        paraid_trial(seed, true, "on-demand").durable
    });
}

/// Slow (a few tenths of a second a trial).
#[test]
fn slow_raid5_reads_the_latest_write_during_the_run_and_every_durable_one_after_a_power_cut() {
    let n = trials("WATTIO_RAID5_CRASH_TRIALS");
    let (mut checked, mut reads) = (0, 0);
    for (_, seed, o) in in_parallel(trial_seeds(n), |_, seed| raid5_trial(seed, false)) {
        assert_trial_passed(seed, "RAID-5", &o);
        checked += o.durable_blocks;
        reads += o.reads_checked;
    }
    eprintln!(
        "{n} RAID-5 trials: {reads} reads checked during the runs, {checked} \
         acknowledged-durable blocks read back after restart"
    );
    assert_enough_checked(n, checked);
}

/// Slow (a few tenths of a second a trial). With the bitmap, a degraded restart rebuilds
/// the durable blocks of the failed member in regions the log names clean; without it,
/// every one of them is unavailable (EIO) — never wrong either way.
#[test]
fn slow_raid5_with_a_write_intent_bitmap_rebuilds_a_failed_members_durable_blocks_after_a_power_cut(
) {
    let n = trials_or("WATTIO_RAID5_INTENT_TRIALS", 50);
    let (mut checked, mut rebuilt, mut unavailable) = (0, 0, 0);
    for (_, seed, o) in in_parallel(trial_seeds(n), |_, seed| raid5_degraded_trial(seed, true)) {
        assert_trial_passed(seed, "RAID-5 bitmap, degraded", &o.durable);
        checked += o.durable.durable_blocks;
        rebuilt += o.rebuilt;
        unavailable += o.unavailable;
    }
    eprintln!(
        "{n} RAID-5 bitmap trials: {checked} acknowledged-durable blocks read back after a \
         degraded restart, {rebuilt} of the failed member's rebuilt, {unavailable} unavailable"
    );
    assert_enough_checked(n, checked);
    assert!(rebuilt > 0, "no durable block of d1 was rebuilt");
    // Without the bitmap: every row unknown after the restart, d1's blocks all EIO.
    let (mut rebuilt, mut unavailable) = (0, 0);
    for (_, seed, o) in in_parallel(trial_seeds(n / 5), |_, seed| {
        raid5_degraded_trial(seed, false)
    }) {
        assert_trial_passed(seed, "RAID-5 without bitmap, degraded", &o.durable);
        rebuilt += o.rebuilt;
        unavailable += o.unavailable;
    }
    assert_eq!(rebuilt, 0, "rows unknown after a restart are never rebuilt");
    assert!(unavailable > 0);
}

/// A member failed as a whole (md's `Faulty`) under a power cut: its failure is in the log
/// before any answer depends on it, so the restart keeps it out and resumes its recovery
/// onto the spare; every acknowledged-durable block reads back (d1's from the spare or
/// rebuilt, or EIO in a region the cut left dirty — never wrong). `WATTIO_RAID5_FAILING_TRIALS`
/// trials (default 30).
#[test]
fn slow_raid5_with_a_failed_member_keeps_every_durable_block_through_a_power_cut() {
    let n = trials_or("WATTIO_RAID5_FAILING_TRIALS", 30);
    let (mut checked, mut on_d1, mut unavailable) = (0, 0, 0);
    let (mut recovered, mut moved) = (0.0, 0.0);
    for (_, seed, (o, c)) in in_parallel(trial_seeds(n), |_, seed| raid5_failing_trial(seed)) {
        assert_trial_passed(seed, "RAID-5, a failed member", &o.durable);
        checked += o.durable.durable_blocks;
        on_d1 += o.rebuilt;
        unavailable += o.unavailable;
        let get = |k: &str| c.iter().find(|(n, _)| n == k).map_or(0.0, |x| x.1);
        recovered += get("recovered_faulty");
        moved += get("replaced_stripes");
    }
    eprintln!(
        "{n} RAID-5 failed-member trials: {checked} acknowledged-durable blocks read back, \
         {on_d1} of d1's ({unavailable} unavailable); {recovered} restarts found d1 failed, \
         {moved} stripes on the spare at their ends"
    );
    assert_enough_checked(n, checked);
    assert!(recovered > 0.0, "no restart found the member failed");
    assert!(moved > 0.0, "no recovery onto the spare ran");
}

#[test]
fn the_raid5_check_fails_when_syncs_are_ignored() {
    assert_control_loses_most(5080, 90, |seed| raid5_trial(seed, true));
}
