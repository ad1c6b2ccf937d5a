//! SORT and SORT_RO: the elements of a list, set or sorted set, sorted by their own value
//! or by weights read from other keys (`BY weight_*`, `BY hash_*->field`), or left in their
//! native order (`BY nosort`), then sliced (`LIMIT`), mapped through other keys (`GET`), and
//! returned or stored as a list (`STORE`).
//!
//! Written after Redis 7.0's `sort.c`, whose corners clients see: a weight that is missing
//! counts as 0 (or sorts first with ALPHA); equal weights fall back to comparing the
//! elements, so the order is total; `BY` without `*` turns sorting off for good; a set is
//! sorted anyway (ALPHA) when its order would be stored or seen by a script; patterns are C
//! strings (a NUL ends them) while the key they build is not. ALPHA compares as the C
//! locale's `strcoll` does (bytes, up to a NUL), and with STORE byte for byte.
//!
//! Elements are copied out of the structure (reference-counted bytes) before any weight or
//! GET key is read, so no structure lock is held while other keys are looked up.

use std::cmp::Ordering;

use bytes::Bytes;
use weft_core::Structure;
use weft_core::structure::ListValue;

use super::collections::{self, WRONGTYPE};
use super::strings::cache_error;
use super::{errors, is};
use crate::resp::{Reply, Session};

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]`
pub fn sort(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    sort_generic(session, args, reply, false);
}

/// `SORT_RO key …`: SORT without STORE (a syntax error there), for read-only replicas and
/// scripts.
pub fn sort_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    sort_generic(session, args, reply, true);
}

/// SORT's options, as `sortCommandGeneric` parses them.
#[derive(Debug, Default)]
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a Bytes>,
    by: Option<&'a [u8]>,
    /// `BY` named a pattern without `*`: nothing is sorted, even if a later `BY` has one.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

impl<'a> Options<'a> {
    fn parse(args: &'a [Bytes], readonly: bool) -> Result<Self, &'static str> {
        let mut options = Self {
            limit_count: -1,
            ..Self::default()
        };
        let mut j = 2;
        while j < args.len() {
            let word = &args[j];
            let left = args.len() - j - 1;
            if is(word, "asc") {
                options.desc = false;
            } else if is(word, "desc") {
                options.desc = true;
            } else if is(word, "alpha") {
                options.alpha = true;
            } else if is(word, "limit") && left >= 2 {
                options.limit_start =
                    weft_resp::parse_i64_strict(&args[j + 1]).ok_or(errors::NOT_INTEGER)?;
                options.limit_count =
                    weft_resp::parse_i64_strict(&args[j + 2]).ok_or(errors::NOT_INTEGER)?;
                j += 2;
            } else if !readonly && is(word, "store") && left >= 1 {
                options.store = Some(&args[j + 1]);
                j += 1;
            } else if is(word, "by") && left >= 1 {
                let pattern = &args[j + 1][..];
                options.by = Some(pattern);
                if !c_string(pattern).contains(&b'*') {
                    options.dont_sort = true;
                }
                j += 1;
            } else if is(word, "get") && left >= 1 {
                options.gets.push(&args[j + 1]);
                j += 1;
            } else {
                return Err(errors::SYNTAX);
            }
            j += 1;
        }
        Ok(options)
    }
}

/// The bytes before the first NUL: what C sees of a string.
fn c_string(bytes: &[u8]) -> &[u8] {
    &bytes[..bytes
        .iter()
        .position(|byte| *byte == 0)
        .unwrap_or(bytes.len())]
}

/// What SORT reads from the key: which type, and the elements it loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    SortedSet,
}

/// One element of the sorting vector (Redis' `redisSortObject`).
#[derive(Debug)]
struct Item {
    element: Bytes,
    score: f64,
    /// The weight read with ALPHA and BY (`None`: its key is missing).
    weight: Option<Bytes>,
}

fn sort_generic(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, readonly: bool) {
    let mut options = match Options::parse(args, readonly) {
        Ok(options) => options,
        Err(text) => return reply.error(text),
    };
    let entry = match session.cache.get_entry(&args[1]) {
        Ok(entry) => entry,
        Err(error) => return cache_error(reply, &error),
    };
    let cell = match &entry {
        None => None,
        Some(entry) => match entry.structure() {
            Some(cell) => Some(cell),
            None => return reply.error(WRONGTYPE),
        },
    };
    // One look at the structure, under its lock: its type, its length, the elements.
    let mut guard = cell.map(|cell| cell.lock());
    // Redis converts a sorted set it sorts to its skiplist encoding for good ("destructively",
    // as sort.c says), which OBJECT ENCODING and DUMP then show. Only the encoding changes,
    // so the value is not written again. Converting reads each listpack score stored as
    // text with strtod, and a subnormal one leaves errno at ERANGE — which SORT then finds
    // when it checks every weight it parses as text (see `Weight::integer`).
    let mut errno_range = false;
    if let Some(Structure::SortedSet(zset)) = guard.as_deref_mut() {
        errno_range = zset.is_compact()
            && zset
                .iter()
                .any(|(_, score)| score != 0.0 && score.abs() < f64::MIN_POSITIVE);
        zset.make_large();
    }
    let list_elements = matches!(guard.as_deref(), None | Some(Structure::List(_)));
    let kind = match guard.as_deref() {
        None | Some(Structure::List(_)) => Kind::List,
        Some(Structure::Set(_)) => Kind::Set,
        Some(Structure::SortedSet(_)) => Kind::SortedSet,
        Some(Structure::Hash(_) | Structure::Stream(_)) => return reply.error(WRONGTYPE),
    };
    // A set's order is its hash table's: not something to store or hand a script.
    if options.dont_sort && kind == Kind::Set && (options.store.is_some() || session.in_script) {
        options.dont_sort = false;
        options.alpha = true;
        options.by = None;
    }
    let len = i64::try_from(guard.as_deref().map_or(0, Structure::len)).unwrap_or(i64::MAX);
    let mut start = options.limit_start.max(0).min(len);
    let count = options.limit_count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    // Lists and sorted sets left unsorted load just the range asked for, in the direction
    // asked for; the output then starts at the vector's start.
    let ranged = options.dont_sort && kind != Kind::Set;
    let elements = guard.as_deref().map_or_else(Vec::new, |structure| {
        load(structure, ranged, options.desc, start, end)
    });
    drop(guard);
    if ranged {
        end -= start;
        start = 0;
    }
    let mut items: Vec<Item> = elements
        .into_iter()
        .map(|element| Item {
            element,
            score: 0.0,
            weight: None,
        })
        .collect();
    let mut conversion_error = false;
    if !options.dont_sort {
        for item in &mut items {
            let weight = match options.by {
                Some(pattern) => match lookup(session, pattern, &item.element) {
                    Some(weight) => weight,
                    None => continue,
                },
                // A list holds integers as integers; sets and sorted sets hand SORT text.
                None => Weight {
                    integer: list_elements && weft_resp::parse_i64_strict(&item.element).is_some(),
                    value: item.element.clone(),
                },
            };
            if options.alpha {
                if options.by.is_some() {
                    item.weight = Some(weight.value);
                }
            } else {
                match weft_resp::parse_f64_strtod(&weight.value) {
                    Some(_) if errno_range && !weight.integer => conversion_error = true,
                    Some(score) => item.score = score,
                    None => conversion_error = true,
                }
            }
        }
        let by_pattern = options.by.is_some();
        let store = options.store.is_some();
        let alpha = options.alpha;
        let desc = options.desc;
        let order = |a: &Item, b: &Item| {
            let order = compare(a, b, alpha, by_pattern, store);
            if desc { order.reverse() } else { order }
        };
        let limited = start != 0 || end != len - 1;
        if by_pattern && limited {
            // Redis sorts just the part LIMIT asks for with its own quicksort, which orders
            // ties its own way.
            if let (Ok(first), Ok(last)) = (usize::try_from(start), usize::try_from(end)) {
                let as_int = |a: &Item, b: &Item| order(a, b) as i32;
                super::geo::partial_quicksort(&mut items, &as_int, first, last);
            }
        } else {
            // glibc's qsort is a stable merge sort for arrays like this one: ties keep the
            // order the elements were loaded in, as here.
            items.sort_by(order);
        }
    }
    let span = usize::try_from(end - start + 1).unwrap_or(0);
    let output_len = if options.gets.is_empty() {
        span
    } else {
        options.gets.len() * span
    };
    if conversion_error {
        return reply.error("ERR One or more scores can't be converted into double");
    }
    let first = usize::try_from(start).unwrap_or(0);
    let chosen = items.iter().skip(first).take(span);
    match options.store {
        None => {
            reply.array(output_len);
            for item in chosen {
                if options.gets.is_empty() {
                    reply.bulk(&item.element);
                }
                for pattern in &options.gets {
                    match lookup(session, pattern, &item.element) {
                        Some(weight) => reply.bulk(&weight.value),
                        None => reply.null(),
                    }
                }
            }
        }
        Some(destination) => {
            let mut list = ListValue::default();
            for item in chosen {
                if options.gets.is_empty() {
                    list.push_back(item.element.clone());
                }
                for pattern in &options.gets {
                    let value = lookup(session, pattern, &item.element)
                        .map(|weight| weight.value)
                        .unwrap_or_default();
                    list.push_back(value);
                }
            }
            let stored = !list.is_empty();
            if let Err(failure) = collections::replace(session, destination, Structure::List(list))
            {
                return failure.reply(reply);
            }
            if stored {
                super::lists::signal_stored(session, destination);
            }
            reply.integer(i64::try_from(output_len).unwrap_or(i64::MAX));
        }
    }
}

/// The elements SORT loads: all of them, or (`ranged`) those at positions `start..=end`
/// counted from the head, or from the tail when `desc`, in that direction.
fn load(structure: &Structure, ranged: bool, desc: bool, start: i64, end: i64) -> Vec<Bytes> {
    let skip = usize::try_from(start).unwrap_or(0);
    let take = if ranged {
        usize::try_from(end - start + 1).unwrap_or(0)
    } else {
        usize::MAX
    };
    let skip = if ranged { skip } else { 0 };
    match structure {
        Structure::List(list) => {
            if desc && ranged {
                list.iter().rev().skip(skip).take(take).cloned().collect()
            } else {
                list.iter().skip(skip).take(take).cloned().collect()
            }
        }
        Structure::Set(set) => set.iter().cloned().collect(),
        Structure::SortedSet(zset) => {
            if desc && ranged {
                zset.iter()
                    .rev()
                    .skip(skip)
                    .take(take)
                    .map(|(m, _)| m.clone())
                    .collect()
            } else {
                zset.iter()
                    .skip(skip)
                    .take(take)
                    .map(|(m, _)| m.clone())
                    .collect()
            }
        }
        Structure::Hash(_) | Structure::Stream(_) => Vec::new(),
    }
}

/// Redis' `sortCompare`: by score, ties by the elements' bytes; with ALPHA by the weights
/// (a missing one first) or the elements, as `strcoll` in the C locale unless STORE.
fn compare(a: &Item, b: &Item, alpha: bool, by_pattern: bool, store: bool) -> Ordering {
    let collate = |x: &[u8], y: &[u8]| {
        if store {
            x.cmp(y)
        } else {
            c_string(x).cmp(c_string(y))
        }
    };
    if !alpha {
        return a
            .score
            .partial_cmp(&b.score)
            .filter(|order| *order != Ordering::Equal)
            .unwrap_or_else(|| a.element.cmp(&b.element));
    }
    if by_pattern {
        match (&a.weight, &b.weight) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => collate(x, y),
        }
    } else {
        collate(&a.element, &b.element)
    }
}

/// A value a pattern names: a weight, or what GET returns.
#[derive(Debug)]
struct Weight {
    value: Bytes,
    /// Whether Redis holds it as an integer object (a string key's `int` encoding, a
    /// listpack hash's or list's integer), which SORT reads without strtod and so without
    /// looking at errno.
    integer: bool,
}

/// Redis' `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` of the
/// pattern is replaced by the element to name a key, whose string value is returned — or,
/// with `->field` after the `*`, that field of the hash there. `None` for a pattern without
/// `*`, a missing key or field, or a key of another type.
fn lookup(session: &Session, pattern: &[u8], element: &Bytes) -> Option<Weight> {
    let text = c_string(pattern);
    if text == b"#" {
        return Some(Weight {
            value: element.clone(),
            integer: false,
        });
    }
    let star = text.iter().position(|byte| *byte == b'*')?;
    let arrow = text[star + 1..]
        .windows(2)
        .position(|pair| pair == b"->")
        .map(|at| star + 1 + at);
    let field = arrow
        .filter(|at| at + 2 < text.len())
        .map(|at| &pattern[at + 2..]);
    let suffix_len = pattern.len() - (star + 1) - field.map_or(0, |field| field.len() + 2);
    let mut key = Vec::with_capacity(pattern.len() + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..star + 1 + suffix_len]);
    let entry = session.cache.get_entry(&key).ok()??;
    match (field, entry.structure()) {
        (None, None) => {
            let value = entry.value_bytes();
            // OBJECT ENCODING's `int` (see `keys::object`).
            let integer = !entry.is_edited()
                && value.len() <= 20
                && weft_resp::parse_i64_strict(&value).is_some();
            Some(Weight { value, integer })
        }
        (Some(field), Some(cell)) => match &*cell.lock() {
            Structure::Hash(hash) => hash.get(field).map(|value| Weight {
                integer: hash.is_compact() && weft_resp::parse_i64_strict(value).is_some(),
                value: value.clone(),
            }),
            _ => None,
        },
        _ => None,
    }
}
