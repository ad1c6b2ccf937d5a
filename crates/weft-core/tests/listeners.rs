//! Listeners: the five event kinds with their values and metadata, filters, kind masks,
//! synchronous and asynchronous delivery, back-pressure, and unregistration.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use common::{Seen, bounded_by_count, default_cache, key, manual_cache, record, take};
use parking_lot::Mutex;
use weft_core::{
    CacheEvent, Compute, EventKind, EventKinds, Expiry, ListenerOptions, WriteOptions,
};

fn opts() -> WriteOptions {
    WriteOptions::default()
}

const PATIENCE: Duration = Duration::from_secs(30);

/// Waits (for another thread, not for time to pass) until `done` holds.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
        std::thread::sleep(Duration::from_millis(1));
    }
}

// Proves created, modified and removed events carry the right old/new values and versions,
// and metadata of the new entry (or of the old one for removals).
#[test]
fn write_events_carry_values_and_metadata() {
    let (_m, cache, _clock) = default_cache();
    let metadata = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&metadata);
    cache.add_listener(ListenerOptions::default(), move |event: &CacheEvent| {
        assert_eq!(event.cache_name(), "test");
        sink.lock().push(event.metadata().unwrap());
    });
    let seen = record(&cache, ListenerOptions::default());
    cache
        .put(b"k", b"one", &opts().lifespan(Duration::from_secs(5)))
        .unwrap();
    let v1 = cache.get_metadata(b"k").unwrap().unwrap().version;
    cache.put(b"k", b"two", &opts()).unwrap();
    let v2 = cache.get_metadata(b"k").unwrap().unwrap().version;
    cache.remove(b"k", &opts()).unwrap();
    let events = take(&seen);
    assert_eq!(
        events,
        vec![
            Seen {
                kind: EventKind::Created,
                key: b"k".to_vec(),
                old: None,
                new: Some(b"one".to_vec()),
                old_version: None,
                new_version: Some(v1),
            },
            Seen {
                kind: EventKind::Modified,
                key: b"k".to_vec(),
                old: Some(b"one".to_vec()),
                new: Some(b"two".to_vec()),
                old_version: Some(v1),
                new_version: Some(v2),
            },
            Seen {
                kind: EventKind::Removed,
                key: b"k".to_vec(),
                old: Some(b"two".to_vec()),
                new: None,
                old_version: Some(v2),
                new_version: None,
            },
        ]
    );
    let metadata = metadata.lock();
    assert_eq!(metadata.len(), 3);
    assert_eq!(metadata[0].version, v1);
    assert_eq!(metadata[0].lifespan_ms, Some(5_000));
    assert_eq!(metadata[1].version, v2);
    assert_eq!(metadata[1].lifespan_ms, None);
    assert_eq!(
        metadata[2].version, v2,
        "a removal reports the removed entry"
    );
}

// Proves expired and evicted events carry the departing entry's value and metadata.
#[test]
fn expired_and_evicted_events() {
    let (_m, cache, clock) = manual_cache(bounded_by_count(1));
    let seen = record(&cache, ListenerOptions::default());
    cache
        .put(b"a", b"va", &opts().lifespan(Duration::from_millis(10)))
        .unwrap();
    let va = cache.get_metadata(b"a").unwrap().unwrap().version;
    clock.advance_ms(11);
    assert!(cache.get(b"a").unwrap().is_none());
    cache.put(b"b", b"vb", &opts()).unwrap();
    let vb = cache.get_metadata(b"b").unwrap().unwrap().version;
    cache.put(b"c", b"vc", &opts()).unwrap();
    let events: Vec<Seen> = take(&seen)
        .into_iter()
        .filter(|e| e.kind != EventKind::Created)
        .collect();
    assert_eq!(
        events,
        vec![
            Seen {
                kind: EventKind::Expired,
                key: b"a".to_vec(),
                old: Some(b"va".to_vec()),
                new: None,
                old_version: Some(va),
                new_version: None,
            },
            Seen {
                kind: EventKind::Evicted,
                key: b"b".to_vec(),
                old: Some(b"vb".to_vec()),
                new: None,
                old_version: Some(vb),
                new_version: None,
            },
        ]
    );
}

// Proves compute, merge, replace, put_if_absent and the versioned writes raise the right kinds,
// and writes that change nothing raise none.
#[test]
fn every_write_path_raises_events() {
    let (_m, cache, _clock) = default_cache();
    let seen = record(&cache, ListenerOptions::default());
    let kinds = |seen: &Mutex<Vec<Seen>>| -> Vec<EventKind> {
        take(seen).into_iter().map(|e| e.kind).collect()
    };
    cache
        .compute(b"k", &opts(), |_| {
            Compute::Put(b"1".to_vec(), Expiry::default(), ())
        })
        .unwrap();
    cache
        .compute(b"k", &opts(), |_| {
            Compute::Put(b"2".to_vec(), Expiry::default(), ())
        })
        .unwrap();
    cache.compute(b"k", &opts(), |_| Compute::Keep(())).unwrap();
    cache
        .compute(b"k", &opts(), |_| Compute::Remove(()))
        .unwrap();
    cache
        .compute(b"k", &opts(), |_| Compute::Remove(()))
        .unwrap();
    assert_eq!(
        kinds(&seen),
        [EventKind::Created, EventKind::Modified, EventKind::Removed]
    );
    cache
        .merge(b"m", b"a", &opts(), |_, n| Some(n.to_vec()))
        .unwrap();
    cache
        .merge(b"m", b"b", &opts(), |_, n| Some(n.to_vec()))
        .unwrap();
    cache.merge(b"m", b"c", &opts(), |_, _| None).unwrap();
    assert_eq!(
        kinds(&seen),
        [EventKind::Created, EventKind::Modified, EventKind::Removed]
    );
    cache.replace(b"r", b"x", &opts()).unwrap(); // absent: nothing
    cache.put_if_absent(b"r", b"1", &opts()).unwrap();
    cache.put_if_absent(b"r", b"2", &opts()).unwrap(); // present: nothing
    cache.replace(b"r", b"3", &opts()).unwrap();
    let version = cache.get_metadata(b"r").unwrap().unwrap().version;
    cache
        .replace_if_version(b"r", version + 1, b"4", &opts())
        .unwrap(); // mismatch
    cache
        .replace_if_version(b"r", version, b"5", &opts())
        .unwrap();
    cache.remove_if_version(b"r", version, &opts()).unwrap(); // mismatch now
    let version = cache.get_metadata(b"r").unwrap().unwrap().version;
    cache.remove_if_version(b"r", version, &opts()).unwrap();
    cache.remove(b"r", &opts()).unwrap(); // absent: nothing
    assert_eq!(
        kinds(&seen),
        [
            EventKind::Created,
            EventKind::Modified,
            EventKind::Modified,
            EventKind::Removed
        ]
    );
    cache.put(b"x", b"1", &opts()).unwrap();
    cache.clear().unwrap();
    assert_eq!(kinds(&seen), [EventKind::Created], "clear raises no events");
}

// Proves a filter limits delivery to matching events.
#[test]
fn filters_select_events() {
    let (_m, cache, _clock) = default_cache();
    let seen = record(
        &cache,
        ListenerOptions::default().filter(|event| event.key().starts_with(b"user:")),
    );
    let everything = record(&cache, ListenerOptions::default());
    cache.put(b"user:1", b"v", &opts()).unwrap();
    cache.put(b"session:1", b"v", &opts()).unwrap();
    cache.put(b"user:2", b"v", &opts()).unwrap();
    cache.remove(b"user:1", &opts()).unwrap();
    let keys: Vec<Vec<u8>> = take(&seen).into_iter().map(|e| e.key).collect();
    assert_eq!(
        keys,
        [b"user:1".to_vec(), b"user:2".to_vec(), b"user:1".to_vec()]
    );
    assert_eq!(take(&everything).len(), 4);
}

// Proves a kind mask delivers only the chosen kinds, and has_listener_for reflects masks.
#[test]
fn kind_masks_select_events() {
    let (_m, cache, _clock) = default_cache();
    assert!(!cache.has_listener_for(EventKind::Created));
    let removals = record(
        &cache,
        ListenerOptions::default().kinds(EventKinds::NONE.with(EventKind::Removed)),
    );
    let writes = record(
        &cache,
        ListenerOptions::default().kinds(
            [EventKind::Created, EventKind::Modified]
                .into_iter()
                .collect(),
        ),
    );
    assert!(cache.has_listener_for(EventKind::Removed));
    assert!(cache.has_listener_for(EventKind::Created));
    assert!(!cache.has_listener_for(EventKind::Evicted));
    cache.put(b"k", b"1", &opts()).unwrap();
    cache.put(b"k", b"2", &opts()).unwrap();
    cache.remove(b"k", &opts()).unwrap();
    let removed: Vec<EventKind> = take(&removals).into_iter().map(|e| e.kind).collect();
    let written: Vec<EventKind> = take(&writes).into_iter().map(|e| e.kind).collect();
    assert_eq!(removed, [EventKind::Removed]);
    assert_eq!(written, [EventKind::Created, EventKind::Modified]);
}

// Proves synchronous delivery happens on the writer's thread before the write returns, with
// the segment lock released (the listener can read the cache and sees the new value).
#[test]
fn sync_delivery_before_write_returns() {
    let (_m, cache, _clock) = default_cache();
    let observed = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&observed);
    let reader = cache.clone();
    cache.add_listener(ListenerOptions::default(), move |event| {
        let now_visible = reader.get(event.key()).unwrap().map(|v| v.to_vec());
        sink.lock().push((std::thread::current().id(), now_visible));
    });
    for i in 0..100 {
        cache.put(&key("k", i), &key("v", i), &opts()).unwrap();
        let observed = observed.lock();
        assert_eq!(
            observed.len(),
            i + 1,
            "event {i} not delivered before put returned"
        );
        let (thread, visible) = &observed[i];
        assert_eq!(*thread, std::thread::current().id());
        assert_eq!(visible.as_deref(), Some(&key("v", i)[..]));
    }
}

// Proves asynchronous delivery delivers every event, in write order, on another thread.
#[test]
fn async_delivery_is_complete_and_ordered() {
    let (_m, cache, _clock) = default_cache();
    let (sender, receiver) = mpsc::channel();
    let sender = Mutex::new(sender);
    cache.add_listener(ListenerOptions::default().asynchronous(16), move |event| {
        let _ = sender.lock().send((
            std::thread::current().id(),
            event.kind(),
            event.key().to_vec(),
        ));
    });
    let writer = std::thread::current().id();
    for i in 0..2_000 {
        cache.put(&key("k", i), b"v", &opts()).unwrap();
    }
    for i in 0..2_000 {
        cache.remove(&key("k", i), &opts()).unwrap();
    }
    for i in 0..4_000 {
        let (thread, kind, k) = receiver.recv_timeout(PATIENCE).unwrap();
        assert_ne!(
            thread, writer,
            "asynchronous events run on the listener's thread"
        );
        let expected = if i < 2_000 {
            EventKind::Created
        } else {
            EventKind::Removed
        };
        assert_eq!((kind, k), (expected, key("k", i % 2_000)), "event {i}");
    }
    assert!(receiver.try_recv().is_err(), "no extra events");
}

// Proves a full asynchronous queue makes the writer wait: with a blocked handler and a queue
// of N, exactly N+1 writes complete (one event in the handler, N queued), the wait is
// counted, and every event arrives in order once the handler is released.
#[test]
fn async_queue_back_pressure() {
    const CAPACITY: usize = 4;
    const WRITES: usize = 20;
    let (_m, cache, _clock) = default_cache();
    let (gate_open, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let entered = Arc::new(AtomicUsize::new(0));
    {
        let delivered = Arc::clone(&delivered);
        let entered = Arc::clone(&entered);
        cache.add_listener(
            ListenerOptions::default().asynchronous(CAPACITY),
            move |event| {
                if entered.fetch_add(1, Ordering::SeqCst) == 0 {
                    // The first event holds the handler until the test opens the gate.
                    gate.lock().recv().unwrap();
                }
                delivered.lock().push(event.key().to_vec());
            },
        );
    }
    let completed = Arc::new(AtomicUsize::new(0));
    let writer = {
        let cache = cache.clone();
        let completed = Arc::clone(&completed);
        std::thread::spawn(move || {
            for i in 0..WRITES {
                cache
                    .put(&key("k", i), b"v", &WriteOptions::default())
                    .unwrap();
                completed.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    wait_until("the writer to block on the full queue", || {
        entered.load(Ordering::SeqCst) == 1
            && completed.load(Ordering::SeqCst) == CAPACITY + 1
            && cache.listener_backpressure_waits() > 0
    });
    // Still blocked a while later: the writer is waiting, not slow.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(completed.load(Ordering::SeqCst), CAPACITY + 1);
    assert!(delivered.lock().is_empty());
    assert!(!writer.is_finished());

    gate_open.send(()).unwrap();
    writer.join().unwrap();
    wait_until("every event to be delivered", || {
        delivered.lock().len() == WRITES
    });
    let expected: Vec<Vec<u8>> = (0..WRITES).map(|i| key("k", i)).collect();
    assert_eq!(*delivered.lock(), expected);
    assert!(cache.listener_backpressure_waits() >= 1);
}

// Proves skip_listeners suppresses the events of that write only.
#[test]
fn skip_listeners_suppresses_events() {
    let (_m, cache, _clock) = default_cache();
    let seen = record(&cache, ListenerOptions::default());
    let quiet = opts().skip_listeners();
    cache.put(b"k", b"1", &quiet).unwrap();
    cache.put(b"k", b"2", &quiet).unwrap();
    cache.replace(b"k", b"3", &quiet).unwrap();
    cache
        .compute(b"k", &quiet, |_| {
            Compute::Put(b"4".to_vec(), Expiry::default(), ())
        })
        .unwrap();
    cache.remove(b"k", &quiet).unwrap();
    assert!(take(&seen).is_empty());
    cache.put(b"k", b"5", &opts()).unwrap();
    assert_eq!(take(&seen).len(), 1);
}

// Proves remove_listener stops delivery to that listener only.
#[test]
fn remove_listener_stops_delivery() {
    let (_m, cache, _clock) = default_cache();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&count);
    let id = cache.add_listener(ListenerOptions::default(), move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    let other = record(&cache, ListenerOptions::default());
    cache.put(b"a", b"v", &opts()).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(cache.remove_listener(id));
    assert!(!cache.remove_listener(id), "already removed");
    cache.put(b"b", b"v", &opts()).unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(take(&other).len(), 2, "other listeners still hear");

    // An asynchronous listener stops too, after delivering what was queued.
    let (sender, receiver) = mpsc::channel();
    let sender = Mutex::new(sender);
    let id = cache.add_listener(ListenerOptions::default().asynchronous(8), move |event| {
        let _ = sender.lock().send(event.key().to_vec());
    });
    cache.put(b"c", b"v", &opts()).unwrap();
    assert!(cache.remove_listener(id));
    cache.put(b"d", b"v", &opts()).unwrap();
    assert_eq!(receiver.recv_timeout(PATIENCE).unwrap(), b"c");
    // The listener thread ends once its queue is drained, dropping the sender.
    assert!(matches!(
        receiver.recv_timeout(PATIENCE),
        Err(mpsc::RecvTimeoutError::Disconnected)
    ));
}

// Proves an asynchronous listener may write to the cache it listens to even when its own
// queue is full: its thread must not wait for itself to drain the queue.
#[test]
fn async_listener_writing_to_its_cache_does_not_deadlock() {
    let (_m, cache, _clock) = default_cache();
    let writer = cache.clone();
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    let queue_full = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let full = Arc::clone(&queue_full);
    cache.add_listener(
        ListenerOptions::default()
            .kinds(EventKinds::NONE.with(EventKind::Created))
            .asynchronous(1),
        move |event| {
            if event.key() == b"user-0" {
                // Hold the first event until the writer has filled the queue.
                wait_until("the queue to fill", || full.load(Ordering::SeqCst));
            }
            if event.key().starts_with(b"user") {
                let echo = [&b"echo-"[..], event.key()].concat();
                writer.put(&echo, b"v", &opts()).unwrap();
            }
            counter.fetch_add(1, Ordering::SeqCst);
        },
    );
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let finished = Arc::clone(&done);
    let main_writer = cache.clone();
    // The scenario runs on its own thread so that a deadlock fails the test instead of
    // hanging it.
    std::thread::spawn(move || {
        main_writer.put(b"user-0", b"v", &opts()).unwrap();
        main_writer.put(b"user-1", b"v", &opts()).unwrap();
        queue_full.store(true, Ordering::SeqCst);
        finished.store(true, Ordering::SeqCst);
    });
    wait_until("both writes", || done.load(Ordering::SeqCst));
    wait_until("all four events", || handled.load(Ordering::SeqCst) == 4);
    assert!(cache.contains(b"echo-user-0").unwrap());
    assert!(cache.contains(b"echo-user-1").unwrap());
}
