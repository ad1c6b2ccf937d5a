//! What an operator sees of a running server: its log (a filter or format that does not
//! parse stops it at start, JSON lines for collectors, no colour codes in a file, a clean
//! stop of a cluster without ERROR lines and with node names) and the process, connection
//! and latency series of `/metrics`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::cluster::{Addresses, Node, free_tcp_port, http_get, wait_stable};

const START_LIMIT: Duration = Duration::from_secs(30);
const STOP_LIMIT: Duration = Duration::from_secs(30);
const FORM_LIMIT: Duration = Duration::from_secs(60);

/// `weft server` on a free loopback port with `env` set, its stdout (the log) in `log`.
fn server(dir: &Path, env: &[(&str, &str)], log: &str) -> (Node, SocketAddr) {
    let client = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(["server", "--bind", &client.to_string()])
        .current_dir(dir)
        .env_remove("WEFT_LOG")
        .env_remove("WEFT_LOG_FORMAT")
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(dir.join(log)).unwrap())
        .stderr(std::fs::File::create(dir.join(format!("{log}.stderr"))).unwrap());
    (Node::spawn(log, client, &mut command), client)
}

fn wait_listening(addr: SocketAddr) {
    common::process::wait_listening(addr, START_LIMIT);
}

// Proves a filter or format the server cannot use stops it at start, saying why, instead
// of being ignored (before: `WEFT_LOG=degub` ran a server that logged nothing at all).
#[test]
fn an_invalid_log_setting_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    for (env, expected) in [
        (
            ("WEFT_LOG", "degub"),
            "WEFT_LOG=`degub` is not a log filter",
        ),
        (
            ("WEFT_LOG", "info,weft_grid=loud"),
            "WEFT_LOG=`info,weft_grid=loud` is not a log filter",
        ),
        (
            ("WEFT_LOG_FORMAT", "xml"),
            "WEFT_LOG_FORMAT=`xml` is not a log format",
        ),
    ] {
        let (mut node, _) = server(dir.path(), &[env], "refused");
        let status = node
            .exit_within(START_LIMIT)
            .unwrap_or_else(|| panic!("{env:?}: the server still runs"));
        assert_eq!(status.code(), Some(1), "{env:?}");
        let stderr = std::fs::read_to_string(dir.path().join("refused.stderr")).unwrap();
        assert!(stderr.contains(expected), "{env:?}: {stderr}");
    }
}

// Proves `WEFT_LOG_FORMAT=json` writes one JSON object per line with level, message and
// fields, and that a log written to a file carries no colour codes in either format.
#[test]
fn json_lines_and_no_colour_in_files() {
    let dir = tempfile::tempdir().unwrap();
    for (format, log) in [("json", "json.log"), ("text", "text.log")] {
        let (mut node, client) = server(dir.path(), &[("WEFT_LOG_FORMAT", format)], log);
        wait_listening(client);
        node.signal("-TERM");
        assert!(node.exit_within(STOP_LIMIT).is_some_and(|s| s.success()));
        let text = std::fs::read_to_string(dir.path().join(log)).unwrap();
        assert!(
            !text.contains('\u{1b}'),
            "{format}: colour codes in a file:\n{text}"
        );
        assert!(text.contains("weft server stopped"), "{format}:\n{text}");
        if format == "json" {
            for line in text.lines() {
                let event: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                assert!(event["level"].is_string(), "{line}");
                assert!(event["message"].is_string(), "{line}");
                assert!(event["timestamp"].is_string(), "{line}");
            }
            let listening = text
                .lines()
                .find(|line| line.contains("weft server listening"))
                .unwrap();
            let event: serde_json::Value = serde_json::from_str(listening).unwrap();
            assert_eq!(event["address"], client.to_string(), "{listening}");
        }
    }
}

// Proves a cluster stopped cleanly logs no ERROR line and names its coordinator (before:
// consensus logged `ERROR the first step error: new membership can not be empty` on the
// coordinator's clean stop, and numeric ids throughout).
#[test]
fn a_clean_stop_of_a_cluster_logs_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(
        &config,
        "[caches.default]\nmode = \"distributed\"\nowners = 2\n",
    )
    .unwrap();
    let addresses: Vec<Addresses> = (0..3).map(|_| Addresses::free()).collect();
    let join: Vec<String> = addresses.iter().map(|a| a.cluster.to_string()).collect();
    let nodes: Vec<Node> = ["a", "b", "c"]
        .iter()
        .zip(&addresses)
        .map(|(name, at)| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
            command
                .args(["server", "--config", config.to_str().unwrap()])
                .args(["--bind", &at.client.to_string()])
                .args(["--cluster-listen", &at.cluster.to_string()])
                .args(["--node-name", name, "--join", &join.join(",")])
                .current_dir(dir.path())
                .env_remove("WEFT_LOG")
                .env_remove("WEFT_LOG_FORMAT")
                .stdout(std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap())
                .stderr(Stdio::null());
            Node::spawn(name, at.client, &mut command)
        })
        .collect();
    wait_stable(&nodes.iter().collect::<Vec<_>>(), "default", FORM_LIMIT);
    for node in &nodes {
        node.signal("-TERM");
    }
    for mut node in nodes {
        let status = node.exit_within(STOP_LIMIT);
        assert!(
            status.is_some_and(|s| s.success()),
            "{}: {status:?}",
            node.name
        );
    }
    let mut coordinators = 0;
    for name in ["a", "b", "c"] {
        let log = std::fs::read_to_string(dir.path().join(format!("{name}.log"))).unwrap();
        let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
        assert!(errors.is_empty(), "{name} logged errors:\n{log}");
        assert!(log.contains("weft server stopped"), "{name}:\n{log}");
        assert!(!log.contains("openraft"), "{name}:\n{log}");
        if log.contains("cluster coordinator known coordinator=") {
            coordinators += 1;
        }
    }
    assert!(coordinators >= 1, "no node named its coordinator");
}

/// Sends `request` on a new connection and reads until `until` arrives.
fn exchange(addr: SocketAddr, request: &[u8], until: &str) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains(until) {
        let read = stream.read(&mut buffer).unwrap();
        assert!(read > 0, "closed before {until:?}");
        seen.extend_from_slice(&buffer[..read]);
    }
}

// Proves `/metrics` has the process series (CPU, memory, open files, start time), client
// connections per protocol and latency histograms per protocol and operation.
#[test]
fn metrics_have_process_connection_and_latency_series() {
    let server = common::TestServer::start();
    exchange(server.addr, b"version\r\n", "VERSION");
    exchange(server.addr, b"set k 0 0 1\r\nv\r\n", "STORED");
    // Held open while the metrics are read: counted as an open RESP connection.
    let mut resp = TcpStream::connect(server.addr).unwrap();
    resp.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut pong = [0u8; 7];
    resp.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    http_get(server.addr, "/rest/v2/caches").unwrap();
    // The REST connection closes on its own task: until the server sees it close, /metrics
    // counts two HTTP connections (its own and that one). Bounded wait for one.
    let mut metrics = http_get(server.addr, "/metrics").unwrap();
    for _ in 0..50 {
        if metrics.contains("weft_client_connections{protocol=\"http\"} 1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        metrics = http_get(server.addr, "/metrics").unwrap();
    }
    for line in [
        "# TYPE process_cpu_seconds_total counter",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE process_open_fds gauge",
        "# TYPE process_max_fds gauge",
        "# TYPE process_start_time_seconds gauge",
        "# TYPE weft_client_connections gauge",
        "# TYPE weft_client_connections_opened_total counter",
        "# TYPE weft_client_connections_refused_total counter",
        "# TYPE weft_request_duration_seconds histogram",
        "weft_client_connections{protocol=\"resp\"} 1",
        "weft_client_connections{protocol=\"http\"} 1",
        "weft_client_connections_opened_total{protocol=\"memcached\"} 2",
        "weft_request_duration_seconds_count{protocol=\"memcached\",operation=\"version\"} 1",
        "weft_request_duration_seconds_count{protocol=\"memcached\",operation=\"set\"} 1",
        "weft_request_duration_seconds_count{protocol=\"http\",operation=\"GET\"} ",
        "weft_request_duration_seconds_bucket{protocol=\"memcached\",operation=\"set\",le=\"+Inf\"} 1",
    ] {
        assert!(metrics.contains(line), "{line:?} missing from\n{metrics}");
    }
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
    };
    assert!(value("process_resident_memory_bytes") > 1e6);
    assert!(value("process_open_fds") >= 3.0);
    let started = value("process_start_time_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        started <= now + 1.0 && started > now - 3600.0,
        "{started} vs {now}"
    );
}

// Proves `weft --help` tells a newcomer what Weft speaks, how to start and how to choose
// the log (before: the crate's description for developers, nothing on logging).
#[test]
fn help_speaks_to_users() {
    let dir = tempfile::tempdir().unwrap();
    let help = common::process::run(dir.path(), &["--help"]);
    assert_eq!(help.code, Some(0));
    for needed in [
        "Hot Rod",
        "RESP",
        "memcached",
        "weft server",
        "WEFT_LOG_FORMAT=json",
    ] {
        assert!(
            help.stdout.contains(needed),
            "{needed:?} missing:\n{}",
            help.stdout
        );
    }
    let server = common::process::run(dir.path(), &["server", "--help"]);
    assert!(
        server.stdout.contains("--join 127.0.0.1:7800"),
        "{}",
        server.stdout
    );
}

// Proves `weft cluster` without `--server` says which node it asked, whatever it found
// there (before: an answer, or `connect to 127.0.0.1:11222`, with no word of a default).
#[test]
fn cluster_without_server_names_the_node_asked() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["cluster", "members"])
        .env_remove("WEFT_SERVER")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("asking 127.0.0.1:11222 (no --server or WEFT_SERVER given)"),
        "{stderr}"
    );
}
