//! Redis's number parsing and printing rules (`string2ll`, `string2ld`,
//! `ld2string`, `d2string` in Redis's `util.c`).
//!
//! These live in the codec crate because the codec itself needs the strict
//! integer parser for length headers and the double printer for RESP3 `,`
//! replies; command implementations reuse them so that `INCR`, `INCRBYFLOAT`,
//! `ZSCORE` and friends accept and print numbers exactly like Redis.

use std::fmt::Write as _;

/// Redis's `LONG_STR_SIZE`: `string2ll` rejects inputs this long or longer,
/// which is one more than the longest `i64` (`-9223372036854775808`).
const I64_TEXT_MAX: usize = 21;

/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` rejects inputs this long or
/// longer before calling `strtold`.
const DOUBLE_TEXT_MAX: usize = 5 * 1024;

/// `ld2string`'s human mode prints with `%.17Lf`: never more than this many
/// digits after the decimal point.
const HUMAN_FRACTION_DIGITS_MAX: usize = 17;

/// `double2ll`'s safe range: Redis prints a double through its integer printer
/// only when `|d| <= LLONG_MAX / 2`, because every such integral double casts
/// to `i64` exactly.
const D2STRING_INTEGER_MAX: f64 = (i64::MAX / 2) as f64;

/// Longest text [`format_double_reply`] can produce: sign, 17 significant
/// digits, a decimal point, at most 6 padding zeros or an `e+308` exponent.
const D2STRING_MAX: usize = 48;

/// Parses `text` as an `i64` with Redis's `string2ll` rules: an optional `-`,
/// then digits with no leading zero (except the single string `0`), nothing
/// else. `+1`, `01`, ` 1`, `1 `, `-0`, `` and out-of-range values are
/// rejected.
#[must_use]
pub fn parse_i64_strict(text: &[u8]) -> Option<i64> {
    if text.is_empty() || text.len() >= I64_TEXT_MAX {
        return None;
    }
    if text == b"0" {
        return Some(0);
    }
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    // The first digit must be 1-9: this rejects "-", "-0", "00", "+1", " 1".
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut magnitude: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(byte - b'0'))?;
    }
    if negative {
        // -(i64::MIN) does not fit in i64, so go through i128.
        i64::try_from(-i128::from(magnitude)).ok()
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Parses `text` as a double the way Redis's `string2ld` does (`strtold`
/// demanding the whole input): decimal (`1`, `-1.5`, `.5`, `1e5`, `1E-5`),
/// C99 hexadecimal (`0x1p3`), and `inf`/`infinity` in any case with an
/// optional sign.
///
/// Rejected, as in Redis: empty input, leading or trailing whitespace or any
/// other trailing byte, NaN in any spelling, and inputs of 5 KiB or more.
///
/// Redis parses into a `long double` ([`crate::LongDouble::parse`] does that
/// exactly); this parses into `f64`, so "out of range" means out of `f64` range: a finite literal that overflows to
/// infinity, or a non-zero literal that underflows to zero, is rejected the
/// way `strtod` reports `ERANGE`. Subnormal results are accepted.
#[must_use]
pub fn parse_f64_redis(text: &[u8]) -> Option<f64> {
    if text.is_empty() || text.len() >= DOUBLE_TEXT_MAX || is_c_space(text[0]) {
        return None;
    }
    // strtold would stop at the first non-ASCII byte, leaving trailing input,
    // which Redis rejects; so non-UTF-8 input can be rejected outright.
    let text = std::str::from_utf8(text).ok()?;
    let (negative, unsigned) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = if let Some(hex) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        let magnitude = parse_hex_float(hex.as_bytes())?;
        if negative { -magnitude } else { magnitude }
    } else {
        // Rust's decimal grammar matches strtod's (digits, optional point,
        // optional exponent, `inf`/`infinity`/`nan` in any case); whitespace
        // and trailing bytes are already errors in both.
        text.parse::<f64>().ok()?
    };
    if value.is_nan() {
        return None;
    }
    let is_inf_literal =
        unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("infinity");
    if value.is_infinite() && !is_inf_literal {
        return None;
    }
    if value == 0.0 && mantissa_has_nonzero_digit(unsigned.as_bytes()) {
        return None;
    }
    Some(value)
}

/// What C's `strtod` reads from the start of `text`: the value, how many bytes it consumed
/// (0 when it found no number, as `strtod` then leaves its end pointer at the start), and
/// whether it would set `errno` to `ERANGE` (a finite literal out of `f64` range, or a
/// non-zero one that comes out zero or subnormal, as glibc reports underflow).
///
/// The grammar is C99's: leading C-locale whitespace, an optional sign, then `inf`,
/// `infinity` or `nan` (optionally `nan(chars)`) in any case, a hexadecimal float
/// (`0x1.8p3`), or a decimal one (`1`, `.5`, `5.`, `1e-3`); an exponent marker without
/// digits after it is not consumed.
#[must_use]
pub fn strtod(text: &[u8]) -> (f64, usize, bool) {
    let mut at = 0;
    while text.get(at).copied().is_some_and(is_c_space) {
        at += 1;
    }
    let number_start = at;
    let negative = match text.get(at) {
        Some(b'-') => {
            at += 1;
            true
        }
        Some(b'+') => {
            at += 1;
            false
        }
        _ => false,
    };
    let rest = &text[at..];
    let starts_with =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts_with(b"infinity") || starts_with(b"inf") {
        let used = if starts_with(b"infinity") { 8 } else { 3 };
        let value = if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
        return (value, at + used, false);
    }
    if starts_with(b"nan") {
        let mut end = at + 3;
        if text.get(end) == Some(&b'(') {
            let inner = text[end + 1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
            if text.get(end + 1 + inner) == Some(&b')') {
                end += inner + 2;
            }
        }
        return (f64::NAN, end, false);
    }
    let digits_from = |from: usize, hex: bool| {
        text[from..]
            .iter()
            .take_while(|b| {
                if hex {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            })
            .count()
    };
    let is_hex = rest.len() >= 2 && rest[0] == b'0' && matches!(rest[1], b'x' | b'X') && {
        let after = &rest[2..];
        after.first().is_some_and(u8::is_ascii_hexdigit)
            || (after.first() == Some(&b'.') && after.get(1).is_some_and(u8::is_ascii_hexdigit))
    };
    let radix_start = if is_hex { at + 2 } else { at };
    let mut end = radix_start;
    let integer_digits = digits_from(end, is_hex);
    end += integer_digits;
    let mut fraction_digits = 0;
    if text.get(end) == Some(&b'.') {
        fraction_digits = digits_from(end + 1, is_hex);
        if integer_digits + fraction_digits > 0 {
            end += 1 + fraction_digits;
        }
    }
    if integer_digits + fraction_digits == 0 {
        return (0.0, 0, false);
    }
    let exponent_marker: &[u8] = if is_hex { b"pP" } else { b"eE" };
    if text.get(end).is_some_and(|b| exponent_marker.contains(b)) {
        let mut exponent_at = end + 1;
        if matches!(text.get(exponent_at), Some(b'+' | b'-')) {
            exponent_at += 1;
        }
        let exponent_digits = digits_from(exponent_at, false);
        if exponent_digits > 0 {
            end = exponent_at + exponent_digits;
        }
    }
    let literal = &text[number_start..end];
    let value = if is_hex {
        let magnitude = parse_hex_float(&text[radix_start..end]).unwrap_or(0.0);
        if negative { -magnitude } else { magnitude }
    } else {
        // The literal is ASCII digits, signs, a point and an exponent: Rust reads exactly
        // what strtod reads, correctly rounded.
        std::str::from_utf8(literal)
            .ok()
            .and_then(|text| text.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let unsigned = &text[at..end];
    // glibc reports underflow for a result that is zero or subnormal and inexact: a
    // decimal literal there is (practically) never exact, a hexadecimal one may be.
    let subnormal = value != 0.0 && value.abs() < f64::MIN_POSITIVE;
    let underflow = (value == 0.0 && mantissa_has_nonzero_digit(unsigned))
        || (subnormal && !(is_hex && hex_fits_subnormal(&text[radix_start..end])));
    (value, end, value.is_infinite() || underflow)
}

/// Whether a hexadecimal float's digits (after `0x`) have no set bit below 2^-1074, the
/// least subnormal: a literal whose value lies in the subnormal range is then exact.
fn hex_fits_subnormal(digits: &[u8]) -> bool {
    const LEAST_SUBNORMAL_EXPONENT: i64 = -1074;
    let (mantissa, exponent) = match digits.iter().position(|b| matches!(b, b'p' | b'P')) {
        Some(at) => (&digits[..at], &digits[at + 1..]),
        None => (digits, &b""[..]),
    };
    let exponent = std::str::from_utf8(exponent)
        .ok()
        .and_then(|text| text.parse::<i64>().ok())
        .unwrap_or(0);
    let point = mantissa
        .iter()
        .position(|b| *b == b'.')
        .unwrap_or(mantissa.len());
    let mut lowest: Option<i64> = None;
    for (index, byte) in mantissa.iter().enumerate() {
        let Some(digit) = hex_value(*byte) else {
            continue;
        };
        if digit == 0 {
            continue;
        }
        // The weight of this digit's lowest bit: 16^(position) scaled to bits.
        let position = if index < point {
            (point - index - 1) as i64
        } else {
            -((index - point) as i64)
        };
        lowest = Some(4 * position + i64::from(digit.trailing_zeros()) + exponent);
    }
    lowest.is_none_or(|lowest| lowest >= LEAST_SUBNORMAL_EXPONENT)
}

/// Parses the whole of `text` (up to its first NUL byte, as C sees a string) with C's
/// `strtod`, as Redis' SORT reads a weight: `None` when bytes are left over, the value is
/// NaN, or `strtod` would report `ERANGE`. An empty string reads as 0 and leading
/// whitespace is skipped, as `strtod` does.
#[must_use]
pub fn parse_f64_strtod(text: &[u8]) -> Option<f64> {
    let text = &text[..memchr::memchr(0, text).unwrap_or(text.len())];
    if text.is_empty() {
        return Some(0.0);
    }
    let (value, used, range_error) = strtod(text);
    (used == text.len() && !range_error && !value.is_nan()).then_some(value)
}

/// `isspace` in the C locale.
pub(crate) fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Whether the digits before the exponent of a decimal or hexadecimal literal
/// (without sign) include a non-zero one, i.e. whether a zero result means
/// underflow rather than a literal zero.
fn mantissa_has_nonzero_digit(unsigned: &[u8]) -> bool {
    if let Some(hex) = unsigned
        .strip_prefix(b"0x")
        .or_else(|| unsigned.strip_prefix(b"0X"))
    {
        hex.iter()
            .take_while(|b| !matches!(b, b'p' | b'P'))
            .any(|b| b.is_ascii_hexdigit() && *b != b'0')
    } else {
        unsigned
            .iter()
            .take_while(|b| !matches!(b, b'e' | b'E'))
            .any(|b| matches!(b, b'1'..=b'9'))
    }
}

/// Parses the part of a C99 hexadecimal float after `0x`: hex digits with an
/// optional point (at least one digit), then an optional `p[+-]digits` binary
/// exponent. Any other byte, or a `p` without digits, is trailing input, which
/// Redis rejects.
fn parse_hex_float(text: &[u8]) -> Option<f64> {
    // Keep 60 bits of mantissa: more than f64's 53, so the final rounding of
    // `u64 as f64` is correct once dropped non-zero digits are folded into the
    // lowest bit as a sticky bit.
    const MANTISSA_FULL: u64 = 1 << 60;
    // Exponents beyond this already overflow or underflow any mantissa, so
    // clamping keeps the arithmetic in range without changing the result.
    const EXPONENT_CLAMP: i64 = 100_000;

    let mut mantissa: u64 = 0;
    let mut exponent: i64 = 0;
    let mut sticky = false;
    let mut any_digit = false;
    let mut seen_point = false;
    let mut rest = text;
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(digit) = hex_value(byte) {
            any_digit = true;
            if mantissa < MANTISSA_FULL {
                mantissa = (mantissa << 4) | u64::from(digit);
                if seen_point {
                    exponent -= 4;
                }
            } else {
                sticky |= digit != 0;
                if !seen_point {
                    exponent += 4;
                }
            }
        } else {
            break;
        }
        rest = tail;
    }
    if !any_digit {
        return None;
    }
    if let Some((&marker, digits)) = rest.split_first() {
        if !matches!(marker, b'p' | b'P') {
            return None;
        }
        let (negative, digits) = match digits.split_first() {
            Some((b'-', tail)) => (true, tail),
            Some((b'+', tail)) => (false, tail),
            _ => (false, digits),
        };
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut value: i64 = 0;
        for &byte in digits {
            value = (value * 10 + i64::from(byte - b'0')).min(EXPONENT_CLAMP);
        }
        exponent += if negative { -value } else { value };
    }
    if sticky {
        mantissa |= 1;
    }
    // Precision loss is the point here: this is the one rounding step.
    #[allow(clippy::cast_precision_loss)]
    let base = mantissa as f64;
    Some(scale_by_power_of_two(base, exponent))
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// `value * 2^exponent`, in steps whose factors are exact normal powers of two.
fn scale_by_power_of_two(mut value: f64, mut exponent: i64) -> f64 {
    const STEP: i64 = 1000;
    while exponent != 0 && value != 0.0 && value.is_finite() {
        let step = exponent.clamp(-STEP, STEP);
        value *= power_of_two(step);
        exponent -= step;
    }
    value
}

/// 2^`exponent` for `exponent` in the normal range `-1022..=1023`.
fn power_of_two(exponent: i64) -> f64 {
    const BIAS: i64 = 1023;
    let biased = u64::try_from(exponent + BIAS).unwrap_or(1);
    f64::from_bits(biased << 52)
}

/// Formats an `f64` in the layout of Redis' `ld2string` human mode: plain
/// decimal notation, never an exponent, at most 17 digits after the point,
/// trailing zeros and a trailing point removed, `-0` printed as `0`, and
/// `inf`, `-inf`, `nan` for the special values.
///
/// Examples: `10.5` → `10.5`, `3.0e3` → `3000`, `1e-20` → `0`.
///
/// This prints the shortest text that reads back as the same `f64`, rounded
/// to 17 fractional digits when longer. It is not what `INCRBYFLOAT` and
/// `HINCRBYFLOAT` use: Redis computes those in 80-bit `long double`, which
/// [`crate::LongDouble`] emulates exactly (`0.1 + 0.2` prints `0.3` there,
/// `0.30000000000000004` here).
#[must_use]
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Rust's `Display` for f64 is the shortest round-trip digits in plain
    // notation, which is what a human typed in the common case.
    let mut text = value.to_string();
    let fraction_len = text.find('.').map_or(0, |point| text.len() - point - 1);
    if fraction_len > HUMAN_FRACTION_DIGITS_MAX {
        // Round like `%.17f` would: exactly, from the binary value.
        text = format!("{value:.17}");
    }
    if text.contains('.') {
        let trimmed = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(trimmed);
    }
    if text == "-0" {
        text = "0".to_owned();
    }
    text
}

/// Formats a double the way Redis ≥ 7.2 replies with one (`addReplyDouble`,
/// i.e. `d2string`): used for RESP3 `,` doubles, for their RESP2 bulk-string
/// form, and for scores (`ZSCORE`, `ZINCRBY`, `WITHSCORES`).
///
/// `nan`, `inf`, `-inf`, `0`, `-0`; integral values with
/// `|v| <= i64::MAX / 2` print as integers (`3000`); everything else prints
/// the shortest round-trip digits with Redis's `fpconv_dtoa` layout: plain
/// decimal for decimal exponents in -7..21-ish (`0.000001`, `1.5`), otherwise
/// scientific with an explicit exponent sign (`1e-7`, `1.2345e+25`).
#[must_use]
pub fn format_double_reply(value: f64) -> String {
    let mut buf = StackText::new();
    write_d2string(&mut buf, value);
    buf.as_str().to_owned()
}

/// Writes `d2string(value)` into a fixed stack buffer; shared with the
/// reply writer so the hot path does not allocate.
pub(crate) fn write_d2string(out: &mut StackText, value: f64) {
    if value.is_nan() {
        out.push_str("nan");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "inf" } else { "-inf" });
    } else if value == 0.0 {
        out.push_str(if value.is_sign_negative() { "-0" } else { "0" });
    } else if (-D2STRING_INTEGER_MAX..=D2STRING_INTEGER_MAX).contains(&value)
        && value.trunc() == value
    {
        // In range and integral, so the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        let integer = value as i64;
        out.push_str(itoa::Buffer::new().format(integer));
    } else {
        write_fpconv(out, value);
    }
}

/// Formats a double as C's `printf("%.17g")` does — what Redis 7.0 replies
/// with (`addReplyDouble`) and how it prints scores (`ZSCORE`, `ZINCRBY`,
/// `WITHSCORES`, and `ZSCAN` on a large sorted set): 17 significant digits,
/// trailing zeros removed, scientific notation (`e+20`, `e-05`: a sign and at
/// least two exponent digits) when the decimal exponent is below -4 or at
/// least 17; `inf`, `-inf`, `nan`, `0`, `-0` for the special values.
///
/// Examples: `1.1` → `1.1000000000000001`, `3000` → `3000`, `1e20` →
/// `1e+20`, `1e-7` → `9.9999999999999995e-08`.
#[must_use]
pub fn format_double_g17(value: f64) -> String {
    let mut buf = StackText::new();
    write_g17(&mut buf, value);
    buf.as_str().to_owned()
}

/// Significant digits of `%.17g`.
const G17_DIGITS: usize = 17;

/// Writes `%.17g` of `value` into a stack buffer (see [`format_double_g17`]).
pub(crate) fn write_g17(out: &mut StackText, value: f64) {
    if value.is_nan() {
        out.push_str("nan");
        return;
    }
    if value.is_infinite() {
        out.push_str(if value > 0.0 { "inf" } else { "-inf" });
        return;
    }
    if value.is_sign_negative() {
        out.push_str("-");
    }
    if value == 0.0 {
        out.push_str("0");
        return;
    }
    // `{:.16e}` rounds the exact binary value to 17 significant digits (ties
    // to even, as glibc's printf): `d.dddddddddddddddde<exp>`.
    let mut sci = StackText::new();
    let _ = write!(sci, "{:.16e}", value.abs());
    let (mantissa, exp10) = sci.as_str().split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp10: i32 = exp10.parse().unwrap_or(0);
    let mut digits = [b'0'; G17_DIGITS];
    for (slot, byte) in digits
        .iter_mut()
        .zip(mantissa.bytes().filter(u8::is_ascii_digit))
    {
        *slot = byte;
    }
    // Significant digits once trailing zeros are dropped (at least one).
    let kept = digits.iter().rposition(|&d| d != b'0').map_or(1, |i| i + 1);
    if !(-4..17).contains(&exp10) {
        out.push_bytes(&digits[..1]);
        if kept > 1 {
            out.push_str(".");
            out.push_bytes(&digits[1..kept]);
        }
        out.push_str(if exp10 < 0 { "e-" } else { "e+" });
        let magnitude = exp10.unsigned_abs();
        if magnitude < 10 {
            out.push_str("0");
        }
        out.push_str(itoa::Buffer::new().format(magnitude));
    } else if exp10 >= 0 {
        // In 0..17, so the point falls inside the 17 digits.
        let int_len = usize::try_from(exp10).unwrap_or(0) + 1;
        out.push_bytes(&digits[..int_len]);
        if kept > int_len {
            out.push_str(".");
            out.push_bytes(&digits[int_len..kept]);
        }
    } else {
        out.push_str("0.");
        for _ in 1..exp10.unsigned_abs() {
            out.push_str("0");
        }
        out.push_bytes(&digits[..kept]);
    }
}

/// Redis's `fpconv_dtoa` layout (`emit_digits`) applied to the shortest
/// round-trip digits of `value` (finite, non-zero).
fn write_fpconv(out: &mut StackText, value: f64) {
    if value.is_sign_negative() {
        out.push_str("-");
    }
    // `{:e}` yields the shortest round-trip digits as `d.ddde<exp>`.
    let mut sci = StackText::new();
    let _ = write!(sci, "{:e}", value.abs());
    let sci = sci.as_str();
    let (mantissa, exp10) = sci.split_once('e').unwrap_or((sci, "0"));
    let exp10: i32 = exp10.parse().unwrap_or(0);
    let mut digits = [0u8; 24];
    let mut ndigits = 0usize;
    for byte in mantissa.bytes().filter(u8::is_ascii_digit) {
        if let Some(slot) = digits.get_mut(ndigits) {
            *slot = byte;
            ndigits += 1;
        }
    }
    let digits = &digits[..ndigits];
    // fpconv's names: the value is `digits * 10^k`, and `exp` is the absolute
    // decimal exponent of the leading digit.
    let ndigits_i = i32::try_from(ndigits).unwrap_or(i32::MAX);
    let k = exp10 - (ndigits_i - 1);
    let exp = exp10.abs();

    if k >= 0 && exp < ndigits_i + 7 {
        // Plain integer: digits followed by k zeros.
        out.push_bytes(digits);
        for _ in 0..k {
            out.push_str("0");
        }
        return;
    }
    if k < 0 && (k > -7 || exp < 4) {
        // Plain decimal without exponent.
        let int_len = ndigits_i + k;
        if int_len <= 0 {
            out.push_str("0.");
            for _ in 0..(-int_len) {
                out.push_str("0");
            }
            out.push_bytes(digits);
        } else {
            let split = usize::try_from(int_len).unwrap_or(0);
            let (int_part, frac_part) = digits.split_at(split.min(digits.len()));
            out.push_bytes(int_part);
            out.push_str(".");
            out.push_bytes(frac_part);
        }
        return;
    }
    // Scientific: d[.ddd]e±x, the exponent without leading zeros.
    if let Some((first, rest)) = digits.split_first() {
        out.push_bytes(&[*first]);
        if !rest.is_empty() {
            out.push_str(".");
            out.push_bytes(rest);
        }
    }
    out.push_str(if exp10 < 0 { "e-" } else { "e+" });
    out.push_str(itoa::Buffer::new().format(exp));
}

/// A small fixed-capacity text buffer, so formatting a double for a reply
/// does not allocate. Writes beyond the capacity are dropped, which cannot
/// happen for the inputs used here (the longest is well under 48 bytes).
#[derive(Debug)]
pub(crate) struct StackText {
    bytes: [u8; D2STRING_MAX],
    len: usize,
}

impl StackText {
    pub(crate) fn new() -> Self {
        Self {
            bytes: [0; D2STRING_MAX],
            len: 0,
        }
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        let end = (self.len + bytes.len()).min(D2STRING_MAX);
        let take = end - self.len;
        self.bytes[self.len..end].copy_from_slice(&bytes[..take]);
        self.len = end;
    }

    fn push_str(&mut self, text: &str) {
        self.push_bytes(text.as_bytes());
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.push_str(text);
        Ok(())
    }
}
