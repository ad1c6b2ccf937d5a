//! Redis number rules: strict integer and double parsing, double printing.

use weft_resp::{
    format_double, format_double_g17, format_double_reply, parse_f64_redis, parse_i64_strict,
};

#[test]
fn strict_integers_accept_only_canonical_forms() {
    // string2ll accepts canonical decimal i64 text and nothing else.
    assert_eq!(parse_i64_strict(b"0"), Some(0));
    assert_eq!(parse_i64_strict(b"42"), Some(42));
    assert_eq!(parse_i64_strict(b"-42"), Some(-42));
    assert_eq!(parse_i64_strict(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_i64_strict(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"+1",
        b"01",
        b"00",
        b"-0",
        b"-01",
        b" 1",
        b"1 ",
        b"1a",
        b"1.0",
        b"9223372036854775808",
        b"-9223372036854775809",
        b"18446744073709551616",
        b"99999999999999999999",
    ] {
        assert_eq!(parse_i64_strict(bad), None, "{bad:?}");
    }
}

#[test]
fn doubles_parse_like_strtold() {
    // Decimal, exponent, hex and inf spellings parse; the value is exact.
    assert_eq!(parse_f64_redis(b"1"), Some(1.0));
    assert_eq!(parse_f64_redis(b"-1.5"), Some(-1.5));
    assert_eq!(parse_f64_redis(b"+2.5"), Some(2.5));
    assert_eq!(parse_f64_redis(b".5"), Some(0.5));
    assert_eq!(parse_f64_redis(b"5."), Some(5.0));
    assert_eq!(parse_f64_redis(b"1e5"), Some(1e5));
    assert_eq!(parse_f64_redis(b"1E-5"), Some(1e-5));
    assert_eq!(parse_f64_redis(b"10.5"), Some(10.5));
    assert_eq!(parse_f64_redis(b"inf"), Some(f64::INFINITY));
    assert_eq!(parse_f64_redis(b"+inf"), Some(f64::INFINITY));
    assert_eq!(parse_f64_redis(b"-inf"), Some(f64::NEG_INFINITY));
    assert_eq!(parse_f64_redis(b"-Infinity"), Some(f64::NEG_INFINITY));
    assert_eq!(parse_f64_redis(b"0x10"), Some(16.0));
    assert_eq!(parse_f64_redis(b"-0x1p-2"), Some(-0.25));
    assert_eq!(parse_f64_redis(b"0X.8P1"), Some(1.0));
    assert_eq!(parse_f64_redis(b"0"), Some(0.0));
    assert_eq!(parse_f64_redis(b"-0.0e10"), Some(-0.0));
    assert_eq!(parse_f64_redis(b"4.9e-324"), Some(4.9e-324));
}

#[test]
fn doubles_reject_what_redis_rejects() {
    // Empty, whitespace, trailing bytes, NaN and out-of-range values fail.
    for bad in [
        &b""[..],
        b" 1",
        b"1 ",
        b"\t1",
        b"1x",
        b"1e",
        b"1e+",
        b"e5",
        b".",
        b"-",
        b"+",
        b"nan",
        b"NaN",
        b"-nan",
        b"1,5",
        b"0x",
        b"0xg",
        b"0x1p",
        b"0x1.8p+",
        b"1e400",
        b"-1e400",
        b"1e-400",
        b"0x1p99999",
        b"0x1p-99999",
        b"1\x00",
        b"\xff",
    ] {
        assert_eq!(parse_f64_redis(bad), None, "{bad:?}");
    }
    assert_eq!(parse_f64_redis(&vec![b'1'; 5 * 1024]), None);
}

#[test]
fn human_doubles_print_like_incrbyfloat() {
    // ld2string human mode: plain notation, trimmed zeros, no negative zero.
    assert_eq!(format_double(10.5), "10.5");
    assert_eq!(format_double(3.0e3), "3000");
    assert_eq!(format_double(5.0e3), "5000");
    assert_eq!(format_double(10.5 + 0.1), "10.6");
    assert_eq!(format_double(1.0), "1");
    assert_eq!(format_double(-1.25), "-1.25");
    assert_eq!(format_double(0.0), "0");
    assert_eq!(format_double(-0.0), "0");
    assert_eq!(format_double(1e-20), "0");
    assert_eq!(format_double(-1e-20), "0");
    assert_eq!(format_double(1.5e-10), "0.00000000015");
    assert_eq!(
        format_double(1.234_567_890_123_456_7e-5),
        "0.00001234567890123"
    );
    assert_eq!(format_double(17_179_869_185.5), "17179869185.5");
    assert_eq!(format_double(1e20), "100000000000000000000");
    assert_eq!(format_double(f64::INFINITY), "inf");
    assert_eq!(format_double(f64::NEG_INFINITY), "-inf");
    assert_eq!(format_double(f64::NAN), "nan");
}

#[test]
fn reply_doubles_print_like_d2string() {
    // d2string: integers via the integer printer, else fpconv's shortest form.
    assert_eq!(format_double_reply(0.0), "0");
    assert_eq!(format_double_reply(-0.0), "-0");
    assert_eq!(format_double_reply(3000.0), "3000");
    assert_eq!(format_double_reply(-17.0), "-17");
    assert_eq!(format_double_reply(1.5), "1.5");
    assert_eq!(format_double_reply(1.1), "1.1");
    assert_eq!(format_double_reply(0.1 + 0.2), "0.30000000000000004");
    assert_eq!(format_double_reply(0.000_001), "0.000001");
    assert_eq!(format_double_reply(0.000_000_1), "1e-7");
    assert_eq!(format_double_reply(1.5e-7), "1.5e-7");
    assert_eq!(format_double_reply(0.001_234_5), "0.0012345");
    assert_eq!(format_double_reply(123_456.789), "123456.789");
    assert_eq!(format_double_reply(1e19), "1e+19");
    assert_eq!(format_double_reply(1.2345e25), "1.2345e+25");
    assert_eq!(format_double_reply(-1e300), "-1e+300");
    assert_eq!(
        format_double_reply(4_611_686_018_427_387_904.0),
        "4611686018427387904"
    );
    assert_eq!(
        format_double_reply(9.223_372_036_854_776e18),
        "9223372036854776000"
    );
    assert_eq!(format_double_reply(f64::MAX), "1.7976931348623157e+308");
    assert_eq!(format_double_reply(5e-324), "5e-324");
    assert_eq!(format_double_reply(f64::INFINITY), "inf");
    assert_eq!(format_double_reply(f64::NEG_INFINITY), "-inf");
    assert_eq!(format_double_reply(f64::NAN), "nan");
}

#[test]
fn reply_doubles_read_back_exactly() {
    // Whatever d2string prints parses back to the same double.
    for value in [
        1.1,
        -2.5e-9,
        1e-7,
        123.456,
        6.02e23,
        f64::MIN_POSITIVE,
        1.0 / 3.0,
    ] {
        let text = format_double_reply(value);
        assert_eq!(parse_f64_redis(text.as_bytes()), Some(value), "{text}");
    }
}

// Proves doubles print as C's `%.17g` (Redis 7.0's addReplyDouble), vectors from a
// correctly rounded printf.
#[test]
fn reply_doubles_print_like_printf_g17() {
    for (value, expected) in [
        (1.1, "1.1000000000000001"),
        (0.1, "0.10000000000000001"),
        (3000.0, "3000"),
        (1e20, "1e+20"),
        (1e16, "10000000000000000"),
        (1e17, "1e+17"),
        (1e-5, "1.0000000000000001e-05"),
        (1e-4, "0.0001"),
        (0.0001234, "0.00012339999999999999"),
        (123456789.123, "123456789.123"),
        (-2.5e-9, "-2.5000000000000001e-09"),
        (5e-324, "4.9406564584124654e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.30000000000000004, "0.30000000000000004"),
        (1e-7, "9.9999999999999995e-08"),
        (12345678901234567.0, "12345678901234568"),
        (9007199254740993.0, "9007199254740992"),
        (-0.5, "-0.5"),
        (2.5, "2.5"),
        (1.5e-10, "1.5e-10"),
        (4.35, "4.3499999999999996"),
        (100.0, "100"),
        (0.000_123_456_789_012_345_67, "0.00012345678901234567"),
        (0.0, "0"),
        (-0.0, "-0"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
        (f64::NAN, "nan"),
    ] {
        assert_eq!(format_double_g17(value), expected, "{value:e}");
    }
}

// Proves `strtod` consumes what C's strtod consumes and reports ERANGE as glibc does, and
// that SORT's whole-string reading accepts leading blanks and the empty string, and refuses
// trailing bytes, NaN and out-of-range values.
#[test]
fn strtod_as_c_reads() {
    use weft_resp::{parse_f64_strtod, strtod};
    let cases: &[(&str, f64, usize, bool)] = &[
        ("1.5", 1.5, 3, false),
        ("  -2e3x", -2000.0, 6, false),
        (".5", 0.5, 2, false),
        ("5.", 5.0, 2, false),
        (".", 0.0, 0, false),
        ("abc", 0.0, 0, false),
        ("  ", 0.0, 0, false),
        ("1e", 1.0, 1, false),
        ("1e+", 1.0, 1, false),
        ("0x", 0.0, 1, false),
        ("0x10", 16.0, 4, false),
        ("0x1p-2", 0.25, 6, false),
        ("-inf", f64::NEG_INFINITY, 4, false),
        ("Infinity!", f64::INFINITY, 8, false),
        ("1e400", f64::INFINITY, 5, true),
        ("1e-400", 0.0, 6, true),
        ("1e-310", 1e-310, 6, true),
        ("0e-400", 0.0, 6, false),
        ("4.9406564584124654e-324", 5e-324, 23, true),
        ("0x1p-1074", 5e-324, 9, false),
        ("0x1.8p-1070", f64::from_bits(24), 11, false),
        ("0x1.1p-1074", 5e-324, 11, true),
    ];
    for (text, value, used, range) in cases {
        let (got, got_used, got_range) = strtod(text.as_bytes());
        assert_eq!(
            (got, got_used, got_range),
            (*value, *used, *range),
            "{text}"
        );
    }
    let (nan, used, _) = strtod(b"nan(12)x");
    assert!(nan.is_nan());
    assert_eq!(used, 7);

    assert_eq!(parse_f64_strtod(b""), Some(0.0));
    assert_eq!(parse_f64_strtod(b" 10"), Some(10.0));
    assert_eq!(parse_f64_strtod(b"12\0abc"), Some(12.0));
    assert_eq!(parse_f64_strtod(b"inf"), Some(f64::INFINITY));
    for refused in [
        &b"10 "[..],
        b"nan",
        b"1e400",
        b"1e-400",
        b"not-a-double",
        b" ",
    ] {
        assert_eq!(parse_f64_strtod(refused), None, "{refused:?}");
    }
}
