//! `weft cli` against a cluster of real `weft` processes: members and topology as the node
//! asked sees them, and a rebalance — a third node joining two that hold data, its state
//! transfer slowed down so that it lasts a few seconds — followed live by
//! `cluster rebalance` to its end.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::cli::{cli, commands};
use common::cluster::{Addresses, Node, Resp, http_get, wait_stable};
use serde_json::Value;

const NAMES: [&str; 3] = ["node-a", "node-b", "node-c"];
/// How long the cluster may take to form or to settle.
const AGREEMENT_WAIT_MAX: Duration = Duration::from_secs(60);
/// Entries written before the third node joins, and their size: 2,000 × 1 KiB, of which the
/// newcomer fetches about two thirds (two owners of three members) at the rate below, for
/// a state transfer of two to three seconds.
const ENTRIES: usize = 2_000;
const VALUE_BYTES: usize = 1_024;
const CONFIG: &str = "[server]\nstate-transfer-bytes-per-second = 524288\n\n\
                      [caches.default]\nmode = \"distributed\"\nsegments = 64\n";

// Proves `cluster members`, `cluster topology` and `cluster rebalance` read a real cluster,
// and that the rebalance a joining node starts is shown moving (segments arriving, phases
// passing) until it is done, with exit status 0.
#[test]
fn cli_follows_a_rebalance_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let addresses: Vec<Addresses> = (0..3).map(|_| Addresses::free()).collect();
    let a = Node::start(NAMES[0], &config, addresses[0], &addresses[..2]);
    let b = Node::start(NAMES[1], &config, addresses[1], &addresses[..2]);
    wait_stable(&[&a, &b], "default", AGREEMENT_WAIT_MAX);
    let value = vec![b'v'; VALUE_BYTES];
    let mut resp = Resp::connect(a.client).unwrap();
    for i in 0..ENTRIES {
        resp.command(&[b"SET", format!("key-{i}").as_bytes(), &value])
            .unwrap();
    }

    let c = Node::start(NAMES[2], &config, addresses[2], &addresses[..2]);
    let c_url = format!("http://{}", c.client);
    // Wait for the rebalance to begin on the newcomer, then follow it there.
    let deadline = Instant::now() + AGREEMENT_WAIT_MAX;
    loop {
        let report: Value = http_get(c.client, "/rest/v2/cluster/rebalance")
            .and_then(|body| serde_json::from_str(&body).ok())
            .unwrap_or_default();
        if report["rebalancing"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "no rebalance began: {report}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let followed = commands(&c_url, &["cluster rebalance --timeout 120"]);
    assert_eq!(followed.code, Some(0), "{followed:#?}");
    let lines: Vec<&str> = followed.stderr.lines().collect();
    let moving: Vec<&&str> = lines
        .iter()
        .filter(|line| line.starts_with("default: ") && line.contains(" phase "))
        .collect();
    assert!(
        moving
            .iter()
            .any(|line| line.contains("phase 1/3 read-old-write-all")),
        "{followed:#?}"
    );
    assert!(moving.len() >= 2, "the progress never moved: {followed:#?}");
    assert_eq!(
        lines.last().copied(),
        Some("default: stable"),
        "{followed:#?}"
    );
    assert!(
        followed.stdout.ends_with("No rebalance under way.\n"),
        "{followed:#?}"
    );
    wait_stable(&[&a, &b, &c], "default", AGREEMENT_WAIT_MAX);

    let members = commands(&c_url, &["cluster members --json"]);
    assert_eq!(members.code, Some(0), "{members:#?}");
    let members: Value = serde_json::from_str(members.stdout.trim()).unwrap();
    let names: Vec<&str> = members["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, NAMES);
    let topology = commands(
        &c_url,
        &["cluster topology", "cluster rebalance --once --json"],
    );
    assert_eq!(topology.code, Some(0), "{topology:#?}");
    assert!(
        topology.stdout.contains("Cache default: topology ")
            && topology.stdout.contains(", stable, 64 segments"),
        "{topology:#?}"
    );
    assert!(
        topology.stdout.contains("MEMBER  PRIMARY OF  OWNER OF"),
        "{topology:#?}"
    );
    let last: Value = serde_json::from_str(topology.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["rebalancing"], false);
    assert_eq!(last["caches"][0]["phase_number"], 0);
    // Every entry is still there, counted across the cluster.
    let size = cli(
        &["--server", &c_url, "--json", "-c", "cache describe default"],
        "",
        &[],
    );
    let size: Value = serde_json::from_str(size.stdout.trim()).unwrap();
    assert_eq!(size["size"], ENTRIES);
}
