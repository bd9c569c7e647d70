//! The columnar reader's fast path: files written with the old settings (Snappy,
//! dictionaries) still read; `next_batch` and `next_request` give the same rows, mixed in any
//! order; a bad row deep inside a batch is reported at its exact row after every row before
//! it; nulls in a non-nullable column are refused; the in-memory reader agrees with the file
//! reader.

use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use wattio_core::{Op, Request, TraceSource};
use wattio_formats::{ColumnarReader, ColumnarWriter};

fn tmp(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "wattio-columnar-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// `n` requests exercising every column: nullable columns all-valid, all-null and mixed in
/// different stretches, so chunks of each kind occur.
fn requests(n: u64) -> Vec<Request> {
    (0..n)
        .map(|i| Request {
            arrival: i * 3 + i / 7,
            op: Op::from_code((i % 4) as u8).unwrap(),
            offset: (i * 0x9e37_79b9) % (1 << 40),
            len: 512 << (i % 6),
            dev: (i % 5) as u16,
            stream: (i / 1000) as u32,
            file: (i < 5000 || i % 3 == 0).then_some(i ^ 0x55),
            call_site: (i >= 9000).then_some(i * 11),
            measured: (i % 10_000 < 7000 || i % 2 == 1).then_some(1000 + i % 977),
            fua: false,
        })
        .collect()
}

fn drain(r: &mut dyn TraceSource) -> Vec<Request> {
    let mut v = Vec::new();
    while let Some(x) = r.next_request().unwrap() {
        v.push(x);
    }
    v
}

fn write(reqs: &[Request]) -> PathBuf {
    let p = tmp("t.parquet");
    let mut w = ColumnarWriter::create(&p, &[]).unwrap();
    for r in reqs {
        w.write(r).unwrap();
    }
    assert_eq!(w.finish().unwrap(), reqs.len() as u64);
    p
}

/// A column's values as Parquet stores them (unsigned values as their bit patterns); a
/// nullable one's valid values and a definition level per row.
enum Data {
    I32(Vec<i32>),
    I64(Vec<i64>),
    OptI64(Vec<i64>, Vec<i16>),
}

fn optional(v: impl Iterator<Item = Option<u64>>) -> Data {
    let (mut values, mut def) = (Vec::new(), Vec::new());
    for x in v {
        def.push(i16::from(x.is_some()));
        values.extend(x.map(|x| x as i64));
    }
    Data::OptI64(values, def)
}

/// Writes the nine columns as given with `props` (and the version key), bypassing
/// `ColumnarWriter`: old settings, bad rows, nullable schemas.
fn write_raw(cols: Vec<Data>, nullable_offset: bool, props: WriterProperties) -> PathBuf {
    use wattio_formats::parquet_io::{write_file, Column, Values};
    let mut spec = wattio_formats::columnar::COLUMNS;
    if nullable_offset {
        spec[2] = spec[2].nullable();
    }
    let columns: Vec<Column> = cols
        .iter()
        .map(|d| match d {
            Data::I32(v) => Column::required(Values::Int32(v)),
            Data::I64(v) => Column::required(Values::Int64(v)),
            Data::OptI64(v, def) => Column {
                values: Values::Int64(v),
                def: Some(def),
            },
        })
        .collect();
    let p = tmp("raw.parquet");
    write_file(&p, &spec, props, &columns).unwrap();
    p
}

fn versioned() -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder().set_key_value_metadata(Some(vec![KeyValue::new(
        "wattio.trace.version".into(),
        "1".to_string(),
    )]))
}

fn columns(reqs: &[Request]) -> Vec<Data> {
    let i64s = |f: fn(&Request) -> u64| Data::I64(reqs.iter().map(|r| f(r) as i64).collect());
    let i32s = |f: fn(&Request) -> u32| Data::I32(reqs.iter().map(|r| f(r) as i32).collect());
    vec![
        i64s(|r| r.arrival),
        i32s(|r| r.op as u32),
        i64s(|r| r.offset),
        i32s(|r| r.len),
        i32s(|r| u32::from(r.dev)),
        i32s(|r| r.stream),
        optional(reqs.iter().map(|r| r.file)),
        optional(reqs.iter().map(|r| r.call_site)),
        optional(reqs.iter().map(|r| r.measured)),
    ]
}

/// Files the Arrow-based writer wrote (wattio before `parquet_io`, the same `requests`
/// as below, 12,000 rows; `data/README.md`) read as they always did.
#[test]
fn files_written_by_the_arrow_based_writer_still_read() {
    let reqs = requests(12_000);
    for f in [
        "arrow-writer-current.parquet",
        "arrow-writer-snappy.parquet",
    ] {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(f);
        let mut r = ColumnarReader::open(&p).unwrap();
        assert_eq!(drain(&mut r), reqs, "{f}");
        let mut r = ColumnarReader::open(&p).unwrap();
        let mut all = Vec::new();
        while r.next_batch(&mut all).unwrap() > 0 {}
        assert_eq!(all, reqs, "{f}");
    }
}

#[test]
fn files_written_with_the_old_snappy_dictionary_settings_still_read() {
    let reqs = requests(30_000);
    // What ColumnarWriter wrote before: Snappy, dictionaries on (one row group here; the
    // Arrow-based writer's own files are the next test's).
    let props = versioned().set_compression(Compression::SNAPPY).build();
    let p = write_raw(columns(&reqs), false, props);
    let mut r = ColumnarReader::open(&p).unwrap();
    assert_eq!(drain(&mut r), reqs);
}

#[test]
fn next_batch_and_next_request_agree_and_mix() {
    let reqs = requests(50_000);
    let p = write(&reqs);

    let mut r = ColumnarReader::open(&p).unwrap();
    let mut all = Vec::new();
    let mut calls = 0;
    loop {
        let n = r.next_batch(&mut all).unwrap();
        if n == 0 {
            break;
        }
        calls += 1;
        assert!(n <= 65_536);
    }
    assert_eq!(all, reqs);
    assert!(calls >= 2, "50 000 rows come in more than one batch");
    assert_eq!(r.next_batch(&mut all).unwrap(), 0, "stays at the end");

    // Alternate: 3 single requests, then a batch (which first returns what is left of the
    // chunk the single requests started).
    let mut r = ColumnarReader::open(&p).unwrap();
    let mut got = Vec::new();
    loop {
        let mut ended = false;
        for _ in 0..3 {
            match r.next_request().unwrap() {
                Some(x) => got.push(x),
                None => ended = true,
            }
        }
        if r.next_batch(&mut got).unwrap() == 0 || ended {
            break;
        }
    }
    assert_eq!(got, reqs);

    // fill in odd sizes, mixed with single requests, reads the same rows; fewer than asked
    // only at the end.
    let mut r = ColumnarReader::open(&p).unwrap();
    let mut got = Vec::new();
    for k in 0.. {
        let max = [1, 63, 4096, 70_000][k % 4];
        let n = r.fill(&mut got, max).unwrap();
        if n < max {
            assert_eq!(r.fill(&mut got, 5).unwrap(), 0, "stays at the end");
            break;
        }
        if let Some(x) = r.next_request().unwrap() {
            got.push(x);
        }
    }
    assert_eq!(got, reqs);

    // The in-memory reader reads the same rows.
    let bytes = std::fs::read(&p).unwrap();
    let mut m = ColumnarReader::from_bytes(bytes, "<mem>").unwrap();
    assert_eq!(m.len_hint(), Some(50_000));
    assert_eq!(drain(&mut m), reqs);
}

#[test]
fn a_bad_row_inside_a_batch_comes_after_every_row_before_it() {
    let mut reqs = requests(10_000);
    // Row 6000 goes back in time (its predecessor arrives later).
    let (bad_row, prev) = (6000, reqs[5999].arrival);
    reqs[bad_row].arrival = prev - 1;
    let p = write_raw(columns(&reqs), false, versioned().build());

    let mut r = ColumnarReader::open(&p).unwrap();
    for want in &reqs[..bad_row] {
        assert_eq!(r.next_request().unwrap().as_ref(), Some(want));
    }
    let e = r.next_request().unwrap_err().to_string();
    assert!(
        e.ends_with(&format!(
            "@row 6000: arrival {} ns is before the previous row's {prev} ns (expected rows in non-decreasing arrival order)",
            prev - 1
        )),
        "{e}"
    );
    assert_eq!(r.next_request().unwrap(), None, "nothing after an error");

    // The same through next_batch: the good rows, then the error, then the end.
    let mut r = ColumnarReader::open(&p).unwrap();
    let mut got = Vec::new();
    let e = loop {
        match r.next_batch(&mut got) {
            Ok(0) => panic!("ended without the error"),
            Ok(_) => {}
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(got, reqs[..bad_row]);
    assert!(e.contains("@row 6000: arrival"), "{e}");
    assert_eq!(r.next_batch(&mut got).unwrap(), 0);

    // The same through TraceSource::fill (how the simulator reads): every good row is in
    // the buffer when the error comes, then the end.
    let mut r = ColumnarReader::open(&p).unwrap();
    let mut got = Vec::new();
    let e = loop {
        match r.fill(&mut got, 777) {
            Ok(n) if n < 777 => panic!("ended without the error"),
            Ok(_) => {}
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(got, reqs[..bad_row]);
    assert!(e.contains("@row 6000: arrival"), "{e}");
    assert_eq!(r.fill(&mut got, 777).unwrap(), 0);

    // An unknown op code at row 4097 (the second read batch).
    let mut reqs = requests(5000);
    let mut cols = columns(&reqs);
    let mut ops: Vec<u8> = reqs.iter().map(|r| r.op as u8).collect();
    ops[4097] = 9;
    cols[1] = Data::I32(ops.into_iter().map(i32::from).collect());
    let p = write_raw(cols, false, versioned().build());
    let mut r = ColumnarReader::open(&p).unwrap();
    reqs.truncate(4097);
    let mut got = Vec::new();
    let e = loop {
        match r.next_request() {
            Ok(Some(x)) => got.push(x),
            Ok(None) => panic!("ended without the error"),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(got, reqs);
    assert!(
        e.ends_with(
            "@row 4097: op code 9 (expected 0 (read), 1 (write), 2 (flush) or 3 (discard))"
        ),
        "{e}"
    );
}

#[test]
fn an_end_past_2_64_is_refused_at_its_row() {
    // The audit's row: 4 KiB at 2^64 − 100 would wrap to a small end and pass a capacity
    // check downstream.
    let mut reqs = requests(300);
    reqs[250].offset = u64::MAX - 99;
    reqs[250].len = 4096;
    let p = write_raw(columns(&reqs), false, versioned().build());
    let mut r = ColumnarReader::open(&p).unwrap();
    let mut got = Vec::new();
    let e = loop {
        match r.fill(&mut got, 64) {
            Ok(n) if n < 64 => panic!("ended without the error"),
            Ok(_) => {}
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(got, reqs[..250]);
    assert!(
        e.ends_with(&format!(
            "@row 250: offset {} + length 4096 overflows (expected offset + len < 2^64)",
            u64::MAX - 99
        )),
        "{e}"
    );
}

#[test]
fn a_null_in_a_non_nullable_column_is_refused_at_its_row() {
    let reqs = requests(9000);
    let mut cols = columns(&reqs);
    let offsets: Vec<Option<u64>> = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| (i != 8200).then_some(r.offset))
        .collect();
    cols[2] = optional(offsets.into_iter());
    // A schema that lets `offset` be null: same types, so the reader opens it.
    let p = write_raw(cols, true, versioned().build());
    let mut r = ColumnarReader::open(&p).unwrap();
    let mut n = 0;
    let e = loop {
        match r.next_request() {
            Ok(Some(x)) => {
                assert_eq!(x, reqs[n]);
                n += 1;
            }
            Ok(None) => panic!("ended without the error"),
            Err(e) => break e.to_string(),
        }
    };
    assert_eq!(n, 8200);
    assert!(
        e.ends_with("@row 8200: null in a non-nullable column"),
        "{e}"
    );
}

/// The bytes of a 300-request trace and the offset of the `op` column's dictionary-page
/// `num_values` varint (4 entries: op codes 0–3). parquet-rs writes the dictionary page
/// header's fields in id order without a CRC, so the nested header (field 7, short-form
/// delta 4 from field 3: `0x4c`) opens with field 1 as an i32 (`0x15`) and zigzag 4 (`0x08`).
fn trace_and_dictionary_entries() -> (Vec<u8>, usize) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let p = write(&requests(300));
    let bytes = std::fs::read(&p).unwrap();
    let r = SerializedFileReader::new(std::fs::File::open(&p).unwrap()).unwrap();
    let op = r.metadata().row_group(0).column(1);
    assert_eq!(op.column_path().string(), "op");
    let start = op
        .dictionary_page_offset()
        .expect("op is dictionary-encoded") as usize;
    let at = (start..start + 24)
        .find(|&i| bytes[i..i + 3] == [0x4c, 0x15, 0x08])
        .expect("the dictionary page header's layout");
    (bytes, at + 2)
}

/// A page header sizes the Parquet crate's buffers (a dictionary's entry count, a page's
/// uncompressed size), so a corrupt one could ask for gigabytes; the reader walks the page
/// headers first and refuses, naming the row group, column and byte (`pages.rs`).
#[test]
fn page_headers_that_would_size_buffers_beyond_the_file_are_refused() {
    let (bytes, at) = trace_and_dictionary_entries();
    let read = |data: Vec<u8>| {
        let e = ColumnarReader::from_bytes(data, "<input>").err();
        e.map(|e| e.to_string())
    };
    assert_eq!(read(bytes.clone()), None);
    // 5 entries in the 16 bytes four INT32 entries take (same varint length).
    let mut five = bytes.clone();
    five[at] = 0x0a;
    let e = read(five).expect("refused");
    assert!(
        e.contains("row group 0, column `op`: dictionary page declares 5 entries in 16 bytes"),
        "{e}"
    );
    assert!(e.starts_with("<input>@byte "), "{e}");
    // 2^31 - 1 entries, a 5-byte varint: the crate would resize its dictionary to 8 GiB.
    // Inserting bytes shifts the later chunks, which the walk never reaches.
    let mut huge = bytes.clone();
    huge.splice(at..at + 1, [0xfe, 0xff, 0xff, 0xff, 0x0f]);
    let e = read(huge).expect("refused");
    assert!(
        e.contains("column `op`: dictionary page declares 2147483647 entries (at most 16777216"),
        "{e}"
    );
}
