//! `Reply`: how command handlers write replies. A thin layer over `weft-resp`'s encoders
//! that remembers the connection's protocol version, so handlers never branch on RESP2 vs
//! RESP3 themselves.

use bytes::BytesMut;
use weft_resp::Protocol;

/// Appends replies to a connection's output buffer.
///
/// The buffer is bounded: once it holds more than `limit` bytes, further writes are
/// dropped and [`Reply::overflowed`] turns true, so that one request cannot make the
/// server buffer an unbounded reply (`MGET k k k …` on a large value). The connection is
/// then closed, as Redis closes a client over its output-buffer limit. At most one element
/// is written past the limit, so a single value larger than the limit is still served.
#[derive(Debug)]
pub struct Reply<'a> {
    out: &'a mut BytesMut,
    protocol: Protocol,
    limit: usize,
    overflowed: bool,
}

impl<'a> Reply<'a> {
    /// Writes into `out` with `protocol`'s encodings, without a size limit.
    pub fn new(out: &'a mut BytesMut, protocol: Protocol) -> Self {
        Self::with_limit(out, protocol, usize::MAX)
    }

    /// Writes into `out` with `protocol`'s encodings until it holds more than `limit`
    /// bytes.
    pub fn with_limit(out: &'a mut BytesMut, protocol: Protocol, limit: usize) -> Self {
        Self {
            out,
            protocol,
            limit,
            overflowed: false,
        }
    }

    /// Whether writes were dropped because the buffer passed its limit; the reply in the
    /// buffer is then incomplete.
    #[must_use]
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Whether there is room for another write; records an overflow otherwise.
    fn room(&mut self) -> bool {
        if self.out.len() > self.limit {
            self.overflowed = true;
        }
        !self.overflowed
    }

    /// Bytes in the buffer so far: where the next reply starts.
    #[must_use]
    pub fn written(&self) -> usize {
        self.out.len()
    }

    /// The error code (`ERR`, `WRONGTYPE`, ...) of the reply written from `start`, if that
    /// reply is an error.
    #[must_use]
    pub fn error_code_at(&self, start: usize) -> Option<&str> {
        let bytes = self.out.get(start..)?;
        let rest = bytes.strip_prefix(b"-")?;
        let end = rest
            .iter()
            .position(|&b| b == b' ' || b == b'\r')
            .unwrap_or(rest.len());
        std::str::from_utf8(&rest[..end]).ok()
    }

    /// Takes back what was written since [`Reply::written`] said `len` (a reply that will
    /// come from elsewhere instead).
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }

    /// The protocol replies are encoded in.
    #[must_use]
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Switches encodings (HELLO's own reply already uses the new version).
    pub fn set_protocol(&mut self, protocol: Protocol) {
        self.protocol = protocol;
    }

    /// Bytes already encoded in this reply's protocol (a script's result).
    pub fn raw(&mut self, bytes: &[u8]) {
        if !self.room() {
            return;
        }
        self.out.extend_from_slice(bytes);
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        if !self.room() {
            return;
        }
        weft_resp::write_simple(self.out, "OK");
    }

    /// A simple string.
    pub fn simple(&mut self, text: &str) {
        if !self.room() {
            return;
        }
        weft_resp::write_simple(self.out, text);
    }

    /// An error; `text` starts with its code (`ERR`, `WRONGTYPE`, …).
    pub fn error(&mut self, text: &str) {
        if !self.room() {
            return;
        }
        weft_resp::write_error(self.out, text);
    }

    /// An integer.
    pub fn integer(&mut self, value: i64) {
        if !self.room() {
            return;
        }
        weft_resp::write_integer(self.out, value);
    }

    /// A bulk string.
    pub fn bulk(&mut self, bytes: &[u8]) {
        if !self.room() {
            return;
        }
        weft_resp::write_bulk(self.out, bytes);
    }

    /// A null bulk string (RESP2 `$-1`, RESP3 `_`).
    pub fn null(&mut self) {
        if !self.room() {
            return;
        }
        weft_resp::write_null(self.out, self.protocol);
    }

    /// A null array (RESP2 `*-1`, RESP3 `_`).
    pub fn null_array(&mut self) {
        if !self.room() {
            return;
        }
        weft_resp::write_null_array(self.out, self.protocol);
    }

    /// An array header; `len` elements follow.
    pub fn array(&mut self, len: usize) {
        if !self.room() {
            return;
        }
        weft_resp::write_array_len(self.out, len);
    }

    /// A push header; `len` elements follow (RESP3 `>`, RESP2 an array): pub/sub replies
    /// and messages.
    pub fn push(&mut self, len: usize) {
        if !self.room() {
            return;
        }
        weft_resp::write_push_len(self.out, len, self.protocol);
    }

    /// A map header; `len` key/value pairs follow (RESP2: an array of `2 × len`).
    pub fn map(&mut self, len: usize) {
        if !self.room() {
            return;
        }
        weft_resp::write_map_len(self.out, len, self.protocol);
    }

    /// A set header; `len` elements follow (RESP2: an array).
    pub fn set(&mut self, len: usize) {
        if !self.room() {
            return;
        }
        weft_resp::write_set_len(self.out, len, self.protocol);
    }

    /// A double (RESP2: a bulk string).
    pub fn double(&mut self, value: f64) {
        if !self.room() {
            return;
        }
        weft_resp::write_double(self.out, value, self.protocol);
    }

    /// A double already formatted, as Redis' `addReplyHumanLongDouble` writes one: RESP3
    /// `,text`, RESP2 a bulk string.
    pub fn double_text(&mut self, text: &str) {
        if !self.room() {
            return;
        }
        match self.protocol {
            Protocol::Resp2 => weft_resp::write_bulk(self.out, text.as_bytes()),
            Protocol::Resp3 => {
                self.out.extend_from_slice(b",");
                self.out.extend_from_slice(text.as_bytes());
                self.out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// A verbatim text (RESP3 `=`; RESP2 a bulk string).
    pub fn verbatim(&mut self, text: &str) {
        if !self.room() {
            return;
        }
        weft_resp::write_verbatim(self.out, b"txt", text.as_bytes(), self.protocol);
    }
}
