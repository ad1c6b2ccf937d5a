//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LRANGE LINDEX LLEN LSET LREM LTRIM
//! LINSERT LPOS LMOVE RPOPLPUSH LMPOP, and the blocking BLPOP BRPOP BLMOVE BRPOPLPUSH
//! BLMPOP.
//!
//! Pushes and pops are O(1) on the list's deque, changed in place under the key's segment
//! lock (`collections::write`). A blocking command first runs as its non-blocking form;
//! when every key is empty it leaves a [`Block`] on the session, and the connection loop
//! waits for a push to one of its keys (`Waiters`), the timeout, the client leaving or the
//! server stopping, then runs the command again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;
use weft_core::structure::ListValue;

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
}

fn len_reply(reply: &mut Reply<'_>, len: usize) {
    reply.integer(i64::try_from(len).unwrap_or(i64::MAX));
}

/// Redis' start/stop normalisation: negative indexes count from the end; the result is an
/// inclusive range within `0..len`, or `None` when empty.
fn range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 { stop + len } else { stop };
    if start > stop || start >= len {
        return None;
    }
    let stop = stop.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(stop).ok()?))
}

/// The list position of a possibly negative index.
fn position(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 { index + len } else { index };
    if (0..len).contains(&index) {
        usize::try_from(index).ok()
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------
// Waiters: blocked clients by key.

/// One blocked client's wake-up: a `Notify` that keeps a permit, so a push between the
/// client's registration and its wait is not lost.
#[derive(Debug, Default)]
pub struct Wakeup {
    notify: Notify,
}

impl Wakeup {
    /// Waits for a push to one of the keys registered with it.
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// A cache name and a key.
type WaitKey = (Arc<str>, Bytes);

/// Clients blocked on list keys, per cache and key, in the order they blocked (a push wakes
/// every one of them; the first to run again takes the item, as the oldest usually does).
#[derive(Debug, Default)]
pub struct Waiters {
    by_key: Mutex<HashMap<WaitKey, VecDeque<Arc<Wakeup>>>>,
    /// How many registrations exist: pushes skip the lock while nobody waits.
    count: AtomicUsize,
}

impl Waiters {
    /// Registers `wakeup` for each key of `cache`.
    pub fn register(&self, cache: &Arc<str>, keys: &[Bytes], wakeup: &Arc<Wakeup>) {
        let mut by_key = self.by_key.lock();
        for key in keys {
            by_key
                .entry((Arc::clone(cache), key.clone()))
                .or_default()
                .push_back(Arc::clone(wakeup));
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Removes `wakeup` from each key of `cache`.
    pub fn unregister(&self, cache: &Arc<str>, keys: &[Bytes], wakeup: &Arc<Wakeup>) {
        let mut by_key = self.by_key.lock();
        for key in keys {
            let slot = (Arc::clone(cache), key.clone());
            if let Some(queue) = by_key.get_mut(&slot) {
                if let Some(at) = queue.iter().position(|w| Arc::ptr_eq(w, wakeup)) {
                    queue.remove(at);
                    self.count.fetch_sub(1, Ordering::Relaxed);
                }
                if queue.is_empty() {
                    by_key.remove(&slot);
                }
            }
        }
    }

    /// A list at `key` of `cache` got items: wakes its blocked clients.
    pub fn signal(&self, cache: &str, key: &[u8]) {
        if self.count.load(Ordering::Relaxed) == 0 {
            return;
        }
        let by_key = self.by_key.lock();
        let slot = (Arc::<str>::from(cache), Bytes::copy_from_slice(key));
        if let Some(queue) = by_key.get(&slot) {
            for wakeup in queue {
                wakeup.notify.notify_one();
            }
        }
    }
}

/// A blocking command that found nothing: what the connection loop waits for.
#[derive(Debug)]
pub struct Block {
    /// The keys whose pushes wake the client.
    pub keys: Vec<Bytes>,
    /// When to give up (`None`: never).
    pub deadline: Option<Instant>,
}

fn signal(session: &Session, key: &[u8]) {
    session
        .context
        .list_waiters
        .signal(session.cache.name(), key);
}

// ---------------------------------------------------------------------------------------
// Pushes.

fn push(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, end: End, only_existing: bool) {
    let key = &args[1];
    let items = &args[2..];
    let result = collections::write::<ListValue, _>(session, key, !only_existing, |list| {
        for item in items {
            end.push(list, item.clone());
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
    let count = match args.get(2).map(|arg| positive_count(arg)) {
        None => None,
        Some(Ok(count)) => Some(count),
        Some(Err(text)) => return reply.error(text),
    };
    let key = &args[1];
    let result = collections::write::<ListValue, _>(session, key, false, |list| {
        let take = count.unwrap_or(1).min(list.len());
        let items: Vec<Bytes> = (0..take).filter_map(|_| end.pop(list)).collect();
        let changed = !items.is_empty();
        (items, changed)
    });
    match (result, count) {
        (Err(failure), _) => failure.reply(reply),
        (Ok(None), None) => reply.null(),
        (Ok(None), Some(_)) => reply.null_array(),
        (Ok(Some(items)), None) => match items.first() {
            Some(item) => reply.bulk(item),
            None => reply.null(),
        },
        (Ok(Some(items)), Some(_)) => {
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
                for item in list.iter().skip(from).take(to - from + 1) {
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

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`
pub fn lpos(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut rank: i64 = 1;
    let mut count: Option<usize> = None;
    let mut maxlen: usize = 0;
    let mut index = 3;
    while index < args.len() {
        let option = &args[index];
        let Some(value) = args.get(index + 1) else {
            return reply.error(errors::SYNTAX);
        };
        let number = weft_resp::parse_i64_strict(value);
        if is(option, "RANK") {
            let Some(number) = number else {
                return reply.error(errors::NOT_INTEGER);
            };
            if number == 0 {
                return reply.error(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                );
            }
            rank = number.max(-i64::MAX);
        } else if is(option, "COUNT") {
            let Some(Ok(number)) = number.map(usize::try_from) else {
                return reply.error("ERR COUNT can't be negative");
            };
            count = Some(number);
        } else if is(option, "MAXLEN") {
            let Some(Ok(number)) = number.map(usize::try_from) else {
                return reply.error("ERR MAXLEN can't be negative");
            };
            maxlen = number;
        } else {
            return reply.error(errors::SYNTAX);
        }
        index += 2;
    }
    let element = &args[2];
    collections::read_or_reply::<ListValue, _>(session, &args[1], reply, |list, reply| {
        let mut found: Vec<usize> = Vec::new();
        if let Some(list) = list {
            let wanted = match count {
                Some(0) => usize::MAX,
                Some(n) => n,
                None => 1,
            };
            let mut skip = rank.unsigned_abs() - 1;
            let limit = if maxlen == 0 { usize::MAX } else { maxlen };
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
            if rank > 0 {
                for (at, item) in list.iter().enumerate().take(limit) {
                    if !visit(at, item) {
                        break;
                    }
                }
            } else {
                let len = list.len();
                for (back, item) in list.iter().rev().enumerate().take(limit) {
                    if !visit(len - 1 - back, item) {
                        break;
                    }
                }
            }
        }
        match count {
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
                list.set(at, item.clone());
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

/// `LREM key count element`
pub fn lrem(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(count) = arg_i64(args, 2) else {
        return reply.error(errors::NOT_INTEGER);
    };
    let element = &args[3];
    let result = collections::write::<ListValue, _>(session, &args[1], false, |list| {
        let limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let mut removed = 0usize;
        if count >= 0 {
            list.retain(|item| {
                if removed < limit && item == element {
                    removed += 1;
                    false
                } else {
                    true
                }
            });
        } else {
            // From the tail: find the positions first, then remove them back to front.
            let positions: Vec<usize> = list
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, item)| *item == element)
                .map(|(at, _)| at)
                .take(limit)
                .collect();
            for at in positions {
                list.remove(at);
                removed += 1;
            }
        }
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
        let before = list.len();
        match range(start, stop, before) {
            Some((from, to)) => list.retain_range(from, to + 1),
            None => list.retain_range(0, 0),
        }
        ((), list.len() != before)
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
                list.insert(if after { at + 1 } else { at }, item.clone());
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

/// Pops from `source` at `from` and pushes onto `destination` at `to`. Redis checks the
/// destination's type before popping; a concurrent write may still change it between the
/// check and the push, in which case the item goes back where it came from.
fn move_item(
    session: &Session,
    source: &[u8],
    destination: &[u8],
    from: End,
    to: End,
) -> Result<Option<Bytes>, Failure> {
    // Redis answers nil for a missing source first, then refuses before popping when the
    // destination holds another type.
    if !collections::read::<ListValue, _>(session, source, |list| list.is_some())? {
        return Ok(None);
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
    lmove_reply(move_item(session, &args[1], &args[2], from, to), reply);
}

/// `RPOPLPUSH source destination`
pub fn rpoplpush(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    lmove_reply(
        move_item(session, &args[1], &args[2], End::Right, End::Left),
        reply,
    );
}

/// Parsed `numkeys key [key ...] LEFT|RIGHT [COUNT count]` (LMPOP, BLMPOP after timeout).
fn parse_mpop(args: &[Bytes]) -> Result<(Vec<Bytes>, End, usize), &'static str> {
    let numkeys = weft_resp::parse_i64_strict(&args[0]).ok_or(errors::NOT_INTEGER)?;
    if numkeys <= 0 {
        return Err("ERR numkeys should be greater than 0");
    }
    let numkeys = usize::try_from(numkeys).map_err(|_| errors::SYNTAX)?;
    if numkeys >= args.len() {
        return Err(errors::SYNTAX);
    }
    let keys = args[1..=numkeys].to_vec();
    let rest = &args[numkeys + 1..];
    let end = rest
        .first()
        .and_then(|arg| End::parse(arg))
        .ok_or(errors::SYNTAX)?;
    let mut count = 1;
    let mut seen_count = false;
    let mut index = 1;
    while index < rest.len() {
        if is(&rest[index], "COUNT") && !seen_count {
            let value = rest.get(index + 1).ok_or(errors::SYNTAX)?;
            let parsed = weft_resp::parse_i64_strict(value)
                .filter(|&n| n > 0)
                .ok_or("ERR count should be greater than 0")?;
            count = usize::try_from(parsed).map_err(|_| errors::SYNTAX)?;
            seen_count = true;
            index += 2;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    Ok((keys, end, count))
}

/// Pops up to `count` items from the first non-empty list of `keys`.
fn mpop(
    session: &Session,
    keys: &[Bytes],
    end: End,
    count: usize,
) -> Result<Option<(Bytes, Vec<Bytes>)>, Failure> {
    for key in keys {
        let popped = collections::write::<ListValue, _>(session, key, false, |list| {
            let take = count.min(list.len());
            let items: Vec<Bytes> = (0..take).filter_map(|_| end.pop(list)).collect();
            let changed = !items.is_empty();
            (items, changed)
        })?;
        if let Some(items) = popped
            && !items.is_empty()
        {
            return Ok(Some((key.clone(), items)));
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
        Ok((keys, end, count)) => mpop_reply(mpop(session, &keys, end, count), reply),
        Err(text) => reply.error(text),
    }
}

// ---------------------------------------------------------------------------------------
// Blocking forms.

/// Redis' timeout argument: seconds as a float, not negative (`getTimeoutFromObjectOrReply`).
fn parse_timeout(arg: &[u8]) -> Result<Option<Duration>, &'static str> {
    let text =
        std::str::from_utf8(arg).map_err(|_| "ERR timeout is not a float or out of range")?;
    let seconds: f64 = weft_resp::LongDouble::parse(arg)
        .and_then(|_| text.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite())
        .ok_or("ERR timeout is not a float or out of range")?;
    if seconds < 0.0 {
        return Err("ERR timeout is negative");
    }
    let millis = (seconds * 1000.0).ceil();
    if millis > 9.0e15 {
        return Err("ERR timeout is out of range");
    }
    if millis == 0.0 {
        return Ok(None);
    }
    Ok(Some(Duration::from_millis(millis as u64)))
}

/// Blocks the session on `keys` unless a timeout of its own already passed.
fn block(session: &mut Session, keys: Vec<Bytes>, timeout: Option<Duration>) {
    let deadline = match session.block_deadline {
        Some(deadline) => Some(deadline),
        None => timeout.map(|timeout| Instant::now() + timeout),
    };
    session.blocked = Some(Block { keys, deadline });
}

/// Whether the command may block: not inside MULTI (Redis runs them as non-blocking there).
fn may_block(session: &Session) -> bool {
    !session.in_transaction()
}

fn blocking_pop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>, end: End) {
    let timeout = match parse_timeout(&args[args.len() - 1]) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let keys = &args[1..args.len() - 1];
    match mpop(session, keys, end, 1) {
        Ok(Some((key, items))) => {
            reply.array(2);
            reply.bulk(&key);
            reply.bulk(&items[0]);
        }
        Ok(None) if may_block(session) => block(session, keys.to_vec(), timeout),
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
    match move_item(session, &args[1], &args[2], from, to) {
        Ok(Some(item)) => reply.bulk(&item),
        Ok(None) if may_block(session) => block(session, vec![args[1].clone()], timeout),
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

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`
pub fn blmpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let timeout = match parse_timeout(&args[1]) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let (keys, end, count) = match parse_mpop(&args[2..]) {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(text),
    };
    match mpop(session, &keys, end, count) {
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
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(3, 3), None);
        assert_eq!(position(-4, 3), None);
    }

    // Proves timeouts parse as Redis' do: floats, 0 = forever, negatives and junk refused.
    #[test]
    fn timeouts_parse() {
        assert_eq!(parse_timeout(b"0"), Ok(None));
        assert_eq!(parse_timeout(b"0.01"), Ok(Some(Duration::from_millis(10))));
        assert_eq!(parse_timeout(b"1"), Ok(Some(Duration::from_secs(1))));
        assert_eq!(parse_timeout(b"-1"), Err("ERR timeout is negative"));
        assert!(parse_timeout(b"abc").is_err());
        assert!(parse_timeout(b"inf").is_err());
    }
}
