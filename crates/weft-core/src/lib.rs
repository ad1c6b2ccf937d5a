//! `weft-core` is Weft's embedded cache engine: named caches ([`CacheManager`], [`Cache`]) of
//! byte keys and values over a segmented data container, with per-entry versions, expiration
//! (lifespan and max idle), frequency-aware eviction by count or memory, listeners and
//! statistics, plus the configuration model the server reads from TOML.
//!
//! It owns the data and its rules. It must not do I/O: no sockets, no files, no async
//! runtime of its own. Time comes in through [`Clock`]; the only threads it starts are the
//! expiration reaper and the asynchronous listeners' delivery threads. Protocols are adapters
//! over [`Cache`]; none reaches into the container.
//!
//! ```
//! use weft_core::{CacheManager, ManagerConfig, WriteOptions};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let manager = CacheManager::new(ManagerConfig::default())?;
//! let cache = manager.cache("default").ok_or("no default cache")?;
//! cache.put(b"greeting", b"hello", &WriteOptions::default())?;
//! assert_eq!(cache.get(b"greeting")?.as_deref(), Some(&b"hello"[..]));
//! # Ok(()) }
//! ```

pub mod bytes_serde;
pub mod cache;
pub mod clock;
pub mod config;
mod container;
pub mod entry;
pub mod error;
mod eviction;
pub mod hash;
pub mod listener;
pub mod manager;
pub mod media;
pub mod operation;
pub mod persistence;
mod stats;
pub mod stream;
pub mod structure;
pub mod typed;

pub use cache::{
    Cache, CacheIter, Compute, Expiry, Lifetime, NewValue, RemoteChange, VersionedOutcome,
    WriteOptions,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    AuthorizationConfig, CacheConfig, CacheMode, ConfigError, DurabilityMode, EncodingConfig,
    ExpirationConfig, KeyPartitioner, MediaTypeConfig, MemoryConfig, MergePolicy, OWNERS_DEFAULT,
    PartitionHandling, PersistenceConfig, Reads, Replication, SecurityConfig, StoreConfig,
    StoreKind, WhenFull, WhenSplit, WriteBehindConfig,
};
pub use container::{TABLE_SLOT_BYTES, entry_charge};
pub use entry::{CacheEntry, EntryMetadata, Payload};
pub use error::{CacheError, ManagerError};
pub use listener::{
    CacheEvent, Delivery, EventFilterFactories, EventFilterFactory, EventKind, EventKinds,
    ListenerId, ListenerOptions, RelayInterest, SourceFilter,
};
pub use manager::{CacheManager, DEFAULT_CACHE_NAME, ManagerConfig};
pub use media::{Format, TranscodeError, transcode};
pub use persistence::{
    Durability, Persistence, PersistenceError, PersistenceFactory, PersistenceStats, StoreChange,
    collect_durability,
};
pub use stats::CacheStatistics;
pub use structure::{Structure, StructureCell, StructureKind};
pub use typed::{Codec, CodecError, Json, KeyValue, TypedCache, TypedError};
