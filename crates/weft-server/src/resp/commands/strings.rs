//! String commands: GET SET (NX XX GET EX PX EXAT PXAT KEEPTTL) SETNX SETEX PSETEX GETDEL
//! GETEX (EX PX EXAT PXAT PERSIST) GETSET MGET MSET MSETNX APPEND STRLEN GETRANGE SUBSTR
//! SETRANGE. The INCR family is in `counters`.
//!
//! Every read-modify-write goes through `Cache::compute`, so it is atomic per key across
//! connections (and, later, protocols).

use bytes::Bytes;
use weft_core::{Compute, Expiry, Lifetime, NewValue, WriteOptions};

use super::collections::WRONGTYPE;

use super::{arg_i64, errors, is};
use crate::resp::{Reply, Session};

/// Expiration units the SET family accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireUnit {
    /// EX: relative seconds.
    Seconds,
    /// PX: relative milliseconds.
    Millis,
    /// EXAT: absolute Unix seconds.
    UnixSeconds,
    /// PXAT: absolute Unix milliseconds.
    UnixMillis,
}

impl ExpireUnit {
    /// The unit named by an option keyword (EX PX EXAT PXAT).
    #[must_use]
    pub fn from_keyword(arg: &[u8]) -> Option<Self> {
        if is(arg, "EX") {
            Some(Self::Seconds)
        } else if is(arg, "PX") {
            Some(Self::Millis)
        } else if is(arg, "EXAT") {
            Some(Self::UnixSeconds)
        } else if is(arg, "PXAT") {
            Some(Self::UnixMillis)
        } else {
            None
        }
    }
}

/// Why an expiration argument was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireError {
    /// Not an integer.
    NotInteger,
    /// Zero, negative, or overflowing once converted (Redis: "invalid expire time").
    Invalid,
}

impl ExpireError {
    /// Writes Redis' reply for this error, for command `command` (lower case).
    pub fn reply(self, command: &str, reply: &mut Reply<'_>) {
        match self {
            Self::NotInteger => reply.error(errors::NOT_INTEGER),
            Self::Invalid => {
                reply.error(&format!("ERR invalid expire time in '{command}' command"))
            }
        }
    }
}

/// The absolute deadline (Unix ms) of `value` in `unit`, Redis' rules: the value must be a
/// positive integer and must not overflow when converted to milliseconds.
///
/// # Errors
/// [`ExpireError`] as Redis would refuse it.
pub fn deadline_ms(unit: ExpireUnit, value: &[u8], now_ms: u64) -> Result<u64, ExpireError> {
    let amount = weft_resp::parse_i64_strict(value).ok_or(ExpireError::NotInteger)?;
    if amount <= 0 {
        return Err(ExpireError::Invalid);
    }
    let amount = amount.unsigned_abs();
    let millis = match unit {
        ExpireUnit::Seconds | ExpireUnit::UnixSeconds => {
            amount.checked_mul(1000).ok_or(ExpireError::Invalid)?
        }
        ExpireUnit::Millis | ExpireUnit::UnixMillis => amount,
    };
    let deadline = match unit {
        ExpireUnit::Seconds | ExpireUnit::Millis => {
            millis.checked_add(now_ms).ok_or(ExpireError::Invalid)?
        }
        ExpireUnit::UnixSeconds | ExpireUnit::UnixMillis => millis,
    };
    if deadline > i64::MAX as u64 {
        return Err(ExpireError::Invalid);
    }
    Ok(deadline)
}

/// The expiry that gives an existing entry, rewritten at `now_ms`, a lifespan ending at
/// `deadline_ms` (EXPIRE, GETEX). Redis has one TTL; an entry may also have a max idle (from
/// REST or a cache default), which this keeps: only the lifespan changes.
#[must_use]
pub fn expiry_until(deadline_ms: u64, now_ms: u64) -> Expiry {
    Expiry {
        lifespan: Lifetime::millis(deadline_ms.saturating_sub(now_ms)),
        max_idle: Lifetime::Keep,
    }
}

/// The expiry of a new value written at `now_ms` with a lifespan ending at `deadline_ms`
/// (SET EX, SETEX): the value replaces the entry, so its max idle is the cache default, as
/// for any write that does not name one.
#[must_use]
pub fn expiry_replacing_until(deadline_ms: u64, now_ms: u64) -> Expiry {
    Expiry {
        max_idle: Lifetime::Default,
        ..expiry_until(deadline_ms, now_ms)
    }
}

/// The expiry that carries `entry`'s expiration, as of `now_ms`, over to a rewrite of it
/// under another key (RENAME): the same absolute lifespan deadline and the same max idle.
#[must_use]
pub fn expiry_of(entry: &weft_core::CacheEntry, now_ms: u64) -> Expiry {
    let expiration = entry.expiration();
    Expiry {
        lifespan: expiration
            .lifespan_deadline_ms()
            .map_or(Lifetime::Never, |deadline| {
                Lifetime::millis(deadline.saturating_sub(now_ms))
            }),
        max_idle: expiration
            .max_idle_ms
            .map_or(Lifetime::Never, Lifetime::millis),
    }
}

/// Writes a cache error as a RESP error reply.
pub fn cache_error(reply: &mut Reply<'_>, error: &weft_core::CacheError) {
    match error {
        weft_core::CacheError::ContainerFull { .. } => {
            reply.error("OOM command not allowed when used memory > 'maxmemory'.");
        }
        other => reply.error(&format!("ERR {other}")),
    }
}

/// A string rewritten in place keeps its client flags (set through memcached).
#[must_use]
pub fn in_place(value: Vec<u8>, entry: &weft_core::CacheEntry) -> NewValue {
    NewValue::Bytes {
        value,
        user_flags: entry.user_flags(),
        edited: false,
    }
}

/// A string edited in part (APPEND, SETRANGE): keeps its client flags (set through
/// memcached) and is marked edited, so OBJECT ENCODING answers `raw` as Redis does.
fn edited(value: Vec<u8>, entry: Option<&weft_core::CacheEntry>) -> NewValue {
    NewValue::Bytes {
        value,
        user_flags: entry.map_or(0, weft_core::CacheEntry::user_flags),
        edited: true,
    }
}

/// `GET key`
pub fn get(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) if entry.structure().is_some() => reply.error(WRONGTYPE),
        Ok(Some(entry)) => reply.bulk(entry.value()),
        Ok(None) => reply.null(),
        Err(error) => cache_error(reply, &error),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    IfAbsent,
    IfPresent,
}

#[derive(Debug, Clone, Copy)]
enum Expiration {
    /// No option: the cache default (immortal for the default cache), as a plain SET.
    Default,
    Keep,
    Until(u64),
}

/// Which command's options [`parse_string_options`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptionsOf {
    /// SET: NX XX GET KEEPTTL EX PX EXAT PXAT, from the fourth argument.
    Set,
    /// GETEX: PERSIST EX PX EXAT PXAT, from the third argument.
    GetEx,
}

/// The options of SET or GETEX, as Redis' `parseExtendedStringArgumentsOrReply` reads them.
#[derive(Debug, Default, Clone, Copy)]
struct StringOptions {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    /// EX/PX/EXAT/PXAT with the index of its argument (validated later, as Redis does).
    expire: Option<(ExpireUnit, usize)>,
}

/// Parses SET/GETEX options with Redis' rules: options that conflict (NX with XX, two
/// different expiration units, KEEPTTL or PERSIST with an expiration) are a syntax error,
/// while repeating the same option is allowed (the last expiration value wins).
fn parse_string_options(args: &[Bytes], of: OptionsOf) -> Option<StringOptions> {
    let set = of == OptionsOf::Set;
    let mut options = StringOptions::default();
    let mut index = if set { 3 } else { 2 };
    while index < args.len() {
        let option = &args[index];
        let has_value = index + 1 < args.len();
        if set && is(option, "NX") && !options.xx {
            options.nx = true;
        } else if set && is(option, "XX") && !options.nx {
            options.xx = true;
        } else if set && is(option, "GET") {
            options.get = true;
        } else if set && is(option, "KEEPTTL") && options.expire.is_none() {
            options.keep_ttl = true;
        } else if !set && is(option, "PERSIST") && options.expire.is_none() {
            options.persist = true;
        } else if let Some(unit) = ExpireUnit::from_keyword(option)
            && !options.keep_ttl
            && !options.persist
            && options.expire.is_none_or(|(chosen, _)| chosen == unit)
            && has_value
        {
            options.expire = Some((unit, index + 1));
            index += 1;
        } else {
            return None;
        }
        index += 1;
    }
    Some(options)
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]`
pub fn set(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (key, value) = (&args[1], &args[2]);
    let cache = &session.cache;
    if args.len() == 3 {
        // The common case needs neither the previous value nor a condition.
        match cache.put(key, value, &WriteOptions::default().ignore_return_values()) {
            Ok(_) => reply.ok(),
            Err(error) => cache_error(reply, &error),
        }
        return;
    }
    let Some(options) = parse_string_options(args, OptionsOf::Set) else {
        reply.error(errors::SYNTAX);
        return;
    };
    let now = cache.clock().now_ms();
    let expiration = match options.expire {
        Some((unit, index)) => match deadline_ms(unit, &args[index], now) {
            Ok(deadline) => Expiration::Until(deadline),
            Err(error) => return error.reply("set", reply),
        },
        None if options.keep_ttl => Expiration::Keep,
        None => Expiration::Default,
    };
    let condition = if options.nx {
        Condition::IfAbsent
    } else if options.xx {
        Condition::IfPresent
    } else {
        Condition::Always
    };
    let return_old = options.get;
    let mut wrong_type = false;
    let result = cache.compute(key, &WriteOptions::default(), |existing| {
        let old = if return_old {
            if existing.is_some_and(|e| e.structure().is_some()) {
                wrong_type = true;
                return Compute::Keep((false, None));
            }
            existing.map(|e| e.value_bytes())
        } else {
            None
        };
        let allowed = match condition {
            Condition::Always => true,
            Condition::IfAbsent => existing.is_none(),
            Condition::IfPresent => existing.is_some(),
        };
        if !allowed {
            return Compute::Keep((false, old));
        }
        let expiry = match expiration {
            Expiration::Default => Expiry::default(),
            Expiration::Keep => Expiry::KEEP,
            // A deadline already past deletes the key, as Redis does.
            Expiration::Until(deadline) if deadline <= now => return Compute::Remove((true, old)),
            Expiration::Until(deadline) => expiry_replacing_until(deadline, now),
        };
        Compute::Put(value.to_vec(), expiry, (true, old))
    });
    if wrong_type {
        return reply.error(WRONGTYPE);
    }
    match result {
        Ok((_, old)) if return_old => match old {
            Some(old) => reply.bulk(&old),
            None => reply.null(),
        },
        Ok((true, _)) => reply.ok(),
        Ok((false, _)) => reply.null(),
        Err(error) => cache_error(reply, &error),
    }
}

/// `SETNX key value`: 1 if stored, 0 if the key exists.
pub fn setnx(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match session
        .cache
        .put_if_absent(&args[1], &args[2], &WriteOptions::default())
    {
        Ok(None) => reply.integer(1),
        Ok(Some(_)) => reply.integer(0),
        Err(error) => cache_error(reply, &error),
    }
}

fn set_with_expiry(
    session: &Session,
    args: &[Bytes],
    reply: &mut Reply<'_>,
    unit: ExpireUnit,
    command: &str,
) {
    let cache = &session.cache;
    let now = cache.clock().now_ms();
    let deadline = match deadline_ms(unit, &args[2], now) {
        Ok(deadline) => deadline,
        Err(error) => return error.reply(command, reply),
    };
    let options = WriteOptions::default()
        .ignore_return_values()
        .expiry(expiry_replacing_until(deadline, now));
    match cache.put(&args[1], &args[3], &options) {
        Ok(_) => reply.ok(),
        Err(error) => cache_error(reply, &error),
    }
}

/// `SETEX key seconds value`
pub fn setex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    set_with_expiry(session, args, reply, ExpireUnit::Seconds, "setex");
}

/// `PSETEX key milliseconds value`
pub fn psetex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    set_with_expiry(session, args, reply, ExpireUnit::Millis, "psetex");
}

/// `GETDEL key`
pub fn getdel(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let result = session.cache.compute(
        &args[1],
        &WriteOptions::default(),
        |existing| match existing {
            None => Compute::Keep(Ok(None)),
            Some(entry) if entry.structure().is_some() => Compute::Keep(Err(())),
            Some(entry) => Compute::Remove(Ok(Some(entry.value_bytes()))),
        },
    );
    match result {
        Ok(Ok(Some(value))) => reply.bulk(&value),
        Ok(Ok(None)) => reply.null(),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(error) => cache_error(reply, &error),
    }
}

/// `GETEX key [EX s | PX ms | EXAT ts | PXAT ts | PERSIST]`
///
/// As in Redis, options are checked for syntax first, the key is looked up next (a missing
/// key answers nil whatever the expiration value), and only then is the expiration value
/// validated; an absolute time already past deletes the key after returning its value.
pub fn getex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(options) = parse_string_options(args, OptionsOf::GetEx) else {
        reply.error(errors::SYNTAX);
        return;
    };
    if options.expire.is_none() && !options.persist {
        return get(session, args, reply);
    }
    let cache = &session.cache;
    let clock = cache.clock();
    let now = clock.now_ms();
    let mut wrong_type = false;
    let result = cache.compute(&args[1], &WriteOptions::default(), |existing| {
        let Some(entry) = existing else {
            return Compute::Keep(Ok(None));
        };
        if entry.structure().is_some() {
            wrong_type = true;
            return Compute::Keep(Ok(None));
        }
        let value = entry.value_bytes();
        if let Some((unit, index)) = options.expire {
            return match deadline_ms(unit, &args[index], now) {
                Err(error) => Compute::Keep(Err(error)),
                Ok(deadline) if deadline <= now => Compute::Remove(Ok(Some(value))),
                Ok(deadline) => {
                    let expiry = expiry_until(deadline, clock.now_ms());
                    Compute::Reexpire(expiry, Ok(Some(value)))
                }
            };
        }
        if entry.is_mortal() {
            // PERSIST
            Compute::Reexpire(Expiry::NEVER, Ok(Some(value)))
        } else {
            Compute::Keep(Ok(Some(value)))
        }
    });
    if wrong_type {
        return reply.error(WRONGTYPE);
    }
    match result {
        Ok(Ok(Some(value))) => reply.bulk(&value),
        Ok(Ok(None)) => reply.null(),
        Ok(Err(error)) => error.reply("getex", reply),
        Err(error) => cache_error(reply, &error),
    }
}

/// `GETSET key value`: sets the value (dropping any expiration) and returns the old one.
pub fn getset(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let value = &args[2];
    let result = session
        .cache
        .compute(&args[1], &WriteOptions::default(), |existing| {
            if existing.is_some_and(|entry| entry.structure().is_some()) {
                return Compute::Keep(Err(()));
            }
            let old = existing.map(|entry| entry.value_bytes());
            Compute::Put(value.to_vec(), Expiry::default(), Ok(old))
        });
    match result {
        Ok(Ok(Some(old))) => reply.bulk(&old),
        Ok(Ok(None)) => reply.null(),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(error) => cache_error(reply, &error),
    }
}

/// `MGET key [key ...]`: nil for each missing key.
pub fn mget(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut entries = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        match session.cache.get_entry(key) {
            Ok(entry) => entries.push(entry),
            Err(error) => return cache_error(reply, &error),
        }
    }
    reply.array(entries.len());
    for entry in entries {
        match entry {
            Some(entry) if entry.structure().is_none() => reply.bulk(entry.value()),
            _ => reply.null(),
        }
    }
}

fn put_pairs(session: &Session, args: &[Bytes]) -> Result<(), weft_core::CacheError> {
    let options = WriteOptions::default().ignore_return_values();
    for pair in args[1..].chunks_exact(2) {
        session.cache.put(&pair[0], &pair[1], &options)?;
    }
    Ok(())
}

/// `MSET key value [key value ...]`: every key loses its expiration, as with SET.
pub fn mset(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() % 2 == 0 {
        reply.error("ERR wrong number of arguments for 'mset' command");
        return;
    }
    match put_pairs(session, args) {
        Ok(()) => reply.ok(),
        Err(error) => cache_error(reply, &error),
    }
}

/// `MSETNX key value [key value ...]`: sets all the keys, or none if any of them exists.
///
/// Limitation: the engine's atomicity is per key (`Cache::compute`), and these keys may live
/// in different segments, so this is check-then-set. Redis runs it as one step; here a
/// concurrent writer that creates one of the keys between the check and the writes is
/// overwritten, and readers may see some of the keys written before the others.
pub fn msetnx(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() % 2 == 0 {
        reply.error("ERR wrong number of arguments for 'msetnx' command");
        return;
    }
    for key in args[1..].iter().step_by(2) {
        match session.cache.contains(key) {
            Ok(true) => return reply.integer(0),
            Ok(false) => {}
            Err(error) => return cache_error(reply, &error),
        }
    }
    match put_pairs(session, args) {
        Ok(()) => reply.integer(1),
        Err(error) => cache_error(reply, &error),
    }
}

/// Redis' error when a string would outgrow `proto-max-bulk-len`.
const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// Whether a string of `size + added` bytes exceeds `max` (Redis' `checkStringLength`).
fn too_long(size: usize, added: usize, max: usize) -> bool {
    size.checked_add(added).is_none_or(|total| total > max)
}

/// `APPEND key value`: the new length; keeps the key's expiration.
pub fn append(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let max = session.context.settings.resp_bulk_bytes_max;
    let suffix = &args[2];
    let result = session
        .cache
        .compute(&args[1], &WriteOptions::default(), |existing| {
            let Some(entry) = existing else {
                return Compute::Put(suffix.to_vec(), Expiry::KEEP, Ok(suffix.len()));
            };
            if entry.structure().is_some() {
                return Compute::Keep(Err(WRONGTYPE));
            }
            let old = entry.value();
            if too_long(old.len(), suffix.len(), max) {
                return Compute::Keep(Err(STRING_TOO_LONG));
            }
            let mut value = Vec::with_capacity(old.len() + suffix.len());
            value.extend_from_slice(old);
            value.extend_from_slice(suffix);
            let len = value.len();
            Compute::PutValue(edited(value, Some(entry)), Expiry::KEEP, Ok(len))
        });
    match result {
        Ok(Ok(len)) => reply.integer(i64::try_from(len).unwrap_or(i64::MAX)),
        Ok(Err(text)) => reply.error(text),
        Err(error) => cache_error(reply, &error),
    }
}

/// `STRLEN key`: 0 for a missing key.
pub fn strlen(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) if entry.structure().is_some() => reply.error(WRONGTYPE),
        Ok(entry) => {
            let len = entry.map_or(0, |entry| entry.value().len());
            reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
        }
        Err(error) => cache_error(reply, &error),
    }
}

/// The byte range `start..=end` (Redis' inclusive, possibly negative indexes) of a string
/// of `len` bytes, or `None` when it selects nothing — Redis 7's `getrangeCommand` rules.
fn substring_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let start = if start < 0 {
        start.saturating_add(len).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        end.saturating_add(len).max(0)
    } else {
        end
    };
    let end = end.min(len - 1);
    if start > end || len == 0 {
        return None;
    }
    Some((usize::try_from(start).ok()?, usize::try_from(end).ok()?))
}

/// `GETRANGE key start end` (and its old name `SUBSTR`): an empty string for a missing key.
pub fn getrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(start), Some(end)) = (arg_i64(args, 2), arg_i64(args, 3)) else {
        reply.error(errors::NOT_INTEGER);
        return;
    };
    match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) if entry.structure().is_some() => reply.error(WRONGTYPE),
        Ok(Some(entry)) => {
            let value = entry.value();
            match substring_range(start, end, value.len()) {
                Some((start, end)) => reply.bulk(&value[start..=end]),
                None => reply.bulk(b""),
            }
        }
        Ok(None) => reply.bulk(b""),
        Err(error) => cache_error(reply, &error),
    }
}

/// `SETRANGE key offset value`: overwrites from `offset`, zero-padding a shorter string;
/// returns the new length. Keeps the key's expiration; an empty value changes nothing (and
/// creates no key).
pub fn setrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(offset) = arg_i64(args, 2) else {
        reply.error(errors::NOT_INTEGER);
        return;
    };
    let Ok(offset) = usize::try_from(offset) else {
        reply.error("ERR offset is out of range");
        return;
    };
    let max = session.context.settings.resp_bulk_bytes_max;
    let patch = &args[3];
    let result = session
        .cache
        .compute(&args[1], &WriteOptions::default(), |existing| {
            if existing.is_some_and(|entry| entry.structure().is_some()) {
                return Compute::Keep(Err(WRONGTYPE));
            }
            let old: &[u8] = existing.map_or(&[], |entry| entry.value());
            if patch.is_empty() {
                return Compute::Keep(Ok(old.len()));
            }
            if too_long(offset, patch.len(), max) {
                return Compute::Keep(Err(STRING_TOO_LONG));
            }
            let end = offset + patch.len();
            let mut value = Vec::with_capacity(old.len().max(end));
            value.extend_from_slice(old);
            if value.len() < end {
                value.resize(end, 0);
            }
            value[offset..end].copy_from_slice(patch);
            let len = value.len();
            // Redis creates a missing key as a raw string too.
            Compute::PutValue(edited(value, existing), Expiry::KEEP, Ok(len))
        });
    match result {
        Ok(Ok(len)) => reply.integer(i64::try_from(len).unwrap_or(i64::MAX)),
        Ok(Err(text)) => reply.error(text),
        Err(error) => cache_error(reply, &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<Bytes> {
        text.split(' ')
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    // Proves GETRANGE's index rules match Redis 7 on the examples of its documentation and
    // on the negative-index corner cases.
    #[test]
    fn substring_ranges() {
        let text = "This is a string";
        let pick = |start, end| {
            substring_range(start, end, text.len())
                .map(|(s, e)| &text[s..=e])
                .unwrap_or("")
        };
        assert_eq!(pick(0, 3), "This");
        assert_eq!(pick(-3, -1), "ing");
        assert_eq!(pick(0, -1), text);
        assert_eq!(pick(10, 100), "string");
        assert_eq!(pick(-1, -3), "");
        assert_eq!(pick(5, 3), "");
        assert_eq!(pick(-100, 2), "Thi");
        assert_eq!(pick(-100, -100), "T");
        assert_eq!(pick(i64::MIN, i64::MAX), text);
        assert_eq!(substring_range(0, -1, 0), None);
        assert_eq!(substring_range(0, 0, 0), None);
    }

    // Proves SET/GETEX option parsing follows Redis: conflicts are errors, repeats are not.
    #[test]
    fn string_options() {
        let set = |text: &str| parse_string_options(&args(text), OptionsOf::Set);
        let getex = |text: &str| parse_string_options(&args(text), OptionsOf::GetEx);
        assert!(set("SET k v NX XX").is_none());
        assert!(set("SET k v NX NX GET").is_some_and(|o| o.nx && o.get));
        assert!(set("SET k v EX 1 PX 1").is_none());
        assert!(set("SET k v EX 1 EX 2").is_some_and(|o| o.expire.is_some_and(|(_, i)| i == 6)));
        assert!(set("SET k v KEEPTTL EX 1").is_none());
        assert!(set("SET k v EX 1 KEEPTTL").is_none());
        assert!(set("SET k v EX").is_none());
        assert!(set("SET k v PERSIST").is_none());
        assert!(getex("GETEX k PERSIST").is_some_and(|o| o.persist));
        assert!(getex("GETEX k PERSIST EX 1").is_none());
        assert!(getex("GETEX k KEEPTTL").is_none());
        assert!(getex("GETEX k NX").is_none());
        assert!(
            getex("GETEX k pxat 5").is_some_and(|o| o.expire == Some((ExpireUnit::UnixMillis, 3)))
        );
    }

    // Proves the string-length bound is inclusive and overflow-safe.
    #[test]
    fn length_bound() {
        assert!(!too_long(10, 10, 20));
        assert!(too_long(10, 11, 20));
        assert!(too_long(usize::MAX, 1, usize::MAX));
    }
}
