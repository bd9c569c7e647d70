//! Interoperability with real NBD peers (Debian: qemu-utils, libnbd-bin, fio). Each test
//! skips with a message when its tool is missing; CI installs them from
//! scripts/apt-packages.txt.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;
use wattio_live::setup::ServeSpec;

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{cmd:?} failed:\n{text}");
    text
}

fn one(d: &TempDir, len: usize, seed: u64) -> (wattio_live::Server, std::path::PathBuf, String) {
    let img = image(d, "disk.img", len, seed);
    let sock = d.path("s");
    let srv = serve(
        &ServeSpec {
            images: vec![img.clone()],
            names: vec!["disk".into()],
            workers: 2,
            poll_us: None,
            ..ServeSpec::default()
        },
        &sock,
    );
    (srv, img, uri(&sock, "disk"))
}

#[test]
fn qemu_img_convert_and_compare_round_trip() {
    if !have("qemu-img") {
        return;
    }
    let d = TempDir::new("qimg");
    let (srv, img, u) = one(&d, 8 << 20, 0);
    std::fs::write(&img, vec![0u8; 8 << 20]).unwrap();
    // A source with data, a hole and a zeroed stretch, so convert uses WRITE and
    // WRITE_ZEROES.
    let src = d.path("src.raw");
    let mut s = pattern(42, 8 << 20);
    s[(2 << 20)..(4 << 20)].fill(0);
    std::fs::write(&src, &s).unwrap();
    run(Command::new("qemu-img")
        .args(["convert", "-n", "-f", "raw", "-O", "raw"])
        .arg(&src)
        .arg(&u));
    let out = run(Command::new("qemu-img")
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&src)
        .arg(&u));
    assert!(out.contains("Images are identical"), "{out}");
    // And back out again through NBD into a new file.
    let back = d.path("back.qcow2");
    run(Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "qcow2"])
        .arg(&u)
        .arg(&back));
    let out = run(Command::new("qemu-img")
        .args(["compare", "-F", "raw"])
        .arg(&back)
        .arg(&src));
    assert!(out.contains("Images are identical"), "{out}");
    srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(std::fs::read(&img).unwrap(), s);
}

#[test]
fn qemu_io_write_read_pattern_discard_zero_flush() {
    if !have("qemu-io") {
        return;
    }
    let d = TempDir::new("qio");
    let (srv, img, u) = one(&d, 4 << 20, 1);
    let out = run(Command::new("qemu-io")
        .args(["-f", "raw"])
        .args([
            "-c",
            "write -P 0xab 1M 64k",
            "-c",
            "write -f -P 0xcd 2M 4k",
            "-c",
            "flush",
            "-c",
            "read -P 0xab 1M 64k",
            "-c",
            "read -P 0xcd 2M 4k",
            "-c",
            "write -z -u 3M 64k",
            "-c",
            "write -z 3M 4k",
            "-c",
            "read -P 0 3M 64k",
            "-c",
            "discard 3M 64k",
        ])
        .arg(&u));
    assert!(!out.contains("Pattern verification failed"), "{out}");
    assert_eq!(out.matches("read ").count(), 3, "{out}");
    srv.shutdown(Duration::from_secs(10)).unwrap();
    let f = std::fs::read(&img).unwrap();
    assert!(f[1 << 20..(1 << 20) + 65536].iter().all(|&b| b == 0xab));
    assert!(f[2 << 20..(2 << 20) + 4096].iter().all(|&b| b == 0xcd));
}

#[test]
fn nbdinfo_sees_size_flags_block_sizes_and_lists_exports() {
    if !have("nbdinfo") {
        return;
    }
    let d = TempDir::new("info");
    let (srv, _img, u) = one(&d, 3 << 20, 2);
    let out = run(Command::new("nbdinfo").arg(&u));
    for want in [
        "export-size: 3145728",
        "can_flush: true",
        "can_fua: true",
        "can_trim: true",
        "can_zero: true",
        "can_multi_conn: true",
        "is_read_only: false",
        "block_size_minimum: 1",
        "block_size_preferred: 4096",
        "block_size_maximum: 33554432",
        "structured",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let list = run(Command::new("nbdinfo").arg("--list").arg(&u));
    assert!(list.contains("export=\"disk\""), "{list}");
    srv.shutdown(Duration::from_secs(10)).unwrap();
}

#[test]
fn nbdcopy_both_ways_with_multiple_connections() {
    if !have("nbdcopy") {
        return;
    }
    let d = TempDir::new("copy");
    let (srv, img, u) = one(&d, 16 << 20, 3);
    let out = d.path("out.raw");
    run(Command::new("nbdcopy")
        .args(["--connections=4", "--requests=16"])
        .arg(&u)
        .arg(&out));
    assert_eq!(std::fs::read(&out).unwrap(), pattern(3, 16 << 20));
    let src = d.path("src.raw");
    std::fs::write(&src, pattern(33, 16 << 20)).unwrap();
    run(Command::new("nbdcopy")
        .args(["--connections=4", "--flush"])
        .arg(&src)
        .arg(&u));
    srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(std::fs::read(&img).unwrap(), pattern(33, 16 << 20));
}

#[test]
fn fio_nbd_engine_randwrite_with_crc32c_verify() {
    if !have("fio") {
        return;
    }
    let d = TempDir::new("fio");
    let (srv, _img, u) = one(&d, 32 << 20, 4);
    let out = run(Command::new("fio").args([
        "--name=verify",
        "--ioengine=nbd",
        &format!("--uri={u}"),
        "--rw=randwrite",
        "--bs=4k",
        "--size=16M",
        "--iodepth=32",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--verify_state_save=0",
        "--output-format=terse",
        "--terse-version=3",
    ]));
    // Terse v3: field 5 is the error code of the job.
    let line = out
        .lines()
        .find(|l| l.starts_with("3;"))
        .unwrap_or_else(|| panic!("{out}"));
    let f: Vec<&str> = line.split(';').collect();
    assert_eq!(f[4], "0", "fio error: {out}");
    let summary = srv.shutdown(Duration::from_secs(10)).unwrap();
    // 16 MiB of 4 KiB writes, then all of it read back for verification.
    assert_eq!(summary.stats.bytes_written, 16 << 20);
    assert_eq!(summary.stats.bytes_read, 16 << 20);
    assert_eq!(summary.stats.errors, 0);
}

/// A CA and a server certificate for 127.0.0.1/localhost signed by it, made with openssl:
/// `dir` then holds `ca-cert.pem` (what qemu's `tls-creds-x509` and libnbd's
/// `tls-certificates` read on the client side), `server-cert.pem` and `server-key.pem`.
fn certificates(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let ssl = |args: &[&str]| {
        run(Command::new("openssl").current_dir(dir).args(args));
    };
    ssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "ca-key.pem",
        "-out",
        "ca-cert.pem",
        "-days",
        "2",
        "-subj",
        "/CN=wattio test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    ssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "server-key.pem",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    ssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca-cert.pem",
        "-CAkey",
        "ca-key.pem",
        "-CAcreateserial",
        "-out",
        "server-cert.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
}

/// A TCP server on loopback with TLS `mode`; returns it and its port.
fn tls_server(
    d: &TempDir,
    certs: &std::path::Path,
    mode: wattio_live::proto::TlsMode,
    len: usize,
    seed: u64,
) -> (wattio_live::Server, u16) {
    let img = image(d, "disk.img", len, seed);
    let session = wattio_live::setup::build(&ServeSpec {
        images: vec![img],
        names: vec!["disk".into()],
        workers: 2,
        ..ServeSpec::default()
    })
    .unwrap();
    let tls = wattio_live::tls::TlsOptions::load(
        &certs.join("server-cert.pem"),
        &certs.join("server-key.pem"),
        mode,
    )
    .unwrap();
    let srv = wattio_live::Server::start_with(
        session,
        &wattio_live::ListenAddr::parse_tcp("127.0.0.1:0").unwrap(),
        &wattio_live::ServerOptions {
            tls: Some(tls),
            ..Default::default()
        },
    )
    .unwrap();
    let port = srv.addr().rsplit(':').next().unwrap().parse().unwrap();
    (srv, port)
}

fn fails(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    assert!(!o.status.success(), "{cmd:?} succeeded");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn nbdinfo_over_tls_and_plain_clients_refused_when_tls_is_required() {
    if !have("nbdinfo") || !have("openssl") {
        return;
    }
    let d = TempDir::new("tlsinfo");
    let certs = d.path("pki");
    certificates(&certs);
    let (srv, port) = tls_server(&d, &certs, wattio_live::proto::TlsMode::Require, 3 << 20, 8);
    let out = run(Command::new("nbdinfo").arg(format!(
        "nbds://127.0.0.1:{port}/disk?tls-certificates={}",
        certs.display()
    )));
    for want in ["export-size: 3145728", "TLS", "can_fua: true"] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // A plain client is refused (NBD_REP_ERR_TLS_REQD), ours and libnbd's.
    // (libnbd reports TLS_REQD to GO as "Operation not supported".)
    let err = fails(Command::new("nbdinfo").arg(format!("nbd://127.0.0.1:{port}/disk")));
    assert!(err.contains("opt_go"), "{err}");
    let e = wattio_live::client::Client::connect(&format!("nbd://127.0.0.1:{port}/disk"))
        .err()
        .unwrap();
    assert!(e.contains("TLS"), "{e}");
    // A client that does not trust the certificate's CA fails the handshake.
    let other = d.path("other");
    certificates(&other);
    fails(Command::new("nbdinfo").arg(format!(
        "nbds://127.0.0.1:{port}/disk?tls-certificates={}",
        other.display()
    )));
    srv.shutdown(Duration::from_secs(10)).unwrap();
}

#[test]
fn qemu_img_round_trip_over_tls() {
    if !have("qemu-img") || !have("openssl") {
        return;
    }
    let d = TempDir::new("tlsqimg");
    let certs = d.path("pki");
    certificates(&certs);
    let (srv, port) = tls_server(
        &d,
        &certs,
        wattio_live::proto::TlsMode::Optional,
        4 << 20,
        9,
    );
    let creds = format!(
        "tls-creds-x509,id=tls0,endpoint=client,dir={}",
        certs.display()
    );
    let opts = format!(
        "driver=nbd,server.type=inet,server.host=127.0.0.1,server.port={port},export=disk,tls-creds=tls0"
    );
    let src = d.path("src.raw");
    let data = pattern(99, 4 << 20);
    std::fs::write(&src, &data).unwrap();
    run(Command::new("qemu-img")
        .args([
            "convert",
            "-n",
            "--object",
            &creds,
            "-f",
            "raw",
            "--target-image-opts",
        ])
        .arg(&src)
        .arg(&opts));
    let back = d.path("back.raw");
    run(Command::new("qemu-img")
        .args([
            "convert",
            "--object",
            &creds,
            "--image-opts",
            &opts,
            "-O",
            "raw",
        ])
        .arg(&back));
    assert_eq!(std::fs::read(&back).unwrap(), data);
    // TLS offered, not required: a plain client is served too.
    let mut c =
        wattio_live::client::Client::connect(&format!("nbd://127.0.0.1:{port}/disk")).unwrap();
    assert_eq!(c.read(0, 4096).unwrap().data, data[..4096]);
    c.disconnect().unwrap();
    let summary = srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(summary.stats.bytes_written, 4 << 20);
}
