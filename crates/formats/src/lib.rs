//! Real traces in, clean data out.
//!
//! * Readers for the block-trace formats users bring — MSR Cambridge ([`msr`]), FIU
//!   ([`fiu`]), blktrace's binary files ([`blktrace`]), blkparse text ([`blkparse`]), SPC/UMass ([`spc`]), Alibaba ([`alibaba`]),
//!   Tencent CBS ([`tencent`]), SYSTOR '17 VDI ([`systor`]), DiskSim ascii and validate
//!   ([`disksim`]), fio iolog v2/v3 ([`fio`]), MQSim's trace-based flow ([`mqsim`]),
//!   biosnoop ([`biosnoop`]), HP Labs SRT ([`srt`]) — each normalizing to [`Request`]s in
//!   ns and bytes and reporting what it assumed. [`open_trace`] picks one by name or by sniffing.
//! * Any other delimited layout through a column mapping ([`delimited`], `--format csv
//!   --columns SPEC`), with the same errors and assumptions report.
//! * wattio's columnar trace file ([`columnar`]) and writers for DiskSim ascii and fio v3.
//! * [`stats`] (idle gaps, footprint, …), [`slice`] and [`convert`].
//! * [`filecalls`] and [`launch`]: the conventions of the columnar traces `wattio capture
//!   files` (file-level system calls) and `wattio capture launch` (cold launches) write.

pub mod alibaba;
pub mod biosnoop;
pub mod blkparse;
pub mod blktrace;
pub mod cloud;
#[cfg(feature = "columnar")]
pub mod columnar;
pub mod completions;
pub mod compressed;
pub mod delimited;
pub mod disksim;
pub mod error;
pub mod filecalls;
pub mod fio;
pub mod fiu;
#[cfg(feature = "columnar")]
mod footer;
pub mod launch;
pub mod lines;
#[cfg(feature = "columnar")]
pub mod memtrace;
pub mod mqsim;
pub mod msr;
#[cfg(feature = "columnar")]
mod pages;
#[cfg(feature = "columnar")]
pub mod parquet_io;
pub mod slice;
pub mod spc;
pub mod srt;
pub mod stats;
pub mod systor;
pub mod tencent;
pub mod text;
pub mod writer;

#[cfg(feature = "columnar")]
pub use columnar::{ColumnarReader, ColumnarWriter};
pub use error::{FormatError, Location};
pub use slice::{Slice, SliceOptions};
pub use stats::{trace_stats, TraceStats};
pub use writer::{create_writer, TraceWriter};

use std::io::Read;
use std::path::Path;
use text::TextSource;
use wattio_core::{Request, TraceSource};

/// Every format [`open_trace`] reads, by canonical name.
pub const READ_FORMATS: &[&str] = &[
    "columnar",
    "msr",
    "fiu",
    "blktrace",
    "blkparse",
    "spc",
    "alibaba",
    "tencent",
    "systor",
    "disksim",
    "disksim-validate",
    "fio",
    "mqsim",
    "biosnoop",
    "srt",
    "csv",
];

/// How to read a trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    /// Skip bad lines (counted, the first few quoted in the assumptions) instead of failing.
    pub lenient: bool,
    /// Keep only this device/volume/LUN (`hm_1`, `8,16`, an ASU, a volume id, a file name),
    /// renumbered as dev 0. `None` keeps all, numbered in order of first appearance.
    pub device: Option<String>,
    /// blkparse and blktrace: the event to keep (`Q`, `G`, `I`, `D`, `C`, …; default `D`).
    /// A kept Q, G, I or D is measured to its completion ([`completions`]).
    pub blkparse_action: Option<char>,
    /// Formats with an epoch clock (MSR, FIU, Alibaba, Tencent, SYSTOR) are rebased so the first
    /// record arrives at 0 unless this is set.
    pub keep_absolute_time: bool,
    /// Initial read buffer of text readers (default 1 MiB; small inputs can use less).
    pub buffer_size: Option<usize>,
    /// The generic reader's column mapping (`--columns SPEC`, see [`delimited`]); implies
    /// the `csv` format.
    pub columns: Option<String>,
    /// The generic reader's field delimiter (default `,`).
    pub delimiter: Option<String>,
    /// The generic reader: is the first line a header (default: sniffed)?
    pub header: Option<bool>,
    /// Text and blktrace readers: the records may be out of time order — read them all (at
    /// most [`text::MAX_SORTED`]) and hand them out sorted by arrival, instead of refusing
    /// a time that goes backwards. (A format logged at completion, biosnoop, always is.)
    pub sort: bool,
    /// Text and blktrace readers: the records may be out of time order, but by at most this
    /// many records (`--sort-window N`): hold that many, hand out the earliest each time one
    /// more comes, so memory stays bounded by the window however long the trace. A record
    /// earlier than one already handed out is out of the window: an error naming its line
    /// (`lenient`: skipped, counted). Not with `sort`.
    pub sort_window: Option<usize>,
}

/// Resolves a user-given format name to the canonical one.
pub fn canonical_format(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "columnar" | "parquet" | "wattio" => "columnar",
        "msr" | "msr-cambridge" => "msr",
        "fiu" => "fiu",
        "blkparse" => "blkparse",
        "blktrace" | "blktrace-bin" => "blktrace",
        "spc" | "umass" => "spc",
        "alibaba" => "alibaba",
        "tencent" | "cbs" | "tencent-cbs" => "tencent",
        "systor" | "systor17" | "systor-17" | "vdi" => "systor",
        "disksim" | "disksim-ascii" | "ascii" => "disksim",
        "disksim-validate" | "validate" => "disksim-validate",
        "fio" | "fio-v2" | "fio-v3" | "fio2" | "fio3" | "iolog" => "fio",
        "mqsim" => "mqsim",
        "biosnoop" | "bcc-biosnoop" => "biosnoop",
        "srt" | "hpl" | "hp-srt" => "srt",
        "csv" | "delimited" => "csv",
        _ => return None,
    })
}

/// Is a file columnar (Parquet) by its name (`.parquet`, `.wattio`) or its first bytes
/// (`PAR1`)? How [`open_trace`] detects one when no format is given.
pub fn is_columnar(path: &Path, head: &[u8]) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    ext.eq_ignore_ascii_case("parquet")
        || ext.eq_ignore_ascii_case("wattio")
        || head.starts_with(b"PAR1")
}

/// Guesses the format of a text trace from its first non-empty line.
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"PAR1") {
        return Some("columnar");
    }
    if blktrace::is_blktrace(head) {
        return Some("blktrace");
    }
    if head.starts_with(b"$$TR_IOREC") {
        // An HP Labs SRT trace's header: binary records follow it.
        return Some("srt");
    }
    // A UTF-8 byte order mark (editors on Windows write one): the readers skip it.
    let text = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut lines_ = text
        .split(|&b| b == b'\n')
        .map(|l| lines::trim(l.strip_suffix(b"\r").unwrap_or(l)))
        .filter(|l| !l.is_empty());
    let line = lines_.next()?;
    if line.starts_with(b"Tracing ") {
        // A tracing tool's banner (bcc's): biosnoop when its header follows.
        return lines_
            .next()
            .and_then(sniff_line)
            .filter(|&f| f == "biosnoop");
    }
    if line.starts_with(b"Timestamp,Hostname,") {
        // The MSR Cambridge header some copies of the traces carry (the SNIA originals have
        // none; the msr reader skips it): the format is the next line's.
        return lines_.next().and_then(sniff_line).filter(|&f| f == "msr");
    }
    if line.starts_with(b"Timestamp,Response,IOType,LUN,") {
        // The header every SYSTOR '17 file starts with: detected by it alone (an hour of a
        // quiet LUN may hold nothing else).
        return Some("systor");
    }
    sniff_line(line)
}

/// The format of one trimmed, non-empty line of a text trace.
fn sniff_line(line: &[u8]) -> Option<&'static str> {
    if line.starts_with(b"fio version") {
        return Some("fio");
    }
    // biosnoop's header (its lines alone are not told apart from other columns).
    if line.starts_with(b"TIME(s)") && line.windows(7).any(|w| w == b"LAT(ms)") {
        return Some("biosnoop");
    }
    let is_num = |t: &[u8]| lines::parse_u64(t).is_some();
    let is_dec = |t: &[u8]| lines::parse_decimal(t, 1).is_some();
    if line.contains(&b',') && !line.contains(&b' ') && !line.contains(&b'\t') {
        let f: Vec<&[u8]> = line.split(|&b| b == b',').collect();
        let rw = |t: &[u8]| matches!(t, b"R" | b"W" | b"r" | b"w");
        let read_write =
            |t: &[u8]| t.eq_ignore_ascii_case(b"Read") || t.eq_ignore_ascii_case(b"Write");
        if f.len() == 7 && read_write(f[3]) && is_num(f[0]) {
            return Some("msr");
        }
        if f.len() == 5 && rw(f[1]) && is_num(f[0]) {
            return Some("alibaba");
        }
        if f.len() == 6
            && (rw(f[2]) || f[2].is_empty())
            && is_dec(f[0])
            && is_dec(f[1])
            && f[3..].iter().all(|t| is_num(t))
        {
            return Some("systor");
        }
        if f.len() >= 5 && rw(f[3]) && is_num(f[0]) && is_dec(f[4]) {
            return Some("spc");
        }
        if f.len() == 5 && (f[3] == b"0" || f[3] == b"1") && f.iter().all(|t| is_dec(t)) {
            return Some("tencent");
        }
        return None;
    }
    let t: Vec<&[u8]> = line
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|t| !t.is_empty())
        .collect();
    if t.len() == 6
        && matches!(t[0], b"R" | b"W")
        && matches!(t[1], b"Hit" | b"Miss" | b"Doub" | b"Trip")
    {
        return Some("disksim-validate");
    }
    if t.len() >= 7 && t[0].contains(&b',') && t[5].len() == 1 && t[5][0].is_ascii_alphabetic() {
        return Some("blkparse");
    }
    if t.len() == 5 && is_dec(t[0]) && t[1..4].iter().all(|x| is_num(x)) {
        return Some("disksim");
    }
    if t.len() >= 8 && is_num(t[0]) && is_num(t[1]) {
        return Some("fiu");
    }
    None
}

/// Opens a trace in `format` (a name from [`READ_FORMATS`]; `None` = detect by extension
/// and sniffing, reported in `assumptions()`).
pub fn open_trace(
    path: &Path,
    format: Option<&str>,
    opts: &ReadOptions,
) -> Result<Box<dyn TraceSource>, FormatError> {
    let name = path.display().to_string();
    // The stream's first 64 KiB, decompressed: what detection reads, and what tells a
    // compressed Parquet file or a tar archive (neither readable as a stream) apart. A
    // text reader then reads them again, followed by the rest of the same stream.
    let opened = compressed::open(path).map_err(|e| FormatError::io(&name, &e))?;
    let decompressed = opened.notes();
    let (codec, archived) = (opened.codec, opened.member.is_some());
    let mut rest = opened.reader;
    let mut head = vec![0u8; 64 * 1024];
    let n = lines::read_full(&mut rest, &mut head).map_err(|e| FormatError::io(&name, &e))?;
    head.truncate(n);
    if head.starts_with(b"PAR1") && (codec.is_some() || archived) {
        let how = match codec {
            Some(c) => format!("compressed with {}", c.name()),
            None => "inside a tar archive".to_string(),
        };
        return Err(FormatError::file(&name, format!("a Parquet file {how}"))
            .with_expected("the Parquet file itself (it is read by seeking, not as a stream)"));
    }
    let (fmt, how) = match format {
        None if opts.columns.is_some() => ("csv", None),
        Some(f) => match canonical_format(f) {
            Some(c) => (c, None),
            None => {
                return Err(
                    FormatError::file(&name, format!("unknown trace format `{f}`"))
                        .with_expected(format!("one of {}", READ_FORMATS.join(", "))),
                )
            }
        },
        None => {
            if is_columnar(path, &head) {
                ("columnar", Some("detected columnar (Parquet)".to_string()))
            } else if blktrace::is_blktrace(&head) {
                (
                    "blktrace",
                    Some("detected blktrace binary from the first record's magic".to_string()),
                )
            } else {
                match sniff(&head) {
                    Some(f) => (f, Some(format!("detected format {f} from the first line"))),
                    None => {
                        return Err(FormatError::file(&name, "cannot detect the trace format")
                            .with_expected(format!(
                                "--format with one of {}",
                                READ_FORMATS.join(", ")
                            )))
                    }
                }
            }
        }
    };
    let src: Box<dyn TraceSource> = match fmt {
        #[cfg(feature = "columnar")]
        "columnar" => {
            if opts.device.is_some() {
                return Err(FormatError::file(
                    &name,
                    "device selection is not supported on columnar traces",
                )
                .with_expected(
                    "`wattio trace slice --dev N` to select a device of a columnar trace",
                ));
            }
            Box::new(ColumnarReader::open(path)?.with_note(how))
        }
        #[cfg(not(feature = "columnar"))]
        "columnar" => {
            return Err(FormatError::file(
                &name,
                "built without the columnar feature",
            ))
        }
        "blktrace" => {
            // The per-CPU files of one trace are read together, merged by time (the file
            // named exists: it was opened above, so no missing name reads its siblings).
            let files = blktrace::cpu_files(path).map_err(|m| FormatError::file(&name, m))?;
            let recs = blktrace::Records::open(&files).map_err(|e| FormatError::io(&name, &e))?;
            let mut notes: Vec<String> = decompressed.into_iter().chain(how).collect();
            if files.len() > 1 {
                let names: Vec<String> = files
                    .iter()
                    .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
                    .collect();
                notes.push(format!(
                    "blktrace: merged {} per-CPU files by time: {}",
                    files.len(),
                    names.join(", ")
                ));
            }
            let mut s = TextSource::from_units(
                recs,
                name,
                blktrace_format(opts, &path.display().to_string())?,
                opts,
            )?;
            for n in notes {
                s.note(n);
            }
            Box::new(s)
        }
        text => {
            let f = std::io::Cursor::new(head).chain(rest);
            text_reader(
                f,
                name,
                text,
                opts,
                decompressed.into_iter().chain(how).collect(),
            )?
        }
    };
    Ok(src)
}

/// A text trace in `format` (a canonical name other than `columnar`) read from any byte
/// stream: what [`open_trace`] uses for files, and what tests and fuzz targets call.
pub fn text_reader<R: Read + Send + 'static>(
    r: R,
    name: String,
    format: &str,
    opts: &ReadOptions,
    how: Vec<String>,
) -> Result<Box<dyn TraceSource>, FormatError> {
    fn boxed<F: text::LineFormat + 'static, R: Read + Send + 'static>(
        r: R,
        name: String,
        fmt: F,
        opts: &ReadOptions,
        how: Vec<String>,
    ) -> Result<Box<dyn TraceSource>, FormatError> {
        let mut s = TextSource::from_reader(r, name, fmt, opts)?;
        for h in how {
            s.note(h);
        }
        Ok(Box::new(s))
    }
    match canonical_format(format) {
        Some("blktrace") => {
            let fmt = blktrace_format(opts, &name)?;
            let recs = blktrace::Records::from_reader(Box::new(r), name.clone());
            let mut s = TextSource::from_units(recs, name, fmt, opts)?;
            for h in how {
                s.note(h);
            }
            Ok(Box::new(s))
        }
        Some("srt") => {
            let recs = srt::Records::from_reader(Box::new(r), &name)?;
            let fmt = srt::Srt::new(recs.header());
            let mut s = TextSource::from_units(recs, name, fmt, opts)?;
            for h in how {
                s.note(h);
            }
            Ok(Box::new(s))
        }
        Some("msr") => boxed(r, name, msr::Msr, opts, how),
        Some("fiu") => boxed(r, name, fiu::Fiu, opts, how),
        Some("blkparse") => {
            let a = opts.blkparse_action.unwrap_or('D');
            let b = blkparse::Blkparse::new(a).map_err(|m| FormatError::file(&name, m))?;
            boxed(r, name, b, opts, how)
        }
        Some("spc") => boxed(r, name, spc::Spc, opts, how),
        Some("alibaba") => boxed(r, name, cloud::Cloud(alibaba::Alibaba), opts, how),
        Some("tencent") => boxed(r, name, cloud::Cloud(tencent::Tencent), opts, how),
        Some("systor") => boxed(r, name, systor::Systor, opts, how),
        Some("disksim") => boxed(r, name, disksim::DisksimAscii, opts, how),
        Some("disksim-validate") => boxed(r, name, disksim::DisksimValidate::default(), opts, how),
        Some("fio") => boxed(r, name, fio::Fio::default(), opts, how),
        Some("mqsim") => boxed(r, name, mqsim::Mqsim, opts, how),
        Some("biosnoop") => boxed(r, name, biosnoop::Biosnoop::default(), opts, how),
        Some("csv") => {
            let spec = opts.columns.as_deref().ok_or_else(|| {
                FormatError::file(&name, "the csv format reads through a column mapping")
                    .with_expected("--columns SPEC, e.g. time=1:s,op=2,offset=3:sectors,size=4")
            })?;
            let d = delimited::Delimited::new(spec, opts.delimiter.as_deref(), opts.header)
                .map_err(|m| FormatError::file(&name, m))?;
            boxed(r, name, d, opts, how)
        }
        _ => Err(
            FormatError::file(&name, format!("`{format}` is not a text trace format"))
                .with_expected(format!("one of {}", READ_FORMATS[1..].join(", "))),
        ),
    }
}

/// The blktrace format as `opts` ask for it (the event kept, the clock).
fn blktrace_format(opts: &ReadOptions, name: &str) -> Result<blktrace::Blktrace, FormatError> {
    blktrace::Blktrace::new(opts.blkparse_action.unwrap_or('D'), opts.keep_absolute_time)
        .map_err(|m| FormatError::file(name, m))
}

/// Reads a whole text trace held in memory (tests, fuzzing, the Python bindings).
pub fn read_all(
    data: &[u8],
    format: &str,
    opts: &ReadOptions,
) -> Result<(Vec<Request>, Vec<String>), FormatError> {
    let mut src = text_reader(
        std::io::Cursor::new(data.to_vec()),
        "<input>".into(),
        format,
        opts,
        Vec::new(),
    )?;
    let mut v = Vec::new();
    while let Some(r) = src
        .next_request()
        .map_err(|e| FormatError::file(e.location.clone(), e.message.clone()))?
    {
        v.push(r);
    }
    Ok((v, src.assumptions()))
}

/// What [`convert`] did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConvertReport {
    pub requests: u64,
    pub output_format: String,
    pub assumptions: Vec<String>,
}

/// Copies every request of `src` into `out`, recording the source's assumptions as
/// provenance where the output format has room.
pub fn copy_trace(
    src: &mut dyn TraceSource,
    mut out: Box<dyn TraceWriter>,
    source_name: &str,
) -> Result<(u64, Vec<String>), FormatError> {
    while let Some(r) = src
        .next_request()
        .map_err(|e| FormatError::file(e.location.clone(), e.message.clone()))?
    {
        out.write(&r)?;
    }
    let assumptions = src.assumptions();
    out.annotate("wattio.source", source_name);
    out.annotate("wattio.assumptions", &assumptions.join("\n"));
    let n = out.finish()?;
    Ok((n, assumptions))
}

/// `wattio trace convert IN OUT`.
pub fn convert(
    input: &Path,
    output: &Path,
    from: Option<&str>,
    to: Option<&str>,
    opts: &ReadOptions,
) -> Result<ConvertReport, FormatError> {
    let out_fmt = writer::writer_format(output, to)?;
    let mut src = open_trace(input, from, opts)?;
    let out = create_writer(output, Some(out_fmt), &[])?;
    let (requests, assumptions) = copy_trace(src.as_mut(), out, &input.display().to_string())?;
    Ok(ConvertReport {
        requests,
        output_format: out_fmt.to_string(),
        assumptions,
    })
}

/// The entry point of the fuzz targets and of the test that replays their seed corpus: reads
/// `data` as `format` strictly and leniently and checks what a reader promises — no panic,
/// arrivals in order, no request past the end of the 64-bit byte space, errors that name a
/// place. Panics (the fuzzer's signal) when a promise is broken.
pub fn fuzz_read(format: &str, data: &[u8]) {
    // D (the default) and Q for every format (the other readers ignore it); G too for the
    // blktrace pair, where it follows front merges.
    let actions: &[Option<char>] = match canonical_format(format) {
        Some("blkparse" | "blktrace") => &[None, Some('Q'), Some('G')],
        _ => &[None, Some('Q')],
    };
    for &action in actions {
        fuzz_read_with(
            format,
            data,
            &ReadOptions {
                blkparse_action: action,
                ..Default::default()
            },
        );
    }
    // Read whole and sorted (`--sort`), or within a small window: the same promises,
    // whatever order the lines are in.
    fuzz_read_with(
        format,
        data,
        &ReadOptions {
            sort: true,
            ..Default::default()
        },
    );
    fuzz_read_with(
        format,
        data,
        &ReadOptions {
            sort_window: Some(3),
            lenient: true,
            ..Default::default()
        },
    );
    let _ = sniff(data);
    let check: Option<fn(&[u8])> = match canonical_format(format) {
        Some("msr") => Some(msr::check_fast_path),
        Some("disksim") => Some(disksim::check_fast_path),
        Some("mqsim") => Some(mqsim::check_fast_path),
        _ => None,
    };
    if let Some(check) = check {
        for line in data.split(|&b| b == b'\n') {
            check(line.strip_suffix(b"\r").unwrap_or(line));
        }
    }
}

/// The fuzz target `archive`: `data` as a downloaded trace file — decompressed, a tar
/// archive's one file taken out — read to its end or its first error (bounded at 4 MiB of
/// output, a decompression bomb's worth); an error is fine, a panic is not.
pub fn fuzz_archive(data: &[u8]) {
    if let Ok(o) = compressed::from_reader(std::io::Cursor::new(data.to_vec())) {
        let _ = o.notes();
        let mut out = Vec::new();
        let _ = o.reader.take(4 << 20).read_to_end(&mut out);
    }
}

/// [`fuzz_read`]'s promises for one set of options, read strictly and leniently.
pub fn fuzz_read_with(format: &str, data: &[u8], base: &ReadOptions) {
    for lenient in [false, true] {
        let opts = ReadOptions {
            lenient,
            ..base.clone()
        };
        match read_all(data, format, &opts) {
            Ok((reqs, assumptions)) => {
                assert!(
                    !assumptions.is_empty(),
                    "a reader always reports its assumptions"
                );
                let mut last = 0;
                for r in &reqs {
                    assert!(r.arrival >= last, "arrivals out of order");
                    last = r.arrival;
                    assert!(
                        r.offset.checked_add(r.len as u64).is_some(),
                        "request past 2^64"
                    );
                    assert!(
                        r.measured
                            .is_none_or(|m| r.arrival.checked_add(m).is_some()),
                        "a completion past 2^64 ns"
                    );
                }
                if lenient {
                    assert!(assumptions
                        .iter()
                        .any(|a| a.starts_with("lenient: skipped")));
                }
            }
            Err(e) => {
                assert!(!lenient || !e.message.is_empty());
                assert!(
                    e.to_string().starts_with("<input>"),
                    "error without a location: {e}"
                );
            }
        }
    }
}

/// The columnar fuzz target's entry (and the corpus test's): reads `data` as a columnar trace
/// in memory, once request by request and once batch by batch, and checks that both give the
/// same rows in arrival order and that errors name the input. At most `max_rows` rows are
/// read (a tiny file can declare billions of run-length-encoded rows).
#[cfg(feature = "columnar")]
pub fn fuzz_columnar(data: &[u8], max_rows: usize) {
    let open = || ColumnarReader::from_bytes(data.to_vec(), "<input>");
    let mut one = match open() {
        Ok(r) => r,
        Err(e) => {
            assert!(
                e.to_string().starts_with("<input>"),
                "error without a location: {e}"
            );
            return;
        }
    };
    assert!(!one.assumptions().is_empty());
    let mut singles = Vec::new();
    let mut single_err = None;
    while singles.len() < max_rows {
        match one.next_request() {
            Ok(Some(r)) => singles.push(r),
            Ok(None) => break,
            Err(e) => {
                assert!(
                    e.location.starts_with("<input>"),
                    "error without a location: {e}"
                );
                single_err = Some(e.location);
                break;
            }
        }
    }
    for w in singles.windows(2) {
        if let [a, b] = w {
            assert!(a.arrival <= b.arrival, "arrivals out of order");
        }
    }
    let Ok(mut batched) = open() else {
        panic!("the same bytes opened once and failed the second time");
    };
    let mut rows = Vec::new();
    let mut batch_err = None;
    while rows.len() <= singles.len() {
        match batched.next_batch(&mut rows) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                batch_err = Some(e.location_string());
                break;
            }
        }
    }
    rows.truncate(singles.len());
    assert_eq!(rows, singles, "next_batch and next_request disagree");
    if singles.len() < max_rows {
        assert_eq!(
            batch_err, single_err,
            "errors differ between the two ways of reading"
        );
    }
}
