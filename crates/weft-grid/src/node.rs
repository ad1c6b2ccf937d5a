//! This node's part in the cluster: it joins the consensus group, keeps the agreed member
//! list in step with failure detection (when it leads), defines its clustered caches,
//! installs every topology the group agrees on, moves segments when a topology says so,
//! and answers the other nodes' requests.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use openraft::{BasicNode, ChangeMembers, ServerState};
use parking_lot::{Mutex, RwLock};
use tokio::sync::{Notify, watch};
use weft_cluster::engine::{self, Effect, Engine, Merge};
use weft_cluster::handshake::Identity;
use weft_cluster::membership::NodeIdentity;
use weft_cluster::operation::Refusal;
use weft_cluster::placement::FetchAnswer;
use weft_cluster::state::{ClusterState, Command, NodeRecord};
use weft_cluster::topology::Phase;
use weft_cluster::wire::{EntryImage, MergeHow, Replica, Request, Response};
use weft_cluster::{MemberId, Mode};
use weft_core::operation::{Functions, Operation};
use weft_core::persistence::BoxFuture;
use weft_core::{CacheConfig, CacheManager, RemoteChange};

use super::raft::{self, NodeId, Outcome, Raft};
use super::replication::{Replication, applying_remote};
use super::routing::{CacheRoute, Routing};
use super::transport::{Handler, Transport};

/// How long a node waits for the others before founding a cluster of its own.
const BOOTSTRAP_DELAY: Duration = Duration::from_millis(1_500);
/// How often the node reconciles membership and definitions (also on every change).
const TICK: Duration = Duration::from_millis(300);
/// The longest a primary waits for its backups before handing segments over.
const HANDOVER_DRAIN_MAX: Duration = Duration::from_secs(5);
/// How long one round of coordination may wait on consensus before it is given up (and
/// tried again at the next tick).
const TICK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request to another node may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a segment's primary waits to have installed the rebalance a new owner fetches
/// for (the two apply the agreed state a few milliseconds apart, as a rule).
const FETCH_WAIT_MAX: Duration = Duration::from_secs(5);
/// How often a primary waiting so looks at its routes again.
const FETCH_WAIT_POLL: Duration = Duration::from_millis(5);
/// How long a consensus leader goes without a quorum's answer before it steps down: the
/// followers' own election timeout, so that it steps down about when they would elect.
const STEP_DOWN_AFTER: Duration = Duration::from_millis(2_000);
/// The node id of the candidate a leader without a quorum votes for to step down: no member
/// has it (members' ids are odd).
const NO_CANDIDATE: NodeId = 0;
/// How long a leaving node waits for its backups to acknowledge what it ordered.
const LEAVE_DRAIN_MAX: Duration = Duration::from_secs(3);
/// How long a leaving node follows the agreed state after its release, until that state
/// no longer names it.
const LEAVE_FOLLOW_MAX: Duration = Duration::from_secs(3);
/// How long a new owner waits for a page: the primary's wait, then a call's.
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);
/// Consensus voters wanted (the others are learners).
const VOTERS: usize = 3;

/// How long a forming cluster waits for the nodes in sight to be members before it defines
/// its caches over those that are.
const FORMATION_WAIT_MAX: Duration = Duration::from_secs(10);
/// How long an administrator's cache creation or removal waits, once the cluster agreed on
/// it, for this node to have applied it.
const APPLIED_WAIT_MAX: Duration = Duration::from_secs(5);

/// Progress of state transfer, per cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferProgress {
    /// Segments to fetch in the current rebalance.
    pub segments_total: u64,
    /// Segments fetched.
    pub segments_done: u64,
    /// Entries received.
    pub entries: u64,
}

/// What a node said about itself: its record, whether it belongs to a consensus group, and
/// when it said so.
#[derive(Debug, Clone)]
struct Hello {
    node: NodeRecord,
    initialized: bool,
    at: Instant,
}

/// How long a node's answer to Hello is trusted (a process restarted on the same address
/// is a new node).
const HELLO_TTL: Duration = Duration::from_secs(3);

/// Keys of one segment changed by replication during its transfer.
/// Per fetch of a segment running (a rebalance's, and maybe one of the rebalance it
/// replaced, still finishing), the keys replication changed since that fetch began: its
/// pages must not overwrite them.
type TouchedKeys = Vec<(u64, HashSet<Vec<u8>>)>;

/// This node's cluster role.
pub struct Node {
    me: NodeRecord,
    raft: Raft,
    state: watch::Receiver<Arc<ClusterState>>,
    transport: Transport,
    routing: Arc<Routing>,
    replication: Arc<Replication>,
    manager: CacheManager,
    /// The clustered caches this node's configuration defines.
    configured: Vec<(String, CacheConfig)>,
    /// Configured caches this node proposes no more: it saw the cluster define them, or
    /// they were removed through it. A removal is an administrator's decision, which the
    /// next reconciliation must not undo by defining the cache again.
    configured_done: Mutex<HashSet<String>>,
    /// Live members according to failure detection.
    view: Arc<RwLock<Vec<NodeIdentity>>>,
    view_changed: Arc<Notify>,
    /// What other nodes said about themselves, by cluster address, and when.
    hellos: Mutex<HashMap<SocketAddr, Hello>>,
    /// Where each sender's replication stream to this node is, by sender name, incarnation
    /// and stream.
    inbound: Mutex<HashMap<(String, u64, u64), InboundStream>>,
    /// Keys changed by replication while their segment is being fetched: the fetched copy
    /// of such a key is older and must not overwrite (or resurrect) it.
    touched: Mutex<HashMap<(String, u32), TouchedKeys>>,
    /// Ids of segment fetches (see [`TouchedKeys`]).
    fetch_ids: std::sync::atomic::AtomicU64,
    /// This node's decisions about each agreed state (shared with the simulator).
    engine: Mutex<Engine>,
    progress: Mutex<BTreeMap<String, TransferProgress>>,
    /// Nodes that left gracefully: not added back while failure detection still lists them.
    departed: Mutex<HashSet<NodeId>>,
    /// Whether this process was admitted yet (the engine decides; read on every request):
    /// before, it takes no writes from primaries and owns nothing (the agreed topologies
    /// may still name its predecessor by the same name).
    admitted: std::sync::atomic::AtomicBool,
    /// Entries per fetch request, and the fetch rate limit (bytes per second, 0 = none).
    chunk_entries: u32,
    fetch_rate: u64,
    /// Segments this node fetched in a rebalance and has been a write owner of ever since
    /// (it received every write to them): a restarted rebalance does not fetch them again.
    fetched: Mutex<HashMap<String, HashSet<u32>>>,
    /// Caches this node was re-admitted to after being cut off: what it holds of their lost
    /// segments fills them in (see [`Node::merge_policy`]).
    rejoined: Mutex<HashSet<String>>,
    /// Clustered caches this node removed as the cluster agreed (until one by the same name
    /// is created again). A change or operation for a cache this node lacks is dropped or
    /// refused only when the cache is here: for any other, this node has not applied the
    /// cache's definition yet, and the sender is asked to send it again.
    removed: Mutex<HashSet<String>>,
    /// The functions operations may invoke on a key (see [`Operation::Invoke`]).
    functions: Arc<Functions>,
    /// Cluster-wide events: who wants which cache's, and the relays sending them.
    events: crate::events::Events,
    started: Instant,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("me", &self.me.name).finish()
    }
}

impl Node {
    /// Starts consensus for this node (not yet part of any group).
    ///
    /// # Errors
    /// If Raft cannot start.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        me: NodeRecord,
        transport: Transport,
        routing: Arc<Routing>,
        replication: Arc<Replication>,
        manager: CacheManager,
        configured: Vec<(String, CacheConfig)>,
        view: Arc<RwLock<Vec<NodeIdentity>>>,
        view_changed: Arc<Notify>,
        functions: Arc<Functions>,
        transfer: (u32, u64),
    ) -> crate::Result<Arc<Self>> {
        let (machine, state) = raft::StateMachine::new();
        let raft = Raft::new(
            me.raft_id,
            raft::config("weft")?,
            raft::Network::new(transport.clone()),
            raft::LogStore::default(),
            machine,
        )
        .await?;
        Ok(Arc::new(Self {
            engine: Mutex::new(Engine::new(MemberId(me.name.clone()), me.raft_id)),
            me,
            raft,
            state,
            transport,
            routing,
            replication,
            manager,
            configured,
            configured_done: Mutex::new(HashSet::new()),
            view,
            view_changed,
            hellos: Mutex::new(HashMap::new()),
            inbound: Mutex::new(HashMap::new()),
            touched: Mutex::new(HashMap::new()),
            fetch_ids: std::sync::atomic::AtomicU64::new(0),
            progress: Mutex::new(BTreeMap::new()),
            departed: Mutex::new(HashSet::new()),
            admitted: std::sync::atomic::AtomicBool::new(false),
            chunk_entries: transfer.0.max(1),
            fetch_rate: transfer.1,
            fetched: Mutex::new(HashMap::new()),
            rejoined: Mutex::new(HashSet::new()),
            removed: Mutex::new(HashSet::new()),
            functions,
            events: crate::events::Events::default(),
            started: Instant::now(),
        }))
    }

    /// Whether the agreed members admitted this process (this incarnation, not a previous
    /// one by its name).
    fn is_admitted(&self) -> bool {
        self.admitted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How what this node held of `segment` of `local` (of every segment it does not own,
    /// for `None`) is merged into the cluster after it was cut off: by the cache's merge
    /// policy when both sides may have taken writes (`ALLOW_READ_WRITES`). Otherwise this
    /// side accepted no write of its own, so nothing it holds may overwrite what the others
    /// hold — not even a copy with a higher version (one applied here but never
    /// acknowledged): where the others kept the segment, their copy is the truth, absences
    /// included — a key they removed meanwhile stays removed (`PREFERRED_ALWAYS`); only in a
    /// segment whose every owner was on this side, which the others lost
    /// (`CacheTopology::lost`), does what this node held fill in what the cluster lacks
    /// (`PREFERRED_NON_NULL`).
    fn merge_policy(
        &self,
        local: &weft_core::Cache,
        segment: Option<u32>,
    ) -> weft_core::MergePolicy {
        let handling = &local.config().partition_handling;
        if handling.when_split == weft_core::WhenSplit::AllowReadWrites {
            return handling.merge_policy;
        }
        match segment {
            Some(segment) if self.lost_segments(local.name()).contains(&segment) => {
                weft_core::MergePolicy::PreferredNonNull
            }
            _ => weft_core::MergePolicy::PreferredAlways,
        }
    }

    /// The segments of `cache` that lost every copy and were not merged back since, as
    /// agreed.
    fn lost_segments(&self, cache: &str) -> BTreeSet<u32> {
        self.state()
            .cache(cache)
            .map(|record| record.topology.lost().clone())
            .unwrap_or_default()
    }

    /// Tells the cluster that this node merged what it held of these lost `segments` of
    /// `cache` back: they are lost no more (see [`Node::merge_policy`]).
    async fn merged_lost(&self, cache: &str, segments: Vec<u32>) {
        if segments.is_empty() {
            return;
        }
        let command = Command::Merged {
            cache: cache.to_owned(),
            segments,
        };
        if let Err(error) = self.propose(command).await {
            tracing::warn!(cache, %error, "could not record segments merged back");
        }
    }

    /// The functions operations may invoke on this member; register the same ones on
    /// every member.
    #[must_use]
    pub fn functions(&self) -> &Arc<Functions> {
        &self.functions
    }

    /// The agreed members that failure detection does not see alive now (killed, cut off,
    /// or not yet removed from the members), by name.
    #[must_use]
    pub fn unreachable_members(&self) -> Vec<String> {
        let live: HashSet<String> = self
            .view
            .read()
            .iter()
            .map(|peer| peer.name.clone())
            .collect();
        let mut unreachable: Vec<String> = self
            .state()
            .nodes()
            .keys()
            .filter(|name| **name != self.me.name && !live.contains(*name))
            .cloned()
            .collect();
        unreachable.sort();
        unreachable
    }

    /// Cluster-wide events.
    #[must_use]
    pub fn events(&self) -> &crate::events::Events {
        &self.events
    }

    /// The caches this node holds.
    #[must_use]
    pub fn manager(&self) -> &CacheManager {
        &self.manager
    }

    /// This node's record.
    #[must_use]
    pub fn me(&self) -> &NodeRecord {
        &self.me
    }

    /// The transport.
    #[must_use]
    pub fn transport(&self) -> &Transport {
        &self.transport
    }

    /// The routing table.
    #[must_use]
    pub fn routing(&self) -> &Arc<Routing> {
        &self.routing
    }

    /// The agreed metadata.
    #[must_use]
    pub fn state(&self) -> Arc<ClusterState> {
        Arc::clone(&self.state.borrow())
    }

    /// The consensus leader's name, if known.
    #[must_use]
    pub fn coordinator(&self) -> Option<String> {
        let metrics = self.raft.metrics().borrow().clone();
        let leader = metrics.current_leader?;
        let state = self.state();
        state
            .nodes()
            .values()
            .find(|node| node.raft_id == leader)
            .map(|node| node.name.clone())
    }

    /// The segments of `cache` grouped by the member that serves their reads (this node for
    /// those it holds a copy of), or `None` when the cache has no installed topology.
    fn segments_by_reader(&self, cache: &str) -> Option<HashMap<MemberId, Vec<u32>>> {
        let route = self.routing.cache(cache)?;
        let me = MemberId(self.me.name.clone());
        let mut groups: HashMap<MemberId, Vec<u32>> = HashMap::new();
        for (segment, owners) in route.segments.iter().enumerate() {
            let reader = if owners.read.contains(&me) {
                me.clone()
            } else {
                owners.read.first().cloned().unwrap_or_else(|| me.clone())
            };
            groups
                .entry(reader)
                .or_default()
                .extend(u32::try_from(segment).ok());
        }
        Some(groups)
    }

    /// Asks every reader of `cache` for its part, concurrently.
    async fn gather(
        &self,
        cache: &str,
        ask: impl Fn(Vec<u32>) -> Request,
    ) -> crate::Result<Vec<(Vec<u32>, Option<Response>)>> {
        let groups = self
            .segments_by_reader(cache)
            .ok_or_else(|| crate::GridError::NoTopology(cache.to_owned()))?;
        let me = MemberId(self.me.name.clone());
        let mut calls = Vec::new();
        let mut parts = Vec::new();
        for (member, segments) in groups {
            if member == me {
                parts.push((segments, None));
                continue;
            }
            let node = self.routing.node(&member).ok_or_else(|| {
                crate::GridError::Cluster(format!("{member} left the cluster; retry"))
            })?;
            let request = ask(segments.clone());
            let transport = self.transport.clone();
            calls.push(async move {
                let answer = transport
                    .call(node.cluster_addr, request, CALL_TIMEOUT)
                    .await;
                (segments, member, answer)
            });
        }
        for (segments, member, answer) in futures_join(calls).await {
            match answer {
                Ok(Response::Error(reason)) => crate::error::bail!("{member}: {reason}"),
                Ok(answer) => parts.push((segments, Some(answer))),
                Err(error) => crate::error::bail!("{member}: {error}"),
            }
        }
        Ok(parts)
    }

    /// Entries in the whole cluster's copy of `cache`, each counted once.
    ///
    /// # Errors
    /// If a member could not be asked.
    pub async fn cluster_size(&self, cache: &weft_core::Cache) -> crate::Result<u64> {
        let name = cache.name().to_owned();
        let parts = self
            .gather(&name, |segments| Request::Size {
                cache: name.clone(),
                segments,
            })
            .await?;
        let mut total = 0;
        for (segments, answer) in parts {
            total += match answer {
                None => segments.iter().map(|&s| cache.segment_size(s) as u64).sum(),
                Some(Response::Count(count)) => count,
                Some(other) => crate::error::bail!("unexpected answer {other:?}"),
            };
        }
        Ok(total)
    }

    /// Every key of `cache` in the cluster, each once.
    ///
    /// # Errors
    /// If a member could not be asked.
    pub async fn cluster_keys(&self, cache: &weft_core::Cache) -> crate::Result<Vec<Vec<u8>>> {
        let name = cache.name().to_owned();
        let parts = self
            .gather(&name, |segments| Request::Keys {
                cache: name.clone(),
                segments,
            })
            .await?;
        let mut keys = Vec::new();
        for (segments, answer) in parts {
            match answer {
                None => keys.extend(cache.iter_segments(segments).map(|e| e.key().to_vec())),
                Some(Response::Keys(found)) => keys.extend(found),
                Some(other) => crate::error::bail!("unexpected answer {other:?}"),
            }
        }
        Ok(keys)
    }

    /// Removes every entry of `cache` on every member.
    ///
    /// # Errors
    /// If a member could not be reached.
    pub async fn cluster_clear(&self, cache: &weft_core::Cache) -> crate::Result<()> {
        cache.clear()?;
        self.clear_others(cache).await
    }

    /// Removes every entry of `cache` on every other member.
    ///
    /// # Errors
    /// If a member could not be reached.
    pub async fn clear_others(&self, cache: &weft_core::Cache) -> crate::Result<()> {
        let mut calls = Vec::new();
        for node in self.routing.nodes() {
            if node.name == self.me.name {
                continue;
            }
            let request = Request::Clear {
                cache: cache.name().to_owned(),
            };
            let transport = self.transport.clone();
            calls.push(async move {
                let answer = transport
                    .call(node.cluster_addr, request, CALL_TIMEOUT)
                    .await;
                (node.name, answer)
            });
        }
        for (name, answer) in futures_join(calls).await {
            match answer {
                Ok(Response::Ok) => {}
                Ok(other) => crate::error::bail!("{name}: {other:?}"),
                Err(error) => crate::error::bail!("{name}: {error}"),
            }
        }
        Ok(())
    }

    /// Whether this member serves every clustered cache the cluster defines: it is one of
    /// the agreed members, it routes each of those caches by an agreed topology, and it is
    /// fetching no segment (what it owns, it holds). A starting member is not ready until
    /// then, and a leaving one no longer is; see the server's readiness.
    #[must_use]
    pub fn serves(&self) -> bool {
        if self.routing.is_leaving() {
            return false;
        }
        let state = self.state();
        let admitted = state
            .node(&self.me.name)
            .is_some_and(|node| node.raft_id == self.me.raft_id);
        if !admitted || self.engine.lock().transferring_any() {
            return false;
        }
        state
            .caches()
            .keys()
            .all(|cache| self.routing.cache(cache).is_some())
    }

    /// Waits until this member routes `cache` by an agreed topology (it has joined and
    /// heard of the cache), at most `timeout`: a client that reached a starting member is
    /// answered, routed to the key's owner, instead of refused as not served yet. Returns
    /// whether it does. Quick when it does already.
    pub async fn wait_routed(&self, cache: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.routing.is_routed(cache) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// State-transfer progress per cache.
    #[must_use]
    pub fn transfer_progress(&self) -> BTreeMap<String, TransferProgress> {
        self.progress.lock().clone()
    }

    /// Runs the node's loops until shutdown.
    pub fn run(self: &Arc<Self>, shutdown: watch::Receiver<bool>) {
        tokio::spawn(crate::events::Events::announce(
            Arc::clone(self),
            shutdown.clone(),
        ));
        tokio::spawn(Arc::clone(self).watch_partitions(shutdown.clone()));
        tokio::spawn(Arc::clone(self).coordinate(shutdown.clone()));
        tokio::spawn(Arc::clone(self).watch_coordinator(shutdown.clone()));
        tokio::spawn(Arc::clone(self).react(shutdown));
    }

    /// Logs, by name, each change of coordinator (the consensus leader) this node sees:
    /// consensus' own log names nodes by their numeric ids only, and is off by default.
    /// Elections without a known leader in between are not logged; the leader they end
    /// with is.
    async fn watch_coordinator(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut metrics = self.raft.metrics();
        let mut logged: Option<String> = None;
        loop {
            // A leader a node has just heard of may not be in the agreed members yet (the
            // founding node, before its first entry applies): named once it is.
            if let Some(name) = self.coordinator()
                && logged.as_ref() != Some(&name)
            {
                match &logged {
                    None => tracing::info!(coordinator = %name, "cluster coordinator known"),
                    Some(was) => {
                        tracing::info!(coordinator = %name, previous = %was, "cluster coordinator changed")
                    }
                }
                logged = Some(name);
            }
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(TICK) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Leaves the cluster gracefully, in an order that loses no write:
    ///
    /// 1. this node stops ordering writes (they are refused as `NotOwner`, and their
    ///    senders route them again until the agreed topology names the next primary);
    /// 2. what it ordered reaches its backups ([`Replication::drain`]);
    /// 3. it asks the leader to take it out of the members and the consensus group, so that
    ///    the others neither wait for failure detection nor lose their quorum;
    /// 4. it follows the agreed state until that no longer names it — installing the
    ///    topologies its segments move in, so that what still reaches it is sent on, not
    ///    answered by a route frozen at the moment it decided to leave.
    ///
    /// Its loops (consensus, reactions to the agreed state, the cluster port) must run
    /// until this returns. Bounded: a node that cannot reach the leader just stops.
    pub async fn leave(&self) {
        self.routing.set_leaving();
        if !self.replication.drain(LEAVE_DRAIN_MAX).await {
            tracing::warn!(
                "changes this node ordered were not all acknowledged by their backups before it left"
            );
        }
        self.ask_to_leave().await;
        let mut state = self.state.clone();
        let departed = tokio::time::timeout(LEAVE_FOLLOW_MAX, async {
            loop {
                if state.borrow_and_update().node(&self.me.name).is_none() {
                    return;
                }
                if state.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        if departed.is_err() {
            tracing::debug!("left before this node applied the state without it");
        }
    }

    /// Before confirming the phase after which other members order writes of segments
    /// this one ordered: waits until every change it queued to a backup so far is
    /// acknowledged, twice over with a pause between, so that a write admitted just before the topology
    /// that stops it was installed, and queued just after the first wait began, is covered
    /// too. Bounded: a backup that does not answer holds the rebalance up no longer than
    /// [`HANDOVER_DRAIN_MAX`].
    async fn drain_for_handover(&self) {
        let drained = self.replication.settle_queued(HANDOVER_DRAIN_MAX).await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        if !(drained && self.replication.settle_queued(HANDOVER_DRAIN_MAX).await) {
            tracing::warn!(
                "changes this node ordered were not all acknowledged before it handed segments over"
            );
        }
    }

    /// Asks the leader (or, as the leader, itself) to release this node; see
    /// [`Node::leave`].
    async fn ask_to_leave(&self) {
        let request = Request::Leave {
            name: self.me.name.clone(),
            raft_id: self.me.raft_id,
        };
        let left = tokio::time::timeout(Duration::from_secs(3), async {
            for _ in 0..10 {
                let metrics = self.raft.metrics().borrow().clone();
                let others = metrics
                    .membership_config
                    .membership()
                    .nodes()
                    .any(|(id, _)| *id != self.me.raft_id);
                if !others {
                    return;
                }
                if metrics.current_leader == Some(self.me.raft_id) {
                    if self.release(&self.me.name, self.me.raft_id).await.is_ok() {
                        return;
                    }
                } else if let Some(leader) = self.leader_addr()
                    && let Ok(Response::Ok) = self
                        .transport
                        .call(leader, request.clone(), Duration::from_secs(2))
                        .await
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        if left.is_err() {
            tracing::warn!("could not leave the cluster gracefully; the others will detect it");
        }
    }

    /// Takes a node out of the members, then out of the consensus group (as leader).
    async fn release(&self, name: &str, raft_id: NodeId) -> crate::Result<()> {
        self.departed.lock().insert(raft_id);
        let state = self.state();
        if state.node(name).is_some() {
            let remaining: Vec<NodeRecord> = state
                .nodes()
                .values()
                .filter(|node| node.name != name)
                .cloned()
                .collect();
            self.propose(Command::Members(remaining)).await?;
        }
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership().clone();
        if membership.voter_ids().any(|id| id == raft_id) {
            self.raft
                .change_membership(
                    ChangeMembers::RemoveVoters(BTreeSet::from([raft_id])),
                    false,
                )
                .await?;
        } else if membership.nodes().any(|(id, _)| *id == raft_id) {
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([raft_id])), false)
                .await?;
        }
        // A coordinator that releases itself is stopping, and says so once, when its
        // membership leaves.
        if name == self.me.name {
            tracing::debug!(node = name, "released this node from the members");
        } else {
            tracing::info!(node = name, "member left the cluster");
        }
        Ok(())
    }

    /// The consensus leader's cluster address, when known.
    fn leader_addr(&self) -> Option<SocketAddr> {
        let metrics = self.raft.metrics().borrow().clone();
        let leader = metrics.current_leader?;
        metrics
            .membership_config
            .membership()
            .get_node(&leader)
            .and_then(|node| node.addr.parse().ok())
    }

    /// Stops consensus (the others elect a new leader if this one led).
    pub async fn stop(&self) {
        let _ = self.raft.shutdown().await;
    }

    // ---- coordination -------------------------------------------------------------------

    /// Decides, every tick and on every change of the failure detector's view, whether each
    /// cache is DEGRADED — in a loop of its own, so that nothing the coordination waits for
    /// (a proposal that a leader without a quorum can never commit) holds it back: a node
    /// cut off from the others degrades within the failure-detection time, leader or not.
    async fn watch_partitions(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            self.assess().await;
            self.follow_quorum().await;
            tokio::select! {
                () = tokio::time::sleep(TICK) => {}
                () = self.view_changed.notified() => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    async fn coordinate(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(TICK) => {}
                () = self.view_changed.notified() => {}
                _ = shutdown.changed() => return,
            }
            // A tick waits on consensus (proposals, membership changes), which a leader cut
            // off from its quorum never gets: bounded, so the next tick tries again.
            match tokio::time::timeout(TICK_TIMEOUT, self.tick()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::debug!(%error, "cluster coordination"),
                Err(_) => tracing::debug!("cluster coordination timed out (no consensus quorum?)"),
            }
        }
    }

    async fn tick(self: &Arc<Self>) -> crate::Result<()> {
        if self.routing.is_leaving() {
            // A leaving node defines nothing and leads nothing: as the coordinator it would
            // add itself back to the members it has just left (`Node::leave` releases it).
            return Ok(());
        }
        self.retry_rebalances();
        let peers: Vec<SocketAddr> = self.view.read().iter().map(|peer| peer.addr).collect();
        self.greet(&peers).await;
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership().clone();
        if membership.voter_ids().next().is_none() {
            return self.bootstrap(&peers).await;
        }
        if metrics.state == ServerState::Leader {
            self.lead(&peers).await?;
        }
        self.define_caches().await;
        Ok(())
    }

    /// Decides, per cache, whether this node is DEGRADED: it reaches no more than half of
    /// the members of its topology, or no owner of some segment. A node that was DEGRADED
    /// stays so until a reachable member confirms its topology is current (or a newer one
    /// arrives): back from a partition, it may hold a topology the others replaced.
    async fn assess(&self) {
        let mut live: HashSet<String> = self.view.read().iter().map(|p| p.name.clone()).collect();
        live.insert(self.me.name.clone());
        let state = self.state();
        for name in state.caches().keys() {
            let Some(route) = self.routing.cache(name) else {
                continue;
            };
            let reason = engine::degraded_reason(
                &route.topology.members(),
                route.segments.iter().map(|owners| owners.read.as_slice()),
                &|member| live.contains(&member.0),
            );
            let was = self.routing.degraded(name);
            if reason.is_none() && was.is_some() {
                // Back in touch: current only if a member of the majority has the same
                // topology.
                if !self.topology_confirmed(name, route.topology.id()).await {
                    continue;
                }
            }
            if self.routing.set_degraded(name, reason.clone()) {
                match &reason {
                    Some(reason) => tracing::warn!(cache = %name, %reason, "cache DEGRADED"),
                    None => tracing::info!(cache = %name, "cache available again"),
                }
            }
        }
    }

    /// What consensus does when this node is cut off from a majority of the voters, as
    /// Raft's check-quorum and pre-vote would have it (openraft 0.9 has neither):
    ///
    /// * A leader that has heard from no quorum for [`STEP_DOWN_AFTER`] steps down, so that
    ///   it stops taking proposals it can never commit (they fail and are sent elsewhere
    ///   instead of waiting for ever) and stops naming itself coordinator. It does so by
    ///   granting a vote, at the next term, to a candidate that does not exist (node id 0;
    ///   every member's is odd, see `raft_id`): openraft then makes it a follower, as a real
    ///   candidate's vote would. The vote commits it to no real candidate (every one the
    ///   majority elects at that term or later ranks above it) and leaves its log alone.
    /// * A node — leader or not — that sees no majority of the voters does not campaign:
    ///   its elections could not win, and the terms they raised would depose the majority's
    ///   leader the moment the partition heals.
    async fn follow_quorum(&self) {
        let metrics = self.raft.metrics().borrow().clone();
        let voters: Vec<NodeId> = metrics.membership_config.membership().voter_ids().collect();
        if voters.len() < 2 {
            self.raft.runtime_config().elect(true);
            return;
        }
        let mut in_view: HashSet<String> = self
            .view
            .read()
            .iter()
            .map(|peer| peer.name.clone())
            .collect();
        in_view.insert(self.me.name.clone());
        let state = self.state();
        let reachable = voters
            .iter()
            .filter(|&&voter| {
                voter == self.me.raft_id
                    || state
                        .nodes()
                        .values()
                        .any(|node| node.raft_id == voter && in_view.contains(&node.name))
            })
            .count();
        self.raft
            .runtime_config()
            .elect(reachable * 2 > voters.len());
        if metrics.state != ServerState::Leader {
            return;
        }
        let Some(silent_ms) = metrics.millis_since_quorum_ack else {
            return;
        };
        if u128::from(silent_ms) < STEP_DOWN_AFTER.as_millis() {
            return;
        }
        let last_log = self.raft.data_metrics().borrow().last_log;
        let nobody = openraft::raft::VoteRequest::new(
            openraft::Vote::new(metrics.current_term + 1, NO_CANDIDATE),
            last_log,
        );
        match self.raft.vote(nobody).await {
            Ok(answer) if answer.vote_granted => tracing::warn!(
                silent_ms,
                term = metrics.current_term,
                "stepped down as coordinator: no quorum of the voters answered"
            ),
            // Refused while its own lease runs: tried again next tick.
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "could not step down"),
        }
    }

    /// Whether a reachable member of the topology has installed topology `id` of `cache`.
    async fn topology_confirmed(&self, cache: &str, id: u32) -> bool {
        let view: Vec<SocketAddr> = self.view.read().iter().map(|p| p.addr).collect();
        for peer in view {
            let answer = self
                .transport
                .call(
                    peer,
                    Request::TopologyId {
                        cache: cache.to_owned(),
                    },
                    Duration::from_secs(1),
                )
                .await;
            if let Ok(Response::Count(theirs)) = answer {
                return u64::from(id) == theirs;
            }
        }
        false
    }

    /// Asks every live peer not yet known who it is.
    async fn greet(&self, peers: &[SocketAddr]) {
        for &peer in peers {
            let known = self
                .hellos
                .lock()
                .get(&peer)
                .is_some_and(|hello| hello.initialized && hello.at.elapsed() < HELLO_TTL);
            if known {
                continue;
            }
            let answer = self
                .transport
                .call(
                    peer,
                    Request::Hello(self.me.clone()),
                    Duration::from_secs(1),
                )
                .await;
            if let Ok(Response::Hello { node, initialized }) = answer {
                self.hellos.lock().insert(
                    peer,
                    Hello {
                        node,
                        initialized,
                        at: Instant::now(),
                    },
                );
            }
        }
        let live: HashSet<SocketAddr> = peers.iter().copied().collect();
        self.hellos.lock().retain(|addr, _| live.contains(addr));
    }

    /// No consensus group yet: found one if nobody else has and this node's name comes
    /// first among the live ones, after giving the others time to show up.
    async fn bootstrap(&self, peers: &[SocketAddr]) -> crate::Result<()> {
        if self.started.elapsed() < BOOTSTRAP_DELAY {
            return Ok(());
        }
        let hellos = self.hellos.lock().clone();
        if hellos.values().any(|hello| hello.initialized) {
            // A group exists: its leader adds this node.
            return Ok(());
        }
        if hellos.len() < peers.len() {
            // Not everyone answered yet.
            return Ok(());
        }
        if hellos.values().any(|hello| hello.node.name < self.me.name) {
            return Ok(());
        }
        let members = BTreeMap::from([(self.me.raft_id, basic(&self.me))]);
        match self.raft.initialize(members).await {
            Ok(()) => tracing::info!(node = %self.me.name, "founded the cluster"),
            Err(error) => tracing::debug!(%error, "initialize"),
        }
        Ok(())
    }

    /// The leader's duties: consensus membership follows failure detection, and the agreed
    /// member list follows consensus membership.
    async fn lead(&self, peers: &[SocketAddr]) -> crate::Result<()> {
        let live: Vec<NodeRecord> = {
            let hellos = self.hellos.lock();
            let departed = self.departed.lock();
            let mut live: Vec<NodeRecord> = peers
                .iter()
                .filter_map(|peer| hellos.get(peer).map(|hello| hello.node.clone()))
                .filter(|node| !departed.contains(&node.raft_id))
                .collect();
            live.push(self.me.clone());
            live
        };
        let live_ids: BTreeSet<NodeId> = live.iter().map(|node| node.raft_id).collect();
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership().clone();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let known: BTreeSet<NodeId> = membership.nodes().map(|(id, _)| *id).collect();
        // No change of membership without a majority of the voters in sight: it could not
        // commit now, and the entry left in this leader's log would commit when the
        // partition heals — dropping, from a view long out of date, the very nodes it heals
        // with (their segments' last copies included).
        if live_ids.intersection(&voters).count() * 2 <= voters.len() {
            return Ok(());
        }
        // New nodes become learners first.
        for node in &live {
            if !known.contains(&node.raft_id) {
                tracing::info!(node = %node.name, "adding to the cluster");
                self.raft
                    .add_learner(node.raft_id, basic(node), false)
                    .await?;
                return Ok(());
            }
        }
        // Gone nodes leave the group.
        let dead_voters: BTreeSet<NodeId> = voters.difference(&live_ids).copied().collect();
        if !dead_voters.is_empty() && voters.len() > dead_voters.len() {
            self.raft
                .change_membership(ChangeMembers::RemoveVoters(dead_voters), false)
                .await?;
            return Ok(());
        }
        let dead: BTreeSet<NodeId> = known
            .difference(&live_ids)
            .filter(|id| !voters.contains(id))
            .copied()
            .collect();
        if !dead.is_empty() {
            self.raft
                .change_membership(ChangeMembers::RemoveNodes(dead), false)
                .await?;
            return Ok(());
        }
        // Up to three voters, from learners that caught up.
        let last = metrics.last_log_index.unwrap_or(0);
        let caught_up: BTreeSet<NodeId> = metrics
            .replication
            .as_ref()
            .map(|replication| {
                replication
                    .iter()
                    .filter(|(id, matched)| {
                        !voters.contains(id)
                            && live_ids.contains(id)
                            && matched.is_some_and(|m| m.index + 10 >= last)
                    })
                    .map(|(id, _)| *id)
                    .collect()
            })
            .unwrap_or_default();
        if voters.len() < VOTERS
            && let Some(&promote) = caught_up.iter().next()
        {
            self.raft
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([promote])), false)
                .await?;
            return Ok(());
        }
        // The agreed members: the live nodes the group replicates to.
        let state = self.state();
        let agreed: Vec<NodeRecord> = live
            .into_iter()
            .filter(|node| known.contains(&node.raft_id))
            .collect();
        let same = agreed.len() == state.nodes().len()
            && agreed
                .iter()
                .all(|node| state.node(&node.name) == Some(node));
        if !same {
            tracing::info!(members = ?agreed.iter().map(|n| &n.name).collect::<Vec<_>>(), "cluster members changed");
            self.propose(Command::Members(agreed)).await?;
        }
        Ok(())
    }

    /// Proposes this node's clustered caches that the cluster does not define yet.
    async fn define_caches(&self) {
        let state = self.state();
        if !state.nodes().contains_key(&self.me.name) {
            return;
        }
        // A forming cluster defines its caches once every node in sight is a member (or a
        // while has passed): all of them are then owners from the start, so a cluster
        // restarted whole keeps what each node stored, where the hash puts it again.
        let in_sight = self.view.read().len() + 1;
        if state.nodes().len() < in_sight && self.started.elapsed() < FORMATION_WAIT_MAX {
            return;
        }
        for (name, config) in &self.configured {
            if state.cache(name).is_some() || self.configured_done.lock().contains(name) {
                continue;
            }
            if let Err(error) = self.define(name, config).await {
                tracing::warn!(cache = %name, %error, "could not define the clustered cache");
            }
        }
    }

    /// Defines a clustered cache on every node, and waits until this node created it.
    /// Returns false, without proposing anything, when the cluster defines a cache by that
    /// name already (whatever its configuration).
    ///
    /// # Errors
    /// If the cluster refused it (a concurrent other definition) or could not be reached, or
    /// this node did not create it within `APPLIED_WAIT_MAX`.
    pub async fn create_cache(&self, name: &str, config: &CacheConfig) -> crate::Result<bool> {
        let created = self.state().cache(name).is_none() && self.define(name, config).await?;
        // The definition is agreed; this node creates the cache when it applies it.
        let deadline = Instant::now() + APPLIED_WAIT_MAX;
        while self.manager.cache(name).is_none() {
            if Instant::now() >= deadline {
                crate::error::bail!("cache `{name}` was defined but not created here in time");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(created)
    }

    /// Removes a clustered cache from every node, and waits until this node removed it.
    /// Returns false when there was no such cache. A clustered cache this node has but the
    /// cluster does not define yet (one from its configuration, while the cluster forms) is
    /// removed here only.
    ///
    /// # Errors
    /// If the cluster could not be reached, or this node did not remove the cache within
    /// `APPLIED_WAIT_MAX`.
    pub async fn remove_cache(&self, name: &str) -> crate::Result<bool> {
        self.configured_done.lock().insert(name.to_owned());
        let outcome = self
            .propose(Command::RemoveCache {
                name: name.to_owned(),
            })
            .await?;
        if outcome.refused.is_some() {
            // The only refusal of a removal: the cluster has no such cache.
            return Ok(self.manager.remove_cache(name));
        }
        let deadline = Instant::now() + APPLIED_WAIT_MAX;
        while self.manager.cache(name).is_some() {
            if Instant::now() >= deadline {
                crate::error::bail!("cache `{name}` was removed but is still here");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(true)
    }

    /// Defines a clustered cache on every node; returns whether the definition is new (false
    /// when the cluster defines it alike already).
    ///
    /// # Errors
    /// If the cluster refused it (another definition) or could not be reached.
    pub async fn define(&self, name: &str, config: &CacheConfig) -> crate::Result<bool> {
        let mode = match config.mode {
            weft_core::CacheMode::Replicated => Mode::Replicated,
            _ => Mode::Distributed {
                owners: config.owners as usize,
            },
        };
        let outcome = self
            .propose(Command::DefineCache {
                name: name.to_owned(),
                config: serde_json::to_string(config)?,
                mode,
                segments: config.segments,
            })
            .await?;
        match outcome.refused {
            Some(reason) => crate::error::bail!("{reason}"),
            None => Ok(outcome.changed),
        }
    }

    /// Has the group apply `command`, through the leader wherever it is.
    ///
    /// # Errors
    /// If no leader could take it.
    pub async fn propose(&self, command: Command) -> crate::Result<Outcome> {
        for _ in 0..50 {
            match self.raft.client_write(command.clone()).await {
                Ok(written) => return Ok(written.data),
                Err(error) => {
                    let leader = error
                        .forward_to_leader::<BasicNode>()
                        .and_then(|forward| forward.leader_node.clone())
                        .and_then(|node| node.addr.parse::<SocketAddr>().ok());
                    let Some(leader) = leader else {
                        if error.forward_to_leader::<BasicNode>().is_none() {
                            crate::error::bail!("consensus refused the change: {error}");
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    };
                    let body = serde_json::to_vec(&command)?;
                    match self
                        .transport
                        .call(leader, Request::Propose(body), CALL_TIMEOUT)
                        .await
                    {
                        Ok(Response::Raft(outcome)) => {
                            return Ok(serde_json::from_slice(&outcome)?);
                        }
                        Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            }
        }
        crate::error::bail!("no consensus leader accepted the change")
    }

    // ---- reacting to the agreed state ---------------------------------------------------

    async fn react(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut state = self.state.clone();
        loop {
            let current = Arc::clone(&state.borrow_and_update());
            self.install(&current);
            tokio::select! {
                changed = state.changed() => if changed.is_err() { return },
                _ = shutdown.changed() => return,
            }
        }
    }

    /// Milliseconds since this node started: the engine's clock.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Carries out what the engine decides about a newly agreed `state`.
    fn install(self: &Arc<Self>, state: &ClusterState) {
        let effects = {
            let mut engine = self.engine.lock();
            let effects = engine.on_state(state, self.now_ms(), &Held(&self.manager));
            self.admitted
                .store(engine.admitted(), std::sync::atomic::Ordering::SeqCst);
            effects
        };
        self.carry_out(state, effects);
        // Seen defined in an agreed state (every state passes here, the reconciliation ticks
        // see only some): if it is removed later, this node must not define it again.
        self.configured_done.lock().extend(
            self.configured
                .iter()
                .filter(|(name, _)| state.cache(name).is_some())
                .map(|(name, _)| name.clone()),
        );
    }

    /// Does what the engine decided, in order. A cache that could not be created is left
    /// alone for the rest of the batch (the engine tries again with the next state).
    fn carry_out(self: &Arc<Self>, state: &ClusterState, effects: Vec<Effect>) {
        let me = MemberId(self.me.name.clone());
        let mut failed: HashSet<String> = HashSet::new();
        let leaving = self.routing.is_leaving();
        for effect in effects {
            match effect {
                // A leaving node takes over nothing and takes no part in moving segments: it
                // follows the agreed state only to route what still reaches it (and its
                // proposals would race the consensus it is about to stop).
                Effect::Transfer { .. } | Effect::Propose(_) | Effect::Merge { .. } if leaving => {
                    tracing::debug!("leaving: a transfer, merge or proposal not carried out");
                }
                Effect::Fence => {
                    if self.routing.is_leaving() {
                        tracing::debug!("this node is out of the agreed members");
                    } else {
                        tracing::warn!(
                            "this node was dropped from the cluster; writes in flight fail"
                        );
                    }
                    self.replication.fence();
                }
                Effect::Members => {
                    self.routing.set_nodes(state.nodes().values().cloned());
                    // Requests about the data go to the processes the agreed members name,
                    // and to no other process listening at their addresses.
                    self.transport.expect(
                        state
                            .nodes()
                            .values()
                            .filter(|node| node.name != self.me.name)
                            .map(|node| (node.cluster_addr, node.raft_id)),
                    );
                    let names: Vec<MemberId> = state
                        .nodes()
                        .keys()
                        .map(|name| MemberId(name.clone()))
                        .collect();
                    self.replication.members_changed(&names);
                }
                Effect::Available { cache } => {
                    self.rejoined.lock().insert(cache.clone());
                    if self.routing.set_degraded(&cache, None) {
                        tracing::info!(cache = %cache, "cache available again: re-admitted to the cluster");
                    }
                }
                Effect::Create { cache } => {
                    let created = state
                        .cache(&cache)
                        .ok_or_else(|| "no longer defined".to_owned())
                        .and_then(|record| {
                            CacheConfig::from_json(&cache, &record.config)
                                .map_err(|e| e.to_string())
                        })
                        .and_then(|config| {
                            self.manager
                                .create_cache(&cache, config)
                                .map_err(|e| e.to_string())
                        });
                    match created {
                        Ok(_) => {
                            self.removed.lock().remove(&cache);
                            tracing::info!(cache = %cache, "created clustered cache");
                        }
                        Err(error) => {
                            tracing::warn!(cache = %cache, %error, "cannot create clustered cache");
                            self.engine.lock().not_created(&cache);
                            failed.insert(cache);
                        }
                    }
                }
                Effect::Discard { cache } if !failed.contains(&cache) => {
                    self.discard_stored(&cache);
                }
                Effect::Route {
                    cache,
                    topology,
                    exclude_me,
                } if !failed.contains(&cache) => {
                    let mut route = CacheRoute::new(topology.clone());
                    if exclude_me {
                        route.exclude(&me);
                    }
                    route.reads_any_owner |= self
                        .manager
                        .cache(&cache)
                        .is_some_and(|local| local.config().reads == weft_core::Reads::AnyOwner);
                    let route = Arc::new(route);
                    // A fetched segment stays good only while this node keeps receiving its
                    // writes; once the move ends, nothing is pending. Installed under the
                    // same lock a transfer records a fetched segment under, so that a fetch
                    // that ends as this route comes in is judged by it (`Node::transfer`).
                    let mut fetched = self.fetched.lock();
                    if let Some(done) = fetched.get_mut(&cache) {
                        if topology.phase() == Phase::Stable {
                            done.clear();
                        } else {
                            done.retain(|&segment| {
                                route
                                    .segment(segment)
                                    .is_some_and(|owners| owners.write.contains(&me))
                            });
                        }
                    }
                    self.routing.install(&cache, route);
                    drop(fetched);
                    tracing::info!(cache = %cache, topology = topology.id(), phase = ?topology.phase(), "installed topology");
                }
                Effect::Transfer {
                    cache,
                    rebalance,
                    segments,
                } if !failed.contains(&cache) => self.start_transfer(cache, rebalance, segments),
                Effect::Propose(command) => {
                    let node = Arc::clone(self);
                    tokio::spawn(async move {
                        if matches!(
                            command,
                            Command::Confirm {
                                phase: weft_cluster::topology::Phase::ReadAllWriteAll,
                                ..
                            }
                        ) {
                            // The primaries change at the next phase. This member takes no
                            // new write of the segments it hands over (`SegmentRoute::
                            // hands_over`); what it ordered must reach every owner first,
                            // or the owners would refuse it from a member that no longer
                            // orders it, and its writes would fail after they ran.
                            node.drain_for_handover().await;
                        }
                        if let Err(error) = node.propose(command).await {
                            tracing::warn!(%error, "could not confirm a rebalance phase");
                        }
                    });
                }
                Effect::Merge { cache, merge, hash } if !failed.contains(&cache) => {
                    self.start_reconcile(cache, merge, hash);
                }
                Effect::DropUnowned { cache, hash } if !failed.contains(&cache) => {
                    self.drop_unowned(&cache, &hash);
                }
                Effect::Remove { cache } => {
                    // Removed with its data and everything this node remembers of its
                    // rebalances: a cache defined again by the same name starts empty.
                    self.routing.uninstall(&cache);
                    self.routing.set_degraded(&cache, None);
                    self.fetched.lock().remove(&cache);
                    self.progress.lock().remove(&cache);
                    self.removed.lock().insert(cache.clone());
                    if self.manager.remove_cache(&cache) {
                        tracing::info!(cache = %cache, "removed clustered cache");
                    }
                }
                Effect::Discard { .. }
                | Effect::Route { .. }
                | Effect::Transfer { .. }
                | Effect::Merge { .. }
                | Effect::DropUnowned { .. } => {}
            }
        }
    }

    /// Fetches `segments` of `cache` in a task of its own, then tells the engine how it
    /// ended.
    fn start_transfer(self: &Arc<Self>, cache: String, rebalance: u32, segments: engine::Sources) {
        let node = Arc::clone(self);
        tokio::spawn(async move {
            let complete = node.transfer(&cache, rebalance, segments).await;
            let state = node.state();
            let effects =
                node.engine
                    .lock()
                    .transfer_finished(&cache, rebalance, complete, node.now_ms());
            node.carry_out(&state, effects);
        });
    }

    /// Makes sure a rebalance this node takes part in moves on: its transfer runs (again,
    /// if it failed), its confirmation reaches the leader (again, if lost).
    fn retry_rebalances(self: &Arc<Self>) {
        let state = self.state();
        let effects = self.engine.lock().on_tick(&state, self.now_ms());
        self.carry_out(&state, effects);
    }

    /// Merges what this node holds of `cache` into the cluster, then drops the segments it
    /// does not own. [`Merge::All`] (a cluster formed anew from stores): every entry whose
    /// primary is another member goes to it, which keeps it unless it holds the same or a
    /// newer version — after a cluster restarted whole, every key ends up with its newest
    /// stored version where the hash now puts it. [`Merge::Unowned`] (back from a partition):
    /// the entries of segments this node no longer owns go by the cache's merge policy —
    /// `NONE` as above, `PREFERRED_NON_NULL` only where the key holds nothing;
    /// `PREFERRED_ALWAYS` and `REMOVE_ALL` keep the other side's, so nothing is sent.
    fn start_reconcile(
        self: &Arc<Self>,
        cache: String,
        merge: Merge,
        hash: weft_cluster::ConsistentHash,
    ) {
        let node = Arc::clone(self);
        tokio::spawn(async move {
            let Some(local) = node.manager.cache(&cache) else {
                return;
            };
            let me = MemberId(node.me.name.clone());
            let mut segments: Vec<u32> = (0..local.segment_count())
                .filter(|&s| merge == Merge::All || !hash.owner_ids(s as usize).contains(&&me))
                .collect();
            let splits_deny = local.config().partition_handling.when_split
                != weft_core::WhenSplit::AllowReadWrites;
            let how = match (merge, node.merge_policy(&local, None)) {
                (Merge::All, _) | (Merge::Unowned, weft_core::MergePolicy::None) => {
                    MergeHow::Newest
                }
                // This side took no writes: only segments the others lost are filled in.
                (Merge::Unowned, _) if splits_deny => {
                    let lost = node.lost_segments(&cache);
                    segments.retain(|segment| lost.contains(segment));
                    if segments.is_empty() {
                        node.drop_unowned(&cache, &hash);
                        return;
                    }
                    MergeHow::IfAbsent
                }
                (Merge::Unowned, weft_core::MergePolicy::PreferredNonNull) => MergeHow::IfAbsent,
                (Merge::Unowned, weft_core::MergePolicy::RemoveAll) => MergeHow::RemoveIfDifferent,
                (Merge::Unowned, weft_core::MergePolicy::PreferredAlways) => {
                    node.drop_unowned(&cache, &hash);
                    return;
                }
            };
            let filled = if splits_deny && merge == Merge::Unowned {
                segments.clone()
            } else {
                Vec::new()
            };
            tracing::info!(cache = %cache, segments = segments.len(), ?merge, "merging what this node holds into the cluster");
            let mut sent = 0u64;
            for segment in segments {
                let entries: Vec<EntryImage> = local
                    .iter_segments(vec![segment])
                    .map(|entry| EntryImage::of(&entry))
                    .collect();
                for chunk in entries.chunks(1_000) {
                    match node.reconcile_chunk(&cache, segment, chunk, how).await {
                        Ok(count) => sent += count,
                        Err(error) => {
                            tracing::warn!(cache = %cache, segment, %error, "could not merge entries into the cluster");
                        }
                    }
                }
            }
            node.drop_unowned(&cache, &hash);
            tracing::info!(cache = %cache, sent, "merged what this node held into the cluster");
            node.merged_lost(&cache, filled).await;
        });
    }

    /// Sends one chunk of stored entries of `segment` to its primary (nothing when this node
    /// is the primary); returns how many were sent. Retries while the primary moves.
    async fn reconcile_chunk(
        &self,
        cache: &str,
        segment: u32,
        entries: &[EntryImage],
        how: MergeHow,
    ) -> crate::Result<u64> {
        for _ in 0..50 {
            let super::routing::Route::Remote(member, addr) =
                self.routing.write_route(cache, segment)
            else {
                return Ok(0);
            };
            let request = Request::Reconcile {
                cache: cache.to_owned(),
                segment,
                entries: entries.to_vec(),
                how,
            };
            match self.transport.call(addr, request, CALL_TIMEOUT).await {
                Ok(Response::Ok) => return Ok(entries.len() as u64),
                Ok(Response::Error(reason)) => crate::error::bail!("{member}: {reason}"),
                Ok(_) | Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        crate::error::bail!("no primary took the entries")
    }

    /// Empties `cache` here only (memory and stores): what it holds was stored before the
    /// cluster went on without this node.
    fn discard_stored(&self, cache: &str) {
        let Some(local) = self.manager.cache(cache) else {
            return;
        };
        let all: Vec<u32> = (0..local.segment_count()).collect();
        let held = local.drop_segments(&all);
        if held > 0 {
            tracing::info!(
                cache,
                entries = held,
                "discarded what this node stored before it rejoined; its segments come from the cluster"
            );
        }
    }

    /// Drops the segments this node no longer owns.
    fn drop_unowned(&self, cache: &str, hash: &weft_cluster::ConsistentHash) {
        let Some(local) = self.manager.cache(cache) else {
            return;
        };
        let me = MemberId(self.me.name.clone());
        let unowned: Vec<u32> = (0..hash.segment_count())
            .filter(|&s| !hash.owner_ids(s).contains(&&me))
            .filter_map(|s| u32::try_from(s).ok())
            .collect();
        // Each node's stores hold what it owns: the copies go from them too (forgotten, not
        // removed: the owners keep theirs).
        let dropped = local.drop_segments(&unowned);
        if dropped > 0 {
            tracing::info!(
                cache,
                dropped,
                "dropped entries of segments no longer owned"
            );
        }
    }

    /// Fetches `segments` of `cache` from their current owners, then confirms the phase.
    async fn transfer(
        self: &Arc<Self>,
        cache: &str,
        rebalance_id: u32,
        segments: engine::Sources,
    ) -> bool {
        let Some(local) = self.manager.cache(cache) else {
            return false;
        };
        self.progress.lock().insert(
            cache.to_owned(),
            TransferProgress {
                segments_total: segments.len() as u64,
                ..TransferProgress::default()
            },
        );
        if !segments.is_empty() {
            tracing::info!(cache, segments = segments.len(), "state transfer starting");
        }
        for (segment, sources) in segments {
            let already = self
                .fetched
                .lock()
                .get(cache)
                .is_some_and(|done| done.contains(&segment));
            if already {
                // Fetched in a rebalance this one restarted, and kept up to date since.
                if let Some(progress) = self.progress.lock().get_mut(cache) {
                    progress.segments_done += 1;
                }
                continue;
            }
            let fetch_id = self.fetch_started(cache, segment);
            if sources.is_empty() {
                // Every copy left with its owners: the segment starts empty here.
                tracing::error!(
                    cache,
                    segment,
                    "no member holds the segment any more; its entries are lost"
                );
                self.fetch_ended(cache, segment, fetch_id);
                if let Some(progress) = self.progress.lock().get_mut(cache) {
                    progress.segments_done += 1;
                }
                continue;
            }
            let mut done = false;
            for source in sources {
                if self.routing_stale(cache, rebalance_id) {
                    self.fetch_ended(cache, segment, fetch_id);
                    return false;
                }
                match self
                    .fetch(cache, rebalance_id, segment, fetch_id, &source, &local)
                    .await
                {
                    Ok(()) => {
                        done = true;
                        break;
                    }
                    Err(error) => {
                        tracing::warn!(cache, segment, source = %source, %error, "segment fetch failed; trying another owner");
                    }
                }
            }
            self.fetch_ended(cache, segment, fetch_id);
            if !done {
                // Every owner is gone: the membership change restarts the rebalance.
                tracing::warn!(cache, segment, "no owner could send the segment");
                return false;
            }
            {
                // Remembered as fetched (a restarted rebalance skips it) only if no newer
                // rebalance was installed meanwhile: one that came while the fetch ran may
                // have taken the segment's writes away from this node (for a moment, or
                // for good) before the route now installed gave them back, and the copy
                // then misses them; the newer rebalance's transfer fetches it again.
                let mut fetched = self.fetched.lock();
                let me = MemberId(self.me.name.clone());
                let still_fed = self.routing.cache(cache).is_some_and(|route| {
                    route.topology.rebalance_id() == rebalance_id
                        && route.topology.phase() != Phase::Stable
                        && route
                            .segment(segment)
                            .is_some_and(|owners| owners.write.contains(&me))
                });
                if still_fed {
                    fetched.entry(cache.to_owned()).or_default().insert(segment);
                }
            }
            if let Some(progress) = self.progress.lock().get_mut(cache) {
                progress.segments_done += 1;
            }
        }
        true
    }

    /// A fetch of `segment` of `cache` begins: from now on replication records the keys it
    /// changes for it. Its id.
    fn fetch_started(&self, cache: &str, segment: u32) -> u64 {
        let id = self
            .fetch_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.touched
            .lock()
            .entry((cache.to_owned(), segment))
            .or_default()
            .push((id, HashSet::new()));
        id
    }

    /// The fetch `id` of `segment` of `cache` ended: its touched keys are forgotten.
    fn fetch_ended(&self, cache: &str, segment: u32, id: u64) {
        let mut touched = self.touched.lock();
        let key = (cache.to_owned(), segment);
        if let Some(fetches) = touched.get_mut(&key) {
            fetches.retain(|(fetch, _)| *fetch != id);
            if fetches.is_empty() {
                touched.remove(&key);
            }
        }
    }

    /// Whether a newer rebalance replaced `rebalance_id`.
    fn routing_stale(&self, cache: &str, rebalance_id: u32) -> bool {
        self.routing
            .cache(cache)
            .is_none_or(|route| route.topology.rebalance_id() != rebalance_id)
    }

    /// Fetches `segment` of `cache` for rebalance `rebalance` from `source` (its primary),
    /// page by page in key order, and merges it into this member's copy: entries written
    /// here by replication since the fetch began win over the pages (they are newer).
    async fn fetch(
        &self,
        cache: &str,
        rebalance: u32,
        segment: u32,
        fetch_id: u64,
        source: &MemberId,
        local: &weft_core::Cache,
    ) -> crate::Result<()> {
        let node = self
            .routing
            .node(source)
            .ok_or_else(|| crate::GridError::Cluster(format!("{source} is not a member")))?;
        let policy = self.merge_policy(local, Some(segment));
        let fills_lost = policy == weft_core::MergePolicy::PreferredNonNull
            && local.config().partition_handling.when_split
                != weft_core::WhenSplit::AllowReadWrites;
        // What this node held of the segment before: after a partition, entries the
        // preferred side (the one that kept the cluster) no longer has, or has otherwise.
        let mut held: HashMap<Vec<u8>, weft_core::CacheEntry> = local
            .iter_segments(vec![segment])
            .map(|entry| (entry.key().to_vec(), entry))
            .collect();
        let touched = |key: &[u8]| {
            self.touched
                .lock()
                .get(&(cache.to_owned(), segment))
                .and_then(|fetches| fetches.iter().find(|(id, _)| *id == fetch_id))
                .is_some_and(|(_, keys)| keys.contains(key))
        };
        let mut conflicts = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let answer = self
                .transport
                .call(
                    node.cluster_addr,
                    Request::Fetch {
                        cache: cache.to_owned(),
                        segment,
                        rebalance,
                        after: after.clone(),
                        limit: self.chunk_entries,
                    },
                    FETCH_TIMEOUT,
                )
                .await?;
            let (entries, done) = match answer {
                Response::Entries { entries, done } => (entries, done),
                Response::NotOwner { owner } => crate::error::bail!(
                    "{source} does not order the segment's writes in rebalance {rebalance} (its primary: {owner:?})"
                ),
                Response::Error(reason) => crate::error::bail!("{reason}"),
                other => crate::error::bail!("unexpected answer {other:?}"),
            };
            if let Some(last) = entries.last() {
                after = Some(last.key.clone());
            }
            let count = entries.len() as u64;
            if self.fetch_rate > 0 {
                // Throttle: this chunk's bytes at the configured rate.
                let bytes: u64 = entries
                    .iter()
                    .map(|e| (e.key.len() + e.value.len() + 48) as u64)
                    .sum();
                let pause = Duration::from_secs_f64(bytes as f64 / self.fetch_rate as f64);
                if pause > Duration::from_millis(1) {
                    tokio::time::sleep(pause).await;
                }
            }
            for image in entries {
                let mine = held.remove(&image.key);
                if touched(&image.key) {
                    continue;
                }
                let entry = image.to_entry()?;
                let change = match (policy, mine) {
                    (weft_core::MergePolicy::None, _) => RemoteChange::PutIfNewer(entry),
                    (weft_core::MergePolicy::RemoveAll, Some(mine))
                        if EntryImage::of(&mine).value != image.value =>
                    {
                        conflicts.push(image.key.clone());
                        RemoteChange::Remove
                    }
                    _ => RemoteChange::Put(entry),
                };
                applying_remote(|| local.apply_remote(&image.key, change))?;
            }
            if let Some(progress) = self.progress.lock().get_mut(cache) {
                progress.entries += count;
            }
            if done {
                break;
            }
        }
        // Entries only this node held.
        let held_only_empty = held.is_empty();
        let mut removed = 0u64;
        for (key, entry) in held {
            if touched(&key) {
                continue;
            }
            match policy {
                weft_core::MergePolicy::PreferredAlways | weft_core::MergePolicy::RemoveAll => {
                    applying_remote(|| local.apply_remote(&key, RemoteChange::Remove))?;
                    removed += 1;
                }
                weft_core::MergePolicy::None | weft_core::MergePolicy::PreferredNonNull => {
                    // The preferred side has none: this node's entry goes to the cluster
                    // through the key's primary (NONE: unless it holds a newer version;
                    // PREFERRED_NON_NULL: unless it holds one at all).
                    let how = if policy == weft_core::MergePolicy::PreferredNonNull {
                        MergeHow::IfAbsent
                    } else {
                        MergeHow::Newest
                    };
                    match self.routing.write_route(cache, segment) {
                        super::routing::Route::Remote(..) => {
                            let image = [EntryImage::of(&entry)];
                            self.reconcile_chunk(cache, segment, &image, how).await?;
                        }
                        // This node orders the key's writes: its copy goes to the backups.
                        super::routing::Route::Local => {
                            local.apply_remote(&key, RemoteChange::Put(entry))?;
                        }
                    }
                }
            }
        }
        // REMOVE_ALL: an entry that differed is removed everywhere, through its primary.
        for key in conflicts {
            match self.routing.write_route(cache, segment) {
                super::routing::Route::Remote(_, addr) => {
                    let remove = Request::Remove {
                        cache: cache.to_owned(),
                        key,
                    };
                    self.transport.call(addr, remove, CALL_TIMEOUT).await?;
                }
                // This node orders the key's writes: the removal goes to the backups.
                super::routing::Route::Local => {
                    local.apply_remote(&key, RemoteChange::Remove)?;
                }
            }
        }
        if removed > 0 {
            tracing::info!(
                cache,
                segment,
                source = %source,
                removed,
                "removed entries of a fetched segment its primary does not hold"
            );
        }
        if fills_lost && !held_only_empty && self.rejoined.lock().contains(cache) {
            self.merged_lost(cache, vec![segment]).await;
        }
        Ok(())
    }

    // ---- answering ----------------------------------------------------------------------

    /// The answer to an operation on a cache this node does not have: refused for good if
    /// the cluster removed it, else `NotOwner`, which the sender retries — the cache was
    /// created where the request came from, and this node has yet to apply its definition.
    fn no_cache(&self, cache: &str) -> Response {
        if self.removed.lock().contains(cache) {
            Response::Error(format!("no cache `{cache}`"))
        } else {
            Response::NotOwner { owner: None }
        }
    }

    /// A page of `segment` for a new owner in `rebalance`: sent only as the segment's
    /// primary, once this member installed that rebalance — it waits for that, up to
    /// [`FETCH_WAIT_MAX`] (see `placement::FetchAnswer` for why no write can be missed then).
    async fn answer_fetch(
        &self,
        cache: &str,
        segment: u32,
        rebalance: u32,
        after: Option<&[u8]>,
        limit: u32,
    ) -> Response {
        let Some(local) = self.manager.cache(cache) else {
            return Response::Error(format!("no cache `{cache}`"));
        };
        let me = MemberId(self.me.name.clone());
        let waiting_since = Instant::now();
        loop {
            let route = self.routing.cache(cache);
            match weft_cluster::placement::fetch_answer(route.as_deref(), &me, segment, rebalance) {
                FetchAnswer::Serve => break,
                FetchAnswer::Wait if waiting_since.elapsed() < FETCH_WAIT_MAX => {
                    tokio::time::sleep(FETCH_WAIT_POLL).await;
                }
                FetchAnswer::Wait => {
                    return Response::Error(format!(
                        "rebalance {rebalance} of `{cache}` is not installed here yet"
                    ));
                }
                FetchAnswer::Stale => {
                    return Response::Error(format!(
                        "rebalance {rebalance} of `{cache}` was replaced by a newer one"
                    ));
                }
                FetchAnswer::NotPrimary => {
                    let owner = route
                        .as_deref()
                        .and_then(|route| route.segment(segment))
                        .and_then(|owners| owners.write.first().cloned());
                    return Response::NotOwner { owner };
                }
            }
        }
        // A page ends at `limit` entries or past `BATCH_BYTES_MAX` bytes, whichever comes
        // first, so that it always fits a frame the asker accepts.
        let (page, last) = local.segment_page_unadmitted(segment, after, limit as usize);
        let mut entries = Vec::with_capacity(page.len());
        let mut bytes = 0;
        for entry in &page {
            if bytes >= weft_cluster::wire::BATCH_BYTES_MAX {
                return Response::Entries {
                    entries,
                    done: false,
                };
            }
            let image = EntryImage::of(entry);
            bytes += weft_cluster::wire::image_bytes(&image);
            entries.push(image);
        }
        Response::Entries {
            entries,
            done: last,
        }
    }

    /// Stores merged entries of `segment` as their primary, each unless the key holds the
    /// same or a newer version; the backups get what changed.
    async fn answer_reconcile(
        &self,
        cache: &str,
        segment: u32,
        entries: Vec<EntryImage>,
        how: MergeHow,
    ) -> Response {
        let Some(local) = self.manager.cache(cache) else {
            return Response::Error(format!("no cache `{cache}`"));
        };
        let admitted = self.admitted.load(std::sync::atomic::Ordering::SeqCst);
        if !admitted || self.routing.cache(cache).is_none() {
            // No topology here yet: this node could not pass the entries to the backups.
            return Response::NotOwner { owner: None };
        }
        if let super::routing::Route::Remote(owner, _) = self.routing.write_route(cache, segment) {
            return Response::NotOwner { owner: Some(owner) };
        }
        let (applied, durability) = weft_core::collect_durability(|| {
            for image in &entries {
                let entry = image.to_entry().map_err(|error| error.to_string())?;
                match how {
                    MergeHow::Newest => {}
                    MergeHow::IfAbsent => {
                        if local
                            .get_entry(&image.key)
                            .map_err(|e| e.to_string())?
                            .is_none()
                        {
                            local
                                .apply_remote(&image.key, RemoteChange::Put(entry))
                                .map_err(|error| error.to_string())?;
                        }
                        continue;
                    }
                    MergeHow::RemoveIfDifferent => {
                        let current = local.get_entry(&image.key).map_err(|e| e.to_string())?;
                        if current.is_none_or(|current| current.value() != entry.value()) {
                            local
                                .apply_remote(&image.key, RemoteChange::Remove)
                                .map_err(|error| error.to_string())?;
                        }
                        continue;
                    }
                }
                let changed = local
                    .apply_remote(&image.key, RemoteChange::PutIfNewer(entry))
                    .map_err(|error| error.to_string())?;
                if !changed {
                    // This node's copy is as new: it goes to the backups again, one of
                    // which may be new to the segment (the hash moved it) and lack it.
                    let current = local.get_entry(&image.key).map_err(|e| e.to_string())?;
                    if let Some(current) = current {
                        local
                            .apply_remote(&image.key, RemoteChange::Put(current))
                            .map_err(|error| error.to_string())?;
                    }
                }
            }
            Ok::<(), String>(())
        });
        match (applied, durability.wait().await) {
            (Ok(()), Ok(())) => Response::Ok,
            (Err(reason), _) => Response::Error(reason),
            (_, Err(error)) => Response::Error(error.to_string()),
        }
    }

    /// A page of a segment this node reads now; `NotOwner` if it does not.
    fn answer_page(&self, cache: &str, segment: u32, after: Option<&[u8]>, limit: u32) -> Response {
        let Some(local) = self.manager.cache(cache) else {
            return Response::Error(format!("no cache `{cache}`"));
        };
        if self.routing.cache(cache).is_none() {
            return Response::NotOwner { owner: None };
        }
        if let super::routing::Route::Remote(owner, _) = self.routing.read_route(cache, segment) {
            return Response::NotOwner { owner: Some(owner) };
        }
        let limit = super::iteration::page_limit(&local, segment, limit);
        match local.segment_page(segment, after, limit) {
            Ok((entries, done)) => Response::Entries {
                entries: entries.iter().map(EntryImage::of).collect(),
                done,
            },
            Err(error) => Response::Error(error.to_string()),
        }
    }

    /// Sends `request` to the member at `to` and waits for its answer.
    pub(crate) async fn call(
        &self,
        to: SocketAddr,
        request: Request,
    ) -> Result<Response, super::transport::TransportError> {
        self.transport.call(to, request, CALL_TIMEOUT).await
    }

    /// Runs an operation another member sent here as the key's owner, now (operations sent
    /// over one connection apply in the order sent), and returns the future of its answer:
    /// ready once the write it made (if any) is as replicated and durable as the cache
    /// promises. A read of a segment this member does not read in its topology, and a write
    /// of one whose writes it does not order, are refused as `NotOwner`: the sender routed
    /// by a topology that changed since, and retries.
    fn execute_now(
        &self,
        cache: &str,
        operation: &Operation,
        owner_down: bool,
    ) -> BoxFuture<Response> {
        let ready = |response| -> BoxFuture<Response> { Box::pin(std::future::ready(response)) };
        let Some(local) = self.manager.cache(cache) else {
            return ready(self.no_cache(cache));
        };
        if self.routing.is_leaving() {
            // Leaving: the others may already have moved the key's writes to its next
            // primary, so this member's copy may be behind; the sender routes it again.
            return ready(Response::NotOwner { owner: None });
        }
        if !operation.is_write() {
            let segment = local.segment_of(operation.key());
            // A read whose sender could not reach the primary may be answered by any member
            // that reads the segment in this phase: a sync write is acknowledged only once
            // every owner applied it, and every reader is an owner that holds the segment
            // (not a new owner still fetching it, which is a write owner already).
            let owns = owner_down
                && self.routing.cache(cache).is_some_and(|route| {
                    route
                        .segment(segment)
                        .is_some_and(|owners| owners.read.contains(self.routing.local()))
                });
            if !owns && self.routing.read_route(cache, segment) != super::routing::Route::Local {
                return ready(Response::NotOwner { owner: None });
            }
        }
        let (outcome, durability) = weft_core::collect_durability(|| {
            weft_cluster::operation::execute(operation, &local, &self.functions)
        });
        let refused = |refusal: Refusal| match refusal {
            Refusal::NotOwner => Response::NotOwner { owner: None },
            refusal => Response::Refused(refusal),
        };
        match outcome {
            Err(failure) => ready(refused(weft_cluster::operation::refusal(&failure))),
            Ok(outcome) => Box::pin(async move {
                match durability.wait().await {
                    Ok(()) => Response::Outcome(outcome),
                    Err(error) => refused(Refusal::of(&error.into())),
                }
            }),
        }
    }
}

/// Runs every future concurrently; their outputs in order (a future that panicked is left
/// out).
async fn futures_join<F>(futures: Vec<F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut outputs = Vec::with_capacity(handles.len());
    for handle in handles {
        if let Ok(output) = handle.await {
            outputs.push(output);
        }
    }
    outputs
}

/// What the engine asks of this node's own data.
struct Held<'a>(&'a CacheManager);

impl engine::Local for Held<'_> {
    fn has_cache(&self, cache: &str) -> bool {
        self.0.cache(cache).is_some()
    }

    fn holds_entries(&self, cache: &str) -> bool {
        self.0.cache(cache).is_some_and(|local| local.size() > 0)
    }
}

fn basic(node: &NodeRecord) -> BasicNode {
    BasicNode::new(node.cluster_addr.to_string())
}

/// The requests other nodes send, answered by this node.
#[derive(Debug)]
pub struct NodeHandler {
    node: OnceLock<Arc<Node>>,
}

impl NodeHandler {
    /// A handler that answers once [`NodeHandler::attach`] gave it the node.
    #[must_use]
    pub fn new() -> Self {
        Self {
            node: OnceLock::new(),
        }
    }

    /// The node requests are for.
    pub fn attach(&self, node: Arc<Node>) {
        let _ = self.node.set(node);
    }
}

impl Default for NodeHandler {
    fn default() -> Self {
        Self::new()
    }
}

impl Handler for NodeHandler {
    fn handle(&self, from: &Identity, request: Request) -> BoxFuture<Response> {
        let Some(node) = self.node.get().cloned() else {
            return Box::pin(async { Response::Error("node starting".to_owned()) });
        };
        let request = match request {
            Request::Execute { .. } if !node.is_admitted() => {
                // This process serves nothing keyed before the cluster admitted it: what
                // reaches it was meant for its predecessor, or routed by a stale topology.
                return Box::pin(std::future::ready(Response::NotOwner { owner: None }));
            }
            Request::Execute {
                cache,
                operation,
                owner_down,
            } => return node.execute_now(&cache, &operation, owner_down),
            // Delivered now, in arrival order: events and messages from one member reach the
            // listeners and handlers in the order it sent them.
            Request::Events { cache, events } => {
                let response = crate::events::Events::deliver(&node, &cache, events);
                return Box::pin(std::future::ready(response));
            }
            Request::Messages { topic, payloads } => {
                let response = node.events.receive(&topic, &payloads);
                return Box::pin(std::future::ready(response));
            }
            other => other,
        };
        let from = from.clone();
        Box::pin(async move {
            match request {
                Request::Hello(_) => {
                    let initialized = node
                        .raft
                        .metrics()
                        .borrow()
                        .membership_config
                        .membership()
                        .voter_ids()
                        .next()
                        .is_some();
                    Response::Hello {
                        node: node.me.clone(),
                        initialized,
                    }
                }
                // Meant for the member that listened here before this process: unreachable.
                Request::Raft(_, to, _) if to != node.me.raft_id => {
                    Response::Error(format!("consensus member {to} is not here"))
                }
                Request::Raft(kind, _, body) => raft::answer(&node.raft, kind, &body).await,
                Request::Leave { name, raft_id } => match node.release(&name, raft_id).await {
                    Ok(()) => Response::Ok,
                    Err(error) => Response::Error(error.to_string()),
                },
                Request::Propose(body) => match serde_json::from_slice::<Command>(&body) {
                    Ok(command) => match node.raft.client_write(command).await {
                        Ok(written) => match serde_json::to_vec(&written.data) {
                            Ok(body) => Response::Raft(body),
                            Err(error) => Response::Error(error.to_string()),
                        },
                        Err(error) => Response::Error(error.to_string()),
                    },
                    Err(error) => Response::Error(error.to_string()),
                },
                Request::Replicate {
                    stream,
                    restart,
                    replicas,
                } => apply(&node, &from, stream, restart, replicas),
                Request::Execute { .. } => Response::Error("executed twice".to_owned()),
                Request::Fetch {
                    cache,
                    segment,
                    rebalance,
                    after,
                    limit,
                } => {
                    node.answer_fetch(&cache, segment, rebalance, after.as_deref(), limit)
                        .await
                }
                Request::Size { cache, segments } => match node.manager.cache(&cache) {
                    Some(local) => Response::Count(
                        segments
                            .iter()
                            .map(|&segment| local.segment_size(segment) as u64)
                            .sum(),
                    ),
                    None => Response::Error(format!("no cache `{cache}`")),
                },
                Request::TopologyId { cache } => match node.routing.cache(&cache) {
                    Some(route) => Response::Count(u64::from(route.topology.id())),
                    None => Response::Error(format!("no topology for `{cache}`")),
                },
                Request::Remove { cache, key } => match node.manager.cache(&cache) {
                    Some(local) => {
                        let (removed, durability) =
                            weft_core::collect_durability(|| local.delete(&key));
                        match (removed, durability.wait().await) {
                            (Ok(_), Ok(())) => Response::Ok,
                            (Err(error), _) => Response::Error(error.to_string()),
                            (_, Err(error)) => Response::Error(error.to_string()),
                        }
                    }
                    None => Response::Error(format!("no cache `{cache}`")),
                },
                Request::Clear { cache } => match node.manager.cache(&cache) {
                    Some(local) => match local.clear() {
                        Ok(()) => Response::Ok,
                        Err(error) => Response::Error(error.to_string()),
                    },
                    None => Response::Error(format!("no cache `{cache}`")),
                },
                Request::Page {
                    cache,
                    segment,
                    after,
                    limit,
                } => node.answer_page(&cache, segment, after.as_deref(), limit),
                Request::Reconcile {
                    cache,
                    segment,
                    entries,
                    how,
                } => node.answer_reconcile(&cache, segment, entries, how).await,
                Request::PutEntries {
                    cache,
                    entries,
                    lifespan,
                    max_idle,
                    flags,
                    skip_listeners,
                } => match node.manager.cache(&cache) {
                    Some(local) => {
                        let options = weft_core::WriteOptions {
                            expiry: weft_core::Expiry {
                                lifespan: super::multi::from_wire(lifespan),
                                max_idle: super::multi::from_wire(max_idle),
                            },
                            ignore_return_values: true,
                            skip_listeners,
                            user_flags: flags,
                        };
                        node.answer_put_entries(&local, entries, options).await
                    }
                    None => node.no_cache(&cache),
                },
                Request::GetEntries { cache, keys } => match node.manager.cache(&cache) {
                    Some(local) => node.answer_get_entries(&local, keys).await,
                    None => node.no_cache(&cache),
                },
                Request::Interest { caches } => {
                    node.events
                        .interest(&node, MemberId(from.name.clone()), caches);
                    Response::Ok
                }
                Request::Events { .. } | Request::Messages { .. } => {
                    Response::Error("delivered twice".to_owned())
                }
                Request::Keys { cache, segments } => match node.manager.cache(&cache) {
                    Some(local) => Response::Keys(
                        local
                            .iter_segments(segments)
                            .map(|entry| entry.key().to_vec())
                            .collect(),
                    ),
                    None => Response::Error(format!("no cache `{cache}`")),
                },
            }
        })
    }

    fn apply(
        &self,
        from: &Identity,
        stream: u64,
        restart: bool,
        replicas: Vec<(u64, Arc<Replica>)>,
    ) -> Response {
        match self.node.get() {
            Some(node) => apply(node, from, stream, restart, replicas),
            None => Response::Error("node starting".to_owned()),
        }
    }
}

/// The cache a replicated change names, and its route, as looked up for the change before.
type LookedUp = (
    Arc<Replica>,
    Option<weft_core::Cache>,
    Option<Arc<CacheRoute>>,
);

/// Where a sender's replication stream to this node is: the last change applied, and the
/// change refused (later batches are refused too until the sender starts again from there).
#[derive(Debug, Clone, Copy, Default)]
struct InboundStream {
    last_applied: u64,
    refused_at: Option<u64>,
    used: Option<Instant>,
}

/// Inbound streams kept per sender: ones unused this long are forgotten.
const INBOUND_STREAM_IDLE: Duration = Duration::from_secs(600);

/// Applies changes a primary replicated here, in order — only those `from` sent as the
/// primary of their segment, in this node's topology, in the incarnation the agreed members
/// name: a process restarted under a primary's name, or a primary whose topology is stale,
/// writes nothing here. The first refused change stops the batch (what came before it is
/// applied), and every later batch of the stream is refused until the sender starts again
/// from the first change not acknowledged: an acknowledged batch never covers a refused
/// change, and no change is applied after one that was refused. The sender sends the rest
/// again, or drops what it no longer orders.
fn apply(
    node: &Node,
    from: &Identity,
    stream: u64,
    restart: bool,
    replicas: Vec<(u64, Arc<Replica>)>,
) -> Response {
    let key = (from.name.clone(), from.incarnation, stream);
    let now = Instant::now();
    // One stream's batches arrive on one connection, one after the other: its state is
    // taken out while they apply, so that other senders' streams are not held up.
    let mut state = {
        let mut streams = node.inbound.lock();
        if !streams.contains_key(&key) {
            streams.retain(|_, state| {
                state
                    .used
                    .is_some_and(|used| now.duration_since(used) < INBOUND_STREAM_IDLE)
            });
        }
        streams.get(&key).copied().unwrap_or_default()
    };
    state.used = Some(now);
    if restart {
        state.refused_at = None;
    }
    let first = replicas.first().map_or(0, |(sequence, _)| *sequence);
    let response = if state.refused_at.is_some_and(|refused| first > refused) {
        // Sent before the sender learned of the refusal: it comes again after the change
        // that was refused.
        Response::NotOwner { owner: None }
    } else {
        apply_in_order(node, from, &mut state, replicas)
    };
    node.inbound.lock().insert(key, state);
    response
}

fn apply_in_order(
    node: &Node,
    from: &Identity,
    state: &mut InboundStream,
    replicas: Vec<(u64, Arc<Replica>)>,
) -> Response {
    let first = replicas
        .iter()
        .map(|(sequence, _)| *sequence)
        .find(|sequence| *sequence > state.last_applied);
    let Some(first) = first else {
        // Everything here was applied before (a resend).
        return Response::Applied;
    };
    if !node.is_admitted() {
        // Meant for this node's predecessor, or sent before this node saw its admission (and
        // emptied what it stored before): the primary sends them again.
        state.refused_at = Some(first);
        return Response::NotOwner { owner: None };
    }
    let sender = MemberId(from.name.clone());
    if node
        .routing
        .node(&sender)
        .is_none_or(|record| record.raft_id != from.incarnation)
    {
        state.refused_at = Some(first);
        return Response::NotOwner { owner: None };
    }
    // A batch's changes are mostly of one cache: it and its route are looked up once.
    let mut looked_up: Option<LookedUp> = None;
    for (sequence, replica) in replicas {
        if sequence <= state.last_applied {
            continue;
        }
        let refuse = |state: &mut InboundStream, response: Response| {
            state.refused_at = Some(sequence);
            response
        };
        if looked_up
            .as_ref()
            .is_none_or(|(last, _, _)| last.cache != replica.cache)
        {
            looked_up = Some((
                Arc::clone(&replica),
                node.manager.cache(&replica.cache),
                node.routing.cache(&replica.cache),
            ));
        }
        let Some((_, cache, route)) = &looked_up else {
            continue;
        };
        let Some(cache) = cache else {
            if node.removed.lock().contains(&*replica.cache) {
                // Removed here as the cluster agreed: its changes have nowhere to go.
                state.last_applied = sequence;
                continue;
            }
            // Defined, and written at its primary, before this node applied the definition:
            // the primary sends the change again once this node has the cache. Dropped, it
            // would leave this backup without a write the primary acknowledged.
            return refuse(state, Response::NotOwner { owner: None });
        };
        let Some(route) = route else {
            return refuse(state, Response::NotOwner { owner: None });
        };
        let primary = route
            .segment(replica.segment)
            .and_then(|owners| owners.write.first());
        if primary != Some(&sender) {
            let owner = primary.cloned();
            return refuse(state, Response::NotOwner { owner });
        }
        {
            // Empty but while segments move: no lookup key is built for it otherwise.
            let mut touched = node.touched.lock();
            if !touched.is_empty()
                && let Some(fetches) =
                    touched.get_mut(&(replica.cache.to_string(), replica.segment))
            {
                for (_, keys) in fetches {
                    keys.insert(replica.key.clone());
                }
            }
        }
        let change = match &replica.entry {
            Some(image) => match image.to_entry() {
                Ok(entry) => RemoteChange::Put(entry),
                Err(error) => return refuse(state, Response::Error(error.to_string())),
            },
            None => RemoteChange::Remove,
        };
        if let Err(error) = applying_remote(|| cache.apply_remote(&replica.key, change)) {
            return refuse(state, Response::Error(error.to_string()));
        }
        state.last_applied = sequence;
    }
    state.refused_at = None;
    Response::Applied
}
