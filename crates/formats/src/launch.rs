//! Cold application-launch traces (`wattio capture launch`), the input of launch prefetchers.
//!
//! A launch trace is a columnar trace ([`crate::columnar`]) with two kinds of rows told
//! apart by `dev`: [`DEV_BLOCK`] rows are the block requests the launched processes issued
//! (device offsets, `measured_ns` the response), [`DEV_PAGE_CACHE`] rows the pages they
//! brought into the page cache (`file` the inode, `offset`/`len` the pages in the file,
//! `op` read). `stream` is the pid. The launch starts at arrival 0 and ends (the command
//! exits) at [`END_KEY`] ns.

use crate::error::FormatError;

pub const DEV_BLOCK: u16 = 0;
pub const DEV_PAGE_CACHE: u16 = 1;
/// Metadata key: the launch's end, ns after its start.
pub const END_KEY: &str = "wattio.launch.end_ns";

/// The launch's end from a launch trace's metadata ([`crate::ColumnarReader::provenance`]).
pub fn launch_end(provenance: &[(String, String)], name: &str) -> Result<u64, FormatError> {
    let v = provenance
        .iter()
        .find(|(k, _)| k == END_KEY)
        .map(|(_, v)| v)
        .ok_or_else(|| {
            FormatError::file(name, format!("no `{END_KEY}` metadata"))
                .with_expected("a launch trace written by `wattio capture launch`")
        })?;
    v.parse().map_err(|_| {
        FormatError::file(name, format!("`{END_KEY}` = `{v}` is not a number"))
            .with_expected("nanoseconds")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_is_read_and_checked() {
        let kv = |v: &str| vec![(END_KEY.to_string(), v.to_string())];
        assert_eq!(launch_end(&kv("1500000"), "t").unwrap(), 1_500_000);
        assert!(launch_end(&kv("soon"), "t")
            .unwrap_err()
            .to_string()
            .contains("not a number"));
        assert!(launch_end(&[], "t").is_err());
    }
}
