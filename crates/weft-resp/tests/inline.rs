//! Inline requests: line splitting and Redis's `sdssplitargs` quoting rules.
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use weft_resp::{Limits, ProtocolError, RequestDecoder, parse_request};

/// The arguments of the single inline request in `line`.
fn split(line: &[u8]) -> Result<Option<Vec<Vec<u8>>>, ProtocolError> {
    Ok(parse_request(line, &Limits::default())?
        .map(|(request, _)| request.args.iter().map(|a| a.to_vec()).collect()))
}

fn args(items: &[&[u8]]) -> Option<Vec<Vec<u8>>> {
    Some(items.iter().map(|a| a.to_vec()).collect())
}

#[test]
fn splits_on_whitespace_with_either_line_ending() {
    // Runs of spaces/tabs separate arguments; `\n` or `\r\n` ends the line.
    assert_eq!(
        split(b"SET  k\tv\r\n").unwrap(),
        args(&[b"SET", b"k", b"v"])
    );
    assert_eq!(split(b"  PING\n").unwrap(), args(&[b"PING"]));
    assert_eq!(split(b"GET k \r\n").unwrap(), args(&[b"GET", b"k"]));
}

#[test]
fn line_without_newline_is_incomplete() {
    // No `\n` yet means wait, even after a `\r`.
    assert_eq!(split(b"PING").unwrap(), None);
    assert_eq!(split(b"PING\r").unwrap(), None);
    assert_eq!(split(b"SET k \"unterminated").unwrap(), None);
}

#[test]
fn double_quotes_support_c_escapes() {
    // Inside double quotes: \n \r \t \b \a \xHH, and \<c> for anything else.
    assert_eq!(
        split(b"SET k \"a\\nb\\rc\\td\\be\\af\\\\g\\\"h\\x41\\xfF\\q\"\r\n").unwrap(),
        args(&[b"SET", b"k", b"a\nb\rc\td\x08e\x07f\\g\"hA\xffq"])
    );
    // A `\x` not followed by two hex digits is just an escaped `x`.
    assert_eq!(split(b"\"\\xZZ\\x4\"\n").unwrap(), args(&[b"xZZx4"]));
    // Spaces and single quotes are literal inside double quotes.
    assert_eq!(
        split(b"ECHO \"a b 'c'\"\n").unwrap(),
        args(&[b"ECHO", b"a b 'c'"])
    );
}

#[test]
fn single_quotes_only_escape_single_quotes() {
    // Inside single quotes only \' is special; other backslashes are literal.
    assert_eq!(
        split(b"ECHO 'it\\'s \\n \"x\"'\n").unwrap(),
        args(&[b"ECHO", b"it's \\n \"x\""])
    );
}

#[test]
fn empty_quotes_make_an_empty_argument() {
    // `""` and `''` are present, empty arguments.
    assert_eq!(split(b"SET k \"\"\n").unwrap(), args(&[b"SET", b"k", b""]));
    assert_eq!(split(b"SET k ''\n").unwrap(), args(&[b"SET", b"k", b""]));
}

#[test]
fn quote_may_open_mid_token_but_must_close_at_its_end() {
    // `foo"bar"` is one argument; `"foo"bar` is an error, as in Redis.
    assert_eq!(split(b"foo\"bar baz\"\n").unwrap(), args(&[b"foobar baz"]));
    assert_eq!(split(b"\"foo\"bar\n"), Err(ProtocolError::UnbalancedQuotes));
    assert_eq!(split(b"'foo'bar\n"), Err(ProtocolError::UnbalancedQuotes));
}

#[test]
fn unbalanced_quotes_are_rejected_with_redis_text() {
    // An unterminated quote on a complete line is a protocol error.
    for line in [&b"SET k \"v\n"[..], b"SET k 'v\r\n", b"\"\\\"\n", b"'\\'\n"] {
        let error = split(line).unwrap_err();
        assert_eq!(error, ProtocolError::UnbalancedQuotes, "{line:?}");
        assert_eq!(
            error.to_string(),
            "Protocol error: unbalanced quotes in request"
        );
    }
}

#[test]
fn closing_quote_may_be_followed_by_any_c_space() {
    // After a closing quote, vertical tab and form feed count as whitespace,
    // but unquoted tokens only end at space, tab, CR and LF.
    assert_eq!(split(b"\"a\"\x0bb\n").unwrap(), args(&[b"a", b"b"]));
    assert_eq!(split(b"a\x0bb\x0cc\n").unwrap(), args(&[b"a\x0bb\x0cc"]));
    assert_eq!(split(b"a\rb\n").unwrap(), args(&[b"a", b"b"]));
}

#[test]
fn nul_byte_ends_the_line_content() {
    // Redis splits a C string, so everything after a NUL is ignored.
    assert_eq!(
        split(b"SET k v\0junk \"\n").unwrap(),
        args(&[b"SET", b"k", b"v"])
    );
    assert_eq!(
        split(b"\"abc\0def\"\n"),
        Err(ProtocolError::UnbalancedQuotes)
    );
}

#[test]
fn blank_lines_are_skipped() {
    // Empty or whitespace-only lines are consumed without producing a request.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"\r\n\n   \t\r\nPING\r\n\r\n"[..]);
    let request = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(request.args, vec![bytes::Bytes::from_static(b"PING")]);
    assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    assert!(buf.is_empty());
}

#[test]
fn inline_and_multibulk_can_be_mixed_in_a_pipeline() {
    // Each request picks its own form from its first byte.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"PING\r\n*1\r\n$4\r\nPING\r\nECHO hi\n"[..]);
    let mut seen = Vec::new();
    while let Some(request) = decoder.decode(&mut buf).unwrap() {
        seen.push(request.args.len());
    }
    assert_eq!(seen, vec![1, 1, 2]);
}

#[test]
fn line_over_the_inline_limit_is_rejected() {
    // 64 KiB without a newline is `too big inline request`; a line that
    // fits is accepted.
    let mut long = vec![b'a'; 64 * 1024 + 1];
    let error = split(&long).unwrap_err();
    assert_eq!(error, ProtocolError::InlineTooBig);
    assert_eq!(error.to_string(), "Protocol error: too big inline request");
    long.truncate(64 * 1024);
    assert_eq!(split(&long).unwrap(), None);
    long.push(b'\n');
    assert_eq!(split(&long).unwrap().unwrap()[0].len(), 64 * 1024);
}

#[test]
fn unquoted_arguments_share_the_read_buffer() {
    // Unquoted inline arguments are slices of the received bytes.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"GET key\r\n"[..]);
    let base = buf.as_ptr() as usize;
    let request = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(request.args[1].as_ptr() as usize, base + 4);
}
