//! A small blocking NBD client (fixed newstyle, `NBD_OPT_GO`, structured replies), used by
//! `wattio replay` and the tests. Requests can be pipelined: a [`Sender`] and a
//! [`Receiver`] share the connection from two threads.

use crate::proto::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

/// Where to connect: parsed from an NBD URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NbdUri {
    pub export: String,
    pub unix: Option<String>,
    pub tcp: Option<String>,
}

impl NbdUri {
    /// `nbd+unix:///EXPORT?socket=PATH` or `nbd://HOST[:PORT]/EXPORT` (port 10809 default).
    pub fn parse(uri: &str) -> Result<NbdUri, String> {
        let bad = |why: &str| format!("NBD URI {uri:?}: {why}");
        if let Some(rest) = uri.strip_prefix("nbd+unix://") {
            let (path, query) = rest
                .split_once('?')
                .ok_or_else(|| bad("missing ?socket=PATH"))?;
            let export = path.strip_prefix('/').unwrap_or(path).to_string();
            let sock = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("socket="))
                .ok_or_else(|| bad("missing socket=PATH"))?;
            if sock.is_empty() {
                return Err(bad("empty socket path"));
            }
            return Ok(NbdUri {
                export,
                unix: Some(sock.to_string()),
                tcp: None,
            });
        }
        if let Some(rest) = uri.strip_prefix("nbd://") {
            let (host, export) = rest.split_once('/').unwrap_or((rest, ""));
            if host.is_empty() {
                return Err(bad("missing host"));
            }
            let host = if host.contains(':') {
                host.to_string()
            } else {
                format!("{host}:10809")
            };
            return Ok(NbdUri {
                export: export.to_string(),
                unix: None,
                tcp: Some(host),
            });
        }
        Err(bad(
            "expected nbd://HOST[:PORT]/EXPORT or nbd+unix:///EXPORT?socket=PATH",
        ))
    }
}

enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Conn {
    fn set_timeout(&self, t: Option<std::time::Duration>) -> std::io::Result<()> {
        match self {
            Conn::Unix(s) => s.set_read_timeout(t).and_then(|_| s.set_write_timeout(t)),
            Conn::Tcp(s) => s.set_read_timeout(t).and_then(|_| s.set_write_timeout(t)),
        }
    }

    fn try_clone(&self) -> std::io::Result<Conn> {
        Ok(match self {
            Conn::Unix(s) => Conn::Unix(s.try_clone()?),
            Conn::Tcp(s) => Conn::Tcp(s.try_clone()?),
        })
    }
}

impl Read for Conn {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.read(b),
            Conn::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Unix(s) => s.write(b),
            Conn::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn rd<const N: usize>(c: &mut impl Read) -> Result<[u8; N], String> {
    let mut b = [0u8; N];
    c.read_exact(&mut b)
        .map_err(|e| format!("NBD server: {e}"))?;
    Ok(b)
}

/// One reply, reassembled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub cookie: u64,
    /// 0 on success, else the NBD error value.
    pub error: u32,
    pub data: Vec<u8>,
}

type Pending = Arc<Mutex<HashMap<u64, (u16, u64, u32)>>>;

pub struct Sender {
    conn: Conn,
    pending: Pending,
    next: u64,
    buf: Vec<u8>,
}

pub struct Receiver {
    conn: Conn,
    pending: Pending,
    structured: bool,
}

pub struct Client {
    pub size: u64,
    pub flags: u16,
    pub structured: bool,
    pub block: (u32, u32, u32),
    tx: Sender,
    rx: Receiver,
}

impl Client {
    pub fn connect(uri: &str) -> Result<Client, String> {
        Client::connect_within(uri, None)
    }

    /// [`Client::connect`], giving up when the server has not completed the handshake
    /// within `limit` (a silent peer — not an NBD server, or a hung one — is an error, not
    /// a hang). The connection has no timeout afterwards.
    pub fn connect_within(uri: &str, limit: Option<std::time::Duration>) -> Result<Client, String> {
        let u = NbdUri::parse(uri)?;
        let conn = if let Some(p) = &u.unix {
            Conn::Unix(UnixStream::connect(p).map_err(|e| format!("{p}: cannot connect: {e}"))?)
        } else {
            let a = u.tcp.clone().unwrap_or_default();
            let s = TcpStream::connect(&a).map_err(|e| format!("{a}: cannot connect: {e}"))?;
            let _ = s.set_nodelay(true);
            Conn::Tcp(s)
        };
        conn.set_timeout(limit)
            .map_err(|e| format!("cannot set the connection's timeout: {e}"))?;
        let c = Client::handshake(conn, &u.export).map_err(|e| match limit {
            Some(l) if e.contains("timed out") || e.contains("Resource temporarily") => {
                format!("no NBD handshake within {l:?} ({e})")
            }
            _ => e,
        })?;
        c.set_timeout(None)?;
        Ok(c)
    }

    fn handshake(mut c: Conn, export: &str) -> Result<Client, String> {
        let g: [u8; 18] = rd(&mut c)?;
        if g[0..8] != NBDMAGIC.to_be_bytes() || g[8..16] != IHAVEOPT.to_be_bytes() {
            return Err("not an NBD fixed-newstyle server (bad greeting)".into());
        }
        let hflags = u16::from_be_bytes([g[16], g[17]]);
        if hflags & FLAG_FIXED_NEWSTYLE == 0 {
            return Err("server does not speak fixed newstyle".into());
        }
        let mut m = Vec::new();
        let mut cf = FLAG_C_FIXED_NEWSTYLE;
        if hflags & FLAG_NO_ZEROES != 0 {
            cf |= FLAG_C_NO_ZEROES;
        }
        m.extend_from_slice(&cf.to_be_bytes());
        encode_option(&mut m, OPT_STRUCTURED_REPLY, &[]);
        encode_option(&mut m, OPT_GO, &go_data(export, &[INFO_BLOCK_SIZE]));
        c.write_all(&m).map_err(|e| format!("NBD handshake: {e}"))?;
        let mut structured = false;
        let mut size = None;
        let mut flags = 0;
        let mut block = (1, 4096, DEFAULT_MAX_BLOCK);
        loop {
            let h: [u8; 20] = rd(&mut c)?;
            let opt = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
            let ty = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
            let len = u32::from_be_bytes([h[16], h[17], h[18], h[19]]) as usize;
            if len > 1 << 20 {
                return Err(format!("option reply of {len} bytes"));
            }
            let mut d = vec![0u8; len];
            c.read_exact(&mut d)
                .map_err(|e| format!("NBD handshake: {e}"))?;
            if ty & (1 << 31) != 0 {
                if opt == OPT_STRUCTURED_REPLY {
                    continue;
                }
                return Err(format!(
                    "export {export:?}: server refused (reply {ty:#x}: {})",
                    String::from_utf8_lossy(&d)
                ));
            }
            match (opt, ty) {
                (OPT_STRUCTURED_REPLY, REP_ACK) => structured = true,
                (OPT_GO, REP_INFO) if d.len() >= 2 => {
                    let it = u16::from_be_bytes([d[0], d[1]]);
                    if it == INFO_EXPORT && d.len() >= 12 {
                        let mut s = [0u8; 8];
                        s.copy_from_slice(&d[2..10]);
                        size = Some(u64::from_be_bytes(s));
                        flags = u16::from_be_bytes([d[10], d[11]]);
                    } else if it == INFO_BLOCK_SIZE && d.len() >= 14 {
                        let u = |i: usize| u32::from_be_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
                        block = (u(2), u(6), u(10));
                    }
                }
                (OPT_GO, REP_ACK) => break,
                _ => {}
            }
        }
        let size = size.ok_or("server sent no NBD_INFO_EXPORT")?;
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let c2 = c.try_clone().map_err(|e| e.to_string())?;
        Ok(Client {
            size,
            flags,
            structured,
            block,
            tx: Sender {
                conn: c,
                pending: pending.clone(),
                next: 1,
                buf: Vec::new(),
            },
            rx: Receiver {
                conn: c2,
                pending,
                structured,
            },
        })
    }

    /// Give up on a request (an error) when the server has not taken it or answered
    /// within `t`: a component device behind a hung server must not hang its worker.
    pub fn set_timeout(&self, t: Option<std::time::Duration>) -> Result<(), String> {
        self.tx
            .conn
            .set_timeout(t)
            .and_then(|_| self.rx.conn.set_timeout(t))
            .map_err(|e| format!("cannot set the connection's timeout: {e}"))
    }

    /// Split for pipelining from two threads.
    pub fn split(self) -> (Sender, Receiver) {
        (self.tx, self.rx)
    }

    fn call(
        &mut self,
        flags: u16,
        cmd: u16,
        off: u64,
        len: u32,
        data: Option<&[u8]>,
    ) -> Result<Reply, String> {
        let cookie = self.tx.send(flags, cmd, off, len, data)?;
        let r = self.rx.recv()?;
        if r.cookie != cookie {
            return Err(format!("reply for cookie {}, expected {cookie}", r.cookie));
        }
        Ok(r)
    }

    pub fn read(&mut self, off: u64, len: u32) -> Result<Reply, String> {
        self.call(0, CMD_READ, off, len, None)
    }
    pub fn write(&mut self, off: u64, data: &[u8], fua: bool) -> Result<Reply, String> {
        let f = if fua { CMD_FLAG_FUA } else { 0 };
        self.call(f, CMD_WRITE, off, data.len() as u32, Some(data))
    }
    pub fn flush(&mut self) -> Result<Reply, String> {
        self.call(0, CMD_FLUSH, 0, 0, None)
    }
    pub fn trim(&mut self, off: u64, len: u32) -> Result<Reply, String> {
        self.call(0, CMD_TRIM, off, len, None)
    }
    pub fn write_zeroes(&mut self, off: u64, len: u32) -> Result<Reply, String> {
        self.call(0, CMD_WRITE_ZEROES, off, len, None)
    }
    /// Any request, raw (tests of error handling).
    pub fn raw(
        &mut self,
        flags: u16,
        cmd: u16,
        off: u64,
        len: u32,
        data: Option<&[u8]>,
    ) -> Result<Reply, String> {
        self.call(flags, cmd, off, len, data)
    }
    pub fn disconnect(mut self) -> Result<(), String> {
        self.tx.disconnect()
    }
}

impl Sender {
    /// The cookie the next [`Sender::send`] will use.
    pub fn next_cookie(&self) -> u64 {
        self.next
    }

    /// Send a request; returns its cookie.
    pub fn send(
        &mut self,
        flags: u16,
        cmd: u16,
        off: u64,
        len: u32,
        data: Option<&[u8]>,
    ) -> Result<u64, String> {
        let cookie = self.next;
        self.next += 1;
        if let Ok(mut p) = self.pending.lock() {
            p.insert(cookie, (cmd, off, len));
        }
        self.buf.clear();
        encode_request(&mut self.buf, flags, cmd, cookie, off, len);
        if let Some(d) = data {
            self.buf.extend_from_slice(d);
        }
        self.conn
            .write_all(&self.buf)
            .map_err(|e| format!("NBD send: {e}"))?;
        Ok(cookie)
    }

    pub fn disconnect(&mut self) -> Result<(), String> {
        self.buf.clear();
        encode_request(&mut self.buf, 0, CMD_DISC, 0, 0, 0);
        self.conn
            .write_all(&self.buf)
            .map_err(|e| format!("NBD send: {e}"))
    }
}

impl Receiver {
    /// The next complete reply (structured chunks reassembled up to the DONE chunk).
    pub fn recv(&mut self) -> Result<Reply, String> {
        let mut data = Vec::new();
        let mut error = 0;
        loop {
            let m: [u8; 4] = rd(&mut self.conn)?;
            let magic = u32::from_be_bytes(m);
            if magic == SIMPLE_REPLY_MAGIC {
                let r: [u8; 12] = rd(&mut self.conn)?;
                let err = u32::from_be_bytes([r[0], r[1], r[2], r[3]]);
                let mut cb = [0u8; 8];
                cb.copy_from_slice(&r[4..12]);
                let cookie = u64::from_be_bytes(cb);
                let (cmd, _, len) = self.take(cookie)?;
                let mut data = Vec::new();
                if cmd == CMD_READ && err == 0 {
                    data = vec![0u8; len as usize];
                    self.conn
                        .read_exact(&mut data)
                        .map_err(|e| format!("NBD recv: {e}"))?;
                }
                return Ok(Reply {
                    cookie,
                    error: err,
                    data,
                });
            }
            if magic != STRUCTURED_REPLY_MAGIC || !self.structured {
                return Err(format!("bad reply magic {magic:#x}"));
            }
            let h: [u8; 16] = rd(&mut self.conn)?;
            let flags = u16::from_be_bytes([h[0], h[1]]);
            let ty = u16::from_be_bytes([h[2], h[3]]);
            let mut cb = [0u8; 8];
            cb.copy_from_slice(&h[4..12]);
            let cookie = u64::from_be_bytes(cb);
            let len = u32::from_be_bytes([h[12], h[13], h[14], h[15]]) as usize;
            if len > DEFAULT_MAX_BLOCK as usize + 64 {
                return Err(format!("reply chunk of {len} bytes"));
            }
            let mut p = vec![0u8; len];
            self.conn
                .read_exact(&mut p)
                .map_err(|e| format!("NBD recv: {e}"))?;
            let (_, req_off, req_len) = self
                .pending
                .lock()
                .ok()
                .and_then(|g| g.get(&cookie).copied())
                .ok_or_else(|| format!("reply for unknown cookie {cookie}"))?;
            match ty {
                REPLY_TYPE_OFFSET_DATA if len >= 8 => {
                    let mut o = [0u8; 8];
                    o.copy_from_slice(&p[0..8]);
                    let at = u64::from_be_bytes(o).wrapping_sub(req_off) as usize;
                    if data.len() < req_len as usize {
                        data.resize(req_len as usize, 0);
                    }
                    let n = len - 8;
                    if at.checked_add(n).is_none_or(|e| e > data.len()) {
                        return Err("data chunk outside the request".into());
                    }
                    data[at..at + n].copy_from_slice(&p[8..]);
                }
                REPLY_TYPE_OFFSET_HOLE if len == 12 => {
                    if data.len() < req_len as usize {
                        data.resize(req_len as usize, 0);
                    }
                }
                REPLY_TYPE_NONE => {}
                t if t & 0x8000 != 0 && len >= 6 => {
                    error = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                }
                t => return Err(format!("unexpected chunk type {t}")),
            }
            if flags & REPLY_FLAG_DONE != 0 {
                self.take(cookie)?;
                return Ok(Reply {
                    cookie,
                    error,
                    data,
                });
            }
        }
    }

    fn take(&self, cookie: u64) -> Result<(u16, u64, u32), String> {
        self.pending
            .lock()
            .ok()
            .and_then(|mut g| g.remove(&cookie))
            .ok_or_else(|| format!("reply for unknown cookie {cookie}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        assert_eq!(
            NbdUri::parse("nbd+unix:///disk?socket=/tmp/s").unwrap(),
            NbdUri {
                export: "disk".into(),
                unix: Some("/tmp/s".into()),
                tcp: None
            }
        );
        assert_eq!(
            NbdUri::parse("nbd://127.0.0.1/x").unwrap().tcp.as_deref(),
            Some("127.0.0.1:10809")
        );
        assert_eq!(NbdUri::parse("nbd://127.0.0.1:9000").unwrap().export, "");
        assert!(NbdUri::parse("http://x").is_err());
        assert!(NbdUri::parse("nbd+unix:///d").is_err());
    }
}
