//! Weft's grid engine: a cache clustered over a group of members, in any Rust process.
//!
//! A member runs membership (SWIM over UDP), the member-to-member transport (TCP on the same
//! port number), consensus on the cluster metadata (Raft), routing, replication and state
//! transfer. `weft_cluster` holds the logic without I/O; this crate drives it with sockets
//! and the tokio clock. The `weft` server is one user of this crate, an application that
//! embeds its caches another: both configure a member with [`GridConfig`].

pub mod config;
pub mod error;
pub mod iteration;
pub mod membership;
pub mod multi;
pub mod node;
pub mod raft;
pub mod replication;
pub mod routing;
pub mod transport;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use weft_cluster::handshake::Secret;
use weft_cluster::state::NodeRecord;
use weft_core::{CacheConfig, CacheManager, Persistence, PersistenceFactory};

pub use config::GridConfig;
pub use error::{GridError, Result};
use membership::MembershipService;
use node::{Node, NodeHandler};
use replication::{Replication, Replicator};
use routing::Routing;
use transport::Transport;

/// The parts of clustering the caches need before the node starts: the routing table and
/// replication, which clustered caches' persistence uses.
#[derive(Debug)]
pub struct Prepared {
    config: GridConfig,
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
        let transport = Transport::new(identity, secret, limits);
        let routing = Arc::new(Routing::new(name));
        let replication = Arc::new(Replication::new(Arc::clone(&routing), transport.clone()));
        Self {
            routing,
            replication,
            transport,
            config,
        }
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
}

impl Cluster {
    /// Starts membership, the transport and consensus.
    ///
    /// # Errors
    /// If a socket cannot be bound, a seed cannot be resolved or consensus cannot start.
    pub async fn start(
        prepared: Prepared,
        endpoint: SocketAddr,
        manager: CacheManager,
        shutdown: &watch::Sender<bool>,
    ) -> crate::Result<Self> {
        let Prepared {
            config: settings,
            transport,
            routing,
            replication,
        } = prepared;
        let listener = TcpListener::bind(settings.listen)
            .await
            .map_err(GridError::io(format!(
                "listen on {} (cluster-listen, TCP)",
                settings.listen
            )))?;
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
            shutdown.subscribe(),
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
            shutdown.subscribe(),
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
            (
                settings.state_transfer_chunk_entries,
                settings.state_transfer_bytes_per_second,
            ),
        )
        .await?;
        handler.attach(Arc::clone(&node));
        node.run(shutdown.subscribe());
        Ok(Self {
            membership,
            node,
            serving,
        })
    }

    /// This node's cluster role.
    #[must_use]
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Stops consensus and waits for the membership service to have said goodbye (after the
    /// shutdown signal).
    pub async fn stopped(self) {
        self.node.leave().await;
        self.node.stop().await;
        self.membership.stopped().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), self.serving).await;
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
