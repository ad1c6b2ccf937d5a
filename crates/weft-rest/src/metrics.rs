//! `GET /metrics`: cache statistics in the Prometheus text exposition format 0.0.4, or in
//! OpenMetrics 1.0 when the scraper asks for `application/openmetrics-text` (as Infinispan
//! offers both).
//!
//! Written by hand rather than with `prometheus-client`: the statistics already live in
//! the caches as atomics and are read once per scrape, so no registry is needed; that crate
//! only writes OpenMetrics, while most scrapers and tools expect the 0.0.4 text by default;
//! and the format is a few lines of escaping rules, all tested here.
//!
//! Families (`cache` label on per-cache ones; counters end in `_total`):
//! `weft_cache_{hits,misses,stores,remove_hits,remove_misses,evictions,expirations}_total`,
//! `weft_cache_entries`, `weft_cache_memory_bytes`,
//! `weft_cache_average_{read,write,remove}_time_seconds`,
//! `weft_cache_time_since_{start,reset}_seconds`, `weft_cache_statistics_enabled`; for caches
//! with stores `weft_cache_store_{preloaded_entries,preload_seconds,loads_total,writes_total,
//! write_behind_backlog,poisoned}`; the same
//! counters and sizes summed as `weft_container_…`; `weft_caches`, `weft_uptime_seconds`
//! and `weft_build_info{version,node}`. Totals fall when a cache is removed or its
//! statistics are reset, which Prometheus treats as a counter reset. The server adds its
//! own families through [`MetricsWriter`] (`RestState::with_server_metrics`): the process,
//! client connections and request latencies.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use weft_core::{CacheStatistics, PersistenceStats};

use crate::Shared;

/// `Content-Type` of the Prometheus text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// `Content-Type` of OpenMetrics text.
const OPEN_METRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const NANOS_PER_SECOND: f64 = 1e9;

/// The kind of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// A sample's value.
#[derive(Debug, Clone, Copy)]
enum Number {
    Whole(u64),
    Real(f64),
}

/// One family: name (without `_total`), kind, help text.
struct Family {
    name: &'static str,
    kind: Kind,
    help: &'static str,
}

/// Reads one figure from a statistics snapshot.
type Reader = fn(&CacheStatistics) -> Number;

/// Per-cache families and how each reads a statistics snapshot.
const CACHE_FAMILIES: &[(Family, Reader)] = &[
    (
        Family {
            name: "weft_cache_hits",
            kind: Kind::Counter,
            help: "Reads that found a live entry.",
        },
        |s| Number::Whole(s.hits),
    ),
    (
        Family {
            name: "weft_cache_misses",
            kind: Kind::Counter,
            help: "Reads that found no entry.",
        },
        |s| Number::Whole(s.misses),
    ),
    (
        Family {
            name: "weft_cache_stores",
            kind: Kind::Counter,
            help: "Writes that stored a value.",
        },
        |s| Number::Whole(s.stores),
    ),
    (
        Family {
            name: "weft_cache_remove_hits",
            kind: Kind::Counter,
            help: "Removes that removed an entry.",
        },
        |s| Number::Whole(s.remove_hits),
    ),
    (
        Family {
            name: "weft_cache_remove_misses",
            kind: Kind::Counter,
            help: "Removes that found no entry.",
        },
        |s| Number::Whole(s.remove_misses),
    ),
    (
        Family {
            name: "weft_cache_evictions",
            kind: Kind::Counter,
            help: "Entries evicted to respect the memory bound.",
        },
        |s| Number::Whole(s.evictions),
    ),
    (
        Family {
            name: "weft_cache_expirations",
            kind: Kind::Counter,
            help: "Entries removed because they expired.",
        },
        |s| Number::Whole(s.expirations),
    ),
    (
        Family {
            name: "weft_cache_entries",
            kind: Kind::Gauge,
            help: "Entries in memory, including expired ones not yet purged.",
        },
        |s| Number::Whole(s.entries),
    ),
    (
        Family {
            name: "weft_cache_memory_bytes",
            kind: Kind::Gauge,
            help: "Bytes used by entries and their index slots.",
        },
        |s| Number::Whole(s.memory_bytes),
    ),
    (
        Family {
            name: "weft_cache_average_read_time_seconds",
            kind: Kind::Gauge,
            help: "Mean time of a read since the last reset.",
        },
        |s| seconds_from_nanos(s.average_read_time_nanos),
    ),
    (
        Family {
            name: "weft_cache_average_write_time_seconds",
            kind: Kind::Gauge,
            help: "Mean time of a write since the last reset.",
        },
        |s| seconds_from_nanos(s.average_write_time_nanos),
    ),
    (
        Family {
            name: "weft_cache_average_remove_time_seconds",
            kind: Kind::Gauge,
            help: "Mean time of a remove since the last reset.",
        },
        |s| seconds_from_nanos(s.average_remove_time_nanos),
    ),
    (
        Family {
            name: "weft_cache_time_since_start_seconds",
            kind: Kind::Gauge,
            help: "Seconds since the cache started.",
        },
        |s| Number::Whole(s.time_since_start_secs),
    ),
    (
        Family {
            name: "weft_cache_time_since_reset_seconds",
            kind: Kind::Gauge,
            help: "Seconds since the cache's statistics were last reset.",
        },
        |s| Number::Whole(s.time_since_reset_secs),
    ),
    (
        Family {
            name: "weft_cache_statistics_enabled",
            kind: Kind::Gauge,
            help: "1 if the cache collects statistics, else 0.",
        },
        |s| Number::Whole(u64::from(s.enabled)),
    ),
];

/// Container-wide families, summed over every cache.
const CONTAINER_FAMILIES: &[(Family, Reader)] = &[
    (
        Family {
            name: "weft_container_hits",
            kind: Kind::Counter,
            help: "Reads that found a live entry, over all caches.",
        },
        |s| Number::Whole(s.hits),
    ),
    (
        Family {
            name: "weft_container_misses",
            kind: Kind::Counter,
            help: "Reads that found no entry, over all caches.",
        },
        |s| Number::Whole(s.misses),
    ),
    (
        Family {
            name: "weft_container_stores",
            kind: Kind::Counter,
            help: "Writes that stored a value, over all caches.",
        },
        |s| Number::Whole(s.stores),
    ),
    (
        Family {
            name: "weft_container_remove_hits",
            kind: Kind::Counter,
            help: "Removes that removed an entry, over all caches.",
        },
        |s| Number::Whole(s.remove_hits),
    ),
    (
        Family {
            name: "weft_container_remove_misses",
            kind: Kind::Counter,
            help: "Removes that found no entry, over all caches.",
        },
        |s| Number::Whole(s.remove_misses),
    ),
    (
        Family {
            name: "weft_container_evictions",
            kind: Kind::Counter,
            help: "Entries evicted, over all caches.",
        },
        |s| Number::Whole(s.evictions),
    ),
    (
        Family {
            name: "weft_container_expirations",
            kind: Kind::Counter,
            help: "Entries expired, over all caches.",
        },
        |s| Number::Whole(s.expirations),
    ),
    (
        Family {
            name: "weft_container_entries",
            kind: Kind::Gauge,
            help: "Entries in memory, over all caches.",
        },
        |s| Number::Whole(s.entries),
    ),
    (
        Family {
            name: "weft_container_memory_bytes",
            kind: Kind::Gauge,
            help: "Bytes used by entries and index slots, over all caches.",
        },
        |s| Number::Whole(s.memory_bytes),
    ),
];

/// Reads one figure from a cache's store counters.
type StoreReader = fn(&PersistenceStats) -> Number;

/// Per-cache families of caches with stores.
const STORE_FAMILIES: &[(Family, StoreReader)] = &[
    (
        Family {
            name: "weft_cache_store_preloaded_entries",
            kind: Kind::Gauge,
            help: "Entries loaded from the stores when the cache started.",
        },
        |s| Number::Whole(s.preloaded_entries),
    ),
    (
        Family {
            name: "weft_cache_store_preload_seconds",
            kind: Kind::Gauge,
            help: "How long the preload took.",
        },
        |s| seconds_from_nanos(s.preload_ms.saturating_mul(1_000_000)),
    ),
    (
        Family {
            name: "weft_cache_store_loads",
            kind: Kind::Counter,
            help: "Entries read from a store because memory did not hold them.",
        },
        |s| Number::Whole(s.loads),
    ),
    (
        Family {
            name: "weft_cache_store_writes",
            kind: Kind::Counter,
            help: "Changes handed to the stores.",
        },
        |s| Number::Whole(s.stores),
    ),
    (
        Family {
            name: "weft_cache_store_write_behind_backlog",
            kind: Kind::Gauge,
            help: "Changes accepted by write-behind and not yet written to the stores.",
        },
        |s| Number::Whole(s.write_behind_backlog),
    ),
    (
        Family {
            name: "weft_cache_store_poisoned",
            kind: Kind::Gauge,
            help: "1 if a store failed a write or sync and refuses writes, else 0.",
        },
        |s| Number::Whole(u64::from(s.poisoned)),
    ),
];

fn seconds_from_nanos(nanos: u64) -> Number {
    // Precision loss above 2^53 ns (104 days per operation) is irrelevant here.
    #[allow(clippy::cast_precision_loss)]
    Number::Real(nanos as f64 / NANOS_PER_SECOND)
}

/// Builds one exposition in either format.
struct Exposition {
    out: String,
    open_metrics: bool,
}

impl Exposition {
    /// The name samples of `family` carry.
    fn sample_name(family: &Family) -> String {
        match family.kind {
            Kind::Counter => format!("{}_total", family.name),
            Kind::Gauge | Kind::Histogram => family.name.to_owned(),
        }
    }

    /// Writes the `# HELP` and `# TYPE` lines. The 0.0.4 format names a counter family
    /// by its sample name (`…_total`); OpenMetrics names it without the suffix.
    fn header(&mut self, family: &Family) {
        let name = if self.open_metrics {
            family.name.to_owned()
        } else {
            Self::sample_name(family)
        };
        let kind = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        // `fmt::Write` for `String` cannot fail.
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(family.help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// Writes one sample line.
    fn sample(&mut self, family: &Family, labels: &[(&str, &str)], value: Number) {
        let name = Self::sample_name(family);
        self.line(&name, labels, value);
    }

    /// Writes one line: `name{labels} value`.
    fn line(&mut self, name: &str, labels: &[(&str, &str)], value: Number) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (index, (name, label)) in labels.iter().enumerate() {
                if index > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{name}=\"{}\"", escape_label(label));
            }
            self.out.push('}');
        }
        let _ = match value {
            Number::Whole(whole) => writeln!(self.out, " {whole}"),
            Number::Real(real) => writeln!(self.out, " {real}"),
        };
    }

    fn finish(mut self) -> String {
        if self.open_metrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// Label values escape `\`, `"` and newlines.
fn escape_label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Help texts escape `\` and newlines.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Writes families into a `/metrics` exposition, in whichever format the scraper asked
/// for: a family's header first, then its samples.
pub struct MetricsWriter<'a> {
    exposition: &'a mut Exposition,
    family: Option<Family>,
}

impl std::fmt::Debug for MetricsWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsWriter")
            .field("family", &self.family.as_ref().map(|family| family.name))
            .finish_non_exhaustive()
    }
}

impl MetricsWriter<'_> {
    fn begin(&mut self, name: &'static str, kind: Kind, help: &'static str) {
        let family = Family { name, kind, help };
        self.exposition.header(&family);
        self.family = Some(family);
    }

    /// Starts a counter family; its samples are named `NAME_total`.
    pub fn counter(&mut self, name: &'static str, help: &'static str) {
        self.begin(name, Kind::Counter, help);
    }

    /// Starts a gauge family.
    pub fn gauge(&mut self, name: &'static str, help: &'static str) {
        self.begin(name, Kind::Gauge, help);
    }

    /// Starts a histogram family; write its series with [`MetricsWriter::histogram_sample`].
    pub fn histogram(&mut self, name: &'static str, help: &'static str) {
        self.begin(name, Kind::Histogram, help);
    }

    /// A whole-number sample of the current counter or gauge family.
    pub fn whole(&mut self, labels: &[(&str, &str)], value: u64) {
        if let Some(family) = self.family.take() {
            self.exposition
                .sample(&family, labels, Number::Whole(value));
            self.family = Some(family);
        }
    }

    /// A real-number sample of the current counter or gauge family.
    pub fn real(&mut self, labels: &[(&str, &str)], value: f64) {
        if let Some(family) = self.family.take() {
            self.exposition.sample(&family, labels, Number::Real(value));
            self.family = Some(family);
        }
    }

    /// One series of the current histogram family: `buckets` pairs each upper bound (in
    /// increasing order, without `+Inf`) with the observations at or below it (cumulative);
    /// `count` is every observation, the `+Inf` bucket.
    pub fn histogram_sample(
        &mut self,
        labels: &[(&str, &str)],
        buckets: &[(f64, u64)],
        sum: f64,
        count: u64,
    ) {
        let Some(family) = self.family.as_ref() else {
            return;
        };
        let bucket_name = format!("{}_bucket", family.name);
        let sum_name = format!("{}_sum", family.name);
        let count_name = format!("{}_count", family.name);
        for (bound, cumulative) in buckets {
            let bound = bound.to_string();
            let mut with_bound: Vec<(&str, &str)> = labels.to_vec();
            with_bound.push(("le", &bound));
            self.exposition
                .line(&bucket_name, &with_bound, Number::Whole(*cumulative));
        }
        let mut with_bound: Vec<(&str, &str)> = labels.to_vec();
        with_bound.push(("le", "+Inf"));
        self.exposition
            .line(&bucket_name, &with_bound, Number::Whole(count));
        self.exposition.line(&sum_name, labels, Number::Real(sum));
        self.exposition
            .line(&count_name, labels, Number::Whole(count));
    }
}

/// Whether the scraper asked for OpenMetrics.
fn wants_open_metrics(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"))
}

/// Renders every family for the current state.
fn render(state: &Shared, open_metrics: bool) -> String {
    let mut exposition = Exposition {
        out: String::with_capacity(8 * 1024),
        open_metrics,
    };
    let caches: Vec<(String, CacheStatistics)> = state
        .manager()
        .caches()
        .iter()
        .map(|cache| (cache.name().to_owned(), cache.statistics()))
        .collect();
    for (family, read) in CACHE_FAMILIES {
        exposition.header(family);
        for (name, stats) in &caches {
            exposition.sample(family, &[("cache", name)], read(stats));
        }
    }
    let stores: Vec<(String, PersistenceStats)> = state
        .manager()
        .caches()
        .iter()
        .filter_map(|cache| Some((cache.name().to_owned(), cache.persistence_stats()?)))
        .collect();
    if !stores.is_empty() {
        for (family, read) in STORE_FAMILIES {
            exposition.header(family);
            for (name, stats) in &stores {
                exposition.sample(family, &[("cache", name)], read(stats));
            }
        }
    }
    let mut total = CacheStatistics::default();
    for (_, stats) in &caches {
        total.accumulate(stats);
    }
    for (family, read) in CONTAINER_FAMILIES {
        exposition.header(family);
        exposition.sample(family, &[], read(&total));
    }
    let caches_family = Family {
        name: "weft_caches",
        kind: Kind::Gauge,
        help: "Caches defined.",
    };
    exposition.header(&caches_family);
    exposition.sample(
        &caches_family,
        &[],
        Number::Whole(u64::try_from(caches.len()).unwrap_or(u64::MAX)),
    );
    let uptime = Family {
        name: "weft_uptime_seconds",
        kind: Kind::Gauge,
        help: "Seconds since the server started.",
    };
    exposition.header(&uptime);
    exposition.sample(
        &uptime,
        &[],
        Number::Real(state.started().elapsed().as_secs_f64()),
    );
    let members = Family {
        name: "weft_cluster_members",
        kind: Kind::Gauge,
        help: "Nodes in the cluster as this node sees it, itself included.",
    };
    exposition.header(&members);
    exposition.sample(
        &members,
        &[],
        Number::Whole(u64::try_from(state.cluster_members().names.len()).unwrap_or(u64::MAX)),
    );
    cluster_families(&mut exposition, state);
    if let Some(write) = state.server_metrics() {
        let mut writer = MetricsWriter {
            exposition: &mut exposition,
            family: None,
        };
        write(&mut writer);
    }
    let build = Family {
        name: "weft_build_info",
        kind: Kind::Gauge,
        help: "Always 1; labels name the server version and node.",
    };
    exposition.header(&build);
    exposition.sample(
        &build,
        &[
            ("version", state.server_version()),
            ("node", state.node_name()),
        ],
        Number::Whole(1),
    );
    exposition.finish()
}

/// Topologies, state transfer and forwarding of a clustered node.
fn cluster_families(exposition: &mut Exposition, state: &Shared) {
    let cluster = state.cluster_members();
    let whole = |n: u64| Number::Whole(n);
    let coordinator = Family {
        name: "weft_cluster_coordinator",
        kind: Kind::Gauge,
        help: "1 when this node coordinates the cluster (leads consensus).",
    };
    exposition.header(&coordinator);
    exposition.sample(
        &coordinator,
        &[],
        whole(u64::from(
            cluster.coordinator.as_deref() == Some(state.node_name()),
        )),
    );
    let forwarded = Family {
        name: "weft_cluster_forwarded",
        kind: Kind::Counter,
        help: "Requests sent on to the node that owns their key.",
    };
    exposition.header(&forwarded);
    for (protocol, count) in &cluster.forwarded {
        exposition.sample(&forwarded, &[("protocol", protocol)], whole(*count));
    }
    let bytes = Family {
        name: "weft_cluster_bytes",
        kind: Kind::Counter,
        help: "Bytes sent and received over cluster connections.",
    };
    exposition.header(&bytes);
    exposition.sample(&bytes, &[("direction", "sent")], whole(cluster.bytes.0));
    exposition.sample(&bytes, &[("direction", "received")], whole(cluster.bytes.1));
    type Read = fn(&crate::CacheTopologyView) -> u64;
    let families: [(Family, Read); 7] = [
        (
            Family {
                name: "weft_cache_topology_id",
                kind: Kind::Gauge,
                help: "The agreed topology id of a clustered cache.",
            },
            |c| u64::from(c.topology_id),
        ),
        (
            Family {
                name: "weft_cache_rebalancing",
                kind: Kind::Gauge,
                help: "1 while segments of the cache move between nodes.",
            },
            |c| u64::from(c.phase != "stable"),
        ),
        (
            Family {
                name: "weft_cache_degraded",
                kind: Kind::Gauge,
                help: "1 while the cache refuses operations after losing members.",
            },
            |c| u64::from(c.degraded),
        ),
        (
            Family {
                name: "weft_cache_primary_segments",
                kind: Kind::Gauge,
                help: "Segments of the cache this node is the primary owner of.",
            },
            |c| c.primary_segments,
        ),
        (
            Family {
                name: "weft_cache_owned_segments",
                kind: Kind::Gauge,
                help: "Segments of the cache this node holds a copy of.",
            },
            |c| c.owned_segments,
        ),
        (
            Family {
                name: "weft_state_transfer_segments_done",
                kind: Kind::Gauge,
                help: "Segments this node fetched in the cache's current rebalance.",
            },
            |c| c.transfer.segments_done,
        ),
        (
            Family {
                name: "weft_state_transfer_segments",
                kind: Kind::Gauge,
                help: "Segments this node must fetch in the cache's current rebalance.",
            },
            |c| c.transfer.segments_total,
        ),
    ];
    for (family, read) in &families {
        exposition.header(family);
        for cache in &cluster.caches {
            exposition.sample(family, &[("cache", &cache.cache)], whole(read(cache)));
        }
    }
    let entries = Family {
        name: "weft_state_transfer_entries",
        kind: Kind::Counter,
        help: "Entries this node received by state transfer in the cache's current rebalance.",
    };
    exposition.header(&entries);
    for cache in &cluster.caches {
        exposition.sample(
            &entries,
            &[("cache", &cache.cache)],
            whole(cache.transfer.entries),
        );
    }
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let open_metrics = wants_open_metrics(&headers);
    let content_type = if open_metrics {
        OPEN_METRICS_TEXT
    } else {
        PROMETHEUS_TEXT
    };
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        render(&state, open_metrics),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a histogram series has its cumulative buckets, `+Inf`, sum and count, and its
    // family the histogram type, in both formats.
    #[test]
    fn histogram_series() {
        for open_metrics in [false, true] {
            let mut exposition = Exposition {
                out: String::new(),
                open_metrics,
            };
            let mut writer = MetricsWriter {
                exposition: &mut exposition,
                family: None,
            };
            writer.histogram("weft_x_seconds", "X.");
            writer.histogram_sample(&[("protocol", "resp")], &[(0.001, 2), (0.01, 3)], 0.5, 4);
            let text = exposition.finish();
            for line in [
                "# TYPE weft_x_seconds histogram\n",
                "weft_x_seconds_bucket{protocol=\"resp\",le=\"0.001\"} 2\n",
                "weft_x_seconds_bucket{protocol=\"resp\",le=\"0.01\"} 3\n",
                "weft_x_seconds_bucket{protocol=\"resp\",le=\"+Inf\"} 4\n",
                "weft_x_seconds_sum{protocol=\"resp\"} 0.5\n",
                "weft_x_seconds_count{protocol=\"resp\"} 4\n",
            ] {
                assert!(text.contains(line), "{line} missing from {text}");
            }
        }
    }

    // Proves label and help escaping follow the exposition format's rules.
    #[test]
    fn escaping() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape_help("x\\y\nz\""), "x\\\\y\\nz\"");
    }

    // Proves counters are named with `_total` in 0.0.4 headers but not in OpenMetrics ones.
    #[test]
    fn counter_names_per_format() {
        let family = Family {
            name: "weft_x",
            kind: Kind::Counter,
            help: "X.",
        };
        for (open_metrics, type_line) in [
            (false, "# TYPE weft_x_total counter\n"),
            (true, "# TYPE weft_x counter\n"),
        ] {
            let mut exposition = Exposition {
                out: String::new(),
                open_metrics,
            };
            exposition.header(&family);
            exposition.sample(&family, &[("cache", "c")], Number::Whole(3));
            let text = exposition.finish();
            assert!(text.contains(type_line), "{text}");
            assert!(text.contains("weft_x_total{cache=\"c\"} 3\n"), "{text}");
            assert_eq!(text.ends_with("# EOF\n"), open_metrics);
        }
    }
}
