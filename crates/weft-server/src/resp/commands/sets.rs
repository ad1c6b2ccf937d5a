//! Set commands: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SINTER
//! SUNION SDIFF and their STORE forms, SINTERCARD, SMOVE, SSCAN.
//!
//! Arguments are checked in the order Redis 7.0 checks them (`t_set.c`), so the same bad
//! request gets the same error. Replies follow Redis' orders where Redis has one: an intset
//! (small set of integers) answers in ascending order, and so do results that Redis builds
//! as an intset (SUNION, SDIFF, whole-set SPOP).
//!
//! Multi-key commands look every key up first, then lock the sets together
//! ([`with_structures`]) so they see one consistent state, and write a destination only
//! after letting go (`collections` lock order).

use std::sync::Arc;

use bytes::Bytes;
use weft_core::structure::SetValue;
use weft_core::{Structure, StructureCell};

use super::collections::{self, Failure, ScanOptions, scan_cursor, scan_reply};
use super::keys::random_below;
use super::{arg_i64, errors, is};
use crate::resp::{Reply, Session};

/// SPOP's `SPOP_MOVE_STRATEGY_MUL`: past `count > remaining × 5` Redis rebuilds the set
/// from the members it keeps instead of popping one by one.
const SPOP_MOVE_STRATEGY_MUL: usize = 5;
/// SRANDMEMBER/HRANDFIELD/ZRANDMEMBER's `*_SUB_STRATEGY_MUL`: past `count × 3 > size`
/// Redis copies the collection and removes random elements instead of sampling.
pub(crate) const RANDOM_SUB_STRATEGY_MUL: usize = 3;
/// Redis' error for a count below `-LONG_MAX` (`getRangeLongFromObjectOrReply`).
pub(crate) const COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// Redis' error for a count that must not be negative (`getPositiveLongFromObjectOrReply`).
pub(crate) const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

pub(crate) fn count_reply(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

/// Looks up every key, then locks the distinct structures among them together and runs
/// `f` on them in key order (`None` for a missing key). A key holding a string is
/// WRONGTYPE; `f` checks the structures' kinds.
///
/// Locks are taken in address order, and no cache lock is taken while they are held, so
/// two multi-key readers never wait on each other and writers (segment lock, then one
/// cell) never wait on them for long.
///
/// # Errors
/// WRONGTYPE for a string, or a cache failure.
pub(crate) fn with_structures<R>(
    session: &Session,
    keys: &[Bytes],
    f: impl FnOnce(&[Option<&Structure>]) -> R,
) -> Result<R, Failure> {
    let mut cells: Vec<Option<Arc<StructureCell>>> = Vec::with_capacity(keys.len());
    for key in keys {
        match session.cache.get_entry(key)? {
            None => cells.push(None),
            Some(entry) => match entry.structure() {
                Some(cell) => cells.push(Some(Arc::clone(cell))),
                None => return Err(Failure::WrongType),
            },
        }
    }
    let address = |cell: &Arc<StructureCell>| Arc::as_ptr(cell) as usize;
    let mut distinct: Vec<&Arc<StructureCell>> = cells.iter().flatten().collect();
    distinct.sort_by_key(|cell| address(cell));
    distinct.dedup_by_key(|cell| address(cell));
    let guards: Vec<_> = distinct.iter().map(|cell| cell.lock()).collect();
    let structures: Vec<Option<&Structure>> = cells
        .iter()
        .map(|cell| {
            let cell = cell.as_ref()?;
            let at = distinct
                .binary_search_by_key(&address(cell), |c| address(c))
                .ok()?;
            guards.get(at).map(|guard| &**guard)
        })
        .collect();
    Ok(f(&structures))
}

/// The sets among `structures`; WRONGTYPE if any is another kind.
fn as_sets<'s>(structures: &[Option<&'s Structure>]) -> Result<Vec<Option<&'s SetValue>>, Failure> {
    structures
        .iter()
        .map(|structure| match structure {
            None => Ok(None),
            Some(Structure::Set(set)) => Ok(Some(set)),
            Some(_) => Err(Failure::WrongType),
        })
        .collect()
}

/// `SADD key member [member ...]`: the number added.
pub fn sadd(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    let result = collections::write::<SetValue, _>(session, &args[1], true, |set| {
        let added = members.iter().filter(|member| set.add(member)).count();
        (added, added > 0)
    });
    match result {
        Ok(added) => count_reply(reply, added.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `SREM key member [member ...]`: the number removed.
pub fn srem(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    let result = collections::write::<SetValue, _>(session, &args[1], false, |set| {
        let removed = members.iter().filter(|member| set.remove(member)).count();
        (removed, removed > 0)
    });
    match result {
        Ok(removed) => count_reply(reply, removed.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `SMEMBERS key`: a set in RESP3.
pub fn smembers(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    collections::read_or_reply::<SetValue, _>(session, &args[1], reply, |set, reply| {
        let Some(set) = set else {
            return reply.set(0);
        };
        reply.set(set.len());
        for member in set.iter() {
            reply.bulk(member);
        }
    });
}

/// `SISMEMBER key member`
pub fn sismember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<SetValue, _>(session, &args[1], |set| {
        set.is_some_and(|set| set.contains(&args[2]))
    }) {
        Ok(found) => reply.integer(i64::from(found)),
        Err(failure) => failure.reply(reply),
    }
}

/// `SMISMEMBER key member [member ...]`
pub fn smismember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    collections::read_or_reply::<SetValue, _>(session, &args[1], reply, |set, reply| {
        reply.array(members.len());
        for member in members {
            reply.integer(i64::from(set.is_some_and(|set| set.contains(member))));
        }
    });
}

/// `SCARD key`
pub fn scard(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<SetValue, _>(session, &args[1], |set| set.map_or(0, SetValue::len)) {
        Ok(len) => count_reply(reply, len),
        Err(failure) => failure.reply(reply),
    }
}

/// `SPOP key [count]`: random members, removed. Without a count a bulk string; with one a
/// set, as Redis (whole set when `count` reaches its size, else one by one, or by
/// rebuilding the set from the members kept when few remain).
pub fn spop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() > 3 {
        return reply.error(errors::SYNTAX);
    }
    let Some(count) = args.get(2) else {
        let result = collections::write::<SetValue, _>(session, &args[1], false, |set| {
            let popped = set.pop_random(random_below);
            let changed = popped.is_some();
            (popped, changed)
        });
        return match result {
            Ok(Some(Some(member))) => reply.bulk(&member),
            Ok(_) => reply.null(),
            Err(failure) => failure.reply(reply),
        };
    };
    let Some(count) = weft_resp::parse_i64_strict(count).and_then(|n| usize::try_from(n).ok())
    else {
        return reply.error(NOT_POSITIVE);
    };
    let result = collections::write::<SetValue, _>(session, &args[1], false, |set| {
        let size = set.len();
        if count == 0 {
            return (Vec::new(), false);
        }
        if count >= size {
            // Redis answers through SUNION of the set: in the order of the set it builds.
            let all: Vec<Bytes> = combine(&[Some(&*set)], Algebra::Union)
                .iter()
                .cloned()
                .collect();
            *set = SetValue::default();
            return (all, true);
        }
        let remaining = size - count;
        if remaining * SPOP_MOVE_STRATEGY_MUL > count {
            let popped: Vec<Bytes> = (0..count)
                .filter_map(|_| set.pop_random(random_below))
                .collect();
            return (popped, true);
        }
        let mut kept = SetValue::default();
        for _ in 0..remaining {
            if let Some(member) = set.pop_random(random_below) {
                kept.insert(member);
            }
        }
        let popped: Vec<Bytes> = set.iter().cloned().collect();
        *set = kept;
        (popped, true)
    });
    match result {
        Ok(popped) => {
            let popped = popped.unwrap_or_default();
            reply.set(popped.len());
            for member in &popped {
                reply.bulk(member);
            }
        }
        Err(failure) => failure.reply(reply),
    }
}

/// A random-count argument (`SRANDMEMBER`, `HRANDFIELD`, `ZRANDMEMBER`): an integer in
/// `-i64::MAX..=i64::MAX`.
pub(crate) fn parse_random_count(arg: &[u8]) -> Result<i64, &'static str> {
    match weft_resp::parse_i64_strict(arg) {
        Some(i64::MIN) => Err(COUNT_RANGE),
        Some(count) => Ok(count),
        None => Err(errors::NOT_INTEGER),
    }
}

/// Which elements a positive random count picks out of `len` (Redis' cases 2 to 4): all
/// of them in order (`None`), or these distinct indexes (random order).
pub(crate) fn distinct_picks(len: usize, count: usize) -> Option<Vec<usize>> {
    if count >= len {
        return None;
    }
    if count * RANDOM_SUB_STRATEGY_MUL > len {
        // Few left out: shuffle the first `count` places of all the indexes.
        let mut indexes: Vec<usize> = (0..len).collect();
        for i in 0..count {
            let j = i + random_below(len - i);
            indexes.swap(i, j);
        }
        indexes.truncate(count);
        return Some(indexes);
    }
    // Few taken: sample until enough distinct ones.
    let mut taken = std::collections::HashSet::with_capacity(count);
    let mut indexes = Vec::with_capacity(count);
    while indexes.len() < count {
        let index = random_below(len);
        if taken.insert(index) {
            indexes.push(index);
        }
    }
    Some(indexes)
}

/// `SRANDMEMBER key [count]`: random members; a negative count may repeat them.
pub fn srandmember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() > 3 {
        return reply.error(errors::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match parse_random_count(arg) {
            Ok(count) => Some(count),
            Err(text) => return reply.error(text),
        },
    };
    collections::read_or_reply::<SetValue, _>(session, &args[1], reply, |set, reply| {
        let Some(count) = count else {
            return match set.and_then(|set| set.random(random_below)) {
                Some(member) => reply.bulk(member),
                None => reply.null(),
            };
        };
        let Some(set) = set else {
            return reply.array(0);
        };
        let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        if count < 0 || count == 1 {
            // Sampled with repetition, streamed: a huge count stops at the output limit
            // (the connection is then closed, as Redis closes it).
            reply.array(wanted);
            for _ in 0..wanted {
                if reply.overflowed() {
                    break;
                }
                if let Some(member) = set.random(random_below) {
                    reply.bulk(member);
                }
            }
            return;
        }
        let members: Vec<&Bytes> = set.iter().collect();
        match distinct_picks(members.len(), wanted) {
            None => {
                reply.array(members.len());
                for member in members {
                    reply.bulk(member);
                }
            }
            Some(picks) => {
                reply.array(picks.len());
                for pick in picks {
                    reply.bulk(members[pick]);
                }
            }
        }
    });
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

/// SINTER's members, in the iteration order of the smallest set (Redis' reply order); an
/// empty result if any key is missing.
fn intersection<'s>(sets: &[Option<&'s SetValue>]) -> Vec<&'s Bytes> {
    let Some(mut sets) = sets.iter().copied().collect::<Option<Vec<&SetValue>>>() else {
        return Vec::new();
    };
    sets.sort_by_key(|set| set.len());
    let Some((smallest, others)) = sets.split_first() else {
        return Vec::new();
    };
    smallest
        .iter()
        .filter(|member| {
            others
                .iter()
                .all(|set| std::ptr::eq(*set, *smallest) || set.contains(member))
        })
        .collect()
}

/// The result of an algebra command as the set Redis builds (an intset while it can be).
fn combine(sets: &[Option<&SetValue>], algebra: Algebra) -> SetValue {
    let mut result = SetValue::default();
    match algebra {
        Algebra::Inter => {
            for member in intersection(sets) {
                result.insert(member.clone());
            }
        }
        Algebra::Union => {
            for set in sets.iter().flatten() {
                for member in set.iter() {
                    result.add(member);
                }
            }
        }
        Algebra::Diff => {
            if let Some((Some(first), others)) = sets.split_first() {
                for member in first.iter() {
                    if !others.iter().flatten().any(|set| set.contains(member)) {
                        result.insert(member.clone());
                    }
                }
            }
        }
    }
    result
}

fn algebra(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, algebra: Algebra) {
    let members = with_structures(session, &args[1..], |structures| {
        let sets = as_sets(structures)?;
        Ok::<_, Failure>(match algebra {
            Algebra::Inter => intersection(&sets).into_iter().cloned().collect(),
            _ => combine(&sets, algebra)
                .iter()
                .cloned()
                .collect::<Vec<Bytes>>(),
        })
    });
    match members.and_then(|members| members) {
        Ok(members) => {
            reply.set(members.len());
            for member in &members {
                reply.bulk(member);
            }
        }
        Err(failure) => failure.reply(reply),
    }
}

fn algebra_store(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, algebra: Algebra) {
    let result = with_structures(session, &args[2..], |structures| {
        Ok::<_, Failure>(combine(&as_sets(structures)?, algebra))
    });
    let result = match result.and_then(|result| result) {
        Ok(result) => result,
        Err(failure) => return failure.reply(reply),
    };
    let len = result.len();
    match collections::replace(session, &args[1], Structure::Set(result)) {
        Ok(()) => count_reply(reply, len),
        Err(failure) => failure.reply(reply),
    }
}

/// `SINTER key [key ...]`
pub fn sinter(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Algebra::Inter);
}

/// `SUNION key [key ...]`
pub fn sunion(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Algebra::Union);
}

/// `SDIFF key [key ...]`
pub fn sdiff(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Algebra::Diff);
}

/// `SINTERSTORE destination key [key ...]`
pub fn sinterstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra_store(session, args, reply, Algebra::Inter);
}

/// `SUNIONSTORE destination key [key ...]`
pub fn sunionstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra_store(session, args, reply, Algebra::Union);
}

/// `SDIFFSTORE destination key [key ...]`
pub fn sdiffstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra_store(session, args, reply, Algebra::Diff);
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`
pub fn sintercard(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    const NUMKEYS: &str = "ERR numkeys should be greater than 0";
    let numkeys = match arg_i64(args, 1) {
        Some(n) if n >= 1 => usize::try_from(n).unwrap_or(usize::MAX),
        _ => return reply.error(NUMKEYS),
    };
    if numkeys > args.len() - 2 {
        return reply.error("ERR Number of keys can't be greater than number of args");
    }
    let keys = &args[2..2 + numkeys];
    let mut limit = 0usize;
    let mut index = 2 + numkeys;
    while index < args.len() {
        if is(&args[index], "LIMIT") && index + 1 < args.len() {
            match weft_resp::parse_i64_strict(&args[index + 1]) {
                Some(n) if n >= 0 => limit = usize::try_from(n).unwrap_or(usize::MAX),
                _ => return reply.error("ERR LIMIT can't be negative"),
            }
            index += 2;
        } else {
            return reply.error(errors::SYNTAX);
        }
    }
    let result = with_structures(session, keys, |structures| {
        let sets = as_sets(structures)?;
        let members = intersection(&sets).len();
        Ok::<_, Failure>(if limit > 0 {
            members.min(limit)
        } else {
            members
        })
    });
    match result.and_then(|result| result) {
        Ok(count) => count_reply(reply, count),
        Err(failure) => failure.reply(reply),
    }
}

/// `SMOVE source destination member`
pub fn smove(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (source, destination, member) = (&args[1], &args[2], &args[3]);
    // As Redis: a missing source answers 0 (whatever the destination holds), then both
    // types are checked.
    match session.cache.get_entry(source) {
        Ok(None) => return reply.integer(0),
        Ok(Some(_)) => {}
        Err(error) => return Failure::Cache(error).reply(reply),
    }
    let present = with_structures(session, &args[1..3], |structures| match structures {
        [None, _] => Ok(None),
        [Some(Structure::Set(from)), None | Some(Structure::Set(_))] => {
            Ok(Some(from.contains(member)))
        }
        _ => Err(Failure::WrongType),
    });
    let present = match present.and_then(|present| present) {
        Ok(Some(present)) => present,
        Ok(None) => return reply.integer(0),
        Err(failure) => return failure.reply(reply),
    };
    if source == destination {
        return reply.integer(i64::from(present));
    }
    let removed = collections::write::<SetValue, _>(session, source, false, |set| {
        let removed = set.remove(member);
        (removed, removed)
    });
    match removed {
        Ok(Some(true)) => {}
        Ok(_) => return reply.integer(0),
        Err(failure) => return failure.reply(reply),
    }
    let added = collections::write::<SetValue, _>(session, destination, true, |set| {
        let added = set.add(member);
        ((), added)
    });
    match added {
        Ok(_) => reply.integer(1),
        Err(failure) => failure.reply(reply),
    }
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`: an intset whole, a large set one step
/// of a resumable cursor (see `weft_core::structure`: every member present for the whole
/// scan is returned at least once).
pub fn sscan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let cursor = match scan_cursor(args) {
        Ok(cursor) => cursor,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SetValue, _>(session, &args[1], reply, |set, reply| {
        let Some(set) = set else {
            return scan_reply(reply, 0, &[]);
        };
        let options = match ScanOptions::parse(args) {
            Ok(options) => options,
            Err(text) => return reply.error(text),
        };
        let mut items: Vec<&[u8]> = Vec::new();
        let next = set.scan(cursor, options.count, |member| {
            if options.wanted(member) {
                items.push(member);
            }
        });
        scan_reply(reply, next, &items);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves positive random counts pick distinct indexes, all of them past the size.
    #[test]
    fn distinct_picks_are_distinct() {
        assert_eq!(distinct_picks(5, 5), None);
        assert_eq!(distinct_picks(5, 50), None);
        for (len, count) in [(10, 9), (10, 3), (1000, 5), (1000, 400)] {
            let mut picks = distinct_picks(len, count).expect("fewer than the size");
            assert_eq!(picks.len(), count);
            picks.sort_unstable();
            picks.dedup();
            assert_eq!(picks.len(), count);
            assert!(picks.iter().all(|&i| i < len));
        }
    }

    // Proves random counts accept the whole i64 range but i64::MIN, with Redis' errors.
    #[test]
    fn random_counts_parse_like_redis() {
        assert_eq!(parse_random_count(b"-5"), Ok(-5));
        assert_eq!(parse_random_count(b"-9223372036854775807"), Ok(-i64::MAX));
        assert_eq!(
            parse_random_count(b"-9223372036854775808"),
            Err(COUNT_RANGE)
        );
        assert_eq!(parse_random_count(b"1.5"), Err(errors::NOT_INTEGER));
        assert_eq!(parse_random_count(b" 1"), Err(errors::NOT_INTEGER));
    }

    // Proves scan options parse as Redis': COUNT at least 1, MATCH *, pairs only.
    #[test]
    fn scan_options() {
        let args = |rest: &[&str]| -> Vec<Bytes> {
            ["SSCAN", "k", "0"]
                .iter()
                .chain(rest)
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect()
        };
        let parsed = args(&["count", "5", "MATCH", "a*"]);
        let options = ScanOptions::parse(&parsed).expect("valid");
        assert_eq!(options.count, 5);
        assert!(options.wanted(b"abc") && !options.wanted(b"b"));
        let star = args(&["MATCH", "*"]);
        assert!(ScanOptions::parse(&star).expect("valid").pattern.is_none());
        for (bad, error) in [
            (args(&["COUNT", "0"]), errors::SYNTAX),
            (args(&["COUNT", "x"]), errors::NOT_INTEGER),
            (args(&["COUNT"]), errors::SYNTAX),
            (args(&["NOVALUES"]), errors::SYNTAX),
        ] {
            assert_eq!(ScanOptions::parse(&bad).err(), Some(error));
        }
    }
}
