//! Errors of cache operations.

/// Why a cache operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// A bounded cache with `when-full = exception` refused a new entry.
    #[error("cache `{cache}` is full (when-full = exception)")]
    ContainerFull {
        /// The cache.
        cache: String,
    },
    /// The key or value exceeds what an entry can hold.
    #[error("{what} of {bytes} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// "key" or "value".
        what: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The cache was removed from its manager.
    #[error("cache `{cache}` has been removed")]
    Removed {
        /// The cache.
        cache: String,
    },
    /// The cache's stores failed or refuse writes.
    #[error(transparent)]
    Persistence(#[from] crate::persistence::PersistenceError),
}

/// Why a cache could not be created or found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// `create_cache` for a name that exists.
    #[error("cache `{0}` already exists")]
    AlreadyExists(String),
    /// A name that cannot name a cache.
    #[error("invalid cache name `{name}`: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// Settings that do not go together.
    #[error("cache `{cache}`: {reason}")]
    InvalidConfig {
        /// The cache.
        cache: String,
        /// What is wrong.
        reason: String,
    },
    /// Two caches claim the same RESP database number.
    #[error("RESP database {database} is already mapped to cache `{cache}`")]
    DatabaseTaken {
        /// The number.
        database: u32,
        /// The cache holding it.
        cache: String,
    },
    /// A cache serving a RESP database must store raw bytes.
    #[error(
        "cache `{cache}` serves RESP database {database} but stores {media_type}; RESP needs application/octet-stream, text/plain or application/unknown"
    )]
    RespNeedsBytes {
        /// The cache.
        cache: String,
        /// Its RESP database.
        database: u32,
        /// The media type it declares.
        media_type: &'static str,
    },
    /// The cache's stores could not be opened or loaded.
    #[error("cache `{cache}`: {reason}")]
    Persistence {
        /// The cache.
        cache: String,
        /// What failed.
        reason: String,
    },
}
