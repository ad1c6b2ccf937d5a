//! Request framing: multibulk (`*<n>\r\n$<len>\r\n<bytes>\r\n...`) and inline
//! (`SET k v\r\n`) requests, following Redis's `processMultibulkBuffer` and
//! `processInlineBuffer`.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::ProtocolError;
use crate::inline::{InlineArg, split_inline};
use crate::number::parse_i64_strict;

/// Redis's default `proto-max-bulk-len`.
pub const DEFAULT_BULK_BYTES_MAX: usize = 512 * 1024 * 1024;
/// The multibulk argument-count cap of Redis before 7.0 (Redis 7 raised it to
/// `INT_MAX`, but a million arguments is already far beyond any real command).
pub const DEFAULT_MULTIBULK_LENGTH_MAX: usize = 1024 * 1024;
/// Redis's `PROTO_INLINE_MAX_SIZE`.
pub const DEFAULT_INLINE_BYTES_MAX: usize = 64 * 1024;

/// How many argument slots a multibulk request reserves before its arguments
/// have actually arrived. Redis uses the same cap: the declared count is
/// untrusted, so `*1048576\r\n` must not allocate a million slots up front.
const ARGS_PREALLOCATED_MAX: usize = 1024;

/// Bounds on what a client may declare or send in one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted `$<len>`; Redis's `proto-max-bulk-len` (default
    /// 512 MiB). Larger declarations fail with `invalid bulk length`.
    pub bulk_bytes_max: usize,
    /// Largest accepted `*<n>` (default 1024 × 1024). Larger declarations fail
    /// with `invalid multibulk length`.
    pub multibulk_length_max: usize,
    /// Longest line accepted without its terminator: a whole inline request,
    /// or a `*<n>` / `$<len>` header line (default 64 KiB, Redis's
    /// `PROTO_INLINE_MAX_SIZE`, which Redis applies to all three).
    pub inline_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            bulk_bytes_max: DEFAULT_BULK_BYTES_MAX,
            multibulk_length_max: DEFAULT_MULTIBULK_LENGTH_MAX,
            inline_bytes_max: DEFAULT_INLINE_BYTES_MAX,
        }
    }
}

/// One complete client request: the command name followed by its arguments,
/// exactly as sent (binary-safe, not case-folded). Never empty: empty
/// requests (`*0\r\n`, `*-1\r\n`, blank inline lines) are skipped, as in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `args[0]` is the command name.
    pub args: Vec<Bytes>,
}

impl Request {
    /// The command name (`args[0]`).
    #[must_use]
    pub fn command(&self) -> Option<&Bytes> {
        self.args.first()
    }
}

/// Incremental, zero-copy request decoder over a connection's read buffer.
///
/// Feed it the same [`BytesMut`] after every read; it removes each complete
/// request from the front of the buffer and returns its arguments as
/// [`Bytes`] slices of the received data (inline arguments containing quotes
/// or escapes are the only copies). Between calls that return `Ok(None)` it
/// remembers how far it got, so a 512 MiB bulk arriving in 16 KiB reads costs
/// O(1) per read rather than a rescan, and header lines are searched for
/// their terminator only once per byte.
///
/// Contract: between calls the caller may only append to the buffer. Bytes
/// that belong to an unfinished request stay in the buffer until the request
/// completes; memory held by the decoder itself is bounded by the arguments
/// already received.
#[derive(Debug, Default)]
pub struct RequestDecoder {
    limits: Limits,
    state: State,
    /// How many bytes of the line starting at the current parse position have
    /// already been searched for its terminator without finding it.
    scanned: usize,
    /// Capacity kept from the last multibulk request's argument ranges, so that
    /// a pipeline of requests does not allocate a range list for each one.
    spare_ranges: Vec<Range<usize>>,
}

#[derive(Debug, Default)]
enum State {
    /// At the start of a request, which is at offset 0 of the buffer because
    /// skipped empty requests are removed immediately.
    #[default]
    Start,
    /// Inside a multibulk request whose header has been parsed.
    Multibulk(Multibulk),
}

#[derive(Debug)]
struct Multibulk {
    /// Arguments still to read.
    remaining: usize,
    /// Byte ranges of the arguments read so far, relative to the request start.
    args: Vec<Range<usize>>,
    /// Offset of the first unparsed byte, relative to the request start.
    pos: usize,
    /// Declared length of the bulk whose `$<len>` line has been parsed but
    /// whose payload has not fully arrived.
    bulk_len: Option<usize>,
}

/// What one parse step found at the front of the buffer.
enum Progress {
    NeedMore,
    /// An empty request of this many bytes, to be dropped.
    Skip(usize),
    Multibulk {
        consumed: usize,
        args: Vec<Range<usize>>,
    },
    Inline {
        consumed: usize,
        args: Vec<InlineArg>,
    },
}

/// Outcome of searching a header or inline line for its terminator.
enum LineEnd {
    /// The terminator's offset from the line start.
    Found(usize),
    NotYet,
    TooLong,
}

impl RequestDecoder {
    /// A decoder enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::Start,
            scanned: 0,
            spare_ranges: Vec::new(),
        }
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Changes the limits (e.g. after `CONFIG SET proto-max-bulk-len`); they
    /// apply to headers parsed from now on.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Whether part of a request has been parsed and the rest is awaited.
    #[must_use]
    pub fn is_mid_request(&self) -> bool {
        matches!(self.state, State::Multibulk(_))
    }

    /// Removes the next complete request from the front of `buf` and returns
    /// it, or returns `Ok(None)` if `buf` holds only part of one (whose bytes
    /// then stay in place, to be extended by the next read). Empty requests
    /// are removed and skipped.
    ///
    /// # Errors
    ///
    /// A [`ProtocolError`] when the data cannot be a valid request. The
    /// connection cannot be resynchronised: send
    /// [`ProtocolError::write_reply`] and close it. The decoder resets itself,
    /// and the buffer's contents are left unspecified.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        loop {
            let progress = match self.advance(buf) {
                Ok(progress) => progress,
                Err(error) => {
                    self.reset();
                    return Err(error);
                }
            };
            match progress {
                Progress::NeedMore => return Ok(None),
                Progress::Skip(consumed) => buf.advance(consumed),
                Progress::Multibulk { consumed, mut args } => {
                    let frame = buf.split_to(consumed).freeze();
                    let request = Request {
                        args: args.drain(..).map(|range| frame.slice(range)).collect(),
                    };
                    if args.capacity() <= ARGS_PREALLOCATED_MAX {
                        self.spare_ranges = args;
                    }
                    return Ok(Some(request));
                }
                Progress::Inline { consumed, args } => {
                    let frame = buf.split_to(consumed).freeze();
                    let args = args
                        .into_iter()
                        .map(|arg| match arg {
                            InlineArg::Borrowed(range) => frame.slice(range),
                            InlineArg::Owned(bytes) => Bytes::from(bytes),
                        })
                        .collect();
                    return Ok(Some(Request { args }));
                }
            }
        }
    }

    /// Forgets any partially parsed request.
    pub fn reset(&mut self) {
        self.state = State::Start;
        self.scanned = 0;
    }

    /// One parse step over `buf`, which starts at the current request.
    fn advance(&mut self, buf: &[u8]) -> Result<Progress, ProtocolError> {
        if let State::Multibulk(multibulk) = &self.state {
            if multibulk.pos > buf.len() {
                // The caller broke the append-only contract (a different or
                // truncated buffer); start over rather than index out of
                // bounds.
                self.reset();
            }
        }
        let limits = self.limits;
        let State::Multibulk(multibulk) = &mut self.state else {
            return match buf.first() {
                None => Ok(Progress::NeedMore),
                Some(b'*') => self.start_multibulk(buf),
                Some(_) => self.inline(buf),
            };
        };
        let progress = continue_multibulk(multibulk, &mut self.scanned, buf, &limits)?;
        if !matches!(progress, Progress::NeedMore) {
            self.state = State::Start;
        }
        Ok(progress)
    }

    /// Parses the `*<n>\r\n` header at the start of `buf`, then as many
    /// arguments as have arrived.
    fn start_multibulk(&mut self, buf: &[u8]) -> Result<Progress, ProtocolError> {
        let limits = self.limits;
        let cr = match find_line_end(buf, 0, &mut self.scanned, b'\r', limits.inline_bytes_max) {
            LineEnd::Found(cr) => cr,
            LineEnd::NotYet => return Ok(Progress::NeedMore),
            LineEnd::TooLong => return Err(ProtocolError::MultibulkCountTooBig),
        };
        // Redis waits for the byte after the CR and then skips it unchecked.
        if cr + 1 >= buf.len() {
            return Ok(Progress::NeedMore);
        }
        let count = buf
            .get(1..cr)
            .and_then(parse_i64_strict)
            .ok_or(ProtocolError::InvalidMultibulkLength)?;
        let header_len = cr + 2;
        self.scanned = 0;
        // Redis treats a zero or negative count as an empty request.
        let Ok(count) = usize::try_from(count) else {
            return Ok(Progress::Skip(header_len));
        };
        if count == 0 {
            return Ok(Progress::Skip(header_len));
        }
        if count > limits.multibulk_length_max {
            return Err(ProtocolError::InvalidMultibulkLength);
        }
        let mut multibulk = Multibulk {
            remaining: count,
            args: {
                let mut ranges = std::mem::take(&mut self.spare_ranges);
                ranges.clear();
                ranges.reserve(count.min(ARGS_PREALLOCATED_MAX));
                ranges
            },
            pos: header_len,
            bulk_len: None,
        };
        let progress = continue_multibulk(&mut multibulk, &mut self.scanned, buf, &limits)?;
        if matches!(progress, Progress::NeedMore) {
            self.state = State::Multibulk(multibulk);
        }
        Ok(progress)
    }

    /// Parses an inline request line at the start of `buf`.
    fn inline(&mut self, buf: &[u8]) -> Result<Progress, ProtocolError> {
        let lf = match find_line_end(
            buf,
            0,
            &mut self.scanned,
            b'\n',
            self.limits.inline_bytes_max,
        ) {
            LineEnd::Found(lf) => lf,
            LineEnd::NotYet => return Ok(Progress::NeedMore),
            LineEnd::TooLong => return Err(ProtocolError::InlineTooBig),
        };
        self.scanned = 0;
        let mut line = buf.get(..lf).unwrap_or_default();
        if let Some(without_cr) = line.strip_suffix(b"\r") {
            line = without_cr;
        }
        let args = split_inline(line)?;
        let consumed = lf + 1;
        if args.is_empty() {
            Ok(Progress::Skip(consumed))
        } else {
            Ok(Progress::Inline { consumed, args })
        }
    }
}

/// Reads bulk headers and payloads of a multibulk request until it is
/// complete or the buffer runs out.
fn continue_multibulk(
    multibulk: &mut Multibulk,
    scanned: &mut usize,
    buf: &[u8],
    limits: &Limits,
) -> Result<Progress, ProtocolError> {
    while multibulk.remaining > 0 {
        let len = match multibulk.bulk_len {
            Some(len) => len,
            None => {
                let start = multibulk.pos;
                let cr = match find_line_end(buf, start, scanned, b'\r', limits.inline_bytes_max) {
                    LineEnd::Found(cr) => cr,
                    LineEnd::NotYet => return Ok(Progress::NeedMore),
                    LineEnd::TooLong => return Err(ProtocolError::BulkCountTooBig),
                };
                if start + cr + 1 >= buf.len() {
                    return Ok(Progress::NeedMore);
                }
                let line = buf.get(start..start + cr).unwrap_or_default();
                let Some((&first, digits)) = line.split_first() else {
                    // An empty line: Redis reports the CR it found instead.
                    return Err(ProtocolError::ExpectedDollar(b'\r'));
                };
                if first != b'$' {
                    return Err(ProtocolError::ExpectedDollar(first));
                }
                let len = parse_i64_strict(digits)
                    .and_then(|len| usize::try_from(len).ok())
                    .filter(|&len| len <= limits.bulk_bytes_max)
                    .ok_or(ProtocolError::InvalidBulkLength)?;
                *scanned = 0;
                multibulk.pos = start + cr + 2;
                multibulk.bulk_len = Some(len);
                len
            }
        };
        let start = multibulk.pos;
        let end = start.saturating_add(len);
        // Redis requires the two bytes after the payload to be present and
        // skips them without checking that they are CRLF; a wrong length is
        // caught by the next header's `$` check instead.
        let next = end.saturating_add(2);
        if buf.len() < next {
            return Ok(Progress::NeedMore);
        }
        multibulk.args.push(start..end);
        multibulk.pos = next;
        multibulk.bulk_len = None;
        multibulk.remaining -= 1;
    }
    Ok(Progress::Multibulk {
        consumed: multibulk.pos,
        args: std::mem::take(&mut multibulk.args),
    })
}

/// Searches the line starting at `start` for `terminator`, resuming after the
/// `scanned` bytes already searched. A line whose terminator is not within
/// its first `max_len + 1` bytes is too long; the verdict depends only on the
/// bytes, not on how they were split into reads.
fn find_line_end(
    buf: &[u8],
    start: usize,
    scanned: &mut usize,
    terminator: u8,
    max_len: usize,
) -> LineEnd {
    let window_end = start
        .saturating_add(max_len)
        .saturating_add(1)
        .min(buf.len());
    let from = start.saturating_add(*scanned).min(window_end);
    let window = buf.get(from..window_end).unwrap_or_default();
    if let Some(offset) = memchr::memchr(terminator, window) {
        let line_len = from - start + offset;
        *scanned = line_len;
        return LineEnd::Found(line_len);
    }
    *scanned = window_end.saturating_sub(start);
    if buf.len().saturating_sub(start) > max_len {
        LineEnd::TooLong
    } else {
        LineEnd::NotYet
    }
}

/// Parses the first complete request in `buf` without a decoder: returns it
/// with the number of bytes it occupied (including any empty requests
/// skipped before it), or `Ok(None)` if `buf` holds only part of one.
///
/// Arguments are copied out of `buf`, and every call starts from scratch, so
/// this is for tests and one-off parsing; connections should use
/// [`RequestDecoder`].
///
/// # Errors
///
/// A [`ProtocolError`] when the data cannot be a valid request.
pub fn parse_request(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(Request, usize)>, ProtocolError> {
    let mut decoder = RequestDecoder::new(*limits);
    let mut offset = 0;
    loop {
        let rest = buf.get(offset..).unwrap_or_default();
        match decoder.advance(rest)? {
            Progress::NeedMore => return Ok(None),
            Progress::Skip(consumed) => offset += consumed,
            Progress::Multibulk { consumed, args } => {
                let args = args
                    .into_iter()
                    .map(|range| Bytes::copy_from_slice(rest.get(range).unwrap_or_default()))
                    .collect();
                return Ok(Some((Request { args }, offset + consumed)));
            }
            Progress::Inline { consumed, args } => {
                let args = args
                    .into_iter()
                    .map(|arg| match arg {
                        InlineArg::Borrowed(range) => {
                            Bytes::copy_from_slice(rest.get(range).unwrap_or_default())
                        }
                        InlineArg::Owned(bytes) => Bytes::from(bytes),
                    })
                    .collect();
                return Ok(Some((Request { args }, offset + consumed)));
            }
        }
    }
}
