//! Frequency-aware eviction: a sampled TinyLFU.
//!
//! A count-min sketch of 4-bit counters records how often each key hash is accessed (reads,
//! misses included, and writes), halving all counters periodically so that old popularity
//! fades. To evict, the cache samples a handful of entries at random buckets of random
//! segments and removes the one the sketch rates least frequent (an expired entry first, if
//! the sample has one). The sketch remembers keys that are no longer cached, so a key that is
//! popular but was evicted is rated above a stream of one-time keys: scans do not flush the
//! hot set.
//!
//! Why sampling rather than W-TinyLFU's LRU queues: queues need two pointers per entry (16
//! bytes), a quarter of our whole per-entry budget; sampling needs none, and Redis' LFU shows
//! sampling approximates the exact policy well. The sketch costs 8 bytes per bounded slot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Entries examined per eviction.
pub(crate) const EVICTION_SAMPLE_SIZE: usize = 8;
/// Random buckets probed at most per segment visited while sampling.
pub(crate) const EVICTION_PROBES_PER_SEGMENT: usize = 4 * EVICTION_SAMPLE_SIZE;
/// A segment with at least this many entries may supply the whole sample.
pub(crate) const EVICTION_LARGE_SEGMENT_LEN: usize = 8 * EVICTION_SAMPLE_SIZE;
/// Entries sampled at most from one visit to a smaller segment.
pub(crate) const EVICTION_SMALL_SEGMENT_TAKE: usize = 2;
/// Segments picked at most (empty ones included) before falling back to a scan.
pub(crate) const EVICTION_SEGMENT_PICKS_MAX: usize = 64;

#[derive(Debug)]
pub(crate) struct FrequencySketch {
    words: Box<[AtomicU64]>,
    mask: usize,
    additions: AtomicUsize,
    sample_size: usize,
}

const RESET_MASK: u64 = 0x7777_7777_7777_7777;

impl FrequencySketch {
    /// A sketch sized for about `capacity` distinct hot keys.
    pub(crate) fn new(capacity: usize) -> Self {
        let width = capacity.clamp(64, 1 << 24).next_power_of_two();
        let words = (0..width).map(|_| AtomicU64::new(0)).collect();
        Self {
            words,
            mask: width - 1,
            additions: AtomicUsize::new(0),
            sample_size: width.saturating_mul(10),
        }
    }

    fn slot(&self, hash: u64, row: u32) -> (usize, u32) {
        let mixed = hash
            .rotate_left(row * 16)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let index = (mixed >> 32) as usize & self.mask;
        let nibble = ((hash >> (row * 4)) & 3) as u32 + row * 4;
        (index, nibble * 4)
    }

    /// Estimated access count of `hash` (0..=15).
    pub(crate) fn frequency(&self, hash: u64) -> u32 {
        (0..4)
            .map(|row| {
                let (index, shift) = self.slot(hash, row);
                ((self.words[index].load(Ordering::Relaxed) >> shift) & 15) as u32
            })
            .min()
            .unwrap_or(0)
    }

    /// Records one access of `hash`.
    pub(crate) fn increment(&self, hash: u64) {
        let mut added = false;
        for row in 0..4 {
            let (index, shift) = self.slot(hash, row);
            let word = &self.words[index];
            // A counter saturates at 15; compare-exchange keeps a racing increment from
            // carrying into the neighbouring counter.
            let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |current| {
                ((current >> shift) & 15 < 15).then(|| current + (1 << shift))
            });
            added = true;
        }
        if added && self.additions.fetch_add(1, Ordering::Relaxed) + 1 >= self.sample_size {
            self.age();
        }
    }

    /// Halves every counter so that past popularity decays.
    fn age(&self) {
        let previous = self.additions.swap(0, Ordering::Relaxed);
        if previous < self.sample_size {
            return; // another thread aged it already
        }
        for word in self.words.iter() {
            let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |current| {
                Some((current >> 1) & RESET_MASK)
            });
        }
    }
}

/// A small, fast, non-cryptographic random source for sampling positions.
pub(crate) fn random_index(bound: usize) -> usize {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            let seed = &STATE as *const _ as u64;
            seed ^ 0x2545_f491_4f6c_dd1d
        });
    }
    if bound == 0 {
        return 0;
    }
    STATE.with(|state| {
        // xorshift64*
        let mut x = state.get() | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize % bound
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the sketch ranks a frequently seen hash above a rarely seen one, and ages.
    #[test]
    fn ranks_and_ages() {
        let sketch = FrequencySketch::new(64);
        for _ in 0..10 {
            sketch.increment(42);
        }
        sketch.increment(7);
        assert!(sketch.frequency(42) >= 10);
        assert!(sketch.frequency(7) <= 2);
        for _ in 0..40 {
            sketch.increment(42);
        }
        assert_eq!(sketch.frequency(42), 15, "counters saturate at 15");
        sketch
            .additions
            .store(sketch.sample_size, Ordering::Relaxed);
        sketch.age();
        assert_eq!(sketch.frequency(42), 7, "aging halves counters");
    }
}
