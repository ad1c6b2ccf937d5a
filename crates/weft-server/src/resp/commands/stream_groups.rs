//! Stream consumer-group commands: XGROUP XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM.
//!
//! Each runs under the key's lock on its `StreamValue` (`collections`), in Redis 7.0's
//! order of checks and with its error texts (`t_stream.c`). Delivery times and seen times
//! are the wall clock in milliseconds, as Redis' `mstime()`.
//!
//! A blocked XREADGROUP is woken by XADD (and XGROUP DESTROY) on its keys, and also runs
//! again every [`GROUP_READ_RECHECK`]: Redis fails it when its stream is deleted or
//! replaced, which writes of other types do not signal here. A retry that finds the key
//! gone or no longer a stream fails with `UNBLOCKED`, one that finds the group gone with
//! `NOGROUP`, as Redis answers a client it unblocks.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use weft_core::stream::{
    AutoClaimOptions, BLOCKED_READ_COUNT_DEFAULT, ClaimOptions, StreamId, StreamValue,
};

use super::collections::{self, Failure, WRONGTYPE};
use super::streams::{
    IdForm, ReadFrom, block, count_reply, entry_reply, help_reply, id_reply, may_block,
    multi_stream_reply, now_ms, parse_id, parse_integer, parse_read, range_end, range_start,
    signal, subcommand_error,
};
use super::{errors, is};
use crate::resp::{Reply, Session};

/// How often a blocked XREADGROUP checks that its streams and groups still exist.
const GROUP_READ_RECHECK: Duration = Duration::from_millis(250);
/// XAUTOCLAIM looks at most this many pending entries per entry it may claim.
const AUTOCLAIM_ATTEMPTS_FACTOR: u64 = 10;
/// XAUTOCLAIM's default COUNT.
const AUTOCLAIM_COUNT_DEFAULT: u64 = 100;
/// XAUTOCLAIM's largest COUNT (Redis' `LONG_MAX / max(sizeof(streamID), attempts)`).
const AUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;

fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// Redis' error for a missing key or group (XPENDING, XCLAIM, XAUTOCLAIM).
fn no_group(key: &[u8], group: &[u8]) -> String {
    format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        lossy(key),
        lossy(group)
    )
}

/// Whether `key` holds a stream with the group `group`: `Ok(false)` when the key or the
/// group is missing.
fn has_group(session: &Session, key: &[u8], group: &[u8]) -> Result<bool, Failure> {
    collections::read::<StreamValue, _>(session, key, |stream| {
        stream.is_some_and(|stream| stream.group(group).is_some())
    })
}

// ---------------------------------------------------------------------------------------
// XGROUP.

/// `XGROUP CREATE|SETID|DESTROY|CREATECONSUMER|DELCONSUMER|HELP ...`
pub fn xgroup(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = &args[1];
    if args.len() == 2 && is(sub, "HELP") {
        return help_reply(
            reply,
            "XGROUP",
            &[
                "CREATE <key> <groupname> <id|$> [option]",
                "    Create a new consumer group. Options are:",
                "    * MKSTREAM",
                "      Create the empty stream if it does not exist.",
                "    * ENTRIESREAD entries_read",
                "      Set the group's entries_read counter (internal use).",
                "CREATECONSUMER <key> <groupname> <consumer>",
                "    Create a new consumer in the specified group.",
                "DELCONSUMER <key> <groupname> <consumer>",
                "    Remove the specified consumer.",
                "DESTROY <key> <groupname>",
                "    Remove the specified group.",
                "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
                "    Set the current group ID and entries_read counter.",
            ],
        );
    }
    if args.len() < 4 {
        return subcommand_error(reply, args);
    }
    let create = is(sub, "CREATE");
    let setid = is(sub, "SETID");
    let mut make_stream = false;
    let mut entries_read: Option<u64> = None;
    let mut index = 5;
    while index < args.len() {
        if create && is(&args[index], "MKSTREAM") {
            make_stream = true;
            index += 1;
        } else if (create || setid) && is(&args[index], "ENTRIESREAD") && index + 1 < args.len() {
            match parse_integer(&args[index + 1]) {
                Ok(-1) => entries_read = None,
                Ok(read) if read < 0 => {
                    return reply.error("ERR value for ENTRIESREAD must be positive or -1");
                }
                Ok(read) => entries_read = Some(read.unsigned_abs()),
                Err(text) => return reply.error(text),
            }
            index += 2;
        } else {
            return subcommand_error(reply, args);
        }
    }
    let (key, group) = (&args[2], &args[3]);
    let needs_group = setid || is(sub, "CREATECONSUMER") || is(sub, "DELCONSUMER");
    let now = now_ms();
    let mut signal_waiters = false;
    let result = collections::write::<StreamValue, _>(session, key, make_stream, |stream| {
        if needs_group && stream.group(group).is_none() {
            return (
                Err(format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    lossy(group),
                    lossy(key)
                )),
                false,
            );
        }
        if create && (5..=8).contains(&args.len()) {
            let id = if args[4].as_ref() == b"$" {
                stream.last_id()
            } else {
                match parse_id(&args[4], 0, IdForm::Strict) {
                    Ok(id) => id,
                    Err(text) => return (Err(text.to_owned()), false),
                }
            };
            if stream.create_group(group, id, entries_read) {
                (Ok(Answer::Ok), true)
            } else {
                // A stream MKSTREAM just made is stored even so, as Redis does.
                (
                    Err("BUSYGROUP Consumer Group name already exists".to_owned()),
                    make_stream,
                )
            }
        } else if setid && (args.len() == 5 || args.len() == 7) {
            let id = if args[4].as_ref() == b"$" {
                stream.last_id()
            } else {
                match parse_id(&args[4], 0, IdForm::Range) {
                    Ok(id) => id,
                    Err(text) => return (Err(text.to_owned()), false),
                }
            };
            stream.set_group_id(group, id, entries_read);
            (Ok(Answer::Ok), true)
        } else if is(sub, "DESTROY") && args.len() == 4 {
            let destroyed = stream.destroy_group(group);
            signal_waiters = destroyed;
            (Ok(Answer::Count(u64::from(destroyed))), destroyed)
        } else if is(sub, "CREATECONSUMER") && args.len() == 5 {
            let created = stream.create_consumer(group, &args[4], now) == Some(true);
            (Ok(Answer::Count(u64::from(created))), created)
        } else if is(sub, "DELCONSUMER") && args.len() == 5 {
            let existed = stream
                .group(group)
                .is_some_and(|found| found.consumers().contains_key(&args[4][..]));
            let pending = stream.delete_consumer(group, &args[4]).unwrap_or(0);
            (Ok(Answer::Count(pending)), existed)
        } else {
            (Ok(Answer::Syntax), false)
        }
    });
    match result {
        Ok(None) => reply.error(
            "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may \
             want to use the MKSTREAM option to create an empty stream automatically.",
        ),
        Ok(Some(Ok(Answer::Ok))) => reply.ok(),
        Ok(Some(Ok(Answer::Count(count)))) => count_reply(reply, count),
        Ok(Some(Ok(Answer::Syntax))) => subcommand_error(reply, args),
        Ok(Some(Err(text))) => reply.error(&text),
        Err(failure) => failure.reply(reply),
    }
    if signal_waiters {
        // Clients blocked on the group learn that it is gone.
        signal(session, key);
    }
}

/// What an XGROUP subcommand answers.
enum Answer {
    Ok,
    Count(u64),
    Syntax,
}

// ---------------------------------------------------------------------------------------
// XREADGROUP.

/// `XREADGROUP GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] STREAMS key
/// [key ...] id [id ...]`
pub fn xreadgroup(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let parsed = match parse_read(args, true) {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(&text),
    };
    if parsed.block_ms.is_some() && session.in_script {
        return reply.error("ERR xreadgroup command is not allowed with BLOCK option from scripts");
    }
    let Some((group, consumer)) = parsed.group else {
        return reply.error("ERR Missing GROUP option for XREADGROUP");
    };
    let retrying = session.block_retry.is_some();
    let mut from = Vec::with_capacity(parsed.keys.len());
    for (key, arg) in parsed.keys.iter().zip(parsed.ids) {
        match has_group(session, key, group) {
            Ok(true) => {}
            Ok(false) if retrying => {
                let exists =
                    collections::read::<StreamValue, _>(session, key, |stream| stream.is_some());
                return reply.error(if exists.unwrap_or(false) {
                    "NOGROUP the consumer group this client was blocked on no longer exists"
                } else {
                    "UNBLOCKED the stream key no longer exists"
                });
            }
            Ok(false) => {
                return reply.error(&format!(
                    "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP \
                     option",
                    lossy(key),
                    lossy(group)
                ));
            }
            Err(Failure::WrongType) if retrying => {
                return reply.error("UNBLOCKED the stream key no longer exists");
            }
            Err(failure) => return failure.reply(reply),
        }
        match arg.as_ref() {
            b"$" => {
                return reply.error(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read \
                     the history of this consumer by specifying a proper ID, or use the > ID \
                     to get new messages. The $ ID would just return an empty result set.",
                );
            }
            b">" => from.push(ReadFrom::New),
            // Redis marks `>` with the largest ID, so that ID given explicitly means `>` too.
            _ => match parse_id(arg, 0, IdForm::Strict) {
                Ok(StreamId::MAX) => from.push(ReadFrom::New),
                Ok(id) => from.push(ReadFrom::After(id)),
                Err(text) => return reply.error(text),
            },
        }
    }
    let count = if parsed.count == 0 && retrying {
        BLOCKED_READ_COUNT_DEFAULT
    } else {
        parsed.count
    };
    let now = now_ms();
    let protocol = reply.protocol();
    let mut parts: Vec<(usize, BytesMut)> = Vec::new();
    for (index, (key, from)) in parsed.keys.iter().zip(&from).enumerate() {
        let mut part = BytesMut::new();
        let had = consumer_watch(session, key, group, consumer);
        let served = collections::write::<StreamValue, _>(session, key, false, |stream| {
            let mut out = Reply::new(&mut part, protocol);
            let delivered: Vec<(StreamId, bool)> = match *from {
                ReadFrom::After(after) => {
                    // Redis' `streamIncrID` wraps the largest ID around to 0-0.
                    let start = after.next().unwrap_or(StreamId::MIN);
                    match stream.read_group_history(group, consumer, start, count, now) {
                        Some(history) => history,
                        None => return (false, false),
                    }
                }
                ReadFrom::New => {
                    let Some(found) = stream.group(group) else {
                        return (false, false);
                    };
                    if stream.last_entry_id() <= found.last_id {
                        return (false, false);
                    }
                    match stream.read_group_new(group, consumer, count, parsed.no_ack, now) {
                        Some(ids) => ids.into_iter().map(|id| (id, true)).collect(),
                        None => return (false, false),
                    }
                }
            };
            if protocol == weft_resp::Protocol::Resp2 {
                out.array(2);
            }
            out.bulk(key);
            out.array(delivered.len());
            for (id, _) in delivered {
                match stream.get(id) {
                    Some(entry) => entry_reply(&mut out, id, entry),
                    None => {
                        out.array(2);
                        id_reply(&mut out, id);
                        out.null_array();
                    }
                }
            }
            (true, true)
        });
        consumer_check(session, key, group, consumer, had);
        match served {
            Ok(Some(true)) => parts.push((index, part)),
            Ok(_) => {}
            Err(failure) => return failure.reply(reply),
        }
    }
    if !parts.is_empty() {
        return multi_stream_reply(reply, &parts);
    }
    match parsed.block_ms {
        Some(timeout) if may_block(session) => block(
            session,
            parsed.keys,
            timeout,
            None,
            Some(GROUP_READ_RECHECK),
        ),
        _ => reply.null_array(),
    }
}

// ---------------------------------------------------------------------------------------
// XACK and XPENDING.

/// `XACK key group id [id ...]`: entries acknowledged. A missing key or group answers 0
/// before the IDs are read; no ID is acknowledged unless all parse.
pub fn xack(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let group = &args[2];
    let result = collections::write::<StreamValue, _>(session, &args[1], false, |stream| {
        if stream.group(group).is_none() {
            return (Ok(0), false);
        }
        let ids: Result<Vec<StreamId>, &'static str> = args[3..]
            .iter()
            .map(|arg| parse_id(arg, 0, IdForm::Strict))
            .collect();
        match ids {
            Ok(ids) => {
                let acknowledged = stream.ack(group, &ids).unwrap_or(0);
                (Ok(acknowledged), acknowledged > 0)
            }
            Err(text) => (Err(text), false),
        }
    });
    match result {
        Ok(None) => reply.integer(0),
        Ok(Some(Ok(count))) => count_reply(reply, count),
        Ok(Some(Err(text))) => reply.error(text),
        Err(failure) => failure.reply(reply),
    }
}

/// XPENDING's extended form.
struct PendingRange<'a> {
    min_idle_ms: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a Bytes>,
}

/// `XPENDING key group [[IDLE min-idle-time] start end count [consumer]]`
pub fn xpending(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() != 3 && !(6..=9).contains(&args.len()) {
        return reply.error(errors::SYNTAX);
    }
    let range = if args.len() >= 6 {
        let mut at = 3;
        let mut min_idle_ms = 0;
        if is(&args[3], "IDLE") {
            match parse_integer(&args[4]) {
                Ok(idle) => min_idle_ms = idle,
                Err(text) => return reply.error(text),
            }
            if args.len() < 8 {
                return reply.error(errors::SYNTAX);
            }
            at += 2;
        }
        let count = match parse_integer(&args[at + 2]) {
            Ok(count) => usize::try_from(count.max(0)).unwrap_or(usize::MAX),
            Err(text) => return reply.error(text),
        };
        let start = match range_start(&args[at]) {
            Ok(id) => id,
            Err(text) => return reply.error(text),
        };
        let end = match range_end(&args[at + 1]) {
            Ok(id) => id,
            Err(text) => return reply.error(text),
        };
        Some(PendingRange {
            min_idle_ms,
            start,
            end,
            count,
            consumer: args.get(at + 3),
        })
    } else {
        None
    };
    let (key, group_name) = (&args[1], &args[2]);
    let now = i64::try_from(now_ms()).unwrap_or(i64::MAX);
    collections::read_or_reply::<StreamValue, _>(session, key, reply, |stream, reply| {
        let Some(group) = stream.and_then(|stream| stream.group(group_name)) else {
            return reply.error(&no_group(key, group_name));
        };
        let Some(range) = range else {
            reply.array(4);
            count_reply(reply, group.pending().len() as u64);
            match (
                group.pending().first_key_value(),
                group.pending().last_key_value(),
            ) {
                (Some((first, _)), Some((last, _))) => {
                    id_reply(reply, *first);
                    id_reply(reply, *last);
                    let owners: Vec<(&Bytes, usize)> = group
                        .consumers()
                        .iter()
                        .filter(|(_, consumer)| !consumer.pending().is_empty())
                        .map(|(name, consumer)| (name, consumer.pending().len()))
                        .collect();
                    reply.array(owners.len());
                    for (name, pending) in owners {
                        reply.array(2);
                        reply.bulk(name);
                        reply.bulk(itoa::Buffer::new().format(pending).as_bytes());
                    }
                }
                _ => {
                    reply.null();
                    reply.null();
                    reply.null_array();
                }
            }
            return;
        };
        let bounds = range.start..=range.end;
        let ids: Box<dyn Iterator<Item = StreamId>> = if range.start > range.end {
            Box::new(std::iter::empty())
        } else {
            match range.consumer {
                Some(name) => match group.consumers().get(&name[..]) {
                    Some(consumer) => Box::new(consumer.pending().range(bounds).copied()),
                    None => return reply.array(0),
                },
                None => Box::new(group.pending().range(bounds).map(|(id, _)| *id)),
            }
        };
        let mut rows = Vec::new();
        {
            for id in ids {
                if rows.len() >= range.count {
                    break;
                }
                let Some(entry) = group.pending().get(&id) else {
                    continue;
                };
                let time = i64::try_from(entry.delivery_time_ms).unwrap_or(i64::MAX);
                let idle = now.saturating_sub(time);
                if range.min_idle_ms != 0 && idle < range.min_idle_ms {
                    continue;
                }
                rows.push((id, entry, idle.max(0)));
            }
        }
        reply.array(rows.len());
        for (id, entry, idle) in rows {
            reply.array(4);
            id_reply(reply, id);
            reply.bulk(&entry.consumer);
            reply.integer(idle);
            count_reply(reply, entry.delivery_count);
        }
    });
}

// ---------------------------------------------------------------------------------------
// XCLAIM and XAUTOCLAIM.

/// `XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-ms]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]`
pub fn xclaim(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    match has_group(session, key, group) {
        Ok(true) => {}
        Ok(false) => return reply.error(&no_group(key, group)),
        Err(failure) => return failure.reply(reply),
    }
    let Ok(min_idle) = parse_integer(&args[4]) else {
        return reply.error("ERR Invalid min-idle-time argument for XCLAIM");
    };
    let mut ids = Vec::new();
    let mut index = 5;
    while index < args.len() {
        match parse_id(&args[index], 0, IdForm::Strict) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        index += 1;
    }
    let now = now_ms();
    let now_signed = i64::try_from(now).unwrap_or(i64::MAX);
    let mut delivery_time: Option<i64> = None;
    let mut retry_count: Option<u64> = None;
    let mut force = false;
    let mut just_id = false;
    let mut last_id = StreamId::MIN;
    while index < args.len() {
        let more = args.len() - 1 - index;
        let option = &args[index];
        let number = |at: usize, text: &'static str| parse_integer(&args[at]).map_err(|_| text);
        if is(option, "FORCE") {
            force = true;
        } else if is(option, "JUSTID") {
            just_id = true;
        } else if is(option, "IDLE") && more > 0 {
            index += 1;
            match number(index, "ERR Invalid IDLE option argument for XCLAIM") {
                Ok(idle) => delivery_time = Some(now_signed.saturating_sub(idle)),
                Err(text) => return reply.error(text),
            }
        } else if is(option, "TIME") && more > 0 {
            index += 1;
            match number(index, "ERR Invalid TIME option argument for XCLAIM") {
                Ok(time) => delivery_time = Some(time),
                Err(text) => return reply.error(text),
            }
        } else if is(option, "RETRYCOUNT") && more > 0 {
            index += 1;
            match number(index, "ERR Invalid RETRYCOUNT option argument for XCLAIM") {
                Ok(count) => retry_count = u64::try_from(count).ok(),
                Err(text) => return reply.error(text),
            }
        } else if is(option, "LASTID") && more > 0 {
            index += 1;
            match parse_id(&args[index], 0, IdForm::Strict) {
                Ok(id) => last_id = id,
                Err(text) => return reply.error(text),
            }
        } else {
            return reply.error(&format!(
                "ERR Unrecognized XCLAIM option '{}'",
                lossy(option)
            ));
        }
        index += 1;
    }
    // A delivery time in the future or before the epoch is taken as now (Redis does not
    // fail a client whose clock is a little ahead); -1 is Redis' "not given".
    let delivery_time_ms = match delivery_time {
        Some(time) if time != -1 && (0..=now_signed).contains(&time) => time.unsigned_abs(),
        _ => now,
    };
    let options = ClaimOptions {
        min_idle_ms: min_idle.max(0).unsigned_abs(),
        delivery_time_ms,
        retry_count,
        force,
        just_id,
        last_id,
    };
    let protocol = reply.protocol();
    let mut out = BytesMut::new();
    let had = consumer_watch(session, key, group, consumer);
    let result = collections::write::<StreamValue, _>(session, key, false, |stream| {
        let Some(claimed) = stream.claim(group, consumer, &ids, options, now) else {
            return (false, false);
        };
        let mut part = Reply::new(&mut out, protocol);
        part.array(claimed.len());
        for id in claimed {
            match stream.get(id) {
                Some(entry) if !just_id => entry_reply(&mut part, id, entry),
                _ => id_reply(&mut part, id),
            }
        }
        (true, true)
    });
    consumer_check(session, key, group, consumer, had);
    match result {
        Ok(Some(true)) => reply.raw(&out),
        Ok(_) => reply.error(&no_group(key, group)),
        Err(failure) => failure.reply(reply),
    }
}

/// Whether `consumer` of `group` in stream `key` exists, when stream events are published
/// (`None` otherwise: nobody would hear of its creation).
fn consumer_watch(session: &Session, key: &[u8], group: &[u8], consumer: &[u8]) -> Option<bool> {
    if !super::notify::wants_stream_events(session) {
        return None;
    }
    collections::read::<StreamValue, _>(session, key, |stream| {
        stream.is_some_and(|stream| {
            stream
                .group(group)
                .is_some_and(|group| group.consumers().contains_key(consumer))
        })
    })
    .ok()
}

/// Publishes `xgroup-createconsumer` if the command created `consumer` (it did not exist
/// before: `had`, from [`consumer_watch`]).
fn consumer_check(session: &Session, key: &[u8], group: &[u8], consumer: &[u8], had: Option<bool>) {
    if had == Some(false) && consumer_watch(session, key, group, consumer) == Some(true) {
        super::notify::consumer_created(session, key);
    }
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]`
pub fn xautoclaim(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let Ok(min_idle) = parse_integer(&args[4]) else {
        return reply.error("ERR Invalid min-idle-time argument for XAUTOCLAIM");
    };
    let start = match range_start(&args[5]) {
        Ok(id) => id,
        Err(text) => return reply.error(text),
    };
    let mut count = AUTOCLAIM_COUNT_DEFAULT;
    let mut just_id = false;
    let mut index = 6;
    while index < args.len() {
        let more = args.len() - 1 - index;
        if is(&args[index], "COUNT") && more > 0 {
            match parse_integer(&args[index + 1]) {
                Ok(value) if (1..=AUTOCLAIM_COUNT_MAX).contains(&value) => {
                    count = value.unsigned_abs();
                }
                _ => return reply.error("ERR COUNT must be > 0"),
            }
            index += 1;
        } else if is(&args[index], "JUSTID") {
            just_id = true;
        } else {
            return reply.error(errors::SYNTAX);
        }
        index += 1;
    }
    let options = AutoClaimOptions {
        min_idle_ms: min_idle.max(0).unsigned_abs(),
        count,
        attempts: count.saturating_mul(AUTOCLAIM_ATTEMPTS_FACTOR),
        just_id,
    };
    let now = now_ms();
    let protocol = reply.protocol();
    let mut out = BytesMut::new();
    let had = consumer_watch(session, key, group, consumer);
    let result = collections::write::<StreamValue, _>(session, key, false, |stream| {
        let Some(claim) = stream.auto_claim(group, consumer, start, options, now) else {
            return (false, false);
        };
        let mut part = Reply::new(&mut out, protocol);
        part.array(3);
        id_reply(&mut part, claim.next);
        part.array(claim.claimed.len());
        for id in &claim.claimed {
            match stream.get(*id) {
                Some(entry) if !just_id => entry_reply(&mut part, *id, entry),
                _ => id_reply(&mut part, *id),
            }
        }
        part.array(claim.deleted.len());
        for id in &claim.deleted {
            id_reply(&mut part, *id);
        }
        let changed = !claim.claimed.is_empty() || !claim.deleted.is_empty();
        (true, changed)
    });
    consumer_check(session, key, group, consumer, had);
    match result {
        Ok(Some(true)) => reply.raw(&out),
        Ok(_) => reply.error(&no_group(key, group)),
        Err(Failure::WrongType) => reply.error(WRONGTYPE),
        Err(failure) => failure.reply(reply),
    }
}
