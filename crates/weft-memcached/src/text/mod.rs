//! The memcached text protocol ("ASCII protocol"): request types, the incremental decoder
//! ([`TextDecoder`]), reply writers and a client-side request writer.
//!
//! The decoder follows memcached 1.6's `proto_text.c`: a command line ends at `\n` (a `\r`
//! before it is dropped), is cut at its first NUL byte, and is split into tokens at spaces
//! only, so keys may hold any other byte (tabs and control characters included, as with the
//! real daemon); at most 23 tokens are looked at except for the keys of a retrieval.
//! Validation happens in memcached's order and answers with its texts ([`TextError`]); each
//! error leaves the stream where memcached leaves it: a refused command line does not
//! consume the data block that may follow it (memcached then reads that block as a command
//! line, usually answering `ERROR`), a too-large item's data block is discarded as it
//! arrives, and a data block that does not end in `\r\n` is consumed by its declared length.

mod decode;
mod detect;
mod encode;
mod error;

use bytes::Bytes;

pub use decode::TextDecoder;
pub use detect::{DETECTED_COMMANDS, looks_like_text_command};
pub use encode::{
    EncodeError, Status, write_client_error, write_end, write_error, write_line, write_number,
    write_request, write_server_error, write_stat, write_stat_number, write_status, write_value,
    write_version,
};
pub use error::{TextError, TextProtocolError};

/// One decoded request and whether its reply is to be suppressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRequest {
    /// What to do.
    pub command: TextCommand,
    /// The command line ended in `noreply` where memcached looks for it: send nothing back,
    /// not even an error (memcached suppresses error lines of such commands too).
    pub noreply: bool,
}

/// A text-protocol command, with its arguments parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextCommand {
    /// `get`, `gets`, `gat`, `gats`: one reply per key found, then `END`.
    Get {
        /// Which retrieval, and the new expiration time of `gat`/`gats`.
        kind: GetKind,
        /// The keys, in the order given (repeats included), each at most
        /// [`KEY_BYTES_MAX`](crate::KEY_BYTES_MAX) bytes.
        keys: Keys,
    },
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`, with its data block.
    Store {
        /// Which storage command (the CAS unique of `cas` inside).
        mode: StoreMode,
        /// The key.
        key: Bytes,
        /// Client flags.
        flags: u32,
        /// Expiration time as sent: 0 = none, up to 30 days relative seconds, beyond that an
        /// absolute Unix time, negative = already expired.
        exptime: i32,
        /// The data block, without its `\r\n`.
        value: Bytes,
    },
    /// A storage command whose item exceeds [`Limits::item_bytes_max`](crate::Limits): reply
    /// `SERVER_ERROR object too large for cache`. Its data block is being discarded. For
    /// `set`, memcached also removes the key's current value (so that no stale value
    /// survives a failed overwrite).
    TooLarge {
        /// Which storage command.
        mode: StoreMode,
        /// The key.
        key: Bytes,
    },
    /// `delete <key>`.
    Delete {
        /// The key.
        key: Bytes,
    },
    /// `incr`/`decr <key> <delta>`.
    Arithmetic {
        /// `incr` (wrapping at 2^64) or `decr` (stopping at 0).
        incr: bool,
        /// The key.
        key: Bytes,
        /// The amount.
        delta: u64,
    },
    /// `touch <key> <exptime>`.
    Touch {
        /// The key.
        key: Bytes,
        /// New expiration time, as in [`TextCommand::Store`].
        exptime: i32,
    },
    /// `flush_all [delay]`.
    FlushAll {
        /// 0 (or negative) = now; otherwise when, as an expiration time.
        delay: i32,
    },
    /// `version`.
    Version,
    /// `verbosity <level>`.
    Verbosity {
        /// The level asked for.
        level: u32,
    },
    /// `stats [group [argument]]`.
    Stats {
        /// The group (`items`, `slabs`, `settings`, `reset`, …); `None` for general stats.
        group: Option<Bytes>,
        /// The token after the group (`stats detail on`), if any.
        argument: Option<Bytes>,
    },
    /// `quit`: close the connection, replying nothing.
    Quit,
    /// A refused request: reply with this error line (unless `noreply`).
    Rejected(TextError),
}

/// The retrieval commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetKind {
    /// `get`: value and flags.
    Get,
    /// `gets`: value, flags and CAS unique.
    Gets,
    /// `gat <exptime>`: as `get`, and set each found key's expiration time.
    Gat(i32),
    /// `gats <exptime>`: as `gets`, and set each found key's expiration time.
    Gats(i32),
}

impl GetKind {
    /// Whether hits carry their CAS unique.
    #[must_use]
    pub fn returns_cas(self) -> bool {
        matches!(self, Self::Gets | Self::Gats(_))
    }

    /// The new expiration time of a get-and-touch.
    #[must_use]
    pub fn touch(self) -> Option<i32> {
        match self {
            Self::Gat(exptime) | Self::Gats(exptime) => Some(exptime),
            Self::Get | Self::Gets => None,
        }
    }

    /// The command's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Gets => "gets",
            Self::Gat(_) => "gat",
            Self::Gats(_) => "gats",
        }
    }
}

/// The storage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// Store unconditionally.
    Set,
    /// Store only if absent.
    Add,
    /// Store only if present.
    Replace,
    /// Add the data after the present value (flags and expiration kept).
    Append,
    /// Add the data before the present value (flags and expiration kept).
    Prepend,
    /// Store only if the present value still has this CAS unique.
    Cas(u64),
}

impl StoreMode {
    /// The command's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Add => "add",
            Self::Replace => "replace",
            Self::Append => "append",
            Self::Prepend => "prepend",
            Self::Cas(_) => "cas",
        }
    }
}

/// The keys of a retrieval: the rest of its command line, split at spaces when iterated
/// (no allocation per key). Every key is non-empty and at most
/// [`KEY_BYTES_MAX`](crate::KEY_BYTES_MAX) bytes.
#[derive(Debug, Clone, Default)]
pub struct Keys {
    line: Bytes,
}

/// Key lists are equal when they hold the same keys in the same order, however spaced.
impl PartialEq for Keys {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Keys {}

impl Keys {
    /// Keys from their space-separated line; no validation (the decoder validates).
    pub(crate) fn from_line(line: Bytes) -> Self {
        Self { line }
    }

    /// Keys from a list, for building requests in code. Keys must not hold spaces.
    #[must_use]
    pub fn from_keys<K: AsRef<[u8]>>(keys: &[K]) -> Self {
        let mut line = Vec::new();
        for key in keys {
            if !line.is_empty() {
                line.push(b' ');
            }
            line.extend_from_slice(key.as_ref());
        }
        Self {
            line: Bytes::from(line),
        }
    }

    /// The keys in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.line
            .split(|&byte| byte == b' ')
            .filter(|key| !key.is_empty())
    }

    /// The keys in order as zero-copy handles on the received line.
    pub fn iter_bytes(&self) -> impl Iterator<Item = Bytes> + '_ {
        self.iter().map(|key| self.line.slice_ref(key))
    }

    /// How many keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none (`gat 10` with no key is valid and answers `END`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}
