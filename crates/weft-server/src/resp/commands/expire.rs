//! Expiration commands: EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT), TTL PTTL
//! EXPIRETIME PEXPIRETIME, PERSIST.
//!
//! Redis speaks of absolute deadlines (Unix ms); the engine stores a lifespan counted from
//! the write. A deadline is turned into a lifespan with `expiry_until` against the cache's
//! clock, read as late as possible (inside the `compute` closure), and read back as
//! `EntryMetadata::expires_at_ms`. Changing only the expiration rewrites the entry with its
//! own value through `Cache::compute`, atomically per key.

use bytes::Bytes;
use weft_core::{Compute, Expiry, WriteOptions};

use super::strings::{cache_error, expiry_until};
use super::{arg_i64, errors, is};
use crate::resp::{Reply, Session};

/// EXPIRE's NX XX GT LT options.
#[derive(Debug, Default, Clone, Copy)]
struct Conditions {
    /// Only if the key has no expiration.
    nx: bool,
    /// Only if the key has an expiration.
    xx: bool,
    /// Only if the new deadline is later than the current one (none counts as infinite).
    gt: bool,
    /// Only if the new deadline is earlier than the current one (none counts as infinite).
    lt: bool,
}

impl Conditions {
    /// Parses the options after the time, with Redis 7's error texts.
    fn parse(options: &[Bytes]) -> Result<Self, String> {
        let mut conditions = Self::default();
        for option in options {
            if is(option, "NX") {
                conditions.nx = true;
            } else if is(option, "XX") {
                conditions.xx = true;
            } else if is(option, "GT") {
                conditions.gt = true;
            } else if is(option, "LT") {
                conditions.lt = true;
            } else {
                return Err(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(option)
                ));
            }
        }
        if conditions.nx && (conditions.xx || conditions.gt || conditions.lt) {
            return Err(
                "ERR NX and XX, GT or LT options at the same time are not compatible".into(),
            );
        }
        if conditions.gt && conditions.lt {
            return Err("ERR GT and LT options at the same time are not compatible".into());
        }
        Ok(conditions)
    }

    /// Whether a key whose current deadline is `current` (`None`: no expiration) may get
    /// the deadline `when`.
    fn allow(self, current: Option<i64>, when: i64) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|current| when <= current) {
            return false;
        }
        if self.lt && current.is_some_and(|current| when >= current) {
            return false;
        }
        true
    }
}

/// The time unit of an EXPIRE-family argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Seconds,
    Millis,
}

/// Redis' `expireGenericCommand`: `relative` adds the current time (EXPIRE, PEXPIRE).
fn expire_generic(
    session: &Session,
    args: &[Bytes],
    reply: &mut Reply<'_>,
    unit: Unit,
    relative: bool,
    command: &str,
) {
    let conditions = match Conditions::parse(&args[3..]) {
        Ok(conditions) => conditions,
        Err(text) => return reply.error(&text),
    };
    let Some(mut when) = arg_i64(args, 2) else {
        reply.error(errors::NOT_INTEGER);
        return;
    };
    let invalid = |reply: &mut Reply<'_>| {
        reply.error(&format!("ERR invalid expire time in '{command}' command"));
    };
    if unit == Unit::Seconds {
        // Negative times are allowed (they delete the key), but not overflowing ones.
        let Some(millis) = when.checked_mul(1000) else {
            return invalid(reply);
        };
        when = millis;
    }
    let cache = &session.cache;
    let clock = cache.clock();
    let now = i64::try_from(clock.now_ms()).unwrap_or(i64::MAX);
    if relative {
        let Some(deadline) = when.checked_add(now) else {
            return invalid(reply);
        };
        when = deadline;
    }
    let result = cache.compute(&args[1], &WriteOptions::default(), |existing| {
        let Some(entry) = existing else {
            return Compute::Keep(0);
        };
        let current = entry
            .metadata()
            .expires_at_ms()
            .map(|at| i64::try_from(at).unwrap_or(i64::MAX));
        if !conditions.allow(current, when) {
            return Compute::Keep(0);
        }
        // A deadline not in the future deletes the key, as Redis does.
        let Ok(deadline) = u64::try_from(when) else {
            return Compute::Remove(1);
        };
        if when <= now {
            return Compute::Remove(1);
        }
        Compute::Reexpire(expiry_until(deadline, clock.now_ms()), 1)
    });
    match result {
        Ok(changed) => reply.integer(changed),
        Err(error) => cache_error(reply, &error),
    }
}

/// `EXPIRE key seconds [NX | XX | GT | LT]`
pub fn expire(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    expire_generic(session, args, reply, Unit::Seconds, true, "expire");
}

/// `PEXPIRE key milliseconds [NX | XX | GT | LT]`
pub fn pexpire(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    expire_generic(session, args, reply, Unit::Millis, true, "pexpire");
}

/// `EXPIREAT key unix-seconds [NX | XX | GT | LT]`
pub fn expireat(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    expire_generic(session, args, reply, Unit::Seconds, false, "expireat");
}

/// `PEXPIREAT key unix-milliseconds [NX | XX | GT | LT]`
pub fn pexpireat(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    expire_generic(session, args, reply, Unit::Millis, false, "pexpireat");
}

/// Redis' `ttlGenericCommand`: -2 for a missing key, -1 without expiration; otherwise the
/// remaining time (or, `absolute`, the deadline), in ms or in seconds rounded to nearest.
fn ttl_generic(
    session: &Session,
    args: &[Bytes],
    reply: &mut Reply<'_>,
    unit: Unit,
    absolute: bool,
) {
    let entry = match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) => entry,
        Ok(None) => return reply.integer(-2),
        Err(error) => return cache_error(reply, &error),
    };
    let Some(deadline) = entry.metadata().expires_at_ms() else {
        return reply.integer(-1);
    };
    let deadline = i64::try_from(deadline).unwrap_or(i64::MAX);
    let ttl = if absolute {
        deadline
    } else {
        let now = i64::try_from(session.cache.clock().now_ms()).unwrap_or(i64::MAX);
        deadline.saturating_sub(now)
    }
    .max(0);
    reply.integer(match unit {
        Unit::Millis => ttl,
        Unit::Seconds => ttl.saturating_add(500) / 1000,
    });
}

/// `TTL key`
pub fn ttl(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    ttl_generic(session, args, reply, Unit::Seconds, false);
}

/// `PTTL key`
pub fn pttl(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    ttl_generic(session, args, reply, Unit::Millis, false);
}

/// `EXPIRETIME key`
pub fn expiretime(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    ttl_generic(session, args, reply, Unit::Seconds, true);
}

/// `PEXPIRETIME key`
pub fn pexpiretime(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    ttl_generic(session, args, reply, Unit::Millis, true);
}

/// `PERSIST key`: 1 if an expiration was removed, 0 if the key is missing or had none.
pub fn persist(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let result = session.cache.compute(
        &args[1],
        &WriteOptions::default(),
        |existing| match existing {
            Some(entry) if entry.is_mortal() => Compute::Reexpire(Expiry::NEVER, 1),
            _ => Compute::Keep(0),
        },
    );
    match result {
        Ok(changed) => reply.integer(changed),
        Err(error) => cache_error(reply, &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(options: &[&str]) -> Result<Conditions, String> {
        let options: Vec<Bytes> = options
            .iter()
            .map(|o| Bytes::copy_from_slice(o.as_bytes()))
            .collect();
        Conditions::parse(&options)
    }

    // Proves option conflicts are refused with Redis 7's texts, and unknown options named.
    #[test]
    fn option_errors() {
        let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
        assert_eq!(parse(&["nx", "xx"]).err().as_deref(), Some(nx));
        assert_eq!(parse(&["NX", "GT"]).err().as_deref(), Some(nx));
        assert_eq!(parse(&["lt", "nx"]).err().as_deref(), Some(nx));
        assert_eq!(
            parse(&["GT", "LT"]).err().as_deref(),
            Some("ERR GT and LT options at the same time are not compatible")
        );
        assert_eq!(
            parse(&["FOO"]).err().as_deref(),
            Some("ERR Unsupported option FOO")
        );
        assert!(parse(&["XX", "GT"]).is_ok());
        assert!(parse(&["nx", "nx"]).is_ok());
    }

    // Proves NX XX GT LT decide like Redis, a missing expiration counting as infinite.
    #[test]
    fn conditions_decide() {
        let c = |options: &[&str]| parse(options).unwrap_or_default();
        assert!(c(&[]).allow(None, 5));
        assert!(c(&["NX"]).allow(None, 5));
        assert!(!c(&["NX"]).allow(Some(9), 5));
        assert!(!c(&["XX"]).allow(None, 5));
        assert!(c(&["XX"]).allow(Some(9), 5));
        assert!(!c(&["GT"]).allow(None, 5));
        assert!(!c(&["GT"]).allow(Some(5), 5));
        assert!(c(&["GT"]).allow(Some(4), 5));
        assert!(c(&["LT"]).allow(None, 5));
        assert!(!c(&["LT"]).allow(Some(5), 5));
        assert!(c(&["LT"]).allow(Some(6), 5));
        assert!(!c(&["XX", "LT"]).allow(None, 5));
    }
}
