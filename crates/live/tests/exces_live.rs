//! EXCES served live over two images, a disk and a flash card: a write lands in the flash
//! image (buffered), reads come back from it, a FLUSH makes it durable by logging the map on
//! the flash image (the disk image is untouched: docs/functions/exces.md), and a server
//! restarted on the same images rebuilds the map from that log and reads the page from the
//! flash image.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;
use wattio_live::client::Client;
use wattio_live::server::Server;

const K: usize = 4096;

const CONFIG: &str = r#"
[[device]]
name = "disk"
model = "fast-spinup-laptop-disk"
[[device]]
name = "ecd"
model = "sandisk-ultra-cf-2gb"

[[function]]
kind = "exces"
disk = "disk"
flash = "ecd"
cache_pages = 16
absorb_writes = "always"
"#;

fn serve(cfg: &Path, disk: &Path, ecd: &Path, sock: &Path) -> Server {
    serve_config(cfg, &[("disk", disk), ("ecd", ecd)], sock)
}

#[test]
fn exces_buffers_in_the_flash_image_and_a_restart_reads_it_back_through_the_logged_map() {
    let d = TempDir::new("exces-live");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cfg = d.path("run.toml");
    std::fs::write(
        &cfg,
        format!("catalogue = [{:?}]\n{CONFIG}", data.display().to_string()),
    )
    .unwrap();
    let disk: PathBuf = image(&d, "disk.img", 1 << 20, 41);
    // A fresh flash card: zeros where the map's log goes (after the 16 cache pages).
    let ecd: PathBuf = d.path("ecd.img");
    std::fs::write(&ecd, vec![0u8; 1 << 20]).unwrap();
    let disk0 = std::fs::read(&disk).unwrap();
    let sock = d.path("s");
    let srv = serve(&cfg, &disk, &ecd, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    // A whole-page write of disk page 3: buffered in ECD page 0 (absorb_writes = always).
    let w = pattern(7, K);
    assert_eq!(c.write(3 * K as u64, &w, false).unwrap().error, 0);
    // Read back, with its unmapped neighbours from the disk.
    let back = c.read(2 * K as u64, 3 * K as u32).unwrap();
    assert_eq!(back.error, 0);
    assert_eq!(back.data[..K], disk0[2 * K..3 * K]);
    assert_eq!(back.data[K..2 * K], w[..]);
    assert_eq!(back.data[2 * K..], disk0[4 * K..5 * K]);
    assert_eq!(
        std::fs::read(&ecd).unwrap()[..K],
        w[..],
        "in the flash image"
    );
    assert_eq!(
        std::fs::read(&disk).unwrap()[3 * K..4 * K],
        disk0[3 * K..4 * K],
        "not yet on the disk"
    );
    // A FLUSH makes it durable: the page stays in the flash image, its map entry is
    // logged there (after the 16 cache pages), the disk image is untouched.
    let log0 = std::fs::read(&ecd).unwrap()[16 * K..].to_vec();
    assert_eq!(c.flush().unwrap().error, 0);
    assert_eq!(
        std::fs::read(&disk).unwrap(),
        disk0,
        "the disk is not written"
    );
    assert_ne!(
        std::fs::read(&ecd).unwrap()[16 * K..],
        log0[..],
        "the map is logged"
    );
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    // A new server on the same images rebuilds the map: the flash image answers (the disk
    // image still holds the old page).
    let srv = serve(&cfg, &disk, &ecd, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    let back = c.read(3 * K as u64, K as u32).unwrap();
    assert_eq!((back.error, &back.data[..]), (0, &w[..]));
    assert_eq!(
        std::fs::read(&disk).unwrap()[3 * K..4 * K],
        disk0[3 * K..4 * K]
    );
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}
