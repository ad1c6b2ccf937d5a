//! String commands: GET SET (NX XX GET EX PX EXAT PXAT KEEPTTL) SETNX SETEX PSETEX GETDEL
//! GETEX GETSET MGET MSET MSETNX INCR DECR INCRBY DECRBY INCRBYFLOAT APPEND STRLEN GETRANGE
//! SETRANGE.
//!
//! Every read-modify-write goes through `Cache::compute`, so it is atomic per key across
//! connections (and, later, protocols).

use bytes::Bytes;
use weft_core::{Compute, Expiry, Lifetime, WriteOptions};

use super::{errors, is};
use crate::resp::{Reply, Session};

/// Expiration units the SET family accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireUnit {
    /// EX: relative seconds.
    Seconds,
    /// PX: relative milliseconds.
    Millis,
    /// EXAT: absolute Unix seconds.
    UnixSeconds,
    /// PXAT: absolute Unix milliseconds.
    UnixMillis,
}

impl ExpireUnit {
    /// The unit named by an option keyword (EX PX EXAT PXAT).
    #[must_use]
    pub fn from_keyword(arg: &[u8]) -> Option<Self> {
        if is(arg, "EX") {
            Some(Self::Seconds)
        } else if is(arg, "PX") {
            Some(Self::Millis)
        } else if is(arg, "EXAT") {
            Some(Self::UnixSeconds)
        } else if is(arg, "PXAT") {
            Some(Self::UnixMillis)
        } else {
            None
        }
    }
}

/// Why an expiration argument was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireError {
    /// Not an integer.
    NotInteger,
    /// Zero, negative, or overflowing once converted (Redis: "invalid expire time").
    Invalid,
}

impl ExpireError {
    /// Writes Redis' reply for this error, for command `command` (lower case).
    pub fn reply(self, command: &str, reply: &mut Reply<'_>) {
        match self {
            Self::NotInteger => reply.error(errors::NOT_INTEGER),
            Self::Invalid => reply.error(&format!("ERR invalid expire time in '{command}' command")),
        }
    }
}

/// The absolute deadline (Unix ms) of `value` in `unit`, Redis' rules: the value must be a
/// positive integer and must not overflow when converted to milliseconds.
///
/// # Errors
/// [`ExpireError`] as Redis would refuse it.
pub fn deadline_ms(unit: ExpireUnit, value: &[u8], now_ms: u64) -> Result<u64, ExpireError> {
    let amount = weft_resp::parse_i64_strict(value).ok_or(ExpireError::NotInteger)?;
    if amount <= 0 {
        return Err(ExpireError::Invalid);
    }
    let amount = amount.unsigned_abs();
    let millis = match unit {
        ExpireUnit::Seconds | ExpireUnit::UnixSeconds => {
            amount.checked_mul(1000).ok_or(ExpireError::Invalid)?
        }
        ExpireUnit::Millis | ExpireUnit::UnixMillis => amount,
    };
    let deadline = match unit {
        ExpireUnit::Seconds | ExpireUnit::Millis => {
            millis.checked_add(now_ms).ok_or(ExpireError::Invalid)?
        }
        ExpireUnit::UnixSeconds | ExpireUnit::UnixMillis => millis,
    };
    if deadline > i64::MAX as u64 {
        return Err(ExpireError::Invalid);
    }
    Ok(deadline)
}

/// The expiry that makes an entry written at `now_ms` live until `deadline_ms`.
#[must_use]
pub fn expiry_until(deadline_ms: u64, now_ms: u64) -> Expiry {
    Expiry {
        lifespan: Lifetime::millis(deadline_ms.saturating_sub(now_ms)),
        max_idle: Lifetime::Never,
    }
}

/// Writes a cache error as a RESP error reply.
pub fn cache_error(reply: &mut Reply<'_>, error: &weft_core::CacheError) {
    match error {
        weft_core::CacheError::ContainerFull { .. } => {
            reply.error("OOM command not allowed when used memory > 'maxmemory'.");
        }
        other => reply.error(&format!("ERR {other}")),
    }
}

/// `GET key`
pub fn get(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) => reply.bulk(entry.value()),
        Ok(None) => reply.null(),
        Err(error) => cache_error(reply, &error),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    IfAbsent,
    IfPresent,
}

#[derive(Debug, Clone, Copy)]
enum Expiration {
    /// No option: the cache default (immortal for the default cache), as a plain SET.
    Default,
    Keep,
    Until(u64),
}

/// `SET key value [NX | XX] [GET] [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]`
pub fn set(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (key, value) = (&args[1], &args[2]);
    let cache = &session.cache;
    if args.len() == 3 {
        // The common case needs neither the previous value nor a condition.
        match cache.put(key, value, &WriteOptions::default().ignore_return_values()) {
            Ok(_) => reply.ok(),
            Err(error) => cache_error(reply, &error),
        }
        return;
    }
    let mut condition = Condition::Always;
    let mut return_old = false;
    let mut expiration = None;
    let mut index = 3;
    let now = cache.clock().now_ms();
    while index < args.len() {
        let option = &args[index];
        if is(option, "NX") && condition == Condition::Always {
            condition = Condition::IfAbsent;
        } else if is(option, "XX") && condition == Condition::Always {
            condition = Condition::IfPresent;
        } else if is(option, "GET") {
            return_old = true;
        } else if is(option, "KEEPTTL") && expiration.is_none() {
            expiration = Some(Expiration::Keep);
        } else if let Some(unit) = ExpireUnit::from_keyword(option)
            && expiration.is_none()
            && index + 1 < args.len()
        {
            match deadline_ms(unit, &args[index + 1], now) {
                Ok(deadline) => expiration = Some(Expiration::Until(deadline)),
                Err(error) => return error.reply("set", reply),
            }
            index += 1;
        } else {
            reply.error(errors::SYNTAX);
            return;
        }
        index += 1;
    }
    let expiration = expiration.unwrap_or(Expiration::Default);
    let result = cache.compute(key, &WriteOptions::default(), |existing| {
        let old = if return_old { existing.map(|e| e.value_bytes()) } else { None };
        let allowed = match condition {
            Condition::Always => true,
            Condition::IfAbsent => existing.is_none(),
            Condition::IfPresent => existing.is_some(),
        };
        if !allowed {
            return Compute::Keep((false, old));
        }
        let expiry = match expiration {
            Expiration::Default => Expiry::default(),
            Expiration::Keep => Expiry::KEEP,
            // A deadline already past deletes the key, as Redis does.
            Expiration::Until(deadline) if deadline <= now => return Compute::Remove((true, old)),
            Expiration::Until(deadline) => expiry_until(deadline, now),
        };
        Compute::Put(value.to_vec(), expiry, (true, old))
    });
    match result {
        Ok((_, old)) if return_old => match old {
            Some(old) => reply.bulk(&old),
            None => reply.null(),
        },
        Ok((true, _)) => reply.ok(),
        Ok((false, _)) => reply.null(),
        Err(error) => cache_error(reply, &error),
    }
}
macro_rules! pending { ($($n:ident),*) => { $(pub fn $n(_s: &mut Session, _a: &[Bytes], r: &mut Reply<'_>) { r.error("ERR not yet"); })* } }
pending!(setnx, setex, psetex, getdel, getex, getset, mget, mset, msetnx, incr, decr, incrby, decrby, incrbyfloat, append, strlen, getrange, setrange);
