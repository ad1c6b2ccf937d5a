//! Every `Cache` operation: results, stored state, metadata and versions.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{T0, default_cache, key};
use weft_core::structure::ListValue;
use weft_core::{
    CacheConfig, CacheError, CacheManager, Clock, Compute, Expiry, Lifetime, ManagerConfig,
    NewValue, Structure, StructureCell, VersionedOutcome, WriteOptions,
};

fn opts() -> WriteOptions {
    WriteOptions::default()
}

fn value_of(cache: &weft_core::Cache, k: &[u8]) -> Option<Vec<u8>> {
    cache.get(k).unwrap().map(|v| v.to_vec())
}

fn version_of(cache: &weft_core::Cache, k: &[u8]) -> u64 {
    cache.get_metadata(k).unwrap().unwrap().version
}

// Proves get returns what put stored, None for absent keys, and large values intact.
#[test]
fn get_returns_stored_value() {
    let (_m, cache, _clock) = default_cache();
    assert_eq!(cache.get(b"missing").unwrap(), None);
    cache.put(b"k", b"v", &opts()).unwrap();
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"v"[..]));
    let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    cache.put(b"big", &big, &opts()).unwrap();
    assert_eq!(value_of(&cache, b"big"), Some(big.clone()));
    let entry = cache.get_entry(b"big").unwrap().unwrap();
    assert_eq!(entry.key(), b"big");
    assert_eq!(entry.value(), &big[..]);
    // Empty keys and values are legal.
    cache.put(b"", b"", &opts()).unwrap();
    assert_eq!(value_of(&cache, b"").as_deref(), Some(&b""[..]));
}

// Proves get_entry/get_metadata report version, created, last used, lifespan and max idle.
#[test]
fn metadata_reports_every_field() {
    let (_m, cache, clock) = default_cache();
    cache.put(b"immortal", b"v", &opts()).unwrap();
    let meta = cache.get_metadata(b"immortal").unwrap().unwrap();
    assert!(meta.version > 0);
    assert_eq!(meta.created_ms, None);
    assert_eq!(meta.last_used_ms, None);
    assert_eq!(meta.lifespan_ms, None);
    assert_eq!(meta.max_idle_ms, None);
    assert_eq!(meta.expires_at_ms(), None);

    let options = opts()
        .lifespan(Duration::from_secs(10))
        .max_idle(Duration::from_secs(3));
    cache.put(b"mortal", b"v", &options).unwrap();
    let entry = cache.get_entry(b"mortal").unwrap().unwrap();
    let meta = entry.metadata();
    assert!(meta.version > version_of(&cache, b"immortal"));
    assert_eq!(meta.created_ms, Some(T0));
    assert_eq!(meta.last_used_ms, Some(T0));
    assert_eq!(meta.lifespan_ms, Some(10_000));
    assert_eq!(meta.max_idle_ms, Some(3_000));
    assert_eq!(meta.expires_at_ms(), Some(T0 + 3_000));

    clock.advance_ms(2_000);
    let meta = cache.get_metadata(b"mortal").unwrap().unwrap();
    assert_eq!(
        meta.created_ms,
        Some(T0),
        "a read does not change the creation time"
    );
    assert_eq!(
        meta.last_used_ms,
        Some(T0 + 2_000),
        "a read moves last used"
    );
    assert_eq!(meta.expires_at_ms(), Some(T0 + 5_000));

    let lifespan_only = opts().lifespan(Duration::from_millis(1_500));
    cache.put(b"lifespan", b"v", &lifespan_only).unwrap();
    let meta = cache.get_metadata(b"lifespan").unwrap().unwrap();
    assert_eq!(meta.created_ms, Some(T0 + 2_000));
    assert_eq!(meta.last_used_ms, None);
    assert_eq!(meta.lifespan_ms, Some(1_500));
    assert_eq!(meta.max_idle_ms, None);
    assert_eq!(meta.expires_at_ms(), Some(T0 + 3_500));
}

// Proves put returns the previous entry, and None with ignore_return_values (still storing).
#[test]
fn put_returns_previous() {
    let (_m, cache, _clock) = default_cache();
    assert!(cache.put(b"k", b"one", &opts()).unwrap().is_none());
    let v1 = version_of(&cache, b"k");
    let previous = cache.put(b"k", b"two", &opts()).unwrap().unwrap();
    assert_eq!(previous.value(), b"one");
    assert_eq!(previous.version(), v1);
    let ignored = cache
        .put(b"k", b"three", &opts().ignore_return_values())
        .unwrap();
    assert!(ignored.is_none());
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"three"[..]));
}

// Proves put_if_absent stores only for absent keys and returns the existing entry otherwise.
#[test]
fn put_if_absent_semantics() {
    let (_m, cache, _clock) = default_cache();
    assert!(
        cache
            .put_if_absent(b"k", b"first", &opts())
            .unwrap()
            .is_none()
    );
    let v1 = version_of(&cache, b"k");
    let existing = cache
        .put_if_absent(b"k", b"second", &opts())
        .unwrap()
        .unwrap();
    assert_eq!(existing.value(), b"first");
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"first"[..]));
    assert_eq!(
        version_of(&cache, b"k"),
        v1,
        "a refused write bumps no version"
    );
    // The existing entry is reported even when return values are ignored.
    let existing = cache
        .put_if_absent(b"k", b"third", &opts().ignore_return_values())
        .unwrap();
    assert_eq!(existing.unwrap().value(), b"first");
}

// Proves replace stores only for present keys and returns the replaced entry.
#[test]
fn replace_semantics() {
    let (_m, cache, _clock) = default_cache();
    assert!(cache.replace(b"k", b"x", &opts()).unwrap().is_none());
    assert!(!cache.contains(b"k").unwrap(), "replace must not create");
    cache.put(b"k", b"one", &opts()).unwrap();
    let v1 = version_of(&cache, b"k");
    let replaced = cache.replace(b"k", b"two", &opts()).unwrap().unwrap();
    assert_eq!(replaced.value(), b"one");
    assert_eq!(replaced.version(), v1);
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"two"[..]));
    assert!(version_of(&cache, b"k") > v1);
}

// Proves replace_if_version applies on a matching version only, and reports mismatch/absence.
#[test]
fn replace_if_version_semantics() {
    let (_m, cache, _clock) = default_cache();
    assert!(matches!(
        cache.replace_if_version(b"k", 1, b"x", &opts()).unwrap(),
        VersionedOutcome::Absent
    ));
    assert!(!cache.contains(b"k").unwrap());
    cache.put(b"k", b"one", &opts()).unwrap();
    let v1 = version_of(&cache, b"k");

    match cache
        .replace_if_version(b"k", v1 + 1, b"bad", &opts())
        .unwrap()
    {
        VersionedOutcome::Mismatch(current) => {
            assert_eq!(current.version(), v1);
            assert_eq!(current.value(), b"one");
        }
        other => panic!("expected mismatch, got {other:?}"),
    }
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"one"[..]));
    assert_eq!(version_of(&cache, b"k"), v1);

    match cache.replace_if_version(b"k", v1, b"two", &opts()).unwrap() {
        VersionedOutcome::Done(previous) => {
            assert_eq!(previous.version(), v1);
            assert_eq!(previous.value(), b"one");
        }
        other => panic!("expected done, got {other:?}"),
    }
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"two"[..]));
    let v2 = version_of(&cache, b"k");
    assert!(v2 > v1);
    // The old version no longer matches.
    assert!(
        !cache
            .replace_if_version(b"k", v1, b"three", &opts())
            .unwrap()
            .is_done()
    );
}

// Proves remove_if_version removes on a matching version only, and reports mismatch/absence.
#[test]
fn remove_if_version_semantics() {
    let (_m, cache, _clock) = default_cache();
    assert!(matches!(
        cache.remove_if_version(b"k", 1, &opts()).unwrap(),
        VersionedOutcome::Absent
    ));
    cache.put(b"k", b"one", &opts()).unwrap();
    let v1 = version_of(&cache, b"k");
    match cache.remove_if_version(b"k", v1 + 7, &opts()).unwrap() {
        VersionedOutcome::Mismatch(current) => assert_eq!(current.version(), v1),
        other => panic!("expected mismatch, got {other:?}"),
    }
    assert!(cache.contains(b"k").unwrap());
    match cache.remove_if_version(b"k", v1, &opts()).unwrap() {
        VersionedOutcome::Done(removed) => assert_eq!(removed.value(), b"one"),
        other => panic!("expected done, got {other:?}"),
    }
    assert!(!cache.contains(b"k").unwrap());
    assert!(matches!(
        cache.remove_if_version(b"k", v1, &opts()).unwrap(),
        VersionedOutcome::Absent
    ));
}

// Proves remove returns the removed entry (None with ignore_return_values) and delete a bool.
#[test]
fn remove_and_delete() {
    let (_m, cache, _clock) = default_cache();
    assert!(cache.remove(b"k", &opts()).unwrap().is_none());
    cache.put(b"k", b"v", &opts()).unwrap();
    assert_eq!(cache.remove(b"k", &opts()).unwrap().unwrap().value(), b"v");
    assert!(!cache.contains(b"k").unwrap());
    assert_eq!(cache.size(), 0);

    cache.put(b"k", b"v", &opts()).unwrap();
    assert!(
        cache
            .remove(b"k", &opts().ignore_return_values())
            .unwrap()
            .is_none()
    );
    assert!(
        !cache.contains(b"k").unwrap(),
        "ignored return still removes"
    );

    cache.put(b"k", b"v", &opts()).unwrap();
    assert!(cache.delete(b"k").unwrap());
    assert!(!cache.delete(b"k").unwrap());
}

// Proves contains tracks presence through put and remove.
#[test]
fn contains_tracks_presence() {
    let (_m, cache, _clock) = default_cache();
    assert!(!cache.contains(b"k").unwrap());
    cache.put(b"k", b"v", &opts()).unwrap();
    assert!(cache.contains(b"k").unwrap());
    assert!(!cache.contains(b"other").unwrap());
    cache.remove(b"k", &opts()).unwrap();
    assert!(!cache.contains(b"k").unwrap());
}

// Proves compute's Keep leaves the key untouched, Remove removes it and Put stores, each
// returning the function's result.
#[test]
fn compute_keep_remove_put() {
    let (_m, cache, _clock) = default_cache();
    // Put on an absent key sees None.
    let r = cache
        .compute(b"k", &opts(), |existing| {
            assert!(existing.is_none());
            Compute::Put(b"one".to_vec(), Expiry::default(), "stored")
        })
        .unwrap();
    assert_eq!(r, "stored");
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"one"[..]));
    let v1 = version_of(&cache, b"k");

    // Keep sees the current entry and changes nothing.
    let seen = cache
        .compute(b"k", &opts(), |existing| {
            Compute::Keep(existing.map(|e| e.value().to_vec()))
        })
        .unwrap();
    assert_eq!(seen.as_deref(), Some(&b"one"[..]));
    assert_eq!(version_of(&cache, b"k"), v1);

    // Put over an existing value.
    cache
        .compute(b"k", &opts(), |existing| {
            let mut v = existing.unwrap().value().to_vec();
            v.extend_from_slice(b"+two");
            Compute::Put(v, Expiry::default(), ())
        })
        .unwrap();
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"one+two"[..]));
    assert!(version_of(&cache, b"k") > v1);

    // Remove.
    let r = cache
        .compute(b"k", &opts(), |_| Compute::Remove(42))
        .unwrap();
    assert_eq!(r, 42);
    assert!(!cache.contains(b"k").unwrap());

    // Keep on an absent key stores nothing.
    cache.compute(b"k", &opts(), |_| Compute::Keep(())).unwrap();
    assert!(!cache.contains(b"k").unwrap());
    assert_eq!(cache.size(), 0);
}

// Proves compute with Lifetime::Keep keeps the overwritten entry's absolute deadline.
#[test]
fn compute_keep_lifetime_keeps_deadline() {
    let (_m, cache, clock) = default_cache();
    cache
        .put(b"k", b"one", &opts().lifespan(Duration::from_millis(1_000)))
        .unwrap();
    clock.advance_ms(400);
    cache
        .compute(b"k", &opts(), |_| {
            Compute::Put(b"two".to_vec(), Expiry::KEEP, ())
        })
        .unwrap();
    let meta = cache.get_metadata(b"k").unwrap().unwrap();
    assert_eq!(meta.expires_at_ms(), Some(T0 + 1_000));
    clock.set_ms(T0 + 1_000);
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"two"[..]));
    clock.advance_ms(1);
    assert!(
        cache.get(b"k").unwrap().is_none(),
        "the original deadline still applies"
    );

    // Keep on an absent key falls back to the cache default (here: immortal).
    cache
        .compute(b"fresh", &opts(), |_| {
            Compute::Put(b"v".to_vec(), Expiry::KEEP, ())
        })
        .unwrap();
    assert_eq!(
        cache
            .get_metadata(b"fresh")
            .unwrap()
            .unwrap()
            .expires_at_ms(),
        None
    );
}

// Proves put/replace/replace_if_version with Lifetime::Keep keep the absolute deadline too
// (Redis' SET KEEPTTL), and that Keep of an immortal entry stays immortal.
#[test]
fn writes_with_keep_lifetime_keep_deadline() {
    let (_m, cache, clock) = default_cache();
    let keep = opts().expiry(Expiry::KEEP);
    cache
        .put(b"k", b"one", &opts().lifespan(Duration::from_millis(1_000)))
        .unwrap();
    clock.advance_ms(300);
    cache.put(b"k", b"two", &keep).unwrap();
    assert_eq!(
        cache.get_metadata(b"k").unwrap().unwrap().expires_at_ms(),
        Some(T0 + 1_000),
        "put with Keep"
    );
    clock.advance_ms(300);
    cache.replace(b"k", b"three", &keep).unwrap();
    assert_eq!(
        cache.get_metadata(b"k").unwrap().unwrap().expires_at_ms(),
        Some(T0 + 1_000),
        "replace with Keep"
    );
    let version = version_of(&cache, b"k");
    assert!(
        cache
            .replace_if_version(b"k", version, b"four", &keep)
            .unwrap()
            .is_done()
    );
    assert_eq!(
        cache.get_metadata(b"k").unwrap().unwrap().expires_at_ms(),
        Some(T0 + 1_000),
        "replace_if_version with Keep"
    );
    clock.set_ms(T0 + 1_001);
    assert!(cache.get(b"k").unwrap().is_none());

    // Keep of an immortal entry: still immortal, even with only the lifespan kept.
    cache.put(b"i", b"one", &opts()).unwrap();
    let keep_lifespan = opts().expiry(Expiry {
        lifespan: Lifetime::Keep,
        max_idle: Lifetime::Never,
    });
    cache.put(b"i", b"two", &keep_lifespan).unwrap();
    assert_eq!(
        cache.get_metadata(b"i").unwrap().unwrap().expires_at_ms(),
        None
    );
}

// Proves merge stores the value when absent, combines when present, removes on None, and
// returns the resulting entry.
#[test]
fn merge_semantics() {
    let (_m, cache, _clock) = default_cache();
    let concat = |old: &[u8], new: &[u8]| Some([old, b",", new].concat());
    let merged = cache.merge(b"k", b"a", &opts(), concat).unwrap().unwrap();
    assert_eq!(merged.value(), b"a");
    let merged = cache.merge(b"k", b"b", &opts(), concat).unwrap().unwrap();
    assert_eq!(merged.value(), b"a,b");
    assert_eq!(merged.version(), version_of(&cache, b"k"));
    assert_eq!(value_of(&cache, b"k").as_deref(), Some(&b"a,b"[..]));
    let gone = cache.merge(b"k", b"c", &opts(), |_, _| None).unwrap();
    assert!(gone.is_none());
    assert!(!cache.contains(b"k").unwrap());
}

// Proves put_all stores every pair and get_all returns the present ones, in key order given.
#[test]
fn put_all_and_get_all() {
    let (_m, cache, _clock) = default_cache();
    let keys: Vec<Vec<u8>> = (0..50).map(|i| key("k", i)).collect();
    let values: Vec<Vec<u8>> = (0..50).map(|i| key("v", i)).collect();
    cache
        .put_all(
            keys.iter()
                .zip(&values)
                .map(|(k, v)| (k.as_slice(), v.as_slice())),
            &opts(),
        )
        .unwrap();
    assert_eq!(cache.size(), 50);
    let wanted: Vec<Vec<u8>> = vec![key("k", 3), b"absent".to_vec(), key("k", 49), key("k", 0)];
    let found = cache.get_all(wanted.iter().map(Vec::as_slice)).unwrap();
    let found: Vec<(Vec<u8>, Vec<u8>)> = found
        .iter()
        .map(|e| (e.key().to_vec(), e.value().to_vec()))
        .collect();
    assert_eq!(
        found,
        vec![
            (key("k", 3), key("v", 3)),
            (key("k", 49), key("v", 49)),
            (key("k", 0), key("v", 0)),
        ]
    );
}

// Proves clear empties the cache and size counts entries.
#[test]
fn clear_and_size() {
    let (_m, cache, _clock) = default_cache();
    assert_eq!(cache.size(), 0);
    for i in 0..1_000 {
        cache.put(&key("k", i), b"v", &opts()).unwrap();
    }
    assert_eq!(cache.size(), 1_000);
    cache.put(&key("k", 5), b"again", &opts()).unwrap();
    assert_eq!(cache.size(), 1_000, "overwrites do not grow the cache");
    cache.remove(&key("k", 5), &opts()).unwrap();
    assert_eq!(cache.size(), 999);
    cache.clear().unwrap();
    assert_eq!(cache.size(), 0);
    assert_eq!(cache.memory_bytes(), 0);
    assert!(cache.get(&key("k", 1)).unwrap().is_none());
    assert_eq!(cache.iter().count(), 0);
    cache.check_invariants();
    // Usable after clear.
    cache.put(b"after", b"v", &opts()).unwrap();
    assert_eq!(cache.size(), 1);
}

// Proves every kind of write gives the key a strictly greater version, unique across keys.
#[test]
fn every_write_bumps_the_version() {
    let (_m, cache, _clock) = default_cache();
    let mut versions = vec![];
    let mut record = |cache: &weft_core::Cache| versions.push(version_of(cache, b"k"));
    cache.put(b"k", b"1", &opts()).unwrap();
    record(&cache);
    cache.put(b"k", b"1", &opts()).unwrap(); // same value: still a write
    record(&cache);
    cache.replace(b"k", b"2", &opts()).unwrap();
    record(&cache);
    let v = version_of(&cache, b"k");
    cache.replace_if_version(b"k", v, b"3", &opts()).unwrap();
    record(&cache);
    cache
        .compute(b"k", &opts(), |_| {
            Compute::Put(b"4".to_vec(), Expiry::default(), ())
        })
        .unwrap();
    record(&cache);
    cache
        .merge(b"k", b"5", &opts(), |a, b| Some([a, b].concat()))
        .unwrap();
    record(&cache);
    cache.remove(b"k", &opts()).unwrap();
    cache.put_if_absent(b"k", b"6", &opts()).unwrap();
    record(&cache);
    cache.put_all([(&b"k"[..], &b"7"[..])], &opts()).unwrap();
    record(&cache);
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "versions not strictly increasing: {versions:?}"
    );

    // Unique across keys.
    let mut all = std::collections::HashSet::new();
    for i in 0..500 {
        cache.put(&key("u", i), b"v", &opts()).unwrap();
        assert!(all.insert(version_of(&cache, &key("u", i))));
    }
}

// Proves concurrent compute increments from several threads lose no update.
#[test]
fn concurrent_compute_loses_no_update() {
    let (_m, cache, _clock) = default_cache();
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 2_000;
    let keys: Vec<Vec<u8>> = (0..3).map(|i| key("counter", i)).collect();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let cache = cache.clone();
            let keys = &keys;
            scope.spawn(move || {
                for i in 0..PER_THREAD {
                    let k = &keys[(i as usize + t) % keys.len()];
                    cache
                        .compute(k, &WriteOptions::default(), |existing| {
                            let n = existing
                                .map_or(0, |e| u64::from_le_bytes(e.value().try_into().unwrap()));
                            Compute::Put((n + 1).to_le_bytes().to_vec(), Expiry::default(), ())
                        })
                        .unwrap();
                }
            });
        }
    });
    let total: u64 = keys
        .iter()
        .map(|k| u64::from_le_bytes(value_of(&cache, k).unwrap().try_into().unwrap()))
        .sum();
    assert_eq!(total, THREADS as u64 * PER_THREAD);
    cache.check_invariants();
}

// Proves concurrent puts of distinct keys from several threads all land.
#[test]
fn concurrent_puts_all_land() {
    let (_m, cache, _clock) = default_cache();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let cache = cache.clone();
            scope.spawn(move || {
                for i in 0..2_000 {
                    cache
                        .put(&key(&format!("t{t}"), i), &i.to_le_bytes(), &opts())
                        .unwrap();
                }
            });
        }
    });
    assert_eq!(cache.size(), 8_000);
    assert_eq!(cache.iter().count(), 8_000);
    cache.check_invariants();
}

// Proves a removed cache refuses every operation with CacheError::Removed.
#[test]
fn removed_cache_refuses_operations() {
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    let cache = manager
        .create_cache("doomed", CacheConfig::default())
        .unwrap();
    cache.put(b"k", b"v", &opts()).unwrap();
    assert!(manager.remove_cache("doomed"));
    assert!(!manager.remove_cache("doomed"));
    assert!(manager.cache("doomed").is_none());
    let removed = |r: Result<(), CacheError>| {
        assert!(matches!(r, Err(CacheError::Removed { cache }) if cache == "doomed"));
    };
    removed(cache.get(b"k").map(drop));
    removed(cache.put(b"k", b"v", &opts()).map(drop));
    removed(cache.remove(b"k", &opts()).map(drop));
    removed(cache.contains(b"k").map(drop));
    removed(cache.compute(b"k", &opts(), |_| Compute::Keep(())));
    removed(cache.clear());
    assert_eq!(cache.size(), 0, "a removed cache's data is dropped");
}

// Proves client flags are stored by every plain write, kept by PutValue and Reexpire, and
// reset by a write that does not set them.
#[test]
fn user_flags_are_stored_and_kept() {
    let (_m, cache, clock) = default_cache();
    let flagged = opts().user_flags(0xDEAD_BEEF);
    cache.put(b"k", b"v", &flagged).unwrap();
    assert_eq!(
        cache.get_entry(b"k").unwrap().unwrap().user_flags(),
        0xDEAD_BEEF
    );
    cache
        .compute(b"k", &opts(), |_| {
            Compute::Reexpire(
                Expiry {
                    lifespan: Lifetime::millis(500),
                    ..Expiry::KEEP
                },
                (),
            )
        })
        .unwrap();
    let entry = cache.get_entry(b"k").unwrap().unwrap();
    assert_eq!(
        (entry.user_flags(), entry.value()),
        (0xDEAD_BEEF, &b"v"[..])
    );
    assert_eq!(entry.metadata().expires_at_ms(), Some(clock.now_ms() + 500));
    cache
        .compute(b"k", &opts(), |existing| {
            let value = NewValue::Bytes {
                value: b"w".to_vec(),
                user_flags: existing.unwrap().user_flags(),
                edited: false,
            };
            Compute::PutValue(value, Expiry::KEEP, ())
        })
        .unwrap();
    assert_eq!(
        cache.get_entry(b"k").unwrap().unwrap().user_flags(),
        0xDEAD_BEEF
    );
    cache.put(b"k", b"x", &opts()).unwrap();
    assert_eq!(cache.get_entry(b"k").unwrap().unwrap().user_flags(), 0);
    assert!(
        cache
            .put_if_absent(b"n", b"1", &opts().user_flags(7))
            .unwrap()
            .is_none()
    );
    assert_eq!(cache.get_entry(b"n").unwrap().unwrap().user_flags(), 7);
    // Reexpire on an absent key stores nothing.
    cache
        .compute(b"absent", &opts(), |_| Compute::Reexpire(Expiry::NEVER, ()))
        .unwrap();
    assert!(!cache.contains(b"absent").unwrap());
    cache.check_invariants();
}

// Proves a structure entry is changed in place under compute, charged to memory by its
// heap bytes, gets a new version per write, and keeps the cell alive exactly as long as
// an entry refers to it.
#[test]
fn structures_change_in_place() {
    let (_m, cache, _clock) = default_cache();
    let push = |item: &'static [u8]| {
        cache
            .compute(b"list", &opts(), |existing| {
                let cell = match existing.and_then(|e| e.structure()) {
                    Some(cell) => std::sync::Arc::clone(cell),
                    None => StructureCell::new(Structure::List(ListValue::default())),
                };
                if let Structure::List(list) = &mut *cell.lock() {
                    list.push_back(bytes::Bytes::from_static(item));
                }
                Compute::PutValue(NewValue::Structure(cell), Expiry::KEEP, ())
            })
            .unwrap();
    };
    push(b"a");
    let first = cache.get_entry(b"list").unwrap().unwrap();
    let before = cache.memory_bytes();
    push(b"bb");
    let second = cache.get_entry(b"list").unwrap().unwrap();
    assert!(second.version() > first.version());
    assert!(std::sync::Arc::ptr_eq(
        first.structure().unwrap(),
        second.structure().unwrap()
    ));
    assert!(second.value().is_empty());
    assert!(
        cache.memory_bytes() > before,
        "the bigger list is charged more"
    );
    assert_eq!(second.structure().unwrap().lock().len(), 2);
    let cell = std::sync::Arc::clone(second.structure().unwrap());
    drop((first, second));
    assert_eq!(
        std::sync::Arc::strong_count(&cell),
        2,
        "the stored entry holds it"
    );
    cache.remove(b"list", &opts()).unwrap();
    assert_eq!(std::sync::Arc::strong_count(&cell), 1);
    cache.check_invariants();
    assert_eq!(cache.memory_bytes(), 0);
}
