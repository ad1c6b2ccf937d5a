//! Model-based test: random sequences of operations, including clock moves and purges, run
//! against a cache and against a plain `BTreeMap` model tracking values, versions and expiry
//! deadlines; every result and, after every step, the whole live set must agree.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{T0, manual_cache};
use proptest::prelude::*;
use weft_core::{Cache, CacheConfig, CacheEntry, Compute, Expiry, VersionedOutcome, WriteOptions};

const KEYS: u8 = 6;

#[derive(Debug, Clone)]
enum Op {
    Put {
        key: u8,
        value: u8,
        lifespan: Option<u64>,
        max_idle: Option<u64>,
        keep: bool,
    },
    PutIfAbsent {
        key: u8,
        value: u8,
        lifespan: Option<u64>,
    },
    Replace {
        key: u8,
        value: u8,
        max_idle: Option<u64>,
    },
    ReplaceIfVersion {
        key: u8,
        value: u8,
        right: bool,
    },
    Remove {
        key: u8,
    },
    RemoveIfVersion {
        key: u8,
        right: bool,
    },
    Increment {
        key: u8,
    },
    Get {
        key: u8,
    },
    Contains {
        key: u8,
    },
    Clear,
    Advance {
        ms: u64,
    },
    Purge,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    let value = any::<u8>();
    let lifetime = proptest::option::of(0u64..200);
    prop_oneof![
        4 => (key.clone(), value, lifetime.clone(), lifetime.clone(), proptest::bool::weighted(0.2))
            .prop_map(|(key, value, lifespan, max_idle, keep)| Op::Put { key, value, lifespan, max_idle, keep }),
        2 => (key.clone(), value, lifetime.clone())
            .prop_map(|(key, value, lifespan)| Op::PutIfAbsent { key, value, lifespan }),
        2 => (key.clone(), value, lifetime.clone())
            .prop_map(|(key, value, max_idle)| Op::Replace { key, value, max_idle }),
        2 => (key.clone(), value, any::<bool>())
            .prop_map(|(key, value, right)| Op::ReplaceIfVersion { key, value, right }),
        2 => key.clone().prop_map(|key| Op::Remove { key }),
        2 => (key.clone(), any::<bool>()).prop_map(|(key, right)| Op::RemoveIfVersion { key, right }),
        2 => key.clone().prop_map(|key| Op::Increment { key }),
        3 => key.clone().prop_map(|key| Op::Get { key }),
        1 => key.prop_map(|key| Op::Contains { key }),
        1 => Just(Op::Clear),
        3 => (0u64..120).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Purge),
    ]
}

#[derive(Debug, Clone)]
struct ModelEntry {
    value: Vec<u8>,
    version: u64,
    deadline: Option<u64>,
    max_idle: Option<u64>,
    last_used: u64,
}

impl ModelEntry {
    fn expires_at(&self) -> Option<u64> {
        let idle = self.max_idle.map(|m| self.last_used + m);
        match (self.deadline, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn alive(&self, now: u64) -> bool {
        self.expires_at().is_none_or(|at| now <= at)
    }
}

struct Model {
    now: u64,
    entries: BTreeMap<Vec<u8>, ModelEntry>,
    max_version: u64,
}

impl Model {
    /// Drops `key` if it has expired (as any operation on the key does in the cache) and
    /// returns its live entry.
    fn live(&mut self, key: &[u8]) -> Option<ModelEntry> {
        let now = self.now;
        if self.entries.get(key).is_some_and(|e| !e.alive(now)) {
            self.entries.remove(key);
        }
        self.entries.get(key).cloned()
    }

    fn touch(&mut self, key: &[u8]) {
        let now = self.now;
        if let Some(entry) = self.entries.get_mut(key) {
            entry.last_used = now;
        }
    }

    /// Records a stored entry, checking its version against every version seen before.
    fn store(&mut self, cache: &Cache, key: &[u8], deadline: Option<u64>, max_idle: Option<u64>) {
        let stored = peek(cache, key).expect("a stored entry is live");
        assert!(
            stored.version() > self.max_version,
            "version {} not above {}",
            stored.version(),
            self.max_version
        );
        self.max_version = stored.version();
        self.entries.insert(
            key.to_vec(),
            ModelEntry {
                value: stored.value().to_vec(),
                version: stored.version(),
                deadline,
                max_idle,
                last_used: self.now,
            },
        );
    }
}

/// The live entry of `key`, read without touching it (iteration does not count as access).
fn peek(cache: &Cache, key: &[u8]) -> Option<CacheEntry> {
    cache
        .iter_segments(vec![cache.segment_of(key)])
        .find(|e| e.key() == key)
}

fn key_bytes(key: u8) -> Vec<u8> {
    vec![b'k', b'0' + key]
}

fn options(lifespan: Option<u64>, max_idle: Option<u64>) -> WriteOptions {
    let mut options = WriteOptions::default();
    if let Some(ms) = lifespan {
        options = options.lifespan(Duration::from_millis(ms));
    }
    if let Some(ms) = max_idle {
        options = options.max_idle(Duration::from_millis(ms));
    }
    options
}

fn value_of(entry: Option<CacheEntry>) -> Option<Vec<u8>> {
    entry.map(|e| e.value().to_vec())
}

fn run(segments: u32, ops: &[Op]) {
    let config = CacheConfig {
        segments,
        ..CacheConfig::default()
    };
    let (_manager, cache, clock) = manual_cache(config);
    let mut model = Model {
        now: T0,
        entries: BTreeMap::new(),
        max_version: 0,
    };
    for (step, op) in ops.iter().enumerate() {
        apply(&cache, &clock, &mut model, op);
        cache.check_invariants();
        assert_eq!(
            cache.size(),
            model.entries.len(),
            "size after step {step}: {op:?}"
        );
        check_live_set(&cache, &model, step, op);
    }
}

fn check_live_set(cache: &Cache, model: &Model, step: usize, op: &Op) {
    let actual: BTreeMap<Vec<u8>, (Vec<u8>, u64, Option<u64>)> = cache
        .iter()
        .map(|e| {
            (
                e.key().to_vec(),
                (
                    e.value().to_vec(),
                    e.version(),
                    e.metadata().expires_at_ms(),
                ),
            )
        })
        .collect();
    let expected: BTreeMap<Vec<u8>, (Vec<u8>, u64, Option<u64>)> = model
        .entries
        .iter()
        .filter(|(_, e)| e.alive(model.now))
        .map(|(k, e)| (k.clone(), (e.value.clone(), e.version, e.expires_at())))
        .collect();
    assert_eq!(actual, expected, "live set after step {step}: {op:?}");
}

fn apply(cache: &Cache, clock: &weft_core::ManualClock, model: &mut Model, op: &Op) {
    let now = model.now;
    match *op {
        Op::Put {
            key,
            value,
            lifespan,
            max_idle,
            keep,
        } => {
            let k = key_bytes(key);
            let previous = model.live(&k);
            let (write_options, deadline, idle) = if keep {
                let (deadline, idle) = previous
                    .as_ref()
                    .map_or((None, None), |p| (p.deadline, p.max_idle));
                (WriteOptions::default().expiry(Expiry::KEEP), deadline, idle)
            } else {
                (
                    options(lifespan, max_idle),
                    lifespan.map(|l| now + l),
                    max_idle,
                )
            };
            let returned = cache.put(&k, &[value], &write_options).unwrap();
            assert_eq!(value_of(returned), previous.map(|p| p.value));
            model.store(cache, &k, deadline, idle);
        }
        Op::PutIfAbsent {
            key,
            value,
            lifespan,
        } => {
            let k = key_bytes(key);
            let existing = model.live(&k);
            let returned = cache
                .put_if_absent(&k, &[value], &options(lifespan, None))
                .unwrap();
            assert_eq!(
                value_of(returned),
                existing.as_ref().map(|p| p.value.clone())
            );
            if existing.is_none() {
                model.store(cache, &k, lifespan.map(|l| now + l), None);
            }
        }
        Op::Replace {
            key,
            value,
            max_idle,
        } => {
            let k = key_bytes(key);
            let previous = model.live(&k);
            let returned = cache
                .replace(&k, &[value], &options(None, max_idle))
                .unwrap();
            assert_eq!(
                value_of(returned),
                previous.as_ref().map(|p| p.value.clone())
            );
            if previous.is_some() {
                model.store(cache, &k, None, max_idle);
            }
        }
        Op::ReplaceIfVersion { key, value, right } => {
            let k = key_bytes(key);
            let current = model.live(&k);
            let version = match (&current, right) {
                (Some(c), true) => c.version,
                (Some(c), false) => c.version + 1,
                (None, _) => model.max_version,
            };
            let outcome = cache
                .replace_if_version(&k, version, &[value], &WriteOptions::default())
                .unwrap();
            match (current, right, outcome) {
                (Some(c), true, VersionedOutcome::Done(previous)) => {
                    assert_eq!(previous.value(), c.value);
                    model.store(cache, &k, None, None);
                }
                (Some(c), false, VersionedOutcome::Mismatch(found)) => {
                    assert_eq!((found.value(), found.version()), (&c.value[..], c.version));
                }
                (None, _, VersionedOutcome::Absent) => {}
                (c, right, outcome) => panic!("model {c:?} right {right}: got {outcome:?}"),
            }
        }
        Op::Remove { key } => {
            let k = key_bytes(key);
            let previous = model.live(&k);
            let returned = cache.remove(&k, &WriteOptions::default()).unwrap();
            assert_eq!(value_of(returned), previous.map(|p| p.value));
            model.entries.remove(&k);
        }
        Op::RemoveIfVersion { key, right } => {
            let k = key_bytes(key);
            let current = model.live(&k);
            let version = match (&current, right) {
                (Some(c), true) => c.version,
                (Some(c), false) => c.version.wrapping_sub(1),
                (None, _) => 1,
            };
            let outcome = cache
                .remove_if_version(&k, version, &WriteOptions::default())
                .unwrap();
            match (current, right, outcome) {
                (Some(c), true, VersionedOutcome::Done(removed)) => {
                    assert_eq!(removed.value(), c.value);
                    model.entries.remove(&k);
                }
                (Some(c), false, VersionedOutcome::Mismatch(found)) => {
                    assert_eq!(found.version(), c.version);
                }
                (None, _, VersionedOutcome::Absent) => {}
                (c, right, outcome) => panic!("model {c:?} right {right}: got {outcome:?}"),
            }
        }
        Op::Increment { key } => {
            let k = key_bytes(key);
            let previous = model.live(&k);
            let seen = cache
                .compute(&k, &WriteOptions::default(), |existing| {
                    let old = existing.map(|e| e.value().to_vec());
                    let next = old.as_ref().map_or(vec![0], |v| {
                        vec![v.first().copied().unwrap_or(0).wrapping_add(1)]
                    });
                    Compute::Put(next, Expiry::KEEP, old)
                })
                .unwrap();
            assert_eq!(seen, previous.as_ref().map(|p| p.value.clone()));
            let (deadline, idle) = previous.map_or((None, None), |p| (p.deadline, p.max_idle));
            model.store(cache, &k, deadline, idle);
        }
        Op::Get { key } => {
            let k = key_bytes(key);
            let expected = model.live(&k);
            let got = cache.get(&k).unwrap().map(|v| v.to_vec());
            assert_eq!(got, expected.map(|e| e.value));
            model.touch(&k);
        }
        Op::Contains { key } => {
            let k = key_bytes(key);
            let expected = model.live(&k);
            assert_eq!(cache.contains(&k).unwrap(), expected.is_some());
            model.touch(&k);
        }
        Op::Clear => {
            cache.clear().unwrap();
            model.entries.clear();
        }
        Op::Advance { ms } => {
            clock.advance_ms(ms);
            model.now += ms;
        }
        Op::Purge => {
            let expired = model.entries.values().filter(|e| !e.alive(now)).count();
            assert_eq!(cache.purge_expired(), expired);
            model.entries.retain(|_, e| e.alive(now));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    // Proves a 4-segment cache behaves like the model for any sequence of operations.
    #[test]
    fn matches_model_4_segments(ops in proptest::collection::vec(op(), 1..80)) {
        run(4, &ops);
    }

    // Proves a 256-segment cache behaves like the model for any sequence of operations.
    #[test]
    fn matches_model_256_segments(ops in proptest::collection::vec(op(), 1..80)) {
        run(256, &ops);
    }
}
