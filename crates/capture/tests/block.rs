//! `capture block` against real commands on a real loop-mounted ext4 image (needs root,
//! tracefs and loop devices, as CI has): direct-I/O `dd`s at known file offsets must come
//! back as exactly those requests at the file's physical place, `fstrim` as discards, the
//! closing syncfs as a flush; and no mount, loop device or tracefs instance may outlive a
//! capture, whether its command fails or the capture is interrupted midway.
//!
//! Its own main (harness = false): the interrupted capture is this binary re-executed with
//! `WATTIO_CAPTURE_CHILD` set, so the test can signal a real process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use wattio_capture::tracefs::INSTANCE_PREFIX;
use wattio_capture::{capture_block, BlockOptions};
use wattio_core::{Op, Request, TraceSource};
use wattio_formats::ColumnarReader;

fn read_trace(p: &Path) -> (Vec<Request>, Vec<String>) {
    let mut r = ColumnarReader::open(p).unwrap();
    let mut v = Vec::new();
    while let Some(q) = r.next_request().unwrap() {
        v.push(q);
    }
    (v, r.assumptions())
}

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

/// The first extent of `extents` (`filefrag -v -b512` output): (physical sector, sectors).
fn first_extent(extents: &str) -> (u64, u64) {
    let line = extents
        .lines()
        .find(|l| l.trim_start().starts_with("0:"))
        .unwrap_or_else(|| panic!("no extent 0 in filefrag output:\n{extents}"));
    let f: Vec<&str> = line.split(':').map(str::trim).collect();
    let phys: u64 = f[2].split("..").next().unwrap().trim().parse().unwrap();
    let len: u64 = f[3].parse().unwrap();
    (phys, len)
}

/// Leftovers a capture by process `pid` could leave: its mount, a loop device on `image`,
/// its tracefs instances.
fn leftovers(pid: u32, image: &Path) -> Vec<String> {
    let mut left = Vec::new();
    let mnt = format!("wattio-capture-{pid}-mnt");
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    left.extend(
        mounts
            .lines()
            .filter(|l| l.contains(&mnt))
            .map(String::from),
    );
    let lo = Command::new("losetup")
        .arg("-j")
        .arg(image)
        .output()
        .unwrap();
    let lo = String::from_utf8_lossy(&lo.stdout).trim().to_string();
    if !lo.is_empty() {
        left.push(lo);
    }
    for root in [
        "/sys/kernel/tracing/instances",
        "/sys/kernel/debug/tracing/instances",
    ] {
        if let Ok(rd) = std::fs::read_dir(root) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.starts_with(&format!("{INSTANCE_PREFIX}{pid}-")) {
                    left.push(format!("tracefs instance {n}"));
                }
            }
        }
    }
    left
}

/// Leftovers disappear asynchronously (the loop device's autoclear); wait a little.
fn assert_clean(pid: u32, image: &Path) {
    let t = Instant::now();
    loop {
        let left = leftovers(pid, image);
        if left.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn exact_requests(dir: &Path) {
    let image = dir.join("exact.img");
    let out = dir.join("exact.parquet");
    let extents = dir.join("extents.txt");
    let mut o = BlockOptions::new(
        image.clone(),
        out.clone(),
        sh(
            "dd if=f of=/dev/null bs=4096 skip=3 count=2 iflag=direct status=none \
            && dd if=/dev/zero of=f bs=8192 seek=5 count=1 oflag=direct conv=notrunc status=none \
            && dd if=f of=/dev/null bs=65536 skip=2 count=1 iflag=direct status=none \
            && fstrim \"$WATTIO_CAPTURE_MNT\"",
        ),
    );
    o.size = Some(64 << 20);
    // mke2fs would give a 64 MiB image 1 KiB blocks.
    o.fs_block_size = Some(4096);
    o.setup = Some(format!(
        "dd if=/dev/urandom of=f bs=1M count=1 status=none && sync && filefrag -v -b512 f > {}",
        extents.display()
    ));
    o.drop_caches = true;
    let cap = capture_block(&o).unwrap();
    assert_eq!(cap.exit_code, 0, "{cap:?}");
    assert_clean(std::process::id(), &image);
    let (phys, sectors) = first_extent(&std::fs::read_to_string(&extents).unwrap());
    assert_eq!(sectors, 2048, "the 1 MiB file is one extent");
    let start = phys * 512;
    let end = start + (1 << 20);
    let (reqs, notes) = read_trace(&out);
    assert_eq!(reqs.len() as u64, cap.requests);
    let in_file: Vec<(Op, u64, u32)> = reqs
        .iter()
        .filter(|r| r.op != Op::Flush && r.offset < end && r.offset + r.len as u64 > start)
        .map(|r| (r.op, r.offset - start, r.len))
        .collect();
    assert_eq!(
        in_file,
        vec![
            // dd reads its two 4 KiB blocks with two read calls: two requests.
            (Op::Read, 12288, 4096),
            (Op::Read, 16384, 4096),
            (Op::Write, 40960, 8192),
            (Op::Read, 131072, 65536),
        ],
        "requests on the file's blocks; all: {reqs:?}"
    );
    for r in reqs.iter().filter(|r| r.offset >= start && r.offset < end) {
        let name = &cap.processes[&r.stream];
        assert_eq!(name, "dd", "direct I/O is issued by dd itself: {r:?}");
        let m = r.measured.expect("every request completed");
        assert!(m > 0 && m < 10_000_000_000, "response {m} ns");
    }
    let discards: Vec<&Request> = reqs.iter().filter(|r| r.op == Op::Discard).collect();
    assert!(!discards.is_empty(), "fstrim discards free space: {reqs:?}");
    for d in &discards {
        assert!(
            d.offset + d.len as u64 <= start || d.offset >= end,
            "a discard of the file's blocks: {d:?}"
        );
    }
    assert!(
        reqs.iter().any(|r| r.op == Op::Flush && r.len == 0),
        "the closing syncfs flushes the device's cache: {reqs:?}"
    );
    assert!(reqs.windows(2).all(|w| w[0].arrival <= w[1].arrival));
    assert!(
        notes.iter().any(|n| n.contains("block_rq_issue")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("ext4 file system of 4096-byte blocks")),
        "{notes:?}"
    );
    println!("exact_requests: ok ({} requests)", reqs.len());
}

/// `--mount-options` reach mount(8): on ext2 a buffered read of a file written before the
/// capture writes its inode back (the access time) under `strictatime`, and nothing under
/// `noatime`.
fn mount_options(dir: &Path) {
    let writes = |opts: &str| {
        let image = dir.join(format!("atime-{opts}.img"));
        let out = dir.join(format!("atime-{opts}.parquet"));
        let mut o = BlockOptions::new(
            image.clone(),
            out.clone(),
            sh("cat f > /dev/null && cat f > /dev/null"),
        );
        o.fs = "ext2".into();
        o.size = Some(64 << 20);
        o.mount_options = Some(opts.into());
        o.setup = Some("dd if=/dev/urandom of=f bs=64k count=1 status=none && sync".into());
        o.drop_caches = true;
        let cap = capture_block(&o).unwrap();
        assert_eq!(cap.exit_code, 0, "{cap:?}");
        assert_clean(std::process::id(), &image);
        std::fs::remove_file(&image).unwrap();
        let (reqs, _) = read_trace(&out);
        assert!(reqs.iter().any(|r| r.op == Op::Read), "{opts}: {reqs:?}");
        reqs.iter().filter(|r| r.op == Op::Write).count()
    };
    assert_eq!(writes("noatime"), 0, "noatime: a read writes nothing");
    assert!(
        writes("strictatime") > 0,
        "strictatime: the inode's atime is written back"
    );
    let bad = BlockOptions {
        mount_options: Some("a b".into()),
        ..BlockOptions::new(dir.join("x.img"), dir.join("x.parquet"), sh("true"))
    };
    let e = capture_block(&bad).unwrap_err().to_string();
    assert!(e.contains("--mount-options \"a b\""), "{e}");
    println!("mount_options: ok");
}

fn failing_command(dir: &Path) {
    let image = dir.join("fail.img");
    let out = dir.join("fail.parquet");
    let mut o = BlockOptions::new(
        image.clone(),
        out.clone(),
        sh("dd if=/dev/zero of=g bs=4096 count=4 oflag=direct status=none; exit 3"),
    );
    o.size = Some(32 << 20);
    let cap = capture_block(&o).unwrap();
    assert_eq!(cap.exit_code, 3);
    assert_clean(std::process::id(), &image);
    let (reqs, _) = read_trace(&out);
    assert!(reqs.iter().any(|r| r.op == Op::Write && r.len >= 4096));

    // A setup that fails, and a command that does not exist: errors, and nothing left.
    let mut o = BlockOptions::new(image.clone(), dir.join("x.parquet"), sh("true"));
    o.setup = Some("exit 1".into());
    let e = capture_block(&o).unwrap_err();
    assert!(e.message.contains("--setup"), "{e}");
    assert_clean(std::process::id(), &image);
    let o = BlockOptions::new(
        image.clone(),
        dir.join("x.parquet"),
        vec!["/no/such".into()],
    );
    let e = capture_block(&o).unwrap_err();
    assert!(e.message.contains("/no/such"), "{e}");
    assert_clean(std::process::id(), &image);
    println!("failing_command: ok");
}

/// A capture of `sleep 60` in a child process, signalled once its mount is up.
fn interrupted(dir: &Path, signal: i32) {
    let image = dir.join(format!("int{signal}.img"));
    let out = dir.join(format!("int{signal}.parquet"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("WATTIO_CAPTURE_CHILD", &image)
        .env("WATTIO_CAPTURE_OUT", &out)
        .spawn()
        .unwrap();
    let pid = child.id();
    let t = Instant::now();
    // Up = the mount and the tracing instance both exist.
    while leftovers(pid, &image).len() < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the capture never started"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the capture ended early"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signals the child this test spawned.
    unsafe { libc::kill(pid as i32, signal) };
    let st = child.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30));
    assert_eq!(st.code(), Some(130), "the child reports the interrupt");
    assert_clean(pid, &image);
    assert!(
        out.exists(),
        "what was captured before the signal is written"
    );
    println!("interrupted by signal {signal}: ok");
}

fn child_capture(image: PathBuf) {
    let out = PathBuf::from(std::env::var_os("WATTIO_CAPTURE_OUT").unwrap());
    let mut o = BlockOptions::new(image, out, sh("sleep 60"));
    o.size = Some(32 << 20);
    let cap = capture_block(&o).unwrap();
    std::process::exit(if cap.interrupted.is_some() { 130 } else { 0 });
}

fn main() {
    if let Some(image) = std::env::var_os("WATTIO_CAPTURE_CHILD") {
        child_capture(image.into());
        return;
    }
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the capture tests need root (tracefs, loop devices, mount), as CI has"
    );
    let dir = tempfile::tempdir().unwrap();
    exact_requests(dir.path());
    mount_options(dir.path());
    failing_command(dir.path());
    interrupted(dir.path(), libc::SIGINT);
    interrupted(dir.path(), libc::SIGTERM);
}
