//! Copying data between places on devices with a function's own I/O.
//!
//! A cache that fills or flushes (EXCES reconfiguration), a RAID that propagates dirty
//! blocks to a disk it spun up (PARAID), a replicator that writes replicas (FS2): each moves
//! bytes from one device offset to another without a host request. The function issues a
//! read into a scratch buffer, then, once it completes, a write out of the same buffer. The
//! live executor allocates the scratch buffer on the read and frees it after the write; the
//! simulator's data checker follows the versions through it. [`Copier`] keeps that two-step
//! bookkeeping, written once.

use crate::function::Actions;
use crate::fxhash::FxHashMap;
use crate::io::{Completion, DeviceId, Io, IoId, Op, Status};

/// One copy to perform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyJob {
    /// The caller's name for the copy, handed back when it is done.
    pub tag: u64,
    pub from_dev: DeviceId,
    pub from: u64,
    pub to_dev: DeviceId,
    pub to: u64,
    pub len: u32,
    /// Device-queue priority of both I/Os (background copies are usually < 0).
    pub priority: i8,
    /// Write with force unit access (the copy is durable when it is done).
    pub fua: bool,
}

/// What a completion meant to the copier.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CopyStep {
    /// Not one of the copier's I/Os.
    NotMine,
    /// The read is back: submit this write.
    Write(Io),
    /// The copy is over: its write completed, or its read failed (then nothing was written).
    Done { job: CopyJob, status: Status },
}

/// Copies in flight, each named by an own-I/O number that is also its scratch buffer's id.
#[derive(Default)]
pub struct Copier {
    jobs: FxHashMap<u64, CopyJob>,
    next: u64,
}

impl Copier {
    /// `base` is the first own-I/O number to use: a function with other own I/O gives each
    /// kind its own range (numbers are below 2^62).
    pub fn new(base: u64) -> Copier {
        Copier {
            jobs: FxHashMap::default(),
            next: base,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.jobs.len()
    }

    /// Start `job`: submit the read this returns.
    pub fn start(&mut self, job: CopyJob) -> Io {
        let n = self.reserve();
        self.jobs.insert(n, job);
        let mut io = Io::own(n, Op::Read, job.from_dev, job.from, job.len);
        io.priority = job.priority;
        io
    }

    /// Reserve the number, and so the scratch buffer id, of a copy whose bytes the function
    /// puts into the buffer itself (an [`Action::Xor`](crate::function::Action::Xor) of
    /// data it has in a host buffer into the fresh, zeroed buffer), then starts with
    /// [`Copier::start_filled`]: a copy from memory, with no read.
    pub fn reserve(&mut self) -> u64 {
        let n = self.next;
        self.next = (self.next + 1) & (IoId::SUB - 1);
        n
    }

    /// Start `job` from the scratch buffer `n` (from [`Copier::reserve`]), already filled:
    /// submit the write this returns; its completion ends the copy.
    pub fn start_filled(&mut self, n: u64, job: CopyJob) -> Io {
        self.jobs.insert(n, job);
        write(n, &job)
    }

    /// The copy an I/O of the copier belongs to (its read or its write).
    pub fn job(&self, io: &Io) -> Option<CopyJob> {
        if !io.id.is_own() || io.id.is_sub() {
            return None;
        }
        self.jobs.get(&(io.id.0 & (IoId::SUB - 1))).copied()
    }

    /// Forget the copy whose read returned `write`, without submitting it: the function
    /// stopped the copy while its read was out (EXCES: a foreground write to a page being
    /// moved supersedes the moved data). Its scratch buffer, which only the write would
    /// have drained, is released (`out`).
    pub fn abandon(&mut self, write: &Io, out: &mut Actions) -> Option<CopyJob> {
        if !write.id.is_own() || write.id.is_sub() {
            return None;
        }
        let job = self.jobs.remove(&(write.id.0 & (IoId::SUB - 1)))?;
        out.release(write.buf);
        Some(job)
    }

    /// A completion reached the layer. When it ends the copy (a failed read, or the
    /// write back) the copy's buffer is released (`out`): a failed read leaves nothing to
    /// drain it, and a layer below may have written the bytes out of buffers of its own
    /// (a RAID level computing parity), so the write back need not have drained it. A
    /// release of a buffer already freed by its write is nothing.
    pub fn complete(&mut self, done: &Completion, out: &mut Actions) -> CopyStep {
        let id = done.io.id;
        if !id.is_own() || id.is_sub() {
            return CopyStep::NotMine;
        }
        let n = id.0 & (IoId::SUB - 1);
        let Some(&job) = self.jobs.get(&n) else {
            return CopyStep::NotMine;
        };
        if done.io.op == Op::Read && done.status == Status::Ok {
            return CopyStep::Write(write(n, &job));
        }
        out.release(done.io.buf);
        self.jobs.remove(&n);
        CopyStep::Done {
            job,
            status: done.status,
        }
    }
}

/// The write of copy `n`, out of its scratch buffer.
fn write(n: u64, job: &CopyJob) -> Io {
    let mut w = Io::own(n, Op::Write, job.to_dev, job.to, job.len);
    w.priority = job.priority;
    w.fua = job.fua;
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Breakdown, Buf};

    fn ok(io: Io, status: Status) -> Completion {
        Completion {
            io,
            status,
            finished: 0,
            breakdown: Breakdown::default(),
        }
    }

    fn job(tag: u64) -> CopyJob {
        CopyJob {
            tag,
            from_dev: 1,
            from: 8192,
            to_dev: 0,
            to: 4096,
            len: 4096,
            priority: -1,
            fua: true,
        }
    }

    #[test]
    fn read_into_scratch_then_write_out_of_it() {
        let mut c = Copier::new(100);
        let r = c.start(job(9));
        assert_eq!((r.op, r.dev, r.offset, r.len), (Op::Read, 1, 8192, 4096));
        assert_eq!(r.buf, Buf::Scratch { id: 100, offset: 0 });
        assert_eq!(r.priority, -1);
        let mut out = Actions::new();
        let CopyStep::Write(w) = c.complete(&ok(r, Status::Ok), &mut out) else {
            panic!("expected the write")
        };
        assert!(out.as_slice().is_empty(), "the write still needs the bytes");
        assert_eq!(
            (w.op, w.dev, w.offset, w.len, w.fua),
            (Op::Write, 0, 4096, 4096, true)
        );
        assert_eq!(w.buf, r.buf, "the write drains the buffer the read filled");
        assert_eq!(
            c.complete(&ok(w, Status::Ok), &mut out),
            CopyStep::Done {
                job: job(9),
                status: Status::Ok
            }
        );
        assert_eq!(
            out.as_slice(),
            &[crate::function::Action::Release { buf: r.buf }],
            "the copy is over: its buffer is released (a lower layer may not have drained it)"
        );
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn a_copy_from_memory_is_only_its_write() {
        let mut c = Copier::new(40);
        let first = c.start(job(1));
        let n = c.reserve();
        assert_eq!(n, 41, "numbers are shared with copies that read");
        let w = c.start_filled(n, job(2));
        assert_eq!(
            (w.op, w.dev, w.offset, w.len, w.fua, w.priority),
            (Op::Write, 0, 4096, 4096, true, -1)
        );
        assert_eq!(w.buf, Buf::Scratch { id: 41, offset: 0 });
        assert_eq!(c.job(&w), Some(job(2)));
        assert_eq!(c.in_flight(), 2);
        assert_eq!(
            c.complete(&ok(w, Status::Ok), &mut Actions::new()),
            CopyStep::Done {
                job: job(2),
                status: Status::Ok
            }
        );
        assert_eq!(c.job(&first), Some(job(1)));
        assert_eq!(c.in_flight(), 1);
        assert_eq!(c.start(job(3)).id, Io::own(42, Op::Read, 1, 0, 1).id);
    }

    #[test]
    fn an_abandoned_copy_is_forgotten() {
        let mut c = Copier::new(5);
        let r = c.start(job(3));
        assert_eq!(c.job(&r), Some(job(3)));
        let CopyStep::Write(w) = c.complete(&ok(r, Status::Ok), &mut Actions::new()) else {
            panic!("expected the write")
        };
        let mut out = Actions::new();
        assert_eq!(c.abandon(&w, &mut out), Some(job(3)));
        assert_eq!(
            out.as_slice(),
            &[crate::function::Action::Release { buf: r.buf }],
            "the buffer the read filled is freed"
        );
        assert_eq!(c.in_flight(), 0);
        assert_eq!(c.job(&w), None);
        assert_eq!(
            c.complete(&ok(w, Status::Ok), &mut Actions::new()),
            CopyStep::NotMine
        );
    }

    #[test]
    fn a_failed_read_ends_the_copy_without_a_write() {
        let mut c = Copier::new(0);
        let r = c.start(job(1));
        let mut out = Actions::new();
        assert_eq!(
            c.complete(&ok(r, Status::IoError), &mut out),
            CopyStep::Done {
                job: job(1),
                status: Status::IoError
            }
        );
        assert_eq!(
            out.as_slice(),
            &[crate::function::Action::Release { buf: r.buf }],
            "no write will drain the buffer the read failed into: it is freed"
        );
        // Forwarded and sub-I/O ids are not the copier's.
        let fwd = crate::io::Request::new(0, Op::Read, 0, 512).io(0);
        assert_eq!(
            c.complete(&ok(fwd, Status::Ok), &mut Actions::new()),
            CopyStep::NotMine
        );
        let mut sub = fwd;
        sub.id = IoId::sub(0);
        assert_eq!(
            c.complete(&ok(sub, Status::Ok), &mut Actions::new()),
            CopyStep::NotMine
        );
    }
}
