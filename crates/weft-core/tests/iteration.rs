//! Iteration: every live entry exactly once, segment-restricted iteration, and iteration
//! alongside concurrent writers.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{default_cache, key, manual_cache};
use weft_core::{CacheConfig, WriteOptions};

fn opts() -> WriteOptions {
    WriteOptions::default()
}

// Proves iter returns every entry exactly once, with its value.
#[test]
fn iter_returns_each_entry_once() {
    for segments in [1, 7, 256] {
        let (_m, cache, _clock) = manual_cache(CacheConfig {
            segments,
            ..CacheConfig::default()
        });
        for i in 0..5_000 {
            cache.put(&key("k", i), &key("v", i), &opts()).unwrap();
        }
        let mut seen = HashMap::new();
        for entry in cache.iter() {
            let previous = seen.insert(entry.key().to_vec(), entry.value().to_vec());
            assert!(previous.is_none(), "returned twice");
        }
        assert_eq!(seen.len(), 5_000);
        for i in 0..5_000 {
            assert_eq!(seen[&key("k", i)], key("v", i));
        }
    }
}

// Proves iter_segments returns exactly the keys of the chosen segments, ignoring duplicate
// and out-of-range segment numbers.
#[test]
fn iter_segments_returns_only_those_segments() {
    let (_m, cache, _clock) = default_cache();
    let keys: Vec<Vec<u8>> = (0..5_000).map(|i| key("k", i)).collect();
    for k in &keys {
        cache.put(k, b"v", &opts()).unwrap();
    }
    let chosen = [3u32, 17, 200];
    let returned: Vec<Vec<u8>> = cache
        .iter_segments(vec![17, 3, 200, 3, 999])
        .map(|e| e.key().to_vec())
        .collect();
    let unique: BTreeSet<Vec<u8>> = returned.iter().cloned().collect();
    assert_eq!(unique.len(), returned.len(), "duplicates returned");
    for k in &returned {
        assert!(chosen.contains(&cache.segment_of(k)));
    }
    let expected: BTreeSet<Vec<u8>> = keys
        .iter()
        .filter(|k| chosen.contains(&cache.segment_of(k)))
        .cloned()
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(unique, expected);
    let sizes: usize = chosen.iter().map(|&s| cache.segment_size(s)).sum();
    assert_eq!(returned.len(), sizes);
    // Segments are visited in the order given.
    let order: Vec<u32> = returned.iter().map(|k| cache.segment_of(k)).collect();
    let mut deduped = order.clone();
    deduped.dedup();
    assert_eq!(deduped, [17, 3, 200]);
    assert_eq!(cache.iter_segments(vec![999]).count(), 0);
}

// Proves a big cache can be iterated while a writer overwrites and adds keys: no entry is
// returned twice, every untouched original key is returned, and the writer makes progress
// while the iterator is open.
#[test]
fn iteration_with_concurrent_writer() {
    let (_m, cache, _clock) = default_cache();
    const ORIGINAL: usize = 100_000;
    for i in 0..ORIGINAL {
        cache.put(&key("k", i), b"v0", &opts()).unwrap();
    }
    let writes = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Overwrite an original key and add a new one.
                cache
                    .put(&key("k", (i * 7_919) % ORIGINAL), b"v1", &opts())
                    .unwrap();
                cache.put(&key("new", i), b"v", &opts()).unwrap();
                i += 1;
                writes.store(i, Ordering::Relaxed);
            }
        });
        let mut seen = HashSet::new();
        let mut progress_checked = false;
        for entry in cache.iter() {
            assert!(seen.insert(entry.key().to_vec()), "returned twice");
            if !progress_checked && seen.len() == ORIGINAL / 2 {
                // Halfway through, writers are not blocked by the open iterator.
                let before = writes.load(Ordering::Relaxed);
                let deadline = Instant::now() + Duration::from_secs(30);
                while writes.load(Ordering::Relaxed) < before + 1_000 {
                    assert!(Instant::now() < deadline, "writer blocked by iteration");
                    std::thread::yield_now();
                }
                progress_checked = true;
            }
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert!(progress_checked);
        for i in 0..ORIGINAL {
            assert!(seen.contains(&key("k", i)), "original key {i} missed");
        }
    });
    cache.check_invariants();
    assert_eq!(
        cache.iter().count(),
        ORIGINAL + writes.load(Ordering::Relaxed)
    );
}

// Proves paging a segment by key returns its entries in key order, each exactly once, in
// pages of the size asked, the last flagged — and that entries which stay in the segment are
// each returned once while other keys of it are written and removed between pages.
#[test]
fn segment_pages_return_each_entry_once_while_the_segment_changes() {
    let (_m, cache, _clock) = manual_cache(CacheConfig {
        segments: 4,
        ..CacheConfig::default()
    });
    for i in 0..2_000 {
        cache.put(&key("stay", i), b"v", &opts()).unwrap();
    }
    let segment = cache.segment_of(&key("stay", 0));
    let staying: BTreeSet<Vec<u8>> = (0..2_000)
        .map(|i| key("stay", i))
        .filter(|k| cache.segment_of(k) == segment)
        .collect();
    let mut after: Option<Vec<u8>> = None;
    let mut returned = Vec::new();
    let mut pages = 0;
    loop {
        let (page, last) = cache.segment_page(segment, after.as_deref(), 37).unwrap();
        pages += 1;
        assert!(page.len() <= 37);
        assert!(last || page.len() == 37, "a page before the last is full");
        for window in page.windows(2) {
            assert!(window[0].key() < window[1].key(), "pages are in key order");
        }
        if let Some(entry) = page.last() {
            after = Some(entry.key().to_vec());
        }
        returned.extend(page.iter().map(|e| e.key().to_vec()));
        // Churn between pages: new keys on both sides of the cursor, some removed again.
        for j in 0..20 {
            cache
                .put(&key(&format!("churn{pages}-"), j), b"x", &opts())
                .unwrap();
            cache
                .delete(&key(&format!("churn{}-", pages - 1), j))
                .unwrap();
        }
        if last {
            break;
        }
        assert!(pages < 10_000, "paging does not end");
    }
    let unique: BTreeSet<Vec<u8>> = returned.iter().cloned().collect();
    assert_eq!(unique.len(), returned.len(), "an entry was returned twice");
    assert!(
        staying.is_subset(&unique),
        "an entry that stayed was missed"
    );
    assert!(returned.iter().all(|k| cache.segment_of(k) == segment));
    // An empty segment is one last, empty page.
    cache.clear().unwrap();
    let (page, last) = cache.segment_page(segment, None, 10).unwrap();
    assert!(page.is_empty() && last);
}
