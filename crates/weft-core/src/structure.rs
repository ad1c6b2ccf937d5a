//! Values that are data structures: hashes, lists, sets and sorted sets (what Redis clients
//! reach for after strings), mutated in place.
//!
//! Why in place: an entry's bytes are immutable, so a collection stored as bytes would be
//! copied whole by every change — `LPUSH` onto a list of n elements would cost O(n). A
//! structure entry instead points at a shared [`StructureCell`]; a write locks the key's
//! segment, locks the cell, changes it, and stores a new entry (new version, same cell). Readers
//! that hold an older entry see the change too, as they would in Redis.
//!
//! Each structure keeps a running estimate of its heap bytes (element bytes plus a fixed
//! per-element overhead), so charging it to a memory-bounded cache costs O(1). Stores keep a
//! structure as the bytes of [`Structure::encode`], read back by [`Structure::decode`].
//!
//! The `large` flags mirror Redis 7.0's encodings (listpack/intset until a size threshold,
//! then hashtable/skiplist, never converting back), which `OBJECT ENCODING` reports.

use std::cmp::Ordering;
use std::collections::{BTreeSet, VecDeque};
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use hashbrown::HashTable;
use parking_lot::{Mutex, MutexGuard};

pub use crate::stream::StreamValue;

/// The hasher of every structure's table (as the container's).
type Hasher = foldhash::fast::RandomState;

/// Redis' `hash-max-listpack-entries` (512 in redis-server 7.0: its `redis.conf` example
/// says 128, the compiled default is 512).
pub const HASH_LISTPACK_ENTRIES_MAX: usize = 512;
/// Redis' `hash-max-listpack-value` (also `zset-max-listpack-value`).
pub const LISTPACK_VALUE_BYTES_MAX: usize = 64;
/// Redis' `set-max-intset-entries`.
pub const INTSET_ENTRIES_MAX: usize = 512;
/// Redis' `zset-max-listpack-entries`.
pub const ZSET_LISTPACK_ENTRIES_MAX: usize = 128;
/// Redis' `stream-node-max-entries`: entries per listpack node of a stream.
pub const STREAM_NODE_ENTRIES_DEFAULT: usize = 100;
/// Redis' `stream-node-max-bytes`: bytes per listpack node of a stream.
pub const STREAM_NODE_BYTES_DEFAULT: usize = 4096;

/// Redis' encoding thresholds in force, process-wide as redis-server's own configuration
/// (its `CONFIG SET hash-max-listpack-entries …`): a structure changes to its large form when
/// a write takes it past them; one already large stays so. They start at the defaults above.
pub mod limits {
    use std::sync::atomic::{AtomicUsize, Ordering};

    static HASH_ENTRIES: AtomicUsize = AtomicUsize::new(super::HASH_LISTPACK_ENTRIES_MAX);
    static HASH_VALUE: AtomicUsize = AtomicUsize::new(super::LISTPACK_VALUE_BYTES_MAX);
    static INTSET_ENTRIES: AtomicUsize = AtomicUsize::new(super::INTSET_ENTRIES_MAX);
    static ZSET_ENTRIES: AtomicUsize = AtomicUsize::new(super::ZSET_LISTPACK_ENTRIES_MAX);
    static ZSET_VALUE: AtomicUsize = AtomicUsize::new(super::LISTPACK_VALUE_BYTES_MAX);
    static STREAM_NODE_ENTRIES: AtomicUsize = AtomicUsize::new(super::STREAM_NODE_ENTRIES_DEFAULT);
    static STREAM_NODE_BYTES: AtomicUsize = AtomicUsize::new(super::STREAM_NODE_BYTES_DEFAULT);

    /// A threshold, by Redis' parameter name.
    fn of(name: &str) -> Option<&'static AtomicUsize> {
        match name {
            "hash-max-listpack-entries" => Some(&HASH_ENTRIES),
            "hash-max-listpack-value" => Some(&HASH_VALUE),
            "set-max-intset-entries" => Some(&INTSET_ENTRIES),
            "zset-max-listpack-entries" => Some(&ZSET_ENTRIES),
            "zset-max-listpack-value" => Some(&ZSET_VALUE),
            "stream-node-max-entries" => Some(&STREAM_NODE_ENTRIES),
            "stream-node-max-bytes" => Some(&STREAM_NODE_BYTES),
            _ => None,
        }
    }

    /// Sets the threshold Redis names `name` (`hash-max-listpack-entries`,
    /// `hash-max-listpack-value`, `set-max-intset-entries`, `zset-max-listpack-entries`,
    /// `zset-max-listpack-value`, `stream-node-max-entries`, `stream-node-max-bytes`); false
    /// for another name.
    pub fn set(name: &str, value: usize) -> bool {
        of(name).is_some_and(|limit| {
            limit.store(value, Ordering::Relaxed);
            true
        })
    }

    pub(super) fn hash_entries() -> usize {
        HASH_ENTRIES.load(Ordering::Relaxed)
    }

    pub(super) fn hash_value() -> usize {
        HASH_VALUE.load(Ordering::Relaxed)
    }

    pub(super) fn intset_entries() -> usize {
        INTSET_ENTRIES.load(Ordering::Relaxed)
    }

    /// `zset-max-listpack-entries` in force.
    pub fn zset_entries() -> usize {
        ZSET_ENTRIES.load(Ordering::Relaxed)
    }

    pub(super) fn zset_value() -> usize {
        ZSET_VALUE.load(Ordering::Relaxed)
    }

    /// `stream-node-max-entries` in force (0: no limit).
    pub fn stream_node_entries() -> usize {
        STREAM_NODE_ENTRIES.load(Ordering::Relaxed)
    }

    /// `stream-node-max-bytes` in force (0: no limit).
    pub fn stream_node_bytes() -> usize {
        STREAM_NODE_BYTES.load(Ordering::Relaxed)
    }
}

/// Estimated heap bytes per element beyond its own bytes (table slot or node, `Bytes`
/// headers, allocator rounding).
const ELEMENT_OVERHEAD_BYTES: usize = 48;

/// The collection types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StructureKind {
    /// Field → value.
    Hash = 1,
    /// Ordered sequence, with pushes and pops at both ends.
    List = 2,
    /// Unordered unique members.
    Set = 3,
    /// Unique members ordered by score, then bytes.
    SortedSet = 4,
    /// Entries ordered by ID, with consumer groups.
    Stream = 5,
}

impl StructureKind {
    /// Redis' `TYPE` answer.
    #[must_use]
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Hash => "hash",
            Self::List => "list",
            Self::Set => "set",
            Self::SortedSet => "zset",
            Self::Stream => "stream",
        }
    }

    /// What protocols without structures (REST, Hot Rod) answer a read of such a key with.
    #[must_use]
    pub fn unreadable_message(self) -> String {
        let noun = match self {
            Self::Hash => "hash",
            Self::List => "list",
            Self::Set => "set",
            Self::SortedSet => "sorted set",
            Self::Stream => "stream",
        };
        format!("key holds a Redis {noun}; read it over RESP")
    }
}

/// A data structure value.
#[derive(Debug, Clone)]
pub enum Structure {
    /// A hash.
    Hash(HashValue),
    /// A list.
    List(ListValue),
    /// A set.
    Set(SetValue),
    /// A sorted set.
    SortedSet(SortedSetValue),
    /// A stream.
    Stream(StreamValue),
}

impl Structure {
    /// Which kind it is.
    #[must_use]
    pub fn kind(&self) -> StructureKind {
        match self {
            Self::Hash(_) => StructureKind::Hash,
            Self::List(_) => StructureKind::List,
            Self::Set(_) => StructureKind::Set,
            Self::SortedSet(_) => StructureKind::SortedSet,
            Self::Stream(_) => StructureKind::Stream,
        }
    }

    /// An empty structure of `kind`.
    #[must_use]
    pub fn empty(kind: StructureKind) -> Self {
        match kind {
            StructureKind::Hash => Self::Hash(HashValue::default()),
            StructureKind::List => Self::List(ListValue::default()),
            StructureKind::Set => Self::Set(SetValue::default()),
            StructureKind::SortedSet => Self::SortedSet(SortedSetValue::default()),
            StructureKind::Stream => Self::Stream(StreamValue::default()),
        }
    }

    /// Number of elements (fields, items, members, entries).
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::Hash(h) => h.len(),
            Self::List(l) => l.len(),
            Self::Set(s) => s.len(),
            Self::SortedSet(z) => z.len(),
            Self::Stream(x) => x.len(),
        }
    }

    /// True when it holds no element.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether Redis deletes the key once it holds no element: every type but streams (an
    /// empty stream keeps its last ID and its consumer groups).
    #[must_use]
    pub fn deleted_when_empty(&self) -> bool {
        !matches!(self, Self::Stream(_))
    }

    /// Estimated heap bytes.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::Hash(h) => h.bytes,
            Self::List(l) => l.bytes,
            Self::Set(s) => s.bytes,
            Self::SortedSet(z) => z.bytes,
            Self::Stream(x) => x.heap_bytes(),
        }
    }

    /// Redis 7.0's `OBJECT ENCODING` answer.
    #[must_use]
    pub fn encoding_name(&self) -> &'static str {
        match self {
            Self::Hash(h) => {
                if h.large {
                    "hashtable"
                } else {
                    "listpack"
                }
            }
            Self::List(_) => "quicklist",
            Self::Set(s) => {
                if s.large {
                    "hashtable"
                } else {
                    "intset"
                }
            }
            Self::SortedSet(z) => {
                if z.large {
                    "skiplist"
                } else {
                    "listpack"
                }
            }
            Self::Stream(_) => "stream",
        }
    }

    /// The bytes a store keeps: kind, element count, then each element length-prefixed
    /// (sorted-set scores as 8 little-endian bytes before the member; a stream's header,
    /// nodes, entries and groups as `StreamValue::encode_body` writes them).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.heap_bytes().min(1 << 20) + 16);
        out.push(self.kind() as u8);
        put_varint(&mut out, self.len() as u64);
        match self {
            Self::Hash(h) => {
                for (field, value) in h.iter() {
                    put_bytes(&mut out, field);
                    put_bytes(&mut out, value);
                }
            }
            Self::List(l) => {
                for item in l.iter() {
                    put_bytes(&mut out, item);
                }
            }
            Self::Set(s) => {
                for member in s.iter() {
                    put_bytes(&mut out, member);
                }
            }
            Self::SortedSet(z) => {
                for (member, score) in z.iter() {
                    out.extend_from_slice(&score.to_le_bytes());
                    put_bytes(&mut out, member);
                }
            }
            Self::Stream(x) => x.encode_body(&mut out),
        }
        out
    }

    /// Reads back what [`Structure::encode`] wrote.
    ///
    /// # Errors
    /// [`DecodeError`] on any malformed input (unknown kind, truncation, trailing bytes,
    /// duplicate or NaN members).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut reader = Reader { bytes, at: 0 };
        let kind = reader.byte()?;
        let count = reader.varint()?;
        // Every element takes at least one byte: a larger count is corruption, and must not
        // drive a huge allocation.
        if count > (bytes.len() as u64) {
            return Err(DecodeError("element count exceeds the encoded bytes"));
        }
        let count = usize::try_from(count).map_err(|_| DecodeError("element count"))?;
        let structure = match kind {
            1 => {
                let mut hash = HashValue::default();
                for _ in 0..count {
                    let field = reader.bytes()?;
                    let value = reader.bytes()?;
                    if hash.insert(field, value).is_some() {
                        return Err(DecodeError("duplicate hash field"));
                    }
                }
                Self::Hash(hash)
            }
            2 => {
                let mut list = ListValue::default();
                for _ in 0..count {
                    list.push_back(reader.bytes()?);
                }
                Self::List(list)
            }
            3 => {
                let mut set = SetValue::default();
                for _ in 0..count {
                    if !set.insert(reader.bytes()?) {
                        return Err(DecodeError("duplicate set member"));
                    }
                }
                Self::Set(set)
            }
            4 => {
                let mut zset = SortedSetValue::default();
                for _ in 0..count {
                    let score = f64::from_le_bytes(reader.array()?);
                    if score.is_nan() {
                        return Err(DecodeError("NaN score"));
                    }
                    if zset.insert(reader.bytes()?, score).is_some() {
                        return Err(DecodeError("duplicate sorted-set member"));
                    }
                }
                Self::SortedSet(zset)
            }
            5 => Self::Stream(StreamValue::decode_body(&mut reader, count)?),
            _ => return Err(DecodeError("unknown structure kind")),
        };
        if reader.at != bytes.len() {
            return Err(DecodeError("trailing bytes after the last element"));
        }
        Ok(structure)
    }
}

/// Malformed structure bytes (from a store).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed structure encoding: {0}")]
pub struct DecodeError(pub(crate) &'static str);

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Reads what `put_varint` and `put_bytes` wrote, refusing truncation.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// A length-prefixed byte string, borrowed.
    pub(crate) fn slice(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError("length"))?;
        let end = self.at.checked_add(len).ok_or(DecodeError("truncated"))?;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or(DecodeError("truncated"))?;
        self.at = end;
        Ok(slice)
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let byte = *self.bytes.get(self.at).ok_or(DecodeError("truncated"))?;
        self.at += 1;
        Ok(byte)
    }

    pub(crate) fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("varint longer than 64 bits"))
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let end = self.at.checked_add(N).ok_or(DecodeError("truncated"))?;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or(DecodeError("truncated"))?;
        self.at = end;
        let mut array = [0u8; N];
        array.copy_from_slice(slice);
        Ok(array)
    }

    pub(crate) fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        Ok(Bytes::copy_from_slice(self.slice()?))
    }
}

/// The shared, lockable home of one structure value.
#[derive(Debug)]
pub struct StructureCell {
    inner: Mutex<Structure>,
}

impl StructureCell {
    /// A new cell holding `structure`.
    #[must_use]
    pub fn new(structure: Structure) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(structure),
        })
    }

    /// Locks the structure for reading or changing it. Writers must hold the key's segment
    /// lock (be inside `Cache::compute`) while changing it.
    pub fn lock(&self) -> MutexGuard<'_, Structure> {
        self.inner.lock()
    }
}

/// What a [`Table`] element is looked up by.
trait Keyed {
    /// The element's key (field, member).
    fn key(&self) -> &[u8];
}

impl Keyed for Bytes {
    fn key(&self) -> &[u8] {
        self
    }
}

impl Keyed for (Bytes, Bytes) {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

impl Keyed for (Bytes, f64) {
    fn key(&self) -> &[u8] {
        &self.0
    }
}

/// Below this many buckets a table is never shrunk.
const SHRINK_BUCKETS_MIN: usize = 128;
/// A table shrinks when fewer than one bucket in this many is used (Redis shrinks its dicts
/// under 10% fill), which keeps random sampling at a few probes per pick.
const SHRINK_FILL_RATIO: usize = 16;
/// Random probes before [`Table::random_index`] falls back to counting (only reachable in
/// a table that is sparse despite shrinking, i.e. never in practice).
const RANDOM_PROBES_MAX: usize = 1024;
/// Bits of a scan cursor that hold the bucket to resume at; the bits above hold the
/// table's layout epoch.
const CURSOR_BUCKET_BITS: u32 = 40;
/// Buckets a scan step may visit per element asked for (Redis' `maxiterations`).
const SCAN_BUCKETS_PER_ELEMENT: usize = 10;

/// The large encoding of hashes, sets and sorted sets: a hash table that also answers
/// "a random element" in O(1) (a random bucket, retried until occupied) and resumable
/// scans (Redis' `dictScan` role).
///
/// Scan cursors are bucket indexes tagged with the table's layout epoch. Elements never
/// move between buckets except when the table is rehashed (grown, rehashed in place or
/// shrunk); each rehash bumps the epoch, and a cursor from an older epoch restarts the
/// scan at bucket 0. So every element present for a whole scan is returned at least once
/// (elements may come twice across a rehash, as Redis allows), and a scan of a table that
/// is not rehashed meanwhile returns each element exactly once.
#[derive(Debug, Clone, Default)]
struct Table<T> {
    inner: HashTable<T>,
    hasher: Hasher,
    epoch: u64,
}

impl<T: Keyed> Table<T> {
    fn len(&self) -> usize {
        self.inner.len()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    fn get(&self, key: &[u8]) -> Option<&T> {
        self.inner.find(self.hash(key), |t| t.key() == key)
    }

    fn get_mut(&mut self, key: &[u8]) -> Option<&mut T> {
        let hash = self.hash(key);
        self.inner.find_mut(hash, |t| t.key() == key)
    }

    /// Inserts `value`, whose key must be absent.
    fn insert_new(&mut self, value: T) {
        // hashbrown rehashes on insert only when no growth is left: count that as a
        // layout change (a conservative test: it may also fill a tombstone instead).
        if self.inner.len() == self.inner.capacity() {
            self.epoch = self.epoch.wrapping_add(1);
        }
        let hasher = &self.hasher;
        let hash = hasher.hash_one(value.key());
        self.inner
            .insert_unique(hash, value, |t| hasher.hash_one(t.key()));
    }

    fn remove(&mut self, key: &[u8]) -> Option<T> {
        let hash = self.hash(key);
        let (value, _) = self
            .inner
            .find_entry(hash, |t| t.key() == key)
            .ok()?
            .remove();
        self.shrink_if_sparse();
        Some(value)
    }

    fn shrink_if_sparse(&mut self) {
        let buckets = self.inner.num_buckets();
        if buckets > SHRINK_BUCKETS_MIN && self.inner.len() * SHRINK_FILL_RATIO < buckets {
            self.epoch = self.epoch.wrapping_add(1);
            let hasher = &self.hasher;
            self.inner
                .shrink_to(self.inner.len() * 2, |t| hasher.hash_one(t.key()));
        }
    }

    /// The bucket of a uniformly chosen element (`below(n)` picks in `0..n`).
    fn random_index(&self, below: &mut impl FnMut(usize) -> usize) -> Option<usize> {
        if self.inner.is_empty() {
            return None;
        }
        let buckets = self.inner.num_buckets();
        for _ in 0..RANDOM_PROBES_MAX {
            let index = below(buckets);
            if self.inner.get_bucket(index).is_some() {
                return Some(index);
            }
        }
        self.inner.iter_buckets().nth(below(self.inner.len()))
    }

    fn random(&self, mut below: impl FnMut(usize) -> usize) -> Option<&T> {
        let index = self.random_index(&mut below)?;
        self.inner.get_bucket(index)
    }

    fn remove_random(&mut self, mut below: impl FnMut(usize) -> usize) -> Option<T> {
        let index = self.random_index(&mut below)?;
        let (value, _) = self.inner.get_bucket_entry(index).ok()?.remove();
        self.shrink_if_sparse();
        Some(value)
    }

    /// One scan step from `cursor` (0 starts): calls `f` on the elements of the buckets
    /// visited until at least `count` were seen; returns the cursor to resume at, 0 when
    /// the whole table was covered.
    fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a T)) -> u64 {
        let bucket_mask = (1u64 << CURSOR_BUCKET_BITS) - 1;
        // Cursors stay below 2^63: Redis prints them as a signed 64-bit integer.
        let epoch = self.epoch & (u64::MAX >> (CURSOR_BUCKET_BITS + 1));
        let mut index = if cursor >> CURSOR_BUCKET_BITS == epoch {
            usize::try_from(cursor & bucket_mask).unwrap_or(usize::MAX)
        } else {
            0
        };
        let buckets = self.inner.num_buckets();
        let count = count.max(1);
        let mut visits = count.saturating_mul(SCAN_BUCKETS_PER_ELEMENT);
        let mut seen = 0;
        while index < buckets && seen < count && visits > 0 {
            if let Some(element) = self.inner.get_bucket(index) {
                f(element);
                seen += 1;
            }
            index += 1;
            visits -= 1;
        }
        if index >= buckets {
            0
        } else {
            (epoch << CURSOR_BUCKET_BITS) | index as u64
        }
    }

    fn iter(&self) -> impl Iterator<Item = &T> {
        self.inner.iter()
    }
}

/// A hash: field → value.
///
/// Small hashes keep their pairs in insertion order in a vector (Redis' listpack: linear
/// lookups over at most [`HASH_LISTPACK_ENTRIES_MAX`] short pairs, and replies in the
/// order Redis gives), large ones a `Table`.
#[derive(Debug, Clone, Default)]
pub struct HashValue {
    pairs: Vec<(Bytes, Bytes)>,
    table: Table<(Bytes, Bytes)>,
    bytes: usize,
    large: bool,
}

impl HashValue {
    /// Number of fields.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pairs.len() + self.table.len()
    }

    /// True without fields.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it is in Redis' compact (listpack) encoding.
    #[must_use]
    pub fn is_compact(&self) -> bool {
        !self.large
    }

    /// The value of `field`.
    #[must_use]
    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        if self.large {
            self.table.get(field).map(|(_, value)| value)
        } else {
            self.pairs
                .iter()
                .find(|(f, _)| f[..] == *field)
                .map(|(_, value)| value)
        }
    }

    /// Whether `field` is present.
    #[must_use]
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Sets `field` to `value`; returns the previous value. A new field goes last.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> Option<Bytes> {
        if !self.large && (field.len() > limits::hash_value() || value.len() > limits::hash_value())
        {
            self.convert();
        }
        let slot = if self.large {
            self.table.get_mut(&field).map(|(_, slot)| slot)
        } else {
            self.pairs
                .iter_mut()
                .find(|(f, _)| *f == field)
                .map(|(_, slot)| slot)
        };
        if let Some(slot) = slot {
            let added = value.len();
            let old = std::mem::replace(slot, value);
            self.bytes = self.bytes - old.len() + added;
            return Some(old);
        }
        self.bytes += ELEMENT_OVERHEAD_BYTES + field.len() + value.len();
        if self.large {
            self.table.insert_new((field, value));
        } else {
            self.pairs.push((field, value));
            if self.pairs.len() > limits::hash_entries() {
                self.convert();
            }
        }
        None
    }

    /// Sets `field` to `value`, copying the field's bytes only when it is new (callers
    /// pass slices of a request, which a stored element must not keep alive); true when
    /// the field is new.
    pub fn set(&mut self, field: &[u8], value: Bytes) -> bool {
        if !self.large && value.len() > limits::hash_value() {
            self.convert();
        }
        let slot = if self.large {
            self.table.get_mut(field).map(|(_, slot)| slot)
        } else {
            self.pairs
                .iter_mut()
                .find(|(f, _)| f[..] == *field)
                .map(|(_, slot)| slot)
        };
        match slot {
            Some(slot) => {
                let added = value.len();
                let old = std::mem::replace(slot, value);
                self.bytes = self.bytes - old.len() + added;
                false
            }
            None => {
                self.insert(Bytes::copy_from_slice(field), value);
                true
            }
        }
    }

    /// Removes `field`; returns its value. The other fields keep their order.
    pub fn remove(&mut self, field: &[u8]) -> Option<Bytes> {
        let (key, value) = if self.large {
            self.table.remove(field)?
        } else {
            let index = self.pairs.iter().position(|(f, _)| f[..] == *field)?;
            self.pairs.remove(index)
        };
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES + key.len() + value.len());
        Some(value)
    }

    /// Every field and value: insertion order while compact, no particular order after.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.pairs
            .iter()
            .chain(self.table.iter())
            .map(|(field, value)| (field, value))
    }

    /// A uniformly chosen field and its value (`below(n)` picks in `0..n`).
    pub fn random(&self, mut below: impl FnMut(usize) -> usize) -> Option<(&Bytes, &Bytes)> {
        let (field, value) = if self.large {
            self.table.random(below)?
        } else if self.pairs.is_empty() {
            return None;
        } else {
            self.pairs.get(below(self.pairs.len()))?
        };
        Some((field, value))
    }

    /// One `HSCAN` step: calls `f` on some pairs and returns the next cursor (0: done).
    /// A compact hash is returned whole whatever the cursor, as Redis does.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&'a Bytes, &'a Bytes),
    ) -> u64 {
        if self.large {
            self.table
                .scan(cursor, count, |(field, value)| f(field, value))
        } else {
            for (field, value) in &self.pairs {
                f(field, value);
            }
            0
        }
    }

    fn convert(&mut self) {
        self.large = true;
        for pair in std::mem::take(&mut self.pairs) {
            self.table.insert_new(pair);
        }
    }
}

/// A list.
#[derive(Debug, Clone, Default)]
pub struct ListValue {
    items: VecDeque<Bytes>,
    bytes: usize,
}

impl ListValue {
    /// Number of items.
    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// True without items.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The item at `index` from the head.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&Bytes> {
        self.items.get(index)
    }

    /// Adds at the head.
    pub fn push_front(&mut self, item: Bytes) {
        self.bytes += ELEMENT_OVERHEAD_BYTES + item.len();
        self.items.push_front(item);
    }

    /// Adds at the tail.
    pub fn push_back(&mut self, item: Bytes) {
        self.bytes += ELEMENT_OVERHEAD_BYTES + item.len();
        self.items.push_back(item);
    }

    /// Removes from the head.
    pub fn pop_front(&mut self) -> Option<Bytes> {
        let item = self.items.pop_front()?;
        self.forget(&item);
        Some(item)
    }

    /// Removes from the tail.
    pub fn pop_back(&mut self) -> Option<Bytes> {
        let item = self.items.pop_back()?;
        self.forget(&item);
        Some(item)
    }

    /// Replaces the item at `index`; returns the old one, or `None` if out of range.
    pub fn set(&mut self, index: usize, item: Bytes) -> Option<Bytes> {
        let slot = self.items.get_mut(index)?;
        let old = std::mem::replace(slot, item);
        self.bytes = self.bytes + self.items[index].len() - old.len();
        Some(old)
    }

    /// Inserts `item` before position `index` (`index == len` appends).
    pub fn insert(&mut self, index: usize, item: Bytes) {
        self.bytes += ELEMENT_OVERHEAD_BYTES + item.len();
        self.items.insert(index, item);
    }

    /// Removes the item at `index`.
    pub fn remove(&mut self, index: usize) -> Option<Bytes> {
        let item = self.items.remove(index)?;
        self.forget(&item);
        Some(item)
    }

    /// Keeps only items `start..end` (clamped).
    pub fn retain_range(&mut self, start: usize, end: usize) {
        let end = end.min(self.items.len());
        let start = start.min(end);
        let dropped: usize = self
            .items
            .iter()
            .take(start)
            .chain(self.items.iter().skip(end))
            .map(|item| ELEMENT_OVERHEAD_BYTES + item.len())
            .sum();
        self.items.truncate(end);
        self.items.drain(..start);
        self.bytes = self.bytes.saturating_sub(dropped);
    }

    /// Keeps the items `keep` says yes to, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(&Bytes) -> bool) {
        let mut dropped = 0;
        self.items.retain(|item| {
            let kept = keep(item);
            if !kept {
                dropped += ELEMENT_OVERHEAD_BYTES + item.len();
            }
            kept
        });
        self.bytes = self.bytes.saturating_sub(dropped);
    }

    /// The items from head to tail.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Bytes> + ExactSizeIterator {
        self.items.iter()
    }

    /// The items at positions `start..end` (clamped), found in O(1) whatever `start` is.
    pub fn range(
        &self,
        start: usize,
        end: usize,
    ) -> impl DoubleEndedIterator<Item = &Bytes> + ExactSizeIterator {
        let end = end.min(self.items.len());
        self.items.range(start.min(end)..end)
    }

    fn forget(&mut self, item: &Bytes) {
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES + item.len());
    }
}

/// A set.
///
/// Small sets of integers keep them sorted by value in a vector (Redis' intset: binary
/// search, and replies in ascending order as Redis gives them); any other set is a
/// `Table`.
#[derive(Debug, Clone, Default)]
pub struct SetValue {
    ints: Vec<(i64, Bytes)>,
    table: Table<Bytes>,
    bytes: usize,
    large: bool,
}

impl SetValue {
    /// Number of members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ints.len() + self.table.len()
    }

    /// True without members.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it is in Redis' compact (intset) encoding.
    #[must_use]
    pub fn is_compact(&self) -> bool {
        !self.large
    }

    /// Whether `member` is present.
    #[must_use]
    pub fn contains(&self, member: &[u8]) -> bool {
        if self.large {
            self.table.get(member).is_some()
        } else {
            intset_value(member).is_some_and(|value| self.int_position(value).is_ok())
        }
    }

    fn int_position(&self, value: i64) -> Result<usize, usize> {
        self.ints.binary_search_by_key(&value, |(v, _)| *v)
    }

    /// Adds `member`; false if it was present.
    pub fn insert(&mut self, member: Bytes) -> bool {
        if !self.large {
            match intset_value(&member) {
                Some(value) => {
                    let Err(at) = self.int_position(value) else {
                        return false;
                    };
                    self.bytes += ELEMENT_OVERHEAD_BYTES + member.len();
                    self.ints.insert(at, (value, member));
                    if self.ints.len() > limits::intset_entries() {
                        self.convert();
                    }
                    return true;
                }
                // Not an integer, so not present: the set becomes a table.
                None => self.convert(),
            }
        }
        if self.table.get(&member).is_some() {
            return false;
        }
        self.bytes += ELEMENT_OVERHEAD_BYTES + member.len();
        self.table.insert_new(member);
        true
    }

    /// Adds `member`, copying its bytes only when it is new; false if it was present.
    pub fn add(&mut self, member: &[u8]) -> bool {
        !self.contains(member) && self.insert(Bytes::copy_from_slice(member))
    }

    /// Removes `member`; false if it was absent.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let taken = if self.large {
            self.table.remove(member)
        } else {
            intset_value(member)
                .and_then(|value| self.int_position(value).ok())
                .map(|at| self.ints.remove(at).1)
        };
        match taken {
            Some(taken) => {
                self.forget(&taken);
                true
            }
            None => false,
        }
    }

    /// Every member: ascending integers while compact, no particular order after.
    pub fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.ints
            .iter()
            .map(|(_, member)| member)
            .chain(self.table.iter())
    }

    /// A uniformly chosen member (`below(n)` picks in `0..n`).
    pub fn random(&self, mut below: impl FnMut(usize) -> usize) -> Option<&Bytes> {
        if self.large {
            self.table.random(below)
        } else if self.ints.is_empty() {
            None
        } else {
            self.ints
                .get(below(self.ints.len()))
                .map(|(_, member)| member)
        }
    }

    /// Removes and returns a uniformly chosen member.
    pub fn pop_random(&mut self, mut below: impl FnMut(usize) -> usize) -> Option<Bytes> {
        let taken = if self.large {
            self.table.remove_random(below)?
        } else if self.ints.is_empty() {
            return None;
        } else {
            let at = below(self.ints.len());
            self.ints.remove(at.min(self.ints.len() - 1)).1
        };
        self.forget(&taken);
        Some(taken)
    }

    /// One `SSCAN` step: calls `f` on some members and returns the next cursor (0: done).
    /// A compact set is returned whole whatever the cursor, as Redis does.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a Bytes)) -> u64 {
        if self.large {
            self.table.scan(cursor, count, f)
        } else {
            for (_, member) in &self.ints {
                f(member);
            }
            0
        }
    }

    fn forget(&mut self, member: &Bytes) {
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES + member.len());
    }

    fn convert(&mut self) {
        self.large = true;
        for (_, member) in std::mem::take(&mut self.ints) {
            self.table.insert_new(member);
        }
    }
}

/// The value Redis would keep `member` as in an intset: the canonical decimal form of an
/// `i64` (`string2ll`: no sign but `-`, no leading zero, no `-0`).
pub(crate) fn intset_value(member: &[u8]) -> Option<i64> {
    let (negative, digits) = match member.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, member),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(digit - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}

/// A score as ordered inside a sorted set: total order, with -0 and +0 equal (as Redis
/// compares them), NaN never stored.
#[derive(Debug, Clone, Copy)]
struct OrderedScore(f64);

impl PartialEq for OrderedScore {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for OrderedScore {}

impl PartialOrd for OrderedScore {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedScore {
    fn cmp(&self, other: &Self) -> Ordering {
        // Adding 0.0 turns -0.0 into +0.0; NaN never gets here.
        (self.0 + 0.0).total_cmp(&(other.0 + 0.0))
    }
}

/// A sorted set: members ordered by score, ties by member bytes.
///
/// A `Table` maps members to scores (lookups, random members, scans) and a B-tree keeps
/// the order. While compact (Redis' listpack) a score of -0 is kept as 0, as the listpack's
/// text form does; a large set keeps -0, as Redis' skiplist does.
#[derive(Debug, Clone, Default)]
pub struct SortedSetValue {
    scores: Table<(Bytes, f64)>,
    order: BTreeSet<(OrderedScore, Bytes)>,
    bytes: usize,
    large: bool,
}

impl SortedSetValue {
    /// An empty sorted set in the large (skiplist) encoding, as Redis creates the
    /// destination of a store that will exceed the compact limits.
    #[must_use]
    pub fn new_large() -> Self {
        Self {
            large: true,
            ..Self::default()
        }
    }

    /// Number of members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True without members.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it is in Redis' compact (listpack) encoding.
    #[must_use]
    pub fn is_compact(&self) -> bool {
        !self.large
    }

    /// The score of `member`.
    #[must_use]
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).map(|(_, score)| *score)
    }

    /// Sets `member`'s score (NaN is the caller's to refuse); returns the previous score.
    /// A new member past the compact limits converts the set first, as Redis does.
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan(), "NaN scores are refused before insert");
        if let Some((_, slot)) = self.scores.get_mut(&member) {
            let old = *slot;
            let score = if self.large { score } else { score + 0.0 };
            *slot = score;
            self.order.remove(&(OrderedScore(old), member.clone()));
            self.order.insert((OrderedScore(score), member));
            return Some(old);
        }
        if !self.large
            && (self.scores.len() + 1 > limits::zset_entries()
                || member.len() > limits::zset_value())
        {
            self.large = true;
        }
        let score = if self.large { score } else { score + 0.0 };
        self.bytes += ELEMENT_OVERHEAD_BYTES * 2 + member.len();
        self.scores.insert_new((member.clone(), score));
        self.order.insert((OrderedScore(score), member));
        None
    }

    /// [`SortedSetValue::insert`], copying the member's bytes only when it is new.
    pub fn set_score(&mut self, member: &[u8], score: f64) -> Option<f64> {
        let stored = self.scores.get(member).map(|(stored, _)| stored.clone());
        let member = stored.unwrap_or_else(|| Bytes::copy_from_slice(member));
        self.insert(member, score)
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (member, score) = self.scores.remove(member)?;
        self.order.remove(&(OrderedScore(score), member.clone()));
        self.forget(&member);
        Some(score)
    }

    fn forget(&mut self, member: &Bytes) {
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES * 2 + member.len());
    }

    /// Removes and returns the lowest (or, `last`, highest) member and its score.
    pub fn pop(&mut self, last: bool) -> Option<(Bytes, f64)> {
        let (score, member) = if last {
            self.order.pop_last()?
        } else {
            self.order.pop_first()?
        };
        self.scores.remove(&member);
        self.forget(&member);
        Some((member, score.0))
    }

    /// Members with their scores, lowest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> {
        self.order.iter().map(|(score, member)| (member, score.0))
    }

    /// A uniformly chosen member and its score (`below(n)` picks in `0..n`).
    pub fn random(&self, below: impl FnMut(usize) -> usize) -> Option<(&Bytes, f64)> {
        self.scores
            .random(below)
            .map(|(member, score)| (member, *score))
    }

    /// One `ZSCAN` step: calls `f` on some members with their scores and returns the next
    /// cursor (0: done). A compact set is returned whole, lowest first, whatever the
    /// cursor, as Redis does.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a Bytes, f64)) -> u64 {
        if self.large {
            self.scores
                .scan(cursor, count, |(member, score)| f(member, *score))
        } else {
            for (member, score) in self.iter() {
                f(member, score);
            }
            0
        }
    }

    /// Redis' `zsetConvert(…, OBJ_ENCODING_SKIPLIST)`: the large encoding from now on,
    /// whatever the size — what SORT does to a sorted set it reads.
    pub fn make_large(&mut self) {
        self.large = true;
    }

    /// Redis' `zsetConvertToListpackIfNeeded`: back to the compact encoding when the set
    /// fits its limits (scores of -0 become 0 then).
    pub fn compact_if_small(&mut self) {
        if !self.large
            || self.len() > limits::zset_entries()
            || self
                .order
                .iter()
                .any(|(_, member)| member.len() > limits::zset_value())
        {
            return;
        }
        self.large = false;
        let negative_zeros: Vec<Bytes> = self
            .iter()
            .filter(|(_, score)| *score == 0.0 && score.is_sign_negative())
            .map(|(member, _)| member.clone())
            .collect();
        for member in negative_zeros {
            self.insert(member, 0.0);
        }
    }

    /// The members from the first one whose (score, member) is not below `min` on, in
    /// order: the start of a score range.
    fn starting_at_score(&self, min: Bound<f64>) -> impl Iterator<Item = &(OrderedScore, Bytes)> {
        let low = match min {
            // The empty member sorts before every member of that score.
            Bound::Included(s) | Bound::Excluded(s) => {
                Bound::Included((OrderedScore(s), Bytes::new()))
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        let skip_equal = match min {
            Bound::Excluded(s) => Some(OrderedScore(s)),
            _ => None,
        };
        self.order
            .range((low, Bound::Unbounded))
            .skip_while(move |(score, _)| skip_equal.is_some_and(|m| *score == m))
    }

    /// Members whose score lies within the bounds, lowest first.
    pub fn range_by_score(
        &self,
        min: Bound<f64>,
        max: Bound<f64>,
    ) -> impl Iterator<Item = (&Bytes, f64)> {
        let empty = score_range_is_empty(min, max);
        let below_max = move |score: OrderedScore| match max {
            Bound::Unbounded => true,
            Bound::Included(m) => score <= OrderedScore(m),
            Bound::Excluded(m) => score < OrderedScore(m),
        };
        (!empty)
            .then(|| self.starting_at_score(min))
            .into_iter()
            .flatten()
            .take_while(move |(score, _)| below_max(*score))
            .map(|(score, member)| (member, score.0))
    }

    /// Members whose score lies within the bounds, highest first.
    pub fn rev_range_by_score(
        &self,
        min: Bound<f64>,
        max: Bound<f64>,
    ) -> impl Iterator<Item = (&Bytes, f64)> {
        let above_min = move |score: OrderedScore| match min {
            Bound::Unbounded => true,
            Bound::Included(m) => score >= OrderedScore(m),
            Bound::Excluded(m) => score > OrderedScore(m),
        };
        // The empty member sorts before every member of its score.
        let high = match max {
            Bound::Included(s) if s < f64::INFINITY => {
                Bound::Excluded((OrderedScore(next_up(s)), Bytes::new()))
            }
            Bound::Included(_) | Bound::Unbounded => Bound::Unbounded,
            Bound::Excluded(s) => Bound::Excluded((OrderedScore(s), Bytes::new())),
        };
        (!score_range_is_empty(min, max))
            .then(|| self.order.range((Bound::Unbounded, high)).rev())
            .into_iter()
            .flatten()
            .take_while(move |(score, _)| above_min(*score))
            .map(|(score, member)| (member, score.0))
    }

    /// How many members have a score within the bounds.
    #[must_use]
    pub fn count_by_score(&self, min: Bound<f64>, max: Bound<f64>) -> usize {
        self.range_by_score(min, max).count()
    }

    /// The 0-based rank of `member`, lowest score first.
    #[must_use]
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        let key = (OrderedScore(score), Bytes::copy_from_slice(member));
        Some(self.order.range(..key).count())
    }
}

/// Redis' test for a score range that can hold nothing (`min > max`, or equal bounds with
/// one excluded).
fn score_range_is_empty(min: Bound<f64>, max: Bound<f64>) -> bool {
    match (min, max) {
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a > b
                || (a == b
                    && !(matches!(min, Bound::Included(_)) && matches!(max, Bound::Included(_))))
        }
        _ => false,
    }
}

/// The least double above `value` (finite or -inf); `f64::next_up` needs Rust 1.86.
fn next_up(value: f64) -> f64 {
    if value == 0.0 {
        return f64::from_bits(1);
    }
    let bits = value.to_bits();
    if value > 0.0 {
        f64::from_bits(bits + 1)
    } else {
        f64::from_bits(bits - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// The elements of a structure in a fixed order (hash and set order is random).
    fn canonical(structure: &Structure) -> Vec<Vec<u8>> {
        let mut elements: Vec<Vec<u8>> = match structure {
            Structure::Hash(h) => h
                .iter()
                .map(|(f, v)| [&f[..], b"=", &v[..]].concat())
                .collect(),
            Structure::List(l) => return l.iter().map(|i| i.to_vec()).collect(),
            Structure::Set(s) => s.iter().map(|m| m.to_vec()).collect(),
            Structure::SortedSet(z) => {
                return z
                    .iter()
                    .map(|(m, s)| [&m[..], &s.to_le_bytes()[..]].concat())
                    .collect();
            }
            Structure::Stream(x) => {
                return x
                    .range(crate::stream::StreamId::MIN, crate::stream::StreamId::MAX)
                    .map(|(id, _)| id.to_string().into_bytes())
                    .collect();
            }
        };
        elements.sort();
        elements
    }

    // Proves every kind survives encode → decode, and malformed bytes are refused.
    #[test]
    fn encoding_round_trips_and_refuses_garbage() {
        let mut hash = HashValue::default();
        hash.insert(b("f"), b("v"));
        hash.insert(b("g"), b(""));
        let mut list = ListValue::default();
        list.push_back(b("a"));
        list.push_front(b("b"));
        let mut set = SetValue::default();
        set.insert(b("1"));
        set.insert(b("x"));
        let mut zset = SortedSetValue::default();
        zset.insert(b("m"), 1.5);
        zset.insert(b("n"), f64::NEG_INFINITY);
        for structure in [
            Structure::Hash(hash),
            Structure::List(list),
            Structure::Set(set),
            Structure::SortedSet(zset),
        ] {
            let bytes = structure.encode();
            let back = Structure::decode(&bytes).expect("decodes");
            assert_eq!(back.kind(), structure.kind());
            assert_eq!(canonical(&back), canonical(&structure));
            assert_eq!(back.heap_bytes(), structure.heap_bytes());
            for cut in 0..bytes.len() {
                assert!(Structure::decode(&bytes[..cut]).is_err());
            }
        }
        assert!(Structure::decode(&[9, 0]).is_err());
        assert!(Structure::decode(&[2, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err());
    }

    // Proves byte accounting returns to zero when everything is removed again.
    #[test]
    fn heap_bytes_track_changes() {
        let mut hash = HashValue::default();
        hash.insert(b("field"), b("value"));
        hash.insert(b("field"), b("a much longer value"));
        hash.remove(b"field");
        assert_eq!(hash.bytes, 0);
        let mut list = ListValue::default();
        for i in 0..10 {
            list.push_back(Bytes::from(vec![0u8; i]));
        }
        list.set(3, b("xyz"));
        list.retain_range(2, 8);
        list.retain(|item| item.len() != 4);
        while list.pop_front().is_some() {}
        assert_eq!(list.bytes, 0);
        let mut zset = SortedSetValue::default();
        zset.insert(b("a"), 1.0);
        zset.insert(b("a"), 2.0);
        zset.remove(b"a");
        assert_eq!(zset.bytes, 0);
        assert!(zset.order.is_empty());
    }

    // Proves list ranges are clamped to the list, in head-to-tail order.
    #[test]
    fn list_ranges_clamp() {
        let mut list = ListValue::default();
        for item in ["a", "b", "c", "d"] {
            list.push_back(b(item));
        }
        let texts = |start, end| -> Vec<Bytes> { list.range(start, end).cloned().collect() };
        assert_eq!(texts(1, 3), [b("b"), b("c")]);
        assert_eq!(texts(2, 100), [b("c"), b("d")]);
        assert!(texts(5, 9).is_empty());
        assert!(texts(3, 1).is_empty());
    }

    // Proves score ranges honour inclusive and exclusive bounds, ties ordered by member.
    #[test]
    fn score_ranges() {
        let mut zset = SortedSetValue::default();
        for (member, score) in [("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 3.0), ("z", -0.0)] {
            zset.insert(b(member), score);
        }
        let names = |min, max| -> Vec<String> {
            let forward: Vec<String> = zset
                .range_by_score(min, max)
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect();
            let mut backward: Vec<String> = zset
                .rev_range_by_score(min, max)
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect();
            backward.reverse();
            assert_eq!(forward, backward, "{min:?} {max:?}");
            assert_eq!(zset.count_by_score(min, max), forward.len());
            forward
        };
        assert_eq!(
            names(Bound::Included(2.0), Bound::Included(2.0)),
            ["b", "c"]
        );
        assert_eq!(
            names(Bound::Unbounded, Bound::Included(2.0)),
            ["z", "a", "b", "c"]
        );
        assert_eq!(names(Bound::Unbounded, Bound::Excluded(2.0)), ["z", "a"]);
        assert_eq!(
            names(Bound::Included(-0.0), Bound::Included(1.0)),
            ["z", "a"]
        );
        assert_eq!(
            names(
                Bound::Included(f64::NEG_INFINITY),
                Bound::Included(f64::INFINITY)
            )
            .len(),
            5
        );
        assert!(names(Bound::Excluded(f64::INFINITY), Bound::Unbounded).is_empty());
        assert_eq!(
            names(Bound::Excluded(1.0), Bound::Excluded(3.0)),
            ["b", "c"]
        );
        assert_eq!(names(Bound::Excluded(2.0), Bound::Unbounded), ["d"]);
        assert_eq!(names(Bound::Included(0.0), Bound::Included(0.0)), ["z"]);
        assert!(names(Bound::Included(3.0), Bound::Included(1.0)).is_empty());
        assert!(names(Bound::Excluded(2.0), Bound::Included(2.0)).is_empty());
        assert_eq!(zset.rank(b"c"), Some(3));
        assert!(
            zset.score(b"z")
                .is_some_and(|s| s == 0.0 && s.is_sign_positive())
        );
    }

    // Proves OBJECT ENCODING conversions happen at Redis 7.0's thresholds and stick.
    #[test]
    fn encodings_convert_once() {
        let mut set = SetValue::default();
        set.insert(b("12"));
        assert_eq!(Structure::Set(set.clone()).encoding_name(), "intset");
        set.insert(b("012"));
        set.remove(b"012");
        assert_eq!(Structure::Set(set).encoding_name(), "hashtable");
        let mut hash = HashValue::default();
        for i in 0..=HASH_LISTPACK_ENTRIES_MAX {
            hash.insert(Bytes::from(i.to_string()), b("v"));
        }
        assert_eq!(Structure::Hash(hash).encoding_name(), "hashtable");
    }

    // Proves small hashes keep insertion order through replace and delete (as a listpack),
    // and every form answers the same after conversion.
    #[test]
    fn compact_hash_keeps_insertion_order() {
        let mut hash = HashValue::default();
        for field in ["c", "a", "b", "d"] {
            hash.insert(b(field), b("1"));
        }
        hash.insert(b("a"), b("2"));
        hash.remove(b"b");
        let order: Vec<&[u8]> = hash.iter().map(|(f, _)| &f[..]).collect();
        assert_eq!(order, [&b"c"[..], b"a", b"d"]);
        assert_eq!(hash.get(b"a"), Some(&b("2")));
        hash.insert(
            b("long"),
            Bytes::from(vec![b'x'; LISTPACK_VALUE_BYTES_MAX + 1]),
        );
        assert!(!hash.is_compact());
        assert_eq!(hash.len(), 4);
        assert_eq!(hash.get(b"a"), Some(&b("2")));
        assert_eq!(hash.remove(b"c"), Some(b("1")));
        assert!(!hash.contains(b"c"));
    }

    // Proves intsets answer members in ascending numeric order and only canonical i64
    // texts stay in one.
    #[test]
    fn intset_orders_by_value_and_accepts_canonical_integers() {
        let mut set = SetValue::default();
        for member in [
            "10",
            "-5",
            "3",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert!(set.insert(b(member)));
        }
        assert!(!set.insert(b("3")));
        let order: Vec<&[u8]> = set.iter().map(|m| &m[..]).collect();
        assert_eq!(
            order,
            [
                &b"-9223372036854775808"[..],
                b"-5",
                b"3",
                b"10",
                b"9223372036854775807"
            ]
        );
        assert!(set.is_compact());
        assert!(set.contains(b"-5") && !set.contains(b"-6") && !set.contains(b"x"));
        for text in ["-0", "+1", "01", "", "-", "9223372036854775808", "1 "] {
            assert_eq!(intset_value(text.as_bytes()), None, "{text:?}");
        }
        assert_eq!(intset_value(b"0"), Some(0));
        set.insert(b("x"));
        assert!(!set.is_compact());
        assert!(set.contains(b"-5") && set.contains(b"x"));
        assert!(set.remove(b"-5") && !set.remove(b"-5"));
    }

    /// A small deterministic generator for the tests' random picks.
    fn picker(seed: u64) -> impl FnMut(usize) -> usize {
        let mut state = seed | 1;
        move |bound| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % (bound.max(1) as u64)).unwrap_or(0)
        }
    }

    // Proves random picks only return members, reach every member, and popping at random
    // empties the set with its byte count back at zero (compact and large forms).
    #[test]
    fn random_members_and_pops() {
        for size in [5usize, 2000] {
            let mut set = SetValue::default();
            for i in 0..size {
                set.insert(Bytes::from(format!("m{i}")));
            }
            let mut seen = std::collections::HashSet::new();
            let mut below = picker(7);
            for _ in 0..size * 20 {
                let member = set.random(&mut below).expect("non-empty").clone();
                assert!(set.contains(&member));
                seen.insert(member);
            }
            assert_eq!(seen.len(), size);
            let mut popped = std::collections::HashSet::new();
            while let Some(member) = set.pop_random(&mut below) {
                assert!(popped.insert(member));
            }
            assert_eq!(popped.len(), size);
            assert_eq!(set.bytes, 0);
            assert!(set.random(&mut below).is_none());
        }
        let mut hash = HashValue::default();
        for i in 0..300 {
            hash.insert(Bytes::from(format!("f{i}")), Bytes::from(format!("v{i}")));
        }
        let mut below = picker(3);
        for _ in 0..100 {
            let (field, value) = hash.random(&mut below).expect("non-empty");
            assert_eq!(hash.get(field), Some(value));
        }
    }

    // Proves a large table shrinks when mostly emptied, so random picks stay cheap.
    #[test]
    fn sparse_tables_shrink() {
        let mut set = SetValue::default();
        for i in 0..10_000 {
            set.insert(Bytes::from(format!("m{i}")));
        }
        for i in 0..9_990 {
            set.remove(format!("m{i}").as_bytes());
        }
        assert!(set.table.inner.num_buckets() <= 256);
        assert_eq!(set.len(), 10);
    }

    // Proves a scan returns every element present throughout exactly once while the table
    // keeps its layout, at least once when writes rehash it between steps, and ends.
    #[test]
    fn scans_cover_elements_present_throughout() {
        let mut hash = HashValue::default();
        for i in 0..1000 {
            hash.insert(Bytes::from(format!("f{i}")), b("v"));
        }
        let mut seen = Vec::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = hash.scan(cursor, 10, |field, _| seen.push(field.clone()));
            steps += 1;
            if cursor == 0 {
                break;
            }
        }
        assert!(steps > 10);
        seen.sort();
        let before = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), before, "no duplicates without a rehash");
        assert_eq!(seen.len(), 1000);

        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut next = 1000;
        for _ in 0..100_000 {
            cursor = hash.scan(cursor, 10, |field, _| {
                seen.insert(field.clone());
            });
            if cursor == 0 {
                break;
            }
            // Grow the table in the first steps (rehashes), then churn other fields at a
            // bounded size.
            let added = if next < 3000 { 400 } else { 20 };
            for _ in 0..added {
                hash.insert(Bytes::from(format!("c{next}")), b("v"));
                next += 1;
            }
            if next >= 3000 {
                for old in next - 40..next - 20 {
                    hash.remove(format!("c{old}").as_bytes());
                }
            }
        }
        assert_eq!(cursor, 0, "the scan ends");
        for i in 0..1000 {
            assert!(seen.contains(format!("f{i}").as_bytes()), "f{i}");
        }
    }

    // Proves a compact sorted set keeps -0 as 0 and a large one keeps -0, converting
    // back normalises it, and pops take the ends.
    #[test]
    fn sorted_set_zero_sign_and_pops() {
        let mut zset = SortedSetValue::default();
        zset.insert(b("a"), -0.0);
        assert!(zset.score(b"a").is_some_and(|s| s.is_sign_positive()));
        let mut large = SortedSetValue::new_large();
        large.insert(b("a"), -0.0);
        large.insert(b("b"), 1.0);
        assert!(large.score(b"a").is_some_and(|s| s.is_sign_negative()));
        assert!(!large.is_compact());
        large.compact_if_small();
        assert!(large.is_compact());
        assert!(large.score(b"a").is_some_and(|s| s.is_sign_positive()));
        assert_eq!(large.pop(true), Some((b("b"), 1.0)));
        assert_eq!(large.pop(false).map(|(m, _)| m), Some(b("a")));
        assert_eq!(large.bytes, 0);
        assert!(large.pop(false).is_none());
        for i in 0..=ZSET_LISTPACK_ENTRIES_MAX {
            zset.insert(Bytes::from(format!("m{i}")), 1.0);
        }
        assert!(!zset.is_compact());
    }
}
