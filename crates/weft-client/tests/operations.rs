//! Every operation of `weft-client` against one Weft server: plain, conditional and versioned
//! writes, metadata and expiration, bulk reads and writes, size/clear/stats/ping, missing
//! caches, and client listeners (each kind of event, removal, re-registration after the
//! server closes the listener's connection).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Node;
use weft_client::{
    Client, ClientConfig, Error, Expiry, Intelligence, ListenerEvent, ListenerOptions,
};

const CACHES: &str =
    "[caches.default]\n[caches.expiring]\n[caches.expiring.expiration]\ninterval = \"50ms\"\n";

async fn client(node: &Node) -> Client {
    let config = ClientConfig::new([node.addr])
        .with_timeouts(Duration::from_secs(5), Duration::from_secs(10));
    Client::connect(config).await.unwrap()
}

async fn next_event(listener: &mut weft_client::ClientListener) -> ListenerEvent {
    tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .expect("an event within 10 s")
        .expect("the listener is open")
}

// Proves each single-key operation's answers: absent and present reads, conditional writes
// that do and do not apply, versioned writes against the current and a stale version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_key_operations() {
    let node = Node::start("", CACHES);
    let cache = client(&node).await.cache("default").await.unwrap();
    assert_eq!(cache.get("k").await.unwrap(), None);
    assert!(!cache.contains_key("k").await.unwrap());
    cache.put("k", "v1").await.unwrap();
    assert_eq!(cache.get("k").await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(cache.contains_key("k").await.unwrap());
    assert!(
        !cache
            .put_if_absent("k", "no", Expiry::DEFAULT)
            .await
            .unwrap()
    );
    assert!(
        cache
            .put_if_absent("k2", "yes", Expiry::DEFAULT)
            .await
            .unwrap()
    );
    assert!(cache.replace("k", "v2", Expiry::DEFAULT).await.unwrap());
    assert!(!cache.replace("absent", "x", Expiry::DEFAULT).await.unwrap());
    let entry = cache
        .get_with_metadata("k")
        .await
        .unwrap()
        .expect("present");
    assert_eq!(&entry.value[..], b"v2");
    assert_eq!(entry.lifespan, None);
    assert!(
        !cache
            .replace_with_version("k", "v3", entry.version + 1000, Expiry::DEFAULT)
            .await
            .unwrap()
    );
    assert!(
        cache
            .replace_with_version("k", "v3", entry.version, Expiry::DEFAULT)
            .await
            .unwrap()
    );
    let entry = cache
        .get_with_metadata("k")
        .await
        .unwrap()
        .expect("present");
    assert_eq!(&entry.value[..], b"v3");
    assert!(
        !cache
            .remove_with_version("k", entry.version + 1000)
            .await
            .unwrap()
    );
    assert!(cache.remove_with_version("k", entry.version).await.unwrap());
    assert_eq!(cache.get("k").await.unwrap(), None);
    assert!(cache.remove("k2").await.unwrap());
    assert!(!cache.remove("k2").await.unwrap());
    assert_eq!(cache.get_with_metadata("k2").await.unwrap(), None);
}

// Proves lifespans and max idle reach the server (metadata reports them, in whole seconds)
// and a short lifespan makes the entry disappear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiration() {
    let node = Node::start("", CACHES);
    let cache = client(&node).await.cache("expiring").await.unwrap();
    let expiry = Expiry::lifespan(Duration::from_secs(60)).with_max_idle(Duration::from_secs(30));
    cache.put_with("long", "v", expiry).await.unwrap();
    let entry = cache
        .get_with_metadata("long")
        .await
        .unwrap()
        .expect("present");
    assert_eq!(
        entry.lifespan.map(|(_, s)| s),
        Some(Duration::from_secs(60))
    );
    assert_eq!(
        entry.max_idle.map(|(_, s)| s),
        Some(Duration::from_secs(30))
    );
    cache
        .put_with("short", "v", Expiry::lifespan(Duration::from_millis(200)))
        .await
        .unwrap();
    assert!(cache.contains_key("short").await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(cache.get("short").await.unwrap(), None);
    // NEVER overrides nothing here (no defaults) but must be accepted.
    cache
        .put_with("immortal", "v", Expiry::NEVER)
        .await
        .unwrap();
    assert_eq!(
        cache
            .get_with_metadata("immortal")
            .await
            .unwrap()
            .unwrap()
            .lifespan,
        None
    );
}

// Proves bulk operations, size, clear, stats and ping, and that a missing cache is reported
// as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_and_cache_wide_operations() {
    let node = Node::start("", CACHES);
    let client = client(&node).await;
    let cache = client.cache("default").await.unwrap();
    let entries: Vec<(String, String)> = (0..50)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    cache
        .put_all(entries.clone(), Expiry::DEFAULT)
        .await
        .unwrap();
    assert_eq!(cache.size().await.unwrap(), 50);
    let mut keys: Vec<String> = entries.iter().map(|(k, _)| k.clone()).collect();
    keys.push("missing".into());
    let found = cache.get_all(&keys).await.unwrap();
    assert_eq!(found.len(), 50);
    assert_eq!(found.get(&b"k7"[..]).map(|v| &v[..]), Some(&b"v7"[..]));
    let stats = cache.stats().await.unwrap();
    assert_eq!(
        stats.get("currentNumberOfEntries").map(String::as_str),
        Some("50")
    );
    let ping = cache.ping().await.unwrap();
    assert!(ping.server_version.is_some_and(|v| v >= 40), "{ping:?}");
    assert_eq!(client.protocol_version(node.addr).await.unwrap(), 40);
    cache.clear().await.unwrap();
    assert_eq!(cache.size().await.unwrap(), 0);
    match client.cache("no-such-cache").await {
        Err(Error::CacheNotFound(name)) => assert_eq!(name, "no-such-cache"),
        other => panic!("expected CacheNotFound, got {other:?}"),
    }
    // A basic client (no topology) works the same.
    let basic =
        Client::connect(ClientConfig::new([node.addr]).with_intelligence(Intelligence::Basic))
            .await
            .unwrap()
            .cache("default")
            .await
            .unwrap();
    basic.put("b", "1").await.unwrap();
    assert_eq!(cache.get("b").await.unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(basic.segment_count(), None);
    assert_eq!(
        cache.segment_count(),
        Some(256),
        "a hash-aware client got the topology"
    );
}

// Proves a listener gets created, modified, removed and expired events for writes by another
// client, only the kinds it asked for, the current state when asked, and none after removal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners() {
    let node = Node::start("", CACHES);
    let client = client(&node).await;
    let writer = client.cache("expiring").await.unwrap();
    writer.put("before", "x").await.unwrap();
    let mut all = writer
        .add_listener(ListenerOptions {
            include_current_state: true,
            ..ListenerOptions::default()
        })
        .await
        .unwrap();
    assert!(
        matches!(next_event(&mut all).await, ListenerEvent::Created { key, .. } if &key[..] == b"before")
    );
    let mut removals = writer
        .add_listener(ListenerOptions {
            created: false,
            modified: false,
            expired: false,
            ..ListenerOptions::default()
        })
        .await
        .unwrap();
    writer.put("k", "1").await.unwrap();
    writer.put("k", "2").await.unwrap();
    writer.remove("k").await.unwrap();
    writer
        .put_with("short", "v", Expiry::lifespan(Duration::from_millis(100)))
        .await
        .unwrap();
    let version = writer
        .get_with_metadata("short")
        .await
        .unwrap()
        .unwrap()
        .version;
    assert!(
        matches!(next_event(&mut all).await, ListenerEvent::Created { key, .. } if &key[..] == b"k")
    );
    assert!(
        matches!(next_event(&mut all).await, ListenerEvent::Modified { key, .. } if &key[..] == b"k")
    );
    assert!(
        matches!(next_event(&mut all).await, ListenerEvent::Removed { key } if &key[..] == b"k")
    );
    assert_eq!(
        next_event(&mut all).await,
        ListenerEvent::Created {
            key: bytes::Bytes::from_static(b"short"),
            version
        }
    );
    // The reaper runs every 50 ms.
    assert!(
        matches!(next_event(&mut all).await, ListenerEvent::Expired { key } if &key[..] == b"short")
    );
    assert!(
        matches!(next_event(&mut removals).await, ListenerEvent::Removed { key } if &key[..] == b"k")
    );
    all.remove().await.unwrap();
    writer.put("after", "x").await.unwrap();
    writer.remove("after").await.unwrap();
    // The removals listener sees the removal; had it seen the put first, this would fail.
    assert!(
        matches!(next_event(&mut removals).await, ListenerEvent::Removed { key } if &key[..] == b"after")
    );
}

// Proves a listener whose connection the server drops is registered again, says events may
// have been missed, and goes on receiving events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_reregisters_after_its_connection_breaks() {
    let node = Node::start("", CACHES);
    let proxy = common::proxy::Proxy::start(node.addr).await;
    let through_proxy = Client::connect(
        ClientConfig::new([proxy.addr])
            .with_intelligence(Intelligence::Basic)
            .with_retries(3, Duration::from_millis(20)),
    )
    .await
    .unwrap()
    .cache("default")
    .await
    .unwrap();
    let writer = client(&node).await.cache("default").await.unwrap();
    let mut listener = through_proxy
        .add_listener(ListenerOptions::default())
        .await
        .unwrap();
    writer.put("a", "1").await.unwrap();
    assert!(
        matches!(next_event(&mut listener).await, ListenerEvent::Created { key, .. } if &key[..] == b"a")
    );
    proxy.cut();
    // Writes go on while the listener is away (it may be back before or after any of them);
    // before the next event it receives, it must say that it may have missed some.
    let mut said_missed = false;
    for round in 0..100 {
        writer.put(format!("k{round}"), "1").await.unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(200), listener.next()).await;
        match waited {
            Err(_) => continue,
            Ok(Some(ListenerEvent::Missed)) => said_missed = true,
            Ok(Some(ListenerEvent::Created { key, .. })) if said_missed => {
                assert!(key.starts_with(b"k"), "{key:?}");
                return;
            }
            // Sent before the cut landed.
            Ok(Some(ListenerEvent::Created { .. })) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("the listener never came back (said it missed events: {said_missed})");
}

// Proves a server that answers with bytes that break the protocol makes the request fail with
// a protocol error (not a hang or a panic), and the client opens a fresh connection after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_are_protocol_errors() {
    use bytes::BytesMut;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use weft_hotrod::response::{put_ping_body, write_header};
    use weft_hotrod::{Decoder, MediaType, Request, Status, opcode};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // A server that answers PINGs properly and anything else with an unknown status byte.
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut decoder = Decoder::default();
                let mut input = BytesMut::new();
                loop {
                    while let Ok(Some(frame)) = decoder.decode(&mut input) {
                        let id = frame.header.message_id;
                        let mut out = BytesMut::new();
                        if frame.request == Request::Ping {
                            write_header(
                                &mut out,
                                id,
                                opcode::response_of(opcode::PING),
                                Status::Success,
                                None,
                            );
                            put_ping_body(
                                &mut out,
                                40,
                                &MediaType::Unspecified,
                                &MediaType::Unspecified,
                                40,
                                &[],
                            );
                        } else {
                            write_header(
                                &mut out,
                                id,
                                opcode::response_of(frame.header.opcode),
                                Status::Success,
                                None,
                            );
                            out[3] = 0x77;
                        }
                        if stream.write_all(&out).await.is_err() {
                            return;
                        }
                    }
                    match stream.read_buf(&mut input).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    let cache =
        Client::connect(ClientConfig::new([addr]).with_retries(0, Duration::from_millis(1)))
            .await
            .unwrap()
            .cache("")
            .await
            .unwrap();
    for _ in 0..2 {
        match cache.get("k").await {
            Err(Error::Protocol { address, .. }) => assert_eq!(address, addr),
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }
    cache.ping().await.unwrap();
}
