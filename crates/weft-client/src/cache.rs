//! [`RemoteCache`]: one cache's operations, each routed to its key's owners and retried on
//! another server when the one tried cannot serve it; the near cache in front of reads when
//! the client has one.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use weft_hotrod::{
    Body, Expiration, Lifetime, MediaType, PingInfo, Reply, Request, RequestHeader, Status,
};

use crate::connection::ConnectionSettings;
use crate::error::{Error, Result};
use crate::listener::{ClientListener, ListenerOptions};
use crate::near::{Lookup, NearCache, NearCacheStats};
use crate::pool::Pool;
use crate::topology::Routing;

/// The message Infinispan and Weft answer a request for a missing cache with.
const CACHE_NOT_FOUND: &str = "CacheNotFoundException";

/// How long a write asks its entry to live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    lifespan: Lifetime,
    max_idle: Lifetime,
}

impl Default for Expiry {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Expiry {
    /// The cache's configured lifespan and max idle.
    pub const DEFAULT: Self = Self {
        lifespan: Lifetime::Default,
        max_idle: Lifetime::Default,
    };
    /// Never expires, whatever the cache's defaults.
    pub const NEVER: Self = Self {
        lifespan: Lifetime::Infinite,
        max_idle: Lifetime::Infinite,
    };

    /// Expires `lifespan` after the write (a zero duration means the cache's default, as in
    /// the protocol); max idle is the cache's default.
    #[must_use]
    pub const fn lifespan(lifespan: Duration) -> Self {
        Self {
            lifespan: Lifetime::After(lifespan),
            max_idle: Lifetime::Default,
        }
    }

    /// The same, expiring also after `max_idle` without a read.
    #[must_use]
    pub const fn with_max_idle(self, max_idle: Duration) -> Self {
        Self {
            max_idle: Lifetime::After(max_idle),
            ..self
        }
    }

    fn wire(self) -> Expiration {
        Expiration {
            lifespan: self.lifespan,
            max_idle: self.max_idle,
        }
    }
}

/// An entry read with its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value.
    pub value: Bytes,
    /// The version, for [`RemoteCache::replace_with_version`] and
    /// [`RemoteCache::remove_with_version`].
    pub version: u64,
    /// When it was created and its lifespan (whole seconds, as the protocol carries it), if
    /// it has one.
    pub lifespan: Option<(SystemTime, Duration)>,
    /// When it was last used and its max idle (whole seconds), if it has one.
    pub max_idle: Option<(SystemTime, Duration)>,
}

impl Entry {
    fn of(metadata: weft_hotrod::Metadata, value: Bytes) -> Self {
        let at = |ms: i64| UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        let span = |seconds: u32| Duration::from_secs(u64::from(seconds));
        Self {
            value,
            version: metadata.version,
            lifespan: metadata.lifespan.map(|(created, s)| (at(created), span(s))),
            max_idle: metadata.max_idle.map(|(used, s)| (at(used), span(s))),
        }
    }

    /// How much longer the server keeps it by its lifespan (`None`: no lifespan; zero: due).
    fn lifespan_left(&self) -> Option<Duration> {
        let (created, lifespan) = self.lifespan?;
        let ends = created + lifespan;
        Some(ends.duration_since(SystemTime::now()).unwrap_or_default())
    }
}

/// What a cache's requests and its tasks share.
#[derive(Debug)]
pub(crate) struct CacheContext {
    pub(crate) name: String,
    pub(crate) routing: Arc<Routing>,
    pub(crate) settings: ConnectionSettings,
    pub(crate) key_type: MediaType,
    pub(crate) value_type: MediaType,
    pub(crate) retries_max: u32,
    pub(crate) retry_backoff: Duration,
    pub(crate) listener_queue_capacity: usize,
}

impl CacheContext {
    /// A request header for this cache (message id and version are the connection's).
    pub(crate) fn header(&self, flags: u32) -> RequestHeader {
        RequestHeader {
            message_id: 0,
            version: self.settings.version,
            cache_name: self.name.clone(),
            flags,
            intelligence: self.settings.intelligence,
            topology_id: self.routing.topology_id(),
            key_type: self.key_type.clone(),
            value_type: self.value_type.clone(),
        }
    }

    /// The reply, or the error its status says.
    ///
    /// # Errors
    /// [`Error::CacheNotFound`] or [`Error::Server`] for an error response.
    pub(crate) fn check(&self, reply: Reply) -> Result<Reply> {
        if !reply.header.status.is_error() {
            return Ok(reply);
        }
        let message = match reply.body {
            Body::Error(message) => message,
            other => format!("{other:?}"),
        };
        if message.contains(CACHE_NOT_FOUND) {
            return Err(Error::CacheNotFound(self.name.clone()));
        }
        Err(Error::Server {
            status: reply.header.status,
            message,
        })
    }
}

struct Inner {
    context: Arc<CacheContext>,
    pool: Arc<Pool>,
    near: Option<Arc<NearCache>>,
    /// Stops the near cache's invalidation task.
    stop: watch::Sender<bool>,
    invalidation: Option<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = &self.invalidation {
            task.abort();
        }
    }
}

/// A cache on the server. Cheap to clone; the clones share connections and near cache.
#[derive(Clone)]
pub struct RemoteCache {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RemoteCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteCache")
            .field("name", &self.inner.context.name)
            .field("near_cache", &self.inner.near.is_some())
            .finish_non_exhaustive()
    }
}

/// Whether a request may be sent again after a lost connection or a timeout: repeating it
/// cannot change what it does or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Safe,
    Unsafe,
}

impl RemoteCache {
    pub(crate) fn new(
        context: Arc<CacheContext>,
        pool: Arc<Pool>,
        near: Option<Arc<NearCache>>,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        let invalidation = near.as_ref().map(|near| {
            tokio::spawn(crate::invalidation::run(
                Arc::clone(&context),
                Arc::clone(near),
                stopped,
            ))
        });
        Self {
            inner: Arc::new(Inner {
                context,
                pool,
                near,
                stop,
                invalidation,
            }),
        }
    }

    /// The cache's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.inner.context.name
    }

    /// The servers requests may go to now (the topology's, once one arrived).
    #[must_use]
    pub fn servers(&self) -> Vec<SocketAddr> {
        self.inner.context.routing.servers()
    }

    /// The segment count of the hash the cluster sent, if it sent one.
    #[must_use]
    pub fn segment_count(&self) -> Option<usize> {
        self.inner.context.routing.segment_count()
    }

    /// The servers a request for `key` goes to, in the order tried (owners first).
    #[must_use]
    pub fn owners_of(&self, key: &[u8]) -> Vec<SocketAddr> {
        self.inner.context.routing.candidates(Some(key))
    }

    /// What the near cache did, if there is one.
    #[must_use]
    pub fn near_cache_stats(&self) -> Option<NearCacheStats> {
        self.inner.near.as_ref().map(|near| near.stats())
    }

    /// Sends `request` to the best server for `key` (or any server), and on a failure another
    /// server may not share, to the next, up to the retry limit.
    async fn execute<B: AsRef<[u8]>>(
        &self,
        key: Option<&[u8]>,
        request: &Request<B>,
        flags: u32,
        repeat: Repeat,
    ) -> Result<Reply> {
        let context = &self.inner.context;
        let pool = &self.inner.pool;
        let attempts = context.retries_max.saturating_add(1);
        let mut tried: Vec<SocketAddr> = Vec::new();
        let mut last = None;
        for attempt in 0..attempts {
            if attempt > 0 {
                let doubling = 1u32 << (attempt - 1).min(10);
                tokio::time::sleep(context.retry_backoff.saturating_mul(doubling)).await;
            }
            let mut candidates = context.routing.candidates(key);
            // Servers that failed lately go last (the sort is stable: owners stay in order).
            candidates.sort_by_key(|address| pool.is_suspect(*address));
            let Some(address) = candidates
                .iter()
                .find(|address| !tried.contains(address))
                .or_else(|| candidates.get(attempt as usize % candidates.len().max(1)))
                .copied()
            else {
                return Err(Error::Config("no server to send to".into()));
            };
            tried.push(address);
            let outcome = async {
                let connection = pool.get(address).await?;
                connection.call(context.header(flags), request).await
            }
            .await;
            let error = match outcome {
                Ok(reply) => {
                    if let Some(topology) = &reply.header.topology {
                        context.routing.update(topology);
                    }
                    match context.check(reply) {
                        Ok(reply) => return Ok(reply),
                        Err(error) => error,
                    }
                }
                Err(error) => {
                    if matches!(error, Error::Connect { .. } | Error::ConnectionLost { .. }) {
                        pool.suspect(address);
                    }
                    error
                }
            };
            if !error.is_retryable(repeat == Repeat::Safe) {
                return Err(error);
            }
            tracing::debug!(%address, %error, attempt, "request failed; trying another server");
            last = Some(error);
        }
        Err(Error::NoServerReachable {
            attempts,
            last: Box::new(last.unwrap_or(Error::Closed)),
        })
    }

    fn invalidate(&self, key: &[u8]) {
        if let Some(near) = &self.inner.near {
            near.invalidate(key, false);
        }
    }

    /// Checks the cache exists (a PING naming it); what the server said.
    ///
    /// # Errors
    /// [`Error::CacheNotFound`] if it does not, or the request's failure.
    pub async fn ping(&self) -> Result<PingInfo> {
        let reply = self
            .execute(None, &Request::<&[u8]>::Ping, 0, Repeat::Safe)
            .await?;
        match reply.body {
            Body::Ping(info) => Ok(info),
            other => Err(unexpected("PING", &other)),
        }
    }

    /// The value of `key`, from the near cache when it holds one fresh enough.
    ///
    /// # Errors
    /// If no server could answer.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        let Some(near) = &self.inner.near else {
            let reply = self
                .execute(Some(key), &Request::Get { key }, 0, Repeat::Safe)
                .await?;
            return match reply.body {
                Body::Value(value) => Ok(Some(value)),
                Body::Empty => Ok(None),
                other => Err(unexpected("GET", &other)),
            };
        };
        let ticket = match near.lookup(key, tokio::time::Instant::now()) {
            Lookup::Hit(value) => return Ok(Some(value)),
            Lookup::Miss(ticket) => ticket,
        };
        let fetched = self.get_with_metadata(key).await;
        match &fetched {
            // An entry with a max idle is not kept: reads served here would not count as
            // uses on the server, which could expire it while it is served.
            Ok(Some(entry)) if entry.max_idle.is_none() => match entry.lifespan_left() {
                Some(left) if left.is_zero() => near.abandon(key, ticket),
                left => near.install(key, ticket, entry.value.clone(), left),
            },
            _ => near.abandon(key, ticket),
        }
        fetched.map(|entry| entry.map(|entry| entry.value))
    }

    /// The value of `key` with its version and expiration, from the server.
    ///
    /// # Errors
    /// If no server could answer.
    pub async fn get_with_metadata(&self, key: impl AsRef<[u8]>) -> Result<Option<Entry>> {
        let key = key.as_ref();
        let reply = self
            .execute(
                Some(key),
                &Request::GetWithMetadata { key },
                0,
                Repeat::Safe,
            )
            .await?;
        match reply.body {
            Body::WithMetadata { metadata, value } => Ok(Some(Entry::of(metadata, value))),
            Body::Empty => Ok(None),
            other => Err(unexpected("GET_WITH_METADATA", &other)),
        }
    }

    /// Whether `key` has a value, from the server.
    ///
    /// # Errors
    /// If no server could answer.
    pub async fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        let reply = self
            .execute(Some(key), &Request::ContainsKey { key }, 0, Repeat::Safe)
            .await?;
        Ok(reply.header.status == Status::Success)
    }

    /// Stores `value` under `key` with the cache's default expiration.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(key, value, Expiry::DEFAULT).await
    }

    /// Stores `value` under `key`, expiring as `expiry` says.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry: Expiry,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let request = Request::Put {
            key,
            expiration: expiry.wire(),
            value,
        };
        // Writing the same value again leaves the same state: safe to repeat.
        let outcome = self.execute(Some(key), &request, 0, Repeat::Safe).await;
        self.invalidate(key);
        outcome.map(|_| ())
    }

    /// Stores `value` under `key` unless it has a value; whether it stored it.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn put_if_absent(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry: Expiry,
    ) -> Result<bool> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let request = Request::PutIfAbsent {
            key,
            expiration: expiry.wire(),
            value,
        };
        let outcome = self.execute(Some(key), &request, 0, Repeat::Unsafe).await;
        self.invalidate(key);
        Ok(outcome?.header.status == Status::Success)
    }

    /// Stores `value` under `key` only if it has a value; whether it stored it.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn replace(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry: Expiry,
    ) -> Result<bool> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let request = Request::Replace {
            key,
            expiration: expiry.wire(),
            value,
        };
        let outcome = self.execute(Some(key), &request, 0, Repeat::Unsafe).await;
        self.invalidate(key);
        Ok(outcome?.header.status == Status::Success)
    }

    /// Stores `value` under `key` only if the entry's version is `version` (from
    /// [`RemoteCache::get_with_metadata`]); whether it stored it.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn replace_with_version(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        version: u64,
        expiry: Expiry,
    ) -> Result<bool> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let request = Request::ReplaceIfUnmodified {
            key,
            expiration: expiry.wire(),
            version,
            value,
        };
        let outcome = self.execute(Some(key), &request, 0, Repeat::Unsafe).await;
        self.invalidate(key);
        Ok(outcome?.header.status == Status::Success)
    }

    /// Removes `key`; whether it had a value.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn remove(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        let outcome = self
            .execute(Some(key), &Request::Remove { key }, 0, Repeat::Unsafe)
            .await;
        self.invalidate(key);
        Ok(outcome?.header.status == Status::Success)
    }

    /// Removes `key` only if the entry's version is `version`; whether it removed it.
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn remove_with_version(&self, key: impl AsRef<[u8]>, version: u64) -> Result<bool> {
        let key = key.as_ref();
        let request = Request::RemoveIfUnmodified { key, version };
        let outcome = self.execute(Some(key), &request, 0, Repeat::Unsafe).await;
        self.invalidate(key);
        Ok(outcome?.header.status == Status::Success)
    }

    /// The number of entries (the whole cluster's, counted by the server).
    ///
    /// # Errors
    /// If no server could answer.
    pub async fn size(&self) -> Result<u64> {
        let reply = self
            .execute(None, &Request::<&[u8]>::Size, 0, Repeat::Safe)
            .await?;
        match reply.body {
            Body::Size(size) => Ok(size),
            other => Err(unexpected("SIZE", &other)),
        }
    }

    /// Removes every entry. (Servers raise no events for a clear: other clients' near
    /// caches keep what they hold up to their staleness bound; see the crate docs.)
    ///
    /// # Errors
    /// If no server could take it.
    pub async fn clear(&self) -> Result<()> {
        let outcome = self
            .execute(None, &Request::<&[u8]>::Clear, 0, Repeat::Safe)
            .await;
        if let Some(near) = &self.inner.near {
            near.clear();
        }
        outcome.map(|_| ())
    }

    /// The server's statistics of this cache, by name.
    ///
    /// # Errors
    /// If no server could answer.
    pub async fn stats(&self) -> Result<BTreeMap<String, String>> {
        let reply = self
            .execute(None, &Request::<&[u8]>::Stats, 0, Repeat::Safe)
            .await?;
        match reply.body {
            Body::Stats(stats) => Ok(stats.into_iter().collect()),
            other => Err(unexpected("STATS", &other)),
        }
    }

    /// The values of `keys` that have one, each group of keys read from its primary in one
    /// request (GET_ALL), the groups at once.
    ///
    /// # Errors
    /// If a group could not be read.
    pub async fn get_all<K: AsRef<[u8]>>(
        &self,
        keys: impl IntoIterator<Item = K>,
    ) -> Result<HashMap<Bytes, Bytes>> {
        let mut found = HashMap::new();
        let mut groups = JoinSet::new();
        for group in self.group_by_primary(
            keys.into_iter()
                .map(|k| (Bytes::copy_from_slice(k.as_ref()), ())),
        ) {
            let cache = self.clone();
            groups.spawn(async move {
                let keys: Vec<Bytes> = group.into_iter().map(|(key, ())| key).collect();
                let first = keys.first().cloned();
                let request = Request::GetAll { keys };
                cache
                    .execute(first.as_deref(), &request, 0, Repeat::Safe)
                    .await
            });
        }
        while let Some(joined) = groups.join_next().await {
            let reply = joined.map_err(|error| Error::UnexpectedResponse(error.to_string()))??;
            match reply.body {
                Body::Entries(entries) => found.extend(entries),
                other => return Err(unexpected("GET_ALL", &other)),
            }
        }
        Ok(found)
    }

    /// Stores every entry, each group of keys sent to its primary in one request (PUT_ALL).
    ///
    /// # Errors
    /// If a group could not be stored (others may have been).
    pub async fn put_all<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        entries: impl IntoIterator<Item = (K, V)>,
        expiry: Expiry,
    ) -> Result<()> {
        let entries: Vec<(Bytes, Bytes)> = entries
            .into_iter()
            .map(|(k, v)| {
                (
                    Bytes::copy_from_slice(k.as_ref()),
                    Bytes::copy_from_slice(v.as_ref()),
                )
            })
            .collect();
        let mut groups = JoinSet::new();
        for group in self.group_by_primary(entries.iter().cloned()) {
            let cache = self.clone();
            groups.spawn(async move {
                let first = group.first().map(|(key, _)| key.clone());
                let request = Request::PutAll {
                    expiration: expiry.wire(),
                    entries: group,
                };
                cache
                    .execute(first.as_deref(), &request, 0, Repeat::Safe)
                    .await
            });
        }
        let mut outcome = Ok(());
        while let Some(joined) = groups.join_next().await {
            let result = joined
                .map_err(|error| Error::UnexpectedResponse(error.to_string()))
                .and_then(|reply| reply.map(|_| ()));
            if outcome.is_ok() {
                outcome = result;
            }
        }
        for (key, _) in &entries {
            self.invalidate(key);
        }
        outcome
    }

    /// Splits keyed items by the server a request for their key goes to first.
    fn group_by_primary<T>(
        &self,
        items: impl IntoIterator<Item = (Bytes, T)>,
    ) -> Vec<Vec<(Bytes, T)>> {
        let mut groups: HashMap<SocketAddr, Vec<(Bytes, T)>> = HashMap::new();
        let mut unrouted = Vec::new();
        for (key, item) in items {
            match self.inner.context.routing.candidates(Some(&key)).first() {
                Some(&primary) if self.segment_count().is_some() => {
                    groups.entry(primary).or_default().push((key, item));
                }
                _ => unrouted.push((key, item)),
            }
        }
        let mut groups: Vec<_> = groups.into_values().collect();
        if !unrouted.is_empty() {
            groups.push(unrouted);
        }
        groups
    }

    /// Registers a client listener on this cache.
    ///
    /// # Errors
    /// If no server takes the registration.
    pub async fn add_listener(&self, options: ListenerOptions) -> Result<ClientListener> {
        crate::listener::start(Arc::clone(&self.inner.context), options).await
    }
}

fn unexpected(operation: &str, body: &Body) -> Error {
    Error::UnexpectedResponse(format!("{operation} answered {body:?}"))
}
