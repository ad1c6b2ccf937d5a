//! Real `weft` processes: caches created and removed by a client through any node, over
//! REST (`?template=`) or Hot Rod's administration tasks, exist on every node as the
//! template names them (a DIST_SYNC cache is distributed over all members), and are gone
//! from every node once removed through any node, also a cache every node's configuration
//! declares (which the cluster then does not define again).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::cluster::{Addresses, Node, http, wait_stable};
use common::hotrod::{HotRod, exec};
use weft_hotrod::Status;

const NAMES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// How long the cluster may take to form, or to agree on a cache change everywhere.
const AGREEMENT_WAIT_MAX: Duration = Duration::from_secs(40);
/// How long a removed configured cache is watched for coming back (several reconciliation
/// ticks of every node).
const REMOVED_WATCH: Duration = Duration::from_secs(2);

const CONFIG: &str = "[caches.default]\nmode = \"distributed\"\nsegments = 32\n\n\
                      [caches.configured]\nmode = \"distributed\"\nsegments = 16\n";

/// The kind of cache node `client` reports for `cache` (`distributed-cache`, ...), or
/// `None` when it has no such cache.
fn kind(client: SocketAddr, cache: &str) -> Option<String> {
    let (status, body) = http(
        client,
        "GET",
        &format!("/rest/v2/caches/{cache}?action=config"),
        "",
    )?;
    if status != 200 {
        return None;
    }
    let config: serde_json::Value = serde_json::from_str(&body).ok()?;
    config.as_object()?.keys().next().cloned()
}

/// Waits until every node reports `cache` as a `distributed-cache` whose topology is stable
/// with all of them.
fn wait_distributed_everywhere(nodes: &[&Node], cache: &str) {
    let start = Instant::now();
    for node in nodes {
        while kind(node.client, cache).as_deref() != Some("distributed-cache") {
            assert!(
                start.elapsed() < AGREEMENT_WAIT_MAX,
                "{} reports `{cache}` as {:?}",
                node.name,
                kind(node.client, cache)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    wait_stable(nodes, cache, AGREEMENT_WAIT_MAX);
}

/// Waits until no node has `cache`.
fn wait_gone_everywhere(nodes: &[&Node], cache: &str) {
    let start = Instant::now();
    for node in nodes {
        while kind(node.client, cache).is_some() {
            assert!(
                start.elapsed() < AGREEMENT_WAIT_MAX,
                "{} still has `{cache}`",
                node.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

// Proves cache administration is cluster-wide from every path: DIST_SYNC caches created
// through one node by REST and by Hot Rod are distributed on all, an unknown template creates
// nothing anywhere, and removals through another node (REST DELETE, Hot Rod
// `@@cache@remove`) remove the cache from all, for good.
#[test]
fn cache_admin_is_cluster_wide_from_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let addresses: Vec<Addresses> = (0..3).map(|_| Addresses::free()).collect();
    let nodes: Vec<Node> = (0..3)
        .map(|i| Node::start(NAMES[i], &config, addresses[i], &addresses))
        .collect();
    let all: Vec<&Node> = nodes.iter().collect();
    wait_stable(&all, "default", AGREEMENT_WAIT_MAX);
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);

    // Created through node a, over REST and over Hot Rod.
    let created = http(
        a.client,
        "POST",
        "/rest/v2/caches/by-rest?template=org.infinispan.DIST_SYNC",
        "",
    );
    assert_eq!(created.map(|(status, _)| status), Some(200));
    let mut hotrod = HotRod::connect(a.client, 40);
    let response = hotrod.call(exec(
        "@@cache@create",
        &[
            ("name", "by-hotrod"),
            ("template", "org.infinispan.DIST_SYNC"),
        ],
    ));
    assert_eq!(response.status(), Status::Success, "{response:?}");
    // What the 15.x Java client sends for the DIST_SYNC template, through node c.
    let mut through_c = HotRod::connect(c.client, 40);
    let response = through_c.call(exec(
        "@@cache@getorcreate",
        &[
            ("name", "by-java"),
            (
                "configuration",
                r#"{"distributed-cache":{"mode":"sync","statistics":"true"}}"#,
            ),
        ],
    ));
    assert_eq!(response.status(), Status::Success, "{response:?}");
    for cache in ["by-rest", "by-hotrod", "by-java"] {
        wait_distributed_everywhere(&all, cache);
    }
    let response = through_c.call(exec(
        "@@cache@create",
        &[
            ("name", "by-hotrod"),
            ("template", "org.infinispan.DIST_SYNC"),
        ],
    ));
    assert!(
        response.error_message().contains("ISPN000507"),
        "{response:?}"
    );

    // An unknown template is refused and creates nothing, anywhere.
    let refused = http(
        b.client,
        "POST",
        "/rest/v2/caches/unknown?template=org.infinispan.NOPE",
        "",
    )
    .unwrap();
    assert_eq!(refused.0, 400, "{}", refused.1);
    assert!(refused.1.contains("ISPN000436"), "{}", refused.1);
    for node in &all {
        assert_eq!(kind(node.client, "unknown"), None, "{}", node.name);
    }

    // Removed through node b (REST) and node c (Hot Rod): gone from every node.
    for cache in ["by-rest", "by-hotrod", "configured"] {
        let removed = http(b.client, "DELETE", &format!("/rest/v2/caches/{cache}"), "");
        assert_eq!(removed.map(|(status, _)| status), Some(200), "{cache}");
    }
    let response = through_c.call(exec("@@cache@remove", &[("name", "by-java")]));
    assert_eq!(response.status(), Status::Success, "{response:?}");
    for cache in ["by-rest", "by-hotrod", "by-java", "configured"] {
        wait_gone_everywhere(&all, cache);
    }
    // Every node declares `configured`: none defines it again after its removal.
    let watch = Instant::now();
    while watch.elapsed() < REMOVED_WATCH {
        for node in &all {
            assert_eq!(kind(node.client, "configured"), None, "{}", node.name);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let again = http(b.client, "DELETE", "/rest/v2/caches/by-rest", "");
    assert_eq!(again.map(|(status, _)| status), Some(404));

    // A name removed can be created again, empty, and serves every node.
    let created = http(
        c.client,
        "PUT",
        "/rest/v2/caches/by-rest?template=org.infinispan.DIST_SYNC",
        "",
    );
    assert_eq!(created.map(|(status, _)| status), Some(200));
    wait_distributed_everywhere(&all, "by-rest");
    let written = http(a.client, "PUT", "/rest/v2/caches/by-rest/k", "v");
    assert_eq!(written.map(|(status, _)| status), Some(204));
    // The template's cache stores ProtoStream (Infinispan's default), so the text comes back
    // as a wrapped string.
    let wrapped = r#"{"_type":"string","_value":"v"}"#.to_owned();
    for node in &all {
        let read = http(node.client, "GET", "/rest/v2/caches/by-rest/k", "");
        assert_eq!(read, Some((200, wrapped.clone())), "{}", node.name);
    }
}
