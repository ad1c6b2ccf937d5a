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
//! A backup that stops answering holds acknowledgements back until the agreed members drop
//! it (failure detection, then consensus) — never on this node's own suspicion, so a primary
//! cut off in a minority acknowledges nothing alone — or until [`UNREACHABLE_WAIT`] passes,
//! when the write fails: it was applied on the primary, but is not acknowledged.

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

use super::routing::{RouteSlot, Routing};
use super::transport::{Transport, TransportError};

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
    /// The backup left the agreed members: nothing more is owed to it.
    retired: bool,
    /// This node left the agreed members (and may have come back): writes it had in flight
    /// were not acknowledged by the cluster, and fail.
    fenced: bool,
    /// Times changes were dropped unreplicated (see [`Stream::drops`]), to wake waiters.
    drops: u64,
    /// Times changes were skipped because the backup no longer owns their segment (see
    /// [`Stream::skipped`]), to wake waiters.
    skips: u64,
}

/// Changes dropped unreplicated at once: the lowest sequence number among them, the write
/// epoch then (`weft_core::persistence::epoch`), and when.
#[derive(Debug, Clone, Copy)]
struct Dropped {
    lowest: u64,
    epoch: u64,
    at: std::time::Instant,
}

/// Ids of this process's streams.
static STREAM_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// How long a record of dropped changes is kept: longer than any write waits.
const DROPS_KEPT: Duration = Duration::from_secs(60);

/// Changes owed to a backup: those not sent yet, and those sent but not acknowledged
/// (kept so that a broken connection can be replaced and they sent again, in order).
#[derive(Debug, Default)]
struct Pending {
    /// Sequence number of the last change queued.
    queued: u64,
    unsent: std::collections::VecDeque<(u64, Arc<Replica>)>,
    inflight: std::collections::VecDeque<(u64, Arc<Replica>)>,
    /// A batch failed: what is in flight goes again on a new connection.
    broken: bool,
    /// The next batch starts a resend (see `Request::Replicate`).
    restart: bool,
}

/// The ordered changes owed to one backup.
///
/// A change counts as acknowledged only when the backup answered the batch holding it, on
/// the connection it was sent on. When a connection breaks, every change not acknowledged is
/// sent again, in order, on a new one (applying a change twice is harmless: a replicated
/// entry keeps its version, a removal of an absent key does nothing), so a transient break
/// loses nothing and acknowledges nothing early. Waiters are released without the backup
/// only when the agreed members no longer include it.
#[derive(Debug)]
pub struct Stream {
    /// Unique among this process's streams: the backup keeps its place in each.
    id: u64,
    member: MemberId,
    pending: Mutex<Pending>,
    wake: Notify,
    progress: watch::Sender<Progress>,
    /// Changes this node dropped unreplicated because it no longer orders them: a write
    /// waited for since before a drop, and covering a dropped change, fails.
    drops: Mutex<std::collections::VecDeque<Dropped>>,
    /// Changes not sent again because the backup no longer owns their segment while this
    /// node still orders it (a rebalance moved on while the backup refused them): their
    /// writes owe this backup nothing — the segment's owners now are the others — and are
    /// acknowledged as far as it is concerned. Those below the acknowledged mark are pruned.
    skipped: Mutex<std::collections::BTreeSet<u64>>,
}

impl Stream {
    /// Queues `replica`; its sequence number in the stream.
    fn push(&self, replica: Arc<Replica>) -> u64 {
        let mut pending = self.pending.lock();
        pending.queued += 1;
        let sequence = pending.queued;
        pending.unsent.push_back((sequence, replica));
        drop(pending);
        self.wake.notify_one();
        sequence
    }

    /// Whether the backup acknowledged change `sequence` (or nothing more is owed to it).
    fn acknowledged(&self, sequence: u64) -> bool {
        let progress = self.progress.borrow();
        progress.acked >= sequence || progress.retired || self.skipped.lock().contains(&sequence)
    }

    fn queued(&self) -> u64 {
        self.pending.lock().queued
    }

    /// Whether a change up to `sequence` was dropped after a write batch numbered `epoch`
    /// started (such a batch may hold it).
    fn dropped_since(&self, sequence: u64, epoch: u64) -> bool {
        self.drops
            .lock()
            .iter()
            .any(|drop| drop.lowest <= sequence && epoch < drop.epoch)
    }

    /// Waits until the backup acknowledged change `sequence`, or was retired; fails if a
    /// change up to `sequence` was dropped since write batch `epoch` started.
    async fn reached(&self, sequence: u64, epoch: u64) -> Result<(), String> {
        let mut progress = self.progress.subscribe();
        let waited = tokio::time::timeout(UNREACHABLE_WAIT, async {
            loop {
                let now = *progress.borrow_and_update();
                if now.fenced || self.dropped_since(sequence, epoch) {
                    return Err(());
                }
                if now.retired || now.acked >= sequence || self.skipped.lock().contains(&sequence) {
                    return Ok(());
                }
                if progress.changed().await.is_err() {
                    return Ok(());
                }
            }
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(())) => Err(
                "the topology changed before the backups acknowledged the write (this node was dropped from the cluster, or no longer owns the key)"
                    .to_owned(),
            ),
            Err(_) => Err(format!(
                "backup owner {} did not acknowledge the write in time",
                self.member
            )),
        }
    }

    /// Sends queued changes in batches, in order, records acknowledgements, and after a
    /// broken connection sends again what was not acknowledged.
    /// Whether `replica` still goes to the backup: this node orders its segment's writes
    /// and the backup still owns it ([`Resend::Send`]); this node orders them but the
    /// backup no longer owns it ([`Resend::Skip`]); or this node no longer orders them
    /// ([`Resend::Drop`]: the writes it belongs to fail).
    fn resend(&self, routing: &Routing, replica: &Replica) -> Resend {
        let Some(route) = routing.cache(&replica.cache) else {
            return Resend::Drop;
        };
        match route.segment(replica.segment) {
            Some(owners) if owners.write.first() == Some(routing.local()) => {
                if owners.write.contains(&self.member) {
                    Resend::Send
                } else {
                    Resend::Skip
                }
            }
            _ => Resend::Drop,
        }
    }

    async fn run(self: Arc<Self>, transport: Transport, to: SocketAddr, routing: Arc<Routing>) {
        loop {
            if self.progress.borrow().retired {
                return;
            }
            let (batch, last, restart) = {
                let mut pending = self.pending.lock();
                if pending.broken {
                    // Everything not acknowledged goes again, first — but only what this
                    // node still orders, for a backup that is still an owner: a change this
                    // node no longer orders would be refused for ever, and holds back no
                    // one but the writes it belongs to, which fail.
                    pending.broken = false;
                    pending.restart = true;
                    let acked = self.progress.borrow().acked;
                    let mut again: std::collections::VecDeque<(u64, Arc<Replica>)> =
                        std::mem::take(&mut pending.inflight)
                            .into_iter()
                            .filter(|(sequence, _)| *sequence > acked)
                            .collect();
                    again.extend(pending.unsent.drain(..));
                    let mut lowest = None;
                    let mut skipped = Vec::new();
                    again.retain(|(sequence, replica)| match self.resend(&routing, replica) {
                        Resend::Send => true,
                        Resend::Skip => {
                            skipped.push(*sequence);
                            false
                        }
                        Resend::Drop => {
                            lowest = Some(lowest.map_or(*sequence, |l: u64| l.min(*sequence)));
                            false
                        }
                    });
                    if !skipped.is_empty() {
                        tracing::debug!(backup = %self.member, changes = skipped.len(), "changes of segments the backup no longer owns not sent again");
                        self.skipped.lock().extend(skipped);
                        self.progress.send_modify(|progress| progress.skips += 1);
                    }
                    if let Some(lowest) = lowest {
                        tracing::warn!(backup = %self.member, from = lowest, "changes this node no longer orders were not replicated; their writes fail");
                        let now = std::time::Instant::now();
                        let mut drops = self.drops.lock();
                        drops.retain(|drop| now.duration_since(drop.at) < DROPS_KEPT);
                        drops.push_back(Dropped {
                            lowest,
                            epoch: weft_core::persistence::epoch(),
                            at: now,
                        });
                        drop(drops);
                        self.progress.send_modify(|progress| progress.drops += 1);
                    }
                    pending.unsent = again;
                }
                let mut take = 0;
                let mut bytes = 0;
                while take < pending.unsent.len().min(BATCH_MAX)
                    && (take == 0 || bytes < weft_cluster::wire::BATCH_BYTES_MAX)
                {
                    bytes += pending.unsent[take]
                        .1
                        .entry
                        .as_ref()
                        .map_or(64, weft_cluster::wire::image_bytes);
                    take += 1;
                }
                let batch: Vec<(u64, Arc<Replica>)> = pending.unsent.drain(..take).collect();
                let last = batch.last().map_or(0, |(sequence, _)| *sequence);
                pending.inflight.extend(batch.iter().cloned());
                let restart = !batch.is_empty() && std::mem::take(&mut pending.restart);
                (batch, last, restart)
            };
            if batch.is_empty() {
                self.wake.notified().await;
                continue;
            }
            // Responses come back in order on one connection: each is taken where it is
            // read, while the next batch is already on its way.
            let stream = Arc::clone(&self);
            transport.send_then(
                to,
                Request::Replicate {
                    stream: self.id,
                    restart,
                    replicas: batch,
                },
                move |answer| stream.answered(answer, last),
            );
        }
    }

    /// Takes the backup's answer to the batch that ended with change `last`.
    fn answered(self: Arc<Self>, answer: Result<Response, TransportError>, last: u64) {
        let pause = match answer {
            Ok(Response::Applied) => {
                self.progress.send_modify(|progress| {
                    progress.acked = progress.acked.max(last);
                });
                let acked = self.progress.borrow().acked;
                {
                    let mut skipped = self.skipped.lock();
                    if skipped.first().is_some_and(|&first| first <= acked) {
                        skipped.retain(|&sequence| sequence > acked);
                    }
                }
                self.pending
                    .lock()
                    .inflight
                    .retain(|(sequence, _)| *sequence > acked);
                return;
            }
            Ok(Response::NotOwner { owner }) => {
                // The backup's topology names another primary (or another process by this
                // node's name): whichever of the two is behind catches up; what this node
                // no longer orders is then dropped (`Stream::run`).
                tracing::debug!(backup = %self.member, ?owner, "backup refused changes from this node; sending again");
                Duration::from_millis(100)
            }
            failed => {
                tracing::debug!(backup = %self.member, ?failed, "replication batch failed; sending again");
                // A moment for the connection to be replaced.
                Duration::from_millis(50)
            }
        };
        self.pending.lock().broken = true;
        tokio::spawn(async move {
            tokio::time::sleep(pause).await;
            self.wake.notify_one();
        });
    }

    fn retire(&self) {
        self.progress
            .send_modify(|progress| progress.retired = true);
        self.wake.notify_one();
    }
}

/// What becomes of a change not acknowledged when its stream sends again.
enum Resend {
    Send,
    Skip,
    Drop,
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
            id: STREAM_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            member: member.clone(),
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            progress: watch::Sender::new(Progress::default()),
            drops: Mutex::new(std::collections::VecDeque::new()),
            skipped: Mutex::new(std::collections::BTreeSet::new()),
        });
        streams.insert(member.clone(), Arc::clone(&stream));
        tokio::spawn(Arc::clone(&stream).run(
            self.transport.clone(),
            node.cluster_addr,
            Arc::clone(&self.routing),
        ));
        Some(stream)
    }

    /// This node was dropped from the agreed members (a partition): every write waiting for
    /// its backups fails, and replication starts afresh.
    pub fn fence(&self) {
        let mut streams = self.streams.lock();
        for stream in streams.values() {
            stream.progress.send_modify(|progress| {
                progress.fenced = true;
                progress.retired = true;
            });
            stream.wake.notify_one();
        }
        streams.clear();
    }

    /// Retires the streams of members no longer among the agreed members: what they were
    /// owed no longer holds writes back.
    pub fn members_changed(&self, live: &[MemberId]) {
        let mut streams = self.streams.lock();
        streams.retain(|member, stream| {
            let keep = live.contains(member);
            if !keep {
                stream.retire();
            }
            keep
        });
    }

    /// Waits, at most `within`, until every change queued to a backup so far has been
    /// acknowledged (or the backup left the agreed members); whether they all were. A
    /// leaving node drains so before it asks to be released: nothing it ordered is then
    /// left only here.
    pub async fn drain(&self, within: Duration) -> bool {
        tokio::time::timeout(within, async {
            loop {
                let owed = self.snapshot();
                if owed.is_empty() {
                    return;
                }
                for (stream, sequence) in owed {
                    // No write epoch to fail: this waits, it acknowledges nothing.
                    let _ = stream.reached(sequence, u64::MAX).await;
                }
            }
        })
        .await
        .is_ok()
    }

    /// Waits, at most `within`, until every change queued to a backup before this call has
    /// been acknowledged (or the backup left the agreed members); whether they all were.
    /// Unlike [`Replication::drain`], changes queued meanwhile are not waited for: the
    /// writes of segments this node goes on ordering do not hold it up.
    pub async fn settle_queued(&self, within: Duration) -> bool {
        let owed = self.snapshot();
        tokio::time::timeout(within, async {
            for (stream, sequence) in owed {
                // No write epoch to fail: this waits, it acknowledges nothing.
                let _ = stream.reached(sequence, u64::MAX).await;
            }
        })
        .await
        .is_ok()
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

/// A change owed to a backup: its stream, and its number there.
type Ticket = (Arc<Stream>, u64);

/// Shards of the per-segment record of writes in flight (fewer locks to contend on).
const SEGMENT_SHARDS: usize = 16;
/// How many batches' tickets are kept before old ones (of waits that never came: a
/// connection closed first) are pruned.
const BATCHES_KEPT: usize = 4_096;
/// Tickets older than this are pruned then.
const BATCH_TICKETS_TTL: Duration = Duration::from_secs(120);

/// What each write and read must wait for, so that a write waits only for its own
/// backups and a read only for the writes in flight on its own segment.
#[derive(Debug, Default)]
struct Tickets {
    /// Per batch of writes and reads (see `weft_core::persistence::batch`): the changes it
    /// made or saw, not yet waited for.
    by_batch: Mutex<HashMap<u64, (std::time::Instant, Vec<Ticket>)>>,
    /// Per segment, the last change of a write to it queued to each backup.
    by_segment: [Mutex<HashMap<u32, Vec<Ticket>>>; SEGMENT_SHARDS],
}

impl Tickets {
    /// Files `tickets` under `batch`.
    fn file(&self, batch: u64, tickets: impl IntoIterator<Item = Ticket>) {
        let mut by_batch = self.by_batch.lock();
        let filed = &mut by_batch
            .entry(batch)
            .or_insert_with(|| (std::time::Instant::now(), Vec::new()))
            .1;
        for (stream, sequence) in tickets {
            match filed
                .iter_mut()
                .find(|(known, _)| Arc::ptr_eq(known, &stream))
            {
                Some((_, filed_sequence)) => *filed_sequence = (*filed_sequence).max(sequence),
                None => filed.push((stream, sequence)),
            }
        }
        if by_batch.len() > BATCHES_KEPT {
            by_batch.retain(|_, (filed_at, _)| filed_at.elapsed() < BATCH_TICKETS_TTL);
        }
    }

    /// Records that a write to `segment` queued `tickets`.
    fn wrote(&self, segment: u32, tickets: &[Ticket]) {
        let mut shard = self.by_segment[segment as usize % SEGMENT_SHARDS].lock();
        let last = shard.entry(segment).or_default();
        last.retain(|(stream, sequence)| !stream.acknowledged(*sequence));
        for (stream, sequence) in tickets {
            match last
                .iter_mut()
                .find(|(known, _)| Arc::ptr_eq(known, stream))
            {
                Some((_, last_sequence)) => *last_sequence = (*last_sequence).max(*sequence),
                None => last.push((Arc::clone(stream), *sequence)),
            }
        }
    }

    /// The writes to `segment` in flight.
    fn in_flight(&self, segment: u32) -> Vec<Ticket> {
        let shard = self.by_segment[segment as usize % SEGMENT_SHARDS].lock();
        shard
            .get(&segment)
            .map(|last| {
                last.iter()
                    .filter(|(stream, sequence)| !stream.acknowledged(*sequence))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Takes what `batches` must wait for.
    fn take(&self, batches: &[u64]) -> Vec<Ticket> {
        let mut by_batch = self.by_batch.lock();
        let mut owed: Vec<Ticket> = Vec::new();
        for batch in batches {
            let Some((_, tickets)) = by_batch.remove(batch) else {
                continue;
            };
            for (stream, sequence) in tickets {
                match owed
                    .iter_mut()
                    .find(|(known, _)| Arc::ptr_eq(known, &stream))
                {
                    Some((_, owed_sequence)) => *owed_sequence = (*owed_sequence).max(sequence),
                    None => owed.push((stream, sequence)),
                }
            }
        }
        owed
    }
}

/// A clustered cache's persistence: replication to backups, then its own stores.
#[derive(Debug)]
pub struct Replicator {
    cache: Arc<str>,
    sync: bool,
    when_split: weft_core::WhenSplit,
    replication: Arc<Replication>,
    /// The cache's place in the routing table, read on every write.
    slot: Arc<RouteSlot>,
    inner: Option<Arc<dyn Persistence>>,
    tickets: Tickets,
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
            cache: Arc::from(cache),
            sync,
            when_split,
            slot: replication.routing.slot(cache),
            replication,
            inner,
            tickets: Tickets::default(),
        }
    }

    fn replicate(&self, segment: u32, key: &[u8], entry: Option<&CacheEntry>) {
        if APPLYING_REMOTE.with(Cell::get) || self.diverging() {
            return;
        }
        let local = self.replication.routing.local();
        let queued = self.slot.with_route(|route| {
            let owners = route?.segment(segment)?;
            // One image of the change, shared by every backup's stream.
            let mut replica = None;
            let mut queued: Vec<Ticket> = Vec::with_capacity(owners.write.len());
            for owner in owners.write.iter().filter(|owner| *owner != local) {
                let Some(stream) = self.replication.stream(owner) else {
                    continue;
                };
                let replica = replica.get_or_insert_with(|| {
                    Arc::new(Replica {
                        cache: Arc::clone(&self.cache),
                        segment,
                        key: key.to_vec(),
                        entry: entry.map(EntryImage::of),
                    })
                });
                let sequence = stream.push(Arc::clone(replica));
                queued.push((stream, sequence));
            }
            Some(queued)
        });
        let Some(queued) = queued else {
            return;
        };
        if !self.sync || queued.is_empty() {
            return;
        }
        // Under the key's segment lock: a read that saw this write finds it in flight.
        self.tickets.wrote(segment, &queued);
        if let Some(batch) = weft_core::persistence::batch() {
            self.tickets.file(batch, queued);
        }
    }

    /// Waits for the stores, then — in a sync cache not diverging — for each backup to
    /// acknowledge its change in `owed`; a write whose batch started at `since` fails if one
    /// of them was dropped meanwhile.
    fn wait_for(&self, owed: Vec<Ticket>, since: u64) -> BoxFuture<Result<(), PersistenceError>> {
        let stores = self.inner.as_ref().map(|inner| inner.wait_async());
        let owed = if self.sync && !self.diverging() {
            owed
        } else {
            Vec::new()
        };
        let cache = self.cache.clone();
        Box::pin(async move {
            if let Some(stores) = stores {
                stores.await?;
            }
            for (stream, sequence) in owed {
                stream.reached(sequence, since).await.map_err(|reason| {
                    PersistenceError::Failed {
                        cache: cache.to_string(),
                        reason,
                    }
                })?;
            }
            Ok(())
        })
    }

    fn failed(&self, reason: String) -> PersistenceError {
        PersistenceError::Failed {
            cache: self.cache.to_string(),
            reason,
        }
    }
}

impl Replicator {
    /// Whether this cache is DEGRADED and its policy lets writes go on: each side then
    /// diverges on purpose (reconciled by the merge policy when the partition heals), so a
    /// write stays on this node — it is neither sent to backups that cannot be reached nor
    /// waited for.
    fn diverging(&self) -> bool {
        self.when_split == weft_core::WhenSplit::AllowReadWrites && self.slot.is_degraded()
    }

    /// Whether reads wait for the writes they may have seen to reach the backups: in a sync
    /// cache, unless it is DEGRADED and serves reads anyway (they may be stale by policy).
    fn reads_wait(&self) -> bool {
        self.sync
            && !(self.when_split != weft_core::WhenSplit::DenyReadWrites && self.slot.is_degraded())
    }

    /// Refuses requests on a node that has no topology of the cache yet (it has not joined,
    /// or not heard of the cache): it cannot know who owns what, and what it holds may be
    /// nothing, or what it stored before. Clients retry, or try another node.
    fn admit_joined(&self) -> Result<(), PersistenceError> {
        if !self.slot.is_installed() {
            return Err(PersistenceError::NotJoined {
                cache: self.cache.to_string(),
            });
        }
        Ok(())
    }
}

impl Persistence for Replicator {
    fn admit_write(&self) -> Result<(), PersistenceError> {
        self.admit_joined()?;
        if self.when_split != weft_core::WhenSplit::AllowReadWrites
            && let Some(reason) = self.slot.degraded()
        {
            return Err(PersistenceError::Degraded {
                cache: self.cache.to_string(),
                reason: format!("{reason}; writes are refused until the partition heals"),
            });
        }
        match &self.inner {
            Some(inner) => inner.admit_write(),
            None => Ok(()),
        }
    }

    fn admit_write_at(&self, segment: u32) -> Result<(), PersistenceError> {
        self.admit_write()?;
        if self.replication.routing.is_leaving() {
            // Leaving: the key's next primary takes it once the agreed topology leaves
            // this node out; the sender routes it again until then.
            return Err(PersistenceError::NotOwner {
                cache: self.cache.to_string(),
                segment,
            });
        }
        if self.diverging() {
            // DEGRADED with writes allowed: this side diverges on purpose.
            return Ok(());
        }
        // Only the segment's primary orders its writes; any other node (one not admitted
        // yet, whose routes leave it out, or one whose topology moved the segment away
        // since the request was routed) refuses, and the client retries at the owner.
        // A primary handing the segment over to the next one takes no new write either (see
        // `SegmentRoute::hands_over`).
        let local = self.replication.routing.local();
        let ordered_here = self.slot.with_route(|route| {
            route
                .and_then(|route| route.segment(segment))
                .is_some_and(|owners| owners.orders(local))
        });
        if !ordered_here {
            return Err(PersistenceError::NotOwner {
                cache: self.cache.to_string(),
                segment,
            });
        }
        Ok(())
    }

    fn admit_read(&self) -> Result<(), PersistenceError> {
        self.admit_joined()?;
        if self.when_split == weft_core::WhenSplit::DenyReadWrites
            && let Some(reason) = self.slot.degraded()
        {
            return Err(PersistenceError::Degraded {
                cache: self.cache.to_string(),
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

    fn forget(&self, segment: u32, key: &[u8]) {
        if let Some(inner) = &self.inner {
            inner.forget(segment, key);
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

    fn read_barrier(&self) -> bool {
        self.reads_wait()
    }

    fn note_read(&self, segment: u32) {
        if let Some(batch) = weft_core::persistence::batch() {
            let in_flight = self.tickets.in_flight(segment);
            if !in_flight.is_empty() {
                self.tickets.file(batch, in_flight);
            }
        }
    }

    fn wait_batches(&self, batches: &[u64], since: u64) -> Result<(), PersistenceError> {
        if let Some(inner) = &self.inner {
            inner.wait()?;
        }
        let owed = self.tickets.take(batches);
        if !self.sync || self.diverging() || owed.is_empty() {
            return Ok(());
        }
        // An embedded caller on a plain thread: wait on the runtime the streams run on.
        let waiting = async move {
            for (stream, sequence) in owed {
                stream.reached(sequence, since).await?;
            }
            Ok::<(), String>(())
        };
        let outcome = match tokio::runtime::Handle::try_current() {
            Ok(handle) => tokio::task::block_in_place(|| handle.block_on(waiting)),
            Err(_) => Err("no runtime to wait for backups on".to_owned()),
        };
        outcome.map_err(|reason| self.failed(reason))
    }

    fn wait_async_batches(
        &self,
        batches: &[u64],
        since: u64,
    ) -> BoxFuture<Result<(), PersistenceError>> {
        let owed = self.tickets.take(batches);
        self.wait_for(owed, since)
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
        // Reads and clears: waits for what they may have seen; no write of theirs to fail.
        self.wait_since(u64::MAX)
    }

    fn wait_since(&self, epoch: u64) -> Result<(), PersistenceError> {
        if let Some(inner) = &self.inner {
            inner.wait()?;
        }
        if !self.sync || self.diverging() {
            return Ok(());
        }
        let pending = self.replication.snapshot();
        if pending.is_empty() {
            return Ok(());
        }
        // An embedded caller on a plain thread: wait on the runtime the streams run on.
        let waiting = async move {
            for (stream, sequence) in pending {
                stream.reached(sequence, epoch).await?;
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
        self.wait_async_since(u64::MAX)
    }

    fn wait_async_since(&self, epoch: u64) -> BoxFuture<Result<(), PersistenceError>> {
        self.wait_for(self.replication.snapshot(), epoch)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> Stream {
        Stream {
            id: 1,
            member: MemberId("backup".into()),
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            progress: watch::Sender::new(Progress::default()),
            drops: Mutex::new(std::collections::VecDeque::new()),
            skipped: Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    // Proves a write fails when a change it may hold was dropped unreplicated after its
    // batch started, and only then: batches that started later, or that end before the
    // dropped change, are acknowledged once the backup has what they cover.
    #[tokio::test]
    async fn writes_fail_when_a_change_they_may_hold_was_dropped() {
        let stream = stream();
        let before = weft_core::persistence::next_epoch();
        stream.progress.send_modify(|progress| progress.acked = 10);
        stream.drops.lock().push_back(Dropped {
            lowest: 5,
            epoch: weft_core::persistence::epoch(),
            at: std::time::Instant::now(),
        });
        let after = weft_core::persistence::next_epoch();
        assert!(stream.reached(10, before).await.is_err());
        assert!(stream.reached(4, before).await.is_ok());
        assert!(stream.reached(10, after).await.is_ok());
        // Reads and clears wait with no epoch of their own: never failed by a drop.
        assert!(stream.reached(10, u64::MAX).await.is_ok());
    }

    // Proves a change skipped because the backup no longer owns its segment counts as
    // acknowledged by that backup — its write neither fails nor waits for it — while the
    // changes around it still wait for their acknowledgement; and the skip is forgotten once
    // the acknowledged mark passes it.
    #[tokio::test]
    async fn a_change_skipped_for_a_backup_that_no_longer_owns_it_holds_no_write_back() {
        let stream = stream();
        stream.progress.send_modify(|progress| progress.acked = 4);
        stream.skipped.lock().insert(6);
        stream.progress.send_modify(|progress| progress.skips += 1);
        let epoch = weft_core::persistence::next_epoch();
        assert!(stream.acknowledged(6));
        assert!(!stream.acknowledged(5));
        assert!(!stream.acknowledged(7));
        let waited = tokio::time::timeout(Duration::from_secs(5), stream.reached(6, epoch)).await;
        assert!(matches!(waited, Ok(Ok(()))));
        let stream = Arc::new(stream);
        Arc::clone(&stream).answered(Ok(Response::Applied), 7);
        assert!(stream.acknowledged(5) && stream.acknowledged(7));
        assert!(stream.skipped.lock().is_empty());
    }

    // Proves a write waits only for its own backups and a read only for the writes in
    // flight on its own segment: a backup that never answers holds up the writes and reads
    // that involve it, and nothing else.
    #[tokio::test]
    async fn writes_and_reads_wait_only_for_what_they_involve() {
        let tickets = Tickets::default();
        let quick = Arc::new(stream());
        let stalled = Arc::new(stream());
        // Batch 1 wrote segment 3 (to the stalled backup); batch 2 wrote segment 7 (to the
        // quick one).
        let stuck = stalled.push(Arc::new(replica(3)));
        tickets.wrote(3, &[(Arc::clone(&stalled), stuck)]);
        tickets.file(1, [(Arc::clone(&stalled), stuck)]);
        let own = quick.push(Arc::new(replica(7)));
        tickets.wrote(7, &[(Arc::clone(&quick), own)]);
        tickets.file(2, [(Arc::clone(&quick), own)]);
        quick.progress.send_modify(|progress| progress.acked = own);
        let waited = tokio::time::timeout(Duration::from_secs(1), async {
            for (stream, sequence) in tickets.take(&[2]) {
                stream.reached(sequence, u64::MAX).await?;
            }
            Ok::<(), String>(())
        })
        .await;
        assert!(
            matches!(waited, Ok(Ok(()))),
            "batch 2 waited on another backup"
        );
        // A read of segment 7 has nothing in flight; one of segment 3 waits for the stalled
        // backup's change.
        assert!(tickets.in_flight(7).is_empty());
        let in_flight = tickets.in_flight(3);
        assert_eq!(in_flight.len(), 1);
        assert!(Arc::ptr_eq(&in_flight[0].0, &stalled));
        // Batch 1 is still owed; once taken it is not owed twice.
        assert_eq!(tickets.take(&[1]).len(), 1);
        assert!(tickets.take(&[1]).is_empty());
    }

    fn replica(segment: u32) -> Replica {
        Replica {
            cache: "c".into(),
            segment,
            key: b"k".to_vec(),
            entry: None,
        }
    }
}
