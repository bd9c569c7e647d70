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

/// The block sizes `--fs-block-size` accepts: what ext2/3/4 and XFS can be made with on
/// 4 KiB-page machines (mke2fs: 1024–65536, XFS: 512–65536; both powers of two).
const BLOCK_SIZES: std::ops::RangeInclusive<u32> = 512..=65536;

/// The arguments of `mkfs.FS` for a fresh image: ext2/3/4 quietly and forced (the target is
/// a regular file), with `-b` when a block size is asked; XFS with `-b size=`; any other
/// file system with the image alone, and no block size (its mkfs spells it differently).
pub fn mkfs_args(
    fs: &str,
    image: &str,
    block_size: Option<u32>,
) -> Result<Vec<String>, CaptureError> {
    let mut args: Vec<String> = Vec::new();
    if let Some(b) = block_size {
        if !b.is_power_of_two() || !BLOCK_SIZES.contains(&b) {
            return Err(CaptureError::new(format!(
                "--fs-block-size {b}: expected a power of two from {} to {} bytes",
                BLOCK_SIZES.start(),
                BLOCK_SIZES.end()
            )));
        }
        if fs.starts_with("ext") && b < 1024 {
            return Err(CaptureError::new(format!(
                "--fs-block-size {b}: {fs} blocks are 1024 bytes or more"
            )));
        }
    }
    match (fs, block_size) {
        (f, b) if f.starts_with("ext") => {
            args.extend(["-F", "-q"].map(String::from));
            if let Some(b) = b {
                args.extend(["-b".to_string(), b.to_string()]);
            }
        }
        ("xfs", Some(b)) => args.extend(["-b".to_string(), format!("size={b}")]),
        (_, None) => {}
        (f, Some(_)) => {
            return Err(CaptureError::new(format!(
                "--fs-block-size is supported for ext2, ext3, ext4 and xfs, not {f}"
            )))
        }
    }
    args.push(image.to_string());
    Ok(args)
}

/// Makes `image` a fresh `fs` file system of `size` bytes (with `block_size`-byte blocks
/// when given, else mkfs's choice) when it does not exist yet (sparse file + `mkfs.FS`); an
/// existing image is used as it is. Returns whether it made one.
pub fn prepare(
    image: &Path,
    fs: &str,
    size: Option<u64>,
    block_size: Option<u32>,
) -> Result<bool, CaptureError> {
    let img = image.to_string_lossy();
    let args = mkfs_args(fs, &img, block_size)?;
    if image.exists() {
        if let Some(b) = block_size {
            return Err(CaptureError::new(format!(
                "--fs-block-size {b}: {} exists and is used as it is; the block size applies \
                 only to an image this capture creates (remove it, or drop the option)",
                image.display()
            )));
        }
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
    let mkfs = format!("mkfs.{fs}");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if let Err(e) = run(&mkfs, &args) {
        let _ = std::fs::remove_file(image);
        return Err(e);
    }
    Ok(true)
}

/// The block size of the file system mounted at `mnt` (statvfs `f_bsize`).
pub fn fs_block_size(mnt: &Path) -> Result<u64, CaptureError> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(mnt.as_os_str().as_bytes())
        .map_err(|_| CaptureError::new(format!("{}: a NUL in the path", mnt.display())))?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a statvfs the call fills.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(CaptureError::io(
            mnt.display(),
            &std::io::Error::last_os_error(),
        ));
    }
    Ok(s.f_bsize as u64)
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
    pub fn mount(
        image: &Path,
        fs: &str,
        options: Option<&str>,
    ) -> Result<MountedImage, CaptureError> {
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
        let target = mnt.to_string_lossy().into_owned();
        let args = mount_args(fs, options, &dev, &target);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
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

/// The longest `--mount-options` accepted.
pub const MAX_MOUNT_OPTIONS: usize = 256;

/// Check `--mount-options`: a comma-separated list of mount(8) options, no blanks.
pub fn check_mount_options(options: &str) -> Result<(), CaptureError> {
    let ok = !options.is_empty()
        && options.len() <= MAX_MOUNT_OPTIONS
        && !options.starts_with(',')
        && !options.ends_with(',')
        && !options.contains(",,")
        && options
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '\'' && c != '"');
    if ok {
        Ok(())
    } else {
        Err(CaptureError::new(format!(
            "--mount-options {options:?}: expected mount(8) options separated by commas \
             (e.g. strictatime or noatime,data=ordered), at most {MAX_MOUNT_OPTIONS} characters, \
             no blanks or quotes"
        )))
    }
}

/// mount(8)'s arguments: the file system type, the options (`options` after the ones the
/// capture needs), the device and the mount point.
fn mount_args(fs: &str, options: Option<&str>, dev: &str, target: &str) -> Vec<String> {
    let mut opts: Vec<&str> = Vec::new();
    // ext4 zeroes a new file system's inode tables from a kernel thread after mount
    // (ext4lazyinit): on a large image that would run through the traced command and
    // put its writes in the trace. The tables are marked uninitialised, so leaving them
    // is safe.
    if fs == "ext4" {
        opts.push("noinit_itable");
    }
    opts.extend(options);
    let mut args = vec!["-t".to_string(), fs.to_string()];
    if !opts.is_empty() {
        args.push("-o".into());
        args.push(opts.join(","));
    }
    args.extend([dev.to_string(), target.to_string()]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_args_carry_the_options_after_the_captures_own() {
        let a = |fs, o| mount_args(fs, o, "/dev/loop3", "/tmp/m");
        assert_eq!(a("ext2", None), ["-t", "ext2", "/dev/loop3", "/tmp/m"]);
        assert_eq!(
            a("ext2", Some("strictatime")),
            ["-t", "ext2", "-o", "strictatime", "/dev/loop3", "/tmp/m"]
        );
        assert_eq!(
            a("ext4", Some("noatime,data=journal")),
            [
                "-t",
                "ext4",
                "-o",
                "noinit_itable,noatime,data=journal",
                "/dev/loop3",
                "/tmp/m"
            ]
        );
        assert_eq!(
            a("ext4", None),
            ["-t", "ext4", "-o", "noinit_itable", "/dev/loop3", "/tmp/m"]
        );
        assert!(check_mount_options("strictatime").is_ok());
        assert!(check_mount_options("noatime,data=ordered").is_ok());
        for bad in ["", "a b", ",x", "x,", "x,,y", "x'y", &"o".repeat(257)] {
            let e = check_mount_options(bad).unwrap_err().to_string();
            assert!(e.contains("--mount-options"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn mkfs_args_carry_the_block_size_in_each_file_systems_spelling() {
        let a = |fs, b| mkfs_args(fs, "w.img", b).map_err(|e| e.to_string());
        assert_eq!(a("ext4", None).unwrap(), ["-F", "-q", "w.img"]);
        assert_eq!(
            a("ext4", Some(4096)).unwrap(),
            ["-F", "-q", "-b", "4096", "w.img"]
        );
        assert_eq!(
            a("ext2", Some(1024)).unwrap(),
            ["-F", "-q", "-b", "1024", "w.img"]
        );
        assert_eq!(a("xfs", Some(4096)).unwrap(), ["-b", "size=4096", "w.img"]);
        assert_eq!(a("btrfs", None).unwrap(), ["w.img"]);
        let e = a("btrfs", Some(4096)).unwrap_err();
        assert!(e.contains("ext2, ext3, ext4 and xfs, not btrfs"), "{e}");
        let e = a("ext4", Some(3000)).unwrap_err();
        assert!(
            e.contains("--fs-block-size 3000: expected a power of two from 512 to 65536"),
            "{e}"
        );
        let e = a("ext4", Some(512)).unwrap_err();
        assert!(e.contains("ext4 blocks are 1024 bytes or more"), "{e}");
        assert!(a("xfs", Some(131072)).is_err());
    }

    #[test]
    fn a_block_size_for_an_existing_image_is_refused_not_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("old.img");
        std::fs::write(&img, b"not formatted by us").unwrap();
        let e = prepare(&img, "ext4", Some(1 << 20), Some(4096))
            .unwrap_err()
            .to_string();
        assert!(e.contains("exists and is used as it is"), "{e}");
        assert_eq!(std::fs::read(&img).unwrap(), b"not formatted by us");
        // Without the option the image is used as it is.
        assert!(!prepare(&img, "ext4", Some(1 << 20), None).unwrap());
    }
}
