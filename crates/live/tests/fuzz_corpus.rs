//! Every committed fuzz seed goes through the fuzz entry point (CI exercises the corpus
//! without fuzzing); a few seeds have hand-counted event totals.

use std::path::Path;

#[test]
fn every_corpus_file_runs_through_the_server_state_machine() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/nbd_server");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let events = wattio_live::proto::fuzz_server(&data);
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        // Transmission + READ, WRITE, FLUSH, TRIM, WRITE_ZEROES + DISC.
        let expected = match name.as_str() {
            "go_structured_rw" => Some(7),
            // Transmission + READ + WRITE (EXPORT_NAME path, simple replies).
            "export_name_simple" => Some(3),
            // Close after NBD_OPT_ABORT.
            "list_info_abort" => Some(1),
            // Transmission, misaligned read, refused write (read-only), out-of-range read.
            "aligned_export_errors" => Some(4),
            "bad_client_flags" | "nonfixed_other_option" => Some(1),
            // Transmission + Close on the zeroed (magic-less) request.
            "bad_request_magic" => Some(2),
            // Transmission + ENOSPC rejection + the read after the skipped payload.
            "refused_write_payload" => Some(3),
            _ => None,
        };
        if let Some(x) = expected {
            assert_eq!(events, x, "{name}");
        }
        n += 1;
    }
    assert!(n >= 10, "corpus has {n} files");
}
