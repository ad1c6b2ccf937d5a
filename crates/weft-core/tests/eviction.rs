//! Eviction: count and memory bounds, evicted events, frequency-aware victim choice, and
//! `when-full = exception`.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{bounded_by_count, key, manual_cache, record, take};
use weft_core::{
    CacheConfig, CacheError, Compute, EventKind, EventKinds, Expiry, ListenerOptions, WhenFull,
    WriteOptions, entry_charge,
};

fn opts() -> WriteOptions {
    WriteOptions::default()
}

fn value_for(k: &[u8]) -> Vec<u8> {
    let mut v = k.to_vec();
    v.extend_from_slice(b"/value");
    v
}

// Proves a max-count cache never holds more than its bound after a write returns, and fills
// up to it.
#[test]
fn max_count_is_never_exceeded() {
    for segments in [1, 4, 256] {
        let mut config = bounded_by_count(100);
        config.segments = segments;
        let (_m, cache, _clock) = manual_cache(config);
        for i in 0..2_000 {
            cache.put(&key("k", i), b"v", &opts()).unwrap();
            assert!(cache.size() <= 100, "size {} after write {i}", cache.size());
            if i >= 99 {
                assert_eq!(cache.size(), 100, "the bound is reached, not undershot");
            }
        }
        assert_eq!(cache.iter().count(), 100);
        cache.check_invariants();
    }
}

// Proves concurrent writers leave a max-count cache within its bound once they finish.
#[test]
fn max_count_holds_under_concurrent_writers() {
    let (_m, cache, _clock) = manual_cache(bounded_by_count(500));
    std::thread::scope(|scope| {
        for t in 0..4 {
            let cache = cache.clone();
            scope.spawn(move || {
                for i in 0..5_000 {
                    cache.put(&key(&format!("t{t}"), i), b"v", &opts()).unwrap();
                }
            });
        }
    });
    assert!(cache.size() <= 500, "size {}", cache.size());
    assert!(cache.size() >= 490, "over-eviction: size {}", cache.size());
    assert_eq!(cache.statistics().evictions as usize, 20_000 - cache.size());
    cache.check_invariants();
}

// Proves every eviction raises an Evicted event carrying the evicted key and value, and
// that evicted and surviving keys partition the keys written.
#[test]
fn evictions_raise_events_with_values() {
    let (_m, cache, _clock) = manual_cache(bounded_by_count(50));
    let seen = record(&cache, ListenerOptions::default());
    let keys: Vec<Vec<u8>> = (0..500).map(|i| key("k", i)).collect();
    for k in &keys {
        cache.put(k, &value_for(k), &opts()).unwrap();
    }
    let events = take(&seen);
    let evicted: Vec<_> = events
        .iter()
        .filter(|e| e.kind == EventKind::Evicted)
        .collect();
    assert_eq!(
        events
            .iter()
            .filter(|e| e.kind == EventKind::Created)
            .count(),
        500
    );
    assert_eq!(evicted.len(), 450);
    assert_eq!(cache.statistics().evictions, 450);
    let mut evicted_keys = BTreeSet::new();
    for event in &evicted {
        assert_eq!(event.old.as_deref(), Some(&value_for(&event.key)[..]));
        assert!(event.new.is_none());
        assert!(event.old_version.is_some());
        assert!(
            !cache.contains(&event.key).unwrap(),
            "an evicted key is gone"
        );
        assert!(evicted_keys.insert(event.key.clone()), "evicted twice");
    }
    let surviving: BTreeSet<Vec<u8>> = cache.iter().map(|e| e.key().to_vec()).collect();
    assert!(evicted_keys.is_disjoint(&surviving));
    let all: BTreeSet<Vec<u8>> = evicted_keys.union(&surviving).cloned().collect();
    assert_eq!(all, keys.into_iter().collect());
}

/// Runs the hot-set-versus-scan workload and returns how many hot keys survive.
fn hot_keys_surviving(segments: u32, bound: u64, hot: usize, scan: usize) -> usize {
    let mut config = bounded_by_count(bound);
    config.segments = segments;
    let (_m, cache, _clock) = manual_cache(config);
    let hot_keys: Vec<Vec<u8>> = (0..hot).map(|i| key("hot", i)).collect();
    for k in &hot_keys {
        cache.put(k, b"v", &opts()).unwrap();
    }
    for _ in 0..10 {
        for k in &hot_keys {
            assert!(cache.get(k).unwrap().is_some());
        }
    }
    // A scan of one-time keys, interleaved with the hot set staying in use.
    for i in 0..scan {
        cache.put(&key("scan", i), b"v", &opts()).unwrap();
        if i % 50 == 0 {
            for k in &hot_keys {
                let _ = cache.get(k).unwrap();
            }
        }
    }
    // The final reads must not count: check presence without reading through the cache.
    let present: BTreeSet<Vec<u8>> = cache.iter().map(|e| e.key().to_vec()).collect();
    assert!(cache.size() as u64 <= bound);
    hot_keys.iter().filter(|k| present.contains(*k)).count()
}

// Proves eviction is frequency-aware: a hot set read many times survives a scan of many
// one-time keys, where a random choice would keep only about bound/total of it.
#[test]
fn hot_set_survives_a_scan() {
    for (segments, bound, hot, scan) in [
        (256, 1_000, 200, 10_000),
        (16, 1_000, 200, 10_000),
        (1, 1_000, 200, 10_000),
    ] {
        let survivors = hot_keys_surviving(segments, bound, hot, scan);
        // Random eviction would keep about 1000 / 10200 ≈ 10% of the hot set.
        assert!(
            survivors * 10 >= hot * 9,
            "only {survivors} of {hot} hot keys survived ({segments} segments)"
        );
    }
}

// Proves a max-size cache keeps its charged memory within the bound, and that the charge is
// what memory_bytes reports (the sum of each entry's charge).
#[test]
fn max_size_is_respected() {
    let mut config = CacheConfig::default();
    config.memory.max_size_bytes = Some(64 * 1024);
    let (_m, cache, _clock) = manual_cache(config);
    let seen = record(
        &cache,
        ListenerOptions::default().kinds(EventKinds::NONE.with(EventKind::Evicted)),
    );
    let value = vec![7u8; 100];
    for i in 0..5_000 {
        cache.put(&key("k", i), &value, &opts()).unwrap();
        assert!(
            cache.memory_bytes() <= 64 * 1024,
            "{} bytes",
            cache.memory_bytes()
        );
    }
    let charged: usize = cache.iter().map(|e| entry_charge(&e)).sum();
    assert_eq!(charged, cache.memory_bytes());
    // Entries of 100-byte values cost about 160 bytes: the cache is nearly full, not empty.
    assert!(
        cache.memory_bytes() > 60 * 1024,
        "{} bytes",
        cache.memory_bytes()
    );
    assert_eq!(
        take(&seen).len() as u64,
        5_000 - cache.size() as u64,
        "every entry removed was evicted with an event"
    );
    // Bigger values evict more entries to make room.
    let before = cache.size();
    cache.put(b"big", &vec![1u8; 16 * 1024], &opts()).unwrap();
    assert!(cache.memory_bytes() <= 64 * 1024);
    assert!(cache.size() < before - 90);
    assert!(
        cache.contains(b"big").unwrap(),
        "the entry written is never its own victim"
    );
    cache.check_invariants();
}

// Proves memory_bytes follows writes, overwrites, removes and clear exactly.
#[test]
fn memory_bytes_accounting() {
    let (_m, cache, _clock) = manual_cache(CacheConfig::default());
    assert_eq!(cache.memory_bytes(), 0);
    cache.put(b"k", &[0u8; 10], &opts()).unwrap();
    let small = cache.memory_bytes();
    assert_eq!(
        small,
        entry_charge(&cache.get_entry(b"k").unwrap().unwrap())
    );
    cache.put(b"k", &[0u8; 1_000], &opts()).unwrap();
    assert!(cache.memory_bytes() >= small + 990);
    cache.put(b"k", &[0u8; 10], &opts()).unwrap();
    assert_eq!(cache.memory_bytes(), small);
    cache.remove(b"k", &opts()).unwrap();
    assert_eq!(cache.memory_bytes(), 0);
    for i in 0..100 {
        cache.put(&key("k", i), b"v", &opts()).unwrap();
    }
    assert!(cache.memory_bytes() > 0);
    cache.clear().unwrap();
    assert_eq!(cache.memory_bytes(), 0);
}

// Proves when-full = exception refuses new keys with ContainerFull but allows overwrites,
// removals, and new keys again once there is room.
#[test]
fn when_full_exception_refuses_new_keys() {
    let mut config = bounded_by_count(10);
    config.memory.when_full = WhenFull::Exception;
    let (_m, cache, _clock) = manual_cache(config);
    for i in 0..10 {
        cache.put(&key("k", i), b"v", &opts()).unwrap();
    }
    let full = |r: Result<(), CacheError>| {
        assert!(
            matches!(r, Err(CacheError::ContainerFull { ref cache }) if cache == "test"),
            "{r:?}"
        );
    };
    full(cache.put(b"new", b"v", &opts()).map(drop));
    full(cache.put_if_absent(b"new", b"v", &opts()).map(drop));
    full(cache.compute(b"new", &opts(), |_| {
        Compute::Put(b"v".to_vec(), Expiry::default(), ())
    }));
    full(
        cache
            .merge(b"new", b"v", &opts(), |_, n| Some(n.to_vec()))
            .map(drop),
    );
    assert!(!cache.contains(b"new").unwrap());
    assert_eq!(cache.size(), 10);
    // Overwrites are fine.
    let previous = cache.put(&key("k", 3), b"changed", &opts()).unwrap();
    assert_eq!(previous.unwrap().value(), b"v");
    assert!(
        cache
            .replace(&key("k", 4), b"changed", &opts())
            .unwrap()
            .is_some()
    );
    assert_eq!(cache.statistics().evictions, 0, "nothing is ever evicted");
    // Room again after a remove.
    cache.remove(&key("k", 0), &opts()).unwrap();
    cache.put(b"new", b"v", &opts()).unwrap();
    full(cache.put(b"newer", b"v", &opts()).map(drop));
    cache.check_invariants();
}

// Proves when-full = exception with a size bound refuses an entry that would not fit.
#[test]
fn when_full_exception_by_size() {
    let mut config = CacheConfig::default();
    config.memory.max_size_bytes = Some(4_096);
    config.memory.when_full = WhenFull::Exception;
    let (_m, cache, _clock) = manual_cache(config);
    let mut stored = 0;
    for i in 0..100 {
        match cache.put(&key("k", i), &[0u8; 100], &opts()) {
            Ok(_) => stored += 1,
            Err(CacheError::ContainerFull { .. }) => break,
            Err(other) => panic!("{other}"),
        }
    }
    assert!(stored > 10 && stored < 100, "stored {stored}");
    assert!(cache.memory_bytes() <= 4_096);
    assert!(cache.put(b"huge", &[0u8; 8_192], &opts()).is_err());
}

// Proves an expired entry met while evicting is reported as expired, not evicted.
#[test]
fn expired_entries_go_first_and_count_as_expirations() {
    let mut config = bounded_by_count(20);
    config.segments = 1;
    let (_m, cache, clock) = manual_cache(config);
    let seen = record(
        &cache,
        ListenerOptions::default().kinds(
            EventKinds::NONE
                .with(EventKind::Evicted)
                .with(EventKind::Expired),
        ),
    );
    for i in 0..20 {
        cache
            .put(
                &key("k", i),
                b"v",
                &opts().lifespan(Duration::from_millis(10)),
            )
            .unwrap();
    }
    clock.advance_ms(11);
    cache.put(b"fresh", b"v", &opts()).unwrap();
    let events = take(&seen);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::Expired);
    let stats = cache.statistics();
    assert_eq!((stats.evictions, stats.expirations), (0, 1));
}

// Proves a bound beyond i64::MAX means "unbounded" instead of wrapping negative and evicting
// every entry.
#[test]
fn huge_bound_does_not_evict_everything() {
    let mut config = weft_core::CacheConfig::default();
    config.memory.max_count = Some(u64::MAX);
    let manager = weft_core::CacheManager::new(weft_core::ManagerConfig::default()).unwrap();
    let cache = manager.create_cache("huge", config).unwrap();
    for i in 0..100u32 {
        cache
            .put(&i.to_le_bytes(), b"v", &weft_core::WriteOptions::default())
            .unwrap();
    }
    assert_eq!(cache.size(), 100);
    assert_eq!(cache.statistics().evictions, 0);
}
