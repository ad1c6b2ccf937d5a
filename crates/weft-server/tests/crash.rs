//! Kills a real `weft` process with SIGKILL while clients write to a cache with a `sync` file
//! store, restarts it on the same data, and checks that every acknowledged write is there and
//! nothing stored is corrupt. Iterations: `WEFT_CRASH_ITERATIONS` (default 50); the random
//! kill points come from `WEFT_CRASH_SEED` (printed, so a failure can be replayed).

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WRITERS: u64 = 4;
const KEYS_PER_WRITER: u64 = 64;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn start(config: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(["server", "--config"])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start weft")
}

fn connect(addr: SocketAddr, deadline: Instant) -> TcpStream {
    loop {
        if let Ok(stream) = TcpStream::connect(addr) {
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            return stream;
        }
        assert!(Instant::now() < deadline, "the server did not come up");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends one command, reads one reply line (or bulk); `None` when the connection died.
fn call(reader: &mut BufReader<TcpStream>, args: &[&str]) -> Option<String> {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    reader.get_mut().write_all(request.as_bytes()).ok()?;
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    if let Some(length) = line.strip_prefix('$') {
        let length: i64 = length.trim().parse().ok()?;
        if length < 0 {
            return Some("(nil)".to_owned());
        }
        let mut body = String::new();
        reader.read_line(&mut body).ok()?;
        return Some(body.trim_end().to_owned());
    }
    Some(line.trim_end().to_owned())
}

#[test]
fn no_acknowledged_write_is_lost_to_sigkill() {
    let iterations: u64 = std::env::var("WEFT_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let seed: u64 = std::env::var("WEFT_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("WEFT_CRASH_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    // Below the ephemeral range: the server is restarted on it again and again, and a port
    // from that range may meanwhile be taken by an outgoing connection.
    let port = common::cluster::free_tcp_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let config = dir.path().join("weft.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nbind = \"{addr}\"\ndata-dir = \"{}\"\n\n[caches.default]\nresp-database = 0\n[[caches.default.persistence.store]]\ntype = \"file\"\ndurability = \"sync\"\nfile-size-max = \"256KiB\"\n",
            dir.path().join("data").display()
        ),
    )
    .expect("config");
    // The highest value each key was acknowledged with, over all iterations.
    let acknowledged: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let mut total_acknowledged = 0u64;
    for iteration in 0..iterations {
        let mut child = start(&config);
        let deadline = Instant::now() + Duration::from_secs(20);
        // Verify everything acknowledged so far, before writing more.
        {
            let mut reader = BufReader::new(connect(addr, deadline));
            let expected = acknowledged.lock().expect("lock").clone();
            for (key, value) in &expected {
                let found = call(&mut reader, &["GET", key]).expect("server up while verifying");
                let found: u64 = found.parse().unwrap_or_else(|_| {
                    panic!(
                        "iteration {iteration}: {key} holds {found:?}, not a number (seed {seed})"
                    )
                });
                assert!(
                    found >= *value,
                    "iteration {iteration}: {key} = {found}, but {value} was acknowledged (seed {seed})"
                );
                acknowledged
                    .lock()
                    .expect("lock")
                    .insert(key.clone(), found);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let acknowledged = Arc::clone(&acknowledged);
                let stop = Arc::clone(&stop);
                let start_value = iteration * 1_000_000;
                std::thread::spawn(move || {
                    let mut reader =
                        BufReader::new(connect(addr, Instant::now() + Duration::from_secs(5)));
                    let mut count = 0u64;
                    for n in 0..1_000_000u64 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let key = format!("w{writer}k{}", n % KEYS_PER_WRITER);
                        let value = (start_value + n + 1).to_string();
                        match call(&mut reader, &["SET", &key, &value]) {
                            Some(reply) if reply == "+OK" => {
                                acknowledged
                                    .lock()
                                    .expect("lock")
                                    .insert(key, start_value + n + 1);
                                count += 1;
                            }
                            _ => break,
                        }
                    }
                    count
                })
            })
            .collect();
        let run_ms = 20 + rng.next() % 200;
        std::thread::sleep(Duration::from_millis(run_ms));
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            total_acknowledged += writer.join().expect("writer");
        }
    }
    // A last restart: everything acknowledged is there.
    let mut child = start(&config);
    let mut reader = BufReader::new(connect(addr, Instant::now() + Duration::from_secs(20)));
    let expected = acknowledged.lock().expect("lock").clone();
    for (key, value) in &expected {
        let found: u64 = call(&mut reader, &["GET", key])
            .expect("reply")
            .parse()
            .expect("a number");
        assert!(
            found >= *value,
            "{key} = {found} < acknowledged {value} (seed {seed})"
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    println!("{iterations} SIGKILLs, {total_acknowledged} acknowledged writes, none lost");
    assert!(total_acknowledged > iterations, "the writers made progress");
}
