//! Tests that need the store's insides: interleavings forced through a pause point.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use weft_core::CacheEntry;
use weft_core::entry::StoredExpiration;

use super::{FileStore, FileStoreConfig};
use crate::store::Store;

/// A point in the store's code where a test can stop one thread: armed, it holds the next
/// thread that reaches it until released. Test builds only.
#[derive(Debug, Default)]
pub(super) struct Pause {
    state: Mutex<PauseState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct PauseState {
    armed: bool,
    holding: bool,
    released: bool,
}

impl Pause {
    /// Called by the store where a thread may be stopped.
    pub(super) fn point(&self) {
        let mut state = self.state.lock();
        if !state.armed {
            return;
        }
        state.armed = false;
        state.holding = true;
        self.changed.notify_all();
        while !state.released {
            self.changed.wait(&mut state);
        }
        state.holding = false;
    }

    /// Makes the next thread to reach the point stop there.
    fn arm(&self) {
        let mut state = self.state.lock();
        state.armed = true;
        state.released = false;
    }

    /// Waits until a thread is stopped at the point.
    fn wait_holding(&self) {
        let mut state = self.state.lock();
        while !state.holding {
            self.changed.wait(&mut state);
        }
    }

    /// Lets the stopped thread go on.
    fn release(&self) {
        self.state.lock().released = true;
        self.changed.notify_all();
    }
}

fn entry(key: &[u8], value: &[u8], version: u64) -> CacheEntry {
    CacheEntry::restored(key, value, StoredExpiration::IMMORTAL, 0, version)
}

fn put(store: &FileStore, segment: u32, key: &[u8], value: &[u8], version: u64) {
    let position = store
        .write(segment, &entry(key, value, version))
        .expect("write");
    store.wait_durable(position).expect("durable");
}

/// Panics unless `key` loads with `value` (saying what was found instead, briefly).
fn assert_holds(store: &FileStore, segment: u32, key: &[u8], value: &[u8], what: &str) {
    match store.load(segment, key) {
        Ok(Some(entry)) if entry.value() == value => {}
        Ok(Some(entry)) => panic!("{what}: another value, {} bytes", entry.value().len()),
        Ok(None) => panic!("{what}: not found"),
        Err(error) => panic!("{what}: {error}"),
    }
}

#[test]
fn a_record_that_fills_a_file_survives_the_seal_of_that_file_by_a_flush_it_raced() {
    // Proves the record that fills a file is counted in the file's length before any flush
    // can write it, so that sealing the file (cutting it to its records) never cuts it off.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = FileStoreConfig::new(dir.path(), 2);
    config.file_size_max = 4096;
    // Nothing to compact: no thread but the test's appends.
    config.compaction_threshold_percent = 0;
    let store = Arc::new(FileStore::open(config.clone()).expect("open"));
    put(&store, 0, b"first", &[b'f'; 100], 1);
    let filler = vec![b'a'; 5000];

    // A writer's record fills the first file; the writer stops as soon as the record is in
    // the log.
    store.inner.append_pause.arm();
    let writer = {
        let store = Arc::clone(&store);
        let filler = filler.clone();
        std::thread::spawn(move || put(&store, 0, b"filler", &filler, 2))
    };
    store.inner.append_pause.wait_holding();
    // Meanwhile another writer (another segment) starts the next file, and its flush writes
    // both files and seals the first.
    put(&store, 1, b"next", b"in the second file", 3);
    store.inner.append_pause.release();
    writer.join().expect("writer");

    let usage = store.file_usage();
    assert!(
        usage.len() >= 2,
        "the second write started a file: {usage:?}"
    );
    assert_holds(
        &store,
        0,
        b"filler",
        &filler,
        "the acknowledged record that filled the first file",
    );
    assert_eq!(
        store.compact_now().map_err(|e| e.to_string()),
        Ok(0),
        "nothing is under a 0% threshold, and reading the files for it fails nothing"
    );
    drop(store);
    let store = FileStore::open(config).expect("reopen");
    assert_holds(&store, 0, b"filler", &filler, "after a restart");
    assert_holds(&store, 1, b"next", b"in the second file", "after a restart");
}

#[test]
fn compaction_never_takes_the_file_being_written_even_when_it_starts_meanwhile() {
    // Proves compaction chooses among sealed files only, even when a write starts a new file
    // while it chooses: compacting the file being written would delete it under its writers.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = FileStoreConfig::new(dir.path(), 2);
    config.file_size_max = 4096;
    // Any file with one dead byte qualifies, so the new file's overwritten record makes it one.
    config.compaction_threshold_percent = 100;
    let store = Arc::new(FileStore::open(config.clone()).expect("open"));
    // Fills the first file: the next write starts the second.
    put(&store, 0, b"large", &[b'l'; 5000], 1);

    store.inner.candidates_pause.arm();
    let compactor = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || store.compact_now().map_err(|e| e.to_string()))
    };
    store.inner.candidates_pause.wait_holding();
    // While compaction chooses: the second file starts, and holds a dead record.
    put(&store, 1, b"small", b"old", 2);
    put(&store, 1, b"small", b"new", 3);
    store.inner.candidates_pause.release();
    let compacted = compactor.join().expect("compactor");
    assert_eq!(compacted, Ok(0), "no sealed file has a dead byte");

    assert_holds(&store, 1, b"small", b"new", "after compaction");
    put(&store, 1, b"later", b"written after compaction", 4);
    assert_holds(
        &store,
        1,
        b"later",
        b"written after compaction",
        "after compaction",
    );
    drop(store);
    let store = FileStore::open(config).expect("reopen");
    assert_holds(&store, 0, b"large", &[b'l'; 5000], "after a restart");
    assert_holds(&store, 1, b"small", b"new", "after a restart");
    assert_holds(
        &store,
        1,
        b"later",
        b"written after compaction",
        "after a restart",
    );
}

#[test]
fn a_flush_racing_the_write_that_starts_a_file_finds_the_file() {
    // Proves a record's file is known to the store before a flush can write the record: a
    // flush that found no such file would fail and poison the store.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = FileStoreConfig::new(dir.path(), 2);
    config.file_size_max = 4096;
    config.compaction_threshold_percent = 0;
    let store = Arc::new(FileStore::open(config.clone()).expect("open"));
    // Fills the first file: the next write starts the second.
    put(&store, 0, b"large", &[b'l'; 5000], 1);

    store.inner.append_pause.arm();
    let writer = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let entry = entry(b"starter", b"first of the second file", 2);
            store
                .write(0, &entry)
                .and_then(|position| store.wait_durable(position))
                .map_err(|e| e.to_string())
        })
    };
    store.inner.append_pause.wait_holding();
    // Another thread makes everything appended durable while the writer is held.
    let flushed = store
        .wait_durable(store.position())
        .map_err(|e| e.to_string());
    store.inner.append_pause.release();
    let written = writer.join().expect("writer");
    assert_eq!(flushed, Ok(()), "the flush wrote the record into its file");
    assert_eq!(written, Ok(()), "the write is acknowledged");
    assert!(!store.is_poisoned());

    drop(store);
    let store = FileStore::open(config).expect("reopen");
    assert_holds(
        &store,
        0,
        b"starter",
        b"first of the second file",
        "after a restart",
    );
}
