//! Keys, values and durations between the command line and the REST API: how a key
//! becomes a URL segment (and `Key-Content-Type`), how a value typed in an encoding becomes
//! bytes and a `Content-Type`, and back.

use base64::Engine as _;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::Value;

use crate::command::{Encoding, KeyEncoding};
use crate::error::CliError;

/// What stays unescaped in a path segment: RFC 3986's unreserved characters.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `Key-Content-Type` of keys written as hex (`0x…` in the URL).
const HEX_KEYS: &str = "application/octet-stream; encoding=hex";
/// `Key-Content-Type` of keys written as Base64.
const BASE64_KEYS: &str = "application/octet-stream";

/// `text` as one percent-encoded path segment.
#[must_use]
pub fn segment(text: &str) -> String {
    utf8_percent_encode(text, SEGMENT).to_string()
}

/// A key as typed, as the URL segment and `Key-Content-Type` header (if any) that address it.
///
/// # Errors
/// [`CliError::Usage`] if it does not decode in its encoding.
pub fn key_segment(
    key: &str,
    encoding: KeyEncoding,
) -> Result<(String, Option<&'static str>), CliError> {
    match encoding {
        KeyEncoding::Text => Ok((segment(key), None)),
        KeyEncoding::Hex => {
            let bytes = hex_decode(key)
                .map_err(|reason| CliError::usage(format!("key `{key}` is not hex: {reason}")))?;
            Ok((format!("0x{}", hex_encode(&bytes)), Some(HEX_KEYS)))
        }
        KeyEncoding::Base64 => {
            let bytes = base64_decode(key).map_err(|reason| {
                CliError::usage(format!("key `{key}` is not Base64: {reason}"))
            })?;
            let canonical = base64::engine::general_purpose::STANDARD.encode(bytes);
            Ok((segment(&canonical), Some(BASE64_KEYS)))
        }
    }
}

/// The `Key-Content-Type` that makes a listing show keys (and values) in `encoding`.
#[must_use]
pub fn listing_key_type(encoding: KeyEncoding) -> Option<&'static str> {
    match encoding {
        KeyEncoding::Text => None,
        KeyEncoding::Hex => Some(HEX_KEYS),
        KeyEncoding::Base64 => Some(BASE64_KEYS),
    }
}

/// A value as typed: its bytes and `Content-Type`.
///
/// # Errors
/// [`CliError::Usage`] if it does not decode in `encoding`.
pub fn value_bytes(value: &str, encoding: Encoding) -> Result<(Vec<u8>, &'static str), CliError> {
    match encoding {
        Encoding::Text => Ok((value.as_bytes().to_vec(), "text/plain; charset=UTF-8")),
        Encoding::Json => {
            let parsed: Value = serde_json::from_str(value)
                .map_err(|error| CliError::usage(format!("the value is not JSON: {error}")))?;
            Ok((parsed.to_string().into_bytes(), "application/json"))
        }
        Encoding::Hex => hex_decode(value)
            .map(|bytes| (bytes, "application/octet-stream"))
            .map_err(|reason| CliError::usage(format!("the value is not hex: {reason}"))),
        Encoding::Base64 => base64_decode(value)
            .map(|bytes| (bytes, "application/octet-stream"))
            .map_err(|reason| CliError::usage(format!("the value is not Base64: {reason}"))),
    }
}

/// The `Accept` header that labels a value read in `encoding` (Weft never converts values).
#[must_use]
pub fn accept(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Text => "text/plain",
        Encoding::Json => "application/json",
        Encoding::Hex | Encoding::Base64 => "application/octet-stream",
    }
}

/// Stored bytes shown in `encoding`: for people (text; JSON pretty-printed) and as a JSON
/// value for scripts (a string; for JSON, the parsed value).
///
/// # Errors
/// [`CliError::Answer`] when `encoding` is JSON and the bytes are not.
pub fn show_value(bytes: &[u8], encoding: Encoding) -> Result<(String, Value), CliError> {
    match encoding {
        Encoding::Text => {
            let text = text_of(bytes);
            Ok((text.clone(), Value::String(text)))
        }
        Encoding::Json => {
            let parsed: Value = serde_json::from_slice(bytes).map_err(|error| {
                CliError::Answer(format!(
                    "the stored value is not JSON ({error}); read it with --encoding text or hex"
                ))
            })?;
            let pretty =
                serde_json::to_string_pretty(&parsed).unwrap_or_else(|_| parsed.to_string());
            Ok((pretty, parsed))
        }
        Encoding::Hex => {
            let hex = hex_encode(bytes);
            Ok((hex.clone(), Value::String(hex)))
        }
        Encoding::Base64 => {
            let text = base64::engine::general_purpose::STANDARD.encode(bytes);
            Ok((text.clone(), Value::String(text)))
        }
    }
}

/// Bytes as text: UTF-8 as it is; anything else with its invalid bytes written `\xNN`, so
/// that nothing is lost or silently replaced.
#[must_use]
pub fn text_of(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => bytes
            .utf8_chunks()
            .flat_map(|chunk| {
                let invalid: String = chunk
                    .invalid()
                    .iter()
                    .map(|byte| format!("\\x{byte:02x}"))
                    .collect();
                [chunk.valid().to_owned(), invalid]
            })
            .collect(),
    }
}

/// Lowercase hex digits.
#[must_use]
pub fn hex_encode(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

/// Hex digits (either case, optionally after `0x`, spaces ignored) as bytes.
///
/// # Errors
/// A reason when a character is not a hex digit or the count is odd.
pub fn hex_decode(text: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text)
        .bytes()
        .filter(|byte| !byte.is_ascii_whitespace())
        .collect();
    if digits.len() % 2 != 0 {
        return Err("an odd number of digits".to_owned());
    }
    digits
        .chunks(2)
        .map(|pair| {
            let digit = |byte: u8| {
                (byte as char)
                    .to_digit(16)
                    .ok_or_else(|| format!("`{}` is not a hex digit", byte as char))
            };
            Ok(u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).unwrap_or_default())
        })
        .collect()
}

/// Base64 (standard or URL-safe alphabet, padding optional) as bytes.
///
/// # Errors
/// The decoder's reason.
pub fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let trimmed = text.trim().trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| URL_SAFE_NO_PAD.decode(trimmed))
        .map_err(|error| error.to_string())
}

/// A duration typed as whole seconds, or with a unit (`s`, `m`, `h`, `d`); negative means
/// never. The REST API takes whole seconds.
///
/// # Errors
/// [`CliError::Usage`] naming the option when it does not parse.
pub fn seconds(option: &str, text: &str) -> Result<i64, CliError> {
    let wrong = || {
        CliError::usage(format!(
            "--{option} `{text}`: expected whole seconds or a number with a unit \
             (90s, 10m, 2h, 1d), or -1 for never"
        ))
    };
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let number: i64 = number.trim().parse().map_err(|_| wrong())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(wrong()),
    };
    if number < 0 {
        return Ok(-1);
    }
    number.checked_mul(scale).ok_or_else(wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every encoding round-trips bytes and names the media type the REST API reads.
    #[test]
    fn values_round_trip() {
        let bytes = [0x00, 0xff, b'a'];
        for (typed, encoding) in [("00ff61", Encoding::Hex), ("AP9h", Encoding::Base64)] {
            let (decoded, content_type) = value_bytes(typed, encoding).expect("decodes");
            assert_eq!(
                (decoded.as_slice(), content_type),
                (&bytes[..], "application/octet-stream")
            );
            assert_eq!(show_value(&bytes, encoding).expect("shows").0, typed);
        }
        let (json, content_type) = value_bytes("{ \"a\" : [1, 2] }", Encoding::Json).expect("JSON");
        assert_eq!(
            (json.as_slice(), content_type),
            (&b"{\"a\":[1,2]}"[..], "application/json")
        );
        assert!(value_bytes("{", Encoding::Json).is_err());
        assert!(value_bytes("0g", Encoding::Hex).is_err());
        assert_eq!(
            show_value(&bytes, Encoding::Text).expect("text").0,
            "\u{0}\\xffa"
        );
        assert!(show_value(b"not json", Encoding::Json).is_err());
    }

    // Proves keys address the same bytes however they are typed.
    #[test]
    fn keys_become_segments() {
        assert_eq!(
            key_segment("a/b c", KeyEncoding::Text).expect("text").0,
            "a%2Fb%20c"
        );
        assert_eq!(
            key_segment("0x00FF61", KeyEncoding::Hex).expect("hex"),
            ("0x00ff61".to_owned(), Some(HEX_KEYS))
        );
        assert_eq!(
            key_segment("/w==", KeyEncoding::Base64).expect("base64"),
            ("%2Fw%3D%3D".to_owned(), Some(BASE64_KEYS))
        );
    }

    // Proves durations read as the REST API's whole seconds.
    #[test]
    fn durations_parse() {
        assert_eq!(seconds("lifespan", "90").ok(), Some(90));
        assert_eq!(seconds("lifespan", "10m").ok(), Some(600));
        assert_eq!(seconds("lifespan", "1d").ok(), Some(86_400));
        assert_eq!(seconds("lifespan", "-1").ok(), Some(-1));
        assert!(seconds("lifespan", "1.5s").is_err());
        assert!(seconds("max-idle", "3w").is_err());
    }
}
