//! Property tests: every request the encoder writes, at every version, decodes back to the
//! same header and operation, whether the bytes arrive at once or in pieces.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use weft_hotrod::{
    Decoder, Expiration, Factory, Frame, Lifetime, MediaType, Request, RequestHeader, encode, flags,
};

const THIRTY_DAYS: Duration = Duration::from_secs(30 * 24 * 3600);
const YEAR_SECS: u64 = 365 * 24 * 3600;

fn arb_bytes() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..40).prop_map(Bytes::from)
}

fn arb_text() -> impl Strategy<Value = String> {
    ".{0,12}"
}

fn arb_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0..1000u64).prop_map(Duration::from_millis),
        (1..100 * YEAR_SECS).prop_map(Duration::from_secs),
        (0..100 * YEAR_SECS, 0..1_000_000_000u32).prop_map(|(s, n)| Duration::new(s, n)),
        (1..1000u64).prop_map(|m| Duration::from_secs(m * 60)),
        (1..1000u64).prop_map(|h| Duration::from_secs(h * 3600)),
        (1..20_000u64).prop_map(|d| Duration::from_secs(d * 86_400)),
        // Around the 30-day line that pre-3.0 protocols read as "a Unix time".
        (THIRTY_DAYS.as_secs() - 2..=THIRTY_DAYS.as_secs() + 2).prop_map(Duration::from_secs),
    ]
}

fn arb_lifetime() -> impl Strategy<Value = Lifetime> {
    prop_oneof![
        Just(Lifetime::Default),
        Just(Lifetime::Infinite),
        arb_duration().prop_map(Lifetime::After),
        arb_duration().prop_map(Lifetime::Until),
    ]
}

fn arb_expiration() -> impl Strategy<Value = Expiration> {
    (arb_lifetime(), arb_lifetime())
        .prop_map(|(lifespan, max_idle)| Expiration { lifespan, max_idle })
}

fn arb_params() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec((arb_text(), arb_text()), 0..3)
}

fn arb_media_type() -> impl Strategy<Value = MediaType> {
    prop_oneof![
        Just(MediaType::Unspecified),
        (0..20u32, arb_params()).prop_map(|(id, params)| MediaType::Predefined { id, params }),
        (any::<u32>(), arb_params()).prop_map(|(id, params)| MediaType::Predefined { id, params }),
        (arb_text(), arb_params()).prop_map(|(name, params)| MediaType::Custom { name, params }),
    ]
}

fn arb_factory() -> impl Strategy<Value = Option<Factory<Bytes>>> {
    prop::option::of(
        (arb_text(), prop::collection::vec(arb_bytes(), 0..4))
            .prop_map(|(name, params)| Factory { name, params }),
    )
}

fn arb_request() -> impl Strategy<Value = Request<Bytes>> {
    let key = arb_bytes;
    prop_oneof![
        Just(Request::Ping),
        key().prop_map(|key| Request::Get { key }),
        key().prop_map(|key| Request::GetWithVersion { key }),
        key().prop_map(|key| Request::GetWithMetadata { key }),
        key().prop_map(|key| Request::ContainsKey { key }),
        (key(), arb_expiration(), arb_bytes()).prop_map(|(key, expiration, value)| {
            Request::Put {
                key,
                expiration,
                value,
            }
        }),
        (key(), arb_expiration(), arb_bytes()).prop_map(|(key, expiration, value)| {
            Request::PutIfAbsent {
                key,
                expiration,
                value,
            }
        }),
        (key(), arb_expiration(), arb_bytes()).prop_map(|(key, expiration, value)| {
            Request::Replace {
                key,
                expiration,
                value,
            }
        }),
        (key(), arb_expiration(), any::<u64>(), arb_bytes()).prop_map(
            |(key, expiration, version, value)| Request::ReplaceIfUnmodified {
                key,
                expiration,
                version,
                value,
            }
        ),
        key().prop_map(|key| Request::Remove { key }),
        (key(), any::<u64>())
            .prop_map(|(key, version)| Request::RemoveIfUnmodified { key, version }),
        Just(Request::Clear),
        Just(Request::Size),
        Just(Request::Stats),
        (
            arb_expiration(),
            prop::collection::vec((key(), arb_bytes()), 0..6)
        )
            .prop_map(|(expiration, entries)| Request::PutAll {
                expiration,
                entries
            }),
        prop::collection::vec(key(), 0..6).prop_map(|keys| Request::GetAll { keys }),
        any::<u32>().prop_map(|count| Request::BulkGet { count }),
        any::<u32>().prop_map(|scope| Request::BulkGetKeys { scope }),
        (
            prop::option::of(arb_bytes()),
            arb_factory(),
            any::<u32>(),
            any::<bool>()
        )
            .prop_map(|(segments, filter, batch_size, metadata)| {
                Request::IterationStart {
                    segments,
                    filter,
                    batch_size,
                    metadata,
                }
            }),
        arb_text().prop_map(|id| Request::IterationNext { id }),
        arb_text().prop_map(|id| Request::IterationEnd { id }),
        (
            arb_bytes(),
            any::<bool>(),
            arb_factory(),
            arb_factory(),
            any::<bool>(),
            any::<u32>()
        )
            .prop_map(
                |(listener_id, include_current_state, filter, converter, raw_data, interests)| {
                    Request::AddClientListener {
                        listener_id,
                        include_current_state,
                        filter,
                        converter,
                        raw_data,
                        interests,
                    }
                }
            ),
        arb_bytes().prop_map(|listener_id| Request::RemoveClientListener { listener_id }),
        (arb_bytes(), any::<u32>()).prop_map(|(listener_id, bloom_bits)| {
            Request::AddBloomFilterListener {
                listener_id,
                bloom_bits,
            }
        }),
        arb_bytes().prop_map(|bits| Request::UpdateBloomFilter { bits }),
        (
            arb_text(),
            prop::collection::vec((arb_text(), arb_bytes()), 0..4)
        )
            .prop_map(|(task, params)| Request::Exec { task, params }),
        arb_bytes().prop_map(|query| Request::Query { query }),
        Just(Request::AuthMechList),
        (arb_text(), arb_bytes()).prop_map(|(mechanism, response)| Request::Auth {
            mechanism,
            response
        }),
        (key(), any::<u32>()).prop_map(|(key, offset)| Request::GetStream { key, offset }),
    ]
}

fn arb_header() -> impl Strategy<Value = RequestHeader> {
    (
        any::<u64>(),
        20..=41u8,
        arb_text(),
        any::<u32>(),
        any::<u8>(),
        any::<i32>(),
        arb_media_type(),
        arb_media_type(),
    )
        .prop_map(
            |(
                message_id,
                version,
                cache_name,
                flags,
                intelligence,
                topology_id,
                key_type,
                value_type,
            )| RequestHeader {
                message_id,
                version,
                cache_name,
                flags,
                intelligence,
                topology_id,
                key_type,
                value_type,
            },
        )
}

/// A header and a request that exists in its version (get-stream was dropped in 4.1).
fn arb_frame() -> impl Strategy<Value = (RequestHeader, Request<Bytes>)> {
    (arb_header(), arb_request()).prop_map(|(mut header, request)| {
        if matches!(request, Request::GetStream { .. }) {
            header.version = header.version.min(40);
        }
        (header, request)
    })
}

/// A lifetime as the decoder reports it: zero is the default; before 2.2 only whole seconds
/// (up to `i32::MAX`) travel; before 3.0 more than 30 days is a Unix time, from 3.0 a
/// duration.
fn expected_lifetime(lifetime: Lifetime, version: u8) -> Lifetime {
    let duration = match lifetime {
        Lifetime::Default | Lifetime::Infinite => return lifetime,
        Lifetime::After(duration) | Lifetime::Until(duration) => duration,
    };
    let duration = if version < 22 {
        Duration::from_secs(duration.as_secs().min(i32::MAX as u64))
    } else {
        duration
    };
    if duration.is_zero() {
        Lifetime::Default
    } else if version < 30 && duration > THIRTY_DAYS {
        Lifetime::Until(duration)
    } else {
        Lifetime::After(duration)
    }
}

fn expected_expiration(expiration: Expiration, version: u8) -> Expiration {
    Expiration {
        lifespan: expected_lifetime(expiration.lifespan, version),
        max_idle: expected_lifetime(expiration.max_idle, version),
    }
}

/// What the decoder must report for `request` at `version`: the documented normalisations
/// of `encode`, and nothing else.
fn expected_request(request: &Request<Bytes>, version: u8) -> Request<Bytes> {
    let mut request = request.clone();
    match &mut request {
        Request::Put { expiration, .. }
        | Request::PutIfAbsent { expiration, .. }
        | Request::Replace { expiration, .. }
        | Request::ReplaceIfUnmodified { expiration, .. }
        | Request::PutAll { expiration, .. } => {
            *expiration = expected_expiration(*expiration, version);
        }
        Request::IterationStart {
            filter, metadata, ..
        } => {
            if version < 24
                && let Some(factory) = filter
            {
                factory.params.clear();
            }
            if version < 25 {
                *metadata = false;
            }
        }
        Request::AddClientListener {
            filter,
            converter,
            raw_data,
            interests,
            ..
        } => {
            for factory in [filter, converter] {
                if factory.as_ref().is_some_and(|f| f.name.is_empty()) {
                    *factory = None;
                }
            }
            if version < 21 {
                *raw_data = false;
            }
            if version < 26 {
                *interests = 0;
            }
        }
        _ => {}
    }
    request
}

fn expected_header(header: &RequestHeader, request: &Request<Bytes>) -> RequestHeader {
    let mut header = header.clone();
    if header.version < 28 {
        header.key_type = MediaType::Unspecified;
        header.value_type = MediaType::Unspecified;
    }
    if header.version < 22 {
        // A default lifetime travels as 0, which means "default" only with these flags.
        let expiration = match expected_request(request, header.version) {
            Request::Put { expiration, .. }
            | Request::PutIfAbsent { expiration, .. }
            | Request::Replace { expiration, .. }
            | Request::ReplaceIfUnmodified { expiration, .. }
            | Request::PutAll { expiration, .. } => Some(expiration),
            _ => None,
        };
        if let Some(expiration) = expiration {
            if expiration.lifespan == Lifetime::Default {
                header.flags |= flags::DEFAULT_LIFESPAN;
            }
            if expiration.max_idle == Lifetime::Default {
                header.flags |= flags::DEFAULT_MAXIDLE;
            }
        }
    }
    header
}

/// Feeds `input` to one decoder in pieces ending at `cuts`, draining complete frames after
/// each piece. Checks that no frame comes out before its last byte arrived, that each frame
/// consumes bytes, and that nothing is left over.
fn decode_in_pieces(input: &[u8], cuts: &[usize]) -> Vec<Frame> {
    let mut decoder = Decoder::default();
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain(std::iter::once(input.len())) {
        let end = end.clamp(start, input.len());
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => {
                    assert!(buf.len() < before, "a frame must consume bytes");
                    assert_eq!(frame.data.len(), before - buf.len());
                    frames.push(frame);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete frame must stay buffered");
                    break;
                }
                Err(error) => panic!("encoded bytes do not decode: {error}"),
            }
        }
    }
    assert!(buf.is_empty(), "{} bytes left over", buf.len());
    frames
}

fn arb_cuts(max: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..=max, 0..16).prop_map(|mut cuts| {
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // Proves encode → decode is the identity up to the documented normalisations, for
    // frames sent back to back in one piece and cut at arbitrary points; and that encoding
    // the decoded request again gives the same bytes.
    #[test]
    fn encoded_requests_decode_back(
        (frames, cuts) in prop::collection::vec(arb_frame(), 1..5).prop_flat_map(|frames| {
            let mut bytes = BytesMut::new();
            for (header, request) in &frames {
                encode(&mut bytes, header, request).unwrap();
            }
            let len = bytes.len();
            (Just(frames), arb_cuts(len))
        })
    ) {
        let mut input = BytesMut::new();
        let mut lengths = Vec::new();
        for (header, request) in &frames {
            let before = input.len();
            encode(&mut input, header, request).unwrap();
            lengths.push(input.len() - before);
        }
        let whole = decode_in_pieces(&input, &[]);
        let pieces = decode_in_pieces(&input, &cuts);
        prop_assert_eq!(&whole, &pieces);
        prop_assert_eq!(whole.len(), frames.len());
        for (((header, request), frame), length) in frames.iter().zip(&whole).zip(lengths) {
            prop_assert_eq!(frame.data.len(), length);
            prop_assert_eq!(frame.header.opcode, request.opcode());
            prop_assert_eq!(frame.owned_header(), expected_header(header, request));
            prop_assert_eq!(frame.owned_request(), expected_request(request, header.version));
            let mut again = BytesMut::new();
            encode(&mut again, &frame.owned_header(), &frame.owned_request()).unwrap();
            prop_assert_eq!(&again[..], &frame.data[..]);
        }
    }

    // Proves a frame cut anywhere is incomplete (never an error, never a frame), and says
    // it needs more bytes than it has.
    #[test]
    fn every_prefix_is_incomplete((header, request) in arb_frame()) {
        let mut bytes = BytesMut::new();
        encode(&mut bytes, &header, &request).unwrap();
        for cut in 0..bytes.len() {
            let mut decoder = Decoder::default();
            let mut buf = BytesMut::from(&bytes[..cut]);
            prop_assert_eq!(decoder.decode(&mut buf), Ok(None), "cut at {}", cut);
            prop_assert_eq!(buf.len(), cut);
            prop_assert!(cut == 0 || decoder.bytes_needed() > cut, "cut at {}", cut);
            prop_assert!(decoder.bytes_needed() <= bytes.len(), "cut at {}", cut);
        }
    }
}
