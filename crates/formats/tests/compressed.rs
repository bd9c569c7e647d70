//! Traces read as they are downloaded: gzip (the MSR Cambridge `.csv.gz`) and zstd streams
//! give the requests of the plain file; what cannot be streamed is refused by name.

use std::io::Write;
use std::path::Path;
use wattio_core::Request;
use wattio_formats::{open_trace, ReadOptions};

const MSR: &str = "128166372003061629,hm,1,Read,3154227200,4096,40160
128166372003061629,hm,1,Write,4096,512,1000
128166372016382155,hm,1,Write,0,65536,20
";

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn read(path: &Path, format: Option<&str>) -> Result<(Vec<Request>, Vec<String>), String> {
    let mut src = open_trace(path, format, &ReadOptions::default()).map_err(|e| e.to_string())?;
    let mut v = Vec::new();
    while let Some(r) = src.next_request().map_err(|e| e.to_string())? {
        v.push(r);
    }
    Ok((v, src.assumptions()))
}

fn dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("wattio-compressed-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_gzip_or_zstd_trace_gives_the_plain_files_requests_detected_or_named() {
    let d = dir("ok");
    let plain = d.join("hm_1.csv");
    std::fs::write(&plain, MSR).unwrap();
    let (want, _) = read(&plain, None).unwrap();
    assert_eq!(want.len(), 3);
    let gz = d.join("hm_1.csv.gz");
    std::fs::write(&gz, gzip(MSR.as_bytes())).unwrap();
    let zst = d.join("hm_1.csv.zst");
    std::fs::write(&zst, zstd::stream::encode_all(MSR.as_bytes(), 3).unwrap()).unwrap();
    for (path, codec) in [(&gz, "gzip"), (&zst, "zstd")] {
        for format in [None, Some("msr")] {
            let (got, notes) = read(path, format).unwrap();
            assert_eq!(got, want, "{codec} {format:?}");
            assert!(
                notes
                    .iter()
                    .any(|n| n == &format!("decompressed: {codec} stream")),
                "{notes:?}"
            );
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_damaged_stream_fails_naming_the_file_instead_of_ending_early() {
    let d = dir("bad");
    // Many lines, so the damage is past the first buffer of decompressed text.
    let text: String = (0..20_000)
        .map(|i| {
            format!(
                "{},hm,1,Read,{},4096,100\n",
                128166372003061629u64 + i * 1000,
                i * 4096
            )
        })
        .collect();
    let mut gz = gzip(text.as_bytes());
    let n = gz.len();
    gz.truncate(n * 2 / 3);
    let path = d.join("cut.csv.gz");
    std::fs::write(&path, gz).unwrap();
    let err = read(&path, None).unwrap_err();
    assert!(err.contains("cut.csv.gz"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `tar ARGS` run in `dir` (GNU tar, the archives' real maker).
fn tar(dir: &Path, args: &[&str]) -> bool {
    match std::process::Command::new("tar")
        .args(args)
        .current_dir(dir)
        .output()
    {
        Ok(o) => {
            assert!(
                o.status.success(),
                "tar {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            true
        }
        Err(_) => false,
    }
}

#[test]
fn a_tar_archive_of_one_trace_is_read_as_that_trace() {
    let d = dir("tar");
    std::fs::write(d.join("hm_1.csv"), MSR).unwrap();
    let (want, _) = read(&d.join("hm_1.csv"), None).unwrap();
    // A long name needs a GNU long-name entry (gnu) or a pax header (pax) before the file.
    let long = format!("{}.csv", "volume-".repeat(20));
    std::fs::create_dir_all(d.join("day")).unwrap();
    std::fs::write(d.join("day").join(&long), MSR).unwrap();
    let cases: [(&str, &[&str], String); 4] = [
        (
            "one.tgz",
            &["czf", "one.tgz", "hm_1.csv"],
            "hm_1.csv".into(),
        ),
        (
            "one.tar.zst",
            &["--zstd", "-cf", "one.tar.zst", "hm_1.csv"],
            "hm_1.csv".into(),
        ),
        (
            "gnu.tgz",
            &["--format=gnu", "-czf", "gnu.tgz", "day"],
            format!("day/{long}"),
        ),
        (
            "pax.tar",
            &["--format=pax", "-cf", "pax.tar", "day"],
            format!("day/{long}"),
        ),
    ];
    for (file, args, member) in cases {
        if !tar(&d, args) {
            eprintln!("SKIP tar archives: no tar command");
            return;
        }
        let (got, notes) = read(&d.join(file), None).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(got, want, "{file}");
        let note = format!("tar archive: read its one file, {member}");
        assert!(notes.contains(&note), "{file}: {notes:?}");
    }
    // Two files: the first is read, and the second stops the run, named with the first.
    std::fs::write(d.join("hm_2.csv"), MSR).unwrap();
    tar(&d, &["czf", "two.tgz", "hm_1.csv", "hm_2.csv"]);
    let err = read(&d.join("two.tgz"), None).unwrap_err();
    assert!(
        err.contains("another file, hm_2.csv, after hm_1.csv"),
        "{err}"
    );
    // An empty archive is two blocks of zeros, no header to know it by: not a trace.
    tar(&d, &["czf", "empty.tgz", "--files-from", "/dev/null"]);
    let err = read(&d.join("empty.tgz"), None).unwrap_err();
    assert!(err.contains("cannot detect the trace format"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_compressed_or_archived_parquet_file_is_refused_with_what_to_do() {
    let d = dir("refused");
    let pq = d.join("t.parquet.gz");
    std::fs::write(&pq, gzip(b"PAR1 and the rest of a Parquet file")).unwrap();
    let err = read(&pq, None).unwrap_err();
    assert!(err.contains("a Parquet file compressed with gzip"), "{err}");
    std::fs::write(d.join("t.parquet"), b"PAR1 and the rest of a Parquet file").unwrap();
    if tar(&d, &["cf", "t.tar", "t.parquet"]) {
        let err = read(&d.join("t.tar"), None).unwrap_err();
        assert!(err.contains("a Parquet file inside a tar archive"), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}
