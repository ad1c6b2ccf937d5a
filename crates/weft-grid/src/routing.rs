//! Where each clustered cache's keys live right now: the topology this node installed,
//! precomputed per segment, and the members' addresses. Read on every request to a
//! clustered cache; replaced whole when the cluster metadata changes.

use std::collections::HashMap;

/// The routing table's maps: looked up on every request, keyed by short names.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;
use weft_cluster::MemberId;
pub use weft_cluster::placement::{CacheRoute, SegmentRoute};
use weft_cluster::state::NodeRecord;

/// Where to run a keyed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Here.
    Local,
    /// On this member, at this cluster address.
    Remote(MemberId, SocketAddr),
}

/// The routing table of this node.
#[derive(Debug)]
pub struct Routing {
    local: MemberId,
    caches: RwLock<Map<String, Arc<CacheRoute>>>,
    nodes: RwLock<Map<MemberId, NodeRecord>>,
    /// Caches this node sees DEGRADED, and why.
    degraded: RwLock<Map<String, String>>,
}

impl Routing {
    /// An empty table for the node named `local`.
    #[must_use]
    pub fn new(local: &str) -> Self {
        Self {
            local: MemberId(local.to_owned()),
            caches: RwLock::new(Map::default()),
            nodes: RwLock::new(Map::default()),
            degraded: RwLock::new(Map::default()),
        }
    }

    /// Why `cache` is DEGRADED on this node, if it is.
    #[must_use]
    pub fn degraded(&self, cache: &str) -> Option<String> {
        self.degraded.read().get(cache).cloned()
    }

    /// Records whether `cache` is DEGRADED; returns whether that changed.
    pub fn set_degraded(&self, cache: &str, reason: Option<String>) -> bool {
        let mut degraded = self.degraded.write();
        match reason {
            Some(reason) => degraded.insert(cache.to_owned(), reason).is_none(),
            None => degraded.remove(cache).is_some(),
        }
    }

    /// This node's member id.
    #[must_use]
    pub fn local(&self) -> &MemberId {
        &self.local
    }

    /// The installed route of `cache`, if it is clustered and has a topology.
    #[must_use]
    pub fn cache(&self, cache: &str) -> Option<Arc<CacheRoute>> {
        self.caches.read().get(cache).cloned()
    }

    /// Installs `route` for `cache`.
    pub fn install(&self, cache: &str, route: Arc<CacheRoute>) {
        self.caches.write().insert(cache.to_owned(), route);
    }

    /// Forgets `cache`.
    pub fn uninstall(&self, cache: &str) {
        self.caches.write().remove(cache);
    }

    /// Replaces the member list.
    pub fn set_nodes(&self, nodes: impl IntoIterator<Item = NodeRecord>) {
        *self.nodes.write() = nodes
            .into_iter()
            .map(|node| (MemberId(node.name.clone()), node))
            .collect();
    }

    /// A member's record.
    #[must_use]
    pub fn node(&self, id: &MemberId) -> Option<NodeRecord> {
        self.nodes.read().get(id).cloned()
    }

    /// Every member's record.
    #[must_use]
    pub fn nodes(&self) -> Vec<NodeRecord> {
        let mut nodes: Vec<NodeRecord> = self.nodes.read().values().cloned().collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        nodes
    }

    /// Where a read of `segment` of `cache` runs: see [`weft_cluster::placement::place`]
    /// (the primary of a distributed cache, any holder of a replicated one).
    #[must_use]
    pub fn read_route(&self, cache: &str, segment: u32) -> Route {
        self.route(cache, segment, true)
    }

    /// Where a write of `segment` of `cache` runs: on the member that orders its writes.
    #[must_use]
    pub fn write_route(&self, cache: &str, segment: u32) -> Route {
        self.route(cache, segment, false)
    }

    fn route(&self, cache: &str, segment: u32, read: bool) -> Route {
        let Some(route) = self.cache(cache) else {
            return Route::Local;
        };
        if self.degraded.read().contains_key(cache) {
            // Cut off from the majority: whatever this side allows runs here, and what its
            // policy forbids is refused here, with the cache's DEGRADED error.
            return Route::Local;
        }
        match weft_cluster::placement::place(&route, &self.local, segment, read) {
            None => Route::Local,
            Some(member) if *member == self.local => Route::Local,
            Some(member) => match self.node(member) {
                Some(node) => Route::Remote(member.clone(), node.cluster_addr),
                None => Route::Local,
            },
        }
    }
}
