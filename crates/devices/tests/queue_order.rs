//! A device's queue served in DiskSim's block-number orders through `QueueOrdered`, on a
//! device runtime: the order five queued reads complete in, by hand.

use std::sync::Arc;
use wattio_core::device::{DevEvent, DeviceInfo, DeviceRuntime, Service, Timing};
use wattio_core::io::{Io, Op, Request};
use wattio_core::time::Nanos;
use wattio_devices::queue_order::{LbnOrder, QueueOrdered};
use wattio_devices::Catalogue;

/// 10 µs an I/O, wherever it is.
struct Flat;
impl Timing for Flat {
    fn capacity(&self) -> u64 {
        1 << 30
    }
    fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
        Service {
            transfer_ns: 10_000,
            ..Service::default()
        }
    }
}

/// The arrival numbers of the reads in the order they complete: A (block 7,812) arrives
/// first and starts at once; B (1,953), C (17,578), D (11,718) and E (3,906) queue behind
/// it, 1 µs apart.
fn completion_order(order: Option<LbnOrder>) -> Vec<u64> {
    let spec = Catalogue::embedded()
        .unwrap()
        .get("fujitsu-map3367")
        .unwrap()
        .clone();
    let power = Arc::new(spec.power_spec().unwrap());
    let info = DeviceInfo::new(0, "d", 1 << 30, power);
    let timing: Box<dyn Timing> = match order {
        Some(o) => Box::new(QueueOrdered::new(Box::new(Flat), o)),
        None => Box::new(Flat),
    };
    let mut d = DeviceRuntime::new(info, timing, None, 0);
    let mut ev = Vec::new();
    for (k, off) in [4_000_000u64, 1_000_000, 9_000_000, 6_000_000, 2_000_000]
        .into_iter()
        .enumerate()
    {
        let t = k as u64 * 1_000;
        d.submit(
            t,
            Request::new(t, Op::Read, off, 4096).io(k as u64),
            &mut ev,
        );
    }
    let mut done = Vec::new();
    while let Some(i) = ev
        .iter()
        .position(|e| matches!(e, DevEvent::ServiceEnd { .. }))
    {
        let DevEvent::ServiceEnd { at, token } = ev.remove(i) else {
            unreachable!()
        };
        let c = d.service_end(at, token, &mut ev).expect("a completion");
        done.push(c.io.id.0);
    }
    done
}

#[test]
fn five_queued_reads_complete_in_each_order() {
    assert_eq!(completion_order(None), vec![0, 1, 2, 3, 4]);
    // C-LOOK from A's block: D, C, then around to the lowest, B, then E.
    assert_eq!(completion_order(Some(LbnOrder::Clook)), vec![0, 3, 2, 1, 4]);
    // LOOK, ascending: D, C, then it turns: E before B.
    assert_eq!(completion_order(Some(LbnOrder::Look)), vec![0, 3, 2, 4, 1]);
    // SSTF from A's end (7,821): D (3,897 away) before E (3,915); from D's end (11,727): C
    // (5,851) before E (7,821); from C's end: E, then B.
    assert_eq!(
        completion_order(Some(LbnOrder::SstfLbn)),
        vec![0, 3, 2, 4, 1]
    );
}
