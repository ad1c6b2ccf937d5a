//! REST meeting keys that hold Redis data structures (written over RESP by LPUSH, HSET, SADD,
//! ZADD…): reads answer 409 naming the type, writes replace the structure, and entry listings
//! leave it out. The structures are made through the cache API, as the RESP commands do.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;
use weft_core::structure::{HashValue, ListValue, SetValue, SortedSetValue};
use weft_core::{
    Cache, CacheManager, Compute, Expiry, ManagerConfig, ManualClock, NewValue, Structure,
    StructureCell, WriteOptions,
};
use weft_rest::{RestState, router};

const START_MS: u64 = 1_700_000_000_000;

struct Fixture {
    app: Router,
    manager: CacheManager,
}

fn fixture() -> Fixture {
    let clock = ManualClock::new(START_MS);
    let manager =
        CacheManager::with_clock(ManagerConfig::default(), Arc::new(clock.clone())).unwrap();
    Fixture {
        app: router(RestState::new(manager.clone())),
        manager,
    }
}

struct Reply {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).unwrap()
    }
}

impl Fixture {
    async fn call(&self, method: Method, uri: &str, body: &'static str) -> Reply {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::from(body))
            .unwrap();
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|value| value.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            body,
        }
    }

    fn cache(&self) -> Cache {
        self.manager.cache("default").unwrap()
    }

    /// Stores `structure` under `key`, as a RESP collection command does.
    fn store_structure(&self, key: &[u8], structure: Structure) {
        self.cache()
            .compute(key, &WriteOptions::default(), |_| {
                Compute::PutValue(
                    NewValue::Structure(StructureCell::new(structure)),
                    Expiry::default(),
                    (),
                )
            })
            .unwrap();
    }
}

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

// Proves GET and HEAD of a key holding each of the four structures answer 409 with a
// plain-text reason naming the type, not an empty value.
#[tokio::test]
async fn reading_a_structure_is_409_naming_its_type() {
    let f = fixture();
    for (key, structure, what) in one_of_each() {
        f.store_structure(key.as_bytes(), structure);
        let uri = format!("/rest/v2/caches/default/{key}");
        let got = f.call(Method::GET, &uri, "").await;
        assert_eq!(got.status, StatusCode::CONFLICT, "{key}");
        assert_eq!(
            got.text(),
            format!("key holds a Redis {what}; read it over RESP")
        );
        assert_eq!(
            got.content_type.as_deref(),
            Some("text/plain; charset=utf-8")
        );
        let head = f.call(Method::HEAD, &uri, "").await;
        assert_eq!(head.status, StatusCode::CONFLICT, "{key}");
        assert!(head.body.is_empty());
    }
}

// Proves PUT replaces a structure with bytes and DELETE removes one, as Redis' SET and DEL
// do, while POST (insert only) leaves it in place.
#[tokio::test]
async fn writes_replace_or_remove_a_structure() {
    let f = fixture();
    let [(_, hash, _), (_, list, _), ..] = one_of_each();
    f.store_structure(b"replaced", hash);
    f.store_structure(b"removed", list);
    let posted = f
        .call(Method::POST, "/rest/v2/caches/default/replaced", "no")
        .await;
    assert_eq!(posted.status, StatusCode::CONFLICT);
    assert_eq!(posted.text(), "An entry already exists");
    assert!(
        f.cache()
            .get_entry(b"replaced")
            .unwrap()
            .unwrap()
            .structure()
            .is_some()
    );
    let put = f
        .call(Method::PUT, "/rest/v2/caches/default/replaced", "bytes now")
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    let entry = f.cache().get_entry(b"replaced").unwrap().unwrap();
    assert!(entry.structure().is_none());
    let got = f
        .call(Method::GET, "/rest/v2/caches/default/replaced", "")
        .await;
    assert_eq!(
        (got.status, got.text()),
        (StatusCode::OK, "bytes now".into())
    );
    let deleted = f
        .call(Method::DELETE, "/rest/v2/caches/default/removed", "")
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert!(f.cache().get_entry(b"removed").unwrap().is_none());
}

// Proves `?action=entries` leaves structures out (they have no value to show) while
// `?action=keys` lists every key.
#[tokio::test]
async fn entry_listings_leave_structures_out() {
    let f = fixture();
    f.cache()
        .put(b"plain", b"v", &WriteOptions::default())
        .unwrap();
    for (key, structure, _) in one_of_each() {
        f.store_structure(key.as_bytes(), structure);
    }
    for action in ["entries", "entries&metadata=true"] {
        let listed = f
            .call(
                Method::GET,
                &format!("/rest/v2/caches/default?action={action}"),
                "",
            )
            .await;
        assert_eq!(listed.status, StatusCode::OK);
        let listed: Value = serde_json::from_slice(&listed.body).unwrap();
        let keys: Vec<&str> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["plain"], "{action}");
    }
    let keys = f
        .call(Method::GET, "/rest/v2/caches/default?action=keys", "")
        .await;
    let keys: Value = serde_json::from_slice(&keys.body).unwrap();
    let mut keys: Vec<&str> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|key| key.as_str().unwrap())
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["a-hash", "a-list", "a-set", "a-zset", "plain"]);
}
