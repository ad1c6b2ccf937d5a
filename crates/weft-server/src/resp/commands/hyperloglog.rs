//! HyperLogLog commands: PFADD PFCOUNT (one key, or the union of several) PFMERGE, over
//! string values in Redis' own representation (`hll`).
//!
//! As in Redis, PFCOUNT of one key stores the cardinality it computed in the value's header
//! (a write, though the command is read-only), and a value that is not a HyperLogLog, or
//! whose registers cannot be read, is refused with Redis' texts.

use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use weft_core::{CacheEntry, Compute, Expiry, WriteOptions};

use super::bits::{Edit, edit_string, edited_value, read_string};
use super::collections::WRONGTYPE;
use super::hll::{self, REGISTERS};
use super::strings::cache_error;
use crate::resp::{Reply, Session};

/// Redis' reply to a string that is not a HyperLogLog.
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// Redis' reply to a HyperLogLog whose registers cannot be read.
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

/// Redis' default `hll-sparse-max-bytes`.
const SPARSE_BYTES_MAX_DEFAULT: usize = 3000;

/// `hll-sparse-max-bytes` in force: process-wide, as redis-server's configuration (CONFIG SET
/// changes it).
static SPARSE_BYTES_MAX: AtomicUsize = AtomicUsize::new(SPARSE_BYTES_MAX_DEFAULT);

/// Applies a CONFIG SET of `name` if it is `hll-sparse-max-bytes`.
pub fn configure(name: &str, value: &str) {
    if name == "hll-sparse-max-bytes"
        && let Ok(bytes) = value.parse::<usize>()
    {
        SPARSE_BYTES_MAX.store(bytes, Ordering::Relaxed);
    }
}

fn sparse_bytes_max() -> usize {
    SPARSE_BYTES_MAX.load(Ordering::Relaxed)
}

/// Why a HyperLogLog command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The key holds a collection.
    WrongType,
    /// A string that is not a HyperLogLog.
    NotHll,
    /// A HyperLogLog whose registers cannot be read.
    Corrupt,
}

impl Refusal {
    fn reply(self, reply: &mut Reply<'_>) {
        reply.error(match self {
            Self::WrongType => WRONGTYPE,
            Self::NotHll => NOT_HLL,
            Self::Corrupt => CORRUPT,
        });
    }
}

/// `PFADD key [element ...]`: 1 if a register changed (or the key was created), else 0.
pub fn pfadd(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let elements = &args[2..];
    let limit = sparse_bytes_max();
    let result = edit_string(session, &args[1], |existing| {
        let (mut working, mut updated) = match existing {
            None => (hll::Working::new(hll::new_sparse()), true),
            Some(value) if hll::is_hyperloglog(value) => (hll::Working::new(value.to_vec()), false),
            Some(_) => return Edit::Keep(Err(Refusal::NotHll)),
        };
        for element in elements {
            match working.add(element, limit) {
                Ok(changed) => updated |= changed,
                // Registers set before the corruption was found stay set, as in Redis.
                Err(hll::Corrupt) if existing.is_some_and(|old| old != working.value()) => {
                    return Edit::Store(working.into_value(), Err(Refusal::Corrupt));
                }
                Err(hll::Corrupt) => return Edit::Unshare(Err(Refusal::Corrupt)),
            }
        }
        if !updated {
            return Edit::Unshare(Ok(false));
        }
        working.invalidate_cache();
        Edit::Store(working.into_value(), Ok(true))
    });
    match result {
        Ok(Ok(Ok(updated))) => reply.integer(i64::from(updated)),
        Ok(Ok(Err(refusal))) => refusal.reply(reply),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(error) => cache_error(reply, &error),
    }
}

/// The value of a key a HyperLogLog command reads: `None` when missing.
fn hyperloglog_of(entry: Option<&CacheEntry>) -> Result<Option<&[u8]>, Refusal> {
    match entry {
        None => Ok(None),
        Some(entry) if entry.structure().is_some() => Err(Refusal::WrongType),
        Some(entry) if hll::is_hyperloglog(entry.value()) => Ok(Some(entry.value())),
        Some(_) => Err(Refusal::NotHll),
    }
}

/// Raises `registers` to the HyperLogLogs at `keys` (missing keys count as empty); whether
/// one of them was dense.
fn merge_keys(
    session: &Session,
    keys: &[Bytes],
    registers: &mut [u8; REGISTERS],
    reply: &mut Reply<'_>,
) -> Option<bool> {
    let mut any_dense = false;
    for key in keys {
        let entry = match session.cache.get_entry(key) {
            Ok(entry) => entry,
            Err(error) => {
                cache_error(reply, &error);
                return None;
            }
        };
        match hyperloglog_of(entry.as_ref()) {
            Ok(None) => {}
            Ok(Some(value)) => {
                any_dense |= hll::is_dense(value);
                if hll::merge_into(registers, value).is_err() {
                    Refusal::Corrupt.reply(reply);
                    return None;
                }
            }
            Err(refusal) => {
                refusal.reply(reply);
                return None;
            }
        }
    }
    Some(any_dense)
}

/// `PFCOUNT key [key ...]`: the estimated cardinality of one HyperLogLog (cached in its
/// header), or of the union of several.
pub fn pfcount(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() > 2 {
        let mut registers = Box::new([0u8; REGISTERS]);
        if merge_keys(session, &args[1..], &mut registers, reply).is_some() {
            let count = hll::count_registers(&registers);
            reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
        }
        return;
    }
    // Most counts find the cached cardinality valid in a value already `raw`: a read
    // answers them.
    let Ok(entry) = read_string(session, &args[1], reply) else {
        return;
    };
    match entry.as_ref() {
        None => return reply.integer(0),
        Some(entry) if !hll::is_hyperloglog(entry.value()) => {
            return Refusal::NotHll.reply(reply);
        }
        Some(entry) => {
            if let Some(cached) = hll::cached_cardinality(entry.value())
                && entry.is_edited()
            {
                return reply.integer(i64::try_from(cached).unwrap_or(i64::MAX));
            }
        }
    }
    drop(entry);
    let result = edit_string(session, &args[1], |existing| {
        let Some(value) = existing else {
            return Edit::Keep(Ok(0));
        };
        if !hll::is_hyperloglog(value) {
            return Edit::Keep(Err(Refusal::NotHll));
        }
        if let Some(cached) = hll::cached_cardinality(value) {
            return Edit::Unshare(Ok(cached));
        }
        match hll::count(value) {
            Ok(count) => {
                let mut value = value.to_vec();
                hll::set_cached_cardinality(&mut value, count);
                Edit::Store(value, Ok(count))
            }
            Err(hll::Corrupt) => Edit::Unshare(Err(Refusal::Corrupt)),
        }
    });
    match result {
        Ok(Ok(Ok(count))) => reply.integer(i64::try_from(count).unwrap_or(i64::MAX)),
        Ok(Ok(Err(refusal))) => refusal.reply(reply),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(error) => cache_error(reply, &error),
    }
}

/// `PFMERGE destkey [sourcekey ...]`: the destination (one of the sources too) becomes the
/// union; it stays sparse unless a source was dense or it outgrows the sparse limit.
pub fn pfmerge(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut registers = Box::new([0u8; REGISTERS]);
    let Some(any_dense) = merge_keys(session, &args[1..], &mut registers, reply) else {
        return;
    };
    let limit = sparse_bytes_max();
    let result = session
        .cache
        .compute(&args[1], &WriteOptions::default(), |existing| {
            let mut working = match hyperloglog_of(existing) {
                Ok(None) => hll::Working::new(hll::new_sparse()),
                Ok(Some(value)) => hll::Working::new(value.to_vec()),
                Err(refusal) => return Compute::Keep(Err(refusal)),
            };
            if any_dense && working.make_dense().is_err() {
                return Compute::Keep(Err(Refusal::Corrupt));
            }
            for (index, &count) in registers.iter().enumerate() {
                if count > 0 {
                    // The destination was read as one of the sources, so its registers are
                    // readable; Redis ignores this result too.
                    let _ = working.set_register(index, count, limit);
                }
            }
            working.invalidate_cache();
            let value = working.into_value();
            Compute::PutValue(edited_value(value, existing), Expiry::KEEP, Ok(()))
        });
    match result {
        Ok(Ok(())) => reply.ok(),
        Ok(Err(refusal)) => refusal.reply(reply),
        Err(error) => cache_error(reply, &error),
    }
}
