//! DUMP and RESTORE: a key's value in Redis' RDB format (`weft_resp::rdb::value`), so that
//! a value dumped by redis-server restores here and one dumped here restores there.
//!
//! DUMP writes each structure in the encoding Redis 7.0 would hold it in (Weft keeps the
//! same compact/large split): a string as RDB writes strings (integers, LZF); a list as a
//! quicklist of listpacks; a set as an intset or a plain set; a sorted set or a hash as a
//! listpack or plain; a stream as its listpack nodes — the entries Weft holds, and for the
//! deleted entries it only counts, tombstones padded to the node's size (see
//! `rdb::stream::Node::add_tombstones`) — with its groups. RESTORE reads every encoding
//! redis-server 7.0.15 reads but module values and zipmaps, refusing what Redis refuses with
//! Redis' two errors. IDLETIME and FREQ are checked as Redis checks them, then ignored:
//! Weft keeps no LRU clock or LFU counter per key.

use bytes::Bytes;
use weft_core::stream::{GroupImage, NodeImage, PendingEntry, StreamId, StreamImage, StreamValue};
use weft_core::structure::{HashValue, ListValue, SetValue, SortedSetValue};
use weft_core::{Compute, Expiry, NewValue, Structure, StructureCell, WriteOptions};
use weft_resp::rdb::RdbError;
use weft_resp::rdb::stream as rdb_stream;
use weft_resp::rdb::value::{self as rdb_value, Value};

use super::strings::{cache_error, expiry_replacing_until};
use super::{errors, is};
use crate::resp::{Reply, Session};

/// Redis' reply when RESTORE would overwrite a key without REPLACE.
const BUSY_KEY: &str = "BUSYKEY Target key name already exists.";
/// Redis' reply to a payload whose footer is wrong.
const BAD_FOOTER: &str = "ERR DUMP payload version or checksum are wrong";
/// Redis' reply to a payload whose value cannot be loaded.
const BAD_FORMAT: &str = "ERR Bad data format";
/// RESTORE's FREQ: a logarithmic counter of 8 bits.
const FREQUENCY_MAX: i64 = 255;

/// `DUMP key`: the value's payload, or nil for a missing key.
pub fn dump(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let entry = match session.cache.get_entry(&args[1]) {
        Ok(Some(entry)) => entry,
        Ok(None) => return reply.null(),
        Err(error) => return cache_error(reply, &error),
    };
    let payload = match entry.structure() {
        None => rdb_value::dump_string(entry.value()),
        Some(cell) => dump_structure(&cell.lock()),
    };
    reply.bulk(&payload);
}

/// A structure's payload, in the encoding Redis would hold it in.
fn dump_structure(structure: &Structure) -> Vec<u8> {
    match structure {
        Structure::List(list) => rdb_value::dump_list(list.iter().map(|item| &item[..])),
        Structure::Set(set) if set.is_compact() => {
            // A compact set holds canonical integers only, in ascending order.
            let values: Vec<i64> = set
                .iter()
                .filter_map(|member| weft_resp::parse_i64_strict(member))
                .collect();
            rdb_value::dump_intset(&values)
        }
        Structure::Set(set) => rdb_value::dump_set(set.len(), set.iter().map(|m| &m[..])),
        Structure::SortedSet(zset) if zset.is_compact() => {
            rdb_value::dump_zset_listpack(zset.iter().map(|(member, score)| (&member[..], score)))
        }
        Structure::SortedSet(zset) => rdb_value::dump_zset(
            zset.len(),
            zset.iter()
                .rev()
                .map(|(member, score)| (&member[..], score)),
        ),
        Structure::Hash(hash) if hash.is_compact() => rdb_value::dump_hash_listpack(
            hash.iter().map(|(field, value)| (&field[..], &value[..])),
        ),
        Structure::Hash(hash) => rdb_value::dump_hash(
            hash.len(),
            hash.iter().map(|(field, value)| (&field[..], &value[..])),
        ),
        Structure::Stream(stream) => rdb_value::dump_stream(&to_rdb_stream(stream)),
    }
}

/// A stream as a payload holds it.
fn to_rdb_stream(stream: &StreamValue) -> rdb_stream::Stream {
    let image = stream.image();
    let id = |id: StreamId| rdb_stream::StreamId {
        ms: id.ms,
        seq: id.seq,
    };
    let nodes = image
        .nodes
        .iter()
        .filter(|node| !node.entries.is_empty())
        .map(|node| {
            let mut out = rdb_stream::Node {
                master: id(node.master),
                master_fields: node.master_fields.iter().map(|f| f.to_vec()).collect(),
                entries: node
                    .entries
                    .iter()
                    .map(|(entry_id, items)| rdb_stream::Entry {
                        id: id(*entry_id),
                        deleted: false,
                        fields: items
                            .chunks_exact(2)
                            .map(|pair| (pair[0].to_vec(), pair[1].to_vec()))
                            .collect(),
                    })
                    .collect(),
                listpack_bytes: node.listpack_bytes,
            };
            let deleted = usize::try_from(node.deleted).unwrap_or(usize::MAX);
            out.add_tombstones(deleted, id(node.last_id), node.listpack_bytes);
            out
        })
        .collect();
    let groups = image
        .groups
        .iter()
        .map(|group| {
            let mut owned: std::collections::BTreeMap<&[u8], Vec<rdb_stream::StreamId>> =
                std::collections::BTreeMap::new();
            for (pending_id, entry) in &group.pending {
                owned
                    .entry(&entry.consumer[..])
                    .or_default()
                    .push(id(*pending_id));
            }
            rdb_stream::Group {
                name: group.name.to_vec(),
                last_id: id(group.last_id),
                entries_read: group.entries_read,
                pending: group
                    .pending
                    .iter()
                    .map(|(pending_id, entry)| rdb_stream::Pending {
                        id: id(*pending_id),
                        delivery_time_ms: entry.delivery_time_ms,
                        delivery_count: entry.delivery_count,
                    })
                    .collect(),
                consumers: group
                    .consumers
                    .iter()
                    .map(|(name, seen_time_ms)| rdb_stream::Consumer {
                        name: name.to_vec(),
                        seen_time_ms: *seen_time_ms,
                        pending: owned.remove(&name[..]).unwrap_or_default(),
                    })
                    .collect(),
            }
        })
        .collect();
    rdb_stream::Stream {
        nodes,
        length: stream.len() as u64,
        last_id: id(image.last_id),
        first_id: id(image.first_id),
        max_deleted_id: id(image.max_deleted_id),
        entries_added: image.entries_added,
        groups,
    }
}

/// RESTORE's options after the payload.
#[derive(Debug, Default)]
struct Options {
    replace: bool,
    absolute: bool,
}

impl Options {
    /// Parses them as Redis does: IDLETIME and FREQ exclude each other (the second is a
    /// syntax error), and each value is checked.
    fn parse(args: &[Bytes]) -> Result<Self, &'static str> {
        let mut options = Self::default();
        let mut idle = false;
        let mut frequency = false;
        let mut j = 4;
        while j < args.len() {
            let more = j + 1 < args.len();
            if is(&args[j], "replace") {
                options.replace = true;
            } else if is(&args[j], "absttl") {
                options.absolute = true;
            } else if is(&args[j], "idletime") && more && !frequency {
                let seconds =
                    weft_resp::parse_i64_strict(&args[j + 1]).ok_or(errors::NOT_INTEGER)?;
                if seconds < 0 {
                    return Err("ERR Invalid IDLETIME value, must be >= 0");
                }
                idle = true;
                j += 1;
            } else if is(&args[j], "freq") && more && !idle {
                let counter =
                    weft_resp::parse_i64_strict(&args[j + 1]).ok_or(errors::NOT_INTEGER)?;
                if !(0..=FREQUENCY_MAX).contains(&counter) {
                    return Err("ERR Invalid FREQ value, must be >= 0 and <= 255");
                }
                frequency = true;
                j += 1;
            } else {
                return Err(errors::SYNTAX);
            }
            j += 1;
        }
        Ok(options)
    }
}

/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`
///
/// Checked in Redis' order: options, an existing key (without REPLACE), the TTL, the
/// payload's footer, its value. A TTL already past stores nothing (and with REPLACE
/// deletes the key) yet answers OK, as Redis does.
pub fn restore(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let options = match Options::parse(args) {
        Ok(options) => options,
        Err(text) => return reply.error(text),
    };
    let key = &args[1];
    if !options.replace {
        match session.cache.contains(key) {
            Ok(true) => return reply.error(BUSY_KEY),
            Ok(false) => {}
            Err(error) => return cache_error(reply, &error),
        }
    }
    let Some(ttl) = weft_resp::parse_i64_strict(&args[2]) else {
        return reply.error(errors::NOT_INTEGER);
    };
    if ttl < 0 {
        return reply.error("ERR Invalid TTL value, must be >= 0");
    }
    let value = match rdb_value::read(&args[3]) {
        Ok(value) => value,
        Err(RdbError::Footer) => return reply.error(BAD_FOOTER),
        Err(RdbError::Format) => return reply.error(BAD_FORMAT),
    };
    let Some(value) = to_value(value) else {
        return reply.error(BAD_FORMAT);
    };
    let clock = session.cache.clock();
    let now = i64::try_from(clock.now_ms()).unwrap_or(i64::MAX);
    // Redis adds the time as a C `long long`, wrapping on overflow.
    let deadline = match ttl {
        0 => None,
        ttl if options.absolute => Some(ttl),
        ttl => Some(ttl.wrapping_add(now)),
    };
    let expired = deadline.is_some_and(|deadline| deadline <= now);
    let is_structure = matches!(value, NewValue::Structure(_));
    let result = session
        .cache
        .compute(key, &WriteOptions::default(), |existing| {
            if existing.is_some() && !options.replace {
                return Compute::Keep(Err(BUSY_KEY));
            }
            if expired {
                return if existing.is_some() {
                    Compute::Remove(Ok(false))
                } else {
                    Compute::Keep(Ok(false))
                };
            }
            let expiry = deadline.map_or(Expiry::default(), |deadline| {
                expiry_replacing_until(u64::try_from(deadline).unwrap_or(0), clock.now_ms())
            });
            Compute::PutValue(value, expiry, Ok(true))
        });
    match result {
        Ok(Ok(stored)) => {
            if stored && is_structure {
                super::lists::signal_stored(session, key);
            }
            reply.ok();
        }
        Ok(Err(text)) => reply.error(text),
        Err(error) => cache_error(reply, &error),
    }
}

/// The value to store for a payload's value; `None` when it holds a duplicate member,
/// field or stream element Redis would refuse, or a stream Weft cannot hold.
fn to_value(value: Value) -> Option<NewValue> {
    let structure = match value {
        Value::String(text) => {
            return Some(NewValue::Bytes {
                value: text,
                user_flags: 0,
                edited: false,
            });
        }
        Value::List(items) => {
            let mut list = ListValue::default();
            for item in items {
                list.push_back(Bytes::from(item));
            }
            Structure::List(list)
        }
        Value::Set(members) => {
            let mut set = SetValue::default();
            for member in members {
                if !set.insert(Bytes::from(member)) {
                    return None;
                }
            }
            Structure::Set(set)
        }
        Value::SortedSet(members) => {
            let mut zset = SortedSetValue::default();
            for (member, score) in members {
                if zset.insert(Bytes::from(member), score).is_some() {
                    return None;
                }
            }
            Structure::SortedSet(zset)
        }
        Value::Hash(pairs) => {
            let mut hash = HashValue::default();
            for (field, value) in pairs {
                if hash
                    .insert(Bytes::from(field), Bytes::from(value))
                    .is_some()
                {
                    return None;
                }
            }
            Structure::Hash(hash)
        }
        Value::Stream(stream) => {
            Structure::Stream(StreamValue::from_image(stream_image(stream)).ok()?)
        }
    };
    Some(NewValue::Structure(StructureCell::new(structure)))
}

/// A payload's stream as Weft's parts: each node's live entries, its deleted count, its
/// size and its last ID (the last entry in it, deleted or not); each group's pending
/// entries with the consumer that owns them.
fn stream_image(stream: rdb_stream::Stream) -> StreamImage {
    let id = |id: rdb_stream::StreamId| StreamId::new(id.ms, id.seq);
    let nodes = stream
        .nodes
        .into_iter()
        .map(|node| {
            let last_id = node.entries.last().map_or(node.master, |entry| entry.id);
            let deleted = node.entries.iter().filter(|entry| entry.deleted).count() as u64;
            NodeImage {
                master: id(node.master),
                deleted,
                listpack_bytes: node.listpack_bytes,
                master_fields: node.master_fields.into_iter().map(Bytes::from).collect(),
                last_id: id(last_id),
                entries: node
                    .entries
                    .into_iter()
                    .filter(|entry| !entry.deleted)
                    .map(|entry| {
                        let items = entry
                            .fields
                            .into_iter()
                            .flat_map(|(field, value)| [Bytes::from(field), Bytes::from(value)])
                            .collect();
                        (id(entry.id), items)
                    })
                    .collect(),
            }
        })
        .collect();
    let groups = stream
        .groups
        .into_iter()
        .map(|group| {
            let mut pending: Vec<(StreamId, PendingEntry)> =
                Vec::with_capacity(group.pending.len());
            // The payload's pending list is in ID order (`rdb_stream::Stream::read`).
            for consumer in &group.consumers {
                for pending_id in &consumer.pending {
                    let found = group
                        .pending
                        .binary_search_by_key(pending_id, |entry| entry.id)
                        .ok()
                        .map(|at| &group.pending[at]);
                    if let Some(entry) = found {
                        pending.push((
                            id(entry.id),
                            PendingEntry {
                                delivery_time_ms: entry.delivery_time_ms,
                                delivery_count: entry.delivery_count,
                                consumer: Bytes::copy_from_slice(&consumer.name),
                            },
                        ));
                    }
                }
            }
            GroupImage {
                name: Bytes::from(group.name),
                last_id: id(group.last_id),
                entries_read: group.entries_read,
                consumers: group
                    .consumers
                    .into_iter()
                    .map(|consumer| (Bytes::from(consumer.name), consumer.seen_time_ms))
                    .collect(),
                pending,
            }
        })
        .collect();
    StreamImage {
        last_id: id(stream.last_id),
        first_id: id(stream.first_id),
        max_deleted_id: id(stream.max_deleted_id),
        entries_added: stream.entries_added,
        nodes,
        groups,
    }
}
