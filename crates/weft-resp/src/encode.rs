//! Reply encoding for RESP2 and RESP3.
//!
//! Two layers: `write_*` functions append one frame (or one aggregate header)
//! straight into the output buffer and are what hot commands use; [`Reply`]
//! is a tree for replies that are easier to build than to stream, encoded by
//! the same functions. RESP3-only types degrade to their RESP2 equivalents
//! exactly as Redis does.

use std::borrow::Cow;

use bytes::{BufMut, Bytes, BytesMut};

use crate::number::{StackText, write_g17};

/// Reply protocol version of a connection, chosen with `HELLO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// RESP2, the default for new connections.
    #[default]
    Resp2,
    /// RESP3 (`HELLO 3`).
    Resp3,
}

const CRLF: &[u8] = b"\r\n";

/// Appends `<prefix><n>\r\n`.
fn write_header<N: itoa::Integer>(out: &mut BytesMut, prefix: u8, n: N) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n).as_bytes();
    out.reserve(1 + digits.len() + CRLF.len());
    out.put_u8(prefix);
    out.put_slice(digits);
    out.put_slice(CRLF);
}

/// Appends `<prefix><text>\r\n` with CR and LF in `text` replaced by spaces:
/// a line-framed type cannot carry them, and Redis sanitises the same way.
fn write_line(out: &mut BytesMut, prefix: u8, text: &[u8]) {
    out.reserve(1 + text.len() + CRLF.len());
    out.put_u8(prefix);
    if memchr::memchr2(b'\r', b'\n', text).is_some() {
        out.extend(
            text.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    } else {
        out.put_slice(text);
    }
    out.put_slice(CRLF);
}

/// Appends a simple string, `+<text>\r\n` (e.g. `+OK`). CR/LF in `text`
/// become spaces.
pub fn write_simple(out: &mut BytesMut, text: &str) {
    write_line(out, b'+', text.as_bytes());
}

/// Appends an error, `-<text>\r\n`. `text` is the full message including its
/// code, e.g. `ERR syntax error` or `WRONGTYPE Operation against a key
/// holding the wrong kind of value`; a leading `-` is tolerated and not
/// doubled. CR/LF in `text` become spaces. RESP3 uses the same frame.
pub fn write_error(out: &mut BytesMut, text: &str) {
    let text = text.strip_prefix('-').unwrap_or(text);
    write_line(out, b'-', text.as_bytes());
}

/// Appends an integer, `:<n>\r\n`.
pub fn write_integer(out: &mut BytesMut, n: i64) {
    write_header(out, b':', n);
}

/// Appends a bulk string, `$<len>\r\n<bytes>\r\n` (binary-safe).
pub fn write_bulk(out: &mut BytesMut, bytes: &[u8]) {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(bytes.len()).as_bytes();
    out.reserve(1 + digits.len() + CRLF.len() + bytes.len() + CRLF.len());
    out.put_u8(b'$');
    out.put_slice(digits);
    out.put_slice(CRLF);
    out.put_slice(bytes);
    out.put_slice(CRLF);
}

/// Appends only the header of a bulk string, `$<len>\r\n`, for callers that
/// write a large payload themselves; they must follow it with exactly `len`
/// bytes and `\r\n`.
pub fn write_bulk_header(out: &mut BytesMut, len: usize) {
    write_header(out, b'$', len);
}

/// Appends a null (missing value): RESP2 null bulk `$-1\r\n`, RESP3 `_\r\n`.
pub fn write_null(out: &mut BytesMut, proto: Protocol) {
    let frame: &[u8] = match proto {
        Protocol::Resp2 => b"$-1\r\n",
        Protocol::Resp3 => b"_\r\n",
    };
    out.put_slice(frame);
}

/// Appends a null array (e.g. a timed-out `BLPOP`, an aborted `EXEC`): RESP2
/// `*-1\r\n`, RESP3 `_\r\n`.
pub fn write_null_array(out: &mut BytesMut, proto: Protocol) {
    let frame: &[u8] = match proto {
        Protocol::Resp2 => b"*-1\r\n",
        Protocol::Resp3 => b"_\r\n",
    };
    out.put_slice(frame);
}

/// Appends an array header, `*<n>\r\n`; `n` elements must follow.
pub fn write_array_len(out: &mut BytesMut, n: usize) {
    write_header(out, b'*', n);
}

/// Appends a map header for `n` key/value pairs: RESP3 `%<n>\r\n`, RESP2 an
/// array of `2n` elements. `n` keys each followed by its value must follow.
pub fn write_map_len(out: &mut BytesMut, n: usize, proto: Protocol) {
    match proto {
        Protocol::Resp2 => write_header(out, b'*', n.saturating_mul(2)),
        Protocol::Resp3 => write_header(out, b'%', n),
    }
}

/// Appends a set header: RESP3 `~<n>\r\n`, RESP2 `*<n>\r\n`.
pub fn write_set_len(out: &mut BytesMut, n: usize, proto: Protocol) {
    match proto {
        Protocol::Resp2 => write_header(out, b'*', n),
        Protocol::Resp3 => write_header(out, b'~', n),
    }
}

/// Appends a push header (pub/sub messages, invalidations): RESP3
/// `><n>\r\n`, RESP2 `*<n>\r\n`.
pub fn write_push_len(out: &mut BytesMut, n: usize, proto: Protocol) {
    match proto {
        Protocol::Resp2 => write_header(out, b'*', n),
        Protocol::Resp3 => write_header(out, b'>', n),
    }
}

/// Appends a double as Redis 7.0's `addReplyDouble` does: RESP3
/// `,<text>\r\n`, RESP2 a bulk string of the same text, formatted by
/// [`format_double_g17`](crate::format_double_g17) (`inf`, `-inf`, `3000`,
/// `1.5`, `1.1000000000000001`, `9.9999999999999995e-08`).
pub fn write_double(out: &mut BytesMut, value: f64, proto: Protocol) {
    let mut text = StackText::new();
    write_g17(&mut text, value);
    match proto {
        Protocol::Resp2 => write_bulk(out, text.as_bytes()),
        Protocol::Resp3 => write_line(out, b',', text.as_bytes()),
    }
}

/// Appends a boolean: RESP3 `#t\r\n`/`#f\r\n`, RESP2 `:1\r\n`/`:0\r\n`.
pub fn write_bool(out: &mut BytesMut, value: bool, proto: Protocol) {
    out.put_slice(match (proto, value) {
        (Protocol::Resp2, true) => b":1\r\n",
        (Protocol::Resp2, false) => b":0\r\n",
        (Protocol::Resp3, true) => b"#t\r\n",
        (Protocol::Resp3, false) => b"#f\r\n",
    });
}

/// Appends a verbatim string: RESP3 `=<len+4>\r\n<format>:<text>\r\n` (e.g.
/// format `txt` for `INFO`, `CLIENT LIST`), RESP2 a bulk string of `text`.
pub fn write_verbatim(out: &mut BytesMut, format: &[u8; 3], text: &[u8], proto: Protocol) {
    match proto {
        Protocol::Resp2 => write_bulk(out, text),
        Protocol::Resp3 => {
            write_header(out, b'=', text.len().saturating_add(4));
            out.reserve(format.len() + 1 + text.len() + CRLF.len());
            out.put_slice(format);
            out.put_u8(b':');
            out.put_slice(text);
            out.put_slice(CRLF);
        }
    }
}

/// Appends a big number given as decimal digits (optionally `-`): RESP3
/// `(<digits>\r\n`, RESP2 a bulk string.
pub fn write_big_number(out: &mut BytesMut, digits: &str, proto: Protocol) {
    match proto {
        Protocol::Resp2 => write_bulk(out, digits.as_bytes()),
        Protocol::Resp3 => write_line(out, b'(', digits.as_bytes()),
    }
}

/// Appends a request in multibulk form, `*<n>\r\n` then one bulk string per
/// argument: what clients send, and what the decoder parses.
pub fn write_request<A: AsRef<[u8]>>(out: &mut BytesMut, args: &[A]) {
    write_array_len(out, args.len());
    for arg in args {
        write_bulk(out, arg.as_ref());
    }
}

/// A reply as a tree, for replies that are simpler to build than to stream.
/// [`encode`](Self::encode) writes it with the `write_*` functions, so both
/// layers produce identical bytes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// `+OK`; see [`write_simple`].
    Simple(Cow<'static, str>),
    /// `-ERR ...`, full text including the code; see [`write_error`].
    Error(Cow<'static, str>),
    /// `:<n>`.
    Integer(i64),
    /// `$<len>` bulk string.
    Bulk(Bytes),
    /// Missing value: RESP2 `$-1`, RESP3 `_`.
    Null,
    /// Missing aggregate: RESP2 `*-1`, RESP3 `_`.
    NullArray,
    /// `*<n>`.
    Array(Vec<Reply>),
    /// RESP3 `%<n>`, RESP2 a flat array of keys and values.
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~<n>`, RESP2 an array.
    Set(Vec<Reply>),
    /// RESP3 `,`, RESP2 bulk string; see [`write_double`].
    Double(f64),
    /// RESP3 `#t`/`#f`, RESP2 `:1`/`:0`.
    Boolean(bool),
    /// RESP3 `=` with a three-byte format such as `txt`, RESP2 bulk string.
    Verbatim {
        /// The format, e.g. `*b"txt"`.
        format: [u8; 3],
        /// The text.
        text: Bytes,
    },
    /// RESP3 `>` out-of-band message, RESP2 an array.
    Push(Vec<Reply>),
    /// RESP3 `(` big number (decimal digits), RESP2 bulk string.
    BigNumber(Cow<'static, str>),
}

impl Reply {
    /// `+OK`.
    #[must_use]
    pub const fn ok() -> Self {
        Self::Simple(Cow::Borrowed("OK"))
    }

    /// A simple string.
    #[must_use]
    pub fn simple(text: impl Into<Cow<'static, str>>) -> Self {
        Self::Simple(text.into())
    }

    /// An error; `text` includes the code (`ERR ...`, `WRONGTYPE ...`).
    #[must_use]
    pub fn error(text: impl Into<Cow<'static, str>>) -> Self {
        Self::Error(text.into())
    }

    /// A bulk string.
    #[must_use]
    pub fn bulk(bytes: impl Into<Bytes>) -> Self {
        Self::Bulk(bytes.into())
    }

    /// Appends this reply's encoding in `proto` to `out`.
    pub fn encode(&self, proto: Protocol, out: &mut BytesMut) {
        match self {
            Self::Simple(text) => write_simple(out, text),
            Self::Error(text) => write_error(out, text),
            Self::Integer(n) => write_integer(out, *n),
            Self::Bulk(bytes) => write_bulk(out, bytes),
            Self::Null => write_null(out, proto),
            Self::NullArray => write_null_array(out, proto),
            Self::Array(items) => {
                write_array_len(out, items.len());
                encode_all(items, proto, out);
            }
            Self::Map(pairs) => {
                write_map_len(out, pairs.len(), proto);
                for (key, value) in pairs {
                    key.encode(proto, out);
                    value.encode(proto, out);
                }
            }
            Self::Set(items) => {
                write_set_len(out, items.len(), proto);
                encode_all(items, proto, out);
            }
            Self::Double(value) => write_double(out, *value, proto),
            Self::Boolean(value) => write_bool(out, *value, proto),
            Self::Verbatim { format, text } => write_verbatim(out, format, text, proto),
            Self::Push(items) => {
                write_push_len(out, items.len(), proto);
                encode_all(items, proto, out);
            }
            Self::BigNumber(digits) => write_big_number(out, digits, proto),
        }
    }

    /// This reply's encoding in `proto` as a fresh buffer.
    #[must_use]
    pub fn to_bytes(&self, proto: Protocol) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(proto, &mut out);
        out.freeze()
    }
}

fn encode_all(items: &[Reply], proto: Protocol, out: &mut BytesMut) {
    for item in items {
        item.encode(proto, out);
    }
}

impl From<i64> for Reply {
    fn from(n: i64) -> Self {
        Self::Integer(n)
    }
}

impl From<bool> for Reply {
    fn from(value: bool) -> Self {
        Self::Boolean(value)
    }
}

impl From<f64> for Reply {
    fn from(value: f64) -> Self {
        Self::Double(value)
    }
}

impl From<Bytes> for Reply {
    fn from(bytes: Bytes) -> Self {
        Self::Bulk(bytes)
    }
}

impl<T: Into<Reply>> From<Option<T>> for Reply {
    fn from(value: Option<T>) -> Self {
        value.map_or(Self::Null, Into::into)
    }
}
