//! Media types of stored keys and values, and conversion between them, so that one entry is
//! the same entry through every protocol.
//!
//! A cache stores keys and values in one [`Format`] (its declared encoding). Requests carry
//! data in their own format: the Java Hot Rod client sends ProtoStream `WrappedMessage`s,
//! the JS client and REST send text or JSON, RESP sends raw bytes. [`transcode`] converts
//! simple values (strings, byte arrays, integers, booleans, floating point) between them:
//!
//! | stored \ request | protostream | text/plain, octet-stream | application/json |
//! |---|---|---|---|
//! | protostream | as is | string ⇄ field 9 (non-UTF-8 bytes ⇄ field 10); numbers and booleans as text | `{"_type":"string","_value":…}` (ProtoStream's JSON; bare scalars accepted) ⇄ the matching field |
//! | text/plain, octet-stream | field 9/10 ⇄ the bytes; numbers and booleans as text | as is | JSON string ⇄ its text; other JSON as is |
//! | application/json | field ⇄ JSON scalar | text ⇄ JSON string (valid JSON as is) | as is |
//!
//! Any other media type (`application/unknown`, ...) is stored and returned as is.
//!
//! [`transcode`] loses the Java type of a ProtoStream number stored as text. Hot Rod, whose
//! clients must read back the type they wrote, converts through [`value_to_stored`] /
//! [`value_from_stored`] and [`key_to_stored`] / [`key_from_stored`] instead: into a text or
//! octet-stream cache a value keeps its ProtoStream type in the entry's client flags (see
//! [`typed_flags`]) beside the same bytes `transcode` stores, and an octet-stream cache stores
//! a typed key (anything but a string or byte array) as its ProtoStream message behind
//! [`TYPED_KEY_PREFIX`], so that `1` is not the key `"1"`.

use std::borrow::Cow;

/// How a cache or a request represents keys or values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `application/x-protostream`: ProtoStream `WrappedMessage`s (Infinispan's default).
    Protostream,
    /// `text/plain` (UTF-8).
    Text,
    /// `application/octet-stream`: raw bytes (RESP, memcached).
    Octet,
    /// `application/json`.
    Json,
    /// Anything else: bytes kept as they are, never converted.
    Opaque,
}

impl Format {
    /// The format of a media type (`type/subtype`, parameters ignored, case-insensitive).
    #[must_use]
    pub fn from_media_type(media_type: &str) -> Self {
        let essence = media_type.split(';').next().unwrap_or_default().trim();
        let is = |name: &str| essence.eq_ignore_ascii_case(name);
        if is("application/x-protostream") {
            Self::Protostream
        } else if is("text/plain") {
            Self::Text
        } else if is("application/octet-stream") {
            Self::Octet
        } else if is("application/json") {
            Self::Json
        } else {
            Self::Opaque
        }
    }

    /// The media type's name (`application/unknown` for opaque data).
    #[must_use]
    pub const fn media_type(self) -> &'static str {
        match self {
            Self::Protostream => "application/x-protostream",
            Self::Text => "text/plain",
            Self::Octet => "application/octet-stream",
            Self::Json => "application/json",
            Self::Opaque => "application/unknown",
        }
    }

    const fn is_raw(self) -> bool {
        matches!(self, Self::Text | Self::Octet)
    }
}

/// Data that cannot be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot convert {from} to {to}: {reason}")]
pub struct TranscodeError {
    /// Source media type.
    pub from: &'static str,
    /// Target media type.
    pub to: &'static str,
    /// Why.
    pub reason: String,
}

/// A simple value, the common ground of every format.
#[derive(Debug, Clone, PartialEq)]
enum Scalar<'a> {
    Str(Cow<'a, str>),
    Bytes(&'a [u8]),
    I32(i32),
    I64(i64),
    Bool(bool),
    F64(f64),
    F32(f32),
    /// Valid JSON that is not a scalar (object, array, null): kept as its text.
    JsonText(&'a [u8]),
}

/// Converts `bytes` from one format to another; borrows when no change is needed.
///
/// # Errors
/// When the data is not valid in `from` or has no representation in `to` (for example a
/// ProtoStream message of a user type, which needs a schema, or a JSON object for a
/// ProtoStream cache).
pub fn transcode(bytes: &[u8], from: Format, to: Format) -> Result<Cow<'_, [u8]>, TranscodeError> {
    if from == to
        || from == Format::Opaque
        || to == Format::Opaque
        || (from.is_raw() && to.is_raw())
    {
        return Ok(Cow::Borrowed(bytes));
    }
    let fail = |reason: String| TranscodeError {
        from: from.media_type(),
        to: to.media_type(),
        reason,
    };
    let scalar = match from {
        Format::Protostream => unwrap_protostream(bytes).map_err(fail)?,
        Format::Text | Format::Octet => match std::str::from_utf8(bytes) {
            // Text that is valid JSON stays JSON (numbers, objects); anything else is a string.
            Ok(text) if to == Format::Json => {
                if serde_json::from_slice::<serde_json::Value>(bytes).is_ok() {
                    return Ok(Cow::Borrowed(bytes));
                }
                Scalar::Str(Cow::Borrowed(text))
            }
            Ok(text) => Scalar::Str(Cow::Borrowed(text)),
            Err(_) => Scalar::Bytes(bytes),
        },
        Format::Json => parse_json(bytes).map_err(fail)?,
        Format::Opaque => return Ok(Cow::Borrowed(bytes)),
    };
    match to {
        Format::Protostream => wrap_protostream(&scalar).map(Cow::Owned).map_err(fail),
        Format::Text | Format::Octet => Ok(match scalar {
            Scalar::Str(Cow::Borrowed(text)) => Cow::Borrowed(text.as_bytes()),
            Scalar::Str(Cow::Owned(text)) => Cow::Owned(text.into_bytes()),
            Scalar::Bytes(raw) | Scalar::JsonText(raw) => Cow::Borrowed(raw),
            Scalar::I32(v) => Cow::Owned(v.to_string().into_bytes()),
            Scalar::I64(v) => Cow::Owned(v.to_string().into_bytes()),
            Scalar::Bool(v) => Cow::Borrowed(if v { b"true" } else { b"false" }),
            Scalar::F64(v) => Cow::Owned(java_double(v).into_bytes()),
            Scalar::F32(v) => Cow::Owned(java_float(v).into_bytes()),
        }),
        Format::Json if from == Format::Protostream => {
            to_canonical_json(&scalar).map(Cow::Owned).map_err(fail)
        }
        Format::Json => to_json(&scalar).map(Cow::Owned).map_err(fail),
        Format::Opaque => Ok(Cow::Borrowed(bytes)),
    }
}

/// Like Java's `Double.toString`: `3.5`, `1.0`, `1.0E-300`, `NaN`, `Infinity`, with the
/// shortest digits that read back as the same number.
fn java_double(v: f64) -> String {
    java_decimal(
        v.is_nan(),
        v.is_infinite(),
        v.is_sign_negative(),
        v.abs(),
        || (format!("{v}"), format!("{v:e}")),
    )
}

/// Like Java's `Float.toString` (`2.25`, `0.1`, `3.4028235E38`).
fn java_float(v: f32) -> String {
    java_decimal(
        v.is_nan(),
        v.is_infinite(),
        v.is_sign_negative(),
        f64::from(v.abs()),
        || (format!("{v}"), format!("{v:e}")),
    )
}

/// Java's decimal layout: plain between 10^-3 and 10^7, else `d.dddE±n`; always a `.`.
fn java_decimal(
    nan: bool,
    infinite: bool,
    negative: bool,
    magnitude: f64,
    plain_and_scientific: impl FnOnce() -> (String, String),
) -> String {
    if nan {
        return "NaN".into();
    }
    if infinite {
        return if negative { "-Infinity" } else { "Infinity" }.into();
    }
    let (plain, scientific) = plain_and_scientific();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        return if plain.contains('.') {
            plain
        } else {
            plain + ".0"
        };
    }
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let point = if mantissa.contains('.') { "" } else { ".0" };
    format!("{mantissa}{point}E{exponent}")
}

fn read_varint(bytes: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *bytes.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err("varint overflows 64 bits".into());
        }
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint longer than 10 bytes".into())
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// ProtoStream `WrappedMessage` field numbers of the primitives.
mod field {
    pub const DOUBLE: u64 = 1;
    pub const FLOAT: u64 = 2;
    pub const INT64: u64 = 3;
    pub const INT32: u64 = 5;
    pub const BOOL: u64 = 8;
    pub const STRING: u64 = 9;
    pub const BYTES: u64 = 10;
    pub const CHAR: u64 = 20;
    pub const SHORT: u64 = 21;
    pub const BYTE: u64 = 22;
}

/// One field of a protobuf message, by wire type.
#[derive(Debug, Clone, Copy)]
enum FieldValue<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    LengthDelimited(&'a [u8]),
    Fixed32([u8; 4]),
}

/// Reads the field at `pos` (tag, then value), moving `pos` past it.
fn read_field<'a>(bytes: &'a [u8], pos: &mut usize) -> Result<(u64, FieldValue<'a>), String> {
    let tag = read_varint(bytes, pos)?;
    let (number, wire_type) = (tag >> 3, tag & 7);
    if number == 0 {
        return Err("a protobuf field numbered 0".into());
    }
    let value = match wire_type {
        0 => FieldValue::Varint(read_varint(bytes, pos)?),
        1 => {
            let mut le = [0; 8];
            le.copy_from_slice(take(bytes, pos, 8).ok_or("truncated double")?);
            FieldValue::Fixed64(le)
        }
        2 => {
            let len = usize::try_from(read_varint(bytes, pos)?).map_err(|_| "length overflows")?;
            FieldValue::LengthDelimited(take(bytes, pos, len).ok_or("length past the end")?)
        }
        5 => {
            let mut le = [0; 4];
            le.copy_from_slice(take(bytes, pos, 4).ok_or("truncated float")?);
            FieldValue::Fixed32(le)
        }
        other => {
            return Err(format!(
                "protobuf wire type {other} is not used by ProtoStream"
            ));
        }
    };
    Ok((number, value))
}

/// The `len` bytes at `pos`, moving `pos` past them.
fn take<'a>(bytes: &'a [u8], pos: &mut usize, len: usize) -> Option<&'a [u8]> {
    let body = bytes.get(*pos..)?.get(..len)?;
    *pos += len;
    Some(body)
}

/// The one field of a message that has exactly one.
fn single_field(bytes: &[u8]) -> Result<(u64, FieldValue<'_>), String> {
    let mut pos = 0;
    let field = read_field(bytes, &mut pos)?;
    if pos != bytes.len() {
        return Err("a ProtoStream message with more than one field is not a simple value".into());
    }
    Ok(field)
}

/// True when `bytes` is a non-empty sequence of well-formed protobuf fields: a ProtoStream
/// message of any type, kept as sent where Weft has no form for it.
fn is_message(bytes: &[u8]) -> bool {
    let mut pos = 0;
    while pos < bytes.len() {
        if read_field(bytes, &mut pos).is_err() {
            return false;
        }
    }
    !bytes.is_empty()
}

fn unwrap_protostream(bytes: &[u8]) -> Result<Scalar<'_>, String> {
    let (number, value) = single_field(bytes)?;
    Ok(match (number, value) {
        (field::STRING, FieldValue::LengthDelimited(body)) => Scalar::Str(Cow::Borrowed(
            std::str::from_utf8(body).map_err(|_| "string field is not UTF-8")?,
        )),
        (field::BYTES, FieldValue::LengthDelimited(body)) => Scalar::Bytes(body),
        (field::INT64, FieldValue::Varint(v)) => Scalar::I64(v as i64),
        (field::INT32, FieldValue::Varint(v)) => Scalar::I32(v as i32),
        (field::BOOL, FieldValue::Varint(v)) => Scalar::Bool(v != 0),
        (field::DOUBLE, FieldValue::Fixed64(le)) => Scalar::F64(f64::from_le_bytes(le)),
        (field::FLOAT, FieldValue::Fixed32(le)) => Scalar::F32(f32::from_le_bytes(le)),
        _ => {
            return Err(format!(
                "a ProtoStream message with field {number} is not a string, byte array, number or boolean (user types need a schema)"
            ));
        }
    })
}

fn wrap_protostream(scalar: &Scalar<'_>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let len_delimited = |number: u64, body: &[u8]| {
        let mut out = Vec::with_capacity(body.len() + 6);
        put_varint(&mut out, (number << 3) | 2);
        put_varint(&mut out, body.len() as u64);
        out.extend_from_slice(body);
        out
    };
    match scalar {
        Scalar::Str(text) => return Ok(len_delimited(field::STRING, text.as_bytes())),
        Scalar::Bytes(raw) => return Ok(len_delimited(field::BYTES, raw)),
        Scalar::JsonText(_) => {
            return Err("JSON objects, arrays and null need a ProtoStream schema, which Weft does not have yet".into());
        }
        Scalar::I32(v) => {
            put_varint(&mut out, field::INT32 << 3);
            // int32 is sign-extended to 64 bits on the wire.
            put_varint(&mut out, i64::from(*v) as u64);
        }
        Scalar::I64(v) => {
            put_varint(&mut out, field::INT64 << 3);
            put_varint(&mut out, *v as u64);
        }
        Scalar::Bool(v) => {
            put_varint(&mut out, field::BOOL << 3);
            out.push(u8::from(*v));
        }
        Scalar::F64(v) => {
            put_varint(&mut out, (field::DOUBLE << 3) | 1);
            out.extend_from_slice(&v.to_le_bytes());
        }
        Scalar::F32(v) => {
            put_varint(&mut out, (field::FLOAT << 3) | 5);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    Ok(out)
}

/// The high byte of the client flags that mark a value a ProtoStream client wrote into a
/// text or octet-stream cache as typed (`W`). The next byte is the `WrappedMessage` field of
/// its type (5 for an `Integer`, 10 for a `byte[]`), or 0 for a message kept as sent. The low
/// 16 bits stay 0: memcached clients keep their own serialization flags there, and read such
/// a value as plain bytes.
const TYPED_FLAGS_MARK: u32 = 0x57 << 24;
/// The bits of the client flags a typed value's flags must match besides the field byte.
const TYPED_FLAGS_FIXED: u32 = 0xff00_ffff;
/// The field byte of a ProtoStream message kept as sent (dates, instants, user types).
const WHOLE_MESSAGE: u64 = 0;

/// The client flags that mark a stored value as the ProtoStream type of `WrappedMessage`
/// field `field` (0: the value is a whole message, kept as sent).
#[must_use]
pub const fn typed_flags(field: u8) -> u32 {
    TYPED_FLAGS_MARK | (field as u32) << 16
}

/// The `WrappedMessage` field that `flags` mark a stored value with, if they mark one.
#[must_use]
pub const fn typed_field(flags: u32) -> Option<u8> {
    if flags & TYPED_FLAGS_FIXED == TYPED_FLAGS_MARK {
        Some((flags >> 16) as u8)
    } else {
        None
    }
}

/// The first byte of a typed ProtoStream key (anything but a string or a byte array) stored in
/// an octet-stream cache, before the key's message. It never occurs in UTF-8, so no string
/// key (the text RESP, REST and Hot Rod string keys are stored as) can take this form.
pub const TYPED_KEY_PREFIX: u8 = 0xff;

/// The text a typed ProtoStream primitive is stored as in a text or octet-stream cache
/// (`42`, `true`, `3.5`, `ж`), if its type has one.
fn typed_text(number: u64, value: FieldValue<'_>) -> Option<String> {
    Some(match (number, value) {
        (field::INT32 | field::INT64 | field::SHORT | field::BYTE, FieldValue::Varint(v)) => {
            (v as i64).to_string()
        }
        (field::BOOL, FieldValue::Varint(0)) => "false".into(),
        (field::BOOL, FieldValue::Varint(1)) => "true".into(),
        (field::DOUBLE, FieldValue::Fixed64(le)) => java_double(f64::from_le_bytes(le)),
        (field::FLOAT, FieldValue::Fixed32(le)) => java_float(f32::from_le_bytes(le)),
        (field::CHAR, FieldValue::Varint(v)) => {
            let unit = u32::try_from(v).ok().filter(|&unit| unit <= 0xffff)?;
            char::from_u32(unit)?.to_string()
        }
        _ => return None,
    })
}

/// The ProtoStream message of field `number` whose text (as [`typed_text`] writes it) is
/// `text`; `None` when the text does not read as that type (it was rewritten elsewhere).
fn typed_message(number: u64, text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(11);
    put_varint(&mut out, number << 3);
    match number {
        // int32 and its narrower Java types are sign-extended to 64 bits on the wire.
        field::INT32 => put_varint(&mut out, i64::from(text.parse::<i32>().ok()?) as u64),
        field::SHORT => put_varint(&mut out, i64::from(text.parse::<i16>().ok()?) as u64),
        field::BYTE => put_varint(&mut out, i64::from(text.parse::<i8>().ok()?) as u64),
        field::INT64 => put_varint(&mut out, text.parse::<i64>().ok()? as u64),
        field::BOOL => out.push(match text {
            "true" => 1,
            "false" => 0,
            _ => return None,
        }),
        field::CHAR => {
            let mut chars = text.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return None;
            };
            put_varint(&mut out, u64::from(u16::try_from(u32::from(c)).ok()?));
        }
        field::DOUBLE => {
            out.clear();
            put_varint(&mut out, (number << 3) | 1);
            out.extend_from_slice(&text.parse::<f64>().ok()?.to_le_bytes());
        }
        field::FLOAT => {
            out.clear();
            put_varint(&mut out, (number << 3) | 5);
            out.extend_from_slice(&text.parse::<f32>().ok()?.to_le_bytes());
        }
        _ => return None,
    }
    Some(out)
}

/// Converts a value from a request's format to a cache's, with the client flags to store
/// beside it.
///
/// From ProtoStream into a text or octet-stream cache, a string is stored as its text with
/// flags 0 (so RESP, memcached and REST read the text, and their values read back as
/// strings), and every other type keeps its Java type in the flags ([`typed_flags`]): a byte
/// array as its bytes; an `Integer`, `Long`, `Short`, `Byte`, `Boolean`, `Double`, `Float`
/// or `Character` as its text (what `transcode` stores, so RESP still reads `42`); any other
/// message (a `Date`, an `Instant`, a user type) as sent. Every other conversion is
/// [`transcode`]'s, with flags 0.
///
/// # Errors
/// As [`transcode`]; from ProtoStream into a text or octet-stream cache, only when the bytes
/// are not a well-formed message, or a string field is not UTF-8.
pub fn value_to_stored(
    bytes: &[u8],
    from: Format,
    to: Format,
) -> Result<(Cow<'_, [u8]>, u32), TranscodeError> {
    if from != Format::Protostream || !to.is_raw() {
        return Ok((transcode(bytes, from, to)?, 0));
    }
    let fail = |reason: String| TranscodeError {
        from: from.media_type(),
        to: to.media_type(),
        reason,
    };
    match single_field(bytes) {
        Ok((field::STRING, FieldValue::LengthDelimited(text))) => {
            std::str::from_utf8(text).map_err(|_| fail("string field is not UTF-8".into()))?;
            Ok((Cow::Borrowed(text), 0))
        }
        Ok((field::BYTES, FieldValue::LengthDelimited(raw))) => {
            Ok((Cow::Borrowed(raw), typed_flags(field::BYTES as u8)))
        }
        Ok((number, value)) => {
            // Stored as text only when the text reads back as the very same message, so
            // that a Hot Rod client always gets back the bytes it sent.
            if let Some(text) = typed_text(number, value)
                && typed_message(number, &text).as_deref() == Some(bytes)
            {
                return Ok((Cow::Owned(text.into_bytes()), typed_flags(number as u8)));
            }
            Ok((Cow::Borrowed(bytes), typed_flags(WHOLE_MESSAGE as u8)))
        }
        Err(_) if is_message(bytes) => Ok((Cow::Borrowed(bytes), typed_flags(WHOLE_MESSAGE as u8))),
        Err(reason) => Err(fail(reason)),
    }
}

/// Converts a stored value, with its client flags, to a request's format: the inverse of
/// [`value_to_stored`]. A value from a text or octet-stream cache whose flags mark a type
/// goes back to ProtoStream as that type; one whose flags mark none (written by RESP,
/// memcached or REST), or whose text no longer reads as its type (rewritten elsewhere, say
/// `INCRBYFLOAT` on an `Integer`), converts as [`transcode`] does.
///
/// # Errors
/// As [`transcode`].
pub fn value_from_stored(
    bytes: &[u8],
    flags: u32,
    from: Format,
    to: Format,
) -> Result<Cow<'_, [u8]>, TranscodeError> {
    if to == Format::Protostream
        && from.is_raw()
        && let Some(number) = typed_field(flags)
    {
        let number = u64::from(number);
        let typed = match number {
            WHOLE_MESSAGE if is_message(bytes) => Some(Cow::Borrowed(bytes)),
            field::BYTES => wrap_protostream(&Scalar::Bytes(bytes)).ok().map(Cow::Owned),
            _ => std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| typed_message(number, text))
                .map(Cow::Owned),
        };
        if let Some(typed) = typed {
            return Ok(typed);
        }
    }
    transcode(bytes, from, to)
}

/// Converts a key from a request's format to a cache's.
///
/// From ProtoStream into an octet-stream cache, a string is stored as its text and a byte
/// array as its bytes (so other protocols share them), and any other key as its message
/// behind [`TYPED_KEY_PREFIX`]: the `Integer` 1 is then neither the string `"1"` nor the
/// byte array `{'1'}`. (Only a byte array, or a RESP key, that starts with byte 0xff and goes
/// on as a ProtoStream message names the same entry as that typed key.) Every other
/// conversion is [`transcode`]'s; a text cache stores a typed key as its text, as it must.
///
/// # Errors
/// As [`transcode`]; from ProtoStream into an octet-stream cache, only when the bytes are
/// not a well-formed message, or a string field is not UTF-8.
pub fn key_to_stored(
    bytes: &[u8],
    from: Format,
    to: Format,
) -> Result<Cow<'_, [u8]>, TranscodeError> {
    if from != Format::Protostream || to != Format::Octet {
        return transcode(bytes, from, to);
    }
    match single_field(bytes) {
        Ok((field::STRING | field::BYTES, FieldValue::LengthDelimited(_))) => {
            transcode(bytes, from, to)
        }
        _ if is_message(bytes) => {
            let mut typed = Vec::with_capacity(bytes.len() + 1);
            typed.push(TYPED_KEY_PREFIX);
            typed.extend_from_slice(bytes);
            Ok(Cow::Owned(typed))
        }
        _ => transcode(bytes, from, to),
    }
}

/// Converts a stored key to a request's format: the inverse of [`key_to_stored`].
///
/// # Errors
/// As [`transcode`].
pub fn key_from_stored(
    bytes: &[u8],
    from: Format,
    to: Format,
) -> Result<Cow<'_, [u8]>, TranscodeError> {
    if from == Format::Octet
        && to == Format::Protostream
        && let Some((&TYPED_KEY_PREFIX, message)) = bytes.split_first()
        && is_typed_key(message)
    {
        return Ok(Cow::Borrowed(message));
    }
    transcode(bytes, from, to)
}

/// True when `message` is what [`key_to_stored`] puts behind [`TYPED_KEY_PREFIX`]: a
/// message that is not a string or a byte array.
fn is_typed_key(message: &[u8]) -> bool {
    let plain = matches!(
        single_field(message),
        Ok((field::STRING | field::BYTES, FieldValue::LengthDelimited(_)))
    );
    !plain && is_message(message)
}

fn parse_json(bytes: &[u8]) -> Result<Scalar<'_>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("invalid JSON: {e}"))?;
    Ok(match value {
        serde_json::Value::String(text) => Scalar::Str(Cow::Owned(text)),
        serde_json::Value::Bool(v) => Scalar::Bool(v),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(v) => i32::try_from(v).map_or(Scalar::I64(v), Scalar::I32),
            None => Scalar::F64(n.as_f64().ok_or("number out of range")?),
        },
        serde_json::Value::Object(map) if map.contains_key("_type") => canonical_scalar(&map)?,
        _ => Scalar::JsonText(bytes),
    })
}

/// ProtoStream's JSON form of a primitive: `{"_type":"string","_value":"x"}`.
fn canonical_scalar(
    map: &serde_json::Map<String, serde_json::Value>,
) -> Result<Scalar<'static>, String> {
    let kind = map
        .get("_type")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let value = map
        .get("_value")
        .ok_or("a `_type` object without `_value`")?;
    let wrong = || format!("`_value` does not fit `_type` {kind}");
    Ok(match kind {
        "string" => Scalar::Str(Cow::Owned(value.as_str().ok_or_else(wrong)?.to_owned())),
        "int32" => Scalar::I32(
            value
                .as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(wrong)?,
        ),
        "int64" => Scalar::I64(value.as_i64().ok_or_else(wrong)?),
        "bool" => Scalar::Bool(value.as_bool().ok_or_else(wrong)?),
        "double" => Scalar::F64(value.as_f64().ok_or_else(wrong)?),
        "float" => Scalar::F32(value.as_f64().ok_or_else(wrong)? as f32),
        other => {
            return Err(format!(
                "ProtoStream type `{other}` is not a primitive (user types need a schema)"
            ));
        }
    })
}

/// The JSON a ProtoStream primitive reads as (Infinispan's canonical form).
fn to_canonical_json(scalar: &Scalar<'_>) -> Result<Vec<u8>, String> {
    let (kind, value): (&str, serde_json::Value) = match scalar {
        Scalar::Str(text) => ("string", text.clone().into_owned().into()),
        Scalar::I32(v) => ("int32", (*v).into()),
        Scalar::I64(v) => ("int64", (*v).into()),
        Scalar::Bool(v) => ("bool", (*v).into()),
        Scalar::F64(v) => (
            "double",
            serde_json::Number::from_f64(*v)
                .ok_or("not a finite number")?
                .into(),
        ),
        Scalar::F32(v) => (
            "float",
            serde_json::Number::from_f64(f64::from(*v))
                .ok_or("not a finite number")?
                .into(),
        ),
        Scalar::Bytes(_) | Scalar::JsonText(_) => return to_json(scalar),
    };
    let object = serde_json::json!({ "_type": kind, "_value": value });
    serde_json::to_vec(&object).map_err(|e| e.to_string())
}

fn to_json(scalar: &Scalar<'_>) -> Result<Vec<u8>, String> {
    let value = match scalar {
        Scalar::Str(text) => serde_json::Value::String(text.clone().into_owned()),
        Scalar::Bytes(_) => return Err("binary data (not UTF-8) has no JSON form".into()),
        Scalar::JsonText(raw) => return Ok(raw.to_vec()),
        Scalar::I32(v) => (*v).into(),
        Scalar::I64(v) => (*v).into(),
        Scalar::Bool(v) => (*v).into(),
        Scalar::F64(v) => serde_json::Number::from_f64(*v)
            .ok_or("not a finite number")?
            .into(),
        Scalar::F32(v) => serde_json::Number::from_f64(f64::from(*v))
            .ok_or("not a finite number")?
            .into(),
    };
    serde_json::to_vec(&value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Format::{Json, Octet, Opaque, Protostream, Text};

    fn convert(bytes: &[u8], from: Format, to: Format) -> Vec<u8> {
        transcode(bytes, from, to)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_owned()
    }

    fn store(bytes: &[u8], from: Format, to: Format) -> (Vec<u8>, u32) {
        let (stored, flags) = value_to_stored(bytes, from, to).unwrap_or_else(|e| panic!("{e}"));
        (stored.into_owned(), flags)
    }

    fn load(bytes: &[u8], flags: u32, from: Format, to: Format) -> Vec<u8> {
        value_from_stored(bytes, flags, from, to)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_owned()
    }

    fn store_key(bytes: &[u8], from: Format, to: Format) -> Vec<u8> {
        key_to_stored(bytes, from, to)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_owned()
    }

    fn load_key(bytes: &[u8], from: Format, to: Format) -> Vec<u8> {
        key_from_stored(bytes, from, to)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_owned()
    }

    // Proves the traced Java encodings convert to text and back (protocols.md §1.11).
    #[test]
    fn protostream_primitives() {
        assert_eq!(convert(b"\x4a\x04key1", Protostream, Text), b"key1");
        assert_eq!(convert(b"key1", Octet, Protostream), b"\x4a\x04key1");
        assert_eq!(convert(b"\x4a\x00", Protostream, Octet), b"");
        assert_eq!(
            convert("héllo".as_bytes(), Text, Protostream),
            b"\x4a\x06h\xc3\xa9llo"
        );
        assert_eq!(
            convert(b"\x52\x03\x01\x02\xff", Protostream, Octet),
            b"\x01\x02\xff"
        );
        assert_eq!(
            convert(b"\x01\x02\xff", Octet, Protostream),
            b"\x52\x03\x01\x02\xff"
        );
        assert_eq!(convert(b"\x28\x2a", Protostream, Text), b"42");
        assert_eq!(
            convert(
                b"\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                Protostream,
                Text
            ),
            b"-1"
        );
        assert_eq!(convert(b"\x40\x01", Protostream, Text), b"true");
        assert_eq!(
            convert(b"\x09\x00\x00\x00\x00\x00\x00\x0c\x40", Protostream, Text),
            b"3.5"
        );
        assert_eq!(convert(b"42", Json, Protostream), b"\x28\x2a");
        assert_eq!(
            convert(b"-1", Json, Protostream),
            b"\x28\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
        );
        assert_eq!(convert(b"\"key1\"", Json, Protostream), b"\x4a\x04key1");
    }

    // Proves JSON conversions keep JSON as JSON and quote plain text.
    #[test]
    fn json_and_text() {
        assert_eq!(convert(b"\"abc\"", Json, Text), b"abc");
        assert_eq!(convert(b"abc", Text, Json), b"\"abc\"");
        assert_eq!(convert(b"{\"a\":1}", Text, Json), b"{\"a\":1}");
        assert_eq!(convert(b"{\"a\":1}", Json, Octet), b"{\"a\":1}");
        assert_eq!(
            convert(b"\x4a\x03abc", Protostream, Json),
            br#"{"_type":"string","_value":"abc"}"#
        );
        assert_eq!(
            convert(br#"{"_type":"string","_value":"abc"}"#, Json, Protostream),
            b"\x4a\x03abc"
        );
        assert_eq!(
            convert(br#"{"_type":"int32","_value":42}"#, Json, Protostream),
            b"\x28\x2a"
        );
        assert_eq!(
            convert(b"\x28\x2a", Protostream, Json),
            br#"{"_type":"int32","_value":42}"#
        );
        assert!(transcode(br#"{"_type":"Person","_value":1}"#, Json, Protostream).is_err());
        assert!(transcode(b"{\"a\":1}", Json, Protostream).is_err());
        assert!(transcode(b"\x52\x01\xff", Protostream, Json).is_err());
        assert!(transcode(b"{nope", Json, Protostream).is_err());
    }

    // Proves identities borrow, opaque data is never touched, and broken messages fail.
    #[test]
    fn identities_and_errors() {
        assert!(matches!(transcode(b"x", Text, Octet), Ok(Cow::Borrowed(_))));
        assert!(matches!(
            transcode(b"\x99", Protostream, Protostream),
            Ok(Cow::Borrowed(_))
        ));
        assert!(matches!(
            transcode(b"\x99", Opaque, Protostream),
            Ok(Cow::Borrowed(_))
        ));
        for bad in [
            &b""[..],
            b"\x4a",
            b"\x4a\x05ab",
            b"\x4a\x01a\x4a\x01b",
            b"\x82\x01\x00",
            b"\x4a\x02\xff\xfe",
        ] {
            assert!(transcode(bad, Protostream, Text).is_err(), "{bad:?}");
        }
        assert_eq!(Format::from_media_type("Text/Plain; charset=UTF-8"), Text);
        assert_eq!(Format::from_media_type("application/unknown"), Opaque);
    }

    /// `(ProtoStream bytes, text stored, WrappedMessage field)` of the typed values Weft
    /// stores as text.
    fn texts() -> Vec<(Vec<u8>, &'static str, u8)> {
        let double = |v: f64| [&[0x09][..], &v.to_le_bytes()].concat();
        let float = |v: f32| [&[0x15][..], &v.to_le_bytes()].concat();
        let minus_one = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        vec![
            (vec![0x28, 0x2a], "42", 5),
            ([&[0x28][..], &minus_one].concat(), "-1", 5),
            (vec![0x18, 0x2a], "42", 3),
            ([&[0x18][..], &minus_one].concat(), "-1", 3),
            (vec![0x40, 0x01], "true", 8),
            (vec![0x40, 0x00], "false", 8),
            (double(3.5), "3.5", 1),
            (double(-1.0e-300), "-1.0E-300", 1),
            (double(1.0e7), "1.0E7", 1),
            (double(f64::NAN), "NaN", 1),
            (float(0.1), "0.1", 2),
            (float(f32::MAX), "3.4028235E38", 2),
            ([&[0xa8, 0x01][..], &minus_one].concat(), "-1", 21),
            (vec![0xb0, 0x01, 0x7f], "127", 22),
            (vec![0xa0, 0x01, 0xb6, 0x08], "ж", 20),
        ]
    }

    // Proves typed ProtoStream values go into a raw cache as their text with their type in
    // the client flags, strings as text without flags, byte arrays as bytes flagged as such,
    // and other messages as sent; and that each comes back as the very bytes written.
    #[test]
    fn typed_values_round_trip_through_raw_storage() {
        for storage in [Octet, Text] {
            for (message, text, field) in texts() {
                let (stored, flags) = store(&message, Protostream, storage);
                assert_eq!(
                    (&*stored, flags),
                    (text.as_bytes(), typed_flags(field)),
                    "{text}"
                );
                assert_eq!(typed_field(flags), Some(field));
                let back = load(&stored, flags, storage, Protostream);
                assert_eq!(*back, *message, "{text}");
            }
            let mut date = vec![0xb8, 0x01];
            put_varint(&mut date, 1_700_000_000_123);
            let instant = [&date[..], &[0xc8, 0x01, 0x05]].concat();
            let user_type = b"\x98\x01\x2a\x8a\x01\x02\x08\x01".to_vec();
            // Not the canonical form of any int32: kept as sent, not rewritten.
            let wide_int32 = vec![0x28, 0x80, 0x80, 0x80, 0x80, 0x10];
            for message in [date, instant, user_type, wide_int32] {
                let (stored, flags) = store(&message, Protostream, storage);
                assert_eq!((&*stored, flags), (&message[..], typed_flags(0)));
                let back = load(&stored, flags, storage, Protostream);
                assert_eq!(*back, *message);
            }
            let (stored, flags) = store(b"\x4a\x02hi", Protostream, storage);
            assert_eq!((&*stored, flags), (&b"hi"[..], 0));
            let (stored, flags) = store(b"\x52\x02hi", Protostream, storage);
            assert_eq!((&*stored, flags), (&b"hi"[..], typed_flags(10)));
            assert_eq!(load(b"hi", flags, storage, Protostream), b"\x52\x02hi");
            for broken in [&b""[..], b"\x4a", b"\x4a\x02\xff\xfe", b"\x28", b"\x0b\x00"] {
                assert!(
                    value_to_stored(broken, Protostream, storage).is_err(),
                    "{broken:?}"
                );
            }
        }
        // Other conversions are transcode's, without flags.
        assert_eq!(store(b"42", Json, Octet), (b"42".to_vec(), 0));
        assert!(matches!(
            value_to_stored(b"\x28\x2a", Protostream, Protostream),
            Ok((Cow::Borrowed(b"\x28\x2a"), 0))
        ));
    }

    // Proves a stored value whose flags mark no type, or whose text no longer reads as its
    // type (rewritten by RESP or memcached), converts as transcode does; and that readers in
    // other formats see the stored text.
    #[test]
    fn stored_values_without_a_readable_type_convert_as_text() {
        let integer = typed_flags(5);
        assert_eq!(load(b"43", integer, Octet, Protostream), b"\x28\x2b");
        assert_eq!(load(b"43x", integer, Octet, Protostream), b"\x4a\x0343x");
        assert_eq!(load(b"42", 0, Octet, Protostream), b"\x4a\x0242");
        // memcached flags of its own, that only look like a mark in part.
        assert_eq!(load(b"42", 5, Octet, Protostream), b"\x4a\x0242");
        assert_eq!(load(b"42", integer | 1, Octet, Protostream), b"\x4a\x0242");
        assert_eq!(typed_field(integer | 1), None);
        // A whole message rewritten into something that is not one.
        assert_eq!(
            load(b"\x28", typed_flags(0), Octet, Protostream),
            b"\x4a\x01\x28"
        );
        assert_eq!(
            load(b"true", typed_flags(8), Octet, Protostream),
            b"\x40\x01"
        );
        assert_eq!(
            load(b"200", typed_flags(22), Octet, Protostream),
            b"\x4a\x03200"
        );
        assert_eq!(load(b"42", integer, Octet, Text), b"42");
        assert_eq!(load(b"42", integer, Octet, Json), b"42");
        assert_eq!(
            load(b"\x28\x2a", integer, Protostream, Protostream),
            b"\x28\x2a"
        );
    }

    // Proves an octet-stream cache stores string and byte-array keys as their bytes and every
    // other key behind 0xff, so the Integer 1 is neither "1" nor the string of its own
    // ProtoStream bytes; and that each key converts back to what was sent.
    #[test]
    fn typed_keys_stay_apart_in_octet_storage() {
        let stored = |key: &[u8]| store_key(key, Protostream, Octet);
        assert_eq!(stored(b"\x4a\x011"), b"1");
        assert_eq!(stored(b"\x52\x011"), b"1");
        assert_eq!(stored(b"\x28\x01"), b"\xff\x28\x01");
        assert_eq!(stored(b"\x4a\x02\x28\x01"), b"\x28\x01");
        assert_eq!(stored(b"\x18\x01"), b"\xff\x18\x01");
        let back = |key: &[u8]| load_key(key, Octet, Protostream);
        for key in [
            &b"\x4a\x011"[..],
            b"\x28\x01",
            b"\x4a\x02\x28\x01",
            b"\x18\x01",
            b"\x52\x02\xff\x41",
            b"\xb8\x01\x2a",
        ] {
            assert_eq!(back(&stored(key)), key, "{key:?}");
        }
        // 0xff then something that is not a typed key is plain bytes.
        assert_eq!(back(b"\xff"), b"\x52\x01\xff");
        assert_eq!(back(b"\xff\x4a\x011"), b"\x52\x04\xff\x4a\x011");
        // Other formats convert as transcode does; a text cache keeps keys as text.
        assert_eq!(store_key(b"\x28\x01", Protostream, Text), b"1");
        assert_eq!(load_key(b"\xff\x28\x01", Octet, Text), b"\xff\x28\x01");
        assert!(key_to_stored(b"\x4a\x05ab", Protostream, Octet).is_err());
    }
}
