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

use common::vm::{self, which};
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wattio_core::{Op, TraceSource};

const BOOT_TIMEOUT: Duration = Duration::from_secs(300);

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
    let Some((kernel, mods, load)) = vm::guest_kit("vm_boot", &tools) else {
        return;
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
    vm::mke2fs("ext2", "wattio-root", &[], &root, &img, "16M");
    let (it_first, it_last, bs) = inode_table_of_group0(&img);

    // The initramfs: busybox, the virtio modules, /dev/console, and an init that mounts
    // /dev/vda and switches to it.
    let rd_body = "$B mount -t ext2 -o rw /dev/vda /newroot || { echo \"wattio-initramfs: cannot mount /dev/vda\"; $B poweroff -f; }\n\
                   $B mount --move /dev /newroot/dev\n\
                   $B umount /proc /sys\n\
                   exec $B switch_root /newroot /sbin/init\n";
    let initrd = d.path("initrd.cpio");
    std::fs::write(&initrd, vm::initramfs(&mods, &load, &busybox, 0, rd_body)).unwrap();

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
    let guest = vm::boot(&kernel, &initrd, &sock, "root", 256, BOOT_TIMEOUT, t_spawn);
    let (t_qemu, t_exit) = (guest.started, guest.exited);
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
    let (console, tail) = (&guest.console, guest.tail(40));
    eprintln!("guest console (tail):\n{tail}");
    assert!(
        guest.powered_off,
        "the guest did not power off within {BOOT_TIMEOUT:?}; console tail:\n{tail}\nqemu: {}",
        guest.qemu_stderr
    );
    assert!(srv_out.status.success(), "wattio-live: {srv_err}");

    // The guest read the data file through the export, then wrote the marker.
    let md5 = vm::md5_hex(&blob);
    assert!(
        console.contains(&format!("{md5}  /data/blob")),
        "guest did not print the data file's md5 {md5}; console tail:\n{tail}"
    );
    assert!(
        console.contains(&format!("wattio-guest: marker written {nonce}")),
        "console tail:\n{tail}"
    );
    let o = vm::debugfs(&img, "cat /marker.txt");
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
