//! Sorted-set commands: ZADD (NX XX GT LT CH INCR) ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZCOUNT
//! ZLEXCOUNT ZRANK ZREVRANK ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES) ZRANGEBYSCORE
//! ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZRANGESTORE ZREMRANGEBYSCORE
//! ZREMRANGEBYRANK ZREMRANGEBYLEX ZPOPMIN ZPOPMAX ZRANDMEMBER ZSCAN (the union, intersection
//! and difference commands are in `zsets_algebra`).
//!
//! Arguments are checked in the order Redis 7.0 checks them (`t_zset.c`). Scores print as
//! Redis 7.0 prints them (`%.17g`, `weft_resp::write_double`). Lexicographic ranges follow
//! Redis' algorithm for small sorted sets (which assumes equal scores): start at the first
//! member, in score order, that is at least the minimum, and go on while members are at
//! most the maximum; a large set whose scores differ may answer otherwise in Redis, whose
//! skiplist search then depends on its random levels.

use std::ops::Bound;

use bytes::Bytes;
use weft_core::Structure;
use weft_core::structure::{SortedSetValue, limits};

use super::collections::{self, ScanOptions, scan_cursor, scan_reply};
use super::hashes::random_pick_args;
use super::keys::random_below;
use super::sets::{NOT_POSITIVE, count_reply, distinct_picks};
use super::{errors, is};
use crate::resp::{Reply, Session};

const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";
const NAN_SCORE: &str = "ERR resulting score is not a number (NaN)";

/// A score argument (ZADD, ZINCRBY, weights): Redis' `string2d`, NaN refused.
pub(crate) fn parse_score(arg: &[u8]) -> Option<f64> {
    weft_resp::parse_f64_redis(arg).filter(|score| !score.is_nan())
}

/// A score bound: `(` for exclusive, then what `strtod` reads.
fn parse_score_bound(arg: &[u8]) -> Option<Bound<f64>> {
    match arg.strip_prefix(b"(") {
        Some(rest) => parse_bound_value(rest).map(Bound::Excluded),
        None => parse_bound_value(arg).map(Bound::Included),
    }
}

/// A range bound's number as Redis reads it (`zslParseRange`: `strtod` on the C string,
/// which must be consumed to its end): leading spaces allowed, overflow reads as ±inf,
/// empty text as 0, text after a NUL byte is not looked at, NaN is refused.
fn parse_bound_value(text: &[u8]) -> Option<f64> {
    let text = &text[..text.iter().position(|&b| b == 0).unwrap_or(text.len())];
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))?;
    let trimmed = &text[start..];
    let value = weft_resp::parse_f64_redis(trimmed).or_else(|| {
        // What `parse_f64_redis` refuses as out of range, strtod returns as ±inf or 0.
        let text = std::str::from_utf8(trimmed).ok()?;
        let first = text.as_bytes().first()?;
        if !(first.is_ascii_digit() || matches!(first, b'-' | b'+' | b'.')) {
            return None;
        }
        text.parse::<f64>().ok()
    })?;
    (!value.is_nan()).then_some(value)
}

/// Redis 7.0's `d2string`, the score text a small sorted set stores (and ZSCAN returns):
/// integral values within ±2^62 as integers, everything else `%.17g`.
fn d2string(score: f64) -> String {
    const INTEGER_MAX: f64 = (i64::MAX / 2) as f64;
    if score != 0.0 && score.trunc() == score && score.abs() <= INTEGER_MAX {
        // Integral and within range, so the cast is exact.
        #[allow(clippy::cast_possible_truncation)]
        let integer = score as i64;
        return itoa::Buffer::new().format(integer).to_owned();
    }
    weft_resp::format_double_g17(score)
}

/// A lexicographic bound.
#[derive(Debug, Clone)]
enum Lex {
    Min,
    Max,
    Inclusive(Bytes),
    Exclusive(Bytes),
}

/// `zslParseLexRangeItem`: `-`, `+`, `[x`, `(x` (C-string rules: a NUL ends `-` and `+`).
fn parse_lex_bound(arg: &Bytes) -> Option<Lex> {
    let alone = arg.get(1).is_none_or(|&b| b == 0);
    match arg.first() {
        Some(b'-') if alone => Some(Lex::Min),
        Some(b'+') if alone => Some(Lex::Max),
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

    /// Redis' test for a range that is always empty (`-` and `+` count as exclusive).
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

    /// Redis' `zzlIsInLexRange`: not always empty, the last member at least the minimum and
    /// the first at most the maximum.
    fn may_match(&self, zset: &SortedSetValue) -> bool {
        let (Some((first, _)), Some((last, _))) = (zset.iter().next(), zset.iter().next_back())
        else {
            return false;
        };
        !self.is_empty() && self.gte_min(last) && self.lte_max(first)
    }

    /// Members from the start of the range on, in range order (Redis' `zzlFirstInLexRange`
    /// / `zzlLastInLexRange`); empty when that start is not in the range. Callers stop at
    /// the first member past the range's other end.
    fn members_from_start<'z>(
        &self,
        zset: &'z SortedSetValue,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = (&'z Bytes, f64)> + 'z> {
        if !self.may_match(zset) {
            return Box::new(std::iter::empty());
        }
        let mut members: std::iter::Peekable<Box<dyn Iterator<Item = (&'z Bytes, f64)> + 'z>> =
            if reverse {
                let iter: Box<dyn Iterator<Item = _>> = Box::new(zset.iter().rev());
                iter.peekable()
            } else {
                let iter: Box<dyn Iterator<Item = _>> = Box::new(zset.iter());
                iter.peekable()
            };
        while let Some((member, _)) = members.peek() {
            let reached = if reverse {
                self.lte_max(member)
            } else {
                self.gte_min(member)
            };
            if reached {
                let inside = if reverse {
                    self.gte_min(member)
                } else {
                    self.lte_max(member)
                };
                return if inside {
                    Box::new(members)
                } else {
                    Box::new(std::iter::empty())
                };
            }
            members.next();
        }
        Box::new(std::iter::empty())
    }

    /// Whether `member` is still inside the range going forward (or, `reverse`, backward).
    fn continues(&self, member: &[u8], reverse: bool) -> bool {
        if reverse {
            self.gte_min(member)
        } else {
            self.lte_max(member)
        }
    }

    /// The members a lex range selects: Redis skips `offset` members from the start without
    /// looking at them, then takes up to `limit` while they stay in range.
    fn select<'z>(
        &self,
        zset: &'z SortedSetValue,
        reverse: bool,
        offset: i64,
        limit: i64,
    ) -> Vec<(&'z Bytes, f64)> {
        limited(self.members_from_start(zset, reverse), offset, limit)
            .take_while(|(member, _)| self.continues(member, reverse))
            .collect()
    }
}

fn parse_lex_range(min: &Bytes, max: &Bytes) -> Option<LexRange> {
    Some(LexRange {
        min: parse_lex_bound(min)?,
        max: parse_lex_bound(max)?,
    })
}

/// Redis' LIMIT over a range's members: a negative offset selects nothing (Redis walks off
/// the end), a negative count means all.
fn limited<'z, I: Iterator<Item = (&'z Bytes, f64)>>(
    members: I,
    offset: i64,
    limit: i64,
) -> impl Iterator<Item = (&'z Bytes, f64)> {
    let skip = usize::try_from(offset).unwrap_or(usize::MAX);
    let take = usize::try_from(limit).unwrap_or(usize::MAX);
    members.skip(skip).take(take)
}

/// Redis' rank normalisation: an inclusive range within `0..len`, or `None`.
fn rank_range(start: i64, end: i64, len: usize) -> Option<(usize, usize)> {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let start = if start < 0 {
        start.saturating_add(len).max(0)
    } else {
        start
    };
    let end = if end < 0 {
        end.saturating_add(len)
    } else {
        end
    };
    if start > end || start >= len {
        return None;
    }
    let end = end.min(len - 1);
    Some((usize::try_from(start).ok()?, usize::try_from(end).ok()?))
}

/// Writes members (with scores if asked): RESP3 `[member, score]` pairs, RESP2 flat.
pub(crate) fn members_reply(reply: &mut Reply<'_>, members: &[(&Bytes, f64)], with_scores: bool) {
    let resp3 = reply.protocol() == weft_resp::Protocol::Resp3;
    if with_scores && !resp3 {
        reply.array(members.len() * 2);
    } else {
        reply.array(members.len());
    }
    for (member, score) in members {
        member_reply(reply, member, *score, with_scores, resp3);
    }
}

fn member_reply(reply: &mut Reply<'_>, member: &[u8], score: f64, with_scores: bool, resp3: bool) {
    if with_scores && resp3 {
        reply.array(2);
    }
    reply.bulk(member);
    if with_scores {
        reply.double(score);
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

/// What adding one member did (Redis' `zsetAdd` out flags).
enum Added {
    New,
    Updated,
    Unchanged,
    Skipped,
    Nan,
}

fn add_one(zset: &mut SortedSetValue, member: &[u8], score: f64, flags: AddFlags) -> (Added, f64) {
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
            zset.set_score(member, new);
            (Added::Updated, new)
        }
        None => {
            if flags.xx {
                return (Added::Skipped, score);
            }
            zset.set_score(member, score);
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
        } else if is(arg, "CH") {
            flags.ch = true;
        } else if is(arg, "INCR") {
            flags.incr = true;
        } else if is(arg, "GT") {
            flags.gt = true;
        } else if is(arg, "LT") {
            flags.lt = true;
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
    let mut scores = Vec::with_capacity(rest.len() / 2);
    for pair in rest.chunks_exact(2) {
        let Some(score) = parse_score(&pair[0]) else {
            return reply.error(errors::NOT_FLOAT);
        };
        scores.push(score);
    }
    let result = collections::write::<SortedSetValue, _>(session, &args[1], !flags.xx, |zset| {
        let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
        let mut last = 0.0;
        for (score, pair) in scores.iter().zip(rest.chunks_exact(2)) {
            let (outcome, new) = add_one(zset, &pair[1], *score, flags);
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
            if added > 0 {
                // Clients blocked in BZPOPMIN and friends wait for members.
                super::lists::signal_stored(session, &args[1]);
            }
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
        Ok(Some(Ok(score))) => {
            super::lists::signal_stored(session, &args[1]);
            reply.double(score);
        }
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

/// `ZRANK key member` (`WITHSCORE` is Redis 7.2's: a syntax the arity refuses here).
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
        zset.map_or(0, |zset| zset.count_by_score(min, max))
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
        zset.map_or(0, |zset| range.select(zset, false, 0, -1).len())
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
    bounds: Bounds,
}

/// A range's bounds, parsed and checked before the key is looked up (as Redis does).
enum Bounds {
    Rank(i64, i64),
    Score(Bound<f64>, Bound<f64>),
    Lex(LexRange),
}

/// Parses `min max [options]` from `args` (which start at min), as `zrangeGenericCommand`:
/// options, then their conflicts, then the bounds. `fixed` gives the older commands' range
/// type and direction, which their options may not change.
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
        if !store && is(arg, "WITHSCORES") {
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
    let (mut min, mut max) = (&args[0], &args[1]);
    if reverse && by != RangeBy::Rank {
        std::mem::swap(&mut min, &mut max);
    }
    let bounds = match by {
        RangeBy::Rank => Bounds::Rank(
            weft_resp::parse_i64_strict(min).ok_or(errors::NOT_INTEGER)?,
            weft_resp::parse_i64_strict(max).ok_or(errors::NOT_INTEGER)?,
        ),
        RangeBy::Score => Bounds::Score(
            parse_score_bound(min).ok_or(NOT_FLOAT_RANGE)?,
            parse_score_bound(max).ok_or(NOT_FLOAT_RANGE)?,
        ),
        RangeBy::Lex => Bounds::Lex(parse_lex_range(min, max).ok_or(NOT_LEX_RANGE)?),
    };
    Ok(RangeRequest {
        by,
        reverse,
        with_scores,
        offset,
        limit,
        bounds,
    })
}

/// The members in ranks `from..=to`, lowest first (or, `reverse`, highest first).
fn by_rank(zset: &SortedSetValue, from: usize, to: usize, reverse: bool) -> Vec<(&Bytes, f64)> {
    let count = to - from + 1;
    if reverse {
        zset.iter().rev().skip(from).take(count).collect()
    } else {
        zset.iter().skip(from).take(count).collect()
    }
}

/// The members a range selects, in reply order.
fn select<'z>(zset: &'z SortedSetValue, request: &RangeRequest) -> Vec<(&'z Bytes, f64)> {
    let (offset, limit) = (request.offset, request.limit);
    match &request.bounds {
        Bounds::Rank(start, end) => match rank_range(*start, *end, zset.len()) {
            Some((from, to)) => by_rank(zset, from, to, request.reverse),
            None => Vec::new(),
        },
        Bounds::Score(min, max) => {
            // Redis answers nothing at once for an offset past the end.
            if offset > 0 && usize::try_from(offset).unwrap_or(usize::MAX) >= zset.len() {
                return Vec::new();
            }
            if request.reverse {
                limited(zset.rev_range_by_score(*min, *max), offset, limit).collect()
            } else {
                limited(zset.range_by_score(*min, *max), offset, limit).collect()
            }
        }
        Bounds::Lex(range) => range.select(zset, request.reverse, offset, limit),
    }
}

fn range_command(
    session: &Session,
    args: &[Bytes],
    fixed: Option<(RangeBy, bool)>,
    reply: &mut Reply<'_>,
) {
    let request = match parse_range(&args[2..], fixed, false) {
        Ok(request) => request,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        let members = zset.map(|zset| select(zset, &request)).unwrap_or_default();
        members_reply(reply, &members, request.with_scores);
    });
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`
pub fn zrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, None, reply);
}

/// `ZREVRANGE key start stop [WITHSCORES]`
pub fn zrevrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, Some((RangeBy::Rank, true)), reply);
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`
pub fn zrangebyscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, Some((RangeBy::Score, false)), reply);
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`
pub fn zrevrangebyscore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, Some((RangeBy::Score, true)), reply);
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`
pub fn zrangebylex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, Some((RangeBy::Lex, false)), reply);
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`
pub fn zrevrangebylex(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, Some((RangeBy::Lex, true)), reply);
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`: the
/// destination is replaced (deleted when the range is empty); its encoding starts as Redis
/// picks it (large from the outset for a rank range longer than the compact limit).
pub fn zrangestore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let request = match parse_range(&args[3..], None, true) {
        Ok(request) => request,
        Err(text) => return reply.error(text),
    };
    let result = collections::read::<SortedSetValue, _>(session, &args[2], |zset| {
        let members = zset.map(|zset| select(zset, &request)).unwrap_or_default();
        let mut result = if request.by == RangeBy::Rank && members.len() > limits::zset_entries() {
            SortedSetValue::new_large()
        } else {
            SortedSetValue::default()
        };
        for (member, score) in members {
            result.insert(member.clone(), score);
        }
        result
    });
    let result = match result {
        Ok(result) => result,
        Err(failure) => return failure.reply(reply),
    };
    let len = result.len();
    match collections::replace(session, &args[1], Structure::SortedSet(result)) {
        Ok(()) => {
            if len > 0 {
                super::lists::signal_stored(session, &args[1]);
            }
            count_reply(reply, len);
        }
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
            .map(|(member, _)| member.clone())
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
            Some((from, to)) => by_rank(zset, from, to, false)
                .into_iter()
                .map(|(member, _)| member.clone())
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
            .select(zset, false, 0, -1)
            .into_iter()
            .map(|(member, _)| member.clone())
            .collect()
    });
}

/// Pops up to `count` members of the sorted set at `key`, lowest first (highest with
/// `last`); none when the key is missing.
fn pop_members(
    session: &Session,
    key: &Bytes,
    count: usize,
    last: bool,
) -> Result<Vec<(Bytes, f64)>, collections::Failure> {
    collections::write::<SortedSetValue, _>(session, key, false, |zset| {
        let take = count.min(zset.len());
        let popped: Vec<(Bytes, f64)> = (0..take).filter_map(|_| zset.pop(last)).collect();
        let changed = !popped.is_empty();
        (popped, changed)
    })
    .map(Option::unwrap_or_default)
}

fn pop(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, last: bool) {
    if args.len() > 3 {
        return reply.error(errors::SYNTAX);
    }
    let count = match args.get(2) {
        None => None,
        Some(arg) => match weft_resp::parse_i64_strict(arg).and_then(|n| usize::try_from(n).ok()) {
            Some(count) => Some(count),
            None => return reply.error(NOT_POSITIVE),
        },
    };
    let popped = match pop_members(session, &args[1], count.unwrap_or(1), last) {
        Ok(popped) => popped,
        Err(failure) => return failure.reply(reply),
    };
    let popped: Vec<(&Bytes, f64)> = popped.iter().map(|(m, s)| (m, *s)).collect();
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

/// `ZMPOP numkeys key [key …] MIN|MAX [COUNT count]`: pops up to `count` members from the
/// first key holding a sorted set, answering `[key, [[member, score], …]]`, or nil when every
/// key is empty. A key of another type is refused (WRONGTYPE), as Redis refuses it.
pub fn zmpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let parsed = super::lists::parse_mpop_with(&args[1..], min_or_max);
    let (keys, last, count) = match parsed {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(text),
    };
    match pop_first(session, keys, count, last, false) {
        Ok(Some((key, popped))) => mpop_reply(reply, key, &popped),
        Ok(None) => reply.null_array(),
        Err(failure) => failure.reply(reply),
    }
}

/// `BZPOPMIN key [key ...] timeout`
pub fn bzpopmin(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    blocking_pop(session, args, reply, false);
}

/// `BZPOPMAX key [key ...] timeout`
pub fn bzpopmax(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    blocking_pop(session, args, reply, true);
}

/// A key and the members popped from it, with their scores.
type Popped<'k> = (&'k Bytes, Vec<(Bytes, f64)>);

/// Pops from the first key (of those tried now) holding members; on a retry, keys holding
/// another type are passed over rather than refused, as Redis' blocked clients are.
fn pop_first<'k>(
    session: &Session,
    keys: &'k [Bytes],
    count: usize,
    last: bool,
    lenient: bool,
) -> Result<Option<Popped<'k>>, collections::Failure> {
    for key in keys {
        match pop_members(session, key, count, last) {
            Ok(popped) if !popped.is_empty() => return Ok(Some((key, popped))),
            Ok(_) | Err(collections::Failure::WrongType) if lenient => {}
            Ok(_) => {}
            Err(failure) => return Err(failure),
        }
    }
    Ok(None)
}

fn blocking_pop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>, last: bool) {
    use super::lists::blocking;
    let timeout = match blocking::parse_timeout(&args[args.len() - 1]) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let keys = &args[1..args.len() - 1];
    let (attempt, retrying) = blocking::attempt_keys(session, keys);
    match pop_first(session, &attempt, 1, last, retrying) {
        Ok(Some((key, popped))) => {
            let (member, score) = &popped[0];
            reply.array(3);
            reply.bulk(key);
            reply.bulk(member);
            reply.double(*score);
        }
        Ok(None) if blocking::may_block(session) => blocking::block(session, keys, timeout),
        Ok(None) => reply.null_array(),
        Err(failure) => failure.reply(reply),
    }
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`: the keys and options are
/// checked before the timeout, as Redis does.
pub fn bzmpop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    use super::lists::blocking;
    let parsed = super::lists::parse_mpop_with(&args[2..], min_or_max);
    let (keys, last, count) = match parsed {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(text),
    };
    let timeout = match blocking::parse_timeout(&args[1]) {
        Ok(timeout) => timeout,
        Err(text) => return reply.error(text),
    };
    let (attempt, retrying) = blocking::attempt_keys(session, keys);
    match pop_first(session, &attempt, count, last, retrying) {
        Ok(Some((key, popped))) => mpop_reply(reply, key, &popped),
        Ok(None) if blocking::may_block(session) => blocking::block(session, keys, timeout),
        Ok(None) => reply.null_array(),
        Err(failure) => failure.reply(reply),
    }
}

fn min_or_max(arg: &Bytes) -> Option<bool> {
    if is(arg, "MIN") {
        Some(false)
    } else if is(arg, "MAX") {
        Some(true)
    } else {
        None
    }
}

/// ZMPOP's and BZMPOP's answer: `[key, [[member, score], …]]`.
fn mpop_reply(reply: &mut Reply<'_>, key: &Bytes, popped: &[(Bytes, f64)]) {
    reply.array(2);
    reply.bulk(key);
    reply.array(popped.len());
    for (member, score) in popped {
        reply.array(2);
        reply.bulk(member);
        reply.double(*score);
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

/// `ZRANDMEMBER key [count [WITHSCORES]]`: a positive count picks distinct members (all of
/// them, highest first, once it reaches the size), a negative one may repeat them.
pub fn zrandmember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (count, with_scores) = match random_pick_args(args, "WITHSCORES") {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        let Some(count) = count else {
            return match zset.and_then(|zset| zset.random(random_below)) {
                Some((member, _)) => reply.bulk(member),
                None => reply.null(),
            };
        };
        let Some(zset) = zset else {
            return reply.array(0);
        };
        if count == 0 {
            return reply.array(0);
        }
        let resp3 = reply.protocol() == weft_resp::Protocol::Resp3;
        let wanted = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
        if count < 0 || count == 1 {
            // Sampled with repetition, streamed: a huge count stops at the output limit
            // (the connection is then closed, as Redis closes it).
            if with_scores && !resp3 {
                reply.array(wanted.saturating_mul(2));
            } else {
                reply.array(wanted);
            }
            for _ in 0..wanted {
                if reply.overflowed() {
                    break;
                }
                if let Some((member, score)) = zset.random(random_below) {
                    member_reply(reply, member, score, with_scores, resp3);
                }
            }
            return;
        }
        // Redis iterates a sorted set highest first here (`zuiNext`).
        let members: Vec<(&Bytes, f64)> = zset.iter().rev().collect();
        match distinct_picks(members.len(), wanted) {
            None => members_reply(reply, &members, with_scores),
            Some(picks) => {
                let chosen: Vec<(&Bytes, f64)> = picks.into_iter().map(|i| members[i]).collect();
                members_reply(reply, &chosen, with_scores);
            }
        }
    });
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`: members and scores as text. A small
/// sorted set is returned whole, lowest first, its scores as its listpack holds them
/// (`d2string`); a large one one step of a resumable cursor, scores as `%.17g`.
pub fn zscan(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let cursor = match scan_cursor(args) {
        Ok(cursor) => cursor,
        Err(text) => return reply.error(text),
    };
    collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
        let Some(zset) = zset else {
            return scan_reply(reply, 0, &[]);
        };
        let options = match ScanOptions::parse(args) {
            Ok(options) => options,
            Err(text) => return reply.error(text),
        };
        let compact = zset.is_compact();
        let mut texts: Vec<(&Bytes, String)> = Vec::new();
        let next = zset.scan(cursor, options.count, |member, score| {
            if options.wanted(member) {
                let text = if compact {
                    d2string(score)
                } else {
                    weft_resp::format_double_g17(score)
                };
                texts.push((member, text));
            }
        });
        let items: Vec<&[u8]> = texts
            .iter()
            .flat_map(|(member, score)| [&member[..], score.as_bytes()])
            .collect();
        scan_reply(reply, next, &items);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves score bounds parse as Redis' strtod-based ones: exclusive prefix, infinities,
    // overflow, leading spaces, empty text, NaN and trailing bytes refused.
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
        assert_eq!(parse_score_bound(b""), Some(Bound::Included(0.0)));
        assert_eq!(parse_score_bound(b"("), Some(Bound::Excluded(0.0)));
        assert_eq!(
            parse_score_bound(b"1e400"),
            Some(Bound::Included(f64::INFINITY))
        );
        assert_eq!(parse_score_bound(b" 5"), Some(Bound::Included(5.0)));
        assert_eq!(parse_score_bound(b"5 "), None);
        assert_eq!(parse_score_bound(b"  "), None);
        assert_eq!(parse_score_bound(b"5\0x"), Some(Bound::Included(5.0)));
    }

    // Proves lexicographic ranges, Redis' always-empty test and its skip-then-check LIMIT.
    #[test]
    fn lex_ranges() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let mut zset = SortedSetValue::default();
        for m in ["a", "b", "c", "d"] {
            zset.insert(b(m), 0.0);
        }
        let names = |zset: &SortedSetValue, min: &str, max: &str, reverse, offset, limit| {
            let range = parse_lex_range(&b(min), &b(max)).expect("valid");
            range
                .select(zset, reverse, offset, limit)
                .iter()
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect::<Vec<String>>()
        };
        assert_eq!(names(&zset, "[b", "(d", false, 0, -1), ["b", "c"]);
        assert_eq!(names(&zset, "-", "+", true, 0, -1), ["d", "c", "b", "a"]);
        assert_eq!(names(&zset, "-", "+", true, 1, 2), ["c", "b"]);
        assert!(names(&zset, "(b", "(b", false, 0, -1).is_empty());
        assert!(names(&zset, "+", "-", false, 0, -1).is_empty());
        assert!(names(&zset, "-", "-", false, 0, -1).is_empty());
        assert!(names(&zset, "[a", "+", false, -1, 5).is_empty());
        assert!(parse_lex_range(&b("b"), &b("+")).is_none());
        assert!(parse_lex_range(&b("+x"), &b("+")).is_none());
        assert!(parse_lex_range(&b(""), &b("+")).is_none());
        // Mixed scores: Redis skips `offset` members unchecked, then stops at the first
        // member out of range.
        let mut mixed = SortedSetValue::default();
        for (m, s) in [("a", 1.0), ("z", 2.0), ("b", 3.0)] {
            mixed.insert(b(m), s);
        }
        assert_eq!(names(&mixed, "[a", "[c", false, 0, -1), ["a"]);
        assert_eq!(names(&mixed, "[a", "[c", false, 2, -1), ["b"]);
    }

    // Proves small-set score texts follow d2string: integers within 2^62, else %.17g.
    #[test]
    fn listpack_score_texts() {
        assert_eq!(d2string(1e17), "100000000000000000");
        assert_eq!(d2string(1e20), "1e+20");
        assert_eq!(d2string(1.1), "1.1000000000000001");
        assert_eq!(d2string(-3.0), "-3");
        assert_eq!(d2string(0.0), "0");
        assert_eq!(d2string(f64::INFINITY), "inf");
    }

    // Proves rank normalisation clamps as Redis' does, including extreme values.
    #[test]
    fn rank_ranges() {
        assert_eq!(rank_range(0, -1, 5), Some((0, 4)));
        assert_eq!(rank_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(rank_range(3, 1, 5), None);
        assert_eq!(rank_range(5, 9, 5), None);
        assert_eq!(rank_range(i64::MIN, i64::MIN, 5), None);
        assert_eq!(rank_range(0, i64::MAX, 0), None);
    }
}
