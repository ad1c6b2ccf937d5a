//! Real `weft` processes over loopback: how a node stops and starts as its clients see it.
//! A node sent SIGTERM takes no new connection but answers, to the end, the clients already
//! connected (what they send runs where it belongs now), then exits 0; a node starting
//! again answers a client that reached it before it joined (the request waits until it can
//! be routed) and reports ready (`GET /rest/v2/container/health/ready`) only once it
//! serves its caches.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::cluster::{Addresses, Node, Resp, http, wait_stable};

const CONFIG: &str = "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n";

fn readiness(node: &Node) -> Option<(u16, String)> {
    http(node.client, "GET", "/rest/v2/container/health/ready", "")
}

// Proves the drain and the readiness of a rolling restart's one step, from the clients'
// side: during a SIGTERM'd node's drain, a new connection is refused while a connection
// opened before goes on being answered (its INCRs run once each, at the counter's owner);
// the node exits 0 and loses nothing; started again, it answers a client that reached it
// before it joined, and reports STARTING until it serves, then READY.
#[test]
fn a_stopping_node_drains_and_a_starting_one_is_ready_once_it_serves() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let at: Vec<Addresses> = (0..3).map(|_| Addresses::free()).collect();
    let names = ["a", "b", "c"];
    let mut nodes: Vec<Node> = names
        .iter()
        .zip(&at)
        .map(|(name, addresses)| Node::start(name, &config, *addresses, &at))
        .collect();
    wait_stable(
        &nodes.iter().collect::<Vec<_>>(),
        "default",
        Duration::from_secs(60),
    );
    for node in &nodes {
        assert_eq!(
            readiness(node),
            Some((200, "READY".to_owned())),
            "{}",
            node.name
        );
    }
    for i in 0..100 {
        let key = format!("key-{i}");
        nodes[0].command(&[b"SET", key.as_bytes(), b"value"]);
    }

    // The drain: c takes no new connection, and answers the one opened before.
    let mut held = Resp::connect(nodes[2].client).unwrap();
    let mut counted = 0u64;
    for _ in 0..10 {
        counted += 1;
        let reply = held.command(&[b"INCR", b"drained"]).unwrap();
        assert_eq!(reply, Some(counted.to_string().into_bytes()));
    }
    nodes[2].signal("-TERM");
    let signalled = Instant::now();
    let mut refused_while_running = false;
    let mut answered_after_refusal = 0;
    loop {
        if !refused_while_running
            && TcpStream::connect_timeout(&nodes[2].client, Duration::from_millis(200)).is_err()
            && nodes[2].exit_within(Duration::ZERO).is_none()
        {
            refused_while_running = true;
        }
        match held.command(&[b"INCR", b"drained"]) {
            Ok(reply) => {
                counted += 1;
                assert_eq!(
                    reply,
                    Some(counted.to_string().into_bytes()),
                    "an INCR answered out of sequence during the drain"
                );
                answered_after_refusal += u32::from(refused_while_running);
            }
            // The node closed the connection at the end of its drain.
            Err(_) => break,
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(20),
            "the connection stayed open 20 s after SIGTERM"
        );
    }
    let status = nodes[2]
        .exit_within(Duration::from_secs(20))
        .expect("the stopped node exits");
    assert!(status.success(), "exit status {status}");
    assert!(
        refused_while_running,
        "a new connection was accepted while the node drained"
    );
    assert!(
        answered_after_refusal > 0,
        "the connection opened before the drain was not answered during it"
    );
    assert_eq!(
        nodes[0].command(&[b"INCR", b"drained"]),
        Some((counted + 1).to_string().into_bytes()),
        "an INCR acknowledged during the drain was lost or applied twice"
    );
    counted += 1;

    // The start: a client that reaches c before it joined is answered, not refused.
    nodes[2] = Node::start("c", &config, at[2], &at);
    let started = Instant::now();
    let mut early = loop {
        if let Ok(resp) = Resp::connect(nodes[2].client) {
            break resp;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "c never listened"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut seen = Vec::new();
    if let Some((status, word)) = readiness(&nodes[2]) {
        seen.push((status, word));
    }
    assert_eq!(
        early.command(&[b"GET", b"key-7"]).unwrap(),
        Some(b"value".to_vec())
    );
    assert_eq!(
        early.command(&[b"INCR", b"drained"]).unwrap(),
        Some((counted + 1).to_string().into_bytes())
    );
    loop {
        let answer = readiness(&nodes[2]).expect("c answers its readiness");
        let ready = answer.0 == 200;
        seen.push(answer);
        if ready {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "c not ready 60 s after it started: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for (status, word) in &seen {
        assert!(
            (*status, word.as_str()) == (200, "READY")
                || (*status, word.as_str()) == (503, "STARTING"),
            "readiness answered {status} {word}"
        );
    }
    assert_eq!(seen.last(), Some(&(200, "READY".to_owned())));
    println!(
        "readiness of the restarted node: {} answers, ready {:?} after it started",
        seen.len(),
        started.elapsed()
    );
    for i in 0..100 {
        let key = format!("key-{i}");
        assert_eq!(
            nodes[2].command(&[b"GET", key.as_bytes()]),
            Some(b"value".to_vec()),
            "{key} through the restarted node"
        );
    }
}
