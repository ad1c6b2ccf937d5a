//! A cache's chain of stores as the core sees it (`weft_core::Persistence`), and the factory
//! that opens them from a cache's configuration.
//!
//! Write-through: every change is submitted to each writable store under the key's segment
//! lock, and the write waits (or its batch waits, in a server) until the stores have made it
//! durable. Write-behind: changes go to a bounded queue, coalesced per key, that a thread
//! writes to the stores in batches; writers wait only while the queue is full. Passivation:
//! entries reach the stores only when evicted from memory (and all of memory at shutdown);
//! removals delete from the stores at once, and an entry loaded back into memory is deleted
//! from them, so memory and the stores never both hold a key.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::{Condvar, Mutex};
use weft_core::CacheEntry;
use weft_core::config::{CacheConfig, StoreConfig, StoreKind, WriteBehindConfig};
use weft_core::persistence::{
    BoxFuture, Persistence, PersistenceError, PersistenceFactory, PersistenceStats, StoreChange,
};

use crate::file::{FileStore, FileStoreConfig, store_dir};
use crate::store::{Modification, Store, StoreError};

/// How long the write-behind thread waits for a batch to fill before writing what it has.
const WRITE_BEHIND_LINGER: Duration = Duration::from_millis(5);

/// Opens one store of a cache: `(cache name, cache configuration, store configuration)`.
pub type StoreOpener =
    Arc<dyn Fn(&str, &CacheConfig, &StoreConfig) -> Result<Arc<dyn Store>, String> + Send + Sync>;

/// What a pending write-behind change does to its key.
type Pending = HashMap<Bytes, (u32, Option<CacheEntry>)>;

#[derive(Default)]
struct Queue {
    pending: Pending,
    /// Taken by the writer thread and not yet submitted to the stores.
    in_flight: Option<Arc<Pending>>,
    stopping: bool,
}

struct WriteBehind {
    config: WriteBehindConfig,
    queue: Mutex<Queue>,
    /// Signalled when changes arrive (writer) and when the queue drains (blocked writers).
    changed: Condvar,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A cache's stores.
pub struct PersistenceManager {
    cache: String,
    stores: Vec<Arc<dyn Store>>,
    passivation: bool,
    preload: bool,
    write_behind: Option<Arc<WriteBehind>>,
    loads: AtomicU64,
    writes: AtomicU64,
    preloaded: Mutex<(u64, u64)>,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    /// The cache's segment count (to place entries passivated at shutdown).
    segments: std::sync::atomic::AtomicU32,
}

impl fmt::Debug for PersistenceManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PersistenceManager")
            .field("cache", &self.cache)
            .field("stores", &self.stores)
            .field("passivation", &self.passivation)
            .field("write_behind", &self.write_behind.is_some())
            .finish()
    }
}

impl PersistenceManager {
    /// A chain of stores for `cache`.
    #[must_use]
    pub fn new(
        cache: &str,
        stores: Vec<Arc<dyn Store>>,
        passivation: bool,
        preload: bool,
        write_behind: Option<WriteBehindConfig>,
    ) -> Arc<Self> {
        let manager = Arc::new(Self {
            cache: cache.to_owned(),
            stores,
            passivation,
            preload,
            write_behind: write_behind.map(|config| {
                Arc::new(WriteBehind {
                    config,
                    queue: Mutex::new(Queue::default()),
                    changed: Condvar::new(),
                    thread: Mutex::new(None),
                })
            }),
            loads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            preloaded: Mutex::new((0, 0)),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            segments: std::sync::atomic::AtomicU32::new(weft_core::config::SEGMENT_COUNT_DEFAULT),
        });
        if let Some(write_behind) = &manager.write_behind {
            let weak = Arc::downgrade(&manager);
            let queue = Arc::clone(write_behind);
            let spawned = std::thread::Builder::new()
                .name("weft-write-behind".to_owned())
                .spawn(move || write_behind_loop(&queue, &weak));
            match spawned {
                Ok(thread) => *write_behind.thread.lock() = Some(thread),
                Err(error) => manager.fail(format!("start the write-behind thread: {error}")),
            }
        }
        manager
    }

    fn error(&self, error: &StoreError) -> PersistenceError {
        match error {
            StoreError::Poisoned(reason) => PersistenceError::Poisoned {
                cache: self.cache.clone(),
                reason: reason.clone(),
            },
            other => PersistenceError::Failed {
                cache: self.cache.clone(),
                reason: other.to_string(),
            },
        }
    }

    fn fail(&self, reason: String) {
        tracing::error!(cache = %self.cache, %reason, "store write failed");
        *self.failure.lock() = Some(reason);
        self.failed.store(true, Ordering::Release);
    }

    fn writable(&self) -> impl Iterator<Item = &Arc<dyn Store>> {
        self.stores
            .iter()
            .filter(|store| !store.characteristics().read_only)
    }

    /// Submits one change to every writable store, or queues it for write-behind.
    fn submit(&self, segment: u32, key: &[u8], entry: Option<&CacheEntry>) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        if let Some(write_behind) = &self.write_behind {
            let mut queue = write_behind.queue.lock();
            queue
                .pending
                .insert(Bytes::copy_from_slice(key), (segment, entry.cloned()));
            let full = queue.pending.len() >= write_behind.config.batch_size;
            drop(queue);
            if full {
                write_behind.changed.notify_all();
            }
            return;
        }
        for store in self.writable() {
            let submitted = match entry {
                Some(entry) => store.write(segment, entry),
                None => store.delete(segment, key),
            };
            if let Err(error) = submitted {
                self.fail(error.to_string());
            }
        }
    }

    fn pending_write_behind(&self, key: &[u8]) -> Option<Option<CacheEntry>> {
        let write_behind = self.write_behind.as_ref()?;
        let queue = write_behind.queue.lock();
        if let Some((_, change)) = queue.pending.get(key) {
            return Some(change.clone());
        }
        queue
            .in_flight
            .as_ref()
            .and_then(|batch| batch.get(key))
            .map(|(_, change)| change.clone())
    }

    /// Writes the queued changes now and waits until the stores have them (shutdown).
    fn drain_write_behind(&self) {
        let Some(write_behind) = &self.write_behind else {
            return;
        };
        write_behind.queue.lock().stopping = true;
        write_behind.changed.notify_all();
        if let Some(thread) = write_behind.thread.lock().take()
            && thread.join().is_err()
        {
            tracing::error!(cache = %self.cache, "the write-behind thread panicked");
        }
    }
}

fn write_behind_loop(write_behind: &WriteBehind, manager: &std::sync::Weak<PersistenceManager>) {
    loop {
        let batch = {
            let mut queue = write_behind.queue.lock();
            if queue.pending.is_empty() && !queue.stopping {
                write_behind.changed.wait(&mut queue);
            }
            if queue.pending.len() < write_behind.config.batch_size && !queue.stopping {
                write_behind
                    .changed
                    .wait_for(&mut queue, WRITE_BEHIND_LINGER);
            }
            if queue.pending.is_empty() {
                if queue.stopping {
                    return;
                }
                continue;
            }
            let batch = Arc::new(std::mem::take(&mut queue.pending));
            queue.in_flight = Some(Arc::clone(&batch));
            batch
        };
        let Some(manager) = manager.upgrade() else {
            return;
        };
        let modifications: Vec<Modification> = batch
            .iter()
            .map(|(key, (segment, entry))| match entry {
                Some(entry) => Modification::Write {
                    segment: *segment,
                    entry: entry.clone(),
                },
                None => Modification::Delete {
                    segment: *segment,
                    key: key.clone(),
                },
            })
            .collect();
        for chunk in modifications.chunks(write_behind.config.batch_size.max(1)) {
            for store in manager.writable() {
                match store.write_batch(chunk) {
                    Ok(position) => {
                        if let Err(error) = store.wait_durable(position) {
                            manager.fail(error.to_string());
                        }
                    }
                    Err(error) => manager.fail(error.to_string()),
                }
            }
        }
        write_behind.queue.lock().in_flight = None;
        write_behind.changed.notify_all();
    }
}

impl Persistence for PersistenceManager {
    fn admit_write(&self) -> Result<(), PersistenceError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(PersistenceError::Poisoned {
                cache: self.cache.clone(),
                reason: self.failure.lock().clone().unwrap_or_default(),
            });
        }
        if let Some(write_behind) = &self.write_behind {
            let mut queue = write_behind.queue.lock();
            // Queued and being written both count: the bound is on what is held, not yet
            // in the store.
            while queue.pending.len() + queue.in_flight.as_ref().map_or(0, |batch| batch.len())
                >= write_behind.config.modification_queue_size
                && !queue.stopping
            {
                write_behind.changed.notify_all();
                write_behind
                    .changed
                    .wait_for(&mut queue, Duration::from_millis(50));
            }
        }
        Ok(())
    }

    fn record(&self, segment: u32, change: StoreChange<'_>) {
        match change {
            StoreChange::Put(entry) => {
                if !self.passivation {
                    self.submit(segment, entry.key(), Some(entry));
                }
            }
            StoreChange::Remove(key) => self.submit(segment, key, None),
        }
    }

    fn evicted(&self, segment: u32, entry: &CacheEntry) {
        if self.passivation {
            self.submit(segment, entry.key(), Some(entry));
        }
    }

    fn activated(&self, segment: u32, key: &[u8]) {
        if self.passivation {
            self.submit(segment, key, None);
        }
    }

    fn preload(&self) -> bool {
        self.preload
    }

    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, PersistenceError> {
        if let Some(pending) = self.pending_write_behind(key) {
            return Ok(pending);
        }
        for store in &self.stores {
            let found = store.load(segment, key).map_err(|e| self.error(&e))?;
            if found.is_some() {
                self.loads.fetch_add(1, Ordering::Relaxed);
                return Ok(found);
            }
        }
        Ok(None)
    }

    fn memory_complete(&self) -> bool {
        self.preload && !self.passivation
    }

    fn wait(&self) -> Result<(), PersistenceError> {
        if self.write_behind.is_some() {
            return self.admit_write();
        }
        for store in self.writable() {
            store
                .wait_durable(store.position())
                .map_err(|e| self.error(&e))?;
        }
        Ok(())
    }

    fn wait_async(&self) -> BoxFuture<Result<(), PersistenceError>> {
        if self.write_behind.is_some() || self.failed.load(Ordering::Acquire) {
            let result = if self.failed.load(Ordering::Acquire) {
                self.admit_write()
            } else {
                Ok(())
            };
            return Box::pin(async move { result });
        }
        let waits: Vec<_> = self
            .writable()
            .map(|store| store.wait_durable_async(store.position()))
            .collect();
        let cache = self.cache.clone();
        Box::pin(async move {
            for wait in waits {
                wait.await.map_err(|error| match error {
                    StoreError::Poisoned(reason) => PersistenceError::Poisoned {
                        cache: cache.clone(),
                        reason,
                    },
                    other => PersistenceError::Failed {
                        cache: cache.clone(),
                        reason: other.to_string(),
                    },
                })?;
            }
            Ok(())
        })
    }

    fn clear(&self) -> Result<(), PersistenceError> {
        if let Some(write_behind) = &self.write_behind {
            let mut queue = write_behind.queue.lock();
            queue.pending.clear();
            while queue.in_flight.is_some() {
                write_behind.changed.wait(&mut queue);
            }
        }
        for store in self.writable() {
            store.clear().map_err(|e| self.error(&e))?;
        }
        Ok(())
    }

    fn for_each(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), PersistenceError> {
        // The first store that holds a key wins, as for loads; write-behind's queue first.
        let mut seen = std::collections::HashSet::new();
        if let Some(write_behind) = &self.write_behind {
            let queue = write_behind.queue.lock();
            let in_flight = queue.in_flight.clone();
            for batch in std::iter::once(&queue.pending).chain(in_flight.as_deref()) {
                for (key, (segment, entry)) in batch {
                    if segments.contains(segment) && seen.insert(key.clone()) {
                        if let Some(entry) = entry {
                            visit(entry.clone());
                        }
                    }
                }
            }
        }
        let single = self.stores.len() == 1 && seen.is_empty();
        for store in &self.stores {
            store
                .publish(segments, &mut |entry| {
                    if single || seen.insert(entry.key_bytes()) {
                        visit(entry);
                    }
                })
                .map_err(|e| self.error(&e))?;
        }
        Ok(())
    }

    fn size(&self, in_memory: usize) -> Option<usize> {
        // One store and no queue: it holds every entry (write-through), or every entry memory
        // does not (passivation keeps the two apart).
        let [store] = self.stores.as_slice() else {
            return None;
        };
        if self.write_behind.is_some() {
            return None;
        }
        let stored = store.size(None).ok()?;
        Some(if self.passivation {
            stored + in_memory
        } else {
            stored.max(in_memory)
        })
    }

    fn max_version(&self) -> u64 {
        self.stores
            .iter()
            .map(|store| store.max_version())
            .max()
            .unwrap_or(0)
    }

    fn stats(&self) -> PersistenceStats {
        let (preloaded_entries, preload_ms) = *self.preloaded.lock();
        PersistenceStats {
            preloaded_entries,
            preload_ms,
            loads: self.loads.load(Ordering::Relaxed),
            stores: self.writes.load(Ordering::Relaxed),
            write_behind_backlog: self.write_behind.as_ref().map_or(0, |wb| {
                let queue = wb.queue.lock();
                (queue.pending.len() + queue.in_flight.as_ref().map_or(0, |b| b.len())) as u64
            }),
            poisoned: self.failed.load(Ordering::Acquire),
        }
    }

    fn preloaded(&self, entries: u64, elapsed_ms: u64) {
        *self.preloaded.lock() = (entries, elapsed_ms);
    }

    fn shutdown(
        &self,
        memory: &mut dyn Iterator<Item = CacheEntry>,
    ) -> Result<(), PersistenceError> {
        if self.passivation {
            let started = std::time::Instant::now();
            let mut written = 0u64;
            for entry in memory {
                let segment = weft_core::hash::segment_of(entry.key(), self.segment_count());
                self.submit(segment, entry.key(), Some(&entry));
                written += 1;
            }
            tracing::info!(cache = %self.cache, entries = written, elapsed_ms = started.elapsed().as_millis() as u64, "passivated memory to the store");
        }
        self.drain_write_behind();
        let mut result = Ok(());
        for store in &self.stores {
            if let Err(error) = store.stop() {
                result = Err(self.error(&error));
            }
        }
        result
    }

    fn destroy(&self) {
        self.drain_write_behind();
        for store in &self.stores {
            store.destroy();
        }
    }
}

impl PersistenceManager {
    fn segment_count(&self) -> u32 {
        self.segments.load(Ordering::Relaxed)
    }

    /// Sets the cache's segment count (used to place entries passivated at shutdown).
    pub fn set_segment_count(&self, segments: u32) {
        self.segments.store(segments, Ordering::Relaxed);
    }
}

/// Opens the stores a cache's configuration declares.
pub struct StoreFactory {
    data_dir: PathBuf,
    openers: HashMap<StoreKind, StoreOpener>,
    /// Who opens file stores, for their lock files (shared with the file opener).
    holder: Arc<Mutex<String>>,
}

impl fmt::Debug for StoreFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreFactory")
            .field("data_dir", &self.data_dir)
            .field("kinds", &self.openers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl StoreFactory {
    /// A factory whose file stores live under `data_dir`.
    #[must_use]
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        let data_dir = data_dir.into();
        let mut openers: HashMap<StoreKind, StoreOpener> = HashMap::new();
        let root = data_dir.clone();
        let holder = Arc::new(Mutex::new(String::new()));
        let file_holder = Arc::clone(&holder);
        openers.insert(
            StoreKind::File,
            Arc::new(
                move |cache: &str, config: &CacheConfig, store: &StoreConfig| {
                    let mut file = FileStoreConfig::new(
                        store_dir(&root, cache, store.path.as_deref()),
                        config.segments,
                    );
                    file.durability = store.durability;
                    file.sync_interval = store.sync_interval;
                    file.file_size_max = store.file_size_max;
                    file.compaction_threshold_percent = store.compaction_threshold_percent;
                    file.read_only = store.read_only;
                    file.holder.clone_from(&file_holder.lock());
                    let opened: Arc<dyn Store> =
                        Arc::new(FileStore::open(file).map_err(|e| e.to_string())?);
                    Ok(opened)
                },
            ),
        );
        Self {
            data_dir,
            openers,
            holder,
        }
    }

    /// Says who opens file stores (for example `weft server, node a`): written into each
    /// store's lock file after the process id, for a process refused the store to name it.
    #[must_use]
    pub fn with_holder(self, holder: impl Into<String>) -> Self {
        *self.holder.lock() = holder.into();
        self
    }

    /// Locks the data directory (created if missing) for a process that uses it as a whole,
    /// such as a server: held until the returned lock is dropped. File stores lock their own
    /// directories when opened, whether or not this is held.
    ///
    /// # Errors
    /// [`crate::lock::LockError::Held`] if another process, or another user in this one,
    /// holds it (naming the holder); an I/O error if it cannot be created or locked.
    pub fn lock_data_dir(&self) -> Result<crate::lock::DirLock, crate::lock::LockError> {
        crate::lock::DirLock::acquire(
            &self.data_dir,
            crate::lock::DATA_DIR_LOCK_NAME,
            &self.holder.lock(),
        )
    }

    /// Adds (or replaces) how stores of `kind` are opened.
    #[must_use]
    pub fn with_opener(mut self, kind: StoreKind, opener: StoreOpener) -> Self {
        self.openers.insert(kind, opener);
        self
    }

    /// Where file stores live.
    #[must_use]
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }
}

impl PersistenceFactory for StoreFactory {
    fn open(
        &self,
        name: &str,
        config: &CacheConfig,
    ) -> Result<Option<Arc<dyn Persistence>>, String> {
        let persistence = &config.persistence;
        if persistence.stores.is_empty() {
            return Ok(None);
        }
        let mut stores = Vec::new();
        for store in &persistence.stores {
            let opener = self
                .openers
                .get(&store.kind)
                .ok_or_else(|| format!("no {:?} store is available in this build", store.kind))?;
            let opened = opener(name, config, store)?;
            if store.purge_on_startup && !store.read_only {
                let position = opened.clear().map_err(|e| e.to_string())?;
                opened.wait_durable(position).map_err(|e| e.to_string())?;
            }
            stores.push(opened);
        }
        let preload = persistence.stores.iter().any(|store| store.preload);
        let write_behind = persistence
            .stores
            .iter()
            .find_map(|store| store.write_behind);
        let manager =
            PersistenceManager::new(name, stores, persistence.passivation, preload, write_behind);
        manager.set_segment_count(config.segments);
        Ok(Some(manager))
    }
}
