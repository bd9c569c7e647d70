//! A scripted harness for one function: feed it events, get back the actions it answers
//! with, assert on them — no stack, no executor, no devices to simulate. Every function's
//! unit tests are written this way, fast and exact:
//!
//! ```
//! use wattio_core::testing::{disk, Harness};
//! use wattio_core::{Action, Function, Io, Op, Request, Actions, Completion};
//! # struct Pass;
//! # impl Function for Pass {
//! #     fn name(&self) -> &str { "pass" }
//! #     fn on_request(&mut self, _: u64, io: Io, out: &mut Actions) { out.submit(io) }
//! #     fn on_completion(&mut self, _: u64, c: Completion, out: &mut Actions) { out.reply(c) }
//! # }
//! let mut h = Harness::new(Pass, vec![disk(0, "disk")]).unwrap();
//! let io = Request::new(0, Op::Read, 0, 4096).io(1);
//! assert_eq!(h.request(10, io), vec![Action::Submit(io)]);
//! ```

use crate::device::DeviceInfo;
use crate::function::{Action, Actions, Function, Span, TimerId};
use crate::io::{Breakdown, Buf, Completion, DeviceId, Io, Op, Status};
use crate::journal::{Journal, JournalConfig, Step};
use crate::power::{PowerDef, PowerSpec, PowerStateId, StateDef, TransitionDef};
use crate::region::Region;
use crate::time::Nanos;
use std::sync::{Arc, Mutex};

/// Drives one function by hand.
pub struct Harness<F: Function> {
    f: F,
    out: Actions,
    devices: Vec<DeviceInfo>,
    /// The byte arena of the last event's actions ([`Harness::data`]).
    arena: Vec<u8>,
}

impl<F: Function> Harness<F> {
    /// Attach `f` to `devices` (the error is the function's own attach error).
    pub fn new(mut f: F, devices: Vec<DeviceInfo>) -> Result<Harness<F>, String> {
        f.attach(&devices)?;
        Ok(Harness {
            f,
            out: Actions::new(),
            devices,
            arena: Vec::new(),
        })
    }

    pub fn function(&self) -> &F {
        &self.f
    }

    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    fn take(&mut self) -> Vec<Action> {
        let list = self.out.drain().collect();
        self.arena = self.out.take_arena();
        list
    }

    /// The bytes of a span in the last event's actions ([`Action::Fill`], [`Action::Fail`]).
    pub fn data(&self, span: Span) -> &[u8] {
        &self.arena[span.at as usize..(span.at + span.len) as usize]
    }

    /// The bytes it asked for with `tag` ([`Action::Take`]).
    pub fn bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8]) -> Vec<Action> {
        self.f.on_bytes(now, tag, bytes, &mut self.out);
        self.take()
    }

    pub fn function_mut(&mut self) -> &mut F {
        &mut self.f
    }

    pub fn start(&mut self, now: Nanos) -> Vec<Action> {
        self.f.on_start(now, &mut self.out);
        self.take()
    }

    /// A clean unload (`on_stop`).
    pub fn stop(&mut self, now: Nanos) -> Vec<Action> {
        self.f.on_stop(now, &mut self.out);
        self.take()
    }

    pub fn request(&mut self, now: Nanos, io: Io) -> Vec<Action> {
        self.f.on_request(now, io, &mut self.out);
        self.take()
    }

    /// `io` (as the function submitted it) completes at `now` with `status`, its latency all
    /// service.
    pub fn complete(&mut self, now: Nanos, io: Io, status: Status) -> Vec<Action> {
        self.completion(
            now,
            Completion {
                io,
                status,
                finished: now,
                breakdown: Breakdown::default(),
            },
        )
    }

    pub fn completion(&mut self, now: Nanos, done: Completion) -> Vec<Action> {
        self.f.on_completion(now, done, &mut self.out);
        self.take()
    }

    /// Start the function and recover its metadata log from `region` (the bytes its
    /// region holds on the device: zeros for a new one): the region's read, its bytes, the
    /// new header's write, all answered at time 0. The other actions on the way.
    pub fn recover_log(&mut self, region: &[u8]) -> Vec<Action> {
        let acts = self.log_bytes(region);
        let dev = self.f.regions()[0].dev;
        let header = submitted(&acts)
            .into_iter()
            .find(|io| io.dev == dev && io.op == Op::Write && io.fua)
            .expect("a new header is written at every start");
        let mut rest: Vec<Action> = acts
            .into_iter()
            .filter(|a| !matches!(a, Action::Submit(io) if io.id == header.id))
            .collect();
        rest.extend(self.complete(0, header, Status::Ok));
        rest
    }

    /// Start the function, complete its log region's read and hand it `region` as the
    /// region's bytes: the actions that follow.
    pub fn log_bytes(&mut self, region: &[u8]) -> Vec<Action> {
        let tag = self.read_log(region.len());
        self.bytes(0, tag, region)
    }

    /// A log region holding bytes that are neither zeros nor a log (a file system, say):
    /// the function must fail the run and answer EIO to `early` (a request that waited for
    /// recovery, sent before this call) and to `later`, submitting nothing for either —
    /// a live client gets errors, not a hang.
    pub fn assert_foreign_log_refused(&mut self, early: Io, later: Io) {
        let len = self.f.regions()[0].len as usize;
        let acts = self.log_bytes(&vec![0x5a; len]);
        assert!(
            acts.iter().any(|a| matches!(a, Action::Fail { .. })),
            "the run is told the log is unusable"
        );
        let r = replied(&acts);
        assert_eq!((r.len(), r[0].io, r[0].status), (1, early, Status::IoError));
        let acts = self.request(1, later);
        assert!(submitted(&acts).is_empty());
        assert_eq!(replied(&acts)[0].status, Status::IoError);
    }

    /// Start the function and complete its log region's read (`len` bytes, whole): the tag
    /// its bytes are asked for with.
    fn read_log(&mut self, len: usize) -> u64 {
        let read = submitted(&self.start(0))[0];
        assert_eq!(
            (read.op, read.len as usize),
            (Op::Read, len),
            "the log's region is read first, whole"
        );
        let take = self.complete(0, read, Status::Ok);
        let tag = take
            .iter()
            .find_map(|a| match *a {
                Action::Take { tag, .. } => Some(tag),
                _ => None,
            })
            .expect("the region's bytes are asked for");
        tag
    }

    /// Land in `image` (the bytes of `region` on its device) what `actions` — the last
    /// event's: their filled bytes are in this harness's arena until the next — write into
    /// the region out of buffers they filled: the writes landed.
    pub fn land(&self, actions: &[Action], region: Region, image: &mut [u8]) -> Vec<Io> {
        let mut bufs: std::collections::HashMap<u64, Vec<u8>> = Default::default();
        for a in actions {
            if let Action::Fill {
                dst: Buf::Scratch { id, offset },
                data,
            } = a
            {
                let b = bufs.entry(*id).or_default();
                let d = self.data(*data);
                let end = *offset as usize + d.len();
                if b.len() < end {
                    b.resize(end, 0);
                }
                b[*offset as usize..end].copy_from_slice(d);
            }
        }
        let mut landed = Vec::new();
        for w in submitted(actions) {
            let inside = w.dev == region.dev
                && w.op == Op::Write
                && (region.offset..region.offset + region.len).contains(&w.offset);
            let Buf::Scratch { id, offset } = w.buf else {
                continue;
            };
            if !inside {
                continue;
            }
            let mut b = bufs.get(&id).cloned().unwrap_or_default();
            b.resize(offset as usize + w.len as usize, 0);
            let at = (w.offset - region.offset) as usize;
            image[at..at + w.len as usize]
                .copy_from_slice(&b[offset as usize..offset as usize + w.len as usize]);
            landed.push(w);
        }
        landed
    }

    pub fn timer(&mut self, now: Nanos, timer: TimerId) -> Vec<Action> {
        self.f.on_timer(now, timer, &mut self.out);
        self.take()
    }

    /// Device `dev` entered the state named `state` (panics on an unknown name: a test bug).
    pub fn power(&mut self, now: Nanos, dev: DeviceId, state: &str) {
        let id = self.state(dev, state);
        self.f.on_power(now, dev, id);
    }

    /// Device `dev` began a transition towards the state named `to`.
    pub fn transition(&mut self, now: Nanos, dev: DeviceId, to: &str) {
        let id = self.state(dev, to);
        self.f.on_transition(now, dev, id);
    }

    /// The id of state `name` of device `dev`.
    pub fn state(&self, dev: DeviceId, name: &str) -> PowerStateId {
        self.devices[dev as usize]
            .power
            .state_id(name)
            .unwrap_or_else(|| panic!("device {dev} has no state `{name}`"))
    }

    /// The function's counter `name` (panics if it has none: a test bug).
    pub fn counter(&self, name: &str) -> f64 {
        self.f
            .counters()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no counter `{name}`"))
            .1
    }
}

/// A test disk with round numbers: idle 1 W, active 2 W, standby 0.2 W; spin-down 1 s and
/// 1 J, spin-up 2 s and 8 J (break-even to standby: (1 + 8 − 0.2·3) / (1 − 0.2) = 10.5 s);
/// 1 GB.
pub fn disk(id: DeviceId, name: &str) -> DeviceInfo {
    let state = |name: &str, watts: f64, spinning: bool| StateDef {
        name: name.into(),
        watts,
        spinning,
        source: "test".into(),
    };
    let tr = |from: &str, to: &str, latency_s: f64, energy_j: f64| TransitionDef {
        name: None,
        from: from.into(),
        to: to.into(),
        latency_s,
        energy_j,
        source: "test".into(),
    };
    let def = PowerDef {
        idle: "idle".into(),
        active: "active".into(),
        seek: None,
        rated_start_stop: None,
        rated_start_stop_source: String::new(),
        flush_asleep: Default::default(),
        states: vec![
            state("active", 2.0, true),
            state("idle", 1.0, true),
            state("standby", 0.2, false),
        ],
        transitions: vec![
            tr("idle", "standby", 1.0, 1.0),
            tr("standby", "idle", 2.0, 8.0),
        ],
    };
    let power = PowerSpec::from_def(&def).expect("the test disk's power spec is valid");
    DeviceInfo::new(id, name, 1_000_000_000, Arc::new(power))
}

/// A parametric disk as an inline `[device.spec]` table (TOML) for tests' run configs: the
/// one table the engine's tests, the swarm and the live tests write, each with its numbers
/// ([`SpecDisk::ROUND`] is [`disk`]'s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpecDisk {
    pub capacity_bytes: u64,
    pub rpm: u32,
    pub avg_seek_ms: f64,
    pub media_rate_mbps: u32,
    pub active_w: f64,
    /// `None`: no seek state.
    pub seek_w: Option<f64>,
    pub idle_w: f64,
    pub standby_w: f64,
    /// Idle → standby (transition `spin_down`) and back (`spin_up`): seconds, joules.
    pub spin_down: (f64, f64),
    pub spin_up: (f64, f64),
}

impl SpecDisk {
    /// [`disk`] with mechanics: 6000 rpm (5 ms half rotation), 10 ms seeks, 50 MB/s, seek
    /// 3 W.
    pub const ROUND: SpecDisk = SpecDisk {
        capacity_bytes: 1_000_000_000,
        rpm: 6000,
        avg_seek_ms: 10.0,
        media_rate_mbps: 50,
        active_w: 2.0,
        seek_w: Some(3.0),
        idle_w: 1.0,
        standby_w: 0.2,
        spin_down: (1.0, 1.0),
        spin_up: (2.0, 8.0),
    };

    /// The `[device.spec]` table (to follow a `[[device]]` table's own keys).
    pub fn toml(&self) -> String {
        let mut t = format!(
            "[device.spec]\nkind = \"hdd\"\n[device.spec.timing]\nmodel = \"hdd-parametric\"\n\
             capacity_bytes = {}\nrpm = {}\navg_seek_ms = {:?}\nmedia_rate_mbps = {}\n\
             [device.spec.power]\nidle = \"idle\"\nactive = \"active\"\n",
            self.capacity_bytes, self.rpm, self.avg_seek_ms, self.media_rate_mbps
        );
        if self.seek_w.is_some() {
            t += "seek = \"seek\"\n";
        }
        let states = [
            ("active", Some(self.active_w), true),
            ("seek", self.seek_w, true),
            ("idle", Some(self.idle_w), true),
            ("standby", Some(self.standby_w), false),
        ];
        for (name, watts, spinning) in states {
            let Some(w) = watts else { continue };
            t += &format!("[[device.spec.power.state]]\nname = \"{name}\"\nwatts = {w:?}\n");
            if spinning {
                t += "spinning = true\n";
            }
        }
        for (name, from, to, (s, j)) in [
            ("spin_down", "idle", "standby", self.spin_down),
            ("spin_up", "standby", "idle", self.spin_up),
        ] {
            t += &format!(
                "[[device.spec.power.transition]]\nname = \"{name}\"\nfrom = \"{from}\"\nto = \"{to}\"\nlatency_s = {s:?}\nenergy_j = {j:?}\n"
            );
        }
        t
    }
}

/// A device with one state and no sleep (flash that is always on), 1 GB.
pub fn always_on(id: DeviceId, name: &str) -> DeviceInfo {
    DeviceInfo::new(id, name, 1_000_000_000, Arc::new(PowerSpec::constant(0.5)))
}

/// The I/Os among `actions` that were submitted.
pub fn submitted(actions: &[Action]) -> Vec<Io> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Submit(io) => Some(*io),
            _ => None,
        })
        .collect()
}

/// The completions among `actions` that were replied.
pub fn replied(actions: &[Action]) -> Vec<Completion> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply(c) => Some(*c),
            _ => None,
        })
        .collect()
}

/// What a [`WriteLog`] tells its test, across rebuilds (restarts, crashes).
#[derive(Default, Debug)]
pub struct WriteLogSeen {
    /// Per start: the records recovered (each a write's offset), or the failure.
    pub recovered: Vec<Result<Vec<u64>, String>>,
    /// Offsets whose record was durable before the write was submitted.
    pub durable: Vec<u64>,
}

/// A test layer over device 0 that persists metadata the way a write-intent log does: each
/// host write's offset is appended to a [`Journal`] in the last blocks of the device, and
/// the write goes down only once its record is durable; reads pass through. What it
/// recovers at each start goes to a shared [`WriteLogSeen`]. The engine's and the live
/// executor's tests run it (simulated crashes, a served file across restarts).
pub struct WriteLog {
    journal: Option<Journal>,
    seen: Arc<Mutex<WriteLogSeen>>,
    /// Writes waiting for their record: (sequence number, the write).
    waiting: Vec<(u64, Io)>,
    /// Writes that came before recovery was over.
    early: Vec<Io>,
}

impl WriteLog {
    /// The region: a 4 KiB snapshot slot pair and 64 journal blocks.
    pub const REGION_LEN: u64 = 2 * 4096 + 2 * 4096 + 64 * 4096;

    pub fn new(seen: Arc<Mutex<WriteLogSeen>>) -> WriteLog {
        WriteLog {
            journal: None,
            seen,
            waiting: Vec::new(),
            early: Vec::new(),
        }
    }

    fn log(&mut self, io: Io, out: &mut Actions) {
        let j = self.journal.as_mut().expect("attached");
        let seq = j.append(&io.offset.to_le_bytes(), out).expect("room");
        self.waiting.push((seq, io));
    }

    fn step(&mut self, s: Step, out: &mut Actions) {
        match s {
            Step::Recovered(r) => {
                let offsets = r
                    .records
                    .iter()
                    .map(|b| u64::from_le_bytes(b[..8].try_into().unwrap()))
                    .collect();
                self.seen.lock().unwrap().recovered.push(Ok(offsets));
                for io in std::mem::take(&mut self.early) {
                    self.log(io, out);
                }
            }
            Step::Durable(upto) => {
                let (ready, rest): (Vec<_>, Vec<_>) =
                    self.waiting.drain(..).partition(|(s, _)| *s <= upto);
                self.waiting = rest;
                for (_, io) in ready {
                    self.seen.lock().unwrap().durable.push(io.offset);
                    out.submit(io);
                }
            }
            Step::Failed(e) => {
                self.seen.lock().unwrap().recovered.push(Err(e.clone()));
                out.fail(&e);
            }
            Step::Busy | Step::NotMine => {}
        }
    }
}

impl Function for WriteLog {
    fn name(&self) -> &str {
        "write-log"
    }
    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let dev = devices.first().ok_or("needs a device")?;
        self.journal = Some(Journal::new(JournalConfig {
            region: Region::at_end(dev, Self::REGION_LEN)?,
            snapshot_bytes: 4096,
            owner: "test-write-log".into(),
            io_base: 0,
            priority: 0,
        })?);
        Ok(())
    }
    fn regions(&self) -> Vec<Region> {
        self.journal.iter().map(|j| j.region()).collect()
    }
    fn on_start(&mut self, _now: Nanos, out: &mut Actions) {
        self.journal.as_mut().expect("attached").recover(out);
    }
    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        if io.op != Op::Write {
            return out.submit(io);
        }
        if self.journal.as_ref().expect("attached").ready() {
            self.log(io, out);
        } else {
            self.early.push(io);
        }
    }
    fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
        let s = self
            .journal
            .as_mut()
            .expect("attached")
            .on_completion(&done, out);
        match s {
            Step::NotMine => out.reply(done),
            s => self.step(s, out),
        }
    }
    fn on_bytes(&mut self, _now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        let s = self
            .journal
            .as_mut()
            .expect("attached")
            .on_bytes(tag, bytes, out);
        self.step(s, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_S;

    #[test]
    fn the_test_disk_breaks_even_at_10_5_s() {
        let d = disk(0, "d");
        let standby = d.power.state_id("standby").unwrap();
        assert_eq!(d.power.deepest_sleep(), Some(standby));
        assert_eq!(
            d.power.break_even(standby),
            Some(10 * NS_PER_S + NS_PER_S / 2)
        );
        assert_eq!(always_on(1, "f").power.deepest_sleep(), None);
    }
}

/// A layer that splits an own write from above into two halves and sends the second only
/// when the first is back (as a RAID-5 row waiting for its reads), then replies; anything
/// else passes through. For tests of what outlives the first piece of a split write (a
/// scratch buffer must).
#[derive(Default)]
pub struct Halves {
    parent: Option<Io>,
}

impl Function for Halves {
    fn name(&self) -> &str {
        "halves"
    }
    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        if io.op == Op::Write && io.id.is_own() {
            self.parent = Some(io);
            out.submit(Io {
                id: crate::io::IoId::sub(0),
                len: io.len / 2,
                ..io
            });
        } else {
            out.submit(io);
        }
    }
    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        if done.io.id == crate::io::IoId::sub(0) {
            let p = self.parent.expect("a split write");
            let half = p.len / 2;
            out.submit(Io {
                id: crate::io::IoId::sub(1),
                offset: p.offset + half as u64,
                len: p.len - half,
                buf: p.buf.at(half),
                ..p
            });
        } else if done.io.id == crate::io::IoId::sub(1) {
            let p = self.parent.take().expect("a split write");
            out.reply(Completion::ok(p, now, Breakdown::default()));
        } else {
            out.reply(done);
        }
    }
}

/// A mutant of fuzz seed `seed`, deterministic from `rng` (the corpus tests that run fuzz
/// targets on stable Rust): bit flips, byte overwrites with boundary values, inserted and
/// deleted runs, splices with `other`, and big-endian 32-bit fields set to extremes (lengths
/// and counts are where a parser allocates).
pub fn mutate(seed: &[u8], other: &[u8], rng: &mut u64) -> Vec<u8> {
    let mut next = || {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng
    };
    let mut v = seed.to_vec();
    for _ in 0..1 + next() % 4 {
        let r = next();
        let at = if v.is_empty() {
            0
        } else {
            (r >> 8) as usize % v.len()
        };
        match r % 6 {
            0 if !v.is_empty() => v[at] ^= 1 << ((r >> 40) % 8),
            1 if !v.is_empty() => v[at] = [0, 1, 0x7f, 0x80, 0xff][(r >> 40) as usize % 5],
            2 => {
                let n = (r >> 40) as usize % 64;
                v.splice(at..at, std::iter::repeat_n((r >> 20) as u8, n));
            }
            3 if !v.is_empty() => {
                let n = ((r >> 40) as usize % 64).min(v.len() - at);
                v.drain(at..at + n);
            }
            4 if !other.is_empty() => {
                let from = (r >> 40) as usize % other.len();
                v.truncate(at);
                v.extend_from_slice(&other[from..]);
            }
            _ if v.len() >= 4 => {
                let at = at.min(v.len() - 4);
                let x: u32 = [0, 1, 0xFFFF_FFFF, 0x8000_0000, 1 << 25, (1 << 25) + 1]
                    [(r >> 40) as usize % 6];
                v[at..at + 4].copy_from_slice(&x.to_be_bytes());
            }
            _ => {}
        }
    }
    v
}
