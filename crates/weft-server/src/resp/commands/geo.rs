//! Geo commands: GEOADD (NX XX CH) GEODIST GEOHASH GEOPOS GEOSEARCH GEOSEARCHSTORE
//! (STOREDIST) GEORADIUS GEORADIUSBYMEMBER and their `_RO` forms.
//!
//! As in Redis (`geo.c`), positions are sorted-set members whose scores are 52-bit
//! interleaved geohashes (`geohash`), so every sorted-set command works on them and
//! ZRANGE WITHSCORES shows the same scores as redis-server. GEOADD is ZADD with computed
//! scores; searches scan the score ranges of the nine boxes around the center in Redis'
//! order, then sort by distance (a stable sort: results at equal distances keep the
//! order they were found in, as glibc's merge sort keeps them; Redis' partial sort for
//! COUNT may order such ties otherwise). Arguments are checked in Redis' order with its
//! error texts.

use std::ops::Bound;

use bytes::Bytes;
use weft_core::Structure;
use weft_core::structure::SortedSetValue;

use super::collections;
use super::geohash::{self, Search, Shape};
use super::zsets::{self, parse_score};
use super::{errors, is};
use crate::resp::{Reply, Session};

const BAD_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";
const NOT_DECODABLE: &str = "ERR could not decode requested zset member";

/// Meters per unit, by Redis' unit names.
fn unit(arg: &[u8]) -> Option<f64> {
    let arg = &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())];
    if is(arg, "m") {
        Some(1.0)
    } else if is(arg, "km") {
        Some(1000.0)
    } else if is(arg, "ft") {
        Some(0.3048)
    } else if is(arg, "mi") {
        Some(1609.34)
    } else {
        None
    }
}

/// A longitude and latitude argument pair, checked against Redis' limits.
fn position(longitude: &[u8], latitude: &[u8]) -> Result<(f64, f64), String> {
    let longitude = parse_score(longitude).ok_or(errors::NOT_FLOAT)?;
    let latitude = parse_score(latitude).ok_or(errors::NOT_FLOAT)?;
    if !(geohash::LONGITUDE_MIN..=geohash::LONGITUDE_MAX).contains(&longitude)
        || !(geohash::LATITUDE_MIN..=geohash::LATITUDE_MAX).contains(&latitude)
    {
        return Err(format!(
            "ERR invalid longitude,latitude pair {longitude:.6},{latitude:.6}"
        ));
    }
    Ok((longitude, latitude))
}

/// A distance argument and its unit (Redis' `extractDistanceOrReply`).
fn radius(value: &[u8], unit_arg: &[u8]) -> Result<(f64, f64), String> {
    let radius = parse_score(value).ok_or("ERR need numeric radius")?;
    if radius < 0.0 {
        return Err("ERR radius cannot be negative".to_owned());
    }
    let meters = unit(unit_arg).ok_or(BAD_UNIT)?;
    Ok((radius, meters))
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: ZADD with the positions'
/// scores, as Redis runs it.
pub fn geoadd(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (mut nx, mut xx) = (false, false);
    let mut first = 2;
    while first < args.len() {
        let option = &args[first];
        if is(option, "nx") {
            nx = true;
        } else if is(option, "xx") {
            xx = true;
        } else if !is(option, "ch") {
            break;
        }
        first += 1;
    }
    if (args.len() - first) % 3 != 0 || (nx && xx) {
        return reply.error(errors::SYNTAX);
    }
    let mut zadd_args: Vec<Bytes> = Vec::with_capacity(first + (args.len() - first) / 3 * 2);
    zadd_args.push(Bytes::from_static(b"zadd"));
    zadd_args.extend(args[1..first].iter().cloned());
    for triple in args[first..].chunks_exact(3) {
        let (longitude, latitude) = match position(&triple[0], &triple[1]) {
            Ok(position) => position,
            Err(text) => return reply.error(&text),
        };
        let score = geohash::score_of(longitude, latitude);
        zadd_args.push(Bytes::from(itoa::Buffer::new().format(score).to_owned()));
        zadd_args.push(triple[2].clone());
    }
    zsets::zadd(session, &zadd_args, reply);
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`
pub fn geodist(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let meters = match args.len() {
        4 => 1.0,
        5 => match unit(&args[4]) {
            Some(meters) => meters,
            None => return reply.error(BAD_UNIT),
        },
        _ => return reply.error(errors::SYNTAX),
    };
    let scores =
        collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, _| {
            zset.map(|zset| (zset.score(&args[2]), zset.score(&args[3])))
        });
    match scores {
        None => {}
        Some(Some((Some(a), Some(b)))) => {
            let (a, b) = (geohash::position_of(a), geohash::position_of(b));
            let meters_between = geohash::distance(a.0, a.1, b.0, b.1);
            reply.bulk(geohash::format_distance(meters_between / meters).as_bytes());
        }
        Some(_) => reply.null(),
    }
}

/// Writes a coordinate as Redis' `addReplyHumanLongDouble` (a bulk string; RESP3 a double).
fn coordinate_reply(reply: &mut Reply<'_>, value: f64) {
    reply.double_text(&geohash::format_coordinate(value));
}

/// `GEOHASH key [member ...]`: each member's 11-character standard geohash, or nil.
pub fn geohash(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    let _ =
        collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
            reply.array(members.len());
            for member in members {
                match zset.and_then(|zset| zset.score(member)) {
                    Some(score) => reply.bulk(&geohash::standard_geohash(score)),
                    None => reply.null(),
                }
            }
        });
}

/// `GEOPOS key [member ...]`: each member's longitude and latitude, or a null array.
pub fn geopos(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let members = &args[2..];
    let _ =
        collections::read_or_reply::<SortedSetValue, _>(session, &args[1], reply, |zset, reply| {
            reply.array(members.len());
            for member in members {
                match zset.and_then(|zset| zset.score(member)) {
                    Some(score) => {
                        let (longitude, latitude) = geohash::position_of(score);
                        reply.array(2);
                        coordinate_reply(reply, longitude);
                        coordinate_reply(reply, latitude);
                    }
                    None => reply.null_array(),
                }
            }
        });
}

// ---------------------------------------------------------------------------------------
// Searches

/// Which command is searching (Redis' `georadiusGeneric` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS: center from arguments 2 and 3, radius from 4 and 5.
    Radius { store: bool },
    /// GEORADIUSBYMEMBER: center from a member (argument 2), radius from 3 and 4.
    RadiusByMember { store: bool },
    /// GEOSEARCH: FROMMEMBER|FROMLONLAT, BYRADIUS|BYBOX.
    Search,
    /// GEOSEARCHSTORE: GEOSEARCH's options and STOREDIST; the destination is argument 1.
    SearchStore,
}

impl Variant {
    fn is_search(self) -> bool {
        matches!(self, Self::Search | Self::SearchStore)
    }

    fn stores(self) -> bool {
        matches!(
            self,
            Self::Radius { store: true } | Self::RadiusByMember { store: true }
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Ascending,
    Descending,
}

/// A member found by a search.
struct Found {
    member: Bytes,
    score: f64,
    distance_meters: f64,
    longitude: f64,
    latitude: f64,
}

/// What a search decided to do once its arguments were read.
struct Request<'a> {
    search: Option<Search>,
    with_distance: bool,
    with_hash: bool,
    with_coordinates: bool,
    sort: Sort,
    any: bool,
    count: usize,
    store: Option<&'a Bytes>,
    store_distance: bool,
}

/// Reads a search's arguments as Redis does, looking members up in `zset` (which holds
/// the source's lock); Redis' error text otherwise.
#[allow(clippy::too_many_lines)]
fn parse_search<'a>(
    args: &'a [Bytes],
    variant: Variant,
    zset: Option<&SortedSetValue>,
) -> Result<Request<'a>, String> {
    let mut request = Request {
        search: None,
        with_distance: false,
        with_hash: false,
        with_coordinates: false,
        sort: Sort::None,
        any: false,
        count: 0,
        store: None,
        store_distance: false,
    };
    let mut center: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let base = match variant {
        Variant::Radius { .. } => {
            center = Some(position(&args[2], &args[3])?);
            let (radius, meters) = radius(&args[4], &args[5])?;
            shape = Some((Shape::Circle { radius }, meters));
            6
        }
        Variant::RadiusByMember { .. } => {
            if let Some(zset) = zset {
                let score = zset.score(&args[2]).ok_or(NOT_DECODABLE)?;
                center = Some(geohash::position_of(score));
                let (radius, meters) = radius(&args[3], &args[4])?;
                shape = Some((Shape::Circle { radius }, meters));
            }
            5
        }
        Variant::Search => 2,
        Variant::SearchStore => {
            request.store = Some(&args[1]);
            3
        }
    };
    let (mut from_member, mut from_position, mut by_radius, mut by_box) =
        (false, false, false, false);
    let options = &args[base.min(args.len())..];
    let mut index = 0;
    while index < options.len() {
        let option = &options[index];
        let remaining = options.len() - index - 1;
        if is(option, "withdist") {
            request.with_distance = true;
        } else if is(option, "withhash") {
            request.with_hash = true;
        } else if is(option, "withcoord") {
            request.with_coordinates = true;
        } else if is(option, "any") {
            request.any = true;
        } else if is(option, "asc") {
            request.sort = Sort::Ascending;
        } else if is(option, "desc") {
            request.sort = Sort::Descending;
        } else if is(option, "count") && remaining >= 1 {
            let count =
                weft_resp::parse_i64_strict(&options[index + 1]).ok_or(errors::NOT_INTEGER)?;
            if count <= 0 {
                return Err("ERR COUNT must be > 0".to_owned());
            }
            request.count = usize::try_from(count).unwrap_or(usize::MAX);
            index += 1;
        } else if (is(option, "store") || is(option, "storedist"))
            && remaining >= 1
            && variant.stores()
        {
            request.store = Some(&options[index + 1]);
            request.store_distance = is(option, "storedist");
            index += 1;
        } else if is(option, "storedist") && variant == Variant::SearchStore {
            request.store_distance = true;
        } else if is(option, "frommember")
            && remaining >= 1
            && variant.is_search()
            && !from_position
        {
            if let Some(zset) = zset {
                let score = zset.score(&options[index + 1]).ok_or(NOT_DECODABLE)?;
                center = Some(geohash::position_of(score));
            }
            from_member = true;
            index += 1;
        } else if is(option, "fromlonlat") && remaining >= 2 && variant.is_search() && !from_member
        {
            center = Some(position(&options[index + 1], &options[index + 2])?);
            from_position = true;
            index += 2;
        } else if is(option, "byradius") && remaining >= 2 && variant.is_search() && !by_box {
            let (radius, meters) = radius(&options[index + 1], &options[index + 2])?;
            shape = Some((Shape::Circle { radius }, meters));
            by_radius = true;
            index += 2;
        } else if is(option, "bybox") && remaining >= 3 && variant.is_search() && !by_radius {
            let width = parse_score(&options[index + 1]).ok_or("ERR need numeric width")?;
            let height = parse_score(&options[index + 2]).ok_or("ERR need numeric height")?;
            if height < 0.0 || width < 0.0 {
                return Err("ERR height or width cannot be negative".to_owned());
            }
            let meters = unit(&options[index + 3]).ok_or(BAD_UNIT)?;
            shape = Some((Shape::Box { width, height }, meters));
            by_box = true;
            index += 3;
        } else {
            return Err(errors::SYNTAX.to_owned());
        }
        index += 1;
    }
    if request.store.is_some()
        && (request.with_distance || request.with_hash || request.with_coordinates)
    {
        let what = if variant == Variant::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        ));
    }
    let name = String::from_utf8_lossy(&args[0]);
    if variant.is_search() && !(from_member || from_position) {
        return Err(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        ));
    }
    if variant.is_search() && !(by_radius || by_box) {
        return Err(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        ));
    }
    if request.any && request.count == 0 {
        return Err("ERR the ANY argument requires COUNT argument".to_owned());
    }
    if let (Some((longitude, latitude)), Some((shape, meters_per_unit))) = (center, shape) {
        request.search = Some(Search {
            longitude,
            latitude,
            shape,
            meters_per_unit,
        });
    }
    Ok(request)
}

/// The members inside the search, in the order Redis finds them: box by box, each in
/// score order; at most `limit` (0: all).
fn find(zset: &SortedSetValue, search: &Search, limit: usize) -> Vec<Found> {
    let mut found = Vec::new();
    for hash in search.boxes() {
        if limit > 0 && found.len() >= limit {
            break;
        }
        let (min, max) = geohash::score_range(hash);
        for (member, score) in zset.range_by_score(Bound::Included(min), Bound::Excluded(max)) {
            let (longitude, latitude) = geohash::position_of(score);
            if let Some(distance_meters) = search.distance_if_inside(longitude, latitude) {
                found.push(Found {
                    member: member.clone(),
                    score,
                    distance_meters,
                    longitude,
                    latitude,
                });
            }
            if limit > 0 && found.len() >= limit {
                break;
            }
        }
    }
    found
}

/// Redis' `sort_gp_asc`: -1, 0 or 1 by distance (a NaN distance compares as smaller).
fn compare_distances(a: &Found, b: &Found) -> i32 {
    if a.distance_meters > b.distance_meters {
        1
    } else if a.distance_meters == b.distance_meters {
        0
    } else {
        -1
    }
}

/// The sort Redis gets from glibc's `qsort` when it sorts every result: a top-down merge
/// sort, stable (ties keep the order they were found in) whatever the comparator says.
fn merge_sort<T>(items: &mut Vec<T>, compare: &impl Fn(&T, &T) -> i32) {
    if items.len() < 2 {
        return;
    }
    let mut right = items.split_off(items.len() / 2);
    merge_sort(items, compare);
    merge_sort(&mut right, compare);
    let left = std::mem::take(items);
    items.reserve(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    while let (Some(a), Some(b)) = (left.peek(), right.peek()) {
        let next = if compare(a, b) <= 0 {
            left.next()
        } else {
            right.next()
        };
        items.extend(next);
    }
    items.extend(left);
    items.extend(right);
}

/// The median of three positions, as Redis' `med3` picks it.
fn median_of_three<T>(
    items: &[T],
    compare: &impl Fn(&T, &T) -> i32,
    a: usize,
    b: usize,
    c: usize,
) -> usize {
    if compare(&items[a], &items[b]) < 0 {
        if compare(&items[b], &items[c]) < 0 {
            b
        } else if compare(&items[a], &items[c]) < 0 {
            c
        } else {
            a
        }
    } else if compare(&items[b], &items[c]) > 0 {
        b
    } else if compare(&items[a], &items[c]) < 0 {
        a
    } else {
        c
    }
}

/// Redis' `pqsort`: a Bentley–McIlroy three-way quicksort that skips the parts lying
/// wholly outside positions `first..=last`, reproduced step for step so that the results
/// there — ties included — come out in redis-server's order (GEO* COUNT, SORT BY … LIMIT).
/// (The parts are disjoint, so sorting them from a stack rather than by recursion changes
/// nothing.)
pub(crate) fn partial_quicksort<T>(
    items: &mut [T],
    compare: &impl Fn(&T, &T) -> i32,
    first: usize,
    last: usize,
) {
    let mut pending = vec![(0usize, items.len())];
    while let Some((mut start, mut len)) = pending.pop() {
        loop {
            if len < 7 {
                for moving in start + 1..start + len {
                    let mut at = moving;
                    while at > start && compare(&items[at - 1], &items[at]) > 0 {
                        items.swap(at, at - 1);
                        at -= 1;
                    }
                }
                break;
            }
            let mut pivot = start + len / 2;
            if len > 7 {
                let mut low = start;
                let mut high = start + len - 1;
                if len > 40 {
                    let step = len / 8;
                    low = median_of_three(items, compare, low, low + step, low + 2 * step);
                    pivot = median_of_three(items, compare, pivot - step, pivot, pivot + step);
                    high = median_of_three(items, compare, high - 2 * step, high - step, high);
                }
                pivot = median_of_three(items, compare, low, pivot, high);
            }
            items.swap(start, pivot);
            // [start+1, equal_low) and (equal_high, end) hold the pivot's equals while the
            // partition runs; `below` and `above` close in on each other.
            let (mut equal_low, mut below) = (start + 1, start + 1);
            let (mut above, mut equal_high) = (start + len - 1, start + len - 1);
            loop {
                while below <= above {
                    let order = compare(&items[below], &items[start]);
                    if order > 0 {
                        break;
                    }
                    if order == 0 {
                        items.swap(equal_low, below);
                        equal_low += 1;
                    }
                    below += 1;
                }
                while below <= above {
                    let order = compare(&items[above], &items[start]);
                    if order < 0 {
                        break;
                    }
                    if order == 0 {
                        items.swap(above, equal_high);
                        equal_high -= 1;
                    }
                    above -= 1;
                }
                if below > above {
                    break;
                }
                items.swap(below, above);
                below += 1;
                above -= 1;
            }
            let end = start + len;
            let moved = (equal_low - start).min(below - equal_low);
            for offset in 0..moved {
                items.swap(start + offset, below - moved + offset);
            }
            let moved = (equal_high - above).min(end - equal_high - 1);
            for offset in 0..moved {
                items.swap(below + offset, end - moved + offset);
            }
            // A part wholly outside `first..=last` holds nothing asked for: Redis leaves it.
            let smaller = below - equal_low;
            if smaller > 1 && start <= last && start + smaller > first {
                pending.push((start, smaller));
            }
            let larger = equal_high - above;
            if larger > 1 && end - larger <= last && end > first {
                start = end - larger;
                len = larger;
                continue;
            }
            break;
        }
    }
}

/// What a search answers.
enum Outcome {
    /// The source key is missing.
    Missing,
    /// The members found, sorted and cut to COUNT.
    Found(Vec<Found>),
}

fn search_generic(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, variant: Variant) {
    let source = if variant == Variant::SearchStore {
        &args[2]
    } else {
        &args[1]
    };
    let result = collections::read::<SortedSetValue, _>(
        session,
        source,
        |zset| -> Result<(Request<'_>, Outcome), String> {
            let request = parse_search(args, variant, zset)?;
            let Some(zset) = zset else {
                return Ok((request, Outcome::Missing));
            };
            let Some(search) = request.search else {
                return Ok((request, Outcome::Missing));
            };
            let sort = if request.count > 0 && request.sort == Sort::None && !request.any {
                Sort::Ascending
            } else {
                request.sort
            };
            let mut found = find(zset, &search, if request.any { request.count } else { 0 });
            let returned = if request.count > 0 {
                found.len().min(request.count)
            } else {
                found.len()
            };
            let order = match sort {
                Sort::None => None,
                Sort::Ascending => Some(1),
                Sort::Descending => Some(-1),
            };
            if let Some(direction) = order {
                let compare = |a: &Found, b: &Found| direction * compare_distances(a, b);
                if returned == found.len() {
                    merge_sort(&mut found, &compare);
                } else {
                    partial_quicksort(&mut found, &compare, 0, returned - 1);
                }
            }
            found.truncate(returned);
            Ok((request, Outcome::Found(found)))
        },
    );
    let (request, outcome) = match result {
        Ok(Ok(decided)) => decided,
        Ok(Err(text)) => return reply.error(&text),
        Err(failure) => return failure.reply(reply),
    };
    let meters_per_unit = request.search.map_or(1.0, |search| search.meters_per_unit);
    let found = match outcome {
        Outcome::Found(found) => found,
        Outcome::Missing => Vec::new(),
    };
    if let Some(destination) = request.store {
        let mut stored = SortedSetValue::new_large();
        for point in &found {
            let score = if request.store_distance {
                point.distance_meters / meters_per_unit
            } else {
                point.score
            };
            stored.insert(point.member.clone(), score);
        }
        stored.compact_if_small();
        let count = found.len();
        return match collections::replace(session, destination, Structure::SortedSet(stored)) {
            Ok(()) => reply.integer(i64::try_from(count).unwrap_or(i64::MAX)),
            Err(failure) => failure.reply(reply),
        };
    }
    let options = usize::from(request.with_distance)
        + usize::from(request.with_hash)
        + usize::from(request.with_coordinates);
    reply.array(found.len());
    for point in &found {
        if options > 0 {
            reply.array(options + 1);
        }
        reply.bulk(&point.member);
        if request.with_distance {
            let distance = point.distance_meters / meters_per_unit;
            reply.bulk(geohash::format_distance(distance).as_bytes());
        }
        if request.with_hash {
            reply.integer(geohash::truncate_i64(point.score));
        }
        if request.with_coordinates {
            reply.array(2);
            coordinate_reply(reply, point.longitude);
            coordinate_reply(reply, point.latitude);
        }
    }
}

/// `GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST] [WITHHASH]
/// [COUNT count [ANY]] [ASC|DESC] [STORE key | STOREDIST key]`
pub fn georadius(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    search_generic(session, args, reply, Variant::Radius { store: true });
}

/// `GEORADIUS_RO`: GEORADIUS without STORE.
pub fn georadius_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    search_generic(session, args, reply, Variant::Radius { store: false });
}

/// `GEORADIUSBYMEMBER key member radius M|KM|FT|MI [...]`
pub fn georadiusbymember(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    search_generic(
        session,
        args,
        reply,
        Variant::RadiusByMember { store: true },
    );
}

/// `GEORADIUSBYMEMBER_RO`: GEORADIUSBYMEMBER without STORE.
pub fn georadiusbymember_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    search_generic(
        session,
        args,
        reply,
        Variant::RadiusByMember { store: false },
    );
}

/// `GEOSEARCH key FROMMEMBER member | FROMLONLAT longitude latitude BYRADIUS radius unit |
/// BYBOX width height unit [ASC|DESC] [COUNT count [ANY]] [WITHCOORD] [WITHDIST]
/// [WITHHASH]`
pub fn geosearch(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    search_generic(session, args, reply, Variant::Search);
}

/// `GEOSEARCHSTORE destination source ... [STOREDIST]`
pub fn geosearchstore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    search_generic(session, args, reply, Variant::SearchStore);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ascending(a: &f64, b: &f64) -> i32 {
        if a > b {
            1
        } else if a == b {
            0
        } else {
            -1
        }
    }

    // Proves the partial quicksort puts the smallest values, sorted, first (the rest in
    // any order), on inputs of every size its branches handle, and the merge sort is
    // stable.
    #[test]
    fn sorts() {
        let mut seed = 7u64;
        for len in [0usize, 1, 5, 7, 8, 40, 41, 200] {
            for last in [0usize, 3, 20] {
                let mut values: Vec<f64> = (0..len)
                    .map(|_| {
                        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        f64::from(u32::try_from(seed >> 58).unwrap_or(0))
                    })
                    .collect();
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                let last = last.min(len.saturating_sub(1));
                partial_quicksort(&mut values, &ascending, 0, last);
                if len > 0 {
                    assert_eq!(values[..=last], sorted[..=last], "len {len} last {last}");
                }
            }
        }
        let mut pairs = vec![(1.0, 'a'), (0.0, 'b'), (1.0, 'c'), (0.0, 'd')];
        merge_sort(&mut pairs, &|a: &(f64, char), b: &(f64, char)| {
            ascending(&a.0, &b.0)
        });
        assert_eq!(pairs, [(0.0, 'b'), (0.0, 'd'), (1.0, 'a'), (1.0, 'c')]);
    }
}
