//! The segmented data container: the key space cut into segments (by Infinispan's key →
//! segment function), each segment a `hashbrown::HashTable` of packed entries behind its own
//! reader-writer lock.
//!
//! Segments are the unit of everything that walks data (iteration, purging, and later state
//! transfer and stores), and of locking: operations on different segments never contend. The
//! container knows nothing of events or statistics; it applies one change under a segment's
//! lock and reports what it replaced, and the cache turns that into events.

use std::alloc::System;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use parking_lot::RwLock;

use crate::clock::Clock;
use crate::entry::{CacheEntry, allocator_footprint};
use crate::eviction::{
    EVICTION_LARGE_SEGMENT_LEN, EVICTION_PROBES_PER_SEGMENT, EVICTION_SAMPLE_SIZE,
    EVICTION_SEGMENT_PICKS_MAX, EVICTION_SMALL_SEGMENT_TAKE, random_index,
};

/// Bytes charged per entry for its slot in a segment table: an 8-byte pointer and a control
/// byte, at hashbrown's load factor between 7/16 and 7/8.
pub const TABLE_SLOT_BYTES: usize = 16;

/// Memory charged for one entry: its allocation as the allocator rounds it, plus its slot.
#[must_use]
pub fn entry_charge(entry: &CacheEntry) -> usize {
    allocator_footprint(entry.allocation_bytes()) + TABLE_SLOT_BYTES + entry.structure_charge()
}

/// What a write decided to do with a key, given its live entry (if any).
pub(crate) enum Change {
    /// Leave the key as it is.
    Keep,
    /// Remove the key.
    Remove,
    /// Store this new entry (its version is assigned under the lock).
    Put(CacheEntry),
    /// Store this entry with the version it carries (decided by another node); later local
    /// versions continue above it.
    PutExact(CacheEntry),
}

/// What a write did.
#[derive(Default)]
pub(crate) struct Applied {
    /// The live entry that was replaced or removed.
    pub(crate) previous: Option<CacheEntry>,
    /// The entry stored.
    pub(crate) stored: Option<CacheEntry>,
    /// An expired entry that the write found and dropped.
    pub(crate) expired: Option<CacheEntry>,
    /// The write was refused because the cache is full.
    pub(crate) refused_full: bool,
    /// An entry loaded from a store and put back in memory as it was (no write happened).
    pub(crate) restored: Option<CacheEntry>,
}

#[repr(align(64))]
struct Segment {
    /// From the system allocator, as the entries are (see `CacheEntry`): a size-class
    /// allocator would keep every table a segment outgrew.
    table: RwLock<HashTable<CacheEntry, System>>,
    len: AtomicUsize,
    bytes: AtomicUsize,
    mortal: AtomicUsize,
}

impl Segment {
    fn new() -> Self {
        Self {
            table: RwLock::new(HashTable::new_in(System)),
            len: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            mortal: AtomicUsize::new(0),
        }
    }

    // Counters change only under the segment's write lock; they are atomics so that `size()`
    // and statistics can read them without taking any lock.
    fn account_add(&self, entry: &CacheEntry) {
        self.len.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(entry_charge(entry), Ordering::Relaxed);
        if entry.is_mortal() {
            self.mortal.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn account_remove(&self, entry: &CacheEntry) {
        self.len.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(entry_charge(entry), Ordering::Relaxed);
        if entry.is_mortal() {
            self.mortal.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Cache-wide totals, kept only for bounded caches (they cost a shared atomic per write).
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) count: AtomicI64,
    pub(crate) bytes: AtomicI64,
}

pub(crate) struct Container {
    segments: Box<[Segment]>,
    segment_count: u32,
    partitioner: crate::config::KeyPartitioner,
    hasher: foldhash::fast::RandomState,
    totals: Option<Totals>,
    versions: AtomicU64,
}

impl std::fmt::Debug for Container {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Container")
            .field("segment_count", &self.segment_count)
            .field("len", &self.len())
            .finish()
    }
}

impl Container {
    pub(crate) fn new(
        segment_count: u32,
        bounded: bool,
        partitioner: crate::config::KeyPartitioner,
    ) -> Self {
        let segment_count = segment_count.max(1);
        Self {
            segments: (0..segment_count).map(|_| Segment::new()).collect(),
            segment_count,
            partitioner,
            hasher: foldhash::fast::RandomState::default(),
            totals: bounded.then(Totals::default),
            versions: AtomicU64::new(0),
        }
    }

    pub(crate) fn segment_count(&self) -> u32 {
        self.segment_count
    }

    /// The segment of `key` and its in-table hash. The table hash is a randomly seeded
    /// foldhash, not the Infinispan hash, so that crafted keys cannot collide in a table.
    #[inline]
    pub(crate) fn locate(&self, key: &[u8]) -> (usize, u64) {
        let segment = self.partitioner.segment_of(key, self.segment_count) as usize;
        (segment, self.hasher.hash_one(key))
    }

    #[inline]
    pub(crate) fn table_hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    pub(crate) fn totals(&self) -> Option<&Totals> {
        self.totals.as_ref()
    }

    fn account_add(&self, segment: &Segment, entry: &CacheEntry) {
        segment.account_add(entry);
        if let Some(totals) = &self.totals {
            totals.count.fetch_add(1, Ordering::Relaxed);
            totals
                .bytes
                .fetch_add(entry_charge(entry) as i64, Ordering::Relaxed);
        }
    }

    fn account_remove(&self, segment: &Segment, entry: &CacheEntry) {
        segment.account_remove(entry);
        if let Some(totals) = &self.totals {
            totals.count.fetch_sub(1, Ordering::Relaxed);
            totals
                .bytes
                .fetch_sub(entry_charge(entry) as i64, Ordering::Relaxed);
        }
    }

    /// The entry stored for `key`, expired or not.
    #[inline]
    pub(crate) fn get(&self, segment: usize, hash: u64, key: &[u8]) -> Option<CacheEntry> {
        let table = self.segments[segment].table.read();
        table.find(hash, |entry| entry.key() == key).cloned()
    }

    /// Applies one change to `key` under its segment's write lock. `decide` sees the live
    /// entry (an expired one is presented as absent, and dropped). `may_add` is asked before a
    /// new key is added and may refuse it (a full cache with `when-full = exception`).
    ///
    /// For a cache with stores: when memory holds no entry for the key,
    /// `fallback` may supply one (loaded from a store); `decide` then sees it as the live
    /// entry, and if `decide` keeps it, it is put back in memory unchanged (`restored`).
    /// `on_applied` runs before the lock is released, so that stores see one key's changes
    /// in the order they were applied.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update<R>(
        &self,
        segment_index: usize,
        hash: u64,
        key: &[u8],
        clock: &dyn Clock,
        may_add: impl FnOnce(&CacheEntry) -> bool,
        fallback: impl FnOnce() -> Option<CacheEntry>,
        decide: impl FnOnce(Option<&CacheEntry>) -> (Change, R),
        on_applied: impl FnOnce(&Applied),
    ) -> (Applied, R) {
        let segment = &self.segments[segment_index];
        let mut applied = Applied::default();
        let mut table = segment.table.write();
        let entry = table.entry(
            hash,
            |entry| entry.key() == key,
            |entry| self.hasher.hash_one(entry.key()),
        );
        let result = match entry {
            Entry::Occupied(mut occupied) => {
                let expired =
                    occupied.get().is_mortal() && occupied.get().is_expired(clock.now_ms());
                let (change, result) = decide(if expired { None } else { Some(occupied.get()) });
                let exact = matches!(change, Change::PutExact(_));
                match change {
                    Change::Keep if !expired => {}
                    Change::Keep | Change::Remove => {
                        let (removed, _) = occupied.remove();
                        self.account_remove(segment, &removed);
                        if expired {
                            applied.expired = Some(removed);
                        } else {
                            applied.previous = Some(removed);
                        }
                    }
                    Change::Put(fresh) | Change::PutExact(fresh) => {
                        let fresh = self.versioned(fresh, exact);
                        let old = std::mem::replace(occupied.get_mut(), fresh.clone());
                        self.account_remove(segment, &old);
                        self.account_add(segment, &fresh);
                        if expired {
                            applied.expired = Some(old);
                        } else {
                            applied.previous = Some(old);
                        }
                        applied.stored = Some(fresh);
                    }
                }
                result
            }
            Entry::Vacant(vacant) => {
                let loaded = fallback();
                let (change, result) = decide(loaded.as_ref());
                let exact = matches!(change, Change::PutExact(_));
                match change {
                    Change::Put(fresh) | Change::PutExact(fresh) => {
                        if may_add(&fresh) {
                            let fresh = self.versioned(fresh, exact);
                            self.account_add(segment, &fresh);
                            vacant.insert(fresh.clone());
                            applied.stored = Some(fresh);
                            applied.previous = loaded;
                        } else {
                            applied.refused_full = true;
                        }
                    }
                    Change::Remove => applied.previous = loaded,
                    Change::Keep => {
                        if let Some(loaded) = loaded
                            && may_add(&loaded)
                        {
                            self.account_add(segment, &loaded);
                            vacant.insert(loaded.clone());
                            applied.restored = Some(loaded);
                        }
                    }
                }
                result
            }
        };
        on_applied(&applied);
        drop(table);
        (applied, result)
    }

    /// Makes the next version handed out greater than `floor` (versions loaded from a store).
    pub(crate) fn raise_versions(&self, floor: u64) {
        self.versions.fetch_max(floor, Ordering::Relaxed);
    }

    /// The entry a put stores, with its version: the next one, or (`exact`) the one it
    /// carries.
    fn versioned(&self, mut fresh: CacheEntry, exact: bool) -> CacheEntry {
        if exact {
            self.raise_versions(fresh.version());
        } else {
            fresh.set_version_unshared(self.next_version());
        }
        fresh
    }

    fn next_version(&self) -> u64 {
        // Called under a segment write lock, so versions of one key increase in the order
        // its writes are applied.
        self.versions.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Removes `entry` if it is still the one stored (used to drop an entry found expired).
    pub(crate) fn remove_exact(&self, segment_index: usize, hash: u64, entry: &CacheEntry) -> bool {
        self.remove_exact_then(segment_index, hash, entry, |_| {})
    }

    /// [`Container::remove_exact`], running `on_removed` before the lock is released.
    pub(crate) fn remove_exact_then(
        &self,
        segment_index: usize,
        hash: u64,
        entry: &CacheEntry,
        on_removed: impl FnOnce(&CacheEntry),
    ) -> bool {
        let segment = &self.segments[segment_index];
        let mut table = segment.table.write();
        match table.find_entry(hash, |candidate| candidate.same_as(entry)) {
            Ok(occupied) => {
                let (removed, _) = occupied.remove();
                self.account_remove(segment, &removed);
                on_removed(&removed);
                drop(table);
                drop(removed);
                true
            }
            Err(_) => false,
        }
    }

    /// Entries stored, expired ones included, without walking any table.
    pub(crate) fn len(&self) -> usize {
        self.segments
            .iter()
            .map(|s| s.len.load(Ordering::Relaxed))
            .sum()
    }

    pub(crate) fn segment_len(&self, segment: usize) -> usize {
        self.segments
            .get(segment)
            .map_or(0, |s| s.len.load(Ordering::Relaxed))
    }

    /// Bytes charged for all entries.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.segments
            .iter()
            .map(|s| s.bytes.load(Ordering::Relaxed))
            .sum()
    }

    /// A copy of one segment's entry handles; writers wait only while it is taken.
    pub(crate) fn snapshot(&self, segment: usize) -> Vec<CacheEntry> {
        match self.segments.get(segment) {
            Some(segment) => segment.table.read().iter().cloned().collect(),
            None => Vec::new(),
        }
    }

    /// Removes every entry; returns how many there were.
    pub(crate) fn clear(&self) -> usize {
        (0..self.segments.len())
            .map(|segment| self.clear_segment(segment))
            .sum()
    }

    /// Removes every entry of one segment; returns how many there were.
    pub(crate) fn clear_segment(&self, segment_index: usize) -> usize {
        let Some(segment) = self.segments.get(segment_index) else {
            return 0;
        };
        let mut table = segment.table.write();
        let taken = std::mem::take(&mut *table);
        segment.len.store(0, Ordering::Relaxed);
        segment.bytes.store(0, Ordering::Relaxed);
        segment.mortal.store(0, Ordering::Relaxed);
        drop(table);
        if let Some(totals) = &self.totals {
            let bytes: usize = taken.iter().map(entry_charge).sum();
            totals
                .count
                .fetch_sub(taken.len() as i64, Ordering::Relaxed);
            totals.bytes.fetch_sub(bytes as i64, Ordering::Relaxed);
        }
        taken.len()
    }

    /// Removes the expired entries of one segment and returns them. Segments holding no
    /// mortal entry are skipped without locking.
    pub(crate) fn purge_expired(&self, segment_index: usize, now_ms: u64) -> Vec<CacheEntry> {
        let Some(segment) = self.segments.get(segment_index) else {
            return Vec::new();
        };
        if segment.mortal.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let mut table = segment.table.write();
        let expired: Vec<CacheEntry> = table.extract_if(|entry| entry.is_expired(now_ms)).collect();
        for entry in &expired {
            self.account_remove(segment, entry);
        }
        expired
    }

    /// Evicts one entry: the sampled entry with the lowest `score`, or an expired one met
    /// while sampling. `protect` is never chosen (the entry whose write triggered the
    /// eviction). Returns the entry and whether it had expired.
    pub(crate) fn evict_one(
        &self,
        protect: Option<&CacheEntry>,
        now_ms: u64,
        score: impl Fn(&CacheEntry) -> u32,
        on_evicted: &dyn Fn(u32, &CacheEntry),
    ) -> Option<(CacheEntry, bool)> {
        loop {
            let (segment, victim, expired) = self.sample_victim(protect, now_ms, &score)?;
            // Chosen under a read lock: a writer may have replaced or removed it since.
            let hash = self.hasher.hash_one(victim.key());
            let removed = self.remove_exact_then(segment, hash, &victim, |removed| {
                if !expired {
                    on_evicted(segment as u32, removed);
                }
            });
            if removed {
                return Some((victim, expired));
            }
        }
    }

    /// Picks an eviction victim from a sample of `EVICTION_SAMPLE_SIZE` entries found at
    /// random buckets of randomly chosen segments.
    ///
    /// Why random buckets, and at most `EVICTION_SMALL_SEGMENT_TAKE` entries from a small
    /// segment: a bounded cache of a few thousand entries over 256 segments holds a handful
    /// per segment. Sampling one segment (or a run of neighbouring buckets or segments)
    /// makes the sample a few entries that were often all popular ones, since unpopular
    /// entries next to popular ones are the first to go; popular entries were then evicted
    /// about as often as under random eviction.
    fn sample_victim(
        &self,
        protect: Option<&CacheEntry>,
        now_ms: u64,
        score: &impl Fn(&CacheEntry) -> u32,
    ) -> Option<(usize, CacheEntry, bool)> {
        let count = self.segments.len();
        let mut best: Option<(usize, CacheEntry, u32)> = None;
        let mut sampled = 0;
        let mut consider = |index: usize, candidate: &CacheEntry| -> Option<bool> {
            if protect.is_some_and(|p| p.same_as(candidate)) {
                return None;
            }
            if candidate.is_expired(now_ms) {
                return Some(true);
            }
            let candidate_score = score(candidate);
            if best.as_ref().is_none_or(|(_, _, s)| candidate_score < *s) {
                best = Some((index, candidate.clone(), candidate_score));
            }
            Some(false)
        };
        for _ in 0..EVICTION_SEGMENT_PICKS_MAX {
            let index = random_index(count);
            let segment = &self.segments[index];
            if segment.len.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let table = segment.table.read();
            let buckets = table.num_buckets();
            let take = if table.len() >= EVICTION_LARGE_SEGMENT_LEN {
                EVICTION_SAMPLE_SIZE
            } else {
                EVICTION_SMALL_SEGMENT_TAKE
            };
            let mut taken = 0;
            for _ in 0..EVICTION_PROBES_PER_SEGMENT {
                let Some(candidate) = table.get_bucket(random_index(buckets)) else {
                    continue;
                };
                match consider(index, candidate) {
                    Some(true) => return Some((index, candidate.clone(), true)),
                    Some(false) => {
                        taken += 1;
                        sampled += 1;
                    }
                    None => {}
                }
                if taken == take || sampled == EVICTION_SAMPLE_SIZE {
                    break;
                }
            }
            drop(table);
            if sampled == EVICTION_SAMPLE_SIZE {
                break;
            }
        }
        if sampled == 0 {
            // Random probes found nothing (an almost empty, sparse container): scan until
            // one candidate is found.
            let start = random_index(count);
            'scan: for offset in 0..count {
                let index = (start + offset) % count;
                let segment = &self.segments[index];
                if segment.len.load(Ordering::Relaxed) == 0 {
                    continue;
                }
                let table = segment.table.read();
                for candidate in table.iter() {
                    match consider(index, candidate) {
                        Some(true) => return Some((index, candidate.clone(), true)),
                        Some(false) => break 'scan,
                        None => {}
                    }
                }
            }
        }
        best.map(|(index, victim, _)| (index, victim, false))
    }

    /// Checks the container's own invariants; run by tests after mutations.
    ///
    /// # Panics
    /// If a counter disagrees with the table or a key sits in the wrong segment.
    pub fn check_invariants(&self) {
        let mut total = 0;
        for (index, segment) in self.segments.iter().enumerate() {
            let table = segment.table.read();
            assert_eq!(
                segment.len.load(Ordering::Relaxed),
                table.len(),
                "segment {index} len"
            );
            let bytes: usize = table.iter().map(entry_charge).sum();
            assert_eq!(
                segment.bytes.load(Ordering::Relaxed),
                bytes,
                "segment {index} bytes"
            );
            let mortal = table.iter().filter(|e| e.is_mortal()).count();
            assert_eq!(
                segment.mortal.load(Ordering::Relaxed),
                mortal,
                "segment {index} mortal"
            );
            for entry in table.iter() {
                assert_eq!(
                    self.partitioner.segment_of(entry.key(), self.segment_count) as usize,
                    index
                );
            }
            total += table.len();
        }
        if let Some(totals) = &self.totals {
            assert_eq!(
                totals.count.load(Ordering::Relaxed),
                total as i64,
                "total count"
            );
        }
    }
}
