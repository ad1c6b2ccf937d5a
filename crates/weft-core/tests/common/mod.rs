//! Helpers shared by the integration tests: a manager on a hand-driven clock, and a
//! listener that records events.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use weft_core::{
    Cache, CacheConfig, CacheEvent, CacheManager, EventKind, ListenerOptions, ManagerConfig,
    ManualClock,
};

/// Where the manual clocks of the tests start (an arbitrary, realistic epoch time).
pub const T0: u64 = 1_700_000_000_000;

/// A manager holding one cache `test` with `config`, judged by a manual clock at [`T0`].
pub fn manual_cache(config: CacheConfig) -> (CacheManager, Cache, ManualClock) {
    let clock = ManualClock::new(T0);
    let mut caches = BTreeMap::new();
    caches.insert("test".to_owned(), config);
    let manager = CacheManager::with_clock(ManagerConfig { caches }, Arc::new(clock.clone()))
        .expect("valid configuration");
    let cache = manager.cache("test").expect("cache exists");
    (manager, cache, clock)
}

/// A cache with the default configuration on a manual clock.
pub fn default_cache() -> (CacheManager, Cache, ManualClock) {
    manual_cache(CacheConfig::default())
}

/// A configuration bounded to `max_count` entries.
pub fn bounded_by_count(max_count: u64) -> CacheConfig {
    let mut config = CacheConfig::default();
    config.memory.max_count = Some(max_count);
    config
}

/// One recorded event, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub kind: EventKind,
    pub key: Vec<u8>,
    pub old: Option<Vec<u8>>,
    pub new: Option<Vec<u8>>,
    pub old_version: Option<u64>,
    pub new_version: Option<u64>,
}

impl Seen {
    pub fn of(event: &CacheEvent) -> Self {
        Self {
            kind: event.kind(),
            key: event.key().to_vec(),
            old: event.old_value().map(<[u8]>::to_vec),
            new: event.new_value().map(<[u8]>::to_vec),
            old_version: event.old_entry().map(weft_core::CacheEntry::version),
            new_version: event.new_entry().map(weft_core::CacheEntry::version),
        }
    }
}

/// Registers a synchronous listener recording every event it is given.
pub fn record(cache: &Cache, options: ListenerOptions) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    cache.add_listener(options, move |event| sink.lock().push(Seen::of(event)));
    seen
}

/// The events recorded so far, taken out of the recorder.
pub fn take(seen: &Mutex<Vec<Seen>>) -> Vec<Seen> {
    std::mem::take(&mut *seen.lock())
}

/// A key made of a prefix and a number.
pub fn key(prefix: &str, n: usize) -> Vec<u8> {
    format!("{prefix}-{n:06}").into_bytes()
}
