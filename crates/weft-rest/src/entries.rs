//! `/rest/v2/caches/{cache}/{key}`: read, write and remove one entry.
//!
//! | Method | Cache call | Answers |
//! |---|---|---|
//! | GET, HEAD | `get_entry` | 200 with value and metadata headers, 304/412 by preconditions, 404, 409 for a Redis structure |
//! | PUT | `put`, or `compute` under preconditions | 204, 304/412 by preconditions |
//! | POST | `put_if_absent` | 204, 409 "An entry already exists" |
//! | DELETE | `delete`, or `compute` under preconditions | 204, 404, 412 |
//!
//! A key written by Redis' collection commands (LPUSH, HSET, SADD, ZADD…) holds a structure,
//! not bytes: reading it answers 409 naming its type, while PUT and DELETE replace or remove
//! it as they would any entry (as Redis' SET and DEL do).

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, EXPIRES, LAST_MODIFIED};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;
use weft_core::{Cache, CacheEntry, Compute, WriteOptions, transcode};

use crate::error::RestError;
use crate::headers::{
    self, CREATED, LAST_USED, MAX_IDLE, Preconditions, Refusal, TIME_TO_LIVE, ValueType,
    body_format, negotiate,
};
use crate::keys::KeyEncoding;
use crate::{QueryParams, Shared, query_params};

/// Value of the time headers when the entry has no such time (Infinispan's "none").
const NONE: i64 = -1;
const MILLIS_PER_SECOND: u64 = 1_000;

/// The response to 409 on POST, word for word as Infinispan sends it.
pub(crate) const ENTRY_EXISTS: &str = "An entry already exists";

/// The cache and key a request addresses (the key as the cache stores it).
struct Target {
    cache: Cache,
    key: Vec<u8>,
}

impl Target {
    /// A request body converted to the cache's value media type; 415 when it has no form
    /// there (a JSON object for a ProtoStream cache, say).
    fn value_in<'a>(
        &self,
        headers: &HeaderMap,
        value: &'a [u8],
    ) -> Result<std::borrow::Cow<'a, [u8]>, RestError> {
        let stored = self.cache.value_format();
        transcode(value, body_format(headers)?, stored)
            .map_err(|e| RestError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, e.to_string()))
    }
}

/// Finds the cache and decodes the key from the raw path. axum's path extractors would
/// refuse keys that are not UTF-8 once decoded; keys are bytes, so the last two raw
/// segments are decoded here (the route guarantees there are two, and a `/` inside a key
/// arrives as `%2F`, so it cannot split them).
fn target(state: &Shared, uri: &Uri, headers: &HeaderMap) -> Result<Target, RestError> {
    let path = uri.path();
    let (rest, raw_key) = path
        .rsplit_once('/')
        .ok_or_else(|| RestError::bad_request("missing key in path"))?;
    let raw_cache = rest.rsplit_once('/').map_or(rest, |(_, cache)| cache);
    let name = percent_decode_str(raw_cache)
        .decode_utf8()
        .map_err(|_| RestError::bad_request("cache name is not UTF-8 once percent-decoded"))?;
    let cache = state
        .manager()
        .cache(&name)
        .ok_or_else(|| RestError::no_cache(&name))?;
    let encoding = KeyEncoding::from_headers(headers)?;
    let key = encoding.decode(raw_key)?;
    let key = transcode(&key, encoding.format(), cache.key_format())
        .map_err(|e| RestError::bad_request(format!("key: {e}")))?
        .into_owned();
    Ok(Target { cache, key })
}

/// Entry routes take no actions; `?action=distribution` and the like are refused rather
/// than silently answered with the value.
fn refuse_actions(query: QueryParams) -> Result<(), RestError> {
    match query_params(query)?.get("action") {
        Some(action) => Err(RestError::bad_request(format!(
            "unsupported action `{action}` on an entry"
        ))),
        None => Ok(()),
    }
}

/// Whole seconds of a duration in ms, or −1.
fn seconds_or_none(ms: Option<u64>) -> HeaderValue {
    HeaderValue::from(ms.map_or(NONE, |ms| {
        i64::try_from(ms / MILLIS_PER_SECOND).unwrap_or(i64::MAX)
    }))
}

/// A time in ms, or −1.
fn millis_or_none(ms: Option<u64>) -> HeaderValue {
    HeaderValue::from(ms.map_or(NONE, |ms| i64::try_from(ms).unwrap_or(i64::MAX)))
}

/// The caching headers of an entry, shared by 200 and 304 answers: `ETag`, `Expires` and
/// `Cache-Control` (seconds until expiry, or `no-cache` when it is due).
fn caching_headers(entry: &CacheEntry, now_ms: u64, headers: &mut HeaderMap) {
    headers.insert(ETAG, headers::etag(entry));
    if let Some(expires_ms) = entry.metadata().expires_at_ms() {
        if let Some(date) = headers::http_date(expires_ms) {
            headers.insert(EXPIRES, date);
        }
        let fresh_seconds = expires_ms.saturating_sub(now_ms) / MILLIS_PER_SECOND;
        let control = if fresh_seconds > 0 {
            HeaderValue::from_str(&format!("max-age={fresh_seconds}"))
                .unwrap_or_else(|_| HeaderValue::from_static("no-cache"))
        } else {
            HeaderValue::from_static("no-cache")
        };
        headers.insert(CACHE_CONTROL, control);
    }
}

/// Present when another node forwarded the request here (see [`crate::ForwardedByNode`]).
type ByNode = Option<Extension<crate::ForwardedByNode>>;

/// Runs an entry request on the node that owns its key, when that is another node; `None`
/// when it runs here (not clustered, owned here, or forwarded here by another node). Only
/// the request extension the server sets says a request was forwarded: nothing a client
/// sends does, or a client could store a copy on a node that does not own the key.
async fn forwarded(
    state: &Shared,
    by_node: &ByNode,
    method: axum::http::Method,
    uri: &Uri,
    request_headers: &HeaderMap,
    body: Bytes,
    write: bool,
) -> Option<Result<Response, RestError>> {
    if by_node.is_some() {
        return None;
    }
    let forwarder = state.forwarder()?;
    let target = target(state, uri, request_headers).ok()?;
    let node = forwarder.route(&target.cache, &target.key, write)?;
    let mut request = axum::http::Request::new(body);
    *request.method_mut() = method;
    *request.uri_mut() = uri.clone();
    *request.headers_mut() = request_headers.clone();
    Some(match forwarder.forward(node, request).await {
        Ok(response) => Ok(response.map(Body::from).into_response()),
        Err(reason) => Err(RestError::new(StatusCode::SERVICE_UNAVAILABLE, reason)),
    })
}

/// GET and HEAD (axum routes HEAD here and drops the body).
pub(crate) async fn get(
    State(state): State<Shared>,
    by_node: ByNode,
    method: axum::http::Method,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
) -> Result<Response, RestError> {
    refuse_actions(query)?;
    if let Some(answer) = forwarded(
        &state,
        &by_node,
        method,
        &uri,
        &request_headers,
        Bytes::new(),
        false,
    )
    .await
    {
        return answer;
    }
    // A read of a clustered cache may wait for the writes it saw to reach every owner.
    durable(|| get_now(&state, &uri, &request_headers)).await
}

fn get_now(state: &Shared, uri: &Uri, request_headers: &HeaderMap) -> Result<Response, RestError> {
    let target = target(state, uri, request_headers)?;
    let preconditions = Preconditions::from_headers(request_headers)?;
    let min_fresh = headers::min_fresh_seconds(request_headers)?;
    let entry = target
        .cache
        .get_entry(&target.key)?
        .ok_or_else(RestError::no_entry)?;
    if let Some(cell) = entry.structure() {
        return Err(RestError::holds_structure(cell.lock().kind()));
    }
    let now_ms = target.cache.clock().now_ms();
    let metadata = entry.metadata();
    // `Cache-Control: min-fresh` asks only for entries that stay fresh that long;
    // Infinispan answers 404 for the others.
    if let (Some(min_fresh), Some(expires_ms)) = (min_fresh, metadata.expires_at_ms())
        && expires_ms.saturating_sub(now_ms) / MILLIS_PER_SECOND <= min_fresh
    {
        return Err(RestError::no_entry());
    }
    let mut headers = HeaderMap::new();
    caching_headers(&entry, now_ms, &mut headers);
    if let Err(refusal) = preconditions.check_read(&entry) {
        if refusal == Refusal::Failed {
            headers.clear();
        }
        return Ok((refusal.status(), headers).into_response());
    }
    let stored = target.cache.value_format();
    let wanted = negotiate(request_headers).unwrap_or_else(|| ValueType::default_for(stored));
    let value = match transcode(entry.value(), stored, wanted.format()) {
        // Unchanged or unwrapped (a ProtoStream string read as text): a view of the entry.
        Ok(std::borrow::Cow::Borrowed(part)) => {
            let whole = entry.value_bytes();
            let inside = whole.as_ptr_range();
            if inside.start <= part.as_ptr() && part.as_ptr_range().end <= inside.end {
                whole.slice_ref(part)
            } else {
                Bytes::copy_from_slice(part)
            }
        }
        Ok(std::borrow::Cow::Owned(converted)) => Bytes::from(converted),
        Err(error) => {
            return Err(RestError::new(
                StatusCode::NOT_ACCEPTABLE,
                error.to_string(),
            ));
        }
    };
    headers.insert(CONTENT_TYPE, wanted.content_type());
    if let Some(created) = metadata.created_ms.and_then(headers::http_date) {
        headers.insert(LAST_MODIFIED, created);
    }
    headers.insert(TIME_TO_LIVE, seconds_or_none(metadata.lifespan_ms));
    headers.insert(MAX_IDLE, seconds_or_none(metadata.max_idle_ms));
    headers.insert(CREATED, millis_or_none(metadata.created_ms));
    headers.insert(LAST_USED, millis_or_none(metadata.last_used_ms));
    // Also for HEAD: axum sets Content-Length from the body, then drops the body, so HEAD
    // reports the value's true length. The body is a view of the entry, not a copy.
    Ok((StatusCode::OK, headers, Body::from(value)).into_response())
}

/// PUT: store the value (upsert), subject to `If-Match`, `If-None-Match` and
/// `If-Unmodified-Since`.
fn put_now(
    State(state): State<Shared>,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
    value: Bytes,
) -> Result<Response, RestError> {
    refuse_actions(query)?;
    let target = target(&state, &uri, &request_headers)?;
    let expiry = headers::expiry(&request_headers)?;
    let preconditions = Preconditions::from_headers(&request_headers)?;
    let options = WriteOptions::default()
        .expiry(expiry)
        .ignore_return_values();
    let value = target.value_in(&request_headers, &value)?;
    if !preconditions.constrain_write() {
        target.cache.put(&target.key, &value, &options)?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    // Preconditions are checked against the live entry under the key's lock, so no other
    // write can slip between the check and the store.
    let value = value.into_owned();
    let outcome = target.cache.compute(&target.key, &options, |current| {
        match preconditions.check_write(current, true) {
            Ok(()) => Compute::Put(value, expiry, Ok(())),
            Err(refusal) => Compute::Keep(Err(refusal)),
        }
    })?;
    Ok(match outcome {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(refusal) => refusal.status().into_response(),
    })
}

/// POST: store the value only if the key has no live entry.
fn post_now(
    State(state): State<Shared>,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
    value: Bytes,
) -> Result<Response, RestError> {
    refuse_actions(query)?;
    let target = target(&state, &uri, &request_headers)?;
    let expiry = headers::expiry(&request_headers)?;
    let options = WriteOptions::default().expiry(expiry);
    let value = target.value_in(&request_headers, &value)?;
    match target.cache.put_if_absent(&target.key, &value, &options)? {
        Some(_) => Err(RestError::new(StatusCode::CONFLICT, ENTRY_EXISTS)),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// DELETE: remove the entry, subject to `If-Match`, `If-None-Match` and
/// `If-Unmodified-Since`.
fn delete_now(
    State(state): State<Shared>,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
) -> Result<Response, RestError> {
    refuse_actions(query)?;
    let target = target(&state, &uri, &request_headers)?;
    let preconditions = Preconditions::from_headers(&request_headers)?;
    if !preconditions.constrain_write() {
        return if target.cache.delete(&target.key)? {
            Ok(StatusCode::NO_CONTENT.into_response())
        } else {
            Err(RestError::no_entry())
        };
    }
    /// What the atomic check decided.
    enum Outcome {
        Removed,
        Absent,
        Refused(Refusal),
    }
    let outcome = target
        .cache
        .compute(&target.key, &WriteOptions::default(), |current| {
            let Some(entry) = current else {
                return Compute::Keep(Outcome::Absent);
            };
            match preconditions.check_write(Some(entry), false) {
                Ok(()) => Compute::Remove(Outcome::Removed),
                Err(refusal) => Compute::Keep(Outcome::Refused(refusal)),
            }
        })?;
    match outcome {
        Outcome::Removed => Ok(StatusCode::NO_CONTENT.into_response()),
        Outcome::Absent => Err(RestError::no_entry()),
        Outcome::Refused(refusal) => Ok(refusal.status().into_response()),
    }
}

/// Runs a write handler, then waits until the stores of the cache it wrote (if any) have made
/// the write durable before answering.
async fn durable(
    write: impl FnOnce() -> Result<Response, RestError>,
) -> Result<Response, RestError> {
    let (result, durability) = weft_core::collect_durability(write);
    durability
        .wait()
        .await
        .map_err(|error| RestError::from(weft_core::CacheError::from(error)))?;
    result
}

/// PUT: see [`put_now`].
pub(crate) async fn put(
    state: State<Shared>,
    by_node: ByNode,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
    value: Bytes,
) -> Result<Response, RestError> {
    if let Some(answer) = forwarded(
        &state,
        &by_node,
        axum::http::Method::PUT,
        &uri,
        &request_headers,
        value.clone(),
        true,
    )
    .await
    {
        return answer;
    }
    durable(|| put_now(state, uri, request_headers, query, value)).await
}

/// POST: see [`post_now`].
pub(crate) async fn post(
    state: State<Shared>,
    by_node: ByNode,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
    value: Bytes,
) -> Result<Response, RestError> {
    if let Some(answer) = forwarded(
        &state,
        &by_node,
        axum::http::Method::POST,
        &uri,
        &request_headers,
        value.clone(),
        true,
    )
    .await
    {
        return answer;
    }
    durable(|| post_now(state, uri, request_headers, query, value)).await
}

/// DELETE: see [`delete_now`].
pub(crate) async fn delete(
    state: State<Shared>,
    by_node: ByNode,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
) -> Result<Response, RestError> {
    if let Some(answer) = forwarded(
        &state,
        &by_node,
        axum::http::Method::DELETE,
        &uri,
        &request_headers,
        Bytes::new(),
        true,
    )
    .await
    {
        return answer;
    }
    durable(|| delete_now(state, uri, request_headers, query)).await
}
