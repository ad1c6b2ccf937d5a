//! The text-protocol request decoder, following memcached 1.6's `try_read_command_ascii`,
//! `tokenize_command` and `process_command_ascii`.

use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use super::{GetKind, Keys, StoreMode, TextCommand, TextError, TextProtocolError, TextRequest};
use crate::limits::{KEY_BYTES_MAX, Limits};
use crate::number::{safe_strtol, safe_strtoul, safe_strtoull};

/// memcached looks at this many tokens of a command line (`MAX_TOKENS` minus the terminal
/// token); a longer line counts as having one more token than that, whatever its length.
const TOKENS_MAX: usize = 23;
/// memcached refuses a long line starting with more spaces than this, even a `get`.
const LEADING_SPACES_MAX: usize = 100;

/// Incremental, zero-copy decoder of text-protocol requests over a connection's read buffer.
///
/// Feed it the same [`BytesMut`] after every read; it removes each complete request from
/// the front and returns it, keys and data as [`Bytes`] handles on the received bytes. It
/// remembers how far it searched for a line end and which storage command awaits its data
/// block, so a 1 MiB value arriving in small reads is not re-parsed per read.
///
/// Contract: between calls the caller may only append to the buffer.
#[derive(Debug, Default)]
pub struct TextDecoder {
    limits: Limits,
    state: State,
    /// Bytes of the current line already searched for `\n`.
    scanned: usize,
}

#[derive(Debug, Default)]
enum State {
    /// At the start of a command line.
    #[default]
    Line,
    /// A storage command's line was accepted; its data block is awaited.
    Data(PendingStore),
    /// Discarding the data block of a refused item: this many bytes are left.
    Swallow(usize),
}

/// A storage command waiting for its data block.
#[derive(Debug)]
struct PendingStore {
    mode: StoreMode,
    /// The key's range in the command line.
    key: Range<usize>,
    flags: u32,
    exptime: i32,
    noreply: bool,
    /// Bytes of the command line, with its `\n`.
    line_bytes: usize,
    /// Declared length of the data, without its `\r\n`.
    value_bytes: usize,
}

/// What a command line asks for, with ranges into the line.
enum Parsed {
    Get {
        kind: GetKind,
        keys: Range<usize>,
    },
    Store(PendingStore),
    TooLarge {
        mode: StoreMode,
        key: Range<usize>,
        swallow: usize,
    },
    Delete {
        key: Range<usize>,
    },
    Arithmetic {
        incr: bool,
        key: Range<usize>,
        delta: u64,
    },
    Touch {
        key: Range<usize>,
        exptime: i32,
    },
    Stats {
        group: Option<Range<usize>>,
        argument: Option<Range<usize>>,
    },
    Done(TextCommand),
}

impl TextDecoder {
    /// A decoder enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            state: State::Line,
            scanned: 0,
        }
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether part of a request has been read and the rest is awaited (or a refused data
    /// block is still being discarded).
    #[must_use]
    pub fn is_mid_request(&self) -> bool {
        !matches!(self.state, State::Line) || self.scanned > 0
    }

    /// Removes the next complete request from the front of `buf` and returns it, or
    /// `Ok(None)` if `buf` holds only part of one (which then stays in place).
    ///
    /// # Errors
    ///
    /// A [`TextProtocolError`] when memcached would stop reading the connection: send
    /// [`TextProtocolError::write_reply`] and close it. The decoder resets itself.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<TextRequest>, TextProtocolError> {
        loop {
            match &mut self.state {
                State::Swallow(remaining) => {
                    let discard = (*remaining).min(buf.len());
                    buf.advance(discard);
                    *remaining -= discard;
                    if *remaining > 0 {
                        return Ok(None);
                    }
                    self.state = State::Line;
                }
                State::Data(pending) => {
                    let total = pending
                        .line_bytes
                        .saturating_add(pending.value_bytes)
                        .saturating_add(2);
                    if buf.len() < total {
                        return Ok(None);
                    }
                    let State::Data(pending) = std::mem::take(&mut self.state) else {
                        return Ok(None);
                    };
                    let frame = buf.split_to(total).freeze();
                    return Ok(Some(complete_store(&frame, pending)));
                }
                State::Line => {
                    let lf = match self.find_line_end(buf) {
                        Ok(Some(lf)) => lf,
                        Ok(None) => return Ok(None),
                        Err(error) => {
                            self.reset();
                            return Err(error);
                        }
                    };
                    let line = command_line(buf.get(..lf).unwrap_or_default());
                    let (parsed, noreply) =
                        parse_line(buf.get(..line).unwrap_or_default(), &self.limits);
                    let parsed = match parsed {
                        Ok(parsed) => parsed,
                        Err(error) => {
                            self.reset();
                            return Err(error);
                        }
                    };
                    let frame_bytes = lf + 1;
                    if let Parsed::Store(mut pending) = parsed {
                        pending.line_bytes = frame_bytes;
                        self.state = State::Data(pending);
                        continue;
                    }
                    let frame = buf.split_to(frame_bytes).freeze();
                    let command = match parsed {
                        Parsed::Get { kind, keys } => TextCommand::Get {
                            kind,
                            keys: Keys::from_line(frame.slice(keys)),
                        },
                        Parsed::TooLarge { mode, key, swallow } => {
                            self.state = State::Swallow(swallow);
                            TextCommand::TooLarge {
                                mode,
                                key: frame.slice(key),
                            }
                        }
                        Parsed::Delete { key } => TextCommand::Delete {
                            key: frame.slice(key),
                        },
                        Parsed::Arithmetic { incr, key, delta } => TextCommand::Arithmetic {
                            incr,
                            key: frame.slice(key),
                            delta,
                        },
                        Parsed::Touch { key, exptime } => TextCommand::Touch {
                            key: frame.slice(key),
                            exptime,
                        },
                        Parsed::Stats { group, argument } => TextCommand::Stats {
                            group: group.map(|range| frame.slice(range)),
                            argument: argument.map(|range| frame.slice(range)),
                        },
                        Parsed::Done(command) => command,
                        // Handled above.
                        Parsed::Store(_) => TextCommand::Rejected(TextError::Error),
                    };
                    return Ok(Some(TextRequest { command, noreply }));
                }
            }
        }
    }

    /// Forgets any partially read request.
    pub fn reset(&mut self) {
        self.state = State::Line;
        self.scanned = 0;
    }

    /// The offset of the `\n` ending the line at the front of `buf`, resuming the search
    /// where the last call stopped. The verdict depends only on the bytes: a line is too long
    /// when its length exceeds the limit of its kind, and a line's kind is decided from its
    /// first bytes (`get `/`gets ` after at most 100 spaces is a multi-get).
    fn find_line_end(&mut self, buf: &[u8]) -> Result<Option<usize>, TextProtocolError> {
        let search_max = self
            .limits
            .line_bytes_max
            .max(self.limits.multiget_line_bytes_max);
        let window_end = search_max.saturating_add(1).min(buf.len());
        let from = self.scanned.min(window_end);
        let window = buf.get(from..window_end).unwrap_or_default();
        if let Some(offset) = memchr::memchr(b'\n', window) {
            let lf = from + offset;
            self.scanned = 0;
            if lf > self.line_limit(buf) {
                return Err(TextProtocolError::LineTooLong);
            }
            return Ok(Some(lf));
        }
        self.scanned = window_end;
        if buf.len() > self.line_limit(buf) {
            return Err(TextProtocolError::LineTooLong);
        }
        Ok(None)
    }

    /// The line limit for the line at the front of `buf`: the multi-get limit unless the
    /// bytes so far prove that the line is not a `get`/`gets` (so that a verdict never
    /// depends on how much has arrived).
    fn line_limit(&self, buf: &[u8]) -> usize {
        if may_be_multiget(buf) {
            self.limits
                .multiget_line_bytes_max
                .max(self.limits.line_bytes_max)
        } else {
            self.limits.line_bytes_max
        }
    }
}

/// Whether the bytes so far may start a `get`/`gets` line, which memcached lets grow past
/// the line limit (it checks `"get "` and `"gets "` after at most 100 leading spaces).
fn may_be_multiget(buf: &[u8]) -> bool {
    let spaces = buf.iter().take_while(|&&byte| byte == b' ').count();
    if spaces > LEADING_SPACES_MAX {
        return false;
    }
    let rest = buf.get(spaces..).unwrap_or_default();
    [&b"get "[..], &b"gets "[..]].iter().any(|prefix| {
        let common = rest.len().min(prefix.len());
        rest.get(..common) == prefix.get(..common)
    })
}

/// The length of the command proper within the line `raw` (which excludes the `\n`): a `\r`
/// before the `\n` is dropped unless it is the line's only byte, and the line ends at its
/// first NUL, since memcached handles it as a C string.
fn command_line(raw: &[u8]) -> usize {
    let mut len = raw.len();
    if len > 1 && raw.get(len - 1) == Some(&b'\r') {
        len -= 1;
    }
    memchr::memchr(0, raw.get(..len).unwrap_or_default()).unwrap_or(len)
}

/// A command line split at spaces: the first [`TOKENS_MAX`] tokens as ranges, and how many
/// memcached counts (`ntokens - 1`: at most [`TOKENS_MAX`]).
struct Tokens<'a> {
    line: &'a [u8],
    ranges: [(usize, usize); TOKENS_MAX],
    count: usize,
}

impl<'a> Tokens<'a> {
    fn new(line: &'a [u8]) -> Self {
        let mut ranges = [(0, 0); TOKENS_MAX];
        let mut count = 0;
        let mut position = 0;
        while count < TOKENS_MAX {
            while line.get(position) == Some(&b' ') {
                position += 1;
            }
            if position >= line.len() {
                break;
            }
            let end = memchr::memchr(b' ', line.get(position..).unwrap_or_default())
                .map_or(line.len(), |offset| position + offset);
            if let Some(slot) = ranges.get_mut(count) {
                *slot = (position, end);
            }
            count += 1;
            position = end;
        }
        Self {
            line,
            ranges,
            count,
        }
    }

    fn range(&self, index: usize) -> Range<usize> {
        let (start, end) = self.ranges.get(index).copied().unwrap_or((0, 0));
        start..end
    }

    fn get(&self, index: usize) -> &'a [u8] {
        if index >= self.count {
            return &[];
        }
        self.line.get(self.range(index)).unwrap_or_default()
    }

    /// memcached's `set_noreply_maybe`: whether the last token it looked at is `noreply`.
    fn noreply(&self) -> bool {
        self.count > 0 && self.get(self.count - 1) == b"noreply"
    }
}

/// Parses one command line (without `\r\n`); returns what it asks for and whether its
/// reply is suppressed.
fn parse_line(line: &[u8], limits: &Limits) -> (Result<Parsed, TextProtocolError>, bool) {
    let tokens = Tokens::new(line);
    let n = tokens.count;
    let rejected = |error| (Ok(Parsed::Done(TextCommand::Rejected(error))), false);
    // Every command has at least two characters.
    if n == 0 || tokens.get(0).len() < 2 {
        return rejected(TextError::Error);
    }
    let parsed = match tokens.get(0) {
        b"get" => retrieval(&tokens, GetKind::Get, false),
        b"gets" => retrieval(&tokens, GetKind::Gets, false),
        b"gat" => retrieval(&tokens, GetKind::Gat(0), true),
        b"gats" => retrieval(&tokens, GetKind::Gats(0), true),
        b"set" => return storage(&tokens, StoreMode::Set, limits),
        b"add" => return storage(&tokens, StoreMode::Add, limits),
        b"replace" => return storage(&tokens, StoreMode::Replace, limits),
        b"append" => return storage(&tokens, StoreMode::Append, limits),
        b"prepend" => return storage(&tokens, StoreMode::Prepend, limits),
        b"cas" => return storage(&tokens, StoreMode::Cas(0), limits),
        b"incr" => return arithmetic(&tokens, true),
        b"decr" => return arithmetic(&tokens, false),
        b"delete" => return delete(&tokens),
        b"touch" => return touch(&tokens),
        b"flush_all" => return flush_all(&tokens),
        b"verbosity" => return verbosity(&tokens),
        b"version" => Parsed::Done(TextCommand::Version),
        b"quit" => Parsed::Done(TextCommand::Quit),
        b"stats" => Parsed::Stats {
            group: (n >= 2).then(|| tokens.range(1)),
            argument: (n >= 3).then(|| tokens.range(2)),
        },
        _ => {
            // An HTTP request line ends in `HTTP/1.x`: memcached hangs up on it.
            if tokens.get(n - 1).starts_with(b"HTTP/") {
                return (Err(TextProtocolError::HttpRequest), false);
            }
            Parsed::Done(TextCommand::Rejected(TextError::Error))
        }
    };
    (Ok(parsed), false)
}

/// `get`/`gets`/`gat`/`gats`: at least one token after the command; for the touching forms
/// the first is the expiration time, and the keys (possibly none) follow.
fn retrieval(tokens: &Tokens<'_>, kind: GetKind, touching: bool) -> Parsed {
    if tokens.count < 2 {
        return Parsed::Done(TextCommand::Rejected(TextError::Error));
    }
    let mut kind = kind;
    let mut keys_start = tokens.range(0).end;
    if touching {
        let Some(exptime) = safe_strtol(tokens.get(1)) else {
            return Parsed::Done(TextCommand::Rejected(TextError::InvalidExptime));
        };
        kind = match kind {
            GetKind::Gats(_) => GetKind::Gats(exptime),
            _ => GetKind::Gat(exptime),
        };
        keys_start = tokens.range(1).end;
    }
    let keys = keys_start..tokens.line.len();
    let too_long = tokens
        .line
        .get(keys.clone())
        .unwrap_or_default()
        .split(|&byte| byte == b' ')
        .any(|key| key.len() > KEY_BYTES_MAX);
    if too_long {
        // memcached drops the values it had gathered and sends only the error.
        return Parsed::Done(TextCommand::Rejected(TextError::BadCommandLineFormat));
    }
    Parsed::Get { kind, keys }
}

/// `set`/`add`/`replace`/`append`/`prepend <key> <flags> <exptime> <bytes> [noreply]` and
/// `cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]` (memcached's
/// `process_update_command`).
fn storage(
    tokens: &Tokens<'_>,
    mode: StoreMode,
    limits: &Limits,
) -> (Result<Parsed, TextProtocolError>, bool) {
    let is_cas = matches!(mode, StoreMode::Cas(_));
    let counts = if is_cas { 6..=7 } else { 5..=6 };
    if !counts.contains(&tokens.count) {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(TextError::Error))),
            false,
        );
    }
    let noreply = tokens.noreply();
    let reject = |error| (Ok(Parsed::Done(TextCommand::Rejected(error))), noreply);
    let key = tokens.range(1);
    if key.len() > KEY_BYTES_MAX {
        return reject(TextError::BadCommandLineFormat);
    }
    let (Some(flags), Some(exptime), Some(length)) = (
        safe_strtoul(tokens.get(2)),
        safe_strtol(tokens.get(3)),
        safe_strtol(tokens.get(4)),
    ) else {
        return reject(TextError::BadCommandLineFormat);
    };
    let mode = if is_cas {
        match safe_strtoull(tokens.get(5)) {
            Some(unique) => StoreMode::Cas(unique),
            None => return reject(TextError::BadCommandLineFormat),
        }
    } else {
        mode
    };
    // memcached adds 2 for the `\r\n` and refuses what would overflow an int.
    let Ok(value_bytes) = usize::try_from(length) else {
        return reject(TextError::BadCommandLineFormat);
    };
    if length > i32::MAX - 2 {
        return reject(TextError::BadCommandLineFormat);
    }
    if !limits.item_fits(key.len(), flags, value_bytes) {
        let parsed = Parsed::TooLarge {
            mode,
            key,
            swallow: value_bytes + 2,
        };
        return (Ok(parsed), noreply);
    }
    let pending = PendingStore {
        mode,
        key,
        flags,
        exptime,
        noreply,
        line_bytes: 0,
        value_bytes,
    };
    (Ok(Parsed::Store(pending)), noreply)
}

/// The data block has arrived: `frame` is the command line and the block.
fn complete_store(frame: &Bytes, pending: PendingStore) -> TextRequest {
    let data_end = pending.line_bytes + pending.value_bytes;
    let terminator = frame.get(data_end..data_end + 2);
    let command = if terminator == Some(&b"\r\n"[..]) {
        TextCommand::Store {
            mode: pending.mode,
            key: frame.slice(pending.key),
            flags: pending.flags,
            exptime: pending.exptime,
            value: frame.slice(pending.line_bytes..data_end),
        }
    } else {
        TextCommand::Rejected(TextError::BadDataChunk)
    };
    TextRequest {
        command,
        noreply: pending.noreply,
    }
}

/// `incr`/`decr <key> <delta> [noreply]`.
fn arithmetic(tokens: &Tokens<'_>, incr: bool) -> (Result<Parsed, TextProtocolError>, bool) {
    if !(3..=4).contains(&tokens.count) {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(TextError::Error))),
            false,
        );
    }
    let noreply = tokens.noreply();
    let key = tokens.range(1);
    let parsed = if key.len() > KEY_BYTES_MAX {
        Parsed::Done(TextCommand::Rejected(TextError::BadCommandLineFormat))
    } else {
        match safe_strtoull(tokens.get(2)) {
            Some(delta) => Parsed::Arithmetic { incr, key, delta },
            None => Parsed::Done(TextCommand::Rejected(TextError::InvalidDelta)),
        }
    };
    (Ok(parsed), noreply)
}

/// `delete <key> [0] [noreply]` (the old hold time is accepted only as `0`).
fn delete(tokens: &Tokens<'_>) -> (Result<Parsed, TextProtocolError>, bool) {
    let n = tokens.count;
    if !(2..=4).contains(&n) {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(TextError::Error))),
            false,
        );
    }
    let mut noreply = false;
    if n > 2 {
        let hold_is_zero = tokens.get(2) == b"0";
        noreply = tokens.noreply();
        let valid = (n == 3 && (hold_is_zero || noreply)) || (n == 4 && hold_is_zero && noreply);
        if !valid {
            return (
                Ok(Parsed::Done(TextCommand::Rejected(TextError::DeleteUsage))),
                noreply,
            );
        }
    }
    let key = tokens.range(1);
    if key.len() > KEY_BYTES_MAX {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(
                TextError::BadCommandLineFormat,
            ))),
            noreply,
        );
    }
    (Ok(Parsed::Delete { key }), noreply)
}

/// `touch <key> <exptime> [noreply]`.
fn touch(tokens: &Tokens<'_>) -> (Result<Parsed, TextProtocolError>, bool) {
    if !(3..=4).contains(&tokens.count) {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(TextError::Error))),
            false,
        );
    }
    let noreply = tokens.noreply();
    let key = tokens.range(1);
    let parsed = if key.len() > KEY_BYTES_MAX {
        Parsed::Done(TextCommand::Rejected(TextError::BadCommandLineFormat))
    } else {
        match safe_strtol(tokens.get(2)) {
            Some(exptime) => Parsed::Touch { key, exptime },
            None => Parsed::Done(TextCommand::Rejected(TextError::InvalidExptime)),
        }
    };
    (Ok(parsed), noreply)
}

/// `flush_all [delay] [noreply]`.
fn flush_all(tokens: &Tokens<'_>) -> (Result<Parsed, TextProtocolError>, bool) {
    let n = tokens.count;
    if !(1..=3).contains(&n) {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(TextError::Error))),
            false,
        );
    }
    let noreply = tokens.noreply();
    let mut delay = 0;
    if n != if noreply { 2 } else { 1 } {
        match safe_strtol(tokens.get(1)) {
            Some(parsed) => delay = parsed,
            None => {
                return (
                    Ok(Parsed::Done(TextCommand::Rejected(
                        TextError::InvalidExptime,
                    ))),
                    noreply,
                );
            }
        }
    }
    (Ok(Parsed::Done(TextCommand::FlushAll { delay })), noreply)
}

/// `verbosity <level> [noreply]`.
fn verbosity(tokens: &Tokens<'_>) -> (Result<Parsed, TextProtocolError>, bool) {
    if !(2..=3).contains(&tokens.count) {
        return (
            Ok(Parsed::Done(TextCommand::Rejected(TextError::Error))),
            false,
        );
    }
    let noreply = tokens.noreply();
    let command = match safe_strtoul(tokens.get(1)) {
        Some(level) => TextCommand::Verbosity { level },
        None => TextCommand::Rejected(TextError::BadCommandLineFormat),
    };
    (Ok(Parsed::Done(command)), noreply)
}
