//! memcached's operations on a `weft_core::Cache`, shared by the text and binary dialects:
//! expiration times, flags, CAS uniques (entry versions), storage modes, incr/decr, touch.
//!
//! Keys holding a Redis data structure (`CacheEntry::structure`) are outside memcached's
//! model: retrievals and `touch` see a miss, `set` overwrites them (as Redis' `SET` does),
//! `delete` removes them, and every other write (`add`, `replace`, `cas`, `append`,
//! `prepend`, `incr`, `decr`) fails with [`Outcome::Structure`].

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use weft_cluster::wire::EntryImage;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// One command's work on one key: what runs where the key lives — here, or at the key's
/// owner as the grid function [`FUNCTION`] — while the command's statistics are counted and
/// its reply written where the client is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Call<'a> {
    /// `get`/`gets`.
    Retrieve {
        #[serde(borrow)]
        key: Cow<'a, [u8]>,
    },
    /// `gat`/`gats`/`touch`.
    Touch {
        #[serde(borrow)]
        key: Cow<'a, [u8]>,
        exptime: i64,
    },
    /// A storage command.
    Store {
        mode: StoreMode,
        #[serde(borrow)]
        key: Cow<'a, [u8]>,
        #[serde(borrow)]
        value: Cow<'a, [u8]>,
        flags: u32,
        exptime: i64,
    },
    /// A `set` (or other storage command) over the item-size limit.
    TooLarge {
        set: bool,
        #[serde(borrow)]
        key: Cow<'a, [u8]>,
    },
    /// `delete`.
    Delete {
        #[serde(borrow)]
        key: Cow<'a, [u8]>,
        cas: u64,
    },
    /// `incr`/`decr`.
    Arithmetic {
        #[serde(borrow)]
        key: Cow<'a, [u8]>,
        incr: bool,
        delta: u64,
        create: Option<(u64, i64)>,
        cas: u64,
    },
}

impl Call<'_> {
    /// The key it works on.
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            Self::Retrieve { key }
            | Self::Touch { key, .. }
            | Self::Store { key, .. }
            | Self::TooLarge { key, .. }
            | Self::Delete { key, .. }
            | Self::Arithmetic { key, .. } => key,
        }
    }

    /// Whether it may write.
    pub(crate) fn writes(&self) -> bool {
        !matches!(self, Self::Retrieve { .. })
    }

    /// The same call, owning its bytes.
    pub(crate) fn into_owned(self) -> Call<'static> {
        let own = |bytes: Cow<'_, [u8]>| Cow::Owned(bytes.into_owned());
        match self {
            Self::Retrieve { key } => Call::Retrieve { key: own(key) },
            Self::Touch { key, exptime } => Call::Touch {
                key: own(key),
                exptime,
            },
            Self::Store {
                mode,
                key,
                value,
                flags,
                exptime,
            } => Call::Store {
                mode,
                key: own(key),
                value: own(value),
                flags,
                exptime,
            },
            Self::TooLarge { set, key } => Call::TooLarge { set, key: own(key) },
            Self::Delete { key, cas } => Call::Delete { key: own(key), cas },
            Self::Arithmetic {
                key,
                incr,
                delta,
                create,
                cas,
            } => Call::Arithmetic {
                key: own(key),
                incr,
                delta,
                create,
                cas,
            },
        }
    }
}

/// What a [`Call`] answered, and the CAS unique of what it stored when it stored something.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) result: Answered,
    pub(crate) cas: Option<u64>,
}

/// The result part of an [`Answer`].
#[derive(Debug, Clone)]
pub(crate) enum Answered {
    Entry(Option<CacheEntry>),
    Outcome(Outcome),
    Delta(Delta),
    Done,
}

impl Answered {
    /// What a call of this shape answers when it is only being recorded (see
    /// [`Script`]): never written to a client.
    fn placeholder(call: &Call<'_>) -> Self {
        match call {
            Call::Retrieve { .. } | Call::Touch { .. } => Self::Entry(None),
            Call::Store { .. } | Call::Delete { .. } => Self::Outcome(Outcome::NotFound),
            Call::Arithmetic { .. } => Self::Delta(Delta::NotFound),
            Call::TooLarge { .. } => Self::Done,
        }
    }
}

/// An answer as it travels back from the key's owner.
#[derive(Debug, Serialize, Deserialize)]
enum WireAnswer {
    Entry(Option<EntryImage>),
    Outcome(Outcome),
    Delta(Delta),
    Done,
}

/// The name memcached's calls are registered under as a grid function.
pub(crate) const FUNCTION: &str = "weft.memcached";

/// memcached's calls as a grid function: run where the key lives, with that member's item
/// size limit.
#[derive(Debug)]
pub(crate) struct CallFunction {
    pub(crate) limits: Limits,
}

impl weft_core::operation::Function for CallFunction {
    fn apply(&self, cache: &Cache, _key: &[u8], argument: &[u8]) -> Result<Vec<u8>, CacheError> {
        let call: Call<'_> = postcard::from_bytes(argument).map_err(|error| {
            CacheError::Persistence(weft_core::PersistenceError::Failed {
                cache: cache.name().to_owned(),
                reason: format!("a malformed memcached call: {error}"),
            })
        })?;
        let answer = run(cache, &self.limits, &call)?;
        let result = match answer.result {
            Answered::Entry(entry) => WireAnswer::Entry(entry.as_ref().map(EntryImage::of)),
            Answered::Outcome(outcome) => WireAnswer::Outcome(outcome),
            Answered::Delta(delta) => WireAnswer::Delta(delta),
            Answered::Done => WireAnswer::Done,
        };
        Ok(postcard::to_stdvec(&(result, answer.cas)).unwrap_or_default())
    }
}

/// The encoding of `call` for [`CallFunction`].
pub(crate) fn encode_call(call: &Call<'_>) -> Vec<u8> {
    postcard::to_stdvec(call).unwrap_or_default()
}

/// Reads what [`CallFunction`] answered.
pub(crate) fn decode_answer(bytes: &[u8]) -> Option<Answer> {
    let (result, cas): (WireAnswer, Option<u64>) = postcard::from_bytes(bytes).ok()?;
    let result = match result {
        WireAnswer::Entry(image) => Answered::Entry(match image {
            Some(image) => Some(image.to_entry().ok()?),
            None => None,
        }),
        WireAnswer::Outcome(outcome) => Answered::Outcome(outcome),
        WireAnswer::Delta(delta) => Answered::Delta(delta),
        WireAnswer::Done => Answered::Done,
    };
    Some(Answer { result, cas })
}

/// How a connection's calls run while a request's keys live on other members: first the
/// request is executed to *record* its calls (placeholder answers, output thrown away), then
/// the calls run at their keys' owners, then the request is executed again, *replaying* their
/// answers — so the statistics and replies come from the one code path every request takes.
#[derive(Debug, Default)]
pub(crate) enum Script {
    /// Calls run here.
    #[default]
    Off,
    /// Calls are recorded, not run.
    Recording(Vec<Call<'static>>),
    /// Calls are answered from these, in order.
    Replaying(VecDeque<Result<Answer, CacheError>>),
}

/// Runs `call` against `cache` (the local copy of the key's owner): the cache's side of
/// every command, no statistics.
pub(crate) fn run(cache: &Cache, limits: &Limits, call: &Call<'_>) -> Result<Answer, CacheError> {
    let now_ms = || cache.clock().now_ms();
    let stored = |result, cas| Answer {
        result,
        cas: Some(cas),
    };
    let plain = |result| Answer { result, cas: None };
    Ok(match call {
        Call::Retrieve { key } => plain(Answered::Entry(get(cache, key)?)),
        Call::Touch { key, exptime } => {
            let expiration = Expiration::of(*exptime, now_ms);
            let found: Option<CacheEntry> =
                cache.compute(key, &WriteOptions::default(), |existing| match existing {
                    Some(entry) if entry.structure().is_none() => match expiration {
                        // Gone at once, but this once it is still answered.
                        Expiration::Past => Compute::Remove(Some(entry.clone())),
                        _ => Compute::Reexpire(expiration.expiry(), None),
                    },
                    _ => Compute::Keep(None),
                })?;
            let entry = match found {
                Some(expired) => Some(expired),
                None => get(cache, key)?,
            };
            plain(Answered::Entry(entry))
        }
        Call::Store {
            mode,
            key,
            value,
            flags,
            exptime,
        } => {
            let expiration = Expiration::of(*exptime, now_ms);
            let options = WriteOptions::default()
                .expiry(expiration.expiry())
                .user_flags(*flags)
                .ignore_return_values();
            match mode {
                StoreMode::Set if expiration != Expiration::Past => {
                    // `put` builds the entry before taking the key's lock.
                    let cas = cache.put_version(key, value, &options)?;
                    stored(Answered::Outcome(Outcome::Stored), cas)
                }
                StoreMode::Set => {
                    cache.remove(key, &options)?;
                    stored(Answered::Outcome(Outcome::Stored), 0)
                }
                StoreMode::Add if expiration != Expiration::Past => {
                    let (outcome, cas) =
                        compute(cache, key, &options, |existing| match existing {
                            None => {
                                Compute::Put(value.to_vec(), expiration.expiry(), Outcome::Stored)
                            }
                            Some(entry) if entry.structure().is_some() => {
                                Compute::Keep(Outcome::Structure)
                            }
                            Some(_) => Compute::Keep(Outcome::NotStored),
                        })?;
                    stored(Answered::Outcome(outcome), cas)
                }
                StoreMode::Cas(unique) => {
                    // A structure's version is never handed out (gets misses it), so a
                    // matching unique is a plain value's.
                    let (outcome, cas) =
                        compute(cache, key, &options, |existing| match existing {
                            None => Compute::Keep(Outcome::NotFound),
                            Some(entry) if entry.version() != *unique => {
                                Compute::Keep(if entry.structure().is_some() {
                                    Outcome::Structure
                                } else {
                                    Outcome::Exists
                                })
                            }
                            Some(_) if expiration == Expiration::Past => {
                                Compute::Remove(Outcome::Stored)
                            }
                            Some(_) => {
                                Compute::Put(value.to_vec(), expiration.expiry(), Outcome::Stored)
                            }
                        })?;
                    stored(Answered::Outcome(outcome), cas)
                }
                _ => {
                    let (outcome, cas) =
                        conditional(cache, limits, *mode, key, value, *flags, expiration)?;
                    stored(Answered::Outcome(outcome), cas)
                }
            }
        }
        Call::TooLarge { set, key } => {
            if *set {
                cache.remove(key, &WriteOptions::default().ignore_return_values())?;
            }
            plain(Answered::Done)
        }
        Call::Delete { key, cas } => {
            let options = WriteOptions::default().ignore_return_values();
            let outcome = if *cas == 0 {
                if cache.delete(key)? {
                    Outcome::Stored
                } else {
                    Outcome::NotFound
                }
            } else {
                match cache.remove_if_version(key, *cas, &options)? {
                    VersionedOutcome::Done(_) => Outcome::Stored,
                    VersionedOutcome::Mismatch(_) => Outcome::Exists,
                    VersionedOutcome::Absent => Outcome::NotFound,
                }
            };
            plain(Answered::Outcome(outcome))
        }
        Call::Arithmetic {
            key,
            incr,
            delta,
            create,
            cas,
        } => {
            let (delta, stored_cas) = arithmetic(cache, key, *incr, *delta, *create, *cas)?;
            stored(Answered::Delta(delta), stored_cas)
        }
    })
}

/// A live plain value of `key` (a structure reads as absent).
fn get(cache: &Cache, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
    Ok(cache
        .get_entry(key)?
        .filter(|entry| entry.structure().is_none()))
}

/// `Cache::compute`, with the version of what it stored (0 when nothing).
fn compute<R>(
    cache: &Cache,
    key: &[u8],
    options: &WriteOptions,
    f: impl FnOnce(Option<&CacheEntry>) -> Compute<R>,
) -> Result<(R, u64), CacheError> {
    let (stored, result) = cache.compute_entry(key, options, f)?;
    Ok((result, stored.map_or(0, |entry| entry.version())))
}

/// The storage commands that depend on the present value.
fn conditional(
    cache: &Cache,
    limits: &Limits,
    mode: StoreMode,
    key: &[u8],
    value: &[u8],
    flags: u32,
    expiration: Expiration,
) -> Result<(Outcome, u64), CacheError> {
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
    compute(cache, key, &WriteOptions::default(), |existing| {
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
            // `run` serves these without `conditional`.
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

/// `incr`/`decr`: 64-bit unsigned, incr wraps, decr stops at 0; the result is stored as
/// ASCII decimal with the item's flags and expiration. `create` (binary) gives the value and
/// expiration time of an absent key, which is then created with flags 0; `cas` (binary)
/// must match unless 0.
fn arithmetic(
    cache: &Cache,
    key: &[u8],
    incr: bool,
    delta: u64,
    create: Option<(u64, i64)>,
    cas: u64,
) -> Result<(Delta, u64), CacheError> {
    compute(cache, key, &WriteOptions::default(), |existing| {
        let Some(entry) = existing else {
            let Some((initial, exptime)) = create else {
                return Compute::Keep(Delta::NotFound);
            };
            let expiration = Expiration::of(exptime, || cache.clock().now_ms());
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
    })
}

/// One memcached connection's view of its cache: each command's statistics around its
/// [`Call`], which runs here or — while a [`Script`] replays — ran at the key's owner.
#[derive(Debug, Clone)]
pub(crate) struct Store<'a> {
    pub(crate) cache: &'a Cache,
    pub(crate) limits: &'a Limits,
    pub(crate) counters: &'a Counters,
    /// Where a write records the CAS unique of the item it stored (binary responses carry
    /// it).
    pub(crate) written_cas: &'a AtomicU64,
    pub(crate) script: &'a RefCell<Script>,
}

impl Store<'_> {
    /// Runs `call` here, or records it, or takes its answer from the replay.
    fn dispatch(&self, call: Call<'_>) -> Result<Answered, CacheError> {
        let answer = {
            let mut script = self.script.borrow_mut();
            match &mut *script {
                Script::Off => None,
                Script::Recording(calls) => {
                    let placeholder = Answered::placeholder(&call);
                    calls.push(call.into_owned());
                    return Ok(placeholder);
                }
                Script::Replaying(answers) => Some(answers.pop_front().unwrap_or_else(|| {
                    Err(CacheError::Persistence(
                        weft_core::PersistenceError::Failed {
                            cache: self.cache.name().to_owned(),
                            reason: "a memcached call was not answered".to_owned(),
                        },
                    ))
                })),
            }
        };
        let answer = match answer {
            Some(answer) => answer?,
            None => run(self.cache, self.limits, &call)?,
        };
        if let Some(cas) = answer.cas {
            self.written_cas.store(cas, Ordering::Relaxed);
        }
        Ok(answer.result)
    }

    fn entry(&self, call: Call<'_>) -> Result<Option<CacheEntry>, CacheError> {
        match self.dispatch(call)? {
            Answered::Entry(entry) => Ok(entry),
            _ => Ok(None),
        }
    }

    /// `get`/`gets` of one key, counted.
    pub(crate) fn retrieve(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
        let entry = self.entry(Call::Retrieve {
            key: Cow::Borrowed(key),
        })?;
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
        let entry = self.entry(Call::Touch {
            key: Cow::Borrowed(key),
            exptime,
        })?;
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
        let call = Call::Store {
            mode,
            key: Cow::Borrowed(key),
            value: Cow::Borrowed(value),
            flags,
            exptime,
        };
        let Answered::Outcome(outcome) = self.dispatch(call)? else {
            return Ok(Outcome::NotStored);
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

    /// `set` of an item over the size limit: memcached removes the key's current value so
    /// that no stale value outlives a failed overwrite.
    pub(crate) fn too_large(&self, set: bool, key: &[u8]) -> Result<(), CacheError> {
        bump(&self.counters.store_too_large);
        self.dispatch(Call::TooLarge {
            set,
            key: Cow::Borrowed(key),
        })?;
        Ok(())
    }

    /// `delete`, optionally only if the item's CAS unique matches (binary).
    pub(crate) fn delete(&self, key: &[u8], cas: u64) -> Result<Outcome, CacheError> {
        let call = Call::Delete {
            key: Cow::Borrowed(key),
            cas,
        };
        let Answered::Outcome(outcome) = self.dispatch(call)? else {
            return Ok(Outcome::NotFound);
        };
        match outcome {
            Outcome::Stored => bump(&self.counters.delete_hits),
            Outcome::NotFound => bump(&self.counters.delete_misses),
            _ => {}
        }
        Ok(outcome)
    }

    /// `incr`/`decr` (see [`arithmetic`]).
    pub(crate) fn arithmetic(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        create: Option<(u64, i64)>,
        cas: u64,
    ) -> Result<Delta, CacheError> {
        let call = Call::Arithmetic {
            key: Cow::Borrowed(key),
            incr,
            delta,
            create,
            cas,
        };
        let Answered::Delta(result) = self.dispatch(call)? else {
            return Ok(Delta::NotFound);
        };
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
