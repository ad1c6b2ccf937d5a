//! Hot Rod's primitive encodings: variable-length integers, length-prefixed byte arrays and
//! strings, big-endian fixed-width integers. Reading is over a complete-or-not buffer: a
//! read past the end reports how many bytes the frame needs at least, so the caller waits
//! for them instead of re-parsing on every read.

use bytes::{BufMut, BytesMut};

/// Why a read stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The buffer ends first; the frame is at least this many bytes long.
    Incomplete(usize),
    /// The bytes break the grammar.
    Invalid(String),
}

pub(crate) type ReadResult<T> = Result<T, ReadError>;

/// A region of a frame's bytes (offsets from the frame's first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    start: u32,
    end: u32,
}

impl Span {
    /// Length in bytes.
    #[must_use]
    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    /// True when empty.
    #[must_use]
    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    pub(crate) fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Longest array, string or collection accepted.
    pub(crate) array_max: usize,
    pub(crate) string_max: usize,
    /// Longest frame: no read may end past it.
    frame_max: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], array_max: usize, string_max: usize) -> Self {
        Self {
            buf,
            pos: 0,
            array_max,
            string_max,
            frame_max: usize::MAX,
        }
    }

    /// Refuses any read that would end past `frame_max` bytes, whether or not the bytes are
    /// there yet, so that a frame's fate never depends on how it was split into reads.
    pub(crate) fn with_frame_max(mut self, frame_max: usize) -> Self {
        self.frame_max = frame_max;
        self
    }

    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    fn need(&self, n: usize) -> ReadResult<()> {
        let end = self.pos.saturating_add(n);
        if end > self.frame_max {
            return Err(ReadError::Invalid(format!(
                "frame of at least {end} bytes is longer than the limit of {}",
                self.frame_max
            )));
        }
        if self.buf.len() < end {
            return Err(ReadError::Incomplete(end));
        }
        Ok(())
    }

    pub(crate) fn u8(&mut self) -> ReadResult<u8> {
        self.need(1)?;
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn u16(&mut self) -> ReadResult<u16> {
        self.need(2)?;
        let raw = [self.buf[self.pos], self.buf[self.pos + 1]];
        self.pos += 2;
        Ok(u16::from_be_bytes(raw))
    }

    /// The bytes of a span this reader returned.
    pub(crate) fn slice(&self, span: Span) -> &'a [u8] {
        &self.buf[span.range()]
    }

    pub(crate) fn u64(&mut self) -> ReadResult<u64> {
        self.need(8)?;
        let mut raw = [0; 8];
        raw.copy_from_slice(&self.buf[self.pos..self.pos + 8]);
        self.pos += 8;
        Ok(u64::from_be_bytes(raw))
    }

    /// Unsigned LEB128 of at most `max_bytes` bytes whose value fits `bits`.
    fn varint(&mut self, max_bytes: usize, bits: u32, what: &str) -> ReadResult<u64> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let b = self.u8()?;
            let shift = 7 * i as u32;
            let part = u64::from(b & 0x7f);
            if shift >= 64 || (shift > 0 && part >> (64 - shift) != 0) {
                return Err(ReadError::Invalid(format!("{what} overflows")));
            }
            value |= part << shift;
            if b & 0x80 == 0 {
                if bits < 64 && value >> bits != 0 {
                    return Err(ReadError::Invalid(format!("{what} overflows")));
                }
                return Ok(value);
            }
        }
        Err(ReadError::Invalid(format!(
            "{what} longer than {max_bytes} bytes"
        )))
    }

    /// A vInt (as Java: the 32 bits may stand for a negative int).
    pub(crate) fn vint(&mut self) -> ReadResult<u32> {
        // Five groups of 7 bits cover 32; the high bits of the fifth must be clear.
        self.varint(5, 32, "vInt").map(|v| v as u32)
    }

    /// A vLong (64 bits; negative values take ten bytes).
    pub(crate) fn vlong(&mut self) -> ReadResult<u64> {
        self.varint(10, 64, "vLong")
    }

    /// A zigzag-encoded signed vInt.
    pub(crate) fn signed_vint(&mut self) -> ReadResult<i32> {
        let raw = self.vint()?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A vInt length checked against `max`.
    pub(crate) fn length(&mut self, max: usize, what: &str) -> ReadResult<usize> {
        let len = self.vint()? as usize;
        if len > max {
            return Err(ReadError::Invalid(format!(
                "{what} of {len} bytes is longer than the limit of {max}"
            )));
        }
        Ok(len)
    }

    /// A count of elements that follow, each at least `min_bytes` long: checked against the
    /// limit and against what the frame could hold, so that it cannot be used to make the
    /// parser reserve memory.
    pub(crate) fn count(&mut self, max: usize, what: &str) -> ReadResult<usize> {
        let n = self.vint()? as usize;
        if n > max {
            return Err(ReadError::Invalid(format!(
                "{what} count {n} is above the limit of {max}"
            )));
        }
        Ok(n)
    }

    pub(crate) fn take(&mut self, len: usize) -> ReadResult<Span> {
        self.need(len)?;
        let start = self.pos;
        self.pos += len;
        let to_u32 = |v: usize| {
            u32::try_from(v).map_err(|_| ReadError::Invalid("frame longer than 4 GiB".into()))
        };
        Ok(Span {
            start: to_u32(start)?,
            end: to_u32(self.pos)?,
        })
    }

    /// A byte array (vInt length, bytes).
    pub(crate) fn array(&mut self) -> ReadResult<Span> {
        let len = self.length(self.array_max, "array")?;
        self.take(len)
    }

    /// A string (vInt length, UTF-8 bytes).
    pub(crate) fn string_span(&mut self) -> ReadResult<Span> {
        let len = self.length(self.string_max, "string")?;
        let span = self.take(len)?;
        if std::str::from_utf8(&self.buf[span.range()]).is_err() {
            return Err(ReadError::Invalid("string is not UTF-8".into()));
        }
        Ok(span)
    }

    /// A string, copied.
    pub(crate) fn string(&mut self) -> ReadResult<String> {
        let span = self.string_span()?;
        Ok(String::from_utf8_lossy(&self.buf[span.range()]).into_owned())
    }

    /// An optional array: signed-vInt length, −1 = absent.
    pub(crate) fn optional_array(&mut self) -> ReadResult<Option<Span>> {
        let len = self.signed_vint()?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > self.array_max {
            return Err(ReadError::Invalid(format!(
                "array of {len} bytes is longer than the limit of {}",
                self.array_max
            )));
        }
        self.take(len).map(Some)
    }

    /// An optional string: signed-vInt length, −1 = absent.
    pub(crate) fn optional_string(&mut self) -> ReadResult<Option<String>> {
        let len = self.signed_vint()?;
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        if len > self.string_max {
            return Err(ReadError::Invalid(format!(
                "string of {len} bytes is longer than the limit of {}",
                self.string_max
            )));
        }
        let span = self.take(len)?;
        std::str::from_utf8(&self.buf[span.range()])
            .map(|s| Some(s.to_owned()))
            .map_err(|_| ReadError::Invalid("string is not UTF-8".into()))
    }
}

/// Appends a vInt.
pub fn put_vint(out: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Appends a vLong.
pub fn put_vlong(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// Appends a signed (zigzag) vInt.
pub fn put_signed_vint(out: &mut BytesMut, value: i32) {
    put_vint(out, ((value << 1) ^ (value >> 31)) as u32);
}

/// Appends a length-prefixed byte array.
///
/// # Panics
/// If `bytes` is 4 GiB or longer (nothing the server stores is).
pub fn put_array(out: &mut BytesMut, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    put_vint(out, len);
    out.put_slice(bytes);
}

/// Appends a length-prefixed UTF-8 string.
pub fn put_string(out: &mut BytesMut, text: &str) {
    put_array(out, text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &[u8]) -> Reader<'_> {
        Reader::new(bytes, 1 << 20, 1 << 10)
    }

    // Proves vInt/vLong round trip, including Java negatives in 5 and 10 bytes.
    #[test]
    fn varints_round_trip() {
        for value in [
            0u32,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX,
            (-1i32) as u32,
        ] {
            let mut out = BytesMut::new();
            put_vint(&mut out, value);
            assert_eq!(reader(&out).vint(), Ok(value));
        }
        let mut out = BytesMut::new();
        put_vint(&mut out, (-1i32) as u32);
        assert_eq!(&out[..], &[0xff, 0xff, 0xff, 0xff, 0x0f]);
        for value in [0u64, 1, 1 << 35, u64::MAX] {
            let mut out = BytesMut::new();
            put_vlong(&mut out, value);
            assert_eq!(reader(&out).vlong(), Ok(value));
        }
        for value in [0i32, -1, 1, i32::MIN, i32::MAX] {
            let mut out = BytesMut::new();
            put_signed_vint(&mut out, value);
            assert_eq!(reader(&out).signed_vint(), Ok(value));
        }
    }

    // Proves truncated and over-long varints are told apart: wait vs reject.
    #[test]
    fn truncated_and_overlong_varints() {
        assert_eq!(reader(&[0x80, 0x80]).vint(), Err(ReadError::Incomplete(3)));
        assert!(matches!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0x1f]).vint(),
            Err(ReadError::Invalid(_))
        ));
        assert!(matches!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).vint(),
            Err(ReadError::Invalid(_))
        ));
        assert!(matches!(
            reader(&[0xff; 11]).vlong(),
            Err(ReadError::Invalid(_))
        ));
        assert!(matches!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).vlong(),
            Err(ReadError::Invalid(_))
        ));
    }

    // Proves lengths past the limit are refused before any byte of the body arrives.
    #[test]
    fn lengths_are_bounded() {
        let mut out = BytesMut::new();
        put_vint(&mut out, 5000);
        let mut r = Reader::new(&out, 100, 100);
        assert!(matches!(r.array(), Err(ReadError::Invalid(_))));
        let mut r = Reader::new(&[0x05, b'a'], 100, 100);
        assert_eq!(r.array(), Err(ReadError::Incomplete(6)));
        assert!(matches!(
            reader(&[0x02, 0xff, 0xfe]).string(),
            Err(ReadError::Invalid(_))
        ));
        assert_eq!(reader(&[0x01]).optional_array(), Ok(None));
    }
}
