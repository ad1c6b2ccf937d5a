//! The `Cache`: the byte-level API every protocol and the typed wrapper use.
//!
//! Each operation locates the key's segment, applies at most one change under that segment's
//! lock (see `container`), then — with no lock held — enforces the memory bound, raises
//! events and records statistics. Expired entries are never returned: reads that meet one
//! drop it and raise an expired event; the reaper purges the rest.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;

use crate::clock::Clock;
use crate::config::{CacheConfig, WhenFull};
use crate::container::{Applied, Change, Container};
use crate::entry::{CacheEntry, EntryMetadata, Payload, StoredExpiration};
use crate::error::CacheError;
use crate::eviction::FrequencySketch;
use crate::listener::{CacheEvent, EventKind, ListenerId, ListenerOptions, Listeners};
use crate::media::Format;
use crate::persistence::{Persistence, PersistenceError, StoreChange};
use crate::stats::{CacheStatistics, Stats};
use crate::structure::StructureCell;

/// How often (in entries) a preload checks whether to log its progress.
const PRELOAD_PROGRESS_EVERY: u64 = 65_536;
/// Largest key accepted, in bytes (Redis' limit for keys and values).
pub const KEY_BYTES_MAX: usize = 512 << 20;
/// Largest value accepted, in bytes.
pub const VALUE_BYTES_MAX: usize = 512 << 20;

/// How long an entry may live (lifespan) or stay unread (max idle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Lifetime {
    /// The cache's configured default.
    #[default]
    Default,
    /// Never expires.
    Never,
    /// Expires after this long.
    After(Duration),
    /// Keep what the entry being overwritten had (its absolute deadline); the cache default
    /// for a new key. For overwrites that must not touch expiration, like Redis' KEEPTTL.
    Keep,
}

impl Lifetime {
    /// `After(ms)` from milliseconds.
    #[must_use]
    pub fn millis(ms: u64) -> Self {
        Self::After(Duration::from_millis(ms))
    }
}

/// Expiration requested by a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Expiry {
    /// Lifespan.
    pub lifespan: Lifetime,
    /// Max idle.
    pub max_idle: Lifetime,
}

impl Expiry {
    /// Keep the overwritten entry's expiration.
    pub const KEEP: Self = Self {
        lifespan: Lifetime::Keep,
        max_idle: Lifetime::Keep,
    };
    /// Never expire, whatever the cache default.
    pub const NEVER: Self = Self {
        lifespan: Lifetime::Never,
        max_idle: Lifetime::Never,
    };
}

/// Options of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteOptions {
    /// Expiration.
    pub expiry: Expiry,
    /// Return no previous value (saves work; later, network transfer).
    pub ignore_return_values: bool,
    /// Raise no events for this write.
    pub skip_listeners: bool,
    /// Client flags stored with the value (memcached's 32-bit flags; 0 = none).
    pub user_flags: u32,
}

impl WriteOptions {
    /// With a lifespan.
    #[must_use]
    pub fn lifespan(mut self, lifespan: Duration) -> Self {
        self.expiry.lifespan = Lifetime::After(lifespan);
        self
    }

    /// With a max idle.
    #[must_use]
    pub fn max_idle(mut self, max_idle: Duration) -> Self {
        self.expiry.max_idle = Lifetime::After(max_idle);
        self
    }

    /// With this expiry.
    #[must_use]
    pub fn expiry(mut self, expiry: Expiry) -> Self {
        self.expiry = expiry;
        self
    }

    /// Without previous values.
    #[must_use]
    pub fn ignore_return_values(mut self) -> Self {
        self.ignore_return_values = true;
        self
    }

    /// Without events.
    #[must_use]
    pub fn skip_listeners(mut self) -> Self {
        self.skip_listeners = true;
        self
    }

    /// With client flags stored beside the value.
    #[must_use]
    pub fn user_flags(mut self, flags: u32) -> Self {
        self.user_flags = flags;
        self
    }
}

/// The result of a versioned (compare-and-set) write.
#[derive(Debug, Clone)]
pub enum VersionedOutcome {
    /// Applied; carries the replaced or removed entry.
    Done(CacheEntry),
    /// The key holds another version; carries the current entry.
    Mismatch(CacheEntry),
    /// The key is absent.
    Absent,
}

impl VersionedOutcome {
    /// True when the write was applied.
    #[must_use]
    pub fn is_done(&self) -> bool {
        matches!(self, Self::Done(_))
    }
}

/// What a `compute` function decided.
#[derive(Debug)]
pub enum Compute<R> {
    /// Leave the key unchanged.
    Keep(R),
    /// Remove the key.
    Remove(R),
    /// Store this value with this expiry (and the write options' client flags).
    Put(Vec<u8>, Expiry, R),
    /// Store this value — bytes with client flags, or a structure — with this expiry.
    PutValue(NewValue, Expiry, R),
    /// Keep the value as it is (bytes and flags, or structure) with a new expiry; a new
    /// version. Like `Keep` when the key is absent.
    Reexpire(Expiry, R),
}

/// A value a `compute` function stores.
#[derive(Debug, Clone)]
pub enum NewValue {
    /// Bytes with client flags.
    Bytes {
        /// The value.
        value: Vec<u8>,
        /// Client flags (0 = none).
        user_flags: u32,
        /// Edited in place rather than written whole (see [`CacheEntry::is_edited`]).
        edited: bool,
    },
    /// A structure (usually the existing entry's cell, changed in place).
    Structure(Arc<StructureCell>),
}

impl NewValue {
    /// The value `entry` holds: its bytes and flags, or its structure.
    #[must_use]
    pub fn of(entry: &CacheEntry) -> Self {
        match entry.structure() {
            Some(cell) => Self::Structure(Arc::clone(cell)),
            None => Self::Bytes {
                value: entry.value().to_vec(),
                user_flags: entry.user_flags(),
                edited: entry.is_edited(),
            },
        }
    }
}

/// A configured bound as the signed type the totals use; bounds beyond `i64::MAX` mean
/// "unbounded" rather than wrapping negative (which would evict everything).
fn saturating_i64(bound: u64) -> i64 {
    i64::try_from(bound).unwrap_or(i64::MAX)
}

pub(crate) struct CacheInner {
    name: Arc<str>,
    config: CacheConfig,
    container: Container,
    clock: Arc<dyn Clock>,
    stats: Stats,
    listeners: Listeners,
    sketch: Option<FrequencySketch>,
    removed: AtomicBool,
    /// Storage media types, from the configuration (read on every protocol request).
    formats: (Format, Format),
    /// The cache's stores, if it has any.
    persistence: Option<Arc<dyn Persistence>>,
    /// Memory holds everything the stores hold: a miss in memory needs no store lookup.
    memory_complete: bool,
}

/// A change to one key decided by another node; see [`Cache::apply_remote`].
#[derive(Debug, Clone)]
pub enum RemoteChange {
    /// The key holds this entry, with the version its primary owner gave it.
    Put(CacheEntry),
    /// The key holds this entry unless memory holds one at least as new (state transfer
    /// racing writes that reached this node directly).
    PutIfNewer(CacheEntry),
    /// The key was removed.
    Remove,
}

/// A named cache of byte keys and values. Cloning is cheap (a shared handle).
#[derive(Clone)]
pub struct Cache {
    inner: Arc<CacheInner>,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("name", &self.inner.name)
            .field("size", &self.size())
            .finish()
    }
}

/// Iterates a cache's live entries segment by segment; see [`Cache::iter`].
#[derive(Debug)]
pub struct CacheIter {
    cache: Cache,
    segments: std::vec::IntoIter<u32>,
    current: std::vec::IntoIter<CacheEntry>,
}

impl Iterator for CacheIter {
    type Item = CacheEntry;

    fn next(&mut self) -> Option<CacheEntry> {
        loop {
            if let Some(entry) = self.current.next() {
                if entry.is_mortal() && entry.is_expired(self.cache.inner.clock.now_ms()) {
                    continue;
                }
                return Some(entry);
            }
            let segment = self.segments.next()?;
            let mut entries = self.cache.inner.container.snapshot(segment as usize);
            if !self.cache.inner.memory_complete
                && let Some(persistence) = &self.cache.inner.persistence
            {
                let in_memory: std::collections::HashSet<Bytes> =
                    entries.iter().map(CacheEntry::key_bytes).collect();
                let mut stored = Vec::new();
                let visited = persistence.for_each(&[segment], &mut |entry: CacheEntry| {
                    if !in_memory.contains(entry.key()) {
                        stored.push(entry);
                    }
                });
                if let Err(error) = visited {
                    tracing::warn!(cache = %self.cache.inner.name, %error, "iterating a store failed");
                }
                entries.extend(stored);
            }
            self.current = entries.into_iter();
        }
    }
}

impl Cache {
    pub(crate) fn with_persistence(
        name: &str,
        config: CacheConfig,
        clock: Arc<dyn Clock>,
        persistence: Option<Arc<dyn Persistence>>,
    ) -> Self {
        let bounded = config.memory.is_bounded();
        let sketch = bounded.then(|| {
            let capacity = match (config.memory.max_count, config.memory.max_size_bytes) {
                (Some(count), _) => count,
                (None, Some(bytes)) => bytes / 128,
                (None, None) => 0,
            };
            FrequencySketch::new(usize::try_from(capacity).unwrap_or(usize::MAX))
        });
        let formats = (config.key_format(), config.value_format());
        let memory_complete = persistence
            .as_ref()
            .is_none_or(|p| p.memory_complete() && !bounded);
        let container = Container::new(config.segments, bounded, config.key_partitioner);
        if let Some(persistence) = &persistence {
            container.raise_versions(persistence.max_version());
        }
        Self {
            inner: Arc::new(CacheInner {
                formats,
                persistence,
                memory_complete,
                name: Arc::from(name),
                container,
                stats: Stats::new(config.statistics),
                config,
                clock,
                listeners: Listeners::new(),
                sketch,
                removed: AtomicBool::new(false),
            }),
        }
    }

    /// The media type keys are stored in (see [`CacheConfig::key_format`]).
    #[must_use]
    pub fn key_format(&self) -> Format {
        self.inner.formats.0
    }

    /// The media type values are stored in (see [`CacheConfig::value_format`]).
    #[must_use]
    pub fn value_format(&self) -> Format {
        self.inner.formats.1
    }

    /// The cache's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The configuration the cache was created with.
    #[must_use]
    pub fn config(&self) -> &CacheConfig {
        &self.inner.config
    }

    /// The clock the cache judges expiration by.
    #[must_use]
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.clock
    }

    /// Number of segments.
    #[must_use]
    pub fn segment_count(&self) -> u32 {
        self.inner.container.segment_count()
    }

    /// The segment `key` belongs to.
    #[must_use]
    pub fn segment_of(&self, key: &[u8]) -> u32 {
        self.inner
            .config
            .key_partitioner
            .segment_of(key, self.segment_count())
    }

    pub(crate) fn mark_removed(&self) {
        self.inner.removed.store(true, Ordering::Release);
        self.inner.container.clear();
        if let Some(persistence) = &self.inner.persistence {
            persistence.destroy();
        }
    }

    fn check_live(&self) -> Result<(), CacheError> {
        if self.inner.removed.load(Ordering::Acquire) {
            return Err(CacheError::Removed {
                cache: self.inner.name.to_string(),
            });
        }
        Ok(())
    }

    fn check_sizes(key: &[u8], value: &[u8]) -> Result<(), CacheError> {
        if key.len() > KEY_BYTES_MAX {
            return Err(CacheError::TooLarge {
                what: "key",
                bytes: key.len(),
                limit: KEY_BYTES_MAX,
            });
        }
        if value.len() > VALUE_BYTES_MAX {
            return Err(CacheError::TooLarge {
                what: "value",
                bytes: value.len(),
                limit: VALUE_BYTES_MAX,
            });
        }
        Ok(())
    }

    fn record_access(&self, hash: u64) {
        if let Some(sketch) = &self.inner.sketch {
            sketch.increment(hash);
        }
    }

    /// Resolves a requested expiry against the cache defaults and, for `Keep`, the entry
    /// being overwritten.
    fn resolve(
        &self,
        expiry: Expiry,
        existing: Option<&CacheEntry>,
        now_ms: u64,
    ) -> StoredExpiration {
        let defaults = &self.inner.config.expiration;
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let existing = existing.map(CacheEntry::expiration);
        let lifespan = match expiry.lifespan {
            Lifetime::Default => defaults.lifespan.map(millis),
            Lifetime::Never => None,
            Lifetime::After(d) => Some(millis(d)),
            Lifetime::Keep => match existing {
                Some(old) => old
                    .lifespan_deadline_ms()
                    .map(|deadline| deadline.saturating_sub(now_ms)),
                None => defaults.lifespan.map(millis),
            },
        };
        let max_idle = match expiry.max_idle {
            Lifetime::Default => defaults.max_idle.map(millis),
            Lifetime::Never => None,
            Lifetime::After(d) => Some(millis(d)),
            Lifetime::Keep => match existing {
                Some(old) => old.max_idle_ms,
                None => defaults.max_idle.map(millis),
            },
        };
        StoredExpiration::new(now_ms, lifespan, max_idle)
    }

    fn needs_clock(&self, expiry: Expiry) -> bool {
        let defaults = &self.inner.config.expiration;
        let uses = |lifetime: Lifetime, default: bool| match lifetime {
            Lifetime::Default => default,
            Lifetime::Never => false,
            Lifetime::After(_) | Lifetime::Keep => true,
        };
        uses(expiry.lifespan, defaults.lifespan.is_some())
            || uses(expiry.max_idle, defaults.max_idle.is_some())
    }

    /// Builds the entry a write stores; `existing`, the live entry it overwrites, matters only
    /// for `Lifetime::Keep`.
    fn new_entry(
        &self,
        key: &[u8],
        value: Payload<'_>,
        expiry: Expiry,
        existing: Option<&CacheEntry>,
    ) -> CacheEntry {
        if self.needs_clock(expiry) {
            let now = self.inner.clock.now_ms();
            CacheEntry::with_payload(key, value, self.resolve(expiry, existing, now), now)
        } else {
            CacheEntry::with_payload(key, value, StoredExpiration::IMMORTAL, 0)
        }
    }

    /// The entry a write stores, built before the segment lock is taken — unless its expiry
    /// keeps the overwritten entry's (`Lifetime::Keep`), which needs the live entry and so is
    /// built under the lock by [`Cache::entry_for`].
    fn prebuilt(&self, key: &[u8], value: Payload<'_>, expiry: Expiry) -> Option<CacheEntry> {
        let keeps = expiry.lifespan == Lifetime::Keep || expiry.max_idle == Lifetime::Keep;
        (!keeps).then(|| self.new_entry(key, value, expiry, None))
    }

    /// The prebuilt entry, or one built now against the live entry it overwrites.
    fn entry_for(
        &self,
        prebuilt: Option<CacheEntry>,
        key: &[u8],
        value: Payload<'_>,
        expiry: Expiry,
        existing: Option<&CacheEntry>,
    ) -> CacheEntry {
        prebuilt.unwrap_or_else(|| self.new_entry(key, value, expiry, existing))
    }

    /// The live entry for `key`, dropping it (with an expired event) if it has expired.
    fn live_entry(&self, segment: usize, hash: u64, key: &[u8]) -> Option<CacheEntry> {
        let entry = match self.inner.container.get(segment, hash, key) {
            Some(entry) => entry,
            None if self.inner.memory_complete => return None,
            None => return self.activate(segment, hash, key).ok().flatten(),
        };
        if !entry.is_mortal() {
            return Some(entry);
        }
        let now = self.inner.clock.now_ms();
        if entry.is_expired(now) {
            if self.inner.container.remove_exact(segment, hash, &entry) {
                self.expired(entry);
            }
            return None;
        }
        entry.touch(now);
        Some(entry)
    }

    /// Loads `key` from the stores into memory (under its segment lock, so no concurrent
    /// write can slip between the load and the insert).
    fn activate(
        &self,
        segment: usize,
        hash: u64,
        key: &[u8],
    ) -> Result<Option<CacheEntry>, CacheError> {
        let mut failure = None;
        let (applied, found) = self.inner.container.update(
            segment,
            hash,
            key,
            &*self.inner.clock,
            |_| true,
            || self.load_locked(segment, key, &mut failure),
            |existing| (Change::Keep, existing.cloned()),
            |applied| self.record_locked(segment, key, applied),
        );
        if let Some(error) = failure {
            return Err(error.into());
        }
        if applied.restored.is_some() {
            self.enforce_bounds(applied.restored.as_ref());
        }
        if let Some(entry) = &found
            && entry.is_mortal()
        {
            entry.touch(self.inner.clock.now_ms());
        }
        Ok(found)
    }

    /// The stores' entry for `key`, under its segment lock; a failure is kept for the caller.
    fn load_locked(
        &self,
        segment: usize,
        key: &[u8],
        failure: &mut Option<PersistenceError>,
    ) -> Option<CacheEntry> {
        if self.inner.memory_complete {
            return None;
        }
        let persistence = self.inner.persistence.as_ref()?;
        match persistence.load(segment as u32, key) {
            Ok(Some(entry)) if entry.is_mortal() && entry.is_expired(self.inner.clock.now_ms()) => {
                None
            }
            Ok(found) => found,
            Err(error) => {
                *failure = Some(error);
                None
            }
        }
    }

    /// Hands what a write did to the stores, under the key's segment lock.
    fn record_locked(&self, segment: usize, key: &[u8], applied: &Applied) {
        let Some(persistence) = &self.inner.persistence else {
            return;
        };
        if let Some(stored) = &applied.stored {
            persistence.record(segment as u32, StoreChange::Put(stored));
        } else if applied.previous.is_some() {
            persistence.record(segment as u32, StoreChange::Remove(key));
        } else if applied.restored.is_some() {
            persistence.activated(segment as u32, key);
        }
    }

    /// Before a read: a clustered cache split from its majority may refuse it.
    fn admit_read(&self) -> Result<(), CacheError> {
        match &self.inner.persistence {
            Some(persistence) => Ok(persistence.admit_read()?),
            None => Ok(()),
        }
    }

    /// Before a write: the stores may refuse it, or hold it back while write-behind is full.
    fn admit(&self) -> Result<(), CacheError> {
        match &self.inner.persistence {
            Some(persistence) => Ok(persistence.admit_write()?),
            None => Ok(()),
        }
    }

    /// Before a write of one key of `segment`: as [`Cache::admit`], and a clustered cache
    /// refuses it where this node does not order the segment's writes.
    fn admit_at(&self, segment: usize) -> Result<(), CacheError> {
        match &self.inner.persistence {
            Some(persistence) => {
                let admitted = persistence.admit_write_at(segment as u32);
                crate::persistence::note_admission(&admitted);
                Ok(admitted?)
            }
            None => Ok(()),
        }
    }

    /// Before a write waited for on its own (not collected by a surrounding
    /// [`crate::persistence::collect_durability`]): the number its wait is checked against
    /// (see [`crate::persistence::next_epoch`]).
    fn write_epoch(&self) -> (u64, Option<crate::persistence::BatchGuard>) {
        if self.inner.persistence.is_some() && !crate::persistence::collecting() {
            let epoch = crate::persistence::next_epoch();
            (epoch, Some(crate::persistence::enter_batch(epoch)))
        } else {
            (0, None)
        }
    }

    /// After a write started at `epoch`: waits until the stores have made it durable, or
    /// leaves the wait to the surrounding [`crate::persistence::collect_durability`].
    fn settle_write(&self, epoch: u64) -> Result<(), CacheError> {
        let Some(persistence) = &self.inner.persistence else {
            return Ok(());
        };
        if crate::persistence::defer(persistence) {
            return Ok(());
        }
        Ok(persistence.wait_batches(&[epoch], epoch)?)
    }

    /// After a read or a clear: as [`Cache::settle_write`], for changes recorded before now.
    fn settle(&self) -> Result<(), CacheError> {
        let Some(persistence) = &self.inner.persistence else {
            return Ok(());
        };
        if crate::persistence::defer(persistence) {
            return Ok(());
        }
        Ok(persistence.wait()?)
    }

    fn expired(&self, entry: CacheEntry) {
        self.inner.stats.bump(&self.inner.stats.expirations, 1);
        if self.inner.listeners.has_any() {
            self.inner.listeners.notify(CacheEvent::new(
                EventKind::Expired,
                Arc::clone(&self.inner.name),
                Some(entry),
                None,
            ));
        }
    }

    /// Turns what a write did into events, then enforces the memory bound.
    fn after_write(&self, applied: &Applied, skip_listeners: bool) {
        if let Some(expired) = &applied.expired {
            self.expired(expired.clone());
        }
        if !skip_listeners && self.inner.listeners.has_any() {
            let kind = match (&applied.previous, &applied.stored) {
                (None, Some(_)) => Some(EventKind::Created),
                (Some(_), Some(_)) => Some(EventKind::Modified),
                (Some(_), None) => Some(EventKind::Removed),
                (None, None) => None,
            };
            if let Some(kind) = kind {
                self.inner.listeners.notify(CacheEvent::new(
                    kind,
                    Arc::clone(&self.inner.name),
                    applied.previous.clone(),
                    applied.stored.clone(),
                ));
            }
        }
        if applied.stored.is_some() {
            self.enforce_bounds(applied.stored.as_ref());
        } else if applied.restored.is_some() {
            self.enforce_bounds(applied.restored.as_ref());
        }
    }

    fn over_bound(&self) -> bool {
        let Some(totals) = self.inner.container.totals() else {
            return false;
        };
        let memory = &self.inner.config.memory;
        memory
            .max_count
            .is_some_and(|max| totals.count.load(Ordering::Relaxed) > saturating_i64(max))
            || memory
                .max_size_bytes
                .is_some_and(|max| totals.bytes.load(Ordering::Relaxed) > saturating_i64(max))
    }

    fn may_add(&self, entry: &CacheEntry) -> bool {
        let memory = &self.inner.config.memory;
        if memory.when_full != WhenFull::Exception {
            return true;
        }
        let Some(totals) = self.inner.container.totals() else {
            return true;
        };
        let fits_count = memory
            .max_count
            .is_none_or(|max| totals.count.load(Ordering::Relaxed) < saturating_i64(max));
        let fits_bytes = memory.max_size_bytes.is_none_or(|max| {
            totals.bytes.load(Ordering::Relaxed).saturating_add(
                i64::try_from(crate::container::entry_charge(entry)).unwrap_or(i64::MAX),
            ) <= saturating_i64(max)
        });
        fits_count && fits_bytes
    }

    fn enforce_bounds(&self, protect: Option<&CacheEntry>) {
        if self.inner.config.memory.when_full != WhenFull::Remove {
            return;
        }
        let sketch = self.inner.sketch.as_ref();
        let container = &self.inner.container;
        while self.over_bound() {
            let now = self.inner.clock.now_ms();
            let score = |entry: &CacheEntry| {
                sketch.map_or(0, |s| s.frequency(container.table_hash(entry.key())))
            };
            let on_evicted = |segment: u32, entry: &CacheEntry| {
                if let Some(persistence) = &self.inner.persistence {
                    persistence.evicted(segment, entry);
                }
            };
            let Some((victim, was_expired)) = container.evict_one(protect, now, score, &on_evicted)
            else {
                break;
            };
            if was_expired {
                self.expired(victim);
                continue;
            }
            self.inner.stats.bump(&self.inner.stats.evictions, 1);
            if self.inner.listeners.has_any() {
                self.inner.listeners.notify(CacheEvent::new(
                    EventKind::Evicted,
                    Arc::clone(&self.inner.name),
                    Some(victim),
                    None,
                ));
            }
        }
    }

    fn write(
        &self,
        key: &[u8],
        options: &WriteOptions,
        decide: impl FnOnce(Option<&CacheEntry>) -> Change,
    ) -> Result<Applied, CacheError> {
        self.check_live()?;
        let (segment, hash) = self.inner.container.locate(key);
        self.admit_at(segment)?;
        let (epoch, _batch) = self.write_epoch();
        self.record_access(hash);
        let mut failure = None;
        let (applied, ()) = self.inner.container.update(
            segment,
            hash,
            key,
            &*self.inner.clock,
            |entry| self.may_add(entry),
            || self.load_locked(segment, key, &mut failure),
            |existing| (decide(existing), ()),
            |applied| self.record_locked(segment, key, applied),
        );
        if let Some(error) = failure {
            return Err(error.into());
        }
        if applied.refused_full {
            return Err(CacheError::ContainerFull {
                cache: self.inner.name.to_string(),
            });
        }
        self.after_write(&applied, options.skip_listeners);
        self.settle_write(epoch)?;
        Ok(applied)
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, CacheError> {
        Ok(self.get_entry(key)?.map(|entry| entry.value_bytes()))
    }

    /// The entry of `key`, with its metadata; a zero-copy handle.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn get_entry(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
        self.check_live()?;
        self.admit_read()?;
        let timer = self.inner.stats.start();
        let (segment, hash) = self.inner.container.locate(key);
        self.record_access(hash);
        let entry = self.live_entry(segment, hash, key);
        self.inner.stats.read_done(timer, entry.is_some());
        self.read_settle(segment)?;
        Ok(entry)
    }

    /// After a read of a cache whose persistence asks for it (see
    /// [`Persistence::read_barrier`]): waits, or leaves the wait to the surrounding
    /// [`crate::persistence::collect_durability`], as a write does.
    fn read_settle(&self, segment: usize) -> Result<(), CacheError> {
        let Some(persistence) = &self.inner.persistence else {
            return Ok(());
        };
        if !persistence.read_barrier() {
            return Ok(());
        }
        let (epoch, _batch) = self.write_epoch();
        persistence.note_read(u32::try_from(segment).unwrap_or(u32::MAX));
        if crate::persistence::defer(persistence) {
            return Ok(());
        }
        // A read fails for no write's sake (`u64::MAX`): it only waits.
        Ok(persistence.wait_batches(&[epoch], u64::MAX)?)
    }

    /// The metadata of `key`'s entry.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn get_metadata(&self, key: &[u8]) -> Result<Option<EntryMetadata>, CacheError> {
        Ok(self.get_entry(key)?.map(|entry| entry.metadata()))
    }

    /// Whether `key` has a live entry. Not counted as a read in statistics.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn contains(&self, key: &[u8]) -> Result<bool, CacheError> {
        self.check_live()?;
        self.admit_read()?;
        let (segment, hash) = self.inner.container.locate(key);
        let present = self.live_entry(segment, hash, key).is_some();
        self.read_settle(segment)?;
        Ok(present)
    }

    /// Stores `value` under `key`; returns the previous entry.
    ///
    /// # Errors
    /// If the cache is full (`when-full = exception`), the key or value is too large, or the
    /// cache was removed.
    pub fn put(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        let applied = self.put_applied(key, value, options)?;
        // `put` and `remove` honour the flag; conditional writes report the entry they met
        // whatever it says, since that tells whether they applied.
        Ok(if options.ignore_return_values {
            None
        } else {
            applied.previous
        })
    }

    /// [`Cache::put`], returning the version the stored entry got (memcached's CAS unique),
    /// exact even if another writer changes the key right after.
    ///
    /// # Errors
    /// As [`Cache::put`].
    pub fn put_version(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<u64, CacheError> {
        let applied = self.put_applied(key, value, options)?;
        Ok(applied.stored.map_or(0, |entry| entry.version()))
    }

    fn put_applied(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Applied, CacheError> {
        Self::check_sizes(key, value)?;
        let timer = self.inner.stats.start();
        let fresh = self.prebuilt(
            key,
            Payload::Bytes(value, options.user_flags),
            options.expiry,
        );
        let applied = self.write(key, options, |existing| {
            Change::Put(self.entry_for(
                fresh,
                key,
                Payload::Bytes(value, options.user_flags),
                options.expiry,
                existing,
            ))
        })?;
        self.inner.stats.write_done(timer, true);
        Ok(applied)
    }

    /// Stores `value` only if `key` is absent; returns the existing entry if there was one
    /// (and then stores nothing). Returns the existing entry even with
    /// `ignore_return_values`, since it is the answer to "did it apply".
    ///
    /// # Errors
    /// As [`Cache::put`].
    pub fn put_if_absent(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        Self::check_sizes(key, value)?;
        let timer = self.inner.stats.start();
        let fresh = self.new_entry(
            key,
            Payload::Bytes(value, options.user_flags),
            options.expiry,
            None,
        );
        let mut existing_entry = None;
        let applied = self.write(key, options, |existing| match existing {
            Some(existing) => {
                existing_entry = Some(existing.clone());
                Change::Keep
            }
            None => Change::Put(fresh),
        })?;
        self.inner.stats.write_done(timer, applied.stored.is_some());
        Ok(existing_entry)
    }

    /// Stores `value` only if `key` is present; returns the replaced entry, or `None` when
    /// nothing was replaced.
    ///
    /// # Errors
    /// As [`Cache::put`].
    pub fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        Self::check_sizes(key, value)?;
        let timer = self.inner.stats.start();
        let fresh = self.prebuilt(
            key,
            Payload::Bytes(value, options.user_flags),
            options.expiry,
        );
        let applied = self.write(key, options, |existing| match existing {
            Some(_) => Change::Put(self.entry_for(
                fresh,
                key,
                Payload::Bytes(value, options.user_flags),
                options.expiry,
                existing,
            )),
            None => Change::Keep,
        })?;
        self.inner.stats.write_done(timer, applied.stored.is_some());
        Ok(applied.previous)
    }

    /// Stores `value` only if `key`'s entry has `version`.
    ///
    /// # Errors
    /// As [`Cache::put`].
    pub fn replace_if_version(
        &self,
        key: &[u8],
        version: u64,
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<VersionedOutcome, CacheError> {
        Self::check_sizes(key, value)?;
        let timer = self.inner.stats.start();
        let fresh = self.prebuilt(
            key,
            Payload::Bytes(value, options.user_flags),
            options.expiry,
        );
        let mut outcome = VersionedOutcome::Absent;
        let applied = self.write(key, options, |existing| match existing {
            Some(live) if live.version() == version => Change::Put(self.entry_for(
                fresh,
                key,
                Payload::Bytes(value, options.user_flags),
                options.expiry,
                existing,
            )),
            Some(existing) => {
                outcome = VersionedOutcome::Mismatch(existing.clone());
                Change::Keep
            }
            None => Change::Keep,
        })?;
        if let Some(previous) = applied.previous {
            outcome = VersionedOutcome::Done(previous);
        }
        self.inner.stats.write_done(timer, applied.stored.is_some());
        Ok(outcome)
    }

    /// Removes `key`; returns the removed entry.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn remove(
        &self,
        key: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        let timer = self.inner.stats.start();
        let applied = self.write(key, options, |existing| match existing {
            Some(_) => Change::Remove,
            None => Change::Keep,
        })?;
        self.inner
            .stats
            .remove_done(timer, applied.previous.is_some());
        Ok(if options.ignore_return_values {
            None
        } else {
            applied.previous
        })
    }

    /// Removes `key`, reporting only whether something was removed (for callers that need
    /// the answer but not the value, with `ignore_return_values` semantics elsewhere).
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn delete(&self, key: &[u8]) -> Result<bool, CacheError> {
        Ok(self.remove(key, &WriteOptions::default())?.is_some())
    }

    /// Removes `key` only if its entry has `version`.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn remove_if_version(
        &self,
        key: &[u8],
        version: u64,
        options: &WriteOptions,
    ) -> Result<VersionedOutcome, CacheError> {
        let timer = self.inner.stats.start();
        let mut outcome = VersionedOutcome::Absent;
        let applied = self.write(key, options, |existing| match existing {
            Some(existing) if existing.version() == version => Change::Remove,
            Some(existing) => {
                outcome = VersionedOutcome::Mismatch(existing.clone());
                Change::Keep
            }
            None => Change::Keep,
        })?;
        if let Some(previous) = applied.previous {
            outcome = VersionedOutcome::Done(previous);
        }
        self.inner.stats.remove_done(timer, outcome.is_done());
        Ok(outcome)
    }

    /// Atomically computes `key`'s new state from its live entry. `f` runs under the key's
    /// segment lock: it must be quick and must not call back into this cache.
    ///
    /// # Errors
    /// As [`Cache::put`].
    pub fn compute<R>(
        &self,
        key: &[u8],
        options: &WriteOptions,
        f: impl FnOnce(Option<&CacheEntry>) -> Compute<R>,
    ) -> Result<R, CacheError> {
        Ok(self.compute_entry(key, options, f)?.1)
    }

    /// [`Cache::compute`], also returning the entry it stored (`None` when `f` kept or
    /// removed the entry): its version is the one the write got, even if another writer
    /// changes the key right after.
    ///
    /// # Errors
    /// As [`Cache::compute`].
    pub fn compute_entry<R>(
        &self,
        key: &[u8],
        options: &WriteOptions,
        f: impl FnOnce(Option<&CacheEntry>) -> Compute<R>,
    ) -> Result<(Option<CacheEntry>, R), CacheError> {
        self.check_live()?;
        let (segment, hash) = self.inner.container.locate(key);
        self.admit_at(segment)?;
        let (epoch, _batch) = self.write_epoch();
        let timer = self.inner.stats.start();
        self.record_access(hash);
        let mut size_error = None;
        let mut failure = None;
        let (applied, result) = self.inner.container.update(
            segment,
            hash,
            key,
            &*self.inner.clock,
            |entry| self.may_add(entry),
            || self.load_locked(segment, key, &mut failure),
            |existing| match f(existing) {
                Compute::Keep(result) => (Change::Keep, result),
                Compute::Remove(result) => (Change::Remove, result),
                Compute::Put(value, expiry, result) => {
                    if let Err(error) = Self::check_sizes(key, &value) {
                        size_error = Some(error);
                        return (Change::Keep, result);
                    }
                    let payload = Payload::Bytes(&value, options.user_flags);
                    (
                        Change::Put(self.new_entry(key, payload, expiry, existing)),
                        result,
                    )
                }
                Compute::PutValue(
                    NewValue::Bytes {
                        value,
                        user_flags,
                        edited,
                    },
                    expiry,
                    result,
                ) => {
                    if let Err(error) = Self::check_sizes(key, &value) {
                        size_error = Some(error);
                        return (Change::Keep, result);
                    }
                    let payload = if edited {
                        Payload::EditedBytes(&value, user_flags)
                    } else {
                        Payload::Bytes(&value, user_flags)
                    };
                    (
                        Change::Put(self.new_entry(key, payload, expiry, existing)),
                        result,
                    )
                }
                Compute::PutValue(NewValue::Structure(cell), expiry, result) => {
                    if let Err(error) = Self::check_sizes(key, &[]) {
                        size_error = Some(error);
                        return (Change::Keep, result);
                    }
                    let charge = cell.lock().heap_bytes();
                    let payload = Payload::Structure(&cell, charge);
                    (
                        Change::Put(self.new_entry(key, payload, expiry, existing)),
                        result,
                    )
                }
                Compute::Reexpire(expiry, result) => match existing {
                    None => (Change::Keep, result),
                    Some(current) => (
                        Change::Put(self.new_entry(key, current.payload(), expiry, Some(current))),
                        result,
                    ),
                },
            },
            |applied| self.record_locked(segment, key, applied),
        );
        if let Some(error) = failure {
            return Err(error.into());
        }
        if let Some(error) = size_error {
            // The write failed, but an expired entry it met was dropped all the same.
            if let Some(expired) = applied.expired {
                self.expired(expired);
            }
            return Err(error);
        }
        if applied.refused_full {
            return Err(CacheError::ContainerFull {
                cache: self.inner.name.to_string(),
            });
        }
        self.after_write(&applied, options.skip_listeners);
        self.settle_write(epoch)?;
        if applied.stored.is_some() {
            self.inner.stats.write_done(timer, true);
        } else if applied.previous.is_some() {
            self.inner.stats.remove_done(timer, true);
        }
        Ok((applied.stored, result))
    }

    /// Atomically merges `value` into `key`'s current value with `f(old, new)`, or stores
    /// `value` if the key is absent. `f` returning `None` removes the key. Returns the
    /// resulting entry.
    ///
    /// # Errors
    /// As [`Cache::put`].
    pub fn merge(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
        f: impl FnOnce(&[u8], &[u8]) -> Option<Vec<u8>>,
    ) -> Result<Option<CacheEntry>, CacheError> {
        let expiry = options.expiry;
        // The entry stored by this very write: reading the key afterwards could see another
        // writer's value, and would count as a read in the statistics.
        let (stored, ()) = self.compute_entry(key, options, |existing| match existing {
            None => Compute::Put(value.to_vec(), expiry, ()),
            Some(current) => match f(current.value(), value) {
                Some(merged) => Compute::Put(merged, expiry, ()),
                None => Compute::Remove(()),
            },
        })?;
        Ok(stored)
    }

    /// Stores every pair.
    ///
    /// # Errors
    /// The first failure; earlier pairs stay stored.
    pub fn put_all<'a>(
        &self,
        entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        options: &WriteOptions,
    ) -> Result<(), CacheError> {
        let options = options.ignore_return_values();
        for (key, value) in entries {
            self.put(key, value, &options)?;
        }
        Ok(())
    }

    /// The live entries of the given keys (absent keys are left out).
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn get_all<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<CacheEntry>, CacheError> {
        let mut found = Vec::new();
        for key in keys {
            if let Some(entry) = self.get_entry(key)? {
                found.push(entry);
            }
        }
        Ok(found)
    }

    /// Removes every entry, raising no events.
    ///
    /// # Errors
    /// If the cache was removed.
    pub fn clear(&self) -> Result<(), CacheError> {
        self.check_live()?;
        self.admit()?;
        self.inner.container.clear();
        if let Some(persistence) = &self.inner.persistence {
            persistence.clear()?;
        }
        self.settle()
    }

    /// Applies a change another node decided — replication from the key's primary owner,
    /// or an entry fetched by state transfer — keeping the entry's version (later local
    /// versions continue above it). Raises no events and does not wait for the stores: the
    /// node that decided the change answers its client. Returns whether memory changed.
    ///
    /// # Errors
    /// If the cache is full (`when-full = exception`) or was removed.
    pub fn apply_remote(&self, key: &[u8], change: RemoteChange) -> Result<bool, CacheError> {
        self.check_live()?;
        let (segment, hash) = self.inner.container.locate(key);
        let mut failure = None;
        let (applied, ()) = self.inner.container.update(
            segment,
            hash,
            key,
            &*self.inner.clock,
            |entry| self.may_add(entry),
            || self.load_locked(segment, key, &mut failure),
            |existing| {
                let change = match change {
                    RemoteChange::Put(entry) => Change::PutExact(entry),
                    RemoteChange::PutIfNewer(entry) => match existing {
                        Some(existing) if existing.version() >= entry.version() => Change::Keep,
                        _ => Change::PutExact(entry),
                    },
                    RemoteChange::Remove => Change::Remove,
                };
                (change, ())
            },
            |applied| self.record_locked(segment, key, applied),
        );
        if let Some(error) = failure {
            return Err(error.into());
        }
        if applied.refused_full {
            return Err(CacheError::ContainerFull {
                cache: self.inner.name.to_string(),
            });
        }
        self.after_write(&applied, true);
        Ok(applied.stored.is_some() || applied.previous.is_some())
    }

    /// Drops every entry of `segments` (this node no longer owns them) from memory and from
    /// the stores, so that a restart does not bring them back; returns how many memory held.
    /// Raises no events.
    pub fn drop_segments(&self, segments: &[u32]) -> usize {
        let mut dropped = 0;
        for &segment in segments {
            let stored: Vec<Bytes> = match &self.inner.persistence {
                Some(_) => self
                    .iter_segments(vec![segment])
                    .map(|entry| entry.key_bytes())
                    .collect(),
                None => Vec::new(),
            };
            dropped += self.inner.container.clear_segment(segment as usize);
            if let Some(persistence) = &self.inner.persistence {
                for key in &stored {
                    persistence.forget(segment, key);
                }
            }
        }
        dropped
    }

    /// Entries held, from per-segment counters (no walk). Expired entries not yet purged are
    /// counted, as in Redis' DBSIZE. When memory does not hold everything the stores hold
    /// (a bounded cache with stores, passivation, or no preload), the stores count what they
    /// hold from their index; only a chain of several stores, or write-behind, makes the
    /// cache walk them.
    #[must_use]
    pub fn size(&self) -> usize {
        let in_memory = self.inner.container.len();
        if self.inner.memory_complete {
            return in_memory;
        }
        self.inner
            .persistence
            .as_ref()
            .and_then(|persistence| persistence.size(in_memory))
            .unwrap_or_else(|| self.iter().count())
    }

    /// The stores' counters, if the cache has stores.
    #[must_use]
    pub fn persistence_stats(&self) -> Option<crate::persistence::PersistenceStats> {
        self.inner.persistence.as_ref().map(|p| p.stats())
    }

    /// Whether the cache has stores.
    #[must_use]
    pub fn is_persistent(&self) -> bool {
        self.inner.persistence.is_some()
    }

    /// Loads the stores' entries into memory until the memory bound is reached; returns how
    /// many were loaded. Logs progress every few seconds.
    ///
    /// # Errors
    /// If reading the stores failed.
    pub(crate) fn preload(&self) -> Result<u64, CacheError> {
        let Some(persistence) = self.inner.persistence.clone() else {
            return Ok(0);
        };
        if !persistence.preload() {
            return Ok(0);
        }
        let started = std::time::Instant::now();
        let mut last_report = started;
        let mut loaded: u64 = 0;
        let mut full = false;
        // An unbounded cache takes everything: ask for all segments at once, so the stores
        // can read their files front to back. A bounded one goes a segment at a time and
        // stops when memory is full.
        let all: Vec<u32> = (0..self.segment_count()).collect();
        let batches: Vec<&[u32]> = if self.inner.config.memory.is_bounded() {
            all.chunks(1).collect()
        } else {
            vec![&all[..]]
        };
        for segments in batches {
            if full {
                break;
            }
            persistence.for_each(segments, &mut |entry: CacheEntry| {
                if full || self.over_bound() {
                    full = true;
                    return;
                }
                if entry.is_mortal() && entry.is_expired(self.inner.clock.now_ms()) {
                    return;
                }
                let key = entry.key_bytes();
                let (index, hash) = self.inner.container.locate(&key);
                let (applied, ()) = self.inner.container.update(
                    index,
                    hash,
                    &key,
                    &*self.inner.clock,
                    |fresh| self.may_add(fresh),
                    || Some(entry),
                    |_| (Change::Keep, ()),
                    // With passivation the stores give up what memory takes back.
                    |applied| self.record_locked(index, &key, applied),
                );
                if applied.restored.is_some() {
                    loaded += 1;
                    if loaded % PRELOAD_PROGRESS_EVERY == 0
                        && last_report.elapsed() >= Duration::from_secs(2)
                    {
                        last_report = std::time::Instant::now();
                        tracing::info!(cache = %self.inner.name, loaded, "preloading");
                    }
                }
            })?;
        }
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        persistence.preloaded(loaded, elapsed_ms);
        tracing::info!(cache = %self.inner.name, entries = loaded, elapsed_ms, "preloaded");
        Ok(loaded)
    }

    /// Makes every write durable and stops the stores (passivation writes memory out first).
    ///
    /// # Errors
    /// If the final flush failed.
    pub fn shutdown_persistence(&self) -> Result<(), CacheError> {
        let Some(persistence) = &self.inner.persistence else {
            return Ok(());
        };
        let mut memory = self.inner_memory_iter();
        persistence.shutdown(&mut memory)?;
        Ok(())
    }

    /// Every entry memory holds, stores aside.
    fn inner_memory_iter(&self) -> impl Iterator<Item = CacheEntry> + '_ {
        (0..self.segment_count())
            .flat_map(|segment| self.inner.container.snapshot(segment as usize).into_iter())
    }

    /// Entries held in one segment.
    #[must_use]
    pub fn segment_size(&self, segment: u32) -> usize {
        self.inner.container.segment_len(segment as usize)
    }

    /// Memory charged for entries, allocator rounding and index slots included.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.inner.container.memory_bytes()
    }

    /// Iterates all live entries. Each segment is copied (handles only) when the iterator
    /// reaches it, so writers wait at most for that copy, and no entry is returned twice.
    /// Entries written to a segment after it was copied are not seen.
    #[must_use]
    pub fn iter(&self) -> CacheIter {
        self.iter_segments((0..self.segment_count()).collect())
    }

    /// Iterates the live entries of the chosen segments, in the order given (duplicates
    /// and out-of-range segments are ignored).
    #[must_use]
    pub fn iter_segments(&self, mut segments: Vec<u32>) -> CacheIter {
        let count = self.segment_count();
        let mut seen = std::collections::HashSet::new();
        segments.retain(|&segment| segment < count && seen.insert(segment));
        CacheIter {
            cache: self.clone(),
            segments: segments.into_iter(),
            current: Vec::new().into_iter(),
        }
    }

    /// One page of a segment's live entries in key order: those whose key sorts after
    /// `after` (all when `None`), at most `limit` (at least one), and whether they are the
    /// last. Paging by key rather than by position resumes at the same place on any copy
    /// of the segment, and an entry that stays in the segment is returned exactly once
    /// however the segment changes between pages. A page costs one pass over the segment.
    ///
    /// # Errors
    /// [`CacheError`] when the cache refuses reads (a clustered cache split from its
    /// majority).
    pub fn segment_page(
        &self,
        segment: u32,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<CacheEntry>, bool), CacheError> {
        self.admit_read()?;
        Ok(self.segment_page_unadmitted(segment, after, limit))
    }

    /// [`Cache::segment_page`] whatever the cache admits: what a state transfer moves,
    /// which goes on while a clustered cache is DEGRADED.
    #[must_use]
    pub fn segment_page_unadmitted(
        &self,
        segment: u32,
        after: Option<&[u8]>,
        limit: usize,
    ) -> (Vec<CacheEntry>, bool) {
        let limit = limit.max(1);
        let mut entries: Vec<CacheEntry> = self
            .iter_segments(vec![segment])
            .filter(|entry| after.is_none_or(|after| entry.key() > after))
            .collect();
        let last = entries.len() <= limit;
        if !last {
            entries.select_nth_unstable_by(limit - 1, |a, b| a.key().cmp(b.key()));
            entries.truncate(limit);
        }
        entries.sort_unstable_by(|a, b| a.key().cmp(b.key()));
        (entries, last)
    }

    /// Removes all expired entries now, raising expired events; returns how many.
    pub fn purge_expired(&self) -> usize {
        self.purge_expired_segments(0..self.segment_count() as usize)
    }

    /// [`Cache::purge_expired`] of some segments only (the reaper's slices).
    pub fn purge_expired_segments(&self, segments: std::ops::Range<usize>) -> usize {
        let now = self.inner.clock.now_ms();
        let mut purged = 0;
        for segment in segments {
            for entry in self.inner.container.purge_expired(segment, now) {
                purged += 1;
                self.expired(entry);
            }
        }
        purged
    }

    /// Registers a listener; see [`crate::listener`].
    pub fn add_listener(
        &self,
        options: ListenerOptions,
        handler: impl Fn(&CacheEvent) + Send + Sync + 'static,
    ) -> ListenerId {
        self.inner
            .listeners
            .add(&self.inner.name, options, Arc::new(handler))
    }

    /// Delivers to this cache's listeners the event of a write another member of a grid
    /// applied (as the key's primary) and relayed here: `old` and `new` are the entries the
    /// write replaced and stored. Listeners registered [`ListenerOptions::local_only`] do not
    /// see it. Nothing is written.
    pub fn relay_event(&self, kind: EventKind, old: Option<CacheEntry>, new: Option<CacheEntry>) {
        if old.is_none() && new.is_none() {
            return;
        }
        let mut event = CacheEvent::new(kind, Arc::clone(&self.inner.name), old, new);
        event.mark_relayed();
        self.inner.listeners.notify(event);
    }

    /// Whether a listener of this cache wants the events of writes other members of a grid
    /// apply (any listener not registered [`ListenerOptions::local_only`]).
    #[must_use]
    pub fn wants_relayed_events(&self) -> bool {
        self.inner.listeners.wants_relayed()
    }

    /// What this cache's listeners want the members where writes are applied to relay:
    /// `None` when none wants relayed events, otherwise every event or those passing the
    /// named filters they were registered with.
    #[must_use]
    pub fn relay_interest(&self) -> Option<crate::listener::RelayInterest> {
        self.inner.listeners.relay_interest()
    }

    /// Has `hook` called whenever a listener that wants relayed events comes or goes (a grid
    /// member tells the others at once); `None` removes it.
    pub fn on_relay_interest(&self, hook: Option<crate::listener::InterestHook>) {
        self.inner.listeners.set_interest_hook(hook);
    }

    /// Unregisters a listener; queued asynchronous events are still delivered.
    pub fn remove_listener(&self, id: ListenerId) -> bool {
        self.inner.listeners.remove(id)
    }

    /// Times a writer waited on a full asynchronous listener queue.
    #[must_use]
    pub fn listener_backpressure_waits(&self) -> u64 {
        self.inner.listeners.backpressure_waits()
    }

    /// Whether any listener wants `kind`.
    #[must_use]
    pub fn has_listener_for(&self, kind: EventKind) -> bool {
        self.inner.listeners.wants(kind)
    }

    /// A snapshot of the statistics.
    #[must_use]
    pub fn statistics(&self) -> CacheStatistics {
        // Entries in memory: counting what only the stores hold would read them all.
        self.inner.stats.snapshot(
            self.inner.container.len() as u64,
            self.memory_bytes() as u64,
        )
    }

    /// Turns statistics on or off.
    pub fn set_statistics_enabled(&self, enabled: bool) {
        self.inner.stats.set_enabled(enabled);
    }

    /// Zeroes the counters.
    pub fn reset_statistics(&self) {
        self.inner.stats.reset();
    }

    /// Time since the cache started.
    #[must_use]
    pub fn uptime(&self) -> Duration {
        self.inner.stats.uptime()
    }

    /// Checks internal invariants (tests and debug tooling).
    ///
    /// # Panics
    /// If an invariant is broken.
    pub fn check_invariants(&self) {
        self.inner.container.check_invariants();
    }
}
