//! A `get` served from the near cache against one that goes to the server, over loopback to
//! a Weft server started in this process (10 keys of 100-byte values).
//!
//! Run: `cargo bench -p weft-client --bench near_cache`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use weft_client::{Client, ClientConfig, NearCacheConfig, RemoteCache};
use weft_server::Server;
use weft_server::config::ServerConfig;

const KEYS: usize = 10;
const VALUE_BYTES: usize = 100;

fn cache(runtime: &tokio::runtime::Runtime, server: &Server, near: bool) -> RemoteCache {
    let mut config = ClientConfig::new([server.local_addr()]);
    if near {
        // A bound long enough that every measured read is a hit.
        config = config.with_near_cache(NearCacheConfig::new(1_000, Duration::from_secs(3600)));
    }
    runtime.block_on(async {
        let client = Client::connect(config).await.expect("a server");
        client.cache("default").await.expect("the default cache")
    })
}

fn gets(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let config = ServerConfig::parse("bench.toml", "[server]\nbind = \"127.0.0.1:0\"\n")
        .expect("a configuration");
    let server = runtime.block_on(Server::start(config)).expect("a server");
    let remote = cache(&runtime, &server, false);
    let near = cache(&runtime, &server, true);
    let keys: Vec<String> = (0..KEYS).map(|i| format!("key-{i}")).collect();
    runtime.block_on(async {
        for key in &keys {
            remote
                .put(key, vec![7u8; VALUE_BYTES])
                .await
                .expect("a put");
            near.get(key).await.expect("a get");
        }
    });
    let mut group = c.benchmark_group("get");
    let mut turn = 0;
    group.bench_function("near_cache_hit", |b| {
        b.iter(|| {
            turn = (turn + 1) % KEYS;
            black_box(runtime.block_on(near.get(&keys[turn])).expect("a get"))
        });
    });
    group.bench_function("server_round_trip", |b| {
        b.iter(|| {
            turn = (turn + 1) % KEYS;
            black_box(runtime.block_on(remote.get(&keys[turn])).expect("a get"))
        });
    });
    group.finish();
    drop((remote, near));
    runtime.block_on(server.shutdown());
}

criterion_group!(benches, gets);
criterion_main!(benches);
