//! Expiration: lifespan, max idle, cache defaults, purging and the manager's reaper, all on a
//! hand-driven clock.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{T0, default_cache, key, manual_cache, record, take};
use weft_core::{
    CacheConfig, CacheManager, Compute, EventKind, EventKinds, Expiry, Lifetime, ListenerOptions,
    ManagerConfig, ManualClock, WriteOptions,
};

fn opts() -> WriteOptions {
    WriteOptions::default()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// Proves an entry with a lifespan lives through its deadline (inclusive) and is gone after.
#[test]
fn lifespan_expires_after_deadline() {
    let (_m, cache, clock) = default_cache();
    cache.put(b"k", b"v", &opts().lifespan(ms(1_000))).unwrap();
    cache.put(b"immortal", b"v", &opts()).unwrap();
    clock.advance_ms(999);
    assert!(cache.get(b"k").unwrap().is_some());
    clock.advance_ms(1);
    assert!(
        cache.get(b"k").unwrap().is_some(),
        "alive at exactly its deadline"
    );
    clock.advance_ms(1);
    assert!(cache.get(b"k").unwrap().is_none());
    assert!(!cache.contains(b"k").unwrap());
    // Reading does not extend a lifespan.
    cache.put(b"r", b"v", &opts().lifespan(ms(100))).unwrap();
    for _ in 0..10 {
        clock.advance_ms(10);
        assert!(cache.get(b"r").unwrap().is_some());
    }
    clock.advance_ms(1);
    assert!(
        cache.get(b"r").unwrap().is_none(),
        "reads must not extend a lifespan"
    );
    clock.advance_ms(1_000_000);
    assert!(cache.get(b"immortal").unwrap().is_some());
}

// Proves max idle expires an unread entry, and every read (get or contains) extends it.
#[test]
fn max_idle_is_extended_by_reads() {
    let (_m, cache, clock) = default_cache();
    cache.put(b"k", b"v", &opts().max_idle(ms(100))).unwrap();
    // Read every 80 ms, well past the initial 100 ms.
    for _ in 0..5 {
        clock.advance_ms(80);
        assert!(cache.get(b"k").unwrap().is_some());
    }
    clock.advance_ms(80);
    assert!(cache.contains(b"k").unwrap(), "contains is a read too");
    clock.advance_ms(100);
    assert!(
        cache.get(b"k").unwrap().is_some(),
        "alive at exactly last use + max idle"
    );
    clock.advance_ms(101);
    assert!(cache.get(b"k").unwrap().is_none());
}

// Proves with both lifespan and max idle the earlier deadline wins, reads notwithstanding.
#[test]
fn lifespan_caps_max_idle() {
    let (_m, cache, clock) = default_cache();
    cache
        .put(b"k", b"v", &opts().lifespan(ms(250)).max_idle(ms(100)))
        .unwrap();
    for _ in 0..5 {
        clock.advance_ms(50);
        assert!(cache.get(b"k").unwrap().is_some());
    }
    clock.advance_ms(1);
    assert!(
        cache.get(b"k").unwrap().is_none(),
        "lifespan ended at 250 ms"
    );
}

// Proves the cache's configured lifespan and max idle apply to writes that set none.
#[test]
fn cache_defaults_apply() {
    let mut config = CacheConfig::default();
    config.expiration.lifespan = Some(ms(1_000));
    let (_m, cache, clock) = manual_cache(config);
    cache.put(b"k", b"v", &opts()).unwrap();
    let meta = cache.get_metadata(b"k").unwrap().unwrap();
    assert_eq!(meta.lifespan_ms, Some(1_000));
    assert_eq!(meta.max_idle_ms, None);
    clock.advance_ms(1_001);
    assert!(cache.get(b"k").unwrap().is_none());

    let mut config = CacheConfig::default();
    config.expiration.max_idle = Some(ms(100));
    let (_m, cache, clock) = manual_cache(config);
    cache.put(b"k", b"v", &opts()).unwrap();
    cache
        .compute(b"c", &opts(), |_| {
            Compute::Put(b"v".to_vec(), Expiry::default(), ())
        })
        .unwrap();
    assert_eq!(
        cache.get_metadata(b"c").unwrap().unwrap().max_idle_ms,
        Some(100),
        "compute uses the default too"
    );
    clock.advance_ms(90);
    assert!(cache.get(b"k").unwrap().is_some());
    clock.advance_ms(101);
    assert!(cache.get(b"k").unwrap().is_none());
    assert!(cache.get(b"c").unwrap().is_none());
}

// Proves Lifetime::Never and an explicit lifetime override the cache default.
#[test]
fn explicit_lifetimes_override_defaults() {
    let mut config = CacheConfig::default();
    config.expiration.lifespan = Some(ms(1_000));
    config.expiration.max_idle = Some(ms(500));
    let (_m, cache, clock) = manual_cache(config);
    cache
        .put(b"never", b"v", &opts().expiry(Expiry::NEVER))
        .unwrap();
    let meta = cache.get_metadata(b"never").unwrap().unwrap();
    assert_eq!(meta.expires_at_ms(), None);
    cache
        .put(
            b"long",
            b"v",
            &opts().expiry(Expiry {
                lifespan: Lifetime::millis(10_000),
                max_idle: Lifetime::Never,
            }),
        )
        .unwrap();
    cache.put(b"default", b"v", &opts()).unwrap();
    clock.advance_ms(5_000);
    assert!(cache.get(b"default").unwrap().is_none());
    assert!(cache.get(b"long").unwrap().is_some());
    clock.advance_ms(1_000_000_000);
    assert!(cache.get(b"never").unwrap().is_some());
    assert!(cache.get(b"long").unwrap().is_none());
}

// Proves expired entries are never returned by get, get_entry, contains, iter or get_all,
// even before they are purged.
#[test]
fn expired_entries_are_invisible() {
    let (_m, cache, clock) = default_cache();
    let keys: Vec<Vec<u8>> = (0..200).map(|i| key("k", i)).collect();
    for (i, k) in keys.iter().enumerate() {
        let options = if i % 2 == 0 {
            opts().lifespan(ms(100))
        } else if i % 3 == 0 {
            opts().max_idle(ms(100))
        } else {
            opts()
        };
        cache.put(k, b"v", &options).unwrap();
    }
    clock.advance_ms(101);
    let live: BTreeSet<Vec<u8>> = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1 && i % 3 != 0)
        .map(|(_, k)| k.clone())
        .collect();
    let iterated: BTreeSet<Vec<u8>> = cache.iter().map(|e| e.key().to_vec()).collect();
    assert_eq!(iterated, live, "iter");
    let got: BTreeSet<Vec<u8>> = cache
        .get_all(keys.iter().map(Vec::as_slice))
        .unwrap()
        .iter()
        .map(|e| e.key().to_vec())
        .collect();
    assert_eq!(got, live, "get_all");
    for (i, k) in keys.iter().enumerate() {
        let alive = live.contains(k);
        assert_eq!(cache.contains(k).unwrap(), alive, "contains {i}");
        assert_eq!(cache.get(k).unwrap().is_some(), alive, "get {i}");
        assert_eq!(
            cache.get_entry(k).unwrap().is_some(),
            alive,
            "get_entry {i}"
        );
    }
}

// Proves writes treat an expired entry as absent (put_if_absent stores, replace refuses,
// put returns no previous value).
#[test]
fn writes_see_expired_entries_as_absent() {
    let (_m, cache, clock) = default_cache();
    for k in [&b"a"[..], b"b", b"c"] {
        cache.put(k, b"old", &opts().lifespan(ms(10))).unwrap();
    }
    clock.advance_ms(11);
    assert!(
        cache
            .put_if_absent(b"a", b"new", &opts())
            .unwrap()
            .is_none()
    );
    assert_eq!(cache.get(b"a").unwrap().as_deref(), Some(&b"new"[..]));
    assert!(cache.replace(b"b", b"new", &opts()).unwrap().is_none());
    assert!(cache.get(b"b").unwrap().is_none());
    assert!(cache.put(b"c", b"new", &opts()).unwrap().is_none());
    cache.check_invariants();
}

// Proves a compute that fails (its value is too large) after meeting an expired entry still
// reports that entry as expired: the entry was dropped, so its event and count must not be.
#[test]
fn failed_compute_still_reports_the_expired_entry() {
    let (_m, cache, clock) = default_cache();
    let seen = record(
        &cache,
        ListenerOptions::default().kinds(EventKinds::NONE.with(EventKind::Expired)),
    );
    cache.put(b"k", b"old", &opts().lifespan(ms(10))).unwrap();
    clock.advance_ms(11);
    // Zeroed pages: only the length is looked at, nothing is touched.
    let huge = vec![0u8; weft_core::cache::VALUE_BYTES_MAX + 1];
    let result = cache.compute(b"k", &opts(), |existing| {
        assert!(
            existing.is_none(),
            "an expired entry is presented as absent"
        );
        Compute::Put(huge, Expiry::default(), ())
    });
    assert!(
        matches!(result, Err(weft_core::CacheError::TooLarge { .. })),
        "{result:?}"
    );
    assert_eq!(cache.size(), 0, "the expired entry was dropped");
    cache.check_invariants();
    let events = take(&seen);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].old.as_deref(), Some(&b"old"[..]));
    assert_eq!(cache.statistics().expirations, 1);
}

// Proves purge_expired removes exactly the expired entries and raises one Expired event for
// each, carrying its value; reads that meet an expired entry raise one as well.
#[test]
fn purge_expired_removes_and_notifies() {
    let (_m, cache, clock) = default_cache();
    let seen = record(
        &cache,
        ListenerOptions::default().kinds(EventKinds::NONE.with(EventKind::Expired)),
    );
    for i in 0..100 {
        let options = if i < 60 {
            opts().lifespan(ms(50))
        } else {
            opts()
        };
        cache.put(&key("k", i), &key("v", i), &options).unwrap();
    }
    assert_eq!(cache.purge_expired(), 0, "nothing has expired yet");
    clock.advance_ms(51);
    assert_eq!(cache.size(), 100, "expired entries are held until purged");
    // One read meets an expired entry first.
    assert!(cache.get(&key("k", 0)).unwrap().is_none());
    assert_eq!(cache.purge_expired(), 59);
    assert_eq!(cache.purge_expired(), 0);
    assert_eq!(cache.size(), 40);
    cache.check_invariants();
    let events = take(&seen);
    assert_eq!(events.len(), 60);
    let keys: BTreeSet<Vec<u8>> = events.iter().map(|e| e.key.clone()).collect();
    assert_eq!(keys, (0..60).map(|i| key("k", i)).collect());
    for event in &events {
        assert_eq!(event.kind, EventKind::Expired);
        let n: usize = String::from_utf8_lossy(&event.key[2..]).parse().unwrap();
        assert_eq!(event.old.as_deref(), Some(&key("v", n)[..]));
        assert!(event.new.is_none());
    }
    assert_eq!(cache.statistics().expirations, 60);
}

// Proves purge_due spreads a pass over a cache's segments across its reaper interval: after
// one interval every expired entry is gone, a cache with a longer interval keeps some, and a
// slice is purged only when due.
#[test]
fn purge_due_follows_each_cache_interval() {
    let clock = ManualClock::new(T0);
    let mut fast = CacheConfig::default();
    fast.expiration.interval = Duration::from_secs(1);
    let mut slow = CacheConfig::default();
    slow.expiration.interval = Duration::from_secs(60);
    let mut caches = BTreeMap::new();
    caches.insert("fast".to_owned(), fast);
    caches.insert("slow".to_owned(), slow);
    let manager =
        CacheManager::with_clock(ManagerConfig { caches }, Arc::new(clock.clone())).unwrap();
    let base = Instant::now();
    let fast = manager.cache("fast").unwrap();
    let slow = manager.cache("slow").unwrap();
    for i in 0..1000 {
        fast.put(&key("k", i), b"v", &opts().lifespan(ms(100)))
            .unwrap();
        slow.put(&key("k", i), b"v", &opts().lifespan(ms(100)))
            .unwrap();
    }
    clock.advance_ms(101);
    assert_eq!(manager.purge_due(base), 0, "no slice is due yet");
    // Ten slices of the one-second interval, 100 ms apart: one pass over every segment.
    let mut purged = 0;
    for tick in 1..=10 {
        purged += manager.purge_due(base + Duration::from_millis(100 * tick + 1));
    }
    assert_eq!(fast.size(), 0);
    assert!(
        slow.size() > 900,
        "a sixtieth-of-a-pass at most: {}",
        slow.size()
    );
    assert_eq!(purged, 1000 + (1000 - slow.size()));
    // The same instant again purges nothing: the slice was rescheduled.
    fast.put(b"again", b"v", &opts().lifespan(ms(1))).unwrap();
    clock.advance_ms(2);
    assert_eq!(manager.purge_due(base + Duration::from_millis(1001)), 0);
    for tick in 1..=600 {
        manager.purge_due(base + Duration::from_millis(1001 + 100 * tick));
    }
    assert_eq!(slow.size(), 0);
    assert_eq!(fast.size(), 0);
}

// Proves the background reaper purges expired entries without any read.
#[test]
fn reaper_thread_purges() {
    let clock = ManualClock::new(T0);
    let mut config = CacheConfig::default();
    config.expiration.interval = ms(5);
    let mut caches = BTreeMap::new();
    caches.insert("reaped".to_owned(), config);
    let manager =
        CacheManager::with_clock(ManagerConfig { caches }, Arc::new(clock.clone())).unwrap();
    let cache = manager.cache("reaped").unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let sender = parking_lot::Mutex::new(sender);
    cache.add_listener(ListenerOptions::default(), move |event| {
        let _ = sender.lock().send((event.kind(), event.key().to_vec()));
    });
    cache.put(b"k", b"v", &opts().lifespan(ms(10))).unwrap();
    assert_eq!(
        receiver.recv_timeout(Duration::from_secs(30)).unwrap().0,
        EventKind::Created
    );
    let reaper = manager.start_reaper().unwrap();
    clock.advance_ms(11);
    let (kind, k) = receiver.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!((kind, k.as_slice()), (EventKind::Expired, &b"k"[..]));
    assert_eq!(cache.size(), 0);
    manager.shutdown();
    reaper.join().unwrap();
}
