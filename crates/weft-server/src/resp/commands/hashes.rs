//! Hash commands: HSET HMSET HSETNX HGET HMGET HGETALL HDEL HEXISTS HLEN HSTRLEN HKEYS HVALS
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN.
//!
//! Each reads or changes the key's `HashValue` in place (`collections`); arguments are
//! checked in the order Redis 7.0 checks them (`t_hash.c`), so the same bad request gets
//! the same error. A small hash answers in insertion order, as Redis' listpack does.
//! Stored fields and values are copied out of the request (a slice would keep the whole
//! request buffer alive).

use bytes::Bytes;
use weft_core::structure::HashValue;

use super::collections::{self, ScanOptions, scan_cursor, scan_reply};
use super::keys::random_below;
use super::sets::{count_reply, distinct_picks, parse_random_count};
use super::{arg_i64, errors, is};
use crate::resp::{Reply, Session};

/// The largest |count| HRANDFIELD and ZRANDMEMBER accept with values (`LONG_MAX / 2`:
/// Redis doubles it for the RESP2 reply length).
const RANDOM_WITH_VALUES_COUNT_MAX: u64 = (i64::MAX / 2) as u64;

/// The arguments of `HRANDFIELD`/`ZRANDMEMBER key [count [<with>]]`, checked in Redis'
/// order (the count, then the option, then the count's range with values): the count if
/// given, and whether `with` (`WITHVALUES`, `WITHSCORES`) was.
pub(crate) fn random_pick_args(
    args: &[Bytes],
    with: &str,
) -> Result<(Option<i64>, bool), &'static str> {
    let Some(arg) = args.get(2) else {
        return Ok((None, false));
    };
    let count = parse_random_count(arg)?;
    if args.len() > 4 || (args.len() == 4 && !is(&args[3], with)) {
        return Err(errors::SYNTAX);
    }
    let with_values = args.len() == 4;
    if with_values && count.unsigned_abs() > RANDOM_WITH_VALUES_COUNT_MAX {
        return Err("ERR value is out of range");
    }
    Ok((Some(count), with_values))
}

fn set_pairs(
    session: &Session,
    args: &[Bytes],
    reply: &mut Reply<'_>,
    name: &str,
) -> Option<usize> {
    if args.len() % 2 != 0 {
        reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return None;
    }
    let pairs = &args[2..];
    let result = collections::write::<HashValue, _>(session, &args[1], true, |hash| {
        let added = pairs
            .chunks_exact(2)
            .filter(|pair| hash.set(&pair[0], Bytes::copy_from_slice(&pair[1])))
            .count();
        (added, true)
    });
    match result {
        Ok(added) => Some(added.unwrap_or(0)),
        Err(failure) => {
            failure.reply(reply);
            None
        }
    }
}

/// `HSET key field value [field value ...]`: the number of new fields.
pub fn hset(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if let Some(added) = set_pairs(session, args, reply, "hset") {
        count_reply(reply, added);
    }
}

/// `HMSET key field value [field value ...]`: `OK`.
pub fn hmset(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if set_pairs(session, args, reply, "hmset").is_some() {
        reply.ok();
    }
}

/// `HSETNX key field value`
pub fn hsetnx(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (field, value) = (&args[2], &args[3]);
    let result = collections::write::<HashValue, _>(session, &args[1], true, |hash| {
        if hash.contains(field) {
            (0, false)
        } else {
            hash.set(field, Bytes::copy_from_slice(value));
            (1, true)
        }
    });
    match result {
        Ok(set) => reply.integer(set.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `HGET key field`
pub fn hget(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| match hash
        .and_then(|hash| hash.get(&args[2]))
    {
        Some(value) => reply.bulk(value),
        None => reply.null(),
    });
}

/// `HMGET key field [field ...]`
pub fn hmget(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let fields = &args[2..];
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        reply.array(fields.len());
        for field in fields {
            match hash.and_then(|hash| hash.get(field)) {
                Some(value) => reply.bulk(value),
                None => reply.null(),
            }
        }
    });
}

/// `HGETALL key`: a map in RESP3, a flat array in RESP2.
pub fn hgetall(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let Some(hash) = hash else {
            return reply.map(0);
        };
        reply.map(hash.len());
        for (field, value) in hash.iter() {
            reply.bulk(field);
            reply.bulk(value);
        }
    });
}

/// `HKEYS key`
pub fn hkeys(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let Some(hash) = hash else {
            return reply.array(0);
        };
        reply.array(hash.len());
        for (field, _) in hash.iter() {
            reply.bulk(field);
        }
    });
}

/// `HVALS key`
pub fn hvals(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let Some(hash) = hash else {
            return reply.array(0);
        };
        reply.array(hash.len());
        for (_, value) in hash.iter() {
            reply.bulk(value);
        }
    });
}

/// `HDEL key field [field ...]`: the number of fields removed.
pub fn hdel(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let fields = &args[2..];
    let result = collections::write::<HashValue, _>(session, &args[1], false, |hash| {
        let removed = fields
            .iter()
            .filter(|field| hash.remove(field).is_some())
            .count();
        (removed, removed > 0)
    });
    match result {
        Ok(removed) => count_reply(reply, removed.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `HLEN key`
pub fn hlen(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<HashValue, _>(session, &args[1], |hash| {
        hash.map_or(0, HashValue::len)
    }) {
        Ok(len) => count_reply(reply, len),
        Err(failure) => failure.reply(reply),
    }
}

/// `HEXISTS key field`
pub fn hexists(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<HashValue, _>(session, &args[1], |hash| {
        hash.is_some_and(|hash| hash.contains(&args[2]))
    }) {
        Ok(found) => reply.integer(i64::from(found)),
        Err(failure) => failure.reply(reply),
    }
}

/// `HSTRLEN key field`
pub fn hstrlen(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<HashValue, _>(session, &args[1], |hash| {
        hash.and_then(|hash| hash.get(&args[2]))
            .map_or(0, Bytes::len)
    }) {
        Ok(len) => count_reply(reply, len),
        Err(failure) => failure.reply(reply),
    }
}

/// `HINCRBY key field increment`
pub fn hincrby(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(delta) = arg_i64(args, 3) else {
        return reply.error(errors::NOT_INTEGER);
    };
    let field = &args[2];
    let result = collections::write::<HashValue, _>(session, &args[1], true, |hash| {
        let current = match hash.get(field) {
            None => 0,
            Some(value) => match weft_resp::parse_i64_strict(value) {
                Some(current) => current,
                None => return (Err("ERR hash value is not an integer"), false),
            },
        };
        match current.checked_add(delta) {
            Some(next) => {
                let text = Bytes::copy_from_slice(itoa::Buffer::new().format(next).as_bytes());
                hash.set(field, text);
                (Ok(next), true)
            }
            None => (Err(errors::OVERFLOW), false),
        }
    });
    match result {
        Ok(Some(Ok(value))) => reply.integer(value),
        Ok(Some(Err(text))) => reply.error(text),
        Ok(None) => reply.integer(0),
        Err(failure) => failure.reply(reply),
    }
}

/// `HINCRBYFLOAT key field increment`: in emulated `long double`, as Redis.
pub fn hincrbyfloat(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(delta) = weft_resp::LongDouble::parse(&args[3]) else {
        return reply.error(errors::NOT_FLOAT);
    };
    if !delta.is_finite() {
        return reply.error("ERR value is NaN or Infinity");
    }
    let field = &args[2];
    let result = collections::write::<HashValue, _>(session, &args[1], true, |hash| {
        let current = match hash.get(field) {
            None => weft_resp::LongDouble::ZERO,
            Some(value) => match weft_resp::LongDouble::parse(value) {
                Some(current) => current,
                None => return (Err("ERR hash value is not a float"), false),
            },
        };
        let next = current + delta;
        if !next.is_finite() {
            return (Err("ERR increment would produce NaN or Infinity"), false);
        }
        let text = next.format_human();
        hash.set(field, Bytes::copy_from_slice(text.as_bytes()));
        (Ok(text), true)
    });
    match result {
        Ok(Some(Ok(text))) => reply.bulk(text.as_bytes()),
        Ok(Some(Err(text))) => reply.error(text),
        Ok(None) => reply.null(),
        Err(failure) => failure.reply(reply),
    }
}

/// Writes one random pick: RESP3 `[field, value]` pairs with values, else flat.
fn pair_reply(reply: &mut Reply<'_>, field: &[u8], value: &[u8], with_values: bool) {
    let resp3 = reply.protocol() == weft_resp::Protocol::Resp3;
    if with_values && resp3 {
        reply.array(2);
    }
    reply.bulk(field);
    if with_values {
        reply.bulk(value);
    }
}

/// The array header of `len` random picks (RESP2 flattens pairs).
fn picks_header(reply: &mut Reply<'_>, len: usize, with_values: bool) {
    if with_values && reply.protocol() == weft_resp::Protocol::Resp2 {
        reply.array(len.saturating_mul(2));
    } else {
        reply.array(len);
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]`: a positive count picks distinct fields (all of
/// them, in order, once it reaches the size), a negative one may repeat them.
pub fn hrandfield(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (count, with_values) = match random_pick_args(args, "WITHVALUES") {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let Some(count) = count else {
            return match hash.and_then(|hash| hash.random(random_below)) {
                Some((field, _)) => reply.bulk(field),
                None => reply.null(),
            };
        };
        let Some(hash) = hash else {
            return reply.array(0);
        };
        let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        if count == 0 {
            return reply.array(0);
        }
        if count < 0 || count == 1 {
            // Sampled with repetition, streamed: a huge count stops at the output limit
            // (the connection is then closed, as Redis closes it).
            picks_header(reply, wanted, with_values);
            for _ in 0..wanted {
                if reply.overflowed() {
                    break;
                }
                if let Some((field, value)) = hash.random(random_below) {
                    pair_reply(reply, field, value, with_values);
                }
            }
            return;
        }
        let pairs: Vec<(&Bytes, &Bytes)> = hash.iter().collect();
        let picks = distinct_picks(pairs.len(), wanted);
        let len = picks.as_ref().map_or(pairs.len(), Vec::len);
        picks_header(reply, len, with_values);
        match picks {
            None => {
                for (field, value) in pairs {
                    pair_reply(reply, field, value, with_values);
                }
            }
            Some(picks) => {
                for pick in picks {
                    let (field, value) = pairs[pick];
                    pair_reply(reply, field, value, with_values);
                }
            }
        }
    });
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`: a small hash whole, a large one one
/// step of a resumable cursor (see `weft_core::structure`: every field present for the
/// whole scan is returned at least once).
pub fn hscan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let cursor = match scan_cursor(args) {
        Ok(cursor) => cursor,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let Some(hash) = hash else {
            return scan_reply(reply, 0, &[]);
        };
        let options = match ScanOptions::parse(args) {
            Ok(options) => options,
            Err(text) => return reply.error(text),
        };
        let mut items: Vec<&[u8]> = Vec::new();
        let next = hash.scan(cursor, options.count, |field, value| {
            if options.wanted(field) {
                items.push(field);
                items.push(value);
            }
        });
        scan_reply(reply, next, &items);
    });
}
