//! `LongDouble`: Redis' `long double` arithmetic for INCRBYFLOAT / HINCRBYFLOAT
//! (`string2ld`, one x87 addition, `ld2string` human mode), bit for bit.

use proptest::prelude::*;
use weft_resp::{LONG_DOUBLE_TEXT_BYTES_MAX, LongDouble};

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NAN_OR_INF: &str = "ERR increment would produce NaN or Infinity";

/// What `SET k current` (or no key) then `INCRBYFLOAT k increment` replies.
#[derive(Debug)]
enum Expect {
    Ok(&'static str),
    Err(&'static str),
    /// A long integer result: its length, first and last 24 characters.
    Digits(usize, &'static str, &'static str),
}
use Expect::{Digits, Err, Ok};

/// INCRBYFLOAT as Redis runs it: parse the stored value (absent: 0) and the
/// increment, add once, refuse a non-finite sum, print in human mode.
fn incrbyfloat(current: Option<&[u8]>, increment: &[u8]) -> Result<String, &'static str> {
    let current = match current {
        None => LongDouble::ZERO,
        Some(text) => LongDouble::parse(text).ok_or(NOT_FLOAT)?,
    };
    let increment = LongDouble::parse(increment).ok_or(NOT_FLOAT)?;
    let sum = current + increment;
    if !sum.is_finite() {
        return Result::Err(NAN_OR_INF);
    }
    Result::Ok(sum.format_human())
}

/// Replies of redis-server 7.0.15 (x86-64, glibc) to `DEL k`, `SET k current`
/// (when `Some`), `INCRBYFLOAT k increment`.
const REDIS_REPLIES: &[(Option<&str>, &str, Expect)] = &[
    (None, "0.1", Ok("0.1")),
    (Some("0.2"), "0.1", Ok("0.3")),
    (Some("0.1"), "0.2", Ok("0.3")),
    (Some("1.1"), "2.2", Ok("3.3")),
    (Some("10.5"), "0.1", Ok("10.6")),
    (Some("10.50"), "0.1", Ok("10.6")),
    (Some("3.0e3"), "0", Ok("3000")),
    (Some("5.0e3"), "2.0e2", Ok("5200")),
    (None, "5.0e3", Ok("5000")),
    (None, "1e-10", Ok("0.0000000001")),
    (Some("-1.1"), "1", Ok("-0.1")),
    (Some("17179869184"), "1.5", Ok("17179869185.5")),
    (
        None,
        "1e300",
        Digits(301, "100000000000000000000899", "105690089424915104006144"),
    ),
    (
        None,
        "1.7e308",
        Digits(309, "170000000000000000003136", "562011679309777401282560"),
    ),
    (None, "1e30", Ok("1000000000000000000024696061952")),
    (None, "1e-300", Ok("0")),
    (None, "1e-4900", Ok("0")),
    (None, "0x1.8p3", Ok("12")),
    (Some("0x10"), "0X.8", Ok("16.5")),
    (Some("0x1p-1"), "0.25", Ok("0.75")),
    (Some("-0"), "0", Ok("0")),
    (Some("-0"), "-0", Ok("0")),
    (Some("0"), "-0", Ok("0")),
    (Some("1.5"), "-1.5", Ok("0")),
    (Some("0.1"), "-0.1", Ok("0")),
    (Some("1e20"), "-1e20", Ok("0")),
    (Some("-5"), "5.0", Ok("0")),
    (None, "inf", Err(NAN_OR_INF)),
    (None, "-inf", Err(NAN_OR_INF)),
    (Some("inf"), "1", Err(NAN_OR_INF)),
    (Some("-Infinity"), "1", Err(NAN_OR_INF)),
    (Some("1"), "nan", Err(NOT_FLOAT)),
    (Some("nan"), "1", Err(NOT_FLOAT)),
    (Some("abc"), "1", Err(NOT_FLOAT)),
    (Some("1"), "abc", Err(NOT_FLOAT)),
    (Some("1"), " 1", Err(NOT_FLOAT)),
    (Some("1"), "1 ", Err(NOT_FLOAT)),
    (Some("1"), "\t1", Err(NOT_FLOAT)),
    (Some("1"), "", Err(NOT_FLOAT)),
    (Some(""), "1", Err(NOT_FLOAT)),
    (None, "1e5000", Err(NOT_FLOAT)),
    (None, "-1e5000", Err(NOT_FLOAT)),
    (None, "1e-5000", Err(NOT_FLOAT)),
    (None, "3.6e-4951", Ok("0")),
    (None, "1e-4951", Err(NOT_FLOAT)),
    (None, "0.000003814697265625", Ok("0.00000381469726562")),
    (None, "0.000011444091796875", Ok("0.00001144409179688")),
    (None, "200.1", Ok("200.10000000000000001")),
    (None, "1234.5678", Ok("1234.56779999999999997")),
    (
        None,
        "123456789012.345",
        Ok("123456789012.3449999988079071"),
    ),
    (None, "100.3", Ok("100.3")),
    (Some("100"), "0.3", Ok("100.3")),
    (Some("9223372036854775807"), "1", Ok("9223372036854775808")),
    (
        Some("-9223372036854775808"),
        "-1",
        Ok("-9223372036854775809"),
    ),
    (
        Some("18446744073709551615"),
        "1",
        Ok("18446744073709551616"),
    ),
    (None, "18446744073709551617", Ok("18446744073709551616")),
    (None, "18446744073709551619", Ok("18446744073709551620")),
    (None, "0.30000000000000004", Ok("0.30000000000000004")),
    (Some("0.1"), "0.7", Ok("0.8")),
    (Some("1"), "1e-17", Ok("1.00000000000000001")),
    (Some("1"), "5e-18", Ok("1")),
    (None, "5e-18", Ok("0")),
    (None, "5.000001e-18", Ok("0.00000000000000001")),
    (None, "1.5e-17", Ok("0.00000000000000002")),
    (None, "2.5e-17", Ok("0.00000000000000002")),
    (Some("3"), "-2.9999999999999999", Ok("0.0000000000000001")),
    (Some("1e4932"), "1e4932", Err(NAN_OR_INF)),
    (
        Some("1.18973149535723176502e4932"),
        "1e4900",
        Digits(4933, "118973149535723176502126", "604419552086811989770240"),
    ),
    (
        None,
        "1.18973149535723176505e4932",
        Digits(4933, "118973149535723176502126", "604419552086811989770240"),
    ),
    (None, "1.1897314953572317651e4932", Err(NOT_FLOAT)),
    (None, "+5", Ok("5")),
    (None, ".5", Ok("0.5")),
    (None, "5.", Ok("5")),
    (None, "-.5e-1", Ok("-0.05")),
    (None, "1E2", Ok("100")),
    (None, "1e+2", Ok("100")),
    (None, "1e", Err(NOT_FLOAT)),
    (None, "1e+", Err(NOT_FLOAT)),
    (None, "e1", Err(NOT_FLOAT)),
    (None, ".", Err(NOT_FLOAT)),
    (None, "-", Err(NOT_FLOAT)),
    (None, "+", Err(NOT_FLOAT)),
    (None, "0x", Err(NOT_FLOAT)),
    (None, "0x1p", Err(NOT_FLOAT)),
    (None, "0x1P-1074", Ok("0")),
    (None, "0x1p-16445", Ok("0")),
    (None, "0x1p-16446", Err(NOT_FLOAT)),
    (None, "0x1.8p-16446", Ok("0")),
    (
        None,
        "0x1p16383",
        Digits(4932, "594865747678615882542879", "230223513645334982033408"),
    ),
    (None, "0x1p16384", Err(NOT_FLOAT)),
    (None, "infinity", Err(NAN_OR_INF)),
    (None, "INF", Err(NAN_OR_INF)),
    (None, "NaN", Err(NOT_FLOAT)),
    (None, "1,5", Err(NOT_FLOAT)),
    (None, "1.2.3", Err(NOT_FLOAT)),
    (None, "0.1e-1", Ok("0.01")),
    (
        Some("12345678901234567890"),
        "0.5",
        Ok("12345678901234567890"),
    ),
    (Some("1.5"), "2.5", Ok("4")),
    (None, "-1e-20", Ok("0")),
    (None, "0.99999999999999999999", Ok("1")),
    (None, "0.999999999999999995", Ok("1")),
    (None, "0.999999999999999994", Ok("0.99999999999999999")),
    (None, "4.35", Ok("4.35")),
    (Some("4.35"), "-0.01", Ok("4.34")),
    (Some("0.1"), "0.1", Ok("0.2")),
    (Some("-0.3"), "0.1", Ok("-0.2")),
    (Some("1e-7"), "1e-8", Ok("0.00000011")),
    (Some("2.5"), "-0.0000000000000000001", Ok("2.5")),
    (
        None,
        "3.14159265358979323846264338327950288",
        Ok("3.14159265358979324"),
    ),
    (
        None,
        "-2.718281828459045235360287",
        Ok("-2.71828182845904524"),
    ),
    (None, "1e19", Ok("10000000000000000000")),
    (None, "1e20", Ok("100000000000000000000")),
    (
        None,
        "123456789.123456789",
        Ok("123456789.12345678899873747"),
    ),
    (None, "0.1e1", Ok("1")),
    (None, "00012.5000", Ok("12.5")),
    (None, "0x.0000000000000001p4", Ok("0")),
    (None, "1e-18", Ok("0")),
    (Some("7"), "-7.000000000000000001", Ok("0")),
    (
        None,
        "1e4000",
        Digits(4000, "999999999999999999996546", "951206648276349901340672"),
    ),
    (
        Some("-1e4000"),
        "-1e-4000",
        Digits(4001, "-99999999999999999999654", "951206648276349901340672"),
    ),
    (
        Some("0x1.fffffffffffffffep16383"),
        "0",
        Digits(4933, "118973149535723176502126", "604419552086811989770240"),
    ),
    (
        None,
        "-1.5e4930",
        Digits(4932, "-14999999999999999999888", "754247990411694822129664"),
    ),
];

#[test]
fn incrbyfloat_replies_match_redis() {
    for (current, increment, expected) in REDIS_REPLIES {
        let got = incrbyfloat(current.map(str::as_bytes), increment.as_bytes());
        let context = format!("{current:?} + {increment:?}");
        match (expected, &got) {
            (Ok(text), Result::Ok(value)) => assert_eq!(value, text, "{context}"),
            (Err(text), Result::Err(error)) => assert_eq!(error, text, "{context}"),
            (Digits(len, head, tail), Result::Ok(value)) => {
                assert_eq!(value.len(), *len, "{context}");
                assert!(value.starts_with(head), "{context}: {value}");
                assert!(value.ends_with(tail), "{context}: {value}");
            }
            _ => panic!("{context}: expected {expected:?}, got {got:?}"),
        }
    }
}

#[test]
fn text_longer_than_the_redis_buffer_is_rejected() {
    // 5119 bytes fit MAX_LONG_DOUBLE_CHARS with the NUL; 5120 do not.
    let mut text = vec![b'0'; LONG_DOUBLE_TEXT_BYTES_MAX - 1];
    text.push(b'1');
    assert_eq!(incrbyfloat(None, &text), Result::Ok("1".to_owned()));
    text.insert(0, b'0');
    assert_eq!(incrbyfloat(None, &text), Result::Err(NOT_FLOAT));
    assert_eq!(incrbyfloat(Some(&text), b"1"), Result::Err(NOT_FLOAT));
}

#[test]
fn parse_rounds_to_the_x87_bit_pattern() {
    // Memory images as glibc strtold produces them.
    for (text, bits) in [
        ("1", 0x3fff_8000_0000_0000_0000_u128),
        ("-2", 0xc000_8000_0000_0000_0000),
        ("0.1", 0x3ffb_cccc_cccc_cccc_cccd),
        ("0.2", 0x3ffc_cccc_cccc_cccc_cccd),
        ("0.3", 0x3ffd_9999_9999_9999_999a),
        ("1e4000", 0x73e6_d1ba_8323_fe55_8c61),
        ("0", 0),
        ("-0", 0x8000_0000_0000_0000_0000),
        ("inf", 0x7fff_8000_0000_0000_0000),
        ("-Infinity", 0xffff_8000_0000_0000_0000),
        // Largest finite, smallest normal, smallest subnormal.
        ("1.18973149535723176502e4932", 0x7ffe_ffff_ffff_ffff_ffff),
        ("0x1p-16382", 0x0001_8000_0000_0000_0000),
        ("0x1p-16445", 0x0000_0000_0000_0000_0001),
        // Half the smallest subnormal and a bit: rounds up, not to zero.
        ("0x1.0000001p-16446", 0x0000_0000_0000_0000_0001),
        // 2^64 + 1 is a tie: even significand; 2^64 + 3 ties upwards.
        ("18446744073709551617", 0x403f_8000_0000_0000_0000),
        ("18446744073709551619", 0x403f_8000_0000_0000_0002),
        (
            "18446744073709551617.000000000000000000000000000001",
            0x403f_8000_0000_0000_0001,
        ),
        ("0x1.00000000000000010p0", 0x3fff_8000_0000_0000_0000),
        ("0x1.00000000000000030p0", 0x3fff_8000_0000_0000_0002),
        // A quarter and three quarters of an ulp.
        ("0x1.00000000000000008p0", 0x3fff_8000_0000_0000_0000),
        ("0x1.00000000000000018p0", 0x3fff_8000_0000_0000_0001),
    ] {
        let value = LongDouble::parse(text.as_bytes());
        assert_eq!(value.map(|v| v.to_bits()), Some(bits), "{text}");
    }
}

#[test]
fn out_of_range_and_malformed_literals_are_rejected() {
    for text in [
        "",
        " 1",
        "1 ",
        "\t1",
        "1\0",
        "nan",
        "-NaN",
        "nan(0x1)",
        "infinit",
        "infinityy",
        "1e",
        "1e+",
        "e1",
        ".",
        "-",
        "+",
        "+-1",
        "--1",
        "1.2.3",
        "1e5e3",
        "0x",
        "0x.",
        "0xp1",
        "0x1p",
        "0x1p+",
        "0x1g",
        "1_000",
        "1,5",
        "١",
        // Overflow to infinity, underflow to zero (ERANGE).
        "1e4933",
        "-1e5000",
        "0x1p16384",
        "1e-4951",
        "0x1p-16446",
        "1e-99999999999999999999",
        "1e99999999999999999999",
    ] {
        assert!(LongDouble::parse(text.as_bytes()).is_none(), "{text:?}");
    }
    // A zero literal with any exponent is zero, not an underflow.
    for text in ["0e-99999", "-0.000e99999", "0x0p-99999", "0x0.000p99999"] {
        let value = LongDouble::parse(text.as_bytes());
        assert_eq!(
            value.map(|v| v.format_human()),
            Some("0".to_owned()),
            "{text}"
        );
    }
}

#[test]
fn special_values() {
    let inf = LongDouble::parse(b"inf").expect("inf parses");
    let minus_inf = LongDouble::parse(b"-inf").expect("-inf parses");
    assert!(inf.is_infinite() && !inf.is_finite() && !inf.is_sign_negative());
    assert_eq!(inf.format_human(), "inf");
    assert_eq!(minus_inf.format_human(), "-inf");
    let nan = inf + minus_inf;
    assert!(nan.is_nan() && !nan.is_finite());
    assert_eq!(nan.format_human(), "nan");
    // Signed zeros: -0 + -0 is -0, an exact cancellation is +0.
    let minus_zero = LongDouble::parse(b"-0").expect("-0 parses");
    assert!((minus_zero + minus_zero).is_sign_negative());
    assert!(!(minus_zero + LongDouble::ZERO).is_sign_negative());
    let x = LongDouble::parse(b"-1.25").expect("parses");
    let y = LongDouble::parse(b"1.25").expect("parses");
    assert_eq!((x + y).to_bits(), 0);
    // Largest + largest overflows; largest + its half ulp ties to even (stays).
    let max = LongDouble::parse(b"0x1.fffffffffffffffep16383").expect("max parses");
    assert!((max + max).is_infinite());
    let half_ulp = LongDouble::parse(b"0x1p16319").expect("parses");
    assert!((max + half_ulp).is_infinite());
    let below_half_ulp = LongDouble::parse(b"0x1.fffffffffffffffep16318").expect("parses");
    assert_eq!((max + below_half_ulp).to_bits(), max.to_bits());
    assert_eq!(
        LongDouble::from_i64(i64::MIN).format_human(),
        "-9223372036854775808"
    );
    assert_eq!(LongDouble::default().to_bits(), 0);
}

#[test]
fn adversarial_literals_stay_cheap() {
    // The longest accepted texts with the largest scalings: decimal digits
    // over 10^-10000, 10^4932, hex digits shifted far down. Each is a few
    // passes over at most ~24,000-bit integers.
    let digits: String = (0..LONG_DOUBLE_TEXT_BYTES_MAX)
        .map(|i| char::from(b'1' + (i % 9) as u8))
        .collect();
    let cases = [
        format!(
            "{}.{}e-4950",
            &digits[..1],
            &digits[..LONG_DOUBLE_TEXT_BYTES_MAX - 8]
        ),
        format!("0.{}", &digits[..LONG_DOUBLE_TEXT_BYTES_MAX - 2]),
        format!(
            "{}.{}",
            &digits[..4932],
            &digits[..LONG_DOUBLE_TEXT_BYTES_MAX - 4933]
        ),
        format!("0x1.{}p-16400", &digits[..LONG_DOUBLE_TEXT_BYTES_MAX - 11]),
        format!("0x{}", &digits[..LONG_DOUBLE_TEXT_BYTES_MAX - 2]),
        format!("1e-4950{}", ""),
    ];
    let start = std::time::Instant::now();
    let parsed: Vec<Option<String>> = cases
        .iter()
        .map(|text| LongDouble::parse(text.as_bytes()).map(|v| v.format_human()))
        .collect();
    assert_eq!(parsed[0].as_deref(), Some("0"));
    assert_eq!(parsed[1].as_deref().map(|t| &t[..12]), Some("0.1234567891"));
    // About 1.2e4931: an integer, 4932 digits.
    assert_eq!(parsed[2].as_ref().map(String::len), Some(4932));
    assert_eq!(parsed[3].as_deref(), Some("0"));
    assert_eq!(parsed[4], None);
    assert_eq!(parsed[5].as_deref(), Some("0"));
    // Generous even for an unoptimized build on a loaded machine.
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

/// `m / 10^scale` as the shortest decimal text (`m > 0`).
fn decimal_text(negative: bool, m: u64, scale: u32) -> String {
    let digits = m.to_string();
    let scale = scale as usize;
    let (integer, fraction) = if digits.len() > scale {
        let (i, f) = digits.split_at(digits.len() - scale);
        (i.to_owned(), f.to_owned())
    } else {
        (
            "0".to_owned(),
            format!("{}{digits}", "0".repeat(scale - digits.len())),
        )
    };
    let fraction = fraction.trim_end_matches('0');
    let sign = if negative { "-" } else { "" };
    if fraction.is_empty() {
        format!("{sign}{integer}")
    } else {
        format!("{sign}{integer}.{fraction}")
    }
}

/// Simple decimals: up to 15 significant digits, at most 17 after the
/// point, and either integers or below 128 in magnitude. There the 64-bit
/// significand's error (at most 2^-58) stays below half a unit in the 17th
/// decimal place, so `%.17Lf` gives the digits back; larger non-integers can
/// show the error, in Redis too (`200.1` prints `200.10000000000000001`).
fn simple_decimal() -> impl Strategy<Value = (bool, u64, u32)> {
    (any::<bool>(), 0u32..=17).prop_flat_map(|(negative, scale)| {
        let limit = if scale == 0 {
            10u64.pow(15)
        } else {
            10u64.pow(15).min(128 * 10u64.pow(scale.min(13)))
        };
        (Just(negative), 1..limit, Just(scale))
    })
}

/// A finite `f64` as an exact C99 hexadecimal literal.
fn f64_hex(value: f64) -> String {
    let bits = value.to_bits();
    let sign = if value.is_sign_negative() { "-" } else { "" };
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    if exponent == 0 {
        format!("{sign}0x{fraction:x}p-1074")
    } else {
        format!("{sign}0x{:x}p{}", fraction | (1 << 52), exponent - 1075)
    }
}

/// Rust's `{:.17}` (exact, ties to even) with Redis' trimming.
fn trimmed_17(value: f64) -> String {
    let text = format!("{value:.17}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

proptest! {
    #[test]
    fn simple_decimals_round_trip((negative, m, scale) in simple_decimal()) {
        let text = decimal_text(negative, m, scale);
        let value = LongDouble::parse(text.as_bytes());
        prop_assert_eq!(value.map(|v| v.format_human()), Some(text.clone()));
        // The same number in exponent form reads as the same value.
        let sign = if negative { "-" } else { "" };
        let exponent_form = format!("{sign}{m}e-{scale}");
        let other = LongDouble::parse(exponent_form.as_bytes());
        prop_assert_eq!(other.map(|v| v.to_bits()), value.map(|v| v.to_bits()));
    }

    #[test]
    fn integer_sums_are_exact(a in any::<i64>(), b in any::<i64>()) {
        // Any sum of two i64 has at most 64 significant bits.
        let sum = LongDouble::from_i64(a) + LongDouble::from_i64(b);
        prop_assert_eq!(sum.format_human(), (i128::from(a) + i128::from(b)).to_string());
        let parsed = LongDouble::parse(a.to_string().as_bytes());
        prop_assert_eq!(parsed.map(|v| v.to_bits()), Some(LongDouble::from_i64(a).to_bits()));
    }

    #[test]
    fn every_f64_prints_like_rusts_exact_formatting(bits in any::<u64>()) {
        // Every finite f64 is exact in the extended format, and Rust's `{:.17}`
        // is exact with ties to even, like glibc's `%.17Lf`.
        let value = f64::from_bits(bits);
        prop_assume!(value.is_finite());
        let parsed = LongDouble::parse(f64_hex(value).as_bytes());
        prop_assert_eq!(parsed.map(|v| v.format_human()), Some(trimmed_17(value)));
    }

    #[test]
    fn dyadic_sums_of_f64s_are_exact(a in -(1i64 << 40)..(1i64 << 40), p in 0u32..24,
                                     b in -(1i64 << 40)..(1i64 << 40), q in 0u32..24) {
        // a/2^p + b/2^q needs at most 64 bits, and the f64 operands are exact;
        // the exact sum is checked in i128 then printed via two f64 halves'
        // exact decimal expansion.
        let x = a as f64 / f64::from(1u32 << p);
        let y = b as f64 / f64::from(1u32 << q);
        let sum = LongDouble::parse(f64_hex(x).as_bytes()).expect("finite")
            + LongDouble::parse(f64_hex(y).as_bytes()).expect("finite");
        let numerator = i128::from(a) * (1i128 << (24 - p)) + i128::from(b) * (1i128 << (24 - q));
        // numerator / 2^24 has at most 24 fraction digits; print it exactly.
        let scaled = numerator * 5i128.pow(24);
        let negative = scaled < 0;
        let magnitude = scaled.unsigned_abs();
        let unit = 10u128.pow(24 - 17);
        let (quotient, remainder) = (magnitude / unit, magnitude % unit);
        let half = unit / 2;
        let rounded = quotient + u128::from(remainder > half || (remainder == half && quotient % 2 == 1));
        let expected = if rounded == 0 {
            "0".to_owned()
        } else {
            let integer = rounded / 10u128.pow(17);
            let fraction = format!("{:017}", rounded % 10u128.pow(17));
            let fraction = fraction.trim_end_matches('0');
            let sign = if negative { "-" } else { "" };
            if fraction.is_empty() { format!("{sign}{integer}") } else { format!("{sign}{integer}.{fraction}") }
        };
        prop_assert_eq!(sum.format_human(), expected);
    }

    #[test]
    fn parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = LongDouble::parse(&bytes);
    }

    #[test]
    fn numberish_text_never_panics(parts in prop::collection::vec(
        prop_oneof![
            Just("0x"), Just("."), Just("e"), Just("p"), Just("-"), Just("+"), Just("inf"),
            Just("9"), Just("0"), Just("1"), Just("f"), Just("99999"), Just("000000"),
        ], 0..16)) {
        let text = parts.concat();
        if let Some(value) = LongDouble::parse(text.as_bytes()) {
            let _ = (value + value).format_human();
        }
    }
}
