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
            Scalar::F32(v) => Cow::Owned(java_double(f64::from(v)).into_bytes()),
        }),
        Format::Json if from == Format::Protostream => {
            to_canonical_json(&scalar).map(Cow::Owned).map_err(fail)
        }
        Format::Json => to_json(&scalar).map(Cow::Owned).map_err(fail),
        Format::Opaque => Ok(Cow::Borrowed(bytes)),
    }
}

/// Like Java's `Double.toString` for ordinary values: `3.5`, `1.0`, `NaN`, `Infinity`.
fn java_double(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else if v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
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
}

fn unwrap_protostream(bytes: &[u8]) -> Result<Scalar<'_>, String> {
    let mut pos = 0;
    let tag = read_varint(bytes, &mut pos)?;
    let (number, wire_type) = (tag >> 3, tag & 7);
    let scalar = match (number, wire_type) {
        (field::STRING | field::BYTES, 2) => {
            let len =
                usize::try_from(read_varint(bytes, &mut pos)?).map_err(|_| "length overflows")?;
            let body = bytes
                .get(pos..)
                .and_then(|rest| rest.get(..len))
                .ok_or("length past the end")?;
            pos += len;
            if number == field::STRING {
                Scalar::Str(Cow::Borrowed(
                    std::str::from_utf8(body).map_err(|_| "string field is not UTF-8")?,
                ))
            } else {
                Scalar::Bytes(body)
            }
        }
        (field::INT64, 0) => Scalar::I64(read_varint(bytes, &mut pos)? as i64),
        (field::INT32, 0) => Scalar::I32(read_varint(bytes, &mut pos)? as i32),
        (field::BOOL, 0) => Scalar::Bool(read_varint(bytes, &mut pos)? != 0),
        (field::DOUBLE, 1) => {
            let raw = bytes.get(pos..pos + 8).ok_or("truncated double")?;
            pos += 8;
            let mut le = [0; 8];
            le.copy_from_slice(raw);
            Scalar::F64(f64::from_le_bytes(le))
        }
        (field::FLOAT, 5) => {
            let raw = bytes.get(pos..pos + 4).ok_or("truncated float")?;
            pos += 4;
            let mut le = [0; 4];
            le.copy_from_slice(raw);
            Scalar::F32(f32::from_le_bytes(le))
        }
        _ => {
            return Err(format!(
                "a ProtoStream message with field {number} is not a string, byte array, number or boolean (user types need a schema)"
            ));
        }
    };
    if pos != bytes.len() {
        return Err("a ProtoStream message with more than one field is not a simple value".into());
    }
    Ok(scalar)
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
}
