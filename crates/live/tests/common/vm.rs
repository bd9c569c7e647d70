//! What the QEMU guest tests share (`vm_boot.rs`, `vm_launch.rs`): finding the tools, the
//! kernel and its virtio modules, writing an initramfs, and booting a guest whose disk is a
//! wattio export on a Unix socket.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// The tools of `tools` that are not installed.
pub fn missing(tools: &[&str]) -> Vec<String> {
    tools
        .iter()
        .filter(|t| which(t).is_none())
        .map(|t| t.to_string())
        .collect()
}

/// A kernel image and its module directory.
pub fn find_kernel() -> Result<(PathBuf, PathBuf), String> {
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
pub fn module_load_order(mods: &Path, modules: &[&str]) -> Result<Vec<String>, String> {
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
pub struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    pub fn new() -> Cpio {
        Cpio {
            out: Vec::new(),
            ino: 1,
        }
    }
    pub fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
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
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, (0, 0), &[]);
    }
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | mode, (0, 0), data);
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.out
    }
}

/// An initramfs holding a static busybox, the modules `load` (from `mods`, in that order)
/// and an init that mounts /dev, /proc and /sys, waits `quiet_s` seconds (the disk is
/// untouched until the modules load), loads the modules, waits for /dev/vda and then runs
/// `body` (busybox is `$B`; `/newroot` is an empty directory to mount on).
pub fn initramfs(
    mods: &Path,
    load: &[String],
    busybox: &[u8],
    quiet_s: u32,
    body: &str,
) -> Vec<u8> {
    let mut cpio = Cpio::new();
    for dir in ["bin", "dev", "proc", "sys", "newroot", "lib", "lib/modules"] {
        cpio.dir(dir);
    }
    cpio.entry("dev/console", 0o020600, (5, 1), &[]);
    cpio.file("bin/busybox", 0o755, busybox);
    let mut insmods = String::new();
    for (i, m) in load.iter().enumerate() {
        let data = std::fs::read(mods.join(m)).unwrap();
        let name = format!("lib/modules/{i:02}.ko");
        cpio.file(&name, 0o644, &data);
        insmods.push_str(&format!(
            "$B insmod /{name} || echo \"insmod {m} failed\"\n"
        ));
    }
    let quiet = if quiet_s > 0 {
        format!("$B sleep {quiet_s}\n")
    } else {
        String::new()
    };
    let init = format!(
        "#!/bin/busybox sh\n\
         B=/bin/busybox\n\
         $B mount -t devtmpfs devtmpfs /dev\n\
         $B mount -t proc proc /proc\n\
         $B mount -t sysfs sysfs /sys\n\
         {quiet}\
         {insmods}\
         i=0\n\
         while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do $B sleep 0.1; i=$((i+1)); done\n\
         {body}"
    );
    cpio.file("init", 0o755, init.as_bytes());
    cpio.finish()
}

/// The kernel, its module directory and the virtio modules to load, for the guest test
/// `test`; `None` after printing why the test skips (a tool of `tools`, the kernel or its
/// modules missing).
pub fn guest_kit(test: &str, tools: &[&str]) -> Option<(PathBuf, PathBuf, Vec<String>)> {
    let missing = missing(tools);
    if !missing.is_empty() {
        eprintln!("SKIP {test}: {missing:?} not installed (scripts/install-apt.sh)");
        return None;
    }
    let found = find_kernel().and_then(|(kernel, mods)| {
        let load = module_load_order(&mods, &["virtio_pci", "virtio_blk"])?;
        Ok((kernel, mods, load))
    });
    found.map_err(|e| eprintln!("SKIP {test}: {e}")).ok()
}

/// An ext2/3/4 image `img` of `size` (mke2fs's units: `16M`) with 4 KiB blocks, holding
/// the tree `root` (`mke2fs -d`), plus mke2fs's `extra` arguments.
pub fn mke2fs(fs: &str, label: &str, extra: &[&str], root: &Path, img: &Path, size: &str) {
    run_ok(
        Command::new(which("mke2fs").unwrap())
            .args(["-q", "-F", "-t", fs, "-b", "4096", "-L", label])
            .args(extra)
            .arg("-d")
            .arg(root)
            .arg(img)
            .arg(size),
    );
}

/// The MD5 of `data` as `md5sum` prints it (what a guest's busybox `md5sum` reports).
pub fn md5_hex(data: &[u8]) -> String {
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

/// `debugfs -R request img` (read-only): its output, whatever its status.
pub fn debugfs(img: &Path, request: &str) -> std::process::Output {
    Command::new(which("debugfs").unwrap())
        .args(["-R", request])
        .arg(img)
        .output()
        .unwrap()
}

pub fn run_ok(cmd: &mut Command) {
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// How a guest's run went.
pub struct Boot {
    /// False when it had not powered off within the timeout (and was killed), or was cut.
    pub powered_off: bool,
    /// Its power was cut ([`boot_watching`]).
    pub cut: bool,
    /// Everything it printed on its serial console.
    pub console: String,
    pub qemu_stderr: String,
    /// Since `epoch`: when QEMU was started and when it had exited.
    pub started: Duration,
    pub exited: Duration,
}

impl Boot {
    /// The console's last `n` lines.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.console.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// Boot `kernel` with `initrd` under QEMU (TCG, one CPU, `mem_mb` of memory, no network),
/// its one virtio disk the export `export` of the NBD server on `sock`, until it powers off
/// or `timeout` passes.
pub fn boot(
    kernel: &Path,
    initrd: &Path,
    sock: &Path,
    export: &str,
    mem_mb: u32,
    timeout: Duration,
    epoch: Instant,
) -> Boot {
    boot_watching(
        kernel,
        initrd,
        sock,
        export,
        (mem_mb, ""),
        timeout,
        epoch,
        &mut |_| false,
    )
}

/// [`boot`], with `extra` appended to the kernel's command line (the guest reads it in
/// /proc/cmdline) and every console line shown to `cut` as it comes: when `cut` returns
/// true the machine loses its power there and then (QEMU is killed; whatever `cut` did
/// first, such as killing the server, happened before).
#[allow(clippy::too_many_arguments)]
pub fn boot_watching(
    kernel: &Path,
    initrd: &Path,
    sock: &Path,
    export: &str,
    (mem_mb, extra): (u32, &str),
    timeout: Duration,
    epoch: Instant,
    cut: &mut dyn FnMut(&str) -> bool,
) -> Boot {
    let drive = format!(
        "driver=raw,if=virtio,file.driver=nbd,file.server.type=unix,file.server.path={},file.export={export}",
        sock.display()
    );
    let append = format!("console=ttyS0 panic=-1 loglevel=3 rdinit=/init {extra}");
    let started = epoch.elapsed();
    let mut qemu = Command::new(which("qemu-system-x86_64").unwrap())
        .args(["-accel", "tcg", "-m", &mem_mb.to_string()])
        .args(["-smp", "1", "-nographic", "-no-reboot"])
        .args(["-nic", "none", "-vga", "none", "-kernel"])
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args(["-append", append.trim_end(), "-drive", &drive])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let qout = qemu.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(qout);
        let mut line = Vec::new();
        while r.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
            line.clear();
        }
    });
    let mut console = String::new();
    let mut was_cut = false;
    let t0 = Instant::now();
    let powered_off = loop {
        while let Ok(l) = lines.try_recv() {
            console.push_str(&l);
            if !was_cut && cut(l.trim_end()) {
                was_cut = true;
            }
        }
        if was_cut {
            let _ = qemu.kill();
            let _ = qemu.wait();
            break false;
        }
        if qemu.try_wait().unwrap().is_some() {
            break true;
        }
        if t0.elapsed() > timeout {
            let _ = qemu.kill();
            let _ = qemu.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let exited = epoch.elapsed();
    let _ = reader.join();
    console.extend(lines.try_iter());
    let mut qemu_stderr = String::new();
    let _ = qemu.stderr.take().unwrap().read_to_string(&mut qemu_stderr);
    Boot {
        powered_off,
        cut: was_cut,
        console,
        qemu_stderr,
        started,
        exited,
    }
}
