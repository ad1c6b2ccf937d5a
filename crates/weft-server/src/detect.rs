//! Protocol detection on the shared port: read until the first bytes say which protocol the
//! client speaks, then hand the connection, with the bytes read so far, to that protocol.
//!
//! Rules, in order: `0x16` (a TLS handshake record) is TLS, and the protocol is detected
//! again inside it (see [`crate::tls`]); `0xA0` is Hot Rod; `0x80` is memcached binary; `*` or `$` (multibulk) is
//! RESP; a first line of the form `METHOD target HTTP/1.x` is HTTP; a first line whose first
//! word is a memcached command (`get`, `set`, `stats`, … lower case, as memcached clients
//! send them) is memcached text — Redis clients always send multibulk, so only an inline
//! command typed by hand can start that way; any other printable command line is RESP
//! (Redis clients send inline commands too, e.g. `PING\r\n` from telnet). Anything else is
//! refused. A client that sends nothing is closed at its first-request deadline
//! (`first-request-timeout-secs`, see `deadline.rs`).

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;
use weft_resp::Detection;

/// Bytes read at most before giving up on recognising a protocol.
pub const DETECT_BYTES_MAX: usize = 8 * 1024;

/// What a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// Redis serialization protocol.
    Resp,
    /// HTTP/1.x (REST and metrics).
    Http,
    /// Infinispan Hot Rod.
    HotRod,
    /// memcached binary protocol.
    MemcachedBinary,
    /// memcached text protocol.
    MemcachedText,
    /// A TLS ClientHello: the protocol is inside.
    Tls,
    /// Nothing recognisable.
    Unknown,
}

/// Classifies the first bytes of a connection; `None` means more bytes are needed.
#[must_use]
pub fn classify(first: &[u8]) -> Option<Protocol> {
    match first.first()? {
        &crate::tls::HANDSHAKE_RECORD => return Some(Protocol::Tls),
        0xA0 => return Some(Protocol::HotRod),
        0x80 => return Some(Protocol::MemcachedBinary),
        b'*' | b'$' => return Some(Protocol::Resp),
        _ => {}
    }
    match weft_resp::looks_like_http(first) {
        Detection::Yes => return Some(Protocol::Http),
        Detection::NeedMore if first.len() < DETECT_BYTES_MAX => return None,
        _ => {}
    }
    match weft_memcached::text::looks_like_text_command(first) {
        Some(true) => return Some(Protocol::MemcachedText),
        None if first.len() < DETECT_BYTES_MAX => return None,
        _ => {}
    }
    match weft_resp::looks_like_resp(first) {
        Detection::Yes => Some(Protocol::Resp),
        Detection::NeedMore if first.len() < DETECT_BYTES_MAX => None,
        _ => Some(Protocol::Unknown),
    }
}

/// Reads from `stream` until the protocol is known, giving up at `deadline` (if any);
/// returns the protocol and the bytes read. `buffer` holds bytes already read (classified
/// first).
///
/// # Errors
/// If the peer closes, the deadline passes or the read fails.
pub async fn detect<S: AsyncRead + Unpin>(
    stream: &mut S,
    mut buffer: BytesMut,
    deadline: Option<Instant>,
) -> std::io::Result<(Protocol, BytesMut)> {
    if let Some(protocol) = classify(&buffer) {
        return Ok((protocol, buffer));
    }
    let read = async {
        loop {
            read_some(stream, &mut buffer).await?;
            if let Some(protocol) = classify(&buffer) {
                return Ok(protocol);
            }
        }
    };
    let protocol = within(deadline, read).await?;
    Ok((protocol, buffer))
}

/// Reads at least one byte into `buffer`.
///
/// # Errors
/// If the peer closes or the read fails.
pub async fn read_some<S: AsyncRead + Unpin>(
    stream: &mut S,
    buffer: &mut BytesMut,
) -> std::io::Result<()> {
    if buffer.capacity() == buffer.len() {
        buffer.reserve(4096);
    }
    if stream.read_buf(buffer).await? == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "closed before sending a request",
        ));
    }
    Ok(())
}

/// Runs `work` until `deadline` (if any), which fails it with `TimedOut`.
///
/// # Errors
/// `work`'s, or `TimedOut`.
pub async fn within<T>(
    deadline: Option<Instant>,
    work: impl Future<Output = std::io::Result<T>>,
) -> std::io::Result<T> {
    let Some(deadline) = deadline else {
        return work.await;
    };
    match tokio::time::timeout_at(deadline, work).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no request within first-request-timeout-secs",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each protocol's opening bytes are told apart, and partial input waits.
    #[test]
    fn classifies_first_bytes() {
        assert_eq!(classify(b"*1\r\n$4\r\nPING\r\n"), Some(Protocol::Resp));
        assert_eq!(classify(b"PING\r\n"), Some(Protocol::Resp));
        assert_eq!(
            classify(b"GET /rest/v2/caches HTTP/1.1\r\n"),
            Some(Protocol::Http)
        );
        assert_eq!(classify(b"GET key\r\n"), Some(Protocol::Resp));
        assert_eq!(classify(b"get key\r\n"), Some(Protocol::MemcachedText));
        assert_eq!(
            classify(b"set k 0 0 1\r\nx\r\n"),
            Some(Protocol::MemcachedText)
        );
        assert_eq!(classify(b"version\r\n"), Some(Protocol::MemcachedText));
        assert_eq!(classify(b"ping\r\n"), Some(Protocol::Resp));
        assert_eq!(classify(b"gets"), None);
        assert_eq!(classify(&[0xA0, 0x01]), Some(Protocol::HotRod));
        assert_eq!(classify(&[0x80, 0x01]), Some(Protocol::MemcachedBinary));
        assert_eq!(classify(&[0x16, 0x03, 0x01]), Some(Protocol::Tls));
        assert_eq!(classify(b"GET /rest"), None);
        assert_eq!(classify(b""), None);
        assert_eq!(
            classify(&[0x00, 0xff, 0x13, b'\n']),
            Some(Protocol::Unknown)
        );
    }
}
