//! Redis' intset (`intset.c`): a small set of integers, sorted, all stored in the width of
//! the widest (2, 4 or 8 bytes, little-endian), after an 8-byte header (width, count).

use super::RdbError;

/// Header: encoding (the width in bytes) and element count, both u32 LE.
const HEADER_BYTES: usize = 8;

/// The integers of the intset `bytes`, checked as Redis' deep validation checks them
/// (`intsetValidateIntegrity`): a known width, a size that matches the count, not empty,
/// strictly ascending.
///
/// # Errors
/// [`RdbError::Format`] otherwise.
pub fn elements(bytes: &[u8]) -> Result<Vec<i64>, RdbError> {
    if bytes.len() < HEADER_BYTES {
        return Err(RdbError::Format);
    }
    let width = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let count = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let width = match width {
        2 | 4 | 8 => width as usize,
        _ => return Err(RdbError::Format),
    };
    let count = usize::try_from(count).map_err(|_| RdbError::Format)?;
    if count == 0
        || count
            .checked_mul(width)
            .and_then(|body| body.checked_add(HEADER_BYTES))
            != Some(bytes.len())
    {
        return Err(RdbError::Format);
    }
    let values: Vec<i64> = bytes[HEADER_BYTES..]
        .chunks_exact(width)
        .map(|chunk| match width {
            2 => i64::from(i16::from_le_bytes([chunk[0], chunk[1]])),
            4 => i64::from(i32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])),
            _ => i64::from_le_bytes([
                chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7],
            ]),
        })
        .collect();
    if values.windows(2).any(|pair| pair[0] >= pair[1]) {
        return Err(RdbError::Format);
    }
    Ok(values)
}

/// The intset of `values` (ascending, distinct), in the width of the widest.
#[must_use]
pub fn encode(values: &[i64]) -> Vec<u8> {
    let width: usize = if values.iter().all(|value| i16::try_from(*value).is_ok()) {
        2
    } else if values.iter().all(|value| i32::try_from(*value).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(HEADER_BYTES + values.len() * width);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(values.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for value in values {
        out.extend_from_slice(&value.to_le_bytes()[..width]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves each width round-trips, and unsorted, empty or mis-sized intsets are refused.
    #[test]
    fn round_trips_and_refuses() {
        for values in [vec![-3i64, 1, 2], vec![1, 70_000], vec![-1, i64::MAX]] {
            assert_eq!(elements(&encode(&values)).expect("valid"), values);
        }
        assert_eq!(
            encode(&[1, 2]),
            b"\x02\x00\x00\x00\x02\x00\x00\x00\x01\x00\x02\x00"
        );
        assert!(elements(&encode(&[])).is_err());
        assert!(elements(&encode(&[2, 1])).is_err());
        assert!(elements(&encode(&[1, 1])).is_err());
        let mut short = encode(&[1, 2]);
        short.pop();
        assert!(elements(&short).is_err());
        let mut width = encode(&[1, 2]);
        width[0] = 3;
        assert!(elements(&width).is_err());
    }
}
