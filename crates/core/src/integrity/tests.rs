use super::*;
use crate::io::{IoId, Request};

const B: u64 = 4096;

fn host(id: u64, op: Op, block: u64, blocks: u64) -> Io {
    Request::new(0, op, block * B, (blocks * B) as u32).io(id)
}

/// `io` as a pass-through layer sends it to device `dev` at `block`.
fn to_dev(io: &Io, dev: u16, block: u64) -> Io {
    Io {
        dev,
        offset: block * B,
        ..*io
    }
}

fn ok(io: Io, at: Nanos) -> Completion {
    Completion::ok(io, at, Default::default())
}

/// Submit `io` to its device and complete it at once.
fn device(c: &mut Checker, now: Nanos, io: Io) {
    c.device_submit(now, &io);
    c.device_complete(now, &ok(io, now));
}

/// A host write of `blocks` blocks at `block` passed straight to device 0, acknowledged.
fn write(c: &mut Checker, now: Nanos, id: u64, block: u64, blocks: u64) {
    let io = host(id, Op::Write, block, blocks);
    c.host_request(now, &io);
    device(c, now, io);
    c.host_reply(now, &ok(io, now)).unwrap();
}

/// A host read passed straight to device `dev` at `at_block`: the checker's verdict.
fn read_from(
    c: &mut Checker,
    now: Nanos,
    id: u64,
    block: u64,
    dev: u16,
    at_block: u64,
) -> Result<(), String> {
    let io = host(id, Op::Read, block, 1);
    c.host_request(now, &io);
    device(c, now, to_dev(&io, dev, at_block));
    c.host_reply(now, &ok(io, now))
}

fn flush(c: &mut Checker, now: Nanos, id: u64, forward: bool) {
    let io = host(id, Op::Flush, 0, 0);
    c.host_request(now, &io);
    if forward {
        device(c, now, io);
    }
    c.host_reply(now, &ok(io, now)).unwrap();
}

#[test]
fn a_write_reads_back_through_a_device() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 3, 2);
    read_from(&mut c, 20, 1, 3, 0, 3).unwrap();
    read_from(&mut c, 30, 2, 4, 0, 4).unwrap();
    // Never written: the initial content is the right answer.
    read_from(&mut c, 40, 3, 9, 0, 9).unwrap();
    let n = c.counters();
    assert_eq!(
        (n.reads_checked, n.blocks_checked, n.blocks_unverified),
        (3, 3, 0)
    );
    // Host blocks 3, 4 (written) and 9 (read); device blocks 3, 4 (written).
    assert_eq!(c.host.len() + c.dev.len(), 4);
    assert_eq!(c.tracked_blocks(), 4);
}

#[test]
fn a_page_read_from_the_wrong_place_is_named() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 3, 1);
    write(&mut c, 11, 1, 5, 1);
    let e = read_from(&mut c, 20, 7, 3, 0, 5).unwrap_err();
    assert_eq!(
        e,
        "integrity: host read 7 (volume 0, bytes 12288..16384) issued at 20 ns, replied at 20 ns: \
         block 3 (bytes 12288..16384) holds v2, expected v1 (host request 0, acknowledged at 10 ns)"
    );
}

#[test]
fn a_write_acknowledged_before_it_landed_is_caught() {
    let mut c = Checker::new(4096).unwrap();
    let w = host(0, Op::Write, 0, 1);
    c.host_request(10, &w);
    c.device_submit(10, &w);
    // Acknowledged at once, by a layer that does not wait for the device.
    c.host_reply(10, &ok(w, 10)).unwrap();
    let e = read_from(&mut c, 20, 1, 0, 0, 0).unwrap_err();
    assert!(
        e.contains("holds the initial content [superseded], expected v1 (host request 0"),
        "{e}"
    );
    // Once the write lands, the same read is right.
    c.device_complete(30, &ok(w, 30));
    read_from(&mut c, 40, 2, 0, 0, 0).unwrap();
}

#[test]
fn overlapping_writes_may_land_in_either_order() {
    let mut c = Checker::new(4096).unwrap();
    let (w1, w2) = (host(0, Op::Write, 0, 1), host(1, Op::Write, 0, 1));
    // Both in flight together; the device completes w2 first, then w1 (w1 wins).
    c.host_request(10, &w1);
    c.host_request(11, &w2);
    c.device_submit(12, &w2);
    c.device_submit(12, &w1);
    c.device_complete(13, &ok(w2, 13));
    c.device_complete(14, &ok(w1, 14));
    c.host_reply(15, &ok(w2, 15)).unwrap();
    c.host_reply(15, &ok(w1, 15)).unwrap();
    read_from(&mut c, 20, 2, 0, 0, 0).unwrap();
    // A third write issued after both were acknowledged supersedes them both.
    let w3 = host(3, Op::Write, 0, 1);
    c.host_request(30, &w3);
    c.device_submit(30, &w3);
    // A read issued while w3 is in flight may see w3 or what was there.
    let r = host(4, Op::Read, 0, 1);
    c.host_request(31, &r);
    device(&mut c, 31, r);
    c.device_complete(32, &ok(w3, 32));
    c.host_reply(33, &ok(w3, 33)).unwrap();
    c.host_reply(33, &ok(r, 33)).unwrap();
    read_from(&mut c, 40, 5, 0, 0, 0).unwrap();
    // A layer that leaves the old version in place once w3 is acknowledged is caught: a
    // device still holding w1's version (written to device 1 before w3) is stale.
    let mut stale = Checker::new(4096).unwrap();
    write(&mut stale, 10, 0, 0, 1);
    let w = host(1, Op::Write, 0, 1);
    stale.host_request(20, &w);
    device(&mut stale, 20, to_dev(&w, 1, 0));
    stale.host_reply(20, &ok(w, 20)).unwrap();
    let e = read_from(&mut stale, 30, 2, 0, 0, 0).unwrap_err();
    assert!(
        e.contains("holds v1 (host request 0, acknowledged at 10 ns) [superseded], expected v2 (host request 1, acknowledged at 20 ns)"),
        "{e}"
    );
}

#[test]
fn durability_follows_fua_and_completed_flushes() {
    // Acknowledged but never flushed: a crash may lose it (either version reads back).
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 0, 1);
    c.crash(20);
    read_from(&mut c, 30, 0, 0, 0, 0).unwrap();

    // Flushed by the host and the device: it must read back, and does.
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 0, 1);
    flush(&mut c, 11, 1, true);
    c.crash(20);
    read_from(&mut c, 30, 0, 0, 0, 0).unwrap();

    // The host's FLUSH was acknowledged without flushing the device: the device dropped the
    // write, and the checker says so.
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 0, 1);
    flush(&mut c, 11, 1, false);
    c.crash(20);
    let e = read_from(&mut c, 30, 0, 0, 0, 0).unwrap_err();
    assert!(
        e.contains("holds the initial content, expected v1 (host request 0 before crash 1, acknowledged at 10 ns)"),
        "{e}"
    );
    assert_eq!(c.counters().crashes, 1);

    // FUA on the way down: durable without a flush.
    let mut c = Checker::new(4096).unwrap();
    let w = Io {
        fua: true,
        ..host(0, Op::Write, 0, 1)
    };
    c.host_request(10, &w);
    device(&mut c, 10, w);
    c.host_reply(10, &ok(w, 10)).unwrap();
    c.crash(20);
    read_from(&mut c, 30, 0, 0, 0, 0).unwrap();
}

#[test]
fn a_device_flush_covers_only_writes_completed_before_it_was_submitted() {
    let mut c = Checker::new(4096).unwrap();
    let (w1, w2) = (host(0, Op::Write, 0, 1), host(1, Op::Write, 1, 1));
    let f = host(2, Op::Flush, 0, 0);
    c.host_request(10, &w1);
    c.host_request(10, &w2);
    device(&mut c, 10, w1);
    c.device_submit(11, &w2);
    c.device_submit(12, &f);
    c.device_complete(13, &ok(w2, 13));
    c.device_complete(14, &ok(f, 14));
    // Block 0 is durable on the device, block 1 is not.
    assert_eq!(c.dev[&(0, 0)].durable, 1);
    assert_eq!(c.dev[&(0, 1)].durable, INITIAL);
    assert_eq!(c.dev[&(0, 1)].current(), 2);
    c.crash(20);
    assert_eq!(c.dev[&(0, 1)].current(), INITIAL);
}

#[test]
fn writes_in_flight_at_a_crash_may_or_may_not_read_back() {
    let mut c = Checker::new(4096).unwrap();
    let w = Io {
        fua: true,
        ..host(0, Op::Write, 0, 1)
    };
    // Landed durably, but never acknowledged: reading it back is allowed, and so is the
    // initial content (the other outcome of a crash, read here from device 1, which never
    // saw the write).
    let mut other = Checker::new(4096).unwrap();
    for c in [&mut c, &mut other] {
        c.host_request(10, &w);
        device(c, 10, w);
        c.crash(20);
    }
    read_from(&mut c, 30, 0, 0, 0, 0).unwrap();
    read_from(&mut other, 31, 1, 0, 1, 0).unwrap();
}

/// A crash leaves one version of each block on the media, and it stays: once a read after
/// the crash found one of the versions the crash could have left, every later read finds it
/// too (or a later write), also after another crash. A layer keeping two copies that
/// disagree after a crash (a mirror written with FUA on one side only, a replica copied
/// from an unflushed source) must not answer from either, read after read.
#[test]
fn a_crash_leaves_one_version_of_a_block_and_later_reads_agree_on_it() {
    // Version 1 is durable on device 1 only: the host never flushed it.
    let mirror = |c: &mut Checker| {
        let w = host(0, Op::Write, 0, 1);
        c.host_request(10, &w);
        device(c, 10, w);
        device(
            c,
            10,
            Io {
                fua: true,
                ..to_dev(&w, 1, 0)
            },
        );
        c.host_reply(10, &ok(w, 10)).unwrap();
        c.crash(20);
    };
    // Either outcome may come first...
    let mut c = Checker::new(4096).unwrap();
    mirror(&mut c);
    read_from(&mut c, 30, 1, 0, 1, 0).unwrap();
    read_from(&mut c, 31, 2, 0, 1, 0).unwrap();
    // ...but the other never follows.
    let e = read_from(&mut c, 32, 3, 0, 0, 0).unwrap_err();
    assert!(
        e.contains("block 0 (bytes 0..4096) holds the initial content [lost in a crash: an earlier read after it found another version], expected v1 (host request 0 before crash 1, acknowledged at 10 ns)"),
        "{e}"
    );
    let mut c = Checker::new(4096).unwrap();
    mirror(&mut c);
    read_from(&mut c, 30, 1, 0, 0, 0).unwrap();
    let e = read_from(&mut c, 31, 2, 0, 1, 0).unwrap_err();
    assert!(
        e.contains("holds v1 (host request 0 before crash 1, acknowledged at 10 ns) [lost in a crash: an earlier read after it found another version], expected the initial content"),
        "{e}"
    );
    // What a read found is durable: a second crash keeps it.
    let mut c = Checker::new(4096).unwrap();
    mirror(&mut c);
    read_from(&mut c, 30, 1, 0, 1, 0).unwrap();
    c.crash(40);
    read_from(&mut c, 50, 2, 0, 1, 0).unwrap();
    assert!(read_from(&mut c, 51, 3, 0, 0, 0).is_err());
    // A write after the crash supersedes both, as ever.
    let mut c = Checker::new(4096).unwrap();
    mirror(&mut c);
    read_from(&mut c, 30, 1, 0, 0, 0).unwrap();
    write(&mut c, 40, 2, 0, 1);
    read_from(&mut c, 50, 3, 0, 0, 0).unwrap();
    assert!(read_from(&mut c, 51, 4, 0, 1, 0).is_err());
}

#[test]
fn scratch_copies_carry_versions_and_unfilled_buffers_are_garbage() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 4, 1);
    // A function copies block 4 of device 0 to block 9 of device 1 through scratch 7.
    let rd = Io::own(7, Op::Read, 0, 4 * B, B as u32);
    device(&mut c, 20, rd);
    let wr = Io::own(8, Op::Write, 1, 9 * B, B as u32);
    let wr = Io {
        buf: Buf::Scratch { id: 7, offset: 0 },
        ..wr
    };
    device(&mut c, 21, wr);
    read_from(&mut c, 30, 1, 4, 1, 9).unwrap();
    // A write out of a scratch buffer nobody filled lands garbage.
    device(&mut c, 40, Io::own(9, Op::Write, 1, 9 * B, B as u32));
    let e = read_from(&mut c, 50, 2, 4, 1, 9).unwrap_err();
    assert!(e.contains("holds garbage (a buffer never filled)"), "{e}");
}

/// The checker forgets a scratch buffer's versions when the kernel frees it
/// (`scratch_freed`, by the executors' one rule, `crate::scratch`), and only then: it kept
/// every copy's entries until a crash, so a long checked run grew with its copies.
#[test]
fn scratch_versions_are_forgotten_when_the_buffer_is_freed() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 4, 2);
    let scratch = |id| Buf::Scratch { id, offset: 0 };
    // A two-block copy through scratch 7, written out in two halves.
    let rd = Io::own(7, Op::Read, 0, 4 * B, 2 * B as u32);
    device(&mut c, 20, rd);
    assert_eq!(c.scratch_entries(), 2);
    let half = |n: u64| Io {
        buf: Buf::Scratch {
            id: 7,
            offset: (n * B) as u32,
        },
        ..Io::own(8 + n, Op::Write, 1, (9 + n) * B, B as u32)
    };
    let (w0, w1) = (half(0), half(1));
    c.device_submit(21, &w0);
    c.device_submit(21, &w1);
    c.device_complete(22, &ok(w0, 22));
    c.device_complete(23, &ok(w1, 23));
    assert_eq!(c.scratch_entries(), 2, "kept until the kernel frees it");
    c.scratch_freed(23, 7);
    assert_eq!(c.scratch_entries(), 0);
    // The second half landed what the buffer held when it was sent.
    read_from(&mut c, 30, 1, 5, 1, 10).unwrap();
    c.fill(40, scratch(20), 2 * B as u32);
    c.xor(40, scratch(21), scratch(20), B as u32);
    assert_eq!(c.scratch_entries(), 3);
    c.scratch_freed(41, 20);
    assert_eq!(c.scratch_entries(), 1);
    c.scratch_freed(42, 21);
    assert_eq!(c.scratch_entries(), 0);
    // A freed buffer's id used again starts empty: a write out of it lands garbage.
    device(&mut c, 50, half(0));
    let e = read_from(&mut c, 60, 2, 4, 1, 9).unwrap_err();
    assert!(e.contains("holds garbage (a buffer never filled)"), "{e}");
}

#[test]
fn partly_covered_blocks_are_undefined_not_guessed() {
    let mut c = Checker::new(4096).unwrap();
    // 512 bytes into block 0 through block 1: block 0 partly, block 1 fully covered.
    let w = Request::new(0, Op::Write, 512, 2 * 4096 - 512).io(0);
    c.host_request(10, &w);
    device(&mut c, 10, w);
    c.host_reply(10, &ok(w, 10)).unwrap();
    read_from(&mut c, 20, 1, 1, 0, 1).unwrap();
    read_from(&mut c, 21, 2, 0, 0, 0).unwrap();
    let n = c.counters();
    assert_eq!((n.blocks_checked, n.blocks_unverified), (1, 1));
    // With 512-byte blocks every block of the same write is checked.
    let mut c = Checker::new(512).unwrap();
    c.host_request(10, &w);
    device(&mut c, 10, w);
    c.host_reply(10, &ok(w, 10)).unwrap();
    let r = Request::new(0, Op::Read, 0, 8192).io(1);
    c.host_request(20, &r);
    device(&mut c, 20, r);
    c.host_reply(20, &ok(r, 20)).unwrap();
    assert_eq!(c.counters().blocks_checked, 16);
    assert!(Checker::new(3000).is_err());
}

#[test]
fn a_failed_write_leaves_its_blocks_undefined() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 0, 1);
    let w = host(1, Op::Write, 0, 1);
    c.host_request(20, &w);
    c.device_submit(20, &w);
    let failed = Completion {
        status: Status::IoError,
        ..ok(w, 21)
    };
    c.device_complete(21, &failed);
    c.host_reply(21, &failed).unwrap();
    read_from(&mut c, 30, 2, 0, 0, 0).unwrap();
    assert_eq!(c.counters().blocks_unverified, 1);
}

#[test]
fn state_per_block_stays_bounded_by_durable_points() {
    let mut c = Checker::new(4096).unwrap();
    for k in 0..1000 {
        write(&mut c, 10 * k, 2 * k, 0, 1);
        flush(&mut c, 10 * k + 1, 2 * k + 1, true);
    }
    // The last durable write and the initial floor's successor: two records at most.
    assert!(
        c.host[&(0, 0)].writes.len() <= 2,
        "{:?}",
        c.host[&(0, 0)].writes
    );
    assert!(c.not_durable.is_empty());
    assert!(c.bufs.is_empty() && c.reqs.is_empty());
    read_from(&mut c, 100_000, 5000, 0, 0, 0).unwrap();
}

/// Without flushes every write stays possible after a crash, so a block keeps them all;
/// built `without_crashes` it keeps only what a read in flight may return, and still catches
/// a stale read (a layer answering from an old copy).
#[test]
fn without_crashes_a_block_keeps_only_the_writes_a_read_in_flight_may_return() {
    let mut kept = Checker::new(4096).unwrap();
    let mut c = Checker::new(4096).unwrap().without_crashes();
    for k in 0..1000 {
        write(&mut kept, 10 * k, k, 0, 1);
        write(&mut c, 10 * k, k, 0, 1);
    }
    assert_eq!(kept.host[&(0, 0)].writes.len(), 1001);
    assert_eq!(kept.not_durable.len(), 1000);
    assert_eq!(
        c.host[&(0, 0)].writes.len(),
        1,
        "{:?}",
        c.host[&(0, 0)].writes
    );
    assert!(c.not_durable.is_empty());
    assert_eq!(c.dev[&(0, 0)].volatile.len(), 0);
    read_from(&mut c, 100_000, 5000, 0, 0, 0).unwrap();
    // Block 1 written twice; a read of it answered from device block 2, where a stale copy
    // of the first version was put: caught.
    write(&mut c, 200_000, 6000, 1, 1);
    let first = host(6001, Op::Write, 1, 1);
    c.host_request(200_010, &first);
    device(&mut c, 200_010, to_dev(&first, 0, 2));
    c.host_reply(200_010, &ok(first, 200_010)).unwrap();
    write(&mut c, 200_020, 6002, 1, 1);
    let e = read_from(&mut c, 200_030, 6003, 1, 0, 2).unwrap_err();
    assert!(e.contains("block 1 (bytes 4096..8192) holds v"), "{e}");
}

#[test]
#[should_panic(expected = "Checker::crash on a checker built without_crashes")]
fn a_crash_is_refused_by_a_checker_built_without_crashes() {
    Checker::new(4096).unwrap().without_crashes().crash(10);
}

/// RAID-5 in versions: parity P = D0 ^ D1 written to device 2; a degraded read of D1
/// rebuilds it as P ^ D0 into the host's buffer. With P up to date the read holds D1's
/// version; with P stale (D1 rewritten, parity not) it holds a combination and is caught.
#[test]
fn a_block_rebuilt_from_parity_holds_its_version_only_if_the_parity_matched() {
    let parity = |c: &mut Checker, now: Nanos, n: u64| {
        // Read D0 and D1 into scratch n at 0 and B, XOR them into scratch n+1, write that.
        let s0 = Io::own(n, Op::Read, 0, 0, B as u32);
        let mut s1 = Io::own(n, Op::Read, 1, 0, B as u32);
        s1.buf = Buf::Scratch {
            id: n,
            offset: B as u32,
        };
        device(c, now, s0);
        device(c, now, s1);
        let p = Buf::Scratch {
            id: n + 1,
            offset: 0,
        };
        c.xor(now, p, s0.buf, B as u32);
        c.xor(now, p, s1.buf, B as u32);
        let mut w = Io::own(n + 1, Op::Write, 2, 0, B as u32);
        w.buf = p;
        device(c, now, w);
    };
    let rebuilt = |c: &mut Checker, now: Nanos, id: u64, n: u64| {
        // Host read of volume block 1 (on device 1, failed): host ^= P, host ^= D0.
        let io = host(id, Op::Read, 1, 1);
        c.host_request(now, &io);
        let p = Io::own(n, Op::Read, 2, 0, B as u32);
        let d0 = Io::own(n + 1, Op::Read, 0, 0, B as u32);
        device(c, now, p);
        device(c, now, d0);
        c.xor(now, io.buf, p.buf, B as u32);
        c.xor(now, io.buf, d0.buf, B as u32);
        c.host_reply(now, &ok(io, now))
    };
    let mut c = Checker::new(B as u32).unwrap();
    // Volume block 0 lives on device 0, volume block 1 on device 1, both at block 0.
    for (id, dev) in [(1u64, 0u16), (2, 1)] {
        let io = host(id, Op::Write, dev as u64, 1);
        c.host_request(1, &io);
        device(&mut c, 1, to_dev(&io, dev, 0));
        c.host_reply(1, &ok(io, 1)).unwrap();
    }
    parity(&mut c, 2, 100);
    rebuilt(&mut c, 3, 3, 200).unwrap();
    assert_eq!(c.counters().blocks_checked, 1);
    // D1 rewritten without its parity: the rebuilt block is D0's old ^ D1's old ^ D0 = v2
    // (the superseded version), caught.
    let io = host(4, Op::Write, 1, 1);
    c.host_request(4, &io);
    device(&mut c, 4, to_dev(&io, 1, 0));
    c.host_reply(4, &ok(io, 4)).unwrap();
    let e = rebuilt(&mut c, 5, 5, 300).unwrap_err();
    assert!(
        e.contains("holds v2 (host request 2") && e.contains("[superseded]"),
        "{e}"
    );
    // D0 rewritten without parity: P ^ D0' is a combination of three versions.
    parity(&mut c, 6, 400);
    let io = host(7, Op::Write, 0, 1);
    c.host_request(7, &io);
    device(&mut c, 7, to_dev(&io, 0, 0));
    c.host_reply(7, &ok(io, 7)).unwrap();
    let e = rebuilt(&mut c, 8, 8, 500).unwrap_err();
    assert!(
        e.contains("holds a parity combination of [v1, v4, v6]"),
        "{e}"
    );
}

#[test]
fn a_copy_overwrites_what_the_buffer_held_where_an_xor_combines() {
    // Volume block 0 is written twice (v1, then v2). A host read's buffer first gets v1
    // from a device read (a RAID member read that failed elsewhere), then a layer answers
    // the read again from a buffer of its own that holds v2: seed 344,070's shape.
    let answer = |copy: bool| {
        let mut c = Checker::new(B as u32).unwrap();
        write(&mut c, 1, 1, 0, 1);
        let own = Io::own(50, Op::Read, 0, 0, B as u32);
        let read = host(2, Op::Read, 0, 1);
        c.host_request(2, &read);
        device(&mut c, 2, read);
        write(&mut c, 3, 3, 0, 1);
        device(&mut c, 4, own);
        if copy {
            c.copy(5, read.buf, own.buf, B as u32);
        } else {
            c.xor(5, read.buf, own.buf, B as u32);
        }
        c.host_reply(5, &ok(read, 5))
    };
    answer(true).unwrap();
    let e = answer(false).unwrap_err();
    assert!(e.contains("holds a parity combination of [v1, v2]"), "{e}");
    // A copy from where the source holds no whole block leaves the destination undefined
    // (accepted, counted as unverified), not the version it held.
    let mut c = Checker::new(B as u32).unwrap();
    write(&mut c, 1, 1, 0, 2);
    let read = host(2, Op::Read, 0, 2);
    c.host_request(2, &read);
    device(&mut c, 2, read);
    let never = Buf::Scratch { id: 77, offset: 0 };
    c.copy(3, read.buf.at(B as u32), never, B as u32);
    c.host_reply(3, &ok(read, 3)).unwrap();
    assert_eq!(c.counters().blocks_checked, 1);
    assert_eq!(c.counters().blocks_unverified, 1);
}

/// Swarm seed 860,926's shape: a layer copies from its own buffer starting 3 KiB into a
/// block (a launch prefetcher answering a RAID member read from a larger prefetch), so the
/// destination gets undefined entries at the two 512-byte steps where the source holds no
/// whole block, then the source's next block; a RAID then XORs that buffer into a host
/// read that starts 1 KiB before a block. The block must take the version at 1 KiB: an
/// undefined entry at 0 read as a whole block skipped it, and the host read was judged to
/// hold what the buffer had before (a false alarm).
#[test]
fn an_undefined_entry_does_not_hide_a_block_starting_inside_it() {
    let mut c = Checker::new(B as u32).unwrap();
    write(&mut c, 1, 1, 0, 2);
    let own = Io::own(50, Op::Read, 0, 0, 2 * B as u32);
    device(&mut c, 2, own);
    let mid = Buf::Scratch { id: 60, offset: 0 };
    c.copy(3, mid, own.buf.at(3072), B as u32 + 1024);
    // Volume bytes 3072..8192: block 1 (4096..8192) lies at the read's buffer offset 1024.
    let read = Io {
        offset: 3072,
        len: B as u32 + 1024,
        ..host(2, Op::Read, 0, 2)
    };
    c.host_request(4, &read);
    c.xor(5, read.buf, mid, B as u32 + 1024);
    c.host_reply(5, &ok(read, 5)).unwrap();
    // Block 1 checked (v2); block 0, partly covered, is not.
    assert_eq!(c.counters().blocks_checked, 1);
    assert_eq!(c.counters().blocks_unverified, 1);
}

/// A write-back cache on device 1 in front of device 0: the host write of block `block`
/// lands on device 1 only, acknowledged.
fn write_cached(c: &mut Checker, now: Nanos, id: u64, block: u64) -> Io {
    let io = host(id, Op::Write, block, 1);
    c.host_request(now, &io);
    device(c, now, to_dev(&io, 1, block));
    c.host_reply(now, &ok(io, now)).unwrap();
    io
}

#[test]
fn a_detached_device_must_hold_what_a_write_back_cache_acknowledged() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 2, 1);
    let w = write_cached(&mut c, 20, 1, 3);
    // The cache kept block 3 on device 1: device 0 alone does not hold it.
    let e = c.detached(0).unwrap_err();
    assert_eq!(
        e,
        "integrity: volume 0 detached: device 0 block 3 (bytes 12288..16384) holds the initial \
         content [superseded], expected v2 (host request 1, acknowledged at 20 ns)"
    );
    // The unload's write-back: device 1's block copied to device 0 through a scratch buffer.
    let scratch = Buf::Scratch { id: 9, offset: 0 };
    let rd = Io {
        id: IoId::own(5),
        buf: scratch,
        ..to_dev(&w, 1, 3)
    };
    device(&mut c, 30, Io { op: Op::Read, ..rd });
    device(
        &mut c,
        31,
        Io {
            op: Op::Write,
            dev: 0,
            id: IoId::own(6),
            ..rd
        },
    );
    assert_eq!(c.detached(0), Ok(2));
    // Not flushed, but the host made nothing durable either: after a power loss of the
    // bare device either content of block 3 is allowed.
    c.crash(40);
    assert_eq!(c.detached(0), Ok(2));
    assert_eq!(c.counters().blocks_checked, 4);
}

#[test]
fn after_a_crash_a_detached_device_must_hold_what_the_host_made_durable() {
    let mut c = Checker::new(4096).unwrap();
    write(&mut c, 10, 0, 2, 1);
    let w = write_cached(&mut c, 20, 1, 3);
    // The host's FLUSH made both durable; the cache flushed its own device only.
    let f = host(2, Op::Flush, 0, 0);
    c.host_request(25, &f);
    device(&mut c, 25, to_dev(&f, 1, 0));
    device(&mut c, 25, to_dev(&f, 0, 0));
    c.host_reply(25, &ok(f, 25)).unwrap();
    // An unload that copies block 3 back but never flushes device 0.
    let rd = Io {
        id: IoId::own(5),
        buf: Buf::Scratch { id: 9, offset: 0 },
        op: Op::Read,
        ..to_dev(&w, 1, 3)
    };
    device(&mut c, 30, rd);
    let wr = Io {
        op: Op::Write,
        dev: 0,
        id: IoId::own(6),
        ..rd
    };
    device(&mut c, 31, wr);
    assert_eq!(c.detached(0), Ok(2));
    c.crash(40);
    let e = c.detached(0).unwrap_err();
    assert_eq!(
        e,
        "integrity: volume 0 detached (after crash 1): device 0 block 3 (bytes 12288..16384) \
         holds the initial content, expected v2 (host request 1 before crash 1, acknowledged at 20 ns)"
    );
}

#[test]
fn a_volume_is_not_detached_with_requests_in_flight() {
    let mut c = Checker::new(4096).unwrap();
    let w = host(0, Op::Write, 0, 1);
    c.host_request(10, &w);
    assert_eq!(
        c.detached(0),
        Err("integrity: volume 0 detached with 1 host request(s) in flight".to_string())
    );
}

/// With `early_reads` a device read carries its blocks as they were when it was
/// submitted: a function's copy read, sent while a host write of the block was still out
/// and reported after it, carries the older version, and a copy made of it is caught as
/// stale once the host reads it after the write was acknowledged. By default the read
/// carries the block as it completes, and the same copy passes.
#[test]
fn early_reads_carry_what_the_block_held_when_they_were_sent() {
    for early in [false, true] {
        let mut c = Checker::new(4096).unwrap();
        if early {
            c = c.early_reads();
        }
        write(&mut c, 10, 0, 4, 1);
        // W2 of block 4 out; a copy read of block 4 into scratch 7 sent; W2 lands and is
        // acknowledged; the copy read comes back.
        let w2 = host(1, Op::Write, 4, 1);
        c.host_request(20, &w2);
        c.device_submit(20, &w2);
        let rd = Io::own(7, Op::Read, 0, 4 * B, B as u32);
        c.device_submit(21, &rd);
        c.device_complete(22, &ok(w2, 22));
        c.host_reply(22, &ok(w2, 22)).unwrap();
        c.device_complete(23, &ok(rd, 23));
        // The copy goes to block 9 of device 1, and the host's next read of block 4 is
        // answered from there.
        let wr = Io {
            buf: Buf::Scratch { id: 7, offset: 0 },
            ..Io::own(8, Op::Write, 1, 9 * B, B as u32)
        };
        device(&mut c, 24, wr);
        let r = read_from(&mut c, 30, 2, 4, 1, 9);
        if early {
            let e = r.unwrap_err();
            assert!(e.contains("holds v1") && e.contains("superseded"), "{e}");
        } else {
            r.unwrap();
        }
    }
}

/// A host write of block `block` sent with FUA to device `dev` (durable at once),
/// acknowledged.
fn write_durable_to(c: &mut Checker, now: Nanos, id: u64, block: u64, dev: u16) {
    let w = Io {
        fua: true,
        ..host(id, Op::Write, block, 1)
    };
    c.host_request(now, &w);
    device(c, now, to_dev(&w, dev, block));
    c.host_reply(now, &ok(w, now)).unwrap();
}

/// Devices traded between a crash and the restart carry their versions with them: a read
/// from the slot that held a block now finds the other device's, and is caught; from the
/// slot the device went to, it reads back. A blanked device reads the initial content.
#[test]
fn devices_traded_or_blanked_at_a_restart_carry_their_blocks_with_them() {
    let mut c = Checker::new(4096).unwrap();
    write_durable_to(&mut c, 10, 0, 0, 1);
    write_durable_to(&mut c, 11, 1, 1, 2);
    c.crash(20);
    c.trade_devices(1, 2);
    // Block 0 was on device 1, now in slot 2; block 1 on device 2, now in slot 1.
    read_from(&mut c, 30, 2, 0, 2, 0).unwrap();
    read_from(&mut c, 31, 3, 1, 1, 1).unwrap();
    let e = read_from(&mut c, 32, 4, 0, 1, 0).unwrap_err();
    assert!(
        e.contains("holds the initial content, expected v1 (host request 0 before crash 1"),
        "{e}"
    );

    let mut c = Checker::new(4096).unwrap();
    write_durable_to(&mut c, 10, 0, 0, 1);
    write_durable_to(&mut c, 11, 1, 1, 2);
    c.crash(20);
    c.blank_device(1);
    read_from(&mut c, 30, 2, 1, 2, 1).unwrap();
    let e = read_from(&mut c, 31, 3, 0, 1, 0).unwrap_err();
    assert!(e.contains("holds the initial content, expected v1"), "{e}");
}

#[test]
#[should_panic(expected = "devices are moved only between a crash and the restart")]
fn devices_are_not_traded_with_writes_in_flight() {
    let mut c = Checker::new(4096).unwrap();
    let w = host(0, Op::Write, 0, 1);
    c.host_request(10, &w);
    c.device_submit(10, &w);
    c.trade_devices(0, 1);
}
