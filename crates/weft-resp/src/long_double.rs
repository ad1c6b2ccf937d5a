//! A software emulation of the C `long double` Redis computes `INCRBYFLOAT` and
//! `HINCRBYFLOAT` with on x86-64: the x87 80-bit extended format (sign, 15-bit
//! exponent with bias 16383, 64-bit significand with an explicit integer bit;
//! IEEE 754 subnormals; round to nearest, ties to even).
//!
//! Only what those commands need is here, and each step is exact as in C:
//!
//! - [`LongDouble::parse`]: `string2ld`, i.e. glibc `strtold` over the whole
//!   input (correctly rounded decimal and hexadecimal, `inf`/`infinity`),
//!   with Redis' rejections (NaN, whitespace, trailing bytes, out of range).
//! - `+` ([`std::ops::Add`]): one x87 addition, correctly rounded.
//! - [`LongDouble::format_human`]: `ld2string(..., LD_STR_HUMAN)`, i.e.
//!   glibc's exact `%.17Lf` followed by Redis' trimming.
//!
//! Values are kept as `significand × 2^exponent` with the significand
//! normalized (bit 63 set) except for subnormals, which sit at the smallest
//! exponent. Exact intermediate values (a decimal literal, an unrounded sum)
//! are rounded once, by [`round_pack`], from a wider integer plus a sticky bit
//! standing for any non-zero bits below it.

use std::cmp::Ordering;
use std::fmt;

use crate::number::is_c_space;

/// The longest text [`LongDouble::parse`] accepts: Redis copies the argument
/// into a `MAX_LONG_DOUBLE_CHARS` (5 KiB) buffer with its terminating NUL and
/// rejects anything longer before calling `strtold`.
pub const LONG_DOUBLE_TEXT_BYTES_MAX: usize = 5 * 1024 - 1;

/// Bits in the significand, integer bit included.
const SIGNIFICAND_BITS: i64 = 64;

/// `exponent` of subnormals and of the smallest normals: the value of the
/// least significant significand bit there is 2^-16445 (minimum biased
/// exponent 1, bias 16383, 63 fraction bits).
const EXPONENT_MIN: i64 = 1 - 16383 - 63;

/// `exponent` of the largest finite values (maximum biased exponent 32766).
const EXPONENT_MAX: i64 = 32766 - 16383 - 63;

/// A decimal literal with `n` significant digits and decimal exponent `k`
/// (value `D × 10^k`, `10^(n-1) <= D < 10^n`) certainly overflows when
/// `n - 1 + k` reaches this: the largest finite value is about 1.19e4932.
const DECIMAL_OVERFLOW_EXPONENT: i64 = 4933;

/// ... and certainly rounds to zero when `n + k` is at most this: 10^-4951 is
/// less than half the smallest subnormal (about 3.65e-4951).
const DECIMAL_UNDERFLOW_EXPONENT: i64 = -4951;

/// Exponents written in a literal are clamped to this magnitude: beyond it
/// every literal of acceptable length has already overflowed or underflowed,
/// so the clamp changes no result and keeps the arithmetic small.
const WRITTEN_EXPONENT_CLAMP: i64 = 1_000_000;

/// `%.17Lf`: digits printed after the decimal point.
const HUMAN_FRACTION_DIGITS: u32 = 17;

/// Quotient bits the decimal parser computes for a literal with a negative
/// decimal exponent: 66 or 67, two more than the significand, so that the
/// round bit and a non-empty sticky position are always inside the quotient.
const QUOTIENT_BITS_MIN: i64 = SIGNIFICAND_BITS + 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Zero,
    Finite,
    Infinite,
    Nan,
}

/// An x87 80-bit extended-precision value, computed exactly like C's
/// `long double` on x86-64 Linux. See the `long_double` module's documentation.
///
/// There is deliberately no `PartialEq`: compare [`LongDouble::to_bits`] for
/// identity, as C's `==` semantics (`-0 == 0`, `NaN != NaN`) are not needed.
#[derive(Clone, Copy)]
pub struct LongDouble {
    negative: bool,
    class: Class,
    /// For [`Class::Finite`]: non-zero; bit 63 set unless `exponent` is
    /// [`EXPONENT_MIN`] (a subnormal).
    significand: u64,
    /// For [`Class::Finite`]: the value is `significand × 2^exponent`, with
    /// `EXPONENT_MIN <= exponent <= EXPONENT_MAX`.
    exponent: i64,
}

impl LongDouble {
    /// Positive zero.
    pub const ZERO: Self = Self::special(false, Class::Zero);

    const fn special(negative: bool, class: Class) -> Self {
        Self {
            negative,
            class,
            significand: 0,
            exponent: 0,
        }
    }

    /// Parses `text` the way Redis' `string2ld` does: glibc `strtold` must
    /// consume the whole input, correctly rounded (ties to even) to the
    /// 64-bit significand.
    ///
    /// Accepted: an optional sign, then a decimal (`1`, `1.`, `.5`, `1e5`,
    /// `2.5E-3`) or C99 hexadecimal (`0x1.8p3`, `0X.8`) literal, or `inf` /
    /// `infinity` in any case.
    ///
    /// Rejected (`None`), as in Redis: empty input, input longer than
    /// [`LONG_DOUBLE_TEXT_BYTES_MAX`], leading whitespace, any trailing byte,
    /// NaN in any spelling, a finite literal that overflows to infinity, and a
    /// literal with a non-zero digit that underflows to zero. Subnormal
    /// results are accepted.
    ///
    /// Work is bounded by the length cap: exponents are clamped, literals
    /// that certainly overflow or underflow are decided from their digit
    /// count, and the rest cost a few big-integer passes of at most ~24,000
    /// bits.
    #[must_use]
    pub fn parse(text: &[u8]) -> Option<Self> {
        let first = *text.first()?;
        if text.len() > LONG_DOUBLE_TEXT_BYTES_MAX || is_c_space(first) {
            return None;
        }
        let (negative, unsigned) = match first {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        if unsigned.eq_ignore_ascii_case(b"inf") || unsigned.eq_ignore_ascii_case(b"infinity") {
            return Some(Self::special(negative, Class::Infinite));
        }
        let literal = if let Some(hex) = unsigned
            .strip_prefix(b"0x")
            .or_else(|| unsigned.strip_prefix(b"0X"))
        {
            parse_hex(hex)?
        } else {
            parse_decimal(unsigned)?
        };
        let literal_is_zero = literal.is_zero();
        let value = literal.value(negative);
        match value.class {
            // ERANGE with ±HUGE_VAL.
            Class::Infinite => None,
            // ERANGE with a zero result: a non-zero literal underflowed.
            Class::Zero if !literal_is_zero => None,
            _ => Some(value),
        }
    }

    /// The exact value of `value` (every `i64` fits the 64-bit significand),
    /// as Redis converts an integer-encoded string.
    #[must_use]
    pub fn from_i64(value: i64) -> Self {
        round_pack(value < 0, u128::from(value.unsigned_abs()), 0, false)
    }

    /// Whether the value is neither infinite nor NaN (C's `isfinite`).
    #[must_use]
    pub fn is_finite(&self) -> bool {
        matches!(self.class, Class::Zero | Class::Finite)
    }

    /// Whether the value is `±inf`.
    #[must_use]
    pub fn is_infinite(&self) -> bool {
        self.class == Class::Infinite
    }

    /// Whether the value is NaN.
    #[must_use]
    pub fn is_nan(&self) -> bool {
        self.class == Class::Nan
    }

    /// Whether the sign bit is set (true for `-0` too).
    #[must_use]
    pub fn is_sign_negative(&self) -> bool {
        self.negative
    }

    /// The x87 memory image in the low 80 bits: sign (bit 79), biased
    /// exponent (bits 64..79), significand with its explicit integer bit
    /// (bits 0..64). NaN is the default quiet NaN.
    #[must_use]
    pub fn to_bits(&self) -> u128 {
        const EXPONENT_ALL_ONES: u128 = 0x7fff;
        const INTEGER_BIT: u128 = 1 << 63;
        let sign = u128::from(self.negative) << 79;
        let (biased, significand) = match self.class {
            Class::Zero => (0, 0),
            Class::Infinite => (EXPONENT_ALL_ONES, INTEGER_BIT),
            Class::Nan => (EXPONENT_ALL_ONES, INTEGER_BIT | (INTEGER_BIT >> 1)),
            Class::Finite => {
                let significand = u128::from(self.significand);
                if significand & INTEGER_BIT == 0 {
                    (0, significand)
                } else {
                    // In range by the type's invariant: 1..=32766.
                    let biased = u128::try_from(self.exponent - EXPONENT_MIN + 1).unwrap_or(0);
                    (biased, significand)
                }
            }
        };
        sign | (biased << 64) | significand
    }

    /// Formats the value like Redis' `ld2string(..., LD_STR_HUMAN)`: glibc's
    /// `%.17Lf` (the exact binary value rounded, ties to even, to 17 digits
    /// after the point, every integer digit printed), then trailing zeros
    /// after the point removed, then the point if nothing follows it, and
    /// `-0` printed as `0`. Infinities print `inf`/`-inf`, NaN `nan`.
    ///
    /// Examples: `0.1` → `0.1`, `3000` → `3000`, `200.1` →
    /// `200.10000000000000001`, `1e-20` → `0`.
    #[must_use]
    pub fn format_human(&self) -> String {
        match self.class {
            Class::Nan => "nan".to_owned(),
            Class::Infinite if self.negative => "-inf".to_owned(),
            Class::Infinite => "inf".to_owned(),
            Class::Zero => "0".to_owned(),
            Class::Finite => self.format_finite(),
        }
    }

    fn format_finite(&self) -> String {
        let mut text = String::new();
        if self.negative {
            text.push('-');
        }
        if let Ok(shift) = usize::try_from(self.exponent) {
            // An integer: all 17 fraction digits are zeros and get trimmed.
            let mut integer = Big::from_u64(self.significand);
            integer.shl_assign(shift);
            integer.write_decimal(&mut text);
            return text;
        }
        let fraction_bits = self.exponent.unsigned_abs();
        // significand × 10^17 < 2^64 × 2^56.5: with 128 or more fraction bits
        // the scaled value is below half a unit, so it rounds to zero.
        let scaled: u128 = if fraction_bits >= 128 {
            0
        } else {
            let product = u128::from(self.significand) * 10u128.pow(HUMAN_FRACTION_DIGITS);
            let quotient = product >> fraction_bits;
            let remainder = product & ((1u128 << fraction_bits) - 1);
            let half = 1u128 << (fraction_bits - 1);
            let round_up = remainder > half || (remainder == half && quotient & 1 == 1);
            quotient + u128::from(round_up)
        };
        if scaled == 0 {
            // `-0.00000000000000000` trims to `-0`, which Redis prints as `0`.
            return "0".to_owned();
        }
        let unit = 10u128.pow(HUMAN_FRACTION_DIGITS);
        let integer = scaled / unit;
        let fraction = scaled % unit;
        text.push_str(&integer.to_string());
        if fraction != 0 {
            let digits = format!("{fraction:017}");
            text.push('.');
            text.push_str(digits.trim_end_matches('0'));
        }
        text
    }
}

impl Default for LongDouble {
    fn default() -> Self {
        Self::ZERO
    }
}

impl std::ops::Add for LongDouble {
    type Output = Self;

    /// `self + rhs` as one x87 addition: the exact sum correctly rounded
    /// (ties to even), overflowing to infinity; `inf + -inf` is NaN, an exact
    /// zero sum of non-zero values is `+0`, and `-0 + -0` is `-0`.
    fn add(self, rhs: Self) -> Self {
        match (self.class, rhs.class) {
            (Class::Nan, _) | (_, Class::Nan) => Self::special(false, Class::Nan),
            (Class::Infinite, Class::Infinite) if self.negative != rhs.negative => {
                Self::special(false, Class::Nan)
            }
            (Class::Infinite, _) => self,
            (_, Class::Infinite) => rhs,
            (Class::Zero, Class::Zero) => Self::special(self.negative && rhs.negative, Class::Zero),
            (Class::Zero, Class::Finite) => rhs,
            (Class::Finite, Class::Zero) => self,
            (Class::Finite, Class::Finite) => add_finite(self, rhs),
        }
    }
}

impl fmt::Debug for LongDouble {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LongDouble({:#022x} ≈ {})",
            self.to_bits(),
            self.format_human()
        )
    }
}

/// Adds two finite non-zero values.
fn add_finite(a: LongDouble, b: LongDouble) -> LongDouble {
    // Guard bits below the significand: plenty for the round bit, and the
    // sticky bit jammed into bit 0 stays far below the rounding position.
    const GUARD: u32 = 62;
    // Order by magnitude; normalization makes that (exponent, significand).
    let (big, small) = if (a.exponent, a.significand) >= (b.exponent, b.significand) {
        (a, b)
    } else {
        (b, a)
    };
    let distance = u32::try_from(big.exponent - small.exponent).unwrap_or(u32::MAX);
    let wide_big = u128::from(big.significand) << GUARD;
    let wide_small = shift_right_jam(u128::from(small.significand) << GUARD, distance);
    let exponent = big.exponent - i64::from(GUARD);
    if big.negative == small.negative {
        // Both are below 2^126, so the sum does not overflow.
        round_pack(big.negative, wide_big + wide_small, exponent, false)
    } else {
        // |big| >= |small|, and jamming never lifts the smaller one above it.
        let difference = wide_big - wide_small;
        if difference == 0 {
            LongDouble::ZERO
        } else {
            round_pack(big.negative, difference, exponent, false)
        }
    }
}

/// `value >> distance`, with every bit shifted out OR-ed into bit 0.
fn shift_right_jam(value: u128, distance: u32) -> u128 {
    match distance {
        0 => value,
        1..=127 => {
            let lost = value & ((1u128 << distance) - 1);
            (value >> distance) | u128::from(lost != 0)
        }
        _ => u128::from(value != 0),
    }
}

/// Rounds `(mantissa + ε) × 2^exponent` to the nearest `LongDouble`, ties to
/// even, where `ε` is some value strictly between 0 and 1 if `sticky`, else 0.
/// Handles overflow to infinity, subnormals and underflow to zero.
///
/// With `sticky`, `mantissa` must have at least 66 significant bits, so that
/// the round bit is a real bit of it; every caller guarantees that.
fn round_pack(negative: bool, mantissa: u128, exponent: i64, sticky: bool) -> LongDouble {
    if mantissa == 0 {
        return LongDouble::special(negative, Class::Zero);
    }
    let length = i64::from(128 - mantissa.leading_zeros());
    debug_assert!(!sticky || length > SIGNIFICAND_BITS + 1);
    // Keep 64 bits, or fewer where the exponent would go below the minimum.
    let shift = (length - SIGNIFICAND_BITS).max(EXPONENT_MIN - exponent);
    let (mut kept, mut exponent) = if shift <= 0 {
        // Exact: `length + (-shift) <= 64`.
        (mantissa << shift.unsigned_abs(), exponent + shift)
    } else {
        let shift_bits = u32::try_from(shift).unwrap_or(u32::MAX);
        let (kept, round, below) = match shift_bits {
            1..=127 => {
                let below_mask = (1u128 << (shift_bits - 1)) - 1;
                (
                    mantissa >> shift_bits,
                    (mantissa >> (shift_bits - 1)) & 1 == 1,
                    mantissa & below_mask != 0,
                )
            }
            128 => (0, mantissa >> 127 == 1, mantissa & (u128::MAX >> 1) != 0),
            _ => (0, false, true),
        };
        let round_up = round && (sticky || below || kept & 1 == 1);
        (kept + u128::from(round_up), exponent + shift)
    };
    if kept >> SIGNIFICAND_BITS != 0 {
        // Rounding carried into a 65th bit: 2^64 becomes 2^63 × 2.
        kept >>= 1;
        exponent += 1;
    }
    if kept == 0 {
        return LongDouble::special(negative, Class::Zero);
    }
    if exponent > EXPONENT_MAX {
        return LongDouble::special(negative, Class::Infinite);
    }
    LongDouble {
        negative,
        class: Class::Finite,
        // `kept < 2^64` after the carry adjustment above.
        significand: u64::try_from(kept).unwrap_or(u64::MAX),
        exponent,
    }
}

/// An exact unsigned literal before rounding.
enum Literal {
    Zero,
    /// Certainly beyond the largest finite value.
    Overflow,
    /// Certainly below half the smallest subnormal, but not zero.
    Underflow,
    /// `mantissa × 2^exponent`, `mantissa` non-zero.
    Binary {
        mantissa: Big,
        exponent: i64,
    },
    /// `digits × 10^exponent`, `digits` non-zero.
    Decimal {
        digits: Big,
        exponent: i64,
    },
}

impl Literal {
    fn is_zero(&self) -> bool {
        matches!(self, Self::Zero)
    }

    /// The literal with `negative` sign, correctly rounded.
    fn value(self, negative: bool) -> LongDouble {
        match self {
            Self::Zero | Self::Underflow => LongDouble::special(negative, Class::Zero),
            Self::Overflow => LongDouble::special(negative, Class::Infinite),
            Self::Binary { mantissa, exponent } => round_big(negative, &mantissa, exponent, false),
            Self::Decimal { digits, exponent } => {
                if let Ok(power) = u32::try_from(exponent) {
                    // digits × 10^k = (digits × 5^k) × 2^k, exactly.
                    let mut product = digits;
                    product.mul_pow5(power);
                    round_big(negative, &product, exponent, false)
                } else {
                    let power = u32::try_from(exponent.unsigned_abs()).unwrap_or(u32::MAX);
                    divide_by_pow10(negative, &digits, power)
                }
            }
        }
    }
}

/// Rounds `(value + ε) × 2^exponent` (see [`round_pack`]) for a big `value`:
/// its top 128 bits are exact and everything below becomes sticky.
fn round_big(negative: bool, value: &Big, exponent: i64, sticky: bool) -> LongDouble {
    let length = value.bit_len();
    let dropped = length.saturating_sub(128);
    let top = value.bits_from(dropped);
    let sticky = sticky || value.any_below(dropped);
    round_pack(
        negative,
        top,
        exponent + i64::try_from(dropped).unwrap_or(0),
        sticky,
    )
}

/// Rounds `digits / 10^power` = `digits × 2^-power / 5^power`.
///
/// The division is scaled so the quotient has 66 or 67 bits: with `a` and `b`
/// the bit lengths of `digits` and `5^power`, `digits × 2^s / 5^power` lies in
/// `[2^65, 2^67)` for `s = b - a + 66`. The scaling goes on the dividend or
/// the divisor depending on the sign of `s`, then a shift-subtract loop
/// produces just those quotient bits; the remainder is the sticky bit.
fn divide_by_pow10(negative: bool, digits: &Big, power: u32) -> LongDouble {
    let mut divisor = Big::from_u64(1);
    divisor.mul_pow5(power);
    let digits_len = i64::try_from(digits.bit_len()).unwrap_or(i64::MAX);
    let divisor_len = i64::try_from(divisor.bit_len()).unwrap_or(i64::MAX);
    let scale = divisor_len - digits_len + QUOTIENT_BITS_MIN;
    let mut remainder = digits.clone();
    if let Ok(bits) = usize::try_from(scale) {
        remainder.shl_assign(bits);
    } else {
        divisor.shl_assign(usize::try_from(scale.unsigned_abs()).unwrap_or(0));
    }
    // Quotient < 2^67: start with the divisor aligned to quotient bit 66.
    const QUOTIENT_TOP_BIT: usize = 66;
    divisor.shl_assign(QUOTIENT_TOP_BIT);
    let mut quotient: u128 = 0;
    for bit in (0..=QUOTIENT_TOP_BIT).rev() {
        if remainder.cmp(&divisor) != Ordering::Less {
            remainder.sub_assign(&divisor);
            quotient |= 1u128 << bit;
        }
        if bit > 0 {
            divisor.shr1_assign();
        }
    }
    let exponent = -scale - i64::from(power);
    round_pack(negative, quotient, exponent, !remainder.is_zero())
}

/// Parses a decimal literal without sign: digits with an optional point (at
/// least one digit), then an optional `e`/`E`, optional sign and digits.
fn parse_decimal(text: &[u8]) -> Option<Literal> {
    let (integer, fraction, exponent_value) = split_literal(text, b'e', u8::is_ascii_digit)?;
    // Significant digits: from the first non-zero to the last non-zero one.
    let all: Vec<u8> = integer.iter().chain(fraction).copied().collect();
    let Some(first) = all.iter().position(|&b| b != b'0') else {
        return Some(Literal::Zero);
    };
    let last = all.iter().rposition(|&b| b != b'0').unwrap_or(first);
    let significant = &all[first..=last];
    let count = i64::try_from(significant.len()).unwrap_or(i64::MAX);
    // The last significant digit's place: the digit at overall index `i`
    // is worth 10^(integer.len() - 1 - i).
    let integer_len = i64::try_from(integer.len()).unwrap_or(i64::MAX);
    let last_index = i64::try_from(last).unwrap_or(i64::MAX);
    let exponent = exponent_value + integer_len - 1 - last_index;
    if count - 1 + exponent >= DECIMAL_OVERFLOW_EXPONENT {
        return Some(Literal::Overflow);
    }
    if count + exponent <= DECIMAL_UNDERFLOW_EXPONENT {
        return Some(Literal::Underflow);
    }
    Some(Literal::Decimal {
        digits: Big::from_decimal(significant),
        exponent,
    })
}

/// Splits an unsigned literal into its integer digits, fraction digits and written exponent:
/// digits with an optional point (at least one digit, each passing `is_digit`), then an
/// optional exponent after `marker` (either case).
fn split_literal(
    text: &[u8],
    marker: u8,
    is_digit: fn(&u8) -> bool,
) -> Option<(&[u8], &[u8], i64)> {
    let (mantissa, written_exponent) =
        match text.iter().position(|&b| b.eq_ignore_ascii_case(&marker)) {
            Some(at) => (&text[..at], Some(&text[at + 1..])),
            None => (text, None),
        };
    let exponent = match written_exponent {
        Some(exponent) => parse_exponent(exponent)?,
        None => 0,
    };
    let (integer, fraction) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &mantissa[mantissa.len()..]),
    };
    if integer.is_empty() && fraction.is_empty() {
        return None;
    }
    if !integer.iter().chain(fraction).all(is_digit) {
        return None;
    }
    Some((integer, fraction, exponent))
}

/// Parses the part after `e`/`p`: an optional sign and at least one digit,
/// clamped to [`WRITTEN_EXPONENT_CLAMP`].
fn parse_exponent(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0i64, |value, &digit| {
        (value * 10 + i64::from(digit - b'0')).min(WRITTEN_EXPONENT_CLAMP)
    });
    Some(if negative { -magnitude } else { magnitude })
}

/// Parses the part of a C99 hexadecimal literal after `0x`: hex digits with
/// an optional point (at least one digit), then an optional `p`/`P` binary
/// exponent (sign optional, digits required).
fn parse_hex(text: &[u8]) -> Option<Literal> {
    let (integer, fraction, exponent_value) = split_literal(text, b'p', u8::is_ascii_hexdigit)?;
    let mut value = Big::default();
    for &digit in integer.iter().chain(fraction) {
        value.mul_add_small(16, u32::from(hex_value(digit)));
    }
    if value.is_zero() {
        return Some(Literal::Zero);
    }
    let fraction_bits = 4 * i64::try_from(fraction.len()).unwrap_or(i64::MAX / 8);
    Some(Literal::Binary {
        mantissa: value,
        exponent: exponent_value - fraction_bits,
    })
}

fn hex_value(byte: u8) -> u8 {
    match byte {
        b'0'..=b'9' => byte - b'0',
        b'a'..=b'f' => byte - b'a' + 10,
        b'A'..=b'F' => byte - b'A' + 10,
        _ => 0,
    }
}

/// A minimal arbitrary-precision unsigned integer: little-endian base-2^32
/// limbs, no trailing zero limbs (zero is empty). Only the operations the
/// conversions above need.
#[derive(Clone, Default, Debug)]
struct Big {
    limbs: Vec<u32>,
}

impl Big {
    fn from_u64(value: u64) -> Self {
        // Truncations split the value into its two halves.
        #[allow(clippy::cast_possible_truncation)]
        let limbs = vec![value as u32, (value >> 32) as u32];
        let mut big = Self { limbs };
        big.trim();
        big
    }

    /// `digits` are ASCII decimal digits.
    fn from_decimal(digits: &[u8]) -> Self {
        const CHUNK: usize = 9;
        let mut big = Self::default();
        for chunk in digits.chunks(CHUNK) {
            let value = chunk
                .iter()
                .fold(0u32, |value, &digit| value * 10 + u32::from(digit - b'0'));
            let exponent = u32::try_from(chunk.len()).unwrap_or(0);
            big.mul_add_small(10u32.pow(exponent), value);
        }
        big
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    fn bit_len(&self) -> usize {
        match self.limbs.last() {
            None => 0,
            Some(&top) => self.limbs.len() * 32 - top.leading_zeros() as usize,
        }
    }

    /// `self = self × factor + addend`.
    fn mul_add_small(&mut self, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.limbs {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            // Low half; the high half carries.
            #[allow(clippy::cast_possible_truncation)]
            {
                *limb = product as u32;
            }
            carry = product >> 32;
        }
        if carry != 0 {
            #[allow(clippy::cast_possible_truncation)]
            self.limbs.push(carry as u32);
        }
    }

    /// `self ×= 5^power`.
    fn mul_pow5(&mut self, power: u32) {
        // 5^13 is the largest power of five below 2^32.
        const STEP: u32 = 13;
        for _ in 0..power / STEP {
            self.mul_add_small(5u32.pow(STEP), 0);
        }
        self.mul_add_small(5u32.pow(power % STEP), 0);
    }

    /// `self <<= bits`.
    fn shl_assign(&mut self, bits: usize) {
        if self.is_zero() {
            return;
        }
        let limbs = bits / 32;
        let bits = bits % 32;
        if bits != 0 {
            let mut carry = 0u32;
            for limb in &mut self.limbs {
                let next = *limb >> (32 - bits);
                *limb = (*limb << bits) | carry;
                carry = next;
            }
            if carry != 0 {
                self.limbs.push(carry);
            }
        }
        if limbs != 0 {
            self.limbs.splice(0..0, std::iter::repeat_n(0, limbs));
        }
    }

    /// `self >>= 1`.
    fn shr1_assign(&mut self) {
        let mut carry = 0u32;
        for limb in self.limbs.iter_mut().rev() {
            let next = *limb << 31;
            *limb = (*limb >> 1) | carry;
            carry = next;
        }
        self.trim();
    }

    fn cmp(&self, other: &Self) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    /// `self -= other`; requires `self >= other`.
    fn sub_assign(&mut self, other: &Self) {
        let mut borrow = false;
        for (index, limb) in self.limbs.iter_mut().enumerate() {
            let subtrahend = other.limbs.get(index).copied().unwrap_or(0);
            if subtrahend == 0 && !borrow && index >= other.limbs.len() {
                break;
            }
            let (partial, borrow_a) = limb.overflowing_sub(subtrahend);
            let (result, borrow_b) = partial.overflowing_sub(u32::from(borrow));
            *limb = result;
            borrow = borrow_a || borrow_b;
        }
        debug_assert!(!borrow, "Big::sub_assign underflow");
        self.trim();
    }

    fn bit(&self, index: usize) -> bool {
        self.limbs
            .get(index / 32)
            .is_some_and(|limb| (limb >> (index % 32)) & 1 == 1)
    }

    /// Bits `from..from + 128` as a `u128`.
    fn bits_from(&self, from: usize) -> u128 {
        (0..128).fold(0u128, |value, offset| {
            value | (u128::from(self.bit(from + offset)) << offset)
        })
    }

    /// Whether any bit below `index` is set.
    fn any_below(&self, index: usize) -> bool {
        let whole = index / 32;
        let partial = index % 32;
        self.limbs.iter().take(whole).any(|&limb| limb != 0)
            || (partial != 0
                && self
                    .limbs
                    .get(whole)
                    .is_some_and(|limb| limb & ((1u32 << partial) - 1) != 0))
    }

    /// Divides by `divisor` in place, returning the remainder.
    fn div_rem_small(&mut self, divisor: u32) -> u32 {
        let mut remainder = 0u64;
        for limb in self.limbs.iter_mut().rev() {
            let current = (remainder << 32) | u64::from(*limb);
            // `current / divisor < 2^32` because `remainder < divisor`.
            #[allow(clippy::cast_possible_truncation)]
            {
                *limb = (current / u64::from(divisor)) as u32;
            }
            remainder = current % u64::from(divisor);
        }
        self.trim();
        // `remainder < divisor`.
        u32::try_from(remainder).unwrap_or(0)
    }

    /// Appends the decimal digits (`0` for zero).
    fn write_decimal(mut self, out: &mut String) {
        const CHUNK_DIVISOR: u32 = 1_000_000_000;
        let mut chunks = Vec::new();
        while !self.is_zero() {
            chunks.push(self.div_rem_small(CHUNK_DIVISOR));
        }
        let mut chunks = chunks.iter().rev();
        match chunks.next() {
            None => out.push('0'),
            Some(first) => out.push_str(&first.to_string()),
        }
        for chunk in chunks {
            out.push_str(&format!("{chunk:09}"));
        }
    }
}
