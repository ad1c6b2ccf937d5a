//! The near cache's bookkeeping: entries with the instant each was last known fresh, the
//! invalidation stream's state (which servers have an acknowledged listener, and up to when
//! each has been confirmed), and the rule deciding whether an entry may be served.
//!
//! No I/O here: [`crate::invalidation`] drives it from the listener connections, and the
//! cache's reads and writes call it. All instants are the client's monotonic clock
//! (`tokio::time::Instant`, so tests can pause time).
//!
//! # The rule
//! An entry fetched by a request sent at `fetched_at` holds a value that was current on the
//! server at some instant no earlier than `fetched_at`. If the entry was fetched while the
//! invalidation stream was complete (every server had an acknowledged listener) in epoch `e`,
//! and the stream is still in epoch `e` and every server's listener connection answered a
//! PING sent at `confirmed_at(server)` or later, then every write a server applied before
//! `confirmed = min(confirmed_at)` has had its invalidation delivered: the entry, not
//! invalidated, was still current at `confirmed`. So the entry is known fresh at
//! `max(fetched_at, confirmed)`, and it is served at `now` only if
//! `now - known_fresh <= staleness_bound` (and its lifespan has not run out).
//!
//! Anything that could lose an invalidation — a listener connection breaking, the server list
//! changing — ends the epoch: entries of an earlier epoch are never extended again, and only
//! serve out their first `staleness_bound` after being fetched.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::config::NearCacheConfig;

/// Counts of what the near cache did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NearCacheStats {
    /// Reads served from the near cache.
    pub hits: u64,
    /// Reads that went to the server (absent, or no longer known fresh enough).
    pub misses: u64,
    /// Of the misses, those of an entry held but not known fresh enough to serve.
    pub stale: u64,
    /// Entries removed by invalidation events.
    pub invalidations: u64,
    /// Entries held now.
    pub entries: u64,
}

/// A read's ticket: what the near cache must know when the fetch's answer arrives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    token: u64,
    /// The epoch the stream was complete in when the fetch was sent, if it was.
    epoch: Option<u64>,
    sent_at: Instant,
}

/// What the near cache says about a read.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// Serve this value.
    Hit(Bytes),
    /// Fetch it, and hand the answer back with this ticket.
    Miss(Ticket),
}

#[derive(Debug)]
struct Entry {
    value: Bytes,
    fetched_at: Instant,
    epoch: Option<u64>,
    expires_at: Option<Instant>,
}

#[derive(Debug)]
enum Slot {
    /// A fetch is in flight; only the one holding this token may fill the slot.
    Pending(u64),
    Ready(Entry),
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<Bytes, Slot>,
    next_token: u64,
    /// Counts up whenever the stream may have lost an event.
    epoch: u64,
    /// Whether every server of `servers` has an acknowledged listener in `epoch`.
    complete: bool,
    servers: Vec<SocketAddr>,
    /// Per server, the send instant of the latest PING answered on its listener connection
    /// in this epoch.
    confirmed: HashMap<SocketAddr, Instant>,
}

impl State {
    /// The instant up to which every write has been delivered, if the stream is complete and
    /// every server has been confirmed in this epoch.
    fn confirmed_through(&self) -> Option<Instant> {
        if !self.complete || self.servers.is_empty() {
            return None;
        }
        let mut through: Option<Instant> = None;
        for server in &self.servers {
            let at = *self.confirmed.get(server)?;
            through = Some(through.map_or(at, |t| t.min(at)));
        }
        through
    }
}

/// A near cache's entries and the state of its invalidation stream.
#[derive(Debug)]
pub(crate) struct NearCache {
    config: NearCacheConfig,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    stale: AtomicU64,
    invalidations: AtomicU64,
}

impl NearCache {
    pub(crate) fn new(config: NearCacheConfig) -> Self {
        Self {
            config,
            state: Mutex::new(State::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            invalidations: AtomicU64::new(0),
        }
    }

    pub(crate) fn config(&self) -> &NearCacheConfig {
        &self.config
    }

    /// A read of `key` beginning at `now`: the value if it may be served, else a ticket for
    /// the fetch (which now owns the key's slot).
    pub(crate) fn lookup(&self, key: &[u8], now: Instant) -> Lookup {
        let mut state = self.state.lock();
        let confirmed = state.confirmed_through();
        let epoch = state.epoch;
        if let Some(Slot::Ready(entry)) = state.entries.get(key) {
            let mut known_fresh = entry.fetched_at;
            if entry.epoch == Some(epoch)
                && let Some(confirmed) = confirmed
            {
                known_fresh = known_fresh.max(confirmed);
            }
            let alive = entry.expires_at.is_none_or(|at| now < at);
            if alive && now.saturating_duration_since(known_fresh) <= self.config.staleness_bound {
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Lookup::Hit(entry.value.clone());
            }
            self.stale.fetch_add(1, Ordering::Relaxed);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        state.next_token += 1;
        let token = state.next_token;
        let ticket = Ticket {
            token,
            epoch: state.complete.then_some(epoch),
            sent_at: now,
        };
        if !state.entries.contains_key(key) && state.entries.len() >= self.config.entries_max {
            // Make room: an arbitrary entry (the map's order is randomly seeded).
            if let Some(victim) = state.entries.keys().next().cloned() {
                state.entries.remove(&victim);
            }
        }
        state
            .entries
            .insert(Bytes::copy_from_slice(key), Slot::Pending(token));
        Lookup::Miss(ticket)
    }

    /// The answer to a fetch: keeps `value` if nothing invalidated the key since the ticket
    /// was issued. `lifespan_left` is how long the server will keep it (`None`: no lifespan).
    pub(crate) fn install(
        &self,
        key: &[u8],
        ticket: Ticket,
        value: Bytes,
        lifespan_left: Option<Duration>,
    ) {
        let mut state = self.state.lock();
        let Some(slot) = state.entries.get_mut(key) else {
            return;
        };
        if !matches!(slot, Slot::Pending(token) if *token == ticket.token) {
            return;
        }
        *slot = Slot::Ready(Entry {
            value,
            fetched_at: ticket.sent_at,
            epoch: ticket.epoch,
            expires_at: lifespan_left.map(|left| ticket.sent_at + left),
        });
    }

    /// A fetch found nothing (or nothing to keep): frees the slot it held.
    pub(crate) fn abandon(&self, key: &[u8], ticket: Ticket) {
        let mut state = self.state.lock();
        if matches!(state.entries.get(key), Some(Slot::Pending(token)) if *token == ticket.token) {
            state.entries.remove(key);
        }
    }

    /// Forgets `key` (an invalidation event, or a write through this client).
    pub(crate) fn invalidate(&self, key: &[u8], from_event: bool) {
        if self.state.lock().entries.remove(key).is_some() && from_event {
            self.invalidations.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets everything.
    pub(crate) fn clear(&self) {
        self.state.lock().entries.clear();
    }

    /// The stream may have lost events (a listener connection broke, or the servers
    /// changed): a new epoch begins, incomplete until [`NearCache::complete`].
    pub(crate) fn interrupt(&self) {
        let mut state = self.state.lock();
        state.epoch += 1;
        state.complete = false;
        state.confirmed.clear();
    }

    /// Every server in `servers` has an acknowledged listener (registered after the last
    /// [`NearCache::interrupt`]): entries fetched from now on may be extended; returns the
    /// epoch.
    pub(crate) fn complete(&self, servers: Vec<SocketAddr>) -> u64 {
        let mut state = self.state.lock();
        state.epoch += 1;
        state.complete = true;
        state.servers = servers;
        state.confirmed.clear();
        state.epoch
    }

    /// A PING sent at `sent_at` on `server`'s listener connection was answered in `epoch`:
    /// every event that server queued before `sent_at` has been applied.
    pub(crate) fn confirm(&self, epoch: u64, server: SocketAddr, sent_at: Instant) {
        let mut state = self.state.lock();
        if state.epoch != epoch || !state.complete {
            return;
        }
        let at = state.confirmed.entry(server).or_insert(sent_at);
        *at = (*at).max(sent_at);
    }

    pub(crate) fn stats(&self) -> NearCacheStats {
        let entries = self
            .state
            .lock()
            .entries
            .values()
            .filter(|slot| matches!(slot, Slot::Ready(_)))
            .count();
        NearCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            stale: self.stale.load(Ordering::Relaxed),
            invalidations: self.invalidations.load(Ordering::Relaxed),
            entries: entries as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);

    fn near() -> NearCache {
        NearCache::new(NearCacheConfig::new(3, BOUND))
    }

    fn server(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn miss(near: &NearCache, key: &[u8]) -> Ticket {
        match near.lookup(key, Instant::now()) {
            Lookup::Miss(ticket) => ticket,
            Lookup::Hit(value) => panic!("hit {value:?}"),
        }
    }

    fn hit(near: &NearCache, key: &[u8]) -> Option<Bytes> {
        match near.lookup(key, Instant::now()) {
            Lookup::Hit(value) => Some(value),
            Lookup::Miss(ticket) => {
                near.abandon(key, ticket);
                None
            }
        }
    }

    // Proves that without a confirmed stream an entry serves only its first bound after the
    // fetch was sent (not after its answer came), then must be fetched again.
    #[tokio::test(start_paused = true)]
    async fn unconfirmed_entries_serve_for_the_bound_from_the_fetch() {
        let near = near();
        let ticket = miss(&near, b"k");
        tokio::time::advance(Duration::from_millis(60)).await;
        near.install(b"k", ticket, Bytes::from_static(b"v"), None);
        assert_eq!(hit(&near, b"k").as_deref(), Some(&b"v"[..]));
        tokio::time::advance(Duration::from_millis(40)).await;
        assert_eq!(hit(&near, b"k").as_deref(), Some(&b"v"[..]), "at the bound");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(hit(&near, b"k"), None, "past the bound");
    }

    // Proves confirmations of every server extend an entry fetched in the complete epoch, a
    // confirmation of one server of two does not, and an interruption stops the extension
    // for good (entries of the old epoch serve only their own bound).
    #[tokio::test(start_paused = true)]
    async fn confirmations_extend_until_interrupted() {
        let near = near();
        let epoch = near.complete(vec![server(1), server(2)]);
        let ticket = miss(&near, b"k");
        near.install(b"k", ticket, Bytes::from_static(b"v"), None);
        tokio::time::advance(Duration::from_millis(90)).await;
        near.confirm(epoch, server(1), Instant::now());
        tokio::time::advance(Duration::from_millis(20)).await;
        assert_eq!(hit(&near, b"k"), None, "server 2 not confirmed");
        let ticket = miss(&near, b"k");
        near.install(b"k", ticket, Bytes::from_static(b"v"), None);
        tokio::time::advance(Duration::from_millis(90)).await;
        let now = Instant::now();
        near.confirm(epoch, server(1), now);
        near.confirm(epoch, server(2), now);
        tokio::time::advance(Duration::from_millis(90)).await;
        assert_eq!(hit(&near, b"k").as_deref(), Some(&b"v"[..]), "extended");
        near.interrupt();
        near.confirm(epoch, server(1), Instant::now());
        assert_eq!(hit(&near, b"k"), None, "old epoch: own bound only");
        // A confirmation of the old epoch after a new one began counts for nothing.
        let next = near.complete(vec![server(1)]);
        let ticket = miss(&near, b"k");
        near.install(b"k", ticket, Bytes::from_static(b"w"), None);
        near.confirm(epoch, server(1), Instant::now() + BOUND);
        tokio::time::advance(BOUND + Duration::from_millis(1)).await;
        assert_eq!(hit(&near, b"k"), None);
        let ticket = miss(&near, b"k");
        near.install(b"k", ticket, Bytes::from_static(b"w"), None);
        tokio::time::advance(BOUND).await;
        near.confirm(next, server(1), Instant::now());
        tokio::time::advance(BOUND).await;
        assert_eq!(hit(&near, b"k").as_deref(), Some(&b"w"[..]));
    }

    // Proves an invalidation that arrives while a fetch is in flight keeps the fetched value
    // out, and a fetch sent while the stream was incomplete is never extended.
    #[tokio::test(start_paused = true)]
    async fn races_with_invalidations_and_incomplete_streams() {
        let near = near();
        let ticket = miss(&near, b"k");
        near.invalidate(b"k", true);
        near.install(b"k", ticket, Bytes::from_static(b"old"), None);
        assert_eq!(hit(&near, b"k"), None);
        let ticket = miss(&near, b"k");
        let epoch = near.complete(vec![server(1)]);
        near.install(b"k", ticket, Bytes::from_static(b"v"), None);
        tokio::time::advance(BOUND).await;
        near.confirm(epoch, server(1), Instant::now());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            hit(&near, b"k"),
            None,
            "fetched before the stream was complete"
        );
        assert_eq!(
            near.stats().invalidations,
            1,
            "the pending fetch's slot counts"
        );
    }

    // Proves lifespans, the entry limit and the counters.
    #[tokio::test(start_paused = true)]
    async fn lifespan_limit_and_stats() {
        let near = near();
        let ticket = miss(&near, b"a");
        near.install(
            b"a",
            ticket,
            Bytes::from_static(b"1"),
            Some(Duration::from_millis(10)),
        );
        assert!(hit(&near, b"a").is_some());
        tokio::time::advance(Duration::from_millis(10)).await;
        assert_eq!(hit(&near, b"a"), None, "lifespan over");
        for key in [b"a", b"b", b"c", b"d"] {
            let ticket = miss(&near, key);
            near.install(key, ticket, Bytes::from_static(b"1"), None);
        }
        let stats = near.stats();
        assert_eq!(stats.entries, 3);
        assert_eq!(stats.hits, 1);
        assert_eq!(stats.stale, 1);
    }
}
