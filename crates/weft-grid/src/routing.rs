//! Where each clustered cache's keys live right now: the topology this node installed,
//! precomputed per segment, and the members' addresses. Read on every request to a
//! clustered cache; replaced whole when the cluster metadata changes.

use std::collections::HashMap;

/// The routing table's maps: looked up on every request, keyed by short names.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// One cache's place in the routing table: its installed route and whether this node sees
/// it DEGRADED. A cache's slot lives as long as the table, whatever is installed in it, so
/// that the cache's own code holds it and reads it on every write without looking the
/// cache up by name.
#[derive(Debug, Default)]
pub struct RouteSlot {
    route: RwLock<Option<Arc<CacheRoute>>>,
    /// Whether `route` holds one: read on every request without taking the lock (whose
    /// reader count both workers would write to).
    installed: AtomicBool,
    /// Why the cache is DEGRADED, if it is; `is_degraded` says whether to look.
    degraded: RwLock<Option<String>>,
    is_degraded: AtomicBool,
}

impl RouteSlot {
    /// The installed route, if the cache is clustered and has a topology.
    #[must_use]
    pub fn route(&self) -> Option<Arc<CacheRoute>> {
        self.route.read().clone()
    }

    /// Runs `f` on the installed route (held for the call: no route is installed meanwhile).
    pub fn with_route<R>(&self, f: impl FnOnce(Option<&CacheRoute>) -> R) -> R {
        f(self.route.read().as_deref())
    }

    /// Whether the cache has a topology here.
    #[must_use]
    pub fn is_installed(&self) -> bool {
        self.installed.load(Ordering::Acquire)
    }

    fn install(&self, route: Option<Arc<CacheRoute>>) {
        let mut installed = self.route.write();
        self.installed.store(route.is_some(), Ordering::Release);
        *installed = route;
    }

    /// Whether this node sees the cache DEGRADED.
    #[must_use]
    pub fn is_degraded(&self) -> bool {
        self.is_degraded.load(Ordering::Acquire)
    }

    /// Why this node sees the cache DEGRADED, if it does.
    #[must_use]
    pub fn degraded(&self) -> Option<String> {
        if !self.is_degraded() {
            return None;
        }
        self.degraded.read().clone()
    }

    fn set_degraded(&self, reason: Option<String>) -> bool {
        let mut degraded = self.degraded.write();
        let changed = degraded.is_some() != reason.is_some();
        self.is_degraded.store(reason.is_some(), Ordering::Release);
        *degraded = reason;
        changed
    }
}

/// The routing table of this node.
#[derive(Debug)]
pub struct Routing {
    local: MemberId,
    caches: RwLock<Map<String, Arc<RouteSlot>>>,
    nodes: RwLock<Map<MemberId, NodeRecord>>,
    /// This node is leaving the cluster: it orders no write any more (see
    /// `Node::leave`).
    leaving: AtomicBool,
}

impl Routing {
    /// An empty table for the node named `local`.
    #[must_use]
    pub fn new(local: &str) -> Self {
        Self {
            local: MemberId(local.to_owned()),
            caches: RwLock::new(Map::default()),
            nodes: RwLock::new(Map::default()),
            leaving: AtomicBool::new(false),
        }
    }

    /// From now on this node orders no write: it is leaving the cluster.
    pub fn set_leaving(&self) {
        self.leaving.store(true, Ordering::Release);
    }

    /// Whether this node is leaving the cluster (and orders no write).
    #[must_use]
    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// The slot of `cache` (made empty if the table has none yet).
    #[must_use]
    pub fn slot(&self, cache: &str) -> Arc<RouteSlot> {
        if let Some(slot) = self.caches.read().get(cache) {
            return Arc::clone(slot);
        }
        Arc::clone(self.caches.write().entry(cache.to_owned()).or_default())
    }

    /// Why `cache` is DEGRADED on this node, if it is.
    #[must_use]
    pub fn degraded(&self, cache: &str) -> Option<String> {
        self.caches
            .read()
            .get(cache)
            .and_then(|slot| slot.degraded())
    }

    /// Records whether `cache` is DEGRADED; returns whether that changed.
    pub fn set_degraded(&self, cache: &str, reason: Option<String>) -> bool {
        self.slot(cache).set_degraded(reason)
    }

    /// This node's member id.
    #[must_use]
    pub fn local(&self) -> &MemberId {
        &self.local
    }

    /// Whether this member routes `cache` by an agreed topology (it has joined and heard of
    /// the cache). Cheap: one map lookup and a flag.
    #[must_use]
    pub fn is_routed(&self, cache: &str) -> bool {
        self.caches
            .read()
            .get(cache)
            .is_some_and(|slot| slot.is_installed())
    }

    /// Whether a read (`read`) or write of `segment` of `cache` runs on this member now,
    /// directly: it routes the cache, is not leaving, places the request here, and — for
    /// a write — orders the segment's writes ([`SegmentRoute::orders`]; not while it hands
    /// the segment over). A DEGRADED cache runs everything here (its policy refuses what it
    /// must). When not, the request goes through the grid ([`crate::GridCache`]), which
    /// runs it at its owner, or waits for a topology that routes it. One lookup of the
    /// route, for the adapters' hot path.
    #[must_use]
    pub fn runs_here(&self, cache: &str, segment: u32, read: bool) -> bool {
        if self.is_leaving() {
            return false;
        }
        let caches = self.caches.read();
        let Some(slot) = caches.get(cache) else {
            return false;
        };
        if !slot.is_installed() {
            return false;
        }
        if slot.is_degraded() {
            return true;
        }
        slot.with_route(|route| {
            let Some(route) = route else {
                return false;
            };
            let placed = weft_cluster::placement::place(route, &self.local, segment, read);
            if placed.is_some_and(|member| *member != self.local) {
                return false;
            }
            read || route
                .segment(segment)
                .is_some_and(|owners| owners.orders(&self.local))
        })
    }

    /// The installed route of `cache`, if it is clustered and has a topology.
    #[must_use]
    pub fn cache(&self, cache: &str) -> Option<Arc<CacheRoute>> {
        self.caches.read().get(cache).and_then(|slot| slot.route())
    }

    /// Installs `route` for `cache`.
    pub fn install(&self, cache: &str, route: Arc<CacheRoute>) {
        self.slot(cache).install(Some(route));
    }

    /// Forgets `cache`'s route (its slot stays, empty).
    pub fn uninstall(&self, cache: &str) {
        if let Some(slot) = self.caches.read().get(cache) {
            slot.install(None);
        }
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
        match self.caches.read().get(cache) {
            Some(slot) => self.route_in(slot, segment, read),
            None => Route::Local,
        }
    }

    /// Where a read (`read`) or write of `segment` of the cache in `slot` runs.
    #[must_use]
    pub fn route_in(&self, slot: &RouteSlot, segment: u32, read: bool) -> Route {
        if slot.is_degraded() {
            // Cut off from the majority: whatever this side allows runs here, and what its
            // policy forbids is refused here, with the cache's DEGRADED error.
            return Route::Local;
        }
        let remote = slot.with_route(|route| {
            let member = weft_cluster::placement::place(route?, &self.local, segment, read)?;
            (*member != self.local).then(|| member.clone())
        });
        match remote {
            None => Route::Local,
            Some(member) => match self.nodes.read().get(&member) {
                Some(node) => Route::Remote(member, node.cluster_addr),
                None => Route::Local,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_cluster::topology::{CacheTopology, Phase};
    use weft_cluster::{ConsistentHash, Location, Member, Mode};

    fn member(name: &str) -> Member {
        Member {
            id: MemberId(name.to_owned()),
            location: Location::default(),
        }
    }

    // Proves the adapters' one question — does this request run here now? — says yes
    // exactly where this member is the key's primary and orders its writes: not on a cache
    // it has no topology of, not while leaving, not for a segment whose primary hands it
    // over (writes), and always while the cache is DEGRADED (its policy decides there).
    #[test]
    fn a_request_runs_here_only_where_this_member_orders_it() {
        let routing = Routing::new("a");
        assert!(!routing.runs_here("c", 0, true), "no topology yet");
        let hash = ConsistentHash::new(
            vec![member("a"), member("b"), member("c")],
            8,
            Mode::Distributed { owners: 2 },
        )
        .unwrap_or_else(|error| panic!("{error:?}"));
        let mut topology = CacheTopology::new(hash);
        routing.install("c", Arc::new(CacheRoute::new(topology.clone())));
        let a = MemberId("a".to_owned());
        for segment in 0..8u32 {
            let primary = topology.current().owner_ids(segment as usize)[0] == &a;
            assert_eq!(routing.runs_here("c", segment, false), primary, "{segment}");
            assert_eq!(routing.runs_here("c", segment, true), primary, "{segment}");
        }
        // A fourth member joins; at ReadAllWriteAll the segments whose primary changes take
        // no write here.
        let four = vec![member("a"), member("b"), member("c"), member("d")];
        assert!(topology.members_changed(&four).unwrap_or(false));
        let rebalance = topology.rebalance_id();
        for id in ["a", "b", "c", "d"] {
            topology.confirm(&MemberId(id.to_owned()), rebalance);
        }
        assert_eq!(topology.phase(), Phase::ReadAllWriteAll);
        routing.install("c", Arc::new(CacheRoute::new(topology.clone())));
        let mut handed_over = 0;
        for segment in 0..8u32 {
            let current = topology.current().owner_ids(segment as usize)[0] == &a;
            let next = topology
                .pending()
                .is_some_and(|p| p.owner_ids(segment as usize)[0] == &a);
            assert_eq!(routing.runs_here("c", segment, false), current && next);
            handed_over += usize::from(current && !next);
        }
        assert!(handed_over > 0, "no segment of `a` moved");
        routing.set_degraded("c", Some("cut off".to_owned()));
        assert!((0..8).all(|segment| routing.runs_here("c", segment, false)));
        routing.set_degraded("c", None);
        routing.set_leaving();
        assert!((0..8).all(|segment| !routing.runs_here("c", segment, true)));
    }
}
