//! Request-framing errors, worded exactly as Redis words them.

use bytes::{BufMut, BytesMut};

/// A request that cannot be framed. The connection is unrecoverable after one
/// of these: Redis replies `-ERR <Display text>` and closes the connection, and
/// Weft does the same (see [`ProtocolError::write_reply`]).
///
/// `Display` is the exact Redis text without the `-ERR ` prefix, e.g.
/// `Protocol error: invalid bulk length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// `*<n>` where `n` is not a strict integer or exceeds
    /// [`Limits::multibulk_length_max`](crate::Limits::multibulk_length_max).
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// `$<len>` where `len` is not a strict integer, is negative, or exceeds
    /// [`Limits::bulk_bytes_max`](crate::Limits::bulk_bytes_max).
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// A line inside a multibulk request that does not start with `$`; holds
    /// the byte found instead.
    #[error("Protocol error: expected '$', got '{}'", ExpectedByte(*.0))]
    ExpectedDollar(u8),
    /// An inline request with an unterminated quote, or a closing quote that is
    /// not followed by whitespace (`"foo"bar`).
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// An inline request line longer than
    /// [`Limits::inline_bytes_max`](crate::Limits::inline_bytes_max).
    #[error("Protocol error: too big inline request")]
    InlineTooBig,
    /// A `*<n>` header line longer than
    /// [`Limits::inline_bytes_max`](crate::Limits::inline_bytes_max).
    #[error("Protocol error: too big mbulk count string")]
    MultibulkCountTooBig,
    /// A `$<len>` header line longer than
    /// [`Limits::inline_bytes_max`](crate::Limits::inline_bytes_max).
    #[error("Protocol error: too big bulk count string")]
    BulkCountTooBig,
}

impl ProtocolError {
    /// Appends the complete RESP error line Redis sends for this error,
    /// `-ERR Protocol error: ...\r\n`, to `out`.
    ///
    /// This is byte-exact where `Display` cannot be: for
    /// [`ExpectedDollar`](Self::ExpectedDollar) with a non-ASCII byte Redis
    /// sends the raw byte, which is not valid UTF-8 on its own.
    pub fn write_reply(&self, out: &mut BytesMut) {
        match *self {
            Self::ExpectedDollar(byte) => {
                const HEAD: &[u8] = b"-ERR Protocol error: expected '$', got '";
                out.reserve(HEAD.len() + 4);
                out.put_slice(HEAD);
                // Redis formats with `%c` into a C string, so a NUL byte ends
                // the message right there, and its error writer replaces CR/LF
                // with spaces to keep the reply framed.
                match byte {
                    0 => {}
                    b'\r' | b'\n' => out.put_slice(b" '"),
                    other => {
                        out.put_u8(other);
                        out.put_u8(b'\'');
                    }
                }
                out.put_slice(b"\r\n");
            }
            _ => {
                let text = self.to_string();
                out.reserve(text.len() + 7);
                out.put_slice(b"-ERR ");
                out.put_slice(text.as_bytes());
                out.put_slice(b"\r\n");
            }
        }
    }
}

/// Renders the offending byte of [`ProtocolError::ExpectedDollar`] the way
/// Redis does as far as UTF-8 allows (see [`ProtocolError::write_reply`]).
struct ExpectedByte(u8);

impl std::fmt::Display for ExpectedByte {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            // Mirrors `write_reply`: NUL truncates, CR/LF become a space. The
            // closing quote is written by the caller's format string, so the
            // NUL case cannot drop it here; it prints an empty char instead.
            0 => Ok(()),
            b'\r' | b'\n' => f.write_str(" "),
            other => std::fmt::Write::write_char(f, char::from(other)),
        }
    }
}
