//! Malformed and hostile input: the server answers protocol errors with Redis' texts and
//! closes only the offending connection; stored data and other clients are unaffected.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Client, Frame, TestServer};

/// A server holding `kept = safe`.
fn server_with_data() -> TestServer {
    let server = TestServer::start();
    assert_eq!(server.client().cmd("SET kept safe"), Frame::ok());
    server
}

/// A NEW connection still sees the stored data and gets PONG.
fn assert_intact(server: &TestServer) {
    let mut c = server.client();
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(c.cmd("GET kept"), Frame::bulk("safe"));
    assert_eq!(c.cmd("DBSIZE"), Frame::Integer(1));
}

/// A connection that the server already knows speaks RESP.
fn resp_client(server: &TestServer) -> Client {
    let mut c = server.client();
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    c
}

/// Sends `bytes`, expects exactly the error line `expected`, then the connection closed.
fn assert_protocol_error(server: &TestServer, bytes: &[u8], expected: &str) {
    let mut c = resp_client(server);
    c.send_raw(bytes);
    assert_eq!(c.read_frame(), Frame::error(expected));
    assert!(
        c.closed_by_server(),
        "connection left open after {expected}"
    );
    assert_intact(server);
}

// Proves a request split mid-frame is not answered until its rest arrives, then is executed.
#[test]
fn truncated_frames_wait_for_the_rest() {
    let server = server_with_data();
    let mut c = resp_client(&server);
    c.send_raw(b"*3\r\n$3\r\nSET\r\n$3\r\nnew\r\n$5\r\nva");
    assert_eq!(c.read_frame_within(Duration::from_millis(200)), None);
    c.send_raw(b"lue\r\n*2\r\n$3\r\nGET");
    assert_eq!(c.read_frame(), Frame::ok());
    assert_eq!(c.read_frame_within(Duration::from_millis(100)), None);
    c.send_raw(b"\r\n$3\r\nnew\r\n");
    assert_eq!(c.read_frame(), Frame::bulk("value"));
    // A header cut before its CRLF, and an inline command cut mid-line.
    c.send_raw(b"*1\r");
    assert_eq!(c.read_frame_within(Duration::from_millis(100)), None);
    c.send_raw(b"\n$4\r\nPING\r\nEC");
    assert_eq!(c.read_frame(), Frame::Simple("PONG".into()));
    c.send_raw(b"HO hi");
    assert_eq!(c.read_frame_within(Duration::from_millis(100)), None);
    c.send_raw(b"\r\n");
    assert_eq!(c.read_frame(), Frame::bulk("hi"));
    assert_eq!(c.cmd("DEL new"), Frame::Integer(1));
    assert_intact(&server);
}

// Proves a bulk length over proto-max-bulk-len is refused with Redis' text, then closed.
#[test]
fn oversized_bulk_length() {
    let server = server_with_data();
    let error = "ERR Protocol error: invalid bulk length";
    assert_protocol_error(&server, b"*2\r\n$3\r\nGET\r\n$536870913\r\n", error);
    assert_protocol_error(
        &server,
        b"*2\r\n$3\r\nGET\r\n$99999999999999999999\r\n",
        error,
    );
    assert_protocol_error(&server, b"*2\r\n$3\r\nGET\r\n$-5\r\n", error);
    assert_protocol_error(&server, b"*1\r\n$abc\r\n", error);
}

// Proves `*` followed by garbage, or a huge count, is an invalid multibulk length.
#[test]
fn multibulk_garbage() {
    let server = server_with_data();
    let error = "ERR Protocol error: invalid multibulk length";
    assert_protocol_error(&server, b"*abc\r\n", error);
    assert_protocol_error(&server, b"*1x\r\n", error);
    assert_protocol_error(&server, b"*99999999\r\n", error);
    assert_protocol_error(
        &server,
        b"*2\r\n+3\r\n",
        "ERR Protocol error: expected '$', got '+'",
    );
}

// Proves binary garbage is refused: unrecognised first bytes close the connection without a
// reply, and garbage inside a RESP session is a protocol error.
#[test]
fn binary_garbage() {
    let server = server_with_data();
    let mut c = server.client();
    c.send_raw(&[0x00, 0xff, 0x13, 0x37, b'\r', b'\n', 0xfe, 0x01]);
    assert!(c.closed_by_server());
    assert_intact(&server);

    let mut c = resp_client(&server);
    c.send_raw(b"*1\r\n\xff\xfe\x00\x01\r\n");
    let reply = c.read_frame();
    assert!(
        matches!(&reply, Frame::Error(text) if text.starts_with("ERR Protocol error: expected '$', got '")),
        "{reply:?}"
    );
    assert!(c.closed_by_server());
    assert_intact(&server);

    // Binary bytes in an inline command are just an unknown command; the connection goes on.
    let mut c = resp_client(&server);
    c.send_raw(b"\x01\x02\x03 junk\r\n");
    assert!(
        matches!(c.read_frame(), Frame::Error(text) if text.starts_with("ERR unknown command"))
    );
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    assert_intact(&server);
}

// Proves an inline request longer than 64 KiB is refused and the connection closed.
#[test]
fn inline_line_too_big() {
    let server = server_with_data();
    let long = vec![b'a'; 70 * 1024];
    assert_protocol_error(&server, &long, "ERR Protocol error: too big inline request");
}

// Proves an inline request with unbalanced quotes is refused and the connection closed.
#[test]
fn unbalanced_quotes() {
    let server = server_with_data();
    let error = "ERR Protocol error: unbalanced quotes in request";
    assert_protocol_error(&server, b"SET kept \"oops\r\n", error);
    assert_protocol_error(&server, b"SET kept 'a'b\r\n", error);
    // Balanced quotes are fine, with escapes.
    let mut c = resp_client(&server);
    c.send_raw(b"ECHO \"a b\\x41\"\r\n");
    assert_eq!(c.read_frame(), Frame::bulk("a bA"));
    assert_intact(&server);
}

// Proves a client that disconnects mid-request leaves nothing half-applied.
#[test]
fn disconnect_mid_request() {
    let server = server_with_data();
    let mut c = resp_client(&server);
    c.send_raw(b"*3\r\n$3\r\nSET\r\n$4\r\nkept\r\n$10\r\nclob");
    c.shutdown_write();
    drop(c);
    assert_intact(&server);
}
