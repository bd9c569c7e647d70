//! A replayable application launch: the block requests of a captured cold launch, each
//! with what it waited for and the CPU time in between, replayed as a closed [`Host`] so
//! that launch time on another device, or under a prefetcher, is simulated rather than
//! only I/O time (docs/launch.md).
//!
//! **Dependencies** are inferred from the capture's times alone (it records no causality).
//! A process that issued request *j* at *t* was running at *t*; what let it run is the last
//! event of its own before *t*: either a completion (it was blocked on that read, then
//! computed for the rest of the gap: *j* waits for that completion plus the gap as think
//! time) or, if it issued a request after its last completion, that issue (it never
//! blocked: *j* follows that issue by the gap, as asynchronous read-ahead does). A process's
//! first request follows the last event of any process (its parent forked it), the launch's
//! first request the start. The launch's end follows its last event the same way. A
//! request the capture saw no completion of (tracing stopped first) is never waited for.
//! Replayed with the latencies it was captured with, the model issues every request at its
//! captured time and ends at the captured end (tested).

use crate::sim::Host;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use wattio_core::io::{Io, Op, Request};
use wattio_core::time::Nanos;

/// Requests a closed-loop replay of a plain block trace holds (each a few dozen bytes).
pub const MAX_REPLAY_ROWS: usize = 20_000_000;

/// What a step waits for before its think time starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// The launch's start.
    Start,
    /// Step `i` was issued.
    Issue(usize),
    /// Step `i` completed.
    Completion(usize),
}

/// One block request of the launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub op: Op,
    pub offset: u64,
    pub len: u32,
    /// The process that issued it.
    pub stream: u32,
    /// The inode whose pages were inserted last before it, by its process (the file it
    /// reads); `None` when no page insertion preceded it.
    pub file: Option<u64>,
    /// It reads file-system metadata: the block device's own pages (the inode whose page
    /// offsets are device offsets), which FAST fetches first.
    pub metadata: bool,
    pub after: After,
    /// CPU time between `after` and the issue.
    pub think: Nanos,
}

/// A launch: its steps in captured issue order and how its end follows them.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub steps: Vec<Step>,
    /// The end (the command exits) waits for this, plus `tail_think`.
    pub tail: After,
    pub tail_think: Nanos,
    /// The captured issue times, latencies (`None`: no completion seen) and end.
    pub captured: Vec<(Nanos, Option<Nanos>)>,
    pub captured_end: Nanos,
}

/// Replayed times of one launch.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub issued: Vec<Nanos>,
    pub completed: Vec<Option<Nanos>>,
    pub end: Nanos,
}

impl Launch {
    /// The launch in the columnar launch trace at `path` (`wattio capture launch`): its rows
    /// and the end its provenance records. Errors name the file.
    pub fn open(path: &std::path::Path) -> Result<Launch, String> {
        use wattio_core::TraceSource;
        let name = path.display().to_string();
        let mut r = wattio_formats::ColumnarReader::open(path).map_err(|e| e.to_string())?;
        let end =
            wattio_formats::launch::launch_end(r.provenance(), &name).map_err(|e| e.to_string())?;
        let mut rows = Vec::new();
        while let Some(q) = r.next_request().map_err(|e| e.to_string())? {
            rows.push(q);
        }
        Launch::from_rows(&rows, end).map_err(|e| format!("{name}: {e}"))
    }

    /// A block trace as one closed-loop replay: a launch trace as [`Launch::open`]; any
    /// other (`wattio capture block`, a blktrace or blkparse trace with its completions, an
    /// MSR trace, … in `format`, `None` to detect, read with `opts`) as one "launch" from
    /// its first request (time 0) to its last completion, every request one of the process
    /// in its stream. Closing the loop needs the trace's response times: requests without
    /// one are never waited for, and a trace with none at all is refused.
    pub fn open_closed_loop(
        path: &std::path::Path,
        format: Option<&str>,
        opts: &wattio_formats::ReadOptions,
    ) -> Result<Launch, String> {
        let name = path.display().to_string();
        let columnar = match format {
            Some(f) => wattio_formats::canonical_format(f) == Some("columnar"),
            None => {
                // A file shorter than the magic is not Parquet; open_trace then says why.
                let mut magic = [0u8; 4];
                let head = std::fs::File::open(path)
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic));
                wattio_formats::is_columnar(path, if head.is_ok() { &magic } else { &[] })
            }
        };
        // Only a columnar trace carries a launch's provenance.
        let (mut src, launch_end): (Box<dyn wattio_core::TraceSource>, _) = if columnar
            && opts.device.is_none()
        {
            let r = wattio_formats::ColumnarReader::open(path).map_err(|e| e.to_string())?;
            let end = wattio_formats::launch::launch_end(r.provenance(), &name).ok();
            (Box::new(r), end)
        } else {
            let r = wattio_formats::open_trace(path, format, opts).map_err(|e| e.to_string())?;
            (r, None)
        };
        let how = if columnar {
            "a closed-loop replay takes one device's requests (dev 0; `wattio trace slice --dev N` keeps one)"
        } else {
            "a closed-loop replay takes one device's requests (dev 0; --device KEY keeps one)"
        };
        let mut rows = crate::validation::read_in_memory(
            src.as_mut(),
            &name,
            MAX_REPLAY_ROWS,
            "a closed-loop replay keeps them all in memory",
            // A launch trace's page-cache rows are dev 1.
            launch_end.is_none().then_some(how),
        )?;
        if let Some(end) = launch_end {
            return Launch::from_rows(&rows, end).map_err(|e| format!("{name}: {e}"));
        }
        crate::validation::require_measured(
            &rows,
            &name,
            "(a closed-loop replay needs them: a trace from `wattio capture block`, or a \
             blktrace/blkparse trace with its completions)",
        )?;
        // Every reader checks arrival order; saturating all the same.
        let t0 = rows.first().map_or(0, |q| q.arrival);
        for q in &mut rows {
            q.arrival = q.arrival.saturating_sub(t0);
        }
        let end = rows
            .iter()
            .map(|q| q.arrival + q.measured.unwrap_or(0))
            .max()
            .unwrap_or(0);
        Launch::from_rows(&rows, end).map_err(|e| format!("{name}: {e}"))
    }

    /// The launch in a launch trace's rows (`wattio_formats::launch`: dev 0 block requests
    /// with measured responses, dev 1 page-cache insertions) ending at `end`.
    pub fn from_rows(rows: &[Request], end: Nanos) -> Result<Launch, String> {
        const BLOCK: u16 = 0;
        const PAGES: u16 = 1;
        if let Some((i, r)) = rows
            .iter()
            .enumerate()
            .find(|(_, r)| r.dev != BLOCK && r.dev != PAGES)
        {
            return Err(format!(
                "row {i}: dev {} is neither block requests (0) nor page-cache insertions (1)",
                r.dev
            ));
        }
        if let Some(i) = rows.windows(2).position(|w| w[1].arrival < w[0].arrival) {
            return Err(format!(
                "row {}: arrival {} ns precedes the previous row's {} ns (launch traces are in arrival order)",
                i + 1,
                rows[i + 1].arrival,
                rows[i].arrival
            ));
        }
        let blocks: Vec<&Request> = rows.iter().filter(|r| r.dev == BLOCK).collect();
        if blocks.is_empty() {
            return Err("no block requests (dev 0 rows): nothing to replay".into());
        }
        if let Some(r) = blocks.iter().find(|r| r.arrival > end) {
            return Err(format!(
                "a block request at {} ns is after the launch's end ({end} ns)",
                r.arrival
            ));
        }
        let pages: Vec<&Request> = rows.iter().filter(|r| r.dev == PAGES).collect();
        let bdev = block_device_inode(&blocks, &pages);
        let captured: Vec<(Nanos, Option<Nanos>)> =
            blocks.iter().map(|r| (r.arrival, r.measured)).collect();
        let mut deps = Dependencies::new(&captured, blocks.iter().map(|r| r.stream));
        let mut steps = Vec::with_capacity(blocks.len());
        for (j, r) in blocks.iter().enumerate() {
            let (after, think) = deps.issue(j);
            let file = last_page_before(&pages, r).and_then(|p| p.file);
            steps.push(Step {
                op: r.op,
                offset: r.offset,
                len: r.len,
                stream: r.stream,
                file,
                metadata: bdev.is_some() && file == bdev,
                after,
                think,
            });
        }
        let (tail, tail_think) = deps.end(end);
        Ok(Launch {
            steps,
            tail,
            tail_think,
            captured,
            captured_end: end,
        })
    }

    /// The launch replayed with `latency(i)` for step `i`, no queueing between steps (each
    /// request is served as if alone): with the captured latencies, the capture itself.
    pub fn timeline(&self, latency: impl Fn(usize) -> Option<Nanos>) -> Timeline {
        let n = self.steps.len();
        let mut issued = vec![0; n];
        let mut completed = vec![None; n];
        // Steps are in issue order and wait only for earlier steps.
        let at = |a: After, issued: &[Nanos], completed: &[Option<Nanos>]| match a {
            After::Start => Some(0),
            After::Issue(i) => Some(issued[i]),
            After::Completion(i) => completed[i],
        };
        for (i, s) in self.steps.iter().enumerate() {
            let base = at(s.after, &issued, &completed).expect("waits only for completions seen");
            issued[i] = base + s.think;
            completed[i] = latency(i).map(|l| issued[i] + l);
        }
        let end = at(self.tail, &issued, &completed).expect("tail waits on a completion seen")
            + self.tail_think;
        Timeline {
            issued,
            completed,
            end,
        }
    }
}

/// The block device's own inode: the one whose page offsets are block request offsets
/// (metadata read through the block device's page cache), if any page is.
fn block_device_inode(blocks: &[&Request], pages: &[&Request]) -> Option<u64> {
    let starts: std::collections::BTreeSet<u64> = blocks.iter().map(|r| r.offset).collect();
    let mut votes: std::collections::BTreeMap<u64, usize> = Default::default();
    for p in pages {
        if let (Some(f), true) = (p.file, starts.contains(&p.offset)) {
            *votes.entry(f).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(f, n)| (n, Reverse(f)))
        .map(|(f, _)| f)
}

/// The last page inserted by `r`'s process at or before `r` was issued.
fn last_page_before<'p>(pages: &[&'p Request], r: &Request) -> Option<&'p Request> {
    let upto = pages.partition_point(|p| p.arrival <= r.arrival);
    pages[..upto]
        .iter()
        .rev()
        .find(|p| p.stream == r.stream)
        .copied()
}

/// The sweep that infers what each issue waited for: per process, and over all processes,
/// its last issue and last completion so far (module docs).
struct Dependencies<'c> {
    captured: &'c [(Nanos, Option<Nanos>)],
    /// Completions in time order (time, step), consumed as issues pass them.
    completions: Vec<(Nanos, usize)>,
    next_completion: usize,
    /// Per process: (last issue, last completion).
    per: std::collections::HashMap<u32, (Option<usize>, Option<usize>)>,
    any: (Option<usize>, Option<usize>),
    streams: Vec<u32>,
}

impl<'c> Dependencies<'c> {
    fn new(
        captured: &'c [(Nanos, Option<Nanos>)],
        streams: impl Iterator<Item = u32>,
    ) -> Dependencies<'c> {
        let mut completions: Vec<(Nanos, usize)> = captured
            .iter()
            .enumerate()
            .filter_map(|(i, &(a, m))| m.map(|m| (a + m, i)))
            .collect();
        completions.sort_unstable();
        Dependencies {
            captured,
            completions,
            next_completion: 0,
            per: Default::default(),
            any: (None, None),
            streams: streams.collect(),
        }
    }

    /// Take in every completion at or before `t`.
    fn advance(&mut self, t: Nanos) {
        while let Some(&(at, i)) = self.completions.get(self.next_completion) {
            if at > t {
                break;
            }
            self.per.entry(self.streams[i]).or_default().1 = Some(i);
            self.any.1 = Some(i);
            self.next_completion += 1;
        }
    }

    /// What the latest of (issue, completion) was, and how long before `t`.
    fn follow(&self, last: (Option<usize>, Option<usize>), t: Nanos) -> (After, Nanos) {
        let issue = last.0.map(|k| (self.captured[k].0, After::Issue(k)));
        let done = last.1.map(|i| {
            let (a, m) = self.captured[i];
            (a + m.expect("completed"), After::Completion(i))
        });
        // At equal times the completion counts: the process ran because of it.
        let pick = match (issue, done) {
            (Some(i), Some(d)) => Some(if d.0 >= i.0 { d } else { i }),
            (i, d) => i.or(d),
        };
        match pick {
            Some((at, after)) => (after, t - at),
            None => (After::Start, t),
        }
    }

    fn issue(&mut self, j: usize) -> (After, Nanos) {
        let t = self.captured[j].0;
        self.advance(t);
        let own = self.per.get(&self.streams[j]).copied();
        let last = match own {
            Some(l) if l.0.is_some() || l.1.is_some() => l,
            _ => self.any,
        };
        let r = self.follow(last, t);
        self.per.entry(self.streams[j]).or_default().0 = Some(j);
        self.any.0 = Some(j);
        r
    }

    fn end(&mut self, end: Nanos) -> (After, Nanos) {
        self.advance(end);
        self.follow(self.any, end)
    }
}

/// A launch replayed `runs` times as a closed [`Host`]: a learning launch, then launches a
/// prefetcher may speed up. Each run starts `gap` after the previous one ended and its last
/// request completed. Host ids are issued in issue order; an I/O carries its step's
/// process and file (none for metadata: it is read through the block device, not a file).
pub struct Replay<'l> {
    launch: &'l Launch,
    runs: usize,
    gap: Nanos,
    /// Steps of the current run ready to issue: (time, step).
    ready: BinaryHeap<Reverse<(Nanos, usize)>>,
    issued: Vec<Option<Nanos>>,
    completed: Vec<Option<Nanos>>,
    /// Host id − `run_base` → step.
    ids: Vec<usize>,
    run_base: u64,
    next_id: u64,
    outstanding: usize,
    on_issue: Vec<Vec<usize>>,
    on_completion: Vec<Vec<usize>>,
    ended: bool,
    started: Vec<Nanos>,
    ends: Vec<Nanos>,
    io: Io,
}

impl<'l> Replay<'l> {
    pub fn new(launch: &'l Launch, runs: usize, gap: Nanos) -> Replay<'l> {
        let n = launch.steps.len();
        let mut on_issue = vec![Vec::new(); n];
        let mut on_completion = vec![Vec::new(); n];
        for (j, s) in launch.steps.iter().enumerate() {
            match s.after {
                After::Start => {}
                After::Issue(i) => on_issue[i].push(j),
                After::Completion(i) => on_completion[i].push(j),
            }
        }
        let mut r = Replay {
            launch,
            runs,
            gap,
            ready: BinaryHeap::new(),
            issued: vec![None; n],
            completed: vec![None; n],
            ids: Vec::with_capacity(n),
            run_base: 0,
            next_id: 0,
            outstanding: 0,
            on_issue,
            on_completion,
            ended: true,
            started: Vec::new(),
            ends: Vec::new(),
            io: Request::new(0, Op::Read, 0, 0).io(0),
        };
        if runs > 0 {
            r.start_run(0);
        }
        r
    }

    /// When each run started and ended (a run that did not end has no end).
    pub fn runs(&self) -> (&[Nanos], &[Nanos]) {
        (&self.started, &self.ends)
    }

    fn start_run(&mut self, at: Nanos) {
        self.started.push(at);
        self.ended = false;
        self.issued.fill(None);
        self.completed.fill(None);
        self.ids.clear();
        self.run_base = self.next_id;
        for (j, s) in self.launch.steps.iter().enumerate() {
            if s.after == After::Start {
                self.ready.push(Reverse((at + s.think, j)));
            }
        }
        self.progress(at);
    }

    /// After an issue or a completion at `now`: has the run ended, may the next start?
    fn progress(&mut self, now: Nanos) {
        if !self.ended {
            let base = match self.launch.tail {
                After::Start => self.started.last().copied(),
                After::Issue(i) => self.issued[i],
                After::Completion(i) => self.completed[i],
            };
            if let Some(base) = base {
                self.ended = true;
                self.ends.push(base + self.launch.tail_think);
            }
        }
        let quiet = self.ready.is_empty() && self.outstanding == 0;
        if self.ended && quiet && self.started.len() < self.runs {
            let end = *self.ends.last().expect("ended");
            self.start_run(end.max(now) + self.gap);
        }
    }
}

impl Host for Replay<'_> {
    const CLOSED: bool = true;

    fn next_at(&mut self) -> Result<Option<Nanos>, String> {
        Ok(self.ready.peek().map(|Reverse((t, _))| *t))
    }

    fn take(&mut self) -> (Nanos, &Io) {
        let Reverse((t, j)) = self.ready.pop().expect("announced by next_at");
        let s = self.launch.steps[j];
        self.issued[j] = Some(t);
        self.ids.push(j);
        self.outstanding += 1;
        for &w in &self.on_issue[j] {
            self.ready
                .push(Reverse((t + self.launch.steps[w].think, w)));
        }
        let mut r = Request::new(t, s.op, s.offset, s.len);
        r.stream = s.stream;
        r.file = if s.metadata { None } else { s.file };
        self.io = r.io(self.next_id);
        self.next_id += 1;
        self.progress(t);
        (t, &self.io)
    }

    fn replied(&mut self, id: u64, finished: Nanos) {
        let Some(&j) = id
            .checked_sub(self.run_base)
            .and_then(|k| self.ids.get(k as usize))
        else {
            return;
        };
        self.completed[j] = Some(finished);
        self.outstanding -= 1;
        for &w in &self.on_completion[j] {
            self.ready
                .push(Reverse((finished + self.launch.steps[w].think, w)));
        }
        self.progress(finished);
    }
}

/// What replaying a launch on a run config's devices and stack gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Replayed {
    /// Each run's duration (start to end).
    pub durations: Vec<Nanos>,
    /// Every layer's counters, in stack order.
    pub counters: Vec<(String, f64)>,
    /// Host requests answered, and in error.
    pub requests: u64,
    pub errors: u64,
}

/// Replay `launch` `runs` times, `gap` apart, on the devices and stack of `cfg` (its trace
/// or workload, if any, is not used), with the data-integrity checker watching.
pub fn replay(
    launch: &Launch,
    cfg: &crate::RunConfig,
    cat: &wattio_devices::Catalogue,
    runs: usize,
    gap: Nanos,
) -> Result<Replayed, String> {
    let (out, starts, ends) = simulate(launch, cfg, cat, runs, gap, None)?;
    replayed(&out, &starts, &ends, runs)
}

fn replayed(
    out: &crate::SimOutcome,
    starts: &[Nanos],
    ends: &[Nanos],
    runs: usize,
) -> Result<Replayed, String> {
    if ends.len() < runs {
        return Err(format!(
            "launch replay: {} of {runs} runs ended (a request the launch waits for never completed)",
            ends.len()
        ));
    }
    Ok(Replayed {
        durations: starts.iter().zip(ends).map(|(s, e)| e - s).collect(),
        counters: out
            .stack
            .layers()
            .iter()
            .flat_map(|f| f.counters())
            .collect(),
        requests: out.requests,
        errors: out.errors,
    })
}

/// One simulation of `runs` replays, stopped at `until` if given: the outcome and when
/// each run started and ended.
fn simulate(
    launch: &Launch,
    cfg: &crate::RunConfig,
    cat: &wattio_devices::Catalogue,
    runs: usize,
    gap: Nanos,
    until: Option<Nanos>,
) -> Result<(crate::SimOutcome, Vec<Nanos>, Vec<Nanos>), String> {
    let asm = crate::assemble(cfg, cat, None, &mut crate::Registry::new(), 0)?;
    let mut checker = wattio_core::integrity::Checker::new(4096)?;
    let mut host = Replay::new(launch, runs, gap);
    let out = crate::Simulator::new(asm.stack, asm.devices)
        .with_observer(&mut checker)
        .run_host(&mut host, until, 0, &mut crate::NullSink)?;
    let (starts, ends) = host.runs();
    Ok((out, starts.to_vec(), ends.to_vec()))
}

/// A device over a span of simulated time: what its ledger and counters gained.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceWindow {
    pub name: String,
    pub energy_j: f64,
    /// Joules and seconds per state and transition (the ledger's slots).
    pub energy_by_state_j: std::collections::BTreeMap<String, f64>,
    pub residency_s: std::collections::BTreeMap<String, f64>,
    /// I/O counters gained (`busy_ns` includes an I/O in service at either edge for the
    /// part inside the span; service components count at service start).
    pub counters: wattio_core::device::DeviceCounters,
}

/// One run of a windowed replay: its span and every device over it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunWindow {
    pub start: Nanos,
    pub end: Nanos,
    pub devices: Vec<DeviceWindow>,
}

fn snapshot(out: &crate::SimOutcome, at: Nanos) -> Vec<DeviceWindow> {
    out.devices
        .iter()
        .map(|d| {
            let rows = d.ledger_rows(at);
            let mut counters = d.counters();
            counters.busy_ns = d.busy_ns_at(at);
            DeviceWindow {
                name: d.info.name.clone(),
                energy_j: d.energy_j(at),
                energy_by_state_j: rows.iter().map(|r| (r.slot.clone(), r.energy_j)).collect(),
                residency_s: rows
                    .iter()
                    .map(|r| {
                        (
                            r.slot.clone(),
                            wattio_core::time::ns_to_secs(r.residency_ns),
                        )
                    })
                    .collect(),
                counters,
            }
        })
        .collect()
}

fn minus(b: &[DeviceWindow], a: &[DeviceWindow]) -> Vec<DeviceWindow> {
    let sub = |x: &std::collections::BTreeMap<String, f64>,
               y: &std::collections::BTreeMap<String, f64>| {
        x.iter()
            .map(|(k, v)| (k.clone(), v - y.get(k).copied().unwrap_or(0.0)))
            .collect()
    };
    b.iter()
        .zip(a)
        .map(|(b, a)| DeviceWindow {
            name: b.name.clone(),
            energy_j: b.energy_j - a.energy_j,
            energy_by_state_j: sub(&b.energy_by_state_j, &a.energy_by_state_j),
            residency_s: sub(&b.residency_s, &a.residency_s),
            counters: b.counters.since(&a.counters),
        })
        .collect()
}

/// [`replay`], and every device over each run (from its start to its end: a learning run,
/// then runs a function may have sped up — FS2's evaluation compares the later runs).
///
/// The simulator keeps no history, so a device's state at a run's edge is read by running
/// the same (deterministic) simulation again, stopped just before it: one simulation per
/// distinct edge, each identical to the full one up to its stop. Events at an edge belong
/// to the window it opens.
pub fn replay_windows(
    launch: &Launch,
    cfg: &crate::RunConfig,
    cat: &wattio_devices::Catalogue,
    runs: usize,
    gap: Nanos,
) -> Result<(Replayed, Vec<RunWindow>), String> {
    let (out, starts, ends) = simulate(launch, cfg, cat, runs, gap, None)?;
    let replayed = replayed(&out, &starts, &ends, runs)?;
    let mut at: std::collections::BTreeMap<Nanos, Vec<DeviceWindow>> = Default::default();
    for &t in starts.iter().chain(&ends) {
        if let std::collections::btree_map::Entry::Vacant(e) = at.entry(t) {
            // As of just before `t`: what happens at an edge (a run's first issue, a copy
            // started on its last completion) is the next window's. Nothing happens
            // between t − 1 and t, so the ledger read at t is exact.
            let snap = if t == 0 {
                // Before anything happened: every device at zero.
                out.devices
                    .iter()
                    .map(|d| DeviceWindow {
                        name: d.info.name.clone(),
                        ..Default::default()
                    })
                    .collect()
            } else {
                snapshot(&simulate(launch, cfg, cat, runs, gap, Some(t - 1))?.0, t)
            };
            e.insert(snap);
        }
    }
    let windows = starts
        .iter()
        .zip(&ends)
        .map(|(&s, &e)| RunWindow {
            start: s,
            end: e,
            devices: minus(&at[&e], &at[&s]),
        })
        .collect();
    Ok((replayed, windows))
}
