//! What travels through a stack: trace requests, in-flight I/Os and completions.

use crate::time::Nanos;
use serde::{Deserialize, Serialize};

/// Index of a physical device in a run (position in the run's device list).
pub type DeviceId = u16;

/// Identifies an I/O on one edge of the stack (host → layer 0, layer k → layer k+1,
/// bottom layer → devices). The layer that *issues* an I/O keeps its ids unique among its
/// own outstanding I/Os; a pass-through layer may reuse the id it received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IoId(pub u64);

impl IoId {
    /// Bit reserved for I/Os a function originates itself (prefetch, reconfiguration, …), so
    /// they never collide with ids it forwards from above.
    pub const OWN: u64 = 1 << 63;

    /// Bit marking a sub-I/O a function split off an I/O it received
    /// ([`Fanout`](crate::fanout::Fanout)); always with [`IoId::OWN`], so sub-I/O ids never
    /// collide with forwarded ids nor with other own I/O ([`IoId::own`] leaves it clear).
    pub const SUB: u64 = 1 << 62;

    /// Own I/O number `n`; keep `n` below 2^62 (the higher bits are the id flags).
    pub fn own(n: u64) -> IoId {
        IoId(n | Self::OWN)
    }

    /// The id of sub-I/O `n` (below 2^62).
    pub fn sub(n: u64) -> IoId {
        IoId(n | Self::OWN | Self::SUB)
    }

    /// Own I/O or a sub-I/O: not an id forwarded from above.
    pub fn is_own(self) -> bool {
        self.0 & Self::OWN != 0
    }

    pub fn is_sub(self) -> bool {
        self.0 & (Self::OWN | Self::SUB) == Self::OWN | Self::SUB
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Op {
    Read = 0,
    Write = 1,
    Flush = 2,
    Discard = 3,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
        }
    }

    pub fn from_code(c: u8) -> Option<Op> {
        Some(match c {
            0 => Op::Read,
            1 => Op::Write,
            2 => Op::Flush,
            3 => Op::Discard,
            _ => return None,
        })
    }

    /// Does this operation move data to or from the media?
    #[inline]
    pub fn moves_data(self) -> bool {
        matches!(self, Op::Read | Op::Write)
    }
}

/// Where the bytes of an I/O live. The simulator ignores it; the live executor uses it to
/// assemble host replies from sub-I/Os and to carry data a function moves between devices
/// (a read into a scratch buffer followed by a write out of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Buf {
    /// No data (flush, discard, or the simulator).
    #[default]
    None,
    /// `offset` bytes into the buffer of host request `id`.
    Host { id: u64, offset: u32 },
    /// `offset` bytes into a scratch buffer owned by the issuing function, named by `id`.
    Scratch { id: u64, offset: u32 },
}

impl Buf {
    /// The same buffer `delta` bytes further on (where a sub-I/O's bytes start).
    #[inline]
    pub fn at(self, delta: u32) -> Buf {
        match self {
            Buf::None => Buf::None,
            Buf::Host { id, offset } => Buf::Host {
                id,
                offset: offset + delta,
            },
            Buf::Scratch { id, offset } => Buf::Scratch {
                id,
                offset: offset + delta,
            },
        }
    }
}

/// A request as a trace records it, normalized to nanoseconds and bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    pub arrival: Nanos,
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    /// Device, volume or LUN index within the trace.
    pub dev: u16,
    /// Stream / process id (0 when the trace has none).
    pub stream: u32,
    pub file: Option<u64>,
    pub call_site: Option<u64>,
    /// Response time measured when the trace was recorded (MSR, DiskSim validate), if any.
    pub measured: Option<Nanos>,
    /// A write with force unit access (durable when acknowledged). Trace formats without the
    /// flag leave it false; generated and test workloads set it.
    pub fua: bool,
}

impl Request {
    pub fn new(arrival: Nanos, op: Op, offset: u64, len: u32) -> Request {
        Request {
            arrival,
            op,
            offset,
            len,
            dev: 0,
            stream: 0,
            file: None,
            call_site: None,
            measured: None,
            fua: false,
        }
    }

    /// The I/O the host issues for this request.
    #[inline]
    pub fn io(&self, id: u64) -> Io {
        Io {
            id: IoId(id),
            op: self.op,
            fua: self.fua,
            priority: 0,
            dev: self.dev,
            stream: self.stream,
            offset: self.offset,
            len: self.len,
            file: self.file,
            call_site: self.call_site,
            buf: Buf::Host { id, offset: 0 },
        }
    }
}

/// An I/O in flight on one edge of the stack.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Io {
    pub id: IoId,
    pub op: Op,
    /// Force unit access: the write must be durable when it completes.
    pub fua: bool,
    /// Higher is served first at a device queue (IOLab's dispatcher priorities); the guest's
    /// I/O has priority 0.
    pub priority: i8,
    /// Target: at the host edge the trace's device/volume; below the bottom layer, the
    /// physical [`DeviceId`]. Layers remap it as they route.
    pub dev: u16,
    pub stream: u32,
    pub offset: u64,
    pub len: u32,
    pub file: Option<u64>,
    pub call_site: Option<u64>,
    pub buf: Buf,
}

impl Io {
    /// A bare I/O a function originates itself.
    #[inline]
    pub fn own(n: u64, op: Op, dev: DeviceId, offset: u64, len: u32) -> Io {
        Io {
            id: IoId::own(n),
            op,
            fua: false,
            priority: 0,
            dev,
            stream: 0,
            offset,
            len,
            file: None,
            call_site: None,
            buf: Buf::Scratch { id: n, offset: 0 },
        }
    }

    /// One past the last byte, saturating at 2^64 − 1: an I/O whose end would wrap is past
    /// the end of any device, never at its start (readers refuse such requests; functions
    /// and clients may still make them).
    #[inline]
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.len as u64)
    }
}

/// Outcome of an I/O. Errors use the NBD/errno vocabulary so the live executor can pass
/// them to the guest unchanged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Status {
    #[default]
    Ok,
    /// EIO
    IoError,
    /// EINVAL: out of range, misaligned.
    Invalid,
    /// ENOSPC
    NoSpace,
    /// ENOTSUP
    NotSupported,
}

impl Status {
    /// Every status's name, in [`Status::index`] order: what tables and Python show.
    pub const NAMES: [&'static str; 5] = ["ok", "io-error", "invalid", "no-space", "not-supported"];

    /// The position of this status in [`Status::NAMES`].
    pub fn index(self) -> usize {
        match self {
            Status::Ok => 0,
            Status::IoError => 1,
            Status::Invalid => 2,
            Status::NoSpace => 3,
            Status::NotSupported => 4,
        }
    }

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// The status named `name` (one of [`Status::NAMES`]).
    pub fn from_name(name: &str) -> Option<Status> {
        [
            Status::Ok,
            Status::IoError,
            Status::Invalid,
            Status::NoSpace,
            Status::NotSupported,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// Where a completed I/O's latency went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breakdown {
    /// Waiting behind other I/O (device queue, or inside layers).
    pub queue_ns: Nanos,
    /// Waiting for the device to reach a power state that can serve I/O (spin-up, …).
    pub power_wait_ns: Nanos,
    /// The device servicing the I/O.
    pub service_ns: Nanos,
}

impl Breakdown {
    #[inline]
    pub fn total(&self) -> Nanos {
        self.queue_ns + self.power_wait_ns + self.service_ns
    }
}

/// A finished I/O, delivered to the layer that issued it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Completion {
    /// The I/O as its issuer submitted it.
    pub io: Io,
    pub status: Status,
    /// Completion time.
    pub finished: Nanos,
    pub breakdown: Breakdown,
}

impl Completion {
    pub fn ok(io: Io, finished: Nanos, breakdown: Breakdown) -> Completion {
        Completion {
            io,
            status: Status::Ok,
            finished,
            breakdown,
        }
    }

    /// `io` answered at once with `status` by the layer (no device time): the completion
    /// a layer builds to refuse a request. (`finished` is the executor's to fill.)
    pub fn answered(io: Io, status: Status) -> Completion {
        Completion {
            io,
            status,
            finished: 0,
            breakdown: Breakdown::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_name_reads_back_as_its_status() {
        for (i, &name) in Status::NAMES.iter().enumerate() {
            let s = Status::from_name(name).expect(name);
            assert_eq!((s.index(), s.as_str()), (i, name));
        }
        assert_eq!(Status::from_name("IoError"), None);
        assert_eq!(Status::from_name("error"), None);
    }

    #[test]
    fn an_end_past_2_64_saturates_instead_of_wrapping() {
        // The audit's request: 4 KiB at 2^64 − 100 wrapped to 3,996 and passed a 120 GB
        // capacity check.
        let io = Request::new(0, Op::Write, u64::MAX - 99, 4096).io(0);
        assert_eq!(io.end(), u64::MAX);
        assert!(io.end() > 120_000_000_000);
        assert_eq!(Request::new(0, Op::Read, 4096, 512).io(0).end(), 4608);
    }
}
