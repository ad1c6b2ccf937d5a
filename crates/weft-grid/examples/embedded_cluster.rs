//! Three grid members in one process: a distributed cache (two owners per key) written
//! through one member and read through the others; then one member leaves and every value
//! is still there. Prints what it checked; exits with an error when a check fails.
//!
//! `cargo run --release -p weft-grid --example embedded_cluster`

use std::collections::BTreeMap;
use std::time::Duration;

use weft_core::{CacheConfig, CacheMode, ManagerConfig, TypedCache, WriteOptions};
use weft_grid::{Grid, GridConfig, GridError};

const KEYS: u32 = 1_000;
const SETTLE: Duration = Duration::from_secs(60);

/// Every member declares the same caches, as every server of a cluster reads the same file.
fn caches() -> ManagerConfig {
    let mut caches = BTreeMap::new();
    caches.insert(
        "orders".to_owned(),
        CacheConfig {
            mode: CacheMode::Distributed,
            owners: 2,
            ..CacheConfig::default()
        },
    );
    ManagerConfig { caches }
}

async fn member(name: &str, join: Vec<String>) -> Result<Grid, GridError> {
    let listen = "127.0.0.1:0"
        .parse()
        .map_err(|_| GridError::Cluster("address".into()))?;
    let config = GridConfig::new(name, listen, join).secret("example-secret");
    Grid::start(config, caches()).await
}

fn check(what: &str, ok: bool) -> Result<(), GridError> {
    println!("{} {what}", if ok { "ok  " } else { "FAIL" });
    if ok {
        Ok(())
    } else {
        Err(GridError::Cluster(format!("check failed: {what}")))
    }
}

#[tokio::main]
async fn main() -> Result<(), GridError> {
    let a = member("a", Vec::new()).await?;
    let seed = vec![a.address().to_string()];
    let b = member("b", seed.clone()).await?;
    let c = member("c", seed).await?;
    a.wait_stable(3, SETTLE).await?;
    b.wait_stable(3, SETTLE).await?;
    c.wait_stable(3, SETTLE).await?;
    println!("members: {:?}", a.members());

    let cache = |grid: &Grid| {
        grid.cache("orders")
            .ok_or_else(|| GridError::Cluster("no cache `orders`".into()))
    };
    let (through_a, through_b, through_c) = (cache(&a)?, cache(&b)?, cache(&c)?);
    let options = WriteOptions::default();
    for i in 0..KEYS {
        through_a
            .put(
                format!("order-{i}").as_bytes(),
                format!("v1-{i}").as_bytes(),
                &options,
            )
            .await?;
    }
    // Overwrites, as applications do: a lost update would show the first value.
    for i in (0..KEYS).step_by(2) {
        through_c
            .put(
                format!("order-{i}").as_bytes(),
                format!("v2-{i}").as_bytes(),
                &options,
            )
            .await?;
    }
    let expected = |i: u32| {
        if i % 2 == 0 {
            format!("v2-{i}")
        } else {
            format!("v1-{i}")
        }
    };
    let mut read_back = 0;
    for i in 0..KEYS {
        let reader = if i % 2 == 0 { &through_b } else { &through_c };
        let value = reader.get(format!("order-{i}").as_bytes()).await?;
        if value.as_deref() == Some(expected(i).as_bytes()) {
            read_back += 1;
        }
    }
    check(
        &format!(
            "{read_back}/{KEYS} values written through a (half overwritten through c) read back through b and c"
        ),
        read_back == KEYS,
    )?;
    let held: usize = [&a, &b, &c]
        .iter()
        .map(|grid| {
            grid.manager()
                .cache("orders")
                .map_or(0, |cache| cache.size())
        })
        .sum();
    check(
        &format!("{held} copies held across the members for {KEYS} keys with owners = 2"),
        held == 2 * KEYS as usize,
    )?;
    check(
        &format!("size across the cluster is {KEYS}"),
        through_b.size().await? == u64::from(KEYS),
    )?;

    // The same cache, typed and blocking (as synchronous application code uses it): a
    // `TypedCache` over a clustered cache works as over a local one.
    let typed_b = b
        .blocking_cache("orders")
        .ok_or_else(|| GridError::Cluster("no cache `orders`".into()))?;
    let typed_c = c
        .blocking_cache("orders")
        .ok_or_else(|| GridError::Cluster("no cache `orders`".into()))?;
    let typed_ok = tokio::task::spawn_blocking(move || {
        let through_b: TypedCache<String, String, _> = TypedCache::new(typed_b);
        let through_c: TypedCache<String, String, _> = TypedCache::new(typed_c);
        through_b.put(&"customer-7".to_owned(), &"Ada".to_owned())?;
        let read = through_c.get(&"customer-7".to_owned())?;
        Ok::<_, weft_core::TypedError>(read.as_deref() == Some("Ada"))
    })
    .await
    .map_err(|error| GridError::Cluster(error.to_string()))?
    .map_err(|error| GridError::Cluster(error.to_string()))?;
    check(
        "a TypedCache over the clustered cache: written through b, read through c",
        typed_ok,
    )?;

    println!("member c leaves");
    c.leave().await;
    a.wait_stable(2, SETTLE).await?;
    b.wait_stable(2, SETTLE).await?;
    let mut kept = 0;
    for i in 0..KEYS {
        let value = through_a.get(format!("order-{i}").as_bytes()).await?;
        if value.as_deref() == Some(expected(i).as_bytes()) {
            kept += 1;
        }
    }
    check(
        &format!("{kept}/{KEYS} values still read through a after c left"),
        kept == KEYS,
    )?;
    let held: usize = [&a, &b]
        .iter()
        .map(|grid| {
            grid.manager()
                .cache("orders")
                .map_or(0, |cache| cache.size())
        })
        .sum();
    // Every order and the typed entry, on both members left.
    check(
        &format!("{held} copies held by the two members left (every key on both)"),
        held == 2 * (KEYS as usize + 1),
    )?;
    b.leave().await;
    a.leave().await;
    println!("all checks passed");
    Ok(())
}
