//! Capture errors: what failed, on which path or command, and what to do about it.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureError {
    pub message: String,
}

impl CaptureError {
    pub fn new(message: impl Into<String>) -> Self {
        CaptureError {
            message: message.into(),
        }
    }

    /// An I/O error on `what` (a path or a command line).
    pub fn io(what: impl fmt::Display, e: &std::io::Error) -> Self {
        CaptureError::new(format!("{what}: {e}"))
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CaptureError {}

impl From<wattio_formats::FormatError> for CaptureError {
    fn from(e: wattio_formats::FormatError) -> Self {
        CaptureError::new(e.to_string())
    }
}

/// Capturing needs root (tracefs, loop devices, mount); say so before touching anything.
pub fn require_root(what: &str) -> Result<(), CaptureError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(CaptureError::new(format!(
            "{what} needs root (tracefs, loop devices and mount are privileged): run it with sudo"
        )));
    }
    Ok(())
}
