//! The generic delimited-text reader (`--format csv --columns SPEC`) on layouts real tools
//! export, against hand-computed requests, and each of its errors.

use wattio_core::{Op, Request};
use wattio_formats::{read_all, ReadOptions};

fn opts(spec: &str) -> ReadOptions {
    ReadOptions {
        columns: Some(spec.into()),
        ..Default::default()
    }
}

fn read(data: &str, o: &ReadOptions) -> (Vec<Request>, Vec<String>) {
    read_all(data.as_bytes(), "csv", o).unwrap_or_else(|e| panic!("{e}"))
}

fn err(data: &str, o: &ReadOptions) -> String {
    read_all(data.as_bytes(), "csv", o).unwrap_err().to_string()
}

fn req(arrival: u64, op: Op, offset: u64, len: u32, dev: u16, measured: Option<u64>) -> Request {
    Request {
        measured,
        dev,
        ..Request::new(arrival, op, offset, len)
    }
}

/// A blktrace-like CSV export: RWBS op codes, sectors, device names, latency in µs, a
/// header the SPEC names columns by (in another order than the file's).
const BLKTRACE_CSV: &str = "timestamp_s,dev,rwbs,sector,nr_sectors,latency_us
0.000000000,8:16,RS,274432,8,120.5
0.000105000,8:16,W,1000,16,80
0.002000000,8:32,ws,2048,8,90
";
const BLKTRACE_SPEC: &str = "time=timestamp_s:s, device=dev, op=rwbs:read=R/RS/RA;write=W/WS/WM, \
                             offset=sector:sectors, size=nr_sectors:sectors, response=latency_us:us";

#[test]
fn blktrace_like_export_with_named_columns_and_sectors() {
    let (v, a) = read(BLKTRACE_CSV, &opts(BLKTRACE_SPEC));
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 274_432 * 512, 4096, 0, Some(120_500)),
            req(105_000, Op::Write, 512_000, 8192, 0, Some(80_000)),
            req(2_000_000, Op::Write, 2048 * 512, 4096, 1, Some(90_000)),
        ]
    );
    assert!(a.contains(&"format: csv".to_string()), "{a:?}");
    assert!(
        a.contains(&"csv: columns time=column `timestamp_s` (seconds), op=column `rwbs` (read=r/rs/ra;write=w/ws/wm), offset=column `sector` (512-byte sectors), size=column `nr_sectors` (512-byte sectors), device=column `dev`, response=column `latency_us` (microseconds)".to_string()),
        "{a:?}"
    );
    assert!(a.contains(&"header: the first line (the columns are named by header)".to_string()));
    assert!(
        a.contains(&"devices: numbered in order of first appearance: 0=8:16, 1=8:32".to_string())
    );
    // --device picks one by its key, as for the built-in readers.
    let o = ReadOptions {
        device: Some("8:32".into()),
        ..opts(BLKTRACE_SPEC)
    };
    assert_eq!(
        read(BLKTRACE_CSV, &o).0,
        vec![req(0, Op::Write, 2048 * 512, 4096, 0, Some(90_000))]
    );
}

#[test]
fn indexed_columns_semicolons_milliseconds_and_bytes_without_header() {
    let data = "12.5;read;4096;8192\n13.0;WRITE;0;512\n\n# a comment\n13.0005;R;1;1\n";
    let o = ReadOptions {
        delimiter: Some(";".into()),
        ..opts("time=1:ms,op=2,offset=3,size=4")
    };
    let (v, a) = read(data, &o);
    // Rebased to the first record: 12.5 ms is t = 0.
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 4096, 8192, 0, None),
            req(500_000, Op::Write, 0, 512, 0, None),
            req(500_500, Op::Read, 1, 1, 0, None),
        ]
    );
    assert!(
        a.contains(&"header: none (the first line is data)".to_string()),
        "{a:?}"
    );
    assert!(a.contains(&"csv: no device column: every request is on device 0".to_string()));
    assert!(a.contains(
        &"csv: op values r/read are reads, w/write writes (case-insensitive)".to_string()
    ));
}

#[test]
fn filetime_and_block_size_units_with_a_sniffed_header() {
    // MSR's clock (100 ns filetime ticks), offsets and sizes in 4 KiB blocks; the header's
    // time field is not a number, so it is taken as a header.
    let data = "Type,Timestamp,Block,Blocks\nRead,128166372003061629,10,2\nWrite,128166372003062629,11,1\n";
    let (v, a) = read(
        data,
        &opts("op=1,time=2:filetime,offset=3:4096,size=4:4096"),
    );
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 40_960, 8192, 0, None),
            req(100_000, Op::Write, 45_056, 4096, 0, None),
        ]
    );
    assert!(
        a.contains(
            &"header: the first line (sniffed: its time field `Timestamp` is not a number)"
                .to_string()
        ),
        "{a:?}"
    );
    assert!(
        a.iter()
            .any(|s| s
                .starts_with("time origin: the first record's timestamp (12816637200306162900 ns")),
        "{a:?}"
    );
}

#[test]
fn whitespace_aligned_export_with_quotes_matches_the_spc_reader() {
    // The same requests as an SPC trace, in an aligned, quoted text export.
    let spc =
        "0,20941264,8192,W,0.551706\n1,3436288,15872,r,0.554041\n0,20939840,8192,w,0.554397\n";
    let text = "asu   lba        bytes  op   when\n\"0\"   20941264   8192   W    0.551706\n1     3436288    15872  \"r\"  0.554041\n0     20939840   8192   w    0.554397\n";
    let o = ReadOptions {
        delimiter: Some("space".into()),
        ..opts("device=asu,offset=lba:sectors,size=bytes,op=op,time=when")
    };
    let (csv, _) = read(text, &o);
    let (mut want, _) = read_all(spc.as_bytes(), "spc", &ReadOptions::default()).unwrap();
    // SPC counts from the trace start; the generic reader makes the first record t = 0.
    for r in &mut want {
        r.arrival -= 551_706_000;
    }
    assert_eq!(csv, want);
}

#[test]
fn errors_name_line_column_and_what_was_expected() {
    let spec = "time=1,op=2,offset=3,size=4";
    assert_eq!(
        err("0.1,r,0,512\nx,r,0,512\n", &opts(spec)),
        "<input>:2:1: bad field `x` (expected a time in seconds (non-negative, no exponent))"
    );
    assert_eq!(
        err("0.1,r,0,512\n0.2,trim,0,512\n", &opts(spec)),
        "<input>:2:5: op value `trim` is not mapped (expected one of read=r/read;write=w/write (add it to op=COLUMN:read=…;write=…))"
    );
    assert_eq!(
        err("0.1,r,0,512\n0.2,w,0\n", &opts(spec)),
        "<input>:2:8: line ends early: 3 fields, no column 4 for size (expected at least 4 fields)"
    );
    assert_eq!(
        err("0.1,r,-5,512\n", &opts(spec)),
        "<input>:1:7: bad field `-5` (expected offset as a non-negative integer)"
    );
    assert_eq!(
        err("0.1,r,36028797018963968,512\n", &opts("time=1,op=2,offset=3:sectors,size=4")),
        "<input>:1:7: offset 36028797018963968 × 512 bytes overflows 64 bits (expected offset below 2^64 bytes)"
    );
    assert_eq!(
        err("0.2,r,0,512\n0.1,r,0,512\n", &opts(spec)),
        "<input>:2:1: arrival goes backwards: -100000000 ns after the origin, previous request at 0 ns (expected records in non-decreasing time order, or --sort to read them whole and sort them)"
    );
    assert_eq!(
        err(
            "t,op,lba,len\n1,r,0,1\n",
            &opts("time=t,op=op,offset=offset,size=len")
        ),
        "<input>: the header line: no column `offset`; its columns are: t, op, lba, len"
    );
    assert_eq!(
        err("1,r,0,1\n", &opts("time=1,op=2,offset=3")),
        "<input>: columns `time=1,op=2,offset=3`: no column for size (time, op, offset and size are required)"
    );
    assert_eq!(
        err("1,r,0,1\n", &ReadOptions::default()),
        "<input>: the csv format reads through a column mapping (expected --columns SPEC, e.g. time=1:s,op=2,offset=3:sectors,size=4)"
    );
    let no_header = ReadOptions {
        header: Some(false),
        ..opts("time=t,op=2,offset=3,size=4")
    };
    assert_eq!(
        err("1,r,0,1\n", &no_header),
        "<input>: columns `time=t,op=2,offset=3,size=4` names columns by header, but the trace is said to have no header line"
    );
    let bad_delim = ReadOptions {
        delimiter: Some("ab".into()),
        ..opts(spec)
    };
    assert!(err("1,r,0,1\n", &bad_delim).starts_with("<input>: delimiter `ab`"));
    let no_dev = ReadOptions {
        device: Some("sda".into()),
        ..opts(spec)
    };
    assert_eq!(
        err("1,r,0,1\n", &no_dev),
        "<input>: bad device selection `sda`: the --columns SPEC has no device column to select on"
    );
}

#[test]
fn header_errors_stop_the_read_even_when_lenient() {
    let o = ReadOptions {
        lenient: true,
        ..opts("time=t,op=op,offset=lba,size=len")
    };
    assert_eq!(
        err("t,op,lba\n1,r,0,1\n", &o),
        "<input>: the header line: no column `len`; its columns are: t, op, lba"
    );
}

#[test]
fn lenient_skips_bad_lines_and_quotes_them() {
    let o = ReadOptions {
        lenient: true,
        header: Some(true),
        ..opts("time=1:us,op=2,offset=3,size=4")
    };
    let (v, a) = read("time,op,off,len\n5,r,0,512\n6,x,0,512\n7,w,4096,512\n", &o);
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 0, 512, 0, None),
            req(2_000, Op::Write, 4096, 512, 0, None)
        ]
    );
    assert!(
        a.contains(&"lenient: skipped 1 bad lines".to_string()),
        "{a:?}"
    );
    assert!(a.contains(&"header: the first line (as told)".to_string()));
    assert!(a
        .iter()
        .any(|s| s.starts_with("  bad line: <input>:3:3: op value `x` is not mapped")));
}

#[test]
fn committed_csv_fuzz_seeds_pass_the_reader_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/csv");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        wattio_formats::delimited::fuzz_csv(&std::fs::read(e.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 4, "{n} seeds");
}
