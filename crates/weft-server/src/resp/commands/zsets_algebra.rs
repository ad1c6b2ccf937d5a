//! Sorted-set algebra: ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZUNION ZINTER ZDIFF ZINTERCARD
//! (Redis' `zunionInterDiffGenericCommand`).
//!
//! Inputs may be sorted sets or sets (whose members score 1). As in Redis: `numkeys` is
//! checked first, then every key's type, then the options (`WEIGHTS`, `AGGREGATE`,
//! `WITHSCORES`, `LIMIT`); inputs are taken smallest first for the intersection and the
//! union (a stable order, so sums of the same inputs round the same way); a weighted score
//! or a sum that is NaN (`inf - inf`, `0 × inf`) counts as 0. A stored result starts large
//! and goes back to the compact encoding when it fits, as Redis converts it.

use std::collections::HashMap;

use bytes::Bytes;
use weft_core::Structure;
use weft_core::structure::SortedSetValue;

use super::collections::{self, Failure};
use super::sets::{count_reply, with_structures};
use super::zsets::{members_reply, parse_score};
use super::{errors, is};
use crate::resp::{Reply, Session};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    /// Redis' `zunionInterAggregate`.
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Self::Sum => {
                *target += value;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Self::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Self::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// What the command does with the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    /// Store into `args[1]` (`*STORE`).
    Store,
    /// Reply with the members (`ZUNION`, `ZINTER`, `ZDIFF`).
    Reply,
    /// Reply with the intersection's size (`ZINTERCARD`).
    Cardinality,
}

/// One input: a sorted set or a set (members score 1), missing inputs are empty.
#[derive(Clone, Copy)]
enum Source<'s> {
    Missing,
    Sorted(&'s SortedSetValue),
    Set(&'s weft_core::structure::SetValue),
}

impl<'s> Source<'s> {
    fn len(self) -> usize {
        match self {
            Self::Missing => 0,
            Self::Sorted(zset) => zset.len(),
            Self::Set(set) => set.len(),
        }
    }

    fn score(self, member: &[u8]) -> Option<f64> {
        match self {
            Self::Missing => None,
            Self::Sorted(zset) => zset.score(member),
            Self::Set(set) => set.contains(member).then_some(1.0),
        }
    }

    /// Members with scores, in Redis' iteration order (`zuiNext`: sorted sets highest
    /// first).
    fn members(self) -> Box<dyn Iterator<Item = (&'s Bytes, f64)> + 's> {
        match self {
            Self::Missing => Box::new(std::iter::empty()),
            Self::Sorted(zset) => Box::new(zset.iter().rev()),
            Self::Set(set) => Box::new(set.iter().map(|member| (member, 1.0))),
        }
    }
}

/// The options after the keys.
struct Options {
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
    limit: usize,
}

fn parse_options(
    rest: &[Bytes],
    keys: usize,
    op: Op,
    output: Output,
) -> Result<Options, &'static str> {
    let mut options = Options {
        weights: vec![1.0; keys],
        aggregate: Aggregate::Sum,
        with_scores: false,
        limit: 0,
    };
    let cardinality = output == Output::Cardinality;
    let mut index = 0;
    while index < rest.len() {
        let remaining = rest.len() - index;
        let arg = &rest[index];
        if op != Op::Diff && !cardinality && remaining > keys && is(arg, "WEIGHTS") {
            for (weight, text) in options.weights.iter_mut().zip(&rest[index + 1..]) {
                *weight = parse_score(text).ok_or("ERR weight value is not a float")?;
            }
            index += 1 + keys;
        } else if op != Op::Diff && !cardinality && remaining >= 2 && is(arg, "AGGREGATE") {
            let name = &rest[index + 1];
            options.aggregate = if is(name, "SUM") {
                Aggregate::Sum
            } else if is(name, "MIN") {
                Aggregate::Min
            } else if is(name, "MAX") {
                Aggregate::Max
            } else {
                return Err(errors::SYNTAX);
            };
            index += 2;
        } else if output == Output::Reply && is(arg, "WITHSCORES") {
            options.with_scores = true;
            index += 1;
        } else if cardinality && remaining >= 2 && is(arg, "LIMIT") {
            let limit = weft_resp::parse_i64_strict(&rest[index + 1])
                .and_then(|n| usize::try_from(n).ok())
                .ok_or("ERR LIMIT can't be negative")?;
            options.limit = limit;
            index += 2;
        } else {
            return Err(errors::SYNTAX);
        }
    }
    Ok(options)
}

/// The intersection's members with their aggregated scores, in the first (smallest)
/// input's order; stops after `limit` members when `limit` is not 0.
fn intersect<'s>(
    sources: &[(Source<'s>, f64)],
    aggregate: Aggregate,
    limit: usize,
) -> Vec<(&'s Bytes, f64)> {
    let Some(((first, first_weight), others)) = sources.split_first() else {
        return Vec::new();
    };
    let mut result = Vec::new();
    if first.len() == 0 {
        return result;
    }
    'members: for (member, score) in first.members() {
        let mut total = first_weight * score;
        if total.is_nan() {
            total = 0.0;
        }
        for (source, weight) in others {
            let Some(value) = source.score(member) else {
                continue 'members;
            };
            aggregate.apply(&mut total, value * weight);
        }
        result.push((member, total));
        if limit != 0 && result.len() >= limit {
            break;
        }
    }
    result
}

/// The union's members with their aggregated scores.
fn unite<'s>(sources: &[(Source<'s>, f64)], aggregate: Aggregate) -> Vec<(&'s Bytes, f64)> {
    let mut totals: HashMap<&[u8], (&'s Bytes, f64)> = HashMap::new();
    for (source, weight) in sources {
        for (member, score) in source.members() {
            let mut value = weight * score;
            if value.is_nan() {
                value = 0.0;
            }
            totals
                .entry(&member[..])
                .and_modify(|(_, total)| aggregate.apply(total, value))
                .or_insert((member, value));
        }
    }
    totals.into_values().collect()
}

/// The first input's members that no other input holds, with their scores.
fn subtract<'s>(sources: &[(Source<'s>, f64)]) -> Vec<(&'s Bytes, f64)> {
    let Some(((first, _), others)) = sources.split_first() else {
        return Vec::new();
    };
    first
        .members()
        .filter(|(member, _)| {
            others
                .iter()
                .all(|(source, _)| source.score(member).is_none())
        })
        .collect()
}

/// What one command computes under the inputs' locks.
enum Outcome {
    Stored(SortedSetValue),
    Members(Vec<(Bytes, f64)>, bool),
    Count(usize),
}

fn algebra(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, op: Op, output: Output) {
    let (name, numkeys_at) = match output {
        Output::Store => (&args[0], 2),
        _ => (&args[0], 1),
    };
    let Some(numkeys) = weft_resp::parse_i64_strict(&args[numkeys_at]) else {
        return reply.error(errors::NOT_INTEGER);
    };
    if numkeys < 1 {
        return reply.error(&format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(name).to_ascii_lowercase()
        ));
    }
    let first_key = numkeys_at + 1;
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > args.len() - first_key {
        return reply.error(errors::SYNTAX);
    }
    let keys = &args[first_key..first_key + numkeys];
    let rest = &args[first_key + numkeys..];
    let outcome = with_structures(session, keys, |structures| {
        let mut sources = Vec::with_capacity(structures.len());
        for structure in structures {
            sources.push(match structure {
                None => Source::Missing,
                Some(Structure::SortedSet(zset)) => Source::Sorted(zset),
                Some(Structure::Set(set)) => Source::Set(set),
                Some(_) => return Err(Err(Failure::WrongType)),
            });
        }
        let options = parse_options(rest, numkeys, op, output).map_err(Ok)?;
        let mut inputs: Vec<(Source<'_>, f64)> = sources
            .into_iter()
            .zip(options.weights.iter().copied())
            .collect();
        if op != Op::Diff {
            inputs.sort_by_key(|(source, _)| source.len());
        }
        let members = match op {
            Op::Inter => intersect(&inputs, options.aggregate, options.limit),
            Op::Union => unite(&inputs, options.aggregate),
            Op::Diff => subtract(&inputs),
        };
        if output == Output::Cardinality {
            return Ok(Outcome::Count(members.len()));
        }
        let mut result = SortedSetValue::new_large();
        for (member, score) in members {
            result.insert(member.clone(), score);
        }
        Ok(match output {
            Output::Store => {
                result.compact_if_small();
                Outcome::Stored(result)
            }
            _ => Outcome::Members(
                result.iter().map(|(m, s)| (m.clone(), s)).collect(),
                options.with_scores,
            ),
        })
    });
    let outcome = match outcome {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(Ok(text))) => return reply.error(text),
        Ok(Err(Err(failure))) | Err(failure) => return failure.reply(reply),
    };
    match outcome {
        Outcome::Count(count) => count_reply(reply, count),
        Outcome::Members(members, with_scores) => {
            let members: Vec<(&Bytes, f64)> = members.iter().map(|(m, s)| (m, *s)).collect();
            members_reply(reply, &members, with_scores);
        }
        Outcome::Stored(result) => {
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
    }
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]`
pub fn zunionstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Union, Output::Store);
}

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]`
pub fn zinterstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Inter, Output::Store);
}

/// `ZDIFFSTORE destination numkeys key [key ...]`
pub fn zdiffstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Diff, Output::Store);
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`
pub fn zunion(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Union, Output::Reply);
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`
pub fn zinter(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Inter, Output::Reply);
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`
pub fn zdiff(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Diff, Output::Reply);
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`
pub fn zintercard(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    algebra(session, args, reply, Op::Inter, Output::Cardinality);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves SUM turns inf - inf into 0 and MIN/MAX keep the extreme.
    #[test]
    fn aggregates() {
        let mut total = f64::INFINITY;
        Aggregate::Sum.apply(&mut total, f64::NEG_INFINITY);
        assert_eq!(total, 0.0);
        let mut low = 3.0;
        Aggregate::Min.apply(&mut low, 1.0);
        Aggregate::Min.apply(&mut low, 2.0);
        assert_eq!(low, 1.0);
        let mut high = 3.0;
        Aggregate::Max.apply(&mut high, 5.0);
        assert_eq!(high, 5.0);
    }

    // Proves option parsing follows Redis: WEIGHTS needs one per key, AGGREGATE names,
    // WITHSCORES only when replying, LIMIT only for ZINTERCARD.
    #[test]
    fn options() {
        let args = |items: &[&str]| -> Vec<Bytes> {
            items
                .iter()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect()
        };
        let parsed = parse_options(
            &args(&["WEIGHTS", "2", "0.5", "AGGREGATE", "max"]),
            2,
            Op::Union,
            Output::Store,
        )
        .expect("valid");
        assert_eq!(parsed.weights, [2.0, 0.5]);
        assert_eq!(parsed.aggregate, Aggregate::Max);
        for (rest, op, output, error) in [
            (
                vec!["WEIGHTS", "1"],
                Op::Union,
                Output::Store,
                errors::SYNTAX,
            ),
            (
                vec!["WEIGHTS", "x", "1"],
                Op::Union,
                Output::Store,
                "ERR weight value is not a float",
            ),
            (
                vec!["AGGREGATE", "avg"],
                Op::Inter,
                Output::Reply,
                errors::SYNTAX,
            ),
            (vec!["WITHSCORES"], Op::Union, Output::Store, errors::SYNTAX),
            (
                vec!["WEIGHTS", "1", "1"],
                Op::Diff,
                Output::Reply,
                errors::SYNTAX,
            ),
            (
                vec!["LIMIT", "-1"],
                Op::Inter,
                Output::Cardinality,
                "ERR LIMIT can't be negative",
            ),
        ] {
            assert_eq!(
                parse_options(&args(&rest), 2, op, output).err(),
                Some(error)
            );
        }
    }
}
