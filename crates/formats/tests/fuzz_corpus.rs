//! Runs every committed fuzz seed through the fuzz targets' entry function, so CI exercises
//! the corpus without a fuzzer.

use std::path::Path;

#[test]
fn every_fuzz_seed_passes_the_reader_invariants() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let targets = [
        "msr",
        "fiu",
        "blktrace",
        "blkparse",
        "spc",
        "alibaba",
        "tencent",
        "systor",
        "disksim",
        "disksim_validate",
        "fio",
        "mqsim",
        "biosnoop",
        "srt",
    ];
    let mut seeds = 0;
    for t in targets {
        let dir = root.join(t);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no seeds for {t}");
        for f in files {
            let data = std::fs::read(&f).unwrap();
            wattio_formats::fuzz_read(&t.replace('_', "-"), &data);
            seeds += 1;
        }
    }
    assert!(seeds >= 25);
}

/// The columnar seeds through the columnar fuzz entry, and what the hand-made ones must
/// give: the valid files their rows, the damaged ones an error (never a panic).
#[test]
fn every_columnar_fuzz_seed_passes_the_reader_invariants() {
    use wattio_core::TraceSource;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/columnar");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        // Only the committed seeds: a local fuzzing run may have added its own finds.
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("seed"))
        })
        .collect();
    files.sort();
    assert!(files.len() >= 13, "{} columnar seeds", files.len());
    for f in &files {
        wattio_formats::fuzz_columnar(&std::fs::read(f).unwrap(), 1 << 20);
    }
    // rows read before the end or the first error, and that error's text
    let outcome = |name: &str| {
        let data = std::fs::read(dir.join(format!("seed_{name}"))).unwrap();
        let mut r = match wattio_formats::ColumnarReader::from_bytes(data, "<input>") {
            Ok(r) => r,
            Err(e) => return (0, Some(e.to_string())),
        };
        let mut n = 0;
        loop {
            match r.next_request() {
                Ok(Some(_)) => n += 1,
                Ok(None) => return (n, None),
                Err(e) => return (n, Some(e.to_string())),
            }
        }
    };
    assert_eq!(outcome("valid_5"), (5, None));
    assert_eq!(outcome("valid_empty"), (0, None));
    assert_eq!(outcome("valid_300"), (300, None));
    assert_eq!(outcome("old_snappy_dict_20"), (20, None));
    let (n, e) = outcome("bad_op_row7");
    assert_eq!(n, 7);
    assert!(e.unwrap().starts_with("<input>@row 7: op code 200"));
    let (n, e) = outcome("arrival_back_row12");
    assert_eq!(n, 12);
    assert!(e.unwrap().starts_with("<input>@row 12: arrival 3 ns"));
    for damaged in ["truncated_tail", "truncated_half", "corrupt_footer_len"] {
        let (n, e) = outcome(damaged);
        assert_eq!(n, 0, "{damaged}");
        let e = e.unwrap_or_else(|| panic!("{damaged} read without an error"));
        assert!(
            e.starts_with("<input>: not a Parquet file"),
            "{damaged}: {e}"
        );
    }
    assert!(
        outcome("corrupt_pages").1.is_some(),
        "corrupt pages must not read cleanly"
    );
    // A footer whose key-value list field (id 5) carries another type's header: parquet
    // reads it by id as a list anyway, so a walker of the declared types missed its
    // declared size and parquet 57 reserved gigabytes (found by fuzzing, 2026-12-04);
    // parquet 60 bounds every list by the bytes left. An error, not an abort.
    let (n, e) = outcome("oom_kv_list_as_other_type");
    assert_eq!(n, 0);
    let e = e.expect("a corrupt footer is an error");
    assert!(e.starts_with("<input>: not a Parquet file"), "{e}");
    // A dictionary page header declaring 2^31 - 1 entries (the 300-request seed with the
    // `op` column's count rewritten): parquet 60 resizes its dictionary to what the header
    // says, 8 GiB, and the process aborted; the page-header walk refuses it first.
    let (n, e) = outcome("oom_dictionary_entries");
    assert_eq!(n, 0);
    let e = e.expect("a dictionary larger than its page is an error");
    assert!(
        e.contains("column `op`: dictionary page declares 2147483647 entries"),
        "{e}"
    );
}

/// The archive seeds through the archive fuzz entry, and what each must give: the trace's
/// bytes for the gzip file and the one-file archives (tgz, pax, GNU + zstd with a long
/// name), an error for the two-file archive and the cut one.
#[test]
fn every_archive_fuzz_seed_passes_and_gives_its_trace_or_an_error() {
    use std::io::Read;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/archive");
    let text = "128166372003061629,hm,1,Read,3154227200,4096,40160\n\
                128166372016382155,hm,1,Write,0,65536,20\n";
    let outcome = |seed: &str| -> Result<String, String> {
        let data = std::fs::read(dir.join(seed)).unwrap();
        wattio_formats::fuzz_archive(&data);
        let o = wattio_formats::compressed::from_reader(std::io::Cursor::new(data))
            .map_err(|e| e.to_string())?;
        let mut out = String::new();
        let mut r = o.reader;
        r.read_to_string(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    };
    for seed in ["seed_s1", "seed_s2", "seed_s3", "seed_s4"] {
        assert_eq!(outcome(seed).as_deref(), Ok(text), "{seed}");
    }
    let two = outcome("seed_s5").unwrap_err();
    assert!(
        two.contains("another file, hm_2.csv, after hm_1.csv"),
        "{two}"
    );
    assert!(outcome("seed_s6").is_err());
}
