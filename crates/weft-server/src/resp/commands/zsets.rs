//! Sorted-set commands: ZADD (NX XX GT LT CH INCR) ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT
//! ZLEXCOUNT ZRANK ZREVRANK ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES) ZRANGEBYSCORE
//! ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZRANGESTORE ZREMRANGEBYSCORE
//! ZREMRANGEBYRANK ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZRANDMEMBER ZSCAN.
//!
//! Lexicographic ranges follow Redis' rule for small sorted sets (which assumes equal
//! scores): start at the first member, in score order, that is at least the minimum, and
//! go on while members are at most the maximum.
//!
//! Doubles are written as Redis 7.2 writes them (shortest text that reads back the same).

use std::ops::Bound;

use bytes::Bytes;
use weft_core::Structure;
use weft_core::structure::SortedSetValue;

use super::collections::{self, ScanArgs};
use super::hashes::distinct_picks;
use super::keys::random_below;
use super::{errors, is};
use crate::resp::{Reply, Session};

const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

fn count_reply(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

fn parse_score(arg: &[u8]) -> Option<f64> {
    weft_resp::parse_f64_redis(arg).filter(|score| !score.is_nan())
}

/// A score bound: `(` for exclusive, `-inf`/`+inf`.
fn parse_score_bound(arg: &[u8]) -> Option<Bound<f64>> {
    match arg.strip_prefix(b"(") {
        Some(rest) => parse_score(rest).map(Bound::Excluded),
        None => parse_score(arg).map(Bound::Included),
    }
}

/// A lexicographic bound.
#[derive(Debug, Clone)]
enum Lex {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

fn parse_lex_bound(arg: &Bytes) -> Option<Lex> {
    match arg.first() {
        Some(b'-') if arg.len() == 1 => Some(Lex::Min),
        Some(b'+') if arg.len() == 1 => Some(Lex::Max),
        Some(b'[') => Some(Lex::Inclusive(arg.slice(1..))),
        Some(b'(') => Some(Lex::Exclusive(arg.slice(1..))),
        _ => None,
    }
}

struct LexRange {
    min: Lex,
    max: Lex,
}

impl LexRange {
    fn gte_min(&self, member: &[u8]) -> bool {
        match &self.min {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Inclusive(m) => member >= &m[..],
            Lex::Exclusive(m) => member > &m[..],
        }
    }

    fn lte_max(&self, member: &[u8]) -> bool {
        match &self.max {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Inclusive(m) => member <= &m[..],
            Lex::Exclusive(m) => member < &m[..],
        }
    }

    /// Redis' test for a range that is always empty.
    fn is_empty(&self) -> bool {
        let (min, min_ex) = match &self.min {
            Lex::Min => return matches!(self.max, Lex::Min),
            Lex::Max => return true,
            Lex::Inclusive(m) => (m, false),
            Lex::Exclusive(m) => (m, true),
        };
        let (max, max_ex) = match &self.max {
            Lex::Max => return false,
            Lex::Min => return true,
            Lex::Inclusive(m) => (m, false),
            Lex::Exclusive(m) => (m, true),
        };
        min > max || (min == max && (min_ex || max_ex))
    }

    /// Members in range, Redis' small-set rule, lowest first (or highest first).
    fn members<'z>(&self, zset: &'z SortedSetValue, reverse: bool) -> Vec<(&'z Bytes, f64)> {
        if self.is_empty() || zset.is_empty() {
            return Vec::new();
        }
        let (Some((first, _)), Some((last, _))) = (zset.iter().next(), zset.iter().next_back())
        else {
            return Vec::new();
        };
        if !self.gte_min(last) || !self.lte_max(first) {
            return Vec::new();
        }
        if reverse {
            let mut iter = zset
                .iter()
                .rev()
                .skip_while(|(m, _)| !self.lte_max(m))
                .peekable();
            if !iter.peek().is_some_and(|(m, _)| self.gte_min(m)) {
                return Vec::new();
            }
            iter.take_while(|(m, _)| self.gte_min(m)).collect()
        } else {
            let mut iter = zset.iter().skip_while(|(m, _)| !self.gte_min(m)).peekable();
            if !iter.peek().is_some_and(|(m, _)| self.lte_max(m)) {
                return Vec::new();
            }
            iter.take_while(|(m, _)| self.lte_max(m)).collect()
        }
    }
}

fn parse_lex_range(min: &Bytes, max: &Bytes) -> Option<LexRange> {
    Some(LexRange {
        min: parse_lex_bound(min)?,
        max: parse_lex_bound(max)?,
    })
}

/// Members with scores within the bounds, lowest first (or highest first).
fn by_score(
    zset: &SortedSetValue,
    min: Bound<f64>,
    max: Bound<f64>,
    reverse: bool,
) -> Vec<(Bytes, f64)> {
    let mut members = zset.range_by_score(min, max);
    if reverse {
        members.reverse();
    }
    members
}

/// Redis' rank normalisation: an inclusive range within `0..len`, or `None`.
fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let end = if end < 0 { end + len } else { end };
    if start > end || start >= len {
        return None;
    }
    let end = end.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(end).ok()?))
}

/// Writes members (with scores if asked): RESP3 pairs, RESP2 flat.
fn members_reply(reply: &mut Reply<'_>, members: &[(Bytes, f64)], with_scores: bool) {
    let resp3 = reply.protocol() == weft_resp::Protocol::Resp3;
    if with_scores && !resp3 {
        reply.array(members.len() * 2);
    } else {
        reply.array(members.len());
    }
    for (member, score) in members {
        if with_scores {
            if resp3 {
                reply.array(2);
            }
            reply.bulk(member);
            reply.double(*score);
        } else {
            reply.bulk(member);
        }
    }
}

// ---------------------------------------------------------------------------------------
// ZADD and ZINCRBY.

#[derive(Debug, Default, Clone, Copy)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What adding one member did.
enum Added {
    New,
    Updated,
    Unchanged,
    Skipped,
    Nan,
}

fn add_one(zset: &mut SortedSetValue, member: &Bytes, score: f64, flags: AddFlags) -> (Added, f64) {
    match zset.score(member) {
        Some(current) => {
            if flags.nx {
                return (Added::Skipped, current);
            }
            let new = if flags.incr { current + score } else { score };
            if new.is_nan() {
                return (Added::Nan, current);
            }
            if (flags.lt && new >= current) || (flags.gt && new <= current) {
                return (Added::Skipped, new);
            }
            if new == current {
                return (Added::Unchanged, new);
            }
            zset.insert(member.clone(), new);
            (Added::Updated, new)
        }
        None => {
            if flags.xx {
                return (Added::Skipped, score);
            }
            zset.insert(member.clone(), score);
            (Added::New, score)
        }
    }
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`
pub fn zadd(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut flags = AddFlags::default();
    let mut index = 2;
    while index < args.len() {
        let arg = &args[index];
        if is(arg, "NX") {
            flags.nx = true;
        } else if is(arg, "XX") {
            flags.xx = true;
        } else if is(arg, "GT") {
            flags.gt = true;
        } else if is(arg, "LT") {
            flags.lt = true;
        } else if is(arg, "CH") {
            flags.ch = true;
        } else if is(arg, "INCR") {
            flags.incr = true;
        } else {
            break;
        }
        index += 1;
    }
    let rest = &args[index..];
    if rest.is_empty() || rest.len() % 2 != 0 {
        return reply.error(errors::SYNTAX);
    }
    if flags.nx && flags.xx {
        return reply.error("ERR XX and NX options at the same time are not compatible");
    }
    if ((flags.gt || flags.lt) && flags.nx) || (flags.gt && flags.lt) {
        return reply.error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    if flags.incr && rest.len() > 2 {
        return reply.error("ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks_exact(2) {
        let Some(score) = parse_score(&pair[0]) else {
            return reply.error(errors::NOT_FLOAT);
        };
        pairs.push((score, pair[1].clone()));
    }
    let result = collections::write::<SortedSetValue, _>(session, &args[1], !flags.xx, |zset| {
        let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
        let mut last = 0.0;
        for (score, member) in &pairs {
            let (outcome, new) = add_one(zset, member, *score, flags);
            match outcome {
                Added::Nan => return (Err(NAN_SCORE), added + updated > 0),
                Added::New => {
                    added += 1;
                    processed += 1;
                }
                Added::Updated => {
                    updated += 1;
                    processed += 1;
                }
                Added::Unchanged => processed += 1,
                Added::Skipped => {}
            }
            last = new;
        }
        let changed = added + updated > 0;
        (Ok((added, updated, processed, last)), changed)
    });
    match result {
        Err(failure) => failure.reply(reply),
        Ok(Some(Err(text))) => reply.error(text),
        Ok(outcome) => {
            let (added, updated, processed, last) = match outcome {
                Some(Ok(counts)) => counts,
                _ => (0, 0, 0, 0.0),
            };
            if flags.incr {
                if processed > 0 {
                    reply.double(last);
                } else {
                    reply.null();
                }
            } else {
                count_reply(reply, if flags.ch { added + updated } else { added });
            }
        }
    }
}

/// `ZINCRBY key increment member`
pub fn zincrby(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(delta) = parse_score(&args[2]) else {
        return reply.error(errors::NOT_FLOAT);
    };
    let member = &args[3];
    let flags = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let result = collections::write::<SortedSetValue, _>(session, &args[1], true, |zset| {
        match add_one(zset, member, delta, flags) {
            (Added::Nan, _) => (Err(NAN_SCORE), false),
            (Added::Unchanged, score) => (Ok(score), false),
            (_, score) => (Ok(score), true),
        }
    });
    match result {
        Ok(Some(Ok(score))) => reply.double(score),
        Ok(Some(Err(text))) => reply.error(text),
        Ok(None) => reply.null(),
        Err(failure) => failure.reply(reply),
    }
}

// ---------------------------------------------------------------------------------------
// Single-member reads and removal.

/// `ZREM key member [member ...]`
pub fn zrem(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    let result = collections::write::<SortedSetValue, _>(session, &args[1], false, |zset| {
        let removed = members.iter().filter(|m| zset.remove(m).is_some()).count();
        (removed, removed > 0)
    });
    match result {
        Ok(removed) => count_reply(reply, removed.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `ZSCORE key member`
pub fn zscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        match zset.and_then(|zset| zset.score(&args[2])) {
            Some(score) => reply.double(score),
            None => reply.null(),
        }
    });
}

/// `ZMSCORE key member [member ...]`
pub fn zmscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        reply.array(members.len());
        for member in members {
            match zset.and_then(|zset| zset.score(member)) {
                Some(score) => reply.double(score),
                None => reply.null(),
            }
        }
    });
}

/// `ZCARD key`
pub fn zcard(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<SortedSetValue, _>(session, &args[1], |zset| {
        zset.map_or(0, SortedSetValue::len)
    }) {
        Ok(len) => count_reply(reply, len),
        Err(failure) => failure.reply(reply),
    }
}

fn rank(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, reverse: bool) {
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        let Some(zset) = zset else {
            return reply.null();
        };
        match zset.rank(&args[2]) {
            Some(rank) if reverse => count_reply(reply, zset.len() - 1 - rank),
            Some(rank) => count_reply(reply, rank),
            None => reply.null(),
        }
    });
}

/// `ZRANK key member`
pub fn zrank(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    rank(session, args, reply, false);
}

/// `ZREVRANK key member`
pub fn zrevrank(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    rank(session, args, reply, true);
}

/// `ZCOUNT key min max`
pub fn zcount(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(min), Some(max)) = (parse_score_bound(&args[2]), parse_score_bound(&args[3])) else {
        return reply.error(NOT_FLOAT_RANGE);
    };
    match collections::read::<SortedSetValue, _>(session, &args[1], |zset| {
        zset.map_or(0, |zset| zset.range_by_score(min, max).len())
    }) {
        Ok(count) => count_reply(reply, count),
        Err(failure) => failure.reply(reply),
    }
}

/// `ZLEXCOUNT key min max`
pub fn zlexcount(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(range) = parse_lex_range(&args[2], &args[3]) else {
        return reply.error(NOT_LEX_RANGE);
    };
    match collections::read::<SortedSetValue, _>(session, &args[1], |zset| {
        zset.map_or(0, |zset| range.members(zset, false).len())
    }) {
        Ok(count) => count_reply(reply, count),
        Err(failure) => failure.reply(reply),
    }
}

// ---------------------------------------------------------------------------------------
// Ranges.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeBy {
    Rank,
    Score,
    Lex,
}

/// A parsed range request (ZRANGE and its older forms).
struct RangeRequest {
    by: RangeBy,
    reverse: bool,
    with_scores: bool,
    offset: i64,
    limit: i64,
    min: Bytes,
    max: Bytes,
}

/// Parses `min max [options]` from `args` (which start at min). `fixed` gives the older
/// commands' range type and direction, which their options may not change.
fn parse_range(
    args: &[Bytes],
    fixed: Option<(RangeBy, bool)>,
    store: bool,
) -> Result<RangeRequest, &'static str> {
    let mut by = fixed.map(|(by, _)| by);
    let mut reverse = fixed.map(|(_, reverse)| reverse);
    let mut with_scores = false;
    let mut offset = 0;
    let mut limit = -1;
    let mut index = 2;
    while index < args.len() {
        let arg = &args[index];
        let left = args.len() - index - 1;
        if is(arg, "WITHSCORES") && !store {
            with_scores = true;
        } else if is(arg, "LIMIT") && left >= 2 {
            offset = weft_resp::parse_i64_strict(&args[index + 1]).ok_or(errors::NOT_INTEGER)?;
            limit = weft_resp::parse_i64_strict(&args[index + 2]).ok_or(errors::NOT_INTEGER)?;
            index += 2;
        } else if reverse.is_none() && is(arg, "REV") {
            reverse = Some(true);
        } else if by.is_none() && is(arg, "BYLEX") {
            by = Some(RangeBy::Lex);
        } else if by.is_none() && is(arg, "BYSCORE") {
            by = Some(RangeBy::Score);
        } else {
            return Err(errors::SYNTAX);
        }
        index += 1;
    }
    let by = by.unwrap_or(RangeBy::Rank);
    let reverse = reverse.unwrap_or(false);
    // As Redis: only a LIMIT count other than -1 counts as a limit here.
    if limit != -1 && by == RangeBy::Rank {
        return Err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if with_scores && by == RangeBy::Lex {
        return Err("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let (mut min, mut max) = (args[0].clone(), args[1].clone());
    if reverse && by != RangeBy::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    Ok(RangeRequest {
        by,
        reverse,
        with_scores,
        offset,
        limit,
        min,
        max,
    })
}

/// A range's bounds, parsed and checked before the key is looked up (as Redis does).
enum Bounds {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    Lex(LexRange),
}

fn bounds(request: &RangeRequest) -> Result<Bounds, &'static str> {
    match request.by {
        RangeBy::Rank => {
            let start = weft_resp::parse_i64_strict(&request.min).ok_or(errors::NOT_INTEGER)?;
            let end = weft_resp::parse_i64_strict(&request.max).ok_or(errors::NOT_INTEGER)?;
            Ok(Bounds::Rank(start, end))
        }
        RangeBy::Score => {
            let min = parse_score_bound(&request.min).ok_or(NOT_FLOAT_RANGE)?;
            let max = parse_score_bound(&request.max).ok_or(NOT_FLOAT_RANGE)?;
            Ok(Bounds::Score(min, max))
        }
        RangeBy::Lex => parse_lex_range(&request.min, &request.max)
            .map(Bounds::Lex)
            .ok_or(NOT_LEX_RANGE),
    }
}

/// The members a range selects.
fn select(zset: &SortedSetValue, request: &RangeRequest, bounds: &Bounds) -> Vec<(Bytes, f64)> {
    let limited = |members: Vec<(Bytes, f64)>| -> Vec<(Bytes, f64)> {
        if request.offset < 0 {
            return Vec::new();
        }
        let offset = usize::try_from(request.offset).unwrap_or(usize::MAX);
        let take = usize::try_from(request.limit).unwrap_or(usize::MAX);
        members.into_iter().skip(offset).take(take).collect()
    };
    match bounds {
        Bounds::Rank(start, end) => {
            let Some((from, to)) = rank_range(*start, *end, zset.len()) else {
                return Vec::new();
            };
            let count = to - from + 1;
            if request.reverse {
                zset.iter()
                    .rev()
                    .skip(from)
                    .take(count)
                    .map(|(m, s)| (m.clone(), s))
                    .collect()
            } else {
                zset.iter()
                    .skip(from)
                    .take(count)
                    .map(|(m, s)| (m.clone(), s))
                    .collect()
            }
        }
        Bounds::Score(min, max) => limited(by_score(zset, *min, *max, request.reverse)),
        Bounds::Lex(range) => limited(
            range
                .members(zset, request.reverse)
                .into_iter()
                .map(|(m, s)| (m.clone(), s))
                .collect(),
        ),
    }
}

fn range_command(
    session: &Session,
    key: &[u8],
    args: &[Bytes],
    fixed: Option<(RangeBy, bool)>,
    reply: &mut Reply<'_>,
) {
    let request = match parse_range(args, fixed, false) {
        Ok(request) => request,
        Err(text) => return reply.error(text),
    };
    let bounds = match bounds(&request) {
        Ok(bounds) => bounds,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SortedSetValue, _>(session, key, reply, |zset, reply| {
        let members = zset
            .map(|zset| select(zset, &request, &bounds))
            .unwrap_or_default();
        members_reply(reply, &members, request.with_scores);
    });
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`
pub fn zrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, &args[1], &args[2..], None, reply);
}

/// `ZREVRANGE key start stop [WITHSCORES]`
pub fn zrevrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(
        session,
        &args[1],
        &args[2..],
        Some((RangeBy::Rank, true)),
        reply,
    );
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
pub fn zrangebyscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(
        session,
        &args[1],
        &args[2..],
        Some((RangeBy::Score, false)),
        reply,
    );
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
pub fn zrevrangebyscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(
        session,
        &args[1],
        &args[2..],
        Some((RangeBy::Score, true)),
        reply,
    );
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`
pub fn zrangebylex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(
        session,
        &args[1],
        &args[2..],
        Some((RangeBy::Lex, false)),
        reply,
    );
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
pub fn zrevrangebylex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(
        session,
        &args[1],
        &args[2..],
        Some((RangeBy::Lex, true)),
        reply,
    );
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`
pub fn zrangestore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let request = match parse_range(&args[3..], None, true) {
        Ok(request) => request,
        Err(text) => return reply.error(text),
    };
    let bounds = match bounds(&request) {
        Ok(bounds) => bounds,
        Err(text) => return reply.error(text),
    };
    let members = match collections::read::<SortedSetValue, _>(session, &args[2], |zset| {
        zset.map(|zset| select(zset, &request, &bounds))
            .unwrap_or_default()
    }) {
        Ok(members) => members,
        Err(failure) => return failure.reply(reply),
    };
    let mut result = SortedSetValue::default();
    for (member, score) in &members {
        result.insert(member.clone(), *score);
    }
    match collections::replace(session, &args[1], Structure::SortedSet(result)) {
        Ok(()) => count_reply(reply, members.len()),
        Err(failure) => failure.reply(reply),
    }
}

// ---------------------------------------------------------------------------------------
// Removal by range, pops.

fn remove_members(
    session: &Session,
    key: &[u8],
    reply: &mut Reply<'_>,
    pick: impl FnOnce(&SortedSetValue) -> Vec<Bytes>,
) {
    let result = collections::write::<SortedSetValue, _>(session, key, false, |zset| {
        let doomed = pick(zset);
        for member in &doomed {
            zset.remove(member);
        }
        (doomed.len(), !doomed.is_empty())
    });
    match result {
        Ok(removed) => count_reply(reply, removed.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `ZREMRANGEBYSCORE key min max`
pub fn zremrangebyscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(min), Some(max)) = (parse_score_bound(&args[2]), parse_score_bound(&args[3])) else {
        return reply.error(NOT_FLOAT_RANGE);
    };
    remove_members(session, &args[1], reply, |zset| {
        zset.range_by_score(min, max)
            .into_iter()
            .map(|(m, _)| m)
            .collect()
    });
}

/// `ZREMRANGEBYRANK key start stop`
pub fn zremrangebyrank(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (Some(start), Some(end)) = (
        weft_resp::parse_i64_strict(&args[2]),
        weft_resp::parse_i64_strict(&args[3]),
    ) else {
        return reply.error(errors::NOT_INTEGER);
    };
    remove_members(session, &args[1], reply, |zset| {
        match rank_range(start, end, zset.len()) {
            Some((from, to)) => zset
                .iter()
                .skip(from)
                .take(to - from + 1)
                .map(|(m, _)| m.clone())
                .collect(),
            None => Vec::new(),
        }
    });
}

/// `ZREMRANGEBYLEX key min max`
pub fn zremrangebylex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(range) = parse_lex_range(&args[2], &args[3]) else {
        return reply.error(NOT_LEX_RANGE);
    };
    remove_members(session, &args[1], reply, |zset| {
        range
            .members(zset, false)
            .into_iter()
            .map(|(m, _)| m.clone())
            .collect()
    });
}

fn pop(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, max: bool) {
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
    let result = collections::write::<SortedSetValue, _>(session, &args[1], false, |zset| {
        let take = count.unwrap_or(1).min(zset.len());
        let popped: Vec<(Bytes, f64)> = if max {
            zset.iter()
                .rev()
                .take(take)
                .map(|(m, s)| (m.clone(), s))
                .collect()
        } else {
            zset.iter()
                .take(take)
                .map(|(m, s)| (m.clone(), s))
                .collect()
        };
        for (member, _) in &popped {
            zset.remove(member);
        }
        let changed = !popped.is_empty();
        (popped, changed)
    });
    let popped = match result {
        Ok(popped) => popped.unwrap_or_default(),
        Err(failure) => return failure.reply(reply),
    };
    if count.is_none() {
        // No count: a flat [member, score] (RESP3 too).
        reply.array(popped.len() * 2);
        for (member, score) in &popped {
            reply.bulk(member);
            reply.double(*score);
        }
    } else {
        members_reply(reply, &popped, true);
    }
}

/// `ZPOPMIN key [count]`
pub fn zpopmin(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    pop(session, args, reply, false);
}

/// `ZPOPMAX key [count]`
pub fn zpopmax(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    pop(session, args, reply, true);
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`
pub fn zrandmember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut with_scores = false;
    let count = match args.len() {
        2 => None,
        3 | 4 => {
            if args.len() == 4 {
                if !is(&args[3], "WITHSCORES") {
                    return reply.error(errors::SYNTAX);
                }
                with_scores = true;
            }
            match weft_resp::parse_i64_strict(&args[2]) {
                Some(i64::MIN) => {
                    return reply.error(
                        "ERR value is out of range, value must between -9223372036854775807 \
                         and 9223372036854775807",
                    );
                }
                Some(count) => Some(count),
                None => return reply.error(errors::NOT_INTEGER),
            }
        }
        _ => return reply.error(errors::SYNTAX),
    };
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        let members: Vec<(&Bytes, f64)> = zset.map(|z| z.iter().collect()).unwrap_or_default();
        let Some(count) = count else {
            return if members.is_empty() {
                reply.null()
            } else {
                reply.bulk(members[random_below(members.len())].0);
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
        let chosen: Vec<(Bytes, f64)> = picks
            .into_iter()
            .map(|i| (members[i].0.clone(), members[i].1))
            .collect();
        members_reply(reply, &chosen, with_scores);
    });
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`: members and scores (as text).
pub fn zscan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let scan = match ScanArgs::parse(args) {
        Ok(scan) => scan,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        let mut texts: Vec<(Bytes, String)> = Vec::new();
        if let Some(zset) = zset
            && scan.cursor == 0
        {
            for (member, score) in zset.iter() {
                if scan.wanted(member) {
                    texts.push((member.clone(), weft_resp::format_double_reply(score)));
                }
            }
        }
        let items: Vec<&[u8]> = texts
            .iter()
            .flat_map(|(member, score)| [&member[..], score.as_bytes()])
            .collect();
        collections::scan_reply(reply, items.into_iter());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves score bounds parse as Redis' do: exclusive prefix, infinities, NaN refused.
    #[test]
    fn score_bounds() {
        assert_eq!(parse_score_bound(b"(1.5"), Some(Bound::Excluded(1.5)));
        assert_eq!(
            parse_score_bound(b"-inf"),
            Some(Bound::Included(f64::NEG_INFINITY))
        );
        assert_eq!(
            parse_score_bound(b"(inf"),
            Some(Bound::Excluded(f64::INFINITY))
        );
        assert_eq!(parse_score_bound(b"nan"), None);
        assert_eq!(parse_score_bound(b"((1"), None);
        assert_eq!(parse_score_bound(b""), None);
    }

    // Proves lexicographic ranges and the always-empty test.
    #[test]
    fn lex_ranges() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let mut zset = SortedSetValue::default();
        for m in ["a", "b", "c", "d"] {
            zset.insert(b(m), 0.0);
        }
        let names = |min: &str, max: &str, reverse| -> Vec<String> {
            let range = parse_lex_range(&b(min), &b(max)).expect("valid");
            range
                .members(&zset, reverse)
                .iter()
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect()
        };
        assert_eq!(names("[b", "(d", false), ["b", "c"]);
        assert_eq!(names("-", "+", true), ["d", "c", "b", "a"]);
        assert!(names("(b", "(b", false).is_empty());
        assert!(names("+", "-", false).is_empty());
        assert!(parse_lex_range(&b("b"), &b("+")).is_none());
    }
}
