//! Memory traces: a program's main-memory traffic, as the `wattio-mem` Valgrind tool
//! (`tools/valgrind/wattio-mem`) sees it behind a modelled L1/L2 cache, with the process
//! and mapping events that power-aware memory (PAVM's active ranks) and NVM caches (bit
//! changes per write-back) need.
//!
//! The file is Parquet, Zstandard-compressed, one row per event, rows grouped by process in
//! order of process start and, within a process, in order of time. Columns:
//!
//! | column | type | meaning |
//! |---|---|---|
//! | `pid` | UInt32 | process id |
//! | `icount` | UInt64 | guest instructions the process executed before the event |
//! | `kind` | UInt8 | [`MemKind`] |
//! | `addr` | UInt64 | virtual address; start: start time (µs since the epoch); mark: its value |
//! | `size` | UInt64 | bytes (line size, access size, mapping length) |
//! | `flags` | UInt32 | fill: 1 if caused by a store; map/unmap: [`MAP_R`]… bits; start: parent pid; exit: exit code |
//! | `old`, `new` | Binary, nullable | write-back and store: the bytes before and after |
//! | `file`, `offset` | UInt32, UInt64, nullable | map rows of a file mapping ([`MAP_FILE`]): the file (an index in the file table) and the offset of the mapping's first byte in it (version 2) |
//!
//! Key-value metadata: `wattio.memtrace.version`, `wattio.memtrace.cache` (the geometry,
//! JSON), `wattio.memtrace.processes` (per process: command line, exit code, the tool's
//! counters, JSON), `wattio.memtrace.files` (the mapped files: path, device, inode, JSON;
//! version 2) and free-form provenance. Version 1 files (no file columns) are still read:
//! their mappings name no file.

mod raw;
pub mod stats;

pub use raw::{CacheGeometry, RawReader, MAGIC as RAW_MAGIC};
pub use stats::{memtrace_stats, MemTraceStats};

use crate::error::{FormatError, Location};
use crate::parquet_io::{
    self, check_footer, contain, key_values, Chunk, Col, Groups, Kind, Nullable,
};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, RowGroupReader};
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

pub const VERSION_KEY: &str = "wattio.memtrace.version";
pub const VERSION: &str = "2";
/// The version before mappings named their files (read, never written).
pub const VERSION_1: &str = "1";
pub const CACHE_KEY: &str = "wattio.memtrace.cache";
pub const PROCESSES_KEY: &str = "wattio.memtrace.processes";
pub const FILES_KEY: &str = "wattio.memtrace.files";
/// Longest `old`/`new` value: a line (at most 256 bytes) or a store record (the tool splits
/// longer stores).
pub const MAX_VALUE_BYTES: usize = 256;
/// Most processes one trace may describe (the metadata table is held in memory).
pub const MAX_PROCESSES: usize = 1 << 16;
/// Most distinct mapped files one trace may name (the file table is held in memory).
pub const MAX_FILES: usize = 1 << 16;
/// Longest path of a mapped file kept (the tool cuts longer ones).
pub const MAX_PATH_BYTES: usize = 4096;

/// Mapping flags (`flags` of map and unmap rows).
pub const MAP_R: u32 = 1;
pub const MAP_W: u32 = 2;
pub const MAP_X: u32 = 4;
/// A mapping that existed when the program started (executable, loader, stack).
pub const MAP_STARTUP: u32 = 16;
/// Heap growth or shrinkage through brk.
pub const MAP_BRK: u32 = 32;
/// The two halves of an mremap.
pub const MAP_REMAP: u32 = 64;
/// A mapping of a file: the row names it ([`MemRecord::file`]).
pub const MAP_FILE: u32 = 128;
const MAP_KNOWN: u32 = MAP_R | MAP_W | MAP_X | MAP_STARTUP | MAP_BRK | MAP_REMAP | MAP_FILE;

/// Rows per row group: the writer holds a row group's values until it is written (with
/// values on a third of the rows, about 20 MB), and each is compressed as a unit.
const GROUP_ROWS: usize = 256 * 1024;
/// Rows read from the columns at a time.
const READ_BATCH_ROWS: usize = 4096;

/// What a row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[repr(u8)]
pub enum MemKind {
    /// A line read from memory into the L2 (a load miss, or a store's write-allocate).
    Fill = 0,
    /// A dirty line written back to memory, with its old and new content.
    WriteBack = 1,
    /// Uncached traces: one load.
    Load = 2,
    /// Uncached traces: one store, with the bytes before and after.
    Store = 3,
    /// The process started (first row of each process).
    Start = 4,
    /// The process exited (the last row, if it did).
    Exit = 5,
    /// Memory mapped (startup mapping, mmap, brk growth, mremap target).
    Map = 6,
    /// Memory unmapped (munmap, brk shrinkage, mremap source).
    Unmap = 7,
    /// A mark the program set (`WATTIO_MEM_MARK`); the caches were emptied before it.
    Mark = 8,
}

impl MemKind {
    pub const ALL: [MemKind; 9] = [
        MemKind::Fill,
        MemKind::WriteBack,
        MemKind::Load,
        MemKind::Store,
        MemKind::Start,
        MemKind::Exit,
        MemKind::Map,
        MemKind::Unmap,
        MemKind::Mark,
    ];

    pub fn from_code(c: u8) -> Option<MemKind> {
        MemKind::ALL.get(usize::from(c)).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            MemKind::Fill => "fill",
            MemKind::WriteBack => "writeback",
            MemKind::Load => "load",
            MemKind::Store => "store",
            MemKind::Start => "start",
            MemKind::Exit => "exit",
            MemKind::Map => "map",
            MemKind::Unmap => "unmap",
            MemKind::Mark => "mark",
        }
    }

    /// Rows that carry old and new bytes.
    pub fn has_values(self) -> bool {
        matches!(self, MemKind::WriteBack | MemKind::Store)
    }
}

/// One row of a memory trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemRecord {
    pub pid: u32,
    pub icount: u64,
    pub kind: MemKind,
    pub addr: u64,
    pub size: u64,
    pub flags: u32,
    pub old: Option<Vec<u8>>,
    pub new: Option<Vec<u8>>,
    /// Map rows with [`MAP_FILE`]: the file mapped and where in it.
    pub file: Option<FileMap>,
}

/// Where a file mapping comes from: the file (an index in the trace's file table,
/// [`MemTraceReader::files`]) and the offset in it of the mapping's first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMap {
    pub file: u32,
    pub offset: u64,
}

/// A file some mapping of the trace maps (the `wattio.memtrace.files` metadata): two
/// mappings, in one process or two, map the same file when device and inode agree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MappedFile {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
}

/// A file table built as mappings are met: each distinct file once, at most [`MAX_FILES`].
#[derive(Debug, Clone, Default)]
pub struct FileTable {
    files: Vec<MappedFile>,
    index: std::collections::HashMap<MappedFile, u32>,
}

impl FileTable {
    /// The file's index, added if new; `None` past [`MAX_FILES`] files.
    pub fn intern(&mut self, f: &MappedFile) -> Option<u32> {
        if let Some(&i) = self.index.get(f) {
            return Some(i);
        }
        if self.files.len() >= MAX_FILES {
            return None;
        }
        let i = self.files.len() as u32;
        self.files.push(f.clone());
        self.index.insert(f.clone(), i);
        Some(i)
    }

    pub fn files(&self) -> &[MappedFile] {
        &self.files
    }
}

impl MemRecord {
    /// Bits that differ between `old` and `new` (0 for rows without values).
    pub fn bit_changes(&self) -> u64 {
        match (&self.old, &self.new) {
            (Some(o), Some(n)) => o
                .iter()
                .zip(n)
                .map(|(a, b)| u64::from((a ^ b).count_ones()))
                .sum(),
            _ => 0,
        }
    }
}

/// One process of a trace (the `wattio.memtrace.processes` metadata).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Wall-clock start, µs since the epoch.
    pub start_us: u64,
    pub command: String,
    /// `None` if the trace ends before the process exited.
    pub exit_code: Option<i32>,
    pub exit_icount: Option<u64>,
    /// The tool's counters at exit: cache accesses (per line touched), L1 misses, fills,
    /// write-backs, dirty lines lost to an unmap, traffic records left out by
    /// `--wm-max-records`.
    pub accesses: u64,
    pub l1_misses: u64,
    pub fills: u64,
    pub writebacks: u64,
    pub dirty_dropped: u64,
    pub records_dropped: u64,
    /// Rows of this process left out when converting with a per-process limit.
    #[serde(default)]
    pub rows_truncated: u64,
    /// The raw file ended inside a record at this byte offset (the process was killed).
    #[serde(default)]
    pub cut_at: Option<u64>,
}

/// The columns, in file order (version 1 had the first eight).
pub const COLUMNS: [Col; 10] = [
    Col::new("pid", Kind::UInt32),
    Col::new("icount", Kind::UInt64),
    Col::new("kind", Kind::UInt8),
    Col::new("addr", Kind::UInt64),
    Col::new("size", Kind::UInt64),
    Col::new("flags", Kind::UInt32),
    Col::new("old", Kind::Binary).nullable(),
    Col::new("new", Kind::Binary).nullable(),
    Col::new("file", Kind::UInt32).nullable(),
    Col::new("offset", Kind::UInt64).nullable(),
];

fn pq_err(file: &str, e: impl std::fmt::Display) -> FormatError {
    FormatError::file(file, format!("Parquet: {e}"))
}

/// Streams records into a memory-trace file. The process table and geometry go into the
/// footer at [`MemTraceWriter::finish`].
pub struct MemTraceWriter {
    file: String,
    writer: parquet_io::Writer,
    // Parquet's physical types; unsigned values are their bit patterns.
    pid: Vec<i32>,
    icount: Vec<i64>,
    kind: Vec<i32>,
    addr: Vec<i64>,
    size: Vec<i64>,
    flags: Vec<i32>,
    old: Nullable<ByteArray>,
    new: Nullable<ByteArray>,
    map_file: Nullable<i32>,
    map_offset: Nullable<i64>,
    rows: u64,
}

impl MemTraceWriter {
    pub fn create(
        path: &Path,
        geometry: &CacheGeometry,
        provenance: &[(String, String)],
    ) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let mut kv = vec![
            KeyValue::new(VERSION_KEY.to_string(), VERSION.to_string()),
            KeyValue::new(
                CACHE_KEY.to_string(),
                serde_json::to_string(geometry)
                    .map_err(|e| FormatError::file(&file, e.to_string()))?,
            ),
        ];
        kv.extend(
            provenance
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        );
        // Compressed, unlike block traces: old and new line contents dominate the size and
        // repeat a lot (zero pages, unchanged bytes); times and addresses are delta-coded.
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(9).map_err(|e| pq_err(&file, e))?,
            ))
            .set_key_value_metadata(Some(kv));
        for c in ["icount", "addr"] {
            props = props
                .set_column_dictionary_enabled(ColumnPath::from(c), false)
                .set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED);
        }
        let f = File::create(path).map_err(|e| FormatError::io(&file, &e))?;
        let writer =
            parquet_io::Writer::new(f, &COLUMNS, props.build()).map_err(|e| pq_err(&file, e))?;
        Ok(MemTraceWriter {
            file,
            writer,
            pid: Vec::new(),
            icount: Vec::new(),
            kind: Vec::new(),
            addr: Vec::new(),
            size: Vec::new(),
            flags: Vec::new(),
            old: Nullable::default(),
            new: Nullable::default(),
            map_file: Nullable::default(),
            map_offset: Nullable::default(),
            rows: 0,
        })
    }

    pub fn write(&mut self, r: &MemRecord) -> Result<(), FormatError> {
        self.pid.push(r.pid as i32);
        self.icount.push(r.icount as i64);
        self.kind.push(i32::from(r.kind as u8));
        self.addr.push(r.addr as i64);
        self.size.push(r.size as i64);
        self.flags.push(r.flags as i32);
        self.old.push(r.old.clone().map(ByteArray::from));
        self.new.push(r.new.clone().map(ByteArray::from));
        self.map_file.push(r.file.map(|f| f.file as i32));
        self.map_offset.push(r.file.map(|f| f.offset as i64));
        self.rows += 1;
        if self.pid.len() >= GROUP_ROWS {
            self.flush_group()?;
        }
        Ok(())
    }

    fn flush_group(&mut self) -> Result<(), FormatError> {
        self.writer
            .flush(&mut [
                &mut self.pid,
                &mut self.icount,
                &mut self.kind,
                &mut self.addr,
                &mut self.size,
                &mut self.flags,
                &mut self.old,
                &mut self.new,
                &mut self.map_file,
                &mut self.map_offset,
            ])
            .map_err(|e| pq_err(&self.file, e))
    }

    /// Writes the process table and closes the file; returns the rows written. The rows
    /// must name no file (see [`MemTraceWriter::finish_with_files`]).
    pub fn finish(self, processes: &[Process]) -> Result<u64, FormatError> {
        self.finish_with_files(processes, &[])
    }

    /// Writes the process and file tables and closes the file; returns the rows written.
    /// Every row's file is an index in `files`.
    pub fn finish_with_files(
        mut self,
        processes: &[Process],
        files: &[MappedFile],
    ) -> Result<u64, FormatError> {
        self.flush_group()?;
        let table = serde_json::to_string(processes).map_err(|e| pq_err(&self.file, e))?;
        self.writer
            .append_key_value(KeyValue::new(PROCESSES_KEY.to_string(), table));
        let table = serde_json::to_string(files).map_err(|e| pq_err(&self.file, e))?;
        self.writer
            .append_key_value(KeyValue::new(FILES_KEY.to_string(), table));
        self.writer.close().map_err(|e| pq_err(&self.file, e))?;
        Ok(self.rows)
    }
}

/// How [`convert_raw`] builds a trace.
#[derive(Debug, Clone, Default)]
pub struct ConvertOptions {
    /// Keep at most this many traffic rows (fills, write-backs, loads, stores) per process,
    /// the first ones; process, mapping and mark rows are always kept. The rows left out
    /// are counted in [`Process::rows_truncated`].
    pub max_traffic_per_process: Option<u64>,
    pub provenance: Vec<(String, String)>,
}

/// What [`convert_raw`] wrote.
#[derive(Debug, Clone, Serialize)]
pub struct ConvertReport {
    pub rows: u64,
    pub processes: Vec<Process>,
    pub geometry: CacheGeometry,
}

/// Converts the tool's raw files (one per process) into one memory trace. Processes are
/// ordered by start time (then pid); all must have been captured with the same geometry.
pub fn convert_raw(
    inputs: &[PathBuf],
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertReport, FormatError> {
    if inputs.is_empty() {
        return Err(FormatError::file(
            output.display().to_string(),
            "no raw trace files to convert",
        ));
    }
    if inputs.len() > MAX_PROCESSES {
        return Err(FormatError::file(
            output.display().to_string(),
            format!("{} raw files", inputs.len()),
        )
        .with_expected(format!("at most {MAX_PROCESSES} processes")));
    }
    let open = |p: &PathBuf| -> Result<RawReader<std::io::BufReader<File>>, FormatError> {
        let name = p.display().to_string();
        let f = File::open(p).map_err(|e| FormatError::io(&name, &e))?;
        RawReader::new(std::io::BufReader::with_capacity(1 << 16, f), &name)
    };
    let mut order = Vec::with_capacity(inputs.len());
    for p in inputs {
        let r = open(p)?;
        order.push((r.process.start_us, r.process.pid, p.clone(), r.geometry));
    }
    order.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
    let geometry = order[0].3;
    if let Some(o) = order.iter().find(|o| o.3 != geometry) {
        return Err(FormatError::file(
            o.2.display().to_string(),
            "captured with another cache geometry than the other processes",
        ));
    }
    let mut w = MemTraceWriter::create(output, &geometry, &opts.provenance)?;
    let mut processes = Vec::with_capacity(order.len());
    // One file table for the trace: each process's files renumbered into it.
    let mut files = FileTable::default();
    for (_, _, path, _) in &order {
        let mut r = open(path)?;
        w.write(&r.start_record())?;
        let mut traffic = 0u64;
        let mut truncated = 0u64;
        while let Some(mut rec) = r.next_record()? {
            if let Some(f) = &mut rec.file {
                let mapped = &r.files.files()[f.file as usize];
                f.file = files.intern(mapped).ok_or_else(|| {
                    FormatError::file(
                        path.display().to_string(),
                        format!("more than {MAX_FILES} mapped files in the trace"),
                    )
                    .with_expected(format!("at most {MAX_FILES} distinct files"))
                })?;
            }
            if matches!(
                rec.kind,
                MemKind::Fill | MemKind::WriteBack | MemKind::Load | MemKind::Store
            ) {
                if opts.max_traffic_per_process.is_some_and(|m| traffic >= m) {
                    truncated += 1;
                    continue;
                }
                traffic += 1;
            }
            w.write(&rec)?;
        }
        let mut p = r.process;
        p.rows_truncated = truncated;
        processes.push(p);
    }
    let rows = w.finish_with_files(&processes, files.files())?;
    Ok(ConvertReport {
        rows,
        processes,
        geometry,
    })
}

/// Whether the Parquet file at `path` is a memory trace (its footer has the version key):
/// how `wattio trace stats` picks the reader. Reads the footer only, as carefully as the
/// readers do; anything unreadable is "no" (the block-trace reader then says what is wrong).
pub fn is_memtrace(path: &Path) -> bool {
    let Ok(f) = File::open(path) else {
        return false;
    };
    let Ok(len) = f.metadata().map(|m| m.len()) else {
        return false;
    };
    let name = path.display().to_string();
    if check_footer(&f, len, &name, "a wattio memory trace (Parquet)").is_err() {
        return false;
    }
    let md = contain(&name, Location::File, || {
        parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&f)
    });
    matches!(md, Ok(Ok(md)) if md
        .file_metadata()
        .key_value_metadata()
        .is_some_and(|kv| kv.iter().any(|k| k.key == VERSION_KEY)))
}

/// Where a reader stopped ([`MemTraceReader::resume_point`]); `row` with no `pid` and
/// `icount` 0 is where a reader of a run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    pub row: u64,
    pub pid: Option<u32>,
    pub icount: u64,
}

/// One process's run of consecutive rows in a memory trace (a trace holds each process's
/// rows together, each run beginning with its start row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub pid: u32,
    pub first: u64,
    pub rows: u64,
}

/// The runs of rows of the trace at `path`, in file order, found from its `pid` column alone
/// (the other columns are checked by the readers of the runs, [`MemTraceReader::open_rows`]);
/// at most [`MAX_PROCESSES`] of them.
pub fn segments(path: &Path) -> Result<Vec<Segment>, FormatError> {
    let file = path.display().to_string();
    let f = File::open(path).map_err(|e| FormatError::io(&file, &e))?;
    let reader = parquet_io::open(f, &file, "a wattio memory trace (Parquet)")?;
    let col = parquet_io::find_column(
        &reader,
        &file,
        "pid",
        Kind::UInt32,
        "the wattio memory-trace schema (docs/capture-memory.md)",
    )?;
    let mut pids = Chunk::<Int32Type>::new(col);
    let mut groups = Groups::new();
    let mut out: Vec<Segment> = Vec::new();
    let mut row = 0u64;
    loop {
        let read = contain(&file, Location::Row(row), || {
            if !groups.advance(&reader, |rg| pids.start(rg))? {
                return Ok(0);
            }
            let n = usize::try_from(groups.left())
                .unwrap_or(usize::MAX)
                .min(READ_BATCH_ROWS);
            if pids.read(n)? != n {
                return Err(ParquetError::General(
                    "column `pid` is shorter than its row group".into(),
                ));
            }
            groups.take(n);
            Ok(n)
        })?;
        let n = read.map_err(|e| {
            FormatError::new(&file, Location::Row(row), format!("Parquet: {e}"))
                .with_expected("readable pages")
        })?;
        if n == 0 {
            break;
        }
        if let Some(i) = pids.first_null() {
            return Err(FormatError::new(
                &file,
                Location::Row(row + i as u64),
                "null in column `pid`".to_string(),
            )
            .with_expected("a value in every non-nullable column"));
        }
        for (i, &pid) in pids.values().iter().enumerate() {
            let pid = pid as u32;
            match out.last_mut() {
                Some(s) if s.pid == pid => s.rows += 1,
                _ => {
                    if out.len() == MAX_PROCESSES {
                        return Err(FormatError::new(
                            &file,
                            Location::Row(row + i as u64),
                            format!("more than {MAX_PROCESSES} runs of process rows"),
                        )
                        .with_expected("each process's rows together"));
                    }
                    out.push(Segment {
                        pid,
                        first: row + i as u64,
                        rows: 1,
                    });
                }
            }
        }
        row += n as u64;
    }
    Ok(out)
}

/// Reads a memory trace row by row: an iterator of [`MemRecord`]s that checks every row
/// (known kind, values present exactly where the kind has them and as long as `size`,
/// time non-decreasing within a process image, each image's rows starting with its start
/// row; an exec'd program is a new image of the same pid).
pub struct MemTraceReader {
    file: String,
    reader: Box<dyn FileReader>,
    groups: Groups,
    cols: Columns,
    /// Rows in the columns, and the next one to hand out.
    rows: usize,
    pos: usize,
    /// Rows still to skip before the first one handed out (inside the first row group
    /// read), and rows still to hand out (`None`: all).
    skip: u64,
    limit: Option<u64>,
    row: u64,
    pid: Option<u32>,
    icount: u64,
    geometry: CacheGeometry,
    processes: Vec<Process>,
    files: Vec<MappedFile>,
    /// Version 2: map rows name their files.
    names_files: bool,
    provenance: Vec<(String, String)>,
    failed: bool,
}

impl MemTraceReader {
    pub fn open(path: &Path) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|e| FormatError::io(&file, &e))?;
        Self::from_chunks(f, file, None)
    }

    /// Rows `first .. first + count` of the trace at `path` only (one process's run of rows,
    /// see [`segments`]): the first must be a start row; rows are numbered in errors as in
    /// the whole file.
    pub fn open_rows(path: &Path, first: u64, count: u64) -> Result<Self, FormatError> {
        let file = path.display().to_string();
        let f = File::open(path).map_err(|e| FormatError::io(&file, &e))?;
        Self::from_chunks(f, file, Some((first, count)))
    }

    /// Where a reader of rows stopped: the next row, and the process and time the next
    /// row is checked against ([`MemTraceReader::resume`]).
    pub fn resume_point(&self) -> Resume {
        Resume {
            row: self.row,
            pid: self.pid,
            icount: self.icount,
        }
    }

    /// Rows `at.row .. at.row + count` of the trace at `path`, checked as if the rows
    /// before them had just been read by the reader whose [`resume_point`](Self::resume_point)
    /// `at` is (a reader closed to bound the files held open, reopened where it stopped).
    pub fn resume(path: &Path, at: Resume, count: u64) -> Result<Self, FormatError> {
        let mut r = Self::open_rows(path, at.row, count)?;
        r.pid = at.pid;
        r.icount = at.icount;
        Ok(r)
    }

    /// A memory trace held in memory (`name` is used in errors; the fuzz target's entry).
    pub fn from_bytes(data: Vec<u8>, name: &str) -> Result<Self, FormatError> {
        Self::from_chunks(bytes::Bytes::from(data), name.to_string(), None)
    }

    fn from_chunks<T: parquet::file::reader::ChunkReader + 'static>(
        input: T,
        file: String,
        rows: Option<(u64, u64)>,
    ) -> Result<Self, FormatError> {
        let reader = parquet_io::open(input, &file, "a wattio memory trace (Parquet)")?;
        let provenance = key_values(reader.metadata().file_metadata());
        let meta = |key: &str| provenance.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let bad = |msg: String, expected: &str| {
            FormatError::file(&file, msg).with_expected(expected.to_string())
        };
        let version1 = match meta(VERSION_KEY) {
            Some(v) if v == VERSION => false,
            Some(v) if v == VERSION_1 => true,
            Some(v) => {
                return Err(bad(
                    format!("memory trace version `{v}` is not supported"),
                    &format!("{VERSION_KEY} = \"{VERSION_1}\" or \"{VERSION}\""),
                ))
            }
            None => {
                return Err(bad(
                    format!("Parquet file without `{VERSION_KEY}` metadata"),
                    "a wattio memory trace (written by `wattio capture memory`)",
                ))
            }
        };
        let geometry: CacheGeometry = meta(CACHE_KEY)
            .and_then(|v| serde_json::from_str(v).ok())
            .ok_or_else(|| {
                bad(
                    format!("no readable `{CACHE_KEY}`"),
                    "the cache geometry as JSON",
                )
            })?;
        geometry.check().map_err(|e| {
            bad(
                format!("cache geometry: {e}"),
                "a geometry the tool accepts",
            )
        })?;
        // The footer's size is bounded by the file's, so parsing its table is too; the count
        // is bounded on top so per-process state stays small.
        let processes: Vec<Process> = match meta(PROCESSES_KEY) {
            None => Vec::new(),
            Some(v) => serde_json::from_str(v).map_err(|e| {
                bad(
                    format!("`{PROCESSES_KEY}`: {e}"),
                    "the process table as JSON",
                )
            })?,
        };
        if processes.len() > MAX_PROCESSES {
            return Err(bad(
                format!("{} processes", processes.len()),
                &format!("at most {MAX_PROCESSES}"),
            ));
        }
        let files: Vec<MappedFile> = match meta(FILES_KEY) {
            None => Vec::new(),
            Some(v) => serde_json::from_str(v)
                .map_err(|e| bad(format!("`{FILES_KEY}`: {e}"), "the file table as JSON"))?,
        };
        if files.len() > MAX_FILES {
            return Err(bad(
                format!("{} mapped files", files.len()),
                &format!("at most {MAX_FILES}"),
            ));
        }
        const SCHEMA: &str = "the wattio memory-trace schema (docs/capture-memory.md)";
        let (at, map_cols) = if version1 {
            let v1: [Col; 8] = std::array::from_fn(|i| COLUMNS[i]);
            let at = parquet_io::find_columns(&reader, &file, &v1, SCHEMA)?;
            (at, None)
        } else {
            let at = parquet_io::find_columns(&reader, &file, &COLUMNS, SCHEMA)?;
            (
                std::array::from_fn(|i| at[i]),
                Some((Chunk::new(at[8]), Chunk::new(at[9]))),
            )
        };
        let cols = Columns {
            pid: Chunk::new(at[0]),
            icount: Chunk::new(at[1]),
            kind: Chunk::new(at[2]),
            addr: Chunk::new(at[3]),
            size: Chunk::new(at[4]),
            flags: Chunk::new(at[5]),
            old: Chunk::new(at[6]),
            new: Chunk::new(at[7]),
            map: map_cols,
        };
        let mut groups = Groups::new();
        let (first, skip, limit) = match rows {
            None => (0, 0, None),
            Some((first, count)) => (first, groups.skip_groups(&reader, first), Some(count)),
        };
        Ok(MemTraceReader {
            file,
            reader: Box::new(reader),
            groups,
            cols,
            rows: 0,
            pos: 0,
            skip,
            limit,
            row: first,
            pid: None,
            icount: 0,
            geometry,
            processes,
            files,
            names_files: !version1,
            provenance,
            failed: false,
        })
    }

    /// The files the trace's mappings map ([`FileMap::file`] indexes it; empty in
    /// version 1 traces).
    pub fn files(&self) -> &[MappedFile] {
        &self.files
    }

    /// Whether the trace's map rows name their files (version 2; in version 1 none does).
    pub fn names_files(&self) -> bool {
        self.names_files
    }

    pub fn geometry(&self) -> &CacheGeometry {
        &self.geometry
    }

    /// The process table (command lines, exit codes, the tool's counters).
    pub fn processes(&self) -> &[Process] {
        &self.processes
    }

    pub fn provenance(&self) -> &[(String, String)] {
        &self.provenance
    }

    fn row_err(&self, msg: String, expected: &str) -> FormatError {
        FormatError::new(&self.file, Location::Row(self.row), msg).with_expected(expected)
    }

    /// Reads the next run of rows into the columns; `Ok(false)` at the end (of the file or
    /// of the rows asked for).
    fn load(&mut self) -> Result<bool, FormatError> {
        self.rows = 0;
        self.pos = 0;
        let (reader, groups, cols) = (&*self.reader, &mut self.groups, &mut self.cols);
        let (skip, limit) = (&mut self.skip, self.limit);
        let read = contain(&self.file, Location::Row(self.row), || {
            loop {
                if limit == Some(0) || !groups.advance(reader, |rg| cols.start(rg))? {
                    return Ok(0);
                }
                if *skip == 0 {
                    break;
                }
                let k = usize::try_from((*skip).min(groups.left())).unwrap_or(usize::MAX);
                cols.skip(k)?;
                groups.take(k);
                *skip -= k as u64;
            }
            let n = groups
                .left()
                .min(limit.unwrap_or(u64::MAX))
                .min(READ_BATCH_ROWS as u64) as usize;
            cols.read(n)?;
            groups.take(n);
            Ok::<usize, ParquetError>(n)
        })?;
        let n = read.map_err(|e| self.row_err(format!("Parquet: {e}"), "readable pages"))?;
        if let Some(l) = &mut self.limit {
            *l = l.saturating_sub(n as u64);
        }
        self.rows = n;
        Ok(n > 0)
    }

    fn next_row(&mut self) -> Result<Option<MemRecord>, FormatError> {
        while self.pos >= self.rows {
            if !self.load()? {
                return Ok(None);
            }
        }
        let b = &self.cols;
        let i = self.pos;
        let file = &self.file;
        let row = self.row;
        macro_rules! need {
            ($col:ident) => {{
                match b.$col.values().get(i) {
                    Some(&v) if b.$col.is_valid(i) => v,
                    _ => {
                        return Err(FormatError::new(
                            file,
                            Location::Row(row),
                            format!("null in column `{}`", stringify!($col)),
                        )
                        .with_expected("a value in every non-nullable column"))
                    }
                }
            }};
        }
        // Parquet's signed integers hold the unsigned values' bit patterns.
        let pid = need!(pid) as u32;
        let icount = need!(icount) as u64;
        let kind = need!(kind) as u32;
        let addr = need!(addr) as u64;
        let size = need!(size) as u64;
        let flags = need!(flags) as u32;
        let value = |c: &Chunk<ByteArrayType>| {
            c.values()
                .get(i)
                .filter(|_| c.is_valid(i))
                .map(|v| v.data().to_vec())
        };
        let old: Option<Vec<u8>> = value(&b.old);
        let new: Option<Vec<u8>> = value(&b.new);
        let (map_file, map_offset) = match &b.map {
            Some((f, o)) => (
                f.values()
                    .get(i)
                    .filter(|_| f.is_valid(i))
                    .map(|&v| v as u32),
                o.values()
                    .get(i)
                    .filter(|_| o.is_valid(i))
                    .map(|&v| v as u64),
            ),
            None => (None, None),
        };
        let Some(kind) = u8::try_from(kind).ok().and_then(MemKind::from_code) else {
            return Err(self.row_err(
                format!("kind code {kind}"),
                "0 to 8 (docs/capture-memory.md)",
            ));
        };
        if kind.has_values() {
            let ok = size >= 1
                && size <= MAX_VALUE_BYTES as u64
                && old.as_ref().is_some_and(|v| v.len() as u64 == size)
                && new.as_ref().is_some_and(|v| v.len() as u64 == size);
            if !ok {
                return Err(self.row_err(
                    format!(
                        "{} of {size} bytes without old and new values of that length",
                        kind.name()
                    ),
                    &format!("old and new of `size` bytes, at most {MAX_VALUE_BYTES}"),
                ));
            }
        } else if old.is_some() || new.is_some() {
            return Err(self.row_err(
                format!("{} row with old/new values", kind.name()),
                "values only on write-backs and stores",
            ));
        }
        let names_file = kind == MemKind::Map && flags & MAP_FILE != 0;
        let file_map = match (names_file, map_file, map_offset) {
            (false, None, None) => None,
            (true, Some(f), Some(offset)) if (f as usize) < self.files.len() => Some(FileMap {
                file: f,
                offset,
            }),
            (true, ..) => {
                return Err(self.row_err(
                    format!(
                        "file mapping without a file and offset (file {map_file:?} of {} in the file table, offset {map_offset:?})",
                        self.files.len()
                    ),
                    "`file` indexing the file table and `offset` on map rows with flag 128",
                ))
            }
            (false, ..) => {
                return Err(self.row_err(
                    format!("{} row with a file or offset", kind.name()),
                    "`file` and `offset` only on map rows with flag 128",
                ))
            }
        };
        if matches!(kind, MemKind::Map | MemKind::Unmap) && flags & !MAP_KNOWN != 0 {
            return Err(self.row_err(
                format!("mapping flags {flags:#x}"),
                "flags of r=1 w=2 x=4 startup=16 brk=32 mremap=64 file=128",
            ));
        }
        // A start row begins a process image: a new pid, or the program a process exec'd
        // (same pid, its own clock).
        if kind == MemKind::Start {
            self.pid = Some(pid);
            self.icount = 0;
        } else if self.pid != Some(pid) {
            return Err(self.row_err(
                format!("process {pid}'s rows begin with a {} row", kind.name()),
                "a start row first",
            ));
        }
        if icount < self.icount {
            return Err(self.row_err(
                format!(
                    "icount {icount} is before the previous row's {}",
                    self.icount
                ),
                "non-decreasing time within a process",
            ));
        }
        self.icount = icount;
        self.pos += 1;
        self.row += 1;
        Ok(Some(MemRecord {
            pid,
            icount,
            kind,
            addr,
            size,
            flags,
            old,
            new,
            file: file_map,
        }))
    }
}

/// The eight columns of the row group in hand, a run of rows at a time.
struct Columns {
    pid: Chunk<Int32Type>,
    icount: Chunk<Int64Type>,
    kind: Chunk<Int32Type>,
    addr: Chunk<Int64Type>,
    size: Chunk<Int64Type>,
    flags: Chunk<Int32Type>,
    old: Chunk<ByteArrayType>,
    new: Chunk<ByteArrayType>,
    /// `file` and `offset` (version 2).
    map: Option<(Chunk<Int32Type>, Chunk<Int64Type>)>,
}

impl Columns {
    fn start(&mut self, rg: &dyn RowGroupReader) -> Result<(), ParquetError> {
        self.pid.start(rg)?;
        self.icount.start(rg)?;
        self.kind.start(rg)?;
        self.addr.start(rg)?;
        self.size.start(rg)?;
        self.flags.start(rg)?;
        self.old.start(rg)?;
        self.new.start(rg)?;
        if let Some((f, o)) = &mut self.map {
            f.start(rg)?;
            o.start(rg)?;
        }
        Ok(())
    }

    /// Applies `f` (read or skip `n` rows) to every column; a column with fewer rows than
    /// asked for is an error.
    fn each(
        &mut self,
        n: usize,
        mut f: impl FnMut(&mut dyn RowsOf, usize) -> Result<usize, ParquetError>,
    ) -> Result<(), ParquetError> {
        let mut cols: Vec<(&str, &mut dyn RowsOf)> = vec![
            ("pid", &mut self.pid),
            ("icount", &mut self.icount),
            ("kind", &mut self.kind),
            ("addr", &mut self.addr),
            ("size", &mut self.size),
            ("flags", &mut self.flags),
            ("old", &mut self.old),
            ("new", &mut self.new),
        ];
        if let Some((f, o)) = &mut self.map {
            cols.push(("file", f));
            cols.push(("offset", o));
        }
        for (name, c) in cols {
            let got = f(c, n)?;
            if got != n {
                return Err(ParquetError::General(format!(
                    "column `{name}` has {got} of the row group's next {n} rows"
                )));
            }
        }
        Ok(())
    }

    fn read(&mut self, n: usize) -> Result<(), ParquetError> {
        self.each(n, |c, n| c.read_rows(n))
    }

    fn skip(&mut self, n: usize) -> Result<(), ParquetError> {
        self.each(n, |c, n| c.skip_rows(n))
    }
}

/// Reading or skipping rows, whatever a column's type.
trait RowsOf {
    fn read_rows(&mut self, n: usize) -> Result<usize, ParquetError>;
    fn skip_rows(&mut self, n: usize) -> Result<usize, ParquetError>;
}

impl<T: parquet::data_type::DataType> RowsOf for Chunk<T> {
    fn read_rows(&mut self, n: usize) -> Result<usize, ParquetError> {
        self.read(n)
    }
    fn skip_rows(&mut self, n: usize) -> Result<usize, ParquetError> {
        self.skip(n)
    }
}

impl Iterator for MemTraceReader {
    type Item = Result<MemRecord, FormatError>;

    /// The next row; after an error, `None`.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.next_row() {
            Ok(r) => r.map(Ok),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// The memory-trace fuzz target's entry (and its corpus test's): `data` as the tool's raw
/// stream, converted to a columnar trace in `scratch` and read back, which must give the
/// same rows; and `data` as a columnar memory trace. Panics when a promise is broken: no
/// panic inside, errors that name the input, round trips that agree. At most `max_rows`
/// rows are read (a tiny Parquet file can declare billions).
pub fn fuzz_memtrace(data: &[u8], scratch: &Path, max_rows: usize) {
    let mut raw_rows = Vec::new();
    match RawReader::new(data, "<input>") {
        Err(e) => assert!(
            e.to_string().starts_with("<input>"),
            "error without a location: {e}"
        ),
        Ok(mut r) => {
            raw_rows.push(r.start_record());
            loop {
                match r.next_record() {
                    Ok(Some(rec)) => {
                        if let Some(v) = &rec.old {
                            assert!(
                                v.len() <= MAX_VALUE_BYTES
                                    && Some(v.len()) == rec.new.as_ref().map(Vec::len)
                            );
                        }
                        raw_rows.push(rec);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        assert!(
                            e.to_string().starts_with("<input>@byte "),
                            "error without an offset: {e}"
                        );
                        raw_rows.clear();
                        break;
                    }
                }
                if raw_rows.len() >= max_rows {
                    raw_rows.clear();
                    break;
                }
            }
            if !raw_rows.is_empty() {
                let geometry = r.geometry;
                let mut w = MemTraceWriter::create(scratch, &geometry, &[]).expect("scratch file");
                for rec in &raw_rows {
                    w.write(rec).expect("writing a parsed row");
                }
                w.finish_with_files(&[r.process], r.files.files())
                    .expect("closing the scratch file");
                let back: Result<Vec<MemRecord>, FormatError> = MemTraceReader::open(scratch)
                    .expect("reopening what was written")
                    .collect();
                assert_eq!(
                    back.expect("reading back what was written"),
                    raw_rows,
                    "round trip"
                );
            }
        }
    }
    match MemTraceReader::from_bytes(data.to_vec(), "<input>") {
        Err(e) => assert!(
            e.to_string().starts_with("<input>"),
            "error without a location: {e}"
        ),
        Ok(r) => {
            for rec in r.take(max_rows) {
                match rec {
                    Ok(rec) => assert!(!rec.kind.has_values() || rec.old.is_some()),
                    Err(e) => {
                        assert!(
                            e.to_string().starts_with("<input>"),
                            "error without a location: {e}"
                        );
                        break;
                    }
                }
            }
        }
    }
}
