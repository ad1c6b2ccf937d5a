//! Embedded get and put of 16-byte keys and 100-byte values over 100k preloaded keys, on one
//! and two threads, against a ceiling: a plain sharded `HashMap` (256 shards behind
//! `parking_lot::RwLock`, foldhash, `Bytes` values) doing the same work with none of the
//! cache's features.
//!
//! `weft` is a default cache (statistics on) and `get` returns `Bytes`; `weft_no_stats` is the
//! same with statistics off; `weft_get_entry` reads through `get_entry` (a zero-copy entry
//! handle, no `Bytes` wrapper to allocate).
//!
//! Run: `cargo bench -p weft-core --bench container`. The two-thread figures are aggregate:
//! time per operation across both threads (the inverse of throughput).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parking_lot::RwLock;
use weft_core::{Cache, CacheManager, ManagerConfig, WriteOptions};

const KEYS: usize = 100_000;
const VALUE_BYTES: usize = 100;
const SHARDS: usize = 256;

type Shard = RwLock<HashMap<Vec<u8>, Bytes, foldhash::fast::RandomState>>;

/// The ceiling: what a map with no expiration, eviction, events or statistics costs.
struct ShardedMap {
    shards: Box<[Shard]>,
    hasher: foldhash::fast::RandomState,
}

impl ShardedMap {
    fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|_| RwLock::new(HashMap::with_hasher(foldhash::fast::RandomState::default())))
                .collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn shard(&self, key: &[u8]) -> &Shard {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    fn get(&self, key: &[u8]) -> Option<Bytes> {
        self.shard(key).read().get(key).cloned()
    }

    fn put(&self, key: &[u8], value: &[u8]) {
        let value = Bytes::copy_from_slice(value);
        let mut shard = self.shard(key).write();
        match shard.get_mut(key) {
            Some(slot) => *slot = value,
            None => {
                shard.insert(key.to_vec(), value);
            }
        }
    }
}

type Key = [u8; 16];

/// 16-byte keys, stored flat so that fetching one costs the harness a single cache miss.
fn keys() -> Vec<Key> {
    (0..KEYS)
        .map(|i| {
            let mut key = [0u8; 16];
            key.copy_from_slice(format!("key:{i:012}").as_bytes());
            key
        })
        .collect()
}

/// A fixed pseudo-random visiting order, so that accesses do not follow insertion order.
fn order() -> Vec<usize> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut order: Vec<usize> = (0..KEYS).collect();
    for i in (1..KEYS).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    order
}

fn weft_cache(keys: &[Key], value: &[u8], statistics: bool) -> (CacheManager, Cache) {
    let manager = CacheManager::new(ManagerConfig::default()).expect("default configuration");
    let cache = manager.cache("default").expect("default cache");
    cache.set_statistics_enabled(statistics);
    let options = WriteOptions::default().ignore_return_values();
    for key in keys {
        cache.put(key, value, &options).expect("put");
    }
    (manager, cache)
}

fn sharded_map(keys: &[Key], value: &[u8]) -> ShardedMap {
    let map = ShardedMap::new();
    for key in keys {
        map.put(key, value);
    }
    map
}

/// Runs `op` `iters` times in total over `threads` threads, each walking the visiting order
/// from its own offset; returns the wall time.
fn run_threads(
    threads: usize,
    iters: u64,
    keys: &[Key],
    order: &[usize],
    op: &(impl Fn(&[u8]) + Sync),
) -> Duration {
    let per_thread = iters.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let mut position = t * (KEYS / threads);
                for _ in 0..per_thread {
                    op(&keys[order[position]]);
                    position += 1;
                    if position == KEYS {
                        position = 0;
                    }
                }
            });
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let keys = keys();
    let order = order();
    let value = vec![0xabu8; VALUE_BYTES];
    let (_manager, cache) = weft_cache(&keys, &value, true);
    let (_quiet_manager, quiet) = weft_cache(&keys, &value, false);
    let map = sharded_map(&keys, &value);
    let options = WriteOptions::default().ignore_return_values();

    let weft_get = |key: &[u8]| {
        black_box(cache.get(key).expect("get"));
    };
    let entry_get = |key: &[u8]| {
        black_box(cache.get_entry(key).expect("get"));
    };
    let quiet_get = |key: &[u8]| {
        black_box(quiet.get(key).expect("get"));
    };
    let map_get = |key: &[u8]| {
        black_box(map.get(key));
    };
    let weft_put = |key: &[u8]| {
        black_box(cache.put(key, &value, &options).expect("put"));
    };
    let quiet_put = |key: &[u8]| {
        black_box(quiet.put(key, &value, &options).expect("put"));
    };
    let map_put = |key: &[u8]| map.put(key, &value);

    for threads in [1usize, 2] {
        let mut group = c.benchmark_group(format!("get/{threads}t"));
        group.throughput(Throughput::Elements(1));
        group.bench_function("weft", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &weft_get));
        });
        group.bench_function("weft_no_stats", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &quiet_get));
        });
        group.bench_function("weft_get_entry", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &entry_get));
        });
        group.bench_function("sharded_hashmap", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &map_get));
        });
        group.finish();

        let mut group = c.benchmark_group(format!("put/{threads}t"));
        group.throughput(Throughput::Elements(1));
        group.bench_function("weft", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &weft_put));
        });
        group.bench_function("weft_no_stats", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &quiet_put));
        });
        group.bench_function("sharded_hashmap", |b| {
            b.iter_custom(|iters| run_threads(threads, iters, &keys, &order, &map_put));
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
