//! The executor kernel: what the simulated and the live executor share.
//!
//! An executor drives a [`Stack`] over [`DeviceRuntime`]s. Most of that job does not depend
//! on whether time is virtual or the wall clock, so it lives here, once, sans-I/O and
//! single-threaded:
//!
//! * the **layer-timer table**: one pending deadline per (layer, timer), re-armed and
//!   cancelled as [`Action::SetTimer`](crate::Action::SetTimer) documents;
//! * **device-event routing**: a runtime's [`DevEvent::ServiceEnd`] / [`DevEvent::TransitionEnd`]
//!   become scheduled kernel [`Event`]s, and [`DevEvent::Mode`] becomes a timeline entry and
//!   a power notification for the stack (the rule below);
//! * **host-request accounting**: the in-flight table, latency and power-wait histograms,
//!   the breakdown fix-up, errors, double-reply detection;
//! * the [`Effects`] implementation the stack drives, and the [`DataObserver`] hook that sees
//!   every data movement.
//!
//! What differs between executors comes in through [`Executor`], a type parameter (so the
//! simulator's hot path stays monomorphic): the clock and scheduler underneath (the
//! simulator's event heap, live's wall-clock timer thread), what a device submission does
//! besides the model (live runs the real pread/pwrite), when a modelled completion may be
//! released (live pairs it with the real one), and where finished host requests and mode
//! changes go.
//!
//! # Scheduling order
//!
//! Every scheduled event carries a sequence number from one counter, and an executor runs
//! due events in (time, sequence) order. A device event takes its number when the device
//! asks for it; a layer timer takes its number when it is (re-)armed, even when re-arming
//! only moves an existing heap entry, so timers and device events due at the same
//! nanosecond run in the order they were scheduled.
//!
//! # When `on_power` fires
//!
//! A device's entry into a stable power state reaches every layer's `on_power` with the
//! time of the kernel event during which the device changed mode (`now`), once the stack
//! call in progress (if any) has returned, in the order the changes happened. The exact
//! time of the change (`DevEvent::Mode::at`, which a late live timer puts before `now`)
//! goes to the timeline through [`Executor::mode`] and to the ledger. Why `now`: a function
//! sees events in non-decreasing time; a live transition end handled late would otherwise
//! hand a layer a time earlier than events it has already seen. In simulation the two
//! times are equal, so simulated runs are unaffected. Why after the call: no function runs
//! inside another function's handler.

use crate::device::{DevEvent, DeviceRuntime};
use crate::function::TimerId;
use crate::fxhash::FxHashMap;
use crate::io::{Breakdown, Buf, Completion, DeviceId, Io, Op, Request, Status};
use crate::media::ScratchBytes;
use crate::power::PowerStateId;
use crate::region::Region;
use crate::scratch::ScratchLife;
use crate::stack::{Effects, Stack};
use crate::stats::LatencyHistogram;
use crate::time::Nanos;
use std::collections::{HashMap, VecDeque};

/// What a kernel asks its executor to schedule, and is handed back when it is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// A device model's service ends: [`DeviceRuntime::service_end`] with `token`.
    Service { dev: DeviceId, token: u32 },
    /// A device's power transition ends.
    Transition { dev: DeviceId },
    /// A layer's timer is due (if it is still armed for this entry).
    Timer { layer: u32, timer: TimerId },
}

/// A finished host request, as the kernel accounts it.
#[derive(Clone, Copy, Debug)]
pub struct HostRequest<'a> {
    /// The host I/O's id (in simulation, the request's index in the trace).
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

/// What an executor supplies to its kernel: everything that differs between virtual and
/// wall-clock time, and between a model alone and a model in front of a real medium.
pub trait Executor {
    /// What the executor keeps per host request in flight (the simulator: nothing; live:
    /// the client to answer and the request's buffer). Handed back with the reply.
    type Host;

    /// Does the kernel keep the bytes of functions' metadata for this executor? True for an
    /// executor that moves no bytes (the simulator): the kernel then keeps filled scratch
    /// buffers itself and each device's metadata regions in its runtime's
    /// [`Media`](crate::media::Media). False (live): [`fill`](Self::fill) and
    /// [`take`](Self::take) reach the executor, whose real I/O carries the bytes.
    const EMULATES_BYTES: bool = false;

    /// Run `ev` at `at` (or as soon as possible after it): call [`Kernel::fire`] with
    /// `(at, seq)`. Due events run in (time, `seq`) order.
    fn schedule(&mut self, at: Nanos, seq: u64, ev: Event);

    /// A device I/O leaves the stack for device `io.dev`, after its model (if the device
    /// has one: `modelled`) has queued it. `hosts` resolves `Buf::Host` references.
    fn submit(
        &mut self,
        now: Nanos,
        io: &Io,
        modelled: bool,
        hosts: &Hosts<Self::Host>,
    ) -> Result<(), String>;

    /// Would this executor refuse `io` before any device work (live: a read or write that
    /// names no buffer it can move bytes from or into)? Such an I/O does not reach the
    /// device's model: no service time, energy or byte counts for work that never happens.
    /// `submit` still receives it (unmodelled) and answers it with its error.
    fn refuses(&self, _io: &Io, _hosts: &Hosts<Self::Host>) -> bool {
        false
    }

    /// A device model finished `done`: may it reach the stack now? (Live holds it until
    /// the real I/O has finished too, and may update it: status, time.)
    fn model_done(&mut self, now: Nanos, done: &mut Completion) -> bool;

    /// A host request is complete (after the kernel's accounting).
    fn host_reply(&mut self, r: &HostRequest<'_>, host: Self::Host) -> Result<(), String>;

    /// Device `dev` entered ledger slot `slot` (a state, or a transition) at `at`.
    fn mode(&mut self, dev: DeviceId, at: Nanos, slot: usize) -> Result<(), String>;

    /// A function asked device `device`, which exists but has no model, for a power state.
    fn unmodelled_power(&mut self, device: DeviceId);

    /// A function combined two buffers, `dst ^= src` over `len` bytes (RAID parity). An
    /// executor that moves bytes (live) does it, creating a scratch buffer that does not
    /// exist yet as zeros; the simulator moves none.
    fn xor(
        &mut self,
        dst: Buf,
        src: Buf,
        len: u32,
        hosts: &Hosts<Self::Host>,
    ) -> Result<(), String> {
        let _ = (dst, src, len, hosts);
        Ok(())
    }

    /// A function copied between buffers, `dst = src` over `len` bytes (a prefetcher
    /// answering a read from its buffer). An executor that moves bytes (live) does it,
    /// creating a scratch buffer that does not exist yet; the simulator moves none.
    fn copy(
        &mut self,
        dst: Buf,
        src: Buf,
        len: u32,
        hosts: &Hosts<Self::Host>,
    ) -> Result<(), String> {
        let _ = (dst, src, len, hosts);
        Ok(())
    }

    /// A function put bytes into its scratch buffer `dst` (creating it). Only called when
    /// the executor moves bytes (`EMULATES_BYTES` false).
    fn fill(&mut self, dst: Buf, bytes: &[u8], hosts: &Hosts<Self::Host>) -> Result<(), String> {
        let _ = (dst, bytes, hosts);
        Err("this executor carries no bytes".into())
    }

    /// A function asks for the first `len` bytes of its scratch buffer `src` (zeros past
    /// its end); the buffer is freed. Only called when `EMULATES_BYTES` is false.
    fn take(&mut self, src: Buf, len: u32) -> Result<Vec<u8>, String> {
        let _ = (src, len);
        Err("this executor carries no bytes".into())
    }

    /// Scratch buffer `id` is freed (the kernel's rule: [`crate::scratch`]): drop its
    /// bytes. Every I/O on it has come back. Only called when `EMULATES_BYTES` is false.
    fn free_scratch(&mut self, id: u64) {
        let _ = id;
    }
}

/// Sees every data movement of a run in one place, for both executors: what the host
/// asks, what reaches the devices, what they finish, what the host is answered. A data
/// checker implements it; an error from `host_reply` stops a simulated run (live records
/// it as a session error).
pub trait DataObserver {
    /// A host request enters the stack.
    fn host_request(&mut self, now: Nanos, io: &Io) {
        let _ = (now, io);
    }
    /// An I/O leaves the stack for a device.
    fn device_submit(&mut self, now: Nanos, io: &Io) {
        let _ = (now, io);
    }
    /// A device I/O finished and is about to reach the stack.
    fn device_complete(&mut self, now: Nanos, done: &Completion) {
        let _ = (now, done);
    }
    /// The stack answers a host request.
    fn host_reply(&mut self, now: Nanos, done: &Completion) -> Result<(), String> {
        let _ = (now, done);
        Ok(())
    }
    /// A function combined two buffers: `dst ^= src` over `len` bytes.
    fn xor(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        let _ = (now, dst, src, len);
    }
    /// A function copied between buffers: `dst = src` over `len` bytes.
    fn copy(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        let _ = (now, dst, src, len);
    }
    /// A function put `len` bytes of its own (metadata) into its scratch buffer `dst`.
    fn fill(&mut self, now: Nanos, dst: Buf, len: u32) {
        let _ = (now, dst, len);
    }
    /// A function reserved `r` for its metadata (told when a run starts, again after a
    /// restart).
    fn reserve(&mut self, r: Region) {
        let _ = r;
    }
    /// Scratch buffer `id` is freed (the kernel's rule: [`crate::scratch`]); a later
    /// buffer may reuse the id.
    fn scratch_freed(&mut self, now: Nanos, id: u64) {
        let _ = (now, id);
    }
}

/// The observer that observes nothing, and costs nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl DataObserver for NoObserver {}

/// A clean unload's span ([`Kernel::stop`]), as both executors report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unload {
    /// When the host detached and the top layer's `on_stop` ran (simulated: the run's end
    /// without the unload — the host's last reply, or the workload's duration if later).
    pub started: Nanos,
    /// Every layer had stopped and the last device I/O they issued for it completed
    /// (`started` if none; live: as the shutdown's poll saw it).
    pub done: Nanos,
}

/// So a caller can lend its observer to a run and read it afterwards.
impl<T: DataObserver + ?Sized> DataObserver for &mut T {
    fn host_request(&mut self, now: Nanos, io: &Io) {
        (**self).host_request(now, io)
    }
    fn device_submit(&mut self, now: Nanos, io: &Io) {
        (**self).device_submit(now, io)
    }
    fn device_complete(&mut self, now: Nanos, done: &Completion) {
        (**self).device_complete(now, done)
    }
    fn host_reply(&mut self, now: Nanos, done: &Completion) -> Result<(), String> {
        (**self).host_reply(now, done)
    }
    fn xor(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        (**self).xor(now, dst, src, len)
    }
    fn copy(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        (**self).copy(now, dst, src, len)
    }
    fn fill(&mut self, now: Nanos, dst: Buf, len: u32) {
        (**self).fill(now, dst, len)
    }
    fn reserve(&mut self, r: Region) {
        (**self).reserve(r)
    }
    fn scratch_freed(&mut self, now: Nanos, id: u64) {
        (**self).scratch_freed(now, id)
    }
}

/// An observer chosen at run time (the live server's data checker, when asked for).
impl<T: DataObserver> DataObserver for Option<T> {
    fn host_request(&mut self, now: Nanos, io: &Io) {
        if let Some(o) = self {
            o.host_request(now, io)
        }
    }
    fn device_submit(&mut self, now: Nanos, io: &Io) {
        if let Some(o) = self {
            o.device_submit(now, io)
        }
    }
    fn device_complete(&mut self, now: Nanos, done: &Completion) {
        if let Some(o) = self {
            o.device_complete(now, done)
        }
    }
    fn host_reply(&mut self, now: Nanos, done: &Completion) -> Result<(), String> {
        match self {
            Some(o) => o.host_reply(now, done),
            None => Ok(()),
        }
    }
    fn xor(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        if let Some(o) = self {
            o.xor(now, dst, src, len)
        }
    }
    fn copy(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        if let Some(o) = self {
            o.copy(now, dst, src, len)
        }
    }
    fn fill(&mut self, now: Nanos, dst: Buf, len: u32) {
        if let Some(o) = self {
            o.fill(now, dst, len)
        }
    }
    fn reserve(&mut self, r: Region) {
        if let Some(o) = self {
            o.reserve(r)
        }
    }
    fn scratch_freed(&mut self, now: Nanos, id: u64) {
        if let Some(o) = self {
            o.scratch_freed(now, id)
        }
    }
}

/// A (time, sequence) scheduling key.
type Key = (Nanos, u64);

/// A timer's one scheduled entry. Cancelling or re-arming later keeps the entry: when it
/// comes due it is dropped or moved to the armed deadline, so the cancel-then-re-arm pattern
/// of idle timers (cancel on every request, re-arm on every completion) moves a deadline
/// instead of scheduling a new event each time. Only re-arming earlier schedules one.
struct TimerSlot {
    /// The armed deadline and its sequence number; `None`: cancelled.
    armed: Option<Key>,
    /// The scheduled entry that stands for this timer; others for it are stale.
    entry: Key,
}

/// Host requests in flight and what their completions add up to.
pub struct Hosts<H> {
    /// Arrival time and executor data of requests in flight, indexed by id − `base`: ids are
    /// issued in order, and a completed request's entry is `None` until those before it
    /// complete too.
    inflight: VecDeque<Option<(Nanos, H)>>,
    base: u64,
    latency: LatencyHistogram,
    power_wait: LatencyHistogram,
    completed: u64,
    errors: u64,
    last_completion: Nanos,
}

impl<H> Hosts<H> {
    fn new() -> Hosts<H> {
        Hosts {
            inflight: VecDeque::new(),
            base: 0,
            latency: LatencyHistogram::new(),
            power_wait: LatencyHistogram::new(),
            completed: 0,
            errors: 0,
            last_completion: 0,
        }
    }

    /// The executor data of host request `id`, while it is in flight.
    #[inline]
    pub fn get(&self, id: u64) -> Option<&H> {
        let i = id.checked_sub(self.base)? as usize;
        self.inflight.get(i)?.as_ref().map(|(_, h)| h)
    }

    /// The id the next host request must carry.
    #[inline]
    fn next_id(&self) -> u64 {
        self.base + self.inflight.len() as u64
    }
}

/// The shared executor logic over executor `X`, with data observer `O`.
pub struct Kernel<X: Executor, O: DataObserver = NoObserver> {
    /// The devices, index = [`DeviceId`]; `None`: a device without a model (live only).
    devs: Vec<Option<DeviceRuntime>>,
    x: X,
    observer: O,
    seq: u64,
    timers: FxHashMap<(u32, TimerId), TimerSlot>,
    /// A device's events, dealt with (and emptied) right after the call that produced them.
    dev_ev: Vec<DevEvent>,
    /// Power notifications for the stack, delivered once the stack call that caused them
    /// has returned.
    /// Power notifications for the layers: (device, state, whether it is the start of a
    /// transition towards `state` rather than the entry into it).
    power: Vec<(DeviceId, PowerStateId, bool)>,
    hosts: Hosts<X::Host>,
    /// The first error an effect met, reported when the stack call returns.
    err: Option<String>,
    /// A device's finished I/O on its way to the stack, kept on the heap: as a local, the
    /// compiler split it into pieces copied back with other boundaries, which stalled on
    /// store forwarding.
    done: Box<Completion>,
    /// Bytes asked for by [`Effects::take`]: (layer, tag, bytes), delivered once the stack
    /// call has returned.
    taken: Vec<(usize, u64, Vec<u8>)>,
    /// Filled scratch buffers, when the kernel keeps bytes (`X::EMULATES_BYTES`).
    scratch: ScratchBytes,
    /// Which scratch buffers are alive, for every executor: when one is freed, the bytes'
    /// keeper and the observer are told.
    life: ScratchLife,
    /// `X::EMULATES_BYTES` and some function reserved a metadata region: device I/O is
    /// followed into the devices' media. False: the hot path pays one test.
    emulate: bool,
    /// Device I/O submitted and not yet handed back to the stack: what a clean unload
    /// waits for ([`Kernel::stop`]).
    device_out: u64,
}

impl<X: Executor, O: DataObserver> Kernel<X, O> {
    pub fn new(devs: Vec<Option<DeviceRuntime>>, x: X, observer: O) -> Kernel<X, O> {
        Kernel {
            devs,
            x,
            observer,
            seq: 0,
            timers: HashMap::default(),
            dev_ev: Vec::new(),
            power: Vec::new(),
            hosts: Hosts::new(),
            err: None,
            done: Box::new(Completion::ok(
                Request::new(0, Op::Read, 0, 0).io(0),
                0,
                Breakdown::default(),
            )),
            taken: Vec::new(),
            scratch: ScratchBytes::default(),
            life: ScratchLife::default(),
            device_out: 0,
            emulate: false,
        }
    }

    pub fn executor(&self) -> &X {
        &self.x
    }

    pub fn executor_mut(&mut self) -> &mut X {
        &mut self.x
    }

    pub fn devices(&self) -> &[Option<DeviceRuntime>] {
        &self.devs
    }

    /// Hand the devices back (the run is over).
    pub fn take_devices(&mut self) -> Vec<Option<DeviceRuntime>> {
        std::mem::take(&mut self.devs)
    }

    /// Scratch buffers alive with no I/O out on them (held by the functions).
    pub fn scratch_held(&self) -> usize {
        self.life.held()
    }

    /// The observer (a data checker's counts, at a session's end).
    pub fn observer(&self) -> &O {
        &self.observer
    }

    pub fn into_parts(self) -> (Vec<Option<DeviceRuntime>>, X, O) {
        (self.devs, self.x, self.observer)
    }

    /// The id the next host request must carry.
    pub fn next_host_id(&self) -> u64 {
        self.hosts.next_id()
    }

    /// The host I/O for request `r`, carrying the next host id (and `Buf::Host` at its
    /// buffer's start), for an executor that builds host I/Os one at a time. The simulator
    /// builds them ahead in batches with [`Request::io`], with the same ids.
    pub fn host_io(&self, r: &Request, fua: bool) -> Io {
        let mut io = r.io(self.hosts.next_id());
        io.fua = fua;
        io
    }

    /// Host requests in flight (counted when asked: the executors ask rarely, and a
    /// counter would cost on every request).
    pub fn inflight(&self) -> usize {
        self.hosts.inflight.iter().filter(|h| h.is_some()).count()
    }

    /// The oldest host request in flight: its id and arrival time.
    pub fn oldest_waiting(&self) -> Option<(u64, Nanos)> {
        // The table's front entry is always one in flight.
        let (arrival, _) = self.hosts.inflight.front()?.as_ref()?;
        Some((self.hosts.base, *arrival))
    }

    /// No host request in flight?
    #[inline]
    pub fn idle(&self) -> bool {
        // The table's front entry is always one in flight.
        self.hosts.inflight.is_empty()
    }

    /// Host requests completed (with any status), and those that failed.
    pub fn completed(&self) -> (u64, u64) {
        (self.hosts.completed, self.hosts.errors)
    }

    /// Time of the last host reply.
    pub fn last_completion(&self) -> Nanos {
        self.hosts.last_completion
    }

    /// Host latency (arrival to reply).
    pub fn latency(&self) -> &LatencyHistogram {
        &self.hosts.latency
    }

    /// Per host request: time waiting for a device to reach a ready power state.
    pub fn power_wait(&self) -> &LatencyHistogram {
        &self.hosts.power_wait
    }

    /// The run starts: the observer (and, when the kernel keeps bytes, each device's
    /// media) learns of the layers' metadata regions, then every layer's `on_start`.
    pub fn start(&mut self, stack: &mut Stack, now: Nanos) -> Result<(), String> {
        for &r in stack.regions() {
            self.observer.reserve(r);
            if X::EMULATES_BYTES {
                match self.devs.get_mut(r.dev as usize) {
                    Some(Some(d)) => d.reserve(r),
                    _ => {
                        return Err(format!(
                            "a metadata region names device {}, which has no model",
                            r.dev
                        ))
                    }
                }
                self.emulate = true;
            }
        }
        stack.start(now, self);
        self.settle(stack, now)
    }

    /// A clean unload, step by step: the host has detached, and each layer's `on_stop` runs
    /// top down, each once the layers above it have no I/O out (what their own unload sent
    /// has gone through it: [`Stack::stop_next`]). Returns true once every layer has stopped
    /// and no device I/O is out. The executor calls it when the host detaches and again
    /// after every completion, until it is true.
    pub fn stop(&mut self, stack: &mut Stack, now: Nanos) -> Result<bool, String> {
        while stack.stopped_drained() {
            if !stack.stop_next(now, self) {
                return Ok(self.device_out == 0);
            }
            self.settle(stack, now)?;
        }
        Ok(false)
    }

    /// Device I/O out: submitted by the bottom layer, its completion not yet handed back.
    pub fn device_io_out(&self) -> u64 {
        self.device_out
    }

    /// A host request arrives. `io.id` must be [`next_host_id`](Self::next_host_id): the
    /// in-flight table is indexed by it. (By reference: the I/O is copied once, into the
    /// stack, from wherever the executor keeps it.)
    #[inline]
    pub fn request(
        &mut self,
        stack: &mut Stack,
        now: Nanos,
        io: &Io,
        host: X::Host,
    ) -> Result<(), String> {
        let next = self.hosts.next_id();
        if io.id.0 != next {
            return Err(format!(
                "host request id {} out of order: the next is {next}",
                io.id.0
            ));
        }
        self.hosts.inflight.push_back(Some((now, host)));
        self.observer.host_request(now, io);
        stack.request(now, *io, self);
        self.settle(stack, now)
    }

    /// A device I/O finished outside the kernel's models (live: a device without a model,
    /// or a modelled I/O whose real half finished last): hand it to the stack.
    pub fn device_completion(
        &mut self,
        stack: &mut Stack,
        now: Nanos,
        done: Completion,
    ) -> Result<(), String> {
        self.observer.device_complete(now, &done);
        self.scratch_back(now, &done.io);
        self.device_out = self.device_out.saturating_sub(1);
        stack.device_completion(now, done, self);
        self.settle(stack, now)
    }

    /// A scheduled event is due: `key` is the (time, sequence) it was scheduled with,
    /// `now` the time it runs (equal in simulation, later or equal live).
    #[inline]
    pub fn fire(
        &mut self,
        stack: &mut Stack,
        now: Nanos,
        key: (Nanos, u64),
        ev: Event,
    ) -> Result<(), String> {
        match ev {
            Event::Service { dev, token } => {
                let Some(Some(rt)) = self.devs.get_mut(dev as usize) else {
                    return Ok(());
                };
                let done = &mut *self.done;
                let found = rt.service_end_into(now, token, &mut self.dev_ev, done);
                if found && X::EMULATES_BYTES {
                    let media = if self.emulate { rt.media_mut() } else { None };
                    // A read of bytes the media keeps lands in its scratch buffer.
                    if let Some(read) = media.and_then(|m| m.complete(done)) {
                        self.scratch.complete(&done.io, read);
                    }
                }
                // The device's own events first (the next I/O it starts), then the stack
                // hears of the completion.
                self.device_events(dev);
                if found && self.x.model_done(now, &mut self.done) {
                    self.observer.device_complete(now, &self.done);
                    if matches!(self.done.io.buf, Buf::Scratch { .. }) {
                        let io = self.done.io;
                        self.scratch_back(now, &io);
                    }
                    self.device_out = self.device_out.saturating_sub(1);
                    stack.device_completion(now, *self.done, self);
                }
            }
            Event::Transition { dev } => {
                let Some(Some(rt)) = self.devs.get_mut(dev as usize) else {
                    return Ok(());
                };
                rt.transition_end(now, &mut self.dev_ev);
                self.device_events(dev);
            }
            Event::Timer { layer, timer } => {
                let id = (layer, timer);
                let Some(slot) = self.timers.get_mut(&id) else {
                    return Ok(()); // stale: the timer fired or was dropped since
                };
                if slot.entry != key {
                    return Ok(()); // stale: superseded by an earlier entry
                }
                match slot.armed {
                    None => {
                        self.timers.remove(&id);
                        return Ok(());
                    }
                    Some(armed) if armed > key => {
                        // Re-armed later while this entry waited: move it.
                        slot.entry = armed;
                        self.x.schedule(armed.0, armed.1, ev);
                        return Ok(());
                    }
                    Some(_) => {}
                }
                self.timers.remove(&id);
                if (layer as usize) < stack.len() {
                    stack.timer(now, layer as usize, timer, self);
                }
            }
        }
        self.settle(stack, now)
    }

    /// After a stack call: deliver the power notifications it caused, and report an error.
    #[inline]
    fn settle(&mut self, stack: &mut Stack, now: Nanos) -> Result<(), String> {
        if !self.power.is_empty() {
            for k in 0..self.power.len() {
                match self.power[k] {
                    (dev, state, false) => stack.power(now, dev, state),
                    (dev, to, true) => stack.transition(now, dev, to),
                }
            }
            self.power.clear();
        }
        if !self.taken.is_empty() {
            self.deliver_taken(stack, now);
        }
        match self.err.take() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Bytes layers asked for; a handler may ask for more (delivered in turn). Out of line:
    /// rare (metadata reads at start), and inlined it cost the hot `settle` (callgrind).
    #[cold]
    #[inline(never)]
    fn deliver_taken(&mut self, stack: &mut Stack, now: Nanos) {
        while !self.taken.is_empty() {
            let (layer, tag, bytes) = self.taken.remove(0);
            if layer < stack.len() {
                stack.bytes(now, layer, tag, &bytes, self);
            }
        }
    }

    /// Keep the first error: later ones are consequences of it.
    #[cold]
    fn fail(&mut self, e: String) {
        self.err.get_or_insert(e);
    }

    #[inline]
    fn schedule(&mut self, at: Nanos, ev: Event) {
        self.seq += 1;
        self.x.schedule(at, self.seq, ev);
    }

    /// Schedule device `dev`'s events; note its power changes for the stack.
    #[inline]
    fn device_events(&mut self, dev: DeviceId) {
        for k in 0..self.dev_ev.len() {
            match self.dev_ev[k] {
                DevEvent::ServiceEnd { at, token } => {
                    self.schedule(at, Event::Service { dev, token })
                }
                DevEvent::TransitionEnd { at } => self.schedule(at, Event::Transition { dev }),
                DevEvent::Mode { at, slot } => {
                    if let Err(e) = self.x.mode(dev, at, slot) {
                        self.fail(e);
                    }
                    let Some(spec) = self.devs[dev as usize].as_ref().map(|d| d.spec()) else {
                        continue;
                    };
                    let states = spec.states.len();
                    if slot < states {
                        self.power.push((dev, slot as PowerStateId, false));
                    } else if let Some(t) = spec.transitions.get(slot - states) {
                        self.power.push((dev, t.to, true));
                    }
                }
            }
        }
        self.dev_ev.clear();
    }
}

impl<X: Executor, O: DataObserver> Kernel<X, O> {
    /// An I/O on a scratch buffer came back (from a device, or up from a lower layer):
    /// free the buffer if that was the last one out and the rule says so.
    #[inline]
    fn scratch_back(&mut self, now: Nanos, io: &Io) {
        if let Some(id) = self.life.back(io) {
            self.free_scratch(now, id);
        }
    }

    /// Scratch buffer `id` is freed: its bytes go (kept here or by the executor), and the
    /// observer forgets them.
    fn free_scratch(&mut self, now: Nanos, id: u64) {
        if X::EMULATES_BYTES {
            self.scratch.free(id);
        } else {
            self.x.free_scratch(id);
        }
        self.observer.scratch_freed(now, id);
    }

    /// A function's `Xor` (`xor`) or `Copy` into `dst`: refused if `src` does not hold the
    /// bytes; else the observer sees it, the buffer is open, the simulator carries a
    /// metadata region's bytes through it (the rest it does not move), the executor moves
    /// the bytes it carries (live: every buffer).
    fn combine(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32, xor: bool) {
        if let Err(have) = self.life.holds(src, len) {
            let what = if xor { "xor" } else { "copy" };
            self.fail(format!(
                "{what} of {len} bytes from {src:?}: the buffer holds {have} bytes (a read into it not back yet, or nothing put there)"
            ));
            return;
        }
        if xor {
            self.observer.xor(now, dst, src, len);
        } else {
            self.observer.copy(now, dst, src, len);
        }
        self.life.open(dst, len);
        if X::EMULATES_BYTES && self.emulate {
            self.scratch.combine(dst, src, len, xor);
        }
        let moved = if xor {
            self.x.xor(dst, src, len, &self.hosts)
        } else {
            self.x.copy(dst, src, len, &self.hosts)
        };
        if let Err(e) = moved {
            self.fail(e);
        }
    }
}

impl<X: Executor, O: DataObserver> Effects for Kernel<X, O> {
    #[inline]
    fn submit(&mut self, now: Nanos, io: &Io) {
        self.observer.device_submit(now, io);
        self.life.out(io);
        self.device_out += 1;
        let refused = self.x.refuses(io, &self.hosts);
        let modelled = match self.devs.get_mut(io.dev as usize) {
            Some(Some(d)) if !refused => {
                if X::EMULATES_BYTES {
                    let media = if self.emulate { d.media_mut() } else { None };
                    match media {
                        Some(m)
                            if matches!(io.op, Op::Read | Op::Write)
                                && m.touches(io.offset, io.len as u64) =>
                        {
                            let src = self.scratch.submit(io);
                            m.submit(io, src);
                        }
                        m => {
                            if let Some(m) = m.filter(|_| io.op != Op::Read) {
                                m.submit(io, None);
                            }
                        }
                    }
                }
                d.submit(now, *io, &mut self.dev_ev);
                self.device_events(io.dev);
                true
            }
            _ => false,
        };
        if let Err(e) = self.x.submit(now, io, modelled, &self.hosts) {
            self.fail(e);
        }
    }

    #[inline]
    fn host_reply(&mut self, now: Nanos, done: &Completion) {
        let id = done.io.id.0;
        let h = &mut self.hosts;
        let taken = id
            .checked_sub(h.base)
            .and_then(|i| h.inflight.get_mut(i as usize))
            .and_then(Option::take);
        let Some((arrival, host)) = taken else {
            return self.fail(format!(
                "a function replied to host request {id} twice, or to one that does not exist"
            ));
        };
        while let Some(None) = h.inflight.front() {
            h.inflight.pop_front();
            h.base += 1;
        }
        // A live reply may be stamped by a clock read before the arrival's (another thread
        // took the lock in between): never a negative latency.
        let latency = now.saturating_sub(arrival);
        // Read by field, not copied whole: the reply was written just now, and a whole copy
        // stalled on store forwarding.
        let mut b = done.breakdown;
        let accounted = b.total();
        if accounted > latency {
            // A function replied before the device work it forwarded finished (write-back
            // caching): attribute the latency to service.
            let wait = b.power_wait_ns.min(latency);
            b = Breakdown {
                queue_ns: 0,
                power_wait_ns: wait,
                service_ns: latency - wait,
            };
        } else {
            // Time the layers held the request beyond what the device reported is queueing.
            b.queue_ns += latency - accounted;
        }
        h.latency.record(latency);
        h.power_wait.record(b.power_wait_ns);
        h.completed += 1;
        if done.status != Status::Ok {
            h.errors += 1;
        }
        h.last_completion = now;
        if let Err(e) = self.observer.host_reply(now, done) {
            self.fail(e);
        }
        let r = HostRequest {
            id,
            arrival,
            finished: now,
            breakdown: b,
            status: done.status,
            io: &done.io,
        };
        if let Err(e) = self.x.host_reply(&r, host) {
            self.fail(e);
        }
    }

    fn set_power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
        match self.devs.get_mut(device as usize) {
            Some(Some(d)) => {
                d.set_power(now, state, &mut self.dev_ev);
                self.device_events(device);
            }
            Some(None) => self.x.unmodelled_power(device),
            None => self.fail(format!(
                "a function set the power of device {device}, which does not exist"
            )),
        }
    }

    #[inline]
    fn set_timer(&mut self, now: Nanos, layer: usize, timer: TimerId, at: Nanos) {
        let at = at.max(now);
        self.seq += 1;
        let key = (at, self.seq);
        let id = (layer as u32, timer);
        match self.timers.get_mut(&id) {
            // The entry in the schedule comes first: it moves here when it is due.
            Some(slot) if key > slot.entry => slot.armed = Some(key),
            _ => {
                self.timers.insert(
                    id,
                    TimerSlot {
                        armed: Some(key),
                        entry: key,
                    },
                );
                self.x.schedule(
                    at,
                    key.1,
                    Event::Timer {
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
            slot.armed = None;
        }
    }

    fn xor(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        self.combine(now, dst, src, len, true);
    }

    fn copy(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32) {
        self.combine(now, dst, src, len, false);
    }

    fn fill(&mut self, now: Nanos, dst: Buf, bytes: &[u8]) {
        self.observer.fill(now, dst, bytes.len() as u32);
        self.life.open(dst, bytes.len() as u32);
        let r = if X::EMULATES_BYTES {
            self.scratch.fill(dst, bytes)
        } else {
            self.x.fill(dst, bytes, &self.hosts)
        };
        if let Err(e) = r {
            self.fail(e);
        }
    }

    fn release(&mut self, now: Nanos, buf: Buf) {
        if let Some(id) = self.life.release(buf) {
            self.free_scratch(now, id);
        }
    }

    fn hold(&mut self, _now: Nanos, io: &Io) {
        self.life.out(io);
    }

    fn unhold(&mut self, now: Nanos, io: &Io) {
        self.scratch_back(now, io);
    }

    fn take(&mut self, now: Nanos, layer: usize, src: Buf, len: u32, tag: u64) {
        let r = if X::EMULATES_BYTES {
            self.scratch.take(src, len)
        } else {
            self.x.take(src, len)
        };
        if let Some(id) = self.life.take(src) {
            self.observer.scratch_freed(now, id);
        }
        match r {
            Ok(bytes) => self.taken.push((layer, tag, bytes)),
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, _now: Nanos, layer: usize, msg: &str) {
        Kernel::fail(self, format!("layer {layer}: {msg}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceInfo, Service, Timing};
    use crate::function::{Actions, Function};
    use crate::power::tests::laptop;
    use crate::power::PowerSpec;
    use std::sync::{Arc, Mutex};

    /// What the test layer saw, in order.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Seen {
        Timer(Nanos, TimerId),
        Power(Nanos, DeviceId, PowerStateId),
        Transition(Nanos, DeviceId, PowerStateId),
    }

    /// One layer: forwards requests to device 0 (or holds them, for tests that reply by
    /// hand), passes completions up, and logs timers and power notifications.
    struct Probe {
        hold: bool,
        log: Arc<Mutex<Vec<Seen>>>,
    }

    impl Function for Probe {
        fn name(&self) -> &str {
            "probe"
        }
        fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
            if !self.hold {
                out.submit(io);
            }
        }
        fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
            if !done.io.id.is_own() {
                out.reply(done);
            }
        }
        fn on_timer(&mut self, now: Nanos, timer: TimerId, _out: &mut Actions) {
            self.log.lock().unwrap().push(Seen::Timer(now, timer));
        }
        fn on_power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
            self.log
                .lock()
                .unwrap()
                .push(Seen::Power(now, device, state));
        }
        fn on_transition(&mut self, now: Nanos, device: DeviceId, to: PowerStateId) {
            self.log
                .lock()
                .unwrap()
                .push(Seen::Transition(now, device, to));
        }
    }

    /// A device that takes 5 µs per I/O.
    struct Fixed;
    impl Timing for Fixed {
        fn capacity(&self) -> u64 {
            1 << 30
        }
        fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
            Service {
                transfer_ns: 5_000,
                ..Service::default()
            }
        }
    }

    /// A host reply as the test executor records it: id, arrival, finished, breakdown,
    /// status, and the executor's tag for the request.
    type Reply = (u64, Nanos, Nanos, Breakdown, Status, u32);

    /// The test executor: a plain list of scheduled events, run by hand.
    #[derive(Default)]
    struct Clock {
        pending: Vec<(Nanos, u64, Event)>,
        scheduled: Vec<(Nanos, Event)>,
        submits: Vec<(Nanos, u64, bool)>,
        replies: Vec<Reply>,
        modes: Vec<(DeviceId, Nanos, usize)>,
        unmodelled: u32,
        /// Live-style pairing: hold every modelled completion (and count them).
        hold_model: bool,
        held: u32,
    }

    impl Executor for Clock {
        type Host = u32;
        const EMULATES_BYTES: bool = true;
        fn schedule(&mut self, at: Nanos, seq: u64, ev: Event) {
            self.pending.push((at, seq, ev));
            self.scheduled.push((at, ev));
        }
        fn submit(
            &mut self,
            now: Nanos,
            io: &Io,
            modelled: bool,
            hosts: &Hosts<u32>,
        ) -> Result<(), String> {
            // The host request's executor data is reachable while it is in flight.
            if let crate::io::Buf::Host { id, .. } = io.buf {
                assert_eq!(hosts.get(id), Some(&(id as u32 + 100)));
            }
            self.submits.push((now, io.id.0, modelled));
            Ok(())
        }
        fn model_done(&mut self, _now: Nanos, _done: &mut Completion) -> bool {
            self.held += self.hold_model as u32;
            !self.hold_model
        }
        fn host_reply(&mut self, r: &HostRequest<'_>, host: u32) -> Result<(), String> {
            self.replies
                .push((r.id, r.arrival, r.finished, r.breakdown, r.status, host));
            Ok(())
        }
        fn mode(&mut self, dev: DeviceId, at: Nanos, slot: usize) -> Result<(), String> {
            self.modes.push((dev, at, slot));
            Ok(())
        }
        fn unmodelled_power(&mut self, _device: DeviceId) {
            self.unmodelled += 1;
        }
    }

    /// Everything a data observer is shown: (what, time, I/O id).
    #[derive(Default)]
    struct Watch {
        seen: Vec<(&'static str, Nanos, u64)>,
        refuse: bool,
    }
    impl DataObserver for Watch {
        fn host_request(&mut self, now: Nanos, io: &Io) {
            self.seen.push(("host_request", now, io.id.0));
        }
        fn device_submit(&mut self, now: Nanos, io: &Io) {
            self.seen.push(("device_submit", now, io.id.0));
        }
        fn device_complete(&mut self, now: Nanos, done: &Completion) {
            self.seen.push(("device_complete", now, done.io.id.0));
        }
        fn host_reply(&mut self, now: Nanos, done: &Completion) -> Result<(), String> {
            self.seen.push(("host_reply", now, done.io.id.0));
            if self.refuse {
                return Err(format!("request {}: wrong data", done.io.id.0));
            }
            Ok(())
        }
    }

    struct Rig<O: DataObserver = NoObserver> {
        k: Kernel<Clock, O>,
        stack: Stack,
        log: Arc<Mutex<Vec<Seen>>>,
    }

    const STANDBY: PowerStateId = 3;
    const IDLE: PowerStateId = 2;

    /// The laptop disk of `power::tests` (active 0, seek 1, idle 2, standby 3; spin-down
    /// 1 s, spin-up 2 s), starting in `initial`.
    fn disk(initial: PowerStateId) -> DeviceRuntime {
        let spec = Arc::new(PowerSpec::from_def(&laptop()).unwrap());
        let info = DeviceInfo::new(0, "disk", 1 << 30, spec);
        DeviceRuntime::new(info, Box::new(Fixed), Some(initial), 0)
    }

    fn rig_with<O: DataObserver>(hold: bool, devs: Vec<Option<DeviceRuntime>>, o: O) -> Rig<O> {
        let log = Arc::new(Mutex::new(Vec::new()));
        let probe = Probe {
            hold,
            log: log.clone(),
        };
        let mut stack = Stack::new(vec![Box::new(probe)]);
        let mut k = Kernel::new(devs, Clock::default(), o);
        k.start(&mut stack, 0).unwrap();
        Rig { k, stack, log }
    }

    fn rig(hold: bool, devs: Vec<Option<DeviceRuntime>>) -> Rig {
        rig_with(hold, devs, NoObserver)
    }

    impl<O: DataObserver> Rig<O> {
        /// A host read of 4 KiB at `now`, tagged `id + 100` by the executor.
        fn request(&mut self, now: Nanos) -> Result<u64, String> {
            let io = self.k.host_io(&Request::new(now, Op::Read, 0, 4096), false);
            let id = io.id.0;
            self.k
                .request(&mut self.stack, now, &io, id as u32 + 100)
                .map(|_| id)
        }

        /// Run the events due by `until` in (time, sequence) order, each at its own time
        /// (as the simulator does).
        fn run_until(&mut self, until: Nanos) -> Result<(), String> {
            while let Some((at, seq, ev)) = self.pop_due(until) {
                self.k.fire(&mut self.stack, at, (at, seq), ev)?;
            }
            Ok(())
        }

        /// Run the events due by `now`, all at `now` (as a late live timer thread does).
        fn run_late(&mut self, now: Nanos) -> Result<(), String> {
            while let Some((at, seq, ev)) = self.pop_due(now) {
                self.k.fire(&mut self.stack, now, (at, seq), ev)?;
            }
            Ok(())
        }

        fn pop_due(&mut self, until: Nanos) -> Option<(Nanos, u64, Event)> {
            let p = &mut self.k.executor_mut().pending;
            let (i, _) = p
                .iter()
                .enumerate()
                .filter(|(_, e)| e.0 <= until)
                .min_by_key(|(_, e)| (e.0, e.1))?;
            Some(p.remove(i))
        }

        fn seen(&self) -> Vec<Seen> {
            self.log.lock().unwrap().clone()
        }

        /// Hand the stack's effects to the kernel as if layer 0 had asked, between events.
        fn arm(&mut self, now: Nanos, timer: TimerId, at: Nanos) {
            self.k.set_timer(now, 0, timer, at);
            self.k.settle(&mut self.stack, now).unwrap();
        }

        fn cancel(&mut self, now: Nanos, timer: TimerId) {
            self.k.cancel_timer(now, 0, timer);
            self.k.settle(&mut self.stack, now).unwrap();
        }

        fn reply(
            &mut self,
            now: Nanos,
            id: u64,
            b: Breakdown,
            status: Status,
        ) -> Result<(), String> {
            let io = Request::new(0, Op::Read, 0, 4096).io(id);
            let done = Completion {
                io,
                status,
                finished: 0,
                breakdown: b,
            };
            self.k.host_reply(now, &done);
            self.k.settle(&mut self.stack, now)
        }
    }

    fn bd(queue_ns: Nanos, power_wait_ns: Nanos, service_ns: Nanos) -> Breakdown {
        Breakdown {
            queue_ns,
            power_wait_ns,
            service_ns,
        }
    }

    /// On a timer, fills scratch buffer 1 with 8 KiB of its own bytes and writes it out.
    struct Writer;
    impl Function for Writer {
        fn name(&self) -> &str {
            "writer"
        }
        fn on_request(&mut self, _now: Nanos, _io: Io, _out: &mut Actions) {}
        fn on_completion(&mut self, _now: Nanos, _done: Completion, _out: &mut Actions) {}
        fn on_timer(&mut self, _now: Nanos, _timer: TimerId, out: &mut Actions) {
            out.fill(crate::io::Buf::Scratch { id: 1, offset: 0 }, &[0xAB; 8192]);
            out.submit(Io::own(1, Op::Write, 0, 0, 8192));
        }
    }

    /// `stack` over one idle disk, its top layer's timer 1 armed for 10 ns (when the
    /// writers above write).
    fn writing_at_10ns(mut stack: Stack) -> Rig {
        let mut k = Kernel::new(vec![Some(disk(IDLE))], Clock::default(), NoObserver);
        k.start(&mut stack, 0).unwrap();
        k.set_timer(0, 0, 1, 10);
        k.settle(&mut stack, 0).unwrap();
        Rig {
            k,
            stack,
            log: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A scratch buffer lives until the last write out of it is back at the layer that
    /// sent it, not until the first device write on it completes: a layer below may send a
    /// write's pieces at different times. (The kernel freed it when the first half landed,
    /// and the live executor then wrote zeros for the second.)
    #[test]
    fn a_scratch_buffer_outlives_the_first_piece_of_a_split_write() {
        let mut r = writing_at_10ns(Stack::new(vec![
            Box::new(Writer),
            Box::new(crate::testing::Halves::default()),
        ]));
        r.run_until(10).unwrap();
        assert_eq!(r.k.scratch.held(), 1, "filled, first half out");
        // The first half lands (5 µs): the second is sent from the same buffer.
        r.run_until(5_010).unwrap();
        assert_eq!(r.k.executor().submits.len(), 2);
        assert_eq!(r.k.scratch.held(), 1, "the second half still to drain it");
        r.run_until(20_000).unwrap();
        assert_eq!(r.k.scratch.held(), 0, "freed when the write is back up");
    }

    /// A function serving a write of its own in a part the stack does not see (PARAID's
    /// arrays inside it): that part sends the write's halves one after the other out of
    /// the same scratch buffer. Held (`Action::Hold`) until the part answers
    /// (`Action::Unhold`), the buffer outlives the first half; not held, the first half's
    /// return frees it while the second is still to be sent.
    struct InnerHalves {
        hold: bool,
    }
    impl Function for InnerHalves {
        fn name(&self) -> &str {
            "inner-halves"
        }
        fn on_request(&mut self, _now: Nanos, _io: Io, _out: &mut Actions) {}
        fn on_timer(&mut self, _now: Nanos, _timer: TimerId, out: &mut Actions) {
            let w = Io::own(1, Op::Write, 0, 0, 8192);
            out.fill(w.buf, &[0xAB; 8192]);
            if self.hold {
                out.hold(w);
            }
            out.submit(Io {
                buf: w.buf,
                ..Io::own(2, Op::Write, 0, 0, 4096)
            });
        }
        fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
            let w = Io::own(1, Op::Write, 0, 0, 8192);
            if done.io.id == crate::io::IoId::own(2) {
                out.submit(Io {
                    buf: w.buf.at(4096),
                    ..Io::own(3, Op::Write, 0, 4096, 4096)
                });
            } else if self.hold {
                out.unhold(w);
            }
        }
    }

    #[test]
    fn a_held_scratch_buffer_outlives_the_pieces_a_function_sends_one_after_another() {
        for hold in [true, false] {
            let mut r = writing_at_10ns(Stack::new(vec![Box::new(InnerHalves { hold })]));
            r.run_until(10).unwrap();
            assert_eq!(r.k.scratch.held(), 1, "filled, first half out");
            r.run_until(5_010).unwrap();
            assert_eq!(r.k.executor().submits.len(), 2);
            assert_eq!(
                r.k.scratch.held(),
                usize::from(hold),
                "after the first half, held: {hold}"
            );
            r.run_until(20_000).unwrap();
            assert_eq!(r.k.scratch.held(), 0, "freed once answered");
        }
    }

    #[test]
    fn an_armed_timer_fires_once_at_its_deadline() {
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.run_until(99).unwrap();
        assert_eq!(r.seen(), vec![]);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(100, 7)]);
        assert!(r.k.timers.is_empty());
    }

    #[test]
    fn rearming_earlier_schedules_a_new_entry_and_the_old_one_is_stale() {
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.arm(10, 7, 50);
        r.run_until(60).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(50, 7)]);
        // Armed again before the stale entry at 100 comes due: that entry is not this
        // arming's (it neither fires nor schedules a second entry for 150).
        r.arm(60, 7, 150);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(50, 7), Seen::Timer(150, 7)]);
        let timer = Event::Timer { layer: 0, timer: 7 };
        assert_eq!(
            r.k.executor().scheduled,
            vec![(100, timer), (50, timer), (150, timer)]
        );
    }

    #[test]
    fn rearming_later_moves_the_entry_when_it_comes_due() {
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.arm(10, 7, 300);
        r.arm(20, 7, 250);
        // No new entry until the first comes due at 100; then one, at the last deadline.
        let timer = Event::Timer { layer: 0, timer: 7 };
        assert_eq!(r.k.executor().scheduled, vec![(100, timer)]);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(250, 7)]);
        assert_eq!(r.k.executor().scheduled, vec![(100, timer), (250, timer)]);
    }

    #[test]
    fn a_cancelled_timer_never_fires_and_its_slot_goes_when_its_entry_does() {
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.cancel(10, 7);
        // Cancelling an unknown timer is nothing.
        r.cancel(10, 8);
        assert_eq!(r.k.timers.len(), 1);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![]);
        assert!(r.k.timers.is_empty());
    }

    #[test]
    fn cancel_then_rearm_fires_at_the_new_deadline_only() {
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.cancel(10, 7);
        r.arm(20, 7, 150);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(150, 7)]);
        // Cancelled, then re-armed earlier than the entry: a new entry, the old is stale.
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.cancel(10, 7);
        r.arm(20, 7, 60);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(60, 7)]);
    }

    #[test]
    fn a_filled_scratch_buffer_is_freed_when_its_write_completes_without_media() {
        // A function's own write out of bytes it filled (a probe's payload) to a device
        // that keeps no bytes (no metadata region): the simulator holds the bytes until the
        // write completes, not for the rest of the run (2 M probe writes held 2 GB).
        let mut r = rig(false, vec![Some(disk(IDLE))]);
        let io = Io::own(9, Op::Write, 0, 4096, 1024);
        Effects::fill(&mut r.k, 0, io.buf, &[0u8; 1024]);
        assert_eq!(r.k.scratch.held(), 1);
        Effects::submit(&mut r.k, 0, &io);
        r.run_until(1_000_000).unwrap();
        assert_eq!(r.k.scratch.held(), 0);
    }

    #[test]
    fn a_deadline_in_the_past_fires_now() {
        let mut r = rig(true, vec![]);
        r.run_until(500).unwrap();
        r.arm(500, 1, 20);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(500, 1)]);
    }

    #[test]
    fn equal_deadlines_fire_in_the_order_they_were_last_armed() {
        let mut r = rig(true, vec![]);
        r.arm(0, 1, 100);
        r.arm(0, 2, 100);
        r.arm(0, 3, 100);
        // Timer 1 re-armed for the same time: it now counts as armed last.
        r.arm(5, 1, 100);
        r.run_until(1_000).unwrap();
        assert_eq!(
            r.seen(),
            vec![
                Seen::Timer(100, 2),
                Seen::Timer(100, 3),
                Seen::Timer(100, 1)
            ]
        );
        // Moved entries keep the order of their arming too: 4 is armed (for 300, by moving
        // its entry at 200) before 5 is armed for 300.
        let mut r = rig(true, vec![]);
        r.arm(0, 4, 200);
        r.arm(10, 4, 300);
        r.arm(20, 5, 300);
        r.run_until(1_000).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(300, 4), Seen::Timer(300, 5)]);
    }

    #[test]
    fn a_late_timer_fires_with_the_time_it_runs() {
        let mut r = rig(true, vec![]);
        r.arm(0, 7, 100);
        r.run_late(130).unwrap();
        assert_eq!(r.seen(), vec![Seen::Timer(130, 7)]);
    }

    #[test]
    fn on_power_fires_with_the_time_the_change_is_handled_and_the_timeline_gets_its_own() {
        let mut r = rig(true, vec![Some(disk(IDLE))]);
        r.k.set_power(1_000, 0, STANDBY);
        r.k.settle(&mut r.stack, 1_000).unwrap();
        // Spin-down begins: the timeline hears of the transition (slot 4 + 0), the layers
        // hear where it goes (`on_transition`, not `on_power`: no stable state yet), and
        // its end is scheduled 1 s later.
        assert_eq!(r.k.executor().modes, vec![(0, 1_000, 4)]);
        assert_eq!(
            r.k.executor().scheduled,
            vec![(1_000_001_000, Event::Transition { dev: 0 })]
        );
        assert_eq!(r.seen(), vec![Seen::Transition(1_000, 0, STANDBY)]);
        r.log.lock().unwrap().clear();
        // Handled 500 ns late (a live timer thread): the timeline and ledger take the
        // scheduled end, the layers the time the kernel learned of it.
        r.run_late(1_000_001_500).unwrap();
        assert_eq!(r.k.executor().modes[1], (0, 1_000_001_000, 3));
        assert_eq!(r.seen(), vec![Seen::Power(1_000_001_500, 0, STANDBY)]);
    }

    #[test]
    fn on_power_in_time_carries_the_change_time_and_follows_the_device_work() {
        let mut r = rig(false, vec![Some(disk(STANDBY))]);
        // A request finds the disk in standby: spin-up (2 s) begins at 100.
        let id = r.request(100).unwrap();
        assert_eq!(r.k.executor().modes, vec![(0, 100, 5)]);
        r.run_until(u64::MAX).unwrap();
        // Idle at 2 s + 100; the I/O starts then and ends 5 µs later.
        let up = 2_000_000_100;
        assert_eq!(r.k.executor().modes[1], (0, up, IDLE as usize));
        assert_eq!(
            r.seen(),
            vec![Seen::Transition(100, 0, IDLE), Seen::Power(up, 0, IDLE)]
        );
        assert_eq!(
            r.k.executor().scheduled,
            vec![
                (up, Event::Transition { dev: 0 }),
                (up + 5_000, Event::Service { dev: 0, token: 0 })
            ]
        );
        assert_eq!(
            r.k.executor().replies,
            vec![(
                id,
                100,
                up + 5_000,
                bd(0, 2_000_000_000, 5_000),
                Status::Ok,
                100
            )]
        );
        assert_eq!(r.k.power_wait().max(), 2_000_000_000);
    }

    #[test]
    fn device_events_become_scheduled_completions_in_order() {
        let mut r = rig_with(false, vec![Some(disk(IDLE))], Watch::default());
        let a = r.request(100).unwrap();
        let b = r.request(200).unwrap();
        assert_eq!(r.k.executor().submits, vec![(100, a, true), (200, b, true)]);
        // The first I/O is in service until 5 100; the second queues behind it.
        assert_eq!(
            r.k.executor().scheduled,
            vec![(5_100, Event::Service { dev: 0, token: 0 })]
        );
        r.run_until(u64::MAX).unwrap();
        assert_eq!(
            r.k.executor().scheduled[1],
            (10_100, Event::Service { dev: 0, token: 0 })
        );
        assert_eq!(
            r.k.executor().replies,
            vec![
                (a, 100, 5_100, bd(0, 0, 5_000), Status::Ok, 100),
                (b, 200, 10_100, bd(4_900, 0, 5_000), Status::Ok, 101),
            ]
        );
        assert_eq!(r.k.latency().count(), 2);
        assert_eq!(r.k.latency().max(), 9_900);
        assert_eq!(r.k.inflight(), 0);
        assert_eq!(r.k.last_completion(), 10_100);
        // The observer saw every movement, in order.
        let seen = &r.k.observer.seen;
        assert_eq!(
            seen,
            &vec![
                ("host_request", 100, a),
                ("device_submit", 100, a),
                ("host_request", 200, b),
                ("device_submit", 200, b),
                ("device_complete", 5_100, a),
                ("host_reply", 5_100, a),
                ("device_complete", 10_100, b),
                ("host_reply", 10_100, b),
            ]
        );
    }

    #[test]
    fn a_held_model_completion_reaches_the_stack_through_device_completion() {
        let mut r = rig(false, vec![Some(disk(IDLE))]);
        r.k.executor_mut().hold_model = true;
        let id = r.request(0).unwrap();
        r.run_until(u64::MAX).unwrap();
        assert_eq!(r.k.executor().held, 1);
        assert_eq!(r.k.executor().replies, vec![]);
        // The real half finishes at 7 000: the executor hands the pair over.
        let io = Request::new(0, Op::Read, 0, 4096).io(id);
        let done = Completion::ok(io, 7_000, bd(0, 0, 5_000));
        r.k.device_completion(&mut r.stack, 7_000, done).unwrap();
        assert_eq!(
            r.k.executor().replies,
            vec![(id, 0, 7_000, bd(2_000, 0, 5_000), Status::Ok, 100)]
        );
    }

    #[test]
    fn a_device_without_a_model_goes_straight_to_the_executor() {
        let mut r = rig(false, vec![None]);
        let id = r.request(10).unwrap();
        assert_eq!(r.k.executor().submits, vec![(10, id, false)]);
        assert!(r.k.executor().scheduled.is_empty());
        r.k.set_power(10, 0, 3);
        r.k.settle(&mut r.stack, 10).unwrap();
        assert_eq!(r.k.executor().unmodelled, 1);
        r.k.set_power(10, 1, 3);
        let e = r.k.settle(&mut r.stack, 10).unwrap_err();
        assert_eq!(
            e,
            "a function set the power of device 1, which does not exist"
        );
    }

    #[test]
    fn an_early_reply_is_charged_to_service_not_to_negative_queueing() {
        let mut r = rig(true, vec![]);
        let a = r.request(1_000).unwrap();
        let b = r.request(1_000).unwrap();
        let c = r.request(1_000).unwrap();
        // Latency 50 each. a: the device work it copied took 135 > 50: service gets what
        // power-wait leaves. b: power wait alone exceeds the latency. c: 20 unaccounted ns
        // are queueing.
        r.reply(1_050, a, bd(5, 30, 100), Status::Ok).unwrap();
        r.reply(1_050, b, bd(0, 80, 0), Status::IoError).unwrap();
        r.reply(1_050, c, bd(0, 10, 20), Status::Ok).unwrap();
        assert_eq!(
            r.k.executor().replies,
            vec![
                (a, 1_000, 1_050, bd(0, 30, 20), Status::Ok, 100),
                (b, 1_000, 1_050, bd(0, 50, 0), Status::IoError, 101),
                (c, 1_000, 1_050, bd(20, 10, 20), Status::Ok, 102),
            ]
        );
        assert_eq!(r.k.completed(), (3, 1));
        assert_eq!(r.k.power_wait().max(), 50);
        assert_eq!(r.k.latency().mean(), 50.0);
    }

    #[test]
    fn a_second_reply_and_a_reply_to_nothing_are_errors() {
        let mut r = rig(true, vec![]);
        let a = r.request(0).unwrap();
        let b = r.request(0).unwrap();
        // Out of order: b first; a's entry keeps the table's base.
        r.reply(10, b, bd(0, 0, 0), Status::Ok).unwrap();
        assert_eq!(r.k.inflight(), 1);
        let e = r.reply(20, b, bd(0, 0, 0), Status::Ok).unwrap_err();
        assert_eq!(
            e,
            "a function replied to host request 1 twice, or to one that does not exist"
        );
        r.reply(30, a, bd(0, 0, 0), Status::Ok).unwrap();
        assert_eq!(r.k.inflight(), 0);
        let e = r.reply(40, a, bd(0, 0, 0), Status::Ok).unwrap_err();
        assert!(e.contains("host request 0 twice"), "{e}");
        let e = r.reply(40, 9, bd(0, 0, 0), Status::Ok).unwrap_err();
        assert!(e.contains("host request 9 twice"), "{e}");
        // Only the two real replies were accounted.
        assert_eq!(r.k.completed(), (2, 0));
        assert_eq!(r.k.executor().replies.len(), 2);
    }

    #[test]
    fn host_ids_must_come_in_order() {
        let mut r = rig(true, vec![]);
        let io = Request::new(0, Op::Read, 0, 4096).io(3);
        let e = r.k.request(&mut r.stack, 0, &io, 0).unwrap_err();
        assert_eq!(e, "host request id 3 out of order: the next is 0");
        assert_eq!(r.k.inflight(), 0);
    }

    #[test]
    fn an_observer_error_stops_the_call_with_its_message() {
        let w = Watch {
            refuse: true,
            ..Watch::default()
        };
        let mut r = rig_with(false, vec![Some(disk(IDLE))], w);
        r.request(0).unwrap();
        let e = r.run_until(u64::MAX).unwrap_err();
        assert_eq!(e, "request 0: wrong data");
        // The reply itself was still accounted and delivered.
        assert_eq!(r.k.executor().replies.len(), 1);
    }
}
