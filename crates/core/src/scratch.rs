//! When a function's scratch buffer is freed: one rule, kept by the executor kernel for
//! both executors and the data observer.
//!
//! A scratch buffer (`Buf::Scratch`) is created by the first thing that puts bytes in it
//! (a fill, an xor or copy into it, an I/O on it) and lives while I/O is out on it: device I/O,
//! I/O a layer passed to the one below until its reply is back up (a lower layer may
//! split a write and send the pieces at different times), and I/O a function handed to a
//! part of itself the stack does not see, from [`Action::Hold`](crate::function::Action::Hold)
//! to [`Action::Unhold`](crate::function::Action::Unhold) (PARAID's arrays inside it). It is
//! freed
//!
//! * when the last I/O out on it comes back and that I/O was a write (the write that
//!   drains it: a copy's or a parity's buffer is done once written);
//! * when the function releases it ([`Action::Release`](crate::function::Action::Release)):
//!   at once if nothing is out on it, else when the last I/O out on it comes back (a read
//!   included: a released buffer is not written again);
//! * when the function takes its bytes ([`Action::Take`](crate::function::Action::Take)).
//!
//! The kernel tells whoever keeps the bytes (its own [`ScratchBytes`](crate::media::ScratchBytes)
//! in simulation, the live executor's buffers) and the observer (the data checker's
//! versions) through one call: they keep no count of their own.

use crate::fxhash::FxHashMap;
use crate::io::{Buf, Io, Op};

/// Per live scratch buffer: I/O out on it, whether the function released it, and how many
/// bytes it holds.
#[derive(Clone, Copy, Debug, Default)]
struct Life {
    out: u32,
    released: bool,
    /// Bytes from its start that something put there: a read into it that is back, a copy,
    /// xor or fill into it. A copy or xor out of it must stay within them: live, a read's
    /// bytes exist once the device has served it, so reading the buffer earlier would depend
    /// on the wall clock; both executors refuse it here, the same way.
    extent: u64,
}

/// The live scratch buffers and what is out on each.
#[derive(Clone, Debug, Default)]
pub struct ScratchLife {
    bufs: FxHashMap<u64, Life>,
}

/// The scratch buffer an I/O moves bytes of, if any.
#[inline]
fn moving(io: &Io) -> Option<u64> {
    match io.buf {
        Buf::Scratch { id, .. } if matches!(io.op, Op::Read | Op::Write) => Some(id),
        _ => None,
    }
}

impl ScratchLife {
    /// Buffers alive.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    /// Buffers alive with no I/O out on them: held by their functions.
    pub fn held(&self) -> usize {
        self.bufs.values().filter(|l| l.out == 0).count()
    }

    /// `len` bytes were put into `buf` (a fill, an xor or copy into it): it exists, and
    /// holds at least up to their end.
    pub fn open(&mut self, buf: Buf, len: u32) {
        if let Buf::Scratch { id, offset } = buf {
            let l = self.bufs.entry(id).or_default();
            l.extent = l.extent.max(u64::from(offset) + u64::from(len));
        }
    }

    /// Whether scratch buffer `buf` holds `len` bytes from its offset; `Err` with the bytes
    /// it holds if not (0 for a buffer nothing made). Other buffers: `Ok`.
    pub fn holds(&self, buf: Buf, len: u32) -> Result<(), u64> {
        let Buf::Scratch { id, offset } = buf else {
            return Ok(());
        };
        let have = self.bufs.get(&id).map_or(0, |l| l.extent);
        if u64::from(offset) + u64::from(len) <= have {
            Ok(())
        } else {
            Err(have)
        }
    }

    /// `io` left (to a device, or to a lower layer).
    #[inline]
    pub fn out(&mut self, io: &Io) {
        if let Some(id) = moving(io) {
            self.bufs.entry(id).or_default().out += 1;
        }
    }

    /// `io` came back; the buffer it freed, if it did.
    #[inline]
    pub fn back(&mut self, io: &Io) -> Option<u64> {
        let id = moving(io)?;
        let l = self.bufs.get_mut(&id)?;
        l.out = l.out.saturating_sub(1);
        if io.op == Op::Read {
            if let Buf::Scratch { offset, .. } = io.buf {
                l.extent = l.extent.max(u64::from(offset) + u64::from(io.len));
            }
        }
        if l.out == 0 && (io.op == Op::Write || l.released) {
            self.bufs.remove(&id);
            return Some(id);
        }
        None
    }

    /// The function released `buf`; whether it is freed now (nothing out on it, or not
    /// alive at all). Else its last I/O frees it.
    pub fn release(&mut self, buf: Buf) -> Option<u64> {
        let Buf::Scratch { id, .. } = buf else {
            return None;
        };
        match self.bufs.get_mut(&id) {
            Some(l) if l.out > 0 => {
                l.released = true;
                None
            }
            _ => {
                self.bufs.remove(&id);
                Some(id)
            }
        }
    }

    /// The function took `buf`'s bytes: it is freed (whatever is out on it).
    pub fn take(&mut self, buf: Buf) -> Option<u64> {
        let Buf::Scratch { id, .. } = buf else {
            return None;
        };
        self.bufs.remove(&id);
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Request;

    fn io(op: Op, id: u64) -> Io {
        let mut io = Request::new(0, op, 0, 4096).io(0);
        io.buf = Buf::Scratch { id, offset: 0 };
        io
    }

    #[test]
    fn a_buffer_lives_until_the_last_write_out_of_it_is_back() {
        let mut l = ScratchLife::default();
        let (r, w) = (io(Op::Read, 7), io(Op::Write, 7));
        l.out(&r);
        assert_eq!(l.back(&r), None, "a read fills it: still wanted");
        assert_eq!(l.len(), 1);
        // A write split in two below the layer: held, then two pieces.
        l.out(&w);
        l.out(&w);
        assert_eq!(l.back(&w), None, "one piece back, the hold still out");
        l.out(&w);
        assert_eq!(l.back(&w), None);
        assert_eq!(l.back(&w), Some(7), "the last write back frees it");
        assert!(l.is_empty());
        assert_eq!(l.back(&w), None, "a freed buffer is not freed twice");
    }

    #[test]
    fn release_frees_now_or_at_the_last_io_back_even_a_read() {
        let mut l = ScratchLife::default();
        let b = Buf::Scratch { id: 3, offset: 0 };
        l.open(b, 4096);
        assert_eq!(l.release(b), Some(3), "nothing out: freed at once");
        let r = io(Op::Read, 3);
        l.out(&r);
        assert_eq!(l.release(b), None, "a read is out");
        assert_eq!(l.back(&r), Some(3), "freed when it is back, though a read");
        assert_eq!(l.release(Buf::None), None);
    }

    #[test]
    fn take_frees_and_flushes_do_not_count() {
        let mut l = ScratchLife::default();
        let b = Buf::Scratch { id: 9, offset: 512 };
        l.out(&io(Op::Flush, 9));
        assert!(l.is_empty(), "a flush moves no bytes");
        l.out(&io(Op::Write, 9));
        assert_eq!(l.take(b), Some(9));
        assert!(l.is_empty());
    }

    /// What a buffer holds: a read's bytes once it is back, a copy's or fill's at once; a
    /// buffer nothing made holds none.
    #[test]
    fn a_buffer_holds_what_came_back_into_it_or_was_put_there() {
        let mut l = ScratchLife::default();
        let at = |off| Buf::Scratch { id: 4, offset: off };
        assert_eq!(l.holds(at(0), 1), Err(0));
        let r = io(Op::Read, 4); // 4096 bytes at offset 0
        l.out(&r);
        assert_eq!(l.holds(at(0), 4096), Err(0), "the read is not back");
        l.back(&r);
        assert_eq!(l.holds(at(0), 4096), Ok(()));
        assert_eq!(l.holds(at(1), 4096), Err(4096), "one byte past its end");
        l.open(at(8192), 100);
        assert_eq!(l.holds(at(4096), 4196), Ok(()), "the gap reads as zeros");
        assert_eq!(l.holds(Buf::None, 10), Ok(()));
        assert_eq!(l.holds(Buf::Host { id: 1, offset: 0 }, 10), Ok(()));
    }

    #[test]
    fn held_counts_the_buffers_alive_with_nothing_out() {
        let mut l = ScratchLife::default();
        let (r, w) = (io(Op::Read, 1), io(Op::Write, 2));
        l.out(&r);
        l.out(&w);
        assert_eq!((l.len(), l.held()), (2, 0), "both have I/O out");
        l.back(&r);
        assert_eq!((l.len(), l.held()), (2, 1), "the read's buffer waits, idle");
        l.open(Buf::Scratch { id: 3, offset: 0 }, 4096);
        assert_eq!(l.held(), 2, "a filled buffer nothing was sent from");
        l.back(&w);
        assert_eq!((l.len(), l.held()), (2, 2), "the write freed its buffer");
    }
}
