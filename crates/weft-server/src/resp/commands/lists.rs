//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LRANGE LINDEX LLEN LSET LREM LTRIM
//! LINSERT LPOS LMOVE RPOPLPUSH LMPOP, and the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH
//! BLMPOP.
//!
//! Pushes and pops are O(1) on the list's deque, changed in place under the key's segment
//! lock (`collections::write`). Pushed elements are copied out of the request buffer: a
//! slice of it would keep the whole read buffer alive for as long as the element lives.
//!
//! A blocking command first runs as its non-blocking form; when every key is empty it leaves
//! a [`Block`] on the session, and the connection loop queues the client on its keys
//! ([`Waiters`]), then waits for a push, the timeout, the client leaving or the server
//! stopping, and runs the command again with a [`Retry`] on the session. Inside MULTI
//! ([`Session::in_transaction`]) they do not block, as in Redis.

mod waiters;

use std::borrow::Cow;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use weft_core::structure::ListValue;

pub use waiters::{Block, Retry, TimeoutReply, Waiters};

use super::collections::{self, Failure};
use super::{arg_i64, errors, is};
use crate::resp::{Reply, Session};

/// Which end of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Left,
    Right,
}

impl End {
    fn parse(arg: &[u8]) -> Option<Self> {
        if is(arg, "LEFT") {
            Some(Self::Left)
        } else if is(arg, "RIGHT") {
            Some(Self::Right)
        } else {
            None
        }
    }

    fn pop(self, list: &mut ListValue) -> Option<Bytes> {
        match self {
            Self::Left => list.pop_front(),
            Self::Right => list.pop_back(),
        }
    }

    fn push(self, list: &mut ListValue, item: Bytes) {
        match self {
            Self::Left => list.push_front(item),
            Self::Right => list.push_back(item),
        }
    }

    /// Pops up to `count` items, in popping order.
    fn pop_many(self, list: &mut ListValue, count: usize) -> Vec<Bytes> {
        let take = count.min(list.len());
        let mut items = Vec::with_capacity(take);
        items.extend((0..take).filter_map(|_| self.pop(list)));
        items
    }
}

/// An element as a list keeps it: its own allocation, not a slice of the request buffer.
fn owned(item: &[u8]) -> Bytes {
    Bytes::copy_from_slice(item)
}

fn len_reply(reply: &mut Reply<'_>, len: usize) {
    reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
}

/// Redis' start/stop normalisation: negative indexes count from the end; the result is an
/// inclusive range within `0..len`, or `None` when empty.
fn range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        start.saturating_add(len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop.saturating_add(len)
    } else {
        stop
    };
    if start > stop || start >= len {
        return None;
    }
    let stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// The list position of a possibly negative index.
fn position(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 {
        index.saturating_add(len)
    } else {
        index
    };
    if (0..len).contains(&index) {
        usize::try_from(index).ok()
    } else {
        None
    }
}

/// Items were pushed onto `key`: wakes the oldest client blocked on it.
fn signal(session: &Session, key: &[u8]) {
    session
        .context
        .list_waiters
        .signal(session.cache.name(), key);
}

/// A list was stored at `key` by another command (RENAME): wakes a client blocked on it, as
/// Redis' `dbAdd` does.
pub fn signal_stored(session: &Session, key: &[u8]) {
    signal(session, key);
}

// ---------------------------------------------------------------------------------------
// Pushes.

fn push(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, end: End, only_existing: bool) {
    let key = &args[1];
    let items = &args[2..];
    let result = collections::write::<ListValue, _>(session, key, !only_existing, |list| {
        for item in items {
            end.push(list, owned(item));
        }
        (list.len(), true)
    });
    match result {
        Ok(Some(len)) => {
            signal(session, key);
            len_reply(reply, len);
        }
        Ok(None) => reply.integer(0),
        Err(failure) => failure.reply(reply),
    }
}

/// `LPUSH key element [element ...]`
pub fn lpush(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    push(session, args, reply, End::Left, false);
}

/// `RPUSH key element [element ...]`
pub fn rpush(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    push(session, args, reply, End::Right, false);
}

/// `LPUSHX key element [element ...]`: only onto an existing list.
pub fn lpushx(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    push(session, args, reply, End::Left, true);
}

/// `RPUSHX key element [element ...]`: only onto an existing list.
pub fn rpushx(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    push(session, args, reply, End::Right, true);
}

// ---------------------------------------------------------------------------------------
// Pops.

/// Redis' positive count argument (`getPositiveLongFromObjectOrReply`).
fn positive_count(arg: &[u8]) -> Result<usize, &'static str> {
    const MESSAGE: &str = "ERR value is out of range, must be positive";
    let count = weft_resp::parse_i64_strict(arg).ok_or(MESSAGE)?;
    usize::try_from(count).map_err(|_| MESSAGE)
}

fn pop(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, end: End) {
    if args.len() > 3 {
        let name = if end == End::Left { "lpop" } else { "rpop" };
        return reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let key = &args[1];
    let Some(count) = args.get(2) else {
        // The common form, without a count: no vector, one item.
        let result = collections::write::<ListValue, _>(session, key, false, |list| {
            let item = end.pop(list);
            let changed = item.is_some();
            (item, changed)
        });
        return match result {
            Ok(Some(Some(item))) => reply.bulk(&item),
            Ok(_) => reply.null(),
            Err(failure) => failure.reply(reply),
        };
    };
    let count = match positive_count(count) {
        Ok(count) => count,
        Err(text) => return reply.error(text),
    };
    let result = collections::write::<ListValue, _>(session, key, false, |list| {
        let items = end.pop_many(list, count);
        let changed = !items.is_empty();
        (items, changed)
    });
    match result {
        Err(failure) => failure.reply(reply),
        Ok(None) => reply.null_array(),
        Ok(Some(items)) => {
            reply.array(items.len());
            for item in &items {
                reply.bulk(item);
            }
        }
    }
}

/// `LPOP key [count]`
pub fn lpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    pop(session, args, reply, End::Left);
}

/// `RPOP key [count]`
pub fn rpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    pop(session, args, reply, End::Right);
}

// ---------------------------------------------------------------------------------------
// Reads.

/// `LLEN key`
pub fn llen(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<ListValue, _>(session, &args[1], |list| {
        list.map_or(0, ListValue::len)
    }) {
        Ok(len) => len_reply(reply, len),
        Err(failure) => failure.reply(reply),
    }
}

/// `LRANGE key start stop`
pub fn lrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(start), Some(stop)) = (arg_i64(args, 2), arg_i64(args, 3)) else {
        return reply.error(errors::NOT_INTEGER);
    };
    collections::read_or_reply::<ListValue, _>(session, &args[1], reply, |list, reply| {
        let Some(list) = list else {
            return reply.array(0);
        };
        match range(start, stop, list.len()) {
            None => reply.array(0),
            Some((from, to)) => {
                reply.array(to - from + 1);
                for item in list.range(from, to + 1) {
                    reply.bulk(item);
                }
            }
        }
    });
}

/// `LINDEX key index`
///
/// As Redis: a missing key answers nil before the index is even parsed.
pub fn lindex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let index = arg_i64(args, 2);
    collections::read_or_reply::<ListValue, _>(session, &args[1], reply, |list, reply| {
        let Some(list) = list else {
            return reply.null();
        };
        let Some(index) = index else {
            return reply.error(errors::NOT_INTEGER);
        };
        match position(index, list.len()).and_then(|at| list.get(at)) {
            Some(item) => reply.bulk(item),
            None => reply.null(),
        }
    });
}

/// `LPOS`'s options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LposOptions {
    /// Matches to pass over before reporting (RANK's magnitude minus one).
    skip: u64,
    /// RANK was negative: scan from the tail.
    from_tail: bool,
    /// COUNT (`Some(0)`: all); `None` answers one position rather than an array.
    count: Option<usize>,
    /// COUNT's stop never comes: Redis' `matches-rank+1 >= count` overflows for
    /// `RANK -9223372036854775808`, whose negation is itself, so every match is reported.
    count_unbounded: bool,
    /// MAXLEN: elements compared at most (0: all).
    maxlen: usize,
}

impl LposOptions {
    /// Parses `[RANK rank] [COUNT num-matches] [MAXLEN len]` in Redis' order of checks.
    fn parse(args: &[Bytes]) -> Result<Self, &'static str> {
        let mut rank: i64 = 1;
        let mut count = None;
        let mut maxlen = 0;
        let mut index = 0;
        while index < args.len() {
            let option = &args[index];
            let value = args.get(index + 1);
            match value {
                Some(value) if is(option, "RANK") => {
                    rank = weft_resp::parse_i64_strict(value).ok_or(errors::NOT_INTEGER)?;
                    if rank == 0 {
                        return Err(
                            "ERR RANK can't be zero: use 1 to start from the first match, 2 \
                             from the second ... or use negative to start from the end of the \
                             list",
                        );
                    }
                }
                Some(value) if is(option, "COUNT") => {
                    count = Some(non_negative(value, "ERR COUNT can't be negative")?);
                }
                Some(value) if is(option, "MAXLEN") => {
                    maxlen = non_negative(value, "ERR MAXLEN can't be negative")?;
                }
                _ => return Err(errors::SYNTAX),
            }
            index += 2;
        }
        Ok(Self {
            skip: if rank == i64::MIN {
                0
            } else {
                rank.unsigned_abs() - 1
            },
            from_tail: rank < 0,
            count,
            count_unbounded: rank == i64::MIN,
            maxlen,
        })
    }
}

/// Redis' `getPositiveLongFromObjectOrReply` with a message of its own, which it gives for
/// a value that is not an integer too.
fn non_negative(arg: &[u8], message: &'static str) -> Result<usize, &'static str> {
    let value = weft_resp::parse_i64_strict(arg).ok_or(message)?;
    usize::try_from(value).map_err(|_| message)
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
pub fn lpos(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let options = match LposOptions::parse(&args[3..]) {
        Ok(options) => options,
        Err(text) => return reply.error(text),
    };
    let element = &args[2];
    collections::read_or_reply::<ListValue, _>(session, &args[1], reply, |list, reply| {
        let mut found: Vec<usize> = Vec::new();
        if let Some(list) = list {
            let wanted = match options.count {
                _ if options.count_unbounded => usize::MAX,
                Some(0) => usize::MAX,
                Some(n) => n,
                None => 1,
            };
            let mut skip = options.skip;
            let limit = if options.maxlen == 0 {
                usize::MAX
            } else {
                options.maxlen
            };
            let mut visit = |at: usize, item: &Bytes| {
                if item == element {
                    if skip > 0 {
                        skip -= 1;
                    } else {
                        found.push(at);
                    }
                }
                found.len() < wanted
            };
            if options.from_tail {
                let len = list.len();
                for (back, item) in list.iter().rev().enumerate().take(limit) {
                    if !visit(len - 1 - back, item) {
                        break;
                    }
                }
            } else {
                for (at, item) in list.iter().enumerate().take(limit) {
                    if !visit(at, item) {
                        break;
                    }
                }
            }
        }
        match options.count {
            None => match found.first() {
                Some(&at) => len_reply(reply, at),
                None => reply.null(),
            },
            Some(_) => {
                reply.array(found.len());
                for at in found {
                    len_reply(reply, at);
                }
            }
        }
    });
}

// ---------------------------------------------------------------------------------------
// Changes in the middle.

/// `LSET key index element`
///
/// As Redis: the key is looked up (no such key, WRONGTYPE) before the index is parsed.
pub fn lset(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let index = arg_i64(args, 2);
    let item = &args[3];
    let result = collections::write::<ListValue, _>(session, &args[1], false, |list| {
        let Some(index) = index else {
            return (Err(errors::NOT_INTEGER), false);
        };
        match position(index, list.len()) {
            Some(at) => {
                list.set(at, owned(item));
                (Ok(()), true)
            }
            None => (Err("ERR index out of range"), false),
        }
    });
    match result {
        Ok(Some(Ok(()))) => reply.ok(),
        Ok(Some(Err(text))) => reply.error(text),
        Ok(None) => reply.error("ERR no such key"),
        Err(failure) => failure.reply(reply),
    }
}

/// `LREM key count element`: the first `count` matches from the head (from the tail when
/// negative, all when 0), in O(n).
pub fn lrem(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(count) = arg_i64(args, 2) else {
        return reply.error(errors::NOT_INTEGER);
    };
    let element = &args[3];
    let result = collections::write::<ListValue, _>(session, &args[1], false, |list| {
        let matches = list.iter().filter(|item| *item == element).count();
        if matches == 0 {
            return (0, false);
        }
        let limit = if count == 0 {
            matches
        } else {
            usize::try_from(count.unsigned_abs()).map_or(matches, |limit| limit.min(matches))
        };
        // From the tail: the last `limit` matches go, the ones before them stay.
        let kept_first = if count < 0 { matches - limit } else { 0 };
        let (mut seen, mut removed) = (0usize, 0usize);
        list.retain(|item| {
            if item != element {
                return true;
            }
            seen += 1;
            if seen <= kept_first || removed == limit {
                return true;
            }
            removed += 1;
            false
        });
        (removed, removed > 0)
    });
    match result {
        Ok(removed) => len_reply(reply, removed.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `LTRIM key start stop`
pub fn ltrim(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(start), Some(stop)) = (arg_i64(args, 2), arg_i64(args, 3)) else {
        return reply.error(errors::NOT_INTEGER);
    };
    let result = collections::write::<ListValue, _>(session, &args[1], false, |list| {
        match range(start, stop, list.len()) {
            Some((from, to)) => list.retain_range(from, to + 1),
            None => list.retain_range(0, 0),
        }
        // Redis signals the key modified even when nothing was trimmed (WATCH sees it).
        ((), true)
    });
    match result {
        Ok(_) => reply.ok(),
        Err(failure) => failure.reply(reply),
    }
}

/// `LINSERT key BEFORE|AFTER pivot element`
pub fn linsert(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        return reply.error(errors::SYNTAX);
    };
    let (pivot, item) = (&args[3], &args[4]);
    let result = collections::write::<ListValue, _>(session, &args[1], false, |list| {
        let found = list.iter().position(|existing| existing == pivot);
        match found {
            Some(at) => {
                list.insert(if after { at + 1 } else { at }, owned(item));
                (i64::try_from(list.len()).unwrap_or(i64::MAX), true)
            }
            None => (-1, false),
        }
    });
    match result {
        Ok(Some(len)) => {
            if len > 0 {
                signal(session, &args[1]);
            }
            reply.integer(len);
        }
        Ok(None) => reply.integer(0),
        Err(failure) => failure.reply(reply),
    }
}

// ---------------------------------------------------------------------------------------
// Moves.

/// Pops from `source` at `from` and pushes onto `destination` at `to`, in Redis' order of
/// checks: a missing source answers nil, then a destination of another type is refused
/// before anything is popped.
///
/// One key: one write (a rotation), so the list is never deleted and keeps its TTL. Two keys:
/// a pop then a push, each atomic; a concurrent write may change the destination's type in
/// between, in which case the item goes back where it came from.
///
/// `retrying` (a blocked BLMOVE woken by a push): a source that is no longer a list is
/// passed over as empty — Redis serves blocked clients only from keys that are lists.
fn move_item(
    session: &Session,
    source: &[u8],
    destination: &[u8],
    from: End,
    to: End,
    retrying: bool,
) -> Result<Option<Bytes>, Failure> {
    match collections::read::<ListValue, _>(session, source, |list| list.is_some()) {
        Ok(true) => {}
        Ok(false) | Err(Failure::WrongType) if retrying => return Ok(None),
        Ok(false) => return Ok(None),
        Err(failure) => return Err(failure),
    }
    if source == destination {
        let moved = collections::write::<ListValue, _>(session, source, false, |list| {
            let item = from.pop(list);
            if let Some(item) = &item {
                to.push(list, item.clone());
            }
            let changed = item.is_some();
            (item, changed)
        })?;
        return Ok(moved.flatten());
    }
    collections::read::<ListValue, _>(session, destination, |_| ())?;
    let popped = collections::write::<ListValue, _>(session, source, false, |list| {
        let item = from.pop(list);
        let changed = item.is_some();
        (item, changed)
    })?
    .flatten();
    let Some(item) = popped else {
        return Ok(None);
    };
    let pushed = collections::write::<ListValue, _>(session, destination, true, |list| {
        to.push(list, item.clone());
        ((), true)
    });
    if let Err(failure) = pushed {
        // Put it back rather than lose it.
        let _ = collections::write::<ListValue, _>(session, source, true, |list| {
            from.push(list, item.clone());
            ((), true)
        });
        return Err(failure);
    }
    signal(session, destination);
    Ok(Some(item))
}

fn lmove_reply(result: Result<Option<Bytes>, Failure>, reply: &mut Reply<'_>) {
    match result {
        Ok(Some(item)) => reply.bulk(&item),
        Ok(None) => reply.null(),
        Err(failure) => failure.reply(reply),
    }
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`
pub fn lmove(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(from), Some(to)) = (End::parse(&args[3]), End::parse(&args[4])) else {
        return reply.error(errors::SYNTAX);
    };
    lmove_reply(
        move_item(session, &args[1], &args[2], from, to, false),
        reply,
    );
}

/// `RPOPLPUSH source destination`
pub fn rpoplpush(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    lmove_reply(
        move_item(session, &args[1], &args[2], End::Right, End::Left, false),
        reply,
    );
}

/// Parsed `numkeys key [key ...] LEFT|RIGHT [COUNT count]` (LMPOP, BLMPOP after its
/// timeout), checked in Redis' order.
fn parse_mpop(args: &[Bytes]) -> Result<(&[Bytes], End, usize), &'static str> {
    parse_mpop_with(args, |arg| End::parse(arg))
}

/// The arguments of an *MPOP command (LMPOP, ZMPOP and their blocking forms, after the
/// timeout): `numkeys key… WHERE [COUNT count]`, the end read by `end`.
pub(super) fn parse_mpop_with<E>(
    args: &[Bytes],
    end: impl Fn(&Bytes) -> Option<E>,
) -> Result<(&[Bytes], E, usize), &'static str> {
    let numkeys = weft_resp::parse_i64_strict(&args[0])
        .filter(|&numkeys| numkeys > 0)
        .ok_or("ERR numkeys should be greater than 0")?;
    let numkeys = usize::try_from(numkeys).map_err(|_| errors::SYNTAX)?;
    if numkeys >= args.len() {
        return Err(errors::SYNTAX);
    }
    let keys = &args[1..=numkeys];
    let rest = &args[numkeys + 1..];
    let end = rest.first().and_then(end).ok_or(errors::SYNTAX)?;
    let mut count = None;
    let mut index = 1;
    while index < rest.len() {
        match rest.get(index + 1) {
            Some(value) if count.is_none() && is(&rest[index], "COUNT") => {
                let parsed = weft_resp::parse_i64_strict(value)
                    .filter(|&n| n > 0)
                    .ok_or("ERR count should be greater than 0")?;
                count = Some(usize::try_from(parsed).map_err(|_| errors::SYNTAX)?);
                index += 2;
            }
            _ => return Err(errors::SYNTAX),
        }
    }
    Ok((keys, end, count.unwrap_or(1)))
}

/// Pops up to `count` items from the first non-empty list of `keys`. With `lenient` (a
/// retry), keys holding another type are passed over instead of refused.
fn mpop(
    session: &Session,
    keys: &[Bytes],
    end: End,
    count: usize,
    lenient: bool,
) -> Result<Option<(Bytes, Vec<Bytes>)>, Failure> {
    for key in keys {
        let popped = collections::write::<ListValue, _>(session, key, false, |list| {
            let items = end.pop_many(list, count);
            let changed = !items.is_empty();
            (items, changed)
        });
        match popped {
            Ok(Some(items)) if !items.is_empty() => return Ok(Some((key.clone(), items))),
            Ok(_) => {}
            Err(Failure::WrongType) if lenient => {}
            Err(failure) => return Err(failure),
        }
    }
    Ok(None)
}

fn mpop_reply(result: Result<Option<(Bytes, Vec<Bytes>)>, Failure>, reply: &mut Reply<'_>) {
    match result {
        Ok(Some((key, items))) => {
            reply.array(2);
            reply.bulk(&key);
            reply.array(items.len());
            for item in &items {
                reply.bulk(item);
            }
        }
        Ok(None) => reply.null_array(),
        Err(failure) => failure.reply(reply),
    }
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub fn lmpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match parse_mpop(&args[1..]) {
        Ok((keys, end, count)) => mpop_reply(mpop(session, keys, end, count, false), reply),
        Err(text) => reply.error(text),
    }
}

// ---------------------------------------------------------------------------------------
// Blocking forms.

/// What other blocking commands (BZPOPMIN, BZMPOP) share with the lists' blocking forms:
/// the timeout's parsing, the keys a retry tries, and blocking.
pub(super) mod blocking {
    pub(in crate::resp::commands) use super::{attempt_keys, block, may_block, parse_timeout};
}

const TIMEOUT_NOT_FLOAT: &str = "ERR timeout is not a float or out of range";
const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";

/// Redis' timeout argument (`getTimeoutFromObjectOrReply` in seconds): parsed as a C
/// `long double`, then `(long long) ceill(seconds * 1000.0)` — on x86-64 a value that does
/// not fit converts to `LLONG_MIN`, so `inf` or `1e400` are "negative" too. Returns the
/// milliseconds, 0 meaning forever.
pub(super) fn parse_timeout(arg: &[u8]) -> Result<u64, &'static str> {
    let seconds = weft_resp::LongDouble::parse(arg).ok_or(TIMEOUT_NOT_FLOAT)?;
    u64::try_from(x87_ceil_millis(seconds.to_bits())).map_err(|_| TIMEOUT_NEGATIVE)
}

/// `(long long) ceill(x * 1000.0L)` for the x87 80-bit value `bits`
/// ([`weft_resp::LongDouble::to_bits`]): the product rounded to 64 significant bits (ties to
/// even), rounded up to an integer, and `i64::MIN` when that does not fit (or `x` is not
/// finite), as `fistp` does.
fn x87_ceil_millis(bits: u128) -> i64 {
    const EXPONENT_BIAS: i64 = 16383;
    const FRACTION_BITS: i64 = 63;
    let negative = bits >> 79 & 1 == 1;
    let biased = i64::try_from(bits >> 64 & 0x7fff).unwrap_or(0);
    let significand = u64::try_from(bits & u128::from(u64::MAX)).unwrap_or(0);
    if biased == 0x7fff {
        return i64::MIN;
    }
    if significand == 0 {
        return 0;
    }
    // value = significand × 2^exponent (subnormals share the smallest normal exponent).
    let mut exponent = biased.max(1) - EXPONENT_BIAS - FRACTION_BITS;
    let mut product = u128::from(significand) * 1000;
    let width = 128 - i64::from(product.leading_zeros());
    if width > 64 {
        let shift = width - 64;
        let half = 1u128 << (shift - 1);
        let remainder = product & ((1u128 << shift) - 1);
        product >>= shift;
        exponent += shift;
        if remainder > half || (remainder == half && product & 1 == 1) {
            product += 1;
        }
    }
    // Beyond 2^63 in magnitude nothing fits (−2^63 itself converts to i64::MIN anyway).
    let (whole, fraction) = if exponent >= 0 {
        if 128 - i64::from(product.leading_zeros()) + exponent > 63 {
            return i64::MIN;
        }
        (product << exponent, false)
    } else {
        let shift = exponent.unsigned_abs();
        if shift >= 128 {
            (0, true)
        } else {
            (product >> shift, product & ((1u128 << shift) - 1) != 0)
        }
    };
    let Ok(whole) = i64::try_from(whole) else {
        return i64::MIN;
    };
    if negative {
        // ceil(−m) = −floor(m).
        -whole
    } else if fraction {
        whole.checked_add(1).unwrap_or(i64::MIN)
    } else {
        whole
    }
}

/// When a timeout of `millis` (0: none) given now runs out. Redis adds the wall clock in
/// milliseconds to it; a sum past `i64::MAX` wraps to a time its timer never reaches, so the
/// client waits forever, as it does here.
pub(crate) fn deadline_after(millis: u64) -> Option<Instant> {
    if millis == 0 {
        return None;
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
    if millis > i64::MAX.unsigned_abs().saturating_sub(now_ms) {
        return None;
    }
    Instant::now().checked_add(Duration::from_millis(millis))
}

/// Blocks the session on `keys`, keeping the deadline of the first attempt on a retry.
pub(super) fn block(session: &mut Session, keys: &[Bytes], timeout_ms: u64) {
    let deadline = match &session.block_retry {
        Some(retry) => retry.deadline,
        None => deadline_after(timeout_ms),
    };
    session.blocked = Some(Block::new(keys.to_vec(), deadline));
}

/// Whether the command may block: not inside MULTI (Redis runs them as non-blocking there).
pub(super) fn may_block(session: &Session) -> bool {
    !session.in_transaction()
}

/// The keys a blocking pop tries now, and whether it is a retry: on a retry, the keys pushed
/// to in the order they were pushed to (every key on the first retry); else all of them.
pub(super) fn attempt_keys<'k>(session: &Session, keys: &'k [Bytes]) -> (Cow<'k, [Bytes]>, bool) {
    match &session.block_retry {
        None => (Cow::Borrowed(keys), false),
        Some(Retry { ready: None, .. }) => (Cow::Borrowed(keys), true),
        Some(Retry {
            ready: Some(ready), ..
        }) => (
            Cow::Owned(
                ready
                    .iter()
                    .filter(|key| keys.contains(key))
                    .cloned()
                    .collect(),
            ),
            true,
        ),
    }
}

fn blocking_pop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>, end: End) {
    let timeout = match parse_timeout(&args[args.len() - 1]) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let keys = &args[1..args.len() - 1];
    let (attempt, retrying) = attempt_keys(session, keys);
    match mpop(session, &attempt, end, 1, retrying) {
        Ok(Some((key, items))) => {
            reply.array(2);
            reply.bulk(&key);
            reply.bulk(&items[0]);
        }
        Ok(None) if may_block(session) => block(session, keys, timeout),
        Ok(None) => reply.null_array(),
        Err(failure) => failure.reply(reply),
    }
}

/// `BLPOP key [key ...] timeout`
pub fn blpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    blocking_pop(session, args, reply, End::Left);
}

/// `BRPOP key [key ...] timeout`
pub fn brpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    blocking_pop(session, args, reply, End::Right);
}

fn blocking_move(
    session: &mut Session,
    args: &[Bytes],
    reply: &mut Reply<'_>,
    from: End,
    to: End,
    timeout: &[u8],
) {
    let timeout = match parse_timeout(timeout) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let retrying = session.block_retry.is_some();
    match move_item(session, &args[1], &args[2], from, to, retrying) {
        Ok(Some(item)) => reply.bulk(&item),
        Ok(None) if may_block(session) => block(session, &args[1..2], timeout),
        Ok(None) => reply.null(),
        Err(failure) => failure.reply(reply),
    }
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`
pub fn blmove(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(from), Some(to)) = (End::parse(&args[3]), End::parse(&args[4])) else {
        return reply.error(errors::SYNTAX);
    };
    blocking_move(session, args, reply, from, to, &args[5]);
}

/// `BRPOPLPUSH source destination timeout`
pub fn brpoplpush(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    blocking_move(session, args, reply, End::Right, End::Left, &args[3]);
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`: as Redis, the keys and
/// options are checked before the timeout.
pub fn blmpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (keys, end, count) = match parse_mpop(&args[2..]) {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(text),
    };
    let timeout = match parse_timeout(&args[1]) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let (attempt, retrying) = attempt_keys(session, keys);
    match mpop(session, &attempt, end, count, retrying) {
        Ok(None) if may_block(session) => block(session, keys, timeout),
        result => mpop_reply(result, reply),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves start/stop normalisation as Redis' LRANGE and LTRIM do it.
    #[test]
    fn ranges_follow_redis() {
        assert_eq!(range(0, -1, 5), Some((0, 4)));
        assert_eq!(range(-100, 100, 5), Some((0, 4)));
        assert_eq!(range(2, 1, 5), None);
        assert_eq!(range(5, 10, 5), None);
        assert_eq!(range(-2, -1, 5), Some((3, 4)));
        assert_eq!(range(0, -6, 5), None);
        assert_eq!(range(0, 0, 0), None);
        assert_eq!(range(i64::MIN, i64::MAX, 3), Some((0, 2)));
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(3, 3), None);
        assert_eq!(position(-4, 3), None);
        assert_eq!(position(i64::MIN, 3), None);
    }

    fn millis(text: &str) -> Result<u64, &'static str> {
        parse_timeout(text.as_bytes())
    }

    // Proves timeouts parse as Redis 7.0's on x86-64: long-double text (hex, inf), ceiling of
    // the milliseconds, tiny negatives rounding up to 0 (forever), and values too large for
    // a long long reported as negative.
    #[test]
    fn timeouts_parse_as_redis() {
        assert_eq!(millis("0"), Ok(0));
        assert_eq!(millis("-0"), Ok(0));
        assert_eq!(millis("-0.0001"), Ok(0));
        assert_eq!(millis("0.01"), Ok(10));
        assert_eq!(millis("0.000000001"), Ok(1));
        assert_eq!(millis("0.001"), Ok(1));
        assert_eq!(millis("1.0005"), Ok(1001));
        assert_eq!(millis("1"), Ok(1000));
        assert_eq!(millis("0x10"), Ok(16_000));
        assert_eq!(millis("9e15"), Ok(9_000_000_000_000_000_000));
        assert_eq!(millis("9223372036854775"), Ok(9_223_372_036_854_775_000));
        assert_eq!(millis("-1"), Err(TIMEOUT_NEGATIVE));
        assert_eq!(millis("-0.01"), Err(TIMEOUT_NEGATIVE));
        assert_eq!(millis("9223372036854776"), Err(TIMEOUT_NEGATIVE));
        assert_eq!(millis("1e400"), Err(TIMEOUT_NEGATIVE));
        assert_eq!(millis("inf"), Err(TIMEOUT_NEGATIVE));
        assert_eq!(millis("-inf"), Err(TIMEOUT_NEGATIVE));
        for refused in ["abc", "nan", "", " 1", "1 ", "1e", "1_0"] {
            assert_eq!(millis(refused), Err(TIMEOUT_NOT_FLOAT), "{refused:?}");
        }
    }

    // Proves a timeout whose deadline would overflow Redis' clock waits forever, and an
    // ordinary one gets a deadline.
    #[test]
    fn deadlines() {
        assert_eq!(deadline_after(0), None);
        assert_eq!(deadline_after(9_223_372_036_854_775_000), None);
        assert!(deadline_after(1_000).is_some());
    }

    // Proves LPOS options parse in Redis' order, and that RANK i64::MIN scans from the tail
    // reporting every match (Redis' overflowing negation).
    #[test]
    fn lpos_options() {
        let args = |text: &str| -> Vec<Bytes> {
            text.split(' ')
                .filter(|t| !t.is_empty())
                .map(|t| Bytes::copy_from_slice(t.as_bytes()))
                .collect()
        };
        let parsed = LposOptions::parse(&args("RANK -2 COUNT 3 MAXLEN 9")).unwrap_or_else(|e| {
            panic!("{e}");
        });
        assert_eq!(
            parsed,
            LposOptions {
                skip: 1,
                from_tail: true,
                count: Some(3),
                count_unbounded: false,
                maxlen: 9
            }
        );
        let min = LposOptions::parse(&args("RANK -9223372036854775808"));
        assert!(min.is_ok_and(|o| o.from_tail && o.skip == 0 && o.count_unbounded));
        assert_eq!(
            LposOptions::parse(&args("RANK 0")).map(|_| ()),
            Err(
                "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
            )
        );
        assert_eq!(
            LposOptions::parse(&args("COUNT -1")),
            Err("ERR COUNT can't be negative")
        );
        assert_eq!(
            LposOptions::parse(&args("MAXLEN x")),
            Err("ERR MAXLEN can't be negative")
        );
        assert_eq!(
            LposOptions::parse(&args("RANK x")).map(|_| ()),
            Err(errors::NOT_INTEGER)
        );
        assert_eq!(LposOptions::parse(&args("RANK")), Err(errors::SYNTAX));
        assert_eq!(LposOptions::parse(&args("FOO 1")), Err(errors::SYNTAX));
    }
}
