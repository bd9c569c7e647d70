//! A private tracefs instance: its own ring buffer, clock, events and filters, so a capture
//! never touches the global trace (another tool may be using it) and everything it enabled
//! disappears with one `rmdir` — done by [`Instance`]'s `Drop` on every exit path. Instances
//! left by a capture that was killed outright (SIGKILL) are removed by the next capture.

use crate::error::CaptureError;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Instance names start with this, followed by the capturing process's pid.
pub const INSTANCE_PREFIX: &str = "wattio-capture-";

/// Where tracefs is; unmounts it on drop when this process mounted it.
pub struct Tracefs {
    pub root: PathBuf,
    mounted_here: bool,
}

impl Tracefs {
    /// Finds a mounted tracefs, or mounts one on a private directory.
    pub fn open() -> Result<Tracefs, CaptureError> {
        for p in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
            if Path::new(p).join("instances").is_dir() {
                return Ok(Tracefs {
                    root: p.into(),
                    mounted_here: false,
                });
            }
        }
        let dir = std::env::temp_dir().join(format!("wattio-tracefs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| CaptureError::io(dir.display(), &e))?;
        let out = Command::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(&dir)
            .output()
            .map_err(|e| CaptureError::io("mount -t tracefs", &e))?;
        if !out.status.success() || !dir.join("instances").is_dir() {
            let _ = std::fs::remove_dir(&dir);
            return Err(CaptureError::new(format!(
                "tracefs is not available: not mounted at /sys/kernel/tracing and `mount -t tracefs nodev {}` failed: {} (the kernel needs CONFIG_FTRACE and the block trace events)",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(Tracefs {
            root: dir,
            mounted_here: true,
        })
    }

    /// Removes instances whose capturing process no longer exists (it was SIGKILLed).
    pub fn remove_stale_instances(&self) -> Vec<String> {
        let mut removed = Vec::new();
        let Ok(rd) = std::fs::read_dir(self.root.join("instances")) else {
            return removed;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = name
                .strip_prefix(INSTANCE_PREFIX)
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() && std::fs::remove_dir(e.path()).is_ok()
            {
                removed.push(name);
            }
        }
        removed
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = Command::new("umount").arg(&self.root).status();
            let _ = std::fs::remove_dir(&self.root);
        }
    }
}

/// One tracing instance with its enabled events; removed (events and all) on drop.
pub struct Instance {
    pub dir: PathBuf,
    pipe: Option<File>,
}

fn write_file(path: &Path, value: &str) -> Result<(), CaptureError> {
    std::fs::write(path, value).map_err(|e| CaptureError::io(path.display(), &e))
}

impl Instance {
    /// Creates `instances/wattio-capture-PID-TAG` with a ring buffer of `buffer_kb` per CPU
    /// and the monotonic clock (the clock `clock_gettime(CLOCK_MONOTONIC)` reads, so a
    /// capture can place its own start and end among the events). Tracing stays off until
    /// [`start`](Self::start).
    pub fn create(fs: &Tracefs, tag: &str, buffer_kb: u32) -> Result<Instance, CaptureError> {
        let dir = fs
            .root
            .join("instances")
            .join(format!("{INSTANCE_PREFIX}{}-{tag}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| CaptureError::io(dir.display(), &e))?;
        let inst = Instance { dir, pipe: None };
        write_file(&inst.dir.join("tracing_on"), "0")?;
        write_file(&inst.dir.join("buffer_size_kb"), &buffer_kb.to_string())?;
        write_file(&inst.dir.join("trace_clock"), "mono")?;
        Ok(inst)
    }

    /// Enables `system/event`, keeping only events that match `filter` (tracefs filter
    /// syntax, e.g. `dev == 7340032`).
    pub fn enable(
        &self,
        system: &str,
        event: &str,
        filter: Option<&str>,
    ) -> Result<(), CaptureError> {
        let ev = self.dir.join("events").join(system).join(event);
        if !ev.is_dir() {
            return Err(CaptureError::new(format!(
                "the kernel has no trace event {system}/{event} ({} is missing)",
                ev.display()
            )));
        }
        if let Some(f) = filter {
            write_file(&ev.join("filter"), f)?;
        }
        write_file(&ev.join("enable"), "1")
    }

    /// Turns tracing on and opens the instance's `trace_pipe` for non-blocking reads.
    pub fn start(&mut self) -> Result<(), CaptureError> {
        let p = self.dir.join("trace_pipe");
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .map_err(|e| CaptureError::io(p.display(), &e))?;
        self.pipe = Some(f);
        write_file(&self.dir.join("tracing_on"), "1")
    }

    /// Stops recording; what is in the buffer can still be drained.
    pub fn stop(&self) -> Result<(), CaptureError> {
        write_file(&self.dir.join("tracing_on"), "0")
    }

    /// Appends whatever `trace_pipe` holds now to `buf` (consuming it); returns the bytes read.
    pub fn drain(&mut self, buf: &mut Vec<u8>) -> Result<usize, CaptureError> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(0);
        };
        let mut chunk = [0u8; 64 * 1024];
        let mut total = 0;
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => return Ok(total),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    total += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(total),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(CaptureError::io(self.dir.join("trace_pipe").display(), &e)),
            }
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // The pipe must be closed first: an instance with an open reader cannot be removed.
        self.pipe = None;
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        let _ = std::fs::remove_dir(&self.dir);
    }
}
