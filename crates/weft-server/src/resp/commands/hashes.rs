//! Hash commands: HSET HMSET HSETNX HGET HMGET HGETALL HDEL HEXISTS HLEN HSTRLEN HKEYS HVALS
//! HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN.
//!
//! Each reads or changes the key's `HashValue` in place (`collections`); arguments are
//! checked in the order Redis checks them, so the same bad request gets the same error.

use bytes::Bytes;
use weft_core::structure::HashValue;

use super::collections::{self, ScanArgs};
use super::keys::random_below;
use super::{arg_i64, errors, is};
use crate::resp::{Reply, Session};

fn count_reply(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
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
        let mut added = 0;
        for pair in pairs.chunks_exact(2) {
            if hash.insert(pair[0].clone(), pair[1].clone()).is_none() {
                added += 1;
            }
        }
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
            hash.insert(field.clone(), value.clone());
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
                hash.insert(field.clone(), text);
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
        hash.insert(field.clone(), Bytes::copy_from_slice(text.as_bytes()));
        (Ok(text), true)
    });
    match result {
        Ok(Some(Ok(text))) => reply.bulk(text.as_bytes()),
        Ok(Some(Err(text))) => reply.error(text),
        Ok(None) => reply.null(),
        Err(failure) => failure.reply(reply),
    }
}

/// `HRANDFIELD key [count [WITHVALUES]]`: a positive count picks distinct fields, a
/// negative one may repeat them.
pub fn hrandfield(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut with_values = false;
    let count = match args.len() {
        2 => None,
        3 | 4 => {
            if args.len() == 4 {
                if !is(&args[3], "WITHVALUES") {
                    return reply.error(errors::SYNTAX);
                }
                with_values = true;
            }
            let Some(count) = arg_i64(args, 2) else {
                return reply.error(errors::NOT_INTEGER);
            };
            if count == i64::MIN {
                return reply.error(
                    "ERR value is out of range, value must between -9223372036854775807 and \
                     9223372036854775807",
                );
            }
            Some(count)
        }
        _ => return reply.error(errors::SYNTAX),
    };
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let Some(count) = count else {
            return match hash {
                Some(hash) if !hash.is_empty() => {
                    let pick = random_below(hash.len());
                    match hash.iter().nth(pick) {
                        Some((field, _)) => reply.bulk(field),
                        None => reply.null(),
                    }
                }
                _ => reply.null(),
            };
        };
        let Some(hash) = hash else {
            return reply.array(0);
        };
        let pairs: Vec<(&Bytes, &Bytes)> = hash.iter().collect();
        let picks: Vec<usize> = if count >= 0 {
            let wanted = usize::try_from(count)
                .unwrap_or(usize::MAX)
                .min(pairs.len());
            distinct_picks(pairs.len(), wanted)
        } else {
            let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
            (0..wanted).map(|_| random_below(pairs.len())).collect()
        };
        let resp3 = reply.protocol() == weft_resp::Protocol::Resp3;
        if with_values && !resp3 {
            reply.array(picks.len() * 2);
        } else {
            reply.array(picks.len());
        }
        for pick in picks {
            let (field, value) = pairs[pick];
            if with_values {
                if resp3 {
                    reply.array(2);
                }
                reply.bulk(field);
                reply.bulk(value);
            } else {
                reply.bulk(field);
            }
        }
    });
}

/// `wanted` distinct indexes below `len`, in random order (a partial Fisher–Yates shuffle).
pub(crate) fn distinct_picks(len: usize, wanted: usize) -> Vec<usize> {
    let mut indexes: Vec<usize> = (0..len).collect();
    for i in 0..wanted.min(len) {
        let j = i + random_below(len - i);
        indexes.swap(i, j);
    }
    indexes.truncate(wanted.min(len));
    indexes
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count]`
pub fn hscan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let scan = match ScanArgs::parse(args) {
        Ok(scan) => scan,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<HashValue, _>(session, &args[1], reply, |hash, reply| {
        let mut items: Vec<&[u8]> = Vec::new();
        if let Some(hash) = hash
            && scan.cursor == 0
        {
            for (field, value) in hash.iter() {
                if scan.wanted(field) {
                    items.push(field);
                    items.push(value);
                }
            }
        }
        collections::scan_reply(reply, items.into_iter());
    });
}
