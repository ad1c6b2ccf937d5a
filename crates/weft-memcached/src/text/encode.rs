//! Text-protocol reply writers (server side) and a request writer (client side).

use bytes::{BufMut, BytesMut};

use super::{GetKind, StoreMode, TextCommand, TextError, TextRequest};
use crate::decimal::Decimal;
use crate::limits::KEY_BYTES_MAX;

/// The fixed reply lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// `STORED`
    Stored,
    /// `NOT_STORED`: an `add` of a present key, a `replace`/`append`/`prepend` of an absent one.
    NotStored,
    /// `EXISTS`: a `cas` whose unique no longer matches.
    Exists,
    /// `NOT_FOUND`
    NotFound,
    /// `DELETED`
    Deleted,
    /// `TOUCHED`
    Touched,
    /// `OK`
    Ok,
    /// `END`
    End,
    /// `RESET` (answer to `stats reset`)
    Reset,
}

impl Status {
    /// The line without its `\r\n`.
    #[must_use]
    pub fn text(self) -> &'static str {
        match self {
            Self::Stored => "STORED",
            Self::NotStored => "NOT_STORED",
            Self::Exists => "EXISTS",
            Self::NotFound => "NOT_FOUND",
            Self::Deleted => "DELETED",
            Self::Touched => "TOUCHED",
            Self::Ok => "OK",
            Self::End => "END",
            Self::Reset => "RESET",
        }
    }
}

/// Appends `STORED\r\n`, `NOT_FOUND\r\n`, … .
pub fn write_status(out: &mut BytesMut, status: Status) {
    write_line(out, status.text().as_bytes());
}

/// Appends `line` and `\r\n`.
pub fn write_line(out: &mut BytesMut, line: &[u8]) {
    out.reserve(line.len() + 2);
    out.put_slice(line);
    out.put_slice(b"\r\n");
}

/// Appends an error line (`ERROR`, `CLIENT_ERROR …`, `SERVER_ERROR …`).
pub fn write_error(out: &mut BytesMut, error: TextError) {
    error.write_to(out);
}

/// Appends `SERVER_ERROR <message>\r\n`, for failures without a fixed memcached text. CR
/// and LF in `message` are replaced by spaces so the reply stays one line.
pub fn write_server_error(out: &mut BytesMut, message: &str) {
    write_message_line(out, b"SERVER_ERROR ", message);
}

/// Appends `CLIENT_ERROR <message>\r\n`, for refusals without a fixed memcached text (a
/// user without the permission). CR and LF in `message` are replaced by spaces.
pub fn write_client_error(out: &mut BytesMut, message: &str) {
    write_message_line(out, b"CLIENT_ERROR ", message);
}

/// `prefix`, `message` on one line (CR and LF become spaces), CRLF.
fn write_message_line(out: &mut BytesMut, prefix: &[u8], message: &str) {
    out.reserve(prefix.len() + message.len() + 2);
    out.put_slice(prefix);
    out.extend(message.bytes().map(|byte| match byte {
        b'\r' | b'\n' => b' ',
        other => other,
    }));
    out.put_slice(b"\r\n");
}

/// Appends one retrieval hit: `VALUE <key> <flags> <bytes>[ <cas unique>]\r\n<data>\r\n`.
pub fn write_value(out: &mut BytesMut, key: &[u8], flags: u32, value: &[u8], cas: Option<u64>) {
    out.reserve(key.len() + value.len() + 48);
    out.put_slice(b"VALUE ");
    out.put_slice(key);
    out.put_u8(b' ');
    Decimal::unsigned(u64::from(flags)).put(out);
    out.put_u8(b' ');
    Decimal::unsigned(value.len() as u64).put(out);
    if let Some(unique) = cas {
        out.put_u8(b' ');
        Decimal::unsigned(unique).put(out);
    }
    out.put_slice(b"\r\n");
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// Appends `END\r\n`, the end of a retrieval or stats reply.
pub fn write_end(out: &mut BytesMut) {
    out.put_slice(b"END\r\n");
}

/// Appends a number line: the reply to `incr`/`decr`.
pub fn write_number(out: &mut BytesMut, value: u64) {
    Decimal::unsigned(value).put(out);
    out.put_slice(b"\r\n");
}

/// Appends `STAT <name> <value>\r\n`.
pub fn write_stat(out: &mut BytesMut, name: &str, value: &[u8]) {
    out.reserve(name.len() + value.len() + 8);
    out.put_slice(b"STAT ");
    out.put_slice(name.as_bytes());
    out.put_u8(b' ');
    out.put_slice(value);
    out.put_slice(b"\r\n");
}

/// Appends `STAT <name> <number>\r\n`.
pub fn write_stat_number(out: &mut BytesMut, name: &str, value: u64) {
    out.reserve(name.len() + 28);
    out.put_slice(b"STAT ");
    out.put_slice(name.as_bytes());
    out.put_u8(b' ');
    Decimal::unsigned(value).put(out);
    out.put_slice(b"\r\n");
}

/// Appends `VERSION <version>\r\n`.
pub fn write_version(out: &mut BytesMut, version: &str) {
    out.reserve(version.len() + 10);
    out.put_slice(b"VERSION ");
    out.put_slice(version.as_bytes());
    out.put_slice(b"\r\n");
}

/// Why a request cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The command is an outcome of decoding ([`TextCommand::Rejected`],
    /// [`TextCommand::TooLarge`]), not something a client sends.
    #[error("not a request")]
    NotARequest,
    /// A key that is empty, longer than 250 bytes, or holds a space, `\r`, `\n` or NUL.
    #[error("invalid key for the text protocol")]
    InvalidKey,
    /// A `stats` group or argument that is empty or holds a space, `\r`, `\n` or NUL.
    #[error("invalid stats argument")]
    InvalidArgument,
}

/// Appends `request` as a client sends it (the inverse of the decoder for every command a
/// client can send; `noreply` is written for the commands that take it).
///
/// # Errors
/// [`EncodeError`] when the request cannot be expressed in the text protocol.
pub fn write_request(out: &mut BytesMut, request: &TextRequest) -> Result<(), EncodeError> {
    let noreply: &[u8] = if request.noreply { b" noreply" } else { b"" };
    match &request.command {
        TextCommand::Get { kind, keys } => {
            out.put_slice(kind.name().as_bytes());
            if let GetKind::Gat(exptime) | GetKind::Gats(exptime) = kind {
                out.put_u8(b' ');
                Decimal::signed(i64::from(*exptime)).put(out);
            }
            for key in keys.iter() {
                check_key(key)?;
                out.put_u8(b' ');
                out.put_slice(key);
            }
            out.put_slice(b"\r\n");
        }
        TextCommand::Store {
            mode,
            key,
            flags,
            exptime,
            value,
        } => {
            check_key(key)?;
            out.reserve(key.len() + value.len() + 64);
            out.put_slice(mode.name().as_bytes());
            out.put_u8(b' ');
            out.put_slice(key);
            out.put_u8(b' ');
            Decimal::unsigned(u64::from(*flags)).put(out);
            out.put_u8(b' ');
            Decimal::signed(i64::from(*exptime)).put(out);
            out.put_u8(b' ');
            Decimal::unsigned(value.len() as u64).put(out);
            if let StoreMode::Cas(unique) = mode {
                out.put_u8(b' ');
                Decimal::unsigned(*unique).put(out);
            }
            out.put_slice(noreply);
            out.put_slice(b"\r\n");
            out.put_slice(value);
            out.put_slice(b"\r\n");
        }
        TextCommand::Delete { key } => {
            check_key(key)?;
            write_parts(out, &[b"delete", key], noreply);
        }
        TextCommand::Arithmetic { incr, key, delta } => {
            check_key(key)?;
            let name: &[u8] = if *incr { b"incr" } else { b"decr" };
            write_parts(
                out,
                &[name, key, &Decimal::unsigned(*delta).to_vec()],
                noreply,
            );
        }
        TextCommand::Touch { key, exptime } => {
            check_key(key)?;
            write_parts(
                out,
                &[
                    b"touch",
                    key,
                    &Decimal::signed(i64::from(*exptime)).to_vec(),
                ],
                noreply,
            );
        }
        TextCommand::FlushAll { delay } => {
            write_parts(
                out,
                &[b"flush_all", &Decimal::signed(i64::from(*delay)).to_vec()],
                noreply,
            );
        }
        TextCommand::Version => write_parts(out, &[b"version"], b""),
        TextCommand::Verbosity { level } => {
            write_parts(
                out,
                &[b"verbosity", &Decimal::unsigned(u64::from(*level)).to_vec()],
                noreply,
            );
        }
        TextCommand::Stats { group, argument } => {
            let mut parts: Vec<&[u8]> = vec![b"stats"];
            for part in [group, argument].into_iter().flatten() {
                if part.is_empty() || part.iter().any(|&byte| is_separator(byte)) {
                    return Err(EncodeError::InvalidArgument);
                }
                parts.push(part);
            }
            if group.is_none() && argument.is_some() {
                return Err(EncodeError::InvalidArgument);
            }
            write_parts(out, &parts, b"");
        }
        TextCommand::Quit => write_parts(out, &[b"quit"], b""),
        TextCommand::TooLarge { .. } | TextCommand::Rejected(_) => {
            return Err(EncodeError::NotARequest);
        }
    }
    Ok(())
}

fn write_parts(out: &mut BytesMut, parts: &[&[u8]], suffix: &[u8]) {
    for (index, part) in parts.iter().enumerate() {
        if index > 0 {
            out.put_u8(b' ');
        }
        out.put_slice(part);
    }
    out.put_slice(suffix);
    out.put_slice(b"\r\n");
}

fn is_separator(byte: u8) -> bool {
    matches!(byte, b' ' | b'\r' | b'\n' | 0)
}

fn check_key(key: &[u8]) -> Result<(), EncodeError> {
    if key.is_empty() || key.len() > KEY_BYTES_MAX || key.iter().any(|&byte| is_separator(byte)) {
        return Err(EncodeError::InvalidKey);
    }
    Ok(())
}
