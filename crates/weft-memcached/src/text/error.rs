//! Text-protocol errors, worded exactly as memcached 1.6 words them.

use bytes::{BufMut, BytesMut};

/// A request memcached answers with an error line; the connection goes on.
///
/// `Display` is the exact line without its `\r\n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TextError {
    /// An unknown command, or a known one with the wrong number of tokens.
    #[error("ERROR")]
    Error,
    /// A key over 250 bytes, or a number that does not parse where memcached says "format".
    #[error("CLIENT_ERROR bad command line format")]
    BadCommandLineFormat,
    /// A data block not followed by `\r\n` at its declared length.
    #[error("CLIENT_ERROR bad data chunk")]
    BadDataChunk,
    /// An expiration time that does not parse (`touch`, `gat`, `gats`, `flush_all`).
    #[error("CLIENT_ERROR invalid exptime argument")]
    InvalidExptime,
    /// An `incr`/`decr` amount that is not an unsigned 64-bit number.
    #[error("CLIENT_ERROR invalid numeric delta argument")]
    InvalidDelta,
    /// `incr`/`decr` of a value that is not a decimal number.
    #[error("CLIENT_ERROR cannot increment or decrement non-numeric value")]
    NonNumeric,
    /// `delete` with arguments other than `0` and `noreply`.
    #[error("CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]")]
    DeleteUsage,
    /// `stats detail` without `on`, `off` or `dump`.
    #[error("CLIENT_ERROR usage: stats detail on|off|dump")]
    StatsDetailUsage,
    /// An item over the item-size limit.
    #[error("SERVER_ERROR object too large for cache")]
    ObjectTooLarge,
    /// The cache refused to store (full, with `when-full = exception`).
    #[error("SERVER_ERROR out of memory storing object")]
    OutOfMemory,
}

impl TextError {
    /// Appends the error line with its `\r\n`.
    pub fn write_to(&self, out: &mut BytesMut) {
        let text = self.to_string();
        out.reserve(text.len() + 2);
        out.put_slice(text.as_bytes());
        out.put_slice(b"\r\n");
    }
}

/// A stream memcached stops reading: the connection is closed after
/// [`TextProtocolError::write_reply`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TextProtocolError {
    /// A command line longer than its limit
    /// ([`Limits::line_bytes_max`](crate::Limits::line_bytes_max), or
    /// [`Limits::multiget_line_bytes_max`](crate::Limits::multiget_line_bytes_max) for
    /// `get`/`gets`). memcached closes such a connection without a word; Weft first sends
    /// `CLIENT_ERROR line too long` so that the client can tell why.
    #[error("CLIENT_ERROR line too long")]
    LineTooLong,
    /// An unknown command whose last token starts with `HTTP/`: an HTTP request sent to a
    /// memcached port. memcached closes the connection without a reply, and so does Weft.
    #[error("HTTP request on a memcached connection")]
    HttpRequest,
}

impl TextProtocolError {
    /// Appends what is sent before closing: an error line, or nothing.
    pub fn write_reply(&self, out: &mut BytesMut) {
        match self {
            Self::LineTooLong => {
                out.put_slice(b"CLIENT_ERROR line too long\r\n");
            }
            Self::HttpRequest => {}
        }
    }
}
