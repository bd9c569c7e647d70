#![allow(dead_code)]

pub mod powercut;
pub mod vm;

use std::path::{Path, PathBuf};
use std::time::Duration;
use wattio_core::testing::SpecDisk;
use wattio_live::server::{ListenAddr, Server};
use wattio_live::setup::{self, ServeSpec};

/// A scratch directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), tag)
    }

    /// In memory (`/dev/shm`) where there is one: an image whose real writes and syncs
    /// cost nothing next to an emulated device's timing.
    pub fn in_memory(tag: &str) -> TempDir {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            TempDir::new_in(shm, tag)
        } else {
            TempDir::new(tag)
        }
    }

    pub fn new_in(base: &Path, tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let p = base.join(format!(
            "wattio-live-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A deterministic, non-repeating byte pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub fn image(dir: &TempDir, name: &str, len: usize, seed: u64) -> PathBuf {
    let p = dir.path(name);
    std::fs::write(&p, pattern(seed, len)).unwrap();
    p
}

pub fn serve(spec: &ServeSpec, sock: &Path) -> Server {
    let s = setup::build(spec).unwrap();
    Server::start(s, &ListenAddr::Unix(sock.to_path_buf())).unwrap()
}

pub fn uri(sock: &Path, export: &str) -> String {
    format!("nbd+unix:///{export}?socket={}", sock.display())
}

/// Run fio with `args` (terse output, version 3) and panic with its output unless it
/// reports no error.
pub fn fio_ok(args: &[&str]) {
    let out = std::process::Command::new("fio")
        .args(args)
        .args(["--output-format=terse", "--terse-version=3"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("3;"))
        .unwrap_or_else(|| panic!("{text}"));
    let f: Vec<&str> = line.split(';').collect();
    assert_eq!(f[4], "0", "fio error: {text}");
}

/// One fio job over export `export`'s first 2 MiB: random 4 KiB writes in the order of
/// `seed`, checked with `verify` (`crc32c`: random bytes under a header with their
/// checksum; `pattern`: the byte `seed` repeated, compared whole); `extra` says how (read
/// back as it goes, or only verify). Panics with fio's output unless it reports no error.
pub fn fio_verify(sock: &Path, export: &str, seed: u32, verify: &str, extra: &[&str]) {
    let uri = format!("--uri={}", uri(sock, export));
    let pattern = format!("--verify_pattern=0x{seed:02x}");
    let verify = format!("--verify={verify}");
    let seed = format!("--randseed={seed}");
    let mut args = vec![
        "--name=verify",
        "--ioengine=nbd",
        &uri,
        "--rw=randwrite",
        "--bs=4k",
        "--size=2M",
        "--iodepth=4",
        &seed,
        &verify,
        &pattern,
        "--verify_fatal=1",
        "--verify_state_save=0",
    ];
    args.extend(extra);
    fio_ok(&args);
}

/// Is an external tool installed? Interop tests skip (saying so) when it is not.
pub fn have(tool: &str) -> bool {
    let found = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        eprintln!("SKIP: `{tool}` is not installed (scripts/apt-packages.txt lists it)");
    }
    found
}

/// A client that pipelines `n` READs of `len` bytes at offsets cycling through `span` bytes
/// (the handshake too, in the same write), reads nothing, gives the server `patience` to
/// take the requests, and vanishes with the replies pending.
pub fn vanish_with_reads_pending(sock: &Path, n: u64, len: u32, span: u64, patience: Duration) {
    use std::io::Write;
    use wattio_live::proto::*;
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(sock) else {
        return;
    };
    let mut m = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
        .to_be_bytes()
        .to_vec();
    encode_option(&mut m, OPT_GO, &go_data("", &[]));
    for i in 0..n {
        encode_request(&mut m, 0, CMD_READ, i, (i * len as u64) % span, len);
    }
    let _ = s.set_write_timeout(Some(patience));
    // A server applying backpressure stops taking them: the timeout ends the write.
    let _ = s.write_all(&m);
}

/// `run.toml` in `d`: `body` (devices and functions) after the tests' own catalogue
/// (`tests/data`, the emulated drives the live tests use).
pub fn run_config(d: &TempDir, body: &str) -> PathBuf {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cfg = d.path("run.toml");
    let text = format!("catalogue = [{:?}]\n{body}", data.display().to_string());
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// A server for a run config (`wattio serve --config`) over `images` (device name, image
/// path), on a Unix socket.
pub fn serve_config(cfg: &Path, images: &[(&str, &Path)], sock: &Path) -> Server {
    serve_config_capturing(cfg, images, sock, None)
}

/// [`serve_config`], capturing the guest's requests to `capture` (`--capture`) if given.
pub fn serve_config_capturing(
    cfg: &Path,
    images: &[(&str, &Path)],
    sock: &Path,
    capture: Option<&Path>,
) -> Server {
    let session = setup::build_from_config(&setup::ConfigServe {
        config: cfg.to_path_buf(),
        images: images
            .iter()
            .map(|(n, p)| (n.to_string(), p.to_path_buf()))
            .collect(),
        direct: false,
        capture: capture.map(Path::to_path_buf),
        workers: 2,
        poll_us: None,
    })
    .unwrap();
    Server::start(session, &ListenAddr::Unix(sock.to_path_buf())).unwrap()
}

/// Counter `name` of the first function layer whose name starts with `layer`, from a
/// server's summary; panics naming what is there when either is missing.
pub fn layer_counter(s: &wattio_live::session::Summary, layer: &str, name: &str) -> f64 {
    let c = &s
        .function_counters
        .iter()
        .find(|(n, _)| n.starts_with(layer))
        .unwrap_or_else(|| panic!("no {layer} layer: {:?}", s.function_counters))
        .1;
    c.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no counter {name}: {c:?}"))
        .1
}

/// A fast disk with a standby state: 15K RPM, 0.5 ms seeks, 50 ms transitions, so that
/// propagation and shifts fit in a short test.
pub const FAST_STANDBY_DISK: SpecDisk = SpecDisk {
    capacity_bytes: 1_000_000_000,
    rpm: 15000,
    avg_seek_ms: 0.5,
    media_rate_mbps: 200,
    active_w: 9.6,
    seek_w: None,
    idle_w: 6.5,
    standby_w: 2.9,
    spin_down: (0.05, 0.3),
    spin_up: (0.05, 1.2),
};

/// The PARAID array over five `FAST_STANDBY_DISK`s, upshifting `upshift` ("on-demand" or "full").
pub fn paraid_config(upshift: &str) -> String {
    let mut c = String::new();
    for k in 0..5 {
        c += &format!(
            "[[device]]\nname = \"d{k}\"\n{}\n",
            FAST_STANDBY_DISK.toml()
        );
    }
    // RAID-5 gears {3,5}; 50 ms samples, a window of one: a busy sample shifts up, an idle
    // one down (the threshold is low so that fio's pace counts as load).
    c + r#"
[[function]]
kind = "paraid"
level = 5
devices = ["d0", "d1", "d2", "d3", "d4"]
gears = [3, 5]
chunk_kib = 4
assume_clean = true
sample_s = 0.05
window = 1
threshold = 0.2
rated_cycles = 1_000_000_000
start = "lowest"
"# + &format!("upshift = \"{upshift}\"\n")
}
