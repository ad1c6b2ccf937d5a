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

/// Waits until `grid` routes both caches by a stable topology of `members` (agreement on
/// the topology comes first; each member installs it a moment later).
async fn wait_routed(grid: &Grid, members: usize) {
    grid.wait_stable(members, SETTLE).await.unwrap();
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let routed = ["primary", "any"].iter().all(|cache| {
            grid.node()
                .routing()
                .cache(cache)
                .is_some_and(|route| route.is_stable() && route.topology.members().len() == members)
        });
        if routed {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "no stable route");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Members a, b and c, each routing both caches by their stable topology.
async fn three_members() -> (Grid, Grid, Grid) {
    let a = member("a", Vec::new()).await;
    let seed = vec![a.address().to_string()];
    let b = member("b", seed.clone()).await;
    let c = member("c", seed).await;
    for grid in [&a, &b, &c] {
        wait_routed(grid, 3).await;
    }
    (a, b, c)
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
    let (a, b, c) = three_members().await;
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

/// A function that answers a refused write with a reply of its own, as protocol adapters
/// answer errors in their dialect.
#[derive(Debug)]
struct Answering;

impl weft_core::operation::Function for Answering {
    fn apply(
        &self,
        cache: &weft_core::Cache,
        key: &[u8],
        argument: &[u8],
    ) -> Result<Vec<u8>, weft_core::CacheError> {
        match cache.put(key, argument, &WriteOptions::default()) {
            Ok(_) => Ok(b"OK".to_vec()),
            Err(error) => Ok(format!("ERR {error}").into_bytes()),
        }
    }
}

// Proves a function that turns a refusal to write on a member that does not order the
// key's writes into an answer of its own is refused as not the owner — so the grid runs it
// again at the owner — instead of answering that error; and through the grid it runs at
// the owner and writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn functions_refused_as_not_the_owner_run_again_at_the_owner() {
    use weft_core::operation::{Failure, Operation};
    let a = member("fa", Vec::new()).await;
    let seed = vec![a.address().to_string()];
    let b = member("fb", seed.clone()).await;
    for grid in [&a, &b] {
        wait_routed(grid, 2).await;
        grid.functions()
            .register("answering", std::sync::Arc::new(Answering));
    }
    // A key a orders, run directly on b's copy (b is its backup).
    let key = (0..1_000)
        .map(|i| format!("f{i}"))
        .find(|key| read_route(&a, "primary", key.as_bytes()).0 == Route::Local)
        .unwrap();
    let invoke = Operation::Invoke {
        function: "answering".to_owned(),
        key: key.clone().into_bytes(),
        argument: b"value".to_vec(),
        write: true,
    };
    let on_b = b.manager().cache("primary").unwrap();
    let refused = invoke.apply(&on_b, b.functions());
    assert!(
        matches!(
            refused,
            Err(Failure::Cache(weft_core::CacheError::Persistence(
                weft_core::PersistenceError::NotOwner { .. }
            )))
        ),
        "{refused:?}"
    );
    // Through the grid, from b: it runs at a.
    let answer = b
        .cache("primary")
        .unwrap()
        .invoke("answering", key.as_bytes(), b"value".to_vec(), true)
        .await
        .unwrap();
    assert_eq!(answer, b"OK");
    let value = a
        .cache("primary")
        .unwrap()
        .get(key.as_bytes())
        .await
        .unwrap();
    assert_eq!(value.as_deref(), Some(&b"value"[..]));
    for grid in [b, a] {
        grid.leave().await;
    }
}

/// The primary of `key` of `cache`, as `grid` routes it.
fn primary(grid: &Grid, cache: &str, key: &[u8]) -> MemberId {
    let local = grid.manager().cache(cache).unwrap();
    let segment = local.segment_of(key);
    grid.node().routing().cache(cache).unwrap().segments[segment as usize].write[0].clone()
}

// Proves a listener registered with a named filter sees exactly the writes passing it,
// wherever they were applied, and that the members applying them run the filter: the
// events it rejects are never relayed (the others' count of relayed events grows by the
// passing writes they are the primary of, and by nothing else).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn named_filters_run_where_writes_are_applied() {
    use std::sync::{Arc, Mutex};
    use weft_core::listener::EventFilter;
    use weft_core::{CacheEvent, ListenerOptions, SourceFilter};

    let (a, b, c) = three_members().await;
    for grid in [&a, &b, &c] {
        // Every member registers the same factory under the same name.
        grid.manager().event_filters().register(
            "prefix",
            Arc::new(|params: &[Vec<u8>]| -> Result<EventFilter, String> {
                let prefix = params.first().cloned().ok_or("a prefix parameter")?;
                Ok(Arc::new(move |event: &CacheEvent| {
                    event.key().starts_with(&prefix)
                }))
            }),
        );
    }
    let seen: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let options = ListenerOptions::default()
        .source_filter(
            a.manager().event_filters(),
            SourceFilter {
                name: "prefix".to_owned(),
                params: vec![b"wanted-".to_vec()],
            },
        )
        .unwrap();
    let sink = Arc::clone(&seen);
    a.manager()
        .cache("primary")
        .unwrap()
        .add_listener(options, move |event| {
            sink.lock().unwrap().push(event.key().to_vec());
        });
    assert!(
        ListenerOptions::default()
            .source_filter(
                a.manager().event_filters(),
                SourceFilter {
                    name: "unknown".to_owned(),
                    params: Vec::new(),
                },
            )
            .is_err()
    );

    // The other members learn what a's listener wants (it is announced): a write of a
    // passing key that only they can relay reaches it.
    let b_cache = b.cache("primary").unwrap();
    let options = WriteOptions::default();
    let probe = (0..)
        .map(|i| format!("wanted-probe-{i}").into_bytes())
        .find(|key| primary(&a, "primary", key).0 != "a")
        .unwrap();
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !seen.lock().unwrap().contains(&probe) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a's interest was never announced"
        );
        b_cache.put(&probe, b"p", &options).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    seen.lock().unwrap().clear();
    let relayed =
        |grids: &[&Grid]| -> u64 { grids.iter().map(|g| g.node().events().relayed()).sum() };
    let before = relayed(&[&b, &c]);

    let c_cache = c.cache("primary").unwrap();
    let mut wanted = Vec::new();
    let mut relayed_wanted = 0;
    for i in 0..KEYS {
        let through = if i % 2 == 0 { &b_cache } else { &c_cache };
        for prefix in ["wanted-", "other-"] {
            let key = format!("{prefix}{i}").into_bytes();
            through.put(&key, b"v", &options).await.unwrap();
            if prefix == "wanted-" {
                if primary(&a, "primary", &key).0 != "a" {
                    relayed_wanted += 1;
                }
                wanted.push(key);
            }
        }
    }
    let deadline = tokio::time::Instant::now() + SETTLE;
    while seen.lock().unwrap().len() < wanted.len() {
        assert!(tokio::time::Instant::now() < deadline, "events missing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    wanted.sort();
    assert_eq!(got, wanted, "exactly the passing writes, each once");
    assert_eq!(relayed(&[&b, &c]) - before, relayed_wanted);
}

// Proves a cache defined through one member takes writes at once, whichever member owns
// each key, and every owner holds every acknowledged write: a member that applies the
// definition a moment after the one asked is sent the operations and the backup copies
// again once it has the cache (it used to refuse the first and drop the second, leaving
// an acknowledged write with one copy). Caches are defined through each member in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_right_after_a_definition_reach_every_owner() {
    let (a, b, c) = three_members().await;
    let members = [&a, &b, &c];
    for round in 0..6 {
        let name = format!("fresh-{round}");
        let through = members[round % 3];
        let config = CacheConfig {
            mode: CacheMode::Distributed,
            owners: 2,
            ..CacheConfig::default()
        };
        let cache = through.define_cache(&name, config).await.unwrap();
        for i in 0..60 {
            let key = format!("k{i}");
            cache
                .put(key.as_bytes(), b"v", &WriteOptions::default())
                .await
                .unwrap_or_else(|error| panic!("{name}/{key}: {error}"));
        }
        for i in 0..60 {
            let key = format!("k{i}");
            let segment = through
                .manager()
                .cache(&name)
                .unwrap()
                .segment_of(key.as_bytes());
            let owners = through.node().routing().cache(&name).unwrap().segments[segment as usize]
                .write
                .clone();
            assert_eq!(owners.len(), 2);
            for owner in owners {
                let member = members.iter().find(|m| m.name() == owner.0).unwrap();
                let copy = member
                    .manager()
                    .cache(&name)
                    .unwrap()
                    .get(key.as_bytes())
                    .unwrap();
                assert_eq!(
                    copy.as_deref(),
                    Some(&b"v"[..]),
                    "{name}/{key} at {}",
                    owner.0
                );
            }
        }
    }
    for grid in [c, b, a] {
        grid.leave().await;
    }
}
