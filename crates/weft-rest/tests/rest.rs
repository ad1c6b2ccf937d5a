//! The REST router driven in-process, request by request, on a manual clock.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use base64::Engine;
use http_body_util::BodyExt;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use tower::ServiceExt;
use weft_core::{CacheConfig, CacheManager, ManagerConfig, ManualClock, WhenFull};
use weft_rest::{RestState, router};

/// 2023-11-14T22:13:20Z, a whole second, so HTTP dates (second precision) are exact.
const START_MS: u64 = 1_700_000_000_000;

struct Fixture {
    app: Router,
    manager: CacheManager,
    clock: ManualClock,
}

fn fixture_with(config: ManagerConfig) -> Fixture {
    let clock = ManualClock::new(START_MS);
    let manager = CacheManager::with_clock(config, Arc::new(clock.clone())).unwrap();
    let state = RestState::new(manager.clone())
        .with_server_version("Weft test")
        .with_node_name("node-a");
    Fixture {
        app: router(state),
        manager,
        clock,
    }
}

fn fixture() -> Fixture {
    fixture_with(ManagerConfig::default())
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|value| value.to_str().unwrap())
    }

    fn text(&self) -> String {
        String::from_utf8(self.body.to_vec()).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text()))
    }
}

impl Fixture {
    async fn send(&self, request: Request<Body>) -> Reply {
        let response = self.app.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Reply {
        let mut builder = Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        self.send(builder.body(body.into()).unwrap()).await
    }

    async fn get(&self, uri: &str, headers: &[(&str, &str)]) -> Reply {
        self.call(Method::GET, uri, headers, Body::empty()).await
    }

    async fn put(&self, uri: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Reply {
        self.call(Method::PUT, uri, headers, body).await
    }

    fn stored(&self, cache: &str, key: &[u8]) -> Option<Vec<u8>> {
        self.manager
            .cache(cache)
            .unwrap()
            .get(key)
            .unwrap()
            .map(|value| value.to_vec())
    }

    fn version(&self, cache: &str, key: &[u8]) -> u64 {
        self.manager
            .cache(cache)
            .unwrap()
            .get_entry(key)
            .unwrap()
            .unwrap()
            .version()
    }
}

/// Request headers, then the `timeToLiveSeconds` and `maxIdleTimeSeconds` they must yield.
type HeaderCase = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
);

fn http_date(epoch_ms: u64) -> String {
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_millis(epoch_ms))
}

// Proves PUT, GET, HEAD and DELETE of an entry answer Infinispan's statuses and bodies.
#[tokio::test]
async fn entry_round_trip_and_statuses() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/greeting";
    assert_eq!(
        f.put(uri, &[], "hello").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        f.stored("default", b"greeting").as_deref(),
        Some(&b"hello"[..])
    );
    let got = f.get(uri, &[]).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), "hello");
    let head = f.call(Method::HEAD, uri, &[], Body::empty()).await;
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.body.is_empty());
    assert_eq!(head.header("content-length"), Some("5"));
    assert_eq!(head.header("etag"), got.header("etag"));
    assert_eq!(
        f.put(uri, &[], "again").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(f.get(uri, &[]).await.text(), "again");
    let deleted = f.call(Method::DELETE, uri, &[], Body::empty()).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(f.get(uri, &[]).await.status, StatusCode::NOT_FOUND);
    let head = f.call(Method::HEAD, uri, &[], Body::empty()).await;
    assert_eq!(head.status, StatusCode::NOT_FOUND);
    let deleted = f.call(Method::DELETE, uri, &[], Body::empty()).await;
    assert_eq!(deleted.status, StatusCode::NOT_FOUND);
}

// Proves POST inserts only: a second POST is 409 with Infinispan's text and leaves the value.
#[tokio::test]
async fn post_is_insert_only() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    let first = f.call(Method::POST, uri, &[], "one").await;
    assert_eq!(first.status, StatusCode::NO_CONTENT);
    let second = f.call(Method::POST, uri, &[], "two").await;
    assert_eq!(second.status, StatusCode::CONFLICT);
    assert_eq!(second.text(), "An entry already exists");
    assert_eq!(f.stored("default", b"k").as_deref(), Some(&b"one"[..]));
}

// Proves every route addressing a missing cache answers 404 with a reason.
#[tokio::test]
async fn unknown_cache_is_404() {
    let f = fixture();
    let cases = [
        (Method::GET, "/rest/v2/caches/nope/k"),
        (Method::PUT, "/rest/v2/caches/nope/k"),
        (Method::POST, "/rest/v2/caches/nope/k"),
        (Method::DELETE, "/rest/v2/caches/nope/k"),
        (Method::GET, "/rest/v2/caches/nope"),
        (Method::HEAD, "/rest/v2/caches/nope"),
        (Method::DELETE, "/rest/v2/caches/nope"),
        (Method::GET, "/rest/v2/caches/nope?action=size"),
        (Method::GET, "/rest/v2/caches/nope?action=keys"),
        (Method::POST, "/rest/v2/caches/nope?action=clear"),
        (Method::POST, "/rest/v2/caches/nope?action=stats-reset"),
    ];
    for (method, uri) in cases {
        let is_head = method == Method::HEAD;
        let reply = f.call(method.clone(), uri, &[], "v").await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method} {uri}");
        if !is_head {
            assert!(
                reply.text().contains("nope"),
                "{method} {uri}: {}",
                reply.text()
            );
        }
    }
}

// Proves an immortal entry's GET headers: octet-stream, quoted version ETag, -1 times, no dates.
#[tokio::test]
async fn headers_of_immortal_entry() {
    let f = fixture();
    f.put("/rest/v2/caches/default/k", &[], "v").await;
    let got = f.get("/rest/v2/caches/default/k", &[]).await;
    assert_eq!(got.header("content-type"), Some("application/octet-stream"));
    let version = f.version("default", b"k");
    assert_eq!(got.header("etag"), Some(format!("\"{version}\"").as_str()));
    assert_eq!(got.header("timetoliveseconds"), Some("-1"));
    assert_eq!(got.header("maxidletimeseconds"), Some("-1"));
    assert_eq!(got.header("created"), Some("-1"));
    assert_eq!(got.header("lastused"), Some("-1"));
    assert_eq!(got.header("last-modified"), None);
    assert_eq!(got.header("expires"), None);
    assert_eq!(got.header("cache-control"), None);
}

// Proves a mortal entry reports its lifetimes, times, Last-Modified, Expires and Cache-Control.
#[tokio::test]
async fn headers_of_mortal_entry() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    let put = f
        .put(
            uri,
            &[("timeToLiveSeconds", "60"), ("maxIdleTimeSeconds", "30")],
            "v",
        )
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    f.clock.advance_ms(2_000);
    let got = f.get(uri, &[]).await;
    assert_eq!(got.header("timetoliveseconds"), Some("60"));
    assert_eq!(got.header("maxidletimeseconds"), Some("30"));
    assert_eq!(got.header("created"), Some(START_MS.to_string().as_str()));
    // The read itself touched the entry, and the headers show that read.
    let now = START_MS + 2_000;
    assert_eq!(got.header("lastused"), Some(now.to_string().as_str()));
    assert_eq!(
        got.header("last-modified"),
        Some(http_date(START_MS).as_str())
    );
    assert_eq!(
        got.header("expires"),
        Some(http_date(now + 30_000).as_str())
    );
    assert_eq!(got.header("cache-control"), Some("max-age=30"));
}

// Proves Accept only relabels the value: text/plain and application/json are echoed.
#[tokio::test]
async fn accept_picks_content_type() {
    let f = fixture();
    f.put("/rest/v2/caches/default/k", &[], "{\"a\":1}").await;
    let cases = [
        ("text/plain", "text/plain; charset=UTF-8"),
        ("application/json", "application/json"),
        ("*/*", "application/octet-stream"),
        ("application/xml", "application/octet-stream"),
        ("text/plain;q=0.2, application/json", "application/json"),
    ];
    for (accept, expected) in cases {
        let got = f
            .get("/rest/v2/caches/default/k", &[("Accept", accept)])
            .await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.header("content-type"), Some(expected), "{accept}");
        assert_eq!(got.text(), "{\"a\":1}");
    }
}

// Proves timeToLiveSeconds expires the entry on the cache clock: alive at the deadline, gone after.
#[tokio::test]
async fn time_to_live_expires() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    f.put(uri, &[("timeToLiveSeconds", "10")], "v").await;
    f.clock.advance_ms(10_000);
    assert_eq!(f.get(uri, &[]).await.status, StatusCode::OK);
    f.clock.advance_ms(1);
    assert_eq!(f.get(uri, &[]).await.status, StatusCode::NOT_FOUND);
}

// Proves maxIdleTimeSeconds expires an entry only when it goes unread that long.
#[tokio::test]
async fn max_idle_expires_unless_read() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    f.put(uri, &[("maxIdleTimeSeconds", "5")], "v").await;
    for _ in 0..3 {
        f.clock.advance_ms(4_000);
        assert_eq!(f.get(uri, &[]).await.status, StatusCode::OK);
    }
    f.clock.advance_ms(5_001);
    assert_eq!(f.get(uri, &[]).await.status, StatusCode::NOT_FOUND);
}

// Proves the documented header rules against a cache with default lifespan 100 s and max idle 50 s.
#[tokio::test]
async fn expiration_header_rules_use_cache_defaults() {
    let f = fixture();
    let toml = "[expiration]\nlifespan = \"100s\"\nmax-idle = \"50s\"\n";
    let created = f
        .call(
            Method::POST,
            "/rest/v2/caches/timed",
            &[("Content-Type", "application/toml")],
            toml,
        )
        .await;
    assert_eq!(created.status, StatusCode::OK, "{}", created.text());
    let cases: [HeaderCase; 7] = [
        (&[], "100", "50"),
        (&[("timeToLiveSeconds", "-1")], "-1", "50"),
        (
            &[("timeToLiveSeconds", "0"), ("maxIdleTimeSeconds", "0")],
            "100",
            "50",
        ),
        (&[("timeToLiveSeconds", "0")], "100", "-1"),
        (&[("maxIdleTimeSeconds", "0")], "-1", "50"),
        (
            &[("timeToLiveSeconds", "0"), ("maxIdleTimeSeconds", "7")],
            "100",
            "7",
        ),
        (
            &[("timeToLiveSeconds", "20"), ("maxIdleTimeSeconds", "-3")],
            "20",
            "-1",
        ),
    ];
    for (index, (headers, lifespan, max_idle)) in cases.iter().enumerate() {
        let uri = format!("/rest/v2/caches/timed/k{index}");
        assert_eq!(
            f.put(&uri, headers, "v").await.status,
            StatusCode::NO_CONTENT
        );
        let got = f.get(&uri, &[]).await;
        assert_eq!(
            got.header("timetoliveseconds"),
            Some(*lifespan),
            "{headers:?}"
        );
        assert_eq!(
            got.header("maxidletimeseconds"),
            Some(*max_idle),
            "{headers:?}"
        );
    }
}

// Proves malformed expiration headers are 400 with a reason naming the header, and store nothing.
#[tokio::test]
async fn bad_expiration_headers_are_400() {
    let f = fixture();
    for (name, value) in [
        ("timeToLiveSeconds", "ten"),
        ("timeToLiveSeconds", "1.5"),
        ("maxIdleTimeSeconds", "99999999999999999999"),
        ("maxIdleTimeSeconds", ""),
    ] {
        let reply = f
            .put("/rest/v2/caches/default/k", &[(name, value)], "v")
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{name}: {value}");
        assert!(reply.text().contains(name), "{}", reply.text());
        let posted = f
            .call(
                Method::POST,
                "/rest/v2/caches/default/k",
                &[(name, value)],
                "v",
            )
            .await;
        assert_eq!(posted.status, StatusCode::BAD_REQUEST);
    }
    assert_eq!(f.stored("default", b"k"), None);
}

// Proves If-None-Match on GET answers 304 (with the ETag, no body) for the current tag only.
#[tokio::test]
async fn if_none_match_on_get() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    f.put(uri, &[], "v").await;
    let etag = f.get(uri, &[]).await.header("etag").unwrap().to_owned();
    let weak = format!("W/{etag}");
    let listed = format!("\"999\", {etag}");
    let cases = [
        (etag.as_str(), StatusCode::NOT_MODIFIED),
        (weak.as_str(), StatusCode::NOT_MODIFIED),
        ("*", StatusCode::NOT_MODIFIED),
        (listed.as_str(), StatusCode::NOT_MODIFIED),
        ("\"999\"", StatusCode::OK),
    ];
    for (tag, expected) in cases {
        let got = f.get(uri, &[("If-None-Match", tag)]).await;
        assert_eq!(got.status, expected, "{tag}");
        if expected == StatusCode::NOT_MODIFIED {
            assert!(got.body.is_empty());
            assert_eq!(got.header("etag"), Some(etag.as_str()));
        } else {
            assert_eq!(got.text(), "v");
        }
    }
    // A stale tag after a write is a full answer again.
    f.put(uri, &[], "w").await;
    let got = f.get(uri, &[("If-None-Match", etag.as_str())]).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), "w");
    // If-Match on GET with a stale tag fails.
    let got = f.get(uri, &[("If-Match", etag.as_str())]).await;
    assert_eq!(got.status, StatusCode::PRECONDITION_FAILED);
}

// Proves If-Match makes PUT and DELETE conditional on the current version (412 otherwise).
#[tokio::test]
async fn if_match_on_put_and_delete() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    f.put(uri, &[], "v1").await;
    let first = format!("\"{}\"", f.version("default", b"k"));
    let stale = f.put(uri, &[("If-Match", "\"12345\"")], "lost").await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(f.stored("default", b"k").as_deref(), Some(&b"v1"[..]));
    let weak = format!("W/{first}");
    let weak_put = f.put(uri, &[("If-Match", weak.as_str())], "lost").await;
    assert_eq!(
        weak_put.status,
        StatusCode::PRECONDITION_FAILED,
        "weak tags never match If-Match"
    );
    let fresh = f.put(uri, &[("If-Match", first.as_str())], "v2").await;
    assert_eq!(fresh.status, StatusCode::NO_CONTENT);
    assert_eq!(f.stored("default", b"k").as_deref(), Some(&b"v2"[..]));
    // The first tag is stale now: it can neither write nor delete.
    let again = f.put(uri, &[("If-Match", first.as_str())], "v3").await;
    assert_eq!(again.status, StatusCode::PRECONDITION_FAILED);
    let delete = f
        .call(
            Method::DELETE,
            uri,
            &[("If-Match", first.as_str())],
            Body::empty(),
        )
        .await;
    assert_eq!(delete.status, StatusCode::PRECONDITION_FAILED);
    assert!(f.stored("default", b"k").is_some());
    let second = format!("\"{}\"", f.version("default", b"k"));
    let delete = f
        .call(
            Method::DELETE,
            uri,
            &[("If-Match", second.as_str())],
            Body::empty(),
        )
        .await;
    assert_eq!(delete.status, StatusCode::NO_CONTENT);
    assert_eq!(f.stored("default", b"k"), None);
    // On a missing key, If-Match cannot hold: PUT is 412 and stores nothing; DELETE is 404.
    let absent = f.put(uri, &[("If-Match", "*")], "v").await;
    assert_eq!(absent.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(f.stored("default", b"k"), None);
    let delete = f
        .call(Method::DELETE, uri, &[("If-Match", "*")], Body::empty())
        .await;
    assert_eq!(delete.status, StatusCode::NOT_FOUND);
}

// Proves If-None-Match on PUT: `*` creates only, the current tag answers 304 as Infinispan does.
#[tokio::test]
async fn if_none_match_on_put() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    assert_eq!(
        f.put(uri, &[("If-None-Match", "*")], "v1").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        f.put(uri, &[("If-None-Match", "*")], "v2").await.status,
        StatusCode::PRECONDITION_FAILED
    );
    let current = format!("\"{}\"", f.version("default", b"k"));
    let same = f
        .put(uri, &[("If-None-Match", current.as_str())], "v3")
        .await;
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);
    assert_eq!(f.stored("default", b"k").as_deref(), Some(&b"v1"[..]));
    let other = f.put(uri, &[("If-None-Match", "\"0\"")], "v4").await;
    assert_eq!(other.status, StatusCode::NO_CONTENT);
    assert_eq!(f.stored("default", b"k").as_deref(), Some(&b"v4"[..]));
    let delete = f
        .call(
            Method::DELETE,
            uri,
            &[("If-None-Match", "*")],
            Body::empty(),
        )
        .await;
    assert_eq!(delete.status, StatusCode::PRECONDITION_FAILED);
}

// Proves date preconditions compare with the entry's write time, and bad dates are 400.
#[tokio::test]
async fn date_preconditions() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    f.put(uri, &[("timeToLiveSeconds", "600")], "v").await;
    f.clock.advance_ms(5_000);
    let at_write = http_date(START_MS);
    let before = http_date(START_MS - 1_000);
    let same = f
        .get(uri, &[("If-Modified-Since", at_write.as_str())])
        .await;
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);
    let older = f.get(uri, &[("If-Modified-Since", before.as_str())]).await;
    assert_eq!(older.status, StatusCode::OK);
    let unmodified = f
        .get(uri, &[("If-Unmodified-Since", before.as_str())])
        .await;
    assert_eq!(unmodified.status, StatusCode::PRECONDITION_FAILED);
    let put = f
        .put(uri, &[("If-Unmodified-Since", before.as_str())], "w")
        .await;
    assert_eq!(put.status, StatusCode::PRECONDITION_FAILED);
    let put = f
        .put(uri, &[("If-Unmodified-Since", at_write.as_str())], "w")
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    let bad = f.get(uri, &[("If-Modified-Since", "yesterday")]).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.text().contains("if-modified-since"), "{}", bad.text());
}

// Proves Cache-Control min-fresh hides entries that expire sooner, as Infinispan does.
#[tokio::test]
async fn min_fresh() {
    let f = fixture();
    let uri = "/rest/v2/caches/default/k";
    f.put(uri, &[("timeToLiveSeconds", "10")], "v").await;
    assert_eq!(
        f.get(uri, &[("Cache-Control", "min-fresh=5")]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        f.get(uri, &[("Cache-Control", "no-cache, min-fresh=10")])
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        f.get(uri, &[("Cache-Control", "min-fresh=soon")])
            .await
            .status,
        StatusCode::BAD_REQUEST
    );
}

// Proves Key-Content-Type application/octet-stream reads the URL key as Base64 (either alphabet).
#[tokio::test]
async fn base64_keys() {
    let f = fixture();
    let key = [0xfb_u8, 0xff, 0x00, 0x61];
    let standard = base64::engine::general_purpose::STANDARD.encode(key);
    assert!(
        standard.contains('+') && standard.contains('/'),
        "{standard}"
    );
    let encoded: String = utf8_percent_encode(&standard, NON_ALPHANUMERIC).collect();
    let binary = [("Key-Content-Type", "application/octet-stream")];
    let put = f
        .put(&format!("/rest/v2/caches/default/{encoded}"), &binary, "v")
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT, "{}", put.text());
    assert_eq!(f.stored("default", &key).as_deref(), Some(&b"v"[..]));
    let url_safe = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key);
    let got = f
        .get(&format!("/rest/v2/caches/default/{url_safe}"), &binary)
        .await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.text(), "v");
    let bad = f
        .get("/rest/v2/caches/default/not%20base64!", &binary)
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.text().contains("Base64"), "{}", bad.text());
}

// Proves hex keys (`encoding=hex`, and Infinispan's `type=Bytes`) and refuses unsupported key types.
#[tokio::test]
async fn hex_keys_and_unsupported_key_types() {
    let f = fixture();
    let hex = [("Key-Content-Type", "application/octet-stream; encoding=hex")];
    assert_eq!(
        f.put("/rest/v2/caches/default/0x00ff61", &hex, "v")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        f.stored("default", &[0x00, 0xff, 0x61]).as_deref(),
        Some(&b"v"[..])
    );
    let bytes_type = [("Key-Content-Type", "application/x-java-object;type=Bytes")];
    assert_eq!(
        f.get("/rest/v2/caches/default/0x00FF61", &bytes_type)
            .await
            .text(),
        "v"
    );
    for key in ["0x0", "0xgg", "zz"] {
        let reply = f.get(&format!("/rest/v2/caches/default/{key}"), &hex).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{key}");
        assert!(reply.text().contains("hex"), "{}", reply.text());
    }
    for key_type in [
        "application/x-java-object; type=java.lang.Integer",
        "application/xml",
        "application/octet-stream; encoding=rot13",
        "garbage",
    ] {
        let reply = f
            .get(
                "/rest/v2/caches/default/k",
                &[("Key-Content-Type", key_type)],
            )
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{key_type}");
        assert!(
            reply.text().contains("Key-Content-Type"),
            "{}",
            reply.text()
        );
    }
    // The Java String type is the default: the text is the key.
    f.put("/rest/v2/caches/default/plain", &[], "p").await;
    let string_type = [(
        "Key-Content-Type",
        "application/x-java-object; type=java.lang.String",
    )];
    assert_eq!(
        f.get("/rest/v2/caches/default/plain", &string_type)
            .await
            .text(),
        "p"
    );
}

// Proves percent-encoded keys decode to their exact bytes: Unicode, `/` as %2F, and non-UTF-8.
#[tokio::test]
async fn percent_encoded_keys() {
    let f = fixture();
    let key = "a/b é€ 😀?#%";
    let encoded: String = utf8_percent_encode(key, NON_ALPHANUMERIC).collect();
    assert!(encoded.contains("%2F"));
    let uri = format!("/rest/v2/caches/default/{encoded}");
    assert_eq!(
        f.put(&uri, &[], "unicode").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        f.stored("default", key.as_bytes()).as_deref(),
        Some(&b"unicode"[..])
    );
    assert_eq!(f.get(&uri, &[]).await.text(), "unicode");
    let raw = "/rest/v2/caches/default/%FF%FEbin";
    assert_eq!(
        f.put(raw, &[], "bytes").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        f.stored("default", b"\xff\xfebin").as_deref(),
        Some(&b"bytes"[..])
    );
    assert_eq!(f.get(raw, &[]).await.text(), "bytes");
    // An unencoded `/` is a path separator, not part of a key: no such route.
    assert_eq!(
        f.get("/rest/v2/caches/default/a/b", &[]).await.status,
        StatusCode::NOT_FOUND
    );
}

// Proves the cache collection routes: list, HEAD 204/404, details JSON, DELETE 200/404.
#[tokio::test]
async fn cache_collection_routes() {
    let f = fixture();
    let list = f.get("/rest/v2/caches", &[]).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.header("content-type"), Some("application/json"));
    assert_eq!(list.json(), json!(["default"]));
    let head = f
        .call(Method::HEAD, "/rest/v2/caches/default", &[], Body::empty())
        .await;
    assert_eq!(head.status, StatusCode::NO_CONTENT);
    f.put("/rest/v2/caches/default/k", &[], "v").await;
    let details = f.get("/rest/v2/caches/default", &[]).await.json();
    assert_eq!(details["size"], json!(1));
    assert_eq!(details["stats"]["current_number_of_entries"], json!(1));
    assert_eq!(details["stats"]["stores"], json!(1));
    assert_eq!(
        details["configuration"]["local-cache"]["segments"],
        json!(256)
    );
    assert_eq!(details["mode"], json!("LOCAL"));
    assert_eq!(details["bounded"], json!(false));
    let detailed = f.get("/rest/v2/caches?action=detailed", &[]).await.json();
    assert_eq!(detailed[0]["name"], json!("default"));
    assert_eq!(detailed[0]["status"], json!("RUNNING"));
    assert_eq!(
        f.get("/rest/v2/caches?action=bogus", &[]).await.status,
        StatusCode::BAD_REQUEST
    );
    let removed = f
        .call(
            Method::DELETE,
            "/rest/v2/caches/default",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(removed.status, StatusCode::OK);
    assert!(f.manager.cache("default").is_none());
    assert_eq!(f.get("/rest/v2/caches", &[]).await.json(), json!([]));
    let again = f
        .call(
            Method::DELETE,
            "/rest/v2/caches/default",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
}

// Proves POST creates caches from Infinispan JSON, Weft JSON, TOML or an empty body; twice is 400.
#[tokio::test]
async fn create_cache_formats() {
    let f = fixture();
    let json = [("Content-Type", "application/json")];
    let infinispan = r#"{"local-cache":{"expiration":{"lifespan":"5000"},"memory":{"max-count":"100","when-full":"REMOVE"},"statistics":true}}"#;
    let reply = f
        .call(Method::POST, "/rest/v2/caches/ispn", &json, infinispan)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let config = f.manager.cache("ispn").unwrap().config().clone();
    assert_eq!(config.memory.max_count, Some(100));
    assert_eq!(config.expiration.lifespan, Some(Duration::from_secs(5)));
    let reply = f
        .call(
            Method::POST,
            "/rest/v2/caches/own",
            &[("Content-Type", "application/json; charset=utf-8")],
            r#"{"segments": 8}"#,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(f.manager.cache("own").unwrap().config().segments, 8);
    let toml = "segments = 16\n[memory]\nmax-count = 5\nwhen-full = \"exception\"\n";
    let reply = f
        .call(
            Method::POST,
            "/rest/v2/caches/tomlish",
            &[("Content-Type", "application/toml")],
            toml,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let config = f.manager.cache("tomlish").unwrap().config().clone();
    assert_eq!(config.segments, 16);
    assert_eq!(config.memory.when_full, WhenFull::Exception);
    let reply = f
        .call(Method::POST, "/rest/v2/caches/plain", &[], Body::empty())
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        f.manager.cache("plain").unwrap().config(),
        &CacheConfig::default()
    );
    let again = f
        .call(Method::POST, "/rest/v2/caches/plain", &[], Body::empty())
        .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST);
    assert!(again.text().contains("already exists"), "{}", again.text());
    let names: BTreeSet<String> =
        serde_json::from_slice(&f.get("/rest/v2/caches", &[]).await.body).unwrap();
    assert_eq!(
        names,
        ["default", "ispn", "own", "plain", "tomlish"]
            .map(String::from)
            .into()
    );
}

// Proves invalid configurations are 400 with the error's line and column in the body.
#[tokio::test]
async fn bad_configurations_name_the_line() {
    let f = fixture();
    let cases = [
        (
            "application/json",
            "{\n\"segmentz\": 8}",
            "<json>:2:",
            "unknown field",
        ),
        (
            "application/json",
            "{\"segments\": 8,\n\n oops}",
            "<json>:3:",
            "key must be a string",
        ),
        (
            "application/json",
            r#"{"invalidation-cache":{}}"#,
            "<json>:1:",
            "not supported",
        ),
        (
            "application/toml",
            "segments = 64\nsegmnts = 3\n",
            "<toml>:2:",
            "unknown field",
        ),
        (
            "application/toml",
            "[expiration]\nlifespan = \"10 parsecs\"\n",
            "<toml>:2:",
            "invalid duration",
        ),
    ];
    for (content_type, body, place, reason) in cases {
        let reply = f
            .call(
                Method::POST,
                "/rest/v2/caches/broken",
                &[("Content-Type", content_type)],
                body,
            )
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let text = reply.text();
        assert!(
            text.starts_with(place) && text.contains(reason),
            "{body}: {text}"
        );
    }
    assert!(f.manager.cache("broken").is_none());
}

// Proves `?template=` makes the cache Infinispan's template names (POST and PUT), and that
// unknown, unsupported and ambiguous requests are 400 and create nothing.
#[tokio::test]
async fn create_cache_from_templates() {
    let f = fixture();
    let reply = f
        .call(
            Method::POST,
            "/rest/v2/caches/dist?template=org.infinispan.DIST_SYNC",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let config = f.manager.cache("dist").unwrap().config().clone();
    assert_eq!(config.mode, weft_core::CacheMode::Distributed);
    assert_eq!(config.replication, weft_core::Replication::Sync);
    let shown = f
        .get("/rest/v2/caches/dist?action=config", &[])
        .await
        .json();
    assert_eq!(shown["distributed-cache"]["mode"], "SYNC", "{shown}");
    let reply = f
        .put(
            "/rest/v2/caches/repl?template=org.infinispan.REPL_ASYNC",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let config = f.manager.cache("repl").unwrap().config().clone();
    assert_eq!(config.mode, weft_core::CacheMode::Replicated);
    assert_eq!(config.replication, weft_core::Replication::Async);
    let unknown = f
        .call(
            Method::POST,
            "/rest/v2/caches/x?template=org.infinispan.NOPE",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        unknown.text(),
        "ISPN000436: Cache 'org.infinispan.NOPE' has been requested, but no matching cache configuration exists"
    );
    let invalidation = f
        .put(
            "/rest/v2/caches/x?template=org.infinispan.INVALIDATION_SYNC",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(invalidation.status, StatusCode::BAD_REQUEST);
    assert!(
        invalidation.text().contains("does not support"),
        "{}",
        invalidation.text()
    );
    let both = f
        .call(
            Method::POST,
            "/rest/v2/caches/x?template=org.infinispan.LOCAL",
            &[("Content-Type", "application/json")],
            r#"{"segments": 8}"#,
        )
        .await;
    assert_eq!(both.status, StatusCode::BAD_REQUEST);
    assert!(f.manager.cache("x").is_none());
}

// Proves unsupported configuration media types are 415 and invalid names 400.
#[tokio::test]
async fn create_cache_refusals() {
    let f = fixture();
    let xml = f
        .call(
            Method::POST,
            "/rest/v2/caches/x",
            &[("Content-Type", "application/xml")],
            "<local-cache/>",
        )
        .await;
    assert_eq!(xml.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(xml.text().contains("application/xml"), "{}", xml.text());
    let untyped = f.call(Method::POST, "/rest/v2/caches/x", &[], "{}").await;
    assert_eq!(untyped.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let reserved = f
        .call(Method::POST, "/rest/v2/caches/___x", &[], Body::empty())
        .await;
    assert_eq!(reserved.status, StatusCode::BAD_REQUEST);
    assert!(reserved.text().contains("reserved"), "{}", reserved.text());
    let not_utf8 = f
        .call(
            Method::POST,
            "/rest/v2/caches/x",
            &[("Content-Type", "application/json")],
            vec![0xff_u8, 0xfe],
        )
        .await;
    assert_eq!(not_utf8.status, StatusCode::BAD_REQUEST);
    let taken_db = f
        .call(
            Method::POST,
            "/rest/v2/caches/x",
            &[("Content-Type", "application/toml")],
            "resp-database = 0\n",
        )
        .await;
    assert_eq!(taken_db.status, StatusCode::BAD_REQUEST);
    assert!(f.manager.cache("x").is_none());
}

// Proves PUT on a cache creates it, is 200 when it exists alike, and 400 for a different config.
#[tokio::test]
async fn put_cache_creates_or_accepts() {
    let f = fixture();
    let json = [("Content-Type", "application/json")];
    assert_eq!(
        f.put("/rest/v2/caches/c", &json, r#"{"segments": 4}"#)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(f.manager.cache("c").unwrap().config().segments, 4);
    assert_eq!(
        f.put("/rest/v2/caches/c", &json, r#"{"segments": 4}"#)
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        f.put("/rest/v2/caches/c", &[], Body::empty()).await.status,
        StatusCode::OK
    );
    let different = f
        .put("/rest/v2/caches/c", &json, r#"{"segments": 8}"#)
        .await;
    assert_eq!(different.status, StatusCode::BAD_REQUEST);
    assert!(
        different.text().contains("different configuration"),
        "{}",
        different.text()
    );
    assert_eq!(
        f.put("/rest/v2/caches/d", &[], Body::empty()).await.status,
        StatusCode::OK
    );
    assert!(f.manager.cache("d").is_some());
}

// Proves ?action=size, keys and entries (with limit and metadata) answer the cache's contents.
#[tokio::test]
async fn size_keys_and_entries() {
    let f = fixture();
    for key in ["a", "b", "c"] {
        f.put(
            &format!("/rest/v2/caches/default/{key}"),
            &[],
            format!("value-{key}"),
        )
        .await;
    }
    f.put(
        "/rest/v2/caches/default/d",
        &[("timeToLiveSeconds", "30"), ("maxIdleTimeSeconds", "20")],
        "value-d",
    )
    .await;
    let size = f.get("/rest/v2/caches/default?action=size", &[]).await;
    assert_eq!(size.status, StatusCode::OK);
    assert_eq!(size.text(), "4");
    let keys: BTreeSet<String> =
        serde_json::from_slice(&f.get("/rest/v2/caches/default?action=keys", &[]).await.body)
            .unwrap();
    assert_eq!(keys, ["a", "b", "c", "d"].map(String::from).into());
    let limited = f
        .get("/rest/v2/caches/default?action=keys&limit=2", &[])
        .await
        .json();
    assert_eq!(limited.as_array().unwrap().len(), 2);
    let all = f
        .get("/rest/v2/caches/default?action=keys&limit=-1", &[])
        .await
        .json();
    assert_eq!(all.as_array().unwrap().len(), 4);
    let entries = f
        .get("/rest/v2/caches/default?action=entries", &[])
        .await
        .json();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 4);
    for entry in entries {
        let key = entry["key"].as_str().unwrap();
        assert_eq!(entry["value"], json!(format!("value-{key}")));
        assert!(entry.get("version").is_none());
    }
    let with_metadata = f
        .get("/rest/v2/caches/default?action=entries&metadata=true", &[])
        .await
        .json();
    let d = with_metadata
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["key"] == "d")
        .unwrap()
        .clone();
    let version = f.version("default", b"d");
    assert_eq!(
        d,
        json!({
            "key": "d", "value": "value-d", "timeToLiveSeconds": 30, "maxIdleTimeSeconds": 20,
            "created": START_MS, "lastUsed": START_MS, "expireTime": START_MS + 20_000,
            "version": version,
        })
    );
    let a = with_metadata
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["key"] == "a")
        .unwrap()
        .clone();
    assert_eq!(a["timeToLiveSeconds"], json!(-1));
    assert_eq!(a["expireTime"], json!(-1));
    let one = f
        .get("/rest/v2/caches/default?action=entries&limit=1", &[])
        .await
        .json();
    assert_eq!(one.as_array().unwrap().len(), 1);
    for bad in [
        "action=keys&limit=many",
        "action=entries&metadata=maybe",
        "action=explode",
    ] {
        let reply = f.get(&format!("/rest/v2/caches/default?{bad}"), &[]).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

// Proves listings write non-UTF-8 bytes lossily by default and exactly in Base64 or hex on request.
#[tokio::test]
async fn binary_listings() {
    let f = fixture();
    f.manager
        .cache("default")
        .unwrap()
        .put(
            b"\xffkey",
            b"\xfevalue",
            &weft_core::WriteOptions::default(),
        )
        .unwrap();
    let lossy = f
        .get("/rest/v2/caches/default?action=entries", &[])
        .await
        .json();
    assert_eq!(
        lossy,
        json!([{"key": "\u{fffd}key", "value": "\u{fffd}value"}])
    );
    let base64 = f
        .get(
            "/rest/v2/caches/default?action=entries",
            &[("Key-Content-Type", "application/octet-stream")],
        )
        .await
        .json();
    let engine = base64::engine::general_purpose::STANDARD;
    assert_eq!(
        base64,
        json!([{"key": engine.encode(b"\xffkey"), "value": engine.encode(b"\xfevalue")}])
    );
    let hex = f
        .get(
            "/rest/v2/caches/default?action=keys",
            &[("Key-Content-Type", "application/octet-stream; encoding=hex")],
        )
        .await
        .json();
    assert_eq!(hex, json!(["0xff6b6579"]));
    // The listed Base64 key addresses the entry with the same header.
    let key: String = utf8_percent_encode(&engine.encode(b"\xffkey"), NON_ALPHANUMERIC).collect();
    let got = f
        .get(
            &format!("/rest/v2/caches/default/{key}"),
            &[("Key-Content-Type", "application/octet-stream")],
        )
        .await;
    assert_eq!(got.body.as_ref(), b"\xfevalue");
}

// Proves ?action=stats uses Infinispan's field names and counts, and stats-reset zeroes them.
#[tokio::test]
async fn stats_and_reset() {
    let f = fixture();
    f.put("/rest/v2/caches/default/k", &[], "v").await;
    f.get("/rest/v2/caches/default/k", &[]).await;
    f.get("/rest/v2/caches/default/missing", &[]).await;
    f.call(
        Method::DELETE,
        "/rest/v2/caches/default/k",
        &[],
        Body::empty(),
    )
    .await;
    f.call(
        Method::DELETE,
        "/rest/v2/caches/default/k",
        &[],
        Body::empty(),
    )
    .await;
    let stats = f
        .get("/rest/v2/caches/default?action=stats", &[])
        .await
        .json();
    for (field, value) in [
        ("hits", 1),
        ("misses", 1),
        ("retrievals", 2),
        ("stores", 1),
        ("remove_hits", 1),
        ("remove_misses", 1),
        ("evictions", 0),
        ("current_number_of_entries", 0),
    ] {
        assert_eq!(stats[field], json!(value), "{field}");
    }
    for field in [
        "time_since_start",
        "time_since_reset",
        "data_memory_used",
        "average_read_time",
        "average_read_time_nanos",
        "average_write_time",
        "average_write_time_nanos",
        "average_remove_time",
        "average_remove_time_nanos",
        "expirations",
    ] {
        assert!(stats[field].is_u64(), "{field}: {stats}");
    }
    let reset = f
        .call(
            Method::POST,
            "/rest/v2/caches/default?action=stats-reset",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(reset.status, StatusCode::NO_CONTENT);
    let stats = f
        .get("/rest/v2/caches/default?action=stats", &[])
        .await
        .json();
    assert_eq!(stats["hits"], json!(0));
    assert_eq!(stats["stores"], json!(0));
}

// Proves ?action=config answers a configuration that creates an identical cache.
#[tokio::test]
async fn config_round_trips() {
    let f = fixture();
    let toml = "segments = 32\nstatistics = false\n[expiration]\nlifespan = \"90s\"\n\
                interval = \"5s\"\n[memory]\nmax-size = \"1MiB\"\nwhen-full = \"exception\"\n";
    let reply = f
        .call(
            Method::POST,
            "/rest/v2/caches/source",
            &[("Content-Type", "application/toml")],
            toml,
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let config = f.get("/rest/v2/caches/source?action=config", &[]).await;
    assert_eq!(config.status, StatusCode::OK);
    assert!(
        config.json()["local-cache"].is_object(),
        "{}",
        config.text()
    );
    let copy = f
        .call(
            Method::POST,
            "/rest/v2/caches/copy",
            &[("Content-Type", "application/json")],
            config.body.clone(),
        )
        .await;
    assert_eq!(
        copy.status,
        StatusCode::OK,
        "{}: {}",
        config.text(),
        copy.text()
    );
    assert_eq!(
        f.manager.cache("copy").unwrap().config(),
        f.manager.cache("source").unwrap().config()
    );
}

// Proves ?action=clear empties the cache, and unknown actions on any method are 400.
#[tokio::test]
async fn clear_and_unknown_actions() {
    let f = fixture();
    f.put("/rest/v2/caches/default/k", &[], "v").await;
    let clear = f
        .call(
            Method::POST,
            "/rest/v2/caches/default?action=clear",
            &[],
            Body::empty(),
        )
        .await;
    assert_eq!(clear.status, StatusCode::NO_CONTENT);
    assert_eq!(f.manager.cache("default").unwrap().size(), 0);
    for (method, uri) in [
        (Method::GET, "/rest/v2/caches/default?action=nope"),
        (Method::POST, "/rest/v2/caches/default?action=nope"),
        (Method::PUT, "/rest/v2/caches/default?action=clear"),
        (Method::GET, "/rest/v2/caches/default/k?action=distribution"),
        (Method::POST, "/rest/v2/container?action=nope"),
        (Method::POST, "/rest/v2/container"),
        (Method::POST, "/rest/v2/server?action=nope"),
    ] {
        let reply = f.call(method.clone(), uri, &[], Body::empty()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{method} {uri}");
        assert!(!reply.text().is_empty());
    }
}

// Proves the container routes and their deprecated cache-managers aliases answer alike.
#[tokio::test]
async fn container_health_and_aliases() {
    let f = fixture();
    f.call(Method::POST, "/rest/v2/caches/second", &[], Body::empty())
        .await;
    f.put("/rest/v2/caches/default/k", &[], "v").await;
    for base in ["/rest/v2/container", "/rest/v2/cache-managers/default"] {
        let info = f.get(base, &[]).await;
        assert_eq!(info.status, StatusCode::OK, "{base}");
        let info = info.json();
        assert_eq!(info["cluster_name"], json!("weft"));
        assert_eq!(info["version"], json!("Weft test"));
        assert_eq!(info["cluster_members"], json!(["node-a"]));
        assert_eq!(
            info["defined_caches"][1],
            json!({"name": "second", "started": true})
        );
        let health = f.get(&format!("{base}/health"), &[]).await.json();
        assert_eq!(
            health,
            json!({
                "cluster_health": {
                    "cluster_name": "weft", "health_status": "HEALTHY",
                    "number_of_nodes": 1, "node_names": ["node-a"], "unreachable_nodes": [],
                },
                "cache_health": [
                    {"status": "HEALTHY", "cache_name": "default"},
                    {"status": "HEALTHY", "cache_name": "second"},
                ],
            })
        );
        let head = f
            .call(Method::HEAD, &format!("{base}/health"), &[], Body::empty())
            .await;
        assert_eq!(head.status, StatusCode::OK);
        assert!(head.body.is_empty());
        let status = f.get(&format!("{base}/health/status"), &[]).await;
        assert_eq!(
            status.header("content-type"),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(status.text(), "HEALTHY");
        let stats = f.get(&format!("{base}/stats"), &[]).await.json();
        assert_eq!(stats["stores"], json!(1));
        assert_eq!(stats["current_number_of_entries"], json!(1));
    }
    let server = f.get("/rest/v2/server", &[]).await;
    assert_eq!(server.json(), json!({"version": "Weft test"}));
}

/// The lifecycle actions, by every path that takes one.
const LIFECYCLE_ACTIONS: [&str; 3] = [
    "/rest/v2/server?action=stop",
    "/rest/v2/container?action=shutdown",
    "/rest/v2/cache-managers/default?action=shutdown",
];

/// A POST to `uri` from `client` (as the server tags requests), with extra headers.
fn lifecycle_request(uri: &str, client: [u8; 4], headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::post(uri);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(Body::empty()).unwrap();
    request
        .extensions_mut()
        .insert(weft_rest::ClientAddress(std::net::SocketAddr::from((
            client, 40000,
        ))));
    request
}

/// A router whose shutdown hook counts its calls; with `password`, behind a guard that asks
/// every request for HTTP Basic `default:<password>` (as the server's does when a password
/// is set).
fn counting_shutdown(password: Option<&'static str>) -> (Router, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    let mut state = RestState::new(manager).with_shutdown(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    if let Some(password) = password {
        state = state.with_guard(Arc::new(move |access| match access.credentials {
            Some((b"default", presented)) if presented == password.as_bytes() => {
                weft_rest::Verdict::Allowed(Some("default".to_owned()))
            }
            _ => weft_rest::Verdict::Unauthenticated(
                "wrong user name or password",
                weft_rest::Challenge::Basic,
            ),
        }));
    }
    (router(state), calls)
}

// Proves stop and shutdown actions from loopback call the hook, and answer 501 when there
// is none.
#[tokio::test]
async fn shutdown_hook() {
    let (app, calls) = counting_shutdown(None);
    for uri in LIFECYCLE_ACTIONS {
        let request = lifecycle_request(uri, [127, 0, 0, 1], &[]);
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT, "{uri}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let f = fixture();
    let request = lifecycle_request("/rest/v2/server?action=stop", [127, 0, 0, 1], &[]);
    assert_eq!(f.send(request).await.status, StatusCode::NOT_IMPLEMENTED);
}

// Proves lifecycle actions without credentials are taken from loopback only (403 from
// elsewhere, and from a request with no client address), and that behind a guard that asks
// for credentials they need them from loopback too: 401 with a challenge when missing or
// wrong, accepted with them.
#[tokio::test]
async fn lifecycle_actions_need_loopback_or_credentials() {
    let remote = [127, 0, 0, 2];
    let (app, calls) = counting_shutdown(None);
    for uri in LIFECYCLE_ACTIONS {
        let response = app
            .clone()
            .oneshot(lifecycle_request(uri, remote, &[]))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{uri}");
    }
    // No client address at all (an embedding program's own request) is not loopback.
    let bare = Request::post("/rest/v2/server?action=stop")
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(bare).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    let (app, calls) = counting_shutdown(Some("s3cret"));
    let basic = |credentials: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(credentials)
        )
    };
    let refused = [
        Vec::new(),
        vec![("authorization", "Bearer s3cret".to_owned())],
        vec![("authorization", basic("default:wrong"))],
        vec![("authorization", basic("s3cret"))],
        vec![("authorization", "s3cret".to_owned())],
        vec![("x-weft-forwarded", "1".to_owned())],
    ];
    for headers in &refused {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        for client in [remote, [127, 0, 0, 1]] {
            for uri in LIFECYCLE_ACTIONS {
                let response = app
                    .clone()
                    .oneshot(lifecycle_request(uri, client, &headers))
                    .await
                    .unwrap();
                assert_eq!(
                    response.status(),
                    StatusCode::UNAUTHORIZED,
                    "{uri} {headers:?} from {client:?}"
                );
                assert!(
                    response
                        .headers()
                        .get("www-authenticate")
                        .is_some_and(|v| v.to_str().unwrap().starts_with("Basic ")),
                    "{uri}"
                );
            }
        }
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "a refused action stopped the server"
    );
    for client in [remote, [127, 0, 0, 1]] {
        let authorization = basic("default:s3cret");
        let request = lifecycle_request(
            "/rest/v2/server?action=stop",
            client,
            &[("authorization", &authorization)],
        );
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::NO_CONTENT, "{client:?}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

// Proves a guard's `Wait` holds the request and shows it again, with the instant it was first
// shown, and that `Throttled` answers 429 with `Retry-After` and the guard's message.
#[tokio::test]
async fn a_guard_may_hold_a_request_or_throttle_it() {
    let shown = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&shown);
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    let app = router(RestState::new(manager).with_guard(Arc::new(move |access| {
        let mut seen = seen.lock().unwrap();
        seen.push(access.first_attempt);
        match (access.path, seen.len()) {
            ("/rest/v2/caches", 1) => weft_rest::Verdict::Wait(
                std::time::Instant::now() + std::time::Duration::from_millis(50),
            ),
            ("/rest/v2/caches", _) => weft_rest::Verdict::Allowed(Some("u".to_owned())),
            _ => weft_rest::Verdict::Throttled(
                "too many failed authentications".to_owned(),
                std::time::Duration::from_millis(2500),
            ),
        }
    })));
    let started = std::time::Instant::now();
    let response = app
        .clone()
        .oneshot(Request::get("/rest/v2/caches").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(started.elapsed() >= std::time::Duration::from_millis(50));
    {
        let seen = shown.lock().unwrap();
        assert_eq!(seen.len(), 2, "shown again after waiting");
        assert_eq!(seen[0], seen[1], "with the instant first shown");
    }
    let response = app
        .oneshot(Request::get("/rest/v2/server").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(response.headers()["retry-after"], "2");
    let body = axum::body::to_bytes(response.into_body(), 1 << 16)
        .await
        .unwrap();
    assert!(
        String::from_utf8_lossy(&body).contains("too many failed authentications"),
        "{body:?}"
    );
}

/// A cluster as a REST router sees it: the operations it hands over are recorded (every
/// key reads as absent at its owner), and so are the caches defined and removed through it.
/// The cluster knows a cache named `clustered`.
#[derive(Default)]
struct RecordingCluster {
    executed: std::sync::Mutex<Vec<weft_core::operation::Operation>>,
    defined: std::sync::Mutex<Vec<(String, weft_core::CacheMode)>>,
    removed: std::sync::Mutex<Vec<String>>,
}

impl weft_rest::Forwarder for RecordingCluster {
    fn execute(
        &self,
        _: weft_core::Cache,
        operation: weft_core::operation::Operation,
    ) -> weft_core::persistence::BoxFuture<
        Result<weft_core::operation::Applied, weft_core::CacheError>,
    > {
        self.executed.lock().unwrap().push(operation);
        Box::pin(async { Ok(weft_core::operation::Applied::Entry(None)) })
    }

    fn size(&self, _: weft_core::Cache) -> weft_core::persistence::BoxFuture<Result<u64, String>> {
        Box::pin(async { Err("not in this test".to_owned()) })
    }

    fn list(
        &self,
        _: weft_core::Cache,
        _: usize,
        _: fn(&weft_core::CacheEntry) -> bool,
    ) -> weft_core::persistence::BoxFuture<Result<Vec<weft_core::CacheEntry>, String>> {
        Box::pin(async { Err("not in this test".to_owned()) })
    }

    fn clear(&self, _: weft_core::Cache) -> weft_core::persistence::BoxFuture<Result<(), String>> {
        Box::pin(async { Err("not in this test".to_owned()) })
    }

    fn define(
        &self,
        name: String,
        config: CacheConfig,
    ) -> weft_core::persistence::BoxFuture<Result<(), String>> {
        self.defined.lock().unwrap().push((name, config.mode));
        Box::pin(async { Ok(()) })
    }

    fn remove(&self, name: String) -> weft_core::persistence::BoxFuture<Result<bool, String>> {
        let known = name == "clustered";
        self.removed.lock().unwrap().push(name);
        Box::pin(async move { Ok(known) })
    }
}

// Proves that on a clustered server, creating a clustered cache (from a template or a body,
// by POST or PUT) and removing any cache but a local one go through the cluster, while a
// local cache is created and removed on this node alone.
#[tokio::test]
async fn cache_admin_goes_through_the_cluster() {
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    let forwarder = Arc::new(RecordingCluster::default());
    let app = router(
        RestState::new(manager.clone())
            .with_forwarder(Arc::clone(&forwarder) as Arc<dyn weft_rest::Forwarder>),
    );
    let send = |method: Method, uri: &str, body: &'static str| {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("Content-Type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let app = app.clone();
        async move { app.oneshot(request).await.unwrap().status() }
    };
    let dist = "/rest/v2/caches/dist?template=org.infinispan.DIST_SYNC";
    assert_eq!(send(Method::POST, dist, "").await, StatusCode::OK);
    let repl = "/rest/v2/caches/repl?template=org.infinispan.REPL_ASYNC";
    assert_eq!(send(Method::PUT, repl, "").await, StatusCode::OK);
    let body = r#"{"distributed-cache":{"mode":"SYNC"}}"#;
    assert_eq!(
        send(Method::PUT, "/rest/v2/caches/body", body).await,
        StatusCode::OK
    );
    let local = "/rest/v2/caches/here?template=org.infinispan.LOCAL";
    assert_eq!(send(Method::POST, local, "").await, StatusCode::OK);
    assert_eq!(
        forwarder.defined.lock().unwrap().clone(),
        [
            ("dist".to_owned(), weft_core::CacheMode::Distributed),
            ("repl".to_owned(), weft_core::CacheMode::Replicated),
            ("body".to_owned(), weft_core::CacheMode::Distributed),
        ]
    );
    assert!(
        manager.cache("here").is_some(),
        "a local cache is made here"
    );
    assert_eq!(
        send(Method::DELETE, "/rest/v2/caches/here", "").await,
        StatusCode::OK
    );
    assert!(manager.cache("here").is_none());
    assert_eq!(
        send(Method::DELETE, "/rest/v2/caches/clustered", "").await,
        StatusCode::OK
    );
    assert_eq!(
        send(Method::DELETE, "/rest/v2/caches/nowhere", "").await,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        forwarder.removed.lock().unwrap().clone(),
        ["clustered", "nowhere"]
    );
}

// Proves entry requests on a clustered cache become operations handed to the cluster
// (which runs each at its key's owner) and never touch this node's copy, whatever a client
// sends (the old `x-weft-forwarded` header means nothing); a write under preconditions
// travels as the conditional-write function, to be checked at the owner.
#[tokio::test]
async fn entry_requests_on_a_clustered_cache_run_as_operations_at_the_owner() {
    use weft_core::operation::Operation;
    let mut caches = std::collections::BTreeMap::new();
    caches.insert(
        "grid".to_owned(),
        CacheConfig {
            mode: weft_core::CacheMode::Distributed,
            ..CacheConfig::default()
        },
    );
    let manager = CacheManager::new(ManagerConfig { caches }).unwrap();
    let cluster = Arc::new(RecordingCluster::default());
    let app = router(
        RestState::new(manager.clone())
            .with_forwarder(Arc::clone(&cluster) as Arc<dyn weft_rest::Forwarder>),
    );
    let uri = "/rest/v2/caches/grid/stray";
    for (method, status) in [
        (Method::PUT, StatusCode::NO_CONTENT),
        (Method::POST, StatusCode::NO_CONTENT),
        (Method::GET, StatusCode::NOT_FOUND),
        (Method::DELETE, StatusCode::NOT_FOUND),
    ] {
        let request = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header("x-weft-forwarded", "1")
            .body(Body::from("copy"))
            .unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        assert_eq!(response.status(), status, "{method}");
    }
    let request = Request::put(uri)
        .header("if-match", "\"7\"")
        .body(Body::from("copy"))
        .unwrap();
    app.clone().oneshot(request).await.unwrap();
    let cache = manager.cache("grid").unwrap();
    assert_eq!(cache.size(), 0, "a request wrote this node's copy");
    let executed = cluster.executed.lock().unwrap().clone();
    assert!(
        matches!(
            executed.as_slice(),
            [
                Operation::Put { key: k1, value, .. },
                Operation::PutIfAbsent { key: k2, .. },
                Operation::Get { key: k3 },
                Operation::Remove { key: k4, .. },
                Operation::Invoke { function, key: k5, write: true, .. },
            ] if [k2, k3, k4, k5].iter().all(|k| k == &k1)
                && k1.ends_with(b"stray")
                && value.ends_with(b"copy")
                && function == "weft.rest.conditional"
        ),
        "{executed:?}"
    );
}

/// Checks every line of a 0.0.4 exposition and answers the samples by series.
fn parse_exposition(text: &str) -> Vec<(String, f64)> {
    let mut typed: Vec<(String, String)> = Vec::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(!help.is_empty(), "{line}");
            assert!(name.starts_with("weft_"), "{line}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(kind == "counter" || kind == "gauge", "{line}");
            assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
            assert!(
                !typed.iter().any(|(seen, _)| seen == name),
                "declared twice: {line}"
            );
            typed.push((name.to_owned(), kind.to_owned()));
        } else {
            assert!(!line.starts_with('#'), "{line}");
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
            let name = series.split('{').next().unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            let (last, _) = typed
                .last()
                .unwrap_or_else(|| panic!("sample before TYPE: {line}"));
            assert_eq!(last, name, "sample outside its family: {line}");
            if let Some(labels) = series.strip_prefix(name) {
                if !labels.is_empty() {
                    assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
                }
            }
            samples.push((series.to_owned(), value));
        }
    }
    samples
}

// Proves /metrics is valid Prometheus 0.0.4 text with the expected families and values.
#[tokio::test]
async fn metrics_exposition() {
    let f = fixture();
    f.put("/rest/v2/caches/default/k", &[], "v").await;
    f.get("/rest/v2/caches/default/k", &[]).await;
    f.get("/rest/v2/caches/default/k", &[]).await;
    f.get("/rest/v2/caches/default/none", &[]).await;
    f.call(
        Method::POST,
        "/rest/v2/caches/other%22%5Cname",
        &[],
        Body::empty(),
    )
    .await;
    let reply = f.get("/metrics", &[]).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let samples = parse_exposition(&reply.text());
    let value = |series: &str| {
        samples
            .iter()
            .find(|(name, _)| name == series)
            .map(|(_, value)| *value)
            .unwrap_or_else(|| panic!("missing {series} in\n{}", reply.text()))
    };
    assert_eq!(value("weft_cache_hits_total{cache=\"default\"}"), 2.0);
    assert_eq!(value("weft_cache_misses_total{cache=\"default\"}"), 1.0);
    assert_eq!(value("weft_cache_stores_total{cache=\"default\"}"), 1.0);
    assert_eq!(value("weft_cache_entries{cache=\"default\"}"), 1.0);
    assert_eq!(
        value("weft_cache_hits_total{cache=\"other\\\"\\\\name\"}"),
        0.0
    );
    assert!(value("weft_cache_memory_bytes{cache=\"default\"}") > 0.0);
    assert!(value("weft_cache_average_read_time_seconds{cache=\"default\"}") >= 0.0);
    assert_eq!(value("weft_container_hits_total"), 2.0);
    assert_eq!(value("weft_container_entries"), 1.0);
    assert_eq!(value("weft_caches"), 2.0);
    assert_eq!(
        value("weft_build_info{version=\"Weft test\",node=\"node-a\"}"),
        1.0
    );
    for family in [
        "weft_cache_remove_hits_total",
        "weft_cache_remove_misses_total",
        "weft_cache_evictions_total",
        "weft_cache_expirations_total",
        "weft_cache_average_write_time_seconds",
        "weft_cache_average_remove_time_seconds",
        "weft_cache_time_since_start_seconds",
        "weft_cache_time_since_reset_seconds",
        "weft_cache_statistics_enabled",
        "weft_container_stores_total",
        "weft_container_memory_bytes",
        "weft_uptime_seconds",
    ] {
        assert!(
            reply.text().contains(&format!("# TYPE {family} ")),
            "missing {family}"
        );
    }
    let open = f
        .get(
            "/metrics",
            &[("Accept", "application/openmetrics-text; version=1.0.0")],
        )
        .await;
    assert!(
        open.header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = open.text();
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# TYPE weft_cache_hits counter\n"));
    assert!(text.contains("weft_cache_hits_total{cache=\"default\"} 2\n"));
}

// Proves a 10 MiB value round-trips (past axum's 2 MiB default) and oversized configs are 413.
#[tokio::test]
async fn large_values_and_body_limits() {
    let f = fixture();
    let value: Vec<u8> = (0..10 << 20).map(|i: u32| (i % 251) as u8).collect();
    let put = f
        .put("/rest/v2/caches/default/big", &[], value.clone())
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    let got = f.get("/rest/v2/caches/default/big", &[]).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body.len(), value.len());
    assert!(got.body == value);
    let config = vec![b' '; weft_rest::CONFIG_BODY_BYTES_MAX + 1];
    let too_big = f
        .call(
            Method::POST,
            "/rest/v2/caches/huge",
            &[("Content-Type", "application/json")],
            config,
        )
        .await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
}

// Proves a wrong method is 405 with Allow, and an unknown path is 404, both with text.
#[tokio::test]
async fn wrong_method_and_unknown_path() {
    let f = fixture();
    let patch = f
        .call(Method::PATCH, "/rest/v2/caches/default/k", &[], "v")
        .await;
    assert_eq!(patch.status, StatusCode::METHOD_NOT_ALLOWED);
    let allow = patch.header("allow").unwrap();
    assert!(
        allow.contains("GET") && allow.contains("PUT") && allow.contains("DELETE"),
        "{allow}"
    );
    assert!(!patch.text().is_empty());
    let delete_all = f
        .call(Method::DELETE, "/rest/v2/caches", &[], Body::empty())
        .await;
    assert_eq!(delete_all.status, StatusCode::METHOD_NOT_ALLOWED);
    let put_metrics = f.put("/metrics", &[], "x").await;
    assert_eq!(put_metrics.status, StatusCode::METHOD_NOT_ALLOWED);
    let missing = f.get("/rest/v2/nothing-here", &[]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(!missing.text().is_empty());
}

// Proves a bounded cache that refuses writes when full answers 507 with the reason.
#[tokio::test]
async fn full_cache_is_507() {
    let f = fixture();
    let toml = "[memory]\nmax-count = 1\nwhen-full = \"exception\"\n";
    f.call(
        Method::POST,
        "/rest/v2/caches/small",
        &[("Content-Type", "application/toml")],
        toml,
    )
    .await;
    assert_eq!(
        f.put("/rest/v2/caches/small/a", &[], "1").await.status,
        StatusCode::NO_CONTENT
    );
    let full = f.put("/rest/v2/caches/small/b", &[], "2").await;
    assert_eq!(full.status, StatusCode::INSUFFICIENT_STORAGE);
    assert!(full.text().contains("full"), "{}", full.text());
    let full = f
        .call(Method::POST, "/rest/v2/caches/small/b", &[], "2")
        .await;
    assert_eq!(full.status, StatusCode::INSUFFICIENT_STORAGE);
    // Overwriting the one entry is still allowed.
    assert_eq!(
        f.put("/rest/v2/caches/small/a", &[], "3").await.status,
        StatusCode::NO_CONTENT
    );
}

// Proves hostile or malformed requests get a 4xx answer, never a panic or a 500.
#[tokio::test]
async fn hostile_requests_are_refused_cleanly() {
    let f = fixture();
    let cases: Vec<Request<Body>> = vec![
        Request::put("/rest/v2/caches/default/%zz%")
            .body(Body::from("v"))
            .unwrap(),
        Request::get("/rest/v2/caches/%FF%FE/k")
            .body(Body::empty())
            .unwrap(),
        Request::get("/rest/v2/caches/%FF%FE")
            .body(Body::empty())
            .unwrap(),
        Request::get("/rest/v2/caches/default?action=keys&limit=%FF")
            .body(Body::empty())
            .unwrap(),
        Request::put("/rest/v2/caches/default/k")
            .header(
                "timeToLiveSeconds",
                HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
            )
            .body(Body::from("v"))
            .unwrap(),
        Request::get("/rest/v2/caches/default/k")
            .header(
                "If-None-Match",
                HeaderValue::from_bytes(b"\"\xff\"").unwrap(),
            )
            .body(Body::empty())
            .unwrap(),
        Request::put("/rest/v2/caches/default/k")
            .header("timeToLiveSeconds", "9223372036854775807")
            .header("maxIdleTimeSeconds", "-9223372036854775808")
            .body(Body::from("v"))
            .unwrap(),
        Request::get("/rest/v2/caches/default/k")
            .header(
                "Key-Content-Type",
                HeaderValue::from_bytes(b"\xff").unwrap(),
            )
            .body(Body::empty())
            .unwrap(),
        Request::get("/rest/v2/caches/default/k")
            .header(
                "Accept",
                HeaderValue::from_bytes(b"\xff;q=abc, ,;,").unwrap(),
            )
            .body(Body::empty())
            .unwrap(),
        Request::post("/rest/v2/caches/x")
            .header("Content-Type", ";;;")
            .body(Body::from("{}"))
            .unwrap(),
        Request::get("/rest/v2/caches/default?action=entries&limit=-99999999999999999999")
            .body(Body::empty())
            .unwrap(),
        Request::get("/metrics")
            .header("Accept", HeaderValue::from_bytes(b"\xff").unwrap())
            .body(Body::empty())
            .unwrap(),
    ];
    for request in cases {
        let description = format!(
            "{} {} {:?}",
            request.method(),
            request.uri(),
            request.headers()
        );
        let reply = f.send(request).await;
        assert!(
            !reply.status.is_server_error(),
            "{description}: {} {}",
            reply.status,
            reply.text()
        );
    }
    // An enormous lifespan is stored as "practically never", not refused or overflowed.
    assert!(f.stored("default", b"k").is_some());
}

// Proves a ProtoStream cache stores what REST sends as ProtoStream, and answers in the type
// asked for: text, raw ProtoStream, or (by default) ProtoStream's JSON; an object it cannot
// store is 415, and listings show keys as text.
#[tokio::test]
async fn protostream_cache_converts_media_types() {
    let f = fixture();
    f.manager.create_cache("p", CacheConfig::default()).unwrap();
    let put = f
        .put(
            "/rest/v2/caches/p/k",
            &[("Content-Type", "text/plain")],
            "héllo",
        )
        .await;
    assert_eq!(put.status, StatusCode::NO_CONTENT);
    assert_eq!(
        f.stored("p", b"\x4a\x01k"),
        Some(b"\x4a\x06h\xc3\xa9llo".to_vec())
    );
    let text = f
        .get("/rest/v2/caches/p/k", &[("Accept", "text/plain")])
        .await;
    assert_eq!(text.text(), "héllo");
    let raw = f
        .get(
            "/rest/v2/caches/p/k",
            &[("Accept", "application/x-protostream")],
        )
        .await;
    assert_eq!(
        raw.header("content-type"),
        Some("application/x-protostream")
    );
    assert_eq!(&raw.body[..], b"\x4a\x06h\xc3\xa9llo");
    let json = f.get("/rest/v2/caches/p/k", &[]).await;
    assert_eq!(json.header("content-type"), Some("application/json"));
    assert_eq!(json.json(), json!({"_type": "string", "_value": "héllo"}));
    let object = f
        .put(
            "/rest/v2/caches/p/o",
            &[("Content-Type", "application/json")],
            "{\"a\":1}",
        )
        .await;
    assert_eq!(object.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(f.stored("p", b"\x4a\x01o"), None);
    let number = f
        .put(
            "/rest/v2/caches/p/n",
            &[("Content-Type", "application/json")],
            "42",
        )
        .await;
    assert_eq!(number.status, StatusCode::NO_CONTENT);
    assert_eq!(f.stored("p", b"\x4a\x01n"), Some(b"\x28\x2a".to_vec()));
    let keys = f.get("/rest/v2/caches/p?action=keys", &[]).await;
    let mut keys: Vec<String> = serde_json::from_value(keys.json()).unwrap();
    keys.sort();
    assert_eq!(keys, ["k", "n"]);
}

// Proves container health follows the cluster, as Infinispan reports it: a cache whose
// segments are moving is HEALTHY_REBALANCING, one cut off from the majority DEGRADED, the
// cluster the worst of its caches — and DEGRADED while a member failure detection no longer
// sees is still among the agreed members.
#[tokio::test]
async fn health_follows_rebalancing_partitions_and_missing_members() {
    use std::sync::Mutex;
    use weft_rest::{CacheTopologyView, ClusterMembers};
    let mut caches = std::collections::BTreeMap::new();
    for name in ["moving", "cut"] {
        caches.insert(name.to_owned(), CacheConfig::default());
    }
    let manager = CacheManager::new(ManagerConfig { caches }).unwrap();
    let view = Arc::new(Mutex::new(ClusterMembers {
        names: vec!["a".into(), "b".into()],
        ..ClusterMembers::default()
    }));
    let shared = Arc::clone(&view);
    let app =
        router(RestState::new(manager).with_cluster_view(move || shared.lock().unwrap().clone()));
    let health = |app: Router| async move {
        let response = app
            .oneshot(
                Request::get("/rest/v2/container/health")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice::<Value>(&body).unwrap()
    };
    let status_of = |report: &Value, cache: &str| {
        report["cache_health"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cache_name"] == cache)
            .map(|c| c["status"].as_str().unwrap().to_owned())
    };
    let report = health(app.clone()).await;
    assert_eq!(report["cluster_health"]["health_status"], "HEALTHY");
    let topology = |cache: &str, phase: &str, degraded: bool| CacheTopologyView {
        cache: cache.into(),
        phase: phase.into(),
        degraded,
        ..CacheTopologyView::default()
    };
    view.lock().unwrap().caches = vec![
        topology("moving", "read-all-write-all", false),
        topology("cut", "stable", false),
    ];
    let report = health(app.clone()).await;
    assert_eq!(
        status_of(&report, "moving").as_deref(),
        Some("HEALTHY_REBALANCING")
    );
    assert_eq!(status_of(&report, "cut").as_deref(), Some("HEALTHY"));
    assert_eq!(
        report["cluster_health"]["health_status"],
        "HEALTHY_REBALANCING"
    );
    view.lock().unwrap().caches[1].degraded = true;
    let report = health(app.clone()).await;
    assert_eq!(status_of(&report, "cut").as_deref(), Some("DEGRADED"));
    assert_eq!(report["cluster_health"]["health_status"], "DEGRADED");
    view.lock().unwrap().caches = vec![topology("moving", "stable", false)];
    view.lock().unwrap().unreachable = vec!["b".into()];
    let report = health(app.clone()).await;
    assert_eq!(report["cluster_health"]["health_status"], "DEGRADED");
    assert_eq!(report["cluster_health"]["unreachable_nodes"], json!(["b"]));
    let response = app
        .oneshot(
            Request::get("/rest/v2/container/health/status")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"DEGRADED");
}

// Proves `GET /rest/v2/cluster/rebalance` reports each clustered cache's rebalance across the
// cluster from the agreed topology: members confirmed, segments arrived, overall progress.
#[tokio::test]
async fn rebalance_reports_progress_across_the_cluster() {
    use weft_rest::{CacheTopologyView, ClusterMembers, MemberRebalanceView, TransferView};
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    let member = |name: &str, segments_to_fetch: u64, confirmed: bool| MemberRebalanceView {
        member: name.into(),
        segments_to_fetch,
        confirmed,
    };
    let caches = vec![
        CacheTopologyView {
            cache: "moving".into(),
            topology_id: 4,
            rebalance_id: 2,
            phase: "read-old-write-all".into(),
            rebalance: vec![member("a", 40, true), member("b", 60, false)],
            transfer: TransferView {
                segments_total: 60,
                segments_done: 30,
                entries: 1_000,
            },
            ..CacheTopologyView::default()
        },
        CacheTopologyView {
            cache: "still".into(),
            phase: "stable".into(),
            ..CacheTopologyView::default()
        },
    ];
    let view = ClusterMembers {
        names: vec!["a".into(), "b".into()],
        caches,
        ..ClusterMembers::default()
    };
    let app = router(
        RestState::new(manager)
            .with_node_name("b")
            .with_cluster_view(move || view.clone()),
    );
    let response = app
        .oneshot(
            Request::get("/rest/v2/cluster/rebalance")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let report: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(report["node_name"], "b");
    assert_eq!(report["rebalancing"], true);
    let moving = &report["caches"][0];
    assert_eq!(moving["cache"], "moving");
    assert_eq!(moving["phase_number"], 1);
    assert_eq!(moving["segments_total"], 100);
    assert_eq!(moving["segments_done"], 70);
    assert_eq!(moving["members_confirmed"], 1);
    assert_eq!(moving["members_total"], 2);
    assert_eq!(
        moving["members"][1],
        json!({"member": "b", "segments_to_fetch": 60, "confirmed": false})
    );
    // 70 of 100 copies and 1 of 6 confirmations.
    assert!((moving["progress"].as_f64().unwrap() - 71.0 / 106.0).abs() < 1e-9);
    let still = &report["caches"][1];
    assert_eq!(still["phase_number"], 0);
    assert_eq!(still["progress"], 1.0);
}

#[tokio::test]
async fn console_files_are_public_and_the_data_is_not() {
    let fixture = fixture();
    let redirect = fixture.get("/console", &[]).await;
    assert_eq!(redirect.status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(redirect.header("location"), Some("/console/"));

    let page = fixture.get("/console/", &[]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(page.text().contains("console.js"));
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("default-src 'none'")
    );
    let script = fixture.get("/console/console.js", &[]).await;
    assert_eq!(script.status, StatusCode::OK);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let etag = script.header("etag").unwrap().to_owned();
    let again = fixture
        .get("/console/console.js", &[("if-none-match", &etag)])
        .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());
    assert_eq!(
        fixture.get("/console/missing.js", &[]).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        fixture.get("/console/../metrics", &[]).await.status,
        StatusCode::NOT_FOUND
    );
    let post = fixture
        .call(Method::POST, "/console/", &[], Body::empty())
        .await;
    assert_eq!(post.status, StatusCode::METHOD_NOT_ALLOWED);

    // With a guard that lets no one in: the files are still served, the data is not, and a
    // script (the console) gets its 401 without a challenge its browser would prompt for.
    let guarded = router(
        RestState::new(fixture.manager.clone()).with_guard(Arc::new(|_access| {
            weft_rest::Verdict::Unauthenticated("no credentials", weft_rest::Challenge::Basic)
        })),
    );
    let send = |uri: &str, xhr: bool| {
        let mut builder = Request::builder().uri(uri);
        if xhr {
            builder = builder.header("x-requested-with", "XMLHttpRequest");
        }
        guarded
            .clone()
            .oneshot(builder.body(Body::empty()).unwrap())
    };
    let page = send("/console/", false).await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let head = guarded
        .clone()
        .oneshot(
            Request::builder()
                .method(Method::HEAD)
                .uri("/console/console.css")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    let browser = send("/rest/v2/caches", false).await.unwrap();
    assert_eq!(browser.status(), StatusCode::UNAUTHORIZED);
    assert!(browser.headers().contains_key("www-authenticate"));
    let script = send("/rest/v2/caches", true).await.unwrap();
    assert_eq!(script.status(), StatusCode::UNAUTHORIZED);
    assert!(!script.headers().contains_key("www-authenticate"));
}

// Proves the readiness endpoint answers what the server's probe says, as a Kubernetes
// readiness probe reads it: 200 READY, 503 STARTING or DRAINING; always ready without a
// probe; and no credentials asked even when every other request needs them.
#[tokio::test]
async fn readiness_reports_the_probe_without_credentials() {
    use weft_rest::Readiness;
    let ready = |app: Router| async move {
        let response = app
            .oneshot(
                Request::get("/rest/v2/container/health/ready")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    };
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    assert_eq!(
        ready(router(RestState::new(manager.clone()))).await,
        (StatusCode::OK, "READY".to_owned())
    );
    let now = Arc::new(std::sync::Mutex::new(Readiness::Starting));
    let probe = Arc::clone(&now);
    let app = router(
        RestState::new(manager)
            .with_readiness(move || *probe.lock().unwrap())
            .with_guard(Arc::new(|_| {
                weft_rest::Verdict::Unauthenticated("no credentials", weft_rest::Challenge::Basic)
            })),
    );
    assert_eq!(
        ready(app.clone()).await,
        (StatusCode::SERVICE_UNAVAILABLE, "STARTING".to_owned())
    );
    *now.lock().unwrap() = Readiness::Ready;
    assert_eq!(
        ready(app.clone()).await,
        (StatusCode::OK, "READY".to_owned())
    );
    *now.lock().unwrap() = Readiness::Draining;
    assert_eq!(
        ready(app).await,
        (StatusCode::SERVICE_UNAVAILABLE, "DRAINING".to_owned())
    );
}
