//! Redis' ziplist (`ziplist.c`), the compact encoding before listpacks: what Redis 6.2 and
//! older DUMP small lists, hashes and sorted sets as, and what redis-server 7.0 still
//! RESTOREs.
//!
//! Layout: total bytes (u32 LE), offset of the last entry (u32 LE), entry count (u16 LE,
//! 65535 when it does not fit), the entries, then `0xff`. Each entry is the previous entry's
//! size (1 byte, or `0xfe` and 4 bytes LE), an encoding with the string's length or the
//! integer's width, and the data. Reading checks what Redis' deep validation checks.

use super::RdbError;
use super::listpack::Element;

/// Header: total bytes, tail offset, element count.
const HEADER_BYTES: usize = 10;
/// The end marker (never a valid first byte of an entry's length).
const END: u8 = 0xff;

/// Every element of the ziplist `bytes`, validated as a whole.
///
/// # Errors
/// [`RdbError::Format`] when the header, an entry, a previous-size field, the tail offset,
/// the end marker or the count is wrong.
pub fn elements(bytes: &[u8]) -> Result<Vec<Element<'_>>, RdbError> {
    if bytes.len() < HEADER_BYTES + 1 {
        return Err(RdbError::Format);
    }
    let le32 =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let total = le32(0) as usize;
    let tail = le32(4) as usize;
    let count = u16::from_le_bytes([bytes[8], bytes[9]]);
    let end = bytes.len() - 1;
    if total != bytes.len() || bytes[end] != END || tail > end {
        return Err(RdbError::Format);
    }
    let mut found = Vec::with_capacity(usize::from(count).min(bytes.len()));
    let mut at = HEADER_BYTES;
    let mut previous_size = 0usize;
    let mut last_start = None;
    while at < end {
        let start = at;
        let (recorded_previous, prevlen_bytes) = match bytes[at] {
            0xfe => {
                let field = bytes.get(at + 1..at + 5).ok_or(RdbError::Format)?;
                (
                    u32::from_le_bytes([field[0], field[1], field[2], field[3]]) as usize,
                    5,
                )
            }
            END => return Err(RdbError::Format),
            small => (usize::from(small), 1),
        };
        if recorded_previous != previous_size {
            return Err(RdbError::Format);
        }
        at += prevlen_bytes;
        let encoding = *bytes.get(at).filter(|_| at < end).ok_or(RdbError::Format)?;
        let field = |from: usize, len: usize| {
            bytes
                .get(from..from + len)
                .filter(|_| from + len <= end)
                .ok_or(RdbError::Format)
        };
        let (element, header, data) = match encoding >> 6 {
            0 => {
                let len = usize::from(encoding & 0x3f);
                (Element::Str(field(at + 1, len)?), 1, len)
            }
            1 => {
                let low = field(at + 1, 1)?[0];
                let len = (usize::from(encoding & 0x3f) << 8) | usize::from(low);
                (Element::Str(field(at + 2, len)?), 2, len)
            }
            2 => {
                if encoding != 0x80 {
                    return Err(RdbError::Format);
                }
                let len = field(at + 1, 4)?;
                let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
                (Element::Str(field(at + 5, len)?), 5, len)
            }
            _ => {
                let int = |width: usize| -> Result<i64, RdbError> {
                    let data = field(at + 1, width)?;
                    let raw = data
                        .iter()
                        .rev()
                        .fold(0u64, |acc, byte| (acc << 8) | u64::from(*byte));
                    let shift = 64 - 8 * width as u32;
                    Ok(((raw << shift) as i64) >> shift)
                };
                match encoding {
                    0xc0 => (Element::Int(int(2)?), 1, 2),
                    0xd0 => (Element::Int(int(4)?), 1, 4),
                    0xe0 => (Element::Int(int(8)?), 1, 8),
                    0xf0 => (Element::Int(int(3)?), 1, 3),
                    0xfe => (Element::Int(int(1)?), 1, 1),
                    0xf1..=0xfd => (Element::Int(i64::from(encoding & 0x0f) - 1), 1, 0),
                    _ => return Err(RdbError::Format),
                }
            }
        };
        at += header + data;
        if at > end {
            return Err(RdbError::Format);
        }
        previous_size = at - start;
        last_start = Some(start);
        found.push(element);
    }
    if at != end || last_start.is_some_and(|last| last != tail) {
        return Err(RdbError::Format);
    }
    if count != u16::MAX && usize::from(count) != found.len() {
        return Err(RdbError::Format);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a ziplist Redis 6 wrote (RPUSH l a 1 hello 1000 -7 70000) reads back, and
    // damaged copies are refused.
    #[test]
    fn reads_redis_ziplists() {
        let ziplist: &[u8] = b"\x23\x00\x00\x00\x1d\x00\x00\x00\x06\x00\
            \x00\x01a\
            \x03\xf2\
            \x02\x05hello\
            \x07\xc0\xe8\x03\
            \x04\xfe\xf9\
            \x03\xf0\x70\x11\x01\
            \xff";
        assert_eq!(
            elements(ziplist).expect("valid"),
            vec![
                Element::Str(b"a"),
                Element::Int(1),
                Element::Str(b"hello"),
                Element::Int(1000),
                Element::Int(-7),
                Element::Int(70_000),
            ]
        );
        for cut in 0..ziplist.len() {
            assert!(elements(&ziplist[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_previous = ziplist.to_vec();
        wrong_previous[13] = 4;
        assert!(elements(&wrong_previous).is_err());
        let mut wrong_tail = ziplist.to_vec();
        wrong_tail[4] = 0x1c;
        assert!(elements(&wrong_tail).is_err());
    }
}
