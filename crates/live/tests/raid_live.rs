//! Arrays served live: RAID-5's parity (`Action::Xor`) is computed by the live executor on
//! real bytes and lands in the member images; PARAID is one export through which fio's
//! crc32c verification passes while the gears shift (a short window forces shifts; both
//! upshift modes, on demand and full synchronization), and a
//! PARAID server killed with SIGKILL comes back with its dirty list, so every acknowledged
//! FUA or flushed write reads back.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use wattio_live::client::Client;
use wattio_live::server::{ListenAddr, Server};
use wattio_live::session::Session;
use wattio_live::setup::{build_from_config, ConfigServe};

const CONFIG: &str = r#"
[[device]]
name = "d0"
model = "fast-spinup-laptop-disk"
[[device]]
name = "d1"
model = "fast-spinup-laptop-disk"
[[device]]
name = "d2"
model = "fast-spinup-laptop-disk"

[[function]]
kind = "raid"
level = 5
devices = ["d0", "d1", "d2"]
chunk_kib = 4
"#;

/// A session of the run config `cfg` over `imgs`, the images of `d0`, `d1`, … in order.
fn build_members<P: AsRef<Path>>(cfg: &Path, imgs: &[P]) -> Result<Session, String> {
    build_from_config(&ConfigServe {
        config: cfg.to_path_buf(),
        images: imgs
            .iter()
            .enumerate()
            .map(|(k, p)| (format!("d{k}"), p.as_ref().to_path_buf()))
            .collect(),
        direct: false,
        capture: None,
        workers: 2,
        poll_us: None,
    })
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

#[test]
fn raid5_parity_lands_in_the_member_images() {
    const K: usize = 4096;
    let d = TempDir::new("raid5");
    let cfg = run_config(&d, CONFIG);
    let imgs: Vec<_> = (0..3)
        .map(|k| image(&d, &format!("d{k}.img"), 1 << 20, 30 + k as u64))
        .collect();
    let serve = || {
        let session = build_members(&cfg, &imgs).unwrap();
        Server::start(session, &ListenAddr::Unix(d.path("s"))).unwrap()
    };
    // RAID-5 keeps a copy of its bad-page log in each member's last 88 blocks (2 headers,
    // 2 snapshot slots of 11, 64 of journal; `log_members = "all"`, the default). Over
    // images whose region holds other bytes a new array refuses to format them: every
    // request is answered with an error (not left hanging) and the session reports why.
    let log = (2 + 2 * 11 + 64) * K;
    let end = (1 << 20) - log;
    let srv = serve();
    let mut c = Client::connect(&uri(&d.path("s"), "raid5")).unwrap();
    assert_ne!(c.write(0, &pattern(1, K), true).unwrap().error, 0);
    c.disconnect().unwrap();
    let e = srv.shutdown(Duration::from_secs(5)).unwrap_err();
    assert!(
        e.contains("is not a wattio metadata log") && e.contains("zero the region"),
        "{e}"
    );
    // Zeroed, the regions are formatted at start.
    for img in &imgs {
        let mut b = std::fs::read(img).unwrap();
        b[end..].fill(0);
        std::fs::write(img, &b).unwrap();
    }
    let orig: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let srv = serve();
    let sock = d.path("s");
    // The array is one export, `raid5`, of the array's size (two data members of 1 MiB
    // less the log's region; the members are not exported on their own). 4 KiB chunks, left-symmetric:
    // stripe 0 = chunk 0 on d0, chunk 1 on d1, parity on d2; stripe 1 = parity on d1,
    // chunk 2 on d2, chunk 3 on d0.
    assert!(Client::connect(&uri(&sock, "d1")).is_err());
    let mut c = Client::connect(&uri(&sock, "raid5")).unwrap();
    assert_eq!(c.size, 2 * end as u64);
    // A full row: parity = chunk 0 ^ chunk 1, no reads.
    let w = pattern(7, 2 * K);
    assert_eq!(c.write(0, &w, true).unwrap().error, 0);
    // Chunk 2 alone, in a row of unknown parity: reconstruct-write with chunk 3's old bytes.
    let w2 = pattern(8, K);
    assert_eq!(c.write(2 * K as u64, &w2, true).unwrap().error, 0);
    // Chunk 3 alone, now a known row: read-modify-write.
    let w3 = pattern(9, K);
    assert_eq!(c.write(3 * K as u64, &w3, true).unwrap().error, 0);
    let back = c.read(0, 4 * K as u32).unwrap();
    assert_eq!(back.error, 0);
    assert_eq!(back.data[..2 * K], w[..]);
    assert_eq!(back.data[2 * K..3 * K], w2[..]);
    assert_eq!(back.data[3 * K..], w3[..]);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    let m: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(m[0][..K], w[..K]);
    assert_eq!(m[1][..K], w[K..]);
    assert_eq!(m[2][..K], xor(&w[..K], &w[K..])[..], "stripe 0 parity");
    assert_eq!(m[2][K..2 * K], w2[..]);
    assert_eq!(m[0][K..2 * K], w3[..]);
    assert_eq!(
        m[1][K..2 * K],
        xor(&w2, &w3)[..],
        "stripe 1 parity, after RCW then RMW"
    );
    // Nothing else was touched but the log's copies, formatted at start.
    assert_eq!(m[0][2 * K..end], orig[0][2 * K..end]);
    assert_eq!(m[2][2 * K..end], orig[2][2 * K..end]);
    for (k, m) in m.iter().enumerate() {
        assert_eq!(
            &m[end..end + 8],
            b"WATTIOLG",
            "member {k}'s copy of the log"
        );
    }
}

/// A member absent from the start (`[device.fault] missing = true`: pulled, or dead), live:
/// it takes no image (given one, the server refuses to start, naming the key), the array is
/// exported all the same, and every write and read goes through it degraded — the first
/// I/O sent to `d2` fails, the array fails the member, and its chunks are rebuilt from
/// `d0` and `d1`. The images hold exactly the surviving members' halves (hand-computed),
/// and `d2` drew nothing.
#[test]
fn a_raid5_member_absent_from_the_start_takes_no_image_and_the_array_serves_without_it() {
    const K: usize = 4096;
    let d = TempDir::new("raid5-absent");
    let cfg = run_config(
        &d,
        &CONFIG.replace(
            "name = \"d2\"\nmodel = \"fast-spinup-laptop-disk\"\n",
            "name = \"d2\"\nmodel = \"fast-spinup-laptop-disk\"\n[device.fault]\nmissing = true\n",
        ),
    );
    assert!(std::fs::read_to_string(&cfg)
        .unwrap()
        .contains("missing = true"));
    let imgs: Vec<_> = (0..3)
        .map(|k| {
            let p = d.path(&format!("d{k}.img"));
            std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
            p
        })
        .collect();
    let build = |members: usize| build_members(&cfg, &imgs[..members]);
    let e = build(3)
        .err()
        .expect("an image for an absent device is refused");
    assert!(e.contains("`d2` is absent (`fault.missing`)"), "{e}");
    let srv = Server::start(build(2).unwrap(), &ListenAddr::Unix(d.path("s"))).unwrap();
    let log = (2 + 2 * 11 + 64) * K;
    let end = (1 << 20) - log;
    let mut c = Client::connect(&uri(&d.path("s"), "raid5")).unwrap();
    assert_eq!(c.size, 2 * end as u64);
    // Stripe 0: chunk 0 on d0, chunk 1 on d1, parity on d2 (absent). Stripe 1: parity on
    // d1, chunk 2 on d2 (absent), chunk 3 on d0.
    let w = pattern(7, 2 * K);
    let (w2, w3) = (pattern(8, K), pattern(9, K));
    assert_eq!(c.write(0, &w, true).unwrap().error, 0);
    assert_eq!(c.write(3 * K as u64, &w3, true).unwrap().error, 0);
    assert_eq!(c.write(2 * K as u64, &w2, true).unwrap().error, 0);
    let back = c.read(0, 4 * K as u32).unwrap();
    assert_eq!(back.error, 0);
    assert_eq!(back.data[..2 * K], w[..]);
    assert_eq!(
        back.data[2 * K..3 * K],
        w2[..],
        "chunk 2 rebuilt from d0 and d1"
    );
    assert_eq!(back.data[3 * K..], w3[..]);
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    let m: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(m[0][..K], w[..K]);
    assert_eq!(m[1][..K], w[K..]);
    assert_eq!(m[0][K..2 * K], w3[..]);
    assert_eq!(
        m[1][K..2 * K],
        xor(&w2, &w3)[..],
        "stripe 1 parity holds chunk 2"
    );
    assert!(m[2].iter().all(|&b| b == 0), "d2's file was never opened");
    let d2 = &s.devices[2];
    assert_eq!((d2.name.as_str(), d2.state.as_str()), ("d2", "absent"));
    assert_eq!(d2.energy_j, 0.0);
    let rt = s.runtimes[2].as_ref().expect("d2 is modelled");
    assert!(rt.counters().absent_ios >= 1, "{:?}", rt.counters());
    assert!(s.devices[0].energy_j > 0.0);
}

/// Two arrays made live from one config with its log on every member
/// (`log_members = "all"`): each session draws its own array id, so a member image of the
/// other array is refused at start, naming both arrays; and a member image swapped for a
/// blank one is not taken as that member — its chunks are rebuilt from the others (the
/// write-intent bitmap, logged clean at each stop, says the parity is known), where taking
/// it would have served zeros.
#[test]
fn arrays_made_live_are_told_apart_and_a_blank_member_image_is_not_assembled() {
    const K: usize = 4096;
    let d = TempDir::new("raid5-identity");
    let cfg = run_config(
        &d,
        &CONFIG.replace(
            "chunk_kib = 4\n",
            "chunk_kib = 4\nlog_members = \"all\"\nassume_clean = true\nwrite_intent = true\n",
        ),
    );
    let blank = |name: &str| {
        let p = d.path(name);
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        p
    };
    let a: Vec<_> = (0..3).map(|k| blank(&format!("a{k}.img"))).collect();
    let b: Vec<_> = (0..3).map(|k| blank(&format!("b{k}.img"))).collect();
    let serve = |imgs: [&Path; 3]| {
        let session = build_members(&cfg, &imgs).unwrap();
        Server::start(session, &ListenAddr::Unix(d.path("s"))).unwrap()
    };
    // Array A: stripe 0 written (chunk 0 on d0, chunk 1 on d1, parity on d2).
    let w = pattern(11, 2 * K);
    let srv = serve([&a[0], &a[1], &a[2]]);
    let mut c = Client::connect(&uri(&d.path("s"), "raid5")).unwrap();
    assert_eq!(c.write(0, &w, true).unwrap().error, 0);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    // Array B, made by another session from the same config.
    serve([&b[0], &b[1], &b[2]])
        .shutdown(Duration::from_secs(5))
        .unwrap();
    // A's d0 and d2 with B's d1: refused, nothing served.
    let srv = serve([&a[0], &b[1], &a[2]]);
    let mut c = Client::connect(&uri(&d.path("s"), "raid5")).unwrap();
    assert_ne!(c.read(0, K as u32).unwrap().error, 0);
    c.disconnect().unwrap();
    let e = srv.shutdown(Duration::from_secs(5)).unwrap_err();
    assert!(
        e.contains("belong to different arrays")
            && e.contains("on `d0`, `d2`; array ")
            && e.contains("on `d1`)"),
        "{e}"
    );
    // A with d1's image swapped for a blank one: d1 is not assembled, and chunk 1 comes
    // back from d0 and the parity.
    let fresh = blank("fresh.img");
    let srv = serve([&a[0], &fresh, &a[2]]);
    let mut c = Client::connect(&uri(&d.path("s"), "raid5")).unwrap();
    let back = c.read(0, 2 * K as u32).unwrap();
    assert_eq!(back.error, 0);
    let chunks = |x: &[u8]| [x[..K] == w[..K], x[K..2 * K] == w[K..]];
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(
        chunks(&back.data),
        [true, true],
        "stripe 0 read back whole, chunk 1 rebuilt; {:?}",
        s.function_counters
    );
    assert!(
        std::fs::read(&fresh).unwrap()[..2 * K]
            .iter()
            .all(|&x| x == 0),
        "the blank image took none of the array's data"
    );
}

/// A member replaced by a hot spare, live: d1's chunks (data and parity) are copied onto
/// the spare's image while the array is written, every write after a stripe has moved goes
/// to the spare, and once all have, the array no longer needs d1 at all: with d1's image
/// overwritten, a restarted server (the replacement read back from the log) reads every
/// byte back from d0, d2 and the spare.
#[test]
fn a_member_replaced_live_moves_onto_the_spare_image_and_the_array_no_longer_needs_it() {
    const K: usize = 4096;
    const CHUNK: usize = 4 * K;
    let d = TempDir::new("raid5-spare");
    let cfg = run_config(
        &d,
        &format!(
            "{CONFIG}spare = \"d3\"\nreplace = \"d1\"\nreplace_window_kib = 64\n\n[[device]]\nname = \"d3\"\nmodel = \"fast-spinup-laptop-disk\"\n"
        )
        .replace("chunk_kib = 4", "chunk_kib = 16"),
    );
    let imgs: Vec<_> = (0..4)
        .map(|k| image(&d, &format!("d{k}.img"), 1 << 20, 40 + k as u64))
        .collect();
    // Each member's last 88 blocks are its copy of the log: zeroed, they are formatted at
    // start. The spare's hold its image's bytes: formatted when the replacement starts.
    // Members of 1 MiB less the log: 42 stripes of 16 KiB chunks, two data chunks each.
    let log = (2 + 2 * 11 + 64) * K;
    let end = (1 << 20) - log;
    let stripes = end / CHUNK;
    for img in &imgs[..3] {
        let mut b = std::fs::read(img).unwrap();
        b[end..].fill(0);
        std::fs::write(img, &b).unwrap();
    }
    let images: Vec<(String, &Path)> = (0..4)
        .map(|k| (format!("d{k}"), imgs[k].as_path()))
        .collect();
    let images: Vec<(&str, &Path)> = images.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let sock = d.path("s");
    let size = stripes * 2 * CHUNK;
    // The volume as the host wrote it (its first bytes before any write: the members'
    // own, which the array does not know the parity of, so the test writes them all).
    let mut want = pattern(50, size);
    let srv = serve_config(&cfg, &images, &sock);
    let mut c = Client::connect(&uri(&sock, "raid5")).unwrap();
    assert_eq!(c.size, size as u64);
    // The whole volume, 64 KiB at a time (FUA), while the replacement copies.
    for at in (0..size).step_by(16 * K) {
        let e = c
            .write(at as u64, &want[at..at + 16 * K], true)
            .unwrap()
            .error;
        assert_eq!(e, 0, "write at {at}");
    }
    let session = srv.session();
    let moved = || session.counter("raid5", "replaced_stripes").unwrap() as usize;
    let t0 = std::time::Instant::now();
    while moved() < stripes {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{} of {stripes} moved",
            moved()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every stripe is on the spare: new writes (a page in each stripe) go there only.
    for s in 0..stripes {
        let at = s * 2 * CHUNK + CHUNK + K;
        want[at..at + K].copy_from_slice(&pattern(60 + s as u64, K));
        assert_eq!(
            c.write(at as u64, &want[at..at + K], true).unwrap().error,
            0
        );
    }
    let back = c.read(0, size as u32).unwrap();
    assert_eq!((back.error, back.data == want), (0, true));
    c.disconnect().unwrap();
    let sum = srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(layer_counter(&sum, "raid5", "replacements"), 1.0);
    // The spare holds d1's column: every stripe's parity is the XOR of its data with the
    // spare in d1's place (left-symmetric, 3 members: parity on 2 − s mod 3).
    let m: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let col = |k: usize, s: usize| {
        let dev = if k == 1 { 3 } else { k };
        &m[dev][s * CHUNK..(s + 1) * CHUNK]
    };
    for s in 0..stripes {
        assert_eq!(
            xor(&xor(col(0, s), col(1, s)), col(2, s)),
            vec![0; CHUNK],
            "stripe {s}"
        );
    }
    // d1 is out of the array: overwritten, and the server restarted, every byte reads back.
    std::fs::write(&imgs[1], vec![0xa5; 1 << 20]).unwrap();
    let srv = serve_config(&cfg, &images, &sock);
    let mut c = Client::connect(&uri(&sock, "raid5")).unwrap();
    let back = c.read(0, size as u32).unwrap();
    assert_eq!((back.error, back.data == want), (0, true));
    c.disconnect().unwrap();
    let sum = srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(layer_counter(&sum, "raid5", "resumed_replacements"), 1.0);
    assert_eq!(
        layer_counter(&sum, "raid5", "replaced_stripes"),
        stripes as f64
    );
}

/// Row ranges (16 KiB chunks: four page rows a stripe, one member I/O a member for a
/// range) compute the same parity as row by row: a whole stripe (full-row range), a chunk
/// in a stripe of unknown parity (reconstruct-write range), a chunk in a known one
/// (read-modify-write range) and a write with partial pages at both ends. Every stripe's
/// parity chunk is then the XOR of its data chunks, on real bytes.
#[test]
fn raid5_row_ranges_put_the_right_parity_in_the_member_images() {
    const C: usize = 16 << 10;
    let d = TempDir::new("raid5-ranges");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut cfg = format!("catalogue = [{:?}]\n", data.display().to_string());
    for k in 0..4 {
        cfg += &format!("[[device]]\nname = \"d{k}\"\nmodel = \"fast-spinup-laptop-disk\"\n");
    }
    cfg += "[[function]]\nkind = \"raid\"\nlevel = 5\ndevices = [\"d0\", \"d1\", \"d2\", \"d3\"]\n";
    cfg += "chunk_kib = 16\npersist = false\n";
    std::fs::write(d.path("run.toml"), cfg).unwrap();
    let imgs: Vec<_> = (0..4)
        .map(|k| image(&d, &format!("d{k}.img"), 1 << 20, 50 + k as u64))
        .collect();
    let orig: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let session = build_members(&d.path("run.toml"), &imgs).unwrap();
    let srv = Server::start(session, &ListenAddr::Unix(d.path("s"))).unwrap();
    let mut c = Client::connect(&uri(&d.path("s"), "raid5")).unwrap();
    // Left-symmetric over four: stripe 0 = chunks 0, 1, 2 on d0, d1, d2, parity on d3;
    // stripe 1 = parity on d2, chunks 3, 4, 5 on d3, d0, d1.
    let w1 = pattern(11, 3 * C);
    assert_eq!(c.write(0, &w1, true).unwrap().error, 0);
    let w2 = pattern(12, C);
    assert_eq!(c.write(3 * C as u64, &w2, true).unwrap().error, 0);
    let w3 = pattern(13, C);
    assert_eq!(c.write(4 * C as u64, &w3, true).unwrap().error, 0);
    // Chunk 5 from 2 KiB to 13 KiB: a partial page, two whole pages (one range), a partial.
    let w4 = pattern(14, 11 << 10);
    assert_eq!(c.write(5 * C as u64 + 2048, &w4, true).unwrap().error, 0);
    let back = c.read(0, 6 * C as u32).unwrap();
    assert_eq!(back.error, 0);
    assert_eq!(back.data[..3 * C], w1[..]);
    assert_eq!(back.data[3 * C..4 * C], w2[..]);
    assert_eq!(back.data[4 * C..5 * C], w3[..]);
    assert_eq!(back.data[5 * C + 2048..5 * C + 13312], w4[..]);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    let m: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let x3 = |a: &[u8], b: &[u8], c: &[u8]| xor(&xor(a, b), c);
    assert_eq!(
        m[3][..C],
        x3(&w1[..C], &w1[C..2 * C], &w1[2 * C..])[..],
        "stripe 0"
    );
    assert_eq!(
        m[2][C..2 * C],
        x3(&m[3][C..2 * C], &m[0][C..2 * C], &m[1][C..2 * C])[..],
        "stripe 1"
    );
    // Chunk 5's bytes outside the write are the member's own.
    assert_eq!(m[1][C..C + 2048], orig[1][C..C + 2048]);
    assert_eq!(m[1][C + 13312..2 * C], orig[1][C + 13312..2 * C]);
    // Nothing past the two stripes was touched.
    for k in 0..4 {
        assert_eq!(m[k][2 * C..], orig[k][2 * C..], "d{k}");
    }
}

#[test]
fn fio_verifies_through_a_five_disk_paraid_export_while_gears_shift() {
    fio_through_paraid("on-demand");
}

/// The same with the paper's full synchronization: each upshift holds the low gear until
/// the arriving disks are current.
#[test]
fn fio_verifies_through_paraid_upshifting_by_full_synchronization() {
    fio_through_paraid("full");
}

fn fio_through_paraid(upshift: &str) {
    if !have("fio") {
        return;
    }
    let d = TempDir::new("paraid");
    let cfg = d.path("run.toml");
    std::fs::write(&cfg, paraid_config(upshift)).unwrap();
    // Zeroed members: `assume_clean` holds (every parity is the XOR of zero data).
    let imgs: Vec<_> = (0..5)
        .map(|k| {
            let p = d.path(&format!("d{k}.img"));
            std::fs::write(&p, vec![0u8; 8 << 20]).unwrap();
            p
        })
        .collect();
    let session = build_members(&cfg, &imgs).unwrap();
    let sock = d.path("s");
    let srv = Server::start(session, &ListenAddr::Unix(sock.clone())).unwrap();
    // Bursts of 64 writes with 300 ms pauses: busy samples, then idle ones.
    fio_ok(&[
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={}", uri(&sock, "paraid")),
        "--rw=randwrite",
        "--bs=4k",
        "--size=1M",
        "--iodepth=8",
        "--thinktime=300000",
        "--thinktime_blocks=64",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--verify_state_save=0",
    ]);
    // The status line shows the array's gear (0 or 1 here).
    let snap = srv.session().snapshot();
    let line = wattio_live::report::status_line(&snap, 1.0);
    let gear = snap.gears[0].1;
    assert!(line.contains(&format!(" | paraid gear={gear}")), "{line}");
    let summary = srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(summary.stats.errors, 0);
    let c = &summary
        .function_counters
        .iter()
        .find(|(n, _)| n == "paraid")
        .unwrap()
        .1;
    let get = |k: &str| c.iter().find(|(n, _)| n == k).unwrap().1;
    assert!(get("upshifts") >= 1.0 && get("downshifts") >= 1.0, "{c:?}");
    assert!(get("propagation_copies") > 0.0, "{c:?}");
}

/// Trials of the kill test: `WATTIO_PARAID_KILL_TRIALS` (default 2).
fn kill_trials() -> u64 {
    std::env::var("WATTIO_PARAID_KILL_TRIALS").map_or(2, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("WATTIO_PARAID_KILL_TRIALS: expected a number, got `{v}`"))
    })
}

/// `wattio-live serve` of the PARAID config over the five images, as a child process (so
/// it can be killed); returns once the export answers.
// The child is handed to the caller, which kills and waits for it.
#[allow(clippy::zombie_processes)]
fn serve_child(d: &TempDir, sock: &Path) -> (Child, Client) {
    let cfg = d.path("run.toml");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wattio-live"));
    cmd.arg("serve").arg(&cfg);
    for k in 0..5 {
        cmd.arg("--image")
            .arg(format!("d{k}={}", d.path(&format!("d{k}.img")).display()));
    }
    let mut child = cmd
        .arg("--socket")
        .arg(sock)
        .args(["--status", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    loop {
        if let Ok(c) = Client::connect(&uri(sock, "paraid")) {
            return (child, c);
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("server did not come up");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Slow (about a second a trial). Bursts of writes (a third FUA, the rest made durable by a
/// FLUSH at the burst's end) with idle pauses, so that the array shifts down (propagating)
/// and up between them, from the lowest gear; then a last FUA burst and SIGKILL. Restarted
/// on the same images, every block reads back its last write. The page cache survives a
/// SIGKILL, so this checks what PARAID itself must persist — which copy of each chunk is
/// the newer, and the gear — not the images' fsyncs (`tests/crash.rs` checks those for a
/// single image). With `persist = false` in the config it fails: the restarted array reads
/// the chunks written through replicas from their stale originals.
#[test]
fn slow_a_killed_paraid_server_loses_no_fua_or_flushed_write() {
    const K: usize = 4096;
    const BLOCKS: u64 = 256;
    for trial in 0..kill_trials() {
        let d = TempDir::new("paraid-kill");
        // Both upshift modes: even trials on demand, odd ones by full synchronization.
        let upshift = if trial % 2 == 0 { "on-demand" } else { "full" };
        std::fs::write(d.path("run.toml"), paraid_config(upshift)).unwrap();
        for k in 0..5 {
            std::fs::write(d.path(&format!("d{k}.img")), vec![0u8; 8 << 20]).unwrap();
        }
        let sock = d.path("s");
        let (mut child, mut c) = serve_child(&d, &sock);
        let mut last: std::collections::HashMap<u64, Vec<u8>> = Default::default();
        let mut n = 0u64;
        for round in 0..5 {
            for i in 0..32u64 {
                n += 1;
                let block = (trial * 7919 + n * 2_654_435_761) % BLOCKS;
                let data = pattern(trial << 32 | n, K);
                let fua = round == 4 || i % 3 == 0;
                assert_eq!(c.write(block * K as u64, &data, fua).unwrap().error, 0);
                last.insert(block, data);
            }
            if round < 4 {
                assert_eq!(c.flush().unwrap().error, 0);
                std::thread::sleep(Duration::from_millis(150));
            }
        }
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        child.wait().unwrap();
        drop(c);
        let _ = std::fs::remove_file(&sock);
        let (mut child, mut c) = serve_child(&d, &sock);
        for (&block, data) in &last {
            let r = c.read(block * K as u64, K as u32).unwrap();
            assert_eq!(r.error, 0);
            assert!(
                r.data == *data,
                "trial {trial}: block {block} lost its last acknowledged write after the kill"
            );
        }
        c.disconnect().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
