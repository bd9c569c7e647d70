//! Live mode: run any wattio function stack in real time in front of a real guest's disk.
//!
//! * [`proto`] — the NBD protocol, sans-I/O (server state machine, encoders).
//! * [`session`] — the live executor: the simulator's `Stack` and `DeviceRuntime`s on the
//!   wall clock, with every effect carried out on real component devices.
//! * [`server`] — Unix-socket / TCP NBD server feeding a session, with bounded resources.
//! * [`tls`] — `NBD_OPT_STARTTLS` certificates (rustls).
//! * [`client`] — a small NBD client, for [`replay`] and the tests.
//! * [`backend`] — component devices (image files, block devices, optional O_DIRECT).
//! * [`capture`] — recording the guest's requests as a trace.
//! * [`probe`] — the geometry probe run live against a file, block device or NBD export.

pub mod backend;
pub mod capture;
pub mod client;
pub mod probe;
pub mod proto;
pub mod replay;
pub mod report;
pub mod server;
pub mod session;
pub mod setup;
pub mod tls;

pub use backend::{Backend, ComponentSpec};
pub use server::{Limits, ListenAddr, Server, ServerOptions};
pub use session::{DeviceSetup, ExportSpec, ReplySink, Session, SessionOptions, Summary};
