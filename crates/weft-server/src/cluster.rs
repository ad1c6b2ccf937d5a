//! The server's side of the grid: what REST and the CLI report about the cluster, which
//! protocols' requests ran at another member, and REST's access to clustered caches. The grid itself (membership, transport, consensus, routing,
//! replication, state transfer) is `weft_grid`.

use std::sync::Arc;

use weft_cluster::state::NodeRecord;
use weft_core::CacheConfig;
use weft_core::operation::{Applied, Operation};
use weft_core::persistence::BoxFuture;
use weft_grid::GridCache;
use weft_grid::node::Node;
pub use weft_grid::{Cluster, GridConfig, Prepared, iteration, multi, node, routing, transport};
use weft_rest::{CacheTopologyView, ClusterMembers, TransferView};

/// A reader of the agreed membership for REST and metrics (this node alone until it joined
/// a group).
pub fn view(
    node: &Arc<Node>,
    routed: &Arc<Routed>,
) -> impl Fn() -> ClusterMembers + Send + Sync + 'static {
    let node = Arc::clone(node);
    let routed = Arc::clone(routed);
    move || members(&node, &routed)
}

/// Which protocol a request routed to its key's owner came in by.
#[derive(Debug, Clone, Copy)]
pub enum Origin {
    /// RESP.
    Resp,
    /// Hot Rod.
    HotRod,
    /// REST.
    Rest,
    /// memcached.
    Memcached,
}

/// Requests run at another member than the one a client sent them to, per protocol: how
/// many clients are not topology-aware, or overtaken by topology changes.
#[derive(Debug, Default)]
pub struct Routed([std::sync::atomic::AtomicU64; 4]);

impl Routed {
    /// Counts one request of `origin` run at another member.
    pub fn count(&self, origin: Origin) {
        self.0[origin as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts, by protocol label.
    #[must_use]
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        let read =
            |origin: Origin| self.0[origin as usize].load(std::sync::atomic::Ordering::Relaxed);
        vec![
            ("resp", read(Origin::Resp)),
            ("hotrod", read(Origin::HotRod)),
            ("rest", read(Origin::Rest)),
            ("memcached", read(Origin::Memcached)),
        ]
    }
}

fn members(node: &Node, routed: &Routed) -> ClusterMembers {
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
                rebalance: state
                    .cache(name)
                    .map(|record| rebalance_view(&record.topology))
                    .unwrap_or_default(),
            })
        })
        .collect();
    ClusterMembers {
        names: nodes.iter().map(|n| n.name.clone()).collect(),
        addresses: nodes.iter().map(|n| n.cluster_addr.to_string()).collect(),
        coordinator: node.coordinator(),
        caches,
        forwarded: routed.counts(),
        unreachable: node.unreachable_members(),
        bytes: node.transport().bytes(),
    }
}

/// Each member's part in the agreed rebalance of `topology` (none when stable).
fn rebalance_view(
    topology: &weft_cluster::topology::CacheTopology,
) -> Vec<weft_rest::MemberRebalanceView> {
    let Some(pending) = topology.pending() else {
        return Vec::new();
    };
    let current = topology.current();
    // What each member copies: the segments it owns in the hash moved to and not in the one
    // moved from (`CacheTopology::to_fetch`, which answers only during the first phase;
    // the totals stay put through the later phases here).
    let to_fetch = |member: &weft_cluster::MemberId| {
        (0..pending.segment_count())
            .filter(|&s| {
                pending.owner_ids(s).contains(&member) && !current.owner_ids(s).contains(&member)
            })
            .count() as u64
    };
    topology
        .members()
        .into_iter()
        .map(|member| weft_rest::MemberRebalanceView {
            segments_to_fetch: to_fetch(&member),
            confirmed: topology.has_confirmed(&member),
            member: member.0,
        })
        .collect()
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

/// A grid failure as the protocols that speak in cache errors report it: what the owner's
/// cache refused as it would have here; an owner that cannot be reached, or ownership that
/// did not settle, as the owner being unavailable (a client retries).
pub fn cache_error_of(cache: &str, error: weft_grid::GridError) -> weft_core::CacheError {
    match error {
        weft_grid::GridError::Cache(error) => error,
        other => weft_core::PersistenceError::Unavailable {
            cache: cache.to_owned(),
            reason: other.to_string(),
        }
        .into(),
    }
}

/// Runs REST's operations on clustered caches at their keys' owners.
#[derive(Debug)]
pub struct RestForwarder {
    node: Arc<Node>,
    routed: Arc<Routed>,
}

impl RestForwarder {
    /// Forwarding through `node`.
    #[must_use]
    pub fn new(node: Arc<Node>, routed: Arc<Routed>) -> Self {
        Self { node, routed }
    }
}

impl weft_rest::Forwarder for RestForwarder {
    fn execute(
        &self,
        cache: weft_core::Cache,
        operation: Operation,
    ) -> BoxFuture<Result<Applied, weft_core::CacheError>> {
        let name = cache.name().to_owned();
        let grid = GridCache::new(Arc::clone(&self.node), cache);
        if grid.route(&operation) != weft_grid::routing::Route::Local {
            self.routed.count(Origin::Rest);
        }
        Box::pin(async move {
            grid.apply(operation)
                .await
                .map_err(|error| cache_error_of(&name, error))
        })
    }

    fn size(&self, cache: weft_core::Cache) -> BoxFuture<Result<u64, String>> {
        let node = Arc::clone(&self.node);
        Box::pin(async move {
            node.cluster_size(&cache)
                .await
                .map_err(|error| error.to_string())
        })
    }

    fn list(
        &self,
        cache: weft_core::Cache,
        limit: usize,
        keep: fn(&weft_core::CacheEntry) -> bool,
    ) -> BoxFuture<Result<Vec<weft_core::CacheEntry>, String>> {
        let node = Arc::clone(&self.node);
        Box::pin(async move {
            let segments = 0..cache.segment_count();
            let mut cursor = weft_grid::iteration::SegmentCursor::new(cache, segments);
            let mut listed = Vec::new();
            while listed.len() < limit {
                let want = (limit - listed.len()).min(weft_grid::iteration::PAGE_MAX);
                let (entries, finished) = cursor
                    .next_batch(&node, want, keep)
                    .await
                    .map_err(|error| error.to_string())?;
                if entries.is_empty() && finished.is_empty() {
                    break;
                }
                listed.extend(entries);
            }
            Ok(listed)
        })
    }

    fn clear(&self, cache: weft_core::Cache) -> BoxFuture<Result<(), String>> {
        let node = Arc::clone(&self.node);
        Box::pin(async move {
            node.cluster_clear(&cache)
                .await
                .map_err(|error| error.to_string())
        })
    }

    fn define(&self, name: String, config: CacheConfig) -> BoxFuture<Result<(), String>> {
        let node = Arc::clone(&self.node);
        Box::pin(async move {
            node.create_cache(&name, &config)
                .await
                .map(|_| ())
                .map_err(|error| error.to_string())
        })
    }

    fn remove(&self, name: String) -> BoxFuture<Result<bool, String>> {
        let node = Arc::clone(&self.node);
        Box::pin(async move {
            node.remove_cache(&name)
                .await
                .map_err(|error| error.to_string())
        })
    }
}
