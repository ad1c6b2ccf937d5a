//! Operations as they travel between grid members: what the key's owner answers
//! ([`Outcome`], entries as [`EntryImage`]s) or why it refused ([`Refusal`], a
//! [`CacheError`] on the wire). The operations themselves are the cache's
//! ([`weft_core::operation`]).

use serde::{Deserialize, Serialize};
use weft_core::operation::{Applied, Failure, Functions, Operation};
use weft_core::{Cache, CacheError, Lifetime, VersionedOutcome};

use crate::wire::{EntryImage, WireLifetime};

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

/// Runs `operation` against `cache` (the owner's copy), its outcome as it travels back.
///
/// # Errors
/// As [`Operation::apply`].
pub fn execute(
    operation: &Operation,
    cache: &Cache,
    functions: &Functions,
) -> Result<Outcome, Failure> {
    Ok(Outcome::of(&operation.apply(cache, functions)?))
}

/// How `failure` travels back.
#[must_use]
pub fn refusal(failure: &Failure) -> Refusal {
    match failure {
        Failure::Cache(error) => Refusal::of(error),
        Failure::NoFunction(name) => Refusal::NoFunction(name.clone()),
    }
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
    use weft_core::operation::WriteSpec;
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
        execute(&received, cache, &Functions::default()).unwrap_or_else(|e| panic!("{e}"))
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
