//! Shared by weft-client's integration tests: Weft servers started in this process (each in a
//! runtime of its own, so that one can be killed abruptly), clusters of them over loopback,
//! and a loopback TCP proxy that can delay what a server sends or cut its connections.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_panics_doc
)]

pub mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use weft_server::Server;
use weft_server::config::ServerConfig;

/// A Weft server on `127.0.0.1:0` in a runtime of its own. Dropping it shuts it down
/// cleanly; [`Node::kill`] stops it as a crash would.
pub struct Node {
    runtime: Option<tokio::runtime::Runtime>,
    server: Option<Server>,
    /// Where clients reach it.
    pub addr: SocketAddr,
}

impl Node {
    /// A server with `server_lines` in `[server]` and `rest` appended (cache tables).
    /// Callable from async tests: the server's runtime is built and driven on a thread of
    /// its own.
    pub fn start(server_lines: &str, rest: &str) -> Self {
        let (server_lines, rest) = (server_lines.to_owned(), rest.to_owned());
        std::thread::spawn(move || Self::start_here(&server_lines, &rest))
            .join()
            .expect("the server started")
    }

    fn start_here(server_lines: &str, rest: &str) -> Self {
        let text = format!(
            "[server]\nbind = \"127.0.0.1:0\"\nshutdown-grace-secs = 1\n{server_lines}\n{rest}\n"
        );
        let config = ServerConfig::parse("test.toml", &text).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(Server::start(config)).unwrap();
        let addr = server.local_addr();
        Self {
            runtime: Some(runtime),
            server: Some(server),
            addr,
        }
    }

    /// Stops the server as a crash would: every task and socket of its runtime dropped at
    /// once, nothing said to clients or to the other nodes.
    pub fn kill(mut self) {
        let (runtime, server) = (self.runtime.take(), self.server.take());
        std::thread::spawn(move || {
            if let Some(runtime) = runtime {
                // Dropped inside its runtime, in case dropping spawns; then every task goes.
                let entered = runtime.enter();
                drop(server);
                drop(entered);
                runtime.shutdown_background();
            }
        })
        .join()
        .expect("the server was killed");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let (Some(runtime), Some(server)) = (self.runtime.take(), self.server.take()) {
            let _ = std::thread::spawn(move || {
                runtime.block_on(server.shutdown());
                runtime.shutdown_timeout(Duration::from_secs(2));
            })
            .join();
        }
    }
}

/// A loopback port free for UDP (membership) and TCP (the cluster transport).
pub fn free_cluster_port() -> u16 {
    for _ in 0..1_000 {
        let Ok(udp) = UdpSocket::bind("127.0.0.1:0") else {
            continue;
        };
        let port = udp.local_addr().unwrap().port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP");
}

/// The caches every cluster node declares: `default`, distributed over 32 segments with two
/// owners.
pub const CLUSTER_CACHES: &str = "[caches.default]\nmode = \"distributed\"\nsegments = 32\n";

/// `count` clustered nodes whose `default` cache is stable with all of them.
pub fn cluster(count: usize) -> Vec<Node> {
    let ports: Vec<u16> = (0..count).map(|_| free_cluster_port()).collect();
    let seeds: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let nodes: Vec<Node> = (0..count)
        .map(|i| {
            Node::start(
                &format!(
                    "node-name = \"node-{i}\"\ncluster-listen = \"127.0.0.1:{}\"\njoin = [{}]\n",
                    ports[i],
                    seeds.join(", ")
                ),
                CLUSTER_CACHES,
            )
        })
        .collect();
    wait_stable(&nodes, count, Duration::from_secs(60));
    nodes
}

/// Waits until every node reports `default` stable with `members` members.
pub fn wait_stable(nodes: &[Node], members: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        if nodes.iter().all(|node| stable(node.addr, members)) {
            return;
        }
        assert!(Instant::now() < deadline, "the cluster did not settle");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether the node at `addr` reports `default` stable with `members` members.
pub fn stable(addr: SocketAddr, members: usize) -> bool {
    let Some(body) = http_get(addr, "/rest/v2/cluster/topology") else {
        return false;
    };
    let report: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    report["caches"].as_array().is_some_and(|caches| {
        caches.iter().any(|cache| {
            cache["cache"] == "default"
                && cache["phase"] == "stable"
                && cache["members"]
                    .as_array()
                    .is_some_and(|m| m.len() == members)
        })
    })
}

/// How many Hot Rod requests the node at `addr` ran at another member.
pub fn forwarded(addr: SocketAddr) -> u64 {
    let metrics = http_get(addr, "/metrics").unwrap_or_default();
    let prefix = "weft_cluster_forwarded_total{protocol=\"hotrod\"} ";
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// GET `path` over HTTP/1.1; the body, or `None` when the node did not answer.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}
