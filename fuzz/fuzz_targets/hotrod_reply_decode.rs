//! Feeds arbitrary bytes to the Hot Rod response decoder (the client's side, `ReplyDecoder`),
//! whole and cut at two points derived from the input, at protocol versions 2.0, 3.0 and 4.0,
//! with each intelligence, with the default limits and with tight ones.
//!
//! Checks: no panic; a decoded reply consumed at least one byte; an incomplete result leaves
//! the buffer untouched; and the replies and the final error do not depend on where the input
//! was cut.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use weft_hotrod::{Limits, Reply, ReplyDecoder, ResponseError};

/// Tight limits so the fuzzer reaches every limit check with small inputs.
const SMALL: Limits = Limits {
    array_bytes_max: 16,
    string_bytes_max: 16,
    count_max: 4,
    frame_bytes_max: 96,
};

fuzz_target!(|data: &[u8]| {
    // Cut points, version and intelligence from a hash of the input, so the corpus holds
    // plain wire bytes.
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let len = data.len() as u64 + 1;
    let mut cuts = [(hash % len) as usize, ((hash >> 32) % len) as usize];
    cuts.sort_unstable();
    let version = [40, 30, 20][(hash >> 8) as usize % 3];
    let intelligence = 1 + ((hash >> 16) % 3) as u8;
    for limits in [Limits::default(), SMALL] {
        let whole = decode(data, &[], version, intelligence, limits);
        let pieces = decode(data, &cuts, version, intelligence, limits);
        assert_eq!(whole, pieces, "result depends on where the input was cut");
    }
});

fn decode(
    input: &[u8],
    cuts: &[usize],
    version: u8,
    intelligence: u8,
    limits: Limits,
) -> (Vec<Reply>, Option<ResponseError>) {
    let mut decoder = ReplyDecoder::with_limits(version, intelligence, limits);
    let mut buf = BytesMut::new();
    let mut replies = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain(std::iter::once(input.len())) {
        let end = end.clamp(start, input.len());
        buf.extend_from_slice(&input[start..end]);
        start = end;
        loop {
            let before = buf.len();
            match decoder.decode(&mut buf) {
                Ok(Some(reply)) => {
                    assert!(before > buf.len(), "a reply consumed no bytes");
                    replies.push(reply);
                }
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete reply was consumed");
                    break;
                }
                Err(error) => return (replies, Some(error)),
            }
        }
    }
    (replies, None)
}
