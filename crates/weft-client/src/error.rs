//! What can go wrong, as one typed error.

use std::net::SocketAddr;
use std::time::Duration;

use weft_hotrod::Status;

/// A failed client operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No server could be reached (every candidate refused or failed), after the retries.
    #[error("no server reachable for this request after {attempts} attempts; last error: {last}")]
    NoServerReachable {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: Box<Error>,
    },
    /// Connecting to a server failed or took longer than the connect timeout.
    #[error("connecting to {address} failed: {reason}")]
    Connect {
        /// The server.
        address: SocketAddr,
        /// Why.
        reason: String,
    },
    /// The connection broke (closed by the server, reset, or unreadable) before the
    /// response arrived. The request may or may not have run.
    #[error("connection to {address} lost: {reason}")]
    ConnectionLost {
        /// The server.
        address: SocketAddr,
        /// Why.
        reason: String,
    },
    /// No response within the request timeout. The request may or may not have run.
    #[error("no response from {address} within {timeout:?}")]
    Timeout {
        /// The server.
        address: SocketAddr,
        /// The timeout in force.
        timeout: Duration,
    },
    /// The server answered with an error status.
    #[error("server error {status:?}: {message}")]
    Server {
        /// The status.
        status: Status,
        /// The server's message.
        message: String,
    },
    /// The cache does not exist on the server.
    #[error("cache `{0}` does not exist on the server")]
    CacheNotFound(String),
    /// The server's response broke the protocol; the connection was closed.
    #[error("malformed response from {address}: {reason}")]
    Protocol {
        /// The server.
        address: SocketAddr,
        /// What was wrong.
        reason: String,
    },
    /// The request cannot be written (a key or value longer than the protocol carries).
    #[error("request cannot be encoded: {0}")]
    Encode(#[from] weft_hotrod::EncodeError),
    /// The response has an unexpected shape for the request (a server bug).
    #[error("unexpected response: {0}")]
    UnexpectedResponse(String),
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
}

impl Error {
    /// Whether another server may succeed where this attempt failed, without risk of running
    /// a request twice that the first server surely did not run, or that is safe to repeat:
    /// the server could not be reached, closed the connection, or said it is shutting down or
    /// suspects the owner. `idempotent` requests are also retried after a lost connection
    /// or a timeout.
    #[must_use]
    pub fn is_retryable(&self, idempotent: bool) -> bool {
        match self {
            Self::Connect { .. } => true,
            Self::ConnectionLost { .. } | Self::Timeout { .. } => idempotent,
            Self::Server { status, .. } => {
                matches!(
                    status,
                    Status::NodeSuspected | Status::IllegalLifecycleState
                )
            }
            _ => false,
        }
    }
}

/// The result of a client operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;
