//! Weft's failures as Python exceptions: one base, `weft.WeftError`, and a subclass per
//! thing a caller may want to catch on its own.

use pyo3::exceptions::PyException;
use pyo3::{PyErr, create_exception};

create_exception!(
    weft,
    WeftError,
    PyException,
    "Every error Weft raises (argument mistakes are TypeError and ValueError)."
);
create_exception!(
    weft,
    CacheNotFoundError,
    WeftError,
    "No cache of that name (in the manager, the grid member, or on the server)."
);
create_exception!(
    weft,
    CacheExistsError,
    WeftError,
    "create_cache for a name that already exists."
);
create_exception!(
    weft,
    CacheFullError,
    WeftError,
    "A bounded cache with when-full = \"exception\" refused a new entry."
);
create_exception!(
    weft,
    EntryTooLargeError,
    WeftError,
    "A key or value larger than an entry (or the protocol) can hold."
);
create_exception!(
    weft,
    CacheRemovedError,
    WeftError,
    "The cache was removed from its manager after this handle was taken."
);
create_exception!(
    weft,
    ConfigError,
    WeftError,
    "A configuration that does not parse or whose settings do not go together."
);
create_exception!(
    weft,
    PersistenceError,
    WeftError,
    "The cache's stores failed, or a write was not made as durable or replicated as promised."
);
create_exception!(
    weft,
    ClusterError,
    WeftError,
    "The grid could not complete the request (consensus, no topology yet, not settled in time)."
);
create_exception!(
    weft,
    TransportError,
    WeftError,
    "A server or member could not be reached, the connection broke, or no answer came in time."
);
create_exception!(
    weft,
    ServerError,
    WeftError,
    "The server answered with an error, or broke the protocol."
);
create_exception!(
    weft,
    UnsupportedError,
    WeftError,
    "The operation is not available on this kind of cache (e.g. iterating a remote cache)."
);
create_exception!(
    weft,
    ClosedError,
    WeftError,
    "The grid member has left, or the client was closed."
);

/// A failure from any of the engines, carried out of a section that runs without the GIL and
/// turned into a Python exception after it.
#[derive(Debug)]
pub(crate) enum Error {
    Cache(weft_core::CacheError),
    Manager(weft_core::ManagerError),
    Config(weft_core::ConfigError),
    Grid(weft_grid::GridError),
    Client(weft_client::Error),
    /// The module's tokio runtime could not start.
    Runtime(String),
    /// A cache that does not exist.
    NotFound(String),
    /// The grid left, or the client was closed.
    Closed(&'static str),
    Unsupported(String),
}

impl From<weft_core::CacheError> for Error {
    fn from(error: weft_core::CacheError) -> Self {
        Self::Cache(error)
    }
}

impl From<weft_core::ManagerError> for Error {
    fn from(error: weft_core::ManagerError) -> Self {
        Self::Manager(error)
    }
}

impl From<weft_core::ConfigError> for Error {
    fn from(error: weft_core::ConfigError) -> Self {
        Self::Config(error)
    }
}

impl From<weft_grid::GridError> for Error {
    fn from(error: weft_grid::GridError) -> Self {
        Self::Grid(error)
    }
}

impl From<weft_client::Error> for Error {
    fn from(error: weft_client::Error) -> Self {
        Self::Client(error)
    }
}

fn cache_error(error: weft_core::CacheError) -> PyErr {
    use weft_core::CacheError;
    let message = error.to_string();
    match error {
        CacheError::ContainerFull { .. } => CacheFullError::new_err(message),
        CacheError::TooLarge { .. } => EntryTooLargeError::new_err(message),
        CacheError::Removed { .. } => CacheRemovedError::new_err(message),
        CacheError::Persistence(_) => PersistenceError::new_err(message),
        _ => WeftError::new_err(message),
    }
}

fn manager_error(error: weft_core::ManagerError) -> PyErr {
    use weft_core::ManagerError;
    let message = error.to_string();
    match error {
        ManagerError::AlreadyExists(_) => CacheExistsError::new_err(message),
        ManagerError::Persistence { .. } => PersistenceError::new_err(message),
        _ => ConfigError::new_err(message),
    }
}

fn grid_error(error: weft_grid::GridError) -> PyErr {
    use weft_grid::GridError;
    match error {
        GridError::Cache(error) => cache_error(error),
        GridError::Persistence(error) => PersistenceError::new_err(error.to_string()),
        GridError::Transport(error) => TransportError::new_err(error.to_string()),
        other => ClusterError::new_err(other.to_string()),
    }
}

fn client_error(error: weft_client::Error) -> PyErr {
    use weft_client::Error;
    let message = error.to_string();
    match error {
        Error::Connect { .. }
        | Error::ConnectionLost { .. }
        | Error::Timeout { .. }
        | Error::NoServerReachable { .. } => TransportError::new_err(message),
        Error::Server { .. } | Error::Protocol { .. } | Error::UnexpectedResponse(_) => {
            ServerError::new_err(message)
        }
        Error::CacheNotFound(_) => CacheNotFoundError::new_err(message),
        Error::Encode(_) => EntryTooLargeError::new_err(message),
        Error::Config(_) => ConfigError::new_err(message),
        Error::Closed => ClosedError::new_err(message),
        _ => WeftError::new_err(message),
    }
}

impl From<Error> for PyErr {
    fn from(error: Error) -> Self {
        match error {
            Error::Cache(error) => cache_error(error),
            Error::Manager(error) => manager_error(error),
            Error::Config(error) => ConfigError::new_err(error.to_string()),
            Error::Grid(error) => grid_error(error),
            Error::Client(error) => client_error(error),
            Error::Runtime(reason) => WeftError::new_err(reason),
            Error::NotFound(name) => {
                CacheNotFoundError::new_err(format!("no cache named `{name}`"))
            }
            Error::Closed(what) => ClosedError::new_err(what),
            Error::Unsupported(what) => UnsupportedError::new_err(what),
        }
    }
}
