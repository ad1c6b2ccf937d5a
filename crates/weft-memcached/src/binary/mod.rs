//! The memcached binary protocol: 24-byte headers, request packets ([`BinaryDecoder`]),
//! response writers, status codes, and for the client side a request writer and a response
//! reader.
//!
//! Requests follow memcached 1.6's `proto_bin.c`: magic `0x80`, opcode, key length, extras
//! length, data type, vbucket, total body length, opaque, CAS, all big-endian; then extras,
//! key and value. What memcached refuses by closing the connection is a
//! [`BinaryProtocolError`]; what it answers and goes on from is a [`BinaryCommand`]
//! (including [`BinaryCommand::Unsupported`] and [`BinaryCommand::TooLarge`], whose value
//! bytes are discarded as they arrive). One deliberate difference: memcached leaves the
//! value bytes of an unknown opcode partly unread and loses track of the stream; Weft
//! discards exactly the body, so the next request is read correctly.

mod decode;
mod encode;

use bytes::Bytes;

pub use decode::BinaryDecoder;
pub use encode::{
    EncodeError, Response, ResponseError, ResponseHeader, read_response, write_error,
    write_request, write_response,
};

/// Length of every request and response header.
pub const HEADER_BYTES: usize = 24;
/// First byte of a request.
pub const REQUEST_MAGIC: u8 = 0x80;
/// First byte of a response.
pub const RESPONSE_MAGIC: u8 = 0x81;

/// Opcodes (memcached's `protocol_binary.h`).
pub mod opcode {
    /// GET
    pub const GET: u8 = 0x00;
    /// SET
    pub const SET: u8 = 0x01;
    /// ADD
    pub const ADD: u8 = 0x02;
    /// REPLACE
    pub const REPLACE: u8 = 0x03;
    /// DELETE
    pub const DELETE: u8 = 0x04;
    /// INCREMENT
    pub const INCREMENT: u8 = 0x05;
    /// DECREMENT
    pub const DECREMENT: u8 = 0x06;
    /// QUIT
    pub const QUIT: u8 = 0x07;
    /// FLUSH
    pub const FLUSH: u8 = 0x08;
    /// GETQ: GET, silent on a miss.
    pub const GETQ: u8 = 0x09;
    /// NOOP
    pub const NOOP: u8 = 0x0a;
    /// VERSION
    pub const VERSION: u8 = 0x0b;
    /// GETK: GET returning the key.
    pub const GETK: u8 = 0x0c;
    /// GETKQ: GETK, silent on a miss.
    pub const GETKQ: u8 = 0x0d;
    /// APPEND
    pub const APPEND: u8 = 0x0e;
    /// PREPEND
    pub const PREPEND: u8 = 0x0f;
    /// STAT
    pub const STAT: u8 = 0x10;
    /// SETQ: SET, silent on success.
    pub const SETQ: u8 = 0x11;
    /// ADDQ
    pub const ADDQ: u8 = 0x12;
    /// REPLACEQ
    pub const REPLACEQ: u8 = 0x13;
    /// DELETEQ
    pub const DELETEQ: u8 = 0x14;
    /// INCREMENTQ
    pub const INCREMENTQ: u8 = 0x15;
    /// DECREMENTQ
    pub const DECREMENTQ: u8 = 0x16;
    /// QUITQ: close without a response.
    pub const QUITQ: u8 = 0x17;
    /// FLUSHQ
    pub const FLUSHQ: u8 = 0x18;
    /// APPENDQ
    pub const APPENDQ: u8 = 0x19;
    /// PREPENDQ
    pub const PREPENDQ: u8 = 0x1a;
    /// VERBOSITY
    pub const VERBOSITY: u8 = 0x1b;
    /// TOUCH
    pub const TOUCH: u8 = 0x1c;
    /// GAT: get and touch.
    pub const GAT: u8 = 0x1d;
    /// GATQ
    pub const GATQ: u8 = 0x1e;
    /// SASL_LIST_MECHS
    pub const SASL_LIST_MECHS: u8 = 0x20;
    /// SASL_AUTH
    pub const SASL_AUTH: u8 = 0x21;
    /// SASL_STEP
    pub const SASL_STEP: u8 = 0x22;
    /// GATK: get and touch returning the key.
    pub const GATK: u8 = 0x23;
    /// GATKQ
    pub const GATKQ: u8 = 0x24;
}

/// Response status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// 0x0000
    NoError,
    /// 0x0001: key not found.
    KeyNotFound,
    /// 0x0002: key exists (ADD of a present key, CAS mismatch).
    KeyExists,
    /// 0x0003: value too large.
    ValueTooLarge,
    /// 0x0004: invalid arguments (the connection is then closed).
    InvalidArguments,
    /// 0x0005: item not stored (APPEND/PREPEND of an absent key).
    ItemNotStored,
    /// 0x0006: incr/decr on a non-numeric value.
    NonNumeric,
    /// 0x0020: authentication error.
    AuthError,
    /// 0x0021: authentication continue.
    AuthContinue,
    /// 0x0081: unknown command (also SASL, which Weft does not offer).
    UnknownCommand,
    /// 0x0082: out of memory.
    OutOfMemory,
    /// 0x0083: not supported.
    NotSupported,
    /// 0x0084: internal error.
    InternalError,
    /// 0x0085: busy.
    Busy,
    /// 0x0086: temporary failure.
    TemporaryFailure,
}

impl Status {
    /// The code on the wire.
    #[must_use]
    pub fn code(self) -> u16 {
        match self {
            Self::NoError => 0x0000,
            Self::KeyNotFound => 0x0001,
            Self::KeyExists => 0x0002,
            Self::ValueTooLarge => 0x0003,
            Self::InvalidArguments => 0x0004,
            Self::ItemNotStored => 0x0005,
            Self::NonNumeric => 0x0006,
            Self::AuthError => 0x0020,
            Self::AuthContinue => 0x0021,
            Self::UnknownCommand => 0x0081,
            Self::OutOfMemory => 0x0082,
            Self::NotSupported => 0x0083,
            Self::InternalError => 0x0084,
            Self::Busy => 0x0085,
            Self::TemporaryFailure => 0x0086,
        }
    }

    /// The status of a code, if known.
    #[must_use]
    pub fn from_code(code: u16) -> Option<Self> {
        Some(match code {
            0x0000 => Self::NoError,
            0x0001 => Self::KeyNotFound,
            0x0002 => Self::KeyExists,
            0x0003 => Self::ValueTooLarge,
            0x0004 => Self::InvalidArguments,
            0x0005 => Self::ItemNotStored,
            0x0006 => Self::NonNumeric,
            0x0020 => Self::AuthError,
            0x0021 => Self::AuthContinue,
            0x0081 => Self::UnknownCommand,
            0x0082 => Self::OutOfMemory,
            0x0083 => Self::NotSupported,
            0x0084 => Self::InternalError,
            0x0085 => Self::Busy,
            0x0086 => Self::TemporaryFailure,
            _ => return None,
        })
    }

    /// The body memcached sends with this status as an error (`write_bin_error`).
    #[must_use]
    pub fn message(self) -> &'static str {
        match self {
            Self::NoError => "",
            Self::KeyNotFound => "Not found",
            Self::KeyExists => "Data exists for key.",
            Self::ValueTooLarge => "Too large.",
            Self::InvalidArguments => "Invalid arguments",
            Self::ItemNotStored => "Not stored.",
            Self::NonNumeric => "Non-numeric server-side value for incr or decr",
            Self::AuthError => "Auth failure.",
            Self::AuthContinue => "",
            Self::UnknownCommand => "Unknown command",
            Self::OutOfMemory => "Out of memory",
            Self::NotSupported => "Not supported",
            Self::InternalError => "Internal error",
            Self::Busy => "Busy",
            Self::TemporaryFailure => "Temporary failure",
        }
    }
}

/// One decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinaryRequest {
    /// The opcode as received; responses carry it back (a quiet opcode included).
    pub opcode: u8,
    /// Echoed in every response to this request.
    pub opaque: u32,
    /// The CAS value of the header: for stores, delete, incr/decr, "only if the item still
    /// has this CAS" (0 = unconditional).
    pub cas: u64,
    /// What to do.
    pub command: BinaryCommand,
}

impl BinaryRequest {
    /// A request for `command`, with the opcode it implies (`None` for the outcomes of
    /// decoding, [`BinaryCommand::Unsupported`] and [`BinaryCommand::TooLarge`]).
    #[must_use]
    pub fn new(command: BinaryCommand, opaque: u32, cas: u64) -> Option<Self> {
        Some(Self {
            opcode: command.opcode()?,
            opaque,
            cas,
            command,
        })
    }

    /// Whether a successful outcome (or, for gets, a miss) is answered with silence.
    #[must_use]
    pub fn is_quiet(&self) -> bool {
        self.command.is_quiet()
    }
}

/// The storage opcodes with extras (flags, expiration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// SET
    Set,
    /// ADD
    Add,
    /// REPLACE
    Replace,
}

/// A binary-protocol command, with its extras parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BinaryCommand {
    /// GET, GETQ, GETK, GETKQ.
    Get {
        /// The key.
        key: Bytes,
        /// Return the key in the response (GETK, GETKQ).
        with_key: bool,
        /// Silent on a miss (GETQ, GETKQ).
        quiet: bool,
    },
    /// TOUCH: set a new expiration; the response carries the flags, not the value.
    Touch {
        /// The key.
        key: Bytes,
        /// New expiration (as in [`BinaryCommand::Store`]).
        exptime: u32,
    },
    /// GAT, GATQ, GATK, GATKQ: get and touch.
    GetAndTouch {
        /// The key.
        key: Bytes,
        /// New expiration.
        exptime: u32,
        /// Return the key (GATK, GATKQ).
        with_key: bool,
        /// Silent on a miss (GATQ, GATKQ).
        quiet: bool,
    },
    /// SET, ADD, REPLACE and their quiet forms; a non-zero header CAS makes any of them a
    /// compare-and-swap, as in memcached.
    Store {
        /// Which store.
        mode: StoreMode,
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// Client flags.
        flags: u32,
        /// Expiration: 0 = none, up to 30 days relative seconds, beyond an absolute Unix
        /// time.
        exptime: u32,
        /// Silent on success.
        quiet: bool,
    },
    /// APPEND, PREPEND and their quiet forms.
    Concat {
        /// APPEND (else PREPEND).
        append: bool,
        /// The key.
        key: Bytes,
        /// The bytes to add.
        value: Bytes,
        /// Silent on success.
        quiet: bool,
    },
    /// DELETE, DELETEQ.
    Delete {
        /// The key.
        key: Bytes,
        /// Silent on success.
        quiet: bool,
    },
    /// INCREMENT, DECREMENT and their quiet forms.
    Arithmetic {
        /// INCREMENT (else DECREMENT).
        incr: bool,
        /// The key.
        key: Bytes,
        /// The amount.
        delta: u64,
        /// The value created when the key is absent.
        initial: u64,
        /// Expiration of a created value; `0xffffffff` means "do not create: fail if
        /// absent".
        exptime: u32,
        /// Silent on success.
        quiet: bool,
    },
    /// QUIT, QUITQ: close (after a response unless quiet).
    Quit {
        /// QUITQ.
        quiet: bool,
    },
    /// FLUSH, FLUSHQ.
    Flush {
        /// When, if the 4-byte extras are present (0 = now).
        exptime: Option<u32>,
        /// Silent on success.
        quiet: bool,
    },
    /// NOOP: answered, which also tells a client that every quiet request before it is done.
    Noop,
    /// VERSION.
    Version,
    /// STAT: one response per statistic, then an empty one.
    Stat {
        /// The group asked for (empty = general).
        group: Bytes,
    },
    /// VERBOSITY (memcached 1.6 answers it as an unknown command; Weft accepts it as the text
    /// protocol's `verbosity`).
    Verbosity {
        /// The level.
        level: u32,
    },
    /// SASL_LIST_MECHS: the mechanisms offered, space-separated, as the value.
    SaslListMechs,
    /// SASL_AUTH (starts an exchange) or SASL_STEP (continues it).
    Sasl {
        /// The mechanism (the packet's key).
        mechanism: Bytes,
        /// The client's message (the packet's value).
        data: Bytes,
        /// SASL_STEP rather than SASL_AUTH.
        step: bool,
    },
    /// An opcode Weft does not serve: reply [`Status::UnknownCommand`]. The body is being
    /// discarded.
    Unsupported,
    /// SET/ADD/REPLACE/APPEND/PREPEND of an item over the item-size limit: reply
    /// [`Status::ValueTooLarge`]. The value is being discarded. For SET, memcached also
    /// removes the key's current value.
    TooLarge {
        /// The key.
        key: Bytes,
        /// Whether the opcode was SET or SETQ.
        set: bool,
    },
}

impl BinaryCommand {
    /// Whether success is silent (a miss, for GETQ/GETKQ/GATQ/GATKQ). Errors are always
    /// answered.
    #[must_use]
    pub fn is_quiet(&self) -> bool {
        match self {
            Self::Get { quiet, .. }
            | Self::GetAndTouch { quiet, .. }
            | Self::Store { quiet, .. }
            | Self::Concat { quiet, .. }
            | Self::Delete { quiet, .. }
            | Self::Arithmetic { quiet, .. }
            | Self::Quit { quiet }
            | Self::Flush { quiet, .. } => *quiet,
            _ => false,
        }
    }

    /// The opcode that sends this command (`None` for the outcomes of decoding).
    #[must_use]
    pub fn opcode(&self) -> Option<u8> {
        use opcode::*;
        Some(match self {
            Self::Get {
                with_key, quiet, ..
            } => match (with_key, quiet) {
                (false, false) => GET,
                (false, true) => GETQ,
                (true, false) => GETK,
                (true, true) => GETKQ,
            },
            Self::Touch { .. } => TOUCH,
            Self::GetAndTouch {
                with_key, quiet, ..
            } => match (with_key, quiet) {
                (false, false) => GAT,
                (false, true) => GATQ,
                (true, false) => GATK,
                (true, true) => GATKQ,
            },
            Self::Store { mode, quiet, .. } => match (mode, quiet) {
                (StoreMode::Set, false) => SET,
                (StoreMode::Set, true) => SETQ,
                (StoreMode::Add, false) => ADD,
                (StoreMode::Add, true) => ADDQ,
                (StoreMode::Replace, false) => REPLACE,
                (StoreMode::Replace, true) => REPLACEQ,
            },
            Self::Concat { append, quiet, .. } => match (append, quiet) {
                (true, false) => APPEND,
                (true, true) => APPENDQ,
                (false, false) => PREPEND,
                (false, true) => PREPENDQ,
            },
            Self::Delete { quiet, .. } => {
                if *quiet {
                    DELETEQ
                } else {
                    DELETE
                }
            }
            Self::Arithmetic { incr, quiet, .. } => match (incr, quiet) {
                (true, false) => INCREMENT,
                (true, true) => INCREMENTQ,
                (false, false) => DECREMENT,
                (false, true) => DECREMENTQ,
            },
            Self::Quit { quiet } => {
                if *quiet {
                    QUITQ
                } else {
                    QUIT
                }
            }
            Self::Flush { quiet, .. } => {
                if *quiet {
                    FLUSHQ
                } else {
                    FLUSH
                }
            }
            Self::Noop => NOOP,
            Self::Version => VERSION,
            Self::Stat { .. } => STAT,
            Self::Verbosity { .. } => VERBOSITY,
            Self::SaslListMechs => SASL_LIST_MECHS,
            Self::Sasl { step, .. } => {
                if *step {
                    SASL_STEP
                } else {
                    SASL_AUTH
                }
            }
            Self::Unsupported | Self::TooLarge { .. } => return None,
        })
    }
}

/// A packet memcached answers by closing the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BinaryProtocolError {
    /// The first byte of a request is not `0x80`: closed without a response.
    #[error("invalid magic byte {0:#04x}")]
    BadMagic(u8),
    /// Key and extras longer than the whole body: answered with
    /// [`Status::UnknownCommand`], then closed (as memcached does).
    #[error("key and extras longer than the body (opcode {opcode:#04x})")]
    BodyTooShort {
        /// The opcode.
        opcode: u8,
        /// The opaque to echo.
        opaque: u32,
    },
    /// A key over 250 bytes, or extras, key or body lengths the opcode does not allow:
    /// answered with [`Status::InvalidArguments`], then closed.
    #[error("invalid lengths for opcode {opcode:#04x}")]
    InvalidArguments {
        /// The opcode.
        opcode: u8,
        /// The opaque to echo.
        opaque: u32,
    },
}

impl BinaryProtocolError {
    /// Appends the response sent before closing (none for a bad magic byte).
    pub fn write_reply(&self, out: &mut bytes::BytesMut) {
        match *self {
            Self::BadMagic(_) => {}
            Self::BodyTooShort { opcode, opaque } => {
                write_error(out, opcode, opaque, Status::UnknownCommand);
            }
            Self::InvalidArguments { opcode, opaque } => {
                write_error(out, opcode, opaque, Status::InvalidArguments);
            }
        }
    }
}
