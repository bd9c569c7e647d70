//! The clean unload's order (`Kernel::stop`) and the simulator's stall limit, with
//! hand-made layers over one disk (`SpecDisk::ROUND`: 10 ms seeks, 5 ms half rotation).

use wattio_core::io::{Completion, Io, Op, Request};
use wattio_core::stack::Stack;
use wattio_core::testing::SpecDisk;
use wattio_core::time::Nanos;
use wattio_core::trace::VecSource;
use wattio_core::{Actions, DeviceRuntime, Function};
use wattio_devices::Catalogue;
use wattio_engine::{assemble, NullSink, Registry, RunConfig, SimOutcome, Simulator};

const MS: Nanos = 1_000_000;
const S: Nanos = 1_000_000_000;

/// Background work that never pauses while the layer hears timers: every `period` a read
/// of its own far from the last (a seek each, longer than the period, so one is always
/// out), as a RAID resync or a cache's copies under a slow device.
struct Busy {
    period: Nanos,
    sent: u64,
    last_done: Nanos,
    stopped: Option<Nanos>,
}

impl Function for Busy {
    fn name(&self) -> &str {
        "busy"
    }
    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        out.set_timer(0, now + self.period);
    }
    fn on_timer(&mut self, now: Nanos, _: u64, out: &mut Actions) {
        // 1 MB steps over 997 places: never the same track twice in a row.
        let at = (self.sent * 389 % 997) << 20;
        self.sent += 1;
        out.submit(Io::own(self.sent, Op::Read, 0, at, 4096));
        out.set_timer(0, now + self.period);
    }
    fn on_stop(&mut self, now: Nanos, _: &mut Actions) {
        self.stopped = Some(now);
    }
    fn on_request(&mut self, _: Nanos, io: Io, out: &mut Actions) {
        out.submit(io);
    }
    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        if done.io.id.is_own() {
            self.last_done = now;
            out.release(done.io.buf);
        } else {
            out.reply(done);
        }
    }
    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("sent".into(), self.sent as f64),
            ("last_done_ns".into(), self.last_done as f64),
            ("stopped_ns".into(), self.stopped.map_or(-1.0, |t| t as f64)),
        ]
    }
}

/// Passes everything through; notes when it was stopped.
struct Pass {
    stopped: Option<Nanos>,
}

impl Function for Pass {
    fn name(&self) -> &str {
        "pass"
    }
    fn on_stop(&mut self, now: Nanos, _: &mut Actions) {
        self.stopped = Some(now);
    }
    fn on_request(&mut self, _: Nanos, io: Io, out: &mut Actions) {
        out.submit(io);
    }
    fn on_completion(&mut self, _: Nanos, done: Completion, out: &mut Actions) {
        out.reply(done);
    }
    fn counters(&self) -> Vec<(String, f64)> {
        vec![("stopped_ns".into(), self.stopped.map_or(-1.0, |t| t as f64))]
    }
}

/// Never answers a host request, and re-arms a timer every second for ever.
struct Holder;

impl Function for Holder {
    fn name(&self) -> &str {
        "holder"
    }
    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        out.set_timer(0, now + S);
    }
    fn on_timer(&mut self, now: Nanos, _: u64, out: &mut Actions) {
        out.set_timer(0, now + S);
    }
    fn on_request(&mut self, _: Nanos, _: Io, _: &mut Actions) {}
    fn on_completion(&mut self, _: Nanos, _: Completion, _: &mut Actions) {}
}

/// At its unload, a read; at each read's end, another: work without end, timers or not.
struct Endless;

impl Function for Endless {
    fn name(&self) -> &str {
        "endless"
    }
    fn on_stop(&mut self, _: Nanos, out: &mut Actions) {
        out.submit(Io::own(1, Op::Read, 0, 0, 4096));
    }
    fn on_request(&mut self, _: Nanos, io: Io, out: &mut Actions) {
        out.submit(io);
    }
    fn on_completion(&mut self, _: Nanos, done: Completion, out: &mut Actions) {
        if done.io.id.is_own() {
            out.release(done.io.buf);
            // Far from the last: a seek each time.
            let at = if done.io.offset == 0 { 500 << 20 } else { 0 };
            out.submit(Io::own(1, Op::Read, 0, at, 4096));
        } else {
            out.reply(done);
        }
    }
}

/// One ROUND disk, `layers` over it, one 4 KiB read at 0 s; the run's minimum end `min_end`.
fn simulate(
    layers: Vec<Box<dyn Function>>,
    unload: bool,
    stall: Nanos,
    min_end: Nanos,
) -> Result<SimOutcome, String> {
    let text = format!("[[device]]\nname = \"d0\"\n{}", SpecDisk::ROUND.toml());
    let cfg = RunConfig::from_toml("unload.toml", &text).expect("a valid config");
    let cat = Catalogue::embedded().expect("catalogue");
    let asm = assemble(&cfg, &cat, None, &mut Registry::new(), 0).expect("assemble");
    let devices: Vec<DeviceRuntime> = asm.devices;
    let infos: Vec<_> = devices.iter().map(|d| d.info.clone()).collect();
    let mut stack = Stack::new(layers);
    stack.attach(&infos).expect("attach");
    let mut src = VecSource::new(vec![Request::new(0, Op::Read, 0, 4096)]);
    Simulator::new(stack, devices)
        .unloading(unload)
        .stall_limit(stall)
        .run(&mut src, None, min_end, &mut NullSink)
}

fn counter(o: &SimOutcome, layer: usize, name: &str) -> f64 {
    o.stack.layers()[layer]
        .counters()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
        .expect("a counter")
}

/// The top layer stops when the host detaches, though its I/O is out (nothing is above
/// it); the layer below once that I/O is back — and the unload ends there. Before, every
/// layer waited for no device I/O at all to be out, which a layer sending I/O on a timer
/// faster than its device answers never allowed: the unload never began (swarm seed
/// 142,535, PARAID re-trying failed copies at each sample). On that build this run ends in
/// the stall limit's error.
#[test]
fn background_io_that_never_pauses_does_not_hold_the_unload_back() {
    let busy = Busy {
        period: MS,
        sent: 0,
        last_done: 0,
        stopped: None,
    };
    let layers: Vec<Box<dyn Function>> = vec![Box::new(busy), Box::new(Pass { stopped: None })];
    let o = simulate(layers, true, 60 * S, S).expect("the run ends");
    // Timers at 1, 2, …, 1000 ms: the one at the minimum end (1 s) is due before it ends.
    assert_eq!(counter(&o, 0, "sent"), 1000.0);
    assert_eq!(counter(&o, 0, "stopped_ns"), S as f64);
    let u = o.unload.expect("the unload finished");
    assert_eq!(u.started, S);
    // Each read takes a seek and a rotation (> 1 ms): most of the 1,000 are still out at
    // 1 s, and the last comes back seconds later.
    let last = counter(&o, 0, "last_done_ns");
    assert!(last > 2.0 * S as f64, "the reads drain past 2 s: {last}");
    assert_eq!(
        counter(&o, 1, "stopped_ns"),
        last,
        "the lower layer stops then"
    );
    assert_eq!(u.done as f64, last, "and the unload is done");
}

#[test]
fn a_request_held_while_a_timer_rearms_for_ever_is_an_error_at_the_stall_limit() {
    let layers: Vec<Box<dyn Function>> = vec![Box::new(Holder)];
    let e = simulate(layers, false, 60 * S, 0)
        .err()
        .expect("the run must not end well");
    // Request 0 arrived at 0 s; the first event past 0 + 60 s is the timer at 61 s.
    assert_eq!(
        e,
        "host request 0 (arrived at 0.000 s) is still unanswered at 61.000 s of simulated time, 60 s after the last request or reply: a function holds it and the run would never end (a timer of its re-arming forever?)"
    );
}

#[test]
fn an_unload_whose_io_never_ends_is_an_error_at_the_stall_limit() {
    let layers: Vec<Box<dyn Function>> = vec![Box::new(Endless)];
    let e = simulate(layers, true, 60 * S, 0)
        .err()
        .expect("the run must not end well");
    // The host's read ends the trace; the unload begins at its reply.
    let (head, tail) = e.split_once(" s is not done at ").expect(&e);
    assert!(head.starts_with("the clean unload begun at 0.0"), "{e}");
    assert!(
        tail.ends_with(
            " s of simulated time (1 device I/O(s) out, 1 of 1 layer(s) stopped): a function keeps sending I/O and the run would never end"
        ),
        "{e}"
    );
    let at: f64 = tail.split(' ').next().unwrap().parse().expect(&e);
    assert!((60.0..60.1).contains(&at), "the first event past 60 s: {e}");
}
