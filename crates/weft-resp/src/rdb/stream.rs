//! Streams in a DUMP payload (`RDB_TYPE_STREAM_LISTPACKS` of Redis 5 to 6.2, and `_2` of
//! Redis 7.0): the radix tree's listpack nodes, each keyed by its master entry's ID, then
//! the stream's counters and its consumer groups with their pending entries and consumers.
//!
//! A node's listpack starts with its master entry — live count, deleted count, the field
//! names, a 0 — and then holds entries as a flags word (deleted, same fields as the
//! master), the ID as differences from the master's, the fields (or only the values when
//! they are the master's), and the entry's element count.

use super::listpack::{self, Element};
use super::{RdbError, Reader, write_blob, write_len};

/// Entry flag: deleted (a tombstone, still in the listpack).
const FLAG_DELETED: i64 = 1;
/// Entry flag: the fields are the master entry's, only values are stored.
const FLAG_SAME_FIELDS: i64 = 2;
/// A group's read counter when it is unknown (Redis' `SCG_INVALID_ENTRIES_READ`, -1).
const ENTRIES_READ_UNKNOWN: u64 = u64::MAX;

/// A stream entry ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// The largest ID.
    pub const MAX: Self = Self {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// Whether it is `0-0`.
    #[must_use]
    pub fn is_zero(self) -> bool {
        self == Self::default()
    }

    /// The 16 big-endian bytes Redis keys its radix trees with.
    #[must_use]
    pub fn to_key(self) -> [u8; 16] {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.ms.to_be_bytes());
        key[8..].copy_from_slice(&self.seq.to_be_bytes());
        key
    }

    fn from_key(key: &[u8]) -> Result<Self, RdbError> {
        let key: &[u8; 16] = key.try_into().map_err(|_| RdbError::Format)?;
        let mut ms = [0u8; 8];
        let mut seq = [0u8; 8];
        ms.copy_from_slice(&key[..8]);
        seq.copy_from_slice(&key[8..]);
        Ok(Self {
            ms: u64::from_be_bytes(ms),
            seq: u64::from_be_bytes(seq),
        })
    }
}

/// A stream as a payload holds it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    /// The listpack nodes, in ID order.
    pub nodes: Vec<Node>,
    /// Live entries (`XLEN`).
    pub length: u64,
    /// The last ID ever generated.
    pub last_id: StreamId,
    /// The first live entry's ID as Redis records it.
    pub first_id: StreamId,
    /// The largest ID ever deleted.
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// Consumer groups, by name.
    pub groups: Vec<Group>,
}

/// One listpack node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Node {
    /// The master entry's ID (the radix tree key).
    pub master: StreamId,
    /// The master entry's field names.
    pub master_fields: Vec<Vec<u8>>,
    /// The entries, live and deleted, in listpack order.
    pub entries: Vec<Entry>,
    /// The listpack's size in bytes (as read; ignored when writing).
    pub listpack_bytes: usize,
}

/// One entry of a node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entry {
    /// Its ID.
    pub id: StreamId,
    /// Whether it is a tombstone.
    pub deleted: bool,
    /// Field, value pairs.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A consumer group.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Group {
    /// Its name.
    pub name: Vec<u8>,
    /// The last ID delivered.
    pub last_id: StreamId,
    /// The read counter, `None` when unknown.
    pub entries_read: Option<u64>,
    /// The pending entries list, in ID order.
    pub pending: Vec<Pending>,
    /// The consumers, by name.
    pub consumers: Vec<Consumer>,
}

/// One pending entry of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pending {
    /// The entry's ID.
    pub id: StreamId,
    /// When it was last delivered, Unix milliseconds.
    pub delivery_time_ms: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
}

/// A consumer of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Consumer {
    /// Its name.
    pub name: Vec<u8>,
    /// When it was last seen, Unix milliseconds.
    pub seen_time_ms: u64,
    /// The IDs of the pending entries it owns, each one of its group's.
    pub pending: Vec<StreamId>,
}

impl Stream {
    /// Reads a stream after its type byte (`version2`: `RDB_TYPE_STREAM_LISTPACKS_2`).
    ///
    /// # Errors
    /// [`RdbError::Format`] for anything malformed: a node key that is not an ID, a
    /// listpack that is not a stream node, a length that does not match the live entries,
    /// a duplicate group, consumer or pending entry, a consumer's pending entry its group
    /// does not have, or a pending entry no consumer owns.
    pub fn read(reader: &mut Reader<'_>, version2: bool) -> Result<Self, RdbError> {
        let node_count = reader.count()?;
        let mut stream = Self::default();
        let mut masters = std::collections::BTreeSet::new();
        for _ in 0..node_count {
            let master = StreamId::from_key(&reader.string()?)?;
            let listpack = reader.string()?;
            if !masters.insert(master) {
                return Err(RdbError::Format);
            }
            stream.nodes.push(read_node(master, &listpack)?);
        }
        stream.length = reader.len()?;
        stream.last_id = read_id(reader)?;
        let live = stream
            .nodes
            .iter()
            .flat_map(|node| &node.entries)
            .filter(|entry| !entry.deleted)
            .count() as u64;
        if stream.length != live {
            return Err(RdbError::Format);
        }
        if version2 {
            stream.first_id = read_id(reader)?;
            stream.max_deleted_id = read_id(reader)?;
            stream.entries_added = reader.len()?;
        } else {
            // As Redis 7.0 upgrades an older stream: no tombstone known, every live entry
            // counted as added, the first live entry found (the largest ID when none).
            stream.entries_added = stream.length;
            stream.first_id = stream
                .nodes
                .iter()
                .flat_map(|node| &node.entries)
                .find(|entry| !entry.deleted)
                .map_or(StreamId::MAX, |entry| entry.id);
        }
        let group_count = reader.count()?;
        for _ in 0..group_count {
            let name = reader.string()?;
            if stream.groups.iter().any(|group| group.name == name) {
                return Err(RdbError::Format);
            }
            let last_id = read_id(reader)?;
            let entries_read = if version2 {
                match reader.len()? {
                    ENTRIES_READ_UNKNOWN => None,
                    read => Some(read),
                }
            } else {
                stream.estimate_entries_read(last_id)
            };
            let mut group = Group {
                name,
                last_id,
                entries_read,
                ..Group::default()
            };
            let pending_count = reader.count()?;
            let mut owned = std::collections::BTreeMap::new();
            for _ in 0..pending_count {
                let id = StreamId::from_key(reader.take(16)?)?;
                let delivery_time_ms = reader.u64_le()?;
                let delivery_count = reader.len()?;
                if owned.insert(id, false).is_some() {
                    return Err(RdbError::Format);
                }
                group.pending.push(Pending {
                    id,
                    delivery_time_ms,
                    delivery_count,
                });
            }
            let consumer_count = reader.count()?;
            for _ in 0..consumer_count {
                let name = reader.string()?;
                if group.consumers.iter().any(|consumer| consumer.name == name) {
                    return Err(RdbError::Format);
                }
                let seen_time_ms = reader.u64_le()?;
                let pending_count = reader.count()?;
                let mut pending = Vec::with_capacity(pending_count.min(reader.remaining() / 16));
                for _ in 0..pending_count {
                    let id = StreamId::from_key(reader.take(16)?)?;
                    match owned.get_mut(&id) {
                        Some(taken @ false) => *taken = true,
                        _ => return Err(RdbError::Format),
                    }
                    pending.push(id);
                }
                group.consumers.push(Consumer {
                    name,
                    seen_time_ms,
                    pending,
                });
            }
            if owned.values().any(|taken| !taken) {
                return Err(RdbError::Format);
            }
            group.pending.sort_by_key(|pending| pending.id);
            group.consumers.sort_by(|a, b| a.name.cmp(&b.name));
            for consumer in &mut group.consumers {
                consumer.pending.sort_unstable();
            }
            stream.groups.push(group);
        }
        stream.groups.sort_by(|a, b| a.name.cmp(&b.name));
        stream.nodes.sort_by_key(|node| node.master);
        Ok(stream)
    }

    /// A group's read counter for `id` when an older payload does not record it (Redis'
    /// `streamEstimateDistanceFromFirstEverEntry`).
    fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return Some(self.entries_added - self.length);
            }
            if id == self.first_id {
                return Some(self.entries_added - self.length + 1);
            }
        }
        None
    }

    /// Appends the stream as redis-server 7.0 saves it (`RDB_TYPE_STREAM_LISTPACKS_2`,
    /// after the type byte). Nodes without entries are left out: Redis never holds one.
    pub fn write(&self, out: &mut Vec<u8>) {
        let nodes: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|node| !node.entries.is_empty())
            .collect();
        write_len(out, nodes.len() as u64);
        for node in nodes {
            write_blob(out, &node.master.to_key());
            write_blob(out, &write_node(node));
        }
        write_len(out, self.length);
        write_id(out, self.last_id);
        write_id(out, self.first_id);
        write_id(out, self.max_deleted_id);
        write_len(out, self.entries_added);
        write_len(out, self.groups.len() as u64);
        for group in &self.groups {
            write_blob(out, &group.name);
            write_id(out, group.last_id);
            write_len(out, group.entries_read.unwrap_or(ENTRIES_READ_UNKNOWN));
            write_len(out, group.pending.len() as u64);
            for pending in &group.pending {
                out.extend_from_slice(&pending.id.to_key());
                out.extend_from_slice(&pending.delivery_time_ms.to_le_bytes());
                write_len(out, pending.delivery_count);
            }
            write_len(out, group.consumers.len() as u64);
            for consumer in &group.consumers {
                write_blob(out, &consumer.name);
                out.extend_from_slice(&consumer.seen_time_ms.to_le_bytes());
                write_len(out, consumer.pending.len() as u64);
                for id in &consumer.pending {
                    out.extend_from_slice(&id.to_key());
                }
            }
        }
    }
}

fn read_id(reader: &mut Reader<'_>) -> Result<StreamId, RdbError> {
    Ok(StreamId {
        ms: reader.len()?,
        seq: reader.len()?,
    })
}

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// Reads one node's listpack, checked as Redis' deep validation of a stream listpack
/// checks it (`streamValidateListpackIntegrity`): the master entry, then exactly the live
/// and deleted entries it announces, each with a consistent element count.
fn read_node(master: StreamId, bytes: &[u8]) -> Result<Node, RdbError> {
    let elements = listpack::elements(bytes)?;
    let mut items = Items {
        elements: &elements,
        at: 0,
    };
    let live = items.count()?;
    let deleted = items.count()?;
    let field_count = items.count()?;
    let mut master_fields = Vec::with_capacity(field_count);
    for _ in 0..field_count {
        master_fields.push(items.next()?.to_vec());
    }
    if items.int()? != 0 {
        return Err(RdbError::Format);
    }
    let mut entries = Vec::with_capacity((live + deleted).min(elements.len()));
    for _ in 0..live + deleted {
        let flags = items.int()?;
        let ms_delta = items.int()?;
        let seq_delta = items.int()?;
        let id = StreamId {
            ms: master.ms.wrapping_add(ms_delta as u64),
            seq: master.seq.wrapping_add(seq_delta as u64),
        };
        let mut fields = Vec::new();
        let expected_count = if flags & FLAG_SAME_FIELDS != 0 {
            for field in &master_fields {
                fields.push((field.clone(), items.next()?.to_vec()));
            }
            field_count as i64 + 3
        } else {
            let count = items.count()?;
            for _ in 0..count {
                let field = items.next()?.to_vec();
                fields.push((field, items.next()?.to_vec()));
            }
            count as i64 * 2 + 4
        };
        if items.int()? != expected_count {
            return Err(RdbError::Format);
        }
        entries.push(Entry {
            id,
            deleted: flags & FLAG_DELETED != 0,
            fields,
        });
    }
    if items.at != elements.len() {
        return Err(RdbError::Format);
    }
    if entries.iter().filter(|entry| entry.deleted).count() != deleted {
        return Err(RdbError::Format);
    }
    Ok(Node {
        master,
        master_fields,
        entries,
        listpack_bytes: bytes.len(),
    })
}

/// A cursor over a node's listpack elements.
struct Items<'a, 'b> {
    elements: &'b [Element<'a>],
    at: usize,
}

impl Items<'_, '_> {
    fn next(&mut self) -> Result<&Element<'_>, RdbError> {
        let element = self.elements.get(self.at).ok_or(RdbError::Format)?;
        self.at += 1;
        Ok(element)
    }

    /// An integer element (or a string that is one's canonical text, as
    /// `lpGetIntegerIfValid` accepts).
    fn int(&mut self) -> Result<i64, RdbError> {
        self.next()?.as_i64().ok_or(RdbError::Format)
    }

    /// A count of later elements: not negative, not above the elements there are.
    fn count(&mut self) -> Result<usize, RdbError> {
        let len = self.elements.len();
        usize::try_from(self.int()?)
            .ok()
            .filter(|count| *count <= len)
            .ok_or(RdbError::Format)
    }
}

impl Node {
    /// Appends `count` tombstones with ID `id` after the entries, for a node whose deleted
    /// entries are known only by their number, its last ID and its listpack's size: their
    /// values are padded so that the listpack comes to `target_bytes` when it can (it stays
    /// smaller when it cannot be made exactly that large, larger when even empty values
    /// exceed it). Redis then decides as it would have about the node — whether it is full,
    /// where an exact MINID trim stops, what its last ID is — while reads skip tombstones.
    pub fn add_tombstones(&mut self, count: usize, id: StreamId, target_bytes: usize) {
        if count == 0 {
            return;
        }
        let values: Vec<(Vec<u8>, Vec<u8>)> = self
            .master_fields
            .iter()
            .map(|field| (field.clone(), Vec::new()))
            .collect();
        let first = self.entries.len();
        for _ in 0..count {
            self.entries.push(Entry {
                id,
                deleted: true,
                fields: values.clone(),
            });
        }
        let mut excess = target_bytes.saturating_sub(write_node(self).len());
        'fill: for entry in &mut self.entries[first..] {
            for (_, value) in &mut entry.fields {
                if excess == 0 {
                    break 'fill;
                }
                let len = padding_len(excess);
                *value = vec![b'x'; len];
                excess -= string_growth(len);
            }
        }
    }
}

/// Bytes a listpack string element of `len` bytes takes beyond an empty one (which takes 2).
fn string_growth(len: usize) -> usize {
    let encoded = match len {
        0..=63 => 1 + len,
        64..=4095 => 2 + len,
        _ => 5 + len,
    };
    let backlen = match encoded {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    };
    encoded + backlen - 2
}

/// The longest string whose growth is at most `excess` bytes.
fn padding_len(excess: usize) -> usize {
    // Growth never falls as the length rises, and is at least the length.
    let (mut low, mut high) = (0usize, excess);
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        if string_growth(middle) <= excess {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    low
}

/// The listpack of a node, as Redis' `streamAppendItem` builds one: the master entry from
/// the node's master fields and entry counts, then each entry, its values only when its
/// fields are the master's.
#[must_use]
pub fn write_node(node: &Node) -> Vec<u8> {
    let deleted = node.entries.iter().filter(|entry| entry.deleted).count();
    let live = node.entries.len() - deleted;
    let mut writer = listpack::Writer::new();
    writer.push_int(i64::try_from(live).unwrap_or(i64::MAX));
    writer.push_int(i64::try_from(deleted).unwrap_or(i64::MAX));
    writer.push_int(i64::try_from(node.master_fields.len()).unwrap_or(i64::MAX));
    for field in &node.master_fields {
        writer.push(field);
    }
    writer.push_int(0);
    for entry in &node.entries {
        let same_fields = !entry.fields.is_empty()
            && entry.fields.len() == node.master_fields.len()
            && entry
                .fields
                .iter()
                .zip(&node.master_fields)
                .all(|((field, _), master)| field == master);
        let mut flags = if same_fields { FLAG_SAME_FIELDS } else { 0 };
        if entry.deleted {
            flags |= FLAG_DELETED;
        }
        writer.push_int(flags);
        writer.push_int(entry.id.ms.wrapping_sub(node.master.ms) as i64);
        writer.push_int(entry.id.seq.wrapping_sub(node.master.seq) as i64);
        let count = i64::try_from(entry.fields.len()).unwrap_or(i64::MAX);
        if same_fields {
            for (_, value) in &entry.fields {
                writer.push(value);
            }
            writer.push_int(count + 3);
        } else {
            writer.push_int(count);
            for (field, value) in &entry.fields {
                writer.push(field);
                writer.push(value);
            }
            writer.push_int(count * 2 + 4);
        }
    }
    writer.finish()
}
