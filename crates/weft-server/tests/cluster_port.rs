//! The cluster port against processes that are not members: a peer that does not know the
//! cluster secret gets nothing through (no request is even decoded), a frame's memory is
//! taken as its bytes arrive and only from a peer that proved itself, connections are
//! limited, and a peer that knows the secret but is not the member the topology names
//! cannot write replicas.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{free_tcp_port, free_udp_and_tcp_port};
use weft_cluster::handshake::{self, Identity, Secret};
use weft_cluster::wire::{self, EntryImage, Envelope, Form, Replica, Request, Response};

const SECRET: &str = "the-cluster-secret";

/// One clustered node (a cluster of one) with a secret and a distributed cache on RESP
/// database 0.
struct Node {
    client: SocketAddr,
    cluster: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("weft.toml");
        std::fs::write(
            &config,
            format!(
                "[server]\ncluster-secret = \"{SECRET}\"\n{extra}\n[caches.default]\nmode = \"distributed\"\nowners = 2\nsegments = 16\n"
            ),
        )
        .unwrap();
        let client = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
        let cluster = SocketAddr::from(([127, 0, 0, 1], free_udp_and_tcp_port()));
        let child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(["server", "--config", config.to_str().unwrap()])
            .args(["--bind", &client.to_string()])
            .args(["--cluster-listen", &cluster.to_string()])
            .args(["--node-name", "node-a"])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start weft");
        let node = Self {
            client,
            cluster,
            child,
            _dir: dir,
        };
        // Serving once a write to the clustered cache is acknowledged (the node founded its
        // cluster and has the cache's topology).
        let start = Instant::now();
        while node.resp(&["SET", "ready", "1"]) != "+OK" {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "node never served"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        node
    }

    /// One RESP command; the reply's first line.
    fn resp(&self, args: &[&str]) -> String {
        let Ok(stream) = TcpStream::connect(self.client) else {
            return String::new();
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        let mut reader = BufReader::new(stream);
        if reader.get_mut().write_all(request.as_bytes()).is_err() {
            return String::new();
        }
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        if line.starts_with('$') && line.trim_end() != "$-1" {
            line.clear();
            let _ = reader.read_line(&mut line);
        }
        line.trim_end().to_owned()
    }

    /// Resident and virtual memory of the process, in KiB.
    fn memory_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find(|line| line.starts_with(name))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
                .unwrap_or(0)
        };
        (field("VmRSS:"), field("VmSize:"))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server closed `stream` (EOF or reset) within a few seconds.
fn closed(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(8)))
        .unwrap();
    let mut buffer = [0; 256];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(error) => {
                return !matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

/// Opens a cluster connection and proves `identity` with `secret`; the acceptor's identity
/// when it proved itself back.
fn open(node: &Node, secret: &Secret, identity: &Identity) -> (TcpStream, Option<Identity>) {
    let mut stream = TcpStream::connect(node.cluster).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut challenge = [0; handshake::CHALLENGE_BYTES];
    stream.read_exact(&mut challenge).unwrap();
    let theirs = handshake::read_challenge(&challenge).unwrap();
    let mine = handshake::nonce();
    stream
        .write_all(&handshake::answer(secret, &theirs, &mine, identity))
        .unwrap();
    let mut len = [0; 2];
    if stream.read_exact(&mut len).is_err() {
        return (stream, None);
    }
    let mut bytes = vec![0; handshake::identity_len(len).unwrap()];
    stream.read_exact(&mut bytes).unwrap();
    let mut code = [0; handshake::CODE_BYTES];
    stream.read_exact(&mut code).unwrap();
    let peer = handshake::check_reply(secret, &mine, &theirs, &bytes, &code).ok();
    (stream, peer)
}

fn call(stream: &mut TcpStream, request: Request) -> Option<Response> {
    let mut out = Vec::new();
    wire::encode(&Envelope::Request(1, request), &mut out);
    stream.write_all(&out).ok()?;
    let mut header = [0; wire::FRAME_HEADER_BYTES];
    stream.read_exact(&mut header).ok()?;
    let len = wire::body_len(&header).ok()??;
    let mut body = vec![0; len];
    stream.read_exact(&mut body).ok()?;
    match wire::decode(&body).ok()? {
        Envelope::Response(1, response) => Some(response),
        _ => None,
    }
}

fn intruder() -> Identity {
    Identity {
        name: "intruder".into(),
        incarnation: 42,
    }
}

// Proves a process without the cluster secret cannot get a request through the cluster
// port: raw frames are read as a failed handshake, and a well-formed answer made with
// another secret is refused; nothing it sent was written.
#[test]
fn a_peer_without_the_secret_gets_nothing_through() {
    let node = Node::start("");

    // A write operation sent straight away, as if there were no handshake.
    let mut raw = TcpStream::connect(node.cluster).unwrap();
    let mut frame = Vec::new();
    wire::encode(
        &Envelope::Request(
            1,
            Request::Execute {
                cache: "default".into(),
                operation: weft_core::operation::Operation::Put {
                    key: b"stolen".to_vec(),
                    value: b"1".to_vec(),
                    spec: weft_core::operation::WriteSpec::default(),
                },
                owner_down: false,
            },
        ),
        &mut frame,
    );
    // Enough bytes to fill the answer's fixed part, whatever they are.
    frame.resize(frame.len().max(200), 0);
    let _ = raw.write_all(&frame);
    assert!(closed(&mut raw), "a raw frame must end the connection");

    // A well-formed answer made with another secret.
    let (mut stream, peer) = open(&node, &Secret::new(b"guess".to_vec()), &intruder());
    assert!(
        peer.is_none(),
        "the node must not prove itself to an impostor"
    );
    assert!(closed(&mut stream));

    assert_eq!(node.resp(&["GET", "stolen"]), "$-1");
    assert_eq!(node.resp(&["GET", "ready"]), "1");
}

// Proves a peer that knows the secret but is not the member the topology names cannot
// write replicas (a forged high version would win a later merge), and that the node proves
// its own identity back.
#[test]
fn replicas_from_a_non_member_are_refused() {
    let node = Node::start("");
    let secret = Secret::new(SECRET.as_bytes().to_vec());
    let (mut stream, peer) = open(&node, &secret, &intruder());
    assert_eq!(peer.map(|peer| peer.name), Some("node-a".to_owned()));
    let image = EntryImage {
        key: b"ready".to_vec(),
        form: Form::Bytes,
        value: b"forged".to_vec(),
        flags: 0,
        version: 1 << 62,
        created_ms: None,
        lifespan_ms: None,
        max_idle_ms: None,
        last_used_ms: 0,
    };
    let answer = call(
        &mut stream,
        Request::Replicate {
            stream: 1,
            restart: true,
            replicas: vec![(
                1,
                std::sync::Arc::new(Replica {
                    cache: "default".into(),
                    segment: 0,
                    key: b"ready".to_vec(),
                    entry: Some(image),
                }),
            )],
        },
    );
    assert!(
        matches!(answer, Some(Response::NotOwner { .. })),
        "got {answer:?}"
    );
    assert_eq!(node.resp(&["GET", "ready"]), "1");
}

// Proves frames are bounded: a proven peer's frame over the configured limit closes the
// connection, and frames announced within it take memory only as their bytes arrive (16
// connections announcing 1 GiB each used to reserve 16 GiB).
#[test]
fn cluster_frames_are_bounded_and_memory_follows_the_bytes() {
    let node = Node::start("cluster-frame-bytes-max = 67108864");
    let secret = Secret::new(SECRET.as_bytes().to_vec());
    let (mut stream, _) = open(&node, &secret, &intruder());
    stream.write_all(&(128u32 << 20).to_be_bytes()).unwrap();
    assert!(
        closed(&mut stream),
        "a frame over the limit must close the connection"
    );

    let (_, before) = node.memory_kib();
    let mut held = Vec::new();
    for _ in 0..16 {
        let (mut stream, _) = open(&node, &secret, &intruder());
        stream.write_all(&(60u32 << 20).to_be_bytes()).unwrap();
        stream.write_all(&[0; 1024]).unwrap();
        held.push(stream);
    }
    std::thread::sleep(Duration::from_millis(500));
    let (_, after) = node.memory_kib();
    assert!(
        after.saturating_sub(before) < 256 * 1024,
        "16 announced frames of 60 MiB grew virtual memory by {} MiB",
        after.saturating_sub(before) / 1024
    );
}

// Proves the cluster port takes a bounded number of connections: past the limit, new ones
// are closed at once, and a connection that never completes its handshake is closed after
// the handshake deadline.
#[test]
fn cluster_connections_are_limited() {
    let node = Node::start("cluster-connections-max = 4");
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(node.cluster).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra = TcpStream::connect(node.cluster).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut buffer = [0; 64];
    let read = extra.read(&mut buffer);
    assert!(
        matches!(read, Ok(0) | Err(_))
            && !matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the connection over the limit must be closed, got {read:?}"
    );
    // The idle ones get their challenge, and are closed at the handshake deadline.
    let started = Instant::now();
    for stream in &mut idle {
        assert!(closed(stream));
    }
    assert!(started.elapsed() < Duration::from_secs(8));
}
