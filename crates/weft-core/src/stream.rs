//! Redis streams: an append-only log of entries ordered by ID, with consumer groups.
//!
//! **Layout, and why.** Entries live in a `BTreeMap` from [`StreamId`] to one packed
//! allocation holding the entry's fields and values (length-prefixed). A B-tree keeps up to
//! eleven entries per node in contiguous arrays, so an entry costs its bytes plus about 32
//! bytes of key and pointer — no per-entry node as a skiplist or a `Vec<Bytes>` of fields
//! would cost — and a range read seeks in O(log n) and then walks in order. Appends (the hot
//! path, always at the end) touch one leaf. Redis' radix tree of listpacks is more compact
//! still (IDs and repeated field names delta-encoded), but decoding a listpack on every read
//! buys nothing in speed, and the memory difference is in field names only.
//!
//! **Redis' macro nodes, as bookkeeping.** Redis groups entries in listpack nodes of at most
//! `stream-node-max-entries` entries and `stream-node-max-bytes` bytes, and an approximate
//! trim (`MAXLEN ~`, `MINID ~`) removes only whole nodes; a deleted entry stays in its node
//! as a tombstone until the whole node goes. Clients see the consequence (how many entries an
//! approximate trim leaves, `XINFO STREAM`'s `radix-tree-keys`), so each `Node` records
//! what Redis' would hold — live and deleted counts, the listpack's size in bytes as Redis
//! computes it, the master entry's field names — without holding the entries themselves.
//! An approximate trim then removes exactly what Redis' removes.
//!
//! **Consumer groups.** Each group keeps its last delivered ID, its read counter, the
//! pending entries list (PEL: ID → consumer, delivery time, delivery count) and its consumers
//! (name → seen time and the IDs it owns), all in B-trees ordered as Redis' radix trees are
//! (byte order of names, numeric order of IDs), which is the order replies list them in.
//!
//! Times are passed in (Unix milliseconds), so the structure does no I/O and reads no clock.
//! Every change keeps [`StreamValue::heap_bytes`] current in O(1).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use bytes::Bytes;

use crate::structure::{DecodeError, Reader, limits, put_bytes, put_varint};

/// Redis' `STREAM_LISTPACK_MAX_SIZE`: the most bytes one entry's fields and values (and one
/// node) may take.
pub const ENTRY_BYTES_MAX: usize = 1 << 30;

/// Estimated heap bytes of one entry beyond its packed fields (B-tree slot, allocation).
const ENTRY_OVERHEAD_BYTES: usize = 40;
/// Estimated heap bytes of one node's bookkeeping beyond its master field names.
const NODE_OVERHEAD_BYTES: usize = 96;
/// Estimated heap bytes of a consumer group beyond its name.
const GROUP_OVERHEAD_BYTES: usize = 128;
/// Estimated heap bytes of a consumer beyond its name.
const CONSUMER_OVERHEAD_BYTES: usize = 96;
/// Estimated heap bytes of one pending entry (in the group's PEL and its consumer's).
const PENDING_OVERHEAD_BYTES: usize = 96;

/// Redis' `XREAD`/`XREADGROUP` default of entries served to a client woken from a block.
pub const BLOCKED_READ_COUNT_DEFAULT: usize = 1000;

/// A stream entry ID: milliseconds, then a sequence number within them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StreamId {
    /// Milliseconds part.
    pub ms: u64,
    /// Sequence part.
    pub seq: u64,
}

impl StreamId {
    /// `0-0`, below every entry (Redis' `-`).
    pub const MIN: Self = Self { ms: 0, seq: 0 };
    /// The largest ID (Redis' `+`).
    pub const MAX: Self = Self {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// An ID from its two parts.
    #[must_use]
    pub const fn new(ms: u64, seq: u64) -> Self {
        Self { ms, seq }
    }

    /// The next ID (Redis' `streamIncrID`); `None` past [`StreamId::MAX`].
    #[must_use]
    pub fn next(self) -> Option<Self> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                return None;
            }
            return Some(Self::new(self.ms + 1, 0));
        }
        Some(Self::new(self.ms, self.seq + 1))
    }

    /// The previous ID (Redis' `streamDecrID`); `None` below [`StreamId::MIN`].
    #[must_use]
    pub fn previous(self) -> Option<Self> {
        if self.seq == 0 {
            if self.ms == 0 {
                return None;
            }
            return Some(Self::new(self.ms - 1, u64::MAX));
        }
        Some(Self::new(self.ms, self.seq - 1))
    }

    /// Whether it is `0-0`.
    #[must_use]
    pub fn is_zero(self) -> bool {
        self == Self::MIN
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// How XADD asks for the new entry's ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdRequest {
    /// `*`: from the clock (`now_ms`), or after the last ID if the clock is behind.
    Auto {
        /// The wall clock, Unix milliseconds.
        now_ms: u64,
    },
    /// `ms-*`: these milliseconds, the next free sequence in them.
    Partial {
        /// The milliseconds asked for.
        ms: u64,
    },
    /// An explicit ID.
    Exact(StreamId),
}

/// Why XADD could not append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddError {
    /// The ID is not above the stream's last ID (or no sequence is left in its ms).
    #[error("the ID is equal or smaller than the stream's top item")]
    NotGreater,
    /// The stream's last ID is [`StreamId::MAX`].
    #[error("the stream has exhausted the last possible ID")]
    Exhausted,
    /// The fields and values take more than [`ENTRY_BYTES_MAX`].
    #[error("elements are too large to be stored")]
    TooLarge,
}

/// How a trim bounds the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    /// `MAXLEN n`: at most n entries.
    MaxLen(u64),
    /// `MINID id`: no entry below id.
    MinId(StreamId),
}

/// A trim request (XADD's and XTRIM's options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trim {
    /// The bound.
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only.
    pub approximate: bool,
    /// At most this many entries removed (0: no limit).
    pub limit: u64,
}

/// Redis' bookkeeping of one listpack node (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    /// Entries not deleted.
    live: u64,
    /// Entries marked deleted, still in the listpack.
    deleted: u64,
    /// The listpack's size as Redis computes it (`lpBytes`).
    listpack_bytes: usize,
    /// The master entry's field names, packed.
    master_fields: Box<[u8]>,
    /// The ID of the last entry appended to it (deleted or not).
    last_id: StreamId,
}

/// A whole stream as plain parts, to and from another server's format (DUMP, RESTORE):
/// see [`StreamValue::image`] and [`StreamValue::from_image`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamImage {
    /// The last ID ever generated.
    pub last_id: StreamId,
    /// The first entry's ID as Redis records it.
    pub first_id: StreamId,
    /// The largest ID ever deleted.
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
    /// The listpack nodes Redis would hold, in ID order.
    pub nodes: Vec<NodeImage>,
    /// The consumer groups, by name.
    pub groups: Vec<GroupImage>,
}

/// One of Redis' listpack nodes of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeImage {
    /// Its master entry's ID.
    pub master: StreamId,
    /// Entries deleted but still in its listpack.
    pub deleted: u64,
    /// Its listpack's size as Redis counts it.
    pub listpack_bytes: usize,
    /// The master entry's field names.
    pub master_fields: Vec<Bytes>,
    /// The ID of the last entry appended to it, deleted or not.
    pub last_id: StreamId,
    /// Its live entries (field, value, …), in order.
    pub entries: Vec<(StreamId, Vec<Bytes>)>,
}

/// A consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupImage {
    /// Its name.
    pub name: Bytes,
    /// The last ID delivered.
    pub last_id: StreamId,
    /// The read counter, `None` when unknown.
    pub entries_read: Option<u64>,
    /// Its consumers and their seen times (Unix milliseconds).
    pub consumers: Vec<(Bytes, u64)>,
    /// Its pending entries, each naming its consumer.
    pub pending: Vec<(StreamId, PendingEntry)>,
}

/// One entry in a group's pending entries list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEntry {
    /// When it was last delivered, Unix milliseconds.
    pub delivery_time_ms: u64,
    /// How many times it was delivered.
    pub delivery_count: u64,
    /// The consumer it was delivered to.
    pub consumer: Bytes,
}

/// A consumer of a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consumer {
    /// When it last read or claimed, Unix milliseconds.
    pub seen_time_ms: u64,
    /// The pending entries it owns.
    pel: BTreeSet<StreamId>,
}

impl Consumer {
    /// The IDs of the pending entries it owns, in order.
    #[must_use]
    pub fn pending(&self) -> &BTreeSet<StreamId> {
        &self.pel
    }
}

/// A consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerGroup {
    /// The last ID delivered to a consumer (`>` reads after it).
    pub last_id: StreamId,
    /// The group's read counter (entries read since the first one ever added), `None` when
    /// unknown.
    pub entries_read: Option<u64>,
    pel: BTreeMap<StreamId, PendingEntry>,
    consumers: BTreeMap<Bytes, Consumer>,
    /// Bytes of the consumers' names (for the O(1) byte count).
    consumer_name_bytes: usize,
}

impl ConsumerGroup {
    /// The pending entries list, by ID.
    #[must_use]
    pub fn pending(&self) -> &BTreeMap<StreamId, PendingEntry> {
        &self.pel
    }

    /// The consumers, by name.
    #[must_use]
    pub fn consumers(&self) -> &BTreeMap<Bytes, Consumer> {
        &self.consumers
    }

    /// Estimated heap bytes beyond the group's name.
    fn heap_bytes(&self) -> usize {
        GROUP_OVERHEAD_BYTES
            + self.pel.len() * PENDING_OVERHEAD_BYTES
            + self.consumers.len() * CONSUMER_OVERHEAD_BYTES
            + self.consumer_name_bytes
    }

    /// The consumer named `name`, created if missing (its seen time `now_ms` then); an
    /// existing one's seen time is refreshed to `now_ms` (Redis' `SLC_DEFAULT` lookup).
    fn touch_consumer(&mut self, name: &[u8], now_ms: u64) -> &mut Consumer {
        if !self.consumers.contains_key(name) {
            self.consumer_name_bytes += name.len();
            self.consumers
                .insert(Bytes::copy_from_slice(name), Consumer::default());
        }
        let consumer = self
            .consumers
            .get_mut(name)
            .unwrap_or_else(|| unreachable!("inserted above"));
        consumer.seen_time_ms = now_ms;
        consumer
    }

    /// Gives the pending entry `id` (existing) to consumer `name`, moving it out of its
    /// previous owner's list.
    fn reassign(&mut self, id: StreamId, name: &Bytes) {
        let Some(entry) = self.pel.get_mut(&id) else {
            return;
        };
        if entry.consumer == *name {
            return;
        }
        if let Some(previous) = self.consumers.get_mut(&entry.consumer) {
            previous.pel.remove(&id);
        }
        entry.consumer = name.clone();
        if let Some(consumer) = self.consumers.get_mut(name) {
            consumer.pel.insert(id);
        }
    }

    /// Removes the pending entry `id` from the group and its owner; whether it was pending.
    fn remove_pending(&mut self, id: StreamId) -> bool {
        let Some(entry) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(owner) = self.consumers.get_mut(&entry.consumer) {
            owner.pel.remove(&id);
        }
        true
    }

    /// The key the consumer named `name` is stored under (shared with pending entries).
    fn consumer_key(&self, name: &[u8]) -> Option<Bytes> {
        self.consumers
            .get_key_value(name)
            .map(|(key, _)| key.clone())
    }
}

/// What [`StreamValue::claim`] does besides moving entries (XCLAIM's options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimOptions {
    /// Entries idle less than this are left alone (0: any).
    pub min_idle_ms: u64,
    /// The delivery time to set, Unix milliseconds.
    pub delivery_time_ms: u64,
    /// The delivery count to set instead of incrementing it.
    pub retry_count: Option<u64>,
    /// Create pending entries for IDs that exist in the stream but are not pending.
    pub force: bool,
    /// Leave delivery counts alone (unless `retry_count`).
    pub just_id: bool,
    /// Raise the group's last delivered ID to this if it is above.
    pub last_id: StreamId,
}

/// What [`StreamValue::auto_claim`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoClaim {
    /// Where the next call should start (`0-0`: the list was scanned to its end).
    pub next: StreamId,
    /// The entries claimed, in order.
    pub claimed: Vec<StreamId>,
    /// Pending entries dropped because their entry is gone from the stream.
    pub deleted: Vec<StreamId>,
}

/// A stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamValue {
    entries: BTreeMap<StreamId, Box<[u8]>>,
    /// Listpack nodes by their master ID.
    nodes: BTreeMap<StreamId, Node>,
    last_id: StreamId,
    /// The first live entry's ID as Redis records it (`0-0` when empty).
    first_id: StreamId,
    max_deleted_id: StreamId,
    entries_added: u64,
    groups: BTreeMap<Bytes, ConsumerGroup>,
    /// Estimated heap bytes of everything above.
    bytes: usize,
}

/// Packs a flat list of byte strings (field, value, field, value … or field names).
fn pack<T: AsRef<[u8]>>(items: &[T]) -> Box<[u8]> {
    let total: usize = items.iter().map(|item| item.as_ref().len() + 5).sum();
    let mut out = Vec::with_capacity(total + 5);
    put_varint(&mut out, items.len() as u64);
    for item in items {
        put_bytes(&mut out, item.as_ref());
    }
    out.into_boxed_slice()
}

/// The byte strings `pack` packed, in order (stops early on malformed bytes, which
/// `StreamValue::decode_body` refuses before they get here).
#[derive(Debug, Clone)]
pub struct Packed<'a> {
    reader: Reader<'a>,
    left: u64,
}

impl<'a> Packed<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let mut reader = Reader::new(bytes);
        let left = reader.varint().unwrap_or(0);
        Self { reader, left }
    }
}

impl<'a> Iterator for Packed<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.reader.slice().ok()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(left))
    }
}

/// How many byte strings a packed entry holds (fields and values: twice the pairs).
fn packed_len(bytes: &[u8]) -> u64 {
    Reader::new(bytes).varint().unwrap_or(0)
}

/// An entry's fields and values, as stored.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a>(&'a [u8]);

impl<'a> Entry<'a> {
    /// Number of fields and values (twice the pairs).
    #[must_use]
    pub fn len(&self) -> usize {
        usize::try_from(packed_len(self.0)).unwrap_or(0)
    }

    /// Whether it has no field (never, for an entry XADD wrote).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Field, value, field, value …
    #[must_use]
    pub fn items(&self) -> Packed<'a> {
        Packed::new(self.0)
    }
}

// Listpack sizes, as Redis' listpack.c encodes elements: what `stream-node-max-bytes`
// compares against.

/// Listpack header (total bytes, element count) and end marker.
const LISTPACK_EMPTY_BYTES: usize = 7;

/// Bytes of an element's back-length field for an element of `len` bytes.
fn backlen_bytes(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16_382 => 2,
        16_383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes of an integer element.
fn int_element_bytes(value: i64) -> usize {
    let encoded = match value {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32_768..=32_767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    };
    encoded + backlen_bytes(encoded)
}

/// Bytes of a string element (stored as an integer when it is one's canonical text).
fn string_element_bytes(text: &[u8]) -> usize {
    if text.len() < 21
        && let Some(value) = crate::structure::intset_value(text)
    {
        return int_element_bytes(value);
    }
    let encoded = match text.len() {
        0..=63 => 1 + text.len(),
        64..=4095 => 2 + text.len(),
        _ => 5 + text.len(),
    };
    encoded + backlen_bytes(encoded)
}

/// Bytes of a count element holding `count`.
fn count_bytes(count: u64) -> usize {
    int_element_bytes(i64::try_from(count).unwrap_or(i64::MAX))
}

/// The difference Redis stores for an entry ID part against its master (a u64 subtraction
/// read back as a signed integer).
fn delta(value: u64, base: u64) -> i64 {
    i64::from_ne_bytes(value.wrapping_sub(base).to_ne_bytes())
}

/// Bytes of the listpack elements of one entry added to a node whose master has
/// `master_fields`.
fn appended_entry_bytes(
    id: StreamId,
    master: StreamId,
    master_fields: &[u8],
    items: &[Bytes],
) -> usize {
    let pairs = items.len() / 2;
    let same_fields = packed_len(master_fields) as usize == pairs
        && Packed::new(master_fields)
            .zip(items.iter().step_by(2))
            .all(|(master, field)| master == &field[..]);
    let mut bytes = int_element_bytes(0) // flags
        + int_element_bytes(delta(id.ms, master.ms))
        + int_element_bytes(delta(id.seq, master.seq));
    let mut lp_count = pairs as u64 + 3;
    if same_fields {
        bytes += items
            .iter()
            .skip(1)
            .step_by(2)
            .map(|value| string_element_bytes(value))
            .sum::<usize>();
    } else {
        bytes += count_bytes(pairs as u64);
        bytes += items
            .iter()
            .map(|item| string_element_bytes(item))
            .sum::<usize>();
        lp_count += pairs as u64 + 1;
    }
    bytes + count_bytes(lp_count)
}

impl StreamValue {
    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True without entries (a stream key stays even then).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Estimated heap bytes.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.bytes
    }

    /// The last ID ever generated (or set by XSETID).
    #[must_use]
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The first entry's ID as Redis records it (`recorded-first-entry-id`).
    #[must_use]
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    /// The largest ID ever deleted (`max-deleted-entry-id`).
    #[must_use]
    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted_id
    }

    /// Entries ever added (`entries-added`).
    #[must_use]
    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Listpack nodes Redis would hold (`radix-tree-keys`).
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The ID of the last live entry, or `0-0` (Redis' `streamLastValidID`).
    #[must_use]
    pub fn last_entry_id(&self) -> StreamId {
        self.entries
            .last_key_value()
            .map_or(StreamId::MIN, |(id, _)| *id)
    }

    /// The entry `id`, if present.
    #[must_use]
    pub fn get(&self, id: StreamId) -> Option<Entry<'_>> {
        self.entries.get(&id).map(|packed| Entry(packed))
    }

    /// Entries with IDs in `start..=end`, in order.
    pub fn range(
        &self,
        start: StreamId,
        end: StreamId,
    ) -> impl DoubleEndedIterator<Item = (StreamId, Entry<'_>)> {
        let range = if start > end {
            self.entries.range(StreamId::MAX..StreamId::MAX)
        } else {
            self.entries.range(start..=end)
        };
        range.map(|(id, packed)| (*id, Entry(packed)))
    }

    /// Appends an entry with `items` (field, value, …; an even, non-zero count), returning
    /// its ID.
    ///
    /// # Errors
    /// [`AddError`] when the ID is not above the last one, none is left, or the entry is
    /// too large; the stream is unchanged then.
    pub fn add(&mut self, request: IdRequest, items: &[Bytes]) -> Result<StreamId, AddError> {
        if self.last_id == StreamId::MAX {
            return Err(AddError::Exhausted);
        }
        let id = match request {
            IdRequest::Auto { now_ms } => {
                if now_ms > self.last_id.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    self.last_id.next().ok_or(AddError::Exhausted)?
                }
            }
            IdRequest::Partial { ms } => {
                if ms == self.last_id.ms {
                    if self.last_id.seq == u64::MAX {
                        return Err(AddError::NotGreater);
                    }
                    StreamId::new(ms, self.last_id.seq + 1)
                } else {
                    StreamId::new(ms, 0)
                }
            }
            IdRequest::Exact(id) => id,
        };
        if id <= self.last_id {
            return Err(AddError::NotGreater);
        }
        let item_bytes: usize = items.iter().map(Bytes::len).sum();
        if item_bytes > ENTRY_BYTES_MAX {
            return Err(AddError::TooLarge);
        }
        self.append_to_node(id, items, item_bytes);
        let packed = pack(items);
        self.bytes += packed.len() + ENTRY_OVERHEAD_BYTES;
        self.entries.insert(id, packed);
        self.entries_added += 1;
        self.last_id = id;
        if self.entries.len() == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Records the entry `id` in the tail node, or in a new one when the tail is full (as
    /// Redis' `streamAppendItem` decides).
    fn append_to_node(&mut self, id: StreamId, items: &[Bytes], item_bytes: usize) {
        let node_bytes_max = match limits::stream_node_bytes() {
            0 => ENTRY_BYTES_MAX,
            bytes => bytes.min(ENTRY_BYTES_MAX),
        };
        let node_entries_max = limits::stream_node_entries() as u64;
        if let Some(mut tail) = self.nodes.last_entry() {
            let master = *tail.key();
            let node = tail.get_mut();
            // Saturating: counts decoded from a store are checked for consistency, not size.
            let full = node.listpack_bytes.saturating_add(item_bytes) >= node_bytes_max
                || (node_entries_max != 0
                    && node.live.saturating_add(node.deleted) >= node_entries_max);
            if !full {
                node.listpack_bytes = node.listpack_bytes + count_bytes(node.live + 1)
                    - count_bytes(node.live)
                    + appended_entry_bytes(id, master, &node.master_fields, items);
                node.live += 1;
                node.last_id = id;
                return;
            }
        }
        let fields: Vec<&Bytes> = items.iter().step_by(2).collect();
        let master_fields = pack(&fields);
        let listpack_bytes = LISTPACK_EMPTY_BYTES
            + count_bytes(1)
            + count_bytes(0)
            + count_bytes(fields.len() as u64)
            + fields
                .iter()
                .map(|field| string_element_bytes(field))
                .sum::<usize>()
            + count_bytes(0)
            + appended_entry_bytes(id, id, &master_fields, items);
        self.bytes += master_fields.len() + NODE_OVERHEAD_BYTES;
        self.nodes.insert(
            id,
            Node {
                live: 1,
                deleted: 0,
                listpack_bytes,
                master_fields,
                last_id: id,
            },
        );
    }

    /// The master ID of the node holding `id`.
    fn node_of(&self, id: StreamId) -> Option<StreamId> {
        self.nodes
            .range(..=id)
            .next_back()
            .map(|(master, _)| *master)
    }

    /// Removes the entry `id` from the entries map, charging its bytes back.
    fn remove_entry(&mut self, id: StreamId) -> bool {
        match self.entries.remove(&id) {
            Some(packed) => {
                self.bytes -= packed.len() + ENTRY_OVERHEAD_BYTES;
                true
            }
            None => false,
        }
    }

    /// Removes a whole node (its live entries were removed already).
    fn remove_node(&mut self, master: StreamId) {
        if let Some(node) = self.nodes.remove(&master) {
            self.bytes -= node.master_fields.len() + NODE_OVERHEAD_BYTES;
        }
    }

    /// Marks one live entry of the node `master` deleted (Redis keeps it as a tombstone).
    fn mark_deleted(&mut self, master: StreamId) {
        if let Some(node) = self.nodes.get_mut(&master) {
            node.listpack_bytes = (node.listpack_bytes
                + count_bytes(node.live - 1)
                + count_bytes(node.deleted.saturating_add(1)))
            .saturating_sub(count_bytes(node.live) + count_bytes(node.deleted));
            node.live -= 1;
            node.deleted = node.deleted.saturating_add(1);
        }
    }

    /// Sets the recorded first ID after removals: the first live entry's, or `0-0`.
    fn refresh_first_id(&mut self) {
        self.first_id = self
            .entries
            .first_key_value()
            .map_or(StreamId::MIN, |(id, _)| *id);
    }

    /// Deletes the entry `id` (XDEL); whether it was there.
    pub fn delete(&mut self, id: StreamId) -> bool {
        if !self.remove_entry(id) {
            return false;
        }
        if let Some(master) = self.node_of(id) {
            if self.nodes.get(&master).is_some_and(|node| node.live == 1) {
                self.remove_node(master);
            } else {
                self.mark_deleted(master);
            }
        }
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if self.entries.is_empty() {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.refresh_first_id();
        }
        true
    }

    /// Trims the stream (XTRIM, XADD's MAXLEN/MINID) as Redis' `streamTrim` does: whole
    /// nodes from the head while they may all go, then (unless approximate) entries of the
    /// next node. Returns how many entries were removed.
    pub fn trim(&mut self, trim: Trim) -> u64 {
        let mut removed = 0u64;
        while let Some((&master, node)) = self.nodes.first_key_value() {
            if let TrimStrategy::MaxLen(max) = trim.strategy
                && self.entries.len() as u64 <= max
            {
                break;
            }
            let live = node.live;
            if trim.limit != 0 && removed + live > trim.limit {
                break;
            }
            let whole = match trim.strategy {
                TrimStrategy::MaxLen(max) => self.entries.len() as u64 - live >= max,
                TrimStrategy::MinId(min) => node.last_id < min,
            };
            if whole {
                for _ in 0..live {
                    if let Some((id, _)) = self.entries.first_key_value() {
                        let id = *id;
                        self.remove_entry(id);
                    }
                }
                self.remove_node(master);
                removed += live;
                continue;
            }
            if trim.approximate {
                break;
            }
            // Entries of this node, one by one, until the bound holds.
            let node_end = node.last_id;
            let ids: Vec<StreamId> = self
                .entries
                .range(master..=node_end)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                let stop = match trim.strategy {
                    TrimStrategy::MaxLen(max) => self.entries.len() as u64 <= max,
                    TrimStrategy::MinId(min) => id >= min,
                };
                if stop {
                    break;
                }
                self.remove_entry(id);
                self.mark_deleted(master);
                removed += 1;
            }
            break;
        }
        if self.entries.is_empty() {
            self.first_id = StreamId::MIN;
        } else if removed > 0 {
            self.refresh_first_id();
        }
        removed
    }

    /// XSETID: sets the last ID, and optionally the entries-added counter and the largest
    /// deleted ID (`0-0` leaves it). The caller checked them against the stream.
    pub fn set_id(
        &mut self,
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted_id: StreamId,
    ) {
        self.last_id = last_id;
        if let Some(added) = entries_added {
            self.entries_added = added;
        }
        if !max_deleted_id.is_zero() {
            self.max_deleted_id = max_deleted_id;
        }
    }

    // Consumer groups.

    /// The consumer groups, by name.
    #[must_use]
    pub fn groups(&self) -> &BTreeMap<Bytes, ConsumerGroup> {
        &self.groups
    }

    /// The group named `name`.
    #[must_use]
    pub fn group(&self, name: &[u8]) -> Option<&ConsumerGroup> {
        self.groups.get(name)
    }

    /// Runs `f` on the group named `name`, keeping the byte count current; `None` without
    /// such a group.
    fn with_group<R>(
        &mut self,
        name: &[u8],
        f: impl FnOnce(&mut ConsumerGroup, &BTreeMap<StreamId, Box<[u8]>>) -> R,
    ) -> Option<R> {
        let group = self.groups.get_mut(name)?;
        let before = group.heap_bytes();
        let result = f(group, &self.entries);
        let after = group.heap_bytes();
        self.bytes = self.bytes + after - before;
        Some(result)
    }

    /// XGROUP CREATE; false if the group exists.
    pub fn create_group(
        &mut self,
        name: &[u8],
        last_id: StreamId,
        entries_read: Option<u64>,
    ) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        let group = ConsumerGroup {
            last_id,
            entries_read,
            ..ConsumerGroup::default()
        };
        self.bytes += name.len() + group.heap_bytes();
        self.groups.insert(Bytes::copy_from_slice(name), group);
        true
    }

    /// XGROUP DESTROY; whether the group existed.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        match self.groups.remove(name) {
            Some(group) => {
                self.bytes -= name.len() + group.heap_bytes();
                true
            }
            None => false,
        }
    }

    /// XGROUP SETID; false without the group.
    pub fn set_group_id(
        &mut self,
        name: &[u8],
        last_id: StreamId,
        entries_read: Option<u64>,
    ) -> bool {
        self.with_group(name, |group, _| {
            group.last_id = last_id;
            group.entries_read = entries_read;
        })
        .is_some()
    }

    /// XGROUP CREATECONSUMER: `Some(true)` if created, `Some(false)` if it existed, `None`
    /// without the group.
    pub fn create_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: u64) -> Option<bool> {
        self.with_group(group, |group, _| {
            if group.consumers.contains_key(consumer) {
                return false;
            }
            group.touch_consumer(consumer, now_ms);
            true
        })
    }

    /// XGROUP DELCONSUMER: the number of entries the consumer had pending (dropped from the
    /// group's list too), `None` without the group.
    pub fn delete_consumer(&mut self, group: &[u8], consumer: &[u8]) -> Option<u64> {
        self.with_group(group, |group, _| {
            let Some(removed) = group.consumers.remove(consumer) else {
                return 0;
            };
            group.consumer_name_bytes -= consumer.len();
            for id in &removed.pel {
                group.pel.remove(id);
            }
            removed.pel.len() as u64
        })
    }

    /// XACK: how many of `ids` were pending (and are no longer); `None` without the group.
    pub fn ack(&mut self, group: &[u8], ids: &[StreamId]) -> Option<u64> {
        self.with_group(group, |group, _| {
            ids.iter().filter(|id| group.remove_pending(**id)).count() as u64
        })
    }

    /// Whether `start..=end` may hold a deleted entry (Redis' `streamRangeHasTombstones`).
    fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id && self.max_deleted_id <= end
    }

    /// The read counter of `id`: how many entries were added up to it, when that can be
    /// known (Redis' `streamEstimateDistanceFromFirstEverEntry`).
    #[must_use]
    pub fn estimate_entries_read(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            let length = self.entries.len() as u64;
            if id < self.first_id {
                return Some(self.entries_added.saturating_sub(length));
            }
            if id == self.first_id {
                return Some(self.entries_added.saturating_sub(length) + 1);
            }
        }
        None
    }

    /// A group's lag: entries added and not yet delivered to it, when it can be known
    /// (negative when ENTRIESREAD claimed more reads than there were additions, as Redis
    /// reports it).
    #[must_use]
    pub fn lag(&self, group: &ConsumerGroup) -> Option<i64> {
        let added = i64::try_from(self.entries_added).unwrap_or(i64::MAX);
        let lag = |read: u64| added.wrapping_sub(i64::try_from(read).unwrap_or(i64::MAX));
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read
            && !self.range_has_tombstones(group.last_id, StreamId::MAX)
        {
            return Some(lag(read));
        }
        self.estimate_entries_read(group.last_id).map(lag)
    }

    /// XREADGROUP with `>`: delivers up to `count` (0: all) entries after the group's last
    /// delivered ID to `consumer` (created if missing), advancing the group and, unless
    /// `no_ack`, adding them to the pending lists. Returns the IDs delivered, or `None`
    /// without the group.
    pub fn read_group_new(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        count: usize,
        no_ack: bool,
        now_ms: u64,
    ) -> Option<Vec<StreamId>> {
        let group_name = group;
        let group = self.groups.get(group_name)?;
        let start = group.last_id.next()?;
        let limit = if count == 0 { usize::MAX } else { count };
        let ids: Vec<StreamId> = self
            .entries
            .range(start..)
            .take(limit)
            .map(|(id, _)| *id)
            .collect();
        // Whether each delivered ID keeps the read counter valid (no tombstone after it),
        // and its estimated counter otherwise — both read before the group changes.
        let counters: Vec<(bool, Option<u64>)> = ids
            .iter()
            .map(|id| {
                let clean = !self.range_has_tombstones(*id, StreamId::MAX);
                (clean, self.estimate_entries_read(*id))
            })
            .collect();
        let entries_added = self.entries_added;
        self.with_group(group_name, |group, _| {
            let name = match group.consumer_key(consumer) {
                Some(name) => name,
                None => Bytes::copy_from_slice(consumer),
            };
            group.touch_consumer(&name, now_ms);
            for (id, (clean, estimate)) in ids.iter().zip(counters) {
                if *id > group.last_id {
                    match group.entries_read {
                        Some(read) if clean => group.entries_read = Some(read + 1),
                        _ if entries_added != 0 => group.entries_read = estimate,
                        _ => {}
                    }
                    group.last_id = *id;
                }
                if no_ack {
                    continue;
                }
                if group.pel.contains_key(id) {
                    group.reassign(*id, &name);
                    if let Some(entry) = group.pel.get_mut(id) {
                        entry.delivery_time_ms = now_ms;
                        entry.delivery_count = 1;
                    }
                } else {
                    group.pel.insert(
                        *id,
                        PendingEntry {
                            delivery_time_ms: now_ms,
                            delivery_count: 1,
                            consumer: name.clone(),
                        },
                    );
                    if let Some(owner) = group.consumers.get_mut(&name) {
                        owner.pel.insert(*id);
                    }
                }
            }
        })?;
        Some(ids)
    }

    /// XREADGROUP with an ID: the consumer's own pending entries from `start`, up to
    /// `count` (0: all); each present entry counts as delivered again. Returns the IDs with
    /// whether the entry still exists, or `None` without the group.
    pub fn read_group_history(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        start: StreamId,
        count: usize,
        now_ms: u64,
    ) -> Option<Vec<(StreamId, bool)>> {
        let limit = if count == 0 { usize::MAX } else { count };
        self.with_group(group, |group, entries| {
            let name = match group.consumer_key(consumer) {
                Some(name) => name,
                None => Bytes::copy_from_slice(consumer),
            };
            let owned: Vec<StreamId> = group
                .touch_consumer(&name, now_ms)
                .pel
                .range(start..)
                .take(limit)
                .copied()
                .collect();
            owned
                .into_iter()
                .map(|id| {
                    let exists = entries.contains_key(&id);
                    if exists && let Some(entry) = group.pel.get_mut(&id) {
                        entry.delivery_time_ms = now_ms;
                        entry.delivery_count += 1;
                    }
                    (id, exists)
                })
                .collect()
        })
    }

    /// XCLAIM: gives the pending entries `ids` idle long enough to `consumer` (created when
    /// one is claimed). Returns the IDs claimed, or `None` without the group. Pending
    /// entries whose entry is gone are dropped.
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        options: ClaimOptions,
        now_ms: u64,
    ) -> Option<Vec<StreamId>> {
        self.with_group(group, |group, entries| {
            if options.last_id > group.last_id {
                group.last_id = options.last_id;
            }
            let mut name: Option<Bytes> = None;
            let mut claimed = Vec::new();
            for &id in ids {
                if !entries.contains_key(&id) {
                    group.remove_pending(id);
                    continue;
                }
                let pending = group.pel.get(&id).map(|entry| entry.delivery_time_ms);
                if pending.is_none() && !options.force {
                    continue;
                }
                // An existing entry must have been idle long enough; one FORCE creates is
                // not checked.
                if let Some(delivery_time_ms) = pending
                    && options.min_idle_ms > 0
                    && i128::from(now_ms) - i128::from(delivery_time_ms)
                        < i128::from(options.min_idle_ms)
                {
                    continue;
                }
                let owner = claim_owner(group, &mut name, consumer, now_ms);
                if pending.is_none() {
                    // Redis creates the entry as delivered once, then counts this claim.
                    group.pel.insert(
                        id,
                        PendingEntry {
                            delivery_time_ms: options.delivery_time_ms,
                            delivery_count: 1,
                            consumer: owner.clone(),
                        },
                    );
                    if let Some(consumer) = group.consumers.get_mut(&owner) {
                        consumer.pel.insert(id);
                    }
                } else {
                    group.reassign(id, &owner);
                }
                if let Some(entry) = group.pel.get_mut(&id) {
                    entry.delivery_time_ms = options.delivery_time_ms;
                    if let Some(retry) = options.retry_count {
                        entry.delivery_count = retry;
                    } else if !options.just_id {
                        entry.delivery_count += 1;
                    }
                }
                claimed.push(id);
            }
            claimed
        })
    }

    /// XAUTOCLAIM: scans the group's pending list from `start`, giving entries idle at
    /// least `min_idle_ms` to `consumer`, up to `count` of them, looking at most
    /// `attempts` pending entries; `None` without the group.
    pub fn auto_claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        start: StreamId,
        options: AutoClaimOptions,
        now_ms: u64,
    ) -> Option<AutoClaim> {
        self.with_group(group, |group, entries| {
            let mut result = AutoClaim::default();
            let mut name: Option<Bytes> = None;
            let mut count = options.count;
            let mut attempts = options.attempts;
            let mut cursor = start;
            let mut scanned_to_end = true;
            loop {
                if attempts == 0 || count == 0 {
                    scanned_to_end = false;
                    break;
                }
                attempts -= 1;
                let Some((&id, entry)) = group.pel.range(cursor..).next() else {
                    break;
                };
                cursor = match id.next() {
                    Some(next) => next,
                    None => {
                        // The last possible ID: nothing can follow it.
                        attempts = 0;
                        StreamId::MAX
                    }
                };
                if !entries.contains_key(&id) {
                    group.remove_pending(id);
                    result.deleted.push(id);
                    count -= 1;
                    continue;
                }
                if options.min_idle_ms > 0
                    && (i128::from(now_ms) - i128::from(entry.delivery_time_ms))
                        < i128::from(options.min_idle_ms)
                {
                    continue;
                }
                let owner = claim_owner(group, &mut name, consumer, now_ms);
                group.reassign(id, &owner);
                if let Some(entry) = group.pel.get_mut(&id) {
                    entry.delivery_time_ms = now_ms;
                    if !options.just_id {
                        entry.delivery_count += 1;
                    }
                }
                result.claimed.push(id);
                count -= 1;
                if id == StreamId::MAX {
                    break;
                }
            }
            result.next = if scanned_to_end {
                StreamId::MIN
            } else {
                group
                    .pel
                    .range(cursor..)
                    .next()
                    .map_or(StreamId::MIN, |(id, _)| *id)
            };
            result
        })
    }

    // Encoding for stores.

    /// The whole stream as plain parts (DUMP): every node with its live entries, the
    /// counters, the groups.
    #[must_use]
    pub fn image(&self) -> StreamImage {
        let nodes = self
            .nodes
            .iter()
            .map(|(master, node)| NodeImage {
                master: *master,
                deleted: node.deleted,
                listpack_bytes: node.listpack_bytes,
                master_fields: Packed::new(&node.master_fields)
                    .map(Bytes::copy_from_slice)
                    .collect(),
                last_id: node.last_id,
                entries: self
                    .entries
                    .range(*master..=node.last_id)
                    .map(|(id, packed)| {
                        (
                            *id,
                            Packed::new(packed).map(Bytes::copy_from_slice).collect(),
                        )
                    })
                    .collect(),
            })
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|(name, group)| GroupImage {
                name: name.clone(),
                last_id: group.last_id,
                entries_read: group.entries_read,
                consumers: group
                    .consumers
                    .iter()
                    .map(|(name, consumer)| (name.clone(), consumer.seen_time_ms))
                    .collect(),
                pending: group
                    .pel
                    .iter()
                    .map(|(id, entry)| (*id, entry.clone()))
                    .collect(),
            })
            .collect();
        StreamImage {
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_id: self.max_deleted_id,
            entries_added: self.entries_added,
            nodes,
            groups,
        }
    }

    /// A stream from plain parts (RESTORE), checked as [`crate::Structure::decode`] checks a
    /// stored one: nodes in order without overlap, each entry inside its node and not above
    /// the last ID, entries in strictly increasing order with an even, non-zero number of
    /// fields and values, unique groups and consumers, pending entries owned by a consumer
    /// of their group.
    ///
    /// # Errors
    /// [`DecodeError`] naming the first thing that does not hold.
    pub fn from_image(image: StreamImage) -> Result<Self, DecodeError> {
        let mut stream = Self {
            last_id: image.last_id,
            first_id: image.first_id,
            max_deleted_id: image.max_deleted_id,
            entries_added: image.entries_added,
            ..Self::default()
        };
        let mut previous_entry: Option<StreamId> = None;
        for node in image.nodes {
            if node.last_id < node.master
                || node.listpack_bytes > 2 * ENTRY_BYTES_MAX
                || stream
                    .nodes
                    .last_key_value()
                    .is_some_and(|(_, previous)| previous.last_id >= node.master)
            {
                return Err(DecodeError("stream nodes out of order"));
            }
            if node.master_fields.is_empty() {
                return Err(DecodeError("stream node without fields"));
            }
            for (id, items) in &node.entries {
                if *id < node.master
                    || *id > node.last_id
                    || *id > stream.last_id
                    || previous_entry.is_some_and(|previous| previous >= *id)
                {
                    return Err(DecodeError("stream entries out of order"));
                }
                if items.is_empty() || items.len() % 2 != 0 {
                    return Err(DecodeError("stream entry field count"));
                }
                previous_entry = Some(*id);
            }
            let master_fields = pack(&node.master_fields);
            stream.bytes += master_fields.len() + NODE_OVERHEAD_BYTES;
            stream.nodes.insert(
                node.master,
                Node {
                    live: node.entries.len() as u64,
                    deleted: node.deleted,
                    listpack_bytes: node.listpack_bytes,
                    master_fields,
                    last_id: node.last_id,
                },
            );
            for (id, items) in node.entries {
                let packed = pack(&items);
                stream.bytes += packed.len() + ENTRY_OVERHEAD_BYTES;
                stream.entries.insert(id, packed);
            }
        }
        for image in image.groups {
            let mut group = ConsumerGroup {
                last_id: image.last_id,
                entries_read: image.entries_read,
                ..ConsumerGroup::default()
            };
            for (name, seen_time_ms) in image.consumers {
                group.consumer_name_bytes += name.len();
                let consumer = Consumer {
                    seen_time_ms,
                    pel: BTreeSet::new(),
                };
                if group.consumers.insert(name, consumer).is_some() {
                    return Err(DecodeError("duplicate consumer"));
                }
            }
            for (id, entry) in image.pending {
                let Some(owner) = group.consumer_key(&entry.consumer) else {
                    return Err(DecodeError("pending entry of an unknown consumer"));
                };
                if let Some(consumer) = group.consumers.get_mut(&owner) {
                    consumer.pel.insert(id);
                }
                let entry = PendingEntry {
                    consumer: owner,
                    ..entry
                };
                if group.pel.insert(id, entry).is_some() {
                    return Err(DecodeError("duplicate pending entry"));
                }
            }
            stream.bytes += image.name.len() + group.heap_bytes();
            if stream.groups.insert(image.name, group).is_some() {
                return Err(DecodeError("duplicate consumer group"));
            }
        }
        Ok(stream)
    }

    /// Appends the stream's encoding (after the kind and entry count
    /// [`crate::Structure::encode`] wrote).
    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        let put_id = |out: &mut Vec<u8>, id: StreamId| {
            put_varint(out, id.ms);
            put_varint(out, id.seq);
        };
        put_id(out, self.last_id);
        put_id(out, self.first_id);
        put_id(out, self.max_deleted_id);
        put_varint(out, self.entries_added);
        put_varint(out, self.nodes.len() as u64);
        for (master, node) in &self.nodes {
            put_id(out, *master);
            put_varint(out, node.live);
            put_varint(out, node.deleted);
            put_varint(out, node.listpack_bytes as u64);
            put_id(out, node.last_id);
            put_bytes(out, &node.master_fields);
        }
        for (id, packed) in &self.entries {
            put_id(out, *id);
            put_bytes(out, packed);
        }
        put_varint(out, self.groups.len() as u64);
        for (name, group) in &self.groups {
            put_bytes(out, name);
            put_id(out, group.last_id);
            put_varint(out, group.entries_read.map_or(0, |read| read + 1));
            put_varint(out, group.consumers.len() as u64);
            for (name, consumer) in &group.consumers {
                put_bytes(out, name);
                put_varint(out, consumer.seen_time_ms);
            }
            put_varint(out, group.pel.len() as u64);
            for (id, entry) in &group.pel {
                put_id(out, *id);
                put_varint(out, entry.delivery_time_ms);
                put_varint(out, entry.delivery_count);
                put_bytes(out, &entry.consumer);
            }
        }
    }

    /// Reads back what [`StreamValue::encode_body`] wrote for `count` entries, checking
    /// everything a command relies on (entries in order below the last ID, well-formed
    /// fields, nodes that account for every entry, pending entries owned by known
    /// consumers).
    pub(crate) fn decode_body(reader: &mut Reader<'_>, count: usize) -> Result<Self, DecodeError> {
        fn id(reader: &mut Reader<'_>) -> Result<StreamId, DecodeError> {
            Ok(StreamId::new(reader.varint()?, reader.varint()?))
        }
        fn bounded(reader: &mut Reader<'_>) -> Result<usize, DecodeError> {
            let count = reader.varint()?;
            if count > reader.remaining() as u64 {
                return Err(DecodeError("count exceeds the encoded bytes"));
            }
            usize::try_from(count).map_err(|_| DecodeError("count"))
        }
        let mut stream = Self {
            last_id: id(reader)?,
            first_id: id(reader)?,
            max_deleted_id: id(reader)?,
            entries_added: reader.varint()?,
            ..Self::default()
        };
        let node_count = bounded(reader)?;
        for _ in 0..node_count {
            let master = id(reader)?;
            let node = Node {
                live: reader.varint()?,
                deleted: reader.varint()?,
                listpack_bytes: usize::try_from(reader.varint()?)
                    .map_err(|_| DecodeError("node bytes"))?,
                last_id: id(reader)?,
                master_fields: reader.slice()?.into(),
            };
            if node.last_id < master
                || node.listpack_bytes > 2 * ENTRY_BYTES_MAX
                || stream
                    .nodes
                    .last_key_value()
                    .is_some_and(|(_, previous)| previous.last_id >= master)
            {
                return Err(DecodeError("stream nodes out of order"));
            }
            valid_packed(&node.master_fields, false)?;
            stream.bytes += node.master_fields.len() + NODE_OVERHEAD_BYTES;
            stream.nodes.insert(master, node);
        }
        let mut previous: Option<StreamId> = None;
        for _ in 0..count {
            let entry_id = id(reader)?;
            if previous.is_some_and(|previous| previous >= entry_id) || entry_id > stream.last_id {
                return Err(DecodeError("stream entries out of order"));
            }
            previous = Some(entry_id);
            let packed: Box<[u8]> = reader.slice()?.into();
            valid_packed(&packed, true)?;
            stream.bytes += packed.len() + ENTRY_OVERHEAD_BYTES;
            stream.entries.insert(entry_id, packed);
        }
        // Every entry lies in a node, and each node's live count is its entries'.
        let mut nodes = stream.nodes.iter().peekable();
        let mut live_seen = 0u64;
        let mut current: Option<(&StreamId, &Node)> = None;
        for entry_id in stream.entries.keys() {
            while let Some((master, _)) = nodes.peek() {
                if **master <= *entry_id {
                    if let Some((_, node)) = current
                        && node.live != live_seen
                    {
                        return Err(DecodeError("stream node counts"));
                    }
                    current = nodes.next();
                    live_seen = 0;
                } else {
                    break;
                }
            }
            match current {
                Some((_, node)) if *entry_id <= node.last_id => live_seen += 1,
                _ => return Err(DecodeError("stream entry outside its nodes")),
            }
        }
        if let Some((_, node)) = current
            && node.live != live_seen
        {
            return Err(DecodeError("stream node counts"));
        }
        if nodes.any(|(_, node)| node.live != 0) {
            return Err(DecodeError("stream node counts"));
        }
        let group_count = bounded(reader)?;
        for _ in 0..group_count {
            let name = reader.bytes()?;
            let mut group = ConsumerGroup {
                last_id: id(reader)?,
                entries_read: reader.varint()?.checked_sub(1),
                ..ConsumerGroup::default()
            };
            let consumer_count = bounded(reader)?;
            for _ in 0..consumer_count {
                let consumer_name = reader.bytes()?;
                let consumer = Consumer {
                    seen_time_ms: reader.varint()?,
                    pel: BTreeSet::new(),
                };
                group.consumer_name_bytes += consumer_name.len();
                if group.consumers.insert(consumer_name, consumer).is_some() {
                    return Err(DecodeError("duplicate consumer"));
                }
            }
            let pending_count = bounded(reader)?;
            for _ in 0..pending_count {
                let pending_id = id(reader)?;
                let delivery_time_ms = reader.varint()?;
                let delivery_count = reader.varint()?;
                let owner = reader.bytes()?;
                let Some(owner_key) = group.consumer_key(&owner) else {
                    return Err(DecodeError("pending entry of an unknown consumer"));
                };
                if let Some(consumer) = group.consumers.get_mut(&owner_key) {
                    consumer.pel.insert(pending_id);
                }
                let entry = PendingEntry {
                    delivery_time_ms,
                    delivery_count,
                    consumer: owner_key,
                };
                if group.pel.insert(pending_id, entry).is_some() {
                    return Err(DecodeError("duplicate pending entry"));
                }
            }
            stream.bytes += name.len() + group.heap_bytes();
            if stream.groups.insert(name, group).is_some() {
                return Err(DecodeError("duplicate consumer group"));
            }
        }
        Ok(stream)
    }

    /// Asserts the structure's own invariants (tests and debug checks): nodes account for
    /// the entries, the byte count matches a recount, and the pending lists agree.
    ///
    /// # Panics
    /// When an invariant is broken.
    pub fn check_invariants(&self) {
        let live: u64 = self.nodes.values().map(|node| node.live).sum();
        assert_eq!(live, self.entries.len() as u64, "node live counts");
        if let Some((id, _)) = self.entries.last_key_value() {
            assert!(*id <= self.last_id, "entry above the last ID");
        }
        let mut bytes = 0;
        bytes += self
            .entries
            .values()
            .map(|packed| packed.len() + ENTRY_OVERHEAD_BYTES)
            .sum::<usize>();
        bytes += self
            .nodes
            .values()
            .map(|node| node.master_fields.len() + NODE_OVERHEAD_BYTES)
            .sum::<usize>();
        for (name, group) in &self.groups {
            bytes += name.len() + group.heap_bytes();
            let owned: usize = group.consumers.values().map(|c| c.pel.len()).sum();
            assert_eq!(owned, group.pel.len(), "consumer lists cover the group's");
            for (id, entry) in &group.pel {
                assert!(
                    group
                        .consumers
                        .get(&entry.consumer)
                        .is_some_and(|consumer| consumer.pel.contains(id)),
                    "pending entry owned by its consumer"
                );
            }
            let names: usize = group.consumers.keys().map(Bytes::len).sum();
            assert_eq!(names, group.consumer_name_bytes, "consumer name bytes");
        }
        assert_eq!(bytes, self.bytes, "byte count");
    }
}

/// XAUTOCLAIM's bounds and options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoClaimOptions {
    /// Entries idle less than this are left alone (0: any).
    pub min_idle_ms: u64,
    /// At most this many entries claimed or dropped.
    pub count: u64,
    /// At most this many pending entries looked at.
    pub attempts: u64,
    /// Leave delivery counts alone.
    pub just_id: bool,
}

/// The consumer claims go to: looked up (seen time refreshed) or created at the first
/// claim, as Redis does.
fn claim_owner(
    group: &mut ConsumerGroup,
    name: &mut Option<Bytes>,
    consumer: &[u8],
    now_ms: u64,
) -> Bytes {
    if let Some(name) = name {
        return name.clone();
    }
    let key = group
        .consumer_key(consumer)
        .unwrap_or_else(|| Bytes::copy_from_slice(consumer));
    group.touch_consumer(&key, now_ms);
    *name = Some(key.clone());
    key
}

/// Checks packed bytes: well-formed, and for an entry an even, non-zero number of items.
fn valid_packed(bytes: &[u8], entry: bool) -> Result<(), DecodeError> {
    let mut reader = Reader::new(bytes);
    let count = reader.varint()?;
    if count > bytes.len() as u64 || (entry && (count == 0 || count % 2 != 0)) {
        return Err(DecodeError("stream entry field count"));
    }
    for _ in 0..count {
        reader.slice()?;
    }
    if reader.remaining() != 0 {
        return Err(DecodeError("trailing bytes in a stream entry"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn items(pairs: &[&str]) -> Vec<Bytes> {
        pairs.iter().map(|text| b(text)).collect()
    }

    fn exact(ms: u64, seq: u64) -> IdRequest {
        IdRequest::Exact(StreamId::new(ms, seq))
    }

    // Proves IDs are generated as Redis does: clock, then sequence, partial `ms-*`, and
    // refused when not above the top item.
    #[test]
    fn ids_are_generated_and_checked() {
        let mut stream = StreamValue::default();
        let fields = items(&["f", "v"]);
        assert_eq!(
            stream.add(IdRequest::Auto { now_ms: 5 }, &fields),
            Ok(StreamId::new(5, 0))
        );
        assert_eq!(
            stream.add(IdRequest::Auto { now_ms: 4 }, &fields),
            Ok(StreamId::new(5, 1))
        );
        assert_eq!(
            stream.add(IdRequest::Partial { ms: 5 }, &fields),
            Ok(StreamId::new(5, 2))
        );
        assert_eq!(
            stream.add(IdRequest::Partial { ms: 7 }, &fields),
            Ok(StreamId::new(7, 0))
        );
        assert_eq!(stream.add(exact(7, 0), &fields), Err(AddError::NotGreater));
        assert_eq!(
            stream.add(IdRequest::Partial { ms: 6 }, &fields),
            Err(AddError::NotGreater)
        );
        assert_eq!(
            stream.add(exact(7, u64::MAX), &fields),
            Ok(StreamId::new(7, u64::MAX))
        );
        assert_eq!(
            stream.add(IdRequest::Partial { ms: 7 }, &fields),
            Err(AddError::NotGreater)
        );
        assert_eq!(
            stream.add(IdRequest::Exact(StreamId::MAX), &fields),
            Ok(StreamId::MAX)
        );
        assert_eq!(
            stream.add(IdRequest::Auto { now_ms: 1 }, &fields),
            Err(AddError::Exhausted)
        );
        assert_eq!(stream.len(), 6);
        assert_eq!(stream.entries_added(), 6);
        stream.check_invariants();
    }

    // Proves approximate trims remove whole nodes only, as Redis' `~` does with 100-entry
    // nodes (1000 entries trimmed to ~555 leave 600), and exact trims leave the exact count.
    #[test]
    fn approximate_trims_remove_whole_nodes() {
        let mut stream = StreamValue::default();
        let approximate = Trim {
            strategy: TrimStrategy::MaxLen(555),
            approximate: true,
            limit: 10_000,
        };
        for ms in 1..=1000 {
            let field = if ms % 10 == 0 { "yitem" } else { "xitem" };
            stream
                .add(exact(ms, 0), &[b(field), Bytes::from(ms.to_string())])
                .expect("added");
            stream.trim(approximate);
        }
        assert_eq!(stream.len(), 600);
        assert_eq!(stream.node_count(), 6);
        stream.check_invariants();
        let removed = stream.trim(Trim {
            strategy: TrimStrategy::MaxLen(444),
            approximate: false,
            limit: 0,
        });
        assert_eq!((removed, stream.len()), (156, 444));
        assert_eq!(stream.first_id(), StreamId::new(557, 0));
        stream.check_invariants();
        let removed = stream.trim(Trim {
            strategy: TrimStrategy::MinId(StreamId::new(900, 0)),
            approximate: true,
            limit: 0,
        });
        assert_eq!(removed, 244);
        assert_eq!(stream.len(), 200);
        stream.check_invariants();
    }

    // Proves deletes keep tombstones in their node until the node empties, and update the
    // first and largest deleted IDs.
    #[test]
    fn deletes_track_first_and_largest_deleted() {
        let mut stream = StreamValue::default();
        for ms in 1..=3 {
            stream
                .add(exact(ms, 0), &items(&["a", "1"]))
                .expect("added");
        }
        assert!(stream.delete(StreamId::new(1, 0)));
        assert!(!stream.delete(StreamId::new(1, 0)));
        assert_eq!(stream.first_id(), StreamId::new(2, 0));
        assert!(stream.delete(StreamId::new(3, 0)));
        assert_eq!(stream.max_deleted_id(), StreamId::new(3, 0));
        assert_eq!(stream.node_count(), 1);
        assert!(stream.delete(StreamId::new(2, 0)));
        assert_eq!(stream.node_count(), 0);
        assert_eq!(stream.first_id(), StreamId::MIN);
        assert_eq!(stream.last_id(), StreamId::new(3, 0));
        stream.check_invariants();
    }

    fn sample() -> StreamValue {
        let mut stream = StreamValue::default();
        for ms in 1..=250 {
            let fields = if ms % 3 == 0 {
                items(&["other", "x", "b", "\u{0}bin"])
            } else {
                items(&["a", "1"])
            };
            stream.add(exact(ms, ms % 4), &fields).expect("added");
        }
        stream.delete(StreamId::new(10, 2));
        stream.create_group(b"g", StreamId::MIN, None);
        stream.create_group(b"h", StreamId::new(5, 0), Some(3));
        stream.read_group_new(b"g", b"alice", 5, false, 1000);
        stream.read_group_new(b"g", b"bob", 5, false, 2000);
        stream.create_consumer(b"h", b"idle", 3000);
        stream.set_id(StreamId::new(300, 0), None, StreamId::MIN);
        stream
    }

    // Proves a stream with nodes, tombstones, groups, consumers and pending entries
    // survives encode → decode whole, and every truncation or junk byte is refused.
    #[test]
    fn encoding_round_trips_and_refuses_garbage() {
        let stream = sample();
        stream.check_invariants();
        let structure = crate::Structure::Stream(stream.clone());
        let bytes = structure.encode();
        let back = crate::Structure::decode(&bytes).expect("decodes");
        let crate::Structure::Stream(back) = back else {
            panic!("not a stream");
        };
        assert_eq!(back, stream);
        back.check_invariants();
        for cut in 0..bytes.len() {
            assert!(
                crate::Structure::decode(&bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        let mut junk = bytes.clone();
        junk.push(0);
        assert!(crate::Structure::decode(&junk).is_err());
        // Flipping bytes never panics (errors or another valid stream).
        for at in 0..bytes.len() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x5a;
            let _ = crate::Structure::decode(&flipped);
        }
    }

    // Proves a stream taken apart into plain parts (DUMP) and built back (RESTORE) is the
    // same stream — nodes, tombstone counts, counters, groups, consumers, pending entries,
    // byte count — and that parts which do not make a stream are refused.
    #[test]
    fn images_round_trip_and_refuse_inconsistent_parts() {
        let stream = sample();
        let image = stream.image();
        assert_eq!(
            image
                .nodes
                .iter()
                .map(|node| node.entries.len())
                .sum::<usize>(),
            stream.len()
        );
        let back = StreamValue::from_image(image.clone()).expect("rebuilds");
        assert_eq!(back, stream);
        back.check_invariants();

        let mut overlapping = image.clone();
        overlapping.nodes[1].master = overlapping.nodes[0].master;
        assert!(StreamValue::from_image(overlapping).is_err());
        let mut outside = image.clone();
        let beyond = outside.nodes[0].last_id.next().expect("an ID");
        outside.nodes[0].entries.push((beyond, items(&["a", "1"])));
        assert!(StreamValue::from_image(outside).is_err());
        let mut odd = image.clone();
        odd.nodes[0].entries[0].1.pop();
        assert!(StreamValue::from_image(odd).is_err());
        let mut orphan = image.clone();
        orphan.groups[0].consumers.clear();
        assert!(StreamValue::from_image(orphan).is_err());
        let mut twice = image;
        let copy = twice.groups[0].clone();
        twice.groups.push(copy);
        assert!(StreamValue::from_image(twice).is_err());
    }

    // Proves group reads, history, acks, claims and consumer deletion keep the pending
    // lists and the byte count consistent.
    #[test]
    fn groups_deliver_ack_and_claim() {
        let mut stream = sample();
        let group = stream.group(b"g").expect("group");
        assert_eq!(group.pending().len(), 10);
        assert_eq!(group.last_id, StreamId::new(11, 3));
        let history = stream
            .read_group_history(b"g", b"alice", StreamId::MIN, 0, 5000)
            .expect("group");
        assert_eq!(history.len(), 5);
        assert_eq!(
            stream.ack(b"g", &[StreamId::new(1, 1), StreamId::new(99, 0)]),
            Some(1)
        );
        let claimed = stream
            .claim(
                b"g",
                b"carol",
                &[StreamId::new(2, 2), StreamId::new(10, 2)],
                ClaimOptions {
                    min_idle_ms: 0,
                    delivery_time_ms: 6000,
                    retry_count: None,
                    force: false,
                    just_id: false,
                    last_id: StreamId::MIN,
                },
                6000,
            )
            .expect("group");
        assert_eq!(claimed, vec![StreamId::new(2, 2)]);
        let auto = stream
            .auto_claim(
                b"g",
                b"dave",
                StreamId::MIN,
                AutoClaimOptions {
                    min_idle_ms: 0,
                    count: 3,
                    attempts: 30,
                    just_id: true,
                },
                7000,
            )
            .expect("group");
        assert_eq!(auto.claimed.len(), 3);
        assert_ne!(auto.next, StreamId::MIN);
        assert_eq!(stream.delete_consumer(b"g", b"dave"), Some(3));
        stream.check_invariants();
        assert!(stream.destroy_group(b"g"));
        stream.check_invariants();
    }

    // Proves listpack element sizes follow listpack.c's encodings.
    #[test]
    fn listpack_sizes() {
        assert_eq!(int_element_bytes(0), 2);
        assert_eq!(int_element_bytes(127), 2);
        assert_eq!(int_element_bytes(128), 3);
        assert_eq!(int_element_bytes(-1), 3);
        assert_eq!(int_element_bytes(40_000), 5);
        assert_eq!(int_element_bytes(i64::MAX), 10);
        assert_eq!(string_element_bytes(b"12"), 2);
        assert_eq!(string_element_bytes(b"012"), 5);
        assert_eq!(string_element_bytes(&[b'x'; 63]), 65);
        assert_eq!(string_element_bytes(&[b'x'; 200]), 204);
    }
}
