//! `capture launch` of a real cold command (needs root and tracefs, as CI has): `dd` of a
//! file of known size must bring exactly that file's pages into the page cache, once each,
//! attributed to its pid, and the trace must hold its block reads and the launch's end.

use std::os::unix::fs::MetadataExt;
use wattio_capture::capture_launch;
use wattio_core::{Op, TraceSource};
use wattio_formats::launch::{launch_end, DEV_BLOCK, DEV_PAGE_CACHE};
use wattio_formats::ColumnarReader;

#[test]
fn a_cold_dd_inserts_exactly_its_files_pages() {
    // SAFETY: geteuid cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "capture launch needs root, as CI has"
    );
    // On a disk-backed file system (not tmpfs), so the file's pages come from the block layer.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let known = dir.path().join("known");
    let data: Vec<u8> = (0..41_060u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&known, &data).unwrap();
    let ino = std::fs::metadata(&known).unwrap().ino();
    let out = dir.path().join("launch.parquet");
    let input = format!("if={}", known.display());
    let argv = [
        "dd".into(),
        input,
        "of=/dev/null".into(),
        "bs=65536".into(),
        "status=none".into(),
    ];
    let cap = capture_launch(&argv, &out).unwrap();
    assert_eq!(cap.exit_code, 0, "{cap:?}");
    let mut r = ColumnarReader::open(&out).unwrap();
    let end = launch_end(r.provenance(), "launch").unwrap();
    assert_eq!(end, cap.span_ns);
    let mut pages = Vec::new();
    let mut block_reads = 0;
    let mut rows = 0;
    while let Some(q) = r.next_request().unwrap() {
        rows += 1;
        assert!(q.arrival <= end, "a row after the launch's end: {q:?}");
        assert!(
            cap.pids.contains(&q.stream),
            "a row of another process: {q:?}"
        );
        match q.dev {
            DEV_PAGE_CACHE if q.file == Some(ino) => {
                assert_eq!(q.stream, cap.pid, "dd itself reads its file");
                pages.push((q.offset, q.len));
            }
            DEV_PAGE_CACHE => {}
            DEV_BLOCK => block_reads += u32::from(q.op == Op::Read),
            d => panic!("dev {d} in a launch trace"),
        }
    }
    assert_eq!(rows, cap.page_cache_insertions + cap.block_requests);
    pages.sort();
    // 41,060 bytes are pages 0..=10: [0, 45056), each brought in exactly once.
    let mut next = 0;
    for (off, len) in &pages {
        assert_eq!(*off, next, "pages of the file: {pages:?}");
        next = off + u64::from(*len);
    }
    assert_eq!(next, 45_056, "pages of the file: {pages:?}");
    assert!(block_reads > 0, "a cold dd reads from the disk");
}
