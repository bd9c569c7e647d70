//! blktrace's binary files against blkparse, the tool that defines them: a generated trace
//! of several per-CPU files (queued, merged, issued and completed I/O on three devices,
//! process notifications, flushes, discards, FUA writes, a remap) is read by the binary
//! reader, and turned into text by the real `blkparse` (Debian's `blktrace` package,
//! scripts/apt-packages.txt) and read by the blkparse text reader: the requests must be
//! the same, field for field, for every event kept.

use std::path::Path;
use std::process::Command;
use wattio_core::{Op, Request};
use wattio_formats::{open_trace, ReadOptions};
use wattio_workload::Rng;

const MAGIC: u32 = 0x6561_7407;

/// Categories, shifted into the action word.
const fn tc(c: u32) -> u32 {
    c << 16
}
const READ: u32 = 1;
const WRITE: u32 = 1 << 1;
const FLUSH: u32 = 1 << 2;
const SYNC: u32 = 1 << 3;
const QUEUE: u32 = 1 << 4;
const REQUEUE: u32 = 1 << 5;
const ISSUE: u32 = 1 << 6;
const COMPLETE: u32 = 1 << 7;
const FS: u32 = 1 << 8;
const NOTIFY: u32 = 1 << 10;
const AHEAD: u32 = 1 << 11;
const META: u32 = 1 << 12;
const DISCARD: u32 = 1 << 13;
const FUA: u32 = 1 << 15;

#[allow(clippy::too_many_arguments)]
fn record(
    seq: u32,
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    dev: u32,
    cpu: u32,
    pdu: &[u8],
) -> Vec<u8> {
    let mut v = Vec::with_capacity(48 + pdu.len());
    v.extend(MAGIC.to_le_bytes());
    v.extend(seq.to_le_bytes());
    v.extend(time.to_le_bytes());
    v.extend(sector.to_le_bytes());
    v.extend(bytes.to_le_bytes());
    v.extend(action.to_le_bytes());
    v.extend(pid.to_le_bytes());
    v.extend(dev.to_le_bytes());
    v.extend(cpu.to_le_bytes());
    v.extend(0u16.to_le_bytes());
    v.extend((pdu.len() as u16).to_le_bytes());
    v.extend(pdu);
    v
}

/// One generated I/O's times: queued, got a request, issued, completed, and its merged bios
/// queued.
struct Io {
    q: u64,
    g: u64,
    d: u64,
    c: u64,
    merged_q: Vec<u64>,
}

/// Writes `DIR/sdx.blktrace.{0..cpus}`: `n` I/Os, each queued, (sometimes merged,) issued
/// on the CPU it was queued on and completed on any, up to four in flight; times strictly
/// increasing across the whole trace so that merge order is not a matter of ties. Returns
/// each I/O's times, in issue order.
fn write_trace(dir: &Path, cpus: u32, n: u32) -> Vec<Io> {
    let mut rng = Rng::new(7);
    let devs = [8 << 20 | 16, 8 << 20 | 17, 253 << 20];
    let mut files: Vec<Vec<u8>> = vec![Vec::new(); cpus as usize];
    let mut seq = vec![0u32; cpus as usize];
    let mut t: u64 = 1_000_000_000_000; // the kernel's clock: ns since boot
    let mut times = Vec::new();
    let mut pending: Vec<(u64, u32, u32, u32, u32, usize)> = Vec::new();
    let mut push = |files: &mut Vec<Vec<u8>>,
                    t: u64,
                    cpu: u32,
                    sector: u64,
                    bytes: u32,
                    action: u32,
                    pid: u32,
                    dev: u32,
                    pdu: &[u8]| {
        seq[cpu as usize] += 1;
        let r = record(
            seq[cpu as usize],
            t,
            sector,
            bytes,
            action,
            pid,
            dev,
            cpu,
            pdu,
        );
        files[cpu as usize].extend(r);
    };
    // Process names are announced first, with the earlier time a process was first seen.
    for (i, pid) in [100u32, 101, 102].iter().enumerate() {
        let name = format!("proc{i}\0");
        push(
            &mut files,
            t - 5_000 + i as u64,
            0,
            0,
            0,
            tc(NOTIFY),
            *pid,
            devs[0],
            name.as_bytes(),
        );
    }
    for i in 0..n {
        let cpu = rng.below(cpus as u64) as u32;
        let pid = 100 + rng.below(3) as u32;
        let dev = devs[rng.below(3) as usize];
        let sector = rng.below(1 << 30) & !7;
        let bytes = (1 + rng.below(32) as u32) * 4096;
        let kind = rng.below(20);
        let cats = match kind {
            0 => FLUSH,                // an empty flush: RWBS FN
            1 => DISCARD | WRITE,      // D
            2 => WRITE | SYNC | FUA,   // WFS
            3 => FLUSH | WRITE | SYNC, // FWS, with data
            4 => READ | AHEAD,         // RA
            5 => READ | META | SYNC,   // RSM
            6..=12 => WRITE,           // W
            _ => READ,                 // R
        } | FS;
        let bytes = if kind == 0 { 0 } else { bytes };
        t += 1 + rng.below(50_000);
        let q_time = t;
        push(
            &mut files,
            t,
            cpu,
            sector,
            bytes,
            1 | tc(cats | QUEUE),
            pid,
            dev,
            &[],
        );
        // It gets a request (G) before any merge.
        t += 1 + rng.below(1000);
        let g_time = t;
        push(
            &mut files,
            t,
            cpu,
            sector,
            bytes,
            4 | tc(cats | QUEUE),
            pid,
            dev,
            &[],
        );
        // Every seventh I/O with data takes a neighbour's bio queued at its end as a back
        // merge (M), every eleventh one queued before its start as a front merge (F): it is
        // issued and completed with its range grown by 4 KiB each time.
        let mut merged_q = Vec::new();
        let (mut sector, mut bytes) = (sector, bytes);
        for (merge, wanted) in [(2, i % 7 == 3), (3, i % 11 == 5 && sector >= 8)] {
            if !wanted || kind == 0 {
                continue;
            }
            let bio = if merge == 2 {
                sector + u64::from(bytes) / 512
            } else {
                sector - 8
            };
            for action in [1, merge] {
                t += 1 + rng.below(1000);
                push(
                    &mut files,
                    t,
                    cpu,
                    bio,
                    4096,
                    action | tc(cats | QUEUE),
                    pid,
                    dev,
                    &[],
                );
                if action == 1 {
                    merged_q.push(t);
                }
            }
            sector = sector.min(bio);
            bytes += 4096;
        }
        t += 1 + rng.below(20_000);
        push(
            &mut files,
            t,
            cpu,
            sector,
            bytes,
            7 | tc(cats | ISSUE),
            pid,
            dev,
            &[],
        );
        // Every thirteenth with data is sent back by the driver (R) and issued again.
        if i % 13 == 7 && kind != 0 {
            for action in [6 | tc(cats | REQUEUE), 7 | tc(cats | ISSUE)] {
                t += 1 + rng.below(20_000);
                push(&mut files, t, cpu, sector, bytes, action, pid, dev, &[]);
            }
        }
        let d_time = t;
        pending.push((sector, bytes, cats, pid, dev, times.len()));
        times.push(Io {
            q: q_time,
            g: g_time,
            d: d_time,
            c: 0,
            merged_q,
        });
        // Up to three I/Os in flight, completed in any order (an empty flush at once, so
        // that two flushes of one device, which only their order tells apart, never
        // overlap); the trace's last ones all complete at its end.
        let keep = if kind == 0 { 0 } else { rng.below(4) as usize };
        while pending.len() > keep || (i + 1 == n && !pending.is_empty()) {
            let j = if kind == 0 {
                pending.len() - 1
            } else {
                rng.below(pending.len() as u64) as usize
            };
            let (sector, bytes, cats, pid, dev, k) = pending.swap_remove(j);
            t += 1 + rng.below(100_000);
            times[k].c = t;
            let done_cpu = rng.below(cpus as u64) as u32;
            push(
                &mut files,
                t,
                done_cpu,
                sector,
                bytes,
                8 | tc(cats | COMPLETE),
                pid,
                dev,
                &[],
            );
        }
    }
    // A remap of 8,17 onto 253,0: blkparse prints it on the device it maps to.
    let mut pdu = Vec::new();
    pdu.extend((8u32 << 20 | 17).to_be_bytes());
    pdu.extend((253u32 << 20).to_be_bytes());
    pdu.extend(4096u64.to_be_bytes());
    t += 10;
    push(
        &mut files,
        t,
        0,
        2048,
        8192,
        15 | tc(READ | QUEUE),
        100,
        8 << 20 | 17,
        &pdu,
    );
    for (cpu, f) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("sdx.blktrace.{cpu}")), f).unwrap();
    }
    times
}

fn read(path: &Path, format: &str, action: char) -> Vec<Request> {
    let opts = ReadOptions {
        blkparse_action: Some(action),
        ..ReadOptions::default()
    };
    let mut src = open_trace(path, Some(format), &opts).expect("opens");
    let mut v = Vec::new();
    while let Some(r) = src.next_request().expect("reads") {
        v.push(r);
    }
    v
}

#[test]
fn the_binary_reader_agrees_with_blkparse_on_every_event() {
    if Command::new("blkparse").arg("-V").output().is_err() {
        eprintln!("SKIP blktrace round trip: blkparse not installed (scripts/install-apt.sh)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("wattio-blktrace-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let times = write_trace(&dir, 3, 2000);
    let text = dir.join("sdx.txt");
    let out = Command::new("blkparse")
        .args(["-i", "sdx", "-o"])
        .arg(&text)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "blkparse: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Any one of the per-CPU files names the trace.
    let binary = dir.join("sdx.blktrace.1");
    for action in ['Q', 'G', 'M', 'F', 'R', 'D', 'C', 'A'] {
        let ours = read(&binary, "blktrace", action);
        let theirs = read(&text, "blkparse", action);
        assert!(!ours.is_empty(), "{action}: no requests");
        assert_eq!(ours.len(), theirs.len(), "{action}: request counts");
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{action}: request {i}");
        }
    }
    // The issued requests: 2,000, less the empty flushes' none — every kind is present.
    let d = read(&binary, "blktrace", 'D');
    assert_eq!(d.len(), 2000);
    assert!(
        d[0].arrival > 0,
        "times count from the first queued request"
    );
    let devs: std::collections::BTreeSet<u16> = d.iter().map(|r| r.dev).collect();
    assert_eq!(devs.len(), 3);
    // Each issued request measured from its issue to its own completion, though up to four
    // were in flight and completed out of order; queued ones from their queueing.
    let d2c: Vec<_> = times.iter().map(|io| Some(io.c - io.d)).collect();
    assert_eq!(d.iter().map(|r| r.measured).collect::<Vec<_>>(), d2c);
    // Merged bios are queued after their request and complete with it.
    let q2c: Vec<_> = times
        .iter()
        .flat_map(|io| {
            std::iter::once(io.q)
                .chain(io.merged_q.iter().copied())
                .map(move |q| Some(io.c - q))
        })
        .collect();
    let q = read(&binary, "blktrace", 'Q');
    assert!(q2c.len() > 2400, "{} queued bios", q2c.len());
    assert_eq!(q.iter().map(|r| r.measured).collect::<Vec<_>>(), q2c);
    // Kept at G, before the merges: a front merge moves the request's first sector, and
    // its completion still finds it. (A requeued request was issued twice: D2C above is from
    // the second, and it went out once.)
    let g2c: Vec<_> = times.iter().map(|io| Some(io.c - io.g)).collect();
    let g = read(&binary, "blktrace", 'G');
    assert_eq!(g.iter().map(|r| r.measured).collect::<Vec<_>>(), g2c);
    assert!(d.windows(2).any(|w| w[0].measured > w[1].measured));
    // Detected without --format, from the magic.
    let mut src = open_trace(&binary, None, &ReadOptions::default()).unwrap();
    let mut n = 0;
    while src.next_request().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2000);
    let notes = src.assumptions().join("\n");
    assert!(notes.contains("detected blktrace binary"), "{notes}");
    assert!(
        notes.contains(
            "merged 3 per-CPU files by time: sdx.blktrace.0, sdx.blktrace.1, sdx.blktrace.2"
        ),
        "{notes}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_per_cpu_file_is_named_with_the_offset_of_its_bad_record() {
    let dir = std::env::temp_dir().join(format!("wattio-blktrace-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let issue = |seq, t, s| record(seq, t, s, 4096, 7 | tc(WRITE | ISSUE), 1, 8 << 20, 0, &[]);
    std::fs::write(
        dir.join("sdy.blktrace.0"),
        [issue(1, 10, 8), issue(2, 30, 16)].concat(),
    )
    .unwrap();
    // CPU 1's second record is cut short 20 bytes in.
    let mut c1 = issue(1, 20, 24);
    c1.extend(&issue(2, 40, 32)[..20]);
    std::fs::write(dir.join("sdy.blktrace.1"), c1).unwrap();
    let mut src = open_trace(
        &dir.join("sdy.blktrace.0"),
        Some("blktrace"),
        &ReadOptions::default(),
    )
    .unwrap();
    let mut got = Vec::new();
    let err = loop {
        match src.next_request() {
            Ok(Some(r)) => got.push(r.offset / 512),
            Ok(None) => panic!("the damage is reported"),
            Err(e) => break e.to_string(),
        }
    };
    // The records before the damage are read; the damage is named with its file and offset.
    assert_eq!(got, [8, 24]);
    let bad = dir.join("sdy.blktrace.1").display().to_string();
    assert!(err.contains(&bad), "{err}");
    assert!(
        err.contains("byte 48") || err.contains("offset 48"),
        "{err}"
    );
    assert!(
        err.contains("the file ends 20 bytes into a record"),
        "{err}"
    );
    // A CPU file that is not there is not read as its siblings.
    let missing = dir.join("sdy.blktrace.7");
    let err = open_trace(&missing, Some("blktrace"), &ReadOptions::default())
        .err()
        .expect("a missing file is an error")
        .to_string();
    assert!(err.contains("sdy.blktrace.7"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A version 7 record (`struct blk_io_trace`, little-endian as generated here) rewritten as
/// version 8 (`struct blk_io_trace2`: the pid before a 64-bit action, 12 bytes of padding),
/// with `extra` categories or-ed into the action's bits above 31.
fn to_version_8(v7: &[u8], extra: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(v7.len() * 4 / 3);
    let mut at = 0;
    while at < v7.len() {
        let r = &v7[at..];
        let u32_at = |o: usize| u32::from_le_bytes(r[o..o + 4].try_into().unwrap());
        let pdu_len = u16::from_le_bytes([r[46], r[47]]) as usize;
        out.extend((u32_at(0) & !0xff | 8).to_le_bytes());
        out.extend(&r[4..28]); // sequence, time, sector, bytes
        out.extend(u32_at(32).to_le_bytes()); // pid
        let action = u64::from(u32_at(28));
        let extra = if action & (1 << 26) != 0 { 0 } else { extra }; // not on notifications
        out.extend((action | extra).to_le_bytes());
        out.extend(&r[36..48]); // device, cpu, error, pdu_len
        out.extend([0u8; 12]);
        out.extend(&r[48..48 + pdu_len]);
        at += 48 + pdu_len;
    }
    out
}

/// Linux writes `struct blk_io_trace2` (version 8) when blktrace sets up with BLKTRACESETUP2:
/// the same trace in either layout reads the same, for every event; version 8's new
/// categories are zone commands and write-zeroes.
#[test]
fn version_8_records_read_as_version_7() {
    let dir = std::env::temp_dir().join(format!("wattio-blktrace-v8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_trace(&dir, 2, 600);
    for cpu in 0..2 {
        let v7 = std::fs::read(dir.join(format!("sdx.blktrace.{cpu}"))).unwrap();
        std::fs::write(
            dir.join(format!("sdv.blktrace.{cpu}")),
            to_version_8(&v7, 0),
        )
        .unwrap();
    }
    let (v7, v8) = (dir.join("sdx.blktrace.0"), dir.join("sdv.blktrace.0"));
    for action in ['Q', 'G', 'M', 'F', 'R', 'D', 'C', 'A'] {
        let (a, b) = (read(&v7, "blktrace", action), read(&v8, "blktrace", action));
        assert!(!a.is_empty(), "{action}");
        assert_eq!(a, b, "{action}");
    }
    // Detected by its magic too.
    let mut src = open_trace(&v8, None, &ReadOptions::default()).unwrap();
    let mut n = 0;
    while src.next_request().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, read(&v7, "blktrace", 'D').len());
    // The same issued requests as zone appends (category bit 16, action bit 32) are writes;
    // as zone resets (bit 17) they are zone management: counted, not requests.
    // (CPU 0's file alone, under a name that is not a per-CPU file's.)
    let v7_0 = std::fs::read(dir.join("sdx.blktrace.0")).unwrap();
    std::fs::write(dir.join("cpu0"), &v7_0).unwrap();
    let d = read(&dir.join("cpu0"), "blktrace", 'D');
    let one = dir.join("zone-append");
    std::fs::write(&one, to_version_8(&v7_0, 1 << 32)).unwrap();
    let za = read(&one, "blktrace", 'D');
    assert_eq!(za.len(), d.len());
    for (z, r) in za.iter().zip(&d) {
        let op = match r.op {
            Op::Discard | Op::Flush => r.op,
            _ => Op::Write,
        };
        assert_eq!((z.offset, z.len, z.op), (r.offset, r.len, op));
    }
    std::fs::write(&one, to_version_8(&v7_0, 1 << 33)).unwrap();
    let mut src = open_trace(&one, Some("blktrace"), &ReadOptions::default()).unwrap();
    let mut kept = 0;
    while let Some(r) = src.next_request().unwrap() {
        assert_eq!(r.op, Op::Discard, "only discards stay requests");
        kept += 1;
    }
    assert!(kept < d.len());
    let notes = src.assumptions().join("\n");
    assert!(notes.contains("zone management commands"), "{notes}");
    std::fs::remove_dir_all(&dir).unwrap();
}
