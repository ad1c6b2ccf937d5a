//! Feeds arbitrary bytes to the RDB payload readers (RESTORE's and FUNCTION RESTORE's): the
//! footer check; lengths and strings (raw, integer, LZF); whole values as RESTORE reads
//! them (every type byte, quicklists, listpacks, ziplists, intsets, streams with their
//! groups); and the compact encodings on their own.
//!
//! Checks: no panic, no hang, no allocation beyond the named limits; a value that reads
//! back is written again (DUMP's writers) into a payload that reads back too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_resp::rdb::{self, value::Value};

fuzz_target!(|data: &[u8]| {
    // Whole payloads, footer and all; and the body alone, so the reader is reached without
    // the fuzzer having to forge a CRC.
    if let Ok((body, _)) = rdb::open(data) {
        read_all(body);
    }
    read_all(data);
    let _ = rdb::value::read(data);
    let mut sealed = data.to_vec();
    rdb::seal(&mut sealed);
    if let Ok(value) = rdb::value::read(&sealed) {
        let again = rewrite(&value);
        assert!(rdb::value::read(&again).is_ok(), "a rewritten value reads back");
    }
    let _ = rdb::listpack::elements(data);
    let _ = rdb::ziplist::elements(data);
    let _ = rdb::intset::elements(data);
    if let Some((&len, input)) = data.split_first() {
        let _ = rdb::lzf::decompress(input, usize::from(len) * 16);
        if let Some(compressed) = rdb::lzf::compress(input, input.len() + 16) {
            assert_eq!(rdb::lzf::decompress(&compressed, input.len()).as_deref(), Ok(input));
        }
    }
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

/// The value written as DUMP writes one of its kind.
fn rewrite(value: &Value) -> Vec<u8> {
    match value {
        Value::String(text) => rdb::value::dump_string(text),
        Value::List(items) => rdb::value::dump_list(items.iter().map(Vec::as_slice)),
        Value::Set(members) => rdb::value::dump_set(members.len(), members.iter().map(Vec::as_slice)),
        Value::SortedSet(members) => {
            rdb::value::dump_zset_listpack(members.iter().map(|(m, s)| (m.as_slice(), *s)))
        }
        Value::Hash(pairs) => {
            rdb::value::dump_hash_listpack(pairs.iter().map(|(f, v)| (f.as_slice(), v.as_slice())))
        }
        Value::Stream(stream) => rdb::value::dump_stream(stream),
    }
}
