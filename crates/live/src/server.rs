//! The NBD server: listens on a Unix socket (default) or a TCP port (loopback unless told
//! otherwise), runs the protocol state machine per connection and hands commands to the
//! live [`Session`].
//!
//! What a client can make the server hold is bounded ([`Limits`]): commands are admitted
//! against a per-connection and a global byte budget (a read's buffer, a write's payload,
//! replies the client has not taken yet), so a client that pipelines reads and never reads
//! its replies meets backpressure — the server stops reading its socket — instead of
//! allocation. Replies are written without blocking by whichever thread finishes a request;
//! what the socket does not take waits in the connection's output buffer, which its own
//! thread drains as the client reads. A client that takes nothing for `reply_timeout`, or
//! has not finished the handshake within `handshake_timeout`, is disconnected.

use crate::proto::{self, Event, ServerConn, TlsMode};
use crate::session::{ReplySink, Session, Summary};
use crate::tls::TlsOptions;
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl ListenAddr {
    /// `HOST:PORT` for TCP; anything else is a Unix socket path.
    pub fn parse_tcp(s: &str) -> Result<ListenAddr, String> {
        s.parse::<SocketAddr>().map(ListenAddr::Tcp).map_err(|e| {
            format!("--listen {s:?}: expected HOST:PORT such as 127.0.0.1:10809 ({e})")
        })
    }
}

/// What clients can make the server hold, and how long it waits for them.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Bytes one connection may hold: payloads of its admitted, unanswered commands (a
    /// read's buffer, a write's data), [`REQUEST_COST`] per command, and replies the client
    /// has not read. A command is admitted when it fits, or when the connection holds
    /// nothing (so one maximum-size request always can run).
    pub conn_bytes: u64,
    /// Bytes all connections together may hold (the same counts, plus input buffers grown
    /// past [`RECV_CHUNK`] for large write payloads).
    pub total_bytes: u64,
    /// Connections served at once; more are closed at accept (and the refusal logged).
    pub max_connections: usize,
    /// A connection still haggling options after this long is closed.
    pub handshake_timeout: Duration,
    /// A connection whose client takes none of its pending replies for this long is closed.
    pub reply_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            conn_bytes: 16 << 20,
            total_bytes: 256 << 20,
            max_connections: 128,
            handshake_timeout: Duration::from_secs(10),
            reply_timeout: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// The limits as the command line gives them (`None`: the default): MiB and seconds.
    pub fn from_flags(
        conn_mib: Option<f64>,
        total_mib: Option<f64>,
        max_connections: Option<usize>,
        handshake_timeout_s: Option<f64>,
        reply_timeout_s: Option<f64>,
    ) -> Result<Limits, String> {
        let d = Limits::default();
        let mib = |flag: &str, v: Option<f64>, def: u64| match v {
            None => Ok(def),
            Some(m) if m.is_finite() && m > 0.0 && m <= (1u64 << 40) as f64 => {
                Ok((m * (1u64 << 20) as f64) as u64)
            }
            Some(m) => Err(format!("{flag} {m}: expected MiB in (0, 2^40]")),
        };
        let secs = |flag: &str, v: Option<f64>, def: Duration| match v {
            None => Ok(def),
            Some(s) if s.is_finite() && s > 0.0 && s <= 1e9 => Ok(Duration::from_secs_f64(s)),
            Some(s) => Err(format!("{flag} {s}: expected seconds in (0, 1e9]")),
        };
        let l = Limits {
            conn_bytes: mib("--conn-mib", conn_mib, d.conn_bytes)?,
            total_bytes: mib("--total-mib", total_mib, d.total_bytes)?,
            max_connections: max_connections.unwrap_or(d.max_connections),
            handshake_timeout: secs(
                "--handshake-timeout",
                handshake_timeout_s,
                d.handshake_timeout,
            )?,
            reply_timeout: secs("--reply-timeout", reply_timeout_s, d.reply_timeout)?,
        };
        l.check()?;
        Ok(l)
    }

    fn check(&self) -> Result<(), String> {
        // A write payload may reach the spec's 2^25 before it is a disconnect: the global
        // budget must hold one, or such a write would wait forever.
        let min_total = proto::DOS_PAYLOAD as u64 + 2 * RECV_CHUNK as u64;
        if self.total_bytes < min_total.max(self.conn_bytes) {
            return Err(format!(
                "total in-flight bytes {}: must be at least the per-connection limit ({}) and {min_total} (one maximum payload)",
                self.total_bytes, self.conn_bytes
            ));
        }
        if self.conn_bytes == 0 || self.max_connections == 0 {
            return Err("per-connection bytes and the connection count must be positive".into());
        }
        for (what, d) in [
            ("handshake timeout", self.handshake_timeout),
            ("reply timeout", self.reply_timeout),
        ] {
            if d.is_zero() {
                return Err(format!("{what} must be positive"));
            }
        }
        Ok(())
    }
}

/// How the server is exposed: limits, remote binding, TLS.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    pub limits: Limits,
    /// Bind a TCP address that is not loopback (otherwise refused).
    pub allow_remote: bool,
    pub tls: Option<TlsOptions>,
}

/// Counted per admitted command on top of its payload: the executor's record of it and its
/// reply. Bounds the number of payload-less commands (FLUSH, TRIM) a client can queue.
pub const REQUEST_COST: u64 = 512;
/// Room offered to each read of a connection's socket in transmission.
pub const RECV_CHUNK: usize = 256 * 1024;
/// Room offered while haggling options (options are at most `MAX_OPTION_LEN`).
const HANDSHAKE_CHUNK: usize = 4096;
/// Room for raw TLS records per read (a record is at most 16 KiB and change).
const TLS_RECV: usize = 64 * 1024;
/// Replies up to this size share output chunks of `SHARED_CHUNK` bytes.
const SMALL_REPLY: usize = 4096;
const SHARED_CHUNK: usize = 64 * 1024;
/// Chunks handed to one `sendmsg`.
const PUSH_CHUNKS: usize = 64;
/// Corked output beyond this is written at once (bounds reply delay).
const CORK_LIMIT: usize = 256 * 1024;
/// Corked replies beyond this are written at once: a client pipelining writes otherwise
/// waits for the whole batch's I/O before its first reply, and idles (split-CPU QD 32
/// randwrite was 0.89× of nbdkit). Eight keeps most of the saving in system calls.
const CORK_REPLIES: u32 = 8;
/// How often a connection blocked on the *global* budget looks again (other connections'
/// releases do not wake it).
const GLOBAL_RETRY: Duration = Duration::from_millis(5);

/// The global byte budget.
struct Budget {
    used: AtomicU64,
    cap: u64,
}

impl Budget {
    fn try_take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                (u + n <= self.cap).then_some(u + n)
            })
            .is_ok()
    }
    fn take(&self, n: u64) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }
    fn give(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

fn is_would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
    )
}

/// `recv` without blocking; `Ok(None)`: nothing there.
fn recv_nb(fd: RawFd, b: &mut [u8]) -> std::io::Result<Option<usize>> {
    // SAFETY: `b` is valid for writes of `b.len()` bytes.
    let n = unsafe { libc::recv(fd, b.as_mut_ptr().cast(), b.len(), libc::MSG_DONTWAIT) };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = std::io::Error::last_os_error();
    if is_would_block(&e) {
        Ok(None)
    } else {
        Err(e)
    }
}

/// Receive, first polling without blocking for up to `spin`. On a VM a reader that blocks
/// is woken by an interrupt tens of µs after data arrives; a client that sends within the
/// spin finds the reader awake. Between polls the thread yields, so a client on the same
/// CPU runs. `Ok(None)`: nothing came within the spin (the caller then waits in `poll`).
fn recv_spinning(fd: RawFd, b: &mut [u8], spin: Duration) -> std::io::Result<Option<usize>> {
    // The clock is read only once the socket has been found empty.
    let mut t0: Option<Instant> = None;
    loop {
        if let Some(n) = recv_nb(fd, b)? {
            return Ok(Some(n));
        }
        if t0.get_or_insert_with(Instant::now).elapsed() >= spin {
            return Ok(None);
        }
        std::thread::yield_now();
    }
}

/// `sendmsg` of `parts` without blocking (and without SIGPIPE): bytes taken, 0 if none.
fn send_nb(fd: RawFd, parts: &[&[u8]]) -> std::io::Result<usize> {
    let iov: Vec<libc::iovec> = parts
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    if iov.is_empty() {
        return Ok(0);
    }
    loop {
        // SAFETY: a zeroed msghdr is valid; `iov` outlives the call and describes live slices.
        let n = unsafe {
            let mut m: libc::msghdr = std::mem::zeroed();
            m.msg_iov = iov.as_ptr() as *mut libc::iovec;
            m.msg_iovlen = iov.len() as _;
            libc::sendmsg(fd, &m, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// One connection's output side, shared by its reader thread and every thread that
/// completes one of its requests.
struct Out {
    /// The socket (closed when the connection ends, even while requests are still out).
    sock: Option<OwnedFd>,
    tls: Option<Box<rustls::ServerConnection>>,
    /// Bytes for the wire not yet taken by the kernel, in chunks (the first from `sent`):
    /// a large reply is a chunk of its own, allocated exactly, so what is held is what the
    /// budget counts (one growing buffer would hold up to twice that).
    chunks: VecDeque<Vec<u8>>,
    sent: usize,
    /// Bytes in `chunks` not yet sent.
    queued: usize,
    /// While the reader carries out a batch of pipelined commands the output is *corked*:
    /// replies collect in `buf` and go out in one write when the batch is done.
    corked: bool,
    /// Replies in `buf` since the last write.
    replies: u32,
    /// When output last stopped making progress (`None`: nothing pending).
    stalled_since: Option<Instant>,
}

struct Conn {
    out: Mutex<Out>,
    fd: RawFd,
    structured: AtomicBool,
    broken: AtomicBool,
    /// Set by the server's shutdown: end now.
    closing: AtomicBool,
    /// Commands admitted and not answered.
    pending: AtomicU64,
    /// Bytes held (see [`Limits::conn_bytes`]).
    used: AtomicU64,
    cap: u64,
    budget: Arc<Budget>,
    /// The reader sleeps until bytes are released or output is queued: `wake` is an
    /// eventfd it polls.
    waiting: AtomicBool,
    wake: OwnedFd,
}

impl Conn {
    fn state(&self) -> std::sync::MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes to an eventfd we own.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    fn drain_wake(&self) {
        let mut b = [0u8; 8];
        // SAFETY: reading 8 bytes from a non-blocking eventfd we own.
        unsafe { libc::read(self.wake.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
    }

    fn charge(&self, n: u64) {
        self.used.fetch_add(n, Ordering::AcqRel);
        self.budget.take(n);
    }

    fn release(&self, n: u64) {
        if n == 0 {
            return;
        }
        self.used.fetch_sub(n, Ordering::AcqRel);
        self.budget.give(n);
        if self.waiting.load(Ordering::Acquire) {
            self.wake();
        }
    }

    /// Admit a command costing `n` if this connection and the server can hold it.
    fn try_admit(&self, n: u64) -> bool {
        let u = self.used.load(Ordering::Acquire);
        if u != 0 && u + n > self.cap {
            return false;
        }
        if !self.budget.try_take(n) {
            return false;
        }
        self.used.fetch_add(n, Ordering::AcqRel);
        true
    }

    /// Append wire bytes for `head` + `data` (encrypted under TLS) to the output.
    fn queue(&self, o: &mut Out, head: &[u8], data: &[u8]) {
        let n = head.len() + data.len();
        if let Some(t) = o.tls.as_deref_mut() {
            // Records add a few dozen bytes per 16 KiB.
            let mut wire = Vec::with_capacity(n + n / 256 + 64);
            for part in [head, data] {
                if tls_write(t, part, &mut wire).is_err() {
                    self.broken.store(true, Ordering::Release);
                }
            }
            self.queue_wire(o, wire);
            return;
        }
        match o.chunks.back_mut() {
            // Small replies share a chunk (one system call for a corked batch).
            Some(last) if n <= SMALL_REPLY && last.len() + n <= SHARED_CHUNK => {
                last.extend_from_slice(head);
                last.extend_from_slice(data);
            }
            _ => {
                let mut c = Vec::with_capacity(if n <= SMALL_REPLY { SHARED_CHUNK } else { n });
                c.extend_from_slice(head);
                c.extend_from_slice(data);
                o.chunks.push_back(c);
            }
        }
        o.queued += n;
        self.charge(n as u64);
    }

    fn queue_wire(&self, o: &mut Out, wire: Vec<u8>) {
        if wire.is_empty() {
            return;
        }
        o.queued += wire.len();
        self.charge(wire.len() as u64);
        o.chunks.push_back(wire);
    }

    /// Write what the socket takes of the output, without blocking.
    fn push(&self, o: &mut Out) {
        o.replies = 0;
        while o.queued > 0 {
            let Some(fd) = o.sock.as_ref().map(AsRawFd::as_raw_fd) else {
                break;
            };
            if self.broken.load(Ordering::Acquire) {
                break;
            }
            let parts: Vec<&[u8]> = o
                .chunks
                .iter()
                .take(PUSH_CHUNKS)
                .enumerate()
                .map(|(i, c)| if i == 0 { &c[o.sent..] } else { &c[..] })
                .collect();
            match send_nb(fd, &parts) {
                Ok(0) => {
                    o.stalled_since.get_or_insert_with(Instant::now);
                    return;
                }
                Ok(n) => {
                    o.queued -= n;
                    o.stalled_since = Some(Instant::now());
                    self.release(n as u64);
                    let mut left = n;
                    while left > 0 {
                        let front = o.chunks[0].len() - o.sent;
                        if left >= front {
                            left -= front;
                            o.chunks.pop_front();
                            o.sent = 0;
                        } else {
                            o.sent += left;
                            left = 0;
                        }
                    }
                }
                Err(_) => self.broken.store(true, Ordering::Release),
            }
        }
        // Broken or closed: the rest will never go.
        self.release(o.queued as u64);
        o.chunks.clear();
        o.sent = 0;
        o.queued = 0;
        o.stalled_since = None;
    }

    fn has_output(&self) -> bool {
        self.state().queued > 0
    }

    fn cork(&self) {
        self.state().corked = true;
    }

    fn uncork(&self) {
        let mut o = self.state();
        o.corked = false;
        self.push(&mut o);
    }

    /// Close the socket and drop pending output; replies still to come are discarded.
    fn close(&self) {
        self.broken.store(true, Ordering::Release);
        let mut o = self.state();
        let o = &mut *o;
        if let (Some(t), Some(s)) = (o.tls.as_deref_mut(), o.sock.as_ref()) {
            // A courtesy close_notify, if the socket takes it now.
            t.send_close_notify();
            let mut v = Vec::new();
            while t.wants_write() && t.write_tls(&mut v).is_ok() {}
            let _ = send_nb(s.as_raw_fd(), &[&v]);
        }
        self.push(o);
        o.sock = None;
        o.tls = None;
    }
}

/// Encrypt `plain` into `wire`. rustls bounds what it buffers, so write and drain in turns.
fn tls_write(
    t: &mut rustls::ServerConnection,
    mut plain: &[u8],
    wire: &mut Vec<u8>,
) -> std::io::Result<()> {
    while !plain.is_empty() {
        let n = t.writer().write(plain)?;
        plain = &plain[n..];
        let mut drained = false;
        while t.wants_write() {
            t.write_tls(wire)?;
            drained = true;
        }
        if n == 0 && !drained {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
    }
    while t.wants_write() {
        t.write_tls(wire)?;
    }
    Ok(())
}

impl ReplySink for Conn {
    fn send(&self, bytes: &[u8]) {
        self.send_parts(bytes, &[]);
    }

    fn send_parts(&self, head: &[u8], data: &[u8]) {
        if self.broken.load(Ordering::Acquire) {
            return;
        }
        let mut o = self.state();
        let Some(fd) = o.sock.as_ref().map(AsRawFd::as_raw_fd) else {
            return;
        };
        if o.tls.is_some() || o.corked || o.queued > 0 {
            self.queue(&mut o, head, data);
            o.replies += 1;
            if !o.corked || o.queued >= CORK_LIMIT || o.replies >= CORK_REPLIES {
                self.push(&mut o);
            }
        } else {
            // One system call for header and payload, without copying the payload; what
            // the socket does not take now waits in the buffer.
            let n = match send_nb(fd, &[head, data]) {
                Ok(n) => n,
                Err(_) => {
                    self.broken.store(true, Ordering::Release);
                    return;
                }
            };
            if n < head.len() + data.len() {
                let (h, d) = if n < head.len() {
                    (&head[n..], data)
                } else {
                    (&[][..], &data[n - head.len()..])
                };
                self.queue(&mut o, h, d);
                o.stalled_since = Some(Instant::now());
            }
        }
        if o.queued > 0 && !o.corked {
            // The reader drains the rest when the client reads. (While it is corked it is
            // working through a batch, and pushes the output itself when it uncorks.)
            drop(o);
            self.wake();
        }
    }

    fn structured(&self) -> bool {
        self.structured.load(Ordering::Relaxed)
    }

    fn released(&self, payload: u64) {
        self.release(payload + REQUEST_COST);
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

struct ConnHandle {
    conn: Weak<Conn>,
    thread: JoinHandle<()>,
}

pub struct Server {
    session: Arc<Session>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    conns: Arc<Mutex<Vec<ConnHandle>>>,
    addr: String,
    unix_path: Option<PathBuf>,
}

/// A Unix socket path may be reused only if nothing answers on it.
fn claim_unix_path(p: &Path) -> Result<(), String> {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return Ok(());
    };
    use std::os::unix::fs::FileTypeExt;
    if !m.file_type().is_socket() {
        return Err(format!(
            "{}: exists and is not a socket; refusing to replace it",
            p.display()
        ));
    }
    match UnixStream::connect(p) {
        Ok(_) => Err(format!(
            "{}: a server is answering on this socket; refusing to replace it",
            p.display()
        )),
        // Nobody listens: a stale socket file left by a server that died.
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => std::fs::remove_file(p)
            .map_err(|e| format!("{}: cannot remove the stale socket: {e}", p.display())),
        Err(e) => Err(format!(
            "{}: cannot tell whether a server answers on it ({e}); refusing to replace it",
            p.display()
        )),
    }
}

struct ConnConfig {
    limits: Limits,
    tls: Option<TlsOptions>,
}

impl Server {
    /// Bind and start accepting, with the default [`ServerOptions`].
    pub fn start(session: Session, addr: &ListenAddr) -> Result<Server, String> {
        Server::start_with(session, addr, &ServerOptions::default())
    }

    /// Bind and start accepting. A Unix socket path that exists is replaced only if it is a
    /// socket nobody answers on; a TCP address that is not loopback needs `allow_remote`.
    pub fn start_with(
        session: Session,
        addr: &ListenAddr,
        opts: &ServerOptions,
    ) -> Result<Server, String> {
        opts.limits.check()?;
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<ConnHandle>>> = Arc::new(Mutex::new(Vec::new()));
        let session = Arc::new(session);
        enum L {
            U(UnixListener),
            T(TcpListener),
        }
        let (l, shown, unix_path) = match addr {
            ListenAddr::Unix(p) => {
                claim_unix_path(p)?;
                let l = UnixListener::bind(p)
                    .map_err(|e| format!("{}: cannot listen: {e}", p.display()))?;
                (L::U(l), p.display().to_string(), Some(p.clone()))
            }
            ListenAddr::Tcp(a) => {
                if !a.ip().is_loopback() {
                    if !opts.allow_remote {
                        return Err(format!(
                            "--listen {a}: not a loopback address, so other hosts could reach the export; pass --allow-remote to bind it (with --tls to encrypt)"
                        ));
                    }
                    let tls = if opts
                        .tls
                        .as_ref()
                        .is_some_and(|t| t.mode == TlsMode::Require)
                    {
                        "TLS is required"
                    } else {
                        "clients need no TLS (no encryption, no authentication)"
                    };
                    eprintln!(
                        "wattio-live: warning: serving on {a}, reachable from other hosts; {tls}"
                    );
                }
                let l = TcpListener::bind(a).map_err(|e| format!("{a}: cannot listen: {e}"))?;
                let shown = l
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_else(|_| a.to_string());
                (L::T(l), shown, None)
            }
        };
        match &l {
            L::U(u) => u.set_nonblocking(true),
            L::T(t) => t.set_nonblocking(true),
        }
        .map_err(|e| format!("{shown}: {e}"))?;
        let cfg = Arc::new(ConnConfig {
            limits: opts.limits.clone(),
            tls: opts.tls.clone(),
        });
        let budget = Arc::new(Budget {
            used: AtomicU64::new(0),
            cap: opts.limits.total_bytes,
        });
        let (s2, c2, sess) = (stop.clone(), conns.clone(), session.clone());
        let next_id = AtomicU32::new(1);
        let accept = std::thread::Builder::new()
            .name("wattio-accept".into())
            .spawn(move || {
                let mut last_refusal: Option<Instant> = None;
                let mut refused = 0u64;
                while !s2.load(Ordering::Acquire) {
                    let r: std::io::Result<OwnedFd> = match &l {
                        L::U(u) => u.accept().map(|(s, _)| s.into()),
                        L::T(t) => t.accept().map(|(s, _)| {
                            let _ = s.set_nodelay(true);
                            s.into()
                        }),
                    };
                    let sock = match r {
                        Ok(s) => s,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(10));
                            continue;
                        }
                    };
                    let mut g = c2.lock().unwrap_or_else(|p| p.into_inner());
                    // Finished connections leave their list entry (their sockets are
                    // closed already).
                    g.retain(|c: &ConnHandle| !c.thread.is_finished());
                    if g.len() >= cfg.limits.max_connections {
                        drop(sock);
                        refused += 1;
                        if last_refusal.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                            eprintln!(
                                "wattio-live: refused {refused} connection(s): {} served at once (the limit)",
                                cfg.limits.max_connections
                            );
                            last_refusal = Some(Instant::now());
                            refused = 0;
                        }
                        continue;
                    }
                    let Some(conn) = new_conn(sock, &cfg, &budget) else {
                        continue;
                    };
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    let (sess, stop, cfg2, c) = (sess.clone(), s2.clone(), cfg.clone(), conn.clone());
                    let t = std::thread::Builder::new()
                        .name(format!("wattio-conn-{id}"))
                        .spawn(move || serve_conn(c, sess, id, stop, &cfg2));
                    if let Ok(thread) = t {
                        g.push(ConnHandle {
                            conn: Arc::downgrade(&conn),
                            thread,
                        });
                    }
                }
            })
            .map_err(|e| format!("cannot start accept thread: {e}"))?;
        Ok(Server {
            session,
            stop,
            accept: Some(accept),
            conns,
            addr: shown,
            unix_path,
        })
    }

    /// The bound address (the real port when started on port 0).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    pub fn connections(&self) -> usize {
        self.conns
            .lock()
            .map(|g| g.iter().filter(|c| !c.thread.is_finished()).count())
            .unwrap_or(0)
    }

    /// Stop accepting, let in-flight requests finish (answering them), close connections,
    /// then finish the session (flush, ledgers, capture).
    pub fn shutdown(mut self, drain: Duration) -> Result<Summary, String> {
        self.stop.store(true, Ordering::Release);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        let drained = self.session.drain(drain);
        let conns = std::mem::take(&mut *self.conns.lock().unwrap_or_else(|p| p.into_inner()));
        for c in &conns {
            if let Some(conn) = c.conn.upgrade() {
                conn.closing.store(true, Ordering::Release);
                conn.wake();
            }
        }
        for c in conns {
            let _ = c.thread.join();
        }
        if let Some(p) = &self.unix_path {
            let _ = std::fs::remove_file(p);
        }
        let session = match Arc::try_unwrap(self.session) {
            Ok(s) => s,
            Err(_) => return Err("session still referenced by a connection".into()),
        };
        session.finish(if drained { drain } else { Duration::ZERO })
    }
}

fn new_conn(sock: OwnedFd, cfg: &ConnConfig, budget: &Arc<Budget>) -> Option<Arc<Conn>> {
    // SAFETY: plain syscall; the result is checked before it is owned.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if efd < 0 {
        return None;
    }
    Some(Arc::new(Conn {
        fd: sock.as_raw_fd(),
        out: Mutex::new(Out {
            sock: Some(sock),
            tls: None,
            chunks: VecDeque::new(),
            sent: 0,
            queued: 0,
            corked: false,
            replies: 0,
            stalled_since: None,
        }),
        structured: AtomicBool::new(false),
        broken: AtomicBool::new(false),
        closing: AtomicBool::new(false),
        pending: AtomicU64::new(0),
        used: AtomicU64::new(0),
        cap: cfg.limits.conn_bytes,
        budget: budget.clone(),
        waiting: AtomicBool::new(false),
        // SAFETY: `efd` is a fresh descriptor nobody else owns.
        wake: unsafe { OwnedFd::from_raw_fd(efd) },
    }))
}

/// Wait for the socket (`events`) or the wake-up eventfd; returns the socket's revents.
fn wait(conn: &Conn, events: libc::c_short, timeout: Option<Duration>) -> libc::c_short {
    let mut fds = [
        libc::pollfd {
            fd: conn.fd,
            events,
            revents: 0,
        },
        libc::pollfd {
            fd: conn.wake.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as i32);
    conn.waiting.store(true, Ordering::Release);
    // SAFETY: `fds` is a valid array of two pollfds.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    conn.waiting.store(false, Ordering::Release);
    if r > 0 && fds[1].revents != 0 {
        conn.drain_wake();
    }
    if r > 0 {
        fds[0].revents
    } else {
        0
    }
}

/// Feed bytes received under TLS to rustls and its plaintext to the protocol; false when
/// the session must end (TLS error or the client's close_notify).
fn tls_receive(conn: &Conn, mut raw: &[u8], pc: &mut ServerConn, room: usize) -> bool {
    let mut o = conn.state();
    let Some(t) = o.tls.as_deref_mut() else {
        return false;
    };
    let mut wire = Vec::new();
    let mut alive = true;
    loop {
        if !raw.is_empty() && t.read_tls(&mut raw).is_err() {
            alive = false;
            break;
        }
        if t.process_new_packets().is_err() {
            alive = false;
            break;
        }
        if !t.is_handshaking() {
            pc.tls_started();
        }
        loop {
            match t.reader().read(pc.input_space(room)) {
                Ok(0) => {
                    alive = false;
                    break;
                }
                Ok(n) => pc.input_filled(n),
                Err(_) => break,
            }
        }
        if raw.is_empty() || !alive {
            break;
        }
    }
    // Handshake messages (or an alert) to send.
    while t.wants_write() && t.write_tls(&mut wire).is_ok() {}
    if !wire.is_empty() {
        conn.queue_wire(&mut o, wire);
        conn.push(&mut o);
    }
    alive
}

fn serve_conn(
    conn: Arc<Conn>,
    session: Arc<Session>,
    id: u32,
    stop: Arc<AtomicBool>,
    cfg: &ConnConfig,
) {
    let limits = &cfg.limits;
    let tls_mode = cfg.tls.as_ref().map_or(TlsMode::Off, |t| t.mode);
    let sink: Arc<dyn ReplySink> = conn.clone();
    let mut pc = ServerConn::with_tls(session.exports(), tls_mode);
    conn.send(&pc.take_output());
    let started = Instant::now();
    let poll = session.poll();
    let mut events: VecDeque<Event> = VecDeque::new();
    let mut batch = Vec::new();
    let mut export = 0usize;
    let mut raw: Vec<u8> = Vec::new();
    // Input-buffer bytes beyond RECV_CHUNK, charged to the global budget.
    let mut charged_in = 0u64;
    // Soft end (DISC, EOF, a protocol error): answer what is outstanding, then close.
    let mut soft_end = false;
    'conn: loop {
        // Carry out what was parsed, as far as the budget allows.
        conn.cork();
        while let Some(ev) = events.front() {
            if let Event::Command(c) = ev {
                if stop.load(Ordering::Acquire) {
                    let mut b = Vec::new();
                    proto::encode_error_reply(
                        &mut b,
                        pc.structured(),
                        c.cookie,
                        proto::ESHUTDOWN,
                        "server shutting down",
                    );
                    conn.send(&b);
                    events.pop_front();
                    continue;
                }
                // A client that can no longer take replies gets no reads (nobody will see
                // the data); its writes, flushes and trims are still carried out below, so
                // a write it sent in full before it vanished is not lost.
                if matches!(c.kind, proto::CmdKind::Read) && conn.broken.load(Ordering::Acquire) {
                    events.pop_front();
                    continue;
                }
                if !conn.try_admit(c.held_bytes() + REQUEST_COST) {
                    break;
                }
                conn.pending.fetch_add(1, Ordering::AcqRel);
                if let Some(Event::Command(c)) = events.pop_front() {
                    batch.push(c);
                }
                continue;
            }
            if !batch.is_empty() {
                session.submit_batch(&sink, id, export, &mut batch);
            }
            match events.pop_front() {
                Some(Event::Transmission { export: e }) => {
                    export = e;
                    conn.structured.store(pc.structured(), Ordering::Relaxed);
                }
                Some(Event::Reject {
                    cookie,
                    error,
                    message,
                    ..
                }) => {
                    let mut b = Vec::new();
                    proto::encode_error_reply(&mut b, pc.structured(), cookie, error, &message);
                    conn.send(&b);
                }
                Some(Event::StartTls) => {
                    let Some(t) = &cfg.tls else {
                        break 'conn;
                    };
                    match rustls::ServerConnection::new(t.config.clone()) {
                        Ok(s) => conn.state().tls = Some(Box::new(s)),
                        Err(_) => break 'conn,
                    }
                    let rest = pc.take_unprocessed();
                    if !tls_receive(&conn, &rest, &mut pc, HANDSHAKE_CHUNK) {
                        break 'conn;
                    }
                    events.extend(std::iter::from_fn(|| pc.next_event()));
                    if pc.has_output() {
                        conn.send(&pc.take_output());
                    }
                }
                Some(Event::Disconnect) | Some(Event::Close { .. }) => {
                    soft_end = true;
                }
                Some(Event::Command(_)) | None => {}
            }
            if soft_end {
                break;
            }
        }
        if !batch.is_empty() {
            session.submit_batch(&sink, id, export, &mut batch);
        }
        conn.uncork();
        // A broken connection is read to its end (see above), not dropped at once.
        if (soft_end && events.is_empty()) || conn.closing.load(Ordering::Acquire) {
            break;
        }
        // Deadlines.
        if !pc.in_transmission() && started.elapsed() >= limits.handshake_timeout {
            break;
        }
        let stalled = conn.state().stalled_since.map(|t| t.elapsed());
        if stalled.is_some_and(|s| s >= limits.reply_timeout) {
            break;
        }
        // Read more only when everything parsed is admitted and the connection is under
        // its budget: otherwise the client meets backpressure in its socket.
        let room = if pc.receiving_payload() {
            // Room for the whole payload at once: charged below in one piece, so
            // connections never hold parts of the budget while waiting for the rest.
            RECV_CHUNK.max(pc.wants())
        } else if pc.in_transmission() {
            RECV_CHUNK
        } else {
            HANDSHAKE_CHUNK
        };
        let grown = (pc.input_len_for(room).saturating_sub(RECV_CHUNK)) as u64;
        let mut global_short = false;
        if grown > charged_in {
            if conn.budget.try_take(grown - charged_in) {
                charged_in = grown;
            } else {
                global_short = true;
            }
        }
        let want_read = !soft_end
            && events.is_empty()
            && !global_short
            && conn.used.load(Ordering::Acquire) < conn.cap;
        let want_write = conn.has_output();
        let mut got: Option<usize> = None;
        if want_read && !want_write && !poll.is_zero() {
            let r = if conn.state().tls.is_some() {
                raw.resize(TLS_RECV, 0);
                recv_spinning(conn.fd, &mut raw, poll)
            } else {
                recv_spinning(conn.fd, pc.input_space(room), poll)
            };
            match r {
                Ok(n) => got = n,
                Err(_) => break,
            }
        }
        if got.is_none() {
            let mut ev = 0;
            if want_read {
                ev |= libc::POLLIN;
            }
            if want_write {
                ev |= libc::POLLOUT;
            }
            let mut timeout: Option<Duration> = None;
            let mut bound = |d: Duration| timeout = Some(timeout.map_or(d, |t| t.min(d)));
            if !pc.in_transmission() {
                bound(limits.handshake_timeout.saturating_sub(started.elapsed()));
            }
            if want_write {
                bound(
                    limits
                        .reply_timeout
                        .saturating_sub(stalled.unwrap_or_default()),
                );
            }
            if !want_read && !want_write {
                bound(GLOBAL_RETRY);
            }
            let rev = wait(&conn, ev, timeout);
            if rev & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0 && want_write {
                let mut o = conn.state();
                conn.push(&mut o);
            }
            if !want_read || rev & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) == 0 {
                continue;
            }
            let r = if conn.state().tls.is_some() {
                raw.resize(TLS_RECV, 0);
                recv_nb(conn.fd, &mut raw)
            } else {
                recv_nb(conn.fd, pc.input_space(room))
            };
            match r {
                Ok(Some(n)) => got = Some(n),
                Ok(None) => continue,
                Err(_) => break,
            }
        }
        let n = got.unwrap_or(0);
        if n == 0 {
            // EOF: the client sent all it will; answer what it asked.
            soft_end = true;
        }
        if stop.load(Ordering::Acquire) {
            pc.set_shutting_down();
        }
        if conn.state().tls.is_some() {
            if !tls_receive(&conn, &raw[..n], &mut pc, room) {
                soft_end = true;
            }
        } else {
            pc.input_filled(n);
        }
        if pc.has_output() {
            conn.send(&pc.take_output());
        }
        events.extend(std::iter::from_fn(|| pc.next_event()));
        if pc.shrink_input(RECV_CHUNK) {
            conn.budget.give(charged_in);
            charged_in = 0;
        }
        // Events left by an EOF are carried out at the top of the loop, which then ends.
    }
    // Answer what is outstanding before closing (unless the server is closing us, or the
    // client stopped taking replies).
    let t0 = Instant::now();
    while soft_end
        && (conn.pending.load(Ordering::Acquire) > 0 || conn.has_output())
        && !conn.closing.load(Ordering::Acquire)
        && !conn.broken.load(Ordering::Acquire)
        && t0.elapsed() < Duration::from_secs(30)
    {
        let stalled = conn.state().stalled_since.map(|t| t.elapsed());
        if stalled.is_some_and(|s| s >= limits.reply_timeout) {
            break;
        }
        let ev = if conn.has_output() { libc::POLLOUT } else { 0 };
        wait(&conn, ev, Some(Duration::from_millis(100)));
        let mut o = conn.state();
        conn.push(&mut o);
    }
    conn.close();
    conn.budget.give(charged_in);
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_spinning_gets_data_within_the_spin_or_reports_none() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let fd = a.as_raw_fd();
        let mut buf = [0u8; 16];
        // Already there: the first non-blocking poll takes it.
        b.write_all(b"now").unwrap();
        let n = recv_spinning(fd, &mut buf, Duration::from_micros(50)).unwrap();
        assert_eq!(n, Some(3));
        assert_eq!(&buf[..3], b"now");
        // Nothing within the spin: None, and the caller waits in poll.
        assert_eq!(
            recv_spinning(fd, &mut buf, Duration::from_micros(50)).unwrap(),
            None
        );
        // End of stream is a zero-length receive, not "nothing yet".
        drop(b);
        assert_eq!(
            recv_spinning(fd, &mut buf, Duration::from_micros(50)).unwrap(),
            Some(0)
        );
    }

    #[test]
    fn send_nb_takes_what_fits_and_never_blocks() {
        let (a, b) = UnixStream::pair().unwrap();
        let big = vec![7u8; 8 << 20];
        // The socket buffer is far smaller than 8 MiB: a partial write, then 0.
        let n = send_nb(a.as_raw_fd(), &[b"head", &big]).unwrap();
        assert!(n > 4 && n < big.len(), "{n}");
        assert_eq!(send_nb(a.as_raw_fd(), &[&big]).unwrap(), 0);
        drop(b);
        assert!(send_nb(a.as_raw_fd(), &[&big]).is_err());
    }

    #[test]
    fn the_budget_admits_up_to_its_cap() {
        let b = Budget {
            used: AtomicU64::new(0),
            cap: 100,
        };
        assert!(b.try_take(60));
        assert!(!b.try_take(41));
        assert!(b.try_take(40));
        b.give(100);
        assert_eq!(b.used.load(Ordering::Acquire), 0);
    }
}
