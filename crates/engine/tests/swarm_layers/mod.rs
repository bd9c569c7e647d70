//! Test-only layers that move data, for the swarm and for showing that the integrity checker
//! catches broken ones. Small on purpose: the page layer splits with `wattio_core::fanout`.

use std::collections::{HashMap, HashSet, VecDeque};
use wattio_core::device::DeviceInfo;
use wattio_core::fanout::{Fanout, Step};
use wattio_core::function::{Actions, Function};
use wattio_core::io::{Breakdown, Buf, Completion, DeviceId, Io, IoId, Op, Status};
use wattio_core::time::Nanos;

pub const PAGE: u64 = 4096;

/// Where a page of the host volume goes.
#[derive(Clone, Debug)]
pub enum Map {
    /// Same device, same page: a pure per-page splitter.
    Identity,
    /// Page p to device `p % n` of the named devices, at page `p / n`: a striping remapper.
    Stripe(Vec<String>),
    /// BROKEN: page `from` lands on page `to` (aliasing them), reads and writes alike.
    Alias { from: u64, to: u64 },
}

/// Splits every I/O into per-page sub-I/Os (a FLUSH into one per device it maps to) with
/// `wattio_core::fanout`, maps each page, and replies when the last sub-I/O is back.
pub struct Pages {
    map: Map,
    devs: Vec<DeviceId>,
    fanout: Fanout,
}

impl Pages {
    pub fn new(map: Map) -> Pages {
        Pages {
            map,
            devs: Vec::new(),
            fanout: Fanout::new(),
        }
    }

    fn place(&self, dev: u16, page: u64) -> (u16, u64) {
        match &self.map {
            Map::Identity => (dev, page),
            Map::Stripe(_) => {
                let n = self.devs.len() as u64;
                (self.devs[(page % n) as usize], page / n)
            }
            Map::Alias { from, to } => (dev, if page == *from { *to } else { page }),
        }
    }
}

pub fn device_ids(devices: &[DeviceInfo], names: &[String]) -> Result<Vec<DeviceId>, String> {
    names
        .iter()
        .map(|n| {
            devices
                .iter()
                .find(|d| &d.name == n)
                .map(|d| d.id)
                .ok_or_else(|| format!("unknown device `{n}`"))
        })
        .collect()
}

impl Function for Pages {
    fn name(&self) -> &str {
        "pages"
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        if let Map::Stripe(names) = &self.map {
            self.devs = device_ids(devices, names)?;
            if self.devs.is_empty() {
                return Err("stripe: no devices".into());
            }
        }
        Ok(())
    }

    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        let key = self.fanout.begin(io);
        // I/O to a device outside the stripe set (a cache's own flash device) passes.
        if matches!(self.map, Map::Stripe(_)) && !self.devs.contains(&io.dev) {
            out.submit(self.fanout.sub(key, 0, io.len, io.dev, io.offset));
            return;
        }
        if io.op == Op::Flush || io.len == 0 {
            let targets = match (&self.map, io.op) {
                (Map::Stripe(_), Op::Flush) => self.devs.clone(),
                _ => vec![io.dev],
            };
            for d in targets {
                out.submit(self.fanout.sub(key, 0, io.len, d, io.offset));
            }
            return;
        }
        let mut at = io.offset;
        while at < io.end() {
            let page = at / PAGE;
            let to = ((page + 1) * PAGE).min(io.end());
            let (dev, p) = self.place(io.dev, page);
            let delta = (at - io.offset) as u32;
            let sub = self
                .fanout
                .sub(key, delta, (to - at) as u32, dev, p * PAGE + at % PAGE);
            out.submit(sub);
            at = to;
        }
    }

    fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
        match self.fanout.complete(&done) {
            Step::Reply(c) => out.reply(c),
            Step::Pending => {}
            Step::NotMine => panic!("pages: a completion of an I/O it did not send"),
        }
    }
}

/// What an I/O of the write-back layer is for.
#[derive(Clone, Copy, Debug)]
enum Pending {
    /// A host I/O forwarded (to the cache or the backing device), replied when it is back;
    /// `split`: a page of a larger I/O (its reply goes to the fan-out).
    Forward {
        io: Io,
        split: bool,
    },
    /// A host write to the cache; `fua`: durable before it is replied (a flush job).
    /// `replied`: already acknowledged (the broken early-acknowledging cache).
    CacheWrite {
        io: Io,
        page: u64,
        replied: bool,
        split: bool,
    },
    /// Copying `page` of a job: cache → scratch `n`, then scratch → backing.
    CopyRead {
        page: u64,
        n: u64,
    },
    CopyWrite,
    /// The job's final flush of the backing device.
    JobFlush,
}

/// Waits for a FLUSH (or a FUA write) to be made durable.
#[derive(Clone, Copy, Debug)]
struct Job {
    /// The host I/O the job answers, or `None` for the clean unload's (answers nothing).
    io: Option<Io>,
    status: Status,
    /// A page of a split FUA write (replied to the fan-out).
    split: bool,
}

/// A write-back cache on a second device: host writes to device `backing` go to the same
/// offset on `cache` and are acknowledged once there; reads of a page written since the
/// start come from the cache. It works a page at a time: a read or write of several pages
/// is split into pages (`wattio_core::fanout`) and replied when the last is back. A FLUSH (or a FUA write, after its cache write) is a job, one
/// at a time: copy every dirty page cache → backing through scratch buffers, flush the
/// backing device, then reply. The page map is volatile: after a crash the rebuilt layer
/// reads the backing device, where every flushed write is. A clean unload (`on_stop`) runs
/// the same job without a reply.
pub struct WriteBack {
    cache_name: String,
    backing_name: String,
    cache: DeviceId,
    backing: DeviceId,
    /// BROKEN when set: a FLUSH is acknowledged at once, nothing copied or flushed.
    ignore_flush: bool,
    /// BROKEN when set: a write is acknowledged when sent to the cache, not once there.
    early_ack: bool,
    next: u64,
    pending: HashMap<u64, Pending>,
    cached: HashSet<u64>,
    /// Dirty page → generation (bumped by every write), so a job cleans only what it copied.
    dirty: HashMap<u64, u64>,
    generation: u64,
    jobs: VecDeque<Job>,
    /// The running job: pages it copies (page, generation) and copies left.
    copying: Vec<(u64, u64)>,
    copies_left: usize,
    running: Option<Job>,
    fanout: Fanout,
}

impl WriteBack {
    pub fn new(cache: &str, backing: &str, ignore_flush: bool, early_ack: bool) -> WriteBack {
        WriteBack {
            cache_name: cache.into(),
            backing_name: backing.into(),
            cache: 0,
            backing: 0,
            ignore_flush,
            early_ack,
            next: 0,
            pending: HashMap::new(),
            cached: HashSet::new(),
            dirty: HashMap::new(),
            generation: 0,
            jobs: VecDeque::new(),
            copying: Vec::new(),
            copies_left: 0,
            running: None,
            fanout: Fanout::new(),
        }
    }

    fn send(&mut self, io: Io, why: Pending, out: &mut Actions) {
        self.next += 1;
        self.pending.insert(self.next, why);
        out.submit(Io {
            id: IoId::own(self.next),
            ..io
        });
    }

    fn start_job(&mut self, out: &mut Actions) {
        if self.running.is_some() {
            return;
        }
        let Some(job) = self.jobs.pop_front() else {
            return;
        };
        self.running = Some(job);
        let mut pages: Vec<(u64, u64)> = self.dirty.iter().map(|(&p, &g)| (p, g)).collect();
        pages.sort_unstable();
        self.copies_left = pages.len();
        self.copying = pages;
        for k in 0..self.copying.len() {
            let page = self.copying[k].0;
            self.next += 1;
            let n = self.next;
            let rd = Io::own(n, Op::Read, self.cache, page * PAGE, PAGE as u32);
            self.send(rd, Pending::CopyRead { page, n }, out);
        }
        if self.copying.is_empty() {
            self.flush_backing(out);
        }
    }

    fn flush_backing(&mut self, out: &mut Actions) {
        let f = Io::own(0, Op::Flush, self.backing, 0, 0);
        let f = Io {
            buf: Buf::None,
            ..f
        };
        self.send(f, Pending::JobFlush, out);
    }

    /// Reply to a host I/O, or, for a page of a split one, to the fan-out.
    fn answer(&mut self, c: Completion, split: bool, out: &mut Actions) {
        if !split {
            return out.reply(c);
        }
        if let Step::Reply(parent) = self.fanout.complete(&c) {
            out.reply(parent);
        }
    }

    /// A host I/O within one page (or a FLUSH, or I/O to another device).
    fn page_request(&mut self, io: Io, split: bool, out: &mut Actions) {
        if io.dev != self.backing {
            return self.send(io, Pending::Forward { io, split }, out);
        }
        let page = io.offset / PAGE;
        match io.op {
            Op::Flush if self.ignore_flush => {
                self.answer(Completion::ok(io, 0, Breakdown::default()), split, out)
            }
            Op::Flush => {
                self.jobs.push_back(Job {
                    io: Some(io),
                    status: Status::Ok,
                    split,
                });
                self.start_job(out);
            }
            // A whole page, or a part of one already cached (the cache holds the rest).
            Op::Write if io.len as u64 == PAGE || self.cached.contains(&page) => {
                let to = Io {
                    dev: self.cache,
                    fua: false,
                    ..io
                };
                let replied = self.early_ack && !io.fua;
                let why = Pending::CacheWrite {
                    io,
                    page,
                    replied,
                    split,
                };
                self.send(to, why, out);
                if replied {
                    self.answer(Completion::ok(io, 0, Breakdown::default()), split, out);
                }
            }
            Op::Read if self.cached.contains(&page) => {
                let to = Io {
                    dev: self.cache,
                    ..io
                };
                self.send(to, Pending::Forward { io, split }, out);
            }
            // Reads of pages never cached, partial writes of them (write-through), discards.
            _ => self.send(io, Pending::Forward { io, split }, out),
        }
    }

    fn copy_done(&mut self, status: Status, out: &mut Actions) {
        if let Some(j) = &mut self.running {
            if j.status == Status::Ok {
                j.status = status;
            }
        }
        self.copies_left -= 1;
        if self.copies_left == 0 {
            self.flush_backing(out);
        }
    }
}

impl Function for WriteBack {
    fn name(&self) -> &str {
        "write-back"
    }

    fn attach(&mut self, devices: &[DeviceInfo]) -> Result<(), String> {
        let ids = device_ids(
            devices,
            &[self.cache_name.clone(), self.backing_name.clone()],
        )?;
        (self.cache, self.backing) = (ids[0], ids[1]);
        Ok(())
    }

    /// One buffer per page a running job still copies.
    fn scratch_buffers(&self) -> usize {
        self.copies_left
    }

    /// Pages written here and not yet copied back (after an unload, those a device error
    /// kept from the backing device).
    fn counters(&self) -> Vec<(String, f64)> {
        vec![("dirty_pages".into(), self.dirty.len() as f64)]
    }

    fn unload_left(&self) -> Option<String> {
        (!self.dirty.is_empty()).then(|| format!("{} dirty page(s)", self.dirty.len()))
    }

    /// A clean unload: one more job, answering nothing — every dirty page copied back and
    /// the backing device flushed, so that it alone holds the volume.
    fn on_stop(&mut self, _now: Nanos, out: &mut Actions) {
        self.jobs.push_back(Job {
            io: None,
            status: Status::Ok,
            split: false,
        });
        self.start_job(out);
    }

    fn on_request(&mut self, _now: Nanos, io: Io, out: &mut Actions) {
        let (first, last) = (io.offset / PAGE, io.end().saturating_sub(1) / PAGE);
        if io.dev != self.backing || !io.op.moves_data() || io.len == 0 || first == last {
            return self.page_request(io, false, out);
        }
        let key = self.fanout.begin(io);
        let mut at = io.offset;
        while at < io.end() {
            let end = ((at / PAGE + 1) * PAGE).min(io.end());
            let sub = self
                .fanout
                .sub(key, (at - io.offset) as u32, (end - at) as u32, io.dev, at);
            self.page_request(sub, true, out);
            at = end;
        }
    }

    fn on_completion(&mut self, _now: Nanos, done: Completion, out: &mut Actions) {
        let own = done.io.id.0 & !IoId::OWN;
        let why = self.pending.remove(&own).expect("an I/O of ours");
        let reply = |io: Io, status: Status| Completion { io, status, ..done };
        match why {
            Pending::Forward { io, split } => self.answer(reply(io, done.status), split, out),
            Pending::CacheWrite {
                io,
                page,
                replied,
                split,
            } => {
                if done.status == Status::Ok {
                    self.cached.insert(page);
                    self.generation += 1;
                    self.dirty.insert(page, self.generation);
                }
                if io.fua && done.status == Status::Ok {
                    self.jobs.push_back(Job {
                        io: Some(io),
                        status: Status::Ok,
                        split,
                    });
                    self.start_job(out);
                } else if !replied {
                    self.answer(reply(io, done.status), split, out);
                }
            }
            Pending::CopyRead { page, n } => {
                if done.status != Status::Ok {
                    // The buffer the read failed into is never written: free it.
                    out.release(done.io.buf);
                    return self.copy_done(done.status, out);
                }
                let wr = Io::own(n, Op::Write, self.backing, page * PAGE, PAGE as u32);
                self.send(wr, Pending::CopyWrite, out);
            }
            Pending::CopyWrite => self.copy_done(done.status, out),
            Pending::JobFlush => {
                let job = self.running.take().expect("a job runs");
                let status = if job.status == Status::Ok {
                    done.status
                } else {
                    job.status
                };
                if status == Status::Ok {
                    for (page, g) in std::mem::take(&mut self.copying) {
                        if self.dirty.get(&page) == Some(&g) {
                            self.dirty.remove(&page);
                        }
                    }
                }
                self.copying.clear();
                if let Some(io) = job.io {
                    self.answer(reply(io, status), job.split, out);
                }
                self.start_job(out);
            }
        }
    }
}
