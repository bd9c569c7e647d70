//! A data observer on a simulated run (`Simulator::with_observer`): it sees every data
//! movement through the executor kernel, and its error stops the run.

use crate::common;

use common::*;
use wattio_core::kernel::DataObserver;
use wattio_core::{Completion, Io, Nanos};
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Registry, Simulator};

/// (what, time, I/O id, offset) of every movement, and a host request to refuse.
#[derive(Default)]
struct Watch {
    seen: Vec<(&'static str, Nanos, u64, u64)>,
    refuse: Option<u64>,
}

impl DataObserver for Watch {
    fn host_request(&mut self, now: Nanos, io: &Io) {
        self.seen.push(("host_request", now, io.id.0, io.offset));
    }
    fn device_submit(&mut self, now: Nanos, io: &Io) {
        self.seen.push(("device_submit", now, io.id.0, io.offset));
    }
    fn device_complete(&mut self, now: Nanos, done: &Completion) {
        let io = &done.io;
        self.seen.push(("device_complete", now, io.id.0, io.offset));
    }
    fn host_reply(&mut self, now: Nanos, done: &Completion) -> Result<(), String> {
        let io = &done.io;
        self.seen.push(("host_reply", now, io.id.0, io.offset));
        match self.refuse {
            Some(id) if id == io.id.0 => Err(format!("host request {id}: wrong data")),
            _ => Ok(()),
        }
    }
}

fn run_watched(watch: &mut Watch) -> Result<u64, String> {
    // The trace of `hand_computed::fixed_timeout_by_hand`: 16 ms per read; the third finds
    // the disk in standby and waits for the 2 s spin-up.
    let reqs = reads(&[1.0, 3.0, 20.0], &[500_000_000, 100_000_000], 50_000);
    let cfg = config(
        r#"
        [[function]]
        kind = "spindown"
        policy = "fixed"
        timeout_s = 5
        "#,
    );
    let open = opener(reqs);
    let asm = assemble(
        &cfg,
        &Catalogue::default(),
        Some(&open),
        &mut Registry::new(),
        0,
    )?;
    let mut src = open()?;
    let out = Simulator::new(asm.stack, asm.devices)
        .with_observer(watch)
        .run(src.as_mut(), None, 0, &mut NullSink)?;
    Ok(out.requests)
}

#[test]
fn an_observer_sees_every_data_movement_in_order() {
    let mut w = Watch::default();
    assert_eq!(run_watched(&mut w).unwrap(), 3);
    let ms = 1_000_000;
    let s = 1_000 * ms;
    // Times to the millisecond (the model's rounding is its own business here).
    let seen: Vec<_> = w
        .seen
        .iter()
        .map(|&(what, t, id, off)| (what, (t + ms / 2) / ms, id, off))
        .collect();
    let (a, b) = (500_000_000, 100_000_000);
    assert_eq!(
        seen,
        vec![
            ("host_request", 1_000, 0, a),
            ("device_submit", 1_000, 0, a),
            ("device_complete", 1_016, 0, a),
            ("host_reply", 1_016, 0, a),
            ("host_request", 3_000, 1, b),
            ("device_submit", 3_000, 1, b),
            ("device_complete", 3_016, 1, b),
            ("host_reply", 3_016, 1, b),
            ("host_request", 20_000, 2, a),
            ("device_submit", 20_000, 2, a),
            ("device_complete", 22_016, 2, a),
            ("host_reply", 22_016, 2, a),
        ]
    );
    // The reply is the device's completion, handed up at the same instant.
    assert_eq!(w.seen[10].1, w.seen[11].1);
    assert!(w.seen[11].1 > 22 * s);
}

#[test]
fn an_observer_error_stops_the_run_with_its_message() {
    let mut w = Watch {
        refuse: Some(1),
        ..Watch::default()
    };
    assert_eq!(
        run_watched(&mut w).unwrap_err(),
        "host request 1: wrong data"
    );
    // The run stopped there: request 2 never arrived.
    assert_eq!(w.seen.last().unwrap().0, "host_reply");
    assert!(w.seen.iter().all(|e| e.2 < 2));
}
