//! Property tests: decoding is independent of how bytes are split into reads.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use weft_resp::{Limits, ProtocolError, Request, RequestDecoder, parse_request, write_request};

/// Feeds `input` to one decoder in pieces ending at `cuts` (sorted, deduped
/// offsets), draining complete requests after each piece; stops at the first
/// error. Also checks that the buffer never grows by anything but appends.
fn decode_in_pieces(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> (Vec<Request>, Option<ProtocolError>) {
    let mut decoder = RequestDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain(std::iter::once(input.len())) {
        let end = end.clamp(start, input.len());
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(request)) => {
                    assert!(buf.len() < before, "a request must consume bytes");
                    requests.push(request);
                }
                Ok(None) => break,
                Err(error) => return (requests, Some(error)),
            }
        }
    }
    (requests, None)
}

fn to_request(args: &[Vec<u8>]) -> Request {
    Request {
        args: args.iter().map(|a| Bytes::copy_from_slice(a)).collect(),
    }
}

/// Encodes `args` as an inline line, double-quoting every argument and
/// escaping every byte that is not plain ASCII text.
fn encode_inline(args: &[Vec<u8>]) -> Vec<u8> {
    let mut line = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        line.push(b'"');
        for &byte in arg {
            match byte {
                b'"' | b'\\' => line.extend_from_slice(&[b'\\', byte]),
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b' ' | b'\'' => line.push(byte),
                _ => line.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
            }
        }
        line.push(b'"');
    }
    line.extend_from_slice(b"\r\n");
    line
}

fn arb_requests() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    prop::collection::vec(
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6),
        1..8,
    )
}

fn arb_cuts(max: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max, 0..24).prop_map(|mut cuts| {
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    })
}

/// Bytes built from RESP-ish fragments so that framing paths are exercised
/// far more often than uniformly random bytes would.
fn arb_wire() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(b"*".to_vec()),
        Just(b"$".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"'".to_vec()),
        Just(b"\\".to_vec()),
        Just(b" ".to_vec()),
        Just(b"-".to_vec()),
        Just(b"\0".to_vec()),
        (0u32..40).prop_map(|n| n.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 1..6),
        Just(b"PING".to_vec()),
    ];
    prop::collection::vec(fragment, 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn multibulk_pipelines_survive_any_split(requests in arb_requests(), cuts in arb_cuts(2048)) {
        // Encoded requests, concatenated and split anywhere, decode to exactly
        // the original requests with nothing left over.
        let mut wire = BytesMut::new();
        for args in &requests {
            write_request(&mut wire, args);
        }
        let (decoded, error) = decode_in_pieces(&wire, &cuts, Limits::default());
        prop_assert_eq!(error, None);
        let expected: Vec<Request> = requests.iter().map(|args| to_request(args)).collect();
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn quoted_inline_requests_survive_any_split(requests in arb_requests(), cuts in arb_cuts(4096)) {
        // Inline requests with every argument quoted and escaped decode to the
        // original bytes however they are split.
        let wire: Vec<u8> = requests.iter().flat_map(|args| encode_inline(args)).collect();
        let (decoded, error) = decode_in_pieces(&wire, &cuts, Limits::default());
        prop_assert_eq!(error, None);
        let expected: Vec<Request> = requests.iter().map(|args| to_request(args)).collect();
        prop_assert_eq!(decoded, expected);
    }

    #[test]
    fn arbitrary_bytes_decode_the_same_however_split(wire in arb_wire(), cuts in arb_cuts(256)) {
        // For any input, including malformed input and tight limits, the
        // requests and the final error do not depend on the read boundaries,
        // and the stateless parser agrees on the first request.
        let limits = Limits { bulk_bytes_max: 16, multibulk_length_max: 8, inline_bytes_max: 24 };
        let whole = decode_in_pieces(&wire, &[], limits);
        let pieces = decode_in_pieces(&wire, &cuts, limits);
        prop_assert_eq!(&whole, &pieces);
        match parse_request(&wire, &limits) {
            Ok(Some((first, consumed))) => {
                prop_assert!(consumed <= wire.len());
                prop_assert_eq!(Some(&first), whole.0.first());
            }
            Ok(None) => prop_assert!(whole.0.is_empty() && whole.1.is_none()),
            Err(error) => {
                prop_assert!(whole.0.is_empty());
                prop_assert_eq!(Some(error), whole.1);
            }
        }
    }
}
