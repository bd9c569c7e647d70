//! What the processes of a memory run do: a stream of events per process, from a captured
//! memory trace (`wattio capture memory`) or a synthetic generator.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wattio_core::Nanos;
use wattio_formats::memtrace::{
    self, FileMap, FileTable, MemKind, MemRecord, MemTraceReader, Resume, Segment, MAP_W, MAP_X,
};

/// One event of a process, in the process's own order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// Computation that touches no memory (cache hits), `ns` long.
    Compute(Nanos),
    /// After `gap` ns of computation, one line of memory at `vaddr`: a read stalls the
    /// process until the data is back; a write (a write-back) until the controller takes it.
    Access {
        gap: Nanos,
        vaddr: u64,
        write: bool,
    },
    /// A mapping; `shared`: pages PAVM aggregates (DLL rule): in a trace that names mapped
    /// files, a read-only file mapping (followed by its [`ProcEvent::MapFile`]); in one
    /// that does not, an executable mapping (program or library text), private to the
    /// process.
    Map {
        vaddr: u64,
        len: u64,
        shared: bool,
    },
    /// The mapping of the `Map` just before is of this file (numbered across the run) from
    /// this offset: its pages are the file's pages in the page cache, one physical page for
    /// every process that maps them. (An event of its own so that an event stays 24 bytes.)
    MapFile(FileMap),
    Unmap {
        vaddr: u64,
        len: u64,
    },
}

/// A process's events, produced as the run consumes them.
pub trait ProcessStream: Send {
    fn next_event(&mut self) -> Option<ProcEvent>;

    /// Why the stream ended early, if it did (a trace row that cannot be read): the run
    /// fails with it rather than taking the process for finished.
    fn error(&self) -> Option<&str> {
        None
    }
}

/// Events held in memory.
pub struct Recorded {
    events: Vec<ProcEvent>,
    pos: usize,
}

impl Recorded {
    pub fn new(events: Vec<ProcEvent>) -> Recorded {
        Recorded { events, pos: 0 }
    }
}

impl ProcessStream for Recorded {
    #[inline]
    fn next_event(&mut self) -> Option<ProcEvent> {
        let e = self.events.get(self.pos).copied();
        self.pos += 1;
        e
    }
}

/// A cache-missing streaming process (Table 3.2's first process): `accesses` reads of
/// consecutive lines, `gap` ns of computation between one's data and the next miss.
pub struct Streaming {
    pub remaining: u64,
    pub gap: Nanos,
    pub next: u64,
    pub line: u64,
    /// The stream wraps around in this many bytes (a buffer larger than the caches).
    pub span: u64,
    pub base: u64,
}

impl ProcessStream for Streaming {
    #[inline]
    fn next_event(&mut self) -> Option<ProcEvent> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let vaddr = self.base + self.next;
        self.next = (self.next + self.line) % self.span;
        Some(ProcEvent::Access {
            gap: self.gap,
            vaddr,
            write: false,
        })
    }
}

/// A process whose accesses all hit in the cache (Table 3.2's second): `total` ns of
/// computation in `chunk`-ns pieces.
pub struct Hitting {
    pub remaining: Nanos,
    pub chunk: Nanos,
}

impl ProcessStream for Hitting {
    fn next_event(&mut self) -> Option<ProcEvent> {
        if self.remaining == 0 {
            return None;
        }
        let c = self.chunk.min(self.remaining).max(1);
        self.remaining -= c;
        Some(ProcEvent::Compute(c))
    }
}

/// A process's runs of rows of at most this many are read into memory at once (24 bytes an
/// event); longer ones are streamed from the file as the run consumes them, so memory does
/// not grow with the trace's length (the thesis's high mix has ~70 M accesses).
pub const RECORD_ROWS: u64 = 1 << 16;

/// Rows of a trace's short runs read into memory in all (24 MiB of events): the runs past
/// it are streamed however short, so a trace of many short runs is bounded too.
pub const RECORD_TOTAL_ROWS: u64 = 1 << 20;

/// One process of a captured trace: a run of its rows, read into memory or streamed.
pub struct TraceProcess {
    pub pid: u32,
    pub command: String,
    pub stream: Box<dyn ProcessStream>,
}

/// Rows to events, for one process: time = instructions × `ns_per_instruction`, counted
/// from the process's first row. Fills and loads are reads, write-backs and stores writes;
/// start, exit and mark rows carry no traffic (their gap becomes computation).
struct Convert {
    ns_per_instruction: f64,
    last_icount: Option<u64>,
    /// A row's second event (a file mapping's `MapFile`), handed out next.
    pending: Option<ProcEvent>,
    /// The trace names its mappings' files (version 2): the trace's file numbers in the
    /// run's file table. `None`: it does not (version 1).
    files: Option<std::sync::Arc<[u32]>>,
}

impl Convert {
    fn event(&mut self, r: &MemRecord) -> Option<ProcEvent> {
        let last = *self.last_icount.get_or_insert(r.icount);
        let gap_instr = r.icount.saturating_sub(last);
        self.last_icount = Some(last.max(r.icount));
        let gap = (gap_instr as f64 * self.ns_per_instruction).round() as Nanos;
        Some(match r.kind {
            MemKind::Fill | MemKind::Load => ProcEvent::Access {
                gap,
                vaddr: r.addr,
                write: false,
            },
            MemKind::WriteBack | MemKind::Store => ProcEvent::Access {
                gap,
                vaddr: r.addr,
                write: true,
            },
            MemKind::Map => match &self.files {
                // Only read-only file mappings are the page cache's pages; a writable one
                // (a library's data) is private to the process (copy on write).
                Some(run) => {
                    let file = r.file.filter(|_| r.flags & MAP_W == 0).map(|f| FileMap {
                        file: run[f.file as usize],
                        offset: f.offset,
                    });
                    self.pending = file.map(ProcEvent::MapFile);
                    ProcEvent::Map {
                        vaddr: r.addr,
                        len: r.size,
                        shared: file.is_some(),
                    }
                }
                None => ProcEvent::Map {
                    vaddr: r.addr,
                    len: r.size,
                    shared: r.flags & MAP_X != 0,
                },
            },
            MemKind::Unmap => ProcEvent::Unmap {
                vaddr: r.addr,
                len: r.size,
            },
            MemKind::Start | MemKind::Exit | MemKind::Mark => {
                if gap > 0 {
                    ProcEvent::Compute(gap)
                } else {
                    return None;
                }
            }
        })
    }
}

/// Readers of one trace's streamed runs held open at once: past this, the one read least
/// recently is closed and reopened where it stopped when its process runs again. A
/// reader holds a Parquet decoder and a batch of rows (a few hundred KiB); a trace's
/// long runs are bounded only by its rows, so without this a trace of many concurrent
/// long processes would hold as many readers.
pub const MAX_OPEN_READERS: usize = 64;

enum Reader {
    Unread,
    Open {
        reader: Box<MemTraceReader>,
        used: u64,
    },
    Parked(Resume),
    Done,
}

/// The readers of a trace's streamed runs (one slot a run), at most `limit` open.
struct Readers {
    path: PathBuf,
    limit: usize,
    tick: u64,
    runs: Vec<(Segment, Reader)>,
    /// Runs with an open reader.
    open: Vec<usize>,
    most_open: usize,
    reopened: u64,
    /// Runs streamed (the others were read at load).
    streamed: usize,
}

impl Readers {
    /// Run `id`'s reader, opened (or reopened where it stopped) if it is not, closing the
    /// least recently read one if `limit` are; `None`: the run is over.
    fn reader(&mut self, id: usize) -> Result<Option<&mut MemTraceReader>, String> {
        self.tick += 1;
        let (seg, state) = &self.runs[id];
        let end = seg.first + seg.rows;
        let at = match state {
            Reader::Done => return Ok(None),
            Reader::Open { .. } => None,
            Reader::Unread => Some(Resume {
                row: seg.first,
                pid: None,
                icount: 0,
            }),
            Reader::Parked(at) => Some(*at),
        };
        if let Some(at) = at {
            if self.open.len() >= self.limit {
                let (k, &lru) = self
                    .open
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, &o)| match self.runs[o].1 {
                        Reader::Open { used, .. } => used,
                        _ => u64::MAX,
                    })
                    .expect("limit > 0");
                self.open.swap_remove(k);
                let parked = match &self.runs[lru].1 {
                    Reader::Open { reader, .. } => reader.resume_point(),
                    _ => unreachable!("only open runs are listed"),
                };
                self.runs[lru].1 = Reader::Parked(parked);
            }
            let reader =
                MemTraceReader::resume(&self.path, at, end - at.row).map_err(|e| e.to_string())?;
            self.reopened += matches!(self.runs[id].1, Reader::Parked(_)) as u64;
            self.runs[id].1 = Reader::Open {
                reader: Box::new(reader),
                used: 0,
            };
            self.open.push(id);
            self.most_open = self.most_open.max(self.open.len());
        }
        let tick = self.tick;
        match &mut self.runs[id].1 {
            Reader::Open { reader, used } => {
                *used = tick;
                Ok(Some(reader))
            }
            _ => unreachable!("opened above"),
        }
    }

    /// Run `id` is over (or failed): its reader is freed.
    fn done(&mut self, id: usize) {
        if matches!(self.runs[id].1, Reader::Open { .. }) {
            self.open.retain(|&o| o != id);
        }
        self.runs[id].1 = Reader::Done;
    }
}

/// A handle on a trace's readers, for their figures.
#[derive(Clone)]
pub struct TraceReaders(Arc<Mutex<Readers>>);

impl TraceReaders {
    fn lock(&self) -> std::sync::MutexGuard<'_, Readers> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Readers open now.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// The most readers that were open at once.
    pub fn most_open(&self) -> usize {
        self.lock().most_open
    }

    /// Readers reopened where they had stopped.
    pub fn reopened(&self) -> u64 {
        self.lock().reopened
    }

    /// Runs streamed rather than read at load.
    pub fn streamed(&self) -> usize {
        self.lock().streamed
    }
}

/// A process's run of rows read from the trace file as the run consumes it, through the
/// trace's bounded set of readers (opened at the first event asked for). A row the reader
/// refuses ends the stream and is reported by [`ProcessStream::error`].
pub struct TraceStream {
    readers: TraceReaders,
    id: usize,
    convert: Convert,
    error: Option<String>,
}

impl ProcessStream for TraceStream {
    fn next_event(&mut self) -> Option<ProcEvent> {
        if let Some(e) = self.convert.pending.take() {
            return Some(e);
        }
        if self.error.is_some() {
            return None;
        }
        let mut readers = self.readers.lock();
        let reader = match readers.reader(self.id) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                self.error = Some(e);
                readers.done(self.id);
                return None;
            }
        };
        let event = loop {
            match reader.next() {
                None => break None,
                Some(Ok(r)) => {
                    if let Some(ev) = self.convert.event(&r) {
                        return Some(ev);
                    }
                }
                Some(Err(e)) => {
                    self.error = Some(e.to_string());
                    break None;
                }
            }
        };
        readers.done(self.id);
        event
    }

    fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

/// How much of a captured trace is held in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceLimits {
    /// Runs of at most this many rows are read (and checked) at load ...
    pub record_rows: u64,
    /// ... while their rows in all stay within this; the other runs are streamed.
    pub record_total_rows: u64,
    /// Readers of streamed runs open at once (at least 1).
    pub open_readers: usize,
}

impl Default for TraceLimits {
    fn default() -> TraceLimits {
        TraceLimits {
            record_rows: RECORD_ROWS,
            record_total_rows: RECORD_TOTAL_ROWS,
            open_readers: MAX_OPEN_READERS,
        }
    }
}

/// Every process of a memory trace (each run of a process's rows, in file order) as a
/// stream of events, and the trace's line size. Runs of up to `record_rows` rows are read
/// (and checked) here, within [`RECORD_TOTAL_ROWS`] in all; the others are streamed, with
/// at most [`MAX_OPEN_READERS`] readers open. A process that did not exit in the trace
/// ends with its last row.
pub fn load_memtrace(
    path: &Path,
    ns_per_instruction: f64,
    record_rows: u64,
) -> Result<(Vec<TraceProcess>, u32), String> {
    let limits = TraceLimits {
        record_rows,
        ..TraceLimits::default()
    };
    load_memtrace_bounded(path, ns_per_instruction, limits).map(|(procs, line, _)| (procs, line))
}

/// [`load_memtrace`] within `limits`, and a handle on the trace's readers.
pub fn load_memtrace_bounded(
    path: &Path,
    ns_per_instruction: f64,
    limits: TraceLimits,
) -> Result<(Vec<TraceProcess>, u32, TraceReaders), String> {
    load_memtrace_files(path, ns_per_instruction, limits, &mut FileTable::default())
}

/// [`load_memtrace_bounded`], the trace's mapped files numbered in `files`, the run's
/// table (traces captured on one machine map the same library as the same file).
pub fn load_memtrace_files(
    path: &Path,
    ns_per_instruction: f64,
    limits: TraceLimits,
    files: &mut FileTable,
) -> Result<(Vec<TraceProcess>, u32, TraceReaders), String> {
    let head = MemTraceReader::open(path).map_err(|e| e.to_string())?;
    let line = head.geometry().line;
    let run_files: Option<std::sync::Arc<[u32]>> = if head.names_files() {
        let ids: Result<Vec<u32>, String> = head
            .files()
            .iter()
            .map(|f| {
                files.intern(f).ok_or_else(|| {
                    format!(
                        "{}: more than {} mapped files in the run",
                        path.display(),
                        memtrace::MAX_FILES
                    )
                })
            })
            .collect();
        Some(ids?.into())
    } else {
        None
    };
    let commands: Vec<(u32, String)> = head
        .processes()
        .iter()
        .map(|p| (p.pid, p.command.clone()))
        .collect();
    drop(head);
    let segments = memtrace::segments(path).map_err(|e| e.to_string())?;
    let readers = TraceReaders(Arc::new(Mutex::new(Readers {
        path: path.to_path_buf(),
        limit: limits.open_readers.max(1),
        tick: 0,
        runs: segments.iter().map(|&s| (s, Reader::Unread)).collect(),
        open: Vec::new(),
        most_open: 0,
        reopened: 0,
        streamed: 0,
    })));
    let mut out = Vec::new();
    let mut recorded = 0u64;
    for (id, seg) in segments.into_iter().enumerate() {
        let command = commands
            .iter()
            .find(|c| c.0 == seg.pid)
            .map(|c| c.1.clone())
            .unwrap_or_default();
        let mut stream = TraceStream {
            readers: readers.clone(),
            id,
            convert: Convert {
                ns_per_instruction,
                last_icount: None,
                pending: None,
                files: run_files.clone(),
            },
            error: None,
        };
        let record =
            seg.rows <= limits.record_rows && recorded + seg.rows <= limits.record_total_rows;
        let stream: Box<dyn ProcessStream> = if record {
            // Short: read (and checked) now, by the same stream.
            recorded += seg.rows;
            let events: Vec<ProcEvent> = std::iter::from_fn(|| stream.next_event()).collect();
            if let Some(e) = stream.error() {
                return Err(e.to_string());
            }
            Box::new(Recorded::new(events))
        } else {
            readers.lock().streamed += 1;
            Box::new(stream)
        };
        out.push(TraceProcess {
            pid: seg.pid,
            command,
            stream,
        });
    }
    Ok((out, line, readers))
}
#[cfg(test)]
mod tests {
    /// The simulator holds a trace's short runs as events (`RECORD_TOTAL_ROWS` of them):
    /// keep an event at 24 bytes.
    #[test]
    fn an_event_is_24_bytes() {
        assert_eq!(std::mem::size_of::<super::ProcEvent>(), 24);
    }
}
