//! The cluster recipe of docs/operations.md, followed as written: its `weft.toml` in one
//! working directory and its three `weft server` commands run there, unchanged but for the
//! port numbers (mapped to free ones, so the test shares the machine). The cluster is
//! written to, stopped whole with SIGTERM, its stores checked with `weft store check`, and
//! started again with the same commands; every key must come back through every node.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster::{Node, free_udp_and_tcp_port, wait_stable};
use common::process::run;

const OPERATIONS: &str = include_str!("../../../docs/operations.md");
const KEYS: usize = 300;
const FORM_LIMIT: Duration = Duration::from_secs(60);
const STOP_LIMIT: Duration = Duration::from_secs(60);

/// The recipe: the `weft.toml` and the command lines of the "Clusters" section.
struct Recipe {
    config: String,
    commands: Vec<String>,
}

/// The first fenced block of kind `kind` in `text`.
fn block<'a>(text: &'a str, kind: &str) -> &'a str {
    let fence = format!("```{kind}\n");
    let start = text
        .find(&fence)
        .unwrap_or_else(|| panic!("no {kind} block in the Clusters section"))
        + fence.len();
    let length = text[start..].find("```").expect("the block ends");
    &text[start..start + length]
}

fn recipe() -> Recipe {
    let section = OPERATIONS
        .split_once("\n## Clusters\n")
        .expect("operations.md has a Clusters section")
        .1;
    let section = section
        .split_once("\n## ")
        .map_or(section, |(section, _)| section);
    let commands: Vec<String> = block(section, "sh").lines().map(str::to_owned).collect();
    assert_eq!(commands.len(), 3, "three nodes: {commands:?}");
    assert!(
        commands
            .iter()
            .all(|line| line.starts_with("weft server ") && !line.contains(['"', '\'', '$'])),
        "plain `weft server` commands: {commands:?}"
    );
    Recipe {
        config: block(section, "toml").to_owned(),
        commands,
    }
}

/// The recipe's commands with each `127.0.0.1:PORT` moved to a free port (the same free port
/// for the same documented one), as arguments.
fn on_free_ports(commands: &[String]) -> Vec<Vec<String>> {
    let mut ports: BTreeMap<String, String> = BTreeMap::new();
    let mut remap = |word: &str| -> String {
        word.split(',')
            .map(|part| match part.strip_prefix("127.0.0.1:") {
                Some(port) => {
                    let free = ports
                        .entry(port.to_owned())
                        .or_insert_with(|| free_udp_and_tcp_port().to_string());
                    format!("127.0.0.1:{free}")
                }
                None => part.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    commands
        .iter()
        .map(|line| line.split_whitespace().skip(1).map(&mut remap).collect())
        .collect()
}

fn flag<'a>(args: &'a [String], name: &str) -> &'a str {
    let at = args
        .iter()
        .position(|arg| arg == name)
        .expect("the flag is given");
    &args[at + 1]
}

/// Runs the recipe's commands in `dir`; the nodes, in the recipe's order.
fn start_all(dir: &std::path::Path, commands: &[Vec<String>]) -> Vec<Node> {
    commands
        .iter()
        .map(|args| {
            let client: SocketAddr = flag(args, "--bind").parse().expect("an address");
            let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
            command
                .args(args)
                .current_dir(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            Node::spawn(flag(args, "--node-name"), client, &mut command)
        })
        .collect()
}

fn cache_name(config: &str) -> &str {
    config
        .lines()
        .find_map(|line| line.strip_prefix("[caches.")?.strip_suffix(']'))
        .expect("the recipe's weft.toml declares a cache")
}

// Proves the cluster recipe of docs/operations.md, followed literally (one weft.toml, one
// working directory, its three commands), survives a full stop and restart: each node keeps
// its own stores, they check clean, and every key comes back through every node.
#[test]
fn the_documented_cluster_survives_a_full_stop_and_restart() {
    let recipe = recipe();
    let cache = cache_name(&recipe.config).to_owned();
    let commands = on_free_ports(&recipe.commands);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("weft.toml"), &recipe.config).unwrap();

    let mut nodes = start_all(dir.path(), &commands);
    wait_stable(&nodes.iter().collect::<Vec<_>>(), &cache, FORM_LIMIT);
    for i in 0..KEYS {
        let (key, value) = (format!("key-{i}"), format!("value-{i}"));
        assert_eq!(
            nodes[i % 3].command(&[b"SET", key.as_bytes(), value.as_bytes()]),
            Some(b"OK".to_vec())
        );
    }

    for node in &nodes {
        node.signal("-TERM");
    }
    for node in &mut nodes {
        let status = node.exit_within(STOP_LIMIT).expect("the node stops");
        assert!(status.success(), "{} exited with {status:?}", node.name);
    }
    for node in &nodes {
        assert!(
            dir.path()
                .join("weft-data")
                .join(&node.name)
                .join(&cache)
                .is_dir(),
            "{} keeps its stores in weft-data/{}",
            node.name,
            node.name
        );
    }
    let checked = run(dir.path(), &["store", "check"]);
    assert_eq!(checked.code, Some(0), "{checked:?}");
    assert!(
        checked.stdout.contains("3 stores checked: no damage"),
        "{checked:?}"
    );

    let mut nodes = start_all(dir.path(), &commands);
    wait_stable(&nodes.iter().collect::<Vec<_>>(), &cache, FORM_LIMIT);
    for node in &nodes {
        for i in 0..KEYS {
            let key = format!("key-{i}");
            assert_eq!(
                node.command(&[b"GET", key.as_bytes()]),
                Some(format!("value-{i}").into_bytes()),
                "{key} through {} after the restart",
                node.name
            );
        }
        assert_eq!(
            node.command(&[b"DBSIZE"]),
            Some(KEYS.to_string().into_bytes()),
            "DBSIZE through {}",
            node.name
        );
    }
    for node in &nodes {
        node.signal("-TERM");
    }
    for node in &mut nodes {
        node.exit_within(STOP_LIMIT);
    }
}
