//! `weft-client` is an async Hot Rod client (protocol 3.0 to 4.1, 4.0 by default) for Weft
//! and Infinispan servers, on tokio. It owns the client's side of the conversation —
//! connections, routing, retries, listeners, the near cache — and leaves the wire format to
//! `weft-hotrod`, the codec the server uses too. It does not marshal: keys and values are
//! bytes, sent with the media types configured (none by default: the cache's own).
//!
//! ```no_run
//! # async fn demo() -> weft_client::Result<()> {
//! use weft_client::{Client, ClientConfig, Expiry};
//! use std::time::Duration;
//!
//! let client = Client::connect(ClientConfig::new(["127.0.0.1:11222".parse().unwrap()])).await?;
//! let cache = client.cache("default").await?;
//! cache.put("k", "v").await?;
//! cache.put_with("session", "x", Expiry::lifespan(Duration::from_secs(60))).await?;
//! assert_eq!(cache.get("k").await?.as_deref(), Some(&b"v"[..]));
//! # Ok(()) }
//! ```
//!
//! # Routing, pooling, failover
//! * With [`Intelligence::HashDistributionAware`] (the default) every response may carry the
//!   cluster's topology for the cache (the server sends it while the client's topology id is
//!   out of date); keyed requests then go to the primary owner of the key's segment, computed
//!   as the Java client computes it (Infinispan's MurmurHash3 of the key bytes, hash function
//!   version 3), and on failure to its other owners, then to any server (which forwards).
//! * Each server has up to `connections_per_server` connections, each carrying many requests
//!   at once (matched by message id, as the 15.2 Java client does).
//! * A request that fails because its server cannot be reached, closed the connection, or
//!   answered "node suspected" / "illegal lifecycle state" is retried on the next server, at
//!   most `retries_max` times, with a doubling pause. A request that may have run (a lost
//!   connection or a timeout after it was sent) is retried only when repeating it is harmless
//!   (reads, `put`, `put_all`, `clear`); conditional writes return the error instead. A failed
//!   server is tried last for a while.
//! * Every wait is bounded: `connect_timeout` for a connection and its handshake PING,
//!   `request_timeout` for a response. Errors are [`Error`]s.
//!
//! # Client listeners
//! [`RemoteCache::add_listener`] registers a listener on a connection of its own; its events
//! ([`ListenerEvent`]) come through a bounded queue. If the connection breaks, the listener is
//! registered again on another server and the next item is [`ListenerEvent::Missed`]; the
//! same marker follows a full queue.
//!
//! # The near cache and its staleness bound
//! With [`ClientConfig::near_cache`] set, [`RemoteCache::get`] serves recently read values
//! from memory. **Guarantee:** a `get` that begins at instant `t` (on the client's monotonic
//! clock) and is served from the near cache returns a value that was the server's current
//! value for that key at some instant no earlier than `t - staleness_bound`. Reads that go to
//! the server are as fresh as the server's answer. How it holds:
//! * Each entry records `fetched_at`, the instant its fetch (a GET_WITH_METADATA) was *sent*:
//!   the value was current at some instant after that. With nothing else known, the entry is
//!   served only while `now - fetched_at <= staleness_bound`, then fetched again: the bound
//!   holds even with no invalidation stream at all.
//! * The invalidation stream extends that. The near cache registers a listener (modified,
//!   removed, expired) on every server of the cache's topology; each server raises an event
//!   for each write it applies, on the connections of the listeners registered there, before
//!   it answers the write. Every `heartbeat_interval` it sends a PING on each listener
//!   connection; a server writes the events it queued before it read a request ahead of the
//!   request's answer, and the client applies each event before it reads on, so an answered
//!   PING sent at `s` proves every invalidation that server raised before `s` was applied.
//!   With `confirmed` the oldest of the servers' latest confirmations, an entry not
//!   invalidated is known current at `max(fetched_at, confirmed)` and served while
//!   `now - max(fetched_at, confirmed) <= staleness_bound`.
//! * If the stream lags (PINGs answered late or not at all), `confirmed` stops advancing and
//!   entries age out within the bound, after which reads go to the server. If it breaks (a
//!   connection closes, a PING fails, the topology names other servers), a new *epoch*
//!   begins: entries fetched before it are never extended again, only entries fetched after
//!   every server's new listener was acknowledged are.
//! * A fetch that races with an invalidation of its key (the event arrives while the fetch is
//!   in flight) does not keep its answer. Writes through this client invalidate the key when
//!   they complete. Entries with a max idle are not kept (near reads would not count as uses
//!   on the server); entries with a lifespan are not served past it.
//!
//! Outside the guarantee: a `clear` by another client (servers raise no events for it), and
//! writes sent with Hot Rod's skip-listener-notification flag. The bound also includes the
//! (microseconds of) server time between applying a write and queueing its event. Against a
//! server that does not write queued events ahead of later answers, only the first point
//! (`fetched_at` alone) holds; Weft does.

mod cache;
mod client;
mod config;
mod connection;
mod error;
mod invalidation;
mod listener;
mod near;
mod pool;
mod topology;

pub use cache::{Entry, Expiry, RemoteCache};
pub use client::Client;
pub use config::{
    ClientConfig, Intelligence, NearCacheConfig, PROTOCOL_VERSION_DEFAULT, PROTOCOL_VERSION_MIN,
};
pub use error::{Error, Result};
pub use listener::{ClientListener, ListenerEvent, ListenerOptions};
pub use near::NearCacheStats;
pub use weft_hotrod::{MediaType, PingInfo, Status};
