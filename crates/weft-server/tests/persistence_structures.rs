//! Client flags and Redis structures in a cache with a file store, through the server: they
//! survive a restart whole (a structure changed in place many times comes back in its last
//! state), and over HTTP a restored structure still answers 409. The structures are made
//! through the cache API, as the RESP commands do.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};

use bytes::Bytes;
use common::TestServer;
use weft_core::structure::{HashValue, ListValue};
use weft_core::{Cache, Compute, Expiry, NewValue, Structure, StructureCell, WriteOptions};

fn store_config(dir: &std::path::Path) -> (String, String) {
    (
        format!("data-dir = \"{}\"", dir.display()),
        "[caches.default]\nresp-database = 0\n[[caches.default.persistence.store]]\n\
         type = \"file\"\n"
            .to_owned(),
    )
}

/// Pushes `item` onto the list at `key` in place (creating it), as RPUSH does.
fn push(cache: &Cache, key: &[u8], item: &str) {
    cache
        .compute(key, &WriteOptions::default(), |existing| {
            let cell = match existing.and_then(|entry| entry.structure()) {
                Some(cell) => std::sync::Arc::clone(cell),
                None => StructureCell::new(Structure::List(ListValue::default())),
            };
            if let Structure::List(list) = &mut *cell.lock() {
                list.push_back(Bytes::copy_from_slice(item.as_bytes()));
            }
            Compute::PutValue(NewValue::Structure(cell), Expiry::KEEP, ())
        })
        .unwrap();
}

/// The status line and body of an HTTP/1.1 GET, read until the server closes.
fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

// Proves a list changed in place 100 times, a hash and a flagged value come back whole after
// a restart of a server whose cache has a file store, and the restored list still reads as
// 409 over HTTP.
#[test]
fn flags_and_structures_survive_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (server_lines, caches) = store_config(dir.path());
    let list_version;
    {
        let server = TestServer::start_with(&server_lines, &caches);
        let cache = server.manager().cache("default").unwrap();
        for i in 0..100 {
            push(&cache, b"list", &format!("item-{i}"));
        }
        list_version = cache.get_entry(b"list").unwrap().unwrap().version();
        let mut hash = HashValue::default();
        hash.insert(Bytes::from_static(b"field"), Bytes::from_static(b"value"));
        cache
            .compute(b"hash", &WriteOptions::default(), |_| {
                Compute::PutValue(
                    NewValue::Structure(StructureCell::new(Structure::Hash(hash))),
                    Expiry::default(),
                    (),
                )
            })
            .unwrap();
        cache
            .put(
                b"flagged",
                b"memcached",
                &WriteOptions::default().user_flags(0xdead_beef),
            )
            .unwrap();
    }
    let server = TestServer::start_with(&server_lines, &caches);
    let cache = server.manager().cache("default").unwrap();
    let list = cache.get_entry(b"list").unwrap().unwrap();
    assert_eq!(list.version(), list_version);
    let items: Vec<Vec<u8>> = match &*list.structure().unwrap().lock() {
        Structure::List(list) => list.iter().map(|item| item.to_vec()).collect(),
        other => panic!("not a list: {other:?}"),
    };
    let expected: Vec<Vec<u8>> = (0..100).map(|i| format!("item-{i}").into_bytes()).collect();
    assert_eq!(items, expected);
    let hash = cache.get_entry(b"hash").unwrap().unwrap();
    match &*hash.structure().unwrap().lock() {
        Structure::Hash(hash) => {
            assert_eq!(hash.len(), 1);
            assert_eq!(hash.get(b"field").map(|v| &v[..]), Some(&b"value"[..]));
        }
        other => panic!("not a hash: {other:?}"),
    }
    let flagged = cache.get_entry(b"flagged").unwrap().unwrap();
    assert_eq!(
        (flagged.value(), flagged.user_flags()),
        (&b"memcached"[..], 0xdead_beef)
    );
    let (status, body) = http_get(server.addr, "/rest/v2/caches/default/list");
    assert!(status.contains(" 409 "), "{status}");
    assert_eq!(body, "key holds a Redis list; read it over RESP");
}

// Proves a stream — entries, a deleted entry, its last ID and counters, a consumer group with
// pending entries and consumers — comes back whole after a restart of a server whose cache
// has a file store, and goes on answering XREADGROUP, XPENDING and XADD where it left off.
#[test]
fn streams_survive_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (server_lines, caches) = store_config(dir.path());
    let before;
    {
        let server = TestServer::start_with(&server_lines, &caches);
        let mut c = server.client();
        for ms in 1..=150 {
            c.cmd(&format!("XADD s {ms} field value-{ms}"));
        }
        c.cmd("XDEL s 3");
        c.cmd("XGROUP CREATE s g 0");
        c.cmd("XREADGROUP GROUP g alice COUNT 10 STREAMS s >");
        c.cmd("XGROUP CREATECONSUMER s g bob");
        c.cmd("XSETID s 200 MAXDELETEDID 160");
        before = (
            c.cmd("XRANGE s - +"),
            c.cmd("XINFO STREAM s"),
            c.cmd("XPENDING s g"),
            c.cmd("XINFO GROUPS s"),
        );
    }
    let server = TestServer::start_with(&server_lines, &caches);
    let mut c = server.client();
    let after = (
        c.cmd("XRANGE s - +"),
        c.cmd("XINFO STREAM s"),
        c.cmd("XPENDING s g"),
        c.cmd("XINFO GROUPS s"),
    );
    assert_eq!(after, before);
    assert_eq!(c.cmd("XINFO CONSUMERS s g").items().len(), 2);
    assert_eq!(
        c.cmd("XADD s 200 f v"),
        common::Frame::error(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item"
        )
    );
    assert_eq!(c.cmd("XADD s 201 f v"), common::Frame::bulk("201-0"));
    let next = c.cmd("XREADGROUP GROUP g alice COUNT 1 STREAMS s >");
    assert_eq!(
        next.items()[0].items()[1].items()[0].items()[0],
        common::Frame::bulk("12-0")
    );
}
