//! The sans-I/O intelligence-function interface.
//!
//! A function never performs I/O, sleeps or reads a clock. It is handed events — a request
//! from above, a completion from below, a timer it set, a device's new power state — each
//! with the current time, and answers with [`Action`]s. The simulated executor feeds it
//! virtual time; the live executor feeds it the wall clock and real completions. The same
//! object runs under both.

use crate::device::DeviceInfo;
use crate::io::{Buf, Completion, DeviceId, Io};
use crate::power::PowerStateId;
use crate::region::Region;
use crate::time::Nanos;

/// A timer name, chosen by the function; unique within that function.
pub type TimerId = u64;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    /// Send an I/O to the layer below (or, from the bottom layer, to device `io.dev`).
    Submit(Io),
    /// Complete an I/O this layer received from above. `io` must be the I/O as received.
    Reply(Completion),
    /// Ask a device to move to a power state. The command queues behind the device's
    /// outstanding I/O, like an ATA STANDBY IMMEDIATE; the next I/O wakes the device.
    SetPower {
        device: DeviceId,
        state: PowerStateId,
    },
    /// (Re-)arm a timer: one pending deadline per id, a later call replaces it.
    SetTimer {
        timer: TimerId,
        at: Nanos,
    },
    CancelTimer {
        timer: TimerId,
    },
    /// Combine two buffers byte by byte: `dst ^= src` over `len` bytes (RAID parity: a
    /// function that computes parity or reconstructs a block never sees the bytes, so the
    /// executor does it). A scratch buffer that does not exist yet starts as zeros.
    Xor {
        dst: Buf,
        src: Buf,
        len: u32,
    },
    /// Copy between buffers: `dst = src` over `len` bytes, what a device read does to the
    /// buffer it fills. A layer that answers a read from bytes it holds (a prefetch buffer)
    /// must overwrite the read's buffer: a layer above may have used that buffer before (a
    /// RAID read retried after a failed member), so an `Xor` into it would combine the
    /// answer with stale bytes. A scratch buffer that does not exist yet is created.
    Copy {
        dst: Buf,
        src: Buf,
        len: u32,
    },
    /// Put bytes the function generated into one of its scratch buffers (`dst` must be a
    /// `Buf::Scratch`): the bytes of its own metadata, written to a device by an ordinary
    /// `Submit` out of that buffer. The bytes ride in the [`Actions`]' byte arena
    /// ([`Actions::data`]); the simulator keeps them only for I/O to a reserved
    /// [`Region`], the live executor writes them for real.
    Fill {
        dst: Buf,
        data: Span,
    },
    /// Ask for the bytes of one of the function's scratch buffers (`src`, `len` bytes; a
    /// buffer a device read filled): they reach this layer's [`Function::on_bytes`] with
    /// `tag` once the current call has returned, and the buffer is freed. A buffer that was
    /// never created is an error (the run stops).
    Take {
        src: Buf,
        len: u32,
        tag: u64,
    },
    /// The function is done with one of its scratch buffers without writing it out (a
    /// copy abandoned after its read): the executor frees it. A buffer lives from the read
    /// (or `Xor`, `Copy`, `Fill`) that creates it to the write that drains it, or to this.
    Release {
        buf: Buf,
    },
    /// The function hands `io` (a read or write on a scratch buffer) to a part of itself
    /// the stack does not see, which may split it and send its pieces at different times
    /// (PARAID's arrays inside it): the buffer is held as for an I/O passed to the layer
    /// below ([`Effects::hold`](crate::stack::Effects::hold)), until [`Action::Unhold`] of
    /// the same I/O, so that one piece's device write coming back does not free it while
    /// another piece is still to be sent.
    Hold(Io),
    /// The part that [`Action::Hold`] handed `io` to answered it: as a reply from the layer
    /// below, a write's buffer is freed if nothing else is out on it.
    Unhold(Io),
    /// The function cannot go on (its metadata region holds something that is not its log,
    /// a record is corrupt beyond recovery, …): the simulated run stops with this message;
    /// a live session keeps it as its first fault and reports it at the end. The message is
    /// in the byte arena.
    Fail {
        msg: Span,
    },
}

/// A span of bytes in an [`Actions`]' byte arena (what [`Action::Fill`] and
/// [`Action::Fail`] carry, so that [`Action`] stays a small `Copy` value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub at: u32,
    pub len: u32,
}

/// The buffer a function writes its actions into (reused across events: no allocation on
/// the hot path).
#[derive(Default, Debug)]
pub struct Actions {
    list: Vec<Action>,
    /// Bytes of [`Action::Fill`] and [`Action::Fail`], cleared with the list.
    arena: Vec<u8>,
}

impl Actions {
    #[inline]
    pub fn new() -> Actions {
        Actions::default()
    }
    #[inline]
    pub fn submit(&mut self, io: Io) {
        self.list.push(Action::Submit(io));
    }
    #[inline]
    pub fn reply(&mut self, done: Completion) {
        self.list.push(Action::Reply(done));
    }
    #[inline]
    pub fn set_power(&mut self, device: DeviceId, state: PowerStateId) {
        self.list.push(Action::SetPower { device, state });
    }
    #[inline]
    pub fn set_timer(&mut self, timer: TimerId, at: Nanos) {
        self.list.push(Action::SetTimer { timer, at });
    }
    #[inline]
    pub fn cancel_timer(&mut self, timer: TimerId) {
        self.list.push(Action::CancelTimer { timer });
    }
    #[inline]
    pub fn xor(&mut self, dst: Buf, src: Buf, len: u32) {
        self.list.push(Action::Xor { dst, src, len });
    }
    /// `dst = src` over `len` bytes ([`Action::Copy`]).
    #[inline]
    pub fn copy(&mut self, dst: Buf, src: Buf, len: u32) {
        self.list.push(Action::Copy { dst, src, len });
    }
    /// `dst[..bytes.len()] = bytes` ([`Action::Fill`]).
    pub fn fill(&mut self, dst: Buf, bytes: &[u8]) {
        let data = self.stash(bytes);
        self.list.push(Action::Fill { dst, data });
    }
    /// Hand the first `len` bytes of `src` to [`Function::on_bytes`] with `tag`
    /// ([`Action::Take`]).
    pub fn take(&mut self, src: Buf, len: u32, tag: u64) {
        self.list.push(Action::Take { src, len, tag });
    }
    /// Free scratch buffer `buf` ([`Action::Release`]).
    #[inline]
    pub fn release(&mut self, buf: Buf) {
        self.list.push(Action::Release { buf });
    }
    /// Hold `io`'s scratch buffer while a part of the function the stack does not see
    /// serves it ([`Action::Hold`]).
    #[inline]
    pub fn hold(&mut self, io: Io) {
        self.list.push(Action::Hold(io));
    }
    /// That part answered `io` ([`Action::Unhold`]).
    #[inline]
    pub fn unhold(&mut self, io: Io) {
        self.list.push(Action::Unhold(io));
    }
    /// Stop: the function cannot go on ([`Action::Fail`]).
    pub fn fail(&mut self, msg: &str) {
        let msg = self.stash(msg.as_bytes());
        self.list.push(Action::Fail { msg });
    }
    fn stash(&mut self, bytes: &[u8]) -> Span {
        let at = self.arena.len() as u32;
        self.arena.extend_from_slice(bytes);
        Span {
            at,
            len: bytes.len() as u32,
        }
    }
    /// The bytes of a span of this buffer's arena (valid until it is cleared or drained).
    #[inline]
    pub fn data(&self, span: Span) -> &[u8] {
        &self.arena[span.at as usize..(span.at + span.len) as usize]
    }
    #[inline]
    pub fn push(&mut self, a: Action) {
        self.list.push(a);
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
    /// The I/O of the last action if that action is a [`Action::Submit`]: a layer may
    /// still grow it (merge the next adjacent piece into it) while nothing follows it.
    #[inline]
    pub fn last_submit_mut(&mut self) -> Option<&mut Io> {
        match self.list.last_mut() {
            Some(Action::Submit(io)) => Some(io),
            _ => None,
        }
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.list.len()
    }
    #[inline]
    pub fn as_slice(&self) -> &[Action] {
        &self.list
    }
    /// The actions, leaving the arena their spans point into until the next `clear`
    /// (or [`take_arena`](Self::take_arena)).
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, Action> {
        self.list.drain(..)
    }
    /// The byte arena, emptied (what a harness keeps to resolve drained actions' spans).
    pub fn take_arena(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.arena)
    }
    #[inline]
    pub fn clear(&mut self) {
        self.list.clear();
        self.arena.clear();
    }
}

/// An intelligence function: one layer of a stack.
pub trait Function: Send {
    /// Short name for reports.
    fn name(&self) -> &str;

    /// Called once before the first event with the run's physical devices. A function
    /// checks here that it can work with them (e.g. the device it manages has a sleep
    /// state) and resolves state names to ids.
    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let _ = devices;
        Ok(())
    }

    /// The run (or live session) starts: arm periodic timers, start idle clocks.
    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        let _ = (now, out);
    }

    /// The host detaches: a clean unload (the live server shuts down; a simulated run
    /// with `[run] unload = true` ends). No host request follows; requests already in
    /// flight have been answered. A function finishes here what must be on its devices when
    /// the stack goes away — a write-back cache writes its dirty data back to the origin —
    /// with its own I/O as usual. Called once, top down, each layer once the layers above
    /// it have no I/O out (what they sent for their unload has gone through it); the
    /// layer's own I/O sent before may still be out, and its completions still come. The
    /// executor keeps running the stack until the last layer's I/O is done (or its time for
    /// the unload runs out). From then on the layer hears completions of its I/O but no
    /// timers: work that needs a timer to go on is left as a crash would leave it. Default:
    /// nothing to do.
    fn on_stop(&mut self, now: Nanos, out: &mut Actions) {
        let _ = (now, out);
    }

    /// A request from the layer above (or the host).
    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions);

    /// An I/O this layer submitted has finished.
    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions);

    /// A timer this layer set has expired.
    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        let _ = (now, timer, out);
    }

    /// A device has entered a stable power state (busy sub-states such as seek are not
    /// reported). Every layer hears of every device.
    fn on_power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
        let _ = (now, device, state);
    }

    /// A device has begun a power transition towards stable state `to`: it serves no I/O
    /// until `on_power` reports `to` (a request sent meanwhile waits for the transition and
    /// for whatever the device needs after it, a spin-up back from a spin-down). Every
    /// layer hears of every device.
    fn on_transition(&mut self, now: Nanos, device: DeviceId, to: PowerStateId) {
        let _ = (now, device, to);
    }

    /// The bytes asked for by an [`Action::Take`] with `tag` (a metadata read that came
    /// back: see [`crate::journal`]).
    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        let _ = (now, tag, bytes, out);
    }

    /// Regions of devices this function reserves for its own metadata (asked once, after
    /// `attach`). The stack refuses overlapping or out-of-range regions; the simulator keeps
    /// the bytes written there (following the durable/volatile rule, so a simulated crash
    /// loses what a real one could), the integrity checker refuses host data written into
    /// them. The function must keep them out of the space it exports.
    fn regions(&self) -> Vec<Region> {
        Vec::new()
    }

    /// After the unload (`on_stop` and the I/O it sent are done): what the layer could not
    /// finish, in a sentence, or `None` if it finished — a write-back cache whose origin
    /// failed the write-back still holds dirty data, so the origin device alone is not the
    /// volume. The executors report it with the unload (`summary.json` `unload.left`, a
    /// warning when the live server stops). Default: `None`.
    fn unload_left(&self) -> Option<String> {
        None
    }

    /// Function-specific counters for the run summary (e.g. cache hits, gear shifts).
    fn counters(&self) -> Vec<(String, f64)> {
        Vec::new()
    }

    /// The host volume this layer presents in place of its member devices (an array), once
    /// attached. Live, `wattio serve` exports it instead of the members.
    fn volume(&self) -> Option<Volume> {
        None
    }

    /// At most how many of its scratch buffers this function keeps alive now: bytes it
    /// holds for later (copies under way, prefetched data). A scratch buffer alive with no
    /// I/O out on it that no function claims is a leak; the swarm test checks the kernel
    /// never has more such buffers than the functions claim together.
    fn scratch_buffers(&self) -> usize {
        0
    }
}

/// A host volume a layer presents over several devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Volume {
    /// Export name.
    pub name: String,
    /// The host device id requests to it carry.
    pub dev: DeviceId,
    /// Bytes.
    pub size: u64,
    /// The devices it is made of (not exported on their own).
    pub members: Vec<DeviceId>,
}

impl<F: Function + ?Sized> Function for Box<F> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        (**self).attach(devices)
    }
    fn on_start(&mut self, now: Nanos, out: &mut Actions) {
        (**self).on_start(now, out)
    }
    fn on_stop(&mut self, now: Nanos, out: &mut Actions) {
        (**self).on_stop(now, out)
    }
    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        (**self).on_request(now, io, out)
    }
    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        (**self).on_completion(now, done, out)
    }
    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        (**self).on_timer(now, timer, out)
    }
    fn on_power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
        (**self).on_power(now, device, state)
    }
    fn on_transition(&mut self, now: Nanos, device: DeviceId, to: PowerStateId) {
        (**self).on_transition(now, device, to)
    }
    fn on_bytes(&mut self, now: Nanos, tag: u64, bytes: &[u8], out: &mut Actions) {
        (**self).on_bytes(now, tag, bytes, out)
    }
    fn regions(&self) -> Vec<Region> {
        (**self).regions()
    }
    fn counters(&self) -> Vec<(String, f64)> {
        (**self).counters()
    }
    fn unload_left(&self) -> Option<String> {
        (**self).unload_left()
    }
    fn volume(&self) -> Option<Volume> {
        (**self).volume()
    }
    fn scratch_buffers(&self) -> usize {
        (**self).scratch_buffers()
    }
}
