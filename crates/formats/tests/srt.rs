//! HP Labs SRT traces, on files built here field by field: the header's sector sizes, each
//! record's fields, the records passed over, device selection, detection, and every error.

use wattio_core::Op;
use wattio_formats::{read_all, sniff, ReadOptions};

/// The header of hplajw's trace cut down: disk 0 with 256-byte sectors (and a section table
/// whose own keys must not be taken for the disk's), disk 1 with none given.
const HEADER: &str = "$$TR_IOREC-1.3 (IOAdaptor Upgrade Version)\nversion      = 1.3;\n\
tracedate    = \"Sat May 30 00:03:06 1992\";\ndisks        = {\n\t\t  0 -> {\n\
\t\t\tnspt        = 113,\n\t\t\tadaptor = 1 -> { hp_ib , 1.2 , 250 },\n\
\t\t\tsectorsize  = 256,\n\t\t\tsections   = {\n\t\t\t\t     8 -> {\n\
\t\t\t\t\tsize      = (171760 291362816),\n\t\t\t\t\tblocksize = 8192\n\t\t\t\t\t}\n\
\t\t\t\t    }\n\t\t\t},\n\t\t  1 -> {\n\t\t\tnspt        = 113\n\t\t\t}\n\t\t};\n";

fn record(fields: &[u32]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(4 * fields.len() as u32 + 4).to_be_bytes());
    for f in fields {
        v.extend_from_slice(&f.to_be_bytes());
    }
    v
}

/// An I/O record: version `ver` (4 adds the queue length), type `kind`.
#[allow(clippy::too_many_arguments)]
fn io(
    ver: u32,
    kind: u32,
    sec: u32,
    usec: u32,
    stop: u32,
    bytes: u32,
    sector: u32,
    dev: u32,
    flags: u32,
) -> Vec<u8> {
    let mut f = vec![
        ver << 16 | kind,
        sec,
        usec,
        174,
        stop,
        bytes,
        sector,
        dev,
        4,
        1,
        flags,
        458752,
    ];
    if ver == 4 {
        f.push(1);
    }
    if kind == 4 {
        f.push(0);
    }
    record(&f)
}

fn trace(records: &[Vec<u8>]) -> Vec<u8> {
    let mut v = HEADER.as_bytes().to_vec();
    v.push(0x0C);
    for r in records {
        v.extend_from_slice(r);
    }
    v
}

fn err(data: &[u8]) -> String {
    match read_all(data, "srt", &ReadOptions::default()) {
        Ok((v, _)) => panic!("expected an error, read {} requests", v.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn records_become_requests_in_each_disks_sectors() {
    let data = trace(&[
        // hplajw's first record: a 4 KiB read of disk 0 (dev_t 0x08000008: block major 8,
        // disk 0, section 8) at sector 1056, done 19,687 µs after its enqueue.
        io(4, 1, 0, 0, 19_687, 4096, 1056, 0x0800_0008, 0x1B),
        // An asynchronous 8 KiB write of disk 1 (minor 0x000107) 2.5 s in, version 1.
        io(1, 1, 2, 500_000, 1_000, 8192, 100, 0x0800_0107, 0x100),
        // A suspect I/O, and a record of another type: passed over, counted.
        io(4, 4, 3, 0, 10, 1024, 5, 0x0800_0008, 0x1),
        record(&[2, 3, 0]),
        // Disk 0 again through its raw device (character major 7).
        io(4, 1, 3, 250, 2_000, 1024, 171_792, 0x0700_0008, 0x1),
    ]);
    let (v, notes) = read_all(&data, "srt", &ReadOptions::default()).unwrap();
    let got: Vec<_> = v
        .iter()
        .map(|r| (r.arrival, r.op, r.offset, r.len, r.dev, r.measured))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, Op::Read, 1056 * 256, 4096, 0, Some(19_687_000)),
            (
                2_500_000_000,
                Op::Write,
                100 * 512,
                8192,
                1,
                Some(1_000_000)
            ),
            (
                3_000_250_000,
                Op::Read,
                171_792 * 256,
                1024,
                0,
                Some(2_000_000)
            ),
        ]
    );
    let all = notes.join("\n");
    assert!(all.contains("traced Sat May 30 00:03:06 1992"), "{all}");
    assert!(
        all.contains("(disk 0: 256 B; 512 B for a disk it does not describe)"),
        "{all}"
    );
    assert!(all.contains("suspect I/O records"), "{all}");
    assert!(all.contains("records other than I/Os"), "{all}");
    // One disk kept, renumbered 0.
    let one = ReadOptions {
        device: Some("1".into()),
        ..Default::default()
    };
    let (v, _) = read_all(&data, "srt", &one).unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].dev, v[0].offset), (0, 51_200));
    // Detected by the header's first word; `hpl` (DiskSim's name) reads the same.
    assert_eq!(sniff(&data), Some("srt"));
    assert_eq!(
        read_all(&data, "hpl", &ReadOptions::default())
            .unwrap()
            .0
            .len(),
        3
    );
}

#[test]
fn bad_records_are_refused_at_their_byte_offset() {
    let start = HEADER.len() as u64 + 1;
    let good = io(4, 1, 0, 0, 10, 512, 1, 0x0800_0008, 1);
    // A size that is not a record's.
    let mut data = trace(std::slice::from_ref(&good));
    data.extend_from_slice(&8u32.to_be_bytes());
    data.extend_from_slice(&[0; 4]);
    let e = err(&data);
    assert!(
        e.contains(&format!("@byte {}: a record of 8 bytes", start + 56)),
        "{e}"
    );
    assert!(
        e.contains("expected a record size of 16 to 4096 bytes"),
        "{e}"
    );
    // A record cut short.
    let mut data = trace(std::slice::from_ref(&good));
    data.extend_from_slice(&good[..30]);
    let e = err(&data);
    assert!(e.contains("a record cut short: 30 of its 56 bytes"), "{e}");
    // An I/O record too short for its fields, and microseconds past a second.
    let e = err(&trace(&[record(&[0x0004_0001, 0, 0, 1, 2, 3])]));
    assert!(
        e.contains(&format!("@byte {start}: an I/O record of 28 bytes")),
        "{e}"
    );
    let e = err(&trace(&[io(4, 1, 0, 1_000_000, 10, 512, 1, 8, 1)]));
    assert!(
        e.contains(&format!("@byte {}: usec 1000000", start + 12)),
        "{e}"
    );
    // No form feed: the header never ends.
    let e = err(HEADER.as_bytes());
    assert!(
        e.contains("the end of the file before the header's form feed"),
        "{e}"
    );
    // A header whose disk table says something that is not a sector size.
    let bad = HEADER.replace("sectorsize  = 256", "sectorsize  = none");
    let mut data = bad.into_bytes();
    data.push(0x0C);
    let e = err(&data);
    assert!(e.contains("sectorsize `none` of disk 0"), "{e}");
}
