//! Feeds arbitrary bytes to the RDB payload reader (FUNCTION RESTORE's, DUMP's): the
//! footer check, then every value read as lengths and strings (raw, integer, LZF).
//!
//! Checks: no panic, no hang, no allocation beyond the named limits.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_resp::rdb;

fuzz_target!(|data: &[u8]| {
    // Whole payloads, footer and all; and the body alone, so the reader is reached without
    // the fuzzer having to forge a CRC.
    if let Ok((body, _)) = rdb::open(data) {
        read_all(body);
    }
    read_all(data);
});

fn read_all(body: &[u8]) {
    let mut reader = rdb::Reader::new(body);
    for _ in 0..64 {
        if reader.is_empty() || reader.byte().is_err() {
            return;
        }
        if reader.string().is_err() {
            return;
        }
    }
}
