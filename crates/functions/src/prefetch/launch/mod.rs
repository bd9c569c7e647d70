//! Application-launch prefetchers (docs/functions/iolab-prefetch.md,
//! docs/functions/fast-prefetch.md): one layer that passes the guest's I/O through, learns a
//! launch, and prefetches it the next time it starts.
//!
//! * **Learning**: every guest request from the first one until the guest has been idle for
//!   `gap` is logged (the launch sequence, in issue order). With `learn_launch = n` the
//!   first `n` such bursts (a guest's boot, say) pass unlogged and the next is learned.
//! * **Post-processing**: the logged reads become disjoint extents (overlaps merged), put in
//!   the dispatch [`Order`]: by LBA (IOLab), by file then LBA (the Windows prefetcher's
//!   inode-and-offset order), or two-phase (FAST: metadata — reads that carry no file — in
//!   first-access order, then data in first-access order, each data extent once the
//!   metadata read before it in the launch is in).
//! * **Detection**: `detect` consecutive guest requests equal to consecutive requests of
//!   the log start the dispatcher.
//! * **Dispatch**: own reads of the extents, `depth` at a time, at `priority` (above the
//!   guest's 0: they are served first at the device queue).
//! * **The launch meanwhile**: [`Hold::Launch`] (IOLab) holds every guest request in the
//!   layer until the prefetch is over — the launch pauses — then handles them in arrival
//!   order; [`Hold::Extent`] (FAST) lets the launch run and holds only a read whose extent
//!   is still being fetched, until that extent is in.
//! * **Answering**: a guest read inside a fetched, still valid extent is answered from the
//!   prefetch buffer (`Copy` of the buffer over the read's buffer, done by the executor,
//!   followed by the reply). A guest write or discard invalidates every extent it
//!   overlaps — fetched, in flight or not yet issued — and so does a guest write that was in
//!   flight when an extent's read was issued, so a prefetched buffer is never older than a
//!   write the guest could have seen acknowledged.
//! * The prefetched buffers are dropped when the guest has been idle for `gap` again (the
//!   launch is over); the next launch is detected afresh.
//!
//! The **hit ratio** is the paper's: guest requests answered from prefetched data over all
//! guest requests from the detection to the end of the launch.

mod config;
#[cfg(test)]
mod tests;

pub use config::{Hold, Order, Params, FAST_KIND, IOLAB_KIND, MAX_LOG};

use std::collections::{BTreeMap, HashMap, VecDeque};
use wattio_core::function::{Actions, Function, TimerId};
use wattio_core::io::{Breakdown, Buf, Completion, Io, IoId, Op, Status};
use wattio_core::time::Nanos;

const IDLE: TimerId = 1;

/// A guest request as the log and the detector see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    dev: u16,
    offset: u64,
    len: u32,
    write: bool,
}

impl Key {
    fn of(io: &Io) -> Key {
        Key {
            dev: io.dev,
            offset: io.offset,
            len: io.len,
            write: io.op != Op::Read,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Queued,
    InFlight,
    Fetched,
    Failed,
}

/// One prefetched range.
#[derive(Clone, Copy, Debug)]
struct Extent {
    dev: u16,
    offset: u64,
    len: u32,
    file: Option<u64>,
    /// Position of its first access in the log.
    first: usize,
    /// Two-phase: how many metadata extents must be in before it is issued.
    needs_meta: usize,
    state: State,
    /// False once a guest write overlapped it.
    valid: bool,
}

impl Extent {
    fn end(&self) -> u64 {
        self.offset + self.len as u64
    }
    fn covers(&self, io: &Io) -> bool {
        self.dev == io.dev && self.offset <= io.offset && io.end() <= self.end()
    }
    fn overlaps(&self, dev: u16, from: u64, to: u64) -> bool {
        self.dev == dev && self.offset < to && from < self.end()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Logging the first launch.
    Learning,
    /// A launch sequence is known; watching for its start.
    Armed,
    /// Detected: the dispatcher runs (and, holding the launch, the guest waits).
    Prefetching,
    /// The prefetch is over; reads are answered from its buffers until the launch ends.
    Serving,
}

pub struct LaunchPrefetcher {
    p: Params,
    phase: Phase,
    /// The learned sequence (issue order) and where each key occurs in it.
    log: Vec<Key>,
    log_files: Vec<Option<u64>>,
    at: HashMap<Key, Vec<usize>>,
    /// The last `detect` guest requests.
    window: VecDeque<Key>,
    /// The extents in dispatch order, and their start offsets per device (they are disjoint).
    extents: Vec<Extent>,
    by_offset: BTreeMap<(u16, u64), usize>,
    /// Own-I/O number (and scratch id) of extent 0 in this prefetch.
    base: u64,
    next_base: u64,
    cursor: usize,
    in_flight: usize,
    left: usize,
    /// Metadata extents fetched, in dispatch order (two-phase).
    meta_in: usize,
    /// Guest requests held in the layer (launch hold), in arrival order.
    held: VecDeque<Io>,
    /// Reads waiting for extent i (extent hold).
    waiting: HashMap<usize, Vec<Io>>,
    /// Guest writes and discards the layer passed down and has not seen complete: (id,
    /// device, first byte, end).
    writes: Vec<(IoId, u16, u64, u64)>,
    // Counters.
    launches_detected: u64,
    launch_requests: u64,
    hits: u64,
    prefetch_reads: u64,
    prefetch_bytes: u64,
    invalidated: u64,
    prefetch_started: Nanos,
    prefetch_time: Nanos,
    /// Queue depth of the dispatcher: ∫ in-flight dt over the prefetch, and the last change.
    depth_area: u128,
    depth_since: Nanos,
    max_in_flight: usize,
    log_dropped: u64,
    /// Bursts passed through unlogged before the learned one (`learn_launch`), and whether
    /// the current one has moved data yet.
    skipped: u32,
    burst_seen: bool,
}

impl LaunchPrefetcher {
    pub fn new(p: Params, scratch_base: u64) -> LaunchPrefetcher {
        LaunchPrefetcher {
            p,
            phase: Phase::Learning,
            log: Vec::new(),
            log_files: Vec::new(),
            at: HashMap::new(),
            window: VecDeque::new(),
            extents: Vec::new(),
            by_offset: BTreeMap::new(),
            base: scratch_base,
            next_base: scratch_base,
            cursor: 0,
            in_flight: 0,
            left: 0,
            meta_in: 0,
            held: VecDeque::new(),
            waiting: HashMap::new(),
            writes: Vec::new(),
            launches_detected: 0,
            launch_requests: 0,
            hits: 0,
            prefetch_reads: 0,
            prefetch_bytes: 0,
            invalidated: 0,
            prefetch_started: 0,
            prefetch_time: 0,
            depth_area: 0,
            depth_since: 0,
            max_in_flight: 0,
            log_dropped: 0,
            skipped: 0,
            burst_seen: false,
        }
    }

    /// Post-processing: the log's reads as disjoint extents in dispatch order.
    fn plan(&mut self) {
        // Reads by (dev, offset), merged where they overlap; each keeps its first access.
        let mut reads: Vec<(usize, Key)> = self
            .log
            .iter()
            .enumerate()
            .filter(|(_, k)| !k.write && k.len > 0)
            .map(|(i, k)| (i, *k))
            .collect();
        reads.sort_by_key(|&(i, k)| (k.dev, k.offset, i));
        let mut merged: Vec<Extent> = Vec::new();
        for (i, k) in reads {
            let end = k.offset + k.len as u64;
            match merged.last_mut() {
                Some(m) if m.dev == k.dev && k.offset < m.end() => {
                    let new_end = m.end().max(end);
                    if new_end - m.offset <= u32::MAX as u64 {
                        m.len = (new_end - m.offset) as u32;
                        m.first = m.first.min(i);
                        continue;
                    }
                    // Too long for one read: the rest starts a new extent.
                    let from = m.end();
                    merged.push(self.extent(k.dev, from, (end - from) as u32, i));
                }
                _ => merged.push(self.extent(k.dev, k.offset, k.len, i)),
            }
        }
        match self.p.order {
            Order::Lba => merged.sort_by_key(|e| (e.dev, e.offset)),
            // No file (metadata) first, then by inode, within a file by LBA.
            Order::File => merged.sort_by_key(|e| (e.file.is_some(), e.file, e.dev, e.offset)),
            Order::TwoPhase => {
                merged.sort_by_key(|e| (e.file.is_some(), e.first));
                let metas: Vec<usize> = merged
                    .iter()
                    .filter(|e| e.file.is_none())
                    .map(|e| e.first)
                    .collect();
                for e in merged.iter_mut().filter(|e| e.file.is_some()) {
                    e.needs_meta = metas.partition_point(|&f| f < e.first);
                }
            }
        }
        self.by_offset = merged
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.dev, e.offset), i))
            .collect();
        self.extents = merged;
    }

    fn extent(&self, dev: u16, offset: u64, len: u32, first: usize) -> Extent {
        Extent {
            dev,
            offset,
            len,
            file: self.log_files[first],
            first,
            needs_meta: 0,
            state: State::Queued,
            valid: true,
        }
    }

    /// The extent that may hold `io`'s bytes.
    fn covering(&self, io: &Io) -> Option<usize> {
        let (_, &i) = self.by_offset.range(..=(io.dev, io.offset)).next_back()?;
        self.extents[i].covers(io).then_some(i)
    }

    fn invalidate(&mut self, dev: u16, from: u64, to: u64) {
        let lo = self
            .by_offset
            .range(..=(dev, from))
            .next_back()
            .map(|(k, _)| *k)
            .unwrap_or((dev, 0));
        for (_, &i) in self.by_offset.range(lo..(dev, to)) {
            let e = &mut self.extents[i];
            if e.valid && e.overlaps(dev, from, to) {
                e.valid = false;
                self.invalidated += 1;
            }
        }
    }

    /// Does the detector see the launch start with `k`?
    fn detected(&mut self, k: Key) -> bool {
        let n = self.p.detect;
        self.window.push_back(k);
        if self.window.len() > n {
            self.window.pop_front();
        }
        if self.window.len() < n {
            return false;
        }
        let Some(ends) = self.at.get(&k) else {
            return false;
        };
        ends.iter()
            .any(|&p| p + 1 >= n && self.log[p + 1 - n..=p].iter().eq(self.window.iter()))
    }

    fn start_prefetch(&mut self, now: Nanos, out: &mut Actions) {
        self.phase = Phase::Prefetching;
        self.launches_detected += 1;
        // The requests that matched belong to the launch.
        self.launch_requests += self.p.detect as u64;
        self.base = self.next_base;
        self.next_base += self.extents.len() as u64;
        for e in &mut self.extents {
            e.state = State::Queued;
            e.valid = true;
        }
        self.cursor = 0;
        self.left = self.extents.len();
        self.meta_in = 0;
        self.prefetch_started = now;
        self.depth_since = now;
        self.dispatch(now, out);
        if self.left == 0 {
            self.finish_prefetch(now, out);
        }
    }

    fn note_depth(&mut self, now: Nanos) {
        self.depth_area += self.in_flight as u128 * (now - self.depth_since) as u128;
        self.depth_since = now;
    }

    fn dispatch(&mut self, now: Nanos, out: &mut Actions) {
        self.note_depth(now);
        while self.in_flight < self.p.depth && self.cursor < self.extents.len() {
            let i = self.cursor;
            let e = self.extents[i];
            if self.p.order == Order::TwoPhase && e.file.is_some() && self.meta_in < e.needs_meta {
                break;
            }
            self.cursor += 1;
            if !e.valid {
                self.extents[i].state = State::Failed;
                self.left -= 1;
                self.release(i, now, out);
                continue;
            }
            // A guest write still in flight may land after this read: do not fetch it.
            if self.writes.iter().any(|&(_, d, f, t)| e.overlaps(d, f, t)) {
                self.extents[i].valid = false;
                self.extents[i].state = State::Failed;
                self.invalidated += 1;
                self.left -= 1;
                self.release(i, now, out);
                continue;
            }
            let mut io = Io::own(self.base + i as u64, Op::Read, e.dev, e.offset, e.len);
            io.priority = self.p.priority;
            self.extents[i].state = State::InFlight;
            self.in_flight += 1;
            self.max_in_flight = self.max_in_flight.max(self.in_flight);
            self.prefetch_reads += 1;
            self.prefetch_bytes += e.len as u64;
            out.submit(io);
        }
    }

    /// Extent `i` is in (or will not be): the reads waiting for it go on.
    fn release(&mut self, i: usize, now: Nanos, out: &mut Actions) {
        for io in self.waiting.remove(&i).unwrap_or_default() {
            self.guest(now, io, out);
        }
    }

    fn finish_prefetch(&mut self, now: Nanos, out: &mut Actions) {
        self.phase = Phase::Serving;
        self.prefetch_time += now - self.prefetch_started;
        for io in std::mem::take(&mut self.held) {
            self.guest(now, io, out);
        }
        out.set_timer(IDLE, now + self.p.gap);
    }

    /// Answer `io` from extent `i`'s buffer. A copy, not an xor: the read's buffer may
    /// hold bytes already (a RAID layer above retrying a read into it).
    fn answer(&mut self, now: Nanos, io: Io, i: usize, out: &mut Actions) {
        let e = self.extents[i];
        out.copy(
            io.buf,
            Buf::Scratch {
                id: self.base + i as u64,
                offset: (io.offset - e.offset) as u32,
            },
            io.len,
        );
        self.hits += 1;
        out.reply(Completion::ok(io, now, Breakdown::default()));
    }

    /// Handle a guest request with the prefetch state as it is now.
    fn guest(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        match io.op {
            Op::Read => {
                let serving = matches!(self.phase, Phase::Prefetching | Phase::Serving);
                if let Some(i) = self.covering(&io).filter(|_| serving) {
                    let e = self.extents[i];
                    if e.valid && e.state == State::Fetched {
                        return self.answer(now, io, i, out);
                    }
                    if e.valid && matches!(e.state, State::Queued | State::InFlight) {
                        self.waiting.entry(i).or_default().push(io);
                        return;
                    }
                }
                out.submit(io);
            }
            Op::Write | Op::Discard => {
                self.invalidate(io.dev, io.offset, io.end());
                self.writes.push((io.id, io.dev, io.offset, io.end()));
                out.submit(io);
            }
            Op::Flush => out.submit(io),
        }
    }

    /// The launch is over: free the buffers, watch for the next one. (The next prefetch
    /// numbers its buffers anew, so one kept here would live as long as the layer.)
    fn end_launch(&mut self, out: &mut Actions) {
        self.phase = Phase::Armed;
        self.window.clear();
        for (i, e) in self.extents.iter_mut().enumerate() {
            e.valid = false;
            if e.state != State::Queued {
                // Fetched, or failed (a read error leaves its buffer too; an extent never
                // sent has none, and a release of it is nothing).
                out.release(Buf::Scratch {
                    id: self.base + i as u64,
                    offset: 0,
                });
                e.state = State::Queued;
            }
        }
    }
}

impl Function for LaunchPrefetcher {
    fn name(&self) -> &str {
        match self.p.hold {
            Hold::Launch => "iolab-prefetch",
            Hold::Extent => "fast-prefetch",
        }
    }

    fn on_request(&mut self, now: Nanos, io: Io, out: &mut Actions) {
        let k = Key::of(&io);
        match self.phase {
            Phase::Learning => {
                if io.op.moves_data() && self.skipped < self.p.learn_launch {
                    // A burst before the one to learn: it only has to end (the timer).
                    self.burst_seen = true;
                } else if io.op.moves_data() {
                    if self.log.len() < MAX_LOG {
                        self.at.entry(k).or_default().push(self.log.len());
                        self.log.push(k);
                        self.log_files.push(io.file);
                    } else {
                        self.log_dropped += 1;
                    }
                }
                out.set_timer(IDLE, now + self.p.gap);
                self.guest(now, io, out);
            }
            Phase::Armed => {
                out.set_timer(IDLE, now + self.p.gap);
                let go = io.op.moves_data() && self.detected(k);
                self.guest(now, io, out);
                if go {
                    self.start_prefetch(now, out);
                }
            }
            Phase::Prefetching => {
                self.launch_requests += 1;
                if self.p.hold == Hold::Launch {
                    // Writes are held too: they may overlap what is being fetched.
                    self.held.push_back(io);
                } else {
                    self.guest(now, io, out);
                }
            }
            Phase::Serving => {
                self.launch_requests += 1;
                out.set_timer(IDLE, now + self.p.gap);
                self.guest(now, io, out);
            }
        }
    }

    fn on_completion(&mut self, now: Nanos, done: Completion, out: &mut Actions) {
        // Ours: an own id in this prefetch's range, for an extent in flight, at its place.
        // Anything else was forwarded (a layer above may originate own I/O too).
        let i = (done.io.id.0 & !IoId::OWN).wrapping_sub(self.base) as usize;
        let ours = done.io.id.is_own()
            && !done.io.id.is_sub()
            && i < self.extents.len()
            && self.extents[i].state == State::InFlight
            && (
                self.extents[i].dev,
                self.extents[i].offset,
                self.extents[i].len,
            ) == (done.io.dev, done.io.offset, done.io.len);
        if !ours {
            // By id and place: ids are unique only per issuing layer, and a layer below
            // another may pass their I/Os through with their ids beside its own (the
            // swarm, seed 186,538: a read on another device with a write's id ended it
            // early, and a prefetch of the block went out with the write in flight).
            let d = &done.io;
            if let Some(k) = self
                .writes
                .iter()
                .position(|&w| w == (d.id, d.dev, d.offset, d.end()))
            {
                self.writes.swap_remove(k);
            }
            out.reply(done);
            return;
        }
        self.note_depth(now);
        self.in_flight -= 1;
        self.left -= 1;
        let ok = done.status == Status::Ok;
        self.extents[i].state = if ok { State::Fetched } else { State::Failed };
        // Two-phase: metadata extents lead the dispatch order; count those in, in order.
        while self.meta_in < self.extents.len()
            && self.extents[self.meta_in].file.is_none()
            && matches!(
                self.extents[self.meta_in].state,
                State::Fetched | State::Failed
            )
        {
            self.meta_in += 1;
        }
        self.release(i, now, out);
        self.dispatch(now, out);
        if self.left == 0 {
            self.note_depth(now);
            self.finish_prefetch(now, out);
        }
    }

    fn on_timer(&mut self, now: Nanos, timer: TimerId, out: &mut Actions) {
        if timer != IDLE {
            return;
        }
        match self.phase {
            Phase::Learning if self.burst_seen => {
                self.burst_seen = false;
                self.skipped += 1;
            }
            Phase::Learning if !self.log.is_empty() => {
                self.plan();
                self.phase = Phase::Armed;
            }
            Phase::Serving => self.end_launch(out),
            // The dispatcher is still running: the launch is not over.
            Phase::Prefetching => out.set_timer(IDLE, now + self.p.gap),
            _ => {}
        }
    }

    /// One buffer per extent of the current prefetch that was sent for (fetched, failed
    /// or in flight), until the launch ends and they are released.
    fn scratch_buffers(&self) -> usize {
        self.extents
            .iter()
            .filter(|e| e.state != State::Queued)
            .count()
    }

    fn counters(&self) -> Vec<(String, f64)> {
        let ratio = if self.launch_requests > 0 {
            self.hits as f64 / self.launch_requests as f64
        } else {
            0.0
        };
        let depth = if self.prefetch_time > 0 {
            self.depth_area as f64 / self.prefetch_time as f64
        } else {
            0.0
        };
        vec![
            ("learned_requests".into(), self.log.len() as f64),
            ("learned_extents".into(), self.extents.len() as f64),
            ("launches_detected".into(), self.launches_detected as f64),
            ("launch_requests".into(), self.launch_requests as f64),
            ("prefetch_hits".into(), self.hits as f64),
            ("hit_ratio".into(), ratio),
            ("prefetch_reads".into(), self.prefetch_reads as f64),
            ("prefetch_bytes".into(), self.prefetch_bytes as f64),
            ("prefetch_time_s".into(), self.prefetch_time as f64 / 1e9),
            ("effective_queue_depth".into(), depth),
            ("max_queue_depth".into(), self.max_in_flight as f64),
            ("invalidated_extents".into(), self.invalidated as f64),
            ("log_dropped".into(), self.log_dropped as f64),
            ("skipped_bursts".into(), self.skipped as f64),
        ]
    }
}
