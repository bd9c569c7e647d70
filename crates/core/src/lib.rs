//! The contract every other wattio crate builds on.
//!
//! * [`io`] — what travels: trace [`Request`]s, in-flight [`Io`]s and their [`Completion`]s.
//! * [`function`] — the sans-I/O [`Function`] interface: events in, [`Action`]s out.
//! * [`stack`] — composes functions from the host down to the devices; both executors
//!   (simulated and live) drive a [`Stack`] and carry out the [`Effect`]s it returns.
//! * [`kernel`] — what both executors share around the stack: the layer-timer table,
//!   device-event routing, host-request accounting and the [`DataObserver`] hook.
//! * [`power`] / [`ledger`] — device power state machines and the energy ledger.
//! * [`device`] — the two faces of a device: [`Timing`] (service time) and the
//!   [`DeviceRuntime`] that queues I/O, runs the power state machine and keeps the ledger.
//! * [`trace`] — the streaming trace source interface.
//! * [`stats`] — bounded-memory latency statistics.
//! * Helpers functions share, written once: [`fanout`] (split an I/O, reply when all parts
//!   are back), [`copy`] (own I/O that moves data through a scratch buffer),
//!   [`flush_round`] (finished copies a journal may log only after a FLUSH made their
//!   source durable), [`periodic`] (a drift-free periodic timer), [`geometry`] (where an
//!   offset lies on the platters).
//! * [`testing`] — a scripted harness that drives one function by hand.
//! * [`integrity`] — the data-integrity checker: a version per block instead of bytes.
//! * Functions' own metadata: [`region`] (a device range a function reserves), [`journal`]
//!   (an on-device log of records with two alternating headers, CRC32C and checkpoints,
//!   written and read back through ordinary I/O), [`media`] (the bytes the simulator keeps
//!   of those regions, durable or volatile).

pub mod block_index;
pub mod copy;
pub mod device;
pub mod fanout;
pub mod flush_round;
pub mod function;
pub mod fxhash;
pub mod geometry;
pub mod integrity;
pub mod io;
pub mod journal;
pub mod kernel;
pub mod ledger;
pub mod media;
pub mod periodic;
pub mod power;
pub mod region;
pub mod scratch;
pub mod stack;
pub mod stats;
pub mod testing;
pub mod time;
pub mod trace;

pub use device::{DevEvent, DeviceInfo, DeviceRuntime, Service, Timing};
pub use function::{Action, Actions, Function, Span, TimerId, Volume};
pub use geometry::{Geometry, Location};
pub use integrity::Checker;
pub use io::{Breakdown, Buf, Completion, DeviceId, Io, IoId, Op, Request, Status};
pub use kernel::{DataObserver, Event, Executor, HostRequest, Hosts, Kernel, NoObserver};
pub use ledger::{Ledger, LedgerRow};
pub use power::{FlushAsleep, PowerSpec, PowerState, PowerStateId, Transition};
pub use region::Region;
pub use stack::{Effect, Effects, Stack};
pub use time::Nanos;
pub use trace::{TraceError, TraceSource};
