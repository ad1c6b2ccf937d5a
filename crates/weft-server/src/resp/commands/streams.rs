//! Stream commands: XADD XRANGE XREVRANGE XLEN XDEL XTRIM XREAD XSETID XINFO (consumer
//! groups are in `stream_groups`).
//!
//! Each reads or changes the key's `StreamValue` in place (`collections`), checking
//! arguments in the order Redis 7.0's `t_stream.c` does, with its error texts. A stream
//! key stays when its last entry goes (Redis keeps its last ID and groups).
//!
//! XREAD with BLOCK waits as the list commands do (`lists::Block`): the connection loop
//! runs it again when an XADD signals the key. A `$` ID is resolved once, when the client
//! blocks, and the retry runs with the ID it stood for, so entries added in between are
//! not missed. A retry serves at most [`BLOCKED_READ_COUNT_DEFAULT`] entries per stream
//! unless COUNT says otherwise, as Redis does for a woken client.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use weft_core::stream::{
    AddError, BLOCKED_READ_COUNT_DEFAULT, Entry, IdRequest, StreamId, StreamValue, Trim,
    TrimStrategy,
};

use super::collections::{self, Failure};
use super::lists::{Block, deadline_after};
use super::{errors, is};
use crate::resp::{Reply, Session};

/// Redis' reply to an ID it cannot parse.
pub(crate) const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
/// Redis' reply to a BLOCK timeout that is not an integer.
const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
/// Redis' reply to a negative BLOCK timeout.
const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
/// The longest ID text Redis parses (its 128-byte buffer, less the terminator).
const ID_TEXT_BYTES_MAX: usize = 127;
/// Redis' default LIMIT of an approximate trim: this many nodes' worth of entries.
const APPROXIMATE_LIMIT_NODES: u64 = 100;
/// Bounds of that default limit (Redis caps it both ways).
const APPROXIMATE_LIMIT_MIN: u64 = 10_000;
const APPROXIMATE_LIMIT_MAX: u64 = 1_000_000;

/// The wall clock in Unix milliseconds (Redis' `mstime()`), which IDs and idle times use.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// C's `strtoull(text, &end, 10)` accepting only a full conversion, as Redis'
/// `string2ull` falls back to: leading white space, a sign (`-` negates modulo 2^64),
/// digits; `None` on overflow or anything left over.
fn strtoull(text: &[u8]) -> Option<u64> {
    let start = text
        .iter()
        .position(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let mut rest = &text[start..];
    let negative = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for digit in rest {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// Redis' `string2ull`: a canonical integer (refused when negative), else `strtoull`.
fn string2ull(text: &[u8]) -> Option<u64> {
    if let Some(value) = weft_resp::parse_i64_strict(text) {
        return u64::try_from(value).ok();
    }
    strtoull(text)
}

/// How an ID argument is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdForm {
    /// `-` and `+` allowed.
    Range,
    /// `-` and `+` refused.
    Strict,
}

/// Redis' `streamGenericParseIDOrReply`: `ms-seq`, `ms` (sequence `missing_seq`), `-`,
/// `+`; with `partial`, also `ms-*` (returned with `None` as the sequence).
fn parse_id_parts(
    arg: &[u8],
    missing_seq: u64,
    form: IdForm,
    partial: bool,
) -> Result<(u64, Option<u64>), &'static str> {
    if arg.len() > ID_TEXT_BYTES_MAX {
        return Err(INVALID_ID);
    }
    // Redis reads the argument as a C string: it ends at a NUL byte.
    let text = arg.split(|byte| *byte == 0).next().unwrap_or_default();
    match text {
        b"-" if form == IdForm::Range => return Ok((0, Some(0))),
        b"+" if form == IdForm::Range => return Ok((u64::MAX, Some(u64::MAX))),
        b"-" | b"+" => return Err(INVALID_ID),
        _ => {}
    }
    let (ms, seq) = match text.iter().position(|byte| *byte == b'-') {
        Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
        None => (text, None),
    };
    let ms = string2ull(ms).ok_or(INVALID_ID)?;
    let seq = match seq {
        None => Some(missing_seq),
        Some(b"*") if partial => None,
        Some(seq) => Some(string2ull(seq).ok_or(INVALID_ID)?),
    };
    Ok((ms, seq))
}

/// An ID argument (`-`/`+` per `form`; a missing sequence is `missing_seq`).
///
/// # Errors
/// Redis' error text.
pub(crate) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    form: IdForm,
) -> Result<StreamId, &'static str> {
    let (ms, seq) = parse_id_parts(arg, missing_seq, form, false)?;
    Ok(StreamId::new(ms, seq.unwrap_or(missing_seq)))
}

/// A range bound (`streamParseIntervalIDOrReply`): `(id` is exclusive (then strict), else
/// inclusive with `-`/`+`. Returns the ID and whether it is exclusive.
fn parse_interval(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), &'static str> {
    if arg.len() > 1 && arg[0] == b'(' {
        return Ok((parse_id(&arg[1..], missing_seq, IdForm::Strict)?, true));
    }
    Ok((parse_id(arg, missing_seq, IdForm::Range)?, false))
}

/// The start of a range, `(` moving it up by one.
///
/// # Errors
/// Redis' error text.
pub(crate) fn range_start(arg: &[u8]) -> Result<StreamId, &'static str> {
    let (id, exclusive) = parse_interval(arg, 0)?;
    if exclusive {
        return id.next().ok_or("ERR invalid start ID for the interval");
    }
    Ok(id)
}

/// The end of a range (a missing sequence is the largest), `(` moving it down by one.
///
/// # Errors
/// Redis' error text.
pub(crate) fn range_end(arg: &[u8]) -> Result<StreamId, &'static str> {
    let (id, exclusive) = parse_interval(arg, u64::MAX)?;
    if exclusive {
        return id.previous().ok_or("ERR invalid end ID for the interval");
    }
    Ok(id)
}

/// An integer argument as Redis' `getLongLongFromObjectOrReply`.
pub(crate) fn parse_integer(arg: &[u8]) -> Result<i64, &'static str> {
    weft_resp::parse_i64_strict(arg).ok_or(errors::NOT_INTEGER)
}

/// Writes an ID as a bulk string.
pub(crate) fn id_reply(reply: &mut Reply<'_>, id: StreamId) {
    let mut text = [0u8; 41];
    let mut ms = itoa::Buffer::new();
    let mut seq = itoa::Buffer::new();
    let ms = ms.format(id.ms).as_bytes();
    let seq = seq.format(id.seq).as_bytes();
    text[..ms.len()].copy_from_slice(ms);
    text[ms.len()] = b'-';
    text[ms.len() + 1..ms.len() + 1 + seq.len()].copy_from_slice(seq);
    reply.bulk(&text[..ms.len() + 1 + seq.len()]);
}

/// Writes one entry: its ID, then its fields and values.
pub(crate) fn entry_reply(reply: &mut Reply<'_>, id: StreamId, entry: Entry<'_>) {
    reply.array(2);
    id_reply(reply, id);
    reply.array(entry.len());
    for item in entry.items() {
        reply.bulk(item);
    }
}

/// Writes entries as an array.
fn entries_reply<'a>(reply: &mut Reply<'_>, entries: &[(StreamId, Entry<'a>)]) {
    reply.array(entries.len());
    for (id, entry) in entries {
        entry_reply(reply, *id, *entry);
    }
}

/// A count argument as an unsigned count, negative counting as 0.
fn clamp_count(count: i64) -> usize {
    usize::try_from(count.max(0)).unwrap_or(usize::MAX)
}

/// Writes a count.
pub(crate) fn count_reply(reply: &mut Reply<'_>, count: u64) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

/// A stream was written at `key` (entries added, groups changed): wakes every client
/// blocked on it.
pub(crate) fn signal(session: &Session, key: &[u8]) {
    session
        .context
        .list_waiters
        .signal_every(session.cache.name(), key);
}

// ---------------------------------------------------------------------------------------
// XADD and XTRIM.

/// XADD's and XTRIM's parsed options.
#[derive(Debug, Default)]
struct AddOptions {
    trim: Option<Trim>,
    no_create: bool,
    /// The ID request (XADD), `None` for `*`.
    id: Option<IdSpec>,
    /// Where the ID is (XADD: the fields follow it).
    id_index: usize,
}

/// An explicit XADD ID: `ms-seq`, or `ms-*` (sequence `None`).
#[derive(Debug, Clone, Copy)]
struct IdSpec {
    ms: u64,
    seq: Option<u64>,
}

/// Redis' `streamParseAddOrTrimArgsOrReply` (`xadd` false for XTRIM).
fn parse_add_or_trim(args: &[Bytes], xadd: bool) -> Result<AddOptions, &'static str> {
    const BOTH: &str =
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";
    let mut options = AddOptions::default();
    let mut strategy: Option<TrimStrategy> = None;
    let mut approximate = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut index = 2;
    while index < args.len() {
        let more = args.len() - 1 - index;
        let option = &args[index];
        if xadd && option.as_ref() == b"*" {
            break;
        } else if is(option, "MAXLEN") && more > 0 {
            if strategy.is_some() {
                return Err(BOTH);
            }
            approximate = false;
            let next = &args[index + 1];
            if more >= 2 && next.as_ref() == b"~" {
                approximate = true;
                index += 1;
            } else if more >= 2 && next.as_ref() == b"=" {
                index += 1;
            }
            let max = parse_integer(&args[index + 1])?;
            if max < 0 {
                return Err("ERR The MAXLEN argument must be >= 0.");
            }
            index += 1;
            strategy = Some(TrimStrategy::MaxLen(max.unsigned_abs()));
        } else if is(option, "MINID") && more > 0 {
            if strategy.is_some() {
                return Err(BOTH);
            }
            approximate = false;
            let next = &args[index + 1];
            if more >= 2 && next.as_ref() == b"~" {
                approximate = true;
                index += 1;
            } else if more >= 2 && next.as_ref() == b"=" {
                index += 1;
            }
            let min = parse_id(&args[index + 1], 0, IdForm::Strict)?;
            index += 1;
            strategy = Some(TrimStrategy::MinId(min));
        } else if is(option, "LIMIT") && more > 0 {
            limit = parse_integer(&args[index + 1])?;
            if limit < 0 {
                return Err("ERR The LIMIT argument must be >= 0.");
            }
            limit_given = true;
            index += 1;
        } else if xadd && is(option, "NOMKSTREAM") {
            options.no_create = true;
        } else if xadd {
            let (ms, seq) = parse_id_parts(option, 0, IdForm::Strict, true)?;
            options.id = Some(IdSpec { ms, seq });
            break;
        } else {
            return Err(errors::SYNTAX);
        }
        index += 1;
    }
    options.id_index = index;
    if limit != 0 && strategy.is_none() {
        return Err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        );
    }
    if !xadd && strategy.is_none() {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy");
    }
    let limit = if limit_given {
        if !approximate {
            return Err("ERR syntax error, LIMIT cannot be used without the special ~ option");
        }
        limit.unsigned_abs()
    } else if approximate {
        let node_entries = weft_core::structure::limits::stream_node_entries() as u64;
        let limit = APPROXIMATE_LIMIT_NODES.saturating_mul(node_entries);
        if limit == 0 {
            APPROXIMATE_LIMIT_MIN
        } else {
            limit.min(APPROXIMATE_LIMIT_MAX)
        }
    } else {
        0
    };
    options.trim = strategy.map(|strategy| Trim {
        strategy,
        approximate,
        limit,
    });
    Ok(options)
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value
/// [field value ...]`: the new entry's ID.
pub fn xadd(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let options = match parse_add_or_trim(args, true) {
        Ok(options) => options,
        Err(text) => return reply.error(text),
    };
    let fields_at = options.id_index + 1;
    let fields = args.get(fields_at..).unwrap_or_default();
    if fields.len() < 2 || fields.len() % 2 == 1 {
        return reply.error("ERR wrong number of arguments for 'xadd' command");
    }
    if let Some(IdSpec {
        ms: 0,
        seq: Some(0),
    }) = options.id
    {
        return reply.error("ERR The ID specified in XADD must be greater than 0-0");
    }
    let request = match options.id {
        None => IdRequest::Auto { now_ms: now_ms() },
        Some(IdSpec { ms, seq: None }) => IdRequest::Partial { ms },
        Some(IdSpec { ms, seq: Some(seq) }) => IdRequest::Exact(StreamId::new(ms, seq)),
    };
    // Stored fields and values are copied out of the request buffer (a slice would keep it
    // alive).
    let items: Vec<Bytes> = fields
        .iter()
        .map(|item| Bytes::copy_from_slice(item))
        .collect();
    let result =
        collections::write::<StreamValue, _>(session, &args[1], !options.no_create, |stream| {
            match stream.add(request, &items) {
                Ok(id) => {
                    if let Some(trim) = options.trim {
                        stream.trim(trim);
                    }
                    (Ok(id), true)
                }
                Err(error) => (Err(error), false),
            }
        });
    match result {
        Ok(None) => reply.null(),
        Ok(Some(Ok(id))) => {
            id_reply(reply, id);
            signal(session, &args[1]);
        }
        Ok(Some(Err(AddError::Exhausted))) => reply
            .error("ERR The stream has exhausted the last possible ID, unable to add more items"),
        Ok(Some(Err(AddError::TooLarge))) => reply.error("ERR Elements are too large to be stored"),
        Ok(Some(Err(_))) => reply.error(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item",
        ),
        Err(failure) => failure.reply(reply),
    }
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`: entries removed.
pub fn xtrim(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let options = match parse_add_or_trim(args, false) {
        Ok(options) => options,
        Err(text) => return reply.error(text),
    };
    let Some(trim) = options.trim else {
        return reply.error(errors::SYNTAX);
    };
    let result = collections::write::<StreamValue, _>(session, &args[1], false, |stream| {
        let removed = stream.trim(trim);
        (removed, removed > 0)
    });
    match result {
        Ok(removed) => count_reply(reply, removed.unwrap_or(0)),
        Err(failure) => failure.reply(reply),
    }
}

/// `XDEL key id [id ...]`: entries deleted. As Redis, a missing key answers 0 before the
/// IDs are read, and no ID is deleted unless all parse.
pub fn xdel(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut parsed: Option<Result<(), &'static str>> = None;
    let result = collections::write::<StreamValue, _>(session, &args[1], false, |stream| {
        let ids: Result<Vec<StreamId>, &'static str> = args[2..]
            .iter()
            .map(|arg| parse_id(arg, 0, IdForm::Strict))
            .collect();
        let deleted = match &ids {
            Ok(ids) => ids.iter().filter(|id| stream.delete(**id)).count() as u64,
            Err(_) => 0,
        };
        parsed = Some(ids.map(|_| ()));
        (deleted, deleted > 0)
    });
    match (result, parsed) {
        (Err(failure), _) => failure.reply(reply),
        (Ok(_), Some(Err(text))) => reply.error(text),
        (Ok(deleted), _) => count_reply(reply, deleted.unwrap_or(0)),
    }
}

/// `XLEN key`
pub fn xlen(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    match collections::read::<StreamValue, _>(session, &args[1], |stream| {
        stream.map_or(0, StreamValue::len)
    }) {
        Ok(len) => count_reply(reply, len as u64),
        Err(failure) => failure.reply(reply),
    }
}

// ---------------------------------------------------------------------------------------
// XRANGE and XREVRANGE.

fn range_command(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, reverse: bool) {
    let (start_arg, end_arg) = if reverse {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = match range_start(start_arg) {
        Ok(id) => id,
        Err(text) => return reply.error(text),
    };
    let end = match range_end(end_arg) {
        Ok(id) => id,
        Err(text) => return reply.error(text),
    };
    let mut count: Option<usize> = None;
    let mut index = 4;
    while index < args.len() {
        if is(&args[index], "COUNT") && index + 1 < args.len() {
            match parse_integer(&args[index + 1]) {
                Ok(value) => count = Some(clamp_count(value)),
                Err(text) => return reply.error(text),
            }
            index += 2;
        } else {
            return reply.error(errors::SYNTAX);
        }
    }
    collections::read_or_reply::<StreamValue, _>(session, &args[1], reply, |stream, reply| {
        let Some(stream) = stream else {
            return reply.array(0);
        };
        if count == Some(0) {
            return reply.null_array();
        }
        let limit = count.unwrap_or(usize::MAX);
        let entries: Vec<(StreamId, Entry<'_>)> = if reverse {
            stream.range(start, end).rev().take(limit).collect()
        } else {
            stream.range(start, end).take(limit).collect()
        };
        entries_reply(reply, &entries);
    });
}

/// `XRANGE key start end [COUNT count]`
pub fn xrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, reply, false);
}

/// `XREVRANGE key end start [COUNT count]`
pub fn xrevrange(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    range_command(session, args, reply, true);
}

// ---------------------------------------------------------------------------------------
// XREAD (and the parsing XREADGROUP shares).

/// What a stream's ID argument asks of XREAD/XREADGROUP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadFrom {
    /// Entries after this ID (`$` resolved).
    After(StreamId),
    /// `>`: entries never delivered to the group.
    New,
}

/// XREAD's and XREADGROUP's parsed arguments.
#[derive(Debug)]
pub(crate) struct ReadArgs<'a> {
    /// BLOCK's timeout in milliseconds (0: forever), if given.
    pub block_ms: Option<u64>,
    /// COUNT (0: no limit).
    pub count: usize,
    pub no_ack: bool,
    /// GROUP's group and consumer.
    pub group: Option<(&'a Bytes, &'a Bytes)>,
    /// The stream keys.
    pub keys: &'a [Bytes],
    /// Their ID arguments.
    pub ids: &'a [Bytes],
    /// Where the ID arguments start.
    pub ids_at: usize,
}

/// Parses XREAD's or XREADGROUP's options, up to and including STREAMS (IDs are read
/// against the streams afterwards).
pub(crate) fn parse_read(args: &[Bytes], group_form: bool) -> Result<ReadArgs<'_>, String> {
    let mut parsed = ReadArgs {
        block_ms: None,
        count: 0,
        no_ack: false,
        group: None,
        keys: &[],
        ids: &[],
        ids_at: 0,
    };
    let mut streams_at = 0;
    let mut index = 1;
    while index < args.len() {
        let more = args.len() - index - 1;
        let option = &args[index];
        if is(option, "BLOCK") && more > 0 {
            index += 1;
            let timeout = weft_resp::parse_i64_strict(&args[index])
                .ok_or_else(|| TIMEOUT_NOT_INTEGER.to_owned())?;
            if timeout < 0 {
                return Err(TIMEOUT_NEGATIVE.to_owned());
            }
            parsed.block_ms = Some(timeout.unsigned_abs());
        } else if is(option, "COUNT") && more > 0 {
            index += 1;
            parsed.count = clamp_count(parse_integer(&args[index])?);
        } else if is(option, "STREAMS") && more > 0 {
            streams_at = index + 1;
            let rest = args.len() - streams_at;
            if rest % 2 != 0 {
                return Err(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID \
                            or '$' must be specified."
                        .to_owned(),
                );
            }
            break;
        } else if is(option, "GROUP") && more >= 2 {
            if !group_form {
                return Err(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD \
                     instead."
                        .to_owned(),
                );
            }
            parsed.group = Some((&args[index + 1], &args[index + 2]));
            index += 2;
        } else if is(option, "NOACK") {
            if !group_form {
                return Err(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD \
                     instead."
                        .to_owned(),
                );
            }
            parsed.no_ack = true;
        } else {
            return Err(errors::SYNTAX.to_owned());
        }
        index += 1;
    }
    if streams_at == 0 {
        return Err(errors::SYNTAX.to_owned());
    }
    if group_form && parsed.group.is_none() {
        return Err("ERR Missing GROUP option for XREADGROUP".to_owned());
    }
    let streams = (args.len() - streams_at) / 2;
    parsed.keys = &args[streams_at..streams_at + streams];
    parsed.ids_at = streams_at + streams;
    parsed.ids = &args[streams_at + streams..];
    Ok(parsed)
}

/// Whether a blocking read may block now: not inside MULTI or a script (Redis answers as
/// if it timed out there).
pub(crate) fn may_block(session: &Session) -> bool {
    !session.in_transaction() && !session.in_script
}

/// Leaves a block on `keys` for the connection loop: until `timeout_ms` (0: forever),
/// keeping the first attempt's deadline on a retry.
pub(crate) fn block(
    session: &mut Session,
    keys: &[Bytes],
    timeout_ms: u64,
    retry_args: Option<Vec<Bytes>>,
    recheck: Option<std::time::Duration>,
) {
    let deadline = match &session.block_retry {
        Some(retry) => retry.deadline,
        None => deadline_after(timeout_ms),
    };
    let mut block = Block::new(keys.to_vec(), deadline);
    block.retry_args = retry_args;
    block.recheck = recheck;
    session.blocked = Some(block);
}

/// Writes the reply of a read over several streams: for each stream served, its key and
/// its entries (an array of pairs in RESP2, a map in RESP3), from `parts` written apart.
pub(crate) fn multi_stream_reply(reply: &mut Reply<'_>, parts: &[(usize, BytesMut)]) {
    if reply.protocol() == weft_resp::Protocol::Resp2 {
        reply.array(parts.len());
    } else {
        reply.map(parts.len());
    }
    for (_, part) in parts {
        reply.raw(part);
    }
}

/// `XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]`
pub fn xread(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let parsed = match parse_read(args, false) {
        Ok(parsed) => parsed,
        Err(text) => return reply.error(&text),
    };
    if parsed.block_ms.is_some() && session.in_script {
        return reply.error("ERR xread command is not allowed with BLOCK option from scripts");
    }
    let retrying = session.block_retry.is_some();
    // Resolve the IDs: `$` is the stream's last ID now (0-0 without a stream).
    let mut after = Vec::with_capacity(parsed.keys.len());
    let mut resolved_dollar = false;
    for (key, arg) in parsed.keys.iter().zip(parsed.ids) {
        // Redis checks each key's type before its ID; a retry passes over a key that no
        // longer holds a stream (it serves blocked clients from streams only).
        let last = match collections::read::<StreamValue, _>(session, key, |stream| {
            stream.map_or(StreamId::MIN, StreamValue::last_id)
        }) {
            Ok(last) => last,
            Err(Failure::WrongType) if retrying => StreamId::MIN,
            Err(failure) => return failure.reply(reply),
        };
        match arg.as_ref() {
            b"$" => {
                after.push(last);
                resolved_dollar = true;
            }
            b">" => {
                return reply.error(
                    "ERR The > ID can be specified only when calling XREADGROUP using the \
                     GROUP <group> <consumer> option.",
                );
            }
            _ => match parse_id(arg, 0, IdForm::Strict) {
                Ok(id) => after.push(id),
                Err(text) => return reply.error(text),
            },
        }
    }
    let count = if parsed.count == 0 && retrying {
        BLOCKED_READ_COUNT_DEFAULT
    } else {
        parsed.count
    };
    let mut parts: Vec<(usize, BytesMut)> = Vec::new();
    for (index, (key, after)) in parsed.keys.iter().zip(&after).enumerate() {
        let mut part = BytesMut::new();
        let served = collections::read::<StreamValue, _>(session, key, |stream| {
            let Some(stream) = stream else {
                return false;
            };
            if stream.last_entry_id() <= *after {
                return false;
            }
            let Some(start) = after.next() else {
                return false;
            };
            let limit = if count == 0 { usize::MAX } else { count };
            let entries: Vec<(StreamId, Entry<'_>)> =
                stream.range(start, StreamId::MAX).take(limit).collect();
            let mut out = Reply::new(&mut part, reply.protocol());
            if out.protocol() == weft_resp::Protocol::Resp2 {
                out.array(2);
            }
            out.bulk(key);
            entries_reply(&mut out, &entries);
            true
        });
        match served {
            Ok(true) => parts.push((index, part)),
            Ok(false) | Err(Failure::WrongType) => {}
            Err(failure) => return failure.reply(reply),
        }
    }
    if !parts.is_empty() {
        return multi_stream_reply(reply, &parts);
    }
    match parsed.block_ms {
        Some(timeout) if may_block(session) => {
            let retry_args = resolved_dollar.then(|| {
                let mut rewritten = args.to_vec();
                for (offset, id) in after.iter().enumerate() {
                    rewritten[parsed.ids_at + offset] = Bytes::from(id.to_string());
                }
                rewritten
            });
            block(session, parsed.keys, timeout, retry_args, None);
        }
        _ => reply.null_array(),
    }
}

// ---------------------------------------------------------------------------------------
// XSETID and XINFO.

/// `XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]`
pub fn xsetid(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let id = match parse_id(&args[2], 0, IdForm::Strict) {
        Ok(id) => id,
        Err(text) => return reply.error(text),
    };
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut index = 3;
    while index < args.len() {
        let more = args.len() - 1 - index;
        if is(&args[index], "ENTRIESADDED") && more > 0 {
            match parse_integer(&args[index + 1]) {
                Ok(added) if added < 0 => {
                    return reply.error("ERR entries_added must be positive");
                }
                Ok(added) => entries_added = Some(added.unsigned_abs()),
                Err(text) => return reply.error(text),
            }
            index += 2;
        } else if is(&args[index], "MAXDELETEDID") && more > 0 {
            match parse_id(&args[index + 1], 0, IdForm::Strict) {
                Ok(deleted) if id < deleted => {
                    return reply.error(
                        "ERR The ID specified in XSETID is smaller than the provided \
                         max_deleted_entry_id",
                    );
                }
                Ok(deleted) => max_deleted = deleted,
                Err(text) => return reply.error(text),
            }
            index += 2;
        } else {
            return reply.error(errors::SYNTAX);
        }
    }
    let result = collections::write::<StreamValue, _>(session, &args[1], false, |stream| {
        if !stream.is_empty() {
            if id < stream.last_entry_id() {
                return (
                    Err(
                        "ERR The ID specified in XSETID is smaller than the target stream top item",
                    ),
                    false,
                );
            }
            if entries_added.is_some_and(|added| (stream.len() as u64) > added) {
                return (
                    Err(
                        "ERR The entries_added specified in XSETID is smaller than the target \
                         stream length",
                    ),
                    false,
                );
            }
        }
        stream.set_id(id, entries_added, max_deleted);
        (Ok(()), true)
    });
    match result {
        Ok(None) => reply.error("ERR no such key"),
        Ok(Some(Ok(()))) => reply.ok(),
        Ok(Some(Err(text))) => reply.error(text),
        Err(failure) => failure.reply(reply),
    }
}

/// Redis' reply to a subcommand it does not know or with the wrong arguments.
pub(crate) fn subcommand_error(reply: &mut Reply<'_>, args: &[Bytes]) {
    let command = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    let sub = args
        .get(1)
        .map(|sub| &sub[..sub.len().min(128)])
        .unwrap_or_default();
    reply.error(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {command} HELP.",
        String::from_utf8_lossy(sub).replace(['\r', '\n'], " ")
    ));
}

/// Writes Redis' help reply: the usage line, `lines`, then HELP's own.
pub(crate) fn help_reply(reply: &mut Reply<'_>, command: &str, lines: &[&str]) {
    reply.array(lines.len() + 3);
    reply.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in lines {
        reply.simple(line);
    }
    reply.simple("HELP");
    reply.simple("    Prints this help.");
}

/// A value that may be unknown: an integer, or null.
fn optional_reply(reply: &mut Reply<'_>, value: Option<u64>) {
    match value {
        Some(value) => count_reply(reply, value),
        None => reply.null(),
    }
}

/// A group's lag: an integer, or null when unknown.
fn lag_reply(reply: &mut Reply<'_>, lag: Option<i64>) {
    match lag {
        Some(lag) => reply.integer(lag),
        None => reply.null(),
    }
}

/// `XINFO STREAM key [FULL [COUNT count]]`, `XINFO GROUPS key`, `XINFO CONSUMERS key
/// group`, `XINFO HELP`
pub fn xinfo(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if is(&args[1], "HELP") {
        if args.len() != 2 {
            return subcommand_error(reply, args);
        }
        return help_reply(
            reply,
            "XINFO",
            &[
                "CONSUMERS <key> <groupname>",
                "    Show consumers of <groupname>.",
                "GROUPS <key>",
                "    Show the stream consumer groups.",
                "STREAM <key> [FULL [COUNT <count>]",
                "    Show information about the stream.",
            ],
        );
    }
    if args.len() < 3 {
        return subcommand_error(reply, args);
    }
    let now = now_ms();
    collections::read_or_reply::<StreamValue, _>(session, &args[2], reply, |stream, reply| {
        let Some(stream) = stream else {
            return reply.error("ERR no such key");
        };
        if is(&args[1], "CONSUMERS") && args.len() == 4 {
            let Some(group) = stream.group(&args[3]) else {
                return reply.error(&format!(
                    "NOGROUP No such consumer group '{}' for key name '{}'",
                    String::from_utf8_lossy(&args[3]),
                    String::from_utf8_lossy(&args[2])
                ));
            };
            reply.array(group.consumers().len());
            for (name, consumer) in group.consumers() {
                reply.map(3);
                reply.bulk(b"name");
                reply.bulk(name);
                reply.bulk(b"pending");
                count_reply(reply, consumer.pending().len() as u64);
                reply.bulk(b"idle");
                count_reply(reply, now.saturating_sub(consumer.seen_time_ms));
            }
        } else if is(&args[1], "GROUPS") && args.len() == 3 {
            reply.array(stream.groups().len());
            for (name, group) in stream.groups() {
                reply.map(6);
                reply.bulk(b"name");
                reply.bulk(name);
                reply.bulk(b"consumers");
                count_reply(reply, group.consumers().len() as u64);
                reply.bulk(b"pending");
                count_reply(reply, group.pending().len() as u64);
                reply.bulk(b"last-delivered-id");
                id_reply(reply, group.last_id);
                reply.bulk(b"entries-read");
                optional_reply(reply, group.entries_read);
                reply.bulk(b"lag");
                lag_reply(reply, stream.lag(group));
            }
        } else if is(&args[1], "STREAM") {
            stream_info(stream, args, reply);
        } else {
            subcommand_error(reply, args);
        }
    });
}

/// XINFO STREAM's reply.
fn stream_info(stream: &StreamValue, args: &[Bytes], reply: &mut Reply<'_>) {
    let options = &args[3..];
    let mut full = false;
    let mut count: usize = 10;
    if !options.is_empty() {
        if (options.len() != 1 && options.len() != 3) || !is(&options[0], "FULL") {
            return subcommand_error(reply, args);
        }
        full = true;
        if options.len() == 3 {
            if !is(&options[1], "COUNT") {
                return subcommand_error(reply, args);
            }
            match parse_integer(&options[2]) {
                Ok(value) if value < 0 => count = 10,
                Ok(value) => count = clamp_count(value),
                Err(text) => return reply.error(text),
            }
        }
    }
    let limit = if count == 0 { usize::MAX } else { count };
    reply.map(if full { 9 } else { 10 });
    reply.bulk(b"length");
    count_reply(reply, stream.len() as u64);
    reply.bulk(b"radix-tree-keys");
    count_reply(reply, stream.node_count() as u64);
    reply.bulk(b"radix-tree-nodes");
    // Redis counts its radix tree's inner nodes; a tree of n keys of 16 bytes has about
    // this many, and nothing depends on the exact number.
    count_reply(reply, (stream.node_count() as u64).saturating_mul(2).max(1));
    reply.bulk(b"last-generated-id");
    id_reply(reply, stream.last_id());
    reply.bulk(b"max-deleted-entry-id");
    id_reply(reply, stream.max_deleted_id());
    reply.bulk(b"entries-added");
    count_reply(reply, stream.entries_added());
    reply.bulk(b"recorded-first-entry-id");
    id_reply(reply, stream.first_id());
    if !full {
        reply.bulk(b"groups");
        count_reply(reply, stream.groups().len() as u64);
        reply.bulk(b"first-entry");
        match stream.range(StreamId::MIN, StreamId::MAX).next() {
            Some((id, entry)) => entry_reply(reply, id, entry),
            None => reply.null(),
        }
        reply.bulk(b"last-entry");
        match stream.range(StreamId::MIN, StreamId::MAX).next_back() {
            Some((id, entry)) => entry_reply(reply, id, entry),
            None => reply.null(),
        }
        return;
    }
    reply.bulk(b"entries");
    let entries: Vec<(StreamId, Entry<'_>)> = stream
        .range(StreamId::MIN, StreamId::MAX)
        .take(limit)
        .collect();
    entries_reply(reply, &entries);
    reply.bulk(b"groups");
    reply.array(stream.groups().len());
    for (name, group) in stream.groups() {
        reply.map(7);
        reply.bulk(b"name");
        reply.bulk(name);
        reply.bulk(b"last-delivered-id");
        id_reply(reply, group.last_id);
        reply.bulk(b"entries-read");
        optional_reply(reply, group.entries_read);
        reply.bulk(b"lag");
        lag_reply(reply, stream.lag(group));
        reply.bulk(b"pel-count");
        count_reply(reply, group.pending().len() as u64);
        reply.bulk(b"pending");
        let pending = group.pending().len().min(limit);
        reply.array(pending);
        for (id, entry) in group.pending().iter().take(limit) {
            reply.array(4);
            id_reply(reply, *id);
            reply.bulk(&entry.consumer);
            count_reply(reply, entry.delivery_time_ms);
            count_reply(reply, entry.delivery_count);
        }
        reply.bulk(b"consumers");
        reply.array(group.consumers().len());
        for (name, consumer) in group.consumers() {
            reply.map(4);
            reply.bulk(b"name");
            reply.bulk(name);
            reply.bulk(b"seen-time");
            count_reply(reply, consumer.seen_time_ms);
            reply.bulk(b"pel-count");
            count_reply(reply, consumer.pending().len() as u64);
            reply.bulk(b"pending");
            reply.array(consumer.pending().len().min(limit));
            for id in consumer.pending().iter().take(limit) {
                let (time, deliveries) = group.pending().get(id).map_or((0, 0), |entry| {
                    (entry.delivery_time_ms, entry.delivery_count)
                });
                reply.array(3);
                id_reply(reply, *id);
                count_reply(reply, time);
                count_reply(reply, deliveries);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves IDs parse as Redis' `streamGenericParseIDOrReply` (with `string2ull`'s
    // fallback to strtoull) reads them.
    #[test]
    fn ids_parse_as_redis() {
        let id = |text: &str| parse_id(text.as_bytes(), 0, IdForm::Range).ok();
        assert_eq!(id("1-2"), Some(StreamId::new(1, 2)));
        assert_eq!(id("5"), Some(StreamId::new(5, 0)));
        assert_eq!(id("-"), Some(StreamId::MIN));
        assert_eq!(id("+"), Some(StreamId::MAX));
        assert_eq!(id("+5"), Some(StreamId::new(5, 0)));
        assert_eq!(id("007-1"), Some(StreamId::new(7, 1)));
        assert_eq!(id(" 7"), Some(StreamId::new(7, 0)));
        assert_eq!(id("1--0"), Some(StreamId::new(1, 0)));
        assert_eq!(id("1--1"), None);
        assert_eq!(id("1-"), None);
        assert_eq!(id("18446744073709551616"), None);
        assert_eq!(id("a-1"), None);
        assert_eq!(id(""), None);
        assert_eq!(parse_id(b"-", 0, IdForm::Strict), Err(INVALID_ID));
        assert_eq!(
            parse_id(b"3", u64::MAX, IdForm::Range),
            Ok(StreamId::new(3, u64::MAX))
        );
        assert_eq!(
            parse_id_parts(b"3-*", 0, IdForm::Strict, true),
            Ok((3, None))
        );
        assert!(parse_id(b"3-*", 0, IdForm::Strict).is_err());
        assert_eq!(range_start(b"(1-1"), Ok(StreamId::new(1, 2)));
        assert_eq!(range_end(b"(2"), Ok(StreamId::new(2, u64::MAX - 1)));
        assert_eq!(range_end(b"(2-0"), Ok(StreamId::new(1, u64::MAX)));
        assert!(range_start(b"(18446744073709551615-18446744073709551615").is_err());
        assert!(range_end(b"(0-0").is_err());
        assert!(range_start(b"(-").is_err());
    }
}
