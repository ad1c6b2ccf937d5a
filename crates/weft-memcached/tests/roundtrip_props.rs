//! Property tests: requests survive writing and decoding; arbitrary bytes never panic either
//! decoder, and the verdict on them does not depend on how they are split into reads.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use weft_memcached::binary::{self, BinaryCommand, StoreMode as BinaryStore};
use weft_memcached::text::{self, GetKind, Keys, StoreMode, TextCommand};
use weft_memcached::{
    BinaryDecoder, BinaryProtocolError, BinaryRequest, Limits, TextDecoder, TextProtocolError,
    TextRequest,
};

/// Fragments of valid requests, to reach the deeper parsing paths more often than
/// random bytes do.
const NEAR_VALID_PARTS: &[&[u8]] = &[
    b"set ",
    b"get ",
    b"gat ",
    b"cas ",
    b"incr ",
    b"delete ",
    b"flush_all ",
    b"noreply",
    b" ",
    b"\r\n",
    b"\n",
    b"0 ",
    b"5 ",
    b"-1 ",
    b"k ",
    b"abcde",
    b"\0",
];

/// Small limits so random inputs reach every limit.
const SMALL: Limits = Limits {
    item_bytes_max: 128,
    line_bytes_max: 48,
    multiget_line_bytes_max: 96,
};

fn text_key() -> impl Strategy<Value = Bytes> {
    // Any byte but space, CR, LF and NUL (the text protocol's separators).
    proptest::collection::vec(
        any::<u8>().prop_filter("separator", |b| !matches!(b, b' ' | b'\r' | b'\n' | 0)),
        1..=250,
    )
    .prop_map(Bytes::from)
}

fn value() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from)
}

fn store_mode() -> impl Strategy<Value = StoreMode> {
    prop_oneof![
        Just(StoreMode::Set),
        Just(StoreMode::Add),
        Just(StoreMode::Replace),
        Just(StoreMode::Append),
        Just(StoreMode::Prepend),
        any::<u64>().prop_map(StoreMode::Cas),
    ]
}

fn text_request() -> impl Strategy<Value = TextRequest> {
    let command = prop_oneof![
        (
            prop_oneof![
                Just(GetKind::Get),
                Just(GetKind::Gets),
                any::<i32>().prop_map(GetKind::Gat),
                any::<i32>().prop_map(GetKind::Gats)
            ],
            proptest::collection::vec(text_key(), 1..5)
        )
            .prop_map(|(kind, keys)| TextCommand::Get {
                kind,
                keys: Keys::from_keys(&keys)
            }),
        (
            store_mode(),
            text_key(),
            any::<u32>(),
            any::<i32>(),
            value()
        )
            .prop_map(|(mode, key, flags, exptime, value)| TextCommand::Store {
                mode,
                key,
                flags,
                exptime,
                value
            }),
        text_key().prop_map(|key| TextCommand::Delete { key }),
        (any::<bool>(), text_key(), any::<u64>())
            .prop_map(|(incr, key, delta)| TextCommand::Arithmetic { incr, key, delta }),
        (text_key(), any::<i32>()).prop_map(|(key, exptime)| TextCommand::Touch { key, exptime }),
        any::<i32>().prop_map(|delay| TextCommand::FlushAll { delay }),
        Just(TextCommand::Version),
        any::<u32>().prop_map(|level| TextCommand::Verbosity { level }),
        Just(TextCommand::Quit),
    ];
    (command, any::<bool>()).prop_map(|(command, noreply)| {
        // Only commands that take `noreply` carry it.
        let takes_noreply = !matches!(
            command,
            TextCommand::Get { .. } | TextCommand::Version | TextCommand::Quit
        );
        TextRequest {
            command,
            noreply: noreply && takes_noreply,
        }
    })
}

fn binary_key() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 1..=250).prop_map(Bytes::from)
}

fn binary_command() -> impl Strategy<Value = BinaryCommand> {
    prop_oneof![
        (binary_key(), any::<bool>(), any::<bool>()).prop_map(|(key, with_key, quiet)| {
            BinaryCommand::Get {
                key,
                with_key,
                quiet,
            }
        }),
        (binary_key(), any::<u32>())
            .prop_map(|(key, exptime)| BinaryCommand::Touch { key, exptime }),
        (binary_key(), any::<u32>(), any::<bool>(), any::<bool>()).prop_map(
            |(key, exptime, with_key, quiet)| BinaryCommand::GetAndTouch {
                key,
                exptime,
                with_key,
                quiet
            }
        ),
        (
            prop_oneof![
                Just(BinaryStore::Set),
                Just(BinaryStore::Add),
                Just(BinaryStore::Replace)
            ],
            binary_key(),
            value(),
            any::<u32>(),
            any::<u32>(),
            any::<bool>()
        )
            .prop_map(
                |(mode, key, value, flags, exptime, quiet)| BinaryCommand::Store {
                    mode,
                    key,
                    value,
                    flags,
                    exptime,
                    quiet
                }
            ),
        (any::<bool>(), binary_key(), value(), any::<bool>()).prop_map(
            |(append, key, value, quiet)| BinaryCommand::Concat {
                append,
                key,
                value,
                quiet
            }
        ),
        (binary_key(), any::<bool>()).prop_map(|(key, quiet)| BinaryCommand::Delete { key, quiet }),
        (
            any::<bool>(),
            binary_key(),
            any::<u64>(),
            any::<u64>(),
            any::<u32>(),
            any::<bool>()
        )
            .prop_map(|(incr, key, delta, initial, exptime, quiet)| {
                BinaryCommand::Arithmetic {
                    incr,
                    key,
                    delta,
                    initial,
                    exptime,
                    quiet,
                }
            }),
        any::<bool>().prop_map(|quiet| BinaryCommand::Quit { quiet }),
        (proptest::option::of(any::<u32>()), any::<bool>())
            .prop_map(|(exptime, quiet)| BinaryCommand::Flush { exptime, quiet }),
        Just(BinaryCommand::Noop),
        Just(BinaryCommand::Version),
        proptest::collection::vec(any::<u8>(), 0..=250).prop_map(|group| BinaryCommand::Stat {
            group: Bytes::from(group)
        }),
        any::<u32>().prop_map(|level| BinaryCommand::Verbosity { level }),
    ]
}

/// Feeds `input` in pieces ending at `cuts`; returns the text requests and the final error.
fn text_in_pieces(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> (Vec<TextRequest>, Option<TextProtocolError>) {
    let mut decoder = TextDecoder::new(limits);
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

fn binary_in_pieces(
    input: &[u8],
    cuts: &[usize],
    limits: Limits,
) -> (Vec<BinaryRequest>, Option<BinaryProtocolError>) {
    let mut decoder = BinaryDecoder::new(limits);
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

fn sorted(mut cuts: Vec<usize>) -> Vec<usize> {
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

proptest! {
    // Proves every text request a client can send decodes back to itself, however split.
    #[test]
    fn text_requests_round_trip(requests in proptest::collection::vec(text_request(), 1..6), cuts in proptest::collection::vec(0usize..2000, 0..8)) {
        let mut wire = BytesMut::new();
        for request in &requests {
            text::write_request(&mut wire, request).unwrap();
        }
        let (decoded, error) = text_in_pieces(&wire, &sorted(cuts), Limits::default());
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, requests);
    }

    // Proves every binary request decodes back to itself, however split.
    #[test]
    fn binary_requests_round_trip(commands in proptest::collection::vec((binary_command(), any::<u32>(), any::<u64>()), 1..6), cuts in proptest::collection::vec(0usize..3000, 0..8)) {
        let requests: Vec<BinaryRequest> = commands
            .into_iter()
            .map(|(command, opaque, cas)| BinaryRequest::new(command, opaque, cas).unwrap())
            .collect();
        let mut wire = BytesMut::new();
        for request in &requests {
            binary::write_request(&mut wire, request).unwrap();
        }
        let (decoded, error) = binary_in_pieces(&wire, &sorted(cuts), Limits::default());
        prop_assert_eq!(error, None);
        prop_assert_eq!(decoded, requests);
    }

    // Proves arbitrary bytes never panic the text decoder and its verdict ignores read sizes.
    #[test]
    fn text_decoder_never_panics(input in proptest::collection::vec(any::<u8>(), 0..600), cuts in proptest::collection::vec(0usize..600, 0..12), small in any::<bool>()) {
        let limits = if small { SMALL } else { Limits::default() };
        let whole = text_in_pieces(&input, &[], limits);
        prop_assert_eq!(text_in_pieces(&input, &sorted(cuts), limits), whole);
    }

    // Proves mostly-valid text (command words, numbers, CRLF) never panics and is split-independent.
    #[test]
    fn text_decoder_survives_near_valid_input(parts in proptest::collection::vec(proptest::sample::select(NEAR_VALID_PARTS), 0..60), cuts in proptest::collection::vec(0usize..400, 0..12)) {
        let input: Vec<u8> = parts.concat();
        let whole = text_in_pieces(&input, &[], SMALL);
        prop_assert_eq!(text_in_pieces(&input, &sorted(cuts), SMALL), whole);
    }

    // Proves arbitrary bytes behind a request magic never panic the binary decoder and its
    // verdict ignores read sizes.
    #[test]
    fn binary_decoder_never_panics(mut input in proptest::collection::vec(any::<u8>(), 0..600), cuts in proptest::collection::vec(0usize..600, 0..12), small in any::<bool>()) {
        if let Some(first) = input.first_mut() {
            *first = 0x80;
        }
        let limits = if small { SMALL } else { Limits::default() };
        let whole = binary_in_pieces(&input, &[], limits);
        prop_assert_eq!(binary_in_pieces(&input, &sorted(cuts), limits), whole);
    }
}
