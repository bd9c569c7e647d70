//! The PARAID layer driven by hand: where I/O goes in each gear, and what a gear cycle
//! propagates.

use super::layer::{regions, Paraid, Params, Side};
use super::policy::ShiftParams;
use crate::raid::stripe::{Level, Parity};
use wattio_core::function::{Action, Function};
use wattio_core::io::{Buf, Io, Op, Status};
use wattio_core::region::Region;
use wattio_core::scratch::ScratchLife;
use wattio_core::testing::{disk, replied, submitted, Harness};
use wattio_core::time::NS_PER_S;
use wattio_core::Request;

const K: u64 = 4096;
/// The test disks' capacity (1 GB) in 4 KiB chunks.
const CHUNKS: u64 = 1_000_000_000 / K;

fn params(level: Level, gears: &[usize], start_low: bool) -> Params {
    Params {
        level,
        parity: Parity::LeftSymmetric,
        chunk: K,
        gears: gears.to_vec(),
        shift: ShiftParams {
            sample: NS_PER_S,
            window: 1,
            threshold: 0.8,
            w: if level == Level::Raid5 { 1.5 } else { 1.0 },
        },
        rated: Some(20_000),
        life: 5 * 365 * 86_400 * NS_PER_S,
        period: 86_400 * NS_PER_S,
        start_low,
        full_sync: false,
        sync_writes_both: true,
        copies: 4,
        assume_clean: true,
        persist: false,
        merge: crate::raid::stripe::DEFAULT_MERGE_KIB * 1024,
        propagation_priority: super::layer::PROPAGATION_PRIORITY,
    }
}

fn array(p: Params) -> Harness<Paraid> {
    let n = *p.gears.last().unwrap();
    let names: Vec<String> = (0..n).map(|d| format!("d{d}")).collect();
    let devs = (0..n).map(|d| disk(d as u16, &format!("d{d}"))).collect();
    Harness::new(Paraid::new(names, p), devs).unwrap()
}

fn host(id: u64, op: Op, block: u64, blocks: u64) -> Io {
    Request::new(0, op, block * K, (blocks * K) as u32).io(id)
}

/// (device, byte offset, op, priority, fua) of submitted I/Os.
fn shape(actions: &[Action]) -> Vec<(u16, u64, Op, i8, bool)> {
    submitted(actions)
        .iter()
        .map(|io| (io.dev, io.offset, io.op, io.priority, io.fua))
        .collect()
}

fn powers(actions: &[Action]) -> Vec<(u16, u8)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::SetPower { device, state } => Some((device, state)),
            _ => None,
        })
        .collect()
}

/// Complete every I/O in `actions` (and those they cause) until none is left; the host
/// replies seen on the way.
fn settle(h: &mut Harness<Paraid>, now: u64, actions: Vec<Action>) -> Vec<Io> {
    let mut todo = submitted(&actions);
    let mut replies: Vec<Io> = replied(&actions).iter().map(|c| c.io).collect();
    while let Some(io) = todo.pop() {
        let next = h.complete(now, io, Status::Ok);
        todo.extend(submitted(&next));
        replies.extend(replied(&next).iter().map(|c| c.io));
    }
    replies
}

#[test]
fn regions_follow_eq1_in_whole_chunks() {
    // RAID-0 {2,5}: S = 3/5, 2/5 of 100 chunks: the original 40, the soft state 60 =
    // (5 − 2) disks · 40 chunks over 2 data disks.
    assert_eq!(regions(Level::Raid0, &[2, 5], 100), Some(vec![60, 40]));
    // RAID-5 {3,5}: 1/2, 1/2; {3,4,5}: 1/3, 1/6, 1/2 of 120 chunks.
    assert_eq!(regions(Level::Raid5, &[3, 5], 100), Some(vec![50, 50]));
    assert_eq!(
        regions(Level::Raid5, &[3, 4, 5], 120),
        Some(vec![40, 20, 60])
    );
    // Rounding: 101 chunks of RAID-5 {3,5}: 50.5 → 50 for the original, 50 soft.
    assert_eq!(regions(Level::Raid5, &[3, 5], 101), Some(vec![50, 50]));
    // 7 chunks of RAID-0 {2,5}: 2.8 → 2 (3 would need 3 + 9/2 → 5 = 8 > 7).
    assert_eq!(regions(Level::Raid0, &[2, 5], 7), Some(vec![3, 2]));
    assert_eq!(regions(Level::Raid0, &[2, 5], 1), None);
}

#[test]
fn a_low_gear_writes_a_spun_down_disks_blocks_into_its_replica() {
    // RAID-0 {2,5} over five disks of CHUNKS chunks: original 2/5, soft state 3/5.
    let top = regions(Level::Raid0, &[2, 5], CHUNKS).unwrap()[1];
    let mut h = array(params(Level::Raid0, &[2, 5], true));
    let start = h.start(0);
    // Disks 2, 3, 4 go to standby at once.
    let standby = h.state(2, "standby");
    assert_eq!(
        powers(&start),
        vec![(2, standby), (3, standby), (4, standby)]
    );
    // Host block 7: chunk 7 → stripe 1, member 2, member offset 1 chunk. Disk 2 is down:
    // its replica is volume byte (2 − 2)·top + 1 chunk of the soft RAID-0 over disks 0, 1
    // → chunk 1 → disk 1, stripe 0, at the soft region's base (top chunks).
    let a = h.request(10, host(1, Op::Write, 7, 1));
    assert_eq!(shape(&a), vec![(1, top * K, Op::Write, 0, false)]);
    assert_eq!(h.function().dirty()[&(2, 1)].side, Side::Replica);
    let r = settle(&mut h, 20, a);
    assert_eq!(r, vec![host(1, Op::Write, 7, 1)]);
    // Reads of it go there too; a read of block 0 goes to disk 0's original.
    let a = h.request(30, host(2, Op::Read, 7, 1));
    assert_eq!(shape(&a), vec![(1, top * K, Op::Read, 0, false)]);
    let a = h.request(30, host(3, Op::Read, 0, 1));
    assert_eq!(shape(&a), vec![(0, 0, Op::Read, 0, false)]);
    // Disk 4's chunk 0 (host block 4) → soft volume (4 − 2)·top → disk 0, stripe top.
    let a = h.request(30, host(4, Op::Read, 4, 1));
    assert_eq!(shape(&a), vec![(0, (top + top) * K, Op::Read, 0, false)]);
}

#[test]
fn propagation_goes_at_the_configured_priority() {
    // `propagation_priority` is checked (the host's 0 at most) and reaches the copies: the
    // upshift's copy-back of a dirty chunk goes at 0 here, where the default gives -1.
    let t = |extra: &str| -> toml::Table {
        format!("level = 0\ndevices = [\"a\", \"b\"]\ngears = [1, 2]\n{extra}")
            .parse()
            .unwrap()
    };
    let parse = |extra: &str| super::config::ParaidConfig::parse(&t(extra), "function.0");
    assert_eq!(parse("").unwrap().params.propagation_priority, -1);
    assert_eq!(
        parse("propagation_priority = -3")
            .unwrap()
            .params
            .propagation_priority,
        -3
    );
    let e = parse("propagation_priority = 1").unwrap_err();
    assert!(
        e.starts_with("function.0.propagation_priority: expected a whole number from -128 to 0"),
        "{e}"
    );
    let base = regions(Level::Raid0, &[1, 2], CHUNKS).unwrap()[1] * K;
    let mut h = array(Params {
        propagation_priority: 0,
        ..params(Level::Raid0, &[1, 2], true)
    });
    h.start(0);
    let held = h.request(0, host(2, Op::Read, 0, 1));
    let a = h.request(0, host(1, Op::Write, 1, 1));
    settle(&mut h, 1, a);
    let a = h.timer(NS_PER_S, 0);
    assert_eq!(h.function().gear(), 1);
    assert_eq!(shape(&a), vec![(0, base, Op::Read, 0, false)]);
    let w = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&w), vec![(1, 0, Op::Write, 0, true)]);
    settle(&mut h, NS_PER_S, held);
}

#[test]
fn a_gear_cycle_propagates_both_ways_and_spins_disks_down_only_when_clean() {
    // RAID-0 {1,2}: S = 1/2, 1/2. Disk 1's chunk c lives on disk 0 at base + c.
    let base = regions(Level::Raid0, &[1, 2], CHUNKS).unwrap()[1] * K;
    let mut h = array(params(Level::Raid0, &[1, 2], true));
    let (idle, standby) = (h.state(1, "idle"), h.state(1, "standby"));
    assert_eq!(powers(&h.start(0)), vec![(1, standby)]);
    // A request outstanding across the whole first second: utilization 1 > 0.8.
    let held = h.request(0, host(2, Op::Read, 0, 1));
    // Low gear: host block 1 (disk 1, chunk 0) written into the replica.
    let a = h.request(0, host(1, Op::Write, 1, 1));
    assert_eq!(shape(&a), vec![(0, base, Op::Write, 0, false)]);
    settle(&mut h, 1, a);
    // Upshift.
    let a = h.timer(NS_PER_S, 0);
    assert_eq!(h.function().gear(), 1);
    assert_eq!(powers(&a), vec![(1, idle)]);
    // The dirty chunk is copied back at priority −1: read the replica, then write the
    // disk (FUA). Until the copy is done it is served from the replica.
    assert_eq!(shape(&a), vec![(0, base, Op::Read, -1, false)]);
    let r = h.request(NS_PER_S, host(3, Op::Read, 1, 1));
    assert_eq!(shape(&r), vec![(0, base, Op::Read, 0, false)]);
    let w = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&w), vec![(1, 0, Op::Write, -1, true)]);
    // The copy is over: nothing more than its buffer's release.
    assert_eq!(
        h.complete(NS_PER_S, submitted(&w)[0], Status::Ok),
        vec![Action::Release {
            buf: submitted(&w)[0].buf
        }]
    );
    assert!(h.function().dirty().is_empty());
    settle(&mut h, NS_PER_S, held);
    settle(&mut h, NS_PER_S, r);
    // Clean: block 1 is read from disk 1 now; a write there makes the replica stale.
    let a = h.request(NS_PER_S + 1, host(4, Op::Read, 1, 1));
    assert_eq!(shape(&a), vec![(1, 0, Op::Read, 0, false)]);
    settle(&mut h, NS_PER_S + 1, a);
    let a = h.request(NS_PER_S + 2, host(5, Op::Write, 3, 1));
    assert_eq!(shape(&a), vec![(1, K, Op::Write, 0, false)]);
    assert_eq!(h.function().dirty()[&(1, 1)].side, Side::Original);
    settle(&mut h, NS_PER_S + 3, a);
    // An idle second: U′ = 0 → downshift, but first the stale replica is brought up to
    // date (read disk 1, write disk 0), then disk 1 is flushed, and only then spun down.
    let a = h.timer(2 * NS_PER_S, 0);
    assert_eq!(
        h.function().gear(),
        1,
        "still in the high gear while propagating"
    );
    assert_eq!(shape(&a), vec![(1, K, Op::Read, -1, false)]);
    // A host write to that chunk while the copy's read is out: the copy must not clear it.
    let hw = h.request(2 * NS_PER_S, host(6, Op::Write, 3, 1));
    assert_eq!(shape(&hw), vec![(1, K, Op::Write, 0, false)]);
    let w = h.complete(2 * NS_PER_S, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&w), vec![(0, base + K, Op::Write, -1, true)]);
    // The copy's write went to the replica level out of the copy's buffer: held while that
    // level serves it, unheld once it answered (after the copy released its buffer).
    let held: Vec<Io> = w
        .iter()
        .filter_map(|a| match a {
            Action::Hold(io) => Some(*io),
            _ => None,
        })
        .collect();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].buf, submitted(&w)[0].buf);
    assert_eq!(
        h.complete(2 * NS_PER_S, submitted(&w)[0], Status::Ok),
        vec![
            Action::Release {
                buf: submitted(&w)[0].buf
            },
            Action::Unhold(held[0])
        ]
    );
    assert_eq!(h.function().dirty()[&(1, 1)].side, Side::Original);
    // The host write lands: a second copy starts.
    let again = h.complete(2 * NS_PER_S, submitted(&hw)[0], Status::Ok);
    assert_eq!(replied(&again).len(), 1);
    assert_eq!(shape(&again), vec![(1, K, Op::Read, -1, false)]);
    let w = h.complete(2 * NS_PER_S, submitted(&again)[0], Status::Ok);
    let f = h.complete(2 * NS_PER_S, submitted(&w)[0], Status::Ok);
    assert_eq!(shape(&f), vec![(1, 0, Op::Flush, 0, false)]);
    assert_eq!(h.function().gear(), 1);
    let down = h.complete(2 * NS_PER_S, submitted(&f)[0], Status::Ok);
    assert_eq!(powers(&down), vec![(1, standby)]);
    assert_eq!(h.function().gear(), 0);
    assert!(h.function().dirty().is_empty());
    // Low gear again: block 3 is read from the replica.
    let a = h.request(3 * NS_PER_S, host(7, Op::Read, 3, 1));
    assert_eq!(shape(&a), vec![(0, base + K, Op::Read, 0, false)]);
    assert_eq!((h.counter("upshifts"), h.counter("downshifts")), (1.0, 1.0));
    assert_eq!(h.counter("propagation_copies"), 3.0);
}

#[test]
fn a_full_synchronization_upshift_serves_the_low_gear_until_the_arriving_disk_is_current() {
    // RAID-0 {1,2} as above, upshifting by full synchronization (the paper's prototype).
    let base = regions(Level::Raid0, &[1, 2], CHUNKS).unwrap()[1] * K;
    let mut p = params(Level::Raid0, &[1, 2], true);
    p.full_sync = true;
    let mut h = array(p);
    let idle = h.state(1, "idle");
    h.start(0);
    let held = h.request(0, host(1, Op::Read, 0, 1));
    // Disk 1's chunk 0 (host block 1) written into the replica in the low gear.
    let a = h.request(0, host(2, Op::Write, 1, 1));
    assert_eq!(shape(&a), vec![(0, base, Op::Write, 0, false)]);
    settle(&mut h, 1, a);
    // The upshift decision: disk 1 spins up and the copy back starts, but the gear stays.
    let a = h.timer(NS_PER_S, 0);
    assert_eq!(powers(&a), vec![(1, idle)]);
    assert_eq!(shape(&a), vec![(0, base, Op::Read, -1, false)]);
    assert_eq!(
        h.function().gear(),
        0,
        "served from the low gear while synchronizing"
    );
    // Meanwhile the host reads block 1 from the replica, and writes block 3 (disk 1, chunk
    // 1) into it: one more chunk to bring over.
    let r = h.request(NS_PER_S, host(3, Op::Read, 1, 1));
    assert_eq!(shape(&r), vec![(0, base, Op::Read, 0, false)]);
    let w = h.request(NS_PER_S, host(4, Op::Write, 3, 1));
    assert_eq!(shape(&w), vec![(0, base + K, Op::Write, 0, false)]);
    assert_eq!(h.function().dirty()[&(1, 1)].side, Side::Replica);
    // The first copy lands on disk 1 (FUA): still chunk 1 to go.
    let c = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, 0, Op::Write, -1, true)]);
    assert_eq!(
        h.complete(NS_PER_S, submitted(&c)[0], Status::Ok),
        vec![Action::Release {
            buf: submitted(&c)[0].buf
        }]
    );
    assert_eq!(h.function().gear(), 0);
    // The host write lands: its chunk is copied, and with it the gear switches.
    let c = h.complete(NS_PER_S, submitted(&w)[0], Status::Ok);
    assert_eq!(replied(&c).len(), 1);
    assert_eq!(shape(&c), vec![(0, base + K, Op::Read, -1, false)]);
    let c = h.complete(NS_PER_S + NS_PER_S / 2, submitted(&c)[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, K, Op::Write, -1, true)]);
    assert_eq!(
        h.complete(NS_PER_S + NS_PER_S / 2, submitted(&c)[0], Status::Ok),
        vec![Action::Release {
            buf: submitted(&c)[0].buf
        }]
    );
    assert_eq!(h.function().gear(), 1);
    assert!(h.function().dirty().is_empty());
    assert_eq!(h.counter("upshifts"), 1.0);
    assert_eq!(h.counter("upshift_sync_s"), 0.5);
    assert_eq!(h.counter("propagation_copies"), 2.0);
    // High gear: block 3 is read from disk 1.
    let a = h.request(2 * NS_PER_S, host(5, Op::Read, 3, 1));
    assert_eq!(shape(&a), vec![(1, K, Op::Read, 0, false)]);
    settle(&mut h, 2 * NS_PER_S, r);
    settle(&mut h, 2 * NS_PER_S, held);
}

/// A full-synchronization array of `level` over `gears` started in the lowest gear, at most
/// `copies` copies in flight, with the host extents `writes` (first block, blocks) written
/// through the replicas and a host read kept out, so that the first sample finds the array
/// busy and decides to shift up. Returns the harness, the read's actions, the replica
/// region's first byte on each disk, and the sample's actions (the first copies).
fn syncing(
    level: Level,
    gears: &[usize],
    copies: usize,
    writes: &[(u64, u64)],
) -> (Harness<Paraid>, Vec<Action>, u64, Vec<Action>) {
    let base = regions(level, gears, CHUNKS).unwrap()[1] * K;
    let mut p = params(level, gears, true);
    p.full_sync = true;
    p.copies = copies;
    let mut h = array(p);
    h.start(0);
    let held = h.request(0, host(100, Op::Read, 0, 1));
    for (i, &(block, blocks)) in writes.iter().enumerate() {
        let a = h.request(0, host(1 + i as u64, Op::Write, block, blocks));
        settle(&mut h, 1, a);
    }
    let first = h.timer(NS_PER_S, 0);
    (h, held, base, first)
}

/// In a full synchronization, a write to a clean chunk of the arriving disk, once that disk
/// is up, goes to both sides and leaves the chunk clean: nothing more to copy, so a
/// synchronization under a steady stream of writes ends (with the writes sent to the
/// replica only, each one adds a chunk to copy; PostMark's lowest-gear start waited 168 s
/// for an instant with none left).
#[test]
fn a_full_synchronization_sends_writes_to_both_sides_once_the_arriving_disk_is_up() {
    // RAID-0 {1,2}; disk 1's chunks 0 and 1 (host blocks 1 and 3) written into the replica.
    let (mut h, held, base, a) = syncing(Level::Raid0, &[1, 2], 1, &[(1, 1), (3, 1)]);
    assert_eq!(shape(&a), vec![(0, base, Op::Read, -1, false)]);
    // Before disk 1 has answered anything (it may still be spinning up), a write to its
    // clean chunk 2 (block 5) goes to the replica only: one more chunk to copy.
    let w = h.request(NS_PER_S, host(3, Op::Write, 5, 1));
    assert_eq!(shape(&w), vec![(0, base + 2 * K, Op::Write, 0, false)]);
    settle(&mut h, NS_PER_S, w);
    // The first copy lands on disk 1: it is up.
    let c = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, 0, Op::Write, -1, true)]);
    let c = h.complete(NS_PER_S, submitted(&c)[0], Status::Ok);
    let next = submitted(&c);
    assert_eq!(shape(&c), vec![(0, base + K, Op::Read, -1, false)]);
    // Now a write to clean chunk 3 (block 7) goes to the replica and, FUA, to disk 1.
    let w = h.request(NS_PER_S, host(4, Op::Write, 7, 1));
    assert_eq!(
        shape(&w),
        vec![
            (0, base + 3 * K, Op::Write, 0, false),
            (1, 3 * K, Op::Write, 0, true)
        ]
    );
    assert_eq!(h.function().dirty()[&(1, 3)].side, Side::Replica);
    assert_eq!(h.counter("sync_writes_both"), 1.0);
    // The disk's half first: the host waits for the replica's.
    let halves = submitted(&w);
    assert!(replied(&h.complete(NS_PER_S, halves[1], Status::Ok)).is_empty());
    let c = h.complete(NS_PER_S, halves[0], Status::Ok);
    assert_eq!(replied(&c).len(), 1);
    assert!(
        !h.function().dirty().contains_key(&(1, 3)),
        "equal on both sides"
    );
    assert_eq!(h.counter("sync_writes_clean"), 1.0);
    // A write to both sides of chunk 4 (block 9) still out when the last copies land: the
    // gear switches without copying it, and the chunk is read from the replica until the
    // write is back.
    let w = h.request(NS_PER_S, host(5, Op::Write, 9, 1));
    let halves = submitted(&w);
    assert_eq!(halves.len(), 2);
    let c = h.complete(NS_PER_S, next[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, K, Op::Write, -1, true)]);
    let c = h.complete(NS_PER_S, submitted(&c)[0], Status::Ok);
    // Chunk 2's copy (block 5, written before the disk was up).
    assert_eq!(shape(&c), vec![(0, base + 2 * K, Op::Read, -1, false)]);
    let c = h.complete(NS_PER_S, submitted(&c)[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, 2 * K, Op::Write, -1, true)]);
    let later = NS_PER_S + NS_PER_S / 4;
    h.complete(later, submitted(&c)[0], Status::Ok);
    assert_eq!(h.function().gear(), 1, "switched with the write still out");
    assert_eq!(h.counter("propagation_copies"), 3.0);
    assert_eq!(h.counter("upshift_sync_s"), 0.25);
    // The replica's half back, the disk's still out: the chunk is read from the replica.
    assert!(replied(&h.complete(later, halves[0], Status::Ok)).is_empty());
    let r = h.request(later, host(6, Op::Read, 9, 1));
    assert_eq!(shape(&r), vec![(0, base + 4 * K, Op::Read, 0, false)]);
    // (The replica half's number stays taken until the disk's half is back: this read,
    // sent down meanwhile, is not mistaken for it.)
    assert_eq!(settle(&mut h, later, r).len(), 1);
    // Both halves back: clean, read from disk 1, nothing left to copy.
    let c = h.complete(later, halves[1], Status::Ok);
    assert_eq!(replied(&c).len(), 1);
    assert!(shape(&c).is_empty(), "no copy: {:?}", shape(&c));
    assert!(h.function().dirty().is_empty());
    let r = h.request(later, host(7, Op::Read, 9, 1));
    assert_eq!(shape(&r), vec![(1, 4 * K, Op::Read, 0, false)]);
    settle(&mut h, later, r);
    assert_eq!(h.counter("sync_writes_clean"), 2.0);
    settle(&mut h, later, held);
}

/// A second write to a chunk whose write to both sides is still out goes to the replica
/// only, and the chunk is copied: the halves of two writes could land in different orders
/// on the two sides. A half that fails leaves the chunk to be copied too.
#[test]
fn a_write_to_both_sides_that_is_overtaken_or_fails_leaves_its_chunk_to_copy() {
    let (mut h, held, base, a) = syncing(Level::Raid0, &[1, 2], 1, &[(1, 1), (3, 1)]);
    let c = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    let c = h.complete(NS_PER_S, submitted(&c)[0], Status::Ok);
    let copy = submitted(&c)[0];
    // Chunk 3 (block 7): a write to both sides, then a second one, to the replica only.
    let w1 = h.request(NS_PER_S, host(3, Op::Write, 7, 1));
    assert_eq!(submitted(&w1).len(), 2);
    let w2 = h.request(NS_PER_S, host(4, Op::Write, 7, 1));
    assert_eq!(shape(&w2), vec![(0, base + 3 * K, Op::Write, 0, false)]);
    // Chunk 5 (block 11): a write to both sides whose disk half fails.
    let w3 = h.request(NS_PER_S, host(5, Op::Write, 11, 1));
    let halves = submitted(&w3);
    assert_eq!(halves.len(), 2);
    h.complete(NS_PER_S, halves[1], Status::IoError);
    let c = h.complete(NS_PER_S, halves[0], Status::Ok);
    assert_eq!(
        replied(&c).iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![Status::Ok],
        "the replica holds the write"
    );
    for io in submitted(&w1).into_iter().chain(submitted(&w2)) {
        h.complete(NS_PER_S, io, Status::Ok);
    }
    let dirty = h.function().dirty();
    assert_eq!(dirty[&(1, 3)].side, Side::Replica);
    assert_eq!(dirty[&(1, 5)].side, Side::Replica);
    assert_eq!(h.counter("sync_writes_both"), 2.0);
    assert_eq!(h.counter("sync_writes_clean"), 0.0);
    // The copies bring both back before the switch.
    let mut todo = vec![copy];
    let mut copied = vec![];
    while let Some(io) = todo.pop() {
        let c = h.complete(NS_PER_S, io, Status::Ok);
        for io in submitted(&c) {
            if io.op == Op::Write {
                copied.push(io.offset / K);
            }
            todo.push(io);
        }
    }
    copied.sort();
    assert_eq!(copied, vec![1, 3, 5]);
    assert_eq!(h.function().gear(), 1);
    assert!(h.function().dirty().is_empty());
    settle(&mut h, NS_PER_S, held);
}

/// A write to both sides out of a gear's scratch buffer (a RAID-5 parity chunk of the
/// arriving disk): the disk's half goes out of a copy of the bytes in a buffer of its own.
/// The kernel frees a scratch buffer when the last write out of it is back, and the
/// replica's RAID reads the parity's buffer for its own parity after reading its row: with
/// both halves out of one buffer, the disk's half landing first freed it (swarm seed 405:
/// the soft RAID's xor found it gone), and with the disk's half sent after the replica's,
/// that half went out of a buffer already freed (seed 1892: garbage on the disk).
#[test]
fn a_parity_write_to_both_sides_sends_the_disks_half_out_of_its_own_copy() {
    // RAID-5 {3,4}, left-symmetric: stripe s has its parity on disk 3 − (s mod 4). Two
    // chunks of disk 3 written through the soft RAID: stripe 0's parity, and host chunk 3
    // (stripe 1's first data chunk, after its parity on disk 2).
    let (mut h, held, base, a) = syncing(Level::Raid5, &[3, 4], 1, &[(0, 3), (3, 1)]);
    assert_eq!(h.function().dirty().len(), 2);
    // The upshift: chunk (3, 0)'s copy lands on disk 3, which is then up; (3, 1)'s stays out.
    let mut copy_out = std::collections::VecDeque::from(submitted(&a));
    while h.counter("propagation_copies") < 1.0 {
        let io = copy_out.pop_front().expect("the first copy's I/O");
        let c = h.complete(NS_PER_S, io, Status::Ok);
        copy_out.extend(submitted(&c));
    }
    assert!(!copy_out.is_empty(), "the second copy is out");
    assert_eq!(h.function().gear(), 0);
    // A full row of stripe 4 (host chunks 12–14): its parity, in the top RAID's scratch
    // buffer, is chunk 4 of disk 3, clean: written to both sides, the disk's half (FUA) out
    // of a copy of the parity.
    let w = h.request(NS_PER_S, host(3, Op::Write, 12, 3));
    let copies: Vec<(Buf, Buf, u32)> = w
        .iter()
        .filter_map(|a| match *a {
            Action::Copy { dst, src, len } => Some((dst, src, len)),
            _ => None,
        })
        .collect();
    assert_eq!(copies.len(), 1, "{w:?}");
    let (own, parity, len) = copies[0];
    assert_eq!(len as u64, K);
    assert!(matches!(parity, Buf::Scratch { .. }) && matches!(own, Buf::Scratch { .. }));
    assert_ne!(own, parity);
    assert!(
        submitted(&w)
            .iter()
            .any(|io| io.dev < 3 && io.offset >= base),
        "the replica's half goes into the soft RAID: {:?}",
        shape(&w)
    );
    let disk: Vec<_> = submitted(&w).into_iter().filter(|io| io.dev == 3).collect();
    assert_eq!(
        disk.iter()
            .map(|io| (io.offset, io.op, io.fua, io.buf))
            .collect::<Vec<_>>(),
        vec![(4 * K, Op::Write, true, own)]
    );
    let replies = settle(&mut h, NS_PER_S, w);
    assert_eq!(replies, vec![host(3, Op::Write, 12, 3)]);
    assert_eq!(h.counter("sync_writes_both"), 1.0);
    assert_eq!(h.counter("sync_writes_clean"), 1.0);
    assert!(!h.function().dirty().contains_key(&(3, 4)));
    for io in copy_out {
        let c = h.complete(NS_PER_S, io, Status::Ok);
        settle(&mut h, NS_PER_S, c);
    }
    assert_eq!(h.function().gear(), 1);
    settle(&mut h, NS_PER_S, held);
}

/// A full synchronization whose copy fails does not wait for it: the chunk stays
/// replica-newer (served from the replica) and is re-tried at the next sample, in the high
/// gear. Before, the upshift waited for the copy, re-tried at every sample, for as long as
/// the error lasted (swarm seed 142,535: a medium error on the arriving disk, for ever).
#[test]
fn a_full_synchronization_whose_copy_fails_switches_and_leaves_the_chunk_on_the_replica() {
    // RAID-0 {1,2} as above, upshifting by full synchronization.
    let base = regions(Level::Raid0, &[1, 2], CHUNKS).unwrap()[1] * K;
    let mut p = params(Level::Raid0, &[1, 2], true);
    p.full_sync = true;
    let mut h = array(p);
    h.start(0);
    let held = h.request(0, host(1, Op::Read, 0, 1));
    let a = h.request(0, host(2, Op::Write, 1, 1));
    settle(&mut h, 1, a);
    let a = h.timer(NS_PER_S, 0);
    assert_eq!(shape(&a), vec![(0, base, Op::Read, -1, false)]);
    let c = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, 0, Op::Write, -1, true)]);
    // The copy's write to the arriving disk fails: nothing else is left to copy.
    let later = NS_PER_S + NS_PER_S / 2;
    let c = h.complete(later, submitted(&c)[0], Status::IoError);
    assert!(shape(&c).is_empty(), "not re-tried before the next sample");
    assert_eq!(h.function().gear(), 1, "switched without the chunk");
    assert_eq!(h.counter("upshifts"), 1.0);
    assert_eq!(h.counter("upshift_sync_s"), 0.5);
    assert_eq!(h.counter("upshift_sync_left_failed"), 1.0);
    assert_eq!(h.counter("propagation_errors"), 1.0);
    assert_eq!(h.function().dirty()[&(1, 0)].side, Side::Replica);
    // High gear: block 1 is still read from the replica, not from disk 1.
    let r = h.request(later, host(3, Op::Read, 1, 1));
    assert_eq!(shape(&r), vec![(0, base, Op::Read, 0, false)]);
    // The next sample re-tries the copy.
    let t = h.timer(2 * NS_PER_S, 0);
    assert_eq!(shape(&t), vec![(0, base, Op::Read, -1, false)]);
    let c = h.complete(2 * NS_PER_S, submitted(&t)[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, 0, Op::Write, -1, true)]);
    h.complete(2 * NS_PER_S, submitted(&c)[0], Status::Ok);
    assert!(h.function().dirty().is_empty());
    assert_eq!(h.counter("propagation_copies"), 1.0);
    settle(&mut h, 2 * NS_PER_S, r);
    settle(&mut h, 2 * NS_PER_S, held);
}

/// A full synchronization whose failed copies are slower than a sample still ends: a chunk
/// whose copy failed is re-tried only after the switch. Re-tried at every sample, as before,
/// a copy was always in flight when copies took longer than a sample (its source read on
/// a slow disk), so the switch, which waits for none to be out, never came: the array
/// stayed in the low gear, deaf to the policy, re-copying to an absent member for ever
/// (swarm seed 702,825; EXCES above it waited for ever for a move's read that the copies'
/// reads kept behind them on the disk's SSTF queue, and never answered a FUA write).
#[test]
fn a_full_synchronization_whose_failed_copies_outlast_a_sample_still_switches() {
    // RAID-0 {1,2}; disk 1's chunks 0 and 1 (host blocks 1 and 3) written into the replica,
    // both copied at once.
    let (mut h, held, base, a) = syncing(Level::Raid0, &[1, 2], 2, &[(1, 1), (3, 1)]);
    let reads = submitted(&a);
    assert_eq!(
        shape(&a),
        vec![
            (0, base, Op::Read, -1, false),
            (0, base + K, Op::Read, -1, false)
        ]
    );
    // Chunk 0's copy fails on disk 1 (absent: every I/O an error at once).
    let c = h.complete(NS_PER_S, reads[0], Status::Ok);
    assert_eq!(shape(&c), vec![(1, 0, Op::Write, -1, true)]);
    h.complete(NS_PER_S, submitted(&c)[0], Status::IoError);
    // A sample while chunk 1's read is still out: chunk 0 is not copied again yet.
    let t = h.timer(2 * NS_PER_S, 0);
    assert!(
        shape(&t).is_empty(),
        "re-tried during the synchronization: {:?}",
        shape(&t)
    );
    // Chunk 1's copy fails too: nothing is out, and only failed chunks are left.
    let later = 2 * NS_PER_S + NS_PER_S / 2;
    let c = h.complete(later, reads[1], Status::Ok);
    assert_eq!(shape(&c), vec![(1, K, Op::Write, -1, true)]);
    h.complete(later, submitted(&c)[0], Status::IoError);
    assert_eq!(h.function().gear(), 1, "switched without the failed chunks");
    assert_eq!(h.counter("upshift_sync_left_failed"), 2.0);
    // In the high gear the next sample re-tries both, as on demand.
    let t = h.timer(3 * NS_PER_S, 0);
    assert_eq!(
        shape(&t),
        vec![
            (0, base, Op::Read, -1, false),
            (0, base + K, Op::Read, -1, false)
        ]
    );
    settle(&mut h, 3 * NS_PER_S, t);
    assert!(h.function().dirty().is_empty());
    settle(&mut h, 3 * NS_PER_S, held);
}

/// A chunk whose copy keeps failing is re-tried ever more rarely: after n failures in a row,
/// 2^(n−1) samples later (1, 2, 4, …). Each try reads the source; re-tried at every sample,
/// the copies to an absent member of a few chunks on a slow disk kept it busy for ever and
/// starved the write-back an EXCES above it queued there (swarm seed 702,825).
#[test]
fn a_copy_that_keeps_failing_is_retried_ever_more_rarely() {
    // RAID-0 {1,2}; disk 1's chunk 0 (host block 1) written into the replica; the
    // synchronization's copy fails on disk 1 and the gear switches without it.
    let (mut h, held, base, a) = syncing(Level::Raid0, &[1, 2], 4, &[(1, 1)]);
    let c = h.complete(NS_PER_S, submitted(&a)[0], Status::Ok);
    h.complete(NS_PER_S, submitted(&c)[0], Status::IoError);
    assert_eq!(h.function().gear(), 1);
    // Failed once: re-tried at the next sample (2); twice: two samples on (4); three
    // times: four on (8), where it succeeds.
    for sample in 2..=8 {
        let now = sample * NS_PER_S;
        let t = h.timer(now, 0);
        if ![2, 4, 8].contains(&sample) {
            assert!(shape(&t).is_empty(), "sample {sample}: {:?}", shape(&t));
            continue;
        }
        assert_eq!(
            shape(&t),
            vec![(0, base, Op::Read, -1, false)],
            "sample {sample}"
        );
        let c = h.complete(now, submitted(&t)[0], Status::Ok);
        assert_eq!(shape(&c), vec![(1, 0, Op::Write, -1, true)]);
        let ok = if sample == 8 {
            Status::Ok
        } else {
            Status::IoError
        };
        h.complete(now, submitted(&c)[0], ok);
    }
    assert!(h.function().dirty().is_empty());
    assert_eq!(h.counter("propagation_errors"), 3.0);
    assert_eq!(h.counter("propagation_copies"), 1.0);
    settle(&mut h, 8 * NS_PER_S, held);
}

/// A downshift whose leaving disk holds a chunk that cannot be copied to its replica is
/// abandoned; decided again while that copy waits for its next try, it is abandoned at once,
/// without a read of the chunk.
#[test]
fn a_downshift_whose_copy_keeps_failing_tries_it_ever_more_rarely() {
    // RAID-0 {1,2} in the high gear; host block 1 (disk 1, chunk 0) written on disk 1:
    // its replica is stale.
    let mut h = array(params(Level::Raid0, &[1, 2], false));
    h.start(0);
    let a = h.request(0, host(1, Op::Write, 1, 1));
    assert_eq!(shape(&a), vec![(1, 0, Op::Write, 0, false)]);
    settle(&mut h, 1, a);
    assert_eq!(h.function().dirty()[&(1, 0)].side, Side::Original);
    // Idle samples: each decides to shift down. The copy reads disk 1, which fails it
    // (samples 1, 2 and 4: failed once, re-tried at the next sample; twice, two samples
    // on); at sample 3 the downshift is abandoned without a read.
    for sample in 1..=4 {
        let now = sample * NS_PER_S;
        let t = h.timer(now, 0);
        if sample == 3 {
            assert!(shape(&t).is_empty(), "sample 3: {:?}", shape(&t));
        } else {
            assert_eq!(
                shape(&t),
                vec![(1, 0, Op::Read, -1, false)],
                "sample {sample}"
            );
            h.complete(now, submitted(&t)[0], Status::IoError);
        }
        assert_eq!(h.counter("downshifts_abandoned"), sample as f64);
        assert_eq!(h.function().gear(), 1);
    }
    assert_eq!(h.counter("propagation_errors"), 3.0);
}

#[test]
fn raid5_replicas_are_a_raid5_of_the_lower_gear_with_their_own_parity() {
    // RAID-5 {3,4}, left-symmetric: S = 2/3, 1/3 → the soft RAID-5 over disks 0–2 holds
    // disk 3 whole. Host chunk 0: stripe 0, parity on disk 3, data chunk 0 on disk 0.
    let top = regions(Level::Raid5, &[3, 4], CHUNKS).unwrap()[1];
    let mut h = array(params(Level::Raid5, &[3, 4], true));
    h.start(0);
    // A full-row write of stripe 0 (host chunks 0, 1, 2): data on disks 0, 1, 2 and the
    // parity chunk of disk 3 (member offset 0) goes into the soft RAID-5 as its volume
    // chunk 0: soft stripe 0, parity on disk 2 (left-symmetric over 3), data chunk 0 on
    // disk 0 — a reconstruct-write there (it reads one page, disk 1's, where a
    // read-modify-write would read two).
    let a = h.request(0, host(1, Op::Write, 0, 3));
    let s = shape(&a);
    assert_eq!(
        s,
        vec![
            (0, 0, Op::Write, 0, false),
            (1, 0, Op::Write, 0, false),
            (2, 0, Op::Write, 0, false),
            (1, top * K, Op::Read, 0, false),
        ]
    );
    // The other data page back: the soft row's data and parity are written.
    let w = h.complete(1, submitted(&a)[3], Status::Ok);
    assert_eq!(
        shape(&w),
        vec![
            (0, top * K, Op::Write, 0, false),
            (2, top * K, Op::Write, 0, false)
        ]
    );
    // The soft parity is the new page (the top row's parity, in the top RAID's scratch
    // buffer) ^ disk 1's page.
    let xors: Vec<(Buf, Buf)> = w
        .iter()
        .filter_map(|a| match *a {
            Action::Xor { dst, src, .. } => Some((dst, src)),
            _ => None,
        })
        .collect();
    assert_eq!(xors.len(), 2);
    assert_eq!(h.function().dirty()[&(3, 0)].side, Side::Replica);
    let mut replies = settle(&mut h, 2, w);
    for io in submitted(&a)[..3].iter() {
        replies.extend(
            replied(&h.complete(2, *io, Status::Ok))
                .iter()
                .map(|c| c.io),
        );
    }
    assert_eq!(replies, vec![host(1, Op::Write, 0, 3)]);
}

/// PARAID with its dirty list persisted, and its log's region (in disk 0's last blocks).
fn persisted(level: Level, gears: &[usize], start_low: bool) -> (Harness<Paraid>, Region) {
    let mut p = params(level, gears, start_low);
    p.persist = true;
    let h = array(p);
    let region = h.function().regions()[0];
    (h, region)
}

#[test]
fn a_log_region_holding_other_bytes_stops_the_array_with_errors_not_a_hang() {
    let (mut h, _) = persisted(Level::Raid0, &[1, 2], true);
    let early = host(1, Op::Write, 1, 1);
    assert!(submitted(&h.request(0, early)).is_empty());
    h.assert_foreign_log_refused(early, host(2, Op::Read, 0, 1));
}

#[test]
fn a_write_that_makes_a_chunk_newer_waits_for_its_durable_record() {
    // RAID-0 {1,2} from the lowest gear, persisted: the log is in disk 0's last blocks.
    let (mut h, region) = persisted(Level::Raid0, &[1, 2], true);
    assert_eq!(
        (region.dev, region.offset + region.len),
        (0, 1_000_000_000 / K * K)
    );
    // A host write before the log is recovered waits.
    let early = h.request(0, host(1, Op::Write, 1, 1));
    assert!(submitted(&early).is_empty());
    let acts = h.recover_log(&vec![0; region.len as usize]);
    // Recovered (a blank region: a new log): disk 1 is spun down, and the early write's
    // dirty record (disk 1, chunk 0, replica newer) goes to the log, FUA, in the region —
    // and nothing else: the data write waits for it.
    assert_eq!(powers(&acts), vec![(1, h.state(1, "standby"))]);
    let log = submitted(&acts);
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(log[0].dev == 0 && log[0].fua && log[0].offset >= region.offset);
    assert_eq!(h.function().dirty()[&(1, 0)].side, Side::Replica);
    // The record is durable: the write goes to the replica (disk 0, disk 1's soft region;
    // the disks' chunks end where the log begins).
    let base = regions(Level::Raid0, &[1, 2], region.offset / K).unwrap()[1] * K;
    let a = h.complete(1, log[0], Status::Ok);
    assert_eq!(shape(&a), vec![(0, base, Op::Write, 0, false)]);
    // A second write to the same chunk needs no record.
    let b = h.request(2, host(2, Op::Write, 1, 1));
    assert_eq!(shape(&b), vec![(0, base, Op::Write, 0, false)]);
    assert_eq!(h.counter("writes_held_for_dirty_record"), 1.0);
}

#[test]
fn a_host_write_that_made_a_gear_page_bad_is_answered_once_the_page_is_logged() {
    // RAID-5 {3,4} in its highest gear (every disk on), persisted.
    let (mut h, region) = persisted(Level::Raid5, &[3, 4], false);
    h.recover_log(&vec![0; region.len as usize]);
    let is_log = |io: &Io| io.dev == region.dev && io.offset >= region.offset;
    // One page of chunk 0 (a known row: assume_clean). Member I/Os complete as they come,
    // the first member write failing (that gear's page is bad); log writes complete only
    // when nothing else is left.
    let io = host(1, Op::Write, 0, 1);
    let mut out = submitted(&h.request(0, io));
    let mut logs = Vec::new();
    let mut replies = Vec::new();
    let mut failed = false;
    let mut logged_before_reply = 0;
    while replies.is_empty() {
        let Some(m) = out.pop() else {
            // Only log writes are left: the reply waits for them.
            let l = logs.pop().expect("a log write is out");
            logged_before_reply += 1;
            let a = h.complete(2, l, Status::Ok);
            replies.extend(replied(&a));
            out.extend(submitted(&a));
            continue;
        };
        if is_log(&m) {
            logs.push(m);
            continue;
        }
        let status = if m.op == Op::Write && !failed {
            failed = true;
            Status::IoError
        } else {
            Status::Ok
        };
        let a = h.complete(1, m, status);
        replies.extend(replied(&a));
        out.extend(submitted(&a));
    }
    assert!(failed && logged_before_reply >= 1);
    assert_eq!(
        (replies.len(), replies[0].io, replies[0].status),
        (1, io, Status::Ok)
    );
    assert_eq!(h.counter("replies_held_for_bad_page"), 1.0);
}

#[test]
fn a_copied_chunk_is_logged_clean_only_once_the_disks_are_flushed() {
    // RAID-0 {1,2} from the lowest gear, persisted. Block 1 (disk 1, chunk 0) is written
    // into the replica (disk 0, not FUA: it may sit in disk 0's cache), the array shifts
    // up, and the chunk is copied back to disk 1 (FUA). A crash now could still lose the
    // replica's copy from disk 0's cache, and the two would differ under a clean record
    // (swarm seed 410,285): the disks that are on are flushed before it is logged. Cases:
    // the round succeeds; a host write makes the chunk newer again while the round is out
    // (its `Newer` record is the last word: no clean record after it); a flush fails (the
    // chunk is dirty again, copied at the next sample).
    for case in ["flushed", "written meanwhile", "flush fails"] {
        let (mut h, region) = persisted(Level::Raid0, &[1, 2], true);
        h.recover_log(&vec![0; region.len as usize]);
        let base = regions(Level::Raid0, &[1, 2], region.offset / K).unwrap()[1] * K;
        let held = h.request(0, host(2, Op::Read, 0, 1));
        let a = h.request(0, host(1, Op::Write, 1, 1));
        settle(&mut h, 1, a);
        let is_log = |io: &Io| io.dev == 0 && io.offset >= region.offset;
        let logged = |acts: &[Action]| submitted(acts).iter().filter(|io| is_log(io)).count();
        let up = h.timer(NS_PER_S, 0);
        let data: Vec<Io> = submitted(&up)
            .into_iter()
            .filter(|io| !is_log(io))
            .collect();
        assert_eq!(shape(&up)[1..], [(0, base, Op::Read, -1, false)]);
        settle(&mut h, NS_PER_S, vec![Action::Submit(submitted(&up)[0])]);
        let w = h.complete(NS_PER_S, data[0], Status::Ok);
        assert_eq!(shape(&w), vec![(1, 0, Op::Write, -1, true)]);
        // The copy is done: the gear switches (its record went to the log at the upshift),
        // and nothing is logged or flushed yet: the round goes at the next sample.
        let f = h.complete(NS_PER_S, submitted(&w)[0], Status::Ok);
        assert!(submitted(&f).is_empty(), "{f:?}");
        assert_eq!(h.function().gear(), 1);
        assert!(h.function().dirty().is_empty(), "clean in memory");
        let t = 2 * NS_PER_S;
        let r = h.timer(t, 0);
        let flushes: Vec<Io> = submitted(&r)
            .into_iter()
            .filter(|io| io.op == Op::Flush)
            .collect();
        assert_eq!(
            flushes.iter().map(|io| io.dev).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(logged(&r), 0, "{r:?}");
        settle(
            &mut h,
            t,
            r.into_iter()
                .filter(|a| !matches!(a, Action::Submit(io) if io.op == Op::Flush))
                .collect(),
        );
        if case == "written meanwhile" {
            // To disk 1 now (the gear is up): logged newer on the original first.
            let b = h.request(t, host(3, Op::Write, 1, 1));
            assert_eq!(logged(&b), 1);
            settle(&mut h, t, b);
            assert_eq!(h.function().dirty()[&(1, 0)].side, Side::Original);
        }
        let first = h.complete(t, flushes[0], Status::Ok);
        assert!(submitted(&first).is_empty(), "{first:?}");
        let status = if case == "flush fails" {
            Status::IoError
        } else {
            Status::Ok
        };
        let last = h.complete(t, flushes[1], status);
        match case {
            "flushed" => {
                assert_eq!(shape(&last).len(), 1, "{last:?}");
                assert_eq!(logged(&last), 1, "the clean record");
                assert!(submitted(&last)[0].fua);
                assert!(h.function().dirty().is_empty());
            }
            "written meanwhile" => {
                assert!(submitted(&last).is_empty(), "{last:?}");
                assert_eq!(h.function().dirty()[&(1, 0)].side, Side::Original);
            }
            _ => {
                assert!(submitted(&last).is_empty(), "{last:?}");
                assert_eq!(h.function().dirty()[&(1, 0)].side, Side::Replica);
                assert_eq!(h.counter("clean_round_errors"), 1.0);
                // Copied again at the next sample.
                let again = h.timer(3 * NS_PER_S, 0);
                assert!(
                    shape(&again).contains(&(0, base, Op::Read, -1, false)),
                    "{again:?}"
                );
            }
        }
        settle(&mut h, NS_PER_S, held);
    }
}

/// The kernel's scratch-buffer rule (`wattio_core::scratch`) kept over what the layer asks
/// for, in order (device I/O out and back, holds and unholds, releases, buffers filled),
/// and the device I/O out.
#[derive(Default)]
struct Life {
    life: ScratchLife,
    out: Vec<Io>,
}

impl Life {
    fn acts(&mut self, actions: &[Action]) {
        for a in actions {
            match a {
                Action::Submit(io) => {
                    self.life.out(io);
                    self.out.push(*io);
                }
                Action::Hold(io) => self.life.out(io),
                Action::Unhold(io) => {
                    self.life.back(io);
                }
                &Action::Release { buf } => {
                    self.life.release(buf);
                }
                &Action::Xor { dst, len, .. } | &Action::Copy { dst, len, .. } => {
                    self.life.open(dst, len)
                }
                _ => {}
            }
        }
    }

    /// The device I/O out to `dev` at `offset`.
    fn find(&self, dev: u16, offset: u64) -> Io {
        *self
            .out
            .iter()
            .find(|io| io.dev == dev && io.offset == offset)
            .unwrap_or_else(|| panic!("no I/O out to d{dev} at {offset}: {:?}", self.out))
    }

    /// Device I/O `io` is back (the buffer's count first, as the kernel does).
    fn complete(&mut self, h: &mut Harness<Paraid>, io: Io, status: Status) -> Vec<Action> {
        self.out.retain(|o| o.id != io.id);
        self.life.back(&io);
        let a = h.complete(1, io, status);
        self.acts(&a);
        a
    }

    /// Complete every device I/O out (and those they cause) OK.
    fn settle(&mut self, h: &mut Harness<Paraid>) {
        while let Some(&io) = self.out.first() {
            self.complete(h, io, Status::Ok);
        }
    }
}

#[test]
fn a_parity_write_a_replica_level_refuses_at_once_frees_the_rows_buffer() {
    // RAID-5 {3,4}, low gear: disk 3 is off, held whole by the soft RAID-5 over disks 0–2
    // (its byte x at that volume's x: soft stripe 0 holds disk 3's chunks 0 and 1 on disks
    // 0 and 1, its parity on disk 2).
    let top = regions(Level::Raid5, &[3, 4], CHUNKS).unwrap()[1];
    let soft = top * K;
    let mut h = array(params(Level::Raid5, &[3, 4], true));
    let mut life = Life::default();
    life.acts(&h.start(0));
    // Host block 3 (top stripe 1, data on disk 3's chunk 1): a read-modify-write whose old
    // data is read in the soft RAID, on disk 1. That read fails, and so does the rebuild's
    // (which reads the page again first, then the soft parity on disk 2): disks 1 and 2
    // are bad in soft row 0.
    let a = h.request(0, host(1, Op::Write, 3, 1));
    life.acts(&a);
    assert_eq!(
        shape(&a),
        vec![(1, soft, Op::Read, 0, false), (2, K, Op::Read, 0, false)]
    );
    life.complete(&mut h, life.find(1, soft), Status::IoError);
    life.complete(&mut h, life.find(1, soft), Status::IoError);
    life.complete(&mut h, life.find(2, soft), Status::IoError);
    life.settle(&mut h);
    assert!(life.life.is_empty(), "{:?}", life.life);
    // Host block 0 (top stripe 0: data on disk 0, parity on disk 3's chunk 0): a
    // read-modify-write reading the old parity in the soft RAID (its page on disk 0 is
    // good: read directly).
    let a = h.request(2, host(2, Op::Write, 0, 1));
    life.acts(&a);
    assert_eq!(
        shape(&a),
        vec![(0, 0, Op::Read, 0, false), (0, soft, Op::Read, 0, false)]
    );
    life.complete(&mut h, life.find(0, 0), Status::Ok);
    // The old parity is back last: the new parity goes to the soft RAID, which refuses it
    // at once (two of its row's members are bad), while the data goes to disk 0.
    let w = life.complete(&mut h, life.find(0, soft), Status::Ok);
    assert_eq!(shape(&w), vec![(0, 0, Op::Write, 0, false)], "{w:?}");
    let holds = w.iter().filter(|a| matches!(a, Action::Hold(_))).count();
    assert_eq!(
        holds, 1,
        "the parity write, held while the soft RAID serves it"
    );
    life.settle(&mut h);
    // The row's scratch buffer was drained by its parity write's answer: nothing is left
    // alive (the read's unhold used to come after that answer, which then found the read
    // still counted and freed nothing; the read's own unhold frees nothing).
    assert!(
        life.life.is_empty(),
        "a scratch buffer leaked: {:?}",
        life.life
    );
}
