//! Functions' own metadata served live: the write-intent test layer (`testing::WriteLog`)
//! writes its journal into the last blocks of a real image file with FUA writes, and a
//! second session over the same file recovers the records.

mod common;

use common::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wattio_core::testing::{WriteLog, WriteLogSeen};
use wattio_core::{DeviceInfo, PowerSpec, Stack};
use wattio_live::backend::{Backend, ComponentSpec};
use wattio_live::client::Client;
use wattio_live::proto::ExportInfo;
use wattio_live::server::{ListenAddr, Server};
use wattio_live::session::{DeviceSetup, ExportSpec, Session, SessionOptions};

const SIZE: usize = 2 << 20;

/// Serve `img` through a `WriteLog`, write `blocks` (FUA), and stop. Returns what the
/// layer saw, and how the session ended (a function's fault is reported there).
fn session(
    d: &TempDir,
    img: &std::path::Path,
    blocks: &[u64],
) -> (WriteLogSeen, Result<(), String>) {
    let seen = Arc::new(Mutex::new(WriteLogSeen::default()));
    let backend = Backend::open(&ComponentSpec::file(img)).unwrap();
    let info = DeviceInfo::new(0, "d0", backend.size(), Arc::new(PowerSpec::constant(0.0)));
    let mut stack = Stack::new(vec![Box::new(WriteLog::new(seen.clone()))]);
    stack.attach(&[info]).unwrap();
    let export = ExportSpec {
        info: ExportInfo::new("d0", backend.size() - WriteLog::REGION_LEN),
        host_dev: 0,
    };
    let s = Session::start(
        stack,
        vec![DeviceSetup {
            backend,
            runtime: None,
        }],
        vec![export],
        SessionOptions::default(),
    )
    .unwrap();
    let sock = d.path(&format!("s{}", blocks.len()));
    let srv = Server::start(s, &ListenAddr::Unix(sock.clone())).unwrap();
    // Recovery (a read of the region, then its bytes) runs in the background from start.
    let t = Instant::now();
    while seen.lock().unwrap().recovered.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10), "no recovery");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut c = Client::connect(&uri(&sock, "d0")).unwrap();
    for (k, &b) in blocks.iter().enumerate() {
        let w = pattern(k as u64, 4096);
        assert_eq!(c.write(b * 4096, &w, true).unwrap().error, 0);
    }
    c.disconnect().unwrap();
    let end = srv.shutdown(Duration::from_secs(5)).map(|_| ());
    let out = std::mem::take(&mut *seen.lock().unwrap());
    (out, end)
}

#[test]
fn records_survive_a_restart_on_a_real_file() {
    let d = TempDir::new("metadata");
    let img = d.path("d0.img");
    std::fs::write(&img, vec![0u8; SIZE]).unwrap();
    let (first, end) = session(&d, &img, &[3, 7, 1]);
    assert_eq!(end, Ok(()));
    assert_eq!(
        first.recovered,
        vec![Ok(vec![])],
        "a blank region is formatted"
    );
    assert_eq!(first.durable, vec![3 * 4096, 7 * 4096, 4096]);
    // The header is on the file, in the region's first block.
    let bytes = std::fs::read(&img).unwrap();
    let region = SIZE - WriteLog::REGION_LEN as usize;
    assert_eq!(&bytes[region..region + 8], b"WATTIOLG");
    assert_eq!(bytes[3 * 4096..4 * 4096], pattern(0, 4096)[..]);
    let (second, _) = session(&d, &img, &[9]);
    assert_eq!(second.recovered, vec![Ok(vec![3 * 4096, 7 * 4096, 4096])]);
    let (third, _) = session(&d, &img, &[]);
    assert_eq!(
        third.recovered,
        vec![Ok(vec![3 * 4096, 7 * 4096, 4096, 9 * 4096])]
    );
}

#[test]
fn a_file_that_is_not_a_log_is_refused() {
    let d = TempDir::new("metadata-foreign");
    let img = image(&d, "d0.img", SIZE, 5);
    let (seen, end) = session(&d, &img, &[]);
    let e = seen.recovered[0].clone().unwrap_err();
    assert!(e.contains("is not a wattio metadata log"), "{e}");
    // The function stopped itself (`Action::Fail`): the session's end reports it.
    assert_eq!(end, Err(format!("a function misbehaved: layer 0: {e}")));
}
