//! A whole DUMP payload: the value's type byte and its encoding, as redis-server 7.0's
//! `rdbSaveObject` writes it and `rdbLoadObject` reads it back.
//!
//! Reading accepts every type redis-server 7.0.15 RESTOREs except module values and
//! Redis 2.x zipmaps: strings, lists (linked, ziplist, quicklists of ziplists or listpacks),
//! sets (plain, intset), sorted sets (plain with text or binary scores, ziplist, listpack),
//! hashes (plain, ziplist, listpack) and streams (Redis 5–6.2's and 7.0's). It checks what
//! Redis' deep sanitization checks, and refuses what Redis refuses as "Bad data format"
//! (empty values, NaN scores, unknown encodings); duplicate members are for the caller to
//! refuse, as it builds the structure. Writing produces what redis-server 7.0.15's DUMP
//! produces for the same value in the same encoding.

use super::listpack::{self, Element};
use super::stream::Stream;
use super::{RdbError, Reader, intset, open, seal, write_blob, write_len, ziplist};

/// `RDB_TYPE_*`: the type bytes of values.
pub mod kind {
    /// A string.
    pub const STRING: u8 = 0;
    /// A list as a length and its elements (Redis ≤ 3.0).
    pub const LIST: u8 = 1;
    /// A set as a length and its members.
    pub const SET: u8 = 2;
    /// A sorted set with scores as text (Redis ≤ 3.0).
    pub const ZSET: u8 = 3;
    /// A hash as a length and its fields and values.
    pub const HASH: u8 = 4;
    /// A sorted set with binary scores.
    pub const ZSET_2: u8 = 5;
    /// A module value.
    pub const MODULE: u8 = 6;
    /// A module value, version 2.
    pub const MODULE_2: u8 = 7;
    /// A hash as a zipmap (Redis ≤ 2.4).
    pub const HASH_ZIPMAP: u8 = 9;
    /// A list as one ziplist.
    pub const LIST_ZIPLIST: u8 = 10;
    /// A set as an intset.
    pub const SET_INTSET: u8 = 11;
    /// A sorted set as a ziplist.
    pub const ZSET_ZIPLIST: u8 = 12;
    /// A hash as a ziplist.
    pub const HASH_ZIPLIST: u8 = 13;
    /// A list as a quicklist of ziplists.
    pub const LIST_QUICKLIST: u8 = 14;
    /// A stream (Redis 5 to 6.2).
    pub const STREAM_LISTPACKS: u8 = 15;
    /// A hash as a listpack.
    pub const HASH_LISTPACK: u8 = 16;
    /// A sorted set as a listpack.
    pub const ZSET_LISTPACK: u8 = 17;
    /// A list as a quicklist of listpacks or plain nodes.
    pub const LIST_QUICKLIST_2: u8 = 18;
    /// A stream (Redis 7.0).
    pub const STREAM_LISTPACKS_2: u8 = 19;
}

/// A quicklist node holding one large element as it is (`QUICKLIST_NODE_CONTAINER_PLAIN`).
const CONTAINER_PLAIN: u64 = 1;
/// A quicklist node holding a listpack (`QUICKLIST_NODE_CONTAINER_PACKED`).
const CONTAINER_PACKED: u64 = 2;
/// Redis' `list-max-listpack-size` default (-2): a list node's listpack stays within 8 KiB.
const LIST_NODE_BYTES_MAX: usize = 8192;
/// Redis' `SIZE_ESTIMATE_OVERHEAD`: what a quicklist adds to an element's size when it
/// decides whether the element still fits in a node.
const LIST_ELEMENT_OVERHEAD_BYTES: usize = 8;
/// `zzlStrtod` reads at most this many bytes of a score stored as text.
const SCORE_TEXT_BYTES_MAX: usize = 127;
/// Scores in this range that are integers are stored in a listpack as integers
/// (`double2ll`: `LLONG_MAX / 2`, as a double 2^62).
const SCORE_INTEGER_MAX: f64 = 4_611_686_018_427_387_904.0;

/// A value as a payload holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    String(Vec<u8>),
    /// A list, head first.
    List(Vec<Vec<u8>>),
    /// A set's members.
    Set(Vec<Vec<u8>>),
    /// A sorted set's members and scores (never NaN), in the payload's order.
    SortedSet(Vec<(Vec<u8>, f64)>),
    /// A hash's fields and values, in the payload's order.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    /// A stream.
    Stream(Stream),
}

/// Reads the value of a DUMP payload, as RESTORE does: the footer checked first
/// (`verifyDumpPayload`), then the type byte and the value read from the payload's start —
/// over the footer too, as Redis reads it, so that bytes left over are not an error.
///
/// # Errors
/// [`RdbError::Footer`] for a short payload, a newer RDB version or a wrong checksum;
/// [`RdbError::Format`] for anything else Redis refuses to load.
pub fn read(payload: &[u8]) -> Result<Value, RdbError> {
    open(payload)?;
    let mut reader = Reader::new(payload);
    let kind = reader.byte()?;
    read_value(&mut reader, kind)
}

fn read_value(reader: &mut Reader<'_>, kind: u8) -> Result<Value, RdbError> {
    match kind {
        kind::STRING => Ok(Value::String(reader.string()?)),
        kind::LIST => {
            let len = non_empty(reader.count()?)?;
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(reader.string()?);
            }
            Ok(Value::List(items))
        }
        kind::SET => {
            let len = non_empty(reader.count()?)?;
            let mut members = Vec::with_capacity(len);
            for _ in 0..len {
                members.push(reader.string()?);
            }
            Ok(Value::Set(members))
        }
        kind::ZSET | kind::ZSET_2 => {
            let len = non_empty(reader.count()?)?;
            let mut members = Vec::with_capacity(len);
            for _ in 0..len {
                let member = reader.string()?;
                let score = if kind == kind::ZSET_2 {
                    reader.f64_le()?
                } else {
                    text_double(reader)?
                };
                if score.is_nan() {
                    return Err(RdbError::Format);
                }
                members.push((member, score));
            }
            Ok(Value::SortedSet(members))
        }
        kind::HASH => {
            let len = non_empty(reader.count()?)?;
            let mut pairs = Vec::with_capacity(len);
            for _ in 0..len {
                let field = reader.string()?;
                pairs.push((field, reader.string()?));
            }
            Ok(Value::Hash(pairs))
        }
        kind::LIST_QUICKLIST | kind::LIST_QUICKLIST_2 => {
            let nodes = non_empty(reader.count()?)?;
            let mut items = Vec::new();
            for _ in 0..nodes {
                let container = if kind == kind::LIST_QUICKLIST_2 {
                    reader.len()?
                } else {
                    CONTAINER_PACKED
                };
                if container != CONTAINER_PACKED && container != CONTAINER_PLAIN {
                    return Err(RdbError::Format);
                }
                let blob = reader.string()?;
                if blob.is_empty() {
                    return Err(RdbError::Format);
                }
                if container == CONTAINER_PLAIN {
                    items.push(blob);
                    continue;
                }
                let elements = if kind == kind::LIST_QUICKLIST_2 {
                    listpack::elements(&blob)?
                } else {
                    ziplist::elements(&blob)?
                };
                items.extend(elements.iter().map(Element::to_vec));
            }
            non_empty(items.len())?;
            Ok(Value::List(items))
        }
        kind::LIST_ZIPLIST => {
            let blob = reader.string()?;
            let items: Vec<Vec<u8>> = ziplist::elements(&blob)?
                .iter()
                .map(Element::to_vec)
                .collect();
            non_empty(items.len())?;
            Ok(Value::List(items))
        }
        kind::SET_INTSET => {
            let blob = reader.string()?;
            let members = intset::elements(&blob)?
                .iter()
                .map(|value| itoa::Buffer::new().format(*value).as_bytes().to_vec())
                .collect();
            Ok(Value::Set(members))
        }
        kind::ZSET_ZIPLIST | kind::ZSET_LISTPACK => {
            let blob = reader.string()?;
            let elements = if kind == kind::ZSET_LISTPACK {
                listpack::elements(&blob)?
            } else {
                ziplist::elements(&blob)?
            };
            let pairs = pairs(&elements)?;
            let mut members = Vec::with_capacity(pairs.len());
            for (member, score) in pairs {
                let score = match score {
                    Element::Int(value) => *value as f64,
                    Element::Str(text) => {
                        let text = &text[..text.len().min(SCORE_TEXT_BYTES_MAX)];
                        let text = &text[..memchr::memchr(0, text).unwrap_or(text.len())];
                        crate::strtod(text).0
                    }
                };
                if score.is_nan() {
                    return Err(RdbError::Format);
                }
                members.push((member.to_vec(), score));
            }
            Ok(Value::SortedSet(members))
        }
        kind::HASH_ZIPLIST | kind::HASH_LISTPACK => {
            let blob = reader.string()?;
            let elements = if kind == kind::HASH_LISTPACK {
                listpack::elements(&blob)?
            } else {
                ziplist::elements(&blob)?
            };
            let pairs = pairs(&elements)?
                .into_iter()
                .map(|(field, value)| (field.to_vec(), value.to_vec()))
                .collect();
            Ok(Value::Hash(pairs))
        }
        kind::STREAM_LISTPACKS | kind::STREAM_LISTPACKS_2 => Ok(Value::Stream(Stream::read(
            reader,
            kind == kind::STREAM_LISTPACKS_2,
        )?)),
        _ => Err(RdbError::Format),
    }
}

/// Redis refuses an empty value ("empty keys").
fn non_empty(len: usize) -> Result<usize, RdbError> {
    if len == 0 {
        Err(RdbError::Format)
    } else {
        Ok(len)
    }
}

/// A compact encoding's elements as pairs: an even, non-zero count.
fn pairs<'a, 'b>(
    elements: &'b [Element<'a>],
) -> Result<Vec<(&'b Element<'a>, &'b Element<'a>)>, RdbError> {
    if elements.is_empty() || elements.len() % 2 != 0 {
        return Err(RdbError::Format);
    }
    Ok(elements
        .chunks_exact(2)
        .map(|pair| (&pair[0], &pair[1]))
        .collect())
}

/// A score as text (`rdbLoadDoubleValue`): a length byte (253 NaN, 254 +inf, 255 -inf),
/// then that many bytes read with `sscanf("%lg")`.
fn text_double(reader: &mut Reader<'_>) -> Result<f64, RdbError> {
    match reader.byte()? {
        253 => Ok(f64::NAN),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        len => {
            let text = reader.take(usize::from(len))?;
            let text = &text[..memchr::memchr(0, text).unwrap_or(text.len())];
            let (value, used, _) = crate::strtod(text);
            if used == 0 {
                return Err(RdbError::Format);
            }
            Ok(value)
        }
    }
}

/// A payload's type byte, before its value.
fn begin(kind: u8) -> Vec<u8> {
    vec![kind]
}

/// The footer appended.
fn finish(mut body: Vec<u8>) -> Vec<u8> {
    seal(&mut body);
    body
}

/// The DUMP payload of a string.
#[must_use]
pub fn dump_string(value: &[u8]) -> Vec<u8> {
    let mut out = begin(kind::STRING);
    write_blob(&mut out, value);
    finish(out)
}

/// The DUMP payload of a list (`RDB_TYPE_LIST_QUICKLIST_2`), its elements in listpack
/// nodes filled as Redis' `quicklistPushTail` fills them at `list-max-listpack-size` -2.
#[must_use]
pub fn dump_list<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut nodes: Vec<listpack::Writer> = Vec::new();
    for item in items {
        let fits = nodes.last().is_some_and(|node| {
            node.bytes_when_finished() + item.len() + LIST_ELEMENT_OVERHEAD_BYTES
                <= LIST_NODE_BYTES_MAX
        });
        if !fits {
            nodes.push(listpack::Writer::new());
        }
        if let Some(node) = nodes.last_mut() {
            node.push(item);
        }
    }
    let mut out = begin(kind::LIST_QUICKLIST_2);
    write_len(&mut out, nodes.len() as u64);
    for node in nodes {
        write_len(&mut out, CONTAINER_PACKED);
        write_blob(&mut out, &node.finish());
    }
    finish(out)
}

/// The DUMP payload of a set in Redis' intset encoding (`values` ascending, distinct).
#[must_use]
pub fn dump_intset(values: &[i64]) -> Vec<u8> {
    let mut out = begin(kind::SET_INTSET);
    write_blob(&mut out, &intset::encode(values));
    finish(out)
}

/// The DUMP payload of a set in Redis' hash table encoding (`RDB_TYPE_SET`).
#[must_use]
pub fn dump_set<'a>(len: usize, members: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = begin(kind::SET);
    write_len(&mut out, len as u64);
    for member in members {
        write_blob(&mut out, member);
    }
    finish(out)
}

/// The DUMP payload of a hash in Redis' listpack encoding, fields in `pairs`' order.
#[must_use]
pub fn dump_hash_listpack<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut writer = listpack::Writer::new();
    for (field, value) in pairs {
        writer.push(field);
        writer.push(value);
    }
    let mut out = begin(kind::HASH_LISTPACK);
    write_blob(&mut out, &writer.finish());
    finish(out)
}

/// The DUMP payload of a hash in Redis' hash table encoding (`RDB_TYPE_HASH`).
#[must_use]
pub fn dump_hash<'a>(len: usize, pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Vec<u8> {
    let mut out = begin(kind::HASH);
    write_len(&mut out, len as u64);
    for (field, value) in pairs {
        write_blob(&mut out, field);
        write_blob(&mut out, value);
    }
    finish(out)
}

/// The DUMP payload of a sorted set in Redis' listpack encoding: members lowest first,
/// each followed by its score as `zzlInsertAt` stores it (an integer when it is one within
/// ±2^62, else its `%.17g` text).
#[must_use]
pub fn dump_zset_listpack<'a>(members: impl IntoIterator<Item = (&'a [u8], f64)>) -> Vec<u8> {
    let mut writer = listpack::Writer::new();
    for (member, score) in members {
        writer.push(member);
        if (-SCORE_INTEGER_MAX..=SCORE_INTEGER_MAX).contains(&score) && score.trunc() == score {
            // In range and integral, so the cast is exact (and -0 becomes 0, as in Redis).
            writer.push_int(score as i64);
        } else {
            writer.push(crate::format_double_g17(score).as_bytes());
        }
    }
    let mut out = begin(kind::ZSET_LISTPACK);
    write_blob(&mut out, &writer.finish());
    finish(out)
}

/// The DUMP payload of a sorted set in Redis' skiplist encoding (`RDB_TYPE_ZSET_2`):
/// `members` highest first, as Redis walks its skiplist backwards.
#[must_use]
pub fn dump_zset<'a>(len: usize, members: impl IntoIterator<Item = (&'a [u8], f64)>) -> Vec<u8> {
    let mut out = begin(kind::ZSET_2);
    write_len(&mut out, len as u64);
    for (member, score) in members {
        write_blob(&mut out, member);
        out.extend_from_slice(&score.to_le_bytes());
    }
    finish(out)
}

/// The DUMP payload of a stream (`RDB_TYPE_STREAM_LISTPACKS_2`).
#[must_use]
pub fn dump_stream(stream: &Stream) -> Vec<u8> {
    let mut out = begin(kind::STREAM_LISTPACKS_2);
    stream.write(&mut out);
    finish(out)
}
