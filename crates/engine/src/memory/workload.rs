//! What the processes of a memory run do: a stream of events per process, from a captured
//! memory trace (`wattio capture memory`) or a synthetic generator.

use std::path::Path;
use wattio_core::Nanos;
use wattio_formats::memtrace::{MemKind, MemTraceReader, MAP_X};

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

/// One process of a captured trace.
pub struct TraceProcess {
    pub pid: u32,
    pub command: String,
    pub events: Vec<ProcEvent>,
}

/// Every process of a memory trace, its traffic as events (time = instructions ×
/// `ns_per_instruction`), and the trace's line size. Fills and loads are reads, write-backs
/// and stores writes; start and mark rows carry no traffic. A process that did not exit in
/// the trace ends with its last row.
pub fn load_memtrace(
    path: &Path,
    ns_per_instruction: f64,
) -> Result<(Vec<TraceProcess>, u32), String> {
    let reader = MemTraceReader::open(path).map_err(|e| e.to_string())?;
    let line = reader.geometry().line;
    let commands: Vec<(u32, String)> = reader
        .processes()
        .iter()
        .map(|p| (p.pid, p.command.clone()))
        .collect();
    let mut out: Vec<TraceProcess> = Vec::new();
    let mut last_icount = 0u64;
    for row in reader {
        let r = row.map_err(|e| e.to_string())?;
        if out.last().is_none_or(|p| p.pid != r.pid) {
            let command = commands
                .iter()
                .find(|c| c.0 == r.pid)
                .map(|c| c.1.clone())
                .unwrap_or_default();
            out.push(TraceProcess {
                pid: r.pid,
                command,
                events: Vec::new(),
            });
            last_icount = r.icount;
        }
        let gap_instr = r.icount.saturating_sub(last_icount);
        last_icount = last_icount.max(r.icount);
        let gap = (gap_instr as f64 * ns_per_instruction).round() as Nanos;
        let ev = match r.kind {
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
                    continue;
                }
            }
        };
        out.last_mut().expect("pushed above").events.push(ev);
    }
    Ok((out, line))
}
