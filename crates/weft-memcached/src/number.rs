//! memcached's number parsing (`safe_strtoul`, `safe_strtol`, `safe_strtoull` of `util.c`),
//! reproduced on byte slices so that Weft accepts and refuses exactly the tokens memcached
//! does.
//!
//! They are C's `strtoul`/`strtol`/`strtoull` in base 10 followed by memcached's checks:
//! leading white space and a sign are accepted; at least one digit is required; the number
//! must be followed by the end of the token or by a white-space character (anything after
//! that is ignored, as in C); out-of-range values are refused; a value that is negative only
//! because of a `-` sign is refused by the unsigned parsers. Two C conversions are kept on
//! purpose: `safe_strtoul` returns the low 32 bits of a 64-bit value (flags `4294967296` are
//! stored as 0) and `safe_strtol` the low 32 bits of a 64-bit signed value (a data length of
//! `4294967299` reads as 3), as memcached on a 64-bit machine does.

/// C's `isspace` in the "C" locale.
#[must_use]
pub fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The parts of a `strto*` parse: sign, magnitude (`None` on overflow of 64 bits), and
/// whether what follows the digits is acceptable to memcached.
struct Parsed {
    negative: bool,
    magnitude: Option<u64>,
}

/// Parses like `strtoull` and applies memcached's end check. `None` when there are no digits
/// or the number is followed by something other than the end or white space.
fn parse(token: &[u8]) -> Option<Parsed> {
    let mut rest = token;
    while let Some((&first, tail)) = rest.split_first() {
        if is_c_space(first) {
            rest = tail;
        } else {
            break;
        }
    }
    let mut negative = false;
    if let Some((&sign, tail)) = rest.split_first() {
        if sign == b'+' || sign == b'-' {
            negative = sign == b'-';
            rest = tail;
        }
    }
    let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let mut magnitude = Some(0u64);
    for &digit in rest.get(..digits).unwrap_or_default() {
        magnitude = magnitude
            .and_then(|value| value.checked_mul(10))
            .and_then(|value| value.checked_add(u64::from(digit - b'0')));
    }
    match rest.get(digits) {
        None => {}
        Some(&next) if is_c_space(next) => {}
        Some(_) => return None,
    }
    Some(Parsed {
        negative,
        magnitude,
    })
}

/// `strtoull` then memcached's sign check, as a `u64`.
fn unsigned_64(token: &[u8]) -> Option<u64> {
    let parsed = parse(token)?;
    // ERANGE: C's strtoull reports overflow whatever the sign.
    let magnitude = parsed.magnitude?;
    let value = if parsed.negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    // memcached refuses a result that is negative as a signed number only when the token
    // contains a minus sign anywhere (so `-1` fails but `-0` and `-18446744073709551615`,
    // which C negates to 0 and 1, pass).
    if value > i64::MAX as u64 && token.contains(&b'-') {
        return None;
    }
    Some(value)
}

/// memcached's `safe_strtoull`: CAS values and incr/decr deltas.
#[must_use]
pub fn safe_strtoull(token: &[u8]) -> Option<u64> {
    unsigned_64(token)
}

/// memcached's `safe_strtoul` on a 64-bit machine: client flags. The 64-bit result is
/// truncated to 32 bits, as memcached's assignment to a `uint32_t` does.
#[must_use]
pub fn safe_strtoul(token: &[u8]) -> Option<u32> {
    // Truncation is the point: memcached stores `(uint32_t) strtoul(...)`.
    unsigned_64(token).map(|value| value as u32)
}

/// memcached's `safe_strtol` on a 64-bit machine: expiration times and data lengths. The
/// 64-bit `long` must not overflow; the result is truncated to 32 bits, as memcached's
/// assignment to an `int32_t` does.
#[must_use]
pub fn safe_strtol(token: &[u8]) -> Option<i32> {
    let parsed = parse(token)?;
    let magnitude = parsed.magnitude?;
    let value: i64 = if parsed.negative {
        if magnitude > 1u64 << 63 {
            return None;
        }
        0i64.wrapping_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()?
    };
    // Truncation is the point (see the function's documentation).
    Some(value as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the unsigned parsers follow strtoull plus memcached's sign and end checks.
    #[test]
    fn unsigned_parsing_follows_memcached() {
        assert_eq!(safe_strtoull(b"42"), Some(42));
        assert_eq!(safe_strtoull(b"+3"), Some(3));
        assert_eq!(safe_strtoull(b"-0"), Some(0));
        assert_eq!(safe_strtoull(b"-1"), None);
        assert_eq!(safe_strtoull(b"-18446744073709551615"), Some(1));
        assert_eq!(safe_strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(safe_strtoull(b"18446744073709551616"), None);
        assert_eq!(safe_strtoull(b"3x"), None);
        assert_eq!(safe_strtoull(b"3\tjunk"), Some(3));
        assert_eq!(safe_strtoull(b"\t 7"), Some(7));
        assert_eq!(safe_strtoull(b""), None);
        assert_eq!(safe_strtoull(b"-"), None);
        assert_eq!(safe_strtoull(b"0x10"), None);
    }

    // Proves flags and lengths are truncated to 32 bits as memcached's C assignments do.
    #[test]
    fn thirty_two_bit_results_truncate_like_c() {
        assert_eq!(safe_strtoul(b"4294967295"), Some(u32::MAX));
        assert_eq!(safe_strtoul(b"4294967296"), Some(0));
        assert_eq!(safe_strtoul(b"-1"), None);
        assert_eq!(safe_strtol(b"-1"), Some(-1));
        assert_eq!(safe_strtol(b"4294967299"), Some(3));
        assert_eq!(safe_strtol(b"2147483648"), Some(i32::MIN));
        assert_eq!(safe_strtol(b"-9223372036854775808"), Some(0));
        assert_eq!(safe_strtol(b"9223372036854775808"), None);
        assert_eq!(safe_strtol(b"-9223372036854775809"), None);
    }
}
