//! Keys in URLs and in JSON listings. A key is a percent-encoded path segment; once
//! decoded it is the key's bytes, or, when `Key-Content-Type` says so, Base64 or `0x…` hex
//! of them. Listings write keys (and values) back in the same encoding, so a client that
//! lists keys can address each one with the same header.

use axum::http::HeaderMap;
use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use percent_encoding::percent_decode_str;

use crate::error::RestError;
use crate::headers::{KEY_CONTENT_TYPE, MediaType, text};

/// Base64 with or without padding: clients differ, and `=` must be percent-encoded in
/// URLs, which many forget.
const BASE64_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
/// The URL-safe alphabet (`-_` for `+/`), which avoids percent-encoding altogether.
const BASE64_URL_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);
/// Base64 as written in JSON listings: the standard alphabet, padded.
const BASE64_OUT: GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// How keys are written in URLs (and keys and values in JSON listings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyEncoding {
    /// The text is the key (UTF-8 bytes of the decoded URL segment).
    Text,
    /// Base64 of the key's bytes (`Key-Content-Type: application/octet-stream`).
    Base64,
    /// `0x`-prefixed hex of the key's bytes (`application/octet-stream; encoding=hex`).
    Hex,
}

impl KeyEncoding {
    /// The media type of keys in this encoding once decoded: text, or raw bytes.
    pub(crate) fn format(self) -> weft_core::Format {
        match self {
            Self::Text => weft_core::Format::Text,
            Self::Base64 | Self::Hex => weft_core::Format::Octet,
        }
    }

    /// The encoding `Key-Content-Type` asks for; Infinispan's default is a Java String,
    /// which for us is the text itself.
    ///
    /// # Errors
    /// 400 for a key type Weft cannot address (other Java primitives, unknown types).
    pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Self, RestError> {
        let Some(value) = text(headers, &KEY_CONTENT_TYPE)? else {
            return Ok(Self::Text);
        };
        let unsupported = || {
            RestError::bad_request(format!(
                "unsupported Key-Content-Type `{value}`: use text/plain (the default), \
                 application/octet-stream (Base64 keys) or \
                 application/octet-stream; encoding=hex (0x… keys)"
            ))
        };
        let media = MediaType::parse(value).ok_or_else(unsupported)?;
        match media.essence.as_str() {
            "text/plain" => Ok(Self::Text),
            "application/octet-stream" => match media.parameter("encoding") {
                None => Ok(Self::Base64),
                Some(encoding) if encoding.eq_ignore_ascii_case("hex") => Ok(Self::Hex),
                Some(encoding) if encoding.eq_ignore_ascii_case("base64") => Ok(Self::Base64),
                Some(_) => Err(unsupported()),
            },
            "application/x-java-object" => match media.parameter("type") {
                None => Ok(Self::Text),
                Some("java.lang.String") => Ok(Self::Text),
                Some(kind) if kind.eq_ignore_ascii_case("bytes") || kind == "byte[]" => {
                    Ok(Self::Hex)
                }
                Some(_) => Err(unsupported()),
            },
            _ => Err(unsupported()),
        }
    }

    /// The key's bytes from its raw (still percent-encoded) URL segment.
    ///
    /// # Errors
    /// 400 if the decoded text is not valid in this encoding.
    pub(crate) fn decode(self, raw_segment: &str) -> Result<Vec<u8>, RestError> {
        let bytes: Vec<u8> = percent_decode_str(raw_segment).collect();
        match self {
            Self::Text => Ok(bytes),
            Self::Base64 => BASE64_LENIENT
                .decode(&bytes)
                .or_else(|_| BASE64_URL_LENIENT.decode(&bytes))
                .map_err(|_| {
                    RestError::bad_request(format!(
                        "key `{}` is not Base64, as Key-Content-Type application/octet-stream \
                         requires",
                        String::from_utf8_lossy(&bytes)
                    ))
                }),
            Self::Hex => decode_hex(&bytes).ok_or_else(|| {
                RestError::bad_request(format!(
                    "key `{}` is not 0x-prefixed hex with an even number of digits, as \
                     Key-Content-Type application/octet-stream; encoding=hex requires",
                    String::from_utf8_lossy(&bytes)
                ))
            }),
        }
    }

    /// Bytes as a JSON string in this encoding: text is lossy UTF-8 (invalid sequences
    /// become U+FFFD), Base64 and hex are exact.
    pub(crate) fn encode(self, bytes: &[u8]) -> String {
        match self {
            Self::Text => String::from_utf8_lossy(bytes).into_owned(),
            Self::Base64 => BASE64_OUT.encode(bytes),
            Self::Hex => {
                const DIGITS: &[u8; 16] = b"0123456789abcdef";
                let mut out = String::with_capacity(2 + bytes.len() * 2);
                out.push_str("0x");
                for byte in bytes {
                    out.push(char::from(DIGITS[usize::from(byte >> 4)]));
                    out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
                }
                out
            }
        }
    }
}

/// `0x`-prefixed (or bare) hex, either case, even length.
fn decode_hex(text: &[u8]) -> Option<Vec<u8>> {
    let digits = text
        .strip_prefix(b"0x")
        .or_else(|| text.strip_prefix(b"0X"))
        .unwrap_or(text);
    if digits.len() % 2 != 0 {
        return None;
    }
    let nibble = |digit: u8| {
        char::from(digit)
            .to_digit(16)
            .and_then(|n| u8::try_from(n).ok())
    };
    digits
        .chunks_exact(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves hex and Base64 keys decode, and that listings encode them back identically.
    #[test]
    fn round_trips() {
        let key = [0u8, 0xff, b'a', 0x10];
        for encoding in [KeyEncoding::Base64, KeyEncoding::Hex] {
            let written = encoding.encode(&key);
            let encoded: String =
                percent_encoding::utf8_percent_encode(&written, percent_encoding::NON_ALPHANUMERIC)
                    .collect();
            assert_eq!(encoding.decode(&encoded), Ok(key.to_vec()), "{encoding:?}");
        }
        assert_eq!(KeyEncoding::Hex.encode(&key), "0x00ff6110");
        assert_eq!(KeyEncoding::Hex.decode("0XABcd"), Ok(vec![0xab, 0xcd]));
        assert_eq!(KeyEncoding::Base64.decode("_w"), Ok(vec![0xff]));
        assert!(KeyEncoding::Hex.decode("0xabc").is_err());
        assert!(KeyEncoding::Hex.decode("0xzz").is_err());
        assert!(KeyEncoding::Base64.decode("%%%").is_err());
        assert_eq!(KeyEncoding::Text.decode("%FF%2F"), Ok(vec![0xff, b'/']));
        assert_eq!(KeyEncoding::Text.encode(&[0xff]), "\u{fffd}");
    }
}
