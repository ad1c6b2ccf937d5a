//! Counter commands: INCR DECR INCRBY DECRBY INCRBYFLOAT.
//!
//! Each is one `Cache::compute`, so concurrent increments of a key never lose an update.
//! The value must read as a number with Redis' rules (`string2ll`, `string2ld`); the result
//! is stored as text, like Redis, and the key keeps its expiration. INCRBYFLOAT computes in
//! emulated `long double`, as Redis does.

use bytes::Bytes;
use weft_core::{Compute, Expiry, WriteOptions};

use super::collections::WRONGTYPE;
use super::strings::{cache_error, in_place};
use super::{arg_i64, errors};
use crate::resp::{Reply, Session};

/// Adds `delta` to the integer stored at `key` (0 if absent), keeping its expiration.
fn increment(session: &Session, key: &[u8], delta: i64, reply: &mut Reply<'_>) {
    let result = session
        .cache
        .compute(key, &WriteOptions::default(), |existing| {
            let current = match existing {
                None => 0,
                Some(entry) if entry.structure().is_some() => return Compute::Keep(Err(WRONGTYPE)),
                Some(entry) => match weft_resp::parse_i64_strict(entry.value()) {
                    Some(current) => current,
                    None => return Compute::Keep(Err(errors::NOT_INTEGER)),
                },
            };
            match current.checked_add(delta) {
                Some(next) => {
                    let text = itoa::Buffer::new().format(next).as_bytes().to_vec();
                    match existing {
                        Some(entry) => {
                            Compute::PutValue(in_place(text, entry), Expiry::KEEP, Ok(next))
                        }
                        None => Compute::Put(text, Expiry::KEEP, Ok(next)),
                    }
                }
                None => Compute::Keep(Err(errors::OVERFLOW)),
            }
        });
    match result {
        Ok(Ok(value)) => reply.integer(value),
        Ok(Err(text)) => reply.error(text),
        Err(error) => cache_error(reply, &error),
    }
}

/// `INCR key`
pub fn incr(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    increment(session, &args[1], 1, reply);
}

/// `DECR key`
pub fn decr(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    increment(session, &args[1], -1, reply);
}

/// `INCRBY key increment`
pub fn incrby(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match arg_i64(args, 2) {
        Some(delta) => increment(session, &args[1], delta, reply),
        None => reply.error(errors::NOT_INTEGER),
    }
}

/// `DECRBY key decrement`
pub fn decrby(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match arg_i64(args, 2) {
        // Negating i64::MIN overflows; Redis has a text of its own for it.
        Some(i64::MIN) => reply.error("ERR decrement would overflow"),
        Some(delta) => increment(session, &args[1], -delta, reply),
        None => reply.error(errors::NOT_INTEGER),
    }
}

/// `INCRBYFLOAT key increment`: stores and returns (as a bulk string, in RESP3 too) the sum
/// printed like Redis' `ld2string`; keeps the key's expiration.
///
/// Like Redis, the arithmetic is C `long double` (x87 80-bit extended precision on x86-64),
/// emulated bit for bit by [`weft_resp::LongDouble`]: `0.1 + 0.2` is `0.3` here too.
pub fn incrbyfloat(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(delta) = weft_resp::LongDouble::parse(&args[2]) else {
        reply.error(errors::NOT_FLOAT);
        return;
    };
    let result = session
        .cache
        .compute(&args[1], &WriteOptions::default(), |existing| {
            let current = match existing {
                None => weft_resp::LongDouble::ZERO,
                Some(entry) if entry.structure().is_some() => return Compute::Keep(Err(WRONGTYPE)),
                Some(entry) => match weft_resp::LongDouble::parse(entry.value()) {
                    Some(current) => current,
                    None => return Compute::Keep(Err(errors::NOT_FLOAT)),
                },
            };
            let next = current + delta;
            if !next.is_finite() {
                return Compute::Keep(Err("ERR increment would produce NaN or Infinity"));
            }
            let text = next.format_human();
            Compute::Put(text.clone().into_bytes(), Expiry::KEEP, Ok(text))
        });
    match result {
        Ok(Ok(text)) => reply.bulk(text.as_bytes()),
        Ok(Err(text)) => reply.error(text),
        Err(error) => cache_error(reply, &error),
    }
}
