//! The file store's behaviours, one test each: restart with and without a checkpoint, torn
//! tails, fsync failures, compaction under concurrent writes, clear, client flags and
//! structures through restarts and compaction, and a model check.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use weft_core::entry::StoredExpiration;
use weft_core::{CacheEntry, Payload};
use weft_store::Store;
use weft_store::disk::{FaultyDisk, RealDisk};
use weft_store::file::{FileStore, FileStoreConfig};
use weft_store::testing::{expect_same_entry, now_ms, sample_structures, structure_entry};

const SEGMENTS: u32 = 16;

fn entry(key: &[u8], value: &[u8], version: u64) -> CacheEntry {
    CacheEntry::restored(key, value, StoredExpiration::IMMORTAL, 0, version)
}

fn segment(key: &[u8]) -> u32 {
    weft_core::hash::segment_of(key, SEGMENTS)
}

fn config(dir: &std::path::Path) -> FileStoreConfig {
    FileStoreConfig::new(dir, SEGMENTS)
}

fn put(store: &FileStore, key: &[u8], value: &[u8], version: u64) {
    let position = store
        .write(segment(key), &entry(key, value, version))
        .expect("write");
    store.wait_durable(position).expect("durable");
}

fn value(store: &FileStore, key: &[u8]) -> Option<Vec<u8>> {
    store
        .load(segment(key), key)
        .expect("load")
        .map(|e| e.value().to_vec())
}

#[test]
fn a_clean_restart_uses_the_checkpoint_and_keeps_everything() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = FileStore::open(config(dir.path())).expect("open");
    for i in 0..1000u32 {
        put(
            &store,
            format!("k{i}").as_bytes(),
            &i.to_le_bytes(),
            u64::from(i) + 1,
        );
    }
    put(&store, b"k7", b"seven", 2000);
    let position = store.delete(segment(b"k8"), b"k8").expect("delete");
    store.wait_durable(position).expect("durable");
    store.stop().expect("stop");
    assert!(
        store.write(0, &entry(b"late", b"x", 1)).is_err(),
        "writes after stop fail"
    );
    drop(store);

    let (store, recovery) =
        FileStore::open_on(config(dir.path()), Arc::new(RealDisk)).expect("reopen");
    assert!(recovery.from_checkpoint);
    assert_eq!(recovery.records_replayed, 0);
    assert_eq!(value(&store, b"k7").as_deref(), Some(&b"seven"[..]));
    assert_eq!(value(&store, b"k8"), None);
    assert_eq!(
        value(&store, b"k999").as_deref(),
        Some(&999u32.to_le_bytes()[..])
    );
    assert_eq!(store.size(None).expect("size"), 999);
    assert_eq!(store.max_version(), 2000);
}

#[test]
fn a_crash_without_checkpoint_replays_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = FileStore::open(config(dir.path())).expect("open");
        for i in 0..200u32 {
            put(&store, format!("k{i}").as_bytes(), b"v", u64::from(i) + 1);
        }
        // Dropped without stop(): no checkpoint.
    }
    let (store, recovery) =
        FileStore::open_on(config(dir.path()), Arc::new(RealDisk)).expect("reopen");
    assert!(!recovery.from_checkpoint);
    assert_eq!(recovery.entries, 200);
    assert_eq!(value(&store, b"k199").as_deref(), Some(&b"v"[..]));
    // New writes continue the sequence: an overwrite after restart wins after another one.
    put(&store, b"k1", b"new", 500);
    drop(store);
    let store = FileStore::open(config(dir.path())).expect("reopen again");
    assert_eq!(value(&store, b"k1").as_deref(), Some(&b"new"[..]));
}

#[test]
fn a_torn_tail_is_cut_off_and_everything_acknowledged_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyDisk::new();
    {
        let (store, _) =
            FileStore::open_on(config(dir.path()), Arc::new(disk.clone())).expect("open");
        for i in 0..50u32 {
            put(&store, format!("k{i}").as_bytes(), b"acknowledged", 1);
        }
        disk.tear_next_write(17);
        // This write is torn mid-record and never acknowledged.
        let position = store
            .write(segment(b"torn"), &entry(b"torn", b"never acknowledged", 2))
            .expect("submit");
        let _ = store.wait_durable(position);
        assert!(disk.crashed());
    }
    let (store, recovery) =
        FileStore::open_on(config(dir.path()), Arc::new(RealDisk)).expect("reopen");
    // The torn bytes, up to the last non-zero one: zeros at the end of a torn record look
    // like the zero-filled space after it.
    assert!((1..=17).contains(&recovery.truncated_bytes), "{recovery:?}");
    assert_eq!(value(&store, b"torn"), None);
    for i in 0..50u32 {
        assert_eq!(
            value(&store, format!("k{i}").as_bytes()).as_deref(),
            Some(&b"acknowledged"[..])
        );
    }
    put(&store, b"after", b"ok", 3);
    assert_eq!(value(&store, b"after").as_deref(), Some(&b"ok"[..]));
}

#[test]
fn a_failed_fsync_poisons_the_store_and_fails_its_waiters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyDisk::new();
    let (store, _) = FileStore::open_on(config(dir.path()), Arc::new(disk.clone())).expect("open");
    put(&store, b"before", b"ok", 1);
    disk.fail_syncs();
    let position = store
        .write(segment(b"k"), &entry(b"k", b"v", 2))
        .expect("submit");
    let error = store.wait_durable(position).expect_err("the sync failed");
    assert!(error.to_string().contains("poisoned"), "{error}");
    assert!(store.is_poisoned());
    let refused = store.write(segment(b"k2"), &entry(b"k2", b"v", 3));
    assert!(matches!(refused, Err(weft_store::StoreError::Poisoned(_))));
    // Reads still work.
    assert_eq!(value(&store, b"before").as_deref(), Some(&b"ok"[..]));
}

#[test]
fn compaction_under_concurrent_writes_keeps_every_newest_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.file_size_max = 64 << 10;
    let store = Arc::new(FileStore::open(cfg.clone()).expect("open"));
    let writers: Vec<_> = (0..2u64)
        .map(|thread| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for round in 0..30u64 {
                    for i in 0..100u64 {
                        let key = format!("t{thread}-k{i}");
                        let value = format!("{round}-{}", "x".repeat(100));
                        let position = store
                            .write(
                                segment(key.as_bytes()),
                                &entry(key.as_bytes(), value.as_bytes(), round + 1),
                            )
                            .expect("write");
                        if i % 10 == 0 {
                            store.wait_durable(position).expect("durable");
                        }
                    }
                }
            })
        })
        .collect();
    let mut compacted = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        compacted += store.compact_now().expect("compact");
    }
    for writer in writers {
        writer.join().expect("writer");
    }
    compacted += store.compact_now().expect("compact");
    assert!(compacted > 0, "something was compacted");
    let check = |store: &FileStore| {
        for thread in 0..2 {
            for i in 0..100 {
                let key = format!("t{thread}-k{i}");
                let found = value(store, key.as_bytes()).expect("present");
                assert!(
                    found.starts_with(b"29-"),
                    "{key}: {:?}",
                    String::from_utf8_lossy(&found[..5])
                );
            }
        }
    };
    check(&store);
    let total: u64 = store.file_usage().iter().map(|(_, _, total)| total).sum();
    assert!(
        total < 30 * 200 * 180 / 2,
        "compaction reclaimed space: {total} bytes left"
    );
    drop(store);
    // Crash-restart (no checkpoint) sees the same.
    let store = FileStore::open(cfg).expect("reopen");
    check(&store);
}

#[test]
fn clear_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = FileStore::open(config(dir.path())).expect("open");
        for i in 0..20u32 {
            put(&store, format!("k{i}").as_bytes(), b"v", 1);
        }
        let position = store.clear().expect("clear");
        store.wait_durable(position).expect("durable");
        put(&store, b"after", b"v", 2);
    }
    let store = FileStore::open(config(dir.path())).expect("reopen");
    assert_eq!(store.size(None).expect("size"), 1);
    assert_eq!(value(&store, b"k3"), None);
}

const HOUR_MS: u64 = 3_600_000;

/// Entries with client flags and with each of the four structures, under every kind of
/// expiration (far enough from now that no test depends on timing).
fn flagged_and_structure_entries() -> Vec<CacheEntry> {
    let now = now_ms();
    let lifespan = StoredExpiration::new(now - 1_000, Some(2 * HOUR_MS), None);
    let idle = StoredExpiration::new(now - 5_000, None, Some(HOUR_MS));
    let both = StoredExpiration::new(now - 7_000, Some(3 * HOUR_MS), Some(HOUR_MS));
    let mut entries = vec![
        CacheEntry::restored_payload(
            b"flagged",
            Payload::Bytes(b"memcached value", u32::MAX),
            StoredExpiration::IMMORTAL,
            0,
            9_001,
        ),
        CacheEntry::restored_payload(
            b"flagged-mortal",
            Payload::Bytes(b"", 0x8000_0001),
            both,
            now - 2_000,
            9_002,
        ),
    ];
    for ((structure, expiration), version) in sample_structures()
        .into_iter()
        .zip([StoredExpiration::IMMORTAL, lifespan, idle, both])
        .zip(9_010u64..)
    {
        let key = format!("structure-{}", structure.kind().type_name());
        entries.push(structure_entry(
            key.as_bytes(),
            structure,
            expiration,
            now - 3_000,
            version,
        ));
    }
    entries
}

fn write_durably(store: &FileStore, entries: &[CacheEntry]) {
    let mut position = 0;
    for entry in entries {
        position = store.write(segment(entry.key()), entry).expect("write");
    }
    store.wait_durable(position).expect("durable");
}

/// Loads every entry and publishes every segment: each comes back as written.
fn expect_all(store: &FileStore, entries: &[CacheEntry]) {
    for entry in entries {
        let found = store
            .load(segment(entry.key()), entry.key())
            .expect("load")
            .unwrap_or_else(|| panic!("{:?} is missing", String::from_utf8_lossy(entry.key())));
        expect_same_entry(&found, entry);
    }
    let every: Vec<u32> = (0..SEGMENTS).collect();
    let mut published = 0;
    store
        .publish(&every, &mut |found| {
            if let Some(written) = entries.iter().find(|entry| entry.key() == found.key()) {
                expect_same_entry(&found, written);
                published += 1;
            }
        })
        .expect("publish");
    assert_eq!(published, entries.len());
}

// Proves client flags and all four structures, with their versions and expiration, come
// back from the checkpoint of a clean restart.
#[test]
fn flags_and_structures_survive_a_clean_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let entries = flagged_and_structure_entries();
    {
        let store = FileStore::open(config(dir.path())).expect("open");
        write_durably(&store, &entries);
        expect_all(&store, &entries);
        store.stop().expect("stop");
    }
    let (store, recovery) =
        FileStore::open_on(config(dir.path()), Arc::new(RealDisk)).expect("reopen");
    assert!(recovery.from_checkpoint, "{recovery:?}");
    assert_eq!(recovery.entries, entries.len() as u64);
    expect_all(&store, &entries);
    assert_eq!(store.max_version(), 9_013);
}

// Proves client flags and all four structures come back from replaying the log after a
// crash (no checkpoint), and a later plain write of such a key replaces it for good.
#[test]
fn flags_and_structures_survive_a_crash_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut entries = flagged_and_structure_entries();
    {
        let store = FileStore::open(config(dir.path())).expect("open");
        write_durably(&store, &entries);
        // Dropped without stop(): no checkpoint.
    }
    let (store, recovery) =
        FileStore::open_on(config(dir.path()), Arc::new(RealDisk)).expect("reopen");
    assert!(!recovery.from_checkpoint, "{recovery:?}");
    assert_eq!(recovery.records_replayed, entries.len() as u64);
    expect_all(&store, &entries);
    // Plain bytes over a structure and over a flagged value: neither comes back.
    let plain = [
        entry(b"structure-list", b"plain", 9_100),
        entry(b"flagged", b"plain", 9_101),
    ];
    write_durably(&store, &plain);
    drop(store);
    let store = FileStore::open(config(dir.path())).expect("reopen again");
    entries.retain(|e| e.key() != b"structure-list" && e.key() != b"flagged");
    entries.extend(plain);
    expect_all(&store, &entries);
}

// Proves compaction copies flagged and structure records byte for byte: after the file
// that held them is compacted away, they load the same, and again after a crash restart.
#[test]
fn compaction_keeps_flags_and_structures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.file_size_max = 64 << 10;
    let entries = flagged_and_structure_entries();
    {
        let store = FileStore::open(cfg.clone()).expect("open");
        write_durably(&store, &entries);
        let first_file = store
            .file_usage()
            .iter()
            .map(|(id, _, _)| *id)
            .min()
            .expect("a data file");
        // Overwritten filler makes the first file mostly dead, and seals it.
        for round in 0..20u64 {
            let filler: Vec<CacheEntry> = (0..40u64)
                .map(|i| {
                    let value = format!("{round}-{}", "x".repeat(500));
                    entry(
                        format!("filler-{i}").as_bytes(),
                        value.as_bytes(),
                        round + 1,
                    )
                })
                .collect();
            write_durably(&store, &filler);
        }
        // The background compactor may have been first; either way the file must be gone.
        store.compact_now().expect("compact");
        assert!(
            store
                .file_usage()
                .iter()
                .all(|(id, _, _)| *id != first_file),
            "the file holding the entries was compacted away: {:?}",
            store.file_usage()
        );
        expect_all(&store, &entries);
        // Dropped without stop(): the copies must be found by replaying the log.
    }
    let (store, recovery) = FileStore::open_on(cfg, Arc::new(RealDisk)).expect("reopen");
    assert!(!recovery.from_checkpoint, "{recovery:?}");
    expect_all(&store, &entries);
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Delete(u8),
    Restart { clean: bool },
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..24, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => (0u8..24).prop_map(Op::Delete),
        1 => any::<bool>().prop_map(|clean| Op::Restart { clean }),
        1 => Just(Op::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Random writes, deletes, compactions and clean or crash restarts agree with a map.
    #[test]
    fn the_store_agrees_with_a_map(ops in proptest::collection::vec(op(), 1..80)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cfg = config(dir.path());
        cfg.file_size_max = 512;
        cfg.compaction_threshold_percent = 90;
        let mut store = FileStore::open(cfg.clone()).expect("open");
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut version = 0;
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    version += 1;
                    let key = vec![b'k', k];
                    let value = vec![v; usize::from(v % 40)];
                    put(&store, &key, &value, version);
                    model.insert(key, value);
                }
                Op::Delete(k) => {
                    let key = vec![b'k', k];
                    let position = store.delete(segment(&key), &key).expect("delete");
                    store.wait_durable(position).expect("durable");
                    model.remove(&key);
                }
                Op::Restart { clean } => {
                    if clean {
                        store.stop().expect("stop");
                    }
                    drop(store);
                    store = FileStore::open(cfg.clone()).expect("reopen");
                }
                Op::Compact => {
                    store.compact_now().expect("compact");
                }
            }
            for k in 0..24u8 {
                let key = vec![b'k', k];
                prop_assert_eq!(value(&store, &key), model.get(&key).cloned(), "key {}", k);
            }
            prop_assert_eq!(store.size(None).expect("size"), model.len());
        }
    }
}
