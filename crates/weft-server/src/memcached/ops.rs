//! memcached's operations on a `weft_core::Cache`, shared by the text and binary dialects:
//! expiration times, flags, CAS uniques (entry versions), storage modes, incr/decr, touch.
//!
//! Keys holding a Redis data structure (`CacheEntry::structure`) are outside memcached's
//! model: retrievals and `touch` see a miss, `set` overwrites them (as Redis' `SET` does),
//! `delete` removes them, and every other write (`add`, `replace`, `cas`, `append`,
//! `prepend`, `incr`, `decr`) fails with [`Outcome::Structure`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use weft_core::{
    Cache, CacheEntry, CacheError, Compute, Expiry, Lifetime, NewValue, VersionedOutcome,
    WriteOptions,
};
use weft_memcached::Limits;

use super::stats::{Counters, bump};

/// memcached's `REALTIME_MAXDELTA`: expiration times up to 30 days are relative seconds,
/// larger ones absolute Unix times.
pub(crate) const RELATIVE_EXPTIME_MAX_SECS: i64 = 60 * 60 * 24 * 30;

/// What an expiration time asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiration {
    /// 0: no expiration of its own (the cache's default, none unless configured).
    None,
    /// Expire after this long.
    After(Duration),
    /// Negative, or an absolute time not in the future: the item is stored already expired,
    /// i.e. it is gone at once (the reply is the same as for a lasting store).
    Past,
}

impl Expiration {
    /// The expiration asked for by `exptime` (text: signed; binary: unsigned, so at most an
    /// absolute time in 2106); `now_ms` reads the cache's clock, only for absolute times.
    pub(crate) fn of(exptime: i64, now_ms: impl FnOnce() -> u64) -> Self {
        if exptime == 0 {
            return Self::None;
        }
        if exptime < 0 {
            return Self::Past;
        }
        let seconds = exptime.unsigned_abs();
        if exptime <= RELATIVE_EXPTIME_MAX_SECS {
            return Self::After(Duration::from_secs(seconds));
        }
        let now_ms = now_ms();
        let now_secs = now_ms / 1000;
        if seconds <= now_secs {
            Self::Past
        } else {
            // Whole seconds from now, counted from the current millisecond: an item set to
            // expire at T is gone once the clock reads T.
            Self::After(Duration::from_millis(seconds * 1000 - now_ms))
        }
    }

    /// The core expiry of a lasting store.
    pub(crate) fn expiry(self) -> Expiry {
        match self {
            Self::None | Self::Past => Expiry::default(),
            Self::After(lifespan) => Expiry {
                lifespan: Lifetime::After(lifespan),
                max_idle: Lifetime::Default,
            },
        }
    }
}

/// How a memcached command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Stored.
    Stored,
    /// Not stored: `add` of a present key; `replace`, `append`, `prepend` of an absent one;
    /// `append`/`prepend` that would exceed the item-size limit.
    NotStored,
    /// The CAS unique no longer matches.
    Exists,
    /// The key is absent (`cas`, `delete`, `touch`, `incr`).
    NotFound,
    /// The key holds a Redis data structure.
    Structure,
}

/// The storage commands, as both dialects express them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreMode {
    Set,
    Add,
    Replace,
    /// Replace if the item's CAS unique (entry version) is this one.
    Cas(u64),
    /// Append (`true`) or prepend; with a CAS unique to match unless 0 (binary only).
    Concat {
        append: bool,
        cas: u64,
    },
}

/// One memcached connection's view of its cache.
#[derive(Debug, Clone)]
pub(crate) struct Store<'a> {
    pub(crate) cache: &'a Cache,
    pub(crate) limits: &'a Limits,
    pub(crate) counters: &'a Counters,
    /// Where a write records the CAS unique of the item it stored (binary responses carry
    /// it).
    pub(crate) written_cas: &'a AtomicU64,
}

impl Store<'_> {
    fn now_ms(&self) -> u64 {
        self.cache.clock().now_ms()
    }

    /// `Cache::compute`, recording the version of what it stored (0 when nothing).
    fn compute<R>(
        &self,
        key: &[u8],
        options: &WriteOptions,
        f: impl FnOnce(Option<&CacheEntry>) -> Compute<R>,
    ) -> Result<R, CacheError> {
        let (stored, result) = self.cache.compute_entry(key, options, f)?;
        let cas = stored.map_or(0, |entry| entry.version());
        self.written_cas.store(cas, Ordering::Relaxed);
        Ok(result)
    }

    /// A live plain value of `key` (a structure reads as absent).
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
        Ok(self
            .cache
            .get_entry(key)?
            .filter(|entry| entry.structure().is_none()))
    }

    /// `get`/`gets` of one key, counted.
    pub(crate) fn retrieve(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
        let entry = self.get(key)?;
        bump(&self.counters.cmd_get);
        bump(if entry.is_some() {
            &self.counters.get_hits
        } else {
            &self.counters.get_misses
        });
        Ok(entry)
    }

    /// `gat`/`gats`/`touch` of one key: sets the expiration of a present plain value and
    /// returns the entry as it now is. The entry gets a new version (CAS unique), as every
    /// write in Weft does; memcached keeps the old one.
    pub(crate) fn touch(&self, key: &[u8], exptime: i64) -> Result<Option<CacheEntry>, CacheError> {
        let expiration = Expiration::of(exptime, || self.now_ms());
        let found: Option<CacheEntry> =
            self.cache
                .compute(key, &WriteOptions::default(), |existing| match existing {
                    Some(entry) if entry.structure().is_none() => match expiration {
                        // Gone at once, but this once it is still answered.
                        Expiration::Past => Compute::Remove(Some(entry.clone())),
                        _ => Compute::Reexpire(expiration.expiry(), None),
                    },
                    _ => Compute::Keep(None),
                })?;
        let entry = match found {
            Some(expired) => Some(expired),
            None => self.get(key)?,
        };
        bump(&self.counters.cmd_touch);
        bump(if entry.is_some() {
            &self.counters.touch_hits
        } else {
            &self.counters.touch_misses
        });
        Ok(entry)
    }

    /// A storage command. `value` has been checked against the item-size limit.
    pub(crate) fn store(
        &self,
        mode: StoreMode,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: i64,
    ) -> Result<Outcome, CacheError> {
        bump(&self.counters.cmd_set);
        let expiration = Expiration::of(exptime, || self.now_ms());
        let options = WriteOptions::default()
            .expiry(expiration.expiry())
            .user_flags(flags)
            .ignore_return_values();
        let outcome = match mode {
            StoreMode::Set if expiration != Expiration::Past => {
                // `put` builds the entry before taking the key's lock.
                let cas = self.cache.put_version(key, value, &options)?;
                self.written_cas.store(cas, Ordering::Relaxed);
                Outcome::Stored
            }
            StoreMode::Set => {
                self.cache.remove(key, &options)?;
                self.written_cas.store(0, Ordering::Relaxed);
                Outcome::Stored
            }
            StoreMode::Add if expiration != Expiration::Past => {
                self.compute(key, &options, |existing| match existing {
                    None => Compute::Put(value.to_vec(), expiration.expiry(), Outcome::Stored),
                    Some(entry) if entry.structure().is_some() => Compute::Keep(Outcome::Structure),
                    Some(_) => Compute::Keep(Outcome::NotStored),
                })?
            }
            StoreMode::Cas(unique) => {
                // A structure's version is never handed out (gets misses it), so a matching
                // unique is a plain value's.
                self.compute(key, &options, |existing| match existing {
                    None => Compute::Keep(Outcome::NotFound),
                    Some(entry) if entry.version() != unique => {
                        Compute::Keep(if entry.structure().is_some() {
                            Outcome::Structure
                        } else {
                            Outcome::Exists
                        })
                    }
                    Some(_) if expiration == Expiration::Past => Compute::Remove(Outcome::Stored),
                    Some(_) => Compute::Put(value.to_vec(), expiration.expiry(), Outcome::Stored),
                })?
            }
            _ => self.conditional(mode, key, value, flags, expiration)?,
        };
        match (mode, outcome) {
            (StoreMode::Cas(_), Outcome::Stored) => bump(&self.counters.cas_hits),
            (StoreMode::Cas(_), Outcome::Exists) => bump(&self.counters.cas_badval),
            (StoreMode::Cas(_), Outcome::NotFound) => bump(&self.counters.cas_misses),
            _ => {}
        }
        if outcome == Outcome::Stored {
            bump(&self.counters.total_items);
        }
        Ok(outcome)
    }

    /// The storage commands that depend on the present value.
    fn conditional(
        &self,
        mode: StoreMode,
        key: &[u8],
        value: &[u8],
        flags: u32,
        expiration: Expiration,
    ) -> Result<Outcome, CacheError> {
        let limits = self.limits;
        let lasting = |outcome| {
            if expiration == Expiration::Past {
                Compute::Remove(outcome)
            } else {
                Compute::PutValue(
                    NewValue::Bytes {
                        value: value.to_vec(),
                        user_flags: flags,
                        edited: false,
                    },
                    expiration.expiry(),
                    outcome,
                )
            }
        };
        self.compute(key, &WriteOptions::default(), |existing| {
            let Some(entry) = existing else {
                return Compute::Keep(match mode {
                    // An expired add stores nothing that lasts.
                    StoreMode::Add | StoreMode::Set => Outcome::Stored,
                    StoreMode::Cas(_) => Outcome::NotFound,
                    StoreMode::Replace | StoreMode::Concat { .. } => Outcome::NotStored,
                });
            };
            if entry.structure().is_some() {
                return Compute::Keep(Outcome::Structure);
            }
            match mode {
                StoreMode::Add => Compute::Keep(Outcome::NotStored),
                StoreMode::Set | StoreMode::Replace => lasting(Outcome::Stored),
                // `store` serves these without `compute`.
                StoreMode::Cas(_) => Compute::Keep(Outcome::Exists),
                StoreMode::Concat { append, cas } => {
                    if cas != 0 && entry.version() != cas {
                        return Compute::Keep(Outcome::Exists);
                    }
                    let current = entry.value();
                    let length = current.len() + value.len();
                    if !limits.item_fits(key.len(), entry.user_flags(), length) {
                        return Compute::Keep(Outcome::NotStored);
                    }
                    let mut joined = Vec::with_capacity(length);
                    if append {
                        joined.extend_from_slice(current);
                        joined.extend_from_slice(value);
                    } else {
                        joined.extend_from_slice(value);
                        joined.extend_from_slice(current);
                    }
                    // Flags and expiration stay the present item's.
                    Compute::PutValue(
                        NewValue::Bytes {
                            value: joined,
                            user_flags: entry.user_flags(),
                            edited: true,
                        },
                        Expiry::KEEP,
                        Outcome::Stored,
                    )
                }
            }
        })
    }

    /// `set` of an item over the size limit: memcached removes the key's current value so
    /// that no stale value outlives a failed overwrite.
    pub(crate) fn too_large(&self, set: bool, key: &[u8]) -> Result<(), CacheError> {
        bump(&self.counters.store_too_large);
        if set {
            self.cache
                .remove(key, &WriteOptions::default().ignore_return_values())?;
        }
        Ok(())
    }

    /// `delete`, optionally only if the item's CAS unique matches (binary).
    pub(crate) fn delete(&self, key: &[u8], cas: u64) -> Result<Outcome, CacheError> {
        let options = WriteOptions::default().ignore_return_values();
        let outcome = if cas == 0 {
            if self.cache.delete(key)? {
                Outcome::Stored
            } else {
                Outcome::NotFound
            }
        } else {
            match self.cache.remove_if_version(key, cas, &options)? {
                VersionedOutcome::Done(_) => Outcome::Stored,
                VersionedOutcome::Mismatch(_) => Outcome::Exists,
                VersionedOutcome::Absent => Outcome::NotFound,
            }
        };
        match outcome {
            Outcome::Stored => bump(&self.counters.delete_hits),
            Outcome::NotFound => bump(&self.counters.delete_misses),
            _ => {}
        }
        Ok(outcome)
    }

    /// `incr`/`decr`: 64-bit unsigned, incr wraps, decr stops at 0; the result is stored as
    /// ASCII decimal with the item's flags and expiration. `create` (binary) gives the value
    /// and expiration time of an absent key, which is then created with flags 0; `cas`
    /// (binary) must match unless 0.
    pub(crate) fn arithmetic(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        create: Option<(u64, i64)>,
        cas: u64,
    ) -> Result<Delta, CacheError> {
        let result = self.compute(key, &WriteOptions::default(), |existing| {
            let Some(entry) = existing else {
                let Some((initial, exptime)) = create else {
                    return Compute::Keep(Delta::NotFound);
                };
                let expiration = Expiration::of(exptime, || self.now_ms());
                if expiration == Expiration::Past {
                    return Compute::Keep(Delta::Created(initial));
                }
                return Compute::PutValue(
                    NewValue::Bytes {
                        value: initial.to_string().into_bytes(),
                        user_flags: 0,
                        edited: false,
                    },
                    expiration.expiry(),
                    Delta::Created(initial),
                );
            };
            if entry.structure().is_some() {
                return Compute::Keep(Delta::Structure);
            }
            // memcached checks emptiness, then the CAS, then the number.
            if entry.value().is_empty() {
                return Compute::Keep(Delta::NonNumeric);
            }
            if cas != 0 && entry.version() != cas {
                return Compute::Keep(Delta::Exists);
            }
            let Some(current) = weft_memcached::number::safe_strtoull(entry.value()) else {
                return Compute::Keep(Delta::NonNumeric);
            };
            let next = if incr {
                current.wrapping_add(delta)
            } else {
                current.saturating_sub(delta)
            };
            Compute::PutValue(
                NewValue::Bytes {
                    value: next.to_string().into_bytes(),
                    user_flags: entry.user_flags(),
                    edited: false,
                },
                Expiry::KEEP,
                Delta::Value(next),
            )
        })?;
        let (hits, misses) = if incr {
            (&self.counters.incr_hits, &self.counters.incr_misses)
        } else {
            (&self.counters.decr_hits, &self.counters.decr_misses)
        };
        match result {
            Delta::Value(_) => bump(hits),
            Delta::NotFound | Delta::Created(_) => bump(misses),
            _ => {}
        }
        if matches!(result, Delta::Created(_)) {
            bump(&self.counters.total_items);
        }
        Ok(result)
    }

    /// The CAS unique of the item this connection's last write stored (exact, even if
    /// another client has written the key since).
    pub(crate) fn written_cas(&self) -> u64 {
        self.written_cas.load(Ordering::Relaxed)
    }
}

/// How incr/decr ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delta {
    /// The new value.
    Value(u64),
    /// The key was absent and was created with this value (binary).
    Created(u64),
    /// The key is absent.
    NotFound,
    /// The value is not a decimal number.
    NonNumeric,
    /// The CAS unique no longer matches (binary).
    Exists,
    /// The key holds a Redis data structure.
    Structure,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves memcached's expiration rule: 0 none, up to 30 days relative, beyond absolute,
    // negative or past expired, and the clock is read only for absolute times.
    #[test]
    fn expiration_times_follow_memcached() {
        let now_ms = 1_800_000_000_500;
        let unread = || -> u64 { panic!("clock read for a relative time") };
        assert_eq!(Expiration::of(0, unread), Expiration::None);
        assert_eq!(Expiration::of(-1, unread), Expiration::Past);
        assert_eq!(
            Expiration::of(RELATIVE_EXPTIME_MAX_SECS, unread),
            Expiration::After(Duration::from_secs(2_592_000))
        );
        assert_eq!(
            Expiration::of(RELATIVE_EXPTIME_MAX_SECS + 1, || now_ms),
            Expiration::Past
        );
        assert_eq!(Expiration::of(1_800_000_000, || now_ms), Expiration::Past);
        assert_eq!(
            Expiration::of(1_800_000_010, || now_ms),
            Expiration::After(Duration::from_millis(9_500))
        );
    }
}
