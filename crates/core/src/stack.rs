//! A stack of functions from the host down to the devices, itself sans-I/O.
//!
//! Both executors own a [`Stack`], hand it host requests, device completions, timer expiries
//! and power notifications, and carry out the [`Effect`]s it returns. Routing between layers
//! (a `Submit` from layer k is a request to layer k+1; a `Reply` from layer k is a completion
//! to layer k−1) happens here, once, so the two executors cannot disagree about it.

use crate::device::DeviceInfo;
use crate::function::{Action, Actions, Function, TimerId};
use crate::io::{Completion, DeviceId, Io};
use crate::power::PowerStateId;
use crate::time::Nanos;
use std::collections::VecDeque;

/// What the executor must do.
#[derive(Clone, Copy, Debug, PartialEq)]
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
}

enum Work {
    Request(usize, Io),
    Completion(usize, Completion),
}

pub struct Stack {
    layers: Vec<Box<dyn Function>>,
    work: VecDeque<Work>,
    acts: Actions,
}

impl Stack {
    /// `layers[0]` faces the host; the last layer faces the devices. An empty stack passes
    /// host I/O straight to device `io.dev`.
    pub fn new(layers: Vec<Box<dyn Function>>) -> Stack {
        Stack {
            layers,
            work: VecDeque::new(),
            acts: Actions::new(),
        }
    }

    pub fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        for l in &mut self.layers {
            let name = l.name().to_string();
            l.attach(devices)
                .map_err(|e| format!("function `{name}`: {e}"))?;
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    pub fn layers(&self) -> &[Box<dyn Function>] {
        &self.layers
    }

    /// The run starts: every layer's `on_start`, top down.
    pub fn start(&mut self, now: Nanos, fx: &mut Vec<Effect>) {
        for layer in 0..self.layers.len() {
            self.acts.clear();
            self.layers[layer].on_start(now, &mut self.acts);
            self.route(layer, now, fx);
            self.run(now, fx);
        }
    }

    /// A request from the host.
    #[inline]
    pub fn request(&mut self, now: Nanos, io: Io, fx: &mut Vec<Effect>) {
        if self.layers.is_empty() {
            fx.push(Effect::Submit(io));
            return;
        }
        // The event goes straight to its layer, not through the work queue, which only holds
        // what it causes between layers: every copy of an `Io` costs on the hot path.
        self.request_at(0, now, io, fx);
        self.run(now, fx);
    }

    /// A device finished an I/O submitted by the bottom layer.
    #[inline]
    pub fn device_completion(&mut self, now: Nanos, done: Completion, fx: &mut Vec<Effect>) {
        if self.layers.is_empty() {
            fx.push(Effect::HostReply(done));
            return;
        }
        self.completion_at(self.layers.len() - 1, now, done, fx);
        self.run(now, fx);
    }

    /// Timer `timer` of `layer` expired.
    pub fn timer(&mut self, now: Nanos, layer: usize, timer: TimerId, fx: &mut Vec<Effect>) {
        self.acts.clear();
        self.layers[layer].on_timer(now, timer, &mut self.acts);
        self.route(layer, now, fx);
        self.run(now, fx);
    }

    /// A device entered a power state: every layer hears of it.
    pub fn power(&mut self, now: Nanos, device: DeviceId, state: PowerStateId) {
        for l in &mut self.layers {
            l.on_power(now, device, state);
        }
    }

    #[inline]
    fn run(&mut self, now: Nanos, fx: &mut Vec<Effect>) {
        while let Some(w) = self.work.pop_front() {
            match w {
                Work::Request(l, io) => self.request_at(l, now, io, fx),
                Work::Completion(l, done) => self.completion_at(l, now, done, fx),
            }
        }
    }

    /// Layer `l` handles a request, and its actions are routed.
    #[inline]
    fn request_at(&mut self, l: usize, now: Nanos, io: Io, fx: &mut Vec<Effect>) {
        self.acts.clear();
        self.layers[l].on_request(now, io, &mut self.acts);
        self.route(l, now, fx);
    }

    /// Layer `l` handles a completion, and its actions are routed.
    #[inline]
    fn completion_at(&mut self, l: usize, now: Nanos, done: Completion, fx: &mut Vec<Effect>) {
        self.acts.clear();
        self.layers[l].on_completion(now, done, &mut self.acts);
        self.route(l, now, fx);
    }

    #[inline]
    fn route(&mut self, layer: usize, now: Nanos, fx: &mut Vec<Effect>) {
        let bottom = self.layers.len() - 1;
        // By reference, not drained by value: each action is copied once, into its effect.
        for a in self.acts.as_slice() {
            match a {
                Action::Submit(io) => {
                    if layer == bottom {
                        fx.push(Effect::Submit(*io));
                    } else {
                        self.work.push_back(Work::Request(layer + 1, *io));
                    }
                }
                Action::Reply(done) => {
                    // A reply completes now, whatever the function copied from below.
                    let done = Completion {
                        finished: now,
                        ..*done
                    };
                    if layer == 0 {
                        fx.push(Effect::HostReply(done));
                    } else {
                        self.work.push_back(Work::Completion(layer - 1, done));
                    }
                }
                &Action::SetPower { device, state } => fx.push(Effect::SetPower { device, state }),
                &Action::SetTimer { timer, at } => fx.push(Effect::SetTimer { layer, timer, at }),
                &Action::CancelTimer { timer } => fx.push(Effect::CancelTimer { layer, timer }),
            }
        }
        self.acts.clear();
    }
}
