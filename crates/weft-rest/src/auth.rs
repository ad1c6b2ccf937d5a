//! HTTP authentication and authorization: with a [`Guard`](crate::Guard) configured, every
//! request but the health status a probe reads (`GET …/health/status`) goes on only as the
//! guard decides, shown its HTTP Basic credentials, method, path and action. A request
//! without credentials, or with wrong ones, is answered `401` with a `WWW-Authenticate:
//! Basic` challenge, a user without the permission `403`; one that passes carries
//! [`Authenticated`](crate::Authenticated) to the handlers.

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::error::RestError;
use crate::{Authenticated, Shared};

/// The challenge of a `401`.
pub(crate) const CHALLENGE: &str = "Basic realm=\"weft\", charset=\"UTF-8\"";
/// The challenge of a `401` from a server that also takes bearer tokens.
pub(crate) const CHALLENGE_WITH_BEARER: &str =
    "Basic realm=\"weft\", charset=\"UTF-8\", Bearer realm=\"weft\"";
/// The challenge of a `401` to a refused bearer token (RFC 6750).
pub(crate) const INVALID_BEARER: &str = "Bearer realm=\"weft\", error=\"invalid_token\"";

/// Paths answered without credentials: what a liveness or readiness probe reads, and the
/// console's files (they hold no data; the page then logs in to the REST API).
fn anonymous(request: &Request) -> bool {
    let path = request.uri().path();
    (request.method() == Method::GET
        && matches!(
            path,
            "/rest/v2/container/health/status"
                | "/rest/v2/container/health/ready"
                | "/rest/v2/cache-managers/default/health/status"
        ))
        || (matches!(*request.method(), Method::GET | Method::HEAD)
            && crate::console::is_console_path(path))
}

/// Whether a script sent the request and asks for no browser login prompt
/// (`X-Requested-With: XMLHttpRequest`, as the console and many frameworks send): its `401`
/// then carries no `WWW-Authenticate` challenge, which browsers answer with their own
/// password dialog over the page's login form.
fn from_script(request: &Request) -> bool {
    request
        .headers()
        .get("x-requested-with")
        .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"XMLHttpRequest"))
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

/// The token of an `Authorization: Bearer` header.
fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = scheme_and_credentials(value)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    std::str::from_utf8(token).ok()
}

/// The `action` query parameter, if any, read by the same parser as the handlers' (axum's
/// `Query`, where a repeated name's last value wins): a request naming it twice is refused,
/// so that what is authorized is what runs. A query that does not parse gives none here; the
/// handlers then refuse it.
fn action(request: &Request) -> Result<Option<String>, RestError> {
    let Ok(axum::extract::Query(pairs)) =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(request.uri())
    else {
        return Ok(None);
    };
    let mut actions = pairs
        .into_iter()
        .filter(|(name, _)| name == "action")
        .map(|(_, value)| value);
    let first = actions.next();
    if actions.next().is_some() {
        return Err(RestError::bad_request("`action` is given more than once"));
    }
    Ok(first)
}

/// The middleware.
pub(crate) async fn require(
    State(state): State<Shared>,
    mut request: Request,
    next: Next,
) -> Response {
    let Some(guard) = state.guard.clone() else {
        return next.run(request).await;
    };
    if anonymous(&request) {
        return next.run(request).await;
    }
    let credentials = basic(&request);
    let client = request
        .extensions()
        .get::<crate::ClientAddress>()
        .map(|crate::ClientAddress(address)| *address);
    let action = match action(&request) {
        Ok(action) => action,
        Err(error) => return error.into_response(),
    };
    let quiet = from_script(&request);
    let first_attempt = std::time::Instant::now();
    let verdict = loop {
        let verdict = guard(crate::Access {
            client,
            credentials: credentials
                .as_ref()
                .map(|(user, password)| (user.as_slice(), password.as_slice())),
            bearer: bearer(&request),
            certificate: request
                .extensions()
                .get::<crate::ClientCertificate>()
                .map(|crate::ClientCertificate(user)| user.as_str()),
            method: request.method(),
            path: request.uri().path(),
            action: action.as_deref(),
            first_attempt,
        });
        match verdict {
            // The credentials wait for their turn (the guard's throttle); the request with
            // them.
            crate::Verdict::Wait(due) => tokio::time::sleep_until(due.into()).await,
            verdict => break verdict,
        }
    };
    match verdict {
        crate::Verdict::Allowed(user) => {
            if let Some(name) = user {
                request.extensions_mut().insert(Authenticated(name));
            }
            next.run(request).await
        }
        crate::Verdict::Unauthenticated(reason, challenge) => {
            let mut response = RestError::unauthorized(reason, challenge.header()).into_response();
            if quiet {
                response.headers_mut().remove(header::WWW_AUTHENTICATE);
            }
            response
        }
        crate::Verdict::Forbidden(message) => RestError::forbidden(message).into_response(),
        crate::Verdict::Throttled(message, retry_after) => {
            let mut response =
                RestError::new(StatusCode::TOO_MANY_REQUESTS, message).into_response();
            if let Ok(value) =
                header::HeaderValue::from_str(&retry_after.as_secs().max(1).to_string())
            {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        // Waited for above: the loop breaks on any other verdict.
        crate::Verdict::Wait(_) => RestError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "authentication undecided",
        )
        .into_response(),
    }
}
