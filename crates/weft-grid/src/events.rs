//! Cluster-wide events: a listener registered on one member sees every write to its cache,
//! wherever the write was applied.
//!
//! Each write is applied, and its event raised, at the key's primary owner (backups apply
//! copies without events). A member whose cache has listeners that want other members'
//! events ([`weft_core::Cache::wants_relayed_events`] — RESP client tracking, Hot Rod client
//! listeners and near caches, embedded listeners) says so to every other member
//! ([`Request::Interest`]); a member that others want events from registers a *relay* on
//! that cache — a local-only listener — which sends each event of a key it is the primary of
//! to the members that want them, in order, batched per member ([`Request::Events`]). The
//! receiver delivers them to its listeners as relayed events
//! ([`weft_core::Cache::relay_event`]). Caches nobody listens to elsewhere carry no relay
//! and pay nothing.
//!
//! Filters run at the source when they can: a listener registered with a named filter
//! ([`weft_core::SourceFilter`], a factory every member registers in its cache manager)
//! is announced with it, and when every listener of a member on a cache has one, the
//! relaying members send that member only the events passing one of them — the rest never
//! leave the member that applied the write. (A filter a relaying member cannot make, its
//! factory not registered there, relays everything; the listener's member filters again.)
//!
//! What a listener may see: every write once, while the listener's member and the key's
//! primary live; per key in the order the primary raised the events (two writes racing on
//! one key may be raised in either order: their versions tell which is newer). When a primary dies, the
//! events of its last writes may be lost (they are not replayed from backups); when a
//! member announces its interest, writes racing the announcement may be missed. A client
//! that must not miss a change re-reads after a topology change (Hot Rod near caches clear
//! themselves on failover; RESP tracking clients receive a flush).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc, watch};
use weft_cluster::MemberId;
use weft_cluster::wire::{EntryImage, RelayedEvent, Request, Response};
use weft_core::listener::EventFilter;
use weft_core::{CacheEvent, EventKind, ListenerId, ListenerOptions, RelayInterest};

use crate::node::Node;
use crate::routing::Route;

/// How often a member re-announces what it listens to (new members learn it then), and
/// checks whether that changed without its hook firing.
const ANNOUNCE_EVERY: Duration = Duration::from_secs(2);
/// How long a batch of events may take to reach a member.
const SEND_TIMEOUT: Duration = Duration::from_secs(5);
/// Most events sent in one batch.
const BATCH_EVENTS_MAX: usize = 512;

/// The form of `event` that travels (`None` for a kind this version does not relay).
fn wire_of(event: &CacheEvent) -> Option<RelayedEvent> {
    let kind = match event.kind() {
        EventKind::Created => 0,
        EventKind::Modified => 1,
        EventKind::Removed => 2,
        EventKind::Expired => 3,
        _ => return None,
    };
    Some(RelayedEvent {
        kind,
        old: event.old_entry().map(EntryImage::of),
        new: event.new_entry().map(EntryImage::of),
    })
}

/// The kind a relayed event names.
fn kind_of(kind: u8) -> Option<EventKind> {
    match kind {
        0 => Some(EventKind::Created),
        1 => Some(EventKind::Modified),
        2 => Some(EventKind::Removed),
        3 => Some(EventKind::Expired),
        _ => None,
    }
}

/// What handles a topic's messages (see [`Events::broadcast`]).
pub type MessageHandler = Arc<dyn Fn(&[u8]) + Send + Sync>;

/// What a member queues for another, sent in order.
enum Outgoing {
    /// An event of a write to a cache.
    Event(String, Box<RelayedEvent>),
    /// A message on a topic.
    Message(String, Vec<u8>),
}

impl Outgoing {
    /// Items of one kind and name travel together.
    fn group(&self) -> (bool, &str) {
        match self {
            Self::Event(cache, _) => (true, cache),
            Self::Message(topic, _) => (false, topic),
        }
    }
}

/// What a member wants relayed of a cache: every event (`None`), or those passing one of
/// these filters (made here from the names it sent; shared, since each event copies it out
/// of the lock).
type Wanted = Option<Arc<[EventFilter]>>;

/// A member's part in cluster-wide events.
#[derive(Default)]
pub struct Events {
    /// Per cache, the other members that want its events, and which.
    wanted_by: Mutex<HashMap<String, HashMap<MemberId, Wanted>>>,
    /// Events this member queued for others.
    relayed: std::sync::atomic::AtomicU64,
    /// Per cache, this member's relay while another member wants its events.
    relays: Mutex<HashMap<String, ListenerId>>,
    /// Per member, the events and messages queued for it.
    outboxes: Mutex<HashMap<MemberId, mpsc::UnboundedSender<Outgoing>>>,
    /// Per topic, what handles the messages other members broadcast.
    topics: parking_lot::RwLock<HashMap<String, MessageHandler>>,
    /// Woken when what this member listens to may have changed.
    changed: Arc<Notify>,
    /// The runtime the senders run on (events are raised on any thread, an application's
    /// or the expiration reaper's included).
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field(
                "wanted_by",
                &self
                    .wanted_by
                    .lock()
                    .iter()
                    .map(|(cache, wanting)| (cache.clone(), wanting.keys().cloned().collect()))
                    .collect::<BTreeMap<String, BTreeSet<MemberId>>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Caches of `node` whose listeners want other members' events, and which events.
    fn listened(node: &Node) -> BTreeMap<String, RelayInterest> {
        node.manager()
            .caches()
            .into_iter()
            .filter(|cache| cache.config().mode.is_clustered())
            .filter_map(|cache| Some((cache.name().to_owned(), cache.relay_interest()?)))
            .collect()
    }

    /// Events this member queued for other members' listeners so far (those a source
    /// filter let through).
    #[must_use]
    pub fn relayed(&self) -> u64 {
        self.relayed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Tells the other members what this one listens to, whenever that or the membership
    /// changes (and every [`ANNOUNCE_EVERY`]), until shutdown.
    pub(crate) async fn announce(node: Arc<Node>, mut shutdown: watch::Receiver<bool>) {
        let events = node.events();
        let _ = events.runtime.set(tokio::runtime::Handle::current());
        let mut told: HashMap<MemberId, BTreeMap<String, RelayInterest>> = HashMap::new();
        let mut ticks = tokio::time::interval(ANNOUNCE_EVERY);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                () = events.changed.notified() => {}
                _ = ticks.tick() => told.clear(),
            }
            // Every clustered cache tells this member at once when its listeners start or
            // stop wanting others' events.
            for cache in node.manager().caches() {
                if cache.config().mode.is_clustered() {
                    let changed = Arc::clone(&events.changed);
                    cache.on_relay_interest(Some(Arc::new(move || changed.notify_one())));
                }
            }
            let mine = Self::listened(&node);
            let state = node.state();
            let me = MemberId(node.me().name.clone());
            let members: Vec<_> = state
                .nodes()
                .values()
                .filter(|record| record.name != me.0)
                .cloned()
                .collect();
            events.forget_departed(&node, members.iter().map(|r| MemberId(r.name.clone())));
            for record in members {
                let member = MemberId(record.name.clone());
                if told.get(&member) == Some(&mine) {
                    continue;
                }
                told.insert(member, mine.clone());
                let request = Request::Interest {
                    caches: mine
                        .iter()
                        .map(|(cache, interest)| (cache.clone(), interest.clone()))
                        .collect(),
                };
                let transport = node.transport().clone();
                tokio::spawn(async move {
                    let _ = transport
                        .call(record.cluster_addr, request, SEND_TIMEOUT)
                        .await;
                });
            }
        }
    }

    /// Drops what members no longer in `members` wanted.
    fn forget_departed(&self, node: &Arc<Node>, members: impl Iterator<Item = MemberId>) {
        let members: HashSet<MemberId> = members.collect();
        {
            let mut wanted_by = self.wanted_by.lock();
            for wanting in wanted_by.values_mut() {
                wanting.retain(|member, _| members.contains(member));
            }
            self.outboxes
                .lock()
                .retain(|member, _| members.contains(member));
            wanted_by.retain(|_, wanting| !wanting.is_empty());
        }
        self.update_relays(node);
    }

    /// Answers [`Request::Interest`]: `from` listens to `caches` now. A filter this member
    /// cannot make (its factory is not registered here) relays everything: the listener's
    /// member filters again, so it still sees only what passes, at the cost of the traffic.
    pub(crate) fn interest(
        &self,
        node: &Arc<Node>,
        from: MemberId,
        caches: Vec<(String, RelayInterest)>,
    ) {
        let factories = node.manager().event_filters();
        let caches: Vec<(String, Wanted)> = caches
            .into_iter()
            .map(|(cache, interest)| {
                let wanted = match interest {
                    RelayInterest::All => None,
                    RelayInterest::Passing(sources) => sources
                        .iter()
                        .map(|source| factories.make(source))
                        .collect::<Result<Arc<[_]>, String>>()
                        .map_err(|error| {
                            tracing::warn!(%from, %cache, %error, "relaying every event: a listener's filter cannot run here");
                        })
                        .ok(),
                };
                (cache, wanted)
            })
            .collect();
        {
            let mut wanted_by = self.wanted_by.lock();
            for wanting in wanted_by.values_mut() {
                wanting.remove(&from);
            }
            for (cache, wanted) in caches {
                wanted_by
                    .entry(cache)
                    .or_default()
                    .insert(from.clone(), wanted);
            }
            wanted_by.retain(|_, wanting| !wanting.is_empty());
        }
        self.update_relays(node);
    }

    /// Registers a relay on every cache another member wants events of, and removes the
    /// others.
    fn update_relays(&self, node: &Arc<Node>) {
        let wanted: HashSet<String> = self.wanted_by.lock().keys().cloned().collect();
        let mut relays = self.relays.lock();
        relays.retain(|cache, id| {
            if wanted.contains(cache) {
                return true;
            }
            if let Some(local) = node.manager().cache(cache) {
                local.remove_listener(*id);
            }
            false
        });
        for cache in wanted {
            if relays.contains_key(&cache) {
                continue;
            }
            let Some(local) = node.manager().cache(&cache) else {
                continue;
            };
            let weak = Arc::downgrade(node);
            let name = cache.clone();
            let id = local.add_listener(ListenerOptions::default().local_only(), move |event| {
                if let Some(node) = weak.upgrade() {
                    node.events().relay(&node, &name, event);
                }
            });
            relays.insert(cache, id);
        }
    }

    /// Sends `event` (of a write this member applied to `cache`) to the members that want
    /// it, if this member is the key's primary (a backup's copy raises none; an expiry on a
    /// backup is the primary's to report).
    fn relay(&self, node: &Arc<Node>, cache: &str, event: &CacheEvent) {
        let Some(local) = node.manager().cache(cache) else {
            return;
        };
        let segment = local.segment_of(event.key());
        if node.routing().write_route(cache, segment) != Route::Local {
            return;
        }
        let wanting: Vec<(MemberId, Wanted)> = match self.wanted_by.lock().get(cache) {
            Some(wanting) => wanting
                .iter()
                .map(|(member, wanted)| (member.clone(), wanted.clone()))
                .collect(),
            None => return,
        };
        let mut wire = None;
        for (member, wanted) in wanting {
            // Filters run here, where the write was applied: what no listener of the
            // member wants does not travel.
            if let Some(filters) = wanted
                && !filters.iter().any(|filter| filter(event))
            {
                continue;
            }
            let Some(relayed) = wire.get_or_insert_with(|| wire_of(event)) else {
                return;
            };
            let outbox = self.outbox(node, &member);
            if outbox
                .send(Outgoing::Event(cache.to_owned(), Box::new(relayed.clone())))
                .is_ok()
            {
                self.relayed
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// The queue of events for `member`, with the task that sends them.
    fn outbox(&self, node: &Arc<Node>, member: &MemberId) -> mpsc::UnboundedSender<Outgoing> {
        let mut outboxes = self.outboxes.lock();
        if let Some(outbox) = outboxes.get(member)
            && !outbox.is_closed()
        {
            return outbox.clone();
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        if let Some(runtime) = self.runtime.get() {
            outboxes.insert(member.clone(), sender.clone());
            runtime.spawn(Self::send(Arc::downgrade(node), member.clone(), receiver));
        }
        sender
    }

    /// Sends what is queued for `member`, in order, consecutive items of one cache or topic
    /// in one request.
    async fn send(
        node: std::sync::Weak<Node>,
        member: MemberId,
        mut queue: mpsc::UnboundedReceiver<Outgoing>,
    ) {
        while let Some(first) = queue.recv().await {
            let mut batch = vec![first];
            while batch.len() < BATCH_EVENTS_MAX {
                match queue.try_recv() {
                    Ok(next) => batch.push(next),
                    Err(_) => break,
                }
            }
            let Some(node) = node.upgrade() else {
                return;
            };
            let Some(record) = node.routing().node(&member) else {
                // The member left: what was queued for it has nowhere to go.
                return;
            };
            let mut requests: Vec<Request> = Vec::new();
            for item in batch {
                let (event, name) = item.group();
                let name = name.to_owned();
                match (requests.last_mut(), item) {
                    (Some(Request::Events { cache, events }), Outgoing::Event(_, e))
                        if event && *cache == name =>
                    {
                        events.push(*e);
                    }
                    (Some(Request::Messages { topic, payloads }), Outgoing::Message(_, m))
                        if !event && *topic == name =>
                    {
                        payloads.push(m);
                    }
                    (_, Outgoing::Event(cache, e)) => requests.push(Request::Events {
                        cache,
                        events: vec![*e],
                    }),
                    (_, Outgoing::Message(topic, m)) => requests.push(Request::Messages {
                        topic,
                        payloads: vec![m],
                    }),
                }
            }
            for request in requests {
                match node
                    .transport()
                    .call(record.cluster_addr, request, SEND_TIMEOUT)
                    .await
                {
                    Ok(Response::Ok) => {}
                    other => {
                        tracing::debug!(%member, ?other, "events or messages not delivered");
                    }
                }
            }
        }
    }

    /// Sends `payload` on `topic` to every other member, where the handler registered for the
    /// topic ([`Events::on_message`]) receives it. Messages from one member arrive at another
    /// in the order sent; none is retried (a member unreachable misses it).
    pub fn broadcast(&self, node: &Arc<Node>, topic: &str, payload: &[u8]) {
        let state = node.state();
        for record in state.nodes().values() {
            if record.name == node.me().name {
                continue;
            }
            let outbox = self.outbox(node, &MemberId(record.name.clone()));
            let _ = outbox.send(Outgoing::Message(topic.to_owned(), payload.to_vec()));
        }
    }

    /// Has `handler` receive the messages other members broadcast on `topic`.
    pub fn on_message(&self, topic: &str, handler: MessageHandler) {
        self.topics.write().insert(topic.to_owned(), handler);
    }

    /// Answers [`Request::Messages`].
    pub(crate) fn receive(&self, topic: &str, payloads: &[Vec<u8>]) -> Response {
        let handler = self.topics.read().get(topic).cloned();
        if let Some(handler) = handler {
            for payload in payloads {
                handler(payload);
            }
        }
        Response::Ok
    }

    /// Answers [`Request::Events`]: delivers events another member relayed to this
    /// member's listeners of `cache`.
    pub(crate) fn deliver(node: &Node, cache: &str, events: Vec<RelayedEvent>) -> Response {
        let Some(local) = node.manager().cache(cache) else {
            return Response::Ok;
        };
        for event in events {
            let Some(kind) = kind_of(event.kind) else {
                continue;
            };
            let restore = |image: Option<EntryImage>| image.and_then(|i| i.to_entry().ok());
            local.relay_event(kind, restore(event.old), restore(event.new));
        }
        Response::Ok
    }
}
