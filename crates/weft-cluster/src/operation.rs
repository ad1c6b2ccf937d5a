//! The grid's operation vocabulary: keyed operations as values. A member that receives an
//! operation for a key it does not own sends the value to the key's primary owner, which
//! runs it against its local cache ([`Operation::execute`]) and answers with an
//! [`Outcome`]. Every protocol adapter and the embedded clustered cache build these values,
//! so routing, retries and replication are written once, below the protocols.
//!
//! An operation carries what it needs to run anywhere: keys and values as the cache stores
//! them, expiration as durations relative to when it runs, and client flags. Its outcome
//! carries whole entries ([`EntryImage`]), so that the caller sees versions, expiration and
//! flags exactly as the owner holds them.

use serde::{Deserialize, Serialize};
use weft_core::{Cache, CacheError, Expiry, Lifetime, VersionedOutcome, WriteOptions};

use crate::wire::{EntryImage, WireLifetime};

/// How a write stores its value: expiration, client flags, events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSpec {
    /// Lifespan.
    pub lifespan: WireLifetime,
    /// Maximum idle time.
    pub max_idle: WireLifetime,
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
            lifespan: to_wire(options.expiry.lifespan),
            max_idle: to_wire(options.expiry.max_idle),
            flags: options.user_flags,
            skip_listeners: options.skip_listeners,
            ignore_return_values: options.ignore_return_values,
        }
    }

    /// The write options this spec stands for.
    #[must_use]
    pub fn options(&self) -> WriteOptions {
        WriteOptions {
            expiry: Expiry {
                lifespan: from_wire(self.lifespan),
                max_idle: from_wire(self.max_idle),
            },
            ignore_return_values: self.ignore_return_values,
            skip_listeners: self.skip_listeners,
            user_flags: self.flags,
        }
    }
}

impl Default for WriteSpec {
    fn default() -> Self {
        Self::of(&WriteOptions::default())
    }
}

/// A lifetime as it travels.
#[must_use]
pub fn to_wire(lifetime: Lifetime) -> WireLifetime {
    match lifetime {
        Lifetime::Default => WireLifetime::Default,
        Lifetime::Never => WireLifetime::Never,
        Lifetime::After(duration) => {
            WireLifetime::AfterMs(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
        }
        Lifetime::Keep => WireLifetime::Keep,
    }
}

/// A lifetime received.
#[must_use]
pub fn from_wire(lifetime: WireLifetime) -> Lifetime {
    match lifetime {
        WireLifetime::Default => Lifetime::Default,
        WireLifetime::Never => Lifetime::Never,
        WireLifetime::AfterMs(ms) => Lifetime::After(std::time::Duration::from_millis(ms)),
        WireLifetime::Keep => Lifetime::Keep,
    }
}

/// One keyed operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Operation {
    /// The entry at `key`. Answered by [`Outcome::Entry`].
    Get {
        /// The key.
        key: Vec<u8>,
    },
    /// Stores `value` at `key`. Answered by [`Outcome::Entry`]: the previous entry (none
    /// when the spec ignores return values), and [`Outcome::Version`] is not used.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Stores `value` unless `key` holds something. Answered by [`Outcome::Entry`]: the
    /// entry found (none = stored).
    PutIfAbsent {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Stores `value` only if `key` holds something. Answered by [`Outcome::Entry`]: the
    /// entry replaced (none = not stored).
    Replace {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Stores `value` only if `key` holds `version`. Answered by [`Outcome::Versioned`].
    ReplaceIfVersion {
        /// The key.
        key: Vec<u8>,
        /// The version the key must hold.
        version: u64,
        /// The value.
        value: Vec<u8>,
        /// How it is stored.
        spec: WriteSpec,
    },
    /// Removes `key`. Answered by [`Outcome::Entry`]: the entry removed.
    Remove {
        /// The key.
        key: Vec<u8>,
        /// Events, return values.
        spec: WriteSpec,
    },
    /// Removes `key` only if it holds `version`. Answered by [`Outcome::Versioned`].
    RemoveIfVersion {
        /// The key.
        key: Vec<u8>,
        /// The version the key must hold.
        version: u64,
        /// Events.
        spec: WriteSpec,
    },
    /// Runs the function registered as `function` on `key` with `argument` (both the
    /// argument's and the answer's encodings are the function's). Answered by
    /// [`Outcome::Bytes`].
    Invoke {
        /// The function's registered name.
        function: String,
        /// The key.
        key: Vec<u8>,
        /// The argument.
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
    registered: std::sync::RwLock<std::collections::HashMap<String, std::sync::Arc<dyn Function>>>,
}

impl Functions {
    /// Registers `function` as `name` (replacing one registered before).
    pub fn register(&self, name: impl Into<String>, function: std::sync::Arc<dyn Function>) {
        if let Ok(mut registered) = self.registered.write() {
            registered.insert(name.into(), function);
        }
    }

    /// No functions: for the operations that invoke none.
    #[must_use]
    pub fn none() -> &'static Self {
        static NONE: std::sync::LazyLock<Functions> = std::sync::LazyLock::new(Functions::default);
        &NONE
    }

    /// The function registered as `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<std::sync::Arc<dyn Function>> {
        self.registered.read().ok()?.get(name).cloned()
    }
}

/// What an operation answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// An entry, or none.
    Entry(Option<EntryImage>),
    /// A versioned write: whether it applied, and the entry it replaced or removed (applied)
    /// or found (not applied; none = the key is absent).
    Versioned {
        /// The write applied.
        done: bool,
        /// The entry replaced, removed or found.
        entry: Option<EntryImage>,
    },
    /// A function's answer.
    Bytes(Vec<u8>),
}

/// Why an owner refused an operation, as it travels back (a [`CacheError`] on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// The cache is full (`when-full = exception`).
    Full,
    /// The key or value is too large.
    TooLarge {
        /// Whether the key (else the value).
        key: bool,
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// The cache was removed.
    Removed,
    /// No function is registered under the name an [`Operation::Invoke`] gives.
    NoFunction(String),
    /// The owner's store refuses writes.
    Poisoned(String),
    /// The cache is DEGRADED there and its policy refuses the operation.
    Degraded(String),
    /// The owner's store failed.
    Failed(String),
    /// The member does not own the key (or has not joined): retry at the owner a newer
    /// topology names.
    NotOwner,
}

impl Refusal {
    /// How `error` travels.
    #[must_use]
    pub fn of(error: &CacheError) -> Self {
        use weft_core::PersistenceError as P;
        match error {
            CacheError::ContainerFull { .. } => Self::Full,
            CacheError::TooLarge { what, bytes, limit } => Self::TooLarge {
                key: *what == "key",
                bytes: *bytes as u64,
                limit: *limit as u64,
            },
            CacheError::Removed { .. } => Self::Removed,
            CacheError::Persistence(P::NotOwner { .. } | P::NotJoined { .. }) => Self::NotOwner,
            CacheError::Persistence(P::Poisoned { reason, .. }) => Self::Poisoned(reason.clone()),
            CacheError::Persistence(P::Degraded { reason, .. }) => Self::Degraded(reason.clone()),
            CacheError::Persistence(other) => Self::Failed(other.to_string()),
            other => Self::Failed(other.to_string()),
        }
    }

    /// The error it stands for, in `cache`.
    #[must_use]
    pub fn into_error(self, cache: &str, segment: u32) -> CacheError {
        use weft_core::PersistenceError as P;
        let cache = cache.to_owned();
        match self {
            Self::Full => CacheError::ContainerFull { cache },
            Self::TooLarge { key, bytes, limit } => CacheError::TooLarge {
                what: if key { "key" } else { "value" },
                bytes: usize::try_from(bytes).unwrap_or(usize::MAX),
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            },
            Self::Removed => CacheError::Removed { cache },
            Self::NoFunction(name) => P::Failed {
                cache,
                reason: format!("no function `{name}` is registered on the key's owner"),
            }
            .into(),
            Self::Poisoned(reason) => P::Poisoned { cache, reason }.into(),
            Self::Degraded(reason) => P::Degraded { cache, reason }.into(),
            Self::Failed(reason) => P::Failed { cache, reason }.into(),
            Self::NotOwner => P::NotOwner { cache, segment }.into(),
        }
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
    /// [`weft_core::PersistenceError::NotOwner`] when this member does not order the key's
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
                Applied::Bytes(function.apply(cache, key, argument)?)
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

    /// [`Operation::apply`], its outcome as it travels back to the member that asked.
    ///
    /// # Errors
    /// As [`Operation::apply`].
    pub fn execute(&self, cache: &Cache, functions: &Functions) -> Result<Outcome, Failure> {
        Ok(Outcome::of(&self.apply(cache, functions)?))
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

impl Failure {
    /// How it travels back.
    #[must_use]
    pub fn refusal(&self) -> Refusal {
        match self {
            Self::Cache(error) => Refusal::of(error),
            Self::NoFunction(name) => Refusal::NoFunction(name.clone()),
        }
    }
}

/// What an operation did, as the entries themselves: the form protocol adapters encode,
/// whether the operation ran here or its [`Outcome`] came back from the owner.
#[derive(Debug, Clone)]
pub enum Applied {
    /// An entry, or none (see each [`Operation`] for which).
    Entry(Option<weft_core::CacheEntry>),
    /// A versioned write's outcome.
    Versioned(VersionedOutcome),
    /// A function's answer.
    Bytes(Vec<u8>),
}

impl Outcome {
    /// How `applied` travels.
    #[must_use]
    pub fn of(applied: &Applied) -> Self {
        match applied {
            Applied::Entry(entry) => Self::Entry(entry.as_ref().map(EntryImage::of)),
            Applied::Versioned(VersionedOutcome::Done(entry)) => Self::Versioned {
                done: true,
                entry: Some(EntryImage::of(entry)),
            },
            Applied::Versioned(VersionedOutcome::Mismatch(entry)) => Self::Versioned {
                done: false,
                entry: Some(EntryImage::of(entry)),
            },
            Applied::Versioned(VersionedOutcome::Absent) => Self::Versioned {
                done: false,
                entry: None,
            },
            Applied::Bytes(bytes) => Self::Bytes(bytes.clone()),
        }
    }

    /// The entries this outcome carries.
    ///
    /// # Errors
    /// An entry image that is not an entry.
    pub fn into_applied(self) -> Result<Applied, crate::wire::EntryError> {
        let restore = |image: Option<EntryImage>| image.map(|image| image.to_entry()).transpose();
        Ok(match self {
            Self::Entry(image) => Applied::Entry(restore(image)?),
            Self::Versioned { done, entry } => Applied::Versioned(match (done, restore(entry)?) {
                (true, Some(entry)) => VersionedOutcome::Done(entry),
                (false, Some(entry)) => VersionedOutcome::Mismatch(entry),
                (_, None) => VersionedOutcome::Absent,
            }),
            Self::Bytes(bytes) => Applied::Bytes(bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_core::{CacheConfig, CacheManager, ManagerConfig};

    fn cache() -> Cache {
        let manager =
            CacheManager::new(ManagerConfig::default()).unwrap_or_else(|error| panic!("{error}"));
        manager
            .create_cache("c", CacheConfig::default())
            .unwrap_or_else(|error| panic!("{error}"))
    }

    fn run(cache: &Cache, operation: &Operation) -> Outcome {
        // Through the wire and back, as a remote owner receives it.
        let bytes = postcard::to_stdvec(operation).unwrap_or_default();
        let received: Operation = postcard::from_bytes(&bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&received, operation);
        received
            .execute(cache, &Functions::default())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn value(outcome: &Outcome) -> Option<Vec<u8>> {
        match outcome {
            Outcome::Entry(entry) | Outcome::Versioned { entry, .. } => {
                entry.as_ref().map(|entry| entry.value.clone())
            }
            Outcome::Bytes(bytes) => Some(bytes.clone()),
        }
    }

    // Proves each operation, sent over the wire, does what the cache method it stands for
    // does, and its outcome carries the entry with its version and flags.
    #[test]
    fn operations_do_what_the_cache_does() {
        let cache = cache();
        let spec = WriteSpec {
            flags: 7,
            ..WriteSpec::default()
        };
        let key = b"k".to_vec();
        let put = |value: &[u8]| Operation::Put {
            key: key.clone(),
            value: value.to_vec(),
            spec,
        };
        assert_eq!(value(&run(&cache, &put(b"1"))), None);
        assert_eq!(value(&run(&cache, &put(b"2"))), Some(b"1".to_vec()));
        let Outcome::Entry(Some(entry)) = run(&cache, &Operation::Get { key: key.clone() }) else {
            panic!("no entry")
        };
        assert_eq!((entry.value.as_slice(), entry.flags), (&b"2"[..], 7));
        let absent = Operation::PutIfAbsent {
            key: key.clone(),
            value: b"3".to_vec(),
            spec,
        };
        assert_eq!(value(&run(&cache, &absent)), Some(b"2".to_vec()));
        let stale = Operation::ReplaceIfVersion {
            key: key.clone(),
            version: entry.version + 1,
            value: b"4".to_vec(),
            spec,
        };
        assert!(matches!(
            run(&cache, &stale),
            Outcome::Versioned { done: false, .. }
        ));
        let current = Operation::ReplaceIfVersion {
            key: key.clone(),
            version: entry.version,
            value: b"4".to_vec(),
            spec,
        };
        assert!(matches!(
            run(&cache, &current),
            Outcome::Versioned { done: true, .. }
        ));
        assert_eq!(cache.get(b"k").ok().flatten().as_deref(), Some(&b"4"[..]));
        let remove = Operation::Remove {
            key: key.clone(),
            spec,
        };
        assert_eq!(value(&run(&cache, &remove)), Some(b"4".to_vec()));
        let replace = Operation::Replace {
            key,
            value: b"5".to_vec(),
            spec,
        };
        assert_eq!(value(&run(&cache, &replace)), None);
        assert_eq!(cache.get(b"k").ok().flatten(), None);
    }
}
