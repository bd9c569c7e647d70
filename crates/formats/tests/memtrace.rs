//! Memory traces: the wattio-mem tool's raw stream, built here byte by byte, converted to the
//! columnar memory trace and read back; every malformed input an error naming its offset or
//! row; the statistics of a hand-made trace.

use std::path::{Path, PathBuf};
use wattio_formats::memtrace::{
    convert_raw, memtrace_stats, segments, CacheGeometry, ConvertOptions, MemKind, MemRecord,
    MemTraceReader, RawReader, Segment, MAP_BRK, MAP_R, MAP_STARTUP, MAP_W,
};
use wattio_formats::memtrace::{FileMap, MappedFile, MAP_FILE, MAP_X};

/// Encodes a raw stream as the tool does (wm_main.c's FORMAT comment).
struct Raw {
    b: Vec<u8>,
}

impl Raw {
    fn new(pid: u32, ppid: u32, start_us: u64, cache: bool, cmd: &str) -> Raw {
        let mut b = b"WMEMRAW1".to_vec();
        b.extend(pid.to_le_bytes());
        b.extend(ppid.to_le_bytes());
        b.extend(start_us.to_le_bytes());
        for v in [64u32, 32768, 8, 1 << 20, 16] {
            b.extend(v.to_le_bytes());
        }
        b.push(cache as u8);
        b.extend((cmd.len() as u16).to_le_bytes());
        b.extend(cmd.as_bytes());
        Raw { b }
    }
    fn v(&mut self, mut x: u64) -> &mut Self {
        loop {
            let byte = (x & 0x7f) as u8;
            x >>= 7;
            if x == 0 {
                self.b.push(byte);
                return self;
            }
            self.b.push(byte | 0x80);
        }
    }
    fn z(&mut self, x: i64) -> &mut Self {
        self.v(((x << 1) ^ (x >> 63)) as u64)
    }
    fn u8(&mut self, x: u8) -> &mut Self {
        self.b.push(x);
        self
    }
    fn bytes(&mut self, x: &[u8]) -> &mut Self {
        self.b.extend(x);
        self
    }
}

fn rec(pid: u32, icount: u64, kind: MemKind, addr: u64, size: u64, flags: u32) -> MemRecord {
    MemRecord {
        pid,
        icount,
        kind,
        addr,
        size,
        flags,
        old: None,
        new: None,
        file: None,
    }
}

/// A cached process: a startup mapping, a store fill, a write-back changing bytes 0 and 9,
/// a mark, a brk growth, an unmap, the exit.
fn cached_process(pid: u32, start_us: u64) -> (Vec<u8>, Vec<MemRecord>) {
    let mut r = Raw::new(pid, 1, start_us, true, "/bin/prog arg");
    let mut old = vec![0u8; 64];
    old[63] = 7;
    let mut new = old.clone();
    new[0] = 0xff;
    new[9] = 0x01;
    r.u8(5)
        .v(0)
        .v(0x400000)
        .v(8192)
        .v(u64::from(MAP_R | MAP_STARTUP)); // map
    r.u8(1).v(10).z(0x1000).u8(1); // fill 0x1000 for a store
    r.u8(2).v(5).z(0x40).bytes(&old); // write-back of 0x1040
    r.bytes(&[0b0000_0001, 0b0000_0010, 0, 0, 0, 0, 0, 0])
        .bytes(&[0xff, 0x01]);
    r.u8(7).v(0).v(42); // mark 42
    r.u8(5)
        .v(3)
        .v(0x600000)
        .v(4096)
        .v(u64::from(MAP_R | MAP_W | MAP_BRK));
    r.u8(6).v(1).v(0x400000).v(8192).v(0);
    r.u8(8).v(2).z(-1); // exit, code -1
    for c in [100u64, 20, 1, 1, 0, 0] {
        r.v(c);
    }
    let mut wb = rec(pid, 15, MemKind::WriteBack, 0x1040, 64, 0);
    wb.old = Some(old);
    wb.new = Some(new);
    let want = vec![
        rec(pid, 0, MemKind::Start, start_us, 0, 1),
        rec(pid, 0, MemKind::Map, 0x400000, 8192, MAP_R | MAP_STARTUP),
        rec(pid, 10, MemKind::Fill, 0x1000, 64, 1),
        wb,
        rec(pid, 15, MemKind::Mark, 42, 0, 0),
        rec(
            pid,
            18,
            MemKind::Map,
            0x600000,
            4096,
            MAP_R | MAP_W | MAP_BRK,
        ),
        rec(pid, 19, MemKind::Unmap, 0x400000, 8192, 0),
        rec(pid, 21, MemKind::Exit, 0, 0, u32::MAX),
    ];
    (r.b, want)
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn read_all(p: &Path) -> Vec<MemRecord> {
    MemTraceReader::open(p)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wattio-memtrace-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn raw_files_convert_to_rows_in_process_start_order() {
    let d = tmpdir("convert");
    // The later-started process's file is listed first: rows still follow start time.
    let (b2, w2) = cached_process(20, 2_000);
    let (b1, w1) = cached_process(10, 1_000);
    let inputs = vec![write(&d, "20.raw", &b2), write(&d, "10.raw", &b1)];
    let out = d.join("t.parquet");
    let rep = convert_raw(&inputs, &out, &ConvertOptions::default()).unwrap();
    assert_eq!(rep.rows, 16);
    assert_eq!(rep.processes.len(), 2);
    assert_eq!(rep.processes[0].pid, 10);
    assert_eq!(rep.processes[0].command, "/bin/prog arg");
    assert_eq!(rep.processes[0].exit_code, Some(-1));
    assert_eq!(rep.processes[0].exit_icount, Some(21));
    assert_eq!(
        (
            rep.processes[0].accesses,
            rep.processes[0].l1_misses,
            rep.processes[0].fills
        ),
        (100, 20, 1)
    );
    let got = read_all(&out);
    let want: Vec<MemRecord> = w1.into_iter().chain(w2).collect();
    assert_eq!(got, want);
    assert_eq!(got[3].bit_changes(), 8 + 1);
    let r = MemTraceReader::open(&out).unwrap();
    assert_eq!(r.processes().len(), 2);
    assert_eq!(
        *r.geometry(),
        CacheGeometry {
            line: 64,
            l1_bytes: 32768,
            l1_ways: 8,
            l2_bytes: 1 << 20,
            l2_ways: 16,
            cache: true
        }
    );

    // Each process's run of rows, found from the pid column, and read alone.
    assert_eq!(
        segments(&out).unwrap(),
        [
            Segment {
                pid: 10,
                first: 0,
                rows: 8
            },
            Segment {
                pid: 20,
                first: 8,
                rows: 8
            },
        ]
    );
    let second: Vec<MemRecord> = MemTraceReader::open_rows(&out, 8, 8)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(second, want[8..]);
    // A range that does not begin with a start row is refused, naming the file's row.
    let e = MemTraceReader::open_rows(&out, 9, 3)
        .unwrap()
        .next()
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("@row 9") && e.contains("a start row first"),
        "{e}"
    );

    let st = memtrace_stats(MemTraceReader::open(&out).unwrap()).unwrap();
    assert_eq!(st.rows, 16);
    assert_eq!(st.total.fills, 2);
    assert_eq!(st.total.fills_for_store, 2);
    assert_eq!(st.total.writebacks, 2);
    assert_eq!(st.total.bit_changes, 18);
    assert_eq!(st.total.bytes_written, 128);
    assert_eq!(st.total.instructions, 42);
    assert!((st.bit_change_fraction - 18.0 / 1024.0).abs() < 1e-12);
    // rates over the span the traffic covers: up to the write-back at 15, twice
    assert_eq!(st.total.traffic_instructions, 30);
    assert!((st.writes_per_kilo_instruction - 2.0 * 1000.0 / 30.0).abs() < 1e-9);
    // 0x1000 and 0x1040 share a page; two processes
    assert_eq!((st.pages_touched, st.pages_touched_exact), (2, true));
    assert!(st.notes.is_empty(), "{:?}", st.notes);
    assert!(st
        .to_text()
        .contains("write-backs: 2 (0 silent), 128 bytes"));
    std::fs::remove_dir_all(d).ok();
}

/// A raw map record of a file mapping (flag 128 and the file's device, inode, offset and
/// path), as wm_main.c's `rec_new_map` writes it.
fn file_map(r: &mut Raw, dt: u64, addr: u64, len: u64, flags: u32, f: (&str, u64, u64), off: u64) {
    r.u8(5).v(dt).v(addr).v(len).v(u64::from(flags | MAP_FILE));
    r.v(f.1).v(f.2).v(off);
    r.bytes(&(f.0.len() as u16).to_le_bytes())
        .bytes(f.0.as_bytes());
}

#[test]
fn file_mappings_name_their_files_in_one_table_across_processes() {
    let d = tmpdir("files");
    let libc = ("/usr/lib/libc.so.6", 65024, 326279);
    let prog = ("/usr/bin/prog", 65024, 11);
    // Process 1 maps its program and libc; process 2 maps libc (same device and inode)
    // and a file of the same path on another device (another file).
    let mut a = Raw::new(1, 0, 100, true, "prog");
    file_map(
        &mut a,
        0,
        0x400000,
        8192,
        MAP_R | MAP_X | MAP_STARTUP,
        prog,
        4096,
    );
    file_map(
        &mut a,
        5,
        0x7000_0000,
        0x20000,
        MAP_R | MAP_X,
        libc,
        0x26000,
    );
    a.u8(6).v(1).v(0x7000_0000).v(0x20000).v(0);
    let mut b = Raw::new(2, 1, 200, true, "other");
    file_map(&mut b, 0, 0x5000_0000, 4096, MAP_R, libc, 0);
    file_map(
        &mut b,
        0,
        0x5000_1000,
        4096,
        MAP_R | MAP_W,
        (libc.0, 7, 326279),
        4096,
    );
    let inputs = vec![write(&d, "2.raw", &b.b), write(&d, "1.raw", &a.b)];
    let out = d.join("t.parquet");
    convert_raw(&inputs, &out, &ConvertOptions::default()).unwrap();
    let r = MemTraceReader::open(&out).unwrap();
    assert!(r.names_files());
    let mf = |f: (&str, u64, u64)| MappedFile {
        path: f.0.into(),
        dev: f.1,
        ino: f.2,
    };
    assert_eq!(
        r.files(),
        [mf(prog), mf(libc), mf((libc.0, 7, 326279))],
        "in order of first mapping, processes in start order"
    );
    let maps: Vec<(u32, u64, Option<FileMap>)> = r
        .map(|x| x.unwrap())
        .filter(|x| x.kind == MemKind::Map)
        .map(|x| (x.pid, x.addr, x.file))
        .collect();
    let at = |file, offset| Some(FileMap { file, offset });
    assert_eq!(
        maps,
        [
            (1, 0x400000, at(0, 4096)),
            (1, 0x7000_0000, at(1, 0x26000)),
            (2, 0x5000_0000, at(1, 0)),
            (2, 0x5000_1000, at(2, 4096)),
        ]
    );
    let st = memtrace_stats(MemTraceReader::open(&out).unwrap()).unwrap();
    assert_eq!((st.total.maps, st.total.file_maps, st.files), (4, 4, 3));
    assert!(st
        .to_text()
        .contains("mappings: 4 mapped (4 of 3 files), 1 unmapped"));
    // A file mapping cut inside its path ends the process's rows before it.
    let mut c = Raw::new(3, 0, 0, true, "cut");
    let record = c.b.len();
    assert_eq!(record, 50);
    file_map(&mut c, 0, 0x1000, 4096, MAP_R, libc, 0);
    let n = c.b.len();
    assert_eq!(raw_error(&c.b[..n - 3]), "end, cut at Some(50)");
    std::fs::remove_dir_all(d).ok();
}

#[test]
fn a_file_on_the_wrong_row_or_off_the_table_fails_with_its_row() {
    use wattio_formats::memtrace::MemTraceWriter;
    let d = tmpdir("badfiles");
    let geometry = CacheGeometry {
        line: 64,
        l1_bytes: 32768,
        l1_ways: 8,
        l2_bytes: 1 << 20,
        l2_ways: 16,
        cache: true,
    };
    let table = [MappedFile {
        path: "/lib/x.so".into(),
        dev: 1,
        ino: 2,
    }];
    let err = |second: MemRecord| -> String {
        let p = d.join("t.parquet");
        let mut w = MemTraceWriter::create(&p, &geometry, &[]).unwrap();
        w.write(&rec(1, 0, MemKind::Start, 0, 0, 0)).unwrap();
        w.write(&second).unwrap();
        w.finish_with_files(&[], &table).unwrap();
        match MemTraceReader::open(&p)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(rows) => format!("read {} rows", rows.len()),
            Err(e) => e.to_string(),
        }
    };
    let with_file = |mut r: MemRecord, file| {
        r.file = Some(FileMap { file, offset: 0 });
        r
    };
    let map = rec(1, 1, MemKind::Map, 0x1000, 4096, MAP_R | MAP_FILE);
    assert_eq!(err(with_file(map.clone(), 0)), "read 2 rows");
    let e = err(map.clone());
    assert!(
        e.contains("@row 1: file mapping without a file and offset"),
        "{e}"
    );
    let e = err(with_file(map, 1));
    assert!(
        e.contains("@row 1: file mapping without a file and offset (file Some(1) of 1"),
        "{e}"
    );
    let e = err(with_file(rec(1, 1, MemKind::Fill, 0x1000, 64, 0), 0));
    assert!(e.contains("@row 1: fill row with a file or offset"), "{e}");
    let e = err(with_file(rec(1, 1, MemKind::Map, 0x1000, 4096, MAP_R), 0));
    assert!(e.contains("@row 1: map row with a file or offset"), "{e}");
    let e = err(rec(1, 1, MemKind::Map, 0x1000, 4096, 1 << 9));
    assert!(e.contains("@row 1: mapping flags 0x200"), "{e}");
    std::fs::remove_dir_all(d).ok();
}

#[test]
fn uncached_stores_and_truncation_per_process() {
    let d = tmpdir("uncached");
    let mut r = Raw::new(7, 1, 5, false, "x");
    r.u8(3).v(1).z(0x5000).v(8); // load 8 B at 0x5000
    r.u8(4).v(1).z(8).v(2).bytes(&[1, 2]).bytes(&[3, 2]); // store at 0x5008
    r.u8(4).v(1).z(-8).v(1).bytes(&[9]).bytes(&[9]); // store at 0x5000
    let p = write(&d, "7.raw", &r.b);
    let out = d.join("u.parquet");
    convert_raw(std::slice::from_ref(&p), &out, &ConvertOptions::default()).unwrap();
    let got = read_all(&out);
    let mut s1 = rec(7, 2, MemKind::Store, 0x5008, 2, 0);
    s1.old = Some(vec![1, 2]);
    s1.new = Some(vec![3, 2]);
    let mut s2 = rec(7, 3, MemKind::Store, 0x5000, 1, 0);
    s2.old = Some(vec![9]);
    s2.new = Some(vec![9]);
    assert_eq!(
        got,
        vec![
            rec(7, 0, MemKind::Start, 5, 0, 1),
            rec(7, 1, MemKind::Load, 0x5000, 8, 0),
            s1,
            s2
        ]
    );
    // no exit record: the process table says so; the stats note it
    let rep = convert_raw(
        &[p],
        &out,
        &ConvertOptions {
            max_traffic_per_process: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(rep.processes[0].rows_truncated, 1);
    assert_eq!(rep.processes[0].exit_code, None);
    assert_eq!(read_all(&out).len(), 3);
    let st = memtrace_stats(MemTraceReader::open(&out).unwrap()).unwrap();
    assert_eq!(
        (st.total.loads, st.total.stores, st.total.bit_changes),
        (1, 1, 1)
    );
    assert_eq!(
        st.notes,
        vec![
            "process 7: truncated, 1 traffic records left out".to_string(),
            "process 7: no exit recorded".to_string()
        ]
    );
    std::fs::remove_dir_all(d).ok();
}

/// The error a raw stream gives when read to its end.
fn raw_error(data: &[u8]) -> String {
    let mut r = match RawReader::new(data, "t.raw") {
        Ok(r) => r,
        Err(e) => return e.to_string(),
    };
    loop {
        match r.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => return format!("end, cut at {:?}", r.process.cut_at),
            Err(e) => return e.to_string(),
        }
    }
}

#[test]
fn malformed_raw_streams_fail_at_their_offset() {
    let head = Raw::new(1, 0, 0, true, "ab").b;
    let h = head.len(); // 47 fixed + the command line
    assert_eq!(h, 49);
    assert!(raw_error(b"WMEMRAW0....").starts_with("t.raw@byte 0: no `WMEMRAW1` magic"));
    assert!(raw_error(&head[..30]).starts_with("t.raw@byte 30: the header is cut short"));
    let mut bad_geom = head.clone();
    bad_geom[24] = 48; // line of 48 bytes
    assert!(raw_error(&bad_geom).starts_with("t.raw@byte 24: cache geometry: line size 48 bytes"));
    let mut bad_ways = head.clone();
    bad_ways[32] = 3; // L1 of 32 KiB in 3 ways: not a power-of-two set count
    assert!(raw_error(&bad_ways).contains("cache geometry: L1 of 32768 bytes, 3 ways"));

    let with = |f: &dyn Fn(&mut Raw)| {
        let mut r = Raw { b: head.clone() };
        f(&mut r);
        raw_error(&r.b)
    };
    assert!(with(&|r| {
        r.u8(9);
    })
    .starts_with(&format!("t.raw@byte {h}: record tag 9")));
    // a load record in a cached trace
    assert!(with(&|r| {
        r.u8(3).v(0).z(0).v(4);
    })
    .contains("record tag 3 in this trace"));
    // an unaligned line
    assert!(with(&|r| {
        r.u8(1).v(0).z(0x1001).u8(0);
    })
    .contains("line address 0x1001 not aligned to 64 bytes"));
    assert!(with(&|r| {
        r.u8(1).v(0).z(0x1000).u8(2);
    })
    .starts_with(&format!("t.raw@byte {}: fill cause 2", h + 4)));
    // an 11-byte LEB128 number
    assert!(with(&|r| {
        r.u8(7).bytes(&[0xff; 10]).u8(1);
    })
    .starts_with(&format!("t.raw@byte {}: LEB128 number over 64 bits", h + 1)));
    // instruction count wrapping
    assert!(with(&|r| {
        r.u8(7).v(u64::MAX).v(0).u8(7).v(1).v(0);
    })
    .starts_with(&format!(
        "t.raw@byte {}: instruction count past 2^64",
        h + 12
    )));
    assert!(with(&|r| {
        r.u8(5).v(0).v(0).v(0).v(256);
    })
    .contains("mapping flags 0x100"));
    // a file mapping's path longer than the tool writes, an unmap naming a file
    assert!(with(&|r| {
        r.u8(5).v(0).v(0x1000).v(4096).v(129).v(1).v(2).v(0);
        r.bytes(&4097u16.to_le_bytes());
    })
    .starts_with(&format!(
        "t.raw@byte {}: a path of 4097 bytes (expected at most 4096 bytes)",
        h + 11
    )));
    assert!(with(&|r| {
        r.u8(6).v(0).v(0x1000).v(4096).v(128);
    })
    .contains("an unmap naming a file"));
    assert!(with(&|r| {
        r.u8(8).v(0).z(0);
        for _ in 0..6 {
            r.v(0);
        }
        r.u8(7).v(0).v(0);
    })
    .contains("a record after the exit record"));
    assert!(with(&|r| {
        r.u8(8).v(0).z(1 << 40);
    })
    .contains("exit code 1099511627776"));
    // cut inside a write-back: the records before it stand, the offset is kept
    assert_eq!(
        with(&|r| {
            r.u8(7).v(1).v(5).u8(2).v(0).z(0x40).bytes(&[0; 30]);
        }),
        format!("end, cut at Some({})", h + 3)
    );

    let uncached = Raw::new(1, 0, 0, false, "ab").b;
    let mut r = Raw { b: uncached };
    r.u8(4).v(0).z(0).v(257);
    assert!(raw_error(&r.b).contains("store of 257 bytes (expected 1 to 256 bytes)"));
}

#[test]
fn malformed_columnar_memory_traces_fail_with_their_row() {
    use parquet::data_type::ByteArray;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;
    use wattio_formats::parquet_io::{write_file, Column, Values};

    let d = tmpdir("columnar");
    let geometry =
        r#"{"line":64,"l1_bytes":32768,"l1_ways":8,"l2_bytes":1048576,"l2_ways":16,"cache":true}"#;
    // rows: (pid, icount, kind, size, old, new)
    type Row = (
        u32,
        u64,
        u8,
        u64,
        Option<&'static [u8]>,
        Option<&'static [u8]>,
    );
    let file = |name: &str, rows: &[Row], meta: &[(&str, &str)]| -> PathBuf {
        let p = d.join(name);
        // Parquet's physical types: unsigned values as their bit patterns.
        let pid: Vec<i32> = rows.iter().map(|r| r.0 as i32).collect();
        let ic: Vec<i64> = rows.iter().map(|r| r.1 as i64).collect();
        let kind: Vec<i32> = rows.iter().map(|r| i32::from(r.2)).collect();
        let size: Vec<i64> = rows.iter().map(|r| r.3 as i64).collect();
        let zeros32 = vec![0i32; rows.len()];
        let zeros64 = vec![0i64; rows.len()];
        let bytes = |v: &dyn Fn(&Row) -> Option<&'static [u8]>| {
            let present: Vec<ByteArray> = rows
                .iter()
                .filter_map(v)
                .map(|b| ByteArray::from(b.to_vec()))
                .collect();
            let def: Vec<i16> = rows.iter().map(|r| i16::from(v(r).is_some())).collect();
            (present, def)
        };
        let (old, old_def) = bytes(&|r| r.4);
        let (new, new_def) = bytes(&|r| r.5);
        let cols = [
            Column::required(Values::Int32(&pid)),
            Column::required(Values::Int64(&ic)),
            Column::required(Values::Int32(&kind)),
            Column::required(Values::Int64(&zeros64)),
            Column::required(Values::Int64(&size)),
            Column::required(Values::Int32(&zeros32)),
            Column {
                values: Values::Bytes(&old),
                def: Some(&old_def),
            },
            Column {
                values: Values::Bytes(&new),
                def: Some(&new_def),
            },
        ];
        let kv = meta
            .iter()
            .map(|(k, v)| KeyValue::new(k.to_string(), v.to_string()))
            .collect();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(kv))
            .build();
        // Version 1's eight columns: the checks below are on them.
        write_file(&p, &wattio_formats::memtrace::COLUMNS[..8], props, &cols).unwrap();
        p
    };
    let ok_meta = [
        ("wattio.memtrace.version", "1"),
        ("wattio.memtrace.cache", geometry),
    ];
    let err_of = |p: &Path| -> String {
        match MemTraceReader::open(p) {
            Err(e) => e.to_string(),
            Ok(r) => r
                .filter_map(Result::err)
                .map(|e| e.to_string())
                .next()
                .unwrap_or_else(|| "no error".into()),
        }
    };
    let start = (1, 0, 4, 0, None, None);
    let name = |p: &Path| p.display().to_string();

    let p = file("ok.parquet", &[start, (1, 5, 0, 64, None, None)], &ok_meta);
    assert_eq!(err_of(&p), "no error");
    let p = file("nover.parquet", &[start], &ok_meta[1..]);
    assert!(err_of(&p).contains("without `wattio.memtrace.version` metadata"));
    let p = file("nogeom.parquet", &[start], &ok_meta[..1]);
    assert!(err_of(&p).contains("no readable `wattio.memtrace.cache`"));
    let p = file("kind.parquet", &[start, (1, 5, 9, 0, None, None)], &ok_meta);
    assert_eq!(
        err_of(&p),
        format!(
            "{}@row 1: kind code 9 (expected 0 to 8 (docs/capture-memory.md))",
            name(&p)
        )
    );
    let p = file("nostart.parquet", &[(1, 0, 0, 64, None, None)], &ok_meta);
    assert!(err_of(&p)
        .ends_with("@row 0: process 1's rows begin with a fill row (expected a start row first)"));
    let p = file(
        "back.parquet",
        &[start, (1, 5, 0, 64, None, None), (1, 4, 0, 64, None, None)],
        &ok_meta,
    );
    assert!(err_of(&p).contains("@row 2: icount 4 is before the previous row's 5"));
    let p = file(
        "short.parquet",
        &[start, (1, 5, 1, 64, Some(&[0; 8]), Some(&[0; 8]))],
        &ok_meta,
    );
    assert!(err_of(&p)
        .contains("@row 1: writeback of 64 bytes without old and new values of that length"));
    let p = file(
        "extra.parquet",
        &[start, (1, 5, 0, 64, Some(&[0]), None)],
        &ok_meta,
    );
    assert!(err_of(&p).contains("@row 1: fill row with old/new values"));
    std::fs::write(d.join("junk.parquet"), b"PAR1 not really").unwrap();
    assert!(err_of(&d.join("junk.parquet")).contains("not a Parquet file"));
    std::fs::remove_dir_all(d).ok();
}

/// The committed seeds of the `memtrace` fuzz target (crates/formats/fuzz/corpus/memtrace)
/// through its entry: raw streams captured by the tool (whole, cut short, uncached) and
/// converted memory traces.
#[test]
fn every_memtrace_fuzz_seed_passes_the_reader_invariants() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/memtrace");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seed"))
        })
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{} seeds", files.len());
    let d = tmpdir("fuzz");
    for f in &files {
        wattio_formats::memtrace::fuzz_memtrace(
            &std::fs::read(f).unwrap(),
            &d.join("s.parquet"),
            1 << 16,
        );
    }
    // the converted seeds read cleanly, start row first; the cut one is refused
    for name in [
        "seed_columnar_small_cache",
        "seed_columnar_uncached",
        "seed_columnar_file_mappings",
    ] {
        let r = MemTraceReader::from_bytes(std::fs::read(dir.join(name)).unwrap(), name).unwrap();
        assert_eq!(
            r.files().len(),
            if name.ends_with("mappings") { 2 } else { 0 },
            "{name}"
        );
        let rows: Vec<MemRecord> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(rows[0].kind, MemKind::Start, "{name}");
        assert_eq!(rows.last().unwrap().kind, MemKind::Exit, "{name}");
    }
    let cut = std::fs::read(dir.join("seed_columnar_truncated")).unwrap();
    assert!(MemTraceReader::from_bytes(cut, "<cut>").is_err());
    std::fs::remove_dir_all(d).ok();
}

/// The workload library's memory traces (workloads/mem-*) read back through the checked
/// iterator, with the figures their READMEs print.
#[test]
fn workload_memory_traces_read_back_with_their_readme_figures() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads");
    for (name, rows, fills, writebacks, processes, file_maps, files) in [
        ("mem-bzip2", 300_041, 176_998, 123_002, 1, 23, 7),
        ("mem-gcc", 310_145, 180_167, 129_745, 3, 110, 20),
        ("mem-oltp", 46_191, 29_119, 17_005, 1, 39, 11),
        ("mem-mcf", 800_247, 633_147, 166_853, 1, 51, 14),
        ("mem-art", 2_500_281, 2_450_119, 49_881, 1, 185, 45),
    ] {
        let r = MemTraceReader::open(&root.join(name).join("trace.parquet")).unwrap();
        let st = memtrace_stats(r).unwrap();
        assert_eq!(
            (
                st.rows,
                st.total.fills,
                st.total.writebacks,
                st.processes.len(),
                st.total.file_maps,
                st.files
            ),
            (rows, fills, writebacks, processes, file_maps, files),
            "{name}"
        );
    }
}

/// A trace of several row groups (the writer's groups are 256 Ki rows): each process's run
/// of rows, read alone or stopped and resumed anywhere (across group boundaries too), gives
/// the rows a whole read gives.
#[test]
fn row_ranges_and_resumption_cross_row_groups() {
    use wattio_formats::memtrace::MemTraceWriter;
    let d = tmpdir("groups");
    let p = d.join("groups.parquet");
    let geometry = CacheGeometry {
        line: 64,
        l1_bytes: 32768,
        l1_ways: 8,
        l2_bytes: 1 << 20,
        l2_ways: 16,
        cache: true,
    };
    // Three processes of 250,000, 400,000 and 7 rows: the second spans the first two
    // group boundaries (262,144 and 524,288); stores carry values, other rows none.
    let mut all = Vec::new();
    for (pid, n) in [(10u32, 250_000u64), (11, 400_000), (12, 7)] {
        all.push(rec(pid, 0, MemKind::Start, 0, 0, 1));
        for i in 1..n {
            let mut r = rec(pid, i * 3, MemKind::Load, 0x1000 + i * 64, 8, 0);
            if i % 5 == 0 {
                r.kind = MemKind::Store;
                r.old = Some(vec![(i % 251) as u8; 8]);
                r.new = Some(vec![(i % 241) as u8; 8]);
            }
            all.push(r);
        }
    }
    let mut w = MemTraceWriter::create(&p, &geometry, &[]).unwrap();
    for r in &all {
        w.write(r).unwrap();
    }
    assert_eq!(w.finish(&[]).unwrap(), all.len() as u64);
    assert_eq!(read_all(&p), all);

    let segs = segments(&p).unwrap();
    let runs: Vec<(u32, u64, u64)> = segs.iter().map(|s| (s.pid, s.first, s.rows)).collect();
    assert_eq!(
        runs,
        [(10, 0, 250_000), (11, 250_000, 400_000), (12, 650_000, 7)]
    );
    for s in &segs {
        let got: Vec<MemRecord> = MemTraceReader::open_rows(&p, s.first, s.rows)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got, all[s.first as usize..(s.first + s.rows) as usize]);
    }
    // The second process read in pieces, each reader closed and reopened where it
    // stopped: pieces end before, at and after the group boundaries.
    let (first, rows) = (250_000u64, 400_000u64);
    let mut at = MemTraceReader::open_rows(&p, first, 0)
        .unwrap()
        .resume_point();
    let mut got = Vec::new();
    for piece in [12_143u64, 1, 262_000, 100, 125_756] {
        let mut r = MemTraceReader::resume(&p, at, piece).unwrap();
        for x in r.by_ref() {
            got.push(x.unwrap());
        }
        at = r.resume_point();
    }
    assert_eq!(at.row, first + rows);
    assert_eq!(got, all[first as usize..(first + rows) as usize]);
}
