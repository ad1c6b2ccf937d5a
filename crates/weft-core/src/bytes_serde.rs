//! Byte fields that serialize as bytes, not as a sequence of numbers.
//!
//! Serde's own `Vec<u8>` goes through `serialize_seq`/`visit_seq`, one call per byte; with
//! `#[serde(with = "weft_core::bytes_serde")]` a field is written with `serialize_bytes` and
//! read with `deserialize_byte_buf`: one copy. In postcard (the cluster's wire format) both
//! encodings are the same bytes — a varint length, then the bytes — so members that differ in
//! this keep understanding each other. Self-describing formats that hand bytes back as a
//! sequence (JSON arrays) are read too.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

/// Writes `bytes` as bytes.
///
/// # Errors
/// What the serializer refuses.
pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_bytes(bytes)
}

/// Reads bytes written by [`serialize`] (or a sequence of numbers).
///
/// # Errors
/// What the deserializer refuses.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
    deserializer.deserialize_byte_buf(BytesVisitor)
}

struct BytesVisitor;

impl<'de> Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("bytes")
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
        Ok(bytes.to_vec())
    }

    fn visit_byte_buf<E: serde::de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(bytes)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        // A length hint comes from the input: capped, so a hostile one allocates nothing.
        let mut bytes = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(byte) = seq.next_element::<u8>()? {
            bytes.push(byte);
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsBytes {
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct AsSequence {
        key: Vec<u8>,
    }

    // Proves the field reads back, from JSON's number arrays too.
    #[test]
    fn bytes_round_trip_in_self_describing_formats() {
        let value = AsBytes {
            key: b"k\x00\xff".to_vec(),
        };
        let json = serde_json::to_string(&AsSequence {
            key: value.key.clone(),
        })
        .unwrap_or_default();
        assert_eq!(serde_json::from_str::<AsBytes>(&json).ok(), Some(value));
    }
}
