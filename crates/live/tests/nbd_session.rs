//! End-to-end over a Unix socket with wattio's own client: data round trips, protocol
//! errors, several exports, multiple connections, disconnects, capture, emulation.

mod common;

use common::*;
use std::io::Write;
use std::time::{Duration, Instant};
use wattio_live::client::Client;
use wattio_live::proto::*;
use wattio_live::setup::ServeSpec;

fn spec(images: Vec<std::path::PathBuf>) -> ServeSpec {
    ServeSpec {
        images,
        workers: 2,
        poll_us: None,
        ..ServeSpec::default()
    }
}

#[test]
fn reads_writes_trim_zero_and_flush_round_trip_to_the_image() {
    let d = TempDir::new("rt");
    let img = image(&d, "a.img", 1 << 20, 1);
    let sock = d.path("s");
    let srv = serve(&spec(vec![img.clone()]), &sock);
    let mut c = Client::connect(&uri(&sock, "a.img")).unwrap();
    assert!(c.structured);
    assert_eq!(c.size, 1 << 20);
    let orig = pattern(1, 1 << 20);
    let r = c.read(4096 + 3, 10_000).unwrap();
    assert_eq!(r.error, 0);
    assert_eq!(r.data, &orig[4099..14_099]);
    let w = pattern(99, 8192);
    assert_eq!(c.write(65_536, &w, true).unwrap().error, 0);
    assert_eq!(c.write_zeroes(0, 4096).unwrap().error, 0);
    assert_eq!(c.trim(131_072, 4096).unwrap().error, 0);
    assert_eq!(c.flush().unwrap().error, 0);
    assert_eq!(c.read(65_536, 8192).unwrap().data, w);
    c.disconnect().unwrap();
    let summary = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(summary.stats.requests, 6);
    assert_eq!(summary.stats.reads, 2);
    assert_eq!(summary.stats.writes, 2);
    assert_eq!(summary.stats.bytes_read, 10_000 + 8192);
    let file = std::fs::read(&img).unwrap();
    assert!(file[..4096].iter().all(|&b| b == 0));
    assert_eq!(&file[4096..65_536], &orig[4096..65_536]);
    assert_eq!(&file[65_536..73_728], &w[..]);
    // TRIM punched a hole: those bytes read back as zeros on a file system that supports
    // it, else keep their old content. Either is allowed; anything else is corruption.
    let t = &file[131_072..135_168];
    assert!(t.iter().all(|&b| b == 0) || t == &orig[131_072..135_168]);
}

#[test]
fn bad_requests_get_the_spec_errors_and_the_connection_survives() {
    let d = TempDir::new("err");
    let img = image(&d, "a.img", 1 << 16, 2);
    let sock = d.path("s");
    let mut s = spec(vec![img]);
    s.read_only = false;
    let srv = serve(&s, &sock);
    let mut c = Client::connect(&uri(&sock, "")).unwrap();
    assert_eq!(c.read((1 << 16) - 100, 200).unwrap().error, EINVAL);
    assert_eq!(
        c.write((1 << 16) - 100, &[1; 200], false).unwrap().error,
        ENOSPC
    );
    assert_eq!(
        c.raw(0, CMD_READ, 0, DEFAULT_MAX_BLOCK + 1, None)
            .unwrap()
            .error,
        EINVAL
    );
    assert_eq!(c.raw(0, 9, 0, 512, None).unwrap().error, EINVAL);
    assert_eq!(c.raw(1 << 5, CMD_READ, 0, 512, None).unwrap().error, EINVAL);
    assert_eq!(c.raw(0, CMD_TRIM, 1 << 16, 1, None).unwrap().error, EINVAL);
    // Still usable after all of that.
    assert_eq!(c.read(0, 16).unwrap().data, pattern(2, 16));
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn read_only_export_answers_eperm() {
    let d = TempDir::new("ro");
    let img = image(&d, "a.img", 1 << 16, 3);
    let sock = d.path("s");
    let mut s = spec(vec![img.clone()]);
    s.read_only = true;
    let srv = serve(&s, &sock);
    let mut c = Client::connect(&uri(&sock, "a.img")).unwrap();
    assert_ne!(c.flags & FLAG_READ_ONLY, 0);
    assert_eq!(c.write(0, &[7; 512], false).unwrap().error, EPERM);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(std::fs::read(&img).unwrap(), pattern(3, 1 << 16));
}

#[test]
fn several_exports_map_to_their_own_component_devices() {
    let d = TempDir::new("multi");
    let a = image(&d, "a.img", 1 << 16, 10);
    let b = image(&d, "b.img", 1 << 17, 11);
    let sock = d.path("s");
    let mut s = spec(vec![a, b]);
    s.names = vec!["alpha".into(), "beta".into()];
    let srv = serve(&s, &sock);
    let mut ca = Client::connect(&uri(&sock, "alpha")).unwrap();
    let mut cb = Client::connect(&uri(&sock, "beta")).unwrap();
    assert_eq!((ca.size, cb.size), (1 << 16, 1 << 17));
    assert_eq!(ca.read(0, 64).unwrap().data, pattern(10, 64));
    assert_eq!(cb.read(0, 64).unwrap().data, pattern(11, 64));
    assert!(Client::connect(&uri(&sock, "gamma"))
        .err()
        .unwrap()
        .contains("refused"));
    ca.disconnect().unwrap();
    cb.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn multi_conn_a_write_acknowledged_on_one_connection_is_visible_and_flushed_from_another() {
    let d = TempDir::new("mc");
    let img = image(&d, "a.img", 1 << 20, 4);
    let sock = d.path("s");
    let srv = serve(&spec(vec![img.clone()]), &sock);
    let mut conns: Vec<Client> = (0..4)
        .map(|_| Client::connect(&uri(&sock, "a.img")).unwrap())
        .collect();
    assert_ne!(conns[0].flags & FLAG_CAN_MULTI_CONN, 0);
    for (i, c) in conns.iter_mut().enumerate() {
        assert_eq!(
            c.write(i as u64 * 4096, &pattern(100 + i as u64, 4096), false)
                .unwrap()
                .error,
            0
        );
    }
    assert_eq!(conns[3].flush().unwrap().error, 0);
    for i in 0..4 {
        assert_eq!(
            conns[(i + 1) % 4].read(i as u64 * 4096, 4096).unwrap().data,
            pattern(100 + i as u64, 4096)
        );
    }
    for c in conns {
        c.disconnect().unwrap();
    }
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn pipelined_requests_all_complete_with_their_own_cookies() {
    let d = TempDir::new("pipe");
    let img = image(&d, "a.img", 1 << 20, 5);
    let sock = d.path("s");
    let srv = serve(&spec(vec![img]), &sock);
    let (mut tx, mut rx) = Client::connect(&uri(&sock, "a.img")).unwrap().split();
    let n = 200u64;
    for i in 0..n {
        tx.send(0, CMD_READ, (i * 4096) % (1 << 20), 4096, None)
            .unwrap();
    }
    let orig = pattern(5, 1 << 20);
    let mut seen = vec![false; n as usize + 1];
    for _ in 0..n {
        let r = rx.recv().unwrap();
        assert_eq!(r.error, 0);
        let off = (((r.cookie - 1) * 4096) % (1 << 20)) as usize;
        assert_eq!(r.data, &orig[off..off + 4096]);
        assert!(!seen[r.cookie as usize]);
        seen[r.cookie as usize] = true;
    }
    tx.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

/// Replies bigger than the socket buffer and than the per-batch cork, pipelined: partial
/// `writev`s and cork flushes must still put every byte of every reply in order. Pass-through
/// replies go out corked from the reader thread; emulated ones from the timer thread,
/// uncorked, with `writev`.
#[test]
fn pipelined_large_and_odd_sized_reads_arrive_whole() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fast-spinup-laptop-disk.toml");
    pipelined_large_reads(spec_with(None));
    pipelined_large_reads(spec_with(Some(fixture)));
}

fn spec_with(model: Option<std::path::PathBuf>) -> ServeSpec {
    ServeSpec {
        emulate: model.is_some(),
        model,
        ..spec(vec![])
    }
}

fn pipelined_large_reads(mut sp: ServeSpec) {
    let d = TempDir::new("bigpipe");
    let size = 4usize << 20;
    let img = image(&d, "a.img", size, 15);
    let sock = d.path("s");
    sp.images = vec![img];
    let srv = serve(&sp, &sock);
    let (mut tx, mut rx) = Client::connect(&uri(&sock, "a.img")).unwrap().split();
    let lens: [u32; 8] = [
        1 << 20,
        3,
        700 * 1024,
        4096,
        2 << 20,
        1,
        300 * 1024 + 7,
        65_536,
    ];
    let mut reqs = Vec::new();
    for round in 0..3u64 {
        for (i, &len) in lens.iter().enumerate() {
            let off = (round * 1_234_567 + i as u64 * 333_333) % (size as u64 - len as u64);
            tx.send(0, CMD_READ, off, len, None).unwrap();
            reqs.push((off as usize, len as usize));
        }
    }
    let orig = pattern(15, size);
    let mut seen = vec![false; reqs.len()];
    for _ in 0..reqs.len() {
        let r = rx.recv().unwrap();
        assert_eq!(r.error, 0);
        let k = (r.cookie - 1) as usize;
        let (off, len) = reqs[k];
        assert_eq!(r.data.len(), len, "request {k}");
        assert!(r.data == orig[off..off + len], "request {k}: wrong bytes");
        assert!(!seen[k]);
        seen[k] = true;
    }
    tx.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn client_vanishing_mid_request_loses_nothing_acknowledged() {
    let d = TempDir::new("vanish");
    let img = image(&d, "a.img", 1 << 20, 6);
    let sock = d.path("s");
    let srv = serve(&spec(vec![img.clone()]), &sock);
    let (mut tx, mut rx) = Client::connect(&uri(&sock, "a.img")).unwrap().split();
    for i in 0..64u64 {
        tx.send(0, CMD_WRITE, i * 8192, 8192, Some(&pattern(1000 + i, 8192)))
            .unwrap();
    }
    let mut acked = Vec::new();
    for _ in 0..20 {
        let r = rx.recv().unwrap();
        assert_eq!(r.error, 0);
        acked.push(r.cookie - 1);
    }
    // Half a request header, then the socket goes away.
    let mut raw = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    raw.write_all(&NBDMAGIC.to_be_bytes()[..3]).unwrap();
    drop(raw);
    drop(tx);
    drop(rx);
    // The server still holds the requests the client sent before vanishing; give it until
    // they are all on disk (bounded) before shutting down, so the check below is about
    // what the server does with them, not about how fast it reads.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let file = std::fs::read(&img).unwrap();
        let done = (0..64u64)
            .filter(|&i| {
                let o = (i * 8192) as usize;
                file[o..o + 8192] == pattern(1000 + i, 8192)[..]
            })
            .count();
        if done == 64 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(
        summary.stats.writes, 64,
        "every fully received write is carried out"
    );
    let file = std::fs::read(&img).unwrap();
    for i in acked {
        let o = (i * 8192) as usize;
        assert_eq!(
            &file[o..o + 8192],
            &pattern(1000 + i, 8192)[..],
            "acknowledged write {i}"
        );
    }
}

#[test]
fn capture_records_every_guest_request_in_arrival_order() {
    let d = TempDir::new("cap");
    let img = image(&d, "a.img", 1 << 16, 7);
    let sock = d.path("s");
    let mut s = spec(vec![img]);
    s.capture = Some(d.path("cap.txt"));
    let srv = serve(&s, &sock);
    let mut c = Client::connect(&uri(&sock, "a.img")).unwrap();
    c.read(512, 1024).unwrap();
    c.write(4096, &[1; 2048], true).unwrap();
    c.flush().unwrap();
    c.trim(8192, 4096).unwrap();
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    let text = std::fs::read_to_string(d.path("cap.txt")).unwrap();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .collect();
    let ops: Vec<(&str, &str, &str)> = rows.iter().map(|r| (r[1], r[2], r[3])).collect();
    assert_eq!(
        ops,
        vec![
            ("read", "512", "1024"),
            ("write", "4096", "2048"),
            ("flush", "0", "0"),
            ("discard", "8192", "4096")
        ]
    );
    let t: Vec<u64> = rows.iter().map(|r| r[0].parse().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn replay_sends_a_captured_trace_with_its_timing() {
    let d = TempDir::new("replay");
    let img = image(&d, "a.img", 1 << 20, 8);
    let sock = d.path("s");
    let srv = serve(&spec(vec![img]), &sock);
    let trace = d.path("t.txt");
    // 4 requests over 200 ms, one beyond the export (skipped).
    std::fs::write(
        &trace,
        "0 read 0 4096 0 0\n50000000 write 8192 4096 0 0\n100000000 flush 0 0 0 0\n200000000 read 4096 512 0 0\n200000001 read 1048576 512 0 0\n",
    )
    .unwrap();
    let mut t = wattio_live::replay::TextTrace::open(&trace).unwrap();
    let t0 = Instant::now();
    let r = wattio_live::replay::replay(&mut t, &uri(&sock, "a.img"), &Default::default()).unwrap();
    let el = t0.elapsed();
    assert_eq!((r.sent, r.errors, r.skipped), (4, 0, 1));
    assert_eq!(r.latency.count(), 4);
    assert!(
        el >= Duration::from_millis(200),
        "original timing kept: {el:?}"
    );
    let summary = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(summary.stats.requests, 4);
    assert_eq!(summary.stats.writes, 1);
}

#[test]
fn emulated_disk_that_spun_down_makes_the_guest_wait_for_spin_up() {
    let d = TempDir::new("emu");
    let img = image(&d, "a.img", 1 << 20, 9);
    let sock = d.path("s");
    let mut s = spec(vec![img]);
    s.model = Some(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/fast-spinup-laptop-disk.toml"),
    );
    s.emulate = true;
    s.spindown_s = Some(0.05);
    let srv = serve(&s, &sock);
    let mut c = Client::connect(&uri(&sock, "a.img")).unwrap();
    assert_ne!(c.flags & FLAG_ROTATIONAL, 0);
    let t = Instant::now();
    assert_eq!(c.read(0, 4096).unwrap().data, pattern(9, 4096));
    let first = t.elapsed();
    // Idle 0.05 s → spin-down (0.1 s) → standby; the next read waits for the 0.3 s spin-up.
    std::thread::sleep(Duration::from_millis(400));
    let snap = srv.session().snapshot();
    assert_eq!(snap.devices[0].state, "standby");
    let t = Instant::now();
    assert_eq!(
        c.read(8192, 4096).unwrap().data,
        pattern(9, 12288)[8192..].to_vec()
    );
    let second = t.elapsed();
    assert!(
        first < Duration::from_millis(200),
        "spinning disk: {first:?}"
    );
    assert!(
        second >= Duration::from_millis(300),
        "spin-up enforced: {second:?}"
    );
    c.disconnect().unwrap();
    let sum = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(sum.devices[0].spin_ups, 1);
    let (_, rows) = &sum.ledgers[0];
    let get = |n: &str| rows.iter().find(|r| r.slot == n).unwrap().clone();
    assert_eq!(get("spin_down").entries, 1);
    assert_eq!(get("spin_up").entries, 1);
    // Energy is residency × watts, slot by slot: 0.3 s of spin-up at 1.35 J / 0.3 s.
    let up = get("spin_up");
    assert!((up.residency_ns as f64 / 1e9 - 0.3).abs() < 0.02, "{up:?}");
    assert!((up.energy_j - 1.35).abs() < 0.1, "{up:?}");
    let total: f64 = rows.iter().map(|r| r.energy_j).sum();
    assert!((total - sum.devices[0].energy_j).abs() < 1e-9);
}
