//! JSON shapes shared by several routes: statistics in Infinispan's field names, and cache
//! configurations in Infinispan's `{"local-cache": {...}}` wrapper.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use weft_core::{CacheConfig, CacheMode, CacheStatistics};

const NANOS_PER_MILLI: u64 = 1_000_000;

/// Statistics as Infinispan's `Stats` JSON (`?action=stats`, `/container/stats`): its
/// field names where one exists (times in ms, plus `_nanos` variants as Infinispan 15
/// also gives), then Weft's additions (`expirations`, `statistics_enabled`).
pub(crate) fn statistics(stats: &CacheStatistics) -> Value {
    statistics_with_stores(stats, None)
}

/// [`statistics`] plus, for a cache with stores, what they did (`store` object).
pub(crate) fn statistics_with_stores(
    stats: &CacheStatistics,
    stores: Option<weft_core::PersistenceStats>,
) -> Value {
    let mut value = json!({
        "statistics_enabled": stats.enabled,
        "time_since_start": stats.time_since_start_secs,
        "time_since_reset": stats.time_since_reset_secs,
        "current_number_of_entries": stats.entries,
        "current_number_of_entries_in_memory": stats.entries,
        "off_heap_memory_used": 0,
        "data_memory_used": stats.memory_bytes,
        "stores": stats.stores,
        "retrievals": stats.hits.saturating_add(stats.misses),
        "hits": stats.hits,
        "misses": stats.misses,
        "remove_hits": stats.remove_hits,
        "remove_misses": stats.remove_misses,
        "evictions": stats.evictions,
        "expirations": stats.expirations,
        "average_read_time": stats.average_read_time_nanos / NANOS_PER_MILLI,
        "average_read_time_nanos": stats.average_read_time_nanos,
        "average_write_time": stats.average_write_time_nanos / NANOS_PER_MILLI,
        "average_write_time_nanos": stats.average_write_time_nanos,
        "average_remove_time": stats.average_remove_time_nanos / NANOS_PER_MILLI,
        "average_remove_time_nanos": stats.average_remove_time_nanos,
        "required_minimum_number_of_nodes": 1,
    });
    if let (Some(stores), Some(map)) = (stores, value.as_object_mut()) {
        map.insert(
            "store".to_owned(),
            json!({
                "preloaded_entries": stores.preloaded_entries,
                "preload_time_ms": stores.preload_ms,
                "loads": stores.loads,
                "writes": stores.stores,
                "write_behind_backlog": stores.write_behind_backlog,
                "poisoned": stores.poisoned,
            }),
        );
    }
    value
}

/// A cache's configuration as Infinispan writes it — `{"local-cache": {...}}`,
/// `{"distributed-cache": {"mode": "SYNC", ...}}` — in the attribute names
/// `CacheConfig::from_json` reads, so the output can create an identical cache. Unset
/// options are left out rather than written as `null` (as Infinispan does).
pub(crate) fn configuration(config: &CacheConfig) -> Value {
    let mut inner = serde_json::to_value(config).unwrap_or(Value::Null);
    drop_nulls(&mut inner);
    if let Value::Object(map) = &mut inner {
        map.remove("mode");
        let replication = map.remove("replication");
        if config.mode.is_clustered() {
            let sync = match config.replication {
                weft_core::Replication::Sync => "SYNC",
                weft_core::Replication::Async => "ASYNC",
            };
            map.insert("mode".to_owned(), json!(sync));
        } else {
            drop(replication);
            map.remove("owners");
        }
        if config.mode == CacheMode::Replicated {
            map.remove("owners");
        }
    }
    let mut wrapped = serde_json::Map::new();
    wrapped.insert(cache_type(config).to_owned(), inner);
    Value::Object(wrapped)
}

/// Infinispan's name for the kind of cache: `local-cache`, `distributed-cache` or
/// `replicated-cache`.
pub(crate) fn cache_type(config: &CacheConfig) -> &'static str {
    match config.mode {
        CacheMode::Distributed => "distributed-cache",
        CacheMode::Replicated => "replicated-cache",
        _ => "local-cache",
    }
}

/// Infinispan's cache mode name (`LOCAL`, `DIST_SYNC`, `REPL_ASYNC`, ...).
pub(crate) fn cache_mode(config: &CacheConfig) -> &'static str {
    let sync = config.replication == weft_core::Replication::Sync;
    match (config.mode, sync) {
        (CacheMode::Distributed, true) => "DIST_SYNC",
        (CacheMode::Distributed, false) => "DIST_ASYNC",
        (CacheMode::Replicated, true) => "REPL_SYNC",
        (CacheMode::Replicated, false) => "REPL_ASYNC",
        _ => "LOCAL",
    }
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, field| !field.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// A JSON body with `Content-Type: application/json`.
pub(crate) fn respond(value: &Value) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}
