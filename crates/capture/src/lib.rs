//! Real workloads in: capture what a real program does on this Linux machine.
//!
//! * [`block`] — `wattio capture block`: block requests (`block_rq_issue`/`block_rq_complete`
//!   through tracefs) of a command run on a loop-mounted file-system image, written as a
//!   columnar trace with issue time, measured response, op, offset, length, pid and process.
//! * [`blockevents`] — the parser of those tracefs event lines and the issue/complete matcher.
//! * [`files`] — `wattio capture files`: file-level system calls through strace ([`strace`]
//!   parses its output and reconstructs file offsets), as a file-call trace.
//! * [`launch`] — `wattio capture launch`: a cold launch's page-cache insertions and block
//!   requests between its start and end.
//! * The machinery underneath, each piece a guard that undoes itself on every exit path
//!   (success, failing command, SIGINT/SIGTERM, error): [`tracefs`] (a private tracing
//!   instance), [`image`] (mkfs, loop device, mount), [`command`] (the traced command in its
//!   own process group) and [`interrupt`] (SIGINT/SIGTERM turned into a flag while capturing).

pub mod block;
pub mod blockevents;
pub mod command;
pub mod error;
pub mod files;
pub mod image;
pub mod interrupt;
pub mod launch;
pub mod strace;
pub mod tracefs;

pub use block::{capture_block, BlockCapture, BlockOptions};
pub use error::CaptureError;
pub use files::{capture_files, FilesCapture};
pub use launch::{capture_launch, LaunchCapture};
