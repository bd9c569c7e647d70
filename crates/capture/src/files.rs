//! `wattio capture files`: a command's file-level system calls, through strace, written as
//! a file-call trace ([`wattio_formats::filecalls`]).

use crate::command::{Ended, Running};
use crate::error::CaptureError;
use crate::interrupt::InterruptGuard;
use crate::strace::{parse_line, Tracker, TRACED};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use wattio_formats::filecalls::{EVENTS_KEY, FILES_KEY};
use wattio_formats::ColumnarWriter;

#[derive(Debug, Clone, serde::Serialize)]
pub struct FilesCapture {
    pub requests: u64,
    pub events: u64,
    pub files: u64,
    pub exit_code: i32,
    pub interrupted: Option<i32>,
    pub span_ns: u64,
    pub notes: Vec<String>,
}

/// strace's per-process output files; removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Parses every `PREFIX.PID` file strace wrote in `dir` into one time-ordered tracker.
pub fn read_strace_dir(dir: &Path) -> Result<(Tracker, Vec<String>), CaptureError> {
    let mut calls = Vec::new();
    let mut bad = 0u64;
    let mut first_bad = None;
    let rd = std::fs::read_dir(dir).map_err(|e| CaptureError::io(dir.display(), &e))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.rsplit('.').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let text =
            std::fs::read(e.path()).map_err(|err| CaptureError::io(e.path().display(), &err))?;
        for (n, l) in String::from_utf8_lossy(&text).lines().enumerate() {
            match parse_line(l) {
                Ok(Some(c)) => calls.push((c.ts_ns, pid, c)),
                Ok(None) => {}
                Err(msg) => {
                    bad += 1;
                    first_bad.get_or_insert_with(|| format!("{name}:{}: {msg}: {l}", n + 1));
                }
            }
        }
    }
    calls.sort_by_key(|(t, pid, _)| (*t, *pid));
    let mut t = Tracker::default();
    for (_, pid, c) in &calls {
        t.feed(*pid, c);
    }
    let mut notes = Vec::new();
    if let Some(b) = first_bad {
        notes.push(format!("{bad} strace lines not understood, the first: {b}"));
    }
    Ok((t, notes))
}

/// Runs `command` under strace and writes its file-level calls to `out`.
pub fn capture_files(command: &[String], out: &Path) -> Result<FilesCapture, CaptureError> {
    if command.is_empty() {
        return Err(CaptureError::new(
            "no command to capture (give it after `--`)",
        ));
    }
    let guard = InterruptGuard::install();
    let dir = std::env::temp_dir().join(format!("wattio-strace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| CaptureError::io(dir.display(), &e))?;
    let scratch = Scratch(dir);
    let mut argv: Vec<String> = ["strace", "-ff", "-ttt", "-T", "-y", "-s", "0", "-qq", "-e"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    argv.push(format!("trace={TRACED}"));
    argv.push("-o".into());
    argv.push(scratch.0.join("t").display().to_string());
    argv.extend(command.iter().cloned());
    let cwd = std::env::current_dir().map_err(|e| CaptureError::io("current directory", &e))?;
    crate::command::check_runnable(&command[0], &cwd, std::env::var_os("PATH").as_deref())?;
    let t0 = realtime_ns();
    let mut cmd = Running::spawn(&argv, &cwd, &[]).map_err(|e| {
        CaptureError::new(format!(
            "{e} (capture files needs strace: apt-get install strace)"
        ))
    })?;
    let mut interrupted = None;
    let ended = loop {
        if let Some(e) = cmd.poll()? {
            break e;
        }
        if let Some(s) = guard.caught() {
            interrupted = Some(s);
            break cmd.stop().unwrap_or(Ended::Signalled(s));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let span_ns = realtime_ns().saturating_sub(t0);
    let (tracker, mut notes) = read_strace_dir(&scratch.0)?;
    let files = tracker.files();
    let mut reqs = tracker.requests;
    let mut events = tracker.events;
    for r in &mut reqs {
        r.arrival = r.arrival.saturating_sub(t0);
    }
    for e in &mut events {
        e.time_ns = e.time_ns.saturating_sub(t0);
    }
    if tracker.unknown_position > 0 {
        notes.push(format!(
            "{} sequential calls on descriptors of unknown position (inherited or O_APPEND) recorded at offset 0",
            tracker.unknown_position
        ));
    }
    if tracker.non_files > 0 {
        notes.push(format!(
            "{} calls on pipes, sockets, devices and /proc skipped",
            tracker.non_files
        ));
    }
    notes.push("file-level calls through strace -ff -ttt -T -y (microsecond timestamps, measured = the call's duration under strace); offset = the offset in the file; arrival since the command started".into());
    if let Some(s) = interrupted {
        notes.push(format!(
            "capture interrupted by signal {s}: the command was stopped"
        ));
    }
    let prov = vec![
        (
            "wattio.source".to_string(),
            "wattio capture files".to_string(),
        ),
        ("wattio.capture.command".to_string(), command.join(" ")),
        (
            FILES_KEY.to_string(),
            serde_json::to_string(&files).unwrap_or_default(),
        ),
        (
            EVENTS_KEY.to_string(),
            serde_json::to_string(&events).unwrap_or_default(),
        ),
        ("wattio.assumptions".to_string(), notes.join("\n")),
    ];
    let mut w = ColumnarWriter::create(out, &prov)?;
    for r in &reqs {
        w.write(r)?;
    }
    let requests = w.finish()?;
    Ok(FilesCapture {
        requests,
        events: events.len() as u64,
        files: files.len() as u64,
        exit_code: match ended {
            Ended::Exited(c) => c,
            Ended::Signalled(s) => 128 + s,
        },
        interrupted,
        span_ns,
        notes,
    })
}
