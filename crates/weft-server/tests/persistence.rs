//! Caches with stores, through the server: a restart serves every entry with its remaining
//! lifespan; a cache bounded in memory holds more than fits and reads fall through; write-
//! behind and passivation keep everything across a clean restart.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Frame, TestServer};

fn store_config(dir: &std::path::Path, extra_cache: &str, extra_store: &str) -> (String, String) {
    (
        format!("data-dir = \"{}\"", dir.display()),
        format!(
            "[caches.default]\nresp-database = 0\n{extra_cache}\n[[caches.default.persistence.store]]\ntype = \"file\"\n{extra_store}\n"
        ),
    )
}

#[test]
fn a_restart_serves_every_entry_with_its_remaining_lifespan() {
    let dir = tempfile::tempdir().unwrap();
    let (server_lines, caches) = store_config(dir.path(), "", "");
    {
        let server = TestServer::start_with(&server_lines, &caches);
        let mut client = server.client();
        for i in 0..500 {
            assert_eq!(client.cmd(&format!("SET key{i} value{i}")), Frame::ok());
        }
        assert_eq!(client.cmd("SET mortal m EX 1000"), Frame::ok());
        assert_eq!(client.cmd("INCRBY counter 41"), Frame::Integer(41));
        assert_eq!(client.cmd("DEL key3"), Frame::Integer(1));
    }
    let server = TestServer::start_with(&server_lines, &caches);
    let mut client = server.client();
    assert_eq!(client.cmd("DBSIZE"), Frame::Integer(501));
    assert_eq!(client.cmd("GET key499"), Frame::bulk("value499"));
    assert_eq!(client.cmd("GET key3"), Frame::NullBulk);
    assert_eq!(client.cmd("INCR counter"), Frame::Integer(42));
    let ttl = client.cmd("TTL mortal").int();
    assert!(
        (990..=1000).contains(&ttl),
        "remaining lifespan kept: {ttl}"
    );
    let stats = server
        .manager()
        .cache("default")
        .unwrap()
        .persistence_stats()
        .unwrap();
    assert_eq!(stats.preloaded_entries, 501);
    let metrics = http_get(server.addr, "/metrics");
    assert!(
        metrics.contains("weft_cache_store_preloaded_entries{cache=\"default\"} 501"),
        "{metrics}"
    );
    let cache_stats = http_get(server.addr, "/rest/v2/caches/default?action=stats");
    assert!(
        cache_stats.contains("\"preloaded_entries\":501"),
        "{cache_stats}"
    );
}

/// The body of an HTTP/1.1 GET, read until the server closes.
fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn a_cache_bounded_in_memory_holds_more_and_reads_fall_through() {
    let dir = tempfile::tempdir().unwrap();
    let (server_lines, caches) = store_config(dir.path(), "memory.max-count = 100", "");
    let server = TestServer::start_with(&server_lines, &caches);
    let mut client = server.client();
    for i in 0..1000 {
        assert_eq!(client.cmd(&format!("SET key{i} value{i}")), Frame::ok());
    }
    let cache = server.manager().cache("default").unwrap();
    assert!(cache.memory_bytes() > 0);
    // Memory holds at most its bound; the rest is only in the store.
    assert!(
        cache.statistics().entries <= 100,
        "{}",
        cache.statistics().entries
    );
    for i in 0..1000 {
        assert_eq!(
            client.cmd(&format!("GET key{i}")),
            Frame::bulk(format!("value{i}"))
        );
    }
    assert_eq!(client.cmd("DBSIZE"), Frame::Integer(1000));
    // A conditional write sees the stored entry even when memory does not hold it.
    assert_eq!(client.cmd("SETNX key5 other"), Frame::Integer(0));
    assert_eq!(client.cmd("DEL key6"), Frame::Integer(1));
    assert_eq!(client.cmd("GET key6"), Frame::NullBulk);
    assert!(cache.persistence_stats().unwrap().loads > 0);
}

#[test]
fn passivation_keeps_evicted_and_resident_entries_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (server_lines, caches) = store_config(
        dir.path(),
        "memory.max-count = 50\npersistence.passivation = true",
        "",
    );
    {
        let server = TestServer::start_with(&server_lines, &caches);
        let mut client = server.client();
        for i in 0..300 {
            assert_eq!(client.cmd(&format!("SET key{i} value{i}")), Frame::ok());
        }
        assert_eq!(client.cmd("DEL key10"), Frame::Integer(1));
        assert_eq!(client.cmd("GET key0"), Frame::bulk("value0"));
        assert_eq!(client.cmd("DBSIZE"), Frame::Integer(299));
        // Only evictions (250) and removals reached the store, not all 300 writes: with
        // write-through every write would have.
        let writes = server
            .manager()
            .cache("default")
            .unwrap()
            .persistence_stats()
            .unwrap()
            .stores;
        assert!((250..300).contains(&writes), "store writes: {writes}");
    }
    let server = TestServer::start_with(&server_lines, &caches);
    let mut client = server.client();
    assert_eq!(client.cmd("DBSIZE"), Frame::Integer(299));
    for i in (0..300).filter(|&i| i != 10) {
        assert_eq!(
            client.cmd(&format!("GET key{i}")),
            Frame::bulk(format!("value{i}"))
        );
    }
    assert_eq!(client.cmd("GET key10"), Frame::NullBulk);
}

#[test]
fn write_behind_drains_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let (server_lines, caches) = store_config(
        dir.path(),
        "",
        "durability = \"sync\"\nwrite-behind = { modification-queue-size = 64, batch-size = 16 }",
    );
    {
        let server = TestServer::start_with(&server_lines, &caches);
        let mut client = server.client();
        for i in 0..2000 {
            assert_eq!(client.cmd(&format!("SET key{i} value{i}")), Frame::ok());
        }
        for i in 0..2000 {
            assert_eq!(client.cmd(&format!("SET key{i} again{i}")), Frame::ok());
        }
    }
    let server = TestServer::start_with(&server_lines, &caches);
    let mut client = server.client();
    assert_eq!(client.cmd("DBSIZE"), Frame::Integer(2000));
    assert_eq!(client.cmd("GET key1999"), Frame::bulk("again1999"));
}

#[test]
fn a_store_configuration_error_names_the_place_and_the_value() {
    let text = "[caches.broken]\n[[caches.broken.persistence.store]]\ntype = \"file\"\ndurability = \"sometimes\"\n";
    let error = weft_server::config::ServerConfig::parse("bad.toml", text)
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("bad.toml:4"), "{error}");
    assert!(error.contains("sometimes"), "{error}");
}
