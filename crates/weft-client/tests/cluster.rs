//! `weft-client` against three clustered Weft nodes in this process: keyed requests go
//! straight to their key's primary (no node forwards any), a node's death is survived by
//! reading from the other owner and, once the cluster has re-formed, writing to the new
//! primary, and a near cache follows writes made through any node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{Node, cluster, forwarded, wait_stable};
use tokio::time::Instant;
use weft_client::{Client, ClientConfig, NearCacheConfig, RemoteCache};

async fn cache_through(
    first: &Node,
    config: impl FnOnce(ClientConfig) -> ClientConfig,
) -> RemoteCache {
    let config = config(
        ClientConfig::new([first.addr])
            .with_timeouts(Duration::from_secs(2), Duration::from_secs(10))
            .with_retries(5, Duration::from_millis(50)),
    );
    Client::connect(config)
        .await
        .unwrap()
        .cache("default")
        .await
        .unwrap()
}

// Proves the client learns the cluster's topology from its first request through one node
// and then sends every keyed request to the key's primary: no node runs any of them at
// another member.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyed_requests_go_to_the_primary() {
    let nodes = cluster(3);
    let cache = cache_through(&nodes[0], |config| config).await;
    assert_eq!(cache.servers().len(), 3, "the topology names every node");
    assert_eq!(cache.segment_count(), Some(32));
    let before: Vec<u64> = nodes.iter().map(|node| forwarded(node.addr)).collect();
    for i in 0..200 {
        cache
            .put(format!("key-{i}"), format!("value-{i}"))
            .await
            .unwrap();
    }
    for i in 0..200 {
        assert_eq!(
            cache.get(format!("key-{i}")).await.unwrap(),
            Some(bytes::Bytes::from(format!("value-{i}")))
        );
    }
    let found = cache
        .get_all((0..200).map(|i| format!("key-{i}")))
        .await
        .unwrap();
    assert_eq!(found.len(), 200);
    let after: Vec<u64> = nodes.iter().map(|node| forwarded(node.addr)).collect();
    assert_eq!(
        before, after,
        "some request was sent to a node that does not own its key"
    );
    // The keys are spread: every node is the primary of some.
    let mut primaries = std::collections::HashSet::new();
    for i in 0..200 {
        primaries.insert(cache.owners_of(format!("key-{i}").as_bytes())[0]);
    }
    assert_eq!(primaries.len(), 3);
    assert_eq!(cache.size().await.unwrap(), 200);
}

// Proves that when a node dies, every key stays readable at once (the client tries the
// key's other owner), and once the survivors have re-formed the cache every key is writable
// again, the client having learnt the new topology from their answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_is_survived() {
    let mut nodes = cluster(3);
    let cache = cache_through(&nodes[0], |config| config).await;
    for i in 0..100 {
        cache
            .put(format!("key-{i}"), format!("value-{i}"))
            .await
            .unwrap();
    }
    // Kill the primary of key-0 (not the node the client was configured with, if it can).
    let victim_addr = cache.owners_of(b"key-0")[0];
    let victim = nodes
        .iter()
        .position(|node| node.addr == victim_addr)
        .expect("a node of the cluster");
    let victim = nodes.remove(victim);
    victim.kill();
    let reads_began = Instant::now();
    for i in 0..100 {
        let value = cache.get(format!("key-{i}")).await.unwrap_or_else(|error| {
            panic!("key-{i} unreadable after the kill: {error}");
        });
        assert_eq!(value, Some(bytes::Bytes::from(format!("value-{i}"))));
    }
    assert!(
        reads_began.elapsed() < Duration::from_secs(30),
        "reads took {:?}",
        reads_began.elapsed()
    );
    // The survivors notice the death and re-form the cache with two members.
    wait_stable(&nodes, 2, Duration::from_secs(60));
    for i in 0..100 {
        cache
            .put(format!("key-{i}"), format!("again-{i}"))
            .await
            .unwrap_or_else(|error| panic!("key-{i} unwritable once re-formed: {error}"));
    }
    assert_eq!(
        cache.servers().len(),
        2,
        "the client learnt the new topology"
    );
    for i in 0..100 {
        assert_eq!(
            cache.get(format!("key-{i}")).await.unwrap(),
            Some(bytes::Bytes::from(format!("again-{i}")))
        );
    }
}

// Proves a near cache in a cluster is invalidated by writes made through any node (its
// listeners are on every node, where each key's primary raises the event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn near_cache_follows_writes_through_any_node() {
    let nodes = cluster(3);
    let reader = cache_through(&nodes[0], |config| {
        config.with_near_cache(NearCacheConfig::new(1000, Duration::from_secs(30)))
    })
    .await;
    let writers: Vec<RemoteCache> = {
        let mut writers = Vec::new();
        for node in &nodes {
            writers.push(cache_through(node, |config| config).await);
        }
        writers
    };
    for i in 0..30 {
        writers[0].put(format!("key-{i}"), "0").await.unwrap();
        assert_eq!(
            reader.get(format!("key-{i}")).await.unwrap().as_deref(),
            Some(&b"0"[..])
        );
    }
    // Give the invalidation stream its first heartbeat round on all three nodes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for (i, writer) in (0..30).zip(writers.iter().cycle()) {
        writer.put(format!("key-{i}"), "1").await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for i in 0..30 {
        while reader.get(format!("key-{i}")).await.unwrap().as_deref() != Some(&b"1"[..]) {
            assert!(
                Instant::now() < deadline,
                "key-{i}'s invalidation never arrived"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let stats = reader.near_cache_stats().unwrap();
    assert!(stats.invalidations >= 30, "{stats:?}");
}
