//! What the processes of a memory run do: a stream of events per process, from a captured
//! memory trace (`wattio capture memory`) or a synthetic generator.

use std::path::{Path, PathBuf};
use wattio_core::Nanos;
use wattio_formats::memtrace::{self, MemKind, MemRecord, MemTraceReader, Segment, MAP_X};

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
    /// A mapping; `shared`: an executable mapping (program or library text, the pages PAVM
    /// aggregates).
    Map {
        vaddr: u64,
        len: u64,
        shared: bool,
    },
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
            MemKind::Map => ProcEvent::Map {
                vaddr: r.addr,
                len: r.size,
                shared: r.flags & MAP_X != 0,
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

/// A process's run of rows read from the trace file as the run consumes it (its own
/// reader, opened at the first event asked for). A row the reader refuses ends the stream
/// and is reported by [`ProcessStream::error`].
pub struct TraceStream {
    path: PathBuf,
    segment: Segment,
    reader: Option<MemTraceReader>,
    convert: Convert,
    error: Option<String>,
}

impl ProcessStream for TraceStream {
    fn next_event(&mut self) -> Option<ProcEvent> {
        if self.error.is_some() {
            return None;
        }
        if self.reader.is_none() {
            match MemTraceReader::open_rows(&self.path, self.segment.first, self.segment.rows) {
                Ok(r) => self.reader = Some(r),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return None;
                }
            }
        }
        let reader = self.reader.as_mut().expect("opened above");
        loop {
            match reader.next()? {
                Ok(r) => {
                    if let Some(ev) = self.convert.event(&r) {
                        return Some(ev);
                    }
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return None;
                }
            }
        }
    }

    fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
}

/// Every process of a memory trace (each run of a process's rows, in file order) as a
/// stream of events, and the trace's line size. Runs of up to `record_rows` rows are read
/// (and checked) here, longer ones streamed. A process that did not exit in the trace ends
/// with its last row.
pub fn load_memtrace(
    path: &Path,
    ns_per_instruction: f64,
    record_rows: u64,
) -> Result<(Vec<TraceProcess>, u32), String> {
    let head = MemTraceReader::open(path).map_err(|e| e.to_string())?;
    let line = head.geometry().line;
    let commands: Vec<(u32, String)> = head
        .processes()
        .iter()
        .map(|p| (p.pid, p.command.clone()))
        .collect();
    drop(head);
    let mut out = Vec::new();
    for seg in memtrace::segments(path).map_err(|e| e.to_string())? {
        let command = commands
            .iter()
            .find(|c| c.0 == seg.pid)
            .map(|c| c.1.clone())
            .unwrap_or_default();
        let mut stream = TraceStream {
            path: path.to_path_buf(),
            segment: seg,
            reader: None,
            convert: Convert {
                ns_per_instruction,
                last_icount: None,
            },
            error: None,
        };
        let stream: Box<dyn ProcessStream> = if seg.rows <= record_rows {
            // Short: read (and checked) now, by the same stream.
            let events: Vec<ProcEvent> = std::iter::from_fn(|| stream.next_event()).collect();
            if let Some(e) = stream.error() {
                return Err(e.to_string());
            }
            Box::new(Recorded::new(events))
        } else {
            Box::new(stream)
        };
        out.push(TraceProcess {
            pid: seg.pid,
            command,
            stream,
        });
    }
    Ok((out, line))
}
