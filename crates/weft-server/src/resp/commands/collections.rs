//! What every collection command shares: reading a key as one structure type (WRONGTYPE when
//! it holds another), changing one in place under the key's segment lock, and replacing a
//! key with a whole new structure (the `*STORE` forms).
//!
//! **Lock order** (deadlock rule): a write holds the key's segment lock, then the cell's lock.
//! So never call a `Cache` method (or `write`/`replace`) while holding a cell lock — from a
//! `read` closure or a `write` closure — and never nest `write` calls: two keys may share a
//! segment, and segment locks are not reentrant. Multi-key commands (SMOVE, LMOVE,
//! SINTERSTORE …) read or change one key, let go, then the next.
//!
//! Redis' rules enforced here: a collection that becomes empty is deleted (a stream is
//! not: it keeps its last ID and groups); a write that
//! changes nothing writes nothing (no new version, so WATCH and client tracking see no
//! change); a change keeps the key's time to live.

use std::sync::Arc;

use weft_core::structure::{HashValue, ListValue, SetValue, SortedSetValue, StreamValue};
use weft_core::{
    CacheError, Compute, Expiry, NewValue, Structure, StructureCell, StructureKind, WriteOptions,
};

use super::strings::cache_error;
use crate::resp::{Reply, Session};

/// Redis' reply to an operation on a key holding another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// One of the collection types, as the value inside a [`Structure`].
pub trait Collection: Sized {
    /// Which kind this is.
    const KIND: StructureKind;
    /// The value, if `structure` is of this kind.
    fn of(structure: &Structure) -> Option<&Self>;
    /// The value, mutably, if `structure` is of this kind.
    fn of_mut(structure: &mut Structure) -> Option<&mut Self>;
}

macro_rules! collection {
    ($type:ty, $variant:ident) => {
        impl Collection for $type {
            const KIND: StructureKind = StructureKind::$variant;
            fn of(structure: &Structure) -> Option<&Self> {
                match structure {
                    Structure::$variant(value) => Some(value),
                    _ => None,
                }
            }
            fn of_mut(structure: &mut Structure) -> Option<&mut Self> {
                match structure {
                    Structure::$variant(value) => Some(value),
                    _ => None,
                }
            }
        }
    };
}

collection!(HashValue, Hash);
collection!(ListValue, List);
collection!(SetValue, Set);
collection!(SortedSetValue, SortedSet);
collection!(StreamValue, Stream);

/// Why a collection command could not run.
#[derive(Debug)]
pub enum Failure {
    /// The key holds another type.
    WrongType,
    /// The cache refused (full, removed …).
    Cache(CacheError),
}

impl Failure {
    /// Writes Redis' reply for this failure.
    pub fn reply(&self, reply: &mut Reply<'_>) {
        match self {
            Self::WrongType => reply.error(WRONGTYPE),
            Self::Cache(error) => cache_error(reply, error),
        }
    }
}

impl From<CacheError> for Failure {
    fn from(error: CacheError) -> Self {
        Self::Cache(error)
    }
}

/// Runs `f` on the `T` at `key` (`None` if missing), holding the structure's lock.
///
/// # Errors
/// [`Failure::WrongType`] or a cache failure; `f` does not run then.
pub fn read<T: Collection, R>(
    session: &Session,
    key: &[u8],
    f: impl FnOnce(Option<&T>) -> R,
) -> Result<R, Failure> {
    let Some(entry) = session.cache.get_entry(key)? else {
        return Ok(f(None));
    };
    let cell = entry.structure().ok_or(Failure::WrongType)?;
    let guard = cell.lock();
    let value = T::of(&guard).ok_or(Failure::WrongType)?;
    Ok(f(Some(value)))
}

/// [`read`], writing a failure as the reply and returning `None` then.
pub fn read_or_reply<T: Collection, R>(
    session: &Session,
    key: &[u8],
    reply: &mut Reply<'_>,
    f: impl FnOnce(Option<&T>, &mut Reply<'_>) -> R,
) -> Option<R> {
    let entry = match session.cache.get_entry(key) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Some(f(None, reply)),
        Err(error) => {
            cache_error(reply, &error);
            return None;
        }
    };
    let Some(cell) = entry.structure() else {
        reply.error(WRONGTYPE);
        return None;
    };
    let guard = cell.lock();
    let Some(value) = T::of(&guard) else {
        reply.error(WRONGTYPE);
        return None;
    };
    Some(f(Some(value), reply))
}

/// Changes the `T` at `key` in place, atomically with every other write to the key.
///
/// `f` returns its result and whether it changed anything. A missing key is created empty
/// first when `create` is true (else `f` is not called and `Ok(None)` returned). A collection
/// left empty is deleted; an unchanged one is not written; a changed one keeps its TTL.
///
/// # Errors
/// [`Failure::WrongType`] if the key holds another type, or a cache failure.
pub fn write<T: Collection, R>(
    session: &Session,
    key: &[u8],
    create: bool,
    f: impl FnOnce(&mut T) -> (R, bool),
) -> Result<Option<R>, Failure> {
    let mut wrong_type = false;
    let result = session
        .cache
        .compute(key, &WriteOptions::default(), |existing| {
            let (cell, fresh) = match existing {
                None if !create => return Compute::Keep(None),
                None => (StructureCell::new(Structure::empty(T::KIND)), true),
                Some(entry) => match entry.structure() {
                    Some(cell) => (Arc::clone(cell), false),
                    None => {
                        wrong_type = true;
                        return Compute::Keep(None);
                    }
                },
            };
            let mut guard = cell.lock();
            let Some(value) = T::of_mut(&mut guard) else {
                wrong_type = true;
                return Compute::Keep(None);
            };
            let (result, changed) = f(value);
            let empty = guard.is_empty();
            // A stream stays when emptied; a new one is stored empty only when `f` says it
            // changed it (XGROUP CREATE MKSTREAM), not when `f` failed.
            let deleted = empty && guard.deleted_when_empty();
            drop(guard);
            if deleted {
                if fresh {
                    Compute::Keep(Some(result))
                } else {
                    Compute::Remove(Some(result))
                }
            } else if changed || (fresh && !empty) {
                let expiry = if fresh {
                    Expiry::default()
                } else {
                    Expiry::KEEP
                };
                Compute::PutValue(NewValue::Structure(cell), expiry, Some(result))
            } else {
                Compute::Keep(Some(result))
            }
        })?;
    if wrong_type {
        return Err(Failure::WrongType);
    }
    Ok(result)
}

/// Replaces whatever `key` holds with `structure` (no TTL), or deletes the key when the
/// structure is empty — the `*STORE` commands' destination rule.
///
/// # Errors
/// A cache failure.
pub fn replace(session: &Session, key: &[u8], structure: Structure) -> Result<(), Failure> {
    if structure.is_empty() {
        session.cache.delete(key)?;
        return Ok(());
    }
    let cell = StructureCell::new(structure);
    session.cache.compute(key, &WriteOptions::default(), |_| {
        Compute::PutValue(NewValue::Structure(cell), Expiry::default(), ())
    })?;
    Ok(())
}

/// The type name `TYPE` answers for an entry: a structure's, else `string`.
#[must_use]
pub fn type_name(entry: &weft_core::CacheEntry) -> &'static str {
    entry
        .structure()
        .map_or("string", |cell| cell.lock().kind().type_name())
}

/// Redis' default `COUNT` of a scan step.
pub const SCAN_COUNT_DEFAULT: usize = 10;

/// A collection scan's options after the cursor (`MATCH pattern`, `COUNT n`), which Redis
/// parses only once the key is found and holds the right type (the cursor comes first:
/// [`scan_cursor`]).
#[derive(Debug)]
pub struct ScanOptions<'a> {
    /// How many elements a step looks at.
    pub count: usize,
    /// MATCH pattern, unless absent or `*`.
    pub pattern: Option<&'a [u8]>,
}

impl<'a> ScanOptions<'a> {
    /// Parses the options of `*SCAN key cursor [options]` (`args` from the command name).
    ///
    /// # Errors
    /// Redis' error text.
    pub fn parse(args: &'a [bytes::Bytes]) -> Result<Self, &'static str> {
        let mut options = Self {
            count: SCAN_COUNT_DEFAULT,
            pattern: None,
        };
        let mut index = 3;
        while index < args.len() {
            let value = args.get(index + 1).ok_or(super::errors::SYNTAX)?;
            if super::is(&args[index], "COUNT") {
                let count = weft_resp::parse_i64_strict(value).ok_or(super::errors::NOT_INTEGER)?;
                if count < 1 {
                    return Err(super::errors::SYNTAX);
                }
                options.count = usize::try_from(count).unwrap_or(usize::MAX);
            } else if super::is(&args[index], "MATCH") {
                options.pattern = (value.as_ref() != b"*").then_some(value.as_ref());
            } else {
                return Err(super::errors::SYNTAX);
            }
            index += 2;
        }
        Ok(options)
    }

    /// Whether `item` passes MATCH.
    #[must_use]
    pub fn wanted(&self, item: &[u8]) -> bool {
        self.pattern
            .is_none_or(|pattern| super::glob::matches(pattern, item))
    }
}

/// A collection scan's cursor (`args[2]`), parsed before the key is looked up, as Redis
/// does.
///
/// # Errors
/// Redis' error text.
pub fn scan_cursor(args: &[bytes::Bytes]) -> Result<u64, &'static str> {
    super::keys::parse_cursor(&args[2]).ok_or("ERR invalid cursor")
}

/// Writes a scan reply: the next cursor (0 when done), then the elements. Small encodings
/// are returned whole with cursor 0, as Redis does; large ones one step at a time (see
/// `weft_core::structure`'s scans: every element present for a whole scan is returned at
/// least once).
pub fn scan_reply(reply: &mut Reply<'_>, cursor: u64, items: &[&[u8]]) {
    reply.array(2);
    reply.bulk(itoa::Buffer::new().format(cursor).as_bytes());
    reply.array(items.len());
    for item in items {
        reply.bulk(item);
    }
}
