//! Server and client administration over real sockets: MEMORY, and the CLIENT subcommands
//! that act on other connections.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Frame, TestServer};

// Proves MEMORY USAGE charges a key what its entry and structure cost (a hash of many
// fields more than a short string), answers nil for a missing key, accepts SAMPLES, and
// refuses bad options; MEMORY STATS answers Redis' fields; COMMAND GETKEYS knows its key.
#[test]
fn memory_usage_and_stats() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET s v"), Frame::ok());
    for i in 0..200 {
        c.cmd(&format!("HSET h field{i} value{i}"));
    }
    let string = c.cmd("MEMORY USAGE s").int();
    let hash = c.cmd("MEMORY USAGE h SAMPLES 0").int();
    assert!(string > 0 && string < 200, "{string}");
    assert!(hash > 200 * 10, "{hash}");
    assert_eq!(c.cmd("MEMORY USAGE missing"), Frame::NullBulk);
    assert_eq!(
        c.cmd("MEMORY USAGE s SAMPLES x"),
        Frame::error("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd("MEMORY USAGE s BOGUS 1"),
        Frame::error("ERR syntax error")
    );
    assert!(matches!(c.cmd("MEMORY USAGE"), Frame::Error(_)));
    let Frame::Array(stats) = c.cmd("MEMORY STATS") else {
        panic!("MEMORY STATS is an array in RESP2");
    };
    let names: Vec<String> = stats.iter().step_by(2).map(Frame::text).collect();
    for field in [
        "peak.allocated",
        "total.allocated",
        "keys.count",
        "dataset.bytes",
        "db.0",
    ] {
        assert!(
            names.iter().any(|name| name == field),
            "{field} in {names:?}"
        );
    }
    assert_eq!(
        c.cmd("COMMAND GETKEYS MEMORY USAGE key"),
        Frame::Array(vec![Frame::bulk("key")])
    );
    assert_eq!(c.cmd("MEMORY PURGE"), Frame::ok());
}
