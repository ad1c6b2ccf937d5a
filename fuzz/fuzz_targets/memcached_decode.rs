//! Feeds arbitrary bytes to the memcached text and binary request decoders in varying read
//! sizes, and to the shared-port sniffer.
//!
//! Checks: no panic; a decoder never removes more bytes than it was given and every request
//! removes some; keys stay within 250 bytes and stored items within the item limit; the
//! requests and the final error are the same as when the whole input arrives in one read; and
//! the sniffer's verdict on a prefix never changes when more bytes arrive.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use weft_memcached::binary::BinaryCommand;
use weft_memcached::text::{TextCommand, looks_like_text_command};
use weft_memcached::{BinaryDecoder, KEY_BYTES_MAX, Limits, TextDecoder};

/// Tight limits so the fuzzer reaches every limit check with small inputs.
const SMALL: Limits = Limits {
    item_bytes_max: 96,
    line_bytes_max: 48,
    multiget_line_bytes_max: 128,
};

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 0 { Limits::default() } else { SMALL };
    let mut seed = u32::from(control >> 2) | 1;
    let mut next_read = move || {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (seed >> 16) as usize % 32 + 1
    };
    if control & 2 == 0 {
        let pieces = text(input, limits, &mut next_read);
        let whole = text(input, limits, &mut || usize::MAX);
        assert_eq!(pieces, whole, "text result depends on read boundaries");
    } else {
        let pieces = binary(input, limits, &mut next_read);
        let whole = binary(input, limits, &mut || usize::MAX);
        assert_eq!(pieces, whole, "binary result depends on read boundaries");
    }
    let full = looks_like_text_command(input);
    let step = (input.len() / 256).max(1);
    for len in (0..input.len()).step_by(step) {
        if let Some(early) = looks_like_text_command(&input[..len]) {
            assert_eq!(Some(early), full, "sniffer verdict changed after {len} bytes");
        }
    }
});

/// Feeds `input` in reads of `next_read()` bytes; returns the requests and the final error.
fn text(
    input: &[u8],
    limits: Limits,
    next_read: &mut dyn FnMut() -> usize,
) -> (Vec<weft_memcached::TextRequest>, Option<weft_memcached::TextProtocolError>) {
    let mut decoder = TextDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let (mut fed, mut consumed) = (0usize, 0usize);
    while fed < input.len() {
        let read = next_read().min(input.len() - fed);
        buf.extend_from_slice(&input[fed..fed + read]);
        fed += read;
        loop {
            let before = buf.len();
            let result = decoder.decode(&mut buf);
            assert!(buf.len() <= before, "decoder grew the buffer");
            consumed += before - buf.len();
            assert!(consumed <= fed, "consumed {consumed} of {fed} bytes");
            match result {
                Ok(Some(request)) => {
                    assert!(buf.len() < before, "a request consumed nothing");
                    match &request.command {
                        TextCommand::Store { key, value, flags, .. } => {
                            assert!(key.len() <= KEY_BYTES_MAX);
                            assert!(limits.item_fits(key.len(), *flags, value.len()));
                        }
                        TextCommand::Get { keys, .. } => {
                            assert!(keys.iter().all(|key| !key.is_empty() && key.len() <= KEY_BYTES_MAX));
                        }
                        TextCommand::Delete { key } | TextCommand::Touch { key, .. } => {
                            assert!(key.len() <= KEY_BYTES_MAX);
                        }
                        _ => {}
                    }
                    requests.push(request);
                }
                Ok(None) => break,
                Err(error) => return (requests, Some(error)),
            }
        }
    }
    (requests, None)
}

fn binary(
    input: &[u8],
    limits: Limits,
    next_read: &mut dyn FnMut() -> usize,
) -> (Vec<weft_memcached::BinaryRequest>, Option<weft_memcached::BinaryProtocolError>) {
    let mut decoder = BinaryDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let (mut fed, mut consumed) = (0usize, 0usize);
    while fed < input.len() {
        let read = next_read().min(input.len() - fed);
        buf.extend_from_slice(&input[fed..fed + read]);
        fed += read;
        loop {
            let before = buf.len();
            let result = decoder.decode(&mut buf);
            assert!(buf.len() <= before, "decoder grew the buffer");
            consumed += before - buf.len();
            assert!(consumed <= fed, "consumed {consumed} of {fed} bytes");
            match result {
                Ok(Some(request)) => {
                    assert!(buf.len() < before, "a request consumed nothing");
                    if let BinaryCommand::Store { key, value, flags, .. } = &request.command {
                        assert!(key.len() <= KEY_BYTES_MAX);
                        assert!(limits.item_fits(key.len(), *flags, value.len()));
                    }
                    requests.push(request);
                }
                Ok(None) => break,
                Err(error) => return (requests, Some(error)),
            }
        }
    }
    (requests, None)
}
