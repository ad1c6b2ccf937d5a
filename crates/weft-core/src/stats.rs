//! Statistics of a cache: counters kept as relaxed atomics on the operation path, summed into
//! a [`CacheStatistics`] snapshot on demand. Switching statistics off skips even the clock
//! reads that timings need.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

#[derive(Debug)]
pub(crate) struct Stats {
    enabled: AtomicBool,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) stores: AtomicU64,
    pub(crate) remove_hits: AtomicU64,
    pub(crate) remove_misses: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) expirations: AtomicU64,
    read_nanos: AtomicU64,
    reads: AtomicU64,
    write_nanos: AtomicU64,
    writes: AtomicU64,
    remove_nanos: AtomicU64,
    removes: AtomicU64,
    started: Instant,
    reset: Mutex<Instant>,
}

/// A point-in-time copy of a cache's (or, summed, a manager's) statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CacheStatistics {
    /// Whether collection is on.
    pub enabled: bool,
    /// Reads that found a live entry.
    pub hits: u64,
    /// Reads that found nothing.
    pub misses: u64,
    /// Writes that stored a value.
    pub stores: u64,
    /// Removes that removed something.
    pub remove_hits: u64,
    /// Removes that found nothing.
    pub remove_misses: u64,
    /// Entries evicted to respect the memory bound.
    pub evictions: u64,
    /// Entries removed because they expired.
    pub expirations: u64,
    /// Mean read time in nanoseconds.
    pub average_read_time_nanos: u64,
    /// Mean write time in nanoseconds.
    pub average_write_time_nanos: u64,
    /// Mean remove time in nanoseconds.
    pub average_remove_time_nanos: u64,
    /// Entries in memory (including expired ones not yet purged).
    pub entries: u64,
    /// Bytes used by entries and their index slots, allocator rounding included.
    pub memory_bytes: u64,
    /// Seconds since the cache started.
    pub time_since_start_secs: u64,
    /// Seconds since the statistics were last reset.
    pub time_since_reset_secs: u64,
}

impl CacheStatistics {
    /// Adds another cache's figures to these (averages weighted by operation counts).
    pub fn accumulate(&mut self, other: &CacheStatistics) {
        let weigh = |a: u64, an: u64, b: u64, bn: u64| {
            (a.saturating_mul(an) + b.saturating_mul(bn))
                .checked_div(an + bn)
                .unwrap_or(0)
        };
        self.average_read_time_nanos = weigh(
            self.average_read_time_nanos,
            self.hits + self.misses,
            other.average_read_time_nanos,
            other.hits + other.misses,
        );
        self.average_write_time_nanos = weigh(
            self.average_write_time_nanos,
            self.stores,
            other.average_write_time_nanos,
            other.stores,
        );
        self.average_remove_time_nanos = weigh(
            self.average_remove_time_nanos,
            self.remove_hits + self.remove_misses,
            other.average_remove_time_nanos,
            other.remove_hits + other.remove_misses,
        );
        self.enabled |= other.enabled;
        self.hits += other.hits;
        self.misses += other.misses;
        self.stores += other.stores;
        self.remove_hits += other.remove_hits;
        self.remove_misses += other.remove_misses;
        self.evictions += other.evictions;
        self.expirations += other.expirations;
        self.entries += other.entries;
        self.memory_bytes += other.memory_bytes;
        self.time_since_start_secs = self.time_since_start_secs.max(other.time_since_start_secs);
        self.time_since_reset_secs = self.time_since_reset_secs.max(other.time_since_reset_secs);
    }
}

/// Started when an operation begins, if statistics are on.
pub(crate) type Timer = Option<Instant>;

impl Stats {
    pub(crate) fn new(enabled: bool) -> Self {
        let now = Instant::now();
        Self {
            enabled: AtomicBool::new(enabled),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stores: AtomicU64::new(0),
            remove_hits: AtomicU64::new(0),
            remove_misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            expirations: AtomicU64::new(0),
            read_nanos: AtomicU64::new(0),
            reads: AtomicU64::new(0),
            write_nanos: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            remove_nanos: AtomicU64::new(0),
            removes: AtomicU64::new(0),
            started: now,
            reset: Mutex::new(now),
        }
    }

    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn start(&self) -> Timer {
        self.enabled().then(Instant::now)
    }

    #[inline]
    pub(crate) fn bump(&self, counter: &AtomicU64, by: u64) {
        if self.enabled() {
            counter.fetch_add(by, Ordering::Relaxed);
        }
    }

    fn elapsed(timer: Timer) -> Option<u64> {
        timer.map(|started| u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    #[inline]
    pub(crate) fn read_done(&self, timer: Timer, hit: bool) {
        if let Some(nanos) = Self::elapsed(timer) {
            self.read_nanos.fetch_add(nanos, Ordering::Relaxed);
            self.reads.fetch_add(1, Ordering::Relaxed);
            let counter = if hit { &self.hits } else { &self.misses };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn write_done(&self, timer: Timer, stored: bool) {
        if let Some(nanos) = Self::elapsed(timer) {
            self.write_nanos.fetch_add(nanos, Ordering::Relaxed);
            self.writes.fetch_add(1, Ordering::Relaxed);
            if stored {
                self.stores.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    #[inline]
    pub(crate) fn remove_done(&self, timer: Timer, removed: bool) {
        if let Some(nanos) = Self::elapsed(timer) {
            self.remove_nanos.fetch_add(nanos, Ordering::Relaxed);
            self.removes.fetch_add(1, Ordering::Relaxed);
            let counter = if removed {
                &self.remove_hits
            } else {
                &self.remove_misses
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn reset(&self) {
        for counter in [
            &self.hits,
            &self.misses,
            &self.stores,
            &self.remove_hits,
            &self.remove_misses,
            &self.evictions,
            &self.expirations,
            &self.read_nanos,
            &self.reads,
            &self.write_nanos,
            &self.writes,
            &self.remove_nanos,
            &self.removes,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
        *self.reset.lock() = Instant::now();
    }

    pub(crate) fn snapshot(&self, entries: u64, memory_bytes: u64) -> CacheStatistics {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let average = |nanos: &AtomicU64, count: &AtomicU64| {
            load(nanos).checked_div(load(count)).unwrap_or(0)
        };
        CacheStatistics {
            enabled: self.enabled(),
            hits: load(&self.hits),
            misses: load(&self.misses),
            stores: load(&self.stores),
            remove_hits: load(&self.remove_hits),
            remove_misses: load(&self.remove_misses),
            evictions: load(&self.evictions),
            expirations: load(&self.expirations),
            average_read_time_nanos: average(&self.read_nanos, &self.reads),
            average_write_time_nanos: average(&self.write_nanos, &self.writes),
            average_remove_time_nanos: average(&self.remove_nanos, &self.removes),
            entries,
            memory_bytes,
            time_since_start_secs: self.started.elapsed().as_secs(),
            time_since_reset_secs: self.reset.lock().elapsed().as_secs(),
        }
    }

    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}
