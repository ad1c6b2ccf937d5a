//! The file store's behaviours, one test each: restart with and without a checkpoint, torn
//! tails, fsync failures, compaction under concurrent writes, clear, client flags and
//! structures through restarts and compaction, the directory lock, the offline check and
//! repair of torn and corrupt files, and a model check.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use weft_core::entry::StoredExpiration;
use weft_core::{CacheEntry, Payload};
use weft_store::Store;
use weft_store::StoreError;
use weft_store::disk::{FaultyDisk, RealDisk};
use weft_store::file::{DamageKind, FileStore, FileStoreConfig, check, lock_store, repair, survey};
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

/// Entries with client flags and with each kind of structure, under every kind of
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
        .zip(
            [StoredExpiration::IMMORTAL, lifespan, idle, both]
                .into_iter()
                .cycle(),
        )
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

// Proves client flags and every kind of structure, with their versions and expiration, come
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
    assert_eq!(store.max_version(), 9_014);
}

// Proves client flags and every kind of structure come back from replaying the log after a
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

// Proves an open store keeps its directory to itself: a second open (here in the same
// process; another process is refused the same way) fails naming the holder, and a stop or a
// drop hands the directory on.
#[test]
fn a_store_in_use_refuses_a_second_open_and_names_its_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut held = config(dir.path());
    held.holder = "the first opener".to_owned();
    let store = FileStore::open(held).expect("open");
    put(&store, b"k", b"v", 1);
    match FileStore::open(config(dir.path())) {
        Err(StoreError::Locked {
            dir: locked,
            holder,
        }) => {
            assert_eq!(locked, dir.path().display().to_string());
            assert!(
                holder.starts_with(&format!("pid {}, the first opener", std::process::id())),
                "{holder}"
            );
        }
        other => panic!("a second open must be refused: {other:?}"),
    }
    // Check and repair are refused the same way while the store is open.
    assert!(matches!(
        lock_store(dir.path(), "weft store check"),
        Err(StoreError::Locked { .. })
    ));
    store.stop().expect("stop");
    let second = FileStore::open(config(dir.path())).expect("open after a stop");
    assert_eq!(value(&second, b"k").as_deref(), Some(&b"v"[..]));
    drop(second);
    drop(store);
    let third = FileStore::open(config(dir.path())).expect("open after a drop");
    assert_eq!(value(&third, b"k").as_deref(), Some(&b"v"[..]));
}

// Proves the check finds a torn tail where recovery would (the newest file, at the first
// bad byte, nothing intact after it), and the repair cuts exactly that: the store then
// opens with nothing left to cut and every acknowledged write.
#[test]
fn check_finds_and_repair_cuts_a_torn_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = FaultyDisk::new();
    {
        let (store, _) =
            FileStore::open_on(config(dir.path()), Arc::new(disk.clone())).expect("open");
        for i in 0..50u32 {
            put(&store, format!("k{i}").as_bytes(), b"acknowledged", 1);
        }
        disk.tear_next_write(40);
        let position = store
            .write(segment(b"torn"), &entry(b"torn", b"never acknowledged", 2))
            .expect("submit");
        let _ = store.wait_durable(position);
        assert!(disk.crashed());
    }
    let lock = lock_store(dir.path(), "test").expect("lock");
    let found = check(&lock).expect("check");
    assert!(found.is_damaged(), "{found:?}");
    let [file] = found.files.as_slice() else {
        panic!("one data file: {found:?}");
    };
    assert_eq!(file.records, 50);
    let damage = file.damage.clone().expect("damage");
    assert_eq!(damage.kind, DamageKind::TornTail);
    assert_eq!(damage.records_after, 0);
    assert_eq!(damage.offset + damage.cut_bytes, file.bytes);
    let repaired = repair(&lock).expect("repair");
    assert_eq!(repaired.before, found);
    let after = check(&lock).expect("check again");
    assert!(!after.is_damaged(), "{after:?}");
    assert_eq!(after.files[0].bytes, damage.offset);
    assert_eq!(after.files[0].damage, None);
    drop(lock);
    let (store, recovery) =
        FileStore::open_on(config(dir.path()), Arc::new(RealDisk)).expect("reopen");
    assert_eq!(recovery.truncated_bytes, 0);
    assert_eq!(recovery.entries, 50);
    assert_eq!(value(&store, b"torn"), None);
    assert_eq!(value(&store, b"k49").as_deref(), Some(&b"acknowledged"[..]));
}

// Proves a corrupt record in an older file — which stops the store from opening — is found
// by the check with the intact records after it counted as lost, and that the repair cuts
// it so the store opens again with everything before the damage and every later file.
#[test]
fn check_finds_and_repair_cuts_corruption_in_an_older_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    cfg.file_size_max = 4096;
    cfg.compaction_threshold_percent = 0;
    {
        let store = FileStore::open(cfg.clone()).expect("open");
        for i in 0..200u32 {
            put(
                &store,
                format!("k{i:03}").as_bytes(),
                &[b'v'; 40],
                u64::from(i) + 1,
            );
        }
        // Dropped without a stop, as by a crash: no checkpoint, so the next open reads
        // every record (a checkpoint would let it skip the damaged one until it is loaded).
    }
    let first = dir.path().join("00000001.log");
    let mut bytes = std::fs::read(&first).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    std::fs::write(&first, &bytes).expect("corrupt");
    let opened = FileStore::open(cfg.clone()).map(|_| ());
    assert!(
        matches!(&opened, Err(StoreError::Corrupt { file, .. }) if file == "00000001.log"),
        "{opened:?}"
    );

    let lock = lock_store(dir.path(), "test").expect("lock");
    let found = check(&lock).expect("check");
    assert!(found.is_damaged());
    assert!(found.files.len() > 2, "several files: {found:?}");
    let damage = found.files[0]
        .damage
        .clone()
        .expect("the first file is damaged");
    assert_eq!(damage.kind, DamageKind::Corrupt);
    assert_eq!(damage.reason, "checksum mismatch");
    assert!(damage.offset <= middle as u64 && (middle as u64) < damage.offset + 100);
    let intact_before = found.files[0].records;
    assert!(
        damage.records_after_exact && damage.records_after > 0,
        "records after the damaged one are counted: {damage:?}"
    );
    // The newest file, never cut back by a stop, ends in zero-filled space: not damage.
    assert!(found.files[1..].iter().all(|file| {
        file.damage
            .as_ref()
            .is_none_or(|damage| damage.kind == DamageKind::ZeroFilled)
    }));
    assert_eq!(found.checkpoint_valid, None);
    let repaired = repair(&lock).expect("repair");
    assert!(!repaired.checkpoint_removed);
    drop(lock);

    let store = FileStore::open(cfg).expect("opens after the repair");
    let lost = 1 + damage.records_after;
    assert_eq!(store.size(None).expect("size") as u64, 200 - lost);
    let missing: Vec<u32> = (0..200u32)
        .filter(|i| value(&store, format!("k{i:03}").as_bytes()).is_none())
        .collect();
    assert_eq!(missing.len() as u64, lost);
    // The lost keys are the damaged record's and those after it in the first file.
    let first_lost = u32::try_from(intact_before).expect("count");
    assert_eq!(missing.first(), Some(&first_lost));
    assert!(missing.windows(2).all(|pair| pair[1] == pair[0] + 1));
}

// Proves the survey finds data directories and stores under a directory of per-node data
// directories, and a store given directly.
#[test]
fn survey_finds_data_directories_and_stores() {
    let dir = tempfile::tempdir().expect("tempdir");
    for node in ["a", "b"] {
        let data = dir.path().join(node);
        let _data_lock =
            weft_store::lock::DirLock::acquire(&data, weft_store::lock::DATA_DIR_LOCK_NAME, "")
                .expect("lock");
        for cache in ["default", "sessions"] {
            let store = FileStore::open(config(&data.join(cache))).expect("open");
            put(&store, b"k", b"v", 1);
            store.stop().expect("stop");
        }
    }
    std::fs::create_dir_all(dir.path().join("empty/nothing")).expect("mkdir");
    let found = survey(dir.path()).expect("survey");
    assert_eq!(
        found.data_dirs,
        vec![dir.path().join("a"), dir.path().join("b")]
    );
    assert_eq!(
        found.stores,
        vec![
            dir.path().join("a/default"),
            dir.path().join("a/sessions"),
            dir.path().join("b/default"),
            dir.path().join("b/sessions"),
        ]
    );
    let one = survey(&dir.path().join("a/default")).expect("survey a store");
    assert_eq!(one.stores, vec![dir.path().join("a/default")]);
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
