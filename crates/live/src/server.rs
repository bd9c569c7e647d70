//! The NBD server: listens on a Unix socket (default) or a loopback TCP port, runs the
//! protocol state machine per connection and hands commands to the live [`Session`].

use crate::proto::{self, Event, ServerConn};
use crate::session::{ReplySink, Session, Summary};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> std::io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
        }
    }
    /// Read, first polling without blocking for up to `spin`. On a VM a reader that blocks
    /// is woken by an interrupt tens of µs after data arrives; a client that sends within
    /// the spin finds the reader awake. Between polls the thread yields, so a client on the
    /// same CPU runs.
    fn read_polling(&mut self, b: &mut [u8], spin: Duration) -> std::io::Result<usize> {
        if !spin.is_zero() && !b.is_empty() {
            // The clock is read only once the socket has been found empty.
            let mut t0: Option<Instant> = None;
            loop {
                // SAFETY: `b` is valid for writes of `b.len()` bytes.
                let n = unsafe {
                    libc::recv(
                        self.fd(),
                        b.as_mut_ptr().cast(),
                        b.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if n >= 0 {
                    return Ok(n as usize);
                }
                let e = std::io::Error::last_os_error();
                if !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) {
                    return Err(e);
                }
                if t0.get_or_insert_with(Instant::now).elapsed() >= spin {
                    break;
                }
                std::thread::yield_now();
            }
        }
        self.read(b)
    }
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(b),
            Stream::Tcp(s) => s.write_all(b),
        }
    }
    fn shutdown(&self, how: Shutdown) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        };
    }
}

/// The write side of a connection. While the reader thread carries out a batch of
/// pipelined commands the output is *corked*: replies collect in `buf` and go out in one
/// write when the batch is done, instead of one system call per reply.
struct OutState {
    stream: Stream,
    buf: Vec<u8>,
    corked: bool,
    /// Replies in `buf`.
    replies: u32,
}

/// Corked output beyond this is written at once (bounds memory and reply delay).
const CORK_LIMIT: usize = 256 * 1024;
/// Corked replies beyond this are written at once: a client pipelining writes otherwise
/// waits for the whole batch's I/O before its first reply, and idles (split-CPU QD 32
/// randwrite was 0.89× of nbdkit). Eight keeps most of the saving in system calls.
const CORK_REPLIES: u32 = 8;

struct ConnOut {
    out: Mutex<OutState>,
    structured: AtomicBool,
    broken: AtomicBool,
    pending: AtomicU64,
}

impl ConnOut {
    fn state(&self) -> std::sync::MutexGuard<'_, OutState> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, o: &mut OutState, bytes: &[u8]) {
        if o.stream.write_all(bytes).is_err() {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    fn flush_buf(&self, o: &mut OutState) {
        if !o.buf.is_empty() {
            let b = std::mem::take(&mut o.buf);
            if !self.broken.load(Ordering::Relaxed) {
                self.write(o, &b);
            }
            o.buf = b;
            o.buf.clear();
        }
        o.replies = 0;
    }

    fn cork(&self) {
        self.state().corked = true;
    }

    fn uncork(&self) {
        let mut o = self.state();
        o.corked = false;
        self.flush_buf(&mut o);
    }
}

impl ReplySink for ConnOut {
    fn send(&self, bytes: &[u8]) {
        self.send_parts(bytes, &[]);
    }

    fn send_parts(&self, head: &[u8], data: &[u8]) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        let mut o = self.state();
        if o.corked || !o.buf.is_empty() {
            o.buf.extend_from_slice(head);
            o.buf.extend_from_slice(data);
            o.replies += 1;
            if !o.corked || o.buf.len() >= CORK_LIMIT || o.replies >= CORK_REPLIES {
                self.flush_buf(&mut o);
            }
        } else if data.is_empty() {
            self.write(&mut o, head);
        } else {
            // One system call for header and payload, without copying the payload.
            let r = match &o.stream {
                Stream::Unix(s) => write_all_vectored(s, head, data),
                Stream::Tcp(s) => write_all_vectored(s, head, data),
            };
            if r.is_err() {
                self.broken.store(true, Ordering::Relaxed);
            }
        }
    }

    fn structured(&self) -> bool {
        self.structured.load(Ordering::Relaxed)
    }
}

fn write_all_vectored<W>(mut w: W, head: &[u8], data: &[u8]) -> std::io::Result<()>
where
    W: Write,
{
    let total = head.len() + data.len();
    let mut done = 0;
    while done < total {
        let n = if done < head.len() {
            w.write_vectored(&[
                std::io::IoSlice::new(&head[done..]),
                std::io::IoSlice::new(data),
            ])?
        } else {
            w.write(&data[done - head.len()..])?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        done += n;
    }
    Ok(())
}

/// Counts replies per connection so DISC can wait for the connection's own requests.
struct CountingSink {
    out: Arc<ConnOut>,
}

impl ReplySink for CountingSink {
    fn send(&self, bytes: &[u8]) {
        self.out.send(bytes);
        self.out.pending.fetch_sub(1, Ordering::AcqRel);
    }
    fn send_parts(&self, head: &[u8], data: &[u8]) {
        self.out.send_parts(head, data);
        self.out.pending.fetch_sub(1, Ordering::AcqRel);
    }
    fn structured(&self) -> bool {
        self.out.structured()
    }
}

struct ConnHandle {
    control: Stream,
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

impl Server {
    /// Bind and start accepting. A Unix socket path that exists is replaced only if it is a
    /// socket (never a regular file).
    pub fn start(session: Session, addr: &ListenAddr) -> Result<Server, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<ConnHandle>>> = Arc::new(Mutex::new(Vec::new()));
        let session = Arc::new(session);
        enum L {
            U(UnixListener),
            T(TcpListener),
        }
        let (l, shown, unix_path) = match addr {
            ListenAddr::Unix(p) => {
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    use std::os::unix::fs::FileTypeExt;
                    if m.file_type().is_socket() {
                        let _ = std::fs::remove_file(p);
                    } else {
                        return Err(format!(
                            "{}: exists and is not a socket; refusing to replace it",
                            p.display()
                        ));
                    }
                }
                let l = UnixListener::bind(p)
                    .map_err(|e| format!("{}: cannot listen: {e}", p.display()))?;
                (L::U(l), p.display().to_string(), Some(p.clone()))
            }
            ListenAddr::Tcp(a) => {
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
        let (s2, c2, sess) = (stop.clone(), conns.clone(), session.clone());
        let next_id = AtomicU32::new(1);
        let accept = std::thread::Builder::new()
            .name("wattio-accept".into())
            .spawn(move || {
                while !s2.load(Ordering::Acquire) {
                    let r = match &l {
                        L::U(u) => u.accept().map(|(s, _)| {
                            let _ = s.set_nonblocking(false);
                            Stream::Unix(s)
                        }),
                        L::T(t) => t.accept().map(|(s, _)| {
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_nodelay(true);
                            Stream::Tcp(s)
                        }),
                    };
                    match r {
                        Ok(stream) => {
                            let id = next_id.fetch_add(1, Ordering::Relaxed);
                            let Ok(control) = stream.try_clone() else {
                                continue;
                            };
                            let sess = sess.clone();
                            let stop = s2.clone();
                            let t = std::thread::Builder::new()
                                .name(format!("wattio-conn-{id}"))
                                .spawn(move || serve_conn(stream, sess, id, stop));
                            if let Ok(thread) = t {
                                let mut g = c2.lock().unwrap_or_else(|p| p.into_inner());
                                g.retain(|c: &ConnHandle| !c.thread.is_finished());
                                g.push(ConnHandle { control, thread });
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
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
            c.control.shutdown(Shutdown::Both);
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

/// Room offered to each read of a connection's socket.
const RECV_CHUNK: usize = 256 * 1024;

fn serve_conn(mut stream: Stream, session: Arc<Session>, id: u32, stop: Arc<AtomicBool>) {
    let Ok(w) = stream.try_clone() else {
        return;
    };
    let out = Arc::new(ConnOut {
        out: Mutex::new(OutState {
            stream: w,
            buf: Vec::new(),
            corked: false,
            replies: 0,
        }),
        structured: AtomicBool::new(false),
        broken: AtomicBool::new(false),
        pending: AtomicU64::new(0),
    });
    let sink: Arc<dyn ReplySink> = Arc::new(CountingSink { out: out.clone() });
    let mut pc = ServerConn::new(session.exports());
    out.send(&pc.take_output());
    let mut export = 0usize;
    let poll = session.poll();
    let mut events = Vec::new();
    let mut batch = Vec::new();
    'conn: loop {
        // Received straight into the protocol's buffer: no copy on the way in.
        let n = match stream.read_polling(pc.input_space(RECV_CHUNK), poll) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if stop.load(Ordering::Acquire) {
            pc.set_shutting_down();
        }
        pc.input_filled(n);
        if pc.has_output() {
            out.send(&pc.take_output());
        }
        events.extend(std::iter::from_fn(|| pc.next_event()));
        out.cork();
        for ev in events.drain(..) {
            if !matches!(ev, Event::Command(_)) && !batch.is_empty() {
                session.submit_batch(&sink, id, export, &mut batch);
            }
            match ev {
                Event::Transmission { export: e } => {
                    export = e;
                    out.structured.store(pc.structured(), Ordering::Relaxed);
                }
                Event::Command(c) => {
                    if stop.load(Ordering::Acquire) {
                        let mut b = Vec::new();
                        proto::encode_error_reply(
                            &mut b,
                            pc.structured(),
                            c.cookie,
                            proto::ESHUTDOWN,
                            "server shutting down",
                        );
                        out.send(&b);
                        continue;
                    }
                    out.pending.fetch_add(1, Ordering::AcqRel);
                    batch.push(c);
                }
                Event::Reject {
                    cookie,
                    error,
                    message,
                    ..
                } => {
                    let mut b = Vec::new();
                    proto::encode_error_reply(&mut b, pc.structured(), cookie, error, &message);
                    out.send(&b);
                }
                Event::Disconnect | Event::Close { .. } => {
                    out.uncork();
                    break 'conn;
                }
            }
        }
        if !batch.is_empty() {
            session.submit_batch(&sink, id, export, &mut batch);
        }
        out.uncork();
    }
    // NBD_CMD_DISC (or EOF): answer what is outstanding before closing. When the server is
    // shutting down it has already drained for as long as it was told to: don't wait again.
    let t0 = Instant::now();
    while out.pending.load(Ordering::Acquire) > 0
        && t0.elapsed() < Duration::from_secs(30)
        && !stop.load(Ordering::Acquire)
    {
        std::thread::sleep(Duration::from_micros(200));
    }
    stream.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_polling_gets_data_whether_it_comes_within_the_spin_or_after() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let mut r = Stream::Unix(a);
        let mut buf = [0u8; 16];
        // Already there: the first non-blocking poll takes it.
        b.write_all(b"now").unwrap();
        let n = r.read_polling(&mut buf, Duration::from_micros(50)).unwrap();
        assert_eq!(&buf[..n], b"now");
        // Later than the spin: the poll gives up and the blocking read gets it.
        let w = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.write_all(b"later").unwrap();
            b
        });
        let n = r.read_polling(&mut buf, Duration::from_micros(50)).unwrap();
        assert_eq!(&buf[..n], b"later");
        // No poll at all, then end of stream.
        let mut b = w.join().unwrap();
        b.write_all(b"x").unwrap();
        assert_eq!(r.read_polling(&mut buf, Duration::ZERO).unwrap(), 1);
        drop(b);
        assert_eq!(
            r.read_polling(&mut buf, Duration::from_micros(50)).unwrap(),
            0
        );
    }
}
