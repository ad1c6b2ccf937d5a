//! Telling RESP apart from HTTP on a shared port, from a connection's first
//! bytes.
//!
//! The server's single-port detector calls [`looks_like_http`] first and
//! [`looks_like_resp`] only if that says [`Detection::No`], because an HTTP
//! request line (`GET / HTTP/1.1`) is also a well-formed inline RESP command.
//! Both functions are pure and look only at the bytes given; call them again
//! with more bytes after [`Detection::NeedMore`].
//!
//! Not distinguished here: the memcached text protocol (`get k\r\n` is also a
//! valid inline RESP command) and binary protocols, which all start with a
//! byte that is neither a letter, `*` nor `$` and so are [`Detection::No`]
//! for both.

/// Verdict of a protocol sniffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detection {
    /// The bytes are the start of this protocol.
    Yes,
    /// The bytes cannot be the start of this protocol.
    No,
    /// Every byte so far fits; read more and ask again.
    NeedMore,
}

/// How much of a first line [`looks_like_http`] reads before giving up (and
/// how much [`looks_like_resp`] reads before accepting an inline command on
/// the evidence of its first bytes). HTTP servers commonly cap the request
/// line at 8 KiB.
pub const DETECT_LINE_MAX: usize = 8 * 1024;

/// Whether `first` (a connection's first bytes) starts an HTTP/1.x request.
///
/// Rule: the first line must be `METHOD SP target SP HTTP/1.<digit>` ending in
/// `\r\n` or `\n`, where `METHOD` is an RFC 9110 token starting with a letter
/// and `target` is one or more visible ASCII characters. The verdict is [`Detection::No`] as soon as
/// a byte breaks that shape (so `SET k v` is rejected at the `v`, and a binary
/// protocol at its first byte), [`Detection::Yes`] once the line end is seen,
/// and [`Detection::NeedMore`] until then, for at most [`DETECT_LINE_MAX`]
/// bytes, after which the answer is [`Detection::No`].
#[must_use]
pub fn looks_like_http(first: &[u8]) -> Detection {
    const VERSION: &[u8] = b"HTTP/1.";

    #[derive(Clone, Copy)]
    enum Part {
        Method,
        Target {
            empty: bool,
        },
        /// Matched this many bytes of `HTTP/1.`.
        Version(usize),
        Minor,
        Cr,
        Lf,
    }

    let mut part = Part::Method;
    for (i, &byte) in first.iter().enumerate().take(DETECT_LINE_MAX) {
        part = match (part, byte) {
            (Part::Method, b' ') if i > 0 => Part::Target { empty: true },
            // Real methods start with a letter; requiring one rejects RESP's
            // `*` and `$` at the first byte.
            (Part::Method, byte)
                if is_token_byte(byte) && (i > 0 || byte.is_ascii_alphabetic()) =>
            {
                Part::Method
            }
            (Part::Target { empty: false }, b' ') => Part::Version(0),
            (Part::Target { .. }, 0x21..=0x7e) => Part::Target { empty: false },
            (Part::Version(matched), byte) if VERSION.get(matched) == Some(&byte) => {
                if matched + 1 == VERSION.len() {
                    Part::Minor
                } else {
                    Part::Version(matched + 1)
                }
            }
            (Part::Minor, b'0'..=b'9') => Part::Cr,
            (Part::Cr, b'\r') => Part::Lf,
            (Part::Cr | Part::Lf, b'\n') => return Detection::Yes,
            _ => return Detection::No,
        };
    }
    if first.len() >= DETECT_LINE_MAX {
        Detection::No
    } else {
        Detection::NeedMore
    }
}

/// Whether `first` (a connection's first bytes) starts a RESP request. Ask
/// [`looks_like_http`] first: HTTP request lines also pass this test.
///
/// Rule: a first byte of `*` (multibulk, what every client library sends) or
/// `$` is [`Detection::Yes`] at once. A first byte that is an ASCII letter
/// starts an inline command (`PING\r\n` typed into telnet): the rest of the
/// line up to `\n` must be printable, where printable means visible ASCII,
/// space, tab, a `\r` directly before the `\n`, or any byte ≥ 0x80 (so UTF-8
/// values typed interactively pass). Such a line is [`Detection::Yes`] once
/// its `\n` arrives or once [`DETECT_LINE_MAX`] printable bytes have arrived
/// (the decoder then enforces its own line limit), [`Detection::NeedMore`]
/// before that, and [`Detection::No`] at the first control byte. Anything
/// else, including an empty first line, is [`Detection::No`].
#[must_use]
pub fn looks_like_resp(first: &[u8]) -> Detection {
    match first.first() {
        None => return Detection::NeedMore,
        Some(b'*' | b'$') => return Detection::Yes,
        Some(byte) if byte.is_ascii_alphabetic() => {}
        Some(_) => return Detection::No,
    }
    let line = first.get(..DETECT_LINE_MAX).unwrap_or(first);
    for (i, &byte) in line.iter().enumerate() {
        match byte {
            b'\n' => return Detection::Yes,
            // Look ahead only within the window, so that a verdict, once
            // given, never changes as more bytes arrive.
            b'\r' => match line.get(i + 1) {
                Some(b'\n') | None => {}
                Some(_) => return Detection::No,
            },
            b'\t' | 0x20..=0x7e | 0x80..=0xff => {}
            _ => return Detection::No,
        }
    }
    if first.len() >= DETECT_LINE_MAX {
        Detection::Yes
    } else {
        Detection::NeedMore
    }
}

/// RFC 9110 `tchar`: the bytes allowed in an HTTP method.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}
