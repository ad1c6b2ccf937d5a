//! Request errors and how they become responses: a status and a plain-text reason, as
//! Infinispan answers (its `RestRequestHandler` maps argument, encoding and configuration
//! errors to 400, unknown caches and keys to 404, anything else to 500 with a text body).

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use weft_core::{CacheError, ManagerError, StructureKind};

/// A request that cannot be served, and why. Every handler returns `Result<_, RestError>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RestError {
    status: StatusCode,
    message: String,
    /// The `WWW-Authenticate` challenge a 401 carries.
    challenge: Option<&'static str>,
}

impl RestError {
    /// An error with this status and reason.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            challenge: None,
        }
    }

    /// 401: credentials are needed, with the `WWW-Authenticate` challenge that says which.
    pub(crate) fn unauthorized(message: impl Into<String>, challenge: &'static str) -> Self {
        Self {
            challenge: Some(challenge),
            ..Self::new(StatusCode::UNAUTHORIZED, message)
        }
    }

    /// 403: the user authenticated, but may not do this.
    pub(crate) fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    /// 400: the request itself is malformed.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 503: the cluster could not do it now (a member unreachable, no consensus leader).
    pub(crate) fn unavailable(message: String) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// 404 for a cache that does not exist.
    pub(crate) fn no_cache(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("cache `{name}` does not exist"),
        )
    }

    /// 404 for a key that has no live entry.
    pub(crate) fn no_entry() -> Self {
        Self::new(StatusCode::NOT_FOUND, "no entry for this key")
    }

    /// 409 for a key that holds a Redis data structure (written over RESP): it has no value
    /// as bytes to answer with. Writes are not refused; they replace it, as Redis' SET does.
    pub(crate) fn holds_structure(kind: StructureKind) -> Self {
        Self::new(StatusCode::CONFLICT, kind.unreadable_message())
    }

    /// 500: something failed on our side.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl From<CacheError> for RestError {
    fn from(error: CacheError) -> Self {
        let status = match &error {
            // 507 names the cause (the cache's bound) where Infinispan's 500 does not;
            // clients that treat any 5xx as a failed write behave the same.
            CacheError::ContainerFull { .. } => StatusCode::INSUFFICIENT_STORAGE,
            CacheError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            // The cache was removed between lookup and operation: to the client it is gone.
            CacheError::Removed { .. } => StatusCode::NOT_FOUND,
            // A partition, or a node not joined yet: retry.
            CacheError::Persistence(
                weft_core::PersistenceError::Degraded { .. }
                | weft_core::PersistenceError::NotJoined { .. }
                | weft_core::PersistenceError::NotOwner { .. }
                | weft_core::PersistenceError::Unavailable { .. },
            ) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, error.to_string())
    }
}

impl From<ManagerError> for RestError {
    /// Every manager error is about the request (a taken or invalid name, a clash of RESP
    /// databases), and Infinispan answers 400 to all of them, "already exists" included.
    fn from(error: ManagerError) -> Self {
        Self::bad_request(error.to_string())
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        // Logged here, where the error is handled; server-side failures deserve attention,
        // client mistakes only when debugging.
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, reason = %self.message, "REST request failed");
        } else {
            tracing::debug!(status = %self.status, reason = %self.message, "REST request refused");
        }
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            self.message,
        )
            .into_response();
        if let Some(challenge) = self.challenge {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static(challenge),
            );
        }
        response
    }
}

/// The fallback for paths no route matches.
pub(crate) async fn no_route() -> RestError {
    RestError::new(StatusCode::NOT_FOUND, "no such REST resource")
}

/// The fallback for a known path with a method it does not support (axum adds `Allow`).
pub(crate) async fn method_not_allowed() -> RestError {
    RestError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this resource",
    )
}
