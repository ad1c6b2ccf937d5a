//! The near cache against a real Weft server: it serves hits, drops what other clients
//! change, and — through a proxy that delays, cuts and refuses its connections — never
//! serves a value older than its staleness bound.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::Node;
use common::proxy::Proxy;
use parking_lot::Mutex;
use tokio::time::Instant;
use weft_client::{Client, ClientConfig, Intelligence, NearCacheConfig, RemoteCache};

const CACHES: &str = "[caches.default]\n";

/// A write as the writer saw it: its sequence number, when it was sent and acknowledged.
#[derive(Debug, Clone, Copy)]
struct Write {
    sequence: u64,
    acknowledged: Instant,
}

/// A read as a reader saw it: when it began, and the sequence number it returned.
#[derive(Debug, Clone)]
struct Read {
    key: &'static str,
    began: Instant,
    sequence: u64,
}

async fn near_client(server: std::net::SocketAddr, bound: Duration) -> RemoteCache {
    let config = ClientConfig::new([server])
        // Everything through the given address (a basic client is told no other).
        .with_intelligence(Intelligence::Basic)
        .with_timeouts(Duration::from_secs(2), Duration::from_secs(5))
        .with_retries(2, Duration::from_millis(10))
        .with_near_cache(NearCacheConfig {
            entries_max: 100,
            staleness_bound: bound,
            heartbeat_interval: bound / 4,
        });
    Client::connect(config)
        .await
        .unwrap()
        .cache("default")
        .await
        .unwrap()
}

// Proves repeated reads are served from the near cache, and a write by another client is
// seen within the heartbeat, long before the bound, through its invalidation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_hits_and_applies_invalidations() {
    let node = Node::start("", CACHES);
    let bound = Duration::from_secs(30);
    let reader = near_client(node.addr, bound).await;
    let writer = Client::connect(ClientConfig::new([node.addr]))
        .await
        .unwrap()
        .cache("default")
        .await
        .unwrap();
    writer.put("k", "1").await.unwrap();
    assert_eq!(reader.get("k").await.unwrap().as_deref(), Some(&b"1"[..]));
    for _ in 0..10 {
        assert_eq!(reader.get("k").await.unwrap().as_deref(), Some(&b"1"[..]));
    }
    let stats = reader.near_cache_stats().unwrap();
    assert_eq!((stats.hits, stats.misses), (10, 1), "{stats:?}");
    writer.put("k", "2").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while reader.get("k").await.unwrap().as_deref() != Some(&b"2"[..]) {
        assert!(Instant::now() < deadline, "the invalidation never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(reader.near_cache_stats().unwrap().invalidations >= 1);
    // A write through the near client itself is read back at once.
    reader.put("k", "3").await.unwrap();
    assert_eq!(reader.get("k").await.unwrap().as_deref(), Some(&b"3"[..]));
    reader.remove("k").await.unwrap();
    assert_eq!(reader.get("k").await.unwrap(), None);
}

/// Writes `key` = 1, 2, 3 ... every `every` until `until`, recording each acknowledgement.
async fn write_steadily(
    writer: RemoteCache,
    key: &'static str,
    every: Duration,
    until: Instant,
    log: Arc<Mutex<HashMap<&'static str, Vec<Write>>>>,
) {
    let mut sequence = 1;
    while Instant::now() < until {
        writer.put(key, sequence.to_string()).await.unwrap();
        log.lock().entry(key).or_default().push(Write {
            sequence,
            acknowledged: Instant::now(),
        });
        sequence += 1;
        tokio::time::sleep(every).await;
    }
}

// Proves the bound holds while invalidations are delayed past it (a proxy holds back what
// the server sends by 1 s), dropped (every connection cut) and impossible (new connections
// refused): every read, hit or not, returns a value the server still held no earlier than the
// bound before the read began. Also proves the near cache did serve hits before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_older_than_the_bound_while_invalidations_lag_or_break() {
    let bound = Duration::from_millis(400);
    let node = Node::start("", CACHES);
    let proxy = Proxy::start(node.addr).await;
    let writer = Client::connect(ClientConfig::new([node.addr]))
        .await
        .unwrap()
        .cache("default")
        .await
        .unwrap();
    let log: Arc<Mutex<HashMap<&'static str, Vec<Write>>>> = Arc::default();
    for key in ["hot", "cold"] {
        writer.put(key, "0").await.unwrap();
        log.lock().entry(key).or_default().push(Write {
            sequence: 0,
            acknowledged: Instant::now(),
        });
    }
    let reader = near_client(proxy.addr, bound).await;

    let start = Instant::now();
    let delay_at = start + Duration::from_millis(2000);
    let cut_at = start + Duration::from_millis(4000);
    let heal_at = start + Duration::from_millis(5000);
    let end = start + Duration::from_millis(7000);
    let writers = vec![
        tokio::spawn(write_steadily(
            writer.clone(),
            "hot",
            Duration::from_millis(30),
            end,
            Arc::clone(&log),
        )),
        // Written less often than the bound: an entry outliving its bound must be extended.
        tokio::spawn(write_steadily(
            writer.clone(),
            "cold",
            Duration::from_millis(1500),
            end,
            Arc::clone(&log),
        )),
    ];

    // Readers of the same key at once: a fetch that completes is read by the others at
    // once, which is when a wrongly extended entry would be served.
    let reads: Arc<Mutex<Vec<Read>>> = Arc::default();
    let readers: Vec<_> = ["hot", "hot", "cold", "cold"]
        .into_iter()
        .map(|key| {
            let reader = reader.clone();
            let reads = Arc::clone(&reads);
            tokio::spawn(async move {
                while Instant::now() < end {
                    let began = Instant::now();
                    if let Ok(Some(value)) = reader.get(key).await {
                        let sequence = std::str::from_utf8(&value).unwrap().parse().unwrap();
                        reads.lock().push(Read {
                            key,
                            began,
                            sequence,
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        })
        .collect();
    let stats_at = |at: Instant| {
        let reader = reader.clone();
        async move {
            tokio::time::sleep_until(at).await;
            reader.near_cache_stats().unwrap()
        }
    };
    let before_faults = stats_at(delay_at).await;
    proxy.set_delay(Duration::from_secs(1));
    tokio::time::sleep_until(cut_at).await;
    proxy.set_delay(Duration::ZERO);
    proxy.set_refuse(true);
    proxy.cut();
    let at_heal = stats_at(heal_at).await;
    proxy.set_refuse(false);
    for task in readers.into_iter().chain(writers) {
        task.await.unwrap();
    }
    let at_end = reader.near_cache_stats().unwrap();
    let reads = reads.lock();

    let log = log.lock();
    let mut violations = Vec::new();
    for read in reads.iter() {
        // The value read was replaced when its successor was acknowledged at the latest; it
        // must still have been current at `began - bound`.
        let successor = log[read.key]
            .iter()
            .find(|write| write.sequence == read.sequence + 1);
        if let Some(successor) = successor
            && successor.acknowledged + bound < read.began
        {
            violations.push(format!(
                "{} = {} read {:?} after {} was acknowledged, at {:?} into the test",
                read.key,
                read.sequence,
                read.began - successor.acknowledged,
                successor.sequence,
                read.began - start,
            ));
        }
    }
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(
        before_faults.hits > 10,
        "no hits before the faults: {before_faults:?}"
    );
    assert!(
        at_end.hits > at_heal.hits + 10,
        "no hits after the stream came back: {at_heal:?} then {at_end:?}"
    );
    // Before the faults, held entries were never too old to serve: the confirmations kept
    // extending them. (Without them, the cold entry, written every 1.5 s, would go stale
    // about every 0.4 s: four or five times.)
    let stale = before_faults.stale;
    assert!(
        stale <= 1,
        "{stale} entries went stale while the stream was healthy"
    );
}
