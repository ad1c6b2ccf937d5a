//! Real `weft` processes whose distributed cache (owners = 2) has a file store on each node.
//! A node killed and restarted with what it stored must serve none of it stale: keys removed
//! or changed while it was down read as the cluster has them, from every node, also once it
//! owns segments again. And a cluster killed whole and restarted with its stores loses
//! nothing: every node's stored copies are merged back, the newest version of each key wins.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::cluster::{Addresses, Node, Resp, wait_stable};

const NAMES: [&str; 3] = ["node-a", "node-b", "node-c"];
const KEYS: usize = 300;

fn config(dir: &Path, name: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let data = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "[server]\ndata-dir = \"{}\"\n\n\
             [caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n\n\
             [[caches.default.persistence.store]]\ntype = \"file\"\ndurability = \"sync\"\n",
            data.display()
        ),
    )
    .unwrap();
    path
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

/// What each key must read: removed, changed while a node was down, or as first written.
fn expected(i: usize) -> Option<Vec<u8>> {
    match i {
        0..100 => None,
        100..200 => Some(format!("second-{i}").into_bytes()),
        _ => Some(format!("first-{i}").into_bytes()),
    }
}

fn check_every_key(nodes: &[&Node], when: &str) {
    for node in nodes {
        let mut client = Resp::connect(node.client).unwrap();
        for i in 0..KEYS {
            let value = client.command(&[b"GET", &key(i)]).unwrap();
            assert_eq!(
                value.as_deref().map(String::from_utf8_lossy),
                expected(i).as_deref().map(String::from_utf8_lossy),
                "{when}: key-{i} through {}",
                node.name
            );
        }
        assert_eq!(
            client.command(&[b"DBSIZE"]).unwrap(),
            Some(b"200".to_vec()),
            "{when}: DBSIZE through {}",
            node.name
        );
    }
}

// Proves a restarted node discards what it stored before the cluster went on without it
// (no removed key comes back, no old value is read, through any node, once it owns segments
// again), and that a whole cluster killed and restarted keeps every write in its stores.
#[test]
fn stores_bring_back_nothing_stale_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let addresses: Vec<Addresses> = (0..3).map(|_| Addresses::free()).collect();
    let configs: Vec<_> = NAMES.iter().map(|name| config(dir.path(), name)).collect();
    let start = |i: usize| Node::start(NAMES[i], &configs[i], addresses[i], &addresses);
    let mut nodes: Vec<Node> = (0..3).map(start).collect();
    wait_stable(
        &nodes.iter().collect::<Vec<_>>(),
        "default",
        Duration::from_secs(40),
    );

    for i in 0..KEYS {
        let value = format!("first-{i}").into_bytes();
        assert_eq!(
            nodes[i % 3].command(&[b"SET", &key(i), &value]),
            Some(b"OK".to_vec())
        );
    }

    // node-b dies; the others remove and change keys meanwhile.
    nodes[1].signal("-KILL");
    nodes[1].wait();
    let survivors = [&nodes[0], &nodes[2]];
    wait_stable(&survivors, "default", Duration::from_secs(40));
    for i in 0..200 {
        let through = survivors[i % 2];
        if i < 100 {
            assert_eq!(through.command(&[b"DEL", &key(i)]), Some(b"1".to_vec()));
        } else {
            let value = format!("second-{i}").into_bytes();
            assert_eq!(
                through.command(&[b"SET", &key(i), &value]),
                Some(b"OK".to_vec())
            );
        }
    }

    // node-b comes back with its store as it was; once it owns segments again, every node,
    // node-b first, reads what the cluster holds.
    nodes[1] = start(1);
    wait_stable(
        &nodes.iter().collect::<Vec<_>>(),
        "default",
        Duration::from_secs(40),
    );
    let all: Vec<&Node> = vec![&nodes[1], &nodes[0], &nodes[2]];
    check_every_key(&all, "after node-b rejoined");

    // The whole cluster dies at once and comes back from its stores.
    for node in &nodes {
        node.signal("-KILL");
    }
    for node in &mut nodes {
        node.wait();
    }
    let mut nodes: Vec<Node> = (0..3).map(start).collect();
    wait_stable(
        &nodes.iter().collect::<Vec<_>>(),
        "default",
        Duration::from_secs(40),
    );
    // Merging stored copies runs once the topology is stable: wait until every node
    // counts what the cluster should hold.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let counts: Vec<Option<Vec<u8>>> = nodes
            .iter()
            .map(|node| node.command(&[b"DBSIZE"]))
            .collect();
        if counts.iter().all(|count| count.as_deref() == Some(b"200")) {
            break;
        }
        if Instant::now() >= deadline {
            check_every_key(&nodes.iter().collect::<Vec<_>>(), "restarted, counting");
            panic!("the restarted cluster does not count 200 keys: {counts:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    check_every_key(
        &nodes.iter().collect::<Vec<_>>(),
        "after the whole cluster restarted",
    );
    for node in &mut nodes {
        node.signal("-TERM");
    }
}
