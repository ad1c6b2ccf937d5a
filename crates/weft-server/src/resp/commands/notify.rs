//! Keyspace notifications (`notify-keyspace-events`): pub/sub messages on
//! `__keyspace@<db>__:<key>` (the event) and `__keyevent@<db>__:<event>` (the key) when a
//! command changes a key, as Redis publishes them.
//!
//! A command's event comes from the RESP layer, where the command is known: around a write
//! command, while notifications are on (one atomic load otherwise), the versions of the
//! keys it names are read before and after it runs; each key whose version changed gets the
//! command's event (`lpush`, `hset`, `expire` …), a key that appeared also `new`, and a
//! structure a pop or removal emptied also `del`. Expirations and evictions, whatever
//! protocol or the reaper caused them, come from the database caches' listeners.
//!
//! Where Weft differs: a command that changes a key without changing its version publishes
//! nothing (none known). XREADGROUP, XCLAIM and XAUTOCLAIM creating a consumer publish
//! `xgroup-createconsumer` themselves ([`consumer_created`]).

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

use crate::resp::Session;
use crate::resp::table::CommandSpec;

const KEYSPACE: u32 = 1 << 0;
const KEYEVENT: u32 = 1 << 1;
const GENERIC: u32 = 1 << 2;
const STRING: u32 = 1 << 3;
const LIST: u32 = 1 << 4;
const SET: u32 = 1 << 5;
const HASH: u32 = 1 << 6;
const ZSET: u32 = 1 << 7;
const EXPIRED: u32 = 1 << 8;
const EVICTED: u32 = 1 << 9;
const STREAM: u32 = 1 << 10;
const KEY_MISS: u32 = 1 << 11;
const MODULE: u32 = 1 << 12;
const NEW: u32 = 1 << 13;
/// Redis' `A`: every class but key-miss and new.
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes' letters, in the order Redis writes them back.
const LETTERS: [(char, u32); 10] = [
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
];

/// Reads `notify-keyspace-events`' letters; `None` for a letter Redis does not know.
#[must_use]
pub fn parse(text: &str) -> Option<u32> {
    let mut flags = 0;
    for letter in text.chars() {
        flags |= match letter {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => KEY_MISS,
            'n' => NEW,
            other => LETTERS.iter().find(|(l, _)| *l == other)?.1,
        };
    }
    Some(flags)
}

/// The letters of `flags` as CONFIG GET shows them (Redis' order, `A` for all classes).
#[must_use]
pub fn letters(flags: u32) -> String {
    let mut text = String::new();
    if flags & ALL == ALL {
        text.push('A');
    } else {
        for (letter, bit) in LETTERS {
            if flags & bit != 0 {
                text.push(letter);
            }
        }
    }
    for (letter, bit) in [
        ('K', KEYSPACE),
        ('E', KEYEVENT),
        ('m', KEY_MISS),
        ('n', NEW),
    ] {
        if flags & bit != 0 {
            text.push(letter);
        }
    }
    text
}

/// The server's setting; 0 (nothing published) until CONFIG SET turns it on.
#[derive(Debug, Default)]
pub struct KeyspaceEvents {
    flags: AtomicU32,
    /// The server, for the caches' listeners (set once it exists).
    server: std::sync::OnceLock<std::sync::Weak<crate::ServerContext>>,
}

impl KeyspaceEvents {
    /// Lets the caches' listeners reach the server.
    pub fn bind(&self, server: &std::sync::Arc<crate::ServerContext>) {
        let _ = self.server.set(std::sync::Arc::downgrade(server));
    }

    /// Applies CONFIG SET `notify-keyspace-events`.
    pub fn set(&self, flags: u32) {
        self.flags.store(flags, Ordering::Relaxed);
    }

    /// Whether any event of class `class` is published.
    #[must_use]
    pub fn wants(&self, class: u32) -> bool {
        let flags = self.flags.load(Ordering::Relaxed);
        flags & (KEYSPACE | KEYEVENT) != 0 && flags & class != 0
    }

    fn flags(&self) -> u32 {
        self.flags.load(Ordering::Relaxed)
    }
}

/// Publishes `event` of `class` on `key` of database `database`.
pub fn publish(context: &crate::ServerContext, class: u32, event: &str, key: &[u8], database: u32) {
    let flags = context.keyspace_events.flags();
    if flags & class == 0 {
        return;
    }
    let pubsub = &context.push.pubsub;
    if flags & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{database}__:").into_bytes();
        channel.extend_from_slice(key);
        pubsub.notify(&channel, event.as_bytes());
    }
    if flags & KEYEVENT != 0 {
        let channel = format!("__keyevent@{database}__:{event}");
        pubsub.notify(channel.as_bytes(), key);
    }
}

/// The event (and its class) a write command publishes for the keys it changed.
fn event_of(spec: &CommandSpec, args: &[Bytes]) -> Option<(&'static str, u32)> {
    let sub = |name: &str| {
        args.get(1)
            .is_some_and(|arg| arg.eq_ignore_ascii_case(name.as_bytes()))
    };
    Some(match spec.name {
        "set" | "setnx" | "setex" | "psetex" | "getset" | "mset" | "msetnx" | "bitop" => {
            ("set", STRING)
        }
        "incr" | "incrby" => ("incrby", STRING),
        "decr" | "decrby" => ("decrby", STRING),
        "incrbyfloat" | "append" | "setrange" | "setbit" => (spec.name, STRING),
        "bitfield" => ("setbit", STRING),
        "pfadd" | "pfmerge" => (spec.name, STRING),
        "del" | "unlink" | "getdel" => ("del", GENERIC),
        "expire" | "pexpire" | "expireat" | "pexpireat" => ("expire", GENERIC),
        "persist" => ("persist", GENERIC),
        "restore" => ("restore", GENERIC),
        "copy" => ("copy_to", GENERIC),
        "lpush" | "lpushx" => ("lpush", LIST),
        "rpush" | "rpushx" => ("rpush", LIST),
        "lpop" | "blpop" => ("lpop", LIST),
        "rpop" | "brpop" => ("rpop", LIST),
        "linsert" | "lset" | "ltrim" | "lrem" => (spec.name, LIST),
        "sadd" | "srem" | "spop" => (spec.name, SET),
        "sinterstore" | "sunionstore" | "sdiffstore" => (spec.name, SET),
        "hset" | "hmset" | "hsetnx" => ("hset", HASH),
        "hincrby" | "hincrbyfloat" | "hdel" => (spec.name, HASH),
        "zadd" | "zrem" | "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex" => {
            (spec.name, ZSET)
        }
        "zincrby" => ("zincr", ZSET),
        "zpopmin" | "bzpopmin" => ("zpopmin", ZSET),
        "zpopmax" | "bzpopmax" => ("zpopmax", ZSET),
        "zunionstore" | "zinterstore" | "zdiffstore" | "zrangestore" => (spec.name, ZSET),
        "xadd" | "xtrim" | "xdel" | "xsetid" => (spec.name, STREAM),
        "xgroup" if sub("create") => ("xgroup-create", STREAM),
        "xgroup" if sub("setid") => ("xgroup-setid", STREAM),
        "xgroup" if sub("destroy") => ("xgroup-destroy", STREAM),
        "xgroup" if sub("createconsumer") => ("xgroup-createconsumer", STREAM),
        "xgroup" if sub("delconsumer") => ("xgroup-delconsumer", STREAM),
        _ => return None,
    })
}

/// Whether stream events are published now (so a command that may create a consumer looks
/// whether it did).
pub fn wants_stream_events(session: &Session) -> bool {
    session.context.keyspace_events.wants(STREAM)
}

/// A command created a consumer of stream `key` as it read or claimed for it.
pub fn consumer_created(session: &Session, key: &[u8]) {
    publish(
        &session.context,
        STREAM,
        "xgroup-createconsumer",
        key,
        session.database,
    );
}

/// The keys a write command names and their versions before it runs (`None`: absent),
/// when keyspace notifications may publish something for it.
pub fn before(
    session: &Session,
    spec: &CommandSpec,
    args: &[Bytes],
) -> Option<Vec<(Bytes, Option<u64>)>> {
    let context = &session.context;
    if context.keyspace_events.flags() & (KEYSPACE | KEYEVENT) == 0
        || !spec.flags.contains(&"write")
    {
        return None;
    }
    let positions = super::server::key_positions(spec, args)?;
    Some(
        positions
            .into_iter()
            .filter_map(|at| args.get(at))
            .map(|key| {
                let version = session
                    .cache
                    .get_entry(key)
                    .ok()
                    .flatten()
                    .map(|e| e.version());
                (key.clone(), version)
            })
            .collect(),
    )
}

/// Publishes the events of a write command that ran, from the versions [`before`] read.
pub fn after(
    session: &Session,
    spec: &CommandSpec,
    args: &[Bytes],
    before: Vec<(Bytes, Option<u64>)>,
) {
    let context = &session.context;
    let Some((event, class)) = event_of(spec, args) else {
        return;
    };
    let database = session.database;
    let mut seen: Vec<&Bytes> = Vec::new();
    for (key, was) in &before {
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let now = session
            .cache
            .get_entry(key)
            .ok()
            .flatten()
            .map(|e| e.version());
        if now == *was {
            continue;
        }
        publish(context, class, event, key, database);
        // SET ... EX and its kin also set an expiration.
        if matches!(spec.name, "setex" | "psetex")
            || (spec.name == "set"
                && args[3..].iter().any(|arg| {
                    ["ex", "px", "exat", "pxat"]
                        .iter()
                        .any(|option| arg.eq_ignore_ascii_case(option.as_bytes()))
                }))
        {
            publish(context, GENERIC, "expire", key, database);
        }
        if was.is_none() && now.is_some() {
            publish(context, NEW, "new", key, database);
        }
        if was.is_some() && now.is_none() && class != GENERIC {
            publish(context, GENERIC, "del", key, database);
        }
    }
}

/// Expirations and evictions of a RESP database's cache, whatever removed them.
pub fn watch_cache(context: &crate::ServerContext, cache: &weft_core::Cache) {
    use weft_core::{EventKind, EventKinds, ListenerOptions};
    let Some(weak) = context.keyspace_events.server.get().cloned() else {
        return;
    };
    let options = ListenerOptions {
        kinds: EventKinds::NONE
            .with(EventKind::Expired)
            .with(EventKind::Evicted),
        local_only: true,
        ..ListenerOptions::default()
    };
    let name = cache.name().to_owned();
    cache.add_listener(options, move |event| {
        let Some(context) = weak.upgrade() else {
            return;
        };
        let (class, name_of_event) = match event.kind() {
            EventKind::Expired => (EXPIRED, "expired"),
            EventKind::Evicted => (EVICTED, "evicted"),
            _ => return,
        };
        if !context.keyspace_events.wants(class) {
            return;
        }
        let Some(cache) = context.manager.cache(&name) else {
            return;
        };
        if let Some(database) = context.manager.resp_database_of(&cache) {
            publish(&context, class, name_of_event, event.key(), database);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the flags read and write back as Redis' CONFIG GET shows them.
    #[test]
    fn letters_round_trip_as_redis_writes_them() {
        assert_eq!(parse("gKE").map(letters).as_deref(), Some("gKE"));
        assert_eq!(
            parse("$lshzxeKE").map(letters).as_deref(),
            Some("$lshzxeKE")
        );
        assert_eq!(parse("KA").map(letters).as_deref(), Some("AK"));
        assert_eq!(parse("EA").map(letters).as_deref(), Some("AE"));
        assert_eq!(parse("").map(letters).as_deref(), Some(""));
        assert_eq!(parse("Kq"), None);
    }
}
