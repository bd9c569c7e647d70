//! IOLab's setup (slow: about a minute under TCG): a QEMU virtual machine boots a small Linux
//! guest whose root file system is a wattio export, and the captured trace shows the boot.
//!
//! The test builds everything at run time from installed packages (`scripts/apt-packages.txt`):
//! * an ext2 root file system (`mke2fs -d`) holding a static busybox, a data file and an init
//!   script that reads the data file, writes a marker file, syncs and powers off;
//! * an initramfs (written here as a `newc` cpio archive) that loads the Debian kernel's
//!   virtio modules (`virtio_blk` is a module in `linux-image-cloud-amd64`; ext4, which also
//!   mounts ext2, is built in), mounts `/dev/vda` and switches to it.
//!
//! It then serves the image with `wattio-live serve --capture boot.parquet`, boots
//! `qemu-system-x86_64` (TCG, no KVM) from `nbd:unix:SOCK`, and checks that the guest printed
//! the data file's checksum and the marker, that the image holds the guest's write, and that
//! the capture holds the reads of the superblock and the inode table within the boot's span.
//!
//! Skips (with a message) when a tool, a kernel or its modules are missing. Set
//! `WATTIO_VM_KERNEL=/boot/vmlinuz-…` to choose the kernel.

mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wattio_core::{Op, TraceSource};

const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// A kernel image and its module directory.
fn find_kernel() -> Result<(PathBuf, PathBuf), String> {
    let candidates: Vec<PathBuf> = match std::env::var_os("WATTIO_VM_KERNEL") {
        Some(k) => vec![PathBuf::from(k)],
        None => {
            let mut v: Vec<PathBuf> = std::fs::read_dir("/boot")
                .map_err(|e| format!("/boot: {e}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("vmlinuz-"))
                })
                .collect();
            v.sort();
            v.reverse();
            v
        }
    };
    for k in candidates {
        let Some(ver) = k
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("vmlinuz-"))
        else {
            continue;
        };
        let mods = Path::new("/lib/modules").join(ver);
        if std::fs::File::open(&k).is_ok() && mods.join("modules.dep").is_file() {
            return Ok((k, mods));
        }
    }
    Err("no readable /boot/vmlinuz-* with /lib/modules/<version>/modules.dep (install linux-image-cloud-amd64)".into())
}

/// `modules` and their dependencies, dependencies first, as paths relative to `mods`.
/// An empty list when the kernel has them built in.
fn module_load_order(mods: &Path, modules: &[&str]) -> Result<Vec<String>, String> {
    let dep = std::fs::read_to_string(mods.join("modules.dep"))
        .map_err(|e| format!("{}: {e}", mods.display()))?;
    let mut deps: HashMap<String, Vec<String>> = HashMap::new();
    for line in dep.lines() {
        if let Some((m, d)) = line.split_once(':') {
            deps.insert(
                m.to_string(),
                d.split_whitespace().map(str::to_string).collect(),
            );
        }
    }
    let builtin = std::fs::read_to_string(mods.join("modules.builtin")).unwrap_or_default();
    fn visit(
        m: &str,
        deps: &HashMap<String, Vec<String>>,
        seen: &mut HashSet<String>,
        out: &mut Vec<String>,
    ) {
        if !seen.insert(m.to_string()) {
            return;
        }
        for d in deps.get(m).into_iter().flatten() {
            visit(d, deps, seen, out);
        }
        out.push(m.to_string());
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for want in modules {
        let file = format!("/{want}.ko");
        if builtin.lines().any(|l| l.ends_with(&file)) {
            continue;
        }
        let Some(m) = deps.keys().find(|k| k.ends_with(&file)) else {
            return Err(format!(
                "module {want} is neither built in nor an uncompressed .ko in {}",
                mods.display()
            ));
        };
        let m = m.clone();
        visit(&m, &deps, &mut seen, &mut out);
    }
    Ok(out)
}

/// A `newc` cpio archive (what the kernel unpacks as an initramfs).
struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn new() -> Cpio {
        Cpio {
            out: Vec::new(),
            ino: 1,
        }
    }
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        let fields = [
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.ino += 1;
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }
    fn pad(&mut self) {
        while !self.out.len().is_multiple_of(4) {
            self.out.push(0);
        }
    }
    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, (0, 0), &[]);
    }
    fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | mode, (0, 0), data);
    }
    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.out
    }
}

fn run(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn md5_hex(data: &[u8]) -> String {
    let mut c = Command::new("md5sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        c.stdin.take().unwrap().write_all(data).unwrap();
    }
    let o = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// `(first block, last block)` of group 0's inode table, and the block size.
fn inode_table_of_group0(img: &Path) -> (u64, u64, u64) {
    let o = Command::new(which("dumpe2fs").unwrap())
        .arg(img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let bs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("dumpe2fs: block size");
    let range = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Inode table at "))
        .and_then(|r| r.split_whitespace().next())
        .expect("dumpe2fs: inode table");
    let (a, b) = range.split_once('-').unwrap_or((range, range));
    (a.parse().unwrap(), b.parse().unwrap(), bs)
}

#[test]
fn a_qemu_guest_boots_from_a_wattio_export_and_the_capture_shows_its_boot_io() {
    let tools = [
        "qemu-system-x86_64",
        "mke2fs",
        "dumpe2fs",
        "debugfs",
        "busybox",
        "md5sum",
    ];
    let missing: Vec<_> = tools.iter().filter(|t| which(t).is_none()).collect();
    if !missing.is_empty() {
        eprintln!("SKIP vm_boot: {missing:?} not installed (scripts/install-apt.sh)");
        return;
    }
    let (kernel, mods) = match find_kernel() {
        Ok(k) => k,
        Err(e) => {
            eprintln!("SKIP vm_boot: {e}");
            return;
        }
    };
    let load = match module_load_order(&mods, &["virtio_pci", "virtio_blk"]) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIP vm_boot: {e}");
            return;
        }
    };
    let busybox = std::fs::read(which("busybox").unwrap()).unwrap();
    let d = TempDir::new("vmboot");
    let nonce = format!("{:016x}", std::process::id() as u64 * 0x9E37_79B9 + 17);

    // The root file system: busybox, a data file the guest checksums, and its init.
    let root = d.path("root");
    for sub in ["bin", "sbin", "dev", "proc", "sys", "etc", "data"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("bin/busybox"), &busybox).unwrap();
    let blob = pattern(42, 300_000);
    std::fs::write(root.join("data/blob"), &blob).unwrap();
    let init = format!(
        "#!/bin/busybox sh\n\
         B=/bin/busybox\n\
         $B mount -t proc proc /proc\n\
         echo \"wattio-guest: root file system mounted\"\n\
         $B md5sum /data/blob\n\
         echo \"WATTIO-MARKER-{nonce}\" > /marker.txt\n\
         $B sync\n\
         echo \"wattio-guest: marker written {nonce}\"\n\
         $B poweroff -f\n"
    );
    std::fs::write(root.join("sbin/init"), init).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["bin/busybox", "sbin/init"] {
            std::fs::set_permissions(root.join(f), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let img = d.path("root.img");
    run(Command::new(which("mke2fs").unwrap())
        .args([
            "-q",
            "-F",
            "-t",
            "ext2",
            "-b",
            "4096",
            "-L",
            "wattio-root",
            "-d",
        ])
        .arg(&root)
        .arg(&img)
        .arg("16M"));
    let (it_first, it_last, bs) = inode_table_of_group0(&img);

    // The initramfs: busybox, the virtio modules, /dev/console, and an init that mounts
    // /dev/vda and switches to it.
    let mut cpio = Cpio::new();
    for dir in ["bin", "dev", "proc", "sys", "newroot", "lib", "lib/modules"] {
        cpio.dir(dir);
    }
    cpio.entry("dev/console", 0o020600, (5, 1), &[]);
    cpio.file("bin/busybox", 0o755, &busybox);
    let mut insmods = String::new();
    for (i, m) in load.iter().enumerate() {
        let data = std::fs::read(mods.join(m)).unwrap();
        let name = format!("lib/modules/{i:02}.ko");
        cpio.file(&name, 0o644, &data);
        insmods.push_str(&format!(
            "$B insmod /{name} || echo \"insmod {m} failed\"\n"
        ));
    }
    let rd_init = format!(
        "#!/bin/busybox sh\n\
         B=/bin/busybox\n\
         $B mount -t devtmpfs devtmpfs /dev\n\
         $B mount -t proc proc /proc\n\
         $B mount -t sysfs sysfs /sys\n\
         {insmods}\
         i=0\n\
         while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do $B sleep 0.1; i=$((i+1)); done\n\
         $B mount -t ext2 -o rw /dev/vda /newroot || {{ echo \"wattio-initramfs: cannot mount /dev/vda\"; $B poweroff -f; }}\n\
         $B mount --move /dev /newroot/dev\n\
         $B umount /proc /sys\n\
         exec $B switch_root /newroot /sbin/init\n"
    );
    cpio.file("init", 0o755, rd_init.as_bytes());
    let initrd = d.path("initrd.cpio");
    std::fs::write(&initrd, cpio.finish()).unwrap();

    // Serve the image, capture, boot.
    let sock = d.path("s");
    let cap = d.path("boot.parquet");
    let out = d.path("out");
    let t_spawn = Instant::now();
    let mut srv = Command::new(env!("CARGO_BIN_EXE_wattio-live"))
        .args(["serve", "--image"])
        .arg(&img)
        .args(["--name", "root", "--status", "0", "--socket"])
        .arg(&sock)
        .arg("--capture")
        .arg(&cap)
        .arg("--out")
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !sock.exists() {
        assert!(srv.try_wait().unwrap().is_none(), "wattio-live exited");
        assert!(t_spawn.elapsed() < Duration::from_secs(20), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let t_qemu = t_spawn.elapsed();
    let drive = format!(
        "driver=raw,if=virtio,file.driver=nbd,file.server.type=unix,file.server.path={},file.export=root",
        sock.display()
    );
    let mut qemu = Command::new(which("qemu-system-x86_64").unwrap())
        .args([
            "-accel",
            "tcg",
            "-m",
            "256",
            "-smp",
            "1",
            "-nographic",
            "-no-reboot",
        ])
        .args(["-nic", "none", "-vga", "none", "-kernel"])
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .args([
            "-append",
            "console=ttyS0 panic=-1 loglevel=3 rdinit=/init",
            "-drive",
            &drive,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut qout = qemu.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = qout.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = qemu.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > BOOT_TIMEOUT {
            let _ = qemu.kill();
            let _ = qemu.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let t_exit = t_spawn.elapsed();
    let console = reader.join().unwrap();
    let mut qerr = String::new();
    let _ = qemu.stderr.take().unwrap().read_to_string(&mut qerr);
    // SAFETY: signalling the child this test started.
    unsafe {
        libc::kill(srv.id() as libc::pid_t, libc::SIGTERM);
    }
    let srv_out = srv.wait_with_output().unwrap();
    let srv_err = String::from_utf8_lossy(&srv_out.stderr);
    eprintln!(
        "guest booted and powered off in {:.1} s",
        (t_exit - t_qemu).as_secs_f64()
    );
    let tail: String = console
        .lines()
        .rev()
        .take(40)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!("guest console (tail):\n{tail}");
    assert!(
        status.is_some(),
        "the guest did not power off within {BOOT_TIMEOUT:?}; console tail:\n{tail}\nqemu: {qerr}"
    );
    assert!(srv_out.status.success(), "wattio-live: {srv_err}");

    // The guest read the data file through the export, then wrote the marker.
    let md5 = md5_hex(&blob);
    assert!(
        console.contains(&format!("{md5}  /data/blob")),
        "guest did not print the data file's md5 {md5}; console tail:\n{tail}"
    );
    assert!(
        console.contains(&format!("wattio-guest: marker written {nonce}")),
        "console tail:\n{tail}"
    );
    let o = Command::new(which("debugfs").unwrap())
        .args(["-R", "cat /marker.txt"])
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("WATTIO-MARKER-{nonce}"),
        "the image does not hold the guest's write: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The capture: the boot's I/O, in the boot's time span.
    let mut trace = wattio_formats::columnar::ColumnarReader::open(&cap).unwrap();
    let mut reqs = Vec::new();
    while let Some(r) = trace.next_request().unwrap() {
        reqs.push(r);
    }
    let (n_reads, n_writes, n_flushes) = reqs.iter().fold((0, 0, 0), |(r, w, f), q| match q.op {
        Op::Read => (r + 1, w, f),
        Op::Write => (r, w + 1, f),
        Op::Flush => (r, w, f + 1),
        Op::Discard => (r, w, f),
    });
    eprintln!(
        "capture: {} requests ({n_reads} reads, {n_writes} writes, {n_flushes} flushes)",
        reqs.len()
    );
    let covers = |r: &wattio_core::Request, lo: u64, hi: u64| {
        r.op == Op::Read && r.offset < hi && r.offset + r.len as u64 > lo
    };
    // The ext2 superblock: bytes 1024..2048.
    assert!(
        reqs.iter().any(|r| covers(r, 1024, 2048)),
        "no read of the superblock"
    );
    assert!(
        reqs.iter()
            .any(|r| covers(r, it_first * bs, (it_last + 1) * bs)),
        "no read of the inode table (blocks {it_first}-{it_last})"
    );
    let blob_reads: u64 = reqs
        .iter()
        .filter(|r| r.op == Op::Read)
        .map(|r| r.len as u64)
        .sum();
    assert!(
        blob_reads >= blob.len() as u64,
        "only {blob_reads} bytes read, less than the data file alone"
    );
    assert!(
        n_writes >= 1 && n_flushes >= 1,
        "the marker's write and sync"
    );
    let span = t_exit.as_nanos() as u64;
    assert!(reqs.iter().all(|r| r.arrival <= span));
    let first = reqs.first().unwrap().arrival;
    assert!(
        first + 1_000_000_000 >= t_qemu.as_nanos() as u64,
        "the first request came before QEMU started"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["requests"], reqs.len() as u64);
    assert_eq!(summary["errors"], 0);
}
