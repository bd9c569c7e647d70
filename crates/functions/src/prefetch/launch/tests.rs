//! Scripted sequences through the harness: learning, detection (match, near miss,
//! interleaved noise), dispatch order, held requests answered from prefetched buffers,
//! invalidation by writes. The data-integrity side (contents under the checker) is
//! `crates/engine/tests/launch.rs`.

use super::*;
use wattio_core::function::Action;
use wattio_core::io::Request;
use wattio_core::testing::{disk, replied, submitted, Harness};

const K: u64 = 4096;
const MS: Nanos = 1_000_000;

fn params(order: Order, hold: Hold, depth: usize) -> Params {
    Params {
        order,
        hold,
        detect: 3,
        depth,
        priority: 1,
        gap: 100 * MS,
        learn_launch: 0,
    }
}

/// Guest request `id`: a read of `pages` pages at page `page` of file `file`.
fn read(id: u64, page: u64, pages: u32, file: Option<u64>) -> Io {
    let mut r = Request::new(0, Op::Read, page * K, pages * K as u32);
    r.file = file;
    r.io(id)
}

/// The learning launch: five reads, in this issue order, then an idle gap.
/// page 50 (file 7), page 10 (metadata), page 30 (file 9), page 20 (file 7), page 40 (metadata)
fn launch() -> Vec<Io> {
    vec![
        read(0, 50, 1, Some(7)),
        read(1, 10, 2, None),
        read(2, 30, 1, Some(9)),
        read(3, 20, 1, Some(7)),
        read(4, 40, 1, None),
    ]
}

fn learned(p: Params) -> Harness<LaunchPrefetcher> {
    let mut h = Harness::new(LaunchPrefetcher::new(p, 1000), vec![disk(0, "d0")]).unwrap();
    for io in launch() {
        let a = h.request(0, io);
        // Learning passes every request down unchanged.
        assert_eq!(submitted(&a), vec![io]);
        h.complete(MS, io, Status::Ok);
    }
    assert!(h.timer(200 * MS, IDLE).is_empty());
    assert_eq!(h.counter("learned_requests"), 5.0);
    assert_eq!(h.counter("learned_extents"), 5.0);
    h
}

/// The offsets (in pages) of own reads among `a`.
fn own_pages(a: &[Action]) -> Vec<u64> {
    own_reads(a).iter().map(|io| io.offset / K).collect()
}

/// The own (prefetch) reads among `a`.
fn own_reads(a: &[Action]) -> Vec<Io> {
    submitted(a)
        .into_iter()
        .filter(|io| io.id.is_own())
        .collect()
}

/// A learned launch detected again (its first three requests) with every prefetch read
/// issued at once and completed at 301 ms.
fn prefetched_all(p: Params) -> Harness<LaunchPrefetcher> {
    let mut h = learned(p);
    for io in own_reads(&relaunch(&mut h, 3)) {
        h.complete(301 * MS, io, Status::Ok);
    }
    h
}

/// Relaunch: the first `n` requests of the launch (ids from 100).
fn relaunch(h: &mut Harness<LaunchPrefetcher>, n: usize) -> Vec<Action> {
    let mut all = Vec::new();
    for (k, mut io) in launch().into_iter().take(n).enumerate() {
        io.id = IoId(100 + k as u64);
        io.buf = Buf::Host {
            id: 100 + k as u64,
            offset: 0,
        };
        all.extend(h.request(300 * MS, io));
    }
    all
}

#[test]
fn three_consecutive_matches_start_the_dispatcher_in_lba_order() {
    let mut h = learned(params(Order::Lba, Hold::Launch, 8));
    let a = relaunch(&mut h, 2);
    assert!(own_pages(&a).is_empty(), "two matches are not a launch");
    let a = relaunch(&mut h, 3);
    // Guest requests 0 1 0 1 2: only the last three are three consecutive of the log.
    assert_eq!(own_pages(&a), vec![10, 20, 30, 40, 50]);
    assert_eq!(h.counter("launches_detected"), 1.0);
    let own = own_reads(&a);
    assert!(own.iter().all(|io| io.priority == 1 && io.op == Op::Read));
    assert_eq!(own[0].len, 2 * K as u32, "the metadata read of 2 pages");
}

#[test]
fn learn_launch_passes_the_bursts_before_it_unlogged() {
    // A "boot" burst (pages 1, 2 and a flush), idle, a second burst (page 3), idle, then the
    // launch: with learn_launch = 2 only the launch is learned and prefetched.
    let mut p = params(Order::Lba, Hold::Launch, 8);
    p.learn_launch = 2;
    let mut h = Harness::new(LaunchPrefetcher::new(p, 1000), vec![disk(0, "d0")]).unwrap();
    let flush = Request::new(0, Op::Flush, 0, 0).io(62);
    for io in [read(60, 1, 1, None), read(61, 2, 1, None), flush] {
        assert_eq!(submitted(&h.request(0, io)), vec![io]);
        h.complete(MS, io, Status::Ok);
    }
    assert!(h.timer(101 * MS, IDLE).is_empty());
    // A timer with no data moved since does not count as a burst.
    assert!(h.timer(150 * MS, IDLE).is_empty());
    assert_eq!(h.counter("skipped_bursts"), 1.0);
    let io = read(63, 3, 1, None);
    h.request(160 * MS, io);
    h.complete(161 * MS, io, Status::Ok);
    assert!(h.timer(261 * MS, IDLE).is_empty());
    assert_eq!(
        (h.counter("skipped_bursts"), h.counter("learned_requests")),
        (2.0, 0.0)
    );
    for io in launch() {
        assert_eq!(submitted(&h.request(270 * MS, io)), vec![io]);
        h.complete(271 * MS, io, Status::Ok);
    }
    assert!(h.timer(371 * MS, IDLE).is_empty());
    assert_eq!(
        (h.counter("skipped_bursts"), h.counter("learned_requests")),
        (2.0, 5.0)
    );
    let a = relaunch(&mut h, 3);
    assert_eq!(own_pages(&a), vec![10, 20, 30, 40, 50]);
}

#[test]
fn a_near_miss_does_not_start_it() {
    let mut h = learned(params(Order::Lba, Hold::Launch, 8));
    let l = launch();
    // Requests 0 and 1 of the launch, then a read of page 31 instead of page 30.
    let mut a = h.request(0, l[0]);
    a.extend(h.request(0, l[1]));
    a.extend(h.request(0, read(9, 31, 1, Some(9))));
    // And one with the right offset but the wrong length.
    a.extend(h.request(0, read(10, 30, 2, Some(9))));
    assert!(own_pages(&a).is_empty());
    assert_eq!(h.counter("launches_detected"), 0.0);
}

#[test]
fn interleaved_noise_breaks_the_run_of_matches_until_three_are_consecutive() {
    let mut h = learned(params(Order::Lba, Hold::Launch, 8));
    let l = launch();
    let noise = |id| read(id, 900, 1, None);
    let mut a = Vec::new();
    for io in [l[0], noise(20), l[1], noise(21), l[2], noise(22)] {
        a.extend(h.request(0, io));
    }
    assert!(own_pages(&a).is_empty(), "matches separated by noise");
    // Three consecutive from the middle of the sequence: 2, 3, 4.
    a.clear();
    for io in [l[2], l[3]] {
        a.extend(h.request(0, io));
    }
    assert!(own_pages(&a).is_empty());
    let a = h.request(0, l[4]);
    assert_eq!(own_pages(&a), vec![10, 20, 30, 40, 50]);
}

#[test]
fn file_order_puts_metadata_first_then_files_by_inode() {
    let mut h = learned(params(Order::File, Hold::Launch, 8));
    let a = relaunch(&mut h, 3);
    // Metadata 10, 40; file 7: 20, 50; file 9: 30.
    assert_eq!(own_pages(&a), vec![10, 40, 20, 50, 30]);
}

#[test]
fn two_phase_fetches_metadata_first_and_data_once_its_metadata_is_in() {
    let mut h = learned(params(Order::TwoPhase, Hold::Extent, 8));
    let a = relaunch(&mut h, 3);
    // Metadata in first-access order (10, 40); the data read first accessed before any
    // metadata (page 50, position 0) needs none and goes at once; 30 and 20 (positions
    // 2, 3) need the metadata at position 1 (page 10).
    assert_eq!(own_pages(&a), vec![10, 40, 50]);
    let meta = submitted(&a)
        .into_iter()
        .find(|io| io.id.is_own() && io.offset == 10 * K)
        .unwrap();
    let a = h.complete(301 * MS, meta, Status::Ok);
    assert_eq!(own_pages(&a), vec![30, 20]);
    assert_eq!(h.counter("max_queue_depth"), 4.0);
}

#[test]
fn the_paused_launch_is_answered_from_the_prefetched_buffers() {
    let mut h = learned(params(Order::Lba, Hold::Launch, 1));
    let a = relaunch(&mut h, 3);
    // Depth 1: one read at a time.
    let first = submitted(&a).into_iter().find(|io| io.id.is_own()).unwrap();
    assert_eq!(first.offset, 10 * K);
    // The launch goes on: request 3 (page 20) and a read the launch never made are held.
    let mut r3 = launch()[3];
    r3.id = IoId(103);
    r3.buf = Buf::Host { id: 103, offset: 0 };
    let stranger = read(104, 70, 1, Some(7));
    assert!(h.request(310 * MS, r3).is_empty(), "held while prefetching");
    assert!(
        h.request(311 * MS, stranger).is_empty(),
        "held while prefetching"
    );
    // Fetch the extents one by one, in LBA order.
    let mut io = first;
    let mut order = vec![io.offset / K];
    let mut last = Vec::new();
    for t in 0..5 {
        last = h.complete(320 * MS + t * MS, io, Status::Ok);
        if let Some(next) = submitted(&last).into_iter().find(|x| x.id.is_own()) {
            order.push(next.offset / K);
            io = next;
        }
    }
    assert_eq!(order, vec![10, 20, 30, 40, 50]);
    // The prefetch is over: request 3 is answered from extent "page 20" (a copy of that
    // buffer over its read buffer, then the reply); the stranger goes to the disk.
    let copies: Vec<_> = last
        .iter()
        .filter_map(|a| match a {
            Action::Copy { dst, src, len } => Some((*dst, *src, *len)),
            _ => None,
        })
        .collect();
    assert!(!last.iter().any(|a| matches!(a, Action::Xor { .. })));
    assert_eq!(
        copies,
        vec![(
            r3.buf,
            Buf::Scratch {
                id: 1000 + 1,
                offset: 0
            },
            K as u32
        )]
    );
    assert_eq!(
        replied(&last).iter().map(|c| c.io.id).collect::<Vec<_>>(),
        vec![IoId(103)]
    );
    assert_eq!(
        submitted(&last).iter().map(|io| io.id).collect::<Vec<_>>(),
        vec![IoId(104)]
    );
    // Hits over the launch's requests: 1 of (3 detecting + 2 held).
    assert_eq!(h.counter("prefetch_hits"), 1.0);
    assert_eq!(h.counter("hit_ratio"), 1.0 / 5.0);
}

#[test]
fn the_hit_ratio_sums_over_launches() {
    // Launch 1: 3 detecting requests, then pages 20 and 40 answered: 2 hits of 5.
    let mut h = prefetched_all(params(Order::Lba, Hold::Extent, 8));
    for (k, io) in launch().into_iter().enumerate().skip(3) {
        let mut io = io;
        io.id = IoId(100 + k as u64);
        assert_eq!(replied(&h.request(302 * MS, io)).len(), 1);
    }
    assert_eq!(h.counter("hit_ratio"), 2.0 / 5.0);
    // The launch ends; launch 2: 3 detecting requests, then page 20 answered: 3 hits of 9.
    h.timer(402 * MS, IDLE); // releases the buffers
    let mut own = Vec::new();
    for (k, mut io) in launch().into_iter().take(4).enumerate() {
        io.id = IoId(300 + k as u64);
        if k == 3 {
            for o in std::mem::take(&mut own) {
                h.complete(501 * MS, o, Status::Ok);
            }
            assert_eq!(replied(&h.request(502 * MS, io)).len(), 1);
        } else {
            own.extend(own_reads(&h.request(500 * MS, io)));
        }
    }
    assert_eq!(h.counter("launches_detected"), 2.0);
    assert_eq!(
        (h.counter("prefetch_hits"), h.counter("launch_requests")),
        (3.0, 9.0)
    );
    assert_eq!(h.counter("hit_ratio"), 3.0 / 9.0);
}

#[test]
fn a_write_makes_the_extents_it_overlaps_stale() {
    let mut h = prefetched_all(params(Order::Lba, Hold::Extent, 8));
    // A write of page 21..22 overlaps nothing; one of page 20 overlaps extent "page 20".
    let w = Request::new(0, Op::Write, 20 * K, K as u32).io(200);
    let a = h.request(302 * MS, w);
    assert_eq!(submitted(&a), vec![w]);
    assert_eq!(h.counter("invalidated_extents"), 1.0);
    // A later read of page 20 goes to the disk; a read of page 30 is answered.
    let a = h.request(303 * MS, read(202, 20, 1, Some(7)));
    assert_eq!(submitted(&a).len(), 1);
    assert!(replied(&a).is_empty());
    let a = h.request(303 * MS, read(203, 30, 1, Some(9)));
    assert!(submitted(&a).is_empty());
    assert_eq!(replied(&a).len(), 1);
}

#[test]
fn a_write_in_flight_stays_so_when_another_devices_io_with_its_id_completes() {
    // Two devices under the layer; the launch learned on d0. A guest write of page 20 on d0
    // and a read on d1 with the same id (ids are unique only per issuing layer) are out.
    let mut h = Harness::new(
        LaunchPrefetcher::new(params(Order::Lba, Hold::Extent, 8), 1000),
        vec![disk(0, "d0"), disk(1, "d1")],
    )
    .unwrap();
    for io in launch() {
        h.request(0, io);
        h.complete(MS, io, Status::Ok);
    }
    h.timer(200 * MS, IDLE);
    let w = Request::new(0, Op::Write, 20 * K, K as u32).io(500);
    let mut r = Request::new(0, Op::Read, 20 * K, K as u32);
    r.dev = 1;
    let r = r.io(500);
    h.request(250 * MS, w);
    h.request(250 * MS, r);
    h.complete(260 * MS, r, Status::Ok);
    // The launch again: page 20's extent is not fetched while the write is out (a fetch
    // could return the data from before it).
    let a = relaunch(&mut h, 3);
    assert_eq!(own_pages(&a), vec![10, 30, 40, 50]);
    // Once by the write itself (before the launch), once at the dispatch.
    assert_eq!(h.counter("invalidated_extents"), 2.0);
    h.complete(301 * MS, w, Status::Ok);
    let a = h.request(302 * MS, read(210, 20, 1, Some(7)));
    assert_eq!(submitted(&a).len(), 1, "page 20 read from the disk");
}

#[test]
fn an_upper_layers_io_with_a_prefetch_reads_id_is_passed_back_up_not_taken() {
    let mut h = learned(params(Order::Lba, Hold::Extent, 8));
    let own = own_reads(&relaunch(&mut h, 3));
    let e40 = *own.iter().find(|io| io.offset == 40 * K).unwrap();
    // A layer above sends its own read, numbered as the prefetch read of page 40, to
    // page 90: it goes down, and its completion goes back up.
    let mut theirs = Request::new(0, Op::Read, 90 * K, K as u32).io(0);
    theirs.id = e40.id;
    assert_eq!(submitted(&h.request(302 * MS, theirs)), vec![theirs]);
    let a = h.complete(303 * MS, theirs, Status::Ok);
    assert_eq!(
        replied(&a).iter().map(|c| c.io).collect::<Vec<_>>(),
        vec![theirs]
    );
    // Page 40's extent is still being fetched: a read of it waits for it.
    let mut r = launch()[4];
    r.id = IoId(120);
    assert!(h.request(304 * MS, r).is_empty());
    let a = h.complete(305 * MS, e40, Status::Ok);
    assert_eq!(
        replied(&a).iter().map(|c| c.io.id).collect::<Vec<_>>(),
        vec![IoId(120)]
    );
}

#[test]
fn a_read_of_an_extent_in_flight_waits_for_it_without_pausing_the_rest() {
    let mut h = learned(params(Order::Lba, Hold::Extent, 8));
    let a = relaunch(&mut h, 3);
    let own = own_reads(&a);
    // A read of page 40 (in flight) waits; one of page 70 (never learned) goes down at once.
    let mut r = launch()[4];
    r.id = IoId(110);
    assert!(h.request(305 * MS, r).is_empty());
    let a = h.request(305 * MS, read(111, 70, 1, None));
    assert_eq!(
        submitted(&a).iter().map(|io| io.id).collect::<Vec<_>>(),
        vec![IoId(111)]
    );
    let e40 = own.iter().find(|io| io.offset == 40 * K).unwrap();
    let a = h.complete(306 * MS, *e40, Status::Ok);
    assert_eq!(
        replied(&a).iter().map(|c| c.io.id).collect::<Vec<_>>(),
        vec![IoId(110)]
    );
}

#[test]
fn the_end_of_a_launch_drops_the_buffers_and_rearms_detection() {
    let mut h = prefetched_all(params(Order::Lba, Hold::Launch, 8));
    assert_eq!(h.function().scratch_buffers(), 5, "five extents fetched");
    let a = h.timer(500 * MS, IDLE);
    // Each extent's buffer is freed: the next prefetch numbers its buffers anew, so one
    // kept here would never be.
    let mut freed: Vec<Buf> = a
        .iter()
        .filter_map(|x| match x {
            Action::Release { buf } => Some(*buf),
            _ => None,
        })
        .collect();
    freed.sort_by_key(|b| match b {
        Buf::Scratch { id, .. } => *id,
        _ => 0,
    });
    assert_eq!(
        freed,
        (1000..1005)
            .map(|id| Buf::Scratch { id, offset: 0 })
            .collect::<Vec<_>>()
    );
    assert_eq!(h.function().scratch_buffers(), 0);
    // After the launch, a read of a learned page goes to the disk.
    let a = h.request(600 * MS, read(300, 20, 1, Some(7)));
    assert!(replied(&a).is_empty());
    // And the next launch is detected again.
    let a = relaunch(&mut h, 3);
    assert_eq!(own_pages(&a).len(), 5);
    assert_eq!(h.counter("launches_detected"), 2.0);
}
