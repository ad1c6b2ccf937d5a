//! Linearizability of single-key registers on a distributed cache (owners = 2, sync
//! replication) across three real `weft` processes: clients SET and GET a few keys through
//! random nodes while one node is killed with SIGKILL, and each key's history of invocations,
//! completions and outcomes must be linearizable (`common::linearizability`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::linearizability::{Action, Op, Outcome, check};

const NODES: usize = 3;
const CLIENTS: usize = 6;
const KEYS: usize = 5;
/// How long the clients run, and when the node dies.
const RUN: Duration = Duration::from_secs(12);
const KILL_AT: Duration = Duration::from_secs(4);
/// A client gives up on one reply after this long (the operation's outcome is then unknown).
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);
/// At most this many operations per client, whatever the speed.
const MAX_OPS_PER_CLIENT: usize = 20_000;
const SEGMENTS: u32 = 64;

struct Node {
    name: String,
    client: SocketAddr,
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
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let seeds: Vec<String> = seeds.iter().map(ToString::to_string).collect();
        if !seeds.is_empty() {
            command.args(["--join", &seeds.join(",")]);
        }
        Self {
            name: name.to_owned(),
            client,
            child: command.spawn().expect("start weft"),
        }
    }

    /// Whether this node reports the `default` cache stable with `members` members.
    fn stable_with(&self, members: usize) -> bool {
        let Some(body) = http_get(self.client, "/rest/v2/cluster/topology") else {
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

    fn kill(&self) {
        let status = Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
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

fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
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

/// Each key's owners (primary first) in the topology `node` installed, for reports.
fn owners_of_keys(node: &Node) -> Vec<String> {
    let report: serde_json::Value = http_get(node.client, "/rest/v2/cluster/topology")
        .and_then(|body| serde_json::from_str(&body).ok())
        .unwrap_or_default();
    let owners = report["caches"]
        .as_array()
        .and_then(|caches| caches.iter().find(|cache| cache["cache"] == "default"))
        .map(|cache| cache["owners"].clone())
        .unwrap_or_default();
    (0..KEYS)
        .map(|key| {
            let segment = weft_core::hash::segment_of(format!("lin-{key}").as_bytes(), SEGMENTS);
            format!(
                "lin-{key}: segment {segment}, owners {}",
                owners[segment as usize]
            )
        })
        .collect()
}

/// Waits until every node reports the `default` cache stable with all of them as members.
fn converge(nodes: &[Node], limit: Duration) {
    let start = Instant::now();
    loop {
        if nodes.iter().all(|node| node.stable_with(nodes.len())) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "after {limit:?}, the default cache is not stable with {} members everywhere",
            nodes.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A minimal RESP client: one connection, one command at a time.
struct Resp {
    reader: BufReader<TcpStream>,
}

/// A reply: a simple string, an integer or bulk string (`None`: nil), or an error.
type Reply = Result<Option<Vec<u8>>, String>;

impl Resp {
    fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_write_timeout(Some(REPLY_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command and reads its reply; an `Err` is an I/O error (the connection is
    /// then unusable), an `Ok(Err)` an error reply.
    fn command(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg);
            request.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&request)?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        match line.as_bytes().first() {
            Some(b'+' | b':') => Ok(Ok(Some(line.as_bytes()[1..].to_vec()))),
            Some(b'-') => Ok(Err(line.to_owned())),
            Some(b'$') => {
                let len: i64 = line[1..].parse().map_err(std::io::Error::other)?;
                if len < 0 {
                    return Ok(Ok(None));
                }
                let mut value = vec![0; usize::try_from(len).unwrap_or(0) + 2];
                self.reader.read_exact(&mut value)?;
                value.truncate(value.len() - 2);
                Ok(Ok(Some(value)))
            }
            _ => Err(std::io::Error::other(format!("unexpected reply {line:?}"))),
        }
    }
}

/// A small deterministic PRNG (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }
}

fn nanos_since(origin: Instant) -> u64 {
    u64::try_from(origin.elapsed().as_nanos()).unwrap()
}

/// What one client did: (key, operation) in its order, plus counts of what it dropped.
#[derive(Default)]
struct ClientLog {
    ops: Vec<(usize, Op)>,
    /// Operations never sent (no connection to the node).
    unsent: usize,
    /// Reads that got an error (dropped: they constrain nothing).
    failed_reads: usize,
}

fn run_client(
    id: usize,
    seed: u64,
    clients: &[SocketAddr],
    names: &[String],
    origin: Instant,
    stop: &AtomicBool,
) -> ClientLog {
    let mut rng = Rng(seed ^ (id as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut connections: Vec<Option<Resp>> = (0..clients.len()).map(|_| None).collect();
    let mut log = ClientLog::default();
    let mut written = 0u64;
    let deadline = Instant::now() + RUN + Duration::from_secs(5);
    for _ in 0..MAX_OPS_PER_CLIENT {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            break;
        }
        let node = rng.below(clients.len());
        let key = rng.below(KEYS);
        let write = rng.below(2) == 0;
        if connections[node].is_none() {
            match Resp::connect(clients[node]) {
                Ok(connection) => connections[node] = Some(connection),
                Err(_) => {
                    // Nothing was sent: the operation did not happen.
                    log.unsent += 1;
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            }
        }
        let connection = connections[node].as_mut().unwrap();
        let key_name = format!("lin-{key}");
        let note = format!("client {id} via {}", names[node]);
        if write {
            written += 1;
            let value = (id as u64 + 1) * 1_000_000_000 + written;
            let text = value.to_string();
            let invoke = nanos_since(origin);
            let reply = connection.command(&[b"SET", key_name.as_bytes(), text.as_bytes()]);
            let complete = nanos_since(origin);
            let op = match reply {
                Ok(Ok(Some(ok))) if ok == b"OK" => {
                    Op::write(value, invoke, complete).with_note(note)
                }
                other => {
                    connections[node] = None;
                    Op::unknown_write(value, invoke).with_note(format!("{note}: {other:?}"))
                }
            };
            log.ops.push((key, op));
        } else {
            let invoke = nanos_since(origin);
            let reply = connection.command(&[b"GET", key_name.as_bytes()]);
            let complete = nanos_since(origin);
            match reply {
                Ok(Ok(value)) => {
                    let value = value.map(|bytes| {
                        std::str::from_utf8(&bytes)
                            .ok()
                            .and_then(|text| text.parse::<u64>().ok())
                            .unwrap_or_else(|| panic!("{key_name} holds {bytes:?}"))
                    });
                    log.ops
                        .push((key, Op::read(value, invoke, complete).with_note(note)));
                }
                Ok(Err(_)) | Err(_) => {
                    connections[node] = None;
                    log.failed_reads += 1;
                }
            }
        }
    }
    log
}

// Proves single-key SET/GET on a distributed cache with sync replication is linearizable
// while clients go through every node and one node is killed mid-run.
#[test]
fn single_key_registers_stay_linearizable_when_a_node_is_killed() {
    let seed = std::env::var("WEFT_LINEARIZABILITY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            u64::try_from(now.as_nanos() % u128::from(u64::MAX)).unwrap()
        });
    eprintln!("seed {seed} (WEFT_LINEARIZABILITY_SEED={seed} to pick the same nodes and keys)");
    let mut rng = Rng(seed);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(
        &config,
        format!(
            "[caches.default]\nmode = \"distributed\"\nowners = 2\nreplication = \"sync\"\n\
             segments = {SEGMENTS}\n"
        ),
    )
    .unwrap();
    let clients: Vec<SocketAddr> = (0..NODES)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], common::cluster::free_tcp_port())))
        .collect();
    let clusters: Vec<SocketAddr> = (0..NODES)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], common::cluster::free_udp_and_tcp_port())))
        .collect();
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let nodes: Vec<Node> = (0..NODES)
        .map(|i| Node::start(&names[i], &config, clients[i], clusters[i], &clusters))
        .collect();
    converge(&nodes, Duration::from_secs(60));
    let owners = owners_of_keys(&nodes[0]);
    for line in &owners {
        eprintln!("{line}");
    }

    let origin = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let stop = Arc::clone(&stop);
            let clients = clients.clone();
            let names = names.clone();
            std::thread::spawn(move || run_client(id, seed, &clients, &names, origin, &stop))
        })
        .collect();

    std::thread::sleep(KILL_AT);
    let victim = rng.below(NODES);
    let killed_at = nanos_since(origin);
    nodes[victim].kill();
    eprintln!(
        "killed {} at {:.3} s",
        nodes[victim].name,
        killed_at as f64 / 1e9
    );
    std::thread::sleep(RUN.saturating_sub(KILL_AT));
    stop.store(true, Ordering::Relaxed);
    let logs: Vec<ClientLog> = workers.into_iter().map(|w| w.join().unwrap()).collect();

    // One last read of every key through every node still up.
    let mut histories: Vec<Vec<Op>> = vec![Vec::new(); KEYS];
    for (i, node) in nodes.iter().enumerate().filter(|&(i, _)| i != victim) {
        let Ok(mut connection) = Resp::connect(node.client) else {
            continue;
        };
        for (key, history) in histories.iter_mut().enumerate() {
            let invoke = nanos_since(origin);
            let reply = connection.command(&[b"GET", format!("lin-{key}").as_bytes()]);
            let complete = nanos_since(origin);
            if let Ok(Ok(value)) = reply {
                let value = value.map(|v| std::str::from_utf8(&v).unwrap().parse().unwrap());
                history.push(
                    Op::read(value, invoke, complete).with_note(format!("final via {}", names[i])),
                );
            } else {
                break;
            }
        }
    }

    let mut unsent = 0;
    let mut failed_reads = 0;
    for log in logs {
        unsent += log.unsent;
        failed_reads += log.failed_reads;
        for (key, op) in log.ops {
            histories[key].push(op);
        }
    }
    let mut ok_ops = 0;
    let mut ok_after_kill = 0;
    let mut unknown_writes = 0;
    for history in &histories {
        for op in history {
            if op.outcome == Outcome::Unknown {
                unknown_writes += 1;
            } else {
                ok_ops += 1;
                if op.invoke > killed_at {
                    ok_after_kill += 1;
                }
            }
        }
    }
    eprintln!(
        "{ok_ops} operations completed ({ok_after_kill} invoked after the kill), \
         {unknown_writes} writes unknown, {failed_reads} reads failed, {unsent} not sent"
    );

    let mut failures = Vec::new();
    for (key, history) in histories.iter().enumerate() {
        let writes = history
            .iter()
            .filter(|op| matches!(op.action, Action::Write(_)))
            .count();
        let start = Instant::now();
        match check(history) {
            Ok(checked) => eprintln!(
                "lin-{key}: {} operations ({writes} writes), {} checked, linearizable ({:?})",
                history.len(),
                checked.ops,
                start.elapsed()
            ),
            Err(why) => failures.push(format!(
                "{} (checked in {:?}): {why}",
                owners[key],
                start.elapsed()
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed}, {} killed at {:.3} s:\n{}",
        nodes[victim].name,
        killed_at as f64 / 1e9,
        failures.join("\n")
    );
    assert!(ok_ops > 500, "only {ok_ops} operations completed");
}

// Proves a Hot Rod connection answers requests that do not depend on a write still
// replicating while that write waits for its backup (a 15.x Java client multiplexes all its
// threads over one connection per server, so a write must not hold back their reads), and
// that a read which saw the write waits for it: with the backup stopped (SIGSTOP), a read of
// another key is answered, the write and a read of its key are not; once the backup runs
// again, both are, the read with the written value.
#[test]
fn hot_rod_answers_reads_while_a_write_waits_for_its_backup() {
    use common::cluster::{Addresses, Node as Process, wait_stable};
    use common::hotrod::{HotRod, get, put};
    use weft_hotrod::{Request, Status};

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(
        &config,
        "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n",
    )
    .unwrap();
    let addresses: Vec<Addresses> = (0..2).map(|_| Addresses::free()).collect();
    let nodes: Vec<Process> = ["node-a", "node-b"]
        .iter()
        .zip(&addresses)
        .map(|(name, at)| Process::start(name, &config, *at, &addresses))
        .collect();
    wait_stable(
        &nodes.iter().collect::<Vec<_>>(),
        "default",
        Duration::from_secs(40),
    );
    let (a, b) = (&nodes[0], &nodes[1]);

    // The topology names each segment's primary; two keys whose primary is node-a, on
    // different segments.
    let mut client = HotRod::connect(a.client, 40);
    let mut header = client.header();
    header.intelligence = 3;
    let id = client.send(&header, &Request::Ping);
    let topology = client.response_to(id).header.topology.expect("a topology");
    let owners = topology.segment_owners.expect("segment owners");
    let a_index = topology
        .servers
        .iter()
        .position(|(_, port)| *port == a.client.port())
        .expect("node-a in the topology") as u32;
    let primary_a: Vec<(String, u32)> = (0..1000)
        .map(|i| format!("key-{i}"))
        .map(|key| {
            let segment = weft_core::hash::segment_of(key.as_bytes(), 32);
            (key, segment)
        })
        .filter(|(_, segment)| owners[*segment as usize].first() == Some(&a_index))
        .collect();
    let (written, written_segment) = primary_a.first().cloned().expect("a key node-a owns");
    let (other, _) = primary_a
        .iter()
        .find(|(_, segment)| *segment != written_segment)
        .cloned()
        .expect("a key of another segment node-a owns");
    assert_eq!(client.call(put(&other, "before")).status(), Status::Success);

    b.signal("-STOP");
    let mut send = |request| {
        let header = client.header();
        client.send(&header, &request)
    };
    let put_id = send(put(&written, "after"));
    let read_written_id = send(get(&written));
    let read_other_id = send(get(&other));
    let first = client
        .read_within(Duration::from_secs(3))
        .expect("the read of another key is answered while the backup is stopped");
    assert_eq!(first.header.message_id, read_other_id, "{first:?}");
    assert_eq!(first.value(), b"before");
    let early = client.read_within(Duration::from_millis(300));
    b.signal("-CONT");
    assert!(
        early.is_none(),
        "answered before the backup had the write: {early:?}"
    );
    let mut answered = std::collections::BTreeMap::new();
    for _ in 0..2 {
        let response = client.read();
        answered.insert(response.header.message_id, response);
    }
    assert_eq!(answered[&put_id].status(), Status::Success);
    assert_eq!(answered[&read_written_id].value(), b"after");
}
