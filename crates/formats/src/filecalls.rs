//! File-level system-call traces (`wattio capture files`).
//!
//! A file-call trace is a columnar trace ([`crate::columnar`]) whose rows are the calls that
//! move data, so everything that reads traces (`wattio trace stats`, the simulator, the
//! functions) reads it as it is: `op` read/write (fsync/fdatasync as flush), `offset` the
//! offset *in the file*, `len` the bytes the call moved, `stream` the pid, `file` the file
//! id, `call_site` the system call ([`CALLS`], 1-based), `measured_ns` the call's duration.
//! Two metadata keys complete it:
//!
//! * [`FILES_KEY`]: the paths, a JSON array indexed by file id;
//! * [`EVENTS_KEY`]: the calls that move no data — opens, closes, lseeks, file mmaps — a
//!   JSON array of [`FileEvent`]s in time order.

use crate::error::FormatError;
use serde::{Deserialize, Serialize};

/// Data-moving system calls by `call_site` code (code = index + 1).
pub const CALLS: &[&str] = &[
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "preadv",
    "pwritev",
    "fsync",
    "fdatasync",
];

pub const FILES_KEY: &str = "wattio.files";
pub const EVENTS_KEY: &str = "wattio.filecalls.events";

/// The `call_site` code of a data-moving call.
pub fn call_code(name: &str) -> Option<u32> {
    CALLS.iter().position(|c| *c == name).map(|i| i as u32 + 1)
}

/// The call a `call_site` code stands for.
pub fn call_name(code: u64) -> Option<&'static str> {
    let i = usize::try_from(code.checked_sub(1)?).ok()?;
    CALLS.get(i).copied()
}

/// A call that moves no data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEvent {
    pub time_ns: u64,
    pub pid: u32,
    /// `open`, `close`, `lseek` (offset = the new position) or `mmap` (offset, len = the
    /// mapped range of the file).
    pub call: String,
    pub file: u32,
    pub offset: u64,
    pub len: u64,
}

/// The file table and the events of a file-call trace, from its metadata
/// ([`crate::ColumnarReader::provenance`]). `name` is used in errors.
pub fn metadata(
    provenance: &[(String, String)],
    name: &str,
) -> Result<(Vec<String>, Vec<FileEvent>), FormatError> {
    let get = |k: &str| provenance.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    let files: Vec<String> = match get(FILES_KEY) {
        Some(v) => serde_json::from_str(v).map_err(|e| {
            FormatError::file(name, format!("metadata `{FILES_KEY}`: {e}"))
                .with_expected("a JSON array of paths")
        })?,
        None => {
            return Err(
                FormatError::file(name, format!("no `{FILES_KEY}` metadata"))
                    .with_expected("a file-call trace written by `wattio capture files`"),
            )
        }
    };
    let events: Vec<FileEvent> = match get(EVENTS_KEY) {
        Some(v) => serde_json::from_str(v).map_err(|e| {
            FormatError::file(name, format!("metadata `{EVENTS_KEY}`: {e}"))
                .with_expected("a JSON array of {time_ns, pid, call, file, offset, len} objects")
        })?,
        None => Vec::new(),
    };
    if let Some(e) = events.iter().find(|e| e.file as usize >= files.len()) {
        return Err(FormatError::file(
            name,
            format!(
                "event at {} ns names file {} of {}",
                e.time_ns,
                e.file,
                files.len()
            ),
        )
        .with_expected("file ids below the length of the file table"));
    }
    Ok((files, events))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknowns_are_none() {
        assert_eq!(call_code("read"), Some(1));
        assert_eq!(call_code("pwrite64"), Some(4));
        assert_eq!(call_code("fdatasync"), Some(10));
        assert_eq!(call_code("open"), None);
        for (i, c) in CALLS.iter().enumerate() {
            assert_eq!(call_name(call_code(c).unwrap() as u64), Some(*c), "{i}");
        }
        assert_eq!(call_name(0), None);
        assert_eq!(call_name(11), None);
    }

    #[test]
    fn metadata_is_checked() {
        let kv = |f: &str, e: &str| {
            vec![
                (FILES_KEY.to_string(), f.to_string()),
                (EVENTS_KEY.to_string(), e.to_string()),
            ]
        };
        let (f, e) = metadata(
            &kv(
                r#"["/a","/b"]"#,
                r#"[{"time_ns":5,"pid":9,"call":"open","file":1,"offset":0,"len":0}]"#,
            ),
            "t",
        )
        .unwrap();
        assert_eq!(f, vec!["/a", "/b"]);
        assert_eq!(e[0].file, 1);
        let err = metadata(
            &kv(
                r#"["/a"]"#,
                r#"[{"time_ns":5,"pid":9,"call":"open","file":1,"offset":0,"len":0}]"#,
            ),
            "t",
        )
        .unwrap_err();
        assert!(err.to_string().contains("names file 1 of 1"), "{err}");
        assert!(metadata(&kv("{", "[]"), "t").is_err());
        assert!(metadata(&[], "t")
            .unwrap_err()
            .to_string()
            .contains("no `wattio.files`"));
    }
}
