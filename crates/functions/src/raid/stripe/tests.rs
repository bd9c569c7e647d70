//! The RAID layer driven by hand: which member I/Os and parity computations it issues.

use super::*;
use std::collections::{BTreeMap, VecDeque};
use wattio_core::function::Action;
use wattio_core::testing::{disk, replied, submitted, Harness};
use wattio_core::Request;

const K: u64 = 4096;

fn raid(level: Level, parity: Parity, disks: usize, clean: bool) -> Harness<Raid> {
    let names: Vec<String> = (0..disks).map(|d| format!("d{d}")).collect();
    let devs = (0..disks)
        .map(|d| disk(d as u16, &format!("d{d}")))
        .collect();
    Harness::new(Raid::new(names, level, parity, K, clean), devs).unwrap()
}

fn host(id: u64, op: Op, block: u64, blocks: u64) -> Io {
    Request::new(0, op, block * K, (blocks * K) as u32).io(id)
}

/// (device, member offset in pages, op) of the submitted I/Os, in order.
fn shape(ios: &[Io]) -> Vec<(u16, u64, Op)> {
    ios.iter()
        .map(|io| (io.dev, io.offset / K, io.op))
        .collect()
}

fn xors(actions: &[Action]) -> Vec<(Buf, Buf, u32)> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::Xor { dst, src, len } => Some((dst, src, len)),
            _ => None,
        })
        .collect()
}

fn host_buf(id: u64, offset: u64) -> Buf {
    Buf::Host {
        id,
        offset: offset as u32,
    }
}

#[test]
fn raid0_splits_a_read_into_chunk_pieces_round_robin() {
    let mut h = raid(Level::Raid0, Parity::LeftSymmetric, 3, false);
    // Blocks 2..6: chunk 2 on d2 (stripe 0), chunks 3, 4, 5 on d0, d1, d2 (stripe 1).
    let io = host(1, Op::Read, 2, 4);
    let subs = submitted(&h.request(0, io));
    assert_eq!(
        shape(&subs),
        vec![
            (2, 0, Op::Read),
            (0, 1, Op::Read),
            (1, 1, Op::Read),
            (2, 1, Op::Read)
        ]
    );
    let bufs: Vec<Buf> = subs.iter().map(|s| s.buf).collect();
    assert_eq!(bufs, (0..4).map(|k| host_buf(1, k * K)).collect::<Vec<_>>());
    for (i, s) in subs.iter().enumerate() {
        let r = h.complete(1, *s, Status::Ok);
        assert_eq!(replied(&r).len(), usize::from(i == 3));
    }
    // A device error is the request's error: RAID-0 has no redundancy.
    let io = host(2, Op::Read, 0, 1);
    let s = submitted(&h.request(2, io))[0];
    let r = replied(&h.complete(3, s, Status::IoError));
    assert_eq!((r[0].io, r[0].status), (io, Status::IoError));
}

#[test]
fn raid5_full_row_write_of_table_i_row_2() {
    // Table I's five-disk gear, row 2: blocks 5–8 on disks 1, 2, 3, 5 and (5-8) on disk 4.
    let mut h = raid(Level::Raid5, Parity::LeftAsymmetric, 5, false);
    let io = host(7, Op::Write, 4, 4);
    let a = h.request(0, io);
    let p = Buf::Scratch {
        id: SCRATCH_BASE,
        offset: (4 * K) as u32,
    };
    assert_eq!(
        xors(&a),
        (0..4)
            .map(|k| (p, host_buf(7, k * K), K as u32))
            .collect::<Vec<_>>(),
        "parity = 5 ^ 6 ^ 7 ^ 8, no reads"
    );
    let w = submitted(&a);
    assert_eq!(
        shape(&w),
        vec![
            (0, 1, Op::Write),
            (1, 1, Op::Write),
            (2, 1, Op::Write),
            (4, 1, Op::Write),
            (3, 1, Op::Write)
        ]
    );
    assert_eq!(
        w[3].buf,
        host_buf(7, 3 * K),
        "block 8 from the host's fourth page"
    );
    assert_eq!(w[4].buf, p);
    assert!(
        a.iter().position(|x| matches!(x, Action::Xor { .. }))
            < a.iter().position(|x| matches!(x, Action::Submit(_)))
    );
    for (i, s) in w.iter().enumerate() {
        let r = replied(&h.complete(1, *s, Status::Ok));
        assert_eq!(r.len(), usize::from(i == 4));
    }
    assert_eq!(h.counter("full_row_writes"), 1.0);
}

#[test]
fn raid5_small_write_reads_old_data_and_parity_then_writes_both() {
    // Left-symmetric, 4 disks: chunk 4 is data chunk 1 of stripe 1 (parity on d2), on d0.
    let mut h = raid(Level::Raid5, Parity::LeftSymmetric, 4, true);
    let io = host(3, Op::Write, 4, 1);
    let a = h.request(0, io);
    let reads = submitted(&a);
    assert_eq!(shape(&reads), vec![(0, 1, Op::Read), (2, 1, Op::Read)]);
    let old = Buf::Scratch {
        id: SCRATCH_BASE,
        offset: K as u32,
    };
    let par = Buf::Scratch {
        id: SCRATCH_BASE,
        offset: (3 * K) as u32,
    };
    assert_eq!((reads[0].buf, reads[1].buf), (old, par));
    assert!(h.complete(1, reads[0], Status::Ok).is_empty());
    let a = h.complete(2, reads[1], Status::Ok);
    assert_eq!(
        xors(&a),
        vec![(par, old, K as u32), (par, host_buf(3, 0), K as u32)],
        "parity ^= old ^ new"
    );
    let w = submitted(&a);
    assert_eq!(shape(&w), vec![(0, 1, Op::Write), (2, 1, Op::Write)]);
    assert_eq!((w[0].buf, w[1].buf), (host_buf(3, 0), par));
    h.complete(3, w[0], Status::Ok);
    let r = replied(&h.complete(4, w[1], Status::Ok));
    assert_eq!((r[0].io, r[0].status), (io, Status::Ok));
    assert_eq!(h.counter("read_modify_writes"), 1.0);
}

#[test]
fn a_write_to_a_row_of_unknown_parity_reconstructs_it_and_a_second_waits_for_the_first() {
    let mut h = raid(Level::Raid5, Parity::LeftSymmetric, 4, false);
    // Chunk 4 on d0 (stripe 1, parity d2); the other data: chunk 3 on d3, chunk 5 on d1.
    let first = h.request(0, host(1, Op::Write, 4, 1));
    assert_eq!(
        shape(&submitted(&first)),
        vec![(3, 1, Op::Read), (1, 1, Op::Read)]
    );
    // A second write to the same stripe issues nothing until the first is done.
    assert!(h.request(1, host(2, Op::Write, 5, 1)).is_empty());
    let reads = submitted(&first);
    h.complete(2, reads[0], Status::Ok);
    let a = h.complete(2, reads[1], Status::Ok);
    let w = submitted(&a);
    assert_eq!(shape(&w), vec![(0, 1, Op::Write), (2, 1, Op::Write)]);
    assert_eq!(xors(&a).len(), 3, "parity = d3 ^ new ^ d1");
    h.complete(3, w[0], Status::Ok);
    let a = h.complete(3, w[1], Status::Ok);
    assert_eq!(replied(&a).len(), 1);
    // The row is now known: the second write is a read-modify-write (old d1, parity).
    assert_eq!(
        shape(&submitted(&a)),
        vec![(1, 1, Op::Read), (2, 1, Op::Read)]
    );
    assert_eq!(h.counter("reconstruct_writes"), 1.0);
    assert_eq!(h.counter("read_modify_writes"), 1.0);
}

#[test]
fn a_bad_page_is_rebuilt_from_the_others_into_the_hosts_buffer() {
    let mut h = raid(Level::Raid5, Parity::LeftSymmetric, 3, true);
    // Chunk 1 (stripe 0: parity d2, data d0, d1) is on d1.
    let io = host(5, Op::Read, 1, 1);
    let s = submitted(&h.request(0, io))[0];
    assert_eq!((s.dev, s.offset), (1, 0));
    // It fails; the page alone is retried, fails again, and is rebuilt: d0 straight into
    // the host's buffer, parity into scratch, XOR-ed in.
    let retry = submitted(&h.complete(1, s, Status::IoError));
    assert_eq!(shape(&retry), vec![(1, 0, Op::Read)]);
    assert_eq!(retry[0].buf, host_buf(5, 0));
    let a = h.complete(2, retry[0], Status::IoError);
    let rebuild = submitted(&a);
    assert_eq!(shape(&rebuild), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    assert_eq!(rebuild[0].buf, host_buf(5, 0));
    h.complete(3, rebuild[0], Status::Ok);
    let a = h.complete(3, rebuild[1], Status::Ok);
    assert_eq!(xors(&a), vec![(host_buf(5, 0), rebuild[1].buf, K as u32)]);
    // Nothing writes the parity's scratch buffer out: the layer releases it (else live
    // and the data checker would keep it for the session).
    let Buf::Scratch { id, .. } = rebuild[1].buf else {
        panic!("parity read into scratch")
    };
    assert!(a.iter().any(
        |x| matches!(x, Action::Release { buf: Buf::Scratch { id: r, offset: 0 } } if *r == id)
    ));
    let r = replied(&a);
    assert_eq!((r[0].io, r[0].status), (io, Status::Ok));
    assert_eq!(h.counter("bad_pages"), 1.0);
    // The next read of the page goes to the rebuild at once; a write to it updates only
    // the parity (reconstruct-write: read d0, parity = d0 ^ new).
    let a = h.request(4, host(6, Op::Write, 1, 1));
    assert_eq!(shape(&submitted(&a)), vec![(0, 0, Op::Read)]);
    let a = h.complete(5, submitted(&a)[0], Status::Ok);
    assert_eq!(shape(&submitted(&a)), vec![(2, 0, Op::Write)]);
    // The parity write drains its buffer: no release.
    let a = h.complete(6, submitted(&a)[0], Status::Ok);
    assert_eq!(replied(&a).len(), 1);
    assert!(!a.iter().any(|x| matches!(x, Action::Release { .. })));
}

#[test]
fn a_bad_page_of_a_row_whose_parity_is_unknown_is_an_error_not_a_guess() {
    let mut h = raid(Level::Raid5, Parity::LeftSymmetric, 3, false);
    let io = host(5, Op::Read, 1, 1);
    let s = submitted(&h.request(0, io))[0];
    let retry = submitted(&h.complete(1, s, Status::IoError))[0];
    let r = replied(&h.complete(2, retry, Status::IoError));
    assert_eq!((r[0].io, r[0].status), (io, Status::IoError));
    assert_eq!(h.counter("unknown_row_errors"), 1.0);
}

#[test]
fn a_flush_goes_to_every_member_and_is_answered_once() {
    let mut h = raid(Level::Raid5, Parity::LeftSymmetric, 3, false);
    let io = Request::new(0, Op::Flush, 0, 0).io(9);
    let subs = submitted(&h.request(0, io));
    let devs: Vec<u16> = subs.iter().map(|s| s.dev).collect();
    assert_eq!(devs, vec![0, 1, 2]);
    assert!(subs.iter().all(|s| s.op == Op::Flush));
    h.complete(1, subs[0], Status::Ok);
    h.complete(1, subs[2], Status::Ok);
    let r = replied(&h.complete(2, subs[1], Status::Ok));
    assert_eq!((r[0].io, r[0].status), (io, Status::Ok));
    // Past the end (2 data disks × 1 GB / 4 KiB stripes): refused without device work.
    let cap = h.function().layout().capacity();
    assert_eq!(cap, 2 * (1_000_000_000 / K) * K);
    let a = h.request(3, Request::new(0, Op::Read, cap - K, 2 * K as u32).io(10));
    assert!(submitted(&a).is_empty());
    assert_eq!(replied(&a)[0].status, Status::Invalid);
}

#[test]
fn a_row_with_two_bad_pages_answers_eio() {
    let mut h = raid(Level::Raid5, Parity::LeftSymmetric, 3, true);
    // Stripe 0: data d0, d1, parity d2. A write to chunk 0 is a reconstruct-write (one read,
    // of d1); that read fails: d1's page is bad, and the write is planned again as a
    // read-modify-write (old d0, old parity).
    let io = host(1, Op::Write, 0, 1);
    let reads = submitted(&h.request(0, io));
    assert_eq!(shape(&reads), vec![(1, 0, Op::Read)]);
    let reads = submitted(&h.complete(1, reads[0], Status::IoError));
    assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    h.complete(2, reads[0], Status::Ok);
    let w = submitted(&h.complete(2, reads[1], Status::Ok));
    assert_eq!(shape(&w), vec![(0, 0, Op::Write), (2, 0, Op::Write)]);
    h.complete(3, w[0], Status::Ok);
    assert_eq!(
        replied(&h.complete(3, w[1], Status::Ok))[0].status,
        Status::Ok
    );
    // Chunk 1 (on d1's bad page) is rebuilt at once from d0 and the parity; the parity
    // read fails too: two bad pages in the row, nothing to rebuild from.
    let io = host(2, Op::Read, 1, 1);
    let reads = submitted(&h.request(4, io));
    assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    h.complete(5, reads[0], Status::Ok);
    let r = replied(&h.complete(5, reads[1], Status::IoError));
    assert_eq!((r[0].io, r[0].status), (io, Status::IoError));
    assert_eq!(h.counter("bad_pages"), 2.0);
    // Another row of the same members is unaffected.
    let s = submitted(&h.request(6, host(3, Op::Read, 2, 1)));
    assert_eq!(shape(&s), vec![(2, 1, Op::Read)]);
}

#[test]
fn io_for_a_device_outside_the_array_passes_through() {
    // Members d0..d2, and a flash card (device 3) a cache above the array uses for itself:
    // its I/O — with an id the cache made its own — is neither striped nor answered here.
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let mut devs: Vec<_> = (0..3).map(|d| disk(d as u16, &format!("d{d}"))).collect();
    devs.push(disk(3, "flash"));
    let mut h = Harness::new(
        Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true),
        devs,
    )
    .unwrap();
    let mut io = Io::own(7, Op::Write, 3, 5 * K, K as u32);
    io.fua = true;
    assert_eq!(submitted(&h.request(0, io)), vec![io]);
    let done: Vec<Io> = replied(&h.complete(10, io, Status::Ok))
        .iter()
        .map(|c| c.io)
        .collect();
    assert_eq!(done, vec![io]);
}

fn persisted(disks: usize, max: u64) -> Harness<Raid> {
    let names: Vec<String> = (0..disks).map(|d| format!("d{d}")).collect();
    let devs = (0..disks)
        .map(|d| disk(d as u16, &format!("d{d}")))
        .collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true).persist(max);
    Harness::new(r, devs).unwrap()
}

/// The one write of the bad-page log in `actions`.
fn log_write(actions: &[Action], region: Region) -> Io {
    let w: Vec<Io> = submitted(actions)
        .into_iter()
        .filter(|io| io.dev == region.dev && io.offset >= region.offset)
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].fua && w[0].op == Op::Write);
    w[0]
}

#[test]
fn a_write_that_marks_a_page_bad_is_answered_once_the_record_is_durable() {
    let mut h = persisted(3, 4096);
    // The log is in d0's last blocks, and the array ends before it on every member.
    let region = h.function().regions()[0];
    assert_eq!(
        (region.dev, region.offset + region.len),
        (0, 1_000_000_000 / K * K)
    );
    // 2 headers + 2 snapshot slots of 4 + 4096 × 10 bytes (11 blocks) + 256 KiB of journal.
    assert_eq!(region.len, (2 + 2 * 11 + 64) * K);
    let stripes = region.offset / K;
    assert_eq!(h.function().volume().unwrap().size, stripes * 2 * K);
    // A request before the list is read back waits; recovery of a blank region then lets
    // it go: a reconstruct-write of chunk 0 (stripe 0: data d0, d1, parity d2) reads d1.
    let io = host(1, Op::Write, 0, 1);
    assert!(submitted(&h.request(0, io)).is_empty());
    let reads = submitted(&h.recover_log(&vec![0; region.len as usize]));
    assert_eq!(shape(&reads), vec![(1, 0, Op::Read)]);
    let w = submitted(&h.complete(1, reads[0], Status::Ok));
    assert_eq!(shape(&w), vec![(0, 0, Op::Write), (2, 0, Op::Write)]);
    // The data write fails: d0's page is bad, and its record goes to the log.
    let a = h.complete(2, w[0], Status::IoError);
    let log = log_write(&a, region);
    // The parity write lands: the row holds the new data (in its parity), but the reply
    // waits for the record.
    assert!(replied(&h.complete(3, w[1], Status::Ok)).is_empty());
    let r = replied(&h.complete(4, log, Status::Ok));
    assert_eq!((r[0].io, r[0].status), (io, Status::Ok));
    assert_eq!(h.counter("held_replies"), 1.0);
    assert_eq!(h.counter("bad_pages"), 1.0);
    // A read of the bad page is rebuilt from d1 and the parity, not read from d0.
    let reads = submitted(&h.request(5, host(2, Op::Read, 0, 1)));
    assert_eq!(shape(&reads), vec![(1, 0, Op::Read), (2, 0, Op::Read)]);
}

#[test]
fn past_its_bound_a_member_is_failed_and_past_that_a_bad_page_is_kept_in_memory() {
    let mut h = persisted(3, 1);
    let region = h.function().regions()[0];
    h.recover_log(&vec![0; region.len as usize]);
    // Chunk 0's reconstruct-write reads d1; that read fails: (d1, page 0) is the list's one
    // entry, logged; the write is planned again around it and answered once it is durable.
    let io = host(1, Op::Write, 0, 1);
    let reads = submitted(&h.request(0, io));
    let a = h.complete(1, reads[0], Status::IoError);
    let log = log_write(&a, region);
    let reads = submitted(&a)
        .into_iter()
        .filter(|r| r.id != log.id)
        .collect::<Vec<_>>();
    assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    h.complete(2, reads[0], Status::Ok);
    let w = submitted(&h.complete(2, reads[1], Status::Ok));
    h.complete(3, w[0], Status::Ok);
    assert!(replied(&h.complete(3, w[1], Status::Ok)).is_empty());
    assert_eq!(
        replied(&h.complete(4, log, Status::Ok))[0].status,
        Status::Ok
    );
    // Stripe 1 (parity on d1): chunk 2 on d2 is a reconstruct-write reading d0's chunk 3;
    // that read fails, the list is full: md fails the device. One `faulty` record, and the
    // write is planned again without d0 — a read-modify-write of d2 and the parity —
    // answered once the record is durable.
    let io = host(2, Op::Write, 2, 1);
    let reads = submitted(&h.request(5, io));
    assert_eq!(shape(&reads), vec![(0, 1, Op::Read)]);
    let a = h.complete(6, reads[0], Status::IoError);
    let log = log_write(&a, region);
    let reads: Vec<Io> = submitted(&a)
        .into_iter()
        .filter(|r| r.id != log.id)
        .collect();
    assert_eq!(shape(&reads), vec![(2, 1, Op::Read), (1, 1, Op::Read)]);
    h.complete(7, reads[0], Status::Ok);
    let w = submitted(&h.complete(7, reads[1], Status::Ok));
    assert_eq!(shape(&w), vec![(2, 1, Op::Write), (1, 1, Op::Write)]);
    h.complete(8, w[0], Status::Ok);
    assert!(replied(&h.complete(8, w[1], Status::Ok)).is_empty());
    assert_eq!(replied(&h.complete(9, log, Status::Ok))[0].io, io);
    assert_eq!(
        (h.counter("failed_members"), h.counter("faulty")),
        (1.0, 1.0)
    );
    assert_eq!(h.counter("unpersisted_bad_pages"), 0.0);
    // d0 takes no I/O: its chunk 3 is rebuilt from d2 and the parity; chunk 0's row also
    // lost d1's page: EIO at once; a FLUSH goes to d1 and d2 only.
    let reads = submitted(&h.request(10, host(3, Op::Read, 3, 1)));
    assert_eq!(shape(&reads), vec![(2, 1, Op::Read), (1, 1, Op::Read)]);
    let a = h.request(10, host(4, Op::Read, 0, 1));
    assert!(submitted(&a).is_empty());
    assert_eq!(replied(&a)[0].status, Status::IoError);
    let f = submitted(&h.request(10, host(5, Op::Flush, 0, 0)));
    assert_eq!(f.iter().map(|io| io.dev).collect::<Vec<_>>(), vec![1, 2]);
    // Stripe 2 (parity on d0, faulty): chunk 5 on d2 fails to read. A second member
    // cannot fail: the page is bad in memory only, and its row has lost two members: the
    // read and a write to chunk 4 of that row answer EIO.
    let io = host(6, Op::Read, 5, 1);
    let sub = submitted(&h.request(11, io))[0];
    let retry = submitted(&h.complete(12, sub, Status::IoError))[0];
    assert_eq!(shape(&[retry]), vec![(2, 2, Op::Read)]);
    let a = h.complete(13, retry, Status::IoError);
    assert!(submitted(&a).is_empty(), "no record, no I/O");
    assert_eq!(replied(&a)[0].status, Status::IoError);
    assert_eq!(h.counter("unpersisted_bad_pages"), 1.0);
    assert_eq!(h.counter("failed_members"), 1.0);
    let a = h.request(14, host(7, Op::Write, 4, 1));
    assert!(submitted(&a).is_empty());
    assert_eq!(replied(&a)[0].status, Status::IoError);
}

/// Complete every log write in `a` and those that follow (group commits), landing them in
/// `img`: the other submissions, in order.
fn settle(h: &mut Harness<Raid>, region: Region, img: &mut [u8], mut a: Vec<Action>) -> Vec<Io> {
    let mut other = Vec::new();
    loop {
        let log = h.land(&a, region, img);
        other.extend(split_log(&a, region).1);
        let Some(w) = log.first() else {
            return other;
        };
        a = h.complete(0, *w, Status::Ok);
    }
}

/// [`with_spare`] failing a member past `max_read_errors` failed reads.
fn with_spare_failing(max_read_errors: u64) -> Harness<Raid> {
    spare_harness(|r| {
        r.spare("d3".into(), true, None)
            .persist(4096)
            .failures(None, max_read_errors)
    })
}

/// Complete `ios` and every member I/O they lead to, OK, settling the log as it goes:
/// the member I/Os seen, (device, page, op), in order.
fn pump(
    h: &mut Harness<Raid>,
    region: Region,
    img: &mut [u8],
    ios: Vec<Io>,
) -> Vec<(u16, u64, Op)> {
    let mut seen = Vec::new();
    let mut todo: VecDeque<Io> = ios.into();
    while let Some(io) = todo.pop_front() {
        seen.extend(shape(&[io]));
        let a = h.complete(20, io, Status::Ok);
        todo.extend(settle(h, region, img, a));
    }
    seen
}

#[test]
fn a_member_past_its_read_errors_fails_and_is_recovered_onto_the_spare_from_the_others() {
    let mut h = with_spare_failing(1);
    let region = h.function().regions()[0];
    let mut img = vec![0; region.len as usize];
    let a = h.log_bytes(&img.clone());
    assert!(settle(&mut h, region, &mut img, a).is_empty());
    // A read of volume block 1 (stripe 0, d1) fails, and its retry alone: d1's page 0 is
    // bad (logged) and rebuilt from d0 and d2. One read error (the retry's: as md counts
    // the stripe's read, not the chunk-aligned one before it) is within the bound.
    let sub = submitted(&h.request(1, host(1, Op::Read, 1, 1)))[0];
    let retry = submitted(&h.complete(2, sub, Status::IoError))[0];
    assert_eq!(shape(&[retry]), vec![(1, 0, Op::Read)]);
    let a = h.complete(3, retry, Status::IoError);
    let rebuild = settle(&mut h, region, &mut img, a);
    assert_eq!(shape(&rebuild), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    assert_eq!((h.counter("read_errors"), h.counter("faulty")), (1.0, 0.0));
    // Stripe 2's chunk on d1 (volume block 4) fails too: past the bound, d1 is failed — a
    // `faulty` record — and its recovery onto the spare d3 starts (the replacement's
    // record); the read is rebuilt.
    let sub = submitted(&h.request(4, host(2, Op::Read, 4, 1)))[0];
    assert_eq!(shape(&[sub]), vec![(1, 2, Op::Read)]);
    let retry = submitted(&h.complete(5, sub, Status::IoError))[0];
    let a = h.complete(5, retry, Status::IoError);
    let reads = settle(&mut h, region, &mut img, a);
    assert_eq!(
        (
            h.counter("faulty"),
            h.counter("failed_members"),
            h.counter("replacements")
        ),
        (1.0, 1.0, 1.0)
    );
    assert_eq!(shape(&reads), vec![(2, 2, Op::Read), (0, 2, Op::Read)]);
    // A restart now keeps d1 out: it finds d1 faulty, resumes the recovery, and sends a
    // FLUSH to d0 and d2 only.
    let mut again = with_spare_failing(1);
    let a = again.recover_log(&img.clone());
    assert_eq!(
        (
            again.counter("recovered_faulty"),
            again.counter("resumed_replacements")
        ),
        (1.0, 1.0)
    );
    assert!(submitted(&a).iter().all(|io| io.dev != 1));
    let f = submitted(&again.request(1, host(9, Op::Flush, 0, 0)));
    assert_eq!(f.iter().map(|io| io.dev).collect::<Vec<_>>(), vec![0, 2]);
    // Here: a FLUSH skips d1 as well.
    let f = submitted(&h.request(6, host(3, Op::Flush, 0, 0)));
    assert_eq!(f.iter().map(|io| io.dev).collect::<Vec<_>>(), vec![0, 2]);
    // The rest runs to the end: each stripe's d1 chunk rebuilt from the two others and
    // written to the spare, never read from d1.
    let seen = pump(
        &mut h,
        region,
        &mut img,
        rebuild.into_iter().chain(reads).chain(f).collect(),
    );
    assert!(seen.iter().all(|&(d, _, _)| d != 1), "{seen:?}");
    let to_spare: Vec<_> = seen.iter().filter(|x| x.0 == 3).collect();
    assert_eq!(
        to_spare,
        vec![&(3, 0, Op::Write), &(3, 1, Op::Write), &(3, 2, Op::Write)]
    );
    assert_eq!(h.counter("replaced_stripes"), 3.0);
    assert_eq!(
        (h.counter("recovered_members"), h.counter("faulty")),
        (1.0, 0.0)
    );
    // d1's pages 0 and 2 were in the list (each marked before the failure): rebuilt and
    // logged good again.
    assert_eq!(h.counter("spare_rebuilt_pages"), 2.0);
    // Whole again: block 1 is read from the spare; a FLUSH reaches d0, d2, d3. A restart
    // finds d1 wholly on the spare, nothing faulty, nothing bad.
    let r = submitted(&h.request(10, host(4, Op::Read, 1, 1)));
    assert_eq!(shape(&r), vec![(3, 0, Op::Read)]);
    let mut f: Vec<u16> = submitted(&h.request(11, host(5, Op::Flush, 0, 0)))
        .iter()
        .map(|io| io.dev)
        .collect();
    f.sort();
    assert_eq!(f, vec![0, 2, 3]);
    let mut again = with_spare_failing(1);
    again.recover_log(&img);
    assert_eq!(
        (
            again.counter("recovered_faulty"),
            again.counter("recovered_bad_pages")
        ),
        (0.0, 0.0)
    );
    assert_eq!(again.counter("replaced_stripes"), 3.0);
    let r = submitted(&again.request(1, host(4, Op::Read, 1, 1)));
    assert_eq!(shape(&r), vec![(3, 0, Op::Read)]);
}

/// Swarm seed 659,220: a group commit of 97 records (42 bytes each with the journal's
/// header: 4,074 bytes) leaves 22 zero bytes at the end of its block, fewer than a record
/// header. A log whose read-back stopped there dropped every later write — here the
/// `faulty` record of `d1`, which a restart then read directly for data that writes since
/// had only put in the parity (the swarm read back a block's initial content).
#[test]
fn a_member_failed_after_a_log_block_of_97_records_stays_failed_after_a_restart() {
    let failing = || {
        let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
        let devs = (0..3).map(|d| disk(d as u16, &format!("d{d}"))).collect();
        let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
            .persist(4096)
            .failures(None, 98);
        Harness::new(r, devs).unwrap()
    };
    let mut h = failing();
    let region = h.function().regions()[0];
    let mut img = vec![0; region.len as usize];
    let a = h.log_bytes(&img.clone());
    assert!(settle(&mut h, region, &mut img, a).is_empty());
    // Stripes 0, 3, 6, ... (parity on d2) hold data chunk 1 on d1: volume block 6i + 1.
    // Its read fails, and its retry alone: d1's page is bad, one record each.
    let fail_page = |h: &mut Harness<Raid>, i: u64| {
        let sub = submitted(&h.request(i, host(i, Op::Read, 6 * i + 1, 1)))[0];
        assert_eq!((sub.dev, sub.offset), (1, 3 * i * K));
        let retry = submitted(&h.complete(i, sub, Status::IoError))[0];
        h.complete(i, retry, Status::IoError)
    };
    // The first record's write goes out; the next 97 records wait for it, and go together.
    let a = fail_page(&mut h, 0);
    let first = h.land(&a, region, &mut img);
    assert_eq!(first.len(), 1);
    for i in 1..98 {
        assert!(split_log(&fail_page(&mut h, i), region).0.is_empty());
    }
    let a = h.complete(100, first[0], Status::Ok);
    let group = h.land(&a, region, &mut img);
    assert_eq!(group.len(), 1);
    assert_eq!(group[0].len as u64, K, "97 records of 42 bytes: one block");
    let at = (group[0].offset - region.offset) as usize;
    assert!(img[at + 4074..at + 4096].iter().all(|&b| b == 0));
    assert_eq!(img[at + 4064..at + 4074], persist::record(1, 3 * 97));
    let a = h.complete(101, group[0], Status::Ok);
    assert!(settle(&mut h, region, &mut img, a).is_empty());
    // The 99th failed read is past the bound: d1 is failed — its record in the next block.
    let a = fail_page(&mut h, 98);
    settle(&mut h, region, &mut img, a);
    assert_eq!((h.counter("faulty"), h.counter("bad_pages")), (1.0, 99.0));
    // A restart reads every record back: d1 is still failed, so a read of a chunk of d1's
    // never marked bad is not read from d1 (which no write reached since it failed). The
    // array ran before, without a bitmap: no row's parity is known to match (`assume_clean`
    // is a new array's), so the read answers EIO rather than a page rebuilt from d0 and d2.
    let mut again = failing();
    let a = again.recover_log(&img);
    assert!(submitted(&a).is_empty());
    assert_eq!(
        (
            again.counter("recovered_faulty"),
            again.counter("recovered_bad_pages")
        ),
        (1.0, 99.0)
    );
    let a = again.request(1, host(1, Op::Read, 6 * 99 + 1, 1));
    assert_eq!(shape(&submitted(&a)), vec![]);
    assert_eq!(replied(&a)[0].status, Status::IoError);
    assert_eq!(again.counter("unknown_row_errors"), 1.0);
}

/// A persisted RAID-5 of three 4 KiB-chunk members, parity known, a copy of its log on
/// every member.
fn mirrored() -> Harness<Raid> {
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let devs = (0..3).map(|d| disk(d as u16, &format!("d{d}"))).collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
        .persist(4096)
        .log_on_all(true);
    Harness::new(r, devs).unwrap()
}

/// Is `io` a log write or read (inside one of `regions`)?
fn in_log(io: &Io, regions: &[Region]) -> bool {
    regions
        .iter()
        .any(|r| io.dev == r.dev && io.offset >= r.offset)
}

/// Land `a`'s log writes in the copies' images (`imgs[k]` is `regions[k]`'s): the writes,
/// copy by copy.
fn land_copies(
    h: &Harness<Raid>,
    a: &[Action],
    regions: &[Region],
    imgs: &mut [Vec<u8>],
) -> Vec<Io> {
    let mut logs = Vec::new();
    for (k, r) in regions.iter().enumerate() {
        logs.extend(h.land(a, *r, &mut imgs[k]));
    }
    logs
}

/// Land `a`'s log writes in the copies' images, complete them (and those they lead to),
/// and give back every other submission.
fn settle_copies(
    h: &mut Harness<Raid>,
    regions: &[Region],
    imgs: &mut [Vec<u8>],
    mut a: Vec<Action>,
) -> Vec<Io> {
    let mut other = Vec::new();
    let mut pending = VecDeque::new();
    loop {
        pending.extend(land_copies(h, &a, regions, imgs));
        other.extend(submitted(&a).into_iter().filter(|io| !in_log(io, regions)));
        let Some(w) = pending.pop_front() else {
            return other;
        };
        a = h.complete(0, w, Status::Ok);
    }
}

/// Complete a copy's read-back `read` and hand the function `bytes` as the region's: what
/// it does then.
fn read_back(h: &mut Harness<Raid>, read: Io, bytes: &[u8]) -> Vec<Action> {
    let tag = h
        .complete(0, read, Status::Ok)
        .iter()
        .find_map(|a| match *a {
            Action::Take { tag, .. } => Some(tag),
            _ => None,
        })
        .expect("the region's bytes are asked for");
    h.bytes(0, tag, bytes)
}

/// Zeroed images of the log's regions (new devices): one a copy.
fn blank_images(regions: &[Region]) -> Vec<Vec<u8>> {
    regions.iter().map(|r| vec![0; r.len as usize]).collect()
}

/// Start `h` on copies holding `imgs`: each region read and handed its bytes in turn, the
/// log writes that follow landed and completed. The other submissions.
fn start_copies(h: &mut Harness<Raid>, imgs: &mut [Vec<u8>]) -> Vec<Io> {
    let n = imgs.len();
    start_landing(h, imgs, n)
}

/// [`start_copies`] with only the first `landed` copies' log writes landing (the others'
/// lost, as at a crash): the other submissions, theirs among them.
fn start_landing(h: &mut Harness<Raid>, imgs: &mut [Vec<u8>], landed: usize) -> Vec<Io> {
    let regions = h.function().regions();
    let reads = submitted(&h.start(0));
    assert_eq!(reads.len(), regions.len(), "every copy is read back");
    let mut other = Vec::new();
    for (k, read) in reads.into_iter().enumerate() {
        assert_eq!((read.dev, read.op), (regions[k].dev, Op::Read));
        let a = read_back(h, read, &imgs[k]);
        other.extend(settle_copies(h, &regions[..landed], &mut imgs[..landed], a));
    }
    other
}

#[test]
fn a_log_kept_on_every_member_survives_the_member_it_was_on() {
    let mut h = mirrored();
    let regions = h.function().regions();
    assert_eq!(
        regions.iter().map(|r| r.dev).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "a copy at the end of each member"
    );
    let mut imgs = blank_images(&regions);
    assert!(start_copies(&mut h, &mut imgs).is_empty());
    // Each copy as formatted (its header names its member).
    let fresh = imgs.clone();
    // Chunk 0's reconstruct-write reads d1, which fails: the bad page's record goes to all
    // three copies, and the write is answered once it is durable on every one.
    let io = host(1, Op::Write, 0, 1);
    let reads = submitted(&h.request(1, io));
    let a = h.complete(2, reads[0], Status::IoError);
    let logs = land_copies(&h, &a, &regions, &mut imgs);
    assert_eq!(
        logs.iter().map(|w| w.dev).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    let reads: Vec<Io> = submitted(&a)
        .into_iter()
        .filter(|io| !in_log(io, &regions))
        .collect();
    h.complete(3, reads[0], Status::Ok);
    let w = submitted(&h.complete(3, reads[1], Status::Ok));
    h.complete(4, w[0], Status::Ok);
    assert!(replied(&h.complete(4, w[1], Status::Ok)).is_empty());
    h.complete(5, logs[0], Status::Ok);
    assert!(
        replied(&h.complete(5, logs[2], Status::Ok)).is_empty(),
        "d1's copy is not durable yet"
    );
    assert_eq!(replied(&h.complete(6, logs[1], Status::Ok))[0].io, io);
    // A restart on which d0's copy lost that record: the furthest copy (d1's) is the
    // state, d0's is checkpointed up to it first, and a request waits for that.
    let mut cut = vec![fresh[0].clone(), imgs[1].clone(), imgs[2].clone()];
    let mut again = mirrored();
    let regions_again = again.function().regions();
    let reads = submitted(&again.start(0));
    let mut early = Vec::new();
    for (k, read) in reads.into_iter().enumerate() {
        let a = read_back(&mut again, read, &cut[k]);
        if k == 2 {
            // Every copy answered: d0's checkpoint is out; a read of the bad page waits.
            let logs = land_copies(&again, &a, &regions_again, &mut cut);
            assert!(
                logs.iter().any(|w| w.dev == 0),
                "d0's copy brought up to d1's"
            );
            let r = again.request(1, host(2, Op::Read, 1, 1));
            assert!(submitted(&r).is_empty(), "requests wait for the copies");
            early.extend(logs);
        } else {
            assert!(settle_copies(&mut again, &regions_again, &mut cut, a).is_empty());
        }
    }
    let mut served = Vec::new();
    for w in early {
        let a = again.complete(1, w, Status::Ok);
        served.extend(settle_copies(&mut again, &regions_again, &mut cut, a));
    }
    assert_eq!(again.counter("recovered_bad_pages"), 1.0);
    // The read of block 1: d1's page is bad, so not read there, and its row (written before
    // the restart, and no bitmap says it is consistent) not rebuilt: EIO.
    assert_eq!(shape(&served), vec![]);
    assert_eq!(again.counter("unknown_row_errors"), 1.0);
    // d0's copy now holds the state on its own: with d1's and d2's copies blank, the
    // array still knows d1's page is bad.
    let mut alone = vec![cut[0].clone(), fresh[1].clone(), fresh[2].clone()];
    let mut third = mirrored();
    start_copies(&mut third, &mut alone);
    assert_eq!(third.counter("recovered_bad_pages"), 1.0);
    // d0's copy unreadable (not a log): d0 is failed, its state from the others.
    let mut lost = vec![vec![0x5a; cut[0].len()], cut[1].clone(), cut[2].clone()];
    let mut fourth = mirrored();
    start_copies(&mut fourth, &mut lost);
    assert_eq!(
        (
            fourth.counter("recovered_bad_pages"),
            fourth.counter("faulty")
        ),
        (1.0, 1.0)
    );
    // Row 0 lost d0 and d1's page: EIO, never a guess; FLUSH to d1 and d2 only.
    let a = fourth.request(2, host(3, Op::Read, 0, 1));
    assert_eq!(replied(&a)[0].status, Status::IoError);
    let f = submitted(&fourth.request(3, host(4, Op::Flush, 0, 0)));
    assert_eq!(f.iter().map(|io| io.dev).collect::<Vec<_>>(), vec![1, 2]);
}

/// The persisted RAID-5 of [`spare_harness`] with a copy of the log on every member (and so
/// on the spare), replacing `d1` by `d3` at start.
fn spare_with_copies() -> Harness<Raid> {
    spare_harness(|r| {
        r.spare("d3".into(), true, Some("d1".into()))
            .persist(4096)
            .log_on_all(true)
    })
}

/// Complete `ios` OK and every I/O they lead to, settling the copies' log writes.
fn pump_copies(h: &mut Harness<Raid>, regions: &[Region], imgs: &mut [Vec<u8>], ios: Vec<Io>) {
    let mut todo: VecDeque<Io> = ios.into();
    while let Some(io) = todo.pop_front() {
        let a = h.complete(20, io, Status::Ok);
        todo.extend(settle_copies(h, regions, imgs, a));
    }
}

/// What [`replaced_then_a_bad_page`] leaves.
struct ReplacedThenBad {
    regions: Vec<Region>,
    /// The copies' images at the end.
    imgs: Vec<Vec<u8>>,
    /// The devices the bad page's record was written to.
    devs: Vec<u16>,
    /// The copies as the start left them (made, the replacement named: records behind
    /// the others, never blank — a blank copy the log names made is a swapped device).
    early: Vec<Vec<u8>>,
}

/// [`spare_with_copies`] from blank copies: `d1` wholly replaced by the spare, then `d0`'s
/// page 0 failing (a read and its retry).
fn replaced_then_a_bad_page() -> ReplacedThenBad {
    let mut h = spare_with_copies();
    let regions = h.function().regions();
    let mut imgs = blank_images(&regions);
    // The replacement of d1 starts once the spare's copy has started over with the
    // array's state; its record goes to every copy; then d1's three stripes move.
    let copies = start_copies(&mut h, &mut imgs);
    let early = imgs.clone();
    pump_copies(&mut h, &regions, &mut imgs, copies);
    assert_eq!(
        (h.counter("replaced_stripes"), h.counter("replacements")),
        (3.0, 1.0)
    );
    let sub = submitted(&h.request(30, host(1, Op::Read, 0, 1)))[0];
    assert_eq!(shape(&[sub]), vec![(0, 0, Op::Read)]);
    let retry = submitted(&h.complete(31, sub, Status::IoError))[0];
    let a = h.complete(32, retry, Status::IoError);
    let logs = land_copies(&h, &a, &regions, &mut imgs);
    let devs = logs.iter().map(|w| w.dev).collect();
    let rest: Vec<Io> = submitted(&a)
        .into_iter()
        .filter(|io| !in_log(io, &regions))
        .chain(logs)
        .collect();
    pump_copies(&mut h, &regions, &mut imgs, rest);
    assert_eq!(h.counter("bad_pages"), 1.0);
    ReplacedThenBad {
        regions,
        imgs,
        devs,
        early,
    }
}

/// A restart of [`spare_with_copies`] on copies `d0`, `d1`, `d2` and the spare's, taken
/// from `imgs` where `from` says so and from `others` otherwise: the harness, and the
/// copies after it started.
fn restarted_on(
    imgs: &[Vec<u8>],
    others: &[Vec<u8>],
    from: [bool; 4],
) -> (Harness<Raid>, Vec<Vec<u8>>) {
    let mut cut: Vec<Vec<u8>> = (0..4)
        .map(|k| match from[k] {
            true => imgs[k].clone(),
            false => others[k].clone(),
        })
        .collect();
    let mut again = spare_with_copies();
    start_copies(&mut again, &mut cut);
    (again, cut)
}

#[test]
fn a_spare_that_replaces_a_member_carries_its_copy_of_the_log() {
    let ReplacedThenBad {
        regions,
        imgs,
        devs,
        early,
    } = replaced_then_a_bad_page();
    assert_eq!(
        regions.iter().map(|r| r.dev).collect::<Vec<_>>(),
        vec![0, 1, 2, 3],
        "a copy at the end of each member and of the spare"
    );
    // d0's bad page's record went to d0, d2 and the spare — not to d1, which the spare
    // holds whole.
    assert_eq!(devs, vec![0, 2, 3]);
    // d0's and d2's copies lost every record after the start: the spare's holds the state
    // — the replacement done and d0's bad page — and the copies behind are brought up to
    // it.
    let (mut again, cut) = restarted_on(&imgs, &early, [false, true, false, true]);
    assert_eq!(
        (
            again.counter("recovered_bad_pages"),
            again.counter("replaced_stripes"),
            again.counter("recovered_faulty")
        ),
        (1.0, 3.0, 0.0)
    );
    let r = submitted(&again.request(1, host(2, Op::Read, 1, 1)));
    assert_eq!(
        shape(&r),
        vec![(3, 0, Op::Read)],
        "d1's chunk from the spare"
    );
    // d1's own copy stopped at the replacement: alone, it knows nothing of the bad page.
    let (third, _) = restarted_on(&imgs, &early, [false, true, false, false]);
    assert_eq!(third.counter("recovered_bad_pages"), 0.0);
    // d0's copy brought up by the second start holds it on its own.
    let (fourth, _) = restarted_on(&cut, &early, [true, false, false, false]);
    assert_eq!(fourth.counter("recovered_bad_pages"), 1.0);
}

#[test]
fn a_log_left_on_a_reused_spare_is_never_taken_for_the_arrays() {
    // Another array's spare: its copy holds a replacement and a bad page of d0.
    let ReplacedThenBad {
        regions,
        imgs: other,
        ..
    } = replaced_then_a_bad_page();
    let blank = blank_images(&regions);
    // A new array (blank members) with that device as its spare, replacing d1 at start:
    // the spare's log is ahead of every member's copy, which name no replacement — not
    // adopted; the replacement starts the spare's copy over, then runs.
    let mut imgs = vec![
        blank[0].clone(),
        blank[1].clone(),
        blank[2].clone(),
        other[3].clone(),
    ];
    // A crash before the spare's copy has started over: whatever the members' copies got
    // names no replacement (it waits for the spare's), so the next start still does not
    // take the spare's log.
    let mut crashed = imgs.clone();
    start_landing(&mut spare_with_copies(), &mut crashed, 3);
    let (after, _) = restarted_on(&crashed, &crashed, [true; 4]);
    assert_eq!(
        (
            after.counter("recovered_bad_pages"),
            after.counter("resumed_replacements")
        ),
        (0.0, 0.0)
    );
    let mut h = spare_with_copies();
    let copies = start_copies(&mut h, &mut imgs);
    let early = imgs.clone();
    assert_eq!(
        (
            h.counter("recovered_bad_pages"),
            h.counter("resumed_replacements"),
            h.counter("dead_log_copies")
        ),
        (0.0, 0.0, 0.0)
    );
    pump_copies(&mut h, &regions, &mut imgs, copies);
    assert_eq!(h.counter("replaced_stripes"), 3.0);
    assert_eq!(h.counter("bad_pages"), 0.0);
    // The spare's copy is this array's now: with d0's and d2's copies lost, the state from
    // it (d1's stopped at the replacement's end) has no bad page.
    let (again, _) = restarted_on(&imgs, &early, [false, true, false, true]);
    assert_eq!(
        (
            again.counter("recovered_bad_pages"),
            again.counter("replaced_stripes")
        ),
        (0.0, 3.0)
    );
}

/// [`mirrored`] with the array id a new log is formatted with, the log on every member
/// (`all`) or on d0 only.
fn mirrored_as(array: u64, all: bool) -> Harness<Raid> {
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let devs = (0..3).map(|d| disk(d as u16, &format!("d{d}"))).collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
        .persist(4096)
        .log_on_all(all)
        .array_id(array);
    Harness::new(r, devs).unwrap()
}

/// An array of [`mirrored_as`] (id 1, a copy on every member) started once on blank
/// regions: the regions, their blank images, and the images after that start.
fn formed_copies() -> (Vec<Region>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut h = mirrored_as(1, true);
    let regions = h.function().regions();
    let blank = blank_images(&regions);
    let mut imgs = blank.clone();
    assert!(start_copies(&mut h, &mut imgs).is_empty());
    (regions, blank, imgs)
}

/// Start `h` on copies holding `imgs` (as [`start_copies`]): the message it stopped the
/// run with, if it did, and the submissions of the start (the log's writes each copy's
/// read-back led to at once, and every other).
fn start_failing(h: &mut Harness<Raid>, imgs: &mut [Vec<u8>]) -> (Option<String>, Vec<Io>) {
    let regions = h.function().regions();
    let mut all = Vec::new();
    let mut why = None;
    for (k, read) in submitted(&h.start(0)).into_iter().enumerate() {
        let a = read_back(h, read, &imgs[k]);
        for act in &a {
            if let Action::Fail { msg } = act {
                why = Some(String::from_utf8_lossy(h.data(*msg)).into_owned());
            }
        }
        all.extend(submitted(&a).into_iter().filter(|io| in_log(io, &regions)));
        all.extend(settle_copies(h, &regions, imgs, a));
    }
    (why, all)
}

#[test]
fn a_member_of_another_array_or_out_of_order_stops_the_start_by_name() {
    // Two arrays, ids 1 and 2, each started once: every copy's header carries its array
    // and its member.
    let format = |id: u64| {
        let mut h = mirrored_as(id, true);
        let regions = h.function().regions();
        let mut imgs = blank_images(&regions);
        assert!(start_copies(&mut h, &mut imgs).is_empty());
        (regions, imgs)
    };
    let (regions, a) = format(1);
    let (_, b) = format(2);
    // Array 1's d0 and d2 with array 2's d1: stopped before anything reaches the members'
    // data, naming both arrays and their devices; requests are answered EIO.
    let mut mixed = vec![a[0].clone(), b[1].clone(), a[2].clone()];
    let mut h = mirrored_as(1, true);
    let (why, ios) = start_failing(&mut h, &mut mixed);
    assert_eq!(
        why.as_deref(),
        Some(
            "raid5: the members' copies of the log belong to different arrays (array \
             0000000000000001 on `d0`, `d2`; array 0000000000000002 on `d1`): give the \
             devices of one array — another array's device holds its data, not this one's"
        )
    );
    assert!(ios.iter().all(|io| in_log(io, &regions)), "{ios:?}");
    let r = h.request(1, host(1, Op::Read, 0, 1));
    assert_eq!(replied(&r)[0].status, Status::IoError);
    // One copy each (d2 blank): no array has most; the start stops.
    let mut tied = vec![a[0].clone(), b[1].clone(), vec![0; a[2].len()]];
    let (why, _) = start_failing(&mut mirrored_as(1, true), &mut tied);
    assert!(
        why.as_deref()
            .is_some_and(|e| e.contains("belong to different arrays")),
        "{why:?}"
    );
    // Array 1's own devices with d0 and d1 given in each other's place.
    let mut swapped = vec![a[1].clone(), a[0].clone(), a[2].clone()];
    let (why, _) = start_failing(&mut mirrored_as(1, true), &mut swapped);
    assert_eq!(
        why.as_deref(),
        Some(
            "raid5: `d0`, given as member 0, holds member 1's copy of this array's log (array \
             0000000000000001): give the devices in the array's order"
        )
    );
    // Array 1 with its log on d0 only, turned to a copy on every member by a build whose
    // new logs would get id 7: it takes d0's id, and the copies it formats on d1 and d2
    // are checkpointed with it, so the next start finds one array.
    let mut h = mirrored_as(1, false);
    let mut only = vec![vec![0; a[0].len()]];
    assert_eq!(h.function().regions(), regions[..1]);
    assert!(start_copies(&mut h, &mut only).is_empty());
    let mut upgraded = vec![only[0].clone(), vec![0; a[1].len()], vec![0; a[2].len()]];
    let (why, _) = start_failing(&mut mirrored_as(7, true), &mut upgraded);
    assert_eq!(why, None);
    let label = persist::Label {
        array: 1,
        role: persist::Role::Member(2),
        all: true,
    }
    .encode();
    let heads = [&upgraded[2][..4096], &upgraded[2][4096..8192]];
    assert!(
        heads.iter().any(|h| h[104..120] == label),
        "d2's copy checkpointed with the array's id"
    );
    let (why, _) = start_failing(&mut mirrored_as(7, true), &mut upgraded);
    assert_eq!(why, None);
}

/// A new array with a copy of the log on every member serves nothing until the log names
/// every copy made: a write acknowledged before that could sit on a member whose device a
/// crash and a swap then leave blank, and the next start — finding the copy blank with no
/// record naming it made — would take it for a format that never landed and assemble it.
#[test]
fn a_new_array_serves_once_its_log_names_every_copy_made() {
    let mut h = mirrored_as(1, true);
    let regions = h.function().regions();
    let mut imgs = blank_images(&regions);
    let headers = start_headers_only(&mut h, &mut imgs);
    assert_eq!(headers.len(), 3, "each copy's header: {headers:?}");
    // Recovered, formats out: a write waits.
    let w = host(1, Op::Write, 0, 1);
    assert!(submitted(&h.request(1, w)).is_empty());
    // Two headers landed: it still waits; the third: the copies-made record goes to all
    // three copies, and the write waits for it too.
    for hd in &headers[..2] {
        let a = h.complete(1, *hd, Status::Ok);
        assert!(submitted(&a).is_empty(), "{a:?}");
    }
    let a = h.complete(2, headers[2], Status::Ok);
    let record = land_copies(&h, &a, &regions, &mut imgs);
    assert_eq!(record.len(), 3, "{a:?}");
    assert!(submitted(&a).iter().all(|io| in_log(io, &regions)));
    let mut out = Vec::new();
    for r in record {
        let a = h.complete(3, r, Status::Ok);
        out.extend(submitted(&a).into_iter().filter(|io| !in_log(io, &regions)));
    }
    // Durable on every copy: the write goes to its member and the parity (a full row of
    // one page over a row known clean at start is a read-modify-write: reads first).
    assert!(!out.is_empty());
    assert!(out.iter().all(|io| io.offset == 0), "{out:?}");
    // The next start finds all three made: a blank one now is a swapped device.
    let mut swapped = vec![imgs[0].clone(), vec![0; imgs[1].len()], imgs[2].clone()];
    let mut again = mirrored_as(1, true);
    assert_eq!(start_failing(&mut again, &mut swapped).0, None);
    assert_eq!(again.counter("blank_members"), 1.0);
}

/// Start `h` on `imgs` and land only the copies' recovery headers (a crash right after,
/// or their completions still to come): each copy is formatted, or its log given a new
/// header, and nothing else is written. The header writes.
fn start_headers_only(h: &mut Harness<Raid>, imgs: &mut [Vec<u8>]) -> Vec<Io> {
    let regions = h.function().regions();
    let mut headers = Vec::new();
    for (k, read) in submitted(&h.start(0)).into_iter().enumerate() {
        let a = read_back(h, read, &imgs[k]);
        headers.extend(land_copies(h, &a, &regions, imgs));
    }
    headers
}

/// Members' regions holding a used device's bytes (not a log). Turning `log_members =
/// "all"` on for an array whose log was on `d0` only: formatted as new copies, no member
/// failed — and from then on a member swapped for a blank device is told. At a new array:
/// the start stops naming the region (as for `d0`'s with the log on it alone). Once the
/// copies are made, one overwritten fails its member.
#[test]
fn regions_of_used_devices_are_adopted_only_where_the_log_never_was() {
    let used = |len: usize| {
        let mut b = vec![0; len];
        b[..26].copy_from_slice(b"ext4 superblock, not a log");
        b
    };
    // The log on d0 only, then on every member.
    let mut first = mirrored_as(1, false);
    let regions = first.function().regions();
    let mut d0 = blank_images(&regions);
    assert!(start_copies(&mut first, &mut d0).is_empty());
    let mut all = mirrored_as(1, true);
    let regions = all.function().regions();
    let mut imgs = vec![
        d0[0].clone(),
        used(regions[1].len as usize),
        used(regions[2].len as usize),
    ];
    assert_eq!(start_failing(&mut all, &mut imgs).0, None);
    assert_eq!(
        (
            all.counter("adopted_copies"),
            all.counter("failed_members"),
            all.counter("dead_log_copies")
        ),
        (2.0, 0.0, 0.0)
    );
    let blank = blank_images(&regions);
    let mut swapped = vec![imgs[0].clone(), blank[1].clone(), imgs[2].clone()];
    let mut next = mirrored_as(2, true);
    assert_eq!(start_failing(&mut next, &mut swapped).0, None);
    assert_eq!(
        (next.counter("blank_members"), next.counter("faulty")),
        (1.0, 1.0)
    );
    // A new array with d1's region used: stopped, naming it; nothing failed.
    let mut new = vec![
        blank[0].clone(),
        used(regions[1].len as usize),
        blank[2].clone(),
    ];
    let mut h = mirrored_as(3, true);
    let why = start_failing(&mut h, &mut new).0.expect("stopped");
    assert!(
        why.contains("device 1 bytes")
            && why.contains("zero the region to let the function format it"),
        "{why}"
    );
    assert_eq!(h.counter("failed_members"), 0.0);
    // The array's copies made, d1's overwritten: d1 not assembled.
    let mut over = vec![
        imgs[0].clone(),
        used(regions[1].len as usize),
        imgs[2].clone(),
    ];
    let mut h = mirrored_as(4, true);
    assert_eq!(start_failing(&mut h, &mut over).0, None);
    assert_eq!(
        (
            h.counter("adopted_copies"),
            h.counter("failed_members"),
            h.counter("dead_log_copies")
        ),
        (0.0, 1.0, 1.0)
    );
}

/// A spare whose region holds a used device's bytes is formatted when its replacement
/// starts (md writes a spare's superblock when it is added) and takes the member's
/// stripes; the next start finds its copy this array's. Before, it was refused as if its
/// copy could not be read.
#[test]
fn a_spare_of_used_bytes_is_formatted_when_its_replacement_starts() {
    let mut h = spare_with_copies();
    let regions = h.function().regions();
    let mut imgs = blank_images(&regions);
    imgs[3][..26].copy_from_slice(b"ext4 superblock, not a log");
    let copies = start_copies(&mut h, &mut imgs);
    pump_copies(&mut h, &regions, &mut imgs, copies);
    assert_eq!(
        (
            h.counter("adopted_copies"),
            h.counter("refused_spares"),
            h.counter("replaced_stripes"),
            h.counter("dead_log_copies")
        ),
        (1.0, 0.0, 3.0, 0.0)
    );
    let mut again = spare_with_copies();
    assert!(start_copies(&mut again, &mut imgs).is_empty());
    assert_eq!(
        (
            again.counter("swapped_spares"),
            again.counter("resumed_replacements"),
            again.counter("replaced_stripes")
        ),
        (0.0, 1.0, 3.0)
    );
    // Under a replacement the log names, a spare of used bytes was swapped (not unreadable):
    // with `d0` failed as well the start stops, saying so.
    let (_, _, failed) = replaced_whole(1, Some("d0"), false);
    let mut cut = failed.clone();
    cut[3] = vec![0; failed[3].len()];
    cut[3][..26].copy_from_slice(b"ext4 superblock, not a log");
    assert_eq!(
        start_failing(&mut spare_with_copies(), &mut cut)
            .0
            .as_deref(),
        Some(
            "raid5: the log names 3 stripes of `d1` moved onto the spare, but `d3` does not \
             hold this array's copy of the log (swapped since?), and `d0` is faulty: rows \
             would miss two members — give the spare they were moved onto"
        )
    );
}

/// A new array with the bitmap whose first start a crash cut once every copy's header had
/// landed, before any record: nothing was served (requests wait for the copies-made
/// record), so the next start takes the log as new — `assume_clean` holds and no region
/// is dirty. Taken as not new, every region was logged dirty and resynced (the operator
/// scenario, seed 66). A header a start on `d0` only formatted is not new: that start
/// serves at once, so every region is dirty after it.
#[test]
fn a_log_whose_first_start_logged_nothing_is_new() {
    let raid = |array: u64, all: bool| {
        let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
        let devs = (0..3).map(|d| disk(d as u16, &format!("d{d}"))).collect();
        let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
            .persist(4096)
            .log_on_all(all)
            .array_id(array)
            .write_intent(8 * K, MS);
        Harness::new(r, devs).unwrap()
    };
    let first = raid(1, true);
    let regions = first.function().regions();
    let blank = blank_images(&regions);
    let dirty_after = |first: Harness<Raid>, copies: usize| {
        let mut first = first;
        let mut imgs = blank.clone();
        assert_eq!(start_headers_only(&mut first, &mut imgs).len(), copies);
        let mut next = raid(2, true);
        assert_eq!(start_failing(&mut next, &mut imgs).0, None);
        (
            next.counter("intent_dirty_regions"),
            next.counter("intent_recovered_clean_regions"),
        )
    };
    assert_eq!(dirty_after(first, 3), (0.0, 0.0));
    let (dirty, _) = dirty_after(raid(1, false), 1);
    assert!(dirty > 1000.0, "every region dirty: {dirty}");
}

/// A copy holding only its header, formatted by a start with a copy on every member, says
/// nothing of its device's data (such a start serves nothing until the copies-made record
/// is durable): its label does not vote. Two crashes while an array forms leave copies
/// with two starts' ids, and the next start forms the array rather than stopping on a
/// split (the swarm's seed 637); a blank device in a member's place formatted at a start a
/// crash cut before the member's failure was durable is told by its other id (the operator
/// scenario's seed 94); a copy with the array's own id is not blank even if the copies-made
/// record, cut on its way, reached only the others (seed 2,048).
#[test]
fn copies_formatted_by_an_interrupted_start_do_not_vote() {
    let mut h = mirrored_as(1, true);
    let regions = h.function().regions();
    let blank = blank_images(&regions);
    // A new array: a crash after d0's format (id 1), then one after every copy's header
    // (d1's and d2's formats with id 2).
    let mut imgs = blank.clone();
    start_landing(&mut h, &mut imgs, 1);
    start_headers_only(&mut mirrored_as(2, true), &mut imgs);
    let mut third = mirrored_as(3, true);
    assert_eq!(start_failing(&mut third, &mut imgs).0, None);
    assert_eq!(third.counter("blank_members"), 0.0);
    let mut fourth = mirrored_as(4, true);
    assert_eq!(
        start_failing(&mut fourth, &mut imgs).0,
        None,
        "one array now"
    );

    // A formed array, d1 blank at a restart that a crash cut after the headers: d1's copy
    // holds a header with that start's id — a blank device, failed.
    let mut imgs = blank.clone();
    assert!(start_copies(&mut mirrored_as(1, true), &mut imgs).is_empty());
    imgs[1] = blank[1].clone();
    start_headers_only(&mut mirrored_as(2, true), &mut imgs);
    let mut again = mirrored_as(3, true);
    assert_eq!(start_failing(&mut again, &mut imgs).0, None);
    assert_eq!(
        (
            again.counter("blank_members"),
            again.counter("failed_members")
        ),
        (1.0, 1.0)
    );

    // A new array whose copies-made record reached d0 only: d1's and d2's copies hold
    // only their headers, with the array's id — not blank.
    let mut imgs = blank.clone();
    let mut h = mirrored_as(1, true);
    let headers = start_headers_only(&mut h, &mut imgs);
    let mut record = Vec::new();
    for hd in headers {
        let a = h.complete(1, hd, Status::Ok);
        record.extend(land_copies(&h, &a, &regions[..1], &mut imgs[..1]));
    }
    assert_eq!(record.len(), 1, "the record, landed on d0 only");
    let mut next = mirrored_as(2, true);
    assert_eq!(start_failing(&mut next, &mut imgs).0, None);
    assert_eq!(next.counter("blank_members"), 0.0);
}

#[test]
fn a_member_whose_copy_is_found_blank_is_not_assembled_unless_its_format_never_landed() {
    let (regions, blank, imgs) = formed_copies();
    // d1's device swapped for a blank one: not assembled — failed, and never read: a read
    // of its chunk sent before the start is over (block 1, d1's chunk of stripe 0) answers
    // EIO, the row not known after a restart without a bitmap (its parity may not match).
    // (Started by a build whose new logs get id 5: d1's blank copy is formatted with it.)
    let mut swapped = vec![imgs[0].clone(), blank[1].clone(), imgs[2].clone()];
    let mut again = mirrored_as(5, true);
    assert!(submitted(&again.request(0, host(1, Op::Read, 1, 1))).is_empty());
    let (why, ios) = start_failing(&mut again, &mut swapped);
    assert_eq!(why, None);
    let early: Vec<Io> = ios.into_iter().filter(|io| !in_log(io, &regions)).collect();
    assert_eq!(shape(&early), vec![]);
    assert_eq!(
        (
            again.counter("blank_members"),
            again.counter("faulty"),
            again.counter("failed_members"),
            again.counter("unknown_row_errors")
        ),
        (1.0, 1.0, 1.0, 1.0)
    );
    // The next start finds d1's copy another array's — but d1 failed in this array's log:
    // it stays failed, and the array serves.
    let mut next = mirrored_as(6, true);
    assert_eq!(start_failing(&mut next, &mut swapped).0, None);
    assert_eq!(
        (
            next.counter("recovered_faulty"),
            next.counter("blank_members")
        ),
        (1.0, 0.0)
    );
    // Two of them: rows would miss two members; the start stops, naming both.
    let mut two = vec![imgs[0].clone(), blank[1].clone(), blank[2].clone()];
    assert_eq!(
        start_failing(&mut mirrored_as(1, true), &mut two)
            .0
            .as_deref(),
        Some(
            "raid5: the copies of the log on `d1`, `d2` are blank while the log names them \
             made (devices swapped for blank ones?): rows would miss two members — give the \
             array's devices"
        )
    );
    // A crash at the first start before d1's and d2's formats landed: the copies made are
    // logged only once every copy's header has, so the next start takes the blank copies
    // as new (nothing was served that needs them) and then logs all three made.
    let mut crashed = blank.clone();
    start_landing(&mut mirrored_as(1, true), &mut crashed, 1);
    let mut after = mirrored_as(1, true);
    assert_eq!(start_failing(&mut after, &mut crashed).0, None);
    assert_eq!(
        (after.counter("blank_members"), after.counter("faulty")),
        (0.0, 0.0)
    );
    let mut later = vec![crashed[0].clone(), blank[1].clone(), crashed[2].clone()];
    let mut third = mirrored_as(1, true);
    assert_eq!(start_failing(&mut third, &mut later).0, None);
    assert_eq!(third.counter("blank_members"), 1.0);
}

/// A member whose copy of the log cannot be read beside one whose copy is found blank:
/// the blank one's data is gone, so it is the member failed, and the one whose copy alone
/// is lost serves its data (its copy no longer written). Failed in copy order, `d0` was
/// failed and `d1` served its zeros (the swarm's operator scenario, seed 139). An
/// operator's `fail` of another member then cannot take the blank one's place.
#[test]
fn a_blank_member_is_failed_before_one_whose_copy_alone_cannot_be_read() {
    let (_, blank, imgs) = formed_copies();
    let swapped = vec![imgs[0].clone(), blank[1].clone(), imgs[2].clone()];
    let mut again = mirrored_as(5, true);
    let (why, _) = start_unreadable(&mut again, &swapped, 0);
    assert_eq!(why, None);
    assert_eq!(
        (
            again.counter("blank_members"),
            again.counter("failed_members"),
            again.counter("dead_log_copies")
        ),
        (1.0, 1.0, 2.0)
    );
    assert_eq!(again.function().faulty, Some(1));
    // Block 0, d0's chunk of stripe 0: read from d0. Block 1, d1's: never from d1 (the
    // row is not known after a restart without a bitmap: EIO, nothing sent).
    assert_eq!(
        shape(&submitted(&again.request(1, host(1, Op::Read, 0, 1)))),
        vec![(0, 0, Op::Read)]
    );
    assert_eq!(
        shape(&submitted(&again.request(2, host(2, Op::Read, 1, 1)))),
        vec![]
    );
    assert_eq!(again.counter("unknown_row_errors"), 1.0);
    // The operator failing d0 at that start: d1 is failed first, so d0 cannot be.
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let devs = (0..3).map(|d| disk(d as u16, &format!("d{d}"))).collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
        .persist(4096)
        .log_on_all(true)
        .failures(Some("d0".into()), 256)
        .array_id(5);
    let mut told = Harness::new(r, devs).unwrap();
    let mut swapped = swapped;
    assert_eq!(
        start_failing(&mut told, &mut swapped).0.as_deref(),
        Some("raid5: fail: `d0` cannot fail: `d1` is faulty already (rows would miss two members)")
    );
}

/// [`spare_with_copies`] with md's write-intent bitmap (regions of 8 pages, cleaned after
/// 1 ms): every row the log names clean is known after a restart, so a member failed then
/// can be rebuilt from parity (without a bitmap no row is known after a restart).
fn spare_with_bitmap() -> Harness<Raid> {
    spare_harness(|r| {
        r.spare("d3".into(), true, Some("d1".into()))
            .persist(4096)
            .log_on_all(true)
            .write_intent(8 * K, MS)
    })
}

/// [`spare_with_copies`] with `d1` wholly replaced by the spare, from blank copies,
/// its array id `array`, failing `fail` at start, with the bitmap of [`spare_with_bitmap`]
/// if `bitmap`: the harness, regions and images.
fn replaced_whole(
    array: u64,
    fail: Option<&str>,
    bitmap: bool,
) -> (Harness<Raid>, Vec<Region>, Vec<Vec<u8>>) {
    let mut h = spare_harness(|r| {
        let r = r
            .spare("d3".into(), true, Some("d1".into()))
            .persist(4096)
            .log_on_all(true)
            .failures(fail.map(String::from), 256)
            .array_id(array);
        if bitmap {
            r.write_intent(8 * K, MS)
        } else {
            r
        }
    });
    let regions = h.function().regions();
    let mut imgs = blank_images(&regions);
    let copies = start_copies(&mut h, &mut imgs);
    pump_copies(&mut h, &regions, &mut imgs, copies);
    assert_eq!(h.counter("replaced_stripes"), 3.0);
    (h, regions, imgs)
}

#[test]
fn a_spare_swapped_under_a_replacement_is_told_by_its_log_and_the_member_rebuilt_anew() {
    let (_, regions, imgs) = replaced_whole(1, None, true);
    // The spare swapped for a blank device, and for another array's spare: d1's stripes
    // were on the old spare only, so d1 is faulty, rebuilt from d0 and d2 onto the new
    // spare from stripe 0 — never read from d1, whose chunks are stale.
    let (_, _, theirs) = replaced_whole(2, None, true);
    for spare in [vec![0; imgs[3].len()], theirs[3].clone()] {
        let mut cut = vec![imgs[0].clone(), imgs[1].clone(), imgs[2].clone(), spare];
        let mut h = spare_with_bitmap();
        let copies = start_copies(&mut h, &mut cut);
        assert_eq!(
            (
                h.counter("swapped_spares"),
                h.counter("recovered_faulty"),
                h.counter("resumed_replacements"),
                h.counter("replacements")
            ),
            (1.0, 1.0, 0.0, 1.0)
        );
        let mut moved = Vec::new();
        let mut todo: VecDeque<Io> = copies.into();
        while let Some(io) = todo.pop_front() {
            moved.push((io.dev, io.op));
            let a = h.complete(20, io, Status::Ok);
            todo.extend(settle_copies(&mut h, &regions, &mut cut, a));
        }
        assert!(!moved.contains(&(1, Op::Read)), "d1 is not read: {moved:?}");
        assert_eq!(moved.iter().filter(|m| **m == (3, Op::Write)).count(), 3);
        assert_eq!(h.counter("replaced_stripes"), 3.0);
        // The next start takes the new spare's copy as this array's: nothing swapped.
        let (again, _) = restarted_on(&cut, &cut, [true; 4]);
        assert_eq!(
            (
                again.counter("swapped_spares"),
                again.counter("replaced_stripes")
            ),
            (0.0, 3.0)
        );
    }
    // With d0 failed after d1 moved, the lost spare held d1's only copy: rows would miss
    // two members, and the start stops, naming both.
    let (_, _, failed) = replaced_whole(1, Some("d0"), false);
    let mut cut = failed.clone();
    cut[3] = vec![0; cut[3].len()];
    let (why, _) = start_failing(&mut spare_with_copies(), &mut cut);
    assert_eq!(
        why.as_deref(),
        Some(
            "raid5: the log names 3 stripes of `d1` moved onto the spare, but `d3` does not \
             hold this array's copy of the log (swapped since?), and `d0` is faulty: rows \
             would miss two members — give the spare they were moved onto"
        )
    );
}

/// The log names a replacement onto the spare, and the spare's copy cannot be read at
/// start: nothing proves the spare is the device the stripes were moved onto (md does not
/// assemble a device whose superblock it cannot read). The spare is not used; the member
/// whose stripes it held is faulty, its chunks rebuilt from the others — never read from
/// the spare or from the member — and with another member faulty the start stops.
/// Start `h` on the copies `imgs`, the spare's (the last) failing its read: the message
/// the start stopped with, if it did, and the submissions other than the log's.
fn start_spare_unreadable(h: &mut Harness<Raid>, imgs: &[Vec<u8>]) -> (Option<String>, Vec<Io>) {
    start_unreadable(h, imgs, imgs.len() - 1)
}

/// [`start_spare_unreadable`] with copy `lost`'s read failing.
fn start_unreadable(
    h: &mut Harness<Raid>,
    imgs: &[Vec<u8>],
    lost: usize,
) -> (Option<String>, Vec<Io>) {
    let regions = h.function().regions();
    let mut cut = imgs.to_vec();
    let (mut why, mut other) = (None, Vec::new());
    for (k, read) in submitted(&h.start(0)).into_iter().enumerate() {
        let a = if k == lost {
            h.complete(0, read, Status::IoError)
        } else {
            read_back(h, read, &imgs[k])
        };
        for act in &a {
            if let Action::Fail { msg } = act {
                why = Some(String::from_utf8_lossy(h.data(*msg)).into_owned());
            }
        }
        other.extend(settle_copies(h, &regions, &mut cut, a));
    }
    (why, other)
}

#[test]
fn a_spare_whose_copy_cannot_be_read_under_a_replacement_is_not_trusted() {
    let (_, _, imgs) = replaced_whole(1, None, true);
    let mut h = spare_with_bitmap();
    let (why, other) = start_spare_unreadable(&mut h, &imgs);
    assert_eq!(why, None);
    assert_eq!(
        (
            h.counter("swapped_spares"),
            h.counter("recovered_faulty"),
            h.counter("refused_spares"),
            h.counter("faulty")
        ),
        (1.0, 1.0, 1.0, 1.0)
    );
    assert!(other.is_empty(), "no recovery onto the spare: {other:?}");
    // Block 1, d1's chunk of stripe 0: from d0 and the parity on d2.
    let a = h.request(1, host(1, Op::Read, 1, 1));
    let r = submitted(&a);
    assert_eq!(shape(&r), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    // With d0 failed as well, the start stops, naming both.
    let (_, _, failed) = replaced_whole(1, Some("d0"), false);
    let (why, _) = start_spare_unreadable(&mut spare_with_copies(), &failed);
    assert_eq!(
        why.as_deref(),
        Some(
            "raid5: the log names 3 stripes of `d1` moved onto the spare, but `d3` cannot be \
             read, and `d0` is faulty: rows would miss two members — give the spare they \
             were moved onto"
        )
    );
}

#[test]
fn a_spare_whose_copy_of_the_log_cannot_be_written_is_not_used() {
    // Replacing d1 at start: the spare's copy is started over first, and its writes fail.
    let mut h = spare_with_copies();
    let regions = h.function().regions();
    let mut imgs = blank_images(&regions);
    let mut pending = VecDeque::new();
    let mut other = Vec::new();
    for (k, read) in submitted(&h.start(0)).into_iter().enumerate() {
        let a = read_back(&mut h, read, &imgs[k]);
        pending.extend(land_copies(&h, &a, &regions, &mut imgs));
        other.extend(submitted(&a).into_iter().filter(|io| !in_log(io, &regions)));
    }
    let mut failed = 0;
    while let Some(w) = pending.pop_front() {
        let restart = w.dev == 3 && h.counter("replacements") == 0.0;
        failed += u32::from(restart);
        let st = if restart { Status::IoError } else { Status::Ok };
        let a = h.complete(0, w, st);
        pending.extend(land_copies(&h, &a, &regions, &mut imgs));
        other.extend(submitted(&a).into_iter().filter(|io| !in_log(io, &regions)));
    }
    // md does not use a spare whose superblock it cannot write: no replacement, no copy
    // I/O, and the members' copies name none.
    assert_eq!(failed, 1);
    assert_eq!(
        (
            h.counter("refused_spares"),
            h.counter("replacements"),
            h.counter("dead_log_copies")
        ),
        (1.0, 0.0, 1.0)
    );
    assert!(other.is_empty(), "{other:?}");
    let blank: Vec<Vec<u8>> = imgs.iter().map(|i| vec![0; i.len()]).collect();
    let (again, _) = restarted_on(&imgs, &blank, [true, true, true, false]);
    assert_eq!(
        (
            again.counter("resumed_replacements"),
            again.counter("swapped_spares")
        ),
        (0.0, 0.0)
    );
}

#[test]
fn a_spare_too_small_for_its_copy_of_the_log_is_refused_by_name() {
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let devs = (0..4)
        .map(|d| {
            let mut info = disk(d as u16, &format!("d{d}"));
            // The spare as large as the members' stripes, not their logs.
            info.capacity = if d == 3 { 3 * K } else { (88 + 3) * K };
            info
        })
        .collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
        .spare("d3".into(), true, None)
        .persist(4096);
    let small: Vec<DeviceInfo> = devs;
    assert!(Harness::new(r, small.clone()).is_ok(), "no copy: it fits");
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true)
        .spare("d3".into(), true, None)
        .persist(4096)
        .log_on_all(true);
    let e = Harness::new(r, small).err().expect("refused");
    assert_eq!(
        e,
        "spare: `d3` holds 12288 bytes: a member's 3 stripes need 12288 and, after them, a \
         copy of the log (log_members = \"all\") 360448"
    );
}

#[test]
fn a_log_region_holding_other_bytes_stops_the_array_with_errors_not_a_hang() {
    let mut h = persisted(3, 4096);
    let early = host(1, Op::Write, 0, 1);
    assert!(submitted(&h.request(0, early)).is_empty());
    h.assert_foreign_log_refused(early, host(2, Op::Read, 0, 1));
}

/// A RAID-5 of 16 KiB chunks (four page rows a stripe) over `disks`, parity known.
fn raid16(disks: usize, merge: u64) -> Harness<Raid> {
    let names: Vec<String> = (0..disks).map(|d| format!("d{d}")).collect();
    let devs = (0..disks)
        .map(|d| disk(d as u16, &format!("d{d}")))
        .collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, 4 * K, true).merge(merge);
    Harness::new(r, devs).unwrap()
}

#[test]
fn rows_of_whole_pages_of_the_same_chunks_join_into_ranges() {
    // Two data chunks' rows of one stripe: 24 KiB from page 1 of chunk 0 (16 KiB chunks)
    // covers pages 1–3 of chunk 0 (host bytes 0, 4, 8 KiB) and pages 0–2 of chunk 1 (12, 16,
    // 20 KiB).
    let piece = |k, delta| Piece {
        k,
        a: 0,
        b: K as u32,
        delta,
    };
    let mut rows: BTreeMap<(u64, u64), Vec<Piece>> = BTreeMap::new();
    rows.insert((0, 0), vec![piece(1, 12288)]);
    rows.insert((0, 1), vec![piece(0, 0), piece(1, 16384)]);
    rows.insert((0, 2), vec![piece(0, 4096), piece(1, 20480)]);
    rows.insert((0, 3), vec![piece(0, 8192)]);
    // The layer hands its rows over as one list sorted by row.
    let ranges = |rows: &BTreeMap<(u64, u64), Vec<Piece>>, merge| {
        let flat: Vec<((u64, u64), Piece)> = rows
            .iter()
            .flat_map(|(&row, pieces)| pieces.iter().map(move |&p| (row, p)))
            .collect();
        let mut out = Vec::new();
        Raid::row_ranges(&flat, merge, &mut out);
        out.into_iter()
            .map(|(r, p)| (r, p.to_vec()))
            .collect::<Vec<_>>()
    };
    let whole = |k, b, delta| Piece { k, a: 0, b, delta };
    assert_eq!(
        ranges(&rows, 64 * K),
        vec![
            ((0, 0, 1), vec![whole(1, 4096, 12288)]),
            ((0, 1, 2), vec![whole(0, 8192, 0), whole(1, 8192, 16384)]),
            ((0, 3, 1), vec![whole(0, 4096, 8192)]),
        ]
    );
    // `merge` = one page: row by row.
    assert_eq!(ranges(&rows, K).len(), 4);
    // A partial page, or host bytes that do not run on, end a range.
    let mut cut = rows.clone();
    cut.insert(
        (0, 2),
        vec![
            piece(0, 4096),
            Piece {
                b: 2048,
                ..piece(1, 20480)
            },
        ],
    );
    assert_eq!(ranges(&cut, 64 * K).len(), 4);
    let mut gap = rows;
    gap.insert((0, 2), vec![piece(0, 4096), piece(1, 24576)]);
    assert_eq!(ranges(&gap, 64 * K).len(), 4);
}

#[test]
fn a_whole_chunk_write_is_one_read_modify_write_of_two_member_ios_each_way() {
    // Four disks, stripe 0: parity on d3, data chunk 0 on d0. A 16 KiB write of chunk 0.
    let mut h = raid16(4, 512 * 1024);
    let io = host(9, Op::Write, 0, 4);
    let a = h.request(0, io);
    let reads = submitted(&a);
    assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (3, 0, Op::Read)]);
    assert!(reads.iter().all(|r| r.len == 16384));
    let old = Buf::Scratch {
        id: SCRATCH_BASE,
        offset: 0,
    };
    let par = Buf::Scratch {
        id: SCRATCH_BASE,
        offset: 3 * 16384,
    };
    assert_eq!((reads[0].buf, reads[1].buf), (old, par));
    assert!(h.complete(1, reads[0], Status::Ok).is_empty());
    let a = h.complete(2, reads[1], Status::Ok);
    assert_eq!(
        xors(&a),
        vec![(par, old, 16384), (par, host_buf(9, 0), 16384)]
    );
    let w = submitted(&a);
    assert_eq!(shape(&w), vec![(0, 0, Op::Write), (3, 0, Op::Write)]);
    assert_eq!(
        (w[0].buf, w[0].len, w[1].buf, w[1].len),
        (host_buf(9, 0), 16384, par, 16384)
    );
    assert!(replied(&h.complete(3, w[0], Status::Ok)).is_empty());
    let r = replied(&h.complete(4, w[1], Status::Ok));
    assert_eq!((r[0].io, r[0].status), (io, Status::Ok));
    assert_eq!(h.counter("read_modify_writes"), 4.0, "counted in rows");
    // Row by row (`merge` = a page), the same write is four operations of 4 KiB I/Os.
    let mut h = raid16(4, K);
    let reads = submitted(&h.request(0, io));
    assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (3, 0, Op::Read)]);
    assert!(reads.iter().all(|r| r.len == 4096));
}

#[test]
fn a_range_whose_parity_write_fails_is_redone_row_by_row_without_reading_old_data() {
    let mut h = raid16(4, 512 * 1024);
    let io = host(9, Op::Write, 0, 4);
    let reads = submitted(&h.request(0, io));
    h.complete(1, reads[0], Status::Ok);
    let w = submitted(&h.complete(2, reads[1], Status::Ok));
    assert!(h.complete(3, w[0], Status::Ok).is_empty());
    // The 16 KiB parity write fails: which page, it does not say; nothing is marked yet.
    let a = h.complete(4, w[1], Status::IoError);
    assert_eq!(h.counter("bad_pages"), 0.0);
    assert!(replied(&a).is_empty());
    // Row 0 again, alone: d0 may hold the new data already, so not read-modify-write
    // (which would read d0 and the parity) but reconstruct-write: read d1 and d2.
    let mut reads = submitted(&a);
    for row in 0..4u64 {
        assert_eq!(
            shape(&reads),
            vec![(1, row, Op::Read), (2, row, Op::Read)],
            "row {row}"
        );
        assert!(reads.iter().all(|r| r.len == 4096));
        h.complete(5, reads[0], Status::Ok);
        let w = submitted(&h.complete(6, reads[1], Status::Ok));
        assert_eq!(shape(&w), vec![(0, row, Op::Write), (3, row, Op::Write)]);
        assert_eq!(w[0].buf, host_buf(9, row * K));
        h.complete(7, w[0], Status::Ok);
        // Row 1's parity page really is bad: marked alone, the row still served.
        let st = if row == 1 {
            Status::IoError
        } else {
            Status::Ok
        };
        let a = h.complete(8, w[1], st);
        if row < 3 {
            assert!(replied(&a).is_empty());
            reads = submitted(&a);
        } else {
            let r = replied(&a);
            assert_eq!((r[0].io, r[0].status), (io, Status::Ok));
        }
    }
    assert_eq!(h.counter("bad_pages"), 1.0);
    assert_eq!(h.counter("read_modify_writes"), 4.0);
    assert_eq!(h.counter("reconstruct_writes"), 4.0);
}

/// Complete `ios` and every member I/O they lead to, failing those `fail` picks: the
/// replies.
fn drain(h: &mut Harness<Raid>, ios: Vec<Io>, fail: impl Fn(&Io) -> bool) -> Vec<Completion> {
    let mut replies = Vec::new();
    let mut todo: VecDeque<Io> = ios.into();
    while let Some(io) = todo.pop_front() {
        let st = if fail(&io) {
            Status::IoError
        } else {
            Status::Ok
        };
        let a = h.complete(1, io, st);
        replies.extend(replied(&a));
        todo.extend(submitted(&a));
    }
    replies
}

#[test]
fn a_row_whose_range_write_failed_part_way_and_could_not_be_redone_is_not_rebuilt_from() {
    // Four disks, 16 KiB chunks; stripe 0: data chunks 0, 1, 2 on d0, d1, d2, parity on d3.
    // Rows known by assumption, or (as in PARAID's gears) by a whole write since the start.
    for clean in [true, false] {
        let names: Vec<String> = (0..4).map(|d| format!("d{d}")).collect();
        let devs = (0..4).map(|d| disk(d as u16, &format!("d{d}"))).collect();
        let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, 4 * K, clean);
        let mut h = Harness::new(r, devs).unwrap();
        if !clean {
            // The whole stripe: one full-row range, every row known.
            let a = h.request(0, host(1, Op::Write, 0, 12));
            let r = drain(&mut h, submitted(&a), |_| false);
            assert_eq!(r[0].status, Status::Ok);
        }
        // d2's pages 0 and 1 (chunk 2, host blocks 8, 9) fail: bad, rebuilt from the others.
        let a = h.request(1, host(2, Op::Read, 8, 2));
        let r = drain(&mut h, submitted(&a), |io| io.dev == 2);
        assert_eq!(r[0].status, Status::Ok);
        assert_eq!(h.counter("bad_pages"), 2.0);
        // Blocks 0, 1 (chunk 0's pages 0, 1 on d0): one read-modify-write range (d2's pages,
        // not overwritten, are bad: no reconstruct-write).
        let io = host(3, Op::Write, 0, 2);
        let reads = submitted(&h.request(2, io));
        assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (3, 0, Op::Read)]);
        h.complete(3, reads[0], Status::Ok);
        let w = submitted(&h.complete(3, reads[1], Status::Ok));
        assert_eq!(shape(&w), vec![(0, 0, Op::Write), (3, 0, Op::Write)]);
        // The parity lands (the new data XOR-ed in); d0's write fails, the old data stays.
        // The redo cannot reconstruct either row (d2's pages are bad): refused, no I/O.
        assert!(h.complete(4, w[1], Status::Ok).is_empty());
        let a = h.complete(5, w[0], Status::IoError);
        assert!(submitted(&a).is_empty());
        let r = replied(&a);
        assert_eq!((r[0].io, r[0].status), (io, Status::IoError));
        // Block 8 (d2's bad page 0) rebuilt from d0, d1 and that parity would be old d0 XOR
        // new d0 XOR block 8: a guess. EIO instead, without member I/O.
        let io = host(4, Op::Read, 8, 1);
        let a = h.request(6, io);
        assert!(
            submitted(&a).is_empty(),
            "clean = {clean}: rebuilt from a torn row"
        );
        let r = replied(&a);
        assert_eq!((r[0].io, r[0].status), (io, Status::IoError));
        assert_eq!(h.counter("unknown_row_errors"), 1.0);
        // A read-modify-write keeps the row torn; writing block 8 (a reconstruct-write of
        // its whole page: read d0, d1, write the parity) makes it known again.
        let a = h.request(7, host(5, Op::Write, 0, 1));
        assert_eq!(
            drain(&mut h, submitted(&a), |_| false)[0].status,
            Status::Ok
        );
        let a = h.request(8, host(6, Op::Read, 8, 1));
        assert!(submitted(&a).is_empty());
        assert_eq!(replied(&a)[0].status, Status::IoError);
        let a = h.request(9, host(7, Op::Write, 8, 1));
        let reads = submitted(&a);
        assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (1, 0, Op::Read)]);
        assert_eq!(drain(&mut h, reads, |_| false)[0].status, Status::Ok);
        let a = h.request(10, host(8, Op::Read, 8, 1));
        let reads = submitted(&a);
        assert_eq!(
            shape(&reads),
            vec![(0, 0, Op::Read), (1, 0, Op::Read), (3, 0, Op::Read)]
        );
        assert_eq!(drain(&mut h, reads, |_| false)[0].status, Status::Ok);
    }
}

#[test]
fn a_whole_stripe_write_is_one_full_row_range_with_parity_over_the_range() {
    // Four disks, stripe 0: chunks 0, 1, 2 on d0, d1, d2, parity on d3; 48 KiB from 0.
    let mut h = raid16(4, 512 * 1024);
    let io = host(5, Op::Write, 0, 12);
    let a = h.request(0, io);
    let par = Buf::Scratch {
        id: SCRATCH_BASE,
        offset: 3 * 16384,
    };
    assert_eq!(
        xors(&a),
        (0..3)
            .map(|k| (par, host_buf(5, k * 16384), 16384))
            .collect::<Vec<_>>(),
        "parity = chunk 0 ^ chunk 1 ^ chunk 2, no reads"
    );
    let w = submitted(&a);
    assert_eq!(
        shape(&w),
        vec![
            (0, 0, Op::Write),
            (1, 0, Op::Write),
            (2, 0, Op::Write),
            (3, 0, Op::Write)
        ]
    );
    assert!(w.iter().all(|w| w.len == 16384));
    assert_eq!(w[3].buf, par);
    for (i, s) in w.iter().enumerate() {
        assert_eq!(
            replied(&h.complete(1, *s, Status::Ok)).len(),
            usize::from(i == 3)
        );
    }
    assert_eq!(h.counter("full_row_writes"), 4.0);
}

/// A persisted RAID-5 of three 4 KiB-chunk members (three stripes after d0's log, parity
/// known) with `d3` as its hot spare, replacing `replace` at start if named.
fn with_spare(replace: Option<&str>) -> Harness<Raid> {
    with_spare_window(replace, 1)
}

/// The same, copying `window` stripes at once.
fn with_spare_window(replace: Option<&str>, window: u64) -> Harness<Raid> {
    spare_harness(|r| {
        r.spare("d3".into(), true, replace.map(String::from))
            .copy_window(window)
            .persist(4096)
    })
}

/// A RAID-5 of three 4 KiB-chunk members and a fourth device, each of 88 log blocks (the
/// default bound) and three stripes, parity known, set up by `with`.
fn spare_harness(with: impl FnOnce(Raid) -> Raid) -> Harness<Raid> {
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let devs = (0..4)
        .map(|d| {
            let mut info = disk(d as u16, &format!("d{d}"));
            info.capacity = (88 + 3) * K;
            info
        })
        .collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, true);
    Harness::new(with(r), devs).unwrap()
}

/// The bytes `actions` filled buffers with (the log's blocks), as the harness holds them.
fn filled(h: &Harness<Raid>, actions: &[Action]) -> Vec<u8> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::Fill { data, .. } => Some(h.data(data).to_vec()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Does `bytes` hold `record` verbatim?
fn has(bytes: &[u8], record: &[u8]) -> bool {
    bytes.windows(record.len()).any(|w| w == record)
}

/// Split `actions`' submissions into (the log's writes, the others).
fn split_log(actions: &[Action], region: Region) -> (Vec<Io>, Vec<Io>) {
    submitted(actions)
        .into_iter()
        .partition(|io| io.dev == region.dev && io.offset >= region.offset)
}

#[test]
fn a_replacement_moves_a_stripe_once_its_record_is_durable_and_writes_wait_for_it() {
    let mut h = with_spare(Some("d1"));
    let region = h.function().regions()[0];
    assert_eq!(h.function().volume().unwrap().size, 3 * 2 * K);
    // At start: the replacement's first record (member 1, nothing moved) and the copy of
    // stripe 0's chunk on d1 (data chunk 1 of the volume: d0 and d1 data, d2 parity).
    let a = h.recover_log(&vec![0; region.len as usize]);
    let (log, io) = split_log(&a, region);
    assert_eq!(log.len(), 1);
    assert_eq!(shape(&io), vec![(1, 0, Op::Read)]);
    h.complete(1, log[0], Status::Ok);
    // A write to volume block 1 (stripe 0 on d1) waits behind the copy.
    let w = host(5, Op::Write, 1, 1);
    assert!(submitted(&h.request(2, w)).is_empty());
    // The chunk read lands; it is written to the spare, FUA, from the same scratch.
    let copy = submitted(&h.complete(3, io[0], Status::Ok));
    assert_eq!(shape(&copy), vec![(3, 0, Op::Write)]);
    assert!(copy[0].fua);
    assert_eq!(copy[0].buf, io[0].buf);
    // On the spare: the stripe's record goes to the log; reads still go to d1 until it
    // is durable, and the write still waits.
    let a = h.complete(4, copy[0], Status::Ok);
    let (log, other) = split_log(&a, region);
    assert_eq!((log.len(), other.len()), (1, 0));
    let r = submitted(&h.request(5, host(6, Op::Read, 1, 1)));
    assert_eq!(shape(&r), vec![(1, 0, Op::Read)]);
    // Durable: the write runs, on the spare (a reconstruct-write reading d0, writing the
    // spare and the parity), and the copy of stripe 1 queues (d1 holds its parity).
    let a = h.complete(6, log[0], Status::Ok);
    assert_eq!(
        shape(&submitted(&a)),
        vec![(0, 0, Op::Read), (1, 1, Op::Read)]
    );
    let r = submitted(&h.request(7, host(7, Op::Read, 1, 1)));
    assert_eq!(
        shape(&r),
        vec![(3, 0, Op::Read)],
        "stripe 0 of d1 is on the spare"
    );
    assert_eq!(h.counter("replaced_stripes"), 1.0);
    let rcw = submitted(&a)[0];
    let ws = submitted(&h.complete(8, rcw, Status::Ok));
    assert_eq!(shape(&ws), vec![(3, 0, Op::Write), (2, 0, Op::Write)]);
    // A FLUSH now reaches the spare as well as every member.
    let f = submitted(&h.request(9, host(8, Op::Flush, 0, 0)));
    let mut devs: Vec<u16> = f.iter().map(|io| io.dev).collect();
    devs.sort();
    assert_eq!(devs, vec![0, 1, 2, 3]);
}

#[test]
fn a_member_a_write_fails_on_is_replaced_and_its_bad_page_rebuilt_onto_the_spare() {
    let mut h = with_spare(None);
    let region = h.function().regions()[0];
    h.recover_log(&vec![0; region.len as usize]);
    // A whole-row write of stripe 0 (volume blocks 0, 1): d0, d1 data, d2 parity.
    let w = host(1, Op::Write, 0, 2);
    let ws = submitted(&h.request(0, w));
    assert_eq!(
        shape(&ws),
        vec![(0, 0, Op::Write), (1, 0, Op::Write), (2, 0, Op::Write)]
    );
    // d1's write fails: its page is bad (logged), and d1 wants replacing: the
    // replacement's record follows in the log, its copy queues behind the write.
    let a = h.complete(1, ws[1], Status::IoError);
    let (log, other) = split_log(&a, region);
    assert_eq!((log.len(), other.len()), (1, 0));
    assert_eq!(h.counter("replacements"), 1.0);
    h.complete(2, ws[0], Status::Ok);
    // The write is over but held for its record; the copy runs: d1's page 0 is bad, its
    // row known, so it is rebuilt from d0 and d2.
    let a = h.complete(2, ws[2], Status::Ok);
    assert!(replied(&a).is_empty(), "held");
    let reads = submitted(&a);
    assert_eq!(shape(&reads), vec![(0, 0, Op::Read), (2, 0, Op::Read)]);
    // The bad page's record is durable: the write is answered; the replacement's record
    // goes out next.
    let a = h.complete(3, log[0], Status::Ok);
    assert_eq!(replied(&a)[0].status, Status::Ok);
    let (log, _) = split_log(&a, region);
    h.complete(3, log[0], Status::Ok);
    h.complete(4, reads[0], Status::Ok);
    let a = h.complete(4, reads[1], Status::Ok);
    // The spare's image (the scratch's first page; d0's and d2's pages follow) is d0's
    // page ^ d2's (zeros ^ both), then written out.
    let Buf::Scratch { id, .. } = reads[0].buf else {
        panic!("a copy reads into scratch")
    };
    let slot = |j: u32| Buf::Scratch {
        id,
        offset: j * K as u32,
    };
    assert_eq!((reads[0].buf, reads[1].buf), (slot(1), slot(2)));
    assert_eq!(
        xors(&a),
        vec![(slot(0), slot(1), K as u32), (slot(0), slot(2), K as u32)]
    );
    let copy = submitted(&a);
    assert_eq!(shape(&copy), vec![(3, 0, Op::Write)]);
    assert_eq!(copy[0].buf, slot(0));
    // The stripe's record goes out, the page's follows it in the next log write; both
    // durable, the stripe is on the spare and the page good there. In that order: a crash
    // after a `cleared` made durable first would recover the page as good on d1, where
    // stripe 0 still is by the log, and d1's page holds what was there before the failed
    // write.
    let a = h.complete(5, copy[0], Status::Ok);
    let bytes = filled(&h, &a);
    assert!(
        has(&bytes, &persist::replaced(1, 1)),
        "the stripe's record first"
    );
    assert!(
        !has(&bytes, &persist::cleared(1, 0)),
        "not the page's with it"
    );
    let (log, _) = split_log(&a, region);
    let a = h.complete(6, log[0], Status::Ok);
    assert!(
        has(&filled(&h, &a), &persist::cleared(1, 0)),
        "then the page's"
    );
    let (log, _) = split_log(&a, region);
    assert_eq!(h.counter("replaced_stripes"), 0.0);
    assert_eq!(h.counter("spare_rebuilt_pages"), 0.0);
    let a = h.complete(6, log[0], Status::Ok);
    assert_eq!(h.counter("spare_rebuilt_pages"), 1.0);
    assert_eq!(h.counter("replaced_stripes"), 1.0);
    // Stripe 1's copy reads d1's chunk there (its parity).
    assert_eq!(shape(&submitted(&a)), vec![(1, 1, Op::Read)]);
    // Block 1 is read from the spare directly, not rebuilt.
    let r = submitted(&h.request(7, host(2, Op::Read, 1, 1)));
    assert_eq!(shape(&r), vec![(3, 0, Op::Read)]);
}

#[test]
fn a_copy_window_moves_its_stripes_together_under_one_record() {
    let mut h = with_spare_window(Some("d1"), 3);
    let region = h.function().regions()[0];
    // The replacement's record, and the three stripes' copies at once.
    let a = h.recover_log(&vec![0; region.len as usize]);
    let (log, reads) = split_log(&a, region);
    assert_eq!(
        shape(&reads),
        vec![(1, 0, Op::Read), (1, 1, Op::Read), (1, 2, Op::Read)]
    );
    h.complete(1, log[0], Status::Ok);
    // A write to volume block 2 (stripe 1: data on d2 and d0, parity on d1) waits.
    assert!(submitted(&h.request(2, host(9, Op::Write, 2, 1))).is_empty());
    let writes: Vec<Io> = reads
        .iter()
        .flat_map(|r| submitted(&h.complete(3, *r, Status::Ok)))
        .collect();
    assert_eq!(
        shape(&writes),
        vec![(3, 0, Op::Write), (3, 1, Op::Write), (3, 2, Op::Write)]
    );
    // The window's one record goes out when its last stripe is on the spare.
    assert!(split_log(&h.complete(4, writes[0], Status::Ok), region)
        .0
        .is_empty());
    assert!(split_log(&h.complete(4, writes[1], Status::Ok), region)
        .0
        .is_empty());
    let (log, _) = split_log(&h.complete(4, writes[2], Status::Ok), region);
    assert_eq!(log.len(), 1);
    assert_eq!(h.counter("replaced_stripes"), 0.0);
    // Durable: all three moved; the write runs, its parity to the spare.
    let rcw = submitted(&h.complete(5, log[0], Status::Ok));
    assert_eq!(h.counter("replaced_stripes"), 3.0);
    assert_eq!(shape(&rcw), vec![(0, 1, Op::Read)]);
    let ws = submitted(&h.complete(6, rcw[0], Status::Ok));
    assert_eq!(shape(&ws), vec![(2, 1, Op::Write), (3, 1, Op::Write)]);
}

const MS: Nanos = 1_000_000;

/// A persisted RAID-5 of three 4 KiB-chunk members — eight stripes after d0's log of 88
/// blocks — with md's write-intent bitmap in regions of two stripes (volume blocks
/// 4r..4r + 4), cleaned after 1 ms without writes.
fn with_intent(assume_clean: bool, write_intent: bool) -> Harness<Raid> {
    let names: Vec<String> = (0..3).map(|d| format!("d{d}")).collect();
    let devs = (0..3)
        .map(|d| {
            let mut info = disk(d as u16, &format!("d{d}"));
            info.capacity = (88 + 8) * K;
            info
        })
        .collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, K, assume_clean);
    let r = if write_intent {
        r.write_intent(2 * K, MS)
    } else {
        r
    };
    Harness::new(r.persist(4096).bitmap_reserve(2 * K), devs).unwrap()
}

/// The log's region as the devices hold it: `land` copies into it what the layer writes.
struct LogImage {
    region: Region,
    bytes: Vec<u8>,
}

impl LogImage {
    fn new(h: &Harness<Raid>) -> LogImage {
        let region = h.function().regions()[0];
        assert_eq!((region.len, region.offset), (88 * K, 8 * K));
        LogImage {
            region,
            bytes: vec![0; region.len as usize],
        }
    }

    /// Copy the bytes `actions` fill and write into the region; the log's writes, and
    /// whether any holds `record`.
    fn land(&mut self, h: &Harness<Raid>, actions: &[Action], record: &[u8]) -> (Vec<Io>, bool) {
        let log = h.land(actions, self.region, &mut self.bytes);
        let found = !record.is_empty()
            && log.iter().any(|w| {
                let at = (w.offset - self.region.offset) as usize;
                has(&self.bytes[at..at + w.len as usize], record)
            });
        (log, found)
    }

    /// Start `h` on the region as it is, its new header landed: the actions after.
    fn start(&mut self, h: &mut Harness<Raid>) -> Vec<Action> {
        let bytes = self.bytes.clone();
        let a = h.log_bytes(&bytes);
        let (log, _) = self.land(h, &a, &[]);
        assert_eq!(log.len(), 1, "the new header");
        // (Its fills are landed: their bytes are gone with the next event.)
        let mut rest: Vec<Action> = a
            .into_iter()
            .filter(|x| {
                !matches!(x, Action::Submit(io) if io.id == log[0].id)
                    && !matches!(x, Action::Fill { .. })
            })
            .collect();
        rest.extend(h.complete(0, log[0], Status::Ok));
        rest
    }
}

fn timers(actions: &[Action]) -> Vec<Nanos> {
    actions
        .iter()
        .filter_map(|a| match *a {
            Action::SetTimer { timer, at } if timer == intent::TIMER => Some(at),
            _ => None,
        })
        .collect()
}

/// Write volume block `block` of `with_intent`'s array whose region is logged dirty and
/// whose row is known: its reconstruct-write's read, then its two writes; the reply.
fn write_through(h: &mut Harness<Raid>, now: Nanos, io: Io, first: Vec<Action>) -> Vec<Action> {
    let reads = submitted(&first);
    assert_eq!(reads.len(), 1, "{reads:?}");
    assert_eq!(reads[0].op, Op::Read);
    let w = submitted(&h.complete(now, reads[0], Status::Ok));
    assert_eq!(w.len(), 2);
    h.complete(now, w[0], Status::Ok);
    let a = h.complete(now, w[1], Status::Ok);
    assert_eq!(replied(&a)[0].io, io);
    a
}

#[test]
fn a_write_to_a_clean_region_waits_for_its_dirty_record_and_an_idle_region_is_logged_clean_after_a_flush_round(
) {
    let mut h = with_intent(true, true);
    let mut img = LogImage::new(&h);
    // A new log: the geometry, every region clean (`assume_clean`), logged before any
    // request is served.
    let a = img.start(&mut h);
    let (log, found) = img.land(&h, &a, &persist::intent_geometry(2, true));
    assert!(found && log.len() == 1, "{a:?}");
    let io = host(1, Op::Write, 1, 1);
    assert!(
        submitted(&h.request(0, io)).is_empty(),
        "waits for the geometry"
    );
    // Durable: the write runs into region 0, which is clean: its dirty record first, and
    // no member I/O until that is durable (md's bitmap_startwrite + unplug).
    let a = h.complete(0, log[0], Status::Ok);
    let (dirty, found) = img.land(&h, &a, &persist::intent_dirty(0));
    assert!(found && submitted(&a).len() == 1, "{a:?}");
    assert_eq!(h.counter("intent_waits"), 1.0);
    let a = h.complete(0, dirty[0], Status::Ok);
    // Block 1 is d1's page 0: the row is known, a reconstruct-write reading d0.
    assert_eq!(shape(&submitted(&a)), vec![(0, 0, Op::Read)]);
    assert_eq!(timers(&a), vec![MS], "the lazy clean's first tick");
    write_through(&mut h, 0, io, a);
    // The first tick: region 0 was written in the period, so nothing; the second: a FLUSH
    // of every member, then the clean record.
    let a = h.timer(MS, intent::TIMER);
    assert!(submitted(&a).is_empty());
    assert_eq!(timers(&a), vec![2 * MS]);
    let f = submitted(&h.timer(2 * MS, intent::TIMER));
    assert_eq!(
        f.iter().map(|io| (io.dev, io.op)).collect::<Vec<_>>(),
        vec![(0, Op::Flush), (1, Op::Flush), (2, Op::Flush)]
    );
    assert!(submitted(&h.complete(2 * MS, f[0], Status::Ok)).is_empty());
    h.complete(2 * MS, f[1], Status::Ok);
    let a = h.complete(2 * MS, f[2], Status::Ok);
    let (clean, found) = img.land(&h, &a, &persist::intent_clean(0));
    assert!(found && clean.len() == 1);
    assert_eq!(h.counter("intent_clean_records"), 1.0);
    assert_eq!(h.counter("intent_flush_rounds"), 1.0);
    // Written again: dirty again, before its member I/O (after the clean record's write:
    // one log write at a time).
    let io = host(2, Op::Write, 0, 1);
    assert!(submitted(&h.request(3 * MS, io)).is_empty());
    let a = h.complete(3 * MS, clean[0], Status::Ok);
    let (dirty, found) = img.land(&h, &a, &persist::intent_dirty(0));
    assert!(found && submitted(&a).len() == 1);
    let a = h.complete(3 * MS, dirty[0], Status::Ok);
    write_through(&mut h, 3 * MS, io, a);
    // A write to a region while its flush round is out takes it out of the round: region
    // 1 (block 4) written, idle for a period, its round out, written again meanwhile.
    let io = host(3, Op::Write, 4, 1);
    let a = h.request(4 * MS, io);
    let (dirty, _) = img.land(&h, &a, &[]);
    let a = h.complete(4 * MS, dirty[0], Status::Ok);
    write_through(&mut h, 4 * MS, io, a);
    h.timer(5 * MS, intent::TIMER);
    let f = submitted(&h.timer(6 * MS, intent::TIMER));
    assert_eq!(f.len(), 3, "regions 0 and 1 idle: one round for both");
    let io = host(4, Op::Write, 5, 1);
    let a = h.request(6 * MS, io);
    write_through(&mut h, 6 * MS, io, a);
    for x in &f {
        let a = h.complete(7 * MS, *x, Status::Ok);
        let (_, found) = img.land(&h, &a, &persist::intent_clean(1));
        assert!(!found, "region 1 was written while its round was out");
    }
    assert_eq!(h.counter("intent_clean_records"), 2.0, "region 0 only");
    assert_eq!(h.counter("intent_dirty_regions"), 1.0);
}

/// The member I/Os of `actions` (not the log's), as (device, page, op, priority).
fn members(actions: &[Action], img: &LogImage) -> Vec<(u16, u64, Op, i8)> {
    let (_, other) = split_log(actions, img.region);
    other
        .iter()
        .map(|io| (io.dev, io.offset / K, io.op, io.priority))
        .collect()
}

#[test]
fn a_restart_trusts_the_regions_logged_clean_and_resyncs_the_others_before_rebuilding_from_them() {
    // A first run: a new log, every region clean; block 1 written (region 0 dirty), then
    // a crash before the region is logged clean again.
    let mut h = with_intent(true, true);
    let mut img = LogImage::new(&h);
    let a = img.start(&mut h);
    let (log, _) = img.land(&h, &a, &[]);
    let io = host(1, Op::Write, 1, 1);
    h.request(0, io);
    let a = h.complete(0, log[0], Status::Ok);
    let (dirty, found) = img.land(&h, &a, &persist::intent_dirty(0));
    assert!(found);
    let a = h.complete(0, dirty[0], Status::Ok);
    write_through(&mut h, 0, io, a);
    // The restart (`assume_clean` no longer matters: the log decides). Regions 1–3 are
    // consistent; region 0 is resynced, stripe by stripe, at priority −1: stripe 0's data
    // (d0, d1) read, its parity (d2) written as their XOR.
    let mut h = with_intent(false, true);
    let a = img.start(&mut h);
    assert_eq!(h.counter("intent_recovered_clean_regions"), 3.0);
    assert_eq!(
        members(&a, &img),
        vec![(0, 0, Op::Read, -1), (1, 0, Op::Read, -1)]
    );
    let resync = submitted(&a);
    // A read of block 4 (region 1, stripe 2: d1's page 2) fails: its row is known, so the
    // page is rebuilt from d2 and the parity on d0.
    let r4 = host(2, Op::Read, 4, 1);
    let sub = submitted(&h.request(1, r4))[0];
    assert_eq!((sub.dev, sub.offset / K), (1, 2));
    let retry = submitted(&h.complete(1, sub, Status::IoError));
    assert_eq!(
        shape(&retry),
        vec![(1, 2, Op::Read)],
        "the page alone first"
    );
    let a = h.complete(1, retry[0], Status::IoError);
    assert_eq!(
        members(&a, &img),
        vec![(2, 2, Op::Read, 0), (0, 2, Op::Read, 0)]
    );
    // A read of block 0 (region 0, being resynced) fails too: its rebuild waits behind the
    // stripe's resync...
    let r0 = host(3, Op::Read, 0, 1);
    let sub = submitted(&h.request(2, r0))[0];
    assert!(members(&h.complete(2, sub, Status::IoError), &img).is_empty());
    h.complete(3, resync[0], Status::Ok);
    let a = h.complete(3, resync[1], Status::Ok);
    let x = xors(&a);
    assert_eq!(x.len(), 2, "the parity is the XOR of the two data pages");
    assert_eq!(members(&a, &img), vec![(2, 0, Op::Write, -1)]);
    let parity = submitted(&a)[0];
    // ...and once that is written, is retried alone (stripe 1's resync starts meanwhile:
    // parity d1, data d2 and d0), fails, and answers EIO: the region is not consistent
    // until its every stripe is.
    let a = h.complete(4, parity, Status::Ok);
    assert_eq!(
        members(&a, &img),
        vec![
            (2, 1, Op::Read, -1),
            (0, 1, Op::Read, -1),
            (0, 0, Op::Read, 0)
        ]
    );
    let s1 = submitted(&a)[..2].to_vec();
    let a = h.complete(4, submitted(&a)[2], Status::IoError);
    let r = replied(&a);
    assert_eq!((r[0].io, r[0].status), (r0, Status::IoError));
    assert_eq!(h.counter("unknown_row_errors"), 1.0);
    h.complete(5, s1[0], Status::Ok);
    let w = submitted(&h.complete(5, s1[1], Status::Ok));
    assert_eq!(shape(&w), vec![(1, 1, Op::Write)]);
    let a = h.complete(6, w[0], Status::Ok);
    assert_eq!(
        timers(&a),
        vec![6 + MS],
        "region 0, consistent, to be logged clean"
    );
    assert_eq!(h.counter("resynced_regions"), 1.0);
    assert_eq!(h.counter("resynced_rows"), 2.0);
    // Now block 0's bad page is rebuilt from d1 and the parity.
    let a = h.request(7, host(4, Op::Read, 0, 1));
    assert_eq!(
        members(&a, &img),
        vec![(1, 0, Op::Read, 0), (2, 0, Op::Read, 0)]
    );
}

#[test]
fn a_change_of_bitmap_geometry_is_logged_before_any_request_and_a_clean_stop_cleans_every_region() {
    // A log without a bitmap, then the same array with one: every region dirty (writes went
    // unrecorded), logged before a request goes, and the whole array resynced.
    let mut h = with_intent(true, false);
    let mut img = LogImage::new(&h);
    let a = img.start(&mut h);
    assert!(img.land(&h, &a, &[]).0.is_empty(), "no bitmap, no record");
    let mut h = with_intent(true, true);
    let a = img.start(&mut h);
    let (log, found) = img.land(&h, &a, &persist::intent_geometry(2, false));
    assert!(
        found,
        "a log that is not new: `assume_clean` does not apply"
    );
    let io = host(1, Op::Read, 9, 1);
    assert!(submitted(&h.request(0, io)).is_empty());
    let a = h.complete(0, log[0], Status::Ok);
    assert_eq!(
        members(&a, &img),
        vec![
            (0, 4, Op::Read, 0),
            (0, 0, Op::Read, -1),
            (1, 0, Op::Read, -1)
        ],
        "the read that waited, then stripe 0's resync"
    );
    // Resync every stripe (two reads, then the parity write, each).
    let mut out = submitted(&a)[1..].to_vec();
    let mut stripes = 0;
    while !out.is_empty() {
        let mut next = Vec::new();
        for io in out {
            let (_, other) = split_log(&h.complete(1, io, Status::Ok), img.region);
            next.extend(other);
        }
        stripes += usize::from(next.len() == 1);
        out = next;
    }
    assert_eq!(stripes, 8);
    assert_eq!(h.counter("resynced_regions"), 4.0);
    assert_eq!(h.counter("intent_dirty_regions"), 4.0);
    // A clean stop: every region idle, one flush round, then their clean records.
    let f = submitted(&h.stop(2));
    assert_eq!(f.len(), 3);
    assert!(f.iter().all(|io| io.op == Op::Flush));
    h.complete(2, f[0], Status::Ok);
    h.complete(2, f[1], Status::Ok);
    // The first record goes at once, the other three together in the next log write.
    let mut a = h.complete(2, f[2], Status::Ok);
    let mut cleaned = Vec::new();
    loop {
        let (log, _) = img.land(&h, &a, &[]);
        let Some(w) = log.first() else { break };
        cleaned.extend((0..4).filter(|&r| img.land(&h, &a, &persist::intent_clean(r)).1));
        a = h.complete(3, *w, Status::Ok);
    }
    assert_eq!(cleaned, vec![0, 1, 2, 3]);
    assert_eq!(h.counter("intent_dirty_regions"), 0.0);
    // Turned off again: the geometry "no bitmap" is logged first, so the next start with a
    // bitmap cannot trust these clean records after writes it did not see.
    let mut h = with_intent(true, false);
    let a = img.start(&mut h);
    let (log, found) = img.land(&h, &a, &persist::intent_geometry(0, false));
    assert!(found);
    let io = host(2, Op::Read, 9, 1);
    assert!(submitted(&h.request(0, io)).is_empty());
    assert_eq!(
        shape(&submitted(&h.complete(0, log[0], Status::Ok))),
        vec![(0, 4, Op::Read)]
    );
}

/// Complete every log write in `a` and those that follow (landing them), returning the
/// other submissions on the way.
fn drain_log(h: &mut Harness<Raid>, img: &mut LogImage, mut a: Vec<Action>) -> Vec<Io> {
    let mut other = Vec::new();
    loop {
        let (log, _) = img.land(h, &a, &[]);
        other.extend(split_log(&a, img.region).1);
        let Some(w) = log.first() else {
            return other;
        };
        a = h.complete(0, *w, Status::Ok);
    }
}

#[test]
fn a_resync_passes_over_stripes_with_a_bad_page_and_leaves_their_region_dirty() {
    // A first run without a bitmap: d1's pages 2 and 3 (stripes 2 and 3, region 1) fail
    // their reads alone, and are logged bad.
    let mut h = with_intent(true, false);
    let mut img = LogImage::new(&h);
    img.start(&mut h);
    for block in [4, 7] {
        let sub = submitted(&h.request(0, host(block, Op::Read, block, 1)))[0];
        let retry = submitted(&h.complete(0, sub, Status::IoError))[0];
        let a = h.complete(0, retry, Status::IoError);
        drain_log(&mut h, &mut img, a);
    }
    assert_eq!(h.counter("bad_pages"), 2.0);
    // With a bitmap: every region dirty, resynced in order; region 1's stripes hold a bad
    // page, so after stripe 1 the resync goes on with stripe 4 (parity d1: d2, d0 read),
    // and region 1 stays dirty.
    let mut h = with_intent(true, true);
    let a = img.start(&mut h);
    let mut out = drain_log(&mut h, &mut img, a);
    assert_eq!(h.counter("recovered_bad_pages"), 2.0);
    let mut reads = Vec::new();
    while !out.is_empty() {
        let mut next = Vec::new();
        for io in out {
            if io.op == Op::Read {
                reads.push((io.dev, io.offset / K));
            }
            next.extend(split_log(&h.complete(1, io, Status::Ok), img.region).1);
        }
        out = next;
    }
    let stripes: Vec<u64> = reads.iter().map(|r| r.1).step_by(2).collect();
    assert_eq!(stripes, vec![0, 1, 4, 5, 6, 7]);
    assert_eq!(&reads[4..6], &[(2, 4), (0, 4)]);
    assert_eq!(h.counter("resynced_regions"), 3.0);
    assert_eq!(h.counter("unsynced_regions"), 1.0);
    assert_eq!(
        h.counter("intent_dirty_regions"),
        4.0,
        "none logged clean yet"
    );
}

#[test]
fn a_torn_row_keeps_its_bitmap_region_dirty() {
    // As `a_row_whose_range_write_failed_part_way_and_could_not_be_redone_is_not_rebuilt_from`,
    // with md's bitmap: four members, 16 KiB chunks, two stripes before d0's log, a region a
    // stripe, every region clean at the start (`assume_clean` on a new log).
    let names: Vec<String> = (0..4).map(|d| format!("d{d}")).collect();
    let devs = (0..4)
        .map(|d| {
            let mut info = disk(d as u16, &format!("d{d}"));
            info.capacity = (88 + 8) * K;
            info
        })
        .collect();
    let r = Raid::new(names, Level::Raid5, Parity::LeftSymmetric, 4 * K, true)
        .write_intent(4 * K, MS)
        .persist(4096)
        .bitmap_reserve(4 * K);
    let mut h = Harness::new(r, devs).unwrap();
    let region = h.function().regions()[0];
    let mut img = LogImage {
        region,
        bytes: vec![0; region.len as usize],
    };
    let a = img.start(&mut h);
    drain(&mut h, submitted(&a), |_| false);
    let log = |io: &Io| io.dev == 0 && io.offset >= region.offset;
    // d2's pages 0 and 1 fail (bad, logged); then the range write of blocks 0, 1 whose
    // write to d0 fails after the parity landed: both rows torn, the write EIO.
    let a = h.request(1, host(2, Op::Read, 8, 2));
    let r = drain(&mut h, submitted(&a), |io| io.dev == 2);
    assert_eq!(r[0].status, Status::Ok);
    assert_eq!(h.counter("bad_pages"), 2.0);
    let a = h.request(2, host(3, Op::Write, 0, 2));
    let r = drain(&mut h, submitted(&a), |io| {
        io.dev == 0 && io.op == Op::Write && !log(io)
    });
    assert_eq!(r[0].status, Status::IoError);
    let a = h.request(3, host(4, Op::Read, 8, 1));
    assert!(submitted(&a).is_empty(), "rebuilt from a torn row");
    assert_eq!(replied(&a)[0].status, Status::IoError);
    // Region 0 is not logged clean when idle (a restart would trust the torn row): no
    // flush round, no clean record.
    for t in 1..4 {
        let a = h.timer(t * MS, intent::TIMER);
        drain(&mut h, submitted(&a), |_| false);
    }
    assert_eq!(h.counter("intent_flush_rounds"), 0.0);
    assert_eq!(h.counter("intent_clean_records"), 0.0);
    assert_eq!(h.counter("intent_dirty_regions"), 1.0);
}
