//! PARAID across crashes in the middle of propagation, through the simulator with the
//! integrity checker: the dirty list and the gear come back from the metadata log on disk 0
//! (`raid::paraid::persist`), so every FUA write reads back after each crash.
//!
//! RAID-0 gears {1,2} over two copies of the test disk (spin-up 2 s), 4 KiB chunks: host
//! chunk 2k+1 is chunk k of disk 1, whose replica is on disk 0.
//! 1. From the lowest gear, FUA writes of disk 1's chunks 0..8 go to the replica (replica-
//!    newer). The next sample (busy) shifts up; the copies back wait for disk 1's 2 s
//!    spin-up; the first crash comes at 1 s, before any is done.
//! 2. Recovered: gear 1 and 8 replica-newer chunks, read back (from the replica); their
//!    copies back (priority −1) trail reads of disk 0 that keep the array busy; FUA writes
//!    of chunks 8..16 go to disk 1 (original-newer). The second crash comes with
//!    propagation outstanding both ways, just after the first copy back is done (at
//!    1.554 s; the next would be at 1.584 s): that chunk is clean in memory, but its clean
//!    record waits for the next sample's flush round, so the log still says it is newer on
//!    the replica and it is copied again.
//! 3. Recovered in gear 1 with both kinds of dirty chunks; every chunk reads back its
//!    newest version; the downshift is made (its propagation first) and the chunks are
//!    read from the replica.

use crate::common;

use common::disk;
use wattio_core::io::{Op, Request};
use wattio_core::Nanos;

const K: u64 = 4096;
const CHUNKS: u64 = 8;
const FIRST_CRASH: Nanos = 1_000_000_000;
const SECOND_CRASH: Nanos = 1_570_000_000;

fn config() -> String {
    let mut c = String::from("[run]\nseed = 1\n");
    for d in ["d0", "d1"] {
        c += &disk().replace("name = \"disk\"", &format!("name = \"{d}\""));
    }
    c + r#"
[[function]]
kind = "paraid"
level = 0
devices = ["d0", "d1"]
gears = [1, 2]
chunk_kib = 4
sample_s = 0.1
window = 1
threshold = 0.05
rated_cycles = 1_000_000_000
start = "lowest"
copies = 1
"#
}

/// FUA writes of disk 1's chunks `chunks` from `t` s, `gap` s apart.
fn writes(chunks: std::ops::Range<u64>, t: f64, gap: f64) -> Vec<Request> {
    chunks
        .enumerate()
        .map(|(i, k)| {
            let at = ((t + i as f64 * gap) * 1e9) as Nanos;
            let mut r = Request::new(at, Op::Write, (2 * k + 1) * K, K as u32);
            r.fua = true;
            r
        })
        .collect()
}

/// Reads of disk 1's chunks `chunks` just after `t`.
fn reads(chunks: std::ops::Range<u64>, t: Nanos) -> Vec<Request> {
    chunks
        .map(|k| Request::new(t + 1 + k, Op::Read, (2 * k + 1) * K, K as u32))
        .collect()
}

fn scenario() -> (Vec<Request>, Vec<Nanos>) {
    let mut reqs = writes(0..CHUNKS, 0.0, 0.001);
    reqs.extend(reads(0..CHUNKS, FIRST_CRASH));
    // Host chunk 0 (disk 0) every 10 ms until the second writes: busy samples.
    reqs.extend((0..30).map(|i| Request::new(FIRST_CRASH + i * 10_000_000, Op::Read, 0, K as u32)));
    reqs.extend(writes(CHUNKS..2 * CHUNKS, 1.3, 0.002));
    reqs.extend(reads(0..2 * CHUNKS, SECOND_CRASH));
    // Late reads, in the low gear again.
    reqs.extend(reads(0..2 * CHUNKS, 3_000_000_000));
    reqs.sort_by_key(|r| r.arrival);
    (reqs, vec![FIRST_CRASH, SECOND_CRASH])
}

#[test]
fn crashes_during_propagation_lose_no_fua_write() {
    let (reqs, crashes) = scenario();
    let phases = common::run_with_crashes(&config(), K as u32, &reqs, &crashes).unwrap();
    let c = |p: usize, k: &str| phases[p][k];
    // Phase 1: the writes went to the replica, the array shifted up, nothing was copied.
    assert_eq!(c(0, "upshifts"), 1.0);
    assert_eq!(c(0, "propagation_copies"), 0.0);
    assert_eq!(c(0, "dirty_chunks"), CHUNKS as f64);
    // Phase 2 began with every chunk replica-newer, in gear 1, and was cut with chunks of
    // both kinds not yet propagated.
    assert_eq!(c(1, "recovered_dirty_chunks"), CHUNKS as f64);
    assert_eq!(c(1, "downshifts"), 0.0);
    let cut = c(1, "dirty_chunks");
    assert!(cut > CHUNKS as f64, "{:?}", phases[1]);
    assert_eq!(c(1, "propagation_copies"), 1.0);
    assert_eq!(c(1, "clean_rounds"), 0.0);
    assert_eq!(cut, 2.0 * CHUNKS as f64 - 1.0);
    // Phase 3 recovered them and the chunk copied whose clean record was not yet logged, in
    // gear 1, propagated and shifted down.
    assert_eq!(c(2, "recovered_dirty_chunks"), 2.0 * CHUNKS as f64);
    assert_eq!(c(2, "downshifts"), 1.0);
    assert_eq!(c(2, "gear"), 0.0);
}
