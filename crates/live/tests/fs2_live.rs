//! FS2 served live over a disk image with its replica table persisted (`journal_kb`). An
//! image whose end holds data other than the table's journal is refused (host I/O gets
//! errors, it does not hang). On a new disk (zeros at its end): reads
//! make region 1 the hot one and a block far away gets a replica there (the copy lands in
//! the image); a server restarted on the same image recovers the table from its journal
//! at the end of the image; a write of the original waits for its replica's drop to be
//! logged; a third server recovers a table that no longer sends a read of that block to
//! its old replica (docs/functions/fs2.md, "Persistence").

mod common;

use common::*;
use std::path::Path;
use std::time::{Duration, Instant};
use wattio_live::client::Client;
use wattio_live::server::Server;
use wattio_live::session::Summary;

const K: usize = 4096;
/// A block of region 1 (1 MiB regions) the host reads; blocks 272..512 are declared free.
const HOT: u64 = 260;
/// The block replicated: 12 MiB in.
const ORIG: u64 = 3072;
/// Where its replica goes: the first free block of region 1.
const REPLICA: usize = 272;

const CONFIG: &str = r#"
[[device]]
name = "disk"
model = "hp-c2247a"

[[function]]
kind = "fs2"
disk = "disk"
region_mb = 1
epoch_s = 0.05
free = [[1114112, 983040]]
high_watermark = 0
low_watermark = 0
critical_watermark = 0
copy_depth = 1
max_replica_blocks = 64
journal_kb = 8
"#;

fn serve(cfg: &Path, disk: &Path, sock: &Path) -> Server {
    serve_config(cfg, &[("disk", disk)], sock)
}

fn counter(s: &Summary, name: &str) -> f64 {
    layer_counter(s, "fs2", name)
}

fn read(c: &mut Client, block: u64) -> Vec<u8> {
    let r = c.read(block * K as u64, K as u32).unwrap();
    assert_eq!(r.error, 0);
    r.data
}

/// Read region 1 and then `ORIG` until `ORIG`'s replica is in region 1's first free block
/// and its ADD record (kind 1, original, replica) is in the journal at the end of the
/// image (`n` bytes). The record follows the copy by a flush of the image and a journal
/// write, the layer's own I/O, which a shutdown does not wait for: so this waits for the
/// record, not the copy alone.
fn until_replica_logged(c: &mut Client, disk: &Path, n: usize, orig0: &[u8]) {
    let mut add = vec![1u8];
    add.extend_from_slice(&ORIG.to_le_bytes());
    add.extend_from_slice(&(REPLICA as u64).to_le_bytes());
    let t0 = Instant::now();
    loop {
        for _ in 0..3 {
            read(c, HOT);
        }
        assert_eq!(read(c, ORIG), orig0);
        let img = std::fs::read(disk).unwrap();
        let logged = img[n - (64 << 10)..].windows(add.len()).any(|w| w == add);
        if img[REPLICA * K..(REPLICA + 1) * K] == orig0[..] && logged {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no logged replica after 20 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_replica_table_survives_restarts_and_never_outlives_a_rewrite() {
    let d = TempDir::new("fs2-live");
    let cfg = d.path("run.toml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let disk = image(&d, "disk.img", 16 << 20, 53);
    let sock = d.path("s");

    // The image's last bytes, where the table's region goes, hold data that is not a
    // journal: the layer refuses to write over it, and the host's read gets an error
    // instead of waiting for a recovery that cannot end.
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    assert_ne!(c.read(0, K as u32).unwrap().error, 0);
    c.disconnect().unwrap();
    let e = srv.shutdown(Duration::from_secs(5)).unwrap_err();
    assert!(
        e.contains("fs2-disk: the replica table's journal")
            && e.contains("bytes 16752640..16777216 is not a wattio metadata log"),
        "{e}"
    );

    // A new disk: zeros at its end (the region: two headers, two snapshot slots of
    // 64 × 16 bytes, the 8 KiB journal = 24 KiB).
    let mut bytes = std::fs::read(&disk).unwrap();
    let n = bytes.len();
    bytes[n - (64 << 10)..].fill(0);
    std::fs::write(&disk, &bytes).unwrap();
    let disk0 = bytes;
    let orig0 = disk0[ORIG as usize * K..(ORIG as usize + 1) * K].to_vec();

    // Server 1: region 1 is read most in every epoch, the far block now and then, until
    // its replica is made and logged.
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    until_replica_logged(&mut c, &disk, n, &orig0);
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert!(counter(&s, "replicas_created") >= 1.0, "{s:?}");
    assert!(counter(&s, "log_records") >= 1.0);

    // Server 2: the table comes back from the journal; a read near region 1 then of the
    // far block finds it replicated; a write of the original waits for the drop's record.
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    read(&mut c, HOT);
    assert_eq!(read(&mut c, ORIG), orig0);
    let new = pattern(99, K);
    assert_eq!(c.write(ORIG * K as u64, &new, true).unwrap().error, 0);
    read(&mut c, HOT);
    assert_eq!(read(&mut c, ORIG), new);
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert!(counter(&s, "recovered_replicas") >= 1.0);
    // The read of the far block found it replicated: redirected, or kept on the original
    // when the wall clock's rotational position made the original nearer.
    assert!(counter(&s, "reads_redirected") + counter(&s, "reads_original_closer") >= 1.0);
    assert!(counter(&s, "invalidated_by_write") >= 1.0);
    assert!(counter(&s, "waited_for_log") >= 1.0);

    // Server 3: the recovered table does not send the block to its old replica.
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    read(&mut c, HOT);
    assert_eq!(read(&mut c, ORIG), new);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();
}

/// FS2 over 16 MiB of the Quantum Atlas 10K, 1 MiB regions and 20 ms epochs: the host's
/// part of the disk (fio's first 2 MiB) holds no free space, so every replica goes above
/// it, declared free (`neighbour_fraction = 1`: any region may take it).
const FIO_CONFIG: &str = r#"
[[device]]
name = "disk"
model = "quantum-atlas-10k"

[[function]]
kind = "fs2"
disk = "disk"
region_mb = 1
epoch_s = 0.02
free = [[2097152, 14680064]]
neighbour_fraction = 1.0
high_watermark = 0
low_watermark = 0
critical_watermark = 0
"#;

#[test]
fn fio_verifies_through_an_fs2_export_while_replication_runs() {
    if !have("fio") {
        return;
    }
    let d = TempDir::new("fs2-fio");
    let cfg = d.path("run.toml");
    std::fs::write(&cfg, FIO_CONFIG).unwrap();
    let disk = image(&d, "disk.img", 16 << 20, 7);
    let sock = d.path("s");
    let srv = serve(&cfg, &disk, &sock);
    // Copies run at a lower priority than the host's I/O (a disk fio keeps busy copies
    // nothing): fio pauses 20 ms every 16 I/Os.
    let paced = ["--thinktime=20000", "--thinktime_blocks=16"];
    // 1. Write every block, each read back 16 writes later: the reads make one region hot
    //    and the other's blocks candidates, copied above 2 MiB while fio goes on.
    let write = [&paced[..], &["--do_verify=1", "--verify_backlog=16"]].concat();
    let check = [&paced[..], &["--verify_only"]].concat();
    fio_verify(&sock, "disk", 1, "crc32c", &write);
    // 2. Read every block back and check it: from its replica when that is nearer.
    std::thread::sleep(Duration::from_millis(500));
    fio_verify(&sock, "disk", 1, "crc32c", &check);
    // 3. New contents everywhere, with the same read-back: every replica of step 1 is
    //    invalidated, new ones are made; then 4. every block checked again. Pattern
    //    blocks, compared whole: a stale replica holds a block of step 1 whose crc32c is
    //    valid, which only a comparison with the current contents tells apart.
    fio_verify(&sock, "disk", 2, "pattern", &write);
    std::thread::sleep(Duration::from_millis(500));
    fio_verify(&sock, "disk", 2, "pattern", &check);
    let s = srv.shutdown(Duration::from_secs(10)).unwrap();
    assert_eq!(s.stats.errors, 0);
    // Replication ran under fio, reads went to replicas, and rewrites invalidated them.
    let c = &s.function_counters;
    assert!(counter(&s, "replicas_created") >= 100.0, "{c:?}");
    assert!(counter(&s, "reads_redirected") >= 10.0, "{c:?}");
    assert!(counter(&s, "invalidated_by_write") >= 100.0, "{c:?}");
}

/// Bad sectors under a replica, then under its original, served live: each read is
/// answered with the block's data from the other copy (`retry_failed_reads`,
/// docs/functions/fs2.md "Read errors"). Server 1 (no faults) makes and logs the replica of
/// `ORIG` in region 1, as above. Server 2, with `ORIG`'s sectors bad (`fault.eio`, the
/// device emulation answers EIO there): 20 reads of `ORIG`, each right after a read of one
/// of the 16 blocks after it (the head beside the original, at a different angle each
/// time: which copy is nearer depends on the rotational position); those sent to the
/// original fail and are sent to the replica. Server 3, with the replica's sectors bad
/// instead: 20 reads of `ORIG`, each right after a read of one of region 1's 16 blocks
/// below the replica; the first sent to the replica fails, goes to the original, and the
/// replica is dropped.
#[test]
fn reads_are_answered_from_the_other_copy_when_sectors_go_bad() {
    let d = TempDir::new("fs2-bad-live");
    let cfg = d.path("run.toml");
    let disk = image(&d, "disk.img", 16 << 20, 54);
    let mut bytes = std::fs::read(&disk).unwrap();
    let n = bytes.len();
    bytes[n - (64 << 10)..].fill(0);
    std::fs::write(&disk, &bytes).unwrap();
    let orig0 = bytes[ORIG as usize * K..(ORIG as usize + 1) * K].to_vec();
    let sock = d.path("s");

    std::fs::write(&cfg, CONFIG).unwrap();
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    until_replica_logged(&mut c, &disk, n, &orig0);
    c.disconnect().unwrap();
    srv.shutdown(Duration::from_secs(5)).unwrap();

    let with_bad = |block: u64| {
        let fault = format!(
            "model = \"hp-c2247a\"\n[device.fault]\neio = [[{}, {}]]\n",
            block * K as u64,
            (block + 1) * K as u64
        );
        CONFIG.replacen("model = \"hp-c2247a\"\n", &fault, 1)
    };
    std::fs::write(&cfg, with_bad(ORIG)).unwrap();
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    for i in 0..20 {
        read(&mut c, ORIG + 1 + i % 16);
        assert_eq!(
            read(&mut c, ORIG),
            orig0,
            "the original is bad: the replica's bytes"
        );
    }
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(
        counter(&s, "recovered_replicas"),
        1.0,
        "{:?}",
        s.function_counters
    );
    let (errors, retried) = (
        counter(&s, "read_errors"),
        counter(&s, "reads_retried_at_replicas"),
    );
    assert!(
        errors >= 1.0 && retried == errors,
        "{:?}",
        s.function_counters
    );
    assert_eq!(counter(&s, "reads_recovered"), errors);

    std::fs::write(&cfg, with_bad(REPLICA as u64)).unwrap();
    let srv = serve(&cfg, &disk, &sock);
    let mut c = Client::connect(&uri(&sock, "disk")).unwrap();
    for i in 0..20 {
        // Blocks 256..272 of region 1, below the replica: the head at another angle each
        // time (the rotational position decides which copy is nearer).
        read(&mut c, 256 + i % 16);
        assert_eq!(
            read(&mut c, ORIG),
            orig0,
            "the replica is bad: the original's bytes"
        );
    }
    c.disconnect().unwrap();
    let s = srv.shutdown(Duration::from_secs(5)).unwrap();
    assert_eq!(
        counter(&s, "recovered_replicas"),
        1.0,
        "{:?}",
        s.function_counters
    );
    assert_eq!(counter(&s, "read_errors"), 1.0, "{:?}", s.function_counters);
    assert_eq!(counter(&s, "reads_retried_at_originals"), 1.0);
    assert_eq!(counter(&s, "replicas_dropped_read_error"), 1.0);
    assert_eq!(counter(&s, "reads_recovered"), 1.0);
}
