//! Hot Rod meeting keys that hold Redis data structures (written over RESP by LPUSH, HSET,
//! SADD, ZADD…): single-key reads fail with a server error naming the type, bulk reads and
//! entry iterations leave them out, key listings keep them, and writes replace them. The
//! structures are made through the cache API, as the RESP commands do. Every read has a
//! timeout, so a hang fails the test.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use common::TestServer;
use common::hotrod::{HotRod, Response, b, get, iteration_batch, put};
use weft_core::structure::{HashValue, ListValue, SetValue, SortedSetValue};
use weft_core::{Cache, Compute, Expiry, NewValue, Structure, StructureCell, WriteOptions};
use weft_hotrod::{Expiration, Factory, Request, Status, flags};

/// One structure of each kind: key, structure, the type's name in the error.
fn one_of_each() -> [(&'static str, Structure, &'static str); 4] {
    let item = Bytes::from_static(b"item");
    let mut hash = HashValue::default();
    hash.insert(item.clone(), Bytes::from_static(b"value"));
    let mut list = ListValue::default();
    list.push_back(item.clone());
    let mut set = SetValue::default();
    set.insert(item.clone());
    let mut zset = SortedSetValue::default();
    zset.insert(item, 1.5);
    [
        ("a-hash", Structure::Hash(hash), "hash"),
        ("a-list", Structure::List(list), "list"),
        ("a-set", Structure::Set(set), "set"),
        ("a-zset", Structure::SortedSet(zset), "sorted set"),
    ]
}

/// Stores `structure` under `key`, as a RESP collection command does.
fn store_structure(cache: &Cache, key: &str, structure: Structure) {
    cache
        .compute(key.as_bytes(), &WriteOptions::default(), |_| {
            Compute::PutValue(
                NewValue::Structure(StructureCell::new(structure)),
                Expiry::default(),
                (),
            )
        })
        .unwrap();
}

/// A server whose default cache holds `plain-0..5` and one structure of each kind.
fn server_with_structures() -> (TestServer, Cache) {
    let server = TestServer::start();
    let cache = server.manager().cache("default").unwrap();
    for i in 0..5 {
        cache
            .put(
                format!("plain-{i}").as_bytes(),
                format!("v{i}").as_bytes(),
                &WriteOptions::default(),
            )
            .unwrap();
    }
    for (key, structure, _) in one_of_each() {
        store_structure(&cache, key, structure);
    }
    (server, cache)
}

#[track_caller]
fn assert_holds_structure(response: &Response, what: &str) {
    assert_eq!(response.status(), Status::ServerError, "{response:?}");
    assert_eq!(
        response.error_message(),
        format!("key holds a Redis {what}; read it over RESP")
    );
}

/// The plain entries `plain-0..5`.
fn plain_entries() -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..5)
        .map(|i| {
            (
                format!("plain-{i}").into_bytes(),
                format!("v{i}").into_bytes(),
            )
        })
        .collect()
}

// Proves GET, GET_WITH_VERSION, GET_WITH_METADATA and GET_STREAM of a key holding each of
// the four structures answer a server error naming the type, and the connection goes on.
#[test]
fn single_key_reads_of_a_structure_are_server_errors() {
    let (server, _cache) = server_with_structures();
    for version in [31u8, 40] {
        let mut c = HotRod::connect(server.addr, version);
        for (key, _, what) in one_of_each() {
            for request in [
                get(key),
                Request::GetWithVersion { key: b(key) },
                Request::GetWithMetadata { key: b(key) },
                Request::GetStream {
                    key: b(key),
                    offset: 0,
                },
            ] {
                assert_holds_structure(&c.call(request), what);
            }
            // The key is there all the same.
            let response = c.call(Request::ContainsKey { key: b(key) });
            assert_eq!(response.status(), Status::Success);
        }
        assert_eq!(c.call(get("plain-1")).value(), b"v1");
    }
}

// Proves GET_ALL, BULK_GET and an entry iteration leave structures out, while BULK_GET_KEYS
// and a key-only iteration (the Java client's keySet) list their keys.
#[test]
fn bulk_reads_and_iterations_skip_structures() {
    let (server, cache) = server_with_structures();
    let mut c = HotRod::connect(server.addr, 40);
    let every_key: Vec<Bytes> = plain_entries()
        .keys()
        .map(b)
        .chain(one_of_each().iter().map(|(key, _, _)| b(key)))
        .collect();

    let response = c.call(Request::GetAll {
        keys: every_key.clone(),
    });
    assert_eq!(response.status(), Status::Success);
    let mut reader = response.reader();
    let found: BTreeMap<Vec<u8>, Vec<u8>> = (0..reader.vint().unwrap())
        .map(|_| {
            (
                reader.array().unwrap().to_vec(),
                reader.array().unwrap().to_vec(),
            )
        })
        .collect();
    assert_eq!(found, plain_entries());

    for count in [0, 5] {
        let response = c.call(Request::BulkGet { count });
        let mut reader = response.reader();
        let mut listed = BTreeMap::new();
        while reader.u8().unwrap() == 1 {
            let key = reader.array().unwrap().to_vec();
            listed.insert(key, reader.array().unwrap().to_vec());
        }
        assert_eq!(listed, plain_entries(), "bulk get of {count}");
    }

    let response = c.call(Request::BulkGetKeys { scope: 0 });
    let mut reader = response.reader();
    let mut keys = BTreeSet::new();
    while reader.u8().unwrap() == 1 {
        keys.insert(reader.array().unwrap().to_vec());
    }
    let expected_keys: BTreeSet<Vec<u8>> = every_key.iter().map(|key| key.to_vec()).collect();
    assert_eq!(keys, expected_keys);

    let keys_only = Factory {
        name: "org.infinispan.filter.ToEmptyBytesKeyValueFilterConverter".to_owned(),
        params: Vec::new(),
    };
    for filter in [None, Some(keys_only)] {
        let key_only = filter.is_some();
        let response = c.call(Request::IterationStart {
            segments: None,
            filter,
            batch_size: 2,
            metadata: false,
        });
        assert_eq!(response.status(), Status::Success);
        let id = response.reader().string().unwrap();
        let mut seen = BTreeMap::new();
        let mut finished = BTreeSet::new();
        loop {
            let batch = iteration_batch(&c.call(Request::IterationNext { id: id.clone() }));
            finished.extend(batch.finished);
            if batch.entries.is_empty() {
                break;
            }
            seen.extend(batch.entries);
        }
        assert_eq!(
            finished.len() as u32,
            cache.segment_count(),
            "every segment ends"
        );
        if key_only {
            assert_eq!(seen.into_keys().collect::<BTreeSet<_>>(), expected_keys);
        } else {
            assert_eq!(seen, plain_entries());
        }
        assert_eq!(
            c.call(Request::IterationEnd { id }).status(),
            Status::Success
        );
    }
}

// Proves PUT and REMOVE replace or remove a structure as Redis' SET and DEL do (with
// FORCE_RETURN_VALUE, the structure is reported as no previous value), while a
// PUT_IF_ABSENT that does nothing leaves it, and fails only when asked for its value.
#[test]
fn writes_replace_a_structure() {
    let (server, cache) = server_with_structures();
    let mut c = HotRod::connect(server.addr, 40);

    let response = c.call(Request::PutIfAbsent {
        key: b("a-hash"),
        expiration: Expiration::DEFAULT,
        value: b("no"),
    });
    assert_eq!(response.status(), Status::NotExecuted);
    let response = c.call_with(
        flags::FORCE_RETURN_VALUE,
        Request::PutIfAbsent {
            key: b("a-hash"),
            expiration: Expiration::DEFAULT,
            value: b("no"),
        },
    );
    assert_holds_structure(&response, "hash");
    assert!(
        cache
            .get_entry(b"a-hash")
            .unwrap()
            .unwrap()
            .structure()
            .is_some()
    );

    assert_eq!(c.call(put("a-hash", "bytes now")).status(), Status::Success);
    assert!(
        cache
            .get_entry(b"a-hash")
            .unwrap()
            .unwrap()
            .structure()
            .is_none()
    );
    assert_eq!(c.call(get("a-hash")).value(), b"bytes now");

    // No previous value: version u64::MAX, empty value (protocol 4.0's "none").
    let mut none = vec![0x03];
    none.extend_from_slice(&u64::MAX.to_be_bytes());
    none.push(0);
    let response = c.call_with(flags::FORCE_RETURN_VALUE, put("a-list", "replaced"));
    assert_eq!(
        response.shape(),
        (Status::SuccessWithPrevious, none.clone())
    );
    assert_eq!(c.call(get("a-list")).value(), b"replaced");
    let response = c.call_with(
        flags::FORCE_RETURN_VALUE,
        Request::Remove { key: b("a-set") },
    );
    assert_eq!(response.shape(), (Status::SuccessWithPrevious, none));
    assert!(cache.get_entry(b"a-set").unwrap().is_none());
    let response = c.call(Request::Remove { key: b("a-zset") });
    assert_eq!(response.status(), Status::Success);
    assert!(cache.get_entry(b"a-zset").unwrap().is_none());
}
