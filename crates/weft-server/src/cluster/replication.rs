//! Primary → backup replication, through the cache's persistence seam.
//!
//! A clustered cache's `Persistence` is a [`Replicator`] wrapped around its own stores (if
//! any). The cache calls [`Persistence::record`] under the key's segment lock for every write
//! it applies, so the changes a primary hands to each backup's [`Stream`] are in the order
//! it applied them; one connection per backup keeps that order on the wire, and the backup
//! applies them in order. A sync cache's write is acknowledged once every backup it went to
//! has answered (the server awaits [`Persistence::wait_async`] before replying, exactly as
//! for a store's fsync); an async cache's write does not wait.
//!
//! A backup that stops answering holds acknowledgements back until the topology drops it
//! (failure detection, then a new topology through consensus), or until
//! [`UNREACHABLE_WAIT`] passes, when the write fails — it was applied on the primary, but is
//! not acknowledged.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use weft_cluster::MemberId;
use weft_cluster::wire::{EntryImage, Replica, Request, Response};
use weft_core::persistence::BoxFuture;
use weft_core::{CacheEntry, Persistence, PersistenceError, PersistenceStats, StoreChange};

use super::routing::Routing;
use super::transport::Transport;

/// How long a write waits on a backup that does not answer before it fails.
pub const UNREACHABLE_WAIT: Duration = Duration::from_secs(15);
/// Changes sent to one backup in one frame, at most.
const BATCH_MAX: usize = 512;

thread_local! {
    static APPLYING_REMOTE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` as the application of changes another node decided: they reach this node's
/// stores but are not replicated again.
pub fn applying_remote<R>(f: impl FnOnce() -> R) -> R {
    let outer = APPLYING_REMOTE.with(|flag| flag.replace(true));
    let result = f();
    APPLYING_REMOTE.with(|flag| flag.set(outer));
    result
}

/// How far a backup's stream is.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Changes the backup acknowledged (a sequence number).
    acked: u64,
    /// The connection failed; waiters hold until the stream is retired or time runs out.
    broken: bool,
    /// The backup left the topology: nothing more is owed to it.
    retired: bool,
}

/// The ordered changes owed to one backup.
#[derive(Debug)]
pub struct Stream {
    member: MemberId,
    queue: Mutex<(Vec<Replica>, u64)>,
    wake: Notify,
    progress: watch::Sender<Progress>,
}

impl Stream {
    fn push(&self, replica: Replica) {
        let mut queue = self.queue.lock();
        queue.0.push(replica);
        queue.1 += 1;
        drop(queue);
        self.wake.notify_one();
    }

    fn queued(&self) -> u64 {
        self.queue.lock().1
    }

    /// Waits until the backup acknowledged change `sequence`, or was retired.
    async fn reached(&self, sequence: u64) -> Result<(), String> {
        let mut progress = self.progress.subscribe();
        let waited = tokio::time::timeout(UNREACHABLE_WAIT, async {
            loop {
                let now = *progress.borrow_and_update();
                if now.retired || now.acked >= sequence {
                    return;
                }
                if progress.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        match waited {
            Ok(()) => Ok(()),
            Err(_) => Err(format!(
                "backup owner {} did not acknowledge the write in time",
                self.member
            )),
        }
    }

    /// Sends queued changes in batches, in order, and records acknowledgements.
    async fn run(self: Arc<Self>, transport: Transport, to: SocketAddr) {
        loop {
            if self.progress.borrow().retired {
                return;
            }
            let (batch, last) = {
                let mut queue = self.queue.lock();
                let take = queue.0.len().min(BATCH_MAX);
                let batch: Vec<Replica> = queue.0.drain(..take).collect();
                let last = queue.1 - queue.0.len() as u64;
                (batch, last)
            };
            if batch.is_empty() {
                self.wake.notified().await;
                continue;
            }
            let answer = transport.send(to, Request::Replicate(batch));
            let stream = Arc::clone(&self);
            // Responses come back in order on one connection: acknowledge as they arrive,
            // while the next batch is already on its way.
            tokio::spawn(async move {
                match answer.await {
                    Ok(Response::Applied) => stream.progress.send_modify(|progress| {
                        progress.acked = progress.acked.max(last);
                    }),
                    Ok(other) => {
                        tracing::warn!(backup = %stream.member, ?other, "backup refused replicated changes");
                        stream
                            .progress
                            .send_modify(|progress| progress.broken = true);
                    }
                    Err(_) => {
                        tracing::debug!(backup = %stream.member, "backup unreachable");
                        stream
                            .progress
                            .send_modify(|progress| progress.broken = true);
                    }
                }
            });
        }
    }

    fn retire(&self) {
        self.progress
            .send_modify(|progress| progress.retired = true);
        self.wake.notify_one();
    }
}

/// The replication streams of this node, one per backup member.
#[derive(Debug)]
pub struct Replication {
    routing: Arc<Routing>,
    transport: Transport,
    streams: Mutex<HashMap<MemberId, Arc<Stream>>>,
}

impl Replication {
    /// Replication over `transport`, to the owners `routing` names.
    #[must_use]
    pub fn new(routing: Arc<Routing>, transport: Transport) -> Self {
        Self {
            routing,
            transport,
            streams: Mutex::new(HashMap::new()),
        }
    }

    /// The routing table.
    #[must_use]
    pub fn routing(&self) -> &Arc<Routing> {
        &self.routing
    }

    fn stream(&self, member: &MemberId) -> Option<Arc<Stream>> {
        let mut streams = self.streams.lock();
        if let Some(stream) = streams.get(member) {
            return Some(Arc::clone(stream));
        }
        let node = self.routing.node(member)?;
        let stream = Arc::new(Stream {
            member: member.clone(),
            queue: Mutex::new((Vec::new(), 0)),
            wake: Notify::new(),
            progress: watch::Sender::new(Progress::default()),
        });
        streams.insert(member.clone(), Arc::clone(&stream));
        tokio::spawn(Arc::clone(&stream).run(self.transport.clone(), node.cluster_addr));
        Some(stream)
    }

    /// Retires the streams of members no longer in the cluster (their waiters are released)
    /// and those that broke (the next write opens a fresh one).
    pub fn members_changed(&self, live: &[MemberId]) {
        let mut streams = self.streams.lock();
        streams.retain(|member, stream| {
            let keep = live.contains(member) && !stream.progress.borrow().broken;
            if !keep {
                stream.retire();
            }
            keep
        });
    }

    fn snapshot(&self) -> Vec<(Arc<Stream>, u64)> {
        self.streams
            .lock()
            .values()
            .map(|stream| (Arc::clone(stream), stream.queued()))
            .filter(|(stream, queued)| stream.progress.borrow().acked < *queued)
            .collect()
    }
}

/// A clustered cache's persistence: replication to backups, then its own stores.
#[derive(Debug)]
pub struct Replicator {
    cache: String,
    sync: bool,
    when_split: weft_core::WhenSplit,
    replication: Arc<Replication>,
    inner: Option<Arc<dyn Persistence>>,
}

impl Replicator {
    /// Replication of `cache`'s writes, in front of its stores `inner`.
    #[must_use]
    pub fn new(
        cache: &str,
        sync: bool,
        when_split: weft_core::WhenSplit,
        replication: Arc<Replication>,
        inner: Option<Arc<dyn Persistence>>,
    ) -> Self {
        Self {
            cache: cache.to_owned(),
            sync,
            when_split,
            replication,
            inner,
        }
    }

    fn replicate(&self, segment: u32, key: &[u8], entry: Option<&CacheEntry>) {
        if APPLYING_REMOTE.with(Cell::get) {
            return;
        }
        let Some(route) = self.replication.routing.cache(&self.cache) else {
            return;
        };
        let Some(owners) = route.segment(segment) else {
            return;
        };
        let local = self.replication.routing.local();
        let mut image = None;
        for owner in owners.write.iter().filter(|owner| *owner != local) {
            let Some(stream) = self.replication.stream(owner) else {
                continue;
            };
            let entry = image
                .get_or_insert_with(|| entry.map(EntryImage::of))
                .clone();
            stream.push(Replica {
                cache: self.cache.clone(),
                segment,
                key: key.to_vec(),
                entry,
            });
        }
    }

    fn failed(&self, reason: String) -> PersistenceError {
        PersistenceError::Failed {
            cache: self.cache.clone(),
            reason,
        }
    }
}

impl Persistence for Replicator {
    fn admit_write(&self) -> Result<(), PersistenceError> {
        if self.when_split != weft_core::WhenSplit::AllowReadWrites
            && let Some(reason) = self.replication.routing.degraded(&self.cache)
        {
            return Err(PersistenceError::Degraded {
                cache: self.cache.clone(),
                reason: format!("{reason}; writes are refused until the partition heals"),
            });
        }
        match &self.inner {
            Some(inner) => inner.admit_write(),
            None => Ok(()),
        }
    }

    fn admit_read(&self) -> Result<(), PersistenceError> {
        if self.when_split == weft_core::WhenSplit::DenyReadWrites
            && let Some(reason) = self.replication.routing.degraded(&self.cache)
        {
            return Err(PersistenceError::Degraded {
                cache: self.cache.clone(),
                reason: format!("{reason}; reads are refused until the partition heals"),
            });
        }
        match &self.inner {
            Some(inner) => inner.admit_read(),
            None => Ok(()),
        }
    }

    fn record(&self, segment: u32, change: StoreChange<'_>) {
        match change {
            StoreChange::Put(entry) => self.replicate(segment, entry.key(), Some(entry)),
            StoreChange::Remove(key) => self.replicate(segment, key, None),
        }
        if let Some(inner) = &self.inner {
            inner.record(segment, change);
        }
    }

    fn evicted(&self, segment: u32, entry: &CacheEntry) {
        if let Some(inner) = &self.inner {
            inner.evicted(segment, entry);
        }
    }

    fn activated(&self, segment: u32, key: &[u8]) {
        if let Some(inner) = &self.inner {
            inner.activated(segment, key);
        }
    }

    fn preload(&self) -> bool {
        self.inner.as_ref().is_some_and(|inner| inner.preload())
    }

    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, PersistenceError> {
        match &self.inner {
            Some(inner) => inner.load(segment, key),
            None => Ok(None),
        }
    }

    fn memory_complete(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|inner| inner.memory_complete())
    }

    fn wait(&self) -> Result<(), PersistenceError> {
        if let Some(inner) = &self.inner {
            inner.wait()?;
        }
        if !self.sync {
            return Ok(());
        }
        let pending = self.replication.snapshot();
        if pending.is_empty() {
            return Ok(());
        }
        // An embedded caller on a plain thread: wait on the runtime the streams run on.
        let waiting = async move {
            for (stream, sequence) in pending {
                stream.reached(sequence).await?;
            }
            Ok::<(), String>(())
        };
        let outcome = match tokio::runtime::Handle::try_current() {
            Ok(handle) => tokio::task::block_in_place(|| handle.block_on(waiting)),
            Err(_) => Err("no runtime to wait for backups on".to_owned()),
        };
        outcome.map_err(|reason| self.failed(reason))
    }

    fn wait_async(&self) -> BoxFuture<Result<(), PersistenceError>> {
        let stores = self.inner.as_ref().map(|inner| inner.wait_async());
        let pending = if self.sync {
            self.replication.snapshot()
        } else {
            Vec::new()
        };
        let cache = self.cache.clone();
        Box::pin(async move {
            if let Some(stores) = stores {
                stores.await?;
            }
            for (stream, sequence) in pending {
                stream
                    .reached(sequence)
                    .await
                    .map_err(|reason| PersistenceError::Failed {
                        cache: cache.clone(),
                        reason,
                    })?;
            }
            Ok(())
        })
    }

    fn clear(&self) -> Result<(), PersistenceError> {
        match &self.inner {
            Some(inner) => inner.clear(),
            None => Ok(()),
        }
    }

    fn for_each(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), PersistenceError> {
        match &self.inner {
            Some(inner) => inner.for_each(segments, visit),
            None => Ok(()),
        }
    }

    fn size(&self, in_memory: usize) -> Option<usize> {
        match &self.inner {
            Some(inner) => inner.size(in_memory),
            None => Some(in_memory),
        }
    }

    fn max_version(&self) -> u64 {
        self.inner.as_ref().map_or(0, |inner| inner.max_version())
    }

    fn stats(&self) -> PersistenceStats {
        self.inner
            .as_ref()
            .map_or_else(PersistenceStats::default, |inner| inner.stats())
    }

    fn preloaded(&self, entries: u64, elapsed_ms: u64) {
        if let Some(inner) = &self.inner {
            inner.preloaded(entries, elapsed_ms);
        }
    }

    fn shutdown(
        &self,
        memory: &mut dyn Iterator<Item = CacheEntry>,
    ) -> Result<(), PersistenceError> {
        match &self.inner {
            Some(inner) => inner.shutdown(memory),
            None => Ok(()),
        }
    }

    fn destroy(&self) {
        if let Some(inner) = &self.inner {
            inner.destroy();
        }
    }
}
