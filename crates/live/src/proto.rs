//! The NBD protocol (`doc/proto.md` of the NBD project), server side, sans-I/O.
//!
//! [`ServerConn`] is fed the bytes a client sends and answers with bytes to send back
//! (handshake replies) and [`Event`]s (validated transmission commands). It never touches a
//! socket or a clock, so the fuzz target drives exactly the code the server runs, and the
//! encoders here are shared with the client ([`crate::client`]).

use crate::backend::AlignedBuf;
use std::collections::VecDeque;

pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
pub const IHAVEOPT: u64 = 0x4948_4156_454F_5054;
pub const OPT_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_ROTATIONAL: u16 = 1 << 4;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_SEND_DF: u16 = 1 << 7;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

// Option replies.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
const REP_ERR: u32 = 1 << 31;
pub const REP_ERR_UNSUP: u32 = REP_ERR + 1;
pub const REP_ERR_POLICY: u32 = REP_ERR + 2;
pub const REP_ERR_INVALID: u32 = REP_ERR + 3;
pub const REP_ERR_UNKNOWN: u32 = REP_ERR + 6;
pub const REP_ERR_SHUTDOWN: u32 = REP_ERR + 7;
pub const REP_ERR_BLOCK_SIZE_REQD: u32 = REP_ERR + 8;
pub const REP_ERR_TLS_REQD: u32 = REP_ERR + 5;
pub const REP_ERR_TOO_BIG: u32 = REP_ERR + 9;

// NBD_REP_INFO items.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and command flags.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_DF: u16 = 1 << 2;

// Structured reply flags and chunk types.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_OFFSET_HOLE: u16 = 2;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;
pub const REPLY_TYPE_ERROR_OFFSET: u16 = (1 << 15) + 2;

// Error values (the protocol's restricted errno set).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// The largest option payload the server buffers; longer ones are skipped unread and
/// answered with `NBD_REP_ERR_TOO_BIG`, so a client cannot make the server allocate.
pub const MAX_OPTION_LEN: u32 = 16 * 1024;
/// Longer options are not even skipped: no option needs a mebibyte, and the spec lets a
/// server that deems a client's behaviour a denial of service hard-disconnect.
pub const MAX_OPTION_SKIP: u32 = 1024 * 1024;
/// The spec's bound below which a payload "SHOULD NOT be considered a denial of service":
/// a WRITE longer than this (and than the advertised maximum) is a hard disconnect, not a
/// payload to read and skip.
pub const DOS_PAYLOAD: u32 = 1 << 25;
/// Strings (export names, messages) are at most 4096 bytes by the spec.
pub const MAX_STRING: usize = 4096;
/// The maximum block size the server advertises (the spec's interoperable 32 MiB).
pub const DEFAULT_MAX_BLOCK: u32 = 32 * 1024 * 1024;
pub const REQUEST_HEADER_LEN: usize = 28;

/// How a connection treats `NBD_OPT_STARTTLS` (the spec's server modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TlsMode {
    /// NOTLS: STARTTLS is refused with `NBD_REP_ERR_POLICY`.
    #[default]
    Off,
    /// TLS at the client's choice on every export (SELECTIVETLS with no TLS-only export).
    Optional,
    /// FORCEDTLS: every option but STARTTLS and ABORT is refused with
    /// `NBD_REP_ERR_TLS_REQD` until TLS is up; `NBD_OPT_EXPORT_NAME` closes.
    Require,
}

/// What a client may learn about an export and what the server enforces on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportInfo {
    pub name: String,
    pub description: String,
    pub size: u64,
    pub read_only: bool,
    pub rotational: bool,
    /// Block size constraints (NBD_INFO_BLOCK_SIZE): powers of two, min ≤ preferred ≤ max.
    pub min_block: u32,
    pub preferred_block: u32,
    pub max_block: u32,
}

impl ExportInfo {
    pub fn new(name: impl Into<String>, size: u64) -> ExportInfo {
        ExportInfo {
            name: name.into(),
            description: String::new(),
            size,
            read_only: false,
            rotational: false,
            min_block: 1,
            preferred_block: 4096,
            max_block: DEFAULT_MAX_BLOCK,
        }
    }

    /// Transmission flags for this export. `CAN_MULTI_CONN` is honest: the server keeps no
    /// cache and every connection shares the same component devices, so a FLUSH or FUA on
    /// one connection covers writes acknowledged on all of them.
    pub fn transmission_flags(&self, structured: bool) -> u16 {
        let mut f = FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES
            | FLAG_CAN_MULTI_CONN;
        if self.read_only {
            f |= FLAG_READ_ONLY;
        }
        if self.rotational {
            f |= FLAG_ROTATIONAL;
        }
        if structured {
            // Reads are always answered with one content chunk, so DF costs nothing.
            f |= FLAG_SEND_DF;
        }
        f
    }
}

/// A validated transmission command, ready to execute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdKind {
    Read,
    /// The payload, in a buffer an O_DIRECT write can use as it is.
    Write(AlignedBuf),
    Flush,
    Trim,
    /// `may_trim`: NO_HOLE was not set, so the server may deallocate.
    WriteZeroes {
        may_trim: bool,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    pub cookie: u64,
    pub kind: CmdKind,
    pub fua: bool,
    pub offset: u64,
    pub len: u32,
}

impl Command {
    /// Payload bytes the server holds while carrying the command out: a write's data, or
    /// the buffer a read fills. What a server's in-flight byte budget counts.
    pub fn held_bytes(&self) -> u64 {
        match self.kind {
            CmdKind::Read | CmdKind::Write(_) => self.len as u64,
            _ => 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Option haggling is over; transmission on this export (index into the export list).
    Transmission {
        export: usize,
    },
    Command(Command),
    /// A request the protocol layer refused; the server must send this error reply.
    Reject {
        cookie: u64,
        cmd: u16,
        error: u32,
        message: String,
    },
    /// `NBD_CMD_DISC`: finish outstanding requests, then close.
    Disconnect,
    /// `NBD_OPT_STARTTLS` was acknowledged (the ACK is in the output): send it, run the TLS
    /// handshake over the connection (starting with [`ServerConn::take_unprocessed`]), and
    /// call [`ServerConn::tls_started`]. Until then the connection processes no input.
    StartTls,
    /// The session must end now (protocol violation, abort, unknown export on EXPORT_NAME).
    Close {
        reason: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    ClientFlags,
    OptionHeader,
    OptionData {
        opt: u32,
        len: u32,
    },
    /// Skipping an over-long option's data; then reply `TOO_BIG`.
    OptionSkip {
        opt: u32,
        left: u32,
    },
    RequestHeader,
    WritePayload {
        hdr: Header,
    },
    /// Skipping a refused write's payload; the reply is already queued.
    PayloadSkip {
        left: u32,
    },
    /// STARTTLS acknowledged; the bytes that follow belong to the TLS layer.
    TlsHandshake,
    Closed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub flags: u16,
    pub cmd: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

/// Parse a transmission request header (after the 4-byte magic has been checked or not).
pub fn parse_request_header(b: &[u8; REQUEST_HEADER_LEN]) -> (u32, Header) {
    let magic = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let hdr = Header {
        flags: u16::from_be_bytes([b[4], b[5]]),
        cmd: u16::from_be_bytes([b[6], b[7]]),
        cookie: be_u64(&b[8..16]),
        offset: be_u64(&b[16..24]),
        len: u32::from_be_bytes([b[24], b[25], b[26], b[27]]),
    };
    (magic, hdr)
}

fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Server side of one connection.
pub struct ServerConn {
    exports: Vec<ExportInfo>,
    state: State,
    /// Received bytes `pos..end`; the rest is room to receive into (initialised, so a
    /// reader can be handed it as a slice: see [`Self::input_space`]).
    inbuf: Vec<u8>,
    pos: usize,
    end: usize,
    out: Vec<u8>,
    events: VecDeque<Event>,
    fixed: bool,
    no_zeroes: bool,
    structured: bool,
    export: Option<usize>,
    shutting_down: bool,
    tls_mode: TlsMode,
    tls: bool,
}

impl ServerConn {
    /// A new connection: the greeting is queued in [`Self::take_output`].
    pub fn new(exports: Vec<ExportInfo>) -> ServerConn {
        ServerConn::with_tls(exports, TlsMode::Off)
    }

    /// A new connection of a server offering TLS as `mode` says.
    pub fn with_tls(exports: Vec<ExportInfo>, mode: TlsMode) -> ServerConn {
        let mut out = Vec::with_capacity(18);
        out.extend_from_slice(&NBDMAGIC.to_be_bytes());
        out.extend_from_slice(&IHAVEOPT.to_be_bytes());
        out.extend_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
        ServerConn {
            exports,
            state: State::ClientFlags,
            inbuf: Vec::new(),
            pos: 0,
            end: 0,
            out,
            events: VecDeque::new(),
            fixed: false,
            no_zeroes: false,
            structured: false,
            export: None,
            shutting_down: false,
            tls_mode: mode,
            tls: false,
        }
    }

    /// The TLS handshake that followed [`Event::StartTls`] succeeded: option haggling goes
    /// on (over TLS).
    pub fn tls_started(&mut self) {
        if self.state == State::TlsHandshake {
            self.tls = true;
            self.state = State::OptionHeader;
        }
    }

    /// Is the session running over TLS?
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Bytes received but not processed (after [`Event::StartTls`]: the start of the
    /// client's TLS handshake); drained.
    pub fn take_unprocessed(&mut self) -> Vec<u8> {
        let v = self.inbuf[self.pos..self.end].to_vec();
        self.pos = 0;
        self.end = 0;
        v
    }

    /// The input buffer's length once [`Self::input_space`]`(min)` has made room: what a
    /// server accounting memory charges before it reads.
    pub fn input_len_for(&self, min: usize) -> usize {
        self.inbuf.len().max(self.end - self.pos + min)
    }

    /// The input buffer's length now.
    pub fn input_len(&self) -> usize {
        self.inbuf.len()
    }

    /// Give back an input buffer grown past `max` (by a large write payload) once it holds
    /// nothing; true if it shrank.
    pub fn shrink_input(&mut self, max: usize) -> bool {
        if self.pos == self.end && self.inbuf.len() > max {
            self.pos = 0;
            self.end = 0;
            self.inbuf = vec![0; max];
            return true;
        }
        false
    }

    pub fn structured(&self) -> bool {
        self.structured
    }

    pub fn export(&self) -> Option<usize> {
        self.export
    }

    pub fn exports(&self) -> &[ExportInfo] {
        &self.exports
    }

    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    pub fn in_transmission(&self) -> bool {
        matches!(
            self.state,
            State::RequestHeader | State::WritePayload { .. } | State::PayloadSkip { .. }
        )
    }

    /// Is a write payload being received? (Its remaining length is [`Self::wants`].)
    pub fn receiving_payload(&self) -> bool {
        matches!(self.state, State::WritePayload { .. })
    }

    /// Refuse further options with `NBD_REP_ERR_SHUTDOWN` (server going down).
    pub fn set_shutting_down(&mut self) {
        self.shutting_down = true;
    }

    /// Bytes to send to the client (handshake replies); drained.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    pub fn next_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes the state machine needs before it can make progress (a hint for readers
    /// that want to read a write payload in one go).
    pub fn wants(&self) -> usize {
        let have = self.end - self.pos;
        let need = match self.state {
            State::ClientFlags => 4,
            State::OptionHeader => 16,
            State::OptionData { len, .. } => len as usize,
            State::OptionSkip { left, .. } => left as usize,
            State::RequestHeader => REQUEST_HEADER_LEN,
            State::WritePayload { hdr } => hdr.len as usize,
            State::PayloadSkip { left } => left as usize,
            State::TlsHandshake | State::Closed => 0,
        };
        need.saturating_sub(have).max(1)
    }

    /// Feed bytes received from the client.
    pub fn input(&mut self, data: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        let n = data.len();
        self.input_space(n)[..n].copy_from_slice(data);
        self.input_filled(n);
    }

    /// Room for at least `min` more received bytes, to read into directly: a server that
    /// receives here and then calls [`Self::input_filled`] saves copying everything it
    /// receives (write payloads above all) once more through [`Self::input`].
    pub fn input_space(&mut self, min: usize) -> &mut [u8] {
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        }
        if self.inbuf.len() - self.end < min && self.pos > 0 {
            // Move the unconsumed tail (a partial request) to the front.
            self.inbuf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.inbuf.len() - self.end < min {
            // Exact: the buffer's size is what a server's memory budget charged for.
            self.inbuf.reserve_exact(self.end + min - self.inbuf.len());
            self.inbuf.resize(self.end + min, 0);
        }
        &mut self.inbuf[self.end..]
    }

    /// `n` bytes were received into [`Self::input_space`]: process them.
    pub fn input_filled(&mut self, n: usize) {
        self.end = (self.end + n).min(self.inbuf.len());
        if self.state == State::Closed {
            return;
        }
        self.process();
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        }
    }

    fn avail(&self) -> &[u8] {
        &self.inbuf[self.pos..self.end]
    }

    fn close(&mut self, reason: impl Into<String>) {
        self.state = State::Closed;
        self.events.push_back(Event::Close {
            reason: reason.into(),
        });
    }

    fn process(&mut self) {
        loop {
            let avail = self.end - self.pos;
            match self.state {
                State::Closed | State::TlsHandshake => return,
                State::ClientFlags => {
                    if avail < 4 {
                        return;
                    }
                    let a = self.avail();
                    let flags = u32::from_be_bytes([a[0], a[1], a[2], a[3]]);
                    self.pos += 4;
                    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
                        self.close(format!("client flags {flags:#x}: unknown bits set"));
                        return;
                    }
                    self.fixed = flags & FLAG_C_FIXED_NEWSTYLE != 0;
                    self.no_zeroes = flags & FLAG_C_NO_ZEROES != 0;
                    self.state = State::OptionHeader;
                }
                State::OptionHeader => {
                    if avail < 16 {
                        return;
                    }
                    let a = self.avail();
                    let magic = be_u64(&a[0..8]);
                    let opt = u32::from_be_bytes([a[8], a[9], a[10], a[11]]);
                    let len = u32::from_be_bytes([a[12], a[13], a[14], a[15]]);
                    self.pos += 16;
                    if magic != IHAVEOPT {
                        self.close(format!(
                            "option header: magic {magic:#x}, expected IHAVEOPT {IHAVEOPT:#x}"
                        ));
                        return;
                    }
                    if len > MAX_OPTION_SKIP {
                        self.close(format!(
                            "option {opt} of {len} bytes (at most {MAX_OPTION_SKIP} accepted, {MAX_OPTION_LEN} read)"
                        ));
                        return;
                    }
                    if len > MAX_OPTION_LEN {
                        if opt == OPT_EXPORT_NAME {
                            self.close(format!(
                                "NBD_OPT_EXPORT_NAME of {len} bytes (names are at most {MAX_STRING})"
                            ));
                            return;
                        }
                        self.state = State::OptionSkip { opt, left: len };
                    } else {
                        self.state = State::OptionData { opt, len };
                    }
                }
                State::OptionSkip { opt, left } => {
                    let n = avail.min(left as usize);
                    self.pos += n;
                    let left = left - n as u32;
                    if left > 0 {
                        self.state = State::OptionSkip { opt, left };
                        return;
                    }
                    self.state = State::OptionHeader;
                    self.opt_reply(opt, REP_ERR_TOO_BIG, b"option data too long");
                }
                State::OptionData { opt, len } => {
                    if avail < len as usize {
                        return;
                    }
                    let data = self.inbuf[self.pos..self.pos + len as usize].to_vec();
                    self.pos += len as usize;
                    self.state = State::OptionHeader;
                    self.option(opt, &data);
                }
                State::RequestHeader => {
                    if avail < REQUEST_HEADER_LEN {
                        return;
                    }
                    let mut b = [0u8; REQUEST_HEADER_LEN];
                    b.copy_from_slice(&self.inbuf[self.pos..self.pos + REQUEST_HEADER_LEN]);
                    self.pos += REQUEST_HEADER_LEN;
                    self.request(&b);
                }
                State::WritePayload { hdr } => {
                    let n = hdr.len as usize;
                    if avail < n {
                        return;
                    }
                    let data = AlignedBuf::from_slice(&self.inbuf[self.pos..self.pos + n]);
                    self.pos += n;
                    self.state = State::RequestHeader;
                    self.events.push_back(Event::Command(Command {
                        cookie: hdr.cookie,
                        kind: CmdKind::Write(data),
                        fua: hdr.flags & CMD_FLAG_FUA != 0,
                        offset: hdr.offset,
                        len: hdr.len,
                    }));
                }
                State::PayloadSkip { left } => {
                    let n = avail.min(left as usize);
                    self.pos += n;
                    let left = left - n as u32;
                    if left > 0 {
                        self.state = State::PayloadSkip { left };
                        return;
                    }
                    self.state = State::RequestHeader;
                }
            }
        }
    }

    fn opt_reply(&mut self, opt: u32, rep: u32, data: &[u8]) {
        encode_option_reply(&mut self.out, opt, rep, data);
    }

    fn option(&mut self, opt: u32, data: &[u8]) {
        let tls_required = self.tls_mode == TlsMode::Require && !self.tls;
        if opt == OPT_EXPORT_NAME {
            if tls_required {
                // This option cannot be answered with an error: the spec says close.
                self.close("NBD_OPT_EXPORT_NAME before TLS on a server that requires TLS");
                return;
            }
            let Ok(name) = std::str::from_utf8(data) else {
                self.close("NBD_OPT_EXPORT_NAME: export name is not UTF-8");
                return;
            };
            let Some(i) = self.find_export(name) else {
                self.close(format!("NBD_OPT_EXPORT_NAME: no export named {name:?}"));
                return;
            };
            let e = &self.exports[i];
            let flags = e.transmission_flags(self.structured);
            self.out.extend_from_slice(&e.size.to_be_bytes());
            self.out.extend_from_slice(&flags.to_be_bytes());
            if !self.no_zeroes {
                self.out.extend_from_slice(&[0u8; 124]);
            }
            self.enter_transmission(i);
            return;
        }
        if !self.fixed {
            // Non-fixed newstyle knows no other option and cannot be answered with an error.
            self.close(format!(
                "option {opt} without NBD_FLAG_C_FIXED_NEWSTYLE (only EXPORT_NAME is valid)"
            ));
            return;
        }
        if opt == OPT_ABORT {
            self.opt_reply(opt, REP_ACK, &[]);
            self.close("client sent NBD_OPT_ABORT");
            return;
        }
        if self.shutting_down {
            self.opt_reply(opt, REP_ERR_SHUTDOWN, b"server shutting down");
            return;
        }
        if opt == OPT_STARTTLS {
            self.starttls(data);
            return;
        }
        if tls_required {
            self.opt_reply(
                opt,
                REP_ERR_TLS_REQD,
                b"this server requires TLS: send NBD_OPT_STARTTLS first",
            );
            return;
        }
        match opt {
            OPT_LIST => {
                if !data.is_empty() {
                    self.opt_reply(opt, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data");
                    return;
                }
                for i in 0..self.exports.len() {
                    let e = &self.exports[i];
                    let mut d = Vec::with_capacity(4 + e.name.len() + e.description.len());
                    d.extend_from_slice(&(e.name.len() as u32).to_be_bytes());
                    d.extend_from_slice(e.name.as_bytes());
                    d.extend_from_slice(e.description.as_bytes());
                    encode_option_reply(&mut self.out, opt, REP_SERVER, &d);
                }
                self.opt_reply(opt, REP_ACK, &[]);
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    self.opt_reply(
                        opt,
                        REP_ERR_INVALID,
                        b"NBD_OPT_STRUCTURED_REPLY takes no data",
                    );
                    return;
                }
                self.structured = true;
                self.opt_reply(opt, REP_ACK, &[]);
            }
            OPT_INFO | OPT_GO => self.info_go(opt, data),
            _ => self.opt_reply(opt, REP_ERR_UNSUP, b"option not supported"),
        }
    }

    fn starttls(&mut self, data: &[u8]) {
        let opt = OPT_STARTTLS;
        if self.tls_mode == TlsMode::Off {
            self.opt_reply(opt, REP_ERR_POLICY, b"TLS is not enabled on this server");
        } else if self.tls {
            self.opt_reply(opt, REP_ERR_INVALID, b"TLS is already negotiated");
        } else if !data.is_empty() {
            self.opt_reply(opt, REP_ERR_INVALID, b"NBD_OPT_STARTTLS takes no data");
        } else {
            self.opt_reply(opt, REP_ACK, &[]);
            // Options negotiated in the clear do not carry over (the spec's downgrade
            // protection: structured replies must be asked for again over TLS).
            self.structured = false;
            self.state = State::TlsHandshake;
            self.events.push_back(Event::StartTls);
        }
    }

    fn find_export(&self, name: &str) -> Option<usize> {
        if name.is_empty() {
            // The empty name is the default export: the first one.
            return if self.exports.is_empty() {
                None
            } else {
                Some(0)
            };
        }
        self.exports.iter().position(|e| e.name == name)
    }

    fn info_go(&mut self, opt: u32, data: &[u8]) {
        let what = if opt == OPT_GO {
            "NBD_OPT_GO"
        } else {
            "NBD_OPT_INFO"
        };
        let parsed = (|| {
            let nl = u32::from_be_bytes(data.get(0..4)?.try_into().ok()?) as usize;
            let name = data.get(4..4usize.checked_add(nl)?)?;
            let rest = data.get(4 + nl..)?;
            let n = u16::from_be_bytes(rest.get(0..2)?.try_into().ok()?) as usize;
            let reqs = rest.get(2..)?;
            if reqs.len() != 2 * n {
                return None;
            }
            let items: Vec<u16> = reqs
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            Some((name.to_vec(), items))
        })();
        let Some((name, items)) = parsed else {
            let msg = format!("{what}: malformed data (name length, name, count, requests)");
            self.opt_reply(opt, REP_ERR_INVALID, msg.as_bytes());
            return;
        };
        let Ok(name) = String::from_utf8(name) else {
            self.opt_reply(opt, REP_ERR_INVALID, b"export name is not UTF-8");
            return;
        };
        let Some(i) = self.find_export(&name) else {
            let msg = format!("no export named {name:?}");
            self.opt_reply(opt, REP_ERR_UNKNOWN, msg.as_bytes());
            return;
        };
        let e = self.exports[i].clone();
        if opt == OPT_GO && e.min_block > 1 && !items.contains(&INFO_BLOCK_SIZE) {
            // The export enforces alignment beyond the spec's default minimum of 1: a client
            // that did not ask for the constraints would trip over them.
            self.opt_reply(
                opt,
                REP_ERR_BLOCK_SIZE_REQD,
                b"export requires block size negotiation",
            );
            return;
        }
        let mut d = Vec::with_capacity(12);
        d.extend_from_slice(&INFO_EXPORT.to_be_bytes());
        d.extend_from_slice(&e.size.to_be_bytes());
        d.extend_from_slice(&e.transmission_flags(self.structured).to_be_bytes());
        encode_option_reply(&mut self.out, opt, REP_INFO, &d);
        if items.contains(&INFO_NAME) {
            let mut d = INFO_NAME.to_be_bytes().to_vec();
            d.extend_from_slice(e.name.as_bytes());
            encode_option_reply(&mut self.out, opt, REP_INFO, &d);
        }
        if items.contains(&INFO_DESCRIPTION) && !e.description.is_empty() {
            let mut d = INFO_DESCRIPTION.to_be_bytes().to_vec();
            d.extend_from_slice(e.description.as_bytes());
            encode_option_reply(&mut self.out, opt, REP_INFO, &d);
        }
        let mut d = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
        d.extend_from_slice(&e.min_block.to_be_bytes());
        d.extend_from_slice(&e.preferred_block.to_be_bytes());
        d.extend_from_slice(&e.max_block.to_be_bytes());
        encode_option_reply(&mut self.out, opt, REP_INFO, &d);
        self.opt_reply(opt, REP_ACK, &[]);
        if opt == OPT_GO {
            self.enter_transmission(i);
        }
    }

    fn enter_transmission(&mut self, i: usize) {
        self.export = Some(i);
        self.state = State::RequestHeader;
        self.events.push_back(Event::Transmission { export: i });
    }

    fn reject(&mut self, hdr: &Header, error: u32, message: String) {
        self.events.push_back(Event::Reject {
            cookie: hdr.cookie,
            cmd: hdr.cmd,
            error,
            message,
        });
    }

    fn request(&mut self, b: &[u8; REQUEST_HEADER_LEN]) {
        let (magic, hdr) = parse_request_header(b);
        if magic != REQUEST_MAGIC {
            self.close(format!(
                "request magic {magic:#x}, expected {REQUEST_MAGIC:#x}"
            ));
            return;
        }
        let Some(e) = self.export.and_then(|i| self.exports.get(i)) else {
            self.close("request before an export was chosen");
            return;
        };
        if hdr.cmd == CMD_WRITE && hdr.len > e.max_block.max(DOS_PAYLOAD) {
            // Reading (or skipping) gigabytes the client has no right to send would hand it
            // the server's time: the spec allows a hard disconnect past 2^25.
            let (len, max) = (hdr.len, e.max_block);
            self.close(format!(
                "NBD_CMD_WRITE of {len} bytes (maximum payload {max}): disconnecting"
            ));
            return;
        }
        let check = validate(e, self.structured, &hdr);
        match check {
            Ok(kind) => match kind {
                Valid::Payload => self.state = State::WritePayload { hdr },
                Valid::Disc => {
                    self.state = State::Closed;
                    self.events.push_back(Event::Disconnect);
                }
                Valid::Command(kind) => self.events.push_back(Event::Command(Command {
                    cookie: hdr.cookie,
                    kind,
                    fua: hdr.flags & CMD_FLAG_FUA != 0,
                    offset: hdr.offset,
                    len: hdr.len,
                })),
            },
            Err((error, message)) => {
                // A refused write still carries its payload: skip it to stay in sync.
                if hdr.cmd == CMD_WRITE && hdr.len > 0 {
                    self.state = State::PayloadSkip { left: hdr.len };
                }
                self.reject(&hdr, error, message);
            }
        }
    }
}

enum Valid {
    Payload,
    Disc,
    Command(CmdKind),
}

/// Check a request against the export and the negotiated options: the error the spec
/// prescribes, or what to do next.
fn validate(e: &ExportInfo, structured: bool, h: &Header) -> Result<Valid, (u32, String)> {
    let allowed = match h.cmd {
        CMD_READ if structured => CMD_FLAG_FUA | CMD_FLAG_DF,
        CMD_WRITE_ZEROES => CMD_FLAG_FUA | CMD_FLAG_NO_HOLE,
        CMD_READ | CMD_WRITE | CMD_FLUSH | CMD_TRIM | CMD_DISC => CMD_FLAG_FUA,
        other => return Err((EINVAL, format!("unknown or unsupported command {other}"))),
    };
    if h.flags & !allowed != 0 {
        return Err((
            EINVAL,
            format!(
                "command flags {:#x} not valid for command {}",
                h.flags, h.cmd
            ),
        ));
    }
    match h.cmd {
        CMD_DISC => return Ok(Valid::Disc),
        CMD_FLUSH => {
            if h.offset != 0 || h.len != 0 {
                return Err((EINVAL, "NBD_CMD_FLUSH with nonzero offset or length".into()));
            }
            return Ok(Valid::Command(CmdKind::Flush));
        }
        _ => {}
    }
    let writes = h.cmd != CMD_READ;
    if writes && e.read_only {
        return Err((EPERM, "export is read-only".into()));
    }
    if h.len == 0 {
        return Err((EINVAL, "zero-length request".into()));
    }
    let end = h.offset.checked_add(h.len as u64);
    if end.is_none_or(|end| end > e.size) {
        let err = if matches!(h.cmd, CMD_WRITE | CMD_WRITE_ZEROES) {
            ENOSPC
        } else {
            EINVAL
        };
        return Err((
            err,
            format!(
                "request [{}, +{}) beyond the export size {}",
                h.offset, h.len, e.size
            ),
        ));
    }
    let min = e.min_block.max(1) as u64;
    if !h.offset.is_multiple_of(min) || !(h.len as u64).is_multiple_of(min) {
        return Err((
            EINVAL,
            format!(
                "request [{}, +{}) not aligned to the minimum block size {min}",
                h.offset, h.len
            ),
        ));
    }
    if matches!(h.cmd, CMD_READ | CMD_WRITE) && h.len > e.max_block {
        return Err((
            EINVAL,
            format!(
                "request of {} bytes exceeds the maximum block size {}",
                h.len, e.max_block
            ),
        ));
    }
    Ok(match h.cmd {
        CMD_READ => Valid::Command(CmdKind::Read),
        CMD_WRITE => Valid::Payload,
        CMD_TRIM => Valid::Command(CmdKind::Trim),
        _ => Valid::Command(CmdKind::WriteZeroes {
            may_trim: h.flags & CMD_FLAG_NO_HOLE == 0,
        }),
    })
}

pub fn encode_option_reply(out: &mut Vec<u8>, opt: u32, rep: u32, data: &[u8]) {
    out.extend_from_slice(&OPT_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&opt.to_be_bytes());
    out.extend_from_slice(&rep.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// Simple reply header (the data of a successful read follows it).
pub fn encode_simple_reply(out: &mut Vec<u8>, cookie: u64, error: u32) {
    out.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
}

pub fn encode_chunk_header(out: &mut Vec<u8>, flags: u16, ty: u16, cookie: u64, len: u32) {
    out.extend_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&ty.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

/// Header of a final `OFFSET_DATA` chunk carrying `len` bytes read at `offset` (the data
/// follows). Reads fit in one chunk: the maximum block size is far below 2^32 − 8.
pub fn encode_read_chunk_header(out: &mut Vec<u8>, cookie: u64, offset: u64, len: u32) {
    encode_chunk_header(
        out,
        REPLY_FLAG_DONE,
        REPLY_TYPE_OFFSET_DATA,
        cookie,
        len.saturating_add(8),
    );
    out.extend_from_slice(&offset.to_be_bytes());
}

/// A complete error reply in the negotiated form (structured replies carry the message).
pub fn encode_error_reply(
    out: &mut Vec<u8>,
    structured: bool,
    cookie: u64,
    error: u32,
    message: &str,
) {
    if structured {
        let mut m = message.as_bytes();
        if m.len() > MAX_STRING {
            m = &m[..MAX_STRING];
        }
        encode_chunk_header(
            out,
            REPLY_FLAG_DONE,
            REPLY_TYPE_ERROR,
            cookie,
            6 + m.len() as u32,
        );
        out.extend_from_slice(&error.to_be_bytes());
        out.extend_from_slice(&(m.len() as u16).to_be_bytes());
        out.extend_from_slice(m);
    } else {
        encode_simple_reply(out, cookie, error);
    }
}

pub fn encode_request(out: &mut Vec<u8>, flags: u16, cmd: u16, cookie: u64, offset: u64, len: u32) {
    out.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(&cmd.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
}

pub fn encode_option(out: &mut Vec<u8>, opt: u32, data: &[u8]) {
    out.extend_from_slice(&IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&opt.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
}

/// Data of an `NBD_OPT_GO` / `NBD_OPT_INFO` for `name`, asking for `items`.
pub fn go_data(name: &str, items: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&(name.len() as u32).to_be_bytes());
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(items.len() as u16).to_be_bytes());
    for i in items {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

/// Fuzz and corpus entry point: feed `data` in irregular pieces (so every split point of
/// the state machine's buffering is exercised) and drain events; must never panic. The same
/// bytes also go, in other pieces, through `input_space`/`input_filled` (how the server
/// receives), which must give the same events and output.
pub fn fuzz_server(data: &[u8]) -> usize {
    let new_conn = || {
        let mut e2 = ExportInfo::new("aligned", 1 << 20);
        e2.min_block = 512;
        e2.read_only = true;
        ServerConn::new(vec![ExportInfo::new("disk", 1 << 20), e2])
    };
    let drain = |conn: &mut ServerConn, log: &mut Vec<Event>, out: &mut Vec<u8>| {
        while let Some(ev) = conn.next_event() {
            if let Event::Command(c) = &ev {
                if let CmdKind::Write(d) = &c.kind {
                    assert_eq!(d.len(), c.len as usize);
                }
            }
            log.push(ev);
        }
        out.extend(conn.take_output());
        let _ = conn.wants();
    };
    let (mut a, mut b) = (new_conn(), new_conn());
    let (mut ev_a, mut ev_b, mut out_a, mut out_b) = (vec![], vec![], vec![], vec![]);
    let mut i = 0;
    let mut step = 1;
    while i < data.len() {
        let n = step.min(data.len() - i);
        a.input(&data[i..i + n]);
        i += n;
        step = step % 37 + 1 + (data[i - 1] as usize % 5);
        drain(&mut a, &mut ev_a, &mut out_a);
    }
    let mut i = 0;
    while i < data.len() {
        // Room offered varies; the piece received is at most the room.
        let room = 1 + (data[i] as usize * 7) % 61;
        let n = (room - (data[i] as usize % room)).min(data.len() - i);
        let space = b.input_space(room);
        assert!(space.len() >= room);
        space[..n].copy_from_slice(&data[i..i + n]);
        b.input_filled(n);
        i += n;
        drain(&mut b, &mut ev_b, &mut out_b);
    }
    // A server requiring TLS, with the TLS layer taken as transparent: every path of the
    // STARTTLS state machine, fed the same bytes.
    let mut c = ServerConn::with_tls(new_conn().exports, TlsMode::Require);
    for piece in data.chunks(29) {
        c.input(piece);
        while let Some(ev) = c.next_event() {
            if ev == Event::StartTls {
                c.tls_started();
                let rest = c.take_unprocessed();
                c.input(&rest);
            }
        }
        c.take_output();
    }
    assert_eq!(ev_a, ev_b, "input and input_space/input_filled disagree");
    assert_eq!(
        out_a, out_b,
        "input and input_space/input_filled disagree on output"
    );
    ev_a.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handshake(conn: &mut ServerConn, structured: bool, name: &str, items: &[u16]) -> Vec<u8> {
        let greet = conn.take_output();
        assert_eq!(greet.len(), 18);
        assert_eq!(&greet[0..8], b"NBDMAGIC");
        assert_eq!(&greet[8..16], b"IHAVEOPT");
        assert_eq!(u16::from_be_bytes([greet[16], greet[17]]), 3);
        let mut msg = (FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES)
            .to_be_bytes()
            .to_vec();
        if structured {
            encode_option(&mut msg, OPT_STRUCTURED_REPLY, &[]);
        }
        encode_option(&mut msg, OPT_GO, &go_data(name, items));
        conn.input(&msg);
        conn.take_output()
    }

    /// Split option replies: (opt, type, data).
    fn replies(mut b: &[u8]) -> Vec<(u32, u32, Vec<u8>)> {
        let mut v = Vec::new();
        while !b.is_empty() {
            assert_eq!(be_u64(&b[0..8]), OPT_REPLY_MAGIC);
            let opt = u32::from_be_bytes(b[8..12].try_into().unwrap());
            let ty = u32::from_be_bytes(b[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(b[16..20].try_into().unwrap()) as usize;
            v.push((opt, ty, b[20..20 + len].to_vec()));
            b = &b[20 + len..];
        }
        v
    }

    #[test]
    fn go_reports_size_flags_and_block_size() {
        let mut c = ServerConn::new(vec![ExportInfo::new("disk", 1 << 30)]);
        let out = handshake(&mut c, true, "disk", &[INFO_BLOCK_SIZE]);
        let r = replies(&out);
        assert_eq!(r[0], (OPT_STRUCTURED_REPLY, REP_ACK, vec![]));
        assert_eq!(r[1].1, REP_INFO);
        let d = &r[1].2;
        assert_eq!(u16::from_be_bytes([d[0], d[1]]), INFO_EXPORT);
        assert_eq!(be_u64(&d[2..10]), 1 << 30);
        // HAS_FLAGS|FLUSH|FUA|TRIM|WRITE_ZEROES|DF|MULTI_CONN = 1+4+8+32+64+128+256
        assert_eq!(u16::from_be_bytes([d[10], d[11]]), 493);
        let bs = &r[2].2;
        assert_eq!(u16::from_be_bytes([bs[0], bs[1]]), INFO_BLOCK_SIZE);
        assert_eq!(u32::from_be_bytes(bs[2..6].try_into().unwrap()), 1);
        assert_eq!(u32::from_be_bytes(bs[6..10].try_into().unwrap()), 4096);
        assert_eq!(u32::from_be_bytes(bs[10..14].try_into().unwrap()), 32 << 20);
        assert_eq!(r[3], (OPT_GO, REP_ACK, vec![]));
        assert_eq!(c.next_event(), Some(Event::Transmission { export: 0 }));
        assert!(c.structured());
    }

    #[test]
    fn unknown_export_and_bad_options_get_errors_not_hangups() {
        let mut c = ServerConn::new(vec![ExportInfo::new("disk", 4096)]);
        c.take_output();
        let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        encode_option(&mut m, OPT_GO, &go_data("nope", &[]));
        encode_option(&mut m, OPT_LIST, b"x");
        encode_option(&mut m, 99, b"abc");
        encode_option(&mut m, OPT_GO, &[0, 0, 0, 9, b'a']);
        encode_option(&mut m, OPT_STARTTLS, &[]);
        encode_option(&mut m, OPT_LIST, &[]);
        c.input(&m);
        let r = replies(&c.take_output());
        let types: Vec<u32> = r.iter().map(|x| x.1).collect();
        assert_eq!(
            types,
            vec![
                REP_ERR_UNKNOWN,
                REP_ERR_INVALID,
                REP_ERR_UNSUP,
                REP_ERR_INVALID,
                REP_ERR_POLICY,
                REP_SERVER,
                REP_ACK
            ]
        );
        assert_eq!(r[5].2, [&[0, 0, 0, 4][..], b"disk"].concat());
        assert!(!c.is_closed());
        assert_eq!(c.next_event(), None);
    }

    #[test]
    fn oversized_option_is_skipped_and_answered_too_big() {
        let mut c = ServerConn::new(vec![ExportInfo::new("disk", 4096)]);
        c.take_output();
        let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        encode_option(&mut m, 42, &vec![7u8; MAX_OPTION_LEN as usize + 1]);
        encode_option(&mut m, OPT_ABORT, &[]);
        for ch in m.chunks(1000) {
            c.input(ch);
        }
        let r = replies(&c.take_output());
        assert_eq!(r[0].1, REP_ERR_TOO_BIG);
        assert_eq!(r[1], (OPT_ABORT, REP_ACK, vec![]));
        assert!(matches!(c.next_event(), Some(Event::Close { .. })));
    }

    #[test]
    fn four_gigabyte_option_or_write_header_closes_at_once() {
        // The option header alone, no data: the connection closes without waiting for it.
        let mut c = ServerConn::new(vec![ExportInfo::new("disk", 4096)]);
        c.take_output();
        let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        m.extend_from_slice(&IHAVEOPT.to_be_bytes());
        m.extend_from_slice(&42u32.to_be_bytes());
        m.extend_from_slice(&u32::MAX.to_be_bytes());
        c.input(&m);
        assert!(matches!(c.next_event(), Some(Event::Close { .. })));
        assert!(c.is_closed());
        // Just past the skip bound closes too; at the bound it is skipped (TOO_BIG).
        let mut c = ServerConn::new(vec![ExportInfo::new("disk", 4096)]);
        c.take_output();
        let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        m.extend_from_slice(&IHAVEOPT.to_be_bytes());
        m.extend_from_slice(&42u32.to_be_bytes());
        m.extend_from_slice(&(MAX_OPTION_SKIP + 1).to_be_bytes());
        c.input(&m);
        assert!(c.is_closed());
        // A WRITE header of 4 GiB − 1 (and of 2^25 + 1) with no payload: closed at once, the
        // payload neither awaited nor skipped.
        for len in [u32::MAX, DOS_PAYLOAD + 1] {
            let mut c = ready(1, false);
            let mut m = Vec::new();
            encode_request(&mut m, 0, CMD_WRITE, 77, 0, len);
            c.input(&m);
            assert!(matches!(c.next_event(), Some(Event::Close { .. })), "{len}");
            assert!(c.is_closed());
        }
        // 2^25 exactly on an export advertising 1 MiB: refused, its payload skipped.
        let mut e = ExportInfo::new("d", 1 << 30);
        e.max_block = 1 << 20;
        let mut c = ServerConn::new(vec![e]);
        handshake(&mut c, false, "d", &[INFO_BLOCK_SIZE]);
        assert_eq!(c.next_event(), Some(Event::Transmission { export: 0 }));
        assert_eq!(rejected(req(&mut c, 0, CMD_WRITE, 0, DOS_PAYLOAD)), EINVAL);
        assert_eq!(c.wants(), DOS_PAYLOAD as usize);
    }

    #[test]
    fn starttls_modes_follow_the_spec() {
        let opts = |mode: TlsMode, msg: &[u8]| {
            let mut c = ServerConn::with_tls(vec![ExportInfo::new("disk", 4096)], mode);
            c.take_output();
            let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
            m.extend_from_slice(msg);
            c.input(&m);
            c
        };
        let mut list = Vec::new();
        encode_option(&mut list, OPT_LIST, &[]);
        let mut tls = Vec::new();
        encode_option(&mut tls, OPT_STARTTLS, &[]);
        // NOTLS: POLICY, and the session goes on in the clear.
        let mut c = opts(TlsMode::Off, &[tls.clone(), list.clone()].concat());
        let r = replies(&c.take_output());
        assert_eq!((r[0].0, r[0].1), (OPT_STARTTLS, REP_ERR_POLICY));
        assert_eq!(r[1].1, REP_SERVER);
        // FORCEDTLS: options before STARTTLS get TLS_REQD; GO too; EXPORT_NAME closes.
        let mut go = Vec::new();
        encode_option(&mut go, OPT_GO, &go_data("disk", &[]));
        let mut c = opts(TlsMode::Require, &[list.clone(), go.clone()].concat());
        let types: Vec<u32> = replies(&c.take_output()).iter().map(|x| x.1).collect();
        assert_eq!(types, vec![REP_ERR_TLS_REQD, REP_ERR_TLS_REQD]);
        assert_eq!(c.next_event(), None);
        let mut name = Vec::new();
        encode_option(&mut name, OPT_EXPORT_NAME, b"disk");
        let mut c = opts(TlsMode::Require, &name);
        assert!(matches!(c.next_event(), Some(Event::Close { .. })));
        // STARTTLS: ACK, then the bytes after it are the TLS layer's, unprocessed.
        let hello = b"\x16\x03\x01 not an option";
        let mut c = opts(TlsMode::Require, &[&tls[..], hello].concat());
        assert_eq!(
            replies(&c.take_output()),
            vec![(OPT_STARTTLS, REP_ACK, vec![])]
        );
        assert_eq!(c.next_event(), Some(Event::StartTls));
        assert_eq!(c.take_unprocessed(), hello.to_vec());
        c.tls_started();
        assert!(c.tls());
        // Over TLS: GO succeeds, a second STARTTLS is INVALID.
        c.input(&[tls.clone(), go.clone()].concat());
        let r = replies(&c.take_output());
        assert_eq!((r[0].0, r[0].1), (OPT_STARTTLS, REP_ERR_INVALID));
        assert_eq!(r.last().unwrap().1, REP_ACK);
        assert_eq!(c.next_event(), Some(Event::Transmission { export: 0 }));
    }

    #[test]
    fn export_name_without_no_zeroes_sends_124_zero_bytes() {
        let mut c = ServerConn::new(vec![ExportInfo::new("a", 512), ExportInfo::new("b", 1024)]);
        c.take_output();
        let mut m = FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        encode_option(&mut m, OPT_EXPORT_NAME, b"b");
        c.input(&m);
        let out = c.take_output();
        assert_eq!(out.len(), 8 + 2 + 124);
        assert_eq!(be_u64(&out[0..8]), 1024);
        assert_eq!(c.next_event(), Some(Event::Transmission { export: 1 }));
    }

    #[test]
    fn unknown_client_flags_close() {
        let mut c = ServerConn::new(vec![ExportInfo::new("a", 512)]);
        c.input(&[0, 0, 0, 4]);
        assert!(matches!(c.next_event(), Some(Event::Close { .. })));
        assert!(c.is_closed());
    }

    fn ready(min_block: u32, read_only: bool) -> ServerConn {
        let mut e = ExportInfo::new("d", 1 << 20);
        e.min_block = min_block;
        e.read_only = read_only;
        let mut c = ServerConn::new(vec![e]);
        handshake(&mut c, false, "d", &[INFO_BLOCK_SIZE]);
        assert_eq!(c.next_event(), Some(Event::Transmission { export: 0 }));
        c
    }

    fn req(c: &mut ServerConn, flags: u16, cmd: u16, off: u64, len: u32) -> Option<Event> {
        let mut m = Vec::new();
        encode_request(&mut m, flags, cmd, 77, off, len);
        c.input(&m);
        c.next_event()
    }

    fn rejected(e: Option<Event>) -> u32 {
        match e {
            Some(Event::Reject { error, cookie, .. }) => {
                assert_eq!(cookie, 77);
                error
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    #[test]
    fn out_of_range_misaligned_oversized_and_bad_flags_get_the_spec_errors() {
        let mut c = ready(512, false);
        assert_eq!(
            rejected(req(&mut c, 0, CMD_READ, (1 << 20) - 512, 1024)),
            EINVAL
        );
        assert_eq!(
            rejected(req(&mut c, 0, CMD_READ, u64::MAX - 10, 512)),
            EINVAL
        );
        assert_eq!(rejected(req(&mut c, 0, CMD_TRIM, 1 << 20, 512)), EINVAL);
        assert_eq!(
            rejected(req(&mut c, 0, CMD_WRITE_ZEROES, 1 << 20, 512)),
            ENOSPC
        );
        assert_eq!(rejected(req(&mut c, 0, CMD_READ, 100, 512)), EINVAL);
        assert_eq!(rejected(req(&mut c, 0, CMD_READ, 0, 0)), EINVAL);
        assert_eq!(rejected(req(&mut c, CMD_FLAG_DF, CMD_READ, 0, 512)), EINVAL);
        assert_eq!(rejected(req(&mut c, 0, CMD_FLUSH, 0, 512)), EINVAL);
        assert_eq!(rejected(req(&mut c, 0, 5, 0, 512)), EINVAL);
        assert_eq!(rejected(req(&mut c, 1 << 9, CMD_READ, 0, 512)), EINVAL);
        // A refused write's payload is skipped: the next request parses normally.
        let mut m = Vec::new();
        encode_request(&mut m, 0, CMD_WRITE, 77, (1 << 20) - 512, 1024);
        m.extend_from_slice(&[0xAB; 1024]);
        encode_request(&mut m, CMD_FLAG_FUA, CMD_WRITE, 78, 512, 512);
        m.extend_from_slice(&[0xCD; 512]);
        c.input(&m);
        assert_eq!(rejected(c.next_event()), ENOSPC);
        match c.next_event() {
            Some(Event::Command(cmd)) => {
                assert_eq!(cmd.cookie, 78);
                assert!(cmd.fua);
                assert_eq!(
                    cmd.kind,
                    CmdKind::Write(AlignedBuf::from_slice(&[0xCD; 512]))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            req(&mut c, 0, CMD_DISC, 0, 0),
            Some(Event::Disconnect)
        ));
    }

    #[test]
    fn read_only_export_refuses_writes_with_eperm() {
        let mut c = ready(1, true);
        assert_eq!(rejected(req(&mut c, 0, CMD_TRIM, 0, 512)), EPERM);
        assert!(matches!(
            req(&mut c, 0, CMD_READ, 0, 3),
            Some(Event::Command(Command {
                kind: CmdKind::Read,
                len: 3,
                ..
            }))
        ));
    }

    #[test]
    fn go_without_block_size_on_aligned_export_is_block_size_reqd() {
        let mut e = ExportInfo::new("d", 4096);
        e.min_block = 512;
        let mut c = ServerConn::new(vec![e]);
        let r = replies(&handshake(&mut c, false, "d", &[]));
        assert_eq!(r[0].1, REP_ERR_BLOCK_SIZE_REQD);
        assert_eq!(c.next_event(), None);
    }

    #[test]
    fn bad_request_magic_closes() {
        let mut c = ready(1, false);
        c.input(&[0u8; 28]);
        assert!(matches!(c.next_event(), Some(Event::Close { .. })));
    }

    #[test]
    fn error_reply_encodings() {
        let mut v = Vec::new();
        encode_error_reply(&mut v, false, 9, EIO, "x");
        assert_eq!(
            v,
            [
                &0x67446698u32.to_be_bytes()[..],
                &5u32.to_be_bytes(),
                &9u64.to_be_bytes()
            ]
            .concat()
        );
        v.clear();
        encode_error_reply(&mut v, true, 9, EIO, "bad");
        assert_eq!(v.len(), 20 + 6 + 3);
        assert_eq!(u16::from_be_bytes([v[6], v[7]]), 0x8001);
        assert_eq!(u32::from_be_bytes(v[16..20].try_into().unwrap()), 9);
    }
}
