//! Changes submitted but not yet committed: the queue the writer drains, what a load must
//! see before the database does, and how a batch becomes statements.
//!
//! Pure data structures, no I/O: the store holds a [`Queue`] under its mutex.
//!
//! The queue keeps whole entries, not value bytes: a load answered from it gets the client
//! flags and the structure too. A structure entry shares its cell with the cache, so the
//! queue costs a reference, not a copy; the writer encodes it when it applies the batch.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use weft_core::CacheEntry;

/// One submitted change.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// Upsert this entry (bytes with client flags, or a structure).
    Write { segment: u32, entry: CacheEntry },
    /// Delete this key (its segment is not needed: the key is the primary key).
    Delete { key: Bytes },
    /// Delete every entry of these segments.
    RemoveSegments(Arc<[u32]>),
    /// Delete every entry.
    Clear,
}

impl Change {
    /// Bytes the change sends to the database, roughly (for batch limits).
    fn bytes(&self) -> usize {
        match self {
            // A structure's charge estimates its heap bytes, about what its encoding takes.
            Change::Write { entry, .. } => {
                entry.key().len() + entry.value().len() + entry.structure_charge() + 64
            }
            Change::Delete { key, .. } => key.len() + 8,
            Change::RemoveSegments(segments) => segments.len() * 4,
            Change::Clear => 8,
        }
    }
}

/// A change and its position.
#[derive(Debug, Clone)]
pub(crate) struct Queued {
    pub(crate) position: u64,
    pub(crate) change: Change,
}

/// The newest uncommitted change of one key.
#[derive(Debug)]
struct Latest {
    position: u64,
    /// `None` for a delete.
    entry: Option<CacheEntry>,
}

/// What the uncommitted changes say about one key.
#[derive(Debug)]
pub(crate) enum Pending {
    /// Nothing uncommitted touches the key: the database has the answer.
    Unknown,
    /// The newest uncommitted change of the key is this entry.
    Written(CacheEntry),
    /// The newest uncommitted change deletes the key (a delete, a segment removal, a clear).
    Deleted,
}

/// Submitted changes not yet settled (committed or failed), in submission order.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Changes the writer has not taken yet.
    waiting: VecDeque<Queued>,
    /// The newest unsettled write or delete of each key, taken or not.
    latest: HashMap<Bytes, Latest>,
    /// Unsettled segment removals and clears (`None` = every segment), oldest first.
    barriers: VecDeque<(u64, Option<Arc<[u32]>>)>,
}

impl Queue {
    /// Changes waiting to be taken by the writer.
    pub(crate) fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    /// Appends a change at `position` (positions only grow).
    pub(crate) fn push(&mut self, position: u64, change: Change) {
        debug_assert!(
            self.waiting
                .back()
                .is_none_or(|last| last.position < position),
            "positions must grow"
        );
        match &change {
            Change::Write { entry, .. } => {
                self.latest.insert(
                    Bytes::copy_from_slice(entry.key()),
                    Latest {
                        position,
                        entry: Some(entry.clone()),
                    },
                );
            }
            Change::Delete { key, .. } => {
                self.latest.insert(
                    key.clone(),
                    Latest {
                        position,
                        entry: None,
                    },
                );
            }
            Change::RemoveSegments(segments) => {
                self.barriers
                    .push_back((position, Some(Arc::clone(segments))));
            }
            Change::Clear => self.barriers.push_back((position, None)),
        }
        self.waiting.push_back(Queued { position, change });
    }

    /// What unsettled changes say about `key` in `segment`.
    pub(crate) fn lookup(&self, segment: u32, key: &[u8]) -> Pending {
        let barrier = self
            .barriers
            .iter()
            .rev()
            .find(|(_, segments)| segments.as_ref().is_none_or(|s| s.contains(&segment)))
            .map(|(position, _)| *position);
        match (self.latest.get(key), barrier) {
            (Some(latest), Some(barrier)) if latest.position < barrier => Pending::Deleted,
            (Some(latest), _) => match &latest.entry {
                Some(entry) => Pending::Written(entry.clone()),
                None => Pending::Deleted,
            },
            (None, Some(_)) => Pending::Deleted,
            (None, None) => Pending::Unknown,
        }
    }

    /// Takes the oldest waiting changes for one transaction: at most `changes_max` of them and
    /// about `bytes_max` bytes, but always at least one if any wait.
    pub(crate) fn take(&mut self, changes_max: usize, bytes_max: usize) -> Vec<Queued> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(next) = self.waiting.front() {
            let next_bytes = next.change.bytes();
            if !batch.is_empty() && (batch.len() >= changes_max || bytes + next_bytes > bytes_max) {
                break;
            }
            bytes += next_bytes;
            if let Some(next) = self.waiting.pop_front() {
                batch.push(next);
            }
        }
        batch
    }

    /// Forgets a taken batch once it is settled (committed, or failed and reported): from
    /// now on the database alone answers for its keys.
    pub(crate) fn settle(&mut self, batch: &[Queued]) {
        let Some(last) = batch.last().map(|queued| queued.position) else {
            return;
        };
        for queued in batch {
            let key = match &queued.change {
                Change::Write { entry, .. } => entry.key(),
                Change::Delete { key, .. } => key,
                Change::RemoveSegments(_) | Change::Clear => continue,
            };
            if self
                .latest
                .get(key)
                .is_some_and(|latest| latest.position == queued.position)
            {
                self.latest.remove(key);
            }
        }
        while self
            .barriers
            .front()
            .is_some_and(|(position, _)| *position <= last)
        {
            self.barriers.pop_front();
        }
    }
}

/// One statement of a batch's transaction.
#[derive(Debug)]
pub(crate) enum Step {
    /// Upserts and deletes of distinct keys (so their order does not matter), sorted by
    /// key so that concurrent writers of a shared table lock rows in one order.
    Keys {
        upserts: Vec<(u32, CacheEntry)>,
        deletes: Vec<Bytes>,
    },
    /// Delete the entries of these segments.
    RemoveSegments(Arc<[u32]>),
    /// Delete every entry.
    Clear,
}

/// Turns a batch into statements: between two segment removals or clears, only the newest
/// change of each key is kept; removals and clears stay where they were.
pub(crate) fn plan(batch: &[Queued]) -> Vec<Step> {
    fn close(run: &mut BTreeMap<Bytes, Option<(u32, CacheEntry)>>, steps: &mut Vec<Step>) {
        if run.is_empty() {
            return;
        }
        let mut upserts = Vec::new();
        let mut deletes = Vec::new();
        for (key, change) in std::mem::take(run) {
            match change {
                Some(write) => upserts.push(write),
                None => deletes.push(key),
            }
        }
        steps.push(Step::Keys { upserts, deletes });
    }
    let mut steps = Vec::new();
    let mut run: BTreeMap<Bytes, Option<(u32, CacheEntry)>> = BTreeMap::new();
    for queued in batch {
        match &queued.change {
            Change::Write { segment, entry } => {
                run.insert(
                    Bytes::copy_from_slice(entry.key()),
                    Some((*segment, entry.clone())),
                );
            }
            Change::Delete { key, .. } => {
                run.insert(key.clone(), None);
            }
            Change::RemoveSegments(segments) => {
                close(&mut run, &mut steps);
                steps.push(Step::RemoveSegments(Arc::clone(segments)));
            }
            Change::Clear => {
                close(&mut run, &mut steps);
                steps.push(Step::Clear);
            }
        }
    }
    close(&mut run, &mut steps);
    steps
}

#[cfg(test)]
mod tests {
    use weft_core::entry::StoredExpiration;

    use super::*;

    fn write(key: &[u8], value: &[u8]) -> Change {
        Change::Write {
            segment: 1,
            entry: CacheEntry::restored(key, value, StoredExpiration::IMMORTAL, 0, 1),
        }
    }

    fn delete(key: &[u8]) -> Change {
        Change::Delete {
            key: Bytes::copy_from_slice(key),
        }
    }

    fn queue(changes: Vec<Change>) -> Queue {
        let mut queue = Queue::default();
        for (position, change) in (1..).zip(changes) {
            queue.push(position, change);
        }
        queue
    }

    /// Proves a pending write is answered whole: client flags and the structure itself (the
    /// same cell, so later changes to it show), not just the value bytes.
    #[test]
    fn lookup_keeps_flags_and_structures() {
        use weft_core::structure::{ListValue, Structure};
        use weft_core::{Payload, StructureCell};
        let cell = StructureCell::new(Structure::List(ListValue::default()));
        if let Structure::List(list) = &mut *cell.lock() {
            list.push_back(Bytes::from_static(b"item"));
        }
        let flagged = CacheEntry::restored_payload(
            b"flagged",
            Payload::Bytes(b"v", 0xdead_beef),
            StoredExpiration::IMMORTAL,
            0,
            1,
        );
        let list = CacheEntry::restored_payload(
            b"list",
            Payload::Structure(&cell, 1_000_000),
            StoredExpiration::IMMORTAL,
            0,
            2,
        );
        let mut queue = Queue::default();
        queue.push(
            1,
            Change::Write {
                segment: 1,
                entry: flagged,
            },
        );
        queue.push(
            2,
            Change::Write {
                segment: 1,
                entry: list,
            },
        );
        let Pending::Written(found) = queue.lookup(1, b"flagged") else {
            panic!("the flagged write is pending");
        };
        assert_eq!(
            (found.value(), found.user_flags()),
            (&b"v"[..], 0xdead_beef)
        );
        let Pending::Written(found) = queue.lookup(1, b"list") else {
            panic!("the list write is pending");
        };
        assert!(found.structure().is_some_and(|c| Arc::ptr_eq(c, &cell)));
        // The structure's charge counts toward the batch's bytes.
        assert_eq!(queue.take(100, 1_000).len(), 1);
        assert_eq!(queue.take(100, 1_000).len(), 1);
    }

    fn value(pending: Pending) -> Option<Option<Vec<u8>>> {
        match pending {
            Pending::Unknown => None,
            Pending::Written(entry) => Some(Some(entry.value().to_vec())),
            Pending::Deleted => Some(None),
        }
    }

    /// A load sees the newest pending change of its key, and barriers after it.
    #[test]
    fn lookup_sees_the_newest_pending_change() {
        let queue = queue(vec![
            write(b"a", b"1"),
            write(b"a", b"2"),
            write(b"b", b"1"),
            delete(b"b"),
            write(b"c", b"1"),
            Change::RemoveSegments(Arc::from([1u32])),
            write(b"d", b"1"),
        ]);
        assert_eq!(
            value(queue.lookup(1, b"a")),
            Some(None),
            "removed with segment 1"
        );
        assert_eq!(
            value(queue.lookup(2, b"x")),
            None,
            "nothing touches segment 2"
        );
        assert_eq!(
            value(queue.lookup(1, b"x")),
            Some(None),
            "segment 1 was removed"
        );
        assert_eq!(value(queue.lookup(1, b"d")), Some(Some(b"1".to_vec())));
        let queue = self::queue(vec![write(b"a", b"1"), write(b"a", b"2"), delete(b"b")]);
        assert_eq!(value(queue.lookup(1, b"a")), Some(Some(b"2".to_vec())));
        assert_eq!(value(queue.lookup(1, b"b")), Some(None));
        let queue = self::queue(vec![write(b"a", b"1"), Change::Clear]);
        assert_eq!(
            value(queue.lookup(9, b"z")),
            Some(None),
            "a clear hides everything"
        );
    }

    /// Settling a batch forgets its changes but not newer ones of the same keys.
    #[test]
    fn settle_keeps_newer_changes() {
        let mut queue = queue(vec![write(b"a", b"1"), Change::Clear]);
        let first = queue.take(1, usize::MAX);
        assert_eq!(first.len(), 1);
        queue.push(3, write(b"a", b"3"));
        queue.settle(&first);
        assert_eq!(value(queue.lookup(1, b"a")), Some(Some(b"3".to_vec())));
        let rest = queue.take(100, usize::MAX);
        assert_eq!(rest.len(), 2);
        queue.settle(&rest);
        assert_eq!(value(queue.lookup(1, b"a")), None);
        assert_eq!(value(queue.lookup(1, b"b")), None);
        assert_eq!(queue.waiting_len(), 0);
    }

    /// A batch is cut by count and by bytes, but never empty.
    #[test]
    fn take_respects_limits() {
        let mut queue = queue((0..10).map(|i: u8| write(&[i], &[0; 100])).collect());
        assert_eq!(queue.take(4, usize::MAX).len(), 4);
        assert_eq!(
            queue.take(100, 1).len(),
            1,
            "one oversize change still goes"
        );
        assert_eq!(queue.take(100, 400).len(), 2);
        assert_eq!(queue.take(100, usize::MAX).len(), 3);
        assert!(queue.take(100, usize::MAX).is_empty());
    }

    /// Planning keeps the newest change per key between barriers, and the barriers' order.
    #[test]
    fn plan_coalesces_per_key_between_barriers() {
        let mut queue = queue(vec![
            write(b"b", b"1"),
            write(b"a", b"1"),
            delete(b"b"),
            write(b"a", b"2"),
            Change::Clear,
            delete(b"c"),
            write(b"c", b"1"),
            Change::RemoveSegments(Arc::from([4u32, 5])),
        ]);
        let steps = plan(&queue.take(100, usize::MAX));
        assert_eq!(steps.len(), 4, "{steps:?}");
        let Step::Keys { upserts, deletes } = &steps[0] else {
            panic!("{steps:?}")
        };
        assert_eq!(upserts.len(), 1);
        assert_eq!(upserts[0].1.value(), b"2");
        assert_eq!(deletes, &vec![Bytes::from_static(b"b")]);
        assert!(matches!(steps[1], Step::Clear));
        let Step::Keys { upserts, deletes } = &steps[2] else {
            panic!("{steps:?}")
        };
        assert_eq!((upserts.len(), deletes.len()), (1, 0));
        assert!(matches!(&steps[3], Step::RemoveSegments(s) if s[..] == [4, 5]));
    }
}
