//! The memcached endpoint's counters and the `stats` groups built from them.
//!
//! What is real: every command and hit/miss counter below is counted as memcached counts it
//! (per key for retrievals, per storage command whose data arrived for `cmd_set`), and
//! `curr_items`, `bytes`, `evictions` and `limit_maxbytes` come from the memcached cache
//! itself. What is not: Weft has no slab allocator, so `stats slabs` and `stats items` show
//! one pseudo class (`1`) holding every item, and memcached's allocator and LRU internals
//! (pages, chunk sizes beyond that class, LRU segments, crawler, hash table) are 0 or left
//! out; `rusage_*` are 0.

use std::sync::atomic::{AtomicU64, Ordering};

use weft_core::Cache;

use crate::ServerContext;

/// Counters of the memcached endpoint, shared by its connections on every port.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) curr_connections: AtomicU64,
    pub(crate) total_connections: AtomicU64,
    pub(crate) cmd_get: AtomicU64,
    pub(crate) cmd_set: AtomicU64,
    pub(crate) cmd_flush: AtomicU64,
    pub(crate) cmd_touch: AtomicU64,
    pub(crate) get_hits: AtomicU64,
    pub(crate) get_misses: AtomicU64,
    pub(crate) delete_hits: AtomicU64,
    pub(crate) delete_misses: AtomicU64,
    pub(crate) incr_hits: AtomicU64,
    pub(crate) incr_misses: AtomicU64,
    pub(crate) decr_hits: AtomicU64,
    pub(crate) decr_misses: AtomicU64,
    pub(crate) cas_hits: AtomicU64,
    pub(crate) cas_misses: AtomicU64,
    pub(crate) cas_badval: AtomicU64,
    pub(crate) touch_hits: AtomicU64,
    pub(crate) touch_misses: AtomicU64,
    pub(crate) store_too_large: AtomicU64,
    pub(crate) store_no_memory: AtomicU64,
    pub(crate) total_items: AtomicU64,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
}

/// Adds one to a counter.
pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Counters {
    /// `stats reset`: zeroes what memcached's `stats_reset` zeroes (not the connection
    /// gauges).
    pub(crate) fn reset(&self) {
        for counter in [
            &self.total_connections,
            &self.cmd_get,
            &self.cmd_set,
            &self.cmd_flush,
            &self.cmd_touch,
            &self.get_hits,
            &self.get_misses,
            &self.delete_hits,
            &self.delete_misses,
            &self.incr_hits,
            &self.incr_misses,
            &self.decr_hits,
            &self.decr_misses,
            &self.cas_hits,
            &self.cas_misses,
            &self.cas_badval,
            &self.touch_hits,
            &self.touch_misses,
            &self.store_too_large,
            &self.store_no_memory,
            &self.total_items,
            &self.bytes_read,
            &self.bytes_written,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

/// One statistic: its name and its value as sent.
pub(crate) type Stat = (String, Vec<u8>);

fn number(name: &str, value: u64) -> Stat {
    (name.to_owned(), value.to_string().into_bytes())
}

fn text(name: &str, value: &str) -> Stat {
    (name.to_owned(), value.as_bytes().to_vec())
}

/// Which statistics a `stats` request asks for.
pub(crate) enum Group {
    /// `stats`
    General,
    /// `stats items`
    Items,
    /// `stats slabs`
    Slabs,
    /// `stats settings`
    Settings,
    /// `stats sizes`
    Sizes,
}

impl Group {
    /// The group named by a `stats` argument; `None` for groups Weft does not have.
    pub(crate) fn parse(name: &[u8]) -> Option<Self> {
        Some(match name {
            b"" => Self::General,
            b"items" => Self::Items,
            b"slabs" => Self::Slabs,
            b"settings" => Self::Settings,
            b"sizes" => Self::Sizes,
            _ => return None,
        })
    }
}

/// The statistics of `group`, in memcached's order.
pub(crate) fn collect(group: &Group, context: &ServerContext, cache: &Cache) -> Vec<Stat> {
    let counters = &context.memcached.counters;
    let items = u64::try_from(cache.size()).unwrap_or(u64::MAX);
    let bytes = u64::try_from(cache.memory_bytes()).unwrap_or(u64::MAX);
    match group {
        Group::General => general(context, cache, items, bytes),
        Group::Items => {
            // memcached lists only classes holding items.
            if items == 0 {
                return Vec::new();
            }
            let evictions = cache.statistics().evictions;
            let mut stats = vec![
                number("items:1:number", items),
                number("items:1:number_hot", 0),
                number("items:1:number_warm", 0),
                number("items:1:number_cold", items),
                number("items:1:age_hot", 0),
                number("items:1:age_warm", 0),
                number("items:1:age", 0),
                number("items:1:mem_requested", bytes),
                number("items:1:evicted", evictions),
                number("items:1:evicted_nonzero", 0),
                number("items:1:evicted_time", 0),
                number("items:1:outofmemory", read(&counters.store_no_memory)),
                number("items:1:tailrepairs", 0),
                number("items:1:reclaimed", 0),
                number("items:1:expired_unfetched", 0),
                number("items:1:evicted_unfetched", 0),
                number("items:1:evicted_active", 0),
                number("items:1:crawler_reclaimed", 0),
                number("items:1:crawler_items_checked", 0),
                number("items:1:lrutail_reflocked", 0),
                number("items:1:moves_to_cold", 0),
                number("items:1:moves_to_warm", 0),
                number("items:1:moves_within_lru", 0),
                number("items:1:direct_reclaims", 0),
            ];
            for name in ["hot", "warm", "cold", "temp"] {
                stats.push(number(&format!("items:1:hits_to_{name}"), 0));
            }
            stats
        }
        Group::Slabs => {
            let item_max = context.settings.memcached_item_bytes_max as u64;
            vec![
                number("1:chunk_size", item_max),
                number("1:chunks_per_page", 1),
                number("1:total_pages", items),
                number("1:total_chunks", items),
                number("1:used_chunks", items),
                number("1:free_chunks", 0),
                number("1:free_chunks_end", 0),
                number("1:get_hits", read(&counters.get_hits)),
                number("1:cmd_set", read(&counters.cmd_set)),
                number("1:delete_hits", read(&counters.delete_hits)),
                number("1:incr_hits", read(&counters.incr_hits)),
                number("1:decr_hits", read(&counters.decr_hits)),
                number("1:cas_hits", read(&counters.cas_hits)),
                number("1:cas_badval", read(&counters.cas_badval)),
                number("1:touch_hits", read(&counters.touch_hits)),
                number("active_slabs", 1),
                number("total_malloced", bytes),
            ]
        }
        Group::Settings => settings(context, cache),
        Group::Sizes => vec![text("sizes_status", "disabled")],
    }
}

fn limit_maxbytes(cache: &Cache) -> u64 {
    cache.config().memory.max_size_bytes.unwrap_or(0)
}

fn threads() -> u64 {
    tokio::runtime::Handle::try_current().map_or(1, |handle| handle.metrics().num_workers() as u64)
}

fn general(context: &ServerContext, cache: &Cache, items: u64, bytes: u64) -> Vec<Stat> {
    let counters = &context.memcached.counters;
    let now_ms = cache.clock().now_ms();
    vec![
        number("pid", u64::from(std::process::id())),
        number("uptime", context.started.elapsed().as_secs()),
        number("time", now_ms / 1000),
        text("version", weft_memcached::MEMCACHED_VERSION),
        number("pointer_size", usize::BITS.into()),
        text("rusage_user", "0.000000"),
        text("rusage_system", "0.000000"),
        number("max_connections", context.settings.connections_max as u64),
        number("curr_connections", read(&counters.curr_connections)),
        number("total_connections", read(&counters.total_connections)),
        number("rejected_connections", 0),
        number("cmd_get", read(&counters.cmd_get)),
        number("cmd_set", read(&counters.cmd_set)),
        number("cmd_flush", read(&counters.cmd_flush)),
        number("cmd_touch", read(&counters.cmd_touch)),
        number("cmd_meta", 0),
        number("get_hits", read(&counters.get_hits)),
        number("get_misses", read(&counters.get_misses)),
        number("get_expired", 0),
        number("get_flushed", 0),
        number("delete_misses", read(&counters.delete_misses)),
        number("delete_hits", read(&counters.delete_hits)),
        number("incr_misses", read(&counters.incr_misses)),
        number("incr_hits", read(&counters.incr_hits)),
        number("decr_misses", read(&counters.decr_misses)),
        number("decr_hits", read(&counters.decr_hits)),
        number("cas_misses", read(&counters.cas_misses)),
        number("cas_hits", read(&counters.cas_hits)),
        number("cas_badval", read(&counters.cas_badval)),
        number("touch_hits", read(&counters.touch_hits)),
        number("touch_misses", read(&counters.touch_misses)),
        number("store_too_large", read(&counters.store_too_large)),
        number("store_no_memory", read(&counters.store_no_memory)),
        number("auth_cmds", 0),
        number("auth_errors", 0),
        number("bytes_read", read(&counters.bytes_read)),
        number("bytes_written", read(&counters.bytes_written)),
        number("limit_maxbytes", limit_maxbytes(cache)),
        number("accepting_conns", 1),
        number("threads", threads()),
        number("bytes", bytes),
        number("curr_items", items),
        number("total_items", read(&counters.total_items)),
        number("evictions", cache.statistics().evictions),
        number("reclaimed", 0),
    ]
}

fn settings(context: &ServerContext, cache: &Cache) -> Vec<Stat> {
    let port = context
        .settings
        .memcached_listen
        .unwrap_or(context.local_addr)
        .port();
    let evictions = if cache.config().memory.is_bounded() {
        "on"
    } else {
        "off"
    };
    vec![
        number("maxbytes", limit_maxbytes(cache)),
        number("maxconns", context.settings.connections_max as u64),
        number("tcpport", u64::from(port)),
        number("udpport", 0),
        number(
            "verbosity",
            u64::from(context.memcached.verbosity.load(Ordering::Relaxed)),
        ),
        text("evictions", evictions),
        number("num_threads", threads()),
        text("cas_enabled", "yes"),
        text("binding_protocol", "auto-negotiate"),
        text("auth_enabled_sasl", "no"),
        text("auth_enabled_ascii", "no"),
        number(
            "item_size_max",
            context.settings.memcached_item_bytes_max as u64,
        ),
        text("flush_enabled", "yes"),
        text("cache", cache.name()),
    ]
}
