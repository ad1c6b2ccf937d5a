//! `weft-client`'s plain operations against a real Infinispan 15.0 embedded Hot Rod server
//! (bench/hotrod's `InfinispanServer`, built from Maven Central artifacts), to show the
//! client speaks the protocol as Infinispan does, not only as Weft does.
//!
//! Ignored by default: it needs Java 17 and the jar built by `mvn -q -B package` in
//! bench/hotrod (or named by `WEFT_HOTROD_BENCH_JAR`). Run it with
//! `cargo test -p weft-client --test infinispan -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use weft_client::{Client, ClientConfig, Error, Expiry, ListenerEvent, ListenerOptions, MediaType};

/// How long the JVM may take to start the server.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// The Infinispan server process; killed on drop.
struct Infinispan {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Infinispan {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn jar() -> PathBuf {
    if let Ok(path) = std::env::var("WEFT_HOTROD_BENCH_JAR") {
        return PathBuf::from(path);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/hotrod/target/hotrod-bench.jar")
}

fn start_infinispan() -> Infinispan {
    let jar = jar();
    assert!(
        jar.exists(),
        "{} is missing: run `mvn -q -B package` in bench/hotrod, or set WEFT_HOTROD_BENCH_JAR",
        jar.display()
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("java")
        .args(["-Xmx512m", "-cp"])
        .arg(&jar)
        .args(["weft.bench.InfinispanServer", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start java");
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready, started) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if line.starts_with("READY ") {
                let _ = ready.send(());
            }
        }
    });
    let server = Infinispan {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    started
        .recv_timeout(START_TIMEOUT)
        .expect("Infinispan said READY");
    server
}

// Proves every plain operation against Infinispan 15.0: the protocol version negotiated,
// reads, conditional and versioned writes, metadata with lifespan and max idle, bulk
// operations, size, stats, clear, a missing cache, and a listener's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Java and bench/hotrod's jar; run with --ignored"]
async fn plain_operations_against_infinispan_15() {
    let server = start_infinispan();
    let client = Client::connect(
        ClientConfig::new([server.addr])
            .with_timeouts(Duration::from_secs(10), Duration::from_secs(10))
            // Infinispan reads keys and values without a media type as ProtoStream; these
            // are plain bytes.
            .with_media_types(
                MediaType::from_essence("application/octet-stream"),
                MediaType::from_essence("application/octet-stream"),
            ),
    )
    .await
    .unwrap();
    assert_eq!(
        client.server_protocol_version(server.addr).await.unwrap(),
        Some(40)
    );
    assert_eq!(client.protocol_version(server.addr).await.unwrap(), 40);
    let cache = client.cache("default").await.unwrap();
    cache.clear().await.unwrap();

    assert_eq!(cache.get("k").await.unwrap(), None);
    cache.put("k", "v1").await.unwrap();
    assert_eq!(cache.get("k").await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(cache.contains_key("k").await.unwrap());
    assert!(
        !cache
            .put_if_absent("k", "x", Expiry::DEFAULT)
            .await
            .unwrap()
    );
    assert!(
        cache
            .put_if_absent("k2", "v", Expiry::DEFAULT)
            .await
            .unwrap()
    );
    assert!(cache.replace("k", "v2", Expiry::DEFAULT).await.unwrap());
    assert!(!cache.replace("absent", "x", Expiry::DEFAULT).await.unwrap());
    let entry = cache.get_with_metadata("k").await.unwrap().unwrap();
    assert_eq!(&entry.value[..], b"v2");
    assert!(
        !cache
            .replace_with_version("k", "v3", entry.version.wrapping_add(99), Expiry::DEFAULT)
            .await
            .unwrap()
    );
    assert!(
        cache
            .replace_with_version("k", "v3", entry.version, Expiry::DEFAULT)
            .await
            .unwrap()
    );
    let entry = cache.get_with_metadata("k").await.unwrap().unwrap();
    assert!(
        !cache
            .remove_with_version("k", entry.version.wrapping_add(99))
            .await
            .unwrap()
    );
    assert!(cache.remove_with_version("k", entry.version).await.unwrap());
    assert!(cache.remove("k2").await.unwrap());
    assert!(!cache.remove("k2").await.unwrap());

    let expiry = Expiry::lifespan(Duration::from_secs(60)).with_max_idle(Duration::from_secs(30));
    cache.put_with("timed", "v", expiry).await.unwrap();
    let entry = cache.get_with_metadata("timed").await.unwrap().unwrap();
    assert_eq!(
        entry.lifespan.map(|(_, s)| s),
        Some(Duration::from_secs(60))
    );
    assert_eq!(
        entry.max_idle.map(|(_, s)| s),
        Some(Duration::from_secs(30))
    );

    let entries: Vec<(String, String)> =
        (0..20).map(|i| (format!("b{i}"), format!("{i}"))).collect();
    cache.put_all(entries, Expiry::DEFAULT).await.unwrap();
    let found = cache
        .get_all((0..25).map(|i| format!("b{i}")))
        .await
        .unwrap();
    assert_eq!(found.len(), 20);
    assert_eq!(cache.size().await.unwrap(), 21);
    let stats = cache.stats().await.unwrap();
    assert!(stats.contains_key("currentNumberOfEntries"), "{stats:?}");

    let mut listener = cache
        .add_listener(ListenerOptions::default())
        .await
        .unwrap();
    cache.put("watched", "1").await.unwrap();
    cache.remove("watched").await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(first, ListenerEvent::Created { key, .. } if &key[..] == b"watched"));
    let second = tokio::time::timeout(Duration::from_secs(10), listener.next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(second, ListenerEvent::Removed { key } if &key[..] == b"watched"));
    listener.remove().await.unwrap();

    cache.clear().await.unwrap();
    assert_eq!(cache.size().await.unwrap(), 0);
    assert!(matches!(
        client.cache("no-such-cache").await,
        Err(Error::CacheNotFound(_))
    ));
}
