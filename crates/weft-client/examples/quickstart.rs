//! A tour of `weft-client` against a running server: plain and versioned writes, expiration,
//! a listener, and a near cache.
//!
//! Start a server (`cargo run -p weft-server -- server`), then:
//! `cargo run -p weft-client --example quickstart [HOST:PORT]` (default 127.0.0.1:11222).

use std::time::Duration;

use weft_client::{Client, ClientConfig, Expiry, ListenerEvent, ListenerOptions, NearCacheConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:11222".to_owned())
        .parse()?;
    let client = Client::connect(ClientConfig::new([server])).await?;
    let cache = client.cache("default").await?;

    cache.put("greeting", "hello").await?;
    let entry = cache
        .get_with_metadata("greeting")
        .await?
        .ok_or("just written")?;
    println!("greeting = {:?} (version {})", entry.value, entry.version);
    // Optimistic concurrency: replace only what we read.
    let replaced = cache
        .replace_with_version("greeting", "hello again", entry.version, Expiry::DEFAULT)
        .await?;
    println!("replaced with version {}: {replaced}", entry.version);

    cache
        .put_with(
            "session",
            "token",
            Expiry::lifespan(Duration::from_secs(30)),
        )
        .await?;

    let mut listener = cache.add_listener(ListenerOptions::default()).await?;
    cache.put("watched", "1").await?;
    if let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(5), listener.next()).await {
        match event {
            ListenerEvent::Created { key, version } => {
                println!("created {key:?} at version {version}");
            }
            other => println!("event {other:?}"),
        }
    }
    listener.remove().await?;

    // A second client with a near cache: repeated reads are served from memory, never more
    // than 500 ms behind the server.
    let near = Client::connect(
        ClientConfig::new([server])
            .with_near_cache(NearCacheConfig::new(10_000, Duration::from_millis(500))),
    )
    .await?
    .cache("default")
    .await?;
    for _ in 0..1_000 {
        near.get("greeting").await?;
    }
    println!("near cache: {:?}", near.near_cache_stats());
    Ok(())
}
