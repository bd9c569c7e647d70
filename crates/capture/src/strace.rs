//! strace output → file-level calls with reconstructed offsets.
//!
//! strace runs as `strace -ff -ttt -T -y -s 0 -qq -e trace=… -o PREFIX COMMAND`: one file per
//! process (so no call is split into `unfinished`/`resumed` halves), absolute timestamps,
//! durations, and file descriptors annotated with their paths (`3</data/f>`). A line is
//!
//! ```text
//! 1700000000.123456 pread64(3</mnt/f>, ""..., 8192, 12288) = 8192 <0.000021>
//! ```
//!
//! [`Tracker`] follows each process's descriptors (opened at 0, advanced by read/write/
//! readv/writev by the bytes they moved, set by lseek's result; pread/pwrite give their own
//! offset and leave the position alone). A descriptor the process did not open itself
//! (inherited across fork, or opened with O_APPEND) has an unknown position until an lseek:
//! its sequential calls are recorded at offset 0 and counted in the notes.

use std::collections::{BTreeMap, HashMap};
use wattio_core::{Op, Request};
use wattio_formats::filecalls::{call_code, FileEvent};

/// The system calls traced (strace's `-e trace=` list).
pub const TRACED: &str = "open,openat,creat,close,read,write,pread64,pwrite64,readv,writev,preadv,pwritev,lseek,mmap,munmap,fsync,fdatasync";

/// One parsed strace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub ts_ns: u64,
    pub name: String,
    /// The raw argument text between the outer parentheses.
    pub args: String,
    /// The return value (`-1` for errors; the address for mmap).
    pub result: i64,
    /// The path strace annotated the result with (`= 3</path>`), for opens.
    pub result_path: Option<String>,
    pub duration_ns: Option<u64>,
}

fn parse_secs(t: &str) -> Option<u64> {
    let (s, f) = t.split_once('.').unwrap_or((t, ""));
    if f.len() > 9 || !f.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let frac: u64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    secs.checked_mul(1_000_000_000)?
        .checked_add(frac * 10u64.pow(9 - f.len() as u32))
}

/// Parses one line; `Ok(None)` for lines that are not a completed call (signals, exits).
pub fn parse_line(line: &str) -> Result<Option<Call>, String> {
    let line = line.trim_end();
    let Some((ts, rest)) = line.split_once(' ') else {
        return Ok(None);
    };
    if rest.starts_with("---") || rest.starts_with("+++") || rest.is_empty() {
        return Ok(None);
    }
    let ts_ns = parse_secs(ts).ok_or("no timestamp at the start of the line")?;
    let open = rest.find('(').ok_or("no `(` after the call name")?;
    let name = &rest[..open];
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(format!("`{name}` is not a system call name"));
    }
    // The result follows the last ` = ` (arguments may contain ` = ` inside strings).
    // strace pads short calls: `close(3</d>)    = 0`.
    let eq = rest
        .rfind(" = ")
        .ok_or("no ` = RESULT` (an unfinished call?)")?;
    let call = rest[..eq].trim_end();
    if call.len() <= open || !call.ends_with(')') {
        return Err("no `) = RESULT` (an unfinished call?)".into());
    }
    let args = &call[open + 1..call.len() - 1];
    let tail = &rest[eq + 3..];
    let res_tok = tail.split(' ').next().unwrap_or(tail);
    let (num, result_path) = match res_tok.split_once('<') {
        Some((n, _)) => {
            // `3</a/path>`: the path may itself contain spaces, up to the `>` before ` <dur>`.
            let full = &tail[n.len() + 1..];
            let end = full
                .rfind("> <")
                .or_else(|| full.strip_suffix('>').map(|s| s.len()))
                .ok_or("unterminated `<path>` after the result")?;
            (n, Some(full[..end].to_string()))
        }
        None => (res_tok, None),
    };
    let result = if let Some(hex) = num.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).map_err(|_| format!("result `{num}` is not a number"))?
    } else if num == "?" {
        return Ok(None);
    } else {
        num.parse()
            .map_err(|_| format!("result `{num}` is not a number"))?
    };
    let duration_ns = tail
        .rfind(" <")
        .and_then(|i| tail[i + 2..].strip_suffix('>'))
        .and_then(parse_secs);
    Ok(Some(Call {
        ts_ns,
        name: name.to_string(),
        args: args.to_string(),
        result,
        result_path,
        duration_ns,
    }))
}

/// The leading descriptor argument `N</path>` of `args`: (fd, path).
fn fd_arg(args: &str) -> Option<(i32, Option<&str>)> {
    let digits = args.bytes().take_while(|c| c.is_ascii_digit()).count();
    let fd = args[..digits].parse().ok()?;
    let rest = &args[digits..];
    let path = rest.strip_prefix('<').and_then(|r| {
        let end = r
            .find(">, ")
            .or_else(|| r.strip_suffix('>').map(|s| s.len()))?;
        Some(&r[..end])
    });
    Some((fd, path))
}

/// The last top-level comma-separated argument, as a number (pread's offset).
fn last_arg_num(args: &str) -> Option<u64> {
    args.rsplit(", ").next()?.trim().parse().ok()
}

/// The `n`-th comma-separated argument (0-based) of a call without strings (mmap, lseek).
fn nth_arg(args: &str, n: usize) -> Option<&str> {
    args.split(", ").nth(n).map(str::trim)
}

#[derive(Debug, Clone, Copy)]
struct Fd {
    file: u32,
    /// `None` when unknown (inherited or O_APPEND) until an lseek.
    pos: Option<u64>,
}

/// Reconstructs the file-level trace from the calls of each process.
#[derive(Debug, Default)]
pub struct Tracker {
    fds: HashMap<(u32, i32), Fd>,
    files: BTreeMap<String, u32>,
    pub requests: Vec<Request>,
    pub events: Vec<FileEvent>,
    pub unknown_position: u64,
    pub non_files: u64,
}

/// Only real files: strace prints sockets, pipes and anonymous inodes as `socket:[…]` etc.
fn is_file(path: &str) -> bool {
    path.starts_with('/') && !path.starts_with("/dev/") && !path.starts_with("/proc/")
}

impl Tracker {
    fn file_id(&mut self, path: &str) -> u32 {
        let n = self.files.len() as u32;
        *self.files.entry(path.to_string()).or_insert(n)
    }

    /// The paths by file id.
    pub fn files(&self) -> Vec<String> {
        let mut v = vec![String::new(); self.files.len()];
        for (p, &i) in &self.files {
            v[i as usize] = p.clone();
        }
        v
    }

    fn fd(&mut self, pid: u32, args: &str) -> Option<(i32, Fd)> {
        let (fd, path) = fd_arg(args)?;
        if let Some(f) = self.fds.get(&(pid, fd)) {
            return Some((fd, *f));
        }
        let path = path.filter(|p| is_file(p))?;
        let f = Fd {
            file: self.file_id(path),
            pos: None,
        };
        self.fds.insert((pid, fd), f);
        Some((fd, f))
    }

    fn event(&mut self, c: &Call, pid: u32, what: &str, file: u32, offset: u64, len: u64) {
        self.events.push(FileEvent {
            time_ns: c.ts_ns,
            pid,
            call: what.to_string(),
            file,
            offset,
            len,
        });
    }

    pub fn feed(&mut self, pid: u32, c: &Call) {
        let name = c.name.as_str();
        match name {
            "open" | "openat" | "creat" => {
                let Some(path) = c.result_path.as_deref().filter(|p| is_file(p)) else {
                    if c.result >= 0 {
                        self.non_files += 1;
                    }
                    return;
                };
                let file = self.file_id(path);
                let append = c.args.contains("O_APPEND");
                self.fds.insert(
                    (pid, c.result as i32),
                    Fd {
                        file,
                        pos: (!append).then_some(0),
                    },
                );
                self.event(c, pid, "open", file, 0, 0);
            }
            "close" => {
                if let Some((fd, f)) = self.fd(pid, &c.args) {
                    self.fds.remove(&(pid, fd));
                    self.event(c, pid, "close", f.file, 0, 0);
                }
            }
            "lseek" => {
                if let Some((fd, f)) = self.fd(pid, &c.args) {
                    if c.result >= 0 {
                        self.fds.insert(
                            (pid, fd),
                            Fd {
                                pos: Some(c.result as u64),
                                ..f
                            },
                        );
                        self.event(c, pid, "lseek", f.file, c.result as u64, 0);
                    }
                }
            }
            "mmap" | "munmap" => {
                let (file, offset) = if name == "mmap" {
                    let Some(fd) = nth_arg(&c.args, 4) else {
                        return;
                    };
                    let Some((_, f)) = self.fd(pid, fd) else {
                        return;
                    };
                    let off = nth_arg(&c.args, 5).and_then(parse_num).unwrap_or(0);
                    (f.file, off)
                } else {
                    return; // munmap names no file; mappings are matched by address downstream
                };
                let len = nth_arg(&c.args, 1).and_then(parse_num).unwrap_or(0);
                if c.result != -1 {
                    self.event(c, pid, "mmap", file, offset, len);
                }
            }
            _ => self.data_call(pid, c),
        }
    }

    fn data_call(&mut self, pid: u32, c: &Call) {
        let Some(code) = call_code(&c.name) else {
            return;
        };
        let Some((fd, f)) = self.fd(pid, &c.args) else {
            self.non_files += 1;
            return;
        };
        if c.result < 0 {
            return;
        }
        let moved = c.result as u64;
        let (op, offset) = match c.name.as_str() {
            "fsync" | "fdatasync" => (Op::Flush, 0),
            "pread64" | "pwrite64" | "preadv" | "pwritev" => {
                // pread64(fd, buf, count, offset), preadv(fd, iov, iovcnt, offset): last.
                let off = last_arg_num(&c.args);
                let op = if c.name.starts_with("pread") {
                    Op::Read
                } else {
                    Op::Write
                };
                (op, off.unwrap_or(0))
            }
            n => {
                let op = if n.starts_with("read") {
                    Op::Read
                } else {
                    Op::Write
                };
                let off = match f.pos {
                    Some(p) => p,
                    None => {
                        self.unknown_position += 1;
                        0
                    }
                };
                self.fds.insert(
                    (pid, fd),
                    Fd {
                        pos: f.pos.map(|p| p.saturating_add(moved)),
                        ..f
                    },
                );
                (op, off)
            }
        };
        let mut r = Request::new(
            c.ts_ns,
            op,
            offset,
            u32::try_from(moved).unwrap_or(u32::MAX),
        );
        r.stream = pid;
        r.file = Some(u64::from(f.file));
        r.call_site = Some(u64::from(code));
        r.measured = c.duration_ns;
        self.requests.push(r);
    }
}

fn parse_num(t: &str) -> Option<u64> {
    match t.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => t.parse().ok(),
    }
}

/// The fuzz target's entry (and the corpus test's): parses `data` as one process's strace
/// output and checks what the tracker promises — no panic, requests in time order, every
/// file id inside the file table.
pub fn fuzz_strace(data: &[u8]) {
    let mut t = Tracker::default();
    for l in String::from_utf8_lossy(data).lines() {
        if let Ok(Some(c)) = parse_line(l) {
            t.feed(1, &c);
        }
    }
    let n = t.files().len() as u64;
    assert!(t.requests.iter().all(|r| r.file.is_some_and(|f| f < n)));
    assert!(t.events.iter().all(|e| u64::from(e.file) < n));
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str =
        include_str!("../fuzz/corpus/strace/seed-python-pread-pwrite-lseek-readv-mmap.txt");

    #[test]
    fn lines_parse_exactly() {
        let c = parse_line(
            "1795451079.937721 openat(AT_FDCWD</tmp/stt>, \"data\", O_RDWR|O_CLOEXEC) = 3</tmp/stt/data> <0.000021>",
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.ts_ns, 1_795_451_079_937_721_000);
        assert_eq!((c.name.as_str(), c.result), ("openat", 3));
        assert_eq!(c.result_path.as_deref(), Some("/tmp/stt/data"));
        assert_eq!(c.duration_ns, Some(21_000));
        let c = parse_line("1.5 mmap(NULL, 8192, PROT_READ, MAP_SHARED, 3</d>, 0x1000) = 0x7f74c5ae9000 <0.000034>")
            .unwrap()
            .unwrap();
        assert_eq!(c.result, 0x7f74c5ae9000);
        let c = parse_line("1.5 openat(AT_FDCWD</>, \"x\", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000010>")
            .unwrap()
            .unwrap();
        assert_eq!((c.result, c.result_path), (-1, None));
        assert_eq!(parse_line("1.5 +++ exited with 0 +++").unwrap(), None);
        assert_eq!(
            parse_line("1.5 --- SIGCHLD {si_signo=SIGCHLD} ---").unwrap(),
            None
        );
        assert!(parse_line("1.5 read(3</x>, \"\"..., 4096 <unfinished ...>").is_err());
        assert!(parse_line("x read(3) = 1").is_err());
    }

    #[test]
    fn offsets_are_reconstructed() {
        let mut t = Tracker::default();
        for l in SAMPLE.lines() {
            if let Some(c) = parse_line(l).unwrap() {
                t.feed(7, &c);
            }
        }
        let files = t.files();
        let id = files.iter().position(|p| p == "/tmp/stt/data").unwrap() as u64;
        let got: Vec<_> = t
            .requests
            .iter()
            .filter(|r| r.file == Some(id))
            .map(|r| (r.op, r.offset, r.len, r.call_site, r.measured))
            .collect();
        assert_eq!(
            got,
            vec![
                (Op::Read, 1000, 100, Some(3), Some(22_000)),
                (Op::Write, 5000, 200, Some(4), Some(16_000)),
                (Op::Read, 3000, 50, Some(1), Some(15_000)),
                (Op::Read, 3050, 30, Some(5), Some(15_000)),
                (Op::Write, 3080, 7, Some(2), Some(13_000)),
                (Op::Flush, 0, 0, Some(9), Some(3_082_000)),
            ]
        );
        fuzz_strace(SAMPLE.as_bytes());
    }

    #[test]
    fn unknown_positions_are_counted_and_pipes_skipped() {
        let text = include_str!("../fuzz/corpus/strace/seed-append-inherited-pipe-preadv.txt");
        let mut t = Tracker::default();
        for l in text.lines() {
            if let Some(c) = parse_line(l).unwrap() {
                t.feed(7, &c);
            }
        }
        assert_eq!(t.files(), vec!["/a/f", "/a/g"]);
        let got: Vec<_> = t
            .requests
            .iter()
            .map(|r| (r.op, r.file, r.offset, r.len))
            .collect();
        assert_eq!(
            got,
            vec![
                (Op::Write, Some(0), 0, 10), // O_APPEND: position unknown
                (Op::Read, Some(1), 0, 4),   // inherited descriptor: unknown
                (Op::Write, Some(0), 10, 5), // after lseek(SEEK_END) = 10
                (Op::Read, Some(0), 4, 6),   // preadv at 4
            ]
        );
        assert_eq!((t.unknown_position, t.non_files), (2, 1));
    }
}
