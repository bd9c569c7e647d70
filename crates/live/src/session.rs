//! The live executor: the simulator's [`Stack`] and [`DeviceRuntime`]s driven by the wall
//! clock, with every `Effect` carried out for real.
//!
//! * `Submit(io)` → a positional read/write/fdatasync/punch-hole on component device
//!   `io.dev`, run by a worker thread (or inline by the thread that produced it, which saves a
//!   thread hand-off on the last I/O of a batch), then `Stack::device_completion`.
//! * `HostReply` → the NBD reply, sent through the connection's [`ReplySink`].
//! * `SetTimer`/`CancelTimer` → a deadline heap served by one timer thread.
//! * `SetPower` → the emulated device's `DeviceRuntime::set_power`.
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
use wattio_core::stats::LatencyHistogram;
use wattio_core::{
    Breakdown, Buf, Completion, DevEvent, DeviceId, DeviceRuntime, Effect, Io, IoId, LedgerRow,
    Nanos, Op, Request, Stack, Status, TimerId,
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
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            workers: 4,
            poll: DEFAULT_POLL,
            capture: None,
            meta: RunMeta::default(),
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
    arrival: Nanos,
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
        id: u64,
        buf: Arc<Mutex<AlignedBuf>>,
        off: usize,
    },
}

pub(crate) struct Job {
    io: Io,
    data: DataRef,
    emulated: bool,
}

#[derive(Default)]
struct EmuPair {
    real: Option<(Status, Nanos)>,
    model: Option<Completion>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKind {
    Layer(usize, TimerId),
    DevService(DeviceId, u32),
    DevTransition(DeviceId),
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
    runtimes: Vec<Option<DeviceRuntime>>,
    exports: Vec<ExportSpec>,
    hosts: HashMap<u64, HostReq>,
    next_host: u64,
    emu: HashMap<(DeviceId, IoId), EmuPair>,
    timers: BinaryHeap<Reverse<(Nanos, u64, TimerKind)>>,
    layer_timers: HashMap<(usize, TimerId), u64>,
    timer_seq: u64,
    /// The deadline the timer thread sleeps until (`u64::MAX`: no deadline).
    timer_sleep_until: Nanos,
    scratch: HashMap<u64, (Arc<Mutex<AlignedBuf>>, usize)>,
    capture: Option<Box<dyn CaptureSink>>,
    capture_error: Option<String>,
    hist: LatencyHistogram,
    window: LatencyHistogram,
    power_wait: LatencyHistogram,
    stats: LiveStats,
    /// Per-device I/O counters of component devices without a model (an emulated device's
    /// runtime keeps its own).
    real: Vec<DeviceCounters>,
    fx: Vec<Effect>,
    dev_ev: Vec<DevEvent>,
}

pub(crate) struct Shared {
    core: Mutex<Core>,
    timer_cv: Condvar,
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
        let core = Core {
            stack,
            runtimes,
            exports,
            hosts: HashMap::new(),
            next_host: 1,
            emu: HashMap::new(),
            timers: BinaryHeap::new(),
            layer_timers: HashMap::new(),
            timer_seq: 0,
            timer_sleep_until: u64::MAX,
            scratch: HashMap::new(),
            capture: opts.capture,
            capture_error: None,
            hist: LatencyHistogram::new(),
            window: LatencyHistogram::new(),
            power_wait: LatencyHistogram::new(),
            stats: LiveStats::default(),
            real,
            fx: Vec::new(),
            dev_ev: Vec::new(),
        };
        let shared = Arc::new(Shared {
            core: Mutex::new(core),
            timer_cv: Condvar::new(),
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
        let mut out = Outbox::default();
        {
            let mut g = lock(&shared.core);
            let mut fx = Vec::new();
            g.stack.start(0, &mut fx);
            g.apply(&shared, 0, &mut fx, &mut out);
        }
        shared.dispatch(out, false);
        Ok(Session {
            shared,
            threads,
            meta,
            poll: opts.poll,
        })
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
        while !g.hosts.is_empty() {
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
        let window_ops = g.window.count();
        let window_p50_ns = if window_ops > 0 {
            g.window.quantile(0.5)
        } else {
            0
        };
        g.window = LatencyHistogram::new();
        Snapshot {
            now,
            stats: g.stats.clone(),
            inflight: g.hosts.len(),
            p50_ns: if g.hist.count() > 0 {
                g.hist.quantile(0.5)
            } else {
                0
            },
            p99_ns: if g.hist.count() > 0 {
                g.hist.quantile(0.99)
            } else {
                0
            },
            window_ops,
            window_p50_ns,
            devices: g.device_status(&self.shared.backends, now),
        }
    }

    /// Stop: wait for in-flight requests (up to `drain_timeout`), make every component
    /// device durable, close the ledgers and the capture, and report.
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
        let mut capture_error = g.capture_error.take();
        if let Some(c) = g.capture.take() {
            if let Err(e) = c.finish() {
                capture_error = Some(e);
            }
        }
        let devices = g.device_status(&self.shared.backends, now);
        let ledgers = g
            .runtimes
            .iter()
            .zip(&self.shared.backends)
            .filter_map(|(r, b)| r.as_ref().map(|r| (b.name.clone(), r.ledger_rows(now))))
            .collect();
        let function_counters = g
            .stack
            .layers()
            .iter()
            .map(|l| (l.name().to_string(), l.counters()))
            .collect();
        let stack = std::mem::replace(&mut g.stack, Stack::new(Vec::new()));
        let runtimes = std::mem::take(&mut g.runtimes);
        let summary = Summary {
            duration_ns: now,
            stats: g.stats.clone(),
            latency: g.hist.clone(),
            power_wait: g.power_wait.clone(),
            devices,
            ledgers,
            function_counters,
            capture_error,
            meta: std::mem::take(&mut self.meta),
            stack,
            runtimes,
            real: std::mem::take(&mut g.real),
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
        let mut out = Outbox::default();
        {
            let mut g = lock(&self.core);
            self.submit_locked(&mut g, &mut out, sink, stream, export, cmd);
        }
        self.dispatch(out, inline);
    }

    fn submit_batch(
        self: &Arc<Self>,
        sink: &Arc<dyn ReplySink>,
        stream: u32,
        export: usize,
        cmds: &mut Vec<Command>,
    ) {
        let mut out = Outbox::default();
        {
            let mut g = lock(&self.core);
            for cmd in cmds.drain(..) {
                self.submit_locked(&mut g, &mut out, sink.clone(), stream, export, cmd);
            }
        }
        self.dispatch(out, true);
    }

    fn submit_locked(
        self: &Arc<Self>,
        g: &mut MutexGuard<'_, Core>,
        out: &mut Outbox,
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
        let id = g.next_host;
        g.next_host += 1;
        let io = Io {
            id: IoId(id),
            op,
            fua: cmd.fua,
            priority: 0,
            dev: host_dev,
            stream,
            offset: cmd.offset,
            len: cmd.len,
            file: None,
            call_site: None,
            buf: Buf::Host { id, offset: 0 },
        };
        if let Some(c) = g.capture.as_mut() {
            let mut r = Request::new(now, op, cmd.offset, cmd.len);
            r.dev = host_dev;
            r.stream = stream;
            if let Err(e) = c.record(&r) {
                g.capture_error.get_or_insert(e);
                g.capture = None;
            }
        }
        g.hosts.insert(
            id,
            HostReq {
                sink,
                cookie: cmd.cookie,
                kind,
                offset: cmd.offset,
                arrival: now,
                data: Arc::new(Mutex::new(data)),
            },
        );
        let mut fx = std::mem::take(&mut g.fx);
        g.stack.request(now, io, &mut fx);
        g.apply(self, now, &mut fx, out);
        g.fx = fx;
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
            let mut out = Outbox::default();
            {
                let mut g = lock(&self.core);
                let now = self.now();
                // A racy moving average is fine: it only steers fan-out.
                let avg = self.job_ns.load(Ordering::Relaxed);
                let t = now.saturating_sub(t0);
                self.job_ns.store(avg - avg / 8 + t / 8, Ordering::Relaxed);
                g.real_done(self, now, job, status, now.saturating_sub(t0), &mut out);
            }
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
            let mut out = Outbox::default();
            g.fire_timers(&self, now, &mut out);
            if !out.jobs.is_empty() || !out.replies.is_empty() {
                drop(g);
                self.dispatch(out, false);
                g = lock(&self.core);
                continue;
            }
            let next = g.timers.peek().map(|Reverse((at, _, _))| *at);
            g.timer_sleep_until = next.unwrap_or(u64::MAX);
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
    fn push_timer(&mut self, shared: &Shared, at: Nanos, kind: TimerKind) -> u64 {
        self.timer_seq += 1;
        let seq = self.timer_seq;
        self.timers.push(Reverse((at, seq, kind)));
        // Re-armed and cancelled timers leave stale heap entries (lazy deletion); a function
        // that re-arms on every request would grow the heap without bound, so rebuild it
        // once stale entries dominate.
        if self.timers.len() > 1024 && self.timers.len() > 4 * (self.layer_timers.len() + 64) {
            let live = &self.layer_timers;
            let v: Vec<_> = std::mem::take(&mut self.timers)
                .into_vec()
                .into_iter()
                .filter(|Reverse((_, s, k))| match k {
                    TimerKind::Layer(l, t) => live.get(&(*l, *t)) == Some(s) || *s == seq,
                    _ => true,
                })
                .collect();
            self.timers = BinaryHeap::from(v);
        }
        if at < self.timer_sleep_until {
            self.timer_sleep_until = at;
            shared.timer_cv.notify_one();
        }
        seq
    }

    /// Carry out effects; handlers may append more (a completion delivered to the stack).
    fn apply(&mut self, shared: &Shared, now: Nanos, fx: &mut Vec<Effect>, out: &mut Outbox) {
        let mut i = 0;
        while i < fx.len() {
            let e = fx[i];
            i += 1;
            match e {
                Effect::Submit(io) => self.submit_dev(shared, now, io, fx, out),
                Effect::HostReply(c) => {
                    if let Some(h) = self.hosts.remove(&c.io.id.0) {
                        let lat = now.saturating_sub(h.arrival);
                        self.hist.record(lat);
                        self.window.record(lat);
                        // As the simulator counts it: never more than the request's latency.
                        self.power_wait.record(c.breakdown.power_wait_ns.min(lat));
                        let s = &mut self.stats;
                        s.requests += 1;
                        if c.status != Status::Ok {
                            s.errors += 1;
                        }
                        match h.kind {
                            HostKind::Read => {
                                s.reads += 1;
                                s.bytes_read += c.io.len as u64;
                            }
                            HostKind::Write | HostKind::Zero { .. } => {
                                s.writes += 1;
                                s.bytes_written += c.io.len as u64;
                            }
                            HostKind::Flush => s.flushes += 1,
                            HostKind::Trim => s.trims += 1,
                        }
                        out.replies.push((h, c.status, c.io.len));
                    }
                }
                Effect::SetPower { device, state } => {
                    match self
                        .runtimes
                        .get_mut(device as usize)
                        .and_then(Option::as_mut)
                    {
                        Some(rt) => {
                            let mut ev = std::mem::take(&mut self.dev_ev);
                            rt.set_power(now, state, &mut ev);
                            self.dev_events(shared, now, device, &mut ev);
                            self.dev_ev = ev;
                        }
                        None => self.stats.power_commands_without_model += 1,
                    }
                }
                Effect::SetTimer { layer, timer, at } => {
                    let seq = self.push_timer(shared, at, TimerKind::Layer(layer, timer));
                    self.layer_timers.insert((layer, timer), seq);
                }
                Effect::CancelTimer { layer, timer } => {
                    self.layer_timers.remove(&(layer, timer));
                }
            }
        }
        fx.clear();
    }

    fn submit_dev(
        &mut self,
        shared: &Shared,
        now: Nanos,
        io: Io,
        fx: &mut Vec<Effect>,
        out: &mut Outbox,
    ) {
        if io.dev as usize >= shared.backends.len() {
            let c = Completion {
                io,
                status: Status::Invalid,
                finished: now,
                breakdown: Breakdown::default(),
            };
            self.stack.device_completion(now, c, fx);
            return;
        }
        let data = match io.buf {
            Buf::Host { id, offset } => match self.hosts.get(&id) {
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
            Buf::Scratch { id, offset } => {
                let e = self
                    .scratch
                    .entry(id)
                    .or_insert_with(|| (Arc::new(Mutex::new(AlignedBuf::zeroed(0))), 0));
                e.1 += 1;
                DataRef::Scratch {
                    id,
                    buf: e.0.clone(),
                    off: offset as usize,
                }
            }
            Buf::None => DataRef::None,
        };
        let emulated = match self
            .runtimes
            .get_mut(io.dev as usize)
            .and_then(Option::as_mut)
        {
            Some(rt) => {
                let mut ev = std::mem::take(&mut self.dev_ev);
                rt.submit(now, io, &mut ev);
                self.dev_events(shared, now, io.dev, &mut ev);
                self.dev_ev = ev;
                true
            }
            None => false,
        };
        out.jobs.push(Job { io, data, emulated });
    }

    fn dev_events(&mut self, shared: &Shared, now: Nanos, dev: DeviceId, ev: &mut Vec<DevEvent>) {
        for e in ev.drain(..) {
            match e {
                DevEvent::ServiceEnd { at, token } => {
                    self.push_timer(shared, at, TimerKind::DevService(dev, token));
                }
                DevEvent::TransitionEnd { at } => {
                    self.push_timer(shared, at, TimerKind::DevTransition(dev));
                }
                DevEvent::Mode { slot, .. } => {
                    let states = self
                        .runtimes
                        .get(dev as usize)
                        .and_then(Option::as_ref)
                        .map_or(0, |r| r.spec().states.len());
                    if slot < states {
                        self.stack.power(now, dev, slot as u8);
                    }
                }
            }
        }
    }

    /// The device model finished an I/O: it completes once the real device has too.
    fn model_done(&mut self, now: Nanos, dev: DeviceId, c: Completion, fx: &mut Vec<Effect>) {
        let key = (dev, c.io.id);
        let pair = self.emu.entry(key).or_default();
        pair.model = Some(c);
        if let Some((status, _)) = pair.real {
            self.emu.remove(&key);
            let mut c = c;
            c.status = worse(status, c.status);
            c.finished = now;
            self.stack.device_completion(now, c, fx);
        }
    }

    fn real_done(
        &mut self,
        shared: &Shared,
        now: Nanos,
        job: Job,
        status: Status,
        service_ns: Nanos,
        out: &mut Outbox,
    ) {
        if let DataRef::Scratch { id, .. } = job.data {
            if let Some(e) = self.scratch.get_mut(&id) {
                e.1 = e.1.saturating_sub(1);
                // A scratch buffer lives from the read that fills it to the last write that
                // drains it.
                if e.1 == 0 && job.io.op == Op::Write {
                    self.scratch.remove(&id);
                }
            }
        }
        let mut fx = std::mem::take(&mut self.fx);
        if job.emulated {
            // The model's service may be due already: release it now rather than after a
            // timer-thread wake-up.
            self.fire_due(shared, now, &mut fx);
            let key = (job.io.dev, job.io.id);
            let pair = self.emu.entry(key).or_default();
            pair.real = Some((status, service_ns));
            if let Some(mut c) = pair.model {
                self.emu.remove(&key);
                c.status = worse(status, c.status);
                c.finished = now;
                self.stack.device_completion(now, c, &mut fx);
            }
        } else {
            if let Some(k) = self.real.get_mut(job.io.dev as usize) {
                k.ios += 1;
                k.busy_ns += service_ns;
                match job.io.op {
                    Op::Read => k.bytes_read += job.io.len as u64,
                    Op::Write => k.bytes_written += job.io.len as u64,
                    _ => {}
                }
                if status != Status::Ok {
                    k.errors += 1;
                }
            }
            let c = Completion {
                io: job.io,
                status,
                finished: now,
                breakdown: Breakdown {
                    service_ns,
                    ..Breakdown::default()
                },
            };
            self.stack.device_completion(now, c, &mut fx);
        }
        self.apply(shared, now, &mut fx, out);
        self.fx = fx;
    }

    fn fire_due(&mut self, shared: &Shared, now: Nanos, fx: &mut Vec<Effect>) {
        while let Some(Reverse((at, seq, kind))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            match kind {
                TimerKind::Layer(layer, timer) => {
                    if self.layer_timers.get(&(layer, timer)) == Some(&seq) {
                        self.layer_timers.remove(&(layer, timer));
                        if layer < self.stack.len() {
                            self.stack.timer(now, layer, timer, fx);
                        }
                    }
                }
                TimerKind::DevService(d, token) => {
                    if let Some(rt) = self.runtimes.get_mut(d as usize).and_then(Option::as_mut) {
                        let mut ev = std::mem::take(&mut self.dev_ev);
                        let done = rt.service_end(now, token, &mut ev);
                        if let Some(c) = done {
                            self.model_done(now, d, c, fx);
                        }
                        self.dev_events(shared, now, d, &mut ev);
                        self.dev_ev = ev;
                    }
                }
                TimerKind::DevTransition(d) => {
                    if let Some(rt) = self.runtimes.get_mut(d as usize).and_then(Option::as_mut) {
                        let mut ev = std::mem::take(&mut self.dev_ev);
                        rt.transition_end(now, &mut ev);
                        self.dev_events(shared, now, d, &mut ev);
                        self.dev_ev = ev;
                    }
                }
            }
        }
    }

    fn fire_timers(&mut self, shared: &Shared, now: Nanos, out: &mut Outbox) {
        let mut fx = std::mem::take(&mut self.fx);
        self.fire_due(shared, now, &mut fx);
        self.apply(shared, now, &mut fx, out);
        self.fx = fx;
    }

    fn device_status(&self, backends: &[Backend], now: Nanos) -> Vec<DeviceStatus> {
        backends
            .iter()
            .zip(&self.runtimes)
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
