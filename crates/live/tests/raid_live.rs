//! RAID-5 served live: the parity the layer asks for (`Action::Xor`) is computed by the
//! live executor on real bytes, and lands in the member images.

mod common;

use common::*;
use std::path::Path;
use std::time::Duration;
use wattio_live::client::Client;
use wattio_live::server::{ListenAddr, Server};
use wattio_live::setup::{build_from_config, ConfigServe};

const CONFIG: &str = r#"
[[device]]
name = "d0"
model = "fast-spinup-laptop-disk"
[[device]]
name = "d1"
model = "fast-spinup-laptop-disk"
[[device]]
name = "d2"
model = "fast-spinup-laptop-disk"

[[function]]
kind = "raid"
level = 5
devices = ["d0", "d1", "d2"]
chunk_kib = 4
"#;

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

#[test]
fn raid5_parity_lands_in_the_member_images() {
    const K: usize = 4096;
    let d = TempDir::new("raid5");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cfg = d.path("run.toml");
    std::fs::write(
        &cfg,
        format!("catalogue = [{:?}]\n{CONFIG}", data.display().to_string()),
    )
    .unwrap();
    let imgs: Vec<_> = (0..3)
        .map(|k| image(&d, &format!("d{k}.img"), 1 << 20, 30 + k as u64))
        .collect();
    let orig: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let session = build_from_config(&ConfigServe {
        config: cfg,
        images: (0..3).map(|k| (format!("d{k}"), imgs[k].clone())).collect(),
        direct: false,
        capture: None,
        workers: 2,
        poll_us: None,
    })
    .unwrap();
    let sock = d.path("s");
    let srv = Server::start(session, &ListenAddr::Unix(sock.clone())).unwrap();
    // The array is one export, `raid5`, of the array's size (two data members of 1 MiB;
    // the members are not exported on their own). 4 KiB chunks, left-symmetric:
    // stripe 0 = chunk 0 on d0, chunk 1 on d1, parity on d2; stripe 1 = parity on d1,
    // chunk 2 on d2, chunk 3 on d0.
    assert!(Client::connect(&uri(&sock, "d1")).is_err());
    let mut c = Client::connect(&uri(&sock, "raid5")).unwrap();
    assert_eq!(c.size, 2 << 20);
    // A full row: parity = chunk 0 ^ chunk 1, no reads.
    let w = pattern(7, 2 * K);
    assert_eq!(c.write(0, &w, true).unwrap().error, 0);
    // Chunk 2 alone, in a row of unknown parity: reconstruct-write with chunk 3's old bytes.
    let w2 = pattern(8, K);
    assert_eq!(c.write(2 * K as u64, &w2, true).unwrap().error, 0);
    // Chunk 3 alone, now a known row: read-modify-write.
    let w3 = pattern(9, K);
    assert_eq!(c.write(3 * K as u64, &w3, true).unwrap().error, 0);
    let back = c.read(0, 4 * K as u32).unwrap();
    assert_eq!(back.error, 0);
    assert_eq!(back.data[..2 * K], w[..]);
    assert_eq!(back.data[2 * K..3 * K], w2[..]);
    assert_eq!(back.data[3 * K..], w3[..]);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
    let m: Vec<Vec<u8>> = imgs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(m[0][..K], w[..K]);
    assert_eq!(m[1][..K], w[K..]);
    assert_eq!(m[2][..K], xor(&w[..K], &w[K..])[..], "stripe 0 parity");
    assert_eq!(m[2][K..2 * K], w2[..]);
    assert_eq!(m[0][K..2 * K], w3[..]);
    assert_eq!(
        m[1][K..2 * K],
        xor(&w2, &w3)[..],
        "stripe 1 parity, after RCW then RMW"
    );
    // Nothing else was touched.
    assert_eq!(m[0][2 * K..], orig[0][2 * K..]);
    assert_eq!(m[2][2 * K..], orig[2][2 * K..]);
}
