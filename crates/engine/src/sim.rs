//! The simulated executor: a discrete-event loop in virtual nanoseconds.
//!
//! Host requests stream from a [`TraceSource`] (never held in memory); device service ends,
//! power transitions and function timers wait in one binary heap ordered by (time, sequence
//! number), so equal-time events run in the order they were scheduled and a run is a pure
//! function of (config, trace, seed). At equal times heap events run before the next arrival.
//! What the simulator shares with the live executor (timer table, device-event routing,
//! host accounting) is the [`Kernel`]; this module supplies its clock: the heap and the
//! arrivals.

use wattio_core::device::DeviceRuntime;
use wattio_core::io::{Completion, DeviceId, Io, Request};
pub use wattio_core::kernel::Unload;
use wattio_core::kernel::{DataObserver, Event, Executor, Hosts, Kernel, NoObserver};
use wattio_core::stack::Stack;
use wattio_core::stats::LatencyHistogram;
use wattio_core::time::Nanos;
use wattio_core::trace::TraceSource;

pub use wattio_core::kernel::HostRequest;

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
struct Ev {
    at: Nanos,
    seq: u64,
    kind: Event,
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

/// Where a run's host requests come from. A trace is an *open* host: its arrivals are
/// known in advance. A *closed* host (a replayed application launch, `crate::launch`)
/// issues a request only once what it waits for has completed, so it hears of every reply.
pub trait Host {
    /// Whether [`Host::replied`] is called (a constant: the open host's loop has no call
    /// and no branch for it).
    const CLOSED: bool;
    /// The next request's arrival time; `None` when nothing is due until a reply (or at
    /// the end).
    fn next_at(&mut self) -> Result<Option<Nanos>, String>;
    /// The request `next_at` announced, as its arrival time and host I/O (id: the next
    /// host id, [`Kernel::next_host_id`]).
    fn take(&mut self) -> (Nanos, &Io);
    /// Host request `id` completed at `finished` (closed hosts only).
    fn replied(&mut self, id: u64, finished: Nanos) {
        let _ = (id, finished);
    }
}

impl Host for Arrivals<'_> {
    const CLOSED: bool = false;

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
    fn take(&mut self) -> (Nanos, &Io) {
        let k = self.pos;
        self.pos += 1;
        (self.buf[k].arrival, &self.ios[k])
    }
}

impl Arrivals<'_> {
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
    /// Scratch buffers alive at the end with no I/O out on them: what the functions hold.
    pub scratch_held: usize,
    /// With [`Simulator::unloading`]: when the host detached (the run's end without the
    /// unload) and when every layer had stopped and its I/O was done. `None` without it, or
    /// when the run was cut (`until`) before the host detached or the unload finished.
    pub unload: Option<Unload>,
}

pub struct Simulator<O: DataObserver = NoObserver> {
    stack: Stack,
    devs: Vec<DeviceRuntime>,
    observer: O,
    start: Nanos,
    unload: bool,
    stall: Nanos,
}

/// How long the run may go on, in simulated time, once the trace is exhausted, with a host
/// request unanswered since the last reply or arrival, or with the unload unfinished since
/// it began: past it, the run is an error instead of a run that never ends (a function
/// holding a request while a timer of its re-arms forever; a function whose I/O never
/// stops). A day: no device answers that late, and a cache of a terabyte writes back in
/// hours.
pub const STALL_LIMIT: Nanos = 86_400 * 1_000_000_000;

/// The simulator's side of the [`Kernel`]: virtual time (the event heap) and where a
/// run's records go. `CLOSED`: replies are also kept for a closed [`Host`].
struct Clock<'s, const CLOSED: bool> {
    heap: EventHeap,
    sink: &'s mut dyn RunSink,
    devices: usize,
    replies: Vec<(u64, Nanos)>,
}

impl Simulator {
    pub fn new(stack: Stack, devices: Vec<DeviceRuntime>) -> Simulator {
        Simulator {
            stack,
            devs: devices,
            observer: NoObserver,
            start: 0,
            unload: false,
            stall: STALL_LIMIT,
        }
    }
}

impl<O: DataObserver> Simulator<O> {
    /// The same run, with `observer` seeing every data movement (lend it as `&mut` to read
    /// it after the run). An error from its `host_reply` stops the run with that error.
    pub fn with_observer<P: DataObserver>(self, observer: P) -> Simulator<P> {
        Simulator {
            stack: self.stack,
            devs: self.devs,
            observer,
            start: self.start,
            unload: self.unload,
            stall: self.stall,
        }
    }

    /// End the run with a clean unload (`[run] unload`), as the live server ends a session:
    /// at the run's end — the trace exhausted, the host's last request replied, the minimum
    /// end (a workload's duration) reached — the host detaches
    /// ([`Kernel::stop`]: every layer's `on_stop`, top down, each once the I/O of those
    /// above is done — e.g. a write-back cache writing its dirty pages back), and the
    /// run goes on until the last layer's is done. Its time and energy count in the run.
    /// Off by default: the papers measure a trace, not the teardown after it.
    pub fn unloading(self, unload: bool) -> Simulator<O> {
        Simulator { unload, ..self }
    }

    /// Bound the simulated time a run may take past its trace with a host request
    /// unanswered or its unload unfinished ([`STALL_LIMIT`] by default).
    pub fn stall_limit(self, stall: Nanos) -> Simulator<O> {
        Simulator { stall, ..self }
    }

    /// Start the run at `start` instead of 0: the part of a run after a crash, with the
    /// devices the part before it left (see [`DeviceRuntime::crash`]) and a rebuilt stack.
    /// Requests must arrive after it.
    pub fn starting_at(self, start: Nanos) -> Simulator<O> {
        Simulator { start, ..self }
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
        let mut arrivals = Arrivals {
            src: source,
            buf: Vec::with_capacity(ARRIVAL_BATCH),
            ios: Vec::with_capacity(ARRIVAL_BATCH),
            first: 0,
            pos: 0,
            end: None,
        };
        let mut out = self.drive::<_, false>(&mut arrivals, until, min_end, sink)?;
        drop(arrivals);
        out.assumptions = source.assumptions();
        Ok(out)
    }

    /// Run the requests of `host` to the end (a closed host: until it issues no more and
    /// nothing is in flight).
    pub fn run_host<H: Host>(
        self,
        host: &mut H,
        until: Option<Nanos>,
        min_end: Nanos,
        sink: &mut dyn RunSink,
    ) -> Result<SimOutcome, String> {
        if H::CLOSED {
            self.drive::<H, true>(host, until, min_end, sink)
        } else {
            self.drive::<H, false>(host, until, min_end, sink)
        }
    }

    /// The loop, with the reply hand-back compiled in only for closed hosts.
    fn drive<H: Host, const CLOSED: bool>(
        self,
        arrivals: &mut H,
        until: Option<Nanos>,
        min_end: Nanos,
        sink: &mut dyn RunSink,
    ) -> Result<SimOutcome, String> {
        let mut stack = self.stack;
        let clock = Clock::<CLOSED> {
            heap: EventHeap::default(),
            sink,
            devices: self.devs.len(),
            replies: Vec::new(),
        };
        let devs = self.devs.into_iter().map(Some).collect();
        let mut k = Kernel::new(devs, clock, self.observer);
        let mut now: Nanos = self.start;
        k.start(&mut stack, now)?;
        let mut issued: u64 = 0;
        let mut last_arrival = now;
        let mut unload: Option<Unload> = None;
        // Begun and not finished (every layer stopped, their I/O back).
        let mut unloading = false;
        let cap = until.unwrap_or(Nanos::MAX);
        // With an explicit end, timers and transitions run up to it after the last request.
        let min_end = min_end.max(until.unwrap_or(0));
        loop {
            let heap_at = k.executor().heap.peek_at();
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
                last_arrival = arrival;
                issued += 1;
                k.request(&mut stack, now, io, ())?;
                if CLOSED {
                    for (id, at) in k.executor_mut().replies.drain(..) {
                        arrivals.replied(id, at);
                    }
                }
                if issued.is_multiple_of(PROGRESS_EVERY) {
                    k.executor_mut().sink.progress(issued, now)?;
                }
                continue;
            }
            // The run's end: the trace exhausted, every host request answered, nothing due
            // up to the minimum end (a workload's duration) — unless the layers are still
            // unloading.
            let at_end = next_at.is_none()
                && k.idle()
                && heap_at.is_none_or(|h| h > min_end.max(now))
                && !unloading;
            if at_end {
                if !self.unload || unload.is_some() {
                    break;
                }
                // The host detaches at the run's end: the layers unload after the period
                // measured without the unload, and it adds its time.
                now = now.max(min_end);
                unload = Some(Unload {
                    started: now,
                    done: now,
                });
                unloading = !unload_step(&mut k, &mut stack, now)?;
                continue;
            }
            let Some(h) = heap_at else { break };
            if h > cap {
                break;
            }
            if next_at.is_none() && (unloading || !k.idle()) {
                stalled(&k, &stack, h, self.stall, last_arrival, unload.as_ref())?;
            }
            let ev = k.executor_mut().heap.pop().expect("peeked");
            now = ev.at;
            k.fire(&mut stack, now, ev.key(), ev.kind)?;
            if unloading {
                // The layers stopped so far may be done: the next one stops (`Kernel::stop`).
                unloading = !unload_step(&mut k, &mut stack, now)?;
                if let Some(u) = unload.as_mut().filter(|_| !unloading) {
                    u.done = now;
                }
            }
            if CLOSED {
                for (id, at) in k.executor_mut().replies.drain(..) {
                    arrivals.replied(id, at);
                }
            }
        }
        if k.inflight() > 0 && until.is_none() {
            return Err(format!(
                "{} host request(s) never completed: a function dropped them (every request needs a Reply)",
                k.inflight()
            ));
        }
        if unloading {
            // Cut by `until` before every layer had unloaded: it did not finish.
            unload = None;
        }
        let end = match until {
            Some(u) => u,
            None => now.max(min_end).max(k.last_completion()),
        };
        k.executor_mut().sink.progress(issued, end)?;
        let (requests, errors) = k.completed();
        let latency = k.latency().clone();
        let power_wait = k.power_wait().clone();
        let scratch_held = k.scratch_held();
        let (devs, _, _) = k.into_parts();
        Ok(SimOutcome {
            stack,
            devices: devs.into_iter().flatten().collect(),
            end,
            requests,
            errors,
            latency,
            power_wait,
            assumptions: Vec::new(),
            scratch_held,
            unload,
        })
    }
}

/// The trace is over and the run goes on at `h`: an error if a host request has waited,
/// or the unload gone on, for `limit` of simulated time (since the last arrival or reply,
/// or since the unload began).
fn stalled<X: Executor, O: DataObserver>(
    k: &Kernel<X, O>,
    stack: &Stack,
    h: Nanos,
    limit: Nanos,
    last_arrival: Nanos,
    unload: Option<&Unload>,
) -> Result<(), String> {
    let s = |t: Nanos| t as f64 / 1e9;
    if let Some((id, arrival)) = k.oldest_waiting() {
        let since = last_arrival.max(k.last_completion());
        if h > since.saturating_add(limit) {
            return Err(format!(
                "host request {id} (arrived at {:.3} s) is still unanswered at {:.3} s of simulated time, {:.0} s after the last request or reply: a function holds it and the run would never end (a timer of its re-arming forever?)",
                s(arrival),
                s(h),
                s(limit)
            ));
        }
    }
    if let Some(u) = unload {
        if h > u.started.saturating_add(limit) {
            return Err(format!(
                "the clean unload begun at {:.3} s is not done at {:.3} s of simulated time ({} device I/O(s) out, {} of {} layer(s) stopped): a function keeps sending I/O and the run would never end",
                s(u.started),
                s(h),
                k.device_io_out(),
                stack.stopped(),
                stack.len()
            ));
        }
    }
    Ok(())
}

/// A step of the unload ([`Kernel::stop`]), kept out of the event loop's line: it runs a
/// handful of times a run, the loop millions.
#[cold]
#[inline(never)]
fn unload_step<X: Executor, O: DataObserver>(
    k: &mut Kernel<X, O>,
    stack: &mut Stack,
    now: Nanos,
) -> Result<bool, String> {
    k.stop(stack, now)
}

impl<const CLOSED: bool> Executor for Clock<'_, CLOSED> {
    /// Nothing: the simulator's host requests are the trace's, indexed by their id.
    type Host = ();

    /// The simulator moves no bytes: the kernel keeps functions' metadata bytes for it.
    const EMULATES_BYTES: bool = true;

    // Always: the compiler kept it out of line in the kernel's device-event loop, and the
    // call cost more than the push (callgrind).
    #[inline(always)]
    fn schedule(&mut self, at: Nanos, seq: u64, kind: Event) {
        self.heap.push(Ev { at, seq, kind });
    }

    #[inline]
    fn submit(
        &mut self,
        _now: Nanos,
        io: &Io,
        modelled: bool,
        _hosts: &Hosts<()>,
    ) -> Result<(), String> {
        // Every simulated device has a model: an unmodelled one is one that does not exist.
        if modelled {
            return Ok(());
        }
        Err(format!(
            "request {} targets device {}, but the run has {} device(s) (0..{}): select or map the trace's volumes, or add devices",
            io.id.0,
            io.dev,
            self.devices,
            self.devices.saturating_sub(1)
        ))
    }

    #[inline]
    fn model_done(&mut self, _now: Nanos, _done: &mut Completion) -> bool {
        true
    }

    #[inline]
    fn host_reply(&mut self, r: &HostRequest<'_>, _host: ()) -> Result<(), String> {
        if CLOSED {
            self.replies.push((r.id, r.finished));
        }
        self.sink.request(r)
    }

    fn mode(&mut self, dev: DeviceId, at: Nanos, slot: usize) -> Result<(), String> {
        self.sink.mode(dev, at, slot)
    }

    fn unmodelled_power(&mut self, _device: DeviceId) {
        unreachable!("every simulated device has a model")
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
                let kind = Event::Transition { dev: 0 };
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
