//! A clustered cache: the local [`Cache`]'s operations, each run at the member that owns
//! its key. Every keyed call becomes an [`Operation`] value, routed by the member's installed
//! topology — run here when this member owns the key, sent to the owner otherwise — and
//! retried while the key's ownership moves. Writes are acknowledged once the owner's backups
//! applied them (and its stores made them durable), as the cache's replication promises.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weft_cluster::operation::Outcome;
use weft_cluster::wire::{Request, Response};
use weft_core::operation::{Applied, Operation, WriteSpec};
use weft_core::{Cache, CacheEntry, CacheError, VersionedOutcome, WriteOptions};

use crate::error::GridError;
use crate::node::Node;
use crate::routing::Route;

/// How long an operation may wait for its key's owner to settle (a topology being
/// installed, a member being admitted) before it fails.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one call to the key's owner may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before asking again where a key lives.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// A cache whose keys live on the members of a grid.
///
/// Cloning is cheap. The same methods as [`Cache`], asynchronous because an operation may
/// run on another member; [`GridCache::local`] is this member's copy (the entries it owns).
#[derive(Clone)]
pub struct GridCache {
    node: Arc<Node>,
    local: Cache,
    /// The cache's place in the routing table, read on every operation.
    slot: Arc<crate::routing::RouteSlot>,
}

impl std::fmt::Debug for GridCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GridCache")
            .field("cache", &self.local.name())
            .finish_non_exhaustive()
    }
}

impl GridCache {
    /// The clustered view of `local` through `node`.
    #[must_use]
    pub fn new(node: Arc<Node>, local: Cache) -> Self {
        let slot = node.routing().slot(local.name());
        Self { node, local, slot }
    }

    /// The cache's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.local.name()
    }

    /// This member's copy: the entries it owns, its statistics and listeners.
    #[must_use]
    pub fn local(&self) -> &Cache {
        &self.local
    }

    /// Runs `operation` at its key's owner and returns what it answered.
    ///
    /// While the key's ownership moves (a member joining or leaving, this member not yet
    /// admitted), the operation is routed again until [`SETTLE_TIMEOUT`]. A read whose owner
    /// cannot be reached is retried too, and so is a write that was certainly not sent
    /// ([`TransportError::not_sent`]): an owner that died cannot be connected to, and its
    /// writes wait until failure detection installs a topology without it. A write whose
    /// connection broke after it was sent, or that got no answer in time, is not retried
    /// (it may have been applied), and fails with [`GridError::Transport`].
    ///
    /// # Errors
    /// What the owner's cache refused ([`GridError::Cache`]), a write whose outcome the
    /// owner's connection left unknown, or ownership that did not settle in time.
    ///
    /// [`TransportError::not_sent`]: crate::transport::TransportError::not_sent
    pub async fn execute(&self, operation: Operation) -> Result<Outcome, GridError> {
        let cache = self.local.name();
        let segment = self.local.segment_of(operation.key());
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        // A read's owner that could not be reached: the read goes to another owner.
        let mut down: Option<weft_cluster::MemberId> = None;
        loop {
            let mut route = self.route(&operation);
            let mut owner_down = false;
            if let (Some(failed), Route::Remote(primary, _)) = (&down, &route)
                && failed == primary
                && let Some(backup) = self.backup_route(segment, failed)
            {
                route = backup;
                owner_down = true;
            }
            let unsettled: GridError = match route {
                // Leaving: not a member to run anything at any more (see `Node::leave`); the
                // route moves on once this member installs the topology without it.
                Route::Local if self.node.routing().is_leaving() => GridError::Cluster(format!(
                    "this member is leaving; segment {segment} of `{cache}` moves to another"
                )),
                Route::Local => match self.run_here(&operation).await {
                    Ok(applied) => return Ok(Outcome::of(&applied)),
                    Err(error) if is_not_owner(&error) => error,
                    Err(error) => return Err(error),
                },
                Route::Remote(member, address) => {
                    let ask = Request::Execute {
                        cache: cache.to_owned(),
                        operation: operation.clone(),
                        owner_down,
                    };
                    match self.node.transport().call(address, ask, CALL_TIMEOUT).await {
                        Ok(Response::Outcome(outcome)) => return Ok(outcome),
                        Ok(Response::Refused(refusal)) => {
                            return Err(refusal.into_error(cache, segment).into());
                        }
                        Ok(Response::NotOwner { .. }) => GridError::Cluster(format!(
                            "the owner of segment {segment} of `{cache}` kept moving; retry"
                        )),
                        Ok(Response::Error(reason)) => return Err(GridError::Cluster(reason)),
                        Ok(other) => {
                            return Err(GridError::Cluster(format!("unexpected answer {other:?}")));
                        }
                        // Running a write again is safe only if it surely did not run.
                        Err(error) if operation.is_write() && !error.not_sent() => {
                            return Err(error.into());
                        }
                        Err(error) => {
                            if !operation.is_write() {
                                down = Some(member);
                            }
                            error.into()
                        }
                    }
                }
            };
            if tokio::time::Instant::now() + RETRY_PAUSE > deadline {
                return Err(unsettled);
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Runs `operation` at its key's owner and returns what it did, as entries: those of
    /// this member's copy when it ran here, restored from the owner's answer otherwise.
    ///
    /// # Errors
    /// As [`GridCache::execute`], and an entry the owner sent that does not restore.
    pub async fn apply(&self, operation: Operation) -> Result<Applied, GridError> {
        if self.route(&operation) == Route::Local && !self.node.routing().is_leaving() {
            match self.run_here(&operation).await {
                Ok(applied) => return Ok(applied),
                Err(error) if is_not_owner(&error) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(self.execute(operation).await?.into_applied()?)
    }

    /// Where a read of `segment` runs when its primary `down` cannot be reached: at another
    /// member that reads the segment in this phase (this member first, when it is one), if
    /// any is left. Readers only: a new owner still fetching the segment is a write owner
    /// already, but holds none of it yet.
    fn backup_route(&self, segment: u32, down: &weft_cluster::MemberId) -> Option<Route> {
        let routing = self.node.routing();
        let route = routing.cache(self.local.name())?;
        let owners = &route.segment(segment)?.read;
        if owners.contains(routing.local()) {
            return Some(Route::Local);
        }
        let backup = owners.iter().find(|owner| *owner != down)?;
        let record = routing.node(backup)?;
        Some(Route::Remote(backup.clone(), record.cluster_addr))
    }

    /// Where `operation` runs now: here, or at the member that owns its key.
    #[must_use]
    pub fn route(&self, operation: &Operation) -> Route {
        let segment = self.local.segment_of(operation.key());
        self.node
            .routing()
            .route_in(&self.slot, segment, !operation.is_write())
    }

    /// Runs `operation` on this member's copy, acknowledged once as replicated and durable
    /// as the cache promises.
    async fn run_here(&self, operation: &Operation) -> Result<Applied, GridError> {
        let functions = self.node.functions();
        let (applied, durability) =
            weft_core::collect_durability(|| operation.apply(&self.local, functions));
        let applied = applied?;
        durability.wait().await.map_err(CacheError::from)?;
        Ok(applied)
    }

    /// The value at `key`.
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn get(&self, key: &[u8]) -> Result<Option<Bytes>, GridError> {
        Ok(self
            .get_entry(key)
            .await?
            .map(|entry| Bytes::copy_from_slice(entry.value())))
    }

    /// The entry at `key`, with its metadata (version, expiration, flags).
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn get_entry(&self, key: &[u8]) -> Result<Option<CacheEntry>, GridError> {
        entry_of(self.apply(Operation::Get { key: key.to_vec() }).await?)
    }

    /// Whether `key` holds a value.
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn contains(&self, key: &[u8]) -> Result<bool, GridError> {
        Ok(self.get_entry(key).await?.is_some())
    }

    /// Stores `value` at `key`; the previous entry (none when `options` ignore return
    /// values).
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, GridError> {
        let operation = Operation::Put {
            key: key.to_vec(),
            value: value.to_vec(),
            spec: WriteSpec::of(options),
        };
        entry_of(self.apply(operation).await?)
    }

    /// Stores `value` unless `key` holds one; the entry found (none = stored).
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn put_if_absent(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, GridError> {
        let operation = Operation::PutIfAbsent {
            key: key.to_vec(),
            value: value.to_vec(),
            spec: WriteSpec::of(options),
        };
        entry_of(self.apply(operation).await?)
    }

    /// Stores `value` only if `key` holds one; the entry replaced (none = not stored).
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, GridError> {
        let operation = Operation::Replace {
            key: key.to_vec(),
            value: value.to_vec(),
            spec: WriteSpec::of(options),
        };
        entry_of(self.apply(operation).await?)
    }

    /// Stores `value` only if `key` holds `version`.
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn replace_if_version(
        &self,
        key: &[u8],
        version: u64,
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<VersionedOutcome, GridError> {
        let operation = Operation::ReplaceIfVersion {
            key: key.to_vec(),
            version,
            value: value.to_vec(),
            spec: WriteSpec::of(options),
        };
        versioned_of(self.apply(operation).await?)
    }

    /// Removes `key`; the entry removed.
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn remove(
        &self,
        key: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, GridError> {
        let operation = Operation::Remove {
            key: key.to_vec(),
            spec: WriteSpec::of(options),
        };
        entry_of(self.apply(operation).await?)
    }

    /// Removes `key` only if it holds `version`.
    ///
    /// # Errors
    /// As [`GridCache::execute`].
    pub async fn remove_if_version(
        &self,
        key: &[u8],
        version: u64,
        options: &WriteOptions,
    ) -> Result<VersionedOutcome, GridError> {
        let operation = Operation::RemoveIfVersion {
            key: key.to_vec(),
            version,
            spec: WriteSpec::of(options),
        };
        versioned_of(self.apply(operation).await?)
    }

    /// Runs the function registered as `function` (on every member) on `key` with
    /// `argument`, where the key lives: at its primary when it may `write`.
    ///
    /// # Errors
    /// As [`GridCache::execute`], and a function no member registered.
    pub async fn invoke(
        &self,
        function: &str,
        key: &[u8],
        argument: Vec<u8>,
        write: bool,
    ) -> Result<Vec<u8>, GridError> {
        let operation = Operation::Invoke {
            function: function.to_owned(),
            key: key.to_vec(),
            argument,
            write,
        };
        match self.apply(operation).await? {
            Applied::Bytes(bytes) => Ok(bytes),
            _ => Err(GridError::Cluster("unexpected outcome".to_owned())),
        }
    }

    /// Stores every pair, each at its key's owner (grouped by owner, one request each).
    ///
    /// # Errors
    /// A group that failed, or whose owner kept moving.
    pub async fn put_all(
        &self,
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        options: &WriteOptions,
    ) -> Result<(), GridError> {
        self.node
            .put_at_primaries(&self.local, entries, options)
            .await
    }

    /// The entries of `keys` found, by key, each read at its key's owner.
    ///
    /// # Errors
    /// A group that failed, or whose owner kept moving.
    pub async fn get_all(
        &self,
        keys: Vec<Vec<u8>>,
    ) -> Result<HashMap<Vec<u8>, CacheEntry>, GridError> {
        self.node.get_at_primaries(&self.local, keys).await
    }

    /// How many entries the cache holds across the cluster (each counted once, at the
    /// member that reads its segment).
    ///
    /// # Errors
    /// A member that did not answer.
    pub async fn size(&self) -> Result<u64, GridError> {
        self.node.cluster_size(&self.local).await
    }

    /// Removes every entry on every member.
    ///
    /// # Errors
    /// A member that did not clear.
    pub async fn clear(&self) -> Result<(), GridError> {
        self.node.cluster_clear(&self.local).await
    }

    /// Every entry of the cache, each once, segment by segment from the member that reads
    /// it now.
    ///
    /// # Errors
    /// A segment that could not be read.
    pub async fn entries(&self) -> Result<Vec<CacheEntry>, GridError> {
        use crate::iteration::{PAGE_MAX, SegmentCursor};
        let mut cursor = SegmentCursor::new(self.local.clone(), 0..self.local.segment_count());
        let mut all = Vec::new();
        loop {
            let (entries, finished) = cursor.next_batch(&self.node, PAGE_MAX, |_| true).await?;
            if entries.is_empty() && finished.is_empty() {
                return Ok(all);
            }
            all.extend(entries);
        }
    }
}

fn is_not_owner(error: &GridError) -> bool {
    matches!(
        error,
        GridError::Cache(CacheError::Persistence(
            weft_core::PersistenceError::NotOwner { .. }
                | weft_core::PersistenceError::NotJoined { .. }
        ))
    )
}

fn entry_of(applied: Applied) -> Result<Option<CacheEntry>, GridError> {
    match applied {
        Applied::Entry(entry) => Ok(entry),
        _ => Err(GridError::Cluster("unexpected outcome".to_owned())),
    }
}

fn versioned_of(applied: Applied) -> Result<VersionedOutcome, GridError> {
    match applied {
        Applied::Versioned(outcome) => Ok(outcome),
        _ => Err(GridError::Cluster("unexpected outcome".to_owned())),
    }
}

/// A clustered cache with the local [`Cache`]'s blocking API — what a
/// [`weft_core::TypedCache`] and other synchronous code use ([`weft_core::KeyValue`]). Each
/// call runs the operation at its key's owner and blocks the calling thread until it is
/// answered.
///
/// Call it from a thread of your own, or from a worker of a multi-threaded tokio runtime (the
/// worker is handed over while it blocks); never from a current-thread runtime, whose only
/// thread would wait for itself.
#[derive(Clone, Debug)]
pub struct BlockingGridCache {
    cache: GridCache,
    runtime: tokio::runtime::Handle,
}

impl BlockingGridCache {
    /// `cache`, its calls run on `runtime` (the grid's).
    #[must_use]
    pub fn new(cache: GridCache, runtime: tokio::runtime::Handle) -> Self {
        Self { cache, runtime }
    }

    /// The asynchronous cache underneath.
    #[must_use]
    pub fn grid_cache(&self) -> &GridCache {
        &self.cache
    }

    fn block<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, GridError>>,
    ) -> Result<T, CacheError> {
        let outcome = match tokio::runtime::Handle::try_current() {
            Ok(current)
                if current.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                tokio::task::block_in_place(|| self.runtime.block_on(work))
            }
            Ok(_) => Err(GridError::Cluster(
                "a blocking grid cache was called on a current-thread runtime".to_owned(),
            )),
            Err(_) => self.runtime.block_on(work),
        };
        outcome.map_err(|error| match error {
            GridError::Cache(error) => error,
            other => weft_core::PersistenceError::Unavailable {
                cache: self.cache.name().to_owned(),
                reason: other.to_string(),
            }
            .into(),
        })
    }
}

impl weft_core::KeyValue for BlockingGridCache {
    fn name(&self) -> &str {
        self.cache.name()
    }

    fn get_entry(&self, key: &[u8]) -> Result<Option<CacheEntry>, CacheError> {
        self.block(self.cache.get_entry(key))
    }

    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        self.block(self.cache.put(key, value, options))
    }

    fn put_if_absent(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        self.block(self.cache.put_if_absent(key, value, options))
    }

    fn replace(
        &self,
        key: &[u8],
        value: &[u8],
        options: &WriteOptions,
    ) -> Result<Option<CacheEntry>, CacheError> {
        self.block(self.cache.replace(key, value, options))
    }

    fn remove(&self, key: &[u8], options: &WriteOptions) -> Result<Option<CacheEntry>, CacheError> {
        self.block(self.cache.remove(key, options))
    }

    fn count(&self) -> Result<usize, CacheError> {
        self.block(self.cache.size())
            .map(|size| usize::try_from(size).unwrap_or(usize::MAX))
    }

    fn entries(&self) -> Result<Vec<CacheEntry>, CacheError> {
        self.block(self.cache.entries())
    }
}
