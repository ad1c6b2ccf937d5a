//! Redis' listpack (`listpack.c`): the compact encoding of small hashes, sorted sets, list
//! nodes and stream nodes, which DUMP carries as an RDB string.
//!
//! Layout: total bytes (u32 LE), element count (u16 LE, 65535 when it does not fit), the
//! elements, then `0xff`. Each element is an encoding byte (with the length or the value
//! in its low bits), more length bytes, the data, and a back-length (the size of everything
//! before it, 7 bits a byte, readable backwards). Strings that are an integer's canonical
//! text are stored as that integer, in the smallest of seven widths.
//!
//! Reading checks everything Redis' deep validation (`lpValidateIntegrity` with `deep`)
//! checks, so a listpack read here holds exactly the elements it says.

use super::RdbError;

/// Header: total bytes and element count.
const HEADER_BYTES: usize = 6;
/// The end marker.
const END: u8 = 0xff;
/// The element count a header holds when the true count does not fit in 16 bits.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// One element as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element<'a> {
    /// An integer.
    Int(i64),
    /// A string.
    Str(&'a [u8]),
}

impl Element<'_> {
    /// The element as the string Redis reads it as (an integer as its decimal text).
    #[must_use]
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Self::Int(value) => itoa::Buffer::new().format(*value).as_bytes().to_vec(),
            Self::Str(bytes) => bytes.to_vec(),
        }
    }

    /// The element as an integer: an integer, or a string that is one's canonical text.
    #[must_use]
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Self::Int(value) => Some(*value),
            Self::Str(bytes) => crate::parse_i64_strict(bytes),
        }
    }
}

/// Every element of the listpack `bytes`, validated as a whole.
///
/// # Errors
/// [`RdbError::Format`] when the header, an element, a back-length, the end marker or the
/// count is wrong.
pub fn elements(bytes: &[u8]) -> Result<Vec<Element<'_>>, RdbError> {
    if bytes.len() < HEADER_BYTES + 1 {
        return Err(RdbError::Format);
    }
    let total = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if usize::try_from(total).ok() != Some(bytes.len()) || bytes[bytes.len() - 1] != END {
        return Err(RdbError::Format);
    }
    let count = u16::from_le_bytes([bytes[4], bytes[5]]);
    let body = &bytes[..bytes.len() - 1];
    let mut found = Vec::with_capacity(usize::from(count).min(body.len()));
    let mut at = HEADER_BYTES;
    while at < body.len() {
        let (element, size) = element_at(body, at)?;
        let backlen = backlen_bytes(size);
        let end = at
            .checked_add(size)
            .and_then(|end| end.checked_add(backlen))
            .filter(|end| *end <= body.len())
            .ok_or(RdbError::Format)?;
        if decode_backlen(&body[at + size..end]) != Some(size as u64) {
            return Err(RdbError::Format);
        }
        found.push(element);
        at = end;
    }
    if count != COUNT_UNKNOWN && usize::from(count) != found.len() {
        return Err(RdbError::Format);
    }
    Ok(found)
}

/// The element at `at` (which is inside `body`, the listpack without its end marker) and
/// the size of its encoding and data, without the back-length.
fn element_at(body: &[u8], at: usize) -> Result<(Element<'_>, usize), RdbError> {
    let first = body[at];
    let field = |len: usize| body.get(at + 1..at + 1 + len).ok_or(RdbError::Format);
    let string = |header: usize, len: usize| {
        let start = at + header;
        let data = start
            .checked_add(len)
            .and_then(|end| body.get(start..end))
            .ok_or(RdbError::Format)?;
        Ok((Element::Str(data), header + len))
    };
    let signed = |raw: u64, bits: u32| -> i64 {
        // Two's complement in `bits` bits.
        let shift = 64 - bits;
        ((raw << shift) as i64) >> shift
    };
    let little = |bytes: &[u8]| {
        bytes
            .iter()
            .rev()
            .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte))
    };
    match first {
        0x00..=0x7f => Ok((Element::Int(i64::from(first)), 1)),
        0x80..=0xbf => string(1, usize::from(first & 0x3f)),
        0xc0..=0xdf => {
            let low = field(1)?[0];
            let raw = (u64::from(first & 0x1f) << 8) | u64::from(low);
            Ok((Element::Int(signed(raw, 13)), 2))
        }
        0xe0..=0xef => {
            let low = field(1)?[0];
            string(2, (usize::from(first & 0x0f) << 8) | usize::from(low))
        }
        0xf0 => {
            let len = field(4)?;
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
            string(5, usize::try_from(len).map_err(|_| RdbError::Format)?)
        }
        0xf1 => Ok((Element::Int(signed(little(field(2)?), 16)), 3)),
        0xf2 => Ok((Element::Int(signed(little(field(3)?), 24)), 4)),
        0xf3 => Ok((Element::Int(signed(little(field(4)?), 32)), 5)),
        0xf4 => Ok((Element::Int(signed(little(field(8)?), 64)), 9)),
        _ => Err(RdbError::Format),
    }
}

/// Bytes of the back-length of an element of `size` bytes (`lpEncodeBacklen`).
fn backlen_bytes(size: usize) -> usize {
    match size {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Reads a back-length written forwards in `bytes` (from its last byte backwards, 7 bits a
/// byte, a set high bit meaning more); `None` if it does not end exactly at `bytes`' start.
fn decode_backlen(bytes: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    for (index, byte) in bytes.iter().rev().enumerate() {
        value |= u64::from(byte & 0x7f) << shift;
        let more = byte & 0x80 != 0;
        let last = index + 1 == bytes.len();
        if more == last {
            return None;
        }
        shift += 7;
    }
    Some(value)
}

/// Appends `size` as a back-length.
fn write_backlen(out: &mut Vec<u8>, size: usize) {
    let size = size as u64;
    let groups = backlen_bytes(size as usize);
    for group in (0..groups).rev() {
        let bits = ((size >> (7 * group)) & 0x7f) as u8;
        // Every byte but the first written (the last read) carries the "more" bit.
        out.push(if group == groups - 1 {
            bits
        } else {
            bits | 0x80
        });
    }
}

/// Builds a listpack element by element, as `lpAppend` encodes them.
#[derive(Debug)]
pub struct Writer {
    bytes: Vec<u8>,
    count: usize,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    /// An empty listpack.
    #[must_use]
    pub fn new() -> Self {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(&[0; HEADER_BYTES]);
        Self { bytes, count: 0 }
    }

    /// Elements appended so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether nothing was appended.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The listpack's size once finished (`lpBytes`).
    #[must_use]
    pub fn bytes_when_finished(&self) -> usize {
        self.bytes.len() + 1
    }

    /// Appends a string, as the integer it is the canonical text of when it is one.
    pub fn push(&mut self, text: &[u8]) {
        match crate::parse_i64_strict(text) {
            Some(value) => self.push_int(value),
            None => self.push_str(text),
        }
    }

    /// Appends a string stored as a string.
    pub fn push_str(&mut self, text: &[u8]) {
        let start = self.bytes.len();
        let len = text.len();
        if len < 64 {
            self.bytes.push(0x80 | len as u8);
        } else if len < 4096 {
            self.bytes.push(0xe0 | (len >> 8) as u8);
            self.bytes.push(len as u8);
        } else {
            self.bytes.push(0xf0);
            self.bytes.extend_from_slice(&(len as u32).to_le_bytes());
        }
        self.bytes.extend_from_slice(text);
        let size = self.bytes.len() - start;
        write_backlen(&mut self.bytes, size);
        self.count += 1;
    }

    /// Appends an integer in its smallest encoding.
    pub fn push_int(&mut self, value: i64) {
        let start = self.bytes.len();
        let little = |bytes: &mut Vec<u8>, value: i64, width: usize| {
            bytes.extend_from_slice(&value.to_le_bytes()[..width]);
        };
        match value {
            0..=127 => self.bytes.push(value as u8),
            -4096..=4095 => {
                let raw = (value as u64) & 0x1fff;
                self.bytes.push(0xc0 | (raw >> 8) as u8);
                self.bytes.push(raw as u8);
            }
            -32_768..=32_767 => {
                self.bytes.push(0xf1);
                little(&mut self.bytes, value, 2);
            }
            -8_388_608..=8_388_607 => {
                self.bytes.push(0xf2);
                little(&mut self.bytes, value, 3);
            }
            -2_147_483_648..=2_147_483_647 => {
                self.bytes.push(0xf3);
                little(&mut self.bytes, value, 4);
            }
            _ => {
                self.bytes.push(0xf4);
                little(&mut self.bytes, value, 8);
            }
        }
        let size = self.bytes.len() - start;
        write_backlen(&mut self.bytes, size);
        self.count += 1;
    }

    /// The finished listpack: header filled in, end marker appended.
    #[must_use]
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.push(END);
        let total = u32::try_from(self.bytes.len()).unwrap_or(u32::MAX);
        self.bytes[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(COUNT_UNKNOWN);
        self.bytes[4..6].copy_from_slice(&count.to_le_bytes());
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every integer width and string length class round-trips, and that a listpack
    // redis-server 7.0 wrote (HSET h a 1 b hello, as DUMP carries it) reads back.
    #[test]
    fn round_trips() {
        let mut writer = Writer::new();
        let ints = [
            0i64,
            127,
            128,
            -1,
            4095,
            -4096,
            4096,
            -32_768,
            32_767,
            8_388_607,
            -8_388_608,
            2_147_483_647,
            -2_147_483_648,
            i64::MAX,
            i64::MIN,
        ];
        for value in ints {
            writer.push_int(value);
        }
        let strings: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            vec![b'x'; 63],
            vec![b'y'; 64],
            vec![b'z'; 4095],
            vec![b'w'; 4096],
            vec![b'v'; 20_000],
        ];
        for text in &strings {
            writer.push(text);
        }
        writer.push(b"-0");
        writer.push(b"007");
        let bytes = writer.finish();
        let read = elements(&bytes).expect("valid");
        let mut expected: Vec<Element<'_>> = ints.iter().map(|v| Element::Int(*v)).collect();
        expected.extend(strings.iter().map(|s| Element::Str(s)));
        expected.push(Element::Str(b"-0"));
        expected.push(Element::Str(b"007"));
        assert_eq!(read, expected);

        let redis = b"\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff";
        assert_eq!(
            elements(redis).expect("redis' listpack"),
            vec![
                Element::Str(b"a"),
                Element::Int(1),
                Element::Str(b"b"),
                Element::Str(b"hello")
            ]
        );
        let mut writer = Writer::new();
        for item in [&b"a"[..], b"1", b"b", b"hello"] {
            writer.push(item);
        }
        assert_eq!(writer.finish(), redis);
    }

    // Proves malformed listpacks are refused: wrong sizes, counts, back-lengths, encodings.
    #[test]
    fn refuses_malformed() {
        let mut writer = Writer::new();
        writer.push(b"abc");
        writer.push(b"12");
        let good = writer.finish();
        assert!(elements(&good).is_ok());
        for cut in 0..good.len() {
            assert!(elements(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_count = good.clone();
        wrong_count[4] = 3;
        assert!(elements(&wrong_count).is_err());
        let mut unknown_count = good.clone();
        unknown_count[4] = 0xff;
        unknown_count[5] = 0xff;
        assert_eq!(elements(&unknown_count).expect("unknown count").len(), 2);
        let mut wrong_backlen = good.clone();
        wrong_backlen[10] = 9;
        assert!(elements(&wrong_backlen).is_err());
        let mut bad_encoding = good.clone();
        bad_encoding[6] = 0xf7;
        assert!(elements(&bad_encoding).is_err());
        let mut no_end = good;
        let last = no_end.len() - 1;
        no_end[last] = 0;
        assert!(elements(&no_end).is_err());
    }
}
