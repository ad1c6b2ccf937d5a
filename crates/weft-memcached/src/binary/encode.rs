//! Binary-protocol response writers (server side), and a request writer and response reader
//! (client side).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{BinaryCommand, BinaryRequest, HEADER_BYTES, REQUEST_MAGIC, RESPONSE_MAGIC, Status};
use crate::limits::KEY_BYTES_MAX;

/// The header fields a server chooses for a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The request's opcode.
    pub opcode: u8,
    /// The outcome.
    pub status: Status,
    /// The request's opaque.
    pub opaque: u32,
    /// The item's CAS value (0 when there is none).
    pub cas: u64,
}

/// Appends one response packet.
///
/// # Panics
/// Never for extras up to 255 bytes, keys up to 65535 bytes and bodies up to 4 GiB, which is
/// all this crate's callers produce; longer parts are truncated in the length fields rather
/// than panicking.
pub fn write_response(
    out: &mut BytesMut,
    header: &ResponseHeader,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    let body = extras.len() + key.len() + value.len();
    out.reserve(HEADER_BYTES + body);
    out.put_u8(RESPONSE_MAGIC);
    out.put_u8(header.opcode);
    out.put_u16(u16::try_from(key.len()).unwrap_or(u16::MAX));
    out.put_u8(u8::try_from(extras.len()).unwrap_or(u8::MAX));
    // Data type: raw bytes.
    out.put_u8(0);
    out.put_u16(header.status.code());
    out.put_u32(u32::try_from(body).unwrap_or(u32::MAX));
    out.put_u32(header.opaque);
    out.put_u64(header.cas);
    out.put_slice(extras);
    out.put_slice(key);
    out.put_slice(value);
}

/// Appends an error response as memcached writes it: the status, no extras or key, the
/// status's standard text as the body, CAS 0.
pub fn write_error(out: &mut BytesMut, opcode: u8, opaque: u32, status: Status) {
    let header = ResponseHeader {
        opcode,
        status,
        opaque,
        cas: 0,
    };
    write_response(out, &header, &[], &[], status.message().as_bytes());
}

/// Why a request cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The command is an outcome of decoding, not something a client sends.
    #[error("not a request")]
    NotARequest,
    /// A key longer than 250 bytes.
    #[error("key longer than 250 bytes")]
    KeyTooLong,
    /// A body longer than 4 GiB.
    #[error("body longer than 4 GiB")]
    BodyTooLong,
}

/// Appends `request` as a client sends it; the opcode is the command's (a request's
/// `opcode` field is ignored).
///
/// # Errors
/// [`EncodeError`] when the request cannot be expressed.
pub fn write_request(out: &mut BytesMut, request: &BinaryRequest) -> Result<(), EncodeError> {
    let opcode = request.command.opcode().ok_or(EncodeError::NotARequest)?;
    let mut extras = Vec::new();
    let (key, value): (&[u8], &[u8]) = match &request.command {
        BinaryCommand::Get { key, .. } | BinaryCommand::Delete { key, .. } => (key, &[]),
        BinaryCommand::Touch { key, exptime } | BinaryCommand::GetAndTouch { key, exptime, .. } => {
            extras.extend_from_slice(&exptime.to_be_bytes());
            (key, &[])
        }
        BinaryCommand::Store {
            key,
            value,
            flags,
            exptime,
            ..
        } => {
            extras.extend_from_slice(&flags.to_be_bytes());
            extras.extend_from_slice(&exptime.to_be_bytes());
            (key, value)
        }
        BinaryCommand::Concat { key, value, .. } => (key, value),
        BinaryCommand::Arithmetic {
            key,
            delta,
            initial,
            exptime,
            ..
        } => {
            extras.extend_from_slice(&delta.to_be_bytes());
            extras.extend_from_slice(&initial.to_be_bytes());
            extras.extend_from_slice(&exptime.to_be_bytes());
            (key, &[])
        }
        BinaryCommand::Flush { exptime, .. } => {
            if let Some(exptime) = exptime {
                extras.extend_from_slice(&exptime.to_be_bytes());
            }
            (&[], &[])
        }
        BinaryCommand::Verbosity { level } => {
            extras.extend_from_slice(&level.to_be_bytes());
            (&[], &[])
        }
        BinaryCommand::Stat { group } => (group, &[]),
        BinaryCommand::SaslListMechs => (&[], &[]),
        BinaryCommand::Sasl {
            mechanism, data, ..
        } => (mechanism, data),
        BinaryCommand::Quit { .. } | BinaryCommand::Noop | BinaryCommand::Version => (&[], &[]),
        BinaryCommand::Unsupported | BinaryCommand::TooLarge { .. } => {
            return Err(EncodeError::NotARequest);
        }
    };
    if key.len() > KEY_BYTES_MAX {
        return Err(EncodeError::KeyTooLong);
    }
    let body = u32::try_from(extras.len() + key.len() + value.len())
        .map_err(|_| EncodeError::BodyTooLong)?;
    out.reserve(HEADER_BYTES + extras.len() + key.len() + value.len());
    out.put_u8(REQUEST_MAGIC);
    out.put_u8(opcode);
    // The key is at most 250 bytes and the extras at most 20.
    out.put_u16(u16::try_from(key.len()).unwrap_or(u16::MAX));
    out.put_u8(u8::try_from(extras.len()).unwrap_or(u8::MAX));
    out.put_u8(0);
    out.put_u16(0);
    out.put_u32(body);
    out.put_u32(request.opaque);
    out.put_u64(request.cas);
    out.put_slice(&extras);
    out.put_slice(key);
    out.put_slice(value);
    Ok(())
}

/// A response as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The opcode.
    pub opcode: u8,
    /// The status code (see [`Status::from_code`]).
    pub status: u16,
    /// The opaque of the request answered.
    pub opaque: u32,
    /// The CAS value.
    pub cas: u64,
    /// The extras (flags of a GET hit).
    pub extras: Bytes,
    /// The key (GETK, STAT name).
    pub key: Bytes,
    /// The value (or error text).
    pub value: Bytes,
}

/// A response that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseError {
    /// The first byte is not `0x81`.
    #[error("invalid response magic {0:#04x}")]
    BadMagic(u8),
    /// Key and extras longer than the body.
    #[error("key and extras longer than the body")]
    BadLengths,
    /// A body over the caller's limit.
    #[error("response body of {0} bytes exceeds the limit")]
    TooLarge(u64),
}

/// Removes the next complete response from the front of `buf`, or returns `Ok(None)` if
/// `buf` holds only part of one. Bodies over `body_bytes_max` are refused.
///
/// # Errors
/// [`ResponseError`] for bytes that are not a response.
pub fn read_response(
    buf: &mut BytesMut,
    body_bytes_max: usize,
) -> Result<Option<Response>, ResponseError> {
    let Some(head) = buf.get(..HEADER_BYTES) else {
        return Ok(None);
    };
    let byte = |at: usize| head.get(at).copied().unwrap_or_default();
    if byte(0) != RESPONSE_MAGIC {
        return Err(ResponseError::BadMagic(byte(0)));
    }
    let key_bytes = usize::from(u16::from_be_bytes([byte(2), byte(3)]));
    let extras_bytes = usize::from(byte(4));
    let body = u32::from_be_bytes([byte(8), byte(9), byte(10), byte(11)]);
    let body_bytes = usize::try_from(body).unwrap_or(usize::MAX);
    if body_bytes > body_bytes_max {
        return Err(ResponseError::TooLarge(u64::from(body)));
    }
    if key_bytes + extras_bytes > body_bytes {
        return Err(ResponseError::BadLengths);
    }
    if buf.len() < HEADER_BYTES + body_bytes {
        return Ok(None);
    }
    let mut packet = buf.split_to(HEADER_BYTES + body_bytes).freeze();
    let opcode = byte_at(&packet, 1);
    let status = u16::from_be_bytes([byte_at(&packet, 6), byte_at(&packet, 7)]);
    packet.advance(12);
    let opaque = packet.get_u32();
    let cas = packet.get_u64();
    let extras = packet.split_to(extras_bytes);
    let key = packet.split_to(key_bytes);
    Ok(Some(Response {
        opcode,
        status,
        opaque,
        cas,
        extras,
        key,
        value: packet,
    }))
}

fn byte_at(bytes: &[u8], at: usize) -> u8 {
    bytes.get(at).copied().unwrap_or_default()
}
