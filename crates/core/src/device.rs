//! The two faces of a device.
//!
//! * **Timing** ([`Timing`]): how long the device takes to service an I/O given its own
//!   state (head position, rotational phase, cache contents, FTL, …). Device models
//!   implement it.
//! * **Power** ([`DeviceRuntime`]): the queue in front of the device, its power state machine
//!   (a request that finds the device asleep waits for the wake-up transition; a power
//!   command waits for outstanding I/O), and the energy [`Ledger`].
//!
//! The runtime is sans-I/O like functions are: it is told the time and returns
//! [`DevEvent`]s; the simulated executor schedules them in virtual time, the live executor
//! (with device emulation) in wall-clock time.

use crate::geometry::Geometry;
use crate::io::{Breakdown, Completion, DeviceId, Io, Op, Status};
use crate::ledger::{Ledger, LedgerRow};
use crate::media::{Media, Tear};
use crate::power::{FlushAsleep, PowerSpec, PowerStateId, ABSENT};
use crate::region::Region;
use crate::time::Nanos;
use std::collections::VecDeque;
use std::sync::Arc;

/// Tokens from here on name FLUSHes answered asleep (`DeviceRuntime::asleep_answers`), not
/// service slots (a device never has 2^31 I/Os in service).
const ASLEEP_TOKEN: u32 = 1 << 31;
/// Queued I/Os a prebuffering model is asked about at each chance (bounds the scan of a
/// deep queue; DiskSim's drives queue a few dozen commands at most).
const PREBUFFER_SCAN: usize = 64;

/// Where a service went, phase by phase (phases map to power states: seek → the spec's
/// `seek` state, the rest → `active`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Service {
    pub seek_ns: Nanos,
    pub rotate_ns: Nanos,
    pub transfer_ns: Nanos,
    /// Controller, bus and command overheads.
    pub overhead_ns: Nanos,
    /// Energy charged per operation on top of the active state's power (e.g. NAND program
    /// energy); 0 for models that account everything through state power.
    pub energy_j: f64,
    /// Failed service (e.g. out-of-range address): the I/O completes with this status.
    pub status: Status,
}

impl Service {
    pub fn total(&self) -> Nanos {
        self.seek_ns + self.rotate_ns + self.transfer_ns + self.overhead_ns
    }
}

/// The timing face of a device model.
pub trait Timing: Send {
    /// Capacity in bytes.
    fn capacity(&self) -> u64;

    /// Service `io`, starting at `start` with the device ready, and advance the model's
    /// internal state (head position, caches, FTL, …). Called in service order.
    fn service(&mut self, start: Nanos, io: &Io) -> Service;

    /// I/Os the device services at once (1 for a disk arm; channels × ways for an SSD).
    fn max_concurrent(&self) -> u32 {
        1
    }

    /// Does the device pick the next I/O itself (SSTF, SPTF)? If not, FCFS within priority.
    fn schedules(&self) -> bool {
        false
    }

    /// Does the device take some queued I/Os while its service slots are all in use (a
    /// disk's write prebuffering: a queued write's data crosses the bus into the cache while
    /// another command is on the media)? If so, [`Timing::admits`] is asked about them.
    fn prebuffers(&self) -> bool {
        false
    }

    /// May queued `io`, `position` I/Os behind the front of the queue, start now, at
    /// `now`, beside the I/Os in service? Asked only of a model that
    /// [`Timing::prebuffers`], for reads and writes of the highest waiting priority that
    /// no I/O queued before them overlaps; an admitted I/O is then [`Timing::service`]d
    /// at `now` like any other.
    fn admits(&mut self, now: Nanos, io: &Io, position: usize) -> bool {
        let _ = (now, io, position);
        false
    }

    /// Does the device serve its queue in any order, priorities ignored? [`Timing::pick`]
    /// is then given every queued I/O up to the next power command, in queue order (fault
    /// injection's `reorder`: the orders in which a live executor's workers may complete a
    /// device's I/O, which priority and arrival order never show).
    fn reorders(&self) -> bool {
        false
    }

    /// Index into `queue` (the I/Os of the highest waiting priority, in arrival order; with
    /// [`Timing::reorders`], all queued up to the next power command) of the one to service
    /// next.
    fn pick(&mut self, now: Nanos, queue: &[Io]) -> usize {
        let _ = (now, queue);
        0
    }

    /// Model-specific counters for the run summary (write amplification, cache hits, …).
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// The model's geometry, for functions that place or choose data by head position; `None`
    /// for models without a mechanical layout.
    fn geometry(&self) -> Option<Arc<dyn Geometry>> {
        None
    }

    /// The device has left (`ready = false`) or re-entered (`true`) a ready power state:
    /// spin-down loses rotational phase, may flush or drop caches, etc.
    fn on_power(&mut self, now: Nanos, ready: bool) {
        let _ = (now, ready);
    }

    /// Bring the model, without timing, to a device whose whole capacity holds data (an
    /// SSD's FTL maps every page), as the drive a real trace was recorded on does: a fresh
    /// model would answer reads of never-written pages without touching its media. Returns
    /// whether the model has such state (a disk's platters do not: `false`).
    fn precondition_full(&mut self) -> bool {
        false
    }
}

/// What a function may know about a device when it is attached.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub id: DeviceId,
    pub name: String,
    pub capacity: u64,
    pub power: Arc<PowerSpec>,
    /// Where offsets lie on the platters (mechanical models only).
    pub geometry: Option<Arc<dyn Geometry>>,
}

impl DeviceInfo {
    /// A device without geometry.
    pub fn new(
        id: DeviceId,
        name: impl Into<String>,
        capacity: u64,
        power: Arc<PowerSpec>,
    ) -> Self {
        DeviceInfo {
            id,
            name: name.into(),
            capacity,
            power,
            geometry: None,
        }
    }

    /// The device's geometry, or the error a function that needs one reports at attach.
    pub fn require_geometry(&self, who: &str) -> Result<&Arc<dyn Geometry>, String> {
        self.geometry.as_ref().ok_or_else(|| {
            format!(
                "device `{}` has no geometry ({who} needs a model with a mechanical layout, e.g. an `hdd-mechanical` catalogue entry)",
                self.name
            )
        })
    }
}

/// What the runtime asks its executor to do or to know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DevEvent {
    /// Call [`DeviceRuntime::service_end`] with `token` at `at`.
    ServiceEnd { at: Nanos, token: u32 },
    /// Call [`DeviceRuntime::transition_end`] at `at`.
    TransitionEnd { at: Nanos },
    /// The power mode changed at `at` (ledger slot: a state index, or
    /// `states + transition` at the start of a transition). Busy sub-states (seek, active)
    /// are not reported.
    Mode { at: Nanos, slot: usize },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Stable(PowerStateId),
    /// `until`: when the transition ends.
    Transition {
        tr: usize,
        until: Nanos,
    },
}

#[derive(Clone, Copy, Debug)]
enum Pending {
    Io {
        io: Io,
        enqueued: Nanos,
        /// Cumulative not-ready time when enqueued (power wait = difference at start).
        notready_at_enq: Nanos,
    },
    Power(PowerStateId),
}

impl Pending {
    fn priority(&self) -> i8 {
        match self {
            Pending::Io { io, .. } => io.priority,
            Pending::Power(_) => 0,
        }
    }
}

/// Counters a device keeps besides its ledger.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceCounters {
    pub ios: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub busy_ns: Nanos,
    /// Power commands with no transition from the state the device was in.
    pub power_commands_ignored: u64,
    pub errors: u64,
    /// I/Os that addressed bytes past the end of the device (completed with `Invalid`).
    pub out_of_range: u64,
    /// FLUSHes answered while the device slept, without waking it (`flush_asleep`).
    pub flushes_answered_asleep: u64,
    /// I/Os answered with an error at once because the device is absent
    /// ([`DeviceRuntime::absent`]).
    pub absent_ios: u64,
    /// The model's service time of every I/O started, by component (FS2's evaluation reports
    /// access time as seek + rotation + transfer): counted when service starts.
    pub seek_ns: Nanos,
    pub rotate_ns: Nanos,
    pub transfer_ns: Nanos,
    pub overhead_ns: Nanos,
}

impl DeviceCounters {
    /// What the counters gained since `earlier` (a snapshot of the same device).
    pub fn since(&self, earlier: &DeviceCounters) -> DeviceCounters {
        DeviceCounters {
            ios: self.ios - earlier.ios,
            flushes_answered_asleep: self.flushes_answered_asleep - earlier.flushes_answered_asleep,
            absent_ios: self.absent_ios - earlier.absent_ios,
            bytes_read: self.bytes_read - earlier.bytes_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            busy_ns: self.busy_ns - earlier.busy_ns,
            power_commands_ignored: self.power_commands_ignored - earlier.power_commands_ignored,
            errors: self.errors - earlier.errors,
            out_of_range: self.out_of_range - earlier.out_of_range,
            seek_ns: self.seek_ns - earlier.seek_ns,
            rotate_ns: self.rotate_ns - earlier.rotate_ns,
            transfer_ns: self.transfer_ns - earlier.transfer_ns,
            overhead_ns: self.overhead_ns - earlier.overhead_ns,
        }
    }
}

pub struct DeviceRuntime {
    pub info: DeviceInfo,
    timing: Box<dyn Timing>,
    mode: Mode,
    ledger: Ledger,
    queue: VecDeque<Pending>,
    /// I/Os in service, each already as the completion it will be (its end time is known
    /// when service starts).
    slots: Vec<Option<Completion>>,
    free_slots: Vec<u32>,
    /// FLUSHes answered asleep whose completion event is pending, by token − `ASLEEP_TOKEN`
    /// (outside `slots`: they hold no service slot and leave the ledger alone).
    asleep_answers: Vec<Option<Completion>>,
    busy: u32,
    max_concurrent: u32,
    schedules: bool,
    /// [`Timing::reorders`]: `pick` chooses among every queued I/O, not one priority's.
    reorders: bool,
    /// The model takes queued I/Os past `max_concurrent` ([`Timing::prebuffers`]).
    prebuffers: bool,
    /// The model's capacity, read once: it never changes, and asking costs a dynamic call
    /// per I/O.
    capacity: u64,
    notready_cum: Nanos,
    notready_since: Option<Nanos>,
    scratch: Vec<Io>,
    counters: DeviceCounters,
    busy_since: Nanos,
    /// The bytes of functions' metadata regions on this device (simulation only: a live
    /// device is its own medium). Kept across a crash, minus what the crash loses.
    media: Option<Box<Media>>,
    /// The device is absent ([`DeviceRuntime::absent`]).
    absent: bool,
}

impl DeviceRuntime {
    /// A device at rest in `initial` (default: the spec's idle state) at time `start`.
    pub fn new(
        info: DeviceInfo,
        timing: Box<dyn Timing>,
        initial: Option<PowerStateId>,
        start: Nanos,
    ) -> DeviceRuntime {
        let spec = info.power.clone();
        let initial = initial.unwrap_or(spec.idle);
        let ready = spec.states[initial as usize].ready;
        let max_concurrent = timing.max_concurrent().max(1);
        let reorders = timing.reorders();
        let schedules = timing.schedules() || reorders;
        let prebuffers = timing.prebuffers();
        let capacity = timing.capacity();
        DeviceRuntime {
            info,
            timing,
            mode: Mode::Stable(initial),
            ledger: Ledger::new(&spec, initial as usize, start),
            queue: VecDeque::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            asleep_answers: Vec::new(),
            busy: 0,
            max_concurrent,
            schedules,
            reorders,
            prebuffers,
            capacity,
            notready_cum: 0,
            notready_since: if ready { None } else { Some(start) },
            scratch: Vec::new(),
            counters: DeviceCounters::default(),
            busy_since: start,
            media: None,
            absent: false,
        }
    }

    /// A device that is absent for the whole run (`fault.missing`: pulled, or dead): it
    /// draws nothing, every I/O sent to it is answered at once with an I/O error (as a
    /// kernel answers I/O to a device that is gone), and power commands are ignored. Its
    /// ledger holds one state, `absent` at 0 W, for the run's whole duration: `info.power`
    /// must be the device's spec with that state added ([`PowerSpec::with_absent`]);
    /// functions see the device's own states, ids unchanged, beside it.
    pub fn absent(info: DeviceInfo, timing: Box<dyn Timing>, start: Nanos) -> DeviceRuntime {
        let slot = info.power.state_id(ABSENT);
        assert!(
            slot.is_some(),
            "device `{}`: an absent device's spec needs its `{ABSENT}` state (PowerSpec::with_absent)",
            info.name
        );
        let mut d = DeviceRuntime::new(info, timing, slot, start);
        d.absent = true;
        d
    }

    /// The device is absent ([`DeviceRuntime::absent`]).
    pub fn is_absent(&self) -> bool {
        self.absent
    }

    /// Keep the bytes written to `r` (a function's metadata region on this device), as a
    /// simulated medium would.
    pub fn reserve(&mut self, r: Region) {
        self.media.get_or_insert_with(Box::default).reserve(r);
    }

    /// With the machine off (after [`crash`](Self::crash)), this device and `other` traded
    /// places: each slot now holds the other's disk — its content (the bytes the simulator
    /// keeps: [`Media`]). The slot keeps its model, faults, power state and ledger: a swap
    /// of two disks of one model, as an operator may make when putting a machine's disks
    /// back in the wrong bays. Tests of functions that must tell their devices apart use it.
    pub fn trade_content(&mut self, other: &mut DeviceRuntime) {
        assert!(
            self.queue.is_empty() && other.queue.is_empty() && self.busy == 0 && other.busy == 0,
            "devices trade content only with the machine off (after a crash)"
        );
        let (a, b) = (
            self.media.get_or_insert_with(Box::default),
            other.media.get_or_insert_with(Box::default),
        );
        a.trade(b);
    }

    /// With the machine off, a blank disk of the same model was put in this slot.
    pub fn blank_content(&mut self) {
        assert!(
            self.queue.is_empty() && self.busy == 0,
            "a device is blanked only with the machine off (after a crash)"
        );
        if let Some(m) = &mut self.media {
            m.blank();
        }
    }

    /// The bytes of the device's metadata regions (`None`: it has none).
    #[inline]
    pub fn media(&self) -> Option<&Media> {
        self.media.as_deref()
    }

    #[inline]
    pub fn media_mut(&mut self) -> Option<&mut Media> {
        self.media.as_deref_mut()
    }

    pub fn spec(&self) -> &PowerSpec {
        &self.info.power
    }

    /// The stable power state, or `None` during a transition.
    pub fn state(&self) -> Option<PowerStateId> {
        match self.mode {
            Mode::Stable(s) => Some(s),
            Mode::Transition { .. } => None,
        }
    }

    pub fn outstanding(&self) -> usize {
        self.queue.len() + self.busy as usize
    }

    pub fn counters(&self) -> DeviceCounters {
        self.counters
    }

    /// Time with I/O in service up to `now`, including an I/O still in service then (the
    /// counter itself grows only when the device goes idle).
    pub fn busy_ns_at(&self, now: Nanos) -> Nanos {
        let open = if self.busy > 0 {
            now.saturating_sub(self.busy_since)
        } else {
            0
        };
        self.counters.busy_ns + open
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    pub fn ledger_rows(&self, now: Nanos) -> Vec<LedgerRow> {
        self.ledger.rows(&self.info.power, now)
    }

    /// The rows of `energy.parquet` for this device, the same for a simulated and a live
    /// run: [`Self::ledger_rows`] plus, when the device charges energy per operation on top
    /// of state power (an SSD's NAND reads, programs and erases), a row `per_operation`
    /// with no residency and one entry per device I/O.
    pub fn energy_rows(&self, now: Nanos) -> Vec<LedgerRow> {
        let mut rows = self.ledger_rows(now);
        let op_j = self.ledger.op_energy_j();
        if op_j > 0.0 {
            rows.push(LedgerRow {
                slot: "per_operation".to_string(),
                is_transition: false,
                watts: 0.0,
                residency_ns: 0,
                entries: self.counters.ios,
                energy_j: op_j,
            });
        }
        rows
    }

    pub fn energy_j(&self, now: Nanos) -> f64 {
        self.ledger.energy_at(&self.info.power, now)
    }

    pub fn timing(&self) -> &dyn Timing {
        self.timing.as_ref()
    }

    pub fn timing_mut(&mut self) -> &mut dyn Timing {
        self.timing.as_mut()
    }

    /// Queue an I/O.
    #[inline]
    pub fn submit(&mut self, now: Nanos, io: Io, ev: &mut Vec<DevEvent>) {
        if self.absent {
            return self.answer_absent(now, io, ev);
        }
        let notready_at_enq = self.notready_at(now);
        // Fast path, identical in effect to enqueue + try_start: nothing queued ahead, the
        // device is in a ready state, a service slot is free.
        let ready =
            matches!(self.mode, Mode::Stable(cur) if self.info.power.states[cur as usize].ready);
        if ready && self.queue.is_empty() && self.busy < self.max_concurrent {
            self.start(now, io, now, notready_at_enq, ev);
            return;
        }
        let p = Pending::Io {
            io,
            enqueued: now,
            notready_at_enq,
        };
        self.enqueue(p);
        self.try_start(now, ev);
    }

    /// Queue a power command.
    pub fn set_power(&mut self, now: Nanos, state: PowerStateId, ev: &mut Vec<DevEvent>) {
        if self.absent || state as usize >= self.info.power.states.len() {
            self.counters.power_commands_ignored += 1;
            return;
        }
        self.enqueue(Pending::Power(state));
        self.try_start(now, ev);
    }

    /// A service scheduled by [`DevEvent::ServiceEnd`] has finished: returns the finished
    /// I/O (`None` for a stale token). `ev` receives what starting the next queued work
    /// causes. The completion is returned rather than queued with those events so that an
    /// executor can hand it to its stack once the device's own events are dealt with.
    #[inline]
    pub fn service_end(
        &mut self,
        now: Nanos,
        token: u32,
        ev: &mut Vec<DevEvent>,
    ) -> Option<Completion> {
        // The slot's content is only a value to write into (a Completion has no default);
        // service_end_into fills it.
        let mut done = if token >= ASLEEP_TOKEN {
            self.asleep_answers
                .get((token - ASLEEP_TOKEN) as usize)
                .copied()
                .flatten()?
        } else {
            self.slots.get(token as usize).copied().flatten()?
        };
        self.service_end_into(now, token, ev, &mut done)
            .then_some(done)
    }

    /// [`service_end`](Self::service_end), writing the finished I/O into `out` (returns
    /// whether there was one). For an executor that keeps the completion in place: a
    /// returned value was split by the compiler into pieces and copied back with other
    /// boundaries, which stalled on store forwarding.
    #[inline]
    pub fn service_end_into(
        &mut self,
        now: Nanos,
        token: u32,
        ev: &mut Vec<DevEvent>,
        out: &mut Completion,
    ) -> bool {
        if token >= ASLEEP_TOKEN {
            return self.asleep_answer_end(now, token, out);
        }
        let Some(slot) = self.slots.get_mut(token as usize) else {
            return false;
        };
        let Some(done) = slot.as_ref() else {
            return false;
        };
        *out = *done;
        *slot = None;
        self.free_slots.push(token);
        self.busy -= 1;
        if self.busy == 0 {
            // The device went idle at the scheduled end: a live executor that calls late
            // (a busy host) must not make the modelled device busier or costlier.
            let end = out.finished.min(now);
            self.counters.busy_ns += end - self.busy_since;
            self.ledger.enter(self.info.power.idle as usize, end);
        }
        self.try_start(now, ev);
        // A live executor may call late; the simulator calls at the scheduled end.
        if out.finished != now {
            out.finished = now;
        }
        true
    }

    /// A crash (power cut and restore) at `now`: queued and in-service work is lost (its
    /// service-end events become stale tokens), and the device comes back ready in its idle
    /// state, as after a power cycle (its timing model hears it left and re-entered a ready
    /// state: caches and rotational phase are lost). The ledger switches to idle at `now`,
    /// cutting a seek or transition short, so residency still sums to the run's duration.
    /// Returns the mode change for the executor's timeline. Metadata regions lose every
    /// write that was not durable ([`Tear::LoseAll`]).
    pub fn crash(&mut self, now: Nanos) -> DevEvent {
        self.crash_with(now, Tear::LoseAll)
    }

    /// [`crash`](Self::crash), with metadata writes that were not durable lost as `tear`
    /// says (torn sector by sector, as a real power cut may leave them).
    pub fn crash_with(&mut self, now: Nanos, tear: Tear) -> DevEvent {
        if self.absent {
            // Nothing was written, nothing is lost, and it stays absent.
            self.asleep_answers.clear();
            return DevEvent::Mode {
                at: now,
                slot: self.ledger.current(),
            };
        }
        if let Some(m) = &mut self.media {
            m.crash(tear);
        }
        self.queue.clear();
        self.asleep_answers.clear();
        for (t, s) in self.slots.iter_mut().enumerate() {
            if s.take().is_some() {
                self.free_slots.push(t as u32);
            }
        }
        if self.busy > 0 {
            self.counters.busy_ns += now.saturating_sub(self.busy_since);
            self.busy = 0;
        }
        if let Some(s) = self.notready_since.take() {
            self.notready_cum += now.saturating_sub(s);
        } else {
            self.timing.on_power(now, false);
        }
        self.timing.on_power(now, true);
        let idle = self.info.power.idle;
        self.mode = Mode::Stable(idle);
        self.ledger.cut(idle as usize, now);
        DevEvent::Mode {
            at: now,
            slot: idle as usize,
        }
    }

    pub fn transition_end(&mut self, now: Nanos, ev: &mut Vec<DevEvent>) {
        let Mode::Transition { tr, until } = self.mode else {
            return;
        };
        let to = self.info.power.transitions[tr].to;
        self.mode = Mode::Stable(to);
        // The ledger and timeline take the scheduled end, as `service_end` does; the wait
        // a request saw (below) is what really passed.
        let end = until.min(now);
        self.ledger.enter(to as usize, end);
        if self.info.power.states[to as usize].ready {
            if let Some(s) = self.notready_since.take() {
                self.notready_cum += now - s;
            }
            self.timing.on_power(now, true);
        }
        ev.push(DevEvent::Mode {
            at: end,
            slot: to as usize,
        });
        self.try_start(now, ev);
    }

    #[inline]
    fn notready_at(&self, now: Nanos) -> Nanos {
        self.notready_cum + self.notready_since.map_or(0, |s| now - s)
    }

    fn enqueue(&mut self, p: Pending) {
        let prio = p.priority();
        let mut i = self.queue.len();
        while i > 0 && self.queue[i - 1].priority() < prio {
            i -= 1;
        }
        // Appending is the common case (equal priorities); `insert` pays for its general
        // wrap-around handling even at the end.
        if i == self.queue.len() {
            self.queue.push_back(p);
        } else {
            self.queue.insert(i, p);
        }
    }

    fn begin_transition(&mut self, now: Nanos, tr: usize, ev: &mut Vec<DevEvent>) {
        let spec = self.info.power.clone();
        let t = &spec.transitions[tr];
        if spec.states[t.from as usize].ready {
            self.notready_since = Some(now);
            self.timing.on_power(now, false);
        }
        let slot = spec.states.len() + tr;
        self.ledger.enter(slot, now);
        if t.spin_up {
            self.ledger.count_spin_up();
        }
        self.mode = Mode::Transition {
            tr,
            until: now + t.latency,
        };
        ev.push(DevEvent::Mode { at: now, slot });
        ev.push(DevEvent::TransitionEnd {
            at: now + t.latency,
        });
    }

    #[inline]
    fn try_start(&mut self, now: Nanos, ev: &mut Vec<DevEvent>) {
        loop {
            let Mode::Stable(cur) = self.mode else {
                return;
            };
            let Some(head) = self.queue.front() else {
                return;
            };
            match *head {
                Pending::Power(target) => {
                    if self.busy > 0 {
                        return;
                    }
                    self.queue.pop_front();
                    if target == cur {
                        continue;
                    }
                    match self.info.power.transition(cur, target) {
                        Some(tr) => {
                            self.begin_transition(now, tr, ev);
                            return;
                        }
                        None => {
                            self.counters.power_commands_ignored += 1;
                            continue;
                        }
                    }
                }
                Pending::Io {
                    io,
                    enqueued,
                    notready_at_enq,
                } => {
                    let spec = &self.info.power;
                    if !spec.states[cur as usize].ready {
                        if io.op == Op::Flush && spec.flush_asleep == FlushAsleep::Answer {
                            self.queue.pop_front();
                            self.answer_asleep(now, io, enqueued, notready_at_enq, ev);
                            continue;
                        }
                        let tr = spec
                            .transition(cur, spec.idle)
                            .expect("validated: every non-ready state wakes to idle");
                        self.begin_transition(now, tr, ev);
                        return;
                    }
                    if self.busy >= self.max_concurrent {
                        if self.prebuffers {
                            self.prebuffer(now, ev);
                        }
                        return;
                    }
                    let idx = if self.schedules { self.pick(now) } else { 0 };
                    let taken = if idx == 0 {
                        self.queue.pop_front()
                    } else {
                        self.queue.remove(idx)
                    };
                    let Some(Pending::Io {
                        io,
                        enqueued,
                        notready_at_enq,
                    }) = taken
                    else {
                        unreachable!("pick returns an I/O index");
                    };
                    self.start(now, io, enqueued, notready_at_enq, ev);
                }
            }
        }
    }

    /// A FLUSH reaching the device asleep: answered now, with no service and no change of
    /// state (the drive wrote its cache before it slept). Its completion comes through a
    /// `ServiceEnd` event at `now`, as every completion does, under a token of its own.
    fn answer_asleep(
        &mut self,
        now: Nanos,
        io: Io,
        enqueued: Nanos,
        notready_at_enq: Nanos,
        ev: &mut Vec<DevEvent>,
    ) {
        // Time it waited for a spin-down to end is power wait, as for any I/O.
        let breakdown = self.waits(now, enqueued, notready_at_enq, 0);
        self.counters.flushes_answered_asleep += 1;
        self.answer_now(now, io, Status::Ok, breakdown, ev);
    }

    /// An I/O sent to an absent device: answered now with an I/O error, through the same
    /// path as a FLUSH answered asleep (no service, no change of state, no energy).
    fn answer_absent(&mut self, now: Nanos, io: Io, ev: &mut Vec<DevEvent>) {
        self.counters.errors += 1;
        self.counters.absent_ios += 1;
        self.answer_now(now, io, Status::IoError, Breakdown::default(), ev);
    }

    /// Answer `io` at `now` without serving it: its completion comes through a
    /// `ServiceEnd` event at `now`, as every completion does, under a token of its own.
    fn answer_now(
        &mut self,
        now: Nanos,
        io: Io,
        status: Status,
        breakdown: Breakdown,
        ev: &mut Vec<DevEvent>,
    ) {
        self.counters.ios += 1;
        let token = ASLEEP_TOKEN + self.asleep_answers.len() as u32;
        self.asleep_answers.push(Some(Completion {
            io,
            status,
            finished: now,
            breakdown,
        }));
        ev.push(DevEvent::ServiceEnd { at: now, token });
    }

    /// The completion of a FLUSH answered asleep (false for a stale token: a crash came
    /// between). The list is emptied once none is pending (they all end at the time they
    /// were answered, so it holds the answers of one instant).
    fn asleep_answer_end(&mut self, now: Nanos, token: u32, out: &mut Completion) -> bool {
        let Some(done) = self
            .asleep_answers
            .get_mut((token - ASLEEP_TOKEN) as usize)
            .and_then(Option::take)
        else {
            return false;
        };
        *out = done;
        if self.asleep_answers.iter().all(Option::is_none) {
            self.asleep_answers.clear();
        }
        // A live executor may call late; the simulator calls at the scheduled end.
        out.finished = now;
        true
    }

    /// The device is busy: start the queued I/Os the model admits beside those in service
    /// (write prebuffering). Only reads and writes of the front's priority are looked at,
    /// up to `PREBUFFER_SCAN` of them, stopping at anything else (a power command, a
    /// FLUSH, a DISCARD); an I/O overlapping one queued before it keeps its place, so
    /// that no write overtakes an earlier access to its blocks.
    fn prebuffer(&mut self, now: Nanos, ev: &mut Vec<DevEvent>) {
        let Some(prio) = self.queue.front().map(Pending::priority) else {
            return;
        };
        let mut i = 0;
        let mut looked = 0;
        while i < self.queue.len() && looked < PREBUFFER_SCAN {
            let Pending::Io { io, .. } = self.queue[i] else {
                return;
            };
            if io.priority != prio || !matches!(io.op, Op::Read | Op::Write) {
                return;
            }
            looked += 1;
            let overlapped = self.queue.iter().take(i).any(|p| match p {
                Pending::Io { io: e, .. } => e.offset < io.end() && io.offset < e.end(),
                Pending::Power(_) => false,
            });
            if !overlapped && self.timing.admits(now, &io, i) {
                let Some(Pending::Io {
                    io,
                    enqueued,
                    notready_at_enq,
                }) = self.queue.remove(i)
                else {
                    unreachable!("entry {i} is an I/O");
                };
                self.start(now, io, enqueued, notready_at_enq, ev);
                continue;
            }
            i += 1;
        }
    }

    fn pick(&mut self, now: Nanos) -> usize {
        self.scratch.clear();
        let prio = self.queue[0].priority();
        for p in &self.queue {
            match p {
                Pending::Io { io, .. } if self.reorders || io.priority == prio => {
                    self.scratch.push(*io)
                }
                _ => break,
            }
        }
        if self.scratch.len() <= 1 {
            return 0;
        }
        self.timing
            .pick(now, &self.scratch)
            .min(self.scratch.len() - 1)
    }

    /// An I/O's time split, starting (or answered) at `now` after waiting since `enqueued`:
    /// the part of the wait the device was not ready is power wait, the rest queueing.
    #[inline]
    fn waits(
        &self,
        now: Nanos,
        enqueued: Nanos,
        notready_at_enq: Nanos,
        service_ns: Nanos,
    ) -> Breakdown {
        let waited = now - enqueued;
        let power_wait_ns = (self.notready_at(now) - notready_at_enq).min(waited);
        Breakdown {
            queue_ns: waited - power_wait_ns,
            power_wait_ns,
            service_ns,
        }
    }

    #[inline]
    fn start(
        &mut self,
        now: Nanos,
        io: Io,
        enqueued: Nanos,
        notready_at_enq: Nanos,
        ev: &mut Vec<DevEvent>,
    ) {
        let svc = if io.end() > self.capacity && io.op.moves_data() {
            self.counters.out_of_range += 1;
            Service {
                status: Status::Invalid,
                ..Service::default()
            }
        } else {
            self.timing.service(now, &io)
        };
        let breakdown = self.waits(now, enqueued, notready_at_enq, svc.total());
        let spec = &self.info.power;
        if self.busy == 0 {
            self.busy_since = now;
            match spec.seek {
                Some(seek) if self.max_concurrent == 1 && svc.seek_ns > 0 => {
                    self.ledger.enter(seek as usize, now);
                    self.ledger.enter(spec.active as usize, now + svc.seek_ns);
                }
                _ => self.ledger.enter(spec.active as usize, now),
            }
        }
        self.busy += 1;
        self.ledger.add_op_energy(svc.energy_j);
        self.counters.ios += 1;
        self.counters.seek_ns += svc.seek_ns;
        self.counters.rotate_ns += svc.rotate_ns;
        self.counters.transfer_ns += svc.transfer_ns;
        self.counters.overhead_ns += svc.overhead_ns;
        if svc.status != Status::Ok {
            self.counters.errors += 1;
        } else {
            match io.op {
                crate::io::Op::Read => self.counters.bytes_read += io.len as u64,
                crate::io::Op::Write => self.counters.bytes_written += io.len as u64,
                _ => {}
            }
        }
        let entry = Completion {
            io,
            status: svc.status,
            finished: now + svc.total(),
            breakdown,
        };
        let token = match self.free_slots.pop() {
            Some(t) => {
                self.slots[t as usize] = Some(entry);
                t
            }
            None => {
                self.slots.push(Some(entry));
                (self.slots.len() - 1) as u32
            }
        };
        ev.push(DevEvent::ServiceEnd {
            at: now + svc.total(),
            token,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Op, Request};
    use crate::power::tests::laptop;

    /// 6 ns seek then 4 ns transfer per I/O; counts power notifications.
    struct Fixed {
        power_events: Vec<bool>,
    }
    impl Timing for Fixed {
        fn capacity(&self) -> u64 {
            1 << 30
        }
        fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
            Service {
                seek_ns: 6,
                transfer_ns: 4,
                ..Service::default()
            }
        }
        fn on_power(&mut self, _now: Nanos, ready: bool) {
            self.power_events.push(ready);
        }
    }

    fn disk() -> DeviceRuntime {
        let power = Arc::new(PowerSpec::from_def(&laptop()).unwrap());
        let info = DeviceInfo {
            id: 0,
            name: "d".into(),
            capacity: 1 << 30,
            power,
            geometry: None,
        };
        let timing = Box::new(Fixed {
            power_events: Vec::new(),
        });
        DeviceRuntime::new(info, timing, None, 0)
    }

    /// 10 ns a command (no seek); takes a queued write beside one in service.
    struct Prebuffers;
    impl Timing for Prebuffers {
        fn capacity(&self) -> u64 {
            1 << 30
        }
        fn service(&mut self, _start: Nanos, io: &Io) -> Service {
            Service {
                transfer_ns: if io.op == Op::Write { 3 } else { 10 },
                ..Service::default()
            }
        }
        fn prebuffers(&self) -> bool {
            true
        }
        fn admits(&mut self, _now: Nanos, io: &Io, _position: usize) -> bool {
            io.op == Op::Write
        }
    }

    #[test]
    fn a_prebuffering_model_takes_queued_writes_that_overtake_nothing_of_theirs() {
        let info = disk().info;
        let mut d = DeviceRuntime::new(info, Box::new(Prebuffers), None, 0);
        let mut ev = Vec::new();
        let ends = |ev: &[DevEvent]| -> Vec<Nanos> {
            ev.iter()
                .filter_map(|e| match e {
                    DevEvent::ServiceEnd { at, .. } => Some(*at),
                    _ => None,
                })
                .collect()
        };
        // A read in service 0..10; a read of blocks 8.. queued at 1.
        d.submit(0, Request::new(0, Op::Read, 0, 512).io(0), &mut ev);
        d.submit(1, Request::new(1, Op::Read, 4096, 512).io(1), &mut ev);
        assert_eq!(ends(&ev), vec![10]);
        // A write of other blocks starts at once beside the first read (3 ns) ...
        d.submit(2, Request::new(2, Op::Write, 8192, 512).io(2), &mut ev);
        assert_eq!(ends(&ev), vec![10, 5]);
        assert_eq!(d.outstanding(), 3);
        // ... one of the queued read's blocks waits behind it, and so does a write behind
        // a power command.
        d.submit(3, Request::new(3, Op::Write, 4096, 512).io(3), &mut ev);
        assert_eq!(ends(&ev), vec![10, 5]);
        let standby = d.spec().state_id("standby").unwrap();
        d.set_power(4, standby, &mut ev);
        d.submit(4, Request::new(4, Op::Write, 65536, 512).io(4), &mut ev);
        assert_eq!(ends(&ev), vec![10, 5]);
        // Two in service; queued: a read, a write, the power command, a write.
        assert_eq!(d.outstanding(), 6);
    }

    /// Serves the last I/O it is offered, and records what it was offered (by id).
    struct LastFirst {
        offered: Arc<std::sync::Mutex<Vec<Vec<u64>>>>,
    }
    impl Timing for LastFirst {
        fn capacity(&self) -> u64 {
            1 << 30
        }
        fn service(&mut self, _start: Nanos, _io: &Io) -> Service {
            Service {
                transfer_ns: 10,
                ..Service::default()
            }
        }
        fn reorders(&self) -> bool {
            true
        }
        fn pick(&mut self, _now: Nanos, queue: &[Io]) -> usize {
            let ids = queue.iter().map(|io| io.id.0).collect();
            self.offered.lock().unwrap().push(ids);
            queue.len() - 1
        }
    }

    #[test]
    fn a_reordering_model_is_offered_every_priority_up_to_a_power_command() {
        let info = disk().info;
        let offered = Arc::new(std::sync::Mutex::new(Vec::new()));
        let model = LastFirst {
            offered: offered.clone(),
        };
        let mut d = DeviceRuntime::new(info, Box::new(model), None, 0);
        let mut ev = Vec::new();
        let at = |id: u64, prio: i8| Io {
            priority: prio,
            ..Request::new(0, Op::Write, id * 4096, 512).io(id)
        };
        // 0 in service 0..10; queued behind it, in queue order (a higher priority first):
        // 2 (priority 1), 1 (0, the host's), 3 (−1, a copy's).
        d.submit(0, at(0, 0), &mut ev);
        d.submit(1, at(1, 0), &mut ev);
        d.submit(1, at(2, 1), &mut ev);
        d.submit(1, at(3, -1), &mut ev);
        let token = |ev: &[DevEvent]| {
            ev.iter()
                .rev()
                .find_map(|e| match e {
                    DevEvent::ServiceEnd { token, .. } => Some(*token),
                    _ => None,
                })
                .unwrap()
        };
        let mut served = Vec::new();
        let mut now = 10;
        for k in 0..3 {
            let t = token(&ev);
            ev.clear();
            served.push(d.service_end(now, t, &mut ev).unwrap().io.id.0);
            now += 10;
            if k == 0 {
                // A power command, then 4 behind it: [2, 1, power, 4].
                let standby = d.spec().state_id("standby").unwrap();
                d.set_power(now, standby, &mut ev);
                d.submit(now, at(4, 0), &mut ev);
            }
        }
        // The copy's write overtook both of higher priority; nothing is offered past the
        // power command (one I/O left before it is not offered at all).
        assert_eq!(served, vec![0, 3, 1]);
        assert_eq!(*offered.lock().unwrap(), vec![vec![2, 1, 3], vec![2, 1]]);
    }

    fn residency_sum(d: &DeviceRuntime, now: Nanos) -> Nanos {
        d.ledger_rows(now).iter().map(|r| r.residency_ns).sum()
    }

    #[test]
    fn a_crash_mid_seek_drops_the_work_and_keeps_the_ledger_whole() {
        let mut d = disk();
        let mut ev = Vec::new();
        // One I/O in service from 10 ns (seek to 16, done at 20), one queued behind it.
        d.submit(10, Request::new(10, Op::Write, 0, 512).io(0), &mut ev);
        d.submit(11, Request::new(11, Op::Read, 0, 512).io(1), &mut ev);
        let DevEvent::ServiceEnd { token, .. } = ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(d.outstanding(), 2);
        let idle = d.spec().idle as usize;
        assert_eq!(d.crash(13), DevEvent::Mode { at: 13, slot: idle });
        assert_eq!(d.outstanding(), 0);
        // The lost I/O's service end is a stale token now.
        ev.clear();
        assert!(d.service_end(20, token, &mut ev).is_none());
        // 10 ns idle, 3 ns seek, no active time; idle from the crash on.
        let rows = d.ledger_rows(30);
        let (seek, active) = (d.spec().seek.unwrap() as usize, d.spec().active as usize);
        assert_eq!(
            (
                rows[idle].residency_ns,
                rows[seek].residency_ns,
                rows[active].residency_ns
            ),
            (10 + 17, 3, 0)
        );
        assert_eq!(residency_sum(&d, 30), 30);
        assert_eq!(d.counters().busy_ns, 3);
        // The device serves again after the crash, from a fresh slot table.
        d.submit(40, Request::new(40, Op::Read, 0, 512).io(2), &mut ev);
        let DevEvent::ServiceEnd { at, token } = ev[0] else {
            panic!("{ev:?}")
        };
        assert_eq!(at, 50);
        assert!(d.service_end(50, token, &mut ev).is_some());
        assert_eq!(residency_sum(&d, 60), 60);
    }

    #[test]
    fn an_absent_device_answers_every_io_with_an_error_at_once_and_draws_nothing() {
        let d0 = disk();
        let standby = d0.spec().state_id("standby").unwrap();
        let spec = d0.spec().with_absent();
        let absent = spec.state_id(ABSENT).unwrap() as usize;
        // Its own states keep their ids; the new one is last and never a sleep state.
        assert_eq!(absent, d0.spec().states.len());
        assert_eq!(spec.state_id("standby"), Some(standby));
        assert_eq!(spec.deepest_sleep(), d0.spec().deepest_sleep());
        let info = DeviceInfo {
            power: Arc::new(spec),
            ..d0.info.clone()
        };
        let mut d = DeviceRuntime::absent(
            info,
            Box::new(Fixed {
                power_events: vec![],
            }),
            100,
        );
        let mut ev = Vec::new();
        d.set_power(150, standby, &mut ev);
        assert!(ev.is_empty());
        let ios = [
            Request::new(200, Op::Read, 0, 512).io(0),
            Request::new(200, Op::Write, 4096, 512).io(1),
        ];
        for io in ios {
            d.submit(200, io, &mut ev);
        }
        // Both answered at the instant they came, with an I/O error, and nothing served.
        assert_eq!(ev.len(), 2);
        for (k, e) in ev.clone().into_iter().enumerate() {
            let DevEvent::ServiceEnd { at, token } = e else {
                panic!("{ev:?}")
            };
            assert_eq!(at, 200);
            let done = d.service_end(200, token, &mut ev).expect("an answer");
            assert_eq!((done.io.id, done.status), (ios[k].id, Status::IoError));
        }
        assert_eq!(d.outstanding(), 0);
        let c = d.counters();
        assert_eq!(
            (c.ios, c.errors, c.absent_ios, c.power_commands_ignored),
            (2, 2, 2, 1)
        );
        assert_eq!((c.busy_ns, c.bytes_read, c.bytes_written), (0, 0, 0));
        // A crash changes nothing: it stays absent. The ledger holds the whole run there.
        assert_eq!(
            d.crash(300),
            DevEvent::Mode {
                at: 300,
                slot: absent
            }
        );
        let rows = d.ledger_rows(1_000);
        assert_eq!(rows[absent].slot, ABSENT);
        assert_eq!(rows[absent].residency_ns, 900);
        assert_eq!(residency_sum(&d, 1_000), 900);
        assert_eq!(d.energy_j(1_000), 0.0);
    }

    #[test]
    fn a_crash_mid_transition_comes_back_ready() {
        let mut d = disk();
        let mut ev = Vec::new();
        let standby = d.spec().state_id("standby").unwrap();
        d.set_power(0, standby, &mut ev);
        assert_eq!(d.state(), None);
        // Half-way through the 1 s spin-down.
        d.crash(500_000_000);
        assert_eq!(d.state(), Some(d.spec().idle));
        let rows = d.ledger_rows(2_000_000_000);
        assert_eq!(rows[4].slot, "spin_down");
        assert_eq!(rows[4].residency_ns, 500_000_000);
        assert_eq!(residency_sum(&d, 2_000_000_000), 2_000_000_000);
        // A crash while asleep brings it back idle too.
        d.set_power(1_000_000_000, standby, &mut ev);
        d.transition_end(2_000_000_000, &mut ev);
        assert_eq!(d.state(), Some(standby));
        d.crash(3_000_000_000);
        assert_eq!(d.state(), Some(d.spec().idle));
        assert_eq!(residency_sum(&d, 4_000_000_000), 4_000_000_000);
    }

    fn disk_with(flush_asleep: FlushAsleep) -> DeviceRuntime {
        let mut def = laptop();
        def.flush_asleep = flush_asleep;
        let info = DeviceInfo {
            power: Arc::new(PowerSpec::from_def(&def).unwrap()),
            ..disk().info
        };
        let timing = Box::new(Fixed {
            power_events: Vec::new(),
        });
        DeviceRuntime::new(info, timing, None, 0)
    }

    /// Spin `d` down at 0 (1 s) and return the state it sleeps in.
    fn asleep(d: &mut DeviceRuntime) -> PowerStateId {
        let mut ev = Vec::new();
        let standby = d.spec().state_id("standby").unwrap();
        d.set_power(0, standby, &mut ev);
        d.transition_end(1_000_000_000, &mut ev);
        assert_eq!(d.state(), Some(standby));
        standby
    }

    #[test]
    fn a_flush_to_a_sleeping_drive_is_answered_without_waking_it() {
        let mut d = disk_with(FlushAsleep::Answer);
        let standby = asleep(&mut d);
        let mut ev = Vec::new();
        // Sent during the spin-down it waits for its end; sent asleep it is answered then.
        let t = 2_000_000_000;
        d.submit(t, Request::new(t, Op::Flush, 0, 0).io(7), &mut ev);
        let [DevEvent::ServiceEnd { at, token }] = ev[..] else {
            panic!("{ev:?}")
        };
        assert_eq!(at, t);
        let done = d.service_end(t, token, &mut ev).expect("the answer");
        assert_eq!(
            (done.io.op, done.status, done.finished),
            (Op::Flush, Status::Ok, t)
        );
        assert_eq!(done.breakdown, Breakdown::default());
        assert_eq!(d.state(), Some(standby));
        assert!(d.service_end(t, token, &mut ev).is_none(), "answered once");
        let c = d.counters();
        assert_eq!((c.ios, c.flushes_answered_asleep, c.busy_ns), (1, 1, 0));
        // No spin-up: the ledger shows idle, the spin-down and standby only.
        let rows = d.ledger_rows(3_000_000_000);
        assert_eq!(rows[standby as usize].residency_ns, 2_000_000_000);
        assert_eq!(d.ledger().spin_ups(), 0);
        assert_eq!(residency_sum(&d, 3_000_000_000), 3_000_000_000);
        // A read wakes it; a flush sent behind the read waits for the spin-up and is
        // served then, in order.
        ev.clear();
        d.submit(t, Request::new(t, Op::Read, 0, 512).io(9), &mut ev);
        assert!(
            matches!(ev[0], DevEvent::Mode { at, .. } if at == t),
            "{ev:?}"
        );
        ev.clear();
        d.submit(t, Request::new(t, Op::Flush, 0, 0).io(10), &mut ev);
        assert_eq!(ev, vec![], "queued behind the read, in the spin-up");
        assert_eq!(d.counters().flushes_answered_asleep, 1);
        // Sent during the spin-down: answered when the disk is asleep, the wait counted as
        // power wait.
        let mut d = disk_with(FlushAsleep::Answer);
        let standby = d.spec().state_id("standby").unwrap();
        let mut ev = Vec::new();
        d.set_power(0, standby, &mut ev);
        ev.clear();
        d.submit(400_000_000, Request::new(0, Op::Flush, 0, 0).io(1), &mut ev);
        assert_eq!(ev, vec![]);
        d.transition_end(1_000_000_000, &mut ev);
        let Some(&DevEvent::ServiceEnd { at, token }) =
            ev.iter().find(|e| matches!(e, DevEvent::ServiceEnd { .. }))
        else {
            panic!("{ev:?}")
        };
        assert_eq!(at, 1_000_000_000);
        let done = d.service_end(at, token, &mut ev).unwrap();
        assert_eq!(
            done.breakdown,
            Breakdown {
                queue_ns: 0,
                power_wait_ns: 600_000_000,
                service_ns: 0
            }
        );
        assert_eq!(d.state(), Some(standby));
    }

    #[test]
    fn a_drive_that_wakes_for_flush_spins_up_for_it() {
        let mut d = disk_with(FlushAsleep::Wake);
        asleep(&mut d);
        let mut ev = Vec::new();
        let t = 2_000_000_000;
        d.submit(t, Request::new(t, Op::Flush, 0, 0).io(7), &mut ev);
        assert!(
            matches!(ev[0], DevEvent::Mode { at, .. } if at == t),
            "{ev:?}"
        );
        assert_eq!(d.state(), None, "in its spin-up");
        assert_eq!(d.counters().flushes_answered_asleep, 0);
    }
}
