//! The server's clustering: membership (SWIM over UDP), the node-to-node transport (TCP on
//! the same port number), consensus on the cluster metadata (Raft), routing, replication
//! and state transfer. `weft_cluster` holds the logic; this module drives it with sockets
//! and the tokio clock.

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

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use weft_cluster::Location;
use weft_cluster::handshake::Secret;
use weft_cluster::state::NodeRecord;
use weft_core::{CacheConfig, CacheManager, Persistence, PersistenceFactory};
use weft_rest::{CacheTopologyView, ClusterMembers, TransferView};

use crate::config::ServerSection;
use membership::MembershipService;
use node::{Node, NodeHandler};
use replication::{Replication, Replicator};
use routing::Routing;
use transport::Transport;

/// The parts of clustering the caches need before the node starts: the routing table and
/// replication, which clustered caches' persistence uses.
#[derive(Debug)]
pub struct Prepared {
    address: SocketAddr,
    name: String,
    transport: Transport,
    routing: Arc<Routing>,
    replication: Arc<Replication>,
}

impl Prepared {
    /// The clustering parts for node `name`, if `settings` make it clustered.
    #[must_use]
    pub fn new(settings: &ServerSection, name: &str) -> Option<Self> {
        let address = settings.cluster_address()?;
        let identity = weft_cluster::handshake::Identity {
            name: name.to_owned(),
            incarnation: raft_id(),
        };
        let secret = settings
            .cluster_secret
            .as_deref()
            .map(|secret| Secret::new(secret.as_bytes().to_vec()))
            .unwrap_or_default();
        let limits = transport::Limits {
            frame_bytes_max: settings.cluster_frame_bytes_max,
            connections_max: settings.cluster_connections_max,
        };
        let transport = Transport::new(identity, secret, limits);
        let routing = Arc::new(Routing::new(name));
        let replication = Arc::new(Replication::new(Arc::clone(&routing), transport.clone()));
        Some(Self {
            address,
            name: name.to_owned(),
            transport,
            routing,
            replication,
        })
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
        settings: &ServerSection,
        endpoint: SocketAddr,
        manager: CacheManager,
        shutdown: &watch::Sender<bool>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(prepared.address)
            .await
            .with_context(|| format!("listen on {} (cluster-listen, TCP)", prepared.address))?;
        let address = listener.local_addr().context("read the cluster address")?;
        let secret = settings
            .cluster_secret
            .as_deref()
            .map(|secret| Secret::new(secret.as_bytes().to_vec()))
            .unwrap_or_default();
        if secret.is_empty() {
            tracing::warn!(
                "no cluster-secret is configured: any process that reaches the cluster port {address} is taken for a node; set one (the same on every node)"
            );
        }
        let membership = MembershipService::start(
            settings,
            address,
            prepared.name.clone(),
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
            name: prepared.name.clone(),
            raft_id: prepared.transport.identity().incarnation,
            cluster_addr: address,
            endpoint,
            location: Location {
                site: settings.site.clone(),
                rack: settings.rack.clone(),
                machine: settings.machine.clone(),
            },
        };
        let configured: Vec<(String, CacheConfig)> = manager
            .caches()
            .into_iter()
            .filter(|cache| cache.config().mode.is_clustered())
            .map(|cache| (cache.name().to_owned(), cache.config().clone()))
            .collect();
        let handler = Arc::new(NodeHandler::new());
        let serving = prepared.transport.serve(
            listener,
            Arc::clone(&handler) as Arc<dyn transport::Handler>,
            shutdown.subscribe(),
        );
        let node = Node::start(
            me,
            prepared.transport,
            prepared.routing,
            prepared.replication,
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

    /// A reader of the agreed membership for REST and metrics (this node alone until it
    /// joined a group).
    pub fn view(&self) -> impl Fn() -> ClusterMembers + Send + Sync + 'static {
        let node = Arc::clone(&self.node);
        move || members(&node)
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

fn members(node: &Node) -> ClusterMembers {
    let state = node.state();
    let mut nodes: Vec<NodeRecord> = state.nodes().values().cloned().collect();
    if nodes.is_empty() {
        nodes.push(node.me().clone());
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let me = weft_cluster::MemberId(node.me().name.clone());
    let progress = node.transfer_progress();
    let caches = state
        .caches()
        .keys()
        .filter_map(|name| {
            let route = node.routing().cache(name)?;
            let topology = &route.topology;
            let owners: Vec<Vec<String>> = route
                .segments
                .iter()
                .map(|segment| segment.write.iter().map(|id| id.0.clone()).collect())
                .collect();
            let current = topology.current();
            let count = |primary: bool| {
                (0..current.segment_count())
                    .filter(|&s| {
                        let ids = current.owner_ids(s);
                        if primary {
                            ids.first() == Some(&&me)
                        } else {
                            ids.contains(&&me)
                        }
                    })
                    .count() as u64
            };
            let transfer = progress.get(name).cloned().unwrap_or_default();
            Some(CacheTopologyView {
                cache: name.clone(),
                topology_id: topology.id(),
                rebalance_id: topology.rebalance_id(),
                phase: phase_name(topology.phase()).to_owned(),
                members: topology.members().into_iter().map(|id| id.0).collect(),
                owners,
                primary_segments: count(true),
                owned_segments: count(false),
                transfer: TransferView {
                    segments_total: transfer.segments_total,
                    segments_done: transfer.segments_done,
                    entries: transfer.entries,
                },
                degraded: node.routing().degraded(name).is_some(),
            })
        })
        .collect();
    ClusterMembers {
        names: nodes.iter().map(|n| n.name.clone()).collect(),
        addresses: nodes.iter().map(|n| n.cluster_addr.to_string()).collect(),
        coordinator: node.coordinator(),
        caches,
        forwarded: node.forwarded(),
        bytes: node.transport().bytes(),
    }
}

fn phase_name(phase: weft_cluster::topology::Phase) -> &'static str {
    use weft_cluster::topology::Phase;
    match phase {
        Phase::Stable => "stable",
        Phase::ReadOldWriteAll => "read-old-write-all",
        Phase::ReadAllWriteAll => "read-all-write-all",
        Phase::ReadNewWriteAll => "read-new-write-all",
    }
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
