//! Write-behind under a store slower than the write rate: writers are held back once the
//! queue is full (it never grows past its bound), reads see queued writes, changes to one key
//! are coalesced, and a shutdown drains everything into the store.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use weft_core::CacheEntry;
use weft_core::config::WriteBehindConfig;
use weft_core::entry::StoredExpiration;
use weft_core::persistence::{BoxFuture, Persistence, StoreChange};
use weft_store::file::{FileStore, FileStoreConfig};
use weft_store::{Modification, PersistenceManager, Store, StoreError};

const SEGMENTS: u32 = 16;
const BATCH_PAUSE: Duration = Duration::from_millis(5);

/// A file store that takes `BATCH_PAUSE` per batch, and counts what it was given.
#[derive(Debug)]
struct SlowStore {
    inner: FileStore,
    batches: AtomicUsize,
    changes: AtomicUsize,
}

impl Store for SlowStore {
    fn characteristics(&self) -> weft_store::Characteristics {
        self.inner.characteristics()
    }
    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, StoreError> {
        self.inner.load(segment, key)
    }
    fn write(&self, segment: u32, entry: &CacheEntry) -> Result<u64, StoreError> {
        self.write_batch(&[Modification::Write {
            segment,
            entry: entry.clone(),
        }])
    }
    fn delete(&self, segment: u32, key: &[u8]) -> Result<u64, StoreError> {
        self.inner.delete(segment, key)
    }
    fn write_batch(&self, batch: &[Modification]) -> Result<u64, StoreError> {
        std::thread::sleep(BATCH_PAUSE);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.changes.fetch_add(batch.len(), Ordering::Relaxed);
        let mut position = self.inner.position();
        for change in batch {
            position = match change {
                Modification::Write { segment, entry } => self.inner.write(*segment, entry)?,
                Modification::Delete { segment, key } => self.inner.delete(*segment, key)?,
            };
        }
        Ok(position)
    }
    fn position(&self) -> u64 {
        self.inner.position()
    }
    fn wait_durable(&self, position: u64) -> Result<(), StoreError> {
        self.inner.wait_durable(position)
    }
    fn wait_durable_async(&self, position: u64) -> BoxFuture<Result<(), StoreError>> {
        self.inner.wait_durable_async(position)
    }
    fn publish(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), StoreError> {
        self.inner.publish(segments, visit)
    }
    fn remove_segments(&self, segments: &[u32]) -> Result<u64, StoreError> {
        self.inner.remove_segments(segments)
    }
    fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        self.inner.purge_expired(now_ms)
    }
    fn size(&self, segments: Option<&[u32]>) -> Result<usize, StoreError> {
        self.inner.size(segments)
    }
    fn clear(&self) -> Result<u64, StoreError> {
        self.inner.clear()
    }
    fn max_version(&self) -> u64 {
        self.inner.max_version()
    }
    fn stop(&self) -> Result<(), StoreError> {
        self.inner.stop()
    }
    fn destroy(&self) {
        self.inner.destroy();
    }
}

fn entry(key: &str, value: &str) -> CacheEntry {
    CacheEntry::restored(
        key.as_bytes(),
        value.as_bytes(),
        StoredExpiration::IMMORTAL,
        0,
        1,
    )
}

fn segment(key: &str) -> u32 {
    weft_core::hash::segment_of(key.as_bytes(), SEGMENTS)
}

#[test]
fn a_slow_store_holds_writers_back_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let slow = Arc::new(SlowStore {
        inner: FileStore::open(FileStoreConfig::new(dir.path(), SEGMENTS)).expect("open"),
        batches: AtomicUsize::new(0),
        changes: AtomicUsize::new(0),
    });
    let config = WriteBehindConfig {
        modification_queue_size: 40,
        batch_size: 10,
    };
    let manager = PersistenceManager::new(
        "slow",
        vec![Arc::clone(&slow) as Arc<dyn Store>],
        false,
        true,
        Some(config),
    );
    manager.set_segment_count(SEGMENTS);
    let started = Instant::now();
    let mut backlog_max = 0;
    for i in 0..400 {
        let key = format!("k{i}");
        manager.admit_write().expect("admitted");
        manager.record(segment(&key), StoreChange::Put(&entry(&key, "first")));
        backlog_max = backlog_max.max(manager.stats().write_behind_backlog);
        // A queued write is what a load sees, before the store has it.
        let loaded = manager.load(segment(&key), key.as_bytes()).expect("load");
        assert_eq!(loaded.map(|e| e.value().to_vec()), Some(b"first".to_vec()));
    }
    // 400 changes through a queue of 40 drained 10 per 5 ms take at least 36 batches.
    assert!(
        started.elapsed() >= BATCH_PAUSE * 30,
        "writers were held back: {:?}",
        started.elapsed()
    );
    assert!(
        backlog_max <= 40 + 10,
        "the queue stays near its bound: {backlog_max}"
    );
    // Coalescing: a key changed many times while queued is written once.
    for round in 0..50 {
        manager.admit_write().expect("admitted");
        manager.record(
            segment("hot"),
            StoreChange::Put(&entry("hot", &format!("v{round}"))),
        );
    }
    manager.admit_write().expect("admitted");
    manager.record(segment("k7"), StoreChange::Remove(b"k7"));
    manager
        .shutdown(&mut std::iter::empty())
        .expect("shutdown drains");
    assert_eq!(manager.stats().write_behind_backlog, 0);
    assert!(
        slow.changes.load(Ordering::Relaxed) < 400 + 50 + 1,
        "changes to one key were coalesced"
    );
    drop(manager);
    drop(slow);
    let store = FileStore::open(FileStoreConfig::new(dir.path(), SEGMENTS)).expect("reopen");
    assert_eq!(store.size(None).expect("size"), 400);
    let value = |key: &str| {
        store
            .load(segment(key), key.as_bytes())
            .expect("load")
            .map(|e| e.value().to_vec())
    };
    assert_eq!(value("hot"), Some(b"v49".to_vec()));
    assert_eq!(value("k7"), None);
    assert_eq!(value("k399"), Some(b"first".to_vec()));
}
