//! Checks the crate dependency rules of ARCHITECTURE.md from `cargo metadata`, so a change that
//! breaks a boundary fails the build instead of eroding it quietly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::process::Command;

fn normal_dependencies() -> BTreeMap<String, Vec<String>> {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut graph = BTreeMap::new();
    for package in metadata["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_owned();
        let dependencies = package["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| d["name"].as_str().unwrap().to_owned())
            .collect();
        graph.insert(name, dependencies);
    }
    graph
}

// Proves the engine depends on no other workspace crate and on no networking or runtime.
#[test]
fn core_is_standalone_and_does_no_io() {
    let graph = normal_dependencies();
    let core = &graph["weft-core"];
    for forbidden in [
        "weft-resp",
        "weft-rest",
        "weft-memcached",
        "weft-server",
        "weft-store",
        "tokio",
        "axum",
        "hyper",
    ] {
        assert!(
            !core.iter().any(|d| d == forbidden),
            "weft-core depends on {forbidden}"
        );
    }
}

// Proves stores know nothing of protocols or the server: they serve the core's seam only.
#[test]
fn stores_depend_on_no_protocol() {
    let graph = normal_dependencies();
    for store in graph.keys().filter(|name| name.starts_with("weft-store")) {
        for forbidden in [
            "weft-resp",
            "weft-rest",
            "weft-hotrod",
            "weft-memcached",
            "weft-server",
            "axum",
            "hyper",
        ] {
            assert!(
                !graph[store].iter().any(|d| d == forbidden),
                "{store} depends on {forbidden}"
            );
        }
    }
}

// Proves codecs stay sans-IO: no runtime, no sockets, no cache.
#[test]
fn codecs_depend_on_no_networking() {
    let graph = normal_dependencies();
    for codec in ["weft-resp", "weft-hotrod", "weft-memcached"] {
        for forbidden in ["tokio", "hyper", "axum", "weft-core", "weft-server"] {
            assert!(
                !graph[codec].iter().any(|d| d == forbidden),
                "{codec} depends on {forbidden}"
            );
        }
    }
}

// Proves only the server binary depends on every protocol crate.
#[test]
fn only_the_server_depends_on_protocols() {
    let graph = normal_dependencies();
    for (crate_name, dependencies) in &graph {
        // Redis' scripting environment is part of RESP: scripts speak Redis commands.
        if crate_name == "weft-server" || crate_name == "weft-lua" {
            continue;
        }
        for protocol in ["weft-resp", "weft-rest", "weft-memcached"] {
            assert!(
                !dependencies.iter().any(|d| d == protocol),
                "{crate_name} depends on {protocol}"
            );
        }
    }
}

// Proves the cluster logic stays plain data and functions: no protocol, store, runtime or
// networking, so the server and a deterministic simulator can drive the same code.
#[test]
fn cluster_logic_does_no_io() {
    let graph = normal_dependencies();
    for forbidden in [
        "weft-resp",
        "weft-rest",
        "weft-hotrod",
        "weft-memcached",
        "weft-server",
        "weft-store",
        "tokio",
        "hyper",
        "axum",
    ] {
        assert!(
            !graph["weft-cluster"].iter().any(|d| d == forbidden),
            "weft-cluster depends on {forbidden}"
        );
    }
}

// Proves the simulator drives the real logic without I/O and is never linked into the
// server.
#[test]
fn the_simulator_stays_out_of_the_server() {
    let graph = normal_dependencies();
    for crate_name in graph.keys() {
        assert!(
            !graph[crate_name].iter().any(|d| d == "weft-sim"),
            "{crate_name} depends on weft-sim"
        );
    }
    for forbidden in ["tokio", "hyper", "axum", "weft-server"] {
        assert!(
            !graph["weft-sim"].iter().any(|d| d == forbidden),
            "weft-sim depends on {forbidden}"
        );
    }
}

// Proves the grid engine knows no protocol and no server: protocols reach the grid through
// the cache seam, and applications embed it without the server.
#[test]
fn the_grid_knows_no_protocol() {
    let graph = normal_dependencies();
    for forbidden in [
        "weft-resp",
        "weft-rest",
        "weft-hotrod",
        "weft-memcached",
        "weft-server",
        "hyper",
        "axum",
    ] {
        assert!(
            !graph["weft-grid"].iter().any(|d| d == forbidden),
            "weft-grid depends on {forbidden}"
        );
    }
}

// Proves the security crate knows no protocol and does no networking: protocols carry its
// messages.
#[test]
fn security_knows_no_protocol_and_does_no_io() {
    let graph = normal_dependencies();
    let security = &graph["weft-security"];
    for dependency in security {
        assert!(
            !dependency.starts_with("weft-")
                && !["tokio", "axum", "hyper"].contains(&dependency.as_str()),
            "weft-security depends on {dependency}"
        );
    }
}

// Proves Redis' scripting environment stays sans-IO and knows no cache: `redis.call` reaches
// the server through a trait, so the crate is tested and fuzzed on its own.
#[test]
fn scripting_does_no_io() {
    let graph = normal_dependencies();
    for forbidden in [
        "tokio",
        "hyper",
        "axum",
        "weft-core",
        "weft-grid",
        "weft-server",
    ] {
        assert!(
            !graph["weft-lua"].iter().any(|d| d == forbidden),
            "weft-lua depends on {forbidden}"
        );
    }
}

// Proves `weft cli` knows a server only through its REST API, as any remote tool would: it
// depends on no other Weft crate (the binary hands it what REST cannot do).
#[test]
fn the_cli_talks_rest_only() {
    let graph = normal_dependencies();
    for dependency in &graph["weft-cli"] {
        assert!(
            !dependency.starts_with("weft-") && !["axum", "mlua"].contains(&dependency.as_str()),
            "weft-cli depends on {dependency}"
        );
    }
}

// Proves the Rust client is a client: it speaks Hot Rod through the shared codec and hashes
// keys with the engine's function, and links no server, grid, cluster, store or other
// protocol, so an application using it does not carry a server.
#[test]
fn the_client_carries_no_server() {
    let graph = normal_dependencies();
    for forbidden in [
        "weft-server",
        "weft-grid",
        "weft-cluster",
        "weft-store",
        "weft-store-pg",
        "weft-resp",
        "weft-rest",
        "weft-memcached",
        "weft-lua",
        "weft-security",
        "hyper",
        "axum",
    ] {
        assert!(
            !graph["weft-client"].iter().any(|d| d == forbidden),
            "weft-client depends on {forbidden}"
        );
    }
    assert!(graph["weft-client"].iter().any(|d| d == "weft-hotrod"));
}
