//! Every reader on hand-written samples: every field of every record, the unit conversions,
//! device numbering and selection, and one malformed input per error class.

use wattio_core::{Op, Request};
use wattio_formats::{read_all, ReadOptions};

fn req(
    arrival: u64,
    op: Op,
    offset: u64,
    len: u32,
    dev: u16,
    stream: u32,
    measured: Option<u64>,
) -> Request {
    Request {
        arrival,
        op,
        offset,
        len,
        dev,
        stream,
        file: None,
        call_site: None,
        measured,
        fua: false,
    }
}

fn read(fmt: &str, text: &str) -> Vec<Request> {
    read_opts(fmt, text, &ReadOptions::default()).0
}

fn read_opts(fmt: &str, text: &str, o: &ReadOptions) -> (Vec<Request>, Vec<String>) {
    match read_all(text.as_bytes(), fmt, o) {
        Ok(x) => x,
        Err(e) => panic!("{fmt}: unexpected error {e}"),
    }
}

fn err(fmt: &str, text: &str) -> String {
    match read_all(text.as_bytes(), fmt, &ReadOptions::default()) {
        Ok((v, _)) => panic!("{fmt}: expected an error, read {} requests", v.len()),
        Err(e) => e.to_string(),
    }
}

fn sel(d: &str) -> ReadOptions {
    ReadOptions {
        device: Some(d.into()),
        ..Default::default()
    }
}

const MSR: &str = "128166372003061629,hm,1,Read,3154227200,4096,40160
128166372003061629,hm,1,Write,4096,512,1000
128166372016382155,src2,0,Write,0,65536,20
";

#[test]
fn msr_every_field_filetime_to_ns_and_volumes() {
    let (v, a) = read_opts("msr", MSR, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 3_154_227_200, 4096, 0, 0, Some(4_016_000)),
            req(0, Op::Write, 4096, 512, 0, 0, Some(100_000)),
            // (128166372016382155 - 128166372003061629) ticks × 100 ns
            req(1_332_052_600, Op::Write, 0, 65536, 1, 0, Some(2_000)),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("0=hm_1, 1=src2_0"), "{all}");
    assert!(all.contains("12816637200306162900 ns"), "{all}");
}

#[test]
fn msr_select_volume_renumbers_to_dev0_and_rebases_on_it() {
    for s in ["src2_0", "src2,0"] {
        let (v, a) = read_opts("msr", MSR, &sel(s));
        assert_eq!(v, vec![req(0, Op::Write, 0, 65536, 0, 0, Some(2_000))]);
        assert!(a
            .join("\n")
            .contains("selected src2_0 only (as dev 0); 2 records of other devices skipped"));
    }
}

#[test]
fn fiu_every_field_blocks_to_bytes_and_spaces_in_process_names() {
    let t = "89966533427010 4890 syslogd 904265560 8 W 6 0 531e779b2d0cb8d2ae8fcbb8a8c2c8d4
89966533500000 4890 kworker 1 2 100 16 R 8 16 0123456789abcdef0123456789abcdef
89966533600000 7 cat 10 1 R 6 0
";
    assert_eq!(
        read("fiu", t),
        vec![
            req(0, Op::Write, 904_265_560 * 512, 4096, 0, 4890, None),
            req(72_990, Op::Read, 51_200, 8192, 1, 4890, None),
            req(172_990, Op::Read, 5120, 512, 0, 7, None),
        ]
    );
    let (v, _) = read_opts("fiu", t, &sel("8,16"));
    assert_eq!(v, vec![req(0, Op::Read, 51_200, 8192, 0, 4890, None)]);
}

const BLKPARSE: &str = "  8,16   1        1     0.000000000  5529  Q  WS 274432 + 8 [fio]
  8,16   1        2     0.000001000  5529  G  WS 274432 + 8 [fio]
  8,16   1        3     0.000010500  5529  D  WS 274432 + 8 [fio]
  8,16   0        4     0.000200000     0  C  WS 274432 + 8 [0]
  8,16   1        5     0.001000000  5530  D   R 1000 + 16 [dd]
  8,16   1        6     0.002000000  5531  D FWS [kworker/1:1H]
  8,0    0        1     0.003000000   100  D   D 2048 + 2048 [fstrim]
  8,16   1        7     0.004000000  5529  m   N cfq5529 insert_request
  8,16   1        8     0.005000000  5532  D   N 0 + 0 [scsi]
CPU0 (8,16):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
";

#[test]
fn blkparse_default_action_d_every_field() {
    let (v, a) = read_opts("blkparse", BLKPARSE, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            // D at 10.5 µs, its C at 200 µs.
            req(
                10_500,
                Op::Write,
                274_432 * 512,
                4096,
                0,
                5529,
                Some(189_500)
            ),
            req(1_000_000, Op::Read, 512_000, 8192, 0, 5530, None),
            req(2_000_000, Op::Flush, 0, 0, 0, 5531, None),
            req(3_000_000, Op::Discard, 1_048_576, 1_048_576, 1, 100, None),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("kept action D only"), "{all}");
    assert!(
        all.contains("skipped 1 records: blkparse requests with no data"),
        "{all}"
    );
    assert!(all.contains("0=8,16, 1=8,0"), "{all}");
    assert!(
        all.contains("measured = completion (C) − D, paired by device, op and sector, oldest first: 1 requests measured"),
        "{all}"
    );
    assert!(
        all.contains("3 requests had no completion in the trace"),
        "{all}"
    );
}

/// blkparse -t adds each completion's elapsed time in parentheses before its error; a
/// failed completion is still a measurement.
#[test]
fn blkparse_completions_with_elapsed_times_and_errors() {
    let t = "  8,0    0        1     0.000100000   7  D   R 64 + 8 [dd]
  8,0    0        2     0.000200000   7  D   W 128 + 8 [dd]
  8,0    1        3     0.000250000   7  C   W 128 + 8 (   50000) [-5]
  8,0    1        4     0.000400000   7  C   R 64 + 8 (  300000) [0]
  8,0    1        5     0.000500000   7  C   R 999 + 8 [0]
";
    let (v, a) = read_opts("blkparse", t, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            req(100_000, Op::Read, 64 * 512, 4096, 0, 7, Some(300_000)),
            req(200_000, Op::Write, 128 * 512, 4096, 0, 7, Some(50_000)),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("1 completions reported an error"), "{all}");
    assert!(
        all.contains("1 completions matched no waiting request"),
        "{all}"
    );
}

#[test]
fn blkparse_queue_and_complete_actions() {
    let q = ReadOptions {
        blkparse_action: Some('Q'),
        ..Default::default()
    };
    assert_eq!(
        read_opts("blkparse", BLKPARSE, &q).0,
        vec![req(
            0,
            Op::Write,
            274_432 * 512,
            4096,
            0,
            5529,
            Some(200_000)
        )]
    );
    let c = ReadOptions {
        blkparse_action: Some('C'),
        ..Default::default()
    };
    assert_eq!(
        read_opts("blkparse", BLKPARSE, &c).0,
        vec![req(200_000, Op::Write, 274_432 * 512, 4096, 0, 0, None)]
    );
}

/// Bios merged into a request (blkparse M: back merge, F: front merge) have no completion
/// of their own: the request's completes their range, and measures them when Q is kept.
#[test]
fn blkparse_merged_bios_measured_by_their_requests_completion() {
    let t = "  8,0    0        1     0.000000000  7  Q   W 1000 + 8 [dd]
  8,0    0        2     0.000001000  7  G   W 1000 + 8 [dd]
  8,0    0        3     0.000002000  7  Q   W 1008 + 8 [dd]
  8,0    0        4     0.000002500  7  M   W 1008 + 8 [dd]
  8,0    0        5     0.000003000  7  Q   W 992 + 8 [dd]
  8,0    0        6     0.000003500  7  F   W 992 + 8 [dd]
  8,0    0        7     0.000004000  7  I   W 992 + 24 [dd]
  8,0    0        8     0.000005000  7  D   W 992 + 24 [dd]
  8,0    0        9     0.000006000  7  Q   R 5000 + 8 [dd]
  8,0    0       10     0.000007000  7  D   R 5000 + 8 [dd]
  8,0    1       11     0.000105000  0  C   W 992 + 24 [0]
  8,0    1       12     0.000207000  0  C   R 5000 + 8 [0]
";
    let q = ReadOptions {
        blkparse_action: Some('Q'),
        ..Default::default()
    };
    let (v, a) = read_opts("blkparse", t, &q);
    assert_eq!(
        v,
        vec![
            req(0, Op::Write, 1000 * 512, 4096, 0, 7, Some(105_000)),
            req(2_000, Op::Write, 1008 * 512, 4096, 0, 7, Some(103_000)),
            req(3_000, Op::Write, 992 * 512, 4096, 0, 7, Some(102_000)),
            req(6_000, Op::Read, 5000 * 512, 4096, 0, 7, Some(201_000)),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("4 requests measured"), "{all}");
    assert!(all.contains("2 of them were bios merged"), "{all}");
    assert!(!all.contains("matched no waiting request"), "{all}");
    // The request as issued: its whole range, one measurement.
    let d = ReadOptions {
        blkparse_action: Some('D'),
        ..Default::default()
    };
    let (v, _) = read_opts("blkparse", t, &d);
    assert_eq!(
        v[0],
        req(5_000, Op::Write, 992 * 512, 12_288, 0, 7, Some(100_000))
    );
    // Kept at I (after the merges here) it completes as one; kept at G, before the front
    // merge moved its first sector to 992, it follows the merge (the read, which had no
    // G, completes nothing).
    let i = ReadOptions {
        blkparse_action: Some('I'),
        ..Default::default()
    };
    assert_eq!(read_opts("blkparse", t, &i).0[0].measured, Some(101_000));
    let g = ReadOptions {
        blkparse_action: Some('G'),
        ..Default::default()
    };
    let (v, a) = read_opts("blkparse", t, &g);
    assert_eq!(
        v,
        vec![req(1_000, Op::Write, 1000 * 512, 4096, 0, 7, Some(104_000))]
    );
    let all = a.join("\n");
    assert!(
        all.contains("1 requests grew at the front by a merge (F) after G"),
        "{all}"
    );
    assert!(
        all.contains("1 completions matched no waiting request"),
        "{all}"
    );
}

/// A bio split below the queue (blkparse X) becomes two requests that complete apart, in
/// either order: kept at Q, the bio is measured to the later of the two.
#[test]
fn blkparse_split_bio_measured_to_its_last_part() {
    let t = "  8,0    0        1     0.000000000  7  Q   W 2000 + 16 [dd]
  8,0    0        2     0.000001000  7  X   W 2000 / 2008 [dd]
  8,0    0        3     0.000002000  7  D   W 2000 + 8 [dd]
  8,0    0        4     0.000003000  7  D   W 2008 + 8 [dd]
  8,0    1        5     0.000300000  0  C   W 2008 + 8 [0]
  8,0    1        6     0.000400000  0  C   W 2000 + 8 [0]
";
    let q = ReadOptions {
        blkparse_action: Some('Q'),
        ..Default::default()
    };
    let (v, a) = read_opts("blkparse", t, &q);
    assert_eq!(
        v,
        vec![req(0, Op::Write, 2000 * 512, 8192, 0, 7, Some(400_000))]
    );
    let all = a.join("\n");
    assert!(all.contains("1 requests measured"), "{all}");
    assert!(!all.contains("matched no waiting request"), "{all}");
    let (v, _) = read_opts("blkparse", t, &ReadOptions::default());
    let m: Vec<_> = v.iter().map(|r| r.measured).collect();
    assert_eq!(m, [Some(398_000), Some(297_000)]);
    // A bio back-merged into the second part completes with it, before the first part
    // does: the walk goes on from the remembered completion that measured the split bio.
    let t = "  8,0    0        1     0.000000000  7  Q   W 2000 + 16 [dd]
  8,0    0        2     0.000001000  7  X   W 2000 / 2008 [dd]
  8,0    0        3     0.000002000  7  D   W 2000 + 8 [dd]
  8,0    0        4     0.000003000  7  D   W 2008 + 8 [dd]
  8,0    0        5     0.000004000  7  Q   W 2016 + 8 [dd]
  8,0    0        6     0.000004500  7  M   W 2016 + 8 [dd]
  8,0    1        7     0.000300000  0  C   W 2008 + 16 [0]
  8,0    1        8     0.000400000  0  C   W 2000 + 8 [0]
";
    let (v, a) = read_opts("blkparse", t, &q);
    let m: Vec<_> = v.iter().map(|r| (r.arrival, r.measured)).collect();
    assert_eq!(m, [(0, Some(400_000)), (4_000, Some(296_000))]);
    let all = a.join("\n");
    assert!(all.contains("1 of them were bios merged"), "{all}");
}

/// A request the driver sent back (blkparse R) is inserted and issued again: kept at I or D
/// it goes out once, measured from its last one; kept at Q, once from its queueing.
#[test]
fn blkparse_requeued_request_goes_out_once() {
    let t = "  8,0    0        1     0.000000000  7  Q   R 3000 + 8 [dd]
  8,0    0        2     0.000001000  7  G   R 3000 + 8 [dd]
  8,0    0        3     0.000002000  7  I   R 3000 + 8 [dd]
  8,0    0        4     0.000003000  7  D   R 3000 + 8 [dd]
  8,0    0        5     0.000004000  7  Q   R 4000 + 8 [dd]
  8,0    0        6     0.000005000  7  G   R 4000 + 8 [dd]
  8,0    0        7     0.000006000  7  I   R 4000 + 8 [dd]
  8,0    0        8     0.000007000  7  D   R 4000 + 8 [dd]
  8,0    0        9     0.000050000  0  R   R 3000 + 8 [0]
  8,0    0       10     0.000060000  7  I   R 3000 + 8 [dd]
  8,0    0       11     0.000070000  7  D   R 3000 + 8 [dd]
  8,0    1       12     0.000100000  0  C   R 4000 + 8 [0]
  8,0    1       13     0.000170000  0  C   R 3000 + 8 [0]
";
    let kept = |a: char| {
        let o = ReadOptions {
            blkparse_action: Some(a),
            ..Default::default()
        };
        let (v, notes) = read_opts("blkparse", t, &o);
        let got: Vec<_> = v
            .iter()
            .map(|r| (r.offset / 512, r.arrival, r.measured))
            .collect();
        (got, notes.join("\n"))
    };
    let (d, notes) = kept('D');
    assert_eq!(
        d,
        [(4000, 7_000, Some(93_000)), (3000, 70_000, Some(100_000))]
    );
    assert!(
        notes.contains("1 requests were requeued (R) and D again"),
        "{notes}"
    );
    assert!(!notes.contains("no completion"), "{notes}");
    let (i, _) = kept('I');
    assert_eq!(
        i,
        [(4000, 6_000, Some(94_000)), (3000, 60_000, Some(110_000))]
    );
    let (q, notes) = kept('Q');
    assert_eq!(q, [(3000, 0, Some(170_000)), (4000, 4_000, Some(96_000))]);
    assert!(!notes.contains("requeued"), "{notes}");
}

/// blkparse reading blktrace's version 8 records prints zoned commands and write-zeroes:
/// a zone append (ZA) and a write-zeroes (WZ) write their range; zone management (ZR, ZRA,
/// ZF, ZO, ZC) carries no data and is counted, not read as a request (`ZR` is no read).
#[test]
fn blkparse_zoned_commands_and_write_zeroes() {
    let t = "  8,0    0        1     0.000000000  7  D  ZA 1000 + 8 [fio]
  8,0    0        2     0.000001000  7  D  ZR 2048 + 0 [fio]
  8,0    0        3     0.000002000  7  D ZRA 0 + 0 [fio]
  8,0    0        4     0.000003000  7  D  ZF 4096 + 0 [fio]
  8,0    0        5     0.000004000  7  D  ZO 4096 + 0 [fio]
  8,0    0        6     0.000005000  7  D  ZC 4096 + 0 [fio]
  8,0    0        7     0.000006000  7  D WZS 5000 + 16 [fio]
  8,0    0        8     0.000007000  7  D FZA 6000 + 8 [fio]
";
    let (v, a) = read_opts("blkparse", t, &ReadOptions::default());
    let got: Vec<_> = v.iter().map(|r| (r.op, r.offset / 512, r.len)).collect();
    assert_eq!(
        got,
        [
            (Op::Write, 1000, 4096),
            (Op::Write, 5000, 8192),
            (Op::Write, 6000, 4096)
        ]
    );
    let all = a.join("\n");
    assert!(
        all.contains("skipped 5 records: blkparse zone management commands"),
        "{all}"
    );
}

/// biosnoop prints each I/O at its completion with its latency: a request arrives at
/// TIME − LAT, lines are sorted by that, and the earliest is t = 0 (here the flush, issued
/// 0.7 ms before the first completion). COMM may hold spaces.
#[test]
fn biosnoop_sorted_by_issue_time_and_measured_by_latency() {
    let t = "TIME(s)     COMM           PID     DISK    T    SECTOR     BYTES   LAT(ms)
0.000000    fio            4179    sda     WS   2048       4096      0.512
0.000100    Web Content    200     nvme0n1 R    8          8192      0.050
0.000300    kworker/0:1H   12      sda     FWS  0          0         1.000
0.000400    fio            4179    sda     D    4096       1048576   0.100
0.000500    fio            4179    sda     N    0          0         0.010
";
    let (v, a) = read_opts("biosnoop", t, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            req(0, Op::Flush, 0, 0, 0, 12, Some(1_000_000)),
            req(188_000, Op::Write, 2048 * 512, 4096, 0, 4179, Some(512_000)),
            req(750_000, Op::Read, 8 * 512, 8192, 1, 200, Some(50_000)),
            req(
                1_000_000,
                Op::Discard,
                4096 * 512,
                1 << 20,
                0,
                4179,
                Some(100_000)
            ),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("records sorted by arrival"), "{all}");
    assert!(
        all.contains("skipped 1 records: biosnoop requests with no data"),
        "{all}"
    );
    assert!(all.contains("0=sda, 1=nvme0n1"), "{all}");
    // Detected from its header; one disk selected by name.
    let sel = ReadOptions {
        device: Some("nvme0n1".into()),
        ..Default::default()
    };
    let (v, _) = read_opts("biosnoop", t, &sel);
    assert_eq!(
        v,
        vec![req(0, Op::Read, 8 * 512, 8192, 0, 200, Some(50_000))]
    );
    assert_eq!(wattio_formats::sniff(t.as_bytes()), Some("biosnoop"));
}

/// `biosnoop -Q` adds QUE(ms) before LAT(ms): from the header, or without one from where T
/// stands; bcc's Python version prints R/W only.
#[test]
fn biosnoop_queue_column_with_and_without_header() {
    let with = "TIME(s)     COMM           PID    DISK    T    SECTOR     BYTES   QUE(ms) LAT(ms)
1.000000    dd             7      sdb     R    100        4096      0.200   2.000
1.000500    dd             7      sdb     W    108        4096     -1.000   0.250
";
    let without: String = with.lines().skip(1).map(|l| format!("{l}\n")).collect();
    for t in [with, without.as_str()] {
        let (v, _) = read_opts("biosnoop", t, &ReadOptions::default());
        assert_eq!(
            v,
            vec![
                req(0, Op::Read, 100 * 512, 4096, 0, 7, Some(2_000_000)),
                req(2_250_000, Op::Write, 108 * 512, 4096, 0, 7, Some(250_000)),
            ],
            "{t}"
        );
    }
    // Without the QUE column and without a header, a COMM of several words.
    let t = "0.000000 Web Content 9 sdc W 16 512 1.50\n";
    let (v, _) = read_opts("biosnoop", t, &ReadOptions::default());
    assert_eq!(
        v,
        vec![req(0, Op::Write, 16 * 512, 512, 0, 9, Some(1_500_000))]
    );
    // A bad field is named with its line and column.
    let e = err("biosnoop", "0.000000 fio 9 sdc W 1x6 512 1.50\n");
    assert!(e.contains(":1:22: bad SECTOR `1x6`"), "{e}");
    let e = err("biosnoop", "0.000000 fio 9 sdc\n");
    assert!(e.contains("4 fields"), "{e}");
}

/// Records out of time order stop a reader, which names `--sort`; with it they are read
/// whole and sorted (an absolute clock counted from the earliest, unless kept).
#[test]
fn sort_reads_records_out_of_time_order() {
    let t = "128166372016382155,src2,0,Write,0,65536,20
128166372003061629,hm,1,Read,3154227200,4096,40160
128166372003061629,hm,1,Write,4096,512,1000
";
    let e = err("msr", t);
    assert!(
        e.contains("arrival goes backwards") && e.contains("--sort"),
        "{e}"
    );
    let sort = ReadOptions {
        sort: true,
        ..Default::default()
    };
    let (v, a) = read_opts("msr", t, &sort);
    // Devices are numbered as read (src2_0 first), times from the earliest.
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 3_154_227_200, 4096, 1, 0, Some(4_016_000)),
            req(0, Op::Write, 4096, 512, 1, 0, Some(100_000)),
            req(1_332_052_600, Op::Write, 0, 65536, 0, 0, Some(2_000)),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("records sorted by arrival (--sort;"), "{all}");
    assert!(all.contains("the earliest arrival is t = 0"), "{all}");
    // Kept absolute: sorted, not moved (FILETIME ticks since 1601 × 100 ns, in ns).
    let keep = ReadOptions {
        sort: true,
        keep_absolute_time: true,
        ..Default::default()
    };
    let (v, _) = read_opts("msr", t, &keep);
    let arrivals: Vec<u64> = v.iter().map(|r| r.arrival).collect();
    assert_eq!(arrivals[0], arrivals[1]);
    assert_eq!(arrivals[2] - arrivals[0], 1_332_052_600);
    assert!(arrivals[0] > 1 << 60);
}

#[test]
fn spc_every_field_lba_blocks_size_bytes_seconds() {
    let t = "0,20941264,8192,W,0.551706
1,3436288,15872,r,0.554041,extra
0,20939840,8192,w,0.554397
";
    assert_eq!(
        read("spc", t),
        vec![
            req(551_706_000, Op::Write, 20_941_264 * 512, 8192, 0, 0, None),
            req(554_041_000, Op::Read, 3_436_288 * 512, 15872, 1, 0, None),
            req(554_397_000, Op::Write, 20_939_840 * 512, 8192, 0, 0, None),
        ]
    );
    let (v, _) = read_opts("spc", t, &sel("1"));
    assert_eq!(
        v,
        vec![req(
            554_041_000,
            Op::Read,
            3_436_288 * 512,
            15872,
            0,
            0,
            None
        )]
    );
}

#[test]
fn alibaba_every_field_microseconds_and_bytes() {
    let t = "419,W,8331476992,4096,1577808000000047
419,R,8331481088,16384,1577808000000100
27,W,0,512,1577808000001047
";
    assert_eq!(
        read("alibaba", t),
        vec![
            req(0, Op::Write, 8_331_476_992, 4096, 0, 0, None),
            req(53_000, Op::Read, 8_331_481_088, 16384, 0, 0, None),
            req(1_000_000, Op::Write, 0, 512, 1, 0, None),
        ]
    );
    let keep = ReadOptions {
        keep_absolute_time: true,
        ..Default::default()
    };
    assert_eq!(
        read_opts("alibaba", t, &keep).0[0].arrival,
        1_577_808_000_000_047_000
    );
}

#[test]
fn tencent_every_field_seconds_and_sectors() {
    let t = "1538323200,12345,8,1,1063
1538323200,0,16,0,1063
1538323201,100,1,0,7
";
    assert_eq!(
        read("tencent", t),
        vec![
            req(0, Op::Write, 12_345 * 512, 4096, 0, 0, None),
            req(0, Op::Read, 0, 8192, 0, 0, None),
            req(1_000_000_000, Op::Read, 51_200, 512, 1, 0, None),
        ]
    );
}

/// Two hours of a SYSTOR '17 LUN concatenated (`zcat 2016022219_LUN4.csv.gz …`): each file's
/// header, Unix seconds to the µs, bytes, the response time measured, a blank IOType (no
/// response seen) counted and reported, LUNs selected by number or by file name.
const SYSTOR: &str = "Timestamp,Response,IOType,LUN,Offset,Size
1456135200.013118000,0.000806000,R,4,899056122368,131072
1456135200.013500000,0.001,W,4,4096,8192
Timestamp,Response,IOType,LUN,Offset,Size
1456135201.500000000,0.000300,,4,4096,4096
1456135202.000001000,0.0125,W,6,0,512
";

#[test]
fn systor_every_field_unix_seconds_bytes_and_measured_response() {
    let (v, notes) = read_opts("systor", SYSTOR, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 899_056_122_368, 131_072, 0, 0, Some(806_000)),
            req(382_000, Op::Write, 4096, 8192, 0, 0, Some(1_000_000)),
            req(1_986_883_000, Op::Write, 0, 512, 1, 0, Some(12_500_000)),
        ]
    );
    let notes = notes.join("\n");
    assert!(
        notes.contains("skipped 1 records: I/Os with a blank IOType"),
        "{notes}"
    );
    for s in ["6", "LUN6", "lun6"] {
        let (v, _) = read_opts("systor", SYSTOR, &sel(s));
        assert_eq!(
            v,
            vec![req(0, Op::Write, 0, 512, 0, 0, Some(12_500_000))],
            "{s}"
        );
    }
    let absolute = ReadOptions {
        keep_absolute_time: true,
        ..Default::default()
    };
    assert_eq!(
        read_opts("systor", SYSTOR, &absolute).0[0].arrival,
        1_456_135_200_013_118_000
    );
    assert!(
        err("systor", "1.0,0.001,R,4,0,4096\n0.5,0.001,R,4,0,4096\n")
            .contains("arrival goes backwards"),
    );
}

#[test]
fn disksim_ascii_every_field_ms_blocks_hex_flags() {
    let t = "13.191135\t30\t0\t5\t1
17.829285\t20\t576560\t6\t0
24.314779\t17\t0\t24\t0x1
";
    assert_eq!(
        read("disksim", t),
        vec![
            req(13_191_135, Op::Read, 0, 2560, 0, 0, None),
            req(17_829_285, Op::Write, 576_560 * 512, 3072, 1, 0, None),
            req(24_314_779, Op::Read, 0, 12288, 2, 0, None),
        ]
    );
}

#[test]
fn mqsim_every_field_ns_sectors_one_device() {
    // MQSim's trace-based flow: integer ns, 512 B sectors, 0 = write / 1 = read; the devno
    // column is ignored (one flow onto the whole drive), so 3 and 13 both land on device 0.
    let t = "938513000 4 264719034 16 0
938828000 13 197570570 8 1

938944000 0 0 1 1
";
    let (v, a) = read_opts("mqsim", t, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            req(938_513_000, Op::Write, 264_719_034 * 512, 8192, 0, 0, None),
            req(938_828_000, Op::Read, 197_570_570 * 512, 4096, 0, 0, None),
            req(938_944_000, Op::Read, 0, 512, 0, 0, None),
        ]
    );
    assert!(
        a.iter().any(|x| x.contains("devno column is ignored")),
        "{a:?}"
    );
    // Device selection: only device 0 exists.
    assert_eq!(read_opts("mqsim", t, &sel("0")).0.len(), 3);
    let e = read_all(t.as_bytes(), "mqsim", &sel("4"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("one flow onto one device, 0"), "{e}");
    // Never sniffed: the same line is a DiskSim ascii line.
    assert_eq!(wattio_formats::sniff(t.as_bytes()), Some("disksim"));
}

#[test]
fn disksim_validate_closed_loop_arrivals_and_measured_service() {
    let t = "W Hit    4583176   4    663.00000  45422.00000
R Miss   3962268  12   6657.50000  64047.00000
R Doub   3962296  16   1825.00000  36016.00000
";
    assert_eq!(
        read("disksim-validate", t),
        vec![
            req(0, Op::Write, 4_583_176 * 512, 2048, 0, 0, Some(663_000)),
            // 663 µs service + 45422 µs think time
            req(
                46_085_000,
                Op::Read,
                3_962_268 * 512,
                6144,
                0,
                0,
                Some(6_657_500)
            ),
            req(
                46_085_000 + 6_657_500 + 64_047_000,
                Op::Read,
                3_962_296 * 512,
                8192,
                0,
                0,
                Some(1_825_000)
            ),
        ]
    );
}

#[test]
fn fio_v2_waits_accumulate_and_actions_map() {
    let t = "fio version 2 iolog
/dev/sdb add
/dev/sdb open
/dev/sdb write 0 4096
/dev/sdb wait 1500 0
/dev/sdb read 8192 512
/dev/sdc add
/dev/sdc open
/dev/sdc trim 1048576 65536
/dev/sdb sync 0 0
/dev/sdb close
";
    let (v, a) = read_opts("fio", t, &ReadOptions::default());
    assert_eq!(
        v,
        vec![
            req(0, Op::Write, 0, 4096, 0, 0, None),
            req(1_500_000, Op::Read, 8192, 512, 0, 0, None),
            req(1_500_000, Op::Discard, 1_048_576, 65536, 1, 0, None),
            req(1_500_000, Op::Flush, 0, 0, 0, 0, None),
        ]
    );
    assert!(a.join("\n").contains("0=/dev/sdb, 1=/dev/sdc"));
}

#[test]
fn fio_v3_timestamps_are_microseconds() {
    let t = "fio version 3 iolog
0 /dev/sdb add
0 /dev/sdb open
10 /dev/sdb write 0 4096
250 /dev/sdb read 4096 8192
300 /dev/sdb datasync
400 /dev/sdb close
";
    assert_eq!(
        read("fio", t),
        vec![
            req(10_000, Op::Write, 0, 4096, 0, 0, None),
            req(250_000, Op::Read, 4096, 8192, 0, 0, None),
            req(300_000, Op::Flush, 0, 0, 0, 0, None),
        ]
    );
}

/// One malformed input per error class and format: the message names line and column and
/// the expected form.
#[test]
fn malformed_inputs_name_line_column_and_expected_form() {
    let cases: &[(&str, &str, &str)] = &[
        // bad number
        (
            "msr",
            "12a,hm,1,Read,0,4096,1\n",
            "<input>:1:1: bad field `12a` (expected a Windows filetime",
        ),
        // bad enumerated token
        (
            "msr",
            "128166372003061629,hm,1,Rd,0,4096,1\n",
            "<input>:1:25: bad field `Rd` (expected Read or Write)",
        ),
        // missing field
        (
            "msr",
            "128166372003061629,hm,1,Read,0,4096\n",
            "<input>:1:36: line ends early (expected a response time",
        ),
        // extra field
        (
            "msr",
            "128166372003061629,hm,1,Read,0,4096,1,9\n",
            "<input>:1:39: bad field `9` (expected end of line",
        ),
        // time going backwards
        (
            "msr",
            "128166372003061629,hm,1,Read,0,4096,1\n128166372003061628,hm,1,Read,0,4096,1\n",
            "<input>:2:1: arrival goes backwards",
        ),
        // length beyond the request model
        (
            "alibaba",
            "1,R,0,8589934592,5\n",
            "<input>:1:1: request length 8589934592 bytes does not fit in 32 bits",
        ),
        // sector overflow
        (
            "tencent",
            "1,36028797018963968,1,0,1\n",
            "<input>:1:3: 36028797018963968 sectors overflow",
        ),
        (
            "fiu",
            "1 2 p 3 4 X 6 0\n",
            "<input>:1:11: bad field `X` (expected R or W)",
        ),
        ("fiu", "1 2 p 3 4 R\n", "<input>:1:12: line has 6 fields"),
        (
            "blkparse",
            "8;16 1 1 0.1 5 D W 0 + 8\n",
            "<input>:1:1: bad field `8;16` (expected a device MAJ,MIN",
        ),
        (
            "blkparse",
            "8,16 1 1 0.1x 5 D W 0 + 8\n",
            "<input>:1:10: bad field `0.1x` (expected a time SECS.NSECS)",
        ),
        (
            "blkparse",
            "8,16 1 1 0.1 5 D W 0 - 8\n",
            "<input>:1:22: bad field `-` (expected `+ NSECTORS`",
        ),
        (
            "spc",
            "0,1,512,x,0.5\n",
            "<input>:1:9: bad field `x` (expected r or w)",
        ),
        (
            "spc",
            "0,1,512,r,-0.5\n",
            "<input>:1:11: bad field `-0.5` (expected a timestamp in seconds)",
        ),
        (
            "alibaba",
            "1,R,0,512\n",
            "<input>:1:10: line ends early (expected a timestamp in microseconds)",
        ),
        (
            "tencent",
            "1,0,1,2,1\n",
            "<input>:1:7: bad field `2` (expected IOType 0 (read) or 1 (write))",
        ),
        (
            "disksim",
            "1.0 0 0 8 zz\n",
            "<input>:1:11: bad field `zz` (expected flags in hex",
        ),
        (
            "disksim",
            "1.0 0 0 8 1 7\n",
            "<input>:1:13: bad field `7` (expected end of line",
        ),
        (
            "mqsim",
            "1.5 0 0 8 1\n",
            "<input>:1:1: bad field `1.5` (expected an arrival time in integer ns)",
        ),
        (
            "mqsim",
            "10 0 010 8 1\n",
            "<input>:1:6: bad field `010` (expected a start address in 512 B sectors, without a leading 0",
        ),
        (
            "mqsim",
            "10 0 0x10 8 1\n",
            "<input>:1:6: bad field `0x10` (expected a start address in 512 B sectors, without a leading 0",
        ),
        (
            "mqsim",
            "10 0 16 8 2\n",
            "<input>:1:11: bad field `2` (expected a type: 0 (write) or 1 (read))",
        ),
        (
            "mqsim",
            "10 0 16 8\n",
            "<input>:1:10: line ends early (expected a type: 0 (write) or 1 (read))",
        ),
        (
            "mqsim",
            "10 0 16 8 1 1\n",
            "<input>:1:13: bad field `1` (expected end of line after the type",
        ),
        (
            "mqsim",
            "20 0 16 8 1\n10 0 16 8 1\n",
            "<input>:2:1: arrival goes backwards",
        ),
        (
            "disksim-validate",
            "W Hot 1 1 1.0 1.0\n",
            "<input>:1:3: bad field `Hot` (expected Hit, Miss, Doub or Trip)",
        ),
        (
            "disksim-validate",
            "W Hit 1 1 1.0\n",
            "<input>:1:14: line ends early (expected a think time in µs)",
        ),
        (
            "fio",
            "/dev/sdb read 0 4096\n",
            "<input>:1:1: not a fio iolog header",
        ),
        (
            "fio",
            "fio version 2 iolog\n/dev/sdb rd 0 1\n",
            "<input>:2:10: unknown action `rd`",
        ),
        (
            "fio",
            "fio version 3 iolog\n5 /dev/sdb wait 10 0\n",
            "<input>:2:12: `wait` in a version 3 iolog",
        ),
        (
            "fio",
            "fio version 3 iolog\n5 /dev/sdb read 10\n",
            "<input>:2:19: I/O action without offset and length",
        ),
        (
            "fio",
            "",
            "<input>: empty file: no `fio version 2|3 iolog` header",
        ),
    ];
    let mut wrong = Vec::new();
    for (fmt, text, want) in cases {
        let e = err(fmt, text);
        if !e.starts_with(want) {
            wrong.push(format!("{fmt}: got\n  {e}\nwanted prefix\n  {want}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn lenient_skips_counts_and_quotes_bad_lines() {
    let t = "0,1,512,r,0.5\n0,1,512,x,0.6\nnot a line\n0,2,512,w,0.7\n0,2,512,w,0.1\n";
    let o = ReadOptions {
        lenient: true,
        ..Default::default()
    };
    let (v, a) = read_opts("spc", t, &o);
    assert_eq!(
        v,
        vec![
            req(500_000_000, Op::Read, 512, 512, 0, 0, None),
            req(700_000_000, Op::Write, 1024, 512, 0, 0, None),
        ]
    );
    let all = a.join("\n");
    assert!(all.contains("lenient: skipped 3 bad lines"), "{all}");
    assert!(
        all.contains("bad line: <input>:2:9: bad field `x`"),
        "{all}"
    );
    assert!(
        all.contains("bad line: <input>:3:1: bad field `not a line`"),
        "{all}"
    );
    assert!(
        all.contains("bad line: <input>:5:1: arrival goes backwards"),
        "{all}"
    );
}

#[test]
fn crlf_line_endings_and_blank_lines_are_accepted() {
    let v = read("alibaba", "1,R,0,512,10\r\n\r\n1,W,512,512,11\r\n");
    assert_eq!(
        v,
        vec![
            req(0, Op::Read, 0, 512, 0, 0, None),
            req(1_000, Op::Write, 512, 512, 0, 0, None)
        ]
    );
}

#[test]
fn bad_device_selection_is_refused() {
    let e = read_all(MSR.as_bytes(), "msr", &sel("hm"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad device selection `hm`"), "{e}");
}

#[test]
fn sniffing_recognizes_every_text_format() {
    use wattio_formats::sniff;
    let cases: &[(&str, &str)] = &[
        (MSR, "msr"),
        (
            "89966533427010 4890 syslogd 904265560 8 W 6 0 531e779b2d0cb8d2ae8fcbb8a8c2c8d4\n",
            "fiu",
        ),
        (BLKPARSE, "blkparse"),
        ("0,20941264,8192,W,0.551706\n", "spc"),
        ("419,W,8331476992,4096,1577808000000047\n", "alibaba"),
        ("1538323200,12345,8,1,1063\n", "tencent"),
        (SYSTOR, "systor"),
        (
            "1456135200.013118000,0.000806000,R,4,899056122368,131072\n",
            "systor",
        ),
        ("1456135202.013118000,0.001,,0,4096,4096\n", "systor"),
        ("13.191135\t30\t0\t5\t1\n", "disksim"),
        (
            "W Hit    4583176   4    663.00000  45422.00000\n",
            "disksim-validate",
        ),
        ("fio version 3 iolog\n", "fio"),
    ];
    for (text, want) in cases {
        assert_eq!(sniff(text.as_bytes()), Some(*want), "{text}");
    }
    assert_eq!(sniff(b"hello world\n"), None);
    // MSR Cambridge with the header some copies carry, and in lower case: the reader takes
    // both, so detection does; a header before another format's line is not MSR.
    let header = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\r\n";
    assert_eq!(sniff(format!("{header}{MSR}").as_bytes()), Some("msr"));
    assert_eq!(sniff(MSR.replace("Read", "read").as_bytes()), Some("msr"));
    // Behind a UTF-8 byte order mark, which every text reader skips.
    assert_eq!(
        sniff(format!("\u{feff}{header}{MSR}").as_bytes()),
        Some("msr")
    );
    assert_eq!(sniff(format!("\u{feff}{MSR}").as_bytes()), Some("msr"));
    assert_eq!(sniff(header.as_bytes()), None);
    assert_eq!(
        sniff(format!("{header}0,20941264,8192,W,0.551706\n").as_bytes()),
        None
    );
}

#[test]
fn a_leading_byte_order_mark_is_skipped_and_reported_by_every_text_reader() {
    let plain = read_opts("msr", MSR, &ReadOptions::default());
    let with_bom = read_opts("msr", &format!("\u{feff}{MSR}"), &ReadOptions::default());
    assert_eq!(with_bom.0, plain.0);
    assert!(
        with_bom
            .1
            .contains(&"the file starts with a UTF-8 byte order mark (skipped)".to_string()),
        "{:?}",
        with_bom.1
    );
    assert!(!plain.1.iter().any(|a| a.contains("byte order mark")));
    // Only at the start: a mark inside the file is a bad field, shown escaped.
    let e = err("msr", &format!("{MSR}\u{feff}1,hm,1,Read,0,4096,1\n"));
    assert!(e.contains("\\u{feff}"), "{e}");
    assert!(!e.contains('\u{feff}'), "{e}");
}

/// `--sort-window N`: records out of order by at most N go out sorted, with memory bounded by
/// the window (an absolute clock counted from the earliest handed out); one further back is
/// refused naming its line (lenient: skipped, counted). SYSTOR hours, whose records step
/// back a little (docs/formats.md).
#[test]
fn a_sort_window_reorders_nearby_records_and_names_one_beyond_it() {
    let t = "Timestamp,Response,IOType,LUN,Offset,Size
1456146000.000010,0.001,R,4,0,4096
1456146000.000030,0.001,R,4,4096,4096
1456146000.000020,0.001,W,4,8192,4096
1456146000.000050,0.001,R,4,12288,4096
1456146000.000040,0.001,R,4,16384,4096
1456146000.000060,0.001,R,4,20480,4096
";
    let win = |n: usize, lenient: bool| ReadOptions {
        sort_window: Some(n),
        lenient,
        ..Default::default()
    };
    let (v, a) = read_opts("systor", t, &win(1, false));
    let got: Vec<(u64, u64)> = v.iter().map(|r| (r.arrival, r.offset)).collect();
    assert_eq!(
        got,
        vec![
            (0, 0),
            (10_000, 8192),
            (20_000, 4096),
            (30_000, 16384),
            (40_000, 12288),
            (50_000, 20480)
        ]
    );
    let all = a.join("\n");
    assert!(
        all.contains("records reordered by arrival within a window of 1 (--sort-window): the earliest handed out (1456146000000010000 ns on the trace's clock) is t = 0"),
        "{all}"
    );
    // A record three places late needs a window of 3: with 2 it is out of it.
    let late = "1.000010,0.001,R,4,0,4096
1.000020,0.001,R,4,4096,4096
1.000030,0.001,R,4,8192,4096
1.000040,0.001,R,4,12288,4096
1.000015,0.001,W,4,16384,4096
1.000050,0.001,R,4,20480,4096
";
    assert_eq!(read_opts("systor", late, &win(3, false)).0.len(), 6);
    let e = match read_all(late.as_bytes(), "systor", &win(2, false)) {
        Ok((v, _)) => panic!("read {} requests", v.len()),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains(":5:1: arrival 1000015000 ns on the trace's clock is before 1000020000 ns, already handed out: out of the 2-record sort window"),
        "{e}"
    );
    let (v, a) = read_opts("systor", late, &win(2, true));
    assert_eq!(v.len(), 5);
    assert!(a.join("\n").contains("1 bad line"), "{a:?}");
    // Not with --sort; a window of 0 or past MAX_SORTED is refused.
    for bad in [
        ReadOptions {
            sort: true,
            sort_window: Some(4),
            ..Default::default()
        },
        win(0, false),
        win(wattio_formats::text::MAX_SORTED + 1, false),
    ] {
        assert!(read_all(late.as_bytes(), "systor", &bad).is_err());
    }
}
