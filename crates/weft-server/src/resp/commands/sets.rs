//! Set commands: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SINTER
//! SUNION SDIFF and their STORE forms, SINTERCARD, SMOVE, SSCAN.
//!
//! Multi-key commands read each set under its own lock, one after the other, and write the
//! result last (`collections` lock order); like Redis, every key's type is checked.

use bytes::Bytes;
use weft_core::Structure;
use weft_core::structure::SetValue;

use super::collections::{self, Failure, ScanArgs};
use super::hashes::distinct_picks;
use super::keys::random_below;
use super::{arg_i64, errors};
use crate::resp::{Reply, Session};

fn count_reply(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

fn members_reply(reply: &mut Reply<'_>, members: &[Bytes]) {
    reply.set(members.len());
    for member in members {
        reply.bulk(member);
    }
}

/// `SADD key member [member ...]`: the number added.
pub fn sadd(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    let result = collections::write::<SetValue, _>(session, &args[1], true, |set| {
        let added = members.iter().filter(|m| set.insert((*m).clone())).count();
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
        let removed = members.iter().filter(|m| set.remove(m)).count();
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

/// `SPOP key [count]`: random members, removed.
pub fn spop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() > 3 {
        return reply.error(errors::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match weft_resp::parse_i64_strict(arg).and_then(|n| usize::try_from(n).ok()) {
            Some(count) => Some(count),
            None => return reply.error("ERR value is out of range, must be positive"),
        },
    };
    let result = collections::write::<SetValue, _>(session, &args[1], false, |set| {
        let members: Vec<&Bytes> = set.iter().collect();
        let picks = distinct_picks(members.len(), count.unwrap_or(1));
        let chosen: Vec<Bytes> = picks.into_iter().map(|i| members[i].clone()).collect();
        for member in &chosen {
            set.remove(member);
        }
        let changed = !chosen.is_empty();
        (chosen, changed)
    });
    match (result, count) {
        (Err(failure), _) => failure.reply(reply),
        (Ok(chosen), None) => match chosen.as_ref().and_then(|c| c.first()) {
            Some(member) => reply.bulk(member),
            None => reply.null(),
        },
        (Ok(chosen), Some(_)) => members_reply(reply, &chosen.unwrap_or_default()),
    }
}

/// `SRANDMEMBER key [count]`: random members; a negative count may repeat them.
pub fn srandmember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() > 3 {
        return reply.error(errors::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(_) => match arg_i64(args, 2) {
            Some(i64::MIN) => {
                return reply.error(
                    "ERR value is out of range, value must between -9223372036854775807 and \
                     9223372036854775807",
                );
            }
            Some(count) => Some(count),
            None => return reply.error(errors::NOT_INTEGER),
        },
    };
    collections::read_or_reply::<SetValue, _>(session, &args[1], reply, |set, reply| {
        let members: Vec<&Bytes> = set.map(|set| set.iter().collect()).unwrap_or_default();
        let Some(count) = count else {
            return if members.is_empty() {
                reply.null()
            } else {
                reply.bulk(members[random_below(members.len())]);
            };
        };
        let picks: Vec<usize> = if count >= 0 {
            distinct_picks(members.len(), usize::try_from(count).unwrap_or(usize::MAX))
        } else if members.is_empty() {
            Vec::new()
        } else {
            let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
            (0..wanted).map(|_| random_below(members.len())).collect()
        };
        reply.array(picks.len());
        for pick in picks {
            reply.bulk(members[pick]);
        }
    });
}

/// Every key's set (`None` for missing keys), in order; WRONGTYPE if any holds another
/// type.
fn sets_of(session: &Session, keys: &[Bytes]) -> Result<Vec<Option<SetValue>>, Failure> {
    keys.iter()
        .map(|key| collections::read::<SetValue, _>(session, key, |set| set.cloned()))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

fn combine(sets: Vec<Option<SetValue>>, algebra: Algebra) -> SetValue {
    let mut sets = sets.into_iter();
    match algebra {
        Algebra::Inter => {
            let all: Vec<SetValue> = match sets.map(|set| set.ok_or(())).collect() {
                Ok(all) => all,
                Err(()) => return SetValue::default(),
            };
            let Some((smallest, _)) = all.iter().enumerate().min_by_key(|(_, set)| set.len())
            else {
                return SetValue::default();
            };
            let mut result = SetValue::default();
            for member in all[smallest].iter() {
                if all.iter().all(|set| set.contains(member)) {
                    result.insert(member.clone());
                }
            }
            result
        }
        Algebra::Union => {
            let mut result = SetValue::default();
            for set in sets.flatten() {
                for member in set.iter() {
                    result.insert(member.clone());
                }
            }
            result
        }
        Algebra::Diff => {
            let Some(Some(first)) = sets.next() else {
                return SetValue::default();
            };
            let others: Vec<SetValue> = sets.flatten().collect();
            let mut result = SetValue::default();
            for member in first.iter() {
                if !others.iter().any(|set| set.contains(member)) {
                    result.insert(member.clone());
                }
            }
            result
        }
    }
}

fn algebra(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, algebra: Algebra) {
    match sets_of(session, &args[1..]) {
        Ok(sets) => {
            let result = combine(sets, algebra);
            let members: Vec<Bytes> = result.iter().cloned().collect();
            members_reply(reply, &members);
        }
        Err(failure) => failure.reply(reply),
    }
}

fn algebra_store(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, algebra: Algebra) {
    let result = match sets_of(session, &args[2..]) {
        Ok(sets) => combine(sets, algebra),
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
    let Some(numkeys) = arg_i64(args, 1) else {
        return reply.error(errors::NOT_INTEGER);
    };
    if numkeys <= 0 {
        return reply.error("ERR numkeys should be greater than 0");
    }
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len() - 2 {
        return reply.error("ERR Number of keys can't be greater than number of args");
    }
    let keys = &args[2..2 + numkeys];
    let mut limit = 0usize;
    let mut index = 2 + numkeys;
    while index < args.len() {
        if super::is(&args[index], "LIMIT") && index + 1 < args.len() {
            match weft_resp::parse_i64_strict(&args[index + 1]) {
                Some(n) if n >= 0 => limit = usize::try_from(n).unwrap_or(usize::MAX),
                Some(_) => return reply.error("ERR LIMIT can't be negative"),
                None => return reply.error(errors::NOT_INTEGER),
            }
            index += 2;
        } else {
            return reply.error(errors::SYNTAX);
        }
    }
    match sets_of(session, keys) {
        Ok(sets) => {
            let len = combine(sets, Algebra::Inter).len();
            count_reply(reply, if limit > 0 { len.min(limit) } else { len });
        }
        Err(failure) => failure.reply(reply),
    }
}

/// `SMOVE source destination member`
pub fn smove(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (source, destination, member) = (&args[1], &args[2], &args[3]);
    // As Redis: a missing source answers 0, then both types are checked.
    let present = match collections::read::<SetValue, _>(session, source, |set| {
        set.map(|set| set.contains(member))
    }) {
        Ok(present) => present,
        Err(failure) => return failure.reply(reply),
    };
    let Some(present) = present else {
        return reply.integer(0);
    };
    if let Err(failure) = collections::read::<SetValue, _>(session, destination, |_| ()) {
        return failure.reply(reply);
    }
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
        let added = set.insert(member.clone());
        ((), added)
    });
    match added {
        Ok(_) => reply.integer(1),
        Err(failure) => failure.reply(reply),
    }
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`
pub fn sscan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let scan = match ScanArgs::parse(args) {
        Ok(scan) => scan,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SetValue, _>(session, &args[1], reply, |set, reply| {
        let items: Vec<&[u8]> = match set {
            Some(set) if scan.cursor == 0 => set
                .iter()
                .map(|m| &m[..])
                .filter(|m| scan.wanted(m))
                .collect(),
            _ => Vec::new(),
        };
        collections::scan_reply(reply, items.into_iter());
    });
}
