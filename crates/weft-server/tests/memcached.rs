//! The memcached endpoint over real sockets: every text and binary command, `noreply` and
//! quiet variants with opaque echo, limits and memcached's exact error lines, where the
//! stream resumes after each error, malformed input that must not hurt the server, the
//! dedicated port, and entries shared with RESP and REST in the same cache. Every read has a
//! timeout, so a hang fails the test.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::{Frame, REPLY_TIMEOUT, TestServer};
use weft_memcached::BinaryRequest;
use weft_memcached::binary::{BinaryCommand, Response, StoreMode, opcode, read_response};

/// A blocking text-protocol client.
struct Text {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Text {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    fn send(&mut self, bytes: impl AsRef<[u8]>) {
        self.stream.write_all(bytes.as_ref()).unwrap();
    }

    /// Reads until `n` bytes are buffered or `timeout` passes; false on timeout.
    fn fill(&mut self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.buf.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!(
                    "connection closed; buffered {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
                Ok(read) => self.buf.extend_from_slice(&chunk[..read]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return false;
                }
                Err(e) => panic!("read failed: {e}"),
            }
        }
        true
    }

    /// Asserts the next bytes received are exactly `expected`.
    fn expect(&mut self, expected: impl AsRef<[u8]>) {
        let expected = expected.as_ref();
        let complete = self.fill(expected.len(), REPLY_TIMEOUT);
        let got: Vec<u8> = self
            .buf
            .drain(..expected.len().min(self.buf.len()))
            .collect();
        assert!(
            complete && got == expected,
            "expected {:?}, got {:?}",
            String::from_utf8_lossy(expected),
            String::from_utf8_lossy(&got)
        );
    }

    /// Sends `request` and asserts the reply is exactly `expected`.
    fn call(&mut self, request: impl AsRef<[u8]>, expected: impl AsRef<[u8]>) {
        self.send(request);
        self.expect(expected);
    }

    /// Reads one line, without its `\r\n`.
    fn line(&mut self) -> String {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..end + 2).take(end).collect();
                return String::from_utf8_lossy(&line).into_owned();
            }
            assert!(Instant::now() < deadline, "no line");
            let wanted = self.buf.len() + 1;
            self.fill(wanted, Duration::from_millis(100));
        }
    }

    /// `gets <key>`: the CAS unique of a present key.
    fn cas_of(&mut self, key: &str) -> u64 {
        self.send(format!("gets {key}\r\n"));
        let header = self.line();
        let fields: Vec<&str> = header.split(' ').collect();
        assert_eq!(fields.first(), Some(&"VALUE"), "{header}");
        let length: usize = fields[3].parse().unwrap();
        self.fill(length + 2, REPLY_TIMEOUT);
        self.buf.drain(..length + 2);
        self.expect("END\r\n");
        fields[4].parse().unwrap()
    }

    /// `stats [group]` as name → value pairs.
    fn stats(&mut self, group: &str) -> Vec<(String, String)> {
        self.send(if group.is_empty() {
            "stats\r\n".to_owned()
        } else {
            format!("stats {group}\r\n")
        });
        let mut stats = Vec::new();
        loop {
            let line = self.line();
            if line == "END" {
                return stats;
            }
            let mut parts = line.splitn(3, ' ');
            assert_eq!(parts.next(), Some("STAT"), "{line}");
            stats.push((
                parts.next().unwrap().to_owned(),
                parts.next().unwrap_or_default().to_owned(),
            ));
        }
    }

    /// Asserts nothing arrives for a while (a suppressed reply).
    fn silent(&mut self) {
        assert!(
            !self.fill(self.buf.len() + 1, Duration::from_millis(200)),
            "unexpected {:?}",
            String::from_utf8_lossy(&self.buf)
        );
    }

    /// Whether the server closes the connection without sending more.
    fn closed(&mut self) -> bool {
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
}

/// A blocking binary-protocol client.
struct Binary {
    stream: TcpStream,
    buf: BytesMut,
}

impl Binary {
    fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            buf: BytesMut::new(),
        }
    }

    fn send(&mut self, command: BinaryCommand, opaque: u32, cas: u64) {
        let request = BinaryRequest::new(command, opaque, cas).unwrap();
        let mut out = BytesMut::new();
        weft_memcached::binary::write_request(&mut out, &request).unwrap();
        self.send_raw(&out);
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    fn response_within(&mut self, timeout: Duration) -> Option<Response> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(response) = read_response(&mut self.buf, 16 << 20).unwrap() {
                return Some(response);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("connection closed"),
                Ok(read) => self.buf.extend_from_slice(&chunk[..read]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None;
                }
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    fn response(&mut self) -> Response {
        self.response_within(REPLY_TIMEOUT).expect("no response")
    }

    fn call(&mut self, command: BinaryCommand, opaque: u32, cas: u64) -> Response {
        self.send(command, opaque, cas);
        self.response()
    }

    fn closed(&mut self) -> bool {
        self.stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        let mut chunk = [0u8; 1024];
        matches!(self.stream.read(&mut chunk), Ok(0) | Err(_))
    }
}

fn get(key: &str) -> BinaryCommand {
    BinaryCommand::Get {
        key: key.to_owned().into(),
        with_key: false,
        quiet: false,
    }
}

fn set(key: &str, value: &str, flags: u32, quiet: bool) -> BinaryCommand {
    BinaryCommand::Store {
        mode: StoreMode::Set,
        key: key.to_owned().into(),
        value: value.to_owned().into(),
        flags,
        exptime: 0,
        quiet,
    }
}

fn arithmetic(key: &str, incr: bool, delta: u64, initial: u64, exptime: u32) -> BinaryCommand {
    BinaryCommand::Arithmetic {
        incr,
        key: key.to_owned().into(),
        delta,
        initial,
        exptime,
        quiet: false,
    }
}

/// The current Unix time in seconds.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

// Proves the storage commands, multi-key retrievals and 32-bit flags behave as memcached's.
#[test]
fn text_storage_commands_and_retrievals() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.call("set a 4294967295 0 5\r\nhello\r\n", "STORED\r\n");
    c.call("set b 7 0 0\r\n\r\n", "STORED\r\n");
    c.call(
        "get a missing b a\r\n",
        "VALUE a 4294967295 5\r\nhello\r\nVALUE b 7 0\r\n\r\nVALUE a 4294967295 5\r\nhello\r\nEND\r\n",
    );
    c.call("add a 0 0 1\r\nx\r\n", "NOT_STORED\r\n");
    c.call("add c 3 0 1\r\nx\r\n", "STORED\r\n");
    c.call("replace missing 0 0 1\r\nx\r\n", "NOT_STORED\r\n");
    c.call("replace c 4 0 1\r\ny\r\n", "STORED\r\n");
    c.call("append missing 0 0 1\r\nx\r\n", "NOT_STORED\r\n");
    // append/prepend keep the item's flags whatever they send.
    c.call("append a 9 0 1\r\n!\r\n", "STORED\r\n");
    c.call("prepend a 9 0 1\r\n>\r\n", "STORED\r\n");
    c.call(
        "get a c\r\n",
        "VALUE a 4294967295 7\r\n>hello!\r\nVALUE c 4 1\r\ny\r\nEND\r\n",
    );
    // Binary-safe data holding CRLF.
    c.call("set bin 0 0 4\r\n\r\n\r\n\r\n", "STORED\r\n");
    c.call("get bin\r\n", "VALUE bin 0 4\r\n\r\n\r\n\r\nEND\r\n");
    c.call("delete a\r\n", "DELETED\r\n");
    c.call("delete a\r\n", "NOT_FOUND\r\n");
    c.call("delete c 0\r\n", "DELETED\r\n");
    c.call("version\r\n", "VERSION 1.6.18\r\n");
    c.call("verbosity 1\r\n", "OK\r\n");
}

// Proves CAS uniques are entry versions: a fresh unique wins, a stale one gets EXISTS.
#[test]
fn text_cas_uses_entry_versions() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.call("cas k 0 0 1 1\r\nx\r\n", "NOT_FOUND\r\n");
    c.call("set k 0 0 1\r\nx\r\n", "STORED\r\n");
    let unique = c.cas_of("k");
    c.call(format!("cas k 5 0 1 {unique}\r\ny\r\n"), "STORED\r\n");
    c.call(format!("cas k 5 0 1 {unique}\r\nz\r\n"), "EXISTS\r\n");
    let fresh = c.cas_of("k");
    assert!(fresh > unique, "versions increase");
    c.call("get k\r\n", "VALUE k 5 1\r\ny\r\nEND\r\n");
    // A write through RESP changes the unique too.
    let mut r = server.client();
    assert_eq!(r.cmd("SET k w"), Frame::ok());
    c.call(format!("cas k 0 0 1 {fresh}\r\nq\r\n"), "EXISTS\r\n");
}

// Proves `noreply` silences every reply, errors included, and the stream stays in step.
#[test]
fn text_noreply_suppresses_replies() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.send(
        "set k 0 0 1 noreply\r\nx\r\nadd k 0 0 1 noreply\r\ny\r\nappend k 0 0 1 noreply\r\nz\r\n\
         incr k 1 noreply\r\ntouch k 10 noreply\r\ndelete nope noreply\r\nset k 0 0 -1 noreply\r\n\
         flush_all 0 noreply\r\nverbosity 1 noreply\r\nset j 0 0 1 noreply\r\n1\r\nincr j 2 noreply\r\n",
    );
    c.silent();
    c.call("get j\r\n", "VALUE j 0 1\r\n3\r\nEND\r\n");
    // A bad data chunk with noreply is silent; its trailing CRLF then reads as a command.
    c.call("set k 0 0 1 noreply\r\nxyz\r\n", "ERROR\r\n");
}

// Proves incr/decr: unsigned 64-bit, incr wraps, decr floors at 0, memcached's error lines,
// and the result stored as decimal text that RESP reads.
#[test]
fn text_incr_decr_follow_memcached() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.call("incr n 1\r\n", "NOT_FOUND\r\n");
    c.call("set n 3 0 20\r\n18446744073709551615\r\n", "STORED\r\n");
    c.call("incr n 2\r\n", "1\r\n");
    c.call("decr n 5\r\n", "0\r\n");
    c.call("incr n 1000\r\n", "1000\r\n");
    c.call("decr n 1\r\n", "999\r\n");
    c.call("get n\r\n", "VALUE n 3 3\r\n999\r\nEND\r\n");
    c.call(
        "incr n -1\r\n",
        "CLIENT_ERROR invalid numeric delta argument\r\n",
    );
    c.call(
        "incr n abc\r\n",
        "CLIENT_ERROR invalid numeric delta argument\r\n",
    );
    c.call("set s 0 0 2\r\n-1\r\n", "STORED\r\n");
    c.call(
        "incr s 1\r\n",
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.call("set e 0 0 0\r\n\r\n", "STORED\r\n");
    c.call(
        "decr e 1\r\n",
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
    );
    c.call("set p 0 0 3\r\n 10\r\n", "STORED\r\n");
    c.call("incr p 1\r\n", "11\r\n");
    let mut r = server.client();
    assert_eq!(r.cmd("GET n"), Frame::bulk("999"));
    assert_eq!(r.cmd("INCR n"), Frame::Integer(1000));
    // RESP changes the number in place: the flags stay.
    c.call("get n\r\n", "VALUE n 3 4\r\n1000\r\nEND\r\n");
    c.call("incr n 1\r\n", "1001\r\n");
}

// Proves expiration times: relative seconds, absolute Unix times past 30 days, negative and
// past times expiring at once, and touch/gat/gats setting a new one (read back as RESP TTL).
#[test]
fn text_expiration_touch_and_gat() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    let mut r = server.client();
    c.call("set rel 0 100 1\r\nx\r\n", "STORED\r\n");
    let ttl = r.cmd("TTL rel").int();
    assert!((99..=100).contains(&ttl), "{ttl}");
    let absolute = unix_now() + 5000;
    c.call(format!("set abs 0 {absolute} 1\r\nx\r\n"), "STORED\r\n");
    let ttl = r.cmd("TTL abs").int();
    assert!((4990..=5000).contains(&ttl), "{ttl}");
    c.call("set neg 0 -1 1\r\nx\r\n", "STORED\r\n");
    c.call(format!("set past 0 {} 1\r\nx\r\n", 2_592_001), "STORED\r\n");
    c.call("get neg past\r\n", "END\r\n");
    c.call("touch rel 2000\r\n", "TOUCHED\r\n");
    let ttl = r.cmd("TTL rel").int();
    assert!((1990..=2000).contains(&ttl), "{ttl}");
    c.call("touch missing 10\r\n", "NOT_FOUND\r\n");
    c.call(
        "touch rel abc\r\n",
        "CLIENT_ERROR invalid exptime argument\r\n",
    );
    c.call("gat 0 rel missing\r\n", "VALUE rel 0 1\r\nx\r\nEND\r\n");
    assert_eq!(r.cmd("TTL rel"), Frame::Integer(-1));
    c.send("gats 300 rel\r\n");
    let header = c.line();
    assert!(header.starts_with("VALUE rel 0 1 "), "{header}");
    c.expect("x\r\nEND\r\n");
    let ttl = r.cmd("TTL rel").int();
    assert!((299..=300).contains(&ttl), "{ttl}");
    // A touch to the past expires the item; it is answered this once.
    c.call("gat -1 rel\r\n", "VALUE rel 0 1\r\nx\r\nEND\r\n");
    c.call("get rel\r\n", "END\r\n");
}

// Proves flush_all clears at once, a delayed one only at its time, and a later one wins.
#[test]
fn text_flush_all_now_and_delayed() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.call("set a 0 0 1\r\nx\r\n", "STORED\r\n");
    c.call("flush_all\r\n", "OK\r\n");
    c.call("get a\r\n", "END\r\n");
    c.call("set a 0 0 1\r\nx\r\n", "STORED\r\n");
    c.call("flush_all 1000\r\n", "OK\r\n");
    c.call("get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n");
    // A later delayed flush supersedes the pending one; it fires about a second from now.
    c.call("flush_all 1\r\n", "OK\r\n");
    c.call("set b 0 0 1\r\ny\r\n", "STORED\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        c.send("get a b\r\n");
        let first = c.line();
        if first == "END" {
            break;
        }
        while c.line() != "END" {}
        assert!(Instant::now() < deadline, "delayed flush never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    c.call(
        "flush_all abc\r\n",
        "CLIENT_ERROR invalid exptime argument\r\n",
    );
}

// Proves the line and key limits and memcached's answers to malformed lines, each leaving
// the connection where memcached leaves it.
#[test]
fn text_limits_and_error_lines() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    let key250 = "k".repeat(250);
    let key251 = "k".repeat(251);
    c.call(format!("set {key250} 0 0 1\r\nx\r\n"), "STORED\r\n");
    c.call(
        format!("get {key250}\r\n"),
        format!("VALUE {key250} 0 1\r\nx\r\nEND\r\n"),
    );
    // The refused line leaves its data block to be read as a command.
    c.call(
        format!("set {key251} 0 0 1\r\nx\r\n"),
        "CLIENT_ERROR bad command line format\r\nERROR\r\n",
    );
    c.call(
        format!("get a {key251}\r\n"),
        "CLIENT_ERROR bad command line format\r\n",
    );
    c.call(
        "set k 0 0 -1\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    );
    c.call(
        "set k abc 0 1\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    );
    c.call(
        "set k 0 0 3\r\nabcde\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    );
    c.call("bogus\r\n", "ERROR\r\n");
    c.call("GET k\r\n", "ERROR\r\n");
    c.call("get\r\n", "ERROR\r\n");
    c.call(
        "delete k 5\r\n",
        "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
    );
    c.call("stats nonsense\r\n", "ERROR\r\n");
    // Too large: refused at once, the data discarded, the key's old value removed.
    c.call("set big 0 0 1\r\nx\r\n", "STORED\r\n");
    let mut request = format!("set big 0 0 {}\r\n", 2 << 20).into_bytes();
    request.extend(std::iter::repeat_n(b'x', 2 << 20));
    request.extend_from_slice(b"\r\nget big\r\n");
    c.call(
        &request,
        "SERVER_ERROR object too large for cache\r\nEND\r\n",
    );
    // memcached's item rule: 1 MiB minus 59 bytes minus the key for flags 0.
    let largest = (1 << 20) - 59 - 3;
    let mut fits = format!("set big 0 0 {largest}\r\n").into_bytes();
    fits.extend(std::iter::repeat_n(b'y', largest));
    fits.extend_from_slice(b"\r\n");
    c.call(&fits, "STORED\r\n");
    c.call(
        format!("append big 0 0 1\r\nz\r\nset big 0 0 {}\r\n", largest + 1),
        "NOT_STORED\r\nSERVER_ERROR object too large for cache\r\n",
    );
    c.send(format!("{}\r\n", "x".repeat(largest + 1)));
    c.call("version\r\n", "VERSION 1.6.18\r\n");
    // A command line over 2048 bytes closes the connection.
    c.send(format!("set {}\r\n", "x".repeat(3000)));
    c.expect("CLIENT_ERROR line too long\r\n");
    assert!(c.closed());
    let mut again = Text::connect(server.addr);
    again.call(
        format!("get {key250}\r\n"),
        format!("VALUE {key250} 0 1\r\nx\r\nEND\r\n"),
    );
}

// Proves a multi-get whose reply is far larger than the output buffer arrives whole.
#[test]
fn text_large_multiget_is_streamed() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    let value = "v".repeat(100_000);
    for i in 0..60 {
        c.call(
            format!("set key{i} {i} 0 {}\r\n{value}\r\n", value.len()),
            "STORED\r\n",
        );
    }
    let keys: Vec<String> = (0..60).map(|i| format!("key{i}")).collect();
    c.send(format!("get {}\r\n", keys.join(" ")));
    for i in 0..60 {
        c.expect(format!("VALUE key{i} {i} {}\r\n{value}\r\n", value.len()));
    }
    c.expect("END\r\n");
}

// Proves quit closes the connection after the replies before it.
#[test]
fn text_quit_closes_after_earlier_replies() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.send("version\r\nquit\r\nversion\r\n");
    c.expect("VERSION 1.6.18\r\n");
    assert!(c.closed());
}

// Proves stats counts real operations and the items/slabs/settings groups answer.
#[test]
fn text_stats_report_real_counters() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.call(
        "set a 0 0 1\r\nx\r\nset b 0 0 1\r\ny\r\n",
        "STORED\r\nSTORED\r\n",
    );
    c.call(
        "get a b nope\r\n",
        "VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\nEND\r\n",
    );
    c.call(
        "delete nope\r\nincr nope 1\r\n",
        "NOT_FOUND\r\nNOT_FOUND\r\n",
    );
    let stats = c.stats("");
    let stat = |name: &str| {
        stats
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(stat("curr_items"), "2");
    assert_eq!(stat("cmd_set"), "2");
    assert_eq!(stat("cmd_get"), "3");
    assert_eq!(stat("get_hits"), "2");
    assert_eq!(stat("get_misses"), "1");
    assert_eq!(stat("delete_misses"), "1");
    assert_eq!(stat("incr_misses"), "1");
    assert_eq!(stat("total_items"), "2");
    assert_eq!(stat("curr_connections"), "1");
    assert_eq!(stat("version"), "1.6.18");
    assert_eq!(stat("pid"), std::process::id().to_string());
    assert!(stat("bytes").parse::<u64>().unwrap() > 0);
    let items = c.stats("items");
    assert!(items.contains(&("items:1:number".to_owned(), "2".to_owned())));
    let slabs = c.stats("slabs");
    assert!(slabs.contains(&("active_slabs".to_owned(), "1".to_owned())));
    let settings = c.stats("settings");
    assert!(settings.contains(&("item_size_max".to_owned(), "1048576".to_owned())));
    c.call("stats reset\r\n", "RESET\r\n");
    let stats = c.stats("");
    assert!(stats.contains(&("cmd_get".to_owned(), "0".to_owned())));
}

// Proves memcached entries are RESP and REST entries of the same cache: values are raw bytes,
// flags live in metadata (RESP SET stores 0), and Redis structures are not memcached values.
#[test]
fn entries_are_shared_with_resp_and_rest() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    let mut r = server.client();
    c.call("set shared 42 0 5\r\nhello\r\n", "STORED\r\n");
    assert_eq!(r.cmd("GET shared"), Frame::bulk("hello"));
    assert_eq!(r.cmd("APPEND shared !"), Frame::Integer(6));
    c.call("get shared\r\n", "VALUE shared 42 6\r\nhello!\r\nEND\r\n");
    assert_eq!(r.cmd("SET fromresp bar"), Frame::ok());
    c.call("get fromresp\r\n", "VALUE fromresp 0 3\r\nbar\r\nEND\r\n");
    // REST reads the raw value.
    let mut http = TcpStream::connect(server.addr).unwrap();
    http.write_all(
        b"GET /rest/v2/caches/default/shared HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut response = String::new();
    http.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    http.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hello!"), "{response}");
    // A hash reads as a miss; set overwrites it; other writes fail; delete removes it.
    assert_eq!(r.cmd("HSET h f v"), Frame::Integer(1));
    c.call("get h\r\n", "END\r\n");
    c.call("touch h 10\r\n", "NOT_FOUND\r\n");
    for write in [
        "add h 0 0 1\r\nx\r\n",
        "replace h 0 0 1\r\nx\r\n",
        "append h 0 0 1\r\nx\r\n",
        "incr h 1\r\n",
    ] {
        c.call(write, "SERVER_ERROR key holds a Redis data structure\r\n");
    }
    assert_eq!(r.cmd("TYPE h"), Frame::Simple("hash".into()));
    c.call("delete h\r\n", "DELETED\r\n");
    assert_eq!(r.cmd("HSET h f v"), Frame::Integer(1));
    c.call("set h 0 0 1\r\nx\r\n", "STORED\r\n");
    assert_eq!(r.cmd("TYPE h"), Frame::Simple("string".into()));
}

// Proves the binary commands: opaque and CAS echo, flags, quiet variants silent until NOOP,
// errors always sent, memcached's statuses and texts.
#[test]
fn binary_commands_and_quiet_variants() {
    let server = TestServer::start();
    let mut c = Binary::connect(server.addr);
    let stored = c.call(set("a", "value", 0xdead_beef, false), 1, 0);
    assert_eq!(
        (stored.status, stored.opaque, stored.opcode),
        (0, 1, opcode::SET)
    );
    assert_ne!(stored.cas, 0);
    let hit = c.call(get("a"), 2, 0);
    assert_eq!(
        (
            hit.status,
            hit.opaque,
            &hit.extras[..],
            &hit.key[..],
            &hit.value[..],
            hit.cas
        ),
        (
            0,
            2,
            &0xdead_beef_u32.to_be_bytes()[..],
            &b""[..],
            &b"value"[..],
            stored.cas
        )
    );
    let miss = c.call(get("nope"), 3, 0);
    assert_eq!((miss.status, &miss.value[..]), (1, &b"Not found"[..]));
    let keyed = c.call(
        BinaryCommand::Get {
            key: "nope".into(),
            with_key: true,
            quiet: false,
        },
        4,
        0,
    );
    assert_eq!(
        (keyed.status, &keyed.key[..], &keyed.value[..]),
        (1, &b"nope"[..], &b""[..])
    );
    // Quiet: a SETQ success and GETQ/GETKQ misses are silent; a hit and errors are not.
    c.send(set("q", "1", 0, true), 10, 0);
    c.send(
        BinaryCommand::Get {
            key: "nope".into(),
            with_key: false,
            quiet: true,
        },
        11,
        0,
    );
    c.send(
        BinaryCommand::Get {
            key: "q".into(),
            with_key: true,
            quiet: true,
        },
        12,
        0,
    );
    c.send(
        BinaryCommand::Store {
            mode: StoreMode::Add,
            key: "q".into(),
            value: "2".into(),
            flags: 0,
            exptime: 0,
            quiet: true,
        },
        13,
        0,
    );
    c.send(BinaryCommand::Noop, 14, 0);
    let getkq = c.response();
    assert_eq!(
        (getkq.opcode, getkq.opaque, &getkq.key[..], &getkq.value[..]),
        (opcode::GETKQ, 12, &b"q"[..], &b"1"[..])
    );
    let addq = c.response();
    assert_eq!(
        (addq.opcode, addq.opaque, addq.status, &addq.value[..]),
        (opcode::ADDQ, 13, 2, &b"Data exists for key."[..])
    );
    let noop = c.response();
    assert_eq!(
        (noop.opcode, noop.opaque, noop.status),
        (opcode::NOOP, 14, 0)
    );
    // CAS on stores and deletes.
    let current = c.call(get("a"), 20, 0).cas;
    let stale = c.call(set("a", "x", 0, false), 21, current + 1000);
    assert_eq!(stale.status, 2);
    let swapped = c.call(set("a", "y", 0, false), 22, current);
    assert_eq!(swapped.status, 0);
    assert!(swapped.cas > current);
    let missing_cas = c.call(set("never", "y", 0, false), 23, 5);
    assert_eq!(missing_cas.status, 1);
    let bad_delete = c.call(
        BinaryCommand::Delete {
            key: "a".into(),
            quiet: false,
        },
        24,
        1,
    );
    assert_eq!(bad_delete.status, 2);
    let deleted = c.call(
        BinaryCommand::Delete {
            key: "a".into(),
            quiet: false,
        },
        25,
        0,
    );
    assert_eq!(deleted.status, 0);
    let replace = c.call(
        BinaryCommand::Store {
            mode: StoreMode::Replace,
            key: "a".into(),
            value: "z".into(),
            flags: 0,
            exptime: 0,
            quiet: false,
        },
        26,
        0,
    );
    assert_eq!(replace.status, 1);
    let append = c.call(
        BinaryCommand::Concat {
            append: true,
            key: "a".into(),
            value: "z".into(),
            quiet: false,
        },
        27,
        0,
    );
    assert_eq!((append.status, &append.value[..]), (5, &b"Not stored."[..]));
    // INCR/DECR: 0xffffffff = fail if absent; otherwise create with the initial value.
    let absent = c.call(arithmetic("n", true, 1, 10, 0xffff_ffff), 30, 0);
    assert_eq!(absent.status, 1);
    let created = c.call(arithmetic("n", true, 1, 10, 0), 31, 0);
    assert_eq!(
        (created.status, &created.value[..]),
        (0, &10u64.to_be_bytes()[..])
    );
    let incremented = c.call(arithmetic("n", true, 5, 0, 0), 32, 0);
    assert_eq!(&incremented.value[..], &15u64.to_be_bytes()[..]);
    let floored = c.call(arithmetic("n", false, 100, 0, 0), 33, 0);
    assert_eq!(&floored.value[..], &0u64.to_be_bytes()[..]);
    c.call(set("text", "abc", 0, false), 34, 0);
    let non_numeric = c.call(arithmetic("text", true, 1, 0, 0), 35, 0);
    assert_eq!(
        (non_numeric.status, &non_numeric.value[..]),
        (6, &b"Non-numeric server-side value for incr or decr"[..])
    );
    // TOUCH answers the flags, GAT the value.
    c.call(set("t", "tv", 9, false), 40, 0);
    let touched = c.call(
        BinaryCommand::Touch {
            key: "t".into(),
            exptime: 100,
        },
        41,
        0,
    );
    assert_eq!(
        (touched.status, &touched.extras[..], &touched.value[..]),
        (0, &9u32.to_be_bytes()[..], &b""[..])
    );
    let gat = c.call(
        BinaryCommand::GetAndTouch {
            key: "t".into(),
            exptime: 100,
            with_key: true,
            quiet: false,
        },
        42,
        0,
    );
    assert_eq!((&gat.key[..], &gat.value[..]), (&b"t"[..], &b"tv"[..]));
    let version = c.call(BinaryCommand::Version, 50, 0);
    assert_eq!(&version.value[..], b"1.6.18");
    // STAT: one packet per statistic, then an empty one.
    c.send(BinaryCommand::Stat { group: "".into() }, 51, 0);
    let mut names = Vec::new();
    loop {
        let stat = c.response();
        assert_eq!(stat.opaque, 51);
        if stat.key.is_empty() {
            break;
        }
        names.push(String::from_utf8(stat.key.to_vec()).unwrap());
    }
    assert!(names.contains(&"curr_items".to_owned()) && names.contains(&"cmd_get".to_owned()));
    let unknown_stat = c.call(
        BinaryCommand::Stat {
            group: "nonsense".into(),
        },
        52,
        0,
    );
    assert_eq!(unknown_stat.status, 1);
    // FLUSHQ is silent; QUIT answers then closes.
    c.send(
        BinaryCommand::Flush {
            exptime: None,
            quiet: true,
        },
        60,
        0,
    );
    let after_flush = c.call(get("t"), 61, 0);
    assert_eq!((after_flush.opaque, after_flush.status), (61, 1));
    let quit = c.call(BinaryCommand::Quit { quiet: false }, 62, 0);
    assert_eq!((quit.opcode, quit.opaque), (opcode::QUIT, 62));
    assert!(c.closed());
}

/// A raw binary request.
fn raw(op: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32) -> Vec<u8> {
    let mut out = vec![0x80, op];
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.push(extras.len() as u8);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&0u64.to_be_bytes());
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

// Proves SASL (without users) and unknown opcodes get "Unknown command" with the stream kept in step, a
// too-large value is refused and skipped, and invalid packets close only their connection.
#[test]
fn binary_unknown_opcodes_limits_and_malformed_packets() {
    let server = TestServer::start();
    let mut c = Binary::connect(server.addr);
    let mut burst = raw(opcode::SASL_LIST_MECHS, &[], &[], &[], 1);
    burst.extend(raw(opcode::SASL_AUTH, &[], b"PLAIN", b"\0user\0pass", 2));
    burst.extend(raw(0x60, &[], b"key", b"value", 3));
    burst.extend(raw(opcode::VERSION, &[], &[], &[], 4));
    c.send_raw(&burst);
    for opaque in 1..=3 {
        let response = c.response();
        assert_eq!(
            (response.opaque, response.status, &response.value[..]),
            (opaque, 0x81, &b"Unknown command"[..])
        );
    }
    assert_eq!(c.response().opaque, 4);
    let mut too_large = raw(opcode::SET, &[0; 8], b"big", &vec![b'x'; 2 << 20], 5);
    too_large.extend(raw(opcode::NOOP, &[], &[], &[], 6));
    c.send_raw(&too_large);
    let refused = c.response();
    assert_eq!(
        (refused.opaque, refused.status, &refused.value[..]),
        (5, 3, &b"Too large."[..])
    );
    assert_eq!(c.response().opaque, 6);
    // Invalid lengths: "Invalid arguments", then closed.
    c.send_raw(&raw(opcode::GET, b"1234", b"a", &[], 7));
    let invalid = c.response();
    assert_eq!(
        (invalid.opaque, invalid.status, &invalid.value[..]),
        (7, 4, &b"Invalid arguments"[..])
    );
    assert!(c.closed());
    let mut long_key = Binary::connect(server.addr);
    long_key.send_raw(&raw(opcode::GET, &[], &[b'k'; 251], &[], 8));
    assert_eq!(long_key.response().status, 4);
    assert!(long_key.closed());
    // A bad magic byte after a valid packet closes without a response.
    let mut bad_magic = Binary::connect(server.addr);
    let mut packets = raw(opcode::NOOP, &[], &[], &[], 9);
    packets.extend_from_slice(&[0x81; 24]);
    bad_magic.send_raw(&packets);
    assert_eq!(bad_magic.response().opaque, 9);
    assert!(bad_magic.closed());
    let mut fresh = Binary::connect(server.addr);
    assert_eq!(fresh.call(BinaryCommand::Noop, 10, 0).status, 0);
}

// Proves random garbage on many connections, text and binary, never stops the server or
// disturbs stored data.
#[test]
fn malformed_input_never_kills_the_server() {
    let server = TestServer::start();
    let mut c = Text::connect(server.addr);
    c.call("set kept 1 0 4\r\nsafe\r\n", "STORED\r\n");
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..40 {
        let mut garbage: Vec<u8> = (0..(next() % 4096)).map(|_| next() as u8).collect();
        // Half the rounds speak memcached first, so the garbage reaches the decoders.
        let prefix = match round % 4 {
            0 => b"get kept\r\n".to_vec(),
            1 => raw(opcode::NOOP, &[], &[], &[], 1),
            _ => Vec::new(),
        };
        garbage.splice(0..0, prefix);
        let mut stream = TcpStream::connect(server.addr).unwrap();
        let _ = stream.write_all(&garbage);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
        let mut sink = Vec::new();
        let _ = stream.read_to_end(&mut sink);
    }
    let mut again = Text::connect(server.addr);
    again.call("get kept\r\n", "VALUE kept 1 4\r\nsafe\r\nEND\r\n");
    let mut r = server.client();
    assert_eq!(r.cmd("PING"), Frame::Simple("PONG".into()));
}

// Proves the dedicated port serves text and binary, and inline RESP still works on the shared one.
#[test]
fn dedicated_port_and_detection() {
    let port = common::cluster::free_udp_and_tcp_port();
    let server = TestServer::start_with(&format!("memcached-listen = \"127.0.0.1:{port}\""), "");
    let dedicated: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut text = Text::connect(dedicated);
    text.call("set k 5 0 1\r\nx\r\n", "STORED\r\n");
    // On the dedicated port everything is memcached: an unknown word is memcached's ERROR.
    text.call("PING\r\n", "ERROR\r\n");
    let mut binary = Binary::connect(dedicated);
    let hit = binary.call(get("k"), 1, 0);
    assert_eq!(
        (&hit.extras[..], &hit.value[..]),
        (&5u32.to_be_bytes()[..], &b"x"[..])
    );
    let mut shared = Text::connect(server.addr);
    shared.call("get k\r\n", "VALUE k 5 1\r\nx\r\nEND\r\n");
    let mut inline = Text::connect(server.addr);
    inline.call("PING\r\n", "+PONG\r\n");
}

// Proves memcached-cache points the endpoint at another cache, away from RESP database 0.
#[test]
fn memcached_cache_is_configurable() {
    let server = TestServer::start_with("memcached-cache = \"sessions\"", "[caches.sessions]\n");
    let mut c = Text::connect(server.addr);
    c.call("set s 0 0 1\r\nx\r\n", "STORED\r\n");
    let mut r = server.client();
    assert_eq!(r.cmd("GET s"), Frame::NullBulk);
    let sessions = server.manager().cache("sessions").unwrap();
    assert_eq!(sessions.get(b"s").unwrap().as_deref(), Some(&b"x"[..]));
}

// Proves every binary write answers with the CAS unique of the item it stored — the one a
// later GET returns — while another connection keeps writing other keys: SET, ADD, a CAS
// store, APPEND, INCREMENT (creating and bumping); and that a SET that expires at once
// answers CAS 0.
#[test]
fn binary_writes_answer_the_cas_they_stored() {
    let server = TestServer::start();
    let mut c = Binary::connect(server.addr);
    let mut other = Binary::connect(server.addr);
    let check = |c: &mut Binary, key: &str, cas: u64, opaque: u32| {
        assert_ne!(cas, 0, "{key}");
        assert_eq!(c.call(get(key), opaque, 0).cas, cas, "{key}");
    };
    let stored = c.call(set("s", "v", 0, false), 1, 0).cas;
    other.call(set("noise", "x", 0, false), 1, 0);
    check(&mut c, "s", stored, 2);
    let added = c.call(
        BinaryCommand::Store {
            mode: StoreMode::Add,
            key: "a".into(),
            value: "v".into(),
            flags: 0,
            exptime: 0,
            quiet: false,
        },
        3,
        0,
    );
    assert_eq!(added.status, 0);
    check(&mut c, "a", added.cas, 4);
    let swapped = c.call(set("a", "w", 0, false), 5, added.cas);
    assert_eq!(swapped.status, 0);
    assert_ne!(swapped.cas, added.cas);
    check(&mut c, "a", swapped.cas, 6);
    let appended = c.call(
        BinaryCommand::Concat {
            append: true,
            key: "a".into(),
            value: "z".into(),
            quiet: false,
        },
        7,
        0,
    );
    assert_eq!(appended.status, 0);
    check(&mut c, "a", appended.cas, 8);
    let created = c.call(arithmetic("n", true, 1, 10, 0), 9, 0);
    check(&mut c, "n", created.cas, 10);
    other.call(set("noise", "y", 0, false), 2, 0);
    let bumped = c.call(arithmetic("n", true, 1, 10, 0), 11, 0);
    assert_eq!(&bumped.value[..], &11u64.to_be_bytes()[..]);
    check(&mut c, "n", bumped.cas, 12);
    let gone = c.call(
        BinaryCommand::Store {
            mode: StoreMode::Set,
            key: "s".into(),
            value: "v".into(),
            flags: 0,
            // Over 30 days: an absolute time, in 1970, so already past.
            exptime: 2_592_001,
            quiet: false,
        },
        13,
        0,
    );
    assert_eq!((gone.status, gone.cas), (0, 0));
}
