//! What can go wrong in the grid, typed.

use std::io;

use crate::transport::TransportError;

/// A grid failure.
#[derive(Debug, thiserror::Error)]
pub enum GridError {
    /// A socket could not be bound or a seed resolved.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// Consensus could not be started or refused a change.
    #[error("consensus: {0}")]
    Consensus(String),
    /// Another member could not be reached or did not answer in time.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The cache is not known to this member, or has no topology yet.
    #[error("cache `{0}` has no topology yet")]
    NoTopology(String),
    /// A member answered with a failure, or the cluster could not complete the request.
    #[error("{0}")]
    Cluster(String),
    /// The local cache refused.
    #[error(transparent)]
    Cache(#[from] weft_core::CacheError),
    /// A write was not made as durable or replicated as the cache promises.
    #[error(transparent)]
    Persistence(#[from] weft_core::PersistenceError),
    /// A consensus command or its outcome did not encode or decode.
    #[error("consensus message: {0}")]
    Encoding(#[from] serde_json::Error),
    /// An entry received from another member is malformed.
    #[error("a malformed entry from another member: {0}")]
    Entry(#[from] weft_cluster::wire::EntryError),
}

impl From<weft_core::operation::Failure> for GridError {
    fn from(failure: weft_core::operation::Failure) -> Self {
        match failure {
            weft_core::operation::Failure::Cache(error) => Self::Cache(error),
            weft_core::operation::Failure::NoFunction(name) => {
                Self::Cluster(format!("no function `{name}` is registered"))
            }
        }
    }
}

impl<E: std::error::Error> From<openraft::error::RaftError<u64, E>> for GridError {
    fn from(error: openraft::error::RaftError<u64, E>) -> Self {
        Self::Consensus(error.to_string())
    }
}

impl From<openraft::error::Fatal<u64>> for GridError {
    fn from(error: openraft::error::Fatal<u64>) -> Self {
        Self::Consensus(error.to_string())
    }
}

impl GridError {
    /// An I/O failure while doing `what`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

/// A grid result.
pub type Result<T, E = GridError> = std::result::Result<T, E>;

/// Returns early with a [`GridError::Cluster`] formatted from the arguments.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::GridError::Cluster(format!($($arg)*)))
    };
}
pub(crate) use bail;
