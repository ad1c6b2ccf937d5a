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
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, EXPIRES, LAST_MODIFIED};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;
use weft_core::operation::{Applied, Failure, Function, Functions, Operation, WriteSpec};
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

/// Runs `operation` on `cache`: at its key's owner, wherever that is, when the cache is
/// clustered; here otherwise. Either way it is acknowledged once as durable (and
/// replicated) as the cache promises.
async fn run(state: &Shared, cache: &Cache, operation: Operation) -> Result<Applied, RestError> {
    if cache.config().mode.is_clustered()
        && let Some(cluster) = state.forwarder()
    {
        return Ok(cluster.execute(cache.clone(), operation).await?);
    }
    let (applied, durability) =
        weft_core::collect_durability(|| operation.apply(cache, functions()));
    let applied = applied.map_err(|failure| match failure {
        Failure::Cache(error) => RestError::from(error),
        other => RestError::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    })?;
    durability
        .wait()
        .await
        .map_err(|error| RestError::from(weft_core::CacheError::from(error)))?;
    Ok(applied)
}

/// The functions REST's operations invoke: registered on every member of a grid (see
/// [`register_functions`]), and here for caches that are not clustered.
fn functions() -> &'static Functions {
    static FUNCTIONS: std::sync::LazyLock<Functions> = std::sync::LazyLock::new(|| {
        let functions = Functions::default();
        register_functions(&functions);
        functions
    });
    &FUNCTIONS
}

/// The name a write under preconditions runs as at its key's owner.
const CONDITIONAL: &str = "weft.rest.conditional";

/// Registers the functions REST's operations invoke at their keys' owners.
pub fn register_functions(functions: &Functions) {
    functions.register(CONDITIONAL, std::sync::Arc::new(ConditionalWrite));
}

/// A PUT (with a value) or DELETE (without) under HTTP preconditions, checked against the
/// live entry under the key's lock, so no other write slips between the check and the
/// write.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Conditional {
    preconditions: Preconditions,
    value: Option<(Vec<u8>, weft_core::Expiry)>,
}

/// What a [`Conditional`] write did.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum Decided {
    Written,
    Absent,
    Refused(Refusal),
}

/// Runs [`Conditional`] writes.
#[derive(Debug)]
struct ConditionalWrite;

impl Function for ConditionalWrite {
    fn apply(
        &self,
        cache: &Cache,
        key: &[u8],
        argument: &[u8],
    ) -> Result<Vec<u8>, weft_core::CacheError> {
        let Ok(write) = postcard::from_bytes::<Conditional>(argument) else {
            return Ok(Vec::new());
        };
        let is_put = write.value.is_some();
        let decided = cache.compute(key, &WriteOptions::default(), |current| {
            if !is_put && current.is_none() {
                return Compute::Keep(Decided::Absent);
            }
            if let Err(refusal) = write.preconditions.check_write(current, is_put) {
                return Compute::Keep(Decided::Refused(refusal));
            }
            match write.value {
                Some((value, expiry)) => Compute::Put(value, expiry, Decided::Written),
                None => Compute::Remove(Decided::Written),
            }
        })?;
        Ok(postcard::to_stdvec(&decided).unwrap_or_default())
    }
}

/// Runs a write under preconditions at its key's owner; its response.
async fn conditional(
    state: &Shared,
    target: &Target,
    write: &Conditional,
) -> Result<Response, RestError> {
    let operation = Operation::Invoke {
        function: CONDITIONAL.to_owned(),
        key: target.key.clone(),
        argument: postcard::to_stdvec(write).unwrap_or_default(),
        write: true,
    };
    let Applied::Bytes(answer) = run(state, &target.cache, operation).await? else {
        return Err(RestError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "unexpected outcome",
        ));
    };
    let decided: Decided = postcard::from_bytes(&answer).map_err(|_| {
        RestError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "a malformed answer from the key's owner",
        )
    })?;
    Ok(match decided {
        Decided::Written => StatusCode::NO_CONTENT.into_response(),
        Decided::Absent => return Err(RestError::no_entry()),
        Decided::Refused(refusal) => refusal.status().into_response(),
    })
}

/// GET and HEAD (axum routes HEAD here and drops the body).
pub(crate) async fn get(
    State(state): State<Shared>,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
) -> Result<Response, RestError> {
    refuse_actions(query)?;
    let target = target(&state, &uri, &request_headers)?;
    let preconditions = Preconditions::from_headers(&request_headers)?;
    let min_fresh = headers::min_fresh_seconds(&request_headers)?;
    let operation = Operation::Get {
        key: target.key.clone(),
    };
    let Applied::Entry(entry) = run(&state, &target.cache, operation).await? else {
        return Err(RestError::no_entry());
    };
    let entry = entry.ok_or_else(RestError::no_entry)?;
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
    let wanted = negotiate(&request_headers).unwrap_or_else(|| ValueType::default_for(stored));
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
pub(crate) async fn put(
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
    let value = target.value_in(&request_headers, &value)?.into_owned();
    if preconditions.constrain_write() {
        let write = Conditional {
            preconditions,
            value: Some((value, expiry)),
        };
        return conditional(&state, &target, &write).await;
    }
    let options = WriteOptions::default()
        .expiry(expiry)
        .ignore_return_values();
    let operation = Operation::Put {
        key: target.key.clone(),
        value,
        spec: WriteSpec::of(&options),
    };
    run(&state, &target.cache, operation).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// POST: store the value only if the key has no live entry.
pub(crate) async fn post(
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
    let operation = Operation::PutIfAbsent {
        key: target.key.clone(),
        value: target.value_in(&request_headers, &value)?.into_owned(),
        spec: WriteSpec::of(&options),
    };
    match run(&state, &target.cache, operation).await? {
        Applied::Entry(Some(_)) => Err(RestError::new(StatusCode::CONFLICT, ENTRY_EXISTS)),
        _ => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

/// DELETE: remove the entry, subject to `If-Match`, `If-None-Match` and
/// `If-Unmodified-Since`.
pub(crate) async fn delete(
    State(state): State<Shared>,
    uri: Uri,
    request_headers: HeaderMap,
    query: QueryParams,
) -> Result<Response, RestError> {
    refuse_actions(query)?;
    let target = target(&state, &uri, &request_headers)?;
    let preconditions = Preconditions::from_headers(&request_headers)?;
    if preconditions.constrain_write() {
        let write = Conditional {
            preconditions,
            value: None,
        };
        return conditional(&state, &target, &write).await;
    }
    let options = WriteOptions::default();
    let operation = Operation::Remove {
        key: target.key.clone(),
        spec: WriteSpec::of(&options),
    };
    match run(&state, &target.cache, operation).await? {
        Applied::Entry(Some(_)) => Ok(StatusCode::NO_CONTENT.into_response()),
        _ => Err(RestError::no_entry()),
    }
}
