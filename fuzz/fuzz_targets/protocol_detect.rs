//! Runs the single-port protocol sniffers on arbitrary first bytes.
//!
//! Checks: no panic, and a Yes/No verdict given for a prefix never changes
//! when more bytes arrive (the server may act on the first verdict).
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_resp::{Detection, looks_like_http, looks_like_resp};

fuzz_target!(|data: &[u8]| {
    for sniff in [looks_like_http as fn(&[u8]) -> Detection, looks_like_resp] {
        let full = sniff(data);
        // Every prefix for short inputs; a sample for long ones.
        let step = (data.len() / 256).max(1);
        for len in (0..data.len()).step_by(step) {
            let early = sniff(&data[..len]);
            if early != Detection::NeedMore {
                assert_eq!(early, full, "verdict changed after {len} bytes");
            }
        }
    }
});
