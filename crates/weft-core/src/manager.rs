//! The `CacheManager`: creates and looks up named caches, maps RESP database numbers to
//! caches, sums statistics, and runs the background reaper that purges expired entries.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::cache::Cache;
use crate::clock::{Clock, SystemClock};
use crate::config::CacheConfig;
use crate::error::ManagerError;
use crate::media::Format;
use crate::persistence::PersistenceFactory;
use crate::stats::CacheStatistics;

/// Name of the cache every server has unless configured otherwise.
pub const DEFAULT_CACHE_NAME: &str = "default";
/// Longest cache name accepted.
pub const CACHE_NAME_BYTES_MAX: usize = 255;
/// The reaper wakes at least this often to notice new caches and shutdown.
const REAPER_TICK_MAX: Duration = Duration::from_secs(1);
/// The shortest interval between two purges of one cache.
const REAPER_INTERVAL_MIN: Duration = Duration::from_millis(10);

/// The caches a manager starts with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ManagerConfig {
    /// Caches by name.
    pub caches: BTreeMap<String, CacheConfig>,
}

impl Default for ManagerConfig {
    /// One local cache named `default`, RESP database 0.
    fn default() -> Self {
        let mut caches = BTreeMap::new();
        caches.insert(
            DEFAULT_CACHE_NAME.to_owned(),
            CacheConfig {
                resp_database: Some(0),
                ..CacheConfig::default()
            },
        );
        Self { caches }
    }
}

struct CacheSlot {
    cache: Cache,
    /// When the reaper purges the next slice of the cache's segments.
    next_purge: Instant,
    /// The first segment of that slice.
    purge_cursor: usize,
}

/// The reaper spreads a pass over a cache's segments across its `interval`, a slice of
/// segments about this often, so that each slice holds few segment locks briefly and
/// expired entries leave memory within about one interval (Redis' active expiry runs ten
/// times a second).
const REAPER_SLICE: Duration = Duration::from_millis(100);

/// How many slices a pass over `segments` segments every `interval` takes, and the time
/// between two slices.
fn purge_slices(interval: Duration, segments: usize) -> (usize, Duration) {
    let interval = interval.max(REAPER_INTERVAL_MIN);
    let wanted =
        usize::try_from(interval.as_millis() / REAPER_SLICE.as_millis()).unwrap_or(usize::MAX);
    let slices = wanted.clamp(1, segments.max(1));
    let every = interval / u32::try_from(slices).unwrap_or(u32::MAX);
    (slices, every.max(REAPER_INTERVAL_MIN))
}

struct ManagerInner {
    caches: RwLock<BTreeMap<String, CacheSlot>>,
    clock: Arc<dyn Clock>,
    started: Instant,
    reaper_stop: Mutex<bool>,
    reaper_wake: Condvar,
    persistence: Option<Arc<dyn PersistenceFactory>>,
    event_filters: crate::listener::EventFilterFactories,
    /// RESP databases SWAPDB exchanged: which declared database's cache serves each number
    /// (only the numbers that moved; see [`CacheManager::swap_resp_databases`]).
    resp_swaps: RwLock<BTreeMap<u32, u32>>,
    /// Bumped by every swap, so that connections notice their database's cache changed.
    resp_epoch: std::sync::atomic::AtomicU64,
}

/// Creates and holds named caches. Cloning is cheap (a shared handle).
#[derive(Clone)]
pub struct CacheManager {
    inner: Arc<ManagerInner>,
}

impl fmt::Debug for CacheManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheManager")
            .field("caches", &self.cache_names())
            .finish()
    }
}

fn validate_name(name: &str) -> Result<(), ManagerError> {
    let invalid = |reason| {
        Err(ManagerError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("it is empty");
    }
    if name.len() > CACHE_NAME_BYTES_MAX {
        return invalid("it is longer than 255 bytes");
    }
    if name.chars().any(|c| c.is_control() || c == '/') {
        return invalid("it contains a control character or '/'");
    }
    if name.starts_with("___") {
        return invalid("names starting with ___ are reserved for internal caches");
    }
    Ok(())
}

impl CacheManager {
    /// The event filter factories listeners of this manager's caches may name
    /// ([`crate::ListenerOptions::source_filter`], Hot Rod's `filterFactoryName`). In a grid,
    /// every member registers the same ones.
    #[must_use]
    pub fn event_filters(&self) -> &crate::listener::EventFilterFactories {
        &self.inner.event_filters
    }

    /// A manager with the given caches, on the system clock.
    ///
    /// # Errors
    /// If a cache name is invalid or two caches claim one RESP database.
    pub fn new(config: ManagerConfig) -> Result<Self, ManagerError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A manager whose caches judge expiration by `clock`.
    ///
    /// # Errors
    /// As [`CacheManager::new`].
    pub fn with_clock(config: ManagerConfig, clock: Arc<dyn Clock>) -> Result<Self, ManagerError> {
        Self::with_persistence(config, clock, None)
    }

    /// A manager whose caches get their stores from `persistence` (caches configured with
    /// stores fail to create without one). Stores are opened and preloaded as each cache is
    /// created.
    ///
    /// # Errors
    /// As [`CacheManager::new`], or if a cache's stores could not be opened or preloaded.
    pub fn with_persistence(
        config: ManagerConfig,
        clock: Arc<dyn Clock>,
        persistence: Option<Arc<dyn PersistenceFactory>>,
    ) -> Result<Self, ManagerError> {
        let manager = Self {
            inner: Arc::new(ManagerInner {
                caches: RwLock::new(BTreeMap::new()),
                clock,
                started: Instant::now(),
                reaper_stop: Mutex::new(false),
                reaper_wake: Condvar::new(),
                persistence,
                event_filters: crate::listener::EventFilterFactories::default(),
                resp_swaps: RwLock::new(BTreeMap::new()),
                resp_epoch: std::sync::atomic::AtomicU64::new(0),
            }),
        };
        for (name, cache_config) in config.caches {
            manager.create_cache(&name, cache_config)?;
        }
        Ok(manager)
    }

    /// The cache called `name`.
    #[must_use]
    pub fn cache(&self, name: &str) -> Option<Cache> {
        self.inner
            .caches
            .read()
            .get(name)
            .map(|slot| slot.cache.clone())
    }

    /// The cache serving RESP database `database`: the cache declared for it
    /// (`resp-database`), or the one SWAPDB gave it.
    #[must_use]
    pub fn cache_for_resp_database(&self, database: u32) -> Option<Cache> {
        let declared = self.resp_declared_database(database);
        self.inner
            .caches
            .read()
            .values()
            .find(|slot| slot.cache.config().resp_database == Some(declared))
            .map(|slot| slot.cache.clone())
    }

    /// Which declared database's cache serves RESP database `database` (itself unless
    /// SWAPDB moved it).
    #[must_use]
    pub fn resp_declared_database(&self, database: u32) -> u32 {
        self.inner
            .resp_swaps
            .read()
            .get(&database)
            .copied()
            .unwrap_or(database)
    }

    /// The RESP database `cache` serves now, if any (its declared one unless SWAPDB moved
    /// it).
    #[must_use]
    pub fn resp_database_of(&self, cache: &Cache) -> Option<u32> {
        let declared = cache.config().resp_database?;
        let swaps = self.inner.resp_swaps.read();
        Some(
            swaps
                .iter()
                .find(|&(_, &from)| from == declared)
                .map_or(declared, |(&database, _)| database),
        )
    }

    /// Exchanges the caches serving RESP databases `a` and `b` (Redis' SWAPDB): afterwards
    /// every client of `a` sees what `b` held and the other way round. Atomic for readers
    /// of [`CacheManager::cache_for_resp_database`]; connections notice through
    /// [`CacheManager::resp_epoch`].
    pub fn swap_resp_databases(&self, a: u32, b: u32) {
        if a == b {
            return;
        }
        let mut swaps = self.inner.resp_swaps.write();
        let from_a = swaps.get(&a).copied().unwrap_or(a);
        let from_b = swaps.get(&b).copied().unwrap_or(b);
        for (database, from) in [(a, from_b), (b, from_a)] {
            if database == from {
                swaps.remove(&database);
            } else {
                swaps.insert(database, from);
            }
        }
        self.inner
            .resp_epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The databases SWAPDB moved: (database, declared database whose cache serves it).
    #[must_use]
    pub fn resp_swaps(&self) -> Vec<(u32, u32)> {
        self.inner
            .resp_swaps
            .read()
            .iter()
            .map(|(&database, &from)| (database, from))
            .collect()
    }

    /// Restores swaps saved from [`CacheManager::resp_swaps`] (at start, before clients).
    /// A list that is not a permutation of the numbers it names is refused: false.
    pub fn restore_resp_swaps(&self, swaps: &[(u32, u32)]) -> bool {
        let mut targets: Vec<u32> = swaps.iter().map(|&(_, from)| from).collect();
        let mut sources: Vec<u32> = swaps.iter().map(|&(database, _)| database).collect();
        targets.sort_unstable();
        sources.sort_unstable();
        if targets != sources || targets.windows(2).any(|pair| pair[0] == pair[1]) {
            return false;
        }
        *self.inner.resp_swaps.write() = swaps
            .iter()
            .filter(|(database, from)| database != from)
            .copied()
            .collect();
        self.inner
            .resp_epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        true
    }

    /// A number that changes whenever a RESP database changes cache (SWAPDB): a connection
    /// that saw another looks its database's cache up again.
    #[must_use]
    pub fn resp_epoch(&self) -> u64 {
        self.inner
            .resp_epoch
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Creates a cache.
    ///
    /// # Errors
    /// If the name is taken or invalid, or its RESP database is taken.
    pub fn create_cache(&self, name: &str, config: CacheConfig) -> Result<Cache, ManagerError> {
        validate_name(name)?;
        if config.key_partitioner == crate::config::KeyPartitioner::RedisSlots
            && (!config.segments.is_power_of_two() || config.segments > crate::hash::REDIS_SLOTS)
        {
            return Err(ManagerError::InvalidConfig {
                cache: name.to_owned(),
                reason: format!(
                    "key-partitioner = \"redis-slots\" needs a power-of-two segment count up to 16384, not {}",
                    config.segments
                ),
            });
        }
        let mut caches = self.inner.caches.write();
        if caches.contains_key(name) {
            return Err(ManagerError::AlreadyExists(name.to_owned()));
        }
        if let Some(database) = config.resp_database {
            for format in [config.key_format(), config.value_format()] {
                if matches!(format, Format::Protostream | Format::Json) {
                    return Err(ManagerError::RespNeedsBytes {
                        cache: name.to_owned(),
                        database,
                        media_type: format.media_type(),
                    });
                }
            }
        }
        if let Some(database) = config.resp_database
            && let Some((holder, _)) = caches
                .iter()
                .find(|(_, slot)| slot.cache.config().resp_database == Some(database))
        {
            return Err(ManagerError::DatabaseTaken {
                database,
                cache: holder.clone(),
            });
        }
        // A zero interval (possible when built in code; the parser refuses it) would make the
        // reaper spin.
        let interval = config.expiration.interval.max(REAPER_INTERVAL_MIN);
        // A clustered cache asks the factory too: a cluster puts replication in front of
        // its stores (see `PersistenceFactory`).
        let stores = match &self.inner.persistence {
            Some(factory) if !config.persistence.is_empty() || config.mode.is_clustered() => {
                factory
                    .open(name, &config)
                    .map_err(|reason| ManagerError::Persistence {
                        cache: name.to_owned(),
                        reason,
                    })?
            }
            None if !config.persistence.is_empty() => {
                return Err(ManagerError::Persistence {
                    cache: name.to_owned(),
                    reason: "it declares stores, but this cache manager has no store factory"
                        .to_owned(),
                });
            }
            _ => None,
        };
        let cache = Cache::with_persistence(name, config, Arc::clone(&self.inner.clock), stores);
        // Preloading under the manager's lock keeps a half-loaded cache out of sight.
        cache.preload().map_err(|error| ManagerError::Persistence {
            cache: name.to_owned(),
            reason: format!("preload failed: {error}"),
        })?;
        caches.insert(
            name.to_owned(),
            CacheSlot {
                cache: cache.clone(),
                next_purge: Instant::now()
                    + purge_slices(interval, cache.segment_count() as usize).1,
                purge_cursor: 0,
            },
        );
        tracing::debug!(cache = name, "cache created");
        Ok(cache)
    }

    /// The cache called `name`, created with `config` if it does not exist.
    ///
    /// # Errors
    /// As [`CacheManager::create_cache`].
    pub fn get_or_create_cache(
        &self,
        name: &str,
        config: CacheConfig,
    ) -> Result<Cache, ManagerError> {
        if let Some(cache) = self.cache(name) {
            return Ok(cache);
        }
        match self.create_cache(name, config) {
            Err(ManagerError::AlreadyExists(_)) => self
                .cache(name)
                .ok_or_else(|| ManagerError::AlreadyExists(name.to_owned())),
            other => other,
        }
    }

    /// Removes a cache and its data; handles still held fail with `CacheError::Removed`.
    pub fn remove_cache(&self, name: &str) -> bool {
        let removed = self.inner.caches.write().remove(name);
        match removed {
            Some(slot) => {
                slot.cache.mark_removed();
                tracing::debug!(cache = name, "cache removed");
                true
            }
            None => false,
        }
    }

    /// Names of all caches, sorted.
    #[must_use]
    pub fn cache_names(&self) -> Vec<String> {
        self.inner.caches.read().keys().cloned().collect()
    }

    /// All caches, sorted by name.
    #[must_use]
    pub fn caches(&self) -> Vec<Cache> {
        self.inner
            .caches
            .read()
            .values()
            .map(|slot| slot.cache.clone())
            .collect()
    }

    /// Statistics summed over every cache.
    #[must_use]
    pub fn statistics(&self) -> CacheStatistics {
        let mut total = CacheStatistics::default();
        for cache in self.caches() {
            total.accumulate(&cache.statistics());
        }
        total.time_since_start_secs = self.inner.started.elapsed().as_secs();
        total
    }

    /// The clock caches use.
    #[must_use]
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.inner.clock)
    }

    /// Purges the next slice of segments of every cache whose slice is due (a pass over
    /// all of a cache's segments takes its reaper interval); returns entries purged.
    pub fn purge_due(&self, now: Instant) -> usize {
        let due: Vec<(Cache, std::ops::Range<usize>)> = {
            let mut caches = self.inner.caches.write();
            caches
                .values_mut()
                .filter(|slot| slot.next_purge <= now)
                .map(|slot| {
                    let segments = slot.cache.segment_count() as usize;
                    let (slices, every) =
                        purge_slices(slot.cache.config().expiration.interval, segments);
                    let start = slot.purge_cursor.min(segments);
                    let end = (start + segments.div_ceil(slices)).min(segments);
                    slot.purge_cursor = if end >= segments { 0 } else { end };
                    // From the slice's own schedule, so that coarse ticks do not stretch
                    // the pass; from now when the reaper fell a whole slice behind.
                    let next = slot.next_purge + every;
                    slot.next_purge = if next > now { next } else { now + every };
                    (slot.cache.clone(), start..end)
                })
                .collect()
        };
        due.into_iter()
            .map(|(cache, segments)| cache.purge_expired_segments(segments))
            .sum()
    }

    fn next_due(&self) -> Option<Instant> {
        self.inner
            .caches
            .read()
            .values()
            .map(|slot| slot.next_purge)
            .min()
    }

    /// Starts the background reaper thread; it stops on [`CacheManager::shutdown`] or when
    /// the last handle to the manager is dropped.
    ///
    /// # Errors
    /// If the thread cannot be spawned.
    pub fn start_reaper(&self) -> std::io::Result<std::thread::JoinHandle<()>> {
        let weak: Weak<ManagerInner> = Arc::downgrade(&self.inner);
        std::thread::Builder::new()
            .name("weft-reaper".to_owned())
            .spawn(move || {
                loop {
                    let Some(inner) = weak.upgrade() else { return };
                    let manager = CacheManager { inner };
                    let purged = manager.purge_due(Instant::now());
                    if purged > 0 {
                        tracing::debug!(purged, "expired entries purged");
                    }
                    let wait = manager
                        .next_due()
                        .map_or(REAPER_TICK_MAX, |due| {
                            due.saturating_duration_since(Instant::now())
                        })
                        .min(REAPER_TICK_MAX);
                    let mut stop = manager.inner.reaper_stop.lock();
                    if *stop {
                        return;
                    }
                    manager.inner.reaper_wake.wait_for(&mut stop, wait);
                    if *stop {
                        return;
                    }
                }
            })
    }

    /// Stops the reaper and the caches' stores (every write made durable first).
    pub fn shutdown(&self) {
        *self.inner.reaper_stop.lock() = true;
        self.inner.reaper_wake.notify_all();
        for cache in self.caches() {
            if let Err(error) = cache.shutdown_persistence() {
                tracing::error!(cache = cache.name(), %error, "stopping the stores failed");
            }
        }
    }
}
