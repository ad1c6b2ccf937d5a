//! Grid members in one process: what a distributed cache's `reads` setting changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use weft_cluster::MemberId;
use weft_core::{CacheConfig, CacheMode, ManagerConfig, Reads, WriteOptions};
use weft_grid::routing::Route;
use weft_grid::{Grid, GridConfig};

const SETTLE: Duration = Duration::from_secs(60);
const KEYS: usize = 200;

fn caches() -> ManagerConfig {
    let distributed = |reads| CacheConfig {
        mode: CacheMode::Distributed,
        owners: 2,
        reads,
        ..CacheConfig::default()
    };
    let mut caches = BTreeMap::new();
    caches.insert("primary".to_owned(), distributed(Reads::Primary));
    caches.insert("any".to_owned(), distributed(Reads::AnyOwner));
    ManagerConfig { caches }
}

async fn member(name: &str, join: Vec<String>) -> Grid {
    let listen = "127.0.0.1:0".parse().unwrap();
    let config = GridConfig::new(name, listen, join).secret("embedded-test");
    Grid::start(config, caches()).await.unwrap()
}

/// Where `grid` runs a read of `key` of `cache`, and whether it owns the key as a backup.
fn read_route(grid: &Grid, cache: &str, key: &[u8]) -> (Route, bool) {
    let local = grid.manager().cache(cache).unwrap();
    let segment = local.segment_of(key);
    let routing = grid.node().routing();
    let owners = routing.cache(cache).unwrap().segments[segment as usize]
        .write
        .clone();
    let me = MemberId(grid.name().to_owned());
    let backup = owners.iter().skip(1).any(|owner| *owner == me);
    (routing.read_route(cache, segment), backup)
}

// Proves a distributed cache reads at the key's primary by default, and with
// `reads = "any-owner"` on a backup that receives the read — which sees every acknowledged
// write, overwrites included.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn any_owner_reads_are_answered_by_backups() {
    let a = member("a", Vec::new()).await;
    let seed = vec![a.address().to_string()];
    let b = member("b", seed.clone()).await;
    let c = member("c", seed).await;
    for grid in [&a, &b, &c] {
        grid.wait_stable(3, SETTLE).await.unwrap();
    }
    let options = WriteOptions::default();
    for cache in ["primary", "any"] {
        let through_a = a.cache(cache).unwrap();
        for i in 0..KEYS {
            let key = format!("k{i}");
            through_a
                .put(key.as_bytes(), b"first", &options)
                .await
                .unwrap();
            through_a
                .put(key.as_bytes(), format!("v{i}").as_bytes(), &options)
                .await
                .unwrap();
        }
    }
    let mut backup_reads = 0;
    for grid in [&a, &b, &c] {
        for cache in ["primary", "any"] {
            let handle = grid.cache(cache).unwrap();
            for i in 0..KEYS {
                let key = format!("k{i}");
                let (route, backup) = read_route(grid, cache, key.as_bytes());
                if backup {
                    backup_reads += 1;
                    match cache {
                        "any" => {
                            assert_eq!(route, Route::Local, "{cache} {key} on {}", grid.name())
                        }
                        _ => assert!(
                            matches!(route, Route::Remote(..)),
                            "{cache} {key} on {}",
                            grid.name()
                        ),
                    }
                }
                let value = handle.get(key.as_bytes()).await.unwrap();
                assert_eq!(value.as_deref(), Some(format!("v{i}").as_bytes()));
            }
        }
    }
    assert!(backup_reads > 0, "some reads arrived at backups");
    for grid in [c, b, a] {
        grid.leave().await;
    }
}
