//! `wattio capture block`: a command's block requests on a loop-mounted image.

use crate::blockevents::Matcher;
use crate::command::{Ended, Running};
use crate::error::{require_root, CaptureError};
use crate::image::{self, MountedImage};
use crate::interrupt::InterruptGuard;
use crate::tracefs::{Instance, Tracefs};
use std::path::PathBuf;
use std::time::Duration;
use wattio_formats::ColumnarWriter;

/// How often the capture loop drains the trace pipe and looks at the command.
const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Clone)]
pub struct BlockOptions {
    pub image: PathBuf,
    pub fs: String,
    /// Size of the image to create when it does not exist.
    pub size: Option<u64>,
    pub out: PathBuf,
    pub command: Vec<String>,
    /// A shell command run on the mounted image before tracing starts (to populate it).
    pub setup: Option<String>,
    pub drop_caches: bool,
    /// Block size of an image this capture creates (mkfs's choice when `None`).
    pub fs_block_size: Option<u32>,
    /// mount(8) options for the image (`strictatime`, …), after the capture's own.
    pub mount_options: Option<String>,
    /// Ring buffer per CPU, KiB.
    pub buffer_kb: u32,
}

impl BlockOptions {
    pub fn new(image: PathBuf, out: PathBuf, command: Vec<String>) -> BlockOptions {
        BlockOptions {
            image,
            fs: "ext4".into(),
            size: None,
            out,
            command,
            setup: None,
            drop_caches: false,
            fs_block_size: None,
            mount_options: None,
            buffer_kb: 16 * 1024,
        }
    }
}

/// What a capture recorded.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BlockCapture {
    pub requests: u64,
    /// The command's exit code, or 128 + the signal that ended it.
    pub exit_code: i32,
    /// The signal (SIGINT, SIGTERM) that interrupted the capture, if one did.
    pub interrupted: Option<i32>,
    pub device: String,
    pub span_ns: u64,
    pub processes: std::collections::BTreeMap<u32, String>,
    pub notes: Vec<String>,
}

fn exit_code(e: Ended) -> i32 {
    match e {
        Ended::Exited(c) => c,
        Ended::Signalled(s) => 128 + s,
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Writes back dirty pages of the file system under `mnt` (so the command's delayed writes
/// are part of its trace).
fn syncfs(mnt: &std::path::Path) -> Result<(), CaptureError> {
    let f = std::fs::File::open(mnt).map_err(|e| CaptureError::io(mnt.display(), &e))?;
    // SAFETY: a valid open descriptor.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&f)) } != 0 {
        return Err(CaptureError::io(
            mnt.display(),
            &std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn drop_caches() -> Result<(), CaptureError> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| CaptureError::io("/proc/sys/vm/drop_caches", &e))
}

/// Runs a setup shell command on the mounted image, untraced; an interrupt stops it.
fn run_setup(script: &str, m: &MountedImage, guard: &InterruptGuard) -> Result<(), CaptureError> {
    let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
    let env = [("WATTIO_CAPTURE_MNT", m.mountpoint.display().to_string())];
    let mut r = Running::spawn(&argv, &m.mountpoint, &env)?;
    loop {
        if let Some(e) = r.poll()? {
            if !e.success() {
                return Err(CaptureError::new(format!("--setup `{script}` failed: {e}")));
            }
            return Ok(());
        }
        if let Some(s) = guard.caught() {
            r.stop();
            return Err(CaptureError::new(format!(
                "interrupted by signal {s} during --setup"
            )));
        }
        std::thread::sleep(POLL);
    }
}

/// Captures the block requests of `opts.command` run on `opts.image` (see the crate doc).
/// Every resource is released on every path out of this function: the guards are dropped
/// in reverse order (command, trace instance, mount, tracefs mount).
pub fn capture_block(opts: &BlockOptions) -> Result<BlockCapture, CaptureError> {
    if let Some(o) = &opts.mount_options {
        image::check_mount_options(o)?;
    }
    require_root("wattio capture block")?;
    if opts.command.is_empty() {
        return Err(CaptureError::new(
            "no command to capture (give it after `--`)",
        ));
    }
    let guard = InterruptGuard::install();
    let tfs = Tracefs::open()?;
    let mut notes: Vec<String> = tfs
        .remove_stale_instances()
        .into_iter()
        .map(|n| format!("removed tracefs instance {n} left by a killed capture"))
        .collect();
    let created = image::prepare(&opts.image, &opts.fs, opts.size, opts.fs_block_size)?;
    let mounted = MountedImage::mount(&opts.image, &opts.fs, opts.mount_options.as_deref())?;
    // Recorded because it shapes every request: mke2fs gives an image under 512 MB 1 KiB
    // blocks, and a trace of 1 KiB blocks is not what a laptop's 4 KiB file system sends.
    let block_size = image::fs_block_size(&mounted.mountpoint)?;
    if let Some(s) = &opts.setup {
        run_setup(s, &mounted, &guard)?;
    }
    syncfs(&mounted.mountpoint)?;
    if opts.drop_caches {
        drop_caches()?;
    }
    let mut inst = Instance::create(&tfs, "block", opts.buffer_kb)?;
    let filter = format!("dev == {}", mounted.trace_dev());
    inst.enable("block", "block_rq_issue", Some(&filter))?;
    inst.enable("block", "block_rq_complete", Some(&filter))?;
    inst.start()?;

    let mut matcher = Matcher::default();
    let mut buf = Vec::new();
    let pump = |inst: &mut Instance, buf: &mut Vec<u8>, m: &mut Matcher| {
        inst.drain(buf)?;
        let used = m.feed_text(buf);
        buf.drain(..used);
        Ok::<(), CaptureError>(())
    };
    let env = [(
        "WATTIO_CAPTURE_MNT",
        mounted.mountpoint.display().to_string(),
    )];
    let t0 = monotonic_ns();
    let mut cmd = Running::spawn(&opts.command, &mounted.mountpoint, &env)?;
    let mut interrupted = None;
    let ended = loop {
        pump(&mut inst, &mut buf, &mut matcher)?;
        if let Some(e) = cmd.poll()? {
            break e;
        }
        if let Some(s) = guard.caught() {
            interrupted = Some(s);
            break cmd.stop().unwrap_or(Ended::Signalled(s));
        }
        std::thread::sleep(POLL);
    };
    drop(cmd);
    if interrupted.is_none() {
        syncfs(&mounted.mountpoint)?;
    }
    let t_end = monotonic_ns();
    // Completions of the last requests may still be on their way into the buffer.
    std::thread::sleep(POLL);
    inst.stop()?;
    pump(&mut inst, &mut buf, &mut matcher)?;
    drop(inst);

    let processes = matcher.processes.clone();
    let (reqs, mut more) = matcher.finish(t0);
    notes.append(&mut more);
    if created {
        notes.push(format!(
            "{} created as a fresh {} file system of {block_size}-byte blocks",
            opts.image.display(),
            opts.fs
        ));
    }
    notes.push(format!(
        "block requests of {} (loop device on {}, direct I/O to the image file); arrival = block_rq_issue time since the command started, measured = block_rq_complete - issue (microsecond resolution); stream = pid of the issuing task (a kworker for write-back); the capture ends with a syncfs",
        mounted.loop_device,
        opts.image.display()
    ));
    if let Some(s) = interrupted {
        notes.push(format!(
            "capture interrupted by signal {s}: the command was stopped"
        ));
    }
    let device = format!(
        "{} ({}:{})",
        mounted.loop_device, mounted.dev.0, mounted.dev.1
    );
    drop(mounted);

    let prov = vec![
        (
            "wattio.source".to_string(),
            "wattio capture block".to_string(),
        ),
        ("wattio.capture.command".to_string(), opts.command.join(" ")),
        ("wattio.capture.fs".to_string(), opts.fs.clone()),
        (
            "wattio.capture.mount_options".to_string(),
            opts.mount_options.clone().unwrap_or_default(),
        ),
        (
            "wattio.capture.fs_block_size".to_string(),
            block_size.to_string(),
        ),
        (
            "wattio.capture.processes".to_string(),
            serde_json::to_string(&processes).unwrap_or_default(),
        ),
        ("wattio.assumptions".to_string(), notes.join("\n")),
    ];
    let mut w = ColumnarWriter::create(&opts.out, &prov)?;
    for r in &reqs {
        w.write(r)?;
    }
    let requests = w.finish()?;
    Ok(BlockCapture {
        requests,
        exit_code: exit_code(ended),
        interrupted,
        device,
        span_ns: t_end.saturating_sub(t0),
        processes,
        notes,
    })
}
