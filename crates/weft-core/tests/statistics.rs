//! Statistics: exact counters, averages, disabling, reset and manager-level sums.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{bounded_by_count, default_cache, key, manual_cache};
use weft_core::{
    CacheConfig, CacheManager, CacheStatistics, Compute, Expiry, ManagerConfig, ManualClock,
    WriteOptions,
};

fn opts() -> WriteOptions {
    WriteOptions::default()
}

/// The counters only, so that tests can compare them exactly.
fn counters(s: &CacheStatistics) -> [u64; 7] {
    [
        s.hits,
        s.misses,
        s.stores,
        s.remove_hits,
        s.remove_misses,
        s.evictions,
        s.expirations,
    ]
}

// Proves hits, misses, stores, remove hits and misses are counted exactly, operation by
// operation (contains is not a read; refused conditional writes store nothing).
#[test]
fn counters_are_exact() {
    let (_m, cache, _clock) = default_cache();
    let check = |expected: [u64; 7], what: &str| {
        assert_eq!(counters(&cache.statistics()), expected, "after {what}");
    };
    check([0; 7], "nothing");
    cache.put(b"a", b"1", &opts()).unwrap();
    cache.put(b"b", b"1", &opts()).unwrap();
    cache.put(b"a", b"2", &opts()).unwrap();
    check([0, 0, 3, 0, 0, 0, 0], "three puts");
    cache.get(b"a").unwrap();
    cache.get_entry(b"b").unwrap();
    cache.get_metadata(b"a").unwrap();
    cache.get(b"missing").unwrap();
    check([3, 1, 3, 0, 0, 0, 0], "reads");
    cache.contains(b"a").unwrap();
    cache.contains(b"missing").unwrap();
    check([3, 1, 3, 0, 0, 0, 0], "contains");
    cache
        .get_all([&b"a"[..], b"b", b"missing", b"missing2"])
        .unwrap();
    check([5, 3, 3, 0, 0, 0, 0], "get_all");
    cache.put_if_absent(b"a", b"x", &opts()).unwrap(); // refused
    cache.put_if_absent(b"c", b"x", &opts()).unwrap(); // stored
    cache.replace(b"missing", b"x", &opts()).unwrap(); // refused
    cache.replace(b"c", b"y", &opts()).unwrap(); // stored
    check([5, 3, 5, 0, 0, 0, 0], "conditional writes");
    let version = cache.get_metadata(b"c").unwrap().unwrap().version; // a hit
    cache
        .replace_if_version(b"c", version + 1, b"z", &opts())
        .unwrap(); // refused
    cache
        .replace_if_version(b"c", version, b"z", &opts())
        .unwrap(); // stored
    check([6, 3, 6, 0, 0, 0, 0], "versioned replaces");
    cache.remove(b"a", &opts()).unwrap();
    cache.remove(b"a", &opts()).unwrap();
    cache.delete(b"b").unwrap();
    check([6, 3, 6, 2, 1, 0, 0], "removes");
    let version = cache.get_metadata(b"c").unwrap().unwrap().version; // a hit
    cache.remove_if_version(b"c", version + 1, &opts()).unwrap(); // miss
    cache.remove_if_version(b"c", version, &opts()).unwrap(); // hit
    check([7, 3, 6, 3, 2, 0, 0], "versioned removes");
    cache
        .compute(b"n", &opts(), |_| {
            Compute::Put(b"1".to_vec(), Expiry::default(), ())
        })
        .unwrap();
    cache.compute(b"n", &opts(), |_| Compute::Keep(())).unwrap();
    cache
        .compute(b"n", &opts(), |_| Compute::Remove(()))
        .unwrap();
    check([7, 3, 7, 4, 2, 0, 0], "compute");
    cache
        .merge(b"m", b"1", &opts(), |_, n| Some(n.to_vec()))
        .unwrap();
    cache
        .merge(b"m", b"2", &opts(), |o, n| Some([o, n].concat()))
        .unwrap();
    check([7, 3, 9, 4, 2, 0, 0], "merge: two stores and no read");
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..10).map(|i| (key("p", i), b"v".to_vec())).collect();
    cache
        .put_all(
            pairs.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
            &opts(),
        )
        .unwrap();
    check([7, 3, 19, 4, 2, 0, 0], "put_all");
}

// Proves evictions and expirations (by read, by write, by purge) are counted exactly.
#[test]
fn evictions_and_expirations_are_counted() {
    let (_m, cache, clock) = manual_cache(bounded_by_count(10));
    for i in 0..25 {
        cache.put(&key("k", i), b"v", &opts()).unwrap();
    }
    assert_eq!(cache.statistics().evictions, 15);
    cache.clear().unwrap();
    for i in 0..6 {
        cache
            .put(
                &key("e", i),
                b"v",
                &opts().lifespan(Duration::from_millis(5)),
            )
            .unwrap();
    }
    clock.advance_ms(6);
    assert!(cache.get(&key("e", 0)).unwrap().is_none()); // found expired by a read
    cache.put(&key("e", 1), b"v", &opts()).unwrap(); // by a write over it
    assert_eq!(cache.purge_expired(), 4); // by the purge
    let stats = cache.statistics();
    assert_eq!(stats.expirations, 6);
    assert_eq!(stats.evictions, 15);
    assert_eq!(stats.misses, 1);
}

// Proves the average times become non-zero once operations of each kind ran.
#[test]
fn averages_are_measured() {
    let (_m, cache, _clock) = default_cache();
    let stats = cache.statistics();
    assert_eq!(
        (
            stats.average_read_time_nanos,
            stats.average_write_time_nanos,
            stats.average_remove_time_nanos
        ),
        (0, 0, 0)
    );
    for i in 0..200 {
        cache.put(&key("k", i), &[0u8; 100], &opts()).unwrap();
        cache.get(&key("k", i)).unwrap();
        cache.remove(&key("k", i), &opts()).unwrap();
    }
    let stats = cache.statistics();
    assert!(stats.average_read_time_nanos > 0);
    assert!(stats.average_write_time_nanos > 0);
    assert!(stats.average_remove_time_nanos > 0);
    assert!(stats.enabled);
}

// Proves a cache with statistics disabled counts nothing, and starts when enabled.
#[test]
fn disabled_statistics_stay_zero() {
    let mut config = bounded_by_count(5);
    config.statistics = false;
    let (_m, cache, clock) = manual_cache(config);
    for i in 0..20 {
        cache
            .put(
                &key("k", i),
                b"v",
                &opts().lifespan(Duration::from_millis(5)),
            )
            .unwrap();
        cache.get(&key("k", i)).unwrap();
        cache.get(b"missing").unwrap();
        cache.remove(b"missing", &opts()).unwrap();
    }
    clock.advance_ms(6);
    cache.purge_expired();
    let stats = cache.statistics();
    assert!(!stats.enabled);
    assert_eq!(counters(&stats), [0; 7]);
    assert_eq!(
        (
            stats.average_read_time_nanos,
            stats.average_write_time_nanos,
            stats.average_remove_time_nanos
        ),
        (0, 0, 0)
    );
    cache.set_statistics_enabled(true);
    cache.put(b"k", b"v", &opts()).unwrap();
    cache.get(b"k").unwrap();
    let stats = cache.statistics();
    assert!(stats.enabled);
    assert_eq!((stats.stores, stats.hits), (1, 1));
}

// Proves reset zeroes the counters but not the entries or memory figures.
#[test]
fn reset_zeroes_counters() {
    let (_m, cache, _clock) = default_cache();
    for i in 0..10 {
        cache.put(&key("k", i), b"v", &opts()).unwrap();
        cache.get(&key("k", i)).unwrap();
    }
    cache.remove(&key("k", 0), &opts()).unwrap();
    cache.reset_statistics();
    let stats = cache.statistics();
    assert_eq!(counters(&stats), [0; 7]);
    assert_eq!(stats.average_read_time_nanos, 0);
    assert_eq!(stats.entries, 9);
    assert_eq!(stats.memory_bytes, cache.memory_bytes() as u64);
    assert!(stats.memory_bytes > 0);
    cache.get(&key("k", 1)).unwrap();
    assert_eq!(cache.statistics().hits, 1, "counting resumes after a reset");
}

// Proves the manager's statistics are the sums of its caches'.
#[test]
fn manager_sums_caches() {
    let clock = ManualClock::new(common::T0);
    let mut caches = BTreeMap::new();
    caches.insert("one".to_owned(), CacheConfig::default());
    caches.insert("two".to_owned(), CacheConfig::default());
    let manager = CacheManager::with_clock(ManagerConfig { caches }, Arc::new(clock)).unwrap();
    let one = manager.cache("one").unwrap();
    let two = manager.cache("two").unwrap();
    for i in 0..7 {
        one.put(&key("k", i), b"v", &opts()).unwrap();
        one.get(&key("k", i)).unwrap();
    }
    for i in 0..3 {
        two.put(&key("k", i), b"value", &opts()).unwrap();
        two.get(b"missing").unwrap();
        two.remove(&key("k", i), &opts()).unwrap();
    }
    let total = manager.statistics();
    let (a, b) = (one.statistics(), two.statistics());
    assert_eq!(total.hits, 7);
    assert_eq!(total.misses, 3);
    assert_eq!(total.stores, 10);
    assert_eq!(total.remove_hits, 3);
    assert_eq!(total.entries, 7);
    assert_eq!(total.memory_bytes, a.memory_bytes + b.memory_bytes);
    let slowest = a.average_write_time_nanos.max(b.average_write_time_nanos);
    let fastest = a.average_write_time_nanos.min(b.average_write_time_nanos);
    assert!((fastest..=slowest).contains(&total.average_write_time_nanos));
    assert!(total.enabled);
}
