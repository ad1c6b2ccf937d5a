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
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

/// The hasher of every structure's table (as the container's).
type Hasher = foldhash::fast::RandomState;
type HashMap<K, V> = hashbrown::HashMap<K, V, Hasher>;
type HashSet<K> = hashbrown::HashSet<K, Hasher>;
use parking_lot::{Mutex, MutexGuard};

/// Redis' `hash-max-listpack-entries`.
pub const HASH_LISTPACK_ENTRIES_MAX: usize = 128;
/// Redis' `hash-max-listpack-value` (also `zset-max-listpack-value`).
pub const LISTPACK_VALUE_BYTES_MAX: usize = 64;
/// Redis' `set-max-intset-entries`.
pub const INTSET_ENTRIES_MAX: usize = 512;
/// Redis' `zset-max-listpack-entries`.
pub const ZSET_LISTPACK_ENTRIES_MAX: usize = 128;

/// Estimated heap bytes per element beyond its own bytes (table slot or node, `Bytes`
/// headers, allocator rounding).
const ELEMENT_OVERHEAD_BYTES: usize = 48;

/// The four collection types.
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
        }
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
}

impl Structure {
    /// Which of the four it is.
    #[must_use]
    pub fn kind(&self) -> StructureKind {
        match self {
            Self::Hash(_) => StructureKind::Hash,
            Self::List(_) => StructureKind::List,
            Self::Set(_) => StructureKind::Set,
            Self::SortedSet(_) => StructureKind::SortedSet,
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
        }
    }

    /// Number of elements (fields, items, members).
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Self::Hash(h) => h.len(),
            Self::List(l) => l.len(),
            Self::Set(s) => s.len(),
            Self::SortedSet(z) => z.len(),
        }
    }

    /// True when it holds no element (Redis deletes such keys).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Estimated heap bytes.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::Hash(h) => h.bytes,
            Self::List(l) => l.bytes,
            Self::Set(s) => s.bytes,
            Self::SortedSet(z) => z.bytes,
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
        }
    }

    /// The bytes a store keeps: kind, element count, then each element length-prefixed
    /// (sorted-set scores as 8 little-endian bytes before the member).
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
pub struct DecodeError(&'static str);

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeError> {
        let byte = *self.bytes.get(self.at).ok_or(DecodeError("truncated"))?;
        self.at += 1;
        Ok(byte)
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
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

    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError("length"))?;
        let end = self.at.checked_add(len).ok_or(DecodeError("truncated"))?;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or(DecodeError("truncated"))?;
        self.at = end;
        Ok(Bytes::copy_from_slice(slice))
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

/// A hash: field → value.
#[derive(Debug, Clone, Default)]
pub struct HashValue {
    map: HashMap<Bytes, Bytes>,
    bytes: usize,
    large: bool,
}

impl HashValue {
    /// Number of fields.
    #[must_use]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True without fields.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The value of `field`.
    #[must_use]
    pub fn get(&self, field: &[u8]) -> Option<&Bytes> {
        self.map.get(field)
    }

    /// Whether `field` is present.
    #[must_use]
    pub fn contains(&self, field: &[u8]) -> bool {
        self.map.contains_key(field)
    }

    /// Sets `field` to `value`; returns the previous value.
    pub fn insert(&mut self, field: Bytes, value: Bytes) -> Option<Bytes> {
        if field.len() > LISTPACK_VALUE_BYTES_MAX || value.len() > LISTPACK_VALUE_BYTES_MAX {
            self.large = true;
        }
        if let Some(slot) = self.map.get_mut(&field[..]) {
            let added = value.len();
            let old = std::mem::replace(slot, value);
            self.bytes = self.bytes - old.len() + added;
            return Some(old);
        }
        self.bytes += ELEMENT_OVERHEAD_BYTES + field.len() + value.len();
        self.map.insert(field, value);
        if self.map.len() > HASH_LISTPACK_ENTRIES_MAX {
            self.large = true;
        }
        None
    }

    /// Removes `field`; returns its value.
    pub fn remove(&mut self, field: &[u8]) -> Option<Bytes> {
        let (key, value) = self.map.remove_entry(field)?;
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES + key.len() + value.len());
        Some(value)
    }

    /// Every field and value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.map.iter()
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

    fn forget(&mut self, item: &Bytes) {
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES + item.len());
    }
}

/// A set.
#[derive(Debug, Clone, Default)]
pub struct SetValue {
    members: HashSet<Bytes>,
    bytes: usize,
    large: bool,
}

impl SetValue {
    /// Number of members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True without members.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `member` is present.
    #[must_use]
    pub fn contains(&self, member: &[u8]) -> bool {
        self.members.contains(member)
    }

    /// Adds `member`; false if it was present.
    pub fn insert(&mut self, member: Bytes) -> bool {
        if self.members.contains(&member[..]) {
            return false;
        }
        if !self.large && (self.members.len() >= INTSET_ENTRIES_MAX || !is_intset_member(&member)) {
            self.large = true;
        }
        self.bytes += ELEMENT_OVERHEAD_BYTES + member.len();
        self.members.insert(member);
        true
    }

    /// Removes `member`; false if it was absent.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.members.take(member) {
            Some(taken) => {
                self.bytes = self
                    .bytes
                    .saturating_sub(ELEMENT_OVERHEAD_BYTES + taken.len());
                true
            }
            None => false,
        }
    }

    /// Every member, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.members.iter()
    }
}

/// Whether Redis would keep `member` in an intset: the canonical decimal form of an `i64`.
fn is_intset_member(member: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(member) else {
        return false;
    };
    match text.parse::<i64>() {
        Ok(value) => value.to_string() == text,
        Err(_) => false,
    }
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
#[derive(Debug, Clone, Default)]
pub struct SortedSetValue {
    scores: HashMap<Bytes, f64>,
    order: BTreeSet<(OrderedScore, Bytes)>,
    bytes: usize,
    large: bool,
}

impl SortedSetValue {
    /// Number of members.
    #[must_use]
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// True without members.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`.
    #[must_use]
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score (NaN is the caller's to refuse); returns the previous score.
    /// A score of -0 is kept as 0, as Redis' compact encoding does.
    pub fn insert(&mut self, member: Bytes, score: f64) -> Option<f64> {
        debug_assert!(!score.is_nan(), "NaN scores are refused before insert");
        let score = score + 0.0;
        if member.len() > LISTPACK_VALUE_BYTES_MAX {
            self.large = true;
        }
        let previous = self.scores.insert(member.clone(), score);
        if let Some(old) = previous {
            self.order.remove(&(OrderedScore(old), member.clone()));
        } else {
            self.bytes += ELEMENT_OVERHEAD_BYTES * 2 + member.len();
            if self.scores.len() > ZSET_LISTPACK_ENTRIES_MAX {
                self.large = true;
            }
        }
        self.order.insert((OrderedScore(score), member));
        previous
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (member, score) = self.scores.remove_entry(member)?;
        self.order.remove(&(OrderedScore(score), member.clone()));
        self.bytes = self
            .bytes
            .saturating_sub(ELEMENT_OVERHEAD_BYTES * 2 + member.len());
        Some(score)
    }

    /// Members with their scores, lowest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> {
        self.order.iter().map(|(score, member)| (member, score.0))
    }

    /// Members whose score lies within the bounds, lowest first.
    #[must_use]
    pub fn range_by_score(&self, min: Bound<f64>, max: Bound<f64>) -> Vec<(Bytes, f64)> {
        let empty = match (min, max) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a > b
                    || (a == b
                        && !(matches!(min, Bound::Included(_))
                            && matches!(max, Bound::Included(_))))
            }
            _ => false,
        };
        let low = match min {
            _ if empty => Bound::Unbounded,
            Bound::Included(s) => Bound::Included((OrderedScore(s), Bytes::new())),
            Bound::Excluded(s) => Bound::Excluded((OrderedScore(s), Bytes::new())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let (min_score, min_excluded) = match min {
            Bound::Excluded(s) => (Some(s), true),
            Bound::Included(s) => (Some(s), false),
            Bound::Unbounded => (None, false),
        };
        let (max_score, max_excluded) = match max {
            Bound::Excluded(s) => (Some(s), true),
            Bound::Included(s) => (Some(s), false),
            Bound::Unbounded => (None, false),
        };
        let iter = if empty {
            None
        } else {
            // The low bound with an empty member sorts before every member of that score, so
            // an excluded minimum is checked per element below.
            let low = match low {
                Bound::Excluded(key) => Bound::Included(key),
                other => other,
            };
            Some(self.order.range((low, Bound::Unbounded)))
        };
        iter.into_iter()
            .flatten()
            .skip_while(move |(score, _)| {
                min_excluded && min_score.is_some_and(|m| OrderedScore(score.0) == OrderedScore(m))
            })
            .take_while(move |(score, _)| match max_score {
                None => true,
                Some(m) => {
                    let ord = score.cmp(&OrderedScore(m));
                    ord == Ordering::Less || (ord == Ordering::Equal && !max_excluded)
                }
            })
            .map(|(score, member)| (member.clone(), score.0))
            .collect()
    }

    /// The 0-based rank of `member`, lowest score first.
    #[must_use]
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = *self.scores.get(member)?;
        let key = (OrderedScore(score), Bytes::copy_from_slice(member));
        Some(self.order.range(..key).count())
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

    // Proves score ranges honour inclusive and exclusive bounds, ties ordered by member.
    #[test]
    fn score_ranges() {
        let mut zset = SortedSetValue::default();
        for (member, score) in [("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 3.0), ("z", -0.0)] {
            zset.insert(b(member), score);
        }
        let names = |min, max| -> Vec<String> {
            zset.range_by_score(min, max)
                .iter()
                .map(|(m, _)| String::from_utf8_lossy(m).into_owned())
                .collect()
        };
        assert_eq!(
            names(Bound::Included(2.0), Bound::Included(2.0)),
            ["b", "c"]
        );
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
}
