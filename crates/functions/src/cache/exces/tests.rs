//! The mechanisms pinned by hand-computed cases, driven through the scripted harness. The
//! test disk (`wattio_core::testing::disk`) is device 0, the ECD (`always_on`) device 1.

use super::ranker::{Decay, PageRanker};
use super::topk::{TopK, Update};
use super::*;
use wattio_core::function::Action;
use wattio_core::io::Request;
use wattio_core::testing::{always_on, disk, replied, submitted, Harness};
use wattio_core::time::NS_PER_S;

const S: Nanos = NS_PER_S;
const P: u64 = PAGE;

#[test]
fn the_rankers_decay_by_hand() {
    // Quanta of 10 s, half-life 20 s: h = 2 quanta, an access in quantum q weighs 2^(q/2).
    let d = Decay::new(10 * S, 20 * S);
    assert_eq!(d.quantum_of(39 * S), 3);
    let (mut r, mut filled) = (PageRanker::default(), 0);
    // Accesses in quanta 0, 0, 2: nothing folded yet (last_acc holds 3 of 4).
    assert!(!r.access(&mut filled, 0, &d));
    assert!(!r.access(&mut filled, 0, &d));
    assert!(!r.access(&mut filled, 2, &d));
    assert_eq!((r.rank, filled), (0.0, 3));
    // The fourth, in quantum 4, folds: 1 + 1 + 2 + 4 = 8.
    assert!(r.access(&mut filled, 4, &d));
    assert_eq!((r.rank, filled), (8.0, 0));
    // Seen from quantum 4 that is the paper's decayed sum: 8 / 2^(4/2) = 2 =
    // 2^-2 + 2^-2 + 2^-1 + 2^0 (each access halved per 2 quanta of age).
    assert_eq!(r.rank / d.weight(4), 0.25 + 0.25 + 0.5 + 1.0);
    // A page with the same four accesses one quantum each later ranks √2 higher.
    let (mut later, mut filled) = (PageRanker::default(), 0);
    for q in [1, 1, 3, 5] {
        later.access(&mut filled, q, &d);
    }
    assert!((later.rank / r.rank - 2f64.sqrt()).abs() < 1e-12);
}

#[test]
fn a_pages_writes_in_flight_are_counted_past_its_entrys_u16() {
    // The entry counts 65,535 host writes out; the rest are counted beside it, and every
    // one must come back before the page reads as having none out.
    let mut pages = Pages::default();
    pages.entry(7);
    let n = u16::MAX as u64 + 3;
    for _ in 0..n {
        pages.write_out(7);
    }
    assert_eq!((pages[&7].writes, pages.more_writes[&7]), (u16::MAX, 3));
    for k in 0..n {
        assert!(pages[&7].writes > 0, "after {k} of {n} came back");
        assert_eq!(pages.write_back(7), Some(NO_SLOT));
    }
    assert_eq!(pages[&7].writes, 0);
    assert!(pages.more_writes.is_empty());
    // A neighbour in the same group is untouched, and unseen.
    assert!(pages.get(&6).is_none());
    assert_eq!(
        pages.write_back(6),
        None,
        "an untracked page's write counts nothing"
    );
    assert_eq!(pages.len(), 1);
}

#[test]
fn the_decay_base_moves_before_weights_overflow() {
    let mut d = Decay::new(S, 2 * S); // h = 2 quanta
    assert_eq!(d.rescale(511), None, "2^255.5 is still in range");
    // At quantum 512 the newest weight would be 2^256: the base moves there and every rank
    // is scaled by 2^-256, so the new weight of quantum 512 is 1.
    assert_eq!(d.rescale(512), Some(2f64.powi(-256)));
    assert_eq!(d.base, 512);
    assert_eq!(d.weight(512), 1.0);
    assert_eq!(d.weight(514), 2.0);
}

#[test]
fn top_k_membership_by_hand() {
    use std::cell::RefCell;
    use std::collections::HashMap;
    // The pages' ranks, as the layer keeps them; the set reads those of pages inside.
    let ranks = RefCell::new(HashMap::<u64, f64>::new());
    let rank_of = |p: u64| ranks.borrow()[&p];
    let inside = |t: &TopK| {
        let mut v: Vec<u64> = t.pages().collect();
        v.sort();
        v
    };
    let mut t = TopK::new(2);
    let update = |t: &mut TopK, page: u64, inside: bool, rank: f64| {
        ranks.borrow_mut().insert(page, rank);
        t.update(page, inside, rank, rank_of)
    };
    assert_eq!(t.threshold(rank_of), None);
    assert_eq!(
        update(&mut t, 10, false, 3.0),
        Update::Entered { evicted: None }
    );
    assert_eq!(
        update(&mut t, 11, false, 1.0),
        Update::Entered { evicted: None }
    );
    assert_eq!(t.threshold(rank_of), Some(1.0));
    // Not above the minimum (equal is not enough): stays out.
    assert_eq!(update(&mut t, 12, false, 1.0), Update::Out);
    // Above it: 11 leaves.
    assert_eq!(
        update(&mut t, 12, false, 2.0),
        Update::Entered { evicted: Some(11) }
    );
    assert_eq!(inside(&t), vec![10, 12]);
    // A page inside whose rank grew (12: 2 → 5) keeps its old key for now; the minimum
    // is still found by its rank: 10's 3, and a page ranked 4 evicts 10, not 12.
    assert_eq!(update(&mut t, 12, true, 5.0), Update::Moved);
    assert_eq!(t.threshold(rank_of), Some(3.0));
    assert_eq!(
        update(&mut t, 13, false, 4.0),
        Update::Entered { evicted: Some(10) }
    );
    assert_eq!(t.threshold(rank_of), Some(4.0));
    // 4.5 beats 13's 4 but not 12's 5: 13 leaves.
    assert_eq!(
        update(&mut t, 14, false, 4.5),
        Update::Entered { evicted: Some(13) }
    );
    assert_eq!(inside(&t), vec![12, 14]);
    // The first entry once its rank is checked (14's 4.5) stops being the minimum when its
    // page's rank grows: 14 rising to 7 makes 12's 5 the threshold, and 6 evicts 12.
    assert_eq!(t.threshold(rank_of), Some(4.5));
    assert_eq!(update(&mut t, 14, true, 7.0), Update::Moved);
    assert_eq!(t.threshold(rank_of), Some(5.0));
    assert_eq!(
        update(&mut t, 15, false, 6.0),
        Update::Entered { evicted: Some(12) }
    );
    assert_eq!(t.threshold(rank_of), Some(6.0));
}

fn params(cache: u64) -> Params {
    Params {
        disk: "disk".into(),
        flash: "ecd".into(),
        cache_pages: Some(cache),
        miss_threshold_per_min: 2.0,
        ..Params::default()
    }
}

fn harness(p: Params) -> Harness<Exces> {
    let h = Harness::new(Exces::new(p), vec![disk(0, "disk"), always_on(1, "ecd")]).unwrap();
    recovered(h, &[])
}

/// Start `h` with its map's region holding `image` (zeros after it), let the log's
/// recovery read it and its new header land.
fn recovered(mut h: Harness<Exces>, image: &[u8]) -> Harness<Exces> {
    let k = h.function().cache_pages() as u64;
    let a = h.start(0);
    // One read of the whole region, right after the k cache pages.
    let read = submitted(&a);
    assert_eq!(
        shape(&a),
        vec![(1, k * P, map_log::region_len(k) as u32, Op::Read)]
    );
    let back = h.complete(0, read[0], Status::Ok);
    let (tag, len) = match back[..] {
        [Action::Take { tag, len, .. }] => (tag, len as usize),
        _ => panic!("{back:?}"),
    };
    let mut bytes = image.to_vec();
    bytes.resize(len, 0);
    let header = h.bytes(0, tag, &bytes);
    let w = submitted(&header);
    assert_eq!(w.len(), 1, "{header:?}");
    // Header slot 0 of a fresh log; the other slot than the image's after that.
    let slot = if image.is_empty() { 0 } else { 1 };
    assert_eq!(
        (w[0].dev, w[0].offset, w[0].fua),
        (1, k * P + slot * P, true)
    );
    assert_eq!(h.complete(0, w[0], Status::Ok), vec![]);
    h
}

fn io(id: u64, op: Op, offset: u64, len: u32) -> Io {
    Request::new(0, op, offset, len).io(id)
}

/// (device, offset, length, operation) of each I/O submitted.
fn shape(actions: &[Action]) -> Vec<(u16, u64, u32, Op)> {
    submitted(actions)
        .iter()
        .map(|i| (i.dev, i.offset, i.len, i.op))
        .collect()
}

/// Complete every submitted I/O in `actions` at `now`; the actions they cause.
fn complete_all(h: &mut Harness<Exces>, now: Nanos, actions: &[Action]) -> Vec<Action> {
    let mut all = Vec::new();
    for i in submitted(actions) {
        all.extend(h.complete(now, i, Status::Ok));
    }
    all
}

/// Buffer whole-page writes of `pages` while the disk sleeps (they take ECD pages 0, 1, …
/// in order) and let them land.
fn buffer(h: &mut Harness<Exces>, now: Nanos, pages: &[u64]) {
    for (k, &pg) in pages.iter().enumerate() {
        let a = h.request(now, io(100 + k as u64, Op::Write, pg * P, P as u32));
        assert_eq!(shape(&a)[0].0, 1, "page {pg} is buffered in the ECD");
        let back = complete_all(h, now, &a);
        assert_eq!(replied(&back).len(), 1);
    }
}

/// A layer of 8 ECD pages with the disk in standby from `S` (writes are buffered) and the
/// trigger's threshold out of reach (no reconfiguration moves what the test placed).
fn buffering_without_reconfigurations() -> Harness<Exces> {
    let mut p = params(8);
    p.miss_threshold_per_min = 1e9;
    let mut h = harness(p);
    h.power(S, 0, "standby");
    h
}

#[test]
fn algorithm_1_on_the_papers_split_example() {
    // Fig. 7: disk page 0 → ECD page 5, disk page 2 → ECD page 4, page 1 unmapped.
    let mut h = buffering_without_reconfigurations();
    buffer(&mut h, S, &[10, 11, 12, 13, 2, 0]);
    assert_eq!(h.function().mapping(0), Some((5, true)));
    assert_eq!(h.function().mapping(2), Some((4, true)));
    assert_eq!(h.function().mapping(1), None);
    // A read over the second half of page 0, all of page 1 and the first half of page 2.
    let a = h.request(2 * S, io(1, Op::Read, 2048, 8192));
    assert_eq!(
        shape(&a),
        vec![
            (1, 5 * P + 2048, 2048, Op::Read),
            (0, P, 4096, Op::Read),
            (1, 4 * P, 2048, Op::Read),
        ]
    );
    // The host buffer follows each piece.
    let bufs: Vec<_> = submitted(&a).iter().map(|i| i.buf).collect();
    assert_eq!(
        bufs,
        [0, 2048, 6144].map(|offset| Buf::Host { id: 1, offset })
    );
    assert_eq!(h.counter("read_hits"), 2.0);
    assert_eq!(h.counter("read_misses"), 1.0);
    // One reply, when the last piece is back.
    let subs = submitted(&a);
    assert!(replied(&h.complete(3 * S, subs[1], Status::Ok)).is_empty());
    assert!(replied(&h.complete(3 * S, subs[0], Status::Ok)).is_empty());
    let r = replied(&h.complete(3 * S, subs[2], Status::Ok));
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].io, io(1, Op::Read, 2048, 8192));
    // The same span written while the disk sleeps: the mapped parts go to their ECD pages,
    // the whole unmapped page 1 is buffered in the next free ECD page (6), dirty.
    let a = h.request(4 * S, io(2, Op::Write, 2048, 8192));
    assert_eq!(
        shape(&a),
        vec![
            (1, 5 * P + 2048, 2048, Op::Write),
            (1, 6 * P, 4096, Op::Write),
            (1, 4 * P, 2048, Op::Write),
        ]
    );
    assert_eq!(h.function().mapping(1), Some((6, true)));
    complete_all(&mut h, 4 * S, &a);
    // An unmapped partial-page write goes to the disk even while it sleeps: an ECD miss.
    let misses = h.counter("ecd_misses");
    let a = h.request(5 * S, io(3, Op::Write, 7 * P + 512, 1024));
    assert_eq!(shape(&a), vec![(0, 7 * P + 512, 1024, Op::Write)]);
    assert_eq!(h.counter("ecd_misses"), misses + 1.0);
    assert_eq!(h.counter("partial_write_misses"), 1.0);
    // With the disk awake an unmapped whole-page write goes to the disk too (Algorithm 1
    // absorbs only in STANDBY) …
    h.power(6 * S, 0, "idle");
    let a = h.request(6 * S, io(4, Op::Write, 20 * P, P as u32));
    assert_eq!(shape(&a), vec![(0, 20 * P, 4096, Op::Write)]);
    // … and a mapped page's write still goes to the ECD.
    let a = h.request(6 * S, io(5, Op::Write, 0, P as u32));
    assert_eq!(shape(&a), vec![(1, 5 * P, 4096, Op::Write)]);
}

#[test]
fn missed_pages_of_a_request_go_to_the_disk_as_one_io() {
    // Fig. 7's map again (disk page 0 → ECD page 5, 2 → 4, 1 unmapped), the disk awake.
    let mut p = params(8);
    p.miss_threshold_per_min = 1e9;
    let mut h = harness(p.clone());
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[10, 11, 12, 13, 2, 0]);
    h.power(2 * S, 0, "idle");
    // Pages 3 to 7, unaligned at both ends: five pieces, every one a miss, one disk read.
    let a = h.request(2 * S, io(1, Op::Read, 3 * P + 512, 4 * P as u32));
    assert_eq!(shape(&a), vec![(0, 3 * P + 512, 4 * P as u32, Op::Read)]);
    assert_eq!(submitted(&a)[0].buf, Buf::Host { id: 1, offset: 0 });
    assert_eq!(h.counter("read_misses"), 5.0);
    assert_eq!(h.counter("merged_pages"), 4.0);
    let r = replied(&h.complete(3 * S, submitted(&a)[0], Status::Ok));
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].io, io(1, Op::Read, 3 * P + 512, 4 * P as u32));
    // Pages 1 to 4: page 2 is on the ECD between the misses, so page 1 goes alone and
    // pages 3 and 4 together; three pieces answered, then one reply.
    let a = h.request(4 * S, io(2, Op::Read, P, 4 * P as u32));
    assert_eq!(
        shape(&a),
        vec![
            (0, P, 4096, Op::Read),
            (1, 4 * P, 4096, Op::Read),
            (0, 3 * P, 8192, Op::Read),
        ]
    );
    let bufs: Vec<_> = submitted(&a).iter().map(|i| i.buf).collect();
    assert_eq!(
        bufs,
        [0, 4096, 8192].map(|offset| Buf::Host { id: 2, offset })
    );
    let back = complete_all(&mut h, 5 * S, &a);
    assert_eq!(replied(&back).len(), 1);
    // A write over unmapped pages 20 to 22 (the disk is awake: not absorbed): one disk
    // write, and once it is back no page of it counts a write in flight.
    let a = h.request(6 * S, io(3, Op::Write, 20 * P, 3 * P as u32));
    assert_eq!(shape(&a), vec![(0, 20 * P, 3 * P as u32, Op::Write)]);
    assert_eq!(h.function().pages[&21].writes, 1);
    let back = complete_all(&mut h, 7 * S, &a);
    assert_eq!(replied(&back).len(), 1);
    assert!((20..23).all(|pg| h.function().pages[&pg].writes == 0));
    // merge_disk_pages = false: one disk I/O a page.
    p.merge_disk_pages = false;
    let mut h = harness(p);
    let a = h.request(S, io(1, Op::Write, 20 * P, 3 * P as u32));
    assert_eq!(
        shape(&a),
        (20..23)
            .map(|pg| (0, pg * P, 4096, Op::Write))
            .collect::<Vec<_>>()
    );
    assert_eq!(h.counter("merged_pages"), 0.0);
}

#[test]
fn write_absorption_always_takes_free_then_clean_pages() {
    let mut p = params(2);
    p.absorb = Absorb::Always;
    p.clean_idle = Some(S);
    p.miss_threshold_per_min = 1e9;
    let mut h = harness(p);
    // Disk awake, yet buffered (absorb = always): pages 0 and 1 fill the ECD.
    buffer(&mut h, S, &[30, 31]);
    // No free page, no clean page: the next write goes to the disk.
    let a = h.request(S, io(1, Op::Write, 32 * P, P as u32));
    assert_eq!(shape(&a), vec![(0, 32 * P, 4096, Op::Write)]);
    complete_all(&mut h, S, &a);
    // Idle cleaning writes both back (ECD → disk copies, then a disk flush) and cleans them.
    let a = h.timer(2 * S, IDLE_TIMER);
    assert_eq!(
        shape(&a),
        vec![(1, 0, 4096, Op::Read), (1, P, 4096, Op::Read)]
    );
    let w = complete_all(&mut h, 2 * S, &a);
    assert_eq!(
        shape(&w),
        vec![(0, 30 * P, 4096, Op::Write), (0, 31 * P, 4096, Op::Write)]
    );
    let f = complete_all(&mut h, 2 * S, &w);
    assert_eq!(shape(&f), vec![(0, 0, 0, Op::Flush)]);
    assert_eq!(complete_all(&mut h, 2 * S, &f), vec![]);
    assert_eq!(h.function().mapping(30), Some((0, false)));
    // Now a write takes the oldest clean page (ECD page 0), and page 30 leaves the ECD.
    let a = h.request(3 * S, io(3, Op::Write, 33 * P, P as u32));
    assert_eq!(shape(&a), vec![(1, 0, 4096, Op::Write)]);
    assert_eq!(h.function().mapping(30), None);
    assert_eq!(h.function().mapping(33), Some((0, true)));
    assert_eq!(h.counter("clean_victims"), 1.0);
}

#[test]
fn a_flush_with_nothing_to_write_back_leaves_the_sleeping_disk_alone() {
    let mut h = harness(params(4));
    h.power(S, 0, "standby");
    let f = io(1, Op::Flush, 0, 0);
    let a = h.request(S, f);
    assert_eq!(shape(&a), vec![]);
    assert_eq!(replied(&a)[0].io, f);
}

#[test]
fn the_triggers_three_conditions() {
    // (1) set = contents: misses alone never reconfigure.
    let mut h = harness(params(4));
    for k in 0..3 {
        let a = h.request(S, io(k, Op::Read, 50 * P, P as u32));
        complete_all(&mut h, S, &a);
    }
    assert_eq!(h.counter("ecd_misses"), 3.0);
    assert_eq!(
        h.counter("reconfigurations"),
        0.0,
        "top-k is empty, the ECD too"
    );
    // The fourth access folds page 50's history: it enters the top-k, is not in the ECD,
    // the miss rate is 4/min > 2/min and there was no reconfiguration: fire. The plan's
    // incoming page is mapped (clean) and its copy starts behind the miss.
    let a = h.request(2 * S, io(3, Op::Read, 50 * P, P as u32));
    assert!(h.function().in_topk(50));
    assert_eq!(h.counter("reconfigurations"), 1.0);
    assert_eq!(
        shape(&a),
        vec![(0, 50 * P, 4096, Op::Read), (0, 50 * P, 4096, Op::Read)]
    );
    assert_eq!(
        submitted(&a)[1].priority,
        -1,
        "the copy runs behind the guest"
    );
    assert_eq!(h.function().mapping(50), Some((0, false)));
    let w = complete_all(&mut h, 2 * S, &a);
    assert_eq!(shape(&w), vec![(1, 0, 4096, Op::Write)]);
    complete_all(&mut h, 3 * S, &w);
    assert!(!h.function().reconfiguring());
    assert_eq!(h.counter("pages_prefetched"), 1.0);
    // Now a hit.
    let a = h.request(4 * S, io(9, Op::Read, 50 * P, P as u32));
    assert_eq!(shape(&a), vec![(1, 0, 4096, Op::Read)]);
    complete_all(&mut h, 4 * S, &a);
    // (3) Page 51 enters the top-k 7 s after the last reconfiguration ended (at 3 s):
    // the rate is high and the set differs, but a minute has not passed.
    for k in 0..4 {
        let a = h.request(10 * S, io(20 + k, Op::Read, 51 * P, P as u32));
        complete_all(&mut h, 10 * S, &a);
    }
    assert!(h.function().in_topk(51));
    assert_eq!(h.counter("reconfigurations"), 1.0);
    // At 63 s a minute has passed since 3 s; the window (the last 60 one-second buckets)
    // has let the misses of 1 s and 2 s slide out and holds the 4 of 10 s and this one:
    // 5/min > 2/min, and page 51 is still outside the ECD: fire.
    let a = h.request(63 * S, io(30, Op::Read, 52 * P, P as u32));
    assert_eq!(h.counter("reconfigurations"), 2.0);
    assert_eq!(h.function().mapping(51), Some((1, false)));
    complete_all(&mut h, 63 * S, &a);
}

#[test]
fn the_trigger_waits_for_the_miss_rate() {
    // (2) With the paper's 1000 misses/min, four misses do not reconfigure.
    let mut p = params(4);
    p.miss_threshold_per_min = 1000.0;
    let mut h = harness(p);
    for k in 0..4 {
        let a = h.request(S, io(k, Op::Read, 50 * P, P as u32));
        complete_all(&mut h, S, &a);
    }
    assert!(h.function().in_topk(50));
    assert_eq!(h.counter("reconfigurations"), 0.0);
    // With 4/min: four misses at 1 s are not above it, and by 62 s they slid out.
    let mut p = params(4);
    p.miss_threshold_per_min = 4.0;
    let mut h = harness(p);
    for k in 0..4 {
        let a = h.request(S, io(k, Op::Read, 50 * P, P as u32));
        complete_all(&mut h, S, &a);
    }
    assert_eq!(
        h.counter("reconfigurations"),
        0.0,
        "4/min is not above 4/min"
    );
    let a = h.request(62 * S, io(9, Op::Read, 60 * P, P as u32));
    complete_all(&mut h, 62 * S, &a);
    assert_eq!(h.counter("reconfigurations"), 0.0);
    let a = h.request(62 * S, io(10, Op::Read, 61 * P, P as u32));
    complete_all(&mut h, 62 * S, &a);
    assert_eq!(
        h.counter("reconfigurations"),
        0.0,
        "the first four slid out"
    );
}

/// One ECD page holding page 7 dirty, disk awake, and page 3 about to enter the top-k:
/// with a threshold of 3 misses/min the trigger fires on page 3's fourth miss (the ECD's
/// page 7, outside the top-k, already differs from it). Returns the layer and the actions
/// of that request.
fn outgoing_and_incoming() -> (Harness<Exces>, Vec<Action>) {
    let mut p = params(1);
    p.miss_threshold_per_min = 3.0;
    let mut h = harness(p);
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[7]);
    h.power(2 * S, 0, "idle");
    for k in 0..3 {
        let a = h.request(3 * S, io(k, Op::Read, 3 * P, P as u32));
        complete_all(&mut h, 3 * S, &a);
    }
    assert_eq!(
        h.counter("reconfigurations"),
        0.0,
        "3/min is not above 3/min"
    );
    let a = h.request(4 * S, io(3, Op::Read, 3 * P, P as u32));
    (h, a)
}

#[test]
fn algorithm_2_flushes_outgoing_first_and_maps_incoming_before_the_copy() {
    let (mut h, a) = outgoing_and_incoming();
    assert_eq!(h.counter("reconfigurations"), 1.0);
    // The miss goes to the disk, and phase ECD→disk starts: read ECD page 0.
    assert_eq!(
        shape(&a),
        vec![(0, 3 * P, 4096, Op::Read), (1, 0, 4096, Op::Read)]
    );
    let miss = submitted(&a)[0];
    h.complete(4 * S, miss, Status::Ok);
    let w = h.complete(4 * S, submitted(&a)[1], Status::Ok);
    assert_eq!(shape(&w), vec![(0, 7 * P, 4096, Op::Write)]);
    // The entry stays until the copy is on the disk …
    assert_eq!(h.function().mapping(7), Some((0, true)));
    assert_eq!(h.function().mapping(3), None, "phase disk→ECD waits");
    let next = h.complete(5 * S, submitted(&w)[0], Status::Ok);
    // … then goes; phase disk→ECD maps page 3 (clean) before its copy's read is back.
    assert_eq!(h.function().mapping(7), None);
    assert_eq!(shape(&next), vec![(0, 3 * P, 4096, Op::Read)]);
    assert_eq!(h.function().mapping(3), Some((0, false)));
    let w = h.complete(6 * S, submitted(&next)[0], Status::Ok);
    assert_eq!(shape(&w), vec![(1, 0, 4096, Op::Write)]);
    complete_all(&mut h, 6 * S, &w);
    assert!(!h.function().reconfiguring());
    assert_eq!(h.counter("pages_flushed"), 1.0);
    assert_eq!(h.counter("pages_prefetched"), 1.0);
}

#[test]
fn races_during_ecd_to_disk_read_the_origin_and_writes_stop_the_move() {
    let (mut h, a) = outgoing_and_incoming();
    let copy_read = submitted(&a)[1];
    // A read of page 7 while it moves goes to the origin, the ECD.
    let r = h.request(4 * S, io(40, Op::Read, 7 * P, P as u32));
    assert_eq!(shape(&r), vec![(1, 0, 4096, Op::Read)]);
    assert_eq!(h.counter("race_reads_to_origin"), 1.0);
    // A whole-page write goes to the destination, the disk. While it is out the ECD copy
    // stays mapped: reads may still see it, as they may see the write.
    let w = h.request(4 * S, io(41, Op::Write, 7 * P, P as u32));
    assert_eq!(shape(&w), vec![(0, 7 * P, 4096, Op::Write)]);
    assert_eq!(h.counter("race_writes_to_destination"), 1.0);
    let r2 = h.request(4 * S, io(43, Op::Read, 7 * P, P as u32));
    assert_eq!(shape(&r2), vec![(1, 0, 4096, Op::Read)]);
    // The move stopped: its read comes back and nothing is written.
    let back = h.complete(5 * S, copy_read, Status::Ok);
    assert_eq!(shape(&back), vec![]);
    assert_eq!(h.counter("pages_flushed"), 0.0);
    // The write is on the disk: the entry goes.
    assert_eq!(h.function().mapping(7), Some((0, true)));
    complete_all(&mut h, 5 * S, &w);
    assert_eq!(h.function().mapping(7), None);
    assert_eq!(h.counter("race_handoffs"), 1.0);
    complete_all(&mut h, 5 * S, &r2);
    // The ECD page is not free while the foreground read is out, so phase disk→ECD finds
    // no page for page 3 and the reconfiguration ends (the next trigger retries).
    assert!(!h.function().reconfiguring());
    assert_eq!(h.function().mapping(3), None);
    let rest = h.complete(5 * S, submitted(&r)[0], Status::Ok);
    assert_eq!(replied(&rest).len(), 1);
    // Now free: a buffered write takes it.
    h.power(6 * S, 0, "standby");
    let a = h.request(6 * S, io(42, Op::Write, 8 * P, P as u32));
    assert_eq!(shape(&a), vec![(1, 0, 4096, Op::Write)]);
}

/// Runs phase ECD→disk of [`outgoing_and_incoming`] to its end: returns the disk→ECD
/// copy's read of page 3 (page 3 is then mapped to ECD page 0, clean).
fn to_incoming_phase() -> (Harness<Exces>, Io) {
    let (mut h, a) = outgoing_and_incoming();
    let w = complete_all(&mut h, 4 * S, &a);
    let next = complete_all(&mut h, 5 * S, &w);
    assert_eq!(shape(&next), vec![(0, 3 * P, 4096, Op::Read)]);
    assert_eq!(h.function().mapping(3), Some((0, false)));
    let read = submitted(&next)[0];
    (h, read)
}

#[test]
fn races_during_disk_to_ecd_read_the_origin_and_writes_take_the_destination() {
    let (mut h, copy_read) = to_incoming_phase();
    // A read of page 3 while it moves goes to the origin, the disk, though it is mapped.
    let r = h.request(6 * S, io(50, Op::Read, 3 * P, P as u32));
    assert_eq!(shape(&r), vec![(0, 3 * P, 4096, Op::Read)]);
    assert_eq!(h.counter("race_reads_to_origin"), 1.0);
    // A whole-page write goes to the destination, the ECD page, now dirty.
    let w = h.request(6 * S, io(51, Op::Write, 3 * P, P as u32));
    assert_eq!(shape(&w), vec![(1, 0, 4096, Op::Write)]);
    assert_eq!(h.function().mapping(3), Some((0, true)));
    assert_eq!(h.counter("race_writes_to_destination"), 1.0);
    // The move stopped: its read comes back and its (older) data is not written.
    assert_eq!(shape(&h.complete(7 * S, copy_read, Status::Ok)), vec![]);
    assert_eq!(h.counter("pages_prefetched"), 0.0);
    assert!(!h.function().reconfiguring());
    complete_all(&mut h, 7 * S, &w);
    complete_all(&mut h, 7 * S, &r);
    // From now on page 3 is read from the ECD.
    let a = h.request(8 * S, io(52, Op::Read, 3 * P, P as u32));
    assert_eq!(shape(&a), vec![(1, 0, 4096, Op::Read)]);
}

#[test]
fn a_partial_write_during_disk_to_ecd_goes_to_the_origin_and_drops_the_entry() {
    let (mut h, copy_read) = to_incoming_phase();
    // Half a page: the ECD page does not hold the rest yet, so the write goes to the disk
    // and the move stops with the entry deleted.
    let w = h.request(6 * S, io(60, Op::Write, 3 * P + 1024, 2048));
    assert_eq!(shape(&w), vec![(0, 3 * P + 1024, 2048, Op::Write)]);
    assert_eq!(h.function().mapping(3), None);
    assert_eq!(h.counter("race_writes_to_origin"), 1.0);
    assert_eq!(shape(&h.complete(7 * S, copy_read, Status::Ok)), vec![]);
}

#[test]
fn a_write_while_the_copys_write_is_out_goes_to_the_origin() {
    // Phase ECD→disk with the copy's disk write out: a write to the disk now could be
    // overtaken by the older copy, so it goes to the ECD page and the page stays mapped.
    let (mut h, a) = outgoing_and_incoming();
    let w = h.complete(4 * S, submitted(&a)[1], Status::Ok);
    assert_eq!(shape(&w), vec![(0, 7 * P, 4096, Op::Write)]);
    let fg = h.request(4 * S, io(70, Op::Write, 7 * P, P as u32));
    assert_eq!(shape(&fg), vec![(1, 0, 4096, Op::Write)]);
    assert_eq!(h.counter("race_writes_to_origin"), 1.0);
    // The copy lands, but the entry stays: the ECD holds the newer data, dirty.
    h.complete(5 * S, submitted(&w)[0], Status::Ok);
    assert_eq!(h.function().mapping(7), Some((0, true)));
    assert_eq!(h.counter("pages_flushed"), 0.0);
}

#[test]
fn a_read_waits_for_the_buffered_write_that_fills_its_page() {
    let mut h = harness(params(2));
    h.power(S, 0, "standby");
    let w = h.request(S, io(1, Op::Write, 9 * P, P as u32));
    assert_eq!(shape(&w), vec![(1, 0, 4096, Op::Write)]);
    // The ECD page holds nothing valid until the write lands: the read waits in the layer.
    let r = h.request(S, io(2, Op::Read, 9 * P, P as u32));
    assert_eq!(shape(&r), vec![]);
    assert_eq!(h.counter("waited_for_fill"), 1.0);
    let back = h.complete(2 * S, submitted(&w)[0], Status::Ok);
    assert_eq!(replied(&back).len(), 1);
    assert_eq!(shape(&back), vec![(1, 0, 4096, Op::Read)]);
}

#[test]
fn a_hit_after_a_page_that_waits_is_not_merged_into_the_previous_hit() {
    // Found by the swarm (seed 4,572): disk pages 10 and 12 are in ECD pages 0 and 1,
    // page 11 is being written into ECD page 2. A read of pages 10–12 hits 10, holds 11
    // until its page is filled, and hits 12 in the ECD page right after 10's — but 12's
    // bytes are not next to 10's in the read's buffer (11's lie between), so it is a
    // separate ECD read; merging it panicked in `Fanout::merge`.
    let mut h = buffering_without_reconfigurations();
    buffer(&mut h, S, &[10, 12]);
    let w = h.request(S, io(3, Op::Write, 11 * P, P as u32));
    assert_eq!(shape(&w), vec![(1, 2 * P, 4096, Op::Write)]);
    let a = h.request(2 * S, io(4, Op::Read, 10 * P, 3 * P as u32));
    assert_eq!(
        shape(&a),
        vec![(1, 0, 4096, Op::Read), (1, P, 4096, Op::Read)]
    );
    assert_eq!(h.counter("merged_hits"), 0.0);
    assert_eq!(h.counter("waited_for_fill"), 1.0);
    // The fill lands: page 11's read goes, and the three pieces answer the read once.
    let back = h.complete(3 * S, submitted(&w)[0], Status::Ok);
    assert_eq!(shape(&back), vec![(1, 2 * P, 4096, Op::Read)]);
    let mut answered = replied(&back).len();
    for id in submitted(&a).into_iter().chain(submitted(&back)) {
        answered += replied(&h.complete(4 * S, id, Status::Ok)).len();
    }
    assert_eq!(answered, 2, "the write, then the read");
}

/// Where the map's journal starts: after the region's two headers and two snapshot slots.
fn journal_at(k: u64) -> u64 {
    k * P + 2 * P + 2 * map_log::snapshot_bytes(k).div_ceil(P) * P
}

/// The payload of the map record in `actions`' log write (after its 32-byte header).
fn record_payload(h: &Harness<Exces>, actions: &[Action], entries: usize) -> Vec<u8> {
    let fill = actions
        .iter()
        .find_map(|a| match a {
            Action::Fill { data, .. } => Some(h.data(*data).to_vec()),
            _ => None,
        })
        .expect("a record is filled");
    fill[32..32 + entries * map_log::ENTRY].to_vec()
}

#[test]
fn a_fua_write_is_acknowledged_once_its_map_record_is_durable() {
    let mut h = harness(params(2));
    h.power(S, 0, "standby");
    let mut f = io(1, Op::Write, 9 * P, P as u32);
    f.fua = true;
    let a = h.request(S, f);
    assert_eq!(shape(&a), vec![(1, 0, 4096, Op::Write)]);
    // Data → map: the ECD is flushed before the record is appended …
    let fl = complete_all(&mut h, S, &a);
    assert!(replied(&fl).is_empty());
    assert_eq!(shape(&fl), vec![(1, 0, 0, Op::Flush)]);
    let log = complete_all(&mut h, S, &fl);
    assert!(replied(&log).is_empty(), "not before the record is durable");
    let w = submitted(&log);
    assert_eq!(
        (w.len(), w[0].dev, w[0].offset, w[0].len, w[0].fua),
        (1, 1, journal_at(2), 4096, true)
    );
    // … whose payload maps ECD page 0 to disk page 9.
    let mut want = Vec::new();
    want.extend_from_slice(&0u32.to_le_bytes());
    want.extend_from_slice(&9u64.to_le_bytes());
    assert_eq!(record_payload(&h, &log, 1), want);
    let r = complete_all(&mut h, 2 * S, &log);
    assert_eq!(replied(&r)[0].io, f);
    // Durable on the ECD: still dirty, the sleeping disk untouched.
    assert_eq!(h.function().mapping(9), Some((0, true)));
    assert_eq!(h.counter("pages_written_back"), 0.0);
}

#[test]
fn a_failed_ecd_flush_fails_the_flush_and_logs_nothing() {
    let mut h = harness(params(2));
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[5]);
    let fl = io(2, Op::Flush, 0, 0);
    let a = h.request(2 * S, fl);
    assert_eq!(shape(&a), vec![(1, 0, 0, Op::Flush)]);
    let r = h.complete(2 * S, submitted(&a)[0], Status::IoError);
    assert_eq!(shape(&r), vec![], "no record after a failed flush");
    assert_eq!(replied(&r)[0].status, Status::IoError);
    // The next FLUSH flushes again and logs page 5.
    let fl = io(3, Op::Flush, 0, 0);
    let a = h.request(3 * S, fl);
    assert_eq!(shape(&a), vec![(1, 0, 0, Op::Flush)]);
    let log = complete_all(&mut h, 3 * S, &a);
    assert_eq!(shape(&log), vec![(1, journal_at(2), 4096, Op::Write)]);
    let r = complete_all(&mut h, 3 * S, &log);
    assert_eq!((replied(&r)[0].io, replied(&r)[0].status), (fl, Status::Ok));
}

#[test]
fn the_map_is_rebuilt_from_its_log_every_entry_dirty() {
    // A hand-built log: a snapshot mapping ECD page 0 → disk page 5 and page 2 → 7, then
    // records moving disk page 5 to ECD page 1 and freeing ECD page 2.
    let snap = map_log::snapshot(&[5, UNMAPPED, 7, UNMAPPED]);
    let mut r1 = Vec::new();
    map_log::encode(&[(1, 5)], &mut r1);
    let mut r2 = Vec::new();
    map_log::encode(&[(2, UNMAPPED), (3, 30)], &mut r2);
    assert_eq!(r1, [1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0]);
    let map = map_log::rebuild(4, 100, &snap, &[r1.clone(), r2.clone()]).unwrap();
    assert_eq!(map, vec![UNMAPPED, 5, UNMAPPED, 30]);
    // Bad logs are named by record and byte.
    assert_eq!(
        map_log::rebuild(4, 20, &snap, &[r1.clone(), r2]).unwrap_err(),
        "map record 1 byte 12: disk page 30 is past the disk's end (20 pages)"
    );
    assert_eq!(
        map_log::rebuild(1, 100, &[], &[r1]).unwrap_err(),
        "map record 0 byte 0: ECD page 1 is past the cache (1 pages)"
    );
    assert_eq!(
        map_log::rebuild(4, 100, &snap[..8], &[]).unwrap_err(),
        "the map snapshot holds 8 bytes, expected 32 (8 per ECD page, 4 pages)"
    );
}

#[test]
fn recovery_from_a_persisted_map() {
    // Run a layer, keep the bytes it writes to its map's region, and start a new layer on
    // them: what a FLUSH logged comes back dirty; what it did not is on the disk.
    let k = 4;
    let mut image = vec![0u8; map_log::region_len(k) as usize];
    let devs = || vec![disk(0, "disk"), always_on(1, "ecd")];
    let mut h = Harness::new(Exces::new(params(k)), devs()).unwrap();
    let start = h.start(0);
    let back = h.complete(0, submitted(&start)[0], Status::Ok);
    let Action::Take { tag, len, .. } = back[0] else {
        panic!("{back:?}")
    };
    let hdr = h.bytes(0, tag, &vec![0; len as usize]);
    land(&h, &hdr, k, &mut image);
    complete_all(&mut h, 0, &hdr);
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[30, 31]);
    let a = h.request(2 * S, io(1, Op::Flush, 0, 0));
    let log = complete_all(&mut h, 2 * S, &a);
    land(&h, &log, k, &mut image);
    let mut want = Vec::new();
    map_log::encode(&[(0, 30), (1, 31)], &mut want);
    assert_eq!(record_payload(&h, &log, 2), want);
    assert_eq!(replied(&complete_all(&mut h, 2 * S, &log)).len(), 1);
    buffer(&mut h, 3 * S, &[32]); // ECD page 2, never logged: lost at a crash
    let h2 = Harness::new(Exces::new(params(k)), devs()).unwrap();
    let mut h2 = recovered(h2, &image);
    let f = h2.function();
    assert_eq!(
        (f.mapping(30), f.mapping(31), f.mapping(32)),
        (Some((0, true)), Some((1, true)), None)
    );
    assert_eq!(h2.counter("map_recovered_pages"), 2.0);
    // Reads of page 30 go to ECD page 0; a new buffered write takes a free page (2).
    assert_eq!(
        read_all(&mut h2, 4 * S, 1, 30),
        vec![(1, 0, 4096, Op::Read)]
    );
    h2.power(4 * S, 0, "standby");
    let a = h2.request(4 * S, io(2, Op::Write, 40 * P, P as u32));
    assert_eq!(shape(&a), vec![(1, 2 * P, 4096, Op::Write)]);
}

/// Copy the bytes `actions` fill and write into the map's region into `image`.
fn land(h: &Harness<Exces>, actions: &[Action], k: u64, image: &mut [u8]) {
    let region = h.function().regions()[0];
    assert_eq!((region.dev, region.offset), (1, k * P));
    h.land(actions, region, image);
}

#[test]
fn a_volatile_ecds_flush_writes_back_and_fails_only_for_pages_it_covers() {
    // persist_map = false (laptop mode's page cache): no log; a FUA write or FLUSH writes
    // every dirty page back and flushes the disk first.
    let mut p = params(2);
    p.persist_map = false;
    let mut h = Harness::new(Exces::new(p), vec![disk(0, "disk"), always_on(1, "ecd")]).unwrap();
    assert_eq!(h.start(0), vec![], "nothing to recover");
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[5]); // ECD page 0, dirty; its disk sector will fail
    let mut f = io(1, Op::Write, 9 * P, P as u32);
    f.fua = true;
    let a = h.request(S, f);
    assert_eq!(shape(&a), vec![(1, P, 4096, Op::Write)]);
    let copies = complete_all(&mut h, S, &a);
    assert_eq!(
        shape(&copies),
        vec![(1, 0, 4096, Op::Read), (1, P, 4096, Op::Read)]
    );
    let wb = complete_all(&mut h, S, &copies);
    assert_eq!(
        shape(&wb),
        vec![(0, 5 * P, 4096, Op::Write), (0, 9 * P, 4096, Op::Write)]
    );
    let w = submitted(&wb);
    // The failed write-back ends its copy: only its buffer is released.
    assert_eq!(
        h.complete(S, w[0], Status::IoError),
        vec![Action::Release { buf: w[0].buf }]
    );
    let fl = h.complete(S, w[1], Status::Ok);
    assert_eq!(shape(&fl), vec![(0, 0, 0, Op::Flush)]);
    // The FUA write's own page is on the disk and flushed: it succeeds.
    let r = complete_all(&mut h, S, &fl);
    assert_eq!((replied(&r)[0].io, replied(&r)[0].status), (f, Status::Ok));
    assert_eq!(h.function().mapping(5), Some((0, true)), "still dirty");
    assert_eq!(h.function().mapping(9), Some((1, false)));
    // A FLUSH covers page 5 too: its write-back fails again, and so does the FLUSH.
    let fl = io(2, Op::Flush, 0, 0);
    let c = h.request(2 * S, fl);
    let wb = complete_all(&mut h, 2 * S, &c);
    let mut r = h.complete(2 * S, submitted(&wb)[0], Status::IoError);
    let more = complete_all(&mut h, 2 * S, &r);
    r.extend(more);
    assert_eq!(
        (replied(&r)[0].io, replied(&r)[0].status),
        (fl, Status::IoError)
    );
}

/// Layers start top down, so a layer above (another EXCES recovering its map) can send I/O
/// before this layer's start: without a map to recover, the start must still pass it on.
/// (The swarm lost 119 requests this way: seed 49, two EXCES layers on one disk.)
#[test]
fn io_sent_before_a_volatile_layers_start_is_passed_at_its_start() {
    let mut p = params(2);
    p.persist_map = false;
    let devs = vec![
        disk(0, "disk"),
        always_on(1, "ecd"),
        always_on(2, "upper-ecd"),
    ];
    let mut h = Harness::new(Exces::new(p), devs).unwrap();
    // A read of the upper layer's ECD (its map's log) and a disk read.
    let above = Io {
        dev: 2,
        ..io(1, Op::Read, 0, 4096)
    };
    assert!(h.request(0, above).is_empty(), "held until the start");
    let host = io(2, Op::Read, 3 * P, P as u32);
    assert!(h.request(0, host).is_empty());
    let a = h.start(0);
    assert_eq!(
        shape(&a),
        vec![(2, 0, 4096, Op::Read), (0, 3 * P, 4096, Op::Read)]
    );
    let r = complete_all(&mut h, 0, &a);
    let mut got: Vec<_> = replied(&r).iter().map(|c| (c.io, c.status)).collect();
    got.sort_by_key(|(io, _)| io.id);
    assert_eq!(got, vec![(above, Status::Ok), (host, Status::Ok)]);
}

#[test]
fn counters_report_cost_and_memory() {
    let mut h = harness(params(4));
    let a = h.request(S, io(1, Op::Read, 0, 3 * P as u32));
    complete_all(&mut h, S, &a);
    // One request of three pages: three tracker updates and three lookups.
    assert_eq!(h.counter("page_requests"), 3.0);
    assert_eq!(h.counter("cpu_ops_per_io"), 6.0);
    assert_eq!(h.counter("tracked_pages"), 3.0);
    assert!(h.counter("memory_bytes_per_cached_page") > 0.0);
}

// ---- the baselines: LRU (recency ranking, dirty threshold, idle cleaning) and laptop mode --

/// An LRU write-back cache: recency ranking, a trigger at every miss, writes always buffered.
fn lru(cache: u64) -> Params {
    Params {
        ranking: Ranking::Recency,
        miss_threshold_per_min: 0.0,
        min_interval: 0,
        absorb: Absorb::Always,
        ..params(cache)
    }
}

/// Read `page` at `now` and let everything it starts (the miss, a fill) land.
fn read_all(h: &mut Harness<Exces>, now: Nanos, id: u64, page: u64) -> Vec<(u16, u64, u32, Op)> {
    let a = h.request(now, io(id, Op::Read, page * P, P as u32));
    let first = shape(&a);
    let mut next = complete_all(h, now, &a);
    while !submitted(&next).is_empty() {
        next = complete_all(h, now, &next);
    }
    first
}

#[test]
fn recency_ranking_is_lru_replacement() {
    let mut h = harness(lru(2));
    assert_eq!(h.function().name(), "lru-2");
    // A miss fills its page (the plan's incoming list): disk read for the host, then the
    // fill's read behind it; the page is mapped clean into ECD page 0.
    assert_eq!(
        read_all(&mut h, S, 1, 10),
        vec![(0, 10 * P, 4096, Op::Read), (0, 10 * P, 4096, Op::Read)]
    );
    assert_eq!(
        h.function().rank(10),
        S as f64,
        "rank = time of the last access"
    );
    assert_eq!(h.function().mapping(10), Some((0, false)));
    read_all(&mut h, 2 * S, 2, 11);
    assert_eq!(h.function().mapping(11), Some((1, false)));
    // Page 10 is used again (a hit): now 11 is the least recently used ...
    assert_eq!(read_all(&mut h, 3 * S, 3, 10), vec![(1, 0, 4096, Op::Read)]);
    // ... so a miss of page 12 evicts 11 (clean: just unmapped), not 10, which was filled
    // first (LRU, not FIFO), and 12 takes the freed ECD page.
    read_all(&mut h, 4 * S, 4, 12);
    assert_eq!(h.function().mapping(11), None);
    assert_eq!(h.function().mapping(10), Some((0, false)));
    assert_eq!(h.function().mapping(12), Some((1, false)));
    assert_eq!(h.counter("clean_unmapped"), 1.0);
    assert_eq!(h.counter("reconfigurations"), 3.0);
}

#[test]
fn the_dirty_threshold_writes_every_dirty_page_back() {
    let mut p = lru(4);
    p.miss_threshold_per_min = 1e9; // no fills: only the buffered writes matter here
    p.dirty_threshold = 0.5;
    let mut h = harness(p);
    // Two dirty pages of four: not above half.
    buffer(&mut h, S, &[30, 31]);
    assert_eq!(h.counter("cleanings"), 0.0);
    // The third is: a cleaning copies every dirty page that holds data (the third's own
    // write is still out, so not it) to the disk, behind the host's write.
    let a = h.request(2 * S, io(7, Op::Write, 32 * P, P as u32));
    assert_eq!(
        shape(&a),
        vec![
            (1, 2 * P, 4096, Op::Write),
            (1, 0, 4096, Op::Read),
            (1, P, 4096, Op::Read)
        ]
    );
    assert_eq!(h.counter("cleanings"), 1.0);
    let w = complete_all(&mut h, 2 * S, &a);
    assert_eq!(replied(&w).len(), 1, "the host's write");
    assert_eq!(
        shape(&w),
        vec![(0, 30 * P, 4096, Op::Write), (0, 31 * P, 4096, Op::Write)]
    );
    let f = complete_all(&mut h, 2 * S, &w);
    assert_eq!(shape(&f), vec![(0, 0, 0, Op::Flush)]);
    let r = complete_all(&mut h, 2 * S, &f);
    assert!(replied(&r).is_empty(), "a cleaning answers nobody");
    assert_eq!(h.function().mapping(30), Some((0, false)));
    assert_eq!(h.function().mapping(32), Some((2, true)));
    assert_eq!(h.counter("dirty_pages"), 1.0);
    assert_eq!(h.counter("flush_jobs"), 0.0);
}

#[test]
fn idle_cleaning_writes_back_while_the_disk_spins_and_not_once_it_sleeps() {
    let mut p = lru(4);
    p.miss_threshold_per_min = 1e9;
    p.clean_idle = Some(2 * S);
    let mut h = harness(p);
    let a = h.request(S, io(1, Op::Write, 30 * P, P as u32));
    assert!(a.contains(&Action::SetTimer {
        timer: IDLE_TIMER,
        at: 3 * S
    }));
    complete_all(&mut h, S, &a);
    // Two idle seconds with the disk spinning: page 30 goes back.
    let c = h.timer(3 * S, IDLE_TIMER);
    assert_eq!(shape(&c), vec![(1, 0, 4096, Op::Read)]);
    let w = complete_all(&mut h, 3 * S, &c);
    let f = complete_all(&mut h, 3 * S, &w);
    complete_all(&mut h, 3 * S, &f);
    assert_eq!(h.function().mapping(30), Some((0, false)));
    // Dirty again, but the disk has gone to sleep: the timer leaves it asleep.
    let a = h.request(4 * S, io(2, Op::Write, 30 * P, P as u32));
    complete_all(&mut h, 4 * S, &a);
    h.power(5 * S, 0, "standby");
    assert_eq!(shape(&h.timer(6 * S, IDLE_TIMER)), vec![]);
    assert_eq!(h.counter("cleanings"), 1.0);
}

/// `dirty_expire_s` (Linux's `dirty_expire_centisecs`): every `writeback_interval_s` from
/// the start, the pages dirty for at least the expiry go back — aged from when they went
/// dirty, not from their last write — and the others stay.
#[test]
fn dirty_expiry_writes_back_the_pages_dirty_long_enough_at_each_check() {
    let mut p = lru(4);
    p.miss_threshold_per_min = 1e9;
    p.dirty_expire = Some(10 * S);
    p.writeback_interval = 5 * S;
    let mut h = harness(p);
    // Page 30 dirty from 1 s (ECD page 0), page 31 from 7 s (ECD page 1).
    buffer(&mut h, S, &[30]);
    buffer(&mut h, 7 * S, &[31]);
    // 5 s and 10 s: nothing is 10 s old yet (the cut-offs are −5 s and 0 s).
    for t in [5, 10] {
        let a = h.timer(t * S, WRITEBACK_TIMER);
        assert_eq!(shape(&a), vec![], "at {t} s");
        assert!(a.contains(&Action::SetTimer {
            timer: WRITEBACK_TIMER,
            at: (t + 5) * S
        }));
    }
    // 15 s (cut-off 5 s): page 30 goes back, page 31 (dirty since 7 s) stays.
    let c = h.timer(15 * S, WRITEBACK_TIMER);
    assert_eq!(shape(&c), vec![(1, 0, 4096, Op::Read)]);
    let w = complete_all(&mut h, 15 * S, &c);
    assert_eq!(shape(&w), vec![(0, 30 * P, 4096, Op::Write)]);
    let f = complete_all(&mut h, 15 * S, &w);
    assert_eq!(shape(&f), vec![(0, 0, 0, Op::Flush)]);
    complete_all(&mut h, 15 * S, &f);
    assert_eq!(h.function().mapping(30), Some((0, false)));
    assert_eq!(h.function().mapping(31), Some((1, true)));
    // At 16 s both are written: page 30 is dirty again from 16 s, page 31 still from 7 s.
    for (id, page) in [(8, 30), (9, 31)] {
        let a = h.request(16 * S, io(id, Op::Write, page * P, P as u32));
        complete_all(&mut h, 16 * S, &a);
    }
    // 20 s (cut-off 10 s): page 31 goes back, page 30 stays.
    let c = h.timer(20 * S, WRITEBACK_TIMER);
    assert_eq!(shape(&c), vec![(1, P, 4096, Op::Read)]);
    let w = complete_all(&mut h, 20 * S, &c);
    assert_eq!(shape(&w), vec![(0, 31 * P, 4096, Op::Write)]);
    let f = complete_all(&mut h, 20 * S, &w);
    complete_all(&mut h, 20 * S, &f);
    assert_eq!(h.function().mapping(30), Some((0, true)));
    assert_eq!(h.function().mapping(31), Some((1, false)));
    assert_eq!(h.counter("expire_cleanings"), 2.0);
    assert_eq!(h.counter("cleanings"), 0.0);
    assert_eq!(h.counter("pages_written_back"), 2.0);
}

#[test]
fn a_clean_unload_writes_every_dirty_page_back_then_flushes_the_disk() {
    // Pages 30 and 31 buffered in ECD pages 0 and 1 while the disk slept; page 32 too,
    // then the unload. With `clean_on_stop = false` the unload does nothing.
    let mut keep = buffering_without_reconfigurations();
    keep.function_mut().p.clean_on_stop = false;
    buffer(&mut keep, S, &[30]);
    assert_eq!(shape(&keep.stop(2 * S)), vec![]);
    assert_eq!(keep.function().mapping(30), Some((0, true)));
    // And says so: the disk alone is not the volume.
    assert_eq!(
        keep.function().unload_left().as_deref(),
        Some("1 dirty page(s) stay on `ecd` (clean_on_stop = false): `disk` alone does not hold the volume")
    );

    let mut h = buffering_without_reconfigurations();
    buffer(&mut h, S, &[30, 31, 32]);
    // Each dirty page is read from the ECD, then written to its disk page, …
    let reads = h.stop(2 * S);
    assert_eq!(
        shape(&reads),
        vec![
            (1, 0, 4096, Op::Read),
            (1, P, 4096, Op::Read),
            (1, 2 * P, 4096, Op::Read)
        ]
    );
    let writes = complete_all(&mut h, 2 * S, &reads);
    let mut w = shape(&writes);
    w.sort_by_key(|&(dev, offset, ..)| (dev, offset));
    assert_eq!(
        w,
        vec![
            (0, 30 * P, 4096, Op::Write),
            (0, 31 * P, 4096, Op::Write),
            (0, 32 * P, 4096, Op::Write)
        ]
    );
    // … then one FLUSH of the disk once all three are written, …
    let flush = complete_all(&mut h, 2 * S, &writes);
    assert_eq!(shape(&flush), vec![(0, 0, 0, Op::Flush)]);
    // … and only once it is back are they clean (still mapped: reads hit the ECD). The
    // log keeps their entries: recovery takes a mapped page as dirty, which costs a
    // needless write-back after a restart, never a stale read (docs/functions/exces.md).
    assert_eq!(shape(&complete_all(&mut h, 2 * S, &flush)), vec![]);
    for (slot, pg) in [(0, 30), (1, 31), (2, 32)] {
        assert_eq!(h.function().mapping(pg), Some((slot, false)), "page {pg}");
    }
    assert_eq!(h.counter("unload_cleanings"), 1.0);
    assert_eq!(h.counter("pages_written_back"), 3.0);
    assert_eq!(
        h.function().unload_left(),
        None,
        "nothing left: the disk holds it all"
    );
}

#[test]
fn an_unload_whose_write_back_fails_says_what_it_left() {
    // Pages 30 and 31 buffered; at the unload the disk refuses 31's write-back: 30 is
    // clean once the disk's FLUSH is back, 31 stays dirty on the ECD, and the layer says
    // the disk alone does not hold the volume.
    let mut h = buffering_without_reconfigurations();
    buffer(&mut h, S, &[30, 31]);
    let reads = h.stop(2 * S);
    let writes = complete_all(&mut h, 2 * S, &reads);
    let mut next = Vec::new();
    for w in submitted(&writes) {
        let status = if w.offset == 31 * P {
            Status::IoError
        } else {
            Status::Ok
        };
        next.extend(h.complete(2 * S, w, status));
    }
    while !submitted(&next).is_empty() {
        next = complete_all(&mut h, 2 * S, &next);
    }
    assert_eq!(h.function().mapping(30), Some((0, false)));
    assert_eq!(h.function().mapping(31), Some((1, true)));
    assert_eq!(
        h.function().unload_left().as_deref(),
        Some("1 dirty page(s) stay on `ecd` (writing them back failed): `disk` alone does not hold the volume")
    );
}

#[test]
fn laptop_mode_writes_back_when_a_miss_wakes_the_disk_and_reads_ahead() {
    let mut p = lru(8);
    p.clean_on_spin_up = true;
    p.readahead_pages = 2;
    let mut h = harness(p);
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[30]);
    // A read miss wakes the disk: every dirty page goes back now (the copy's ECD read
    // behind the host's disk read), and pages 41 and 42 are ranked as read ahead.
    let a = h.request(2 * S, io(5, Op::Read, 40 * P, P as u32));
    assert_eq!(
        shape(&a),
        vec![(0, 40 * P, 4096, Op::Read), (1, 0, 4096, Op::Read)]
    );
    assert_eq!(h.counter("cleanings"), 1.0);
    assert_eq!(h.counter("readahead_ranked"), 2.0);
    assert!((40..=42).all(|pg| h.function().in_topk(pg)));
    assert!(!h.function().in_topk(43));
    // The plan waits for the cleaning (copies of one page never race); once it is done
    // the three pages are filled.
    let mut next = complete_all(&mut h, 2 * S, &a);
    while !submitted(&next).is_empty() {
        next = complete_all(&mut h, 2 * S, &next);
    }
    assert_eq!(h.function().mapping(30), Some((0, false)));
    assert!((40..=42).all(|pg| h.function().mapping(pg).is_some()));
    assert_eq!(h.counter("pages_prefetched"), 3.0);
}

#[test]
fn a_write_during_the_disks_spin_down_is_absorbed_only_with_asleep_from_spin_down() {
    // The same whole-page write to an unmapped page, sent while the disk spins down:
    // with the default the layer has not heard of STANDBY yet and sends it to the disk
    // (which will spin up again for it); with `spin-down` it lands on ECD page 0.
    let write = |id| io(id, Op::Write, 3 * P, P as u32);
    let mut h = harness(params(8));
    h.transition(S, 0, "standby");
    let a = h.request(S, write(1));
    assert_eq!(shape(&a), vec![(0, 3 * P, 4096, Op::Write)]);
    assert_eq!(h.counter("absorbed_writes"), 0.0);

    let mut p = params(8);
    p.asleep_from = AsleepFrom::SpinDown;
    let mut h = harness(p);
    let a = h.request(S / 2, write(1));
    assert_eq!(
        shape(&a),
        vec![(0, 3 * P, 4096, Op::Write)],
        "awake: to the disk"
    );
    h.complete(S / 2, submitted(&a)[0], Status::Ok);
    h.transition(S, 0, "standby");
    let a = h.request(S, write(2));
    assert_eq!(shape(&a), vec![(1, 0, 4096, Op::Write)]);
    assert_eq!(h.counter("absorbed_writes"), 1.0);
    // In standby, and while it spins up again (no I/O served until it is idle): absorbed.
    h.power(2 * S, 0, "standby");
    h.transition(3 * S, 0, "idle");
    let a = h.request(3 * S, io(3, Op::Write, 5 * P, P as u32));
    assert_eq!(shape(&a), vec![(1, P, 4096, Op::Write)]);
    // Idle: writes to unmapped pages go to the disk again.
    h.power(4 * S, 0, "idle");
    let a = h.request(4 * S, io(4, Op::Write, 6 * P, P as u32));
    assert_eq!(shape(&a), vec![(0, 6 * P, 4096, Op::Write)]);
    assert_eq!(h.counter("absorbed_writes"), 2.0);
}

#[test]
fn hits_in_neighbouring_ecd_pages_go_to_the_ecd_as_one_io() {
    // Disk pages 10–13 buffered into ECD pages 0–3; the disk awake again.
    let mut p = params(8);
    p.miss_threshold_per_min = 1e9;
    let mut h = harness(p.clone());
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[10, 11, 12, 13]);
    h.power(2 * S, 0, "idle");
    // Pages 10 to 13, unaligned at both ends: four hits, one ECD read from byte 512 of ECD
    // page 0 to 512 bytes short of ECD page 3's end.
    let a = h.request(2 * S, io(1, Op::Read, 10 * P + 512, 4 * P as u32 - 1024));
    assert_eq!(shape(&a), vec![(1, 512, 4 * P as u32 - 1024, Op::Read)]);
    assert_eq!(h.counter("read_hits"), 4.0);
    assert_eq!(h.counter("merged_hits"), 3.0);
    let busy = |h: &Harness<Exces>| {
        (0..4)
            .map(|s| h.function().slots[s].busy)
            .collect::<Vec<_>>()
    };
    assert_eq!(busy(&h), vec![1, 1, 1, 1]);
    let r = replied(&h.complete(3 * S, submitted(&a)[0], Status::Ok));
    assert_eq!(r[0].io, io(1, Op::Read, 10 * P + 512, 4 * P as u32 - 1024));
    assert_eq!(
        busy(&h),
        vec![0, 0, 0, 0],
        "the completion settles every ECD page"
    );
    // A write over pages 11 and 12: one ECD write; its completion settles both pages.
    let a = h.request(4 * S, io(2, Op::Write, 11 * P, 2 * P as u32));
    assert_eq!(shape(&a), vec![(1, P, 2 * P as u32, Op::Write)]);
    assert!((11..13).all(|pg| h.function().pages[&pg].writes == 1));
    assert_eq!(
        replied(&h.complete(5 * S, submitted(&a)[0], Status::Ok)).len(),
        1
    );
    assert!((11..13).all(|pg| h.function().pages[&pg].writes == 0));
    assert_eq!(busy(&h), vec![0, 0, 0, 0]);
    // Off: one ECD I/O a page, as before.
    p.merge_flash_pages = false;
    let mut h = harness(p);
    h.power(S, 0, "standby");
    buffer(&mut h, S, &[10, 11, 12, 13]);
    h.power(2 * S, 0, "idle");
    let a = h.request(2 * S, io(1, Op::Read, 10 * P, 4 * P as u32));
    assert_eq!(
        shape(&a),
        (0..4)
            .map(|s| (1, s * P, 4096, Op::Read))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_reconfiguration_brings_pages_in_in_disk_order_into_ascending_ecd_pages() {
    // Four rounds of reads of pages 7, 7, 7, 3, 3, 5: every access misses, and the 24th
    // (page 5's fourth: all three ranked now, 7 highest, then 3) crosses the trigger's
    // threshold of 23 misses a minute. The plan copies 3, 5, 7 into ECD pages 0, 1, 2 with
    // `merge_flash_pages`, and 7, 3, 5 (most popular first) without.
    for merge in [true, false] {
        let mut p = params(8);
        p.merge_flash_pages = merge;
        p.miss_threshold_per_min = 23.0;
        let mut h = harness(p);
        let mut last = Vec::new();
        let mut id = 1;
        for _ in 0..4 {
            for pg in [7u64, 7, 7, 3, 3, 5] {
                last = h.request(S, io(id, Op::Read, pg * P, P as u32));
                id += 1;
                if id <= 24 {
                    assert_eq!(h.counter("reconfigurations"), 0.0);
                    complete_all(&mut h, S, &last);
                }
            }
        }
        assert_eq!(h.counter("reconfigurations"), 1.0);
        let copies: Vec<u64> = submitted(&last)
            .iter()
            .filter(|i| i.dev == 0 && i.priority == COPY_PRIORITY)
            .map(|i| i.offset / P)
            .collect();
        let want = if merge { [3, 5, 7] } else { [7, 3, 5] };
        assert_eq!(copies, want, "merge = {merge}");
        let m = |pg| h.function().mapping(pg).map(|(s, _)| s);
        let slots = [m(want[0]), m(want[1]), m(want[2])];
        assert_eq!(slots, [Some(0), Some(1), Some(2)], "merge = {merge}");
    }
}

/// A layer of `cache` ECD pages without a persisted map (laptop mode's page cache), every
/// write buffered, no reconfiguration: page 5's write buffered in ECD page 0, dirty.
fn page_cache_holding_page_5(cache: u64) -> Harness<Exces> {
    let mut p = params(cache);
    p.persist_map = false;
    p.absorb = Absorb::Always;
    p.miss_threshold_per_min = 1e9;
    let mut h = Harness::new(Exces::new(p), vec![disk(0, "disk"), always_on(1, "ecd")]).unwrap();
    assert_eq!(h.start(0), vec![], "nothing to recover");
    buffer(&mut h, S, &[5]);
    h
}

/// A page's write that goes to the disk (no ECD page to take it) and a later write of the
/// same page that the ECD buffers: while the first is still out, the second must not be
/// written back to the disk beside it. The two disk writes would race, and a live
/// executor's workers complete them in any order: the older landing last, the disk holds
/// it under a page the cleaning marked clean, and a FLUSH covering the newer one is
/// answered (the live power-cut test lost laptop mode's block 335 this way, CI run of
/// 2026-12-06). The simulator serves the host's write first and never shows it.
#[test]
fn a_write_of_a_page_still_being_written_to_the_disk_is_not_buffered_and_written_back_beside_it() {
    let mut h = page_cache_holding_page_5(1);
    // W1 of page 7: no ECD page free or clean, so it goes to the disk, and stays out.
    let w1 = h.request(S, io(1, Op::Write, 7 * P, P as u32));
    assert_eq!(shape(&w1), vec![(0, 7 * P, 4096, Op::Write)]);
    // A FLUSH writes page 5 back: ECD page 0 is clean then.
    let f1 = io(2, Op::Flush, 0, 0);
    let copy = h.request(S, f1);
    let wb = complete_all(&mut h, S, &copy);
    assert_eq!(shape(&wb), vec![(0, 5 * P, 4096, Op::Write)]);
    let fl = complete_all(&mut h, S, &wb);
    assert_eq!(shape(&fl), vec![(0, 0, 0, Op::Flush)]);
    let r = complete_all(&mut h, S, &fl);
    assert_eq!(replied(&r).iter().map(|c| c.io).collect::<Vec<_>>(), [f1]);
    assert_eq!(h.function().mapping(5), Some((0, false)));
    // W2 of page 7 while W1 is out: to the disk as well, not into the clean ECD page.
    let w2 = h.request(2 * S, io(3, Op::Write, 7 * P, P as u32));
    assert_eq!(shape(&w2), vec![(0, 7 * P, 4096, Op::Write)]);
    assert_eq!(h.function().mapping(7), None);
    assert_eq!(h.counter("racing_writes_to_disk"), 1.0);
    // Back in either order, both are answered; nothing is dirty, a FLUSH flushes the disk.
    for w in [&w2, &w1] {
        let r = complete_all(&mut h, 3 * S, w);
        assert_eq!(replied(&r).len(), 1);
    }
    let f2 = io(4, Op::Flush, 0, 0);
    let fl = h.request(4 * S, f2);
    assert_eq!(shape(&fl), vec![(0, 0, 0, Op::Flush)]);
    let r = complete_all(&mut h, 4 * S, &fl);
    assert_eq!(replied(&r).iter().map(|c| c.io).collect::<Vec<_>>(), [f2]);
    // With nothing of page 7 out, its next write is buffered again.
    let w3 = h.request(5 * S, io(5, Op::Write, 7 * P, P as u32));
    assert_eq!(shape(&w3), vec![(1, 0, 4096, Op::Write)]);
}

/// A cleaning that starts while a host write of a dirty page is out to its ECD page: the
/// copy's read may be served before that write (a live executor's workers complete I/O in
/// any order), so the copy carries the data from before it, and the page must stay dirty
/// once the copy is on the disk. Marked clean, it would later be dropped from the ECD and
/// read from the disk, older than the write acknowledged (the swarm's seed 58 with the
/// devices' `fault.reorder`).
#[test]
fn a_cleaning_beside_a_write_of_the_page_leaves_it_dirty() {
    let mut h = page_cache_holding_page_5(2);
    // W of page 5 goes to ECD page 0 and stays out.
    let w = h.request(S, io(1, Op::Write, 5 * P, P as u32));
    assert_eq!(shape(&w), vec![(1, 0, 4096, Op::Write)]);
    // A FLUSH: the cleaning's copy reads ECD page 0, served before W.
    let f = io(2, Op::Flush, 0, 0);
    let copy = h.request(S, f);
    assert_eq!(shape(&copy), vec![(1, 0, 4096, Op::Read)]);
    let wb = complete_all(&mut h, S, &copy);
    assert_eq!(shape(&wb), vec![(0, 5 * P, 4096, Op::Write)]);
    let fl = complete_all(&mut h, S, &wb);
    assert_eq!(shape(&fl), vec![(0, 0, 0, Op::Flush)]);
    let r = complete_all(&mut h, S, &fl);
    assert_eq!(replied(&r).iter().map(|c| c.io).collect::<Vec<_>>(), [f]);
    // What the disk holds may be from before W: page 5 stays dirty.
    assert_eq!(h.function().mapping(5), Some((0, true)));
    assert_eq!(h.counter("pages_written_back"), 0.0);
    let r = complete_all(&mut h, 2 * S, &w);
    assert_eq!(replied(&r).len(), 1);
    // The next cleaning, with nothing out, leaves it clean.
    let f = io(3, Op::Flush, 0, 0);
    let copy = h.request(3 * S, f);
    let wb = complete_all(&mut h, 3 * S, &copy);
    let fl = complete_all(&mut h, 3 * S, &wb);
    let r = complete_all(&mut h, 3 * S, &fl);
    assert_eq!(replied(&r).iter().map(|c| c.io).collect::<Vec<_>>(), [f]);
    assert_eq!(h.function().mapping(5), Some((0, false)));
    assert_eq!(h.counter("pages_written_back"), 1.0);
}

/// A page the map's log maps (it was dirty at a sync) and clean now: when its ECD page is
/// dropped after a failed read, the unmap record is logged at once — else a crash would
/// bring the entry back, dirty as recovery takes every entry, and its reads would fail.
#[test]
fn an_ecd_page_the_log_maps_dropped_after_a_failed_read_is_unmapped_in_the_log_at_once() {
    let mut p = lru(8);
    p.clean_on_spin_up = true;
    let mut h = harness(p);
    buffer(&mut h, S, &[30]);
    // A FLUSH: page 30's map entry is logged (a sync).
    let mut a = h.request(S, io(1, Op::Flush, 0, 0));
    while !submitted(&a).is_empty() {
        a = complete_all(&mut h, S, &a);
    }
    assert_eq!(h.counter("map_syncs"), 1.0);
    // The disk sleeps; a miss wakes it and page 30 is written back: clean, still logged.
    h.power(2 * S, 0, "standby");
    let mut a = h.request(3 * S, io(2, Op::Read, 40 * P, P as u32));
    while !submitted(&a).is_empty() {
        a = complete_all(&mut h, 3 * S, &a);
    }
    assert_eq!(h.function().mapping(30), Some((0, false)));
    // Its read fails on the ECD: to the disk, and a sync starts at once — no dirty data
    // to flush first: the unmap record's write, in the map's region after the 8 pages.
    let a = h.request(4 * S, io(3, Op::Read, 30 * P, P as u32));
    let r = h.complete(4 * S, submitted(&a)[0], Status::IoError);
    let got = shape(&r);
    assert_eq!(got[0], (0, 30 * P, 4096, Op::Read));
    assert_eq!((got.len(), got[1].0, got[1].3), (2, 1, Op::Write));
    assert!(got[1].1 >= 8 * P, "{got:?}");
    assert_eq!(h.counter("map_syncs"), 2.0);
    let mut next = r;
    while !submitted(&next).is_empty() {
        next = complete_all(&mut h, 4 * S, &next);
    }
    assert_eq!(h.function().mapping(30), None);
    assert_eq!(h.counter("ecd_bad_pages"), 1.0);
}

#[test]
fn a_failed_ecd_read_of_clean_pages_goes_to_the_disk_and_of_a_dirty_page_fails() {
    let mut h = harness(lru(4));
    // Pages 10, 11 and 12 filled (clean) into ECD pages 0, 1 and 2; 12 then written (a
    // hit: dirty on the ECD, the disk's copy stale).
    for (k, page) in [10, 11, 12].into_iter().enumerate() {
        read_all(&mut h, (k as u64 + 1) * S, k as u64 + 1, page);
        assert_eq!(h.function().mapping(page), Some((k as u32, false)));
    }
    let w = h.request(4 * S, io(4, Op::Write, 12 * P, P as u32));
    complete_all(&mut h, 4 * S, &w);
    assert_eq!(h.function().mapping(12), Some((2, true)));
    // A failed read of the dirty page, alone or with a clean one, is not sent to the
    // disk: the error goes up, and the pages stay where they are.
    for (id, offset, len) in [(5, 12 * P, P as u32), (6, 11 * P, 2 * P as u32)] {
        let a = h.request(5 * S, io(id, Op::Read, offset, len));
        let r = h.complete(5 * S, submitted(&a)[0], Status::IoError);
        assert!(submitted(&r).is_empty(), "{r:?}");
        assert_eq!(replied(&r)[0].status, Status::IoError);
    }
    assert_eq!(h.function().mapping(11), Some((1, false)));
    assert_eq!(h.function().mapping(12), Some((2, true)));
    assert_eq!(h.counter("ecd_bad_pages"), 0.0);
    // A read of 10 and 11 (one merged ECD read) and one of 10 alone, both out; the first
    // fails …
    let a = h.request(6 * S, io(7, Op::Read, 10 * P + 512, 2 * P as u32 - 1024));
    assert_eq!(shape(&a), vec![(1, 512, 2 * P as u32 - 1024, Op::Read)]);
    let b = h.request(6 * S, io(8, Op::Read, 10 * P, P as u32));
    assert_eq!(shape(&b), vec![(1, 0, P as u32, Op::Read)]);
    let r = h.complete(6 * S, submitted(&a)[0], Status::IoError);
    // … and goes to the pages' place on the disk, under its id; ECD pages 0 and 1 are
    // dropped and out of use.
    assert!(replied(&r).is_empty(), "{r:?}");
    assert_eq!(
        shape(&r),
        vec![(0, 10 * P + 512, 2 * P as u32 - 1024, Op::Read)]
    );
    assert_eq!(submitted(&r)[0].id, submitted(&a)[0].id);
    assert_eq!(
        (h.function().mapping(10), h.function().mapping(11)),
        (None, None)
    );
    assert_eq!(h.counter("ecd_bad_pages"), 2.0);
    let back = h.complete(6 * S, submitted(&r)[0], Status::Ok);
    let c = replied(&back);
    assert_eq!((c.len(), c[0].io.id, c[0].status), (1, IoId(7), Status::Ok));
    // The read of 10 that was out on ECD page 0 fails too: to the disk as well.
    let r = h.complete(6 * S, submitted(&b)[0], Status::IoError);
    assert_eq!(shape(&r), vec![(0, 10 * P, P as u32, Op::Read)]);
    let c = replied(&h.complete(6 * S, submitted(&r)[0], Status::Ok));
    assert_eq!((c[0].io.id, c[0].status), (IoId(8), Status::Ok));
    assert_eq!(
        (
            h.counter("ecd_read_errors"),
            h.counter("reads_retried_at_disk")
        ),
        (4.0, 2.0)
    );
    // Page 10 read again: from the disk (no failed ECD read first), and filled into the
    // one good free ECD page, 3 — never 0 or 1.
    let first = read_all(&mut h, 7 * S, 9, 10);
    assert_eq!(
        first,
        vec![(0, 10 * P, P as u32, Op::Read); 2],
        "the host's, the fill's"
    );
    assert_eq!(h.function().mapping(10), Some((3, false)));
    // The disk failing too: the error goes up (and ECD page 3 is out of use).
    let a = h.request(8 * S, io(10, Op::Read, 10 * P, P as u32));
    let r = h.complete(8 * S, submitted(&a)[0], Status::IoError);
    let back = h.complete(8 * S, submitted(&r)[0], Status::IoError);
    assert_eq!(replied(&back)[0].status, Status::IoError);
    assert!(submitted(&back).is_empty());
    assert_eq!(h.counter("ecd_bad_pages"), 3.0);
    // Page 11 read: from the disk, and nowhere to fill it (the only ECD page in use holds
    // dirty 12; the others are out of use).
    read_all(&mut h, 9 * S, 11, 11);
    assert_eq!(h.function().mapping(11), None);
    assert_eq!(h.function().mapping(12), Some((2, true)));

    // Off: a clean page's failed read goes up too.
    let mut p = lru(4);
    p.retry_failed_reads = false;
    let mut h = harness(p);
    read_all(&mut h, S, 1, 10);
    let a = h.request(2 * S, io(2, Op::Read, 10 * P, P as u32));
    let r = h.complete(2 * S, submitted(&a)[0], Status::IoError);
    assert!(submitted(&r).is_empty());
    assert_eq!(replied(&r)[0].status, Status::IoError);
}

// ---- the pair's identity (`pair_label`) --------------------------------------------------

/// The bytes of the two logs' regions on their devices, across sessions.
#[derive(Clone)]
struct PairImages {
    card: Vec<u8>,
    disk: Vec<u8>,
}

impl PairImages {
    fn blank() -> PairImages {
        PairImages {
            card: vec![0; map_log::region_len(4) as usize],
            disk: vec![0; pair::disk_region_len() as usize],
        }
    }
}

/// One labelled session: the harness, its images, what it failed with.
struct PairRun {
    h: Harness<Exces>,
    img: PairImages,
    fail: Option<String>,
}

impl PairRun {
    /// A labelled pair of 4 ECD pages (a new pair's id `id`) started on `img`; `keep`
    /// leaves dirty pages on the card at a clean unload. The start's actions.
    fn start(id: u64, keep: bool, img: &PairImages) -> (PairRun, Vec<Action>) {
        let mut p = params(4);
        p.pair_label = true;
        p.miss_threshold_per_min = 1e9;
        p.clean_on_stop = !keep;
        let exces = Exces::new(p).pair_id(id);
        let h = Harness::new(exces, vec![disk(0, "disk"), always_on(1, "ecd")]).unwrap();
        let mut r = PairRun {
            h,
            img: img.clone(),
            fail: None,
        };
        let a = r.h.start(0);
        let acts = r.drive(0, a);
        (r, acts)
    }

    /// Land `acts` (the last event's) in the images, then answer every I/O they submit
    /// (OK, at `now`) and every region read's bytes, depth first, landing each event's
    /// writes before the next: every action on the way, `acts` first.
    fn drive(&mut self, now: Nanos, acts: Vec<Action>) -> Vec<Action> {
        let regions = self.h.function().regions();
        self.h.land(&acts, regions[0], &mut self.img.card);
        self.h.land(&acts, regions[1], &mut self.img.disk);
        for a in &acts {
            if let Action::Fail { msg } = a {
                self.fail = Some(String::from_utf8_lossy(self.h.data(*msg)).into_owned());
            }
        }
        let mut all = acts.clone();
        for a in acts {
            let next = match a {
                Action::Submit(io) => self.h.complete(now, io, Status::Ok),
                Action::Take { len, tag, .. } => {
                    let bytes = if len as u64 == regions[0].len {
                        self.img.card.clone()
                    } else {
                        assert_eq!(len as u64, regions[1].len);
                        self.img.disk.clone()
                    };
                    self.h.bytes(now, tag, &bytes)
                }
                _ => continue,
            };
            all.extend(self.drive(now, next));
        }
        all
    }

    /// Write disk page `page` while the disk sleeps (buffered), then FLUSH: its entry
    /// durable on the card.
    fn buffer_durably(&mut self, page: u64, id: u64) {
        self.h.power(S, 0, "standby");
        let a = self.h.request(S, io(id, Op::Write, page * P, P as u32));
        assert_eq!(shape(&a)[0].0, 1, "buffered in the ECD");
        assert_eq!(replied(&self.drive(S, a)).len(), 1);
        let a = self.h.request(S, io(id + 1, Op::Flush, 0, 0));
        let r = replied(&self.drive(S, a));
        assert_eq!((r.len(), r[0].status), (1, Status::Ok));
    }
}

/// Start a labelled pair on `img`: what it failed with.
fn pair_refusal(img: &PairImages) -> Option<String> {
    PairRun::start(8, true, img).0.fail
}

#[test]
fn a_pair_label_refuses_another_card_while_the_disk_is_open_and_a_clean_unload_drops_the_cards_entries(
) {
    // A new pair: the label at the disk's end, whole blocks before its 10^9 bytes; the
    // volume before it; the card not exported on its own.
    let (mut r, acts) = PairRun::start(7, true, &PairImages::blank());
    assert_eq!(r.fail, None);
    let label_at = 244_135 * P;
    assert_eq!(
        r.h.function().regions()[1],
        Region {
            dev: 0,
            offset: label_at,
            len: 20_480
        }
    );
    let v = r.h.function().volume().expect("a volume");
    assert_eq!((v.size, v.members), (label_at, vec![0, 1]));
    // The card's header carries the pair's id before the disk says open.
    let writes: Vec<u16> = submitted(&acts)
        .iter()
        .filter(|i| i.op == Op::Write)
        .map(|i| i.dev)
        .collect();
    let card_first = writes.iter().position(|&d| d == 1).unwrap();
    let disk_last = writes.iter().rposition(|&d| d == 0).unwrap();
    assert!(
        card_first < disk_last && writes[card_first..].contains(&0),
        "{writes:?}"
    );
    // A request into the label is refused; the volume's are served.
    let a = r.h.request(S, io(1, Op::Write, label_at, P as u32));
    assert_eq!(replied(&a)[0].status, Status::Invalid);
    assert!(submitted(&a).is_empty());
    r.buffer_durably(30, 2);
    let crashed = r.img.clone();
    // After a crash the disk is open: the same card's entry comes back dirty.
    let (r, _) = PairRun::start(8, true, &crashed);
    assert_eq!(
        (r.fail, r.h.function().mapping(30)),
        (None, Some((0, true)))
    );
    // A blank card in its place is refused (its page would be read stale from the disk),
    // and so is another pair's; nothing is served.
    let blank_card = PairImages {
        card: PairImages::blank().card,
        ..crashed.clone()
    };
    let (mut r, _) = PairRun::start(8, true, &blank_card);
    let e = r.fail.clone().expect("refused");
    assert!(
        e.starts_with("exces-4: the pair: `disk` (pair 0000000000000007) was not unloaded cleanly: its own card may hold pages newer than the disk, and `ecd` is blank."),
        "{e}"
    );
    let a = r.h.request(S, io(9, Op::Read, 30 * P, P as u32));
    assert_eq!(
        (replied(&a)[0].status, submitted(&a).len()),
        (Status::IoError, 0)
    );
    let (mut other, _) = PairRun::start(9, true, &PairImages::blank());
    other.buffer_durably(31, 2);
    let other = other.img;
    let e = pair_refusal(&PairImages {
        card: other.card.clone(),
        ..crashed.clone()
    })
    .expect("refused");
    assert!(
        e.contains("and `ecd` is pair 0000000000000009's card."),
        "{e}"
    );
    // A clean unload: the page back on the disk, then the disk's state clean (last).
    let (mut r, _) = PairRun::start(8, false, &crashed);
    let a = r.h.stop(2 * S);
    let acts = r.drive(2 * S, a);
    assert_eq!(r.h.counter("pages_written_back"), 1.0);
    let last = submitted(&acts)
        .into_iter()
        .rfind(|i| i.op == Op::Write)
        .unwrap();
    assert_eq!((last.dev, last.offset >= label_at), (0, true));
    let clean = r.img;
    // The next start drops the card's entry (the disk holds the page: a disk used alone
    // since is not served the card's older copy) …
    let (r, _) = PairRun::start(8, true, &clean);
    assert_eq!((r.fail, r.h.function().mapping(30)), (None, None));
    assert_eq!(r.h.counter("pair_dropped_pages"), 1.0);
    // … takes a blank card …
    let blank_card = PairImages {
        card: PairImages::blank().card,
        ..clean.clone()
    };
    assert_eq!(pair_refusal(&blank_card), None);
    // … but not a card holding another disk's pages.
    let e = pair_refusal(&PairImages {
        card: other.card.clone(),
        ..clean.clone()
    })
    .expect("refused");
    assert!(
        e.contains("`ecd` caches 1 page(s) of pair 0000000000000009's disk, not of `disk` (pair 0000000000000007, unloaded cleanly)"),
        "{e}"
    );
    // That card over a disk without a label is refused too …
    let e = pair_refusal(&PairImages {
        card: other.card.clone(),
        disk: PairImages::blank().disk,
    })
    .expect("refused");
    assert!(e.contains("and `disk` carries no pair label"), "{e}");
    // … and a disk whose end holds other data is never written.
    let used = PairImages {
        card: PairImages::blank().card,
        disk: vec![0x5a; 20_480],
    };
    let (r, acts) = PairRun::start(8, true, &used);
    let e = r.fail.expect("refused");
    assert!(e.contains("hold data that is not one"), "{e}");
    assert!(
        submitted(&acts)
            .iter()
            .all(|i| !(i.dev == 0 && i.op == Op::Write)),
        "nothing written to the disk"
    );
    assert_eq!(r.img.disk, used.disk);
}

#[test]
fn a_new_pair_says_open_on_the_disk_only_once_the_cards_label_is_durable_and_serves_after() {
    let mut p = params(4);
    p.pair_label = true;
    let exces = Exces::new(p).pair_id(7);
    let mut h = Harness::new(exces, vec![disk(0, "disk"), always_on(1, "ecd")]).unwrap();
    let reads = submitted(&h.start(0));
    assert_eq!(
        reads.iter().map(|i| (i.dev, i.op)).collect::<Vec<_>>(),
        vec![(0, Op::Read), (1, Op::Read)]
    );
    let early = io(1, Op::Read, 3 * P, P as u32);
    assert!(h.request(0, early).is_empty(), "waits for the start");
    let mut headers = Vec::new();
    for r in reads {
        let take = h.complete(0, r, Status::Ok);
        let Action::Take { tag, len, .. } = take[0] else {
            panic!("{take:?}")
        };
        headers.extend(submitted(&h.bytes(0, tag, &vec![0; len as usize])));
    }
    // Both blank: each formatted (its header, with the pair's label).
    assert_eq!(
        headers.iter().map(|i| (i.dev, i.op)).collect::<Vec<_>>(),
        vec![(0, Op::Write), (1, Op::Write)]
    );
    // The disk's header lands; the card's is still out: the disk is not said open yet.
    assert!(submitted(&h.complete(0, headers[0], Status::Ok)).is_empty());
    // The card's lands: now the disk's state (a checkpoint: its snapshot, then its
    // header), and only then the early read.
    let a = h.complete(0, headers[1], Status::Ok);
    let snap = submitted(&a);
    assert_eq!((snap.len(), snap[0].dev, snap[0].op), (1, 0, Op::Write));
    let hdr = submitted(&h.complete(0, snap[0], Status::Ok));
    assert_eq!((hdr.len(), hdr[0].dev, hdr[0].fua), (1, 0, true));
    let served = h.complete(0, hdr[0], Status::Ok);
    assert_eq!(shape(&served), vec![(0, 3 * P, 4096, Op::Read)]);
}
