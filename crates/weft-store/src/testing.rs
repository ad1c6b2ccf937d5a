//! The store conformance suite: the behaviours every [`Store`] promises, one case each, so
//! that the file store and the PostgreSQL store are held to the same contract.
//!
//! A store crate runs the suite from its tests with one line,
//! `weft_store::store_conformance_tests!(with_store);`, which generates one `#[test]` per case.
//! `with_store(case_name, case)` calls `case` with an opener: `open(Reopen::Fresh)` must return
//! an empty store, `open(Reopen::Same)` the same store again after the case stopped it. The
//! store must accept segments `0..256`. A `with_store` that cannot run (no database
//! configured) prints why and returns, and the test passes.
//!
//! Expiration is judged on the wall clock, as stores do: mortal entries are made far enough in
//! the past or the future (minutes, hours) that no test depends on timing.
//!
//! Enabled by the `testing` feature; not part of the product.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use weft_core::entry::StoredExpiration;
use weft_core::structure::{HashValue, ListValue, SetValue, SortedSetValue};
use weft_core::{CacheEntry, Payload, Structure, StructureCell, StructureKind};

use crate::{Modification, Store, StoreError};

/// What the suite asks its opener for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopen {
    /// An empty store: whatever earlier opens for this case wrote is gone.
    Fresh,
    /// The store opened before, again, after it was stopped: it holds what was made durable.
    Same,
}

/// Opens a store for one case.
pub type Open<'a> = &'a dyn Fn(Reopen) -> Box<dyn Store>;

/// One case of the suite.
pub type Case = fn(Open<'_>);

/// Generates one `#[test]` per conformance case, each calling
/// `$with_store(case_name: &'static str, case: weft_store::testing::Case)`.
#[macro_export]
macro_rules! store_conformance_tests {
    // The one list of cases; every other arm is handed it.
    (@each $($mode:tt)*) => {
        $crate::store_conformance_tests! {$($mode)*;
            write_then_load,
            load_sees_writes_before_they_are_durable,
            overwrite_keeps_only_the_newest,
            delete_removes_the_entry,
            load_of_a_missing_key_is_none,
            metadata_round_trips,
            expired_entries_are_never_loaded_or_published,
            write_batch_applies_in_order,
            publish_returns_exactly_the_chosen_segments,
            publish_keys_returns_exactly_the_chosen_segments,
            remove_segments_removes_only_those_segments,
            size_counts_all_or_chosen_segments,
            clear_removes_everything_submitted_before_it,
            purge_expired_removes_only_expired_entries,
            max_version_is_the_highest_version_written,
            wait_durable_succeeds_on_returned_positions,
            restart_keeps_everything_durable,
            writes_after_stop_fail,
            large_and_empty_values_round_trip,
            binary_keys_with_every_byte_value_round_trip,
            flags_and_structures_round_trip,
        }
    };
    (@tests $with_store:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $with_store(stringify!($case), $crate::testing::$case);
            }
        )*
    };
    (@array; $($case:ident),* $(,)?) => {
        &[$((stringify!($case), $crate::testing::$case as $crate::testing::Case)),*]
    };
    ($with_store:path) => {
        $crate::store_conformance_tests!(@each @tests $with_store);
    };
}

/// Every case with its name, in the order [`run_all`] runs them.
pub const CASES: &[(&str, Case)] = crate::store_conformance_tests!(@each @array);

/// Runs every case in turn against stores from `open` (for harnesses that prefer one test).
///
/// # Panics
/// When a case fails.
pub fn run_all(open: Open<'_>) {
    for (name, case) in CASES {
        eprintln!("store conformance: {name}");
        case(open);
    }
}

/// Milliseconds since the Unix epoch, the clock stores judge expiration by.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 60 * MINUTE_MS;

fn immortal(key: &[u8], value: &[u8], version: u64) -> CacheEntry {
    CacheEntry::restored(key, value, StoredExpiration::IMMORTAL, 0, version)
}

/// An entry whose lifespan ended a minute ago.
fn lifespan_expired(key: &[u8], version: u64) -> CacheEntry {
    let expiration = StoredExpiration::new(now_ms() - 2 * MINUTE_MS, Some(MINUTE_MS), None);
    CacheEntry::restored(
        key,
        b"expired",
        expiration,
        now_ms() - 2 * MINUTE_MS,
        version,
    )
}

/// An entry unused for longer than its max idle.
fn idle_expired(key: &[u8], version: u64) -> CacheEntry {
    let expiration = StoredExpiration::new(now_ms() - 3 * MINUTE_MS, None, Some(MINUTE_MS));
    CacheEntry::restored(key, b"idle", expiration, now_ms() - 2 * MINUTE_MS, version)
}

/// An entry with a lifespan of an hour from now.
fn mortal_live(key: &[u8], version: u64) -> CacheEntry {
    let expiration = StoredExpiration::new(now_ms(), Some(HOUR_MS), None);
    CacheEntry::restored(key, b"alive", expiration, now_ms(), version)
}

fn fresh(open: Open<'_>) -> Box<dyn Store> {
    let store = open(Reopen::Fresh);
    assert_eq!(
        store.size(None).expect("size of a fresh store"),
        0,
        "Reopen::Fresh must give an empty store"
    );
    store
}

fn durable(store: &dyn Store, position: u64) {
    store
        .wait_durable(position)
        .expect("wait_durable on a submitted position");
}

fn put(store: &dyn Store, segment: u32, entry: &CacheEntry) {
    let position = store.write(segment, entry).expect("write");
    durable(store, position);
}

fn value(store: &dyn Store, segment: u32, key: &[u8]) -> Option<Vec<u8>> {
    store
        .load(segment, key)
        .expect("load")
        .map(|entry| entry.value().to_vec())
}

fn published(store: &dyn Store, segments: &[u32]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut seen = BTreeMap::new();
    store
        .publish(segments, &mut |entry| {
            let previous = seen.insert(entry.key().to_vec(), entry.value().to_vec());
            assert!(
                previous.is_none(),
                "publish visited {:?} twice",
                entry.key()
            );
        })
        .expect("publish");
    seen
}

fn published_keys(store: &dyn Store, segments: &[u32]) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    store
        .publish_keys(segments, &mut |key| keys.push(key.to_vec()))
        .expect("publish_keys");
    keys.sort();
    let count = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), count, "publish_keys visited a key twice");
    keys
}

/// A structure's kind and elements in an order that does not depend on its tables: hash
/// fields (`field=value`) and set members sorted, list items and sorted-set members
/// (`member` then the score's bits) in their own order, a stream as its encoding (its entries,
/// counters and groups are all ordered). Two structures hold the same
/// elements exactly when their contents are equal.
#[must_use]
pub fn structure_contents(structure: &Structure) -> (StructureKind, Vec<Vec<u8>>) {
    let elements = match structure {
        Structure::Hash(hash) => {
            let mut fields: Vec<Vec<u8>> = hash
                .iter()
                .map(|(field, value)| [&field[..], b"=", &value[..]].concat())
                .collect();
            fields.sort();
            fields
        }
        Structure::List(list) => list.iter().map(|item| item.to_vec()).collect(),
        Structure::Set(set) => {
            let mut members: Vec<Vec<u8>> = set.iter().map(|member| member.to_vec()).collect();
            members.sort();
            members
        }
        Structure::SortedSet(zset) => zset
            .iter()
            .map(|(member, score)| [&member[..], &score.to_bits().to_le_bytes()[..]].concat())
            .collect(),
        // A stream's whole state (entries, counters, groups) is its encoding.
        Structure::Stream(_) => vec![structure.encode()],
    };
    (structure.kind(), elements)
}

/// One structure of each kind, with binary and empty elements, and sizes past Redis'
/// small-encoding thresholds for the hash and the set.
#[must_use]
pub fn sample_structures() -> Vec<Structure> {
    let bytes = |text: String| Bytes::from(text.into_bytes());
    let mut hash = HashValue::default();
    for i in 0..200u32 {
        hash.insert(bytes(format!("field-{i}")), bytes(format!("value-{i}")));
    }
    hash.insert(Bytes::from_static(b"\0\xff binary"), Bytes::new());
    let mut list = ListValue::default();
    for i in 0..300u32 {
        // Duplicates on purpose: a list keeps them, in order.
        list.push_back(bytes(format!("item-{}", i % 50)));
    }
    list.push_front(Bytes::new());
    list.push_back(Bytes::from_static(b"\r\n\0"));
    let mut set = SetValue::default();
    for i in 0..600i64 {
        set.insert(bytes((i * 7 - 1_000).to_string()));
    }
    set.insert(Bytes::from_static(b"\xfe\xff"));
    let mut zset = SortedSetValue::default();
    for i in 0..150u32 {
        zset.insert(
            bytes(format!("member-{i}")),
            f64::from(i % 40) * 1.25 - 20.0,
        );
    }
    zset.insert(Bytes::from_static(b"top"), f64::INFINITY);
    zset.insert(Bytes::from_static(b"bottom"), f64::NEG_INFINITY);
    zset.insert(Bytes::from_static(b"tiny"), 5e-324);
    let mut stream = weft_core::structure::StreamValue::default();
    for ms in 1..=250u64 {
        let items = [
            bytes(format!("field-{}", ms % 3)),
            bytes(format!("value-{ms}")),
        ];
        let id = weft_core::stream::IdRequest::Exact(weft_core::stream::StreamId::new(ms, 0));
        if stream.add(id, &items).is_err() {
            unreachable!("increasing IDs are accepted");
        }
    }
    stream.delete(weft_core::stream::StreamId::new(7, 0));
    stream.create_group(b"group", weft_core::stream::StreamId::MIN, None);
    stream.read_group_new(b"group", b"consumer", 20, false, 1_000);
    vec![
        Structure::Hash(hash),
        Structure::List(list),
        Structure::Set(set),
        Structure::SortedSet(zset),
        Structure::Stream(stream),
    ]
}

/// An entry holding `structure` in a cell of its own, as a store restores one.
#[must_use]
pub fn structure_entry(
    key: &[u8],
    structure: Structure,
    expiration: StoredExpiration,
    last_used_ms: u64,
    version: u64,
) -> CacheEntry {
    let charge = structure.heap_bytes();
    let cell = StructureCell::new(structure);
    CacheEntry::restored_payload(
        key,
        Payload::Structure(&cell, charge),
        expiration,
        last_used_ms,
        version,
    )
}

/// Asserts that `found` holds what `written` held: key, value, client flags, structure
/// contents, version, expiration and last-used time.
///
/// # Panics
/// When they differ.
pub fn expect_same_entry(found: &CacheEntry, written: &CacheEntry) {
    assert_eq!(found.key(), written.key(), "key");
    assert_eq!(
        found.value(),
        written.value(),
        "value of {:?}",
        written.key()
    );
    assert_eq!(
        found.user_flags(),
        written.user_flags(),
        "client flags of {:?}",
        written.key()
    );
    assert_eq!(
        found
            .structure()
            .map(|cell| structure_contents(&cell.lock())),
        written
            .structure()
            .map(|cell| structure_contents(&cell.lock())),
        "structure of {:?}",
        written.key()
    );
    assert_eq!(
        found.version(),
        written.version(),
        "version of {:?}",
        written.key()
    );
    assert_eq!(
        found.expiration(),
        written.expiration(),
        "expiration of {:?}",
        written.key()
    );
    assert_eq!(
        found.last_used_ms(),
        written.last_used_ms(),
        "last-used time of {:?}",
        written.key()
    );
}

/// Polls a future to completion on this thread (the suite has no runtime of its own).
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// A written entry can be loaded back once durable.
pub fn write_then_load(open: Open<'_>) {
    let store = fresh(open);
    let written = immortal(b"key", b"value", 1);
    put(&*store, 3, &written);
    let found = store
        .load(3, b"key")
        .expect("load")
        .expect("the entry is there");
    expect_same_entry(&found, &written);
}

/// A load sees every change submitted before it, durable or not: each load comes right
/// after the write or delete it must see, many times over, so a store that answered from
/// durable data alone would be caught returning the previous value.
pub fn load_sees_writes_before_they_are_durable(open: Open<'_>) {
    let store = fresh(open);
    put(&*store, 5, &immortal(b"key", b"initial", 1));
    let mut last = 0;
    for round in 0..200u32 {
        let value = round.to_le_bytes();
        store
            .write(5, &immortal(b"key", &value, u64::from(round) + 2))
            .expect("write");
        assert_eq!(
            self::value(&*store, 5, b"key").as_deref(),
            Some(&value[..]),
            "round {round}: the load missed the write before it"
        );
        if round % 2 == 0 {
            last = store.delete(5, b"key").expect("delete");
            assert_eq!(
                self::value(&*store, 5, b"key"),
                None,
                "round {round}: the load missed the delete before it"
            );
        }
    }
    durable(&*store, last.max(store.position()));
}

/// Writing a key again replaces its entry: only the newest is loaded and published.
pub fn overwrite_keeps_only_the_newest(open: Open<'_>) {
    let store = fresh(open);
    store.write(9, &immortal(b"key", b"old", 1)).expect("write");
    let newest = immortal(b"key", b"new", 2);
    put(&*store, 9, &newest);
    let found = store.load(9, b"key").expect("load").expect("present");
    expect_same_entry(&found, &newest);
    assert_eq!(
        published(&*store, &[9]),
        BTreeMap::from([(b"key".to_vec(), b"new".to_vec())])
    );
    assert_eq!(store.size(None).expect("size"), 1);
}

/// A deleted key is neither loaded, published nor counted.
pub fn delete_removes_the_entry(open: Open<'_>) {
    let store = fresh(open);
    put(&*store, 4, &immortal(b"gone", b"v", 1));
    put(&*store, 4, &immortal(b"kept", b"v", 2));
    let position = store.delete(4, b"gone").expect("delete");
    durable(&*store, position);
    assert_eq!(value(&*store, 4, b"gone"), None);
    assert_eq!(value(&*store, 4, b"kept"), Some(b"v".to_vec()));
    assert_eq!(published_keys(&*store, &[4]), vec![b"kept".to_vec()]);
    assert_eq!(store.size(None).expect("size"), 1);
}

/// Loading a key never written, or deleting it, finds nothing and fails nothing.
pub fn load_of_a_missing_key_is_none(open: Open<'_>) {
    let store = fresh(open);
    assert!(store.load(0, b"missing").expect("load").is_none());
    put(&*store, 0, &immortal(b"other", b"v", 1));
    assert!(store.load(0, b"missing").expect("load").is_none());
    assert!(store.load(1, b"missing").expect("load").is_none());
    let position = store
        .delete(0, b"missing")
        .expect("delete of a missing key");
    durable(&*store, position);
    assert_eq!(store.size(None).expect("size"), 1);
}

/// Version, created time, lifespan, max idle and last-used time come back as written.
pub fn metadata_round_trips(open: Open<'_>) {
    let store = fresh(open);
    let now = now_ms();
    let entries = [
        immortal(b"immortal", b"a", 42),
        CacheEntry::restored(
            b"lifespan",
            b"b",
            StoredExpiration::new(now - 1_000, Some(HOUR_MS), None),
            now - 1_000,
            43,
        ),
        CacheEntry::restored(
            b"max-idle",
            b"c",
            StoredExpiration::new(now - 5_000, None, Some(HOUR_MS)),
            now - 2_000,
            44,
        ),
        CacheEntry::restored(
            b"both",
            b"d",
            StoredExpiration::new(now - 7_000, Some(2 * HOUR_MS), Some(HOUR_MS)),
            now - 3_000,
            u64::from(u32::MAX) + 7,
        ),
    ];
    for entry in &entries {
        put(&*store, 17, entry);
    }
    for entry in &entries {
        let found = store
            .load(17, entry.key())
            .expect("load")
            .expect("the entry is there");
        expect_same_entry(&found, entry);
    }
    let mut visited = 0;
    store
        .publish(&[17], &mut |found| {
            let written = entries
                .iter()
                .find(|entry| entry.key() == found.key())
                .expect("published a key that was written");
            expect_same_entry(&found, written);
            visited += 1;
        })
        .expect("publish");
    assert_eq!(visited, entries.len());
}

/// An entry whose lifespan or max idle has passed is never loaded or published.
pub fn expired_entries_are_never_loaded_or_published(open: Open<'_>) {
    let store = fresh(open);
    put(&*store, 2, &lifespan_expired(b"lifespan", 1));
    put(&*store, 2, &idle_expired(b"idle", 2));
    put(&*store, 2, &mortal_live(b"alive", 3));
    put(&*store, 2, &immortal(b"immortal", b"v", 4));
    assert!(store.load(2, b"lifespan").expect("load").is_none());
    assert!(store.load(2, b"idle").expect("load").is_none());
    assert!(store.load(2, b"alive").expect("load").is_some());
    assert_eq!(
        published_keys(&*store, &[2]),
        vec![b"alive".to_vec(), b"immortal".to_vec()]
    );
    let published = published(&*store, &[2]);
    assert_eq!(
        published.keys().cloned().collect::<Vec<_>>(),
        vec![b"alive".to_vec(), b"immortal".to_vec()]
    );
}

/// A batch is applied in order: a write then a delete of one key leaves it absent, a delete
/// then a write leaves it present, two writes leave the second.
pub fn write_batch_applies_in_order(open: Open<'_>) {
    let store = fresh(open);
    let write = |segment: u32, key: &[u8], value: &[u8], version: u64| Modification::Write {
        segment,
        entry: immortal(key, value, version),
    };
    let delete = |segment: u32, key: &[u8]| Modification::Delete {
        segment,
        key: Bytes::copy_from_slice(key),
    };
    put(&*store, 1, &immortal(b"existing", b"v", 1));
    let position = store
        .write_batch(&[
            write(1, b"written-then-deleted", b"v", 2),
            write(1, b"kept", b"v", 3),
            delete(1, b"written-then-deleted"),
            delete(1, b"existing"),
            write(1, b"existing", b"again", 4),
            write(2, b"twice", b"first", 5),
            write(2, b"twice", b"second", 6),
        ])
        .expect("write_batch");
    assert_eq!(
        store.position(),
        position,
        "the batch's position is its last change's"
    );
    durable(&*store, position);
    assert_eq!(value(&*store, 1, b"written-then-deleted"), None);
    assert_eq!(value(&*store, 1, b"kept"), Some(b"v".to_vec()));
    assert_eq!(value(&*store, 1, b"existing"), Some(b"again".to_vec()));
    assert_eq!(value(&*store, 2, b"twice"), Some(b"second".to_vec()));
    assert_eq!(store.size(None).expect("size"), 3);
}

/// Writes a few entries in each of the segments 0, 1, 7, 128 and 255; returns them.
fn populate_segments(store: &dyn Store) -> BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut written: BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>> = BTreeMap::new();
    let mut position = 0;
    let mut version = 0;
    for segment in [0u32, 1, 7, 128, 255] {
        for i in 0..=(segment % 5) {
            version += 1;
            let key = format!("s{segment}-k{i}").into_bytes();
            let value = format!("v{version}").into_bytes();
            position = store
                .write(segment, &immortal(&key, &value, version))
                .expect("write");
            written.entry(segment).or_default().insert(key, value);
        }
    }
    durable(store, position);
    written
}

fn union(
    written: &BTreeMap<u32, BTreeMap<Vec<u8>, Vec<u8>>>,
    segments: &[u32],
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    segments
        .iter()
        .filter_map(|segment| written.get(segment))
        .flat_map(|entries| entries.clone())
        .collect()
}

/// Publishing chosen segments visits exactly their live entries, each once.
pub fn publish_returns_exactly_the_chosen_segments(open: Open<'_>) {
    let store = fresh(open);
    let written = populate_segments(&*store);
    for segments in [&[1u32, 255][..], &[0], &[7, 128, 0], &[2, 3], &[]] {
        assert_eq!(
            published(&*store, segments),
            union(&written, segments),
            "segments {segments:?}"
        );
    }
    let every: Vec<u32> = (0..256).collect();
    assert_eq!(published(&*store, &every), union(&written, &every));
}

/// Publishing the keys of chosen segments visits exactly their live keys, each once.
pub fn publish_keys_returns_exactly_the_chosen_segments(open: Open<'_>) {
    let store = fresh(open);
    let written = populate_segments(&*store);
    for segments in [&[1u32, 255][..], &[128], &[0, 1, 7, 128, 255], &[4], &[]] {
        let expected: Vec<Vec<u8>> = union(&written, segments).into_keys().collect();
        assert_eq!(
            published_keys(&*store, segments),
            expected,
            "segments {segments:?}"
        );
    }
}

/// Removing segments deletes every entry in them, including writes submitted just before,
/// and nothing else; writes submitted after it are kept.
pub fn remove_segments_removes_only_those_segments(open: Open<'_>) {
    let store = fresh(open);
    let written = populate_segments(&*store);
    store
        .write(7, &immortal(b"submitted-before", b"v", 100))
        .expect("write");
    store.remove_segments(&[1, 7]).expect("remove_segments");
    let position = store
        .write(7, &immortal(b"submitted-after", b"v", 101))
        .expect("write");
    durable(&*store, position);
    assert_eq!(value(&*store, 7, b"submitted-before"), None);
    assert_eq!(value(&*store, 7, b"submitted-after"), Some(b"v".to_vec()));
    assert_eq!(value(&*store, 1, b"s1-k0"), None);
    assert_eq!(published(&*store, &[1]), BTreeMap::new());
    assert_eq!(
        published(&*store, &[7]),
        BTreeMap::from([(b"submitted-after".to_vec(), b"v".to_vec())])
    );
    let others = [0, 128, 255];
    assert_eq!(published(&*store, &others), union(&written, &others));
    assert_eq!(
        store.size(None).expect("size"),
        union(&written, &others).len() + 1
    );
}

/// Size counts every entry, or only those of the given segments.
pub fn size_counts_all_or_chosen_segments(open: Open<'_>) {
    let store = fresh(open);
    assert_eq!(store.size(None).expect("size"), 0);
    let written = populate_segments(&*store);
    let total: usize = written.values().map(BTreeMap::len).sum();
    assert_eq!(store.size(None).expect("size"), total);
    for segments in [&[1u32, 255][..], &[128], &[2], &[]] {
        assert_eq!(
            store.size(Some(segments)).expect("size of segments"),
            union(&written, segments).len(),
            "segments {segments:?}"
        );
    }
}

/// Clear removes every entry submitted before it, and only those.
pub fn clear_removes_everything_submitted_before_it(open: Open<'_>) {
    let store = fresh(open);
    populate_segments(&*store);
    store
        .write(3, &immortal(b"not-yet-durable", b"v", 50))
        .expect("write");
    store.clear().expect("clear");
    let position = store
        .write(3, &immortal(b"after-clear", b"v", 51))
        .expect("write");
    durable(&*store, position);
    assert_eq!(value(&*store, 3, b"not-yet-durable"), None);
    assert_eq!(value(&*store, 0, b"s0-k0"), None);
    assert_eq!(value(&*store, 3, b"after-clear"), Some(b"v".to_vec()));
    assert_eq!(store.size(None).expect("size"), 1);
    let every: Vec<u32> = (0..256).collect();
    assert_eq!(
        published_keys(&*store, &every),
        vec![b"after-clear".to_vec()]
    );
}

/// Purging removes exactly the entries expired at the given time and counts them; until
/// then, size counts expired entries too.
pub fn purge_expired_removes_only_expired_entries(open: Open<'_>) {
    let store = fresh(open);
    put(&*store, 5, &lifespan_expired(b"lifespan", 1));
    put(&*store, 6, &idle_expired(b"idle", 2));
    put(&*store, 5, &mortal_live(b"alive", 3));
    put(&*store, 6, &immortal(b"immortal", b"v", 4));
    assert_eq!(
        store.size(None).expect("size"),
        4,
        "expired entries count until purged"
    );
    assert_eq!(
        store
            .purge_expired(now_ms() - HOUR_MS)
            .expect("purge an hour ago"),
        0,
        "nothing had expired an hour ago"
    );
    assert_eq!(store.purge_expired(now_ms()).expect("purge"), 2);
    assert_eq!(store.size(None).expect("size"), 2);
    assert_eq!(store.size(Some(&[5])).expect("size"), 1);
    assert_eq!(value(&*store, 5, b"alive"), Some(b"alive".to_vec()));
    assert_eq!(value(&*store, 6, b"immortal"), Some(b"v".to_vec()));
    assert_eq!(store.purge_expired(now_ms()).expect("purge again"), 0);
}

/// `max_version` is 0 for an empty store, then the highest version written.
pub fn max_version_is_the_highest_version_written(open: Open<'_>) {
    let store = fresh(open);
    assert_eq!(store.max_version(), 0);
    put(&*store, 0, &immortal(b"a", b"v", 3));
    put(&*store, 1, &immortal(b"b", b"v", 7));
    put(&*store, 2, &immortal(b"c", b"v", 5));
    assert_eq!(store.max_version(), 7);
}

/// Every position a submitting call returns can be waited on, blocking or async, and
/// positions never go backwards.
pub fn wait_durable_succeeds_on_returned_positions(open: Open<'_>) {
    let store = fresh(open);
    let mut positions = vec![
        store.write(0, &immortal(b"a", b"v", 1)).expect("write"),
        store.delete(0, b"a").expect("delete"),
        store.write(1, &immortal(b"b", b"v", 2)).expect("write"),
        store
            .write_batch(&[Modification::Write {
                segment: 2,
                entry: immortal(b"c", b"v", 3),
            }])
            .expect("write_batch"),
        store.remove_segments(&[1]).expect("remove_segments"),
        store.clear().expect("clear"),
        store.write(3, &immortal(b"d", b"v", 4)).expect("write"),
    ];
    positions.push(store.position());
    assert!(
        positions.is_sorted(),
        "positions go backwards: {positions:?}"
    );
    for &position in &positions {
        block_on(store.wait_durable_async(position)).expect("wait_durable_async");
        durable(&*store, position);
    }
    assert_eq!(value(&*store, 3, b"d"), Some(b"v".to_vec()));
}

/// After a stop and a reopen, every change made durable is there and nothing else.
pub fn restart_keeps_everything_durable(open: Open<'_>) {
    let store = fresh(open);
    let now = now_ms();
    let mortal = CacheEntry::restored(
        b"mortal",
        b"m",
        StoredExpiration::new(now - 1_000, Some(2 * HOUR_MS), Some(HOUR_MS)),
        now - 500,
        900,
    );
    let mut position = 0;
    for i in 0..300u32 {
        position = store
            .write(
                i % 256,
                &immortal(
                    format!("k{i}").as_bytes(),
                    &i.to_le_bytes(),
                    u64::from(i) + 1,
                ),
            )
            .expect("write");
    }
    store
        .write(10, &immortal(b"k10", b"ten", 1000))
        .expect("overwrite");
    store.delete(11, b"k11").expect("delete");
    store.write(200, &mortal).expect("write");
    store
        .write_batch(&[
            Modification::Write {
                segment: 12,
                entry: immortal(b"batched", b"b", 1001),
            },
            Modification::Delete {
                segment: 13,
                key: Bytes::from_static(b"k13"),
            },
        ])
        .expect("write_batch");
    position = position.max(store.position());
    durable(&*store, position);
    let size_before = store.size(None).expect("size");
    let max_version_before = store.max_version();
    store.stop().expect("stop");
    drop(store);

    let store = open(Reopen::Same);
    assert_eq!(store.size(None).expect("size"), size_before);
    assert_eq!(store.max_version(), max_version_before);
    assert_eq!(value(&*store, 10, b"k10"), Some(b"ten".to_vec()));
    assert_eq!(value(&*store, 11, b"k11"), None);
    assert_eq!(value(&*store, 13, b"k13"), None);
    assert_eq!(value(&*store, 12, b"batched"), Some(b"b".to_vec()));
    for i in (0..300u32).filter(|i| ![10, 11, 13].contains(i)) {
        assert_eq!(
            value(&*store, i % 256, format!("k{i}").as_bytes()),
            Some(i.to_le_bytes().to_vec()),
            "k{i}"
        );
    }
    let found = store.load(200, b"mortal").expect("load").expect("present");
    expect_same_entry(&found, &mortal);
    let position = store
        .write(0, &immortal(b"after-reopen", b"v", 2000))
        .expect("write");
    durable(&*store, position);
    store.stop().expect("stop");
}

/// A stopped store refuses every change with `Stopped`.
pub fn writes_after_stop_fail(open: Open<'_>) {
    let store = fresh(open);
    put(&*store, 0, &immortal(b"a", b"v", 1));
    store.stop().expect("stop");
    let refused = |result: Result<u64, StoreError>, what: &str| {
        assert!(
            matches!(result, Err(StoreError::Stopped)),
            "{what} after stop: {result:?}"
        );
    };
    refused(store.write(0, &immortal(b"b", b"v", 2)), "write");
    refused(store.delete(0, b"a"), "delete");
    refused(
        store.write_batch(&[Modification::Delete {
            segment: 0,
            key: Bytes::from_static(b"a"),
        }]),
        "write_batch",
    );
    refused(store.remove_segments(&[0]), "remove_segments");
    refused(store.clear(), "clear");
}

/// A 1 MiB value and an empty value are stored and read back byte for byte.
pub fn large_and_empty_values_round_trip(open: Open<'_>) {
    let store = fresh(open);
    let large: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(31) >> 3) as u8)
        .collect();
    put(&*store, 8, &immortal(b"large", &large, 1));
    put(&*store, 8, &immortal(b"empty", b"", 2));
    assert_eq!(value(&*store, 8, b"large").as_deref(), Some(&large[..]));
    assert_eq!(value(&*store, 8, b"empty"), Some(Vec::new()));
    let published = published(&*store, &[8]);
    assert_eq!(
        published.get(&b"large"[..]).map(Vec::len),
        Some(large.len())
    );
    assert_eq!(published.get(&b"large"[..]), Some(&large));
    assert_eq!(published.get(&b"empty"[..]), Some(&Vec::new()));
}

/// Keys are opaque bytes: every byte value, NUL and invalid UTF-8 included, round-trips.
pub fn binary_keys_with_every_byte_value_round_trip(open: Open<'_>) {
    let store = fresh(open);
    let every_byte: Vec<u8> = (0..=255u8).collect();
    let mut keys: Vec<(u32, Vec<u8>)> = (0..=255u8)
        .map(|byte| (u32::from(byte), vec![byte]))
        .collect();
    keys.push((0, every_byte.clone()));
    keys.push((255, every_byte.iter().rev().copied().collect()));
    keys.push((1, vec![0, 0, 0]));
    keys.push((1, vec![b'a', 0, b'b']));
    let mut position = 0;
    for (version, (segment, key)) in (1..).zip(&keys) {
        position = store
            .write(*segment, &immortal(key, key, version))
            .expect("write");
    }
    durable(&*store, position);
    for (segment, key) in &keys {
        assert_eq!(
            value(&*store, *segment, key).as_ref(),
            Some(key),
            "key {key:?}"
        );
    }
    let every: Vec<u32> = (0..256).collect();
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = keys
        .iter()
        .map(|(_, key)| (key.clone(), key.clone()))
        .collect();
    assert_eq!(published(&*store, &every), expected);
    assert_eq!(
        published(&*store, &[0]).len(),
        2,
        "segment 0 holds [0] and 0..=255"
    );
}

/// Client flags and a structure of each kind come back as written, with version and
/// expiration, from a load before and after durability, from publish, and after a restart;
/// overwriting a structure or a flagged value with plain bytes leaves neither behind.
pub fn flags_and_structures_round_trip(open: Open<'_>) {
    const SEGMENT: u32 = 30;
    let store = fresh(open);
    let now = now_ms();
    let lifespan = StoredExpiration::new(now - 1_000, Some(2 * HOUR_MS), None);
    let idle = StoredExpiration::new(now - 5_000, None, Some(HOUR_MS));
    let both = StoredExpiration::new(now - 7_000, Some(3 * HOUR_MS), Some(HOUR_MS));
    let mut entries = vec![
        CacheEntry::restored_payload(
            b"flags-max",
            Payload::Bytes(b"v", u32::MAX),
            StoredExpiration::IMMORTAL,
            0,
            10,
        ),
        CacheEntry::restored_payload(
            b"flags-high-bit",
            Payload::Bytes(b"", 0x8000_0001),
            lifespan,
            now - 1_000,
            11,
        ),
        CacheEntry::restored_payload(
            b"flags-one",
            Payload::Bytes(b"one", 1),
            idle,
            now - 2_000,
            u64::from(u32::MAX) + 12,
        ),
    ];
    let expirations = [StoredExpiration::IMMORTAL, lifespan, idle, both];
    for ((structure, expiration), version) in sample_structures()
        .into_iter()
        .zip(expirations.into_iter().cycle())
        .zip(20u64..)
    {
        let key = format!("structure-{}", structure.kind().type_name());
        entries.push(structure_entry(
            key.as_bytes(),
            structure,
            expiration,
            now - 3_000,
            version,
        ));
    }
    let mut position = 0;
    for entry in &entries {
        position = store.write(SEGMENT, entry).expect("write");
        let found = store
            .load(SEGMENT, entry.key())
            .expect("load before durable")
            .expect("a load sees the write before it");
        expect_same_entry(&found, entry);
    }
    let replaced_structure = sample_structures().swap_remove(1);
    store
        .write(
            SEGMENT,
            &structure_entry(
                b"was-structure",
                replaced_structure,
                StoredExpiration::IMMORTAL,
                0,
                40,
            ),
        )
        .expect("write");
    store
        .write(
            SEGMENT,
            &CacheEntry::restored_payload(
                b"was-flagged",
                Payload::Bytes(b"flagged", 7),
                StoredExpiration::IMMORTAL,
                0,
                41,
            ),
        )
        .expect("write");
    durable(&*store, position.max(store.position()));
    let overwrites = [
        immortal(b"was-structure", b"plain now", 42),
        immortal(b"was-flagged", b"unflagged now", 43),
    ];
    for overwrite in &overwrites {
        put(&*store, SEGMENT, overwrite);
    }
    entries.extend(overwrites);

    let check = |store: &dyn Store, when: &str| {
        for entry in &entries {
            let found = store
                .load(SEGMENT, entry.key())
                .expect("load")
                .unwrap_or_else(|| panic!("{when}: {:?} is missing", entry.key()));
            expect_same_entry(&found, entry);
        }
        let mut visited = 0;
        store
            .publish(&[SEGMENT], &mut |found| {
                let written = entries
                    .iter()
                    .find(|entry| entry.key() == found.key())
                    .expect("published a key that was written");
                expect_same_entry(&found, written);
                visited += 1;
            })
            .expect("publish");
        assert_eq!(visited, entries.len(), "{when}: entries published");
    };
    check(&*store, "before the restart");
    store.stop().expect("stop");
    drop(store);
    let store = open(Reopen::Same);
    check(&*store, "after the restart");
    store.stop().expect("stop");
}
