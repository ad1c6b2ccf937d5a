//! Real `weft` processes forming a cluster over loopback: three nodes find each other from one
//! seed (`--join`), each reports the others through REST (`/rest/v2/container`) and
//! `/metrics`; a node killed with SIGKILL is declared down by the others (failure
//! detection), and a node stopped with SIGTERM leaves at once (it says goodbye).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|socket| socket.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

struct Node {
    name: String,
    http: SocketAddr,
    cluster: SocketAddr,
    child: Child,
}

impl Node {
    fn start(name: &str, join: Option<SocketAddr>) -> Self {
        let http = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
        let cluster = SocketAddr::from(([127, 0, 0, 1], free_udp_port()));
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
        command
            .args(["server", "--bind", &http.to_string()])
            .args(["--cluster-listen", &cluster.to_string()])
            .args(["--node-name", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(seed) = join {
            command.args(["--join", &seed.to_string()]);
        }
        let child = command.spawn().expect("start weft");
        Self {
            name: name.to_owned(),
            http,
            cluster,
            child,
        }
    }

    fn get(&self, path: &str) -> Option<String> {
        let mut stream = TcpStream::connect(self.http).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (_, body) = response.split_once("\r\n\r\n")?;
        Some(body.to_owned())
    }

    /// The members this node reports, sorted, or `None` while it is not answering.
    fn members(&self) -> Option<Vec<String>> {
        let body = self.get("/rest/v2/container")?;
        let info: serde_json::Value = serde_json::from_str(&body).ok()?;
        let members = info["cluster_members"].as_array()?;
        assert_eq!(info["cluster_size"].as_u64(), Some(members.len() as u64));
        Some(
            members
                .iter()
                .map(|m| m.as_str().unwrap_or_default().to_owned())
                .collect(),
        )
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every node in `nodes` reports exactly `expected`; returns how long it took.
fn converge(nodes: &[&Node], expected: &[&str], limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let seen: Vec<Option<Vec<String>>> = nodes.iter().map(|node| node.members()).collect();
        if seen
            .iter()
            .all(|members| members.as_deref().is_some_and(|m| m == expected))
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "after {limit:?}, expected {expected:?} everywhere; nodes report {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

// Proves three processes form a cluster from one seed, a SIGKILLed node is declared down by
// failure detection, and a SIGTERMed node leaves at once.
#[test]
fn nodes_join_crash_and_leave() {
    let a = Node::start("node-a", None);
    let b = Node::start("node-b", Some(a.cluster));
    let c = Node::start("node-c", Some(a.cluster));
    converge(
        &[&a, &b, &c],
        &["node-a", "node-b", "node-c"],
        Duration::from_secs(30),
    );
    let metrics = a.get("/metrics").unwrap();
    assert!(
        metrics.lines().any(|line| line == "weft_cluster_members 3"),
        "metrics: {}",
        metrics
            .lines()
            .filter(|l| l.contains("cluster"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    c.signal("-KILL");
    let took = converge(&[&a, &b], &["node-a", "node-b"], Duration::from_secs(30));
    // Failure detection waits out a suspicion (5 s) before declaring a node down.
    assert!(
        took >= Duration::from_secs(3),
        "declared down after only {took:?}"
    );

    b.signal("-TERM");
    let took = converge(&[&a], &["node-a"], Duration::from_secs(30));
    assert!(took < Duration::from_secs(3), "a leave took {took:?}");
    assert_eq!(b.name, "node-b");
}
