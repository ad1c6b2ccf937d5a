//! Shared by the integration tests: a server on an ephemeral port inside its own tokio
//! runtime, a tiny blocking RESP2/RESP3 client over `std::net::TcpStream` that sends raw
//! bytes and reads one reply frame at a time, and a Hot Rod one in [`hotrod`].

#![allow(dead_code, clippy::unwrap_used, clippy::missing_panics_doc)]

pub mod auth;
pub mod certificates;
pub mod cli;
pub mod cluster;
pub mod hotrod;
pub mod linearizability;
pub mod process;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use weft_server::Server;
use weft_server::config::ServerConfig;

/// How long a test waits for a reply before failing.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(20);

/// A server running on `127.0.0.1:0` in a runtime of its own; shut down on drop.
pub struct TestServer {
    runtime: Option<tokio::runtime::Runtime>,
    server: Option<Server>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl TestServer {
    /// The default configuration: cache `default` on database 0.
    pub fn start() -> Self {
        Self::start_with("", "")
    }

    /// `server_lines` go into `[server]` (after the bind address); `rest` is appended as is
    /// (e.g. `[caches.second]` tables).
    pub fn start_with(server_lines: &str, rest: &str) -> Self {
        Self::start_on_workers(2, server_lines, rest)
    }

    /// As [`TestServer::start_with`], on a runtime of `workers` async worker threads (one:
    /// whatever blocks a worker without leaving it starves every other connection).
    pub fn start_on_workers(workers: usize, server_lines: &str, rest: &str) -> Self {
        let text = format!(
            "[server]\nbind = \"127.0.0.1:0\"\nshutdown-grace-secs = 1\n{server_lines}\n{rest}\n"
        );
        let config = ServerConfig::parse("test.toml", &text).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(Server::start(config)).unwrap();
        let addr = server.local_addr();
        Self {
            runtime: Some(runtime),
            server: Some(server),
            addr,
        }
    }

    /// A new client connection.
    /// The server's cache manager, to inspect what commands stored.
    #[allow(dead_code)]
    pub fn manager(&self) -> weft_core::CacheManager {
        self.server.as_ref().unwrap().context().manager.clone()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let (Some(runtime), Some(server)) = (self.runtime.take(), self.server.take()) {
            runtime.block_on(server.shutdown());
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// One RESP reply, RESP2 and RESP3 types alike.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `+text`
    Simple(String),
    /// `-text`
    Error(String),
    /// `:n`
    Integer(i64),
    /// `$n` bytes
    Bulk(Vec<u8>),
    /// `$-1`
    NullBulk,
    /// `*n`
    Array(Vec<Frame>),
    /// `*-1`
    NullArray,
    /// RESP3 `_`
    Null,
    /// RESP3 `%n`
    Map(Vec<(Frame, Frame)>),
    /// RESP3 `~n`
    Set(Vec<Frame>),
    /// RESP3 `,d`
    Double(String),
    /// RESP3 `#t` / `#f`
    Boolean(bool),
    /// RESP3 `=n` with its 3-letter format
    Verbatim(String, Vec<u8>),
    /// RESP3 `(n`
    BigNumber(String),
    /// RESP3 `>n`
    Push(Vec<Frame>),
}

impl Frame {
    /// A bulk string frame.
    pub fn bulk(text: impl AsRef<[u8]>) -> Self {
        Self::Bulk(text.as_ref().to_vec())
    }

    /// `+OK`
    pub fn ok() -> Self {
        Self::Simple("OK".into())
    }

    /// An error frame.
    pub fn error(text: &str) -> Self {
        Self::Error(text.into())
    }

    /// The bytes of a bulk, simple or verbatim string; panics otherwise.
    pub fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Bulk(bytes) | Self::Verbatim(_, bytes) => bytes.clone(),
            Self::Simple(text) => text.as_bytes().to_vec(),
            other => panic!("not a string: {other:?}"),
        }
    }

    /// `bytes()` as UTF-8 text.
    pub fn text(&self) -> String {
        String::from_utf8(self.bytes()).unwrap()
    }

    /// The integer; panics otherwise.
    pub fn int(&self) -> i64 {
        match self {
            Self::Integer(n) => *n,
            other => panic!("not an integer: {other:?}"),
        }
    }

    /// The elements of an array or set; panics otherwise.
    pub fn items(&self) -> Vec<Frame> {
        match self {
            Self::Array(items) | Self::Set(items) | Self::Push(items) => items.clone(),
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// Parses one frame from the start of `buf`: `Ok(None)` if incomplete.
pub fn parse_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, String> {
    let Some(line_end) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let Some((&kind, rest)) = buf[..line_end].split_first() else {
        return Err("empty line".into());
    };
    let line = String::from_utf8_lossy(rest).into_owned();
    let after = line_end + 2;
    let number = || {
        line.parse::<i64>()
            .map_err(|_| format!("bad length {line:?}"))
    };
    let aggregate = |count: i64, per: usize| -> Result<Option<(Vec<Frame>, usize)>, String> {
        let mut items = Vec::new();
        let mut at = after;
        for _ in 0..count * per as i64 {
            match parse_frame(&buf[at..])? {
                Some((frame, used)) => {
                    items.push(frame);
                    at += used;
                }
                None => return Ok(None),
            }
        }
        Ok(Some((items, at)))
    };
    let frame = match kind {
        b'+' => (Frame::Simple(line), after),
        b'-' => (Frame::Error(line), after),
        b':' => (Frame::Integer(number()?), after),
        b',' => (Frame::Double(line), after),
        b'(' => (Frame::BigNumber(line), after),
        b'#' => (Frame::Boolean(line == "t"), after),
        b'_' => (Frame::Null, after),
        b'$' | b'=' => {
            let len = number()?;
            if len < 0 {
                return Ok(Some((Frame::NullBulk, after)));
            }
            let len = len as usize;
            if buf.len() < after + len + 2 {
                return Ok(None);
            }
            let data = buf[after..after + len].to_vec();
            let frame = if kind == b'=' {
                let format = String::from_utf8_lossy(&data[..3]).into_owned();
                Frame::Verbatim(format, data[4..].to_vec())
            } else {
                Frame::Bulk(data)
            };
            (frame, after + len + 2)
        }
        b'*' | b'~' | b'>' => {
            let count = number()?;
            if count < 0 {
                return Ok(Some((Frame::NullArray, after)));
            }
            let Some((items, end)) = aggregate(count, 1)? else {
                return Ok(None);
            };
            let frame = match kind {
                b'*' => Frame::Array(items),
                b'~' => Frame::Set(items),
                _ => Frame::Push(items),
            };
            (frame, end)
        }
        b'%' => {
            let Some((items, end)) = aggregate(number()?, 2)? else {
                return Ok(None);
            };
            let mut pairs = Vec::new();
            let mut items = items.into_iter();
            while let (Some(key), Some(value)) = (items.next(), items.next()) {
                pairs.push((key, value));
            }
            (Frame::Map(pairs), end)
        }
        other => return Err(format!("unknown frame type {:?}", other as char)),
    };
    Ok(Some(frame))
}

/// Encodes a request as a RESP multibulk.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A blocking RESP client.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    /// A second handle on the same socket (for writing from another thread).
    pub fn writer(&self) -> TcpStream {
        self.stream.try_clone().unwrap()
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Sends a request (one multibulk) and reads its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.send_raw(&encode(args));
        self.read_frame()
    }

    /// `call` with the arguments split on spaces.
    pub fn cmd(&mut self, line: &str) -> Frame {
        let args: Vec<&str> = line.split(' ').filter(|a| !a.is_empty()).collect();
        self.call(&args)
    }

    /// Reads one reply, waiting up to [`REPLY_TIMEOUT`].
    pub fn read_frame(&mut self) -> Frame {
        match self.read_frame_within(REPLY_TIMEOUT) {
            Some(frame) => frame,
            None => panic!(
                "no reply within {REPLY_TIMEOUT:?}; buffered {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
        }
    }

    /// Reads one reply if one arrives within `timeout`; panics if the connection closes.
    pub fn read_frame_within(&mut self, timeout: Duration) -> Option<Frame> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((frame, used)) = parse_frame(&self.buf).unwrap() {
                self.buf.drain(..used);
                return Some(frame);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!(
                    "connection closed; buffered {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None;
                }
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Whether the server closes the connection (EOF or reset) within [`REPLY_TIMEOUT`],
    /// with no further bytes arriving first.
    pub fn closed_by_server(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        let mut chunk = [0u8; 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ),
        }
    }

    /// Closes the writing half.
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
