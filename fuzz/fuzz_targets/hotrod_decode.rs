//! Feeds arbitrary bytes to the Hot Rod request decoder, whole and cut at two points derived
//! from the input, with the default limits and with tight ones.
//!
//! Checks: no panic; a decoded frame consumed exactly its own bytes (at least one) and its
//! spans lie inside it; an incomplete result leaves the buffer untouched; the frames and the
//! final error do not depend on where the input was cut; and a decoded request, encoded
//! again, decodes to the same header and request (encoder and decoder agree on everything
//! the decoder can produce), except that lifetimes beyond any clock's reach (which the
//! decoder saturates and the encoder cannot always write exactly) only stay beyond it.
#![no_main]

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use weft_hotrod::{DecodeError, Decoder, Expiration, Frame, Lifetime, Limits, Request, encode};

/// Tight limits so the fuzzer reaches every limit check with small inputs.
const SMALL: Limits = Limits {
    array_bytes_max: 16,
    string_bytes_max: 16,
    count_max: 4,
    frame_bytes_max: 96,
};

fuzz_target!(|data: &[u8]| {
    // Cut points from a hash of the input, so the corpus holds plain wire bytes.
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let len = data.len() as u64 + 1;
    let mut cuts = [(hash % len) as usize, ((hash >> 32) % len) as usize];
    cuts.sort_unstable();
    for limits in [Limits::default(), SMALL] {
        let whole = decode(data, &[], limits);
        let pieces = decode(data, &cuts, limits);
        assert_eq!(whole, pieces, "result depends on where the input was cut");
        for frame in &whole.0 {
            reencode(frame);
        }
    }
});

fn decode(input: &[u8], cuts: &[usize], limits: Limits) -> (Vec<Frame>, Option<DecodeError>) {
    let mut decoder = Decoder::new(limits);
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
                    let taken = before - buf.len();
                    assert!(taken > 0, "a frame consumed no bytes");
                    assert_eq!(
                        frame.data.len(),
                        taken,
                        "frame is not the bytes it consumed"
                    );
                    // Slices every span: panics if one lies outside the frame.
                    let _ = frame.owned_request();
                    let _ = frame.owned_header();
                    frames.push(frame);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete frame was consumed");
                    break;
                }
                Err(error) => return (frames, Some(error)),
            }
        }
    }
    (frames, None)
}

/// Encodes a decoded frame and decodes that: the same header and request must come back.
fn reencode(frame: &Frame) {
    let mut encoded = BytesMut::new();
    encode(&mut encoded, &frame.owned_header(), &frame.owned_request())
        .expect("a decoded request is encodable");
    let mut buf = encoded.clone();
    let again = Decoder::default()
        .decode(&mut buf)
        .expect("an encoded request decodes")
        .expect("an encoded request is complete");
    assert!(buf.is_empty(), "encoded request has trailing bytes");
    assert_eq!(again.owned_header(), frame.owned_header());
    assert_eq!(
        far_lifetimes_as_infinite(again.owned_request()),
        far_lifetimes_as_infinite(frame.owned_request())
    );
}

/// Longer than any entry can live: 1000 years.
const FAR: Duration = Duration::from_secs(1000 * 365 * 86_400);

fn far_lifetimes_as_infinite(mut request: Request<Bytes>) -> Request<Bytes> {
    let bound = |lifetime: Lifetime| match lifetime {
        Lifetime::After(d) | Lifetime::Until(d) if d > FAR => Lifetime::Infinite,
        other => other,
    };
    if let Request::Put { expiration, .. }
    | Request::PutIfAbsent { expiration, .. }
    | Request::Replace { expiration, .. }
    | Request::ReplaceIfUnmodified { expiration, .. }
    | Request::PutAll { expiration, .. } = &mut request
    {
        *expiration = Expiration {
            lifespan: bound(expiration.lifespan),
            max_idle: bound(expiration.max_idle),
        };
    }
    request
}
