//! `/rest/v2/caches` and `/rest/v2/caches/{cache}`: list, inspect, create and remove
//! caches, and the per-cache actions selected by `?action=` (size, keys, entries, stats,
//! config, clear, stats-reset).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{RawPathParams, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use weft_core::{Cache, CacheConfig, CacheEntry, Format, transcode};

use crate::error::RestError;
use crate::headers::content_type;
use crate::json;
use crate::keys::KeyEncoding;
use crate::{QueryParams, Shared, query_params};

/// The cache name from the path (axum has percent-decoded it; names are UTF-8).
fn cache_name(
    path: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
) -> Result<String, RestError> {
    let path = path.map_err(|rejection| RestError::bad_request(rejection.body_text()))?;
    path.iter()
        .find(|(name, _)| *name == "cache")
        .map(|(_, value)| value.to_owned())
        .ok_or_else(|| RestError::bad_request("missing cache name"))
}

fn existing(state: &Shared, name: &str) -> Result<Cache, RestError> {
    state
        .manager()
        .cache(name)
        .ok_or_else(|| RestError::no_cache(name))
}

fn unknown_action(action: &str) -> RestError {
    RestError::bad_request(format!("unknown action `{action}`"))
}

/// `GET /rest/v2/caches`: the names as a JSON array; `?action=detailed` adds a summary of
/// each cache.
pub(crate) async fn list(
    State(state): State<Shared>,
    query: QueryParams,
) -> Result<Response, RestError> {
    let params = query_params(query)?;
    match params.get("action").map(String::as_str) {
        None => Ok(json::respond(&json!(state.manager().cache_names()))),
        Some("detailed") => {
            let caches: Vec<Value> = state
                .manager()
                .caches()
                .iter()
                .map(|cache| {
                    let config = cache.config();
                    json!({
                        "name": cache.name(),
                        "status": "RUNNING",
                        "type": json::cache_type(config),
                        "health": "HEALTHY",
                        "simple_cache": false,
                        "transactional": false,
                        "persistent": false,
                        "persistent_storage": false,
                        "bounded": config.memory.is_bounded(),
                        "secured": false,
                        "indexed": false,
                        "has_remote_backup": false,
                        "rebalancing_enabled": false,
                        "statistics": config.statistics,
                    })
                })
                .collect();
            Ok(json::respond(&Value::Array(caches)))
        }
        Some(action) => Err(unknown_action(action)),
    }
}

/// `HEAD /rest/v2/caches/{cache}`: 204 if it exists, else 404 (no body either way).
pub(crate) async fn head(
    State(state): State<Shared>,
    path: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
) -> StatusCode {
    match cache_name(path) {
        Ok(name) if state.manager().cache(&name).is_some() => StatusCode::NO_CONTENT,
        Ok(_) => StatusCode::NOT_FOUND,
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

/// `GET /rest/v2/caches/{cache}`: details, or a read-only action.
pub(crate) async fn get(
    State(state): State<Shared>,
    path: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    headers: HeaderMap,
    query: QueryParams,
) -> Result<Response, RestError> {
    let name = cache_name(path)?;
    let params = query_params(query)?;
    let cache = existing(&state, &name)?;
    match params.get("action").map(String::as_str) {
        None => Ok(json::respond(&details(&cache))),
        Some("size") => match state.forwarder() {
            Some(cluster) if cache.config().mode.is_clustered() => {
                let size = cluster.size(cache).await.map_err(RestError::unavailable)?;
                Ok(json::respond(&json!(size)))
            }
            _ => Ok(json::respond(&json!(cache.size()))),
        },
        Some("stats") => Ok(json::respond(&json::statistics_with_stores(
            &cache.statistics(),
            cache.persistence_stats(),
        ))),
        Some("config") => Ok(json::respond(&json::configuration(cache.config()))),
        Some("keys") => {
            let listing = Listing::from_request(&headers, &params)?;
            listing.run(&state, cache, Items::Keys).await
        }
        Some("entries") => {
            let listing = Listing::from_request(&headers, &params)?;
            let metadata = match params.get("metadata").map(String::as_str) {
                None | Some("false") => false,
                Some("true" | "") => true,
                Some(other) => {
                    return Err(RestError::bad_request(format!(
                        "invalid metadata `{other}`: expected true or false"
                    )));
                }
            };
            let items = if metadata {
                Items::EntriesWithMetadata
            } else {
                Items::Entries
            };
            listing.run(&state, cache, items).await
        }
        Some(action) => Err(unknown_action(action)),
    }
}

/// The details Infinispan's `GET /rest/v2/caches/{cache}` returns, with the values a
/// single-node, in-memory, non-indexed Weft cache has.
fn details(cache: &Cache) -> Value {
    let config = cache.config();
    let max_size_bytes = config
        .memory
        .max_size_bytes
        .map_or(-1, |bytes| i64::try_from(bytes).unwrap_or(i64::MAX));
    json!({
        "stats": json::statistics_with_stores(&cache.statistics(), cache.persistence_stats()),
        "size": cache.size(),
        "configuration": json::configuration(config),
        "rehash_in_progress": false,
        "indexing_in_progress": false,
        "rebalancing_enabled": false,
        "bounded": config.memory.is_bounded(),
        "indexed": false,
        "persistent": false,
        "transactional": false,
        "secured": false,
        "has_remote_backup": false,
        "queryable": false,
        "statistics": config.statistics,
        "mode": json::cache_mode(config),
        "storage_type": "HEAP",
        "max_size": config.memory.max_size_bytes.map_or_else(String::new, |bytes| bytes.to_string()),
        "max_size_bytes": max_size_bytes,
        "key_storage": "application/octet-stream",
        "value_storage": "application/octet-stream",
    })
}

/// What a listing holds per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Items {
    /// The key alone, as a string.
    Keys,
    /// `{"key": …, "value": …}`.
    Entries,
    /// Entries with their expiration times and version.
    EntriesWithMetadata,
}

/// A `keys` or `entries` listing: how many, and how to write bytes.
struct Listing {
    limit: usize,
    encoding: KeyEncoding,
    /// The cache's key and value media types.
    stored: (Format, Format),
}

impl Listing {
    /// Reads `limit` (negative = all, Infinispan's `-1`) and the encoding from
    /// `Key-Content-Type`.
    fn from_request(
        headers: &HeaderMap,
        params: &HashMap<String, String>,
    ) -> Result<Self, RestError> {
        let limit = match params.get("limit") {
            None => usize::MAX,
            Some(text) => match text.trim().parse::<i64>() {
                Ok(limit) if limit < 0 => usize::MAX,
                Ok(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
                Err(_) => {
                    return Err(RestError::bad_request(format!(
                        "invalid limit `{text}`: expected a whole number (-1 = all)"
                    )));
                }
            },
        };
        Ok(Self {
            limit,
            encoding: KeyEncoding::from_headers(headers)?,
            stored: (Format::Opaque, Format::Opaque),
        })
    }

    /// Stored bytes as the listing shows them: converted to text (or left as bytes when
    /// they have no text form), then encoded.
    fn show(&self, bytes: &[u8], stored: Format) -> String {
        match transcode(bytes, stored, self.encoding.format()) {
            Ok(shown) => self.encoding.encode(&shown),
            Err(_) => self.encoding.encode(bytes),
        }
    }

    fn key(&self, entry: &CacheEntry) -> String {
        self.show(entry.key(), self.stored.0)
    }

    fn value(&self, entry: &CacheEntry) -> String {
        self.show(entry.value(), self.stored.1)
    }

    /// Walks the cache on a blocking thread (a large cache takes a while, and the async
    /// workers must keep serving) and answers the JSON array.
    ///
    /// A clustered cache is listed from the whole cluster, each segment from the member that
    /// reads it, every entry once.
    async fn run(self, state: &Shared, cache: Cache, items: Items) -> Result<Response, RestError> {
        let stored = (cache.key_format(), cache.value_format());
        // A key holding a Redis structure has no value to show: entry listings leave it out
        // (as a GET answers 409), key listings keep it (it is there to delete).
        let keep: fn(&CacheEntry) -> bool = match items {
            Items::Keys => |_| true,
            Items::Entries | Items::EntriesWithMetadata => |entry| entry.structure().is_none(),
        };
        let listed: Box<dyn Iterator<Item = CacheEntry> + Send> = match state.forwarder() {
            Some(cluster) if cache.config().mode.is_clustered() => Box::new(
                cluster
                    .list(cache, self.limit, keep)
                    .await
                    .map_err(RestError::unavailable)?
                    .into_iter(),
            ),
            _ => Box::new(cache.iter().filter(keep)),
        };
        let body = tokio::task::spawn_blocking(move || {
            let this = Listing { stored, ..self };
            // Written item by item into one buffer: the answer for a large cache is big
            // enough without also holding every item as a JSON tree first.
            let mut out = Vec::from(&b"["[..]);
            for (index, entry) in listed.take(self.limit).enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                let item = match items {
                    Items::Keys => Value::String(this.key(&entry)),
                    Items::Entries => json!({
                        "key": this.key(&entry),
                        "value": this.value(&entry),
                    }),
                    Items::EntriesWithMetadata => this.entry_with_metadata(&entry),
                };
                serde_json::to_writer(&mut out, &item)?;
            }
            out.push(b']');
            Ok::<_, serde_json::Error>(out)
        })
        .await
        .map_err(|error| RestError::internal(format!("listing failed: {error}")))?
        .map_err(|error| RestError::internal(format!("listing failed: {error}")))?;
        Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
    }

    /// One `entries` item; times are ms since the epoch or -1, as Infinispan writes them.
    fn entry_with_metadata(&self, entry: &CacheEntry) -> Value {
        let meta = entry.metadata();
        let millis = |ms: Option<u64>| ms.map_or(-1, |ms| i64::try_from(ms).unwrap_or(i64::MAX));
        let seconds = |ms: Option<u64>| millis(ms.map(|ms| ms / 1_000));
        json!({
            "key": self.key(entry),
            "value": self.value(entry),
            "timeToLiveSeconds": seconds(meta.lifespan_ms),
            "maxIdleTimeSeconds": seconds(meta.max_idle_ms),
            "created": millis(meta.created_ms),
            "lastUsed": millis(meta.last_used_ms),
            "expireTime": millis(meta.expires_at_ms()),
            "version": meta.version,
        })
    }
}

/// The configuration in a create request's body: JSON (Infinispan's `{"local-cache":…}`
/// or Weft's own shape) or TOML; an empty body means the default configuration.
fn parse_config(headers: &HeaderMap, body: &Bytes) -> Result<Option<CacheConfig>, RestError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let unsupported = |what: &str| {
        RestError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "{what}: send the configuration as application/json (Infinispan's \
                 {{\"local-cache\": {{...}}}} or Weft's own shape) or application/toml"
            ),
        )
    };
    let media = content_type(headers)?.ok_or_else(|| unsupported("missing Content-Type"))?;
    let text = std::str::from_utf8(body)
        .map_err(|_| RestError::bad_request("the configuration is not UTF-8 text"))?;
    let parsed = match media.essence.as_str() {
        "application/json" => CacheConfig::from_json("<json>", text),
        "application/toml" | "application/x-toml" | "text/toml" => {
            CacheConfig::from_toml("<toml>", text)
        }
        other => return Err(unsupported(&format!("unsupported Content-Type `{other}`"))),
    };
    parsed
        .map(Some)
        .map_err(|error| RestError::bad_request(error.to_string()))
}

/// The configuration a create request asks for: Infinispan's template named by
/// `?template=` (with an empty body), or the body's (see [`parse_config`]).
fn requested_config(
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Option<CacheConfig>, RestError> {
    let Some(name) = params.get("template") else {
        return parse_config(headers, body);
    };
    if !body.iter().all(u8::is_ascii_whitespace) {
        // Infinispan would use the template and ignore the body; saying so beats guessing
        // which of the two the client meant.
        return Err(RestError::bad_request(
            "give either ?template= or a configuration in the body, not both",
        ));
    }
    weft_core::config::template(name)
        .map(Some)
        .map_err(|error| RestError::bad_request(error.to_string()))
}

/// Creates cache `name`: on every node through the cluster when the server is clustered
/// and the configuration is (a local cache of a clustered server is this node's alone),
/// else here.
async fn create(state: &Shared, name: &str, config: CacheConfig) -> Result<(), RestError> {
    match state.forwarder() {
        Some(cluster) if config.mode.is_clustered() => cluster
            .define(name.to_owned(), config)
            .await
            .map_err(RestError::unavailable),
        _ => state
            .manager()
            .create_cache(name, config)
            .map(drop)
            .map_err(RestError::from),
    }
}

/// `POST /rest/v2/caches/{cache}`: create (400 if it exists), or a write action.
pub(crate) async fn post(
    State(state): State<Shared>,
    path: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    headers: HeaderMap,
    query: QueryParams,
    body: Bytes,
) -> Result<Response, RestError> {
    let name = cache_name(path)?;
    let params = query_params(query)?;
    match params.get("action").map(String::as_str) {
        None => {
            let config = requested_config(&params, &headers, &body)?.unwrap_or_default();
            if state.manager().cache(&name).is_some() {
                return Err(weft_core::ManagerError::AlreadyExists(name).into());
            }
            create(&state, &name, config).await?;
            Ok(StatusCode::OK.into_response())
        }
        Some("clear") => {
            let cache = existing(&state, &name)?;
            match state.forwarder() {
                Some(cluster) if cache.config().mode.is_clustered() => {
                    cluster.clear(cache).await.map_err(RestError::unavailable)?;
                }
                _ => cache.clear()?,
            }
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Some("stats-reset") => {
            existing(&state, &name)?.reset_statistics();
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        Some(action) => Err(unknown_action(action)),
    }
}

/// `PUT /rest/v2/caches/{cache}`: create, or 200 if it exists with the same configuration
/// (or the body is empty). A running cache's configuration cannot change, so a different
/// one is refused with 400 rather than silently ignored.
pub(crate) async fn put(
    State(state): State<Shared>,
    path: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
    headers: HeaderMap,
    query: QueryParams,
    body: Bytes,
) -> Result<Response, RestError> {
    let name = cache_name(path)?;
    let params = query_params(query)?;
    if let Some(action) = params.get("action") {
        return Err(unknown_action(action));
    }
    let config = requested_config(&params, &headers, &body)?;
    let exists = |config: Option<&CacheConfig>| {
        let cache = state.manager().cache(&name)?;
        Some(match config {
            Some(config) if config != cache.config() => Err(RestError::bad_request(format!(
                "cache `{name}` exists with a different configuration, which cannot be \
                 changed while it runs; delete and recreate it"
            ))),
            _ => Ok(StatusCode::OK.into_response()),
        })
    };
    if let Some(answer) = exists(config.as_ref()) {
        return answer;
    }
    match create(&state, &name, config.clone().unwrap_or_default()).await {
        Ok(()) => Ok(StatusCode::OK.into_response()),
        // A concurrent create of the same name won the race: the cache exists, and the
        // answer is the one it would have been had it come first.
        Err(error) => exists(config.as_ref()).unwrap_or(Err(error)),
    }
}

/// `DELETE /rest/v2/caches/{cache}`: 200, or 404 if there was no such cache. A clustered
/// server removes it from every node, unless it is a local cache (this node's alone).
pub(crate) async fn delete(
    State(state): State<Shared>,
    path: Result<RawPathParams, axum::extract::rejection::RawPathParamsRejection>,
) -> Result<Response, RestError> {
    let name = cache_name(path)?;
    let local = state
        .manager()
        .cache(&name)
        .is_some_and(|cache| !cache.config().mode.is_clustered());
    let removed = match state.forwarder() {
        Some(cluster) if !local => cluster
            .remove(name.clone())
            .await
            .map_err(RestError::unavailable)?,
        _ => state.manager().remove_cache(&name),
    };
    if removed {
        Ok(StatusCode::OK.into_response())
    } else {
        Err(RestError::no_cache(&name))
    }
}
