//! `wattio trace stats` of a memory trace: traffic per process and in all, bit changes of
//! written-back data (what an NVM cache or main memory would have to flip), footprint.

use super::{CacheGeometry, MemKind, MemTraceReader, Process};
use crate::error::FormatError;
use crate::stats::Footprint;
use serde::Serialize;
use std::collections::BTreeMap;

const PAGE_SHIFT: u32 = 12;

/// Counts of one process (or of the whole trace).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Traffic {
    pub fills: u64,
    /// Fills caused by a store's write-allocate.
    pub fills_for_store: u64,
    pub writebacks: u64,
    /// Write-backs whose new content equals the old (a dirty line written with what it held).
    pub silent_writebacks: u64,
    pub loads: u64,
    pub stores: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Bits that differ between old and new over all write-backs and stores.
    pub bit_changes: u64,
    pub maps: u64,
    /// Maps of a file (the row names it: version 2 traces).
    pub file_maps: u64,
    pub unmaps: u64,
    pub marks: u64,
    /// The largest instruction count seen (the process's length in instructions).
    pub instructions: u64,
    /// The largest instruction count of a traffic row: the span the traffic covers, which
    /// is shorter than `instructions` in a truncated trace (rates are over this span).
    pub traffic_instructions: u64,
}

impl Traffic {
    fn add(&mut self, o: &Traffic) {
        self.fills += o.fills;
        self.fills_for_store += o.fills_for_store;
        self.writebacks += o.writebacks;
        self.silent_writebacks += o.silent_writebacks;
        self.loads += o.loads;
        self.stores += o.stores;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.bit_changes += o.bit_changes;
        self.maps += o.maps;
        self.file_maps += o.file_maps;
        self.unmaps += o.unmaps;
        self.marks += o.marks;
        self.instructions += o.instructions;
        self.traffic_instructions += o.traffic_instructions;
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessStats {
    pub pid: u32,
    pub command: String,
    pub exit_code: Option<i32>,
    #[serde(flatten)]
    pub traffic: Traffic,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemTraceStats {
    pub rows: u64,
    pub geometry: CacheGeometry,
    pub total: Traffic,
    /// Fills and write-backs (or loads and stores) per 1000 instructions of the span the
    /// traffic covers.
    pub reads_per_kilo_instruction: f64,
    pub writes_per_kilo_instruction: f64,
    /// Fraction of written bits that change (bit changes / bits written).
    pub bit_change_fraction: f64,
    /// Distinct 4 KiB pages (per process) the traffic touched.
    pub pages_touched: u64,
    pub pages_touched_exact: bool,
    pub processes: Vec<ProcessStats>,
    /// Distinct files the mappings name.
    pub files: usize,
    /// Notes from the capture: lines lost to unmaps, truncation, processes cut short.
    pub notes: Vec<String>,
}

/// Reads the whole trace once.
pub fn memtrace_stats(mut r: MemTraceReader) -> Result<MemTraceStats, FormatError> {
    let mut per: BTreeMap<u32, (usize, Traffic)> = BTreeMap::new();
    let mut pages = Footprint::new();
    let mut rows = 0u64;
    let mut order = 0usize;
    let mut cur: Option<(u32, Traffic)> = None;
    let mut flush = |cur: &mut Option<(u32, Traffic)>,
                     per: &mut BTreeMap<u32, (usize, Traffic)>| {
        if let Some((pid, t)) = cur.take() {
            let e = per.entry(pid).or_insert_with(|| {
                order += 1;
                (order, Traffic::default())
            });
            e.1.add(&t);
        }
    };
    for rec in r.by_ref() {
        let rec = rec?;
        rows += 1;
        if cur.as_ref().map(|c| c.0) != Some(rec.pid) {
            flush(&mut cur, &mut per);
            cur = Some((rec.pid, Traffic::default()));
        }
        let Some((_, t)) = cur.as_mut() else {
            continue;
        };
        t.instructions = t.instructions.max(rec.icount);
        let traffic = match rec.kind {
            MemKind::Fill => {
                t.fills += 1;
                t.fills_for_store += u64::from(rec.flags & 1);
                t.bytes_read += rec.size;
                true
            }
            MemKind::Load => {
                t.loads += 1;
                t.bytes_read += rec.size;
                true
            }
            MemKind::WriteBack | MemKind::Store => {
                if rec.kind == MemKind::WriteBack {
                    t.writebacks += 1;
                    t.silent_writebacks += u64::from(rec.old == rec.new);
                } else {
                    t.stores += 1;
                }
                t.bytes_written += rec.size;
                t.bit_changes += rec.bit_changes();
                true
            }
            MemKind::Map => {
                t.maps += 1;
                t.file_maps += u64::from(rec.file.is_some());
                false
            }
            MemKind::Unmap => {
                t.unmaps += 1;
                false
            }
            MemKind::Mark => {
                t.marks += 1;
                false
            }
            MemKind::Start | MemKind::Exit => false,
        };
        if traffic {
            t.traffic_instructions = t.traffic_instructions.max(rec.icount);
            let (first, last) = (
                rec.addr >> PAGE_SHIFT,
                rec.addr.saturating_add(rec.size.max(1) - 1) >> PAGE_SHIFT,
            );
            // An access spans at most two pages (sizes are at most a line or a store of
            // 256 bytes; loads are bounded to two pages here so a crafted size cannot spin).
            for p in first..=last.min(first + 1) {
                pages.add(u64::from(rec.pid) << 40 | (p & ((1 << 40) - 1)));
            }
        }
    }
    flush(&mut cur, &mut per);
    let table: BTreeMap<u32, &Process> = r.processes().iter().map(|p| (p.pid, p)).collect();
    let mut procs: Vec<(usize, ProcessStats)> = per
        .into_iter()
        .map(|(pid, (o, traffic))| {
            let p = table.get(&pid);
            (
                o,
                ProcessStats {
                    pid,
                    command: p.map(|p| p.command.clone()).unwrap_or_default(),
                    exit_code: p.and_then(|p| p.exit_code),
                    traffic,
                },
            )
        })
        .collect();
    procs.sort_by_key(|(o, _)| *o);
    let processes: Vec<ProcessStats> = procs.into_iter().map(|(_, p)| p).collect();
    let mut total = Traffic::default();
    for p in &processes {
        total.add(&p.traffic);
    }
    let mut notes = Vec::new();
    let images = r.processes();
    for (k, p) in images.iter().enumerate() {
        if p.dirty_dropped > 0 {
            notes.push(format!(
                "process {}: {} dirty lines lost when their memory was unmapped (not written back)",
                p.pid, p.dirty_dropped
            ));
        }
        if p.records_dropped > 0 || p.rows_truncated > 0 {
            notes.push(format!(
                "process {}: truncated, {} traffic records left out",
                p.pid,
                p.records_dropped + p.rows_truncated
            ));
        }
        if let Some(at) = p.cut_at {
            notes.push(format!(
                "process {}: its raw file ended inside a record at byte {at} (killed?)",
                p.pid
            ));
        } else if p.exit_code.is_none() && !images[k + 1..].iter().any(|q| q.pid == p.pid) {
            // (an image followed by another of the same pid exec'd it: no exit is expected)
            notes.push(format!("process {}: no exit recorded", p.pid));
        }
    }
    let per_ki = |n: u64| {
        if total.traffic_instructions == 0 {
            0.0
        } else {
            n as f64 * 1000.0 / total.traffic_instructions as f64
        }
    };
    let (pages_touched, pages_touched_exact) = pages.count();
    Ok(MemTraceStats {
        rows,
        geometry: *r.geometry(),
        reads_per_kilo_instruction: per_ki(total.fills + total.loads),
        writes_per_kilo_instruction: per_ki(total.writebacks + total.stores),
        bit_change_fraction: if total.bytes_written == 0 {
            0.0
        } else {
            total.bit_changes as f64 / (total.bytes_written * 8) as f64
        },
        pages_touched,
        pages_touched_exact,
        files: r.files().len(),
        total,
        processes,
        notes,
    })
}

impl MemTraceStats {
    pub fn to_text(&self) -> String {
        let g = &self.geometry;
        let mut s = String::new();
        let cache = if g.cache {
            format!(
                "L1D {} KiB {}-way, L2 {} KiB {}-way (inclusive), {} B lines, write-back write-allocate, LRU",
                g.l1_bytes / 1024,
                g.l1_ways,
                g.l2_bytes / 1024,
                g.l2_ways,
                g.line
            )
        } else {
            "none (every load and store recorded)".to_string()
        };
        let t = &self.total;
        s += &format!(
            "memory trace: {} rows, {} processes\n",
            self.rows,
            self.processes.len()
        );
        s += &format!("cache modelled: {cache}\n");
        s += &format!(
            "instructions: {} ({} covered by the traffic rows)\n",
            t.instructions, t.traffic_instructions
        );
        if g.cache {
            s += &format!(
                "fills: {} ({} for stores), {} bytes; {:.3} per 1000 instructions\n",
                t.fills, t.fills_for_store, t.bytes_read, self.reads_per_kilo_instruction
            );
            s += &format!(
                "write-backs: {} ({} silent), {} bytes; {:.3} per 1000 instructions\n",
                t.writebacks,
                t.silent_writebacks,
                t.bytes_written,
                self.writes_per_kilo_instruction
            );
        } else {
            s += &format!("loads: {}, {} bytes\n", t.loads, t.bytes_read);
            s += &format!("stores: {}, {} bytes\n", t.stores, t.bytes_written);
        }
        s += &format!(
            "bit changes: {} of {} bits written ({:.2} %)\n",
            t.bit_changes,
            t.bytes_written * 8,
            self.bit_change_fraction * 100.0
        );
        s += &format!(
            "pages touched: {}{} ({} MiB)\n",
            if self.pages_touched_exact { "" } else { "~" },
            self.pages_touched,
            self.pages_touched * 4 / 1024
        );
        let files = if t.file_maps > 0 {
            format!(" ({} of {} files)", t.file_maps, self.files)
        } else {
            String::new()
        };
        s += &format!(
            "mappings: {} mapped{files}, {} unmapped; marks: {}\n",
            t.maps, t.unmaps, t.marks
        );
        s += "per process:\n";
        for p in &self.processes {
            let cmd: String = p.command.chars().take(60).collect();
            s += &format!(
                "  {:>7}  {:>12} instr  {:>9} fills  {:>9} wbs  {:>9} loads  {:>9} stores  exit {}  {}\n",
                p.pid,
                p.traffic.instructions,
                p.traffic.fills,
                p.traffic.writebacks,
                p.traffic.loads,
                p.traffic.stores,
                p.exit_code.map_or("-".to_string(), |c| c.to_string()),
                crate::error::printable(&cmd)
            );
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        s
    }
}
