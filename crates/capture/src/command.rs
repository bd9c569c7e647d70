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
