//! A Hot Rod client that speaks ProtoStream, as the Java client does, against caches that
//! store raw bytes or text (the out-of-box `default` cache stores octet-stream for RESP
//! database 0): it reads back the Java type it wrote, RESP reads the text, typed keys are not
//! the text or byte keys of the same printed form, and iteration reports finished segments as
//! the client computes them (from the ProtoStream bytes it receives), not as the server
//! stores them.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeSet, HashMap};

use common::hotrod::{HotRod, b, get, iterate_as_java_client, protostream, put};
use common::{Frame, TestServer};
use weft_core::media::typed_flags;
use weft_hotrod::{Expiration, Request, Status, flags};

/// Segments of the caches these tests start (the default count).
const SEGMENT_COUNT: u32 = 256;

/// ProtoStream `WrappedMessage` of a string.
fn string(text: &str) -> Vec<u8> {
    let mut out = vec![0x4a, u8::try_from(text.len()).unwrap()];
    out.extend_from_slice(text.as_bytes());
    out
}

/// ProtoStream `WrappedMessage` of a `byte[]`.
fn byte_array(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0x52, u8::try_from(bytes.len()).unwrap()];
    out.extend_from_slice(bytes);
    out
}

/// A client of `cache` that declares ProtoStream keys and values, as the Java client does.
fn java_like(server: &TestServer, cache: &str) -> HotRod {
    let mut c = HotRod::connect(server.addr, 40);
    c.cache = cache.into();
    c.media_type = protostream();
    c
}

/// `(name, ProtoStream bytes, the text RESP reads, WrappedMessage field)` of the Java types
/// the tests write as values.
fn typed_values() -> Vec<(&'static str, Vec<u8>, Option<&'static str>, u8)> {
    let mut date = vec![0xb8, 0x01];
    let mut millis = 1_700_000_000_123u64;
    while millis >= 0x80 {
        date.push((millis as u8) | 0x80);
        millis >>= 7;
    }
    date.push(millis as u8);
    let mut double = vec![0x09];
    double.extend_from_slice(&3.5f64.to_le_bytes());
    let mut small_double = vec![0x09];
    small_double.extend_from_slice(&(-1.0e-300f64).to_le_bytes());
    let mut float = vec![0x15];
    float.extend_from_slice(&2.25f32.to_le_bytes());
    let minus_seven = [0xf9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    vec![
        ("Integer 42", vec![0x28, 0x2a], Some("42"), 5),
        (
            "Integer -1",
            [&[0x28][..], &[0xff; 9], &[0x01]].concat(),
            Some("-1"),
            5,
        ),
        ("Long 42", vec![0x18, 0x2a], Some("42"), 3),
        ("Boolean true", vec![0x40, 0x01], Some("true"), 8),
        ("Double 3.5", double, Some("3.5"), 1),
        ("Double -1.0E-300", small_double, Some("-1.0E-300"), 1),
        ("Float 2.25", float, Some("2.25"), 2),
        (
            "Short -7",
            [&[0xa8, 0x01][..], &minus_seven].concat(),
            Some("-7"),
            21,
        ),
        ("Byte 127", vec![0xb0, 0x01, 0x7f], Some("127"), 22),
        ("Character ж", vec![0xa0, 0x01, 0xb6, 0x08], Some("ж"), 20),
        // No text form: kept as sent.
        ("Date", date, None, 0),
        ("byte[] of text", byte_array(b"hi"), Some("hi"), 10),
        ("byte[] not UTF-8", byte_array(&[0xff, 0x00]), None, 10),
    ]
}

// Proves a ProtoStream client reads back the Java type it wrote on the octet-stream
// `default` cache and on a text cache (before the fix an Integer came back as the String
// "42"), that RESP reads numbers as their text and byte arrays as their bytes, and that the
// type rides in the entry's client flags (what memcached shows).
#[test]
fn typed_values_read_back_as_written() {
    let server =
        TestServer::start_with("", "[caches.text.encoding]\nmedia-type = \"text/plain\"\n");
    for cache in ["default", "text"] {
        let mut c = java_like(&server, cache);
        for (name, value, text, field) in typed_values() {
            let key = string(name);
            assert_eq!(
                c.call(put(&key, &value)).status(),
                Status::Success,
                "{name}"
            );
            assert_eq!(c.call(get(&key)).value(), value, "{cache}: {name}");
            let entry = server
                .manager()
                .cache(cache)
                .unwrap()
                .get_entry(name.as_bytes())
                .unwrap()
                .unwrap();
            assert_eq!(entry.user_flags(), typed_flags(field), "{cache}: {name}");
            if let (Some(text), "default") = (text, cache) {
                assert_eq!(server.client().call(&["GET", name]), Frame::bulk(text));
            }
        }
        // A string stays a plain string: no flags, what RESP and memcached write too.
        assert_eq!(
            c.call(put(string("s"), string("hi"))).status(),
            Status::Success
        );
        assert_eq!(c.call(get(string("s"))).value(), string("hi"));
        let entry = server.manager().cache(cache).unwrap().get_entry(b"s");
        assert_eq!(entry.unwrap().unwrap().user_flags(), 0);
    }

    let mut c = java_like(&server, "default");
    let mut resp = server.client();
    // INCR keeps the flags: the counter is still an Integer to Hot Rod.
    assert_eq!(
        c.call(put(string("n"), [0x28, 0x2a])).status(),
        Status::Success
    );
    assert_eq!(resp.cmd("INCR n"), Frame::Integer(43));
    assert_eq!(c.call(get(string("n"))).value(), [0x28, 0x2b]);
    // Text that no longer reads as the type is a string again.
    assert_eq!(resp.cmd("APPEND n x"), Frame::Integer(3));
    assert_eq!(c.call(get(string("n"))).value(), string("43x"));
    // A RESP SET stores no flags: a string.
    assert_eq!(resp.cmd("SET n 7"), Frame::ok());
    assert_eq!(c.call(get(string("n"))).value(), string("7"));

    // Previous values, get-all and bulk reads give the type back too.
    assert_eq!(
        c.call(put(string("p"), [0x28, 0x01])).status(),
        Status::Success
    );
    let response = c.call_with(flags::FORCE_RETURN_VALUE, put(string("p"), [0x18, 0x02]));
    assert_eq!(response.status(), Status::SuccessWithPrevious);
    assert!(response.body.ends_with(&[0x02, 0x28, 0x01]), "{response:?}");
    let response = c.call(Request::GetAll {
        keys: vec![b(string("p"))],
    });
    let mut reader = response.reader();
    assert_eq!(reader.vint().unwrap(), 1);
    assert_eq!(reader.array().unwrap(), string("p"));
    assert_eq!(reader.array().unwrap(), [0x18, 0x02]);
}

// Proves a typed key is its own entry on the octet-stream cache: the Integer 1 is neither the
// byte[] {'1'} nor the string "(\x01" (whose raw bytes are the Integer's ProtoStream form), and
// each comes back from iteration, bulk reads and listener events as the type it was written
// as. (A byte[] and
// the string of the same bytes are one entry by design: both are raw bytes to RESP.)
#[test]
fn typed_keys_do_not_collide_with_text_or_byte_keys() {
    let server = TestServer::start();
    let mut c = java_like(&server, "default");
    let integer_one = vec![0x28, 0x01];
    let bytes_one = byte_array(b"1");
    let string_lookalike = string("(\x01");
    let long_one = vec![0x18, 0x01];
    for (key, value) in [
        (&integer_one, "int"),
        (&bytes_one, "bytes"),
        (&string_lookalike, "lookalike"),
        (&long_one, "long"),
    ] {
        assert_eq!(c.call(put(key, string(value))).status(), Status::Success);
    }
    assert_eq!(c.call(Request::Size).reader().vlong().unwrap(), 4);
    assert_eq!(c.call(get(&integer_one)).value(), string("int"));
    assert_eq!(c.call(get(&bytes_one)).value(), string("bytes"));
    assert_eq!(c.call(get(&string_lookalike)).value(), string("lookalike"));
    assert_eq!(c.call(get(&long_one)).value(), string("long"));
    assert_eq!(c.call(get(string("1"))).value(), string("bytes"));

    // RESP sees the byte[] and the string as their bytes, the typed keys behind 0xff.
    let mut resp = server.client();
    assert_eq!(resp.cmd("GET 1"), Frame::bulk("bytes"));
    let keys: BTreeSet<Vec<u8>> = resp
        .cmd("KEYS *")
        .items()
        .iter()
        .map(Frame::bytes)
        .collect();
    let expected: BTreeSet<Vec<u8>> = [
        b"1".to_vec(),
        b"(\x01".to_vec(),
        b"\xff\x28\x01".to_vec(),
        b"\xff\x18\x01".to_vec(),
    ]
    .into();
    assert_eq!(keys, expected);

    // Iteration and bulk-get-keys send each key in its own type (the byte[] {'1'} is text,
    // so it reads as the string "1").
    let iterated = iterate_as_java_client(&mut c, None, 10, SEGMENT_COUNT);
    let keys: BTreeSet<Vec<u8>> = iterated.keys().cloned().collect();
    let expected: BTreeSet<Vec<u8>> = [
        integer_one.clone(),
        string("1"),
        string_lookalike.clone(),
        long_one.clone(),
    ]
    .into();
    assert_eq!(keys, expected);
    let response = c.call(Request::BulkGetKeys { scope: 0 });
    let mut reader = response.reader();
    let mut bulk = BTreeSet::new();
    while reader.u8().unwrap() == 1 {
        bulk.insert(reader.array().unwrap().to_vec());
    }
    assert_eq!(bulk, expected);

    // A listener registered in ProtoStream gets the typed key back in its type.
    let mut listening = java_like(&server, "default");
    let response = listening.call(Request::AddClientListener {
        listener_id: b([0x11; 16]),
        include_current_state: false,
        filter: None,
        converter: None,
        raw_data: false,
        interests: 0,
    });
    assert_eq!(response.status(), Status::Success);
    assert_eq!(
        c.call(Request::Remove {
            key: b(&integer_one)
        })
        .status(),
        Status::Success
    );
    let event = listening.next_event();
    let mut reader = event.reader();
    assert_eq!(reader.array().unwrap(), [0x11; 16]);
    assert_eq!((reader.u8().unwrap(), reader.u8().unwrap()), (0, 0));
    assert_eq!(
        reader.array().unwrap(),
        integer_one,
        "the removed key, as an Integer"
    );
    assert_eq!(c.call(get(&bytes_one)).value(), string("bytes"));
}

// Proves iteration on caches whose stored keys are not the bytes the client hashes (the
// octet-stream `default` cache with ProtoStream keys; a redis-slots cache, whose segments
// are CRC16 slots) reports each segment finished only after every entry the client places
// in it — before the fix the Java client failed with "Segment N already completed" — and
// that a segment filter selects by the client's segments, so disjoint filters partition the
// cache; the ProtoStream cache, where the segments agree, still reports segment by segment.
#[test]
fn iteration_reports_segments_as_the_client_hashes_keys() {
    let server = TestServer::start_with(
        "",
        "[caches.proto]\n[caches.slots]\nkey-partitioner = \"redis-slots\"\n[caches.slots.encoding]\nmedia-type = \"application/x-protostream\"\n",
    );
    for cache in ["default", "slots", "proto"] {
        let mut c = java_like(&server, cache);
        let mut expected = HashMap::new();
        let mut entries = Vec::new();
        for i in 0..3000u32 {
            let (key, value) = if i % 5 == 0 {
                // An Integer key, a Long value.
                let mut key = vec![0x28];
                let mut n = i;
                while n >= 0x80 {
                    key.push((n as u8) | 0x80);
                    n >>= 7;
                }
                key.push(n as u8);
                (key, vec![0x18, (i % 100) as u8])
            } else {
                (string(&format!("it-{i}")), string(&format!("v{i}")))
            };
            expected.insert(key.clone(), value.clone());
            entries.push((b(key), b(value)));
        }
        let response = c.call(Request::PutAll {
            expiration: Expiration::DEFAULT,
            entries,
        });
        assert_eq!(response.status(), Status::Success, "{cache}");
        assert_eq!(
            iterate_as_java_client(&mut c, None, 100, SEGMENT_COUNT),
            expected,
            "{cache}: all segments"
        );
        let mut union = HashMap::new();
        for part in 0..3 {
            let asked: BTreeSet<u32> = (0..256).filter(|s| s % 3 == part).collect();
            for (key, value) in iterate_as_java_client(&mut c, Some(&asked), 100, SEGMENT_COUNT) {
                assert!(union.insert(key, value).is_none(), "{cache}: overlap");
            }
        }
        assert_eq!(union, expected, "{cache}: the parts make the whole");
    }
}
