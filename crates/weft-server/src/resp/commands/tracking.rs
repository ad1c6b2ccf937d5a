//! Client-side caching: CLIENT TRACKING (default, OPTIN, OPTOUT, BCAST with PREFIX,
//! REDIRECT, NOLOOP), CLIENT CACHING, CLIENT GETREDIR, CLIENT TRACKINGINFO, with Redis 7's
//! argument rules, error texts and messages.
//!
//! [`Tracking`] is the server-wide table. In default mode every read-only command of a
//! tracking client records the keys it read (from the command table's key positions) under
//! the client's id, per cache; the first change to such a key sends each recorded client
//! one `invalidate` message and forgets the key, as Redis does. In BCAST mode the client
//! registers prefixes instead and hears about every change to a key starting with one.
//!
//! Changes are seen whatever made them — RESP, Hot Rod, REST, memcached, expiration,
//! eviction — through one synchronous listener per cache (`weft_core::listener`), registered
//! while at least one client tracks and removed with the last one, so caching costs nothing
//! when unused. The listener runs on the writer's thread after the write: it looks the key
//! up and appends messages to mailboxes, never waiting. FLUSHDB and FLUSHALL send every
//! tracking client an invalidation with a null key list. `Cache::clear` called by another
//! protocol raises no events, so it invalidates nothing.
//!
//! Where Weft differs from Redis: default-mode keys are recorded per cache (Redis records
//! key names across databases, so a write in one database invalidates a read in another).
//! BCAST messages gather the keys of one prefix that one RESP command changed (an EXEC: all
//! its commands'), where Redis gathers those of one event-loop cycle; changes made by other
//! protocols, expiration or another member are sent one key per message.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;
use weft_core::{Cache, CacheManager, ListenerId, ListenerOptions};
use weft_resp::Protocol;

use super::{arg_i64, errors, is};
use crate::resp::push::{Clients, Mailbox};
use crate::resp::table::CommandSpec;
use crate::resp::{Reply, Session};

/// Most keys the tracking table remembers; past it, keys are invalidated to make room, as
/// Redis does with its `tracking-table-max-keys` (default 1,000,000).
pub const TRACKING_TABLE_KEYS_MAX: usize = 1_000_000;

/// The pub/sub channel redirected invalidations use for RESP2 clients.
const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

thread_local! {
    /// The RESP client whose command runs on this thread now (0: none), for NOLOOP.
    static WRITER: Cell<u64> = const { Cell::new(0) };
    /// While a RESP command runs on this thread: the BCAST invalidations it caused, sent
    /// when it ends, one message per client and prefix.
    static BATCH: RefCell<Option<Vec<Pending>>> = const { RefCell::new(None) };
}

/// BCAST invalidations waiting for their command to end.
struct Pending {
    clients: Arc<Clients>,
    tracker: Arc<Tracker>,
    prefix: Bytes,
    keys: Vec<Bytes>,
}

/// Runs `run` as client `client_id`'s command: writes it makes are its own for NOLOOP, and
/// the BCAST invalidations they cause go out together when it ends.
pub fn as_client<R>(client_id: u64, run: impl FnOnce() -> R) -> R {
    /// Delivers the batch and restores the writer when `run` returns — or unwinds: a
    /// panicking command must not leave the thread's later writes batched for nobody.
    struct Finish {
        previous: u64,
        outer: bool,
    }
    impl Drop for Finish {
        fn drop(&mut self) {
            if self.outer
                && let Some(pending) = BATCH.with_borrow_mut(Option::take)
                && !std::thread::panicking()
            {
                for entry in pending {
                    deliver(
                        &entry.clients,
                        &entry.tracker,
                        Invalidated::Keys(&entry.keys),
                    );
                }
            }
            WRITER.set(self.previous);
        }
    }
    let previous = WRITER.replace(client_id);
    let outer = BATCH.with_borrow_mut(|batch| {
        let outer = batch.is_none();
        if outer {
            *batch = Some(Vec::new());
        }
        outer
    });
    let _finish = Finish { previous, outer };
    run()
}

/// Adds a BCAST invalidation to the running command's batch; false when no command runs on
/// this thread (the caller sends it now).
fn batch(clients: &Arc<Clients>, tracker: &Arc<Tracker>, prefix: &Bytes, key: &[u8]) -> bool {
    BATCH.with_borrow_mut(|batch| {
        let Some(batch) = batch else { return false };
        match batch
            .iter_mut()
            .find(|p| Arc::ptr_eq(&p.tracker, tracker) && p.prefix == *prefix)
        {
            Some(pending) => {
                if !pending.keys.iter().any(|k| k == key) {
                    pending.keys.push(Bytes::copy_from_slice(key));
                }
            }
            None => batch.push(Pending {
                clients: Arc::clone(clients),
                tracker: Arc::clone(tracker),
                prefix: prefix.clone(),
                keys: vec![Bytes::copy_from_slice(key)],
            }),
        }
        true
    })
}

/// A connection's own view of its tracking mode (the table holds the rest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientTracking {
    /// CLIENT TRACKING ON.
    pub on: bool,
    /// BCAST mode.
    pub bcast: bool,
    /// OPTIN mode.
    pub optin: bool,
    /// OPTOUT mode.
    pub optout: bool,
    /// CLIENT CACHING was given for the next command (or transaction).
    pub caching: bool,
    /// NOLOOP.
    pub noloop: bool,
}

impl ClientTracking {
    /// Whether the keys of a read-only command run now are to be remembered.
    fn remembers(&self) -> bool {
        // OPTIN: only after CLIENT CACHING YES; OPTOUT: except after CLIENT CACHING NO.
        let opted_in = if self.optin {
            self.caching
        } else {
            !(self.optout && self.caching)
        };
        self.on && !self.bcast && opted_in
    }
}

/// A tracking client, as invalidations need it.
#[derive(Debug)]
struct Tracker {
    mailbox: Arc<Mailbox>,
    /// 0: none.
    redirect: u64,
    bcast: bool,
    noloop: bool,
    /// BCAST prefixes, sorted.
    prefixes: Vec<Bytes>,
    /// The redirect client was gone when an invalidation was to be sent.
    broken_redirect: AtomicBool,
}

/// What an invalidation says.
#[derive(Debug, Clone, Copy)]
enum Invalidated<'a> {
    Key(&'a [u8]),
    /// Several keys in one message (BCAST, one command's).
    Keys(&'a [Bytes]),
    /// Every key (after a flush).
    All,
}

/// INFO's tracking numbers: clients tracking, keys remembered, (key, client) pairs, and
/// BCAST prefixes.
#[derive(Debug, Clone, Copy)]
pub struct TrackingCounts {
    pub clients: usize,
    pub keys: usize,
    pub items: usize,
    pub prefixes: usize,
}

/// The server-wide tracking table.
#[derive(Debug)]
pub struct Tracking {
    clients: Arc<Clients>,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: std::sync::atomic::AtomicUsize,
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    trackers: HashMap<u64, Arc<Tracker>>,
    /// Default mode: per cache, key → ids of the clients that read it.
    keys: HashMap<Arc<str>, HashMap<Bytes, Vec<u64>>>,
    key_count: usize,
    /// (key, client) pairs remembered: INFO's `tracking_total_items`.
    item_count: usize,
    /// BCAST: prefix → ids of the clients registered for it.
    prefixes: BTreeMap<Bytes, Vec<u64>>,
    /// The listener on each cache, while anyone tracks.
    listeners: HashMap<Arc<str>, (Cache, ListenerId)>,
}

impl Tracking {
    /// An empty table that finds mailboxes in `clients`.
    #[must_use]
    pub fn new(clients: Arc<Clients>) -> Self {
        Self {
            clients,
            max_keys: std::sync::atomic::AtomicUsize::new(TRACKING_TABLE_KEYS_MAX),
            state: RwLock::new(State::default()),
        }
    }

    /// Registers the invalidation listener on `cache` unless it has one.
    fn ensure_listener(self: &Arc<Self>, state: &mut State, cache: &Cache) {
        if state.listeners.contains_key(cache.name()) {
            return;
        }
        // Weak: the cache holds the listener and the table holds the cache.
        let table: Weak<Self> = Arc::downgrade(self);
        let id = cache.add_listener(ListenerOptions::default(), move |event| {
            if let Some(table) = table.upgrade() {
                table.changed(event.cache_name(), event.key());
            }
        });
        state
            .listeners
            .insert(Arc::from(cache.name()), (cache.clone(), id));
    }

    /// Turns tracking on for a client (or changes its options; prefixes accumulate).
    fn enable(
        self: &Arc<Self>,
        manager: &CacheManager,
        mailbox: &Arc<Mailbox>,
        options: &ClientTracking,
        redirect: u64,
        new_prefixes: &[Bytes],
    ) {
        let id = mailbox.client_id();
        let mut state = self.state.write();
        let mut prefixes = state
            .trackers
            .get(&id)
            .map(|tracker| tracker.prefixes.clone())
            .unwrap_or_default();
        if options.bcast {
            let empty = [Bytes::new()];
            let adding = if new_prefixes.is_empty() {
                &empty[..]
            } else {
                new_prefixes
            };
            for prefix in adding {
                if !prefixes.contains(prefix) {
                    let owned = Bytes::copy_from_slice(prefix);
                    prefixes.push(owned.clone());
                    state.prefixes.entry(owned).or_default().push(id);
                }
            }
            prefixes.sort();
        }
        state.trackers.insert(
            id,
            Arc::new(Tracker {
                mailbox: Arc::clone(mailbox),
                redirect,
                bcast: options.bcast,
                noloop: options.noloop,
                prefixes,
                broken_redirect: AtomicBool::new(false),
            }),
        );
        // BCAST hears about every database, as in Redis; default mode registers lazily too.
        for cache in manager.caches() {
            if cache.config().resp_database.is_some() {
                self.ensure_listener(&mut state, &cache);
            }
        }
    }

    /// Turns tracking off for a client; with the last one, forgets everything and removes
    /// the listeners.
    pub fn disable(&self, client_id: u64) {
        let listeners = {
            let mut state = self.state.write();
            let Some(tracker) = state.trackers.remove(&client_id) else {
                return;
            };
            for prefix in &tracker.prefixes {
                if let Some(ids) = state.prefixes.get_mut(prefix) {
                    ids.retain(|&id| id != client_id);
                    if ids.is_empty() {
                        state.prefixes.remove(prefix);
                    }
                }
            }
            if !state.trackers.is_empty() {
                return;
            }
            // Keys read by clients that stopped tracking are dropped lazily, as in Redis,
            // until nobody tracks.
            state.keys.clear();
            state.key_count = 0;
            state.item_count = 0;
            std::mem::take(&mut state.listeners)
        };
        for (_, (cache, id)) in listeners {
            cache.remove_listener(id);
        }
    }

    fn tracker(&self, client_id: u64) -> Option<Arc<Tracker>> {
        self.state.read().trackers.get(&client_id).cloned()
    }

    /// Records that a client read `keys` from `cache`.
    fn remember<'a>(
        self: &Arc<Self>,
        cache: &Cache,
        client_id: u64,
        keys: impl Iterator<Item = &'a [u8]>,
    ) {
        let evicted;
        {
            let mut state = self.state.write();
            if !state.trackers.contains_key(&client_id) {
                return;
            }
            self.ensure_listener(&mut state, cache);
            let state = &mut *state;
            let table = match state.keys.get_mut(cache.name()) {
                Some(table) => table,
                None => state.keys.entry(Arc::from(cache.name())).or_default(),
            };
            for key in keys {
                match table.get_mut(key) {
                    Some(ids) => {
                        if !ids.contains(&client_id) {
                            ids.push(client_id);
                            state.item_count += 1;
                        }
                    }
                    None => {
                        table.insert(Bytes::copy_from_slice(key), vec![client_id]);
                        state.key_count += 1;
                        state.item_count += 1;
                    }
                }
            }
            evicted = Self::evict_over(state, self.max_keys.load(Ordering::Relaxed));
        }
        for (key, trackers) in evicted {
            for tracker in trackers {
                self.deliver(&tracker, Invalidated::Key(&key));
            }
        }
    }

    /// INFO's tracking numbers.
    pub fn counts(&self) -> TrackingCounts {
        let state = self.state.read();
        TrackingCounts {
            clients: state.trackers.len(),
            keys: state.key_count,
            items: state.item_count,
            prefixes: state.prefixes.len(),
        }
    }

    /// Forgets keys until at most `max` are remembered (0: no limit), oldest tables first;
    /// the keys forgotten with the clients to tell.
    fn evict_over(state: &mut State, max: usize) -> Vec<(Bytes, Vec<Arc<Tracker>>)> {
        let mut evicted = Vec::new();
        while max > 0 && state.key_count > max {
            let Some(victim) = state.keys.values_mut().find_map(|table| {
                let key = table.keys().next().cloned()?;
                table.remove_entry(&key)
            }) else {
                break;
            };
            state.key_count -= 1;
            state.item_count -= victim.1.len();
            let trackers: Vec<Arc<Tracker>> = victim
                .1
                .iter()
                .filter_map(|id| state.trackers.get(id).filter(|t| !t.bcast).cloned())
                .collect();
            evicted.push((victim.0, trackers));
        }
        evicted
    }

    /// CONFIG SET `tracking-table-max-keys`: the new bound, applied now (the keys forgotten
    /// are invalidated, as Redis does).
    pub fn configure(&self, name: &str, value: &str) {
        if name != "tracking-table-max-keys" {
            return;
        }
        let max = value.parse::<usize>().unwrap_or(TRACKING_TABLE_KEYS_MAX);
        self.max_keys.store(max, Ordering::Relaxed);
        let evicted = Self::evict_over(&mut self.state.write(), max);
        for (key, trackers) in evicted {
            for tracker in trackers {
                self.deliver(&tracker, Invalidated::Key(&key));
            }
        }
    }

    /// A key of `cache` changed (any protocol, expiration or eviction).
    fn changed(&self, cache: &str, key: &[u8]) {
        let writer = WRITER.get();
        let mut targets: Vec<Arc<Tracker>> = Vec::new();
        let tracked = {
            let state = self.state.read();
            for (prefix, ids) in &state.prefixes {
                if !key.starts_with(prefix) {
                    continue;
                }
                for id in ids {
                    if let Some(tracker) = state.trackers.get(id)
                        && !(tracker.noloop && *id == writer)
                        && !batch(&self.clients, tracker, prefix, key)
                    {
                        targets.push(Arc::clone(tracker));
                    }
                }
            }
            state
                .keys
                .get(cache)
                .is_some_and(|table| table.contains_key(key))
        };
        if tracked {
            let mut state = self.state.write();
            if let Some(ids) = state
                .keys
                .get_mut(cache)
                .and_then(|table| table.remove(key))
            {
                state.key_count -= 1;
                state.item_count -= ids.len();
                for id in ids {
                    if let Some(tracker) = state.trackers.get(&id)
                        && !tracker.bcast
                        && !(tracker.noloop && id == writer)
                    {
                        targets.push(Arc::clone(tracker));
                    }
                }
            }
        }
        for tracker in targets {
            self.deliver(&tracker, Invalidated::Key(key));
        }
    }

    /// After FLUSHDB or FLUSHALL: every tracking client hears that every key changed, and
    /// the table is emptied (Redis does both whichever database was flushed).
    pub fn flushed(&self) {
        let trackers: Vec<Arc<Tracker>> = {
            let mut state = self.state.write();
            if state.trackers.is_empty() {
                return;
            }
            for table in state.keys.values_mut() {
                table.clear();
            }
            state.key_count = 0;
            state.item_count = 0;
            state.trackers.values().cloned().collect()
        };
        for tracker in trackers {
            self.deliver(&tracker, Invalidated::All);
        }
    }

    /// Sends one invalidation for `tracker`: a RESP3 push to it or to its redirect client,
    /// or a `__redis__:invalidate` message to a RESP2 redirect client in pub/sub mode; a
    /// RESP2 client without redirect gets nothing, as in Redis.
    fn deliver(&self, tracker: &Tracker, what: Invalidated<'_>) {
        deliver(&self.clients, tracker, what);
    }
}

/// Sends one invalidation for `tracker` (see [`Tracking::deliver`]), finding its redirect
/// client in `clients`.
fn deliver(clients: &Clients, tracker: &Tracker, what: Invalidated<'_>) {
    // Redis writes the null of a flush in the tracking client's protocol, even when it
    // goes to a redirect client.
    let own_protocol = tracker.mailbox.protocol();
    let (target, redirected) = if tracker.redirect == 0 {
        (Arc::clone(&tracker.mailbox), false)
    } else if let Some(target) = clients.get(tracker.redirect) {
        (target, true)
    } else {
        tracker.broken_redirect.store(true, Ordering::Relaxed);
        let redirect = i64::try_from(tracker.redirect).unwrap_or(i64::MAX);
        tracker.mailbox.push(|out, protocol| {
            if protocol == Protocol::Resp3 {
                weft_resp::write_push_len(out, 2, protocol);
                weft_resp::write_bulk(out, b"tracking-redir-broken");
                weft_resp::write_integer(out, redirect);
            }
        });
        return;
    };
    let subscribed = target.is_subscribed();
    target.push(|out, protocol| {
        if protocol == Protocol::Resp3 {
            weft_resp::write_push_len(out, 2, protocol);
            weft_resp::write_bulk(out, b"invalidate");
        } else if redirected && subscribed {
            weft_resp::write_array_len(out, 3);
            weft_resp::write_bulk(out, b"message");
            weft_resp::write_bulk(out, INVALIDATE_CHANNEL);
        } else {
            return;
        }
        write_invalidated(out, what, own_protocol);
    });
}

fn write_invalidated(out: &mut BytesMut, what: Invalidated<'_>, protocol: Protocol) {
    match what {
        Invalidated::Key(key) => {
            weft_resp::write_array_len(out, 1);
            weft_resp::write_bulk(out, key);
        }
        Invalidated::Keys(keys) => {
            weft_resp::write_array_len(out, keys.len());
            for key in keys {
                weft_resp::write_bulk(out, key);
            }
        }
        Invalidated::All => weft_resp::write_null(out, protocol),
    }
}

/// After a command ran: a tracking client in default mode remembers the keys of read-only
/// commands (even those that answered an error, as Redis does).
pub fn after_command(session: &Session, spec: &CommandSpec, args: &[Bytes]) {
    if !session.tracking.remembers() || !spec.flags.contains(&"readonly") {
        return;
    }
    // A script that reads has read the keys it declared, whichever it read (Redis'
    // rule): its commands' own keys are not remembered.
    if session.in_script {
        session.context.push.tracking.remember(
            &session.cache,
            session.client_id,
            session.script_keys.iter().map(|key| &key[..]),
        );
        return;
    }
    if spec.first_key <= 0 {
        return;
    }
    let len = i64::try_from(args.len()).unwrap_or(i64::MAX);
    let first = i64::from(spec.first_key);
    let last = match i64::from(spec.last_key) {
        last if last < 0 => len + last,
        last => last,
    };
    let step = i64::from(spec.step).max(1);
    let keys = (first..=last.min(len - 1))
        .step_by(usize::try_from(step).unwrap_or(1))
        .filter_map(|index| usize::try_from(index).ok())
        .filter_map(|index| args.get(index))
        .map(|key| &key[..]);
    session
        .context
        .push
        .tracking
        .remember(&session.cache, session.client_id, keys);
}

/// Turns tracking off (CLIENT TRACKING OFF, RESET, the connection closing).
pub fn disable(session: &mut Session) {
    if session.tracking.on {
        session.context.push.tracking.disable(session.client_id);
    }
    session.tracking = ClientTracking::default();
}

const SWITCH_BCAST: &str = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.";
const SWITCH_OPT: &str = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.";

/// Redis' prefix check: two prefixes overlap when one starts with the other (so the empty
/// prefix overlaps every other).
fn overlaps(a: &[u8], b: &[u8]) -> bool {
    let shared = a.len().min(b.len());
    a[..shared] == b[..shared]
}

fn prefix_collision(existing: &[Bytes], new: &[Bytes]) -> Option<String> {
    for (index, prefix) in new.iter().enumerate() {
        if let Some(old) = existing.iter().find(|old| overlaps(old, prefix)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(prefix),
                String::from_utf8_lossy(old)
            ));
        }
        if let Some(other) = new[index + 1..]
            .iter()
            .find(|other| overlaps(prefix, other))
        {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                String::from_utf8_lossy(prefix),
                String::from_utf8_lossy(other)
            ));
        }
    }
    None
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX prefix ...] [BCAST] [OPTIN] [OPTOUT]
/// [NOLOOP]`
pub fn client_tracking(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut redirect: u64 = 0;
    let mut options = ClientTracking {
        on: true,
        ..ClientTracking::default()
    };
    let mut prefixes: Vec<Bytes> = Vec::new();
    let mut index = 3;
    while index < args.len() {
        let more = index + 1 < args.len();
        let option = &args[index];
        if is(option, "REDIRECT") && more {
            index += 1;
            if redirect != 0 {
                return reply.error("ERR A client can only redirect to a single other client");
            }
            let Some(id) = arg_i64(args, index) else {
                return reply.error(errors::NOT_INTEGER);
            };
            // The client must exist now, though it may leave later.
            let Some(id) = u64::try_from(id)
                .ok()
                .filter(|&id| session.context.push.clients.get(id).is_some())
            else {
                return reply.error("ERR The client ID you want redirect to does not exist");
            };
            redirect = id;
        } else if is(option, "BCAST") {
            options.bcast = true;
        } else if is(option, "OPTIN") {
            options.optin = true;
        } else if is(option, "OPTOUT") {
            options.optout = true;
        } else if is(option, "NOLOOP") {
            options.noloop = true;
        } else if is(option, "PREFIX") && more {
            index += 1;
            prefixes.push(args[index].clone());
        } else {
            return reply.error(errors::SYNTAX);
        }
        index += 1;
    }
    let current = session.tracking;
    if is(&args[2], "ON") {
        if !options.bcast && !prefixes.is_empty() {
            return reply.error("ERR PREFIX option requires BCAST mode to be enabled");
        }
        if current.on && current.bcast != options.bcast {
            return reply.error(SWITCH_BCAST);
        }
        if options.bcast && (options.optin || options.optout) {
            return reply.error("ERR OPTIN and OPTOUT are not compatible with BCAST");
        }
        if options.optin && options.optout {
            return reply.error("ERR You can't specify both OPTIN mode and OPTOUT mode");
        }
        if (options.optin && current.optout) || (options.optout && current.optin) {
            return reply.error(SWITCH_OPT);
        }
        let tracking = &session.context.push.tracking;
        if options.bcast {
            let existing = tracking
                .tracker(session.client_id)
                .map(|tracker| tracker.prefixes.clone())
                .unwrap_or_default();
            if let Some(error) = prefix_collision(&existing, &prefixes) {
                return reply.error(&error);
            }
        }
        tracking.enable(
            &session.context.manager,
            &session.mailbox,
            &options,
            redirect,
            &prefixes,
        );
        // CLIENT CACHING given before survives re-enabling, as Redis keeps the flag.
        options.caching = current.caching;
        session.tracking = options;
    } else if is(&args[2], "OFF") {
        disable(session);
    } else {
        return reply.error(errors::SYNTAX);
    }
    reply.ok();
}

/// `CLIENT CACHING YES|NO`
pub fn client_caching(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let tracking = &mut session.tracking;
    if !tracking.on {
        return reply.error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    }
    if is(&args[2], "YES") {
        if !tracking.optin {
            return reply.error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(&args[2], "NO") {
        if !tracking.optout {
            return reply.error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return reply.error(errors::SYNTAX);
    }
    tracking.caching = true;
    reply.ok();
}

/// The redirect client id CLIENT GETREDIR and TRACKINGINFO report: -1 when tracking is
/// off, 0 without redirect.
#[must_use]
pub fn redirect_of(session: &Session) -> i64 {
    if !session.tracking.on {
        return -1;
    }
    session
        .context
        .push
        .tracking
        .tracker(session.client_id)
        .map_or(0, |tracker| {
            i64::try_from(tracker.redirect).unwrap_or(i64::MAX)
        })
}

/// Whether invalidations could not reach the redirect client (CLIENT LIST flag `R`).
#[must_use]
pub fn redirect_broken(session: &Session) -> bool {
    session.tracking.on
        && session
            .context
            .push
            .tracking
            .tracker(session.client_id)
            .is_some_and(|tracker| tracker.broken_redirect.load(Ordering::Relaxed))
}

/// `CLIENT GETREDIR`
pub fn client_getredir(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    reply.integer(redirect_of(session));
}

/// `CLIENT TRACKINGINFO`
pub fn client_trackinginfo(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    let tracking = session.tracking;
    let tracker = if tracking.on {
        session.context.push.tracking.tracker(session.client_id)
    } else {
        None
    };
    let mut flags: Vec<&[u8]> = vec![if tracking.on { b"on" } else { b"off" }];
    if tracking.bcast {
        flags.push(b"bcast");
    }
    if tracking.optin {
        flags.push(b"optin");
        if tracking.caching {
            flags.push(b"caching-yes");
        }
    }
    if tracking.optout {
        flags.push(b"optout");
        if tracking.caching {
            flags.push(b"caching-no");
        }
    }
    if tracking.noloop {
        flags.push(b"noloop");
    }
    if tracker
        .as_ref()
        .is_some_and(|tracker| tracker.broken_redirect.load(Ordering::Relaxed))
    {
        flags.push(b"broken_redirect");
    }
    reply.map(3);
    reply.bulk(b"flags");
    reply.set(flags.len());
    for flag in flags {
        reply.bulk(flag);
    }
    reply.bulk(b"redirect");
    reply.integer(redirect_of(session));
    reply.bulk(b"prefixes");
    let prefixes = tracker
        .map(|tracker| tracker.prefixes.clone())
        .unwrap_or_default();
    reply.array(prefixes.len());
    for prefix in prefixes {
        reply.bulk(&prefix);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves Redis' overlap rule: one prefix starting with the other, the empty one
    // overlapping everything, and the first colliding pair named in Redis' words.
    #[test]
    fn prefixes_overlap_as_in_redis() {
        assert!(overlaps(b"a", b"ab"));
        assert!(overlaps(b"ab", b"a"));
        assert!(overlaps(b"", b"x"));
        assert!(overlaps(b"a", b"a"));
        assert!(!overlaps(b"ab", b"ac"));
        let existing = [Bytes::from_static(b"b")];
        assert_eq!(
            prefix_collision(&existing, &[Bytes::from_static(b"bb")]).as_deref(),
            Some(
                "ERR Prefix 'bb' overlaps with an existing prefix 'b'. Prefixes for a single client must not overlap."
            )
        );
        assert_eq!(
            prefix_collision(&[], &[Bytes::from_static(b"a"), Bytes::from_static(b"ab")])
                .as_deref(),
            Some(
                "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."
            )
        );
        assert!(prefix_collision(&existing, &[Bytes::from_static(b"c")]).is_none());
    }

    // Proves OPTIN remembers only after CLIENT CACHING YES, OPTOUT all but after CACHING NO,
    // and BCAST never (it tracks prefixes instead).
    #[test]
    fn caching_flags_decide_what_is_remembered() {
        let on = ClientTracking {
            on: true,
            ..ClientTracking::default()
        };
        assert!(on.remembers());
        let optin = ClientTracking { optin: true, ..on };
        assert!(!optin.remembers());
        assert!(
            ClientTracking {
                caching: true,
                ..optin
            }
            .remembers()
        );
        let optout = ClientTracking { optout: true, ..on };
        assert!(optout.remembers());
        assert!(
            !ClientTracking {
                caching: true,
                ..optout
            }
            .remembers()
        );
        assert!(!ClientTracking { bcast: true, ..on }.remembers());
        assert!(!ClientTracking::default().remembers());
    }
}
