//! Feeds arbitrary bytes to the RESP request decoder in varying read sizes.
//!
//! Checks: no panic; the decoder never removes more bytes than it was given,
//! and never returns more argument bytes than it removed; and the requests
//! and final error are the same as when the whole input arrives in one read.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use weft_resp::{Limits, ProtocolError, Request, RequestDecoder};

/// Tight limits so the fuzzer reaches every limit check with small inputs.
const SMALL: Limits = Limits {
    bulk_bytes_max: 64,
    multibulk_length_max: 16,
    inline_bytes_max: 64,
};

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = if control & 1 == 0 {
        Limits::default()
    } else {
        SMALL
    };
    // Read sizes from 1 to 32 bytes, varying along the input.
    let mut seed = u32::from(control >> 1) | 1;
    let mut next_read = move || {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (seed >> 16) as usize % 32 + 1
    };
    let pieces = decode(input, limits, &mut next_read);
    let whole = decode(input, limits, &mut || usize::MAX);
    assert_eq!(pieces, whole, "result depends on read boundaries");
});

fn decode(
    input: &[u8],
    limits: Limits,
    next_read: &mut dyn FnMut() -> usize,
) -> (Vec<Request>, Option<ProtocolError>) {
    let mut decoder = RequestDecoder::new(limits);
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut fed = 0usize;
    let mut consumed = 0usize;
    while fed < input.len() {
        let read = next_read().min(input.len() - fed);
        buf.extend_from_slice(&input[fed..fed + read]);
        fed += read;
        loop {
            let before = buf.len();
            let result = decoder.decode(&mut buf);
            assert!(buf.len() <= before, "decoder grew the buffer");
            let taken = before - buf.len();
            consumed += taken;
            assert!(consumed <= fed, "consumed {consumed} of {fed} bytes");
            match result {
                Ok(Some(request)) => {
                    assert!(!request.args.is_empty(), "empty request returned");
                    let arg_bytes: usize = request.args.iter().map(|a| a.len()).sum();
                    assert!(
                        arg_bytes <= taken,
                        "{arg_bytes} argument bytes from {taken}"
                    );
                    requests.push(request);
                }
                Ok(None) => break,
                Err(error) => return (requests, Some(error)),
            }
        }
    }
    (requests, None)
}
