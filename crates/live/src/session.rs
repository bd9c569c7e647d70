//! The live executor: the simulator's [`Stack`] and [`DeviceRuntime`]s driven by the wall
//! clock, with what the stack asks carried out for real.
//!
//! The timer table, device-event routing and host accounting are the [`Kernel`]'s, shared
//! with the simulator; this module is the kernel's [`Executor`]: the wall clock and the real
//! data path.
//!
//! * A device I/O → a positional read/write/fdatasync/punch-hole on component device
//!   `io.dev`, run by a worker thread (or inline by the thread that produced it, which saves a
//!   thread hand-off on the last I/O of a batch), then `Kernel::device_completion`.
//! * A host reply → the NBD reply, sent through the connection's [`ReplySink`].
//! * Kernel events (layer timers, emulated service and transition ends) → a deadline heap
//!   served by one timer thread.
//! * A power command → the emulated device's `DeviceRuntime::set_power`.
//!
//! With device emulation a component device carries a `DeviceRuntime`: the real I/O and the
//! model's service run side by side and the completion is released when *both* are done, so
//! a modelled spin-up really delays the guest while the bytes still go to the real medium.
//!
//! All mutable state sits in one [`Core`] behind a mutex: the stack and the device runtimes
//! are single-threaded state machines by design, and the work done under the lock is a few
//! hundred nanoseconds per event; system calls and socket writes happen outside it.

use crate::backend::{AlignedBuf, Backend};
use crate::capture::CaptureSink;
use crate::proto::{self, CmdKind, Command, ExportInfo};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wattio_core::device::DeviceCounters;
use wattio_core::integrity::{Checker, IntegrityCounters};
use wattio_core::kernel::{Event, Executor, HostRequest, Hosts, Kernel, Unload};
use wattio_core::stats::LatencyHistogram;
use wattio_core::{
    Breakdown, Buf, Completion, DeviceId, DeviceRuntime, Io, IoId, LedgerRow, Nanos, Op, Request,
    Stack, Status,
};

/// Where a host request's reply goes (an NBD connection; a channel in tests).
pub trait ReplySink: Send + Sync {
    /// Send one complete reply message. Errors (peer gone) are the sink's to swallow: the
    /// request has been carried out whether or not the client hears of it.
    fn send(&self, bytes: &[u8]);
    /// Send one reply made of a header and its payload (a read's data), without the caller
    /// first copying them into one buffer.
    fn send_parts(&self, head: &[u8], data: &[u8]) {
        let mut b = Vec::with_capacity(head.len() + data.len());
        b.extend_from_slice(head);
        b.extend_from_slice(data);
        self.send(&b);
    }
    /// Were structured replies negotiated?
    fn structured(&self) -> bool;
    /// The request has been answered; it held `payload` bytes ([`Command::held_bytes`]).
    /// Called once per submitted command, after its reply was sent: a server that admits
    /// commands against a byte budget gets the bytes back here.
    fn released(&self, _payload: u64) {}
}

/// One NBD export: what clients see, and the host volume (`Io.dev` at the top of the
/// stack) its requests carry.
#[derive(Clone, Debug)]
pub struct ExportSpec {
    pub info: ExportInfo,
    pub host_dev: u16,
}

/// A component device: the real medium, optionally with its emulated model.
pub struct DeviceSetup {
    pub backend: Backend,
    pub runtime: Option<DeviceRuntime>,
}

/// The default reader poll: about the cost of the wake-up it saves on a VM.
pub const DEFAULT_POLL: std::time::Duration = std::time::Duration::from_micros(50);

pub struct SessionOptions {
    /// I/O worker threads (besides the threads that run I/O inline).
    pub workers: usize,
    /// How long a connection's reader polls its socket before it blocks (0: block at
    /// once). See `server::Stream::read_polling`.
    pub poll: std::time::Duration,
    pub capture: Option<Box<dyn CaptureSink>>,
    /// What the run is, for its summary (the session itself does not use it).
    pub meta: RunMeta,
    /// Check the data with the integrity checker, in blocks of this many bytes (`[run]
    /// check_data`): the first read that breaks the rule is the session's fault.
    pub check_data: Option<u32>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            workers: 4,
            poll: DEFAULT_POLL,
            capture: None,
            meta: RunMeta::default(),
            check_data: None,
        }
    }
}

/// The identity a run's `summary.json` carries: `run.name`, `run.seed` and the model
/// (catalogue entry, `inline`, or `pass-through` for a device without one) per device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunMeta {
    pub name: Option<String>,
    pub seed: u64,
    pub models: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostKind {
    Read,
    Write,
    Flush,
    Trim,
    Zero { may_trim: bool },
}

struct HostReq {
    sink: Arc<dyn ReplySink>,
    cookie: u64,
    kind: HostKind,
    offset: u64,
    data: Arc<Mutex<AlignedBuf>>,
}

enum DataRef {
    None,
    Host {
        buf: Arc<Mutex<AlignedBuf>>,
        off: usize,
        zero: Option<bool>,
    },
    Scratch {
        buf: Arc<Mutex<AlignedBuf>>,
        off: usize,
    },
}

pub(crate) struct Job {
    io: Io,
    data: DataRef,
    emulated: bool,
}

/// An emulated device's I/O: the real half's status, or the model's completion, whichever
/// finished first.
#[derive(Default)]
struct EmuPair {
    real: Option<Status>,
    model: Option<Completion>,
}

/// Counters for the status line and the summary.
#[derive(Clone, Debug, Default)]
pub struct LiveStats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub power_commands_without_model: u64,
}

struct Core {
    stack: Stack,
    kernel: Kernel<Live, Option<Checker>>,
    exports: Vec<ExportSpec>,
    capture: Option<Box<dyn CaptureSink>>,
    capture_error: Option<String>,
    /// Per-device I/O counters of component devices without a model (an emulated device's
    /// runtime keeps its own).
    real: Vec<DeviceCounters>,
    /// The first error the kernel reported (a function replied twice, addressed a device
    /// that does not exist, …): the session carries on, and its end reports it.
    fault: Option<String>,
}

/// The live executor's side of the [`Kernel`]: wall-clock timers, the real I/O a device
/// submission becomes, and the NBD replies.
struct Live {
    /// Kernel events by (deadline, sequence), served by the timer thread (and by any thread
    /// that finds them due).
    timers: BinaryHeap<Reverse<(Nanos, u64, Event)>>,
    /// The deadline the timer thread sleeps until (`u64::MAX`: no deadline).
    sleep_until: Nanos,
    timer_cv: Arc<Condvar>,
    emu: HashMap<(DeviceId, IoId), EmuPair>,
    scratch: HashMap<u64, Arc<Mutex<AlignedBuf>>>,
    /// Latency since the last status line.
    window: LatencyHistogram,
    /// Per-kind counters (`requests` and `errors` are the kernel's, filled in on reading).
    stats: LiveStats,
    /// What the kernel's calls produced for the threads to carry out, outside the lock.
    out: Outbox,
}

pub(crate) struct Shared {
    core: Mutex<Core>,
    timer_cv: Arc<Condvar>,
    backends: Vec<Backend>,
    queue: Mutex<VecDeque<Job>>,
    queue_cv: Condvar,
    idle_cv: Condvar,
    start: Instant,
    stop: AtomicBool,
    inflight: AtomicU64,
    /// Recent mean time of one real I/O (ns, a moving average): decides whether a batch
    /// fans out to workers.
    job_ns: AtomicU64,
}

/// Below this mean I/O time (page-cache hits) a batch runs on the thread that received it:
/// waking a worker costs more than the I/O it would take over.
const FANOUT_NS: u64 = 30_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another thread must not take the data plane down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running live session.
pub struct Session {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    meta: RunMeta,
    poll: std::time::Duration,
}

/// A device's state for the status line and summary.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceStatus {
    pub name: String,
    pub emulated: bool,
    /// Current power state name (or the transition under way).
    pub state: String,
    pub energy_j: f64,
    pub spin_ups: u64,
}

#[derive(Clone, Debug)]
pub struct Snapshot {
    pub now: Nanos,
    pub stats: LiveStats,
    pub inflight: usize,
    pub p50_ns: Nanos,
    pub p99_ns: Nanos,
    pub window_ops: u64,
    pub window_p50_ns: Nanos,
    pub devices: Vec<DeviceStatus>,
    /// The current gear of each layer that has one (PARAID's `gear` counter): (layer, gear).
    pub gears: Vec<(String, u64)>,
    /// Functions' scratch buffers held (copies under way, metadata being written): a bound
    /// to watch, since a buffer nobody drains or releases is memory lost.
    pub scratch_buffers: usize,
}

/// What a session leaves behind: the live counters, and the stack and device runtimes as
/// they ended, from which `report` builds the same `summary.json` a simulated run writes.
pub struct Summary {
    pub duration_ns: Nanos,
    pub stats: LiveStats,
    pub latency: LatencyHistogram,
    /// Time each host request waited for a device to reach a ready power state.
    pub power_wait: LatencyHistogram,
    pub devices: Vec<DeviceStatus>,
    pub ledgers: Vec<(String, Vec<LedgerRow>)>,
    pub function_counters: Vec<(String, Vec<(String, f64)>)>,
    pub capture_error: Option<String>,
    pub meta: RunMeta,
    /// The stack after the last event (its layers' counters are final).
    pub stack: Stack,
    /// Per component device: its emulated runtime, closed at `duration_ns`.
    pub runtimes: Vec<Option<DeviceRuntime>>,
    /// Per component device: I/O counters when it has no runtime (zero otherwise).
    pub real: Vec<DeviceCounters>,
    /// Scratch buffers alive at the end with no I/O out on them: what the functions hold.
    pub scratch_held: usize,
    /// At most how many of them the functions say they keep ([`Stack::scratch_claimed`]):
    /// more held than claimed is a leak (checked with `check_data`).
    pub scratch_claimed: usize,
    /// The clean unload at shutdown: when it started and when every layer was seen done
    /// (`None` if it did not finish, or the requests in flight never drained).
    pub unload: Option<Unload>,
    /// The data checker's block and counts (`SessionOptions::check_data`).
    pub data_check: Option<(u32, IntegrityCounters)>,
}

impl std::fmt::Debug for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summary")
            .field("duration_ns", &self.duration_ns)
            .field("stats", &self.stats)
            .field("devices", &self.devices)
            .field("capture_error", &self.capture_error)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Start a session over `devices` (index = `DeviceId`), serving `exports`. The stack
    /// must already be attached to the devices' [`wattio_core::DeviceInfo`]s.
    pub fn start(
        stack: Stack,
        devices: Vec<DeviceSetup>,
        exports: Vec<ExportSpec>,
        opts: SessionOptions,
    ) -> Result<Session, String> {
        for e in &exports {
            if stack.is_empty() {
                let d = devices.get(e.host_dev as usize).ok_or_else(|| {
                    format!(
                        "export `{}`: host volume {} has no component device (pass-through maps volume i to device i)",
                        e.info.name, e.host_dev
                    )
                })?;
                if e.info.size > d.backend.size() {
                    return Err(format!(
                        "export `{}`: size {} exceeds component device `{}` ({} bytes)",
                        e.info.name,
                        e.info.size,
                        d.backend.name,
                        d.backend.size()
                    ));
                }
            }
        }
        let (backends, runtimes): (Vec<Backend>, Vec<Option<DeviceRuntime>>) =
            devices.into_iter().map(|d| (d.backend, d.runtime)).unzip();
        let real = vec![DeviceCounters::default(); backends.len()];
        let meta = opts.meta;
        let checker = opts.check_data.map(Checker::for_run).transpose()?;
        let timer_cv = Arc::new(Condvar::new());
        let live = Live {
            timers: BinaryHeap::new(),
            sleep_until: u64::MAX,
            timer_cv: timer_cv.clone(),
            emu: HashMap::new(),
            scratch: HashMap::new(),
            window: LatencyHistogram::new(),
            stats: LiveStats::default(),
            out: Outbox::default(),
        };
        let core = Core {
            stack,
            kernel: Kernel::new(runtimes, live, checker),
            exports,
            capture: opts.capture,
            capture_error: None,
            real,
            fault: None,
        };
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            timer_cv,
            backends,
            queue: Mutex::new(VecDeque::new()),
            queue_cv: Condvar::new(),
            idle_cv: Condvar::new(),
            start: Instant::now(),
            stop: AtomicBool::new(false),
            inflight: AtomicU64::new(0),
            job_ns: AtomicU64::new(FANOUT_NS),
        });
        let mut threads = Vec::new();
        for i in 0..opts.workers.max(1) {
            let s = shared.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("wattio-io-{i}"))
                    .spawn(move || s.worker())
                    .map_err(|e| format!("cannot start I/O worker: {e}"))?,
            );
        }
        let s = shared.clone();
        threads.push(
            std::thread::Builder::new()
                .name("wattio-timer".into())
                .spawn(move || s.timer_thread())
                .map_err(|e| format!("cannot start timer thread: {e}"))?,
        );
        // Functions may arm timers (or power commands) before the first request.
        let out = {
            let mut g = lock(&shared.core);
            let c = &mut *g;
            let r = c.kernel.start(&mut c.stack, 0);
            c.check(r);
            c.outbox()
        };
        shared.dispatch(out, false);
        Ok(Session {
            shared,
            threads,
            meta,
            poll: opts.poll,
        })
    }

    /// The first fault a function or the executor reported, if any (the session goes on;
    /// [`Session::finish`] reports it).
    pub fn fault(&self) -> Option<String> {
        lock(&self.shared.core).fault.clone()
    }

    /// How long a connection's reader polls before it blocks.
    pub fn poll(&self) -> std::time::Duration {
        self.poll
    }

    pub fn exports(&self) -> Vec<ExportInfo> {
        lock(&self.shared.core)
            .exports
            .iter()
            .map(|e| e.info.clone())
            .collect()
    }

    /// Nanoseconds since the session started.
    pub fn now(&self) -> Nanos {
        self.shared.now()
    }

    /// Carry out one validated NBD command from a client of export `export`.
    /// `inline`: run the last resulting I/O on this thread (the caller has nothing else
    /// queued to parse).
    pub fn submit(
        &self,
        sink: Arc<dyn ReplySink>,
        stream: u32,
        export: usize,
        cmd: Command,
        inline: bool,
    ) {
        self.shared.submit(sink, stream, export, cmd, inline)
    }

    /// Carry out a batch of commands a client pipelined (one read from its socket), taking
    /// the executor's lock once for all of them. The calling thread then runs the batch's
    /// I/O itself, helped by workers only if it falls behind: with the page cache, a pread
    /// costs less than waking another thread (2-core machines feel this most).
    pub fn submit_batch(
        &self,
        sink: &Arc<dyn ReplySink>,
        stream: u32,
        export: usize,
        cmds: &mut Vec<Command>,
    ) {
        self.shared.submit_batch(sink, stream, export, cmds)
    }

    /// Host requests not yet answered.
    pub fn inflight(&self) -> u64 {
        self.shared.inflight.load(Ordering::Acquire)
    }

    /// Wait until no host request is in flight (or `timeout` passes); true if drained.
    pub fn drain(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = lock(&self.shared.core);
        while !g.kernel.idle() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = match self.shared.idle_cv.wait_timeout(g, deadline - now) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        true
    }

    pub fn snapshot(&self) -> Snapshot {
        let now = self.now();
        let mut g = lock(&self.shared.core);
        let window =
            std::mem::replace(&mut g.kernel.executor_mut().window, LatencyHistogram::new());
        let window_ops = window.count();
        let window_p50_ns = if window_ops > 0 {
            window.quantile(0.5)
        } else {
            0
        };
        let hist = g.kernel.latency();
        Snapshot {
            now,
            stats: g.stats(),
            inflight: g.kernel.inflight(),
            p50_ns: if hist.count() > 0 {
                hist.quantile(0.5)
            } else {
                0
            },
            p99_ns: if hist.count() > 0 {
                hist.quantile(0.99)
            } else {
                0
            },
            window_ops,
            window_p50_ns,
            devices: g.device_status(&self.shared.backends, now),
            gears: g
                .stack
                .layers()
                .iter()
                .filter_map(|l| {
                    let gear = l.counters().into_iter().find(|(n, _)| n == "gear")?;
                    Some((l.name().to_string(), gear.1 as u64))
                })
                .collect(),
            scratch_buffers: g.kernel.executor().scratch.len(),
        }
    }

    /// Counter `name` of the first layer whose name starts with `layer`, now (`None`: no
    /// such layer or counter): what a function has done so far, while it serves.
    pub fn counter(&self, layer: &str, name: &str) -> Option<f64> {
        let g = lock(&self.shared.core);
        let l = g
            .stack
            .layers()
            .iter()
            .find(|l| l.name().starts_with(layer))?;
        l.counters()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|c| c.1)
    }

    /// A clean unload: the layers' `on_stop` top down (a write-back cache writes back), each
    /// once the session's threads have carried out the device I/O of those above
    /// ([`Kernel::stop`]), until every layer is done or `timeout` passes (an error then: the
    /// unload is not complete). Returns when it started and when it was seen done, on the
    /// session's clock (the end to the 2 ms poll below).
    fn unload(&self, timeout: Duration) -> Result<Unload, String> {
        let deadline = Instant::now() + timeout;
        let started = self.shared.now();
        loop {
            let (done, out) = {
                let mut g = lock(&self.shared.core);
                let now = self.shared.now();
                let c = &mut *g;
                let r = c.kernel.stop(&mut c.stack, now);
                // An error is the session's fault (reported at the end): nothing more of
                // the unload can be trusted to finish.
                let done = r.as_ref().map_or(true, |&d| d);
                c.check(r.map(|_| ()));
                let outbox = g.outbox();
                let out = g.kernel.device_io_out();
                drop(g);
                self.shared.dispatch(outbox, false);
                (done, out)
            };
            if done {
                return Ok(Unload {
                    started,
                    done: self.shared.now(),
                });
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "clean unload: {out} device I/O(s) of the functions still out after {timeout:?}"
                ));
            }
            // Completions come from the worker and timer threads; no condition variable
            // tells of the last one, and an unload happens once a session.
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Stop: wait for in-flight requests (up to `drain_timeout`), unload the stack cleanly
    /// (up to `drain_timeout` again), make every component device durable, close the
    /// ledgers and the capture, and report.
    pub fn finish(mut self, drain_timeout: Duration) -> Result<Summary, String> {
        let drained = self.drain(drain_timeout);
        let mut errors = Vec::new();
        if !drained {
            errors.push(format!(
                "{} request(s) still in flight after {:?}",
                self.inflight(),
                drain_timeout
            ));
        }
        let mut unload = None;
        if drained {
            match self.unload(drain_timeout) {
                Ok(span) => unload = Some(span),
                Err(e) => errors.push(e),
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        self.shared.queue_cv.notify_all();
        self.shared.timer_cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The session ends when its threads have stopped, not after the flush below: a slow
        // host disk must not lengthen the run (the ledgers would charge the wait to the
        // devices' last state, and a replay would fire timers the session never reached).
        let now = self.now();
        for b in &self.shared.backends {
            if let Err(e) = b.flush() {
                errors.push(format!("component device `{}`: flush failed: {e}", b.name));
            }
        }
        let mut g = lock(&self.shared.core);
        if let Some(f) = g.fault.take() {
            errors.push(format!("a function misbehaved: {f}"));
        }
        let mut capture_error = g.capture_error.take();
        if let Some(c) = g.capture.take() {
            if let Err(e) = c.finish() {
                capture_error = Some(e);
            }
        }
        let devices = g.device_status(&self.shared.backends, now);
        let ledgers = g
            .kernel
            .devices()
            .iter()
            .zip(&self.shared.backends)
            .filter_map(|(r, b)| r.as_ref().map(|r| (b.name.clone(), r.energy_rows(now))))
            .collect();
        let function_counters = g
            .stack
            .layers()
            .iter()
            .map(|l| (l.name().to_string(), l.counters()))
            .collect();
        let scratch_held = g.kernel.scratch_held();
        let scratch_claimed = g.stack.scratch_claimed();
        if g.kernel.observer().is_some() && drained {
            // Checking a function's bytes includes the buffers it moves them in.
            if let Err(e) = g.stack.scratch_leak(scratch_held) {
                errors.push(format!("data check: {e}"));
            }
        }
        let stack = std::mem::replace(&mut g.stack, Stack::new(Vec::new()));
        let runtimes = g.kernel.take_devices();
        let data_check = g
            .kernel
            .observer()
            .as_ref()
            .map(|c| (c.block_size(), c.counters()));
        let summary = Summary {
            duration_ns: now,
            stats: g.stats(),
            latency: g.kernel.latency().clone(),
            power_wait: g.kernel.power_wait().clone(),
            devices,
            ledgers,
            function_counters,
            capture_error,
            meta: std::mem::take(&mut self.meta),
            stack,
            runtimes,
            real: std::mem::take(&mut g.real),
            scratch_held,
            scratch_claimed,
            unload,
            data_check,
        };
        if errors.is_empty() {
            Ok(summary)
        } else {
            Err(errors.join("; "))
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.queue_cv.notify_all();
        self.shared.timer_cv.notify_all();
    }
}

fn status_errno(s: Status) -> u32 {
    match s {
        Status::Ok => 0,
        Status::IoError => proto::EIO,
        Status::Invalid => proto::EINVAL,
        Status::NoSpace => proto::ENOSPC,
        Status::NotSupported => proto::ENOTSUP,
    }
}

fn io_status(e: &io::Error) -> Status {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG) => Status::NoSpace,
        Some(libc::EINVAL) => Status::Invalid,
        Some(libc::EOPNOTSUPP) => Status::NotSupported,
        _ => Status::IoError,
    }
}

fn worse(a: Status, b: Status) -> Status {
    if a != Status::Ok {
        a
    } else {
        b
    }
}

#[derive(Default)]
struct Outbox {
    jobs: Vec<Job>,
    replies: Vec<(HostReq, Status, u32)>,
}

impl Shared {
    fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }

    fn submit(
        self: &Arc<Self>,
        sink: Arc<dyn ReplySink>,
        stream: u32,
        export: usize,
        cmd: Command,
        inline: bool,
    ) {
        let out = {
            let mut g = lock(&self.core);
            self.submit_locked(&mut g, sink, stream, export, cmd);
            g.outbox()
        };
        self.dispatch(out, inline);
    }

    fn submit_batch(
        self: &Arc<Self>,
        sink: &Arc<dyn ReplySink>,
        stream: u32,
        export: usize,
        cmds: &mut Vec<Command>,
    ) {
        let out = {
            let mut g = lock(&self.core);
            for cmd in cmds.drain(..) {
                self.submit_locked(&mut g, sink.clone(), stream, export, cmd);
            }
            g.outbox()
        };
        self.dispatch(out, true);
    }

    fn submit_locked(
        self: &Arc<Self>,
        g: &mut MutexGuard<'_, Core>,
        sink: Arc<dyn ReplySink>,
        stream: u32,
        export: usize,
        cmd: Command,
    ) {
        let held = cmd.held_bytes();
        let (kind, op, data) = match cmd.kind {
            CmdKind::Read => (
                HostKind::Read,
                Op::Read,
                AlignedBuf::zeroed(cmd.len as usize),
            ),
            CmdKind::Write(d) => (HostKind::Write, Op::Write, d),
            CmdKind::Flush => (HostKind::Flush, Op::Flush, AlignedBuf::zeroed(0)),
            CmdKind::Trim => (HostKind::Trim, Op::Discard, AlignedBuf::zeroed(0)),
            CmdKind::WriteZeroes { may_trim } => (
                HostKind::Zero { may_trim },
                Op::Write,
                AlignedBuf::zeroed(0),
            ),
        };
        let now = self.now();
        let Some(host_dev) = g.exports.get(export).map(|e| e.host_dev) else {
            let mut b = Vec::new();
            proto::encode_error_reply(
                &mut b,
                sink.structured(),
                cmd.cookie,
                proto::EINVAL,
                "no such export",
            );
            sink.send(&b);
            sink.released(held);
            return;
        };
        self.inflight.fetch_add(1, Ordering::AcqRel);
        let mut r = Request::new(now, op, cmd.offset, cmd.len);
        r.dev = host_dev;
        r.stream = stream;
        if let Some(c) = g.capture.as_mut() {
            if let Err(e) = c.record(&r) {
                g.capture_error.get_or_insert(e);
                g.capture = None;
            }
        }
        let c = &mut **g;
        let io = c.kernel.host_io(&r, cmd.fua);
        let host = HostReq {
            sink,
            cookie: cmd.cookie,
            kind,
            offset: cmd.offset,
            data: Arc::new(Mutex::new(data)),
        };
        let r = c.kernel.request(&mut c.stack, now, &io, host);
        c.check(r);
    }

    /// Send replies, queue jobs; run the last job on this thread if `inline`.
    fn dispatch(self: &Arc<Self>, out: Outbox, inline: bool) {
        let Outbox { mut jobs, replies } = out;
        self.send_replies(replies);
        let mine = if inline { jobs.pop() } else { None };
        let queued = jobs.len();
        if queued > 0 {
            lock(&self.queue).extend(jobs);
            // Wake one worker; a worker that finds more queued wakes the next (a cascade),
            // so slow I/O fans out. When I/O is fast and this thread will run the batch
            // itself, wake no one.
            if mine.is_none() || self.job_ns.load(Ordering::Relaxed) >= FANOUT_NS {
                self.queue_cv.notify_one();
            }
        }
        if let Some(j) = mine {
            self.run_chain(j);
            // Then help with the rest of this batch rather than wait for it.
            for _ in 0..queued {
                let Some(j) = lock(&self.queue).pop_front() else {
                    break;
                };
                self.run_chain(j);
            }
        }
    }

    fn send_replies(&self, replies: Vec<(HostReq, Status, u32)>) {
        for (h, status, len) in replies {
            let held = match h.kind {
                HostKind::Read | HostKind::Write => len as u64,
                _ => 0,
            };
            let structured = h.sink.structured();
            let errno = status_errno(status);
            let mut b;
            if errno != 0 {
                b = Vec::with_capacity(40);
                proto::encode_error_reply(&mut b, structured, h.cookie, errno, "I/O failed");
            } else if h.kind == HostKind::Read {
                let data = lock(&h.data);
                let n = (len as usize).min(data.len());
                let mut head = Vec::with_capacity(32);
                if structured {
                    proto::encode_read_chunk_header(&mut head, h.cookie, h.offset, n as u32);
                } else {
                    proto::encode_simple_reply(&mut head, h.cookie, 0);
                }
                h.sink.send_parts(&head, &data.as_slice()[..n]);
                drop(data);
                h.sink.released(held);
                if self.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.idle_cv.notify_all();
                }
                continue;
            } else {
                b = Vec::with_capacity(16);
                proto::encode_simple_reply(&mut b, h.cookie, 0);
            }
            h.sink.send(&b);
            h.sink.released(held);
            if self.inflight.fetch_sub(1, Ordering::AcqRel) == 1 {
                self.idle_cv.notify_all();
            }
        }
    }

    fn worker(self: Arc<Self>) {
        loop {
            let job = {
                let mut q = lock(&self.queue);
                loop {
                    if let Some(j) = q.pop_front() {
                        if !q.is_empty() {
                            self.queue_cv.notify_one();
                        }
                        break Some(j);
                    }
                    if self.stop.load(Ordering::Acquire) {
                        break None;
                    }
                    q = match self.queue_cv.wait(q) {
                        Ok(g) => g,
                        Err(p) => p.into_inner(),
                    };
                }
            };
            match job {
                Some(j) => self.run_chain(j),
                None => return,
            }
        }
    }

    /// Execute a job, complete it, and keep executing the last job its completion spawns.
    fn run_chain(self: &Arc<Self>, mut job: Job) {
        loop {
            let t0 = self.now();
            let status = self.execute(&job);
            let out = {
                let mut g = lock(&self.core);
                let now = self.now();
                // A racy moving average is fine: it only steers fan-out.
                let avg = self.job_ns.load(Ordering::Relaxed);
                let t = now.saturating_sub(t0);
                self.job_ns.store(avg - avg / 8 + t / 8, Ordering::Relaxed);
                g.real_done(now, job, status, now.saturating_sub(t0));
                g.outbox()
            };
            let Outbox { mut jobs, replies } = out;
            self.send_replies(replies);
            let next = jobs.pop();
            if !jobs.is_empty() {
                lock(&self.queue).extend(jobs);
                self.queue_cv.notify_one();
            }
            match next {
                Some(j) => job = j,
                None => return,
            }
        }
    }

    fn execute(&self, job: &Job) -> Status {
        let io = &job.io;
        let Some(b) = self.backends.get(io.dev as usize) else {
            return Status::Invalid;
        };
        if io.op != Op::Flush && io.end() > b.size() {
            return Status::Invalid;
        }
        let len = io.len as usize;
        let r = match (io.op, &job.data) {
            (Op::Flush, _) => b.flush(),
            (Op::Discard, _) => b.discard(io.offset, io.len as u64, io.fua),
            (
                Op::Write,
                DataRef::Host {
                    zero: Some(may_trim),
                    ..
                },
            ) => b.write_zeroes(io.offset, io.len as u64, *may_trim, io.fua),
            (Op::Read, DataRef::Host { buf, off, .. })
            | (Op::Read, DataRef::Scratch { buf, off, .. }) => {
                let mut d = lock(buf);
                if matches!(job.data, DataRef::Scratch { .. }) {
                    d.ensure(off + len);
                }
                match d.as_mut_slice().get_mut(*off..off + len) {
                    Some(s) => b.read_at(s, io.offset),
                    None => return Status::Invalid,
                }
            }
            (Op::Write, DataRef::Host { buf, off, .. })
            | (Op::Write, DataRef::Scratch { buf, off, .. }) => {
                let d = lock(buf);
                match d.as_slice().get(*off..off + len) {
                    Some(s) => b.write_at(s, io.offset, io.fua),
                    None => return Status::Invalid,
                }
            }
            (Op::Read | Op::Write, DataRef::None) => return Status::Invalid,
        };
        match r {
            Ok(()) => Status::Ok,
            Err(e) => io_status(&e),
        }
    }

    fn timer_thread(self: Arc<Self>) {
        let mut g = lock(&self.core);
        loop {
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            let now = self.now();
            g.fire_due(now);
            let out = g.outbox();
            if !out.jobs.is_empty() || !out.replies.is_empty() {
                drop(g);
                self.dispatch(out, false);
                g = lock(&self.core);
                continue;
            }
            let live = g.kernel.executor_mut();
            let next = live.timers.peek().map(|Reverse((at, _, _))| *at);
            live.sleep_until = next.unwrap_or(u64::MAX);
            let wait = match next {
                Some(at) => Duration::from_nanos(at.saturating_sub(now)),
                None => Duration::from_millis(200),
            };
            g = match self.timer_cv.wait_timeout(g, wait) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

impl Core {
    /// What the last calls left for the threads to carry out.
    fn outbox(&mut self) -> Outbox {
        std::mem::take(&mut self.kernel.executor_mut().out)
    }

    /// Keep the kernel's first error for the session's end.
    fn check(&mut self, r: Result<(), String>) {
        if let Err(e) = r {
            self.fault.get_or_insert(e);
        }
    }

    /// The counters, with the kernel's totals.
    fn stats(&self) -> LiveStats {
        let (requests, errors) = self.kernel.completed();
        LiveStats {
            requests,
            errors,
            ..self.kernel.executor().stats.clone()
        }
    }

    /// Run the kernel events due by `now`.
    fn fire_due(&mut self, now: Nanos) {
        while let Some(Reverse((at, seq, ev))) = self.kernel.executor().timers.peek().copied() {
            if at > now {
                break;
            }
            self.kernel.executor_mut().timers.pop();
            let r = self.kernel.fire(&mut self.stack, now, (at, seq), ev);
            self.check(r);
        }
    }

    /// The real half of a device I/O finished.
    fn real_done(&mut self, now: Nanos, job: Job, status: Status, service_ns: Nanos) {
        let done = if job.emulated {
            // The model's service may be due already: release it now rather than after a
            // timer-thread wake-up.
            self.fire_due(now);
            let key = (job.io.dev, job.io.id);
            let emu = &mut self.kernel.executor_mut().emu;
            let pair = emu.entry(key).or_default();
            match pair.model.take() {
                Some(mut c) => {
                    emu.remove(&key);
                    c.status = worse(status, c.status);
                    c.finished = now;
                    c
                }
                None => {
                    pair.real = Some(status);
                    return;
                }
            }
        } else {
            if let Some(k) = self.real.get_mut(job.io.dev as usize) {
                k.ios += 1;
                k.busy_ns += service_ns;
                // Bytes moved: none for an I/O that failed (a refused one never started).
                match job.io.op {
                    Op::Read if status == Status::Ok => k.bytes_read += job.io.len as u64,
                    Op::Write if status == Status::Ok => k.bytes_written += job.io.len as u64,
                    _ => {}
                }
                if status != Status::Ok {
                    k.errors += 1;
                }
            }
            Completion {
                io: job.io,
                status,
                finished: now,
                breakdown: Breakdown {
                    service_ns,
                    ..Breakdown::default()
                },
            }
        };
        let r = self.kernel.device_completion(&mut self.stack, now, done);
        self.check(r);
    }

    fn device_status(&self, backends: &[Backend], now: Nanos) -> Vec<DeviceStatus> {
        backends
            .iter()
            .zip(self.kernel.devices())
            .map(|(b, r)| match r {
                Some(rt) => {
                    let spec = rt.spec();
                    let names = spec.slot_names();
                    let slot = rt.ledger().current();
                    DeviceStatus {
                        name: b.name.clone(),
                        emulated: true,
                        state: names.get(slot).cloned().unwrap_or_default(),
                        energy_j: rt.energy_j(now),
                        spin_ups: rt.ledger().spin_ups(),
                    }
                }
                None => DeviceStatus {
                    name: b.name.clone(),
                    emulated: false,
                    state: "real".into(),
                    energy_j: 0.0,
                    spin_ups: 0,
                },
            })
            .collect()
    }
}

impl Live {
    /// Scratch buffer `id`, created empty (zeros as it grows) when nothing made it yet.
    fn scratch_buf(&mut self, id: u64) -> Arc<Mutex<AlignedBuf>> {
        self.scratch
            .entry(id)
            .or_insert_with(|| Arc::new(Mutex::new(AlignedBuf::zeroed(0))))
            .clone()
    }

    /// `dst ^= src` (`xor`) or `dst = src` over `len` bytes
    /// ([`wattio_core::media::combine_bytes`]).
    fn combine(
        &mut self,
        dst: Buf,
        src: Buf,
        len: u32,
        hosts: &Hosts<HostReq>,
        xor: bool,
    ) -> Result<(), String> {
        let what = if xor { "xor" } else { "copy" };
        let len = len as usize;
        let mut resolve = |b: Buf| -> Option<(Arc<Mutex<AlignedBuf>>, usize)> {
            match b {
                Buf::Host { id, offset } => {
                    hosts.get(id).map(|h| (h.data.clone(), offset as usize))
                }
                // A scratch buffer a function computes into before any read filled it
                // starts as zeros; the write that drains it frees it.
                Buf::Scratch { id, offset } => Some((self.scratch_buf(id), offset as usize)),
                Buf::None => None,
            }
        };
        let (Some((d, doff)), Some((s, soff))) = (resolve(dst), resolve(src)) else {
            return Err(format!(
                "{what} of {len} bytes: {dst:?} from {src:?} names no buffer"
            ));
        };
        let from: Vec<u8> = match lock(&s).as_slice().get(soff..soff + len) {
            Some(b) => b.to_vec(),
            None => return Err(format!("{what} of {len} bytes: {src:?} is shorter")),
        };
        let mut d = lock(&d);
        if matches!(dst, Buf::Scratch { .. }) {
            d.ensure(doff + len);
        }
        match d.as_mut_slice().get_mut(doff..doff + len) {
            Some(to) => {
                wattio_core::media::combine_bytes(to, &from, xor);
                Ok(())
            }
            None => Err(format!("{what} of {len} bytes: {dst:?} is shorter")),
        }
    }
}

impl Executor for Live {
    type Host = HostReq;

    fn schedule(&mut self, at: Nanos, seq: u64, ev: Event) {
        self.timers.push(Reverse((at, seq, ev)));
        if at < self.sleep_until {
            self.sleep_until = at;
            self.timer_cv.notify_one();
        }
    }

    fn refuses(&self, io: &Io, hosts: &Hosts<HostReq>) -> bool {
        // A read or write with no bytes to move (a function's own I/O made without a
        // buffer, or one naming a host request already answered): `Shared::execute` answers
        // it `Invalid`, and the emulated device never serves it.
        io.op.moves_data()
            && match io.buf {
                Buf::None => true,
                Buf::Host { id, .. } => hosts.get(id).is_none(),
                Buf::Scratch { .. } => false,
            }
    }

    fn submit(
        &mut self,
        _now: Nanos,
        io: &Io,
        modelled: bool,
        hosts: &Hosts<HostReq>,
    ) -> Result<(), String> {
        let data = match io.buf {
            Buf::Host { id, offset } => match hosts.get(id) {
                Some(h) => DataRef::Host {
                    buf: h.data.clone(),
                    off: offset as usize,
                    zero: match h.kind {
                        HostKind::Zero { may_trim } => Some(may_trim),
                        _ => None,
                    },
                },
                None => DataRef::None,
            },
            Buf::Scratch { id, offset } => DataRef::Scratch {
                buf: self.scratch_buf(id),
                off: offset as usize,
            },
            Buf::None => DataRef::None,
        };
        // A device that does not exist has no backend either: the job fails as EINVAL.
        self.out.jobs.push(Job {
            io: *io,
            data,
            emulated: modelled,
        });
        Ok(())
    }

    fn xor(&mut self, dst: Buf, src: Buf, len: u32, hosts: &Hosts<HostReq>) -> Result<(), String> {
        self.combine(dst, src, len, hosts, true)
    }

    fn copy(&mut self, dst: Buf, src: Buf, len: u32, hosts: &Hosts<HostReq>) -> Result<(), String> {
        self.combine(dst, src, len, hosts, false)
    }

    /// A function's own bytes go into its scratch buffer (created, or grown, with zeros);
    /// the write that drains it frees it.
    fn fill(&mut self, dst: Buf, bytes: &[u8], _hosts: &Hosts<HostReq>) -> Result<(), String> {
        let Buf::Scratch { id, offset } = dst else {
            return Err(format!(
                "a function filled {dst:?}: only its own scratch buffers take bytes"
            ));
        };
        let e = self.scratch_buf(id);
        let mut b = lock(&e);
        let off = offset as usize;
        b.ensure(off + bytes.len());
        b.as_mut_slice()[off..off + bytes.len()].copy_from_slice(bytes);
        Ok(())
    }

    /// The kernel freed a scratch buffer: every I/O on it has come back (a real I/O holds
    /// its own reference until its job ends, so none is cut short).
    fn free_scratch(&mut self, id: u64) {
        self.scratch.remove(&id);
    }

    fn take(&mut self, src: Buf, len: u32) -> Result<Vec<u8>, String> {
        let Buf::Scratch { id, offset } = src else {
            return Err(format!(
                "a function took the bytes of {src:?}: only its own scratch buffers hold bytes"
            ));
        };
        let buf = self.scratch.remove(&id).ok_or_else(|| {
            format!("a function took the bytes of scratch buffer {id}, which holds none")
        })?;
        let b = lock(&buf);
        let mut out = vec![0; len as usize];
        let off = offset as usize;
        if off < b.len() {
            let n = (b.len() - off).min(len as usize);
            out[..n].copy_from_slice(&b.as_slice()[off..off + n]);
        }
        Ok(out)
    }

    /// The model's half completes the I/O only if the real half has finished too.
    fn model_done(&mut self, now: Nanos, done: &mut Completion) -> bool {
        let key = (done.io.dev, done.io.id);
        let pair = self.emu.entry(key).or_default();
        match pair.real {
            Some(status) => {
                self.emu.remove(&key);
                done.status = worse(status, done.status);
                done.finished = now;
                true
            }
            None => {
                pair.model = Some(*done);
                false
            }
        }
    }

    fn host_reply(&mut self, r: &HostRequest<'_>, h: HostReq) -> Result<(), String> {
        self.window.record(r.finished.saturating_sub(r.arrival));
        let s = &mut self.stats;
        match h.kind {
            HostKind::Read => {
                s.reads += 1;
                s.bytes_read += r.io.len as u64;
            }
            HostKind::Write | HostKind::Zero { .. } => {
                s.writes += 1;
                s.bytes_written += r.io.len as u64;
            }
            HostKind::Flush => s.flushes += 1,
            HostKind::Trim => s.trims += 1,
        }
        self.out.replies.push((h, r.status, r.io.len));
        Ok(())
    }

    /// The live timeline is the ledger's: nothing to record per change.
    fn mode(&mut self, _dev: DeviceId, _at: Nanos, _slot: usize) -> Result<(), String> {
        Ok(())
    }

    fn unmodelled_power(&mut self, _device: DeviceId) {
        self.stats.power_commands_without_model += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::ComponentSpec;
    use wattio_core::{Actions, Function};

    /// Answers every request at once, twice: a function bug the kernel must catch.
    struct Twice;
    impl Function for Twice {
        fn name(&self) -> &str {
            "twice"
        }
        fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
            let done = Completion::ok(io, now, Breakdown::default());
            out.reply(done);
            out.reply(done);
        }
        fn on_completion(&mut self, _now: Nanos, _done: Completion, _out: &mut Actions) {}
    }

    #[derive(Default)]
    struct Replies(Mutex<Vec<Vec<u8>>>);
    impl ReplySink for Replies {
        fn send(&self, bytes: &[u8]) {
            lock(&self.0).push(bytes.to_vec());
        }
        fn structured(&self) -> bool {
            false
        }
    }

    /// A one-worker session of `f` over a 64 KiB image file in a fresh directory (the
    /// caller removes it).
    fn session(name: &str, f: Box<dyn Function>) -> (Session, std::path::PathBuf) {
        session_of(name, vec![f])
    }

    /// The same, with a stack of several layers.
    fn session_of(name: &str, layers: Vec<Box<dyn Function>>) -> (Session, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("wattio-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let img = dir.join(format!("{name}.img"));
        std::fs::write(&img, vec![0u8; 1 << 16]).unwrap();
        let devices = vec![DeviceSetup {
            backend: Backend::open(&ComponentSpec::file(&img)).unwrap(),
            runtime: None,
        }];
        let exports = vec![ExportSpec {
            info: ExportInfo::new("d", 1 << 16),
            host_dev: 0,
        }];
        let opts = SessionOptions {
            workers: 1,
            ..SessionOptions::default()
        };
        let s = Session::start(Stack::new(layers), devices, exports, opts).unwrap();
        (s, dir)
    }

    /// Answers a host read after a copy it starts and then abandons (as FS2 and EXCES do
    /// when a write overtakes a copy): the copy's scratch buffer must not outlive it.
    struct Abandons {
        copier: wattio_core::copy::Copier,
        held: HashMap<u64, Io>,
    }
    impl Function for Abandons {
        fn name(&self) -> &str {
            "abandons"
        }
        fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
            let r = self.copier.start(wattio_core::copy::CopyJob {
                tag: io.id.0,
                from_dev: 0,
                from: 0,
                to_dev: 0,
                to: 8192,
                len: 4096,
                priority: -1,
                fua: false,
            });
            self.held.insert(io.id.0, io);
            out.submit(r);
        }
        fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
            if let wattio_core::copy::CopyStep::Write(w) = self.copier.complete(&done, out) {
                let job = self.copier.abandon(&w, out).expect("a copy of ours");
                let io = self.held.remove(&job.tag).expect("the host read");
                out.reply(Completion::ok(io, now, Breakdown::default()));
            }
        }
    }

    #[test]
    fn an_abandoned_copy_s_scratch_buffer_is_freed() {
        let f = Abandons {
            copier: wattio_core::copy::Copier::new(1 << 40),
            held: HashMap::new(),
        };
        let (s, dir) = session("abandon", Box::new(f));
        let replies = Arc::new(Replies::default());
        for cookie in 0..20 {
            let cmd = Command {
                cookie,
                kind: CmdKind::Read,
                fua: false,
                offset: 4096 * (cookie % 8),
                len: 4096,
            };
            s.submit(replies.clone(), 0, 0, cmd, false);
        }
        assert!(s.drain(Duration::from_secs(5)));
        assert_eq!(lock(&replies.0).len(), 20, "every read answered");
        // Each copy's read created a buffer; without the release all 20 would be held.
        assert_eq!(s.snapshot().scratch_buffers, 0);
        s.finish(Duration::from_secs(5)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Copies what a host read brought to 32 KiB further on, from memory (as FS2's
    /// replicas): the read's bytes are XORed into scratch buffer 1, which is written out.
    struct CopiesFromMemory;
    impl Function for CopiesFromMemory {
        fn name(&self) -> &str {
            "copies"
        }
        fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
            out.submit(io);
        }
        fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
            if done.io.id.is_own() {
                return;
            }
            let scratch = Buf::Scratch { id: 1, offset: 0 };
            out.xor(scratch, done.io.buf, done.io.len);
            out.reply(done);
            out.submit(Io::own(
                1,
                Op::Write,
                0,
                done.io.offset + 32768,
                done.io.len,
            ));
        }
    }

    /// A copy's write split below the layer that owns its buffer, the halves sent one
    /// after the other: both carry the buffer's bytes. (The buffer was freed when the
    /// first half landed, and the second wrote zeros.)
    #[test]
    fn a_copy_split_below_its_layer_writes_every_piece_from_its_buffer() {
        let (s, dir) = session_of(
            "split",
            vec![
                Box::new(CopiesFromMemory),
                Box::new(wattio_core::testing::Halves::default()),
            ],
        );
        let pattern: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8 + 1).collect();
        {
            use std::io::Write;
            let mut img = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("split.img"))
                .unwrap();
            img.write_all(&pattern).unwrap();
            img.sync_all().unwrap();
        }
        let replies = Arc::new(Replies::default());
        let cmd = Command {
            cookie: 1,
            kind: CmdKind::Read,
            fua: false,
            offset: 0,
            len: 8192,
        };
        s.submit(replies.clone(), 0, 0, cmd, false);
        assert!(s.drain(Duration::from_secs(5)));
        assert_eq!(lock(&replies.0).len(), 1);
        // The copy's write goes after the reply: wait for it (the buffer is freed once the
        // write is back up).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while s.snapshot().scratch_buffers > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(s.snapshot().scratch_buffers, 0, "freed once written");
        s.finish(Duration::from_secs(5)).unwrap();
        let img = std::fs::read(dir.join("split.img")).unwrap();
        assert!(img[32768..32768 + 4096] == pattern[..4096], "first half");
        assert!(
            img[32768 + 4096..32768 + 8192] == pattern[4096..],
            "second half"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Reads the host's block into its buffer, then a block 8 KiB on into scratch, and
    /// answers with that scratch block `Copy`-ed (or `Xor`-ed) over the host's buffer: a
    /// prefetcher answering a read a layer above already read into (seed 344,070).
    struct AnswersFromScratch {
        xor: bool,
        held: Option<Io>,
    }
    impl Function for AnswersFromScratch {
        fn name(&self) -> &str {
            "answers"
        }
        fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
            out.submit(io);
        }
        fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
            if !done.io.id.is_own() {
                let mut r = Io::own(5, Op::Read, 0, done.io.offset + 8192, done.io.len);
                r.buf = Buf::Scratch { id: 5, offset: 0 };
                self.held = Some(done.io);
                out.submit(r);
                return;
            }
            let io = self.held.take().expect("the host read");
            if self.xor {
                out.xor(io.buf, done.io.buf, io.len);
            } else {
                out.copy(io.buf, done.io.buf, io.len);
            }
            out.release(done.io.buf);
            out.reply(Completion::ok(io, now, Breakdown::default()));
        }
    }

    #[test]
    fn a_copy_overwrites_the_read_s_buffer_and_an_xor_combines() {
        for xor in [false, true] {
            let name = if xor { "xor" } else { "copy" };
            let f = AnswersFromScratch { xor, held: None };
            let (s, dir) = session(name, Box::new(f));
            let image: Vec<u8> = (0..16384u32).map(|i| (i % 253) as u8 + 1).collect();
            std::fs::write(dir.join(format!("{name}.img")), &image).unwrap();
            let replies = Arc::new(Replies::default());
            let cmd = Command {
                cookie: 3,
                kind: CmdKind::Read,
                fua: false,
                offset: 0,
                len: 4096,
            };
            s.submit(replies.clone(), 0, 0, cmd, false);
            assert!(s.drain(Duration::from_secs(5)));
            let got = lock(&replies.0).concat();
            assert_eq!(got.len(), 16 + 4096, "{name}: a simple reply and its data");
            let want: Vec<u8> = if xor {
                (0..4096).map(|i| image[i] ^ image[8192 + i]).collect()
            } else {
                image[8192..8192 + 4096].to_vec()
            };
            assert!(got[16..] == want[..], "{name}: the answer's bytes");
            assert_eq!(s.snapshot().scratch_buffers, 0, "{name}: released");
            s.finish(Duration::from_secs(5)).unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_function_that_replies_twice_is_answered_once_and_reported_at_the_end() {
        let (s, dir) = session("twice", Box::new(Twice));
        let replies = Arc::new(Replies::default());
        let cmd = Command {
            cookie: 7,
            kind: CmdKind::Flush,
            fua: false,
            offset: 0,
            len: 0,
        };
        s.submit(replies.clone(), 0, 0, cmd, false);
        assert!(s.drain(Duration::from_secs(5)));
        let e = s.finish(Duration::from_secs(5)).unwrap_err();
        assert_eq!(
            e,
            "a function misbehaved: a function replied to host request 0 twice, or to one that does not exist"
        );
        // One simple reply (16 bytes: magic, error 0, cookie 7), not two.
        let got = lock(&replies.0).clone();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), 16);
        assert_eq!(&got[0][8..], &7u64.to_be_bytes());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
