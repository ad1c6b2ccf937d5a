//! Real `weft` processes forming a cluster over loopback, for the multi-process tests: free
//! ports, a node process (its log kept under `WEFT_TEST_LOGS=DIR` when set), the topology
//! it reports over REST, and a minimal blocking RESP client that survives a node's death.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback port free for both UDP (membership) and TCP (the node-to-node transport),
/// outside the kernel's range of ephemeral ports (see [`free_tcp_port`]).
pub fn free_udp_and_tcp_port() -> u16 {
    for _ in 0..1_000 {
        let port = candidate_port();
        if UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port)).is_ok()
        {
            return port;
        }
    }
    panic!("no port free for both UDP and TCP");
}

/// A free loopback TCP port, outside the kernel's range of ephemeral ports: a port taken from
/// that range can be given, while its node is down, to an outgoing connection of another
/// process (the survivors reconnecting, a client), and a node restarted on it then finds it
/// busy for as long as that connection lives. Servers listen on fixed ports outside the range
/// (11222, 7800); so do the tests.
pub fn free_tcp_port() -> u16 {
    for _ in 0..1_000 {
        let port = candidate_port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free TCP port");
}

/// A port below the ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768 by
/// default), chosen pseudo-randomly so that test processes running at once rarely try the
/// same one.
fn candidate_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWN: AtomicU64 = AtomicU64::new(0);
    const LOWEST: u64 = 10_000;
    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(32_768)
        .max(LOWEST + 1_000);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| u64::from(elapsed.subsec_nanos()));
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ DRAWN
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    u16::try_from(LOWEST + x % (ephemeral_start - LOWEST)).unwrap_or(20_000)
}

/// Where a node listens: for clients, and for the other nodes.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    /// Clients (every protocol).
    pub client: SocketAddr,
    /// Other nodes.
    pub cluster: SocketAddr,
}

impl Addresses {
    /// Fresh loopback ports.
    pub fn free() -> Self {
        Self {
            client: SocketAddr::from(([127, 0, 0, 1], free_tcp_port())),
            cluster: SocketAddr::from(([127, 0, 0, 1], free_udp_and_tcp_port())),
        }
    }
}

/// A `weft server` process; killed on drop.
pub struct Node {
    /// Its node name.
    pub name: String,
    /// Its client address.
    pub client: SocketAddr,
    child: Child,
}

impl Node {
    /// Starts `weft server` with `config`, named `name`, joining `seeds`.
    pub fn start(name: &str, config: &Path, at: Addresses, seeds: &[Addresses]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
        command
            .args(["server", "--config", config.to_str().expect("utf-8 path")])
            .args(["--bind", &at.client.to_string()])
            .args(["--cluster-listen", &at.cluster.to_string()])
            .args(["--node-name", name])
            .stderr(Stdio::null());
        match std::env::var("WEFT_TEST_LOGS") {
            Ok(dir) => {
                let millis = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis());
                let path = Path::new(&dir).join(format!("{name}-{millis}.log"));
                command.stdout(std::fs::File::create(path).expect("a log file"));
            }
            Err(_) => {
                command.stdout(Stdio::null());
            }
        }
        let seeds: Vec<String> = seeds.iter().map(|s| s.cluster.to_string()).collect();
        if !seeds.is_empty() {
            command.args(["--join", &seeds.join(",")]);
        }
        Self::spawn(name, at.client, &mut command)
    }

    /// Starts `command`, a `weft server` named `name` that serves clients at `client`.
    pub fn spawn(name: &str, client: SocketAddr, command: &mut Command) -> Self {
        Self {
            name: name.to_owned(),
            client,
            child: command.spawn().expect("start weft"),
        }
    }

    /// Sends `args` to this node and returns the reply, retrying on errors for a while (a
    /// node busy with a topology change may answer that the key's owner is unreachable).
    pub fn command(&self, args: &[&[u8]]) -> Option<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match Resp::connect(self.client).and_then(|mut c| c.command(args)) {
                Ok(reply) => return reply,
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "{} through {} failed: {error}",
                        String::from_utf8_lossy(args[0]),
                        self.name
                    );
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Sends `signal` (`-KILL`, `-TERM`) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to exit (after a signal); its exit status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait for weft")
    }

    /// Waits up to `limit` for the process to exit; its status, or `None` if it still runs.
    pub fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for weft") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether this node reports cache `cache` stable with exactly `members` (by name).
    pub fn stable_with(&self, cache: &str, members: &[&str]) -> bool {
        reports_stable(self.client, cache, members)
    }
}

/// Whether the node with client address `client` reports cache `cache` stable with exactly
/// `members` (by name).
pub fn reports_stable(client: SocketAddr, cache: &str, members: &[&str]) -> bool {
    let Some(body) = http_get(client, "/rest/v2/cluster/topology") else {
        return false;
    };
    let report: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    report["caches"].as_array().is_some_and(|caches| {
        caches.iter().any(|report| {
            let mut named: Vec<&str> = report["members"]
                .as_array()
                .map(|m| m.iter().filter_map(|m| m.as_str()).collect())
                .unwrap_or_default();
            named.sort_unstable();
            let mut expected = members.to_vec();
            expected.sort_unstable();
            report["cache"] == cache && report["phase"] == "stable" && named == expected
        })
    })
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every node in `nodes` reports `cache` stable with exactly their names.
pub fn wait_stable(nodes: &[&Node], cache: &str, limit: Duration) {
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let start = Instant::now();
    while !nodes.iter().all(|node| node.stable_with(cache, &names)) {
        assert!(
            start.elapsed() < limit,
            "after {limit:?}, `{cache}` is not stable with {names:?} on every node"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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

/// `method path` over HTTP/1.1 with `body` (sent as JSON when it starts with `{`); the
/// status and body, or `None` when the node did not answer.
pub fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let content_type = if body.starts_with('{') {
        "application/json"
    } else {
        "text/plain"
    };
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: weft\r\nConnection: close\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let (_, body) = response.split_once("\r\n\r\n")?;
    Some((status, body.to_owned()))
}

/// A minimal RESP client: one connection, one command at a time; errors are `Err`.
pub struct Resp {
    reader: BufReader<TcpStream>,
}

impl Resp {
    /// Connects (2 s), with a 30 s reply timeout.
    pub fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command; a simple string, integer or bulk reply as bytes (`None` for nil).
    pub fn command(&mut self, args: &[&[u8]]) -> std::io::Result<Option<Vec<u8>>> {
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
            Some(b'+' | b':') => Ok(Some(line.as_bytes()[1..].to_vec())),
            Some(b'-') => Err(std::io::Error::other(line.to_owned())),
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
