//! The seam between a cache and its stores.
//!
//! The core does no I/O, so a cache with stores holds a [`Persistence`] (implemented by
//! `weft-store`) and tells it, under the key's segment write lock, what every write changed.
//! Because the call happens under that lock, the order of changes to one key seen by the store
//! is the order they were applied in memory; the store must therefore only buffer the change
//! there (no disk I/O, no waiting), and make it durable later.
//!
//! Durability is waited for after the lock is released. An embedded caller's write waits
//! right away (write-through: the write returns once the store has it). A server instead runs
//! a whole pipeline of commands inside [`collect_durability`], which collects the waits; it then
//! awaits one [`Durability`] for the batch before sending any reply, so concurrent connections
//! share each fsync (group commit) and no reply acknowledges a write the store could lose.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::entry::CacheEntry;

/// A boxed future, as returned by [`Persistence::wait_async`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What one write did to a key, as handed to the stores.
#[derive(Debug, Clone, Copy)]
pub enum StoreChange<'a> {
    /// The key now holds this entry.
    Put(&'a CacheEntry),
    /// The key was removed.
    Remove(&'a [u8]),
}

/// Why the stores could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PersistenceError {
    /// The store refuses writes after a failure it cannot take back (a failed fsync).
    #[error("store of cache `{cache}` refuses writes: {reason}")]
    Poisoned {
        /// The cache.
        cache: String,
        /// The failure that poisoned it.
        reason: String,
    },
    /// The cache is DEGRADED (a network partition) and its policy refuses the operation.
    #[error("cache `{cache}` is in DEGRADED mode: {reason}")]
    Degraded {
        /// The cache.
        cache: String,
        /// Why, and what is refused.
        reason: String,
    },
    /// The cache is clustered and this node has not joined the cluster yet.
    #[error(
        "cache `{cache}` is not served by this node yet: it has not joined the cluster; retry, or ask another node"
    )]
    NotJoined {
        /// The cache.
        cache: String,
    },
    /// The cache is clustered and this node does not order writes of the key's segment in
    /// its topology (a request routed by a topology that changed since): the client retries.
    #[error(
        "segment {segment} of cache `{cache}` is not owned by this node in the current topology; retry"
    )]
    NotOwner {
        /// The cache.
        cache: String,
        /// The key's segment.
        segment: u32,
    },
    /// The cache is clustered and the member that owns the key could not be reached, or
    /// did not answer in time: the operation may or may not have been applied there.
    #[error("cache `{cache}`: the owner of the key is unavailable: {reason}")]
    Unavailable {
        /// The cache.
        cache: String,
        /// Why.
        reason: String,
    },
    /// A read, write or flush failed.
    #[error("store of cache `{cache}` failed: {reason}")]
    Failed {
        /// The cache.
        cache: String,
        /// What failed.
        reason: String,
    },
}

/// Counters a cache's stores report (exported with the cache's statistics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PersistenceStats {
    /// Entries loaded into memory at start (preload).
    pub preloaded_entries: u64,
    /// How long the preload took.
    pub preload_ms: u64,
    /// Entries read from a store because memory did not hold them.
    pub loads: u64,
    /// Changes handed to the stores.
    pub stores: u64,
    /// Changes accepted but not yet written by write-behind.
    pub write_behind_backlog: u64,
    /// Whether a store refuses writes.
    pub poisoned: bool,
}

/// A cache's chain of stores, as the cache sees it. Implemented outside the core.
pub trait Persistence: Send + Sync + fmt::Debug + 'static {
    /// Called before each write, outside any lock: fails if the stores refuse writes, and may
    /// block while a bounded write-behind queue is full (back-pressure).
    ///
    /// # Errors
    /// If the stores refuse writes.
    fn admit_write(&self) -> Result<(), PersistenceError>;

    /// Called before each write of one key, with its segment: a clustered cache refuses a
    /// write this node does not order (it is not the segment's primary owner in its
    /// topology), so that no node acknowledges a write it could not have owned.
    ///
    /// # Errors
    /// If the write is refused; by default as [`Persistence::admit_write`].
    fn admit_write_at(&self, segment: u32) -> Result<(), PersistenceError> {
        let _ = segment;
        self.admit_write()
    }

    /// Called before each read: a clustered cache refuses reads while a partition makes it
    /// DEGRADED and its policy says so.
    ///
    /// # Errors
    /// If reads are refused.
    fn admit_read(&self) -> Result<(), PersistenceError> {
        Ok(())
    }

    /// Records a change, under the key's segment write lock. Must only buffer it.
    fn record(&self, segment: u32, change: StoreChange<'_>);

    /// The node gave `key` up (it no longer owns its segment): the stores forget it. Not a
    /// change of the key: a clustered cache's persistence replicates nothing for it.
    fn forget(&self, segment: u32, key: &[u8]) {
        self.record(segment, StoreChange::Remove(key));
    }

    /// Records that memory dropped `entry` to stay within its bound, under the segment lock
    /// (passivation writes it to the store here).
    fn evicted(&self, segment: u32, entry: &CacheEntry);

    /// Records that `key` was loaded back into memory, under the segment lock (passivation
    /// deletes it from the store, which holds only what memory does not).
    fn activated(&self, segment: u32, key: &[u8]);

    /// Whether the cache loads every stored entry into memory when it starts.
    fn preload(&self) -> bool;

    /// The entry of `key` in the stores, if any, under the key's segment write lock.
    ///
    /// # Errors
    /// If reading the store failed.
    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, PersistenceError>;

    /// Whether memory holds every entry the stores hold, so that a miss in memory is a miss
    /// (an unbounded cache that preloaded and does not passivate).
    fn memory_complete(&self) -> bool;

    /// Whether a read must wait, like a write, for the changes recorded before it: a
    /// clustered cache with synchronous replication answers a read only once every write
    /// the read may have seen is on all its owners (else a later read elsewhere could see an
    /// older value). Stores alone never need it.
    fn read_barrier(&self) -> bool {
        false
    }

    /// Blocks until every change recorded before the call is as durable as the stores
    /// promise.
    ///
    /// # Errors
    /// If making them durable failed.
    fn wait(&self) -> Result<(), PersistenceError>;

    /// [`Persistence::wait_async`] for writes made since `epoch` (see [`epoch`]): a
    /// persistence that may give up on changes after they were recorded (a clustered cache
    /// whose node no longer owns a key) fails the wait if it gave up on any since then. By
    /// default the same as [`Persistence::wait_async`].
    fn wait_async_since(&self, epoch: u64) -> BoxFuture<Result<(), PersistenceError>> {
        let _ = epoch;
        self.wait_async()
    }

    /// [`Persistence::wait`] for writes made since `epoch`, as
    /// [`Persistence::wait_async_since`].
    ///
    /// # Errors
    /// As [`Persistence::wait`].
    fn wait_since(&self, epoch: u64) -> Result<(), PersistenceError> {
        let _ = epoch;
        self.wait()
    }

    /// A read of `segment` ran in this thread's [`batch`]: the batch's wait must also cover
    /// the writes of the segment in flight, which the read may have seen. Nothing by default.
    fn note_read(&self, segment: u32) {
        let _ = segment;
    }

    /// [`Persistence::wait_async_since`] for the writes and reads of `batches` only (see
    /// [`batch`]); `since` as there. By default the same as `wait_async_since(since)`: every
    /// change recorded before the call.
    fn wait_async_batches(
        &self,
        batches: &[u64],
        since: u64,
    ) -> BoxFuture<Result<(), PersistenceError>> {
        let _ = batches;
        self.wait_async_since(since)
    }

    /// [`Persistence::wait_async_batches`], blocking the thread.
    ///
    /// # Errors
    /// As [`Persistence::wait`].
    fn wait_batches(&self, batches: &[u64], since: u64) -> Result<(), PersistenceError> {
        let _ = batches;
        self.wait_since(since)
    }

    /// [`Persistence::wait`] for async callers: covers the changes recorded before the call.
    fn wait_async(&self) -> BoxFuture<Result<(), PersistenceError>>;

    /// Removes every entry from the stores.
    ///
    /// # Errors
    /// If the stores failed.
    fn clear(&self) -> Result<(), PersistenceError>;

    /// Visits every live entry of the given segments held by the stores.
    ///
    /// # Errors
    /// If the stores failed.
    fn for_each(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), PersistenceError>;

    /// How many entries the cache holds, counted without reading them, given how many memory
    /// holds; `None` when only a walk can tell (the cache then counts by iterating).
    fn size(&self, in_memory: usize) -> Option<usize>;

    /// The highest entry version the stores hold, so that new versions continue above it.
    fn max_version(&self) -> u64;

    /// Counters.
    fn stats(&self) -> PersistenceStats;

    /// Notes a finished preload (for [`PersistenceStats`]).
    fn preloaded(&self, entries: u64, elapsed_ms: u64);

    /// Makes everything durable and stops the stores; `memory` is every entry memory holds
    /// (passivation writes them now).
    ///
    /// # Errors
    /// If the final flush failed.
    fn shutdown(
        &self,
        memory: &mut dyn Iterator<Item = CacheEntry>,
    ) -> Result<(), PersistenceError>;

    /// Stops the stores and deletes their data (the cache was removed).
    fn destroy(&self);
}

/// Makes a cache's stores when a cache is created (configured in `weft-store`). Asked for
/// every cache that declares stores or is clustered (a cluster wraps the stores in
/// replication).
pub trait PersistenceFactory: Send + Sync + fmt::Debug + 'static {
    /// The stores of cache `name`, or `None` when it needs none.
    ///
    /// # Errors
    /// A description of why the stores could not be opened.
    fn open(
        &self,
        name: &str,
        config: &crate::config::CacheConfig,
    ) -> Result<Option<Arc<dyn Persistence>>, String>;
}

/// The stores a batch of writes must wait for (each once).
type Waits = Vec<Arc<dyn Persistence>>;

thread_local! {
    static COLLECTING: RefCell<Option<Waits>> = const { RefCell::new(None) };
    static BATCH: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
    static ADMISSIONS: std::cell::Cell<Option<Admissions>> = const { std::cell::Cell::new(None) };
}

/// What the writes of a [`watch_admissions`] scope met when they asked to be admitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admissions {
    /// Writes admitted.
    pub admitted: u32,
    /// Whether a write was refused because this member does not order its segment's
    /// writes ([`PersistenceError::NotOwner`]).
    pub not_owner: bool,
}

impl Admissions {
    /// Whether the scope was refused as not the owner before it changed anything: it may
    /// run again at the owner, as a whole.
    #[must_use]
    pub fn refused_untouched(&self) -> bool {
        self.not_owner && self.admitted == 0
    }
}

/// Runs `f`, noting what its writes on this thread met when they asked to be admitted. Code
/// that turns a refusal into an answer of its own (a protocol's error reply) hides it from
/// its caller; this tells the caller, so that it can send the whole of `f` to the owner.
pub fn watch_admissions<R>(f: impl FnOnce() -> R) -> (R, Admissions) {
    let outer = ADMISSIONS.with(|cell| cell.replace(Some(Admissions::default())));
    let result = f();
    let seen = ADMISSIONS
        .with(|cell| cell.replace(outer))
        .unwrap_or_default();
    if let Some(mut outer) = outer {
        outer.admitted += seen.admitted;
        outer.not_owner |= seen.not_owner;
        ADMISSIONS.with(|cell| cell.set(Some(outer)));
    }
    (result, seen)
}

/// Notes a write's admission, or its refusal, in the [`watch_admissions`] scope running on
/// this thread, if any.
pub(crate) fn note_admission(outcome: &Result<(), PersistenceError>) {
    ADMISSIONS.with(|cell| {
        if let Some(mut seen) = cell.get() {
            match outcome {
                Ok(()) => seen.admitted += 1,
                Err(PersistenceError::NotOwner { .. }) => seen.not_owner = true,
                Err(_) => {}
            }
            cell.set(Some(seen));
        }
    });
}

/// The batch of writes and reads running on this thread, by its epoch number (see
/// [`next_epoch`]): a persistence that tells one write's wait from another's (a cluster's
/// replication, which acknowledges each write when its own backups have it) files what a
/// write or read must wait for under it, and [`Persistence::wait_async_batches`] waits for
/// exactly that.
#[must_use]
pub fn batch() -> Option<u64> {
    BATCH.with(std::cell::Cell::get)
}

/// Makes `epoch` this thread's batch until dropped (then the outer one again).
#[derive(Debug)]
pub(crate) struct BatchGuard(Option<u64>);

/// Enters batch `epoch` on this thread.
pub(crate) fn enter_batch(epoch: u64) -> BatchGuard {
    BatchGuard(BATCH.with(|batch| batch.replace(Some(epoch))))
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        BATCH.with(|batch| batch.set(self.0));
    }
}

/// Runs `f`, collecting the durability waits of the writes it makes on this thread instead of
/// blocking on each; the returned [`Durability`] must be awaited before acknowledging them.
pub fn collect_durability<R>(f: impl FnOnce() -> R) -> (R, Durability) {
    let epoch = next_epoch();
    let outer = COLLECTING.with(|cell| cell.borrow_mut().replace(Vec::new()));
    let batch = enter_batch(epoch);
    let result = f();
    drop(batch);
    let waits = COLLECTING.with(|cell| {
        let mut slot = cell.borrow_mut();
        let collected = slot.take().unwrap_or_default();
        *slot = outer;
        collected
    });
    (
        result,
        Durability {
            waits,
            epoch,
            batches: vec![epoch],
        },
    )
}

/// Batches of writes started so far (each [`collect_durability`] and each write waited for
/// on its own takes the next number).
static EPOCHS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Takes a number for a batch of writes about to start: a persistence that gives up on a
/// change after it was recorded notes [`epoch`] then, and fails the waits of every batch
/// that started before (any of them may hold the change).
#[must_use]
pub fn next_epoch() -> u64 {
    EPOCHS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// The number the next batch of writes will take: every batch with a smaller number started
/// before now.
#[must_use]
pub fn epoch() -> u64 {
    EPOCHS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Whether the writes of this thread are being collected by a [`collect_durability`].
pub(crate) fn collecting() -> bool {
    COLLECTING.with(|cell| cell.borrow().is_some())
}

/// Hands a write's wait to the surrounding [`collect_durability`], or returns it back when
/// there is none.
pub(crate) fn defer(persistence: &Arc<dyn Persistence>) -> bool {
    COLLECTING.with(|cell| {
        let mut slot = cell.borrow_mut();
        let Some(waits) = slot.as_mut() else {
            return false;
        };
        if !waits.iter().any(|known| Arc::ptr_eq(known, persistence)) {
            waits.push(Arc::clone(persistence));
        }
        true
    })
}

/// Writes made under [`collect_durability`] that are not yet known to be durable.
#[must_use = "writes are not acknowledged until their durability is awaited"]
#[derive(Default)]
pub struct Durability {
    waits: Waits,
    /// When the first of its batches started (see [`next_epoch`]).
    epoch: u64,
    /// Every batch it holds.
    batches: Vec<u64>,
}

impl fmt::Debug for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Durability")
            .field("stores", &self.waits.len())
            .finish()
    }
}

impl Durability {
    /// True when no write needs waiting for.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.waits.is_empty()
    }

    /// Adds another batch's waits to this one.
    pub fn merge(&mut self, other: Durability) {
        if self.waits.is_empty() {
            self.epoch = other.epoch;
            self.batches.clear();
        } else if !other.waits.is_empty() {
            self.epoch = self.epoch.min(other.epoch);
        }
        if !other.waits.is_empty() {
            self.batches.extend_from_slice(&other.batches);
        }
        for persistence in other.waits {
            if !self
                .waits
                .iter()
                .any(|known| Arc::ptr_eq(known, &persistence))
            {
                self.waits.push(persistence);
            }
        }
    }

    /// Waits until every collected write is durable.
    ///
    /// # Errors
    /// The first store that failed to make its writes durable.
    pub async fn wait(self) -> Result<(), PersistenceError> {
        for persistence in self.waits {
            persistence
                .wait_async_batches(&self.batches, self.epoch)
                .await?;
        }
        Ok(())
    }

    /// [`Durability::wait`], blocking the thread.
    ///
    /// # Errors
    /// As [`Durability::wait`].
    pub fn wait_blocking(self) -> Result<(), PersistenceError> {
        for persistence in self.waits {
            persistence.wait_batches(&self.batches, self.epoch)?;
        }
        Ok(())
    }
}
