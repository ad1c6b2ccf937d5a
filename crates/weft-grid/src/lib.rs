//! Weft's grid engine: a cache clustered over a group of members, in any Rust process.
//!
//! A member runs membership (SWIM over UDP), the member-to-member transport (TCP on the same
//! port number), consensus on the cluster metadata (Raft), routing, replication and state
//! transfer. `weft_cluster` holds the logic without I/O; this crate drives it with sockets
//! and the tokio clock. The `weft` server is one user of this crate, an application that
//! embeds its caches another: both configure a member with [`GridConfig`].

pub mod cache;
pub mod config;
pub mod error;
pub mod events;
pub mod iteration;
pub mod membership;
pub mod multi;
pub mod node;
pub mod raft;
pub mod replication;
pub mod routing;
pub mod tls;
pub mod transport;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use weft_cluster::handshake::Secret;
use weft_cluster::state::NodeRecord;
use weft_core::{CacheConfig, CacheManager, Persistence, PersistenceFactory};

pub use cache::{BlockingGridCache, GridCache};
pub use config::GridConfig;
pub use error::{GridError, Result};
use membership::MembershipService;
use node::{Node, NodeHandler};
use replication::{Replication, Replicator};
use routing::Routing;
use transport::Transport;

/// A member of a grid embedded in this process: its cache manager, whose clustered caches
/// (`mode = "distributed"` or `"replicated"`) spread over the members, and the member's part
/// in the cluster.
///
/// ```no_run
/// # async fn example() -> weft_grid::Result<()> {
/// use weft_core::{CacheConfig, CacheMode, ManagerConfig, WriteOptions};
/// use weft_grid::{Grid, GridConfig};
///
/// let listen = "127.0.0.1:7800".parse().expect("an address");
/// let seeds = vec!["127.0.0.1:7801".to_owned()];
/// let grid = Grid::start(GridConfig::new("a", listen, seeds), ManagerConfig::default()).await?;
/// let config = CacheConfig {
///     mode: CacheMode::Distributed,
///     ..CacheConfig::default()
/// };
/// let cache = grid.define_cache("orders", config).await?;
/// cache.put(b"k", b"v", &WriteOptions::default()).await?;
/// grid.leave().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Grid {
    manager: CacheManager,
    cluster: Cluster,
    runtime: tokio::runtime::Handle,
}

/// How long [`Grid::define_cache`] waits for this member to create a cache the cluster
/// agreed on.
const DEFINE_TIMEOUT: Duration = Duration::from_secs(10);

impl Grid {
    /// Starts a member with the caches `caches` declares and no stores.
    ///
    /// # Errors
    /// As [`Grid::start_with_stores`].
    pub async fn start(config: GridConfig, caches: weft_core::ManagerConfig) -> Result<Self> {
        Self::start_with_stores(config, caches, Arc::new(NoStores)).await
    }

    /// Starts a member with the caches `caches` declares, their stores opened by `stores`,
    /// and joins the members `config` names (or starts a cluster of its own when none
    /// answers).
    ///
    /// # Errors
    /// A cache that cannot be created, a socket that cannot be bound, a seed that cannot be
    /// resolved, or consensus that cannot start.
    pub async fn start_with_stores(
        config: GridConfig,
        caches: weft_core::ManagerConfig,
        stores: Arc<dyn PersistenceFactory>,
    ) -> Result<Self> {
        let prepared = Prepared::new(config);
        let factory = prepared.persistence(stores);
        let manager = tokio::task::spawn_blocking(move || {
            CacheManager::with_persistence(caches, Arc::new(weft_core::SystemClock), Some(factory))
        })
        .await
        .map_err(|error| GridError::Cluster(format!("create the caches: {error}")))?
        .map_err(|error| GridError::Cluster(format!("create the caches: {error}")))?;
        manager
            .start_reaper()
            .map_err(GridError::io("start the expiration reaper"))?;
        let endpoint = prepared.config.listen;
        let cluster = Cluster::start(prepared, endpoint, manager.clone()).await?;
        Ok(Self {
            manager,
            cluster,
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// This member's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.cluster.node().me().name
    }

    /// The cluster address this member listens at (the port chosen when it asked for 0).
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        self.cluster.node().me().cluster_addr
    }

    /// This member's caches, local and clustered (each one's local copy).
    #[must_use]
    pub fn manager(&self) -> &CacheManager {
        &self.manager
    }

    /// The member's part in the cluster.
    #[must_use]
    pub fn node(&self) -> &Arc<Node> {
        self.cluster.node()
    }

    /// The functions operations may invoke on this member's keys (see
    /// [`GridCache::invoke`]); register the same ones on every member.
    #[must_use]
    pub fn functions(&self) -> &Arc<weft_core::operation::Functions> {
        self.cluster.node().functions()
    }

    /// The clustered cache `name`, when this member has it.
    #[must_use]
    pub fn cache(&self, name: &str) -> Option<GridCache> {
        let local = self.manager.cache(name)?;
        Some(GridCache::new(Arc::clone(self.cluster.node()), local))
    }

    /// The clustered cache `name` with the local cache's blocking API, for synchronous code
    /// and [`weft_core::TypedCache`] (see [`BlockingGridCache`]).
    #[must_use]
    pub fn blocking_cache(&self, name: &str) -> Option<BlockingGridCache> {
        Some(BlockingGridCache::new(
            self.cache(name)?,
            self.runtime.clone(),
        ))
    }

    /// Defines cache `name` on every member (agreed through consensus, so members that join
    /// later create it too) and returns it once this member created it.
    ///
    /// # Errors
    /// A definition consensus refused (another configuration under the name), or this
    /// member not creating it in time.
    pub async fn define_cache(&self, name: &str, config: CacheConfig) -> Result<GridCache> {
        let node = self.cluster.node();
        node.define(name, &config).await?;
        let deadline = tokio::time::Instant::now() + DEFINE_TIMEOUT;
        loop {
            if let Some(cache) = self.cache(name) {
                return Ok(cache);
            }
            if tokio::time::Instant::now() > deadline {
                crate::error::bail!("cache `{name}` was defined but not created here in time");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The members the cluster agreed on, by name.
    #[must_use]
    pub fn members(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .cluster
            .node()
            .state()
            .nodes()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// Whether every clustered cache of this member has a stable topology over exactly
    /// `members` members (no rebalance under way).
    #[must_use]
    pub fn is_stable_with(&self, members: usize) -> bool {
        let node = self.cluster.node();
        let state = node.state();
        state.caches().keys().all(|cache| {
            node.routing()
                .cache(cache)
                .is_some_and(|route| route.is_stable() && route.topology.members().len() == members)
        }) && state.nodes().len() == members
    }

    /// Waits until [`Grid::is_stable_with`] `members`, at most `timeout`.
    ///
    /// # Errors
    /// When the cluster did not settle in time.
    pub async fn wait_stable(&self, members: usize, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.is_stable_with(members) {
            if tokio::time::Instant::now() > deadline {
                crate::error::bail!(
                    "the cluster did not settle with {members} members in {timeout:?} (members: {:?})",
                    self.members()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Leaves the cluster gracefully: the others take over this member's segments (its
    /// copies are handed over by state transfer from the backups), then it stops.
    pub async fn leave(self) {
        self.cluster.stopped().await;
        let manager = self.manager;
        let _ = tokio::task::spawn_blocking(move || manager.shutdown()).await;
    }
}

/// Caches without stores.
#[derive(Debug)]
struct NoStores;

impl PersistenceFactory for NoStores {
    fn open(
        &self,
        _name: &str,
        _config: &CacheConfig,
    ) -> std::result::Result<Option<Arc<dyn Persistence>>, String> {
        Ok(None)
    }
}

/// The parts of clustering the caches need before the node starts: the routing table and
/// replication, which clustered caches' persistence uses.
#[derive(Debug)]
pub struct Prepared {
    config: GridConfig,
    functions: Arc<weft_core::operation::Functions>,
    transport: Transport,
    routing: Arc<Routing>,
    replication: Arc<Replication>,
}

impl Prepared {
    /// The clustering parts of the member `config` describes.
    #[must_use]
    pub fn new(config: GridConfig) -> Self {
        let name = config.name.as_str();
        let identity = weft_cluster::handshake::Identity {
            name: name.to_owned(),
            incarnation: raft_id(),
        };
        let limits = transport::Limits {
            frame_bytes_max: config.frame_bytes_max,
            connections_max: config.connections_max,
        };
        let secret = secret_of(&config);
        let transport = Transport::new(identity, secret, limits, config.tls.clone());
        let routing = Arc::new(Routing::new(name));
        let replication = Arc::new(Replication::new(Arc::clone(&routing), transport.clone()));
        Self {
            routing,
            replication,
            transport,
            config,
            functions: Arc::default(),
        }
    }

    /// The functions operations may invoke on this member: register them before the
    /// member starts, the same ones on every member.
    #[must_use]
    pub fn functions(&self) -> &Arc<weft_core::operation::Functions> {
        &self.functions
    }

    /// `inner` with replication in front of every clustered cache's stores.
    #[must_use]
    pub fn persistence(&self, inner: Arc<dyn PersistenceFactory>) -> Arc<dyn PersistenceFactory> {
        Arc::new(ClusterPersistence {
            inner,
            replication: Arc::clone(&self.replication),
        })
    }
}

#[derive(Debug)]
struct ClusterPersistence {
    inner: Arc<dyn PersistenceFactory>,
    replication: Arc<Replication>,
}

impl PersistenceFactory for ClusterPersistence {
    fn open(
        &self,
        name: &str,
        config: &CacheConfig,
    ) -> Result<Option<Arc<dyn Persistence>>, String> {
        let stores = self.inner.open(name, config)?;
        if !config.mode.is_clustered() {
            return Ok(stores);
        }
        let sync = config.replication == weft_core::Replication::Sync;
        Ok(Some(Arc::new(Replicator::new(
            name,
            sync,
            config.partition_handling.when_split,
            Arc::clone(&self.replication),
            stores,
        ))))
    }
}

/// A running cluster member.
#[derive(Debug)]
pub struct Cluster {
    membership: MembershipService,
    node: Arc<Node>,
    serving: tokio::task::JoinHandle<()>,
    /// Stops the member's own loops (consensus' reactions, failure detection, the cluster
    /// port): only once it has left, after the server's shutdown signal — a leaving member
    /// keeps serving the others until the agreed state no longer names it.
    stop: watch::Sender<bool>,
    /// Whether [`Cluster::leave`] ran.
    left: std::sync::atomic::AtomicBool,
}

/// How long a member that left waits with no request from the others before it stops
/// serving them: they stop sending once they apply the agreed state without it, within a
/// few milliseconds of it on a healthy network.
pub const PEERS_QUIET: Duration = Duration::from_millis(300);
/// The longest a member that left waits for the others' requests to stop.
pub const PEERS_QUIET_MAX: Duration = Duration::from_secs(5);

impl Cluster {
    /// Starts membership, the transport and consensus. They run until
    /// [`Cluster::stopped`] has left the cluster: a server's shutdown signal closes its
    /// clients' connections, not these.
    ///
    /// # Errors
    /// If a socket cannot be bound, a seed cannot be resolved or consensus cannot start.
    pub async fn start(
        prepared: Prepared,
        endpoint: SocketAddr,
        manager: CacheManager,
    ) -> crate::Result<Self> {
        let Prepared {
            config: settings,
            functions,
            transport,
            routing,
            replication,
        } = prepared;
        let (stop, _) = watch::channel(false);
        let listener = bind_cluster_port(settings.listen).await?;
        let address = listener
            .local_addr()
            .map_err(GridError::io("read the cluster address"))?;
        let secret = secret_of(&settings);
        if secret.is_empty() {
            tracing::warn!(
                "no cluster-secret is configured: any process that reaches the cluster port {address} is taken for a node; set one (the same on every node)"
            );
        }
        let membership = MembershipService::start(
            &settings,
            address,
            settings.name.clone(),
            secret,
            stop.subscribe(),
        )
        .await?;
        let endpoint = if endpoint.ip().is_unspecified() {
            SocketAddr::new(address.ip(), endpoint.port())
        } else {
            endpoint
        };
        let me = NodeRecord {
            name: settings.name.clone(),
            raft_id: transport.identity().incarnation,
            cluster_addr: address,
            endpoint,
            location: settings.location.clone(),
        };
        let configured: Vec<(String, CacheConfig)> = manager
            .caches()
            .into_iter()
            .filter(|cache| cache.config().mode.is_clustered())
            .map(|cache| (cache.name().to_owned(), cache.config().clone()))
            .collect();
        let handler = Arc::new(NodeHandler::new());
        let serving = transport.serve(
            listener,
            Arc::clone(&handler) as Arc<dyn transport::Handler>,
            stop.subscribe(),
        );
        let node = Node::start(
            me,
            transport,
            routing,
            replication,
            manager,
            configured,
            membership.peers(),
            membership.changed(),
            functions,
            (
                settings.state_transfer_chunk_entries,
                settings.state_transfer_bytes_per_second,
            ),
        )
        .await?;
        handler.attach(Arc::clone(&node));
        node.run(stop.subscribe());
        Ok(Self {
            membership,
            node,
            serving,
            stop,
            left: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// This node's cluster role.
    #[must_use]
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Leaves the cluster (see [`Node::leave`]) while everything keeps running: requests
    /// this member's clients send meanwhile run at the members that own their keys now. Call
    /// [`Cluster::stopped`] afterwards.
    pub async fn leave(&self) {
        if !self.left.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.node.leave().await;
        }
    }

    /// Leaves the cluster if [`Cluster::leave`] has not, answers the requests other members
    /// sent before they installed the topology without this one (until none came for
    /// [`PEERS_QUIET`], at most [`PEERS_QUIET_MAX`]), then stops the member's loops and
    /// consensus, and waits for the membership service to have said goodbye.
    pub async fn stopped(self) {
        self.leave().await;
        if !self
            .node
            .transport()
            .quiesce(PEERS_QUIET, PEERS_QUIET_MAX)
            .await
        {
            tracing::warn!(
                "other members were still sending requests when this one stopped; they retry elsewhere"
            );
        }
        let _ = self.stop.send(true);
        self.node.stop().await;
        self.membership.stopped().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.serving).await;
    }
}

/// How long a member starting on its cluster port waits for it to be free: a process
/// restarted at once after a crash (as a supervisor does) may find the port held for a
/// moment by a connection the machine opened from it while the port was unbound.
const BIND_RETRY_FOR: Duration = Duration::from_secs(5);

/// Binds the cluster port, retrying while it is in use for up to [`BIND_RETRY_FOR`].
async fn bind_cluster_port(address: SocketAddr) -> Result<TcpListener> {
    let deadline = tokio::time::Instant::now() + BIND_RETRY_FOR;
    loop {
        match TcpListener::bind(address).await {
            Ok(listener) => return Ok(listener),
            Err(error)
                if error.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::time::Instant::now() < deadline =>
            {
                tracing::debug!(%address, "cluster port in use; trying again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => {
                return Err(GridError::io(format!(
                    "listen on {address} (cluster-listen, TCP)"
                ))(error));
            }
        }
    }
}

fn secret_of(config: &GridConfig) -> Secret {
    config
        .secret
        .as_deref()
        .map(|secret| Secret::new(secret.as_bytes().to_vec()))
        .unwrap_or_default()
}

/// A consensus id unique to this start of this process.
fn raft_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    // Raft ids must not be 0 in some of openraft's displays; keep them positive and nonzero.
    hasher.finish() >> 1 | 1
}
