//! The cache's operation vocabulary: keyed operations as values. Whoever runs an
//! operation — the local cache, or a grid member that owns the key after the operation
//! travelled there — runs it with [`Operation::apply`], so every protocol adapter and the
//! embedded clustered cache describe what they want once, in these values, and routing,
//! retries and replication are written once, below them.
//!
//! An operation carries what it needs to run anywhere: keys and values as the cache stores
//! them, expiration as durations relative to when it runs, and client flags.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::{Cache, CacheEntry, CacheError, Expiry, VersionedOutcome, WriteOptions};

/// How a write stores its value: expiration, client flags, events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct WriteSpec {
    /// Expiration.
    pub expiry: Expiry,
    /// Client flags stored beside the value (0 = none).
    pub flags: u32,
    /// Raise no listener events.
    pub skip_listeners: bool,
    /// The caller does not need the previous value.
    pub ignore_return_values: bool,
}

impl WriteSpec {
    /// The spec of `options`.
    #[must_use]
    pub fn of(options: &WriteOptions) -> Self {
        Self {
            expiry: options.expiry,
            flags: options.user_flags,
            skip_listeners: options.skip_listeners,
            ignore_return_values: options.ignore_return_values,
        }
    }

    /// The write options this spec stands for.
    #[must_use]
    pub fn options(&self) -> WriteOptions {
        WriteOptions {
            expiry: self.expiry,
            ignore_return_values: self.ignore_return_values,
            skip_listeners: self.skip_listeners,
            user_flags: self.flags,
        }
    }
}

/// One keyed operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Operation {
    /// The entry at `key`. Answered by [`Applied::Entry`].
    Get {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
    },
    /// Stores `value` at `key`. Answered by [`Applied::Entry`]: the previous entry (none
    /// when the spec ignores return values).
    Put {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "crate::bytes_serde")]
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Stores `value` unless `key` holds something. Answered by [`Applied::Entry`]: the
    /// entry found (none = stored).
    PutIfAbsent {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "crate::bytes_serde")]
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Stores `value` only if `key` holds something. Answered by [`Applied::Entry`]: the
    /// entry replaced (none = not stored).
    Replace {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "crate::bytes_serde")]
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Stores `value` only if `key` holds `version`. Answered by [`Applied::Versioned`].
    ReplaceIfVersion {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// The version the key must hold.
        version: u64,
        /// The value.
        #[serde(with = "crate::bytes_serde")]
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Removes `key`. Answered by [`Applied::Entry`]: the entry removed.
    Remove {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// Events, return values.
        spec: WriteSpec,
    },
    /// Removes `key` only if it holds `version`. Answered by [`Applied::Versioned`].
    RemoveIfVersion {
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// The version the key must hold.
        version: u64,
        /// Events.
        spec: WriteSpec,
    },
    /// Runs the function registered as `function` on `key` with `argument` (both the
    /// argument's and the answer's encodings are the function's). Answered by
    /// [`Applied::Bytes`].
    Invoke {
        /// The function's registered name.
        function: String,
        /// The key.
        #[serde(with = "crate::bytes_serde")]
        key: Vec<u8>,
        /// The argument.
        #[serde(with = "crate::bytes_serde")]
        argument: Vec<u8>,
        /// Whether it may write (it then runs at the key's primary).
        write: bool,
    },
}

/// A function of one key that runs where the key lives, registered under a name on every
/// member (as Infinispan's functional commands ship marshallable functions): how an adapter
/// or an application runs a read-modify-write the other operations do not express, without
/// moving the value. It runs under the same rules as any operation — at the primary when it
/// writes, in arrival order — and is acknowledged once its writes are replicated.
pub trait Function: Send + Sync + std::fmt::Debug {
    /// Runs on `key` of `cache` with `argument`; the answer's bytes.
    ///
    /// # Errors
    /// What the cache refused (a malformed argument is the function's own answer to give).
    fn apply(&self, cache: &Cache, key: &[u8], argument: &[u8]) -> Result<Vec<u8>, CacheError>;
}

/// The functions registered on a member, by name.
#[derive(Debug, Default)]
pub struct Functions {
    registered: RwLock<HashMap<String, Arc<dyn Function>>>,
}

impl Functions {
    /// Registers `function` as `name` (replacing one registered before).
    pub fn register(&self, name: impl Into<String>, function: Arc<dyn Function>) {
        self.registered.write().insert(name.into(), function);
    }

    /// No functions: for the operations that invoke none.
    #[must_use]
    pub fn none() -> &'static Self {
        static NONE: LazyLock<Functions> = LazyLock::new(Functions::default);
        &NONE
    }

    /// The function registered as `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Arc<dyn Function>> {
        self.registered.read().get(name).cloned()
    }
}

impl Operation {
    /// The key the operation addresses.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        match self {
            Self::Get { key }
            | Self::Put { key, .. }
            | Self::PutIfAbsent { key, .. }
            | Self::Replace { key, .. }
            | Self::ReplaceIfVersion { key, .. }
            | Self::Remove { key, .. }
            | Self::RemoveIfVersion { key, .. }
            | Self::Invoke { key, .. } => key,
        }
    }

    /// Whether the operation may write: it runs at the key's primary owner, which orders the
    /// key's writes. Reads run at any member that reads the key's segment.
    #[must_use]
    pub fn is_write(&self) -> bool {
        match self {
            Self::Get { .. } => false,
            Self::Invoke { write, .. } => *write,
            _ => true,
        }
    }

    /// Runs the operation against `cache`, the local copy of the key's owner, and returns
    /// its outcome as the entries themselves (nothing copied).
    ///
    /// # Errors
    /// What the cache refused: a full cache, a value too large, and in a clustered cache
    /// [`crate::PersistenceError::NotOwner`] when this member does not order the key's
    /// writes (the caller retries at the new owner).
    pub fn apply(&self, cache: &Cache, functions: &Functions) -> Result<Applied, Failure> {
        Ok(match self {
            Self::Invoke {
                function,
                key,
                argument,
                ..
            } => {
                let Some(function) = functions.get(function) else {
                    return Err(Failure::NoFunction(function.clone()));
                };
                // A function that turned a refusal to write here into an answer of its own
                // (a protocol's error reply) changed nothing: it runs again at the owner.
                let (answer, seen) =
                    crate::persistence::watch_admissions(|| function.apply(cache, key, argument));
                if seen.refused_untouched() {
                    return Err(Failure::Cache(CacheError::Persistence(
                        crate::persistence::PersistenceError::NotOwner {
                            cache: cache.name().to_owned(),
                            segment: cache.segment_of(key),
                        },
                    )));
                }
                Applied::Bytes(answer?)
            }
            Self::Get { key } => Applied::Entry(cache.get_entry(key)?),
            Self::Put { key, value, spec } => {
                Applied::Entry(cache.put(key, value, &spec.options())?)
            }
            Self::PutIfAbsent { key, value, spec } => {
                Applied::Entry(cache.put_if_absent(key, value, &spec.options())?)
            }
            Self::Replace { key, value, spec } => {
                Applied::Entry(cache.replace(key, value, &spec.options())?)
            }
            Self::ReplaceIfVersion {
                key,
                version,
                value,
                spec,
            } => Applied::Versioned(cache.replace_if_version(
                key,
                *version,
                value,
                &spec.options(),
            )?),
            Self::Remove { key, spec } => Applied::Entry(cache.remove(key, &spec.options())?),
            Self::RemoveIfVersion { key, version, spec } => {
                Applied::Versioned(cache.remove_if_version(key, *version, &spec.options())?)
            }
        })
    }
}

/// Why an operation could not run.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// The cache refused.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// No function is registered under this name.
    #[error("no function `{0}` is registered")]
    NoFunction(String),
}

/// What an operation did, as the entries themselves: the form protocol adapters encode,
/// whether the operation ran here or its outcome came back from the owner.
#[derive(Debug, Clone)]
pub enum Applied {
    /// An entry, or none (see each [`Operation`] for which).
    Entry(Option<CacheEntry>),
    /// A versioned write's outcome.
    Versioned(VersionedOutcome),
    /// A function's answer.
    Bytes(Vec<u8>),
}
