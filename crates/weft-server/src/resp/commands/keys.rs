//! Key commands: DEL UNLINK EXISTS TYPE OBJECT KEYS SCAN RANDOMKEY RENAME RENAMENX TOUCH.
//! The expiration commands are in `expire`.
//!
//! A key holds a string or one of the collections (`collections`). SCAN's cursor is a segment
//! index: each call returns whole segments, so a key that lives through the whole scan is
//! returned exactly once, whatever is written meanwhile.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use weft_core::{Compute, NewValue, StructureCell, WriteOptions};

use super::collections;
use super::strings::{cache_error, expiry_of};
use super::{errors, glob, is};
use crate::resp::{Reply, Session};

fn count_reply(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

/// `DEL key [key ...]` and `UNLINK key [key ...]`: how many keys were removed.
pub fn del(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut removed = 0;
    for key in &args[1..] {
        match session.cache.delete(key) {
            Ok(true) => removed += 1,
            Ok(false) => {}
            Err(error) => return cache_error(reply, &error),
        }
    }
    count_reply(reply, removed);
}

/// `EXISTS key [key ...]`: how many of the keys exist, a key named twice counting twice.
pub fn exists(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut found = 0;
    for key in &args[1..] {
        match session.cache.contains(key) {
            Ok(true) => found += 1,
            Ok(false) => {}
            Err(error) => return cache_error(reply, &error),
        }
    }
    count_reply(reply, found);
}

/// `TOUCH key [key ...]`: how many of the keys exist; reading them refreshes their idle time.
pub fn touch(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut found = 0;
    for key in &args[1..] {
        match session.cache.get_entry(key) {
            Ok(Some(_)) => found += 1,
            Ok(None) => {}
            Err(error) => return cache_error(reply, &error),
        }
    }
    count_reply(reply, found);
}

/// `TYPE key`: `string`, `hash`, `list`, `set`, `zset`, or `none` for a missing key.
pub fn type_(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) => reply.simple(collections::type_name(&entry)),
        Ok(None) => reply.simple("none"),
        Err(error) => cache_error(reply, &error),
    }
}

/// `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP key`, with Redis 7.0's answers: encodings
/// from the value (`int`, `embstr`, `raw`; a structure's own), a reference count of 1
/// (2147483647 for the shared integers 0..9999), idle time 0 (not tracked).
pub fn object(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = &args[1];
    if is(sub, "HELP") {
        let lines = [
            "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
            "HELP",
            "    Print this help.",
        ];
        reply.array(lines.len());
        for line in lines {
            reply.simple(line);
        }
        return;
    }
    // The table checked the subcommand and the arguments' count.
    let entry = match session.cache.get_entry(&args[2]) {
        Ok(Some(entry)) => entry,
        Ok(None) => return reply.null(),
        Err(error) => return cache_error(reply, &error),
    };
    if is(sub, "ENCODING") {
        let encoding = match entry.structure() {
            Some(cell) => cell.lock().encoding_name(),
            None if entry.is_edited() => "raw",
            None => string_encoding(entry.value()),
        };
        reply.bulk(encoding.as_bytes());
    } else if is(sub, "REFCOUNT") {
        let shared = entry.structure().is_none()
            && weft_resp::parse_i64_strict(entry.value()).is_some_and(|n| (0..10_000).contains(&n));
        reply.integer(if shared { 2_147_483_647 } else { 1 });
    } else if is(sub, "IDLETIME") {
        reply.integer(0);
    } else {
        reply.error(
            "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
             Please note that when switching between policies at runtime LRU and LFU data \
             will take some time to adjust.",
        );
    }
}

/// Redis 7.0's encoding of a string value: `int` for a canonical 64-bit integer, `embstr`
/// up to 44 bytes, `raw` beyond. (Strings edited by APPEND or SETRANGE are `raw` whatever
/// their length: the entry remembers that.)
fn string_encoding(value: &[u8]) -> &'static str {
    if value.len() <= 20 && weft_resp::parse_i64_strict(value).is_some() {
        "int"
    } else if value.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// `KEYS pattern`: every live key matching the glob pattern.
pub fn keys(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let pattern = &args[1];
    let all = pattern.as_ref() == b"*";
    let found: Vec<Bytes> = session
        .cache
        .iter()
        .filter(|entry| all || glob::matches(pattern, entry.key()))
        .map(|entry| entry.key_bytes())
        .collect();
    reply.array(found.len());
    for key in &found {
        reply.bulk(key);
    }
}

/// Parses a SCAN cursor as Redis does (`strtoul` in base 10, the whole argument): an
/// optional sign, digits; `-n` wraps around as in C; leading whitespace, trailing bytes and
/// overflow are refused. An empty argument reads as 0, as in Redis.
pub(crate) fn parse_cursor(text: &[u8]) -> Option<u64> {
    let (negative, digits) = match text.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &digit in digits {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// SCAN's options.
#[derive(Debug)]
pub(crate) struct ScanOptions<'a> {
    count: usize,
    pattern: Option<&'a [u8]>,
    /// The TYPE asked for, lower-cased (Redis 7 accepts unknown type names and returns
    /// nothing for them).
    type_name: Option<String>,
}

impl<'a> ScanOptions<'a> {
    pub(crate) fn parse(options: &'a [Bytes]) -> Result<Self, &'static str> {
        let mut parsed = Self {
            count: 10,
            pattern: None,
            type_name: None,
        };
        let mut index = 0;
        while index < options.len() {
            let option = &options[index];
            let Some(value) = options.get(index + 1) else {
                return Err(errors::SYNTAX);
            };
            if is(option, "COUNT") {
                let count = weft_resp::parse_i64_strict(value).ok_or(errors::NOT_INTEGER)?;
                if count < 1 {
                    return Err(errors::SYNTAX);
                }
                parsed.count = usize::try_from(count).unwrap_or(usize::MAX);
            } else if is(option, "MATCH") {
                // `*` matches everything: no need to match at all.
                parsed.pattern = (value.as_ref() != b"*").then_some(value.as_ref());
            } else if is(option, "TYPE") {
                parsed.type_name = Some(String::from_utf8_lossy(value).to_ascii_lowercase());
            } else {
                return Err(errors::SYNTAX);
            }
            index += 2;
        }
        Ok(parsed)
    }
}

impl ScanOptions<'_> {
    /// How many keys a SCAN call looks at before it stops at a segment's end.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Whether SCAN returns `entry` (its MATCH and TYPE).
    pub(crate) fn wanted(&self, entry: &weft_core::CacheEntry) -> bool {
        self.type_name
            .as_deref()
            .is_none_or(|name| name == collections::type_name(entry))
            && self
                .pattern
                .is_none_or(|pattern| glob::matches(pattern, entry.key()))
    }
}

/// Writes SCAN's reply: the next cursor, then the keys.
pub(crate) fn scan_reply(reply: &mut Reply<'_>, next: u64, found: &[Bytes]) {
    reply.array(2);
    reply.bulk(itoa::Buffer::new().format(next).as_bytes());
    reply.array(found.len());
    for key in found {
        reply.bulk(key);
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`
///
/// The cursor is the next segment to visit (0 to start, and 0 again when done). Whole
/// segments are visited until at least COUNT keys have been looked at (before MATCH and TYPE
/// filter them, as Redis counts); a cursor past the last segment ends the scan.
///
/// On a cluster, a cache partitioned by Redis slots scans as a Redis Cluster node does: only
/// the segments this node is the primary of (a cluster client scans every primary). Other
/// clustered caches scan the whole cluster, each segment from the member that reads it
/// (see `resp::cluster_wide`).
pub fn scan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(cursor) = parse_cursor(&args[1]) else {
        reply.error("ERR invalid cursor");
        return;
    };
    let options = match ScanOptions::parse(&args[2..]) {
        Ok(options) => options,
        Err(text) => return reply.error(text),
    };
    let cache = &session.cache;
    let mine = |segment: u32| match &session.context.cluster {
        Some(node) if cache.config().mode.is_clustered() => matches!(
            node.routing().write_route(cache.name(), segment),
            crate::cluster::routing::Route::Local
        ),
        _ => true,
    };
    let segments = cache.segment_count();
    let mut found = Vec::new();
    let mut next = 0;
    if let Ok(mut segment) = u32::try_from(cursor)
        && segment < segments
    {
        let mut visited = 0usize;
        loop {
            if mine(segment) {
                for entry in cache.iter_segments(vec![segment]) {
                    visited += 1;
                    if options.wanted(&entry) {
                        found.push(entry.key_bytes());
                    }
                }
            }
            segment += 1;
            if segment >= segments {
                break;
            }
            if visited >= options.count {
                next = segment;
                break;
            }
        }
    }
    scan_reply(reply, u64::from(next), &found);
}

/// A random number; a fresh `RandomState` is seeded differently on every call.
fn random_u64() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

pub(crate) fn random_below(bound: usize) -> usize {
    usize::try_from(random_u64() % (bound.max(1) as u64)).unwrap_or(0)
}

/// `RANDOMKEY`: a key of a random non-empty segment, picked at random; nil if none.
pub fn randomkey(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    let cache = &session.cache;
    let segments = cache.segment_count();
    let start = u32::try_from(random_below(segments as usize)).unwrap_or(0);
    for step in 0..segments {
        let segment = (start + step) % segments;
        if cache.segment_size(segment) == 0 {
            continue;
        }
        // Expired entries counted in the segment's size are skipped by the iterator.
        let keys: Vec<Bytes> = cache
            .iter_segments(vec![segment])
            .map(|e| e.key_bytes())
            .collect();
        if let Some(key) = keys.get(random_below(keys.len())) {
            reply.bulk(key);
            return;
        }
    }
    reply.null();
}

/// Redis' `renameGenericCommand`: moves the value and its remaining lifespan to the new
/// name (put new, then remove old), replacing the target unless `only_new`.
///
/// Not one atomic step across the two keys: a reader may briefly see both. The old key is
/// removed only if it still holds the moved entry, so a concurrent write to it survives
/// (as if it came after the rename).
fn rename_generic(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, only_new: bool) {
    let (from, to) = (&args[1], &args[2]);
    let cache = &session.cache;
    let entry = match cache.get_entry(from) {
        Ok(Some(entry)) => entry,
        Ok(None) => return reply.error("ERR no such key"),
        Err(error) => return cache_error(reply, &error),
    };
    if from == to {
        return if only_new {
            reply.integer(0)
        } else {
            reply.ok()
        };
    }
    let expiry = expiry_of(&entry, cache.clock().now_ms());
    // A structure moves as a copy: if a concurrent write to the old name keeps it alive,
    // the two keys must not share one cell.
    let value = match entry.structure() {
        Some(cell) => NewValue::Structure(StructureCell::new(cell.lock().clone())),
        None => NewValue::of(&entry),
    };
    let stored = cache.compute(to, &WriteOptions::default(), |existing| {
        if only_new && existing.is_some() {
            Compute::Keep(false)
        } else {
            Compute::PutValue(value, expiry, true)
        }
    });
    match stored {
        Ok(true) => {}
        Ok(false) => return reply.integer(0),
        Err(error) => return cache_error(reply, &error),
    }
    if let Err(error) = cache.remove_if_version(from, entry.version(), &WriteOptions::default()) {
        return cache_error(reply, &error);
    }
    if entry.structure().is_some() {
        // A list renamed onto a key clients block on serves them, as Redis' `dbAdd` does.
        super::lists::signal_stored(session, to);
    }
    if only_new {
        reply.integer(1)
    } else {
        reply.ok()
    }
}

/// `RENAME key newkey`
pub fn rename(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    rename_generic(session, args, reply, false);
}

/// `RENAMENX key newkey`: 1 if renamed, 0 if `newkey` exists.
pub fn renamenx(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    rename_generic(session, args, reply, true);
}

/// The cache of database `raw` (a C int, as Redis reads it) for COPY's DB and MOVE, checked
/// as Redis checks it; and that the client may WRITE there (the command table checked only
/// the selected database).
fn other_database(
    session: &Session,
    raw: &[u8],
    command: &str,
) -> Result<(u32, weft_core::Cache), String> {
    let Some(database) = weft_resp::parse_i64_strict(raw) else {
        return Err(errors::NOT_INTEGER.to_owned());
    };
    let cache = u32::try_from(database)
        .ok()
        .filter(|_| i32::try_from(database).is_ok())
        .and_then(|database| {
            super::connection::database_cache(session, database).map(|cache| (database, cache))
        });
    let Some((database, cache)) = cache else {
        return Err("ERR DB index is out of range".to_owned());
    };
    let security = &session.context.security;
    if security.authorizes()
        && security
            .authorize(
                session.subject.as_ref(),
                "RESP",
                command,
                crate::authorization::Need::Cache(weft_security::authorization::Permissions::WRITE),
                Some((cache.name(), cache.config())),
            )
            .is_err()
    {
        return Err(format!(
            "NOPERM this user has no permissions to run the '{command}' command"
        ));
    }
    Ok((database, cache))
}

/// Copies `entry` (a structure as a cell of its own) to `to` in `target`, unless `to` exists
/// and `replace` is false; whether it did.
fn copy_entry(
    session: &Session,
    target: &weft_core::Cache,
    entry: &weft_core::CacheEntry,
    to: &Bytes,
    replace: bool,
) -> Result<bool, weft_core::CacheError> {
    let expiry = expiry_of(entry, session.cache.clock().now_ms());
    let value = match entry.structure() {
        Some(cell) => NewValue::Structure(StructureCell::new(cell.lock().clone())),
        None => NewValue::of(entry),
    };
    target.compute(to, &WriteOptions::default(), |existing| {
        if existing.is_some() && !replace {
            Compute::Keep(false)
        } else {
            Compute::PutValue(value, expiry, true)
        }
    })
}

/// `COPY source destination [DB destination-db] [REPLACE]`: 1 if copied, 0 if the source is
/// missing or the destination exists (without REPLACE).
pub fn copy(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (from, to) = (&args[1], &args[2]);
    let mut target = None;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        if is(&args[i], "replace") {
            replace = true;
            i += 1;
        } else if is(&args[i], "db") && i + 1 < args.len() {
            if session.context.cluster.is_some() {
                return reply
                    .error("ERR Copying to another database is not allowed in cluster mode");
            }
            match other_database(session, &args[i + 1], "copy") {
                Ok(found) => target = Some(found),
                Err(error) => return reply.error(&error),
            }
            i += 2;
        } else {
            return reply.error(errors::SYNTAX);
        }
    }
    let same_database = target
        .as_ref()
        .is_none_or(|(database, _)| *database == session.database);
    if same_database && from == to {
        return reply.error("ERR source and destination objects are the same");
    }
    let entry = match session.cache.get_entry(from) {
        Ok(Some(entry)) => entry,
        Ok(None) => return reply.integer(0),
        Err(error) => return cache_error(reply, &error),
    };
    let target = target.map_or_else(|| session.cache.clone(), |(_, cache)| cache);
    match copy_entry(session, &target, &entry, to, replace) {
        Ok(true) => {
            if same_database && entry.structure().is_some() {
                super::lists::signal_stored(session, to);
            }
            reply.integer(1);
        }
        Ok(false) => reply.integer(0),
        Err(error) => cache_error(reply, &error),
    }
}

/// `MOVE key db`: 1 if moved, 0 if the key is missing here or exists there.
pub fn move_(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if session.context.cluster.is_some() {
        return reply.error("ERR MOVE is not allowed in cluster mode");
    }
    let (database, target) = match other_database(session, &args[2], "move") {
        Ok(found) => found,
        Err(error) => return reply.error(&error),
    };
    if database == session.database {
        return reply.error("ERR source and destination objects are the same");
    }
    let key = &args[1];
    let entry = match session.cache.get_entry(key) {
        Ok(Some(entry)) => entry,
        Ok(None) => return reply.integer(0),
        Err(error) => return cache_error(reply, &error),
    };
    match copy_entry(session, &target, &entry, key, false) {
        Ok(true) => {}
        Ok(false) => return reply.integer(0),
        Err(error) => return cache_error(reply, &error),
    }
    if let Err(error) =
        session
            .cache
            .remove_if_version(key, entry.version(), &WriteOptions::default())
    {
        return cache_error(reply, &error);
    }
    reply.integer(1);
}

/// `SWAPDB index1 index2`: every client of one database sees the other's keys from now on,
/// atomically (it runs alone, as EXEC does), and clients blocked on keys of either look
/// again. The exchange is kept across restarts (see [`crate::resp::databases`]).
pub fn swapdb(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if session.context.cluster.is_some() {
        return reply.error("ERR SWAPDB is not allowed in cluster mode");
    }
    // Redis reads each index as a C int, naming which one it could not read.
    let index =
        |raw: &[u8]| weft_resp::parse_i64_strict(raw).filter(|index| i32::try_from(*index).is_ok());
    let Some(first) = index(&args[1]) else {
        return reply.error("ERR invalid first DB index");
    };
    let Some(second) = index(&args[2]) else {
        return reply.error("ERR invalid second DB index");
    };
    let mut caches = Vec::with_capacity(2);
    for database in [first, second] {
        let cache = u32::try_from(database)
            .ok()
            .and_then(|database| super::connection::database_cache(session, database));
        match cache {
            Some(cache) => caches.push(cache),
            None => return reply.error("ERR DB index is out of range"),
        }
    }
    let (Ok(first), Ok(second)) = (u32::try_from(first), u32::try_from(second)) else {
        return reply.error("ERR DB index is out of range");
    };
    let context = &session.context;
    context.manager.swap_resp_databases(first, second);
    if let Some(path) = &context.resp_swaps_file
        && let Err(error) = crate::resp::databases::save(path, &context.manager)
    {
        // Undone, so that what clients see is what a restart will show.
        context.manager.swap_resp_databases(first, second);
        tracing::warn!(%error, "SWAPDB not kept");
        return reply.error(&format!("ERR SWAPDB could not be kept: {error}"));
    }
    for cache in &caches {
        context.list_waiters.signal_cache(cache.name());
    }
    session.follow_swapdb();
    reply.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves SCAN cursors parse like Redis' strtoul: signs, wrap-around, and refusals.
    #[test]
    fn cursors() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"17"), Some(17));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+3"), Some(3));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1 "), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"1.5"), None);
    }

    // Proves SCAN options: defaults, COUNT bounds, MATCH `*` dropped, TYPE filter, syntax.
    #[test]
    fn scan_options() {
        let parse = |text: &str| {
            let args: Vec<Bytes> = if text.is_empty() {
                Vec::new()
            } else {
                text.split(' ')
                    .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                    .collect()
            };
            ScanOptions::parse(&args).map(|o| {
                let string = o.type_name.as_deref().is_none_or(|t| t == "string");
                (o.count, o.pattern.map(<[u8]>::to_vec), string)
            })
        };
        assert_eq!(parse(""), Ok((10, None, true)));
        assert_eq!(
            parse("count 5 match a*"),
            Ok((5, Some(b"a*".to_vec()), true))
        );
        assert_eq!(parse("MATCH *"), Ok((10, None, true)));
        assert_eq!(parse("TYPE String"), Ok((10, None, true)));
        assert_eq!(parse("TYPE hash"), Ok((10, None, false)));
        assert_eq!(parse("COUNT 0"), Err(errors::SYNTAX));
        assert_eq!(parse("COUNT x"), Err(errors::NOT_INTEGER));
        assert_eq!(parse("COUNT"), Err(errors::SYNTAX));
        assert_eq!(parse("LIMIT 5"), Err(errors::SYNTAX));
    }
}
