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
        // Messages quote input; a terminal must not interpret what a trace contains.
        write!(
            f,
            "{}: {}",
            printable(&self.location_string()),
            printable(&self.message)
        )?;
        if let Some(e) = &self.expected {
            write!(f, " (expected {})", printable(e))?;
        }
        Ok(())
    }
}

/// `s` with control characters (escape sequences, carriage returns, …) and invisible
/// formatting characters (byte order mark, zero-width spaces, bidirectional overrides)
/// written as `\u{…}` escapes; borrowed when there are none.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}')
    };
    if !s.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

impl std::error::Error for FormatError {}

impl From<FormatError> for TraceError {
    fn from(e: FormatError) -> TraceError {
        let message = match &e.expected {
            Some(x) => format!("{} (expected {})", printable(&e.message), printable(x)),
            None => printable(&e.message).into_owned(),
        };
        TraceError::new(printable(&e.location_string()), message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_bytes_in_messages_cannot_drive_the_terminal() {
        // The audit's trace field: an escape sequence that clears the screen, then a BOM.
        let e = FormatError::new(
            "t.csv",
            Location::Line { line: 3, column: 7 },
            "bad field `\u{1b}[2J\u{feff}x\r`",
        )
        .with_expected("a number");
        let shown = e.to_string();
        assert_eq!(
            shown,
            "t.csv:3:7: bad field `\\u{1b}[2J\\u{feff}x\\u{d}` (expected a number)"
        );
        assert!(!shown.chars().any(|c| c.is_control()));
        let t: TraceError = e.into();
        assert_eq!(
            t.message,
            "bad field `\\u{1b}[2J\\u{feff}x\\u{d}` (expected a number)"
        );
        assert_eq!(printable("plain"), std::borrow::Cow::Borrowed("plain"));
    }
}
