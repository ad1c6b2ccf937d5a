//! Multibulk request framing: complete, partial, pipelined and malformed input.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use weft_resp::{Limits, ProtocolError, Request, RequestDecoder, parse_request, write_request};

fn req(args: &[&[u8]]) -> Request {
    Request {
        args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
    }
}

/// Decodes everything in `input` with one decoder; returns the requests and
/// the error that stopped decoding, if any.
fn decode_all(input: &[u8]) -> (Vec<Request>, Option<ProtocolError>, BytesMut) {
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(request)) => out.push(request),
            Ok(None) => return (out, None, buf),
            Err(error) => return (out, Some(error), buf),
        }
    }
}

fn decode_error(input: &[u8]) -> ProtocolError {
    let (_, error, _) = decode_all(input);
    error.unwrap()
}

#[test]
fn decodes_a_simple_multibulk_request() {
    // A well-formed request comes out whole and the buffer is fully consumed.
    let (requests, error, rest) = decode_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n");
    assert_eq!(requests, vec![req(&[b"SET", b"k", b"value"])]);
    assert_eq!(error, None);
    assert!(rest.is_empty());
}

#[test]
fn pipelined_requests_in_one_buffer_come_out_in_order() {
    // Several requests in one read are returned one per call, in order.
    let mut input = BytesMut::new();
    write_request(&mut input, &["PING"]);
    write_request(&mut input, &["GET", "a"]);
    write_request(&mut input, &["DEL", "a", "b", "c"]);
    let (requests, error, rest) = decode_all(&input);
    assert_eq!(
        requests,
        vec![
            req(&[b"PING"]),
            req(&[b"GET", b"a"]),
            req(&[b"DEL", b"a", b"b", b"c"])
        ]
    );
    assert_eq!(error, None);
    assert!(rest.is_empty());
}

#[test]
fn bulk_payload_is_binary_safe() {
    // CR, LF, NUL and `*`/`$` inside a payload are data, not framing.
    let value: &[u8] = b"a\r\nb\0*2\r\n$1\r\n\xff";
    let mut input = BytesMut::new();
    write_request(&mut input, &[&b"SET"[..], b"k", value]);
    let (requests, error, _) = decode_all(&input);
    assert_eq!(requests, vec![req(&[b"SET", b"k", value])]);
    assert_eq!(error, None);
}

#[test]
fn empty_bulk_is_an_empty_argument() {
    // `$0\r\n\r\n` is a present, empty argument.
    let (requests, _, _) = decode_all(b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n");
    assert_eq!(requests, vec![req(&[b"GET", b""])]);
}

#[test]
fn empty_and_negative_multibulk_counts_are_skipped() {
    // `*0` and `*-1` (any count <= 0) are consumed silently, as Redis does.
    let (requests, error, rest) = decode_all(b"*0\r\n*-1\r\n*-7\r\n*1\r\n$4\r\nPING\r\n*0\r\n");
    assert_eq!(requests, vec![req(&[b"PING"])]);
    assert_eq!(error, None);
    assert!(rest.is_empty());
}

#[test]
fn every_strict_prefix_is_incomplete_not_an_error() {
    // Truncating a valid pipeline at any byte offset yields the complete
    // requests before the cut and then Ok(None), never an error or panic.
    let mut input = BytesMut::new();
    write_request(&mut input, &[&b"SET"[..], b"key", b"v\r\nal"]);
    write_request(&mut input, &[&b"GET"[..], b""]);
    input.extend_from_slice(b"PING\r\n");
    input.extend_from_slice(b"*0\r\n");
    for cut in 0..input.len() {
        let (requests, error, _) = decode_all(&input[..cut]);
        assert_eq!(error, None, "cut at {cut}");
        assert!(requests.len() <= 3, "cut at {cut}");
        let first = parse_request(&input[..cut], &Limits::default()).unwrap();
        assert_eq!(first.is_some(), !requests.is_empty(), "cut at {cut}");
    }
}

#[test]
fn byte_at_a_time_feeding_yields_the_same_requests() {
    // Feeding one byte per call (each call extending the same buffer) gives
    // exactly the requests a single big read gives.
    let mut input = BytesMut::new();
    write_request(&mut input, &[&b"SET"[..], b"k", b"\r\n\r\n"]);
    write_request(&mut input, &[&b"ECHO"[..], b"hello"]);
    input.extend_from_slice(b"ECHO \"in\\x41line\"\r\n");
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    for &byte in input.iter() {
        buf.extend_from_slice(&[byte]);
        while let Some(request) = decoder.decode(&mut buf).unwrap() {
            requests.push(request);
        }
    }
    assert_eq!(
        requests,
        vec![
            req(&[b"SET", b"k", b"\r\n\r\n"]),
            req(&[b"ECHO", b"hello"]),
            req(&[b"ECHO", b"inAline"])
        ]
    );
    assert!(buf.is_empty());
    assert!(!decoder.is_mid_request());
}

#[test]
fn decoder_remembers_a_partial_request() {
    // After Ok(None) mid-request the decoder reports it is mid-request and
    // leaves the partial bytes in the buffer.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1"[..]);
    assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    assert!(decoder.is_mid_request());
    assert_eq!(buf.len(), 15);
    buf.extend_from_slice(b"\r\nk\r\n");
    assert_eq!(
        decoder.decode(&mut buf).unwrap(),
        Some(req(&[b"GET", b"k"]))
    );
    assert!(buf.is_empty());
}

#[test]
fn large_bulk_in_small_pieces_is_linear() {
    // A 4 MiB bulk fed in 64-byte reads completes quickly: the decoder does
    // not rescan the buffered payload on every read (that would be ~10^11
    // byte visits here and hang the test).
    let payload = vec![b'x'; 4 * 1024 * 1024];
    let mut input = BytesMut::new();
    write_request(&mut input, &[&b"SET"[..], b"k", &payload]);
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::with_capacity(input.len());
    let mut got = None;
    for chunk in input.chunks(64) {
        buf.extend_from_slice(chunk);
        if let Some(request) = decoder.decode(&mut buf).unwrap() {
            got = Some(request);
        }
    }
    let got = got.unwrap();
    assert_eq!(got.args[2].len(), payload.len());
}

#[test]
fn long_header_line_in_small_pieces_is_linear() {
    // A header line approaching the 64 KiB limit, fed a byte at a time, is
    // searched once per byte (a rescan per read would be ~2*10^9 visits).
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::new();
    buf.extend_from_slice(b"*");
    for _ in 0..60_000 {
        buf.extend_from_slice(b"1");
        assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    }
    buf.extend_from_slice(b"\r\n");
    assert_eq!(
        decoder.decode(&mut buf),
        Err(ProtocolError::InvalidMultibulkLength)
    );
}

#[test]
fn non_numeric_multibulk_count_is_rejected() {
    // Counts that are not strict integers fail with Redis's text.
    for input in [
        &b"*x\r\n"[..],
        b"*\r\n",
        b"*1x\r\n",
        b"*+1\r\n",
        b"*01\r\n",
        b"* 1\r\n",
    ] {
        let error = decode_error(input);
        assert_eq!(error, ProtocolError::InvalidMultibulkLength, "{input:?}");
        assert_eq!(
            error.to_string(),
            "Protocol error: invalid multibulk length"
        );
    }
}

#[test]
fn multibulk_count_over_the_limit_is_rejected() {
    // More than 1024*1024 declared arguments is an invalid multibulk length.
    assert_eq!(
        decode_error(b"*1048577\r\n"),
        ProtocolError::InvalidMultibulkLength
    );
    let (_, error, _) = decode_all(b"*1048576\r\n");
    assert_eq!(error, None);
    assert_eq!(
        decode_error(b"*99999999999999999999\r\n"),
        ProtocolError::InvalidMultibulkLength
    );
}

#[test]
fn bad_bulk_lengths_are_rejected() {
    // Negative, non-numeric, non-strict and oversize bulk lengths all fail
    // with `invalid bulk length`.
    for header in [
        &b"$-1"[..],
        b"$-5",
        b"$abc",
        b"$",
        b"$+3",
        b"$03",
        b"$3 ",
        b"$536870913",
        b"$99999999999999999999",
    ] {
        let mut input = b"*1\r\n".to_vec();
        input.extend_from_slice(header);
        input.extend_from_slice(b"\r\nabc\r\n");
        let error = decode_error(&input);
        assert_eq!(error, ProtocolError::InvalidBulkLength, "{header:?}");
        assert_eq!(error.to_string(), "Protocol error: invalid bulk length");
    }
}

#[test]
fn bulk_length_at_the_limit_is_accepted_and_limit_is_configurable() {
    // The default limit is 512 MiB inclusive; a custom limit applies exactly.
    let (_, error, _) = decode_all(b"*1\r\n$536870912\r\n");
    assert_eq!(error, None);
    let limits = Limits {
        bulk_bytes_max: 3,
        ..Limits::default()
    };
    let mut decoder = RequestDecoder::new(limits);
    let mut buf = BytesMut::from(&b"*1\r\n$3\r\nabc\r\n*1\r\n$4\r\nabcd\r\n"[..]);
    assert_eq!(decoder.decode(&mut buf).unwrap(), Some(req(&[b"abc"])));
    assert_eq!(
        decoder.decode(&mut buf),
        Err(ProtocolError::InvalidBulkLength)
    );
}

#[test]
fn non_dollar_line_inside_multibulk_is_rejected() {
    // A bulk header must start with `$`; Redis names the byte it got.
    let error = decode_error(b"*2\r\n$3\r\nGET\r\n:1\r\n");
    assert_eq!(error, ProtocolError::ExpectedDollar(b':'));
    assert_eq!(error.to_string(), "Protocol error: expected '$', got ':'");
    // An empty line reports the CR, rendered as a space like Redis does.
    let error = decode_error(b"*1\r\n\r\n");
    assert_eq!(error, ProtocolError::ExpectedDollar(b'\r'));
    assert_eq!(error.to_string(), "Protocol error: expected '$', got ' '");
}

#[test]
fn error_reply_is_byte_exact() {
    // write_reply produces the `-ERR ...` line Redis sends, raw byte included.
    let mut out = BytesMut::new();
    ProtocolError::ExpectedDollar(0xff).write_reply(&mut out);
    assert_eq!(
        &out[..],
        b"-ERR Protocol error: expected '$', got '\xff'\r\n"
    );
    let mut out = BytesMut::new();
    ProtocolError::InvalidBulkLength.write_reply(&mut out);
    assert_eq!(&out[..], b"-ERR Protocol error: invalid bulk length\r\n");
}

#[test]
fn overlong_header_lines_are_rejected() {
    // Header lines without CR beyond 64 KiB fail with Redis's "too big" texts.
    let mut input = b"*".to_vec();
    input.extend(std::iter::repeat_n(b'1', 64 * 1024 + 1));
    let error = decode_error(&input);
    assert_eq!(error, ProtocolError::MultibulkCountTooBig);
    assert_eq!(
        error.to_string(),
        "Protocol error: too big mbulk count string"
    );

    let mut input = b"*1\r\n$".to_vec();
    input.extend(std::iter::repeat_n(b'1', 64 * 1024 + 1));
    let error = decode_error(&input);
    assert_eq!(error, ProtocolError::BulkCountTooBig);
    assert_eq!(
        error.to_string(),
        "Protocol error: too big bulk count string"
    );
}

#[test]
fn junk_after_a_complete_request_is_left_for_the_next_call() {
    // Bytes after a complete request are not consumed with it: they are the
    // next request (here an incomplete inline one, then a protocol error).
    let (requests, error, rest) = decode_all(b"*1\r\n$4\r\nPING\r\nxyz");
    assert_eq!(requests, vec![req(&[b"PING"])]);
    assert_eq!(error, None);
    assert_eq!(&rest[..], b"xyz");
    let (requests, error, _) = decode_all(b"*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPINGxx$");
    assert_eq!(
        requests.len(),
        2,
        "Redis skips the two bytes after a payload unchecked"
    );
    assert_eq!(error, None);
    // A payload longer than declared desyncs exactly as in Redis: the rest is
    // read as the next (inline) request, or caught by the next `$` check.
    let (requests, error, _) = decode_all(b"*1\r\n$3\r\nPINGPONG\r\n");
    assert_eq!(requests, vec![req(&[b"PIN"]), req(&[b"ONG"])]);
    assert_eq!(error, None);
    let (_, error, _) = decode_all(b"*2\r\n$3\r\nPINGPONG\r\n");
    assert_eq!(error, Some(ProtocolError::ExpectedDollar(b'O')));
}

#[test]
fn decoder_resets_after_an_error() {
    // After an error the decoder starts fresh on whatever it is given next.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*1\r\n$x\r\n"[..]);
    assert!(decoder.decode(&mut buf).is_err());
    assert!(!decoder.is_mid_request());
    let mut fresh = BytesMut::from(&b"*1\r\n$4\r\nPING\r\n"[..]);
    assert_eq!(decoder.decode(&mut fresh).unwrap(), Some(req(&[b"PING"])));
}

#[test]
fn swapped_buffer_does_not_panic() {
    // A caller breaking the append-only contract gets garbage-in results, not
    // an out-of-bounds panic.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1"[..]);
    assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    let mut shorter = BytesMut::from(&b"PING\r\n"[..]);
    assert_eq!(decoder.decode(&mut shorter).unwrap(), Some(req(&[b"PING"])));
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$1"[..]);
    assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    let mut longer = BytesMut::from(&b"x\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n$1\r\n"[..]);
    let _ = decoder.decode(&mut longer);
}

#[test]
fn parse_request_reports_consumed_bytes_including_skipped_empties() {
    // The stateless parser counts skipped empty requests in `consumed`.
    let input = b"*0\r\n\r\n*1\r\n$4\r\nPING\r\nGET";
    let (request, consumed) = parse_request(input, &Limits::default()).unwrap().unwrap();
    assert_eq!(request, req(&[b"PING"]));
    assert_eq!(consumed, input.len() - 3);
}

#[test]
fn arguments_share_the_read_buffer() {
    // Multibulk arguments are slices of the received bytes, not copies.
    let mut decoder = RequestDecoder::default();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"[..]);
    let base = buf.as_ptr() as usize;
    let request = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(request.args[0].as_ptr() as usize, base + 8);
    assert_eq!(request.args[1].as_ptr() as usize, base + 17);
    assert_eq!(request.command().unwrap(), &Bytes::from_static(b"GET"));
}
