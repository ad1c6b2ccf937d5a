//! The binary-protocol request decoder, following memcached 1.6's `try_read_command_binary`
//! and `dispatch_bin_command`.

use bytes::{Buf, Bytes, BytesMut};

use super::opcode::*;
use super::{
    BinaryCommand, BinaryProtocolError, BinaryRequest, HEADER_BYTES, REQUEST_MAGIC, StoreMode,
};
use crate::limits::{KEY_BYTES_MAX, Limits};

/// Incremental, zero-copy decoder of binary-protocol request packets.
///
/// Feed it the same [`BytesMut`] after every read; it removes each complete packet from the
/// front and returns it, key and value as [`Bytes`] handles on the received bytes. A packet
/// is buffered whole only once its header has shown it to be within [`Limits`]; the values
/// of refused items and the bodies of unsupported opcodes are discarded as they arrive.
///
/// Contract: between calls the caller may only append to the buffer.
#[derive(Debug, Default)]
pub struct BinaryDecoder {
    limits: Limits,
    /// Bytes still to discard from a refused packet's body.
    discard: u64,
}

/// The fixed part of a request header, in host order.
#[derive(Debug, Clone, Copy)]
struct Header {
    opcode: u8,
    key_bytes: usize,
    extras_bytes: usize,
    body_bytes: usize,
    opaque: u32,
    cas: u64,
}

/// What the lengths of a packet say must happen to it.
enum Plan {
    /// Buffer the whole packet and decode it.
    Whole,
    /// Answer "unknown command" and discard the body.
    Unsupported,
    /// A store that may be too large: decide once the extras (flags) and key are in.
    Store,
}

impl BinaryDecoder {
    /// A decoder enforcing `limits`.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self { limits, discard: 0 }
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Whether a refused body is still being discarded.
    #[must_use]
    pub fn is_discarding(&self) -> bool {
        self.discard > 0
    }

    /// Removes the next complete request from the front of `buf` and returns it, or
    /// `Ok(None)` if `buf` holds only part of one.
    ///
    /// # Errors
    ///
    /// A [`BinaryProtocolError`] when memcached would close the connection: send
    /// [`BinaryProtocolError::write_reply`] and close it.
    pub fn decode(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<BinaryRequest>, BinaryProtocolError> {
        if self.discard > 0 {
            let available = u64::try_from(buf.len()).unwrap_or(u64::MAX);
            let discard = self.discard.min(available);
            // `discard` is at most `buf.len()`.
            buf.advance(usize::try_from(discard).unwrap_or(buf.len()));
            self.discard -= discard;
            if self.discard > 0 {
                return Ok(None);
            }
        }
        let Some(raw) = buf.get(..HEADER_BYTES) else {
            return Ok(None);
        };
        let header = parse_header(raw)?;
        let plan = plan(&header)?;
        let fixed = HEADER_BYTES + header.extras_bytes + header.key_bytes;
        let value_bytes = header.body_bytes - header.extras_bytes - header.key_bytes;
        match plan {
            Plan::Unsupported => {
                buf.advance(HEADER_BYTES);
                self.discard = header.body_bytes as u64;
                return Ok(Some(request(&header, BinaryCommand::Unsupported)));
            }
            Plan::Store => {
                if buf.len() < fixed {
                    return Ok(None);
                }
                // SET/ADD/REPLACE carry flags in their extras; APPEND/PREPEND have none.
                let flags = if header.extras_bytes == 8 {
                    be_u32(buf, HEADER_BYTES)
                } else {
                    0
                };
                if !self.limits.item_fits(header.key_bytes, flags, value_bytes) {
                    let head = buf.split_to(fixed).freeze();
                    let key = head.slice(HEADER_BYTES + header.extras_bytes..fixed);
                    self.discard = value_bytes as u64;
                    let set = matches!(header.opcode, SET | SETQ);
                    return Ok(Some(request(&header, BinaryCommand::TooLarge { key, set })));
                }
            }
            Plan::Whole => {}
        }
        let total = HEADER_BYTES + header.body_bytes;
        if buf.len() < total {
            return Ok(None);
        }
        let packet = buf.split_to(total).freeze();
        let command = command(&header, &packet);
        Ok(Some(request(&header, command)))
    }
}

fn request(header: &Header, command: BinaryCommand) -> BinaryRequest {
    BinaryRequest {
        opcode: header.opcode,
        opaque: header.opaque,
        cas: header.cas,
        command,
    }
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    if let Some(source) = bytes.get(at..at + 4) {
        word.copy_from_slice(source);
    }
    u32::from_be_bytes(word)
}

fn be_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    if let Some(source) = bytes.get(at..at + 8) {
        word.copy_from_slice(source);
    }
    u64::from_be_bytes(word)
}

fn parse_header(raw: &[u8]) -> Result<Header, BinaryProtocolError> {
    let magic = raw.first().copied().unwrap_or_default();
    if magic != REQUEST_MAGIC {
        return Err(BinaryProtocolError::BadMagic(magic));
    }
    let byte = |at: usize| raw.get(at).copied().unwrap_or_default();
    Ok(Header {
        opcode: byte(1),
        key_bytes: usize::from(u16::from_be_bytes([byte(2), byte(3)])),
        extras_bytes: usize::from(byte(4)),
        // Bytes 5 (data type) and 6–7 (vbucket) are ignored, as memcached ignores them.
        body_bytes: usize::try_from(be_u32(raw, 8)).unwrap_or(usize::MAX),
        opaque: be_u32(raw, 12),
        cas: be_u64(raw, 16),
    })
}

/// memcached's length checks, in its order: key and extras within the body, the key within
/// 250 bytes, then the lengths each opcode allows. Unlike memcached, a body longer than an
/// opcode uses is refused rather than left to be read as the next header.
fn plan(header: &Header) -> Result<Plan, BinaryProtocolError> {
    let Header {
        opcode,
        key_bytes: key,
        extras_bytes: extras,
        body_bytes: body,
        opaque,
        ..
    } = *header;
    if key > body || key + extras > body {
        return Err(BinaryProtocolError::BodyTooShort { opcode, opaque });
    }
    let invalid = BinaryProtocolError::InvalidArguments { opcode, opaque };
    if key > KEY_BYTES_MAX {
        return Err(invalid);
    }
    let valid = match opcode {
        VERSION | NOOP | QUIT | QUITQ => extras == 0 && key == 0 && body == 0,
        FLUSH | FLUSHQ => key == 0 && body == extras && (extras == 0 || extras == 4),
        SET | SETQ | ADD | ADDQ | REPLACE | REPLACEQ => {
            if extras == 8 && key != 0 {
                return Ok(Plan::Store);
            }
            false
        }
        APPEND | APPENDQ | PREPEND | PREPENDQ => {
            if extras == 0 && key != 0 {
                return Ok(Plan::Store);
            }
            false
        }
        GET | GETQ | GETK | GETKQ | DELETE | DELETEQ => extras == 0 && key != 0 && body == key,
        INCREMENT | INCREMENTQ | DECREMENT | DECREMENTQ => {
            extras == 20 && key != 0 && body == key + extras
        }
        TOUCH | GAT | GATQ | GATK | GATKQ => extras == 4 && key != 0 && body == key + extras,
        STAT => extras == 0 && body == key,
        VERBOSITY => extras == 4 && key == 0 && body == 4,
        SASL_LIST_MECHS => extras == 0 && key == 0 && body == 0,
        SASL_AUTH | SASL_STEP => extras == 0 && key != 0,
        _ => return Ok(Plan::Unsupported),
    };
    if valid { Ok(Plan::Whole) } else { Err(invalid) }
}

/// Builds the command of a whole packet whose lengths `plan` accepted.
fn command(header: &Header, packet: &Bytes) -> BinaryCommand {
    let extras_start = HEADER_BYTES;
    let key_start = extras_start + header.extras_bytes;
    let value_start = key_start + header.key_bytes;
    let key = packet.slice(key_start..value_start);
    let value = packet.slice(value_start..);
    let extra_u32 = |offset: usize| be_u32(packet, extras_start + offset);
    let extra_u64 = |offset: usize| be_u64(packet, extras_start + offset);
    match header.opcode {
        GET | GETQ | GETK | GETKQ => BinaryCommand::Get {
            key,
            with_key: matches!(header.opcode, GETK | GETKQ),
            quiet: matches!(header.opcode, GETQ | GETKQ),
        },
        TOUCH => BinaryCommand::Touch {
            key,
            exptime: extra_u32(0),
        },
        GAT | GATQ | GATK | GATKQ => BinaryCommand::GetAndTouch {
            key,
            exptime: extra_u32(0),
            with_key: matches!(header.opcode, GATK | GATKQ),
            quiet: matches!(header.opcode, GATQ | GATKQ),
        },
        SET | SETQ | ADD | ADDQ | REPLACE | REPLACEQ => BinaryCommand::Store {
            mode: match header.opcode {
                SET | SETQ => StoreMode::Set,
                ADD | ADDQ => StoreMode::Add,
                _ => StoreMode::Replace,
            },
            key,
            value,
            flags: extra_u32(0),
            exptime: extra_u32(4),
            quiet: matches!(header.opcode, SETQ | ADDQ | REPLACEQ),
        },
        APPEND | APPENDQ | PREPEND | PREPENDQ => BinaryCommand::Concat {
            append: matches!(header.opcode, APPEND | APPENDQ),
            key,
            value,
            quiet: matches!(header.opcode, APPENDQ | PREPENDQ),
        },
        DELETE | DELETEQ => BinaryCommand::Delete {
            key,
            quiet: header.opcode == DELETEQ,
        },
        INCREMENT | INCREMENTQ | DECREMENT | DECREMENTQ => BinaryCommand::Arithmetic {
            incr: matches!(header.opcode, INCREMENT | INCREMENTQ),
            key,
            delta: extra_u64(0),
            initial: extra_u64(8),
            exptime: extra_u32(16),
            quiet: matches!(header.opcode, INCREMENTQ | DECREMENTQ),
        },
        QUIT | QUITQ => BinaryCommand::Quit {
            quiet: header.opcode == QUITQ,
        },
        FLUSH | FLUSHQ => BinaryCommand::Flush {
            exptime: (header.extras_bytes == 4).then(|| extra_u32(0)),
            quiet: header.opcode == FLUSHQ,
        },
        NOOP => BinaryCommand::Noop,
        VERSION => BinaryCommand::Version,
        STAT => BinaryCommand::Stat { group: key },
        VERBOSITY => BinaryCommand::Verbosity {
            level: extra_u32(0),
        },
        SASL_LIST_MECHS => BinaryCommand::SaslListMechs,
        SASL_AUTH | SASL_STEP => BinaryCommand::Sasl {
            mechanism: key,
            data: value,
            step: header.opcode == SASL_STEP,
        },
        _ => BinaryCommand::Unsupported,
    }
}
