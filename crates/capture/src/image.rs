//! A file-system image mounted through a loop device, for the life of a capture.
//!
//! The loop device is detached right after the mount: the kernel then marks it
//! autoclear, so it disappears by itself at unmount, even when the capture never gets to
//! run its cleanup. The unmount is done by [`MountedImage`]'s `Drop`.

use crate::error::CaptureError;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Runs `program args…`, failing with its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String, CaptureError> {
    let line = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| CaptureError::io(&line, &e))?;
    if !out.status.success() {
        return Err(CaptureError::new(format!(
            "`{line}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Makes `image` a fresh `fs` file system of `size` bytes when it does not exist yet
/// (sparse file + `mkfs.FS`); an existing image is used as it is. Returns whether it made one.
pub fn prepare(image: &Path, fs: &str, size: Option<u64>) -> Result<bool, CaptureError> {
    if image.exists() {
        return Ok(false);
    }
    let Some(size) = size else {
        return Err(CaptureError::new(format!(
            "{} does not exist: give --size to create it (a sparse file formatted {fs})",
            image.display()
        )));
    };
    let f = std::fs::File::create(image).map_err(|e| CaptureError::io(image.display(), &e))?;
    f.set_len(size)
        .map_err(|e| CaptureError::io(image.display(), &e))?;
    drop(f);
    let img = image.to_string_lossy();
    let mkfs = format!("mkfs.{fs}");
    let res = if fs.starts_with("ext") {
        run(&mkfs, &["-F", "-q", &img])
    } else {
        run(&mkfs, &[&img])
    };
    if let Err(e) = res {
        let _ = std::fs::remove_file(image);
        return Err(e);
    }
    Ok(true)
}

/// The image mounted on a private directory; unmounted (and so its loop device freed) on drop.
pub struct MountedImage {
    pub mountpoint: PathBuf,
    pub loop_device: String,
    /// The mounted file system's device number (major, minor): the loop device's.
    pub dev: (u32, u32),
    /// What the cleanup had to do beyond a plain unmount.
    pub cleanup_notes: Vec<String>,
}

impl MountedImage {
    /// Attaches `image` to a free loop device (direct I/O to the backing file, so the
    /// measured response times are the host disk's, not the host page cache's) and mounts it.
    pub fn mount(image: &Path, fs: &str) -> Result<MountedImage, CaptureError> {
        let img = image
            .canonicalize()
            .map_err(|e| CaptureError::io(image.display(), &e))?;
        let mnt = std::env::temp_dir().join(format!("wattio-capture-{}-mnt", std::process::id()));
        std::fs::create_dir_all(&mnt).map_err(|e| CaptureError::io(mnt.display(), &e))?;
        let dev = match run(
            "losetup",
            &["--find", "--show", "--direct-io=on", &img.to_string_lossy()],
        ) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_dir(&mnt);
                return Err(e);
            }
        };
        // ext4 zeroes a new file system's inode tables from a kernel thread after mount
        // (ext4lazyinit): on a large image that would run through the traced command and
        // put its writes in the trace. The tables are marked uninitialised, so leaving them
        // is safe.
        let mut args = vec!["-t", fs];
        if fs == "ext4" {
            args.extend(["-o", "noinit_itable"]);
        }
        let target = mnt.to_string_lossy().into_owned();
        args.extend([dev.as_str(), target.as_str()]);
        if let Err(e) = run("mount", &args) {
            let _ = run("losetup", &["-d", &dev]);
            let _ = std::fs::remove_dir(&mnt);
            return Err(e);
        }
        let mut m = MountedImage {
            mountpoint: mnt,
            loop_device: dev,
            dev: (0, 0),
            cleanup_notes: Vec::new(),
        };
        // Busy (mounted) → the kernel sets autoclear instead of detaching now.
        run("losetup", &["-d", &m.loop_device])?;
        let md = std::fs::metadata(&m.mountpoint)
            .map_err(|e| CaptureError::io(m.mountpoint.display(), &e))?;
        let rdev = md.dev();
        m.dev = (libc::major(rdev), libc::minor(rdev));
        Ok(m)
    }

    /// The device number as the kernel's trace events encode it (`major << 20 | minor`).
    pub fn trace_dev(&self) -> u64 {
        (u64::from(self.dev.0) << 20) | u64::from(self.dev.1)
    }

    fn unmount(&mut self) -> Result<(), CaptureError> {
        let mnt = self.mountpoint.to_string_lossy().into_owned();
        for _ in 0..20 {
            if run("umount", &[&mnt]).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Something the command left running (a daemon it started) still uses the mount.
        let _ = Command::new("fuser").args(["-k", "-m", &mnt]).output();
        self.cleanup_notes.push(format!(
            "processes still using {mnt} after the command ended were killed (fuser -k -m)"
        ));
        std::thread::sleep(Duration::from_millis(300));
        run("umount", &[&mnt]).or_else(|_| run("umount", &["-l", &mnt]))?;
        Ok(())
    }
}

impl Drop for MountedImage {
    fn drop(&mut self) {
        if let Err(e) = self.unmount() {
            eprintln!("wattio capture: cleanup: {e}");
        }
        let _ = std::fs::remove_dir(&self.mountpoint);
    }
}
