//! Writers (columnar, DiskSim ascii, fio v3): read → write → read gives the same requests;
//! the columnar reader's refusals; stats on a hand-computed trace; slicing; the DiskSim
//! validation traces.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use wattio_core::trace::VecSource;
use wattio_core::{Op, Request, TraceSource};
use wattio_formats::{
    convert, create_writer, open_trace, read_all, trace_stats, ColumnarReader, ColumnarWriter,
    ReadOptions, Slice, SliceOptions,
};

fn tmp(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "wattio-formats-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn drain(src: &mut dyn TraceSource) -> Vec<Request> {
    let mut v = Vec::new();
    while let Some(r) = src.next_request().unwrap() {
        v.push(r);
    }
    v
}

fn read_path(p: &Path, fmt: Option<&str>) -> Vec<Request> {
    let mut s = open_trace(p, fmt, &ReadOptions::default()).unwrap();
    drain(s.as_mut())
}

fn write_all(p: &Path, fmt: &str, reqs: &[Request]) -> u64 {
    let mut w = create_writer(p, Some(fmt), &[]).unwrap();
    for r in reqs {
        w.write(r).unwrap();
    }
    w.finish().unwrap()
}

fn full(arrival: u64, op: Op, offset: u64, len: u32, dev: u16) -> Request {
    Request::new(arrival, op, offset, len).on(dev)
}

trait On {
    fn on(self, dev: u16) -> Self;
}
impl On for Request {
    fn on(mut self, dev: u16) -> Self {
        self.dev = dev;
        self
    }
}

#[test]
fn columnar_round_trip_keeps_every_column_across_batches() {
    let mut reqs = Vec::new();
    for i in 0..200_000u64 {
        let mut r = full(
            i * 7,
            Op::from_code((i % 4) as u8).unwrap(),
            i * 4096,
            (i % 300) as u32 * 512,
            (i % 3) as u16,
        );
        r.stream = (i % 11) as u32;
        r.file = (i % 2 == 0).then_some(i * 3);
        r.call_site = (i % 5 == 0).then_some(i ^ 0xdead);
        r.measured = (i % 7 != 0).then_some(i + 100);
        reqs.push(r);
    }
    let p = tmp("t.parquet");
    let prov = vec![("source".to_string(), "synthetic".to_string())];
    let mut w = ColumnarWriter::create(&p, &prov).unwrap();
    for r in &reqs {
        w.write(r).unwrap();
    }
    assert_eq!(w.finish().unwrap(), 200_000);
    let mut rd = ColumnarReader::open(&p).unwrap();
    assert_eq!(rd.len_hint(), Some(200_000));
    assert!(rd
        .assumptions()
        .contains(&"provenance: source = synthetic".to_string()));
    assert_eq!(drain(&mut rd), reqs);
    // Detection by extension and magic.
    assert_eq!(read_path(&p, None).len(), 200_000);
}

#[test]
fn columnar_writer_refuses_time_going_backwards() {
    let p = tmp("b.parquet");
    let mut w = ColumnarWriter::create(&p, &[]).unwrap();
    w.write(&full(10, Op::Read, 0, 512, 0)).unwrap();
    let e = w
        .write(&full(9, Op::Read, 0, 512, 0))
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("@row 1: arrival 9 ns is before the previous row's 10 ns (expected requests in non-decreasing arrival order)"), "{e}");
}

#[test]
fn columnar_reader_refuses_foreign_files() {
    let p = tmp("x.parquet");
    std::fs::write(&p, b"not parquet at all").unwrap();
    let e = ColumnarReader::open(&p).err().unwrap().to_string();
    assert!(e.contains("not a Parquet file"), "{e}");

    // A Parquet file of the right shape but without the version key.
    use wattio_formats::parquet_io::{write_file, Column, Kind, Values};
    let p2 = tmp("noversion.parquet");
    let spec = wattio_formats::columnar::COLUMNS;
    // One row: op code 7, everything else 0.
    let (op, zero32, zero64, valid) = ([7i32], [0i32], [0i64], [1i16]);
    let cols: Vec<Column> = spec
        .iter()
        .map(|c| match (c.name, c.kind) {
            ("op", _) => Column::required(Values::Int32(&op)),
            _ if c.nullable => Column {
                values: Values::Int64(&zero64),
                def: Some(&valid),
            },
            (_, Kind::UInt8 | Kind::UInt16 | Kind::UInt32) => {
                Column::required(Values::Int32(&zero32))
            }
            _ => Column::required(Values::Int64(&zero64)),
        })
        .collect();
    let write = |path: &Path, kv: Option<Vec<parquet::file::metadata::KeyValue>>| {
        let props = parquet::file::properties::WriterProperties::builder()
            .set_key_value_metadata(kv)
            .build();
        write_file(path, &spec, props, &cols).unwrap();
    };
    write(&p2, None);
    let e = ColumnarReader::open(&p2).err().unwrap().to_string();
    assert!(e.contains("without `wattio.trace.version` metadata"), "{e}");

    let p3 = tmp("v2.parquet");
    write(
        &p3,
        Some(vec![parquet::file::metadata::KeyValue::new(
            "wattio.trace.version".into(),
            "2".to_string(),
        )]),
    );
    let e = ColumnarReader::open(&p3).err().unwrap().to_string();
    assert!(e.contains("version `2` is not supported"), "{e}");

    // Right version, but op code 7 in row 0.
    let p4 = tmp("op7.parquet");
    write(
        &p4,
        Some(vec![parquet::file::metadata::KeyValue::new(
            "wattio.trace.version".into(),
            "1".to_string(),
        )]),
    );
    let mut r = ColumnarReader::open(&p4).unwrap();
    let e = r.next_request().unwrap_err().to_string();
    assert!(
        e.contains("@row 0: op code 7 (expected 0 (read), 1 (write), 2 (flush) or 3 (discard))"),
        "{e}"
    );
}

const DISKSIM: &str =
    "13.191135\t30\t0\t5\t1\n17.829285\t20\t576560\t6\t0\n24.314779\t17\t0\t24\t1\n";

#[test]
fn disksim_ascii_round_trip_is_exact() {
    let (orig, _) = read_all(DISKSIM.as_bytes(), "disksim", &ReadOptions::default()).unwrap();
    let p = tmp("t.disksim");
    assert_eq!(write_all(&p, "disksim", &orig), 3);
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(
        text,
        "13.191135 0 0 5 1\n17.829285 1 576560 6 0\n24.314779 2 0 24 1\n"
    );
    assert_eq!(read_path(&p, Some("disksim")), orig);
}

#[test]
fn disksim_writer_refuses_what_disksim_cannot_express() {
    let p = tmp("r.disksim");
    let mut w = create_writer(&p, Some("disksim"), &[]).unwrap();
    let e = w
        .write(&full(0, Op::Flush, 0, 0, 0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("@row 0: DiskSim ascii traces carry only reads and writes, not flush"),
        "{e}"
    );
    let e = w
        .write(&full(0, Op::Read, 100, 512, 0))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("offset 100 / length 512 is not a whole number of 512-byte blocks"),
        "{e}"
    );
}

#[test]
fn fio_v3_round_trip() {
    let t = "fio version 3 iolog\n0 /dev/sdb add\n0 /dev/sdb open\n10 /dev/sdb write 0 4096\n250 /dev/sdc read 4096 8192\n300 /dev/sdb datasync\n310 /dev/sdb trim 0 65536\n400 /dev/sdb close\n";
    let (orig, _) = read_all(t.as_bytes(), "fio", &ReadOptions::default()).unwrap();
    let p = tmp("t.iolog");
    assert_eq!(write_all(&p, "fio", &orig), 4);
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(
        text,
        "fio version 3 iolog\n10 /dev/wattio0 add\n10 /dev/wattio0 open\n10 /dev/wattio0 write 0 4096\n\
         250 /dev/wattio1 add\n250 /dev/wattio1 open\n250 /dev/wattio1 read 4096 8192\n300 /dev/wattio0 sync 0 0\n\
         310 /dev/wattio0 trim 0 65536\n310 /dev/wattio0 close\n310 /dev/wattio1 close\n"
    );
    assert_eq!(read_path(&p, None), orig);
}

#[test]
fn convert_msr_to_columnar_keeps_requests_and_provenance() {
    let src = tmp("hm_1.csv");
    std::fs::write(
        &src,
        "128166372003061629,hm,1,Read,3154227200,4096,40160\n128166372016382155,hm,1,Write,0,65536,20\n",
    )
    .unwrap();
    let out = tmp("hm_1.parquet");
    let rep = convert(&src, &out, None, None, &ReadOptions::default()).unwrap();
    assert_eq!(rep.requests, 2);
    assert_eq!(rep.output_format, "columnar");
    assert!(rep
        .assumptions
        .iter()
        .any(|a| a == "detected format msr from the first line"));
    let mut r = ColumnarReader::open(&out).unwrap();
    let a = r.assumptions().join("\n");
    assert!(
        a.contains("provenance: wattio.assumptions = detected format msr"),
        "{a}"
    );
    let mut want0 = full(0, Op::Read, 3_154_227_200, 4096, 0);
    want0.measured = Some(4_016_000);
    let mut want1 = full(1_332_052_600, Op::Write, 0, 65536, 0);
    want1.measured = Some(2_000);
    assert_eq!(drain(&mut r), vec![want0, want1]);
}

fn stats_trace() -> Vec<Request> {
    let s = 1_000_000_000u64;
    let mut r4 = full(14 * s, Op::Read, 0, 8192, 0);
    r4.measured = Some(s);
    vec![
        full(0, Op::Read, 0, 4096, 0),
        full(2 * s, Op::Write, 4096, 4096, 0),
        full(3 * s, Op::Read, 1 << 20, 512, 1),
        r4,
        full(50 * s, Op::Flush, 0, 0, 0),
    ]
}

#[test]
fn stats_match_hand_computed_values() {
    let st = trace_stats(&mut VecSource::new(stats_trace())).unwrap();
    let s = 1_000_000_000u64;
    assert_eq!(
        (st.requests, st.reads, st.writes, st.flushes, st.discards),
        (5, 3, 1, 1, 0)
    );
    assert_eq!(st.read_fraction, 0.75);
    assert_eq!((st.bytes_read, st.bytes_written), (12_800, 4096));
    assert_eq!(st.duration_ns, 50 * s);
    let bins: Vec<(u64, Option<u64>, u64)> = st
        .size_histogram
        .iter()
        .map(|b| (b.lo, b.hi, b.count))
        .collect();
    assert_eq!(
        bins,
        vec![
            (512, Some(1024), 1),
            (4096, Some(8192), 2),
            (8192, Some(16384), 1)
        ]
    );
    // Inter-arrival 2, 1, 11, 36 s.
    assert_eq!(
        (
            st.inter_arrival.count,
            st.inter_arrival.min_ns,
            st.inter_arrival.max_ns
        ),
        (4, s, 36 * s)
    );
    assert_eq!(st.inter_arrival.mean_ns, 12.5e9);
    let p50 = st.inter_arrival.p50_ns as f64;
    assert!((p50 - 2e9).abs() / 2e9 < 0.04, "p50 {p50}");
    // Idle gaps on dev 0: 2 s, 12 s, and 50 − (14 + 1 measured) = 35 s; dev 1 has one request.
    assert_eq!(
        (st.idle_gaps.count, st.idle_gaps.min_ns, st.idle_gaps.max_ns),
        (3, 2 * s, 35 * s)
    );
    let over: Vec<(u64, u64, f64, f64)> = st
        .idle_over
        .iter()
        .map(|i| (i.threshold_s, i.gaps, i.idle_s, i.beyond_threshold_s))
        .collect();
    assert_eq!(
        over,
        vec![
            (1, 3, 49.0, 46.0),
            (5, 2, 47.0, 37.0),
            (10, 2, 47.0, 27.0),
            (30, 1, 35.0, 5.0)
        ]
    );
    assert_eq!(
        (st.footprint_pages, st.footprint_bytes, st.footprint_exact),
        (3, 12_288, true)
    );
    assert_eq!(st.sequential_fraction, 0.25);
    let m = st.measured.as_ref().unwrap();
    assert_eq!((m.count, m.min_ns, m.max_ns), (1, s, s));
    assert_eq!(st.devices.len(), 2);
    assert_eq!(
        (st.devices[0].requests, st.devices[0].bytes_written),
        (4, 4096)
    );
    assert!((st.devices[0].read_fraction - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(
        (st.devices[1].requests, st.devices[1].read_fraction),
        (1, 1.0)
    );
    let json = serde_json::to_value(&st).unwrap();
    assert_eq!(json["requests"], 5);
    assert_eq!(json["read_fraction"], 0.75);
    assert!(st
        .to_text()
        .contains("t = 30 s: 1 gaps, 35.0 s idle, 5.0 s beyond t"));
}

#[test]
fn slice_window_device_and_speedup() {
    let s = 1_000_000_000u64;
    let o = SliceOptions {
        start: Some(2 * s),
        end: Some(20 * s),
        dev: None,
        speedup: 2.0,
    };
    let mut sl = Slice::new(Box::new(VecSource::new(stats_trace())), o.clone()).unwrap();
    let got: Vec<(u64, u16)> = drain(&mut sl).iter().map(|r| (r.arrival, r.dev)).collect();
    assert_eq!(got, vec![(0, 0), (s / 2, 1), (6 * s, 0)]);
    let mut sl = Slice::new(
        Box::new(VecSource::new(stats_trace())),
        SliceOptions { dev: Some(0), ..o },
    )
    .unwrap();
    let v = drain(&mut sl);
    assert_eq!(
        v.iter().map(|r| r.arrival).collect::<Vec<_>>(),
        vec![0, 6 * s]
    );
    // The recorded response time is a device property: not scaled.
    assert_eq!(v[1].measured, Some(s));
    assert!(Slice::new(
        Box::new(VecSource::new(vec![])),
        SliceOptions {
            speedup: 0.0,
            ..Default::default()
        }
    )
    .is_err());
}

fn shared_dir() -> Option<PathBuf> {
    let d = match std::env::var_os("WATTIO_SHARED") {
        Some(s) => PathBuf::from(s).join("disksim-valid"),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/disksim-valid"),
    };
    d.is_dir().then_some(d)
}

#[test]
fn reads_the_disksim_validation_traces() {
    let Some(dir) = shared_dir() else {
        eprintln!(
            "SKIP: disksim-valid data not found (set WATTIO_SHARED to the shared/ directory)"
        );
        return;
    };
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("trace") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
        // Detection must tell the two DiskSim formats apart on its own.
        let mut src = open_trace(&p, None, &ReadOptions::default()).unwrap();
        let reqs = drain(src.as_mut());
        assert_eq!(reqs.len(), lines, "{}", p.display());
        let a = src.assumptions().join("\n");
        if p.file_name().unwrap() == "ascii.trace" {
            assert!(a.contains("detected format disksim from"), "{a}");
            assert_eq!(lines, 100_000);
            assert_eq!(reqs[0].arrival, 13_191_135);
            assert_eq!(
                (reqs[0].op, reqs[0].offset, reqs[0].len),
                (Op::Read, 0, 5 * 512)
            );
        } else {
            assert!(a.contains("detected format disksim-validate"), "{a}");
            assert!(reqs.iter().all(|r| r.measured.is_some()));
            for w in reqs.windows(2) {
                assert!(w[1].arrival > w[0].arrival);
            }
        }
        n += 1;
    }
    assert_eq!(n, 8, "expected ascii.trace and 7 validation traces");
    // atlas10k starts `W Hit 4583176 4 663.00000 45422.00000`.
    let mut s = open_trace(
        &dir.join("atlas10k.trace"),
        Some("disksim-validate"),
        &ReadOptions::default(),
    )
    .unwrap();
    let a = s.next_request().unwrap().unwrap();
    let b = s.next_request().unwrap().unwrap();
    assert_eq!(
        (a.arrival, a.op, a.offset, a.len, a.measured),
        (0, Op::Write, 4_583_176 * 512, 2048, Some(663_000))
    );
    assert_eq!(b.arrival, 663_000 + 45_422_000);
}
