//! Statistics of a cache: counters kept as relaxed atomics on the operation path, summed into
//! a [`CacheStatistics`] snapshot on demand. Counters are striped per thread and timings
//! sampled (one operation in [`TIMING_SAMPLE_INTERVAL`] per thread), so that keeping
//! statistics costs little; switching them off skips even that.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

/// Operation counters of one stripe. Each thread updates one stripe, so two cores counting
/// at once do not fight over a cache line; a snapshot sums the stripes.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe {
    hits: AtomicU64,
    misses: AtomicU64,
    stores: AtomicU64,
    remove_hits: AtomicU64,
    remove_misses: AtomicU64,
    read_nanos: AtomicU64,
    reads_timed: AtomicU64,
    write_nanos: AtomicU64,
    writes_timed: AtomicU64,
    remove_nanos: AtomicU64,
    removes_timed: AtomicU64,
}

impl Stripe {
    fn counters(&self) -> [&AtomicU64; 11] {
        [
            &self.hits,
            &self.misses,
            &self.stores,
            &self.remove_hits,
            &self.remove_misses,
            &self.read_nanos,
            &self.reads_timed,
            &self.write_nanos,
            &self.writes_timed,
            &self.remove_nanos,
            &self.removes_timed,
        ]
    }
}

/// Stripes per cache: enough that threads rarely share one on the machines we run on.
const STRIPE_COUNT: usize = 8;
/// One operation in this many (per thread) is timed; averages are over the timed ones.
/// Reading the clock twice costs more than a cache hit, so timing every operation would
/// make statistics the largest cost of a read.
pub(crate) const TIMING_SAMPLE_INTERVAL: u32 = 8;

thread_local! {
    static STRIPE_INDEX: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) % STRIPE_COUNT
    };
    // Starts at zero so a thread's first operation is timed.
    static TIMING_COUNTDOWN: Cell<u32> = const { Cell::new(0) };
}

#[derive(Debug)]
pub(crate) struct Stats {
    enabled: AtomicBool,
    stripes: [Stripe; STRIPE_COUNT],
    pub(crate) evictions: AtomicU64,
    pub(crate) expirations: AtomicU64,
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

/// What an operation's statistics need: nothing (statistics off), counting only, or
/// counting and timing from an instant.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Timer {
    Off,
    Count,
    Time(Instant),
}

impl Stats {
    pub(crate) fn new(enabled: bool) -> Self {
        let now = Instant::now();
        Self {
            enabled: AtomicBool::new(enabled),
            stripes: Default::default(),
            evictions: AtomicU64::new(0),
            expirations: AtomicU64::new(0),
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
    fn stripe(&self) -> &Stripe {
        &self.stripes[STRIPE_INDEX.with(|index| *index)]
    }

    #[inline]
    pub(crate) fn start(&self) -> Timer {
        if !self.enabled() {
            return Timer::Off;
        }
        let timed = TIMING_COUNTDOWN.with(|countdown| match countdown.get() {
            0 => {
                countdown.set(TIMING_SAMPLE_INTERVAL - 1);
                true
            }
            left => {
                countdown.set(left - 1);
                false
            }
        });
        if timed {
            Timer::Time(Instant::now())
        } else {
            Timer::Count
        }
    }

    #[inline]
    pub(crate) fn bump(&self, counter: &AtomicU64, by: u64) {
        if self.enabled() {
            counter.fetch_add(by, Ordering::Relaxed);
        }
    }

    /// Records one operation: `outcome` counts it, and a timed one adds its duration to
    /// `nanos` and `timed`.
    #[inline]
    fn done(timer: Timer, outcome: &AtomicU64, nanos: &AtomicU64, timed: &AtomicU64) {
        match timer {
            Timer::Off => return,
            Timer::Count => {}
            Timer::Time(started) => {
                let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
                nanos.fetch_add(elapsed, Ordering::Relaxed);
                timed.fetch_add(1, Ordering::Relaxed);
            }
        }
        outcome.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn read_done(&self, timer: Timer, hit: bool) {
        if matches!(timer, Timer::Off) {
            return;
        }
        let stripe = self.stripe();
        let outcome = if hit { &stripe.hits } else { &stripe.misses };
        Self::done(timer, outcome, &stripe.read_nanos, &stripe.reads_timed);
    }

    #[inline]
    pub(crate) fn write_done(&self, timer: Timer, stored: bool) {
        if matches!(timer, Timer::Off) {
            return;
        }
        let stripe = self.stripe();
        if stored {
            Self::done(
                timer,
                &stripe.stores,
                &stripe.write_nanos,
                &stripe.writes_timed,
            );
        } else if let Timer::Time(started) = timer {
            // A refused write still took time; it is not a store.
            let elapsed = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            stripe.write_nanos.fetch_add(elapsed, Ordering::Relaxed);
            stripe.writes_timed.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn remove_done(&self, timer: Timer, removed: bool) {
        if matches!(timer, Timer::Off) {
            return;
        }
        let stripe = self.stripe();
        let outcome = if removed {
            &stripe.remove_hits
        } else {
            &stripe.remove_misses
        };
        Self::done(timer, outcome, &stripe.remove_nanos, &stripe.removes_timed);
    }

    pub(crate) fn reset(&self) {
        for stripe in &self.stripes {
            for counter in stripe.counters() {
                counter.store(0, Ordering::Relaxed);
            }
        }
        self.evictions.store(0, Ordering::Relaxed);
        self.expirations.store(0, Ordering::Relaxed);
        *self.reset.lock() = Instant::now();
    }

    pub(crate) fn snapshot(&self, entries: u64, memory_bytes: u64) -> CacheStatistics {
        let sum = |field: fn(&Stripe) -> &AtomicU64| -> u64 {
            self.stripes
                .iter()
                .map(|stripe| field(stripe).load(Ordering::Relaxed))
                .sum()
        };
        let average = |nanos: u64, count: u64| nanos.checked_div(count).unwrap_or(0);
        CacheStatistics {
            enabled: self.enabled(),
            hits: sum(|s| &s.hits),
            misses: sum(|s| &s.misses),
            stores: sum(|s| &s.stores),
            remove_hits: sum(|s| &s.remove_hits),
            remove_misses: sum(|s| &s.remove_misses),
            evictions: self.evictions.load(Ordering::Relaxed),
            expirations: self.expirations.load(Ordering::Relaxed),
            average_read_time_nanos: average(sum(|s| &s.read_nanos), sum(|s| &s.reads_timed)),
            average_write_time_nanos: average(sum(|s| &s.write_nanos), sum(|s| &s.writes_timed)),
            average_remove_time_nanos: average(sum(|s| &s.remove_nanos), sum(|s| &s.removes_timed)),
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
