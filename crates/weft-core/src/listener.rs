//! Cache listeners: who hears about writes, expirations and evictions, and how.
//!
//! A listener chooses the kinds it wants, an optional filter, and a delivery:
//! * `Sync`: called on the writer's thread after the write is applied and its segment lock
//!   released, before the write returns (so a listener may read the cache).
//! * `Async`: events go into a bounded queue drained by the listener's own thread. When the
//!   queue is full the writer waits: back-pressure instead of unbounded memory — unless the
//!   writer is itself a listener thread (an asynchronous listener writing to a cache), which
//!   could be waiting for itself: it then delivers the event on its own thread instead.
//!
//! Events carry the old and new entries themselves (zero-copy handles), hence key, values and
//! metadata. `clear()` raises no per-entry events, as in Infinispan.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::entry::{CacheEntry, EntryMetadata};

/// Default capacity of an asynchronous listener's queue.
pub const LISTENER_QUEUE_CAPACITY_DEFAULT: usize = 1024;

/// What happened to an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A key that was absent got a value.
    Created,
    /// A present key got a new value or metadata.
    Modified,
    /// A key was removed by a user operation.
    Removed,
    /// An entry reached its lifespan or max idle and was removed.
    Expired,
    /// An entry was removed to keep the cache within its memory bound.
    Evicted,
}

impl EventKind {
    const fn bit(self) -> u8 {
        match self {
            Self::Created => 1,
            Self::Modified => 2,
            Self::Removed => 4,
            Self::Expired => 8,
            Self::Evicted => 16,
        }
    }
}

/// A set of event kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventKinds(u8);

impl EventKinds {
    /// Every kind.
    pub const ALL: Self = Self(31);
    /// No kind.
    pub const NONE: Self = Self(0);

    /// This set plus `kind`.
    #[must_use]
    pub const fn with(self, kind: EventKind) -> Self {
        Self(self.0 | kind.bit())
    }

    /// Whether `kind` is in the set.
    #[must_use]
    pub const fn contains(self, kind: EventKind) -> bool {
        self.0 & kind.bit() != 0
    }
}

impl FromIterator<EventKind> for EventKinds {
    fn from_iter<I: IntoIterator<Item = EventKind>>(kinds: I) -> Self {
        kinds.into_iter().fold(Self::NONE, Self::with)
    }
}

/// One event. At least one of `old` and `new` is present.
#[derive(Clone)]
pub struct CacheEvent {
    kind: EventKind,
    cache_name: Arc<str>,
    old: Option<CacheEntry>,
    new: Option<CacheEntry>,
    relayed: bool,
}

impl CacheEvent {
    pub(crate) fn new(
        kind: EventKind,
        cache_name: Arc<str>,
        old: Option<CacheEntry>,
        new: Option<CacheEntry>,
    ) -> Self {
        debug_assert!(old.is_some() || new.is_some(), "an event concerns an entry");
        Self {
            kind,
            cache_name,
            old,
            new,
            relayed: false,
        }
    }

    /// The created event a listener's current state presents for `entry` (Infinispan's
    /// include-current-state): what a filter is asked about each entry listed.
    #[must_use]
    pub fn current_state(cache_name: Arc<str>, entry: CacheEntry) -> Self {
        Self::new(EventKind::Created, cache_name, None, Some(entry))
    }

    pub(crate) fn mark_relayed(&mut self) {
        self.relayed = true;
    }

    /// Whether another member of a grid applied the write and relayed its event here (see
    /// [`crate::Cache::relay_event`]), rather than this cache.
    #[must_use]
    pub fn is_relayed(&self) -> bool {
        self.relayed
    }

    /// What happened.
    #[must_use]
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The cache it happened in.
    #[must_use]
    pub fn cache_name(&self) -> &str {
        &self.cache_name
    }

    /// The key concerned.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        self.new
            .as_ref()
            .or(self.old.as_ref())
            .map_or(&[], CacheEntry::key)
    }

    /// The value before the event (modified, removed, expired, evicted).
    #[must_use]
    pub fn old_value(&self) -> Option<&[u8]> {
        self.old.as_ref().map(CacheEntry::value)
    }

    /// The value after the event (created, modified).
    #[must_use]
    pub fn new_value(&self) -> Option<&[u8]> {
        self.new.as_ref().map(CacheEntry::value)
    }

    /// The entry before the event.
    #[must_use]
    pub fn old_entry(&self) -> Option<&CacheEntry> {
        self.old.as_ref()
    }

    /// The entry after the event.
    #[must_use]
    pub fn new_entry(&self) -> Option<&CacheEntry> {
        self.new.as_ref()
    }

    /// Metadata of the entry after the event, or before it for removals.
    #[must_use]
    pub fn metadata(&self) -> Option<EntryMetadata> {
        self.new
            .as_ref()
            .or(self.old.as_ref())
            .map(CacheEntry::metadata)
    }
}

impl fmt::Debug for CacheEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheEvent")
            .field("kind", &self.kind)
            .field("cache", &self.cache_name)
            .field("key", &String::from_utf8_lossy(self.key()))
            .finish()
    }
}

/// How events reach a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// On the writing thread, before the write returns.
    Sync,
    /// On the listener's own thread through a queue of `queue_capacity` events.
    Async {
        /// Events buffered before writers wait.
        queue_capacity: usize,
    },
}

/// Called when a cache's listeners start or stop wanting the events other members relay.
pub type InterestHook = Arc<dyn Fn() + Send + Sync>;

/// A predicate on events.
pub type EventFilter = Arc<dyn Fn(&CacheEvent) -> bool + Send + Sync>;

/// A filter named in a registry ([`EventFilterFactories`]) that every member of a grid holds,
/// with its parameters: unlike a closure, it can run where each write is applied, so the
/// events it rejects never leave the member that raised them (Infinispan's filter
/// factories, which a Hot Rod client names in `@ClientListener(filterFactoryName = ...)`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceFilter {
    /// The factory's registered name.
    pub name: String,
    /// Its parameters, as the listener gave them.
    pub params: Vec<Vec<u8>>,
}

/// Makes the filters a [`SourceFilter`] names.
pub trait EventFilterFactory: Send + Sync {
    /// The filter for these parameters.
    ///
    /// # Errors
    /// Parameters the factory does not accept, said in words.
    fn filter(&self, params: &[Vec<u8>]) -> Result<EventFilter, String>;
}

impl<F> EventFilterFactory for F
where
    F: Fn(&[Vec<u8>]) -> Result<EventFilter, String> + Send + Sync,
{
    fn filter(&self, params: &[Vec<u8>]) -> Result<EventFilter, String> {
        self(params)
    }
}

/// The event filter factories of a process, by name (see [`SourceFilter`]). A grid's
/// members must register the same factories under the same names.
#[derive(Default)]
pub struct EventFilterFactories {
    registered: RwLock<std::collections::HashMap<String, Arc<dyn EventFilterFactory>>>,
}

impl fmt::Debug for EventFilterFactories {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<String> = self.registered.read().keys().cloned().collect();
        names.sort();
        f.debug_struct("EventFilterFactories")
            .field("names", &names)
            .finish()
    }
}

impl EventFilterFactories {
    /// Registers `factory` as `name` (replacing one registered before).
    pub fn register(&self, name: impl Into<String>, factory: Arc<dyn EventFilterFactory>) {
        self.registered.write().insert(name.into(), factory);
    }

    /// Whether a factory is registered as `name`.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.registered.read().contains_key(name)
    }

    /// The filter `source` names.
    ///
    /// # Errors
    /// No factory registered under its name, or parameters it refused.
    pub fn make(&self, source: &SourceFilter) -> Result<EventFilter, String> {
        let factory = self.registered.read().get(&source.name).cloned();
        match factory {
            Some(factory) => factory.filter(&source.params),
            None => Err(format!(
                "no event filter factory is registered as '{}'",
                source.name
            )),
        }
    }
}

/// What a member's listeners of a cache want relayed from the members where writes are
/// applied: every event, or those passing one of these filters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RelayInterest {
    /// Every event (a listener has no [`SourceFilter`]).
    All,
    /// The events passing one of these.
    Passing(Vec<SourceFilter>),
}

/// How a listener is registered.
#[derive(Clone)]
pub struct ListenerOptions {
    /// Kinds delivered.
    pub kinds: EventKinds,
    /// Only events for which this returns true are delivered.
    pub filter: Option<EventFilter>,
    /// Delivery mode.
    pub delivery: Delivery,
    /// Only events of writes this cache applied itself, none that other members of a grid
    /// relay; such a listener does not ask the grid for other members' events (the grid's
    /// own relay is one).
    pub local_only: bool,
    /// The named filter `filter` was made from ([`ListenerOptions::source_filter`]): the
    /// members where writes are applied run it too, and relay only what passes.
    pub source: Option<SourceFilter>,
}

impl Default for ListenerOptions {
    fn default() -> Self {
        Self {
            kinds: EventKinds::ALL,
            filter: None,
            delivery: Delivery::Sync,
            local_only: false,
            source: None,
        }
    }
}

impl fmt::Debug for ListenerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenerOptions")
            .field("kinds", &self.kinds)
            .field("filtered", &self.filter.is_some())
            .field("delivery", &self.delivery)
            .field("local_only", &self.local_only)
            .field("source", &self.source)
            .finish()
    }
}

impl ListenerOptions {
    /// Only events of writes this cache applied itself (see [`ListenerOptions::local_only`]).
    #[must_use]
    pub fn local_only(mut self) -> Self {
        self.local_only = true;
        self
    }

    /// Only these kinds.
    #[must_use]
    pub fn kinds(mut self, kinds: EventKinds) -> Self {
        self.kinds = kinds;
        self
    }

    /// Only events passing `filter` (run here: a grid relays every event to this member;
    /// see [`ListenerOptions::source_filter`]). It replaces a source filter set before.
    #[must_use]
    pub fn filter(mut self, filter: impl Fn(&CacheEvent) -> bool + Send + Sync + 'static) -> Self {
        self.filter = Some(Arc::new(filter));
        self.source = None;
        self
    }

    /// Only events passing the filter `source` names in `factories`, run both here and on
    /// the grid members where writes are applied (only what passes is relayed).
    ///
    /// # Errors
    /// No factory registered under its name, or parameters it refused.
    pub fn source_filter(
        mut self,
        factories: &EventFilterFactories,
        source: SourceFilter,
    ) -> Result<Self, String> {
        self.filter = Some(factories.make(&source)?);
        self.source = Some(source);
        Ok(self)
    }

    /// Asynchronous delivery with a queue of `queue_capacity` events.
    #[must_use]
    pub fn asynchronous(mut self, queue_capacity: usize) -> Self {
        self.delivery = Delivery::Async {
            queue_capacity: queue_capacity.max(1),
        };
        self
    }
}

/// Identifies a registered listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ListenerId(u64);

type Handler = Arc<dyn Fn(&CacheEvent) + Send + Sync>;

thread_local! {
    /// Set on asynchronous listeners' threads: they must never wait for a queue to drain,
    /// since the queue may be their own (or another's that waits for theirs).
    static ON_LISTENER_THREAD: Cell<bool> = const { Cell::new(false) };
}

enum Sink {
    Sync(Handler),
    Async(SyncSender<CacheEvent>, Handler),
}

struct Registration {
    id: ListenerId,
    kinds: EventKinds,
    filter: Option<EventFilter>,
    local_only: bool,
    source: Option<SourceFilter>,
    sink: Sink,
}

/// The listeners of one cache.
pub(crate) struct Listeners {
    registrations: RwLock<Arc<[Arc<Registration>]>>,
    any: AtomicBool,
    /// Listeners that want the events other members relay (not `local_only`).
    interested: AtomicU64,
    /// Called when a listener that wants relayed events comes or goes (the grid tells the
    /// other members what this member's listeners want now).
    interest_hook: RwLock<Option<InterestHook>>,
    next_id: AtomicU64,
    /// Times a writer found an asynchronous queue full and had to wait.
    backpressure_waits: AtomicU64,
}

impl fmt::Debug for Listeners {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listeners")
            .field("count", &self.registrations.read().len())
            .finish()
    }
}

impl Listeners {
    pub(crate) fn new() -> Self {
        Self {
            registrations: RwLock::new(Arc::from(Vec::new())),
            any: AtomicBool::new(false),
            interested: AtomicU64::new(0),
            interest_hook: RwLock::new(None),
            next_id: AtomicU64::new(1),
            backpressure_waits: AtomicU64::new(0),
        }
    }

    /// Cheap check so writes skip building events when nobody listens.
    pub(crate) fn wants(&self, kind: EventKind) -> bool {
        self.any.load(Ordering::Acquire)
            && self
                .registrations
                .read()
                .iter()
                .any(|r| r.kinds.contains(kind))
    }

    pub(crate) fn has_any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Whether a listener wants the events other members of a grid relay.
    pub(crate) fn wants_relayed(&self) -> bool {
        self.interested.load(Ordering::Acquire) > 0
    }

    /// What the listeners that want relayed events want: `None` when there are none.
    pub(crate) fn relay_interest(&self) -> Option<RelayInterest> {
        let registrations = Arc::clone(&self.registrations.read());
        let mut passing: Vec<SourceFilter> = Vec::new();
        let mut any = false;
        for registration in registrations.iter().filter(|r| !r.local_only) {
            any = true;
            match &registration.source {
                Some(source) => passing.push(source.clone()),
                None => return Some(RelayInterest::All),
            }
        }
        passing.sort();
        passing.dedup();
        any.then_some(RelayInterest::Passing(passing))
    }

    pub(crate) fn set_interest_hook(&self, hook: Option<InterestHook>) {
        *self.interest_hook.write() = hook;
    }

    fn interest_changed(&self) {
        let hook = self.interest_hook.read().clone();
        if let Some(hook) = hook {
            hook();
        }
    }

    pub(crate) fn backpressure_waits(&self) -> u64 {
        self.backpressure_waits.load(Ordering::Relaxed)
    }

    pub(crate) fn add(
        &self,
        cache_name: &str,
        options: ListenerOptions,
        handler: Handler,
    ) -> ListenerId {
        let id = ListenerId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let sink = match options.delivery {
            Delivery::Sync => Sink::Sync(handler),
            Delivery::Async { queue_capacity } => {
                let (sender, receiver) = mpsc::sync_channel::<CacheEvent>(queue_capacity.max(1));
                let name = format!("weft-listener-{cache_name}-{}", id.0);
                let worker = Arc::clone(&handler);
                let spawned = std::thread::Builder::new().name(name).spawn(move || {
                    ON_LISTENER_THREAD.with(|flag| flag.set(true));
                    // Ends when the registration (the only sender) is dropped and the queue
                    // is drained, so removal loses no queued event.
                    for event in receiver {
                        worker(&event);
                    }
                });
                match spawned {
                    Ok(_) => Sink::Async(sender, handler),
                    Err(error) => {
                        tracing::error!(%error, "cannot start listener thread; delivering synchronously");
                        Sink::Sync(handler)
                    }
                }
            }
        };
        let registration = Arc::new(Registration {
            id,
            kinds: options.kinds,
            filter: options.filter,
            local_only: options.local_only,
            source: options.source,
            sink,
        });
        {
            let mut registrations = self.registrations.write();
            let mut next: Vec<_> = registrations.iter().cloned().collect();
            next.push(registration);
            *registrations = Arc::from(next);
            self.any.store(true, Ordering::Release);
        }
        if !options.local_only {
            self.interested.fetch_add(1, Ordering::AcqRel);
            self.interest_changed();
        }
        id
    }

    pub(crate) fn remove(&self, id: ListenerId) -> bool {
        let removed_interest;
        let removed = {
            let mut registrations = self.registrations.write();
            let before = registrations.len();
            removed_interest = registrations.iter().any(|r| r.id == id && !r.local_only);
            let next: Vec<_> = registrations
                .iter()
                .filter(|r| r.id != id)
                .cloned()
                .collect();
            let removed = next.len() != before;
            self.any.store(!next.is_empty(), Ordering::Release);
            *registrations = Arc::from(next);
            removed
        };
        if removed_interest {
            self.interested.fetch_sub(1, Ordering::AcqRel);
            self.interest_changed();
        }
        removed
    }

    pub(crate) fn notify(&self, event: CacheEvent) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        // Deliver from a snapshot: a blocked asynchronous queue must not hold the lock that
        // `add` and `remove` need.
        let registrations = Arc::clone(&self.registrations.read());
        for registration in registrations.iter() {
            if !registration.kinds.contains(event.kind)
                || (event.relayed && registration.local_only)
            {
                continue;
            }
            if let Some(filter) = &registration.filter
                && !filter(&event)
            {
                continue;
            }
            match &registration.sink {
                Sink::Sync(handler) => handler(&event),
                Sink::Async(sender, handler) => match sender.try_send(event.clone()) {
                    Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                    Err(TrySendError::Full(event)) if ON_LISTENER_THREAD.with(Cell::get) => {
                        // Waiting could deadlock (this thread may be the one that drains the
                        // queue): deliver here, out of queue order.
                        handler(&event);
                    }
                    Err(TrySendError::Full(event)) => {
                        self.backpressure_waits.fetch_add(1, Ordering::Relaxed);
                        // The receiver lives until the sender is dropped; an error means the
                        // listener thread died, and its events have nowhere to go.
                        let _ = sender.send(event);
                    }
                },
            }
        }
    }
}
