//! The packed cache entry: one heap allocation holding a small header, the optional
//! expiration fields, the key bytes and the value bytes.
//!
//! Why by hand: an entry made of two `Bytes` plus a metadata struct costs ~220 bytes of
//! overhead; this layout costs a 24-byte header for an immortal entry, plus the allocator's
//! rounding. Entries are immutable once published (a write replaces the whole entry), except
//! for the reference count and, for max-idle entries, the last-used time, which are atomics.
//! That is what lets readers hand out zero-copy views after dropping the segment lock.
//!
//! Layout (all fields 8-byte aligned):
//! ```text
//! header (24 B) | created_ms (8, if mortal) | lifespan_ms (8, if lifespan)
//!               | max_idle_ms (8) + last_used_ms (8, if max-idle)
//!               | user flags (8, if any) | structure pointer + charge (16, if a structure)
//!               | key | value
//! ```
//!
//! A structure entry (a Redis hash, list, set or sorted set) has an empty value; it holds an
//! `Arc` of a shared [`StructureCell`] instead, dropped with the entry's last handle.

use std::alloc::{self, GlobalAlloc, Layout, System};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use std::sync::Arc;

use bytes::Bytes;

use crate::structure::StructureCell;

const HAS_LIFESPAN: u8 = 1;
const HAS_MAX_IDLE: u8 = 2;
/// The entry carries client flags (memcached's 32-bit flags).
const HAS_USER_FLAGS: u8 = 4;
/// The entry's value is a structure.
const IS_STRUCTURE: u8 = 8;
/// The entry's bytes were edited in place (appended to, overwritten in part) rather than
/// written whole: Redis reports such strings as `raw` whatever their length. A hint only,
/// costing no bytes; stores do not keep it (Redis re-encodes strings when it loads them).
const EDITED: u8 = 16;
const MORTAL: u8 = HAS_LIFESPAN | HAS_MAX_IDLE;

#[repr(C)]
struct Header {
    refs: AtomicU32,
    key_len: u32,
    value_len: u32,
    flags: u8,
    _padding: [u8; 3],
    version: u64,
}

const HEADER_BYTES: usize = std::mem::size_of::<Header>();
const _: () = assert!(HEADER_BYTES == 24);
const ALIGN: usize = 8;

/// Expiration of one entry as stored: absent fields mean "never".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredExpiration {
    /// When the entry was written, if it is mortal.
    pub created_ms: Option<u64>,
    /// Lifespan from `created_ms`.
    pub lifespan_ms: Option<u64>,
    /// Maximum time between two accesses.
    pub max_idle_ms: Option<u64>,
}

impl StoredExpiration {
    /// An entry that never expires.
    pub const IMMORTAL: Self = Self {
        created_ms: None,
        lifespan_ms: None,
        max_idle_ms: None,
    };

    /// Expiration with the given lifespan and max idle, written at `now_ms`.
    #[must_use]
    pub fn new(now_ms: u64, lifespan_ms: Option<u64>, max_idle_ms: Option<u64>) -> Self {
        let mortal = lifespan_ms.is_some() || max_idle_ms.is_some();
        Self {
            created_ms: mortal.then_some(now_ms),
            lifespan_ms,
            max_idle_ms,
        }
    }

    /// True when neither a lifespan nor a max idle applies.
    #[must_use]
    pub fn is_immortal(&self) -> bool {
        self.lifespan_ms.is_none() && self.max_idle_ms.is_none()
    }

    /// The absolute time the lifespan ends, if any.
    #[must_use]
    pub fn lifespan_deadline_ms(&self) -> Option<u64> {
        Some(self.created_ms?.saturating_add(self.lifespan_ms?))
    }
}

/// The metadata of one entry, as reported by `get with metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryMetadata {
    /// Bumped by every write; unique within a cache.
    pub version: u64,
    /// Write time, for mortal entries.
    pub created_ms: Option<u64>,
    /// Last read or write time, for entries with a max idle.
    pub last_used_ms: Option<u64>,
    /// Lifespan, if the entry has one.
    pub lifespan_ms: Option<u64>,
    /// Max idle, if the entry has one.
    pub max_idle_ms: Option<u64>,
}

impl EntryMetadata {
    /// The absolute time after which the entry is gone unless it is touched again (for
    /// max-idle) — the earlier of the lifespan deadline and the idle deadline.
    #[must_use]
    pub fn expires_at_ms(&self) -> Option<u64> {
        let lifespan = self
            .created_ms
            .zip(self.lifespan_ms)
            .map(|(c, l)| c.saturating_add(l));
        let idle = self
            .last_used_ms
            .zip(self.max_idle_ms)
            .map(|(u, m)| u.saturating_add(m));
        match (lifespan, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A shared, immutable cache entry. Cloning bumps a reference count; no bytes are copied.
pub struct CacheEntry {
    ptr: NonNull<Header>,
}

// SAFETY: the entry's bytes are immutable after construction; the only mutable fields are
// atomics (`refs`, `last_used_ms`). Access from several threads is therefore data-race free.
unsafe impl Send for CacheEntry {}
// SAFETY: see `Send`.
unsafe impl Sync for CacheEntry {}

/// Bytes of the expiration fields.
fn expiration_bytes(flags: u8) -> usize {
    let mut extra = 0;
    if flags & MORTAL != 0 {
        extra += 8; // created_ms
    }
    if flags & HAS_LIFESPAN != 0 {
        extra += 8;
    }
    if flags & HAS_MAX_IDLE != 0 {
        extra += 16;
    }
    extra
}

fn extra_bytes(flags: u8) -> usize {
    let mut extra = expiration_bytes(flags);
    if flags & HAS_USER_FLAGS != 0 {
        extra += 8;
    }
    if flags & IS_STRUCTURE != 0 {
        extra += 16;
    }
    extra
}

/// What an entry holds besides its key and expiration.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// Bytes, with client flags (0 = none).
    Bytes(&'a [u8], u32),
    /// Bytes edited in place (see [`CacheEntry::is_edited`]), with client flags.
    EditedBytes(&'a [u8], u32),
    /// A shared structure, charged `heap_bytes` to the cache's memory.
    Structure(&'a Arc<StructureCell>, usize),
}

fn layout_for(flags: u8, key_len: usize, value_len: usize) -> Layout {
    let size = HEADER_BYTES + extra_bytes(flags) + key_len + value_len;
    // The size cannot exceed isize::MAX in practice: keys and values are bounded well below
    // it by the protocols' limits, and u32 lengths are checked by `CacheEntry::new`.
    match Layout::from_size_align(size, ALIGN) {
        Ok(layout) => layout,
        Err(_) => alloc::handle_alloc_error(Layout::new::<Header>()),
    }
}

/// Bytes the allocator is expected to hand out for a request of `size` bytes: glibc malloc
/// adds an 8-byte chunk header and rounds to 16, with a 32-byte minimum. Used to charge
/// memory-bounded caches for what an entry really costs.
#[must_use]
pub fn allocator_footprint(size: usize) -> usize {
    (size + 8).div_ceil(16).max(2) * 16
}

impl CacheEntry {
    /// Builds an entry. The version is set later by `CacheEntry::set_version_unshared`,
    /// under the segment lock, so that versions follow the order writes are applied in.
    ///
    /// # Panics
    /// If the key or value is 4 GiB or longer; callers enforce far smaller limits.
    #[must_use]
    pub fn new(key: &[u8], value: &[u8], expiration: StoredExpiration, last_used_ms: u64) -> Self {
        Self::with_payload(key, Payload::Bytes(value, 0), expiration, last_used_ms)
    }

    /// Builds an entry holding `payload` (bytes with client flags, or a structure).
    ///
    /// # Panics
    /// If the key or value is 4 GiB or longer; callers enforce far smaller limits.
    #[must_use]
    pub fn with_payload(
        key: &[u8],
        payload: Payload<'_>,
        expiration: StoredExpiration,
        last_used_ms: u64,
    ) -> Self {
        let (value, user_flags, structure, edited) = match payload {
            Payload::Bytes(value, flags) => (value, flags, None, false),
            Payload::EditedBytes(value, flags) => (value, flags, None, true),
            Payload::Structure(cell, charge) => (&[][..], 0, Some((cell, charge)), false),
        };
        let key_len = u32::try_from(key.len()).expect("key length is bounded by the caller");
        let value_len = u32::try_from(value.len()).expect("value length is bounded by the caller");
        let mut flags = 0u8;
        if expiration.lifespan_ms.is_some() {
            flags |= HAS_LIFESPAN;
        }
        if expiration.max_idle_ms.is_some() {
            flags |= HAS_MAX_IDLE;
        }
        if user_flags != 0 {
            flags |= HAS_USER_FLAGS;
        }
        if structure.is_some() {
            flags |= IS_STRUCTURE;
        }
        if edited {
            flags |= EDITED;
        }
        let layout = layout_for(flags, key.len(), value.len());
        // Entries come from the system allocator whatever the process's global one is: glibc
        // rounds a request to 16 bytes past an 8-byte header, where size-class allocators
        // (mimalloc, jemalloc) round a 546-byte entry to 640 — 80 bytes more per entry.
        // `allocator_footprint` charges what glibc hands out.
        // SAFETY: the layout has a non-zero size (at least the header).
        let raw = unsafe { System.alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Header>()) else {
            alloc::handle_alloc_error(layout)
        };
        // SAFETY: `raw` is a fresh allocation of `layout.size()` bytes aligned to 8, large
        // enough for the header, the extra fields selected by `flags`, the key and the value.
        unsafe {
            ptr.as_ptr().write(Header {
                refs: AtomicU32::new(1),
                key_len,
                value_len,
                flags,
                _padding: [0; 3],
                version: 0,
            });
            let mut cursor = raw.add(HEADER_BYTES);
            if flags & MORTAL != 0 {
                cursor
                    .cast::<u64>()
                    .write(expiration.created_ms.unwrap_or(last_used_ms));
                cursor = cursor.add(8);
            }
            if let Some(lifespan) = expiration.lifespan_ms {
                cursor.cast::<u64>().write(lifespan);
                cursor = cursor.add(8);
            }
            if let Some(max_idle) = expiration.max_idle_ms {
                cursor.cast::<u64>().write(max_idle);
                cursor
                    .add(8)
                    .cast::<AtomicU64>()
                    .write(AtomicU64::new(last_used_ms));
                cursor = cursor.add(16);
            }
            if user_flags != 0 {
                cursor.cast::<u64>().write(u64::from(user_flags));
                cursor = cursor.add(8);
            }
            if let Some((cell, charge)) = structure {
                // The entry owns this `Arc` (one strong count), dropped in `drop`.
                cursor.cast::<Arc<StructureCell>>().write(Arc::clone(cell));
                cursor.add(8).cast::<u64>().write(charge as u64);
                cursor = cursor.add(16);
            }
            std::ptr::copy_nonoverlapping(key.as_ptr(), cursor, key.len());
            std::ptr::copy_nonoverlapping(value.as_ptr(), cursor.add(key.len()), value.len());
        }
        Self { ptr }
    }

    fn header(&self) -> &Header {
        // SAFETY: `ptr` points to a live header while any `CacheEntry` for it exists.
        unsafe { self.ptr.as_ref() }
    }

    fn base(&self) -> *const u8 {
        self.ptr.as_ptr().cast::<u8>().cast_const()
    }

    fn field_u64(&self, offset: usize) -> u64 {
        // SAFETY: callers pass offsets of fields present according to `flags`; they lie
        // inside the allocation and are 8-byte aligned.
        unsafe { self.base().add(HEADER_BYTES + offset).cast::<u64>().read() }
    }

    fn last_used_atomic(&self) -> Option<&AtomicU64> {
        let flags = self.header().flags;
        if flags & HAS_MAX_IDLE == 0 {
            return None;
        }
        let offset = HEADER_BYTES + 8 + if flags & HAS_LIFESPAN != 0 { 8 } else { 0 } + 8;
        // SAFETY: present because HAS_MAX_IDLE is set; aligned, inside the allocation, and
        // initialized as an AtomicU64 by `new`.
        Some(unsafe { &*self.base().add(offset).cast::<AtomicU64>() })
    }

    fn data_offset(&self) -> usize {
        HEADER_BYTES + extra_bytes(self.header().flags)
    }

    /// Offset of the user flags field, then the structure fields, after the expiration.
    fn tail_offset(&self) -> usize {
        expiration_bytes(self.header().flags)
    }

    /// Client flags (memcached's); 0 when none were set.
    #[must_use]
    pub fn user_flags(&self) -> u32 {
        if self.header().flags & HAS_USER_FLAGS == 0 {
            return 0;
        }
        // Written from a u32 by `with_payload`.
        u32::try_from(self.field_u64(self.tail_offset())).unwrap_or(u32::MAX)
    }

    /// Whether the bytes were edited in place (APPEND, SETRANGE) rather than written whole.
    #[must_use]
    pub fn is_edited(&self) -> bool {
        self.header().flags & EDITED != 0
    }

    /// What this entry holds, to rebuild it with another expiration.
    #[must_use]
    pub fn payload(&self) -> Payload<'_> {
        match self.structure() {
            Some(cell) => Payload::Structure(cell, self.structure_charge()),
            None if self.is_edited() => Payload::EditedBytes(self.value(), self.user_flags()),
            None => Payload::Bytes(self.value(), self.user_flags()),
        }
    }

    fn structure_offset(&self) -> usize {
        let flags = self.header().flags;
        self.tail_offset() + if flags & HAS_USER_FLAGS != 0 { 8 } else { 0 }
    }

    /// The structure this entry holds, if its value is one (then [`CacheEntry::value`] is
    /// empty).
    #[must_use]
    pub fn structure(&self) -> Option<&Arc<StructureCell>> {
        if self.header().flags & IS_STRUCTURE == 0 {
            return None;
        }
        // SAFETY: IS_STRUCTURE says the field holds an `Arc` written by `with_payload` (8-byte
        // aligned, inside the allocation), owned by the entry until its last handle drops it.
        unsafe {
            let field = self.base().add(HEADER_BYTES + self.structure_offset());
            Some(&*field.cast::<Arc<StructureCell>>())
        }
    }

    /// The heap bytes a structure entry was charged when it was built (0 otherwise).
    #[must_use]
    pub fn structure_charge(&self) -> usize {
        if self.header().flags & IS_STRUCTURE == 0 {
            return 0;
        }
        usize::try_from(self.field_u64(self.structure_offset() + 8)).unwrap_or(usize::MAX)
    }

    /// The key bytes.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        let header = self.header();
        // SAFETY: the key lies at `data_offset` for `key_len` bytes, written by `new`.
        unsafe {
            std::slice::from_raw_parts(self.base().add(self.data_offset()), header.key_len as usize)
        }
    }

    /// The value bytes.
    #[must_use]
    pub fn value(&self) -> &[u8] {
        let header = self.header();
        let start = self.data_offset() + header.key_len as usize;
        // SAFETY: the value follows the key for `value_len` bytes, written by `new`.
        unsafe { std::slice::from_raw_parts(self.base().add(start), header.value_len as usize) }
    }

    /// The value as `Bytes` sharing this entry's allocation (no copy for large values).
    #[must_use]
    pub fn value_bytes(&self) -> Bytes {
        // Small values are cheaper to copy than to wrap in an owner allocation.
        if self.header().value_len <= 64 {
            Bytes::copy_from_slice(self.value())
        } else {
            Bytes::from_owner(ValueView(self.clone()))
        }
    }

    /// The key as `Bytes`.
    #[must_use]
    pub fn key_bytes(&self) -> Bytes {
        Bytes::copy_from_slice(self.key())
    }

    /// The entry's version.
    #[must_use]
    pub fn version(&self) -> u64 {
        self.header().version
    }

    /// Sets the version of an entry nobody else sees yet.
    ///
    /// # Panics
    /// In debug builds, if the entry is already shared.
    pub(crate) fn set_version_unshared(&mut self, version: u64) {
        debug_assert_eq!(
            self.header().refs.load(Ordering::Relaxed),
            1,
            "entry already shared"
        );
        // SAFETY: the entry is not shared (one reference, held mutably here), so no other
        // thread reads the header while it is written.
        unsafe { (*self.ptr.as_ptr()).version = version };
    }

    /// An entry as a store kept it: its version and last-used time are restored too.
    #[must_use]
    pub fn restored(
        key: &[u8],
        value: &[u8],
        expiration: StoredExpiration,
        last_used_ms: u64,
        version: u64,
    ) -> Self {
        let mut entry = Self::new(key, value, expiration, last_used_ms);
        entry.set_version_unshared(version);
        entry
    }

    /// An entry as a store kept it, holding `payload` (bytes with flags, or a structure).
    #[must_use]
    pub fn restored_payload(
        key: &[u8],
        payload: Payload<'_>,
        expiration: StoredExpiration,
        last_used_ms: u64,
        version: u64,
    ) -> Self {
        let mut entry = Self::with_payload(key, payload, expiration, last_used_ms);
        entry.set_version_unshared(version);
        entry
    }

    /// The stored expiration.
    #[must_use]
    pub fn expiration(&self) -> StoredExpiration {
        let flags = self.header().flags;
        if flags & MORTAL == 0 {
            return StoredExpiration::IMMORTAL;
        }
        let created = self.field_u64(0);
        let mut offset = 8;
        let lifespan = if flags & HAS_LIFESPAN != 0 {
            offset += 8;
            Some(self.field_u64(8))
        } else {
            None
        };
        let max_idle = if flags & HAS_MAX_IDLE != 0 {
            Some(self.field_u64(offset))
        } else {
            None
        };
        StoredExpiration {
            created_ms: Some(created),
            lifespan_ms: lifespan,
            max_idle_ms: max_idle,
        }
    }

    /// True for entries with a lifespan or max idle.
    #[must_use]
    pub fn is_mortal(&self) -> bool {
        self.header().flags & MORTAL != 0
    }

    /// The last access time, for entries with a max idle.
    #[must_use]
    pub fn last_used_ms(&self) -> Option<u64> {
        self.last_used_atomic()
            .map(|last| last.load(Ordering::Relaxed))
    }

    /// Records an access at `now_ms` (only meaningful for max-idle entries).
    pub fn touch(&self, now_ms: u64) {
        if let Some(last) = self.last_used_atomic() {
            last.fetch_max(now_ms, Ordering::Relaxed);
        }
    }

    /// Whether the entry has expired at `now_ms`. Deadlines are exclusive, as in Redis and
    /// Infinispan: an entry is still alive at exactly its deadline.
    #[must_use]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        if !self.is_mortal() {
            return false;
        }
        self.metadata()
            .expires_at_ms()
            .is_some_and(|deadline| now_ms > deadline)
    }

    /// Version and expiration metadata.
    #[must_use]
    pub fn metadata(&self) -> EntryMetadata {
        let expiration = self.expiration();
        EntryMetadata {
            version: self.version(),
            created_ms: expiration.created_ms,
            last_used_ms: self.last_used_ms(),
            lifespan_ms: expiration.lifespan_ms,
            max_idle_ms: expiration.max_idle_ms,
        }
    }

    /// Bytes requested from the allocator for this entry.
    #[must_use]
    pub fn allocation_bytes(&self) -> usize {
        let header = self.header();
        layout_for(
            header.flags,
            header.key_len as usize,
            header.value_len as usize,
        )
        .size()
    }

    /// True when both handles point at the same allocation.
    #[must_use]
    pub fn same_as(&self, other: &CacheEntry) -> bool {
        self.ptr == other.ptr
    }
}

impl Clone for CacheEntry {
    fn clone(&self) -> Self {
        // Relaxed suffices for an increment, as in `Arc`: the new handle is derived from an
        // existing one, so the allocation cannot be freed concurrently.
        let previous = self.header().refs.fetch_add(1, Ordering::Relaxed);
        assert!(previous < u32::MAX / 2, "entry reference count overflow");
        Self { ptr: self.ptr }
    }
}

impl Drop for CacheEntry {
    fn drop(&mut self) {
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        if self.header().flags & IS_STRUCTURE != 0 {
            // SAFETY: the last handle drops the `Arc` `with_payload` wrote; nothing reads the
            // field again.
            unsafe {
                let field = self.base().add(HEADER_BYTES + self.structure_offset());
                std::ptr::drop_in_place(field.cast::<Arc<StructureCell>>().cast_mut());
            }
        }
        let header = self.header();
        let layout = layout_for(
            header.flags,
            header.key_len as usize,
            header.value_len as usize,
        );
        // SAFETY: this was the last handle; the allocation was made with this same layout
        // (flags and lengths never change after construction).
        // (From the system allocator, as allocated when built.)
        unsafe { System.dealloc(self.ptr.as_ptr().cast::<u8>(), layout) };
    }
}

impl fmt::Debug for CacheEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheEntry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value_len", &self.value().len())
            .field("metadata", &self.metadata())
            .finish()
    }
}

struct ValueView(CacheEntry);

impl AsRef<[u8]> for ValueView {
    fn as_ref(&self) -> &[u8] {
        self.0.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves keys, values and every combination of expiration fields round-trip.
    #[test]
    fn fields_round_trip() {
        let cases = [
            StoredExpiration::IMMORTAL,
            StoredExpiration::new(1_000, Some(50), None),
            StoredExpiration::new(1_000, None, Some(70)),
            StoredExpiration::new(1_000, Some(50), Some(70)),
        ];
        for expiration in cases {
            let mut entry = CacheEntry::new(b"key", b"value-bytes", expiration, 1_000);
            entry.set_version_unshared(42);
            assert_eq!(entry.key(), b"key");
            assert_eq!(entry.value(), b"value-bytes");
            assert_eq!(entry.expiration(), expiration);
            assert_eq!(entry.version(), 42);
            assert_eq!(entry.is_mortal(), !expiration.is_immortal());
            let clone = entry.clone();
            drop(entry);
            assert_eq!(clone.value(), b"value-bytes");
        }
    }

    // Proves deadlines are exclusive and max idle is extended by touching.
    #[test]
    fn expiry_rules() {
        let lifespan = CacheEntry::new(b"k", b"v", StoredExpiration::new(100, Some(10), None), 100);
        assert!(!lifespan.is_expired(110));
        assert!(lifespan.is_expired(111));
        let idle = CacheEntry::new(b"k", b"v", StoredExpiration::new(100, None, Some(10)), 100);
        assert!(!idle.is_expired(110));
        idle.touch(110);
        assert!(!idle.is_expired(120));
        assert!(idle.is_expired(121));
        let immortal = CacheEntry::new(b"k", b"v", StoredExpiration::IMMORTAL, 0);
        assert!(!immortal.is_expired(u64::MAX));
        assert_eq!(immortal.allocation_bytes(), 24 + 2);
    }

    // Proves client flags and a structure sit beside every expiration combination, and the
    // structure's count is given back when the last handle goes.
    #[test]
    fn flags_and_structures_round_trip() {
        use crate::structure::{ListValue, Structure};
        let cell = StructureCell::new(Structure::List(ListValue::default()));
        for expiration in [
            StoredExpiration::IMMORTAL,
            StoredExpiration::new(5, Some(1), Some(2)),
            StoredExpiration::new(5, None, Some(2)),
        ] {
            let flagged =
                CacheEntry::with_payload(b"k", Payload::Bytes(b"v", u32::MAX), expiration, 5);
            assert_eq!(flagged.user_flags(), u32::MAX);
            assert_eq!(flagged.value(), b"v");
            assert_eq!(flagged.expiration(), expiration);
            assert!(flagged.structure().is_none());
            assert!(!flagged.is_edited());
            let edited =
                CacheEntry::with_payload(b"k", Payload::EditedBytes(b"v", 7), expiration, 5);
            assert!(edited.is_edited());
            assert_eq!((edited.value(), edited.user_flags()), (&b"v"[..], 7));
            // Rebuilding from the payload (as a new expiration does) keeps every part.
            let rebuilt = CacheEntry::with_payload(b"k", edited.payload(), expiration, 5);
            assert!(rebuilt.is_edited());
            assert_eq!((rebuilt.value(), rebuilt.user_flags()), (&b"v"[..], 7));
            let entry =
                CacheEntry::with_payload(b"key", Payload::Structure(&cell, 99), expiration, 5);
            assert_eq!(Arc::strong_count(&cell), 2);
            let clone = entry.clone();
            drop(entry);
            assert!(Arc::ptr_eq(clone.structure().expect("structure"), &cell));
            assert_eq!(clone.structure_charge(), 99);
            assert_eq!(clone.key(), b"key");
            assert!(clone.value().is_empty());
            assert_eq!(clone.user_flags(), 0);
            assert_eq!(clone.expiration(), expiration);
            assert_eq!(
                clone.last_used_ms().is_some(),
                expiration.max_idle_ms.is_some()
            );
            drop(clone);
            assert_eq!(Arc::strong_count(&cell), 1);
        }
    }

    // Proves value_bytes views stay valid after the entry handle is dropped.
    #[test]
    fn value_bytes_outlive_handle() {
        let big = vec![7u8; 4096];
        let entry = CacheEntry::new(b"k", &big, StoredExpiration::IMMORTAL, 0);
        let view = entry.value_bytes();
        drop(entry);
        assert_eq!(&view[..], &big[..]);
    }
}
