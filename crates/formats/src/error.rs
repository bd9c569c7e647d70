//! Errors that point at the exact place in the input and say what was expected there.

use std::fmt;
use wattio_core::TraceError;

/// Where in an input a problem was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (cannot open, unknown format, …).
    File,
    /// 1-based line and 1-based byte column in a text trace.
    Line { line: u64, column: u64 },
    /// Byte offset in a binary file.
    Byte(u64),
    /// 0-based row of a columnar trace.
    Row(u64),
}

/// A trace could not be read or written. `Display` gives `file:line:column: message (expected …)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub file: String,
    pub location: Location,
    pub message: String,
    /// The form the input should have had at this place, when there is one.
    pub expected: Option<String>,
}

impl FormatError {
    pub fn new(file: impl Into<String>, location: Location, message: impl Into<String>) -> Self {
        FormatError {
            file: file.into(),
            location,
            message: message.into(),
            expected: None,
        }
    }

    pub fn file(file: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(file, Location::File, message)
    }

    pub fn io(file: impl Into<String>, err: &std::io::Error) -> Self {
        Self::new(file, Location::File, format!("I/O error: {err}"))
    }

    pub fn with_expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    /// `file:line:column` (or the closest equivalent) without the message.
    pub fn location_string(&self) -> String {
        match &self.location {
            Location::File => self.file.clone(),
            Location::Line { line, column } => format!("{}:{}:{}", self.file, line, column),
            Location::Byte(b) => format!("{}@byte {}", self.file, b),
            Location::Row(r) => format!("{}@row {}", self.file, r),
        }
    }
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location_string(), self.message)?;
        if let Some(e) = &self.expected {
            write!(f, " (expected {e})")?;
        }
        Ok(())
    }
}

impl std::error::Error for FormatError {}

impl From<FormatError> for TraceError {
    fn from(e: FormatError) -> TraceError {
        let message = match &e.expected {
            Some(x) => format!("{} (expected {x})", e.message),
            None => e.message.clone(),
        };
        TraceError::new(e.location_string(), message)
    }
}
