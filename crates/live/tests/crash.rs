//! Writes acknowledged with FUA, or followed by an acknowledged FLUSH, survive a SIGKILL of
//! the server at a random point (checked block by block against their patterns).

mod common;

use common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use wattio_live::client::Client;

const BLOCK: usize = 4096;
const BLOCKS: usize = 2048;

fn round(seed: u64) {
    let d = TempDir::new("crash");
    let img = d.path("disk.img");
    std::fs::write(&img, vec![0u8; BLOCK * BLOCKS]).unwrap();
    let sock = d.path("s");
    let mut child = Command::new(env!("CARGO_BIN_EXE_wattio-live"))
        .args(["serve", "--status", "0", "--image"])
        .arg(&img)
        .arg("--socket")
        .arg(&sock)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut c = loop {
        match Client::connect(&uri(&sock, "")) {
            Ok(c) => break c,
            Err(_) if t0.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("server did not come up: {e}"),
        }
    };
    // Kill somewhere between 30 and 230 ms into the write stream.
    let delay = Duration::from_millis(30 + seed % 200);
    let pid = child.id() as i32;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(delay);
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let mut durable: Vec<usize> = Vec::new();
    let mut unflushed: Vec<usize> = Vec::new();
    'w: for b in 0..BLOCKS {
        let data = pattern(seed * 10_000 + b as u64, BLOCK);
        let fua = b % 3 != 0;
        match c.write((b * BLOCK) as u64, &data, fua) {
            Ok(r) if r.error == 0 => {
                if fua {
                    durable.push(b)
                } else {
                    unflushed.push(b)
                }
            }
            _ => break 'w,
        }
        if b % 16 == 15 {
            match c.flush() {
                Ok(r) if r.error == 0 => durable.append(&mut unflushed),
                _ => break 'w,
            }
        }
    }
    killer.join().unwrap();
    let _ = child.wait();
    let file = std::fs::read(&img).unwrap();
    for &b in &durable {
        assert_eq!(
            &file[b * BLOCK..(b + 1) * BLOCK],
            &pattern(seed * 10_000 + b as u64, BLOCK)[..],
            "seed {seed}: block {b} was acknowledged durable but is not on disk"
        );
    }
    eprintln!(
        "seed {seed}: killed after {delay:?}, {} durable blocks verified",
        durable.len()
    );
}

#[test]
fn acknowledged_fua_and_flushed_writes_survive_sigkill() {
    let base = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    for i in 0..3 {
        round(base.wrapping_add(i * 7919) % 1_000_003);
    }
}
