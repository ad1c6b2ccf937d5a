//! CONFIG over a real socket, in a process of its own: SET changes process-wide encoding
//! thresholds, which other tests' OBJECT ENCODING checks must not see.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Frame, TestServer};

fn bulk(text: &str) -> Frame {
    Frame::bulk(text)
}

fn err(text: &str) -> Frame {
    Frame::error(text)
}

fn sorted_texts(frame: &Frame) -> Vec<String> {
    let mut texts: Vec<String> = frame.items().iter().map(Frame::text).collect();
    texts.sort();
    texts
}

// Proves CONFIG answers as redis-server 7.0 does: GET by name, glob and several patterns
// (a map in RESP3), the old names too; SET of one or several parameters, checked by kind, with
// Redis' errors for unknown, malformed, immutable and repeated ones; RESETSTAT; REWRITE
// without a configuration file; and that parameters Weft's own settings answer for read them.
#[test]
fn config_get_and_set() {
    let server = TestServer::start();
    let mut c = server.client();
    let port = server.addr.port().to_string();
    assert_eq!(
        c.call(&["CONFIG", "GET", "port"]),
        Frame::Array(vec![bulk("port"), bulk(&port)])
    );
    assert_eq!(
        c.call(&["CONFIG", "GET", "databases"]),
        Frame::Array(vec![bulk("databases"), bulk("16")])
    );
    let maxmemory = c.call(&["CONFIG", "GET", "maxmemory*"]);
    assert!(sorted_texts(&maxmemory).contains(&"maxmemory-policy".to_owned()));
    assert_eq!(c.call(&["CONFIG", "SET", "maxmemory", "1mb"]), Frame::ok());
    assert_eq!(
        c.call(&["CONFIG", "GET", "maxmemory"]),
        Frame::Array(vec![bulk("maxmemory"), bulk("1048576")])
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "slave-priority", "64", "hz", "20"]),
        Frame::ok()
    );
    assert_eq!(
        c.call(&["CONFIG", "GET", "replica-priority"]),
        Frame::Array(vec![bulk("replica-priority"), bulk("64")])
    );
    assert_eq!(
        c.call(&["CONFIG", "GET", "slave-priority"]),
        Frame::Array(vec![bulk("slave-priority"), bulk("64")])
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "foo", "1"]),
        err("ERR Unknown option or number of arguments for CONFIG SET - 'foo'")
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "appendonly", "maybe"]),
        err(
            "ERR CONFIG SET failed (possibly related to argument 'appendonly') - argument must be 'yes' or 'no'"
        )
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "databases", "3"]),
        err(
            "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
        )
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "hz", "5", "hz", "6"]),
        err("ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter")
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "port"]),
        err("ERR wrong number of arguments for 'config|set' command")
    );
    assert_eq!(
        c.call(&["CONFIG", "GET"]),
        err("ERR wrong number of arguments for 'config|get' command")
    );
    assert_eq!(c.call(&["CONFIG", "RESETSTAT"]), Frame::ok());
    assert_eq!(
        c.call(&["CONFIG", "REWRITE"]),
        err("ERR The server is running without a config file")
    );
    let all = c.call(&["CONFIG", "GET", "*"]);
    assert!(
        all.items().len() > 300,
        "every parameter, with the old names"
    );
    let mut three = server.client();
    three.call(&["HELLO", "3"]);
    assert!(matches!(
        three.call(&["CONFIG", "GET", "port", "databases"]),
        Frame::Map(pairs) if pairs.len() == 2
    ));
}

// Proves the encoding thresholds CONFIG SET changes are the ones the structures follow, as
// Redis' OBJECT ENCODING shows them: a hash, a set and a sorted set past the new limits are
// large; back at Redis' defaults, new ones are small again.
#[test]
fn config_set_changes_the_encoding_thresholds() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.call(&[
            "CONFIG",
            "SET",
            "hash-max-listpack-entries",
            "2",
            "set-max-intset-entries",
            "2",
            "zset-max-listpack-entries",
            "2",
            "zset-max-listpack-value",
            "4"
        ]),
        Frame::ok()
    );
    c.call(&["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "h"]), bulk("hashtable"));
    c.call(&["SADD", "s", "1", "2", "3"]);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "s"]), bulk("hashtable"));
    c.call(&["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "z"]), bulk("skiplist"));
    c.call(&["ZADD", "long", "1", "abcdefgh"]);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "long"]), bulk("skiplist"));
    assert_eq!(
        c.call(&[
            "CONFIG",
            "SET",
            "hash-max-listpack-entries",
            "512",
            "set-max-intset-entries",
            "512",
            "zset-max-listpack-entries",
            "128",
            "zset-max-listpack-value",
            "64"
        ]),
        Frame::ok()
    );
    c.call(&["HSET", "h2", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "h2"]), bulk("listpack"));
    c.call(&["SADD", "s2", "1", "2", "3"]);
    assert_eq!(c.call(&["OBJECT", "ENCODING", "s2"]), bulk("intset"));
    assert_eq!(
        c.call(&["OBJECT", "ENCODING", "h"]),
        bulk("hashtable"),
        "large stays large"
    );
}
