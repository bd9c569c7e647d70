//! The traced command: run in its own process group, so an interrupted capture can stop
//! it and everything it forked, and so a terminal's Ctrl-C reaches wattio (which then
//! cleans up) rather than the command alone.

use crate::error::CaptureError;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long a stopped command gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

pub struct Running {
    child: Option<Child>,
    pgid: i32,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Exited(i32),
    Signalled(i32),
}

impl Ended {
    fn from_status(s: ExitStatus) -> Ended {
        match (s.code(), s.signal()) {
            (Some(c), _) => Ended::Exited(c),
            (None, Some(sig)) => Ended::Signalled(sig),
            (None, None) => Ended::Exited(-1),
        }
    }

    pub fn success(self) -> bool {
        self == Ended::Exited(0)
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Exited(c) => write!(f, "exit status {c}"),
            Ended::Signalled(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// Fails unless `prog` names an executable file: with a `/`, relative to `cwd`; without,
/// somewhere on `PATH` (as the shell would look). For captures that run the command under
/// a wrapper (strace, a stopping shell), where the wrapper's own complaint would come too
/// late: after an empty trace was written, as the command's exit status.
pub fn check_runnable(
    prog: &str,
    cwd: &Path,
    path: Option<&std::ffi::OsStr>,
) -> Result<(), CaptureError> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        let p = cwd.join(prog);
        return if runnable(&p) {
            Ok(())
        } else if p.exists() {
            Err(CaptureError::new(format!(
                "cannot run `{prog}`: not an executable file"
            )))
        } else {
            Err(CaptureError::new(format!(
                "cannot run `{prog}`: no such file"
            )))
        };
    }
    let found = path
        .map(|p| std::env::split_paths(p).any(|d| runnable(&cwd.join(d).join(prog))))
        .unwrap_or(false);
    if found {
        Ok(())
    } else {
        Err(CaptureError::new(format!(
            "cannot run `{prog}`: command not found on PATH"
        )))
    }
}

impl Running {
    /// Starts `argv` in `cwd` with `env` added, in a new process group.
    pub fn spawn(
        argv: &[String],
        cwd: &Path,
        env: &[(&str, String)],
    ) -> Result<Running, CaptureError> {
        let Some((prog, args)) = argv.split_first() else {
            return Err(CaptureError::new(
                "no command to capture (give it after `--`)",
            ));
        };
        let mut cmd = Command::new(prog);
        cmd.args(args).current_dir(cwd).process_group(0);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| CaptureError::io(format!("cannot run `{prog}`"), &e))?;
        let pgid = child.id() as i32;
        Ok(Running {
            child: Some(child),
            pgid,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pgid as u32
    }

    /// The command's end, if it has ended.
    pub fn poll(&mut self) -> Result<Option<Ended>, CaptureError> {
        let Some(c) = self.child.as_mut() else {
            return Ok(None);
        };
        match c.try_wait() {
            Ok(Some(s)) => {
                self.child = None;
                Ok(Some(Ended::from_status(s)))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(CaptureError::io("waiting for the command", &e)),
        }
    }

    /// Stops the whole process group: SIGTERM, then SIGKILL after a grace period.
    pub fn stop(&mut self) -> Option<Ended> {
        let mut c = self.child.take()?;
        // SAFETY: signals a process group this object created and has not yet reaped.
        unsafe { libc::kill(-self.pgid, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < GRACE {
            if let Ok(Some(s)) = c.try_wait() {
                // Members of the group that outlive its leader get the hard stop too.
                unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
                return Some(Ended::from_status(s));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe { libc::kill(-self.pgid, libc::SIGKILL) };
        c.wait().ok().map(Ended::from_status)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_command_that_cannot_run_is_named_before_it_is_wrapped() {
        let dir = std::env::temp_dir().join(format!("wattio-runnable-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let tool = dir.join("bin/tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::write(dir.join("data"), "").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::ffi::OsString::from("/nonexistent-dir:bin");
        // On PATH (a relative PATH entry is relative to the command's directory).
        assert!(check_runnable("tool", &dir, Some(&path)).is_ok());
        assert!(check_runnable("./bin/tool", &dir, None).is_ok());
        let msg = |prog: &str, path: Option<&std::ffi::OsStr>| {
            check_runnable(prog, &dir, path).unwrap_err().to_string()
        };
        assert_eq!(
            msg("nope", Some(&path)),
            "cannot run `nope`: command not found on PATH"
        );
        assert_eq!(
            msg("tool", None),
            "cannot run `tool`: command not found on PATH"
        );
        assert_eq!(msg("./nope", None), "cannot run `./nope`: no such file");
        assert_eq!(
            msg("./data", None),
            "cannot run `./data`: not an executable file"
        );
        assert_eq!(
            msg("bin", Some(&path)),
            "cannot run `bin`: command not found on PATH"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
