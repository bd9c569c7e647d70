//! The simulated executor: a discrete-event loop in virtual nanoseconds.
//!
//! Host requests stream from a [`TraceSource`] (never held in memory); device service ends,
//! power transitions and function timers wait in one binary heap ordered by (time, sequence
//! number), so equal-time events run in the order they were scheduled and a run is a pure
//! function of (config, trace, seed). At equal times heap events run before the next arrival.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use wattio_core::device::{DevEvent, DeviceRuntime};
use wattio_core::function::TimerId;
use wattio_core::io::{Breakdown, Completion, DeviceId, Io, Op, Request, Status};
use wattio_core::power::PowerStateId;
use wattio_core::stack::{Effects, Stack};
use wattio_core::stats::LatencyHistogram;
use wattio_core::time::Nanos;
use wattio_core::trace::TraceSource;

/// A finished host request, as a run records it.
#[derive(Clone, Copy, Debug)]
pub struct HostRequest<'a> {
    /// Index of the request in the trace.
    pub id: u64,
    /// When the host issued it.
    pub arrival: Nanos,
    pub finished: Nanos,
    /// Where the latency went; time the layers held the request is queueing.
    pub breakdown: Breakdown,
    pub status: Status,
    /// The I/O as the host issued it.
    pub io: &'a Io,
}

/// Receives what a run produces as it goes (requests table, power timeline, progress).
pub trait RunSink {
    /// A host request completed.
    fn request(&mut self, r: &HostRequest<'_>) -> Result<(), String> {
        let _ = r;
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

impl Ev {
    #[inline]
    fn key(&self) -> (Nanos, u64) {
        (self.at, self.seq)
    }
}

/// A binary min-heap of events by (time, sequence number). Not `std`'s `BinaryHeap`: that
/// one writes a pushed element into the array and reads it straight back to sift it up, and
/// the read of a just-written 32-byte value stalled the hot path (store forwarding). Here the
/// pushed event stays in registers while the hole moves, and is written once.
#[derive(Default)]
struct EventHeap {
    v: Vec<Ev>,
}

impl EventHeap {
    #[inline]
    fn peek_at(&self) -> Option<Nanos> {
        self.v.first().map(|e| e.at)
    }

    #[inline]
    fn push(&mut self, ev: Ev) {
        let key = ev.key();
        let mut i = self.v.len();
        self.v.push(ev);
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.v[parent].key() <= key {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = ev;
    }

    #[inline]
    fn pop(&mut self) -> Option<Ev> {
        let last = self.v.pop()?;
        if self.v.is_empty() {
            return Some(last);
        }
        let top = self.v[0];
        // Sift `last` down from the root.
        let key = last.key();
        let n = self.v.len();
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.v[r].key() < self.v[l].key() {
                r
            } else {
                l
            };
            if self.v[c].key() >= key {
                break;
            }
            self.v[i] = self.v[c];
            i = c;
        }
        self.v[i] = last;
        Some(top)
    }
}

/// How many requests the simulator reads ahead from its source.
const ARRIVAL_BATCH: usize = 64;

/// Requests read ahead from the source in small batches: copying each request out of the
/// source's return value right before using it stalled the loop; filled in a batch, the
/// copies overlap. A source error is kept and raised when the simulator reaches it, so the
/// requests before it are simulated exactly as before.
struct Arrivals<'a> {
    src: &'a mut dyn TraceSource,
    buf: Vec<Request>,
    /// The host I/O of each request in `buf` (id = the request's index in the trace), made
    /// a batch at a time: an `Io` written field by field and copied whole right after
    /// stalled on store forwarding; made ahead, it is settled memory when it is copied.
    ios: Vec<Io>,
    /// Index in the trace of `buf[0]`.
    first: u64,
    pos: usize,
    /// `None` while the source has more; `Some(Ok)` at its end; `Some(Err)` on its error.
    end: Option<Result<(), String>>,
}

impl Arrivals<'_> {
    /// The next request's arrival time, `None` at the end of the trace.
    #[inline]
    fn next_at(&mut self) -> Result<Option<Nanos>, String> {
        if self.pos == self.buf.len() {
            self.refill()?;
        }
        Ok(self.buf.get(self.pos).map(|r| r.arrival))
    }

    /// The request `next_at` announced, as its arrival time and host I/O.
    #[inline]
    fn take(&mut self) -> (Nanos, Io) {
        let k = self.pos;
        self.pos += 1;
        (self.buf[k].arrival, self.ios[k])
    }

    fn refill(&mut self) -> Result<(), String> {
        self.first += self.buf.len() as u64;
        self.buf.clear();
        self.ios.clear();
        self.pos = 0;
        if self.end.is_none() {
            match self.src.fill(&mut self.buf, ARRIVAL_BATCH) {
                Ok(n) if n < ARRIVAL_BATCH => self.end = Some(Ok(())),
                Ok(_) => {}
                Err(e) => self.end = Some(Err(e.to_string())),
            }
            let first = self.first;
            self.ios
                .extend(self.buf.iter().zip(first..).map(|(r, id)| r.io(id)));
        }
        match &self.end {
            Some(Err(e)) if self.buf.is_empty() => Err(e.clone()),
            _ => Ok(()),
        }
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
}

/// Everything a run needs but the stack, so that the stack carries out its effects here
/// while it runs ([`Effects`]): an I/O goes from a function's action buffer straight into
/// its device, with no queue of effects in between.
struct Exec<'s> {
    devs: Vec<DeviceRuntime>,
    heap: EventHeap,
    seq: u64,
    timers: HashMap<(u32, TimerId), TimerSlot, BuildHasherDefault<Fx>>,
    /// A device's events, dealt with (and emptied) right after the call that produced them.
    dev_ev: Vec<DevEvent>,
    /// Power notifications for the stack (time, device, state), delivered once the stack
    /// call that caused them has returned.
    power: Vec<(Nanos, u16, u8)>,
    host: HostSide,
    sink: &'s mut dyn RunSink,
    /// The first error an effect met: the run stops with it when the stack call returns.
    err: Option<String>,
    /// A device's finished I/O on its way to the stack, kept on the heap: as a local, the
    /// compiler split it into pieces copied back with other boundaries, which stalled on
    /// store forwarding.
    done: Box<Completion>,
}

/// The host's side of a run: requests in flight and what their completions add up to.
struct HostSide {
    /// Arrival times of host requests in flight, indexed by id − `base`.
    inflight: VecDeque<Option<Nanos>>,
    base: u64,
    latency: LatencyHistogram,
    power_wait: LatencyHistogram,
    completed: u64,
    errors: u64,
    last_completion: Nanos,
}

impl Simulator {
    pub fn new(stack: Stack, devices: Vec<DeviceRuntime>) -> Simulator {
        Simulator {
            stack,
            devs: devices,
        }
    }

    /// Run `source` to the end. `until` caps the run; `min_end` extends it (a generated
    /// workload's duration: the devices' ledgers cover the whole period even if the last
    /// request came earlier).
    pub fn run(
        self,
        source: &mut dyn TraceSource,
        until: Option<Nanos>,
        min_end: Nanos,
        sink: &mut dyn RunSink,
    ) -> Result<SimOutcome, String> {
        let mut stack = self.stack;
        let mut x = Exec {
            devs: self.devs,
            heap: EventHeap::default(),
            seq: 0,
            timers: HashMap::default(),
            dev_ev: Vec::new(),
            power: Vec::new(),
            host: HostSide {
                inflight: VecDeque::new(),
                base: 0,
                latency: LatencyHistogram::new(),
                power_wait: LatencyHistogram::new(),
                completed: 0,
                errors: 0,
                last_completion: 0,
            },
            sink,
            err: None,
            done: Box::new(Completion::ok(
                Request::new(0, Op::Read, 0, 0).io(0),
                0,
                Default::default(),
            )),
        };
        let mut now: Nanos = 0;
        stack.start(now, &mut x);
        x.settle(&mut stack)?;
        let mut arrivals = Arrivals {
            src: source,
            buf: Vec::with_capacity(ARRIVAL_BATCH),
            ios: Vec::with_capacity(ARRIVAL_BATCH),
            first: 0,
            pos: 0,
            end: None,
        };
        let mut issued: u64 = 0;
        let cap = until.unwrap_or(Nanos::MAX);
        // With an explicit end, timers and transitions run up to it after the last request.
        let min_end = min_end.max(until.unwrap_or(0));
        loop {
            let heap_at = x.heap.peek_at();
            let next_at = arrivals.next_at()?;
            let take_arrival = match (next_at, heap_at) {
                (Some(a), Some(h)) => a < h,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if take_arrival {
                let (arrival, io) = arrivals.take();
                if arrival > cap {
                    break;
                }
                if arrival < now {
                    return Err(format!(
                        "request {issued}: arrival {arrival} ns precedes the previous request's {now} ns (traces must be in arrival order)"
                    ));
                }
                now = arrival;
                debug_assert_eq!(io.id.0, issued);
                if stack.is_empty() && io.dev as usize >= x.devs.len() {
                    return Err(x.bad_device(issued, io.dev));
                }
                x.host.inflight.push_back(Some(arrival));
                issued += 1;
                stack.request(now, io, &mut x);
                x.settle(&mut stack)?;
                if issued.is_multiple_of(PROGRESS_EVERY) {
                    x.sink.progress(issued, now)?;
                }
                continue;
            }
            let Some(h) = heap_at else { break };
            // Trace exhausted: keep going only while host requests are outstanding, or up to
            // the minimum end.
            if next_at.is_none() && x.host.inflight.is_empty() && h > min_end.max(now) {
                break;
            }
            if h > cap {
                break;
            }
            let ev = x.heap.pop().expect("peeked");
            now = ev.at;
            x.dispatch(ev, &mut stack)?;
        }
        drop(arrivals);
        if !x.host.inflight.is_empty() && until.is_none() {
            return Err(format!(
                "{} host request(s) never completed: a function dropped them (every request needs a Reply)",
                x.host.inflight.iter().filter(|i| i.is_some()).count()
            ));
        }
        let end = match until {
            Some(u) => u,
            None => now.max(min_end).max(x.host.last_completion),
        };
        x.sink.progress(issued, end)?;
        Ok(SimOutcome {
            stack,
            devices: x.devs,
            end,
            requests: x.host.completed,
            errors: x.host.errors,
            latency: x.host.latency,
            power_wait: x.host.power_wait,
            assumptions: source.assumptions(),
        })
    }
}

impl Exec<'_> {
    fn bad_device(&self, id: u64, dev: u16) -> String {
        format!(
            "request {id} targets device {dev}, but the run has {} device(s) (0..{}): select or map the trace's volumes, or add devices",
            self.devs.len(),
            self.devs.len().saturating_sub(1)
        )
    }

    /// Keep the first error: later ones are consequences of it.
    #[cold]
    fn fail(&mut self, e: String) {
        self.err.get_or_insert(e);
    }

    /// After a stack call: deliver the power notifications it caused, and stop on an error.
    #[inline]
    fn settle(&mut self, stack: &mut Stack) -> Result<(), String> {
        if !self.power.is_empty() {
            for k in 0..self.power.len() {
                let (at, dev, state) = self.power[k];
                stack.power(at, dev, state);
            }
            self.power.clear();
        }
        match self.err.take() {
            None => Ok(()),
            Some(e) => Err(e),
        }
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
    fn dispatch(&mut self, ev: Ev, stack: &mut Stack) -> Result<(), String> {
        let now = ev.at;
        match ev.kind {
            Kind::Service { dev, token } => {
                let done = &mut *self.done;
                let found =
                    self.devs[dev as usize].service_end_into(now, token, &mut self.dev_ev, done);
                // The device's own events first (the next I/O it starts), then the stack
                // hears of the completion.
                self.device_events(dev);
                if found {
                    stack.device_completion(now, *self.done, self);
                }
            }
            Kind::Transition { dev } => {
                self.devs[dev as usize].transition_end(now, &mut self.dev_ev);
                self.device_events(dev);
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
                stack.timer(now, layer as usize, timer, self);
            }
        }
        self.settle(stack)
    }

    /// Schedule device `dev`'s events; note its power changes for the stack.
    #[inline]
    fn device_events(&mut self, dev: u16) {
        for k in 0..self.dev_ev.len() {
            match self.dev_ev[k] {
                DevEvent::ServiceEnd { at, token } => self.push(at, Kind::Service { dev, token }),
                DevEvent::TransitionEnd { at } => self.push(at, Kind::Transition { dev }),
                DevEvent::Mode { at, slot } => {
                    if let Err(e) = self.sink.mode(dev, at, slot) {
                        self.fail(e);
                    }
                    if slot < self.devs[dev as usize].spec().states.len() {
                        self.power.push((at, dev, slot as u8));
                    }
                }
            }
        }
        self.dev_ev.clear();
    }
}

impl Effects for Exec<'_> {
    #[inline]
    fn submit(&mut self, now: Nanos, io: &Io) {
        let Some(d) = self.devs.get_mut(io.dev as usize) else {
            let e = self.bad_device(io.id.0, io.dev);
            return self.fail(e);
        };
        d.submit(now, *io, &mut self.dev_ev);
        self.device_events(io.dev);
    }

    #[inline]
    fn host_reply(&mut self, now: Nanos, done: &Completion) {
        if let Err(e) = self.host.reply(done, now, self.sink) {
            self.fail(e);
        }
    }

    fn set_power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
        let Some(d) = self.devs.get_mut(device as usize) else {
            return self.fail(format!(
                "a function set the power of device {device}, which does not exist"
            ));
        };
        d.set_power(now, state, &mut self.dev_ev);
        self.device_events(device);
    }

    #[inline]
    fn set_timer(&mut self, now: Nanos, layer: usize, timer: TimerId, at: Nanos) {
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

    #[inline]
    fn cancel_timer(&mut self, _now: Nanos, layer: usize, timer: TimerId) {
        if let Some(slot) = self.timers.get_mut(&(layer as u32, timer)) {
            slot.deadline = None;
        }
    }
}

impl HostSide {
    #[inline]
    fn reply(
        &mut self,
        done: &Completion,
        now: Nanos,
        sink: &mut dyn RunSink,
    ) -> Result<(), String> {
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
        let latency = now - arrival;
        // Read by field, not copied whole: the reply was written just now, and a whole copy
        // stalled on store forwarding.
        let mut b = done.breakdown;
        let accounted = b.total();
        if accounted > latency {
            // A function replied before the device work it forwarded finished (write-back
            // caching): attribute the latency to service.
            b = Breakdown {
                queue_ns: 0,
                power_wait_ns: b.power_wait_ns.min(latency),
                service_ns: latency - b.power_wait_ns.min(latency),
            };
        } else {
            // Time the layers held the request beyond what the device reported is queueing.
            b.queue_ns += latency - accounted;
        }
        self.latency.record(latency);
        self.power_wait.record(b.power_wait_ns);
        self.completed += 1;
        if done.status != Status::Ok {
            self.errors += 1;
        }
        self.last_completion = now;
        sink.request(&HostRequest {
            id,
            arrival,
            finished: now,
            breakdown: b,
            status: done.status,
            io: &done.io,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    #[test]
    fn event_heap_pops_in_time_then_sequence_order() {
        // Interleaved pushes and pops against std's heap, with many equal times.
        let mut ours = EventHeap::default();
        let mut reference = BinaryHeap::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for seq in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let at = (x >> 33) % 50;
            if (x >> 20).is_multiple_of(3) {
                assert_eq!(
                    ours.pop().map(|e| e.key()),
                    reference.pop().map(|Reverse(k)| k)
                );
            } else {
                let kind = Kind::Transition { dev: 0 };
                ours.push(Ev { at, seq, kind });
                reference.push(Reverse((at, seq)));
            }
            assert_eq!(ours.peek_at(), reference.peek().map(|Reverse((a, _))| *a));
        }
        while let Some(Reverse(k)) = reference.pop() {
            assert_eq!(ours.pop().map(|e| e.key()), Some(k));
        }
        assert!(ours.pop().is_none());
    }
}
