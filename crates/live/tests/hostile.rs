//! Hostile clients against a real `wattio-live serve` process (the audit's reproducers of
//! issue 21): what they can make the server hold is bounded, oversized headers disconnect at
//! once, idle connections cost bounded threads and memory, descriptors close when
//! connections end, and a reset storm with replies pending leaves the server serving.
//! Memory, threads and descriptors are read from `/proc/PID`.

mod common;

use common::*;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use wattio_live::client::Client;
use wattio_live::proto::*;

/// A `wattio-live serve` child process, killed on drop.
struct Proc {
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn start(img: &Path, sock: &Path, extra: &[&str]) -> Proc {
        let child = Command::new(env!("CARGO_BIN_EXE_wattio-live"))
            .args(["serve", "--status", "0", "--workers", "2", "--image"])
            .arg(img)
            .arg("--socket")
            .arg(sock)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t0 = Instant::now();
        while Client::connect(&uri(sock, "")).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "server did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let p = Proc { child };
        // The probe connection above must be gone before baselines are taken.
        p.wait_for(|p| p.fds(), |n| n <= 12, Duration::from_secs(2));
        p
    }

    fn status(&self, key: &str) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} not in /proc/PID/status"))
    }

    /// Resident memory now and at its peak, MiB.
    fn rss_mib(&self) -> f64 {
        self.status("VmRSS:") as f64 / 1024.0
    }
    fn peak_rss_mib(&self) -> f64 {
        self.status("VmHWM:") as f64 / 1024.0
    }
    fn threads(&self) -> u64 {
        self.status("Threads:")
    }
    fn fds(&self) -> u64 {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count() as u64
    }

    /// Poll `f` until `ok` holds (or `limit` passes); returns the last value.
    fn wait_for(&self, f: impl Fn(&Proc) -> u64, ok: impl Fn(u64) -> bool, limit: Duration) -> u64 {
        let t0 = Instant::now();
        loop {
            let v = f(self);
            if ok(v) || t0.elapsed() > limit {
                return v;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn greeted(sock: &Path) -> UnixStream {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut g = [0u8; 18];
    s.read_exact(&mut g).unwrap();
    assert_eq!(&g[..8], b"NBDMAGIC");
    s
}

/// Read until EOF; how long it took.
fn time_to_eof(s: &mut UnixStream) -> Duration {
    let t0 = Instant::now();
    let mut b = [0u8; 4096];
    loop {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return t0.elapsed(),
            Ok(_) => {}
        }
    }
}

#[test]
fn a_client_that_never_reads_its_replies_meets_backpressure_not_allocation() {
    let d = TempDir::new("slowreader");
    let img = image(&d, "disk.img", 64 << 20, 3);
    let sock = d.path("s");
    let p = Proc::start(&img, &sock, &[]);
    let base = p.rss_mib();
    // 2,000 pipelined 1 MiB READs (56 KB of headers), replies unread: the audit's probe
    // took the server to 2 GB.
    let c = Client::connect(&uri(&sock, "")).unwrap();
    let (mut tx, mut rx) = c.split();
    let sender = std::thread::spawn(move || {
        for i in 0..2000u64 {
            tx.send(0, CMD_READ, (i % 64) << 20, 1 << 20, None).unwrap();
        }
        tx
    });
    std::thread::sleep(Duration::from_secs(2));
    let peak = p.peak_rss_mib();
    eprintln!("slow reader: server RSS {base:.1} MiB at rest, peak {peak:.1} MiB with 2,000 x 1 MiB READs unread");
    // The per-connection budget is 16 MiB; the bound leaves room for the allocator and
    // socket-side copies, and is far below the 2 GB the unbounded server reached.
    assert!(
        peak < base + 40.0,
        "peak RSS {peak:.1} MiB (at rest {base:.1})"
    );
    // Backpressure, not loss: every reply arrives, with the right data, once read.
    let want = std::fs::read(&img).unwrap();
    let mut seen = vec![false; 2000];
    for _ in 0..2000 {
        let r = rx.recv().unwrap();
        assert_eq!(r.error, 0);
        // Cookies are 1..=2000 in send order; replies may come in any order.
        let i = r.cookie - 1;
        assert!(
            !std::mem::replace(&mut seen[i as usize], true),
            "cookie {}",
            r.cookie
        );
        let off = ((i % 64) << 20) as usize;
        assert!(
            r.data == want[off..off + (1 << 20)],
            "cookie {}: wrong data",
            r.cookie
        );
    }
    let mut tx = sender.join().unwrap();
    tx.disconnect().unwrap();
}

#[test]
fn four_gigabyte_option_and_write_headers_disconnect_at_once() {
    let d = TempDir::new("bighdr");
    let img = image(&d, "disk.img", 1 << 20, 4);
    let sock = d.path("s");
    let _p = Proc::start(&img, &sock, &[]);
    // An option claiming 4 GiB − 1 bytes of data, none sent.
    let mut s = greeted(&sock);
    let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
    m.extend_from_slice(&IHAVEOPT.to_be_bytes());
    m.extend_from_slice(&OPT_GO.to_be_bytes());
    m.extend_from_slice(&u32::MAX.to_be_bytes());
    s.write_all(&m).unwrap();
    let t = time_to_eof(&mut s);
    assert!(t < Duration::from_secs(2), "option: closed after {t:?}");
    // A WRITE header claiming 4 GiB − 1 bytes, no payload.
    let c = Client::connect(&uri(&sock, "")).unwrap();
    let (mut tx, mut rx) = c.split();
    tx.send(0, CMD_WRITE, 0, u32::MAX, None).unwrap();
    let t0 = Instant::now();
    assert!(rx.recv().is_err(), "a reply instead of a disconnect");
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "write: {:?}",
        t0.elapsed()
    );
}

#[test]
fn idle_connections_cost_bounded_threads_and_memory_and_time_out() {
    let d = TempDir::new("idle");
    let img = image(&d, "disk.img", 1 << 20, 5);
    let sock = d.path("s");
    let p = Proc::start(
        &img,
        &sock,
        &["--max-connections", "64", "--handshake-timeout", "1"],
    );
    let (threads0, rss0, fds0) = (p.threads(), p.rss_mib(), p.fds());
    // 1,000 connections that never say a word (the audit: 1,007 threads, 270 MB).
    let conns: Vec<UnixStream> = (0..1000)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let (threads, rss) = (p.threads(), p.rss_mib());
    eprintln!(
        "1,000 idle connections: threads {threads0} -> {threads}, RSS {rss0:.1} -> {rss:.1} MiB"
    );
    assert!(threads <= threads0 + 64, "{threads} threads");
    assert!(rss < rss0 + 32.0, "RSS {rss:.1} MiB");
    // Past the handshake timeout every one of them is closed, and so are its descriptors.
    let fds = p.wait_for(|p| p.fds(), |n| n <= fds0, Duration::from_secs(5));
    assert!(fds <= fds0, "{fds} descriptors open, {fds0} before");
    let threads = p.wait_for(|p| p.threads(), |n| n <= threads0, Duration::from_secs(5));
    assert!(threads <= threads0, "{threads} threads");
    let mut open = 0;
    for mut c in conns {
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut b = [0u8; 64];
        loop {
            match c.read(&mut b) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => {
                    open += 1;
                    break;
                }
            }
        }
    }
    assert_eq!(
        open, 0,
        "connections still open after the handshake timeout"
    );
    // And the server still serves.
    let mut c = Client::connect(&uri(&sock, "")).unwrap();
    assert_eq!(c.read(0, 4096).unwrap().error, 0);
}

#[test]
fn descriptors_close_when_connections_end_without_a_new_accept() {
    let d = TempDir::new("fds");
    let img = image(&d, "disk.img", 1 << 20, 6);
    let sock = d.path("s");
    let p = Proc::start(&img, &sock, &[]);
    let fds0 = p.fds();
    let clients: Vec<Client> = (0..20)
        .map(|_| Client::connect(&uri(&sock, "")).unwrap())
        .collect();
    let open = p.wait_for(|p| p.fds(), |n| n >= fds0 + 20, Duration::from_secs(2));
    assert!(open >= fds0 + 20, "{open} descriptors with 20 clients");
    for c in clients {
        c.disconnect().unwrap();
    }
    let fds = p.wait_for(|p| p.fds(), |n| n <= fds0, Duration::from_secs(2));
    assert!(
        fds <= fds0,
        "{fds} descriptors after the clients left ({fds0} before)"
    );
}

#[test]
fn a_reset_storm_with_replies_pending_leaves_the_server_serving() {
    let d = TempDir::new("reset");
    let img = image(&d, "disk.img", 16 << 20, 7);
    let sock = d.path("s");
    let p = Proc::start(&img, &sock, &[]);
    let base = p.rss_mib();
    for round in 0..5 {
        let t_round = Instant::now();
        let storm: Vec<_> = (0..8)
            .map(|_| {
                let sock = sock.clone();
                // 1,000 READs pending at the reset (nbdkit aborted on this).
                std::thread::spawn(move || {
                    vanish_with_reads_pending(
                        &sock,
                        1000,
                        64 << 10,
                        16 << 20,
                        Duration::from_millis(200),
                    )
                })
            })
            .collect();
        for t in storm {
            t.join().unwrap();
        }
        eprintln!(
            "round {round}: storm {:?}, RSS {:.1} MiB",
            t_round.elapsed(),
            p.rss_mib()
        );
        // Another client is served promptly meanwhile.
        let t0 = Instant::now();
        let mut c = Client::connect(&uri(&sock, "")).unwrap();
        let r = c.read(4096, 4096).unwrap();
        assert_eq!(r.error, 0);
        assert_eq!(r.data, std::fs::read(&img).unwrap()[4096..8192]);
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "round {round}: {:?}",
            t0.elapsed()
        );
    }
    let peak = p.peak_rss_mib();
    eprintln!("reset storm: RSS at rest {base:.1} MiB, peak {peak:.1} MiB");
    // Eight connections of at most 16 MiB (the per-connection budget) each.
    assert!(peak < base + 8.0 * 16.0 + 32.0, "peak RSS {peak:.1} MiB");
}

#[test]
fn a_socket_a_server_answers_on_is_not_replaced_and_a_stale_one_is() {
    let d = TempDir::new("sockrepl");
    let img = image(&d, "disk.img", 1 << 20, 8);
    let sock = d.path("s");
    let spec = wattio_live::setup::ServeSpec {
        images: vec![img.clone()],
        ..Default::default()
    };
    let first = serve(&spec, &sock);
    let second = wattio_live::setup::build(&spec).unwrap();
    let e = wattio_live::Server::start(second, &wattio_live::ListenAddr::Unix(sock.clone()))
        .err()
        .unwrap();
    assert!(e.contains("a server is answering on this socket"), "{e}");
    // The first server still serves on it.
    let mut c = Client::connect(&uri(&sock, "")).unwrap();
    assert_eq!(c.read(0, 512).unwrap().error, 0);
    c.disconnect().unwrap();
    first.shutdown(Duration::from_secs(5)).unwrap();
    // A socket file nobody listens on (a server that died) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let again = serve(&spec, &sock);
    assert!(Client::connect(&uri(&sock, "")).is_ok());
    again.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn a_non_loopback_address_needs_allow_remote() {
    let d = TempDir::new("remote");
    let img = image(&d, "disk.img", 1 << 20, 9);
    let spec = wattio_live::setup::ServeSpec {
        images: vec![img],
        ..Default::default()
    };
    let any = wattio_live::ListenAddr::parse_tcp("0.0.0.0:0").unwrap();
    let e = wattio_live::Server::start(wattio_live::setup::build(&spec).unwrap(), &any)
        .err()
        .unwrap();
    assert!(e.contains("--allow-remote"), "{e}");
    let opts = wattio_live::ServerOptions {
        allow_remote: true,
        ..Default::default()
    };
    let srv =
        wattio_live::Server::start_with(wattio_live::setup::build(&spec).unwrap(), &any, &opts)
            .unwrap();
    let port = srv.addr().rsplit(':').next().unwrap();
    let mut c = Client::connect(&format!("nbd://127.0.0.1:{port}/")).unwrap();
    assert_eq!(c.read(0, 512).unwrap().error, 0);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    // Loopback needs nothing.
    let lo = wattio_live::ListenAddr::parse_tcp("127.0.0.1:0").unwrap();
    let srv = wattio_live::Server::start(wattio_live::setup::build(&spec).unwrap(), &lo).unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn limits_and_tls_flags_are_checked_where_they_are_parsed() {
    use wattio_live::server::Limits;
    assert_eq!(
        Limits::from_flags(None, None, None, None, None).unwrap(),
        Limits::default()
    );
    let l = Limits::from_flags(Some(8.0), Some(64.0), Some(4), Some(2.5), Some(30.0)).unwrap();
    assert_eq!(l.conn_bytes, 8 << 20);
    assert_eq!(l.total_bytes, 64 << 20);
    assert_eq!(l.max_connections, 4);
    assert_eq!(l.handshake_timeout, Duration::from_millis(2500));
    // The global budget must hold one maximum payload (2^25) and the per-connection one.
    let e = Limits::from_flags(None, Some(16.0), None, None, None).unwrap_err();
    assert!(e.contains("total in-flight bytes"), "{e}");
    let e = Limits::from_flags(Some(512.0), None, None, None, None).unwrap_err();
    assert!(e.contains("per-connection limit"), "{e}");
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(Limits::from_flags(Some(bad), None, None, None, None).is_err());
        assert!(Limits::from_flags(None, None, None, Some(bad), None).is_err());
    }
    assert!(Limits::from_flags(None, None, Some(0), None, None).is_err());
    let e = wattio_live::tls::from_flags("yes", None, None).unwrap_err();
    assert!(e.contains("off, on"), "{e}");
    let e = wattio_live::tls::from_flags("require", None, None).unwrap_err();
    assert!(e.contains("--tls-certificate"), "{e}");
    let e = wattio_live::tls::from_flags("off", Some(Path::new("c.pem")), None).unwrap_err();
    assert!(e.contains("without --tls"), "{e}");
    let e = wattio_live::tls::from_flags(
        "on",
        Some(Path::new("/nonexistent/c.pem")),
        Some(Path::new("/nonexistent/k.pem")),
    )
    .unwrap_err();
    assert!(e.contains("/nonexistent/c.pem"), "{e}");
    assert!(wattio_live::tls::from_flags("off", None, None)
        .unwrap()
        .is_none());
}
