//! The data file record format.
//!
//! ```text
//! crc32c (u32 LE, over everything after it) | body length (u32 LE) | body
//! body: kind (u8) | segment (u32) | sequence (u64) | version (u64)
//!       | created_ms | lifespan_ms | max_idle_ms (u64 each, u64::MAX = none) | last_used_ms (u64)
//!       | key length (u32) | key | value
//! ```
//! A put's kind byte also says what its value bytes are: 1 plain bytes, 4 client flags (u32)
//! then the bytes, 5 a structure's encoding (`weft_core::Structure::encode`).
//! Every integer is little-endian. The sequence number orders all changes to one store: at
//! recovery, for each key the record with the highest sequence wins, whatever file it is in,
//! which is what lets compaction copy records forward without reordering anything.

use weft_core::entry::StoredExpiration;
use weft_core::{CacheEntry, Payload, Structure, StructureCell};

/// Bytes before the body.
pub(crate) const FRAME_HEADER_BYTES: usize = 8;
/// Bytes of the body before the key.
pub(crate) const BODY_FIXED_BYTES: usize = 1 + 4 + 8 + 8 + 8 * 4 + 4;
/// The largest body accepted when reading (a key and value at the engine's limits, plus the
/// fixed fields); anything larger is corruption.
pub(crate) const BODY_BYTES_MAX: usize = (1 << 30) + BODY_FIXED_BYTES + (1 << 20);

const NONE: u64 = u64::MAX;

/// What a record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// The key holds an entry.
    Put = 1,
    /// The key was removed.
    Tombstone = 2,
    /// Every record with a lower sequence is void.
    Clear = 3,
}

/// What a put's value bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The value itself.
    Plain,
    /// Client flags (u32 LE), then the value.
    Flagged,
    /// A structure's encoding.
    Structure,
}

const KIND_PUT_FLAGGED: u8 = 4;
const KIND_PUT_STRUCTURE: u8 = 5;

/// A decoded record, borrowing the buffer it was read from.
#[derive(Debug)]
pub(crate) struct Record<'a> {
    pub(crate) kind: Kind,
    /// For puts, what the value bytes hold.
    pub(crate) form: Form,
    pub(crate) segment: u32,
    pub(crate) sequence: u64,
    pub(crate) version: u64,
    pub(crate) expiration: StoredExpiration,
    pub(crate) last_used_ms: u64,
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
}

impl Record<'_> {
    /// The time after which a put is dead, if ever.
    pub(crate) fn expires_at_ms(&self) -> Option<u64> {
        expires_at(&self.expiration, self.last_used_ms)
    }

    /// The entry a put record holds.
    ///
    /// # Errors
    /// A structure whose encoding does not decode (the checksum passed, so the writer was
    /// wrong or the format changed).
    pub(crate) fn to_entry(&self) -> Result<CacheEntry, DecodeError> {
        let payload_cell;
        let payload = match self.form {
            Form::Plain => Payload::Bytes(self.value, 0),
            Form::Flagged => {
                let (flags, value) = self
                    .value
                    .split_first_chunk::<4>()
                    .ok_or(DecodeError::Invalid("flagged value shorter than its flags"))?;
                Payload::Bytes(value, u32::from_le_bytes(*flags))
            }
            Form::Structure => {
                let structure = Structure::decode(self.value)
                    .map_err(|_| DecodeError::Invalid("malformed structure value"))?;
                let charge = structure.heap_bytes();
                payload_cell = StructureCell::new(structure);
                Payload::Structure(&payload_cell, charge)
            }
        };
        Ok(CacheEntry::restored_payload(
            self.key,
            payload,
            self.expiration,
            self.last_used_ms,
            self.version,
        ))
    }
}

/// When an entry with this expiration, last used at `last_used_ms`, is dead.
pub(crate) fn expires_at(expiration: &StoredExpiration, last_used_ms: u64) -> Option<u64> {
    let lifespan = expiration.lifespan_deadline_ms();
    let idle = expiration
        .max_idle_ms
        .map(|idle| last_used_ms.saturating_add(idle));
    match (lifespan, idle) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Appends a record to `out`; returns its length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn encode(
    out: &mut Vec<u8>,
    kind: Kind,
    segment: u32,
    sequence: u64,
    version: u64,
    expiration: StoredExpiration,
    last_used_ms: u64,
    key: &[u8],
    value: &[u8],
) -> usize {
    let start = out.len();
    let body_len = BODY_FIXED_BYTES + key.len() + value.len();
    out.reserve(FRAME_HEADER_BYTES + body_len);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&segment.to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    for field in [
        expiration.created_ms,
        expiration.lifespan_ms,
        expiration.max_idle_ms,
    ] {
        out.extend_from_slice(&field.unwrap_or(NONE).to_le_bytes());
    }
    out.extend_from_slice(&last_used_ms.to_le_bytes());
    out.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(&out[start + 4..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    out.len() - start
}

/// Appends the record of a cache entry.
pub(crate) fn encode_entry(
    out: &mut Vec<u8>,
    segment: u32,
    sequence: u64,
    entry: &CacheEntry,
) -> usize {
    let encoded;
    let (kind, value) = if let Some(cell) = entry.structure() {
        encoded = cell.lock().encode();
        (KIND_PUT_STRUCTURE, &encoded[..])
    } else if entry.user_flags() != 0 {
        let mut flagged = Vec::with_capacity(4 + entry.value().len());
        flagged.extend_from_slice(&entry.user_flags().to_le_bytes());
        flagged.extend_from_slice(entry.value());
        encoded = flagged;
        (KIND_PUT_FLAGGED, &encoded[..])
    } else {
        (Kind::Put as u8, entry.value())
    };
    let len = encode(
        out,
        Kind::Put,
        segment,
        sequence,
        entry.version(),
        entry.expiration(),
        entry.last_used_ms().unwrap_or(0),
        entry.key(),
        value,
    );
    if kind != Kind::Put as u8 {
        // The kind byte is covered by the checksum: patch it, then checksum again.
        let start = out.len() - len;
        out[start + FRAME_HEADER_BYTES] = kind;
        let crc = crc32c::crc32c(&out[start + 4..]);
        out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
    }
    len
}

/// Why bytes are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// The bytes end inside the record (a torn tail, or more to read).
    Truncated {
        /// Bytes the whole record needs, when the header says.
        needed: Option<usize>,
    },
    /// The checksum or a field is wrong.
    Invalid(&'static str),
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The length of the record starting at `bytes`, from its header.
pub(crate) fn framed_len(bytes: &[u8]) -> Result<usize, DecodeError> {
    if bytes.len() < FRAME_HEADER_BYTES {
        return Err(DecodeError::Truncated { needed: None });
    }
    let body_len = u32_at(bytes, 4) as usize;
    if !(BODY_FIXED_BYTES..=BODY_BYTES_MAX).contains(&body_len) {
        return Err(DecodeError::Invalid("record length out of range"));
    }
    Ok(FRAME_HEADER_BYTES + body_len)
}

/// Decodes the record at the start of `bytes`; returns it and its length.
pub(crate) fn decode(bytes: &[u8]) -> Result<(Record<'_>, usize), DecodeError> {
    let total = framed_len(bytes)?;
    if bytes.len() < total {
        return Err(DecodeError::Truncated {
            needed: Some(total),
        });
    }
    let crc = u32_at(bytes, 0);
    if crc32c::crc32c(&bytes[4..total]) != crc {
        return Err(DecodeError::Invalid("checksum mismatch"));
    }
    let body = &bytes[FRAME_HEADER_BYTES..total];
    let (kind, form) = match body[0] {
        1 => (Kind::Put, Form::Plain),
        KIND_PUT_FLAGGED => (Kind::Put, Form::Flagged),
        KIND_PUT_STRUCTURE => (Kind::Put, Form::Structure),
        2 => (Kind::Tombstone, Form::Plain),
        3 => (Kind::Clear, Form::Plain),
        _ => return Err(DecodeError::Invalid("unknown record kind")),
    };
    let optional = |at: usize| Some(u64_at(body, at)).filter(|&v| v != NONE);
    let key_len = u32_at(body, BODY_FIXED_BYTES - 4) as usize;
    if key_len > body.len() - BODY_FIXED_BYTES {
        return Err(DecodeError::Invalid("key length beyond the record"));
    }
    let key_end = BODY_FIXED_BYTES + key_len;
    Ok((
        Record {
            kind,
            form,
            segment: u32_at(body, 1),
            sequence: u64_at(body, 5),
            version: u64_at(body, 13),
            expiration: StoredExpiration {
                created_ms: optional(21),
                lifespan_ms: optional(29),
                max_idle_ms: optional(37),
            },
            last_used_ms: u64_at(body, 45),
            key: &body[BODY_FIXED_BYTES..key_end],
            value: &body[key_end..],
        },
        total,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_corruption_is_caught() {
        let expiration = StoredExpiration {
            created_ms: Some(10),
            lifespan_ms: Some(20),
            max_idle_ms: None,
        };
        let mut out = Vec::new();
        let len = encode(
            &mut out,
            Kind::Put,
            7,
            42,
            9,
            expiration,
            11,
            b"key",
            b"value",
        );
        assert_eq!(len, out.len());
        let (record, used) = decode(&out).expect("decodes");
        assert_eq!(used, len);
        assert_eq!(
            (record.kind, record.segment, record.sequence, record.version),
            (Kind::Put, 7, 42, 9)
        );
        assert_eq!(record.expiration, expiration);
        assert_eq!((record.key, record.value), (&b"key"[..], &b"value"[..]));
        for cut in 0..len {
            assert!(matches!(
                decode(&out[..cut]),
                Err(DecodeError::Truncated { .. })
            ));
        }
        for flip in 0..len {
            let mut bad = out.clone();
            bad[flip] ^= 0x40;
            assert!(decode(&bad).is_err(), "flip at {flip} undetected");
        }
    }
}
