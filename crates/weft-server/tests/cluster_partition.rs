//! A real network partition: three `weft` processes, each in a network namespace of its
//! own, talking cluster traffic over a bridge in a fourth namespace. Cutting one node's
//! cluster link makes it a minority: its caches go DEGRADED. With DENY_READ_WRITES they
//! refuse reads and writes with a clear error, with ALLOW_READS they refuse writes only, with
//! ALLOW_READ_WRITES they take writes — while the other two go on. When the link comes back,
//! the node rejoins and serves the values written while it was cut off, not its stale ones,
//! keys deleted while it was cut off stay deleted, and what it wrote meanwhile is merged by
//! PREFERRED_NON_NULL: the majority's values win, keys only the minority wrote are kept.
//!
//! Each node also has a client link straight to the test's namespace (addresses in the
//! test's own namespace: two runs at once would clash), which the partition leaves up.
//! Needs root and `ip netns` (CI runs as root); elsewhere it says so and skips.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CLIENT_PORT: u16 = 11222;
const CLUSTER_PORT: u16 = 7800;

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

fn must(args: &[&str]) {
    assert!(ip(args), "ip {} failed", args.join(" "));
}

/// Namespaces, links and processes, torn down on drop.
struct Lab {
    tag: String,
    nodes: Vec<Child>,
}

impl Lab {
    fn hub(&self) -> String {
        format!("{}h", self.tag)
    }

    fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.tag)
    }

    fn client(i: usize) -> SocketAddr {
        format!("10.202.{i}.2:{CLIENT_PORT}").parse().unwrap()
    }

    fn cluster(i: usize) -> String {
        format!("10.201.0.{}:{CLUSTER_PORT}", i + 1)
    }

    fn build(nodes: usize) -> Option<Self> {
        let tag = format!("wp{:x}", std::process::id() & 0xfffff);
        let lab = Self {
            tag,
            nodes: Vec::new(),
        };
        if !ip(&["netns", "add", &lab.hub()]) {
            return None;
        }
        must(&["-n", &lab.hub(), "link", "add", "br0", "type", "bridge"]);
        must(&["-n", &lab.hub(), "link", "set", "br0", "up"]);
        for i in 0..nodes {
            let ns = lab.ns(i);
            must(&["netns", "add", &ns]);
            must(&["-n", &ns, "link", "set", "lo", "up"]);
            // Cluster link: node <-> hub bridge.
            must(&[
                "-n",
                &ns,
                "link",
                "add",
                "c0",
                "type",
                "veth",
                "peer",
                "name",
                &format!("p{i}"),
                "netns",
                &lab.hub(),
            ]);
            must(&[
                "-n",
                &lab.hub(),
                "link",
                "set",
                &format!("p{i}"),
                "master",
                "br0",
            ]);
            must(&["-n", &lab.hub(), "link", "set", &format!("p{i}"), "up"]);
            must(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.201.0.{}/24", i + 1),
                "dev",
                "c0",
            ]);
            must(&["-n", &ns, "link", "set", "c0", "up"]);
            // Client link: node <-> the test's namespace.
            let host_side = format!("{}c{i}", lab.tag);
            must(&[
                "link", "add", &host_side, "type", "veth", "peer", "name", "k0", "netns", &ns,
            ]);
            must(&[
                "addr",
                "add",
                &format!("10.202.{i}.1/30"),
                "dev",
                &host_side,
            ]);
            must(&["link", "set", &host_side, "up"]);
            must(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.202.{i}.2/30"),
                "dev",
                "k0",
            ]);
            must(&["-n", &ns, "link", "set", "k0", "up"]);
        }
        Some(lab)
    }

    fn start(&mut self, config: &std::path::Path, count: usize) {
        let seeds: Vec<String> = (0..count).map(Self::cluster).collect();
        for i in 0..count {
            let child = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.ns(i),
                    env!("CARGO_BIN_EXE_weft"),
                    "server",
                ])
                .args(["--config", config.to_str().unwrap()])
                .args(["--bind", &format!("0.0.0.0:{CLIENT_PORT}")])
                .args(["--cluster-listen", &Self::cluster(i)])
                .args(["--node-name", &format!("node-{i}")])
                .args(["--join", &seeds.join(",")])
                .stdout(match std::env::var("WEFT_TEST_LOGS") {
                    // WEFT_TEST_LOGS=DIR keeps each node's log there.
                    Ok(dir) => Stdio::from(
                        std::fs::File::create(
                            std::path::Path::new(&dir).join(format!("partition-node-{i}.log")),
                        )
                        .expect("a log file"),
                    ),
                    Err(_) => Stdio::null(),
                })
                .stderr(Stdio::null())
                .spawn()
                .expect("start weft in its namespace");
            self.nodes.push(child);
        }
    }

    fn cut(&self, i: usize, up: bool) {
        must(&[
            "-n",
            &self.ns(i),
            "link",
            "set",
            "c0",
            if up { "up" } else { "down" },
        ]);
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for child in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
        for i in 0..8 {
            ip(&["link", "del", &format!("{}c{i}", self.tag)]);
            ip(&["netns", "del", &self.ns(i)]);
        }
        ip(&["netns", "del", &self.hub()]);
    }
}

fn http_get(addr: SocketAddr, path: &str) -> Option<serde_json::Value> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    serde_json::from_str(response.split_once("\r\n\r\n")?.1).ok()
}

/// The default cache's view on a node: (members, phase, degraded).
fn view(addr: SocketAddr) -> Option<(usize, String, bool)> {
    let report = http_get(addr, "/rest/v2/cluster/topology")?;
    let cache = report["caches"]
        .as_array()?
        .iter()
        .find(|cache| cache["cache"] == "default")?
        .clone();
    Some((
        cache["members"].as_array()?.len(),
        cache["phase"].as_str()?.to_owned(),
        cache["degraded"].as_bool()?,
    ))
}

fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One RESP command; the reply line (or bulk value) as text.
fn resp(addr: SocketAddr, args: &[&str]) -> String {
    let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return "-unreachable".to_owned();
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    let mut reader = BufReader::new(stream);
    reader.get_mut().write_all(request.as_bytes()).unwrap();
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return "-no reply".to_owned();
    }
    let line = line.trim_end().to_owned();
    if line.starts_with('$') && line != "$-1" {
        let mut value = String::new();
        let _ = reader.read_line(&mut value);
        return value.trim_end().to_owned();
    }
    line
}

/// The labs use the same addresses in the test's namespace: one at a time.
static LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Root, and `ip netns`, or `None` (the test says why and skips).
fn lab_for_test() -> Option<(std::sync::MutexGuard<'static, ()>, Lab)> {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    if !is_root {
        eprintln!("skipped: network namespaces need root");
        return None;
    }
    let guard = LAB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(lab) = Lab::build(3) else {
        eprintln!("skipped: `ip netns` is not available");
        return None;
    };
    Some((guard, lab))
}

/// Starts three nodes with `caches` and waits until every cache is stable on all of them.
fn start_lab(lab: &mut Lab, caches: &str, count: usize) -> (tempfile::TempDir, Vec<SocketAddr>) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    // Nodes on their namespaces' addresses, open to the lab's (private) network.
    std::fs::write(
        &config,
        format!("[security]\nprotected-mode = false\n{caches}"),
    )
    .unwrap();
    lab.start(&config, 3);
    let clients: Vec<SocketAddr> = (0..3).map(Lab::client).collect();
    wait("the cluster to form", Duration::from_secs(60), || {
        clients.iter().all(|c| {
            http_get(*c, "/rest/v2/cluster/topology").is_some_and(|report| {
                report["caches"].as_array().is_some_and(|found| {
                    found.len() == count
                        && found.iter().all(|c| {
                            c["phase"] == "stable"
                                && c["members"].as_array().is_some_and(|m| m.len() == 3)
                        })
                })
            })
        })
    });
    (dir, clients)
}

// Proves the merge policies on what both sides wrote through a partition (ALLOW_READ_WRITES),
// read through every node: PREFERRED_ALWAYS keeps the majority's values and drops keys only
// the minority wrote; REMOVE_ALL removes every key the sides disagree on, those only the
// minority wrote included; NONE keeps keys only the minority wrote and, where both wrote, the
// newer version, the same everywhere. Keys neither side touched stay as they were.
#[test]
fn merge_policies_reconcile_what_both_sides_wrote() {
    let Some((_guard, mut lab)) = lab_for_test() else {
        return;
    };
    let lenient = |name: &str, db: usize, policy: &str| {
        format!(
            "[caches.{name}]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n\
             resp-database = {db}\npartition-handling = {{ when-split = \"ALLOW_READ_WRITES\", \
             merge-policy = \"{policy}\" }}\n"
        )
    };
    let caches = format!(
        "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n{}{}{}",
        lenient("always", 1, "PREFERRED_ALWAYS"),
        lenient("remove", 2, "REMOVE_ALL"),
        lenient("none", 3, "NONE"),
    );
    let (_dir, clients) = start_lab(&mut lab, &caches, 4);
    let dbs = ["1", "2", "3"];
    for db in dbs {
        for k in 0..20 {
            assert_eq!(
                resp_in(clients[0], db, &["SET", &format!("k{k}"), "before"]),
                "+OK"
            );
        }
    }
    lab.cut(2, false);
    wait("node-2 to go DEGRADED", Duration::from_secs(30), || {
        view(clients[2]).is_some_and(|(_, _, degraded)| degraded)
    });
    for db in dbs {
        for k in 0..10 {
            let only = format!("minority-only-{k}");
            assert_eq!(resp_in(clients[2], db, &["SET", &only, "minority"]), "+OK");
            assert_eq!(
                resp_in(clients[2], db, &["SET", &format!("k{k}"), "minority"]),
                "+OK"
            );
        }
    }
    wait(
        "the majority to drop node-2",
        Duration::from_secs(30),
        || {
            clients[..2].iter().all(|c| {
                view(*c).is_some_and(|(members, phase, degraded)| {
                    members == 2 && phase == "stable" && !degraded
                })
            })
        },
    );
    for db in dbs {
        for k in 0..10 {
            let key = format!("k{k}");
            assert_eq!(
                resp_in(clients[k % 2], db, &["SET", &key, "majority"]),
                "+OK"
            );
        }
    }
    lab.cut(2, true);
    // What each policy must leave, through every node, once the merge is done. NONE keeps,
    // where both sides wrote, the entry with the higher version — either side's, but the
    // same through every node.
    let expected = |db: &str, key: &str| -> &'static [&'static str] {
        let only = key.starts_with("minority-only");
        let changed = !only && key[1..].parse::<usize>().is_ok_and(|k| k < 10);
        match (db, only, changed) {
            (_, false, false) => &["before"],
            ("1", true, _) | ("2", true, _) | ("2", _, true) => &["$-1"],
            ("1", _, true) => &["majority"],
            ("3", _, true) => &["majority", "minority"],
            _ => &["minority"],
        }
    };
    let keys: Vec<String> = (0..20)
        .map(|k| format!("k{k}"))
        .chain((0..10).map(|k| format!("minority-only-{k}")))
        .collect();
    let wrong = || -> Vec<String> {
        let mut wrong = Vec::new();
        for db in dbs {
            for key in &keys {
                let seen: Vec<String> = clients
                    .iter()
                    .map(|client| resp_in(*client, db, &["GET", key]))
                    .collect();
                let agreed = seen.iter().all(|value| *value == seen[0]);
                if !agreed || !expected(db, key).contains(&seen[0].as_str()) {
                    wrong.push(format!("db {db} {key} through each node: {seen:?}"));
                }
            }
        }
        wrong
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let healed = clients.iter().all(|c| {
            view(*c).is_some_and(|(members, phase, degraded)| {
                members == 3 && phase == "stable" && !degraded
            })
        });
        if healed && wrong().is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the merge: {:?}",
            wrong().into_iter().take(12).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Keys from this one on are deleted by the majority during the cut (those before it are
/// overwritten).
const DELETED_FROM: usize = 40;

// Proves a node cut off from the others goes DEGRADED and refuses reads and writes
// (DENY_READ_WRITES) or writes (ALLOW_READS) with a clear error while the majority goes on,
// and after the cut heals serves the majority's writes, not its stale values; keys the
// majority deleted meanwhile stay deleted (node-2's copies do not come back); ALLOW_READ_WRITES
// merges by PREFERRED_NON_NULL; no acknowledged INCR is rolled back or repeated.
#[test]
fn a_minority_partition_refuses_and_heals_without_stale_reads() {
    let Some((_guard, mut lab)) = lab_for_test() else {
        return;
    };
    let caches = "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n\
         [caches.reads]\nmode = \"distributed\"\nowners = 2\nsegments = 32\nresp-database = 1\n\
         partition-handling = { when-split = \"ALLOW_READS\" }\n\
         [caches.lenient]\nmode = \"distributed\"\nowners = 2\nsegments = 32\nresp-database = 2\n\
         partition-handling = { when-split = \"ALLOW_READ_WRITES\", merge-policy = \"PREFERRED_NON_NULL\" }\n";
    let (_dir, clients) = start_lab(&mut lab, caches, 3);
    for k in 0..60 {
        assert_eq!(
            resp(clients[0], &["SET", &format!("k{k}"), "before"]),
            "+OK"
        );
        for db in ["1", "2"] {
            assert_eq!(
                resp_in(clients[0], db, &["SET", &format!("k{k}"), "before"]),
                "+OK"
            );
        }
    }

    // Counters incremented through the majority's nodes all along — before the cut, through
    // it and through the heal — and once through node-2 before the cut: no acknowledged
    // increment may be rolled back or repeated when node-2 comes back.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let counting = {
        let stop = std::sync::Arc::clone(&stop);
        let clients = clients.clone();
        std::thread::spawn(move || {
            let mut results: Vec<Vec<i64>> = vec![Vec::new(); 4];
            let mut i = 0usize;
            let deadline = Instant::now() + Duration::from_secs(240);
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && Instant::now() < deadline {
                let counter = i % 4;
                let through = if i < 8 { clients[2] } else { clients[i % 2] };
                let reply = resp(through, &["INCR", &format!("ctr{counter}")]);
                if let Ok(value) = reply.trim_start_matches(':').parse::<i64>() {
                    results[counter].push(value);
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            results
        })
    };
    std::thread::sleep(Duration::from_millis(500));

    // Cut node-2's cluster link: it is a minority of one.
    lab.cut(2, false);
    wait("node-2 to go DEGRADED", Duration::from_secs(30), || {
        view(clients[2]).is_some_and(|(_, _, degraded)| degraded)
    });
    let refused_read = resp(clients[2], &["GET", "k1"]);
    assert!(
        refused_read.contains("DEGRADED"),
        "read on the minority: {refused_read}"
    );
    let refused_write = resp(clients[2], &["SET", "k1", "minority"]);
    assert!(
        refused_write.contains("DEGRADED"),
        "write on the minority: {refused_write}"
    );
    // ALLOW_READS: the minority reads what it holds and refuses writes.
    assert_eq!(resp_in(clients[2], "1", &["GET", "k1"]), "before");
    let refused = resp_in(clients[2], "1", &["SET", "k1", "minority"]);
    assert!(refused.contains("DEGRADED"), "ALLOW_READS write: {refused}");
    // ALLOW_READ_WRITES: the minority takes writes; they are reconciled on the merge.
    for k in 0..10 {
        let key = format!("minority-only-{k}");
        assert_eq!(resp_in(clients[2], "2", &["SET", &key, "minority"]), "+OK");
        assert_eq!(
            resp_in(clients[2], "2", &["SET", &format!("k{k}"), "minority"]),
            "+OK"
        );
    }
    // The majority drops node-2 and goes on.
    wait(
        "the majority to drop node-2",
        Duration::from_secs(30),
        || {
            clients[..2].iter().all(|c| {
                view(*c).is_some_and(|(members, phase, degraded)| {
                    members == 2 && phase == "stable" && !degraded
                })
            })
        },
    );
    // The majority overwrites some keys and deletes the others (DENY_READ_WRITES and
    // ALLOW_READS): node-2 still holds them all as they were before the cut.
    for k in 0..60 {
        let key = format!("k{k}");
        if k < DELETED_FROM {
            assert_eq!(resp(clients[k % 2], &["SET", &key, "after"]), "+OK");
        } else {
            assert_eq!(resp(clients[k % 2], &["DEL", &key]), ":1");
            assert_eq!(resp_in(clients[k % 2], "1", &["DEL", &key]), ":1");
        }
        assert_eq!(resp_in(clients[k % 2], "2", &["SET", &key, "after"]), "+OK");
    }

    // Heal: node-2 comes back, is re-admitted and fetches what it owns again.
    lab.cut(2, true);
    wait("node-2 to rejoin", Duration::from_secs(60), || {
        clients.iter().all(|c| {
            view(*c).is_some_and(|(members, phase, degraded)| {
                members == 3 && phase == "stable" && !degraded
            })
        })
    });
    for client in &clients {
        for k in 0..DELETED_FROM {
            let got = resp(*client, &["GET", &format!("k{k}")]);
            if got != "after" {
                let everywhere: Vec<String> = clients
                    .iter()
                    .map(|c| resp(*c, &["GET", &format!("k{k}")]))
                    .collect();
                panic!("k{k} via {client}: {got}; through each node: {everywhere:?}");
            }
        }
    }
    // What the majority deleted stays deleted, through every node, in both caches — also
    // once node-2's merge has run (it runs as node-2 fetches its segments again and once the
    // topology is stable): watched for a while.
    let watch_until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < watch_until {
        for client in &clients {
            for k in DELETED_FROM..60 {
                let key = format!("k{k}");
                assert_eq!(
                    resp(*client, &["GET", &key]),
                    "$-1",
                    "{key}, deleted by the majority during the cut, through {client}"
                );
                assert_eq!(
                    resp_in(*client, "1", &["GET", &key]),
                    "$-1",
                    "ALLOW_READS {key}, deleted by the majority during the cut, through {client}"
                );
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let results = counting.join().expect("the counting thread");
    for (counter, acked) in results.iter().enumerate() {
        let mut seen = acked.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(
            seen.len(),
            acked.len(),
            "ctr{counter}: an INCR result was returned twice: {acked:?}"
        );
        let highest = acked.iter().copied().max().unwrap_or(0);
        for client in &clients {
            let now: i64 = resp(*client, &["GET", &format!("ctr{counter}")])
                .parse()
                .unwrap_or(0);
            assert!(
                now >= highest,
                "ctr{counter} via {client} reads {now}, below the acknowledged {highest}"
            );
        }
    }
    // PREFERRED_NON_NULL: where both sides wrote, the majority's value; what only the
    // minority wrote is kept, through every node. (The merge runs as node-2 fetches its
    // segments again; give it a moment to reach the primaries.)
    let merged = |client: &SocketAddr| -> Vec<String> {
        (0..10)
            .map(|k| resp_in(*client, "2", &["GET", &format!("minority-only-{k}")]))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !clients
        .iter()
        .all(|client| merged(client).iter().all(|v| v == "minority"))
    {
        if Instant::now() > deadline {
            let seen: Vec<Vec<String>> = clients.iter().map(merged).collect();
            panic!("minority-only entries after the merge, per node: {seen:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    for client in &clients {
        for k in 0..60 {
            assert_eq!(
                resp_in(*client, "2", &["GET", &format!("k{k}")]),
                "after",
                "lenient k{k} via {client}"
            );
        }
    }
}

/// One RESP command on database `db` (SELECT first, on the same connection).
fn resp_in(addr: SocketAddr, db: &str, args: &[&str]) -> String {
    let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return "-unreachable".to_owned();
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream);
    let mut send = |args: &[&str]| -> String {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        reader.get_mut().write_all(request.as_bytes()).unwrap();
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return "-no reply".to_owned();
        }
        let line = line.trim_end().to_owned();
        if line.starts_with('$') && line != "$-1" {
            let mut value = String::new();
            let _ = reader.read_line(&mut value);
            return value.trim_end().to_owned();
        }
        line
    };
    let selected = send(&["SELECT", db]);
    if selected != "+OK" {
        return selected;
    }
    send(args)
}

/// INCR and SET load through every node, in threads, until stopped: what each acknowledged.
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    workers: Vec<std::thread::JoinHandle<Acknowledged>>,
}

/// What one load thread had acknowledged: each counter's INCR results, and the keys it set.
type Acknowledged = (Vec<Vec<i64>>, Vec<String>);

/// Counters the load increments.
const COUNTERS: usize = 8;

impl Load {
    /// Three threads, each sending INCR of shared counters and SET of fresh keys through every
    /// node in turn (a node that refuses, or does not answer, only costs the request).
    fn start(clients: &[SocketAddr]) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers = (0..3)
            .map(|worker| {
                let stop = std::sync::Arc::clone(&stop);
                let clients = clients.to_vec();
                std::thread::spawn(move || {
                    let mut results: Vec<Vec<i64>> = vec![Vec::new(); COUNTERS];
                    let mut sets: Vec<String> = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(150);
                    let mut i = 0usize;
                    while !stop.load(std::sync::atomic::Ordering::SeqCst)
                        && Instant::now() < deadline
                    {
                        let through = clients[(worker + i) % clients.len()];
                        let counter = (worker * 3 + i) % COUNTERS;
                        let reply = resp(through, &["INCR", &format!("ctr{counter}")]);
                        if let Ok(value) = reply.trim_start_matches(':').parse::<i64>() {
                            results[counter].push(value);
                        }
                        let key = format!("w{worker}-{i}");
                        if resp(through, &["SET", &key, "v"]) == "+OK" {
                            sets.push(key);
                        }
                        i += 1;
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    (results, sets)
                })
            })
            .collect();
        Self { stop, workers }
    }

    /// Stops the load and checks, through every node, that no INCR result was returned twice,
    /// no counter reads below its highest acknowledged result and no acknowledged SET is lost.
    fn stop_and_audit(self, clients: &[SocketAddr]) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut acked: Vec<Vec<i64>> = vec![Vec::new(); COUNTERS];
        let mut sets = Vec::new();
        for worker in self.workers {
            let (results, written) = worker.join().expect("a load thread");
            for (counter, values) in results.into_iter().enumerate() {
                acked[counter].extend(values);
            }
            sets.extend(written);
        }
        let mut problems = Vec::new();
        for (counter, values) in acked.iter().enumerate() {
            let mut seen = values.clone();
            seen.sort_unstable();
            let repeated: Vec<i64> = seen
                .windows(2)
                .filter(|w| w[0] == w[1])
                .map(|w| w[0])
                .collect();
            if !repeated.is_empty() {
                problems.push(format!(
                    "ctr{counter}: {} results returned twice, e.g. {:?}",
                    repeated.len(),
                    &repeated[..repeated.len().min(5)]
                ));
            }
            let highest = values.iter().copied().max().unwrap_or(0);
            for client in clients {
                let now: i64 = resp(*client, &["GET", &format!("ctr{counter}")])
                    .parse()
                    .unwrap_or(0);
                if now < highest {
                    problems.push(format!(
                        "ctr{counter} via {client} reads {now}, below the acknowledged {highest}"
                    ));
                }
            }
        }
        let lost = sets
            .iter()
            .filter(|key| resp(clients[0], &["GET", key]) != "v")
            .count();
        if lost > 0 {
            problems.push(format!("{lost} of {} acknowledged SETs lost", sets.len()));
        }
        let total: usize = acked.iter().map(Vec::len).sum();
        assert!(
            total > 100,
            "too few increments acknowledged ({total}) to prove anything"
        );
        assert!(problems.is_empty(), "after the heal: {problems:#?}");
    }
}

/// Waits until every node reports the cache stable on three members, none DEGRADED.
fn wait_healed(clients: &[SocketAddr]) {
    wait("the cluster to heal", Duration::from_secs(60), || {
        clients.iter().all(|c| {
            view(*c).is_some_and(|(members, phase, degraded)| {
                members == 3 && phase == "stable" && !degraded
            })
        })
    });
}

// Proves a partition that heals under load rolls nothing back: counters incremented through
// every node (the cut-off one — the consensus leader — refuses while DEGRADED) before,
// during and after a 12-second cut never return a result twice, and every node reads each
// counter at or above the highest acknowledged result; keys set during the cut read back.
#[test]
fn a_healed_partition_rolls_back_no_increment() {
    let Some((_guard, mut lab)) = lab_for_test() else {
        return;
    };
    let caches = "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n";
    let (_dir, clients) = start_lab(&mut lab, caches, 1);
    let load = Load::start(&clients);
    std::thread::sleep(Duration::from_secs(3));
    // node-0 founded the cluster: it leads consensus. Cut off, it cannot commit anything,
    // and must still go DEGRADED and take no write.
    lab.cut(0, false);
    std::thread::sleep(Duration::from_secs(12));
    lab.cut(0, true);
    wait_healed(&clients);
    std::thread::sleep(Duration::from_secs(3));
    load.stop_and_audit(&clients);
}

// Proves that when every node is cut off from every other under INCR and SET load, every
// node — the consensus leader too — goes DEGRADED within the failure-detection time and
// refuses requests with the DEGRADED error instead of hanging, and that after the heal
// nothing acknowledged is lost or rolled back and no INCR result repeats.
#[test]
fn every_node_cut_off_degrades_and_heals() {
    let Some((_guard, mut lab)) = lab_for_test() else {
        return;
    };
    let caches = "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n";
    let (_dir, clients) = start_lab(&mut lab, caches, 1);
    for k in 0..30 {
        assert_eq!(
            resp(clients[k % 3], &["SET", &format!("k{k}"), "before"]),
            "+OK"
        );
    }
    let load = Load::start(&clients);
    std::thread::sleep(Duration::from_secs(2));
    for i in 0..3 {
        lab.cut(i, false);
    }
    let cut_at = Instant::now();
    wait("every node to go DEGRADED", Duration::from_secs(20), || {
        clients
            .iter()
            .all(|c| view(*c).is_some_and(|(_, _, degraded)| degraded))
    });
    let degraded_after = cut_at.elapsed();
    for client in &clients {
        let started = Instant::now();
        let write = resp(*client, &["SET", "k1", "during"]);
        let read = resp(*client, &["GET", "k2"]);
        assert!(
            write.contains("DEGRADED") && read.contains("DEGRADED"),
            "{client} during the cut: SET {write}, GET {read}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{client} took {:?} to refuse",
            started.elapsed()
        );
    }
    for i in 0..3 {
        lab.cut(i, true);
    }
    wait_healed(&clients);
    std::thread::sleep(Duration::from_secs(2));
    load.stop_and_audit(&clients);
    for client in &clients {
        for k in 0..30 {
            assert_eq!(
                resp(*client, &["GET", &format!("k{k}")]),
                "before",
                "k{k} via {client}"
            );
        }
    }
    eprintln!("every node DEGRADED {degraded_after:?} after the cut");
}

/// The coordinator (consensus leader) a node names, if any.
fn coordinator(addr: SocketAddr) -> Option<Option<String>> {
    let report = http_get(addr, "/rest/v2/cluster/topology")?;
    Some(report["coordinator"].as_str().map(str::to_owned))
}

// Proves a coordinator cut off from the others steps down (it names no coordinator within a
// few seconds, instead of leading a cluster it cannot reach), the majority elects another
// and serves writes to every segment again, and after the heal there is one coordinator, the
// majority's. Prints how long each took.
#[test]
fn a_cut_off_coordinator_steps_down_and_the_majority_serves() {
    let Some((_guard, mut lab)) = lab_for_test() else {
        return;
    };
    let caches = "[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 32\n";
    let (_dir, clients) = start_lab(&mut lab, caches, 1);
    let mut leader = None;
    wait("a coordinator", Duration::from_secs(30), || {
        leader = coordinator(clients[0]).flatten().and_then(|name| {
            name.strip_prefix("node-")
                .and_then(|i| i.parse::<usize>().ok())
        });
        leader.is_some()
    });
    let cut = leader.unwrap();
    let majority: Vec<SocketAddr> = (0..3).filter(|&i| i != cut).map(|i| clients[i]).collect();
    let cut_name = format!("node-{cut}");

    lab.cut(cut, false);
    let cut_at = Instant::now();
    let (mut stepped_down, mut elected, mut serving) = (None, None, None);
    let mut round = 0u64;
    while (stepped_down.is_none() || elected.is_none() || serving.is_none())
        && cut_at.elapsed() < Duration::from_secs(60)
    {
        if stepped_down.is_none()
            && coordinator(clients[cut]).is_some_and(|named| named.as_deref() != Some(&cut_name))
        {
            stepped_down = Some(cut_at.elapsed());
        }
        if elected.is_none() {
            let named: Vec<Option<String>> =
                majority.iter().map(|c| coordinator(*c).flatten()).collect();
            if named[0].is_some() && named[0] == named[1] && named[0].as_deref() != Some(&cut_name)
            {
                elected = Some(cut_at.elapsed());
            }
        }
        if elected.is_some() && serving.is_none() {
            // Writes to every segment (64 keys over 32 segments), through both nodes.
            round += 1;
            let all_written = (0..64).all(|k| {
                let key = format!("serve-{round}-{k}");
                resp(majority[k % 2], &["SET", &key, "v"]) == "+OK"
            });
            if all_written {
                serving = Some(cut_at.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "coordinator {cut_name} cut off: stepped down after {stepped_down:?}, the majority elected another after {elected:?} and served writes to every segment after {serving:?}"
    );
    let stepped_down = stepped_down.expect("the cut-off coordinator still names itself");
    let elected = elected.expect("the majority elected no coordinator");
    let serving = serving.expect("the majority did not serve every segment again");
    assert!(
        stepped_down < Duration::from_secs(8),
        "stepped down after {stepped_down:?}"
    );
    assert!(
        elected < Duration::from_secs(10),
        "elected after {elected:?}"
    );
    assert!(
        serving < Duration::from_secs(30),
        "served after {serving:?}"
    );

    let majority_coordinator = coordinator(majority[0]).flatten();
    lab.cut(cut, false);
    lab.cut(cut, true);
    wait_healed(&clients);
    wait("one coordinator", Duration::from_secs(20), || {
        let named: Vec<Option<String>> =
            clients.iter().map(|c| coordinator(*c).flatten()).collect();
        named.iter().all(|n| n.is_some() && *n == named[0])
    });
    assert_eq!(
        coordinator(clients[cut]).flatten(),
        majority_coordinator,
        "the healed node deposed the majority's coordinator"
    );
}
