//! `capture files` on a real program doing known calls on a known file: every call must
//! come back with its file offset (explicit, or reconstructed from lseek and the calls
//! before it), size, op and system call; opens, lseeks, closes and mmaps as events.

use wattio_capture::capture_files;
use wattio_core::{Op, TraceSource};
use wattio_formats::filecalls::{call_name, metadata};
use wattio_formats::ColumnarReader;

const PROGRAM: &str = r#"
import mmap, os
fd = os.open("data", os.O_RDWR)
os.pread(fd, 100, 1000)
os.pwrite(fd, b"x" * 200, 5000)
os.lseek(fd, 3000, os.SEEK_SET)
os.read(fd, 50)
os.readv(fd, [bytearray(10), bytearray(20)])
os.write(fd, b"y" * 7)
os.fsync(fd)
m = mmap.mmap(fd, 8192, offset=4096)
m.close()
os.close(fd)
"#;

#[test]
fn known_calls_come_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![0u8; 65536]).unwrap();
    let out = dir.path().join("calls.parquet");
    std::env::set_current_dir(dir.path()).unwrap();
    let cap = capture_files(&["python3".into(), "-c".into(), PROGRAM.into()], &out).unwrap();
    assert_eq!(cap.exit_code, 0, "{cap:?}");
    let mut r = ColumnarReader::open(&out).unwrap();
    let (files, events) = metadata(r.provenance(), "calls").unwrap();
    let id = files
        .iter()
        .position(|p| p == &data.canonicalize().unwrap().display().to_string())
        .unwrap_or_else(|| panic!("{} not in {files:?}", data.display())) as u64;
    let mut got = Vec::new();
    while let Some(q) = r.next_request().unwrap() {
        if q.file == Some(id) {
            got.push((
                q.op,
                q.offset,
                q.len,
                call_name(q.call_site.unwrap()).unwrap(),
            ));
            assert!(q.measured.is_some());
            assert!(q.stream > 0);
        }
    }
    assert_eq!(
        got,
        vec![
            (Op::Read, 1000, 100, "pread64"),
            (Op::Write, 5000, 200, "pwrite64"),
            (Op::Read, 3000, 50, "read"),
            (Op::Read, 3050, 30, "readv"),
            (Op::Write, 3080, 7, "write"),
            (Op::Flush, 0, 0, "fsync"),
        ]
    );
    let ev: Vec<(&str, u64, u64)> = events
        .iter()
        .filter(|e| e.file as u64 == id)
        .map(|e| (e.call.as_str(), e.offset, e.len))
        .collect();
    assert_eq!(
        ev,
        vec![
            ("open", 0, 0),
            ("lseek", 3000, 0),
            ("mmap", 4096, 8192),
            ("close", 0, 0),
            ("close", 0, 0)
        ]
    );
    // Python's mmap duplicates the descriptor: the duplicate is closed by m.close().
    assert_eq!(cap.files as usize, files.len());
}
