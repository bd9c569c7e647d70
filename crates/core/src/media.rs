//! The bytes the simulator keeps: what functions wrote into their metadata regions.
//!
//! The simulator moves no user data, but a function that persists metadata must read back
//! what it wrote, after a restart and after a crash. [`Media`] is a simulated device's
//! content *inside its reserved regions* (outside them it keeps nothing: reads there return
//! zeros), with the integrity checker's durability rule applied to bytes:
//!
//! * a write completing with FUA is durable at once; another completed write is volatile
//!   until a FLUSH submitted after it completes;
//! * a crash ([`Media::crash`]) drops every volatile write and every write in flight —
//!   exactly what real hardware may lose — or, with [`Tear`], lets each 512-byte sector of
//!   them survive or not, as a real power cut may (a torn write).
//!
//! [`ScratchBytes`] is the buffer side: the scratch buffers functions filled with bytes
//! (`Action::Fill`) or read metadata into, named as [`Buf`] names them. The kernel keeps one
//! when it emulates bytes (the simulator), and frees a buffer when the write that drains it
//! completes, as the live executor does.

use crate::fxhash::FxHashMap;
use crate::io::{Buf, Completion, Io, IoId, Op, Status};
use crate::region::Region;
use std::collections::BTreeMap;

/// The sector a torn write keeps or loses as a whole (the classic atomic unit of a disk).
pub const SECTOR: u64 = 512;
/// What a write from a buffer without bytes (user data, which the simulator does not carry)
/// leaves in a region: not zeros, so a function that reads it back sees garbage, as a real
/// device would give it something that is not its metadata.
pub const GARBAGE_BYTE: u8 = 0xA5;

/// How a crash treats writes that were not durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tear {
    /// Every volatile or in-flight write is lost (what the integrity checker assumes).
    LoseAll,
    /// Each 512-byte sector of each volatile or in-flight write survives with probability
    /// 1/2, drawn from this seed (deterministic): torn writes, as a power cut leaves them.
    Sectors(u64),
}

/// One device's bytes in its reserved regions.
#[derive(Debug, Default)]
pub struct Media {
    regions: Vec<Region>,
    /// Durable content, by 4 KiB page (absent: zeros).
    durable: BTreeMap<u64, Box<[u8; 4096]>>,
    /// Completed writes not yet durable, oldest first: (completion number, offset, bytes).
    /// A flush covers the writes numbered up to `done` when it was submitted.
    volatile: Vec<(u64, u64, Vec<u8>)>,
    /// Writes in flight: (id, offset) → bytes taken from the source buffer at submission.
    writes: FxHashMap<(IoId, u64), Vec<u8>>,
    /// Flushes in flight: id → completion number at submission.
    flushes: FxHashMap<IoId, u64>,
    done: u64,
}

impl Media {
    /// Add a region (again after a crash: already known, nothing changes).
    pub fn reserve(&mut self, r: Region) {
        if !self.regions.contains(&r) {
            self.regions.push(r);
        }
    }

    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Does an I/O of `[offset, offset + len)` touch a region?
    #[inline]
    pub fn touches(&self, offset: u64, len: u64) -> bool {
        self.regions
            .iter()
            .any(|r| offset < r.end() && offset.saturating_add(len) > r.offset)
    }

    /// An I/O reaches the device. `src`: a write's bytes (`None`: a buffer without bytes,
    /// i.e. user data). Only I/O touching a region (and flushes) is remembered.
    pub fn submit(&mut self, io: &Io, src: Option<&[u8]>) {
        match io.op {
            Op::Write if self.touches(io.offset, io.len as u64) => {
                let len = io.len as usize;
                let mut b = Vec::with_capacity(len);
                if let Some(s) = src {
                    b.extend_from_slice(&s[..s.len().min(len)]);
                }
                b.resize(len, GARBAGE_BYTE);
                self.writes.insert((io.id, io.offset), b);
            }
            Op::Flush => {
                self.flushes.insert(io.id, self.done);
            }
            _ => {}
        }
    }

    /// An I/O finished: a write lands (durable with FUA, else volatile), a discard zeroes,
    /// a flush makes earlier completed writes durable. A read touching a region returns the
    /// bytes it reads (zeros outside regions and where nothing was written).
    pub fn complete(&mut self, done: &Completion) -> Option<Vec<u8>> {
        let io = &done.io;
        let ok = done.status == Status::Ok;
        match io.op {
            Op::Write => {
                let b = self.writes.remove(&(io.id, io.offset))?;
                if ok {
                    self.land(io.offset, b, io.fua);
                }
                None
            }
            Op::Discard if ok && self.touches(io.offset, io.len as u64) => {
                self.land(io.offset, vec![0; io.len as usize], io.fua);
                None
            }
            Op::Flush => {
                let snap = self.flushes.remove(&io.id)?;
                if ok {
                    let n = self.volatile.iter().take_while(|v| v.0 <= snap).count();
                    let landed: Vec<_> = self.volatile.drain(..n).collect();
                    for (_, off, b) in landed {
                        self.store(off, &b);
                    }
                }
                None
            }
            Op::Read if ok && self.touches(io.offset, io.len as u64) => {
                Some(self.read(io.offset, io.len as u64))
            }
            _ => None,
        }
    }

    fn land(&mut self, offset: u64, b: Vec<u8>, durable: bool) {
        self.done += 1;
        if durable {
            self.store(offset, &b);
        } else {
            self.volatile.push((self.done, offset, b));
        }
    }

    /// Write `b` at `offset` into the durable pages, inside regions only.
    fn store(&mut self, offset: u64, b: &[u8]) {
        for r in &self.regions {
            let from = offset.max(r.offset);
            let to = (offset + b.len() as u64).min(r.end());
            let mut at = from;
            while at < to {
                let page = at / 4096;
                let in_page = (at % 4096) as usize;
                let n = ((4096 - in_page) as u64).min(to - at) as usize;
                let src = &b[(at - offset) as usize..(at - offset) as usize + n];
                let p = self
                    .durable
                    .entry(page)
                    .or_insert_with(|| Box::new([0; 4096]));
                p[in_page..in_page + n].copy_from_slice(src);
                at += n as u64;
            }
        }
    }

    /// The current content of `[offset, offset + len)`: durable pages, then volatile writes
    /// in order; zeros outside regions.
    pub fn read(&self, offset: u64, len: u64) -> Vec<u8> {
        let mut out = vec![0; len as usize];
        let end = offset + len;
        for r in &self.regions {
            let from = offset.max(r.offset);
            let to = end.min(r.end());
            let mut at = from;
            while at < to {
                let page = at / 4096;
                let in_page = (at % 4096) as usize;
                let n = ((4096 - in_page) as u64).min(to - at) as usize;
                if let Some(p) = self.durable.get(&page) {
                    let o = (at - offset) as usize;
                    out[o..o + n].copy_from_slice(&p[in_page..in_page + n]);
                }
                at += n as u64;
            }
            for (_, off, b) in &self.volatile {
                let f = from.max(*off);
                let t = to.min(off + b.len() as u64);
                if f < t {
                    out[(f - offset) as usize..(t - offset) as usize]
                        .copy_from_slice(&b[(f - off) as usize..(t - off) as usize]);
                }
            }
        }
        out
    }

    /// With the machine off (after [`crash`](Self::crash): nothing volatile, nothing in
    /// flight), the disk holding this content and the one holding `other`'s traded places:
    /// each device now holds the other's bytes. The regions stay (they are where the
    /// functions of this slot keep their metadata; the functions find out what is there).
    pub fn trade(&mut self, other: &mut Media) {
        self.assert_at_rest();
        other.assert_at_rest();
        std::mem::swap(&mut self.durable, &mut other.durable);
    }

    /// With the machine off, a blank disk was put in this one's place: every region reads
    /// zeros.
    pub fn blank(&mut self) {
        self.assert_at_rest();
        self.durable.clear();
    }

    fn assert_at_rest(&self) {
        assert!(
            self.volatile.is_empty() && self.writes.is_empty() && self.flushes.is_empty(),
            "a device's content is moved only with the machine off (after a crash)"
        );
    }

    /// A power cut: what was not durable is lost, whole or (with [`Tear::Sectors`]) sector
    /// by sector; I/O in flight is gone.
    pub fn crash(&mut self, tear: Tear) {
        let mut pending: Vec<(u64, Vec<u8>)> = self
            .volatile
            .drain(..)
            .map(|(_, off, b)| (off, b))
            .collect();
        // In flight: in the order they were submitted is unknown (a map): sort for a
        // deterministic draw.
        let mut inflight: Vec<_> = self.writes.drain().collect();
        inflight.sort_by_key(|((id, off), _)| (*off, id.0));
        pending.extend(inflight.into_iter().map(|((_, off), b)| (off, b)));
        self.flushes.clear();
        let Tear::Sectors(seed) = tear else {
            return;
        };
        let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
        for (off, b) in pending {
            let mut at = 0;
            while at < b.len() {
                // Sector boundaries are absolute (a write may start inside a sector only if
                // it is not sector-aligned, which region I/O is not).
                let n =
                    (SECTOR as usize - ((off as usize + at) % SECTOR as usize)).min(b.len() - at);
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x & 1 == 1 {
                    self.store(off + at as u64, &b[at..at + n]);
                }
                at += n;
            }
        }
    }
}

/// The scratch buffers holding bytes, for an executor that does not move bytes itself.
#[derive(Debug, Default)]
pub struct ScratchBytes {
    /// Scratch id → its bytes. When a buffer is freed is the kernel's rule
    /// ([`crate::scratch::ScratchLife`]), which calls [`ScratchBytes::free`].
    bufs: FxHashMap<u64, Vec<u8>>,
}

/// A scratch buffer named by `b`, as (id, byte offset); `None` for other buffers.
fn scratch(b: Buf) -> Option<(u64, usize)> {
    match b {
        Buf::Scratch { id, offset } => Some((id, offset as usize)),
        _ => None,
    }
}

/// A function's `Xor` (`to ^= from`, `xor`) or `Copy` (`to = from`) on bytes: both
/// executors' one rule (the simulator for metadata bytes, live for every buffer).
pub fn combine_bytes(to: &mut [u8], from: &[u8], xor: bool) {
    if xor {
        to.iter_mut().zip(from).for_each(|(t, f)| *t ^= f);
    } else {
        to.copy_from_slice(from);
    }
}

impl ScratchBytes {
    /// Buffers holding bytes (a bound the tests check).
    pub fn held(&self) -> usize {
        self.bufs.len()
    }

    /// `dst[..bytes.len()] = bytes` (the buffer is created, and grown, with zeros).
    pub fn fill(&mut self, dst: Buf, bytes: &[u8]) -> Result<(), String> {
        let (id, off) = scratch(dst).ok_or_else(|| {
            format!("a function filled {dst:?}: only its own scratch buffers take bytes")
        })?;
        let b = self.bufs.entry(id).or_default();
        // Zeros only where nothing is written (a new buffer's bytes are copied in once:
        // every metadata block a function writes passes here).
        if b.len() < off {
            b.resize(off, 0);
        }
        let have = (b.len() - off).min(bytes.len());
        b[off..off + have].copy_from_slice(&bytes[..have]);
        b.extend_from_slice(&bytes[have..]);
        Ok(())
    }

    /// `dst ^= src` (`xor`) or `dst = src` over `len` bytes, where `src` is a scratch
    /// buffer holding bytes (a function's metadata read, answered or rebuilt by a layer
    /// below out of its own buffers): the bytes follow, as the live executor moves them.
    /// `dst` is created, or grown, with zeros; a source holding none (host data, which
    /// the simulator does not carry) changes nothing.
    pub fn combine(&mut self, dst: Buf, src: Buf, len: u32, xor: bool) {
        let (Some((did, doff)), Some((sid, soff))) = (scratch(dst), scratch(src)) else {
            return;
        };
        let Some(s) = self.bufs.get(&sid) else {
            return;
        };
        let len = len as usize;
        let mut from = vec![0; len];
        if soff < s.len() {
            let n = (s.len() - soff).min(len);
            from[..n].copy_from_slice(&s[soff..soff + n]);
        }
        let d = self.bufs.entry(did).or_default();
        if d.len() < doff + len {
            d.resize(doff + len, 0);
        }
        combine_bytes(&mut d[doff..doff + len], &from, xor);
    }

    /// Scratch buffer `id` is freed.
    pub fn free(&mut self, id: u64) {
        self.bufs.remove(&id);
    }

    /// The first `len` bytes of `src` (zeros past what it holds), freeing the buffer.
    pub fn take(&mut self, src: Buf, len: u32) -> Result<Vec<u8>, String> {
        let (id, off) = scratch(src).ok_or_else(|| {
            format!("a function took the bytes of {src:?}: only its own scratch buffers hold bytes")
        })?;
        let b = self.bufs.remove(&id).ok_or_else(|| {
            format!("a function took the bytes of scratch buffer {id}, which holds none")
        })?;
        let mut out = vec![0; len as usize];
        if off < b.len() {
            let n = (b.len() - off).min(len as usize);
            out[..n].copy_from_slice(&b[off..off + n]);
        }
        Ok(out)
    }

    /// A device I/O leaves for a device with media: a write's source bytes, if its buffer
    /// holds any (the caller hands them to the device's [`Media::submit`]); a read into a
    /// scratch buffer creates it, as the live executor does.
    pub fn submit(&mut self, io: &Io) -> Option<&[u8]> {
        let (id, off) = scratch(io.buf)?;
        match io.op {
            Op::Write => {
                let b = self.bufs.get(&id)?;
                let end = (off + io.len as usize).min(b.len());
                Some(&b[off.min(end)..end])
            }
            Op::Read => {
                self.bufs.entry(id).or_default();
                None
            }
            _ => None,
        }
    }

    /// A device read into a scratch buffer returned `bytes` (from the media).
    pub fn complete(&mut self, io: &Io, bytes: Vec<u8>) {
        let Some((id, off)) = scratch(io.buf) else {
            return;
        };
        if let Some(b) = self.bufs.get_mut(&id) {
            if b.len() < off + bytes.len() {
                b.resize(off + bytes.len(), 0);
            }
            b[off..off + bytes.len()].copy_from_slice(&bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{Breakdown, Request};

    fn media() -> Media {
        let mut m = Media::default();
        m.reserve(Region {
            dev: 0,
            offset: 8192,
            len: 8192,
        });
        m
    }

    fn io(id: u64, op: Op, offset: u64, len: u32, fua: bool) -> Io {
        let mut io = Request::new(0, op, offset, len).io(id);
        io.fua = fua;
        io
    }

    fn done(io: Io) -> Completion {
        Completion::ok(io, 0, Breakdown::default())
    }

    /// With the machine off, two devices' durable bytes trade places and a blank one reads
    /// zeros; moving content with a write in flight is refused.
    #[test]
    fn content_is_traded_or_blanked_only_at_rest() {
        let (mut a, mut b) = (media(), media());
        let w = io(1, Op::Write, 8192, 4096, true);
        a.submit(&w, Some(&[7; 4096]));
        a.complete(&done(w));
        a.crash(Tear::LoseAll);
        a.trade(&mut b);
        assert_eq!((a.read(8192, 1), b.read(8192, 1)), (vec![0], vec![7]));
        b.blank();
        assert_eq!(b.read(8192, 1), vec![0]);
        let w = io(2, Op::Write, 8192, 4096, true);
        a.submit(&w, Some(&[1; 4096]));
        let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.blank()));
        assert!(refused.is_err(), "blanked with a write in flight");
    }

    #[test]
    fn fua_is_durable_a_plain_write_waits_for_a_flush_and_a_crash_drops_it() {
        let mut m = media();
        let a = io(1, Op::Write, 8192, 4096, true);
        m.submit(&a, Some(&[1; 4096]));
        m.complete(&done(a));
        let b = io(2, Op::Write, 12288, 4096, false);
        m.submit(&b, Some(&[2; 4096]));
        m.complete(&done(b));
        assert_eq!(m.read(12288, 1), vec![2]);
        // A flush submitted before a write completes does not cover it.
        let f = io(3, Op::Flush, 0, 0, false);
        m.submit(&f, None);
        let c = io(4, Op::Write, 12288, 512, false);
        m.submit(&c, Some(&[3; 512]));
        m.complete(&done(c));
        m.complete(&done(f));
        m.crash(Tear::LoseAll);
        // The FUA write and the flushed write survive; the later one does not.
        assert_eq!(m.read(8192, 1), vec![1]);
        assert_eq!(m.read(12288, 1), vec![2]);
        // Outside the region nothing is kept.
        assert_eq!(m.read(4096, 2), vec![0, 0]);
        let d = done(io(5, Op::Read, 8190, 4, false));
        assert_eq!(m.complete(&d), Some(vec![0, 0, 1, 1]));
    }

    #[test]
    fn a_write_without_bytes_leaves_garbage_and_torn_writes_keep_some_sectors() {
        let mut m = media();
        let a = io(1, Op::Write, 8192, 4096, true);
        m.submit(&a, None);
        m.complete(&done(a));
        assert_eq!(m.read(8192, 2), vec![GARBAGE_BYTE; 2]);
        // Eight sectors in flight at the crash: some land, some do not.
        let b = io(2, Op::Write, 8192, 4096, true);
        m.submit(&b, Some(&[7; 4096]));
        m.crash(Tear::Sectors(42));
        let after = m.read(8192, 4096);
        let kept: Vec<bool> = after.chunks(512).map(|s| s[0] == 7).collect();
        assert!(
            kept.iter().any(|&k| k) && kept.iter().any(|&k| !k),
            "{kept:?}"
        );
        for s in after.chunks(512) {
            assert!(s.iter().all(|&x| x == s[0]), "sectors land whole");
        }
    }

    #[test]
    fn scratch_bytes_are_kept_from_fills_and_reads_until_freed_or_taken() {
        let mut s = ScratchBytes::default();
        let buf = Buf::Scratch { id: 9, offset: 0 };
        s.fill(buf.at(2), &[5, 6]).unwrap();
        let mut w = io(1, Op::Write, 8192, 4, true);
        w.buf = buf;
        assert_eq!(s.submit(&w), Some(&[0, 0, 5, 6][..]));
        assert_eq!(
            s.held(),
            1,
            "a write does not free it: the kernel's rule does"
        );
        s.free(9);
        assert!(s.take(buf, 4).is_err(), "freed");
        assert_eq!(s.submit(&w), None, "a write out of nothing has no bytes");
        let mut r = io(2, Op::Read, 8192, 4, false);
        r.buf = buf;
        s.submit(&r);
        s.complete(&r, vec![1, 2, 3, 4]);
        assert_eq!(s.take(buf.at(1), 4).unwrap(), vec![2, 3, 4, 0]);
        assert_eq!(s.held(), 0, "taken: freed");
        assert!(s.fill(Buf::Host { id: 0, offset: 0 }, &[1]).is_err());
    }

    #[test]
    fn fills_overwrite_what_they_cover_extend_past_the_end_and_zero_a_gap() {
        let mut s = ScratchBytes::default();
        let buf = Buf::Scratch { id: 3, offset: 0 };
        s.fill(buf.at(1), &[1, 2, 3]).unwrap();
        // Inside, across the end, and past a gap.
        s.fill(buf.at(2), &[9]).unwrap();
        s.fill(buf.at(3), &[7, 8]).unwrap();
        s.fill(buf.at(7), &[4]).unwrap();
        assert_eq!(s.take(buf, 9).unwrap(), vec![0, 1, 9, 7, 8, 0, 0, 4, 0]);
    }

    #[test]
    fn copies_and_xors_carry_bytes_between_scratch_buffers_that_hold_them() {
        let mut s = ScratchBytes::default();
        let (a, b, c) = (
            Buf::Scratch { id: 1, offset: 0 },
            Buf::Scratch { id: 2, offset: 0 },
            Buf::Scratch { id: 3, offset: 0 },
        );
        s.fill(a, &[1, 2, 3, 4]).unwrap();
        s.fill(b, &[9, 9, 9, 9, 9]).unwrap();
        // A copy overwrites (past the source's end: zeros), an xor combines.
        s.combine(b.at(1), a.at(2), 3, false);
        s.combine(c.at(2), a, 2, true);
        s.combine(c.at(2), a.at(1), 2, true);
        // Host data (the simulator carries none) and a buffer holding none change nothing.
        s.combine(a, Buf::Host { id: 5, offset: 0 }, 4, false);
        s.combine(a, Buf::Scratch { id: 8, offset: 0 }, 4, false);
        assert_eq!(s.held(), 3, "no buffer made for a source without bytes");
        assert_eq!(s.take(b, 5).unwrap(), vec![9, 3, 4, 0, 9]);
        assert_eq!(s.take(c, 4).unwrap(), vec![0, 0, 1 ^ 2, 2 ^ 3]);
        assert_eq!(s.take(a, 4).unwrap(), vec![1, 2, 3, 4]);
    }
}
