//! Slow (60 s): a mixed soak of a `wattio-live serve` process. Sixteen verifying clients,
//! each with its own region, pipeline writes (some FUA), reads checked against what they
//! wrote, FLUSH, TRIM and WRITE_ZEROES; two more connect, pipeline reads and vanish with
//! their replies pending, over and over. The server's RSS is sampled every 250 ms and must
//! stay within the global budget (`--total-mib 48`) plus slack; at the end every block is
//! read back and checked. Another length:
//! `WATTIO_SOAK_S=600 cargo test --release -p wattio-live --test soak`.

mod common;

use common::*;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wattio_live::client::Client;

const BLOCK: u64 = 4096;
const REGION: u64 = 512;
const CLIENTS: u64 = 16;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// One verifying client until `stop`: returns the requests it made and its region's
/// expected content.
fn verifier(u: String, id: u64, stop: Arc<AtomicBool>) -> (u64, HashMap<u64, Vec<u8>>) {
    let mut c = Client::connect(&u).unwrap();
    let base = id * REGION;
    let mut want: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut rng = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let b = base + rng % REGION;
        let blocks = 1 + (rng >> 32) % 8;
        let blocks = blocks.min(base + REGION - b);
        let off = b * BLOCK;
        let len = (blocks * BLOCK) as u32;
        match (rng >> 40) % 10 {
            0..=3 => {
                let data = pattern(rng, len as usize);
                let r = c.write(off, &data, rng.is_multiple_of(5)).unwrap();
                assert_eq!(r.error, 0);
                for i in 0..blocks {
                    let s = (i * BLOCK) as usize;
                    want.insert(b + i, data[s..s + BLOCK as usize].to_vec());
                }
            }
            4..=7 => {
                let r = c.read(off, len).unwrap();
                assert_eq!(r.error, 0);
                for i in 0..blocks {
                    let s = (i * BLOCK) as usize;
                    let got = &r.data[s..s + BLOCK as usize];
                    match want.get(&(b + i)) {
                        Some(w) => assert_eq!(got, w.as_slice(), "client {id}: block {}", b + i),
                        None => assert!(got.iter().all(|&x| x == 0)),
                    }
                }
            }
            8 => assert_eq!(c.flush().unwrap().error, 0),
            _ => {
                let r = if rng.is_multiple_of(2) {
                    c.trim(off, len).unwrap()
                } else {
                    c.write_zeroes(off, len).unwrap()
                };
                assert_eq!(r.error, 0);
                for i in 0..blocks {
                    want.insert(b + i, vec![0; BLOCK as usize]);
                }
            }
        }
        n += 1;
    }
    c.disconnect().unwrap();
    (n, want)
}

#[test]
fn slow_mixed_soak_with_verifying_clients_and_bounded_memory() {
    let secs: u64 = std::env::var("WATTIO_SOAK_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let d = TempDir::new("soak");
    let img = d.path("disk.img");
    std::fs::write(&img, vec![0u8; (CLIENTS * REGION * BLOCK) as usize]).unwrap();
    let sock = d.path("s");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wattio-live"))
        .args(["serve", "--status", "0", "--workers", "2"])
        .args(["--total-mib", "48", "--image"])
        .arg(&img)
        .arg("--socket")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let u = uri(&sock, "");
    let t0 = Instant::now();
    while Client::connect(&u).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = child.id();
    let base = rss_kib(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let verifiers: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (u, stop) = (u.clone(), stop.clone());
            std::thread::spawn(move || verifier(u, id, stop))
        })
        .collect();
    let resetters: Vec<_> = (0..2)
        .map(|k| {
            let (sock, stop) = (sock.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    vanish_with_reads_pending(
                        &sock,
                        200 + k * 100,
                        64 << 10,
                        CLIENTS * REGION * BLOCK,
                        Duration::from_millis(100),
                    );
                    rounds += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                rounds
            })
        })
        .collect();
    let mut peak = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(250));
        peak = peak.max(rss_kib(pid));
    }
    stop.store(true, Ordering::Relaxed);
    let mut requests = 0;
    let mut want = HashMap::new();
    for v in verifiers {
        let (n, w) = v.join().unwrap();
        requests += n;
        want.extend(w);
    }
    let resets: u64 = resetters.into_iter().map(|r| r.join().unwrap()).sum();
    // Everything written is there, read through a fresh connection.
    let mut c = Client::connect(&u).unwrap();
    for (b, w) in &want {
        assert_eq!(
            &c.read(b * BLOCK, BLOCK as u32).unwrap().data,
            w,
            "block {b}"
        );
    }
    c.disconnect().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let (base, peak) = (base as f64 / 1024.0, peak as f64 / 1024.0);
    eprintln!(
        "soak {secs} s: {requests} verified requests, {resets} reset connections, RSS {base:.1} MiB at rest, peak {peak:.1} MiB"
    );
    assert!(requests > 1000 * secs.min(10), "only {requests} requests");
    // Whatever the connections, the server holds at most the global budget (48 MiB here)
    // of requests and replies; 32 MiB more covers input buffers, stacks and the allocator.
    assert!(
        peak < base + 48.0 + 32.0,
        "peak RSS {peak:.1} MiB, {base:.1} at rest"
    );
}
