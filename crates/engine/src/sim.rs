//! The simulated executor: a discrete-event loop in virtual nanoseconds.
//!
//! Host requests stream from a [`TraceSource`] (never held in memory); device service ends,
//! power transitions and function timers wait in one binary heap ordered by (time, sequence
//! number), so equal-time events run in the order they were scheduled and a run is a pure
//! function of (config, trace, seed). At equal times heap events run before the next arrival.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use wattio_core::device::{DevEvent, DeviceRuntime};
use wattio_core::function::TimerId;
use wattio_core::io::{Completion, Status};
use wattio_core::stack::{Effect, Stack};
use wattio_core::stats::LatencyHistogram;
use wattio_core::time::Nanos;
use wattio_core::trace::TraceSource;

/// Receives what a run produces as it goes (requests table, power timeline, progress).
pub trait RunSink {
    /// A host request completed. `arrival` is when the host issued it.
    fn request(&mut self, id: u64, arrival: Nanos, done: &Completion) -> Result<(), String> {
        let _ = (id, arrival, done);
        Ok(())
    }
    /// Device `dev` entered ledger slot `slot` (a power state, or a transition) at `at`.
    fn mode(&mut self, dev: u16, at: Nanos, slot: usize) -> Result<(), String> {
        let _ = (dev, at, slot);
        Ok(())
    }
    /// Called every [`PROGRESS_EVERY`] host requests.
    fn progress(&mut self, requests: u64, now: Nanos) -> Result<(), String> {
        let _ = (requests, now);
        Ok(())
    }
}

/// A sink that keeps nothing.
pub struct NullSink;
impl RunSink for NullSink {}

pub const PROGRESS_EVERY: u64 = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Service { dev: u16, token: u32 },
    Transition { dev: u16 },
    Timer { layer: u32, timer: TimerId },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ev {
    at: Nanos,
    seq: u64,
    kind: Kind,
}

impl Ord for Ev {
    fn cmp(&self, o: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}
impl PartialOrd for Ev {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// FxHash: timer keys are small integers; SipHash would dominate the hot path.
#[derive(Default)]
struct Fx(u64);
impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64)
    }
}

/// A timer's one heap entry. Cancelling keeps the slot (with no deadline) until that
/// entry pops, so the cancel-then-re-arm pattern of idle timers (cancel on every request,
/// re-arm on every completion) moves a deadline instead of pushing a new heap entry.
struct TimerSlot {
    /// `None`: cancelled.
    deadline: Option<Nanos>,
    /// Time of the heap entry that stands for this timer.
    in_heap: Nanos,
}

/// What a finished simulation hands back.
pub struct SimOutcome {
    pub stack: Stack,
    pub devices: Vec<DeviceRuntime>,
    pub end: Nanos,
    pub requests: u64,
    pub errors: u64,
    pub latency: LatencyHistogram,
    pub power_wait: LatencyHistogram,
    pub assumptions: Vec<String>,
}

pub struct Simulator {
    stack: Stack,
    devs: Vec<DeviceRuntime>,
    heap: BinaryHeap<Ev>,
    seq: u64,
    timers: HashMap<(u32, TimerId), TimerSlot, BuildHasherDefault<Fx>>,
    fx: Vec<Effect>,
    dev_ev: Vec<DevEvent>,
    /// Arrival times of host requests in flight, indexed by id − `base`.
    inflight: VecDeque<Option<Nanos>>,
    base: u64,
    latency: LatencyHistogram,
    power_wait: LatencyHistogram,
    completed: u64,
    errors: u64,
    last_completion: Nanos,
    now: Nanos,
}

impl Simulator {
    pub fn new(stack: Stack, devices: Vec<DeviceRuntime>) -> Simulator {
        Simulator {
            stack,
            devs: devices,
            heap: BinaryHeap::new(),
            seq: 0,
            timers: HashMap::default(),
            fx: Vec::new(),
            dev_ev: Vec::new(),
            inflight: VecDeque::new(),
            base: 0,
            latency: LatencyHistogram::new(),
            power_wait: LatencyHistogram::new(),
            completed: 0,
            errors: 0,
            last_completion: 0,
            now: 0,
        }
    }

    /// Run `source` to the end. `until` caps the run; `min_end` extends it (a generated
    /// workload's duration: the devices' ledgers cover the whole period even if the last
    /// request came earlier).
    pub fn run(
        mut self,
        source: &mut dyn TraceSource,
        until: Option<Nanos>,
        min_end: Nanos,
        sink: &mut dyn RunSink,
    ) -> Result<SimOutcome, String> {
        let mut fx = std::mem::take(&mut self.fx);
        self.stack.start(0, &mut fx);
        self.apply(fx, sink)?;
        let mut next = source.next_request().map_err(|e| e.to_string())?;
        let mut issued: u64 = 0;
        let cap = until.unwrap_or(Nanos::MAX);
        // With an explicit end, timers and transitions run up to it after the last request.
        let min_end = min_end.max(until.unwrap_or(0));
        loop {
            let heap_at = self.heap.peek().map(|e| e.at);
            let take_arrival = match (&next, heap_at) {
                (Some(r), Some(h)) => r.arrival < h,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if take_arrival {
                let r = next.take().expect("checked above");
                if r.arrival > cap {
                    break;
                }
                if r.arrival < self.now {
                    return Err(format!(
                        "request {issued}: arrival {} ns precedes the previous request's {} ns (traces must be in arrival order)",
                        r.arrival, self.now
                    ));
                }
                self.now = r.arrival;
                let io = r.io(issued);
                if self.stack.is_empty() && io.dev as usize >= self.devs.len() {
                    return Err(self.bad_device(issued, io.dev));
                }
                self.inflight.push_back(Some(r.arrival));
                issued += 1;
                let mut fx = std::mem::take(&mut self.fx);
                self.stack.request(self.now, io, &mut fx);
                self.apply(fx, sink)?;
                if issued.is_multiple_of(PROGRESS_EVERY) {
                    sink.progress(issued, self.now)?;
                }
                next = source.next_request().map_err(|e| e.to_string())?;
                continue;
            }
            let Some(h) = heap_at else { break };
            // Trace exhausted: keep going only while host requests are outstanding, or up to
            // the minimum end.
            if next.is_none() && self.inflight.is_empty() && h > min_end.max(self.now) {
                break;
            }
            if h > cap {
                break;
            }
            let ev = self.heap.pop().expect("peeked");
            self.now = ev.at;
            self.dispatch(ev, sink)?;
        }
        if !self.inflight.is_empty() && until.is_none() {
            return Err(format!(
                "{} host request(s) never completed: a function dropped them (every request needs a Reply)",
                self.inflight.iter().filter(|x| x.is_some()).count()
            ));
        }
        let end = match until {
            Some(u) => u,
            None => self.now.max(min_end).max(self.last_completion),
        };
        sink.progress(issued, end)?;
        Ok(SimOutcome {
            stack: self.stack,
            devices: self.devs,
            end,
            requests: self.completed,
            errors: self.errors,
            latency: self.latency,
            power_wait: self.power_wait,
            assumptions: source.assumptions(),
        })
    }

    fn bad_device(&self, id: u64, dev: u16) -> String {
        format!(
            "request {id} targets device {dev}, but the run has {} device(s) (0..{}): select or map the trace's volumes, or add devices",
            self.devs.len(),
            self.devs.len().saturating_sub(1)
        )
    }

    #[inline]
    fn push(&mut self, at: Nanos, kind: Kind) {
        self.seq += 1;
        self.heap.push(Ev {
            at,
            seq: self.seq,
            kind,
        });
    }

    #[inline]
    fn dispatch(&mut self, ev: Ev, sink: &mut dyn RunSink) -> Result<(), String> {
        let now = ev.at;
        match ev.kind {
            Kind::Service { dev, token } => {
                let mut de = std::mem::take(&mut self.dev_ev);
                self.devs[dev as usize].service_end(now, token, &mut de);
                self.device_events(dev, de, sink)
            }
            Kind::Transition { dev } => {
                let mut de = std::mem::take(&mut self.dev_ev);
                self.devs[dev as usize].transition_end(now, &mut de);
                self.device_events(dev, de, sink)
            }
            Kind::Timer { layer, timer } => {
                let key = (layer, timer);
                let Some(slot) = self.timers.get_mut(&key) else {
                    return Ok(()); // cancelled
                };
                if slot.in_heap != now {
                    return Ok(()); // superseded by an earlier entry
                }
                match slot.deadline {
                    None => {
                        self.timers.remove(&key);
                        return Ok(());
                    }
                    Some(d) if d > now => {
                        // Re-armed later while this entry waited: move it.
                        slot.in_heap = d;
                        self.push(d, ev.kind);
                        return Ok(());
                    }
                    Some(_) => {}
                }
                self.timers.remove(&key);
                let mut fx = std::mem::take(&mut self.fx);
                self.stack.timer(now, layer as usize, timer, &mut fx);
                self.apply(fx, sink)
            }
        }
    }

    /// Carry out effects (and whatever they cause) until none are left.
    #[inline]
    fn apply(&mut self, mut fx: Vec<Effect>, sink: &mut dyn RunSink) -> Result<(), String> {
        let now = self.now;
        let mut i = 0;
        while i < fx.len() {
            i += 1;
            // Matched in place: copying every 120-byte effect out of the list was a
            // measurable share of the per-request cost.
            match &mut fx[i - 1] {
                Effect::Submit(io) => {
                    let io = *io;
                    let Some(d) = self.devs.get_mut(io.dev as usize) else {
                        return Err(self.bad_device(io.id.0, io.dev));
                    };
                    let mut de = std::mem::take(&mut self.dev_ev);
                    d.submit(now, io, &mut de);
                    self.device_events_into(io.dev, de, &mut fx, sink)?;
                }
                Effect::HostReply(done) => self.host_reply(done, sink)?,
                &mut Effect::SetPower { device, state } => {
                    let Some(d) = self.devs.get_mut(device as usize) else {
                        return Err(format!(
                            "a function set the power of device {device}, which does not exist"
                        ));
                    };
                    let mut de = std::mem::take(&mut self.dev_ev);
                    d.set_power(now, state, &mut de);
                    self.device_events_into(device, de, &mut fx, sink)?;
                }
                &mut Effect::SetTimer { layer, timer, at } => {
                    let at = at.max(now);
                    let key = (layer as u32, timer);
                    match self.timers.get_mut(&key) {
                        Some(slot) if at >= slot.in_heap => slot.deadline = Some(at),
                        _ => {
                            self.timers.insert(
                                key,
                                TimerSlot {
                                    deadline: Some(at),
                                    in_heap: at,
                                },
                            );
                            self.push(
                                at,
                                Kind::Timer {
                                    layer: layer as u32,
                                    timer,
                                },
                            );
                        }
                    }
                }
                &mut Effect::CancelTimer { layer, timer } => {
                    if let Some(slot) = self.timers.get_mut(&(layer as u32, timer)) {
                        slot.deadline = None;
                    }
                }
            }
        }
        fx.clear();
        self.fx = fx;
        Ok(())
    }

    #[inline]
    fn device_events(
        &mut self,
        dev: u16,
        de: Vec<DevEvent>,
        sink: &mut dyn RunSink,
    ) -> Result<(), String> {
        let mut fx = std::mem::take(&mut self.fx);
        self.device_events_into(dev, de, &mut fx, sink)?;
        self.apply(fx, sink)
    }

    /// Schedule a device's events; completions go up the stack, adding effects to `fx`.
    #[inline]
    fn device_events_into(
        &mut self,
        dev: u16,
        mut de: Vec<DevEvent>,
        fx: &mut Vec<Effect>,
        sink: &mut dyn RunSink,
    ) -> Result<(), String> {
        let now = self.now;
        for e in &de {
            match *e {
                DevEvent::ServiceEnd { at, token } => self.push(at, Kind::Service { dev, token }),
                DevEvent::TransitionEnd { at } => self.push(at, Kind::Transition { dev }),
                DevEvent::Mode { at, slot } => {
                    sink.mode(dev, at, slot)?;
                    if slot < self.devs[dev as usize].spec().states.len() {
                        self.stack.power(at, dev, slot as u8);
                    }
                }
                DevEvent::Completed(ref c) => self.stack.device_completion(now, *c, fx),
            }
        }
        de.clear();
        self.dev_ev = de;
        Ok(())
    }

    #[inline]
    fn host_reply(&mut self, done: &mut Completion, sink: &mut dyn RunSink) -> Result<(), String> {
        let id = done.io.id.0;
        let idx = id.checked_sub(self.base).map(|i| i as usize);
        let arrival = match idx
            .and_then(|i| self.inflight.get_mut(i))
            .and_then(Option::take)
        {
            Some(a) => a,
            None => {
                return Err(format!(
                    "a function replied to host request {id} twice, or to one that does not exist"
                ))
            }
        };
        while let Some(None) = self.inflight.front() {
            self.inflight.pop_front();
            self.base += 1;
        }
        let latency = self.now - arrival;
        // Time the layers held the request beyond what the device reported is queueing.
        let b = &mut done.breakdown;
        let accounted = b.total();
        if accounted > latency {
            // A function replied before the device work it forwarded finished (write-back
            // caching): attribute the latency to service.
            *b = wattio_core::io::Breakdown {
                queue_ns: 0,
                power_wait_ns: b.power_wait_ns.min(latency),
                service_ns: latency - b.power_wait_ns.min(latency),
            };
        } else {
            b.queue_ns += latency - accounted;
        }
        self.latency.record(latency);
        self.power_wait.record(b.power_wait_ns);
        self.completed += 1;
        if done.status != Status::Ok {
            self.errors += 1;
        }
        self.last_completion = self.now;
        sink.request(id, arrival, done)
    }
}
