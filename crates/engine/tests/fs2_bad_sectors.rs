//! FS2's replicas as redundancy: sectors that go bad during the run (`fault.after_s`) under
//! the originals or under the replicas, read through the simulator with the integrity
//! checker (docs/functions/fs2.md, "Read errors"). The host must get every block's latest
//! version from the copy that is still good; with `retry_failed_reads = false` it gets the
//! errors.
//!
//! FS2 on an HP C2247 as in `fs2_crash.rs`: FUA writes give originals 128,000..128,016
//! (500 MiB in) their version; reads of region 1 make it the target, and reads of the
//! originals copy each into region 1's free blocks 272.. . At 3 s the sectors go bad.

use std::collections::BTreeMap;
use wattio_core::io::{Op, Request};
use wattio_core::Nanos;
use wattio_devices::Catalogue;
use wattio_engine::{Registry, RunConfig};

const K: u64 = 4096;
const MS: Nanos = 1_000_000;
const S: Nanos = 1_000_000_000;
const ORIG: u64 = 128_000;
const N: u64 = 16;
const HOT: u64 = 260;
/// The first free block of region 1 (the replicas go there, in order).
const FREE: u64 = 272;
const BAD_AT: Nanos = 3 * S;

fn config(bad: [u64; 2], retry: bool) -> String {
    format!(
        r#"[run]
seed = 1

[[device]]
name = "d0"
model = "hp-c2247a"
[device.fault]
eio = [[{}, {}]]
after_s = 3.0

[[function]]
kind = "fs2"
disk = "d0"
region_mb = 1
epoch_s = 0.1
free = [[1114112, 983040]]
high_watermark = 0
low_watermark = 0
critical_watermark = 0
copy_depth = 1
retry_failed_reads = {retry}
"#,
        bad[0] * K,
        bad[1] * K
    )
}

fn req(at: Nanos, op: Op, block: u64) -> Request {
    let mut r = Request::new(at, op, block * K, K as u32);
    r.fua = op == Op::Write;
    r
}

/// Writes, replication, then after `BAD_AT` each original read twice: once with the head
/// beside the originals (they are nearer: read there first), once with the head in region
/// 1 (the replicas are nearer: redirected).
fn requests() -> Vec<Request> {
    let mut reqs: Vec<Request> = (0..N).map(|i| req(i, Op::Write, ORIG + i)).collect();
    reqs.extend((0..58).map(|i| req(20 * MS + i * 50 * MS, Op::Read, HOT)));
    reqs.extend((0..N).map(|i| req(110 * MS + i * 150 * MS, Op::Read, ORIG + i)));
    let t = BAD_AT + 100 * MS;
    for i in 0..N {
        let at = t + i * 80 * MS;
        // A write beside the originals (not bad; a write is no candidate for a replica)
        // brings the head there, then the original.
        reqs.push(req(at, Op::Write, ORIG + 64));
        reqs.push(req(at + 20 * MS, Op::Read, ORIG + i));
        reqs.push(req(at + 40 * MS, Op::Read, HOT));
        reqs.push(req(at + 60 * MS, Op::Read, ORIG + i));
    }
    reqs.sort_by_key(|r| r.arrival);
    reqs
}

/// FS2's counters and the host's failed replies; an integrity fault is an error.
fn run(config: &str) -> Result<(BTreeMap<String, f64>, u64), String> {
    let cfg = RunConfig::from_toml("bad.toml", config)?;
    let cat = Catalogue::embedded()?;
    let mut checker = wattio_core::integrity::Checker::new(K as u32)?;
    let asm = wattio_engine::assemble(&cfg, &cat, None, &mut Registry::new(), 0)?;
    let o = wattio_engine::Simulator::new(asm.stack, asm.devices)
        .with_observer(&mut checker)
        .run(
            &mut wattio_core::trace::VecSource::new(requests()),
            None,
            0,
            &mut wattio_engine::NullSink,
        )?;
    let c = o.stack.layers()[0].counters().into_iter().collect();
    Ok((c, o.errors))
}

#[test]
fn reads_of_originals_gone_bad_are_answered_from_their_replicas() {
    let (c, errors) = run(&config([ORIG, ORIG + N], true)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c["replicas_created"], N as f64, "{c:?}");
    // Head beside the originals: each read fails there and is sent to its replica. Head in
    // region 1: redirected to the replica at once.
    assert_eq!(c["read_errors"], N as f64, "{c:?}");
    assert_eq!(c["reads_retried_at_replicas"], N as f64, "{c:?}");
    assert_eq!(c["reads_recovered"], N as f64, "{c:?}");
    assert_eq!(c["reads_redirected"], N as f64, "{c:?}");
    assert_eq!(
        errors, 0,
        "every read answered, with the version the checker expects"
    );

    let (c, errors) = run(&config([ORIG, ORIG + N], false)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (c["read_errors"], c["reads_recovered"]),
        (N as f64, 0.0),
        "{c:?}"
    );
    assert_eq!(
        errors, N,
        "without retries the host gets the originals' errors"
    );
}

#[test]
fn reads_of_replicas_gone_bad_are_answered_from_the_originals() {
    let (c, errors) = run(&config([FREE, FREE + N], true)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c["replicas_created"], N as f64, "{c:?}");
    // Head beside the originals: read there. Head in region 1: redirected to the replica,
    // which fails; the replica is dropped and the read sent to the original.
    assert_eq!(c["read_errors"], N as f64, "{c:?}");
    assert_eq!(c["reads_retried_at_originals"], N as f64, "{c:?}");
    assert_eq!(c["replicas_dropped_read_error"], N as f64, "{c:?}");
    assert_eq!(c["reads_recovered"], N as f64, "{c:?}");
    assert_eq!(errors, 0);

    let (c, errors) = run(&config([FREE, FREE + N], false)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (c["read_errors"], c["replicas_dropped_read_error"]),
        (N as f64, 0.0),
        "{c:?}"
    );
    assert_eq!(
        errors, N,
        "without retries a bad replica fails a read whose original is good"
    );
}
