//! `wattio capture launch`: a cold application launch — the page-cache insertions of the
//! launched process tree (tracefs `filemap/mm_filemap_add_to_page_cache`, following forks)
//! and the block requests those processes issued on the devices, between the launch's
//! start and its end (the command's exit). The input of launch prefetchers; written as a
//! launch trace ([`wattio_formats::launch`]).

use crate::blockevents::{self, Matcher};
use crate::command::{Ended, Running};
use crate::error::{require_root, CaptureError};
use crate::interrupt::InterruptGuard;
use crate::tracefs::{Instance, Tracefs};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};
use wattio_core::{Op, Request};
use wattio_formats::launch::{DEV_BLOCK, DEV_PAGE_CACHE, END_KEY};
use wattio_formats::ColumnarWriter;

const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Clone, serde::Serialize)]
pub struct LaunchCapture {
    pub page_cache_insertions: u64,
    pub block_requests: u64,
    pub exit_code: i32,
    pub interrupted: Option<i32>,
    pub span_ns: u64,
    /// The launched command's pid, and every pid of its process tree seen in the trace.
    pub pid: u32,
    pub pids: Vec<u32>,
    pub notes: Vec<String>,
}

/// One `mm_filemap_add_to_page_cache` line:
/// `cat-42 [001] ..... 5.000001: mm_filemap_add_to_page_cache: dev 254:0 ino 1a2b pfn=0x1 ofs=8192 order=2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageInsert {
    pub ts_ns: u64,
    pub pid: u32,
    pub dev: (u32, u32),
    pub ino: u64,
    pub offset: u64,
    pub order: u32,
}

/// Parses a page-cache insertion line; `Ok(None)` for other lines.
pub fn parse_page_insert(line: &str) -> Result<Option<PageInsert>, String> {
    const EV: &str = ": mm_filemap_add_to_page_cache: ";
    let Some(at) = line.find(EV) else {
        return Ok(None);
    };
    let (ts_ns, pid) = blockevents::parse_head(&line[..at])?;
    let mut dev = None;
    let (mut ino, mut offset, mut order) = (None, None, None);
    let mut t = line[at + EV.len()..].split(' ');
    while let Some(tok) = t.next() {
        match tok {
            "dev" => {
                dev = t.next().and_then(|d| {
                    let (a, b) = d.split_once(':')?;
                    Some((a.parse().ok()?, b.parse().ok()?))
                })
            }
            "ino" => ino = t.next().and_then(|i| u64::from_str_radix(i, 16).ok()),
            _ => {
                if let Some(v) = tok.strip_prefix("ofs=") {
                    offset = v.parse().ok();
                } else if let Some(v) = tok.strip_prefix("order=") {
                    order = v.parse().ok().filter(|o: &u32| *o < 20);
                }
            }
        }
    }
    match (dev, ino, offset, order) {
        (Some(dev), Some(ino), Some(offset), Some(order)) => Ok(Some(PageInsert {
            ts_ns,
            pid,
            dev,
            ino,
            offset,
            order,
        })),
        _ => Err("expected `dev MAJ:MIN ino HEX pfn=… ofs=N order=N`".into()),
    }
}

fn process_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit_once(") ")?.1.chars().next()
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Captures a cold launch of `command` (caches dropped first) into `out`.
pub fn capture_launch(command: &[String], out: &Path) -> Result<LaunchCapture, CaptureError> {
    require_root("wattio capture launch")?;
    if command.is_empty() {
        return Err(CaptureError::new(
            "no command to capture (give it after `--`)",
        ));
    }
    let guard = InterruptGuard::install();
    let tfs = Tracefs::open()?;
    tfs.remove_stale_instances();
    // The command waits, stopped, until its pid is the trace's pid filter.
    let mut argv: Vec<String> = ["sh", "-c", "kill -STOP $$; exec \"$@\"", "sh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.extend(command.iter().cloned());
    let cwd = std::env::current_dir().map_err(|e| CaptureError::io("current directory", &e))?;
    crate::command::check_runnable(&command[0], &cwd, std::env::var_os("PATH").as_deref())?;
    let mut pages = Instance::create(&tfs, "launch-pages", 16 * 1024)?;
    let mut blocks = Instance::create(&tfs, "launch-block", 16 * 1024)?;
    let mut cmd = Running::spawn(&argv, &cwd, &[])?;
    let pid = cmd.pid();
    let t = Instant::now();
    while process_state(pid) != Some('T') {
        if let Some(e) = cmd.poll()? {
            return Err(CaptureError::new(format!(
                "the launcher ended before the launch: {e}"
            )));
        }
        if t.elapsed() > Duration::from_secs(10) {
            return Err(CaptureError::new(
                "the command did not reach its start point",
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(pages.dir.join("set_event_pid"), pid.to_string())
        .map_err(|e| CaptureError::io(pages.dir.join("set_event_pid").display(), &e))?;
    std::fs::write(pages.dir.join("options/event-fork"), "1")
        .map_err(|e| CaptureError::io(pages.dir.join("options/event-fork").display(), &e))?;
    pages.enable("filemap", "mm_filemap_add_to_page_cache", None)?;
    blocks.enable("block", "block_rq_issue", None)?;
    blocks.enable("block", "block_rq_complete", None)?;
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| CaptureError::io("/proc/sys/vm/drop_caches", &e))?;
    pages.start()?;
    blocks.start()?;
    let t0 = monotonic_ns();
    // SAFETY: continues the process this capture started and stopped.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };

    let mut page_text = Vec::new();
    let mut block_text = Vec::new();
    let mut matcher = Matcher::default();
    let mut inserts = Vec::new();
    let mut bad = 0u64;
    let mut pump = |pages: &mut Instance,
                    blocks: &mut Instance,
                    matcher: &mut Matcher,
                    inserts: &mut Vec<PageInsert>|
     -> Result<(), CaptureError> {
        pages.drain(&mut page_text)?;
        if let Some(end) = page_text.iter().rposition(|&b| b == b'\n') {
            for l in String::from_utf8_lossy(&page_text[..end]).lines() {
                match parse_page_insert(l) {
                    Ok(Some(p)) => inserts.push(p),
                    Ok(None) => {}
                    Err(_) => bad += 1,
                }
            }
            page_text.drain(..=end);
        }
        blocks.drain(&mut block_text)?;
        let used = matcher.feed_text(&block_text);
        block_text.drain(..used);
        Ok(())
    };
    let mut interrupted = None;
    let ended = loop {
        pump(&mut pages, &mut blocks, &mut matcher, &mut inserts)?;
        if let Some(e) = cmd.poll()? {
            break e;
        }
        if let Some(s) = guard.caught() {
            interrupted = Some(s);
            break cmd.stop().unwrap_or(Ended::Signalled(s));
        }
        std::thread::sleep(POLL);
    };
    let t_end = monotonic_ns();
    std::thread::sleep(POLL);
    pages.stop()?;
    blocks.stop()?;
    pump(&mut pages, &mut blocks, &mut matcher, &mut inserts)?;
    drop(pages);
    drop(blocks);

    let pids: BTreeSet<u32> = inserts.iter().map(|p| p.pid).chain([pid]).collect();
    let (block_reqs, block_notes) = matcher.finish(t0);
    // The matcher saw every process's requests on every device; say so.
    let mut notes: Vec<String> = block_notes
        .into_iter()
        .map(|n| format!("block layer, all processes: {n}"))
        .collect();
    let total_block = block_reqs.len();
    let mut rows: Vec<Request> = block_reqs
        .into_iter()
        .filter(|r| pids.contains(&r.stream))
        .map(|mut r| {
            r.dev = DEV_BLOCK;
            r
        })
        .collect();
    let block_requests = rows.len() as u64;
    let mut devs = BTreeSet::new();
    for p in &inserts {
        devs.insert(p.dev);
        let mut r = Request::new(
            p.ts_ns.saturating_sub(t0),
            Op::Read,
            p.offset,
            4096u32 << p.order,
        );
        r.dev = DEV_PAGE_CACHE;
        r.stream = p.pid;
        r.file = Some(p.ino);
        rows.push(r);
    }
    rows.sort_by_key(|r| r.arrival);
    notes.push(format!(
        "cold launch (caches dropped): dev {DEV_PAGE_CACHE} rows are page-cache insertions of the launched processes (file = inode, offset/len = the pages), dev {DEV_BLOCK} rows their block requests ({block_requests} of the {total_block} on all devices: the launched pids' own; read-ahead a kernel thread issues is not attributed); arrival since the launch started, which ends at {END_KEY}"
    ));
    if devs.len() > 1 {
        notes.push(format!(
            "pages of {} file systems ({:?}): inode numbers may repeat across them",
            devs.len(),
            devs
        ));
    }
    if bad > 0 {
        notes.push(format!("{bad} page-cache event lines not understood"));
    }
    let span_ns = t_end.saturating_sub(t0);
    let prov = vec![
        (
            "wattio.source".to_string(),
            "wattio capture launch".to_string(),
        ),
        ("wattio.capture.command".to_string(), command.join(" ")),
        (END_KEY.to_string(), span_ns.to_string()),
        ("wattio.assumptions".to_string(), notes.join("\n")),
    ];
    let mut w = ColumnarWriter::create(out, &prov)?;
    for r in &rows {
        w.write(r)?;
    }
    w.finish()?;
    Ok(LaunchCapture {
        page_cache_insertions: inserts.len() as u64,
        block_requests,
        exit_code: match ended {
            Ended::Exited(c) => c,
            Ended::Signalled(s) => 128 + s,
        },
        interrupted,
        span_ns,
        pid,
        pids: pids.into_iter().collect(),
        notes,
    })
}
