//! RESP databases: SWAPDB exchanges what two databases' clients see, atomically, wakes
//! clients blocked on either, touches WATCHed keys as Redis does, refuses bad indexes with
//! Redis' errors, and is kept across a restart of a server with a file store.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Frame, TestServer};

// Proves SWAPDB exchanges the two databases for every connection, including one that
// selected a database before the swap and one never created before it.
#[test]
fn swapdb_exchanges_what_every_client_sees() {
    let server = TestServer::start();
    let mut a = server.client();
    let mut b = server.client();
    assert_eq!(a.cmd("SET k zero"), Frame::ok());
    assert_eq!(b.cmd("SELECT 1"), Frame::ok());
    assert_eq!(b.cmd("SET k one"), Frame::ok());
    assert_eq!(b.cmd("SET only-in-one x"), Frame::ok());
    assert_eq!(a.cmd("SWAPDB 0 1"), Frame::ok());
    assert_eq!(a.cmd("GET k"), Frame::bulk("one"));
    assert_eq!(b.cmd("GET k"), Frame::bulk("zero"));
    assert_eq!(a.cmd("DBSIZE"), Frame::Integer(2));
    assert_eq!(b.cmd("DBSIZE"), Frame::Integer(1));
    // Swapped with a database nobody used: database 0 is empty until swapped back.
    assert_eq!(a.cmd("SWAPDB 0 7"), Frame::ok());
    assert_eq!(a.cmd("DBSIZE"), Frame::Integer(0));
    assert_eq!(a.cmd("SELECT 7"), Frame::ok());
    assert_eq!(a.cmd("GET k"), Frame::bulk("one"));
    assert_eq!(a.cmd("SWAPDB 7 0"), Frame::ok());
    assert_eq!(a.cmd("DBSIZE"), Frame::Integer(0));
    assert_eq!(a.cmd("SELECT 0"), Frame::ok());
    assert_eq!(a.cmd("GET k"), Frame::bulk("one"));
    // Swapping a database with itself changes nothing.
    assert_eq!(a.cmd("SWAPDB 1 1"), Frame::ok());
    assert_eq!(b.cmd("GET k"), Frame::bulk("zero"));
    let info = a.cmd("INFO keyspace").text();
    assert!(info.contains("db0:keys=2"), "{info}");
    assert!(info.contains("db1:keys=1"), "{info}");
}

// Proves SWAPDB refuses indexes as Redis does: which one is not an integer, and out of range.
#[test]
fn swapdb_refuses_bad_indexes() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.cmd("SWAPDB x 1"),
        Frame::error("ERR invalid first DB index")
    );
    assert_eq!(
        c.cmd("SWAPDB 1 3000000000"),
        Frame::error("ERR invalid second DB index")
    );
    assert_eq!(
        c.cmd("SWAPDB 0 16"),
        Frame::error("ERR DB index is out of range")
    );
    assert_eq!(
        c.cmd("SWAPDB -1 0"),
        Frame::error("ERR DB index is out of range")
    );
    assert!(matches!(c.cmd("SWAPDB 0"), Frame::Error(_)));
}

// Proves a client blocked on a key of one database is served when SWAPDB brings a list to
// it, and a later push to the new database's cache reaches it too.
#[test]
fn swapdb_wakes_blocked_clients() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut blocked = server.client();
    assert_eq!(c.cmd("SELECT 1"), Frame::ok());
    assert_eq!(c.cmd("RPUSH k hello"), Frame::Integer(1));
    assert_eq!(blocked.cmd("SELECT 9"), Frame::ok());
    blocked.send_raw(&common::encode(&["BRPOP", "k", "5"]));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd("SWAPDB 1 9"), Frame::ok());
    assert_eq!(
        blocked.read_frame_within(Duration::from_secs(3)),
        Some(Frame::Array(vec![Frame::bulk("k"), Frame::bulk("hello")]))
    );
    // Blocked on database 9 (now the cache that was 1's): a push there wakes it.
    blocked.send_raw(&common::encode(&["BRPOP", "other", "5"]));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.cmd("SWAPDB 1 9"), Frame::ok());
    assert_eq!(c.cmd("SELECT 9"), Frame::ok());
    assert_eq!(c.cmd("RPUSH other late"), Frame::Integer(1));
    assert_eq!(
        blocked.read_frame_within(Duration::from_secs(3)),
        Some(Frame::Array(vec![
            Frame::bulk("other"),
            Frame::bulk("late")
        ]))
    );
}

// Proves SWAPDB touches WATCHed keys that exist in either database, and not a key that is
// absent from both.
#[test]
fn swapdb_touches_watched_keys() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut other = server.client();
    assert_eq!(c.cmd("SET x 30"), Frame::ok());
    assert_eq!(c.cmd("WATCH x"), Frame::ok());
    assert_eq!(other.cmd("SWAPDB 0 1"), Frame::ok());
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("PING"), Frame::Simple("QUEUED".into()));
    assert_eq!(c.cmd("EXEC"), Frame::NullArray);
    // x now lives in database 1: watching the missing x of database 0, a swap brings it.
    assert_eq!(c.cmd("WATCH x"), Frame::ok());
    assert_eq!(other.cmd("SWAPDB 0 1"), Frame::ok());
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("PING"), Frame::Simple("QUEUED".into()));
    assert_eq!(c.cmd("EXEC"), Frame::NullArray);
    assert_eq!(c.cmd("WATCH nowhere"), Frame::ok());
    assert_eq!(other.cmd("SWAPDB 0 1"), Frame::ok());
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("PING"), Frame::Simple("QUEUED".into()));
    assert_eq!(
        c.cmd("EXEC"),
        Frame::Array(vec![Frame::Simple("PONG".into())])
    );
}

// Proves a swap is kept across a restart of a server with a file store: each number still
// shows the data SWAPDB gave it, and swapping back removes the record.
#[test]
fn swapdb_is_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server_lines = format!("data-dir = \"{}\"", dir.path().display());
    let caches = "[caches.default]\nresp-database = 0\n[[caches.default.persistence.store]]\ntype = \"file\"\n";
    {
        let server = TestServer::start_with(&server_lines, caches);
        let mut c = server.client();
        assert_eq!(c.cmd("SET k zero"), Frame::ok());
        assert_eq!(c.cmd("SELECT 3"), Frame::ok());
        assert_eq!(c.cmd("SET k three"), Frame::ok());
        assert_eq!(c.cmd("SWAPDB 0 3"), Frame::ok());
        assert_eq!(c.cmd("GET k"), Frame::bulk("zero"));
    }
    {
        let server = TestServer::start_with(&server_lines, caches);
        let mut c = server.client();
        assert_eq!(c.cmd("GET k"), Frame::bulk("three"));
        assert_eq!(c.cmd("SELECT 3"), Frame::ok());
        assert_eq!(c.cmd("GET k"), Frame::bulk("zero"));
        assert_eq!(c.cmd("SWAPDB 3 0"), Frame::ok());
        assert_eq!(c.cmd("GET k"), Frame::bulk("three"));
    }
    assert!(!dir.path().join("resp-databases.swapped").exists());
    let server = TestServer::start_with(&server_lines, caches);
    let mut c = server.client();
    assert_eq!(c.cmd("GET k"), Frame::bulk("zero"));
}
