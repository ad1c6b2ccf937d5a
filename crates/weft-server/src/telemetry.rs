//! What the server adds to `/metrics` beyond the caches and the cluster: the process (CPU,
//! memory, open files, start time — read from `/proc`, under the names Prometheus' own
//! client libraries use, so that existing dashboards and alerts work), client connections
//! per protocol, and request latencies per protocol and operation as histograms.
//!
//! Latencies are observed where each protocol runs a request: Hot Rod from a decoded frame
//! to its response (also when it ran at another member), memcached per command, HTTP per
//! request. Every request is timed (two clock reads and three atomic additions, a few tens
//! of nanoseconds); observations go to one histogram per protocol and operation, found
//! under a read lock.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weft_rest::MetricsWriter;

/// Upper bounds of the latency buckets, in seconds: 50 µs to 2.5 s, roughly ×2.5 apart.
const LATENCY_BOUNDS_SECONDS: [f64; 15] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5,
];
/// Linux reports CPU times in clock ticks of `USER_HZ`, which is 100 on every architecture
/// Linux runs on (the kernel's ABI; Prometheus' procfs library assumes the same).
const USER_HZ: f64 = 100.0;

/// A protocol as metrics label it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Protocol {
    Resp,
    HotRod,
    Memcached,
    Http,
}

impl Protocol {
    const ALL: [Self; 4] = [Self::Resp, Self::HotRod, Self::Memcached, Self::Http];

    fn label(self) -> &'static str {
        match self {
            Self::Resp => "resp",
            Self::HotRod => "hotrod",
            Self::Memcached => "memcached",
            Self::Http => "http",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Resp => 0,
            Self::HotRod => 1,
            Self::Memcached => 2,
            Self::Http => 3,
        }
    }
}

/// Why a connection was closed on accept.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refused {
    /// `connections-max` connections were open.
    ConnectionsMax,
    /// Its address held `connections-per-address-max`.
    PerAddressMax,
}

/// One latency histogram: cumulative counts are computed when it is read.
#[derive(Debug, Default)]
struct Histogram {
    /// Observations per bucket (not cumulative); the last one is above every bound.
    buckets: [AtomicU64; LATENCY_BOUNDS_SECONDS.len() + 1],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BOUNDS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BOUNDS_SECONDS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// The histograms by protocol and operation: looked up on every request, so with a fast
/// hash (the keys are this program's own names, nothing a client chooses).
type Latencies = HashMap<(Protocol, &'static str), Arc<Histogram>, foldhash::fast::RandomState>;

/// Connections, refusals and latencies, shared by every connection.
#[derive(Debug)]
pub(crate) struct Telemetry {
    open: [AtomicU64; Protocol::ALL.len()],
    opened: [AtomicU64; Protocol::ALL.len()],
    refused_connections_max: AtomicU64,
    refused_per_address_max: AtomicU64,
    latencies: parking_lot::RwLock<Latencies>,
    /// When the process started, in seconds since the Unix epoch.
    started_unix_seconds: f64,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            open: Default::default(),
            opened: Default::default(),
            refused_connections_max: AtomicU64::new(0),
            refused_per_address_max: AtomicU64::new(0),
            latencies: parking_lot::RwLock::default(),
            started_unix_seconds: process_start_unix_seconds().unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |since| since.as_secs_f64())
            }),
        }
    }
}

/// A connection counted as open until dropped.
#[derive(Debug)]
pub(crate) struct OpenConnection<'a> {
    telemetry: &'a Telemetry,
    protocol: Protocol,
}

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.telemetry.open[self.protocol.index()].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Telemetry {
    /// Counts a connection whose protocol is now known, open until the guard drops.
    pub(crate) fn connection(&self, protocol: Protocol) -> OpenConnection<'_> {
        self.open[protocol.index()].fetch_add(1, Ordering::Relaxed);
        self.opened[protocol.index()].fetch_add(1, Ordering::Relaxed);
        OpenConnection {
            telemetry: self,
            protocol,
        }
    }

    /// Counts a connection closed on accept.
    pub(crate) fn refused(&self, why: Refused) {
        let counter = match why {
            Refused::ConnectionsMax => &self.refused_connections_max,
            Refused::PerAddressMax => &self.refused_per_address_max,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Records that a `protocol` request doing `operation` took `elapsed`.
    pub(crate) fn observe(&self, protocol: Protocol, operation: &'static str, elapsed: Duration) {
        // The common case takes the read lock only: no reference count is touched.
        if let Some(histogram) = self.latencies.read().get(&(protocol, operation)) {
            histogram.observe(elapsed);
            return;
        }
        let histogram = Arc::clone(
            self.latencies
                .write()
                .entry((protocol, operation))
                .or_default(),
        );
        histogram.observe(elapsed);
    }

    /// Writes the process, connection and latency families.
    pub(crate) fn write(&self, out: &mut MetricsWriter<'_>) {
        write_process(out, self.started_unix_seconds);
        out.gauge(
            "weft_client_connections",
            "Client connections open now, by protocol (known from a connection's first bytes).",
        );
        for protocol in Protocol::ALL {
            out.whole(
                &[("protocol", protocol.label())],
                self.open[protocol.index()].load(Ordering::Relaxed),
            );
        }
        out.counter(
            "weft_client_connections_opened",
            "Client connections opened since start, by protocol.",
        );
        for protocol in Protocol::ALL {
            out.whole(
                &[("protocol", protocol.label())],
                self.opened[protocol.index()].load(Ordering::Relaxed),
            );
        }
        out.counter(
            "weft_client_connections_refused",
            "Connections closed on accept: connections-max or connections-per-address-max reached.",
        );
        out.whole(
            &[("reason", "connections-max")],
            self.refused_connections_max.load(Ordering::Relaxed),
        );
        out.whole(
            &[("reason", "connections-per-address-max")],
            self.refused_per_address_max.load(Ordering::Relaxed),
        );
        out.histogram(
            "weft_request_duration_seconds",
            "Time from a decoded request to its response, by protocol and operation.",
        );
        let mut series: Vec<((Protocol, &'static str), Arc<Histogram>)> = self
            .latencies
            .read()
            .iter()
            .map(|(key, histogram)| (*key, Arc::clone(histogram)))
            .collect();
        series.sort_by_key(|((protocol, operation), _)| (protocol.index(), *operation));
        for ((protocol, operation), histogram) in series {
            let mut cumulative = 0;
            let buckets: Vec<(f64, u64)> = LATENCY_BOUNDS_SECONDS
                .iter()
                .zip(&histogram.buckets)
                .map(|(bound, count)| {
                    cumulative += count.load(Ordering::Relaxed);
                    (*bound, cumulative)
                })
                .collect();
            let above = histogram.buckets[LATENCY_BOUNDS_SECONDS.len()].load(Ordering::Relaxed);
            // Read apart from the buckets: the count may run ahead of them by the requests
            // observed meanwhile; `+Inf` must not be below the last bucket.
            let count = histogram
                .count
                .load(Ordering::Relaxed)
                .max(cumulative + above);
            #[allow(clippy::cast_precision_loss)]
            let sum = histogram.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
            out.histogram_sample(
                &[("protocol", protocol.label()), ("operation", operation)],
                &buckets,
                sum,
                count,
            );
        }
    }
}

/// The operation label of a Hot Rod request: its opcode's name.
pub(crate) fn hotrod_operation(opcode: u8) -> &'static str {
    use weft_hotrod::opcode as op;
    match opcode {
        op::PUT => "put",
        op::GET => "get",
        op::PUT_IF_ABSENT => "put_if_absent",
        op::REPLACE => "replace",
        op::REPLACE_IF_UNMODIFIED => "replace_if_unmodified",
        op::REMOVE => "remove",
        op::REMOVE_IF_UNMODIFIED => "remove_if_unmodified",
        op::CONTAINS_KEY => "contains_key",
        op::GET_WITH_VERSION => "get_with_version",
        op::CLEAR => "clear",
        op::STATS => "stats",
        op::PING => "ping",
        op::BULK_GET => "bulk_get",
        op::GET_WITH_METADATA => "get_with_metadata",
        op::BULK_GET_KEYS => "bulk_get_keys",
        op::QUERY => "query",
        op::AUTH_MECH_LIST => "auth_mech_list",
        op::AUTH => "auth",
        op::ADD_CLIENT_LISTENER => "add_client_listener",
        op::REMOVE_CLIENT_LISTENER => "remove_client_listener",
        op::SIZE => "size",
        op::EXEC => "exec",
        op::PUT_ALL => "put_all",
        op::GET_ALL => "get_all",
        op::ITERATION_START => "iteration_start",
        op::ITERATION_NEXT => "iteration_next",
        op::ITERATION_END => "iteration_end",
        op::GET_STREAM => "get_stream",
        op::PUT_STREAM => "put_stream",
        _ => "other",
    }
}

/// What `/proc/self` says of this process.
#[derive(Debug, Default, PartialEq)]
struct ProcessFigures {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<u64>,
    virtual_bytes: Option<u64>,
    threads: Option<u64>,
    open_fds: Option<u64>,
    max_fds: Option<u64>,
}

/// Bytes the process has resident, 0 where unknown (INFO, MEMORY STATS).
pub(crate) fn resident_bytes() -> u64 {
    read_process().resident_bytes.unwrap_or(0)
}

/// Reads the process' figures; a file that cannot be read (not Linux, `/proc` hidden)
/// leaves its figures out rather than failing the scrape.
fn read_process() -> ProcessFigures {
    let mut figures = ProcessFigures::default();
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        figures.cpu_seconds = cpu_seconds_from_stat(&stat);
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        figures.resident_bytes = kibibytes_field(&status, "VmRSS:").map(|kib| kib * 1024);
        figures.virtual_bytes = kibibytes_field(&status, "VmSize:").map(|kib| kib * 1024);
        figures.threads = kibibytes_field(&status, "Threads:");
    }
    if let Ok(entries) = std::fs::read_dir("/proc/self/fd") {
        // The directory handle itself is one of the entries: not counted.
        figures.open_fds = Some(entries.count().saturating_sub(1) as u64);
    }
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
        figures.max_fds = limits
            .lines()
            .find(|line| line.starts_with("Max open files"))
            .and_then(|line| line.split_whitespace().nth(3)?.parse().ok());
    }
    figures
}

/// User plus system CPU time from `/proc/self/stat` (fields 14 and 15, in clock ticks).
/// The command name (field 2) may hold spaces and parentheses: fields are counted after
/// its last `)`.
fn cpu_seconds_from_stat(stat: &str) -> Option<f64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th and stime the 13th.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some((utime + stime) as f64 / USER_HZ)
}

/// The number after `name` on its line of `/proc/self/status` (`VmRSS:  1234 kB`).
fn kibibytes_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// When this process started, from its start time in clock ticks after boot
/// (`/proc/self/stat` field 22) and the boot time (`btime` in `/proc/stat`).
fn process_start_unix_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_name.split_whitespace().nth(19)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let boot_seconds: u64 = boot
        .lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    #[allow(clippy::cast_precision_loss)]
    Some(boot_seconds as f64 + ticks as f64 / USER_HZ)
}

fn write_process(out: &mut MetricsWriter<'_>, started_unix_seconds: f64) {
    let figures = read_process();
    if let Some(seconds) = figures.cpu_seconds {
        out.counter(
            "process_cpu_seconds",
            "User and system CPU time spent by the process, in seconds.",
        );
        out.real(&[], seconds);
    }
    if let Some(bytes) = figures.resident_bytes {
        out.gauge(
            "process_resident_memory_bytes",
            "Resident memory size of the process, in bytes.",
        );
        out.whole(&[], bytes);
    }
    if let Some(bytes) = figures.virtual_bytes {
        out.gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size of the process, in bytes.",
        );
        out.whole(&[], bytes);
    }
    if let Some(threads) = figures.threads {
        out.gauge("process_threads", "Threads of the process.");
        out.whole(&[], threads);
    }
    if let Some(open) = figures.open_fds {
        out.gauge(
            "process_open_fds",
            "Open file descriptors (connections, store files, sockets).",
        );
        out.whole(&[], open);
    }
    if let Some(max) = figures.max_fds {
        out.gauge(
            "process_max_fds",
            "The process' limit of open file descriptors.",
        );
        out.whole(&[], max);
    }
    out.gauge(
        "process_start_time_seconds",
        "When the process started, in seconds since the Unix epoch.",
    );
    out.real(&[], started_unix_seconds);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves CPU time is read after the command name, even one with spaces and parentheses.
    #[test]
    fn cpu_time_from_stat() {
        let stat =
            "4242 (weft (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 9 0 12345 0 0";
        assert_eq!(cpu_seconds_from_stat(stat), Some(4.0));
        assert_eq!(cpu_seconds_from_stat("garbage"), None);
    }

    // Proves `/proc/self/status` fields are read in kibibytes and plain counts.
    #[test]
    fn status_fields() {
        let status = "Name:\tweft\nVmSize:\t  204800 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n";
        assert_eq!(kibibytes_field(status, "VmRSS:"), Some(10_240));
        assert_eq!(kibibytes_field(status, "Threads:"), Some(9));
        assert_eq!(kibibytes_field(status, "VmSwap:"), None);
    }

    // Proves observations land in the first bucket whose bound holds them, and beyond the
    // last bound only in the count.
    #[test]
    fn histogram_buckets() {
        let histogram = Histogram::default();
        histogram.observe(Duration::from_micros(40));
        histogram.observe(Duration::from_micros(50));
        histogram.observe(Duration::from_millis(3));
        histogram.observe(Duration::from_secs(10));
        assert_eq!(histogram.buckets[0].load(Ordering::Relaxed), 2);
        assert_eq!(histogram.buckets[6].load(Ordering::Relaxed), 1);
        assert_eq!(
            histogram.buckets[LATENCY_BOUNDS_SECONDS.len()].load(Ordering::Relaxed),
            1
        );
        assert_eq!(histogram.count.load(Ordering::Relaxed), 4);
    }
}
