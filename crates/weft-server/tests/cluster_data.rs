//! Real `weft` processes sharing a distributed cache (owners = 2) over loopback, under a
//! concurrent RESP write load sent to every node, while one node is killed with SIGKILL,
//! restarted empty, and another stopped with SIGTERM. Afterwards every acknowledged write
//! must be readable, with its latest value, from every node still up (an auditor of
//! acknowledged writes: a write that got no answer may or may not have happened, so the
//! value read must be the last acknowledged one or one written after it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    // A port free for both UDP (membership) and TCP (the transport).
    for _ in 0..100 {
        let udp = UdpSocket::bind("127.0.0.1:0").expect("a free port");
        let port = udp.local_addr().expect("address").port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP");
}

fn free_tcp_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

struct Node {
    name: String,
    client: SocketAddr,
    cluster: SocketAddr,
    child: Child,
}

impl Node {
    fn start(
        name: &str,
        config: &Path,
        client: SocketAddr,
        cluster: SocketAddr,
        seeds: &[SocketAddr],
    ) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
        command
            .args(["server", "--config", config.to_str().expect("utf-8 path")])
            .args(["--bind", &client.to_string()])
            .args(["--cluster-listen", &cluster.to_string()])
            .args(["--node-name", name])
            .stderr(Stdio::null());
        // WEFT_TEST_LOGS=DIR keeps each node's log there (for a failure to be understood).
        match std::env::var("WEFT_TEST_LOGS") {
            Ok(dir) => {
                let path = std::path::Path::new(&dir).join(format!(
                    "{name}-{}.log",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis())
                ));
                command.stdout(std::fs::File::create(path).expect("a log file"));
            }
            Err(_) => {
                command.stdout(Stdio::null());
            }
        }
        let seeds: Vec<String> = seeds.iter().map(ToString::to_string).collect();
        if !seeds.is_empty() {
            command.args(["--join", &seeds.join(",")]);
        }
        Self {
            name: name.to_owned(),
            client,
            cluster,
            child: command.spawn().expect("start weft"),
        }
    }

    fn members(&self) -> Option<Vec<String>> {
        let mut stream = TcpStream::connect(self.client).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream
            .write_all(
                b"GET /rest/v2/container HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n",
            )
            .ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let (_, body) = response.split_once("\r\n\r\n")?;
        let info: serde_json::Value = serde_json::from_str(body).ok()?;
        Some(
            info["cluster_members"]
                .as_array()?
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

fn converge(nodes: &[&Node], expected: &[&str], limit: Duration) {
    let start = Instant::now();
    loop {
        let seen: Vec<Option<Vec<String>>> = nodes.iter().map(|node| node.members()).collect();
        if seen
            .iter()
            .all(|members| members.as_deref().is_some_and(|m| m == expected))
        {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "after {limit:?}, expected {expected:?} everywhere; nodes report {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A minimal RESP client: one connection, one command at a time.
struct Resp {
    reader: BufReader<TcpStream>,
}

impl Resp {
    fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    fn command(&mut self, args: &[&[u8]]) -> std::io::Result<Option<Vec<u8>>> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg);
            request.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&request)?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let line = line.trim_end();
        match line.as_bytes().first() {
            Some(b'+') => Ok(Some(line.as_bytes()[1..].to_vec())),
            Some(b'-') => Err(std::io::Error::other(line.to_owned())),
            Some(b':') => Ok(Some(line.as_bytes()[1..].to_vec())),
            Some(b'$') => {
                let len: i64 = line[1..].parse().map_err(std::io::Error::other)?;
                if len < 0 {
                    return Ok(None);
                }
                let mut value = vec![0; usize::try_from(len).unwrap_or(0) + 2];
                self.reader.read_exact(&mut value)?;
                value.truncate(value.len() - 2);
                Ok(Some(value))
            }
            _ => Err(std::io::Error::other(format!("unexpected reply {line:?}"))),
        }
    }
}

/// What the writers know about one key: the last value a node acknowledged, and the values
/// written after it whose fate is unknown (no answer).
#[derive(Debug, Default, Clone)]
struct KeyHistory {
    acked: Option<u64>,
    unknown: Vec<u64>,
}

// Proves no acknowledged write is lost while nodes are killed, restarted and stopped under
// a write load, and that every node still up reads each key's latest value.
#[test]
fn acknowledged_writes_survive_kills_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(
        &config,
        "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 64\n",
    )
    .unwrap();
    let clients: Vec<SocketAddr> = (0..3)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], free_tcp_port())))
        .collect();
    let clusters: Vec<SocketAddr> = (0..3)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], free_port())))
        .collect();
    let names = ["node-a", "node-b", "node-c"];
    let mut nodes: Vec<Option<Node>> = (0..3)
        .map(|i| {
            Some(Node::start(
                names[i],
                &config,
                clients[i],
                clusters[i],
                &clusters,
            ))
        })
        .collect();
    {
        let all: Vec<&Node> = nodes.iter().flatten().collect();
        converge(&all, &names, Duration::from_secs(30));
    }

    // Writers: each owns its keys and writes increasing values to them, round-robin over
    // the nodes, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let histories: Arc<Mutex<HashMap<String, KeyHistory>>> = Arc::default();
    let acknowledged = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writers: Vec<_> = (0..3)
        .map(|writer| {
            let stop = Arc::clone(&stop);
            let histories = Arc::clone(&histories);
            let acknowledged = Arc::clone(&acknowledged);
            let clients = clients.clone();
            std::thread::spawn(move || {
                let mut connections: Vec<Option<Resp>> = (0..clients.len()).map(|_| None).collect();
                let mut value = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    value += 1;
                    let key = format!("w{writer}-k{}", value % 50);
                    let target = usize::try_from(value).unwrap_or(0) % clients.len();
                    if connections[target].is_none() {
                        connections[target] = Resp::connect(clients[target]).ok();
                    }
                    let Some(connection) = connections[target].as_mut() else {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    };
                    let text = value.to_string();
                    let answer = connection.command(&[b"SET", key.as_bytes(), text.as_bytes()]);
                    let mut histories = histories.lock().unwrap();
                    let history = histories.entry(key).or_default();
                    match answer {
                        Ok(Some(reply)) if reply == b"OK" => {
                            history.acked = Some(value);
                            history.unknown.clear();
                            acknowledged.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(_) | Err(_) => {
                            history.unknown.push(value);
                            drop(histories);
                            connections[target] = None;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            })
        })
        .collect();

    std::thread::sleep(Duration::from_secs(2));
    // A crash: node-c dies without a word.
    nodes[2].as_ref().unwrap().signal("-KILL");
    drop(nodes[2].take());
    std::thread::sleep(Duration::from_secs(8));
    // It comes back empty (same name and addresses, a new process).
    nodes[2] = Some(Node::start(
        names[2],
        &config,
        clients[2],
        clusters[2],
        &clusters,
    ));
    std::thread::sleep(Duration::from_secs(6));
    // A graceful stop: node-b leaves.
    nodes[1].as_ref().unwrap().signal("-TERM");
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    {
        let live: Vec<&Node> = [&nodes[0], &nodes[2]].into_iter().flatten().collect();
        converge(&live, &["node-a", "node-c"], Duration::from_secs(30));
    }
    let acknowledged = acknowledged.load(Ordering::Relaxed);
    assert!(
        acknowledged > 100,
        "only {acknowledged} writes were acknowledged"
    );

    // Every key reads back its last acknowledged value (or a later unacknowledged one) on
    // every node still up, once the rebalance after the leave is done.
    let histories = histories.lock().unwrap().clone();
    let unknown: usize = histories.values().map(|h| h.unknown.len()).sum();
    eprintln!(
        "{acknowledged} writes acknowledged, {unknown} unanswered, {} keys",
        histories.len()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    for node in [&nodes[0], &nodes[2]].into_iter().flatten() {
        let mut client = Resp::connect(node.client).unwrap();
        for (key, history) in &histories {
            loop {
                let read = client.command(&[b"GET", key.as_bytes()]);
                let value = read
                    .as_ref()
                    .ok()
                    .and_then(|v| v.as_ref())
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.parse::<u64>().ok());
                let expected_ok = match (history.acked, value) {
                    (Some(acked), Some(value)) => {
                        value == acked || history.unknown.contains(&value)
                    }
                    (None, None) => true,
                    (None, Some(value)) => history.unknown.contains(&value),
                    (Some(_), None) => false,
                };
                if expected_ok {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{} reads {key} as {read:?}; acknowledged {:?}, unknown {:?}",
                    node.name,
                    history.acked,
                    history.unknown
                );
                std::thread::sleep(Duration::from_millis(100));
                if read.is_err() {
                    client = Resp::connect(node.client).unwrap();
                }
            }
        }
    }
    assert!(nodes[0].as_ref().is_some_and(|n| n.cluster == clusters[0]));
}
