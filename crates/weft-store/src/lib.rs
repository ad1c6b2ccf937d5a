//! Weft's stores: what keeps a cache's entries beyond memory and across restarts.
//!
//! * [`Store`] — the segmented store interface (load, write, delete, batches, publishing and
//!   removing segments, purge, size, clear) with explicit durability: writes are submitted and
//!   a position is awaited.
//! * [`file::FileStore`] — the default store: append-only data files with a CRC per record, an
//!   in-memory index per segment rebuilt at start from a checkpoint plus the log tail, group
//!   commit, compaction, and torn-tail recovery. Disk access goes through [`disk::Disk`], so
//!   tests inject torn writes and fsync failures.
//! * [`manager::PersistenceManager`] — a cache's chain of stores as the core sees it
//!   (`weft_core::Persistence`): write-through, write-behind, passivation, preload.
//! * [`manager::StoreFactory`] — opens the stores a cache's configuration declares.
//! * [`lock::DirLock`] — one process at a time per data directory and per file store: an
//!   OS file lock held while the directory is in use, naming its holder to those refused.
//!
//! This crate never decides what a cache holds: the core calls it under its segment locks
//! and it only buffers there; all disk work happens on the store's own threads.

pub mod disk;
pub mod file;
pub mod lock;
pub mod manager;
mod store;
#[cfg(feature = "testing")]
pub mod testing;

pub use manager::{PersistenceManager, StoreFactory, StoreOpener};
pub use store::{Characteristics, Modification, Store, StoreError};
