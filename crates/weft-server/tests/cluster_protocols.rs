//! Three servers in one process forming a cluster over loopback sockets, checked through
//! the protocols: a Hot Rod client that knows no topology reaches every key from every node
//! (requests for keys a node does not own are forwarded), a hash-aware one gets the agreed
//! topology and, sending each key to the primary it names, is never forwarded; RESP sees
//! the same data from every node, and runs scripts at their keys' owner.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::TestServer;
use common::hotrod::{HotRod, b, get, iterate_as_java_client, protostream, put};
use weft_hotrod::{Request, Status};

fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    http_with(addr, method, path, body, "")
}

/// [`http`] with `extra` header lines (each ending in CRLF).
fn http_with(addr: SocketAddr, method: &str, path: &str, body: &str, extra: &str) -> (u16, String) {
    let content_type = if body.starts_with('{') {
        "application/json"
    } else {
        "text/plain"
    };
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

fn forwarded(addr: SocketAddr, protocol: &str) -> u64 {
    let metrics = http_get(addr, "/metrics");
    let prefix = format!("weft_cluster_forwarded_total{{protocol=\"{protocol}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Starts three clustered servers and waits until each has installed a stable topology of
/// the default cache with all three members.
/// The caches every node declares.
const CACHES: &str = "[caches.default]\nmode = \"distributed\"\nsegments = 32\n\
                      [caches.slots]\nmode = \"distributed\"\nsegments = 32\n\
                      key-partitioner = \"redis-slots\"\nresp-database = 1\n\
                      [caches.lazy]\nmode = \"distributed\"\nsegments = 32\n\
                      replication = \"async\"\nresp-database = 2\n";

fn cluster() -> Vec<TestServer> {
    cluster_and_seeds().0
}

/// Three nodes with their three clustered caches stable, and their cluster addresses as a
/// `join` list.
fn cluster_and_seeds() -> (Vec<TestServer>, Vec<String>) {
    let ports: Vec<u16> = (0..3)
        .map(|_| common::cluster::free_udp_and_tcp_port())
        .collect();
    let seeds: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let servers: Vec<TestServer> = (0..3)
        .map(|i| {
            TestServer::start_with(
                &format!(
                    "node-name = \"node-{i}\"\ncluster-listen = \"127.0.0.1:{}\"\njoin = [{}]\n",
                    ports[i],
                    seeds.join(", ")
                ),
                CACHES,
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = servers.iter().all(|server| {
            let body = http_get(server.addr, "/rest/v2/cluster/topology");
            let report: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            // Every clustered cache of CACHES, not only `default`: a test of another cache
            // must not start while this node has yet to install that cache's topology.
            report["caches"].as_array().is_some_and(|caches| {
                caches.len() == 3
                    && caches.iter().all(|cache| {
                        cache["phase"] == "stable"
                            && cache["members"].as_array().is_some_and(|m| m.len() == 3)
                    })
            })
        });
        if ready {
            return (servers, seeds);
        }
        assert!(Instant::now() < deadline, "the cluster did not form");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every key a full SCAN returns, COUNT 7 at a time; panics on a key returned twice.
fn scan_all(client: &mut common::Client) -> std::collections::BTreeSet<String> {
    let mut cursor = b"0".to_vec();
    let mut keys = std::collections::BTreeSet::new();
    for _ in 0..10_000 {
        let reply = client
            .call(&[&b"SCAN"[..], &cursor[..], &b"COUNT"[..], &b"7"[..]])
            .items();
        cursor = reply[0].bytes();
        for key in reply[1].items() {
            let key = String::from_utf8(key.bytes()).unwrap();
            assert!(keys.insert(key.clone()), "SCAN returned {key} twice");
        }
        if cursor == b"0" {
            return keys;
        }
    }
    panic!("SCAN did not end");
}

/// A whole Hot Rod iteration of the default cache in batches of `batch`, calling `between`
/// after each; the keys (each once, or it panics) and the segments reported finished.
fn iterate(
    client: &mut HotRod,
    batch: u32,
    mut between: impl FnMut(),
) -> (
    std::collections::BTreeSet<Vec<u8>>,
    std::collections::BTreeSet<u32>,
) {
    let response = client.call(Request::IterationStart {
        segments: None,
        filter: None,
        batch_size: batch,
        metadata: false,
    });
    assert_eq!(response.status(), Status::Success, "{response:?}");
    let id = response.reader().string().unwrap();
    let mut keys = std::collections::BTreeSet::new();
    let mut finished = std::collections::BTreeSet::new();
    for _ in 0..100_000 {
        let response = client.call(Request::IterationNext { id: id.clone() });
        assert_eq!(response.status(), Status::Success, "{response:?}");
        let batch = common::hotrod::iteration_batch(&response);
        for segment in batch.finished {
            assert!(finished.insert(segment), "segment {segment} finished twice");
        }
        if batch.entries.is_empty() {
            assert_eq!(
                client.call(Request::IterationEnd { id }).status(),
                Status::Success
            );
            return (keys, finished);
        }
        for (key, _) in batch.entries {
            let shown = String::from_utf8_lossy(&key).into_owned();
            assert!(keys.insert(key), "{shown} iterated twice");
        }
        between();
    }
    panic!("the iteration did not end");
}

// Proves every node answers for every key (forwarding what it does not own), a hash-aware
// client gets the agreed topology and is never forwarded when it follows it, and RESP sees
// what Hot Rod wrote from every node.
#[test]
fn every_node_serves_every_key_and_hash_aware_clients_go_straight_to_the_primary() {
    let servers = cluster();
    let keys: Vec<String> = (0..200).map(|i| format!("key-{i}")).collect();

    // A client without the topology writes everything through node 0 ...
    let mut first = HotRod::connect(servers[0].addr, 40);
    for key in &keys {
        let response = first.call(put(key, format!("value-of-{key}")));
        assert_eq!(response.status(), Status::Success, "{response:?}");
    }
    // ... and reads it back through every node.
    for server in &servers {
        let mut client = HotRod::connect(server.addr, 40);
        for key in &keys {
            assert_eq!(
                client.call(get(key)).value(),
                format!("value-of-{key}").into_bytes()
            );
        }
    }
    let forwarded_before: Vec<u64> = servers
        .iter()
        .map(|s| forwarded(s.addr, "hotrod"))
        .collect();
    assert!(
        forwarded_before.iter().sum::<u64>() > 0,
        "nothing was forwarded"
    );

    // A hash-aware client learns the topology from a PING ...
    let mut aware = HotRod::connect(servers[0].addr, 40);
    let mut header = aware.header();
    header.intelligence = 3;
    let id = aware.send(&header, &Request::Ping);
    let pong = aware.response_to(id);
    let topology = pong.header.topology.expect("a topology update");
    assert_eq!(topology.servers.len(), 3);
    let owners = topology.segment_owners.expect("segment owners");
    assert_eq!(owners.len(), 32);
    assert!(owners.iter().all(|segment| segment.len() == 2));
    // ... and sends each key to the primary it names: no node forwards anything.
    let mut by_port: Vec<HotRod> = topology
        .servers
        .iter()
        .map(|(host, port)| HotRod::connect(format!("{host}:{port}").parse().unwrap(), 40))
        .collect();
    for key in &keys {
        let segment = weft_core::hash::segment_of(key.as_bytes(), 32) as usize;
        let primary = owners[segment][0] as usize;
        let response = by_port[primary].call(put(key, b("again")));
        assert_eq!(response.status(), Status::Success);
    }
    let forwarded_after: Vec<u64> = servers
        .iter()
        .map(|s| forwarded(s.addr, "hotrod"))
        .collect();
    assert_eq!(forwarded_before, forwarded_after);

    // RESP reads what Hot Rod wrote, from every node, each saying it is a cluster node.
    for server in &servers {
        let mut resp = common::Client::connect(server.addr);
        let info = String::from_utf8(resp.call(&[b"INFO"]).bytes()).unwrap();
        assert!(info.contains("redis_mode:cluster\r\n"), "{info}");
        assert!(
            info.contains("# Cluster\r\ncluster_enabled:1\r\n"),
            "{info}"
        );
        for key in keys.iter().take(20) {
            assert_eq!(resp.call(&[b"GET", key.as_bytes()]).bytes(), b"again");
        }
    }

    // Counting, listing and clearing span the cluster: every node counts each key once.
    for server in &servers {
        let mut resp = common::Client::connect(server.addr);
        assert_eq!(resp.call(&[b"DBSIZE"]).int(), 200);
        assert_eq!(
            http(
                server.addr,
                "GET",
                "/rest/v2/caches/default?action=size",
                ""
            )
            .1,
            "200"
        );
        let keys = resp.call(&[&b"KEYS"[..], &b"key-1*"[..]]).items();
        assert_eq!(keys.len(), 111, "key-1, key-10..19, key-100..199");
        let mut hotrod = HotRod::connect(server.addr, 40);
        let size = hotrod.call(Request::Size);
        assert_eq!(size.status(), Status::Success);
        assert_eq!(size.reader().vlong().unwrap(), 200);
    }

    // Iteration spans the cluster too, every key once from every node: SCAN in small
    // steps, REST key and entry listings, and a Hot Rod iteration.
    for server in &servers {
        let mut resp = common::Client::connect(server.addr);
        let scanned = scan_all(&mut resp);
        assert_eq!(
            scanned.len(),
            200,
            "SCAN returned a key twice or missed one"
        );
        assert!(keys.iter().all(|k| scanned.contains(k)));
        let listed = http(
            server.addr,
            "GET",
            "/rest/v2/caches/default?action=keys",
            "",
        );
        let listed: Vec<String> = serde_json::from_str(&listed.1).unwrap();
        let unique: std::collections::BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!((listed.len(), unique.len()), (200, 200));
        let entries = http(
            server.addr,
            "GET",
            "/rest/v2/caches/default?action=entries&limit=150",
            "",
        );
        let entries: Vec<serde_json::Value> = serde_json::from_str(&entries.1).unwrap();
        assert_eq!(entries.len(), 150, "a limit is honoured across members");
        assert!(entries.iter().all(|e| e["value"] == "again"));
        let mut hotrod = HotRod::connect(server.addr, 40);
        let (iterated, finished) = iterate(&mut hotrod, 9, || {});
        assert_eq!(iterated.len(), 200);
        assert_eq!(finished, (0..32).collect(), "every segment finished once");
    }

    // PUT_ALL and GET_ALL whose keys several nodes own: each key written and read at its
    // primary, through any node.
    let entries: Vec<(bytes::Bytes, bytes::Bytes)> = (0..60)
        .map(|i| (b(format!("multi-{i}")), b(format!("multi-value-{i}"))))
        .collect();
    let mut writer = HotRod::connect(servers[1].addr, 40);
    let response = writer.call(Request::PutAll {
        expiration: weft_hotrod::Expiration::DEFAULT,
        entries: entries.clone(),
    });
    assert_eq!(response.status(), Status::Success, "{response:?}");
    for server in &servers {
        let mut reader = HotRod::connect(server.addr, 40);
        for (key, value) in entries.iter().take(10) {
            let key = String::from_utf8(key.to_vec()).unwrap();
            assert_eq!(reader.call(get(&key)).value(), value.to_vec());
        }
        let mut keys: Vec<bytes::Bytes> = entries.iter().map(|(k, _)| k.clone()).collect();
        keys.push(b("multi-absent"));
        let response = reader.call(Request::GetAll { keys });
        assert_eq!(response.status(), Status::Success, "{response:?}");
        let mut body = response.reader();
        let count = body.vint().unwrap();
        let mut found = std::collections::HashMap::new();
        for _ in 0..count {
            let key = body.array().unwrap().to_vec();
            let value = body.array().unwrap().to_vec();
            found.insert(key, value);
        }
        assert_eq!(found.len(), 60, "GET_ALL through {}", server.addr);
        for (key, value) in &entries {
            assert_eq!(found.get(key.as_ref()), Some(&value.to_vec()));
        }
    }
    let mut resp = common::Client::connect(servers[2].addr);
    assert_eq!(resp.call(&[b"DBSIZE"]).int(), 200 + 60);
    for i in 0..60 {
        let key = format!("multi-{i}");
        assert_eq!(resp.call(&[b"DEL", key.as_bytes()]).int(), 1);
    }

    // REST entry requests work on every node, whoever owns the key.
    for (i, server) in servers.iter().enumerate() {
        let path = format!("/rest/v2/caches/default/rest-{i}");
        assert_eq!(http(server.addr, "PUT", &path, &format!("via-{i}")).0, 204);
    }
    for server in &servers {
        for i in 0..servers.len() {
            let (status, body) = http(
                server.addr,
                "GET",
                &format!("/rest/v2/caches/default/rest-{i}"),
                "",
            );
            assert_eq!((status, body), (200, format!("via-{i}")));
        }
    }
    assert!(
        servers
            .iter()
            .map(|s| forwarded(s.addr, "rest"))
            .sum::<u64>()
            > 0
    );

    // A client's `x-weft-forwarded` header is not trusted: a write sent with it to each node
    // reaches the key's two owners only, and a delete then leaves no copy anywhere, so no
    // stray copy on the third node can answer a read with a version gone backwards.
    let forged = "x-weft-forwarded: 1\r\n";
    let path = "/rest/v2/caches/default/forged";
    for (i, server) in servers.iter().enumerate() {
        let (status, body) = http_with(server.addr, "PUT", path, &format!("forged-{i}"), forged);
        assert_eq!(status, 204, "{body}");
    }
    let holders = |key: &[u8]| {
        servers
            .iter()
            .filter(|s| {
                s.manager()
                    .cache("default")
                    .unwrap()
                    .get(key)
                    .unwrap()
                    .is_some()
            })
            .count()
    };
    assert_eq!(
        holders(b"forged"),
        2,
        "a node that does not own the key stored it"
    );
    assert_eq!(http(servers[0].addr, "DELETE", path, "").0, 204);
    assert_eq!(holders(b"forged"), 0, "a copy outlived the delete");
    for server in &servers {
        assert_eq!(http_with(server.addr, "GET", path, "", forged).0, 404);
    }

    // A clustered cache created through one node exists on all.
    let (status, body) = http(
        servers[1].addr,
        "POST",
        "/rest/v2/caches/made-later",
        "{\"distributed-cache\":{\"mode\":\"SYNC\",\"owners\":\"2\"}}",
    );
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !servers
        .iter()
        .all(|s| s.manager().cache("made-later").is_some())
    {
        assert!(
            Instant::now() < deadline,
            "made-later was not created everywhere"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // memcached too: what one node stores, every node reads, one key or many.
    let memcached = |addr: SocketAddr, request: &str, until: &str| -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut reply = Vec::new();
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&reply).ends_with(until) {
            let n = stream.read(&mut chunk).unwrap();
            assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&reply));
            reply.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8(reply).unwrap()
    };
    for i in 0..10 {
        let reply = memcached(
            servers[i % 3].addr,
            &format!("set mc-{i} 7 0 4\r\nv-{i:02}\r\n"),
            "\r\n",
        );
        assert_eq!(reply, "STORED\r\n");
    }
    let all: Vec<String> = (0..10).map(|i| format!("mc-{i}")).collect();
    let expected: String = (0..10)
        .map(|i| format!("VALUE mc-{i} 7 4\r\nv-{i:02}\r\n"))
        .collect::<String>()
        + "END\r\n";
    for server in &servers {
        let reply = memcached(
            server.addr,
            &format!("get {}\r\n", all.join(" ")),
            "END\r\n",
        );
        assert_eq!(reply, expected);
    }
    assert!(
        servers
            .iter()
            .map(|s| forwarded(s.addr, "memcached"))
            .sum::<u64>()
            > 0
    );
    // Read-modify-writes run at the key's owner, whichever node a client asks: counters
    // incremented through every node add up, and a CAS unique read through one node
    // swaps through another (a stale one does not).
    assert_eq!(
        memcached(servers[0].addr, "set mc-counter 0 0 1\r\n0\r\n", "\r\n"),
        "STORED\r\n"
    );
    for i in 1..=30 {
        let reply = memcached(servers[i % 3].addr, "incr mc-counter 1\r\n", "\r\n");
        assert_eq!(reply, format!("{i}\r\n"));
    }
    let gets = memcached(servers[1].addr, "gets mc-3\r\n", "END\r\n");
    let unique: u64 = gets
        .lines()
        .next()
        .and_then(|line| line.split(' ').nth(4))
        .and_then(|unique| unique.parse().ok())
        .unwrap_or_else(|| panic!("no CAS unique in {gets:?}"));
    let cas =
        |addr, unique: u64| memcached(addr, &format!("cas mc-3 1 0 3 {unique}\r\nnew\r\n"), "\r\n");
    assert_eq!(cas(servers[2].addr, unique), "STORED\r\n");
    assert_eq!(cas(servers[0].addr, unique), "EXISTS\r\n");
    assert_eq!(
        memcached(servers[0].addr, "append mc-3 0 0 1\r\n!\r\n", "\r\n"),
        "STORED\r\n"
    );
    assert_eq!(
        memcached(servers[2].addr, "get mc-3\r\n", "END\r\n"),
        "VALUE mc-3 1 4\r\nnew!\r\nEND\r\n"
    );

    // FLUSHDB through one node empties the cache everywhere.
    let mut resp = common::Client::connect(servers[2].addr);
    assert_eq!(resp.call(&[b"FLUSHDB"]).text(), "OK");
    for server in &servers {
        assert_eq!(
            common::Client::connect(server.addr)
                .call(&[b"DBSIZE"])
                .int(),
            0
        );
    }

    // Redis cluster clients: CLUSTER SLOTS covers every slot, a master and a replica each;
    // with Redis' slots as segments, sending each key to the master its slot names is never
    // forwarded.
    let mut resp = common::Client::connect(servers[0].addr);
    assert_eq!(
        resp.call(&[&b"CLUSTER"[..], &b"KEYSLOT"[..], &b"foo"[..]])
            .int(),
        12_182
    );
    assert_eq!(resp.call(&[&b"SELECT"[..], &b"1"[..]]).text(), "OK");
    let slots = resp.call(&[&b"CLUSTER"[..], &b"SLOTS"[..]]).items();
    let mut covered = 0;
    let mut masters: Vec<(i64, i64, u16)> = Vec::new();
    for range in &slots {
        let range = range.items();
        assert_eq!(range.len(), 3, "start, end and the master: {range:?}");
        let (start, end) = (range[0].int(), range[1].int());
        covered += end - start + 1;
        let master = range[2].items();
        masters.push((start, end, u16::try_from(master[1].int()).unwrap()));
    }
    assert_eq!(covered, 16_384);
    let before: u64 = servers.iter().map(|s| forwarded(s.addr, "resp")).sum();
    for i in 0..50 {
        let key = format!("slot-key-{i}");
        let slot = resp
            .call(&[&b"CLUSTER"[..], &b"KEYSLOT"[..], key.as_bytes()])
            .int();
        let port = masters
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|m| m.2)
            .unwrap();
        let mut direct = common::Client::connect(SocketAddr::from(([127, 0, 0, 1], port)));
        assert_eq!(direct.call(&[&b"SELECT"[..], &b"1"[..]]).text(), "OK");
        assert_eq!(
            direct
                .call(&[&b"SET"[..], key.as_bytes(), &b"v"[..]])
                .text(),
            "OK"
        );
    }
    let after: u64 = servers.iter().map(|s| forwarded(s.addr, "resp")).sum();
    assert_eq!(
        before, after,
        "a key sent to its slot's master was forwarded"
    );
    // As on a Redis Cluster, SCAN of a slot-partitioned cache covers the node's own slots,
    // so that a cluster client scanning every master sees each key once.
    let mut scanned = std::collections::BTreeSet::new();
    for server in &servers {
        let mut node = common::Client::connect(server.addr);
        assert_eq!(node.call(&[&b"SELECT"[..], &b"1"[..]]).text(), "OK");
        for key in scan_all(&mut node) {
            assert!(scanned.insert(key.clone()), "{key} scanned on two nodes");
        }
    }
    let slot_keys: std::collections::BTreeSet<String> =
        (0..50).map(|i| format!("slot-key-{i}")).collect();
    assert_eq!(scanned, slot_keys);
    let nodes = resp.call(&[&b"CLUSTER"[..], &b"NODES"[..]]).text();
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    assert_eq!(
        nodes.lines().filter(|l| l.contains("myself")).count(),
        1,
        "{nodes}"
    );

    // Async replication: writes are answered before the backups have them, and every node
    // soon reads them all.
    let mut writer = common::Client::connect(servers[1].addr);
    assert_eq!(writer.call(&[&b"SELECT"[..], &b"2"[..]]).text(), "OK");
    for i in 0..100 {
        let key = format!("lazy-{i}");
        assert_eq!(
            writer
                .call(&[&b"SET"[..], key.as_bytes(), &b"v"[..]])
                .text(),
            "OK"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    for server in &servers {
        let mut reader = common::Client::connect(server.addr);
        assert_eq!(reader.call(&[&b"SELECT"[..], &b"2"[..]]).text(), "OK");
        for i in 0..100 {
            let key = format!("lazy-{i}");
            while reader.call(&[&b"GET"[..], key.as_bytes()]) != common::Frame::bulk("v") {
                assert!(
                    Instant::now() < deadline,
                    "{key} never reached {}",
                    server.addr
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        while reader.call(&[&b"DBSIZE"[..]]).int() != 100 {
            assert!(
                Instant::now() < deadline,
                "DBSIZE on {} never reached 100",
                server.addr
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// Proves a ProtoStream client keeps its Java types on the clustered octet-stream cache: a
// PUT_ALL whose keys several nodes own stores each Integer as one wherever its primary is
// (the entries a node writes through another keep their type), every node reads them back
// as Integers, and an iteration through any node gives every entry once, reporting the
// segments the client hashes keys into, for every segment or a filter.
#[test]
fn protostream_clients_keep_java_types_across_the_cluster() {
    let servers = cluster();
    let mut writer = HotRod::connect(servers[1].addr, 40);
    writer.media_type = protostream();
    let expected: std::collections::HashMap<Vec<u8>, Vec<u8>> = (0..90u8)
        .map(|i| {
            let key = format!("typed-{i}");
            let mut wrapped = vec![0x4a, key.len() as u8];
            wrapped.extend_from_slice(key.as_bytes());
            // Integers (field 5), with some strings among them.
            let value = if i % 3 == 0 {
                vec![0x4a, 0x01, b'a' + i % 26]
            } else {
                vec![0x28, i]
            };
            (wrapped, value)
        })
        .collect();
    let response = writer.call(Request::PutAll {
        expiration: weft_hotrod::Expiration::DEFAULT,
        entries: expected.iter().map(|(k, v)| (b(k), b(v))).collect(),
    });
    assert_eq!(response.status(), Status::Success, "{response:?}");
    for server in &servers {
        let mut reader = HotRod::connect(server.addr, 40);
        reader.media_type = protostream();
        for (key, value) in &expected {
            assert_eq!(
                &reader.call(get(key)).value(),
                value,
                "through {}",
                server.addr
            );
        }
        assert_eq!(iterate_as_java_client(&mut reader, None, 7, 32), expected);
        let mut union = std::collections::HashMap::new();
        for half in 0..2 {
            let asked = (0..32).filter(|s| s % 2 == half).collect();
            union.extend(iterate_as_java_client(&mut reader, Some(&asked), 7, 32));
        }
        assert_eq!(union, expected, "two disjoint halves make the whole");
    }
}

// Proves a Hot Rod iteration returns every entry exactly once while a fourth node joins
// and segments move to it between batches (each segment is paged by key from whichever
// member reads it at the time).
#[test]
fn iteration_returns_each_entry_once_while_a_node_joins() {
    let (servers, seeds) = cluster_and_seeds();
    let mut writer = HotRod::connect(servers[0].addr, 40);
    let keys: std::collections::BTreeSet<Vec<u8>> =
        (0..3_000).map(|i| format!("it-{i}").into_bytes()).collect();
    for key in &keys {
        let key = String::from_utf8(key.clone()).unwrap();
        assert_eq!(writer.call(put(&key, b("v"))).status(), Status::Success);
    }
    let topology_id = |server: &TestServer| -> u64 {
        let body = http_get(server.addr, "/rest/v2/cluster/topology");
        let report: serde_json::Value = serde_json::from_str(&body).unwrap();
        report["caches"]
            .as_array()
            .and_then(|caches| caches.iter().find(|c| c["cache"] == "default"))
            .and_then(|c| c["topology_id"].as_u64())
            .unwrap()
    };
    let before = topology_id(&servers[1]);
    let mut joiner = None;
    let mut batches = 0;
    let mut reader = HotRod::connect(servers[1].addr, 40);
    let (iterated, finished) = iterate(&mut reader, 25, || {
        batches += 1;
        if batches == 5 {
            let port = common::cluster::free_udp_and_tcp_port();
            joiner = Some(TestServer::start_with(
                &format!(
                    "node-name = \"node-3\"\ncluster-listen = \"127.0.0.1:{port}\"\njoin = [{}]\n",
                    seeds.join(", ")
                ),
                CACHES,
            ));
        }
        if batches > 5 {
            // Slow enough that the rebalance runs while the iteration goes on.
            std::thread::sleep(Duration::from_millis(15));
        }
    });
    let missed: Vec<String> = keys
        .difference(&iterated)
        .take(5)
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert_eq!(
        (iterated.len(), missed.len()),
        (keys.len(), 0),
        "entries missed, e.g. {missed:?}"
    );
    assert_eq!(finished, (0..32).collect());
    assert_ne!(
        before,
        topology_id(&servers[1]),
        "the topology did not change while the iteration ran"
    );
    let joiner = joiner.expect("the fourth node started");
    // The join did happen, and moved segments to the new node.
    let deadline = Instant::now() + Duration::from_secs(30);
    while joiner
        .manager()
        .cache("default")
        .is_none_or(|c| c.size() == 0)
    {
        assert!(
            Instant::now() < deadline,
            "the fourth node received nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

// Proves client tracking is cluster-wide: a RESP3 client tracking keys on one node is sent
// an invalidation for every key it read, within a second, when another client rewrites the
// keys through another node — whichever member owns each key.
#[test]
fn tracking_clients_are_invalidated_by_writes_through_other_nodes() {
    let servers = cluster();
    let keys: Vec<String> = (0..40).map(|i| format!("tracked-{i}")).collect();
    let mut writer = common::Client::connect(servers[2].addr);
    for key in &keys {
        assert_eq!(writer.call(&[b"SET", key.as_bytes(), b"v1"]).text(), "OK");
    }
    let mut tracker = common::Client::connect(servers[0].addr);
    assert!(matches!(tracker.cmd("HELLO 3"), common::Frame::Map(_)));
    assert_eq!(tracker.cmd("CLIENT TRACKING ON"), common::Frame::ok());
    for key in &keys {
        assert_eq!(tracker.call(&[b"GET", key.as_bytes()]).bytes(), b"v1");
    }
    // The node tells the others it listens; give the announcement a moment to land.
    std::thread::sleep(Duration::from_millis(300));
    for key in &keys {
        assert_eq!(writer.call(&[b"SET", key.as_bytes(), b"v2"]).text(), "OK");
    }
    let mut invalidated = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(1);
    while invalidated.len() < keys.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(frame) = tracker.read_frame_within(left) else {
            break;
        };
        if let common::Frame::Push(items) = frame
            && items.first() == Some(&common::Frame::bulk("invalidate"))
        {
            for key in items.get(1).map(common::Frame::items).unwrap_or_default() {
                invalidated.insert(key.text());
            }
        }
    }
    let missing: Vec<&String> = keys.iter().filter(|k| !invalidated.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "no invalidation within a second for {missing:?}"
    );
}

// Proves pub/sub is cluster-wide, as on Redis Cluster: a message published through one node
// reaches subscribers on every node (the reply counts this node's), and a shard channel's
// subscription lives on the subscriber's connection whichever node owns its slot.
#[test]
fn published_messages_reach_subscribers_on_every_node() {
    let servers = cluster();
    let mut subscribers: Vec<common::Client> = servers
        .iter()
        .map(|server| common::Client::connect(server.addr))
        .collect();
    for subscriber in &mut subscribers {
        let confirmed = subscriber.cmd("SUBSCRIBE news");
        assert_eq!(confirmed.items().len(), 3, "{confirmed:?}");
    }
    // Shard channels of every owner: several names spread over the slots.
    let shard_channels: Vec<String> = (0..6).map(|i| format!("orders-{i}")).collect();
    let mut shard = common::Client::connect(servers[1].addr);
    for channel in &shard_channels {
        let confirmed = shard.call(&[b"SSUBSCRIBE", channel.as_bytes()]);
        assert_eq!(confirmed.items().len(), 3, "{confirmed:?}");
    }
    std::thread::sleep(Duration::from_millis(200));
    let mut publisher = common::Client::connect(servers[2].addr);
    assert_eq!(publisher.cmd("PUBLISH news hello").int(), 1);
    for subscriber in &mut subscribers {
        let message = subscriber.read_frame_within(Duration::from_secs(2));
        assert_eq!(
            message.map(|m| m.items()),
            Some(vec![
                common::Frame::bulk("message"),
                common::Frame::bulk("news"),
                common::Frame::bulk("hello"),
            ])
        );
    }
    for channel in &shard_channels {
        publisher.call(&[b"SPUBLISH", channel.as_bytes(), b"shipped"]);
        let message = shard.read_frame_within(Duration::from_secs(2));
        assert_eq!(
            message.map(|m| m.items()),
            Some(vec![
                common::Frame::bulk("smessage"),
                common::Frame::bulk(channel),
                common::Frame::bulk("shipped"),
            ]),
            "{channel}"
        );
    }
}

// Proves blocking pops work whichever node owns the list: a client blocked through one node
// is woken by a push through another and gets the element (none is lost or served twice),
// and a timeout answers nil, as on Redis Cluster.
#[test]
fn blocking_pops_are_woken_by_pushes_through_any_node() {
    let servers = cluster();
    let mut pusher = common::Client::connect(servers[2].addr);
    for i in 0..6 {
        let key = format!("queue-{i}");
        let addr = servers[0].addr;
        let waiting_key = key.clone();
        let waiter = std::thread::spawn(move || {
            let mut client = common::Client::connect(addr);
            let started = Instant::now();
            let popped = client.call(&[b"BLPOP", waiting_key.as_bytes(), b"10"]);
            (popped, started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(pusher.call(&[b"RPUSH", key.as_bytes(), b"job"]).int(), 1);
        let (popped, waited) = waiter.join().unwrap();
        assert_eq!(
            popped.items(),
            vec![common::Frame::bulk(&key), common::Frame::bulk("job")],
            "{key}"
        );
        assert!(waited < Duration::from_secs(3), "{key} waited {waited:?}");
        assert_eq!(pusher.call(&[b"LLEN", key.as_bytes()]).int(), 0, "{key}");
    }
    let mut client = common::Client::connect(servers[1].addr);
    let started = Instant::now();
    for i in 0..3 {
        let key = format!("empty-{i}");
        let answer = client.call(&[b"BLPOP", key.as_bytes(), b"0.3"]);
        assert!(
            matches!(answer, common::Frame::Null | common::Frame::NullArray),
            "{answer:?}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(5));
}

// Proves MULTI/EXEC with WATCH works whichever node owns the keys: a transaction on
// hash-tagged keys runs atomically at their owner, WATCH sees a change made through another
// node (EXEC answers nil), and keys of different owners are refused as Redis Cluster does.
#[test]
fn transactions_on_hash_tagged_keys_run_at_their_owner() {
    let servers = cluster();
    let mut client = common::Client::connect(servers[0].addr);
    let mut other = common::Client::connect(servers[2].addr);
    assert_eq!(client.cmd("SELECT 1"), common::Frame::ok());
    assert_eq!(other.cmd("SELECT 1"), common::Frame::ok());
    for tag in 0..8 {
        let a = format!("{{user{tag}}}:a");
        let b = format!("{{user{tag}}}:b");
        assert_eq!(client.call(&[b"WATCH", a.as_bytes()]), common::Frame::ok());
        assert_eq!(client.cmd("MULTI"), common::Frame::ok());
        assert_eq!(client.call(&[b"INCR", a.as_bytes()]).text(), "QUEUED");
        assert_eq!(
            client.call(&[b"INCRBY", b.as_bytes(), b"5"]).text(),
            "QUEUED"
        );
        assert_eq!(
            client.cmd("EXEC").items(),
            vec![common::Frame::Integer(1), common::Frame::Integer(5)],
            "tag {tag}"
        );
        // A change through another node between WATCH and EXEC aborts the transaction.
        assert_eq!(client.call(&[b"WATCH", a.as_bytes()]), common::Frame::ok());
        assert_eq!(other.call(&[b"INCR", a.as_bytes()]).int(), 2);
        assert_eq!(client.cmd("MULTI"), common::Frame::ok());
        assert_eq!(client.call(&[b"INCR", a.as_bytes()]).text(), "QUEUED");
        assert!(
            matches!(
                client.cmd("EXEC"),
                common::Frame::NullArray | common::Frame::Null
            ),
            "tag {tag}"
        );
        assert_eq!(other.call(&[b"GET", a.as_bytes()]).text(), "2");
    }
    // Keys of different owners in one transaction are refused at EXEC.
    let keys: Vec<String> = (0..16).map(|i| format!("{{spread{i}}}")).collect();
    assert_eq!(client.cmd("MULTI"), common::Frame::ok());
    for key in &keys {
        assert_eq!(
            client.call(&[b"SET", key.as_bytes(), b"1"]).text(),
            "QUEUED"
        );
    }
    let refused = client.cmd("EXEC");
    assert!(
        matches!(&refused, common::Frame::Error(text) if text.contains("CROSSSLOT")),
        "{refused:?}"
    );
}

// Proves a Hot Rod listener registered with include-current-state on one node of three
// receives a created event for every entry of the distributed cache — those other nodes
// own included — carrying the request's message id, before the response; and then the
// events of writes applied on other nodes.
#[test]
fn include_current_state_lists_the_whole_cluster() {
    let servers = cluster();
    let keys: Vec<String> = (0..100).map(|i| format!("state-{i}")).collect();
    let mut writer = HotRod::connect(servers[0].addr, 40);
    for key in &keys {
        assert_eq!(writer.call(put(key, "v")).status(), Status::Success);
    }
    let event_key = |event: &common::hotrod::Response| {
        let mut reader = event.reader();
        let _listener = reader.array().unwrap();
        let _custom = reader.u8().unwrap();
        let _retried = reader.u8().unwrap();
        String::from_utf8(reader.array().unwrap().to_vec()).unwrap()
    };
    let mut listening = HotRod::connect(servers[1].addr, 40);
    let header = listening.header();
    let id = listening.send(
        &header,
        &Request::AddClientListener {
            listener_id: b([0x42; 16]),
            include_current_state: true,
            filter: None,
            converter: None,
            raw_data: false,
            interests: 0,
        },
    );
    let mut state = std::collections::BTreeSet::new();
    loop {
        let frame = listening.read();
        if frame.header.opcode == weft_hotrod::opcode::EVENT_CREATED {
            assert_eq!(frame.header.message_id, id);
            assert!(state.insert(event_key(&frame)), "an entry listed twice");
            continue;
        }
        assert_eq!(
            (frame.header.message_id, frame.shape()),
            (id, (Status::Success, vec![]))
        );
        break;
    }
    let expected: std::collections::BTreeSet<String> = keys.iter().cloned().collect();
    assert_eq!(state, expected);

    // Writes through the other nodes reach it afterwards.
    let mut other = HotRod::connect(servers[2].addr, 40);
    assert_eq!(other.call(put("state-0", "w")).status(), Status::Success);
    let event = listening.next_event();
    assert_eq!(event.header.opcode, weft_hotrod::opcode::EVENT_MODIFIED);
    assert_eq!(event_key(&event), "state-0");
}

// Proves scripts on a clustered cache run at the owner of their keys, whichever node the
// client is connected to: EVAL, EVALSHA (loaded on every node, as Redis Cluster needs) and
// FCALL write keys every node then reads; keys of different owners are refused with
// CROSSSLOT, and a key a script did not declare must be owned where it runs. WAIT answers
// the backups a synchronous cache's writes are on, and none for an asynchronous one.
#[test]
fn scripts_run_at_their_keys_owner_and_wait_counts_backups() {
    use common::Frame;
    let servers = cluster();
    let mut clients: Vec<common::Client> = servers
        .iter()
        .map(|server| common::Client::connect(server.addr))
        .collect();
    let script = "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])";
    let library = "#!lua name=counters\nredis.register_function('bump', function(keys, args) \
                   return redis.call('incrby', keys[1], args[1]) end)";
    let mut sha = String::new();
    for client in &mut clients {
        assert_eq!(client.cmd("SELECT 1"), Frame::ok());
        sha = client.call(&["SCRIPT", "LOAD", script]).text();
        assert_eq!(
            client.call(&["FUNCTION", "LOAD", library]).text(),
            "counters"
        );
    }
    for tag in 0..12 {
        let (a, b) = (format!("{{job{tag}}}:a"), format!("{{job{tag}}}:b"));
        let from = tag % 3;
        let reply = clients[from].call(&["EVAL", script, "2", &a, &b, "first"]);
        assert_eq!(reply, Frame::Integer(1), "tag {tag}");
        let reply = clients[(from + 1) % 3].call(&["EVALSHA", &sha, "2", &a, &b, "second"]);
        assert_eq!(reply, Frame::Integer(2), "tag {tag}");
        let reply = clients[(from + 2) % 3].call(&["FCALL", "bump", "1", &b, "10"]);
        assert_eq!(reply, Frame::Integer(12), "tag {tag}");
        for client in &mut clients {
            assert_eq!(client.call(&["GET", &a]).text(), "second", "tag {tag}");
            assert_eq!(client.call(&["GET", &b]).text(), "12", "tag {tag}");
        }
    }
    // Scripts pipelined in one write, their keys on different members: a batch stops at each
    // script to forward, the rest follow, and the replies come back in order.
    let mut pipeline = Vec::new();
    for tag in 0..12 {
        let key = format!("{{job{tag}}}:p");
        let by = (tag + 1).to_string();
        pipeline.extend(common::encode(&[
            "EVAL",
            "return redis.call('incrby', KEYS[1], ARGV[1])",
            "1",
            &key,
            &by,
        ]));
    }
    clients[0].send_raw(&pipeline);
    for tag in 0..12 {
        assert_eq!(
            clients[0].read_frame(),
            Frame::Integer(tag + 1),
            "tag {tag}"
        );
    }
    // Keys spread over the members in one script: refused, nothing written.
    let spread: Vec<String> = (0..16).map(|i| format!("{{spread{i}}}")).collect();
    let mut eval = vec![
        "EVAL".to_owned(),
        "for _, k in ipairs(KEYS) do redis.call('set', k, 1) end".to_owned(),
        spread.len().to_string(),
    ];
    eval.extend(spread.iter().cloned());
    let refused = clients[0].call(&eval);
    assert!(
        matches!(&refused, Frame::Error(text) if text.starts_with("CROSSSLOT")),
        "{refused:?}"
    );
    for key in &spread {
        assert_eq!(clients[1].call(&["EXISTS", key]), Frame::Integer(0));
    }
    // A key the script did not declare, owned elsewhere: refused as Redis Cluster does.
    let refusals = (0..40)
        .filter(|i| {
            let undeclared = format!("{{elsewhere{i}}}");
            let reply = clients[0].call(&[
                "EVAL",
                "return redis.call('get', ARGV[1])",
                "1",
                "{job0}:a",
                &undeclared,
            ]);
            match reply {
                Frame::Error(text) => {
                    assert!(text.contains("non local key"), "{text}");
                    true
                }
                _ => false,
            }
        })
        .count();
    assert!(refusals > 0, "every undeclared key was local");
    // WAIT: the slots cache is synchronous with two owners, so one backup holds every write.
    assert_eq!(clients[0].cmd("SET {job0}:c 1"), Frame::ok());
    assert_eq!(clients[0].cmd("WAIT 1 0"), Frame::Integer(1));
    let started = Instant::now();
    assert_eq!(clients[0].cmd("WAIT 2 200"), Frame::Integer(1));
    assert!(started.elapsed() >= Duration::from_millis(150));
    // The lazy cache acknowledges writes before its backups have them.
    assert_eq!(clients[0].cmd("SELECT 2"), Frame::ok());
    assert_eq!(clients[0].cmd("SET k 1"), Frame::ok());
    assert_eq!(clients[0].cmd("WAIT 0 0"), Frame::Integer(0));
    assert_eq!(clients[0].cmd("WAIT 1 100"), Frame::Integer(0));
}
