//! Pipelining: many requests sent in one write are all executed, and their replies come back
//! in request order.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write;

use common::{Frame, TestServer, encode};

const PIPELINED: usize = 10_000;

// Proves 10,000 pipelined SETs followed by 10,000 GETs, sent in one write, get 20,000
// replies in order.
#[test]
fn ten_thousand_sets_then_gets_in_one_write() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut batch = Vec::new();
    for i in 0..PIPELINED {
        batch.extend_from_slice(&encode(&[
            b"SET".to_vec(),
            format!("key:{i}").into_bytes(),
            format!("value:{i}").into_bytes(),
        ]));
    }
    for i in 0..PIPELINED {
        batch.extend_from_slice(&encode(&[b"GET".to_vec(), format!("key:{i}").into_bytes()]));
    }
    // Write from another thread: the replies must be read while the batch is still being
    // sent, or both sides' socket buffers fill up.
    let mut writer = c.writer();
    let sender = std::thread::spawn(move || writer.write_all(&batch));
    for i in 0..PIPELINED {
        assert_eq!(c.read_frame(), Frame::ok(), "SET reply {i}");
    }
    for i in 0..PIPELINED {
        assert_eq!(
            c.read_frame(),
            Frame::bulk(format!("value:{i}")),
            "GET reply {i}"
        );
    }
    sender.join().unwrap().unwrap();
    assert_eq!(c.cmd("DBSIZE"), Frame::Integer(PIPELINED as i64));
}

// Proves a pipeline mixing successes and errors answers each request in order.
#[test]
fn errors_do_not_break_a_pipeline() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut batch = Vec::new();
    batch.extend_from_slice(&encode(&["SET", "n", "1"]));
    batch.extend_from_slice(&encode(&["INCR", "n"]));
    batch.extend_from_slice(&encode(&["NOSUCH"]));
    batch.extend_from_slice(&encode(&["GET"]));
    batch.extend_from_slice(&encode(&["SET", "s", "x"]));
    batch.extend_from_slice(&encode(&["INCR", "s"]));
    batch.extend_from_slice(b"GET n\r\n");
    c.send_raw(&batch);
    assert_eq!(c.read_frame(), Frame::ok());
    assert_eq!(c.read_frame(), Frame::Integer(2));
    assert!(
        matches!(c.read_frame(), Frame::Error(e) if e.starts_with("ERR unknown command 'NOSUCH'"))
    );
    assert_eq!(
        c.read_frame(),
        Frame::error("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(c.read_frame(), Frame::ok());
    assert_eq!(
        c.read_frame(),
        Frame::error("ERR value is not an integer or out of range")
    );
    assert_eq!(c.read_frame(), Frame::bulk("2"));
}
