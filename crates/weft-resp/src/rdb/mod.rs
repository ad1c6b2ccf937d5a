//! Redis' RDB format as it travels over RESP: DUMP/RESTORE payloads and FUNCTION DUMP's.
//!
//! A payload is a body, then the RDB version (two bytes, little-endian) and a CRC-64 of
//! everything before it (Redis' Jones polynomial, reflected, little-endian). Inside, lengths
//! use RDB's variable encoding and strings may be stored as integers or LZF-compressed
//! ([`lzf`]). A value is a type byte and its encoding ([`value`]): strings, lists as
//! quicklists of [`listpack`]s, sets as [`intset`]s or plain, sorted sets and hashes as
//! listpacks or plain, streams as listpacks of entries with their consumer groups
//! ([`stream`]) — the encodings redis-server 7.0 writes, and the older ones it still reads.
//!
//! Payloads come from clients: every read is bounds-checked, every count is checked
//! against the bytes left before anything is allocated for it, and nothing panics.

pub mod intset;
pub mod listpack;
pub mod lzf;
pub mod stream;
pub mod value;
pub mod ziplist;

/// The RDB version Redis 7.0 writes.
pub const RDB_VERSION: u16 = 10;

/// The opcode before each library in FUNCTION DUMP (`RDB_OPCODE_FUNCTION2`).
pub const OPCODE_FUNCTION2: u8 = 245;

/// Why a payload could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RdbError {
    /// The footer's version is newer than ours, or its checksum does not match.
    #[error("DUMP payload version or checksum are wrong")]
    Footer,
    /// The body ends inside a value, or holds an encoding that is not RDB's.
    #[error("Bad data format")]
    Format,
}

/// Redis' CRC-64 (Jones polynomial, reflected) of `bytes`, continuing from `crc`.
#[must_use]
pub fn crc64(mut crc: u64, bytes: &[u8]) -> u64 {
    static TABLE: std::sync::LazyLock<[u64; 256]> = std::sync::LazyLock::new(|| {
        // 0xad93d23594c935a9 with its bits reversed.
        const POLY: u64 = 0x95ac_9329_ac4b_c9b5;
        let mut table = [0u64; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY
                } else {
                    crc >> 1
                };
            }
            *slot = crc;
        }
        table
    });
    for &byte in bytes {
        crc = TABLE[((crc ^ u64::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// Appends the footer (version and checksum) to a payload's body.
pub fn seal(body: &mut Vec<u8>) {
    body.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, body);
    body.extend_from_slice(&crc.to_le_bytes());
}

/// Checks a payload's footer; its body and RDB version.
///
/// # Errors
/// [`RdbError::Footer`] when it is too short, newer than Redis 7.0's, or its checksum is
/// wrong.
pub fn open(payload: &[u8]) -> Result<(&[u8], u16), RdbError> {
    if payload.len() < 10 {
        return Err(RdbError::Footer);
    }
    let (front, crc) = payload.split_at(payload.len() - 8);
    let body = &front[..front.len() - 2];
    let version = u16::from_le_bytes([front[front.len() - 2], front[front.len() - 1]]);
    if version > RDB_VERSION {
        return Err(RdbError::Footer);
    }
    let mut expected = [0u8; 8];
    expected.copy_from_slice(crc);
    if crc64(0, front) != u64::from_le_bytes(expected) {
        return Err(RdbError::Footer);
    }
    Ok((body, version))
}

/// Appends RDB's length encoding of `len`.
pub fn write_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
    } else if let Ok(len) = u32::try_from(len) {
        out.push(0x80);
        out.extend_from_slice(&len.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// Appends a string as RDB's raw string (length, bytes).
pub fn write_string(out: &mut Vec<u8>, bytes: &[u8]) {
    write_len(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a string as Redis' `rdbSaveRawString` does for DUMP: up to 11 bytes that are an
/// integer's canonical text within 32 bits as that integer, more than 20 bytes
/// LZF-compressed when that saves at least 4 bytes, otherwise raw. (Integer-encoded string
/// objects, which `rdbSaveStringObject` writes through `rdbSaveLongLongAsStringObject`,
/// come out the same.)
pub fn write_blob(out: &mut Vec<u8>, bytes: &[u8]) {
    /// Redis' `rdbSaveRawString`: longer strings are not tried as integers.
    const INTEGER_TEXT_BYTES_MAX: usize = 11;
    /// Redis' `rdbSaveRawString`: shorter strings are not worth compressing.
    const COMPRESS_BYTES_MIN: usize = 21;
    /// Redis' `rdbSaveLzfStringObject`: compression must save this many bytes.
    const COMPRESS_SAVING_MIN: usize = 4;
    if bytes.len() <= INTEGER_TEXT_BYTES_MAX
        && let Some(value) = crate::parse_i64_strict(bytes)
        && write_small_integer(out, value)
    {
        return;
    }
    if bytes.len() >= COMPRESS_BYTES_MIN
        && let Some(compressed) = lzf::compress(bytes, bytes.len() - COMPRESS_SAVING_MIN)
    {
        out.push(0xc0 | ENCODING_LZF);
        write_len(out, compressed.len() as u64);
        write_len(out, bytes.len() as u64);
        out.extend_from_slice(&compressed);
        return;
    }
    write_string(out, bytes);
}

/// Appends `value` in RDB's 8, 16 or 32-bit integer string encoding (`rdbEncodeInteger`);
/// false, writing nothing, when it needs more than 32 bits.
fn write_small_integer(out: &mut Vec<u8>, value: i64) -> bool {
    if let Ok(value) = i8::try_from(value) {
        out.push(0xc0 | ENCODING_INT8);
        out.extend_from_slice(&value.to_le_bytes());
    } else if let Ok(value) = i16::try_from(value) {
        out.push(0xc0 | ENCODING_INT16);
        out.extend_from_slice(&value.to_le_bytes());
    } else if let Ok(value) = i32::try_from(value) {
        out.push(0xc0 | ENCODING_INT32);
        out.extend_from_slice(&value.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// String encodings after the `11` length marker.
const ENCODING_INT8: u8 = 0;
const ENCODING_INT16: u8 = 1;
const ENCODING_INT32: u8 = 2;
const ENCODING_LZF: u8 = 3;

/// The longest string this reader will make (Redis' `proto-max-bulk-len`).
const STRING_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// Reads RDB values from a payload's body.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A length, or a string's special encoding.
enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Whether everything was read.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    /// One byte.
    ///
    /// # Errors
    /// [`RdbError::Format`] at the end.
    pub fn byte(&mut self) -> Result<u8, RdbError> {
        let byte = *self.bytes.get(self.at).ok_or(RdbError::Format)?;
        self.at += 1;
        Ok(byte)
    }

    /// Bytes not read yet: a bound on how many elements a count may announce.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    /// A count of elements that each take at least one byte: refused when more than the
    /// bytes left, so that nothing is allocated for a count the payload cannot hold.
    ///
    /// # Errors
    /// [`RdbError::Format`] for a truncated length or one above the bytes left.
    pub fn count(&mut self) -> Result<usize, RdbError> {
        let count = self.len()?;
        usize::try_from(count)
            .ok()
            .filter(|count| *count <= self.remaining())
            .ok_or(RdbError::Format)
    }

    /// `len` raw bytes.
    ///
    /// # Errors
    /// [`RdbError::Format`] when fewer are left.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], RdbError> {
        let end = self.at.checked_add(len).ok_or(RdbError::Format)?;
        let taken = self.bytes.get(self.at..end).ok_or(RdbError::Format)?;
        self.at = end;
        Ok(taken)
    }

    fn length(&mut self) -> Result<Length, RdbError> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Length::Plain(u64::from(first & 0x3f)),
            1 => Length::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            2 => match first {
                0x80 => {
                    let mut be = [0u8; 4];
                    be.copy_from_slice(self.take(4)?);
                    Length::Plain(u64::from(u32::from_be_bytes(be)))
                }
                0x81 => {
                    let mut be = [0u8; 8];
                    be.copy_from_slice(self.take(8)?);
                    Length::Plain(u64::from_be_bytes(be))
                }
                _ => return Err(RdbError::Format),
            },
            _ => Length::Encoded(first & 0x3f),
        })
    }

    /// A length, as Redis' `rdbLoadLen` reads one: a string-encoding marker where a length
    /// is expected reads as its low six bits, as in Redis.
    ///
    /// # Errors
    /// [`RdbError::Format`] for a truncated length or an unknown length encoding.
    pub fn len(&mut self) -> Result<u64, RdbError> {
        match self.length()? {
            Length::Plain(len) => Ok(len),
            Length::Encoded(bits) => Ok(u64::from(bits)),
        }
    }

    /// A little-endian `u64` (RDB's millisecond times).
    ///
    /// # Errors
    /// [`RdbError::Format`] when fewer than 8 bytes are left.
    pub fn u64_le(&mut self) -> Result<u64, RdbError> {
        let mut le = [0u8; 8];
        le.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(le))
    }

    /// A little-endian binary double (`rdbLoadBinaryDoubleValue`).
    ///
    /// # Errors
    /// [`RdbError::Format`] when fewer than 8 bytes are left.
    pub fn f64_le(&mut self) -> Result<f64, RdbError> {
        self.u64_le().map(f64::from_bits)
    }

    /// A string in any of RDB's encodings: raw, an 8/16/32-bit integer, or LZF.
    ///
    /// # Errors
    /// [`RdbError::Format`] for a truncated or malformed string.
    pub fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.length()? {
            Length::Plain(len) => {
                if len > STRING_BYTES_MAX {
                    return Err(RdbError::Format);
                }
                let len = usize::try_from(len).map_err(|_| RdbError::Format)?;
                Ok(self.take(len)?.to_vec())
            }
            Length::Encoded(ENCODING_INT8) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(ENCODING_INT16) => {
                let mut le = [0u8; 2];
                le.copy_from_slice(self.take(2)?);
                Ok(i16::from_le_bytes(le).to_string().into_bytes())
            }
            Length::Encoded(ENCODING_INT32) => {
                let mut le = [0u8; 4];
                le.copy_from_slice(self.take(4)?);
                Ok(i32::from_le_bytes(le).to_string().into_bytes())
            }
            Length::Encoded(ENCODING_LZF) => {
                let compressed = self.len()?;
                let len = self.len()?;
                if len > STRING_BYTES_MAX {
                    return Err(RdbError::Format);
                }
                let compressed = usize::try_from(compressed).map_err(|_| RdbError::Format)?;
                let len = usize::try_from(len).map_err(|_| RdbError::Format)?;
                let input = self.take(compressed)?;
                lzf::decompress(input, len)
            }
            Length::Encoded(_) => Err(RdbError::Format),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the CRC is Redis' (crc64.c's test vector).
    #[test]
    fn crc_matches_redis() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    // Proves a sealed payload opens, and a flipped byte or a newer version does not.
    #[test]
    fn footers() {
        let mut payload = vec![OPCODE_FUNCTION2];
        write_string(&mut payload, b"#!lua name=x\n");
        seal(&mut payload);
        let (body, version) = open(&payload).expect("opens");
        assert_eq!(version, RDB_VERSION);
        let mut reader = Reader::new(body);
        assert_eq!(reader.byte(), Ok(OPCODE_FUNCTION2));
        assert_eq!(reader.string().expect("string"), b"#!lua name=x\n");
        assert!(reader.is_empty());
        let mut bad = payload.clone();
        bad[1] ^= 1;
        assert_eq!(open(&bad), Err(RdbError::Footer));
        assert_eq!(open(&payload[..5]), Err(RdbError::Footer));
    }

    // Proves lengths round-trip at each width.
    #[test]
    fn lengths() {
        for len in [0u64, 63, 64, 16383, 16384, u64::from(u32::MAX) + 1] {
            let mut out = Vec::new();
            write_len(&mut out, len);
            assert_eq!(Reader::new(&out).len(), Ok(len));
        }
    }
}
