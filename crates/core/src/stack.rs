//! A stack of functions from the host down to the devices, itself sans-I/O.
//!
//! Both executors own a [`Stack`], hand it host requests, device completions, timer expiries
//! and power notifications, and carry out what it asks through [`Effects`]. Routing between
//! layers (a `Submit` from layer k is a request to layer k+1; a `Reply` from layer k is a
//! completion to layer k−1) happens here, once, so the two executors cannot disagree about it.

use crate::device::DeviceInfo;
use crate::function::{Action, Actions, Function, TimerId, Volume};
use crate::io::{Buf, Completion, DeviceId, Io};
use crate::power::PowerStateId;
use crate::region::{self, Region};
use crate::time::Nanos;
use std::collections::VecDeque;

/// What an executor must do, as a value: the buffered form of [`Effects`] (`Vec<Effect>`
/// implements it), for executors that carry effects out later or elsewhere.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Queue `io` at physical device `io.dev`.
    Submit(Io),
    /// A host request is complete.
    HostReply(Completion),
    SetPower {
        device: DeviceId,
        state: PowerStateId,
    },
    SetTimer {
        layer: usize,
        timer: TimerId,
        at: Nanos,
    },
    CancelTimer {
        layer: usize,
        timer: TimerId,
    },
    /// `dst ^= src` over `len` bytes ([`Action::Xor`]).
    Xor {
        dst: Buf,
        src: Buf,
        len: u32,
    },
    /// `dst = src` over `len` bytes ([`Action::Copy`]).
    Copy {
        dst: Buf,
        src: Buf,
        len: u32,
    },
    /// Bytes into a scratch buffer ([`Action::Fill`]).
    Fill {
        dst: Buf,
        bytes: Vec<u8>,
    },
    /// `layer` asks for a buffer's bytes ([`Action::Take`]).
    Take {
        layer: usize,
        src: Buf,
        len: u32,
        tag: u64,
    },
    /// A scratch buffer is freed ([`Action::Release`]).
    Release {
        buf: Buf,
    },
    /// `layer` cannot go on ([`Action::Fail`]).
    Fail {
        layer: usize,
        msg: String,
    },
}

/// The executor's side of a stack: what leaves the stack is carried out here, in the order
/// the layers asked for it, while the stack still runs. Arguments are borrowed from the
/// layers' action buffers, so an executor that acts at once (the simulator) copies an I/O
/// only where it keeps it.
///
/// An implementation must not call back into the stack: a device's power notification
/// reaches [`Stack::power`] after the stack call that caused it has returned.
pub trait Effects {
    /// Queue `io` at physical device `io.dev`.
    fn submit(&mut self, now: Nanos, io: &Io);
    /// A host request is complete at `now` (`done.finished` is whatever the replying
    /// layer copied; the reply's time is `now`).
    fn host_reply(&mut self, now: Nanos, done: &Completion);
    fn set_power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId);
    /// (Re-)arm timer `timer` of `layer` for `at`.
    fn set_timer(&mut self, now: Nanos, layer: usize, timer: TimerId, at: Nanos);
    fn cancel_timer(&mut self, now: Nanos, layer: usize, timer: TimerId);
    /// `dst ^= src` over `len` bytes ([`Action::Xor`]).
    fn xor(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32);
    /// `dst = src` over `len` bytes ([`Action::Copy`]).
    fn copy(&mut self, now: Nanos, dst: Buf, src: Buf, len: u32);
    /// `dst[..bytes.len()] = bytes` ([`Action::Fill`]).
    fn fill(&mut self, now: Nanos, dst: Buf, bytes: &[u8]);
    /// `layer` asks for the first `len` bytes of `src`: hand them to
    /// [`Stack::bytes`] once the stack call in progress has returned ([`Action::Take`]).
    fn take(&mut self, now: Nanos, layer: usize, src: Buf, len: u32, tag: u64);
    /// Free scratch buffer `buf` ([`Action::Release`]).
    fn release(&mut self, now: Nanos, buf: Buf);
    /// `layer` cannot go on ([`Action::Fail`]).
    fn fail(&mut self, now: Nanos, layer: usize, msg: &str);
    /// An I/O on a scratch buffer passes from a layer to the one below, which may split it
    /// and send its pieces at different times: the buffer is held until the reply comes
    /// back up ([`Effects::unhold`]), so the completion of one piece's device write does
    /// not free it while another piece is still to be sent.
    fn hold(&mut self, now: Nanos, io: &Io) {
        let _ = (now, io);
    }
    /// The reply to an I/O [`Effects::hold`] held reaches the layer above: a write's buffer
    /// is freed if nothing else is out on it.
    fn unhold(&mut self, now: Nanos, io: &Io) {
        let _ = (now, io);
    }
}

impl Effects for Vec<Effect> {
    fn submit(&mut self, _now: Nanos, io: &Io) {
        self.push(Effect::Submit(*io));
    }
    fn host_reply(&mut self, now: Nanos, done: &Completion) {
        self.push(Effect::HostReply(Completion {
            finished: now,
            ..*done
        }));
    }
    fn set_power(&mut self, _now: Nanos, device: DeviceId, state: PowerStateId) {
        self.push(Effect::SetPower { device, state });
    }
    fn set_timer(&mut self, _now: Nanos, layer: usize, timer: TimerId, at: Nanos) {
        self.push(Effect::SetTimer { layer, timer, at });
    }
    fn cancel_timer(&mut self, _now: Nanos, layer: usize, timer: TimerId) {
        self.push(Effect::CancelTimer { layer, timer });
    }
    fn xor(&mut self, _now: Nanos, dst: Buf, src: Buf, len: u32) {
        self.push(Effect::Xor { dst, src, len });
    }
    fn copy(&mut self, _now: Nanos, dst: Buf, src: Buf, len: u32) {
        self.push(Effect::Copy { dst, src, len });
    }
    fn fill(&mut self, _now: Nanos, dst: Buf, bytes: &[u8]) {
        self.push(Effect::Fill {
            dst,
            bytes: bytes.to_vec(),
        });
    }
    fn take(&mut self, _now: Nanos, layer: usize, src: Buf, len: u32, tag: u64) {
        self.push(Effect::Take {
            layer,
            src,
            len,
            tag,
        });
    }
    fn release(&mut self, _now: Nanos, buf: Buf) {
        self.push(Effect::Release { buf });
    }
    fn fail(&mut self, _now: Nanos, layer: usize, msg: &str) {
        self.push(Effect::Fail {
            layer,
            msg: msg.to_string(),
        });
    }
}

enum Work {
    Request(usize, Io),
    Completion(usize, Completion),
}

pub struct Stack {
    layers: Vec<Box<dyn Function>>,
    work: VecDeque<Work>,
    acts: Actions,
    /// The metadata regions the layers reserved (checked at attach).
    regions: Vec<Region>,
    /// Layers whose `on_stop` ran (a clean unload goes top down, [`Stack::stop_next`]).
    stopped: usize,
    /// Per layer, the I/Os it sent down whose replies have not come back to it (what a
    /// clean unload waits for before it stops the next layer).
    out: Vec<u64>,
}

impl Stack {
    /// `layers[0]` faces the host; the last layer faces the devices. An empty stack passes
    /// host I/O straight to device `io.dev`.
    pub fn new(layers: Vec<Box<dyn Function>>) -> Stack {
        let n = layers.len();
        Stack {
            layers,
            work: VecDeque::new(),
            acts: Actions::new(),
            regions: Vec::new(),
            stopped: 0,
            out: vec![0; n],
        }
    }

    /// Attach every layer to the run's devices, bottom up, then collect and check the
    /// metadata regions they reserve ([`Function::regions`]). A layer whose volume
    /// ([`Function::volume`]) is smaller than the device it is addressed as (an EXCES pair
    /// whose label takes the disk's end) shrinks that device for the layers above it: an
    /// array over such pairs lays its stripes within their volumes, not over their labels.
    /// (A larger volume — an array's — leaves the device as it is: layers above an array
    /// address its first member's id, as before.)
    pub fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let mut seen = devices.to_vec();
        for l in self.layers.iter_mut().rev() {
            let name = l.name().to_string();
            l.attach(&seen)
                .map_err(|e| format!("function `{name}`: {e}"))?;
            if let Some(v) = l.volume() {
                if let Some(d) = seen.get_mut(v.dev as usize) {
                    d.capacity = d.capacity.min(v.size);
                }
            }
        }
        let named: Vec<(String, Region)> = self
            .layers
            .iter()
            .flat_map(|l| {
                let name = l.name().to_string();
                l.regions().into_iter().map(move |r| (name.clone(), r))
            })
            .collect();
        region::check(&named, devices)?;
        self.regions = named.into_iter().map(|(_, r)| r).collect();
        Ok(())
    }

    /// The host's volumes ([`Function::volume`]), top down: a layer's volume whose device
    /// a layer above takes as a member of its own (an EXCES pair under an array) is that
    /// layer's business, not the host's.
    pub fn volumes(&self) -> Vec<Volume> {
        let mut taken: Vec<DeviceId> = Vec::new();
        let mut out = Vec::new();
        for v in self.layers.iter().filter_map(|l| l.volume()) {
            if taken.contains(&v.dev) {
                continue;
            }
            taken.extend(&v.members);
            out.push(v);
        }
        out
    }

    /// The metadata regions the layers reserved (empty before `attach`).
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// How many layers a clean unload has stopped so far ([`Stack::stop_next`]).
    pub fn stopped(&self) -> usize {
        self.stopped
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    pub fn layers(&self) -> &[Box<dyn Function>] {
        &self.layers
    }

    /// At most how many scratch buffers the layers say they keep ([`Function::scratch_buffers`]).
    pub fn scratch_claimed(&self) -> usize {
        self.layers.iter().map(|l| l.scratch_buffers()).sum()
    }

    /// The leak rule at the end of a run or session: `held` scratch buffers alive with nothing
    /// out on them ([`Kernel::scratch_held`](crate::kernel::Kernel::scratch_held)) may be no
    /// more than the layers claim; more is a function that forgot to write out or release
    /// one (a live server would keep its bytes for the session's life).
    pub fn scratch_leak(&self, held: usize) -> Result<(), String> {
        let claimed = self.scratch_claimed();
        if held > claimed {
            let who: Vec<String> = self
                .layers
                .iter()
                .map(|l| format!("{} {}", l.name(), l.scratch_buffers()))
                .collect();
            return Err(format!(
                "{held} scratch buffer(s) alive and idle at the end, the functions hold at most {claimed} ({}): a leak (write each out, or release it)",
                who.join(", ")
            ));
        }
        Ok(())
    }

    /// What the layers could not finish of their unload ([`Function::unload_left`]), top
    /// down, each as "name: what".
    pub fn unload_left(&self) -> Vec<String> {
        self.layers
            .iter()
            .filter_map(|l| l.unload_left().map(|w| format!("{}: {w}", l.name())))
            .collect()
    }

    /// The run starts: every layer's `on_start`, top down.
    pub fn start<E: Effects + ?Sized>(&mut self, now: Nanos, fx: &mut E) {
        self.each_layer(now, fx, |f, now, out| f.on_start(now, out));
    }

    /// The next step of a clean unload: the `on_stop` of the topmost layer not yet
    /// stopped, its actions carried out; false if every layer has stopped. The executor
    /// ([`crate::kernel::Kernel::stop`]) calls it once the layers stopped so far have no I/O
    /// out ([`Stack::stopped_drained`]): a layer stopped before them would not see the
    /// write-backs they send it (two write-back caches stacked on one disk: the lower
    /// one's dirty pages would stay behind). Its own I/O, and that of the layers below it,
    /// may still be out: the layer finishes it, hearing completions but no more timers.
    /// (Waiting for every device I/O to be done let a layer whose background work never
    /// pauses hold the unload back for ever: PARAID re-trying copies that fail at every
    /// utilization sample, swarm seed 142,535.)
    pub fn stop_next<E: Effects + ?Sized>(&mut self, now: Nanos, fx: &mut E) -> bool {
        let layer = self.stopped;
        if layer == self.layers.len() {
            return false;
        }
        self.stopped += 1;
        self.call_layer(layer, now, fx, |f, now, out| f.on_stop(now, out));
        true
    }

    /// The layers stopped so far have no I/O out (nothing they sent down, for their unload
    /// or before it, is still on its way back to them).
    pub fn stopped_drained(&self) -> bool {
        self.out[..self.stopped].iter().all(|&n| n == 0)
    }

    /// `call` on every layer, top down, each layer's actions carried out before the next.
    fn each_layer<E: Effects + ?Sized>(
        &mut self,
        now: Nanos,
        fx: &mut E,
        call: impl Fn(&mut dyn Function, Nanos, &mut Actions),
    ) {
        for layer in 0..self.layers.len() {
            self.call_layer(layer, now, fx, &call);
        }
    }

    /// `call` on `layer`, its actions carried out.
    fn call_layer<E: Effects + ?Sized>(
        &mut self,
        layer: usize,
        now: Nanos,
        fx: &mut E,
        call: impl Fn(&mut dyn Function, Nanos, &mut Actions),
    ) {
        self.acts.clear();
        call(&mut *self.layers[layer], now, &mut self.acts);
        self.route(layer, now, fx);
        self.run(now, fx);
    }

    /// A request from the host.
    #[inline]
    pub fn request<E: Effects + ?Sized>(&mut self, now: Nanos, io: Io, fx: &mut E) {
        if self.layers.is_empty() {
            fx.submit(now, &io);
            return;
        }
        // The event goes straight to its layer, not through the work queue, which only holds
        // what it causes between layers: every copy of an `Io` costs on the hot path.
        self.request_at(0, now, io, fx);
        self.run(now, fx);
    }

    /// A device finished an I/O submitted by the bottom layer.
    #[inline]
    pub fn device_completion<E: Effects + ?Sized>(
        &mut self,
        now: Nanos,
        done: Completion,
        fx: &mut E,
    ) {
        if self.layers.is_empty() {
            fx.host_reply(now, &done);
            return;
        }
        self.completion_at(self.layers.len() - 1, now, done, fx);
        self.run(now, fx);
    }

    /// Timer `timer` of `layer` expired. A layer stopped by a clean unload hears no more:
    /// the host has gone, and the layer only finishes what is in flight (a timer that
    /// shifted a gear or cleaned on idleness would send new I/O through layers already
    /// unloaded below it — PARAID over EXCES: swarm seed 7,305).
    pub fn timer<E: Effects + ?Sized>(
        &mut self,
        now: Nanos,
        layer: usize,
        timer: TimerId,
        fx: &mut E,
    ) {
        if layer < self.stopped {
            return;
        }
        self.acts.clear();
        self.layers[layer].on_timer(now, timer, &mut self.acts);
        self.route(layer, now, fx);
        self.run(now, fx);
    }

    /// The bytes `layer` asked for with `tag` ([`Action::Take`]).
    pub fn bytes<E: Effects + ?Sized>(
        &mut self,
        now: Nanos,
        layer: usize,
        tag: u64,
        bytes: &[u8],
        fx: &mut E,
    ) {
        self.acts.clear();
        self.layers[layer].on_bytes(now, tag, bytes, &mut self.acts);
        self.route(layer, now, fx);
        self.run(now, fx);
    }

    /// A device entered a power state: every layer hears of it.
    pub fn power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
        for l in &mut self.layers {
            l.on_power(now, device, state);
        }
    }

    /// A device began a transition towards state `to`: every layer hears of it.
    pub fn transition(&mut self, now: Nanos, device: DeviceId, to: PowerStateId) {
        for l in &mut self.layers {
            l.on_transition(now, device, to);
        }
    }

    #[inline]
    fn run<E: Effects + ?Sized>(&mut self, now: Nanos, fx: &mut E) {
        while let Some(w) = self.work.pop_front() {
            match w {
                Work::Request(l, io) => self.request_at(l, now, io, fx),
                Work::Completion(l, done) => self.completion_at(l, now, done, fx),
            }
        }
    }

    /// Layer `l` handles a request, and its actions are routed.
    #[inline]
    fn request_at<E: Effects + ?Sized>(&mut self, l: usize, now: Nanos, io: Io, fx: &mut E) {
        self.acts.clear();
        self.layers[l].on_request(now, io, &mut self.acts);
        self.route(l, now, fx);
    }

    /// Layer `l` handles a completion, and its actions are routed.
    #[inline]
    fn completion_at<E: Effects + ?Sized>(
        &mut self,
        l: usize,
        now: Nanos,
        done: Completion,
        fx: &mut E,
    ) {
        self.acts.clear();
        // Saturating: a layer answering twice is the kernel's to report, not a panic here.
        self.out[l] = self.out[l].saturating_sub(1);
        self.layers[l].on_completion(now, done, &mut self.acts);
        self.route(l, now, fx);
    }

    #[inline]
    fn route<E: Effects + ?Sized>(&mut self, layer: usize, now: Nanos, fx: &mut E) {
        let bottom = self.layers.len() - 1;
        // By reference: an effect borrows its I/O from the action buffer, and only work
        // between layers is copied (into the work queue).
        for a in self.acts.as_slice() {
            match a {
                Action::Submit(io) => {
                    self.out[layer] += 1;
                    if layer == bottom {
                        fx.submit(now, io);
                    } else {
                        if matches!(io.buf, Buf::Scratch { .. }) {
                            fx.hold(now, io);
                        }
                        self.work.push_back(Work::Request(layer + 1, *io));
                    }
                }
                Action::Reply(done) => {
                    if layer == 0 {
                        fx.host_reply(now, done);
                    } else {
                        if matches!(done.io.buf, Buf::Scratch { .. }) {
                            fx.unhold(now, &done.io);
                        }
                        // A reply completes now, whatever the function copied from below.
                        let done = Completion {
                            finished: now,
                            ..*done
                        };
                        self.work.push_back(Work::Completion(layer - 1, done));
                    }
                }
                &Action::SetPower { device, state } => fx.set_power(now, device, state),
                &Action::SetTimer { timer, at } => fx.set_timer(now, layer, timer, at),
                &Action::CancelTimer { timer } => fx.cancel_timer(now, layer, timer),
                &Action::Xor { dst, src, len } => fx.xor(now, dst, src, len),
                &Action::Copy { dst, src, len } => fx.copy(now, dst, src, len),
                &Action::Fill { dst, data } => fx.fill(now, dst, self.acts.data(data)),
                &Action::Take { src, len, tag } => fx.take(now, layer, src, len, tag),
                &Action::Release { buf } => fx.release(now, buf),
                Action::Hold(io) => fx.hold(now, io),
                Action::Unhold(io) => fx.unhold(now, io),
                &Action::Fail { msg } => {
                    fx.fail(now, layer, &String::from_utf8_lossy(self.acts.data(msg)))
                }
            }
        }
        self.acts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer that says what its unload left, or nothing.
    struct Leaves(&'static str, Option<&'static str>);

    impl Function for Leaves {
        fn name(&self) -> &str {
            self.0
        }
        fn on_request(&mut self, _: Nanos, io: Io, out: &mut Actions) {
            out.submit(io);
        }
        fn on_completion(&mut self, _: Nanos, done: Completion, out: &mut Actions) {
            out.reply(done);
        }
        fn unload_left(&self) -> Option<String> {
            self.1.map(str::to_string)
        }
    }

    /// A layer that presents `volume` bytes of device 0 (with device 1) as one volume, and
    /// tells the capacity of device 0 it was attached with.
    struct Shrinks {
        volume: Option<u64>,
        saw: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl Function for Shrinks {
        fn name(&self) -> &str {
            "shrinks"
        }
        fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
            self.saw
                .store(devices[0].capacity, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        fn on_request(&mut self, _: Nanos, io: Io, out: &mut Actions) {
            out.submit(io);
        }
        fn on_completion(&mut self, _: Nanos, done: Completion, out: &mut Actions) {
            out.reply(done);
        }
        fn volume(&self) -> Option<Volume> {
            Some(Volume {
                name: "v".into(),
                dev: 0,
                size: self.volume?,
                members: vec![0, 1],
            })
        }
    }

    #[test]
    fn a_smaller_volume_below_shrinks_its_device_for_the_layers_above_and_is_not_the_hosts() {
        use crate::power::PowerSpec;
        use std::sync::Arc;
        let devs: Vec<DeviceInfo> = (0..2)
            .map(|i| DeviceInfo::new(i, format!("d{i}"), 1000, Arc::new(PowerSpec::constant(1.0))))
            .collect();
        let saw: Vec<Arc<std::sync::atomic::AtomicU64>> =
            (0..4).map(|_| Default::default()).collect();
        let layer = |volume, k: usize| {
            Box::new(Shrinks {
                volume,
                saw: saw[k].clone(),
            }) as Box<dyn Function>
        };
        // Top down: a layer without a volume; one presenting 2000 bytes (larger: device 0
        // stays as it is for those above); one presenting 900; one without a volume.
        let mut stack = Stack::new(vec![
            layer(None, 0),
            layer(Some(2000), 1),
            layer(Some(900), 2),
            layer(None, 3),
        ]);
        stack.attach(&devs).unwrap();
        let seen: Vec<u64> = saw
            .iter()
            .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
            .collect();
        assert_eq!(seen, vec![900, 900, 1000, 1000]);
        // The host's volumes: the 2000-byte one only (the 900-byte one's device is its
        // member).
        let v = stack.volumes();
        assert_eq!((v.len(), v[0].size), (1, 2000));
    }

    #[test]
    fn what_the_layers_left_of_their_unload_is_named_top_down() {
        // Through the boxes the stack holds: a `Box<dyn Function>` that did not forward
        // `unload_left` answered the trait's default, None, for every layer.
        let stack = Stack::new(vec![
            Box::new(Leaves("cache", Some("3 dirty page(s)"))),
            Box::new(Leaves("spindown", None)),
            Box::new(Leaves("inner", Some("a copy"))),
        ]);
        assert_eq!(
            stack.unload_left(),
            vec![
                "cache: 3 dirty page(s)".to_string(),
                "inner: a copy".to_string()
            ]
        );
    }
}
