//! The segmented store interface every store implements (file, PostgreSQL, and any later one).

use std::fmt;

use weft_core::CacheEntry;
use weft_core::persistence::BoxFuture;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store refuses writes after a failure it cannot take back (a failed fsync): the
    /// data on disk may not hold what was acknowledged as written, and retrying the sync
    /// would only pretend it does.
    #[error("poisoned: {0}")]
    Poisoned(String),
    /// An I/O operation failed.
    #[error("{context}: {reason}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's or database's error.
        reason: String,
    },
    /// Stored data failed its checksum somewhere other than a torn tail.
    #[error("corrupt data in {file} at offset {offset}: {reason}")]
    Corrupt {
        /// The file.
        file: String,
        /// Where.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// The store was stopped.
    #[error("the store is stopped")]
    Stopped,
    /// The store is read-only.
    #[error("the store is read-only")]
    ReadOnly,
    /// Another process, or another user in this one, has the store's directory open.
    #[error("{dir} is in use by another process ({holder})")]
    Locked {
        /// The store's directory.
        dir: String,
        /// Who holds it, as its lock file says.
        holder: String,
    },
}

impl From<crate::lock::LockError> for StoreError {
    fn from(error: crate::lock::LockError) -> Self {
        match error {
            crate::lock::LockError::Held {
                dir,
                holder,
                lock_file,
            } => Self::Locked {
                dir: dir.display().to_string(),
                holder: format!("{holder}; lock file {}", lock_file.display()),
            },
            other => Self::io("lock the store", other),
        }
    }
}

impl StoreError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, error: impl fmt::Display) -> Self {
        Self::Io {
            context: context.into(),
            reason: error.to_string(),
        }
    }
}

/// What a store is, so the persistence manager knows how to use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(clippy::struct_excessive_bools)]
pub struct Characteristics {
    /// Several nodes share it (a database): each node writes only what it owns as primary.
    pub shared: bool,
    /// Never written.
    pub read_only: bool,
    /// Takes part in transactions.
    pub transactional: bool,
    /// Can publish and remove whole segments cheaply.
    pub segmented: bool,
    /// Keeps entries' expiration and never returns an expired entry.
    pub expiration_aware: bool,
}

/// One change in a batch.
#[derive(Debug, Clone)]
pub enum Modification {
    /// Store this entry (its key, value, version and expiration).
    Write {
        /// The key's segment.
        segment: u32,
        /// The entry.
        entry: CacheEntry,
    },
    /// Delete this key.
    Delete {
        /// The key's segment.
        segment: u32,
        /// The key.
        key: bytes::Bytes,
    },
}

/// A segmented store of cache entries.
///
/// Writes are submitted, not awaited: `write`, `delete`, `write_batch` and `clear` return a
/// position at once (they never wait on a disk or a network), and `wait_durable` /
/// `wait_durable_async` wait until everything up to a position is as durable as the store
/// promises. A store applies submitted changes in the order they were submitted; a load
/// sees every change submitted before it, durable or not.
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// What the store is.
    fn characteristics(&self) -> Characteristics;

    /// The live entry of `key` (never an expired one).
    ///
    /// # Errors
    /// If reading failed.
    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, StoreError>;

    /// Submits a write of `entry`; returns its position.
    ///
    /// # Errors
    /// If the store refuses writes.
    fn write(&self, segment: u32, entry: &CacheEntry) -> Result<u64, StoreError>;

    /// Submits a delete of `key`; returns its position.
    ///
    /// # Errors
    /// If the store refuses writes.
    fn delete(&self, segment: u32, key: &[u8]) -> Result<u64, StoreError>;

    /// Submits a batch of changes, applied in order; returns the position of the last.
    ///
    /// # Errors
    /// If the store refuses writes.
    fn write_batch(&self, batch: &[Modification]) -> Result<u64, StoreError> {
        let mut position = self.position();
        for change in batch {
            position = match change {
                Modification::Write { segment, entry } => self.write(*segment, entry)?,
                Modification::Delete { segment, key } => self.delete(*segment, key)?,
            };
        }
        Ok(position)
    }

    /// The position of the last change submitted.
    fn position(&self) -> u64;

    /// Blocks until every change up to `position` is durable.
    ///
    /// # Errors
    /// If the store failed to make them durable (and is then poisoned).
    fn wait_durable(&self, position: u64) -> Result<(), StoreError>;

    /// [`Store::wait_durable`] for async callers.
    fn wait_durable_async(&self, position: u64) -> BoxFuture<Result<(), StoreError>>;

    /// Visits every live entry of the given segments.
    ///
    /// # Errors
    /// If reading failed.
    fn publish(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), StoreError>;

    /// Visits every live key of the given segments.
    ///
    /// # Errors
    /// If reading failed.
    fn publish_keys(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        self.publish(segments, &mut |entry| visit(entry.key()))
    }

    /// Starts holding the given segments (a node became their owner). A no-op for stores
    /// that hold every segment anyway.
    ///
    /// # Errors
    /// If the store failed.
    fn add_segments(&self, segments: &[u32]) -> Result<(), StoreError> {
        let _ = segments;
        Ok(())
    }

    /// Deletes every entry of the given segments; returns the position of the change.
    ///
    /// # Errors
    /// If the store refuses writes.
    fn remove_segments(&self, segments: &[u32]) -> Result<u64, StoreError>;

    /// Removes entries that expired by `now_ms`; returns how many.
    ///
    /// # Errors
    /// If the store failed.
    fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError>;

    /// Live entries in the given segments (all when `None`), expired ones not yet purged
    /// included.
    ///
    /// # Errors
    /// If the store failed.
    fn size(&self, segments: Option<&[u32]>) -> Result<usize, StoreError>;

    /// Submits the removal of every entry; returns its position.
    ///
    /// # Errors
    /// If the store refuses writes.
    fn clear(&self) -> Result<u64, StoreError>;

    /// The highest entry version held.
    fn max_version(&self) -> u64;

    /// Makes every submitted change durable and stops; later calls fail with `Stopped`.
    ///
    /// # Errors
    /// If the final flush failed.
    fn stop(&self) -> Result<(), StoreError>;

    /// Stops and deletes everything the store holds (its files, or its table).
    fn destroy(&self);
}
