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

#[test]
fn a_tar_archive_and_a_compressed_parquet_file_are_refused_with_what_to_do() {
    let d = dir("refused");
    // A ustar header: name, then the magic at offset 257.
    let mut tar = vec![0u8; 1024];
    tar[..8].copy_from_slice(b"hm_1.csv");
    tar[257..263].copy_from_slice(b"ustar\0");
    let tgz = d.join("2018-10-01-01.tgz");
    std::fs::write(&tgz, gzip(&tar)).unwrap();
    let err = read(&tgz, None).unwrap_err();
    assert!(err.contains("a tar archive"), "{err}");
    assert!(err.contains("tar xzf"), "{err}");
    let pq = d.join("t.parquet.gz");
    std::fs::write(&pq, gzip(b"PAR1 and the rest of a Parquet file")).unwrap();
    let err = read(&pq, None).unwrap_err();
    assert!(err.contains("a Parquet file compressed with gzip"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
