//! Malformed and hostile Hot Rod input against a real server: each gets the error status the
//! protocol defines and closes only the offending connection (frames carry no length, so the
//! stream cannot be resynchronised); nothing half-received is applied, nothing declared is
//! buffered past the limits, and other clients and stored data are unaffected. Every read
//! has a timeout, so a hang fails the test.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::TestServer;
use common::hotrod::{HotRod, b, get, put};
use weft_hotrod::wire::put_vint;
use weft_hotrod::{Expiration, Request, RequestHeader, Status, encode, opcode};

/// A server holding `kept = safe`.
fn server_with_data(server_lines: &str) -> TestServer {
    let server = TestServer::start_with(server_lines, "");
    let mut c = HotRod::connect(server.addr, 40);
    assert_eq!(c.call(put("kept", "safe")).status(), Status::Success);
    server
}

/// A NEW connection gets PING answered and still sees the stored data.
fn assert_intact(server: &TestServer) {
    let mut c = HotRod::connect(server.addr, 40);
    assert_eq!(c.call(Request::Ping).status(), Status::Success);
    assert_eq!(c.call(get("kept")).value(), b"safe");
}

/// A connection the server already serves as Hot Rod.
fn hotrod_client(server: &TestServer) -> HotRod {
    let mut c = HotRod::connect(server.addr, 40);
    assert_eq!(c.call(Request::Ping).status(), Status::Success);
    c
}

/// The bytes of one request.
fn frame(header: &RequestHeader, request: &Request<Bytes>) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode(&mut out, header, request).unwrap();
    out.to_vec()
}

/// A 4.0 header (no media types, no other parameters) with `opcode`, as raw bytes.
fn header_bytes(message_id: u8, opcode: u8) -> Vec<u8> {
    vec![
        0xa0, message_id, 40, opcode, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
    ]
}

// Proves a frame with a wrong magic byte gets 0x81 and the connection closes.
#[test]
fn bad_magic() {
    let server = server_with_data("");
    let mut c = hotrod_client(&server);
    // 0xA1 is the response magic: a client echoing a response, say.
    let mut bytes = frame(&RequestHeader::new(40, 5, ""), &Request::Ping);
    bytes[0] = 0xa1;
    let message = c.expect_error_and_close(&bytes, Status::InvalidMagicOrMessageId);
    assert!(message.contains("magic"), "{message}");
    assert_intact(&server);
}

// Proves 1.x version bytes get 0x83 with the request's message id, then the close.
#[test]
fn protocol_1x() {
    let server = server_with_data("");
    for version in [10u8, 13, 19] {
        let mut c = HotRod::connect(server.addr, 40);
        let mut bytes = frame(&RequestHeader::new(20, 9, ""), &Request::Ping);
        bytes[2] = version;
        c.send_raw(&bytes);
        let response = c.read();
        assert_eq!(
            (
                response.header.opcode,
                response.status(),
                response.header.message_id
            ),
            (opcode::ERROR, Status::UnknownVersion, 9),
            "version {version}"
        );
        assert!(c.closed_by_server(), "version {version}");
    }
    assert_intact(&server);
}

// Proves unknown operations get 0x82 and the close: an opcode that never existed, one the
// server does not decode (put-stream), and get-stream at 4.1, where it was dropped.
#[test]
fn unknown_opcode() {
    let server = server_with_data("");
    for (version, op) in [
        (40u8, 0x99u8),
        (40, opcode::PUT_STREAM),
        (41, opcode::GET_STREAM),
    ] {
        let mut c = hotrod_client(&server);
        let mut bytes = header_bytes(7, op);
        bytes[2] = version;
        bytes.extend_from_slice(&[0x01, b'k', 0x00]);
        c.send_raw(&bytes);
        let response = c.read();
        assert_eq!(
            (
                response.header.opcode,
                response.status(),
                response.header.message_id
            ),
            (opcode::ERROR, Status::UnknownCommand, 7),
            "opcode 0x{op:02x} at {version}"
        );
        assert!(c.closed_by_server(), "opcode 0x{op:02x} at {version}");
    }
    assert_intact(&server);
}

// Proves a message id longer than a vLong can be (10 bytes) gets 0x81 and the close.
#[test]
fn message_id_too_long() {
    let server = server_with_data("");
    let mut c = hotrod_client(&server);
    let mut bytes = vec![0xa0];
    bytes.extend_from_slice(&[0xff; 11]);
    bytes.extend_from_slice(&[
        0x01,
        40,
        opcode::PING,
        0x00,
        0x00,
        0x01,
        0x00,
        0x00,
        0x00,
        0x00,
    ]);
    let message = c.expect_error_and_close(&bytes, Status::InvalidMagicOrMessageId);
    assert!(message.contains("message id"), "{message}");
    assert_intact(&server);
}

// Proves a client that sends part of a frame and leaves neither hangs nor hurts the server,
// and the partial write is not applied.
#[test]
fn truncated_frame_then_close() {
    let server = server_with_data("");
    let whole = frame(&RequestHeader::new(40, 3, ""), &put("kept", "clobbered"));
    for cut in [1, 5, whole.len() / 2, whole.len() - 1] {
        let mut c = hotrod_client(&server);
        c.send_raw(&whole[..cut]);
        // The server waits for the rest without answering...
        assert_eq!(c.read_within(Duration::from_millis(100)), None, "cut {cut}");
        // ...and then the client goes away.
        c.shutdown_write();
        assert!(c.closed_by_server(), "cut {cut}");
        drop(c);
        assert_intact(&server);
    }
}

// Proves key and value lengths past `hotrod-value-bytes-max` are refused with 0x84 as soon
// as the length is read, without waiting for (or buffering) the declared bytes; a key of
// exactly the limit is accepted.
#[test]
fn key_and_value_lengths_past_the_limit() {
    let server = server_with_data("hotrod-value-bytes-max = 1024");
    for declared in [1025u32, 1 << 30, u32::MAX] {
        let mut c = hotrod_client(&server);
        let mut bytes = BytesMut::from(&header_bytes(4, opcode::GET)[..]);
        put_vint(&mut bytes, declared);
        // Only the length goes out: the error must come without the key's bytes.
        let message = c.expect_error_and_close(&bytes, Status::RequestParsingError);
        assert!(message.contains("1024"), "{message}");
    }
    let mut c = hotrod_client(&server);
    let mut bytes = BytesMut::from(&header_bytes(4, opcode::PUT)[..]);
    bytes.extend_from_slice(&[0x01, b'k', 0x77]);
    put_vint(&mut bytes, 1025);
    c.expect_error_and_close(&bytes, Status::RequestParsingError);

    let mut c = hotrod_client(&server);
    let key = vec![b'x'; 1024];
    assert_eq!(c.call(put(&key, "v")).status(), Status::Success);
    assert_eq!(c.call(get(&key)).value(), b"v");
    assert_intact(&server);
}

// Proves a frame longer than `client-input-bytes-max` is refused with 0x84, whether its
// length is only declared or the whole frame arrives in one write.
#[test]
fn frame_past_the_input_limit() {
    let server = server_with_data("client-input-bytes-max = 65536");
    let mut c = hotrod_client(&server);
    let mut bytes = BytesMut::from(&header_bytes(4, opcode::PUT)[..]);
    bytes.extend_from_slice(&[0x01, b'k', 0x77]);
    put_vint(&mut bytes, 100_000);
    c.expect_error_and_close(&bytes, Status::RequestParsingError);

    let mut c = hotrod_client(&server);
    let whole = frame(
        &RequestHeader::new(40, 5, ""),
        &put("big", vec![b'v'; 70_000]),
    );
    c.expect_error_and_close(&whole, Status::RequestParsingError);
    let mut c = hotrod_client(&server);
    assert_eq!(c.call(get("big")).status(), Status::KeyDoesNotExist);
    assert_intact(&server);
}

// Proves a put whose value is cut short stores nothing: while the frame is pending other
// clients see the old value, and after the client leaves the key is unchanged (or still
// absent).
#[test]
fn truncated_value_stores_nothing() {
    let server = server_with_data("");
    let mut other = HotRod::connect(server.addr, 40);
    for key in ["kept", "absent"] {
        let mut c = hotrod_client(&server);
        let whole = frame(&RequestHeader::new(40, 3, ""), &put(key, vec![b'n'; 100]));
        c.send_raw(&whole[..whole.len() - 50]);
        assert_eq!(c.read_within(Duration::from_millis(100)), None);
        let expected = |other: &mut HotRod| {
            let response = other.call(get(key));
            if key == "kept" {
                assert_eq!(response.value(), b"safe");
            } else {
                assert_eq!(response.status(), Status::KeyDoesNotExist);
            }
        };
        expected(&mut other);
        c.shutdown_write();
        assert!(c.closed_by_server());
        drop(c);
        expected(&mut other);
    }
    assert_intact(&server);
}

// Proves an unknown cache is a request error (0x84, `CacheNotFoundException` in the
// message, as clients search for) and the connection stays usable.
#[test]
fn unknown_cache() {
    let server = server_with_data("");
    for version in [31u8, 40] {
        let mut c = HotRod::connect(server.addr, version);
        c.cache = "nosuchcache".into();
        for request in [Request::Ping, get("kept"), put("kept", "x")] {
            let response = c.call(request);
            assert_eq!(
                (response.header.opcode, response.status()),
                (opcode::ERROR, Status::RequestParsingError)
            );
            let message = response.error_message();
            assert!(
                message.contains("CacheNotFoundException") && message.contains("'nosuchcache'"),
                "{message}"
            );
        }
        c.cache = String::new();
        assert_eq!(c.call(Request::Ping).status(), Status::Success);
        assert_eq!(c.call(get("kept")).value(), b"safe");
    }
    assert_intact(&server);
}

// Proves bytes after a valid frame in the same write: the valid request is served and
// answered first, then the garbage gets its error and the close; a valid request behind the
// bad frame is not executed.
#[test]
fn garbage_after_a_valid_frame() {
    let server = server_with_data("");
    let mut c = hotrod_client(&server);
    let mut bytes = BytesMut::new();
    let header = c.header();
    let id = c.encode_into(&mut bytes, &header, &put("first", "1"));
    bytes.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    c.send_raw(&bytes);
    let response = c.read();
    assert_eq!(
        (response.header.message_id, response.status()),
        (id, Status::Success)
    );
    let error = c.read();
    assert_eq!(
        (error.header.opcode, error.status()),
        (opcode::ERROR, Status::InvalidMagicOrMessageId)
    );
    assert!(c.closed_by_server());

    let mut c = hotrod_client(&server);
    let mut bytes = BytesMut::new();
    let header = c.header();
    let id = c.encode_into(&mut bytes, &header, &put("second", "2"));
    bytes.extend_from_slice(&header_bytes(50, 0x99));
    let header = c.header();
    c.encode_into(&mut bytes, &header, &put("third", "3"));
    c.send_raw(&bytes);
    assert_eq!(c.read().header.message_id, id);
    let error = c.read();
    assert_eq!(
        (error.header.opcode, error.status(), error.header.message_id),
        (opcode::ERROR, Status::UnknownCommand, 50)
    );
    assert!(c.closed_by_server());

    let mut c = hotrod_client(&server);
    assert_eq!(c.call(get("first")).value(), b"1");
    assert_eq!(c.call(get("second")).value(), b"2");
    assert_eq!(c.call(get("third")).status(), Status::KeyDoesNotExist);
    assert_intact(&server);
}

// Proves the other malformed fields a header or body can carry are request-parsing errors
// (0x84) followed by the close, each caught before the frame is complete: a cache name past
// the string limit or not UTF-8, an unknown media-type kind, an unknown time unit, and
// element counts past the limit.
#[test]
fn malformed_fields() {
    let server = server_with_data("");
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();

    let mut long_name = vec![0xa0, 0x01, 40, opcode::PING];
    let mut length = BytesMut::new();
    put_vint(&mut length, 70_000);
    long_name.extend_from_slice(&length);
    cases.push(("cache name past the limit", long_name));

    let mut bad_utf8 = vec![0xa0, 0x01, 40, opcode::PING, 0x02, 0xff, 0xfe];
    bad_utf8.extend_from_slice(&[0x00, 0x01, 0x00, 0x00, 0x00, 0x00]);
    cases.push(("cache name not UTF-8", bad_utf8));

    let bad_media = vec![0xa0, 0x01, 40, opcode::PING, 0x00, 0x00, 0x01, 0x00, 0x03];
    cases.push(("media type kind 3", bad_media));

    let mut bad_unit = header_bytes(1, opcode::PUT);
    bad_unit.extend_from_slice(&[0x01, b'k', 0x9f]);
    cases.push(("time unit 9", bad_unit));

    let mut many = header_bytes(1, opcode::GET_ALL);
    let mut count = BytesMut::new();
    put_vint(&mut count, (1 << 20) + 1);
    many.extend_from_slice(&count);
    cases.push(("get-all count past the limit", many));

    let mut many = header_bytes(1, opcode::PUT_ALL);
    many.push(0x77);
    many.extend_from_slice(&count);
    cases.push(("put-all count past the limit", many));

    for (what, bytes) in cases {
        let mut c = hotrod_client(&server);
        c.send_raw(&bytes);
        let response = c.read();
        assert_eq!(
            (response.header.opcode, response.status()),
            (opcode::ERROR, Status::RequestParsingError),
            "{what}"
        );
        assert!(c.closed_by_server(), "{what}");
    }
    assert_intact(&server);
}

// Proves a write's previous-value flag on a cache that does not exist still answers an
// error, and a pipelined valid request on the same connection after it is served.
#[test]
fn unknown_cache_in_a_pipeline() {
    let server = server_with_data("");
    let mut c = hotrod_client(&server);
    let mut bytes = BytesMut::new();
    let header = RequestHeader {
        cache_name: "missing".into(),
        flags: weft_hotrod::flags::FORCE_RETURN_VALUE,
        ..c.header()
    };
    let missing = c.encode_into(
        &mut bytes,
        &header,
        &Request::Put {
            key: b("k"),
            expiration: Expiration::DEFAULT,
            value: b("v"),
        },
    );
    let header = c.header();
    let present = c.encode_into(&mut bytes, &header, &get("kept"));
    c.send_raw(&bytes);
    let first = c.response_to(missing);
    assert_eq!(first.status(), Status::RequestParsingError);
    assert_eq!(c.response_to(present).value(), b"safe");
    assert_intact(&server);
}

// Proves a listener connection that stops reading is disconnected once its event queue
// overflows, rather than buffered without bound or silently missing events, and that the
// writers raising those events are not held up meanwhile.
#[test]
fn listener_that_does_not_read_is_disconnected() {
    let server = server_with_data("");
    let mut listening = hotrod_client(&server);
    let response = listening.call(Request::AddClientListener {
        listener_id: b([7u8; 16]),
        include_current_state: false,
        filter: None,
        converter: None,
        raw_data: false,
        interests: 0,
    });
    assert_eq!(response.status(), Status::Success);
    // 40,000 creations with 1 KiB keys: far more events than the connection's queue (16 Ki
    // messages) and the socket buffers hold. Each batch must be answered in time.
    let mut writer = hotrod_client(&server);
    let suffix = "x".repeat(1000);
    let writes = 40_000;
    for batch in 0..writes / 1000 {
        let mut bytes = BytesMut::new();
        let mut ids = Vec::new();
        for i in 0..1000 {
            let header = writer.header();
            ids.push(writer.encode_into(
                &mut bytes,
                &header,
                &put(format!("{batch}-{i}-{suffix}"), "v"),
            ));
        }
        writer.send_raw(&bytes);
        for id in ids {
            assert_eq!(writer.response_to(id).status(), Status::Success);
        }
    }
    // Now the listener reads: what was buffered, then the close.
    let received = listening.count_until_closed();
    assert!(received < writes, "{received} events, no overflow");
    assert_intact(&server);
}
