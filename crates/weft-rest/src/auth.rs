//! HTTP authentication: with an [`Authenticator`](crate::Authenticator) configured, every
//! request must carry HTTP Basic credentials it accepts, except the health status a probe
//! reads (`GET …/health/status`). A request without them, or with wrong ones, is answered
//! `401` with a `WWW-Authenticate: Basic` challenge; one that passes carries
//! [`Authenticated`](crate::Authenticated) to the handlers.

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::error::RestError;
use crate::{Authenticated, Shared};

/// The challenge of a `401`.
pub(crate) const CHALLENGE: &str = "Basic realm=\"weft\", charset=\"UTF-8\"";

/// Paths answered without credentials: what a liveness or readiness probe reads.
fn anonymous(request: &Request) -> bool {
    request.method() == Method::GET
        && matches!(
            request.uri().path(),
            "/rest/v2/container/health/status" | "/rest/v2/cache-managers/default/health/status"
        )
}

/// An `Authorization` header's scheme and credentials (`Basic dXNlcjpwYXNz`).
pub(crate) fn scheme_and_credentials(value: &[u8]) -> Option<(&[u8], &[u8])> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, credentials) = value.split_at(space);
    Some((scheme, credentials.trim_ascii()))
}

/// User name and password of Basic credentials (base64 of `user:password`).
pub(crate) fn basic_credentials(credentials: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials)
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// User name and password of an `Authorization: Basic` header.
fn basic(request: &Request) -> Option<(Vec<u8>, Vec<u8>)> {
    let value = request.headers().get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, credentials) = scheme_and_credentials(value)?;
    if !scheme.eq_ignore_ascii_case(b"basic") {
        return None;
    }
    basic_credentials(credentials)
}

/// The middleware.
pub(crate) async fn require(
    State(state): State<Shared>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(authenticator) = state.authenticator.clone() else {
        return next.run(request).await;
    };
    if anonymous(&request) {
        return next.run(request).await;
    }
    let Some((user, password)) = basic(&request) else {
        return RestError::unauthorized("authentication required", CHALLENGE).into_response();
    };
    let client = request
        .extensions()
        .get::<crate::ClientAddress>()
        .map(|crate::ClientAddress(address)| *address);
    match authenticator(client, &user, &password) {
        Some(name) => {
            request.extensions_mut().insert(Authenticated(name));
            next.run(request).await
        }
        None => RestError::unauthorized("wrong user name or password", CHALLENGE).into_response(),
    }
}
