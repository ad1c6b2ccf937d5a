//! INFO's `commandstats` and `errorstats`: per command, how often it ran, how long it took,
//! how often it was refused before running and how often it answered an error; per error
//! code, how often it was answered.
//!
//! Counters are kept per thread slot (a few, each written by the threads that drew it), so
//! that the workers running commands side by side do not contend for one cache line; INFO
//! sums them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::resp::table::{COMMANDS, CommandSpec};

/// Thread slots of counters.
const SLOTS: usize = 8;
/// Buckets of a command's latency histogram: bucket `k` counts calls that took at most
/// 1024 ns · 2^k (the last, anything longer: about 8.6 s and up).
pub const BUCKETS: usize = 24;

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    micros: AtomicU64,
    rejected: AtomicU64,
    failed: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

/// The histogram bucket of a call that took `nanos`.
fn bucket(nanos: u64) -> usize {
    // ceil(log2(nanos / 1024)), from 0.
    let units = nanos.saturating_sub(1) >> 10;
    let k = (u64::BITS - units.leading_zeros()) as usize;
    k.min(BUCKETS - 1)
}

/// One command's figures (INFO commandstats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommandFigures {
    /// Times it ran.
    pub calls: u64,
    /// Microseconds it took, all calls together.
    pub micros: u64,
    /// Times it was refused before running (arity, authentication, permission...).
    pub rejected: u64,
    /// Times it ran and answered an error.
    pub failed: u64,
}

/// Every command's counters, and the errors answered.
#[derive(Debug)]
pub struct CommandStats {
    /// `SLOTS` rows of one [`Counters`] per command in [`COMMANDS`].
    slots: Vec<Vec<Counters>>,
    errors: Mutex<BTreeMap<String, u64>>,
}

impl Default for CommandStats {
    fn default() -> Self {
        Self {
            slots: (0..SLOTS)
                .map(|_| (0..COMMANDS.len()).map(|_| Counters::default()).collect())
                .collect(),
            errors: Mutex::new(BTreeMap::new()),
        }
    }
}

/// This thread's slot.
fn slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    }
    SLOT.with(|slot| *slot)
}

impl CommandStats {
    fn counters(&self, spec: &CommandSpec) -> Option<&Counters> {
        self.slots
            .get(slot())?
            .get(crate::resp::table::index_of(spec)?)
    }

    /// `spec` ran for `took`, answering an error with code `error` if it did.
    pub fn ran(&self, spec: &CommandSpec, took: std::time::Duration, error: Option<&str>) {
        if let Some(counters) = self.counters(spec) {
            let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
            counters.calls.fetch_add(1, Ordering::Relaxed);
            counters.micros.fetch_add(nanos / 1000, Ordering::Relaxed);
            counters.buckets[bucket(nanos)].fetch_add(1, Ordering::Relaxed);
            if error.is_some() {
                counters.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(code) = error {
            self.error(code);
        }
    }

    /// `spec` was refused with an error of code `code` before it ran.
    pub fn rejected(&self, spec: &CommandSpec, code: &str) {
        if let Some(counters) = self.counters(spec) {
            counters.rejected.fetch_add(1, Ordering::Relaxed);
        }
        self.error(code);
    }

    /// An error reply of code `code` (an unknown command's, or a command's).
    pub fn error(&self, code: &str) {
        let mut errors = self.errors.lock();
        // Redis keeps at most 128 codes, as here: a client cannot grow the table unbounded.
        if let Some(count) = errors.get_mut(code) {
            *count += 1;
        } else if errors.len() < 128 {
            errors.insert(code.to_owned(), 1);
        }
    }

    /// Each command that ran or was refused since the last reset, by name.
    #[must_use]
    pub fn commands(&self) -> Vec<(&'static str, CommandFigures)> {
        COMMANDS
            .iter()
            .enumerate()
            .filter_map(|(at, spec)| {
                let mut figures = CommandFigures::default();
                for slot in &self.slots {
                    let counters = &slot[at];
                    figures.calls += counters.calls.load(Ordering::Relaxed);
                    figures.micros += counters.micros.load(Ordering::Relaxed);
                    figures.rejected += counters.rejected.load(Ordering::Relaxed);
                    figures.failed += counters.failed.load(Ordering::Relaxed);
                }
                (figures != CommandFigures::default()).then_some((spec.name, figures))
            })
            .collect()
    }

    /// The command at `at` in [`COMMANDS`]: its calls and its latency histogram's buckets.
    #[must_use]
    pub fn histogram(&self, at: usize) -> (u64, [u64; BUCKETS]) {
        let mut calls = 0;
        let mut buckets = [0; BUCKETS];
        for slot in &self.slots {
            let Some(counters) = slot.get(at) else {
                continue;
            };
            calls += counters.calls.load(Ordering::Relaxed);
            for (sum, count) in buckets.iter_mut().zip(&counters.buckets) {
                *sum += count.load(Ordering::Relaxed);
            }
        }
        (calls, buckets)
    }

    /// Each error code answered since the last reset, with how often.
    #[must_use]
    pub fn errors(&self) -> Vec<(String, u64)> {
        self.errors
            .lock()
            .iter()
            .map(|(code, count)| (code.clone(), *count))
            .collect()
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for slot in &self.slots {
            for counters in slot {
                counters.calls.store(0, Ordering::Relaxed);
                counters.micros.store(0, Ordering::Relaxed);
                counters.rejected.store(0, Ordering::Relaxed);
                counters.failed.store(0, Ordering::Relaxed);
                for count in &counters.buckets {
                    count.store(0, Ordering::Relaxed);
                }
            }
        }
        self.errors.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::bucket;

    #[test]
    fn buckets_double_from_1024_nanoseconds() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1024), 0);
        assert_eq!(bucket(1025), 1);
        assert_eq!(bucket(2048), 1);
        assert_eq!(bucket(2049), 2);
        assert_eq!(bucket(65_536), 6);
        assert_eq!(bucket(u64::MAX), super::BUCKETS - 1);
    }
}
