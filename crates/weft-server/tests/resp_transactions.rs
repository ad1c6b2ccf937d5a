//! Transactions over real sockets, RESP2 and RESP3: queueing, EXECABORT, errors inside
//! EXEC's reply, Redis' error texts, WATCH failing on a change made by another RESP
//! connection, by REST or by expiration, and EXEC running whole while another connection
//! writes the same key.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Client, Frame, TestServer};

fn queued() -> Frame {
    Frame::Simple("QUEUED".into())
}

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

/// A client speaking `protocol` (2 or 3).
fn client(server: &TestServer, protocol: u8) -> Client {
    let mut client = server.client();
    if protocol == 3 {
        assert!(matches!(client.cmd("HELLO 3"), Frame::Map(_)));
    }
    client
}

/// The failed-EXEC reply: RESP2 `*-1`, RESP3 `_`.
fn aborted(protocol: u8) -> Frame {
    if protocol == 3 {
        Frame::Null
    } else {
        Frame::NullArray
    }
}

/// `PUT /rest/v2/caches/default/{key}` over HTTP/1.1; returns the status line.
fn rest_put(addr: SocketAddr, key: &str, value: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "PUT /rest/v2/caches/default/{key} HTTP/1.1\r\nHost: weft\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{value}",
        value.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

// Proves commands are queued and run by EXEC in order, with runtime errors (WRONGTYPE, not
// an integer) inside EXEC's array and the other commands applied, in RESP2 and RESP3.
#[test]
fn exec_runs_the_queue_with_runtime_errors_inside() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("DEL k l");
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("SET k x"), queued());
        assert_eq!(c.cmd("INCR k"), queued());
        assert_eq!(c.cmd("LPUSH k a"), queued());
        assert_eq!(c.cmd("RPUSH l a b"), queued());
        assert_eq!(c.cmd("GET k"), queued());
        assert_eq!(
            c.cmd("EXEC"),
            Frame::Array(vec![
                Frame::ok(),
                Frame::error("ERR value is not an integer or out of range"),
                Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value"),
                int(2),
                Frame::bulk("x"),
            ])
        );
        assert_eq!(c.cmd("LLEN l"), int(2));
        // An empty transaction answers an empty array.
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), Frame::Array(vec![]));
    }
}

// Proves a command refused while queueing (unknown, wrong arity) makes EXEC answer
// EXECABORT and discards every queued command; a refused EXEC itself discards at once.
#[test]
fn queue_time_errors_abort_exec() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("SET k 1"), queued());
    assert_eq!(
        c.cmd("NOSUCH a"),
        Frame::error("ERR unknown command 'NOSUCH', with args beginning with: 'a' ")
    );
    assert_eq!(
        c.cmd("GET"),
        Frame::error("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(
        c.cmd("EXEC"),
        Frame::error("EXECABORT Transaction discarded because of previous errors.")
    );
    // A container's subcommand and its arguments are checked when queued too.
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(
        c.cmd("OBJECT ENCODING"),
        Frame::error("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert_eq!(
        c.cmd("EXEC"),
        Frame::error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.cmd("GET k"), Frame::NullBulk);
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("SET k 1"), queued());
    assert_eq!(
        c.cmd("EXEC now"),
        Frame::error(
            "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command"
        )
    );
    assert_eq!(c.cmd("EXEC"), Frame::error("ERR EXEC without MULTI"));
    assert_eq!(c.cmd("GET k"), Frame::NullBulk);
}

// Proves Redis' texts for nested MULTI, EXEC and DISCARD without MULTI and WATCH inside
// MULTI (none of which aborts the transaction), and that DISCARD drops the queue.
#[test]
fn misuse_errors_have_redis_texts() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("EXEC"), Frame::error("ERR EXEC without MULTI"));
    assert_eq!(c.cmd("DISCARD"), Frame::error("ERR DISCARD without MULTI"));
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(
        c.cmd("MULTI"),
        Frame::error("ERR MULTI calls can not be nested")
    );
    assert_eq!(
        c.cmd("WATCH k"),
        Frame::error("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(c.cmd("SET k v"), queued());
    assert_eq!(c.cmd("EXEC"), Frame::Array(vec![Frame::ok()]));
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("SET k other"), queued());
    assert_eq!(c.cmd("DISCARD"), Frame::ok());
    assert_eq!(c.cmd("GET k"), Frame::bulk("v"));
    assert_eq!(
        c.cmd("WATCH"),
        Frame::error("ERR wrong number of arguments for 'watch' command")
    );
}

// Proves WATCH fails EXEC (null array in RESP2, null in RESP3) when another RESP connection
// changes or deletes a watched key, succeeds when nothing changed, and that UNWATCH,
// DISCARD and a finished EXEC forget the watched keys.
#[test]
fn watch_fails_exec_after_a_change_by_another_connection() {
    let server = TestServer::start();
    let mut other = server.client();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        assert_eq!(c.cmd("SET w 1"), Frame::ok());
        assert_eq!(c.cmd("WATCH w absent"), Frame::ok());
        assert_eq!(other.cmd("SET w 2"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("SET w mine"), queued());
        assert_eq!(c.cmd("EXEC"), aborted(protocol));
        assert_eq!(c.cmd("GET w"), Frame::bulk("2"));
        // Deleting, and creating a watched absent key, count as changes.
        assert_eq!(c.cmd("WATCH w"), Frame::ok());
        assert_eq!(other.cmd("DEL w"), int(1));
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), aborted(protocol));
        assert_eq!(c.cmd("WATCH absent"), Frame::ok());
        assert_eq!(other.cmd("SET absent 1"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), aborted(protocol));
        assert_eq!(other.cmd("DEL absent"), int(1));
        // LTRIM touches the list even when it keeps every element, as in Redis.
        assert_eq!(other.cmd("RPUSH trimmed a b"), int(2));
        assert_eq!(c.cmd("WATCH trimmed"), Frame::ok());
        assert_eq!(other.cmd("LTRIM trimmed 0 -1"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), aborted(protocol));
        assert_eq!(other.cmd("DEL trimmed"), int(1));
        // Untouched: EXEC runs.
        assert_eq!(c.cmd("WATCH w"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("SET w 3"), queued());
        assert_eq!(c.cmd("EXEC"), Frame::Array(vec![Frame::ok()]));
        // EXEC forgot w: a later change does not fail the next transaction.
        assert_eq!(other.cmd("SET w 4"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), Frame::Array(vec![]));
        // UNWATCH and DISCARD forget too.
        assert_eq!(c.cmd("WATCH w"), Frame::ok());
        assert_eq!(c.cmd("UNWATCH"), Frame::ok());
        assert_eq!(other.cmd("SET w 5"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), Frame::Array(vec![]));
        assert_eq!(c.cmd("WATCH w"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("DISCARD"), Frame::ok());
        assert_eq!(other.cmd("SET w 6"), Frame::ok());
        assert_eq!(c.cmd("MULTI"), Frame::ok());
        assert_eq!(c.cmd("EXEC"), Frame::Array(vec![]));
        assert_eq!(c.cmd("DEL w"), int(1));
    }
}

// Proves WATCH sees writes by other protocols: a REST PUT of a watched key fails EXEC.
#[test]
fn watch_fails_exec_after_a_rest_write() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET shared before"), Frame::ok());
    assert_eq!(c.cmd("WATCH shared"), Frame::ok());
    let status = rest_put(server.addr, "shared", "from-rest");
    assert!(
        status.contains(" 204") || status.contains(" 200"),
        "{status}"
    );
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("SET shared from-resp"), queued());
    assert_eq!(c.cmd("EXEC"), Frame::NullArray);
    assert_eq!(c.cmd("GET shared"), Frame::bulk("from-rest"));
}

// Proves a watched key that expires before EXEC fails the transaction, as in Redis 7.
#[test]
fn watch_fails_exec_when_the_key_expires() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET brief v PX 50"), Frame::ok());
    assert_eq!(c.cmd("WATCH brief"), Frame::ok());
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("SET brief again"), queued());
    assert_eq!(c.cmd("EXEC"), Frame::NullArray);
}

// Proves EXEC runs whole: while another connection keeps overwriting the key, every
// transaction's INCRs still see only their own increments (1, 2, … 50).
#[test]
fn exec_is_not_interleaved_with_other_connections() {
    const TRANSACTIONS: usize = 40;
    const INCREMENTS: i64 = 50;
    let server = TestServer::start();
    let stop = Arc::new(AtomicBool::new(false));
    let addr = server.addr;
    let writer_stop = Arc::clone(&stop);
    let writer = std::thread::spawn(move || {
        let mut w = Client::connect(addr);
        let mut writes = 0u64;
        // Bounded in count and stopped by the test.
        while !writer_stop.load(Ordering::Relaxed) && writes < 2_000_000 {
            assert_eq!(w.cmd("SET counter 1000000"), Frame::ok());
            writes += 1;
        }
        writes
    });
    let mut c = server.client();
    for _ in 0..TRANSACTIONS {
        let mut pipeline = common::encode(&["MULTI"]);
        pipeline.extend(common::encode(&["SET", "counter", "0"]));
        for _ in 0..INCREMENTS {
            pipeline.extend(common::encode(&["INCR", "counter"]));
        }
        pipeline.extend(common::encode(&["EXEC"]));
        c.send_raw(&pipeline);
        for _ in 0..(INCREMENTS + 2) {
            let reply = c.read_frame();
            assert!(reply == Frame::ok() || reply == queued(), "{reply:?}");
        }
        let results = c.read_frame().items();
        assert_eq!(results[0], Frame::ok());
        let counts: Vec<i64> = results[1..].iter().map(Frame::int).collect();
        assert_eq!(counts, (1..=INCREMENTS).collect::<Vec<_>>());
    }
    stop.store(true, Ordering::Relaxed);
    assert!(writer.join().unwrap() > 0);
}
