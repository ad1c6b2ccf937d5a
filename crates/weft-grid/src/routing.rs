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
use weft_cluster::state::NodeRecord;
use weft_cluster::topology::{CacheTopology, Phase};

/// One segment's owners in the installed topology.
#[derive(Debug, Clone, Default)]
pub struct SegmentRoute {
    /// Members reads may go to, primary first.
    pub read: Vec<MemberId>,
    /// Members every write must reach; the first orders them.
    pub write: Vec<MemberId>,
}

/// A clustered cache's installed topology.
#[derive(Debug)]
pub struct CacheRoute {
    /// The topology.
    pub topology: CacheTopology,
    /// Per segment.
    pub segments: Vec<SegmentRoute>,
}

impl CacheRoute {
    /// Precomputes the owners of every segment of `topology`.
    #[must_use]
    pub fn new(topology: CacheTopology) -> Self {
        let count = topology.current().segment_count();
        let segments = (0..count)
            .map(|segment| SegmentRoute {
                read: topology.read_owners(segment),
                write: topology.write_owners(segment),
            })
            .collect();
        Self { topology, segments }
    }

    /// Leaves `member` out of every segment's owners.
    pub fn exclude(&mut self, member: &MemberId) {
        for segment in &mut self.segments {
            segment.read.retain(|m| m != member);
            segment.write.retain(|m| m != member);
        }
    }

    /// The route of `segment`.
    #[must_use]
    pub fn segment(&self, segment: u32) -> Option<&SegmentRoute> {
        self.segments.get(segment as usize)
    }

    /// Whether a rebalance is under way.
    #[must_use]
    pub fn is_stable(&self) -> bool {
        self.topology.phase() == Phase::Stable
    }
}

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

    /// Where a read of `segment` of `cache` runs: on the member that orders its writes,
    /// like a write. That member answers a read only once the writes it may have seen are
    /// on every owner (the read barrier of a synchronous cache), so no later read sees an
    /// older value — reads are linearizable. Reading any owner instead would let a backup
    /// still applying a write answer with the value before it, after the primary answered
    /// with the new one.
    #[must_use]
    ///
    /// A replicated cache reads on any member that holds the segment (every member, once
    /// it fetched it), as Infinispan's replicated caches do: adding members adds read
    /// capacity. What that gives up: a read concurrent with a write may see the old value
    /// on one member after another member answered with the new one. A write is still
    /// acknowledged only once every member applied it (sync), so a read that starts after
    /// a write's acknowledgement sees it wherever it runs.
    pub fn read_route(&self, cache: &str, segment: u32) -> Route {
        let replicated = self
            .cache(cache)
            .is_some_and(|route| route.topology.current().mode() == weft_cluster::Mode::Replicated);
        if replicated {
            self.route(cache, segment, |route| &route.read, true)
        } else {
            self.route(cache, segment, |route| &route.write, false)
        }
    }

    /// Where a write of `segment` of `cache` runs: on the member that orders its writes.
    #[must_use]
    pub fn write_route(&self, cache: &str, segment: u32) -> Route {
        self.route(cache, segment, |route| &route.write, false)
    }

    fn route(
        &self,
        cache: &str,
        segment: u32,
        owners: impl Fn(&SegmentRoute) -> &Vec<MemberId>,
        any_owner: bool,
    ) -> Route {
        let Some(route) = self.cache(cache) else {
            return Route::Local;
        };
        if self.degraded.read().contains_key(cache) {
            // Cut off from the majority: whatever this side allows runs here, and what its
            // policy forbids is refused here, with the cache's DEGRADED error.
            return Route::Local;
        }
        let Some(segment) = route.segment(segment) else {
            return Route::Local;
        };
        let owners = owners(segment);
        if any_owner && owners.contains(&self.local) {
            return Route::Local;
        }
        match owners.first() {
            None => Route::Local,
            Some(first) if *first == self.local => Route::Local,
            Some(first) => match self.node(first) {
                Some(node) => Route::Remote(first.clone(), node.cluster_addr),
                None => Route::Local,
            },
        }
    }
}
